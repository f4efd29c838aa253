// search_cmaes: CMA-ES for one objective, steady state in a distributed
// queue, with IPOP restarts; as Optuna's CmaEsSampler (3.1) uses the cmaes
// library, with its own update (cmaes.h).
//
// Params map to a box [0,1]^n, one coordinate per gene with more than one
// value: uniform linearly, loguniform linearly in log(value); randint and
// quniform as the index of the value, the box widened by half a step on
// either side (so each value owns an equal slice) and rounded to the value
// whose slice the sample falls in; qloguniform as log(k) of the value k q
// over [log(kmin - 1/2), log(kmax + 1/2)], rounded to the nearest k (as
// Optuna's int with log=True). Each element of a repeat of those is its own
// coordinate. Categorical params (choice, grid, assignment) are refused: the
// spec check names tpe (spec_search.c).
//
// A generation is lambda consecutive trial ids. They are drawn from the
// distribution that the previous generations left: x = m + sigma B D z with z
// from the stream (seed, trial id, S_SAMPLE + k): a sample outside the box is
// drawn again (k = 1, 2, ... up to 100, as the cmaes library does), then
// clipped. When all lambda are out, suggest returns NULL (the job waits) until
// the last of them ends; then the update runs on the points as the trials
// had them (rounded, clipped), ranked by value, a failed trial ranked worst
// (ties by trial id). A generation where every trial failed updates nothing.
// The first distribution is centred in the box with C = I and sigma =
// sigma0 (default 1/6 of the box, as Optuna). After an update whose
// distribution meets a stop test (cmaes.h: tolfun 1e-12, tolx 1e-12 sigma0,
// conditioncov, ...) and while restarts remain, the next generation starts
// over (IPOP): popsize doubled (at most CGQ_SPEC_CMAES_MAX_POPSIZE, and at
// most the trials left, if more than before), mean drawn uniformly in the box from the
// stream (seed, first id of the new generation, S_RESTART), sigma0, C = I.
//
// Warm start (WS-CMA-ES, Nomura et al. 2021, as Optuna's CmaEsSampler
// source_trials): warm-start points (each giving every param of the space,
// and the objective) come before the first trial, in box coordinates with
// their loss; the first distribution, and the one of every IPOP restart (as
// Optuna's _init_optimizer, which prefers source trials over a random
// start), is the one cgq_cmaes_warm_mgd estimates from the best
// S_WARM_GAMMA of them (a feasible point ranked before an infeasible one, as
// in an update) with prior variance S_WARM_ALPHA^2: its mean, sigma and C
// (sigma0 unused). Both are 0.1, the library's defaults (Optuna does not
// expose them). The box is [0,1]^n here, as Optuna's since 3.2
// (optuna#4443; 3.1's was the params' own range), so alpha is 1/10 of each
// param's range.
//
// Saved state: {"next": N}; replay restores every trial's point and outcome,
// and the generations are replayed from them in order the next time the
// searcher is asked, so suggestion i after a restart is what an
// uninterrupted run suggests. (The distribution itself is O(n^2) and could
// be saved; rebuilding it keeps the state format one integer.)
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmaes.h"
#include "search_impl.h"
#include "util.h"

#define S_SAMPLE 100
#define S_RESTART 7
#define S_RANDOM 5
#define S_RESAMPLE 100
#define S_WARM_GAMMA 0.1
#define S_WARM_ALPHA 0.1

enum { S_UNKNOWN, S_FLIGHT, S_OK, S_FAILED };

typedef struct {
    cgq_genome_t g;
    size_t d;          // genes
    size_t n;          // coordinates: genes with more than one value
    size_t *var;       // coordinate -> its gene
    double *lo0, *lo1; // coordinate -> INT on a log scale: log(kmin - 1/2), log(kmax + 1/2)
    double *kfirst;    // coordinate -> INT on a log scale: k of its smallest value
    double *x;         // trial id -> its genes (cap rows of d)
    double *loss;      // trial id -> its objective, minimised (-value for max)
    double *viol;      // trial id -> its total constraint violation (0: feasible)
    uint8_t *st;       // trial id -> S_*
    size_t cap;
    cgq_cmaes_t *cma; // the distribution of generation [gstart, gstart + lambda)
    uint64_t gstart;
    uint32_t restarts; // restarts done
    double *gx, *gf;   // scratch: one generation's points and values
    // Warm start: nwarm points in box coordinates (wu, nwarm rows of n), their
    // loss and violation; wdirty: points came since the first distribution
    // was set; started: a trial was suggested or replayed (no more points).
    size_t nwarm, wcap;
    double *wu, *wloss, *wviol;
    bool wdirty, started;
} s_cmaes_t;

static void
s_reserve (s_cmaes_t *t, uint64_t n)
{
    cgq_search_rows_reserve (n, t->d, &t->cap, &t->x, &t->loss, &t->viol, &t->st);
}

static double
s_clamp (double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

// s_to_box maps the genes x to the box coordinates u (n of them).
static void
s_to_box (const s_cmaes_t *t, const double *x, double *u)
{
    for (size_t j = 0; j < t->n; j++) {
        const cgq_gene_t *gene = &t->g.genes[t->var[j]];
        double v = x[t->var[j]];
        if (gene->kind == CGQ_GENE_INT && gene->logscale)
            u[j] = (log (t->kfirst[j] + v) - t->lo0[j]) / (t->lo1[j] - t->lo0[j]);
        else if (gene->kind == CGQ_GENE_INT)
            u[j] = (v + 0.5) / gene->n;
        else
            u[j] = (v - gene->lo) / (gene->hi - gene->lo);
    }
}

// s_from_box sets the genes of x from box coordinates u (clipped into the box).
static void
s_from_box (const s_cmaes_t *t, const double *u, double *x)
{
    for (size_t j = 0; j < t->n; j++) {
        const cgq_gene_t *gene = &t->g.genes[t->var[j]];
        double v = s_clamp (u[j], 0, 1);
        double *o = &x[t->var[j]];
        if (gene->kind == CGQ_GENE_INT && gene->logscale)
            *o = s_clamp (nearbyint (exp (t->lo0[j] + v * (t->lo1[j] - t->lo0[j]))) - t->kfirst[j],
                          0, gene->n - 1);
        else if (gene->kind == CGQ_GENE_INT)
            *o = s_clamp (floor (v * gene->n), 0, gene->n - 1);
        else
            *o = gene->lo + v * (gene->hi - gene->lo);
    }
    cgq_genome_canon (&t->g, x);
}

// s_start_warm sets the distribution estimated from the warm points; false
// if it cannot be estimated (then the cold start applies).
static bool
s_start_warm (s_cmaes_t *t, size_t lambda)
{
    size_t n = t->n;
    double worst = -INFINITY, sigma;
    for (size_t i = 0; i < t->nwarm; i++)
        if (t->wviol[i] == 0 && t->wloss[i] > worst)
            worst = t->wloss[i];
    double *f = cgq_xmalloc (t->nwarm * sizeof *f), *m = cgq_xmalloc (n * sizeof *m),
           *cov = cgq_xmalloc (n * n * sizeof *cov);
    for (size_t i = 0; i < t->nwarm; i++) {
        double v = t->wviol[i];
        f[i] = v == 0              ? t->wloss[i]
               : !isfinite (v)     ? INFINITY
               : worst > -INFINITY ? worst + 1 + v
                                   : v;
    }
    bool ok = cgq_cmaes_warm_mgd (n, t->nwarm, t->wu, f, S_WARM_GAMMA, S_WARM_ALPHA, m, &sigma,
                                  cov) == 0;
    if (ok) {
        t->cma = cgq_cmaes_new (n, lambda, m, sigma > 1e-10 ? sigma : 1e-10);
        cgq_cmaes_set_cov (t->cma, cov);
    }
    free (f);
    free (m);
    free (cov);
    return ok;
}

// s_start sets the distribution of a generation of lambda starting at trial
// id start: the warm points' when there are some; else the box's centre the
// first time, a random mean on a restart.
static void
s_start (cgq_searcher_t *self, uint64_t start, size_t lambda)
{
    s_cmaes_t *t = self->impl;
    cgq_cmaes_destroy (&t->cma);
    if (t->nwarm && s_start_warm (t, lambda)) {
        t->gstart = start;
        size_t L = cgq_cmaes_lambda (t->cma);
        t->gx = cgq_xrealloc (t->gx, L * t->n * sizeof *t->gx);
        t->gf = cgq_xrealloc (t->gf, L * sizeof *t->gf);
        return;
    }
    double *m = cgq_xmalloc (t->n * sizeof *m);
    cgq_rng_t r;
    cgq_rng_seed (&r, self->spec->search.seed, start, S_RESTART);
    for (size_t j = 0; j < t->n; j++)
        m[j] = t->restarts ? cgq_rng_unit (&r) : 0.5;
    t->cma = cgq_cmaes_new (t->n, lambda, m, self->spec->search.sigma0);
    t->gstart = start;
    free (m);
    size_t L = cgq_cmaes_lambda (t->cma);
    t->gx = cgq_xrealloc (t->gx, L * t->n * sizeof *t->gx);
    t->gf = cgq_xrealloc (t->gf, L * sizeof *t->gf);
}

static int
s_init (cgq_searcher_t *self, const json_t *state, char *err, size_t errlen)
{
    const cgq_spec_t *spec = self->spec;
    s_cmaes_t *t = cgq_xcalloc (1, sizeof *t);
    self->impl = t;
    if (spec->nobjectives != 1) {
        snprintf (err, errlen,
                  "algorithm cmaes optimises one objective, the spec has %zu (use nsga2 for "
                  "several)",
                  spec->nobjectives);
        return -1;
    }
    if (cgq_genome_init (&t->g, spec, err, errlen) < 0)
        return -1;
    t->d = t->g.ngenes;
    size_t cap = t->d ? t->d : 1;
    t->var = cgq_xcalloc (cap, sizeof *t->var);
    t->lo0 = cgq_xcalloc (cap, sizeof *t->lo0);
    t->lo1 = cgq_xcalloc (cap, sizeof *t->lo1);
    t->kfirst = cgq_xcalloc (cap, sizeof *t->kfirst);
    for (size_t i = 0; i < t->d; i++) {
        const cgq_gene_t *gene = &t->g.genes[i];
        if (gene->kind == CGQ_GENE_INDEX) {
            snprintf (err, errlen,
                      "algorithm cmaes searches numeric params only, and param '%s' is "
                      "categorical (use algorithm: tpe)",
                      spec->params[gene->param].name);
            return -1;
        }
        if (gene->kind == CGQ_GENE_INT && gene->n < 2)
            continue;
        size_t j = t->n++;
        t->var[j] = i;
        if (gene->kind == CGQ_GENE_INT && gene->logscale) {
            t->kfirst[j] = cgq_genome_q_first (gene->p);
            t->lo0[j] = log (t->kfirst[j] - 0.5);
            t->lo1[j] = log (t->kfirst[j] + gene->n - 0.5);
        }
    }
    if (t->n)
        s_start (self, 0, spec->search.popsize);
    if (!state)
        return 0;
    if (cgq_search_state_next (self, state, err, errlen) < 0)
        return -1;
    s_reserve (t, self->suggested);
    return 0;
}

static void
s_fini (cgq_searcher_t *self)
{
    s_cmaes_t *t = self->impl;
    if (!t)
        return;
    cgq_cmaes_destroy (&t->cma);
    free (t->var);
    free (t->lo0);
    free (t->lo1);
    free (t->kfirst);
    free (t->x);
    free (t->loss);
    free (t->viol);
    free (t->st);
    free (t->gx);
    free (t->gf);
    free (t->wu);
    free (t->wloss);
    free (t->wviol);
    cgq_genome_fini (&t->g);
    free (t);
    self->impl = NULL;
}

static bool
s_done (const cgq_searcher_t *self)
{
    return self->suggested >= self->total;
}

// s_advance runs the update of every generation whose trials have all
// ended, in order, restarting where a stop test says so.
static void
s_advance (cgq_searcher_t *self)
{
    s_cmaes_t *t = self->impl;
    if (!t->cma)
        return;
    if (t->wdirty) { // the warm points came after init set the cold start
        t->wdirty = false;
        s_start (self, 0, self->spec->search.popsize);
    }
    for (;;) {
        size_t L = cgq_cmaes_lambda (t->cma), n = t->n;
        uint64_t end = t->gstart + L;
        if (end > self->suggested)
            return;
        bool any = false;
        for (uint64_t id = t->gstart; id < end; id++) {
            if (t->st[id] != S_OK && t->st[id] != S_FAILED)
                return;
            any |= t->st[id] == S_OK;
        }
        if (!any) { // nothing learnt: the same distribution, new draws
            t->gstart = end;
            continue;
        }
        // Constraints (Deb's rule, as nsga2): a feasible trial ranks before
        // an infeasible one, two infeasible ones by their violation. CMA-ES
        // reads ranks only, so an infeasible trial's fitness is placed past
        // the generation's worst feasible one (or is its violation, when
        // none is feasible); a failed one ranks last.
        double worst = -INFINITY;
        for (uint64_t id = t->gstart; id < end; id++)
            if (t->st[id] == S_OK && t->viol[id] == 0 && t->loss[id] > worst)
                worst = t->loss[id];
        for (size_t k = 0; k < L; k++) {
            uint64_t id = t->gstart + k;
            s_to_box (t, &t->x[id * t->d], &t->gx[k * n]);
            double v = t->viol[id];
            t->gf[k] = t->st[id] != S_OK ? INFINITY
                       : v == 0          ? t->loss[id]
                       : !isfinite (v)   ? INFINITY
                       : worst > -INFINITY ? worst + 1 + v
                                           : v;
        }
        cgq_cmaes_tell (t->cma, t->gx, t->gf);
        t->gstart = end;
        double sigma0 = self->spec->search.sigma0;
        if (t->restarts < self->spec->search.restarts &&
            cgq_cmaes_should_stop (t->cma, 1e-12, 1e-12 * sigma0, NULL)) {
            // Doubled, but no larger than the cap, or than the trials left
            // (a generation that cannot end is no use).
            size_t next = 2 * L, left = (size_t)(self->total - end);
            next = next > CGQ_SPEC_CMAES_MAX_POPSIZE ? CGQ_SPEC_CMAES_MAX_POPSIZE : next;
            next = next > left ? (left > L ? left : L) : next;
            t->restarts++;
            s_start (self, end, next);
        }
    }
}

// s_set moves trial to status st.
static void
s_set (s_cmaes_t *t, uint64_t trial, uint8_t st)
{
    t->st[trial] = st;
}

static void
s_end (cgq_searcher_t *self, uint64_t trial, const json_t *metrics, double value, bool ok)
{
    s_cmaes_t *t = self->impl;
    double f;
    if (ok && cgq_search_objectives (self->spec, metrics, value, &f) && isfinite (f)) {
        t->loss[trial] = -self->spec->objective.mode * f;
        t->viol[trial] = cgq_search_violation (self->spec, metrics);
        s_set (t, trial, S_OK);
    }
    else
        s_set (t, trial, S_FAILED);
}

static void
s_observe (cgq_searcher_t *self, uint64_t trial, const json_t *metrics, double value, bool ok)
{
    s_cmaes_t *t = self->impl;
    if (trial >= t->cap || t->st[trial] != S_FLIGHT)
        return;
    s_end (self, trial, metrics, value, ok);
    s_advance (self);
}

static int
s_replay (cgq_searcher_t *self, uint64_t trial, const json_t *params, const json_t *metrics,
          double value, cgq_replay_t outcome, char *err, size_t errlen)
{
    s_cmaes_t *t = self->impl;
    t->started = true;
    double *x = &t->x[trial * t->d];
    if (cgq_genome_from_params (&t->g, params, x, err, errlen) < 0)
        return -1;
    cgq_genome_canon (&t->g, x);
    if (outcome == CGQ_REPLAY_ACTIVE)
        s_set (t, trial, S_FLIGHT);
    else
        s_end (self, trial, metrics, value, outcome == CGQ_REPLAY_SUCCEEDED);
    return 0; // the generations are replayed at the next suggest (any order here)
}

static json_t *
s_suggest (cgq_searcher_t *self)
{
    s_cmaes_t *t = self->impl;
    if (s_done (self))
        return NULL;
    t->started = true;
    s_advance (self);
    uint64_t id = self->suggested, seed = self->spec->search.seed;
    if (t->cma && id >= t->gstart + cgq_cmaes_lambda (t->cma))
        return NULL; // the whole generation is out: wait for its results
    s_reserve (t, id + 1);
    double *x = &t->x[id * t->d];
    cgq_rng_t r;
    cgq_rng_seed (&r, seed, id, S_RANDOM);
    cgq_genome_random (&t->g, &r, x); // the genes with one value keep theirs
    if (t->cma) {
        size_t n = t->n;
        double *z = cgq_xmalloc (2 * n * sizeof *z), *u = z + n;
        for (int k = 0; k < S_RESAMPLE; k++) {
            cgq_rng_seed (&r, seed, id, S_SAMPLE + (uint64_t)k);
            for (size_t j = 0; j < n; j++)
                z[j] = cgq_rng_normal (&r);
            cgq_cmaes_sample (t->cma, z, u);
            bool inside = true;
            for (size_t j = 0; j < n && inside; j++)
                inside = u[j] >= 0 && u[j] <= 1;
            if (inside)
                break;
        }
        s_from_box (t, u, x);
        free (z);
    }
    cgq_genome_canon (&t->g, x);
    s_set (t, id, S_FLIGHT);
    return cgq_genome_params (&t->g, x);
}

// s_warm adds a warm-start point: it must give every param of the space
// (CMA-ES models them jointly) and the objective; others are ignored.
static int
s_warm (cgq_searcher_t *self, const json_t *params, const json_t *metrics, char *err,
        size_t errlen)
{
    s_cmaes_t *t = self->impl;
    const cgq_spec_t *spec = self->spec;
    if (t->started) {
        snprintf (err, errlen, "warm-start points come before the job's first trial");
        return -1;
    }
    double f;
    if (!cgq_search_objectives (spec, metrics, NAN, &f) || !isfinite (f)) {
        snprintf (err, errlen, "its metrics lack the objective (or it is not a finite number)");
        return -1;
    }
    for (size_t p = 0; p < spec->nparams; p++)
        if (spec->params[p].name && t->g.count[p] &&
            !json_object_get (params, spec->params[p].name)) {
            snprintf (err, errlen,
                      "it has no value for param %s, and algorithm cmaes models every param "
                      "jointly (give it one, or use algorithm: tpe, which leaves it out)",
                      spec->params[p].name);
            return -1;
        }
    double *x = cgq_xmalloc ((t->d ? t->d : 1) * sizeof *x);
    cgq_rng_t r;
    cgq_rng_seed (&r, 0, 0, 0);
    cgq_genome_random (&t->g, &r, x); // for the constants it may lack
    json_t *only = cgq_genome_params (&t->g, x);
    for (size_t p = 0; p < spec->nparams; p++) {
        json_t *v = spec->params[p].name ? json_object_get (params, spec->params[p].name) : NULL;
        if (v)
            json_object_set (only, spec->params[p].name, v);
    }
    int rc = cgq_genome_from_params (&t->g, only, x, err, errlen);
    json_decref (only);
    if (rc == 0 && t->n) {
        cgq_genome_canon (&t->g, x);
        if (t->nwarm == t->wcap) {
            t->wcap = t->wcap ? 2 * t->wcap : 64;
            t->wu = cgq_xrealloc (t->wu, t->wcap * t->n * sizeof *t->wu);
            t->wloss = cgq_xrealloc (t->wloss, t->wcap * sizeof *t->wloss);
            t->wviol = cgq_xrealloc (t->wviol, t->wcap * sizeof *t->wviol);
        }
        s_to_box (t, x, &t->wu[t->nwarm * t->n]);
        t->wloss[t->nwarm] = -spec->objective.mode * f;
        t->wviol[t->nwarm] = cgq_search_violation (spec, metrics);
        t->nwarm++;
        t->wdirty = true;
    }
    free (x);
    return rc;
}

static void
s_save (const cgq_searcher_t *self, json_t *state)
{
    json_object_set_new (state, "next", json_integer ((json_int_t)self->suggested));
}

static size_t
s_footprint (const cgq_searcher_t *self)
{
    const s_cmaes_t *t = self->impl;
    size_t n = t->n, L = t->cma ? cgq_cmaes_lambda (t->cma) : 0;
    return sizeof *t + t->d * (sizeof (cgq_gene_t) + 4 * sizeof (double)) +
           (3 * n * n + 6 * n + 3 * L * n + 3 * L) * sizeof (double) +
           t->cap * (t->d * sizeof (double) + sizeof (double) + 1) +
           t->wcap * (n + 2) * sizeof (double);
}

const cgq_search_ops_t cgq_search_cmaes_ops = {
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
