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
    size_t lo, hi;
    out->ci_ok = cgq_stats_median_ci_ranks (n, 0.95, &lo, &hi) == 0;
    out->ci_low = s[lo - 1];
    out->ci_high = s[hi - 1];
    free (s);
    return 0;
}

int
cgq_stats_median_ci_ranks (size_t n, double conf, size_t *lo, size_t *hi)
{
    *lo = 1;
    *hi = n ? n : 1;
    if (n == 0 || !(conf > 0 && conf < 1))
        return -1;
    double tail = (1 - conf) / 2, cdf = 0;
    // P(B = i) in log space (lgamma): exact enough for any n a measurement takes.
    double ln2n = (double) n * log (2.0);
    size_t best = 0;
    for (size_t k = 1; k <= (n + 1) / 2; k++) {
        size_t i = k - 1; // cdf = P(B <= k - 1) = P(B < k)
        cdf += exp (lgamma ((double) n + 1) - lgamma ((double) i + 1) -
                    lgamma ((double) (n - i) + 1) - ln2n);
        if (cdf <= tail * (1 + 1e-12))
            best = k;
        else
            break;
    }
    if (best == 0)
        return -1;
    *lo = best;
    *hi = n + 1 - best;
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
    s_set (obj, "ci_low", suffix, st->ci_low);
    s_set (obj, "ci_high", suffix, st->ci_high);
    json_object_set_new (obj, "ci_ok", json_boolean (st->ci_ok));
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
