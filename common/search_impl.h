// search_impl: what the searchers share behind searcher.h, and nothing a
// caller of searcher.h needs. Each algorithm is an ops table (search_*.c);
// a genome is a point of the space as numbers that the algorithms can
// mutate, cross and map to [0,1]^d, and that turns into the params JSON and
// back exactly (so a coordinator that restarts rebuilds the same genomes
// from the params it kept in Redis).
#ifndef CGQ_SEARCH_IMPL_H
#define CGQ_SEARCH_IMPL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "searcher.h"
#include "spec.h"

typedef struct {
    // init reads the saved state (NULL: a new job) into self->impl; -1 with
    // err set if the state does not fit.
    int (*init) (cgq_searcher_t *self, const json_t *state, char *err, size_t errlen);
    void (*fini) (cgq_searcher_t *self);
    // suggest returns the params of trial self->suggested, or NULL for none now.
    json_t *(*suggest) (cgq_searcher_t *self);
    void (*observe) (cgq_searcher_t *self, uint64_t trial, const json_t *metrics, double value,
                     bool ok);
    // replay restores one trial suggested before a restart (NULL: nothing to
    // restore); -1 with err set if params do not fit the space.
    int (*replay) (cgq_searcher_t *self, uint64_t trial, const json_t *params,
                   const json_t *metrics, double value, cgq_replay_t outcome, char *err,
                   size_t errlen);
    bool (*done) (const cgq_searcher_t *self);
    // warm adds one warm-start observation (NULL: the algorithm takes none);
    // -1 with err set if it does not fit.
    int (*warm) (cgq_searcher_t *self, const json_t *params, const json_t *metrics, char *err,
                 size_t errlen);
    // save adds the algorithm's fields to state, which already holds "algorithm".
    void (*save) (const cgq_searcher_t *self, json_t *state);
    size_t (*footprint) (const cgq_searcher_t *self); // bytes held by impl (NULL: 0)
    // rung: a trial's report at a hyperband rung's budget (NULL: ignored);
    // true when the state changed.
    bool (*rung) (cgq_searcher_t *self, uint64_t trial, double budget, const json_t *metrics);
} cgq_search_ops_t;

struct cgq_searcher_t {
    const cgq_search_ops_t *ops;
    const char *algorithm;  // the name saved in the state
    const cgq_spec_t *spec; // borrowed
    uint64_t suggested;     // the next trial id
    uint64_t total;         // 0: not known up front
    void *impl;             // the algorithm's own state, owned by ops
};

extern const cgq_search_ops_t cgq_search_evolution_ops;
extern const cgq_search_ops_t cgq_search_nsga2_ops;
extern const cgq_search_ops_t cgq_search_tpe_ops;
extern const cgq_search_ops_t cgq_search_cmaes_ops;
extern const cgq_search_ops_t cgq_search_bayes_ops;
extern const cgq_search_ops_t cgq_search_external_ops;
extern const cgq_search_ops_t cgq_search_pbt_ops;

// --- random numbers: splitmix64, one stream per (seed, trial, purpose) --------
// Every suggestion draws from a stream keyed by the trial id, so nothing
// random has to be saved for a restart.

typedef struct {
    uint64_t state;
} cgq_rng_t;

void cgq_rng_seed (cgq_rng_t *r, uint64_t seed, uint64_t trial, uint64_t purpose);
uint64_t cgq_rng_next (cgq_rng_t *r);
double cgq_rng_unit (cgq_rng_t *r);            // [0, 1)
uint64_t cgq_rng_below (cgq_rng_t *r, uint64_t n); // [0, n), n >= 1
double cgq_rng_normal (cgq_rng_t *r);          // N(0, 1)

// --- genomes -------------------------------------------------------------------

typedef enum {
    CGQ_GENE_INDEX, // choice, grid, an assignment's item: an index in [0, n)
    CGQ_GENE_INT,   // randint: value - lo in [0, n); quniform/qloguniform: k - kmin in [0, n)
    CGQ_GENE_REAL,  // uniform: the value in [lo, hi]
    CGQ_GENE_LOG,   // loguniform: log(value) in [log lo, log hi]
} cgq_gene_kind_t;

typedef struct {
    cgq_gene_kind_t kind;
    const cgq_param_t *p; // the param it belongs to (a repeat's element for repeats)
    double n;             // INDEX, INT: number of values
    double lo, hi;        // REAL, LOG: bounds in gene units
    bool logscale;        // INT of a qloguniform: random draws on a log scale
    size_t param;         // index of its param in spec->params
} cgq_gene_t;

typedef struct {
    const cgq_spec_t *spec;
    cgq_gene_t *genes;
    size_t ngenes;
    size_t *first, *count; // per param: its first gene and how many (0 for a constant)
    size_t nvar;           // params with at least one gene
    size_t *var;           // their indices
} cgq_genome_t;

// cgq_genome_init builds the gene table of spec. -1 with err set if a param
// has too many values to be a gene (a quniform of more than 2^53 multiples).
int cgq_genome_init (cgq_genome_t *g, const cgq_spec_t *spec, char *err, size_t errlen);
void cgq_genome_fini (cgq_genome_t *g);

// cgq_genome_random draws x (ngenes values) uniformly, as random search would.
void cgq_genome_random (const cgq_genome_t *g, cgq_rng_t *r, double *x);
// cgq_genome_mutate changes one param of x: another choice, a gaussian step
// (in log space for loguniform) clipped to the bounds, a step of +-1 (of q),
// one element of a repeat, one item of an assignment.
void cgq_genome_mutate (const cgq_genome_t *g, cgq_rng_t *r, double *x);
// cgq_genome_mutate_gene changes gene i the same way.
void cgq_genome_mutate_gene (const cgq_genome_t *g, cgq_rng_t *r, double *x, size_t i);
// cgq_genome_canon snaps x to what its params JSON carries (reals rounded to
// 15 digits), so that params -> genome gives x back bit for bit.
void cgq_genome_canon (const cgq_genome_t *g, double *x);
// cgq_genome_params returns the params of x (caller decrefs), constants included.
json_t *cgq_genome_params (const cgq_genome_t *g, const double *x);
// cgq_genome_from_params reads params back into x; -1 with err set if a value
// does not belong to its param's domain.
int cgq_genome_from_params (const cgq_genome_t *g, const json_t *params, double *x, char *err,
                            size_t errlen);
// cgq_genome_unit maps x to [0,1]^ngenes (for the Gaussian process) and back.
void cgq_genome_to_unit (const cgq_genome_t *g, const double *x, double *u);
void cgq_genome_from_unit (const cgq_genome_t *g, const double *u, double *x);
uint64_t cgq_genome_hash (const cgq_genome_t *g, const double *x);
// cgq_genome_finite is true when every gene is discrete; *size is then the
// number of distinct genomes (saturating at UINT64_MAX).
bool cgq_genome_finite (const cgq_genome_t *g, uint64_t *size);
// cgq_genome_q_first is the multiplier k of a quantized param's smallest
// value k * q (quniform, qloguniform): an INT gene's value d is (k + d) * q.
double cgq_genome_q_first (const cgq_param_t *p);

// --- a set of genome hashes: which points were suggested already ----------------

typedef struct {
    uint64_t *slots; // 0: empty
    size_t cap, n;
} cgq_hset64_t;

bool cgq_hset64_add (cgq_hset64_t *s, uint64_t h); // false if already there
bool cgq_hset64_has (const cgq_hset64_t *s, uint64_t h);
void cgq_hset64_fini (cgq_hset64_t *s);

// --- json helpers for states ----------------------------------------------------

// cgq_search_state_next sets self->suggested from a saved state's "next"
// (every algorithm saves it). Returns -1 with err set when it is missing or
// outside [0, total].
int cgq_search_state_next (cgq_searcher_t *self, const json_t *state, char *err, size_t errlen);

// cgq_search_state_ids reads state[key], an array of trial ids below next,
// into a new array (*n entries; caller frees). -1 with err set otherwise.
int cgq_search_state_ids (const json_t *state, const char *key, uint64_t next, uint64_t **ids,
                          size_t *n, char *err, size_t errlen);
// cgq_search_violation is a succeeded trial's total constraint violation
// (cgq_spec_feasible's total: 0 feasible, > 0 infeasible, INFINITY when a
// constraint cannot be computed); 0 for a spec without constraints or NULL
// metrics. Computed from the metrics, so a replay after a restart gives the
// same number.
double cgq_search_violation (const cgq_spec_t *spec, const json_t *metrics);

// cgq_search_rows_reserve grows the per-trial history that bayes, tpe and
// cmaes keep, so that trial ids below n fit: *x rows of d doubles (1 when
// d is 0), *y and *viol one double each, *st one status byte, the new ones
// 0 (each searcher's S_UNKNOWN). *cap, the rows held, doubles from 64.
void cgq_search_rows_reserve (uint64_t n, size_t d, size_t *cap, double **x, double **y,
                              double **viol, uint8_t **st);

// cgq_search_objectives computes a trial's objective vector (oriented as
// reported) from metrics, or for one objective from value when metrics lack
// it. Returns false when it cannot (a failed trial, a missing metric).
bool cgq_search_objectives (const cgq_spec_t *spec, const json_t *metrics, double value,
                            double *out);

// --- pbt (search_pbt.c), pure parts the unit test checks --------------------------

// cgq_pbt_quantile_size: how many of n scored members are in the bottom (and
// the top) quantile: ceil(n * fraction), at most n / 2; 0 for n <= 1.
size_t cgq_pbt_quantile_size (size_t n, double fraction);

// cgq_pbt_perturb: params (borrowed) with spec's hyperparam_mutations
// perturbed (caller decrefs); changed, when not NULL, gets {"name": [old,
// new]} of each param that changed. NULL if params do not fit the space.
json_t *cgq_pbt_perturb (const cgq_spec_t *spec, const cgq_genome_t *g, const json_t *params,
                         cgq_rng_t *r, json_t *changed);

#endif
