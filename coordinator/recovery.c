// recovery: jobs and trials back from Redis.
#include "recovery.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "early_stop.h"
#include "hyperband.h"
#include "jobs.h"
#include "log.h"
#include "nodes.h"
#include "passes.h"

void
recovery_nodes (coord_t *c)
{
    redisReply *ids = cgq_store_command (c->store, "SMEMBERS %s", CGQ_KEY_NODES);
    if (!ids || ids->type != REDIS_REPLY_ARRAY) {
        if (ids)
            freeReplyObject (ids);
        return;
    }
    char key[300];
    for (size_t i = 0; i < ids->elements; i++)
        cgq_store_append (c->store, "HGET %s %s",
                          cgq_key_node (key, sizeof key, ids->element[i]->str), CGQ_NF_STATE);
    for (size_t i = 0; i < ids->elements; i++) {
        redisReply *st = cgq_store_get_reply (c->store);
        if (!st)
            break;
        if (st->type == REDIS_REPLY_STRING && strcmp (st->str, CGQ_NODE_ALIVE) == 0) {
            cgq_hset_t h;
            cgq_hset_init (&h, cgq_key_node (key, sizeof key, ids->element[i]->str));
            cgq_hset_str (&h, CGQ_NF_STATE, CGQ_NODE_UNKNOWN);
            cgq_hset_u64 (&h, CGQ_NF_RUNNING, 0);
            cgq_hset_queue (&h, c->store);
            c->poke = cgq_xrealloc (c->poke, (c->npoke + 1) * sizeof *c->poke);
            c->poke[c->npoke++] = cgq_xstrdup (ids->element[i]->str);
            zhashx_update (c->returning, ids->element[i]->str,
                           (void *) (intptr_t) (cgq_now_ms () + RETURNING_MS (c)));
        }
        freeReplyObject (st);
    }
    freeReplyObject (ids);
}

// s_gpu_indices parses the "0,1" GPU list of a running trial.
static void
s_gpu_indices (trial_t *t, const char *g)
{
    if (!g || !*g)
        return;
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

// s_replay gives a searcher that learns every trial it suggested before the
// restart (read back with pipelined HGETALLs, in chunks), so the search
// continues where it stopped: its saved state stays small however many
// trials the job has. Returns 0, -1 on a Redis error, 1 if the searcher
// refused a trial (err says why).
static int
s_replay (coord_t *c, job_t *j, char *err, size_t errlen)
{
    uint64_t n = cgq_searcher_suggested (j->searcher);
    const uint64_t chunk = 512;
    for (uint64_t base = 0; base < n; base += chunk) {
        uint64_t m = n - base < chunk ? n - base : chunk;
        char tkey[128];
        for (uint64_t i = 0; i < m; i++)
            if (cgq_store_append (c->store, "HGETALL %s",
                                  cgq_key_trial (tkey, sizeof tkey, j->id, base + i)) < 0) {
                snprintf (err, errlen, "%s", cgq_store_errstr (c->store));
                return -1;
            }
        int rc = 0;
        for (uint64_t i = 0; i < m; i++) {
            redisReply *h = cgq_store_get_reply (c->store);
            if (!h) {
                snprintf (err, errlen, "%s", cgq_store_errstr (c->store));
                return -1;
            }
            const char *ps = cgq_hash_get (h, CGQ_TF_PARAMS);
            json_t *params = ps ? json_loads (ps, 0, NULL) : NULL;
            if (rc == 0 && params) {
                int st = cgq_tstate_parse (cgq_hash_get (h, CGQ_TF_STATE));
                const char *ms = cgq_hash_get (h, CGQ_TF_METRICS);
                json_t *metrics = NULL;
                double value = NAN;
                cgq_replay_t outcome = CGQ_REPLAY_ACTIVE;
                if (st == CGQ_TRIAL_SUCCEEDED) {
                    outcome = CGQ_REPLAY_SUCCEEDED;
                    metrics = ms ? json_loads (ms, 0, NULL) : NULL;
                    cgq_hash_num (h, CGQ_TF_VALUE, &value);
                }
                else if (st == CGQ_TRIAL_STOPPED) {
                    // Observed with its last report, as jobs.c did when it stopped it.
                    metrics = ms ? json_loads (ms, 0, NULL) : NULL;
                    outcome = jobs_stopped_value (j, metrics, &value) ? CGQ_REPLAY_SUCCEEDED
                                                                      : CGQ_REPLAY_FAILED;
                }
                else if (st >= 0 && cgq_tstate_terminal ((cgq_tstate_t) st))
                    outcome = CGQ_REPLAY_FAILED;
                if (cgq_searcher_replay (j->searcher, base + i, params, metrics, value, outcome,
                                         err, errlen)
                    < 0)
                    rc = 1;
                json_decref (metrics);
            }
            json_decref (params);
            freeReplyObject (h);
        }
        if (rc)
            return rc;
    }
    return 0;
}

// s_refill gives an external job's searcher back the points it was sent and
// had not used when the last coordinator stopped: cgq:job:{J}:suggestions
// from index suggested on (the list and the searcher's state go out in the
// same batches, so they agree). Returns 0, -1 on a Redis error, 1 if a
// point no longer fits the space (err says why).
static int
s_refill (coord_t *c, job_t *j, char *err, size_t errlen)
{
    if (!cgq_searcher_external (j->searcher))
        return 0;
    char key[64];
    uint64_t from = cgq_searcher_suggested (j->searcher);
    redisReply *r = cgq_store_command (c->store, "LRANGE %s %llu %llu",
                                       cgq_key_suggestions (key, sizeof key, j->id),
                                       (unsigned long long) from,
                                       (unsigned long long) (from + CGQ_SEARCH_EXTERNAL_MAX_WAITING));
    if (!r || r->type != REDIS_REPLY_ARRAY) {
        snprintf (err, errlen, "%s", r && r->str ? r->str : cgq_store_errstr (c->store));
        if (r)
            freeReplyObject (r);
        return -1;
    }
    int rc = 0;
    for (size_t i = 0; i < r->elements && rc == 0; i++) {
        json_t *params = json_loads (r->element[i]->str ? r->element[i]->str : "", 0, NULL);
        char why[512] = "not JSON";
        json_t *point = params ? cgq_searcher_point (j->searcher, params, why, sizeof why) : NULL;
        json_decref (params);
        if (!point) {
            snprintf (err, errlen, "suggestion %llu in %s: %s",
                      (unsigned long long) (from + i), key, why);
            rc = 1;
        }
        else
            cgq_searcher_give (j->searcher, point);
    }
    freeReplyObject (r);
    return rc;
}

static int
s_trials (coord_t *c, job_t *j)
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
        const char *params = cgq_hash_get (h, CGQ_TF_PARAMS);
        json_t *pj = params ? json_loads (params, 0, NULL) : NULL;
        if (!pj) {
            freeReplyObject (h);
            continue;
        }
        trial_t *t = jobs_trial_insert (j, strtoull (ids->element[i]->str, NULL, 10), pj);
        t->attempt = (uint32_t) cgq_hash_u64 (h, CGQ_TF_ATTEMPT);
        // A multi-stage trial resumes at its stage, with the metrics of the
        // stages that finished (written with the stage that advanced it).
        uint64_t stage = cgq_hash_u64 (h, CGQ_TF_STAGE);
        t->stage = stage < j->nstages ? (uint32_t) stage : 0;
        t->stage_base = (uint32_t) cgq_hash_u64 (h, CGQ_TF_STAGE_BASE);
        const char *stages = cgq_hash_get (h, CGQ_TF_STAGES);
        if (stages && *stages && t->stage > 0) {
            t->stage_metrics = json_loads (stages, 0, NULL);
            if (!json_is_object (t->stage_metrics)) {
                json_decref (t->stage_metrics);
                t->stage_metrics = NULL;
            }
        }
        int st = cgq_tstate_parse (cgq_hash_get (h, CGQ_TF_STATE));
        t->state = st < 0 ? CGQ_TRIAL_PENDING : (tstate_t) st;
        if (t->state == CGQ_TRIAL_STALE) {
            // Its node was silent when the last coordinator stopped: running
            // in memory, still counted stale until its node adopts it.
            t->state = CGQ_TRIAL_RUNNING;
            t->stale = true;
        }
        const char *error = cgq_hash_get (h, CGQ_TF_ERROR);
        t->has_error = error && *error; // cleared when a later attempt succeeds
        // What its next attempt may resume from (a pending trial's was
        // judged when its last attempt ended).
        t->ckpts = checkpoint_list_parse (cgq_hash_get (h, CGQ_TF_CHECKPOINTS));
        // The early stopper's view of it: where it was last judged.
        early_stop_trial_resume (j->stopper, t->id, cgq_hash_get (h, CGQ_TF_EARLY_STOP));
        // measure.passes: its pass, and whether it waits for the first pass to be out.
        bool held = passes_recover (j, t, h);
        if (t->state == CGQ_TRIAL_RUNNING) {
            const char *node = cgq_hash_get (h, CGQ_TF_NODE);
            t->expect_node = cgq_xstrdup (node ? node : "?");
            const char *sent = cgq_hash_get (h, CGQ_TF_ASSIGN);
            unsigned long long e, s, i;
            if (sent && sscanf (sent, "%llu:%llu:%llu", &e, &s, &i) == 3) {
                t->sent_epoch = e;
                t->sent_seq = s;
                t->sent_instance = i;
            }
            t->adopt_deadline_ms = deadline;
            c->adopt_deadline_ms = deadline;
            // Reached its hyperband budget, not paused yet: at its next checkpoint.
            t->hb_pause = j->hb && hyperband_reached (j->hb, t->id);
            // Remember the GPU indices it was given; adoption maps them back.
            s_gpu_indices (t, cgq_hash_get (h, CGQ_TF_GPUS));
            // And its device: adoption gives it that one, not another idle
            // one (no Redis read here: replies of this pipeline are pending).
            const char *dev = cgq_hash_get (h, CGQ_TF_DEVICE);
            if (dev && *dev && TRIAL_REQ (t)->on) // a device stage (not a worker stage after one)
                t->device = nodes_device_ref (c, dev);
        }
        else {
            // A blocked job keeps its unschedulable trials until a node fits
            // (jobs_set_blocked); without the reason they are plain pending.
            if (t->state == CGQ_TRIAL_UNSCHEDULABLE && !j->blocked)
                jobs_set_state (c, t, CGQ_TRIAL_PENDING, NULL, 0);
            // A paused trial waits for cgq resume, unqueued (control_pause).
            if (t->state != CGQ_TRIAL_PAUSED && !held)
                jobs_enqueue (j, t, false);
        }
        freeReplyObject (h);
    }
    freeReplyObject (ids);
    return rc;
}

// s_stopper gives the job's early stopper back its records: the index of
// buckets, then each bucket's members with their values (ascending, so
// each goes in at the end), pipelined in chunks.
static int
s_stopper (coord_t *c, job_t *j)
{
    if (!j->stopper)
        return 0;
    char key[128];
    redisReply *ats
        = cgq_store_command (c->store, "ZRANGE %s 0 -1", cgq_key_rungs (key, sizeof key, j->id));
    if (!ats)
        return -1;
    size_t n = ats->type == REDIS_REPLY_ARRAY ? ats->elements : 0;
    const size_t chunk = 256;
    int rc = 0;
    for (size_t base = 0; base < n && rc == 0; base += chunk) {
        size_t m = n - base < chunk ? n - base : chunk;
        for (size_t i = 0; i < m; i++)
            if (cgq_store_append (c->store, "ZRANGE %s 0 -1 WITHSCORES",
                                  cgq_key_rung (key, sizeof key, j->id,
                                                strtod (ats->element[base + i]->str, NULL)))
                < 0)
                rc = -1;
        for (size_t i = 0; i < m && rc == 0; i++) {
            redisReply *r = cgq_store_get_reply (c->store);
            if (!r) {
                rc = -1;
                break;
            }
            double at = strtod (ats->element[base + i]->str, NULL);
            for (size_t k = 0; r->type == REDIS_REPLY_ARRAY && k + 1 < r->elements; k += 2) {
                // "TRIAL", or "TRIAL:V1:V2..." for multi-objective asha.
                char *end;
                uint64_t id = strtoull (r->element[k]->str, &end, 10);
                size_t m = early_stop_nobjectives (j->stopper), got = 0;
                double v[CGQ_SPEC_MAX_OBJECTIVES];
                while (*end == ':' && got < m && got < CGQ_SPEC_MAX_OBJECTIVES)
                    v[got++] = strtod (end + 1, &end);
                if (m > 1 && got == m && !*end)
                    early_stop_restore_multi (j->stopper, at, id, v);
                else if (m <= 1)
                    early_stop_restore (j->stopper, at, id, strtod (r->element[k + 1]->str, NULL));
            }
            freeReplyObject (r);
        }
    }
    freeReplyObject (ats);
    return rc;
}

// s_warm feeds a job's warm-start observations (cgq:job:{J}:warm, as
// submitted) to its new searcher, before the replay, as at submit.
static int
s_warm (coord_t *c, uint64_t id, cgq_searcher_t *searcher, char *err, size_t errlen)
{
    char key[64];
    redisReply *r = cgq_store_command (c->store, "GET %s", cgq_key_warm (key, sizeof key, id));
    if (!r || r->type != REDIS_REPLY_STRING) {
        snprintf (err, errlen, "its warm-start observations (%s) are missing", key);
        if (r)
            freeReplyObject (r);
        return -1;
    }
    int rc = cgq_searcher_warm_json (searcher, r->str, err, errlen);
    freeReplyObject (r);
    return rc;
}

// s_front reads a multi-objective job's Pareto front back into memory.
static int
s_front (coord_t *c, job_t *j)
{
    if (j->spec->nobjectives < 2)
        return 0;
    char key[64];
    redisReply *h
        = cgq_store_command (c->store, "HGETALL %s", cgq_key_pareto (key, sizeof key, j->id));
    if (!h)
        return -1;
    for (size_t i = 0; h->type == REDIS_REPLY_ARRAY && i + 1 < h->elements; i += 2)
        if (jobs_front_restore (j, strtoull (h->element[i]->str, NULL, 10), h->element[i + 1]->str)
            < 0)
            cgq_twarn (j->id, strtoull (h->element[i]->str, NULL, 10), 0,
                       "its Pareto front entry is malformed; dropped");
    freeReplyObject (h);
    return 0;
}

int
recovery_jobs (coord_t *c)
{
    redisReply *ids = cgq_store_command (c->store, "ZRANGE %s 0 -1", CGQ_KEY_JOBS);
    if (!ids)
        return -1;
    int recovered = 0;
    for (size_t i = 0; ids->type == REDIS_REPLY_ARRAY && i < ids->elements; i++) {
        uint64_t id = strtoull (ids->element[i]->str, NULL, 10);
        if (id > c->max_job_id)
            c->max_job_id = id; // never handed out again (control.c)
        char jkey[64];
        cgq_key_job (jkey, sizeof jkey, id);
        redisReply *h = cgq_store_command (c->store, "HGETALL %s", jkey);
        if (!h)
            break;
        cgq_job_rec_t *rec = cgq_job_rec_from (id, h);
        // What `cgq update` changed (control.c) goes over the spec's own values.
        bool has_samples = cgq_hash_get (h, CGQ_JF_SAMPLES) != NULL;
        bool has_conc = cgq_hash_get (h, CGQ_JF_CONCURRENCY) != NULL;
        uint64_t samples = cgq_hash_u64 (h, CGQ_JF_SAMPLES);
        uint64_t conc = cgq_hash_u64 (h, CGQ_JF_CONCURRENCY);
        const char *hbs = cgq_hash_get (h, CGQ_JF_HYPERBAND);
        char *hb_json = hbs ? cgq_xstrdup (hbs) : NULL;
        freeReplyObject (h);
        if (strcmp (rec->state, cgq_jstate_names[CGQ_JOB_RUNNING]) != 0) {
            cgq_job_rec_destroy (&rec);
            free (hb_json);
            continue;
        }
        char err[1024];
        cgq_spec_t *spec = *rec->spec ? cgq_spec_parse (rec->spec, strlen (rec->spec),
                                                        *rec->spec_path ? rec->spec_path : "spec",
                                                        err, sizeof err)
                                      : NULL;
        if (spec && has_samples && samples > 0)
            spec->search.samples = samples;
        if (spec && has_conc)
            spec->search.concurrency = (uint32_t) conc;
        json_t *st = *rec->searcher ? json_loads (rec->searcher, 0, NULL) : NULL;
        cgq_searcher_t *searcher = spec ? cgq_searcher_new (spec, st, err, sizeof err) : NULL;
        json_decref (st);
        if (searcher && (spec->search.nwarm_jobs || spec->search.warm_points)
            && s_warm (c, id, searcher, err, sizeof err) < 0)
            cgq_searcher_destroy (&searcher);
        if (!searcher) {
            cgq_error ("job %" PRIu64 " cannot be resumed: %s; marking it failed", id,
                       spec ? err : "its spec no longer parses");
            cgq_hset_t hs;
            cgq_hset_init (&hs, jkey);
            cgq_hset_str (&hs, CGQ_JF_STATE, cgq_jstate_names[CGQ_JOB_FINISHED]);
            cgq_hset_str (&hs, CGQ_JF_ERROR, "could not be resumed after a coordinator restart");
            cgq_hset_queue (&hs, c->store);
            cgq_spec_destroy (&spec);
            cgq_job_rec_destroy (&rec);
            free (hb_json);
            continue;
        }
        job_t *j = jobs_add (c, id, spec, searcher, rec->spec_dir);
        memcpy (j->counts, rec->counts, sizeof j->counts);
        j->created = rec->created;
        if (rec->blocked) {
            j->blocked = cgq_xstrdup (rec->blocked);
            j->blocked_since = rec->blocked_since; // blocked_timeout counts on (blocked.c)
        }
        if (j->hb && hb_json) { // hyperband's brackets, as the last turn left them
            const cgq_spec_t *sp = j->spec;
            hyperband_t *hb = hyperband_load ((double) sp->early_stop.max, sp->early_stop.reduction,
                                              sp->early_stop.brackets,
                                              sp->early_stop.mode >= 0 ? 1 : -1, hb_json);
            if (hb) {
                hyperband_destroy (&j->hb);
                j->hb = hb;
                j->hb_check = true;
            }
            else
                cgq_warn ("job %" PRIu64 ": its hyperband state does not load; its brackets "
                          "start afresh", id);
        }
        free (hb_json);
        if (rec->paused) // cgq pause, written in the batch that decided it
            j->paused = !strcmp (rec->paused, "now") ? JOBS_PAUSE_NOW : JOBS_PAUSE_CHECKPOINT;
        if (rec->has_best) {
            j->best_trial = (int64_t) rec->best_trial;
            j->best_value = rec->best_value;
        }
        cgq_job_rec_destroy (&rec);
        int refill = 0;
        if ((cgq_searcher_needs_history (searcher) && s_replay (c, j, err, sizeof err) != 0) ||
            (refill = s_refill (c, j, err, sizeof err)) > 0) {
            cgq_error ("job %" PRIu64 " cannot be resumed: %s; marking it finished", id, err);
            cgq_hset_t hs;
            cgq_hset_init (&hs, jkey);
            cgq_hset_str (&hs, CGQ_JF_STATE, cgq_jstate_names[CGQ_JOB_FINISHED]);
            cgq_hset_str (&hs, CGQ_JF_ERROR, "could not be resumed after a coordinator restart");
            cgq_hset_queue (&hs, c->store);
            j->state = CGQ_JOB_FINISHED;
            j->ended = true; // freed by jobs_reap with no trial loaded
            continue;
        }
        if (refill < 0 || s_stopper (c, j) < 0 || s_front (c, j) < 0 || s_trials (c, j) < 0) {
            freeReplyObject (ids);
            return -1;
        }
        j->running = (uint32_t) (j->counts[CGQ_TRIAL_RUNNING] + j->counts[CGQ_TRIAL_STALE]);
        // The hash counts trials not created yet as pending; memory does not.
        uint64_t never = jobs_unsuggested (j);
        j->counts[CGQ_TRIAL_PENDING] -= never < j->counts[CGQ_TRIAL_PENDING]
                                            ? never
                                            : j->counts[CGQ_TRIAL_PENDING];
        char waiting[64] = "";
        if (cgq_searcher_external (searcher))
            snprintf (waiting, sizeof waiting, ", %llu suggestion(s) waiting",
                      (unsigned long long) cgq_searcher_waiting (searcher));
        cgq_info ("resumed job %" PRIu64 " (%s): %zu active trial(s), %llu suggested%s", id,
                  j->name, zhashx_size (j->trials),
                  (unsigned long long) cgq_searcher_suggested (searcher), waiting);
        recovered++;
        jobs_check_done (c, j);
    }
    freeReplyObject (ids);
    return recovered;
}
