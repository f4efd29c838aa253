// spec: tune.yaml → cgq_spec_t. libyaml builds the document tree (with the
// marks every message needs); this file walks it once, in the order written,
// and stops at the first error so that the user sees one precise message.
#include "spec.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "space.h"
#include "json.h"
#include "util.h"

// A spec is small; a bigger tree means an alias bomb (&a [*b, *b, ...]) or a
// mistake, and these bounds keep its conversion to JSON cheap.
#define S_MAX_DEPTH 64
#define S_MAX_NODES 200000

// randint bounds stay where a double holds every integer exactly.
#define S_MAX_EXACT 9007199254740992.0 // 2^53

static const char *s_builtins[] = {"job_id", "trial_id", "spec_dir"};

typedef struct {
    const char *path;
    yaml_document_t *doc;
    char *err;
    size_t errlen;
    bool failed;
    size_t budget;          // nodes that s_to_json may still visit, in the whole spec
    const yaml_node_t *top; // the value s_to_json was called on, for messages
} s_ctx_t;

typedef enum { S_NULL, S_BOOL, S_INT, S_REAL, S_STR } s_kind_t;

// The YAML 1.1 reading of one scalar.
typedef struct {
    s_kind_t kind;
    bool b;
    long long i;
    double d;
} s_scalar_t;

static int s_fail_at (s_ctx_t *c, int line, int col, const char *fmt, ...)
    __attribute__ ((format (printf, 4, 5)));
static int s_fail (s_ctx_t *c, const yaml_node_t *at, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

// s_fail_at keeps the first error only: later checks that fail because of the
// first one would only add noise.
static int
s_fail_at (s_ctx_t *c, int line, int col, const char *fmt, ...)
{
    if (c->failed)
        return -1;
    c->failed = true;
    if (!c->err || !c->errlen)
        return -1;
    char msg[768];
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (msg, sizeof msg, fmt, ap);
    va_end (ap);
    snprintf (c->err, c->errlen, "%s:%d:%d: %s", c->path, line, col, msg);
    return -1;
}

static int
s_fail (s_ctx_t *c, const yaml_node_t *at, const char *fmt, ...)
{
    if (c->failed)
        return -1;
    char msg[768];
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (msg, sizeof msg, fmt, ap);
    va_end (ap);
    int line = at ? (int) at->start_mark.line + 1 : 1;
    int col = at ? (int) at->start_mark.column + 1 : 1;
    return s_fail_at (c, line, col, "%s", msg);
}

static const yaml_node_t *
s_node (s_ctx_t *c, int id)
{
    return yaml_document_get_node (c->doc, id);
}

static const char *
s_text (const yaml_node_t *n)
{
    return (const char *) n->data.scalar.value;
}

static bool
s_is_ident (const char *s, size_t n)
{
    if (n == 0 || !(isalpha ((unsigned char) s[0]) || s[0] == '_'))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!(isalnum ((unsigned char) s[i]) || s[i] == '_'))
            return false;
    return true;
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
    if (!isdigit ((unsigned char) *p) || s[0] == '_' || s[strlen (s) - 1] == '_')
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
        int d = isdigit ((unsigned char) *q)    ? *q - '0'
                : isxdigit ((unsigned char) *q) ? tolower ((unsigned char) *q) - 'a' + 10
                                                : 99;
        if (d >= base)
            return false;
    }
    errno = 0;
    unsigned long long v = strtoull (p, NULL, base);
    if (errno || v > (unsigned long long) LLONG_MAX + (neg ? 1 : 0))
        return false;
    *out = neg ? (long long) (0 - v) : (long long) v;
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
    if (!isdigit ((unsigned char) *p) && *p != '.')
        return false;
    while (isdigit ((unsigned char) *p) || (*p == '_' && digits))
        digits += isdigit ((unsigned char) *p++) ? 1 : 0;
    if (*p == '.') {
        dot = true;
        p++;
        while (isdigit ((unsigned char) *p) || (*p == '_' && digits))
            digits += isdigit ((unsigned char) *p++) ? 1 : 0;
    }
    if (!digits)
        return false;
    if (*p == 'e' || *p == 'E') {
        exp = true;
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (!isdigit ((unsigned char) *p))
            return false;
        while (isdigit ((unsigned char) *p))
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

static void
s_resolve (const yaml_node_t *n, s_scalar_t *out)
{
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL", NULL};
    static const char *const trues[] = {"true", "True", "TRUE", "yes", "Yes",
                                        "YES",  "on",   "On",   "ON",  NULL};
    static const char *const falses[] = {"false", "False", "FALSE", "no",  "No",
                                         "NO",    "off",   "Off",   "OFF", NULL};
    memset (out, 0, sizeof *out);
    out->kind = S_STR;
    if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return;
    const char *s = s_text (n);
    if (strlen (s) != n->data.scalar.length)
        return;
    if (s_one_of (s, nulls))
        out->kind = S_NULL;
    else if (s_one_of (s, trues))
        out->kind = S_BOOL, out->b = true;
    else if (s_one_of (s, falses))
        out->kind = S_BOOL, out->b = false;
    else if (s_read_int (s, &out->i))
        out->kind = S_INT, out->d = (double) out->i;
    else if (s_read_real (s, false, &out->d))
        out->kind = S_REAL;
    else if (s_read_real (s, true, &out->d))
        out->kind = S_REAL; // an integer beyond int64: keep its magnitude
}

static bool
s_is_null (const yaml_node_t *n)
{
    if (!n || n->type != YAML_SCALAR_NODE)
        return false;
    s_scalar_t v;
    s_resolve (n, &v);
    return v.kind == S_NULL;
}

// s_what describes a node for "must be X, not Y" messages.
static const char *
s_what (const yaml_node_t *n, char *buf, size_t len)
{
    if (n->type == YAML_MAPPING_NODE)
        return "a mapping";
    if (n->type == YAML_SEQUENCE_NODE)
        return "a list";
    s_scalar_t v;
    s_resolve (n, &v);
    const char *s = s_text (n);
    int w = (int) strlen (s) > 40 ? 40 : (int) strlen (s);
    const char *more = (int) strlen (s) > 40 ? "..." : "";
    switch (v.kind) {
    case S_NULL:
        return "empty (null)";
    case S_BOOL:
        snprintf (buf, len, "the boolean %s", s);
        break;
    case S_INT:
        snprintf (buf, len, "the integer %s", s);
        break;
    case S_REAL:
        snprintf (buf, len, "the number %s", s);
        break;
    case S_STR:
        snprintf (buf, len, "the string '%.*s%s'", w, s, more);
        break;
    }
    return buf;
}

// s_check_keys rejects non-scalar and duplicate keys of a mapping; every
// mapping the walk enters goes through it, so duplicates are found anywhere.
static int
s_check_keys (s_ctx_t *c, const yaml_node_t *map)
{
    json_t *seen = json_object ();
    int rc = 0;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        const yaml_node_t *k = s_node (c, p->key);
        if (k->type != YAML_SCALAR_NODE) {
            char buf[80];
            rc = s_fail (c, k, "a key must be a plain name, not %s (write name: value)",
                         s_what (k, buf, sizeof buf));
            break;
        }
        json_t *first = json_object_get (seen, s_text (k));
        if (first) {
            const yaml_node_t *f = s_node (c, (int) json_integer_value (first));
            rc = s_fail (c, k, "duplicate key '%s' (first written at %d:%d; keep only one of them)",
                         s_text (k), (int) f->start_mark.line + 1, (int) f->start_mark.column + 1);
            break;
        }
        json_object_set_new (seen, s_text (k), json_integer (p->key));
    }
    json_decref (seen);
    return rc;
}

// s_expect_map checks that v is a mapping and that its keys are sound. Callers
// test for null first: "search:" alone means the defaults.
static int
s_expect_map (s_ctx_t *c, const yaml_node_t *v, const char *what, const char *hint)
{
    if (v->type != YAML_MAPPING_NODE) {
        char buf[80];
        return s_fail (c, v, "%s must be a mapping, not %s (%s)", what, s_what (v, buf, sizeof buf),
                       hint);
    }
    return s_check_keys (c, v);
}

static int
s_unknown_key (s_ctx_t *c, const yaml_node_t *k, const char *where, const char *known)
{
    return s_fail (c, k, "unknown key '%s' in %s (known keys: %s)", s_text (k), where, known);
}

static int
s_get_int (s_ctx_t *c, const yaml_node_t *v, const char *what, long long min, long long max,
           const char *hint, long long *out)
{
    char buf[96];
    s_scalar_t s = {0};
    if (v->type == YAML_SCALAR_NODE)
        s_resolve (v, &s);
    if (s.kind != S_INT)
        return s_fail (c, v, "%s must be an integer >= %lld, not %s (%s)", what, min,
                       s_what (v, buf, sizeof buf), hint);
    if (s.i < min)
        return s_fail (c, v, "%s must be an integer >= %lld, not %lld (%s)", what, min, s.i, hint);
    if (s.i > max)
        return s_fail (c, v, "%s must be at most %lld, not %lld (%s)", what, max, s.i, hint);
    *out = s.i;
    return 0;
}

static int
s_get_number (s_ctx_t *c, const yaml_node_t *v, const char *what, const char *hint, double *out)
{
    char buf[96];
    s_scalar_t s = {0};
    if (v->type == YAML_SCALAR_NODE)
        s_resolve (v, &s);
    if (v->type != YAML_SCALAR_NODE || (s.kind != S_INT && s.kind != S_REAL))
        return s_fail (c, v, "%s must be a number, not %s (%s)", what, s_what (v, buf, sizeof buf),
                       hint);
    *out = s.d;
    return 0;
}

// s_get_text returns the text of a non-empty scalar (any YAML type: a command
// or a name is text whatever it looks like).
static int
s_get_text (s_ctx_t *c, const yaml_node_t *v, const char *what, const char *hint, const char **out)
{
    char buf[96];
    if (v->type != YAML_SCALAR_NODE || s_is_null (v) ||
        strlen (s_text (v)) != v->data.scalar.length)
        return s_fail (c, v, "%s must be a string, not %s (%s)", what,
                       v->type == YAML_SCALAR_NODE && !s_is_null (v) ? "text with a NUL byte"
                                                                     : s_what (v, buf, sizeof buf),
                       hint);
    *out = s_text (v);
    return 0;
}

static json_t *
s_to_json (s_ctx_t *c, const yaml_node_t *n, int depth)
{
    if (depth > S_MAX_DEPTH)
        return s_fail (c, n,
                       "value nested more than %d levels deep (flatten it; an alias cannot contain "
                       "itself)",
                       S_MAX_DEPTH),
               NULL;
    if (depth == 0)
        c->top = n;
    // Report at the value being converted: the node reached through an alias
    // may be written anywhere.
    if (c->budget == 0)
        return s_fail (c, c->top,
                       "the values of the spec have more than %d elements (aliases that "
                       "expand too much?)",
                       S_MAX_NODES),
               NULL;
    c->budget--;
    if (n->type == YAML_SCALAR_NODE) {
        s_scalar_t s;
        s_resolve (n, &s);
        switch (s.kind) {
        case S_NULL:
            return json_null ();
        case S_BOOL:
            return json_boolean (s.b);
        case S_INT:
            return json_integer (s.i);
        case S_REAL:
            return json_real (s.d);
        case S_STR:
            break;
        }
        if (strlen (s_text (n)) != n->data.scalar.length)
            return s_fail (c, n,
                           "text with a NUL byte cannot be passed to a trial (remove the \\0)"),
                   NULL;
        json_t *j = json_stringn (s_text (n), n->data.scalar.length);
        if (!j)
            s_fail (c, n, "text is not valid UTF-8 (save the file as UTF-8)");
        return j;
    }
    if (n->type == YAML_SEQUENCE_NODE) {
        json_t *a = json_array ();
        for (yaml_node_item_t *i = n->data.sequence.items.start; i < n->data.sequence.items.top;
             i++) {
            json_t *e = s_to_json (c, s_node (c, *i), depth + 1);
            if (!e) {
                json_decref (a);
                return NULL;
            }
            json_array_append_new (a, e);
        }
        return a;
    }
    if (s_check_keys (c, n) < 0)
        return NULL;
    json_t *o = json_object ();
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = s_node (c, p->key);
        json_t *e = s_to_json (c, s_node (c, p->value), depth + 1);
        if (!e) {
            json_decref (o);
            return NULL;
        }
        json_object_set_new (o, s_text (k), e);
    }
    return o;
}

// --- space ------------------------------------------------------------------

static const char *s_dists = "choice, uniform, loguniform, randint, grid, value";

// s_bounds reads [lo, hi] of uniform / loguniform / randint.
static int
s_bounds (s_ctx_t *c, const char *pname, const char *dist, const yaml_node_t *v, bool integers,
          double *lo, double *hi)
{
    char hint[128], buf[96];
    snprintf (hint, sizeof hint, "write %s: {%s: [%s]}", pname, dist,
              !strcmp (dist, "loguniform") ? "1.0e-4, 1.0e-1"
              : integers                   ? "2, 6"
                                           : "0.0, 0.5");
    if (v->type != YAML_SEQUENCE_NODE ||
        v->data.sequence.items.top - v->data.sequence.items.start != 2)
        return s_fail (c, v, "%s of space.%s must be a list [lo, hi] of two numbers, not %s (%s)",
                       dist, pname,
                       v->type == YAML_SEQUENCE_NODE ? "a list of another length"
                                                     : s_what (v, buf, sizeof buf),
                       hint);
    double b[2];
    for (int i = 0; i < 2; i++) {
        const yaml_node_t *e = s_node (c, v->data.sequence.items.start[i]);
        s_scalar_t s = {0};
        if (e->type == YAML_SCALAR_NODE)
            s_resolve (e, &s);
        if (integers && s.kind != S_INT)
            return s_fail (c, e, "randint bounds of space.%s must be integers, not %s (%s)", pname,
                           s_what (e, buf, sizeof buf), hint);
        if (s.kind != S_INT && s.kind != S_REAL)
            return s_fail (c, e, "%s bounds of space.%s must be numbers, not %s (%s)", dist, pname,
                           s_what (e, buf, sizeof buf), hint);
        if (integers && fabs (s.d) > S_MAX_EXACT)
            return s_fail (c, e, "randint bounds of space.%s must lie within +-2^53, not %s (%s)",
                           pname, s_text (e), hint);
        b[i] = s.d;
    }
    char l[32], h[32];
    cgq_fmt_double (l, b[0]);
    cgq_fmt_double (h, b[1]);
    if (integers && b[0] > b[1])
        return s_fail (c, v, "randint bounds of space.%s are inverted: %s > %s (write [%s, %s])",
                       pname, l, h, h, l);
    if (!integers && b[0] >= b[1])
        return s_fail (c, v, "%s bounds of space.%s need lo < hi, got [%s, %s] (write [%s, %s]%s)",
                       dist, pname, l, h, h, l,
                       b[0] == b[1] ? ", or a constant for a single value" : "");
    if (!strcmp (dist, "loguniform") && b[0] <= 0)
        return s_fail (c, v,
                       "loguniform bounds of space.%s must be > 0, got [%s, %s] (use uniform "
                       "for ranges that include 0, or write e.g. [1.0e-6, %s])",
                       pname, l, h, h);
    *lo = b[0];
    *hi = b[1];
    return 0;
}

static int
s_parse_param (s_ctx_t *c, cgq_spec_t *spec, const yaml_node_t *k, const yaml_node_t *v)
{
    const char *name = s_text (k);
    if (!s_is_ident (name, k->data.scalar.length))
        return s_fail (c, k,
                       "bad parameter name '%s' (a name is a letter or _ followed by letters, "
                       "digits or _, e.g. learning_rate)",
                       name);
    for (size_t i = 0; i < sizeof s_builtins / sizeof *s_builtins; i++)
        if (!strcmp (name, s_builtins[i]))
            return s_fail (c, k,
                           "parameter name '%s' is taken by a built-in (job_id, trial_id, "
                           "spec_dir are always defined; rename the parameter)",
                           name);

    cgq_param_t *p = &spec->params[spec->nparams];
    memset (p, 0, sizeof *p);
    p->line = (int) k->start_mark.line + 1;
    p->col = (int) k->start_mark.column + 1;

    if (v->type != YAML_MAPPING_NODE) {
        p->kind = CGQ_PARAM_CONST;
        p->value = s_to_json (c, v, 0);
        if (!p->value)
            return -1;
        p->name = cgq_xstrdup (name);
        spec->nparams++;
        return 0;
    }
    if (s_check_keys (c, v) < 0)
        return -1;
    size_t nkeys = (size_t) (v->data.mapping.pairs.top - v->data.mapping.pairs.start);
    for (yaml_node_pair_t *q = v->data.mapping.pairs.start; q < v->data.mapping.pairs.top; q++) {
        const char *d = s_text (s_node (c, q->key));
        if (!strcmp (d, "repeat") || !strcmp (d, "assignment") || !strcmp (d, "of"))
            return s_fail (c, s_node (c, q->key),
                           "'%s' is not supported yet (space.%s: use one of: "
                           "%s)",
                           !strcmp (d, "of") ? "repeat" : d, name, s_dists);
    }
    if (nkeys != 1) {
        const yaml_node_t *at = nkeys ? s_node (c, v->data.mapping.pairs.start[1].key) : v;
        return s_fail (c, at,
                       "space.%s must have exactly one distribution key, found %zu (write "
                       "%s: {choice: [a, b]}, or %s: {value: {...}} for a mapping constant)",
                       name, nkeys, name, name);
    }
    const yaml_node_t *dk = s_node (c, v->data.mapping.pairs.start[0].key);
    const yaml_node_t *dv = s_node (c, v->data.mapping.pairs.start[0].value);
    const char *d = s_text (dk);
    char buf[96];
    if (!strcmp (d, "value")) {
        p->kind = CGQ_PARAM_CONST;
        p->value = s_to_json (c, dv, 0);
        if (!p->value)
            return -1;
    }
    else if (!strcmp (d, "choice") || !strcmp (d, "grid")) {
        p->kind = !strcmp (d, "choice") ? CGQ_PARAM_CHOICE : CGQ_PARAM_GRID;
        if (dv->type != YAML_SEQUENCE_NODE)
            return s_fail (c, dv,
                           "%s of space.%s must be a list, not %s (write %s: {%s: [64, 128]})", d,
                           name, s_what (dv, buf, sizeof buf), name, d);
        if (dv->data.sequence.items.top == dv->data.sequence.items.start)
            return s_fail (c, dv,
                           "%s of space.%s is an empty list (give at least one value, e.g. "
                           "%s: {%s: [64, 128]})",
                           d, name, name, d);
        p->values = s_to_json (c, dv, 0);
        if (!p->values)
            return -1;
    }
    else if (!strcmp (d, "uniform") || !strcmp (d, "loguniform") || !strcmp (d, "randint")) {
        p->kind = !strcmp (d, "uniform")      ? CGQ_PARAM_UNIFORM
                  : !strcmp (d, "loguniform") ? CGQ_PARAM_LOGUNIFORM
                                              : CGQ_PARAM_RANDINT;
        if (s_bounds (c, name, d, dv, p->kind == CGQ_PARAM_RANDINT, &p->lo, &p->hi) < 0)
            return -1;
    }
    else
        return s_fail (c, dk, "unknown distribution '%s' (expected one of: %s)", d, s_dists);
    p->name = cgq_xstrdup (name);
    spec->nparams++;
    return 0;
}

static int
s_parse_space (s_ctx_t *c, cgq_spec_t *spec, const yaml_node_t *v)
{
    if (s_is_null (v))
        return 0;
    if (s_expect_map (c, v, "space", "write space: {lr: {loguniform: [1.0e-4, 1.0e-1]}}") < 0)
        return -1;
    size_t n = (size_t) (v->data.mapping.pairs.top - v->data.mapping.pairs.start);
    spec->params = cgq_xcalloc (n, sizeof *spec->params);
    for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++)
        if (s_parse_param (c, spec, s_node (c, p->key), s_node (c, p->value)) < 0)
            return -1;
    return 0;
}

// --- search, objective, trial ----------------------------------------------

static int
s_parse_search (s_ctx_t *c, cgq_spec_t *spec, const yaml_node_t *v)
{
    if (s_is_null (v))
        return 0;
    if (s_expect_map (c, v, "search", "write search: {algorithm: random, samples: 16}") < 0)
        return -1;
    for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = s_node (c, p->key), *e = s_node (c, p->value);
        const char *key = s_text (k);
        long long n;
        if (!strcmp (key, "algorithm")) {
            const char *a;
            if (s_get_text (c, e, "search.algorithm", "write algorithm: random or algorithm: grid",
                            &a) < 0)
                return -1;
            if (!strcmp (a, "random"))
                spec->search.algorithm = CGQ_SEARCH_RANDOM;
            else if (!strcmp (a, "grid"))
                spec->search.algorithm = CGQ_SEARCH_GRID;
            else if (!strcmp (a, "evolution") || !strcmp (a, "nsga2") || !strcmp (a, "bayes") ||
                     !strcmp (a, "list"))
                return s_fail (c, e,
                               "search.algorithm '%s' is not supported yet (expected one of: "
                               "random, grid)",
                               a);
            else
                return s_fail (c, e,
                               "unknown search.algorithm '%s' (expected one of: random, grid)", a);
        }
        else if (!strcmp (key, "samples")) {
            if (s_get_int (c, e, "search.samples", 1, LLONG_MAX, "write e.g. samples: 16", &n) < 0)
                return -1;
            spec->search.samples = (uint64_t) n;
        }
        else if (!strcmp (key, "concurrency")) {
            if (s_get_int (c, e, "search.concurrency", 0, UINT32_MAX,
                           "write e.g. concurrency: 8, or 0 for no limit", &n) < 0)
                return -1;
            spec->search.concurrency = (uint32_t) n;
        }
        else if (!strcmp (key, "seed")) {
            if (s_get_int (c, e, "search.seed", 0, LLONG_MAX, "write e.g. seed: 1", &n) < 0)
                return -1;
            spec->search.seed = (uint64_t) n;
        }
        else
            return s_unknown_key (c, k, "search", "algorithm, samples, concurrency, seed");
    }
    return 0;
}

static int
s_parse_objective (s_ctx_t *c, cgq_spec_t *spec, const yaml_node_t *key, const yaml_node_t *v)
{
    if (s_is_null (v))
        return 0;
    if (s_expect_map (c, v, "objective", "write objective: {metric: val_loss, mode: min}") < 0)
        return -1;
    const char *metric = NULL;
    int mode = 0;
    for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = s_node (c, p->key), *e = s_node (c, p->value);
        const char *kt = s_text (k);
        if (!strcmp (kt, "metric")) {
            if (s_get_text (c, e, "objective.metric", "write metric: val_loss", &metric) < 0)
                return -1;
        }
        else if (!strcmp (kt, "mode")) {
            const char *m;
            if (s_get_text (c, e, "objective.mode", "write mode: max or mode: min", &m) < 0)
                return -1;
            if (!strcmp (m, "max"))
                mode = 1;
            else if (!strcmp (m, "min"))
                mode = -1;
            else
                return s_fail (c, e,
                               "objective.mode must be max or min, not '%s' (write mode: max "
                               "or mode: min)",
                               m);
        }
        else if (!strcmp (kt, "expr"))
            return s_fail (c, k,
                           "'expr' is not supported yet (write metric: NAME with a metric "
                           "that the trial reports)");
        else
            return s_unknown_key (c, k, "objective", "metric, mode");
    }
    if (!metric)
        return s_fail (c, key,
                       "objective.metric is missing (write metric: NAME, a metric that the "
                       "trial reports)");
    if (!mode)
        return s_fail (c, key, "objective.mode is missing (write mode: max or mode: min)");
    spec->objective.metric = cgq_xstrdup (metric);
    spec->objective.mode = mode;
    return 0;
}

static int
s_parse_resources (s_ctx_t *c, cgq_spec_t *spec, const yaml_node_t *v)
{
    if (s_is_null (v))
        return 0;
    if (s_expect_map (c, v, "trial.resources", "write resources: {cpu: 1, gpu: 0.5, memory: 4G}") <
        0)
        return -1;
    for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = s_node (c, p->key), *e = s_node (c, p->value);
        const char *kt = s_text (k);
        double d;
        char buf[96];
        if (!strcmp (kt, "cpu")) {
            if (s_get_number (c, e, "trial.resources.cpu", "write e.g. cpu: 2 or cpu: 0.5", &d) < 0)
                return -1;
            if (d < 0)
                return s_fail (c, e, "trial.resources.cpu must be >= 0, not %s (write e.g. cpu: 1)",
                               s_text (e));
            spec->trial.cpu = d;
        }
        else if (!strcmp (kt, "gpu")) {
            if (s_get_number (c, e, "trial.resources.gpu", "write e.g. gpu: 1 or gpu: 0.5", &d) < 0)
                return -1;
            if (d < 0)
                return s_fail (c, e, "trial.resources.gpu must be >= 0, not %s (write e.g. gpu: 1)",
                               s_text (e));
            if (d > 1 && d != floor (d))
                return s_fail (c, e,
                               "trial.resources.gpu %s is neither a share of one GPU (<= 1) "
                               "nor a whole number of GPUs (write gpu: %.0f or gpu: %.0f)",
                               s_text (e), floor (d), ceil (d));
            spec->trial.gpu = d;
        }
        else if (!strcmp (kt, "memory")) {
            uint64_t bytes;
            if (e->type != YAML_SCALAR_NODE || s_is_null (e) ||
                cgq_parse_bytes (s_text (e), &bytes) < 0)
                return s_fail (c, e,
                               "trial.resources.memory must be a size like 4G, 512M or a "
                               "number of bytes, not %s (write e.g. memory: 4G)",
                               s_what (e, buf, sizeof buf));
            spec->trial.memory = bytes;
        }
        else
            return s_unknown_key (c, k, "trial.resources", "cpu, gpu, memory");
    }
    return 0;
}

static int
s_parse_env (s_ctx_t *c, cgq_spec_t *spec, const yaml_node_t *v)
{
    if (s_is_null (v))
        return 0;
    if (s_expect_map (c, v, "trial.env", "write env: {DATA_DIR: /data}") < 0)
        return -1;
    size_t n = (size_t) (v->data.mapping.pairs.top - v->data.mapping.pairs.start);
    spec->trial.env_keys = cgq_xcalloc (n, sizeof (char *));
    spec->trial.env_vals = cgq_xcalloc (n, sizeof (char *));
    for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = s_node (c, p->key), *e = s_node (c, p->value);
        const char *kt = s_text (k);
        char buf[96];
        if (!s_is_ident (kt, k->data.scalar.length))
            return s_fail (c, k,
                           "bad environment variable name '%s' in trial.env (use letters, "
                           "digits and _, e.g. DATA_DIR)",
                           kt);
        if (e->type != YAML_SCALAR_NODE || strlen (s_text (e)) != e->data.scalar.length)
            return s_fail (c, e, "trial.env.%s must be a string, not %s (write %s: \"value\")", kt,
                           e->type == YAML_SCALAR_NODE ? "text with a NUL byte"
                                                       : s_what (e, buf, sizeof buf),
                           kt);
        spec->trial.env_keys[spec->trial.nenv] = cgq_xstrdup (kt);
        spec->trial.env_vals[spec->trial.nenv] = cgq_xstrdup (s_text (e));
        spec->trial.nenv++;
    }
    return 0;
}

static int
s_parse_command (s_ctx_t *c, cgq_spec_t *spec, const yaml_node_t *v)
{
    const char *hint = "write command: python3 train.py --lr {lr}, or a list of arguments";
    char buf[96];
    if (v->type == YAML_SEQUENCE_NODE) {
        size_t n = (size_t) (v->data.sequence.items.top - v->data.sequence.items.start);
        if (n == 0)
            return s_fail (c, v, "trial.command is an empty list (%s)", hint);
        spec->trial.argv = cgq_xcalloc (n + 1, sizeof (char *));
        for (size_t i = 0; i < n; i++) {
            const yaml_node_t *e = s_node (c, v->data.sequence.items.start[i]);
            if (e->type != YAML_SCALAR_NODE || strlen (s_text (e)) != e->data.scalar.length)
                return s_fail (c, e,
                               "trial.command[%zu] must be a string, not %s (quote it: \"...\")", i,
                               e->type == YAML_SCALAR_NODE ? "text with a NUL byte"
                                                           : s_what (e, buf, sizeof buf));
            spec->trial.argv[i] = cgq_xstrdup (s_text (e));
            spec->trial.argc++;
        }
        if (!*spec->trial.argv[0])
            return s_fail (c, v, "trial.command[0], the program, is empty (%s)", hint);
        return 0;
    }
    const char *t;
    if (s_get_text (c, v, "trial.command", hint, &t) < 0)
        return -1;
    const char *q = t;
    while (isspace ((unsigned char) *q))
        q++;
    if (!*q)
        return s_fail (c, v, "trial.command is blank (%s)", hint);
    spec->trial.command = cgq_xstrdup (t);
    return 0;
}

static int
s_parse_trial (s_ctx_t *c, cgq_spec_t *spec, const yaml_node_t *v, const yaml_node_t **cmd_node,
               const yaml_node_t **env_node)
{
    if (s_is_null (v))
        return 0;
    if (s_expect_map (c, v, "trial", "write trial: {command: python3 train.py --lr {lr}}") < 0)
        return -1;
    for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = s_node (c, p->key), *e = s_node (c, p->value);
        const char *kt = s_text (k);
        long long n;
        if (!strcmp (kt, "kind")) {
            const char *kind;
            if (s_get_text (c, e, "trial.kind", "write kind: command or kind: noop", &kind) < 0)
                return -1;
            if (!strcmp (kind, "command"))
                spec->trial.kind = CGQ_TRIAL_COMMAND;
            else if (!strcmp (kind, "noop"))
                spec->trial.kind = CGQ_TRIAL_NOOP;
            else
                return s_fail (c, e, "unknown trial.kind '%s' (expected one of: command, noop)",
                               kind);
        }
        else if (!strcmp (kt, "command")) {
            if (s_parse_command (c, spec, e) < 0)
                return -1;
            *cmd_node = e;
        }
        else if (!strcmp (kt, "resources")) {
            if (s_parse_resources (c, spec, e) < 0)
                return -1;
        }
        else if (!strcmp (kt, "timeout")) {
            double s;
            char buf[96];
            if (e->type != YAML_SCALAR_NODE || s_is_null (e) ||
                cgq_parse_duration (s_text (e), &s) < 0 || !(s > 0) || !isfinite (s))
                return s_fail (c, e,
                               "trial.timeout must be a duration > 0 like 30m, 90s, 2h or a "
                               "number of seconds, not %s (write e.g. timeout: 30m)",
                               s_what (e, buf, sizeof buf));
            spec->trial.timeout_s = s;
        }
        else if (!strcmp (kt, "retries")) {
            if (s_get_int (c, e, "trial.retries", 0, UINT32_MAX, "write e.g. retries: 2", &n) < 0)
                return -1;
            spec->trial.retries = (uint32_t) n;
        }
        else if (!strcmp (kt, "env")) {
            if (s_parse_env (c, spec, e) < 0)
                return -1;
            *env_node = e;
        }
        else if (!strcmp (kt, "stages"))
            return s_fail (c, k,
                           "'stages' is not supported yet (write command: ... for a single "
                           "stage)");
        else
            return s_unknown_key (c, k, "trial", "kind, command, resources, timeout, retries, env");
    }
    return 0;
}

// s_check_tmpl reports the first bad placeholder of one template, with the
// names that would have been accepted.
static int
s_check_tmpl (s_ctx_t *c, const cgq_spec_t *spec, const yaml_node_t *at, const char *tmpl,
              const char *where)
{
    size_t off;
    char name[128];
    if (cgq_space_check_template (spec, tmpl, &off, name, sizeof name) == 0)
        return 0;
    if (tmpl[off] == '}')
        return s_fail (c, at, "stray '}' at byte %zu of %s (write }} for a literal brace)", off,
                       where);
    if (!strchr (tmpl + off, '}'))
        return s_fail (c, at, "unterminated '{' at byte %zu of %s (write {{ for a literal brace)",
                       off ? off - 1 : 0, where);
    cgq_buf_t names;
    cgq_buf_init (&names);
    for (size_t i = 0; i < spec->nparams && i < 12; i++)
        cgq_buf_printf (&names, "%s%s", i ? ", " : "", spec->params[i].name);
    if (spec->nparams > 12)
        cgq_buf_puts (&names, ", ...");
    if (!spec->nparams)
        cgq_buf_puts (&names, "none");
    s_fail (c, at,
            "unknown placeholder '{%s}' in %s (params: %s; built-ins: job_id, trial_id, "
            "spec_dir; write {{ for a literal brace)",
            name, where, names.data);
    cgq_buf_fini (&names);
    return -1;
}

static int
s_check_templates (s_ctx_t *c, const cgq_spec_t *spec, const yaml_node_t *cmd,
                   const yaml_node_t *env)
{
    if (spec->trial.command &&
        s_check_tmpl (c, spec, cmd, spec->trial.command, "trial.command") < 0)
        return -1;
    for (size_t i = 0; i < spec->trial.argc; i++) {
        char where[64];
        snprintf (where, sizeof where, "trial.command[%zu]", i);
        const yaml_node_t *at = s_node (c, cmd->data.sequence.items.start[i]);
        if (s_check_tmpl (c, spec, at, spec->trial.argv[i], where) < 0)
            return -1;
    }
    for (size_t i = 0; i < spec->trial.nenv; i++) {
        char where[160];
        snprintf (where, sizeof where, "trial.env.%s", spec->trial.env_keys[i]);
        const yaml_node_t *at = s_node (c, env->data.mapping.pairs.start[i].value);
        if (s_check_tmpl (c, spec, at, spec->trial.env_vals[i], where) < 0)
            return -1;
    }
    return 0;
}

static char *
s_default_name (const char *path)
{
    if (!path || !*path || !strcmp (path, "-"))
        return cgq_xstrdup ("job");
    const char *base = strrchr (path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen (base);
    if (n > 5 && !strcmp (base + n - 5, ".yaml"))
        n -= 5;
    else if (n > 4 && !strcmp (base + n - 4, ".yml"))
        n -= 4;
    return n ? cgq_xstrndup (base, n) : cgq_xstrdup ("job");
}

// s_syntax_error turns libyaml's complaint into our one-line form.
static void
s_syntax_error (s_ctx_t *c, yaml_parser_t *parser, const char *text, size_t len)
{
    int line, col;
    if (parser->error == YAML_READER_ERROR) {
        // The reader reports a byte offset only.
        line = 1, col = 1;
        for (size_t i = 0; i < parser->problem_offset && i < len; i++) {
            if (text[i] == '\n')
                line++, col = 1;
            else
                col++;
        }
    }
    else {
        line = (int) parser->problem_mark.line + 1;
        col = (int) parser->problem_mark.column + 1;
    }
    // Tabs are the most common cause, and libyaml's words do not say so.
    const char *bol = text;
    for (int l = 1; l < line && bol; l++) {
        bol = memchr (bol, '\n', len - (size_t) (bol - text));
        bol = bol ? bol + 1 : NULL;
    }
    bool tab = false;
    while (bol && bol < text + len && (*bol == ' ' || *bol == '\t'))
        tab |= *bol++ == '\t';
    const char *hint = tab ? "indent with spaces: YAML does not allow tabs there"
                           : "check the indentation, colons and quotes there";
    const char *problem = parser->problem ? parser->problem : "malformed YAML";
    if (parser->context)
        s_fail_at (c, line, col, "YAML syntax error: %s %s at %d:%d (%s)", problem, parser->context,
                   (int) parser->context_mark.line + 1, (int) parser->context_mark.column + 1,
                   hint);
    else
        s_fail_at (c, line, col, "YAML syntax error: %s (%s)", problem, hint);
}

static int
s_parse_doc (s_ctx_t *c, cgq_spec_t *spec, const yaml_node_t *root)
{
    char buf[96];
    if (!root)
        return s_fail_at (c, 1, 1, "the spec is empty (write at least trial: {command: ...})");
    if (root->type != YAML_MAPPING_NODE)
        return s_fail (c, root,
                       "the spec must be a mapping of name, space, search, objective, "
                       "trial, not %s (write e.g. trial: {command: ./train.sh})",
                       s_what (root, buf, sizeof buf));
    if (s_check_keys (c, root) < 0)
        return -1;
    const yaml_node_t *space_key = NULL, *trial_key = NULL, *cmd = NULL, *env = NULL;
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
         p++) {
        const yaml_node_t *k = s_node (c, p->key), *v = s_node (c, p->value);
        const char *kt = s_text (k);
        int rc = 0;
        if (!strcmp (kt, "name")) {
            const char *name;
            rc = s_get_text (c, v, "name", "write name: my-search", &name);
            if (rc == 0) {
                free (spec->name);
                spec->name = cgq_xstrdup (name);
            }
        }
        else if (!strcmp (kt, "space")) {
            space_key = k;
            rc = s_parse_space (c, spec, v);
        }
        else if (!strcmp (kt, "search"))
            rc = s_parse_search (c, spec, v);
        else if (!strcmp (kt, "objective"))
            rc = s_parse_objective (c, spec, k, v);
        else if (!strcmp (kt, "trial")) {
            trial_key = k;
            rc = s_parse_trial (c, spec, v, &cmd, &env);
        }
        else if (!strcmp (kt, "early_stop") || !strcmp (kt, "objectives"))
            rc = s_fail (c, k,
                         "'%s' is not supported yet (known keys: name, space, search, "
                         "objective, trial)",
                         kt);
        else
            rc = s_unknown_key (c, k, "the spec", "name, space, search, objective, trial");
        if (rc < 0)
            return -1;
    }
    if (spec->trial.kind == CGQ_TRIAL_COMMAND && !spec->trial.command && !spec->trial.argc) {
        if (trial_key)
            return s_fail (c, trial_key,
                           "trial.command is missing (write command: python3 train.py "
                           "--lr {lr}, or kind: noop)");
        return s_fail (c, root,
                       "trial is missing (write trial: {command: python3 train.py --lr "
                       "{lr}})");
    }
    if (s_check_templates (c, spec, cmd, env) < 0)
        return -1;
    uint64_t total;
    if (cgq_space_count (spec, &total) < 0) {
        double g = (double) spec->search.samples;
        for (size_t i = 0; i < spec->nparams; i++) {
            const cgq_param_t *p = &spec->params[i];
            if (p->kind == CGQ_PARAM_GRID ||
                (p->kind == CGQ_PARAM_CHOICE && spec->search.algorithm == CGQ_SEARCH_GRID))
                g *= (double) json_array_size (p->values);
        }
        return s_fail (c, space_key ? space_key : root,
                       "the search has %.3g trials, more than "
                       "2^63 (use fewer grid values or fewer samples)",
                       g);
    }
    return 0;
}

cgq_spec_t *
cgq_spec_parse (const char *text, size_t len, const char *path, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = 0;
    char *name = s_default_name (path);
    if (!path)
        path = "spec";
    s_ctx_t c = {.path = path, .err = err, .errlen = errlen, .budget = S_MAX_NODES};
    cgq_spec_t *spec = cgq_xcalloc (1, sizeof *spec);
    spec->path = cgq_xstrdup (path);
    spec->text = cgq_xstrndup (text ? text : "", text ? len : 0);
    spec->name = name;
    spec->search.algorithm = CGQ_SEARCH_RANDOM;
    spec->search.samples = 1;
    spec->trial.kind = CGQ_TRIAL_COMMAND;
    spec->trial.cpu = 1;

    yaml_parser_t parser;
    yaml_document_t doc;
    yaml_parser_initialize (&parser);
    yaml_parser_set_input_string (&parser, (const unsigned char *) spec->text, strlen (spec->text));
    if (!yaml_parser_load (&parser, &doc)) {
        s_syntax_error (&c, &parser, spec->text, strlen (spec->text));
        yaml_parser_delete (&parser);
        cgq_spec_destroy (&spec);
        return NULL;
    }
    c.doc = &doc;
    int rc = s_parse_doc (&c, spec, yaml_document_get_root_node (&doc));
    if (rc == 0 && yaml_document_get_root_node (&doc)) {
        // A second document would be ignored silently: refuse it.
        yaml_document_t more;
        if (!yaml_parser_load (&parser, &more)) {
            s_syntax_error (&c, &parser, spec->text, strlen (spec->text));
            rc = -1;
        }
        else {
            const yaml_node_t *r = yaml_document_get_root_node (&more);
            if (r)
                rc = s_fail (&c, r,
                             "a second YAML document (a spec is one document; remove the "
                             "'---' line)");
            yaml_document_delete (&more);
        }
    }
    yaml_document_delete (&doc);
    yaml_parser_delete (&parser);
    if (rc < 0) {
        cgq_spec_destroy (&spec);
        return NULL;
    }
    return spec;
}

cgq_spec_t *
cgq_spec_load (const char *path, char *err, size_t errlen)
{
    FILE *f = fopen (path, "rb");
    if (!f) {
        if (err && errlen)
            snprintf (err, errlen, "%s: cannot read: %s", path, strerror (errno));
        return NULL;
    }
    cgq_buf_t b;
    cgq_buf_init (&b);
    int failed = cgq_buf_read (&b, f);
    int saved = errno;
    fclose (f);
    if (failed) {
        if (err && errlen)
            snprintf (err, errlen, "%s: cannot read: %s", path, strerror (saved));
        cgq_buf_fini (&b);
        return NULL;
    }
    cgq_spec_t *spec = cgq_spec_parse (b.data, b.len, path, err, errlen);
    cgq_buf_fini (&b);
    return spec;
}

void
cgq_spec_destroy (cgq_spec_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cgq_spec_t *self = *self_p;
    free (self->name);
    free (self->path);
    free (self->text);
    for (size_t i = 0; i < self->nparams; i++) {
        free (self->params[i].name);
        json_decref (self->params[i].value);
        json_decref (self->params[i].values);
    }
    free (self->params);
    free (self->objective.metric);
    free (self->trial.command);
    for (size_t i = 0; self->trial.argv && self->trial.argv[i]; i++)
        free (self->trial.argv[i]);
    free (self->trial.argv);
    for (size_t i = 0; i < self->trial.nenv; i++) {
        free (self->trial.env_keys[i]);
        free (self->trial.env_vals[i]);
    }
    free (self->trial.env_keys);
    free (self->trial.env_vals);
    free (self);
    *self_p = NULL;
}

const cgq_param_t *
cgq_spec_param (const cgq_spec_t *self, const char *name)
{
    for (size_t i = 0; self && name && i < self->nparams; i++)
        if (!strcmp (self->params[i].name, name))
            return &self->params[i];
    return NULL;
}

static void
s_describe_json (FILE *f, const json_t *v)
{
    char *s = cgq_json_dumps (v);
    fputs (s, f);
    free (s);
}

static const char *
s_bytes (char *buf, size_t len, uint64_t b)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double) b;
    int u = 0;
    while (v >= 1024 && u < 5)
        v /= 1024, u++;
    char num[32];
    snprintf (buf, len, "%s %s", cgq_fmt_double (num, cgq_round15 (round (v * 100) / 100)),
              units[u]);
    return buf;
}

void
cgq_spec_describe (const cgq_spec_t *self, FILE *f)
{
    char a[32], b[32];
    bool grid = self->search.algorithm == CGQ_SEARCH_GRID;
    fprintf (f, "job: %s (%s)\n", self->name, self->path);
    int w = 4;
    for (size_t i = 0; i < self->nparams; i++)
        if ((int) strlen (self->params[i].name) > w)
            w = (int) strlen (self->params[i].name);
    fprintf (f, "params (%zu):\n", self->nparams);
    uint64_t points = 1;
    for (size_t i = 0; i < self->nparams; i++) {
        const cgq_param_t *p = &self->params[i];
        fprintf (f, "  %-*s  ", w, p->name);
        switch (p->kind) {
        case CGQ_PARAM_CONST:
            fputs ("= ", f);
            s_describe_json (f, p->value);
            break;
        case CGQ_PARAM_CHOICE:
        case CGQ_PARAM_GRID:
            fprintf (f, "%s ",
                     p->kind == CGQ_PARAM_GRID ? "grid"
                     : grid                    ? "choice (grid axis)"
                                               : "choice");
            s_describe_json (f, p->values);
            fprintf (f, "  (%zu values)", json_array_size (p->values));
            if (p->kind == CGQ_PARAM_GRID || grid)
                points *= json_array_size (p->values);
            break;
        case CGQ_PARAM_UNIFORM:
        case CGQ_PARAM_LOGUNIFORM:
        case CGQ_PARAM_RANDINT:
            fprintf (f, "%s [%s, %s]%s",
                     p->kind == CGQ_PARAM_UNIFORM      ? "uniform"
                     : p->kind == CGQ_PARAM_LOGUNIFORM ? "loguniform"
                                                       : "randint",
                     cgq_fmt_double (a, p->lo), cgq_fmt_double (b, p->hi),
                     p->kind == CGQ_PARAM_RANDINT ? " (inclusive)" : "");
            break;
        }
        fputc ('\n', f);
    }
    char conc[32] = "unlimited";
    if (self->search.concurrency)
        snprintf (conc, sizeof conc, "%u", self->search.concurrency);
    fprintf (f, "search: %s, %llu %s, seed %llu, concurrency %s\n", grid ? "grid" : "random",
             (unsigned long long) self->search.samples,
             grid ? "repeat(s) of the grid" : "sample(s) per grid point",
             (unsigned long long) self->search.seed, conc);
    if (self->objective.metric)
        fprintf (f, "objective: %s %s\n", self->objective.mode > 0 ? "maximize" : "minimize",
                 self->objective.metric);
    else
        fputs ("objective: none (no leaderboard)\n", f);
    if (self->trial.kind == CGQ_TRIAL_NOOP)
        fputs ("trial: noop (reports the numeric params as metrics)\n", f);
    else if (self->trial.command)
        fprintf (f, "trial: sh -c %s\n", self->trial.command);
    else {
        fputs ("trial: exec", f);
        for (size_t i = 0; i < self->trial.argc; i++)
            fprintf (f, " [%s]", self->trial.argv[i]);
        fputc ('\n', f);
    }
    char mem[48];
    fprintf (f, "  resources: cpu %s, gpu %s, memory %s\n", cgq_fmt_double (a, self->trial.cpu),
             cgq_fmt_double (b, self->trial.gpu),
             self->trial.memory ? s_bytes (mem, sizeof mem, self->trial.memory) : "not set");
    if (self->trial.timeout_s > 0) {
        char t[32];
        fprintf (f, "  timeout: %s s, retries: %u\n", cgq_fmt_double (t, self->trial.timeout_s),
                 self->trial.retries);
    }
    else
        fprintf (f, "  timeout: none, retries: %u\n", self->trial.retries);
    for (size_t i = 0; i < self->trial.nenv; i++)
        fprintf (f, "  env: %s=%s\n", self->trial.env_keys[i], self->trial.env_vals[i]);
    uint64_t total = 0;
    if (cgq_space_count (self, &total) == 0)
        fprintf (f, "trials: %llu (%llu grid point(s) x %llu)\n", (unsigned long long) total,
                 (unsigned long long) points, (unsigned long long) self->search.samples);
    else
        fputs ("trials: more than 2^63\n", f);
}
