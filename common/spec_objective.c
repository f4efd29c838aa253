// spec_objective: objective:, objectives: and early_stop: of a spec, and
// the objective values of a trial's metrics (cgq_spec_objective_value[s]).
// Part of the spec parser (spec.c; shared internals in spec_impl.h).
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
#include "util.h"

void
spec_objective_fini (cgq_objective_t *o)
{
    free (o->metric);
    free (o->text);
    cgq_expr_destroy (&o->expr);
    memset (o, 0, sizeof *o);
}

// s_name_ok says whether name may name an expression objective: a word of
// letters, digits, '_', '-' and '.', as metric names are.
static bool
s_name_ok (const char *name)
{
    size_t n = strlen (name);
    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum ((unsigned char) name[i]) && !strchr ("_-.", name[i]))
            return false;
    return true;
}

// s_parse_one_objective reads {metric: NAME | expr: TEXT [, name: NAME], mode: max | min}
// into o; where names it in messages ("objective", "objectives[1]").
static int
s_parse_one_objective (spec_ctx_t *c, const char *where, const cgq_yamldoc_node_t *key,
                       const cgq_yamldoc_node_t *v, cgq_objective_t *o)
{
    char hint[128], what[96];
    snprintf (hint, sizeof hint, "write %s: {metric: val_loss, mode: min}", where);
    if (cgq_yamldoc_expect_map (c->y, v, where, hint) < 0)
        return -1;
    const char *metric = NULL, *name = NULL;
    const cgq_yamldoc_node_t *first = NULL, *name_node = NULL;
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
        else if (!strcmp (kt, "name")) {
            snprintf (what, sizeof what, "%s.name", where);
            if (cgq_yamldoc_get_text (c->y, e, what, "write name: score", &name) < 0)
                return -1;
            if (!s_name_ok (name))
                return cgq_yamldoc_fail (c->y, e,
                                         "%s '%s' must be a word of letters, digits, '_', '-' and "
                                         "'.', at most 64 (write name: score)",
                                         what, name);
            name_node = k;
        }
        else
            return cgq_yamldoc_unknown_key (c->y, k, where, "metric, expr, name, mode");
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
    if (name_node && !o->expr)
        return cgq_yamldoc_fail (c->y, name_node,
                                 "%s.name applies to expr: a metric: objective is named by its "
                                 "metric (remove name, or write expr:)",
                                 where);
    o->text = o->expr ? cgq_xstrdup (metric) : NULL;
    o->metric = cgq_xstrdup (name ? name : metric);
    o->mode = mode;
    return 0;
}

int
spec_parse_objective (spec_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *key,
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

int
spec_parse_objectives (spec_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *key,
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

// --- early_stop -------------------------------------------------------------------

int
spec_parse_early_stop (spec_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *key,
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
                                      "write algorithm: asha, median or hyperband", &t) < 0)
                return -1;
            c->es_alg_node = e;
            if (!strcmp (t, "asha"))
                spec->early_stop.algorithm = CGQ_EARLY_STOP_ASHA;
            else if (!strcmp (t, "median"))
                spec->early_stop.algorithm = CGQ_EARLY_STOP_MEDIAN;
            else if (!strcmp (t, "hyperband"))
                spec->early_stop.algorithm = CGQ_EARLY_STOP_HYPERBAND;
            else
                return cgq_yamldoc_fail (
                    c->y, e,
                    "unknown early_stop.algorithm '%s' (expected one of: asha, "
                    "median, hyperband)",
                    t);
        }
        else if (!strcmp (kt, "objectives")) {
            char buf[96];
            if (e->type != CGQ_YAMLDOC_SEQ || cgq_yamldoc_nitems (e) < 2
                || cgq_yamldoc_nitems (e) > CGQ_SPEC_MAX_OBJECTIVES)
                return cgq_yamldoc_fail (c->y, e,
                                         "early_stop.objectives must list 2 to %d of the job's "
                                         "objectives by name, not %s (write objectives: [loss, "
                                         "latency]; for one, write metric:)",
                                         CGQ_SPEC_MAX_OBJECTIVES,
                                         cgq_yamldoc_what (e, buf, sizeof buf));
            for (size_t i = 0; i < cgq_yamldoc_nitems (e); i++)
                if (cgq_yamldoc_get_text (c->y, cgq_yamldoc_item (c->y, e, i),
                                          "early_stop.objectives[]",
                                          "write the name of one of the job's objectives", &t) < 0)
                    return -1;
            c->es_objectives = e;
        }
        else if (!strcmp (kt, "brackets")) {
            if (cgq_yamldoc_get_int (c->y, e, "early_stop.brackets", 1, 31,
                                     "write e.g. brackets: 3", &n) < 0)
                return -1;
            spec->early_stop.brackets = (uint32_t) n;
            c->brackets_key = e;
        }
        else if (!strcmp (kt, "attribute") || !strcmp (kt, "metric") || !strcmp (kt, "time_attr")) {
            char what[64];
            snprintf (what, sizeof what, "early_stop.%s", kt);
            if (cgq_yamldoc_get_text (c->y, e, what,
                                      !strcmp (kt, "metric") ? "write metric: val_loss"
                                                             : "write attribute: epoch",
                                      &t) < 0)
                return -1;
            char **dst = !strcmp (kt, "metric") ? &spec->early_stop.metric
                                                : &spec->early_stop.attribute;
            free (*dst); // attribute and time_attr: the last one written
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
        else if (!strcmp (kt, "max") || !strcmp (kt, "max_t")) {
            if (cgq_yamldoc_get_int (c->y, e, "early_stop.max", 1, LLONG_MAX, "write e.g. max: 100",
                                     &n) < 0)
                return -1;
            spec->early_stop.max = (uint64_t) n;
            max_node = e;
        }
        else if (!strcmp (kt, "reduction") || !strcmp (kt, "reduction_factor")) {
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
                c->y, k, "early_stop",
                "algorithm, attribute, metric, objectives, mode, grace, reduction, max; hyperband also "
                "brackets, and time_attr, max_t, reduction_factor for attribute, max, reduction");
    }
    if (spec->early_stop.algorithm == CGQ_EARLY_STOP_NONE)
        return cgq_yamldoc_fail (
            c->y, key,
            "early_stop.algorithm is missing (write algorithm: asha or algorithm: "
            "median)");
    if (c->reduction_key && spec->early_stop.algorithm != CGQ_EARLY_STOP_ASHA
        && spec->early_stop.algorithm != CGQ_EARLY_STOP_HYPERBAND)
        return cgq_yamldoc_fail (c->y, c->reduction_key,
                                 "early_stop.reduction applies to algorithms asha and hyperband "
                                 "only (remove it)");
    if (c->brackets_key && spec->early_stop.algorithm != CGQ_EARLY_STOP_HYPERBAND)
        return cgq_yamldoc_fail (c->y, c->brackets_key,
                                 "early_stop.brackets applies to algorithm hyperband only (remove "
                                 "it)");
    if (spec->early_stop.algorithm == CGQ_EARLY_STOP_HYPERBAND) {
        double eta = spec->early_stop.reduction, R = (double) spec->early_stop.max;
        if (eta < 2)
            return cgq_yamldoc_fail (c->y, c->reduction_key,
                                     "early_stop.reduction_factor of hyperband must be at least "
                                     "2, not %g (write reduction_factor: 3)",
                                     eta);
        if (R < eta)
            return cgq_yamldoc_fail (
                c->y, max_node ? max_node : key,
                "early_stop.max_t %g is below reduction_factor %g: hyperband would have one "
                "rung and stop nothing (write max_t: %g or more)",
                R, eta, eta * eta);
        unsigned s_max = (unsigned) floor (log (R) / log (eta) + 1e-9);
        if (spec->early_stop.brackets > s_max + 1)
            return cgq_yamldoc_fail (
                c->y, c->brackets_key,
                "early_stop.brackets %u is more than max_t %g and reduction_factor %g allow "
                "(floor(log(max_t) / log(reduction_factor)) + 1 = %u; write brackets: %u or "
                "fewer, or leave it out)",
                spec->early_stop.brackets, R, eta, s_max + 1, s_max + 1);
    }
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

// spec_check_early_stop completes early_stop from the objective, which may be
// written after it.
int
spec_check_early_stop (spec_ctx_t *c, cgq_spec_t *spec)
{
    if (spec->early_stop.algorithm == CGQ_EARLY_STOP_NONE)
        return 0;
    // Hyperband promotes a trial by resuming it from the checkpoint it was
    // paused at: a spec that says nothing of checkpoints most likely has
    // trials that never write one, which would restart from zero at every
    // rung. Say so rather than waste the budget.
    if (spec->early_stop.algorithm == CGQ_EARLY_STOP_HYPERBAND && !c->checkpoint_key)
        return cgq_yamldoc_fail (
            c->y, c->es_alg_node ? c->es_alg_node : c->early_key,
            "early_stop hyperband needs a checkpoint: section (a promoted trial resumes from "
            "the checkpoint it was paused at; write checkpoint: {store: '{spec_dir}/ckpt'} "
            "and have the trial call cgq.checkpoint(epoch=...) after each epoch)");
    const cgq_objective_t *o = spec->nobjectives == 1 ? &spec->objective : NULL;
    if (c->es_objectives && (spec->early_stop.metric || spec->nobjectives < 2))
        return cgq_yamldoc_fail (c->y, c->es_objectives,
                                 spec->early_stop.metric
                                     ? "early_stop has both metric and objectives (keep one)"
                                     : "early_stop.objectives names objectives of a job with "
                                       "several (objectives: [...]); this spec has %s (write "
                                       "metric: instead)",
                                 spec->nobjectives ? "one" : "none");
    if (!spec->early_stop.metric && spec->nobjectives > 1) {
        // Multi-objective asha: every objective of the job is compared.
        if (spec->early_stop.algorithm != CGQ_EARLY_STOP_ASHA)
            return cgq_yamldoc_fail (
                c->y, c->early_key,
                "early_stop algorithm median compares one metric and the spec has several "
                "objectives (write algorithm: asha, which judges them all, or metric: NAME "
                "and mode: max or min)");
        if (c->es_mode_given)
            return cgq_yamldoc_fail (c->y, c->early_key,
                                     "early_stop.mode applies to early_stop.metric; with several "
                                     "objectives each has its own mode (remove mode)");
        // Which: the names early_stop.objectives lists, else all.
        size_t n = c->es_objectives ? cgq_yamldoc_nitems (c->es_objectives) : spec->nobjectives;
        for (size_t i = 0; i < n; i++) {
            spec->early_stop.obj[i] = i;
            if (!c->es_objectives)
                continue;
            const cgq_yamldoc_node_t *e = cgq_yamldoc_item (c->y, c->es_objectives, i);
            const char *name = cgq_yamldoc_text (e);
            size_t k = 0;
            while (k < spec->nobjectives && strcmp (spec->objectives[k].metric, name))
                k++;
            char known[CGQ_SPEC_MAX_OBJECTIVES * 72] = "";
            for (size_t a = 0, at = 0; a < spec->nobjectives && at < sizeof known; a++)
                at += (size_t)snprintf (known + at, sizeof known - at, "%s%s", a ? ", " : "",
                                        spec->objectives[a].metric);
            if (k == spec->nobjectives)
                return cgq_yamldoc_fail (c->y, e,
                                         "early_stop.objectives: '%s' is not one of the job's "
                                         "objectives (%s)",
                                         name, known);
            for (size_t a = 0; a < i; a++)
                if (spec->early_stop.obj[a] == k)
                    return cgq_yamldoc_fail (c->y, e, "early_stop.objectives names '%s' twice",
                                             name);
            spec->early_stop.obj[i] = k;
        }
        spec->early_stop.nobjectives = n;
        char names[CGQ_SPEC_MAX_OBJECTIVES * 72] = "";
        size_t at = 0;
        for (size_t i = 0; i < n && at < sizeof names; i++)
            at += (size_t)snprintf (names + at, sizeof names - at, "%s%s", i ? "," : "",
                                    spec->objectives[spec->early_stop.obj[i]].metric);
        spec->early_stop.metric = cgq_xstrdup (names);
        spec->early_stop.mode = 1;
        return 0;
    }
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
            snprintf (err, errlen, "objective expr \"%s\": %s", o->text, e);
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
