// nodes_test: the resource ledger. Seeded random sequences of grant and
// release (thousands of steps) never over-commit a CPU, memory or a GPU share,
// and releasing everything returns every node to what it offered. Devices:
// quarantine after failures in a row, enable, a lost runner's task re-queued.
// Thousands of nodes: found by id, liveness on time; heartbeats write
// nothing, last_seen is written coarsely.
#include <math.h>
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
#include "loop.h"
#include "nodes.h"
#include "session.h"

#define EPS 1e-9
#define NTRIALS 20000 // one per step at most

static uint64_t s_rng = 88172645463325252ULL;

static uint64_t
s_next (void)
{
    s_rng ^= s_rng << 13;
    s_rng ^= s_rng >> 7;
    s_rng ^= s_rng << 17;
    return s_rng;
}

// s_check asserts the ledger of n: its free resources plus what its
// attached trials hold equal what it offers, nothing below zero.
static void
s_check (const node_t *n)
{
    double cpu = n->free_cpus;
    uint64_t mem = n->free_memory;
    double *gpu = calloc ((size_t) n->ngpus + 1, sizeof *gpu);
    for (int g = 0; g < n->ngpus; g++) {
        assert_true (n->gpus[g].free > -EPS);
        assert_true (n->gpus[g].free < 1.0 + EPS);
        gpu[g] = n->gpus[g].free;
    }
    uint32_t count = 0;
    for (const trial_t *t = n->tasks; t; t = t->nnext) {
        count++;
        assert_true (t->holds);
        cpu += t->job->req[0].cpu;
        mem += t->job->req[0].memory;
        for (int i = 0; i < t->ngpus; i++) {
            assert_true (t->gpus[i] >= 0 && t->gpus[i] < n->ngpus);
            gpu[t->gpus[i]] += nodes_gpu_share (t->job->req);
        }
    }
    assert_int_equal (count, n->ntasks);
    assert_true (n->free_cpus > -EPS);
    assert_true (fabs (cpu - n->cpus) < 1e-6);
    assert_int_equal (mem, n->memory);
    for (int g = 0; g < n->ngpus; g++)
        assert_true (fabs (gpu[g] - 1.0) < 1e-6);
    free (gpu);
}

static void
test_grant_release_property (void **state)
{
    (void) state;
    coord_t *c = ct_coord_new ("redis://127.0.0.1:1/0");
    node_t *nodes[3] = {ct_node (c, "a", 8, 2, 16ull << 30), ct_node (c, "b", 3.5, 4, 8ull << 30),
                        ct_node (c, "c", 16, 1, 64ull << 30)};
    // Requests as specs write them: shares of one GPU, whole GPUs, none.
    const req_t kinds[] = {{1, 0, 0, NULL, 0},     {0.5, 0.25, 1 << 20, NULL, 0}, {2, 0.5, 1ull << 30, NULL, 0},
                           {1, 1, 0, NULL, 0},     {0.25, 2, 2ull << 30, NULL, 0}, {1.5, 0.125, 0, NULL, 0},
                           {0, 0.75, 0, NULL, 0},  {4, 3, 4ull << 30, NULL, 0}};
    const int nkinds = (int) (sizeof kinds / sizeof *kinds);
    job_t jobs[8];
    memset (jobs, 0, sizeof jobs);
    for (int k = 0; k < nkinds; k++)
        jobs[k].req[0] = kinds[k];
    trial_t *trials = calloc (NTRIALS, sizeof *trials);
    trial_t **held = calloc (NTRIALS, sizeof *held);
    size_t nheld = 0, used = 0, grants = 0, refused = 0;
    for (int step = 0; step < 20000; step++) {
        bool grant = used < NTRIALS && (nheld == 0 || s_next () % 100 < 55);
        if (!grant && nheld == 0)
            break;
        if (grant) {
            trial_t *t = &trials[used++];
            t->job = &jobs[s_next () % (uint64_t) nkinds];
            node_t *n = nodes[s_next () % 3];
            if (!nodes_fits_free (n, t->job->req)) {
                refused++;
                continue;
            }
            nodes_attach (n, t);
            assert_int_equal (nodes_grant (n, t), 0); // fits_free promised room
            held[nheld++] = t;
            grants++;
            s_check (n);
        }
        else {
            size_t i = (size_t) (s_next () % nheld);
            trial_t *t = held[i];
            node_t *n = t->node;
            nodes_release (c, t);
            assert_null (t->node);
            assert_false (t->holds);
            free (t->gpus);
            t->gpus = NULL;
            t->ngpus = 0;
            held[i] = held[--nheld];
            s_check (n);
        }
    }
    assert_true (grants > 1000);
    assert_true (refused > 100); // the nodes were really full at times
    while (nheld) {
        trial_t *t = held[--nheld];
        nodes_release (c, t);
        free (t->gpus);
    }
    for (int i = 0; i < 3; i++) {
        node_t *n = nodes[i];
        assert_int_equal (n->ntasks, 0);
        assert_true (fabs (n->free_cpus - n->cpus) < 1e-9);
        assert_int_equal (n->free_memory, n->memory);
        for (int g = 0; g < n->ngpus; g++)
            assert_true (n->gpus[g].free == 1.0);
    }
    free (held);
    free (trials);
    ct_coord_destroy (&c);
}

static void
test_gpu_shares_pack (void **state)
{
    (void) state;
    coord_t *c = ct_coord_new ("redis://127.0.0.1:1/0");
    node_t *n = ct_node (c, "g", 8, 2, 0);
    job_t half;
    memset (&half, 0, sizeof half);
    half.req[0] = (req_t){1, 0.5, 0, NULL, 0};
    trial_t t[5];
    memset (t, 0, sizeof t);
    int on[2] = {0, 0};
    for (int i = 0; i < 4; i++) {
        t[i].job = &half;
        assert_true (nodes_fits_free (n, half.req));
        nodes_attach (n, &t[i]);
        assert_int_equal (nodes_grant (n, &t[i]), 0);
        on[t[i].gpus[0]]++;
    }
    // Two halves share each GPU; a fifth half does not fit but could one day.
    assert_int_equal (on[0], 2);
    assert_int_equal (on[1], 2);
    assert_false (nodes_fits_free (n, half.req));
    assert_true (nodes_fits_total (n, half.req));
    req_t three = {1, 3, 0, NULL, 0};
    assert_false (nodes_fits_total (n, &three));
    assert_int_equal (nodes_gpu_count (&three), 3);
    assert_true (nodes_gpu_share (&three) == 1.0);
    // A Hello that declares fewer GPUs re-grants: the trials on GPU 1 over-commit.
    Cgq__Gpu g0 = CGQ__GPU__INIT, *gp[1] = {&g0};
    Cgq__Resources res = CGQ__RESOURCES__INIT;
    res.cpus = 8;
    res.n_gpus = 1;
    res.gpus = gp;
    assert_int_equal (nodes_declare (c, n, "g", 1, CGQ__NODE_KIND__NODE_WORKER, &res), 2);
    for (int i = 0; i < 4; i++) {
        nodes_release (c, &t[i]);
        free (t[i].gpus);
    }
    assert_true (n->gpus[0].free == 1.0);
    ct_coord_destroy (&c);
}

static void
test_hostile_offer (void **state)
{
    (void) state;
    coord_t *c = ct_coord_new ("redis://127.0.0.1:1/0");
    node_t *n = ct_node (c, "nan", NAN, 0, 0);
    assert_true (n->cpus == 0);
    n = ct_node (c, "inf", INFINITY, 0, 0);
    assert_true (n->cpus == 0);
    n = ct_node (c, "neg", -4, 0, 0);
    assert_true (n->cpus == 0);
    // No machine has 1e9 CPU slots or 10,000 GPUs: refused, counted, not registered.
    Cgq__Gpu gpu = CGQ__GPU__INIT, *gpus[10000];
    for (int i = 0; i < 10000; i++)
        gpus[i] = &gpu;
    struct {
        const char *id;
        double cpus;
        size_t ngpus;
    } offers[] = {{"huge-cpus", 1e9, 0}, {"huge-gpus", 4, 10000}, {"max", 65536, 256}};
    for (int i = 0; i < 3; i++) {
        Cgq__Resources res = CGQ__RESOURCES__INIT;
        res.cpus = offers[i].cpus;
        res.n_gpus = offers[i].ngpus;
        res.gpus = gpus;
        Cgq__Hello h = CGQ__HELLO__INIT;
        h.hostname = "test";
        h.resources = &res;
        cgq_env_t env = CGQ__ENVELOPE__INIT;
        env.body_case = CGQ__ENVELOPE__BODY_HELLO;
        env.hello = &h;
        uint64_t before = c->stat_rejected;
        session_message (c, offers[i].id, strlen (offers[i].id), &env);
        bool refused = i < 2;
        assert_int_equal (nodes_find (c, offers[i].id) == NULL, refused);
        assert_int_equal (c->stat_rejected, before + (refused ? 1 : 0));
    }
    ct_coord_destroy (&c);
}


static const char *s_spec_dev = "space: {x: {uniform: [0, 1]}}\n"
                                "search: {samples: 50}\n"
                                "trial: {on: {device: x}, benchmark: b, retries: 100}\n";

// s_running returns a running trial of j on device id (NULL: none).
static trial_t *
s_running (job_t *j, const char *id)
{
    for (trial_t *t = zhashx_first (j->trials); t; t = zhashx_next (j->trials))
        if (t->state == CGQ_TRIAL_RUNNING && t->device && !strcmp (t->device->id, id))
            return t;
    return NULL;
}

static void
test_device_quarantine (void **state)
{
    (void) state;
    coord_t *c = ct_coord_new ("redis://127.0.0.1:1/0");
    c->cfg.quarantine_after = 2;
    job_t *j = ct_job (c, 1, s_spec_dev);
    const char *devs[] = {"d1:device=x", "d2:device=x", NULL, 0};
    ct_runner (c, "r", devs);
    c->sched_dirty = true;
    assert_int_equal (dispatch_run (c), 2);
    device_t *d1 = nodes_device_find (c, "d1");
    assert_non_null (d1);
    assert_string_equal (nodes_device_state (d1), CGQ_DEVICE_BUSY);
    // A failure, then a success: not in a row.
    trial_t *t = s_running (j, "d1");
    ct_result (c, "r", 1, t->id, t->attempt, CGQ__TASK_STATUS__TASK_FAILED, "{}", "exit 1");
    assert_int_equal (d1->failures, 1);
    assert_string_equal (nodes_device_state (d1), CGQ_DEVICE_IDLE);
    dispatch_run (c);
    t = s_running (j, "d1");
    ct_result (c, "r", 1, t->id, t->attempt, CGQ__TASK_STATUS__TASK_SUCCEEDED, "{\"x\": 1}", NULL);
    assert_int_equal (d1->failures, 0);
    // A stop says nothing about the device.
    dispatch_run (c);
    t = s_running (j, "d1");
    ct_result (c, "r", 1, t->id, t->attempt, CGQ__TASK_STATUS__TASK_STOPPED, "{}", "stopped");
    assert_int_equal (d1->failures, 0);
    // A failure and a timeout in a row: quarantined, no trial goes there.
    dispatch_run (c);
    t = s_running (j, "d1");
    ct_result (c, "r", 1, t->id, t->attempt, CGQ__TASK_STATUS__TASK_FAILED, "{}", "exit 1");
    dispatch_run (c);
    t = s_running (j, "d1");
    ct_result (c, "r", 1, t->id, t->attempt, CGQ__TASK_STATUS__TASK_TIMEOUT, "{}", "after 2s");
    assert_true (d1->quarantined);
    assert_string_equal (nodes_device_state (d1), CGQ_DEVICE_QUARANTINED);
    assert_string_equal (d1->last_error, "timeout: after 2s");
    for (int i = 0; i < 5; i++) {
        dispatch_run (c);
        assert_null (s_running (j, "d1"));
        trial_t *u = s_running (j, "d2");
        assert_non_null (u);
        ct_result (c, "r", 1, u->id, u->attempt, CGQ__TASK_STATUS__TASK_SUCCEEDED, "{\"x\": 1}",
                   NULL);
    }
    // Quarantine d2 too: nothing can run the job; the reason says why.
    for (int i = 0; i < 2; i++) {
        dispatch_run (c);
        trial_t *u = s_running (j, "d2");
        ct_result (c, "r", 1, u->id, u->attempt, CGQ__TASK_STATUS__TASK_FAILED, "{}", "boom");
    }
    dispatch_run (c);
    assert_string_equal (j->blocked, "devices d1 (quarantined: timeout: after 2s), d2 "
                                     "(quarantined: failed: boom): every device that can run "
                                     "it is quarantined (cgq devices enable ID returns one)");
    // A runner's word that a device's check passes again: only for its own
    // device, and only a quarantined one (Heartbeat.recovered).
    const char *other[] = {"d9:device=y", NULL, 0};
    node_t *stranger = ct_runner (c, "r2", other);
    nodes_device_recovered (c, stranger, "d2");
    assert_true (nodes_device_find (c, "d2")->quarantined);
    nodes_device_recovered (c, stranger, "nope");
    nodes_device_recovered (c, nodes_find (c, "r"), "d2");
    assert_false (nodes_device_find (c, "d2")->quarantined);
    assert_int_equal (nodes_device_find (c, "d2")->failures, 0);
    nodes_device_recovered (c, nodes_find (c, "r"), "d2"); // a late repeat: nothing
    assert_false (nodes_device_find (c, "d2")->quarantined);
    char msg[256];
    assert_int_equal (nodes_device_enable (c, "nope", msg, sizeof msg), -1);
    assert_string_equal (msg, "unknown device 'nope' (cgq devices lists them)");
    assert_int_equal (nodes_device_enable (c, "d1", msg, sizeof msg), 0);
    assert_string_equal (msg, "device d1 is back in service");
    assert_int_equal (d1->failures, 0);
    assert_int_equal (dispatch_run (c), 2); // d1 and d2 (recovered above)
    assert_null (j->blocked);
    assert_non_null (s_running (j, "d1"));
    assert_int_equal (nodes_device_enable (c, "d1", msg, sizeof msg), 0);
    assert_string_equal (msg, "device d1 was not quarantined");
    ct_coord_destroy (&c);
}

// A turn writes the hashes of the devices that changed, from a list of
// them: not a walk over every device of every lab.
static void
test_device_writes_listed (void **state)
{
    (void) state;
    coord_t *c = ct_coord_new ("redis://127.0.0.1:1/0");
    job_t *j = ct_job (c, 1, s_spec_dev);
    const char *devs[] = {"d0:device=x", "d1:device=x", "d2:device=x", "d3:device=y",
                          "d4:device=y", "d5:device=y", NULL, 0};
    ct_runner (c, "r", devs);
    c->sched_dirty = true;
    assert_int_equal (dispatch_run (c), 3);
    // Declared and granted: every device listed once, however often marked.
    size_t listed = 0;
    for (device_t *d = c->dirty_devices; d; d = d->dirty_next) {
        assert_true (d->listed);
        listed++;
    }
    assert_int_equal (listed, 6);
    nodes_write_dirty (c);
    assert_null (c->dirty_devices);
    size_t p0 = cgq_store_pending (c->store);
    assert_true (p0 > 0);
    // Nothing changed: nothing written.
    nodes_write_dirty (c);
    assert_int_equal (cgq_store_pending (c->store), p0);
    // One trial ends: its device alone is listed, and written.
    trial_t *t = s_running (j, "d1");
    assert_non_null (t);
    ct_result (c, "r", 1, t->id, t->attempt, CGQ__TASK_STATUS__TASK_FAILED, "{}", "exit 1");
    device_t *d1 = nodes_device_find (c, "d1");
    assert_ptr_equal (c->dirty_devices, d1);
    assert_null (d1->dirty_next);
    assert_true (d1->dirty);
    nodes_write_dirty (c);
    assert_true (cgq_store_pending (c->store) > p0);
    assert_false (d1->dirty);
    assert_false (d1->listed);
    assert_null (c->dirty_devices);
    for (device_t *d = zhashx_first (c->devices); d; d = zhashx_next (c->devices))
        assert_false (d->dirty);
    ct_coord_destroy (&c);
}

static void
test_runner_lost (void **state)
{
    (void) state;
    coord_t *c = ct_coord_new ("redis://127.0.0.1:1/0");
    job_t *j = ct_job (c, 1, s_spec_dev);
    const char *one[] = {"d1:device=x", NULL, 0};
    node_t *r = ct_runner (c, "r1", one);
    c->sched_dirty = true;
    assert_int_equal (dispatch_run (c), 1);
    trial_t *t = s_running (j, "d1");
    assert_non_null (t);
    uint64_t id = t->id;
    // A second runner cannot take over a device that r1 still serves.
    const char *same[] = {"d1:device=x", "d9:device=y", NULL, 0};
    node_t *r2 = ct_runner (c, "r2", same);
    assert_int_equal (r2->ndevices, 1);
    assert_string_equal (r2->devices[0]->id, "d9");
    // r1 falls silent: after the heartbeat timeout its task is pending again
    // and its device offline; a runner that serves d1 again gets it, attempt 2.
    r->last_seen_ms -= 60000;
    r2->last_seen_ms = cgq_now_ms ();
    session_liveness (c, cgq_now_ms ());
    assert_null (nodes_find (c, "r1"));
    device_t *d1 = nodes_device_find (c, "d1");
    assert_string_equal (nodes_device_state (d1), CGQ_DEVICE_OFFLINE);
    t = jobs_trial (c, 1, id);
    assert_int_equal (t->state, CGQ_TRIAL_PENDING);
    assert_null (t->device);
    const char *back[] = {"d1:device=x", NULL, 0};
    ct_runner (c, "r3", back);
    dispatch_run (c);
    t = jobs_trial (c, 1, id);
    assert_int_equal (t->state, CGQ_TRIAL_RUNNING);
    assert_int_equal (t->attempt, 2);
    assert_ptr_equal (t->device, d1);
    assert_ptr_equal (d1->task, t);
    ct_coord_destroy (&c);
}

// s_beat has node id's heartbeat (nothing running) handled as the loop would.
static void
s_beat (coord_t *c, const char *id)
{
    Cgq__Heartbeat hb = CGQ__HEARTBEAT__INIT;
    hb.epoch = c->epoch;
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &hb;
    session_message (c, id, strlen (id), &env);
}

#define NMANY 4000

// Thousands of nodes: each is found by its id (and no id that is not one
// is), and liveness marks the one silent node stale, and the other dead, on
// the millisecond, leaving every other node alone.
static void
test_many_nodes (void **state)
{
    (void) state;
    coord_t *c = ct_coord_new ("redis://127.0.0.1:1/0");
    char id[32];
    int64_t now = cgq_now_ms ();
    for (int i = 0; i < NMANY; i++) {
        snprintf (id, sizeof id, "n%05d", i);
        nodes_add (c, id)->last_seen_ms = now;
    }
    for (int i = NMANY - 1; i >= 0; i--) {
        snprintf (id, sizeof id, "n%05d", i);
        node_t *n = nodes_find (c, id);
        assert_non_null (n);
        assert_string_equal (n->id, id);
    }
    assert_null (nodes_find (c, "n0000"));
    assert_null (nodes_find (c, "n000000"));
    snprintf (id, sizeof id, "n%05d", NMANY);
    assert_null (nodes_find (c, id));

    int64_t hb = c->cfg.heartbeat_ms;
    node_t *quiet = nodes_find (c, "n01234"), *edge = nodes_find (c, "n01235");
    node_t *gone = nodes_find (c, "n03999"), *almost = nodes_find (c, "n00007");
    quiet->last_seen_ms = now - hb * c->cfg.stale_after - 1;
    edge->last_seen_ms = now - hb * c->cfg.stale_after; // not yet
    gone->last_seen_ms = now - hb * c->cfg.dead_after - 1;
    almost->last_seen_ms = now - hb * c->cfg.dead_after; // stale, not dead
    nodes_dirty (gone); // on the dirty list when it goes: taken off it
    session_liveness (c, now);
    assert_null (nodes_find (c, "n03999"));
    assert_true (quiet->stale);
    assert_false (edge->stale);
    assert_true (almost->stale);
    int count = 0, stale = 0;
    for (node_t *n = c->nodes; n; n = n->next) {
        count++;
        stale += n->stale;
    }
    assert_int_equal (count, NMANY - 1);
    assert_int_equal (stale, 2);
    nodes_write_dirty (c);
    assert_null (c->dirty_nodes);

    // Heard from again: running again; a node that had been silent longer
    // than dead-after by then is gone.
    s_beat (c, "n01234");
    assert_false (quiet->stale);
    edge->last_seen_ms -= 1;
    session_liveness (c, now);
    assert_true (edge->stale);
    almost->last_seen_ms -= 1;
    session_liveness (c, now);
    assert_null (nodes_find (c, "n00007"));
    ct_coord_destroy (&c);
}

// A heartbeat writes nothing: the node's hash (last_seen) is written again
// by the liveness check, once SESSION_SEEN_WRITE_MS have passed since it was
// last written and only when the node was heard from since.
static void
test_last_seen_coarse (void **state)
{
    (void) state;
    coord_t *c = ct_coord_new ("redis://127.0.0.1:1/0");
    c->cfg.heartbeat_ms = 10000; // no node goes stale in this test
    node_t *n = ct_node (c, "w1", 4, 0, 0);
    nodes_write_dirty (c);
    assert_false (n->dirty);
    assert_null (c->dirty_nodes);
    size_t base = cgq_store_pending (c->store);
    for (int i = 0; i < 10; i++)
        s_beat (c, "w1");
    assert_false (n->dirty);
    assert_null (c->dirty_nodes);
    nodes_write_dirty (c);
    assert_int_equal (cgq_store_pending (c->store), base);

    int64_t now = cgq_now_ms ();
    session_liveness (c, now); // written at its Hello, just now
    nodes_write_dirty (c);
    assert_int_equal (cgq_store_pending (c->store), base);
    // SESSION_SEEN_WRITE_MS later, heard from meanwhile: written once.
    n->seen_written_ms = now - SESSION_SEEN_WRITE_MS;
    n->last_seen_ms = now - 1;
    session_liveness (c, now);
    assert_true (n->dirty);
    nodes_write_dirty (c);
    assert_false (n->dirty);
    assert_int_equal (cgq_store_pending (c->store), base + 1);
    assert_true (n->seen_written_ms >= now);
    // Not heard from since its last write: nothing new to say.
    n->seen_written_ms = now - SESSION_SEEN_WRITE_MS;
    n->last_seen_ms = n->seen_written_ms;
    session_liveness (c, now);
    assert_false (n->dirty);
    // Not yet SESSION_SEEN_WRITE_MS: waits.
    n->seen_written_ms = now - SESSION_SEEN_WRITE_MS + 1;
    n->last_seen_ms = now;
    session_liveness (c, now);
    assert_false (n->dirty);
    nodes_write_dirty (c);
    assert_int_equal (cgq_store_pending (c->store), base + 1);
    ct_coord_destroy (&c);
}

// The loop's heartbeat hold: only turns of heartbeats alone, in quick
// succession, hold the node socket; anything else read ends the hold.
static void
test_heartbeat_hold (void **state)
{
    (void) state;
    coord_t *c = ct_coord_new ("redis://127.0.0.1:1/0");
    int64_t t = 1000000;
    coord_heartbeat_hold (c, 1, 0, 1, t); // the first: no gap known yet
    assert_int_equal (c->hold_nodes_ms, 0);
    coord_heartbeat_hold (c, 1, 0, 1, t + LOOP_QUIET_GAP_MS); // a few nodes: too far apart
    assert_int_equal (c->hold_nodes_ms, 0);
    coord_heartbeat_hold (c, 3, 0, 3, t + LOOP_QUIET_GAP_MS + 1); // many nodes
    assert_int_equal (c->hold_nodes_ms, t + LOOP_QUIET_GAP_MS + 1 + LOOP_HOLD_MS);
    coord_heartbeat_hold (c, 0, 0, 0, t + 30); // a timer's turn changes nothing
    assert_int_equal (c->hold_nodes_ms, t + LOOP_QUIET_GAP_MS + 1 + LOOP_HOLD_MS);
    coord_heartbeat_hold (c, 8, 0, 8, t + 31);
    assert_int_equal (c->hold_nodes_ms, t + 31 + LOOP_HOLD_MS);
    coord_heartbeat_hold (c, 8, 0, 7, t + 32); // a Result among them: no hold
    assert_int_equal (c->hold_nodes_ms, 0);
    coord_heartbeat_hold (c, 8, 0, 8, t + 33); // and the next quiet turn starts over
    assert_int_equal (c->hold_nodes_ms, 0);
    coord_heartbeat_hold (c, 8, 0, 8, t + 34);
    assert_int_equal (c->hold_nodes_ms, t + 34 + LOOP_HOLD_MS);
    coord_heartbeat_hold (c, 8, 1, 8, t + 35); // a control request
    assert_int_equal (c->hold_nodes_ms, 0);
    ct_coord_destroy (&c);
}

int
main (void)
{
    cgq_log_init ("nodes_test", CGQ_LOG_ERROR, false);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_grant_release_property),
        cmocka_unit_test (test_gpu_shares_pack),
        cmocka_unit_test (test_hostile_offer),
        cmocka_unit_test (test_device_quarantine),
        cmocka_unit_test (test_device_writes_listed),
        cmocka_unit_test (test_runner_lost),
        cmocka_unit_test (test_many_nodes),
        cmocka_unit_test (test_last_seen_coarse),
        cmocka_unit_test (test_heartbeat_hold),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
