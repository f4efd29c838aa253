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

// s_start sets the distribution of a generation of lambda starting at trial
// id start: the box's centre the first time, a random mean on a restart.
static void
s_start (cgq_searcher_t *self, uint64_t start, size_t lambda)
{
    s_cmaes_t *t = self->impl;
    double *m = cgq_xmalloc (t->n * sizeof *m);
    cgq_rng_t r;
    cgq_rng_seed (&r, self->spec->search.seed, start, S_RESTART);
    for (size_t j = 0; j < t->n; j++)
        m[j] = t->restarts ? cgq_rng_unit (&r) : 0.5;
    cgq_cmaes_destroy (&t->cma);
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
           t->cap * (t->d * sizeof (double) + sizeof (double) + 1);
}

const cgq_search_ops_t cgq_search_cmaes_ops = {
    .init = s_init,
    .fini = s_fini,
    .suggest = s_suggest,
    .observe = s_observe,
    .replay = s_replay,
    .done = s_done,
    .save = s_save,
    .footprint = s_footprint,
};
