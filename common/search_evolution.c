// search_evolution: the two evolutionary searchers, which share everything
// but how parents are chosen and who leaves the population.
//
//   evolution  regularized evolution (Real et al., aging evolution): the
//              population is the last `population` successful trials in the
//              order their results arrived; a child is one mutation of the
//              best of `tournament` distinct random members; the oldest member
//              leaves when a result arrives.
//   nsga2      NSGA-II: a child is the crossover (SBX for reals, uniform for
//              the rest; probability `crossover`) of two binary-tournament
//              winners (lower rank, then larger crowding distance), then
//              mutated gene by gene (probability `mutation`, default
//              1/genes; polynomial mutation for reals). When a result makes
//              the population larger than `population`, the member of the
//              worst front with the smallest crowding distance leaves.
//              With constraints, fronts follow Deb's constrained domination
//              (cgq_pareto_sort_constrained); evolution's tournaments prefer
//              the smaller total violation, then the better value.
//
// Both are steady state, which suits a queue: the first `initial` trials are
// random; once every one of them has ended, a child is bred whenever fewer
// than `batch` trials are in flight, from the population as it is then (so a
// child is at most `batch` results behind). suggest() returns NULL while it
// waits; never when nothing is in flight, so a job cannot stall (if no trial
// ever succeeded, it suggests random points).
//
// Warm start: warm-start points (each giving every param of the space, and
// the objectives) come before the first trial and join the population as
// members that succeeded before trial 0, in the order given (so with more
// points than `population`, evolution keeps the last ones and nsga2 the
// best fronts); they count toward `initial` (initial - points random trials
// first, none when the points are enough: the very first suggestion is a
// child of them) and are never suggested again.
//
// Saved state: {"next": N, "population": [ids, in order]}: O(population);
// with warm members still in the population, "warm": [[position, k], ...]
// places warm point k at that position among the ids (the points are fed
// again after a restart, before the replay, and fill them in).
// Replay rebuilds the rest: each member's genome (from its params) and
// objectives, the hashes of every point suggested (so a point is not
// suggested twice while an unseen one is found in 32 tries), the trials in
// flight, and how many have ended.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pareto.h"
#include "search_impl.h"
#include "util.h"

#define S_TRIES 32 // attempts at a child not suggested before

typedef struct {
    uint64_t id;
    double *x;                        // genome (owned); NULL until replay fills it
    double f[CGQ_SPEC_MAX_OBJECTIVES]; // objectives as reported
    double v;                          // total constraint violation: 0 feasible
    bool warm;                         // id is the index of a warm-start point, not a trial
} s_member_t;

typedef struct {
    uint64_t id;
    double *x; // owned
} s_flight_t;

typedef struct {
    bool nsga2;
    cgq_genome_t g;
    int m;                              // objectives (1 for evolution)
    int sense[CGQ_SPEC_MAX_OBJECTIVES]; // +1 max, -1 min
    uint32_t population, tournament, initial, batch;
    s_member_t *pop; // in order: arrival (evolution), survival (nsga2)
    size_t npop;     // <= population + 1
    s_flight_t *flight;
    size_t nflight, capflight;
    cgq_hset64_t seen;
    uint64_t ended, init_ended; // observed trials; of which ids < initial
    bool restoring;             // saved members may still lack their genome
    uint64_t nwarm;             // warm-start points taken
    bool started;               // a trial was suggested or replayed: no more warm points
} s_evo_t;

// s_initial is how many random trials come first: initial less the warm points.
static uint64_t
s_initial (const s_evo_t *e)
{
    return e->initial > e->nwarm ? e->initial - e->nwarm : 0;
}

static void
s_member_free (s_member_t *m)
{
    free (m->x);
    m->x = NULL;
}

static void
s_pop_remove (s_evo_t *e, size_t i)
{
    s_member_free (&e->pop[i]);
    memmove (&e->pop[i], &e->pop[i + 1], (e->npop - i - 1) * sizeof *e->pop);
    e->npop--;
}

static int
s_init (cgq_searcher_t *self, const json_t *state, char *err, size_t errlen)
{
    const cgq_spec_t *spec = self->spec;
    s_evo_t *e = cgq_xcalloc (1, sizeof *e);
    self->impl = e;
    e->nsga2 = spec->search.algorithm == CGQ_SEARCH_NSGA2;
    e->m = (int) cgq_spec_objective_senses (spec, e->sense);
    if (e->m < 1 || (!e->nsga2 && e->m != 1)) {
        snprintf (err, errlen, "algorithm %s needs %s objective", self->algorithm,
                  e->nsga2 ? "at least one" : "exactly one");
        return -1;
    }
    e->population = spec->search.population ? spec->search.population : 50;
    e->tournament = spec->search.tournament ? spec->search.tournament : 5;
    if (e->tournament > e->population)
        e->tournament = e->population;
    e->initial = spec->search.initial ? spec->search.initial : e->population;
    e->batch = spec->search.batch ? spec->search.batch : e->population;
    if (cgq_genome_init (&e->g, spec, err, errlen) < 0)
        return -1;
    e->pop = cgq_xcalloc (e->population + 1, sizeof *e->pop);
    if (!state)
        return 0;
    if (cgq_search_state_next (self, state, err, errlen) < 0)
        return -1;
    uint64_t *ids;
    size_t n;
    if (cgq_search_state_ids (state, "population", self->suggested, &ids, &n, err, errlen) < 0)
        return -1;
    if (n > e->population) {
        snprintf (err, errlen,
                  "searcher state has %zu members, more than search.population %u (the state "
                  "belongs to another spec; resubmit the job)",
                  n, e->population);
        free (ids);
        return -1;
    }
    // Warm members at their positions, the trials' ids in order around them.
    const json_t *wl = json_object_get (state, "warm");
    size_t nw = json_array_size (wl), at = 0;
    if (wl && (!json_is_array (wl) || n + nw > e->population)) {
        snprintf (err, errlen, "searcher state: \"warm\" is not a list of [position, point] that "
                               "fits search.population (resubmit the job)");
        free (ids);
        return -1;
    }
    for (size_t i = 0; i < nw; i++) {
        const json_t *pr = json_array_get (wl, i);
        json_int_t pos = json_integer_value (json_array_get (pr, 0)),
                   k = json_integer_value (json_array_get (pr, 1));
        if (json_array_size (pr) != 2 || !json_is_integer (json_array_get (pr, 0)) ||
            !json_is_integer (json_array_get (pr, 1)) || pos < 0 || (size_t)pos >= n + nw ||
            k < 0 || e->pop[pos].warm) {
            snprintf (err, errlen, "searcher state: \"warm\"[%zu] is not [position, point] "
                                   "(resubmit the job)", i);
            free (ids);
            return -1;
        }
        e->pop[pos].warm = true;
        e->pop[pos].id = (uint64_t)k;
    }
    e->npop = n + nw;
    for (size_t i = 0; i < e->npop; i++)
        if (!e->pop[i].warm)
            e->pop[i].id = ids[at++];
    free (ids);
    e->restoring = true;
    return 0;
}

static void
s_fini (cgq_searcher_t *self)
{
    s_evo_t *e = self->impl;
    if (!e)
        return;
    for (size_t i = 0; i < e->npop; i++)
        s_member_free (&e->pop[i]);
    free (e->pop);
    for (size_t i = 0; i < e->nflight; i++)
        free (e->flight[i].x);
    free (e->flight);
    cgq_hset64_fini (&e->seen);
    cgq_genome_fini (&e->g);
    free (e);
    self->impl = NULL;
}

// s_settle ends a restore: members whose trial was not replayed are gone.
static void
s_settle (s_evo_t *e)
{
    if (!e->restoring)
        return;
    for (size_t i = e->npop; i-- > 0;)
        if (!e->pop[i].x)
            s_pop_remove (e, i);
    e->restoring = false;
}

static void
s_fly (s_evo_t *e, uint64_t id, const double *x)
{
    if (e->nflight == e->capflight) {
        e->capflight = e->capflight ? 2 * e->capflight : 16;
        e->flight = cgq_xrealloc (e->flight, e->capflight * sizeof *e->flight);
    }
    double *copy = cgq_xmalloc ((e->g.ngenes + 1) * sizeof *copy);
    memcpy (copy, x, e->g.ngenes * sizeof *copy);
    e->flight[e->nflight++] = (s_flight_t) {.id = id, .x = copy};
}

// s_land removes trial id from the flights and returns its genome (caller
// frees), or NULL if it was not in flight.
static double *
s_land (s_evo_t *e, uint64_t id)
{
    for (size_t i = 0; i < e->nflight; i++)
        if (e->flight[i].id == id) {
            double *x = e->flight[i].x;
            e->flight[i] = e->flight[--e->nflight]; // order does not matter: ids are unique
            return x;
        }
    return NULL;
}

// s_better is true when member a beats member b: the smaller constraint
// violation (a feasible member beats every infeasible one), then the single
// objective.
static bool
s_better (const s_evo_t *e, const s_member_t *a, const s_member_t *b)
{
    if (a->v != b->v)
        return a->v < b->v;
    return e->sense[0] * a->f[0] > e->sense[0] * b->f[0];
}

// s_rank computes NSGA-II's rank and crowding distance of every member.
static void
s_rank (const s_evo_t *e, int *rank, double *crowd)
{
    int n = (int) e->npop, m = e->m;
    double *pts = cgq_xmalloc ((size_t) (n * m + 1) * sizeof *pts);
    double *viol = cgq_xmalloc ((size_t) (n + 1) * sizeof *viol);
    for (int i = 0; i < n; i++) {
        memcpy (&pts[i * m], e->pop[i].f, (size_t) m * sizeof *pts);
        viol[i] = e->pop[i].v;
    }
    // Deb's constrained domination: feasible fronts first, then the
    // infeasible by total violation (all feasible without constraints).
    int nf = cgq_pareto_sort_constrained (pts, viol, n, m, e->sense, rank);
    free (viol);
    int *idx = cgq_xmalloc ((size_t) (n + 1) * sizeof *idx);
    double *d = cgq_xmalloc ((size_t) (n + 1) * sizeof *d);
    for (int r = 0; r < nf; r++) {
        int k = 0;
        for (int i = 0; i < n; i++)
            if (rank[i] == r)
                idx[k++] = i;
        cgq_pareto_crowding (pts, m, idx, k, d);
        for (int j = 0; j < k; j++)
            crowd[idx[j]] = d[j];
    }
    free (pts);
    free (idx);
    free (d);
}

// s_admit adds a successful trial to the population, and makes one leave if
// that is one too many.
static void
s_admit (s_evo_t *e, uint64_t id, bool warm, double *x, const double *f, double v)
{
    s_member_t *m = &e->pop[e->npop++];
    m->id = id;
    m->warm = warm;
    m->x = x;
    m->v = v;
    memcpy (m->f, f, (size_t) e->m * sizeof *f);
    if (e->npop <= e->population)
        return;
    if (!e->nsga2) {
        s_pop_remove (e, 0); // the oldest: aging, not the worst
        return;
    }
    int *rank = cgq_xmalloc (e->npop * sizeof *rank);
    double *crowd = cgq_xmalloc (e->npop * sizeof *crowd);
    s_rank (e, rank, crowd);
    size_t worst = 0;
    for (size_t i = 1; i < e->npop; i++)
        if (rank[i] > rank[worst] || (rank[i] == rank[worst] && crowd[i] <= crowd[worst]))
            worst = i; // ties: the later one leaves
    free (rank);
    free (crowd);
    s_pop_remove (e, worst);
}

static void
s_observe (cgq_searcher_t *self, uint64_t trial, const json_t *metrics, double value, bool ok)
{
    s_evo_t *e = self->impl;
    s_settle (e);
    double *x = s_land (e, trial);
    if (!x)
        return; // observed twice, or never in flight
    e->ended++;
    if (trial < s_initial (e))
        e->init_ended++;
    double f[CGQ_SPEC_MAX_OBJECTIVES];
    if (ok && cgq_search_objectives (self->spec, metrics, value, f))
        s_admit (e, trial, false, x, f, cgq_search_violation (self->spec, metrics));
    else
        free (x);
}

static int
s_replay (cgq_searcher_t *self, uint64_t trial, const json_t *params, const json_t *metrics,
          double value, cgq_replay_t outcome, char *err, size_t errlen)
{
    s_evo_t *e = self->impl;
    e->started = true;
    double *x = cgq_xmalloc ((e->g.ngenes + 1) * sizeof *x);
    if (cgq_genome_from_params (&e->g, params, x, err, errlen) < 0) {
        free (x);
        return -1;
    }
    cgq_genome_canon (&e->g, x);
    cgq_hset64_add (&e->seen, cgq_genome_hash (&e->g, x));
    if (outcome == CGQ_REPLAY_ACTIVE) {
        s_fly (e, trial, x);
        free (x);
        return 0;
    }
    e->ended++;
    if (trial < s_initial (e))
        e->init_ended++;
    double f[CGQ_SPEC_MAX_OBJECTIVES];
    for (size_t i = 0; i < e->npop; i++)
        if (e->pop[i].id == trial && !e->pop[i].warm && !e->pop[i].x) {
            if (outcome == CGQ_REPLAY_SUCCEEDED &&
                cgq_search_objectives (self->spec, metrics, value, f)) {
                e->pop[i].x = x;
                e->pop[i].v = cgq_search_violation (self->spec, metrics);
                memcpy (e->pop[i].f, f, (size_t) e->m * sizeof *f);
                return 0;
            }
            break;
        }
    free (x);
    return 0;
}

// s_tournament returns the index of the best of e->tournament distinct
// random members (ties: the one earlier in the population).
static size_t
s_tournament (const s_evo_t *e, cgq_rng_t *r)
{
    size_t n = e->npop, k = e->tournament < n ? e->tournament : n;
    size_t *idx = cgq_xmalloc (n * sizeof *idx);
    for (size_t i = 0; i < n; i++)
        idx[i] = i;
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < k; i++) {
        size_t j = i + (size_t) cgq_rng_below (r, n - i);
        size_t t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
        size_t c = idx[i];
        if (best == SIZE_MAX || s_better (e, &e->pop[c], &e->pop[best]) ||
            (!s_better (e, &e->pop[best], &e->pop[c]) && c < best))
            best = c;
    }
    free (idx);
    return best;
}

// s_binary returns the winner of an NSGA-II binary tournament.
static size_t
s_binary (const s_evo_t *e, cgq_rng_t *r, const int *rank, const double *crowd)
{
    size_t a = (size_t) cgq_rng_below (r, e->npop), b = (size_t) cgq_rng_below (r, e->npop);
    if (rank[b] < rank[a] || (rank[b] == rank[a] && crowd[b] > crowd[a]))
        return b;
    return a;
}

// s_sbx crosses real gene values a and b of [lo, hi] (simulated binary
// crossover, distribution index 15) and returns the first child's value.
static double
s_sbx (cgq_rng_t *r, double a, double b, double lo, double hi)
{
    const double eta = 15;
    double u = cgq_rng_unit (r);
    double beta = u <= 0.5 ? pow (2 * u, 1 / (eta + 1)) : pow (1 / (2 * (1 - u)), 1 / (eta + 1));
    double c = 0.5 * ((1 + beta) * a + (1 - beta) * b);
    if (cgq_rng_below (r, 2))
        c = 0.5 * ((1 - beta) * a + (1 + beta) * b);
    return c < lo ? lo : c > hi ? hi : c;
}

// s_poly is polynomial mutation (distribution index 20) of real value v in [lo, hi].
static double
s_poly (cgq_rng_t *r, double v, double lo, double hi)
{
    const double eta = 20;
    double span = hi - lo, u = cgq_rng_unit (r), d;
    if (span <= 0)
        return v;
    double d1 = (v - lo) / span, d2 = (hi - v) / span;
    if (u < 0.5)
        d = pow (2 * u + (1 - 2 * u) * pow (1 - d1, eta + 1), 1 / (eta + 1)) - 1;
    else
        d = 1 - pow (2 * (1 - u) + 2 * (u - 0.5) * pow (1 - d2, eta + 1), 1 / (eta + 1));
    v += d * span;
    return v < lo ? lo : v > hi ? hi : v;
}

static void
s_nsga2_child (const s_evo_t *e, const cgq_spec_t *spec, cgq_rng_t *r, double *x)
{
    int *rank = cgq_xmalloc (e->npop * sizeof *rank);
    double *crowd = cgq_xmalloc (e->npop * sizeof *crowd);
    s_rank (e, rank, crowd);
    const double *p1 = e->pop[s_binary (e, r, rank, crowd)].x;
    const double *p2 = e->pop[s_binary (e, r, rank, crowd)].x;
    free (rank);
    free (crowd);
    const cgq_genome_t *g = &e->g;
    double pc = spec->search.crossover > 0 ? spec->search.crossover : 0.9;
    bool cross = cgq_rng_unit (r) < pc;
    for (size_t i = 0; i < g->ngenes; i++) {
        const cgq_gene_t *gene = &g->genes[i];
        bool real = gene->kind == CGQ_GENE_REAL || gene->kind == CGQ_GENE_LOG;
        x[i] = p1[i];
        if (cross && cgq_rng_below (r, 2))
            x[i] = real ? s_sbx (r, p1[i], p2[i], gene->lo, gene->hi) : p2[i];
    }
    double pm = spec->search.mutation > 0 ? spec->search.mutation : 1.0 / (double) g->ngenes;
    for (size_t i = 0; i < g->ngenes; i++) {
        if (!(cgq_rng_unit (r) < pm))
            continue;
        const cgq_gene_t *gene = &g->genes[i];
        if (gene->kind == CGQ_GENE_REAL || gene->kind == CGQ_GENE_LOG)
            x[i] = s_poly (r, x[i], gene->lo, gene->hi);
        else
            cgq_genome_mutate_gene (g, r, x, i);
    }
    cgq_genome_canon (g, x);
}

static bool
s_done (const cgq_searcher_t *self)
{
    return self->suggested >= self->total;
}

static json_t *
s_suggest (cgq_searcher_t *self)
{
    s_evo_t *e = self->impl;
    s_settle (e);
    e->started = true;
    if (s_done (self))
        return NULL;
    uint64_t id = self->suggested, first = s_initial (e);
    bool random = id < first || e->npop == 0;
    if (id >= first && e->nflight > 0) {
        // Breed only from a population that has seen every random trial,
        // and with at most batch children in flight.
        uint64_t initial = first < self->total ? first : self->total;
        if (e->init_ended < initial || e->nflight >= e->batch)
            return NULL;
    }
    cgq_rng_t r;
    cgq_rng_seed (&r, self->spec->search.seed, id, 1);
    double *x = cgq_xmalloc ((e->g.ngenes + 1) * sizeof *x);
    size_t parent = random || e->nsga2 ? 0 : s_tournament (e, &r);
    for (int t = 0; t < S_TRIES; t++) {
        if (random)
            cgq_genome_random (&e->g, &r, x);
        else if (e->nsga2) {
            s_nsga2_child (e, self->spec, &r, x);
            for (int k = 0; k < t / 4; k++) // a copy of a parent: move it away
                cgq_genome_mutate (&e->g, &r, x);
        }
        else {
            memcpy (x, e->pop[parent].x, e->g.ngenes * sizeof *x);
            for (int k = 0; k <= t / 8; k++) // further out when the neighbours are taken
                cgq_genome_mutate (&e->g, &r, x);
        }
        if (!cgq_hset64_has (&e->seen, cgq_genome_hash (&e->g, x)))
            break;
    }
    cgq_hset64_add (&e->seen, cgq_genome_hash (&e->g, x));
    s_fly (e, id, x);
    json_t *params = cgq_genome_params (&e->g, x);
    free (x);
    return params;
}

static void
s_save (const cgq_searcher_t *self, json_t *state)
{
    const s_evo_t *e = self->impl;
    json_object_set_new (state, "next", json_integer ((json_int_t) self->suggested));
    json_t *ids = json_array (), *warm = json_array ();
    for (size_t i = 0; i < e->npop; i++)
        if (e->pop[i].warm)
            json_array_append_new (warm, json_pack ("[I, I]", (json_int_t) i,
                                                    (json_int_t) e->pop[i].id));
        else
            json_array_append_new (ids, json_integer ((json_int_t) e->pop[i].id));
    json_object_set_new (state, "population", ids);
    if (json_array_size (warm))
        json_object_set_new (state, "warm", warm);
    else
        json_decref (warm);
}

// s_warm adds warm-start point nwarm to the population (or, restoring, fills
// the saved member it was); it must give every param of the space and the
// objectives; other params are ignored.
static int
s_warm (cgq_searcher_t *self, const json_t *params, const json_t *metrics, char *err,
        size_t errlen)
{
    s_evo_t *e = self->impl;
    const cgq_spec_t *spec = self->spec;
    if (e->started) {
        snprintf (err, errlen, "warm-start points come before the job's first trial");
        return -1;
    }
    double f[CGQ_SPEC_MAX_OBJECTIVES];
    if (!cgq_search_objectives (spec, metrics, NAN, f)) {
        snprintf (err, errlen, "its metrics lack the objective%s (or one is not a number)",
                  e->m > 1 ? "s" : "");
        return -1;
    }
    for (size_t p = 0; p < spec->nparams; p++)
        if (spec->params[p].name && e->g.count[p] &&
            !json_object_get (params, spec->params[p].name)) {
            snprintf (err, errlen,
                      "it has no value for param %s, and algorithm %s breeds from whole points "
                      "(give it one, or use algorithm: tpe, which leaves it out)",
                      spec->params[p].name, self->algorithm);
            return -1;
        }
    double *x = cgq_xmalloc ((e->g.ngenes + 1) * sizeof *x);
    cgq_rng_t r;
    cgq_rng_seed (&r, 0, 0, 0);
    cgq_genome_random (&e->g, &r, x); // for the constants it may lack
    json_t *only = cgq_genome_params (&e->g, x);
    for (size_t p = 0; p < spec->nparams; p++) {
        json_t *v = spec->params[p].name ? json_object_get (params, spec->params[p].name) : NULL;
        if (v)
            json_object_set (only, spec->params[p].name, v);
    }
    int rc = cgq_genome_from_params (&e->g, only, x, err, errlen);
    json_decref (only);
    if (rc < 0) {
        free (x);
        return -1;
    }
    cgq_genome_canon (&e->g, x);
    cgq_hset64_add (&e->seen, cgq_genome_hash (&e->g, x));
    uint64_t k = e->nwarm++;
    double v = cgq_search_violation (spec, metrics);
    if (!e->restoring) {
        s_admit (e, k, true, x, f, v);
        return 0;
    }
    for (size_t i = 0; i < e->npop; i++)
        if (e->pop[i].warm && e->pop[i].id == k && !e->pop[i].x) {
            e->pop[i].x = x;
            e->pop[i].v = v;
            memcpy (e->pop[i].f, f, (size_t) e->m * sizeof *f);
            return 0;
        }
    free (x); // it had left the population
    return 0;
}

static size_t
s_footprint (const cgq_searcher_t *self)
{
    const s_evo_t *e = self->impl;
    size_t genome = e->g.ngenes * sizeof (double);
    return sizeof *e + e->g.ngenes * sizeof (cgq_gene_t) + (e->population + 1) * sizeof *e->pop +
           e->npop * genome + e->capflight * sizeof *e->flight + e->nflight * genome +
           e->seen.cap * sizeof (uint64_t);
}

const cgq_search_ops_t cgq_search_evolution_ops = {
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

const cgq_search_ops_t cgq_search_nsga2_ops = {
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
