// sealer: one thread that seals, restores and prunes checkpoints (ckpt.h)
// for the worker's loop.
#include "sealer.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt_store.h"
#include "log.h"
#include "util.h"

struct cgq_sealer_t {
    pthread_t thread;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    cgq_seal_job_t *todo, *todo_tail; // pushed, not started
    cgq_seal_job_t *done, *done_tail; // finished, not taken
    bool stop;
    int pipe[2]; // a byte per finished job: [0] polled by the loop
};

// Set when a sealer is destroyed: a seal or restore in progress stops
// (ckpt.c reads it between chunks). One worker, one sealer.
static volatile bool s_abort;

cgq_seal_job_t *
cgq_seal_job_new (cgq_seal_kind_t kind, const Cgq__TaskRef *ref)
{
    cgq_seal_job_t *job = cgq_xcalloc (1, sizeof *job);
    job->kind = kind;
    cgq__task_ref__init (&job->ref);
    if (ref) {
        job->ref.job = ref->job;
        job->ref.trial = ref->trial;
        job->ref.stage = ref->stage;
        job->ref.attempt = ref->attempt;
    }
    job->used = -1;
    return job;
}

void
cgq_seal_job_free (cgq_seal_job_t **job_p)
{
    if (!job_p || !*job_p)
        return;
    cgq_seal_job_t *job = *job_p;
    free (job->src);
    free (job->trial_store);
    free (job->step_json);
    for (size_t i = 0; i < job->ncands; i++) {
        free (job->cands[i].path);
        free (job->cands[i].sha256);
        free (job->cands[i].step_json);
        free (job->cands[i].host);
    }
    free (job->cands);
    free (job->dst);
    for (size_t i = 0; i < job->nkeep; i++)
        free (job->keep[i]);
    free (job->keep);
    for (size_t i = 0; i < job->nextra; i++)
        free (job->extra[i]);
    free (job->extra);
    cgq_ckpt_info_fini (&job->info);
    free (job->notes);
    free (job);
    *job_p = NULL;
}

// s_restore tries each candidate in turn; the notes say why one was passed
// over, for the trial's log.
static void
s_restore (cgq_seal_job_t *job)
{
    cgq_buf_t notes;
    cgq_buf_init (&notes);
    job->used = -1;
    for (size_t i = 0; i < job->ncands; i++) {
        const cgq_seal_cand_t *c = &job->cands[i];
        char name[48], why[1024] = "";
        cgq_ckpt_name (name, c->attempt, c->n);
        if (cgq_ckpt_restore (c->path, c->sha256, job->dst, why, sizeof why) == 0) {
            job->used = (int) i;
            break;
        }
        cgq_buf_printf (&notes, "%scheckpoint %s (step %s, sealed on %s, %s) not used: %s",
                        notes.len ? "\n" : "", name, c->step_json ? c->step_json : "{}",
                        c->host && *c->host ? c->host : "?", c->path, why);
        if (!cgq_ckpt_store_is_url (c->path) && access (c->path, F_OK) < 0 && errno == ENOENT)
            cgq_buf_printf (&notes, " (a store only its worker sees: set checkpoint.store "
                                    "to a directory every worker shares)");
    }
    job->notes = notes.len ? cgq_buf_take (&notes) : NULL;
    cgq_buf_fini (&notes);
    job->rc = 0;
}

void
cgq_sealer_run_job (cgq_seal_job_t *job)
{
    job->rc = 0;
    switch (job->kind) {
    case CGQ_SEAL:
        if (job->cancelled) {
            cgq_rm_tree (job->src);
            snprintf (job->err, sizeof job->err,
                      "not sealed: an earlier checkpoint of this attempt could not be");
            job->rc = -1;
            break;
        }
        job->rc = cgq_ckpt_seal (job->src, job->trial_store, job->ref.attempt, job->n,
                                 &job->info, job->err, sizeof job->err);
        break;
    case CGQ_RESTORE:
        s_restore (job);
        break;
    case CGQ_PRUNE:
        job->removed = cgq_ckpt_prune (job->trial_store, job->ref.attempt, job->n, job->keep,
                                       job->nkeep);
        for (size_t i = 0; i < job->nextra; i++)
            if (cgq_ckpt_delete (job->extra[i], job->err, sizeof job->err) == 0)
                job->removed++;
        break;
    case CGQ_REMOVE:
        if (job->src && cgq_ckpt_store_is_url (job->src)) // a refused one over HTTP
            job->rc = cgq_ckpt_delete (job->src, job->err, sizeof job->err);
        else if (job->src && cgq_rm_tree (job->src) < 0) {
            snprintf (job->err, sizeof job->err, "cannot remove %s: %s", job->src,
                      strerror (errno));
            job->rc = -1;
        }
        break;
    }
}

static void
s_append (cgq_seal_job_t **head, cgq_seal_job_t **tail, cgq_seal_job_t *job)
{
    job->next = NULL;
    if (*tail)
        (*tail)->next = job;
    else
        *head = job;
    *tail = job;
}

static void
s_done (cgq_sealer_t *self, cgq_seal_job_t *job)
{
    s_append (&self->done, &self->done_tail, job);
    char b = 1;
    while (write (self->pipe[1], &b, 1) < 0 && errno == EINTR)
        ;
}

static void *
s_run (void *arg)
{
    cgq_sealer_t *self = arg;
    // Signals are the loop's (SIGCHLD wakes it through its own pipe).
    sigset_t all;
    sigfillset (&all);
    pthread_sigmask (SIG_BLOCK, &all, NULL);
    pthread_mutex_lock (&self->mu);
    for (;;) {
        while (!self->todo && !self->stop)
            pthread_cond_wait (&self->cv, &self->mu);
        if (self->stop)
            break;
        cgq_seal_job_t *job = self->todo;
        self->todo = job->next;
        if (!self->todo)
            self->todo_tail = NULL;
        pthread_mutex_unlock (&self->mu);
        cgq_sealer_run_job (job);
        pthread_mutex_lock (&self->mu);
        s_done (self, job);
    }
    pthread_mutex_unlock (&self->mu);
    return NULL;
}

cgq_sealer_t *
cgq_sealer_new (void)
{
    cgq_sealer_t *self = cgq_xcalloc (1, sizeof *self);
    if (pipe2 (self->pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
        cgq_error ("cannot make the checkpoint thread's pipe: %s", strerror (errno));
        free (self);
        return NULL;
    }
    // Above fd 3, like every fd of the worker's (a trial's fds 0-3 are dup2'd).
    for (int i = 0; i < 2; i++)
        if (self->pipe[i] <= 3) {
            int moved = fcntl (self->pipe[i], F_DUPFD_CLOEXEC, 4);
            if (moved >= 0) {
                close (self->pipe[i]);
                self->pipe[i] = moved;
            }
        }
    pthread_mutex_init (&self->mu, NULL);
    pthread_cond_init (&self->cv, NULL);
    cgq_ckpt_abort = &s_abort;
    cgq_ckpt_store_abort = &s_abort;
    return self;
}

void
cgq_sealer_push (cgq_sealer_t *self, cgq_seal_job_t *job)
{
    pthread_mutex_lock (&self->mu);
    if (!self->started) {
        int rc = pthread_create (&self->thread, NULL, s_run, self);
        if (rc != 0) {
            pthread_mutex_unlock (&self->mu);
            cgq_warn ("cannot start the checkpoint thread (%s): this checkpoint work runs in "
                      "the worker's loop",
                      strerror (rc));
            cgq_sealer_run_job (job);
            pthread_mutex_lock (&self->mu);
            s_done (self, job);
            pthread_mutex_unlock (&self->mu);
            return;
        }
        self->started = true;
    }
    s_append (&self->todo, &self->todo_tail, job);
    pthread_cond_signal (&self->cv);
    pthread_mutex_unlock (&self->mu);
}

void
cgq_sealer_cancel (cgq_sealer_t *self, const Cgq__TaskRef *ref)
{
    pthread_mutex_lock (&self->mu);
    for (cgq_seal_job_t *j = self->todo; j; j = j->next)
        if (j->kind == CGQ_SEAL && j->ref.job == ref->job && j->ref.trial == ref->trial
            && j->ref.stage == ref->stage && j->ref.attempt == ref->attempt)
            j->cancelled = true;
    pthread_mutex_unlock (&self->mu);
}

int
cgq_sealer_fd (const cgq_sealer_t *self)
{
    return self->pipe[0];
}

cgq_seal_job_t *
cgq_sealer_take (cgq_sealer_t *self)
{
    char b;
    pthread_mutex_lock (&self->mu);
    cgq_seal_job_t *job = self->done;
    if (job) {
        self->done = job->next;
        if (!self->done)
            self->done_tail = NULL;
        job->next = NULL;
        while (read (self->pipe[0], &b, 1) < 0 && errno == EINTR)
            ;
    }
    pthread_mutex_unlock (&self->mu);
    return job;
}

static void
s_free_list (cgq_seal_job_t *job)
{
    while (job) {
        cgq_seal_job_t *next = job->next;
        cgq_seal_job_free (&job);
        job = next;
    }
}

void
cgq_sealer_destroy (cgq_sealer_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cgq_sealer_t *self = *self_p;
    if (self->started) {
        pthread_mutex_lock (&self->mu);
        self->stop = true;
        s_abort = true;
        pthread_cond_broadcast (&self->cv);
        pthread_mutex_unlock (&self->mu);
        pthread_join (self->thread, NULL);
        s_abort = false;
    }
    s_free_list (self->todo);
    s_free_list (self->done);
    pthread_mutex_destroy (&self->mu);
    pthread_cond_destroy (&self->cv);
    close (self->pipe[0]);
    close (self->pipe[1]);
    if (cgq_ckpt_abort == &s_abort)
        cgq_ckpt_abort = NULL;
    if (cgq_ckpt_store_abort == &s_abort)
        cgq_ckpt_store_abort = NULL;
    free (self);
    *self_p = NULL;
}
