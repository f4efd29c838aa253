// jobs: the job and trial state machine. Every transition changes memory and
// queues its Redis commands in the same call, so memory and the next flushed
// batch always agree. Only trials that are not terminal live in memory.
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "coord.h"
#include "json.h"
#include "log.h"
#include "space.h"

const char *const tstate_names[T_NSTATES] = {"pending", "running", "succeeded", "failed",
                                             "stopped", "cancelled", "unschedulable"};
const char *const jstate_names[3] = {"running", "finished", "cancelled"};

// A trial lost on this many nodes in a row fails: it may be what kills them.
#define MAX_LOSSES 3

job_t *
jobs_find (coord_t *c, uint64_t id)
{
    for (job_t *j = c->jobs; j; j = j->next)
        if (j->id == id)
            return j;
    return NULL;
}

trial_t *
jobs_trial (coord_t *c, uint64_t job, uint64_t trial)
{
    job_t *j = jobs_find (c, job);
    return j ? map_get (&j->trials, trial) : NULL;
}

static void
s_trial_free (trial_t *t)
{
    if (!t)
        return;
    json_decref (t->params);
    free (t->params_json);
    free (t->gpus);
    free (t->expect_node);
    free (t);
}

static void
s_job_free (job_t *j)
{
    size_t pos = 0;
    trial_t *t;
    while ((t = map_next (&j->trials, &pos, NULL)))
        s_trial_free (t);
    map_fini (&j->trials);
    cgq_searcher_destroy (&j->searcher);
    cgq_spec_destroy (&j->spec);
    free (j->name);
    free (j->blocked);
    free (j->spec_dir);
    free (j);
}

void
jobs_destroy_all (coord_t *c)
{
    while (c->jobs) {
        job_t *j = c->jobs;
        c->jobs = j->next;
        s_job_free (j);
    }
    c->rr = NULL;
}

static void
s_job_unlink (coord_t *c, job_t *j)
{
    job_t **pp = &c->jobs;
    while (*pp && *pp != j)
        pp = &(*pp)->next;
    if (*pp)
        *pp = j->next;
    if (c->rr == j)
        c->rr = j->next;
    s_job_free (j);
}

void
job_enqueue (job_t *j, trial_t *t, bool front)
{
    if (t->queued)
        return;
    t->queued = true;
    t->qnext = NULL;
    if (front) {
        t->qnext = j->qhead;
        j->qhead = t;
        if (!j->qtail)
            j->qtail = t;
    }
    else {
        if (j->qtail)
            j->qtail->qnext = t;
        else
            j->qhead = t;
        j->qtail = t;
    }
}

trial_t *
job_dequeue (job_t *j)
{
    trial_t *t = j->qhead;
    if (!t)
        return NULL;
    j->qhead = t->qnext;
    if (!j->qhead)
        j->qtail = NULL;
    t->qnext = NULL;
    t->queued = false;
    return t;
}

void
job_unqueue (job_t *j, trial_t *t)
{
    trial_t **pp = &j->qhead, *prev = NULL;
    while (*pp && *pp != t) {
        prev = *pp;
        pp = &(*pp)->qnext;
    }
    if (!*pp)
        return;
    *pp = t->qnext;
    if (j->qtail == t)
        j->qtail = prev;
    t->qnext = NULL;
    t->queued = false;
}

void
trial_set_state (coord_t *c, trial_t *t, tstate_t s)
{
    trial_set_state_kv (c, t, s, NULL, 0);
}

void
trial_set_state_kv (coord_t *c, trial_t *t, tstate_t s, const char **kv, int nkv)
{
    job_t *j = t->job;
    tstate_t old = t->state;
    if (old == s && !nkv)
        return;
    char jkey[64], tkey[128];
    cgq_key_job (jkey, sizeof jkey, j->id);
    cgq_key_trial (tkey, sizeof tkey, j->id, t->id);
    if (old != s) {
        if (j->counts[old])
            j->counts[old]--;
        j->counts[s]++;
        if (old == T_RUNNING && j->running)
            j->running--;
        if (s == T_RUNNING)
            j->running++;
        t->state = s;
        t->adopt_deadline_ms = 0; // no longer a recovered trial awaiting its node
    }
    j->dirty = true; // the counts go out once per turn (jobs_write_dirty)
    // The state and the fields that change with it: one HSET per transition.
    const char *argv[4 + 16];
    int n = 0;
    argv[n++] = "HSET";
    argv[n++] = tkey;
    argv[n++] = "state";
    argv[n++] = tstate_names[s];
    for (int i = 0; i < nkv && n < (int) (sizeof argv / sizeof *argv); i++) {
        argv[n++] = kv[i];
        if (i % 2 == 0 && strcmp (kv[i], "error") == 0)
            t->has_error = true;
    }
    cgq_store_cmdargv (c->store, n, argv, NULL);
    if (s != T_PENDING && s != T_RUNNING && s != T_UNSCHEDULABLE) {
        char akey[64];
        cgq_key_active (akey, sizeof akey, j->id);
        cgq_store_cmd (c->store, "SREM %s %llu", akey, (unsigned long long) t->id);
    }
}

trial_t *
trial_create (coord_t *c, job_t *j)
{
    uint64_t id;
    json_t *params = cgq_searcher_suggest (j->searcher, &id);
    if (!params)
        return NULL;
    trial_t *t = cgq_xcalloc (1, sizeof *t);
    t->id = id;
    t->job = j;
    t->params = params;
    t->params_json = cgq_json_dumps (params);
    t->state = T_PENDING;
    j->counts[T_PENDING]++;
    map_put (&j->trials, id, t);

    char jkey[64], tkey[128], akey[64];
    cgq_key_job (jkey, sizeof jkey, j->id);
    cgq_key_trial (tkey, sizeof tkey, j->id, id);
    cgq_key_active (akey, sizeof akey, j->id);
    cgq_store_cmd (c->store, "HSET %s id %llu job %llu params %s state pending attempt 0", tkey,
                   (unsigned long long) id, (unsigned long long) j->id, t->params_json);
    cgq_store_cmd (c->store, "SADD %s %llu", akey, (unsigned long long) id);
    j->dirty = true; // counts, suggested and the searcher's state
    return t;
}

// s_trial_end removes a terminal trial from memory.
static void
s_trial_end (coord_t *c, trial_t *t)
{
    job_t *j = t->job;
    if (t->node)
        coord_node_release (c, t);
    map_del (&j->trials, t->id);
    s_trial_free (t);
    job_check_done (c, j);
}

// s_clear_error removes the error an earlier attempt (or an unschedulable
// spell) left in the trial's hash.
static void
s_clear_error (coord_t *c, trial_t *t)
{
    if (!t->has_error)
        return;
    char tkey[128];
    cgq_store_cmd (c->store, "HDEL %s error", cgq_key_trial (tkey, sizeof tkey, t->job->id, t->id));
    t->has_error = false;
}

// s_job_write sets the job's counts, suggested and searcher state to their
// values in memory: one HSET per job per turn however many trials moved,
// and an absolute value, so a batch applied twice cannot skew a count.
static void
s_job_write (coord_t *c, job_t *j)
{
    char jkey[64], sug[32], counts[T_NSTATES][32];
    cgq_key_job (jkey, sizeof jkey, j->id);
    json_t *st = cgq_searcher_save (j->searcher);
    char *sts = cgq_json_dumps (st);
    json_decref (st);
    snprintf (sug, sizeof sug, "%llu", (unsigned long long) cgq_searcher_suggested (j->searcher));
    const char *argv[4 + 2 * T_NSTATES + 2];
    int n = 0;
    argv[n++] = "HSET";
    argv[n++] = jkey;
    for (int k = 0; k < T_NSTATES; k++) {
        snprintf (counts[k], sizeof counts[k], "%llu", (unsigned long long) j->counts[k]);
        argv[n++] = tstate_names[k];
        argv[n++] = counts[k];
    }
    argv[n++] = "suggested";
    argv[n++] = sug;
    argv[n++] = "searcher";
    argv[n++] = sts;
    cgq_store_cmdargv (c->store, n, argv, NULL);
    free (sts);
    j->dirty = false;
}

void
jobs_write_dirty (coord_t *c)
{
    for (job_t *j = c->jobs; j; j = j->next)
        if (j->dirty)
            s_job_write (c, j);
}

void
job_check_done (coord_t *c, job_t *j)
{
    if (j->trials.len)
        return;
    char jkey[64], now[32];
    cgq_key_job (jkey, sizeof jkey, j->id);
    cgq_fmt_double (now, cgq_wall_s ());
    if (j->state == J_RUNNING) {
        if (!cgq_searcher_done (j->searcher))
            return;
        j->state = J_FINISHED;
        cgq_store_cmd (c->store, "HSET %s state finished finished %s", jkey, now);
        cgq_store_cmd (c->store, "HDEL %s blocked", jkey);
        char detail[128];
        snprintf (detail, sizeof detail, "%llu succeeded, %llu failed",
                  (unsigned long long) j->counts[T_SUCCEEDED],
                  (unsigned long long) j->counts[T_FAILED]);
        coord_event (c, "job.finished", j->id, -1, NULL, 0, detail);
        cgq_info ("job %" PRIu64 " (%s) finished: %s", j->id, j->name, detail);
    }
    if (j->dirty)
        s_job_write (c, j);
    s_job_unlink (c, j);
    c->sched_dirty = true;
}

void
job_set_blocked (coord_t *c, job_t *j, const char *reason)
{
    if ((!reason && !j->blocked) || (reason && j->blocked && strcmp (reason, j->blocked) == 0))
        return;
    char jkey[64];
    cgq_key_job (jkey, sizeof jkey, j->id);
    free (j->blocked);
    j->blocked = reason ? cgq_xstrdup (reason) : NULL;
    if (reason) {
        cgq_store_cmd (c->store, "HSET %s blocked %s", jkey, reason);
        cgq_warn ("job %" PRIu64 " is blocked: %s", j->id, reason);
        // Make it visible as a trial too, never silently pending.
        if (!j->qhead) {
            trial_t *t = trial_create (c, j);
            if (t)
                job_enqueue (j, t, false);
        }
    }
    else
        cgq_store_cmd (c->store, "HDEL %s blocked", jkey);
    for (trial_t *t = j->qhead; t; t = t->qnext) {
        if (reason) {
            const char *kv[] = {"error", reason};
            trial_set_state_kv (c, t, T_UNSCHEDULABLE, kv, 2);
            coord_event (c, "trial.unschedulable", j->id, (int64_t) t->id, NULL, 0, reason);
        }
        else if (t->state == T_UNSCHEDULABLE) {
            trial_set_state (c, t, T_PENDING);
            s_clear_error (c, t);
        }
    }
}

static void
s_req_from_spec (job_t *j)
{
    j->req.cpu = j->spec->trial.cpu;
    j->req.gpu = j->spec->trial.gpu;
    j->req.memory = j->spec->trial.memory;
}

static job_t *
s_job_new (uint64_t id, cgq_spec_t *spec, cgq_searcher_t *searcher, const char *spec_dir)
{
    job_t *j = cgq_xcalloc (1, sizeof *j);
    j->id = id;
    j->spec = spec;
    j->searcher = searcher;
    j->name = cgq_xstrdup (spec->name ? spec->name : "job");
    j->spec_dir = cgq_xstrdup (spec_dir ? spec_dir : "");
    j->best_trial = -1;
    j->best_value = NAN;
    map_init (&j->trials);
    s_req_from_spec (j);
    return j;
}

static void
s_job_append (coord_t *c, job_t *j)
{
    job_t **pp = &c->jobs;
    while (*pp)
        pp = &(*pp)->next;
    *pp = j;
}

void
jobs_submit (coord_t *c, const char *rid, size_t rid_len, const Cgq__SubmitJob *m)
{
    const char *yaml = m->spec_yaml ? m->spec_yaml : "";
    const char *path = m->spec_path && *m->spec_path ? m->spec_path : "spec";
    size_t len = strlen (yaml);
    if (len > c->cfg.max_spec) {
        char msg[256];
        snprintf (msg, sizeof msg, "%s: spec is %zu bytes, more than the limit of %llu (--max-spec)",
                  path, len, (unsigned long long) c->cfg.max_spec);
        coord_reply (c, rid, rid_len, 2, msg, true);
        return;
    }
    char err[1024];
    cgq_spec_t *spec = cgq_spec_parse (yaml, len, path, err, sizeof err);
    if (!spec) {
        coord_reply (c, rid, rid_len, 2, err, true);
        return;
    }
    uint64_t total = 0;
    if (cgq_space_count (spec, &total) < 0 || total > (uint64_t) c->cfg.max_trials) {
        char msg[256];
        snprintf (msg, sizeof msg, "%s: the search has %llu trials, more than the limit of %lld "
                  "(lower search.samples or the grid, or raise --max-trials)",
                  path, (unsigned long long) total, (long long) c->cfg.max_trials);
        cgq_spec_destroy (&spec);
        coord_reply (c, rid, rid_len, 2, msg, true);
        return;
    }
    cgq_searcher_t *searcher = cgq_searcher_new (spec, NULL, err, sizeof err);
    if (!searcher) {
        cgq_spec_destroy (&spec);
        coord_reply (c, rid, rid_len, 2, err, true);
        return;
    }
    redisReply *r = cgq_store_command (c->store, "INCR %s", CGQ_KEY_JOB_SEQ);
    if (!r || r->type != REDIS_REPLY_INTEGER) {
        char msg[512];
        snprintf (msg, sizeof msg, "cannot allocate a job id: %s",
                  r ? (r->str ? r->str : "unexpected reply") : cgq_store_errstr (c->store));
        if (r)
            freeReplyObject (r);
        cgq_searcher_destroy (&searcher);
        cgq_spec_destroy (&spec);
        coord_reply (c, rid, rid_len, 1, msg, true);
        return;
    }
    uint64_t id = (uint64_t) r->integer;
    freeReplyObject (r);

    job_t *j = s_job_new (id, spec, searcher, m->spec_dir);
    s_job_append (c, j);

    char jkey[64], now[32];
    cgq_key_job (jkey, sizeof jkey, id);
    cgq_fmt_double (now, cgq_wall_s ());
    const char *argv[] = {"HSET", jkey, "id", NULL, "name", j->name, "state", "running", "spec",
                          yaml, "spec_path", path, "spec_dir", j->spec_dir, "created", now,
                          "total", NULL, "suggested", "0", "objective_metric",
                          spec->objective.metric ? spec->objective.metric : "",
                          "objective_mode",
                          spec->objective.metric ? (spec->objective.mode > 0 ? "max" : "min") : "",
                          "pending", "0", "running", "0", "succeeded", "0", "failed", "0",
                          "stopped", "0", "cancelled", "0", "unschedulable", "0"};
    char idbuf[32], totbuf[32];
    snprintf (idbuf, sizeof idbuf, "%llu", (unsigned long long) id);
    snprintf (totbuf, sizeof totbuf, "%llu", (unsigned long long) total);
    argv[3] = idbuf;
    argv[17] = totbuf;
    cgq_store_cmdargv (c->store, (int) (sizeof argv / sizeof *argv), argv, NULL);
    cgq_store_cmd (c->store, "ZADD %s %s %llu", CGQ_KEY_JOBS, now, (unsigned long long) id);
    coord_event (c, "job.submitted", id, -1, NULL, 0, j->name);
    cgq_info ("job %" PRIu64 " (%s) submitted: %llu trials", id, j->name,
              (unsigned long long) total);

    Cgq__SubmitReply sr = CGQ__SUBMIT_REPLY__INIT;
    sr.job = id;
    sr.trials = total;
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_SUBMIT_REPLY;
    env.submit_reply = &sr;
    coord_send (c, c->ctl_sock, rid, rid_len, true, &env);
    c->sched_dirty = true;
}

void
jobs_cancel (coord_t *c, const char *rid, size_t rid_len, uint64_t id)
{
    char msg[256];
    job_t *j = jobs_find (c, id);
    if (!j || j->state != J_RUNNING) {
        char jkey[64];
        cgq_key_job (jkey, sizeof jkey, id);
        redisReply *r = cgq_store_command (c->store, "HGET %s state", jkey);
        if (!r) {
            snprintf (msg, sizeof msg, "cannot read job %llu: %s", (unsigned long long) id,
                      cgq_store_errstr (c->store));
            coord_reply (c, rid, rid_len, 1, msg, true);
            return;
        }
        if (r->type == REDIS_REPLY_STRING)
            snprintf (msg, sizeof msg, "job %llu is already %s", (unsigned long long) id, r->str);
        else
            snprintf (msg, sizeof msg, "no job %llu (see cgq status)", (unsigned long long) id);
        coord_reply (c, rid, rid_len, r->type == REDIS_REPLY_STRING ? 0 : 2, msg, true);
        freeReplyObject (r);
        return;
    }
    j->state = J_CANCELLED;
    unsigned stopped = 0, dropped = 0;
    while (job_dequeue (j))
        ;
    size_t pos = 0;
    trial_t *t;
    char now[32];
    cgq_fmt_double (now, cgq_wall_s ());
    while ((t = map_next (&j->trials, &pos, NULL))) {
        char tkey[128];
        cgq_key_trial (tkey, sizeof tkey, j->id, t->id);
        bool on_node = t->state == T_RUNNING && t->node;
        trial_set_state (c, t, T_CANCELLED);
        cgq_store_cmd (c->store, "HSET %s finished %s", tkey, now);
        coord_event (c, "trial.cancelled", j->id, (int64_t) t->id, t->node ? t->node->id : NULL,
                     t->attempt, NULL);
        if (on_node) {
            // It stays in memory, holding its resources, until the node reports it stopped.
            Cgq__TaskRef ref = CGQ__TASK_REF__INIT;
            ref.job = j->id;
            ref.trial = t->id;
            ref.attempt = t->attempt;
            coord_stop_task (c, t->node->id, &ref, "job cancelled");
            stopped++;
        }
        else {
            map_del (&j->trials, t->id);
            s_trial_free (t);
            dropped++;
        }
    }
    char jkey[64];
    cgq_key_job (jkey, sizeof jkey, j->id);
    cgq_store_cmd (c->store, "HSET %s state cancelled finished %s", jkey, now);
    cgq_store_cmd (c->store, "HDEL %s blocked", jkey);
    coord_event (c, "job.cancelled", j->id, -1, NULL, 0, NULL);
    snprintf (msg, sizeof msg, "cancelled job %llu: %u running trial(s) stopped, %u pending dropped",
              (unsigned long long) id, stopped, dropped);
    cgq_info ("%s", msg);
    coord_reply (c, rid, rid_len, 0, msg, false);
    job_check_done (c, j);
}

static void
s_metric_names (cgq_buf_t *b, const json_t *metrics)
{
    const char *k;
    json_t *v;
    int n = 0;
    json_object_foreach ((json_t *) metrics, k, v)
    {
        (void) v;
        cgq_buf_printf (b, "%s%s", n++ ? ", " : "", k);
    }
    if (!n)
        cgq_buf_puts (b, "none");
}

// s_fail_or_retry ends one failed attempt: back to the queue while attempts
// remain, else the trial fails with error.
static void
s_fail_or_retry (coord_t *c, trial_t *t, const char *error, bool retryable)
{
    job_t *j = t->job;
    if (retryable && t->attempt <= j->spec->trial.retries) {
        const char *kv[] = {"error", error};
        trial_set_state_kv (c, t, T_PENDING, kv, 2);
        job_enqueue (j, t, false);
        coord_event (c, "trial.retry", j->id, (int64_t) t->id, NULL, t->attempt, error);
        c->sched_dirty = true;
        return;
    }
    char now[32];
    cgq_fmt_double (now, cgq_wall_s ());
    const char *kv[] = {"error", error, "finished", now};
    trial_set_state_kv (c, t, T_FAILED, kv, 4);
    coord_event (c, "trial.failed", j->id, (int64_t) t->id, NULL, t->attempt, error);
    cgq_searcher_observe (j->searcher, t->id, NULL, NAN, false);
    s_trial_end (c, t);
}

void
jobs_result (coord_t *c, node_t *n, const Cgq__Result *r, bool *ack)
{
    *ack = true;
    trial_t *t = jobs_trial (c, r->task->job, r->task->trial);
    if (!t || t->attempt != r->task->attempt) {
        cgq_debug ("result for %" PRIu64 ".%" PRIu64 "#%u is stale; acknowledged, ignored",
                   r->task->job, r->task->trial, r->task->attempt);
        return;
    }
    job_t *j = t->job;
    if (t->state == T_CANCELLED) {
        s_trial_end (c, t); // its node reported the stop: resources free
        return;
    }
    if (t->state == T_PENDING && t->queued && t->attempt > 0 && t->losses > 0
        && r->status != CGQ__TASK_STATUS__TASK_STOPPED) {
        // The node we gave up on finished this attempt after all, before it was
        // dispatched again: keep its result rather than run the trial twice.
        // (Not a stopped one: only our own Stop ends a task that way, and the
        // trial is queued to run again, not failed by it.)
        job_unqueue (j, t);
        trial_set_state (c, t, T_RUNNING);
    }
    if (t->state != T_RUNNING)
        return;
    if (t->node)
        coord_node_release (c, t);
    t->losses = 0;
    (void) n;

    char tkey[128], dur[32], now[32], vbuf[32];
    cgq_key_trial (tkey, sizeof tkey, j->id, t->id);
    cgq_fmt_double (dur, r->duration_s);
    cgq_fmt_double (now, cgq_wall_s ());
    // What every outcome records; a success adds its value and end time and
    // sets it all with its state in one HSET.
    const char *kv[12] = {"duration", dur, "log", r->log_tail ? r->log_tail : "",
                          "trial_dir", r->trial_dir ? r->trial_dir : "", "metrics",
                          r->metrics_json && *r->metrics_json ? r->metrics_json : "{}"};
    int nkv = 8;

    // Decide first whether this is a success; every failure is recorded the same way.
    const char *fail = NULL;
    bool retryable = true;
    cgq_buf_t why;
    cgq_buf_init (&why);
    json_t *metrics = NULL;
    double value = NAN;
    const char *metric = j->spec->objective.metric;
    if (r->status != CGQ__TASK_STATUS__TASK_SUCCEEDED)
        fail = r->error && *r->error ? r->error : "failed";
    else if (!(metrics = json_loads (kv[7], 0, NULL)) || !json_is_object (metrics)) {
        fail = "the trial's result is not a JSON object";
        retryable = false;
    }
    else if (metric) {
        json_t *v = json_object_get (metrics, metric);
        if (!v || !json_is_number (v) || !isfinite (json_number_value (v))) {
            cgq_buf_printf (&why, "result has no numeric metric '%s' (metrics: ", metric);
            s_metric_names (&why, metrics);
            cgq_buf_puts (&why, "); report it, or fix objective.metric");
            fail = why.data;
            retryable = false;
        }
        else
            value = json_number_value (v);
    }
    if (fail) {
        const char *argv[2 + 8] = {"HSET", tkey};
        memcpy (argv + 2, kv, 8 * sizeof *kv);
        cgq_store_cmdargv (c->store, 10, argv, NULL);
        s_fail_or_retry (c, t, fail, retryable);
        json_decref (metrics);
        cgq_buf_fini (&why);
        return;
    }
    cgq_buf_fini (&why);

    if (metric) {
        char lkey[64], jkey[64];
        cgq_fmt_double (vbuf, value);
        cgq_key_leaderboard (lkey, sizeof lkey, j->id);
        cgq_key_job (jkey, sizeof jkey, j->id);
        kv[nkv++] = "value";
        kv[nkv++] = vbuf;
        cgq_store_cmd (c->store, "ZADD %s %s %llu", lkey, vbuf, (unsigned long long) t->id);
        double sign = j->spec->objective.mode > 0 ? 1 : -1;
        if (j->best_trial < 0 || sign * value > sign * j->best_value) {
            j->best_trial = (int64_t) t->id;
            j->best_value = value;
            cgq_store_cmd (c->store, "HSET %s best_trial %llu best_value %s", jkey,
                           (unsigned long long) t->id, vbuf);
        }
    }
    kv[nkv++] = "finished";
    kv[nkv++] = now;
    s_clear_error (c, t); // an earlier attempt's error no longer applies
    trial_set_state_kv (c, t, T_SUCCEEDED, kv, nkv);
    coord_event (c, "trial.succeeded", j->id, (int64_t) t->id, NULL, t->attempt, NULL);
    cgq_searcher_observe (j->searcher, t->id, metrics, value, true);
    json_decref (metrics);
    s_trial_end (c, t);
}

void
jobs_progress (coord_t *c, node_t *n, const Cgq__Progress *p)
{
    (void) n;
    trial_t *t = jobs_trial (c, p->task->job, p->task->trial);
    if (!t || t->state != T_RUNNING || t->attempt != p->task->attempt || !p->report_json)
        return;
    char rkey[128], tkey[128];
    cgq_key_reports (rkey, sizeof rkey, t->job->id, t->id);
    cgq_key_trial (tkey, sizeof tkey, t->job->id, t->id);
    cgq_store_cmd (c->store, "XADD %s MAXLEN ~ 1000 * r %s", rkey, p->report_json);
    cgq_store_cmd (c->store, "HSET %s last_report %s", tkey, p->report_json);
    cgq_store_cmd (c->store, "HINCRBY %s reports 1", tkey);
}

void
jobs_lost (coord_t *c, trial_t *t, const char *why)
{
    job_t *j = t->job;
    if (t->state == T_CANCELLED) {
        s_trial_end (c, t);
        return;
    }
    if (t->state != T_RUNNING)
        return;
    t->losses++;
    char err[256];
    coord_event (c, "trial.lost", j->id, (int64_t) t->id, NULL, t->attempt, why);
    if (t->losses >= MAX_LOSSES) {
        snprintf (err, sizeof err, "lost %u nodes in a row running it (last: %s)", t->losses, why);
        s_fail_or_retry (c, t, err, false);
        return;
    }
    snprintf (err, sizeof err, "attempt %u lost: %s", t->attempt, why);
    const char *kv[] = {"error", err};
    trial_set_state_kv (c, t, T_PENDING, kv, 2);
    job_enqueue (j, t, true);
    c->sched_dirty = true;
}

void
jobs_adopt_check (coord_t *c, int64_t now)
{
    if (!c->adopt_deadline_ms || now < c->adopt_deadline_ms)
        return;
    c->adopt_deadline_ms = 0;
    job_t *j = c->jobs;
    trial_t **lost = NULL;
    size_t cap = 0;
    while (j) {
        job_t *next = j->next;
        size_t pos = 0, nlost = 0;
        trial_t *t;
        // Collect first: jobs_lost may free the job when it ends the last
        // trial. Only trials still awaiting adoption: one whose result came
        // meanwhile may be queued again (its qnext is the queue's link).
        while ((t = map_next (&j->trials, &pos, NULL)))
            if (t->adopt_deadline_ms && t->state == T_RUNNING && !t->node) {
                if (nlost == cap) {
                    cap = cap ? cap * 2 : 16;
                    lost = cgq_xrealloc (lost, cap * sizeof *lost);
                }
                lost[nlost++] = t;
            }
        for (size_t i = 0; i < nlost; i++) {
            lost[i]->adopt_deadline_ms = 0;
            char why[300];
            snprintf (why, sizeof why, "node %s did not report it after the coordinator restarted",
                      lost[i]->expect_node ? lost[i]->expect_node : "?");
            jobs_lost (c, lost[i], why);
        }
        j = next;
    }
    free (lost);
}

// --- recovery -------------------------------------------------------------

static const char *
s_field (const redisReply *h, const char *name)
{
    if (!h || h->type != REDIS_REPLY_ARRAY)
        return NULL;
    for (size_t i = 0; i + 1 < h->elements; i += 2)
        if (h->element[i]->type == REDIS_REPLY_STRING && strcmp (h->element[i]->str, name) == 0)
            return h->element[i + 1]->type == REDIS_REPLY_STRING ? h->element[i + 1]->str : NULL;
    return NULL;
}

static uint64_t
s_field_u64 (const redisReply *h, const char *name)
{
    const char *s = s_field (h, name);
    return s ? strtoull (s, NULL, 10) : 0;
}

static tstate_t
s_state_parse (const char *s)
{
    for (int i = 0; i < T_NSTATES; i++)
        if (s && strcmp (s, tstate_names[i]) == 0)
            return (tstate_t) i;
    return T_PENDING;
}

static int
s_recover_trials (coord_t *c, job_t *j)
{
    char akey[64];
    cgq_key_active (akey, sizeof akey, j->id);
    redisReply *ids = cgq_store_command (c->store, "SMEMBERS %s", akey);
    if (!ids)
        return -1;
    size_t n = ids->type == REDIS_REPLY_ARRAY ? ids->elements : 0;
    for (size_t i = 0; i < n; i++) {
        char tkey[128];
        cgq_key_trial (tkey, sizeof tkey, j->id, strtoull (ids->element[i]->str, NULL, 10));
        cgq_store_append (c->store, "HGETALL %s", tkey);
    }
    int64_t deadline = cgq_now_ms () + c->cfg.heartbeat_ms * c->cfg.dead_after * 2;
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        redisReply *h = cgq_store_get_reply (c->store);
        if (!h) {
            rc = -1;
            break;
        }
        const char *params = s_field (h, "params");
        json_t *pj = params ? json_loads (params, 0, NULL) : NULL;
        if (!pj) {
            freeReplyObject (h);
            continue;
        }
        trial_t *t = cgq_xcalloc (1, sizeof *t);
        t->id = strtoull (ids->element[i]->str, NULL, 10);
        t->job = j;
        t->params = pj;
        t->params_json = cgq_json_dumps (pj);
        t->attempt = (uint32_t) s_field_u64 (h, "attempt");
        t->state = s_state_parse (s_field (h, "state"));
        const char *error = s_field (h, "error");
        t->has_error = error && *error; // cleared when a later attempt succeeds
        map_put (&j->trials, t->id, t);
        if (t->state == T_RUNNING) {
            j->running++;
            const char *node = s_field (h, "node");
            t->expect_node = cgq_xstrdup (node ? node : "?");
            t->adopt_deadline_ms = deadline;
            c->adopt_deadline_ms = deadline;
            // Remember the GPU indices it was given; s_hello maps them back.
            const char *g = s_field (h, "gpus");
            if (g && *g) {
                int cnt = 1;
                for (const char *p = g; *p; p++)
                    cnt += *p == ',';
                t->gpus = cgq_xcalloc ((size_t) cnt, sizeof *t->gpus);
                const char *p = g;
                for (int k = 0; k < cnt; k++) {
                    t->gpus[k] = (int) strtol (p, (char **) &p, 10);
                    if (*p == ',')
                        p++;
                }
                t->ngpus = cnt;
            }
        }
        else {
            // A blocked job keeps its unschedulable trials until a node fits
            // (job_set_blocked); without the reason they are plain pending.
            if (t->state == T_UNSCHEDULABLE && !j->blocked)
                trial_set_state (c, t, T_PENDING);
            job_enqueue (j, t, false);
        }
        freeReplyObject (h);
    }
    freeReplyObject (ids);
    return rc;
}

int
jobs_recover (coord_t *c)
{
    redisReply *ids = cgq_store_command (c->store, "ZRANGE %s 0 -1", CGQ_KEY_JOBS);
    if (!ids)
        return -1;
    int recovered = 0;
    for (size_t i = 0; ids->type == REDIS_REPLY_ARRAY && i < ids->elements; i++) {
        uint64_t id = strtoull (ids->element[i]->str, NULL, 10);
        char jkey[64];
        cgq_key_job (jkey, sizeof jkey, id);
        redisReply *h = cgq_store_command (c->store, "HGETALL %s", jkey);
        if (!h)
            break;
        const char *state = s_field (h, "state");
        if (!state || strcmp (state, "running") != 0) {
            freeReplyObject (h);
            continue;
        }
        const char *yaml = s_field (h, "spec");
        const char *path = s_field (h, "spec_path");
        char err[1024];
        cgq_spec_t *spec = yaml ? cgq_spec_parse (yaml, strlen (yaml), path ? path : "spec", err,
                                                  sizeof err)
                                : NULL;
        json_t *st = NULL;
        const char *sts = s_field (h, "searcher");
        if (sts)
            st = json_loads (sts, 0, NULL);
        cgq_searcher_t *searcher = spec ? cgq_searcher_new (spec, st, err, sizeof err) : NULL;
        json_decref (st);
        if (!searcher) {
            cgq_error ("job %" PRIu64 " cannot be resumed: %s; marking it failed", id,
                       spec ? err : "its spec no longer parses");
            cgq_store_cmd (c->store, "HSET %s state finished error %s", jkey,
                           "could not be resumed after a coordinator restart");
            cgq_spec_destroy (&spec);
            freeReplyObject (h);
            continue;
        }
        job_t *j = s_job_new (id, spec, searcher, s_field (h, "spec_dir"));
        for (int k = 0; k < T_NSTATES; k++)
            j->counts[k] = s_field_u64 (h, tstate_names[k]);
        const char *blocked = s_field (h, "blocked");
        if (blocked && *blocked)
            j->blocked = cgq_xstrdup (blocked);
        const char *bt = s_field (h, "best_trial");
        const char *bv = s_field (h, "best_value");
        if (bt && *bt && bv) {
            j->best_trial = strtoll (bt, NULL, 10);
            j->best_value = strtod (bv, NULL);
        }
        freeReplyObject (h);
        s_job_append (c, j);
        if (s_recover_trials (c, j) < 0) {
            freeReplyObject (ids);
            return -1;
        }
        j->running = (uint32_t) j->counts[T_RUNNING];
        cgq_info ("resumed job %" PRIu64 " (%s): %zu active trial(s), %llu suggested", id, j->name,
                  j->trials.len, (unsigned long long) cgq_searcher_suggested (searcher));
        recovered++;
        job_check_done (c, j);
    }
    freeReplyObject (ids);
    return recovered;
}
