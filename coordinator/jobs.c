// jobs: the job and trial state machine.
#include "jobs.h"
#include "jobs_impl.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "early_stop.h"
#include "hist.h"
#include "hyperband.h"
#include "json.h"
#include "log.h"
#include "notify.h"
#include "nodes.h"
#include "outbox.h"
#include "passes.h"
#include "pareto.h"
#include "yamldoc.h"

static void s_hb_turn (coord_t *c, job_t *j);

// --- trial table: id -> trial, keyed by a pointer to the trial's own id ----

static size_t
s_id_hash (const void *key)
{
    uint64_t k = *(const uint64_t *) key;
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (size_t) k;
}

static int
s_id_cmp (const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
    return x < y ? -1 : x > y;
}

static zhashx_t *
s_trials_new (void)
{
    zhashx_t *h = zhashx_new ();
    zhashx_set_key_hasher (h, s_id_hash);
    zhashx_set_key_comparator (h, s_id_cmp);
    zhashx_set_key_duplicator (h, NULL);
    zhashx_set_key_destructor (h, NULL);
    return h;
}

// s_events_flush queues j's grouped trial events of this turn: the
// successes first (their slots made room for the starts), then the starts.
static void
s_events_flush (coord_t *c, job_t *j)
{
    cgq_buf_t *bufs[2] = {&j->ev_succeeded, &j->ev_running};
    const char *types[2] = {"trial.succeeded", "trial.running"};
    for (int k = 0; k < 2; k++) {
        if (!bufs[k]->len)
            continue;
        cgq_keyspace_event_trials (c->store, types[k], j->id, bufs[k]->data, bufs[k]->len - 1);
        cgq_buf_reset (bufs[k]);
    }
}

// s_event_group adds "TRIAL:ATTEMPT[@NODE] " to one of j's grouped events.
static void
s_event_group (cgq_buf_t *b, const trial_t *t, const char *node)
{
    char num[24];
    size_t nlen = node ? strlen (node) : 0;
    cgq_buf_reserve (b, 2 * sizeof num + nlen + 3);
    cgq_buf_puts (b, cgq_fmt_u64 (num, t->id));
    cgq_buf_append (b, ":", 1);
    cgq_buf_puts (b, cgq_fmt_u64 (num, t->attempt));
    if (node) {
        cgq_buf_append (b, "@", 1);
        cgq_buf_append (b, node, nlen);
    }
    cgq_buf_append (b, " ", 1);
}

// jobs_trial_event queues one event of job j (trial < 0: of the job itself), after
// the job's grouped events so far.
void
jobs_trial_event (coord_t *c, job_t *j, const char *type, int64_t trial, const char *node,
         uint32_t attempt, const char *detail)
{
    s_events_flush (c, j);
    cgq_keyspace_event (c->store, type, j->id, trial, node, attempt, detail);
}

void
jobs_event (coord_t *c, job_t *j, const char *type, const char *detail)
{
    jobs_trial_event (c, j, type, -1, NULL, 0, detail);
}

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
    return j ? zhashx_lookup (j->trials, &trial) : NULL;
}

static void
s_ids_push (ids_t *l, uint64_t id)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->v = cgq_xrealloc (l->v, l->cap * sizeof *l->v);
    }
    l->v[l->n++] = id;
}

// s_ids_remove takes id out of l (order not kept); false when not there.
// Searched from the end: the ids of a turn are mostly ended in order.
static bool
s_ids_remove (ids_t *l, uint64_t id)
{
    for (size_t i = l->n; i-- > 0;)
        if (l->v[i] == id) {
            l->v[i] = l->v[--l->n];
            return true;
        }
    return false;
}

static void
s_trial_free (trial_t *t)
{
    if (!t)
        return;
    if (t->unwritten) { // never persisted: nor is its membership of the active set
        t->job->unwritten--;
        s_ids_remove (&t->job->act_add, t->id);
    }
    early_stop_forget (t->job->stopper, t->id);
    json_decref (t->params);
    json_decref (t->stage_metrics);
    json_decref (t->ckpts);
    free (t->params_json);
    free (t->gpus);
    free (t->expect_node);
    free (t->pass1);
    free (t);
}

// s_trials_list returns j's trials as an array (caller frees), so that the
// caller may end some of them while walking it.
static trial_t **
s_trials_list (job_t *j, size_t *n)
{
    *n = zhashx_size (j->trials);
    trial_t **all = cgq_xcalloc (*n ? *n : 1, sizeof *all);
    size_t k = 0;
    for (trial_t *t = zhashx_first (j->trials); t && k < *n; t = zhashx_next (j->trials))
        all[k++] = t;
    *n = k;
    return all;
}

void
jobs_each_trial (job_t *j, void (*fn) (coord_t *c, trial_t *t, void *arg), coord_t *c, void *arg)
{
    size_t n;
    trial_t **all = s_trials_list (j, &n);
    for (size_t i = 0; i < n; i++)
        fn (c, all[i], arg);
    free (all);
}

static void
s_job_free (job_t *j)
{
    size_t n;
    trial_t **all = s_trials_list (j, &n);
    for (size_t i = 0; i < n; i++)
        s_trial_free (all[i]);
    free (all);
    zhashx_destroy (&j->trials);
    hyperband_destroy (&j->hb);
    early_stop_destroy (&j->stopper);
    free (j->front_ids);
    free (j->front_vals);
    free (j->act_add.v);
    free (j->act_rem.v);
    free (j->lb_ids.v);
    free (j->lb_vals);
    cgq_buf_fini (&j->ev_succeeded);
    cgq_buf_fini (&j->ev_running);
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

void
jobs_reap (coord_t *c)
{
    job_t **pp = &c->jobs;
    while (*pp) {
        job_t *j = *pp;
        if (!j->ended) {
            pp = &j->next;
            continue;
        }
        *pp = j->next;
        if (c->rr == j)
            c->rr = j->next;
        s_job_free (j);
        c->sched_dirty = true;
    }
}

job_t *
jobs_add (coord_t *c, uint64_t id, cgq_spec_t *spec, cgq_searcher_t *searcher,
          const char *spec_dir)
{
    job_t *j = cgq_xcalloc (1, sizeof *j);
    j->id = id;
    j->spec = spec;
    j->searcher = searcher;
    j->name = cgq_xstrdup (spec->name ? spec->name : "job");
    j->spec_dir = cgq_xstrdup (spec_dir ? spec_dir : "");
    j->best_trial = -1;
    j->best_value = NAN;
    j->trials = s_trials_new ();
    cgq_buf_init (&j->ev_succeeded);
    cgq_buf_init (&j->ev_running);
    j->stopper = early_stop_new (spec);
    if (spec->early_stop.algorithm == CGQ_EARLY_STOP_HYPERBAND)
        j->hb = hyperband_new ((double) spec->early_stop.max, spec->early_stop.reduction,
                               spec->early_stop.brackets, spec->early_stop.mode >= 0 ? 1 : -1);
    j->nstages = (uint32_t) cgq_spec_nstages (spec);
    for (uint32_t k = 0; k < j->nstages; k++) {
        const cgq_stage_t *st = cgq_spec_stage (spec, k);
        j->req[k].cpu = st->cpu;
        j->req[k].gpu = st->gpu;
        j->req[k].memory = st->memory;
        j->req[k].on = st->on;
        j->req[k].client = st->kind == CGQ_TRIAL_CLIENT ? j->id : 0;
    }
    job_t **pp = &c->jobs;
    while (*pp)
        pp = &(*pp)->next;
    *pp = j;
    return j;
}

void
jobs_submitted (coord_t *c, job_t *j, const char *yaml, const char *path, uint64_t total)
{
    const cgq_spec_t *spec = j->spec;
    char jkey[64];
    cgq_key_job (jkey, sizeof jkey, j->id);
    double now = cgq_wall_s ();
    j->created = now;
    cgq_hset_t h;
    cgq_hset_init (&h, jkey);
    cgq_hset_u64 (&h, CGQ_JF_ID, j->id);
    cgq_hset_str (&h, CGQ_JF_NAME, j->name);
    cgq_hset_str (&h, CGQ_JF_STATE, cgq_jstate_names[CGQ_JOB_RUNNING]);
    cgq_hset_str (&h, CGQ_JF_SPEC, yaml);
    cgq_hset_str (&h, CGQ_JF_SPEC_PATH, path);
    cgq_hset_str (&h, CGQ_JF_SPEC_DIR, j->spec_dir);
    cgq_hset_dbl (&h, CGQ_JF_CREATED, now);
    cgq_hset_u64 (&h, CGQ_JF_TOTAL, total);
    cgq_hset_u64 (&h, CGQ_JF_SUGGESTED, 0);
    cgq_hset_str (&h, CGQ_JF_METRIC, spec->objective.metric ? spec->objective.metric : "");
    cgq_hset_str (&h, CGQ_JF_MODE,
                  spec->objective.metric ? (spec->objective.mode > 0 ? "max" : "min") : "");
    for (int k = 0; k < CGQ_TRIAL_NSTATES; k++)
        cgq_hset_u64 (&h, cgq_tstate_names[k], 0);
    cgq_hset_queue (&h, c->store);
    char nowbuf[32];
    cgq_store_cmd (c->store, "ZADD %s %s %llu", CGQ_KEY_JOBS, cgq_fmt_double (nowbuf, now),
                   (unsigned long long) j->id);
    jobs_trial_event (c, j, "job.submitted", -1, NULL, 0, j->name);
    cgq_info ("job %" PRIu64 " (%s) submitted: %llu trials", j->id, j->name,
              (unsigned long long) total);
    c->sched_dirty = true;
}

// --- the pending queue -----------------------------------------------------

void
jobs_enqueue (job_t *j, trial_t *t, bool front)
{
    if (t->queued)
        return;
    uint32_t k = t->stage < j->nstages ? t->stage : 0;
    t->queued = true;
    t->qnext = NULL;
    if (k > 0)
        j->between++;
    if (front) {
        t->qnext = j->qhead[k];
        j->qhead[k] = t;
        if (!j->qtail[k])
            j->qtail[k] = t;
    }
    else {
        if (j->qtail[k])
            j->qtail[k]->qnext = t;
        else
            j->qhead[k] = t;
        j->qtail[k] = t;
    }
}

static trial_t *
s_dequeue (job_t *j, uint32_t k)
{
    trial_t *t = j->qhead[k];
    if (!t)
        return NULL;
    j->qhead[k] = t->qnext;
    if (!j->qhead[k])
        j->qtail[k] = NULL;
    t->qnext = NULL;
    t->queued = false;
    if (k > 0 && j->between)
        j->between--;
    return t;
}

void
jobs_unqueue (job_t *j, trial_t *t)
{
    uint32_t k = t->stage < j->nstages ? t->stage : 0;
    trial_t **pp = &j->qhead[k], *prev = NULL;
    while (*pp && *pp != t) {
        prev = *pp;
        pp = &(*pp)->qnext;
    }
    if (!*pp)
        return;
    *pp = t->qnext;
    if (j->qtail[k] == t)
        j->qtail[k] = prev;
    t->qnext = NULL;
    t->queued = false;
    if (k > 0 && j->between)
        j->between--;
}

bool
jobs_queued (const job_t *j)
{
    for (uint32_t k = 0; k < j->nstages; k++)
        if (j->qhead[k])
            return true;
    return false;
}

// --- transitions -----------------------------------------------------------

void
jobs_set_state (coord_t *c, trial_t *t, tstate_t s, const char **kv, int nkv)
{
    job_t *j = t->job;
    tstate_t old = t->state;
    if (old == s && !nkv && !t->stale && !t->unwritten)
        return;
    char tkey[128];
    cgq_key_trial (tkey, sizeof tkey, j->id, t->id);
    // A stale trial is running in memory and stale in the counts (jobs_set_stale).
    tstate_t counted = t->stale ? CGQ_TRIAL_STALE : old;
    t->stale = false;
    if (counted != s) {
        if (j->counts[counted])
            j->counts[counted]--;
        j->counts[s]++;
    }
    if (old != s) {
        if (old == CGQ_TRIAL_RUNNING && j->running)
            j->running--;
        if (s == CGQ_TRIAL_RUNNING)
            j->running++;
        t->state = s;
        t->adopt_deadline_ms = 0; // no longer a recovered trial awaiting its node
        if (cgq_tstate_terminal (s)) {
            c->stat_ended[s]++;
            cgq_tdebug (j->id, t->id, t->attempt, "%s", cgq_tstate_names[s]);
        }
        else if (s == CGQ_TRIAL_PENDING && old != CGQ_TRIAL_UNSCHEDULABLE)
            t->pending_since_ms = cgq_now_ms ();
    }
    j->dirty = true; // the counts go out once per turn (jobs_write_dirty)
    // The state and the fields that change with it: one HSET per transition.
    // A trial created this turn is written whole here: its creation and its
    // first transition (usually: started) in one HSET.
    cgq_hset_t h;
    cgq_hset_init (&h, tkey);
    bool has_attempt = false;
    if (t->unwritten) {
        cgq_hset_u64 (&h, CGQ_TF_ID, t->id);
        cgq_hset_u64 (&h, CGQ_TF_JOB, j->id);
        cgq_hset_str (&h, CGQ_TF_PARAMS, t->params_json);
    }
    cgq_hset_str (&h, CGQ_TF_STATE, cgq_tstate_names[s]);
    for (int i = 0; i + 1 < nkv; i += 2) {
        cgq_hset_str (&h, kv[i], kv[i + 1]);
        if (strcmp (kv[i], CGQ_TF_ERROR) == 0)
            t->has_error = true;
        else if (strcmp (kv[i], CGQ_TF_ATTEMPT) == 0)
            has_attempt = true;
    }
    if (t->unwritten) {
        if (!has_attempt)
            cgq_hset_u64 (&h, CGQ_TF_ATTEMPT, 0);
        t->unwritten = false;
        j->unwritten--;
    }
    cgq_hset_queue (&h, c->store);
    // Created and ended in the same turn: in the active set never.
    if (cgq_tstate_terminal (s) && !s_ids_remove (&j->act_add, t->id))
        s_ids_push (&j->act_rem, t->id);
}

void
jobs_set_stale (coord_t *c, trial_t *t, bool stale, const char *why)
{
    if (t->state != CGQ_TRIAL_RUNNING || t->stale == stale)
        return;
    job_t *j = t->job;
    tstate_t from = stale ? CGQ_TRIAL_RUNNING : CGQ_TRIAL_STALE;
    tstate_t to = stale ? CGQ_TRIAL_STALE : CGQ_TRIAL_RUNNING;
    if (j->counts[from])
        j->counts[from]--;
    j->counts[to]++;
    t->stale = stale;
    j->dirty = true;
    char tkey[128];
    cgq_key_trial (tkey, sizeof tkey, j->id, t->id);
    cgq_hset_t h;
    cgq_hset_init (&h, tkey);
    cgq_hset_str (&h, CGQ_TF_STATE, cgq_tstate_names[to]);
    cgq_hset_queue (&h, c->store);
    jobs_trial_event (c, j, stale ? "trial.stale" : "trial.resumed", (int64_t) t->id,
                     t->node ? t->node->id : t->expect_node, t->attempt, why);
}

trial_t *
jobs_trial_insert (job_t *j, uint64_t id, json_t *params)
{
    trial_t *t = cgq_xcalloc (1, sizeof *t);
    t->id = id;
    t->job = j;
    t->params = params;
    t->params_json = cgq_json_dumps (params);
    t->state = CGQ_TRIAL_PENDING;
    t->pending_since_ms = cgq_now_ms ();
    zhashx_insert (j->trials, &t->id, t);
    return t;
}

// s_pbt_child: t was just suggested by a pbt searcher. A child of an
// exploit resumes from its donor's checkpoint: that record is its list
// (t->ckpts, so its first Assign restores it, and a restarted coordinator
// reads it back from the hash), and its hash gets its lineage and parent.
static void
s_pbt_child (coord_t *c, trial_t *t)
{
    json_t *rec;
    json_t *lineage = cgq_searcher_pbt_child (t->job->searcher, t->id, &rec);
    if (!lineage)
        return;
    char key[128];
    char *lin = cgq_json_dumps (lineage), *list = NULL, parent[24];
    snprintf (parent, sizeof parent, "%lld",
              (long long) json_integer_value (json_object_get (lineage, "parent")));
    cgq_hset_t h;
    cgq_hset_init (&h, cgq_key_trial (key, sizeof key, t->job->id, t->id));
    cgq_hset_str (&h, CGQ_TF_LINEAGE, lin);
    cgq_hset_str (&h, CGQ_TF_PARENT, parent);
    if (rec) {
        json_decref (t->ckpts);
        t->ckpts = json_pack ("[O]", rec);
        list = cgq_json_dumps (t->ckpts);
        cgq_hset_str (&h, CGQ_TF_CHECKPOINTS, list);
    }
    cgq_hset_queue (&h, c->store);
    free (lin);
    free (list);
}

static trial_t *
s_trial_create (coord_t *c, job_t *j)
{
    uint64_t id;
    json_t *params = cgq_searcher_suggest (j->searcher, &id);
    if (!params)
        return NULL;
    trial_t *t = jobs_trial_insert (j, id, params);
    j->counts[CGQ_TRIAL_PENDING]++;
    s_pbt_child (c, t);
    // Its hash goes out with its first transition (jobs_set_state: every
    // caller starts it, fails it or marks it unschedulable in the same
    // turn), or at the turn's end (s_job_write); its id joins the active set
    // at the turn's end.
    t->unwritten = true;
    j->unwritten++;
    s_ids_push (&j->act_add, id);
    j->dirty = true; // counts, suggested, the searcher's state, the active set
    if (j->hb) { // it joins the bracket being filled
        hyperband_add (j->hb, id);
        j->hb_dirty = true;
    }
    (void) c;
    return t;
}

trial_t *
jobs_next_trial (coord_t *c, job_t *j, uint32_t stage)
{
    trial_t *t = s_dequeue (j, stage);
    return t || stage > 0 ? t : s_trial_create (c, j);
}

// jobs_trial_end removes a terminal trial from memory.
// jobs_stop_on_node asks t's node to stop t's current attempt (a Stop, sent
// after the flush). Nothing when t is on no node.
void
jobs_stop_on_node (coord_t *c, const trial_t *t, const char *reason)
{
    if (!t->node)
        return;
    Cgq__TaskRef ref = CGQ__TASK_REF__INIT;
    ref.job = t->job->id;
    ref.trial = t->id;
    ref.stage = t->stage;
    ref.attempt = t->attempt;
    outbox_stop (c, t->node->id, &ref, reason);
}

void
jobs_trial_end (coord_t *c, trial_t *t)
{
    job_t *j = t->job;
    if (t->node)
        nodes_release (c, t);
    if (t->queued)
        jobs_unqueue (j, t);
    if (j->hb) { // its cohort may be complete without it
        hyperband_ended (j->hb, t->id);
        j->hb_check = j->hb_dirty = true;
    }
    zhashx_delete (j->trials, &t->id);
    s_trial_free (t);
    jobs_check_done (c, j);
}

// s_clear_error removes the error an earlier attempt (or an unschedulable
// spell) left in the trial's hash.
static void
s_clear_error (coord_t *c, trial_t *t)
{
    if (!t->has_error)
        return;
    char tkey[128];
    cgq_store_cmd (c->store, "HDEL %s %s", cgq_key_trial (tkey, sizeof tkey, t->job->id, t->id),
                   CGQ_TF_ERROR);
    t->has_error = false;
}

uint64_t
jobs_unsuggested (const job_t *j)
{
    if (j->state != CGQ_JOB_RUNNING)
        return 0;
    uint64_t total = cgq_searcher_total (j->searcher), sug = cgq_searcher_suggested (j->searcher);
    return total > sug ? total - sug : 0;
}

uint64_t
jobs_count (const job_t *j, int k)
{
    uint64_t v = j->counts[k];
    if (k == CGQ_TRIAL_PENDING)
        v += jobs_unsuggested (j);
    else if (k == CGQ_TRIAL_CANCELLED)
        v += j->dropped;
    return v;
}

// s_sets_write queues the turn's active-set and leaderboard changes of j:
// one SADD, one SREM and one ZADD, each with every member of the turn.
static void
s_sets_write (coord_t *c, job_t *j)
{
    if (j->unwritten) {
        // Created and not yet written (no caller left one so today; kept
        // safe): their hash, pending, as at creation.
        size_t n;
        trial_t **all = s_trials_list (j, &n);
        for (size_t i = 0; i < n; i++)
            if (all[i]->unwritten)
                jobs_set_state (c, all[i], all[i]->state, NULL, 0);
        free (all);
    }
    char key[64];
    const ids_t *sets[2] = {&j->act_add, &j->act_rem};
    const char *cmds[2] = {"SADD", "SREM"};
    cgq_key_active (key, sizeof key, j->id);
    for (int k = 0; k < 2; k++) {
        if (!sets[k]->n)
            continue;
        cgq_store_begin (c->store, 2 + sets[k]->n);
        cgq_store_arg (c->store, cmds[k], 4);
        cgq_store_arg (c->store, key, strlen (key));
        for (size_t i = 0; i < sets[k]->n; i++)
            cgq_store_arg_u64 (c->store, sets[k]->v[i]);
    }
    j->act_add.n = j->act_rem.n = 0;
    if (j->lb_ids.n) {
        cgq_key_leaderboard (key, sizeof key, j->id);
        cgq_store_begin (c->store, 2 + 2 * j->lb_ids.n);
        cgq_store_arg (c->store, "ZADD", 4);
        cgq_store_arg (c->store, key, strlen (key));
        for (size_t i = 0; i < j->lb_ids.n; i++) {
            cgq_store_arg_dbl (c->store, j->lb_vals[i]);
            cgq_store_arg_u64 (c->store, j->lb_ids.v[i]);
        }
        j->lb_ids.n = 0;
    }
}

// s_job_write sets the job's counts, suggested and searcher state (and the
// best, when it changed) to their values in memory: one HSET per job per
// turn however many trials moved, and absolute values, so a batch applied
// twice cannot skew a count. Trials not created yet count as pending (or
// cancelled, after a cancel). The turn's set changes go out first.
static void
s_job_write (coord_t *c, job_t *j)
{
    s_sets_write (c, j);
    char jkey[64];
    cgq_key_job (jkey, sizeof jkey, j->id);
    json_t *st = cgq_searcher_save (j->searcher);
    char *sts = cgq_json_dumps (st);
    json_decref (st);
    cgq_hset_t h;
    cgq_hset_init (&h, jkey);
    for (int k = 0; k < CGQ_TRIAL_NSTATES; k++)
        cgq_hset_u64 (&h, cgq_tstate_names[k], jobs_count (j, k));
    if (j->best_dirty && j->best_trial >= 0) {
        cgq_hset_u64 (&h, CGQ_JF_BEST_TRIAL, (uint64_t) j->best_trial);
        cgq_hset_dbl (&h, CGQ_JF_BEST_VALUE, j->best_value);
    }
    j->best_dirty = false;
    cgq_hset_u64 (&h, CGQ_JF_SUGGESTED, cgq_searcher_suggested (j->searcher));
    cgq_hset_str (&h, CGQ_JF_SEARCHER, sts);
    cgq_hset_queue (&h, c->store);
    free (sts);
    j->dirty = false;
}

void
jobs_write_dirty (coord_t *c)
{
    for (job_t *j = c->jobs; j; j = j->next) {
        if (j->hb)
            s_hb_turn (c, j);
        s_events_flush (c, j);
        if (j->dirty)
            s_job_write (c, j);
    }
}

// s_notify queues the spec's notification of j's end, if it asks for this
// event: a JSON summary of the job (docs/spec.md, "notify"). ended is the
// Unix time of the end.
static void
s_notify (coord_t *c, job_t *j, double ended)
{
    const cgq_spec_t *spec = j->spec;
    if (!spec || !spec->notify.url)
        return;
    unsigned event = j->state == CGQ_JOB_CANCELLED ? CGQ_NOTIFY_CANCELLED
                     : j->counts[CGQ_TRIAL_SUCCEEDED] + j->counts[CGQ_TRIAL_STOPPED] == 0
                         ? CGQ_NOTIFY_FAILED
                         : CGQ_NOTIFY_FINISHED;
    if (!(spec->notify.on & event))
        return;
    const char *ev = cgq_notify_event_name (event);
    json_t *counts = json_object ();
    uint64_t total = 0;
    for (int k = 0; k < CGQ_TRIAL_NSTATES; k++) {
        uint64_t v = jobs_count (j, k);
        total += v;
        json_object_set_new (counts, cgq_tstate_names[k], json_integer ((json_int_t) v));
    }
    char id[64];
    snprintf (id, sizeof id, "%" PRIu64 ":%s", j->id, ev);
    json_t *best = json_null ();
    if (j->best_trial >= 0 && spec->objective.metric && isfinite (j->best_value))
        best = json_pack ("{s:I, s:f, s:s, s:s}", "trial", (json_int_t) j->best_trial, "value",
                          j->best_value, "metric", spec->objective.metric, "mode",
                          spec->objective.mode > 0 ? "max" : "min");
    json_t *o = json_pack ("{s:s, s:s, s:I, s:s, s:s, s:o, s:I, s:o, s:f, s:f, s:f}",
                           "notification", id, "event", ev, "job", (json_int_t) j->id, "name",
                           j->name ? j->name : "", "state", cgq_jstate_names[j->state], "counts",
                           counts, "total", (json_int_t) total, "best", best, "created",
                           j->created, "ended", ended,
                           "duration_s", j->created > 0 ? ended - j->created : 0.0);
    if (o)
        notify_queue (c, id, spec->notify.url, o);
    json_decref (o);
}

void
jobs_check_done (coord_t *c, job_t *j)
{
    if (j->ended || zhashx_size (j->trials))
        return;
    char jkey[64];
    cgq_key_job (jkey, sizeof jkey, j->id);
    if (j->state == CGQ_JOB_RUNNING) {
        if (!cgq_searcher_done (j->searcher))
            return;
        j->state = CGQ_JOB_FINISHED;
        cgq_hset_t h;
        cgq_hset_init (&h, jkey);
        cgq_hset_str (&h, CGQ_JF_STATE, cgq_jstate_names[CGQ_JOB_FINISHED]);
        double ended = cgq_wall_s ();
        cgq_hset_dbl (&h, CGQ_JF_FINISHED, ended);
        cgq_hset_queue (&h, c->store);
        cgq_store_cmd (c->store, "HDEL %s %s %s", jkey, CGQ_JF_BLOCKED, CGQ_JF_BLOCKED_SINCE);
        s_notify (c, j, ended);
        char detail[128];
        int len = snprintf (detail, sizeof detail, "%llu succeeded, %llu failed",
                            (unsigned long long) j->counts[CGQ_TRIAL_SUCCEEDED],
                            (unsigned long long) j->counts[CGQ_TRIAL_FAILED]);
        if (j->counts[CGQ_TRIAL_STOPPED] && len > 0 && (size_t) len < sizeof detail)
            snprintf (detail + len, sizeof detail - (size_t) len, ", %llu stopped early",
                      (unsigned long long) j->counts[CGQ_TRIAL_STOPPED]);
        jobs_trial_event (c, j, "job.finished", -1, NULL, 0, detail);
        cgq_info ("job %" PRIu64 " (%s) finished: %s", j->id, j->name, detail);
    }
    if (j->dirty)
        s_job_write (c, j);
    j->ended = true;
    c->sched_dirty = true;
}

void
jobs_set_blocked (coord_t *c, job_t *j, const char *reason)
{
    if ((!reason && !j->blocked) || (reason && j->blocked && strcmp (reason, j->blocked) == 0))
        return;
    char jkey[64];
    cgq_key_job (jkey, sizeof jkey, j->id);
    free (j->blocked);
    j->blocked = reason ? cgq_xstrdup (reason) : NULL;
    if (reason) {
        cgq_store_cmd (c->store, "HSET %s %s %s", jkey, CGQ_JF_BLOCKED, reason);
        if (!(j->blocked_since > 0)) { // blocked_timeout counts from the first (blocked.c)
            char since[32];
            j->blocked_since = cgq_wall_s ();
            cgq_store_cmd (c->store, "HSET %s %s %s", jkey, CGQ_JF_BLOCKED_SINCE,
                           cgq_fmt_double (since, j->blocked_since));
        }
        cgq_warn ("job %" PRIu64 " is blocked: %s", j->id, reason);
        // Make it visible as a trial too, never silently pending.
        if (!jobs_queued (j)) {
            trial_t *t = s_trial_create (c, j);
            if (t)
                jobs_enqueue (j, t, false);
        }
    }
    else {
        cgq_store_cmd (c->store, "HDEL %s %s %s", jkey, CGQ_JF_BLOCKED, CGQ_JF_BLOCKED_SINCE);
        j->blocked_since = 0;
    }
    for (uint32_t k = 0; k < j->nstages; k++) {
        for (trial_t *t = j->qhead[k]; t; t = t->qnext) {
            if (reason) {
                const char *kv[] = {CGQ_TF_ERROR, reason};
                jobs_set_state (c, t, CGQ_TRIAL_UNSCHEDULABLE, kv, 2);
                jobs_trial_event (c, j, "trial.unschedulable", (int64_t) t->id, NULL,
                                 0, reason);
            }
            else if (t->state == CGQ_TRIAL_UNSCHEDULABLE) {
                jobs_set_state (c, t, CGQ_TRIAL_PENDING, NULL, 0);
                s_clear_error (c, t);
            }
        }
    }
}

void
jobs_started (coord_t *c, trial_t *t, node_t *n, const char *gpus)
{
    job_t *j = t->job;
    t->started = cgq_wall_s ();
    char started[32], attempt[24], assign[72];
    cgq_fmt_double (started, t->started);
    cgq_fmt_u64 (attempt, t->attempt);
    // EPOCH:SEQ:INSTANCE, without printf (once per trial)
    char *w = assign;
    const uint64_t parts[3] = {c->epoch, t->assign_seq, n->instance};
    for (int k = 0; k < 3; k++) {
        if (k)
            *w++ = ':';
        w += strlen (cgq_fmt_u64 (w, parts[k]));
    }
    // A device trial also names its device (the last pair), in the same HSET.
    const char *kv[] = {CGQ_TF_ATTEMPT, attempt, CGQ_TF_NODE,    n->id,
                        CGQ_TF_GPUS,    gpus,    CGQ_TF_STARTED, started,
                        CGQ_TF_ASSIGN,  assign,  CGQ_TF_DEVICE,  t->device ? t->device->id : NULL};
    if (t->pending_since_ms)
        hist_observe (&c->hist_dispatch,
                              (double) (cgq_now_ms () - t->pending_since_ms) / 1000.0);
    t->pending_since_ms = 0;
    jobs_set_state (c, t, CGQ_TRIAL_RUNNING, kv, t->device ? 12 : 10);
    s_event_group (&j->ev_running, t, n->id);
    cgq_tdebug (j->id, t->id, t->attempt, "started on %s", n->id);
    c->stat_assigns++;
}

// s_end_early ends running job j before its search is over, in state
// (cancelled by an operator, or failed with error by its own fail_fast):
// pending trials are dropped, running ones stopped on their nodes (they hold
// their resources until the node says they ended), never-created ones
// counted as cancelled. *stopped and *dropped say how many of each.
static void
s_end_early (coord_t *c, job_t *j, jstate_t state, const char *error, uint64_t *stopped,
             uint64_t *dropped)
{
    uint64_t never = jobs_unsuggested (j);
    j->state = state;
    j->dropped = never;
    c->stat_ended[CGQ_TRIAL_CANCELLED] += never;
    j->dirty = true;
    *stopped = 0;
    *dropped = never;
    for (uint32_t k = 0; k < j->nstages; k++)
        while (s_dequeue (j, k))
            ;
    char now[32];
    cgq_fmt_double (now, cgq_wall_s ());
    size_t n;
    trial_t **all = s_trials_list (j, &n);
    for (size_t i = 0; i < n; i++) {
        trial_t *t = all[i];
        if (t->state == CGQ_TRIAL_STOPPED)
            continue; // early-stopped already; its Stop is on its way
        bool on_node = t->state == CGQ_TRIAL_RUNNING && t->node;
        const char *kv[] = {CGQ_TF_FINISHED, now};
        jobs_set_state (c, t, CGQ_TRIAL_CANCELLED, kv, 2);
        jobs_trial_event (c, j, "trial.cancelled", (int64_t) t->id,
                         t->node ? t->node->id : NULL, t->attempt, NULL);
        if (on_node) {
            // It stays in memory, holding its resources, until the node reports it stopped.
            jobs_stop_on_node (c, t, state == CGQ_JOB_FAILED ? "job failed" : "job cancelled");
            (*stopped)++;
        }
        else {
            if (t->node)
                nodes_release (c, t);
            zhashx_delete (j->trials, &t->id);
            s_trial_free (t);
            (*dropped)++;
        }
    }
    free (all);
    char jkey[64];
    cgq_key_job (jkey, sizeof jkey, j->id);
    cgq_hset_t h;
    cgq_hset_init (&h, jkey);
    cgq_hset_str (&h, CGQ_JF_STATE, cgq_jstate_names[state]);
    cgq_hset_str (&h, CGQ_JF_FINISHED, now);
    if (error)
        cgq_hset_str (&h, CGQ_JF_ERROR, error);
    cgq_hset_queue (&h, c->store);
    cgq_store_cmd (c->store, "HDEL %s %s %s", jkey, CGQ_JF_BLOCKED, CGQ_JF_BLOCKED_SINCE);
    jobs_trial_event (c, j, state == CGQ_JOB_FAILED ? "job.failed" : "job.cancelled", -1, NULL, 0, error);
    s_notify (c, j, cgq_wall_s ());
    jobs_check_done (c, j);
}

void
jobs_fail (coord_t *c, job_t *j, const char *error)
{
    uint64_t stopped, dropped;
    cgq_warn ("job %" PRIu64 " (%s) failed: %s", j->id, j->name, error);
    s_end_early (c, j, CGQ_JOB_FAILED, error, &stopped, &dropped);
}

jobs_cancel_t
jobs_cancel (coord_t *c, uint64_t id, char *msg, size_t msglen)
{
    job_t *j = jobs_find (c, id);
    if (!j || j->state != CGQ_JOB_RUNNING) {
        char jkey[64];
        cgq_key_job (jkey, sizeof jkey, id);
        redisReply *r = cgq_store_command (c->store, "HGET %s %s", jkey, CGQ_JF_STATE);
        if (!r) {
            snprintf (msg, msglen, "cannot read job %llu: %s", (unsigned long long) id,
                      cgq_store_errstr (c->store));
            return JOBS_CANCEL_IO;
        }
        jobs_cancel_t rc = r->type == REDIS_REPLY_STRING ? JOBS_CANCEL_OVER : JOBS_CANCEL_UNKNOWN;
        if (rc == JOBS_CANCEL_OVER)
            snprintf (msg, msglen, "job %llu is already %s", (unsigned long long) id, r->str);
        else
            snprintf (msg, msglen, "no job %llu (see cgq status)", (unsigned long long) id);
        freeReplyObject (r);
        return rc;
    }
    uint64_t stopped, dropped;
    s_end_early (c, j, CGQ_JOB_CANCELLED, NULL, &stopped, &dropped);
    snprintf (msg, msglen,
              "cancelled job %llu: %llu running trial(s) stopped, %llu pending dropped",
              (unsigned long long) id, (unsigned long long) stopped,
              (unsigned long long) dropped);
    cgq_info ("%s", msg);
    return JOBS_CANCEL_DONE;
}

// --- pause and resume --------------------------------------------------------

// jobs_pause_trial (jobs.h): like a stopped trial, a paused one holds its
// resources until its node reports the task ended (jobs_result).
void
jobs_pause_trial (coord_t *c, trial_t *t)
{
    job_t *j = t->job;
    if (t->queued)
        jobs_unqueue (j, t);
    char line[512];
    json_t *last = t->ckpts ? json_array_get (t->ckpts, 0) : NULL;
    if (last) {
        char *step = cgq_json_dumps (json_object_get (last, "step"));
        snprintf (line, sizeof line,
                  "paused at checkpoint ckpt-%" JSON_INTEGER_FORMAT "-%" JSON_INTEGER_FORMAT
                  " (step %s); %s",
                  json_integer_value (json_object_get (last, "attempt")),
                  json_integer_value (json_object_get (last, "n")), step ? step : "{}",
                  j->paused ? "cgq resume continues it from there"
                            : "hyperband: its rung's verdict resumes it from there or stops it");
        free (step);
    }
    else
        snprintf (line, sizeof line,
                  "paused with no checkpoint to resume from: cgq resume restarts it from zero");
    const char *kv[] = {CGQ_TF_PAUSED, line};
    jobs_set_state (c, t, CGQ_TRIAL_PAUSED, kv, 2);
    jobs_stop_on_node (c, t, "job paused");
    jobs_trial_event (c, j, "trial.paused", (int64_t) t->id, t->node ? t->node->id : NULL, t->attempt,
             line);
    cgq_tinfo (j->id, t->id, t->attempt, "%s", line);
    c->sched_dirty = true;
}

// jobs_resume_trial (jobs.h): whatever checkpoint.resume says, a pause is
// made to be resumed; from now on the paused attempt is stale.
void
jobs_resume_trial (coord_t *c, trial_t *t)
{
    job_t *j = t->job;
    if (t->node)
        nodes_release (c, t); // its Stop is on its way; that attempt is over for us
    t->end_resume = 0;
    if (t->attempt > t->stage_base)
        t->stage_base++;
    char key[128], base[16];
    snprintf (base, sizeof base, "%u", t->stage_base);
    const char *kv[] = {CGQ_TF_STAGE_BASE, base};
    jobs_set_state (c, t, CGQ_TRIAL_PENDING, kv, 2);
    cgq_store_cmd (c->store, "HDEL %s %s", cgq_key_trial (key, sizeof key, j->id, t->id),
                   CGQ_TF_PAUSED);
    jobs_enqueue (j, t, true);
}

// jobs_pause_adopted: t (of a paused job) runs again on a node, adopted after
// a restart or re-adopted after a loss: a pause now stops it at once; a
// checkpoint pause waits for its next checkpoint as before.
void
jobs_pause_adopted (coord_t *c, trial_t *t)
{
    if (t->job->paused == JOBS_PAUSE_NOW && t->state == CGQ_TRIAL_RUNNING && t->node)
        jobs_pause_trial (c, t);
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

// jobs_resume_judge: t's attempt ended (how: CGQ_RESUME_*) and t runs again.
// Unless checkpoint.resume resumes after such an end, its checkpoints are
// let go: the next attempt starts afresh (and its worker deletes them once
// it records one of its own).
void
jobs_resume_judge (coord_t *c, trial_t *t, unsigned how)
{
    job_t *j = t->job;
    t->end_resume = 0;
    // A pbt child without a checkpoint of its own keeps its donor's: it is
    // that checkpoint's continuation, never a fresh start (search_pbt.c).
    if (!t->ckpts || (j->spec->checkpoint.resume & how) || checkpoint_required (t->ckpts))
        return;
    char key[128];
    cgq_store_cmd (c->store, "HDEL %s %s", cgq_key_trial (key, sizeof key, j->id, t->id),
                   CGQ_TF_CHECKPOINTS);
    int64_t bytes = checkpoint_bytes (t->ckpts);
    if (bytes)
        cgq_store_cmd (c->store, "HINCRBY %s %s %lld", cgq_key_job (key, sizeof key, j->id),
                       CGQ_JF_CHECKPOINT_BYTES, (long long) -bytes);
    json_decref (t->ckpts);
    t->ckpts = NULL;
    cgq_tinfo (j->id, t->id, t->attempt,
               "its next attempt starts afresh: checkpoint.resume does not resume after %s",
               how == CGQ_RESUME_TIMEOUT ? "a timeout"
               : how == CGQ_RESUME_LOST  ? "a lost node"
                                         : "a failure");
}

static void s_exploited (coord_t *c, trial_t *t, const cgq_pbt_decision_t *pd);

void
jobs_checkpoint (coord_t *c, const char *node, const Cgq__Checkpoint *m)
{
    trial_t *t = jobs_trial (c, m->task->job, m->task->trial);
    const cgq_spec_t *spec = t ? t->job->spec : NULL;
    checkpoint_decision_t d;
    checkpoint_decide (t, spec ? spec->checkpoint.keep : 1, m, node, cgq_wall_s (), &d);
    if (d.changed) {
        char key[128];
        char *latest = cgq_json_dumps (d.latest), *list = cgq_json_dumps (d.list);
        cgq_hset_t h;
        cgq_hset_init (&h, cgq_key_trial (key, sizeof key, t->job->id, t->id));
        cgq_hset_str (&h, CGQ_TF_CHECKPOINT, latest);
        cgq_hset_str (&h, CGQ_TF_CHECKPOINTS, list);
        cgq_hset_queue (&h, c->store);
        if (d.bytes)
            cgq_store_cmd (c->store, "HINCRBY %s %s %lld", cgq_key_job (key, sizeof key, t->job->id),
                           CGQ_JF_CHECKPOINT_BYTES, (long long) d.bytes);
        free (latest);
        free (list);
        json_decref (t->ckpts);
        t->ckpts = json_incref (d.list);
        cgq_tdebug (t->job->id, t->id, t->attempt, "checkpoint %" PRIu64 " recorded (%s)", m->n,
                    m->step_json);
        if ((t->job->paused || t->hb_pause) && t->node) { // a paused job's, or hyperband's
            t->hb_pause = false;
            jobs_pause_trial (c, t);
        }
    }
    else if (!d.record)
        cgq_tinfo (m->task->job, m->task->trial, m->task->attempt,
                   "checkpoint %" PRIu64 " from node %s not recorded: %s", m->n, node, d.why);
    // pbt looks at a trial when it records a checkpoint (search_pbt.c).
    bool exploit = false;
    cgq_pbt_decision_t pd = {0};
    if (d.changed && cgq_searcher_pbt (t->job->searcher)) {
        exploit = cgq_searcher_pbt_checkpoint (t->job->searcher, t->id, d.latest, &pd) == 1;
        t->job->dirty = true; // the searcher's state
    }
    char **names;
    size_t nnames = checkpoint_names (t ? t->ckpts : NULL, &names);
    // pbt: the checkpoints of this trial that children still resume from
    // are named too, so its worker keeps them (search_pbt.c, pins).
    // Also for a trial no longer in memory: a re-sent checkpoint of a donor
    // that has ended is refused, and its worker deletes it unless named.
    char pins[16][64];
    job_t *pj = t ? t->job : jobs_find (c, m->task->job);
    size_t npins = pj ? cgq_searcher_pbt_pins (pj->searcher, m->task->trial, pins, 16) : 0;
    for (size_t i = 0; i < npins; i++) {
        bool dup = false;
        for (size_t k = 0; k < nnames; k++)
            dup |= !strcmp (names[k], pins[i]);
        if (dup)
            continue;
        names = cgq_xrealloc (names, (nnames + 2) * sizeof *names);
        names[nnames++] = cgq_xstrdup (pins[i]);
        names[nnames] = NULL;
    }
    outbox_checkpoint_ack (c, node, m->task, m->n, d.record, d.why, names, nnames);
    for (size_t i = 0; i < nnames; i++)
        free (names[i]);
    free (names);
    checkpoint_decision_fini (&d);
    if (exploit)
        s_exploited (c, t, &pd);
}

void
jobs_failed (coord_t *c, trial_t *t, const char *error, bool retryable)
{
    job_t *j = t->job;
    // Each stage has its own retries: a failed stage runs again, not the
    // stages before it.
    const cgq_stage_t *st = cgq_spec_stage (j->spec, t->stage);
    uint32_t tries = t->attempt > t->stage_base ? t->attempt - t->stage_base : 0;
    char staged[600];
    if (j->nstages > 1 && st && st->name) {
        snprintf (staged, sizeof staged, "stage %s: %s", st->name, error);
        error = staged;
    }
    if (retryable && st && tries <= st->retries) {
        jobs_resume_judge (c, t, t->end_resume ? t->end_resume : CGQ_RESUME_FAILED);
        const char *kv[] = {CGQ_TF_ERROR, error};
        jobs_set_state (c, t, CGQ_TRIAL_PENDING, kv, 2);
        jobs_enqueue (j, t, false);
        jobs_trial_event (c, j, "trial.retry", (int64_t) t->id, NULL, t->attempt, error);
        cgq_tinfo (j->id, t->id, t->attempt, "failed; retrying (%u of %u retries): %s", tries,
                   (unsigned) j->spec->trial.retries, error);
        c->sched_dirty = true;
        return;
    }
    char now[32];
    cgq_fmt_double (now, cgq_wall_s ());
    const char *kv[] = {CGQ_TF_ERROR, error, CGQ_TF_FINISHED, now};
    jobs_set_state (c, t, CGQ_TRIAL_FAILED, kv, 4);
    jobs_trial_event (c, j, "trial.failed", (int64_t) t->id, NULL, t->attempt, error);
    cgq_searcher_observe (j->searcher, t->id, NULL, NAN, false);
    // Fail fast: so many failures and not one success is a broken spec (a
    // typo in the script's name or the metric's), not bad luck; stop before
    // the other 10,000 trials fail the same way.
    uint32_t ff = j->spec->search.fail_fast;
    char *why = NULL;
    if (ff && j->counts[CGQ_TRIAL_FAILED] >= ff
        && j->counts[CGQ_TRIAL_SUCCEEDED] + j->counts[CGQ_TRIAL_STOPPED] == 0) {
        size_t len = strcspn (error, "\n");
        why = cgq_xasprintf ("its first %u trials failed and none succeeded (search.fail_fast: "
                             "%u; 0 runs them all); the last error: %.*s",
                             (unsigned) j->counts[CGQ_TRIAL_FAILED], (unsigned) ff,
                             (int) (len > 300 ? 300 : len), error);
    }
    jobs_trial_end (c, t);
    if (why && j->state == CGQ_JOB_RUNNING) { // not finished by that last trial
        uint64_t stopped, dropped;
        cgq_warn ("job %" PRIu64 " (%s) failed: %s", j->id, j->name, why);
        s_end_early (c, j, CGQ_JOB_FAILED, why, &stopped, &dropped);
    }
    free (why);
}

// s_rank puts t on the leaderboard with value (formatted into vbuf, 32
// bytes) and makes it the job's best when it beats the best so far.
static void
s_rank (coord_t *c, trial_t *t, double value, char *vbuf)
{
    job_t *j = t->job;
    (void) c;
    cgq_fmt_double (vbuf, value);
    // On the leaderboard at the turn's end, with the turn's others (s_sets_write).
    size_t cap = j->lb_ids.cap;
    s_ids_push (&j->lb_ids, t->id);
    if (j->lb_ids.cap != cap)
        j->lb_vals = cgq_xrealloc (j->lb_vals, j->lb_ids.cap * sizeof *j->lb_vals);
    j->lb_vals[j->lb_ids.n - 1] = value;
    j->dirty = true;
    double sign = j->spec->objective.mode > 0 ? 1 : -1;
    if (j->best_trial < 0 || sign * value > sign * j->best_value) {
        j->best_trial = (int64_t) t->id;
        j->best_value = value;
        j->best_dirty = true; // with the counts, in the turn's job HSET
    }
}

// s_feasible judges a succeeded (or stopped) trial's metrics against the
// spec's constraints (docs/spec.md, "constraints"): appends feasible and
// violation to kv (room for 4 more) and what could not be computed to why.
// Returns whether the trial is feasible (always without constraints);
// *viol (caller frees) is the violation JSON that kv points to, or NULL.
static bool
s_feasible (const job_t *j, const json_t *metrics, const char **kv, int *nkv, cgq_buf_t *why,
            char **viol)
{
    *viol = NULL;
    if (!j->spec->nconstraints)
        return true;
    json_t *v = NULL;
    char *warn = NULL;
    bool ok = cgq_spec_feasible (j->spec, metrics, NULL, &v, &warn);
    kv[(*nkv)++] = CGQ_TF_FEASIBLE;
    kv[(*nkv)++] = ok ? "1" : "0";
    if (v) {
        *viol = cgq_json_dumps (v);
        kv[(*nkv)++] = CGQ_TF_VIOLATION;
        kv[(*nkv)++] = *viol;
        json_decref (v);
    }
    if (warn)
        cgq_buf_printf (why, "%s%s", why->len ? "; " : "", warn);
    free (warn);
    return ok;
}

// s_front_insert appends trial id with its objective values to j's front
// in memory.
static void
s_front_insert (job_t *j, uint64_t id, const double *vals)
{
    size_t m = j->spec->nobjectives;
    if (j->nfront == j->capfront) {
        j->capfront = j->capfront ? j->capfront * 2 : 16;
        j->front_ids = cgq_xrealloc (j->front_ids, j->capfront * sizeof *j->front_ids);
        j->front_vals = cgq_xrealloc (j->front_vals, j->capfront * m * sizeof *j->front_vals);
    }
    j->front_ids[j->nfront] = id;
    memcpy (&j->front_vals[j->nfront * m], vals, m * sizeof *vals);
    j->nfront++;
}

// s_front_add offers a succeeded trial's objective values to the job's
// Pareto front: kept out if a member dominates it, else added, and the
// members it dominates leave (cgq:job:{J}:pareto follows, field by field).
// O(front size x objectives) per success.
static void
s_front_add (coord_t *c, job_t *j, uint64_t id, const double *vals)
{
    const cgq_spec_t *spec = j->spec;
    int m = (int) spec->nobjectives;
    int sense[CGQ_SPEC_MAX_OBJECTIVES];
    cgq_spec_objective_senses (spec, sense);
    for (size_t i = 0; i < j->nfront; i++)
        if (cgq_pareto_dominates (&j->front_vals[i * (size_t) m], vals, m, sense))
            return;
    char key[64];
    cgq_key_pareto (key, sizeof key, j->id);
    size_t keep = 0;
    for (size_t i = 0; i < j->nfront; i++) {
        if (cgq_pareto_dominates (vals, &j->front_vals[i * (size_t) m], m, sense)) {
            cgq_store_cmd (c->store, "HDEL %s %llu", key, (unsigned long long) j->front_ids[i]);
            continue;
        }
        j->front_ids[keep] = j->front_ids[i];
        memmove (&j->front_vals[keep * (size_t) m], &j->front_vals[i * (size_t) m],
                 (size_t) m * sizeof *vals);
        keep++;
    }
    j->nfront = keep;
    s_front_insert (j, id, vals);
    json_t *o = json_object ();
    for (int k = 0; k < m; k++)
        json_object_set_new (o, cgq_spec_objective (spec, (size_t) k)->metric, json_real (vals[k]));
    char *text = cgq_json_dumps (o);
    json_decref (o);
    char field[24];
    snprintf (field, sizeof field, "%llu", (unsigned long long) id);
    cgq_store_cmd (c->store, "HSET %s %s %s", key, field, text);
    free (text);
}

int
jobs_front_restore (job_t *j, uint64_t id, const char *json)
{
    size_t m = j->spec->nobjectives;
    if (m < 2 || !json)
        return -1;
    json_t *o = json_loads (json, 0, NULL);
    double vals[CGQ_SPEC_MAX_OBJECTIVES];
    int rc = json_is_object (o) ? 0 : -1;
    for (size_t k = 0; rc == 0 && k < m; k++) {
        json_t *v = json_object_get (o, cgq_spec_objective (j->spec, k)->metric);
        if (json_is_number (v))
            vals[k] = json_number_value (v);
        else
            rc = -1;
    }
    json_decref (o);
    if (rc == 0)
        s_front_insert (j, id, vals);
    return rc;
}

// jobs_late_success: the first outcome wins. An attempt we gave up on (its node
// went silent past the heartbeat timeout) that succeeded after all is kept
// when no later attempt has finished yet: the later attempt, queued or
// running, is withdrawn (stopped on its node) and the trial goes on as if
// the old attempt were current, so the caller records its result. A failed
// or stopped late attempt changes nothing: the later one carries on.
void
jobs_late_success (coord_t *c, trial_t *t, const Cgq__Result *r)
{
    if (r->status != CGQ__TASK_STATUS__TASK_SUCCEEDED || r->task->attempt == 0
        || !(t->state == CGQ_TRIAL_RUNNING || (t->state == CGQ_TRIAL_PENDING && t->queued)))
        return;
    char detail[160];
    snprintf (detail, sizeof detail, "attempt %u finished after it was given up; attempt %u %s",
              r->task->attempt, t->attempt,
              t->state == CGQ_TRIAL_RUNNING ? "is stopped" : "will not run");
    cgq_tinfo (t->job->id, t->id, r->task->attempt, "%s", detail);
    jobs_trial_event (c, t->job, "trial.late_result", (int64_t) t->id, NULL,
                     r->task->attempt, detail);
    if (t->state == CGQ_TRIAL_RUNNING) {
        if (t->node) {
            jobs_stop_on_node (c, t, "an earlier attempt finished first");
            nodes_release (c, t);
        }
    } else {
        jobs_unqueue (t->job, t);
    }
    t->attempt = r->task->attempt;
    char attempt[16];
    snprintf (attempt, sizeof attempt, "%u", t->attempt);
    const char *kv[] = {CGQ_TF_ATTEMPT, attempt, CGQ_TF_NODE, c->result_from}; // where it ran
    jobs_set_state (c, t, CGQ_TRIAL_RUNNING, kv, c->result_from ? 4 : 2);
}

// s_merge_stage adds stage name's metrics m to out. A metric an earlier
// stage (from: metric -> the stage that set it) reported too is not lost:
// both values are kept as STAGE.metric, and the plain name holds the later
// stage's, which is what the objective reads (docs/spec.md, Stages).
static void
s_merge_stage (json_t *out, json_t *from, const char *name, const json_t *m)
{
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *) m, k, v) {
        const char *prev = json_string_value (json_object_get (from, k));
        if (prev && strcmp (prev, name)) {
            char *a = cgq_xasprintf ("%s.%s", prev, k), *b = cgq_xasprintf ("%s.%s", name, k);
            if (!json_object_get (out, a))
                json_object_set (out, a, json_object_get (out, k));
            json_object_set (out, b, v);
            free (a);
            free (b);
        }
        json_object_set (out, k, v);
        json_object_set_new (from, k, json_string (name));
    }
}

// jobs_merged_metrics is the result of a multi-stage trial: the metrics of
// every finished stage (t->stage_metrics), in stage order, then last (the
// stage that just finished; may be NULL), in one flat object (s_merge_stage:
// a later stage's metric wins the plain name, both are kept as STAGE.NAME).
// New reference.
json_t *
jobs_merged_metrics (const trial_t *t, const json_t *last)
{
    const job_t *j = t->job;
    json_t *out = json_object (), *from = json_object ();
    for (uint32_t k = 0; k < j->nstages && t->stage_metrics; k++) {
        const cgq_stage_t *st = cgq_spec_stage (j->spec, k);
        json_t *m = st && st->name ? json_object_get (t->stage_metrics, st->name) : NULL;
        if (json_is_object (m))
            s_merge_stage (out, from, st->name, m);
    }
    const cgq_stage_t *cur = cgq_spec_stage (j->spec, t->stage);
    if (json_is_object (last))
        s_merge_stage (out, from, cur && cur->name ? cur->name : "last", last);
    json_decref (from);
    return out;
}

// s_run_json is the record of the stage run that just ended, for the
// trial's field run:STAGE (*field, caller frees): its attempt, node, start,
// end, duration and directory. Caller frees.
static char *
s_run_json (const trial_t *t, const char *node, const Cgq__Result *r, char **field)
{
    *field = cgq_xasprintf (CGQ_TF_RUN_PREFIX "%s", cgq_spec_stage (t->job->spec, t->stage)->name);
    double finished = cgq_wall_s ();
    json_t *o = json_pack ("{s:I, s:s?, s:f, s:f, s:f, s:s?}", "attempt", (json_int_t) t->attempt,
                           "node", node, "started", t->started, "finished", finished, "duration",
                           r->duration_s, "trial_dir",
                           r->trial_dir && *r->trial_dir ? r->trial_dir : NULL);
    char *s = cgq_json_dumps (o);
    json_decref (o);
    return s;
}

// s_stage_done: stage t->stage of a multi-stage trial succeeded with
// metrics (borrowed) and it is not the last. In one HSET: its metrics join
// the trial's stages, the trial's metrics become the merge so far, and the
// trial waits (pending) for its next stage with attempts counted from here.
// A coordinator killed after this batch finds the trial at its next stage;
// killed before it, the node still holds the result and sends it again.
static void
s_stage_done (coord_t *c, trial_t *t, json_t *metrics, const char **kv8, const char *run_field,
              const char *run)
{
    job_t *j = t->job;
    const cgq_stage_t *st = cgq_spec_stage (j->spec, t->stage);
    const cgq_stage_t *next = cgq_spec_stage (j->spec, t->stage + 1);
    if (!t->stage_metrics)
        t->stage_metrics = json_object ();
    json_object_set (t->stage_metrics, st->name, metrics);
    json_t *merged = jobs_merged_metrics (t, NULL);
    char *mj = cgq_json_dumps (merged), *sj = cgq_json_dumps (t->stage_metrics);
    json_decref (merged);
    t->stage++;
    t->stage_base = t->attempt;
    char sbuf[16], bbuf[16];
    snprintf (sbuf, sizeof sbuf, "%u", t->stage);
    snprintf (bbuf, sizeof bbuf, "%u", t->stage_base);
    const char *kv[] = {kv8[0],        kv8[1], kv8[2],          kv8[3], kv8[4],       kv8[5],
                        CGQ_TF_METRICS, mj,    CGQ_TF_STAGES,   sj,     CGQ_TF_STAGE, sbuf,
                        CGQ_TF_STAGE_BASE, bbuf, run_field, run};
    s_clear_error (c, t);
    jobs_set_state (c, t, CGQ_TRIAL_PENDING, kv, 16);
    if (st->on) { // the device was this stage's; the next one may run on a worker
        char tkey[128];
        cgq_store_cmd (c->store, "HDEL %s %s", cgq_key_trial (tkey, sizeof tkey, j->id, t->id),
                       CGQ_TF_DEVICE);
    }
    char detail[200];
    snprintf (detail, sizeof detail, "stage %s succeeded; next: %s", st->name, next->name);
    jobs_trial_event (c, j, "trial.stage", (int64_t) t->id, NULL, t->attempt, detail);
    cgq_debug ("trial %" PRIu64 ".%" PRIu64 ": %s", j->id, t->id, detail);
    jobs_enqueue (j, t, false);
    c->sched_dirty = true;
    free (mj);
    free (sj);
}

bool
jobs_task_stage_current (const trial_t *t, uint32_t stage, uint32_t attempt)
{
    return stage == t->stage && attempt > t->stage_base;
}

void
jobs_result (coord_t *c, const Cgq__Result *r)
{
    trial_t *t = jobs_trial (c, r->task->job, r->task->trial);
    // A task of a stage the trial has left (or not reached) is stale,
    // whatever its attempt.
    bool other = t && !jobs_task_stage_current (t, r->task->stage, r->task->attempt);
    if (t && !other && r->task->attempt < t->attempt)
        jobs_late_success (c, t, r);
    if (!t || other || t->attempt != r->task->attempt) {
        cgq_tdebug (r->task->job, r->task->trial, r->task->attempt,
                    "result is stale; acknowledged, ignored");
        return;
    }
    job_t *j = t->job;
    if (t->state == CGQ_TRIAL_CANCELLED || t->state == CGQ_TRIAL_STOPPED) {
        jobs_trial_end (c, t); // its node reported the stop: resources free
        return;
    }
    if (t->state == CGQ_TRIAL_PAUSED) {
        if (r->status != CGQ__TASK_STATUS__TASK_SUCCEEDED) {
            // Our Stop ended it (or it failed as it came): paused it stays,
            // its resources free, until cgq resume. No retry is used.
            if (t->node)
                nodes_release (c, t);
            c->sched_dirty = true;
            return;
        }
        // It finished before our Stop reached it: a success like any other.
        char key[128];
        cgq_store_cmd (c->store, "HDEL %s %s", cgq_key_trial (key, sizeof key, j->id, t->id),
                       CGQ_TF_PAUSED);
        jobs_set_state (c, t, CGQ_TRIAL_RUNNING, NULL, 0);
    }
    if (t->state == CGQ_TRIAL_PENDING && t->queued && t->attempt > 0 && t->losses > 0
        && r->status != CGQ__TASK_STATUS__TASK_STOPPED) {
        // The node we gave up on finished this attempt after all, before it was
        // dispatched again: keep its result rather than run the trial twice.
        // (Not a stopped one: only our own Stop ends a task that way, and the
        // trial is queued to run again, not failed by it.)
        jobs_unqueue (j, t);
        jobs_set_state (c, t, CGQ_TRIAL_RUNNING, NULL, 0);
    }
    if (t->state != CGQ_TRIAL_RUNNING)
        return;
    nodes_device_result (c, t, r->status, r->error); // a device's failures in a row
    const char *node_id = t->node ? t->node->id : NULL; // the node outlives its release
    if (t->node)
        nodes_release (c, t);
    t->losses = 0;
    t->nlost_on = 0;

    char tkey[128], dur[32], now[32], vbuf[32];
    cgq_key_trial (tkey, sizeof tkey, j->id, t->id);
    cgq_fmt_double (dur, r->duration_s);
    cgq_fmt_double (now, cgq_wall_s ());
    const char *metrics_json = r->metrics_json && *r->metrics_json ? r->metrics_json : "{}";
    // What every outcome records; a success adds its value and end time and
    // sets it all with its state in one HSET.
    const char *kv[24] = {CGQ_TF_DURATION,  dur, CGQ_TF_LOG, r->log_tail ? r->log_tail : "",
                          CGQ_TF_TRIAL_DIR, r->trial_dir ? r->trial_dir : "", CGQ_TF_METRICS,
                          metrics_json};
    int nkv = 8;
    // measure.passes (passes.c): a pass before the last waits for the next;
    // the last one's metrics carry both.
    passes_first_t pf;
    if (r->status == CGQ__TASK_STATUS__TASK_SUCCEEDED
        && passes_first (t, metrics_json, kv, &nkv, &pf)) {
        // Pending for its next pass, unqueued until the first pass has
        // ended (dispatch.c), in one HSET: a coordinator killed before this
        // batch gets the result again, after it recovery holds the trial.
        s_clear_error (c, t);
        jobs_set_state (c, t, CGQ_TRIAL_PENDING, kv, nkv);
        jobs_trial_event (c, j, "trial.pass", (int64_t) t->id, NULL, t->attempt, pf.detail);
        c->sched_dirty = true;
        return;
    }
    char *passes_json =
        r->status == CGQ__TASK_STATUS__TASK_SUCCEEDED ? passes_merge (t, metrics_json) : NULL;
    if (passes_json)
        metrics_json = kv[7] = passes_json;

    // Decide first whether this is a success; every failure is recorded the same way.
    const char *fail = NULL;
    bool retryable = true;
    cgq_buf_t why;
    cgq_buf_init (&why);
    json_t *metrics = NULL;
    double value = NAN, vals[CGQ_SPEC_MAX_OBJECTIVES];
    const char *metric = j->spec->objective.metric;
    char *merged_json = NULL, *stages_json = NULL, *run_json = NULL, *run_field = NULL;
    // The common success (one stage, no objective or one metric by name, a
    // flat object of numbers): its value read without building the object.
    size_t nmembers = 0;
    bool flat = r->status == CGQ__TASK_STATUS__TASK_SUCCEEDED && j->nstages == 1
                && j->spec->nobjectives <= 1 && !j->spec->objective.expr
                && !j->spec->nconstraints // constraints read the metrics object
                && cgq_json_flat_number (metrics_json, metric, &value, &nmembers) == 1;
    if (r->status != CGQ__TASK_STATUS__TASK_SUCCEEDED)
        fail = r->error && *r->error ? r->error : "failed";
    else if (flat)
        ;
    else if (!(metrics = json_loads (metrics_json, 0, NULL)) || !json_is_object (metrics)) {
        fail = "the trial's result is not a JSON object";
        retryable = false;
    }
    else if (j->nstages > 1 && t->stage + 1 < j->nstages) {
        char *field, *run = s_run_json (t, node_id, r, &field);
        s_stage_done (c, t, metrics, kv, field, run);
        free (run);
        free (passes_json);
        free (field);
        json_decref (metrics);
        cgq_buf_fini (&why);
        return;
    }
    else if (j->nstages > 1) {
        // The last stage: the objective(s) read the merge of every stage.
        const cgq_stage_t *st = cgq_spec_stage (j->spec, t->stage);
        json_t *merged = jobs_merged_metrics (t, metrics);
        json_t *all = t->stage_metrics ? json_copy (t->stage_metrics) : json_object ();
        json_object_set (all, st->name, metrics);
        stages_json = cgq_json_dumps (all);
        json_decref (all);
        json_decref (metrics);
        metrics = merged;
        merged_json = cgq_json_dumps (merged);
        kv[7] = merged_json;
        kv[nkv++] = CGQ_TF_STAGES;
        kv[nkv++] = stages_json;
        run_json = s_run_json (t, node_id, r, &run_field);
        kv[nkv++] = run_field;
        kv[nkv++] = run_json;
    }
    if (fail)
        ;
    else if (j->spec->nobjectives == 1 && j->spec->objective.expr) {
        // An expression over metrics: a missing name or a non-finite result
        // fails the trial with that reason.
        char err[512];
        if (cgq_spec_objective_value (j->spec, metrics, &value, err, sizeof err) < 0) {
            cgq_buf_printf (&why, "objective %s: %s", metric, err);
            fail = why.data;
            retryable = false;
        }
    }
    else if (j->spec->nobjectives > 1) {
        // Multi-objective: every objective must be there; no single value,
        // no leaderboard (the searcher reads the metrics), the Pareto front.
        char err[512];
        if (cgq_spec_objective_values (j->spec, metrics, vals, err, sizeof err) < 0) {
            cgq_buf_printf (&why, "objectives: %s", err);
            fail = why.data;
            retryable = false;
        }
    }
    else if (metric && !flat) {
        json_t *v = json_object_get (metrics, metric);
        if (!v || !json_is_number (v) || !isfinite (json_number_value (v))) {
            cgq_buf_printf (&why, "result has no numeric metric '%s' (metrics: ", metric);
            size_t from = why.len;
            s_metric_names (&why, metrics);
            char guess[128]; // a typo in objective.metric is the usual cause
            const char *g = cgq_yamldoc_suggest (metric, why.data + from, guess, sizeof guess);
            if (g)
                cgq_buf_printf (&why, "); did you mean '%s'? report it, or fix objective.metric", g);
            else
                cgq_buf_puts (&why, "); report it, or fix objective.metric");
            fail = why.data;
            retryable = false;
        }
        else
            value = json_number_value (v);
    }
    // A succeeded attempt's error is the worker's note on its reports (the
    // first line it rejected): the likely cause of missing metrics.
    const char *note = r->status == CGQ__TASK_STATUS__TASK_SUCCEEDED && r->error && *r->error
                           ? r->error
                           : NULL;
    if (fail && note) {
        if (fail != why.data)
            cgq_buf_puts (&why, fail);
        cgq_buf_printf (&why, " (the trial's first rejected report: %s)", note);
        fail = why.data;
    }
    if (fail && j->nstages > 1 && !merged_json) {
        // A multi-stage trial's metrics field stays the merge of its
        // finished stages (the failed attempt's report is in last_report).
        json_t *merged = jobs_merged_metrics (t, NULL);
        merged_json = cgq_json_dumps (merged);
        json_decref (merged);
        kv[7] = merged_json;
    }
    if (fail) {
        cgq_hset_t h;
        cgq_hset_init (&h, tkey);
        for (int i = 0; i < nkv; i += 2)
            cgq_hset_str (&h, kv[i], kv[i + 1]);
        cgq_hset_queue (&h, c->store);
        t->end_resume = r->status == CGQ__TASK_STATUS__TASK_TIMEOUT ? CGQ_RESUME_TIMEOUT
                                                                    : CGQ_RESUME_FAILED;
        jobs_failed (c, t, fail, retryable);
        json_decref (metrics);
        free (passes_json);
        cgq_buf_fini (&why);
        free (merged_json);
        free (stages_json);
        free (run_json);
        free (run_field);
        return;
    }
    cgq_buf_reset (&why);
    if (!metric && j->spec->nobjectives == 0 && (flat ? nmembers : json_object_size (metrics)) == 0)
        cgq_buf_printf (&why, "the trial reported no metrics (write JSON objects to fd 3 or "
                              "result.json)%s%s", note ? "; " : "", note ? note : "");
    else if (note)
        cgq_buf_puts (&why, note);
    char *viol;
    bool feasible = s_feasible (j, metrics, kv, &nkv, &why, &viol);
    if (why.len) {
        kv[nkv++] = CGQ_TF_WARNING;
        kv[nkv++] = why.data;
    }

    if (metric) {
        if (feasible) // an infeasible trial is never ranked, never the best
            s_rank (c, t, value, vbuf);
        else
            cgq_fmt_double (vbuf, value);
        kv[nkv++] = CGQ_TF_VALUE;
        kv[nkv++] = vbuf;
    }
    kv[nkv++] = CGQ_TF_FINISHED;
    kv[nkv++] = now;
    s_clear_error (c, t); // an earlier attempt's error no longer applies
    jobs_set_state (c, t, CGQ_TRIAL_SUCCEEDED, kv, nkv);
    if (j->spec->nobjectives > 1 && feasible)
        s_front_add (c, j, t->id, vals);
    s_event_group (&j->ev_succeeded, t, NULL);
    cgq_searcher_observe (j->searcher, t->id, metrics, value, true);
    json_decref (metrics);
    free (viol);
    cgq_buf_fini (&why);
    free (merged_json);
    free (stages_json);
    free (run_json);
    free (run_field);
    free (passes_json);
    jobs_trial_end (c, t);
}

bool
jobs_stopped_value (const job_t *j, const json_t *metrics, double *value)
{
    const cgq_spec_t *spec = j->spec;
    *value = NAN;
    if (!json_is_object (metrics))
        return false;
    if (spec->nobjectives > 1) {
        double vals[CGQ_SPEC_MAX_OBJECTIVES];
        return cgq_spec_objective_values (spec, metrics, vals, NULL, 0) == 0;
    }
    if (spec->nobjectives == 1)
        return cgq_spec_objective_value (spec, metrics, value, NULL, 0) == 0;
    return true;
}

static void s_stop_as (coord_t *c, trial_t *t, const char *report, const json_t *metrics,
                       const char *why, const char *event, const char **extra, int nextra);

// s_early_stopped ends running trial t on the early stopper's word: its
// last report (metrics, borrowed) is its result, its value goes on the
// leaderboard when it has one, the searcher observes it, and its node gets
// a Stop. Like a cancelled one it stays in memory, holding its resources,
// until the node reports the task stopped.
static void
s_early_stopped (coord_t *c, trial_t *t, const char *report, const json_t *metrics,
                 const char *why)
{
    s_stop_as (c, t, report, metrics, why, "trial.early_stopped", NULL, 0);
}

// s_stop_as is s_early_stopped with the event's type, and extra fields
// (nextra strings, name and value) for the trial's hash.
static void
s_stop_as (coord_t *c, trial_t *t, const char *report, const json_t *metrics, const char *why,
           const char *event, const char **extra, int nextra)
{
    job_t *j = t->job;
    char now[32], vbuf[32];
    cgq_fmt_double (now, cgq_wall_s ());
    const char *kv[16] = {CGQ_TF_METRICS, report, CGQ_TF_FINISHED, now};
    int nkv = 4;
    for (int i = 0; i + 1 < nextra && i < 2; i += 2) { // one pair: kv has room for it
        kv[nkv++] = extra[i];
        kv[nkv++] = extra[i + 1];
    }
    double value;
    bool ok = jobs_stopped_value (j, metrics, &value);
    char *viol = NULL;
    cgq_buf_t warn;
    cgq_buf_init (&warn);
    bool feasible = !ok || s_feasible (j, metrics, kv, &nkv, &warn, &viol);
    if (warn.len) {
        kv[nkv++] = CGQ_TF_WARNING;
        kv[nkv++] = warn.data;
    }
    if (ok && isfinite (value)) {
        if (feasible)
            s_rank (c, t, value, vbuf);
        else
            cgq_fmt_double (vbuf, value);
        kv[nkv++] = CGQ_TF_VALUE;
        kv[nkv++] = vbuf;
    }
    s_clear_error (c, t);
    jobs_set_state (c, t, CGQ_TRIAL_STOPPED, kv, nkv);
    free (viol);
    cgq_buf_fini (&warn);
    jobs_trial_event (c, j, event, (int64_t) t->id, t->node ? t->node->id : NULL, t->attempt, why);
    cgq_tinfo (j->id, t->id, t->attempt, "%s: %s",
               strcmp (event, "trial.exploited") ? "stopped early" : "exploited", why);
    cgq_searcher_observe (j->searcher, t->id, ok ? metrics : NULL, value, ok);
    if (!t->node) {
        jobs_trial_end (c, t); // a recovered trial not adopted yet: nothing to stop
        return;
    }
    char reason[300];
    snprintf (reason, sizeof reason, "%s: %s",
              strcmp (event, "trial.exploited") ? "early stop" : "exploited (pbt)", why);
    jobs_stop_on_node (c, t, reason);
    c->sched_dirty = true;
}

// s_exploited ends running trial t on pbt's word (cgq_searcher_pbt_checkpoint):
// as an early stop, its latest score its result, with the event
// trial.exploited (the decision and the params that change) and the field
// exploited ({"by": child, "donor", "step"}). The child is created when the
// scheduler next asks the searcher.
static void
s_exploited (coord_t *c, trial_t *t, const cgq_pbt_decision_t *pd)
{
    job_t *j = t->job;
    const cgq_spec_t *spec = j->spec;
    json_t *lineage = json_deep_copy (pd->lineage);
    // The report that ranked it: its latest score at its time_attr.
    json_t *metrics = json_object ();
    double score = NAN, at = NAN;
    cgq_searcher_pbt_score (j->searcher, t->id, &at, &score);
    if (isfinite (at))
        json_object_set_new (metrics, spec->search.pbt.time_attr, json_real (at));
    if (isfinite (score))
        json_object_set_new (metrics, spec->search.pbt.metric, json_real (score));
    char *report = cgq_json_dumps (metrics);
    json_t *ex = json_pack ("{s:I, s:I, s:O}", "by", (json_int_t) pd->child, "donor",
                            (json_int_t) pd->donor, "step", json_object_get (lineage, "step"));
    char *exs = cgq_json_dumps (ex);
    char *changed = cgq_json_dumps (json_object_get (lineage, "changed"));
    char why[600];
    snprintf (why, sizeof why, "%s; params %s", pd->why, changed);
    const char *extra[] = {CGQ_TF_EXPLOITED, exs};
    s_stop_as (c, t, report, metrics, why, "trial.exploited", extra, 2);
    c->sched_dirty = true; // the child waits to be suggested
    free (changed);
    free (exs);
    free (report);
    json_decref (ex);
    json_decref (metrics);
    json_decref (lineage);
}

// s_hb_turn, once per turn for a hyperband job: the search's end (partly
// filled brackets complete), the verdicts of every cohort complete now
// (promoted: a paused trial resumes from its checkpoint, one still on its
// way to its checkpoint runs on; stopped: early-stopped with its value at
// the rung as its metrics), and its state into the job hash when changed.
static void
s_hb_turn (coord_t *c, job_t *j)
{
    if (!j->hb_done && j->state == CGQ_JOB_RUNNING && cgq_searcher_done (j->searcher)) {
        hyperband_search_done (j->hb);
        j->hb_done = j->hb_check = j->hb_dirty = true;
    }
    hyperband_verdict_t *v = NULL;
    size_t n = j->hb_check && j->state == CGQ_JOB_RUNNING ? hyperband_decide (j->hb, &v) : 0;
    j->hb_check = false;
    for (size_t i = 0; i < n; i++) {
        trial_t *t = zhashx_lookup (j->trials, &v[i].trial);
        j->hb_dirty = true;
        if (!t || cgq_tstate_terminal (t->state))
            continue;
        if (v[i].promote) {
            t->hb_pause = false;
            if (t->state == CGQ_TRIAL_PAUSED && !j->paused)
                jobs_resume_trial (c, t);
            jobs_trial_event (c, j, "trial.promoted", (int64_t) t->id, NULL, t->attempt, v[i].why);
            cgq_tinfo (j->id, t->id, t->attempt, "%s", v[i].why);
            c->sched_dirty = true;
            continue;
        }
        json_t *m = json_object ();
        json_object_set_new (m, j->spec->early_stop.metric, json_real (v[i].value));
        json_object_set_new (m, j->spec->early_stop.attribute, json_real (v[i].at));
        char *text = cgq_json_dumps (m);
        s_early_stopped (c, t, text, m, v[i].why);
        free (text);
        json_decref (m);
    }
    free (v);
    if (j->hb_dirty) {
        char key[64], *dump = hyperband_dump (j->hb);
        cgq_hset_t h;
        cgq_hset_init (&h, cgq_key_job (key, sizeof key, j->id));
        cgq_hset_str (&h, CGQ_JF_HYPERBAND, dump);
        cgq_hset_queue (&h, c->store);
        free (dump);
        j->hb_dirty = false;
    }
}

// s_judge hands a running trial's report to the job's early stopper and
// queues what it records; early_stop is set to the trial's new stopper
// state (buffer of n bytes) and *stop to whether it must stop.
static void
s_judge (coord_t *c, trial_t *t, const json_t *report, early_stop_decision_t *d, char *state,
         size_t n)
{
    job_t *j = t->job;
    const cgq_spec_t *spec = j->spec;
    *state = 0;
    memset (d, 0, sizeof *d);
    json_t *a = json_object_get (report, spec->early_stop.attribute);
    if (!json_is_number (a))
        return;
    double value = NAN;
    if (early_stop_nobjectives (j->stopper) > 1) {
        // Multi-objective asha: every objective of the report.
        double vals[CGQ_SPEC_MAX_OBJECTIVES];
        if (cgq_spec_objective_values (spec, report, vals, NULL, 0) < 0)
            return;
        early_stop_report_multi (j->stopper, t->id, json_number_value (a), vals, d);
    }
    else if (spec->early_stop.expr) {
        if (cgq_expr_eval (spec->early_stop.expr, report, &value, NULL, 0) < 0)
            return;
    }
    else {
        json_t *v = json_object_get (report, spec->early_stop.metric);
        if (!json_is_number (v))
            return;
        value = json_number_value (v);
    }
    if (early_stop_nobjectives (j->stopper) <= 1)
        early_stop_report (j->stopper, t->id, json_number_value (a), value, d);
    if (!d->record)
        return;
    early_stop_trial_state (j->stopper, t->id, state, n);
    char key[128], at[32], val[32];
    // Several objectives: the member is "TRIAL:V1:V2..." (the score is V1).
    char member[24 + CGQ_SPEC_MAX_OBJECTIVES * 33];
    size_t mlen = (size_t) snprintf (member, sizeof member, "%llu", (unsigned long long) t->id);
    for (size_t i = 0; d->nvalues > 1 && i < d->nvalues && mlen < sizeof member; i++)
        mlen += (size_t) snprintf (member + mlen, sizeof member - mlen, ":%s",
                                   cgq_fmt_double (val, d->values[i]));
    cgq_store_cmd (c->store, "ZADD %s %s %s", cgq_key_rung (key, sizeof key, j->id, d->at),
                   cgq_fmt_double (val, d->value), member);
    if (d->new_bucket)
        cgq_store_cmd (c->store, "ZADD %s %s %s", cgq_key_rungs (key, sizeof key, j->id),
                       cgq_fmt_double (at, d->at), at);
}

void
jobs_progress (coord_t *c, const Cgq__Progress *p)
{
    trial_t *t = jobs_trial (c, p->task->job, p->task->trial);
    if (!t || t->state != CGQ_TRIAL_RUNNING || t->attempt != p->task->attempt || !p->report_json
        || p->task->stage != t->stage)
        return;
    job_t *j = t->job;
    char rkey[128], tkey[128];
    cgq_key_reports (rkey, sizeof rkey, j->id, t->id);
    cgq_key_trial (tkey, sizeof tkey, j->id, t->id);
    cgq_store_cmd (c->store, "XADD %s MAXLEN ~ %d * %s %s", rkey, CGQ_REPORTS_MAXLEN,
                   CGQ_REPORT_FIELD, p->report_json);
    cgq_store_cmd (c->store, "HINCRBY %s %s 1", tkey, CGQ_TF_REPORTS);
    // The early stopper judges the first stage's reports (where a trial
    // trains); a later stage's are stored, not judged.
    bool pbt = cgq_searcher_pbt (j->searcher);
    json_t *report = (j->stopper || j->hb || pbt) && t->stage == 0
                         ? json_loads (p->report_json, 0, NULL)
                         : NULL;
    if (pbt && json_is_object (report)) {
        // pbt ranks trials by their latest score (search_pbt.c).
        json_t *at = json_object_get (report, j->spec->search.pbt.time_attr),
               *v = json_object_get (report, j->spec->search.pbt.metric);
        if (json_is_number (at) && json_is_number (v)) {
            cgq_searcher_pbt_report (j->searcher, t->id, json_number_value (at),
                                     json_number_value (v));
            j->dirty = true; // the searcher's state
        }
    }
    early_stop_decision_t d = {0};
    char state[192] = "";
    if (j->stopper && json_is_object (report))
        s_judge (c, t, report, &d, state, sizeof state);
    if (json_is_object (report) && j->hb) {
        const cgq_spec_t *sp = j->spec;
        json_t *a = json_object_get (report, sp->early_stop.attribute),
               *v = json_object_get (report, sp->early_stop.metric);
        if (json_is_number (a) && json_is_number (v)
            && hyperband_report (j->hb, t->id, json_number_value (a), json_number_value (v))) {
            t->hb_pause = true; // at its next checkpoint (jobs_checkpoint)
            j->hb_dirty = j->hb_check = true; // the last of its cohort decides it
            // bohb keeps it as an observation at the rung's budget.
            if (cgq_searcher_rung (j->searcher, t->id, hyperband_budget (j->hb, t->id), report))
                j->dirty = true;
            cgq_tinfo (j->id, t->id, t->attempt,
                       "hyperband: reached its rung's budget (%s %g); pauses at its next "
                       "checkpoint",
                       sp->early_stop.attribute, json_number_value (a));
        }
    }
    cgq_hset_t h;
    cgq_hset_init (&h, tkey);
    cgq_hset_str (&h, CGQ_TF_LAST_REPORT, p->report_json);
    if (*state)
        cgq_hset_str (&h, CGQ_TF_EARLY_STOP, state);
    cgq_hset_queue (&h, c->store);
    if (d.stop)
        s_early_stopped (c, t, p->report_json, report, d.why);
    json_decref (report);
}
