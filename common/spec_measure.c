// spec_measure: a device stage's measure: block — how its runner measures
// (docs/devices.md, "Measurements that check their own noise"). Each key
// overrides the runner.yaml benchmark's default; the runner refuses what its
// device cannot honour (a governor without cpufreq) in the result.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "json.h"
#include "spec_impl.h"
#include "util.h"

#define S_KNOWN                                                                                    \
    "warmup, repeats, precision, max_runs, max_time, interference_reruns, governor, frequency, "   \
    "cooldown, passes"

static int
s_duration (spec_ctx_t *c, const cgq_yamldoc_node_t *e, const char *what, const char *hint,
            double *out)
{
    char buf[96];
    double s;
    if (e->type != CGQ_YAMLDOC_SCALAR || cgq_yamldoc_is_null (e)
        || cgq_parse_duration (cgq_yamldoc_text (e), &s) < 0 || !(s > 0) || !isfinite (s))
        return cgq_yamldoc_fail (c->y, e,
                                 "%s must be a duration > 0 like 2m, 90s or a number of seconds, "
                                 "not %s (%s)",
                                 what, cgq_yamldoc_what (e, buf, sizeof buf), hint);
    *out = s;
    return 0;
}

static int
s_cooldown (spec_ctx_t *c, cgq_measure_spec_t *m, const cgq_yamldoc_node_t *v)
{
    const char *hint = "write cooldown: {below_c: 50, max_wait: 2m}";
    if (cgq_yamldoc_expect_map (c->y, v, "measure.cooldown", hint) < 0)
        return -1;
    m->cooldown_max_wait_s = 120;
    bool below = false;
    for (size_t i = 0; i < cgq_yamldoc_npairs (v); i++) {
        const cgq_yamldoc_node_t *k = cgq_yamldoc_key (c->y, v, i),
                                 *e = cgq_yamldoc_val (c->y, v, i);
        const char *kt = cgq_yamldoc_text (k);
        if (!strcmp (kt, "below_c")) {
            double d;
            if (cgq_yamldoc_get_number (c->y, e, "measure.cooldown.below_c", hint, &d) < 0)
                return -1;
            if (!(d > 0 && d < 150))
                return cgq_yamldoc_fail (c->y, e,
                                         "measure.cooldown.below_c must be degrees Celsius "
                                         "between 0 and 150, not %g (%s)",
                                         d, hint);
            m->cooldown_below_c = d;
            below = true;
        }
        else if (!strcmp (kt, "max_wait")) {
            if (s_duration (c, e, "measure.cooldown.max_wait", hint, &m->cooldown_max_wait_s) < 0)
                return -1;
        }
        else
            return cgq_yamldoc_unknown_key (c->y, k, "measure.cooldown", "below_c, max_wait");
    }
    if (!below)
        return cgq_yamldoc_fail (c->y, v, "measure.cooldown needs below_c, the temperature to "
                                          "wait for (%s)",
                                 hint);
    return 0;
}

int
spec_parse_measure (spec_ctx_t *c, cgq_stage_t *st, const cgq_yamldoc_node_t *v, bool in_stage)
{
    cgq_measure_spec_t *m = &st->measure;
    if (cgq_yamldoc_expect_map (c->y, v, "measure",
                                "write measure: {precision: 0.02, max_runs: 500}")
        < 0)
        return -1;
    m->given = true;
    m->interference_reruns = -1;
    for (size_t i = 0; i < cgq_yamldoc_npairs (v); i++) {
        const cgq_yamldoc_node_t *k = cgq_yamldoc_key (c->y, v, i),
                                 *e = cgq_yamldoc_val (c->y, v, i);
        const char *kt = cgq_yamldoc_text (k);
        long long n;
        double d;
        if (!strcmp (kt, "warmup") || !strcmp (kt, "repeats")) {
            bool w = kt[0] == 'w';
            if (cgq_yamldoc_get_int (c->y, e, w ? "measure.warmup" : "measure.repeats", 1,
                                     1000000, w ? "write e.g. warmup: 5" : "write e.g. repeats: 50",
                                     &n)
                < 0)
                return -1;
            if ((w ? st->warmup : st->repeats) && !(w ? m->warmup : m->repeats))
                return cgq_yamldoc_fail (c->y, k,
                                         "measure.%s and trial.%s say the same thing (keep one)",
                                         kt, kt);
            if (w)
                st->warmup = m->warmup = (uint32_t) n;
            else
                st->repeats = m->repeats = (uint32_t) n;
        }
        else if (!strcmp (kt, "precision")) {
            const char *hint = "write e.g. precision: 0.02 for ±2 %";
            if (cgq_yamldoc_get_number (c->y, e, "measure.precision", hint, &d) < 0)
                return -1;
            if (!(d > 0 && d < 1))
                return cgq_yamldoc_fail (c->y, e,
                                         "measure.precision must be a share between 0 and 1 "
                                         "(exclusive), not %g (%s)",
                                         d, hint);
            m->precision = d;
        }
        else if (!strcmp (kt, "max_runs")) {
            if (cgq_yamldoc_get_int (c->y, e, "measure.max_runs", 1, 10000000,
                                     "write e.g. max_runs: 500", &n)
                < 0)
                return -1;
            m->max_runs = (uint32_t) n;
        }
        else if (!strcmp (kt, "max_time")) {
            if (s_duration (c, e, "measure.max_time", "write e.g. max_time: 5m", &m->max_time_s)
                < 0)
                return -1;
        }
        else if (!strcmp (kt, "interference_reruns")) {
            if (cgq_yamldoc_get_int (c->y, e, "measure.interference_reruns", 0, 100,
                                     "write e.g. interference_reruns: 2 (0: flag at once)", &n)
                < 0)
                return -1;
            m->interference_reruns = (int32_t) n;
        }
        else if (!strcmp (kt, "governor")) {
            const char *g;
            const char *hint = "write e.g. governor: performance";
            if (cgq_yamldoc_get_text (c->y, e, "measure.governor", hint, &g) < 0)
                return -1;
            size_t len = strlen (g);
            bool ok = len > 0 && len <= 32;
            for (size_t j = 0; ok && j < len; j++)
                ok = (g[j] >= 'a' && g[j] <= 'z') || (g[j] >= '0' && g[j] <= '9') || g[j] == '_';
            if (!ok)
                return cgq_yamldoc_fail (c->y, e,
                                         "bad measure.governor '%s': a cpufreq governor's name is "
                                         "lowercase letters, digits and '_' (%s)",
                                         g, hint);
            free (m->governor);
            m->governor = cgq_xstrdup (g);
        }
        else if (!strcmp (kt, "frequency")) {
            if (cgq_yamldoc_get_int (c->y, e, "measure.frequency", 1, 100000000,
                                     "write the CPU frequency in kHz, e.g. frequency: 1800000",
                                     &n)
                < 0)
                return -1;
            m->frequency_khz = (uint64_t) n;
        }
        else if (!strcmp (kt, "cooldown")) {
            if (s_cooldown (c, m, e) < 0)
                return -1;
        }
        else if (!strcmp (kt, "passes")) { // coordinator/passes.c
            if (cgq_yamldoc_get_int (c->y, e, "trial.measure.passes", 1, 2,
                                     "write passes: 2 to measure every trial twice, or 1", &n)
                < 0)
                return -1;
            if (n > 1 && in_stage)
                return cgq_yamldoc_fail (
                    c->y, e,
                    "measure.passes: 2 is for a device trial of one stage (trial: with "
                    "benchmark:), not yet for trial.stages[] (write passes: 1, or measure "
                    "in a job of its own)");
            m->passes = (uint32_t) n;
            st->passes = (uint32_t) n;
        }
        else
            return cgq_yamldoc_unknown_key (c->y, k, "measure", S_KNOWN);
    }
    return 0;
}

char *
cgq_spec_measure_json (const cgq_measure_spec_t *m)
{
    if (!m || !m->given)
        return NULL;
    json_t *o = json_object ();
    if (m->warmup)
        json_object_set_new (o, "warmup", json_integer (m->warmup));
    if (m->repeats)
        json_object_set_new (o, "repeats", json_integer (m->repeats));
    if (m->precision > 0)
        json_object_set_new (o, "precision", json_real (m->precision));
    if (m->max_runs)
        json_object_set_new (o, "max_runs", json_integer (m->max_runs));
    if (m->max_time_s > 0)
        json_object_set_new (o, "max_time_s", json_real (m->max_time_s));
    if (m->interference_reruns >= 0)
        json_object_set_new (o, "interference_reruns", json_integer (m->interference_reruns));
    if (m->governor)
        json_object_set_new (o, "governor", json_string (m->governor));
    if (m->frequency_khz)
        json_object_set_new (o, "frequency_khz", json_integer ((json_int_t) m->frequency_khz));
    if (m->cooldown_below_c > 0) {
        json_object_set_new (o, "cooldown_below_c", json_real (m->cooldown_below_c));
        json_object_set_new (o, "cooldown_max_wait_s", json_real (m->cooldown_max_wait_s));
    }
    if (m->passes)
        json_object_set_new (o, "passes", json_integer (m->passes));
    char *s = cgq_json_dumps (o);
    json_decref (o);
    return s;
}
