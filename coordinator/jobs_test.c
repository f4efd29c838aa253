// jobs_test: the job and trial state machine against a real redis-server:
// transitions as Redis records them, counts that always add up, recovery
// of a new coordinator from that snapshot, and a trial whose command cannot
// be rendered failing with the reason where the CLI shows it.
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "auth.h"
#include "coord_testing.h"
#include "dispatch.h"
#include "jobs.h"
#include "log.h"
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
    s_redis = cgq_test_redis_start (NULL);
    return s_redis ? 0 : -1;
}

static int
s_teardown (void **state)
{
    cgq_test_redis_stop (&s_redis);
    return 0;
}

static redisReply *
s_cmd (coord_t *c, const char *fmt, const char *key, const char *arg)
{
    redisReply *r = cgq_store_command (c->store, fmt, key, arg);
    if (!r)
        fail_msg ("%s: %s", fmt, cgq_store_errstr (c->store));
    return r;
}

// s_hget returns field of hash key (caller frees), NULL when absent.
static char *
s_hget (coord_t *c, const char *key, const char *field)
{
    redisReply *r = s_cmd (c, "HGET %s %s", key, field);
    char *v = r->type == REDIS_REPLY_STRING ? cgq_xstrdup (r->str) : NULL;
    freeReplyObject (r);
    return v;
}

static void
s_assert_field (coord_t *c, const char *key, const char *field, const char *want)
{
    char *v = s_hget (c, key, field);
    if (!v || strcmp (v, want) != 0)
        fail_msg ("%s %s = %s, want %s", key, field, v ? v : "(absent)", want);
    free (v);
}

// s_assert_counts checks that the job hash's counts match memory (trials not
// created yet counted as pending, or cancelled after a cancel) and add up to
// the job's total.
static void
s_assert_counts (coord_t *c, job_t *j)
{
    char key[64];
    cgq_key_job (key, sizeof key, j->id);
    uint64_t sum = 0;
    for (int s = 0; s < CGQ_TRIAL_NSTATES; s++) {
        char *v = s_hget (c, key, cgq_tstate_names[s]);
        assert_non_null (v);
        uint64_t want = j->counts[s];
        if (s == CGQ_TRIAL_PENDING)
            want += jobs_unsuggested (j);
        if (s == CGQ_TRIAL_CANCELLED)
            want += j->dropped;
        assert_int_equal (strtoull (v, NULL, 10), want);
        sum += want;
        free (v);
    }
    char *total = s_hget (c, key, CGQ_JF_TOTAL);
    assert_non_null (total);
    assert_int_equal (strtoull (total, NULL, 10), sum);
    free (total);
}

static const char *s_spec = "name: t\n"
                            "space: {x: {choice: [1, 2, 3, 4, 5, 6]}}\n"
                            "search: {algorithm: grid}\n"
                            "objective: {metric: score, mode: max}\n"
                            "trial: {kind: noop, retries: 1}\n";

static void
test_transitions_and_recovery (void **state)
{
    (void) state;
    coord_t *c = ct_coord_new (cgq_test_redis_url (s_redis));
    job_t *j = ct_job (c, 7, s_spec);
    ct_node (c, "w1", 3, 0, 0);
    assert_int_equal (dispatch_run (c), 3);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    s_assert_counts (c, j);
    char key[96];
    s_assert_field (c, cgq_key_trial (key, sizeof key, 7, 0), CGQ_TF_STATE, "running");
    s_assert_field (c, key, CGQ_TF_NODE, "w1");
    s_assert_field (c, key, CGQ_TF_ATTEMPT, "1");

    // 0 succeeds, 1 fails and goes back for its retry, 2 succeeds without
    // its objective metric (not retried), 1's second attempt succeeds.
    ct_result (c, "w1", 7, 0, 1, CGQ__TASK_STATUS__TASK_SUCCEEDED, "{\"score\": 0.5}", NULL);
    ct_result (c, "w1", 7, 1, 1, CGQ__TASK_STATUS__TASK_FAILED, NULL, "exit status 3");
    ct_result (c, "w1", 7, 2, 1, CGQ__TASK_STATUS__TASK_SUCCEEDED, "{\"other\": 1}", NULL);
    // A duplicate of 0's result (a lost Ack) changes nothing.
    ct_result (c, "w1", 7, 0, 1, CGQ__TASK_STATUS__TASK_SUCCEEDED, "{\"score\": 99}", NULL);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    s_assert_field (c, cgq_key_trial (key, sizeof key, 7, 0), CGQ_TF_STATE, "succeeded");
    s_assert_field (c, key, CGQ_TF_VALUE, "0.5");
    s_assert_field (c, cgq_key_trial (key, sizeof key, 7, 1), CGQ_TF_STATE, "pending");
    s_assert_field (c, key, CGQ_TF_ERROR, "exit status 3");
    s_assert_field (c, cgq_key_trial (key, sizeof key, 7, 2), CGQ_TF_STATE, "failed");
    char *err = s_hget (c, key, CGQ_TF_ERROR);
    assert_non_null (strstr (err, "result has no numeric metric 'score' (metrics: other)"));
    free (err);
    s_assert_field (c, cgq_key_job (key, sizeof key, 7), CGQ_JF_BEST_TRIAL, "0");
    s_assert_counts (c, j);

    // Start the retry and two new trials, then "crash": a new coordinator
    // recovers from Redis alone.
    assert_int_equal (dispatch_run (c), 3);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    uint64_t counts[CGQ_TRIAL_NSTATES];
    memcpy (counts, j->counts, sizeof counts);
    uint64_t suggested = cgq_searcher_suggested (j->searcher);
    ct_coord_destroy (&c);

    coord_t *r = ct_coord_new (cgq_test_redis_url (s_redis));
    assert_int_equal (recovery_jobs (r), 1);
    job_t *rj = jobs_find (r, 7);
    assert_non_null (rj);
    assert_memory_equal (rj->counts, counts, sizeof counts);
    assert_int_equal (cgq_searcher_suggested (rj->searcher), suggested);
    assert_int_equal (zhashx_size (rj->trials), 3);
    assert_int_equal (rj->best_trial, 0);
    uint64_t id = 1;
    trial_t *t1 = zhashx_lookup (rj->trials, &id);
    assert_non_null (t1);
    assert_int_equal (t1->state, CGQ_TRIAL_RUNNING);
    assert_int_equal (t1->attempt, 2);
    assert_string_equal (t1->expect_node, "w1");

    // The node comes back still running two of the three: those are adopted
    // (not re-run), the third is lost and queued again.
    Cgq__TaskRef a = CGQ__TASK_REF__INIT, b = CGQ__TASK_REF__INIT;
    a.job = b.job = 7;
    a.trial = 1;
    a.attempt = 2;
    b.trial = 3;
    b.attempt = 1;
    Cgq__TaskRef *running[2] = {&a, &b};
    Cgq__Resources res = CGQ__RESOURCES__INIT;
    res.cpus = 3;
    Cgq__Hello h = CGQ__HELLO__INIT;
    h.resources = &res;
    h.n_running = 2;
    h.running = running;
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_HELLO;
    env.hello = &h;
    session_message (r, "w1", 2, &env);
    node_t *w1 = nodes_find (r, "w1");
    assert_int_equal (w1->ntasks, 2);
    assert_true (w1->free_cpus == 1);
    session_liveness (r, cgq_now_ms () + 60000); // past the adoption deadline
    id = 4;
    trial_t *t4 = zhashx_lookup (rj->trials, &id);
    assert_non_null (t4);
    assert_int_equal (t4->state, CGQ_TRIAL_PENDING); // lost, not adopted
    assert_true (t4->queued);
    // (w1 itself went silent in that jump and was declared dead, so its two
    // trials are back in the queue too; counts still add up.)
    assert_int_equal (coord_turn_end (r, cgq_now_ms ()), 0);
    s_assert_counts (r, rj);
    ct_coord_destroy (&r);
}

static void
test_cancel_counts_add_up (void **state)
{
    (void) state;
    coord_t *c = ct_coord_new (cgq_test_redis_url (s_redis));
    job_t *j = ct_job (c, 8,
                       "space: {x: {uniform: [0, 1]}}\n"
                       "search: {samples: 1000000}\n"
                       "trial: {kind: noop}\n");
    ct_node (c, "w", 4, 0, 0);
    assert_int_equal (dispatch_run (c), 4);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    s_assert_counts (c, j);
    char msg[256];
    assert_int_equal (jobs_cancel (c, 8, msg, sizeof msg), JOBS_CANCEL_DONE);
    assert_string_equal (msg,
                         "cancelled job 8: 4 running trial(s) stopped, 999996 pending dropped");
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    s_assert_counts (c, j);
    char key[64];
    s_assert_field (c, cgq_key_job (key, sizeof key, 8), "cancelled", "1000000");
    assert_int_equal (jobs_cancel (c, 8, msg, sizeof msg), JOBS_CANCEL_OVER);
    assert_int_equal (jobs_cancel (c, 99, msg, sizeof msg), JOBS_CANCEL_UNKNOWN);
    ct_coord_destroy (&c);
}

// s_run runs the cgq CLI and returns its stdout (caller frees).
static char *
s_run (const char *args)
{
    const char *bin = getenv ("CGQ_BIN_DIR");
    char cmd[1024];
    snprintf (cmd, sizeof cmd, "%s/cgq --redis %s %s 2>&1", bin ? bin : ".",
              cgq_test_redis_url (s_redis), args);
    FILE *p = popen (cmd, "r");
    assert_non_null (p);
    cgq_buf_t b;
    cgq_buf_init (&b);
    cgq_buf_read (&b, p);
    pclose (p);
    return cgq_buf_take (&b);
}

static void
test_render_failure_fails_the_trial (void **state)
{
    (void) state;
    coord_t *c = ct_coord_new (cgq_test_redis_url (s_redis));
    job_t *j = ct_job (c, 9,
                       "space: {x: {choice: [1, 2]}}\n"
                       "search: {algorithm: grid}\n"
                       "trial: {command: 'echo {x}', env: {X: '{x}'}}\n");
    // The parser checks templates, so break the job after it: a command
    // that names a param the space lacks, as a spec edited in Redis would.
    free (j->spec->trial.command);
    j->spec->trial.command = cgq_xstrdup ("echo {nope}");
    ct_node (c, "w", 2, 0, 0);
    dispatch_run (c);
    assert_int_equal (ct_assigns (c, NULL, 0), 0); // nothing ran with an empty command
    assert_int_equal (j->counts[CGQ_TRIAL_FAILED], 2);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    char key[96];
    char *err = s_hget (c, cgq_key_trial (key, sizeof key, 9, 0), CGQ_TF_ERROR);
    assert_non_null (err);
    assert_non_null (strstr (err, "cannot render trial.command"));
    assert_non_null (strstr (err, "nope"));
    free (err);
    s_assert_field (c, cgq_key_job (key, sizeof key, 9), CGQ_JF_STATE, "finished");
    ct_coord_destroy (&c);

    char *out = s_run ("results 9 --format json");
    if (!strstr (out, "cannot render trial.command"))
        fail_msg ("cgq results does not show the render error:\n%s", out);
    free (out);
    out = s_run ("logs 9 1");
    if (!strstr (out, "cannot render trial.command"))
        fail_msg ("cgq logs does not show the render error:\n%s", out);
    free (out);
}

// s_drive runs job id of c to the end (or to `stop` results when stop > 0):
// dispatch, then every Assign gets a result scored from its params, in
// order, one turn at a time. Returns the number of results given.
static int
s_drive (coord_t *c, uint64_t id, int stop)
{
    int given = 0;
    for (int turn = 0; turn < 1000; turn++) {
        c->sched_dirty = true;
        dispatch_run (c);
        Cgq__TaskRef refs[64];
        size_t n = ct_assigns (c, refs, 64);
        outbox_free (c);
        if (!n)
            break;
        for (size_t i = 0; i < n && i < 64; i++) {
            trial_t *t = jobs_trial (c, refs[i].job, refs[i].trial);
            assert_non_null (t);
            double x = json_number_value (json_object_get (t->params, "x"));
            double y = json_number_value (json_object_get (t->params, "y"));
            char m[128];
            snprintf (m, sizeof m, "{\"score\": %.17g}", y - (x - 0.3) * (x - 0.3));
            ct_result (c, "w", refs[i].job, refs[i].trial, refs[i].attempt,
                       CGQ__TASK_STATUS__TASK_SUCCEEDED, m, NULL);
            given += refs[i].job == id; // other jobs of earlier tests may share the node
        }
        assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
        if (stop && given >= stop)
            break;
    }
    return given;
}

// s_params returns trial t's params as Redis holds them (caller frees).
static char *
s_params (coord_t *c, uint64_t job, uint64_t t)
{
    char key[96];
    return s_hget (c, cgq_key_trial (key, sizeof key, job, t), CGQ_TF_PARAMS);
}

// A coordinator killed mid-search and restarted continues the same search:
// an evolution job interrupted after 17 results suggests exactly what an
// uninterrupted run with the same seed does, ends with the planned number
// of trials and repeats none.
static void
test_learning_search_survives_restart (void **state)
{
    (void) state;
    const char *spec = "space: {x: {uniform: [0, 1]}, y: {choice: [1, 2, 3]}}\n"
                       "search: {algorithm: evolution, samples: 40, population: 8, initial: 8, "
                       "batch: 4, tournament: 3, seed: 5, concurrency: 4}\n"
                       "objective: {metric: score, mode: max}\n"
                       "trial: {kind: noop}\n";
    coord_t *c = ct_coord_new (cgq_test_redis_url (s_redis));
    ct_job (c, 21, spec);
    ct_node (c, "w", 4, 0, 0);
    assert_int_equal (s_drive (c, 21, 0), 40);
    ct_coord_destroy (&c);

    c = ct_coord_new (cgq_test_redis_url (s_redis));
    ct_job (c, 22, spec);
    ct_node (c, "w", 4, 0, 0);
    int first = s_drive (c, 22, 17);
    assert_true (first >= 17 && first < 40);
    ct_coord_destroy (&c); // "kill -9" between turns: Redis holds everything

    c = ct_coord_new (cgq_test_redis_url (s_redis));
    assert_true (recovery_jobs (c) >= 1); // job 7 of an earlier test is still running too
    assert_non_null (jobs_find (c, 22));
    assert_null (jobs_find (c, 21)); // finished
    ct_node (c, "w", 64, 0, 0); // room for job 7 too: job 22 still runs 4 at a time
    assert_int_equal (first + s_drive (c, 22, 0), 40);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    char key[64];
    s_assert_field (c, cgq_key_job (key, sizeof key, 22), CGQ_JF_STATE, "finished");
    s_assert_field (c, key, "succeeded", "40");
    for (uint64_t t = 0; t < 40; t++) {
        char *a = s_params (c, 21, t), *b = s_params (c, 22, t);
        assert_non_null (a);
        assert_non_null (b);
        if (strcmp (a, b) != 0)
            fail_msg ("trial %" PRIu64 ": %s uninterrupted, %s after the restart", t, a, b);
        for (uint64_t u = 0; u < t; u++) {
            char *p = s_params (c, 22, u);
            assert_string_not_equal (p, b); // no point suggested twice
            free (p);
        }
        free (a);
        free (b);
    }
    ct_coord_destroy (&c);
}

// objective: {expr: ...}: the value is the expression; a result without a
// name it uses fails with that name.
static void
test_objective_expression (void **state)
{
    (void) state;
    coord_t *c = ct_coord_new (cgq_test_redis_url (s_redis));
    ct_job (c, 23,
                       "space: {x: {choice: [1, 2]}}\n"
                       "search: {algorithm: grid}\n"
                       "objective: {expr: \"(acc*100)/latency_gpu\", mode: max}\n"
                       "trial: {kind: noop}\n");
    ct_node (c, "w", 2, 0, 0);
    assert_int_equal (dispatch_run (c), 2);
    ct_result (c, "w", 23, 0, 1, CGQ__TASK_STATUS__TASK_SUCCEEDED,
               "{\"acc\": 0.9, \"latency_gpu\": 4.5}", NULL);
    ct_result (c, "w", 23, 1, 1, CGQ__TASK_STATUS__TASK_SUCCEEDED, "{\"acc\": 0.8}", NULL);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    char key[96];
    s_assert_field (c, cgq_key_trial (key, sizeof key, 23, 0), CGQ_TF_VALUE, "20");
    s_assert_field (c, cgq_key_trial (key, sizeof key, 23, 1), CGQ_TF_STATE, "failed");
    char *err = s_hget (c, key, CGQ_TF_ERROR);
    assert_non_null (err);
    if (!strstr (err, "latency_gpu"))
        fail_msg ("the error names the missing metric: %s", err);
    free (err);
    s_assert_field (c, cgq_key_job (key, sizeof key, 23), CGQ_JF_BEST_TRIAL, "0");
    ct_coord_destroy (&c);
}

// A multi-objective job keeps its Pareto front in cgq:job:{J}:pareto; a
// recovered coordinator reads it back, so a later success that dominates the
// old members removes them.
static void
test_pareto_front_survives_restart (void **state)
{
    (void) state;
    const char *spec = "space: {x: {choice: [1, 2, 3, 4]}}\n"
                       "search: {algorithm: grid}\n"
                       "objectives: [{metric: a, mode: min}, {metric: b, mode: max}]\n"
                       "trial: {kind: noop}\n";
    coord_t *c = ct_coord_new (cgq_test_redis_url (s_redis));
    ct_job (c, 24, spec);
    ct_node (c, "w", 4, 0, 0);
    assert_int_equal (dispatch_run (c), 4);
    ct_result (c, "w", 24, 0, 1, CGQ__TASK_STATUS__TASK_SUCCEEDED, "{\"a\": 1, \"b\": 2}", NULL);
    ct_result (c, "w", 24, 1, 1, CGQ__TASK_STATUS__TASK_SUCCEEDED, "{\"a\": 2, \"b\": 5}", NULL);
    // Worse than trial 1 in both: never on the front.
    ct_result (c, "w", 24, 2, 1, CGQ__TASK_STATUS__TASK_SUCCEEDED, "{\"a\": 3, \"b\": 4}", NULL);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    char key[64];
    cgq_key_pareto (key, sizeof key, 24);
    redisReply *r = s_cmd (c, "HKEYS %s%s", key, "");
    assert_int_equal (r->elements, 2);
    freeReplyObject (r);
    s_assert_field (c, key, "1", "{\"a\":2.0,\"b\":5.0}");
    ct_coord_destroy (&c);

    c = ct_coord_new (cgq_test_redis_url (s_redis));
    assert_true (recovery_jobs (c) >= 1);
    job_t *j = jobs_find (c, 24);
    assert_non_null (j);
    assert_int_equal (j->nfront, 2);
    ct_node (c, "w", 4, 0, 0);
    Cgq__TaskRef run = CGQ__TASK_REF__INIT;
    run.job = 24;
    run.trial = 3;
    run.attempt = 1;
    Cgq__TaskRef *running[1] = {&run};
    Cgq__Resources res = CGQ__RESOURCES__INIT;
    res.cpus = 4;
    Cgq__Hello h = CGQ__HELLO__INIT;
    h.resources = &res;
    h.n_running = 1;
    h.running = running;
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_HELLO;
    env.hello = &h;
    session_message (c, "w", 1, &env); // adopts trial 3
    ct_result (c, "w", 24, 3, 1, CGQ__TASK_STATUS__TASK_SUCCEEDED, "{\"a\": 0.5, \"b\": 6}", NULL);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    r = s_cmd (c, "HKEYS %s%s", key, "");
    assert_int_equal (r->elements, 1);
    assert_string_equal (r->element[0]->str, "3");
    freeReplyObject (r);
    ct_coord_destroy (&c);
}

// s_progress sends one report of task (job, trial, attempt) as a node does.
static void
s_progress (coord_t *c, const char *node, uint64_t job, uint64_t trial, const char *report)
{
    Cgq__TaskRef ref = CGQ__TASK_REF__INIT;
    ref.job = job;
    ref.trial = trial;
    ref.attempt = 1;
    Cgq__Progress p = CGQ__PROGRESS__INIT;
    p.task = &ref;
    p.report_json = (char *) report;
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_PROGRESS;
    env.progress = &p;
    session_message (c, node, strlen (node), &env);
}

// An early-stopped trial is stopped at once with its last report, holds its
// node until the node reports the task ended, and the counts add up.
static void
test_early_stop_transitions (void **state)
{
    (void) state;
    coord_t *c = ct_coord_new (cgq_test_redis_url (s_redis));
    job_t *j = ct_job (c, 25,
                       "space: {x: {choice: [1, 2]}}\n"
                       "search: {algorithm: grid}\n"
                       "objective: {metric: loss, mode: min}\n"
                       "early_stop: {algorithm: asha, grace: 1, reduction: 2, max: 8}\n"
                       "trial: {kind: noop}\n");
    node_t *w = ct_node (c, "w", 2, 0, 0);
    assert_int_equal (dispatch_run (c), 2);
    s_progress (c, "w", 25, 0, "{\"epoch\": 1, \"loss\": 0.5}");
    size_t before = outbox_len (c);
    s_progress (c, "w", 25, 1, "{\"epoch\": 1, \"loss\": 0.9}");
    assert_int_equal (outbox_len (c), before + 1); // its Stop
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    char key[96];
    cgq_key_trial (key, sizeof key, 25, 1);
    s_assert_field (c, key, CGQ_TF_STATE, "stopped");
    s_assert_field (c, key, CGQ_TF_METRICS, "{\"epoch\": 1, \"loss\": 0.9}");
    s_assert_field (c, key, CGQ_TF_VALUE, "0.9");
    s_assert_field (c, cgq_key_trial (key, sizeof key, 25, 0), CGQ_TF_EARLY_STOP,
                    "{\"last\":1,\"n\":0,\"sum\":0,\"best\":null}");
    redisReply *r = s_cmd (c, "ZCARD %s%s", cgq_key_rung (key, sizeof key, 25, 1), "");
    assert_int_equal (r->integer, 2); // both recorded at rung 1
    freeReplyObject (r);
    s_assert_counts (c, j);
    // Still on the node until the node says the task ended.
    assert_int_equal (w->ntasks, 2);
    ct_result (c, "w", 25, 1, 1, CGQ__TASK_STATUS__TASK_STOPPED, NULL, "stopped: early stop");
    assert_int_equal (w->ntasks, 1);
    ct_result (c, "w", 25, 0, 1, CGQ__TASK_STATUS__TASK_SUCCEEDED, "{\"epoch\": 8, \"loss\": 0.1}",
               NULL);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    s_assert_field (c, cgq_key_job (key, sizeof key, 25), CGQ_JF_STATE, "finished");
    s_assert_field (c, key, "stopped", "1");
    s_assert_field (c, key, "succeeded", "1");
    s_assert_field (c, key, CGQ_JF_BEST_TRIAL, "0");
    ct_coord_destroy (&c);
}

// With CURVE, a key may speak only as the node ids its certificate names: a
// Result for node w's trial under another allowed key records nothing, is
// counted, and keeps w from new work until w's own key is heard again.
static void
test_keys_bound_to_node_ids (void **state)
{
    (void) state;
    char dir[] = "/tmp/cgq-jobs-keys-XXXXXX";
    assert_non_null (mkdtemp (dir));
    char *keys = cgq_xasprintf ("%s/keys", dir), *allow = cgq_xasprintf ("%s/allow", dir);
    char wpub[41], opub[41], cpub[41], err[512];
    assert_int_equal (cgq_auth_keygen (keys, "coord", NULL, cpub, err, sizeof err), 0);
    assert_int_equal (cgq_auth_keygen (keys, "w", NULL, wpub, err, sizeof err), 0);
    assert_int_equal (cgq_auth_keygen (keys, "other", NULL, opub, err, sizeof err), 0);
    assert_int_equal (mkdir (allow, 0700), 0);
    char *cmd = cgq_xasprintf ("cp %s/w.key %s/other.key %s/", keys, keys, allow);
    assert_int_equal (system (cmd), 0);
    free (cmd);
    char *csec = cgq_xasprintf ("%s/coord.key_secret", keys);

    coord_t *c = ct_coord_new (cgq_test_redis_url (s_redis));
    job_t *j = ct_job (c, 31, "space: {x: {choice: [1]}}\nsearch: {algorithm: grid}\n"
                              "objective: {metric: x, mode: max}\ntrial: {kind: noop}\n");
    node_t *w = ct_node (c, "w", 1, 0, 0); // said Hello before CURVE is turned on here
    assert_int_equal (dispatch_run (c), 1);
    void *zctx = zmq_ctx_new ();
    assert_int_equal (cgq_auth_server_new (zctx, csec, allow, &c->auth, err, sizeof err), 0);

    c->peer_key = opub;
    c->peer_addr = "127.0.0.9";
    ct_result (c, "w", 31, 0, 1, CGQ__TASK_STATUS__TASK_SUCCEEDED, "{\"x\": 666}", NULL);
    assert_int_equal (c->stat_refused_ids, 1);
    uint64_t id = 0;
    trial_t *t = zhashx_lookup (j->trials, &id);
    assert_non_null (t);
    assert_int_equal (t->state, CGQ_TRIAL_RUNNING);
    assert_true (w->suspect);
    req_t r = {.cpu = 0};
    assert_false (nodes_fits_free (w, &r));

    // w's own key, first proved by the coordinator (cached), clears it too
    c->peer_key = wpub;
    snprintf (w->key, sizeof w->key, "%s", wpub);
    ct_result (c, "w", 31, 0, 1, CGQ__TASK_STATUS__TASK_SUCCEEDED, "{\"x\": 1}", NULL);
    assert_int_equal (c->stat_refused_ids, 1);
    assert_false (w->suspect);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    char key[96];
    s_assert_field (c, cgq_key_trial (key, sizeof key, 31, 0), CGQ_TF_METRICS, "{\"x\": 1}");
    c->peer_key = c->peer_addr = NULL;

    cgq_auth_destroy (&c->auth);
    ct_coord_destroy (&c);
    zmq_ctx_term (zctx);
    cmd = cgq_xasprintf ("rm -rf '%s'", dir);
    assert_int_equal (system (cmd), 0);
    free (cmd);
    free (csec);
    free (keys);
    free (allow);
}

int
main (void)
{
    cgq_log_init ("jobs_test", CGQ_LOG_ERROR, false);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_transitions_and_recovery),
        cmocka_unit_test (test_cancel_counts_add_up),
        cmocka_unit_test (test_render_failure_fails_the_trial),
        cmocka_unit_test (test_learning_search_survives_restart),
        cmocka_unit_test (test_objective_expression),
        cmocka_unit_test (test_pareto_front_survives_restart),
        cmocka_unit_test (test_early_stop_transitions),
        cmocka_unit_test (test_keys_bound_to_node_ids),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
