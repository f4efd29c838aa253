// ckpt_store: the transport below a checkpoint store (ckpt.h seals and
// restores on top of it). A store is either a directory (a path) or an
// HTTP(S) store (a URL, "http://host:port/prefix"): put a file or bytes at a
// location, get one (streamed, sha256 and size counted as it comes), delete
// one. ckpt.c keeps its own faster way of sealing into a directory (rename,
// fsyncs); over HTTP it puts every file and then the manifest, last: a
// checkpoint exists only once its manifest is there.
//
// HTTP: libcurl easy handles, one per request (the sealer thread is the only
// caller); a connect timeout, a stall limit (no byte for the stall time
// ends a transfer), bounded retries with doubling pauses for what may pass
// (no connection, a timeout, a dropped connection, 5xx but 507, 429). A
// full store (507, 413) or a refusal (another 4xx) is not retried: the error
// says so. An optional bearer token (cgq_ckpt_store_setup) goes in an
// Authorization header; it is never logged or put in an error.
#ifndef CGQ_CKPT_STORE_H
#define CGQ_CKPT_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

typedef struct {
    const char *token;        // bearer token, or NULL (copied)
    double connect_timeout_s; // 0: 10 s
    double stall_s;           // no byte for this long ends a transfer; 0: 30 s
    uint32_t retries;         // extra attempts after a transient failure; (uint32_t) -1: 3
    uint32_t retry_base_ms;   // first pause, doubled each time; 0: 250 ms
    const char
        *ca_file; // https: the CA certificates to trust (PEM), or NULL: the system's (copied)
} cgq_ckpt_store_opts_t;

// cgq_ckpt_store_abort, when it points at a flag that becomes true, makes a
// transfer in progress stop soon with an error (the worker shuts down). Set
// once before any thread runs; NULL: never.
extern volatile const bool *cgq_ckpt_store_abort;

// The largest manifest read back (~600,000 files).
#define CGQ_CKPT_STORE_MAX_MANIFEST (64u << 20)

// cgq_ckpt_store_trial is STORE/job-J/trial-T (one '/' between). Caller frees.
char *cgq_ckpt_store_trial (const char *store, uint64_t job, uint64_t trial);

// cgq_ckpt_store_parse_name reads "ckpt-A-N" exactly as cgq writes it (not a
// .tmp). false if not one.
bool cgq_ckpt_store_parse_name (const char *name, uint32_t *attempt, uint64_t *n);

// cgq_ckpt_store_setup sets the HTTP options for the process (call once,
// before the sealer thread runs; again in tests). NULL: the defaults.
void cgq_ckpt_store_setup (const cgq_ckpt_store_opts_t *opts);

// cgq_ckpt_store_token_load reads a token: the environment variable env if
// set and non-empty, else the first line of file (if file is given).
// Returns a copy (caller frees), NULL with *err filled if file cannot be
// read, or NULL with err empty when there is none.
char *cgq_ckpt_store_token_load (const char *env, const char *file, char *err, size_t errlen);

// cgq_ckpt_store_is_url: an HTTP(S) store ("http://", "https://").
bool cgq_ckpt_store_is_url (const char *store);

// cgq_ckpt_store_valid_url checks a store URL: http or https, a host, no
// query, fragment, user or password. false with a reason in why.
bool cgq_ckpt_store_valid_url (const char *url, char *why, size_t whylen);

// cgq_ckpt_store_join is base + "/" + rel, rel's characters escaped for a
// URL when base is one (its '/' kept). Caller frees.
char *cgq_ckpt_store_join (const char *base, const char *rel);

// cgq_ckpt_store_put_file stores the local file at loc. 0, or -1 with err.
int cgq_ckpt_store_put_file (const char *loc, const char *local, char *err, size_t errlen);

// cgq_ckpt_store_put_mem stores len bytes at loc. 0, or -1 with err.
int cgq_ckpt_store_put_mem (const char *loc, const void *data, size_t len, char *err,
                            size_t errlen);

// cgq_ckpt_store_get_mem reads loc into out (appended), at most max bytes
// (more is an error). 0, or -1 with err.
int cgq_ckpt_store_get_mem (const char *loc, uint64_t max, cgq_buf_t *out, char *err,
                            size_t errlen);

// cgq_ckpt_store_get_file copies loc into the new file local (mode 0600),
// hashing it: hex (65 bytes) and *size. More than max bytes stops it (an
// error). On failure local is removed. 0, or -1 with err.
int cgq_ckpt_store_get_file (const char *loc, const char *local, uint64_t max, char *hex,
                             uint64_t *size, char *err, size_t errlen);

// cgq_ckpt_store_delete removes loc (a directory store: the tree; HTTP: one
// DELETE). Absent already is success. 0, or -1 with err.
int cgq_ckpt_store_delete (const char *loc, char *err, size_t errlen);

// cgq_ckpt_store_delete_checkpoint removes the sealed checkpoint at path: a
// directory (renamed to .gone-NAME, then removed), or a URL (its manifest
// first, then the files it names). Absent already is success. 0, or -1 with
// err.
int cgq_ckpt_store_delete_checkpoint (const char *path, char *err, size_t errlen);

// A checkpoint's manifest: CGQ_CKPT_MAGIC, then one line per file,
// "SHA256 SIZE PATH" (what sha256sum prints, with the size). The seal
// (worker/ckpt.c) writes it; the restore and the deletions read it.
#define CGQ_CKPT_MAGIC "cgq-checkpoint 1\n"

// cgq_ckpt_manifest_line parses one manifest line (its '\n' already cut):
// want gets the sha256 (64 hex digits and a 0), *size the size, *rel the
// path within the line, relative and without "." or ".." parts. False when
// the line is malformed or its path unsafe.
bool cgq_ckpt_manifest_line (const char *line, char want[65], uint64_t *size, const char **rel);

#endif
