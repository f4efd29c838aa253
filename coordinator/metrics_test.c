// metrics_test: the histograms' buckets (le is inclusive), and the page of a
// coordinator with a job, nodes and a device: the numbers it shows are the
// coordinator's, and each histogram's +Inf bucket is its count.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coord_testing.h"
#include "dispatch.h"
#include "jobs.h"
#include "metrics.h"

static void
t_hist (void **state)
{
    (void)state;
    hist_t h;
    hist_init_dispatch (&h);
    hist_observe (&h, 0);     // first bucket
    hist_observe (&h, 0.001); // == the first bound: still the first
    hist_observe (&h, 0.002); // the second
    hist_observe (&h, 1e9);   // past every bound: only +Inf
    hist_observe (&h, -1);    // nonsense counts as 0
    assert_int_equal (h.counts[0], 3);
    assert_int_equal (h.counts[1], 1);
    assert_int_equal (h.count, 5);
    uint64_t sum = 0;
    for (int i = 0; i < h.nbounds; i++)
        sum += h.counts[i];
    assert_int_equal (sum, 4);
    assert_true (h.sum > 1e9 - 1 && h.sum < 1e9 + 1);
}

// s_sample returns the value of the sample line that starts with prefix
// (name and labels, then a space), or fails the test.
static double
s_sample (const char *page, const char *prefix)
{
    size_t n = strlen (prefix);
    for (const char *p = page; p && *p; p = strchr (p, '\n') ? strchr (p, '\n') + 1 : NULL)
        if (strncmp (p, prefix, n) == 0 && p[n] == ' ')
            return strtod (p + n + 1, NULL);
    fail_msg ("no sample '%s' in:\n%s", prefix, page);
    return -1;
}

static void
t_render (void **state)
{
    (void)state;
    coord_t *c = ct_coord_new ("redis://127.0.0.1:1/0");
    ct_node (c, "w1", 1, 0, 1 << 30);
    const char *devs[] = {"b1:device=board", "b2:device=board", NULL};
    ct_runner (c, "r1", devs);
    job_t *j = ct_job (c, 1,
                       "name: 'say \"hi\" a\\b'\n"
                       "space: {i: {grid: [0, 1, 2]}}\n"
                       "trial: {command: ./run, resources: {cpu: 1}}\n");
    dispatch_run (c);  // one trial runs on w1, the others wait
    c->lease[0] = 'x'; // leads
    c->epoch = 7;
    cgq_buf_t b;
    cgq_buf_init (&b);
    metrics_render (c, &b);
    const char *page = b.data;
    assert_true (s_sample (page, "cgq_coordinator_leader") == 1);
    assert_true (s_sample (page, "cgq_coordinator_lease_epoch") == 7);
    assert_true (s_sample (page, "cgq_dispatches_total") == 1);
    assert_true (s_sample (page, "cgq_nodes_alive{kind=\"worker\"}") == 1);
    assert_true (s_sample (page, "cgq_nodes_alive{kind=\"device-runner\"}") == 1);
    assert_true (s_sample (page, "cgq_devices{state=\"idle\"}") == 2);
    assert_true (s_sample (page, "cgq_jobs_active") == 1);
    // The label value is escaped: a quote and a backslash in the name.
    assert_true (s_sample (page, "cgq_job_trials{job=\"1\",name=\"say \\\"hi\\\" a\\\\b\","
                                 "state=\"running\"}") == 1);
    assert_true (s_sample (page, "cgq_job_trials{job=\"1\",name=\"say \\\"hi\\\" a\\\\b\","
                                 "state=\"pending\"}") ==
                 (double)(j->counts[CGQ_TRIAL_PENDING] + jobs_unsuggested (j)));
    assert_true (s_sample (page, "cgq_queue_depth{class=\"cpu\"}") ==
                 (double)zhashx_size (j->trials) - 1);
    assert_true (s_sample (page, "cgq_dispatch_latency_seconds_count") == 1);
    assert_true (s_sample (page, "cgq_dispatch_latency_seconds_bucket{le=\"+Inf\"}") == 1);
    assert_non_null (strstr (page, "# TYPE cgq_dispatch_latency_seconds histogram\n"));
    assert_true (s_sample (page, "cgq_notifications_pending") == 0);
    cgq_buf_fini (&b);
    ct_coord_destroy (&c);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (t_hist),
        cmocka_unit_test (t_render),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
