// cmaes_test: the CMA-ES update against NumPy. Three generations from fixed
// points and fitness (a tie in the third), each time the mean, sigma, C and
// both paths as common/cmaes_expected.py computes them from the tutorial's
// equations; the weights; sampling reproduces C; the stop tests fire on a
// converged sphere and on a flat function with failures.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cmaes.h"
#include "cmaes_expected.h"
#include "cmaes_warm_expected.h"

static void
s_close (const char *what, const double *got, const double *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!(fabs (got[i] - want[i]) <= 1e-12 * fmax (1, fabs (want[i]))))
            fail_msg ("%s[%zu] = %.17g, numpy says %.17g", what, i, got[i], want[i]);
}

static void
t_update (void **state)
{
    cgq_cmaes_t *c = cgq_cmaes_new (S_N, 0, s_mean0, s_sigma0);
    assert_int_equal (cgq_cmaes_lambda (c), S_LAMBDA);
    s_close ("weights", cgq_cmaes_weights (c), s_weights, S_LAMBDA);
    for (int g = 0; g < S_GENS; g++) {
        cgq_cmaes_tell (c, &s_x[g * S_LAMBDA * S_N], &s_f[g * S_LAMBDA]);
        char what[32];
        snprintf (what, sizeof what, "gen %d mean", g + 1);
        s_close (what, cgq_cmaes_mean (c), &s_mean[g * S_N], S_N);
        double sg = cgq_cmaes_sigma (c);
        snprintf (what, sizeof what, "gen %d sigma", g + 1);
        s_close (what, &sg, &s_sigma[g], 1);
        snprintf (what, sizeof what, "gen %d C", g + 1);
        s_close (what, cgq_cmaes_cov (c), &s_cov[g * S_N * S_N], S_N * S_N);
        snprintf (what, sizeof what, "gen %d p_c", g + 1);
        s_close (what, cgq_cmaes_pc (c), &s_pc[g * S_N], S_N);
        snprintf (what, sizeof what, "gen %d p_sigma", g + 1);
        s_close (what, cgq_cmaes_psigma (c), &s_ps[g * S_N], S_N);
    }
    assert_int_equal (cgq_cmaes_generation (c), S_GENS);
    // sum_j (B D e_j)(B D e_j)^T = C, whatever the eigenvectors' signs.
    double acc[S_N * S_N] = {0}, x[S_N];
    for (int j = 0; j < S_N; j++) {
        double z[S_N] = {0};
        z[j] = 1;
        cgq_cmaes_sample (c, z, x);
        for (int a = 0; a < S_N; a++)
            for (int b = 0; b < S_N; b++) {
                double s = cgq_cmaes_sigma (c);
                acc[a * S_N + b] +=
                    (x[a] - cgq_cmaes_mean (c)[a]) / s * (x[b] - cgq_cmaes_mean (c)[b]) / s;
            }
    }
    for (int i = 0; i < S_N * S_N; i++)
        assert_true (fabs (acc[i] - cgq_cmaes_cov (c)[i]) < 1e-9);
    printf ("  3 generations: mean, sigma, C, p_c, p_sigma within 1e-12 of numpy; sigma %.6f\n",
            cgq_cmaes_sigma (c));
    cgq_cmaes_destroy (&c);
    cgq_cmaes_destroy (&c); // NULL-safe
}

// Converging on a sphere until a stop test fires; then a flat function,
// where TolFun fires once the history is full.
static void
t_stop (void **state)
{
    double m[3] = {0.9, 0.1, 0.5};
    cgq_cmaes_t *c = cgq_cmaes_new (3, 0, m, 0.3);
    const char *why = NULL;
    size_t L = cgq_cmaes_lambda (c);
    double x[64 * 3], f[64];
    uint64_t seed = 7;
    int gens = 0;
    while (!cgq_cmaes_should_stop (c, 1e-12, 1e-12 * 0.3, &why) && gens < 5000) {
        for (size_t k = 0; k < L; k++) {
            double z[3];
            for (int i = 0; i < 3; i++) { // Box-Muller from a splitmix64
                double u[2];
                for (int j = 0; j < 2; j++) {
                    uint64_t s = (seed += 0x9e3779b97f4a7c15ULL);
                    s = (s ^ (s >> 30)) * 0xbf58476d1ce4e5b9ULL;
                    s = (s ^ (s >> 27)) * 0x94d049bb133111ebULL;
                    u[j] = ((s ^ (s >> 31)) >> 11) * 0x1.0p-53;
                }
                z[i] = sqrt (-2 * log (1 - u[0])) * cos (2 * M_PI * u[1]);
            }
            cgq_cmaes_sample (c, z, &x[k * 3]);
            f[k] = 0;
            for (int i = 0; i < 3; i++)
                f[k] += (x[k * 3 + i] - 0.25) * (x[k * 3 + i] - 0.25) * (i + 1);
        }
        cgq_cmaes_tell (c, x, f);
        gens++;
    }
    assert_non_null (why);
    printf ("  sphere: stopped after %d generations by %s, mean %.9f %.9f %.9f\n", gens, why,
            cgq_cmaes_mean (c)[0], cgq_cmaes_mean (c)[1], cgq_cmaes_mean (c)[2]);
    for (int i = 0; i < 3; i++)
        assert_true (fabs (cgq_cmaes_mean (c)[i] - 0.25) < 1e-5);
    cgq_cmaes_destroy (&c);

    // A flat function with one failed point (+inf) in every generation:
    // TolFun fires once its history is full (10 + ceil(30 * 3 / 7) = 23).
    c = cgq_cmaes_new (3, 0, m, 0.3);
    gens = 0;
    while (!cgq_cmaes_should_stop (c, 1e-12, 1e-12 * 0.3, &why) && gens < 100) {
        for (size_t k = 0; k < L; k++) {
            for (int i = 0; i < 3; i++)
                x[k * 3 + i] = cgq_cmaes_mean (c)[i] + 0.01 * (double)((k + (size_t)i) % 3);
            f[k] = k == 2 ? INFINITY : 1;
        }
        cgq_cmaes_tell (c, x, f);
        gens++;
    }
    printf ("  flat with a failure per generation: stopped after %d generations by %s\n", gens,
            why);
    assert_string_equal (why, "tolfun");
    assert_int_equal (gens, 24);
    cgq_cmaes_destroy (&c);
}

// The warm-start distribution against the cmaes library's
// get_warm_start_mgd (cmaes_warm_expected.py); then a distribution started
// from it samples around its mean with its shape; one point and a NaN.
static void
t_warm_mgd (void **state)
{
    (void)state;
    double mean[S_WN], sigma, cov[S_WN * S_WN];
    assert_int_equal (cgq_cmaes_warm_mgd (S_WN, S_WNP, s_wx, s_wf, s_wa_gamma, s_wa_alpha, mean,
                                          &sigma, cov),
                      0);
    s_close ("a mean", mean, s_wa_mean, S_WN);
    s_close ("a sigma", &sigma, &s_wa_sigma, 1);
    s_close ("a cov", cov, s_wa_cov, S_WN * S_WN);
    assert_int_equal (cgq_cmaes_warm_mgd (S_WN, S_WNP, s_wx, s_wf, s_wb_gamma, s_wb_alpha, mean,
                                          &sigma, cov),
                      0);
    s_close ("b mean", mean, s_wb_mean, S_WN);
    s_close ("b sigma", &sigma, &s_wb_sigma, 1);
    s_close ("b cov", cov, s_wb_cov, S_WN * S_WN);
    cgq_cmaes_t *c = cgq_cmaes_new (S_WN, 0, mean, sigma);
    cgq_cmaes_set_cov (c, cov);
    s_close ("started cov", cgq_cmaes_cov (c), s_wb_cov, S_WN * S_WN);
    double acc[S_WN * S_WN] = {0}, x[S_WN];
    for (int j = 0; j < S_WN; j++) {
        double z[S_WN] = {0};
        z[j] = 1;
        cgq_cmaes_sample (c, z, x);
        for (int a = 0; a < S_WN; a++)
            for (int b = 0; b < S_WN; b++)
                acc[a * S_WN + b] += (x[a] - mean[a]) / sigma * (x[b] - mean[b]) / sigma;
    }
    for (int a = 0; a < S_WN * S_WN; a++)
        assert_true (fabs (acc[a] - s_wb_cov[a]) < 1e-9);
    cgq_cmaes_destroy (&c);
    // One point (the library asserts floor(gamma n) >= 1): that point, alpha, C = I.
    assert_int_equal (cgq_cmaes_warm_mgd (S_WN, 1, s_wx, s_wf, 0.1, 0.1, mean, &sigma, cov), 0);
    s_close ("one mean", mean, s_wx, S_WN);
    assert_true (fabs (sigma - 0.1) < 1e-12);
    for (int a = 0; a < S_WN; a++)
        for (int b = 0; b < S_WN; b++)
            assert_true (fabs (cov[a * S_WN + b] - (a == b)) < 1e-12);
    double bad[S_WN] = {NAN, 0.5, 0.5}, f1 = 1;
    assert_int_equal (cgq_cmaes_warm_mgd (S_WN, 1, bad, &f1, 0.1, 0.1, mean, &sigma, cov), -1);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (t_update),
        cmocka_unit_test (t_stop),
        cmocka_unit_test (t_warm_mgd),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
