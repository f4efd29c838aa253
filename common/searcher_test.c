// searcher_test: the searchers driven as the coordinator drives them: a few
// suggestions in flight, results observed in a shuffled order, now and then a
// failure. Each searcher that learns beats a baseline on a function with a
// known optimum; the same seed gives the same suggestions; a restart from the
// saved state plus a replay of the trials continues the very same search.
// The bench at the end prints the cost of suggest() and the memory held.
#include <math.h>
#include <malloc.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "json.h"
#include "pareto.h"
#include "searcher.h"
#include "space.h"
#include "spec.h"
#include "util.h"

// --- the driver -------------------------------------------------------------------

typedef void (*s_fn_t) (const json_t *params, double *out);

typedef struct {
    const cgq_spec_t *spec;
    s_fn_t fn;               // the objectives of a point
    size_t inflight;         // suggestions kept outstanding
    uint64_t shuffle;        // seeds the order in which results arrive
    double fail;             // share of trials that fail
    uint64_t restart_at;     // after this many results: save, destroy, new, replay (0: never)
    uint64_t restart_every;  // then again every so many results (0: once)
    // what happened, by trial id
    json_t *params;          // array: the suggestions in order
    json_t *metrics;         // array: the result of each trial (null: failed or not finished)
    bool *finished;
    size_t cap;
    size_t max_state;        // the largest saved state, in bytes
    uint64_t restarts;
    const char *warm;        // warm-start points fed to every new searcher (NULL: none)
} s_run_t;

static uint64_t
s_next (uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double
s_unit (uint64_t *s)
{
    return (double) (s_next (s) >> 11) * 0x1.0p-53;
}

static cgq_spec_t *
s_spec (const char *yaml)
{
    char err[1024];
    cgq_spec_t *s = cgq_spec_parse (yaml, strlen (yaml), "t.yaml", err, sizeof err);
    if (!s)
        fail_msg ("%s", err);
    return s;
}

// s_restart is what the coordinator does after a crash: a new searcher from
// the saved state (through its JSON text), then every trial replayed.
static cgq_searcher_t *
s_restart (s_run_t *r, cgq_searcher_t *se)
{
    json_t *st = cgq_searcher_save (se);
    char *text = cgq_json_dumps (st);
    json_decref (st);
    if (strlen (text) > r->max_state)
        r->max_state = strlen (text);
    uint64_t suggested = cgq_searcher_suggested (se);
    cgq_searcher_destroy (&se);
    json_t *loaded = json_loads (text, 0, NULL);
    free (text);
    char err[512];
    se = cgq_searcher_new (r->spec, loaded, err, sizeof err);
    json_decref (loaded);
    if (!se)
        fail_msg ("restart: %s", err);
    // As recovery: the warm points again, before the replay.
    if (r->warm && cgq_searcher_warm_json (se, r->warm, err, sizeof err) < 0)
        fail_msg ("restart: warm: %s", err);
    assert_int_equal (cgq_searcher_suggested (se), suggested);
    for (uint64_t id = 0; id < suggested; id++) {
        // Replayed from what Redis keeps: the params and result as text.
        char *pt = cgq_json_dumps (json_array_get (r->params, id));
        json_t *p = json_loads (pt, 0, NULL);
        free (pt);
        json_t *m = json_array_get (r->metrics, id);
        double value = NAN;
        if (json_is_object (m) && r->spec->nobjectives == 1)
            cgq_spec_objective_value (r->spec, m, &value, NULL, 0);
        cgq_replay_t how = !r->finished[id]     ? CGQ_REPLAY_ACTIVE
                           : json_is_object (m) ? CGQ_REPLAY_SUCCEEDED
                                                : CGQ_REPLAY_FAILED;
        if (cgq_searcher_replay (se, id, p, json_is_object (m) ? m : NULL, value, how, err,
                                 sizeof err) < 0)
            fail_msg ("replay %llu: %s", (unsigned long long) id, err);
        json_decref (p);
    }
    r->restarts++;
    return se;
}

// s_drive runs a whole search and fills r.
static void
s_drive (s_run_t *r)
{
    char err[512];
    cgq_searcher_t *se = cgq_searcher_new (r->spec, NULL, err, sizeof err);
    if (!se)
        fail_msg ("%s", err);
    if (r->warm && cgq_searcher_warm_json (se, r->warm, err, sizeof err) < 0)
        fail_msg ("warm: %s", err);
    r->params = json_array ();
    r->metrics = json_array ();
    r->cap = cgq_searcher_total (se) + 1;
    r->finished = cgq_xcalloc (r->cap, sizeof *r->finished);
    uint64_t *out = cgq_xcalloc (r->inflight + 1, sizeof *out);
    size_t nout = 0;
    uint64_t rng = r->shuffle, results = 0;
    size_t nobj = r->spec->nobjectives;
    for (;;) {
        while (nout < r->inflight) {
            uint64_t id;
            json_t *p = cgq_searcher_suggest (se, &id);
            if (!p)
                break;
            assert_int_equal (id, json_array_size (r->params));
            json_array_append_new (r->params, p);
            json_array_append_new (r->metrics, json_null ());
            out[nout++] = id;
        }
        if (nout == 0) {
            assert_true (cgq_searcher_done (se)); // waiting with nothing in flight: a stall
            break;
        }
        size_t k = (size_t) (s_next (&rng) % nout);
        uint64_t id = out[k];
        out[k] = out[--nout];
        bool ok = s_unit (&rng) >= r->fail;
        json_t *m = NULL;
        double value = NAN;
        if (ok) {
            double f[CGQ_SPEC_MAX_OBJECTIVES];
            for (size_t i = 0; i < CGQ_SPEC_MAX_OBJECTIVES; i++)
                f[i] = NAN; // beyond the objectives: more metrics, where a function sets them
            r->fn (json_array_get (r->params, id), f);
            m = json_object ();
            for (size_t i = 0; i < CGQ_SPEC_MAX_OBJECTIVES; i++) {
                if (i >= nobj && !isfinite (f[i]))
                    continue;
                char name[32];
                snprintf (name, sizeof name, "f%zu", i);
                json_object_set_new (m, name, json_real (f[i]));
            }
            if (nobj == 1)
                assert_int_equal (cgq_spec_objective_value (r->spec, m, &value, err, sizeof err),
                                  0);
            json_array_set (r->metrics, id, m);
        }
        r->finished[id] = true;
        cgq_searcher_observe (se, id, m, value, ok);
        json_decref (m);
        results++;
        if (r->restart_at && (results == r->restart_at ||
                              (r->restart_every && results > r->restart_at &&
                               (results - r->restart_at) % r->restart_every == 0)))
            se = s_restart (r, se);
    }
    json_t *st = cgq_searcher_save (se);
    char *text = cgq_json_dumps (st);
    if (strlen (text) > r->max_state)
        r->max_state = strlen (text);
    free (text);
    json_decref (st);
    cgq_searcher_destroy (&se);
    free (out);
}

static void
s_run_fini (s_run_t *r)
{
    json_decref (r->params);
    json_decref (r->metrics);
    free (r->finished);
    r->params = r->metrics = NULL;
    r->finished = NULL;
}

// s_best is the best f0 among the trials [from, to) that succeeded (sense +1
// max, -1 min); *mean (may be NULL) their mean.
static double
s_best (const s_run_t *r, size_t from, size_t to, int sense, double *mean)
{
    double best = sense > 0 ? -INFINITY : INFINITY, sum = 0;
    size_t n = 0;
    for (size_t i = from; i < to && i < json_array_size (r->metrics); i++) {
        json_t *m = json_array_get (r->metrics, i);
        if (!json_is_object (m))
            continue;
        double v = json_number_value (json_object_get (m, "f0"));
        sum += v, n++;
        if (sense * v > sense * best)
            best = v;
    }
    if (mean)
        *mean = n ? sum / (double) n : NAN;
    return best;
}

static bool
s_same_params (const s_run_t *a, const s_run_t *b)
{
    char *x = cgq_json_dumps (a->params), *y = cgq_json_dumps (b->params);
    bool same = !strcmp (x, y);
    free (x);
    free (y);
    return same;
}

// --- functions with a known optimum ---------------------------------------------

static double
s_num (const json_t *params, const char *name)
{
    return json_number_value (json_object_get (params, name));
}

// Branin on [-5, 10] x [0, 15]: minimum 0.397887 at three points.
static void
s_branin (const json_t *params, double *out)
{
    double x1 = s_num (params, "x1"), x2 = s_num (params, "x2");
    double b = 5.1 / (4 * M_PI * M_PI), c = 5 / M_PI, t = 1 / (8 * M_PI);
    out[0] = pow (x2 - b * x1 * x1 + c * x1 - 6, 2) + 10 * (1 - t) * cos (x1) + 10;
}

// Branin with a second metric for a constraint, f1: the squared distance
// from the box's centre (2.5, 7.5). With "f1 <= 9" the feasible region is
// the disc of radius 3 there, 12.6% of the box, which holds none of Branin's
// three minima (the nearest, (pi, 2.275), is 5.3 away): the constrained
// optimum lies on the circle.
static void
s_branin_disc (const json_t *params, double *out)
{
    s_branin (params, out);
    double x1 = s_num (params, "x1"), x2 = s_num (params, "x2");
    out[1] = (x1 - 2.5) * (x1 - 2.5) + (x2 - 7.5) * (x2 - 7.5);
}

// A mixed space whose best point is known: depths all 7, width 13, a = 0.3,
// act = relu, ops all "b"; f0 = 0 there and negative elsewhere (maximise).
static void
s_mixed (const json_t *params, double *out)
{
    double f = 0;
    const json_t *d = json_object_get (params, "depths");
    for (size_t i = 0; i < json_array_size (d); i++)
        f -= pow (json_number_value (json_array_get (d, i)) - 7, 2);
    f -= pow (s_num (params, "width") - 13, 2) / 4;
    f -= 10 * pow (s_num (params, "a") - 0.3, 2);
    f -= strcmp (json_string_value (json_object_get (params, "act")), "relu") ? 3 : 0;
    const json_t *map = json_object_get (json_object_get (params, "ops"), "map");
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *) map, k, v)
        f -= strcmp (json_string_value (v), "b") ? 1 : 0;
    out[0] = f;
}

#define S_ZDT_N 8

// ZDT1 with S_ZDT_N variables in [0, 1]: both objectives minimised; the
// Pareto front is f2 = 1 - sqrt(f1), f1 in [0, 1] (all x2.. = 0).
static void
s_zdt1 (const json_t *params, double *out)
{
    double x[S_ZDT_N], g = 0;
    for (int i = 0; i < S_ZDT_N; i++) {
        char name[32];
        snprintf (name, sizeof name, "x%d", i);
        x[i] = s_num (params, name);
        if (i)
            g += x[i];
    }
    g = 1 + 9 * g / (S_ZDT_N - 1);
    out[0] = x[0];
    out[1] = g * (1 - sqrt (x[0] / g));
}

// s_hv is the hypervolume of the successful trials' (f0, f1) against ref.
static double
s_hv (const s_run_t *r, const double *ref)
{
    size_t n = json_array_size (r->metrics), k = 0;
    double *pts = cgq_xcalloc (2 * n + 2, sizeof *pts);
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get (r->metrics, i);
        if (!json_is_object (m))
            continue;
        pts[2 * k] = json_number_value (json_object_get (m, "f0"));
        pts[2 * k + 1] = json_number_value (json_object_get (m, "f1"));
        k++;
    }
    double hv = 0;
    assert_int_equal (cgq_pareto_hypervolume (pts, (int) k, 2, NULL, ref, &hv), 0);
    free (pts);
    return hv;
}

#define TRIAL "trial: {kind: noop}\n"

static const char *s_mixed_space = "space:\n"
                                   "  depths: {repeat: 5, of: {choice: [2, 3, 4, 5, 6, 7, 8, 9]}}\n"
                                   "  width: {randint: [0, 20]}\n"
                                   "  a: {uniform: [0, 1]}\n"
                                   "  act: {choice: [relu, gelu, tanh]}\n"
                                   "  ops: {assignment: {items: [c1, c2, p1], choices: [a, b]}}\n"
                                   "  tag: fixed\n";

// --- tests ---------------------------------------------------------------------

// Regularized evolution, 50 random points then 200 children (seed 001's
// 50 + 4 x 50), improves on its random start, in the best and on average.
static void
t_evolution_improves (void **state)
{
    double gain_best = 0, gain_mean = 0;
    for (int seed = 1; seed <= 3; seed++) {
        char yaml[2048];
        snprintf (yaml, sizeof yaml,
                  "%ssearch: {algorithm: evolution, samples: 250, initial: 50, batch: 50, "
                  "seed: %d}\nobjective: {metric: f0, mode: max}\n" TRIAL,
                  s_mixed_space, seed);
        cgq_spec_t *spec = s_spec (yaml);
        s_run_t r = {.spec = spec, .fn = s_mixed, .inflight = 8, .shuffle = (uint64_t) seed,
                     .fail = 0.05};
        s_drive (&r);
        assert_int_equal (json_array_size (r.params), 250);
        double mean0, mean1;
        double best0 = s_best (&r, 0, 50, 1, &mean0);
        double best1 = s_best (&r, 0, 250, 1, NULL);
        s_best (&r, 200, 250, 1, &mean1);
        printf ("  evolution seed %d: random 50 best %.2f mean %.2f; after 250 best %.2f, last "
                "50 mean %.2f\n",
                seed, best0, mean0, best1, mean1);
        assert_true (best1 > best0);
        assert_true (mean1 > mean0);
        gain_best += best1 - best0;
        gain_mean += mean1 - mean0;
        // Constants pass through; no point is suggested twice (the space
        // has 8^5 x 21 x ... points).
        json_t *p0 = json_array_get (r.params, 0);
        assert_string_equal (json_string_value (json_object_get (p0, "tag")), "fixed");
        json_t *seen = json_object ();
        for (size_t i = 0; i < json_array_size (r.params); i++) {
            char *t = cgq_json_dumps (json_array_get (r.params, i));
            assert_null (json_object_get (seen, t));
            json_object_set_new (seen, t, json_true ());
            free (t);
        }
        json_decref (seen);
        s_run_fini (&r);
        cgq_spec_destroy (&spec);
    }
    assert_true (gain_best > 0 && gain_mean > 0);
}

// Bayesian optimisation on Branin beats random search at the same budget,
// on average over 5 seeds.
static void
t_bayes_beats_random (void **state)
{
    double sum_bayes = 0, sum_random = 0;
    const int budget = 30;
    for (int seed = 1; seed <= 5; seed++) {
        for (int alg = 0; alg < 2; alg++) {
            char yaml[1024];
            snprintf (yaml, sizeof yaml,
                      "space:\n  x1: {uniform: [-5, 10]}\n  x2: {uniform: [0, 15]}\n"
                      "search: {algorithm: %s, samples: %d, seed: %d}\n"
                      "objective: {metric: f0, mode: min}\n" TRIAL,
                      alg ? "random" : "bayes", budget, seed);
            cgq_spec_t *spec = s_spec (yaml);
            s_run_t r = {.spec = spec, .fn = s_branin, .inflight = 4, .shuffle = (uint64_t) seed};
            s_drive (&r);
            assert_int_equal (json_array_size (r.params), budget);
            double best = s_best (&r, 0, (size_t) budget, -1, NULL);
            printf ("  branin seed %d %-6s best %.4f (optimum 0.3979)\n", seed,
                    alg ? "random" : "bayes", best);
            *(alg ? &sum_random : &sum_bayes) += best;
            s_run_fini (&r);
            cgq_spec_destroy (&spec);
        }
    }
    printf ("  branin mean best over 5 seeds: bayes %.4f, random %.4f\n", sum_bayes / 5,
            sum_random / 5);
    assert_true (sum_bayes < sum_random);
    // And near the optimum: random search's mean best at this budget is
    // several times further away.
    assert_true (sum_bayes / 5 < 0.3979 + 0.5);
}

// NSGA-II on ZDT1 (8 variables) reaches most of the true front's
// hypervolume. With the reference point (1.1, 1.1) the true front
// f2 = 1 - sqrt(f1) dominates 0.1 + 2/3 (f1 in [0, 1]) + 0.11 (f1 in
// [1, 1.1]) = 0.87667. Random search at the same budget stays far from it
// (g = 1 + 9 mean(x2..) is about 5.5 for a random point, so its f2 is large);
// we ask for 95% of the true volume, which a front within about 0.02 of the
// true one reaches, and for clearly more than random search gets.
static void
t_nsga2_zdt1 (void **state)
{
    const double ref[2] = {1.1, 1.1}, truth = 0.1 + 2.0 / 3 + 0.11;
    for (int alg = 0; alg < 2; alg++) {
        cgq_buf_t y;
        cgq_buf_init (&y);
        cgq_buf_puts (&y, "space:\n");
        for (int i = 0; i < S_ZDT_N; i++)
            cgq_buf_printf (&y, "  x%d: {uniform: [0, 1]}\n", i);
        cgq_buf_printf (&y, "search: {algorithm: %s, samples: 3000, seed: 7%s}\n",
                        alg ? "random" : "nsga2", alg ? "" : ", population: 40");
        cgq_buf_puts (&y, "objectives: [{metric: f0, mode: min}, {metric: f1, mode: min}]\n" TRIAL);
        cgq_spec_t *spec = s_spec (y.data);
        cgq_buf_fini (&y);
        s_run_t r = {.spec = spec, .fn = s_zdt1, .inflight = 4, .shuffle = 3, .fail = 0.02};
        s_drive (&r);
        double hv = s_hv (&r, ref);
        printf ("  zdt1 %-6s hypervolume %.4f of %.4f (%.1f%%)\n", alg ? "random" : "nsga2", hv,
                truth, 100 * hv / truth);
        if (alg == 0)
            assert_true (hv >= 0.95 * truth);
        else
            assert_true (hv < 0.9 * truth);
        s_run_fini (&r);
        cgq_spec_destroy (&spec);
    }
}


// nsga2 with constraints ranks by Deb's constrained domination: two
// infeasible trials that dominate both feasible ones in the objectives are
// the ones that leave a population of 2, and the one of the larger
// violation first; the same after a restart (replayed from the metrics).
static void
t_nsga2_constrained (void **state)
{
    (void) state;
    cgq_spec_t *spec = s_spec ("space: {x: {uniform: [0, 1]}}\n"
                               "search: {algorithm: nsga2, samples: 10, population: 2, "
                               "initial: 4}\n"
                               "objectives: [{metric: a, mode: min}, {metric: b, mode: min}]\n"
                               "constraints: [\"c <= 0\"]\n" TRIAL);
    char err[256];
    cgq_searcher_t *se = cgq_searcher_new (spec, NULL, err, sizeof err);
    assert_non_null (se);
    json_t *params[4];
    for (int i = 0; i < 4; i++) {
        uint64_t id;
        params[i] = cgq_searcher_suggest (se, &id);
        assert_non_null (params[i]);
    }
    const char *res[4] = {"{\"a\": 1, \"b\": 1, \"c\": 0}", "{\"a\": 2, \"b\": 2, \"c\": -1}",
                          "{\"a\": 0, \"b\": 0, \"c\": 2}", "{\"a\": -1, \"b\": -1, \"c\": 1}"};
    json_t *m[4];
    for (int i = 0; i < 4; i++) {
        m[i] = json_loads (res[i], 0, NULL);
        cgq_searcher_observe (se, (uint64_t) i, m[i], NAN, true);
    }
    json_t *st = cgq_searcher_save (se);
    char *text = cgq_json_dumps (json_object_get (st, "population"));
    assert_string_equal (text, "[0,1]");
    free (text);
    // A restart: the saved population and the replayed metrics agree.
    cgq_searcher_t *again = cgq_searcher_new (spec, st, err, sizeof err);
    assert_non_null (again);
    for (int i = 0; i < 4; i++)
        assert_int_equal (cgq_searcher_replay (again, (uint64_t) i, params[i], m[i], NAN,
                                               CGQ_REPLAY_SUCCEEDED, err, sizeof err),
                          0);
    uint64_t id1, id2;
    json_t *p1 = cgq_searcher_suggest (se, &id1), *p2 = cgq_searcher_suggest (again, &id2);
    assert_true (id1 == 4 && id2 == 4 && json_equal (p1, p2));
    json_decref (p1);
    json_decref (p2);
    json_decref (st);
    for (int i = 0; i < 4; i++) {
        json_decref (params[i]);
        json_decref (m[i]);
    }
    cgq_searcher_destroy (&se);
    cgq_searcher_destroy (&again);
    cgq_spec_destroy (&spec);
}


// f0 = x: an objective whose best point (x = 1) the constraint f0 <= 0.5
// forbids.
static void
s_ident (const json_t *params, double *out)
{
    out[0] = s_num (params, "x");
}

// tpe, bayes and evolution with a constraint that cuts off the best values:
// infeasible trials are never taken for good ones, so the search stays in
// the feasible half instead of climbing to x = 1 (which it does without the
// constraint, the control).
static void
t_constrained_learners (void **state)
{
    (void) state;
    const char *algs[] = {"tpe", "bayes", "evolution", "cmaes"};
    for (size_t a = 0; a < 4; a++)
        for (int constrained = 1; constrained >= 0; constrained--) {
            char yaml[1024];
            snprintf (yaml, sizeof yaml,
                      "space: {x: {uniform: [0, 1]}}\n"
                      "search: {algorithm: %s, samples: 60, seed: 3%s}\n"
                      "objective: {metric: f0, mode: max}\n%s" TRIAL,
                      algs[a],
                      a == 0   ? ", initial: 10"
                      : a == 1 ? ", initial: 10, candidates: 200"
                      : a == 2 ? ", initial: 10, batch: 4"
                               : "",
                      constrained ? "constraints: [\"f0 <= 0.5\"]\n" : "");
            cgq_spec_t *spec = s_spec (yaml);
            s_run_t r = {.spec = spec, .fn = s_ident, .inflight = 2, .shuffle = 1};
            s_drive (&r);
            size_t n = json_array_size (r.params), feasible = 0;
            for (size_t i = n - 30; i < n; i++)
                feasible += s_num (json_array_get (r.params, i), "x") <= 0.5;
            printf ("  %-9s %s: %zu of the last 30 trials feasible\n", algs[a],
                    constrained ? "constrained" : "control    ", feasible);
            if (constrained)
                assert_true (feasible >= 14); // 17, 19, 22 (the best point is on the boundary)
            else
                assert_true (feasible <= 10); // 3, 8, 0
            s_run_fini (&r);
            cgq_spec_destroy (&spec);
        }
}

extern bool cgq_search_bayes_penalty; // search_bayes.c: the earlier rule, for comparison

// bayes under constraints models the probability of feasibility (Gardner et
// al. 2014): on Branin restricted to a disc that holds none of its minima,
// over 5 seeds at 40 trials (8 random), its suggestions after the random
// start are feasible far more often than random search's and than the
// earlier rule's (infeasible trials fitted at the worst feasible value), and
// its best feasible value is as good as that rule's (lower is better).
static void
t_bayes_pof (void **state)
{
    (void) state;
    const char *names[] = {"pof", "penalty", "random"};
    const int budget = 40, initial = 8, nseeds = 5;
    double share[3] = {0}, best[3] = {0};
    for (int m = 0; m < 3; m++)
        for (int seed = 1; seed <= nseeds; seed++) {
            char yaml[1024];
            snprintf (yaml, sizeof yaml,
                      "space:\n  x1: {uniform: [-5, 10]}\n  x2: {uniform: [0, 15]}\n"
                      "search: {algorithm: %s, samples: %d, initial: %d, candidates: 500, "
                      "seed: %d}\nobjective: {metric: f0, mode: min}\n"
                      "constraints: [\"f1 <= 9\"]\n" TRIAL,
                      m == 2 ? "random" : "bayes", budget, initial, seed);
            if (m == 2) // random takes neither initial nor candidates
                snprintf (yaml, sizeof yaml,
                          "space:\n  x1: {uniform: [-5, 10]}\n  x2: {uniform: [0, 15]}\n"
                          "search: {algorithm: random, samples: %d, seed: %d}\n"
                          "objective: {metric: f0, mode: min}\nconstraints: [\"f1 <= 9\"]\n" TRIAL,
                          budget, seed);
            cgq_search_bayes_penalty = m == 1;
            cgq_spec_t *spec = s_spec (yaml);
            s_run_t r = {.spec = spec, .fn = s_branin_disc, .inflight = 2,
                         .shuffle = (uint64_t) seed};
            s_drive (&r);
            cgq_search_bayes_penalty = false;
            assert_int_equal (json_array_size (r.params), budget);
            int feasible = 0;
            double bf = INFINITY;
            for (int i = 0; i < budget; i++) {
                const json_t *mt = json_array_get (r.metrics, (size_t) i);
                if (json_number_value (json_object_get (mt, "f1")) > 9)
                    continue;
                bf = fmin (bf, json_number_value (json_object_get (mt, "f0")));
                feasible += i >= initial;
            }
            // A seed with no feasible trial at all counts as the worst
            // feasible value (the disc's: Branin at most ~ 60 there).
            if (!isfinite (bf))
                bf = 100;
            printf ("  disc seed %d %-7s %2d of %d after the start feasible, best feasible %.4f\n",
                    seed, names[m], feasible, budget - initial, bf);
            share[m] += (double) feasible / (budget - initial) / nseeds;
            best[m] += bf / nseeds;
            s_run_fini (&r);
            cgq_spec_destroy (&spec);
        }
    for (int m = 0; m < 3; m++)
        printf ("  disc mean over %d seeds: %-7s feasible share %.2f, best feasible %.4f\n",
                nseeds, names[m], share[m], best[m]);
    assert_true (share[0] > share[1] + 0.15);
    assert_true (share[0] > share[2] + 0.3);
    assert_true (best[0] <= best[1] + 0.05);
}

// While no trial is feasible, bayes suggests by the probability of
// feasibility alone and so finds a small feasible region: a disc of radius
// 1.5 (3.1% of the box) that the 5 random trials of each seed miss. Every
// seed reaches it, and it then stays there far more than random search.
static void
t_bayes_pof_finds (void **state)
{
    (void) state;
    const int budget = 30, nseeds = 4;
    int total[2] = {0};
    for (int m = 0; m < 2; m++)
        for (int seed = 1; seed <= nseeds; seed++) {
            char yaml[1024];
            snprintf (yaml, sizeof yaml,
                      "space:\n  x1: {uniform: [-5, 10]}\n  x2: {uniform: [0, 15]}\n"
                      "search: {algorithm: %s, samples: %d, seed: %d%s}\n"
                      "objective: {metric: f0, mode: min}\nconstraints: [\"f1 <= 2.25\"]\n" TRIAL,
                      m ? "random" : "bayes", budget, seed,
                      m ? "" : ", initial: 5, candidates: 500");
            cgq_spec_t *spec = s_spec (yaml);
            s_run_t r = {.spec = spec, .fn = s_branin_disc, .inflight = 2,
                         .shuffle = (uint64_t) seed};
            s_drive (&r);
            int feasible = 0, first = -1;
            for (int i = 0; i < budget; i++)
                if (json_number_value (json_object_get (json_array_get (r.metrics, (size_t) i),
                                                        "f1")) <= 2.25) {
                    feasible++;
                    if (first < 0)
                        first = i;
                }
            printf ("  small disc seed %d %-6s %2d of %d feasible, the first at trial %d\n", seed,
                    m ? "random" : "bayes", feasible, budget, first);
            total[m] += feasible;
            if (!m)
                assert_true (first >= 5); // the random start missed it: the test means something
            if (!m)
                assert_true (first >= 0);
            s_run_fini (&r);
            cgq_spec_destroy (&spec);
        }
    printf ("  small disc feasible trials over %d seeds: bayes %d, random %d\n", nseeds, total[0],
            total[1]);
    assert_true (total[0] > 4 * total[1] + 10);
}

static const char *s_zdt_spec (char *buf, size_t len, const char *alg, int seed);

static const char *
s_zdt_spec (char *buf, size_t len, const char *alg, int seed)
{
    cgq_buf_t y;
    cgq_buf_init (&y);
    cgq_buf_puts (&y, "space:\n");
    for (int i = 0; i < S_ZDT_N; i++)
        cgq_buf_printf (&y, "  x%d: {uniform: [0, 1]}\n", i);
    cgq_buf_printf (&y, "search: {algorithm: %s, samples: 300, seed: %d, population: 20}\n", alg,
                    seed);
    cgq_buf_puts (&y, "objectives: [{metric: f0, mode: min}, {metric: f1, mode: min}]\n" TRIAL);
    snprintf (buf, len, "%s", y.data);
    cgq_buf_fini (&y);
    return buf;
}

// The specs the reproducibility and restart tests run, one per searcher.
static void
s_case (int i, char *yaml, size_t len, s_fn_t *fn, int seed)
{
    switch (i) {
    case 0:
        snprintf (yaml, len,
                  "%ssearch: {algorithm: evolution, samples: 200, population: 20, initial: 20, "
                  "batch: 10, seed: %d}\nobjective: {metric: f0, mode: max}\n" TRIAL,
                  s_mixed_space, seed);
        *fn = s_mixed;
        break;
    case 1:
        s_zdt_spec (yaml, len, "nsga2", seed);
        *fn = s_zdt1;
        break;
    case 2:
        snprintf (yaml, len,
                  "%ssearch: {algorithm: bayes, samples: 40, initial: 8, candidates: 200, "
                  "seed: %d}\nobjective: {metric: f0, mode: max}\n" TRIAL,
                  s_mixed_space, seed);
        *fn = s_mixed;
        break;
    case 3:
        snprintf (yaml, len,
                  "space:\n  x1: {uniform: [-5, 10]}\n  x2: {uniform: [0, 15]}\n"
                  "search: {algorithm: random, samples: 50, seed: %d}\n"
                  "objective: {metric: f0, mode: min}\n" TRIAL,
                  seed);
        *fn = s_branin;
        break;
    case 5:
        snprintf (yaml, len,
                  "%ssearch: {algorithm: tpe, samples: 60, initial: 8, seed: %d%s}\n"
                  "objective: {metric: f0, mode: max}\n" TRIAL,
                  s_mixed_space, seed, seed % 2 ? ", multivariate: true" : "");
        *fn = s_mixed;
        break;
    case 6: // constrained: the fronts of Deb's constrained domination
        s_zdt_spec (yaml, len, "nsga2", seed);
        strncat (yaml, "constraints: [\"f0 >= 0.3\", \"f1 < 3\"]\n", len - strlen (yaml) - 1);
        *fn = s_zdt1;
        break;
    case 7:
    case 8:
    case 9:
        snprintf (yaml, len,
                  "%ssearch: {algorithm: %s, samples: %d, initial: 8, seed: %d%s}\n"
                  "objective: {metric: f0, mode: max}\nconstraints: [\"f0 >= -40\"]\n" TRIAL,
                  s_mixed_space, i == 7 ? "tpe" : i == 8 ? "bayes" : "evolution",
                  i == 8 ? 40 : 60, seed,
                  i == 8 ? ", candidates: 200" : i == 9 ? ", population: 10, batch: 4" : "");
        *fn = s_mixed;
        break;
    case 10: // MOTPE, univariate and multivariate by seed; 11: with constraints
    case 11: {
        cgq_buf_t y;
        cgq_buf_init (&y);
        cgq_buf_puts (&y, "space:\n");
        for (int k = 0; k < S_ZDT_N; k++)
            cgq_buf_printf (&y, "  x%d: {uniform: [0, 1]}\n", k);
        cgq_buf_printf (&y, "search: {algorithm: tpe, samples: 70, initial: 8, seed: %d%s}\n",
                        seed, seed % 2 ? ", multivariate: true" : "");
        cgq_buf_puts (&y, "objectives: [{metric: f0, mode: min}, {metric: f1, mode: min}]\n" TRIAL);
        if (i == 11)
            cgq_buf_puts (&y, "constraints: [\"f0 >= 0.3\", \"f1 < 3\"]\n");
        snprintf (yaml, len, "%s", y.data);
        cgq_buf_fini (&y);
        *fn = s_zdt1;
        break;
    }
    case 12: // bayes with the probability of feasibility of a disc
        snprintf (yaml, len,
                  "space:\n  x1: {uniform: [-5, 10]}\n  x2: {uniform: [0, 15]}\n"
                  "search: {algorithm: bayes, samples: 40, initial: 8, candidates: 200, "
                  "seed: %d}\nobjective: {metric: f0, mode: min}\n"
                  "constraints: [\"f1 <= 9\"]\n" TRIAL,
                  seed);
        *fn = s_branin_disc;
        break;
    default:
        snprintf (yaml, len,
                  "space:\n  x1: {choice: [-3, 0, 3]}\n  x2: {uniform: [0, 15]}\n  c: 1\n"
                  "search: {algorithm: list, points: [{x1: 0, x2: 1}, {x1: 3, x2: 2.5}, {x1: "
                  "-3, x2: 0}, {x1: 0, x2: 15}]}\n"
                  "objective: {metric: f0, mode: min}\n" TRIAL);
        *fn = s_branin;
        break;
    }
}
#define S_NCASES 13

static const char *s_case_names[S_NCASES] = {
    "evolution", "nsga2", "bayes", "random", "list", "tpe",
    "nsga2+c",   "tpe+c", "bayes+c", "evo+c", "motpe", "motpe+c", "bayes+disc"};

// The same seed and the same results give the same suggestions; another seed
// gives others.
static void
t_reproducible (void **state)
{
    for (int i = 0; i < S_NCASES; i++) {
        char yaml[4096];
        s_fn_t fn;
        s_run_t r[3];
        for (int k = 0; k < 3; k++) {
            s_case (i, yaml, sizeof yaml, &fn, k == 2 ? 12 : 11);
            cgq_spec_t *spec = s_spec (yaml);
            r[k] = (s_run_t) {.spec = spec, .fn = fn, .inflight = 4, .shuffle = 5, .fail = 0.05};
            s_drive (&r[k]);
            cgq_spec_destroy (&spec);
        }
        assert_true (s_same_params (&r[0], &r[1]));
        if (i != 4) // a list has no seed
            assert_false (s_same_params (&r[0], &r[2]));
        printf ("  %-9s %zu suggestions, identical with the same seed\n", s_case_names[i],
                json_array_size (r[0].params));
        for (int k = 0; k < 3; k++)
            s_run_fini (&r[k]);
    }
}

// A restart (save, destroy, new from the state, replay every trial) at any
// point continues the same search: the suggestions equal an uninterrupted
// run's, finished points are not suggested again, and the saved state does
// not grow with the number of trials.
static void
t_restart (void **state)
{
    for (int i = 0; i < S_NCASES; i++) {
        char yaml[4096];
        s_fn_t fn;
        s_case (i, yaml, sizeof yaml, &fn, 21);
        cgq_spec_t *spec = s_spec (yaml);
        s_run_t base = {.spec = spec, .fn = fn, .inflight = 4, .shuffle = 9, .fail = 0.05};
        s_drive (&base);
        size_t n = json_array_size (base.params);
        uint64_t points[] = {1, 3, 7, 25};
        for (size_t k = 0; k < sizeof points / sizeof *points; k++) {
            s_run_t r = {.spec = spec, .fn = fn, .inflight = 4, .shuffle = 9, .fail = 0.05,
                         .restart_at = points[k], .restart_every = k == 3 ? 17 : 0};
            s_drive (&r);
            if (!s_same_params (&base, &r))
                fail_msg ("%s: a restart after %llu results changed the search",
                          s_case_names[i], (unsigned long long) points[k]);
            assert_true (r.restarts >= 1 || points[k] >= n);
            if (k == 3)
                printf ("  %-9s %zu trials, %llu restarts: same suggestions; largest saved "
                        "state %zu bytes\n",
                        s_case_names[i], n, (unsigned long long) r.restarts, r.max_state);
            // O(population) or O(dimensions): far below a byte per trial x 100.
            assert_true (r.max_state < 1200);
            s_run_fini (&r);
        }
        s_run_fini (&base);
        cgq_spec_destroy (&spec);
    }
}

// An evolution over a small discrete space never repeats a point while an
// unseen one is near, across restarts too.
static void
t_no_repeats (void **state)
{
    const char *yaml = "space:\n  a: {choice: [1, 2, 3, 4, 5, 6]}\n  b: {randint: [0, 9]}\n"
                       "  c: {quniform: [0, 1, 0.25]}\n"
                       "search: {algorithm: evolution, samples: 120, population: 10, "
                       "tournament: 3, initial: 10, batch: 4, seed: 2}\n"
                       "objective: {metric: f0, mode: max}\n" TRIAL;
    cgq_spec_t *spec = s_spec (yaml);
    s_run_t r = {.spec = spec, .fn = s_branin, .inflight = 4, .shuffle = 1, .restart_at = 5,
                 .restart_every = 11};
    // s_branin reads x1, x2: absent here, so f0 is constant; the search
    // still must not repeat itself.
    s_drive (&r);
    json_t *seen = json_object ();
    size_t dup = 0;
    for (size_t i = 0; i < json_array_size (r.params); i++) {
        char *t = cgq_json_dumps (json_array_get (r.params, i));
        dup += json_object_get (seen, t) != NULL;
        json_object_set_new (seen, t, json_true ());
        free (t);
    }
    printf ("  %zu of %zu points of a 300-point space repeated\n", dup,
            json_array_size (r.params));
    assert_int_equal (dup, 0);
    json_decref (seen);
    s_run_fini (&r);
    cgq_spec_destroy (&spec);
}

// grid, random and list keep their whole state in "next" and need no history.
static void
t_index_searchers (void **state)
{
    char yaml[4096];
    s_fn_t fn;
    s_case (4, yaml, sizeof yaml, &fn, 0);
    cgq_spec_t *spec = s_spec (yaml);
    char err[256];
    cgq_searcher_t *se = cgq_searcher_new (spec, NULL, err, sizeof err);
    assert_non_null (se);
    assert_false (cgq_searcher_needs_history (se));
    assert_int_equal (cgq_searcher_total (se), 4);
    uint64_t id;
    json_t *p = cgq_searcher_suggest (se, &id);
    char *t = cgq_json_dumps (p);
    assert_string_equal (t, "{\"x1\":0,\"x2\":1,\"c\":1}");
    free (t);
    json_decref (p);
    json_t *st = cgq_searcher_save (se);
    t = cgq_json_dumps (st);
    assert_string_equal (t, "{\"algorithm\":\"list\",\"next\":1}");
    free (t);
    cgq_searcher_destroy (&se);
    se = cgq_searcher_new (spec, st, err, sizeof err);
    json_decref (st);
    p = cgq_searcher_suggest (se, &id);
    assert_int_equal (id, 1);
    assert_true (json_real_value (json_object_get (p, "x2")) == 2.5);
    json_decref (p);
    cgq_searcher_destroy (&se);
    cgq_spec_destroy (&spec);
}

// States that do not fit are refused with a reason.
static void
t_bad_state (void **state)
{
    char yaml[4096];
    s_fn_t fn;
    s_case (0, yaml, sizeof yaml, &fn, 1);
    cgq_spec_t *spec = s_spec (yaml);
    char err[512];
    json_t *st = json_pack ("{s:s, s:i, s:[i, i]}", "algorithm", "evolution", "next", 3,
                            "population", 1, 5);
    assert_null (cgq_searcher_new (spec, st, err, sizeof err));
    assert_non_null (strstr (err, "population[1] that is not a trial id below 3"));
    json_decref (st);
    st = json_pack ("{s:s, s:i}", "algorithm", "bayes", "next", 3);
    assert_null (cgq_searcher_new (spec, st, err, sizeof err));
    assert_non_null (strstr (err, "is for algorithm 'bayes', the spec says 'evolution'"));
    json_decref (st);
    // A replayed point outside the space is an error, not a silent guess.
    st = json_pack ("{s:s, s:i, s:[]}", "algorithm", "evolution", "next", 1, "population");
    cgq_searcher_t *se = cgq_searcher_new (spec, st, err, sizeof err);
    assert_non_null (se);
    json_t *p = json_pack ("{s:[i,i,i,i,i], s:i, s:f, s:s, s:{s:i}}", "depths", 2, 3, 4, 5, 99,
                           "width", 3, "a", 0.5, "act", "relu", "ops", "id", 1);
    assert_int_equal (cgq_searcher_replay (se, 0, p, NULL, NAN, CGQ_REPLAY_FAILED, err,
                                           sizeof err),
                      -1);
    assert_non_null (strstr (err, "param depths = [2,3,4,5,99] does not belong"));
    json_decref (p);
    json_decref (st);
    cgq_searcher_destroy (&se);
    cgq_spec_destroy (&spec);

    // Too many dimensions for the Gaussian process.
    cgq_spec_t *big = s_spec ("space:\n  a: {repeat: 40, of: {uniform: [0, 1]}}\n"
                              "  b: {repeat: 30, of: {uniform: [0, 1]}}\n"
                              "search: {algorithm: bayes, samples: 5}\n"
                              "objective: {metric: f0, mode: max}\n" TRIAL);
    assert_null (cgq_searcher_new (big, NULL, err, sizeof err));
    assert_non_null (strstr (err, "70 dimensions, more than 64"));
    cgq_spec_destroy (&big);

    // The constraint GP's saved hyper-parameters: another dimension count, or
    // outside the bounds, is refused like the objective's.
    s_case (12, yaml, sizeof yaml, &fn, 1);
    spec = s_spec (yaml);
    const char *bad[] = {"{\"lengths\": [0.5], \"signal\": 1, \"noise\": 0.01}",
                         "{\"lengths\": [0.5, 99], \"signal\": 1, \"noise\": 0.01}",
                         "{\"lengths\": [0.5, 0.5], \"signal\": \"1\", \"noise\": 0.01}"};
    for (size_t i = 0; i < 3; i++) {
        char text[256];
        snprintf (text, sizeof text, "{\"algorithm\": \"bayes\", \"next\": 0, \"chyper\": %s}",
                  bad[i]);
        st = json_loads (text, 0, NULL);
        assert_non_null (st);
        assert_null (cgq_searcher_new (spec, st, err, sizeof err));
        assert_non_null (strstr (err, "hyper-parameters that do not fit 2 dimensions"));
        json_decref (st);
    }
    cgq_spec_destroy (&spec);
}

// s_point_err checks params (JSON text) against the external searcher se:
// refused with an error that holds want.
static void
s_point_err (cgq_searcher_t *se, const char *params, const char *want)
{
    char err[512] = "";
    json_t *p = json_loads (params, JSON_DECODE_ANY, NULL);
    assert_non_null (p);
    json_t *pt = cgq_searcher_point (se, p, err, sizeof err);
    json_decref (p);
    if (pt || !strstr (err, want))
        fail_msg ("%s: %s, want an error with '%s'", params, pt ? "accepted" : err, want);
}

// s_point_ok checks that params are taken, and written as want.
static json_t *
s_point_ok (cgq_searcher_t *se, const char *params, const char *want)
{
    char err[512] = "";
    json_t *p = json_loads (params, 0, NULL);
    assert_non_null (p);
    json_t *pt = cgq_searcher_point (se, p, err, sizeof err);
    json_decref (p);
    if (!pt)
        fail_msg ("%s refused: %s", params, err);
    char *text = cgq_json_dumps (pt);
    if (strcmp (text, want) != 0)
        fail_msg ("%s is written %s, want %s", params, text, want);
    free (text);
    return pt;
}

// algorithm external: points from outside are checked against every kind
// of param (each error names the param and what it allows), written in the
// space's order with the constants, handed out in the order given, none
// before it is given; done at samples; the state is the next id only.
static void
t_external (void **state)
{
    (void) state;
    cgq_spec_t *spec = s_spec ("space:\n"
                               "  lr: {loguniform: [1.0e-4, 1.0e-1]}\n"
                               "  h: {choice: [64, 128]}\n"
                               "  n: {randint: [1, 4]}\n"
                               "  w: {quniform: [0, 100, 5]}\n"
                               "  d: {repeat: 3, of: {choice: [2, 3]}}\n"
                               "  ops: {assignment: {items: [a, b], choices: [cpu, gpu]}}\n"
                               "  g: {grid: [x, y]}\n"
                               "  gnn: GAT\n"
                               "search: {algorithm: external, samples: 3}\n" TRIAL);
    char err[512];
    cgq_searcher_t *se = cgq_searcher_new (spec, NULL, err, sizeof err);
    assert_non_null (se);
    assert_true (cgq_searcher_external (se));
    assert_int_equal (cgq_searcher_total (se), 3);
    assert_false (cgq_searcher_needs_history (se));
    uint64_t id;
    assert_null (cgq_searcher_suggest (se, &id)); // nothing given yet: wait
    assert_false (cgq_searcher_done (se));

    const char *good = "{\"lr\": 0.01, \"h\": 128, \"n\": 4, \"w\": 35, \"d\": [3, 2, 3], "
                       "\"ops\": {\"id\": 2}, \"g\": \"y\"}";
    s_point_err (se, "[1]", "must be a JSON object of the space's params (lr, h, n, w, d, ops, g)");
    s_point_err (se, "{\"lr\": 0.01}", "param h is not set (allowed: choice [64,128])");
    s_point_err (se, "{\"lr\": 1, \"h\": 64, \"n\": 1, \"w\": 0, \"d\": [2,2,2], \"ops\": {\"id\": 0}, "
                     "\"g\": \"x\"}",
                 "param lr = 1 does not belong to the space of the spec (allowed: loguniform "
                 "[0.0001, 0.1])");
    s_point_err (se, "{\"lr\": 0.01, \"h\": 65, \"n\": 1, \"w\": 0, \"d\": [2,2,2], \"ops\": {\"id\": 0}, "
                     "\"g\": \"x\"}",
                 "param h = 65");
    s_point_err (se, "{\"lr\": 0.01, \"h\": 64, \"n\": 5, \"w\": 0, \"d\": [2,2,2], \"ops\": {\"id\": 0}, "
                     "\"g\": \"x\"}",
                 "(allowed: randint [1, 4] (inclusive))");
    s_point_err (se, "{\"lr\": 0.01, \"h\": 64, \"n\": 1, \"w\": 7, \"d\": [2,2,2], \"ops\": {\"id\": 0}, "
                     "\"g\": \"x\"}",
                 "param w = 7 is not a multiple of its step (allowed: quniform [0, 100] in steps "
                 "of 5)");
    s_point_err (se, "{\"lr\": 0.01, \"h\": 64, \"n\": 1, \"w\": 5, \"d\": [2,2], \"ops\": {\"id\": 0}, "
                     "\"g\": \"x\"}",
                 "param d = [2,2] does not belong");
    s_point_err (se, "{\"lr\": 0.01, \"h\": 64, \"n\": 1, \"w\": 5, \"d\": [2,2,2], \"ops\": {\"id\": 4}, "
                     "\"g\": \"x\"}",
                 "param ops = {\"id\":4} does not belong");
    s_point_err (se, "{\"lr\": 0.01, \"h\": 64, \"n\": 1, \"w\": 5, \"d\": [2,2,2], \"ops\": {\"id\": 0}, "
                     "\"g\": \"z\"}",
                 "(allowed: grid [\"x\",\"y\"])");
    s_point_err (se, "{\"lr\": 0.01, \"h\": 64, \"n\": 1, \"w\": 5, \"d\": [2,2,2], \"ops\": {\"id\": 0}, "
                     "\"g\": \"x\", \"gnn\": \"GCN\"}",
                 "param gnn = \"GCN\" sets a constant of the space: leave it out");
    s_point_err (se, "{\"lr\": 0.01, \"h\": 64, \"n\": 1, \"w\": 5, \"d\": [2,2,2], \"ops\": {\"id\": 0}, "
                     "\"g\": \"x\", \"lrr\": 1}",
                 "'lrr' is not a param of the space");

    const char *canon = "{\"lr\":0.01,\"h\":128,\"n\":4,\"w\":35,\"d\":[3,2,3],\"ops\":{\"id\":2,"
                        "\"map\":{\"a\":\"cpu\",\"b\":\"gpu\"}},\"g\":\"y\",\"gnn\":\"GAT\"}";
    assert_int_equal (cgq_searcher_give (se, s_point_ok (se, good, canon)), 0);
    json_t *second = s_point_ok (
        se,
        "{\"gnn\": \"GAT\", \"g\": \"x\", \"ops\": {\"id\": 0, \"map\": {}}, \"d\": [2,2,2], "
        "\"w\": 100.0, \"n\": 1.0, \"h\": 64, \"lr\": 0.0001}",
        "{\"lr\":0.0001,\"h\":64,\"n\":1,\"w\":100,\"d\":[2,2,2],\"ops\":{\"id\":0,\"map\":{\"a\":"
        "\"cpu\",\"b\":\"cpu\"}},\"g\":\"x\",\"gnn\":\"GAT\"}");
    assert_int_equal (cgq_searcher_give (se, second), 0);
    assert_int_equal (cgq_searcher_waiting (se), 2);
    json_t *p = cgq_searcher_suggest (se, &id);
    assert_int_equal (id, 0);
    char *text = cgq_json_dumps (p);
    assert_string_equal (text, canon);
    free (text);
    json_decref (p);
    json_t *st = cgq_searcher_save (se);
    text = cgq_json_dumps (st);
    assert_string_equal (text, "{\"algorithm\":\"external\",\"next\":1}");
    free (text);

    // A restart: the state says 1 was used; the caller gives back the rest.
    cgq_searcher_t *again = cgq_searcher_new (spec, st, err, sizeof err);
    json_decref (st);
    assert_non_null (again);
    assert_int_equal (cgq_searcher_suggested (again), 1);
    assert_int_equal (cgq_searcher_waiting (again), 0);
    cgq_searcher_destroy (&again);

    p = cgq_searcher_suggest (se, &id);
    assert_int_equal (id, 1);
    json_decref (p);
    assert_null (cgq_searcher_suggest (se, &id));
    // Many at once: the queue grows and keeps its order.
    for (int i = 0; i < 40; i++)
        assert_int_equal (cgq_searcher_give (se, s_point_ok (se, good, canon)), 0);
    p = cgq_searcher_suggest (se, &id);
    assert_int_equal (id, 2);
    json_decref (p);
    assert_true (cgq_searcher_done (se)); // samples: 3
    assert_null (cgq_searcher_suggest (se, &id));
    cgq_searcher_destroy (&se);

    // Other searchers take no points from outside.
    cgq_spec_t *rnd = s_spec ("space: {x: {uniform: [0, 1]}}\n" TRIAL);
    cgq_searcher_t *sr = cgq_searcher_new (rnd, NULL, err, sizeof err);
    assert_false (cgq_searcher_external (sr));
    json_t *x = json_pack ("{s:f}", "x", 0.5);
    assert_null (cgq_searcher_point (sr, x, err, sizeof err));
    assert_non_null (strstr (err, "the job's search is random, not external"));
    assert_int_equal (cgq_searcher_give (sr, x), -1);
    assert_int_equal (cgq_searcher_waiting (sr), 0);
    cgq_searcher_destroy (&sr);
    cgq_spec_destroy (&rnd);
    cgq_spec_destroy (&spec);

    // Without samples, a large bound: the searcher outside decides when to stop.
    spec = s_spec ("space: {x: {uniform: [0, 1]}}\nsearch: {algorithm: external}\n" TRIAL);
    assert_int_equal (spec->search.samples, CGQ_SPEC_EXTERNAL_SAMPLES);
    cgq_spec_destroy (&spec);
}

// --- bench ----------------------------------------------------------------------

static double
s_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

// s_heap is the heap in use (glibc's count; a sanitizer build's allocator
// reports its own, so read the figures of a plain build).
static size_t
s_heap (void)
{
    struct mallinfo2 mi = mallinfo2 ();
    return mi.uordblks + mi.hblkhd;
}

// s_bench_index: random and grid walk trial indexes and keep nothing per
// trial; a coordinator restarted after n trials resumes them from "next".
static void
s_bench_index (const char *name, uint64_t n, int reps)
{
    char yaml[1024];
    snprintf (yaml, sizeof yaml,
              "space:\n  x1: {uniform: [-5, 10]}\n  x2: {choice: [1, 2, 3]}\n"
              "search: {algorithm: %s, samples: 1000000}\nobjective: {metric: f0, mode: min}\n"
              TRIAL,
              name);
    cgq_spec_t *spec = s_spec (yaml);
    json_t *st = json_pack ("{s:s, s:I}", "algorithm", name, "next", (json_int_t) n);
    char err[512];
    size_t heap0 = s_heap ();
    cgq_searcher_t *se = cgq_searcher_new (spec, st, err, sizeof err);
    json_decref (st);
    if (!se)
        fail_msg ("%s", err);
    size_t heap = s_heap () - heap0;
    double t0 = s_now ();
    for (int k = 0; k < reps; k++) {
        uint64_t id;
        json_t *p = cgq_searcher_suggest (se, &id);
        assert_non_null (p);
        json_t *m = json_pack ("{s:f}", "f0", 1.0);
        cgq_searcher_observe (se, id, m, 1.0, true);
        json_decref (m);
        json_decref (p);
    }
    double per = (s_now () - t0) / reps;
    json_t *saved = cgq_searcher_save (se);
    char *text = cgq_json_dumps (saved);
    printf ("  %-9s %7llu observed: suggest+observe %9.3f ms, (no replay)               memory "
            "%8.1f KiB (heap %8.1f KiB), saved state %5zu B\n",
            name, (unsigned long long) n, per * 1e3, (double) cgq_searcher_footprint (se) / 1024,
            (double) heap / 1024, strlen (text));
    free (text);
    json_decref (saved);
    cgq_searcher_destroy (&se);
    cgq_spec_destroy (&spec);
}

// s_bench_one builds a searcher that has observed n trials (through replay,
// which is how a coordinator gets there after a restart, and cheaper than
// suggesting them) and times suggest + observe.
static void
s_bench_one (const char *name, const char *space, const char *search, const char *objective,
             s_fn_t fn, uint64_t n, int reps)
{
    char yaml[4096];
    snprintf (yaml, sizeof yaml, "%ssearch: {algorithm: %s, samples: 1000000, %s}\n%s" TRIAL,
              space, name, search, objective);
    cgq_spec_t *spec = s_spec (yaml);
    // The points: a random search over the same space.
    snprintf (yaml, sizeof yaml, "%ssearch: {algorithm: random, samples: 1000000}\n%s" TRIAL,
              space, objective);
    cgq_spec_t *rs = s_spec (yaml);
    json_t *ids = json_array ();
    for (uint64_t i = n > 20 ? n - 20 : 0; i < n; i++)
        json_array_append_new (ids, json_integer ((json_int_t) i));
    json_t *st = json_pack ("{s:s, s:I, s:o}", "algorithm", name, "next", (json_int_t) n,
                            "population", ids);
    char err[512];
    size_t heap0 = s_heap ();
    cgq_searcher_t *se = cgq_searcher_new (spec, st, err, sizeof err);
    json_decref (st);
    if (!se)
        fail_msg ("%s", err);
    double t0 = s_now ();
    for (uint64_t i = 0; i < n; i++) {
        json_t *p = cgq_space_point (rs, i);
        double f[CGQ_SPEC_MAX_OBJECTIVES];
        fn (p, f);
        json_t *m = json_pack ("{s:f, s:f}", "f0", f[0], "f1", spec->nobjectives > 1 ? f[1] : 0);
        if (cgq_searcher_replay (se, i, p, m, f[0], CGQ_REPLAY_SUCCEEDED, err, sizeof err) < 0)
            fail_msg ("%s", err);
        json_decref (m);
        json_decref (p);
    }
    double replay = s_now () - t0;
    t0 = s_now ();
    for (int k = 0; k < reps; k++) {
        uint64_t id;
        json_t *p = cgq_searcher_suggest (se, &id);
        assert_non_null (p);
        double f[CGQ_SPEC_MAX_OBJECTIVES];
        fn (p, f);
        json_t *m = json_pack ("{s:f, s:f}", "f0", f[0], "f1", spec->nobjectives > 1 ? f[1] : 0);
        cgq_searcher_observe (se, id, m, f[0], true);
        json_decref (m);
        json_decref (p);
    }
    double per = (s_now () - t0) / reps;
    // What the searcher holds once it has observed n (+ reps) trials and
    // suggested since (a learner's model and caches included).
    size_t heap = s_heap () - heap0;
    json_t *saved = cgq_searcher_save (se);
    char *text = cgq_json_dumps (saved);
    printf ("  %-9s %7llu observed: suggest+observe %9.3f ms, replay %7.3f us/trial, memory "
            "%8.1f KiB (heap %8.1f KiB), saved state %5zu B\n",
            name, (unsigned long long) n, per * 1e3, n ? replay / (double) n * 1e6 : 0.0,
            (double) cgq_searcher_footprint (se) / 1024, (double) heap / 1024, strlen (text));
    free (text);
    json_decref (saved);
    cgq_searcher_destroy (&se);
    cgq_spec_destroy (&rs);
    cgq_spec_destroy (&spec);
}

static void
t_bench (void **state)
{
    const char *b = getenv ("CGQ_BENCH_MAX");
    uint64_t max = b ? strtoull (b, NULL, 10) : 100000;
    uint64_t sizes[] = {10, 1000, 100000};
    printf ("  (figures depend on the build: a sanitizer build is several times slower)\n");
    for (size_t k = 0; k < 3; k++) {
        uint64_t n = sizes[k];
        if (n > max)
            break;
        s_bench_one ("evolution", s_mixed_space, "population: 20, initial: 5",
                     "objective: {metric: f0, mode: max}\n", s_mixed, n, 200);
        cgq_buf_t zs;
        cgq_buf_init (&zs);
        cgq_buf_puts (&zs, "space:\n");
        for (int i = 0; i < S_ZDT_N; i++)
            cgq_buf_printf (&zs, "  x%d: {uniform: [0, 1]}\n", i);
        s_bench_one ("nsga2", zs.data, "population: 20, initial: 5",
                     "objectives: [{metric: f0, mode: min}, {metric: f1, mode: min}]\n", s_zdt1,
                     n, 200);
        cgq_buf_fini (&zs);
        s_bench_one ("bayes", "space:\n  x1: {uniform: [-5, 10]}\n  x2: {uniform: [0, 15]}\n",
                     "initial: 5", "objective: {metric: f0, mode: min}\n", s_branin, n, 16);
        s_bench_one ("tpe", "space:\n  x1: {uniform: [-5, 10]}\n  x2: {uniform: [0, 15]}\n",
                     "initial: 5", "objective: {metric: f0, mode: min}\n", s_branin, n,
                     n > 10000 ? 4 : 16);
        s_bench_index ("random", n, 50);
        s_bench_index ("grid", n, 50);
    }
}

// bayes warm start: 30 observations of a bowl (minimum at x1 = 2, x2 = 7)
// make its first suggestion the model's, near the minimum, where a cold
// start's is random; the points are not suggested again; a point without
// every param is refused; a restart (state, the same warm points, replay)
// gives the same next suggestion.
static void
t_bayes_warm (void **state)
{
    (void)state;
    const char *yaml = "space:\n  x1: {uniform: [-5, 10]}\n  x2: {uniform: [0, 15]}\n"
                       "search: {algorithm: bayes, samples: 10, seed: 2, candidates: 300}\n"
                       "objective: {metric: f0, mode: min}\n"
                       "trial: {kind: noop}\n";
    cgq_spec_t *spec = s_spec (yaml);
    char err[512];
    cgq_searcher_t *cold = cgq_searcher_new (spec, NULL, err, sizeof err);
    cgq_searcher_t *warm = cgq_searcher_new (spec, NULL, err, sizeof err);
    json_t *pts = json_array ();
    for (int i = 0; i < 30; i++) {
        double x1 = -5 + 15 * ((i * 7919) % 101) / 100.0, x2 = 15 * ((i * 104729) % 97) / 96.0;
        json_t *p = json_pack ("{s:f, s:f, s:i}", "x1", x1, "x2", x2, "other", 1);
        json_t *m = json_pack ("{s:f}", "f0", (x1 - 2) * (x1 - 2) + (x2 - 7) * (x2 - 7));
        json_array_append_new (pts, json_pack ("{s:o, s:o, s:s}", "params", p, "metrics", m,
                                               "from", "test"));
    }
    char *text = json_dumps (pts, JSON_COMPACT);
    assert_int_equal (cgq_searcher_warm_json (warm, text, err, sizeof err), 0);
    uint64_t a, b;
    json_t *pc = cgq_searcher_suggest (cold, &a), *pw = cgq_searcher_suggest (warm, &b);
    assert_int_equal (a, 0);
    assert_int_equal (b, 0);
    double dc = hypot (json_real_value (json_object_get (pc, "x1")) - 2,
                       json_real_value (json_object_get (pc, "x2")) - 7);
    double dw = hypot (json_real_value (json_object_get (pw, "x1")) - 2,
                       json_real_value (json_object_get (pw, "x2")) - 7);
    printf ("  bayes: first suggestion's distance to the optimum: warm-started %.3f, cold %.3f\n",
            dw, dc);
    assert_true (dw < 2.0);
    assert_true (dw < dc);
    // A restart.
    json_t *st = cgq_searcher_save (warm);
    cgq_searcher_t *again = cgq_searcher_new (spec, st, err, sizeof err);
    assert_int_equal (cgq_searcher_warm_json (again, text, err, sizeof err), 0);
    assert_int_equal (cgq_searcher_replay (again, 0, pw, NULL, NAN, CGQ_REPLAY_ACTIVE, err,
                                           sizeof err),
                      0);
    json_t *m = json_pack ("{s:f}", "f0", dw * dw);
    cgq_searcher_observe (warm, 0, m, dw * dw, true);
    cgq_searcher_observe (again, 0, m, dw * dw, true);
    json_t *na = cgq_searcher_suggest (warm, &a), *nb = cgq_searcher_suggest (again, &b);
    char *ta = json_dumps (na, JSON_SORT_KEYS), *tb = json_dumps (nb, JSON_SORT_KEYS);
    assert_string_equal (ta, tb);
    free (ta);
    free (tb);
    // A point without x2; warm after the first suggestion.
    cgq_searcher_t *fresh = cgq_searcher_new (spec, NULL, err, sizeof err);
    json_t *p1 = json_pack ("{s:f}", "x1", 1.0);
    assert_int_equal (cgq_searcher_warm (fresh, p1, m, err, sizeof err), -1);
    assert_non_null (strstr (err, "no value for param x2, and algorithm bayes models every param"));
    assert_int_equal (cgq_searcher_warm (warm, pw, m, err, sizeof err), -1);
    assert_non_null (strstr (err, "before the job's first trial"));
    json_decref (p1);
    json_decref (m);
    json_decref (na);
    json_decref (nb);
    json_decref (st);
    json_decref (pc);
    json_decref (pw);
    json_decref (pts);
    free (text);
    cgq_searcher_destroy (&fresh);
    cgq_searcher_destroy (&again);
    cgq_searcher_destroy (&cold);
    cgq_searcher_destroy (&warm);
    cgq_spec_destroy (&spec);
}

// Two bowls: f0's minimum at (2, 7), f1's at (-3, 2).
static void
s_bowls (const json_t *params, double *out)
{
    double x1 = s_num (params, "x1"), x2 = s_num (params, "x2");
    out[0] = (x1 - 2) * (x1 - 2) + (x2 - 7) * (x2 - 7);
    out[1] = (x1 + 3) * (x1 + 3) + (x2 - 2) * (x2 - 2);
}

// s_bowl_points is a warm start's JSON: n points spread over the box with
// both bowls' values.
static char *
s_bowl_points (int n)
{
    json_t *pts = json_array ();
    for (int i = 0; i < n; i++) {
        double x1 = -5 + 15 * ((i * 7919) % 101) / 100.0, x2 = 15 * ((i * 104729) % 97) / 96.0;
        json_t *p = json_pack ("{s:f, s:f, s:i}", "x1", x1, "x2", x2, "other", 1);
        double f[2];
        s_bowls (p, f);
        json_t *m = json_pack ("{s:f, s:f}", "f0", f[0], "f1", f[1]);
        json_array_append_new (pts, json_pack ("{s:o, s:o, s:s}", "params", p, "metrics", m,
                                               "from", "test"));
    }
    char *text = json_dumps (pts, JSON_COMPACT);
    json_decref (pts);
    return text;
}

// s_count_until_wait suggests until the searcher waits; how many came.
static size_t
s_count_until_wait (cgq_searcher_t *se)
{
    size_t n = 0;
    uint64_t id;
    json_t *p;
    while ((p = cgq_searcher_suggest (se, &id)) && n < 1000) {
        json_decref (p);
        n++;
    }
    json_decref (p);
    return n;
}

// evolution and nsga2 warm start: the points join the population and count
// toward initial (initial 15 with 10 points: 5 random trials, then it waits
// for them; with 20 points: children at once, batch of them); the first
// children, bred from the points, are better than a cold start's random
// ones; a restart (state, the same points, replay) continues the same search
// at any point; a point without every param, or after the first trial, is
// refused.
static void
t_evo_warm (void **state)
{
    (void) state;
    char *w10 = s_bowl_points (10), *w20 = s_bowl_points (20);
    for (int alg = 0; alg < 2; alg++) {
        const char *name = alg ? "nsga2" : "evolution";
        const char *obj = alg ? "objectives: [{metric: f0, mode: min}, {metric: f1, mode: min}]\n"
                              : "objective: {metric: f0, mode: min}\n";
        char yaml[1024], err[512];
        for (int initial = 10; initial <= 15; initial += 5) {
            snprintf (yaml, sizeof yaml,
                      "space:\n  x1: {uniform: [-5, 10]}\n  x2: {uniform: [0, 15]}\n"
                      "search: {algorithm: %s, samples: 60, seed: 4, population: 10, "
                      "initial: %d, warm_start: {points: p.jsonl}}\n%s"
                      "trial: {kind: noop}\n",
                      name, initial, obj);
            cgq_spec_t *spec = s_spec (yaml);
            cgq_searcher_t *se = cgq_searcher_new (spec, NULL, err, sizeof err);
            assert_int_equal (cgq_searcher_warm_json (se, w10, err, sizeof err), 0);
            json_t *st = cgq_searcher_save (se);
            assert_non_null (json_object_get (st, "warm")); // warm members in the population
            json_decref (st);
            // initial 10, 10 points: children at once (batch = population = 10);
            // initial 15: 5 random, then it waits for them.
            assert_int_equal (s_count_until_wait (se), initial == 10 ? 10 : 5);
            cgq_searcher_destroy (&se);
            // Cold: initial random trials before it waits.
            se = cgq_searcher_new (spec, NULL, err, sizeof err);
            assert_int_equal (s_count_until_wait (se), (size_t) initial);
            cgq_searcher_destroy (&se);
            cgq_spec_destroy (&spec);
        }
        snprintf (yaml, sizeof yaml,
                  "space:\n  x1: {uniform: [-5, 10]}\n  x2: {uniform: [0, 15]}\n"
                  "search: {algorithm: %s, samples: 60, seed: 4, population: 10, initial: 10, "
                  "batch: 4, warm_start: {points: p.jsonl}}\n%s"
                  "trial: {kind: noop}\n",
                  name, obj);
        cgq_spec_t *spec = s_spec (yaml);
        s_run_t cold = {.spec = spec, .fn = s_bowls, .inflight = 4, .shuffle = 3};
        s_run_t hot = {.spec = spec, .fn = s_bowls, .inflight = 4, .shuffle = 3, .warm = w20};
        s_drive (&cold);
        s_drive (&hot);
        double mc = 0, mh = 0; // mean f0 + f1 of the first 10 trials
        for (size_t i = 0; i < 10; i++) {
            double fc[2], fh[2];
            s_bowls (json_array_get (cold.params, i), fc);
            s_bowls (json_array_get (hot.params, i), fh);
            mc += (fc[0] + (alg ? fc[1] : 0)) / 10;
            mh += (fh[0] + (alg ? fh[1] : 0)) / 10;
        }
        printf ("  %s: mean objective%s of the first 10 trials: warm-started %.2f, cold %.2f\n",
                name, alg ? "s' sum" : "", mh, mc);
        assert_true (mh < mc / 2);
        uint64_t points[] = {1, 5, 13};
        for (size_t k = 0; k < 3; k++) {
            s_run_t r = {.spec = spec, .fn = s_bowls, .inflight = 4, .shuffle = 3, .warm = w20,
                         .restart_at = points[k], .restart_every = k == 2 ? 7 : 0};
            s_drive (&r);
            if (!s_same_params (&hot, &r))
                fail_msg ("%s warm: a restart after %llu results changed the search", name,
                          (unsigned long long) points[k]);
            assert_true (r.restarts >= 1);
            s_run_fini (&r);
        }
        // Refusals.
        cgq_searcher_t *se = cgq_searcher_new (spec, NULL, err, sizeof err);
        json_t *p1 = json_pack ("{s:f}", "x1", 1.0), *m = json_pack ("{s:f, s:f}", "f0", 1.0, "f1",
                                                                      2.0);
        assert_int_equal (cgq_searcher_warm (se, p1, m, err, sizeof err), -1);
        assert_non_null (strstr (err, "no value for param x2, and algorithm"));
        json_object_set_new (p1, "x2", json_real (99.0));
        assert_int_equal (cgq_searcher_warm (se, p1, m, err, sizeof err), -1);
        json_object_set_new (p1, "x2", json_real (9.0));
        assert_int_equal (cgq_searcher_warm (se, p1, m, err, sizeof err), 0);
        uint64_t id;
        json_decref (cgq_searcher_suggest (se, &id));
        assert_int_equal (cgq_searcher_warm (se, p1, m, err, sizeof err), -1);
        assert_non_null (strstr (err, "before the job's first trial"));
        json_decref (p1);
        json_decref (m);
        cgq_searcher_destroy (&se);
        // A saved "warm" that does not fit.
        const char *bad[] = {"[[5, 0]]", "[[0, 0], [0, 1]]", "[[0]]", "{}", "[[0, -1]]"};
        for (size_t i = 0; i < 5; i++) {
            char text[160];
            snprintf (text, sizeof text,
                      "{\"algorithm\": \"%s\", \"next\": 1, \"population\": [0], \"warm\": %s}",
                      name, bad[i]);
            json_t *bs = json_loads (text, 0, NULL);
            assert_non_null (bs);
            assert_null (cgq_searcher_new (spec, bs, err, sizeof err));
            assert_non_null (strstr (err, "warm"));
            json_decref (bs);
        }
        s_run_fini (&cold);
        s_run_fini (&hot);
        cgq_spec_destroy (&spec);
    }
    free (w10);
    free (w20);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (t_index_searchers),
        cmocka_unit_test (t_bayes_warm),
        cmocka_unit_test (t_evo_warm),
        cmocka_unit_test (t_bad_state),
        cmocka_unit_test (t_external),
        cmocka_unit_test (t_reproducible),
        cmocka_unit_test (t_restart),
        cmocka_unit_test (t_no_repeats),
        cmocka_unit_test (t_evolution_improves),
        cmocka_unit_test (t_bayes_beats_random),
        cmocka_unit_test (t_nsga2_zdt1),
        cmocka_unit_test (t_nsga2_constrained),
        cmocka_unit_test (t_constrained_learners),
        cmocka_unit_test (t_bayes_pof),
        cmocka_unit_test (t_bayes_pof_finds),
        cmocka_unit_test (t_bench),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
