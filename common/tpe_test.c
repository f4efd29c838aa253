// tpe_test: the Parzen estimator's log densities, the gamma split, the
// weights, the truncated normal and the candidate chosen, each against the
// numbers Optuna computes for the same observations (tpe_expected.py wrote
// tpe_expected.h); and the estimator's samples follow its own density.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pareto.h"
#include "search_impl.h"
#include "tpe.h"
#include "util.h"

#include "tpe_expected.h"

#define S_TOL 1e-9

static double s_worst; // the largest difference s_close has seen, for the printout

// s_close fails unless got is within S_TOL of want, relative to |want| (or
// absolute below 1).
static void
s_close (const char *what, size_t i, double got, double want)
{
    double scale = fabs (want) > 1 ? fabs (want) : 1;
    if (fabs (got - want) / scale > s_worst)
        s_worst = fabs (got - want) / scale;
    if (!(fabs (got - want) <= S_TOL * scale))
        fail_msg ("%s[%zu]: got %.17g, Optuna %.17g (off by %.3g)", what, i, got, want,
                  fabs (got - want) / scale);
}

// Each estimator's log density at fixed points, as Optuna's _ParzenEstimator
// computes it: univariate reals, log reals, integers, steps, integers on a
// log scale, categories; no observation, one, and 30 / 40 (older ones on
// the weights' ramp); multivariate over three kinds at once.
static void
t_log_pdf (void **state)
{
    for (size_t c = 0; c < sizeof s_est_cases / sizeof *s_est_cases; c++) {
        const s_est_case_t *e = &s_est_cases[c];
        cgq_tpe_t *pe =
            cgq_tpe_new (e->dims, e->ndim, e->nobs ? e->obs : NULL, e->nobs, e->multivariate);
        double out[16];
        assert_true (e->npts <= 16);
        cgq_tpe_log_pdf (pe, e->pts, e->npts, out);
        for (size_t j = 0; j < e->npts; j++)
            s_close (e->name, j, out[j], e->log_pdf[j]);
        printf ("  %-8s %zu observations, %zu dimension(s): %zu log densities match Optuna\n",
                e->name, e->nobs, e->ndim, e->npts);
        cgq_tpe_destroy (&pe);
    }
    printf ("  largest relative difference: %.2g\n", s_worst);
}

static void
t_gamma_weights (void **state)
{
    for (size_t i = 0; i < sizeof s_gamma_n / sizeof *s_gamma_n; i++)
        assert_int_equal (cgq_tpe_gamma (s_gamma_n[i]), s_gamma[i]);
    double w[40];
    cgq_tpe_weights (40, w);
    for (size_t i = 0; i < 40; i++)
        s_close ("weights40", i, w[i], s_weights40[i]);
    cgq_tpe_weights (3, w);
    assert_true (w[0] == 1 && w[2] == 1);
}

static void
t_truncnorm (void **state)
{
    for (size_t i = 0; i < sizeof s_mass / sizeof *s_mass; i++)
        s_close ("log_mass", i, cgq_tpe_log_mass (s_mass_ab[i][0], s_mass_ab[i][1]), s_mass[i]);
    for (size_t i = 0; i < sizeof s_ppf / sizeof *s_ppf; i++) {
        double x = cgq_tpe_ppf (s_ppf_qab[i][0], s_ppf_qab[i][1], s_ppf_qab[i][2]);
        s_close ("ppf", i, x, s_ppf[i]);
        assert_true (x >= s_ppf_qab[i][1] && x <= s_ppf_qab[i][2]);
    }
    // The ends, and a quantile maps back to itself through the mass.
    assert_true (cgq_tpe_ppf (0, -1, 2) == -1 && cgq_tpe_ppf (1, -1, 2) == 2);
    for (double q = 0.05; q < 1; q += 0.1) {
        double a = -0.7, b = 2.2, x = cgq_tpe_ppf (q, a, b);
        double back = exp (cgq_tpe_log_mass (a, x) - cgq_tpe_log_mass (a, b));
        assert_true (fabs (back - q) < 1e-12);
    }
    printf ("  log mass and quantiles: largest relative difference %.2g\n", s_worst);
}

// The split (3 trials in flight among 20: the constant liar puts them
// above) and the candidate chosen by log l(x) - log g(x), per param and
// jointly, as Optuna's sampler does.
static void
t_split_choose (void **state)
{
    size_t n = sizeof s_split_loss / sizeof *s_split_loss, nok = 0;
    for (size_t i = 0; i < n; i++)
        nok += isfinite (s_split_loss[i]);
    size_t nbelow = cgq_tpe_gamma (nok);
    assert_int_equal (nbelow, sizeof s_split_below / sizeof *s_split_below);
    size_t below[32], above[32];
    cgq_tpe_split (s_split_loss, n, nbelow, below, above);
    for (size_t i = 0; i < nbelow; i++)
        assert_int_equal (below[i], s_split_below[i]);
    for (size_t i = 0; i < n - nbelow; i++)
        assert_int_equal (above[i], s_split_above[i]);

    const cgq_tpe_dim_t dx = {CGQ_TPE_REAL, -5, 10, 0, 0}, dk = {CGQ_TPE_STEP, -0.5, 20.5, 1, 0};
    const cgq_tpe_dim_t both[2] = {dx, dk};
    size_t ncand = sizeof s_cand_x / sizeof *s_cand_x;
    for (int mv = 0; mv < 2; mv++) {
        for (int g = mv ? 2 : 0; g < (mv ? 3 : 2); g++) {
            // g: 0 x alone, 1 k alone, 2 both
            size_t nd = g == 2 ? 2 : 1;
            const cgq_tpe_dim_t *dims = g == 2 ? both : g == 0 ? &dx : &dk;
            double ob[64], oa[64], cand[32], lb[16], la[16], score[16];
            for (size_t i = 0; i < nbelow; i++) {
                ob[i * nd] = g == 1 ? s_split_k[below[i]] : s_split_x[below[i]];
                if (nd == 2)
                    ob[i * nd + 1] = s_split_k[below[i]];
            }
            for (size_t i = 0; i < n - nbelow; i++) {
                oa[i * nd] = g == 1 ? s_split_k[above[i]] : s_split_x[above[i]];
                if (nd == 2)
                    oa[i * nd + 1] = s_split_k[above[i]];
            }
            for (size_t i = 0; i < ncand; i++) {
                cand[i * nd] = g == 1 ? s_cand_k[i] : s_cand_x[i];
                if (nd == 2)
                    cand[i * nd + 1] = s_cand_k[i];
            }
            cgq_tpe_t *l = cgq_tpe_new (dims, nd, ob, nbelow, mv);
            cgq_tpe_t *a = cgq_tpe_new (dims, nd, oa, n - nbelow, mv);
            cgq_tpe_log_pdf (l, cand, ncand, lb);
            cgq_tpe_log_pdf (a, cand, ncand, la);
            const double *want = g == 0 ? s_uv_x_score : g == 1 ? s_uv_k_score : s_mv_x_k_score;
            size_t best = g == 0 ? s_uv_x_best : g == 1 ? s_uv_k_best : s_mv_x_k_best;
            for (size_t i = 0; i < ncand; i++) {
                score[i] = lb[i] - la[i];
                s_close (g == 0 ? "uv x" : g == 1 ? "uv k" : "mv", i, score[i], want[i]);
            }
            assert_int_equal (cgq_tpe_best (score, ncand), best);
            cgq_tpe_destroy (&l);
            cgq_tpe_destroy (&a);
        }
    }
    printf ("  split, scores and choices match; largest relative difference %.2g\n", s_worst);
    // Ties go to the first; NaN never wins.
    const double s[] = {NAN, 1, 3, 3, NAN};
    assert_int_equal (cgq_tpe_best (s, 5), 2);
}

// Samples follow the estimator's own density: the frequency of each value
// of an integer estimator and the mean of a real one (against the density
// integrated numerically), over 200,000 draws; all within the bounds.
static void
t_sample (void **state)
{
    const size_t m = 200000;
    double *x = cgq_xmalloc (m * sizeof *x);
    cgq_rng_t r;
    for (size_t c = 0; c < sizeof s_est_cases / sizeof *s_est_cases; c++) {
        const s_est_case_t *e = &s_est_cases[c];
        if (e->ndim != 1)
            continue;
        const cgq_tpe_dim_t *dim = &e->dims[0];
        cgq_tpe_t *pe = cgq_tpe_new (e->dims, 1, e->nobs ? e->obs : NULL, e->nobs, false);
        cgq_rng_seed (&r, 5, c, 1);
        cgq_tpe_sample (pe, &r, m, x);
        if (dim->kind == CGQ_TPE_REAL) {
            double mean = 0;
            for (size_t j = 0; j < m; j++) {
                assert_true (x[j] >= dim->low && x[j] <= dim->high);
                mean += x[j] / (double)m;
            }
            // The density's mean, by the midpoint rule on 20,000 cells.
            const size_t cells = 20000;
            double h = (dim->high - dim->low) / (double)cells, want = 0, mass = 0;
            for (size_t i = 0; i < cells; i++) {
                double at = dim->low + ((double)i + 0.5) * h, lp;
                cgq_tpe_log_pdf (pe, &at, 1, &lp);
                want += at * exp (lp) * h;
                mass += exp (lp) * h;
            }
            assert_true (fabs (mass - 1) < 1e-6); // the kernels are normalised
            double tol = 4e-3 * (dim->high - dim->low);
            if (fabs (mean - want) > tol)
                fail_msg ("%s: sample mean %g, density's mean %g", e->name, mean, want);
        }
        else {
            size_t nv = dim->kind == CGQ_TPE_STEP
                            ? (size_t)llround ((dim->high - dim->low) / dim->step)
                            : (size_t)dim->n;
            double *freq = cgq_xcalloc (nv, sizeof *freq), total = 0;
            double first = dim->kind == CGQ_TPE_STEP ? dim->low + 0.5 * dim->step : 0;
            double step = dim->kind == CGQ_TPE_STEP ? dim->step : 1;
            for (size_t j = 0; j < m; j++) {
                double i = (x[j] - first) / step;
                assert_true (i >= 0 && i < (double)nv && fabs (i - round (i)) < 1e-9);
                freq[(size_t)llround (i)] += 1.0 / (double)m;
            }
            for (size_t i = 0; i < nv; i++) {
                double at = first + (double)i * step, lp;
                cgq_tpe_log_pdf (pe, &at, 1, &lp);
                total += exp (lp);
                if (fabs (freq[i] - exp (lp)) > 4e-3)
                    fail_msg ("%s: value %zu drawn %.4f of the time, probability %.4f", e->name, i,
                              freq[i], exp (lp));
            }
            assert_true (fabs (total - 1) < 1e-9);
            free (freq);
        }
        cgq_tpe_destroy (&pe);
    }
    free (x);
}

// MOTPE: the split of several objectives (whole fronts, then hypervolume
// subset selection) gives Optuna's good group in Optuna's order and its bad
// group; the good group's weights are Optuna's hypervolume contributions;
// an estimator with those weights has Optuna's log densities.
static void
t_multi (void **state)
{
    for (size_t c = 0; c < sizeof s_mo_cases / sizeof *s_mo_cases; c++) {
        const s_mo_case_t *e = &s_mo_cases[c];
        size_t *below = cgq_xmalloc (e->nbelow * sizeof *below);
        size_t *above = cgq_xmalloc ((e->n - e->nbelow) * sizeof *above);
        cgq_tpe_split_multi (e->loss, e->n, e->m, e->nbelow, below, above);
        for (size_t i = 0; i < e->nbelow; i++)
            if (below[i] != e->below[i])
                fail_msg ("%s: below[%zu] is %zu, Optuna has %zu", e->name, i, below[i],
                          e->below[i]);
        for (size_t i = 0; i < e->n - e->nbelow; i++)
            assert_int_equal (above[i], e->above[i]);
        double *w = cgq_xmalloc (e->nbelow * sizeof *w);
        cgq_tpe_weights_multi (e->loss, e->m, below, e->nbelow, w);
        for (size_t i = 0; i < e->nbelow; i++)
            s_close (e->name, i, w[i], e->weights[i]);
        free (w);
        free (below);
        free (above);
    }
    cgq_tpe_dim_t dims[2] = {{CGQ_TPE_REAL, -5, 10, 0, 0}, {CGQ_TPE_STEP, -0.5, 20.5, 1, 0}};
    size_t nobs = sizeof s_mo_est_w / sizeof *s_mo_est_w;
    size_t npts = sizeof s_mo_est_uv / sizeof *s_mo_est_uv;
    double out[16];
    for (int mv = 0; mv < 2; mv++) {
        cgq_tpe_t *pe = cgq_tpe_new_weighted (dims, 2, s_mo_est_obs, nobs, mv, s_mo_est_w);
        cgq_tpe_log_pdf (pe, s_mo_est_pts, npts, out);
        for (size_t i = 0; i < npts; i++)
            s_close (mv ? "weighted mv" : "weighted uv", i, out[i],
                     mv ? s_mo_est_mv[i] : s_mo_est_uv[i]);
        cgq_tpe_destroy (&pe);
    }
    // The fronts peeled one at a time agree with the full non-dominated
    // sort: every point of a rank below the last one taken is in, the rest
    // of the good group is of that rank. Random sets with many ties, 2 to 6
    // objectives (5 and 6: the subset by own boxes). Weights in [0, 1].
    uint64_t seed = 5;
    for (int c = 0; c < 30; c++) {
        size_t n = 50 + (size_t)(c * 13 % 150), m = 2 + (size_t)(c % 5), nb = 1 + (size_t)(c % 25);
        double *loss = cgq_xmalloc (n * m * sizeof *loss);
        for (size_t i = 0; i < n * m; i++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            loss[i] = (double)((seed >> 33) % 12);
        }
        int *rank = cgq_xmalloc (n * sizeof *rank);
        cgq_pareto_sort (loss, (int)n, (int)m, NULL, rank);
        size_t *b = cgq_xmalloc (nb * sizeof *b), *ab = cgq_xmalloc (n * sizeof *ab);
        cgq_tpe_split_multi (loss, n, m, nb, b, ab);
        int last = 0;
        bool *in = cgq_xcalloc (n, sizeof *in);
        for (size_t i = 0; i < nb; i++) {
            in[b[i]] = true;
            last = rank[b[i]] > last ? rank[b[i]] : last;
        }
        for (size_t i = 0; i < n; i++)
            if (rank[i] < last && !in[i])
                fail_msg ("set %d: point %zu of rank %d is not in the good group (last rank %d)", c,
                          i, rank[i], last);
        for (size_t i = 0; i < n - nb; i++)
            assert_false (in[ab[i]]);
        double *wt = cgq_xmalloc (nb * sizeof *wt);
        cgq_tpe_weights_multi (loss, m, b, nb, wt);
        for (size_t i = 0; i < nb; i++)
            assert_true (wt[i] >= 0 && wt[i] <= 1 && (m <= 4 || wt[i] == 1));
        free (wt);
        free (in);
        free (b);
        free (ab);
        free (rank);
        free (loss);
    }
    // Fewer points than the good group: all of them; one point weighs 1.
    size_t b[3], a[1];
    const double two[] = {1, 2, 2, 1};
    cgq_tpe_split_multi (two, 2, 2, 3, b, a);
    assert_int_equal (b[0], 0);
    assert_int_equal (b[1], 1);
    double w1;
    cgq_tpe_weights_multi (two, 2, b, 1, &w1);
    assert_true (w1 == 1);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (t_log_pdf),   cmocka_unit_test (t_gamma_weights),
        cmocka_unit_test (t_truncnorm), cmocka_unit_test (t_split_choose),
        cmocka_unit_test (t_sample),    cmocka_unit_test (t_multi),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
