// spec: tune.yaml → cgq_spec_t. yamldoc.c reads the text into a tree (bounded
// in size, depth and nodes, with the marks every message needs); this file
// then walks it once, in the order written, and stops at the first error so
// that the user sees one precise message.
#include "spec.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "space.h"
#include "util.h"
#include "yamldoc.h"

// randint bounds stay where a double holds every integer exactly.
#define S_MAX_EXACT 9007199254740992.0 // 2^53

// The limit of a spec's text (cgq_spec_set_max_bytes): set once at start,
// before any parse.
static size_t s_max_bytes = CGQ_SPEC_MAX_BYTES;
static const char *s_size_hint = "raise it with --max-spec of cgq and of the coordinator; a spec "
                                 "describes a search: keep data in files that the trial reads";

void
cgq_spec_set_max_bytes (size_t max)
{
    s_max_bytes = max ? max : CGQ_SPEC_MAX_BYTES;
}

size_t
cgq_spec_max_bytes (void)
{
    return s_max_bytes;
}

static const char *s_builtins[] = {"job_id", "trial_id", "spec_dir"};

typedef struct {
    cgq_yamldoc_t *y;    // the text's tree, and the first error
    const char *dir;     // the spec's directory: search.file may be read; NULL: it may not
    const cgq_yamldoc_node_t *alg_node, *points_node, *file_key, *file_node, *objective_key,
        *objectives_key, *early_key;
    size_t *point_lines; // search.file: the file's line of each point
    const cgq_yamldoc_node_t *reduction_key;
    bool es_mode_given;
} s_ctx_t;

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

// --- space ------------------------------------------------------------------

static const char *s_dists = "choice, uniform, loguniform, quniform, qloguniform, randint, grid, "
                             "repeat, assignment, value";
// What a repeat may repeat: one draw of a sampled distribution.
static const char *s_inner_dists = "choice, uniform, loguniform, quniform, qloguniform, randint";

// s_bounds reads [lo, hi] of uniform / loguniform / randint.
static int
s_bounds (s_ctx_t *c, const char *pname, const char *dist, const cgq_yamldoc_node_t *v,
          bool integers, double *lo, double *hi)
{
    char hint[128], buf[96];
    snprintf (hint, sizeof hint, "write %s: {%s: [%s]}", pname, dist,
              !strcmp (dist, "loguniform") ? "1.0e-4, 1.0e-1"
              : integers                   ? "2, 6"
                                           : "0.0, 0.5");
    if (v->type != CGQ_YAMLDOC_SEQ || cgq_yamldoc_nitems (v) != 2)
        return cgq_yamldoc_fail (
            c->y, v, "%s of space.%s must be a list [lo, hi] of two numbers, not %s (%s)", dist,
            pname,
            v->type == CGQ_YAMLDOC_SEQ ? "a list of another length"
                                       : cgq_yamldoc_what (v, buf, sizeof buf),
            hint);
    double b[2];
    for (int i = 0; i < 2; i++) {
        const cgq_yamldoc_node_t *e = cgq_yamldoc_item (c->y, v, i);
        cgq_yamldoc_scalar_t s = {0};
        if (e->type == CGQ_YAMLDOC_SCALAR)
            cgq_yamldoc_resolve (e, &s);
        if (integers && s.kind != CGQ_YAMLDOC_INT)
            return cgq_yamldoc_fail (c->y, e,
                                     "randint bounds of space.%s must be integers, not %s (%s)",
                                     pname, cgq_yamldoc_what (e, buf, sizeof buf), hint);
        if (s.kind != CGQ_YAMLDOC_INT && s.kind != CGQ_YAMLDOC_REAL)
            return cgq_yamldoc_fail (c->y, e, "%s bounds of space.%s must be numbers, not %s (%s)",
                                     dist, pname, cgq_yamldoc_what (e, buf, sizeof buf), hint);
        if (integers && fabs (s.d) > S_MAX_EXACT)
            return cgq_yamldoc_fail (
                c->y, e, "randint bounds of space.%s must lie within +-2^53, not %s (%s)", pname,
                cgq_yamldoc_text (e), hint);
        b[i] = s.d;
    }
    char l[32], h[32];
    cgq_fmt_double (l, b[0]);
    cgq_fmt_double (h, b[1]);
    if (integers && b[0] > b[1])
        return cgq_yamldoc_fail (
            c->y, v, "randint bounds of space.%s are inverted: %s > %s (write [%s, %s])", pname, l,
            h, h, l);
    if (!integers && b[0] >= b[1])
        return cgq_yamldoc_fail (
            c->y, v, "%s bounds of space.%s need lo < hi, got [%s, %s] (write [%s, %s]%s)", dist,
            pname, l, h, h, l, b[0] == b[1] ? ", or a constant for a single value" : "");
    if (!strcmp (dist, "loguniform") && b[0] <= 0)
        return cgq_yamldoc_fail (
            c->y, v,
            "loguniform bounds of space.%s must be > 0, got [%s, %s] (use uniform "
            "for ranges that include 0, or write e.g. [1.0e-6, %s])",
            pname, l, h, h);
    *lo = b[0];
    *hi = b[1];
    return 0;
}

static bool
s_is_whole (double v)
{
    return v == floor (v) && fabs (v) <= S_MAX_EXACT;
}

// s_qbounds reads [lo, hi, q] of quniform / qloguniform. The values are the
// multiples of q in [lo, hi], so there must be at least one.
static int
s_qbounds (s_ctx_t *c, const char *pname, const char *dist, const cgq_yamldoc_node_t *v,
           cgq_param_t *p)
{
    bool log = !strcmp (dist, "qloguniform");
    char hint[128], buf[96];
    snprintf (hint, sizeof hint, "write %s: {%s: [%s]}", pname, dist,
              log ? "16, 1024, 16" : "0, 100, 5");
    if (v->type != CGQ_YAMLDOC_SEQ || cgq_yamldoc_nitems (v) != 3)
        return cgq_yamldoc_fail (
            c->y, v, "%s of space.%s must be a list [lo, hi, q] of three numbers, not %s (%s)",
            dist, pname,
            v->type == CGQ_YAMLDOC_SEQ ? "a list of another length"
                                       : cgq_yamldoc_what (v, buf, sizeof buf),
            hint);
    double b[3];
    for (int i = 0; i < 3; i++) {
        const cgq_yamldoc_node_t *e = cgq_yamldoc_item (c->y, v, (size_t)i);
        cgq_yamldoc_scalar_t s = {0};
        if (e->type == CGQ_YAMLDOC_SCALAR)
            cgq_yamldoc_resolve (e, &s);
        if (s.kind != CGQ_YAMLDOC_INT && s.kind != CGQ_YAMLDOC_REAL)
            return cgq_yamldoc_fail (c->y, e, "%s %s of space.%s must be %s, not %s (%s)", dist,
                                     i < 2 ? "bounds" : "step q", pname,
                                     i < 2 ? "numbers" : "a number",
                                     cgq_yamldoc_what (e, buf, sizeof buf), hint);
        if (i == 2 && !(s.d > 0))
            return cgq_yamldoc_fail (c->y, e, "%s step q of space.%s must be > 0, not %s (%s)",
                                     dist, pname, cgq_yamldoc_text (e), hint);
        b[i] = s.d;
    }
    char l[32], h[32], q[32];
    cgq_fmt_double (l, b[0]);
    cgq_fmt_double (h, b[1]);
    cgq_fmt_double (q, b[2]);
    if (b[0] >= b[1])
        return cgq_yamldoc_fail (
            c->y, v, "%s bounds of space.%s need lo < hi, got [%s, %s] (write [%s, %s, %s]%s)",
            dist, pname, l, h, h, l, q, b[0] == b[1] ? ", or a constant for a single value" : "");
    if (log && b[0] <= 0)
        return cgq_yamldoc_fail (
            c->y, v,
            "qloguniform bounds of space.%s must be > 0, got [%s, %s] (use quniform "
            "for ranges that include 0, or write e.g. [%s, %s, %s])",
            pname, l, h, q, h, q);
    p->lo = b[0];
    p->hi = b[1];
    p->q = b[2];
    p->integral = s_is_whole (b[0]) && s_is_whole (b[1]) && s_is_whole (b[2]);
    uint64_t n;
    if (cgq_space_param_size (p, &n) == 0 && n == 0)
        return cgq_yamldoc_fail (
            c->y, v,
            "%s range [%s, %s] of space.%s holds no multiple of q = %s (widen the "
            "range or use a smaller q)",
            dist, l, h, pname, q);
    return 0;
}

// s_names reads the items or the choices of an assignment: a non-empty list
// of distinct names (scalars, taken as the text written), at most max if max.
static int
s_names (s_ctx_t *c, const char *pname, const char *what, const cgq_yamldoc_node_t *v, size_t max,
         json_t **out)
{
    char hint[160], buf[96];
    snprintf (hint, sizeof hint,
              "write %s: {assignment: {items: [Conv2D, Pool2D], choices: [cpu, acl_cl]}}", pname);
    if (v->type != CGQ_YAMLDOC_SEQ)
        return cgq_yamldoc_fail (c->y, v, "%s of space.%s must be a list of names, not %s (%s)",
                                 what, pname, cgq_yamldoc_what (v, buf, sizeof buf), hint);
    if (cgq_yamldoc_nitems (v) == 0)
        return cgq_yamldoc_fail (c->y, v, "%s of space.%s is an empty list (%s)", what, pname,
                                 hint);
    if (max && cgq_yamldoc_nitems (v) > max)
        return cgq_yamldoc_fail (
            c->y, v, "%s of space.%s has %zu names, more than %zu (split the assignment)", what,
            pname, cgq_yamldoc_nitems (v), max);
    json_t *names = json_array (), *seen = json_object ();
    *out = names; // the caller's param owns it, even if a name is bad
    int rc = 0;
    for (size_t i = 0; i < cgq_yamldoc_nitems (v) && rc == 0; i++) {
        const cgq_yamldoc_node_t *e = cgq_yamldoc_item (c->y, v, i);
        if (e->type != CGQ_YAMLDOC_SCALAR || cgq_yamldoc_is_null (e) ||
            strlen (cgq_yamldoc_text (e)) != e->len) {
            rc =
                cgq_yamldoc_fail (c->y, e, "%s of space.%s must be names, not %s (%s)", what, pname,
                                  e->type == CGQ_YAMLDOC_SCALAR && !cgq_yamldoc_is_null (e)
                                      ? "text with a NUL byte"
                                      : cgq_yamldoc_what (e, buf, sizeof buf),
                                  hint);
            break;
        }
        json_t *name = json_stringn (cgq_yamldoc_text (e), e->len);
        if (!name) {
            rc = cgq_yamldoc_fail (c->y, e, "text is not valid UTF-8 (save the file as UTF-8)");
            break;
        }
        json_t *first = json_object_get (seen, cgq_yamldoc_text (e));
        if (first) {
            const cgq_yamldoc_node_t *f =
                cgq_yamldoc_node (c->y, (uint32_t)json_integer_value (first));
            json_decref (name);
            rc = cgq_yamldoc_fail (
                c->y, e,
                "duplicate name '%s' in %s of space.%s (first written at %d:%d; keep "
                "only one of them)",
                cgq_yamldoc_text (e), what, pname, f->line, f->col);
            break;
        }
        json_object_set_new (seen, cgq_yamldoc_text (e), json_integer (v->kids[i]));
        json_array_append_new (names, name);
    }
    json_decref (seen);
    return rc;
}

// s_assignment_env reads an assignment's env template, NAME=VALUE with
// {item} in NAME (one variable per item) and {item}, {choice} anywhere.
static int
s_assignment_env (s_ctx_t *c, const char *pname, const cgq_yamldoc_node_t *e, cgq_param_t *p)
{
    const char *hint = "write env: \"OP_BACKEND_{item}={choice}\"";
    const char *t;
    char what[160];
    snprintf (what, sizeof what, "space.%s.assignment.env", pname);
    if (cgq_yamldoc_get_text (c->y, e, what, hint, &t) < 0)
        return -1;
    const char *eq = strchr (t, '=');
    if (!eq)
        return cgq_yamldoc_fail (c->y, e, "%s '%s' has no '=' (NAME=VALUE; %s)", what, t, hint);
    char *name = cgq_xstrndup (t, (size_t) (eq - t));
    bool has_item = strstr (name, "{item}") != NULL;
    free (name);
    if (!has_item)
        return cgq_yamldoc_fail (
            c->y, e,
            "%s: the name before '=' has no {item}, so every item would set the same "
            "variable (%s)",
            what, hint);
    // Only {item} and {choice} (and {{ }}): checked as a template of a spec
    // whose params are those two.
    for (const char *q = t; (q = strchr (q, '{'));) {
        if (q[1] == '{') {
            q += 2;
            continue;
        }
        if (strncmp (q, "{item}", 6) && strncmp (q, "{choice}", 8))
            return cgq_yamldoc_fail (
                c->y, e,
                "%s: unknown placeholder at byte %zu (only {item} and {choice}; "
                "write {{ for a literal brace)",
                what, (size_t)(q - t));
        q++;
    }
    free (p->env);
    p->env = cgq_xstrdup (t);
    return 0;
}

static int
s_parse_assignment (s_ctx_t *c, const char *pname, const cgq_yamldoc_node_t *v, cgq_param_t *p)
{
    char buf[96];
    const char *hint = "write e.g. {assignment: {items: [Conv2D, Pool2D], choices: [cpu, acl_cl]}}";
    if (v->type != CGQ_YAMLDOC_MAP)
        return cgq_yamldoc_fail (c->y, v,
                                 "assignment of space.%s must be a mapping {items: [...], choices: "
                                 "[...]}, not %s (%s)",
                                 pname, cgq_yamldoc_what (v, buf, sizeof buf), hint);
    if (cgq_yamldoc_check_keys (c->y, v) < 0)
        return -1;
    p->kind = CGQ_PARAM_ASSIGNMENT;
    char where[160];
    snprintf (where, sizeof where, "space.%s.assignment", pname);
    for (size_t i = 0; i < cgq_yamldoc_npairs (v); i++) {
        const cgq_yamldoc_node_t *k = cgq_yamldoc_key (c->y, v, i),
                                 *e = cgq_yamldoc_val (c->y, v, i);
        int rc;
        if (!strcmp (cgq_yamldoc_text (k), "items"))
            rc = s_names (c, pname, "items", e, CGQ_PARAM_MAX_ITEMS, &p->items);
        else if (!strcmp (cgq_yamldoc_text (k), "choices"))
            rc = s_names (c, pname, "choices", e, 0, &p->values);
        else if (!strcmp (cgq_yamldoc_text (k), "env"))
            rc = s_assignment_env (c, pname, e, p);
        else
            rc = cgq_yamldoc_unknown_key (c->y, k, where, "items, choices, env");
        if (rc < 0)
            return -1;
    }
    if (!p->items || !p->values)
        return cgq_yamldoc_fail (c->y, v, "assignment of space.%s has no %s (%s)", pname,
                                 p->items ? "choices" : "items", hint);
    uint64_t ids;
    if (cgq_space_param_size (p, &ids) < 0)
        return cgq_yamldoc_fail (
            c->y, v,
            "assignment of space.%s has %zu^%zu ids, more than 2^63 (use fewer "
            "items or fewer choices)",
            pname, json_array_size (p->values), json_array_size (p->items));
    return 0;
}

// s_parse_dist reads one distribution, dk: dv, into p. inner: p is the
// element of a repeat, which is one draw of a sampled distribution.
static int
s_parse_dist (s_ctx_t *c, const char *name, const cgq_yamldoc_node_t *dk,
              const cgq_yamldoc_node_t *dv, cgq_param_t *p, bool inner)
{
    const char *d = cgq_yamldoc_text (dk);
    char buf[96];
    if (inner && (!strcmp (d, "value") || !strcmp (d, "grid") || !strcmp (d, "repeat") ||
                  !strcmp (d, "of") || !strcmp (d, "assignment")))
        return cgq_yamldoc_fail (
            c->y, dk,
            "a repeat draws each element from one of: %s, not %s (write %s: {repeat: "
            "5, of: {choice: [2, 3, 4]}})",
            s_inner_dists, !strcmp (d, "of") ? "repeat" : d, name);
    if (!strcmp (d, "value")) {
        p->kind = CGQ_PARAM_CONST;
        p->value = cgq_yamldoc_to_json (c->y, dv);
        return p->value ? 0 : -1;
    }
    if (!strcmp (d, "choice") || !strcmp (d, "grid")) {
        p->kind = !strcmp (d, "choice") ? CGQ_PARAM_CHOICE : CGQ_PARAM_GRID;
        if (dv->type != CGQ_YAMLDOC_SEQ)
            return cgq_yamldoc_fail (
                c->y, dv, "%s of space.%s must be a list, not %s (write %s: {%s: [64, 128]})", d,
                name, cgq_yamldoc_what (dv, buf, sizeof buf), name, d);
        if (cgq_yamldoc_nitems (dv) == 0)
            return cgq_yamldoc_fail (
                c->y, dv,
                "%s of space.%s is an empty list (give at least one value, e.g. "
                "%s: {%s: [64, 128]})",
                d, name, name, d);
        p->values = cgq_yamldoc_to_json (c->y, dv);
        return p->values ? 0 : -1;
    }
    if (!strcmp (d, "uniform") || !strcmp (d, "loguniform") || !strcmp (d, "randint")) {
        p->kind = !strcmp (d, "uniform")      ? CGQ_PARAM_UNIFORM
                  : !strcmp (d, "loguniform") ? CGQ_PARAM_LOGUNIFORM
                                              : CGQ_PARAM_RANDINT;
        return s_bounds (c, name, d, dv, p->kind == CGQ_PARAM_RANDINT, &p->lo, &p->hi);
    }
    if (!strcmp (d, "quniform") || !strcmp (d, "qloguniform")) {
        p->kind = !strcmp (d, "quniform") ? CGQ_PARAM_QUNIFORM : CGQ_PARAM_QLOGUNIFORM;
        return s_qbounds (c, name, d, dv, p);
    }
    if (!strcmp (d, "assignment"))
        return s_parse_assignment (c, name, dv, p);
    if (inner)
        return cgq_yamldoc_fail (c->y, dk,
                                 "unknown distribution '%s' in space.%s.of (expected one of: %s)",
                                 d, name, s_inner_dists);
    return cgq_yamldoc_fail (c->y, dk, "unknown distribution '%s' (expected one of: %s)", d,
                             s_dists);
}

// s_parse_repeat reads {repeat: N, of: DIST}.
static int
s_parse_repeat (s_ctx_t *c, const char *name, const cgq_yamldoc_node_t *v, cgq_param_t *p)
{
    char hint[128], buf[96], where[96];
    snprintf (hint, sizeof hint, "write %s: {repeat: 5, of: {choice: [2, 3, 4]}}", name);
    snprintf (where, sizeof where, "space.%s", name);
    const cgq_yamldoc_node_t *rk = NULL, *rv = NULL, *ok = NULL, *ov = NULL;
    for (size_t i = 0; i < cgq_yamldoc_npairs (v); i++) {
        const cgq_yamldoc_node_t *k = cgq_yamldoc_key (c->y, v, i);
        if (!strcmp (cgq_yamldoc_text (k), "repeat"))
            rk = k, rv = cgq_yamldoc_val (c->y, v, i);
        else if (!strcmp (cgq_yamldoc_text (k), "of"))
            ok = k, ov = cgq_yamldoc_val (c->y, v, i);
        else
            return cgq_yamldoc_unknown_key (c->y, k, where, "repeat, of");
    }
    if (!rk)
        return cgq_yamldoc_fail (
            c->y, ok, "space.%s has 'of' but no 'repeat', the length of the list (%s)", name, hint);
    if (!ok)
        return cgq_yamldoc_fail (
            c->y, rk, "repeat of space.%s has no 'of', the distribution of each element (%s)", name,
            hint);
    char what[96];
    snprintf (what, sizeof what, "repeat of space.%s", name);
    long long n;
    if (cgq_yamldoc_get_int (c->y, rv, what, 1, CGQ_PARAM_MAX_REPEAT, hint, &n) < 0)
        return -1;
    if (ov->type != CGQ_YAMLDOC_MAP)
        return cgq_yamldoc_fail (
            c->y, ov, "space.%s.of must be a distribution like {choice: [2, 3, 4]}, not %s (%s)",
            name, cgq_yamldoc_what (ov, buf, sizeof buf), hint);
    if (cgq_yamldoc_check_keys (c->y, ov) < 0)
        return -1;
    for (size_t i = 0; i < cgq_yamldoc_npairs (ov); i++) {
        const cgq_yamldoc_node_t *k = cgq_yamldoc_key (c->y, ov, i);
        if (!strcmp (cgq_yamldoc_text (k), "repeat") || !strcmp (cgq_yamldoc_text (k), "of"))
            return cgq_yamldoc_fail (
                c->y, k,
                "a repeat draws each element from one of: %s, not repeat (write a "
                "repeat of a choice whose values are lists instead)",
                s_inner_dists);
    }
    if (cgq_yamldoc_npairs (ov) != 1)
        return cgq_yamldoc_fail (
            c->y, cgq_yamldoc_npairs (ov) ? cgq_yamldoc_key (c->y, ov, 1) : ov,
            "space.%s.of must have exactly one distribution key, found %zu (%s)", name,
            cgq_yamldoc_npairs (ov), hint);
    p->kind = CGQ_PARAM_REPEAT;
    p->repeat = (uint32_t) n;
    p->of = cgq_xcalloc (1, sizeof *p->of);
    p->of->line = ov->line;
    p->of->col = ov->col;
    return s_parse_dist (c, name, cgq_yamldoc_key (c->y, ov, 0), cgq_yamldoc_val (c->y, ov, 0),
                         p->of, true);
}

static void
s_param_fini (cgq_param_t *p)
{
    free (p->name);
    json_decref (p->value);
    json_decref (p->values);
    json_decref (p->items);
    free (p->env);
    if (p->of) {
        s_param_fini (p->of);
        free (p->of);
    }
    memset (p, 0, sizeof *p);
}

static int
s_parse_param (s_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *k,
               const cgq_yamldoc_node_t *v)
{
    const char *name = cgq_yamldoc_text (k);
    if (!s_is_ident (name, k->len))
        return cgq_yamldoc_fail (
            c->y, k,
            "bad parameter name '%s' (a name is a letter or _ followed by letters, "
            "digits or _, e.g. learning_rate)",
            name);
    for (size_t i = 0; i < sizeof s_builtins / sizeof *s_builtins; i++)
        if (!strcmp (name, s_builtins[i]))
            return cgq_yamldoc_fail (
                c->y, k,
                "parameter name '%s' is taken by a built-in (job_id, trial_id, "
                "spec_dir are always defined; rename the parameter)",
                name);

    cgq_param_t *p = &spec->params[spec->nparams];
    memset (p, 0, sizeof *p);
    p->line = k->line;
    p->col = k->col;
    int rc = 0;
    if (v->type != CGQ_YAMLDOC_MAP) {
        p->kind = CGQ_PARAM_CONST;
        p->value = cgq_yamldoc_to_json (c->y, v);
        rc = p->value ? 0 : -1;
    }
    else if (cgq_yamldoc_check_keys (c->y, v) < 0)
        rc = -1;
    else {
        bool repeat = false;
        for (size_t i = 0; i < cgq_yamldoc_npairs (v); i++) {
            const char *d = cgq_yamldoc_text (cgq_yamldoc_key (c->y, v, i));
            repeat |= !strcmp (d, "repeat") || !strcmp (d, "of");
        }
        size_t nkeys = cgq_yamldoc_npairs (v);
        if (repeat)
            rc = s_parse_repeat (c, name, v, p);
        else if (nkeys != 1)
            rc = cgq_yamldoc_fail (
                c->y, nkeys ? cgq_yamldoc_key (c->y, v, 1) : v,
                "space.%s must have exactly one distribution key, found %zu (write "
                "%s: {choice: [a, b]}, or %s: {value: {...}} for a mapping constant)",
                name, nkeys, name, name);
        else
            rc = s_parse_dist (c, name, cgq_yamldoc_key (c->y, v, 0), cgq_yamldoc_val (c->y, v, 0),
                               p, false);
    }
    if (rc < 0) {
        s_param_fini (p);
        return -1;
    }
    p->name = cgq_xstrdup (name);
    json_object_set_new (spec->param_index, name, json_integer ((json_int_t) spec->nparams));
    spec->nparams++;
    return 0;
}

static int
s_parse_space (s_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *v)
{
    if (cgq_yamldoc_is_null (v))
        return 0;
    if (cgq_yamldoc_expect_map (c->y, v, "space",
                                "write space: {lr: {loguniform: [1.0e-4, 1.0e-1]}}") < 0)
        return -1;
    size_t n = cgq_yamldoc_npairs (v);
    spec->params = cgq_xcalloc (n, sizeof *spec->params);
    spec->param_index = json_object ();
    for (size_t pi = 0; pi < cgq_yamldoc_npairs (v); pi++)
        if (s_parse_param (c, spec, cgq_yamldoc_key (c->y, v, pi), cgq_yamldoc_val (c->y, v, pi)) <
            0)
            return -1;
    return 0;
}

// --- search, objective, trial ----------------------------------------------

static const struct {
    cgq_search_alg_t alg;
    const char *name;
    const char *keys; // the keys of search that this algorithm reads
} s_search_algs[] = {
    {CGQ_SEARCH_RANDOM, "random", "algorithm, samples, concurrency, seed"},
    {CGQ_SEARCH_GRID, "grid", "algorithm, samples, concurrency, seed"},
    {CGQ_SEARCH_EVOLUTION, "evolution",
     "algorithm, samples, concurrency, seed, population, tournament, initial, batch"},
    {CGQ_SEARCH_NSGA2, "nsga2",
     "algorithm, samples, concurrency, seed, population, initial, batch, crossover, mutation"},
    {CGQ_SEARCH_BAYES, "bayes", "algorithm, samples, concurrency, seed, initial, candidates"},
    {CGQ_SEARCH_LIST, "list", "algorithm, points, file, concurrency"},
};
#define S_NALGS (sizeof s_search_algs / sizeof *s_search_algs)
static const char *s_alg_names = "random, grid, evolution, nsga2, bayes, list";

const char *
cgq_spec_search_name (cgq_search_alg_t alg)
{
    for (size_t i = 0; i < S_NALGS; i++)
        if (s_search_algs[i].alg == alg)
            return s_search_algs[i].name;
    return "?";
}

// s_alg_reads is true when algorithm alg reads search.key. An empty key (a
// YAML key written as "" or as an anchor alone) reads nothing: strstr would
// find it everywhere, and the loop below would never advance.
static bool
s_alg_reads (cgq_search_alg_t alg, const char *key)
{
    if (!*key)
        return false;
    for (size_t i = 0; i < S_NALGS; i++) {
        if (s_search_algs[i].alg != alg)
            continue;
        size_t n = strlen (key);
        for (const char *p = s_search_algs[i].keys; (p = strstr (p, key)); p += n)
            if ((p == s_search_algs[i].keys || p[-1] == ' ') && (p[n] == ',' || p[n] == 0))
                return true;
    }
    return false;
}

// s_readers lists the algorithms that read search.key, for messages.
static void
s_readers (const char *key, char *buf, size_t len)
{
    buf[0] = 0;
    size_t at = 0;
    for (size_t i = 0; i < S_NALGS; i++)
        if (s_alg_reads (s_search_algs[i].alg, key) && at < len)
            at += (size_t) snprintf (buf + at, len - at, "%s%s", at ? ", " : "",
                                     s_search_algs[i].name);
}

static int
s_get_u32 (s_ctx_t *c, const cgq_yamldoc_node_t *e, const char *what, long long min,
           const char *hint, uint32_t *out)
{
    long long n;
    if (cgq_yamldoc_get_int (c->y, e, what, min, 1000000, hint, &n) < 0)
        return -1;
    *out = (uint32_t) n;
    return 0;
}

static int
s_get_prob (s_ctx_t *c, const cgq_yamldoc_node_t *e, const char *what, const char *hint,
            double *out)
{
    double d;
    if (cgq_yamldoc_get_number (c->y, e, what, hint, &d) < 0)
        return -1;
    if (d < 0 || d > 1)
        return cgq_yamldoc_fail (c->y, e, "%s must be a probability in [0, 1], not %s (%s)", what,
                                 cgq_yamldoc_text (e), hint);
    *out = d;
    return 0;
}

static int s_read_points_file (s_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *e);

static int
s_parse_search (s_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *v)
{
    if (cgq_yamldoc_is_null (v))
        return 0;
    if (cgq_yamldoc_expect_map (c->y, v, "search",
                                "write search: {algorithm: random, samples: 16}") < 0)
        return -1;
    // The algorithm first: it decides which other keys mean something.
    for (size_t pi = 0; pi < cgq_yamldoc_npairs (v); pi++) {
        const cgq_yamldoc_node_t *k = cgq_yamldoc_key (c->y, v, pi),
                                 *e = cgq_yamldoc_val (c->y, v, pi);
        if (strcmp (cgq_yamldoc_text (k), "algorithm"))
            continue;
        const char *a;
        char hint[128];
        snprintf (hint, sizeof hint, "write e.g. algorithm: random; one of: %s", s_alg_names);
        if (cgq_yamldoc_get_text (c->y, e, "search.algorithm", hint, &a) < 0)
            return -1;
        size_t i = 0;
        while (i < S_NALGS && strcmp (a, s_search_algs[i].name))
            i++;
        if (i == S_NALGS)
            return cgq_yamldoc_fail (c->y, e, "unknown search.algorithm '%s' (expected one of: %s)",
                                     a, s_alg_names);
        spec->search.algorithm = s_search_algs[i].alg;
        c->alg_node = e;
    }
    cgq_search_alg_t alg = spec->search.algorithm;
    const char *aname = cgq_spec_search_name (alg);
    for (size_t pi = 0; pi < cgq_yamldoc_npairs (v); pi++) {
        const cgq_yamldoc_node_t *k = cgq_yamldoc_key (c->y, v, pi),
                                 *e = cgq_yamldoc_val (c->y, v, pi);
        const char *key = cgq_yamldoc_text (k);
        long long n;
        if (!strcmp (key, "algorithm"))
            continue;
        if (!s_alg_reads (alg, key)) {
            char who[128];
            s_readers (key, who, sizeof who);
            if (*who)
                return cgq_yamldoc_fail (
                    c->y, k,
                    "search.%s applies to algorithm %s, not %s (remove it, or set "
                    "algorithm: %.*s)",
                    key, who, aname, (int)strcspn (who, ","), who);
            for (size_t i = 0; i < S_NALGS; i++)
                if (s_search_algs[i].alg == alg)
                    return cgq_yamldoc_unknown_key (c->y, k, "search", s_search_algs[i].keys);
        }
        if (!strcmp (key, "samples")) {
            if (cgq_yamldoc_get_int (c->y, e, "search.samples", 1, LLONG_MAX,
                                     "write e.g. samples: 16", &n) < 0)
                return -1;
            spec->search.samples = (uint64_t) n;
        }
        else if (!strcmp (key, "concurrency")) {
            if (cgq_yamldoc_get_int (c->y, e, "search.concurrency", 0, UINT32_MAX,
                                     "write e.g. concurrency: 8, or 0 for no limit", &n) < 0)
                return -1;
            spec->search.concurrency = (uint32_t) n;
        }
        else if (!strcmp (key, "seed")) {
            if (cgq_yamldoc_get_int (c->y, e, "search.seed", 0, LLONG_MAX, "write e.g. seed: 1",
                                     &n) < 0)
                return -1;
            spec->search.seed = (uint64_t) n;
        }
        else if (!strcmp (key, "population")) {
            if (s_get_u32 (c, e, "search.population", 2, "write e.g. population: 50",
                           &spec->search.population) < 0)
                return -1;
        }
        else if (!strcmp (key, "tournament")) {
            if (s_get_u32 (c, e, "search.tournament", 1, "write e.g. tournament: 5",
                           &spec->search.tournament) < 0)
                return -1;
        }
        else if (!strcmp (key, "initial")) {
            if (s_get_u32 (c, e, "search.initial", 1, "write e.g. initial: 50",
                           &spec->search.initial) < 0)
                return -1;
        }
        else if (!strcmp (key, "batch")) {
            if (s_get_u32 (c, e, "search.batch", 1, "write e.g. batch: 50", &spec->search.batch) <
                0)
                return -1;
        }
        else if (!strcmp (key, "candidates")) {
            if (s_get_u32 (c, e, "search.candidates", 1, "write e.g. candidates: 1000",
                           &spec->search.candidates) < 0)
                return -1;
        }
        else if (!strcmp (key, "crossover")) {
            if (s_get_prob (c, e, "search.crossover", "write e.g. crossover: 0.9",
                            &spec->search.crossover) < 0)
                return -1;
        }
        else if (!strcmp (key, "mutation")) {
            if (s_get_prob (c, e, "search.mutation",
                            "write e.g. mutation: 0.1, or leave it out for 1/(number of genes)",
                            &spec->search.mutation) < 0)
                return -1;
        }
        else if (!strcmp (key, "points")) {
            if (c->file_key)
                return cgq_yamldoc_fail (c->y, k,
                                         "search has both points and file (keep one of them)");
            char buf[96];
            if (e->type != CGQ_YAMLDOC_SEQ || cgq_yamldoc_nitems (e) == 0)
                return cgq_yamldoc_fail (
                    c->y, e,
                    "search.points must be a non-empty list of points, not %s (write "
                    "points: [{lr: 0.01, hidden: 64}, {lr: 0.1, hidden: 128}])",
                    e->type == CGQ_YAMLDOC_SEQ ? "an empty list"
                                               : cgq_yamldoc_what (e, buf, sizeof buf));
            for (size_t i = 0; i < cgq_yamldoc_nitems (e); i++) {
                const cgq_yamldoc_node_t *pt = cgq_yamldoc_item (c->y, e, i);
                if (pt->type != CGQ_YAMLDOC_MAP)
                    return cgq_yamldoc_fail (
                        c->y, pt,
                        "search.points[%zu] must be a mapping of param values, not %s "
                        "(write {lr: 0.01, hidden: 64})",
                        i, cgq_yamldoc_what (pt, buf, sizeof buf));
            }
            json_decref (spec->search.points);
            spec->search.points = cgq_yamldoc_to_json (c->y, e);
            if (!spec->search.points)
                return -1;
            c->points_node = e;
        }
        else if (!strcmp (key, "file")) {
            if (c->points_node)
                return cgq_yamldoc_fail (c->y, k,
                                         "search has both points and file (keep one of them)");
            c->file_key = k;
            if (s_read_points_file (c, spec, e) < 0)
                return -1;
        }
    }
    if (alg == CGQ_SEARCH_LIST && !c->points_node && !c->file_key)
        return cgq_yamldoc_fail (
            c->y, c->alg_node,
            "algorithm list needs the points to try (write points: [{lr: 0.01}, "
            "...] or file: points.jsonl)");
    // Defaults that depend on the algorithm.
    bool evo = alg == CGQ_SEARCH_EVOLUTION, ns = alg == CGQ_SEARCH_NSGA2;
    if (!spec->search.population)
        spec->search.population = 50;
    if (!spec->search.tournament)
        spec->search.tournament = 5;
    if (!spec->search.initial)
        spec->search.initial = alg == CGQ_SEARCH_BAYES ? 10 : spec->search.population;
    if (!spec->search.batch)
        spec->search.batch = spec->search.population;
    if (!spec->search.candidates)
        spec->search.candidates = 1000;
    if (evo && spec->search.tournament > spec->search.population)
        return cgq_yamldoc_fail (
            c->y, v,
            "search.tournament %u is larger than search.population %u (a tournament "
            "draws from the population; write e.g. tournament: %u)",
            spec->search.tournament, spec->search.population,
            spec->search.population < 5 ? spec->search.population : 5);
    (void) ns;
    return 0;
}

// --- algorithm list: points ---------------------------------------------------

// s_csv_field reads one field of a CSV line at *p (comma separated, "..."
// quoting with "" for a quote) into a new JSON value: an integer, a real,
// true/false, or else text. Returns NULL with *bad set on a malformed quote.
static json_t *
s_csv_field (const char **p, bool *bad)
{
    cgq_buf_t b;
    cgq_buf_init (&b);
    const char *s = *p;
    bool quoted = *s == '"';
    if (quoted) {
        s++;
        for (;;) {
            if (!*s) {
                *bad = true;
                cgq_buf_fini (&b);
                return NULL;
            }
            if (*s == '"' && s[1] == '"')
                cgq_buf_append (&b, "\"", 1), s += 2;
            else if (*s == '"') {
                s++;
                break;
            }
            else
                cgq_buf_append (&b, s++, 1);
        }
        if (*s && *s != ',') {
            *bad = true;
            cgq_buf_fini (&b);
            return NULL;
        }
    }
    else {
        size_t n = strcspn (s, ",");
        cgq_buf_append (&b, s, n);
        s += n;
    }
    if (*s == ',')
        s++;
    *p = s;
    char *t = b.data ? b.data : (char *) "";
    json_t *v = NULL;
    if (!quoted && *t) {
        char *end;
        errno = 0;
        long long i = strtoll (t, &end, 10);
        if (!*end && !errno)
            v = json_integer (i);
        else {
            double d = strtod (t, &end);
            if (!*end && isfinite (d))
                v = json_real (d);
            else if (!strcmp (t, "true") || !strcmp (t, "false"))
                v = json_boolean (!strcmp (t, "true"));
        }
    }
    if (!v)
        v = json_string (t);
    if (!v)
        v = json_string (""); // not UTF-8: the point check names the param
    cgq_buf_fini (&b);
    return v;
}

// s_read_points_file reads search.file (relative to c->dir) into
// spec->search.points: .jsonl / .ndjson (one JSON object a line), .json (one
// array of objects) or .csv (a header of param names, then one point a line).
static int
s_read_points_file (s_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *e)
{
    const char *name;
    if (cgq_yamldoc_get_text (c->y, e, "search.file", "write file: points.jsonl (or .csv, .json)",
                              &name) < 0)
        return -1;
    c->file_node = e;
    free (spec->search.file);
    spec->search.file = cgq_xstrdup (name);
    const char *dot = strrchr (name, '.');
    const char *ext = dot && !strchr (dot, '/') ? dot + 1 : "";
    int fmt = !strcmp (ext, "jsonl") || !strcmp (ext, "ndjson") ? 1
              : !strcmp (ext, "json")                           ? 2
              : !strcmp (ext, "csv")                            ? 3
                                                                : 0;
    if (!fmt)
        return cgq_yamldoc_fail (
            c->y, e,
            "search.file '%s' must end in .jsonl, .ndjson, .json or .csv (the format "
            "of the points)",
            name);
    if (!c->dir)
        return cgq_yamldoc_fail (
            c->y, e,
            "search.file '%s' is read where the spec file is, by cgq validate and "
            "cgq submit, which send its points inline (write points: [...] to pass "
            "them in the text)",
            name);
    char *path = name[0] == '/' ? cgq_xstrdup (name) : cgq_xasprintf ("%s/%s", c->dir, name);
    FILE *f = fopen (path, "rb");
    if (!f) {
        int rc = cgq_yamldoc_fail (c->y, e,
                                   "search.file '%s': cannot read %s: %s (the path is relative to "
                                   "the spec's directory)",
                                   name, path, strerror (errno));
        free (path);
        return rc;
    }
    free (path);
    cgq_buf_t b;
    cgq_buf_init (&b);
    char chunk[16384];
    size_t got;
    while (b.len <= s_max_bytes && (got = fread (chunk, 1, sizeof chunk, f)) > 0)
        cgq_buf_append (&b, chunk, got);
    fclose (f);
    if (b.len > s_max_bytes) {
        cgq_buf_fini (&b);
        return cgq_yamldoc_fail (
            c->y, e,
            "search.file '%s' is longer than %lu bytes (the points travel inside the "
            "spec, which has that limit; split the search)",
            name, (unsigned long)s_max_bytes);
    }
    const char *text = b.data ? b.data : "";
    if (b.len && memchr (text, 0, b.len)) {
        cgq_buf_fini (&b);
        return cgq_yamldoc_fail (c->y, e,
                                 "search.file '%s' holds a NUL byte (points are UTF-8 text)", name);
    }
    json_t *points = json_array ();
    size_t cap = 0, lineno = 0;
    int rc = 0;
    json_t *header = NULL;
    if (fmt == 2) {
        json_error_t je;
        json_t *all = json_loadb (text, b.len, 0, &je);
        if (!json_is_array (all))
            rc = cgq_yamldoc_fail (c->y, e, "search.file %s:%d: %s (write a JSON array of objects)",
                                   name, je.line, all ? "not a JSON array" : je.text);
        for (size_t i = 0; rc == 0 && i < json_array_size (all); i++) {
            if (!json_is_object (json_array_get (all, i)))
                rc = cgq_yamldoc_fail (c->y, e, "search.file %s: point %zu is not a JSON object",
                                       name, i);
            json_array_append (points, json_array_get (all, i));
        }
        json_decref (all);
    }
    for (const char *line = text; fmt != 2 && rc == 0 && line < text + b.len;) {
        const char *nl = memchr (line, '\n', (size_t) (text + b.len - line));
        size_t n = nl ? (size_t) (nl - line) : (size_t) (text + b.len - line);
        char *l = cgq_xstrndup (line, n);
        line += n + 1;
        lineno++;
        if (n && l[n - 1] == '\r')
            l[--n] = 0;
        const char *q = l;
        while (isspace ((unsigned char) *q))
            q++;
        if (!*q) {
            free (l);
            continue;
        }
        json_t *pt = NULL;
        if (fmt == 1) {
            json_error_t je;
            pt = json_loads (l, 0, &je);
            if (!json_is_object (pt))
                rc = cgq_yamldoc_fail (c->y, e,
                                       "search.file %s:%zu: %s (write one JSON object a line)",
                                       name, lineno, pt ? "not a JSON object" : je.text);
        }
        else if (!header) {
            header = json_array ();
            bool bad = false;
            for (const char *p = l; !bad && *p;) {
                json_t *h = s_csv_field (&p, &bad);
                if (h)
                    json_array_append_new (header, h);
            }
            if (bad)
                rc = cgq_yamldoc_fail (
                    c->y, e, "search.file %s:%zu: unterminated quote in the header", name, lineno);
            free (l);
            continue;
        }
        else {
            pt = json_object ();
            bool bad = false;
            size_t i = 0;
            for (const char *p = l; !bad && *p; i++) {
                json_t *val = s_csv_field (&p, &bad);
                if (!val)
                    break;
                json_t *h = json_array_get (header, i);
                if (!h) {
                    json_decref (val);
                    rc = cgq_yamldoc_fail (
                        c->y, e, "search.file %s:%zu: more fields than the header's %zu names",
                        name, lineno, json_array_size (header));
                    break;
                }
                char *hs = cgq_space_value_str (h);
                json_object_set_new (pt, hs, val);
                free (hs);
            }
            if (bad)
                rc = cgq_yamldoc_fail (c->y, e, "search.file %s:%zu: unterminated quote", name,
                                       lineno);
            else if (rc == 0 && i != json_array_size (header))
                rc = cgq_yamldoc_fail (c->y, e,
                                       "search.file %s:%zu: %zu fields, the header has %zu names",
                                       name, lineno, i, json_array_size (header));
        }
        free (l);
        if (rc < 0) {
            json_decref (pt);
            break;
        }
        size_t at = json_array_size (points);
        if (at == cap) {
            cap = cap ? 2 * cap : 64;
            c->point_lines = cgq_xrealloc (c->point_lines, cap * sizeof *c->point_lines);
        }
        c->point_lines[at] = lineno;
        json_array_append_new (points, pt);
    }
    json_decref (header);
    cgq_buf_fini (&b);
    if (rc == 0 && json_array_size (points) == 0)
        rc = cgq_yamldoc_fail (c->y, e, "search.file '%s' holds no points (write one point a line)",
                               name);
    if (rc < 0) {
        json_decref (points);
        return -1;
    }
    json_decref (spec->search.points);
    spec->search.points = points;
    return 0;
}

// s_check_points checks every point of algorithm list against the space: a
// value for each param that is not a constant, and no other names.
static int
s_check_points (s_ctx_t *c, cgq_spec_t *spec)
{
    for (size_t i = 0; i < json_array_size (spec->search.points); i++) {
        json_t *pt = json_array_get (spec->search.points, i);
        const cgq_yamldoc_node_t *at =
            c->points_node ? cgq_yamldoc_item (c->y, c->points_node, i) : c->file_node;
        char where[512];
        if (c->points_node)
            snprintf (where, sizeof where, "search.points[%zu]", i);
        else if (c->point_lines)
            snprintf (where, sizeof where, "point of %s:%zu", spec->search.file,
                      c->point_lines[i]);
        else
            snprintf (where, sizeof where, "point %zu of %s", i, spec->search.file);
        const char *key;
        json_t *val;
        json_object_foreach (pt, key, val)
        {
            const cgq_param_t *p = cgq_spec_param (spec, key);
            if (!p)
                return cgq_yamldoc_fail (
                    c->y, at,
                    "%s names '%s', which is not a param of space (declare it in "
                    "space, e.g. %s: {choice: [...]}, or remove it)",
                    where, key, key);
            if (p->kind == CGQ_PARAM_CONST)
                return cgq_yamldoc_fail (
                    c->y, at,
                    "%s sets '%s', a constant of space (remove it from the point, or "
                    "make the param a distribution)",
                    where, key);
        }
        for (size_t j = 0; j < spec->nparams; j++) {
            const cgq_param_t *p = &spec->params[j];
            if (p->kind != CGQ_PARAM_CONST && !json_object_get (pt, p->name))
                return cgq_yamldoc_fail (c->y, at,
                                         "%s has no value for param '%s' (every point sets every "
                                         "param that is not a constant)",
                                         where, p->name);
        }
    }
    return 0;
}

// --- objectives -----------------------------------------------------------------

static void
s_objective_fini (cgq_objective_t *o)
{
    free (o->metric);
    cgq_expr_destroy (&o->expr);
    memset (o, 0, sizeof *o);
}

// s_parse_one_objective reads {metric: NAME | expr: TEXT, mode: max | min}
// into o; where names it in messages ("objective", "objectives[1]").
static int
s_parse_one_objective (s_ctx_t *c, const char *where, const cgq_yamldoc_node_t *key,
                       const cgq_yamldoc_node_t *v, cgq_objective_t *o)
{
    char hint[128], what[96];
    snprintf (hint, sizeof hint, "write %s: {metric: val_loss, mode: min}", where);
    if (cgq_yamldoc_expect_map (c->y, v, where, hint) < 0)
        return -1;
    const char *metric = NULL;
    const cgq_yamldoc_node_t *first = NULL;
    int mode = 0;
    for (size_t pi = 0; pi < cgq_yamldoc_npairs (v); pi++) {
        const cgq_yamldoc_node_t *k = cgq_yamldoc_key (c->y, v, pi),
                                 *e = cgq_yamldoc_val (c->y, v, pi);
        const char *kt = cgq_yamldoc_text (k);
        if (!strcmp (kt, "metric") || !strcmp (kt, "expr")) {
            if (first)
                return cgq_yamldoc_fail (
                    c->y, k,
                    "%s has both metric and expr (keep one: metric: NAME, or expr: "
                    "\"(acc*100)/latency\")",
                    where);
            first = k;
            snprintf (what, sizeof what, "%s.%s", where, kt);
            if (cgq_yamldoc_get_text (c->y, e, what,
                                      !strcmp (kt, "metric")
                                          ? "write metric: val_loss"
                                          : "write expr: \"(acc*100)/latency_gpu\"",
                                      &metric) < 0)
                return -1;
            if (!strcmp (kt, "expr")) {
                int column = 1;
                char msg[512];
                o->expr = cgq_expr_parse (metric, &column, msg, sizeof msg);
                if (!o->expr) {
                    const char *m = strstr (msg, ": ");
                    m = m ? m + 2 : msg;
                    int col = e->col + (e->quoted ? 1 : 0) + column - 1;
                    return cgq_yamldoc_fail_at (c->y, e->line, col, "%s: %s", what, m);
                }
            }
        }
        else if (!strcmp (kt, "mode")) {
            const char *m;
            snprintf (what, sizeof what, "%s.mode", where);
            if (cgq_yamldoc_get_text (c->y, e, what, "write mode: max or mode: min", &m) < 0)
                return -1;
            if (!strcmp (m, "max"))
                mode = 1;
            else if (!strcmp (m, "min"))
                mode = -1;
            else
                return cgq_yamldoc_fail (
                    c->y, e, "%s must be max or min, not '%s' (write mode: max or mode: min)", what,
                    m);
        }
        else
            return cgq_yamldoc_unknown_key (c->y, k, where, "metric, expr, mode");
    }
    if (!metric)
        return cgq_yamldoc_fail (
            c->y, key,
            "%s.metric is missing (write metric: NAME, a metric that the trial "
            "reports, or expr: \"(acc*100)/latency\")",
            where);
    if (!mode)
        return cgq_yamldoc_fail (c->y, key, "%s.mode is missing (write mode: max or mode: min)",
                                 where);
    o->metric = cgq_xstrdup (metric);
    o->mode = mode;
    return 0;
}

static int
s_parse_objective (s_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *key,
                   const cgq_yamldoc_node_t *v)
{
    if (cgq_yamldoc_is_null (v))
        return 0;
    if (c->objectives_key)
        return cgq_yamldoc_fail (
            c->y, key,
            "objective and objectives are exclusive (objectives written at %d:%d; "
            "keep one of them)",
            c->objectives_key->line, c->objectives_key->col);
    c->objective_key = key;
    if (s_parse_one_objective (c, "objective", key, v, &spec->objective) < 0)
        return -1;
    spec->nobjectives = 1;
    return 0;
}

static int
s_parse_objectives (s_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *key,
                    const cgq_yamldoc_node_t *v)
{
    char buf[96];
    if (c->objective_key)
        return cgq_yamldoc_fail (
            c->y, key,
            "objective and objectives are exclusive (objective written at %d:%d; "
            "keep one of them)",
            c->objective_key->line, c->objective_key->col);
    c->objectives_key = key;
    const char *hint = "write objectives: [{metric: time, mode: min}, {metric: memory, mode: min}]";
    if (v->type != CGQ_YAMLDOC_SEQ)
        return cgq_yamldoc_fail (
            c->y, v, "objectives must be a list of 2 to %d objectives, not %s (%s)",
            CGQ_SPEC_MAX_OBJECTIVES, cgq_yamldoc_what (v, buf, sizeof buf), hint);
    if (cgq_yamldoc_nitems (v) < 2 || cgq_yamldoc_nitems (v) > CGQ_SPEC_MAX_OBJECTIVES)
        return cgq_yamldoc_fail (
            c->y, v,
            "objectives must list 2 to %d objectives, not %zu (%s; write objective: "
            "{...} for one)",
            CGQ_SPEC_MAX_OBJECTIVES, cgq_yamldoc_nitems (v), hint);
    for (size_t i = 0; i < cgq_yamldoc_nitems (v); i++) {
        char where[48];
        snprintf (where, sizeof where, "objectives[%zu]", i);
        const cgq_yamldoc_node_t *e = cgq_yamldoc_item (c->y, v, i);
        if (s_parse_one_objective (c, where, e, e, &spec->objectives[i]) < 0)
            return -1;
        spec->nobjectives = i + 1;
    }
    return 0;
}

// --- notify -----------------------------------------------------------------------

static const struct {
    const char *name;
    unsigned bit;
} s_notify_events[] = {{"finished", CGQ_NOTIFY_FINISHED},
                       {"failed", CGQ_NOTIFY_FAILED},
                       {"cancelled", CGQ_NOTIFY_CANCELLED}};

const char *
cgq_notify_event_name (unsigned event)
{
    for (size_t i = 0; i < sizeof s_notify_events / sizeof s_notify_events[0]; i++)
        if (s_notify_events[i].bit == event)
            return s_notify_events[i].name;
    return "?";
}

static int
s_notify_event (s_ctx_t *c, const cgq_yamldoc_node_t *e, unsigned *on)
{
    const char *t;
    if (cgq_yamldoc_get_text (c->y, e, "notify.on", "write on: [finished, failed]", &t) < 0)
        return -1;
    for (size_t i = 0; i < sizeof s_notify_events / sizeof s_notify_events[0]; i++)
        if (!strcmp (t, s_notify_events[i].name)) {
            *on |= s_notify_events[i].bit;
            return 0;
        }
    return cgq_yamldoc_fail (
        c->y, e, "unknown notify event '%s' (expected one of: finished, failed, cancelled)", t);
}

static int
s_parse_notify (s_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *key,
                const cgq_yamldoc_node_t *v)
{
    if (cgq_yamldoc_is_null (v))
        return 0;
    if (cgq_yamldoc_expect_map (
            c->y, v, "notify",
            "write notify: {url: http://host:port/path, on: [finished, failed]}") < 0)
        return -1;
    bool on_given = false;
    for (size_t pi = 0; pi < cgq_yamldoc_npairs (v); pi++) {
        const cgq_yamldoc_node_t *k = cgq_yamldoc_key (c->y, v, pi),
                                 *e = cgq_yamldoc_val (c->y, v, pi);
        const char *kt = cgq_yamldoc_text (k);
        if (!strcmp (kt, "url")) {
            const char *t;
            if (cgq_yamldoc_get_text (c->y, e, "notify.url", "write url: http://host:port/path",
                                      &t) < 0)
                return -1;
            const char *rest = !strncmp (t, "http://", 7)    ? t + 7
                               : !strncmp (t, "https://", 8) ? t + 8
                                                             : NULL;
            if (!rest)
                return cgq_yamldoc_fail (
                    c->y, e,
                    "notify.url '%s' is not an http:// or https:// URL (write url: "
                    "http://host:port/path)",
                    t);
            if (!*rest || *rest == '/' || strpbrk (t, " \t\r\n"))
                return cgq_yamldoc_fail (c->y, e,
                                         "notify.url '%s' has no host or holds a space (write url: "
                                         "http://host:port/path)",
                                         t);
            free (spec->notify.url);
            spec->notify.url = cgq_xstrdup (t);
        }
        else if (!strcmp (kt, "on")) {
            on_given = true;
            spec->notify.on = 0;
            if (e->type == CGQ_YAMLDOC_SEQ) {
                if (!cgq_yamldoc_nitems (e))
                    return cgq_yamldoc_fail (
                        c->y, e,
                        "notify.on is empty (write on: [finished, failed], or remove "
                        "notify)");
                for (size_t i = 0; i < cgq_yamldoc_nitems (e); i++)
                    if (s_notify_event (c, cgq_yamldoc_item (c->y, e, i), &spec->notify.on) < 0)
                        return -1;
            }
            else if (s_notify_event (c, e, &spec->notify.on) < 0)
                return -1;
        }
        else
            return cgq_yamldoc_unknown_key (c->y, k, "notify", "url, on");
    }
    if (!spec->notify.url)
        return cgq_yamldoc_fail (c->y, key,
                                 "notify.url is missing (write url: http://host:port/path)");
    if (!on_given)
        spec->notify.on = CGQ_NOTIFY_FINISHED | CGQ_NOTIFY_FAILED;
    return 0;
}

// --- early_stop -------------------------------------------------------------------

static int
s_parse_early_stop (s_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *key,
                    const cgq_yamldoc_node_t *v)
{
    if (cgq_yamldoc_is_null (v))
        return 0;
    c->early_key = key;
    if (cgq_yamldoc_expect_map (c->y, v, "early_stop",
                                "write early_stop: {algorithm: asha, attribute: epoch, grace: 1, "
                                "reduction: 3, max: 100}") < 0)
        return -1;
    spec->early_stop.grace = 1;
    spec->early_stop.reduction = 3;
    spec->early_stop.max = 100;
    const cgq_yamldoc_node_t *max_node = NULL;
    for (size_t pi = 0; pi < cgq_yamldoc_npairs (v); pi++) {
        const cgq_yamldoc_node_t *k = cgq_yamldoc_key (c->y, v, pi),
                                 *e = cgq_yamldoc_val (c->y, v, pi);
        const char *kt = cgq_yamldoc_text (k);
        const char *t;
        long long n;
        if (!strcmp (kt, "algorithm")) {
            if (cgq_yamldoc_get_text (c->y, e, "early_stop.algorithm",
                                      "write algorithm: asha or median", &t) < 0)
                return -1;
            if (!strcmp (t, "asha"))
                spec->early_stop.algorithm = CGQ_EARLY_STOP_ASHA;
            else if (!strcmp (t, "median"))
                spec->early_stop.algorithm = CGQ_EARLY_STOP_MEDIAN;
            else
                return cgq_yamldoc_fail (
                    c->y, e,
                    "unknown early_stop.algorithm '%s' (expected one of: asha, "
                    "median)",
                    t);
        }
        else if (!strcmp (kt, "attribute") || !strcmp (kt, "metric")) {
            char what[64];
            snprintf (what, sizeof what, "early_stop.%s", kt);
            if (cgq_yamldoc_get_text (c->y, e, what,
                                      !strcmp (kt, "metric") ? "write metric: val_loss"
                                                             : "write attribute: epoch",
                                      &t) < 0)
                return -1;
            char **dst = !strcmp (kt, "metric") ? &spec->early_stop.metric
                                                : &spec->early_stop.attribute;
            *dst = cgq_xstrdup (t);
        }
        else if (!strcmp (kt, "mode")) {
            if (cgq_yamldoc_get_text (c->y, e, "early_stop.mode", "write mode: max or mode: min",
                                      &t) < 0)
                return -1;
            if (strcmp (t, "max") && strcmp (t, "min"))
                return cgq_yamldoc_fail (
                    c->y, e,
                    "early_stop.mode must be max or min, not '%s' (write mode: max "
                    "or mode: min)",
                    t);
            spec->early_stop.mode = !strcmp (t, "max") ? 1 : -1;
            c->es_mode_given = true;
        }
        else if (!strcmp (kt, "grace")) {
            if (cgq_yamldoc_get_int (c->y, e, "early_stop.grace", 1, LLONG_MAX,
                                     "write e.g. grace: 1", &n) < 0)
                return -1;
            spec->early_stop.grace = (uint64_t) n;
        }
        else if (!strcmp (kt, "max")) {
            if (cgq_yamldoc_get_int (c->y, e, "early_stop.max", 1, LLONG_MAX, "write e.g. max: 100",
                                     &n) < 0)
                return -1;
            spec->early_stop.max = (uint64_t) n;
            max_node = e;
        }
        else if (!strcmp (kt, "reduction")) {
            double d;
            if (cgq_yamldoc_get_number (c->y, e, "early_stop.reduction", "write e.g. reduction: 3",
                                        &d) < 0)
                return -1;
            if (!(d > 1) || !isfinite (d))
                return cgq_yamldoc_fail (
                    c->y, e,
                    "early_stop.reduction must be a number > 1, not %s (write e.g. "
                    "reduction: 3: a third of the trials go on at each rung)",
                    cgq_yamldoc_text (e));
            spec->early_stop.reduction = d;
            c->reduction_key = k;
        }
        else
            return cgq_yamldoc_unknown_key (
                c->y, k, "early_stop", "algorithm, attribute, metric, mode, grace, reduction, max");
    }
    if (spec->early_stop.algorithm == CGQ_EARLY_STOP_NONE)
        return cgq_yamldoc_fail (
            c->y, key,
            "early_stop.algorithm is missing (write algorithm: asha or algorithm: "
            "median)");
    if (c->reduction_key && spec->early_stop.algorithm != CGQ_EARLY_STOP_ASHA)
        return cgq_yamldoc_fail (c->y, c->reduction_key,
                                 "early_stop.reduction applies to algorithm asha only (remove it)");
    if (spec->early_stop.max < spec->early_stop.grace)
        return cgq_yamldoc_fail (
            c->y, max_node ? max_node : key,
            "early_stop.max %llu is below early_stop.grace %llu (no trial could be "
            "stopped; write max: %llu or more)",
            (unsigned long long)spec->early_stop.max, (unsigned long long)spec->early_stop.grace,
            (unsigned long long)spec->early_stop.grace);
    if (!spec->early_stop.attribute)
        spec->early_stop.attribute = cgq_xstrdup ("epoch");
    return 0;
}

// s_check_early_stop completes early_stop from the objective, which may be
// written after it.
static int
s_check_early_stop (s_ctx_t *c, cgq_spec_t *spec)
{
    if (spec->early_stop.algorithm == CGQ_EARLY_STOP_NONE)
        return 0;
    const cgq_objective_t *o = spec->nobjectives == 1 ? &spec->objective : NULL;
    if (!spec->early_stop.metric) {
        if (!o)
            return cgq_yamldoc_fail (
                c->y, c->early_key,
                "early_stop.metric is missing and the spec has %s (write metric: NAME "
                "and mode: max or min)",
                spec->nobjectives ? "several objectives" : "no objective");
        spec->early_stop.metric = cgq_xstrdup (o->metric);
        spec->early_stop.expr = o->expr;
        if (!c->es_mode_given)
            spec->early_stop.mode = o->mode;
    }
    else if (!c->es_mode_given) {
        if (!o || strcmp (o->metric, spec->early_stop.metric))
            return cgq_yamldoc_fail (
                c->y, c->early_key,
                "early_stop.mode is missing (write mode: max or mode: min: which way "
                "early_stop.metric '%s' is better)",
                spec->early_stop.metric);
        spec->early_stop.mode = o->mode;
        spec->early_stop.expr = o->expr;
    }
    return 0;
}

// s_check_search checks what the algorithm needs from the rest of the spec.
static int
s_check_search (s_ctx_t *c, cgq_spec_t *spec)
{
    cgq_search_alg_t alg = spec->search.algorithm;
    const cgq_yamldoc_node_t *at = c->alg_node;
    if ((alg == CGQ_SEARCH_EVOLUTION || alg == CGQ_SEARCH_BAYES) && spec->nobjectives != 1)
        return cgq_yamldoc_fail (
            c->y, at,
            "algorithm %s optimises one objective, and the spec has %s (write "
            "objective: {metric: NAME, mode: max}%s)",
            cgq_spec_search_name (alg), spec->nobjectives ? "several (objectives: [...])" : "none",
            spec->nobjectives ? ", or algorithm: nsga2 for a Pareto front" : "");
    if (alg == CGQ_SEARCH_NSGA2 && spec->nobjectives == 0)
        return cgq_yamldoc_fail (
            c->y, at,
            "algorithm nsga2 needs objectives (write objectives: [{metric: time, "
            "mode: min}, {metric: memory, mode: min}])");
    if (alg == CGQ_SEARCH_LIST)
        return s_check_points (c, spec);
    return 0;
}

static int
s_parse_resources (s_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *v)
{
    if (cgq_yamldoc_is_null (v))
        return 0;
    if (cgq_yamldoc_expect_map (c->y, v, "trial.resources",
                                "write resources: {cpu: 1, gpu: 0.5, memory: 4G}") < 0)
        return -1;
    for (size_t pi = 0; pi < cgq_yamldoc_npairs (v); pi++) {
        const cgq_yamldoc_node_t *k = cgq_yamldoc_key (c->y, v, pi),
                                 *e = cgq_yamldoc_val (c->y, v, pi);
        const char *kt = cgq_yamldoc_text (k);
        double d;
        char buf[96];
        if (!strcmp (kt, "cpu")) {
            if (cgq_yamldoc_get_number (c->y, e, "trial.resources.cpu",
                                        "write e.g. cpu: 2 or cpu: 0.5", &d) < 0)
                return -1;
            if (d < 0)
                return cgq_yamldoc_fail (
                    c->y, e, "trial.resources.cpu must be >= 0, not %s (write e.g. cpu: 1)",
                    cgq_yamldoc_text (e));
            spec->trial.cpu = d;
        }
        else if (!strcmp (kt, "gpu")) {
            if (cgq_yamldoc_get_number (c->y, e, "trial.resources.gpu",
                                        "write e.g. gpu: 1 or gpu: 0.5", &d) < 0)
                return -1;
            if (d < 0)
                return cgq_yamldoc_fail (
                    c->y, e, "trial.resources.gpu must be >= 0, not %s (write e.g. gpu: 1)",
                    cgq_yamldoc_text (e));
            if (d > 1 && d != floor (d))
                return cgq_yamldoc_fail (
                    c->y, e,
                    "trial.resources.gpu %s is neither a share of one GPU (<= 1) "
                    "nor a whole number of GPUs (write gpu: %.0f or gpu: %.0f)",
                    cgq_yamldoc_text (e), floor (d), ceil (d));
            spec->trial.gpu = d;
        }
        else if (!strcmp (kt, "memory")) {
            uint64_t bytes;
            if (e->type != CGQ_YAMLDOC_SCALAR || cgq_yamldoc_is_null (e) ||
                cgq_parse_bytes (cgq_yamldoc_text (e), &bytes) < 0)
                return cgq_yamldoc_fail (c->y, e,
                                         "trial.resources.memory must be a size like 4G, 512M or a "
                                         "number of bytes, not %s (write e.g. memory: 4G)",
                                         cgq_yamldoc_what (e, buf, sizeof buf));
            spec->trial.memory = bytes;
        }
        else
            return cgq_yamldoc_unknown_key (c->y, k, "trial.resources", "cpu, gpu, memory");
    }
    return 0;
}

static int
s_parse_env (s_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *v)
{
    if (cgq_yamldoc_is_null (v))
        return 0;
    if (cgq_yamldoc_expect_map (c->y, v, "trial.env", "write env: {DATA_DIR: /data}") < 0)
        return -1;
    size_t n = cgq_yamldoc_npairs (v);
    spec->trial.env_keys = cgq_xcalloc (n, sizeof (char *));
    spec->trial.env_vals = cgq_xcalloc (n, sizeof (char *));
    for (size_t pi = 0; pi < cgq_yamldoc_npairs (v); pi++) {
        const cgq_yamldoc_node_t *k = cgq_yamldoc_key (c->y, v, pi),
                                 *e = cgq_yamldoc_val (c->y, v, pi);
        const char *kt = cgq_yamldoc_text (k);
        char buf[96];
        if (!s_is_ident (kt, k->len))
            return cgq_yamldoc_fail (
                c->y, k,
                "bad environment variable name '%s' in trial.env (use letters, "
                "digits and _, e.g. DATA_DIR)",
                kt);
        if (e->type != CGQ_YAMLDOC_SCALAR || strlen (cgq_yamldoc_text (e)) != e->len)
            return cgq_yamldoc_fail (
                c->y, e, "trial.env.%s must be a string, not %s (write %s: \"value\")", kt,
                e->type == CGQ_YAMLDOC_SCALAR ? "text with a NUL byte"
                                              : cgq_yamldoc_what (e, buf, sizeof buf),
                kt);
        spec->trial.env_keys[spec->trial.nenv] = cgq_xstrdup (kt);
        spec->trial.env_vals[spec->trial.nenv] = cgq_xstrdup (cgq_yamldoc_text (e));
        spec->trial.nenv++;
    }
    return 0;
}

static int
s_parse_command (s_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *v)
{
    const char *hint = "write command: python3 train.py --lr {lr}, or a list of arguments";
    char buf[96];
    if (v->type == CGQ_YAMLDOC_SEQ) {
        size_t n = cgq_yamldoc_nitems (v);
        if (n == 0)
            return cgq_yamldoc_fail (c->y, v, "trial.command is an empty list (%s)", hint);
        spec->trial.argv = cgq_xcalloc (n + 1, sizeof (char *));
        for (size_t i = 0; i < n; i++) {
            const cgq_yamldoc_node_t *e = cgq_yamldoc_item (c->y, v, i);
            if (e->type != CGQ_YAMLDOC_SCALAR || strlen (cgq_yamldoc_text (e)) != e->len)
                return cgq_yamldoc_fail (
                    c->y, e, "trial.command[%zu] must be a string, not %s (quote it: \"...\")", i,
                    e->type == CGQ_YAMLDOC_SCALAR ? "text with a NUL byte"
                                                  : cgq_yamldoc_what (e, buf, sizeof buf));
            spec->trial.argv[i] = cgq_xstrdup (cgq_yamldoc_text (e));
            spec->trial.argc++;
        }
        if (!*spec->trial.argv[0])
            return cgq_yamldoc_fail (c->y, v, "trial.command[0], the program, is empty (%s)", hint);
        return 0;
    }
    const char *t;
    if (cgq_yamldoc_get_text (c->y, v, "trial.command", hint, &t) < 0)
        return -1;
    const char *q = t;
    while (isspace ((unsigned char) *q))
        q++;
    if (!*q)
        return cgq_yamldoc_fail (c->y, v, "trial.command is blank (%s)", hint);
    spec->trial.command = cgq_xstrdup (t);
    return 0;
}

// s_is_word: a tag name or a benchmark name: letters, digits, '_', '-', '.',
// starting with a letter or a digit.
static bool
s_is_word (const char *s, size_t n)
{
    if (n == 0 || !isalnum ((unsigned char) s[0]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!(isalnum ((unsigned char) s[i]) || strchr ("_-.", s[i])))
            return false;
    return true;
}

// s_parse_on reads on: {device: odroid-xu4, os: tizen}: the tags a device
// must all have. Values are text (numbers as written) without blanks, ','
// or '=', so "device=odroid-xu4, os=tizen" reads back unambiguously.
static int
s_parse_on (s_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *v)
{
    const char *hint = "write on: {device: odroid-xu4}";
    if (cgq_yamldoc_expect_map (c->y, v, "trial.on", hint) < 0)
        return -1;
    if (cgq_yamldoc_npairs (v) == 0)
        return cgq_yamldoc_fail (c->y, v, "trial.on is empty (%s)", hint);
    if (cgq_yamldoc_npairs (v) > CGQ_STAGE_MAX_TAGS)
        return cgq_yamldoc_fail (c->y, v,
                                 "trial.on has %zu tags, more than %d (match on fewer tags)",
                                 cgq_yamldoc_npairs (v), CGQ_STAGE_MAX_TAGS);
    spec->trial.on = json_object ();
    for (size_t pi = 0; pi < cgq_yamldoc_npairs (v); pi++) {
        const cgq_yamldoc_node_t *k = cgq_yamldoc_key (c->y, v, pi),
                                 *e = cgq_yamldoc_val (c->y, v, pi);
        const char *kt = cgq_yamldoc_text (k);
        char buf[96];
        if (!s_is_word (kt, k->len))
            return cgq_yamldoc_fail (
                c->y, k,
                "bad tag name '%s' in trial.on (use letters, digits, '_', '-' and "
                "'.', e.g. device)",
                kt);
        if (e->type != CGQ_YAMLDOC_SCALAR || cgq_yamldoc_is_null (e) ||
            strlen (cgq_yamldoc_text (e)) != e->len)
            return cgq_yamldoc_fail (
                c->y, e, "trial.on.%s must be a tag value, not %s (write %s: odroid-xu4)", kt,
                e->type == CGQ_YAMLDOC_SCALAR && !cgq_yamldoc_is_null (e)
                    ? "text with a NUL byte"
                    : cgq_yamldoc_what (e, buf, sizeof buf),
                kt);
        const char *val = cgq_yamldoc_text (e);
        for (const char *q = val; *q; q++)
            if (isspace ((unsigned char) *q) || *q == ',' || *q == '=' || iscntrl ((unsigned char) *q))
                return cgq_yamldoc_fail (
                    c->y, e,
                    "trial.on.%s '%s' holds a blank, ',' or '=' (a tag value is one "
                    "word, e.g. odroid-xu4)",
                    kt, val);
        json_object_set_new (spec->trial.on, kt, json_string (val));
    }
    return 0;
}

static int
s_check_url (const char *url, char *err, size_t errlen)
{
    if (strncmp (url, "http://", 7) && strncmp (url, "https://", 8) && strncmp (url, "file://", 7)) {
        snprintf (err, errlen,
                  "artifact url '%.200s' is not http://, https:// or file:// (write e.g. "
                  "url: http://artifacts:8080/models/mobilenetv2.tflite)",
                  url);
        return -1;
    }
    for (const char *q = url; *q; q++)
        if (isspace ((unsigned char) *q) || iscntrl ((unsigned char) *q)) {
            snprintf (err, errlen, "artifact url '%.200s' holds a blank (escape it as %%20)", url);
            return -1;
        }
    return 0;
}

static int
s_check_sha (char *sha256, char *err, size_t errlen)
{
    size_t n = strlen (sha256);
    bool hex = n == 64;
    for (size_t i = 0; hex && i < n; i++)
        hex = isxdigit ((unsigned char) sha256[i]) != 0;
    if (!hex) {
        snprintf (err, errlen,
                  "artifact sha256 '%.80s' is not 64 hex digits (write the output of "
                  "sha256sum FILE)",
                  sha256);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        sha256[i] = (char) tolower ((unsigned char) sha256[i]);
    return 0;
}

int
cgq_spec_check_artifact (const char *url, char *sha256, char *err, size_t errlen)
{
    if (!url || !sha256) {
        snprintf (err, errlen, "an artifact needs both url and sha256");
        return -1;
    }
    return s_check_url (url, err, errlen) < 0 ? -1 : s_check_sha (sha256, err, errlen);
}

// s_parse_artifact reads artifact: {url: ..., sha256: ...}. Both may hold
// placeholders (checked with the other templates once the space is known); a
// literal pair is checked here.
static int
s_parse_artifact (s_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *v)
{
    const char *hint = "write artifact: {url: http://host/model.tflite, sha256: <64 hex digits>}";
    if (cgq_yamldoc_expect_map (c->y, v, "trial.artifact", hint) < 0)
        return -1;
    const cgq_yamldoc_node_t *url = NULL, *sha = NULL;
    for (size_t pi = 0; pi < cgq_yamldoc_npairs (v); pi++) {
        const cgq_yamldoc_node_t *k = cgq_yamldoc_key (c->y, v, pi),
                                 *e = cgq_yamldoc_val (c->y, v, pi);
        const char *kt = cgq_yamldoc_text (k), *t;
        if (!strcmp (kt, "url")) {
            if (cgq_yamldoc_get_text (c->y, e, "trial.artifact.url", hint, &t) < 0)
                return -1;
            spec->trial.artifact_url = cgq_xstrdup (t);
            url = e;
        }
        else if (!strcmp (kt, "sha256")) {
            if (cgq_yamldoc_get_text (c->y, e, "trial.artifact.sha256", hint, &t) < 0)
                return -1;
            spec->trial.artifact_sha256 = cgq_xstrdup (t);
            sha = e;
        }
        else
            return cgq_yamldoc_unknown_key (c->y, k, "trial.artifact", "url, sha256");
    }
    if (!url)
        return cgq_yamldoc_fail (c->y, v, "trial.artifact.url is missing (%s)", hint);
    if (!sha)
        return cgq_yamldoc_fail (
            c->y, v,
            "trial.artifact.sha256 is missing (a runner measures only an artifact "
            "it has verified; write sha256: followed by the output of sha256sum FILE)");
    char err[512];
    if (!strchr (spec->trial.artifact_url, '{') &&
        s_check_url (spec->trial.artifact_url, err, sizeof err) < 0)
        return cgq_yamldoc_fail (c->y, url, "trial.%s", err);
    if (!strchr (spec->trial.artifact_sha256, '{') &&
        s_check_sha (spec->trial.artifact_sha256, err, sizeof err) < 0)
        return cgq_yamldoc_fail (c->y, sha, "trial.%s", err);
    return 0;
}

// s_check_predictor: kind: predictor needs data: (and no command); data:
// belongs to kind: predictor only.
static int
s_check_predictor (s_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *kind,
                   const cgq_yamldoc_node_t *command, const cgq_yamldoc_node_t *data)
{
    if (spec->trial.kind != CGQ_TRIAL_PREDICTOR) {
        if (data)
            return cgq_yamldoc_fail (
                c->y, data,
                "trial.data is read by kind: predictor only (write kind: predictor, "
                "or pass the data to your command)");
        return 0;
    }
    if (command)
        return cgq_yamldoc_fail (
            c->y, command,
            "trial.command does not go with kind: predictor, which runs the built-in "
            "GNN predictor (remove command, or kind)");
    if (!data)
        return cgq_yamldoc_fail (
            c->y, kind,
            "kind: predictor needs trial.data, the CG dataset directory (write data: "
            "\"{spec_dir}/data/cpu-local\", quoted: a bare { starts a mapping)");
    return 0;
}

// s_check_device checks the keys of trial that only go together: a device
// stage (benchmark:) names its devices with on: and runs no command; a
// command or noop trial has no device keys. The nodes are the keys seen
// (NULL: absent); device_key is any of on, artifact, repeats, warmup.
static int
s_check_device (s_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *kind,
                const cgq_yamldoc_node_t *command, const cgq_yamldoc_node_t *resources,
                const cgq_yamldoc_node_t *bench, const cgq_yamldoc_node_t *on,
                const cgq_yamldoc_node_t *device_key)
{
    if (!bench) {
        if (device_key)
            return cgq_yamldoc_fail (
                c->y, device_key,
                "trial.%s belongs to a device trial, which names a benchmark (write "
                "benchmark: NAME, one of the runner's benchmarks, or remove %s)",
                cgq_yamldoc_text (device_key), cgq_yamldoc_text (device_key));
        return 0;
    }
    if (kind)
        return cgq_yamldoc_fail (
            c->y, kind,
            "trial.kind does not go with benchmark: a device trial runs the runner's "
            "benchmark (remove kind, or benchmark)");
    if (command)
        return cgq_yamldoc_fail (
            c->y, command,
            "trial.command does not go with benchmark: a runner runs only the "
            "benchmarks of its own config, never a command from a spec (remove "
            "command, or benchmark)");
    if (resources)
        return cgq_yamldoc_fail (
            c->y, resources,
            "trial.resources does not apply to a device trial: a device runs one "
            "measurement at a time (remove resources; choose devices with on:)");
    if (!on)
        return cgq_yamldoc_fail (
            c->y, bench,
            "a device trial needs trial.on, the tags of the devices that may run it "
            "(write on: {device: odroid-xu4})");
    spec->trial.kind = CGQ_TRIAL_DEVICE;
    spec->trial.cpu = 0;
    return 0;
}

// Where the keys of one stage are written, for the checks after parsing.
typedef struct {
    const cgq_yamldoc_node_t *cmd, *env, *art; // values (NULL: absent)
    const cgq_yamldoc_node_t *at;              // the stage's mapping (or the trial key)
} s_stage_nodes_t;

static int s_parse_stages (s_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *k,
                           const cgq_yamldoc_node_t *v, s_stage_nodes_t *nodes);

// s_parse_trial reads trial: into spec->trial, or one element of
// trial.stages into it (in_stage: name is allowed, stages is not).
// stages_nodes (room for CGQ_SPEC_MAX_STAGES) receives where each stage's
// templates are written when trial.stages is given.
static int
s_parse_trial (s_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *v,
               const cgq_yamldoc_node_t **cmd_node, const cgq_yamldoc_node_t **env_node,
               const cgq_yamldoc_node_t **art_node, bool in_stage, s_stage_nodes_t *stages_nodes)
{
    if (cgq_yamldoc_is_null (v))
        return 0;
    if (cgq_yamldoc_expect_map (c->y, v, "trial",
                                "write trial: {command: python3 train.py --lr {lr}}") < 0)
        return -1;
    const cgq_yamldoc_node_t *stages_k = NULL, *stages_v = NULL, *first_k = NULL;
    const cgq_yamldoc_node_t *data_k = NULL;
    const cgq_yamldoc_node_t *kind_k = NULL, *cmd_k = NULL, *res_k = NULL, *bench_k = NULL,
                             *on_k = NULL, *device_k = NULL;
    for (size_t pi = 0; pi < cgq_yamldoc_npairs (v); pi++) {
        const cgq_yamldoc_node_t *k = cgq_yamldoc_key (c->y, v, pi),
                                 *e = cgq_yamldoc_val (c->y, v, pi);
        const char *kt = cgq_yamldoc_text (k);
        long long n;
        if (!strcmp (kt, "kind")) {
            const char *kind;
            if (cgq_yamldoc_get_text (c->y, e, "trial.kind", "write kind: command or kind: noop",
                                      &kind) < 0)
                return -1;
            kind_k = k;
            if (!strcmp (kind, "command"))
                spec->trial.kind = CGQ_TRIAL_COMMAND;
            else if (!strcmp (kind, "noop"))
                spec->trial.kind = CGQ_TRIAL_NOOP;
            else if (!strcmp (kind, "predictor"))
                spec->trial.kind = CGQ_TRIAL_PREDICTOR;
            else
                return cgq_yamldoc_fail (c->y, e,
                                         "unknown trial.kind '%s' (expected one of: command, noop, "
                                         "predictor)",
                                         kind);
        }
        else if (!strcmp (kt, "data")) {
            const char *d;
            if (cgq_yamldoc_get_text (c->y, e, "trial.data",
                                      "write data: \"{spec_dir}/data/cpu-local\"", &d) < 0)
                return -1;
            free (spec->trial.data);
            spec->trial.data = cgq_xstrdup (d);
            data_k = e;
        }
        else if (!strcmp (kt, "command")) {
            if (s_parse_command (c, spec, e) < 0)
                return -1;
            *cmd_node = e;
            cmd_k = k;
        }
        else if (!strcmp (kt, "resources")) {
            if (s_parse_resources (c, spec, e) < 0)
                return -1;
            res_k = k;
        }
        else if (!strcmp (kt, "timeout")) {
            double s;
            char buf[96];
            if (e->type != CGQ_YAMLDOC_SCALAR || cgq_yamldoc_is_null (e) ||
                cgq_parse_duration (cgq_yamldoc_text (e), &s) < 0 || !(s > 0) || !isfinite (s))
                return cgq_yamldoc_fail (
                    c->y, e,
                    "trial.timeout must be a duration > 0 like 30m, 90s, 2h or a "
                    "number of seconds, not %s (write e.g. timeout: 30m)",
                    cgq_yamldoc_what (e, buf, sizeof buf));
            spec->trial.timeout_s = s;
        }
        else if (!strcmp (kt, "retries")) {
            if (cgq_yamldoc_get_int (c->y, e, "trial.retries", 0, UINT32_MAX,
                                     "write e.g. retries: 2", &n) < 0)
                return -1;
            spec->trial.retries = (uint32_t) n;
        }
        else if (!strcmp (kt, "env")) {
            if (s_parse_env (c, spec, e) < 0)
                return -1;
            *env_node = e;
        }
        else if (!strcmp (kt, "benchmark")) {
            const char *b;
            const char *hint = "write benchmark: NAME, a benchmark of the runner's config";
            if (cgq_yamldoc_get_text (c->y, e, "trial.benchmark", hint, &b) < 0)
                return -1;
            if (!s_is_word (b, e->len))
                return cgq_yamldoc_fail (
                    c->y, e,
                    "bad benchmark name '%s' (use letters, digits, '_', '-' and '.'; "
                    "%s)",
                    b, hint);
            spec->trial.benchmark = cgq_xstrdup (b);
            bench_k = k;
        }
        else if (!strcmp (kt, "on")) {
            if (s_parse_on (c, spec, e) < 0)
                return -1;
            on_k = device_k = k;
        }
        else if (!strcmp (kt, "artifact")) {
            if (s_parse_artifact (c, spec, e) < 0)
                return -1;
            *art_node = e;
            device_k = k;
        }
        else if (!strcmp (kt, "repeats")) {
            if (cgq_yamldoc_get_int (
                    c->y, e, "trial.repeats", 1, 1000000,
                    "write e.g. repeats: 50, or leave it out for the runner's default", &n) < 0)
                return -1;
            spec->trial.repeats = (uint32_t) n;
            device_k = k;
        }
        else if (!strcmp (kt, "warmup")) {
            if (cgq_yamldoc_get_int (
                    c->y, e, "trial.warmup", 1, 1000000,
                    "write e.g. warmup: 5, or leave it out for the runner's default", &n) < 0)
                return -1;
            spec->trial.warmup = (uint32_t) n;
            device_k = k;
        }
        else if (!strcmp (kt, "stages") && !in_stage) {
            stages_k = k;
            stages_v = e;
        }
        else if (!strcmp (kt, "name") && in_stage) {
            const char *name;
            if (cgq_yamldoc_get_text (c->y, e, "trial.stages[].name", "write name: train", &name) <
                0)
                return -1;
            if (!s_is_ident (name, e->len))
                return cgq_yamldoc_fail (
                    c->y, e,
                    "bad stage name '%s' (use letters, digits and _, not starting "
                    "with a digit, e.g. name: train: later stages write "
                    "{%s.METRIC})",
                    name, "train");
            free (spec->trial.name);
            spec->trial.name = cgq_xstrdup (name);
        }
        else
            return cgq_yamldoc_unknown_key (
                c->y, k, in_stage ? "trial.stages[]" : "trial",
                in_stage ? "name, kind, command, data, resources, timeout, "
                           "retries, env, on, benchmark, artifact, repeats, "
                           "warmup"
                         : "kind, command, data, resources, timeout, retries, "
                           "env, on, benchmark, artifact, repeats, warmup, "
                           "stages");
        if (strcmp (kt, "stages") && strcmp (kt, "timeout") && strcmp (kt, "retries") &&
            strcmp (kt, "env") && !first_k)
            first_k = k; // a key that belongs to one stage
    }
    if (stages_k) {
        if (first_k)
            return cgq_yamldoc_fail (
                c->y, first_k,
                "trial.%s does not go with trial.stages: each stage says what it "
                "runs (move %s into a stage; beside stages: only env, timeout and "
                "retries, the defaults of every stage)",
                cgq_yamldoc_text (first_k), cgq_yamldoc_text (first_k));
        return s_parse_stages (c, spec, stages_k, stages_v, stages_nodes);
    }
    if (s_check_predictor (c, spec, kind_k, cmd_k, data_k) < 0)
        return -1;
    return s_check_device (c, spec, kind_k, cmd_k, res_k, bench_k, on_k, device_k);
}

static void
s_stage_fini (cgq_stage_t *st)
{
    free (st->name);
    free (st->command);
    free (st->data);
    for (size_t i = 0; st->argv && st->argv[i]; i++)
        free (st->argv[i]);
    free (st->argv);
    for (size_t i = 0; i < st->nenv; i++) {
        free (st->env_keys[i]);
        free (st->env_vals[i]);
    }
    free (st->env_keys);
    free (st->env_vals);
    json_decref (st->on);
    free (st->benchmark);
    free (st->artifact_url);
    free (st->artifact_sha256);
    memset (st, 0, sizeof *st);
}

// s_parse_stages reads trial.stages: a list of 1..CGQ_SPEC_MAX_STAGES
// mappings, each a trial of its own with a unique name. Each is parsed by
// s_parse_trial into spec->trial, then moved into spec->stages; trial's own
// timeout and retries (read before, whatever the key order: see the caller)
// are each stage's defaults.
static int
s_parse_stages (s_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *k,
                const cgq_yamldoc_node_t *v, s_stage_nodes_t *nodes)
{
    char buf[96];
    const char *hint = "write stages: [{name: train, command: ./train.sh}, {name: measure, "
                       "on: {device: odroid}, benchmark: run}]";
    if (v->type != CGQ_YAMLDOC_SEQ)
        return cgq_yamldoc_fail (c->y, v, "trial.stages must be a list of stages, not %s (%s)",
                                 cgq_yamldoc_what (v, buf, sizeof buf), hint);
    if (v->len == 0)
        return cgq_yamldoc_fail (
            c->y, v, "trial.stages is empty (%s, or write trial.command for one stage)", hint);
    if (v->len > CGQ_SPEC_MAX_STAGES)
        return cgq_yamldoc_fail (c->y, cgq_yamldoc_item (c->y, v, CGQ_SPEC_MAX_STAGES),
                                 "trial.stages has %zu stages, more than %d (merge some of them)",
                                 (size_t)v->len, CGQ_SPEC_MAX_STAGES);
    cgq_stage_t outer = spec->trial;
    spec->stages = cgq_xcalloc (v->len, sizeof *spec->stages);
    int rc = 0;
    for (size_t i = 0; i < v->len && rc == 0; i++) {
        const cgq_yamldoc_node_t *e = cgq_yamldoc_item (c->y, v, i);
        memset (&spec->trial, 0, sizeof spec->trial);
        spec->trial.kind = CGQ_TRIAL_COMMAND;
        spec->trial.cpu = 1;
        spec->trial.timeout_s = outer.timeout_s;
        spec->trial.retries = outer.retries;
        nodes[i].at = e;
        if (e->type != CGQ_YAMLDOC_MAP)
            rc = cgq_yamldoc_fail (c->y, e, "trial.stages[%zu] must be a mapping, not %s (%s)", i,
                                   cgq_yamldoc_what (e, buf, sizeof buf), hint);
        else
            rc = s_parse_trial (c, spec, e, &nodes[i].cmd, &nodes[i].env, &nodes[i].art, true,
                                NULL);
        if (rc == 0 && !spec->trial.name)
            rc = cgq_yamldoc_fail (c->y, e,
                                   "trial.stages[%zu] has no name (write name: %s; later stages "
                                   "read its metrics as {NAME.METRIC})",
                                   i, i ? "measure" : "train");
        if (rc == 0 && spec->trial.kind == CGQ_TRIAL_COMMAND && !spec->trial.command &&
            !spec->trial.argc)
            rc = cgq_yamldoc_fail (
                c->y, e,
                "stage '%s' has no command (write command: ./run.sh {lr}, kind: noop, "
                "or benchmark: with on: for a device stage)",
                spec->trial.name);
        for (size_t p = 0; rc == 0 && p < spec->nstages; p++)
            if (!strcmp (spec->stages[p].name, spec->trial.name)) {
                const cgq_yamldoc_node_t *prev = nodes[p].at;
                rc = cgq_yamldoc_fail (c->y, e,
                                       "duplicate stage name '%s' (the stage at %d:%d has it; give "
                                       "each stage its own name)",
                                       spec->trial.name, prev->line, prev->col);
            }
        spec->stages[spec->nstages++] = spec->trial; // the last one too, to be freed
    }
    memset (&spec->trial, 0, sizeof spec->trial);
    spec->trial = outer;
    (void) k;
    return rc;
}

// s_check_tmpl reports the first bad placeholder of one template, with the
// names that would have been accepted.
static int
s_check_tmpl (s_ctx_t *c, const cgq_spec_t *spec, size_t stage, const cgq_yamldoc_node_t *at,
              const char *tmpl, const char *where)
{
    size_t off;
    char name[128];
    if (cgq_space_check_template (spec, stage, tmpl, &off, name, sizeof name) == 0)
        return 0;
    char *dot = strchr (name, '.');
    if (dot && tmpl[off] != '}' && strchr (tmpl + off, '}')) {
        int k = cgq_spec_stage_index (spec, name, (size_t) (dot - name));
        const char *self = cgq_spec_nstages (spec) > stage && spec->nstages
                               ? spec->stages[stage].name
                               : "";
        if (k >= 0 && spec->nstages && strncmp (where, "trial.stages", 12))
            return cgq_yamldoc_fail (
                c->y, at,
                "'{%s}' in %s names a metric of stage '%s', but trial.env is given "
                "to every stage, the first included (move it into the env of a stage "
                "after '%s')",
                name, where, spec->stages[k].name, spec->stages[k].name);
        if (k >= 0 && (size_t) k == stage)
            return cgq_yamldoc_fail (
                c->y, at,
                "'{%s}' in %s names this stage's own metric '%s' (a stage sees the "
                "metrics of the stages before it only)",
                name, where, dot + 1);
        if (k >= 0)
            return cgq_yamldoc_fail (
                c->y, at,
                "'{%s}' in %s names a metric of stage '%s', which runs after stage "
                "'%s' (a stage sees the metrics of the stages before it only; "
                "reorder trial.stages)",
                name, where, spec->stages[k].name, self);
        if (spec->nstages)
            return cgq_yamldoc_fail (c->y, at,
                                     "'{%s}' in %s names no stage before this one (write "
                                     "{STAGE.METRIC} with STAGE one of the earlier stages' names)",
                                     name, where);
        return cgq_yamldoc_fail (
            c->y, at,
            "'{%s}' in %s: {STAGE.METRIC} reads an earlier stage's metric, and "
            "this trial has no stages (write trial.stages, or a param name)",
            name, where);
    }
    if (tmpl[off] == '}')
        return cgq_yamldoc_fail (
            c->y, at, "stray '}' at byte %zu of %s (write }} for a literal brace)", off, where);
    if (!strchr (tmpl + off, '}'))
        return cgq_yamldoc_fail (
            c->y, at, "unterminated '{' at byte %zu of %s (write {{ for a literal brace)",
            off ? off - 1 : 0, where);
    cgq_buf_t names;
    cgq_buf_init (&names);
    for (size_t i = 0; i < spec->nparams && i < 12; i++)
        cgq_buf_printf (&names, "%s%s", i ? ", " : "", spec->params[i].name);
    if (spec->nparams > 12)
        cgq_buf_puts (&names, ", ...");
    if (!spec->nparams)
        cgq_buf_puts (&names, "none");
    cgq_yamldoc_fail (c->y, at,
                      "unknown placeholder '{%s}' in %s (params: %s; built-ins: job_id, trial_id, "
                      "spec_dir; write {{ for a literal brace)",
                      name, where, names.data);
    cgq_buf_fini (&names);
    return -1;
}

// s_check_stage_templates checks the templates of stage k (st), written at
// n. prefix is how messages name the stage's keys ("trial" or
// "trial.stages[1]").
static int
s_check_stage_templates (s_ctx_t *c, const cgq_spec_t *spec, const cgq_stage_t *st, size_t k,
                         const s_stage_nodes_t *n, const char *prefix)
{
    char where[200];
    if (st->command) {
        snprintf (where, sizeof where, "%s.command", prefix);
        if (s_check_tmpl (c, spec, k, n->cmd, st->command, where) < 0)
            return -1;
    }
    for (size_t i = 0; i < st->argc; i++) {
        snprintf (where, sizeof where, "%s.command[%zu]", prefix, i);
        const cgq_yamldoc_node_t *at = cgq_yamldoc_item (c->y, n->cmd, i);
        if (s_check_tmpl (c, spec, k, at, st->argv[i], where) < 0)
            return -1;
    }
    for (size_t i = 0; i < st->nenv; i++) {
        snprintf (where, sizeof where, "%s.env.%s", prefix, st->env_keys[i]);
        const cgq_yamldoc_node_t *at = cgq_yamldoc_val (c->y, n->env, i);
        if (s_check_tmpl (c, spec, k, at, st->env_vals[i], where) < 0)
            return -1;
    }
    for (size_t pi = 0; n->art && pi < cgq_yamldoc_npairs (n->art); pi++) {
        const cgq_yamldoc_node_t *key = cgq_yamldoc_key (c->y, n->art, pi);
        bool url = !strcmp (cgq_yamldoc_text (key), "url");
        snprintf (where, sizeof where, "%s.artifact.%s", prefix, cgq_yamldoc_text (key));
        if (s_check_tmpl (c, spec, k, cgq_yamldoc_val (c->y, n->art, pi),
                          url ? st->artifact_url : st->artifact_sha256, where) < 0)
            return -1;
    }
    return 0;
}

static int
s_check_templates (s_ctx_t *c, const cgq_spec_t *spec, const cgq_yamldoc_node_t *cmd,
                   const cgq_yamldoc_node_t *env, const cgq_yamldoc_node_t *art,
                   const s_stage_nodes_t *stages)
{
    // trial: itself (with stages: its env only, given to every stage: params only).
    s_stage_nodes_t n = {cmd, env, art, cmd};
    if (s_check_stage_templates (c, spec, &spec->trial, 0, &n, "trial") < 0)
        return -1;
    for (size_t k = 0; k < spec->nstages; k++) {
        char prefix[64];
        snprintf (prefix, sizeof prefix, "trial.stages[%zu]", k);
        if (s_check_stage_templates (c, spec, &spec->stages[k], k, &stages[k], prefix) < 0)
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

// s_size_d approximates the number of values of a discrete param where that
// number is too large for cgq_space_param_size, for messages.
static double
s_size_d (const cgq_param_t *p)
{
    uint64_t n;
    if (cgq_space_param_size (p, &n) == 0)
        return (double) n;
    switch (p->kind) {
    case CGQ_PARAM_REPEAT:
        return pow (s_size_d (p->of), p->repeat);
    case CGQ_PARAM_ASSIGNMENT:
        return pow ((double) json_array_size (p->values), (double) json_array_size (p->items));
    case CGQ_PARAM_RANDINT:
        return p->hi - p->lo + 1;
    default:
        return INFINITY;
    }
}

static int
s_parse_doc (s_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *root)
{
    char buf[96];
    if (!root)
        return cgq_yamldoc_fail_at (c->y, 1, 1,
                                    "the spec is empty (write at least trial: {command: ...})");
    if (root->type != CGQ_YAMLDOC_MAP)
        return cgq_yamldoc_fail (c->y, root,
                                 "the spec must be a mapping of name, space, search, objective, "
                                 "trial, not %s (write e.g. trial: {command: ./train.sh})",
                                 cgq_yamldoc_what (root, buf, sizeof buf));
    if (cgq_yamldoc_check_keys (c->y, root) < 0)
        return -1;
    const cgq_yamldoc_node_t *space_key = NULL, *trial_key = NULL, *cmd = NULL, *env = NULL,
                             *art = NULL;
    s_stage_nodes_t stage_nodes[CGQ_SPEC_MAX_STAGES];
    memset (stage_nodes, 0, sizeof stage_nodes);
    for (size_t pi = 0; pi < cgq_yamldoc_npairs (root); pi++) {
        const cgq_yamldoc_node_t *k = cgq_yamldoc_key (c->y, root, pi),
                                 *v = cgq_yamldoc_val (c->y, root, pi);
        const char *kt = cgq_yamldoc_text (k);
        int rc = 0;
        if (!strcmp (kt, "name")) {
            const char *name;
            rc = cgq_yamldoc_get_text (c->y, v, "name", "write name: my-search", &name);
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
            rc = s_parse_trial (c, spec, v, &cmd, &env, &art, false, stage_nodes);
        }
        else if (!strcmp (kt, "objectives"))
            rc = s_parse_objectives (c, spec, k, v);
        else if (!strcmp (kt, "early_stop"))
            rc = s_parse_early_stop (c, spec, k, v);
        else if (!strcmp (kt, "notify"))
            rc = s_parse_notify (c, spec, k, v);
        else
            rc = cgq_yamldoc_unknown_key (
                c->y, k, "the spec",
                "name, space, search, objective, objectives, early_stop, trial, "
                "notify");
        if (rc < 0)
            return -1;
    }
    if (!spec->nstages && spec->trial.kind == CGQ_TRIAL_COMMAND && !spec->trial.command &&
        !spec->trial.argc) {
        if (trial_key)
            return cgq_yamldoc_fail (c->y, trial_key,
                                     "trial.command is missing (write command: python3 train.py "
                                     "--lr {lr}, or kind: noop)");
        return cgq_yamldoc_fail (c->y, root,
                                 "trial is missing (write trial: {command: python3 train.py --lr "
                                 "{lr}})");
    }
    if (s_check_templates (c, spec, cmd, env, art, stage_nodes) < 0 || s_check_search (c, spec) < 0 ||
        s_check_early_stop (c, spec) < 0)
        return -1;
    uint64_t total;
    if (cgq_space_count (spec, &total) < 0) {
        double g = (double) spec->search.samples;
        for (size_t i = 0; i < spec->nparams; i++)
            if (cgq_space_is_axis (spec, &spec->params[i]))
                g *= s_size_d (&spec->params[i]);
        return cgq_yamldoc_fail (c->y, space_key ? space_key : root,
                                 "the search has %.3g trials, more than "
                                 "2^63 (use fewer grid values or fewer samples)",
                                 g);
    }
    return 0;
}

// Where search.file is written: its key's start and its value's end.
typedef struct {
    bool has;
    int kline, kcol, eline, ecol;
} s_marks_t;

static cgq_spec_t *s_parse (const char *text, size_t len, const char *path, const char *dir,
                            char *err, size_t errlen, s_marks_t *marks);

cgq_spec_t *
cgq_spec_parse (const char *text, size_t len, const char *path, char *err, size_t errlen)
{
    return s_parse (text, len, path, NULL, err, errlen, NULL);
}

// s_parse parses text; dir (may be NULL) is where search.file is read. marks,
// if not NULL, receives where search.file is written (for cgq_spec_load).
static cgq_spec_t *
s_parse (const char *text, size_t len, const char *path, const char *dir, char *err,
         size_t errlen, s_marks_t *marks)
{
    const char *given = path;
    if (!path)
        path = "spec";
    if (!text)
        text = "", len = 0;
    s_ctx_t c = {.y = cgq_yamldoc_new (path, "spec", err, errlen), .dir = dir};
    // The text is kept whole (spec->text) only once it is known to be small.
    const cgq_yamldoc_node_t *root = NULL;
    cgq_spec_t *spec = NULL;
    int rc = cgq_yamldoc_load (c.y, text, len, s_max_bytes, s_size_hint, &root);
    if (rc == 0) {
        spec = cgq_xcalloc (1, sizeof *spec);
        spec->path = cgq_xstrdup (path);
        spec->text = cgq_xstrndup (text, len);
        spec->name = s_default_name (given);
        spec->search.algorithm = CGQ_SEARCH_RANDOM;
        spec->search.samples = 1;
        spec->trial.kind = CGQ_TRIAL_COMMAND;
        spec->trial.cpu = 1;
        rc = s_parse_doc (&c, spec, root);
    }
    if (rc == 0 && root)
        rc = cgq_yamldoc_end (c.y);
    if (marks && rc == 0 && c.file_key) {
        marks->has = true;
        marks->kline = c.file_key->line, marks->kcol = c.file_key->col;
        marks->eline = c.file_node->eline, marks->ecol = c.file_node->ecol;
    }
    free (c.point_lines);
    cgq_yamldoc_destroy (&c.y);
    if (rc < 0) {
        cgq_spec_destroy (&spec);
        return NULL;
    }
    return spec;
}

// s_offset is the byte offset of (line, col) in text, columns counted in
// characters as libyaml counts them.
static size_t
s_offset (const char *text, size_t len, int line, int col)
{
    size_t i = 0;
    for (int l = 1; l < line && i < len; i++)
        if (text[i] == '\n')
            l++;
    for (int k = 1; k < col && i < len; k++) {
        i++;
        while (i < len && ((unsigned char) text[i] & 0xc0) == 0x80)
            i++;
    }
    return i;
}

// s_inline_points replaces `file: NAME` in spec->text by `points: [...]` on
// the same line and checks that the coordinator will parse the result (it has
// no file to read). Returns the spec, or NULL (destroyed) with err set.
static cgq_spec_t *
s_inline_points (cgq_spec_t *spec, const s_marks_t *m, char *err, size_t errlen)
{
    size_t len = strlen (spec->text);
    size_t a = s_offset (spec->text, len, m->kline, m->kcol);
    size_t b = s_offset (spec->text, len, m->eline, m->ecol);
    cgq_buf_t t;
    cgq_buf_init (&t);
    cgq_buf_append (&t, spec->text, a);
    cgq_buf_puts (&t, "points: ");
    cgq_json_append (&t, spec->search.points, true);
    cgq_buf_append (&t, spec->text + b, len - b);
    char e2[1024];
    cgq_spec_t *inl = s_parse (t.data, t.len, spec->path, NULL, e2, sizeof e2, NULL);
    if (!inl) {
        if (err && errlen)
            snprintf (err, errlen, "%s:%d:%d: the points of search.file '%s' cannot be sent "
                                   "inline: %s (use points: [...] in the spec)",
                      spec->path, m->kline, m->kcol, spec->search.file, e2);
        cgq_buf_fini (&t);
        cgq_spec_destroy (&spec);
        return NULL;
    }
    cgq_buf_fini (&t);
    free (inl->name);
    inl->name = spec->name; // the name follows the file, not the parse
    spec->name = NULL;
    inl->search.file = spec->search.file;
    spec->search.file = NULL;
    cgq_spec_destroy (&spec);
    return inl;
}

cgq_spec_t *
cgq_spec_load (const char *path, char *err, size_t errlen)
{
    // One byte past the limit is enough for cgq_spec_parse to refuse the file.
    cgq_buf_t b;
    cgq_buf_init (&b);
    if (cgq_yamldoc_read_file (path, s_max_bytes, &b) < 0) {
        if (err && errlen)
            snprintf (err, errlen, "%s: cannot read: %s", path, strerror (errno));
        cgq_buf_fini (&b);
        return NULL;
    }
    char *dir = cgq_xstrdup (path);
    char *slash = strrchr (dir, '/');
    if (slash == dir)
        dir[1] = 0;
    else if (slash)
        *slash = 0;
    else
        strcpy (dir, ".");
    s_marks_t marks = {0};
    cgq_spec_t *spec = s_parse (b.data, b.len, path, dir, err, errlen, &marks);
    free (dir);
    if (spec && marks.has)
        spec = s_inline_points (spec, &marks, err, errlen);
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
    for (size_t i = 0; i < self->nparams; i++)
        s_param_fini (&self->params[i]);
    free (self->params);
    json_decref (self->param_index);
    s_objective_fini (&self->objective);
    for (size_t i = 0; i < CGQ_SPEC_MAX_OBJECTIVES; i++)
        s_objective_fini (&self->objectives[i]);
    free (self->notify.url);
    free (self->early_stop.attribute);
    free (self->early_stop.metric);
    json_decref (self->search.points);
    free (self->search.file);
    s_stage_fini (&self->trial);
    for (size_t i = 0; i < self->nstages; i++)
        s_stage_fini (&self->stages[i]);
    free (self->stages);
    free (self);
    *self_p = NULL;
}

size_t
cgq_spec_nstages (const cgq_spec_t *self)
{
    return self->nstages ? self->nstages : 1;
}

const cgq_stage_t *
cgq_spec_stage (const cgq_spec_t *self, size_t k)
{
    if (!self->nstages)
        return k == 0 ? &self->trial : NULL;
    return k < self->nstages ? &self->stages[k] : NULL;
}

int
cgq_spec_stage_index (const cgq_spec_t *self, const char *name, size_t n)
{
    for (size_t k = 0; k < self->nstages; k++)
        if (self->stages[k].name && strlen (self->stages[k].name) == n &&
            !memcmp (self->stages[k].name, name, n))
            return (int) k;
    return -1;
}

bool
cgq_spec_stage_matches (const cgq_stage_t *stage, const json_t *tags)
{
    if (!stage || !stage->on || !json_is_object (tags))
        return false;
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *) stage->on, k, v)
    {
        json_t *have = json_object_get (tags, k);
        if (!json_is_string (have) || strcmp (json_string_value (have), json_string_value (v)))
            return false;
    }
    return true;
}

char *
cgq_spec_stage_on (const cgq_stage_t *stage, char *buf, size_t n)
{
    if (n)
        buf[0] = 0;
    if (!stage || !stage->on)
        return buf;
    size_t at = 0;
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *) stage->on, k, v)
    {
        if (at >= n)
            break;
        int w = snprintf (buf + at, n - at, "%s%s=%s", at ? ", " : "", k, json_string_value (v));
        at += w > 0 ? (size_t) w : 0;
    }
    return buf;
}

const cgq_param_t *
cgq_spec_param (const cgq_spec_t *self, const char *name)
{
    if (!self || !name)
        return NULL;
    if (self->param_index) {
        json_t *at = json_object_get (self->param_index, name);
        return at ? &self->params[json_integer_value (at)] : NULL;
    }
    for (size_t i = 0; i < self->nparams; i++)
        if (!strcmp (self->params[i].name, name))
            return &self->params[i];
    return NULL;
}

const cgq_objective_t *
cgq_spec_objective (const cgq_spec_t *self, size_t i)
{
    if (!self || i >= self->nobjectives)
        return NULL;
    return self->nobjectives == 1 ? &self->objective : &self->objectives[i];
}

size_t
cgq_spec_objective_senses (const cgq_spec_t *self, int *sense)
{
    for (size_t i = 0; i < self->nobjectives; i++)
        sense[i] = cgq_spec_objective (self, i)->mode;
    return self->nobjectives;
}

// s_objective_eval computes one objective of metrics.
static int
s_objective_eval (const cgq_objective_t *o, const json_t *metrics, double *out, char *err,
                  size_t errlen)
{
    char scratch[8];
    if (!err || !errlen)
        err = scratch, errlen = sizeof scratch;
    if (!json_is_object (metrics)) {
        snprintf (err, errlen, "the result is not a JSON object (a trial reports {\"%s\": ...})",
                  o->metric);
        return -1;
    }
    if (o->expr) {
        char e[512];
        if (cgq_expr_eval (o->expr, metrics, out, e, sizeof e) < 0) {
            snprintf (err, errlen, "objective expr \"%s\": %s", o->metric, e);
            return -1;
        }
        return 0;
    }
    json_t *v = json_object_get (metrics, o->metric);
    if (v && json_is_number (v) && isfinite (json_number_value (v))) {
        *out = json_number_value (v);
        return 0;
    }
    cgq_buf_t b;
    cgq_buf_init (&b);
    cgq_buf_printf (&b, "result has no numeric metric '%s' (metrics: ", o->metric);
    const char *key;
    json_t *val;
    size_t n = 0;
    json_object_foreach ((json_t *) metrics, key, val)
    {
        if (n++ == 12) {
            cgq_buf_puts (&b, ", ...");
            break;
        }
        cgq_buf_printf (&b, "%s%s", n > 1 ? ", " : "", key);
    }
    cgq_buf_printf (&b, "%s); report it, or fix the objective", n ? "" : "none");
    snprintf (err, errlen, "%s", b.data);
    cgq_buf_fini (&b);
    return -1;
}

int
cgq_spec_objective_value (const cgq_spec_t *self, const json_t *metrics, double *out, char *err,
                          size_t errlen)
{
    if (self->nobjectives != 1) {
        if (err && errlen)
            snprintf (err, errlen,
                      self->nobjectives ? "the spec has %zu objectives, not one (use "
                                          "cgq_spec_objective_values)"
                                        : "the spec has no objective%.0zu",
                      self->nobjectives);
        return -1;
    }
    return s_objective_eval (&self->objective, metrics, out, err, errlen);
}

int
cgq_spec_objective_values (const cgq_spec_t *self, const json_t *metrics, double *out, char *err,
                           size_t errlen)
{
    if (!self->nobjectives) {
        if (err && errlen)
            snprintf (err, errlen, "the spec has no objective");
        return -1;
    }
    for (size_t i = 0; i < self->nobjectives; i++)
        if (s_objective_eval (cgq_spec_objective (self, i), metrics, &out[i], err, errlen) < 0)
            return -1;
    return 0;
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

// s_describe_param writes a param's domain on one line, without a newline.
static void
s_describe_param (FILE *f, const cgq_param_t *p)
{
    char a[32], b[32], q[32];
    switch (p->kind) {
    case CGQ_PARAM_CONST:
        fputs ("= ", f);
        s_describe_json (f, p->value);
        break;
    case CGQ_PARAM_CHOICE:
    case CGQ_PARAM_GRID:
        fprintf (f, "%s ", p->kind == CGQ_PARAM_GRID ? "grid" : "choice");
        s_describe_json (f, p->values);
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
    case CGQ_PARAM_QUNIFORM:
    case CGQ_PARAM_QLOGUNIFORM:
        fprintf (f, "%s [%s, %s] in steps of %s",
                 p->kind == CGQ_PARAM_QUNIFORM ? "quniform" : "qloguniform",
                 cgq_fmt_double (a, p->lo), cgq_fmt_double (b, p->hi), cgq_fmt_double (q, p->q));
        break;
    case CGQ_PARAM_REPEAT:
        fprintf (f, "repeat %u x ", p->repeat);
        s_describe_param (f, p->of);
        break;
    case CGQ_PARAM_ASSIGNMENT:
        fputs ("assignment of ", f);
        s_describe_json (f, p->items);
        fputs (" to ", f);
        s_describe_json (f, p->values);
        break;
    }
}

// s_describe_stage writes one stage (label: "trial" or "stage NAME").
static void
s_describe_stage (const cgq_stage_t *st, const char *label, FILE *f)
{
    char on[256];
    if (st->kind == CGQ_TRIAL_NOOP)
        fprintf (f, "%s: noop (reports the numeric params as metrics)\n", label);
    else if (st->kind == CGQ_TRIAL_PREDICTOR)
        fprintf (f, "%s: predictor (built-in GNN latency predictor) on %s\n", label, st->data);
    else if (st->kind == CGQ_TRIAL_DEVICE) {
        char rep[32], warm[32];
        snprintf (rep, sizeof rep, "%u", st->repeats);
        snprintf (warm, sizeof warm, "%u", st->warmup);
        fprintf (f, "%s: benchmark %s on a device with %s, repeats %s, warmup %s\n",
                 label, st->benchmark, cgq_spec_stage_on (st, on, sizeof on),
                 st->repeats ? rep : "the runner's", st->warmup ? warm : "the runner's");
        if (st->artifact_url)
            fprintf (f, "  artifact: %s (sha256 %s)\n", st->artifact_url,
                     st->artifact_sha256);
    }
    else if (st->command)
        fprintf (f, "%s: sh -c %s\n", label, st->command);
    else {
        fprintf (f, "%s: exec", label);
        for (size_t i = 0; i < st->argc; i++)
            fprintf (f, " [%s]", st->argv[i]);
        fputc ('\n', f);
    }
    char mem[48], a[32], b[32];
    if (st->kind != CGQ_TRIAL_DEVICE)
        fprintf (f, "  resources: cpu %s, gpu %s, memory %s\n", cgq_fmt_double (a, st->cpu),
             cgq_fmt_double (b, st->gpu),
             st->memory ? s_bytes (mem, sizeof mem, st->memory) : "not set");
    if (st->timeout_s > 0) {
        char t[32];
        fprintf (f, "  timeout: %s s, retries: %u\n", cgq_fmt_double (t, st->timeout_s),
                 st->retries);
    }
    else
        fprintf (f, "  timeout: none, retries: %u\n", st->retries);
    for (size_t i = 0; i < st->nenv; i++)
        fprintf (f, "  env: %s=%s\n", st->env_keys[i], st->env_vals[i]);
}

void
cgq_spec_describe (const cgq_spec_t *self, FILE *f)
{
    char a[32];
    bool grid = self->search.algorithm == CGQ_SEARCH_GRID;
    fprintf (f, "job: %s (%s)\n", self->name, self->path);
    int w = 4;
    for (size_t i = 0; i < self->nparams; i++)
        if ((int) strlen (self->params[i].name) > w)
            w = (int) strlen (self->params[i].name);
    fprintf (f, "params (%zu):\n", self->nparams);
    for (size_t i = 0; i < self->nparams; i++) {
        const cgq_param_t *p = &self->params[i];
        fprintf (f, "  %-*s  ", w, p->name);
        s_describe_param (f, p);
        uint64_t n;
        bool axis = cgq_space_is_axis (self, p);
        if ((axis || p->kind == CGQ_PARAM_CHOICE || p->kind == CGQ_PARAM_ASSIGNMENT) &&
            cgq_space_param_size (p, &n) == 0)
            fprintf (f, "  (%s%llu %s)", axis && p->kind != CGQ_PARAM_GRID ? "grid axis, " : "",
                     (unsigned long long) n, p->kind == CGQ_PARAM_ASSIGNMENT ? "ids" : "values");
        fputc ('\n', f);
    }
    char conc[32] = "unlimited";
    if (self->search.concurrency)
        snprintf (conc, sizeof conc, "%u", self->search.concurrency);
    cgq_search_alg_t alg = self->search.algorithm;
    if (alg == CGQ_SEARCH_RANDOM || alg == CGQ_SEARCH_GRID)
        fprintf (f, "search: %s, %llu %s, seed %llu, concurrency %s\n", grid ? "grid" : "random",
                 (unsigned long long) self->search.samples,
                 grid ? "repeat(s) of the grid" : "sample(s) per grid point",
                 (unsigned long long) self->search.seed, conc);
    else if (alg == CGQ_SEARCH_LIST)
        fprintf (f, "search: list, %zu point(s)%s%s, concurrency %s\n",
                 json_array_size (self->search.points), self->search.file ? " from " : "",
                 self->search.file ? self->search.file : "", conc);
    else {
        fprintf (f, "search: %s, %llu trial(s), seed %llu, concurrency %s\n",
                 cgq_spec_search_name (alg), (unsigned long long) self->search.samples,
                 (unsigned long long) self->search.seed, conc);
        if (alg == CGQ_SEARCH_EVOLUTION)
            fprintf (f, "  population %u, tournament %u, %u random first, %u in flight\n",
                     self->search.population, self->search.tournament, self->search.initial,
                     self->search.batch);
        else if (alg == CGQ_SEARCH_NSGA2)
            fprintf (f, "  population %u, %u random first, %u in flight, crossover %s\n",
                     self->search.population, self->search.initial, self->search.batch,
                     cgq_fmt_double (a, self->search.crossover));
        else
            fprintf (f, "  %u random first, %u candidates per suggestion\n",
                     self->search.initial, self->search.candidates);
    }
    uint64_t d;
    if (cgq_space_without_replacement (self) && cgq_space_sampled_size (self, &d) == 0)
        fprintf (f, "  sampled without replacement: no repeats among %llu combinations\n",
                 (unsigned long long) d);
    if (self->nobjectives == 1)
        fprintf (f, "objective: %s %s%s\n", self->objective.mode > 0 ? "maximize" : "minimize",
                 self->objective.expr ? "expr " : "", self->objective.metric);
    else if (self->nobjectives > 1) {
        fprintf (f, "objectives (Pareto front):");
        for (size_t i = 0; i < self->nobjectives; i++)
            fprintf (f, "%s %s %s", i ? "," : "",
                     self->objectives[i].mode > 0 ? "maximize" : "minimize",
                     self->objectives[i].metric);
        fputc ('\n', f);
    }
    else
        fputs ("objective: none (no leaderboard)\n", f);
    if (self->early_stop.algorithm != CGQ_EARLY_STOP_NONE)
        fprintf (f, "early stop: %s on %s (%s) by %s, grace %llu, max %llu\n",
                 self->early_stop.algorithm == CGQ_EARLY_STOP_ASHA ? "asha" : "median",
                 self->early_stop.metric, self->early_stop.mode > 0 ? "max" : "min",
                 self->early_stop.attribute, (unsigned long long) self->early_stop.grace,
                 (unsigned long long) self->early_stop.max);
    if (!self->nstages)
        s_describe_stage (&self->trial, "trial", f);
    for (size_t k = 0; k < self->nstages; k++) {
        char label[96];
        snprintf (label, sizeof label, "stage %zu %s", k + 1, self->stages[k].name);
        s_describe_stage (&self->stages[k], label, f);
    }
    if (self->nstages)
        for (size_t i = 0; i < self->trial.nenv; i++)
            fprintf (f, "  env (every stage): %s=%s\n", self->trial.env_keys[i],
                     self->trial.env_vals[i]);
    uint64_t total = 0;
    uint64_t points = self->search.samples ? self->search.samples : 1;
    if (cgq_space_count (self, &total) == 0)
        points = total / points;
    if (alg != CGQ_SEARCH_RANDOM && alg != CGQ_SEARCH_GRID && cgq_space_count (self, &total) == 0)
        fprintf (f, "trials: %llu\n", (unsigned long long) total);
    else if (cgq_space_count (self, &total) == 0)
        fprintf (f, "trials: %llu (%llu grid point(s) x %llu)\n", (unsigned long long) total,
                 (unsigned long long) points, (unsigned long long) self->search.samples);
    else
        fputs ("trials: more than 2^63\n", f);
}
