// metrics_test: MAE, MAPE, RMSE, SRCC (ties averaged) and +-10 % accuracy
// against values scipy and numpy computed on fixed vectors
// (metrics_expected.py wrote metrics_expected.h).
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "metrics.h"
#include "metrics_expected.h"

static void
s_close (const char *what, const char *name, double got, double want)
{
    if (fabs (got - want) > 1e-9 * (1 + fabs (want))) {
        print_message ("%s %s: got %.17g, scipy says %.17g\n", name, what, got, want);
        fail ();
    }
}

static void
test_against_scipy (void **state)
{
    for (size_t i = 0; i < sizeof s_expected / sizeof s_expected[0]; i++) {
        cgq_pred_metrics_t m;
        cgq_pred_metrics (s_expected[i].p, s_expected[i].y, s_expected[i].n, &m);
        s_close ("mae", s_expected[i].name, m.mae, s_expected[i].mae);
        s_close ("mape", s_expected[i].name, m.mape, s_expected[i].mape);
        s_close ("rmse", s_expected[i].name, m.rmse, s_expected[i].rmse);
        s_close ("srcc", s_expected[i].name, m.srcc, s_expected[i].srcc);
        s_close ("acc10", s_expected[i].name, m.acc10, s_expected[i].acc10);
    }
}

static void
test_ranks (void **state)
{
    const double v[] = {3, 1, 3, 2, 3};
    double r[5];
    cgq_pred_rank (v, 5, r);
    const double want[] = {4, 1, 4, 2, 4};
    for (int i = 0; i < 5; i++)
        assert_true (r[i] == want[i]);
    // A constant side has no rank correlation.
    const double c[] = {2, 2, 2, 2, 2};
    assert_true (cgq_pred_srcc (v, c, 5) == 0);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_against_scipy),
        cmocka_unit_test (test_ranks),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
