// agree: how well two measurements of the same things agree (a measurement
// job's two passes, docs/devices.md "Two passes"). The figures are the ones a
// latency predictor is judged by, so a job's pass-to-pass agreement is the
// ceiling any predictor trained on its numbers can reach: acc10 with pass 1
// as the truth and pass 2 as the prediction, the median relative difference,
// and Spearman's rank correlation between the passes.
#ifndef CGQ_AGREE_H
#define CGQ_AGREE_H

#include <stddef.h>

typedef struct {
    size_t n;          // pairs used: both finite, the first > 0
    double acc10;      // share of pairs with |b - a| / a <= 0.10 (NAN when n = 0)
    double median_abs; // median of |b - a| / a (NAN when n = 0)
    double srcc;       // Spearman's rho of a and b, average ranks for ties
                       // (NAN when n < 2 or either side is constant)
} cgq_agree_t;

// cgq_pass_diff is the relative difference of a second measurement b from a
// first a, (b - a) / a: what a trial's pass_diff metric says. NAN unless both
// are finite and a > 0.
double cgq_pass_diff (double a, double b);

// cgq_ranks writes the ranks (1-based, ties averaged) of v[0..n) into r.
void cgq_ranks (const double *v, size_t n, double *r);
// cgq_srcc is Spearman's rho of a and b (average ranks for ties); NAN when
// n < 2 or either side is constant. The predictor's SRCC is this one.
double cgq_srcc (const double *a, const double *b, size_t n);

// cgq_agree computes the agreement of n pairs (a[i], b[i]); pairs where
// cgq_pass_diff is NAN are left out (and not counted in n). Owns nothing.
cgq_agree_t cgq_agree (const double *a, const double *b, size_t n);

#endif
