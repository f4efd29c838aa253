// yamldoc: the one YAML reader (see yamldoc.h for why it reads events, not
// libyaml's document). The tree is built in one pass over the events, every
// limit checked on the event that crosses it, before libyaml reads on:
// libyaml then has looked at most CGQ_YAMLDOC_MAX_DEPTH levels (and ~1 KB of
// lookahead) deep.
#include "yamldoc.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

// An open collection while the tree is built: the ids of its kids so far.
typedef struct {
    uint32_t node;
    uint32_t *kids;
    size_t n, cap;
} s_frame_t;

struct cgq_yamldoc_s {
    char *path;       // for messages (owned)
    const char *noun; // "spec", "config file", ...: what the text is
    char *err;        // the caller's buffer, or NULL
    size_t errlen;
    bool failed;
    cgq_yamldoc_node_t *nodes; // the tree; ids index it
    size_t nnodes, cap;
    size_t budget;                 // nodes that cgq_yamldoc_to_json may still visit
    const cgq_yamldoc_node_t *top; // the value cgq_yamldoc_to_json was called on, for messages
    yaml_parser_t parser;
    bool parsing;     // parser initialized, over text
    const char *text; // borrowed from cgq_yamldoc_load
    size_t len;
};

static int s_vfail_at (cgq_yamldoc_t *self, int line, int col, const char *fmt, va_list ap)
    __attribute__ ((format (printf, 4, 0)));

// s_vfail_at keeps the first error only: later checks that fail because of
// the first one would only add noise.
static int
s_vfail_at (cgq_yamldoc_t *self, int line, int col, const char *fmt, va_list ap)
{
    if (self->failed)
        return -1;
    self->failed = true;
    if (!self->err || !self->errlen)
        return -1;
    char msg[768];
    vsnprintf (msg, sizeof msg, fmt, ap);
    snprintf (self->err, self->errlen, "%s:%d:%d: %s", self->path, line, col, msg);
    return -1;
}

int
cgq_yamldoc_fail_at (cgq_yamldoc_t *self, int line, int col, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    s_vfail_at (self, line, col, fmt, ap);
    va_end (ap);
    return -1;
}

int
cgq_yamldoc_fail (cgq_yamldoc_t *self, const cgq_yamldoc_node_t *at, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    s_vfail_at (self, at ? at->line : 1, at ? at->col : 1, fmt, ap);
    va_end (ap);
    return -1;
}

bool
cgq_yamldoc_failed (const cgq_yamldoc_t *self)
{
    return self->failed;
}

const cgq_yamldoc_node_t *
cgq_yamldoc_node (const cgq_yamldoc_t *self, uint32_t id)
{
    return &self->nodes[id];
}

const char *
cgq_yamldoc_text (const cgq_yamldoc_node_t *n)
{
    return n->text;
}

size_t
cgq_yamldoc_nitems (const cgq_yamldoc_node_t *seq)
{
    return seq->len;
}

const cgq_yamldoc_node_t *
cgq_yamldoc_item (const cgq_yamldoc_t *self, const cgq_yamldoc_node_t *seq, size_t i)
{
    return cgq_yamldoc_node (self, seq->kids[i]);
}

size_t
cgq_yamldoc_npairs (const cgq_yamldoc_node_t *map)
{
    return map->len / 2;
}

const cgq_yamldoc_node_t *
cgq_yamldoc_key (const cgq_yamldoc_t *self, const cgq_yamldoc_node_t *map, size_t i)
{
    return cgq_yamldoc_node (self, map->kids[2 * i]);
}

const cgq_yamldoc_node_t *
cgq_yamldoc_val (const cgq_yamldoc_t *self, const cgq_yamldoc_node_t *map, size_t i)
{
    return cgq_yamldoc_node (self, map->kids[2 * i + 1]);
}

// s_text_pos finds the line and column (1-based, in characters as libyaml
// counts them) of byte off of text.
static void
s_text_pos (const char *text, size_t len, size_t off, int *line, int *col)
{
    int l = 1, k = 1;
    for (size_t i = 0; i < off && i < len; i++) {
        if (text[i] == '\n')
            l++, k = 1;
        else if (((unsigned char)text[i] & 0xc0) != 0x80) // not a UTF-8 continuation byte
            k++;
    }
    *line = l;
    *col = k;
}

// s_copy_digits copies s without '_' separators into buf; false if too long.
static bool
s_copy_digits (const char *s, char *buf, size_t len)
{
    size_t j = 0;
    for (; *s; s++) {
        if (*s == '_')
            continue;
        if (j + 1 >= len)
            return false;
        buf[j++] = *s;
    }
    buf[j] = 0;
    return true;
}

// s_read_int reads the YAML 1.1 integer forms: decimal, 0x hex, 0o and 0NNN
// octal, 0b binary, '_' allowed between digits. Out of int64 range → false.
static bool
s_read_int (const char *s, long long *out)
{
    char buf[80];
    if (!s_copy_digits (s, buf, sizeof buf))
        return false;
    const char *p = buf;
    bool neg = false;
    if (*p == '+' || *p == '-')
        neg = *p++ == '-';
    if (!isdigit ((unsigned char)*p) || s[0] == '_' || s[strlen (s) - 1] == '_')
        return false;
    int base = 10;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
        base = 16, p += 2;
    else if (p[0] == '0' && (p[1] == 'o' || p[1] == 'O'))
        base = 8, p += 2;
    else if (p[0] == '0' && (p[1] == 'b' || p[1] == 'B'))
        base = 2, p += 2;
    else if (p[0] == '0' && p[1])
        base = 8, p += 1;
    if (!*p)
        return false;
    for (const char *q = p; *q; q++) {
        int d = isdigit ((unsigned char)*q)    ? *q - '0'
                : isxdigit ((unsigned char)*q) ? tolower ((unsigned char)*q) - 'a' + 10
                                               : 99;
        if (d >= base)
            return false;
    }
    errno = 0;
    unsigned long long v = strtoull (p, NULL, base);
    if (errno || v > (unsigned long long)LLONG_MAX + (neg ? 1 : 0))
        return false;
    *out = neg ? (long long)(0 - v) : (long long)v;
    return true;
}

// s_read_real reads [-+]?(.D+|D[D_]*(.[D_]*)?)([eE][-+]?D+)? with a '.' or an
// exponent (YAML 1.2 spelling, so 1e-4 is a number as users expect), or with
// neither when plain_ok (for integers too large for int64).
static bool
s_read_real (const char *s, bool plain_ok, double *out)
{
    const char *p = s;
    if (*p == '+' || *p == '-')
        p++;
    size_t digits = 0;
    bool dot = false, exp = false;
    if (!isdigit ((unsigned char)*p) && *p != '.')
        return false;
    while (isdigit ((unsigned char)*p) || (*p == '_' && digits))
        digits += isdigit ((unsigned char)*p++) ? 1 : 0;
    if (*p == '.') {
        dot = true;
        p++;
        while (isdigit ((unsigned char)*p) || (*p == '_' && digits))
            digits += isdigit ((unsigned char)*p++) ? 1 : 0;
    }
    if (!digits)
        return false;
    if (*p == 'e' || *p == 'E') {
        exp = true;
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (!isdigit ((unsigned char)*p))
            return false;
        while (isdigit ((unsigned char)*p))
            p++;
    }
    if (*p || !(dot || exp || plain_ok))
        return false;
    char buf[128];
    if (!s_copy_digits (s, buf, sizeof buf))
        return false;
    double v = strtod (buf, NULL);
    if (!isfinite (v))
        return false;
    *out = v;
    return true;
}

static bool
s_one_of (const char *s, const char *const *words)
{
    for (; *words; words++)
        if (!strcmp (s, *words))
            return true;
    return false;
}

void
cgq_yamldoc_resolve (const cgq_yamldoc_node_t *n, cgq_yamldoc_scalar_t *out)
{
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL", NULL};
    static const char *const trues[] = {"true", "True", "TRUE", "yes", "Yes",
                                        "YES",  "on",   "On",   "ON",  NULL};
    static const char *const falses[] = {"false", "False", "FALSE", "no",  "No",
                                         "NO",    "off",   "Off",   "OFF", NULL};
    memset (out, 0, sizeof *out);
    out->kind = CGQ_YAMLDOC_STR;
    if (!n->plain)
        return;
    const char *s = cgq_yamldoc_text (n);
    if (strlen (s) != n->len)
        return;
    if (s_one_of (s, nulls))
        out->kind = CGQ_YAMLDOC_NULL;
    else if (s_one_of (s, trues))
        out->kind = CGQ_YAMLDOC_BOOL, out->b = true;
    else if (s_one_of (s, falses))
        out->kind = CGQ_YAMLDOC_BOOL, out->b = false;
    else if (s_read_int (s, &out->i))
        out->kind = CGQ_YAMLDOC_INT, out->d = (double)out->i;
    else if (s_read_real (s, false, &out->d))
        out->kind = CGQ_YAMLDOC_REAL;
    else if (s_read_real (s, true, &out->d))
        out->kind = CGQ_YAMLDOC_REAL; // an integer beyond int64: keep its magnitude
}

bool
cgq_yamldoc_is_null (const cgq_yamldoc_node_t *n)
{
    if (!n || n->type != CGQ_YAMLDOC_SCALAR)
        return false;
    cgq_yamldoc_scalar_t v;
    cgq_yamldoc_resolve (n, &v);
    return v.kind == CGQ_YAMLDOC_NULL;
}

// cgq_yamldoc_what describes a node for "must be X, not Y" messages.
const char *
cgq_yamldoc_what (const cgq_yamldoc_node_t *n, char *buf, size_t len)
{
    if (n->type == CGQ_YAMLDOC_MAP)
        return "a mapping";
    if (n->type == CGQ_YAMLDOC_SEQ)
        return "a list";
    cgq_yamldoc_scalar_t v;
    cgq_yamldoc_resolve (n, &v);
    const char *s = cgq_yamldoc_text (n);
    int w = (int)strlen (s) > 40 ? 40 : (int)strlen (s);
    const char *more = (int)strlen (s) > 40 ? "..." : "";
    switch (v.kind) {
    case CGQ_YAMLDOC_NULL: return "empty (null)";
    case CGQ_YAMLDOC_BOOL: snprintf (buf, len, "the boolean %s", s); break;
    case CGQ_YAMLDOC_INT: snprintf (buf, len, "the integer %s", s); break;
    case CGQ_YAMLDOC_REAL: snprintf (buf, len, "the number %s", s); break;
    case CGQ_YAMLDOC_STR: snprintf (buf, len, "the string '%.*s%s'", w, s, more); break;
    }
    return buf;
}

// cgq_yamldoc_check_keys rejects non-scalar and duplicate keys of a mapping; every
// mapping the walk enters goes through it, so duplicates are found anywhere.
int
cgq_yamldoc_check_keys (cgq_yamldoc_t *self, const cgq_yamldoc_node_t *map)
{
    json_t *seen = json_object ();
    int rc = 0;
    for (size_t pi = 0; pi < cgq_yamldoc_npairs (map); pi++) {
        const cgq_yamldoc_node_t *k = cgq_yamldoc_key (self, map, pi);
        if (k->type != CGQ_YAMLDOC_SCALAR) {
            char buf[80];
            rc =
                cgq_yamldoc_fail (self, k, "a key must be a plain name, not %s (write name: value)",
                                  cgq_yamldoc_what (k, buf, sizeof buf));
            break;
        }
        json_t *first = json_object_get (seen, cgq_yamldoc_text (k));
        if (first) {
            const cgq_yamldoc_node_t *f =
                cgq_yamldoc_node (self, (uint32_t)json_integer_value (first));
            rc = cgq_yamldoc_fail (
                self, k, "duplicate key '%s' (first written at %d:%d; keep only one of them)",
                cgq_yamldoc_text (k), f->line, f->col);
            break;
        }
        json_object_set_new (seen, cgq_yamldoc_text (k), json_integer (map->kids[2 * pi]));
    }
    json_decref (seen);
    return rc;
}

// cgq_yamldoc_expect_map checks that v is a mapping and that its keys are sound. Callers
// test for null first: "search:" alone means the defaults.
int
cgq_yamldoc_expect_map (cgq_yamldoc_t *self, const cgq_yamldoc_node_t *v, const char *what,
                        const char *hint)
{
    if (v->type != CGQ_YAMLDOC_MAP) {
        char buf[80];
        return cgq_yamldoc_fail (self, v, "%s must be a mapping, not %s (%s)", what,
                                 cgq_yamldoc_what (v, buf, sizeof buf), hint);
    }
    return cgq_yamldoc_check_keys (self, v);
}

int
cgq_yamldoc_unknown_key (cgq_yamldoc_t *self, const cgq_yamldoc_node_t *k, const char *where,
                         const char *known)
{
    char near[64];
    const char *guess = cgq_yamldoc_suggest (cgq_yamldoc_text (k), known, near, sizeof near);
    return cgq_yamldoc_fail (self, k, "unknown key '%s' in %s (known keys: %s)%s%s%s",
                             cgq_yamldoc_text (k), where, known, guess ? "; did you mean '" : "",
                             guess ? guess : "", guess ? "'?" : "");
}

// s_distance is the optimal string alignment distance of a and b (insert,
// delete, change, swap of neighbours), or more than max if it exceeds max.
static size_t
s_distance (const char *a, size_t na, const char *b, size_t nb, size_t max)
{
    if (na > nb + max || nb > na + max || na > 62 || nb > 62)
        return max + 1;
    unsigned char d[64][64]; // distances stay below 64: 4 KiB of stack
    for (size_t i = 0; i <= na; i++)
        d[i][0] = (unsigned char) i;
    for (size_t j = 0; j <= nb; j++)
        d[0][j] = (unsigned char) j;
    for (size_t i = 1; i <= na; i++)
        for (size_t j = 1; j <= nb; j++) {
            unsigned best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1] ? 1u : 0u);
            if (d[i - 1][j] + 1u < best)
                best = d[i - 1][j] + 1u;
            if (d[i][j - 1] + 1u < best)
                best = d[i][j - 1] + 1u;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1u < best)
                best = d[i - 2][j - 2] + 1u;
            d[i][j] = (unsigned char) best;
        }
    return d[na][nb];
}

const char *
cgq_yamldoc_suggest (const char *word, const char *known, char *buf, size_t len)
{
    size_t nw = strlen (word);
    size_t max = nw / 3; // "serch" -> search; "x" suggests nothing
    size_t best = max + 1;
    const char *p = known;
    while (p && *p) {
        p += strspn (p, ", ");
        size_t n = strcspn (p, ", ");
        if (n == 0)
            break;
        size_t d = s_distance (word, nw, p, n, max);
        if (d > 0 && d < best && n < len) {
            best = d;
            memcpy (buf, p, n);
            buf[n] = 0;
        }
        p += n;
    }
    return best <= max ? buf : NULL;
}

int
cgq_yamldoc_get_int (cgq_yamldoc_t *self, const cgq_yamldoc_node_t *v, const char *what,
                     long long min, long long max, const char *hint, long long *out)
{
    char buf[96];
    cgq_yamldoc_scalar_t s = {0};
    if (v->type == CGQ_YAMLDOC_SCALAR)
        cgq_yamldoc_resolve (v, &s);
    if (s.kind == CGQ_YAMLDOC_REAL && v->type == CGQ_YAMLDOC_SCALAR && s.d == floor (s.d) &&
        fabs (s.d) >= 9.2e18)
        // an integer too large for int64 (10^20): say that, not "must be an integer"
        return cgq_yamldoc_fail (self, v, "%s must be at most %lld, not %s (%s)", what, max,
                                 cgq_yamldoc_text (v), hint);
    if (s.kind != CGQ_YAMLDOC_INT)
        return cgq_yamldoc_fail (self, v, "%s must be an integer >= %lld, not %s (%s)", what, min,
                                 cgq_yamldoc_what (v, buf, sizeof buf), hint);
    if (s.i < min)
        return cgq_yamldoc_fail (self, v, "%s must be an integer >= %lld, not %lld (%s)", what, min,
                                 s.i, hint);
    if (s.i > max)
        return cgq_yamldoc_fail (self, v, "%s must be at most %lld, not %lld (%s)", what, max, s.i,
                                 hint);
    *out = s.i;
    return 0;
}

int
cgq_yamldoc_get_number (cgq_yamldoc_t *self, const cgq_yamldoc_node_t *v, const char *what,
                        const char *hint, double *out)
{
    char buf[96];
    cgq_yamldoc_scalar_t s = {0};
    if (v->type == CGQ_YAMLDOC_SCALAR)
        cgq_yamldoc_resolve (v, &s);
    if (v->type != CGQ_YAMLDOC_SCALAR || (s.kind != CGQ_YAMLDOC_INT && s.kind != CGQ_YAMLDOC_REAL))
        return cgq_yamldoc_fail (self, v, "%s must be a number, not %s (%s)", what,
                                 cgq_yamldoc_what (v, buf, sizeof buf), hint);
    *out = s.d;
    return 0;
}

int
cgq_yamldoc_get_bool (cgq_yamldoc_t *self, const cgq_yamldoc_node_t *v, const char *what,
                      const char *hint, bool *out)
{
    char buf[96];
    cgq_yamldoc_scalar_t s = {0};
    if (v->type == CGQ_YAMLDOC_SCALAR)
        cgq_yamldoc_resolve (v, &s);
    if (v->type != CGQ_YAMLDOC_SCALAR || s.kind != CGQ_YAMLDOC_BOOL)
        return cgq_yamldoc_fail (self, v, "%s must be true or false, not %s (%s)", what,
                                 cgq_yamldoc_what (v, buf, sizeof buf), hint);
    *out = s.b;
    return 0;
}

// cgq_yamldoc_get_text returns the text of a non-empty scalar (any YAML type: a command
// or a name is text whatever it looks like).
int
cgq_yamldoc_get_text (cgq_yamldoc_t *self, const cgq_yamldoc_node_t *v, const char *what,
                      const char *hint, const char **out)
{
    char buf[96];
    if (v->type != CGQ_YAMLDOC_SCALAR || cgq_yamldoc_is_null (v) ||
        strlen (cgq_yamldoc_text (v)) != v->len)
        return cgq_yamldoc_fail (self, v, "%s must be a string, not %s (%s)", what,
                                 v->type == CGQ_YAMLDOC_SCALAR && !cgq_yamldoc_is_null (v)
                                     ? "text with a NUL byte"
                                     : cgq_yamldoc_what (v, buf, sizeof buf),
                                 hint);
    *out = cgq_yamldoc_text (v);
    return 0;
}

static json_t *
s_to_json (cgq_yamldoc_t *self, const cgq_yamldoc_node_t *n, int depth)
{
    if (depth > CGQ_YAMLDOC_MAX_DEPTH)
        return cgq_yamldoc_fail (
                   self, n,
                   "value nested more than %d levels deep (flatten it; an alias cannot contain "
                   "itself)",
                   CGQ_YAMLDOC_MAX_DEPTH),
               NULL;
    if (depth == 0)
        self->top = n;
    // Report at the value being converted: the node reached through an alias
    // may be written anywhere.
    if (self->budget == 0)
        return cgq_yamldoc_fail (self, self->top,
                                 "the values of the %s have more than %d elements (aliases that "
                                 "expand too much?)",
                                 self->noun, CGQ_YAMLDOC_MAX_NODES),
               NULL;
    self->budget--;
    if (n->type == CGQ_YAMLDOC_SCALAR) {
        cgq_yamldoc_scalar_t s;
        cgq_yamldoc_resolve (n, &s);
        switch (s.kind) {
        case CGQ_YAMLDOC_NULL: return json_null ();
        case CGQ_YAMLDOC_BOOL: return json_boolean (s.b);
        case CGQ_YAMLDOC_INT: return json_integer (s.i);
        case CGQ_YAMLDOC_REAL: return json_real (s.d);
        case CGQ_YAMLDOC_STR: break;
        }
        if (strlen (cgq_yamldoc_text (n)) != n->len)
            return cgq_yamldoc_fail (
                       self, n,
                       "text with a NUL byte cannot be passed to a trial (remove the \\0)"),
                   NULL;
        json_t *j = json_stringn (cgq_yamldoc_text (n), n->len);
        if (!j)
            cgq_yamldoc_fail (self, n, "text is not valid UTF-8 (save the file as UTF-8)");
        return j;
    }
    if (n->type == CGQ_YAMLDOC_SEQ) {
        json_t *a = json_array ();
        for (size_t i = 0; i < cgq_yamldoc_nitems (n); i++) {
            json_t *e = s_to_json (self, cgq_yamldoc_item (self, n, i), depth + 1);
            if (!e) {
                json_decref (a);
                return NULL;
            }
            json_array_append_new (a, e);
        }
        return a;
    }
    if (cgq_yamldoc_check_keys (self, n) < 0)
        return NULL;
    json_t *o = json_object ();
    for (size_t pi = 0; pi < cgq_yamldoc_npairs (n); pi++) {
        const cgq_yamldoc_node_t *k = cgq_yamldoc_key (self, n, pi);
        json_t *e = s_to_json (self, cgq_yamldoc_val (self, n, pi), depth + 1);
        if (!e) {
            json_decref (o);
            return NULL;
        }
        json_object_set_new (o, cgq_yamldoc_text (k), e);
    }
    return o;
}

json_t *
cgq_yamldoc_to_json (cgq_yamldoc_t *self, const cgq_yamldoc_node_t *n)
{
    return s_to_json (self, n, 0);
}

// s_has_placeholder says whether line (n bytes) holds a template placeholder
// such as {spec_dir} or {lr}: '{', a name, '}'.
static bool
s_has_placeholder (const char *line, size_t n)
{
    for (size_t i = 0; i + 2 < n; i++) {
        if (line[i] != '{' || !(isalpha ((unsigned char)line[i + 1]) || line[i + 1] == '_'))
            continue;
        size_t j = i + 1;
        while (j < n && (isalnum ((unsigned char)line[j]) || line[j] == '_' || line[j] == '.'))
            j++;
        if (j < n && line[j] == '}')
            return true;
    }
    return false;
}

// s_syntax_error turns libyaml's complaint into our one-line form.
static void
s_syntax_error (cgq_yamldoc_t *self, yaml_parser_t *parser, const char *text, size_t len)
{
    int line, col;
    if (parser->error == YAML_READER_ERROR) // the reader reports a byte offset only
        s_text_pos (text, len, parser->problem_offset, &line, &col);
    else {
        line = (int)parser->problem_mark.line + 1;
        col = (int)parser->problem_mark.column + 1;
    }
    // Tabs are the most common cause, and libyaml's words do not say so.
    const char *bol = text;
    for (int l = 1; l < line && bol; l++) {
        bol = memchr (bol, '\n', len - (size_t)(bol - text));
        bol = bol ? bol + 1 : NULL;
    }
    bool tab = false;
    while (bol && bol < text + len && (*bol == ' ' || *bol == '\t'))
        tab |= *bol++ == '\t';
    const char *hint = tab ? "indent with spaces: YAML does not allow tabs there"
                           : "check the indentation, colons and quotes there";
    // Inside {...} or [...], a template's braces end the collection early:
    // trial: {command: python3 {spec_dir}/train.py} needs the value quoted.
    const char *eol = bol ? memchr (bol, '\n', len - (size_t)(bol - text)) : NULL;
    if (!tab && bol && parser->context && strstr (parser->context, "flow")
        && s_has_placeholder (bol, eol ? (size_t)(eol - bol) : len - (size_t)(bol - text)))
        hint = "quote a value that holds {placeholders} inside { } or [ ]: "
               "{command: \"python3 {spec_dir}/train.py --lr {lr}\"}";
    const char *problem = parser->problem ? parser->problem : "malformed YAML";
    if (parser->context)
        cgq_yamldoc_fail_at (self, line, col, "YAML syntax error: %s %s at %d:%d (%s)", problem,
                             parser->context, (int)parser->context_mark.line + 1,
                             (int)parser->context_mark.column + 1, hint);
    else
        cgq_yamldoc_fail_at (self, line, col, "YAML syntax error: %s (%s)", problem, hint);
}

static uint32_t
s_add_node (cgq_yamldoc_t *self, cgq_yamldoc_type_t type, const yaml_mark_t *at)
{
    if (self->nnodes == self->cap) {
        self->cap = self->cap ? 2 * self->cap : 64;
        self->nodes = cgq_xrealloc (self->nodes, self->cap * sizeof *self->nodes);
    }
    cgq_yamldoc_node_t *n = &self->nodes[self->nnodes];
    memset (n, 0, sizeof *n);
    n->type = type;
    n->line = (int)at->line + 1;
    n->col = (int)at->column + 1;
    return (uint32_t)self->nnodes++;
}

static void
s_add_kid (s_frame_t *f, uint32_t id)
{
    if (f->n == f->cap) {
        f->cap = f->cap ? 2 * f->cap : 8;
        f->kids = cgq_xrealloc (f->kids, f->cap * sizeof *f->kids);
    }
    f->kids[f->n++] = id;
}

// s_event_anchor is the anchor (&name) an event puts on its node, or NULL.
static const char *
s_event_anchor (const yaml_event_t *ev)
{
    const yaml_char_t *a = ev->type == YAML_SCALAR_EVENT           ? ev->data.scalar.anchor
                           : ev->type == YAML_SEQUENCE_START_EVENT ? ev->data.sequence_start.anchor
                           : ev->type == YAML_MAPPING_START_EVENT  ? ev->data.mapping_start.anchor
                                                                   : NULL;
    return (const char *)a;
}

// s_load reads the events of the first document into self's tree and sets *root
// to the id of its top node, or -1 for a stream without a document. Every
// limit is checked on the event that crosses it, before libyaml reads on.
// Anchors are registered when their node starts, as libyaml's loader does, so
// an alias inside its own anchor makes a cycle; s_to_json's depth limit and
// node budget are what stop such a value. Returns 0, or -1 with the error set.
static int
s_load (cgq_yamldoc_t *self, yaml_parser_t *parser, const char *text, size_t len, long *root)
{
    s_frame_t stack[CGQ_YAMLDOC_MAX_DEPTH];
    memset (stack, 0, sizeof stack);
    size_t depth = 0;
    json_t *anchors = json_object ();
    int rc = 0;
    bool done = false;
    *root = -1;
    while (!done && rc == 0) {
        yaml_event_t ev;
        if (!yaml_parser_parse (parser, &ev)) {
            s_syntax_error (self, parser, text, len);
            rc = -1;
            break;
        }
        int line = (int)ev.start_mark.line + 1, col = (int)ev.start_mark.column + 1;
        long id = -1; // the node this event adds to the open collection
        switch (ev.type) {
        case YAML_STREAM_END_EVENT:
        case YAML_DOCUMENT_END_EVENT: done = true; break;
        case YAML_ALIAS_EVENT: {
            const char *name = (const char *)ev.data.alias.anchor;
            json_t *to = json_object_get (anchors, name);
            if (to)
                id = (long)json_integer_value (to);
            else
                rc = cgq_yamldoc_fail_at (
                    self, line, col,
                    "unknown alias '*%s' (write the anchor &%s on a value before "
                    "the alias)",
                    name, name);
            break;
        }
        case YAML_SCALAR_EVENT: {
            id = s_add_node (self, CGQ_YAMLDOC_SCALAR, &ev.start_mark);
            cgq_yamldoc_node_t *n = &self->nodes[id];
            n->plain = ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
            n->quoted = ev.data.scalar.style == YAML_SINGLE_QUOTED_SCALAR_STYLE ||
                        ev.data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE;
            n->eline = (int)ev.end_mark.line + 1;
            n->ecol = (int)ev.end_mark.column + 1;
            n->len = ev.data.scalar.length;
            n->text = cgq_xmalloc (n->len + 1);
            memcpy (n->text, ev.data.scalar.value, n->len);
            n->text[n->len] = 0;
            break;
        }
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT:
            if (depth == CGQ_YAMLDOC_MAX_DEPTH) {
                rc = cgq_yamldoc_fail_at (
                    self, line, col,
                    "value nested more than %d levels deep, counting from the top "
                    "of the %s (flatten it)",
                    CGQ_YAMLDOC_MAX_DEPTH, self->noun);
                break;
            }
            id = s_add_node (
                self, ev.type == YAML_SEQUENCE_START_EVENT ? CGQ_YAMLDOC_SEQ : CGQ_YAMLDOC_MAP,
                &ev.start_mark);
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT: {
            s_frame_t *f = &stack[--depth];
            cgq_yamldoc_node_t *n = &self->nodes[f->node];
            n->len = f->n;
            if (f->n) {
                n->kids = cgq_xmalloc (f->n * sizeof *n->kids);
                memcpy (n->kids, f->kids, f->n * sizeof *n->kids);
            }
            f->n = 0; // the frame's buffer serves the next collection at this depth
            break;
        }
        default: // stream and document start
            break;
        }
        const char *anchor = rc == 0 && id >= 0 ? s_event_anchor (&ev) : NULL;
        if (anchor) {
            json_t *first = json_object_get (anchors, anchor);
            if (first) {
                const cgq_yamldoc_node_t *f =
                    cgq_yamldoc_node (self, (uint32_t)json_integer_value (first));
                rc = cgq_yamldoc_fail_at (
                    self, line, col,
                    "duplicate anchor '&%s' (first written at %d:%d; give each "
                    "anchor its own name)",
                    anchor, f->line, f->col);
            }
            else
                json_object_set_new (anchors, anchor, json_integer (id));
        }
        if (rc == 0 && id >= 0) {
            if (depth)
                s_add_kid (&stack[depth - 1], (uint32_t)id);
            else
                *root = id;
            if (ev.type == YAML_SEQUENCE_START_EVENT || ev.type == YAML_MAPPING_START_EVENT)
                stack[depth++].node = (uint32_t)id;
        }
        yaml_event_delete (&ev);
    }
    for (size_t i = 0; i < CGQ_YAMLDOC_MAX_DEPTH; i++)
        free (stack[i].kids);
    json_decref (anchors);
    return rc;
}

// s_second_doc refuses a second document after the first one, which would
// otherwise be ignored silently. It reads no further than that document's
// first node.
static int
s_second_doc (cgq_yamldoc_t *self, yaml_parser_t *parser, const char *text, size_t len)
{
    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse (parser, &ev)) {
            s_syntax_error (self, parser, text, len);
            return -1;
        }
        yaml_event_type_t type = ev.type;
        yaml_mark_t at = ev.start_mark;
        yaml_event_delete (&ev);
        if (type == YAML_STREAM_END_EVENT)
            return 0;
        if (type != YAML_DOCUMENT_START_EVENT)
            return cgq_yamldoc_fail_at (self, (int)at.line + 1, (int)at.column + 1,
                                        "a second YAML document (a %s is one document; remove the "
                                        "'---' line)",
                                        self->noun);
    }
}

// s_check_text refuses text that libyaml must not see: too long, or with a
// NUL byte (which would end the text early for anything that reads it as a C
// string, and silently drop what follows).
static int
s_check_text (cgq_yamldoc_t *self, const char *text, size_t len, size_t max, const char *hint)
{
    int line, col;
    if (len > max) {
        s_text_pos (text, len, max, &line, &col);
        return cgq_yamldoc_fail_at (
            self, line, col, "the %s is longer than %lu bytes here (the limit: %s)", self->noun,
            (unsigned long)max, hint ? hint : "is this the right file?");
    }
    const char *nul = len ? memchr (text, 0, len) : NULL;
    if (nul) {
        size_t off = (size_t)(nul - text);
        s_text_pos (text, len, off, &line, &col);
        return cgq_yamldoc_fail_at (
            self, line, col,
            "%s contains a NUL byte at byte %zu (a %s is UTF-8 text; remove "
            "the byte, or write \\0 in a double-quoted string)",
            self->noun, off, self->noun);
    }
    return 0;
}

cgq_yamldoc_t *
cgq_yamldoc_new (const char *path, const char *noun, char *err, size_t errlen)
{
    cgq_yamldoc_t *self = cgq_xcalloc (1, sizeof *self);
    self->path = cgq_xstrdup (path ? path : "spec");
    self->noun = noun ? noun : "file";
    self->err = err;
    self->errlen = errlen;
    if (err && errlen)
        err[0] = 0;
    self->budget = CGQ_YAMLDOC_MAX_NODES;
    return self;
}

void
cgq_yamldoc_destroy (cgq_yamldoc_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cgq_yamldoc_t *self = *self_p;
    if (self->parsing)
        yaml_parser_delete (&self->parser);
    for (size_t i = 0; i < self->nnodes; i++) {
        free (self->nodes[i].text);
        free (self->nodes[i].kids);
    }
    free (self->nodes);
    free (self->path);
    free (self);
    *self_p = NULL;
}

int
cgq_yamldoc_load (cgq_yamldoc_t *self, const char *text, size_t len, size_t max_bytes,
                  const char *size_hint, const cgq_yamldoc_node_t **root)
{
    *root = NULL;
    if (!text)
        text = "", len = 0;
    if (self->parsing || self->failed)
        return cgq_yamldoc_fail_at (self, 1, 1, "internal error: one text per reader");
    if (s_check_text (self, text, len, max_bytes ? max_bytes : CGQ_YAMLDOC_MAX_BYTES, size_hint) <
        0)
        return -1;
    if (!yaml_parser_initialize (&self->parser))
        return cgq_yamldoc_fail_at (self, 1, 1, "out of memory starting libyaml's parser");
    self->parsing = true;
    self->text = text;
    self->len = len;
    yaml_parser_set_input_string (&self->parser, (const unsigned char *)text, len);
    long id = -1;
    if (s_load (self, &self->parser, text, len, &id) < 0)
        return -1;
    *root = id >= 0 ? &self->nodes[id] : NULL;
    return 0;
}

int
cgq_yamldoc_end (cgq_yamldoc_t *self)
{
    if (self->failed)
        return -1;
    if (!self->parsing)
        return 0;
    return s_second_doc (self, &self->parser, self->text, self->len);
}

int
cgq_yamldoc_read_file (const char *path, size_t max, cgq_buf_t *out)
{
    FILE *f = fopen (path, "rb");
    if (!f)
        return -1;
    char chunk[16384];
    size_t got_all = 0;
    bool failed = false;
    while (got_all <= max) {
        size_t want = max + 1 - got_all;
        if (want > sizeof chunk)
            want = sizeof chunk;
        size_t got = fread (chunk, 1, want, f);
        cgq_buf_append (out, chunk, got);
        got_all += got;
        if (got < want) {
            failed = ferror (f) != 0;
            break;
        }
    }
    int saved = errno;
    fclose (f);
    if (failed) {
        errno = saved ? saved : EIO;
        return -1;
    }
    return 0;
}
