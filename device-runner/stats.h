// stats: the summary of one measurement's timed runs — order statistics,
// moments and the interquartile mean of the samples (milliseconds), and the
// samples themselves, capped, as they go into Result.metrics_json.
#ifndef CGQ_STATS_H
#define CGQ_STATS_H

#include <jansson.h>
#include <stddef.h>

typedef struct {
    size_t n;          // samples summarised
    double min, max;
    double p50, p90, p99; // linear interpolation between order statistics
    double mean;
    double std;        // sample standard deviation (n - 1); 0 for n < 2
    double cv;         // std / mean; 0 when mean is 0
    double iqr_mean;   // mean of the samples within [p25, p75]
    double ci_low, ci_high; // distribution-free 95 % CI of the median (order
                            // statistics); min and max when n < 6 (then
                            // the coverage is below 95 %: ci_ok is 0)
    int ci_ok;
} cgq_stats_t;

// cgq_stats_median_ci_ranks gives the 1-based ranks lo <= hi of the order
// statistics x(lo), x(hi) that bound the median of n samples with coverage at
// least conf (0 < conf < 1): lo is the largest k with P(B < k) <= (1-conf)/2,
// B ~ Binomial(n, 1/2), and hi = n + 1 - lo. Returns 0, or -1 when no such
// pair exists (n too small: 95 % needs n >= 6), then lo = 1 and hi = n.
int cgq_stats_median_ci_ranks (size_t n, double conf, size_t *lo, size_t *hi);

// cgq_stats_compute summarises samples[0..n-1] (not modified) into *out.
// Returns 0, or -1 when n is 0 (then *out is all zero).
int cgq_stats_compute (const double *samples, size_t n, cgq_stats_t *out);

// cgq_stats_quantile returns the q-quantile (0 <= q <= 1) of sorted[0..n-1]
// by linear interpolation between the closest ranks (numpy's default);
// 0 for n == 0.
double cgq_stats_quantile (const double *sorted, size_t n, double q);

// cgq_stats_to_json adds the summary to obj with the given suffix on each
// name ("min" + "_ms" -> "min_ms"; cv takes no suffix), and the first
// cap samples (in the order taken) as an array named samples_key, plus
// "samples_dropped" when some did not fit. obj is borrowed.
void cgq_stats_to_json (const cgq_stats_t *st, const double *samples, size_t n, size_t cap,
                        const char *suffix, const char *samples_key, json_t *obj);

#endif
