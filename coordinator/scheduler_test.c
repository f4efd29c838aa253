// scheduler_test: what the scheduler chooses and what dispatch does with it:
// fits, blocked reasons, fairness between two jobs, the dispatch bounds.
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
    char *why = scheduler_blocked_reason (c, j->req);
    assert_string_equal (why, "needs gpu 1 but the 1 connected node(s) have at most 0 GPU(s)");
    free (why);
    req_t mem = {1, 0, 4ull << 30, NULL, 0};
    why = scheduler_blocked_reason (c, &mem);
    assert_string_equal (why,
                         "needs memory 4096 MiB but the 1 connected node(s) offer at most 1024 MiB");
    free (why);
    req_t cpu = {8, 0, 0, NULL, 0};
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


// s_device_assigns collects the Assigns in the outbox: trial ids and device
// ids (NULL-free strings, "" for a worker's), then empties the outbox.
static size_t
s_device_assigns (coord_t *c, uint64_t *trials, char devs[][32], char kinds[][16], size_t max)
{
    size_t n = 0;
    for (const out_t *o = c->out_head; o; o = o->next) {
        if (o->acks)
            continue; // an Ack still open (encoded when sent)
        cgq_env_t *env = cgq_wire_decode (o->data, o->len, 0);
        assert_non_null (env);
        if (env->body_case == CGQ__ENVELOPE__BODY_ASSIGN && n < max) {
            trials[n] = env->assign->task->trial;
            snprintf (devs[n], 32, "%s", env->assign->device_id ? env->assign->device_id : "");
            snprintf (kinds[n], 16, "%s", env->assign->kind ? env->assign->kind : "");
            n++;
        }
        cgq_wire_free (env);
    }
    outbox_free (c);
    return n;
}

static const char *s_spec_device = "space: {x: {uniform: [0, 1]}}\n"
                                   "search: {samples: 20}\n"
                                   "trial:\n"
                                   "  on: {device: odroid-xu4}\n"
                                   "  benchmark: nnpackage\n"
                                   "  artifact: {url: \"http://h/m\", sha256: "
                                   "\"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\"}\n"
                                   "  repeats: 7\n";

static void
test_device_matching (void **state)
{
    (void) state;
    coord_t *c = ct_coord_new (NOWHERE);
    job_t *dj = ct_job (c, 1, s_spec_device);
    job_t *wj = ct_job (c, 2,
                        "space: {x: {uniform: [0, 1]}}\n"
                        "search: {samples: 20}\n"
                        "trial: {kind: noop, resources: {cpu: 0}}\n");
    node_t *n = NULL;
    // Only a worker: the device trials can never run there.
    node_t *w = ct_node (c, "w", 2, 0, 0);
    assert_int_equal (scheduler_choose (c, dj, &n), SCHEDULE_BLOCKED);
    char *why = scheduler_blocked_reason (c, dj->req);
    assert_string_equal (why, "needs device with device=odroid-xu4; connected devices: none");
    free (why);
    const char *devs[] = {"a:device=tizen", "b:device=odroid-xu4,os=linux", "c:device=odroid-xu4",
                          NULL};
    node_t *r = ct_runner (c, "r1", devs);
    assert_true (r->runner);
    assert_int_equal (r->ndevices, 3);
    // Both jobs start what fits: two device trials (b and c), worker trials
    // on the worker only, however many a cpu-0 runner slot would take.
    c->sched_dirty = true;
    int started = dispatch_run (c);
    assert_int_equal (dj->running, 2);
    assert_int_equal (wj->running, started - 2);
    assert_int_equal (w->ntasks, wj->running);
    assert_int_equal (r->ntasks, 2);
    uint64_t trials[64];
    char dev[64][32], kind[64][16];
    size_t na = s_device_assigns (c, trials, dev, kind, 64);
    int on_b = 0, on_c = 0;
    for (size_t i = 0; i < na; i++) {
        if (!strcmp (kind[i], "benchmark")) {
            on_b += !strcmp (dev[i], "b");
            on_c += !strcmp (dev[i], "c");
        }
        else
            assert_string_equal (dev[i], "");
    }
    assert_int_equal (on_b, 1);
    assert_int_equal (on_c, 1);
    // Busy, not blocked; the reason lists the devices when it is blocked.
    assert_int_equal (scheduler_choose (c, dj, &n), SCHEDULE_WAIT);
    req_t other = {0, 0, 0, json_pack ("{s:s}", "device", "rpi4"), 0};
    why = scheduler_blocked_reason (c, &other);
    assert_string_equal (why, "needs device with device=rpi4; connected devices: a "
                              "(device=tizen), b (device=odroid-xu4, os=linux), c "
                              "(device=odroid-xu4)");
    free (why);
    json_decref ((json_t *) other.on);
    // A device that ends its trial takes the next one, and only that device.
    trial_t *t = NULL;
    for (trial_t *x = zhashx_first (dj->trials); x; x = zhashx_next (dj->trials))
        if (x->state == CGQ_TRIAL_RUNNING && !strcmp (x->device->id, "c"))
            t = x;
    assert_non_null (t);
    ct_result (c, "r1", 1, t->id, t->attempt, CGQ__TASK_STATUS__TASK_SUCCEEDED, "{\"p50\": 1}",
               NULL);
    assert_int_equal (dispatch_run (c), 1);
    na = s_device_assigns (c, trials, dev, kind, 64);
    assert_int_equal (na, 1);
    assert_string_equal (dev[0], "c");
    assert_string_equal (kind[0], "benchmark");
    ct_coord_destroy (&c);
}

// A study's trials (trial.kind client) go only to client nodes of their own
// job, and only as many as each asks for (want); a client takes nothing else;
// with no client asking, the job waits and is never blocked.
static void
test_client_nodes (void **state)
{
    (void) state;
    coord_t *c = ct_coord_new (NOWHERE);
    job_t *sj = ct_job (c, 1,
                        "space: {x: {uniform: [0, 1]}}\n"
                        "search: {samples: 20}\n"
                        "trial: {kind: client}\n");
    job_t *wj = ct_job (c, 2,
                        "space: {x: {uniform: [0, 1]}}\n"
                        "search: {samples: 20}\n"
                        "trial: {kind: noop, resources: {cpu: 0}}\n");
    assert_int_equal (sj->req[0].client, 1);
    assert_int_equal (sj->req[0].cpu, 0);
    node_t *n = NULL;
    node_t *w = ct_node (c, "w", 2, 0, 0);
    // Only a worker: the study waits for a client, it is not blocked.
    assert_int_equal (scheduler_choose (c, sj, &n), SCHEDULE_WAIT);
    node_t *a = ct_node (c, "a", 0, 0, 0);
    node_t *b = ct_node (c, "b", 0, 0, 0);
    nodes_client (c, a, 1, 0);
    nodes_client (c, b, 7, 5); // attached to another job: never gets job 1's
    assert_int_equal (scheduler_choose (c, sj, &n), SCHEDULE_WAIT);
    nodes_client (c, a, 1, 2);
    assert_true (c->sched_dirty);
    int started = dispatch_run (c);
    assert_int_equal (sj->running, 2);
    assert_int_equal (a->ntasks, 2);
    assert_int_equal (b->ntasks, 0);
    assert_int_equal (w->ntasks, wj->running);
    assert_int_equal (started, 2 + (int) wj->running);
    uint64_t trials[64];
    char dev[64][32], kind[64][16];
    size_t na = s_device_assigns (c, trials, dev, kind, 64);
    int clients = 0;
    for (size_t i = 0; i < na; i++)
        clients += !strcmp (kind[i], "client");
    assert_int_equal (clients, 2);
    // Full at its want: nothing more until it asks again.
    assert_int_equal (scheduler_choose (c, sj, &n), SCHEDULE_WAIT);
    // A want that shrinks below what it holds takes nothing and drops nothing.
    nodes_client (c, a, 1, 1);
    assert_int_equal (scheduler_choose (c, sj, &n), SCHEDULE_WAIT);
    assert_int_equal (a->ntasks, 2);
    // A hostile want is clamped.
    nodes_client (c, a, 1, UINT32_MAX);
    assert_int_equal (a->want, NODES_MAX_TASKS);
    ct_coord_destroy (&c);
}

static void
test_device_assign_fields (void **state)
{
    (void) state;
    coord_t *c = ct_coord_new (NOWHERE);
    ct_job (c, 1,
            "space: {m: {choice: [a]}}\n"
            "trial:\n"
            "  on: {device: x}\n"
            "  benchmark: sleep\n"
            "  artifact: {url: \"file:///m/{m}.bin\", sha256: "
            "\"9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08\"}\n"
            "  warmup: 2\n"
            "  timeout: 2s\n"
            "  env: {MODEL: \"{m}\"}\n");
    const char *devs[] = {"d1:device=x", NULL, 0};
    ct_runner (c, "r", devs);
    c->sched_dirty = true;
    assert_int_equal (dispatch_run (c), 1);
    const out_t *o = c->out_head;
    while (o) {
        cgq_env_t *env = cgq_wire_decode (o->data, o->len, 0);
        if (env->body_case == CGQ__ENVELOPE__BODY_ASSIGN) {
            const Cgq__Assign *a = env->assign;
            assert_string_equal (a->device_id, "d1");
            assert_string_equal (a->benchmark, "sleep");
            assert_string_equal (a->artifact_url, "file:///m/a.bin");
            assert_string_equal (a->artifact_sha256,
                                 "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08");
            assert_int_equal (a->repeats, 0); // not given: the runner's default
            assert_int_equal (a->warmup, 2);
            assert_int_equal (a->timeout_ms, 2000);
            assert_int_equal (a->n_argv, 0);
            assert_int_equal (a->n_env, 1);
            assert_string_equal (a->env[0]->value, "a");
            assert_string_equal (a->params_json, "{\"m\":\"a\"}");
            cgq_wire_free (env);
            break;
        }
        cgq_wire_free (env);
        o = o->next;
    }
    assert_non_null (o);
    ct_coord_destroy (&c);
}

// A timeout too large for the Assign's uint32 milliseconds saturates: it
// used to wrap (4294968 s became 0.7 s) or, at 1e308 s, be undefined.
static void
test_huge_timeout_saturates (void **state)
{
    (void) state;
    const char *timeouts[] = {"4294968", "1e308", "2s"};
    const uint32_t want[] = {UINT32_MAX, UINT32_MAX, 2000};
    for (size_t i = 0; i < 3; i++) {
        coord_t *c = ct_coord_new (NOWHERE);
        char *yaml = cgq_xasprintf ("space: {x: {choice: [1]}}\n"
                                    "trial:\n  command: \"true\"\n  timeout: %s\n",
                                    timeouts[i]);
        ct_job (c, 1, yaml);
        free (yaml);
        ct_node (c, "w", 4, 0, 0);
        c->sched_dirty = true;
        assert_int_equal (dispatch_run (c), 1);
        bool seen = false;
        for (const out_t *o = c->out_head; o; o = o->next) {
            if (o->acks)
                continue; // an Ack still open (encoded when sent)
            cgq_env_t *env = cgq_wire_decode (o->data, o->len, 0);
            if (env->body_case == CGQ__ENVELOPE__BODY_ASSIGN) {
                assert_int_equal (env->assign->timeout_ms, want[i]);
                seen = true;
            }
            cgq_wire_free (env);
        }
        assert_true (seen);
        ct_coord_destroy (&c);
    }
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
        cmocka_unit_test (test_device_matching),
        cmocka_unit_test (test_client_nodes),
        cmocka_unit_test (test_device_assign_fields),
        cmocka_unit_test (test_huge_timeout_saturates),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
