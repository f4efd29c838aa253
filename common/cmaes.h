// cmaes: the math of the (mu/mu_w, lambda)-CMA-ES (the cmaes searcher,
// search_cmaes.c), as Hansen's tutorial ("The CMA Evolution Strategy: A
// Tutorial", arXiv:1604.00772) gives it with its defaults: the weights of
// eq. 49-53 (the negative ones too: active CMA, as the cmaes library that
// Optuna's CmaEsSampler uses), c_sigma, d_sigma, c_c, c_1, c_mu (the 2016
// tutorial's (mu_eff - 2 + 1/mu_eff), as the cmaes library 0.9 that Optuna
// 3.1 runs; later revisions add 1/4), c_m = 1. No params,
// no JSON, no random numbers: the caller draws z ~ N(0, I) from its own
// streams and passes the points and their fitness to cgq_cmaes_tell.
// cmaes_test.c checks one update against NumPy (cmaes_expected.py wrote
// cmaes_expected.h).
//
// The covariance is decomposed C = B diag(D^2) B^T with LAPACKE_dsyev after
// each update (eigenvalues below 1e-300 are raised to it, C symmetrised).
#ifndef CGQ_CMAES_H
#define CGQ_CMAES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cgq_cmaes_t cgq_cmaes_t;

// cgq_cmaes_new starts a distribution of n >= 1 dimensions with population
// lambda >= 2 (0: the default 4 + floor(3 ln n)), mean (n values, copied),
// step size sigma > 0 and C = I. Caller destroys.
cgq_cmaes_t *cgq_cmaes_new (size_t n, size_t lambda, const double *mean, double sigma);
void cgq_cmaes_destroy (cgq_cmaes_t **self_p);

// cgq_cmaes_set_cov replaces C = I of a distribution that has had no update
// by cov (n * n, row-major, symmetric positive definite; copied) and
// decomposes it: the warm start's initial shape.
void cgq_cmaes_set_cov (cgq_cmaes_t *self, const double *cov);

// cgq_cmaes_warm_mgd estimates the initial distribution of a warm-started
// CMA-ES (WS-CMA-ES, Nomura et al., AAAI 2021, arXiv:2012.06932) as the cmaes
// library's get_warm_start_mgd does: the best max(1, floor(gamma np)) of the
// np points x (row-major, np * n) by f (minimised; ties by position), their
// mean, Sigma = alpha^2 I + their covariance (divided by their number), and
// from it sigma = det(Sigma)^(1/2n), cov = Sigma / det(Sigma)^(1/n). (The
// library asserts floor(gamma np) >= 1; this takes the best point then.)
// Writes mean (n), *sigma and cov (n * n). Returns -1 when Sigma is not
// positive definite (a NaN among the points), 0 otherwise.
int cgq_cmaes_warm_mgd (size_t n, size_t np, const double *x, const double *f, double gamma,
                        double alpha, double *mean, double *sigma, double *cov);

size_t cgq_cmaes_lambda (const cgq_cmaes_t *self);
size_t cgq_cmaes_dim (const cgq_cmaes_t *self);
// The distribution as it stands (borrowed until the next tell/destroy).
const double *cgq_cmaes_mean (const cgq_cmaes_t *self); // n
double cgq_cmaes_sigma (const cgq_cmaes_t *self);
const double *cgq_cmaes_cov (const cgq_cmaes_t *self);     // n * n, row-major
const double *cgq_cmaes_pc (const cgq_cmaes_t *self);      // n
const double *cgq_cmaes_psigma (const cgq_cmaes_t *self);  // n
const double *cgq_cmaes_weights (const cgq_cmaes_t *self); // lambda
uint64_t cgq_cmaes_generation (const cgq_cmaes_t *self);   // updates done

// cgq_cmaes_sample writes x = mean + sigma B D z (n values) for z ~ N(0, I).
void cgq_cmaes_sample (const cgq_cmaes_t *self, const double *z, double *x);

// cgq_cmaes_tell updates the distribution from one generation: x holds
// lambda points (row-major, lambda * n), f their fitness (minimised; ties
// ranked by position; +inf ranks a failed point last, and TolFun's history
// keeps the worst finite value instead). The points may have been moved (clipped, rounded)
// after sampling: the update uses them as given, y = (x - mean) / sigma.
void cgq_cmaes_tell (cgq_cmaes_t *self, const double *x, const double *f);

// cgq_cmaes_should_stop is true when the run has converged or stalled, by
// the tests of the cmaes library (Hansen's termination criteria): TolFun
// (the best and worst values of the last 10 + ceil(30 n / lambda)
// generations within tolfun), TolX (sigma times every sqrt(C_ii) and p_c
// below tolx), TolXUp (sigma max D grew 1e4-fold), NoEffectAxis,
// NoEffectCoord, ConditionCov (cond(C) > 1e14). why names the test.
bool cgq_cmaes_should_stop (const cgq_cmaes_t *self, double tolfun, double tolx, const char **why);

#endif
