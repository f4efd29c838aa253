#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "stats.h"

static void
test_known_values (void **state)
{
    // numpy: percentile([1..10], [50, 90, 99]) = 5.5, 9.1, 9.91; std(ddof=1) = 3.0277
    double v[] = {7, 1, 10, 3, 5, 2, 9, 4, 6, 8};
    cgq_stats_t s;
    assert_int_equal (cgq_stats_compute (v, 10, &s), 0);
    assert_int_equal (s.n, 10);
    assert_true (s.min == 1 && s.max == 10);
    assert_true (fabs (s.p50 - 5.5) < 1e-12);
    assert_true (fabs (s.p90 - 9.1) < 1e-12);
    assert_true (fabs (s.p99 - 9.91) < 1e-12);
    assert_true (fabs (s.mean - 5.5) < 1e-12);
    assert_true (fabs (s.std - 3.0276503540974917) < 1e-12);
    assert_true (fabs (s.cv - s.std / 5.5) < 1e-12);
    // Within [p25, p75] = [3.25, 7.75]: 4, 5, 6, 7.
    assert_true (fabs (s.iqr_mean - 5.5) < 1e-12);
    assert_true (v[0] == 7); // not sorted in place
}

static void
test_median_ci_order_statistics (void **state)
{
    // Exact binomial tables (95 %, distribution-free): n = 6 -> x(1), x(6);
    // 10 -> x(2), x(9); 20 -> x(6), x(15); 50 -> x(18), x(33); 100 ->
    // x(40), x(61); 1000 -> x(469), x(532). Below 6 no pair reaches 95 %.
    static const size_t want[][3] = {{6, 1, 6},    {10, 2, 9},    {20, 6, 15},
                                     {50, 18, 33}, {100, 40, 61}, {1000, 469, 532}};
    size_t lo, hi;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        assert_int_equal (cgq_stats_median_ci_ranks (want[i][0], 0.95, &lo, &hi), 0);
        assert_int_equal (lo, want[i][1]);
        assert_int_equal (hi, want[i][2]);
    }
    assert_int_equal (cgq_stats_median_ci_ranks (5, 0.95, &lo, &hi), -1);
    assert_true (lo == 1 && hi == 5);
    assert_int_equal (cgq_stats_median_ci_ranks (0, 0.95, &lo, &hi), -1);
    // In the summary: [1..10] shuffled -> [2, 9]; 5 samples -> min, max, not ok.
    double v[] = {7, 1, 10, 3, 5, 2, 9, 4, 6, 8};
    cgq_stats_t s;
    cgq_stats_compute (v, 10, &s);
    assert_true (s.ci_ok && s.ci_low == 2 && s.ci_high == 9);
    cgq_stats_compute (v, 5, &s);
    assert_true (!s.ci_ok && s.ci_low == 1 && s.ci_high == 10);
}

static void
test_outlier_and_edges (void **state)
{
    double v[] = {10, 10, 10, 10, 10, 10, 10, 1000};
    cgq_stats_t s;
    cgq_stats_compute (v, 8, &s);
    assert_true (s.iqr_mean == 10); // the interquartile mean ignores the slow run
    assert_true (s.mean > 100);
    assert_int_equal (cgq_stats_compute (v, 0, &s), -1);
    assert_int_equal (s.n, 0);
    cgq_stats_compute (v, 1, &s);
    assert_true (s.std == 0 && s.p99 == 10 && s.iqr_mean == 10);
}

static void
test_json_caps_samples (void **state)
{
    double v[] = {1, 2, 3, 4, 5};
    cgq_stats_t s;
    cgq_stats_compute (v, 5, &s);
    json_t *o = json_object ();
    cgq_stats_to_json (&s, v, 5, 3, "_ms", "samples_ms", o);
    assert_true (json_real_value (json_object_get (o, "p50_ms")) == 3);
    assert_int_equal (json_array_size (json_object_get (o, "samples_ms")), 3);
    assert_int_equal (json_integer_value (json_object_get (o, "samples_dropped")), 2);
    assert_int_equal (json_integer_value (json_object_get (o, "runs")), 5);
    assert_non_null (json_object_get (o, "cv"));
    json_decref (o);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_known_values),
        cmocka_unit_test (test_outlier_and_edges),
        cmocka_unit_test (test_median_ci_order_statistics),
        cmocka_unit_test (test_json_caps_samples),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
