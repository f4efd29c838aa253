// control: the CLI's requests.
#include "control.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs.h"
#include "json.h"
#include "log.h"
#include "nodes.h"
#include "outbox.h"
#include "space.h"

#define S_REQUEST_SLACK 65536 // a spec's path and directory beside it
#define S_MESSAGE_FACTOR 64   // control socket bound / largest request decoded

// KEYS[1] = max(KEYS[1], ARGV[1]): the job id counter never goes back.
#define S_SEQ_AT_LEAST                                                                             \
    "local v = tonumber(redis.call('GET', KEYS[1]) or '0') "                                       \
    "if v < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], ARGV[1]) end return 0"

// s_redis_why: why Redis takes no writes, as the failed batch found it (not
// the store's errstr, which a reconnect since may have reset to "connected").
static const char *
s_redis_why (coord_t *c)
{
    return c->redis_why[0] ? c->redis_why : cgq_store_errstr (c->store);
}

// s_redis_hint names the way out of a full Redis.
static const char *
s_redis_hint (coord_t *c)
{
    return strstr (s_redis_why (c), "OOM")
               ? "; Redis is at its maxmemory: raise maxmemory, or free memory (cgq gc, old jobs)"
               : "";
}

// s_size writes n bytes as "50 MB", "1 MiB" or "900 bytes".
static char *
s_size (char *buf, size_t len, uint64_t n)
{
    if (n >= (1u << 20) && n % (1u << 20) == 0)
        snprintf (buf, len, "%llu MiB", (unsigned long long) (n >> 20));
    else if (n >= 1000000)
        snprintf (buf, len, "%.0f MB", (double) n / 1e6);
    else if (n >= 1024 && n % 1024 == 0)
        snprintf (buf, len, "%llu KiB", (unsigned long long) (n >> 10));
    else if (n >= 10000)
        snprintf (buf, len, "%.0f kB", (double) n / 1e3);
    else
        snprintf (buf, len, "%llu bytes", (unsigned long long) n);
    return buf;
}

void
control_job_seq_at_least (coord_t *c, uint64_t id)
{
    cgq_store_cmd (c->store, "EVAL %s 1 %s %llu", S_SEQ_AT_LEAST, CGQ_KEY_JOB_SEQ,
                   (unsigned long long) id);
}

uint64_t
control_max_request (const coord_cfg_t *cfg)
{
    return cfg->max_spec + S_REQUEST_SLACK;
}

int64_t
control_max_message (const coord_cfg_t *cfg)
{
    return (int64_t) (control_max_request (cfg) * S_MESSAGE_FACTOR);
}

void
control_too_big (coord_t *c, const char *rid, size_t rid_len, size_t size)
{
    char msg[256], a[32], b[32];
    snprintf (msg, sizeof msg,
              "request is %s, over the %s limit of a spec (--max-spec of the coordinator); "
              "nothing was submitted",
              s_size (a, sizeof a, size), s_size (b, sizeof b, c->cfg.max_spec));
    outbox_reply (c, rid, rid_len, 2, msg, false);
}

// s_no_writes refuses at once a request that would change state while Redis
// takes no writes (a batch failed and is being retried): such a change is
// answered only once it is in Redis, which may be minutes away, so the
// client would wait out its timeout and report a coordinator that does not
// answer. Refused, nothing is changed, and the client is told why and to try
// again (again: how). Returns true when it refused.
static bool
s_no_writes (coord_t *c, const char *rid, size_t rid_len, const char *what, const char *again)
{
    if (!c->redis_retry_ms)
        return false;
    char msg[1536]; // the URL, the cause and the hint, whole
    snprintf (msg, sizeof msg, "Redis at %s takes no writes now (%s%s): %s; %s once Redis is back",
              cgq_store_url (c->store), s_redis_why (c), s_redis_hint (c), what, again);
    outbox_reply (c, rid, rid_len, 1, msg, true);
    return true;
}

static void
s_submit (coord_t *c, const char *rid, size_t rid_len, const Cgq__SubmitJob *m)
{
    const char *yaml = m->spec_yaml ? m->spec_yaml : "";
    const char *path = m->spec_path && *m->spec_path ? m->spec_path : "spec";
    size_t len = strlen (yaml);
    if (len > c->cfg.max_spec) {
        char msg[512], a[32], b[32];
        snprintf (msg, sizeof msg,
                  "%s: spec is %s, over the %s limit (--max-spec of the coordinator); nothing "
                  "was submitted",
                  path, s_size (a, sizeof a, len), s_size (b, sizeof b, c->cfg.max_spec));
        outbox_reply (c, rid, rid_len, 2, msg, true);
        return;
    }
    char err[1024];
    cgq_spec_t *spec = cgq_spec_parse (yaml, len, path, err, sizeof err);
    if (!spec) {
        outbox_reply (c, rid, rid_len, 2, err, true);
        return;
    }
    uint64_t total = 0;
    char why[512];
    if (cgq_space_check_limit (spec, (uint64_t) c->cfg.max_trials, why, sizeof why) < 0) {
        char msg[1024];
        snprintf (msg, sizeof msg, "%s: %s", path, why);
        cgq_spec_destroy (&spec);
        outbox_reply (c, rid, rid_len, 2, msg, true);
        return;
    }
    cgq_space_count (spec, &total); // within the limit: it does not overflow
    if (c->cfg.max_params > 0 && spec->nparams > (size_t) c->cfg.max_params) {
        char msg[256];
        snprintf (msg, sizeof msg,
                  "%s: a trial has %zu params, more than the limit of %lld (fewer entries in "
                  "space:, or raise --max-params of the coordinator); nothing was submitted",
                  path, spec->nparams, (long long) c->cfg.max_params);
        cgq_spec_destroy (&spec);
        outbox_reply (c, rid, rid_len, 2, msg, true);
        return;
    }
    cgq_searcher_t *searcher = cgq_searcher_new (spec, NULL, err, sizeof err);
    // search.warm_start: the client resolved it into warm_json (the
    // coordinator reads no other job here: docs/architecture.md).
    bool warm = spec->search.nwarm_jobs || spec->search.warm_points;
    const char *warm_json = m->warm_json && *m->warm_json ? m->warm_json : NULL;
    if (searcher && warm && !warm_json) {
        snprintf (err, sizeof err,
                  "%s: search.warm_start is resolved by the submitting client (cgq submit, cgq "
                  "run), and this one sent no observations; nothing was submitted",
                  path);
        cgq_searcher_destroy (&searcher);
    }
    else if (searcher && warm && cgq_searcher_warm_json (searcher, warm_json, err, sizeof err) < 0)
        cgq_searcher_destroy (&searcher);
    if (!searcher) {
        cgq_spec_destroy (&spec);
        outbox_reply (c, rid, rid_len, 2, err, true);
        return;
    }
    // While Redis is known to be down, say so at once (the INCR below would
    // wait out its timeout first).
    if (s_no_writes (c, rid, rid_len, "the job was not submitted", "submit it again")) {
        cgq_searcher_destroy (&searcher);
        cgq_spec_destroy (&spec);
        return;
    }
    redisReply *r = cgq_store_command (c->store, "INCR %s", CGQ_KEY_JOB_SEQ);
    if (!r) // the connection may be one Redis closed (a restart): once more, on a new one
        r = cgq_store_command (c->store, "INCR %s", CGQ_KEY_JOB_SEQ);
    if (!r || r->type != REDIS_REPLY_INTEGER) {
        char msg[512];
        snprintf (msg, sizeof msg, "cannot allocate a job id: %s",
                  r ? (r->str ? r->str : "unexpected reply") : cgq_store_errstr (c->store));
        if (r)
            freeReplyObject (r);
        cgq_searcher_destroy (&searcher);
        cgq_spec_destroy (&spec);
        outbox_reply (c, rid, rid_len, 1, msg, true);
        return;
    }
    uint64_t id = (uint64_t) r->integer;
    freeReplyObject (r);
    if (id <= c->max_job_id) {
        // Redis came back older than what we handed out (a crash inside its
        // fsync window lost the INCR; the journal replays the job itself):
        // the batch that creates this job raises the counter to its id.
        cgq_warn ("Redis handed out job id %" PRIu64 " again (it lost writes in a crash); using "
                  "%" PRIu64,
                  id, c->max_job_id + 1);
        id = c->max_job_id + 1;
        control_job_seq_at_least (c, id);
    }
    c->max_job_id = id;

    if (cgq_searcher_pbt (searcher))
        total = 0; // not known up front: each exploit adds a trial
    job_t *j = jobs_add (c, id, spec, searcher, m->spec_dir);
    jobs_submitted (c, j, yaml, path, total);
    if (warm) { // kept for a restart, which feeds them to the searcher again
        char wkey[64];
        cgq_store_cmd (c->store, "SET %s %s", cgq_key_warm (wkey, sizeof wkey, id), warm_json);
    }

    Cgq__SubmitReply sr = CGQ__SUBMIT_REPLY__INIT;
    sr.job = id;
    sr.trials = total;
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_SUBMIT_REPLY;
    env.submit_reply = &sr;
    outbox_push (c, c->ctl_sock, rid, rid_len, true, &env);
}

static void
s_cancel (coord_t *c, const char *rid, size_t rid_len, uint64_t id)
{
    char msg[256];
    jobs_cancel_t rc = jobs_cancel (c, id, msg, sizeof msg);
    // A cancel that changed state is answered after the flush; one that
    // changed nothing (already over, unknown job, Redis down) at once.
    int code = rc == JOBS_CANCEL_IO ? 1 : rc == JOBS_CANCEL_UNKNOWN ? 2 : 0;
    outbox_reply (c, rid, rid_len, code, msg, rc != JOBS_CANCEL_DONE);
}

// s_trials lists j's trials in memory (caller frees the array): what a
// pause or resume walks while it changes their states.
static trial_t **
s_trials (job_t *j, size_t *n)
{
    *n = 0;
    trial_t **all = cgq_xcalloc (zhashx_size (j->trials) + 1, sizeof *all);
    for (trial_t *t = zhashx_first (j->trials); t; t = zhashx_next (j->trials))
        all[(*n)++] = t;
    return all;
}

// s_job_gone answers a request about job id when it is not running here:
// ended or never known (2), or Redis cannot say (1).
static int
s_job_gone (coord_t *c, uint64_t id, const char *verb, char *msg, size_t msglen)
{
    char jkey[64];
    cgq_key_job (jkey, sizeof jkey, id);
    redisReply *r = cgq_store_command (c->store, "HGET %s %s", jkey, CGQ_JF_STATE);
    if (!r) {
        snprintf (msg, msglen, "cannot read job %llu: %s", (unsigned long long) id,
                  cgq_store_errstr (c->store));
        return 1;
    }
    int rc = 2;
    if (r->type == REDIS_REPLY_STRING)
        snprintf (msg, msglen, "cannot %s job %llu: it is already %s", verb,
                  (unsigned long long) id, r->str);
    else
        snprintf (msg, msglen, "no job %llu (see cgq status)", (unsigned long long) id);
    freeReplyObject (r);
    return rc;
}

int
control_pause (coord_t *c, uint64_t id, bool resume, bool now, char *msg, size_t msglen)
{
    job_t *j = jobs_find (c, id);
    if (!j || j->state != CGQ_JOB_RUNNING)
        return s_job_gone (c, id, resume ? "resume" : "pause", msg, msglen);
    unsigned long long jid = (unsigned long long) id;
    char jkey[64], detail[256];
    cgq_key_job (jkey, sizeof jkey, j->id);
    size_t n;
    trial_t **all = s_trials (j, &n);
    uint64_t count = 0, waiting = 0;
    if (resume) {
        if (!j->paused) {
            free (all);
            snprintf (msg, msglen, "job %llu is not paused (cgq pause %llu pauses it)", jid, jid);
            return 2;
        }
        j->paused = 0;
        cgq_store_cmd (c->store, "HDEL %s %s", jkey, CGQ_JF_PAUSED);
        for (size_t i = 0; i < n; i++)
            if (all[i]->state == CGQ_TRIAL_PAUSED) {
                jobs_resume_trial (c, all[i]);
                count++;
            }
        free (all);
        snprintf (detail, sizeof detail,
                  "%llu paused trial(s) queued again, to resume from their checkpoints",
                  (unsigned long long) count);
        jobs_event (c, j, "job.resumed", detail);
        snprintf (msg, msglen, "resumed job %llu: %s", jid, detail);
        cgq_info ("%s", msg);
        j->dirty = true;
        c->sched_dirty = true;
        return 0;
    }
    if (j->paused == JOBS_PAUSE_NOW || (j->paused && !now)) {
        for (size_t i = 0; i < n; i++)
            waiting += all[i]->state == CGQ_TRIAL_RUNNING;
        free (all);
        snprintf (msg, msglen,
                  "job %llu is already paused%s (%llu trial(s) still running to their next "
                  "checkpoint; cgq pause %llu --now stops them at once; cgq resume %llu "
                  "resumes it)",
                  jid, j->paused == JOBS_PAUSE_NOW ? " --now" : "", (unsigned long long) waiting,
                  jid, jid);
        return 0;
    }
    bool again = j->paused != 0; // a checkpoint pause made a pause now
    j->paused = now ? JOBS_PAUSE_NOW : JOBS_PAUSE_CHECKPOINT;
    cgq_hset_t h;
    cgq_hset_init (&h, jkey);
    cgq_hset_str (&h, CGQ_JF_PAUSED, now ? "now" : "checkpoint");
    cgq_hset_queue (&h, c->store);
    for (size_t i = 0; i < n; i++) {
        trial_t *t = all[i];
        if (t->state != CGQ_TRIAL_RUNNING)
            continue;
        if (now && t->node) {
            jobs_pause_trial (c, t);
            count++;
        }
        else
            waiting++; // a checkpoint pause, or a recovered trial not adopted yet
    }
    free (all);
    if (now)
        snprintf (detail, sizeof detail,
                  "%s%llu running trial(s) stopped now, each keeping its last checkpoint",
                  again ? "now: " : "", (unsigned long long) count);
    else
        snprintf (detail, sizeof detail, "%llu running trial(s) stop at their next checkpoint",
                  (unsigned long long) waiting);
    jobs_event (c, j, "job.paused", detail);
    snprintf (msg, msglen, "paused job %llu: %s; nothing new starts until cgq resume %llu", jid,
              detail, jid);
    cgq_info ("%s", msg);
    j->dirty = true;
    c->sched_dirty = true;
    return 0;
}

// s_pause answers a PauseJob (cgq pause, cgq resume) with control_pause's
// code; like a cancel, after the flush when it changed something, so the
// reply means the paused state is in Redis.
static void
s_pause (coord_t *c, const char *rid, size_t rid_len, const Cgq__PauseJob *m)
{
    char msg[512];
    int code = control_pause (c, m->job, m->resume, m->now, msg, sizeof msg);
    outbox_reply (c, rid, rid_len, code, msg, code != 0);
}

// s_enable returns a quarantined device to service; answered after the
// flush, so the reply means the change is in Redis.
static void
s_enable (coord_t *c, const char *rid, size_t rid_len, const Cgq__EnableDevice *m)
{
    char msg[512];
    if (!m->device_id || !*m->device_id) {
        outbox_reply (c, rid, rid_len, 2, "no device id given (cgq devices enable ID)", true);
        return;
    }
    int rc = nodes_device_enable (c, m->device_id, msg, sizeof msg);
    outbox_reply (c, rid, rid_len, rc < 0 ? 2 : 0, msg, rc < 0);
}

// s_suggest_reject answers a Suggest that queued nothing, at once.
static void
s_suggest_reject (coord_t *c, const char *rid, size_t rid_len, int code, const char *msg)
{
    outbox_reply (c, rid, rid_len, code, msg, true);
}

// s_suggest takes the points a searcher outside the coordinator sends for
// an external job. All or nothing: each is checked against the space first;
// then they join the searcher's queue and, in this turn's batch, the end of
// cgq:job:{J}:suggestions, and the Reply goes out after that batch is in
// Redis. Trial i runs element i of that list, so a restart loses none and
// uses none twice (recovery.c refills the queue from it).
static void
s_suggest (coord_t *c, const char *rid, size_t rid_len, const Cgq__Suggest *m)
{
    char msg[1024];
    job_t *j = jobs_find (c, m->job);
    if (!j) {
        // Not in memory: it ended (and was freed), or never was.
        char key[64];
        redisReply *r = c->redis_retry_ms ? NULL
                                          : cgq_store_command (c->store, "HGET %s %s",
                                                               cgq_key_job (key, sizeof key, m->job),
                                                               CGQ_JF_STATE);
        if (!r || r->type == REDIS_REPLY_ERROR) {
            snprintf (msg, sizeof msg, "cannot tell whether job %llu exists: Redis at %s: %s",
                      (unsigned long long) m->job, cgq_store_url (c->store),
                      r ? r->str : cgq_store_errstr (c->store));
            if (r)
                freeReplyObject (r);
            s_suggest_reject (c, rid, rid_len, 1, msg);
            return;
        }
        if (r->type == REDIS_REPLY_STRING)
            snprintf (msg, sizeof msg, "job %llu is %s: it takes no more suggestions",
                      (unsigned long long) m->job, r->str);
        else
            snprintf (msg, sizeof msg, "no job %llu (see cgq status)",
                      (unsigned long long) m->job);
        freeReplyObject (r);
        s_suggest_reject (c, rid, rid_len, 2, msg);
        return;
    }
    if (!cgq_searcher_external (j->searcher)) {
        snprintf (msg, sizeof msg,
                  "job %llu searches with algorithm %s, not external: its own searcher chooses "
                  "the params (submit a spec with search: {algorithm: external})",
                  (unsigned long long) j->id, cgq_spec_search_name (j->spec->search.algorithm));
        s_suggest_reject (c, rid, rid_len, 2, msg);
        return;
    }
    if (j->state != CGQ_JOB_RUNNING) {
        snprintf (msg, sizeof msg, "job %llu is %s: it takes no more suggestions",
                  (unsigned long long) j->id, cgq_jstate_names[j->state]);
        s_suggest_reject (c, rid, rid_len, 2, msg);
        return;
    }
    uint64_t waiting = cgq_searcher_waiting (j->searcher), n = m->n_params_json;
    uint64_t given = cgq_searcher_suggested (j->searcher) + waiting;
    uint64_t total = cgq_searcher_total (j->searcher);
    if (n == 0) { // a question: how many wait
        snprintf (msg, sizeof msg, "queued 0 (%llu waiting)", (unsigned long long) waiting);
        outbox_reply (c, rid, rid_len, 0, msg, true);
        return;
    }
    if (c->redis_retry_ms) {
        snprintf (msg, sizeof msg,
                  "Redis at %s takes no writes now (%s%s): nothing was queued; send the "
                  "suggestions again once Redis is back",
                  cgq_store_url (c->store), s_redis_why (c), s_redis_hint (c));
        s_suggest_reject (c, rid, rid_len, 1, msg);
        return;
    }
    if (given + n > total) {
        snprintf (msg, sizeof msg,
                  "job %llu takes %llu more suggestion(s), not %llu (search.samples is %llu and "
                  "%llu were received); nothing was queued",
                  (unsigned long long) j->id, (unsigned long long) (total - given),
                  (unsigned long long) n, (unsigned long long) total, (unsigned long long) given);
        s_suggest_reject (c, rid, rid_len, 2, msg);
        return;
    }
    if (waiting + n > CGQ_SEARCH_EXTERNAL_MAX_WAITING) {
        snprintf (msg, sizeof msg,
                  "job %llu has %llu suggestion(s) waiting and takes at most %d: nothing was "
                  "queued (send again once trials have started)",
                  (unsigned long long) j->id, (unsigned long long) waiting,
                  CGQ_SEARCH_EXTERNAL_MAX_WAITING);
        s_suggest_reject (c, rid, rid_len, 1, msg);
        return;
    }
    json_t **points = cgq_xcalloc (n, sizeof *points);
    char **texts = cgq_xcalloc (n, sizeof *texts);
    size_t ok = 0;
    for (; ok < n; ok++) {
        const char *text = m->params_json[ok] ? m->params_json[ok] : "";
        size_t len = strlen (text);
        char err[768];
        json_t *params = NULL;
        if (len > CGQ_SEARCH_EXTERNAL_MAX_POINT)
            snprintf (err, sizeof err, "%zu bytes of JSON, more than %d", len,
                      CGQ_SEARCH_EXTERNAL_MAX_POINT);
        else {
            json_error_t je;
            params = json_loadb (text, len, 0, &je);
            if (!params)
                snprintf (err, sizeof err, "not JSON: %s at column %d", je.text, je.column);
        }
        if (params)
            points[ok] = cgq_searcher_point (j->searcher, params, err, sizeof err);
        json_decref (params);
        if (!points[ok]) {
            snprintf (msg, sizeof msg, "job %llu: suggestion %zu of %llu: %s; nothing was queued",
                      (unsigned long long) j->id, ok + 1, (unsigned long long) n, err);
            break;
        }
        texts[ok] = cgq_json_dumps (points[ok]);
    }
    if (ok < n) {
        for (size_t i = 0; i < ok; i++) {
            json_decref (points[i]);
            free (texts[i]);
        }
        free (points);
        free (texts);
        s_suggest_reject (c, rid, rid_len, 2, msg);
        return;
    }
    char key[64];
    cgq_key_suggestions (key, sizeof key, j->id);
    cgq_store_begin (c->store, 2 + n);
    cgq_store_arg (c->store, "RPUSH", 5);
    cgq_store_arg (c->store, key, strlen (key));
    for (size_t i = 0; i < n; i++) {
        cgq_store_arg (c->store, texts[i], strlen (texts[i]));
        free (texts[i]);
        cgq_searcher_give (j->searcher, points[i]);
    }
    free (points);
    free (texts);
    c->sched_dirty = true;
    snprintf (msg, sizeof msg, "queued %llu (%llu waiting)", (unsigned long long) n,
              (unsigned long long) cgq_searcher_waiting (j->searcher));
    outbox_reply (c, rid, rid_len, 0, msg, false);
}

// s_conc writes a concurrency: the number, or "unlimited" for 0.
static const char *
s_conc (char *buf, size_t len, uint32_t n)
{
    if (n)
        snprintf (buf, len, "%u", n);
    else
        snprintf (buf, len, "unlimited");
    return buf;
}

// s_update_over answers an UpdateJob for a job that is not running: in
// memory and ended, or only in Redis (ended and freed), or unknown. At once.
static void
s_update_over (coord_t *c, const char *rid, size_t rid_len, uint64_t id, const char *state)
{
    char msg[512];
    redisReply *r = NULL;
    if (!state) {
        char key[64];
        r = c->redis_retry_ms ? NULL
                              : cgq_store_command (c->store, "HGET %s %s",
                                                   cgq_key_job (key, sizeof key, id), CGQ_JF_STATE);
        if (!r || r->type == REDIS_REPLY_ERROR) {
            snprintf (msg, sizeof msg, "cannot tell whether job %llu exists: Redis at %s: %s",
                      (unsigned long long) id, cgq_store_url (c->store),
                      r ? r->str : cgq_store_errstr (c->store));
            if (r)
                freeReplyObject (r);
            outbox_reply (c, rid, rid_len, 1, msg, true);
            return;
        }
        state = r->type == REDIS_REPLY_STRING ? r->str : NULL;
    }
    if (!state)
        snprintf (msg, sizeof msg, "no job %llu (see cgq status)", (unsigned long long) id);
    else if (!strcmp (state, cgq_jstate_names[CGQ_JOB_FINISHED]))
        snprintf (msg, sizeof msg,
                  "job %llu is finished: a finished job cannot be reopened, nothing was "
                  "changed (submit a new job for more samples)",
                  (unsigned long long) id);
    else
        snprintf (msg, sizeof msg,
                  "job %llu is %s: only a running job can be updated, nothing was changed",
                  (unsigned long long) id, state);
    if (r)
        freeReplyObject (r);
    outbox_reply (c, rid, rid_len, 2, msg, true);
}

// s_update_samples checks samples for j and, when they fit, sets
// spec->search.samples and the searcher's total. Returns 0, or -1 with msg
// saying why nothing changed.
static int
s_update_samples (coord_t *c, job_t *j, uint64_t samples, char *msg, size_t msglen)
{
    cgq_spec_t *spec = j->spec;
    cgq_search_alg_t alg = spec->search.algorithm;
    const char *name = cgq_spec_search_name (alg);
    if (alg == CGQ_SEARCH_PBT) {
        snprintf (msg, msglen,
                  "job %llu searches with algorithm pbt: its size is search.population and the "
                  "exploits, not samples (change --concurrency only, or submit a new job)",
                  (unsigned long long) j->id);
        return -1;
    }
    if (alg == CGQ_SEARCH_GRID || alg == CGQ_SEARCH_LIST) {
        snprintf (msg, msglen,
                  "job %llu searches with algorithm %s: its trials are the %s of its space, so "
                  "its samples cannot change (change --concurrency only, or submit a new job)",
                  (unsigned long long) j->id, name,
                  alg == CGQ_SEARCH_GRID ? "points of the grid" : "points of search.points");
        return -1;
    }
    uint64_t old = spec->search.samples;
    bool perm = cgq_space_without_replacement (spec);
    spec->search.samples = samples;
    char why[512];
    uint64_t d = 0;
    if (perm != cgq_space_without_replacement (spec) && cgq_space_sampled_size (spec, &d) == 0 &&
        d > 1) { // d == 1: the grid axes alone make each point, drawn either way
        snprintf (msg, msglen,
                  "job %llu: its space has %llu distinct points, which random search draws "
                  "without replacement while samples <= %llu: samples %llu -> %llu would change "
                  "which point each trial gets; nothing was changed",
                  (unsigned long long) j->id, (unsigned long long) d, (unsigned long long) d,
                  (unsigned long long) old, (unsigned long long) samples);
        spec->search.samples = old;
        return -1;
    }
    if (cgq_space_check_limit (spec, (uint64_t) c->cfg.max_trials, why, sizeof why) < 0) {
        snprintf (msg, msglen, "job %llu: %s; nothing was changed", (unsigned long long) j->id,
                  why);
        spec->search.samples = old;
        return -1;
    }
    uint64_t total = 0;
    cgq_space_count (spec, &total);
    uint64_t given = cgq_searcher_suggested (j->searcher) + cgq_searcher_waiting (j->searcher);
    if (total < given || cgq_searcher_recount (j->searcher) < 0) {
        snprintf (msg, msglen,
                  "job %llu: samples %llu would make %llu trial(s), fewer than the %llu already "
                  "suggested; give --samples of at least %llu%s; nothing was changed",
                  (unsigned long long) j->id, (unsigned long long) samples,
                  (unsigned long long) total, (unsigned long long) given,
                  (unsigned long long) (total ? (given + total / samples - 1) / (total / samples)
                                              : given),
                  alg == CGQ_SEARCH_RANDOM && total / samples > 1 ? " (samples are per grid point)"
                                                                  : "");
        spec->search.samples = old;
        return -1;
    }
    return 0;
}

// s_update changes a running job's search.samples and search.concurrency
// (cgq update). Both take effect at once (dispatch runs again this turn);
// the job hash's samples, concurrency and total and a job.updated event go
// into this turn's batch, and the Reply out after it: recovery applies the
// stored values over the spec, so a restart keeps them.
static void
s_update (coord_t *c, const char *rid, size_t rid_len, const Cgq__UpdateJob *m)
{
    char msg[1024];
    job_t *j = jobs_find (c, m->job);
    if (!j) {
        s_update_over (c, rid, rid_len, m->job, NULL);
        return;
    }
    if (j->state != CGQ_JOB_RUNNING || j->ended) {
        s_update_over (c, rid, rid_len, m->job, cgq_jstate_names[j->state]);
        return;
    }
    if (!m->samples && !m->set_concurrency) {
        outbox_reply (c, rid, rid_len, 2,
                      "nothing to update (give --samples N, --concurrency C or both)", true);
        return;
    }
    if (c->redis_retry_ms) {
        snprintf (msg, sizeof msg,
                  "Redis at %s takes no writes now (%s%s): nothing was changed; update the job "
                  "again once Redis is back",
                  cgq_store_url (c->store), s_redis_why (c), s_redis_hint (c));
        outbox_reply (c, rid, rid_len, 1, msg, true);
        return;
    }
    cgq_spec_t *spec = j->spec;
    uint64_t old_samples = spec->search.samples;
    uint32_t old_conc = spec->search.concurrency;
    if (m->samples && m->samples != old_samples &&
        s_update_samples (c, j, m->samples, msg, sizeof msg) < 0) {
        outbox_reply (c, rid, rid_len, 2, msg, true);
        return;
    }
    if (m->set_concurrency)
        spec->search.concurrency = m->concurrency;

    char jkey[64];
    cgq_key_job (jkey, sizeof jkey, j->id);
    cgq_hset_t h;
    cgq_hset_init (&h, jkey);
    cgq_hset_u64 (&h, CGQ_JF_SAMPLES, spec->search.samples);
    cgq_hset_u64 (&h, CGQ_JF_CONCURRENCY, spec->search.concurrency);
    cgq_hset_u64 (&h, CGQ_JF_TOTAL, cgq_searcher_total (j->searcher));
    cgq_hset_queue (&h, c->store);
    j->dirty = true; // the pending count holds the trials not suggested yet
    c->sched_dirty = true;

    char a[24], b[24], detail[160];
    snprintf (detail, sizeof detail, "samples %llu -> %llu, concurrency %s -> %s",
              (unsigned long long) old_samples, (unsigned long long) spec->search.samples,
              s_conc (a, sizeof a, old_conc), s_conc (b, sizeof b, spec->search.concurrency));
    jobs_event (c, j, "job.updated", detail);
    snprintf (msg, sizeof msg, "job %llu: %s", (unsigned long long) j->id, detail);
    cgq_info ("%s (%llu trials, %llu suggested)", msg,
              (unsigned long long) cgq_searcher_total (j->searcher),
              (unsigned long long) cgq_searcher_suggested (j->searcher));
    jobs_check_done (c, j); // samples lowered to the trials already done: it ends now
    outbox_reply (c, rid, rid_len, 0, msg, false);
}

// s_change: what a request that changes state would leave undone if
// refused, or NULL for one that changes nothing (Ping) or says it itself (a
// submit, after its spec is checked).
static const char *
s_change (const cgq_env_t *env)
{
    switch (env->body_case) {
    case CGQ__ENVELOPE__BODY_CANCEL_JOB:
        return "the job was not cancelled";
    case CGQ__ENVELOPE__BODY_PAUSE_JOB:
        return env->pause_job->resume ? "the job was not resumed" : "the job was not paused";
    case CGQ__ENVELOPE__BODY_ENABLE_DEVICE:
        return "the device was not enabled";
    case CGQ__ENVELOPE__BODY_SUGGEST:
        return "no point was queued";
    case CGQ__ENVELOPE__BODY_UPDATE_JOB:
        return "the job was not updated";
    default:
        return NULL;
    }
}

void
control_message (coord_t *c, const char *rid, size_t rid_len, cgq_env_t *env)
{
    const char *what = s_change (env);
    if (what && s_no_writes (c, rid, rid_len, what, "try again"))
        return;
    switch (env->body_case) {
    case CGQ__ENVELOPE__BODY_SUBMIT_JOB:
        s_submit (c, rid, rid_len, env->submit_job);
        break;
    case CGQ__ENVELOPE__BODY_CANCEL_JOB:
        s_cancel (c, rid, rid_len, env->cancel_job->job);
        break;
    case CGQ__ENVELOPE__BODY_PAUSE_JOB:
        s_pause (c, rid, rid_len, env->pause_job);
        break;
    case CGQ__ENVELOPE__BODY_ENABLE_DEVICE:
        s_enable (c, rid, rid_len, env->enable_device);
        break;
    case CGQ__ENVELOPE__BODY_SUGGEST:
        s_suggest (c, rid, rid_len, env->suggest);
        break;
    case CGQ__ENVELOPE__BODY_UPDATE_JOB:
        s_update (c, rid, rid_len, env->update_job);
        break;
    case CGQ__ENVELOPE__BODY_PING: {
        // At once: it says only that this coordinator answers, which must
        // stay true while Redis does not (docs/protocol.md).
        char msg[64];
        snprintf (msg, sizeof msg, "epoch %" PRIu64, c->epoch);
        outbox_reply (c, rid, rid_len, 0, msg, true);
        break;
    }
    default:
        outbox_reply (c, rid, rid_len, 2, "unexpected message on the control socket", false);
    }
}
