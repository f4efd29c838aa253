#include "spare.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

#define S_PREFIX ".cgq-spare-"
#define S_MAX_KEEP 64
// The names of a chain's two lower levels: those of the first attempt of a
// job's first trial. A start whose trial or attempt has that name skips its
// rename (most starts are a first attempt; a job's first start is mostly
// its trial 0).
#define S_TRIAL "trial-0"
#define S_ATTEMPT "attempt-1"

// One spare chain ROOT/N/trial-0/attempt-1 (T and A below). have: how many
// of its levels exist (N, N/T, N/T/A with both logs open); busy: the thread
// is filling it, or a take is renaming it.
typedef struct {
    unsigned n;
    int have;
    bool busy;
    int out_fd, err_fd;
} s_slot_t;

struct cgq_spare_t {
    char *workdir;
    char *root; // WORKDIR/.cgq-spare-PID
    size_t keep;
    s_slot_t slots[S_MAX_KEEP];
    unsigned next_n;
    bool stop;
    bool started;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char last_job[PATH_MAX]; // WORKDIR/job-J of the last take (the taking thread's alone)
};

// s_fill makes the missing levels of a slot's chain and opens its logs
// (outside the lock). Returns the new `have`.
static int
s_fill (cgq_spare_t *self, s_slot_t *s)
{
    char path[PATH_MAX];
    int have = s->have;
    if (have == 0) {
        // The pool's own directory, again if someone removed it.
        if (mkdir (self->root, 0700) < 0 && errno != EEXIST)
            return have;
        snprintf (path, sizeof path, "%s/%u", self->root, s->n);
        if (mkdir (path, 0755) < 0)
            return have;
        have = 1;
    }
    if (have == 1) {
        snprintf (path, sizeof path, "%s/%u/" S_TRIAL, self->root, s->n);
        if (mkdir (path, 0755) < 0)
            return have;
        have = 2;
    }
    snprintf (path, sizeof path, "%s/%u/" S_TRIAL "/" S_ATTEMPT, self->root, s->n);
    if (mkdir (path, 0700) < 0)
        return have;
    int fds[2] = {-1, -1};
    const char *names[2] = {"stdout.log", "stderr.log"};
    for (int i = 0; i < 2; i++) {
        snprintf (path, sizeof path, "%s/%u/" S_TRIAL "/" S_ATTEMPT "/%s", self->root, s->n,
                  names[i]);
        fds[i] = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fds[i] < 0) {
            if (i == 1)
                close (fds[0]);
            return have;
        }
    }
    // The trial's CGQ_CHECKPOINT_DIR, empty (task.c).
    snprintf (path, sizeof path, "%s/%u/" S_TRIAL "/" S_ATTEMPT "/checkpoint", self->root, s->n);
    if (mkdir (path, 0700) < 0 && errno != EEXIST) {
        close (fds[0]);
        close (fds[1]);
        return have;
    }
    s->out_fd = fds[0];
    s->err_fd = fds[1];
    return 3;
}

static void *
s_run (void *arg)
{
    cgq_spare_t *self = arg;
    // The worker's signals are for its main thread.
    sigset_t all;
    sigfillset (&all);
    pthread_sigmask (SIG_BLOCK, &all, NULL);
    pthread_mutex_lock (&self->mu);
    while (!self->stop) {
        s_slot_t *s = NULL;
        for (size_t i = 0; i < self->keep && !s; i++)
            if (!self->slots[i].busy && self->slots[i].have < 3)
                s = &self->slots[i];
        if (!s) {
            pthread_cond_wait (&self->cv, &self->mu);
            continue;
        }
        s->busy = true;
        if (s->have == 0)
            s->n = self->next_n++;
        pthread_mutex_unlock (&self->mu);
        int have = s_fill (self, s);
        pthread_mutex_lock (&self->mu);
        bool failed = have < 3;
        if (failed) {
            // A full disk, a removed workdir: starts go the plain way (and
            // say why); try again in a second.
            s->have = 0;
            s->busy = false;
            struct timespec until;
            clock_gettime (CLOCK_REALTIME, &until);
            until.tv_sec += 1;
            if (!self->stop)
                pthread_cond_timedwait (&self->cv, &self->mu, &until);
            continue;
        }
        s->have = have;
        s->busy = false;
    }
    pthread_mutex_unlock (&self->mu);
    return NULL;
}

cgq_spare_t *
cgq_spare_new (const char *workdir, size_t keep)
{
    cgq_sweep_dead (workdir, S_PREFIX);
    cgq_spare_t *self = cgq_xcalloc (1, sizeof *self);
    self->workdir = cgq_xstrdup (workdir);
    self->root = cgq_xasprintf ("%s/" S_PREFIX "%d", workdir, (int) getpid ());
    self->keep = keep < 1 ? 1 : keep > S_MAX_KEEP ? S_MAX_KEEP : keep;
    for (size_t i = 0; i < S_MAX_KEEP; i++)
        self->slots[i] = (s_slot_t){.out_fd = -1, .err_fd = -1};
    pthread_mutex_init (&self->mu, NULL);
    pthread_cond_init (&self->cv, NULL);
    if (mkdir (self->root, 0700) < 0 && errno != EEXIST) {
        cgq_warn ("cannot create %s: %s (trial directories are made when a trial starts)",
                  self->root, strerror (errno));
        cgq_spare_destroy (&self);
        return NULL;
    }
    int rc = pthread_create (&self->thread, NULL, s_run, self);
    if (rc != 0) {
        cgq_warn ("cannot start the thread that makes trial directories ahead: %s", strerror (rc));
        cgq_spare_destroy (&self);
        return NULL;
    }
    self->started = true;
    return self;
}

void
cgq_spare_destroy (cgq_spare_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cgq_spare_t *self = *self_p;
    if (self->started) {
        pthread_mutex_lock (&self->mu);
        self->stop = true;
        pthread_cond_broadcast (&self->cv);
        pthread_mutex_unlock (&self->mu);
        pthread_join (self->thread, NULL);
    }
    for (size_t i = 0; i < S_MAX_KEEP; i++) {
        if (self->slots[i].out_fd >= 0)
            close (self->slots[i].out_fd);
        if (self->slots[i].err_fd >= 0)
            close (self->slots[i].err_fd);
    }
    cgq_rm_at (AT_FDCWD, self->root);
    pthread_cond_destroy (&self->cv);
    pthread_mutex_destroy (&self->mu);
    free (self->root);
    free (self->workdir);
    free (self);
    *self_p = NULL;
}

size_t
cgq_spare_ready (cgq_spare_t *self)
{
    size_t n = 0;
    pthread_mutex_lock (&self->mu);
    for (size_t i = 0; i < self->keep; i++)
        n += !self->slots[i].busy && self->slots[i].have == 3;
    pthread_mutex_unlock (&self->mu);
    return n;
}

// s_move renames from to to, never replacing what is there.
static int
s_move (const char *from, const char *to)
{
    return renameat2 (AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE);
}

// s_rename_to is s_move, or nothing when from already has the name of to
// (same: their paths are equal).
static int
s_rename_to (const char *from, const char *to, bool same)
{
    return same ? 0 : s_move (from, to);
}

int
cgq_spare_take (cgq_spare_t *self, const char *dir, int *out_fd, int *err_fd)
{
    // dir must be WORKDIR/X/Y/Z.
    size_t wlen = strlen (self->workdir);
    if (strncmp (dir, self->workdir, wlen) != 0 || dir[wlen] != '/' || strlen (dir) >= PATH_MAX)
        return -1;
    const char *x = dir + wlen + 1;
    const char *y = strchr (x, '/');
    const char *z = y ? strchr (y + 1, '/') : NULL;
    if (!y || !z || y == x || z == y + 1 || !z[1] || strchr (z + 1, '/'))
        return -1;

    s_slot_t *s = NULL;
    pthread_mutex_lock (&self->mu);
    for (size_t i = 0; i < self->keep && !s; i++)
        if (!self->slots[i].busy && self->slots[i].have == 3)
            s = &self->slots[i];
    if (s)
        s->busy = true;
    pthread_mutex_unlock (&self->mu);
    if (!s)
        return -1;

    char job[PATH_MAX], trial[PATH_MAX];
    char chain[PATH_MAX + 32], chain_t[PATH_MAX + 48], chain_a[PATH_MAX + 64];
    char moved_t[PATH_MAX + 16], moved_a[PATH_MAX + 16];
    snprintf (job, sizeof job, "%.*s", (int) (y - dir), dir);
    snprintf (trial, sizeof trial, "%.*s", (int) (z - dir), dir);
    snprintf (chain, sizeof chain, "%s/%u", self->root, s->n);
    snprintf (chain_t, sizeof chain_t, "%s/" S_TRIAL, chain);
    snprintf (chain_a, sizeof chain_a, "%s/" S_TRIAL "/" S_ATTEMPT, chain);
    snprintf (moved_t, sizeof moved_t, "%s/" S_TRIAL, job);
    snprintf (moved_a, sizeof moved_a, "%s/" S_ATTEMPT, trial);
    // Levels that already have their names stay (s_rename_to).
    bool same_t = (size_t) (z - y - 1) == strlen (S_TRIAL)
                  && !strncmp (y + 1, S_TRIAL, strlen (S_TRIAL));
    bool same_a = !strcmp (z + 1, S_ATTEMPT);
    // A job other than the last one taken for is most likely new here: the
    // whole chain first (where job-J exists that fails, changing nothing).
    // Else the attempt alone, then trial and attempt. A rename that fails
    // costs a path walk; one that works, a journal entry.
    bool fresh = strcmp (self->last_job, job) != 0;
    int have = -1; // what is left of the chain; -1: failed
    bool whole = fresh && s_move (chain, job) == 0;
    if (!whole) {
        if ((!fresh || errno == EEXIST) && s_move (chain_a, dir) == 0)
            have = 2; // trial-T was there
        else if (errno == ENOENT && s_move (chain_t, trial) == 0)
            have = s_rename_to (moved_a, dir, same_a) == 0 ? 1 : -1; // job-J was there
        else if (!fresh && errno == ENOENT && s_move (chain, job) == 0)
            whole = true; // job-J was not there after all (the last job's directory went away)
    }
    if (whole) // the chain is job-J now: its two lower levels get their names
        have = s_rename_to (moved_t, trial, same_t) == 0 && s_rename_to (moved_a, dir, same_a) == 0
                   ? 0
                   : -1;
    if (have >= 0)
        snprintf (self->last_job, sizeof self->last_job, "%s", job);
    bool ok = have >= 0;
    pthread_mutex_lock (&self->mu);
    if (ok) {
        *out_fd = s->out_fd;
        *err_fd = s->err_fd;
    }
    else {
        // Whatever is left of this chain stays under the root (removed with
        // it); the slot starts a new one.
        close (s->out_fd);
        close (s->err_fd);
        have = 0;
    }
    s->out_fd = s->err_fd = -1;
    s->have = have;
    s->busy = false;
    // A chain taken is made again on cgq_spare_refill; one lost on the way
    // at once (the caller makes its directory the plain way meanwhile).
    if (!ok)
        pthread_cond_signal (&self->cv);
    pthread_mutex_unlock (&self->mu);
    return ok ? 0 : -1;
}

void
cgq_spare_refill (cgq_spare_t *self)
{
    if (!self)
        return;
    pthread_mutex_lock (&self->mu);
    pthread_cond_signal (&self->cv);
    pthread_mutex_unlock (&self->mu);
}
