// pbt_test: search pbt in the coordinator, against a real redis-server: a
// checkpoint that ranks a trial in the bottom quantile stops it (state
// stopped, event trial.exploited, field exploited); the donor's
// CheckpointAcks name the checkpoint the child still needs (its worker must
// not prune it) until the child has one of its own; the child's Assign
// resumes from the donor's record with resume_required; its own first
// checkpoint is recorded (the donor's record is not "newer"); and a new
// coordinator reads it all back.
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "checkpoint.h"
#include "coord_testing.h"
#include "dispatch.h"
#include "jobs.h"
#include "loop.h"
#include "nodes.h"
#include "outbox.h"
#include "recovery.h"
#include "redis_fixture.h"
#include "session.h"

static cgq_test_redis_t *s_redis;

static int
s_setup (void **state)
{
    (void)state;
    s_redis = cgq_test_redis_start (NULL);
    return s_redis ? 0 : -1;
}

static int
s_teardown (void **state)
{
    (void)state;
    cgq_test_redis_stop (&s_redis);
    return 0;
}

static char *
s_hget (coord_t *c, uint64_t job, uint64_t trial, const char *field)
{
    char key[96];
    redisReply *r = cgq_store_command (c->store, "HGET %s %s",
                                       cgq_key_trial (key, sizeof key, job, trial), field);
    assert_non_null (r);
    char *v = r->type == REDIS_REPLY_STRING ? cgq_xstrdup (r->str) : NULL;
    freeReplyObject (r);
    return v;
}

static void
s_ckpt (coord_t *c, uint64_t trial, uint64_t n, int epoch)
{
    Cgq__TaskRef ref = CGQ__TASK_REF__INIT;
    ref.job = 41;
    ref.trial = trial;
    ref.attempt = 1;
    char step[32], sha[65], path[96];
    snprintf (step, sizeof step, "{\"epoch\": %d}", epoch);
    snprintf (sha, sizeof sha, "%064" PRIx64, trial * 1000 + n);
    snprintf (path, sizeof path, "/store/job-41/trial-%" PRIu64 "/ckpt-1-%" PRIu64, trial, n);
    Cgq__Checkpoint m = CGQ__CHECKPOINT__INIT;
    m.task = &ref;
    m.n = n;
    m.step_json = step;
    m.size = 10;
    m.files = 1;
    m.sha256 = sha;
    m.path = path;
    m.host = "host-a";
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_CHECKPOINT;
    env.checkpoint = &m;
    session_message (c, "w1", 2, &env);
}

static void
s_progress (coord_t *c, uint64_t trial, int epoch, double score)
{
    Cgq__TaskRef ref = CGQ__TASK_REF__INIT;
    ref.job = 41;
    ref.trial = trial;
    ref.attempt = 1;
    char report[96];
    snprintf (report, sizeof report, "{\"epoch\": %d, \"score\": %g}", epoch, score);
    Cgq__Progress p = CGQ__PROGRESS__INIT;
    p.task = &ref;
    p.report_json = report;
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_PROGRESS;
    env.progress = &p;
    session_message (c, "w1", 2, &env);
}

// s_keep: the keep names of the last CheckpointAck of (trial, n), joined by ','.
static void
s_keep (const coord_t *c, uint64_t trial, uint64_t n, bool *recorded, char *keep, size_t klen)
{
    bool found = false;
    for (const out_t *o = c->out_head; o; o = o->next) {
        if (o->acks)
            continue;
        cgq_env_t *env = cgq_wire_decode (o->data, o->len, 0);
        assert_non_null (env);
        const Cgq__CheckpointAck *a = env->checkpoint_ack;
        if (env->body_case == CGQ__ENVELOPE__BODY_CHECKPOINT_ACK && a->task->trial == trial &&
            a->n == n) {
            found = true;
            *recorded = a->recorded;
            keep[0] = 0;
            for (size_t i = 0; i < a->n_keep; i++)
                snprintf (keep + strlen (keep), klen - strlen (keep), "%s%s", i ? "," : "",
                          a->keep[i]);
        }
        cgq_wire_free (env);
    }
    if (!found)
        fail_msg ("no CheckpointAck for checkpoint %" PRIu64 " of trial %" PRIu64, n, trial);
}

// s_assign_resume: the child's Assign: its resume list and resume_required.
static void
s_assign_resume (const coord_t *c, uint64_t trial, char *out, size_t len, bool *required)
{
    bool found = false;
    for (const out_t *o = c->out_head; o; o = o->next) {
        if (o->acks)
            continue;
        cgq_env_t *env = cgq_wire_decode (o->data, o->len, 0);
        const Cgq__Assign *a = env->assign;
        if (env->body_case == CGQ__ENVELOPE__BODY_ASSIGN && a->task->trial == trial) {
            found = true;
            out[0] = 0;
            for (size_t i = 0; i < a->n_resume; i++)
                snprintf (out + strlen (out), len - strlen (out), "%s%s", i ? "," : "",
                          a->resume[i]->path);
            *required = a->resume_required;
        }
        cgq_wire_free (env);
    }
    if (!found)
        fail_msg ("no Assign of trial %" PRIu64, trial);
}

static const char *s_spec = "name: pbt\n"
                            "space: {lr: {loguniform: [0.001, 1.0]}}\n"
                            "search: {algorithm: pbt, population: 2, perturbation_interval: 2, "
                            "seed: 3, hyperparam_mutations: [lr]}\n"
                            "objective: {metric: score, mode: max}\n"
                            "trial: {command: ./run, resources: {cpu: 1}}\n"
                            "checkpoint: {store: /store}\n";

static void
test_exploit_pin_child_restart (void **state)
{
    (void)state;
    coord_t *c = ct_coord_new (cgq_test_redis_url (s_redis));
    job_t *j = ct_job (c, 41, s_spec);
    node_t *w = ct_node (c, "w1", 2, 0, 0);
    assert_int_equal (dispatch_run (c), 2);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    char keep[256], resume[512];
    bool rec, required;

    s_progress (c, 0, 2, 5.0);
    s_progress (c, 1, 2, 1.0);
    s_ckpt (c, 0, 2, 2); // the top one: not exploited
    s_keep (c, 0, 2, &rec, keep, sizeof keep);
    assert_true (rec);
    assert_string_equal (keep, "ckpt-1-2");
    assert_int_equal (jobs_trial (c, 41, 0)->state, CGQ_TRIAL_RUNNING);
    s_ckpt (c, 1, 2, 2); // the bottom one: exploited, from trial 0's ckpt-1-2
    assert_int_equal (jobs_trial (c, 41, 1)->state, CGQ_TRIAL_STOPPED);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    char *v = s_hget (c, 41, 1, CGQ_TF_STATE);
    assert_string_equal (v, "stopped");
    free (v);
    v = s_hget (c, 41, 1, CGQ_TF_EXPLOITED);
    assert_non_null (strstr (v, "\"by\":2"));
    assert_non_null (strstr (v, "\"donor\":0"));
    free (v);

    // While the child waits (trial 1 holds its CPU until its node says it
    // stopped), the donor's next checkpoint's ack still names ckpt-1-2.
    s_ckpt (c, 0, 3, 3);
    s_keep (c, 0, 3, &rec, keep, sizeof keep);
    assert_true (rec);
    assert_string_equal (keep, "ckpt-1-3,ckpt-1-2");
    assert_int_equal (dispatch_run (c), 0);
    ct_result (c, "w1", 41, 1, 1, CGQ__TASK_STATUS__TASK_STOPPED, NULL, "stopped: exploited");
    assert_int_equal (w->ntasks, 1);
    assert_int_equal (dispatch_run (c), 1);
    s_assign_resume (c, 2, resume, sizeof resume, &required);
    assert_string_equal (resume, "/store/job-41/trial-0/ckpt-1-2");
    assert_true (required);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    v = s_hget (c, 41, 2, CGQ_TF_PARENT);
    assert_string_equal (v, "0");
    free (v);
    v = s_hget (c, 41, 2, CGQ_TF_LINEAGE);
    assert_non_null (strstr (v, "\"replaces\":1"));
    assert_non_null (strstr (v, "\"checkpoint\":\"ckpt-1-2\""));
    free (v);

    // A new coordinator: the child's donor record, and the pin, are back.
    ct_coord_destroy (&c);
    c = ct_coord_new (cgq_test_redis_url (s_redis));
    assert_int_equal (recovery_jobs (c), 1);
    j = jobs_find (c, 41);
    assert_non_null (j);
    assert_true (cgq_searcher_pbt (j->searcher));
    trial_t *child = jobs_trial (c, 41, 2);
    assert_non_null (child);
    assert_true (checkpoint_required (child->ckpts));
    char pins[4][64];
    assert_int_equal (cgq_searcher_pbt_pins (j->searcher, 0, pins, 4), 1);
    assert_string_equal (pins[0], "ckpt-1-2");
    Cgq__TaskRef r0 = CGQ__TASK_REF__INIT, r2 = CGQ__TASK_REF__INIT;
    r0.job = r2.job = 41;
    r0.trial = 0;
    r2.trial = 2;
    r0.attempt = r2.attempt = 1;
    Cgq__TaskRef *running[] = {&r0, &r2};
    ct_hello_t x = {.running = running, .nrunning = 2};
    ct_hello (c, "w1", 2, &x); // adopts both
    assert_non_null (child->node);

    // The child's own first checkpoint is recorded (the donor's record, of
    // attempt 1 n 2, is not compared with it) and releases the pin.
    s_ckpt (c, 2, 1, 3);
    s_keep (c, 2, 1, &rec, keep, sizeof keep);
    assert_true (rec);
    assert_string_equal (keep, "ckpt-1-1");
    assert_false (checkpoint_required (child->ckpts));
    s_ckpt (c, 0, 4, 4);
    s_keep (c, 0, 4, &rec, keep, sizeof keep);
    assert_string_equal (keep, "ckpt-1-4");
    ct_coord_destroy (&c);
}

// A child whose attempt times out before it has a checkpoint of its own is
// retried from its donor's checkpoint even though checkpoint.resume leaves
// timeouts out: it is that checkpoint's continuation, not a fresh trial.
static void
test_child_retry_keeps_donor (void **state)
{
    (void)state;
    coord_t *c = ct_coord_new (cgq_test_redis_url (s_redis));
    freeReplyObject (cgq_store_command (c->store, "FLUSHALL")); // the test before used job 41
    ct_job (c, 41,
            "name: pbt\n"
            "space: {lr: {loguniform: [0.001, 1.0]}}\n"
            "search: {algorithm: pbt, population: 2, perturbation_interval: 2, seed: 3, "
            "hyperparam_mutations: [lr]}\n"
            "objective: {metric: score, mode: max}\n"
            "trial: {command: ./run, resources: {cpu: 1}, retries: 2}\n"
            "checkpoint: {store: /store, resume: [lost]}\n");
    ct_node (c, "w1", 2, 0, 0);
    assert_int_equal (dispatch_run (c), 2);
    s_progress (c, 0, 2, 5.0);
    s_progress (c, 1, 2, 1.0);
    s_ckpt (c, 0, 2, 2);
    s_ckpt (c, 1, 2, 2);
    ct_result (c, "w1", 41, 1, 1, CGQ__TASK_STATUS__TASK_STOPPED, NULL, "stopped: exploited");
    assert_int_equal (dispatch_run (c), 1);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    ct_result (c, "w1", 41, 2, 1, CGQ__TASK_STATUS__TASK_TIMEOUT, NULL, "timed out");
    assert_int_equal (dispatch_run (c), 1);
    Cgq__TaskRef refs[8];
    size_t n = ct_assigns (c, refs, 8);
    assert_true (n >= 1);
    char resume[512];
    bool required = false;
    s_assign_resume (c, 2, resume, sizeof resume, &required);
    assert_string_equal (resume, "/store/job-41/trial-0/ckpt-1-2");
    assert_true (required);
    assert_int_equal (jobs_trial (c, 41, 2)->attempt, 2);
    ct_coord_destroy (&c);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_exploit_pin_child_restart),
        cmocka_unit_test (test_child_retry_keeps_donor),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
