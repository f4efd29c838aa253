// agree_test: acc10, the median relative difference and Spearman's rho of
// two passes against values computed with numpy and scipy.stats.spearmanr
// (the numbers in the comments); ties, the 10 % edge, pairs left out, and
// the degenerate cases (none, one, a constant pass).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>

#include "agree.h"

static void
test_known (void **state)
{
    (void)state;
    // d = 0.05 0.15 0.0333 0.1125 0 0.1667: median 0.08125, 3 of 6 within 10 %.
    const double a[] = {10, 20, 30, 40, 50, 60}, b[] = {10.5, 23, 29, 44.5, 50, 70};
    cgq_agree_t g = cgq_agree (a, b, 6);
    assert_int_equal (g.n, 6);
    assert_float_equal (g.acc10, 0.5, 1e-12);
    assert_float_equal (g.median_abs, 0.08125, 1e-12);
    assert_float_equal (g.srcc, 1.0, 1e-12); // same order: spearmanr 1.0
}

static void
test_ties_and_order (void **state)
{
    (void)state;
    // spearmanr([1,2,2,3,4], [2,1,3,3,5]) = 0.7631578947368421
    const double a[] = {1, 2, 2, 3, 4}, b[] = {2, 1, 3, 3, 5};
    cgq_agree_t g = cgq_agree (a, b, 5);
    assert_float_equal (g.srcc, 0.7631578947368421, 1e-12);
    // Reversed: rho -1.
    const double c[] = {1, 2, 3, 4}, r[] = {4, 3, 2, 1};
    assert_float_equal (cgq_agree (c, r, 4).srcc, -1.0, 1e-12);
}

static void
test_edge_and_left_out (void **state)
{
    (void)state;
    // 110 against 100 is within 10 % (as numpy's <= 0.1 says); 111 is not.
    // Pairs with a NaN or a first pass <= 0 are left out.
    const double a[] = {100, 100, NAN, 0, 100, -5}, b[] = {110, 111, 10, 10, 90, 3};
    cgq_agree_t g = cgq_agree (a, b, 6);
    assert_int_equal (g.n, 3);
    assert_float_equal (g.acc10, 2.0 / 3, 1e-12);
    assert_float_equal (g.median_abs, 0.10, 1e-12);
    assert_float_equal (cgq_pass_diff (100, 90), -0.1, 1e-12);
    assert_true (isnan (cgq_pass_diff (0, 1)));
    assert_true (isnan (cgq_pass_diff (1, INFINITY)));
}

static void
test_degenerate (void **state)
{
    (void)state;
    cgq_agree_t g = cgq_agree (NULL, NULL, 0);
    assert_int_equal (g.n, 0);
    assert_true (isnan (g.acc10) && isnan (g.median_abs) && isnan (g.srcc));
    const double one[] = {5}, two[] = {6};
    g = cgq_agree (one, two, 1);
    assert_int_equal (g.n, 1);
    assert_float_equal (g.acc10, 0.0, 1e-12); // 20 % apart
    assert_true (isnan (g.srcc));             // no rank order with one pair
    const double k[] = {3, 3, 3}, v[] = {1, 2, 3};
    assert_true (isnan (cgq_agree (k, v, 3).srcc)); // a constant pass has no ranks
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_known),
        cmocka_unit_test (test_ties_and_order),
        cmocka_unit_test (test_edge_and_left_out),
        cmocka_unit_test (test_degenerate),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
