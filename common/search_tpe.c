// search_tpe: the tree-structured Parzen estimator (TPE), as Optuna's
// TPESampler does it with its defaults (tpe.h has the estimator), for one
// objective and, as MOTPE, for several (see below).
//
// Until `initial` trials have succeeded, suggestions are random (as
// n_startup_trials). Then each suggestion splits the trials, in trial id
// order, into the gamma(n) = min(ceil(n / 10), 25) best of the n that
// succeeded ("below") and the rest ("above") -- with every trial in flight
// in the rest as if it had the worst value (the constant liar: concurrent
// suggestions then keep away from each other) and failed ones left out --,
// fits one estimator l(x) on below and one g(x) on above, draws `candidates`
// points from l and returns the one with the largest log l(x) - log g(x).
// Univariate (the default) does that per gene, each from its own random
// stream; multivariate: true once, jointly, over all genes.
//
// Genes map to the estimator's coordinates (tpe.h) as Optuna maps its
// distributions: uniform as a REAL; loguniform as a REAL of log(value);
// randint and quniform as STEP over the value's index (bounds widened by
// half a step); qloguniform as a REAL of log(k) for the value k q (bounds
// log(kmin - 1/2), log(kmax + 1/2); samples rounded to the nearest k), as
// Optuna's int with log=True; choice, grid and each assignment item as a
// CATEGORY; each element of a repeat as its own gene. A gene with a single
// value is not modelled.
//
// With constraints (docs/spec.md), an infeasible trial is in the bad group,
// however good its value; while no trial is feasible, the good group is the
// trials of the smallest total violation (as Optuna's constrained TPE splits).
//
// Several objectives (MOTPE): the feasible trials that succeeded are split
// by cgq_tpe_split_multi (Pareto fronts, then hypervolume subset selection)
// into at most gamma good ones, weighted by cgq_tpe_weights_multi instead of
// by age; every trial in flight or infeasible is bad. The rest is as above.
//
// bohb (with early_stop hyperband): as BOHB (Falkner et al., 2018) builds its
// model, each observation is taken at its budget: a trial's result (a trial
// stopped by hyperband carries its rung's budget in its metrics' time
// attribute; any other, max_t) and its value at every rung it reached
// (cgq_searcher_rung, so a promoted trial's lower rungs count, and a trial
// paused at a rung is an observation there, not only a liar). The split uses
// only the largest budget that at least (genes modelled + 2) trials reached:
// each trial's observation at the smallest budget at or above it; trials
// with none there are left out, or, in flight, liars as above. After the
// random start, a share search.random_fraction (1/3) of the suggestions stays
// random (BOHB's and HpBandSter's random_fraction), decided per suggestion
// from its own stream. Its estimator is TPE's.
//
// Saved state: {"next": N} (bohb: and "rungs", [[trial, budget, loss], ...]);
// replay rebuilds the trials. Suggestion i draws only from streams keyed by
// (seed, i), so the same results give the same suggestions, after a restart
// too.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search_impl.h"
#include "tpe.h"
#include "util.h"

// Random stream purposes of suggestion i: its random point, the joint
// model, and gene g's model (S_GENE + g).
#define S_RANDOM 5
#define S_JOINT 6
#define S_GENE 1000
#define S_FRACTION 7 // bohb: whether suggestion i stays random

enum { S_UNKNOWN, S_FLIGHT, S_OK, S_FAILED };

// bohb: a trial's value at a rung's budget.
struct s_rung_s {
    uint64_t trial; // trial id (row nwarm + trial)
    double budget, loss;
};

typedef struct {
    cgq_genome_t g;
    size_t d;            // genes
    cgq_tpe_dim_t *dims; // gene -> its coordinates
    double *kfirst;      // gene -> qloguniform: k of its smallest value (else 0)
    size_t nvar;         // genes with more than one value
    size_t *var;         // their indices
    double *x;           // trial id -> its genes (cap rows of d)
    double *loss;        // trial id -> its objective, minimised (-value for max)
    size_t nobj;         // objectives (MOTPE when > 1)
    int sense[CGQ_SPEC_MAX_OBJECTIVES];
    double *mloss; // MOTPE: trial id -> its nobj objectives, minimised (mcap rows)
    size_t mcap;
    double *viol;   // trial id -> its total constraint violation (0: feasible)
    uint8_t *st;    // trial id -> S_*
    double *budget; // trial id -> bohb: the budget its result is at
    size_t cap;
    // bohb: the trials' values at the rungs they reached (cgq_searcher_rung).
    struct s_rung_s *rungs;
    size_t nrungs, rcap;
    uint64_t nok, nflight;
    // Warm start: rows 0 .. nwarm-1 are the warm-start observations, trial
    // id i is row nwarm + i; a warm row's gene is NaN where its point lacks
    // the param. started: a trial was replayed or suggested (no more warm).
    size_t nwarm;
    bool started;
} s_tpe_t;

static void
s_reserve (s_tpe_t *t, uint64_t n)
{
    size_t old = t->cap;
    cgq_search_rows_reserve (n, t->d, &t->cap, &t->x, &t->loss, &t->viol, &t->st);
    if (t->nobj > 1 && t->mcap < t->cap) {
        t->mloss = cgq_xrealloc (t->mloss, t->cap * t->nobj * sizeof *t->mloss);
        t->mcap = t->cap;
    }
    if (t->cap != old) {
        t->budget = cgq_xrealloc (t->budget, t->cap * sizeof *t->budget);
        for (size_t i = old; i < t->cap; i++)
            t->budget[i] = 0;
    }
}

// s_coord is gene i's value x in the estimator's coordinates.
static double
s_coord (const s_tpe_t *t, size_t i, double x)
{
    const cgq_gene_t *gene = &t->g.genes[i];
    return gene->kind == CGQ_GENE_INT && gene->logscale ? log (t->kfirst[i] + x) : x;
}

// s_gene_of is the gene value of coordinate c (a sample of the estimator).
static double
s_gene_of (const s_tpe_t *t, size_t i, double c)
{
    const cgq_gene_t *gene = &t->g.genes[i];
    if (gene->kind == CGQ_GENE_INT && gene->logscale) {
        double k = nearbyint (exp (c)) - t->kfirst[i];
        return k < 0 ? 0 : k > gene->n - 1 ? gene->n - 1 : k;
    }
    return c;
}

// s_rung_add keeps trial's value at a rung's budget (false: it had one there).
static bool
s_rung_add (s_tpe_t *t, uint64_t trial, double budget, double loss)
{
    for (size_t i = 0; i < t->nrungs; i++)
        if (t->rungs[i].trial == trial && t->rungs[i].budget == budget)
            return false;
    if (t->nrungs == t->rcap) {
        t->rcap = t->rcap ? 2 * t->rcap : 16;
        t->rungs = cgq_xrealloc (t->rungs, t->rcap * sizeof *t->rungs);
    }
    t->rungs[t->nrungs++] = (struct s_rung_s){trial, budget, loss};
    return true;
}

static int
s_init (cgq_searcher_t *self, const json_t *state, char *err, size_t errlen)
{
    const cgq_spec_t *spec = self->spec;
    s_tpe_t *t = cgq_xcalloc (1, sizeof *t);
    self->impl = t;
    if (spec->nobjectives < 1 || spec->nobjectives > CGQ_TPE_MAX_OBJECTIVES) {
        snprintf (err, errlen,
                  "algorithm tpe optimises 1 to %d objectives, the spec has %zu (write "
                  "objective: or objectives: [...])",
                  CGQ_TPE_MAX_OBJECTIVES, spec->nobjectives);
        return -1;
    }
    t->nobj = cgq_spec_objective_senses (spec, t->sense);
    if (cgq_genome_init (&t->g, spec, err, errlen) < 0)
        return -1;
    t->d = t->g.ngenes;
    size_t n = t->d ? t->d : 1;
    t->dims = cgq_xcalloc (n, sizeof *t->dims);
    t->kfirst = cgq_xcalloc (n, sizeof *t->kfirst);
    t->var = cgq_xcalloc (n, sizeof *t->var);
    for (size_t i = 0; i < t->d; i++) {
        const cgq_gene_t *gene = &t->g.genes[i];
        cgq_tpe_dim_t *dim = &t->dims[i];
        switch (gene->kind) {
        case CGQ_GENE_REAL:
        case CGQ_GENE_LOG: *dim = (cgq_tpe_dim_t){CGQ_TPE_REAL, gene->lo, gene->hi, 0, 0}; break;
        case CGQ_GENE_INDEX: *dim = (cgq_tpe_dim_t){CGQ_TPE_CATEGORY, 0, 0, 0, (int)gene->n}; break;
        case CGQ_GENE_INT:
            if (gene->logscale) {
                t->kfirst[i] = cgq_genome_q_first (gene->p);
                *dim = (cgq_tpe_dim_t){CGQ_TPE_REAL, log (t->kfirst[i] - 0.5),
                                       log (t->kfirst[i] + gene->n - 0.5), 0, 0};
            }
            else
                *dim = (cgq_tpe_dim_t){CGQ_TPE_STEP, -0.5, gene->n - 0.5, 1, 0};
            break;
        }
        bool single = (gene->kind == CGQ_GENE_INDEX || gene->kind == CGQ_GENE_INT) && gene->n < 2;
        if (!single)
            t->var[t->nvar++] = i;
    }
    if (!state)
        return 0;
    if (cgq_search_state_next (self, state, err, errlen) < 0)
        return -1;
    s_reserve (t, t->nwarm + self->suggested);
    const json_t *rungs = json_object_get (state, "rungs");
    size_t i;
    const json_t *r;
    if (rungs && !json_is_array (rungs)) {
        snprintf (err, errlen, "searcher state: rungs is not an array");
        return -1;
    }
    json_array_foreach (rungs, i, r)
    {
        const json_t *a = json_array_get (r, 0), *b = json_array_get (r, 1),
                     *l = json_array_get (r, 2);
        if (json_array_size (r) != 3 || !json_is_integer (a) || json_integer_value (a) < 0 ||
            (uint64_t)json_integer_value (a) >= self->suggested || !json_is_number (b) ||
            !json_is_number (l) || !isfinite (json_number_value (b)) ||
            !isfinite (json_number_value (l))) {
            snprintf (err, errlen,
                      "searcher state: rungs[%zu] is not [trial, budget, loss] of a trial "
                      "suggested",
                      i);
            return -1;
        }
        s_rung_add (t, (uint64_t)json_integer_value (a), json_number_value (b),
                    json_number_value (l));
    }
    return 0;
}

static void
s_fini (cgq_searcher_t *self)
{
    s_tpe_t *t = self->impl;
    if (!t)
        return;
    free (t->dims);
    free (t->kfirst);
    free (t->var);
    free (t->x);
    free (t->loss);
    free (t->mloss);
    free (t->viol);
    free (t->st);
    free (t->budget);
    free (t->rungs);
    cgq_genome_fini (&t->g);
    free (t);
    self->impl = NULL;
}

static bool
s_done (const cgq_searcher_t *self)
{
    return self->suggested >= self->total;
}

// s_set moves trial to status st, keeping the counts.
static void
s_set (s_tpe_t *t, uint64_t trial, uint8_t st)
{
    t->nok -= t->st[trial] == S_OK;
    t->nflight -= t->st[trial] == S_FLIGHT;
    t->st[trial] = st;
    t->nok += st == S_OK;
    t->nflight += st == S_FLIGHT;
}

// s_end_row records how the trial of row ended (a warm-start row: as succeeded).
static void
s_end_row (cgq_searcher_t *self, uint64_t trial, const json_t *metrics, double value, bool ok)
{
    s_tpe_t *t = self->impl;
    double f[CGQ_SPEC_MAX_OBJECTIVES];
    if (ok && cgq_search_objectives (self->spec, metrics, value, f)) {
        t->loss[trial] = -self->spec->objective.mode * f[0];
        for (size_t j = 0; t->nobj > 1 && j < t->nobj; j++)
            t->mloss[trial * t->nobj + j] = -t->sense[j] * f[j];
        t->viol[trial] = cgq_search_violation (self->spec, metrics);
        const json_t *at = json_object_get (metrics, self->spec->early_stop.attribute);
        t->budget[trial] = json_is_number (at) ? json_number_value (at)
                                               : (double) self->spec->early_stop.max;
        s_set (t, trial, S_OK);
    }
    else
        s_set (t, trial, S_FAILED);
}

// s_end records how trial ended (its row is nwarm + trial).
static void
s_end (cgq_searcher_t *self, uint64_t trial, const json_t *metrics, double value, bool ok)
{
    s_tpe_t *t = self->impl;
    s_end_row (self, t->nwarm + trial, metrics, value, ok);
}

static void
s_observe (cgq_searcher_t *self, uint64_t trial, const json_t *metrics, double value, bool ok)
{
    s_tpe_t *t = self->impl;
    if (trial + t->nwarm >= t->cap || t->st[trial + t->nwarm] != S_FLIGHT)
        return;
    s_end (self, trial, metrics, value, ok);
}

static bool
s_rung (cgq_searcher_t *self, uint64_t trial, double budget, const json_t *metrics)
{
    s_tpe_t *t = self->impl;
    double f[CGQ_SPEC_MAX_OBJECTIVES];
    if (self->spec->search.algorithm != CGQ_SEARCH_BOHB || t->nobj > 1 ||
        !cgq_search_objectives (self->spec, metrics, NAN, f) || !isfinite (f[0]))
        return false;
    return s_rung_add (t, trial, budget, -self->spec->objective.mode * f[0]);
}

static int
s_replay (cgq_searcher_t *self, uint64_t trial, const json_t *params, const json_t *metrics,
          double value, cgq_replay_t outcome, char *err, size_t errlen)
{
    s_tpe_t *t = self->impl;
    t->started = true;
    s_reserve (t, t->nwarm + self->suggested); // the warm rows came after init's reserve
    double *x = &t->x[(t->nwarm + trial) * t->d];
    if (cgq_genome_from_params (&t->g, params, x, err, errlen) < 0)
        return -1;
    cgq_genome_canon (&t->g, x);
    if (outcome == CGQ_REPLAY_ACTIVE)
        s_set (t, t->nwarm + trial, S_FLIGHT);
    else
        s_end (self, trial, metrics, value, outcome == CGQ_REPLAY_SUCCEEDED);
    return 0;
}

// s_choose fits l on the below trials and g on the above ones over the
// genes gs (ng of them), draws the candidates from l with r and writes the
// best one's genes into x (x[gs[j]]).
static void
s_choose (cgq_searcher_t *self, const uint64_t *below, const double *wbelow, size_t nb,
          const uint64_t *above, size_t na, const size_t *gs, size_t ng, cgq_rng_t *r, double *x)
{
    s_tpe_t *t = self->impl;
    size_t d = t->d, m = self->spec->search.candidates ? self->spec->search.candidates : 1;
    cgq_tpe_dim_t *dims = cgq_xmalloc (ng * sizeof *dims);
    double *ob = cgq_xmalloc ((nb ? nb : 1) * ng * sizeof *ob);
    double *oa = cgq_xmalloc ((na ? na : 1) * ng * sizeof *oa);
    double *wb = cgq_xmalloc ((nb ? nb : 1) * sizeof *wb);
    for (size_t j = 0; j < ng; j++)
        dims[j] = t->dims[gs[j]];
    // A warm-start row that lacks one of the genes is left out (as Optuna
    // leaves out a trial without the param).
    size_t kb = 0, ka = 0;
    for (size_t i = 0; i < nb; i++) {
        const double *xr = &t->x[below[i] * d];
        bool has = true;
        for (size_t j = 0; j < ng; j++)
            has = has && !isnan (xr[gs[j]]);
        if (!has)
            continue;
        for (size_t j = 0; j < ng; j++)
            ob[kb * ng + j] = s_coord (t, gs[j], xr[gs[j]]);
        wb[kb++] = wbelow ? wbelow[i] : 1;
    }
    for (size_t i = 0; i < na; i++) {
        const double *xr = &t->x[above[i] * d];
        bool has = true;
        for (size_t j = 0; j < ng; j++)
            has = has && !isnan (xr[gs[j]]);
        if (!has)
            continue;
        for (size_t j = 0; j < ng; j++)
            oa[ka * ng + j] = s_coord (t, gs[j], xr[gs[j]]);
        ka++;
    }
    bool joint = self->spec->search.multivariate;
    cgq_tpe_t *l = cgq_tpe_new_weighted (dims, ng, ob, kb, joint, wbelow ? wb : NULL);
    cgq_tpe_t *g = cgq_tpe_new (dims, ng, oa, ka, joint);
    double *cand = cgq_xmalloc (m * ng * sizeof *cand);
    double *genes = cgq_xmalloc (m * d * sizeof *genes);
    double *ll = cgq_xmalloc (m * sizeof *ll), *lg = cgq_xmalloc (m * sizeof *lg);
    cgq_tpe_sample (l, r, m, cand);
    // Each candidate as the params will carry it (reals to 15 digits, log
    // integers rounded), scored there: what is scored is what is suggested.
    memset (genes, 0, m * d * sizeof *genes);
    for (size_t i = 0; i < m; i++) {
        double *gi = &genes[i * d];
        for (size_t j = 0; j < ng; j++)
            gi[gs[j]] = s_gene_of (t, gs[j], cand[i * ng + j]);
        cgq_genome_canon (&t->g, gi);
        for (size_t j = 0; j < ng; j++)
            cand[i * ng + j] = s_coord (t, gs[j], gi[gs[j]]);
    }
    cgq_tpe_log_pdf (l, cand, m, ll);
    cgq_tpe_log_pdf (g, cand, m, lg);
    for (size_t i = 0; i < m; i++)
        ll[i] -= lg[i];
    size_t best = cgq_tpe_best (ll, m);
    for (size_t j = 0; j < ng; j++)
        x[gs[j]] = genes[best * d + gs[j]];
    cgq_tpe_destroy (&l);
    cgq_tpe_destroy (&g);
    free (dims);
    free (ob);
    free (oa);
    free (wb);
    free (cand);
    free (genes);
    free (ll);
    free (lg);
}

// s_split_multi is MOTPE's split (tpe.h): of the trials that succeeded, the
// feasible ones are split by cgq_tpe_split_multi into at most gamma good
// ones (weighted by hypervolume contribution, *wbelow) and the rest; every
// other trial (in flight, infeasible) is bad. While none is feasible, the
// good group is the trials of the smallest total violation, weighted 1
// (*wbelow NULL). below comes in Optuna's order, above in trial order.
// Returns nb; above gets the nt - nb others.
static size_t
s_split_multi (const s_tpe_t *t, uint64_t n, size_t nt, uint64_t *below, double **wbelow,
               uint64_t *above)
{
    size_t m = t->nobj, nf = 0, nk = 0;
    uint64_t *ids = cgq_xmalloc ((nt ? nt : 1) * sizeof *ids);
    for (uint64_t i = 0; i < n; i++)
        if (t->st[i] == S_OK && t->viol[i] <= 0)
            ids[nf++] = i;
    size_t nb = cgq_tpe_gamma ((size_t)t->nok);
    size_t *bi = cgq_xmalloc ((nb ? nb : 1) * sizeof *bi);
    size_t *ai = cgq_xmalloc ((nt ? nt : 1) * sizeof *ai);
    *wbelow = NULL;
    if (nf) {
        nb = nb < nf ? nb : nf;
        double *loss = cgq_xmalloc (nf * m * sizeof *loss);
        for (size_t k = 0; k < nf; k++)
            memcpy (&loss[k * m], &t->mloss[ids[k] * m], m * sizeof *loss);
        cgq_tpe_split_multi (loss, nf, m, nb, bi, ai);
        *wbelow = cgq_xmalloc ((nb ? nb : 1) * sizeof **wbelow);
        cgq_tpe_weights_multi (loss, m, bi, nb, *wbelow);
        free (loss);
    }
    else {
        // None feasible: the nb smallest violations.
        double *v = cgq_xmalloc ((nt ? nt : 1) * sizeof *v);
        for (uint64_t i = 0; i < n; i++)
            if (t->st[i] == S_OK) {
                ids[nk] = i;
                v[nk++] = t->viol[i];
            }
        nb = nb < nk ? nb : nk;
        cgq_tpe_split (v, nk, nb, bi, ai);
        free (v);
    }
    uint8_t *in = cgq_xcalloc (n ? n : 1, 1);
    for (size_t k = 0; k < nb; k++) {
        below[k] = ids[bi[k]];
        in[below[k]] = 1;
    }
    size_t na = 0;
    for (uint64_t i = 0; i < n; i++)
        if ((t->st[i] == S_OK || t->st[i] == S_FLIGHT) && !in[i])
            above[na++] = i;
    free (in);
    free (ids);
    free (bi);
    free (ai);
    return nb;
}

// s_model writes the TPE suggestion into x (its random values stay for the
// genes not modelled: those with one value).
static void
s_model (cgq_searcher_t *self, double *x)
{
    s_tpe_t *t = self->impl;
    uint64_t id = self->suggested, n = t->nwarm + id, seed = self->spec->search.seed;
    if (t->nobj > 1) {
        size_t nt = (size_t)(t->nok + t->nflight);
        uint64_t *below = cgq_xmalloc ((nt ? nt : 1) * sizeof *below);
        uint64_t *above = cgq_xmalloc ((nt ? nt : 1) * sizeof *above);
        double *wb;
        size_t nb = s_split_multi (t, n, nt, below, &wb, above);
        cgq_rng_t r;
        if (self->spec->search.multivariate) {
            cgq_rng_seed (&r, seed, id, S_JOINT);
            s_choose (self, below, wb, nb, above, nt - nb, t->var, t->nvar, &r, x);
        }
        else
            for (size_t j = 0; j < t->nvar; j++) {
                cgq_rng_seed (&r, seed, id, S_GENE + t->var[j]);
                s_choose (self, below, wb, nb, above, nt - nb, &t->var[j], 1, &r, x);
            }
        free (below);
        free (above);
        free (wb);
        return;
    }
    size_t k = 0, nt = (size_t)(t->nok + t->nflight);
    uint64_t *ids = cgq_xmalloc ((nt ? nt : 1) * sizeof *ids);
    double *loss = cgq_xmalloc ((nt ? nt : 1) * sizeof *loss);
    // Constraints: infeasible trials go to the bad group (loss +INFINITY,
    // and the good group no larger than the feasible trials); while none is
    // feasible, the good group is those of the smallest total violation.
    // bohb: only the largest budget that enough trials reached, each
    // trial's observation at the smallest budget at or above it (its
    // result, or its value at a rung).
    double floor_b = -INFINITY;
    double *ol = cgq_xmalloc ((n ? n : 1) * sizeof *ol); // row -> its observation's loss
    double *ob = cgq_xmalloc ((n ? n : 1) * sizeof *ob); // row -> its budget (NAN: none)
    double *ov = cgq_xmalloc ((n ? n : 1) * sizeof *ov); // row -> its violation
    if (self->spec->search.algorithm == CGQ_SEARCH_BOHB) {
        double *top = cgq_xmalloc ((n ? n : 1) * sizeof *top); // row -> its largest budget
        for (uint64_t i = 0; i < n; i++)
            top[i] = t->st[i] == S_OK ? t->budget[i] : -INFINITY;
        for (size_t r = 0; r < t->nrungs; r++) {
            uint64_t row = t->nwarm + t->rungs[r].trial;
            if (row < n && t->rungs[r].budget > top[row])
                top[row] = t->rungs[r].budget;
        }
        for (uint64_t i = 0; i < n; i++) {
            size_t reached = 0;
            if (!(top[i] > floor_b))
                continue;
            for (uint64_t k2 = 0; k2 < n; k2++)
                reached += top[k2] >= top[i];
            if (reached >= t->nvar + 2)
                floor_b = top[i];
        }
        free (top);
    }
    for (uint64_t i = 0; i < n; i++) {
        bool have = t->st[i] == S_OK && !(t->budget[i] < floor_b);
        ob[i] = have ? t->budget[i] : NAN;
        ol[i] = t->loss[i];
        ov[i] = t->st[i] == S_OK ? t->viol[i] : 0;
    }
    for (size_t r = 0; r < t->nrungs; r++) {
        uint64_t row = t->nwarm + t->rungs[r].trial;
        double b = t->rungs[r].budget;
        if (row >= n || b < floor_b || b >= ob[row])
            continue;
        ob[row] = b; // a smaller budget at or above the floor (NAN: the first)
        ol[row] = t->rungs[r].loss;
    }
    uint64_t nfeas = 0, nok = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (isnan (ob[i]))
            continue;
        nfeas += ov[i] <= 0;
        nok++;
    }
    for (uint64_t i = 0; i < n; i++)
        if (!isnan (ob[i]) || t->st[i] == S_FLIGHT) {
            ids[k] = i;
            loss[k++] = isnan (ob[i]) ? INFINITY // the constant liar
                        : ov[i] <= 0  ? ol[i]
                        : nfeas       ? INFINITY
                                      : ov[i];
        }
    free (ol);
    free (ob);
    free (ov);
    nt = k;
    size_t nb = cgq_tpe_gamma ((size_t)nok);
    if (nfeas && nb > nfeas)
        nb = (size_t)nfeas;
    size_t *bi = cgq_xmalloc ((nb ? nb : 1) * sizeof *bi);
    size_t *ai = cgq_xmalloc ((nt - nb ? nt - nb : 1) * sizeof *ai);
    cgq_tpe_split (loss, nt, nb, bi, ai);
    uint64_t *below = cgq_xmalloc ((nb ? nb : 1) * sizeof *below);
    uint64_t *above = cgq_xmalloc ((nt - nb ? nt - nb : 1) * sizeof *above);
    for (size_t i = 0; i < nb; i++)
        below[i] = ids[bi[i]];
    for (size_t i = 0; i < nt - nb; i++)
        above[i] = ids[ai[i]];
    cgq_rng_t r;
    if (self->spec->search.multivariate) {
        cgq_rng_seed (&r, seed, id, S_JOINT);
        s_choose (self, below, NULL, nb, above, nt - nb, t->var, t->nvar, &r, x);
    }
    else
        for (size_t j = 0; j < t->nvar; j++) {
            cgq_rng_seed (&r, seed, id, S_GENE + t->var[j]);
            s_choose (self, below, NULL, nb, above, nt - nb, &t->var[j], 1, &r, x);
        }
    free (ids);
    free (loss);
    free (bi);
    free (ai);
    free (below);
    free (above);
}

// s_warm adds a warm-start observation as row nwarm (before any trial).
static int
s_warm (cgq_searcher_t *self, const json_t *params, const json_t *metrics, char *err, size_t errlen)
{
    s_tpe_t *t = self->impl;
    const cgq_spec_t *spec = self->spec;
    if (t->started) {
        snprintf (err, errlen, "warm-start points come before the job's first trial");
        return -1;
    }
    double f[CGQ_SPEC_MAX_OBJECTIVES];
    if (!cgq_search_objectives (spec, metrics, NAN, f)) {
        snprintf (err, errlen, "its metrics lack the objective%s (or one is not a finite number)",
                  spec->nobjectives > 1 ? "s" : "");
        return -1;
    }
    // The params of the space it lacks get a placeholder (a point drawn at
    // random), then NaN genes: left out of the model for this point.
    cgq_rng_t r;
    cgq_rng_seed (&r, 0, 0, 0);
    double *tmp = cgq_xmalloc ((t->d ? t->d : 1) * sizeof *tmp);
    cgq_genome_random (&t->g, &r, tmp);
    json_t *full = cgq_genome_params (&t->g, tmp);
    bool *missing = cgq_xcalloc (spec->nparams ? spec->nparams : 1, sizeof *missing);
    for (size_t p = 0; p < spec->nparams; p++) {
        const char *name = spec->params[p].name;
        json_t *v = name ? json_object_get (params, name) : NULL;
        if (v)
            json_object_set (full, name, v);
        else
            missing[p] = name != NULL;
    }
    s_reserve (t, t->nwarm + 1);
    double *x = &t->x[t->nwarm * t->d];
    int rc = cgq_genome_from_params (&t->g, full, x, err, errlen);
    json_decref (full);
    free (tmp);
    if (rc == 0) {
        cgq_genome_canon (&t->g, x);
        for (size_t p = 0; p < spec->nparams; p++)
            for (size_t k = 0; missing[p] && k < t->g.count[p]; k++)
                x[t->g.first[p] + k] = NAN;
        size_t row = t->nwarm;
        t->nwarm++;
        s_end_row (self, row, metrics, NAN, true); // as a trial that succeeded
    }
    free (missing);
    return rc;
}

static json_t *
s_suggest (cgq_searcher_t *self)
{
    s_tpe_t *t = self->impl;
    if (s_done (self))
        return NULL;
    uint64_t id = self->suggested;
    t->started = true;
    s_reserve (t, t->nwarm + id + 1);
    double *x = &t->x[(t->nwarm + id) * t->d];
    cgq_rng_t r;
    cgq_rng_seed (&r, self->spec->search.seed, id, S_RANDOM);
    cgq_genome_random (&t->g, &r, x);
    bool model = t->nok >= self->spec->search.initial && t->nvar > 0;
    if (model && self->spec->search.random_fraction > 0) { // bohb: a share stays random
        cgq_rng_t rf;
        cgq_rng_seed (&rf, self->spec->search.seed, id, S_FRACTION);
        model = cgq_rng_unit (&rf) >= self->spec->search.random_fraction;
    }
    if (model)
        s_model (self, x);
    cgq_genome_canon (&t->g, x);
    s_set (t, t->nwarm + id, S_FLIGHT);
    return cgq_genome_params (&t->g, x);
}

static void
s_save (const cgq_searcher_t *self, json_t *state)
{
    json_object_set_new (state, "next", json_integer ((json_int_t)self->suggested));
    const s_tpe_t *t = self->impl;
    if (!t->nrungs)
        return;
    json_t *a = json_array ();
    for (size_t i = 0; i < t->nrungs; i++)
        json_array_append_new (a, json_pack ("[I, f, f]", (json_int_t)t->rungs[i].trial,
                                             t->rungs[i].budget, t->rungs[i].loss));
    json_object_set_new (state, "rungs", a);
}

static size_t
s_footprint (const cgq_searcher_t *self)
{
    const s_tpe_t *t = self->impl;
    size_t d = t->d ? t->d : 1;
    return sizeof *t + d * (sizeof (cgq_gene_t) + sizeof (cgq_tpe_dim_t) + 2 * sizeof (double)) +
           t->cap * (t->d * sizeof (double) + sizeof (double) + 1) +
           t->mcap * t->nobj * sizeof (double) + t->rcap * sizeof *t->rungs;
}

const cgq_search_ops_t cgq_search_tpe_ops = {
    .init = s_init,
    .fini = s_fini,
    .suggest = s_suggest,
    .observe = s_observe,
    .replay = s_replay,
    .done = s_done,
    .warm = s_warm,
    .save = s_save,
    .footprint = s_footprint,
    .rung = s_rung,
};
