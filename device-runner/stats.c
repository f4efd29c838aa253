#include "stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static int
s_cmp_double (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y ? 1 : 0;
}

double
cgq_stats_quantile (const double *sorted, size_t n, double q)
{
    if (n == 0)
        return 0;
    if (q <= 0)
        return sorted[0];
    if (q >= 1)
        return sorted[n - 1];
    double pos = q * (double) (n - 1);
    size_t lo = (size_t) pos;
    double frac = pos - (double) lo;
    if (lo + 1 >= n)
        return sorted[n - 1];
    return sorted[lo] + (sorted[lo + 1] - sorted[lo]) * frac;
}

int
cgq_stats_compute (const double *samples, size_t n, cgq_stats_t *out)
{
    memset (out, 0, sizeof *out);
    if (n == 0)
        return -1;
    double *s = cgq_xmalloc (n * sizeof *s);
    memcpy (s, samples, n * sizeof *s);
    qsort (s, n, sizeof *s, s_cmp_double);
    out->n = n;
    out->min = s[0];
    out->max = s[n - 1];
    out->p50 = cgq_stats_quantile (s, n, 0.50);
    out->p90 = cgq_stats_quantile (s, n, 0.90);
    out->p99 = cgq_stats_quantile (s, n, 0.99);
    // Welford: stable for many samples of similar size.
    double mean = 0, m2 = 0;
    for (size_t i = 0; i < n; i++) {
        double d = s[i] - mean;
        mean += d / (double) (i + 1);
        m2 += d * (s[i] - mean);
    }
    out->mean = mean;
    out->std = n > 1 ? sqrt (m2 / (double) (n - 1)) : 0;
    out->cv = mean != 0 ? out->std / mean : 0;
    // The interquartile mean: robust to the few slow runs a busy machine
    // adds, yet it uses half the samples rather than one (the median).
    double q1 = cgq_stats_quantile (s, n, 0.25), q3 = cgq_stats_quantile (s, n, 0.75);
    double sum = 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] >= q1 && s[i] <= q3) {
            sum += s[i];
            k++;
        }
    out->iqr_mean = k ? sum / (double) k : out->p50;
    free (s);
    return 0;
}

static void
s_set (json_t *obj, const char *name, const char *suffix, double v)
{
    char key[64];
    snprintf (key, sizeof key, "%s%s", name, suffix ? suffix : "");
    json_object_set_new (obj, key, json_real (isfinite (v) ? v : 0));
}

void
cgq_stats_to_json (const cgq_stats_t *st, const double *samples, size_t n, size_t cap,
                   const char *suffix, const char *samples_key, json_t *obj)
{
    s_set (obj, "min", suffix, st->min);
    s_set (obj, "max", suffix, st->max);
    s_set (obj, "p50", suffix, st->p50);
    s_set (obj, "p90", suffix, st->p90);
    s_set (obj, "p99", suffix, st->p99);
    s_set (obj, "mean", suffix, st->mean);
    s_set (obj, "std", suffix, st->std);
    s_set (obj, "iqr_mean", suffix, st->iqr_mean);
    s_set (obj, "cv", NULL, st->cv);
    json_object_set_new (obj, "runs", json_integer ((json_int_t) st->n));
    if (!samples_key)
        return;
    json_t *arr = json_array ();
    size_t keep = n < cap ? n : cap;
    for (size_t i = 0; i < keep; i++)
        json_array_append_new (arr, json_real (samples[i]));
    json_object_set_new (obj, samples_key, arr);
    if (keep < n)
        json_object_set_new (obj, "samples_dropped", json_integer ((json_int_t) (n - keep)));
}
