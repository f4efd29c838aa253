// checkpoint_test: the coordinator's checkpoint records against a real
// redis-server — what a node's Checkpoint records (the current attempt's,
// newest first, keep of them, the job's bytes), what it refuses (a stale
// attempt, an older one, a malformed one) and says in the CheckpointAck,
// what a retry's Assign restores, an attempt whose end does not resume
// (its records let go), and the records back after a restart; cgq pause
// and cgq resume (a trial paused at its checkpoint, lost while paused, a
// late success, the pause across a restart, a resume that uses no retry).
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "checkpoint.h"
#include "control.h"
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
    (void) state;
    s_redis = cgq_test_redis_start (NULL);
    return s_redis ? 0 : -1;
}

static int
s_teardown (void **state)
{
    (void) state;
    cgq_test_redis_stop (&s_redis);
    return 0;
}

// s_hget returns field of hash key (caller frees), NULL when absent.
static char *
s_hget (coord_t *c, const char *key, const char *field)
{
    redisReply *r = cgq_store_command (c->store, "HGET %s %s", key, field);
    assert_non_null (r);
    char *v = r->type == REDIS_REPLY_STRING ? cgq_xstrdup (r->str) : NULL;
    freeReplyObject (r);
    return v;
}

static json_t *
s_hget_json (coord_t *c, uint64_t job, uint64_t trial, const char *field)
{
    char key[96];
    char *v = s_hget (c, cgq_key_trial (key, sizeof key, job, trial), field);
    json_t *j = v ? json_loads (v, 0, NULL) : NULL;
    free (v);
    return j;
}

static int64_t
s_job_bytes (coord_t *c, uint64_t job)
{
    char key[64];
    char *v = s_hget (c, cgq_key_job (key, sizeof key, job), CGQ_JF_CHECKPOINT_BYTES);
    int64_t b = v ? strtoll (v, NULL, 10) : 0;
    free (v);
    return b;
}

// s_ckpt sends node's Checkpoint n of (job, trial, attempt) at epoch, of
// size bytes, as the worker does.
static void
s_ckpt (coord_t *c, const char *node, uint64_t job, uint64_t trial, uint32_t attempt, uint64_t n,
        int epoch, uint64_t size)
{
    Cgq__TaskRef ref = CGQ__TASK_REF__INIT;
    ref.job = job;
    ref.trial = trial;
    ref.attempt = attempt;
    char step[32], sha[65], path[96];
    snprintf (step, sizeof step, "{\"epoch\": %d}", epoch);
    snprintf (sha, sizeof sha, "%064" PRIx64, n * 1000 + attempt);
    snprintf (path, sizeof path, "/store/job-%" PRIu64 "/trial-%" PRIu64 "/ckpt-%u-%" PRIu64, job,
              trial, attempt, n);
    Cgq__Checkpoint m = CGQ__CHECKPOINT__INIT;
    m.task = &ref;
    m.n = n;
    m.step_json = step;
    m.size = size;
    m.files = 2;
    m.sha256 = sha;
    m.path = path;
    m.host = "host-a";
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_CHECKPOINT;
    env.checkpoint = &m;
    session_message (c, node, strlen (node), &env);
}

// s_ack finds the last queued CheckpointAck for checkpoint n of attempt;
// *recorded, the reason (caller frees) and keep (joined by ',').
static char *
s_ack (const coord_t *c, uint32_t attempt, uint64_t n, bool *recorded, char *keep, size_t klen)
{
    char *reason = NULL;
    for (const out_t *o = c->out_head; o; o = o->next) {
        if (o->acks)
            continue;
        cgq_env_t *env = cgq_wire_decode (o->data, o->len, 0);
        assert_non_null (env);
        const Cgq__CheckpointAck *a = env->checkpoint_ack;
        if (env->body_case == CGQ__ENVELOPE__BODY_CHECKPOINT_ACK && a->task->attempt == attempt
            && a->n == n) {
            assert_true (o->durable == (c->cfg.durable_ms > 0)); // once its batch is durable
            free (reason);
            reason = cgq_xstrdup (a->reason);
            *recorded = a->recorded;
            keep[0] = 0;
            for (size_t i = 0; i < a->n_keep; i++)
                snprintf (keep + strlen (keep), klen - strlen (keep), "%s%s", i ? "," : "",
                          a->keep[i]);
        }
        cgq_wire_free (env);
    }
    if (!reason)
        fail_msg ("no CheckpointAck for checkpoint %" PRIu64 " of attempt %u", n, attempt);
    return reason;
}

// s_resume decodes the queued Assign of (trial, attempt): its resume list as
// "ckpt-A-N@step,..." into out, and its checkpoint store and keep.
static void
s_resume (const coord_t *c, uint64_t trial, uint32_t attempt, char *out, size_t len,
          char *store, size_t slen, uint32_t *keep)
{
    bool found = false;
    for (const out_t *o = c->out_head; o; o = o->next) {
        if (o->acks)
            continue;
        cgq_env_t *env = cgq_wire_decode (o->data, o->len, 0);
        const Cgq__Assign *a = env->assign;
        if (env->body_case == CGQ__ENVELOPE__BODY_ASSIGN && a->task->trial == trial
            && a->task->attempt == attempt) {
            found = true;
            out[0] = 0;
            for (size_t i = 0; i < a->n_resume; i++) {
                const Cgq__Checkpoint *k = a->resume[i];
                snprintf (out + strlen (out), len - strlen (out), "%sckpt-%u-%" PRIu64 "@%s",
                          i ? "," : "", k->task->attempt, k->n, k->step_json);
                assert_int_equal (strlen (k->sha256), 64);
                assert_non_null (strstr (k->path, "/store/"));
            }
            snprintf (store, slen, "%s", a->checkpoint_store);
            *keep = a->checkpoint_keep;
        }
        cgq_wire_free (env);
    }
    if (!found)
        fail_msg ("no Assign of trial %" PRIu64 " attempt %u", trial, attempt);
}

static const char *s_spec = "name: ck\n"
                            "space: {x: {grid: [1]}}\n"
                            "search: {algorithm: grid}\n"
                            "objective: {metric: score, mode: max}\n"
                            "trial: {command: ./run, retries: 2}\n"
                            "checkpoint: {store: '{spec_dir}/ck/{job_id}', keep: 2}\n";

static void
test_records_and_resume (void **state)
{
    (void) state;
    coord_t *c = ct_coord_new (cgq_test_redis_url (s_redis));
    c->cfg.durable_ms = 3000; // CheckpointAcks wait for durability, as Acks do
    job_t *j = ct_job (c, 31, s_spec);
    free (j->spec_dir);
    j->spec_dir = cgq_xstrdup ("/specs");
    ct_node (c, "w1", 2, 0, 0);
    ct_node (c, "w2", 2, 0, 0);
    assert_int_equal (dispatch_run (c), 1);
    char resume[512], store[128], keep[256];
    uint32_t k = 0;
    s_resume (c, 0, 1, resume, sizeof resume, store, sizeof store, &k);
    assert_string_equal (resume, ""); // a first attempt starts afresh
    assert_string_equal (store, "/specs/ck/31");
    assert_int_equal (k, 2);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    trial_t *t = jobs_trial (c, 31, 0);
    const char *on = t->node->id, *other = !strcmp (on, "w1") ? "w2" : "w1";

    // Three checkpoints of attempt 1: the newest two are kept.
    s_ckpt (c, on, 31, 0, 1, 1, 2, 100);
    s_ckpt (c, on, 31, 0, 1, 2, 4, 200);
    bool rec = false;
    char *why = s_ack (c, 1, 2, &rec, keep, sizeof keep);
    assert_true (rec);
    assert_string_equal (keep, "ckpt-1-2,ckpt-1-1");
    free (why);
    s_ckpt (c, on, 31, 0, 1, 3, 6, 300);
    why = s_ack (c, 1, 3, &rec, keep, sizeof keep);
    assert_string_equal (keep, "ckpt-1-3,ckpt-1-2");
    free (why);
    // A re-send of 2 (its ack lost) is recorded still; 1 was let go: refused.
    s_ckpt (c, on, 31, 0, 1, 2, 4, 200);
    why = s_ack (c, 1, 2, &rec, keep, sizeof keep);
    assert_true (rec);
    free (why);
    s_ckpt (c, on, 31, 0, 1, 1, 2, 100);
    why = s_ack (c, 1, 1, &rec, keep, sizeof keep);
    assert_false (rec);
    assert_non_null (strstr (why, "older than the trial's latest"));
    free (why);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    json_t *latest = s_hget_json (c, 31, 0, CGQ_TF_CHECKPOINT);
    assert_non_null (latest);
    assert_int_equal (json_integer_value (json_object_get (latest, "n")), 3);
    assert_int_equal (json_integer_value (json_object_get (
                          json_object_get (latest, "step"), "epoch")),
                      6);
    assert_string_equal (json_string_value (json_object_get (latest, "node")), on);
    assert_string_equal (json_string_value (json_object_get (latest, "host")), "host-a");
    json_decref (latest);
    json_t *list = s_hget_json (c, 31, 0, CGQ_TF_CHECKPOINTS);
    assert_int_equal (json_array_size (list), 2);
    json_decref (list);
    assert_int_equal (s_job_bytes (c, 31), 500); // 300 + 200 (100 let go)

    // Attempt 1 fails: the retry restores them, newest first.
    ct_result (c, on, 31, 0, 1, CGQ__TASK_STATUS__TASK_FAILED, NULL, "exit status 1");
    assert_int_equal (dispatch_run (c), 1);
    s_resume (c, 0, 2, resume, sizeof resume, store, sizeof store, &k);
    assert_string_equal (resume, "ckpt-1-3@{\"epoch\":6},ckpt-1-2@{\"epoch\":4}");
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    const char *on2 = t->node->id;

    // Attempt 1, given up on, announces another checkpoint: refused, from
    // its own node or any other; malformed ones too.
    s_ckpt (c, on2, 31, 0, 1, 4, 8, 400);
    why = s_ack (c, 1, 4, &rec, keep, sizeof keep);
    assert_false (rec);
    assert_string_equal (why, "attempt 1 is not the trial's current attempt (2): a stale "
                              "attempt's checkpoint is never recorded");
    assert_string_equal (keep, "ckpt-1-3,ckpt-1-2");
    free (why);
    s_ckpt (c, other, 31, 0, 1, 5, 9, 400);
    free (s_ack (c, 1, 5, &rec, keep, sizeof keep));
    assert_false (rec);
    s_ckpt (c, on2, 31, 0, 2, 0, 1, 1); // n 0
    why = s_ack (c, 2, 0, &rec, keep, sizeof keep);
    assert_false (rec);
    assert_non_null (strstr (why, "malformed"));
    free (why);
    // The current attempt's first: newest, and attempt 1's 2 is let go.
    s_ckpt (c, on2, 31, 0, 2, 1, 7, 50);
    why = s_ack (c, 2, 1, &rec, keep, sizeof keep);
    assert_true (rec);
    assert_string_equal (keep, "ckpt-2-1,ckpt-1-3");
    free (why);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    latest = s_hget_json (c, 31, 0, CGQ_TF_CHECKPOINT);
    assert_int_equal (json_integer_value (json_object_get (latest, "attempt")), 2);
    json_decref (latest);
    assert_int_equal (s_job_bytes (c, 31), 350);

    // A new coordinator has them back; its retry restores them.
    ct_coord_destroy (&c);
    coord_t *r = ct_coord_new (cgq_test_redis_url (s_redis));
    assert_int_equal (recovery_jobs (r), 1);
    trial_t *rt = jobs_trial (r, 31, 0);
    assert_non_null (rt);
    assert_int_equal (json_array_size (rt->ckpts), 2);
    ct_coord_destroy (&r);
}

// An attempt whose end checkpoint.resume does not name: its records are let
// go, and its retry starts afresh.
static void
test_end_without_resume (void **state)
{
    (void) state;
    coord_t *c = ct_coord_new (cgq_test_redis_url (s_redis));
    ct_job (c, 32,
            "space: {x: {grid: [1]}}\n"
            "search: {algorithm: grid}\n"
            "trial: {command: ./run, retries: 2}\n"
            "checkpoint: {resume: [lost]}\n");
    ct_node (c, "w1", 1, 0, 0);
    assert_int_equal (dispatch_run (c), 1);
    s_ckpt (c, "w1", 32, 0, 1, 1, 3, 70);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    assert_int_equal (s_job_bytes (c, 32), 70);
    ct_result (c, "w1", 32, 0, 1, CGQ__TASK_STATUS__TASK_TIMEOUT, NULL, "timed out after 1s");
    assert_int_equal (dispatch_run (c), 1);
    char resume[256], store[64];
    uint32_t k;
    s_resume (c, 0, 2, resume, sizeof resume, store, sizeof store, &k);
    assert_string_equal (resume, "");
    assert_string_equal (store, ""); // the worker's store
    assert_int_equal (k, 1);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    char key[96];
    char *v = s_hget (c, cgq_key_trial (key, sizeof key, 32, 0), CGQ_TF_CHECKPOINTS);
    assert_null (v);
    v = s_hget (c, key, CGQ_TF_CHECKPOINT); // the latest stays, for people
    assert_non_null (v);
    free (v);
    assert_int_equal (s_job_bytes (c, 32), 0);

    // A lost node: resumed.
    s_ckpt (c, "w1", 32, 0, 2, 1, 4, 80);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    session_liveness (c, cgq_now_ms () + 60000); // w1 silent: dead
    ct_node (c, "w2", 1, 0, 0);
    assert_int_equal (dispatch_run (c), 1);
    s_resume (c, 0, 3, resume, sizeof resume, store, sizeof store, &k);
    assert_string_equal (resume, "ckpt-2-1@{\"epoch\":4}");
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    ct_coord_destroy (&c);
}

// checkpoint_decide alone: a trial not in memory, not running.
static void
test_decide (void **state)
{
    (void) state;
    Cgq__TaskRef ref = CGQ__TASK_REF__INIT;
    ref.job = 1;
    ref.attempt = 1;
    Cgq__Checkpoint m = CGQ__CHECKPOINT__INIT;
    m.task = &ref;
    m.n = 1;
    m.sha256 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    m.path = "/s/ckpt-1-1";
    m.step_json = "[1]";
    checkpoint_decision_t d;
    checkpoint_decide (NULL, 1, &m, "w", 1.0, &d);
    assert_false (d.record);
    assert_non_null (strstr (d.why, "not a JSON object"));
    m.step_json = "";
    checkpoint_decide (NULL, 1, &m, "w", 1.0, &d);
    assert_false (d.record);
    assert_non_null (strstr (d.why, "is not running here"));
    m.path = "relative";
    checkpoint_decide (NULL, 1, &m, "w", 1.0, &d);
    assert_non_null (strstr (d.why, "malformed"));
    m.path = "ftp://s/ckpt-1-1";
    checkpoint_decide (NULL, 1, &m, "w", 1.0, &d);
    assert_non_null (strstr (d.why, "malformed"));
    // A checkpoint in an HTTP(S) store: past the form check (not running here).
    m.path = "https://store:8443/p/job-1/trial-0/ckpt-1-1";
    checkpoint_decide (NULL, 1, &m, "w", 1.0, &d);
    assert_null (strstr (d.why, "malformed"));
    assert_non_null (strstr (d.why, "is not running here"));
    m.path = "/s/ckpt-1-1";
    m.sha256 = "0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef";
    checkpoint_decide (NULL, 1, &m, "w", 1.0, &d);
    assert_non_null (strstr (d.why, "malformed"));
    checkpoint_decision_fini (&d);
    assert_null (checkpoint_list_parse ("[]"));
    assert_null (checkpoint_list_parse ("{}"));
    json_t *l = checkpoint_list_parse ("[{\"attempt\": 2, \"n\": 5, \"size\": 9, \"stage\": 1}]");
    assert_int_equal (checkpoint_bytes (l), 9);
    Cgq__Checkpoint **v;
    assert_int_equal (checkpoint_resume (l, 0, &v), 0); // another stage's
    free (v);
    assert_int_equal (checkpoint_resume (l, 1, &v), 1);
    assert_int_equal (v[0]->n, 5);
    assert_string_equal (v[0]->step_json, "{}");
    checkpoint_resume_free (v, 1);
    char **names;
    assert_int_equal (checkpoint_names (l, &names), 1);
    assert_string_equal (names[0], "ckpt-2-5");
    free (names[0]);
    free (names);
    json_decref (l);
}

// s_stop_queued tells whether a Stop of (trial, attempt) waits in the outbox.
static bool
s_stop_queued (const coord_t *c, uint64_t trial, uint32_t attempt)
{
    bool found = false;
    for (const out_t *o = c->out_head; o; o = o->next) {
        if (o->acks)
            continue;
        cgq_env_t *env = cgq_wire_decode (o->data, o->len, 0);
        if (env && env->body_case == CGQ__ENVELOPE__BODY_STOP && env->stop->task->trial == trial
            && env->stop->task->attempt == attempt)
            found = true;
        cgq_wire_free (env);
    }
    return found;
}

// cgq pause / cgq resume (control_pause): a paused job starts nothing; a
// running trial pauses at its next checkpoint, a lost one while paused
// waits paused too and a late success of it counts; the pause survives a
// restart; a resume restores the checkpoint and uses no retry.
static void
test_pause_resume (void **state)
{
    (void) state;
    coord_t *c = ct_coord_new (cgq_test_redis_url (s_redis));
    ct_job (c, 41,
            "space: {x: {grid: [1, 2, 3]}}\n"
            "search: {algorithm: grid}\n"
            "objective: {metric: score, mode: max}\n"
            "trial: {command: ./run, retries: 1}\n"
            "checkpoint: {store: /ck}\n");
    ct_node (c, "w1", 2, 0, 0);
    assert_int_equal (dispatch_run (c), 2);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    trial_t *t0 = jobs_trial (c, 41, 0), *t1 = jobs_trial (c, 41, 1);
    s_ckpt (c, "w1", 41, 0, 1, 1, 2, 10);
    char msg[512];
    assert_int_equal (control_pause (c, 41, false, false, msg, sizeof msg), 0);
    assert_non_null (strstr (msg, "2 running trial(s) stop at their next checkpoint"));
    assert_int_equal (t0->state, CGQ_TRIAL_RUNNING); // until its next checkpoint
    ct_node (c, "w2", 2, 0, 0);
    assert_int_equal (dispatch_run (c), 0); // room, but paused
    // Its next checkpoint: paused there, its node asked to stop.
    s_ckpt (c, "w1", 41, 0, 1, 2, 4, 20);
    assert_int_equal (t0->state, CGQ_TRIAL_PAUSED);
    assert_false (t0->queued);
    assert_true (s_stop_queued (c, 0, 1));
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    char key[96];
    char *line = s_hget (c, cgq_key_trial (key, sizeof key, 41, 0), CGQ_TF_PAUSED);
    assert_non_null (line);
    assert_non_null (strstr (line, "paused at checkpoint ckpt-1-2 (step {\"epoch\":4})"));
    free (line);
    // The stop comes back as stopped: paused it stays, its CPU free.
    ct_result (c, "w1", 41, 0, 1, CGQ__TASK_STATUS__TASK_STOPPED, NULL, "stopped: job paused");
    assert_int_equal (t0->state, CGQ_TRIAL_PAUSED);
    assert_null (t0->node);
    // Trial 1's node is lost before its next checkpoint: it waits paused.
    node_t *w1 = nodes_find (c, "w1");
    assert_true (w1->free_cpus == 1);
    nodes_release (c, t1);
    jobs_lost (c, t1, "test: node lost");
    assert_int_equal (t1->state, CGQ_TRIAL_PAUSED);
    assert_false (t1->queued);
    // Pause again: nothing changes; --now then: nothing left running.
    assert_int_equal (control_pause (c, 41, false, false, msg, sizeof msg), 0);
    assert_non_null (strstr (msg, "already paused"));
    assert_int_equal (control_pause (c, 41, false, true, msg, sizeof msg), 0);
    assert_non_null (strstr (msg, "0 running trial(s) stopped now"));
    // Its node comes back still running attempt 1 (a heartbeat): told to stop
    // it; the trial stays paused, not re-adopted.
    Cgq__TaskRef ref = CGQ__TASK_REF__INIT, *refs[1] = {&ref};
    ref.job = 41;
    ref.trial = 1;
    ref.attempt = 1;
    Cgq__Heartbeat hb = CGQ__HEARTBEAT__INIT;
    hb.n_running = 1;
    hb.running = refs;
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &hb;
    session_message (c, "w1", 2, &env);
    assert_true (s_stop_queued (c, 1, 1));
    assert_int_equal (t1->state, CGQ_TRIAL_PAUSED);
    assert_null (t1->node);
    // And then says attempt 1 succeeded after all: it counts.
    ct_result (c, "w1", 41, 1, 1, CGQ__TASK_STATUS__TASK_SUCCEEDED, "{\"score\": 3}", NULL);
    assert_null (jobs_trial (c, 41, 1));
    assert_int_equal (dispatch_run (c), 0);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    assert_int_equal (control_pause (c, 99, false, false, msg, sizeof msg), 2);

    // A restart: still paused (now), trial 0 paused and unqueued.
    ct_coord_destroy (&c);
    c = ct_coord_new (cgq_test_redis_url (s_redis));
    assert_true (recovery_jobs (c) >= 1); // the other tests' jobs too
    job_t *j = jobs_find (c, 41);
    assert_int_equal (j->paused, JOBS_PAUSE_NOW);
    t0 = jobs_trial (c, 41, 0);
    assert_int_equal (t0->state, CGQ_TRIAL_PAUSED);
    assert_false (t0->queued);
    assert_int_equal (j->counts[CGQ_TRIAL_PAUSED], 1);
    ct_node (c, "w1", 2, 0, 0);
    assert_int_equal (dispatch_run (c), 0);

    // Resume: trial 0 first, from its checkpoint, the paused attempt below
    // the stage's base; then the new trial 2.
    assert_int_equal (control_pause (c, 41, true, false, msg, sizeof msg), 0);
    assert_non_null (strstr (msg, "1 paused trial(s) queued again"));
    assert_int_equal (control_pause (c, 41, true, false, msg, sizeof msg), 2);
    assert_non_null (strstr (msg, "not paused"));
    assert_int_equal (t0->stage_base, 1);
    assert_int_equal (dispatch_run (c), 2);
    char resume[512], store[128];
    uint32_t k = 0;
    s_resume (c, 0, 2, resume, sizeof resume, store, sizeof store, &k);
    assert_string_equal (resume, "ckpt-1-2@{\"epoch\":4}");
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    line = s_hget (c, cgq_key_trial (key, sizeof key, 41, 0), CGQ_TF_PAUSED);
    assert_null (line);
    // Its one retry is still there: attempt 2 fails and is retried.
    ct_result (c, t0->node->id, 41, 0, 2, CGQ__TASK_STATUS__TASK_FAILED, NULL, "exit status 1");
    assert_int_equal (t0->state, CGQ_TRIAL_PENDING);
    assert_int_equal (dispatch_run (c), 1);
    ct_result (c, t0->node->id, 41, 0, 3, CGQ__TASK_STATUS__TASK_FAILED, NULL, "exit status 1");
    assert_null (jobs_trial (c, 41, 0)); // retries spent: failed
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    ct_coord_destroy (&c);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_records_and_resume),
        cmocka_unit_test (test_end_without_resume),
        cmocka_unit_test (test_decide),
        cmocka_unit_test (test_pause_resume),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
