// hyperband_test: Hyperband's bracket arithmetic against the paper's table
// (R = 81, eta = 3), successive halving in one bracket on hand-made values
// (promotions, stops and their reasons, a member that failed, the last
// rung), a partly filled bracket at the search's end, the same decisions
// from a state dumped and loaded (a coordinator restart), and the
// parameters it refuses.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hyperband.h"

// The paper's table for R = 81, eta = 3: brackets s = 4..0 take 81, 34, 15,
// 8, 5 trials, starting at budgets 1, 3, 9, 27, 81.
static void
test_brackets (void **state)
{
    (void)state;
    hyperband_t *hb = hyperband_new (81, 3, 0, 1);
    assert_non_null (hb);
    assert_int_equal (hyperband_s_max (hb), 4);
    const unsigned n0[] = {81, 34, 15, 8, 5};
    const double r0[] = {1, 3, 9, 27, 81};
    uint64_t id = 0;
    for (unsigned b = 0; b < 5; b++) {
        for (unsigned i = 0; i < n0[b]; i++, id++) {
            assert_int_equal (hyperband_add (hb, id), b);
            assert_true (hyperband_budget (hb, id) == r0[b]);
        }
    }
    // Then the brackets come round again, the most exploratory first.
    assert_int_equal (hyperband_add (hb, id), 5);
    assert_true (hyperband_budget (hb, id) == 1);
    assert_true (isnan (hyperband_budget (hb, 999999)));
    hyperband_destroy (&hb);
    assert_null (hb);

    // brackets: 2 of them only, s = 4 and 3, in turn.
    hb = hyperband_new (81, 3, 2, 1);
    for (id = 0; id < 81 + 34; id++)
        hyperband_add (hb, id);
    assert_int_equal (hyperband_add (hb, id), 2);
    assert_true (hyperband_budget (hb, id) == 1);
    hyperband_destroy (&hb);

    // Refused: eta below 2, max_t not above 1, more brackets than s_max + 1,
    // a mode other than +1 / -1.
    assert_null (hyperband_new (81, 1.5, 0, 1));
    assert_null (hyperband_new (1, 3, 0, 1));
    assert_null (hyperband_new (81, 3, 6, 1));
    assert_null (hyperband_new (81, 3, 0, 0));
    assert_null (hyperband_new (NAN, 3, 0, 1));
}

static hyperband_verdict_t *
s_find (hyperband_verdict_t *v, size_t n, uint64_t trial)
{
    for (size_t i = 0; i < n; i++)
        if (v[i].trial == trial)
            return &v[i];
    fail_msg ("no verdict for trial %llu", (unsigned long long)trial);
    return NULL;
}

// One bracket of max_t 9, eta 3 (s = 2: 9 trials at budget 1, 3 at 3, 1 at
// 9); trial i's value is i (mode max: 8 is best), or -i (mode min).
static void
s_halving (hyperband_t **hbp, int mode, bool reload)
{
    hyperband_t *hb = *hbp;
    for (uint64_t i = 0; i < 9; i++)
        assert_int_equal (hyperband_add (hb, i), 0);
    hyperband_verdict_t *v;
    for (uint64_t i = 0; i < 9; i++) {
        assert_false (hyperband_report (hb, i, 0.5, 100)); // below the budget
        assert_int_equal (hyperband_decide (hb, &v), 0);
        // At or past it: recorded, paused (a report that jumps past counts).
        assert_true (hyperband_report (hb, i, i == 4 ? 2 : 1, (double)i * mode));
        assert_false (hyperband_report (hb, i, 2, 0)); // once
    }
    if (reload) {
        char *dump = hyperband_dump (hb);
        hyperband_destroy (hbp);
        *hbp = hb = hyperband_load (9, 3, 1, mode, dump);
        free (dump);
        assert_non_null (hb);
    }
    size_t n = hyperband_decide (hb, &v);
    assert_int_equal (n, 9);
    // The top 3 first, best first.
    assert_int_equal (v[0].trial, 8);
    assert_int_equal (v[1].trial, 7);
    assert_int_equal (v[2].trial, 6);
    for (uint64_t i = 0; i < 9; i++) {
        hyperband_verdict_t *x = s_find (v, n, i);
        assert_int_equal (x->promote, i >= 6);
        if (x->promote) {
            assert_true (x->budget == 3);
            assert_non_null (strstr (x->why, "promoted to budget 3"));
            assert_true (hyperband_budget (hb, i) == 3);
        }
        else {
            assert_non_null (strstr (x->why, "not in the top 3 (cut-off"));
            assert_true (isnan (hyperband_budget (hb, i)));
            assert_false (hyperband_report (hb, i, 3, 1000)); // stopped: ignored
        }
    }
    assert_string_equal (s_find (v, n, 0)->why,
                         mode > 0 ? "hyperband bracket 0 rung 0 (budget 1): value 0 is #9 of 9, "
                                    "not in the top 3 (cut-off 6)"
                                  : "hyperband bracket 0 rung 0 (budget 1): value -0 is #9 of 9, "
                                    "not in the top 3 (cut-off -6)");
    free (v);
    assert_int_equal (hyperband_decide (hb, &v), 0); // each cohort once

    // Rung 1: trial 6 fails on its way; 7 and 8 reach budget 3. Three
    // members: the best one (8) goes on to the last rung, 7 stops.
    hyperband_ended (hb, 6);
    assert_true (hyperband_report (hb, 8, 3, 8.5 * mode));
    assert_int_equal (hyperband_decide (hb, &v), 0); // 7 still on its way
    assert_true (hyperband_report (hb, 7, 3.5, 7.5 * mode));
    n = hyperband_decide (hb, &v);
    assert_int_equal (n, 2);
    assert_int_equal (v[0].trial, 8);
    assert_true (v[0].promote);
    assert_true (v[0].budget == 9);
    assert_false (v[1].promote);
    free (v);
    // The last rung runs to its end: never paused.
    assert_true (hyperband_budget (hb, 8) == 9);
    assert_false (hyperband_report (hb, 8, 9, 9));
    assert_int_equal (hyperband_decide (hb, &v), 0);
}

static void
test_successive_halving (void **state)
{
    (void)state;
    for (int reload = 0; reload < 2; reload++)
        for (int mode = -1; mode <= 1; mode += 2) {
            hyperband_t *hb = hyperband_new (9, 3, 1, mode);
            s_halving (&hb, mode, reload);
            hyperband_destroy (&hb);
        }
}

// The search ends with a bracket partly filled: its cohort completes with
// the trials it has, and at least one goes on.
static void
test_search_done (void **state)
{
    (void)state;
    hyperband_t *hb = hyperband_new (9, 3, 1, 1);
    hyperband_verdict_t *v;
    for (uint64_t i = 0; i < 2; i++) {
        hyperband_add (hb, i);
        assert_true (hyperband_report (hb, i, 1, (double)i));
    }
    assert_int_equal (hyperband_decide (hb, &v), 0); // 7 more may come
    hyperband_search_done (hb);
    size_t n = hyperband_decide (hb, &v);
    assert_int_equal (n, 2);
    assert_int_equal (v[0].trial, 1);
    assert_true (v[0].promote);
    assert_false (v[1].promote);
    free (v);
    // A cohort whose every member ended decides nothing and holds nothing up.
    hyperband_ended (hb, 1);
    assert_int_equal (hyperband_decide (hb, &v), 0);
    hyperband_destroy (&hb);
}

static void
test_load_refuses (void **state)
{
    (void)state;
    const char *bad[] = {NULL,
                         "",
                         "[]",
                         "{\"v\": 2, \"brackets\": [], \"trials\": []}",
                         "{\"v\": 1, \"brackets\": [[9, 1, 1, 0]], \"trials\": []}",
                         "{\"v\": 1, \"brackets\": [], \"trials\": [[1, 0, 0, 0, 0.5]]}",
                         "{\"v\": 1, \"brackets\": [[2, 9, 1, 0]], \"trials\": [[1, 0, 0, 7, 0]]}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_null (hyperband_load (9, 3, 1, 1, bad[i]));
    hyperband_t *hb = hyperband_load (9, 3, 1, 1, "{\"v\": 1, \"brackets\": [], \"trials\": []}");
    assert_non_null (hb);
    hyperband_destroy (&hb);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_brackets),
        cmocka_unit_test (test_successive_halving),
        cmocka_unit_test (test_search_done),
        cmocka_unit_test (test_load_refuses),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
