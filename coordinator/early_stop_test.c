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

// --- multi-objective asha ------------------------------------------------------

static cgq_spec_t *
s_spec_multi (const char *early_stop, const char *objectives, char *err, size_t errlen)
{
    char yaml[1024];
    snprintf (yaml, sizeof yaml,
              "space: {x: {choice: [1, 2]}}\n"
              "objectives: %s\n"
              "early_stop: %s\n"
              "trial: {command: 'true'}\n",
              objectives, early_stop);
    return cgq_spec_parse (yaml, strlen (yaml), "t.yaml", err, errlen);
}

// s_report2 applies one report of two objectives; the decision in *d.
static bool
s_report2 (early_stop_t *es, uint64_t trial, double attr, double a, double b,
           early_stop_decision_t *d)
{
    double v[2] = {a, b};
    early_stop_report_multi (es, trial, attr, v, d);
    if (d->record) {
        assert_int_equal (d->nvalues, 2);
        assert_true (d->values[0] == a && d->values[1] == b && d->value == a);
    }
    return d->stop;
}

// Several objectives: at a rung a trial goes on when no recorded vector
// dominates it, or when it is in the top max(1, floor(n/3)) of some single
// objective; else it stops, with the numbers in why. A stopper rebuilt from
// the records (a restart) decides the same.
static void
test_asha_multi (void **state)
{
    (void) state;
    char err[512];
    cgq_spec_t *spec = s_spec_multi ("{algorithm: asha, grace: 1, reduction: 3, max: 27}",
                                     "[{metric: loss, mode: min}, {metric: lat, mode: min}]", err,
                                     sizeof err);
    if (!spec)
        fail_msg ("%s", err);
    assert_int_equal (spec->early_stop.nobjectives, 2);
    early_stop_t *es = early_stop_new (spec);
    assert_int_equal (early_stop_nobjectives (es), 2);
    early_stop_decision_t d, rec[16];
    uint64_t rec_trial[16];
    size_t nrec = 0;
    struct {
        double loss, lat;
        bool stop;
    } steps[] = {
        {0.5, 10, false},  // 0: the first goes on
        {0.7, 12, true},   // 1: dominated by 0, not the top 1 of either
        {0.9, 5, false},   // 2: non-dominated (the best latency)
        {0.6, 11, true},   // 3: dominated by 0; 2nd by loss, 3rd by latency; keep 1
        {0.95, 4.9, false}, // 4: non-dominated
        {0.55, 10.5, false}, // 5: dominated by 0, but 2nd by loss and 6/3 = 2 go on
        {0.8, 8, false},   // 6: dominated by none
        {1.0, 13, true},   // 7: dominated by all 7, last in both
    };
    for (size_t i = 0; i < sizeof steps / sizeof *steps; i++) {
        bool stop = s_report2 (es, i, 1, steps[i].loss, steps[i].lat, &d);
        if (stop != steps[i].stop)
            fail_msg ("trial %zu: stop %d, expected %d (%s)", i, stop, steps[i].stop, d.why);
        assert_true (d.record && d.at == 1);
        rec[nrec] = d;
        rec_trial[nrec++] = i;
    }
    assert_non_null (strstr (d.why, "asha: at rung epoch=1 its (loss 1, lat 13) is dominated by "
                                    "7 of 8 recorded there and ranks 8, 8 by objective; only the "
                                    "non-dominated and the top 2 (1/3) by some objective go on"));
    assert_int_equal (early_stop_bucket_size (es, 1), 8);
    // Rung 3: the first there goes on, whatever it is.
    assert_false (s_report2 (es, 0, 3, 0.45, 9, &d));
    rec[nrec] = d;
    rec_trial[nrec++] = 0;
    // The same rung is not judged twice; a NaN objective is ignored.
    assert_false (s_report2 (es, 0, 3, 9, 99, &d) || d.record);
    assert_false (s_report2 (es, 9, 1, NAN, 1, &d) || d.record);

    // A restart: a new stopper from the records decides the next trials as
    // the first one does.
    early_stop_t *again = early_stop_new (spec);
    for (size_t i = nrec; i-- > 0;)
        early_stop_restore_multi (again, rec[i].at, rec_trial[i], rec[i].values);
    assert_int_equal (early_stop_bucket_size (again, 1), 8);
    assert_int_equal (early_stop_bucket_size (again, 3), 1);
    double next[][2] = {{0.58, 10.2}, {0.75, 12.5}, {0.3, 20}, {0.85, 10.3}};
    int stops = 0;
    for (size_t i = 0; i < 4; i++) {
        early_stop_decision_t d1, d2;
        s_report2 (es, 20 + i, 1, next[i][0], next[i][1], &d1);
        s_report2 (again, 20 + i, 1, next[i][0], next[i][1], &d2);
        assert_int_equal (d1.stop, d2.stop);
        assert_string_equal (d1.why, d2.why);
        stops += d1.stop;
    }
    assert_int_equal (stops, 2); // (0.75, 12.5) and (0.85, 10.3) stop
    early_stop_destroy (&again);
    early_stop_destroy (&es);
    cgq_spec_destroy (&spec);

    // Senses: accuracy maximised, latency minimised.
    spec = s_spec_multi ("{algorithm: asha, grace: 1, max: 27}",
                         "[{metric: acc, mode: max}, {metric: lat, mode: min}]", err, sizeof err);
    es = early_stop_new (spec);
    assert_false (s_report2 (es, 0, 1, 0.9, 10, &d));
    assert_true (s_report2 (es, 1, 1, 0.8, 12, &d));
    assert_false (s_report2 (es, 2, 1, 0.95, 11, &d));
    early_stop_destroy (&es);
    cgq_spec_destroy (&spec);

    // What the spec refuses: median of several objectives, a mode without a metric.
    assert_null (s_spec_multi ("{algorithm: median}",
                               "[{metric: a, mode: min}, {metric: b, mode: min}]", err,
                               sizeof err));
    assert_non_null (strstr (err, "early_stop algorithm median compares one metric and the spec "
                                  "has several objectives (write algorithm: asha"));
    assert_null (s_spec_multi ("{algorithm: asha, mode: max}",
                               "[{metric: a, mode: min}, {metric: b, mode: min}]", err,
                               sizeof err));
    assert_non_null (strstr (err, "early_stop.mode applies to early_stop.metric"));
    // early_stop.objectives: a subset of the job's, by name, in its order.
    spec = s_spec_multi ("{algorithm: asha, objectives: [lat, loss]}",
                         "[{metric: loss, mode: min}, {metric: acc, mode: max}, "
                         "{metric: lat, mode: min}]",
                         err, sizeof err);
    if (!spec)
        fail_msg ("%s", err);
    assert_int_equal (spec->early_stop.nobjectives, 2);
    assert_true (spec->early_stop.obj[0] == 2 && spec->early_stop.obj[1] == 0);
    es = early_stop_new (spec);
    double all0[3] = {0.5, 0.1, 10}, all1[3] = {0.7, 0.99, 12}, all2[3] = {0.9, 0.0, 5};
    early_stop_report_multi (es, 0, 1, all0, &d);
    assert_true (d.record && !d.stop && d.nvalues == 2 && d.values[0] == 10 && d.values[1] == 0.5);
    // Dominated by trial 0 in (lat, loss), whatever its accuracy: stops.
    early_stop_report_multi (es, 1, 1, all1, &d);
    assert_true (d.stop);
    assert_non_null (strstr (d.why, "its (lat 12, loss 0.7) is dominated by 1 of 2"));
    early_stop_report_multi (es, 2, 1, all2, &d);
    assert_false (d.stop);
    early_stop_destroy (&es);
    cgq_spec_destroy (&spec);
    assert_null (s_spec_multi ("{algorithm: asha, objectives: [lat, acc]}",
                               "[{metric: loss, mode: min}, {metric: acc, mode: max}]", err,
                               sizeof err));
    assert_non_null (
        strstr (err, "early_stop.objectives: 'lat' is not one of the job's objectives (loss, acc)"));
    assert_null (s_spec_multi ("{algorithm: asha, objectives: [acc, acc]}",
                               "[{metric: loss, mode: min}, {metric: acc, mode: max}]", err,
                               sizeof err));
    assert_non_null (strstr (err, "early_stop.objectives names 'acc' twice"));
    assert_null (s_spec_multi ("{algorithm: asha, objectives: [acc]}",
                               "[{metric: loss, mode: min}, {metric: acc, mode: max}]", err,
                               sizeof err));
    assert_non_null (strstr (err, "early_stop.objectives must list 2 to 8"));
    assert_null (s_spec_multi ("{algorithm: asha, metric: acc, mode: max, objectives: [acc, loss]}",
                               "[{metric: loss, mode: min}, {metric: acc, mode: max}]", err,
                               sizeof err));
    assert_non_null (strstr (err, "early_stop has both metric and objectives"));
    // A metric given: one-objective asha on it, as before.
    spec = s_spec_multi ("{algorithm: asha, metric: a, mode: min}",
                         "[{metric: a, mode: min}, {metric: b, mode: min}]", err, sizeof err);
    assert_non_null (spec);
    assert_int_equal (spec->early_stop.nobjectives, 0);
    es = early_stop_new (spec);
    assert_int_equal (early_stop_nobjectives (es), 1);
    early_stop_destroy (&es);
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
        cmocka_unit_test (test_asha_multi),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
