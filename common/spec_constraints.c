// spec_constraints: constraints: of a spec, the comparisons over a trial's
// metrics that a feasible trial satisfies (`latency_ms <= 20`), and how far
// a trial's metrics are from satisfying them (cgq_spec_feasible). Part of
// the spec parser (spec.c; shared internals in spec_impl.h).
#include "spec.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec_impl.h"
#include "util.h"

#define S_HINT "write e.g. constraints: [\"latency_ms <= 20\", \"params <= 5e6\"]"

void
spec_constraints_fini (cgq_spec_t *spec)
{
    for (size_t i = 0; i < spec->nconstraints; i++) {
        free (spec->constraints[i].text);
        cgq_expr_destroy (&spec->constraints[i].expr);
    }
    free (spec->constraints);
    spec->constraints = NULL;
    spec->nconstraints = 0;
}

int
spec_parse_constraints (spec_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *key,
                        const cgq_yamldoc_node_t *v)
{
    char buf[96];
    if (v->type != CGQ_YAMLDOC_SEQ)
        return cgq_yamldoc_fail (c->y, v, "constraints must be a list of comparisons, not %s (%s)",
                                 cgq_yamldoc_what (v, buf, sizeof buf), S_HINT);
    size_t n = cgq_yamldoc_nitems (v);
    if (n == 0)
        return cgq_yamldoc_fail (c->y, key, "constraints is an empty list (%s, or remove it)",
                                 S_HINT);
    if (n > CGQ_SPEC_MAX_CONSTRAINTS)
        return cgq_yamldoc_fail (c->y, v, "constraints lists %zu comparisons, more than %d (%s)", n,
                                 CGQ_SPEC_MAX_CONSTRAINTS, S_HINT);
    spec->constraints = cgq_xcalloc (n, sizeof *spec->constraints);
    for (size_t i = 0; i < n; i++) {
        const cgq_yamldoc_node_t *e = cgq_yamldoc_item (c->y, v, i);
        char what[48], msg[512];
        snprintf (what, sizeof what, "constraints[%zu]", i);
        const char *text;
        if (cgq_yamldoc_get_text (c->y, e, what, S_HINT, &text) < 0)
            return -1;
        int column = 1;
        cgq_expr_t *x = cgq_expr_parse (text, &column, msg, sizeof msg);
        int col0 = e->col + (e->quoted ? 1 : 0);
        if (!x) {
            const char *m = strstr (msg, ": ");
            return cgq_yamldoc_fail_at (c->y, e->line, col0 + column - 1, "%s: %s", what,
                                        m ? m + 2 : msg);
        }
        int op = cgq_expr_comparison (x);
        if (op != CGQ_EXPR_CMP_LT && op != CGQ_EXPR_CMP_LE && op != CGQ_EXPR_CMP_GT &&
            op != CGQ_EXPR_CMP_GE) {
            cgq_expr_destroy (&x);
            return cgq_yamldoc_fail (
                c->y, e,
                "%s \"%s\" is not a comparison EXPR <= EXPR (a constraint is one of <=, >=, <, "
                ">; == and != are not: %s)",
                what, text, S_HINT);
        }
        for (size_t k = 0; k < i; k++)
            if (!strcmp (spec->constraints[k].text, text)) {
                cgq_expr_destroy (&x);
                return cgq_yamldoc_fail (c->y, e, "%s \"%s\" repeats constraints[%zu] (remove one)",
                                         what, text, k);
            }
        spec->constraints[i].text = cgq_xstrdup (text);
        spec->constraints[i].expr = x;
        spec->constraints[i].op = op;
        spec->nconstraints = i + 1;
    }
    return 0;
}

bool
cgq_spec_feasible (const cgq_spec_t *self, const json_t *metrics, double *total, json_t **violation,
                   char **warning)
{
    double sum = 0;
    json_t *viol = NULL;
    cgq_buf_t w;
    cgq_buf_init (&w);
    for (size_t i = 0; i < self->nconstraints; i++) {
        const cgq_constraint_t *k = &self->constraints[i];
        double lhs, rhs, by;
        char err[512];
        if (cgq_expr_eval_sides (k->expr, metrics, &lhs, &rhs, err, sizeof err) < 0) {
            cgq_buf_printf (&w,
                            "%sconstraint \"%s\" cannot be computed: %s; the trial counts "
                            "as infeasible (report the metric, or fix the constraint)",
                            w.len ? "; " : "", k->text, err);
            if (!viol)
                viol = json_object ();
            json_object_set_new (viol, k->text, json_null ());
            sum = INFINITY;
            continue;
        }
        bool ok = k->op == CGQ_EXPR_CMP_LT   ? lhs < rhs
                  : k->op == CGQ_EXPR_CMP_LE ? lhs <= rhs
                  : k->op == CGQ_EXPR_CMP_GT ? lhs > rhs
                                             : lhs >= rhs;
        if (ok)
            continue;
        by = k->op == CGQ_EXPR_CMP_LT || k->op == CGQ_EXPR_CMP_LE ? lhs - rhs : rhs - lhs;
        if (!(by > 0))
            by = DBL_MIN; // an equality that < or > refuses: violated, by the least amount
        if (!viol)
            viol = json_object ();
        json_object_set_new (viol, k->text, json_real (by));
        sum += by;
    }
    if (total)
        *total = sum;
    if (warning)
        *warning = w.len ? cgq_xstrdup (w.data) : NULL;
    cgq_buf_fini (&w);
    bool feasible = viol == NULL;
    if (violation)
        *violation = viol;
    else
        json_decref (viol);
    return feasible;
}
