// metrics: how good a latency predictor is, the figures nn-Meter and the CG
// papers report, computed on latencies (not on normalised targets).
#ifndef CGQ_PRED_METRICS_H
#define CGQ_PRED_METRICS_H

#include <stddef.h>

typedef struct {
    double mae;   // mean |pred - y|, in the latency's unit (ms)
    double mape;  // mean |pred - y| / y, in percent
    double rmse;  // sqrt (mean (pred - y)^2)
    double srcc;  // Spearman's rank correlation (ties get their average rank)
    double acc10; // nn-Meter's +-10 % accuracy: percent of |pred - y| / y <= 0.10
} cgq_pred_metrics_t;

// cgq_pred_metrics computes every metric of n predictions against n true
// values y (> 0). srcc is 0 when either side is constant (or n < 2).
void cgq_pred_metrics (const double *pred, const double *y, size_t n, cgq_pred_metrics_t *out);

// cgq_pred_srcc is Spearman's rank correlation of a and b: the Pearson
// correlation of their ranks, tied values sharing the mean of their ranks
// (scipy.stats.spearmanr). 0 when either side is constant or n < 2.
double cgq_pred_srcc (const double *a, const double *b, size_t n);

// cgq_pred_rank writes the ranks (1..n, ties averaged) of v into rank.
void cgq_pred_rank (const double *v, size_t n, double *rank);

#endif
