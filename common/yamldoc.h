// yamldoc: the one YAML reader of cgq, for the spec (spec.c), the daemons'
// config files (config.c) and runner.yaml (device-runner/runcfg.c).
//
// libyaml's event parser feeds a small tree of our own (cgq_yamldoc_node_t, with
// the marks every message needs), never its document loader: the loader reads
// the whole text before we can look at it, and its scanner does work
// proportional to the flow nesting for every token, so a 160 KB "[[[[..."
// stalled a coordinator for half a minute. Building the tree ourselves lets
// the size, NUL and depth limits stop the parse the moment they are reached,
// and keeps all other work linear in the text.
//
// Every error is one line, FILE:LINE:COL: what is wrong (what to write), and
// only the first is kept: the reader's own, and the ones its callers report
// through cgq_yamldoc_fail about the values they read.
//
// (Not yaml.h: that name is libyaml's, and common/ is on every include path.)
//
//   char err[512];
//   cgq_yamldoc_t *y = cgq_yamldoc_new ("runner.yaml", "runner file", err, sizeof err);
//   const cgq_yamldoc_node_t *root;
//   if (cgq_yamldoc_load (y, text, len, 0, NULL, &root) == 0 && root) ... walk it ...
//   cgq_yamldoc_destroy (&y);
#ifndef CGQ_YAMLDOC_H
#define CGQ_YAMLDOC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

// The default limit of a text (cgq_yamldoc_load's max_bytes 0), 1 MiB. A config
// or runner file is a page or two; a spec has its own, settable limit.
#define CGQ_YAMLDOC_MAX_BYTES (1024 * 1024)
// Collections nested deeper than this are refused as they open: a deeper text
// is a mistake or an attack on the parser.
#define CGQ_YAMLDOC_MAX_DEPTH 64
// The most nodes cgq_yamldoc_to_json visits over one document: an alias bomb
// (&a [*b, *b, ...]) is a small text with a huge value.
#define CGQ_YAMLDOC_MAX_NODES 200000

typedef enum { CGQ_YAMLDOC_SCALAR, CGQ_YAMLDOC_SEQ, CGQ_YAMLDOC_MAP } cgq_yamldoc_type_t;

// One node of the document as written. An alias is not a node: the collection
// that holds it refers to the anchored node's id, as libyaml's own document
// does, so an alias may lead back into its own anchor. Owned by the reader,
// read-only, valid until cgq_yamldoc_destroy.
typedef struct {
    cgq_yamldoc_type_t type;
    bool plain;      // scalar written without quotes or |, >: YAML 1.1 typing applies
    bool quoted;     // scalar written in '...' or "...": its text starts one column in
    int line, col;   // 1-based, where the node starts
    int eline, ecol; // scalar: 1-based, just past its end
    char *text;      // scalar: its text, NUL-terminated (a \0 escape may hold more)
    size_t len;      // scalar: bytes of text; collection: number of kids
    uint32_t *kids;  // collection: node ids; a mapping's are key, value, key, value, ...
} cgq_yamldoc_node_t;

typedef enum {
    CGQ_YAMLDOC_NULL,
    CGQ_YAMLDOC_BOOL,
    CGQ_YAMLDOC_INT,
    CGQ_YAMLDOC_REAL,
    CGQ_YAMLDOC_STR
} cgq_yamldoc_kind_t;

// The YAML 1.1 reading of one scalar (cgq_yamldoc_resolve).
typedef struct {
    cgq_yamldoc_kind_t kind;
    bool b;
    long long i; // INT
    double d;    // INT (as a double) and REAL
} cgq_yamldoc_scalar_t;

typedef struct cgq_yamldoc_s cgq_yamldoc_t;

// cgq_yamldoc_new makes a reader of one text. path names it in messages ("spec"
// if NULL; copied); noun is what the text is, for the reader's own messages
// ("spec", "config file", "runner file"; borrowed, a literal). err/errlen
// (either may be 0) receive the first error; borrowed until destroy.
cgq_yamldoc_t *cgq_yamldoc_new (const char *path, const char *noun, char *err, size_t errlen);

// cgq_yamldoc_destroy frees the reader and its tree; accepts NULL, NULLs *self_p.
void cgq_yamldoc_destroy (cgq_yamldoc_t **self_p);

// cgq_yamldoc_load reads the first document of text (len bytes, borrowed until
// destroy) into the tree and sets *root to its top node, or to NULL for a text
// without a document (empty, or comments only). The text is refused before
// libyaml sees it if it is longer than max_bytes (0: CGQ_YAMLDOC_MAX_BYTES;
// size_hint says what to do about it, NULL: a generic hint) or holds a NUL
// byte; a collection that opens deeper than CGQ_YAMLDOC_MAX_DEPTH stops the
// parse there. Also refused: unknown aliases, duplicate anchors, YAML syntax
// errors (with a hint about tabs). Returns 0, or -1 with the error set.
int cgq_yamldoc_load (cgq_yamldoc_t *self, const char *text, size_t len, size_t max_bytes,
                      const char *size_hint, const cgq_yamldoc_node_t **root);

// cgq_yamldoc_end refuses a second document after the one cgq_yamldoc_load read,
// which would otherwise be ignored silently, reading no further than its
// first node. Returns 0, or -1 with the error set.
int cgq_yamldoc_end (cgq_yamldoc_t *self);

// cgq_yamldoc_fail reports "PATH:LINE:COL: MESSAGE" at node at (1:1 if NULL);
// cgq_yamldoc_fail_at at line and col. Only the first error of a reader is kept:
// later ones, which usually follow from it, would only add noise. Return -1.
int cgq_yamldoc_fail (cgq_yamldoc_t *self, const cgq_yamldoc_node_t *at, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
int cgq_yamldoc_fail_at (cgq_yamldoc_t *self, int line, int col, const char *fmt, ...)
    __attribute__ ((format (printf, 4, 5)));

// cgq_yamldoc_failed is true once an error was reported.
bool cgq_yamldoc_failed (const cgq_yamldoc_t *self);

// The tree. Ids come from a collection's kids; i must be below npairs/nitems.
const cgq_yamldoc_node_t *cgq_yamldoc_node (const cgq_yamldoc_t *self, uint32_t id);
size_t cgq_yamldoc_npairs (const cgq_yamldoc_node_t *map);
const cgq_yamldoc_node_t *cgq_yamldoc_key (const cgq_yamldoc_t *self, const cgq_yamldoc_node_t *map,
                                           size_t i);
const cgq_yamldoc_node_t *cgq_yamldoc_val (const cgq_yamldoc_t *self, const cgq_yamldoc_node_t *map,
                                           size_t i);
size_t cgq_yamldoc_nitems (const cgq_yamldoc_node_t *seq);
const cgq_yamldoc_node_t *cgq_yamldoc_item (const cgq_yamldoc_t *self,
                                            const cgq_yamldoc_node_t *seq, size_t i);
// cgq_yamldoc_text is a scalar's text (borrowed, as the node).
const char *cgq_yamldoc_text (const cgq_yamldoc_node_t *n);

// cgq_yamldoc_resolve reads a scalar the YAML 1.1 way: null, booleans
// (yes/no/on/off too), integers (0x, 0o, 0b, '_'), reals (1e-4 too); anything
// quoted, or text with a NUL, is a string.
void cgq_yamldoc_resolve (const cgq_yamldoc_node_t *n, cgq_yamldoc_scalar_t *out);

// cgq_yamldoc_is_null is true for a plain scalar that reads as null ("", ~, null).
bool cgq_yamldoc_is_null (const cgq_yamldoc_node_t *n);

// cgq_yamldoc_what describes a node for "must be X, not Y" messages: "a
// mapping", "the integer 3", "the string 'abc'"; written into buf when it
// needs to be.
const char *cgq_yamldoc_what (const cgq_yamldoc_node_t *n, char *buf, size_t len);

// cgq_yamldoc_check_keys refuses non-scalar and duplicate keys of a mapping.
int cgq_yamldoc_check_keys (cgq_yamldoc_t *self, const cgq_yamldoc_node_t *map);

// cgq_yamldoc_expect_map refuses v unless it is a mapping with sound keys:
// "WHAT must be a mapping, not ... (HINT)".
int cgq_yamldoc_expect_map (cgq_yamldoc_t *self, const cgq_yamldoc_node_t *v, const char *what,
                            const char *hint);

// cgq_yamldoc_unknown_key reports key k of where: "unknown key 'K' in WHERE
// (known keys: KNOWN)", and "; did you mean 'X'?" when one of known (a
// comma-separated list) is a likely typo of it. Returns -1.
int cgq_yamldoc_unknown_key (cgq_yamldoc_t *self, const cgq_yamldoc_node_t *k, const char *where,
                             const char *known);

// cgq_yamldoc_suggest returns the word of known (comma- or space-separated) that
// word most likely misspells, copied into buf, or NULL if none is close: at
// most one edit (insert, delete, change, swap of neighbours) per three
// letters of word.
const char *cgq_yamldoc_suggest (const char *word, const char *known, char *buf, size_t len);

// The value readers: each checks v, stores into *out and returns 0, or
// reports "WHAT must be ..., not ... (HINT)" at v and returns -1.
// cgq_yamldoc_get_int: an integer in [min, max].
int cgq_yamldoc_get_int (cgq_yamldoc_t *self, const cgq_yamldoc_node_t *v, const char *what,
                         long long min, long long max, const char *hint, long long *out);
// cgq_yamldoc_get_number: an integer or a real.
int cgq_yamldoc_get_number (cgq_yamldoc_t *self, const cgq_yamldoc_node_t *v, const char *what,
                            const char *hint, double *out);
// cgq_yamldoc_get_bool: a boolean (true/false, and YAML 1.1's yes/no/on/off).
int cgq_yamldoc_get_bool (cgq_yamldoc_t *self, const cgq_yamldoc_node_t *v, const char *what,
                          const char *hint, bool *out);
// cgq_yamldoc_get_text: the text of a scalar that is not null and holds no NUL
// (any YAML type: a command or a name is text whatever it looks like);
// borrowed, as the node.
int cgq_yamldoc_get_text (cgq_yamldoc_t *self, const cgq_yamldoc_node_t *v, const char *what,
                          const char *hint, const char **out);

// cgq_yamldoc_to_json converts a value to JSON (caller decrefs), scalars typed
// as cgq_yamldoc_resolve reads them, or returns NULL with the error set: nested
// more than CGQ_YAMLDOC_MAX_DEPTH deep through aliases, more than
// CGQ_YAMLDOC_MAX_NODES nodes in all the calls on one reader, a duplicate key,
// text that is not UTF-8 or holds a NUL.
json_t *cgq_yamldoc_to_json (cgq_yamldoc_t *self, const cgq_yamldoc_node_t *n);

// cgq_yamldoc_read_file appends at most max + 1 bytes of the file at path to out
// (one byte past the limit is enough for cgq_yamldoc_load to refuse it), so a
// huge file is never read whole. Returns 0, or -1 with errno set.
int cgq_yamldoc_read_file (const char *path, size_t max, cgq_buf_t *out);

#endif
