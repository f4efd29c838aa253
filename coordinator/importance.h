// importance: how much of the objective's variance each param explains on
// its own (docs/dashboard.md, "Parameter importance"). Computed in C on the
// HTTP threads for /api/jobs/ID/importance.
//
// The estimator is the bias-corrected correlation ratio (epsilon squared,
// Kelley 1935) of the objective against each param's marginal: numeric
// params are cut into at most IMPORTANCE_BINS equal-count bins, anything
// else is grouped by its value; for each param
//     eps2 = (SS_between - (k - 1) * MS_within) / SS_total, clamped to >= 0,
// with k its bins. It is the main-effect share of a functional ANOVA
// (fANOVA, Hutter, Hoos and Leyton-Brown, ICML 2014) estimated from bin
// means instead of a random forest. Limits: interactions are not seen (two
// params that only matter together both score near 0), correlated params
// (a search that converged) share credit, and with few trials per bin it is
// noisy: the API reports the count it used.
#ifndef CGQ_IMPORTANCE_H
#define CGQ_IMPORTANCE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define IMPORTANCE_BINS 10
// Fewer trials than this per group on average: the estimate is rough (the
// bias correction, which keeps a noise param near 0, then also pushes a
// param with many groups down against one with few), and the API says so.
#define IMPORTANCE_MIN_PER_GROUP 5

typedef struct {
    char *name;   // the param's name (owned)
    bool numeric; // every value a number: binned; else grouped by value
    size_t bins;  // the bins (or distinct values) used
    size_t n;     // trials that had this param
    double eps2;  // the share of the objective's variance it explains, 0..1
    double share; // eps2 over the sum of every param's eps2 (0 when all 0)
    bool rough;   // n < IMPORTANCE_MIN_PER_GROUP * bins: too few trials per group
} importance_t;

// importance_compute: params[i] (a JSON object) and y[i] for n trials (y
// finite). Sets *out (caller frees with importance_free) to one entry per
// param name seen, most important first (ties by name); returns their count.
size_t importance_compute (json_t *const *params, const double *y, size_t n, importance_t **out);
void importance_free (importance_t *v, size_t n);

#endif
