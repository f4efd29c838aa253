// early_stop_test: the asha and median rules on hand-made learning curves,
// and the same decisions from a stopper rebuilt from its records (a
// coordinator restart).
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "early_stop.h"

static cgq_spec_t *
s_spec (const char *early_stop, const char *objective)
{
    char yaml[1024], err[512];
    snprintf (yaml, sizeof yaml,
              "space: {x: {choice: [1, 2]}}\n"
              "objective: %s\n"
              "early_stop: %s\n"
              "trial: {command: 'true'}\n",
              objective, early_stop);
    cgq_spec_t *spec = cgq_spec_parse (yaml, strlen (yaml), "t.yaml", err, sizeof err);
    if (!spec)
        fail_msg ("%s", err);
    return spec;
}

// s_report applies one report and returns whether it stopped the trial.
static bool
s_report (early_stop_t *es, uint64_t trial, double attr, double value)
{
    early_stop_decision_t d;
    early_stop_report (es, trial, attr, value, &d);
    if (d.stop)
        assert_true (strlen (d.why) > 10);
    return d.stop;
}

static void
test_asha_rungs_and_ranks (void **state)
{
    (void) state;
    cgq_spec_t *spec = s_spec ("{algorithm: asha, grace: 1, reduction: 3, max: 27}",
                               "{metric: loss, mode: min}");
    early_stop_t *es = early_stop_new (spec);
    assert_non_null (es);
    // Before the first rung nothing is recorded.
    early_stop_decision_t d;
    early_stop_report (es, 0, 0.5, 1.0, &d);
    assert_false (d.record);
    // Rung 1: the first trial always goes on; a worse second one stops
    // (top max(1, floor(2/3)) = 1), a better third goes on.
    early_stop_report (es, 0, 1, 0.5, &d);
    assert_true (d.record && d.new_bucket && !d.stop);
    assert_true (d.at == 1 && d.value == 0.5);
    assert_true (s_report (es, 1, 1, 0.7));
    assert_false (s_report (es, 2, 1, 0.4));
    assert_true (s_report (es, 3, 1, 0.8));
    // Five recorded: still the top 1; 0.6 ranks 3rd (0.4 and 0.5 better).
    early_stop_report (es, 4, 1, 0.6, &d);
    assert_true (d.stop);
    assert_non_null (strstr (d.why, "rung epoch=1"));
    assert_non_null (strstr (d.why, "its loss 0.6 ranks 3 of 5"));
    // Six recorded: the top 2 go on, and 0.45 ranks 2nd.
    assert_false (s_report (es, 5, 1, 0.45));
    assert_int_equal (early_stop_bucket_size (es, 1), 6);
    // Epoch 2 is no rung; the same rung is never judged twice.
    early_stop_report (es, 0, 2, 0.3, &d);
    assert_false (d.record || d.stop);
    // A report that jumps past rungs 3 and 9 is judged at 9 only.
    early_stop_report (es, 0, 10, 0.2, &d);
    assert_true (d.record && !d.stop && d.at == 9);
    assert_int_equal (early_stop_bucket_size (es, 3), 0);
    // An attribute that goes back, and NaN, are ignored.
    early_stop_report (es, 0, 5, 9.0, &d);
    assert_false (d.record || d.stop);
    early_stop_report (es, 6, NAN, 1.0, &d);
    assert_false (d.record || d.stop);
    early_stop_report (es, 6, 1, NAN, &d);
    assert_false (d.record || d.stop);
    // max is no rung: 27 = 1 * 3^3 is where trials end by themselves.
    early_stop_report (es, 2, 27, 0.1, &d);
    assert_true (d.record && d.at == 9); // judged at 9, the highest rung below max
    assert_int_equal (early_stop_buckets (es), 2);
    early_stop_destroy (&es);
    assert_null (es);
    cgq_spec_destroy (&spec);
}

static void
test_asha_mode_max (void **state)
{
    (void) state;
    cgq_spec_t *spec = s_spec ("{algorithm: asha, grace: 2, reduction: 2, max: 100}",
                               "{metric: acc, mode: max}");
    early_stop_t *es = early_stop_new (spec);
    assert_false (s_report (es, 0, 1, 0.1)); // below grace: not judged
    assert_false (s_report (es, 0, 2, 0.5));
    assert_false (s_report (es, 1, 2, 0.9)); // better: top floor(2/2) = 1
    assert_true (s_report (es, 2, 2, 0.6));  // 2nd of 3, top 1
    assert_false (s_report (es, 3, 2, 0.95)); // best of 4, top 2
    assert_false (s_report (es, 4, 2, 0.9));  // ties do not count against it: 2nd of 5
    early_stop_destroy (&es);
    cgq_spec_destroy (&spec);
}

static void
test_median_rule (void **state)
{
    (void) state;
    cgq_spec_t *spec
        = s_spec ("{algorithm: median, grace: 3, max: 10}", "{metric: loss, mode: min}");
    early_stop_t *es = early_stop_new (spec);
    // Three trials run their curves: loss = c / epoch.
    double c[3] = {1, 2, 3};
    for (int i = 0; i < 3; i++)
        for (int e = 1; e <= 10; e++)
            assert_false (s_report (es, (uint64_t) i, e, c[i] / e));
    // Running averages at epoch 3: c * (1 + 1/2 + 1/3) / 3 = c * 0.6111; the
    // median is trial 1's, 1.2222. A trial whose best by epoch 3 is 1.5
    // stops there; before grace it never does.
    assert_false (s_report (es, 3, 1, 3.0));
    assert_false (s_report (es, 3, 2, 2.0));
    early_stop_decision_t d;
    early_stop_report (es, 3, 3, 1.5, &d);
    assert_true (d.stop);
    assert_non_null (strstr (d.why, "median: at epoch=3 its best loss 1.5 is worse than"));
    assert_non_null (strstr (d.why, "of 3 other trials"));
    // Its running average is recorded all the same.
    assert_true (d.record && d.at == 3 && fabs (d.value - 6.5 / 3) < 1e-12);
    // One whose best is below the median goes on.
    assert_false (s_report (es, 4, 3, 1.0));
    // With fewer than EARLY_STOP_MEDIAN_MIN others at a step, no stop.
    cgq_spec_t *spec2
        = s_spec ("{algorithm: median, grace: 1, max: 10}", "{metric: loss, mode: min}");
    early_stop_t *es2 = early_stop_new (spec2);
    assert_false (s_report (es2, 0, 1, 0.1));
    assert_false (s_report (es2, 1, 1, 0.2));
    assert_false (s_report (es2, 2, 1, 9.0));
    assert_true (s_report (es2, 3, 1, 9.0)); // median of 0.1, 0.2, 9 is 0.2
    early_stop_destroy (&es2);
    cgq_spec_destroy (&spec2);
    early_stop_destroy (&es);
    cgq_spec_destroy (&spec);
}

// A stopper rebuilt from its records and the running trials' states decides
// as the one that never stopped.
static void
test_restore (void **state)
{
    (void) state;
    const char *rules[2] = {"{algorithm: asha, grace: 1, reduction: 2, max: 64}",
                            "{algorithm: median, grace: 2, max: 64}"};
    for (int r = 0; r < 2; r++) {
        cgq_spec_t *spec = s_spec (rules[r], "{metric: loss, mode: min}");
        early_stop_t *live = early_stop_new (spec), *copy = early_stop_new (spec);
        // Persisted records, as Redis would hold them.
        struct {
            double at, value;
            uint64_t trial;
        } rec[256];
        size_t nrec = 0;
        // Twenty trials, loss = 1 + (t * 7) % 20 / 10 + 1 / epoch, interleaved.
        for (int e = 1; e <= 8; e++)
            for (uint64_t t = 0; t < 20; t++) {
                early_stop_decision_t d;
                early_stop_report (live, t, e, 1 + (double) ((t * 7) % 20) / 10 + 1.0 / e, &d);
                if (d.record) {
                    assert_true (nrec < 256);
                    rec[nrec].at = d.at;
                    rec[nrec].value = d.value;
                    rec[nrec].trial = t;
                    nrec++;
                }
            }
        for (size_t i = nrec; i-- > 0;)
            early_stop_restore (copy, rec[i].at, rec[i].trial, rec[i].value);
        for (uint64_t t = 0; t < 20; t++) {
            char st[160];
            early_stop_trial_state (live, t, st, sizeof st);
            assert_int_equal (early_stop_trial_resume (copy, t, st), 0);
        }
        assert_int_equal (early_stop_buckets (copy), early_stop_buckets (live));
        // Both go on with the same reports and decide the same.
        int stops = 0;
        for (int e = 9; e <= 40; e++)
            for (uint64_t t = 0; t < 20; t++) {
                early_stop_decision_t a, b;
                double v = 1 + (double) ((t * 7) % 20) / 10 + 1.0 / e;
                early_stop_report (live, t, e, v, &a);
                early_stop_report (copy, t, e, v, &b);
                assert_int_equal (a.stop, b.stop);
                assert_int_equal (a.record, b.record);
                assert_string_equal (a.why, b.why);
                stops += a.stop;
            }
        assert_true (stops > 0);
        assert_int_equal (early_stop_trial_resume (copy, 99, "{\"last\": \"x\"}"), -1);
        early_stop_forget (copy, 3);
        char st[160];
        early_stop_trial_state (copy, 3, st, sizeof st);
        assert_string_equal (st, "");
        early_stop_destroy (&live);
        early_stop_destroy (&copy);
        cgq_spec_destroy (&spec);
    }
}

static void
test_none (void **state)
{
    (void) state;
    char err[256];
    const char *yaml = "space: {x: {choice: [1]}}\ntrial: {command: 'true'}\n";
    cgq_spec_t *spec = cgq_spec_parse (yaml, strlen (yaml), "t.yaml", err, sizeof err);
    assert_non_null (spec);
    assert_null (early_stop_new (spec));
    early_stop_decision_t d;
    early_stop_report (NULL, 0, 1, 1, &d);
    assert_false (d.stop);
    early_stop_destroy (NULL);
    cgq_spec_destroy (&spec);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_asha_rungs_and_ranks),
        cmocka_unit_test (test_asha_mode_max),
        cmocka_unit_test (test_median_rule),
        cmocka_unit_test (test_restore),
        cmocka_unit_test (test_none),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
