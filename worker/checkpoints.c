// checkpoints: the worker's side of its trials' checkpoints, in its loop.
#include "checkpoints.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt.h"
#include "ckpt_store.h"
#include "log.h"
#include "result.h"
#include "sealer.h"
#include "util.h"

#define S_RESEND_MS 5000      // an unacked Checkpoint goes again this often
#define S_FORGET_MS 60000     // what is still unacked this long after its task ended
#define S_PREFIX ".cgq-ckpt-" // WORKDIR/.cgq-ckpt-PID: staging

// A running task's checkpoints (and, for a while after it ended, its last
// one waiting for its ack).
typedef struct s_track_s {
    Cgq__TaskRef ref;
    const cgq_task_t *task; // NULL once it ended
    cgq_task_t *live;       // the same, to write to (NULL once it ended)
    char *trial_store;      // STORE/job-J/trial-T
    char *store;
    uint64_t next_n;        // the last n handed out
    unsigned inflight;      // seals pushed, not done
    bool failed;            // a seal failed: the task was failed with why
    // The last sealed checkpoint not acked yet (sent again every S_RESEND_MS).
    Cgq__Checkpoint *unacked; // all fields owned
    int64_t sent_ms;
    int64_t ended_ms;
    // An HTTP store's checkpoints of earlier attempts (paths) to delete once
    // not named (cgq_checkpoints_inherited).
    char **inherited;
    size_t ninherited;
    struct s_track_s *next;
} s_track_t;

// An Assign waiting for its checkpoint to be restored.
typedef struct s_pending_s {
    Cgq__Assign *assign; // unpacked copy (cgq__assign__free_unpacked)
    char *dst;
    char *stop_reason;   // a Stop came meanwhile: not started
    struct s_pending_s *next;
} s_pending_t;

struct cgq_checkpoints_t {
    cgq_checkpoints_opts_t opts;
    char *staging; // WORKDIR/.cgq-ckpt-PID
    uint64_t staged; // names handed out in it
    cgq_sealer_t *sealer;
    s_track_t *tracks;
    s_pending_t *pending;
    const Cgq__TaskRef **refs; // scratch for cgq_checkpoints_starting
    size_t cleaning;           // CGQ_PRUNE and CGQ_REMOVE jobs pushed, not taken back
};

// s_clean hands the sealer a prune or a removal, counted until it is done.
static void
s_clean (cgq_checkpoints_t *self, cgq_seal_job_t *job)
{
    self->cleaning++;
    cgq_sealer_push (self->sealer, job);
}

static bool
s_same (const Cgq__TaskRef *a, const Cgq__TaskRef *b)
{
    return a->job == b->job && a->trial == b->trial && a->stage == b->stage
           && a->attempt == b->attempt;
}

static void
s_ckpt_free (Cgq__Checkpoint **c_p)
{
    Cgq__Checkpoint *c = *c_p;
    if (!c)
        return;
    free (c->task);
    free (c->step_json);
    free (c->sha256);
    free (c->path);
    free (c->host);
    free (c);
    *c_p = NULL;
}

static s_track_t *
s_track_of (const cgq_checkpoints_t *self, const Cgq__TaskRef *ref)
{
    for (s_track_t *t = self->tracks; t; t = t->next)
        if (s_same (&t->ref, ref))
            return t;
    return NULL;
}

static s_track_t *
s_track_of_task (const cgq_checkpoints_t *self, const cgq_task_t *task)
{
    for (s_track_t *t = self->tracks; t; t = t->next)
        if (t->task == task)
            return t;
    return NULL;
}

static void
s_track_free (s_track_t *t)
{
    s_ckpt_free (&t->unacked);
    for (size_t i = 0; i < t->ninherited; i++)
        free (t->inherited[i]);
    free (t->inherited);
    free (t->trial_store);
    free (t->store);
    free (t);
}

cgq_checkpoints_t *
cgq_checkpoints_new (const cgq_checkpoints_opts_t *opts)
{
    cgq_checkpoints_t *self = cgq_xcalloc (1, sizeof *self);
    self->opts = *opts;
    self->opts.workdir = cgq_xstrdup (opts->workdir);
    self->opts.store = cgq_xstrdup (opts->store);
    self->opts.host = cgq_xstrdup (opts->host ? opts->host : "");
    cgq_sweep_dead (opts->workdir, S_PREFIX);
    self->staging = cgq_xasprintf ("%s/" S_PREFIX "%d", opts->workdir, (int) getpid ());
    if (mkdir (self->staging, 0700) < 0 && errno != EEXIST) {
        cgq_error ("cannot create %s (checkpoints are staged there): %s", self->staging,
                   strerror (errno));
        cgq_checkpoints_destroy (&self);
        return NULL;
    }
    self->sealer = cgq_sealer_new ();
    if (!self->sealer) {
        cgq_checkpoints_destroy (&self);
        return NULL;
    }
    return self;
}

void
cgq_checkpoints_destroy (cgq_checkpoints_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cgq_checkpoints_t *self = *self_p;
    cgq_sealer_destroy (&self->sealer);
    while (self->tracks) {
        s_track_t *t = self->tracks;
        self->tracks = t->next;
        s_track_free (t);
    }
    cgq_checkpoints_drop_starting (self);
    if (self->staging)
        cgq_rm_tree (self->staging);
    free (self->staging);
    free (self->refs);
    free ((char *) self->opts.workdir);
    free ((char *) self->opts.store);
    free ((char *) self->opts.host);
    free (self);
    *self_p = NULL;
}

// --- resumed starts ------------------------------------------------------------------

static Cgq__Assign *
s_assign_dup (const Cgq__Assign *a)
{
    size_t len = cgq__assign__get_packed_size (a);
    uint8_t *buf = cgq_xmalloc (len ? len : 1);
    cgq__assign__pack (a, buf);
    Cgq__Assign *copy = cgq__assign__unpack (NULL, len, buf);
    free (buf);
    return copy;
}

void
cgq_checkpoints_restore (cgq_checkpoints_t *self, const Cgq__Assign *assign)
{
    s_pending_t *p = cgq_xcalloc (1, sizeof *p);
    p->assign = s_assign_dup (assign);
    if (!p->assign) {
        fprintf (stderr, "cgq-worker: cannot copy an Assign (out of memory)\n");
        abort ();
    }
    const Cgq__TaskRef *ref = assign->task;
    p->dst = cgq_xasprintf ("%s/%" PRIu64 ".%" PRIu64 ".%u.%u-restore-%" PRIu64, self->staging,
                            ref->job, ref->trial, ref->attempt, ref->stage, ++self->staged);
    p->next = self->pending;
    self->pending = p;
    cgq_seal_job_t *job = cgq_seal_job_new (CGQ_RESTORE, ref);
    job->dst = cgq_xstrdup (p->dst);
    job->cands = cgq_xcalloc (assign->n_resume, sizeof *job->cands);
    for (size_t i = 0; i < assign->n_resume; i++) {
        const Cgq__Checkpoint *c = assign->resume[i];
        cgq_seal_cand_t *k = &job->cands[job->ncands++];
        k->path = cgq_xstrdup (c->path ? c->path : "");
        k->sha256 = cgq_xstrdup (c->sha256 ? c->sha256 : "");
        k->step_json = cgq_xstrdup (c->step_json && *c->step_json ? c->step_json : "{}");
        k->host = cgq_xstrdup (c->host ? c->host : "");
        k->attempt = c->task ? c->task->attempt : 0;
        k->n = c->n;
    }
    cgq_tinfo (ref->job, ref->trial, ref->attempt,
               "restoring its checkpoint (%zu recorded; the newest: %s) before it starts",
               assign->n_resume, job->cands[0].path);
    cgq_sealer_push (self->sealer, job);
}

size_t
cgq_checkpoints_starting (cgq_checkpoints_t *self, const Cgq__TaskRef ***refs)
{
    size_t n = 0;
    for (s_pending_t *p = self->pending; p; p = p->next)
        n++;
    self->refs = cgq_xrealloc (self->refs, (n + 1) * sizeof *self->refs);
    n = 0;
    for (s_pending_t *p = self->pending; p; p = p->next)
        if (!p->stop_reason)
            self->refs[n++] = p->assign->task;
    *refs = self->refs;
    return n;
}

bool
cgq_checkpoints_stop (cgq_checkpoints_t *self, const Cgq__TaskRef *ref, const char *reason)
{
    for (s_pending_t *p = self->pending; p; p = p->next)
        if (s_same (p->assign->task, ref)) {
            if (!p->stop_reason) {
                p->stop_reason = cgq_xstrdup (reason ? reason : "stopped");
                // Its result now: the restore's end only cleans up.
                char *e = cgq_xasprintf ("stopped: %s", p->stop_reason);
                cgq_link_result (self->opts.link,
                                 cgq_result_new (ref, CGQ__TASK_STATUS__TASK_STOPPED, NULL, e));
                free (e);
            }
            return true;
        }
    return false;
}

static void
s_restored (cgq_checkpoints_t *self, cgq_seal_job_t *job)
{
    s_pending_t **pp = &self->pending;
    while (*pp && !s_same ((*pp)->assign->task, &job->ref))
        pp = &(*pp)->next;
    s_pending_t *p = *pp;
    if (!p) {
        if (job->used >= 0) // dropped at shutdown meanwhile
            cgq_rm_tree (job->dst);
        return;
    }
    *pp = p->next;
    const Cgq__TaskRef *ref = &job->ref;
    if (p->stop_reason) {
        if (job->used >= 0) {
            cgq_seal_job_t *rm = cgq_seal_job_new (CGQ_REMOVE, ref);
            rm->src = cgq_xstrdup (job->dst);
            s_clean (self, rm);
        }
    }
    else {
        cgq_buf_t notes;
        cgq_buf_init (&notes);
        if (job->notes) {
            cgq_buf_puts (&notes, job->notes);
            cgq_twarn (ref->job, ref->trial, ref->attempt, "%s", job->notes);
        }
        const cgq_seal_cand_t *c = job->used >= 0 ? &job->cands[job->used] : NULL;
        char name[48];
        if (c) {
            cgq_ckpt_name (name, c->attempt, c->n);
            cgq_buf_printf (&notes, "%sresumed from checkpoint %s (step %s, sealed on %s): %s",
                            notes.len ? "\n" : "", name, c->step_json,
                            *c->host ? c->host : "?", c->path);
            cgq_tinfo (ref->job, ref->trial, ref->attempt, "resumes from checkpoint %s (step %s)",
                       c->path, c->step_json);
        }
        else {
            cgq_buf_printf (&notes, "%sno recorded checkpoint passed its check: starting afresh",
                            notes.len ? "\n" : "");
            cgq_twarn (ref->job, ref->trial, ref->attempt,
                       "no recorded checkpoint passed its check: starting afresh");
        }
        self->opts.start (self->opts.arg, p->assign, c ? job->dst : NULL,
                          c ? c->step_json : NULL, notes.data);
        cgq_buf_fini (&notes);
        if (c && access (job->dst, F_OK) == 0) // not taken (the task was not started)
            cgq_rm_tree (job->dst);
    }
    cgq__assign__free_unpacked (p->assign, NULL);
    free (p->dst);
    free (p->stop_reason);
    free (p);
}

size_t
cgq_checkpoints_drop_starting (cgq_checkpoints_t *self)
{
    size_t n = 0;
    while (self->pending) {
        s_pending_t *p = self->pending;
        self->pending = p->next;
        n += !p->stop_reason;
        cgq__assign__free_unpacked (p->assign, NULL);
        free (p->dst);
        free (p->stop_reason);
        free (p);
    }
    return n;
}

// --- seals ---------------------------------------------------------------------------

void
cgq_checkpoints_started (cgq_checkpoints_t *self, cgq_task_t *task, const char *store)
{
    const Cgq__TaskRef *ref = cgq_task_ref (task);
    s_track_t *t = s_track_of (self, ref);
    if (t) { // the same attempt ran here before (its track outlived it)
        t->task = t->live = task;
        return;
    }
    t = cgq_xcalloc (1, sizeof *t);
    cgq__task_ref__init (&t->ref);
    t->ref.job = ref->job;
    t->ref.trial = ref->trial;
    t->ref.stage = ref->stage;
    t->ref.attempt = ref->attempt;
    t->task = t->live = task;
    t->store = cgq_xstrdup (store && *store ? store : self->opts.store);
    t->trial_store = cgq_ckpt_trial_store (t->store, ref->job, ref->trial);
    t->next = self->tracks;
    self->tracks = t;
}

void
cgq_checkpoints_inherited (cgq_checkpoints_t *self, const cgq_task_t *task,
                           Cgq__Checkpoint *const *resume, size_t n)
{
    s_track_t *t = s_track_of_task (self, task);
    if (!t || !cgq_ckpt_store_is_url (t->trial_store))
        return;
    for (size_t i = 0; i < n; i++) {
        const Cgq__Checkpoint *c = resume[i];
        const char *slash = c && c->path ? strrchr (c->path, '/') : NULL;
        uint32_t a;
        uint64_t k;
        if (!slash || !cgq_ckpt_store_is_url (c->path)
            || !cgq_ckpt_parse_name (slash + 1, &a, &k) || a >= t->ref.attempt)
            continue;
        t->inherited = cgq_xrealloc (t->inherited, (t->ninherited + 1) * sizeof *t->inherited);
        t->inherited[t->ninherited++] = cgq_xstrdup (c->path);
    }
}

void
cgq_checkpoints_announce (cgq_checkpoints_t *self, cgq_task_t *task, const char *step_json,
                          uint64_t line)
{
    s_track_t *t = s_track_of_task (self, task);
    if (!t)
        return;
    const char *dir = cgq_task_checkpoint_dir (task);
    uint64_t n = ++t->next_n;
    char *src = cgq_xasprintf ("%s/%" PRIu64 ".%" PRIu64 ".%u.%u-%" PRIu64, self->staging,
                               t->ref.job, t->ref.trial, t->ref.attempt, t->ref.stage, n);
    // Handed over at once: from here on the trial writes into a new, empty
    // directory, and cannot change what is sealed (cgq.checkpoint() waits
    // for the new one before it returns).
    if (rename (dir, src) < 0) {
        int e = errno;
        cgq_task_warn (task, "checkpoint %" PRIu64 " (report line %" PRIu64 ", %s) not sealed: "
                             "cannot take %s: %s",
                       n, line, step_json, dir, strerror (e));
        free (src);
        if (e == ENOENT)
            mkdir (dir, 0700);
        return;
    }
    if (mkdir (dir, 0700) < 0)
        cgq_task_warn (task, "cannot make a new %s: %s", dir, strerror (errno));
    if (t->failed) {
        // Taken over all the same (the trial's cgq.checkpoint() waits for
        // that), and dropped: the task is being stopped.
        cgq_task_warn (task, "ignoring checkpoint announcement (report line %" PRIu64
                             "): an earlier checkpoint could not be sealed",
                       line);
        cgq_seal_job_t *rm = cgq_seal_job_new (CGQ_REMOVE, &t->ref);
        rm->src = src;
        s_clean (self, rm);
        return;
    }
    cgq_seal_job_t *job = cgq_seal_job_new (CGQ_SEAL, &t->ref);
    job->src = src;
    job->trial_store = cgq_xstrdup (t->trial_store);
    job->n = n;
    job->step_json = cgq_xstrdup (step_json);
    t->inflight++;
    cgq_tdebug (t->ref.job, t->ref.trial, t->ref.attempt, "sealing checkpoint %" PRIu64 " (%s)",
                n, step_json);
    cgq_sealer_push (self->sealer, job);
}

static void
s_send (cgq_checkpoints_t *self, s_track_t *t)
{
    cgq_link_checkpoint (self->opts.link, t->unacked);
    t->sent_ms = cgq_now_ms ();
}

static void
s_sealed (cgq_checkpoints_t *self, cgq_seal_job_t *job)
{
    s_track_t *t = s_track_of (self, &job->ref);
    if (!t)
        return;
    if (t->inflight)
        t->inflight--;
    const Cgq__TaskRef *r = &job->ref;
    if (job->rc < 0) {
        cgq_twarn (r->job, r->trial, r->attempt, "checkpoint %" PRIu64 " (%s) not sealed: %s",
                   job->n, job->step_json, job->err);
        if (t->live && !t->failed) {
            t->failed = true;
            // The task's seals still queued would each wait on the same
            // store: they are dropped, so that its end is not held up.
            cgq_sealer_cancel (self->sealer, r);
            char *e = cgq_xasprintf ("cannot seal checkpoint %" PRIu64 " (step %s) into the "
                                     "checkpoint store %s: %s",
                                     job->n, job->step_json, t->store, job->err);
            cgq_task_fail (t->live, e, self->opts.kill_grace_ms);
            free (e);
        }
        return;
    }
    if (job->info.note && t->live)
        cgq_task_warn (t->live, "checkpoint %" PRIu64 ": %s", job->n, job->info.note);
    s_ckpt_free (&t->unacked);
    Cgq__Checkpoint *c = cgq_xcalloc (1, sizeof *c);
    cgq__checkpoint__init (c);
    c->task = cgq_result_ref_dup (r);
    c->n = job->n;
    c->step_json = cgq_xstrdup (job->step_json);
    c->size = job->info.size;
    c->files = job->info.files;
    c->sha256 = cgq_xstrdup (job->info.sha256);
    c->path = cgq_xstrdup (job->info.path);
    c->host = cgq_xstrdup (self->opts.host);
    t->unacked = c;
    cgq_tinfo (r->job, r->trial, r->attempt,
               "checkpoint %" PRIu64 " (%s) sealed: %" PRIu64 " bytes in %" PRIu64
               " file(s), %s, sha256 %.12s...",
               c->n, c->step_json, c->size, c->files, c->path, c->sha256);
    s_send (self, t);
}

bool
cgq_checkpoints_sealing (const cgq_checkpoints_t *self, const cgq_task_t *task)
{
    const s_track_t *t = s_track_of_task (self, task);
    return t && t->inflight > 0;
}

void
cgq_checkpoints_ended (cgq_checkpoints_t *self, const cgq_task_t *task)
{
    s_track_t *t = s_track_of_task (self, task);
    if (!t)
        return;
    t->task = NULL;
    t->live = NULL;
    t->ended_ms = cgq_now_ms ();
}

static bool
s_kept (const Cgq__CheckpointAck *ack, const char *name)
{
    for (size_t i = 0; i < ack->n_keep; i++)
        if (ack->keep[i] && !strcmp (ack->keep[i], name))
            return true;
    return false;
}

void
cgq_checkpoints_ack (cgq_checkpoints_t *self, const Cgq__CheckpointAck *ack)
{
    if (!ack->task)
        return;
    s_track_t *t = s_track_of (self, ack->task);
    const Cgq__TaskRef *r = ack->task;
    if (!t) {
        cgq_tdebug (r->job, r->trial, r->attempt,
                    "CheckpointAck for checkpoint %" PRIu64 " of a task not known here", ack->n);
        return;
    }
    if (t->unacked && t->unacked->n == ack->n)
        s_ckpt_free (&t->unacked);
    char name[48];
    cgq_ckpt_name (name, r->attempt, ack->n);
    cgq_seal_job_t *job;
    if (ack->recorded) {
        // What the coordinator no longer refers to, older than this one, goes.
        job = cgq_seal_job_new (CGQ_PRUNE, r);
        job->trial_store = cgq_xstrdup (t->trial_store);
        job->n = ack->n;
        job->keep = cgq_xcalloc (ack->n_keep + 1, sizeof *job->keep);
        for (size_t i = 0; i < ack->n_keep; i++)
            if (ack->keep[i])
                job->keep[job->nkeep++] = cgq_xstrdup (ack->keep[i]);
        // An HTTP store's inherited ones the coordinator no longer names go too.
        size_t left = 0;
        for (size_t i = 0; i < t->ninherited; i++) {
            const char *slash = strrchr (t->inherited[i], '/');
            if (slash && s_kept (ack, slash + 1))
                t->inherited[left++] = t->inherited[i];
            else {
                job->extra = cgq_xrealloc (job->extra, (job->nextra + 1) * sizeof *job->extra);
                job->extra[job->nextra++] = t->inherited[i];
            }
        }
        t->ninherited = left;
    }
    else {
        cgq_tinfo (r->job, r->trial, r->attempt,
                   "checkpoint %" PRIu64 " was not recorded: %s", ack->n,
                   ack->reason && *ack->reason ? ack->reason : "refused");
        if (s_kept (ack, name))
            return;
        job = cgq_seal_job_new (CGQ_REMOVE, r);
        job->src = cgq_xasprintf ("%s/%s", t->trial_store, name);
    }
    s_clean (self, job);
}

int
cgq_checkpoints_fd (const cgq_checkpoints_t *self)
{
    return cgq_sealer_fd (self->sealer);
}

void
cgq_checkpoints_on_readable (cgq_checkpoints_t *self)
{
    cgq_seal_job_t *job;
    while ((job = cgq_sealer_take (self->sealer))) {
        switch (job->kind) {
        case CGQ_SEAL:
            s_sealed (self, job);
            break;
        case CGQ_RESTORE:
            s_restored (self, job);
            break;
        case CGQ_PRUNE:
            if (self->cleaning)
                self->cleaning--;
            if (job->removed)
                cgq_tdebug (job->ref.job, job->ref.trial, job->ref.attempt,
                            "removed %zu older checkpoint(s) of the trial", job->removed);
            break;
        case CGQ_REMOVE:
            if (self->cleaning)
                self->cleaning--;
            if (job->rc < 0)
                cgq_warn ("%s", job->err);
            break;
        }
        cgq_seal_job_free (&job);
    }
}

void
cgq_checkpoints_tick (cgq_checkpoints_t *self, int64_t now_ms)
{
    for (s_track_t **tp = &self->tracks; *tp;) {
        s_track_t *t = *tp;
        bool over = !t->task && !t->inflight
                    && (!t->unacked || now_ms - t->ended_ms >= S_FORGET_MS);
        if (over) {
            *tp = t->next;
            s_track_free (t);
            continue;
        }
        if (t->unacked && now_ms - t->sent_ms >= S_RESEND_MS)
            s_send (self, t);
        tp = &t->next;
    }
}

int64_t
cgq_checkpoints_deadline (const cgq_checkpoints_t *self)
{
    int64_t d = -1;
    for (const s_track_t *t = self->tracks; t; t = t->next) {
        int64_t due = -1;
        if (t->unacked)
            due = t->sent_ms + S_RESEND_MS;
        if (!t->task && !t->inflight && t->unacked) {
            int64_t forget = t->ended_ms + S_FORGET_MS;
            due = due < 0 || forget < due ? forget : due;
        }
        else if (!t->task && !t->inflight)
            due = 0; // free it now
        if (due >= 0 && (d < 0 || due < d))
            d = due;
    }
    return d;
}

size_t
cgq_checkpoints_unsettled (const cgq_checkpoints_t *self)
{
    size_t n = self->cleaning;
    for (const s_track_t *t = self->tracks; t; t = t->next)
        n += t->unacked != NULL;
    return n;
}
