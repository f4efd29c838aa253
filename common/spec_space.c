// spec_space: the space: section of a spec, each param's distribution
// (choice, uniform, ..., repeat, assignment) checked and read into a
// cgq_param_t. Part of the spec parser (spec.c; shared internals in
// spec_impl.h).
#include "spec.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "space.h"
#include "spec_impl.h"
#include "template.h"
#include "util.h"

// randint bounds stay where a double holds every integer exactly.
#define S_MAX_EXACT 9007199254740992.0 // 2^53

static const char *s_dists = "choice, uniform, loguniform, quniform, qloguniform, randint, grid, "
                             "repeat, assignment, value";
// What a repeat may repeat: one draw of a sampled distribution.
static const char *s_inner_dists = "choice, uniform, loguniform, quniform, qloguniform, randint";

// s_bounds reads [lo, hi] of uniform / loguniform / randint.
static int
s_bounds (spec_ctx_t *c, const char *pname, const char *dist, const cgq_yamldoc_node_t *v,
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
s_qbounds (spec_ctx_t *c, const char *pname, const char *dist, const cgq_yamldoc_node_t *v,
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
s_names (spec_ctx_t *c, const char *pname, const char *what, const cgq_yamldoc_node_t *v, size_t max,
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
s_assignment_env (spec_ctx_t *c, const char *pname, const cgq_yamldoc_node_t *e, cgq_param_t *p)
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
s_parse_assignment (spec_ctx_t *c, const char *pname, const cgq_yamldoc_node_t *v, cgq_param_t *p)
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
s_parse_dist (spec_ctx_t *c, const char *name, const cgq_yamldoc_node_t *dk,
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
s_parse_repeat (spec_ctx_t *c, const char *name, const cgq_yamldoc_node_t *v, cgq_param_t *p)
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

void
spec_param_fini (cgq_param_t *p)
{
    free (p->name);
    json_decref (p->value);
    json_decref (p->values);
    json_decref (p->items);
    free (p->env);
    if (p->of) {
        spec_param_fini (p->of);
        free (p->of);
    }
    memset (p, 0, sizeof *p);
}

static int
s_parse_param (spec_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *k,
               const cgq_yamldoc_node_t *v)
{
    const char *name = cgq_yamldoc_text (k);
    if (!spec_is_ident (name, k->len))
        return cgq_yamldoc_fail (
            c->y, k,
            "bad parameter name '%s' (a name is a letter or _ followed by letters, "
            "digits or _, e.g. learning_rate)",
            name);
    if (cgq_template_is_builtin (name, strlen (name)))
        return cgq_yamldoc_fail (c->y, k,
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
        spec_param_fini (p);
        return -1;
    }
    p->name = cgq_xstrdup (name);
    json_object_set_new (spec->param_index, name, json_integer ((json_int_t) spec->nparams));
    spec->nparams++;
    return 0;
}

int
spec_parse_space (spec_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *v)
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
