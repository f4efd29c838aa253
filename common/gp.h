// gp: Gaussian-process regression for Bayesian optimisation (the bayes
// searcher). Inputs are points of [0,1]^dim (the searcher maps params there);
// outputs are one number per point, which the model minimises: to maximise,
// give it -y.
//
// Model: zero mean on standardised y ((y - mean) / sd of the observations),
// a Matern 5/2 kernel with one length scale per dimension (ARD, so a param
// that does not matter gets a long scale and stops steering the search),
// a signal variance and a noise variance (both relative to y's variance).
// Dense linear algebra goes through OpenBLAS and LAPACKE.
//
// Cost is capped whatever the number of observations: the model conditions on
// at most CGQ_GP_MAX_OBS of them (the CGQ_GP_KEEP_BEST lowest y plus a seeded
// random sample of the rest), and chooses hyper-parameters on at most
// CGQ_GP_MAX_HYPER of those (the lowest quarter plus a random sample), with at
// most CGQ_GP_MAX_EVALS likelihood evaluations. One fit is then a few hundred
// Cholesky factorisations of 128 x 128 and one of 512 x 512, and one suggestion
// is O(ncand * 512^2).
#ifndef CGQ_GP_H
#define CGQ_GP_H

#include <stdint.h>

#define CGQ_GP_MAX_DIM 64    // inputs of more dimensions are refused
#define CGQ_GP_MAX_OBS 512   // observations the model conditions on
#define CGQ_GP_KEEP_BEST 128 // of which always the ones with the lowest y
#define CGQ_GP_MAX_HYPER 128 // observations the hyper-parameters are chosen on
#define CGQ_GP_RESTARTS 3    // Nelder-Mead starts: the current hyper-parameters, then random
#define CGQ_GP_MAX_EVALS 600 // log-likelihood evaluations per fit, over all starts

// Bounds of the hyper-parameter search (length scales in units of [0,1],
// variances relative to the variance of y).
#define CGQ_GP_LENGTH_MIN 0.02
#define CGQ_GP_LENGTH_MAX 10.0
#define CGQ_GP_SIGNAL_MIN 0.05
#define CGQ_GP_SIGNAL_MAX 20.0
#define CGQ_GP_NOISE_MIN 1e-6
#define CGQ_GP_NOISE_MAX 1.0

typedef struct cgq_gp_t cgq_gp_t;

// cgq_gp_blas_one_thread runs BLAS in the calling thread and ends OpenBLAS's
// thread pool, for a daemon whose only BLAS work is this model (the
// coordinator, the device runner). The pthreads build of OpenBLAS starts one
// thread per core as it loads, and each spins on sched_yield for ~0.1 s
// before it sleeps, again after each threaded call: ~0.1 s of a core per
// thread at every start (a 16-core host: 1.5 s), on the cores the workers
// and Redis need. OPENBLAS_NUM_THREADS, where set, is left to rule. Call it
// first in main, before any thread of the caller's own.
void cgq_gp_blas_one_thread (void);

// cgq_gp_new creates a model of dim inputs with default hyper-parameters
// (length scales 0.5, signal 1, noise 0.01) and no observations. Returns NULL
// if dim is not in [1, CGQ_GP_MAX_DIM]. Caller destroys.
cgq_gp_t *cgq_gp_new (int dim);
void cgq_gp_destroy (cgq_gp_t **self_p);

// cgq_gp_fit chooses the hyper-parameters that maximise the log marginal
// likelihood of the observations (X: n rows of dim values, row-major; y: n
// values; both copied), by Nelder-Mead in log space within the bounds above,
// starting from the current hyper-parameters and from CGQ_GP_RESTARTS - 1
// random ones; then conditions the model on them. seed drives the subsets and
// the restarts, so a fit is reproducible. A Cholesky factorisation that fails
// is retried with growing jitter on the diagonal. Returns 0, or -1 (model
// unchanged) if n < 1 or a value is not finite.
int cgq_gp_fit (cgq_gp_t *self, const double *X, const double *y, int n, uint64_t seed);

// cgq_gp_condition is cgq_gp_fit without the hyper-parameter search: it keeps
// the current ones (cheap; for refits between searches, and for comparing
// likelihoods). Same arguments and errors.
int cgq_gp_condition (cgq_gp_t *self, const double *X, const double *y, int n, uint64_t seed);

// cgq_gp_predict sets *mean and *var (may be NULL) to the posterior mean and
// the variance of the latent function (without the noise) at x (dim values),
// in the units of y. Returns 0, or -1 if the model has no observations.
int cgq_gp_predict (const cgq_gp_t *self, const double *x, double *mean, double *var);

// cgq_gp_ei is the expected improvement at x below best (usually the lowest y
// seen) by more than xi (in y's units; 0 or a small margin that favours
// exploration): E[max(best - xi - f(x), 0)]. 0 if the model has no observations.
double cgq_gp_ei (const cgq_gp_t *self, const double *x, double best, double xi);

// cgq_gp_ei_many is cgq_gp_ei at c points at once (C: c rows of dim values,
// row-major) into ei (c values), scored in chunks by matrix products and one
// triangular solve per chunk: far cheaper than c calls of cgq_gp_ei. All 0 if
// the model has no observations.
void cgq_gp_ei_many (const cgq_gp_t *self, const double *C, int c, double best, double xi,
                     double *ei);

// cgq_gp_predict_many is cgq_gp_predict at c points at once (C: c rows of
// dim values, row-major) into mean and var (c values each; either may be
// NULL), in chunks as cgq_gp_ei_many. Returns 0, or -1 (nothing written) if
// the model has no observations.
int cgq_gp_predict_many (const cgq_gp_t *self, const double *C, int c, double *mean, double *var);

// cgq_gp_pof_many writes to pof (c values) the probability that the latent
// function is at most threshold at each of the c points C, under the
// posterior: Phi((threshold - mean) / sd), 1 or 0 where the model is sure
// (sd 0). For a model of a constraint (Gardner et al. 2014, "Bayesian
// optimization with inequality constraints"): y the constraint's value or
// violation, threshold 0 gives the probability of feasibility. All 1 if the
// model has no observations (nothing is known to be infeasible).
void cgq_gp_pof_many (const cgq_gp_t *self, const double *C, int c, double threshold,
                      double *pof);

// cgq_gp_suggest writes to x_out (dim values in [0,1]) the point of highest
// expected improvement below the lowest observed y among ncand candidates:
// half uniform in [0,1]^dim, half the best observations perturbed at random
// scales. Without observations it returns a uniform random point. Deterministic
// for a given seed. Returns 0, or -1 if ncand < 1.
int cgq_gp_suggest (const cgq_gp_t *self, int ncand, uint64_t seed, double *x_out);

// cgq_gp_lml is the log marginal likelihood of the (standardised) observations
// the model is conditioned on under its hyper-parameters; NAN without them.
double cgq_gp_lml (const cgq_gp_t *self);

// cgq_gp_nobs is the number of observations the model is conditioned on:
// min(n, CGQ_GP_MAX_OBS) after a fit, 0 before.
int cgq_gp_nobs (const cgq_gp_t *self);

// cgq_gp_hyper reads the hyper-parameters: lengths (dim values; may be NULL),
// signal and noise variances (may be NULL), relative to y's variance.
void cgq_gp_hyper (const cgq_gp_t *self, double *lengths, double *signal, double *noise);

// cgq_gp_set_hyper sets them (for a warm start or a test); they take effect at
// the next fit or condition. Returns -1 (nothing set) if one is outside the
// bounds above.
int cgq_gp_set_hyper (cgq_gp_t *self, const double *lengths, double signal, double noise);

#endif
