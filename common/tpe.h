// tpe: the math of the Tree-structured Parzen Estimator (the tpe searcher,
// search_tpe.c), as Optuna's TPESampler does it (3.1's defaults:
// consider_prior, prior_weight 1, consider_magic_clip, no
// consider_endpoints, default_gamma, default_weights). Pure functions and one
// object, the estimator; no params, no JSON: the searcher maps the space to
// coordinates, and tpe_test.c checks every number here against Optuna's own
// (tpe_expected.py wrote tpe_expected.h).
//
// An estimator is a mixture of one kernel per observation plus a prior
// kernel, over ndim dimensions of three kinds:
//   REAL      a real in [low, high]: truncated normal kernels (a loguniform
//             in log space; an integer on a log scale too, its bounds
//             widened by half a step, its samples rounded by the caller)
//   STEP      the values low + step/2 + j step in (low, high): truncated
//             normal kernels whose mass over [v - step/2, v + step/2] is the
//             probability of v (randint, quniform: bounds already widened
//             by half a step, as Optuna widens them)
//   CATEGORY  n categories (coordinates 0 .. n-1): each observation's kernel
//             puts 1 + w on its category and w on each (w = 1 / (nobs + 1)),
//             the prior is uniform
// Univariate (one estimator per dimension): a kernel's width is the larger
// distance to its neighbours among the sorted observations, the prior's mean
// and the bounds; multivariate: Scott's rule, 0.2 n^(-1/(d+4)) of the range,
// for every kernel. Widths are clipped to [range / min(100, nobs + 2), range];
// the prior's is the range, centred. Weights: 1 for the last 25
// observations (in the order given: chronological), a ramp from 1/n up for
// older ones, 1 for the prior, normalised.
//
// One deliberate difference from Optuna 3.1: the kernels' log density
// includes -log(sigma) (Optuna 3.1 left it out, optuna#5109; Optuna 3.5
// fixed it), so they integrate to 1.
#ifndef CGQ_TPE_H
#define CGQ_TPE_H

#include <stdbool.h>
#include <stddef.h>

#include "search_impl.h"

typedef enum { CGQ_TPE_REAL, CGQ_TPE_STEP, CGQ_TPE_CATEGORY } cgq_tpe_kind_t;

typedef struct {
    cgq_tpe_kind_t kind;
    double low, high; // REAL, STEP: the kernels' bounds (low < high)
    double step;      // STEP: the distance between values
    int n;            // CATEGORY: the number of categories (>= 1)
} cgq_tpe_dim_t;

typedef struct cgq_tpe_t cgq_tpe_t;

// cgq_tpe_new builds the estimator of nobs observations (obs: nobs rows of
// ndim coordinates, row-major, oldest first; may be NULL when nobs is 0)
// over dims (ndim of them, copied). Caller destroys.
cgq_tpe_t *cgq_tpe_new (const cgq_tpe_dim_t *dims, size_t ndim, const double *obs, size_t nobs,
                        bool multivariate);
void cgq_tpe_destroy (cgq_tpe_t **self_p);

// cgq_tpe_new_weighted is cgq_tpe_new with the observations' weights given
// (nobs values >= 0, not all 0; normalised with the prior's 1 here) instead
// of Optuna's default_weights: MOTPE's good group (cgq_tpe_weights_multi).
// weights NULL: cgq_tpe_new.
cgq_tpe_t *cgq_tpe_new_weighted (const cgq_tpe_dim_t *dims, size_t ndim, const double *obs,
                                 size_t nobs, bool multivariate, const double *weights);

// cgq_tpe_sample draws m points of the mixture into out (m rows of ndim):
// a kernel by weight, then each dimension from it (STEP values rounded to a
// value, as Optuna rounds them).
void cgq_tpe_sample (const cgq_tpe_t *self, cgq_rng_t *r, size_t m, double *out);

// cgq_tpe_log_pdf writes the log density of the mixture at each of m points
// (x: m rows of ndim) into out (m values): for STEP dimensions the log
// probability of the value, for CATEGORY the log probability of the
// category. -INFINITY outside the bounds.
void cgq_tpe_log_pdf (const cgq_tpe_t *self, const double *x, size_t m, double *out);

// cgq_tpe_best is the index of the largest score (the first of equals;
// scores that are NaN never win; 0 if all are NaN).
size_t cgq_tpe_best (const double *score, size_t m);

// cgq_tpe_gamma is how many of n finished trials form the good group:
// min(ceil(0.1 n), 25), computed in doubles as Optuna does (so 30 gives 4).
size_t cgq_tpe_gamma (size_t n);

// cgq_tpe_weights writes Optuna's default_weights(n) into w (n values, not
// normalised): 1 for the last 25, a linear ramp from 1/n for the others.
void cgq_tpe_weights (size_t n, double *w);

// cgq_tpe_split splits n trials (oldest first) by loss (minimised; +INFINITY
// for a trial in flight, which the constant liar counts as the worst) into
// the nbelow best, ties to the older, and the rest. Both lists come out in
// trial order (below: nbelow indices, above: n - nbelow).
void cgq_tpe_split (const double *loss, size_t n, size_t nbelow, size_t *below, size_t *above);

// Multi-objective TPE (MOTPE), as Optuna 3.1's TPESampler does it for
// several objectives. loss is n rows of m objectives (m <= CGQ_TPE_MAX_OBJECTIVES),
// each minimised, all finite.
#define CGQ_TPE_MAX_OBJECTIVES 8
// cgq_tpe_split_multi is _split_observation_pairs for several objectives:
// whole non-dominated fronts (peeled one at a time, only as many as needed) go into the good group
// while they fit in nbelow; the front that does not fit gives the rest by greedy hypervolume subset
// selection (_solve_hssp: each time the point that adds the most hypervolume, reference max(1.1 w,
// 0.9 w) of that front's worst w per objective, 1e-12 where 0). below gets nbelow indices in
// Optuna's order (the fronts in index order, then the points chosen in the order chosen), above the
// rest ascending. With 5 or more objectives, where exact hypervolumes of a large front cost
// seconds, the subset is the points of the largest own boxes (the greedy choice's first scores,
// not updated); past cgq_pareto_hypervolume's bounds, the front's first points in index order.
void cgq_tpe_split_multi (const double *loss, size_t n, size_t m, size_t nbelow, size_t *below,
                          size_t *above);
// cgq_tpe_weights_multi is _calculate_weights_below_for_multi_objective
// without constraints: the weight of each of the k points idx is its
// hypervolume contribution (the hypervolume of all k less that of the other
// k - 1, plus 1e-12; reference as above over the k) over the largest, in
// [0, 1]; 1 for a single point. With 5 or more objectives, or past the
// hypervolume's bounds: all 1.
void cgq_tpe_weights_multi (const double *loss, size_t m, const size_t *idx, size_t k, double *w);

// The standard normal's pieces, exposed for the tests:
// cgq_tpe_log_mass is log(Phi(b) - Phi(a)) for a <= b, accurate in the tails.
double cgq_tpe_log_mass (double a, double b);
// cgq_tpe_ppf is the q-quantile of the standard normal truncated to [a, b].
double cgq_tpe_ppf (double q, double a, double b);

#endif
