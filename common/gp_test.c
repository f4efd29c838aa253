// gp_test: the Gaussian process interpolates what it saw and is unsure far
// from it; fitting raises the log marginal likelihood and finds which input
// matters; expected improvement peaks where it should; a BO loop on Branin
// beats random sampling at the same budget; and a fit with thousands of
// observations costs a bounded time thanks to the cap.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include <dirent.h>
#include <unistd.h>

#include "gp.h"
#include "util.h"

// s_threads counts this process's threads.
static int
s_threads (void)
{
    DIR *d = opendir ("/proc/self/task");
    assert_non_null (d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir (d)))
        n += e->d_name[0] != '.';
    closedir (d);
    return n;
}

// OpenBLAS's pool, one thread per core from the moment it loads, is gone
// after cgq_gp_blas_one_thread; the tests after this one run the model on
// the calling thread, as the daemons do.
static void
t_one_thread (void **state)
{
    (void) state;
    if (getenv ("OPENBLAS_NUM_THREADS")) {
        printf ("t_one_thread: skipped: OPENBLAS_NUM_THREADS is set, which the call leaves "
                "to rule\n");
        return;
    }
    if (sysconf (_SC_NPROCESSORS_ONLN) > 1)
        assert_true (s_threads () > 1); // the pool is there to end
    cgq_gp_blas_one_thread ();
    assert_int_equal (s_threads (), 1);
    assert_int_equal (openblas_get_num_threads (), 1);
}

// A splitmix64 stream for the tests' own sampling.
static double
s_unit (uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double) (z >> 11) * 0x1.0p-53;
}

static void
t_errors (void **state)
{
    assert_null (cgq_gp_new (0));
    assert_null (cgq_gp_new (CGQ_GP_MAX_DIM + 1));
    cgq_gp_t *gp = cgq_gp_new (2);
    assert_non_null (gp);

    double x[] = {0.5, 0.5}, mean, var;
    assert_int_equal (cgq_gp_predict (gp, x, &mean, &var), -1); // nothing observed
    assert_true (cgq_gp_ei (gp, x, 0, 0) == 0);
    assert_int_equal (cgq_gp_nobs (gp), 0);
    assert_true (isnan (cgq_gp_lml (gp)));
    // Without observations a suggestion is a uniform point, and reproducible.
    double s1[2], s2[2];
    assert_int_equal (cgq_gp_suggest (gp, 100, 9, s1), 0);
    assert_int_equal (cgq_gp_suggest (gp, 100, 9, s2), 0);
    assert_memory_equal (s1, s2, sizeof s1);
    assert_true (s1[0] >= 0 && s1[0] < 1 && s1[1] >= 0 && s1[1] < 1);
    assert_int_equal (cgq_gp_suggest (gp, 0, 9, s1), -1);

    double X[] = {0.1, 0.2, 0.3, 0.4}, y[] = {1, 2};
    assert_int_equal (cgq_gp_fit (gp, X, y, 0, 1), -1);
    double ynan[] = {1, NAN}, Xinf[] = {0.1, INFINITY, 0.3, 0.4};
    assert_int_equal (cgq_gp_fit (gp, X, ynan, 2, 1), -1);
    assert_int_equal (cgq_gp_fit (gp, Xinf, y, 2, 1), -1);
    assert_int_equal (cgq_gp_nobs (gp), 0); // a failed fit leaves the model as it was

    double len[] = {0.5, 0.5}, bad[] = {0.5, 100};
    assert_int_equal (cgq_gp_set_hyper (gp, bad, 1, 0.01), -1);
    assert_int_equal (cgq_gp_set_hyper (gp, len, 1000, 0.01), -1);
    assert_int_equal (cgq_gp_set_hyper (gp, len, 1, 0), -1);
    assert_int_equal (cgq_gp_set_hyper (gp, len, 2, 0.001), 0);
    double got[2], sig, noise;
    cgq_gp_hyper (gp, got, &sig, &noise);
    assert_memory_equal (got, len, sizeof len);
    assert_true (sig == 2 && noise == 0.001);

    // One observation, and a constant y, are fine.
    assert_int_equal (cgq_gp_fit (gp, X, y, 1, 1), 0);
    assert_int_equal (cgq_gp_predict (gp, X, &mean, &var), 0);
    assert_true (fabs (mean - 1) < 1e-6);
    double same[] = {3, 3};
    assert_int_equal (cgq_gp_fit (gp, X, same, 2, 1), 0);
    assert_int_equal (cgq_gp_predict (gp, x, &mean, NULL), 0);
    assert_true (fabs (mean - 3) < 1e-6);

    // Repeated inputs with different values (noise) still factor.
    double Xd[] = {0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.7, 0.7}, yd[] = {1, 1.1, 0.9, 5};
    assert_int_equal (cgq_gp_fit (gp, Xd, yd, 4, 1), 0);
    assert_int_equal (cgq_gp_predict (gp, Xd, &mean, &var), 0);
    assert_true (fabs (mean - 1) < 0.2);

    cgq_gp_destroy (&gp);
    assert_null (gp);
    cgq_gp_destroy (&gp);
    cgq_gp_destroy (NULL);
}

static double
s_wave (double x)
{
    return sin (6 * x) + x;
}

static void
t_interpolates (void **state)
{
    cgq_gp_t *gp = cgq_gp_new (1);
    double X[8], y[8], ymin = INFINITY, ymax = -INFINITY;
    for (int i = 0; i < 8; i++) {
        X[i] = 0.5 * i / 7.0; // [0, 0.5]
        y[i] = s_wave (X[i]);
        ymin = fmin (ymin, y[i]);
        ymax = fmax (ymax, y[i]);
    }
    assert_int_equal (cgq_gp_fit (gp, X, y, 8, 3), 0);
    assert_int_equal (cgq_gp_nobs (gp), 8);
    double range = ymax - ymin, max_var_seen = 0;
    for (int i = 0; i < 8; i++) {
        double mean, var;
        assert_int_equal (cgq_gp_predict (gp, &X[i], &mean, &var), 0);
        assert_true (fabs (mean - y[i]) < 1e-3 * range);
        assert_true (var >= 0 && var < 1e-4 * range * range);
        max_var_seen = fmax (max_var_seen, var);
    }
    // Between training points the mean follows the smooth function.
    for (int i = 0; i < 7; i++) {
        double x = 0.5 * (i + 0.5) / 7.0, mean, var;
        cgq_gp_predict (gp, &x, &mean, &var);
        assert_true (fabs (mean - s_wave (x)) < 0.02 * range);
    }
    // Far from the data, the model is unsure.
    double far = 0.95, mean, var;
    cgq_gp_predict (gp, &far, &mean, &var);
    printf ("interpolation: max variance at data %.3g, at x=0.95 %.3g\n", max_var_seen, var);
    assert_true (var > 0.01 * range * range);
    assert_true (var > 1000 * max_var_seen);
    cgq_gp_destroy (&gp);
}

static void
t_lml_improves (void **state)
{
    // y depends on x0 only; x1 is noise-free irrelevance.
    uint64_t rng = 11;
    enum { N = 30 };
    double X[N * 2], y[N];
    for (int i = 0; i < N; i++) {
        X[2 * i] = s_unit (&rng);
        X[2 * i + 1] = s_unit (&rng);
        y[i] = 10 * sin (8 * X[2 * i]);
    }
    cgq_gp_t *gp = cgq_gp_new (2);
    assert_int_equal (cgq_gp_condition (gp, X, y, N, 1), 0);
    double before = cgq_gp_lml (gp);
    double len[2], sig, noise;
    cgq_gp_hyper (gp, len, &sig, &noise);
    assert_true (len[0] == 0.5 && len[1] == 0.5 && sig == 1 && noise == 0.01); // the defaults
    assert_int_equal (cgq_gp_fit (gp, X, y, N, 1), 0);
    double after = cgq_gp_lml (gp);
    cgq_gp_hyper (gp, len, &sig, &noise);
    printf ("log marginal likelihood: %.3f at the defaults, %.3f fitted (lengths %.3g %.3g, "
            "signal %.3g, noise %.3g)\n",
            before, after, len[0], len[1], sig, noise);
    assert_true (after > before + 1);
    // ARD: the irrelevant input gets a much longer scale.
    assert_true (len[1] > 3 * len[0]);
    // Conditioning again on the fitted hyper-parameters gives the same value.
    assert_int_equal (cgq_gp_condition (gp, X, y, N, 1), 0);
    assert_true (fabs (cgq_gp_lml (gp) - after) < 1e-9 * fabs (after));
    // The fit is reproducible.
    cgq_gp_t *again = cgq_gp_new (2);
    assert_int_equal (cgq_gp_fit (again, X, y, N, 1), 0);
    assert_true (cgq_gp_lml (again) == after);
    cgq_gp_destroy (&again);
    cgq_gp_destroy (&gp);
}

static void
t_expected_improvement (void **state)
{
    // f(x) = (x - 0.35)^2 observed at 0, 0.25, 0.5, 0.75, 1: the lowest value
    // seen is at 0.25, the next at 0.5, and the true minimum lies between, so
    // that is where improvement is expected.
    double X[] = {0, 0.25, 0.5, 0.75, 1}, y[5];
    for (int i = 0; i < 5; i++)
        y[i] = (X[i] - 0.35) * (X[i] - 0.35);
    cgq_gp_t *gp = cgq_gp_new (1);
    assert_int_equal (cgq_gp_fit (gp, X, y, 5, 5), 0);
    double best = y[1], argmax = -1, max = -1;
    for (int k = 0; k <= 1000; k++) {
        double x = k / 1000.0, ei = cgq_gp_ei (gp, &x, best, 0);
        assert_true (ei >= 0);
        if (ei > max)
            max = ei, argmax = x;
    }
    printf ("expected improvement: max %.3g at x=%.3f\n", max, argmax);
    assert_true (argmax > 0.25 && argmax < 0.5);
    // No improvement is expected where the value is known.
    for (int i = 0; i < 5; i++)
        assert_true (cgq_gp_ei (gp, &X[i], best, 0) < 0.01 * max);
    // A margin lowers it everywhere.
    assert_true (cgq_gp_ei (gp, &argmax, best, 0.01) < max);
    // EI agrees with the closed form from the posterior.
    double x = 0.4, mean, var;
    cgq_gp_predict (gp, &x, &mean, &var);
    double s = sqrt (var), z = (best - mean) / s;
    double want =
        (best - mean) * 0.5 * erfc (-z / sqrt (2)) + s * exp (-z * z / 2) / sqrt (2 * M_PI);
    assert_true (fabs (cgq_gp_ei (gp, &x, best, 0) - want) < 1e-12 + 1e-9 * want);
    // In a batch (more points than one chunk), the same values as one by one.
    double grid[601], many[601];
    for (int k = 0; k <= 600; k++)
        grid[k] = k / 600.0;
    cgq_gp_ei_many (gp, grid, 601, best, 0.01, many);
    for (int k = 0; k <= 600; k++) {
        double one = cgq_gp_ei (gp, &grid[k], best, 0.01);
        if (fabs (many[k] - one) > 1e-12 + 1e-9 * one)
            fail_msg ("x=%g: batch EI %.17g, single %.17g", grid[k], many[k], one);
    }
    // The suggestion lands in the same place.
    double sx;
    assert_int_equal (cgq_gp_suggest (gp, 500, 1, &sx), 0);
    printf ("suggestion: x=%.3f\n", sx);
    assert_true (sx > 0.2 && sx < 0.55);
    double sx2;
    cgq_gp_suggest (gp, 500, 1, &sx2);
    assert_true (sx == sx2); // same seed, same point
    cgq_gp_destroy (&gp);
}

// Branin on [0,1]^2 (x1 in [-5, 10], x2 in [0, 15]); its minimum is 0.397887.
static double
s_branin (const double *u)
{
    double x1 = -5 + 15 * u[0], x2 = 15 * u[1];
    double b = 5.1 / (4 * M_PI * M_PI), c = 5 / M_PI, t = 1 / (8 * M_PI);
    double q = x2 - b * x1 * x1 + c * x1 - 6;
    return q * q + 10 * (1 - t) * cos (x1) + 10;
}

static void
t_branin (void **state)
{
    enum { BUDGET = 40, INIT = 5, SEEDS = 5 };
    double bo_sum = 0, rnd_sum = 0;
    for (int seed = 1; seed <= SEEDS; seed++) {
        // Random sampling: BUDGET uniform points.
        uint64_t rng = 1000 + (uint64_t) seed;
        double rnd_best = INFINITY;
        for (int i = 0; i < BUDGET; i++) {
            double u[2] = {s_unit (&rng), s_unit (&rng)};
            rnd_best = fmin (rnd_best, s_branin (u));
        }
        // BO: INIT uniform points from another stream, then one fit and one
        // suggestion per evaluation.
        rng = 2000 + (uint64_t) seed;
        double X[BUDGET * 2], y[BUDGET], bo_best = INFINITY;
        cgq_gp_t *gp = cgq_gp_new (2);
        for (int i = 0; i < BUDGET; i++) {
            if (i < INIT) {
                X[2 * i] = s_unit (&rng);
                X[2 * i + 1] = s_unit (&rng);
            }
            else {
                assert_int_equal (cgq_gp_fit (gp, X, y, i, (uint64_t) (seed * 100 + i)), 0);
                assert_int_equal (cgq_gp_suggest (gp, 1000, (uint64_t) (seed * 100 + i), &X[2 * i]),
                                  0);
            }
            y[i] = s_branin (&X[2 * i]);
            bo_best = fmin (bo_best, y[i]);
        }
        cgq_gp_destroy (&gp);
        printf ("branin seed %d: best after %d evaluations: bo %.4f, random %.4f\n", seed, BUDGET,
                bo_best, rnd_best);
        bo_sum += bo_best;
        rnd_sum += rnd_best;
    }
    printf ("branin mean best over %d seeds (minimum 0.3979): bo %.4f, random %.4f\n", SEEDS,
            bo_sum / SEEDS, rnd_sum / SEEDS);
    assert_true (bo_sum < rnd_sum);
    // And BO is close to the minimum, not just less bad than chance.
    assert_true (bo_sum / SEEDS < 1.0);
}

static void
t_capped_cost (void **state)
{
    enum { N = 2000, D = 4 };
    double *X = cgq_xmalloc (N * D * sizeof *X), *y = cgq_xmalloc (N * sizeof *y);
    uint64_t rng = 5;
    int best = 0;
    for (int i = 0; i < N; i++) {
        double s = 0;
        for (int j = 0; j < D; j++) {
            X[i * D + j] = s_unit (&rng);
            s += (X[i * D + j] - 0.3) * (X[i * D + j] - 0.3);
        }
        y[i] = s + 0.1 * sin (20 * X[i * D]);
        if (y[i] < y[best])
            best = i;
    }
    cgq_gp_t *gp = cgq_gp_new (D);
    // CPU time of this thread (OpenBLAS's own threads come on top): other
    // work on a loaded machine does not count against the bound.
    int64_t t0 = cgq_thread_cpu_ms ();
    assert_int_equal (cgq_gp_fit (gp, X, y, N, 7), 0);
    int64_t t1 = cgq_thread_cpu_ms ();
    double x[D];
    assert_int_equal (cgq_gp_suggest (gp, 2000, 7, x), 0);
    int64_t t2 = cgq_thread_cpu_ms ();
    printf ("%d observations: fit %lld ms, suggest (2000 candidates) %lld ms of CPU\n", N,
            (long long) (t1 - t0), (long long) (t2 - t1));
    assert_int_equal (cgq_gp_nobs (gp), CGQ_GP_MAX_OBS);
    // The bound holds under the sanitizers on a loaded machine; uncapped, the
    // same fit is hundreds of 2000^3 factorisations.
    assert_true (t2 - t0 < 20000);
    // The best observation is always kept, so the model knows it.
    double mean;
    cgq_gp_predict (gp, X + best * D, &mean, NULL);
    assert_true (fabs (mean - y[best]) < 0.01);
    for (int j = 0; j < D; j++)
        assert_true (x[j] >= 0 && x[j] <= 1);
    cgq_gp_destroy (&gp);
    free (X);
    free (y);
}

// The batch posterior equals the one-point one; the probability of
// feasibility is the normal CDF of the posterior below the threshold: high
// where the modelled violation is known 0, low where it is known large,
// near 1/2 on the boundary, and all 1 without observations.
static void
t_probability_of_feasibility (void **state)
{
    (void) state;
    // Violation max(0, x - 0.5) observed on a grid of [0,1].
    double X[11], y[11];
    for (int i = 0; i <= 10; i++) {
        X[i] = i / 10.0;
        y[i] = X[i] > 0.5 ? X[i] - 0.5 : 0;
    }
    cgq_gp_t *gp = cgq_gp_new (1);
    double grid[601], mean[601], var[601], pof[601];
    for (int k = 0; k <= 600; k++)
        grid[k] = k / 600.0;
    assert_int_equal (cgq_gp_predict_many (gp, grid, 601, mean, var), -1);
    cgq_gp_pof_many (gp, grid, 601, 0, pof);
    for (int k = 0; k <= 600; k++)
        assert_true (pof[k] == 1);
    assert_int_equal (cgq_gp_fit (gp, X, y, 11, 3), 0);
    assert_int_equal (cgq_gp_predict_many (gp, grid, 601, mean, var), 0);
    assert_int_equal (cgq_gp_predict_many (gp, grid, 601, NULL, NULL), 0);
    cgq_gp_pof_many (gp, grid, 601, 0, pof);
    for (int k = 0; k <= 600; k++) {
        double m, v;
        cgq_gp_predict (gp, &grid[k], &m, &v);
        if (fabs (m - mean[k]) > 1e-12 + 1e-9 * fabs (m) || fabs (v - var[k]) > 1e-12 + 1e-9 * v)
            fail_msg ("x=%g: batch %.17g/%.17g, single %.17g/%.17g", grid[k], mean[k], var[k], m,
                      v);
        double want = v > 0 ? 0.5 * erfc (m / sqrt (2 * v)) : m <= 0 ? 1 : 0;
        if (fabs (pof[k] - want) > 1e-12)
            fail_msg ("x=%g: pof %.17g, want %.17g", grid[k], pof[k], want);
        assert_true (pof[k] >= 0 && pof[k] <= 1);
    }
    printf ("pof: x=0.2 %.3f, x=0.5 %.3f, x=0.8 %.3f, x=1 %.3g\n", pof[120], pof[300], pof[480],
            pof[600]);
    assert_true (pof[120] > 0.3); // violation 0 there: not infeasible
    assert_true (pof[480] < 0.05 && pof[600] < 0.05);
    assert_true (pof[120] > 5 * pof[480]);
    // A threshold above the known violation makes it likely feasible.
    double at = 0.8, p;
    cgq_gp_pof_many (gp, &at, 1, 1.0, &p);
    assert_true (p > 0.99);
    cgq_gp_destroy (&gp);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (t_one_thread),
        cmocka_unit_test (t_errors),       cmocka_unit_test (t_interpolates),
        cmocka_unit_test (t_lml_improves), cmocka_unit_test (t_expected_improvement),
        cmocka_unit_test (t_branin),       cmocka_unit_test (t_capped_cost),
        cmocka_unit_test (t_probability_of_feasibility),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
