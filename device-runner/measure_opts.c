#include "measure_opts.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

static int
s_num (json_t *v, const char *key, double lo, double hi, double *out, char *err, size_t errlen)
{
    if (!json_is_number (v) || !isfinite (json_number_value (v)) || json_number_value (v) < lo
        || json_number_value (v) > hi) {
        snprintf (err, errlen, "measure.%s must be a number in [%g, %g]", key, lo, hi);
        return -1;
    }
    *out = json_number_value (v);
    return 0;
}

static int
s_count (json_t *v, const char *key, double lo, double hi, uint32_t *out, char *err, size_t errlen)
{
    double d;
    if (!json_is_integer (v) || s_num (v, key, lo, hi, &d, err, errlen) < 0) {
        snprintf (err, errlen, "measure.%s must be a whole number in [%g, %g]", key, lo, hi);
        return -1;
    }
    *out = (uint32_t) d;
    return 0;
}

int
cgq_measure_opts_parse (const char *json, cgq_runcfg_bench_t *b, cgq_measure_opts_t *o,
                        char *err, size_t errlen)
{
    memset (o, 0, sizeof *o);
    // runner.yaml's defaults first (runcfg.c), then the stage's keys.
    if (b->governor && strlen (b->governor) < sizeof o->governor)
        memcpy (o->governor, b->governor, strlen (b->governor) + 1);
    o->khz = b->frequency_khz;
    o->below_c = b->cooldown_below_c;
    o->max_wait_s = b->cooldown_max_wait_s > 0 ? b->cooldown_max_wait_s : 120;
    if (!json || !*json)
        return 0;
    json_error_t je;
    json_t *root = json_loads (json, 0, &je);
    if (!json_is_object (root)) {
        snprintf (err, errlen, "measure is not a JSON object: %s", root ? "" : je.text);
        json_decref (root);
        return -1;
    }
    const char *k;
    json_t *v;
    int rc = 0;
    json_object_foreach (root, k, v)
    {
        double d;
        if (!strcmp (k, "warmup"))
            rc = s_count (v, k, 1, 1e6, &o->warmup, err, errlen);
        else if (!strcmp (k, "repeats"))
            rc = s_count (v, k, 1, 1e6, &o->repeats, err, errlen);
        else if (!strcmp (k, "precision")) {
            if ((rc = s_num (v, k, 1e-9, 1 - 1e-9, &d, err, errlen)) == 0) {
                b->precision = d;
                if (b->max_runs == 0)
                    b->max_runs = 1000;
            }
        }
        else if (!strcmp (k, "max_runs"))
            rc = s_count (v, k, 1, 1e7, &b->max_runs, err, errlen);
        else if (!strcmp (k, "max_time_s"))
            rc = s_num (v, k, 1e-3, 1e7, &b->max_time_s, err, errlen);
        else if (!strcmp (k, "interference_reruns"))
            rc = s_count (v, k, 0, 100, &b->interference_reruns, err, errlen);
        else if (!strcmp (k, "governor")) {
            const char *g = json_string_value (v);
            size_t n = g ? strlen (g) : 0;
            bool ok = n > 0 && n < sizeof o->governor;
            for (size_t i = 0; ok && i < n; i++)
                ok = (g[i] >= 'a' && g[i] <= 'z') || (g[i] >= '0' && g[i] <= '9') || g[i] == '_';
            if (!ok) {
                snprintf (err, errlen, "measure.governor must be a cpufreq governor's name "
                                       "(lowercase letters, digits, '_')");
                rc = -1;
            } else
                memcpy (o->governor, g, n + 1);
        }
        else if (!strcmp (k, "frequency_khz")) {
            if ((rc = s_num (v, k, 1, 1e8, &d, err, errlen)) == 0)
                o->khz = (uint64_t) d;
        }
        else if (!strcmp (k, "cooldown_below_c"))
            rc = s_num (v, k, 1e-3, 150, &o->below_c, err, errlen);
        else if (!strcmp (k, "cooldown_max_wait_s"))
            rc = s_num (v, k, 0, 1e6, &o->max_wait_s, err, errlen);
        else if (!strcmp (k, "passes"))
            rc = s_count (v, k, 1, 16, &o->passes, err, errlen);
        else {
            snprintf (err, errlen, "this runner does not know measure.%s (upgrade the runner, "
                                   "or remove it from the spec)",
                      k);
            rc = -1;
        }
        if (rc < 0)
            break;
    }
    json_decref (root);
    return rc;
}
