// cgq-bench-tpe: cgq's searchers driven in one process for bench/tpe.py,
// through the same interface the coordinator uses (searcher.h): suggest, run
// the function, observe, one trial at a time. The coordinator, Redis and
// the workers add transport to each trial, nothing to what the searcher
// suggests, so the quality figures are the searcher's own; the cost figure
// is what one suggestion costs the coordinator's loop.
//
//   cgq-bench-tpe run FUNC ALG SEED BUDGET [multivariate]
//       one search; prints {"best": B, "trace": [best after trial 1, 2, ...]}
//   cgq-bench-tpe cost FUNC N REPS [multivariate]
//       a tpe searcher that has observed N random points (replayed, as after
//       a restart), then REPS suggest + observe; prints {"n": N, "ms": per}
//
// FUNC: branin (2-D), hartmann6 (6-D), rosenbrock8 (8-D), all minimised.
// ALG: tpe or random.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "json.h"
#include "searcher.h"
#include "space.h"
#include "spec.h"
#include "util.h"

typedef struct {
    const char *name;
    int dim;
    double lo, hi; // every coordinate's bounds
    double (*f) (const double *x);
} s_func_t;

static double
s_branin (const double *x)
{
    // x0 in [-5, 10], x1 in [0, 15] (mapped from the common box below)
    double b = 5.1 / (4 * M_PI * M_PI), c = 5 / M_PI, t = 1 / (8 * M_PI);
    return pow (x[1] - b * x[0] * x[0] + c * x[0] - 6, 2) + 10 * (1 - t) * cos (x[0]) + 10;
}

static double
s_hartmann6 (const double *x)
{
    static const double alpha[4] = {1.0, 1.2, 3.0, 3.2};
    static const double A[4][6] = {{10, 3, 17, 3.5, 1.7, 8},
                                   {0.05, 10, 17, 0.1, 8, 14},
                                   {3, 3.5, 1.7, 10, 17, 8},
                                   {17, 8, 0.05, 10, 0.1, 14}};
    static const double P[4][6] = {{1312, 1696, 5569, 124, 8283, 5886},
                                   {2329, 4135, 8307, 3736, 1004, 9991},
                                   {2348, 1451, 3522, 2883, 3047, 6650},
                                   {4047, 8828, 8732, 5743, 1091, 381}};
    double s = 0;
    for (int i = 0; i < 4; i++) {
        double e = 0;
        for (int j = 0; j < 6; j++)
            e += A[i][j] * pow (x[j] - P[i][j] * 1e-4, 2);
        s += alpha[i] * exp (-e);
    }
    return -s;
}

static double
s_rosenbrock8 (const double *x)
{
    double s = 0;
    for (int i = 0; i < 7; i++)
        s += 100 * pow (x[i + 1] - x[i] * x[i], 2) + pow (x[i] - 1, 2);
    return s;
}

static const s_func_t s_funcs[] = {
    {"branin", 2, 0, 0, s_branin}, // bounds per coordinate: see s_bounds
    {"hartmann6", 6, 0, 1, s_hartmann6},
    {"rosenbrock8", 8, -5, 10, s_rosenbrock8},
};

static void
s_bounds (const s_func_t *fn, int i, double *lo, double *hi)
{
    if (!strcmp (fn->name, "branin")) {
        *lo = i == 0 ? -5 : 0;
        *hi = i == 0 ? 10 : 15;
    }
    else {
        *lo = fn->lo;
        *hi = fn->hi;
    }
}

static cgq_spec_t *
s_spec (const s_func_t *fn, const char *alg, long long seed, long long samples, bool mv)
{
    cgq_buf_t y;
    cgq_buf_init (&y);
    cgq_buf_puts (&y, "space:\n");
    for (int i = 0; i < fn->dim; i++) {
        double lo, hi;
        s_bounds (fn, i, &lo, &hi);
        cgq_buf_printf (&y, "  x%d: {uniform: [%.17g, %.17g]}\n", i, lo, hi);
    }
    cgq_buf_printf (&y, "search: {algorithm: %s, samples: %lld, seed: %lld%s}\n", alg, samples,
                    seed, mv ? ", multivariate: true" : "");
    cgq_buf_puts (&y, "objective: {metric: f, mode: min}\ntrial: {kind: noop}\n");
    char err[1024];
    cgq_spec_t *spec = cgq_spec_parse (y.data, y.len, "bench.yaml", err, sizeof err);
    cgq_buf_fini (&y);
    if (!spec) {
        fprintf (stderr, "cgq-bench-tpe: %s\n", err);
        exit (2);
    }
    return spec;
}

static double
s_eval (const s_func_t *fn, const json_t *params)
{
    double x[16];
    for (int i = 0; i < fn->dim; i++) {
        char name[16];
        snprintf (name, sizeof name, "x%d", i);
        x[i] = json_number_value (json_object_get (params, name));
    }
    return fn->f (x);
}

static void
s_observe (cgq_searcher_t *se, uint64_t id, double v)
{
    json_t *m = json_pack ("{s:f}", "f", v);
    cgq_searcher_observe (se, id, m, v, true);
    json_decref (m);
}

static double
s_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int
s_run (const s_func_t *fn, const char *alg, long long seed, long long budget, bool mv)
{
    cgq_spec_t *spec = s_spec (fn, alg, seed, budget, mv);
    char err[512];
    cgq_searcher_t *se = cgq_searcher_new (spec, NULL, err, sizeof err);
    if (!se) {
        fprintf (stderr, "cgq-bench-tpe: %s\n", err);
        return 2;
    }
    double best = INFINITY;
    cgq_buf_t out;
    cgq_buf_init (&out);
    cgq_buf_puts (&out, "[");
    for (long long i = 0; i < budget; i++) {
        uint64_t id;
        json_t *p = cgq_searcher_suggest (se, &id);
        if (!p)
            break;
        double v = s_eval (fn, p);
        s_observe (se, id, v);
        json_decref (p);
        best = v < best ? v : best;
        cgq_buf_printf (&out, "%s%.10g", i ? ", " : "", best);
    }
    printf ("{\"best\": %.10g, \"trace\": %s]}\n", best, out.data);
    cgq_buf_fini (&out);
    cgq_searcher_destroy (&se);
    cgq_spec_destroy (&spec);
    return 0;
}

static int
s_cost (const s_func_t *fn, long long n, long long reps, bool mv)
{
    cgq_spec_t *spec = s_spec (fn, "tpe", 1, n + reps, mv);
    cgq_spec_t *rs = s_spec (fn, "random", 1, n + reps, false);
    json_t *st = json_pack ("{s:s, s:I}", "algorithm", "tpe", "next", (json_int_t)n);
    char err[512];
    cgq_searcher_t *se = cgq_searcher_new (spec, st, err, sizeof err);
    json_decref (st);
    if (!se) {
        fprintf (stderr, "cgq-bench-tpe: %s\n", err);
        return 2;
    }
    for (long long i = 0; i < n; i++) {
        json_t *p = cgq_space_point (rs, (uint64_t)i);
        double v = s_eval (fn, p);
        json_t *m = json_pack ("{s:f}", "f", v);
        if (cgq_searcher_replay (se, (uint64_t)i, p, m, v, CGQ_REPLAY_SUCCEEDED, err, sizeof err) <
            0) {
            fprintf (stderr, "cgq-bench-tpe: %s\n", err);
            return 2;
        }
        json_decref (m);
        json_decref (p);
    }
    double t0 = s_now ();
    for (long long k = 0; k < reps; k++) {
        uint64_t id;
        json_t *p = cgq_searcher_suggest (se, &id);
        s_observe (se, id, s_eval (fn, p));
        json_decref (p);
    }
    printf ("{\"n\": %lld, \"ms\": %.6g}\n", n, (s_now () - t0) / (double)reps * 1e3);
    cgq_searcher_destroy (&se);
    cgq_spec_destroy (&rs);
    cgq_spec_destroy (&spec);
    return 0;
}

int
main (int argc, char **argv)
{
    const s_func_t *fn = NULL;
    for (size_t i = 0; argc > 2 && i < sizeof s_funcs / sizeof *s_funcs; i++)
        if (!strcmp (argv[2], s_funcs[i].name))
            fn = &s_funcs[i];
    bool run = argc >= 6 && !strcmp (argv[1], "run"), cost = argc >= 5 && !strcmp (argv[1], "cost");
    if (!fn || (!run && !cost)) {
        fprintf (stderr, "usage: cgq-bench-tpe run FUNC tpe|random SEED BUDGET [multivariate]\n"
                         "       cgq-bench-tpe cost FUNC N REPS [multivariate]\n"
                         "FUNC: branin, hartmann6, rosenbrock8\n");
        return 2;
    }
    if (run)
        return s_run (fn, argv[3], atoll (argv[4]), atoll (argv[5]),
                      argc > 6 && !strcmp (argv[6], "multivariate"));
    return s_cost (fn, atoll (argv[3]), atoll (argv[4]),
                   argc > 5 && !strcmp (argv[5], "multivariate"));
}
