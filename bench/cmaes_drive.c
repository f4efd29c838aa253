// cgq-bench-cmaes: the cmaes (and random) searcher driven in one process for
// bench/cmaes_optuna.py, through searcher.h as the coordinator drives it: suggest,
// run the function, observe, one trial at a time (so a generation is
// suggested, then observed, then the next). The quality figures are the
// searcher's own; the cost figure is what one suggest + observe costs the
// coordinator's loop, the generation's update included.
//
//   cgq-bench-cmaes run FUNC ALG SEED BUDGET [RESTARTS]
//       one search; prints {"best": B, "trials": N}
//   cgq-bench-cmaes cost FUNC N
//       a cmaes search of N trials; prints {"n": N, "ms": per trial}
//
// FUNC: rosenbrock8 (8-D on [-5, 10]), ellipsoid8 (8-D on [-5, 5], axis
// scales 1 .. 1e6, optimum 0 at a shifted point), ellipsoid8w and sphere8w
// (params of ranges 10 .. 10,000 wide; below). ALG: cmaes or random.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "json.h"
#include "searcher.h"
#include "spec.h"
#include "util.h"

typedef struct {
    const char *name;
    int dim;
    double lo, hi;
    double (*f) (const double *x);
    const double *k; // NULL, or param i's range is k[i] [lo, hi]
} s_func_t;

static double
s_rosenbrock8 (const double *x)
{
    double s = 0;
    for (int i = 0; i < 7; i++)
        s += 100 * pow (x[i + 1] - x[i] * x[i], 2) + pow (x[i] - 1, 2);
    return s;
}

// The shift that bench/cmaes_optuna.py uses too.
static const double s_shift[8] = {1.5, -2.5, 0.5, 3.0, -1.0, 2.0, -3.5, 0.25};

static double
s_ellipsoid8 (const double *x)
{
    double s = 0;
    for (int i = 0; i < 8; i++)
        s += pow (1e6, i / 7.0) * pow (x[i] - s_shift[i], 2);
    return s;
}

// Params of different ranges, k_i = 10^(3i/7) (param i on [-5 k_i, 5 k_i],
// ranges 10 .. 10,000 wide), two ways round:
// ellipsoid8w(x) = ellipsoid8(x_i / k_i): the ellipsoid in each param's own
//   box (cgq's cmaes, which searches that box, finds the same values as on
//   ellipsoid8), but a sphere in the params' own units (where Optuna 3.1's
//   CmaEsSampler searches, with one sigma0 = the narrowest range / 6);
// sphere8w(x) = sum (x_i / k_i - shift_i)^2: a sphere in each param's box
//   (each param matters in proportion to its range), an ellipsoid of
//   condition 1e6 in the params' own units.
static double s_k[8];

static double
s_ellipsoid8w (const double *x)
{
    double u[8];
    for (int i = 0; i < 8; i++)
        u[i] = x[i] / s_k[i];
    return s_ellipsoid8 (u);
}

static double
s_sphere8w (const double *x)
{
    double s = 0;
    for (int i = 0; i < 8; i++)
        s += pow (x[i] / s_k[i] - s_shift[i], 2);
    return s;
}

static const s_func_t s_funcs[] = {
    {"rosenbrock8", 8, -5, 10, s_rosenbrock8, NULL},
    {"ellipsoid8", 8, -5, 5, s_ellipsoid8, NULL},
    {"ellipsoid8w", 8, -5, 5, s_ellipsoid8w, s_k},
    {"sphere8w", 8, -5, 5, s_sphere8w, s_k},
};

static cgq_spec_t *
s_spec (const s_func_t *fn, const char *alg, long long seed, long long samples, int restarts)
{
    cgq_buf_t y;
    cgq_buf_init (&y);
    cgq_buf_puts (&y, "space:\n");
    for (int i = 0; i < fn->dim; i++)
        cgq_buf_printf (&y, "  x%d: {uniform: [%.17g, %.17g]}\n", i,
                        fn->k ? fn->k[i] * fn->lo : fn->lo, fn->k ? fn->k[i] * fn->hi : fn->hi);
    cgq_buf_printf (&y, "search: {algorithm: %s, samples: %lld, seed: %lld", alg, samples, seed);
    if (restarts)
        cgq_buf_printf (&y, ", restarts: %d", restarts);
    cgq_buf_puts (&y, "}\nobjective: {metric: f, mode: min}\ntrial: {kind: noop}\n");
    char err[1024];
    cgq_spec_t *spec = cgq_spec_parse (y.data, y.len, "bench.yaml", err, sizeof err);
    cgq_buf_fini (&y);
    if (!spec) {
        fprintf (stderr, "cgq-bench-cmaes: %s\n", err);
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

static double
s_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// s_search runs one search; returns the best value, *n the trials run.
static double
s_search (const s_func_t *fn, const char *alg, long long seed, long long budget, int restarts,
          long long *n)
{
    cgq_spec_t *spec = s_spec (fn, alg, seed, budget, restarts);
    char err[512];
    cgq_searcher_t *se = cgq_searcher_new (spec, NULL, err, sizeof err);
    if (!se) {
        fprintf (stderr, "cgq-bench-cmaes: %s\n", err);
        exit (2);
    }
    double best = INFINITY;
    uint64_t *out = cgq_xmalloc ((size_t)budget * sizeof *out);
    double *val = cgq_xmalloc ((size_t)budget * sizeof *val);
    *n = 0;
    while (!cgq_searcher_done (se)) {
        // Suggest until the searcher waits (a whole generation), then observe.
        size_t k = 0;
        uint64_t id;
        json_t *p;
        while ((p = cgq_searcher_suggest (se, &id))) {
            out[k] = id;
            val[k++] = s_eval (fn, p);
            json_decref (p);
        }
        if (!k)
            break;
        for (size_t i = 0; i < k; i++) {
            json_t *m = json_pack ("{s:f}", "f", val[i]);
            cgq_searcher_observe (se, out[i], m, val[i], true);
            json_decref (m);
            best = val[i] < best ? val[i] : best;
        }
        *n += (long long)k;
    }
    free (out);
    free (val);
    cgq_searcher_destroy (&se);
    cgq_spec_destroy (&spec);
    return best;
}

int
main (int argc, char **argv)
{
    for (int i = 0; i < 8; i++)
        s_k[i] = pow (10, 3 * i / 7.0);
    const s_func_t *fn = NULL;
    for (size_t i = 0; argc > 2 && i < sizeof s_funcs / sizeof *s_funcs; i++)
        if (!strcmp (argv[2], s_funcs[i].name))
            fn = &s_funcs[i];
    bool run = argc >= 6 && !strcmp (argv[1], "run"), cost = argc >= 4 && !strcmp (argv[1], "cost");
    if (!fn || (!run && !cost)) {
        fprintf (stderr, "usage: cgq-bench-cmaes run FUNC cmaes|random SEED BUDGET [RESTARTS]\n"
                         "       cgq-bench-cmaes cost FUNC N\n"
                         "FUNC: rosenbrock8, ellipsoid8, ellipsoid8w, sphere8w\n");
        return 2;
    }
    long long n;
    if (run) {
        double best = s_search (fn, argv[3], atoll (argv[4]), atoll (argv[5]),
                                argc > 6 ? atoi (argv[6]) : 0, &n);
        printf ("{\"best\": %.10g, \"trials\": %lld}\n", best, n);
        return 0;
    }
    double t0 = s_now ();
    s_search (fn, "cmaes", 1, atoll (argv[3]), 0, &n);
    printf ("{\"n\": %lld, \"ms\": %.6g}\n", n, (s_now () - t0) / (double)n * 1e3);
    return 0;
}
