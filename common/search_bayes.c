// search_bayes: Bayesian optimisation with a Gaussian process (gp.h) and
// expected improvement, for one objective.
//
// Each param maps to dimensions of [0,1]^d, one per gene (search_impl.h):
// uniform linearly, loguniform in log space, randint / quniform /
// qloguniform / choice by the index of the value ((i + 0.5) / n, an ordinal
// encoding: a choice's neighbours in the list are taken to be alike, so list
// its values in a meaningful order), one dimension per element of a repeat
// and per item of an assignment. At most CGQ_GP_MAX_DIM (64) dimensions.
//
// The first `initial` trials are random. Then every suggestion fits the GP
// (warm-started from the last hyper-parameters; searched anew only now and
// then, see S_REFIT_EVERY) on the successful trials in
// trial id order, plus the trials in flight with the best value seen as their
// result (the "constant liar": a queue asks for a point while others run, and
// the lie keeps it from asking for the same place again), and returns the
// best of `candidates` points by expected improvement: half uniform, half
// mutations of the ten best trials, skipping points already suggested.
//
// Constraints (spec `constraints`): the probability of feasibility, as in
// Gardner, Kusner, Xu, Weinberger and Cunningham, "Bayesian Optimization with
// Inequality Constraints", ICML 2014 (and Gelbart, Snoek and Adams, UAI 2014).
// A second GP (gpc) models each successful trial's total violation (0 when
// feasible, cgq_search_violation; one that cannot be computed counts as twice
// the largest finite one plus 1); the objective's GP sees every successful
// trial, feasible or not. A candidate scores EI(x) below the best feasible
// value times PoF(x) = P(violation(x) <= 0) (cgq_gp_pof_many); while no trial
// is feasible, PoF(x) alone (the search looks for the feasible region; the
// trials in flight are then lied to gpc as the worst violation seen, so they
// spread out); while none is infeasible, PoF is 1 (plain EI). The S_TOP seeds
// of the local candidates are the best feasible trials, then the least
// infeasible. Both GPs are fitted on the same schedule (S_REFIT_*), both
// capped at CGQ_GP_MAX_OBS. The earlier rule (an infeasible trial fitted at
// the worst feasible value, s_fitted) remains behind cgq_search_bayes_penalty
// for the test that compares them (searcher_test's t_bayes_pof).
//
// Saved state: {"next": N, "hyper": {"lengths": [...], "signal": s, "noise":
// n}, "chyper": {...}, gpc's, with constraints}: O(dimensions). Replay
// rebuilds the observations. The GP's own caps
// (CGQ_GP_MAX_OBS) bound the cost of a fit, the hyper-parameter search runs
// at one suggestion in S_REFIT_EVERY, and the candidates are scored in one
// batch (cgq_gp_ei_many), so a suggestion costs about the same at 1,000 and
// 100,000 observations beyond the O(n d) copy of the data. searcher_test's
// bench (Release, one OpenBLAS thread, 2 dimensions, 1,000 candidates): 2.9,
// 23.6 and 24.9 ms per suggestion at 10, 1,000 and 100,000 observations
// (2.4, 125 and 134 ms when every suggestion searched the hyper-parameters and
// scored candidates one by one).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gp.h"
#include "search_impl.h"
#include "util.h"

#define S_TRIES 32
#define S_TOP 10 // candidates are mutated from this many best trials
// The kernel's hyper-parameters are searched at every suggestion while at
// most S_REFIT_ALWAYS trials have succeeded (they move most then), after that
// at every S_REFIT_EVERY-th suggestion; in between the GP is only conditioned
// on the new data with the last ones: one Cholesky factorisation instead of
// hundreds. A rule of the trial id and the observations alone, so a restarted
// search (the last hyper-parameters are in the saved state) decides the same.
#define S_REFIT_ALWAYS 64
#define S_REFIT_EVERY 8

enum { S_UNKNOWN, S_FLIGHT, S_OK, S_FAILED };

// With constraints, true selects the earlier rule (an infeasible trial fitted
// at the worst feasible value, see s_fitted) instead of the probability of
// feasibility: for the tests that compare the two, read at init. Not
// reachable from a spec.
bool cgq_search_bayes_penalty = false;

typedef struct {
    cgq_genome_t g;
    size_t d; // dimensions: g.ngenes
    cgq_gp_t *gp;
    cgq_gp_t *gpc; // the total constraint violation (with constraints only)
    double *u;     // trial id -> its point in [0,1]^d (cap rows)
    double *y;     // trial id -> its objective, to be minimised (-value for max)
    double *viol;  // trial id -> its total constraint violation (0: feasible)
    uint8_t *st;   // trial id -> S_*
    size_t cap;    // rows of u, y, st
    uint64_t nflight;
    cgq_hset64_t seen;
    // Warm start: rows 0 .. nwarm-1 hold the warm-start observations, trial
    // id i is row nwarm + i (u, y, viol, st); started: a trial was replayed
    // or suggested (no more warm points).
    size_t nwarm;
    bool started;
} s_bayes_t;

static void
s_reserve (s_bayes_t *b, uint64_t n)
{
    cgq_search_rows_reserve (n, b->d, &b->cap, &b->u, &b->y, &b->viol, &b->st);
}

// s_load_hyper sets gp's hyper-parameters from the state's object h (absent:
// keep the defaults). Returns -1 if it does not fit d dimensions.
static int
s_load_hyper (cgq_gp_t *gp, const json_t *h, size_t d)
{
    if (!h || !gp)
        return 0;
    const json_t *l = json_object_get (h, "lengths");
    double lengths[CGQ_GP_MAX_DIM];
    bool good = json_array_size (l) == d && json_is_number (json_object_get (h, "signal")) &&
                json_is_number (json_object_get (h, "noise"));
    for (size_t i = 0; good && i < d; i++) {
        good = json_is_number (json_array_get (l, i));
        lengths[i] = json_number_value (json_array_get (l, i));
    }
    if (!good || cgq_gp_set_hyper (gp, lengths, json_number_value (json_object_get (h, "signal")),
                                   json_number_value (json_object_get (h, "noise"))) < 0)
        return -1;
    return 0;
}

static int
s_init (cgq_searcher_t *self, const json_t *state, char *err, size_t errlen)
{
    const cgq_spec_t *spec = self->spec;
    s_bayes_t *b = cgq_xcalloc (1, sizeof *b);
    self->impl = b;
    if (spec->nobjectives != 1) {
        snprintf (err, errlen,
                  "algorithm bayes optimises one objective, the spec has %zu (use nsga2 for "
                  "several)",
                  spec->nobjectives);
        return -1;
    }
    if (cgq_genome_init (&b->g, spec, err, errlen) < 0)
        return -1;
    b->d = b->g.ngenes;
    if (b->d > CGQ_GP_MAX_DIM) {
        snprintf (err, errlen,
                  "algorithm bayes maps the params of %s to %zu dimensions, more than %d (one "
                  "per param, per repeat element and per assignment item; use evolution for "
                  "larger spaces)",
                  spec->name, b->d, CGQ_GP_MAX_DIM);
        return -1;
    }
    if (b->d)
        b->gp = cgq_gp_new ((int) b->d);
    if (b->d && spec->nconstraints && !cgq_search_bayes_penalty)
        b->gpc = cgq_gp_new ((int) b->d);
    if (!state)
        return 0;
    if (cgq_search_state_next (self, state, err, errlen) < 0)
        return -1;
    s_reserve (b, b->nwarm + self->suggested);
    if (s_load_hyper (b->gp, json_object_get (state, "hyper"), b->d) < 0 ||
        s_load_hyper (b->gpc, json_object_get (state, "chyper"), b->d) < 0) {
        snprintf (err, errlen,
                  "searcher state has hyper-parameters that do not fit %zu dimensions (the "
                  "state belongs to another spec; resubmit the job)",
                  b->d);
        return -1;
    }
    return 0;
}

static void
s_fini (cgq_searcher_t *self)
{
    s_bayes_t *b = self->impl;
    if (!b)
        return;
    cgq_gp_destroy (&b->gp);
    cgq_gp_destroy (&b->gpc);
    free (b->u);
    free (b->y);
    free (b->viol);
    free (b->st);
    cgq_hset64_fini (&b->seen);
    cgq_genome_fini (&b->g);
    free (b);
    self->impl = NULL;
}

static bool
s_done (const cgq_searcher_t *self)
{
    return self->suggested >= self->total;
}

// s_end records how the trial of row (nwarm + trial id, or a warm row) ended.
static void
s_end (cgq_searcher_t *self, uint64_t trial, const json_t *metrics, double value, bool ok)
{
    s_bayes_t *b = self->impl;
    double f;
    if (ok && cgq_search_objectives (self->spec, metrics, value, &f)) {
        b->st[trial] = S_OK;
        b->y[trial] = -self->spec->objective.mode * f;
        b->viol[trial] = cgq_search_violation (self->spec, metrics);
    }
    else
        b->st[trial] = S_FAILED;
}

static void
s_observe (cgq_searcher_t *self, uint64_t trial, const json_t *metrics, double value, bool ok)
{
    s_bayes_t *b = self->impl;
    trial += b->nwarm; // its row
    if (trial >= b->cap || b->st[trial] != S_FLIGHT)
        return;
    b->nflight--;
    s_end (self, trial, metrics, value, ok);
}

static int
s_replay (cgq_searcher_t *self, uint64_t trial, const json_t *params, const json_t *metrics,
          double value, cgq_replay_t outcome, char *err, size_t errlen)
{
    s_bayes_t *b = self->impl;
    double x[CGQ_GP_MAX_DIM + 1];
    if (cgq_genome_from_params (&b->g, params, x, err, errlen) < 0)
        return -1;
    b->started = true;
    s_reserve (b, b->nwarm + self->suggested); // the warm rows came after init's reserve
    trial += b->nwarm;                          // its row
    cgq_genome_canon (&b->g, x);
    cgq_hset64_add (&b->seen, cgq_genome_hash (&b->g, x));
    cgq_genome_to_unit (&b->g, x, &b->u[trial * b->d]);
    if (b->st[trial] == S_FLIGHT)
        b->nflight--;
    if (outcome == CGQ_REPLAY_ACTIVE) {
        b->st[trial] = S_FLIGHT;
        b->nflight++;
    }
    else
        s_end (self, trial, metrics, value, outcome == CGQ_REPLAY_SUCCEEDED);
    return 0;
}

static double
s_clamp (double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

// s_clamp_hyper keeps the hyper-parameters inside the bounds that
// cgq_gp_set_hyper accepts: the fit works in log space and exp(log(10)) may
// come back one ulp above 10, which a restart could then not restore. Doing
// it after every fit keeps the uninterrupted run and a restarted one equal.
static void
s_clamp_hyper (cgq_gp_t *gp, size_t d)
{
    double l[CGQ_GP_MAX_DIM], signal, noise;
    cgq_gp_hyper (gp, l, &signal, &noise);
    for (size_t i = 0; i < d; i++)
        l[i] = s_clamp (l[i], CGQ_GP_LENGTH_MIN, CGQ_GP_LENGTH_MAX);
    cgq_gp_set_hyper (gp, l, s_clamp (signal, CGQ_GP_SIGNAL_MIN, CGQ_GP_SIGNAL_MAX),
                      s_clamp (noise, CGQ_GP_NOISE_MIN, CGQ_GP_NOISE_MAX));
}

// s_fitted returns what the GP fits for trials [0, n) (caller frees) under
// the penalty rule (cgq_search_bayes_penalty): the
// objective, except that with constraints an infeasible trial gets the worst
// value a feasible one reached, so it never looks good; while none is
// feasible, every trial gets its total violation (one that cannot be
// computed: twice the largest finite one, plus 1), so the search heads for
// feasibility. A function of the observations alone: a restart fits the same.
static double *
s_fitted (cgq_searcher_t *self, uint64_t n)
{
    s_bayes_t *b = self->impl;
    double *y = cgq_xmalloc ((n ? n : 1) * sizeof *y);
    memcpy (y, b->y, n * sizeof *y);
    if (!self->spec->nconstraints)
        return y;
    double worst = -INFINITY, maxv = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (b->st[i] != S_OK)
            continue;
        if (b->viol[i] <= 0)
            worst = fmax (worst, b->y[i]);
        else if (isfinite (b->viol[i]))
            maxv = fmax (maxv, b->viol[i]);
    }
    for (uint64_t i = 0; i < n; i++)
        if (b->st[i] == S_OK && (isfinite (worst) || b->viol[i] > 0))
            y[i] = isfinite (worst) ? (b->viol[i] > 0 ? worst : b->y[i])
                   : isfinite (b->viol[i]) ? b->viol[i]
                                           : 2 * maxv + 1;
    return y;
}

// s_cv is the violation the constraint GP models for row i: the total
// violation, 0 when feasible; one that cannot be computed counts as twice the
// largest finite one plus 1 (cmax).
static double
s_cv (const s_bayes_t *b, uint64_t i, double cmax)
{
    return isfinite (b->viol[i]) ? b->viol[i] : cmax;
}

// s_better says whether row i ranks before row j as a seed for the local
// candidates: by fitted value y; with the probability of feasibility, a
// feasible trial before an infeasible one, two infeasible ones by violation.
static bool
s_better (const s_bayes_t *b, const double *y, bool pof, double cmax, uint64_t i, uint64_t j)
{
    if (!pof)
        return y[i] < y[j];
    bool fi = b->viol[i] <= 0, fj = b->viol[j] <= 0;
    if (fi != fj)
        return fi;
    return fi ? y[i] < y[j] : s_cv (b, i, cmax) < s_cv (b, j, cmax);
}

// s_fit_one fits (or, between hyper-parameter searches, conditions) gp on
// rows k of X and Y.
static void
s_fit_one (s_bayes_t *b, cgq_gp_t *gp, const double *X, const double *Y, size_t k, bool search,
           uint64_t seed)
{
    if (search) {
        cgq_gp_fit (gp, X, Y, (int) k, seed);
        s_clamp_hyper (gp, b->d);
    }
    else
        cgq_gp_condition (gp, X, Y, (int) k, seed);
}

// s_model fits the GP(s) and writes the best candidate into x. Returns false
// when there is no successful trial yet.
static bool
s_model (cgq_searcher_t *self, cgq_rng_t *r, double *x)
{
    s_bayes_t *b = self->impl;
    uint64_t n = b->nwarm + self->suggested, nok = 0, nfeas = 0, ninf = 0; // rows
    bool pof = b->gpc != NULL; // the constrained rule, else the penalty (or no constraints)
    double cmax = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (b->st[i] != S_OK)
            continue;
        nok++;
        if (b->viol[i] <= 0)
            nfeas++;
        else {
            ninf++;
            if (isfinite (b->viol[i]))
                cmax = fmax (cmax, b->viol[i]);
        }
    }
    cmax = 2 * cmax + 1;
    if (!nok || !b->gp)
        return false;
    double *y;
    if (pof) {
        y = cgq_xmalloc (n * sizeof *y);
        memcpy (y, b->y, n * sizeof *y);
    }
    else
        y = s_fitted (self, n);
    size_t d = b->d, rows = (size_t) (nok + b->nflight);
    double *X = cgq_xmalloc (rows * d * sizeof *X), *Y = cgq_xmalloc (rows * sizeof *Y);
    double best = INFINITY; // the lowest (feasible, with pof) fitted value
    size_t k = 0;
    // The S_TOP best trials, for the local half of the candidates.
    uint64_t top[S_TOP];
    size_t ntop = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (b->st[i] != S_OK)
            continue;
        memcpy (&X[k * d], &b->u[i * d], d * sizeof *X);
        Y[k++] = y[i];
        if (y[i] < best && (!pof || b->viol[i] <= 0))
            best = y[i];
        size_t at = ntop < S_TOP ? ntop++ : S_TOP;
        while (at > 0 && s_better (b, y, pof, cmax, i, top[at - 1])) {
            if (at < S_TOP)
                top[at] = top[at - 1];
            at--;
        }
        if (at < S_TOP)
            top[at] = i;
    }
    uint64_t seed = self->spec->search.seed * 0x9e3779b97f4a7c15ULL + self->suggested;
    bool search = nok <= S_REFIT_ALWAYS || self->suggested % S_REFIT_EVERY == 0;
    // The objective's GP: on every successful trial (an infeasible one's
    // value is known too), the trials in flight at the best feasible value
    // (the constant liar). Not needed while no trial is feasible.
    bool use_obj = !pof || nfeas > 0;
    if (use_obj) {
        for (uint64_t i = 0; i < n; i++)
            if (b->st[i] == S_FLIGHT) {
                memcpy (&X[k * d], &b->u[i * d], d * sizeof *X);
                Y[k++] = best; // the constant liar
            }
        s_fit_one (b, b->gp, X, Y, k, search, seed);
    }
    // The violation's GP: on every successful trial; while none is feasible
    // the trials in flight count as the worst violation seen, so that the
    // suggestions in flight spread out. Not needed while none is infeasible
    // (nothing is known to be: the probability is 1 everywhere).
    bool use_con = pof && ninf > 0;
    if (use_con) {
        k = 0;
        double worst = 0;
        for (uint64_t i = 0; i < n; i++)
            if (b->st[i] == S_OK) {
                Y[k++] = s_cv (b, i, cmax);
                worst = fmax (worst, Y[k - 1]);
            }
        if (!nfeas)
            for (uint64_t i = 0; i < n; i++)
                if (b->st[i] == S_FLIGHT) {
                    memcpy (&X[k * d], &b->u[i * d], d * sizeof *X);
                    Y[k++] = worst;
                }
        s_fit_one (b, b->gpc, X, Y, k, search, seed ^ 0x5851f42d4c957f2dULL);
    }
    free (X);
    free (Y);

    // The candidates first, then their scores in one batch: the expected
    // improvement below the best (feasible) value, times the probability of
    // feasibility; while no trial is feasible, that probability alone.
    uint32_t ncand = self->spec->search.candidates ? self->spec->search.candidates : 1000;
    double *cand = cgq_xmalloc ((size_t) ncand * d * sizeof *cand);
    double *units = cgq_xmalloc ((size_t) ncand * d * sizeof *units);
    double *ei = cgq_xmalloc ((size_t) (ncand ? ncand : 1) * sizeof *ei);
    double *pf = cgq_xmalloc ((size_t) (ncand ? ncand : 1) * sizeof *pf);
    int nc = 0;
    for (uint32_t i = 0; i < ncand; i++) {
        double *c = &cand[(size_t) nc * d];
        if (i % 2 == 0 || !ntop)
            cgq_genome_random (&b->g, r, c);
        else {
            // A mutation of a good trial: 1 to 3 steps away from it.
            uint64_t from = top[cgq_rng_below (r, ntop)];
            double ux[CGQ_GP_MAX_DIM + 1];
            memcpy (ux, &b->u[from * d], d * sizeof *ux);
            cgq_genome_from_unit (&b->g, ux, c);
            int steps = 1 + (int) cgq_rng_below (r, 3);
            for (int s = 0; s < steps; s++)
                cgq_genome_mutate (&b->g, r, c);
        }
        if (cgq_hset64_has (&b->seen, cgq_genome_hash (&b->g, c)))
            continue;
        cgq_genome_to_unit (&b->g, c, &units[(size_t) nc * d]);
        nc++;
    }
    if (use_obj)
        cgq_gp_ei_many (b->gp, units, nc, best, 0, ei);
    else
        for (int i = 0; i < nc; i++)
            ei[i] = 1;
    if (use_con) {
        cgq_gp_pof_many (b->gpc, units, nc, 0, pf);
        for (int i = 0; i < nc; i++)
            ei[i] *= pf[i];
    }
    double best_ei = -1;
    bool found = false;
    for (int i = 0; i < nc; i++)
        if (ei[i] > best_ei) {
            best_ei = ei[i];
            memcpy (x, &cand[(size_t) i * d], d * sizeof *x);
            found = true;
        }
    free (cand);
    free (units);
    free (ei);
    free (pf);
    free (y);
    return found;
}

static json_t *
s_suggest (cgq_searcher_t *self)
{
    s_bayes_t *b = self->impl;
    if (s_done (self))
        return NULL;
    uint64_t id = self->suggested;
    b->started = true;
    s_reserve (b, b->nwarm + id + 1);
    cgq_rng_t r;
    cgq_rng_seed (&r, self->spec->search.seed, id, 2);
    double x[CGQ_GP_MAX_DIM + 1];
    bool modeled = false;
    if (b->nwarm + id >= self->spec->search.initial) {
        modeled = s_model (self, &r, x);
        if (!modeled && b->nflight > 0)
            return NULL; // no result to learn from yet: wait for one
    }
    if (!modeled)
        for (int t = 0; t < S_TRIES; t++) {
            cgq_genome_random (&b->g, &r, x);
            if (!cgq_hset64_has (&b->seen, cgq_genome_hash (&b->g, x)))
                break;
        }
    cgq_hset64_add (&b->seen, cgq_genome_hash (&b->g, x));
    cgq_genome_to_unit (&b->g, x, &b->u[(b->nwarm + id) * b->d]);
    b->st[b->nwarm + id] = S_FLIGHT;
    b->nflight++;
    return cgq_genome_params (&b->g, x);
}

// s_warm adds a warm-start observation as row nwarm: it must give every
// param of the space (the GP models them jointly); others are ignored. Its
// point is not suggested again.
static int
s_warm (cgq_searcher_t *self, const json_t *params, const json_t *metrics, char *err,
        size_t errlen)
{
    s_bayes_t *b = self->impl;
    const cgq_spec_t *spec = self->spec;
    if (b->started) {
        snprintf (err, errlen, "warm-start points come before the job's first trial");
        return -1;
    }
    double f;
    if (!cgq_search_objectives (spec, metrics, NAN, &f)) {
        snprintf (err, errlen, "its metrics lack the objective (or it is not a finite number)");
        return -1;
    }
    for (size_t p = 0; p < spec->nparams; p++)
        if (spec->params[p].name && b->g.count[p] &&
            !json_object_get (params, spec->params[p].name)) {
            snprintf (err, errlen,
                      "it has no value for param %s, and algorithm bayes models every param "
                      "jointly (give it one, or use algorithm: tpe, which leaves it out)",
                      spec->params[p].name);
            return -1;
        }
    double x[CGQ_GP_MAX_DIM + 1];
    // Its values over a point of the space (for the constants it may lack).
    cgq_rng_t r;
    cgq_rng_seed (&r, 0, 0, 0);
    cgq_genome_random (&b->g, &r, x);
    json_t *only = cgq_genome_params (&b->g, x);
    for (size_t p = 0; p < spec->nparams; p++) {
        json_t *v = spec->params[p].name ? json_object_get (params, spec->params[p].name) : NULL;
        if (v)
            json_object_set (only, spec->params[p].name, v);
    }
    int rc = cgq_genome_from_params (&b->g, only, x, err, errlen);
    json_decref (only);
    if (rc < 0)
        return -1;
    cgq_genome_canon (&b->g, x);
    s_reserve (b, b->nwarm + 1);
    cgq_hset64_add (&b->seen, cgq_genome_hash (&b->g, x));
    cgq_genome_to_unit (&b->g, x, &b->u[b->nwarm * b->d]);
    s_end (self, b->nwarm, metrics, NAN, true);
    b->nwarm++;
    return 0;
}

static json_t *
s_hyper_json (const cgq_gp_t *gp, size_t d)
{
    double lengths[CGQ_GP_MAX_DIM], signal, noise;
    cgq_gp_hyper (gp, lengths, &signal, &noise);
    json_t *h = json_object (), *l = json_array ();
    for (size_t i = 0; i < d; i++)
        json_array_append_new (l, json_real (lengths[i]));
    json_object_set_new (h, "lengths", l);
    json_object_set_new (h, "signal", json_real (signal));
    json_object_set_new (h, "noise", json_real (noise));
    return h;
}

static void
s_save (const cgq_searcher_t *self, json_t *state)
{
    const s_bayes_t *b = self->impl;
    json_object_set_new (state, "next", json_integer ((json_int_t) self->suggested));
    if (b->gp)
        json_object_set_new (state, "hyper", s_hyper_json (b->gp, b->d));
    if (b->gpc)
        json_object_set_new (state, "chyper", s_hyper_json (b->gpc, b->d));
}

static size_t
s_footprint (const cgq_searcher_t *self)
{
    const s_bayes_t *b = self->impl;
    size_t nobs = b->gp ? (size_t) cgq_gp_nobs (b->gp) : 0;
    // The GP keeps its conditioning set, a Cholesky factor and weights.
    size_t gp = b->gp ? nobs * nobs * sizeof (double) + nobs * (b->d + 2) * sizeof (double) : 0;
    if (b->gpc) {
        nobs = (size_t) cgq_gp_nobs (b->gpc);
        gp += nobs * nobs * sizeof (double) + nobs * (b->d + 2) * sizeof (double);
    }
    return sizeof *b + b->g.ngenes * sizeof (cgq_gene_t) +
           b->cap * ((b->d ? b->d : 1) * sizeof (double) + sizeof (double) + 1) +
           b->seen.cap * sizeof (uint64_t) + gp;
}

const cgq_search_ops_t cgq_search_bayes_ops = {
    .init = s_init,
    .fini = s_fini,
    .suggest = s_suggest,
    .observe = s_observe,
    .replay = s_replay,
    .done = s_done,
    .warm = s_warm,
    .save = s_save,
    .footprint = s_footprint,
};
