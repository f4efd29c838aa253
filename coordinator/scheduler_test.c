// scheduler_test: what the scheduler chooses and what dispatch does with it:
// fits, blocked reasons, fairness between two jobs, the dispatch bounds.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coord_testing.h"
#include "dispatch.h"
#include "jobs.h"
#include "log.h"
#include "nodes.h"
#include "outbox.h"
#include "scheduler.h"

#define NOWHERE "redis://127.0.0.1:1/0"

static const char *s_spec_gpu = "name: g\n"
                                "space: {x: {uniform: [0, 1]}}\n"
                                "search: {samples: 4}\n"
                                "trial: {kind: noop, resources: {cpu: 1, gpu: 1}}\n";

static void
test_verdicts_and_reasons (void **state)
{
    (void) state;
    coord_t *c = ct_coord_new (NOWHERE);
    job_t *j = ct_job (c, 1, s_spec_gpu);
    node_t *n = NULL;
    // No node yet: nothing is known, so it waits rather than being blocked.
    assert_int_equal (scheduler_choose (c, j, &n), SCHEDULE_WAIT);
    ct_node (c, "cpu-only", 4, 0, 1ull << 30);
    assert_int_equal (scheduler_choose (c, j, &n), SCHEDULE_BLOCKED);
    char *why = scheduler_blocked_reason (c, &j->req);
    assert_string_equal (why, "needs gpu 1 but the 1 connected node(s) have at most 0 GPU(s)");
    free (why);
    req_t mem = {1, 0, 4ull << 30};
    why = scheduler_blocked_reason (c, &mem);
    assert_string_equal (why,
                         "needs memory 4096 MiB but the 1 connected node(s) offer at most 1024 MiB");
    free (why);
    req_t cpu = {8, 0, 0};
    why = scheduler_blocked_reason (c, &cpu);
    assert_string_equal (why, "needs cpu 8 but the 1 connected node(s) offer at most 4");
    free (why);
    // dispatch records the block as a visible unschedulable trial.
    dispatch_run (c);
    assert_string_equal (j->blocked,
                         "needs gpu 1 but the 1 connected node(s) have at most 0 GPU(s)");
    assert_int_equal (j->counts[CGQ_TRIAL_UNSCHEDULABLE], 1);
    // A node that fits joins: unblocked, and it starts there.
    node_t *g = ct_node (c, "gpu", 4, 1, 1ull << 30);
    assert_int_equal (scheduler_choose (c, j, &n), SCHEDULE_GO);
    assert_ptr_equal (n, g);
    c->sched_dirty = true;
    assert_int_equal (dispatch_run (c), 1);
    assert_null (j->blocked);
    assert_int_equal (j->counts[CGQ_TRIAL_UNSCHEDULABLE], 0);
    assert_int_equal (j->counts[CGQ_TRIAL_RUNNING], 1);
    // Busy, but it fits once the GPU is free: wait, not blocked.
    assert_int_equal (scheduler_choose (c, j, &n), SCHEDULE_WAIT);
    ct_coord_destroy (&c);
}

static void
test_concurrency_is_idle (void **state)
{
    (void) state;
    coord_t *c = ct_coord_new (NOWHERE);
    job_t *j = ct_job (c, 1,
                       "space: {x: {uniform: [0, 1]}}\n"
                       "search: {samples: 10, concurrency: 2}\n"
                       "trial: {kind: noop}\n");
    ct_node (c, "n", 8, 0, 0);
    c->sched_dirty = true;
    assert_int_equal (dispatch_run (c), 2);
    node_t *n;
    assert_int_equal (scheduler_choose (c, j, &n), SCHEDULE_IDLE);
    ct_coord_destroy (&c);
}

static void
test_fair_between_jobs (void **state)
{
    (void) state;
    coord_t *c = ct_coord_new (NOWHERE);
    const char *spec = "space: {x: {uniform: [0, 1]}}\n"
                       "search: {samples: 100}\n"
                       "trial: {kind: noop, resources: {cpu: 1}}\n";
    job_t *a = ct_job (c, 1, spec);
    job_t *b = ct_job (c, 2, spec);
    ct_node (c, "n1", 3, 0, 0);
    ct_node (c, "n2", 3, 0, 0);
    c->sched_dirty = true;
    assert_int_equal (dispatch_run (c), 6);
    assert_int_equal (a->running, 3);
    assert_int_equal (b->running, 3);
    // Slots free up one by one: whichever job finished, they alternate.
    Cgq__TaskRef refs[64];
    size_t n = ct_assigns (c, refs, 64);
    assert_int_equal (n, 6);
    outbox_free (c);
    int started[3] = {0, 0, 0};
    for (int round = 0; round < 6; round++) {
        // Finish a trial of job a each time: the freed slot goes to the job
        // whose turn it is, so job b does not starve and a does not hog.
        trial_t *t = NULL;
        for (trial_t *x = zhashx_first (a->trials); x; x = zhashx_next (a->trials))
            if (x->state == CGQ_TRIAL_RUNNING)
                t = x;
        assert_non_null (t);
        ct_result (c, t->node->id, 1, t->id, t->attempt, CGQ__TASK_STATUS__TASK_SUCCEEDED,
                   "{\"x\": 1}", NULL);
        assert_int_equal (dispatch_run (c), 1);
        n = ct_assigns (c, refs, 64);
        for (size_t i = 0; i < n; i++)
            started[refs[i].job]++;
        outbox_free (c);
    }
    assert_int_equal (started[1], 3);
    assert_int_equal (started[2], 3);
    ct_coord_destroy (&c);
}

static void
test_dispatch_bounds (void **state)
{
    (void) state;
    coord_t *c = ct_coord_new (NOWHERE);
    // Trials that ask for nothing would fit without end: a node takes at
    // most NODES_MAX_TASKS, a turn starts at most DISPATCH_MAX_PER_TURN.
    job_t *j = ct_job (c, 1,
                       "space: {x: {uniform: [0, 1]}}\n"
                       "search: {samples: 100000}\n"
                       "trial: {kind: noop, resources: {cpu: 0}}\n");
    node_t *one = ct_node (c, "one", 1, 0, 0);
    c->sched_dirty = true;
    assert_int_equal (dispatch_run (c), NODES_MAX_TASKS);
    assert_int_equal (one->ntasks, NODES_MAX_TASKS);
    assert_false (c->sched_dirty);
    for (int i = 0; i < 5; i++) {
        char id[16];
        snprintf (id, sizeof id, "more-%d", i);
        ct_node (c, id, 1, 0, 0);
    }
    assert_int_equal (dispatch_run (c), DISPATCH_MAX_PER_TURN);
    assert_true (c->sched_dirty); // the rest goes next turn
    assert_int_equal (dispatch_run (c), 5 * NODES_MAX_TASKS - DISPATCH_MAX_PER_TURN);
    assert_int_equal (j->running, 6 * NODES_MAX_TASKS);
    assert_int_equal (ct_assigns (c, NULL, 0), 6 * NODES_MAX_TASKS);
    ct_coord_destroy (&c);
}

int
main (void)
{
    cgq_log_init ("scheduler_test", CGQ_LOG_ERROR, false);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_verdicts_and_reasons),
        cmocka_unit_test (test_concurrency_is_idle),
        cmocka_unit_test (test_fair_between_jobs),
        cmocka_unit_test (test_dispatch_bounds),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
