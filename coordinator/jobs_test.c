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
    ct_hello (r, "w1", 3, &(ct_hello_t){.running = running, .nrunning = 2});
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

// s_llen is the length of list key (0 when absent).
static long long
s_llen (coord_t *c, const char *key)
{
    redisReply *r = s_cmd (c, "LLEN %s", key, NULL);
    long long n = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject (r);
    return n;
}

// s_lindex returns element i of list key (caller frees), NULL when absent.
static char *
s_lindex (coord_t *c, const char *key, long i)
{
    char idx[32];
    snprintf (idx, sizeof idx, "%ld", i);
    redisReply *r = s_cmd (c, "LINDEX %s %s", key, idx);
    char *v = r->type == REDIS_REPLY_STRING ? cgq_xstrdup (r->str) : NULL;
    freeReplyObject (r);
    return v;
}

// search: {algorithm: external}: a job's params come from Suggest requests.
// The job waits while none is queued; bad params queue nothing and say
// which param and what it allows; accepted ones go to
// cgq:job:{J}:suggestions in the turn's batch, and trial i runs element i.
// A coordinator "killed" between turns refills the queue from that list at
// index suggested: no suggestion is lost or used twice, and the job ends at
// search.samples.
static void
test_external_search (void **state)
{
    (void) state;
    const char *spec = "space: {x: {uniform: [0, 1]}, y: {choice: [1, 2, 3]}, k: K}\n"
                       "search: {algorithm: external, samples: 6}\n"
                       "objective: {metric: score, mode: max}\n"
                       "trial: {kind: noop}\n";
    char msg[1024], key[64];
    cgq_key_suggestions (key, sizeof key, 120);
    coord_t *c = ct_coord_new (cgq_test_redis_url (s_redis));
    ct_job (c, 120, spec);
    ct_node (c, "w", 2, 0, 0);
    assert_int_equal (s_drive (c, 120, 0), 0); // nothing to run: it waits

    const char *bad[] = {"{\"x\": 0.5, \"y\": 1}", "{\"x\": 0.5, \"y\": 4}"};
    assert_int_equal (ct_suggest (c, 120, bad, 2, msg, sizeof msg), 2);
    if (!strstr (msg, "suggestion 2 of 2: param y = 4") || !strstr (msg, "choice [1,2,3]") ||
        !strstr (msg, "nothing was queued"))
        fail_msg ("a bad suggestion names the param and what it allows: %s", msg);
    const char *unknown[] = {"{\"x\": 0.5, \"y\": 1, \"z\": 2}"};
    assert_int_equal (ct_suggest (c, 120, unknown, 1, msg, sizeof msg), 2);
    assert_non_null (strstr (msg, "'z' is not a param of the space (its params: x, y)"));
    const char *many[] = {"{\"x\": 0.1, \"y\": 1}", "{\"x\": 0.1, \"y\": 1}", "{\"x\": 0.1, \"y\": 1}",
                          "{\"x\": 0.1, \"y\": 1}", "{\"x\": 0.1, \"y\": 1}", "{\"x\": 0.1, \"y\": 1}",
                          "{\"x\": 0.1, \"y\": 1}"};
    assert_int_equal (ct_suggest (c, 120, many, 7, msg, sizeof msg), 2);
    assert_non_null (strstr (msg, "takes 6 more suggestion(s), not 7"));
    outbox_free (c);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    assert_int_equal (s_llen (c, key), 0);

    const char *first[] = {"{\"y\": 2, \"x\": 0.25}", "{\"x\": 0.5, \"y\": 3, \"k\": \"K\"}",
                           "{\"x\": 1, \"y\": 1}"};
    assert_int_equal (ct_suggest (c, 120, first, 3, msg, sizeof msg), 0);
    assert_string_equal (msg, "queued 3 (3 waiting)");
    assert_int_equal (s_llen (c, key), 0); // the reply waits for the batch that records them
    outbox_free (c);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    assert_int_equal (s_llen (c, key), 3);
    assert_int_equal (s_drive (c, 120, 2), 2); // trials 0 and 1 (2 CPUs); 2 still waits
    char *p = s_params (c, 120, 0);
    assert_string_equal (p, "{\"x\":0.25,\"y\":2,\"k\":\"K\"}"); // the space's order, constants in
    free (p);
    ct_coord_destroy (&c); // "kill -9" between turns

    c = ct_coord_new (cgq_test_redis_url (s_redis));
    assert_true (recovery_jobs (c) >= 1);
    job_t *j = jobs_find (c, 120);
    assert_non_null (j);
    assert_int_equal (cgq_searcher_suggested (j->searcher), 2);
    assert_int_equal (cgq_searcher_waiting (j->searcher), 1); // element 2, from Redis
    ct_node (c, "w", 64, 0, 0);
    const char *rest[] = {"{\"x\": 0.75, \"y\": 1}", "{\"x\": 0, \"y\": 2}", "{\"x\": 0.125, \"y\": 3}"};
    assert_int_equal (ct_suggest (c, 120, rest, 3, msg, sizeof msg), 0);
    assert_string_equal (msg, "queued 3 (4 waiting)");
    assert_int_equal (ct_suggest (c, 120, rest, 1, msg, sizeof msg), 2); // samples: 6 reached
    outbox_free (c);
    assert_int_equal (s_drive (c, 120, 0), 4);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    char jkey[64];
    s_assert_field (c, cgq_key_job (jkey, sizeof jkey, 120), CGQ_JF_STATE, "finished");
    s_assert_field (c, jkey, "succeeded", "6");
    assert_int_equal (s_llen (c, key), 6);
    for (long t = 0; t < 6; t++) {
        char *want = s_lindex (c, key, t), *got = s_params (c, 120, (uint64_t) t);
        assert_non_null (want);
        assert_non_null (got);
        if (strcmp (want, got) != 0)
            fail_msg ("trial %ld ran %s, suggestion %ld is %s", t, got, t, want);
        free (want);
        free (got);
    }
    assert_int_equal (ct_suggest (c, 120, rest, 1, msg, sizeof msg), 2);
    assert_non_null (strstr (msg, "job 120 is finished"));
    ct_job (c, 121, "space: {x: {uniform: [0, 1]}}\nsearch: {samples: 2}\ntrial: {kind: noop}\n");
    assert_int_equal (ct_suggest (c, 121, rest, 1, msg, sizeof msg), 2);
    assert_non_null (strstr (msg, "algorithm random, not external"));
    assert_int_equal (ct_suggest (c, 999, rest, 1, msg, sizeof msg), 2);
    assert_non_null (strstr (msg, "no job 999"));
    outbox_free (c);
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


// constraints: an infeasible success records feasible 0 and by how much it
// violates each constraint, keeps its value, and is never the best, on the
// leaderboard or on the Pareto front; a constraint over a metric the trial
// did not report makes it infeasible with a warning.
static void
test_constraints_infeasible (void **state)
{
    (void) state;
    coord_t *c = ct_coord_new (cgq_test_redis_url (s_redis));
    ct_job (c, 61,
            "space: {x: {choice: [1, 2, 3]}}\n"
            "search: {algorithm: grid}\n"
            "objective: {metric: acc, mode: max}\n"
            "constraints: [\"lat <= 20\", \"params < 5e6\"]\n"
            "trial: {kind: noop}\n");
    ct_node (c, "w", 3, 0, 0);
    assert_int_equal (dispatch_run (c), 3);
    ct_result (c, "w", 61, 0, 1, CGQ__TASK_STATUS__TASK_SUCCEEDED,
               "{\"acc\": 0.99, \"lat\": 23.5, \"params\": 1e6}", NULL);
    ct_result (c, "w", 61, 1, 1, CGQ__TASK_STATUS__TASK_SUCCEEDED,
               "{\"acc\": 0.8, \"lat\": 10, \"params\": 1e6}", NULL);
    ct_result (c, "w", 61, 2, 1, CGQ__TASK_STATUS__TASK_SUCCEEDED,
               "{\"acc\": 0.95, \"latency\": 10, \"params\": 1e6}", NULL);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    char key[96];
    cgq_key_trial (key, sizeof key, 61, 0);
    s_assert_field (c, key, CGQ_TF_STATE, "succeeded");
    s_assert_field (c, key, CGQ_TF_FEASIBLE, "0");
    s_assert_field (c, key, CGQ_TF_VIOLATION, "{\"lat <= 20\":3.5}");
    s_assert_field (c, key, CGQ_TF_VALUE, "0.99");
    cgq_key_trial (key, sizeof key, 61, 1);
    s_assert_field (c, key, CGQ_TF_FEASIBLE, "1");
    char *v = s_hget (c, key, CGQ_TF_VIOLATION);
    assert_null (v);
    cgq_key_trial (key, sizeof key, 61, 2); // reported latency, not lat
    s_assert_field (c, key, CGQ_TF_STATE, "succeeded");
    s_assert_field (c, key, CGQ_TF_FEASIBLE, "0");
    s_assert_field (c, key, CGQ_TF_VIOLATION, "{\"lat <= 20\":null}");
    char *w = s_hget (c, key, CGQ_TF_WARNING);
    assert_non_null (w);
    if (!strstr (w, "constraint \"lat <= 20\" cannot be computed"))
        fail_msg ("the warning names the constraint: %s", w);
    free (w);
    s_assert_field (c, cgq_key_job (key, sizeof key, 61), CGQ_JF_BEST_TRIAL, "1");
    s_assert_field (c, key, CGQ_JF_BEST_VALUE, "0.8");
    redisReply *r = s_cmd (c, "ZRANGE %s 0 -1%s", cgq_key_leaderboard (key, sizeof key, 61), "");
    assert_int_equal (r->elements, 1);
    assert_string_equal (r->element[0]->str, "1");
    freeReplyObject (r);

    // Several objectives: an infeasible trial that dominates every feasible
    // one stays off the front and removes none of them.
    ct_job (c, 62,
            "space: {x: {choice: [1, 2, 3]}}\n"
            "search: {algorithm: grid}\n"
            "objectives: [{metric: a, mode: min}, {metric: b, mode: max}]\n"
            "constraints: [\"b <= 10\"]\n"
            "trial: {kind: noop}\n");
    assert_int_equal (dispatch_run (c), 3);
    ct_result (c, "w", 62, 0, 1, CGQ__TASK_STATUS__TASK_SUCCEEDED, "{\"a\": 1, \"b\": 2}", NULL);
    ct_result (c, "w", 62, 1, 1, CGQ__TASK_STATUS__TASK_SUCCEEDED, "{\"a\": 0, \"b\": 50}", NULL);
    ct_result (c, "w", 62, 2, 1, CGQ__TASK_STATUS__TASK_SUCCEEDED, "{\"a\": 2, \"b\": 5}", NULL);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    s_assert_field (c, cgq_key_trial (key, sizeof key, 62, 1), CGQ_TF_VIOLATION, "{\"b <= 10\":40.0}");
    r = s_cmd (c, "HKEYS %s%s", cgq_key_pareto (key, sizeof key, 62), "");
    assert_int_equal (r->elements, 2);
    assert_true (strcmp (r->element[0]->str, "1") && strcmp (r->element[1]->str, "1"));
    freeReplyObject (r);
    ct_coord_destroy (&c);
}

// search.fail_fast counts failures across a coordinator restart (the counts
// come back from Redis): 2 before, 1 after, and a fail_fast of 3 stops the
// job, its running trial stopped, its pending ones dropped; a late failure
// after that changes nothing.
static void
test_fail_fast_survives_restart (void **state)
{
    (void) state;
    const char *spec = "space: {x: {grid: [1, 2, 3, 4, 5, 6, 7, 8]}}\n"
                       "search: {algorithm: grid, fail_fast: 3}\n"
                       "objective: {metric: m, mode: max}\n"
                       "trial: {command: x}\n";
    coord_t *c = ct_coord_new (cgq_test_redis_url (s_redis));
    ct_job (c, 27, spec);
    ct_node (c, "w", 2, 0, 0);
    assert_int_equal (dispatch_run (c), 2);
    ct_result (c, "w", 27, 0, 1, CGQ__TASK_STATUS__TASK_FAILED, NULL, "exit status 2");
    ct_result (c, "w", 27, 1, 1, CGQ__TASK_STATUS__TASK_FAILED, NULL, "exit status 2");
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    char key[64];
    s_assert_field (c, cgq_key_job (key, sizeof key, 27), CGQ_JF_STATE, "running");
    ct_coord_destroy (&c);

    c = ct_coord_new (cgq_test_redis_url (s_redis));
    assert_true (recovery_jobs (c) >= 1);
    job_t *j = jobs_find (c, 27);
    assert_non_null (j);
    assert_int_equal (j->counts[CGQ_TRIAL_FAILED], 2);
    ct_node (c, "w", 2, 0, 0);
    assert_int_equal (dispatch_run (c), 2); // trials 2 and 3
    ct_result (c, "w", 27, 2, 1, CGQ__TASK_STATUS__TASK_FAILED, NULL, "exit status 2\nTraceback");
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    s_assert_field (c, key, CGQ_JF_STATE, "failed");
    s_assert_field (c, key, CGQ_JF_ERROR,
                    "its first 3 trials failed and none succeeded (search.fail_fast: 3; 0 runs "
                    "them all); the last error: exit status 2");
    char tkey[96];
    s_assert_field (c, cgq_key_trial (tkey, sizeof tkey, 27, 3), CGQ_TF_STATE, "cancelled");
    assert_int_equal (dispatch_run (c), 0); // nothing more starts
    // trial 3's node reports it ended as asked; a late failure changes nothing
    ct_result (c, "w", 27, 3, 1, CGQ__TASK_STATUS__TASK_FAILED, NULL, "killed");
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    s_assert_field (c, key, CGQ_JF_STATE, "failed");
    s_assert_field (c, key, "failed", "3");
    s_assert_field (c, key, "cancelled", "5");
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
    ct_hello (c, "w", 4, &(ct_hello_t){.running = running, .nrunning = 1}); // adopts trial 3
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

// s_assert_assign checks one field of the queued Assign of (trial, attempt).
static void
s_assert_assign (coord_t *c, uint64_t trial, uint32_t attempt, const char *what, const char *want)
{
    char *v = ct_assign_get (c, trial, attempt, what);
    if (!v || strcmp (v, want) != 0)
        fail_msg ("Assign %" PRIu64 "#%u %s = %s, want %s", trial, attempt, what,
                  v ? v : "(no Assign)", want);
    free (v);
}

static const char *s_spec_stages =
    "name: st\n"
    "space:\n"
    "  x: {choice: [1, 2]}\n"
    "  b: {assignment: {items: [Conv, Pool], choices: [cpu, gpu], env: \"OP_{item}={choice}\"}}\n"
    "search: {algorithm: grid}\n"
    "objective: {expr: \"acc * 100 / latency\", mode: max}\n"
    "trial:\n"
    "  retries: 1\n"
    "  stages:\n"
    "    - {name: train, command: \"train {x}\", resources: {cpu: 1}}\n"
    "    - name: measure\n"
    "      on: {device: board}\n"
    "      benchmark: run\n"
    "      retries: 0\n"
    "      artifact: {url: \"http://h/m{train.acc}.tflite\",\n"
    "                 sha256: "
    "\"0000000000000000000000000000000000000000000000000000000000000000\"}\n";

// Multi-stage trials: a stage's success queues the next stage (to another
// kind of node) with the metrics so far in Redis; a coordinator that starts
// from that snapshot runs the next stage, never the finished one again; a
// failed stage is retried alone by its own retries; the last stage's result
// is the merge of every stage's metrics, which the objective reads.
static void
test_stages (void **state)
{
    (void) state;
    coord_t *c = ct_coord_new (cgq_test_redis_url (s_redis));
    job_t *j = ct_job (c, 11, s_spec_stages);
    assert_int_equal (j->nstages, 2);
    ct_node (c, "w1", 2, 0, 0);
    const char *devs[] = {"d1:device=board", NULL};
    ct_runner (c, "r1", devs);
    // 8 trials (2 x 4 assignments); w1 runs two first stages at once.
    assert_int_equal (dispatch_run (c), 2);
    Cgq__TaskRef refs[8];
    assert_int_equal (ct_assigns (c, refs, 8), 2);
    assert_int_equal (refs[0].stage, 0);
    s_assert_assign (c, 0, 1, "stage", "train");
    s_assert_assign (c, 0, 1, "kind", "command");
    s_assert_assign (c, 0, 1, "env:CGQ_STAGE", "train");
    s_assert_assign (c, 0, 1, "env:CGQ_STAGE_METRICS", "{}");
    // The assignment's env template: one variable per item (trial 0: id 0,
    // every item on the first choice; trial 1: x = 2, the same assignment).
    s_assert_assign (c, 0, 1, "env:OP_Conv", "cpu");
    s_assert_assign (c, 0, 1, "env:OP_Pool", "cpu");
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);

    ct_result_stage (c, "w1", 11, 0, 0, 1, CGQ__TASK_STATUS__TASK_SUCCEEDED,
                     "{\"acc\": 0.8, \"epoch\": 3}", NULL);
    ct_result_stage (c, "w1", 11, 1, 0, 1, CGQ__TASK_STATUS__TASK_FAILED, NULL, "exit status 3");
    // A duplicate of trial 0's first stage (a lost Ack) changes nothing.
    ct_result_stage (c, "w1", 11, 0, 0, 1, CGQ__TASK_STATUS__TASK_SUCCEEDED, "{\"acc\": 0.1}",
                     NULL);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    char key[96];
    cgq_key_trial (key, sizeof key, 11, 0);
    s_assert_field (c, key, CGQ_TF_STATE, "pending");
    s_assert_field (c, key, CGQ_TF_STAGE, "1");
    s_assert_field (c, key, CGQ_TF_STAGE_BASE, "1");
    s_assert_field (c, key, CGQ_TF_STAGES, "{\"train\":{\"acc\":0.8,\"epoch\":3}}");
    s_assert_field (c, key, CGQ_TF_METRICS, "{\"acc\":0.8,\"epoch\":3}");
    cgq_key_trial (key, sizeof key, 11, 1);
    s_assert_field (c, key, CGQ_TF_STATE, "pending");
    s_assert_field (c, key, CGQ_TF_ERROR, "stage train: exit status 3");
    s_assert_counts (c, j);

    // "Crash" between the stages: a new coordinator from Redis alone.
    ct_coord_destroy (&c);
    c = ct_coord_new (cgq_test_redis_url (s_redis));
    assert_int_equal (recovery_jobs (c), 1);
    j = jobs_find (c, 11);
    uint64_t id = 0;
    trial_t *t0 = zhashx_lookup (j->trials, &id);
    assert_non_null (t0);
    assert_int_equal (t0->stage, 1);
    assert_int_equal (t0->stage_base, 1);
    assert_true (t0->queued);
    assert_true (json_real_value (json_object_get (json_object_get (t0->stage_metrics, "train"),
                                                   "acc")) == 0.8);
    ct_runner (c, "r1", devs);
    ct_node (c, "w1", 1, 0, 0);
    // Later stages go first: trial 0's measure on the runner's device (not
    // its train again), and trial 1's train retried on w1.
    assert_int_equal (dispatch_run (c), 2);
    assert_int_equal (ct_assigns (c, refs, 8), 2);
    assert_int_equal (refs[0].trial, 0);
    assert_int_equal (refs[0].stage, 1);
    assert_int_equal (refs[0].attempt, 2);
    s_assert_assign (c, 0, 2, "stage", "measure");
    s_assert_assign (c, 0, 2, "kind", "benchmark");
    s_assert_assign (c, 0, 2, "artifact_url", "http://h/m0.8.tflite");
    s_assert_assign (c, 0, 2, "env:CGQ_STAGE_TRAIN_ACC", "0.8");
    s_assert_assign (c, 0, 2, "env:CGQ_STAGE_INDEX", "1");
    assert_int_equal (refs[1].trial, 1);
    assert_int_equal (refs[1].stage, 0);
    assert_int_equal (refs[1].attempt, 2);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    cgq_key_trial (key, sizeof key, 11, 0);
    s_assert_field (c, key, CGQ_TF_NODE, "r1");
    s_assert_field (c, key, CGQ_TF_DEVICE, "d1");

    // A result that names the wrong stage for the current attempt is stale.
    ct_result_stage (c, "r1", 11, 0, 0, 2, CGQ__TASK_STATUS__TASK_SUCCEEDED, "{\"acc\": 0.1}",
                     NULL);
    s_assert_field (c, key, CGQ_TF_STATE, "running");
    // The last stage: merged metrics (a later stage's name wins, and a name
    // two stages report keeps both values as STAGE.NAME), the objective over
    // both stages: 0.8 * 100 / 4 = 20.
    ct_result_stage (c, "r1", 11, 0, 1, 2, CGQ__TASK_STATUS__TASK_SUCCEEDED,
                     "{\"latency\": 4, \"epoch\": 9}", NULL);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    s_assert_field (c, key, CGQ_TF_STATE, "succeeded");
    s_assert_field (c, key, CGQ_TF_VALUE, "20");
    s_assert_field (c, key, CGQ_TF_METRICS,
                    "{\"acc\":0.8,\"epoch\":9,\"latency\":4,\"train.epoch\":3,"
                    "\"measure.epoch\":9}");
    // Each stage's run: the attempt, the node and the times of the one that ended.
    char *run = s_hget (c, key, CGQ_TF_RUN_PREFIX "measure");
    json_t *rj = json_loads (run ? run : "", 0, NULL);
    assert_non_null (rj);
    assert_int_equal (json_integer_value (json_object_get (rj, "attempt")), 2);
    assert_string_equal (json_string_value (json_object_get (rj, "node")), "r1");
    assert_true (json_number_value (json_object_get (rj, "finished"))
                 >= json_number_value (json_object_get (rj, "started")));
    json_decref (rj);
    free (run);
    run = s_hget (c, key, CGQ_TF_RUN_PREFIX "train");
    rj = json_loads (run ? run : "", 0, NULL);
    assert_int_equal (json_integer_value (json_object_get (rj, "attempt")), 1);
    json_decref (rj);
    free (run);
    s_assert_field (c, key, CGQ_TF_STAGES,
                    "{\"train\":{\"acc\":0.8,\"epoch\":3},\"measure\":{\"latency\":4,\"epoch\":9}}");

    // A failed last stage with no retries left fails the trial, stage named.
    ct_result_stage (c, "w1", 11, 1, 0, 2, CGQ__TASK_STATUS__TASK_SUCCEEDED, "{\"acc\": 0.5}",
                     NULL);
    assert_int_equal (dispatch_run (c), 2); // trial 1's measure; trial 2's train
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    ct_result_stage (c, "r1", 11, 1, 1, 3, CGQ__TASK_STATUS__TASK_TIMEOUT, NULL,
                     "timed out after 10s");
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    cgq_key_trial (key, sizeof key, 11, 1);
    s_assert_field (c, key, CGQ_TF_STATE, "failed");
    s_assert_field (c, key, CGQ_TF_ERROR, "stage measure: timed out after 10s");
    s_assert_field (c, key, CGQ_TF_METRICS, "{\"acc\":0.5}"); // the finished stages' merge
    s_assert_counts (c, j);
    ct_coord_destroy (&c);
}

// A worker stage after a device stage: the device was the earlier stage's.
// A coordinator restarted while the worker stage runs adopts it on the
// worker with its CPU (not the device), and frees that CPU at its end.
static void
test_stage_after_device_restart (void **state)
{
    (void) state;
    coord_t *c = ct_coord_new (cgq_test_redis_url (s_redis));
    ct_job (c, 12,
            "space: {x: {grid: [1]}}\n"
            "objective: {metric: time, mode: min}\n"
            "trial:\n"
            "  stages:\n"
            "    - {name: measure, on: {device: board}, benchmark: run}\n"
            "    - {name: summary, command: \"sum {measure.time}\", resources: {cpu: 2}}\n");
    const char *devs[] = {"d1:device=board", NULL};
    ct_runner (c, "r1", devs);
    ct_node (c, "w1", 2, 0, 0);
    assert_int_equal (dispatch_run (c), 1);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    ct_result_stage (c, "r1", 12, 0, 0, 1, CGQ__TASK_STATUS__TASK_SUCCEEDED, "{\"time\": 3}",
                     NULL);
    assert_int_equal (dispatch_run (c), 1);
    s_assert_assign (c, 0, 2, "argv2", "sum 3");
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    char key[96];
    cgq_key_trial (key, sizeof key, 12, 0);
    s_assert_field (c, key, CGQ_TF_NODE, "w1");
    char *dev = s_hget (c, key, CGQ_TF_DEVICE);
    assert_null (dev); // the device was measure's
    ct_coord_destroy (&c);

    c = ct_coord_new (cgq_test_redis_url (s_redis));
    assert_true (recovery_jobs (c) >= 1); // test_stages' job 11 is still running too
    trial_t *t = jobs_trial (c, 12, 0);
    assert_non_null (t);
    assert_int_equal (t->stage, 1);
    assert_null (t->device);
    Cgq__TaskRef a = CGQ__TASK_REF__INIT;
    a.job = 12;
    a.trial = 0;
    a.stage = 1;
    a.attempt = 2;
    Cgq__TaskRef *running[1] = {&a};
    ct_hello (c, "w1", 2, &(ct_hello_t){.running = running, .nrunning = 1});
    node_t *w1 = nodes_find (c, "w1");
    assert_int_equal (w1->ntasks, 1);
    assert_true (w1->free_cpus == 0);
    ct_result_stage (c, "w1", 12, 0, 1, 2, CGQ__TASK_STATUS__TASK_SUCCEEDED, "{\"s\": 1}", NULL);
    assert_true (w1->free_cpus == 2);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    s_assert_field (c, key, CGQ_TF_STATE, "succeeded");
    s_assert_field (c, key, CGQ_TF_VALUE, "3");
    ct_coord_destroy (&c);
}

static void
s_heartbeat (coord_t *c, const char *node, uint64_t job, const uint64_t *trials, size_t n)
{
    Cgq__TaskRef refs[8], *ptrs[8];
    assert_true (n <= 8);
    for (size_t i = 0; i < n; i++) {
        cgq__task_ref__init (&refs[i]);
        refs[i].job = job;
        refs[i].trial = trials[i];
        refs[i].attempt = 1;
        ptrs[i] = &refs[i];
    }
    Cgq__Heartbeat hb = CGQ__HEARTBEAT__INIT;
    hb.n_running = n;
    hb.running = ptrs;
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &hb;
    session_message (c, node, strlen (node), &env);
}

// A silent node's trials are stale (hash, counts, events) and running again
// when it is heard from; a restart reads stale back and adoption clears it;
// the dead-after timeout requeues them. The counts add up throughout.
static void
test_stale_counts (void **state)
{
    (void) state;
    coord_t *c = ct_coord_new (cgq_test_redis_url (s_redis));
    job_t *j = ct_job (c, 31, s_spec);
    node_t *w = ct_node (c, "w1", 3, 0, 0);
    assert_int_equal (dispatch_run (c), 3);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    char key[96];
    // heartbeat 1 s, stale after 2, dead after 5.
    session_liveness (c, w->last_seen_ms + 2500);
    assert_true (w->stale);
    assert_int_equal (j->counts[CGQ_TRIAL_STALE], 3);
    assert_int_equal (j->counts[CGQ_TRIAL_RUNNING], 0);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    s_assert_field (c, cgq_key_trial (key, sizeof key, 31, 1), CGQ_TF_STATE, "stale");
    s_assert_field (c, cgq_key_job (key, sizeof key, 31), "stale", "3");
    s_assert_counts (c, j);
    // No new trial goes to a stale node.
    assert_int_equal (dispatch_run (c), 0);

    uint64_t ids[3] = {0, 1, 2};
    s_heartbeat (c, "w1", 31, ids, 3);
    assert_false (w->stale);
    assert_int_equal (j->counts[CGQ_TRIAL_STALE], 0);
    assert_int_equal (j->counts[CGQ_TRIAL_RUNNING], 3);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    s_assert_field (c, cgq_key_trial (key, sizeof key, 31, 1), CGQ_TF_STATE, "running");
    s_assert_counts (c, j);

    // Stale again, then a result of a stale trial ends it from stale.
    session_liveness (c, w->last_seen_ms + 2500);
    Cgq__TaskRef ref = CGQ__TASK_REF__INIT;
    ref.job = 31;
    ref.attempt = 1;
    Cgq__Result res0 = CGQ__RESULT__INIT;
    res0.task = &ref;
    res0.status = CGQ__TASK_STATUS__TASK_SUCCEEDED;
    res0.metrics_json = "{\"score\": 1}";
    jobs_result (c, &res0); // as a late one would arrive, without waking the node
    assert_int_equal (j->counts[CGQ_TRIAL_STALE], 2);
    assert_int_equal (j->counts[CGQ_TRIAL_SUCCEEDED], 1);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    s_assert_counts (c, j);
    uint64_t counts[CGQ_TRIAL_NSTATES];
    memcpy (counts, j->counts, sizeof counts);
    ct_coord_destroy (&c);

    // A restart reads the stale trials back as running, awaiting adoption.
    coord_t *r = ct_coord_new (cgq_test_redis_url (s_redis));
    assert_true (recovery_jobs (r) >= 1); // earlier tests' jobs may still be running
    job_t *rj = jobs_find (r, 31);
    assert_memory_equal (rj->counts, counts, sizeof counts);
    assert_int_equal (rj->running, 2);
    uint64_t id = 1;
    trial_t *t1 = zhashx_lookup (rj->trials, &id);
    assert_int_equal (t1->state, CGQ_TRIAL_RUNNING);
    assert_true (t1->stale);
    // The node comes back with trial 1 only: adopted and running again;
    // trial 2 is lost at the adoption deadline, from stale to pending.
    Cgq__TaskRef a = CGQ__TASK_REF__INIT;
    a.job = 31;
    a.trial = 1;
    a.attempt = 1;
    Cgq__TaskRef *running[1] = {&a};
    ct_hello (r, "w1", 3, &(ct_hello_t){.running = running, .nrunning = 1});
    assert_false (t1->stale);
    assert_int_equal (rj->counts[CGQ_TRIAL_RUNNING], 1);
    node_t *w1 = nodes_find (r, "w1");
    jobs_adopt_check (r, cgq_now_ms () + 60000);
    assert_int_equal (rj->counts[CGQ_TRIAL_STALE], 0);
    assert_int_equal (coord_turn_end (r, cgq_now_ms ()), 0);
    s_assert_field (r, cgq_key_trial (key, sizeof key, 31, 2), CGQ_TF_STATE, "pending");
    s_assert_counts (r, rj);
    // Silent past dead-after: stale first, then requeued.
    session_liveness (r, w1->last_seen_ms + 2500);
    assert_int_equal (rj->counts[CGQ_TRIAL_STALE], 1);
    session_liveness (r, w1->last_seen_ms + 6000);
    assert_int_equal (rj->counts[CGQ_TRIAL_STALE], 0);
    assert_int_equal (coord_turn_end (r, cgq_now_ms ()), 0);
    s_assert_field (r, cgq_key_trial (key, sizeof key, 31, 1), CGQ_TF_STATE, "pending");
    s_assert_counts (r, rj);
    ct_coord_destroy (&r);
}

// A restarted coordinator pokes the nodes that were alive (so they say
// Hello at once) until each has, or two heartbeat intervals have passed.
static void
test_poke_known_nodes (void **state)
{
    (void) state;
    coord_t *c = ct_coord_new (cgq_test_redis_url (s_redis));
    const char *ids[] = {"pa", "pb", "pc"};
    for (int i = 0; i < 3; i++) {
        char key[64];
        freeReplyObject (s_cmd (c, "SADD %s %s", CGQ_KEY_NODES, ids[i]));
        freeReplyObject (s_cmd (c, "HSET %s state %s", cgq_key_node (key, sizeof key, ids[i]),
                                i == 2 ? CGQ_NODE_DEAD : CGQ_NODE_ALIVE));
    }
    recovery_nodes (c);
    // (Nodes of the tests before are alive in Redis too.) pc was dead.
    size_t before = c->npoke;
    bool pa = false, pb = false, pc = false;
    for (size_t i = 0; i < c->npoke; i++) {
        pa |= !strcmp (c->poke[i], "pa");
        pb |= !strcmp (c->poke[i], "pb");
        pc |= !strcmp (c->poke[i], "pc");
    }
    assert_true (pa && pb && !pc);
    int64_t now = cgq_now_ms ();
    assert_int_equal (session_poke (c, now), now + SESSION_POKE_MS);
    ct_node (c, "pa", 1, 0, 0); // said Hello
    assert_int_equal (session_poke (c, now + SESSION_POKE_MS), now + 2 * SESSION_POKE_MS);
    assert_int_equal (c->npoke, before - 1);
    for (size_t i = 0; i < c->npoke; i++)
        assert_string_not_equal (c->poke[i], "pa");
    // pb never reconnects: its own next heartbeat will do.
    assert_int_equal (session_poke (c, now + 2 * c->cfg.heartbeat_ms), 0);
    assert_int_equal (c->npoke, 0);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    s_assert_field (c, cgq_key_node ((char[64]){0}, 64, "pb"), "state", CGQ_NODE_UNKNOWN);
    ct_coord_destroy (&c);
}

// Node losses: the same node lost under a trial again and again (an operator
// restarting a worker) fails it only at twice the limit; three different
// nodes in a row fail it at once; a result clears the count.
static void
s_lose (coord_t *c, trial_t *t)
{
    nodes_release (c, t);
    jobs_lost (c, t, "node gone");
}

static void
test_losses_count_nodes (void **state)
{
    (void) state;
    coord_t *c = ct_coord_new (cgq_test_redis_url (s_redis));
    job_t *j = ct_job (c, 41,
                       "space: {x: {grid: [1, 2]}}\n"
                       "search: {algorithm: grid, concurrency: 1}\n"
                       "objective: {metric: score, mode: max}\n"
                       "trial: {kind: noop, retries: 0}\n");
    ct_node (c, "w1", 1, 0, 0);
    assert_int_equal (dispatch_run (c), 1);
    trial_t *t = jobs_trial (c, 41, 0);
    assert_non_null (t);
    for (int i = 1; i < 2 * JOBS_MAX_LOSSES; i++) {
        s_lose (c, t);
        assert_int_equal (t->state, CGQ_TRIAL_PENDING);
        assert_int_equal (dispatch_run (c), 1); // back on w1, the only node
        assert_string_equal (t->node->id, "w1");
    }
    s_lose (c, t); // the sixth loss in a row, all on w1 (t is freed as it fails)
    assert_int_equal (j->counts[CGQ_TRIAL_FAILED], 1);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    char key[96];
    char *err = s_hget (c, cgq_key_trial (key, sizeof key, 41, 0), CGQ_TF_ERROR);
    assert_non_null (strstr (err, "lost 6 times in a row, on 1 node(s)"));
    free (err);

    // Trial 1 on three different nodes: failed at the third loss.
    ct_node (c, "w2", 1, 0, 0);
    ct_node (c, "w3", 1, 0, 0);
    assert_int_equal (dispatch_run (c), 1);
    trial_t *u = jobs_trial (c, 41, 1);
    assert_non_null (u);
    const char *seen[JOBS_MAX_LOSSES];
    for (int i = 0; i < JOBS_MAX_LOSSES; i++) {
        seen[i] = u->node->id;
        for (int k = 0; k < i; k++)
            if (!strcmp (seen[k], seen[i]))
                fail_msg ("node %s again; each node takes it once (the others are busy)", seen[i]);
        node_t *keep = u->node;
        s_lose (c, u);
        // Its node is still connected: make it full, so the next goes elsewhere.
        keep->free_cpus = 0;
        if (i + 1 < JOBS_MAX_LOSSES) {
            assert_int_equal (u->state, CGQ_TRIAL_PENDING);
            assert_int_equal (dispatch_run (c), 1);
        }
    }
    // Both trials failed: the job has ended (and j is gone).
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    err = s_hget (c, cgq_key_trial (key, sizeof key, 41, 1), CGQ_TF_ERROR);
    assert_non_null (strstr (err, "lost 3 times in a row, on 3 node(s)"));
    free (err);
    s_assert_field (c, cgq_key_job (key, sizeof key, 41), "failed", "2");
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

// A coordinator killed between saving a batch and sending its Assigns: the
// restarted one reads which Assign went to which node process, and a Hello
// from that process that never saw it gets the trial queued again as
// trial.requeued, not lost; a Hello that saw it leaves it to adoption.
static void
test_undelivered_assign_requeued (void **state)
{
    (void) state;
    coord_t *c = ct_coord_new (cgq_test_redis_url (s_redis));
    ct_job (c, 51,
            "space: {x: {grid: [1, 2]}}\n"
            "objective: {metric: score, mode: max}\n"
            "trial: {kind: noop}\n");
    node_t *w = ct_node (c, "u1", 2, 0, 0);
    w->instance = 77;
    assert_int_equal (dispatch_run (c), 2);
    uint64_t epoch = c->epoch;
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    char key[96];
    char *sent = s_hget (c, cgq_key_trial (key, sizeof key, 51, 1), CGQ_TF_ASSIGN);
    assert_non_null (sent);
    char want[64];
    snprintf (want, sizeof want, "%" PRIu64 ":2:77", epoch);
    assert_string_equal (sent, want);
    free (sent);
    ct_coord_destroy (&c);

    // The same process saw the first Assign (seq 1) but not the second.
    c = ct_coord_new (cgq_test_redis_url (s_redis));
    assert_true (recovery_jobs (c) >= 1);
    ct_hello (c, "u1", 2, &(ct_hello_t){.instance = 77, .assign_epoch = epoch, .assign_seq = 1});
    trial_t *t0 = jobs_trial (c, 51, 0), *t1 = jobs_trial (c, 51, 1);
    assert_int_equal (t1->state, CGQ_TRIAL_PENDING);
    assert_true (t1->queued);
    assert_int_equal (t1->losses, 0);
    assert_int_equal (t0->state, CGQ_TRIAL_RUNNING); // seen: left to adoption
    assert_null (t0->node);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    char *err = s_hget (c, cgq_key_trial (key, sizeof key, 51, 1), CGQ_TF_ERROR);
    assert_non_null (strstr (err, "never reached node u1"));
    free (err);
    // Another process of u1 (a restart) proves nothing: left to adoption.
    t1 = NULL;
    ct_coord_destroy (&c);
    c = ct_coord_new (cgq_test_redis_url (s_redis));
    assert_true (recovery_jobs (c) >= 1);
    ct_hello (c, "u1", 2, &(ct_hello_t){.instance = 78});
    t0 = jobs_trial (c, 51, 0);
    assert_int_equal (t0->state, CGQ_TRIAL_RUNNING);
    ct_coord_destroy (&c);
}

// s_job_events returns job's entries in cgq:events, one line each, "TYPE
// trials=LIST" or "TYPE trial=T", joined by '\n' (caller frees).
static char *
s_job_events (coord_t *c, uint64_t job)
{
    redisReply *r = cgq_store_command (c->store, "XRANGE %s - +", CGQ_KEY_EVENTS);
    assert_non_null (r);
    assert_int_equal (r->type, REDIS_REPLY_ARRAY);
    cgq_buf_t b;
    cgq_buf_init (&b);
    char want[24];
    cgq_fmt_u64 (want, job);
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *f = r->element[i]->element[1];
        const char *jid = cgq_hash_get (f, "job"), *type = cgq_hash_get (f, "type");
        if (!jid || strcmp (jid, want) != 0)
            continue;
        const char *trials = cgq_hash_get (f, "trials"), *trial = cgq_hash_get (f, "trial");
        cgq_buf_printf (&b, "%s%s%s%s%s\n", type, trials ? " trials=" : "", trials ? trials : "",
                        trial ? " trial=" : "", trial ? trial : "");
    }
    freeReplyObject (r);
    return cgq_buf_take (&b);
}

// The turn's starts and successes of a job go out as one event each, with
// every trial listed; any other event of the job comes between them in the
// order it happened.
static void
test_events_grouped_per_turn (void **state)
{
    (void) state;
    coord_t *c = ct_coord_new (cgq_test_redis_url (s_redis));
    ct_job (c, 93,
            "space: {x: {grid: [1, 2, 3, 4]}}\n"
            "search: {algorithm: grid, concurrency: 4}\n"
            "objective: {metric: score, mode: max}\n"
            "trial: {kind: noop, retries: 0}\n");
    ct_node (c, "w1", 4, 0, 0);
    assert_int_equal (dispatch_run (c), 4);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    char *ev = s_job_events (c, 93);
    assert_string_equal (ev, "job.submitted\n"
                             "trial.running trials=0:1@w1 1:1@w1 2:1@w1 3:1@w1\n");
    free (ev);

    ct_result (c, "w1", 93, 0, 1, CGQ__TASK_STATUS__TASK_SUCCEEDED, "{\"score\": 1}", NULL);
    ct_result (c, "w1", 93, 1, 1, CGQ__TASK_STATUS__TASK_FAILED, NULL, "exit status 3");
    ct_result (c, "w1", 93, 3, 1, CGQ__TASK_STATUS__TASK_SUCCEEDED, "{\"score\": 3}", NULL);
    ct_result (c, "w1", 93, 2, 1, CGQ__TASK_STATUS__TASK_SUCCEEDED, "{\"score\": 2}", NULL);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    ev = s_job_events (c, 93);
    assert_string_equal (ev, "job.submitted\n"
                             "trial.running trials=0:1@w1 1:1@w1 2:1@w1 3:1@w1\n"
                             "trial.succeeded trials=0:1\n"
                             "trial.failed trial=1\n"
                             "trial.succeeded trials=3:1 2:1\n"
                             "job.finished\n");
    free (ev);
    ct_coord_destroy (&c);
}

// An Assign waiting in the outbox for its batch (in flight, or kept while
// Redis is away) has not left: heartbeats that do not list its task prove
// nothing, however many. Once it has gone out, three such heartbeats make it
// go once more, and three more lose the attempt.
static void
test_unsent_assign_not_missed (void **state)
{
    (void) state;
    coord_t *c = ct_coord_new (cgq_test_redis_url (s_redis));
    ct_job (c, 94,
            "space: {x: {grid: [1]}}\n"
            "search: {algorithm: grid}\n"
            "objective: {metric: score, mode: max}\n"
            "trial: {kind: noop, retries: 0}\n");
    ct_node (c, "ua", 1, 0, 0);
    assert_int_equal (dispatch_run (c), 1);
    trial_t *t = jobs_trial (c, 94, 0);
    assert_non_null (t);
    for (int i = 0; i < 10; i++)
        s_heartbeat (c, "ua", 94, NULL, 0);
    assert_int_equal (t->state, CGQ_TRIAL_RUNNING);
    assert_int_equal (t->unseen_hbs, 0);
    assert_int_equal (t->resent, 0);
    // The batch is applied: the Assign leaves.
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    assert_int_equal (nodes_find (c, "ua")->assign_out, t->assign_seq);
    for (int i = 0; i < SESSION_ASSIGN_LOST_HBS; i++)
        s_heartbeat (c, "ua", 94, NULL, 0);
    assert_int_equal (t->resent, 1);
    assert_int_equal (t->state, CGQ_TRIAL_RUNNING);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    for (int i = 0; i < SESSION_ASSIGN_LOST_HBS; i++)
        s_heartbeat (c, "ua", 94, NULL, 0);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0); // (t is gone: it failed)
    char key[96];
    char *err = s_hget (c, cgq_key_trial (key, sizeof key, 94, 0), CGQ_TF_ERROR);
    assert_non_null (err);
    assert_non_null (strstr (err, "its Assign never reached the node"));
    free (err);
    ct_coord_destroy (&c);
}

// s_recv_env receives one message on dealer (within 2 s) and decodes it.
static cgq_env_t *
s_recv_env (void *dealer)
{
    zmq_pollitem_t it = {dealer, 0, ZMQ_POLLIN, 0};
    if (zmq_poll (&it, 1, 2000) <= 0)
        return NULL;
    zmq_msg_t m;
    zmq_msg_init (&m);
    assert_true (zmq_msg_recv (&m, dealer, 0) >= 0);
    cgq_env_t *env = cgq_wire_decode (zmq_msg_data (&m), zmq_msg_size (&m), 0);
    zmq_msg_close (&m);
    assert_non_null (env);
    return env;
}

// s_push_assign queues a no-op Assign for node "bw" as dispatch does.
static void
s_push_assign (coord_t *c, void *sock, Cgq__TaskRef *r, uint64_t seq, char *params)
{
    Cgq__Assign a = CGQ__ASSIGN__INIT;
    a.task = r;
    a.kind = "noop";
    if (params)
        a.params_json = params;
    a.seq = seq;
    cgq_env_t e = CGQ__ENVELOPE__INIT;
    e.body_case = CGQ__ENVELOPE__BODY_ASSIGN;
    e.assign = &a;
    outbox_push (c, sock, "bw", 2, false, &e);
    c->out_tail->assign_seq = seq;
}

// s_push_assigns queues n no-op Assigns for node "bw": job 95's trials
// first..first+n-1, attempt 1, each trial's number its seq.
static void
s_push_assigns (coord_t *c, void *sock, uint64_t first, int n, char *params)
{
    for (int i = 0; i < n; i++) {
        Cgq__TaskRef r = CGQ__TASK_REF__INIT;
        r.job = 95;
        r.trial = first + (uint64_t) i;
        r.attempt = 1;
        s_push_assign (c, sock, &r, first + (uint64_t) i, params);
    }
}

// What the outbox sent, in order (coord_t's on_sent).
static void *s_sent_sock[8];
static uint64_t s_sent_seq[8];
static size_t s_sent_n;

static void
s_on_sent (coord_t *c, const out_t *o)
{
    (void) c;
    if (s_sent_n < 8) {
        s_sent_sock[s_sent_n] = o->sock;
        s_sent_seq[s_sent_n] = o->assign_seq;
    }
    s_sent_n++;
}

// The Assigns of one batch for a node whose Hello says `batches` leave as
// one AssignBatch, in the order queued, and the node's assign_out is the
// last of them; a node that does not say so gets one Assign per message.
// A ResultBatch is taken as its Results one by one: each applied and acked.
static void
test_assign_batches (void **state)
{
    (void) state;
    coord_t *c = ct_coord_new (cgq_test_redis_url (s_redis));
    void *zctx = zmq_ctx_new ();
    void *router = zmq_socket (zctx, ZMQ_ROUTER);
    assert_int_equal (zmq_bind (router, "inproc://assign-batches"), 0);
    c->nodes_sock = router;
    void *dealers[2];
    const char *ids[2] = {"bw", "ow"};
    for (int i = 0; i < 2; i++) {
        dealers[i] = zmq_socket (zctx, ZMQ_DEALER);
        zmq_setsockopt (dealers[i], ZMQ_ROUTING_ID, ids[i], strlen (ids[i]));
        assert_int_equal (zmq_connect (dealers[i], "inproc://assign-batches"), 0);
    }
    ct_job (c, 95,
            "space: {x: {grid: [0, 1, 2, 3, 4, 5, 6, 7]}}\n"
            "search: {algorithm: grid}\n"
            "objective: {metric: x, mode: max}\n"
            "trial: {kind: noop, retries: 0}\n");
    ct_hello_t bx = {.batches = true};
    ct_hello (c, "bw", 5, &bx);
    ct_hello (c, "ow", 3, NULL);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0); // the Welcomes
    for (int i = 0; i < 2; i++) {
        cgq_env_t *w = s_recv_env (dealers[i]);
        assert_non_null (w);
        assert_int_equal (w->body_case, CGQ__ENVELOPE__BODY_WELCOME);
        assert_true (w->welcome->batches);
        cgq_wire_free (w);
    }
    assert_int_equal (dispatch_run (c), 8);
    Cgq__TaskRef refs[8];
    assert_int_equal (ct_assigns (c, refs, 8), 8);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);

    cgq_env_t *b = s_recv_env (dealers[0]);
    assert_non_null (b);
    assert_int_equal (b->body_case, CGQ__ENVELOPE__BODY_ASSIGN_BATCH);
    assert_int_equal (b->assign_batch->n_assigns, 5);
    uint64_t prev_seq = 0;
    trial_t *mine[5];
    for (size_t i = 0; i < 5; i++) {
        const Cgq__Assign *a = b->assign_batch->assigns[i];
        assert_true (a->seq > prev_seq); // in the order queued
        prev_seq = a->seq;
        assert_string_equal (a->kind, "noop");
        mine[i] = jobs_trial (c, 95, a->task->trial);
        assert_non_null (mine[i]);
        assert_int_equal (mine[i]->assign_seq, a->seq);
    }
    assert_int_equal (nodes_find (c, "bw")->assign_out, prev_seq);
    cgq_wire_free (b);
    assert_null (s_recv_env (dealers[0]) ? (void *) 1 : NULL); // nothing more
    for (int i = 0; i < 3; i++) {
        cgq_env_t *a = s_recv_env (dealers[1]);
        assert_non_null (a);
        assert_int_equal (a->body_case, CGQ__ENVELOPE__BODY_ASSIGN);
        cgq_wire_free (a);
    }

    // Five Results in one ResultBatch: each applied, one Ack for them all.
    Cgq__Result rs[5], *rp[5];
    Cgq__TaskRef tr[5];
    char metrics[5][32];
    for (int i = 0; i < 5; i++) {
        tr[i] = (Cgq__TaskRef) CGQ__TASK_REF__INIT;
        tr[i].job = 95;
        tr[i].trial = mine[i]->id;
        tr[i].attempt = mine[i]->attempt;
        rs[i] = (Cgq__Result) CGQ__RESULT__INIT;
        rs[i].task = &tr[i];
        rs[i].status = CGQ__TASK_STATUS__TASK_SUCCEEDED;
        snprintf (metrics[i], sizeof metrics[i], "{\"x\": %d}", (int) mine[i]->id);
        rs[i].metrics_json = metrics[i];
        rp[i] = &rs[i];
    }
    Cgq__ResultBatch rb = CGQ__RESULT_BATCH__INIT;
    rb.n_results = 5;
    rb.results = rp;
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_RESULT_BATCH;
    env.result_batch = &rb;
    session_message (c, "bw", 2, &env);
    assert_int_equal (c->stat_results, 5);
    assert_int_equal (coord_turn_end (c, cgq_now_ms ()), 0);
    char key[96];
    for (int i = 0; i < 5; i++) {
        char *st = s_hget (c, cgq_key_trial (key, sizeof key, 95, tr[i].trial), CGQ_TF_STATE);
        assert_non_null (st);
        assert_string_equal (st, "succeeded");
        free (st);
    }
    cgq_env_t *ack = s_recv_env (dealers[0]); // (--durable-after 0 here: at once)
    assert_non_null (ack);
    assert_int_equal (ack->body_case, CGQ__ENVELOPE__BODY_ACK);
    assert_int_equal (ack->ack->n_tasks, 5);
    cgq_wire_free (ack);

    // A Stop between a node's Assigns keeps its place: the Assign queued
    // before it goes first (alone), those after it go after it (together).
    for (int i = 0; i < 4; i++) {
        Cgq__TaskRef r = CGQ__TASK_REF__INIT;
        r.job = 95;
        r.trial = 100 + (uint64_t) i;
        r.attempt = 1;
        if (i == 1) {
            outbox_stop (c, "bw", &r, "test");
            continue;
        }
        s_push_assign (c, router, &r, 100 + (uint64_t) i, NULL);
    }
    outbox_send (c);
    cgq_env_t *m = s_recv_env (dealers[0]);
    assert_int_equal (m->body_case, CGQ__ENVELOPE__BODY_ASSIGN);
    assert_int_equal (m->assign->task->trial, 100);
    cgq_wire_free (m);
    m = s_recv_env (dealers[0]);
    assert_int_equal (m->body_case, CGQ__ENVELOPE__BODY_STOP);
    assert_int_equal (m->stop->task->trial, 101);
    cgq_wire_free (m);
    m = s_recv_env (dealers[0]);
    assert_int_equal (m->body_case, CGQ__ENVELOPE__BODY_ASSIGN_BATCH);
    assert_int_equal (m->assign_batch->n_assigns, 2);
    assert_int_equal (m->assign_batch->assigns[0]->task->trial, 102);
    assert_int_equal (m->assign_batch->assigns[1]->task->trial, 103);
    cgq_wire_free (m);
    assert_int_equal (nodes_find (c, "bw")->assign_out, 103);
    assert_false (nodes_find (c, "bw")->ab_listed);

    // Big Assigns: an AssignBatch stays under 1 MiB (a node reads 4 MiB).
    char *big = cgq_xmalloc (400 << 10);
    memset (big, 'x', (400 << 10) - 1);
    big[(400 << 10) - 1] = '\0';
    s_push_assigns (c, router, 200, 3, big);
    free (big);
    outbox_send (c);
    m = s_recv_env (dealers[0]);
    assert_int_equal (m->body_case, CGQ__ENVELOPE__BODY_ASSIGN_BATCH);
    assert_int_equal (m->assign_batch->n_assigns, 2);
    assert_int_equal (m->assign_batch->assigns[1]->task->trial, 201);
    cgq_wire_free (m);
    m = s_recv_env (dealers[0]);
    assert_int_equal (m->body_case, CGQ__ENVELOPE__BODY_ASSIGN);
    assert_int_equal (m->assign->task->trial, 202);
    cgq_wire_free (m);

    // A submit's reply is queued before its trials' Assigns, but the
    // AssignBatch leaves first: the client's wake-up must not delay a start.
    outbox_reply (c, "cli", 3, 0, "ok", false);
    s_push_assigns (c, router, 300, 2, NULL);
    s_sent_n = 0;
    c->on_sent = s_on_sent;
    outbox_send (c);
    c->on_sent = NULL;
    assert_int_equal (s_sent_n, 2);
    assert_ptr_equal (s_sent_sock[0], router); // the batch of two
    assert_int_equal (s_sent_seq[0], 301);
    assert_ptr_equal (s_sent_sock[1], c->ctl_sock); // then the reply
    m = s_recv_env (dealers[0]);
    assert_int_equal (m->body_case, CGQ__ENVELOPE__BODY_ASSIGN_BATCH);
    assert_int_equal (m->assign_batch->n_assigns, 2);
    cgq_wire_free (m);

    for (int i = 0; i < 2; i++)
        zmq_close (dealers[i]);
    c->nodes_sock = NULL;
    zmq_close (router);
    ct_coord_destroy (&c);
    zmq_ctx_term (zctx);
}

// A batch's messages go to the nodes first, then to the control socket,
// each socket's in the order they were queued.
static void
test_nodes_first (void **state)
{
    coord_t c;
    memset (&c, 0, sizeof c);
    int nodes, ctl; // stand-ins: only their addresses are compared
    c.nodes_sock = &nodes;
    c.ctl_sock = &ctl;
    void *socks[6] = {&ctl, &nodes, &ctl, &ctl, &nodes, &nodes};
    out_t o[6];
    memset (o, 0, sizeof o);
    for (int i = 0; i < 6; i++) {
        o[i].sock = socks[i];
        o[i].next = i < 5 ? &o[i + 1] : NULL;
    }
    const int want[6] = {1, 4, 5, 0, 2, 3};
    out_t *l = outbox_nodes_first (&c, &o[0]);
    for (int i = 0; i < 6; i++, l = l->next) {
        assert_non_null (l);
        assert_int_equal (l - o, want[i]);
    }
    assert_null (l);
    // Only one kind, or none: as it was.
    o[0].next = &o[1];
    o[1].next = NULL;
    o[0].sock = &nodes;
    l = outbox_nodes_first (&c, &o[0]);
    assert_ptr_equal (l, &o[0]);
    assert_ptr_equal (l->next, &o[1]);
    assert_null (l->next->next);
    o[0].sock = o[1].sock = &ctl;
    l = outbox_nodes_first (&c, &o[0]);
    assert_ptr_equal (l, &o[0]);
    assert_ptr_equal (l->next, &o[1]);
    assert_null (outbox_nodes_first (&c, NULL));
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
        cmocka_unit_test (test_external_search),
        cmocka_unit_test (test_objective_expression),
        cmocka_unit_test (test_fail_fast_survives_restart),
        cmocka_unit_test (test_pareto_front_survives_restart),
        cmocka_unit_test (test_constraints_infeasible),
        cmocka_unit_test (test_early_stop_transitions),
        cmocka_unit_test (test_stages),
        cmocka_unit_test (test_stage_after_device_restart),
        cmocka_unit_test (test_stale_counts),
        cmocka_unit_test (test_poke_known_nodes),
        cmocka_unit_test (test_losses_count_nodes),
        cmocka_unit_test (test_keys_bound_to_node_ids),
        cmocka_unit_test (test_undelivered_assign_requeued),
        cmocka_unit_test (test_events_grouped_per_turn),
        cmocka_unit_test (test_assign_batches),
        cmocka_unit_test (test_unsent_assign_not_missed),
        cmocka_unit_test (test_nodes_first),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
