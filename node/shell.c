#include "shell.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "log.h"
#include "util.h"

#define S_MAX_POLL_MS 1000 // reap children even if a SIGCHLD got lost
#define S_STOP_SLACK_MS 2000 // the wait for stopped tasks beyond their grace
// How long a stopping node waits for the Acks of results it still holds.
// The coordinator acks a result only once Redis has had its --durable-after
// (default 3 s) to put it on disk, so wait a little longer than that.
#define S_SHUTDOWN_ACK_MS 5000

// The handlers' state is the process's (one shell per process).
static volatile sig_atomic_t s_stop = 0;
static volatile sig_atomic_t s_child_exited = 0; // a SIGCHLD since the last reap
// The self-pipe: its write end is -1 before cgq_shell_new and after
// cgq_shell_destroy, so a late signal writes nowhere.
static volatile sig_atomic_t s_sig_wr = -1;
static int s_sig_rd = -1;

static void
s_on_signal (int sig)
{
    int saved = errno;
    if (sig == SIGTERM || sig == SIGINT)
        s_stop = sig;
    if (sig == SIGCHLD)
        s_child_exited = 1;
    char c = (char) sig;
    if (s_sig_wr >= 0)
        (void) !write (s_sig_wr, &c, 1);
    errno = saved;
}

struct cgq_shell_t {
    cgq_shell_ops_t ops;
    void *arg;
    void *ctx;        // ZeroMQ context (cgq_shell_connect)
    cgq_link_t *link;
    bool batches;     // results of a turn are held for one ResultBatch
    // This turn's poll set: items and, for the program's fds, their owners.
    zmq_pollitem_t *items;
    void **owners;
    size_t n, cap;
    int64_t deadline; // this turn's wake-up (cgq_shell_due)
    char quit[128];   // cgq_shell_quit's reason; "" while none
};

cgq_shell_t *
cgq_shell_new (const char *prog, const cgq_shell_ops_t *ops, void *arg)
{
    int p[2];
    if (pipe2 (p, O_CLOEXEC | O_NONBLOCK) < 0) {
        fprintf (stderr, "%s: cannot create the signal pipe: %s\n", prog, strerror (errno));
        return NULL;
    }
    s_sig_rd = p[0];
    s_sig_wr = p[1];
    s_stop = 0;
    s_child_exited = 0;
    struct sigaction sa;
    memset (&sa, 0, sizeof sa);
    sa.sa_handler = s_on_signal;
    sigemptyset (&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction (SIGTERM, &sa, NULL);
    sigaction (SIGINT, &sa, NULL);
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigaction (SIGCHLD, &sa, NULL);
    signal (SIGPIPE, SIG_IGN);

    cgq_shell_t *self = cgq_xcalloc (1, sizeof *self);
    self->ops = *ops;
    self->arg = arg;
    return self;
}

static void
s_disconnect (cgq_shell_t *self)
{
    cgq_link_destroy (&self->link);
    if (self->ctx)
        zmq_ctx_term (self->ctx);
    self->ctx = NULL;
}

void
cgq_shell_destroy (cgq_shell_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cgq_shell_t *self = *self_p;
    s_disconnect (self);
    // The write end goes first: a handler that runs meanwhile sees -1.
    int wr = s_sig_wr;
    s_sig_wr = -1;
    if (wr >= 0)
        close (wr);
    if (s_sig_rd >= 0)
        close (s_sig_rd);
    s_sig_rd = -1;
    free (self->items);
    free (self->owners);
    free (self);
    *self_p = NULL;
}

int
cgq_shell_connect (cgq_shell_t *self, const cgq_link_opts_t *opts)
{
    self->ctx = zmq_ctx_new ();
    self->link = cgq_link_new (self->ctx, opts, self->ops.running, self->arg);
    if (!self->link) {
        s_disconnect (self);
        return -1;
    }
    self->batches = opts->batches;
    return 0;
}

cgq_link_t *
cgq_shell_link (cgq_shell_t *self)
{
    return self->link;
}

static void
s_add (cgq_shell_t *self, void *socket, int fd, void *owner)
{
    if (self->n == self->cap) {
        self->cap = self->cap ? 2 * self->cap : 16;
        self->items = cgq_xrealloc (self->items, self->cap * sizeof *self->items);
        self->owners = cgq_xrealloc (self->owners, self->cap * sizeof *self->owners);
    }
    zmq_pollitem_t *it = &self->items[self->n];
    memset (it, 0, sizeof *it);
    it->socket = socket;
    it->fd = fd;
    it->events = ZMQ_POLLIN;
    self->owners[self->n++] = owner;
}

void
cgq_shell_watch (cgq_shell_t *self, int fd, void *owner)
{
    s_add (self, NULL, fd, owner);
}

void
cgq_shell_due (cgq_shell_t *self, int64_t at_ms)
{
    if (at_ms >= 0 && at_ms < self->deadline)
        self->deadline = at_ms;
}

// s_poll waits for the link's socket (with_link), the signal pipe and the
// program's fds (with_work) until deadline or the program's nearest timer,
// then hands the program's ready fds to it.
static void
s_poll (cgq_shell_t *self, bool with_link, bool with_work, int64_t deadline)
{
    self->n = 0;
    self->deadline = deadline;
    // The socket is NULL for a moment when a reconnect could not open one.
    if (with_link && self->link && cgq_link_socket (self->link))
        s_add (self, cgq_link_socket (self->link), -1, NULL);
    s_add (self, NULL, s_sig_rd, NULL);
    size_t first = self->n;
    if (with_work && self->ops.watch)
        self->ops.watch (self->arg, self);
    int64_t now = cgq_now_ms ();
    long timeout = self->deadline <= now ? 0 : (long) (self->deadline - now);
    if (timeout > S_MAX_POLL_MS)
        timeout = S_MAX_POLL_MS;
    int rc = zmq_poll (self->items, (int) self->n, timeout);
    if (rc < 0 && errno != EINTR)
        cgq_warn ("zmq_poll: %s", zmq_strerror (errno));
    if (rc > 0) {
        char junk[64];
        while (read (s_sig_rd, junk, sizeof junk) > 0)
            ;
        for (size_t i = first; i < self->n; i++)
            if (self->items[i].revents & (ZMQ_POLLIN | ZMQ_POLLERR))
                self->ops.readable (self->arg, self->owners[i], self->items[i].fd);
    }
}

static size_t
s_reap (cgq_shell_t *self, bool report)
{
    s_child_exited = 0;
    return self->ops.reap (self->arg, report);
}

// s_assigned hands one Assign to the program. A wave of Assigns takes a
// while to start (~1 ms each for the worker): what ends meanwhile (a
// SIGCHLD came) is reported after each start, not after the wave, so
// that its slots are refilled without waiting.
static void
s_assigned (cgq_shell_t *self, const Cgq__Assign *a)
{
    self->ops.assign (self->arg, a);
    if (self->batches && s_child_exited) {
        s_reap (self, !s_stop);
        cgq_link_release (self->link);
        cgq_link_hold (self->link);
    }
}

int
cgq_shell_run (cgq_shell_t *self)
{
    cgq_link_t *link = self->link;
    while (!s_stop && !*self->quit) {
        s_poll (self, true, true, cgq_link_deadline (link));
        // What ends while this turn handles what came in goes out at its
        // end, as one ResultBatch: a wave of no-op tasks is one message.
        if (self->batches)
            cgq_link_hold (link);
        // Always try the socket: ZeroMQ readiness is edge-triggered.
        cgq_env_t *env;
        while (!s_stop && (env = cgq_link_recv (link))) {
            if (env->body_case == CGQ__ENVELOPE__BODY_ASSIGN)
                s_assigned (self, env->assign);
            else if (env->body_case == CGQ__ENVELOPE__BODY_ASSIGN_BATCH)
                for (size_t i = 0; i < env->assign_batch->n_assigns; i++)
                    s_assigned (self, env->assign_batch->assigns[i]);
            else if (env->body_case == CGQ__ENVELOPE__BODY_STOP)
                self->ops.stop (self->arg, env->stop);
            else if (env->body_case == CGQ__ENVELOPE__BODY_CHECKPOINT_ACK
                     && self->ops.checkpoint_ack)
                self->ops.checkpoint_ack (self->arg, env->checkpoint_ack);
            cgq_wire_free (env);
        }
        if (self->ops.turn)
            self->ops.turn (self->arg);
        // A signal to stop that came with this turn: what ended meanwhile
        // may have ended by the same signal (Slurm signals every process of
        // the job at once): dropped, as at shutdown, and so run again.
        s_reap (self, !s_stop);
        if (self->batches)
            cgq_link_release (link);
        cgq_link_tick (link, cgq_now_ms ());
    }
    if (!s_stop) {
        cgq_info ("%s; shutting down", self->quit);
        return 0;
    }
    cgq_info ("received %s; shutting down", s_stop == SIGINT ? "SIGINT" : "SIGTERM");
    return s_stop;
}

void
cgq_shell_quit (cgq_shell_t *self, const char *why)
{
    snprintf (self->quit, sizeof self->quit, "%s", why && *why ? why : "asked to stop");
}

void
cgq_shell_shutdown (cgq_shell_t *self, int64_t grace_ms)
{
    cgq_link_t *link = self->link;
    if (!link)
        return;
    // First of all: no new tasks. An Assign already on its way is dropped
    // below; the coordinator sees it missing from our heartbeats and
    // requeues it.
    cgq_link_drain (link);
    size_t busy = self->ops.stop_all (self->arg, grace_ms);
    int64_t give_up = cgq_now_ms () + grace_ms + S_STOP_SLACK_MS;
    while (busy > 0 && cgq_now_ms () < give_up) {
        s_poll (self, false, true, cgq_now_ms () + 100);
        busy = s_reap (self, false);
    }
    if (self->ops.abandon)
        self->ops.abandon (self->arg);
    // Results that finished before the signal are real work: give the
    // coordinator a moment to acknowledge them, or their trials run again.
    // The same for the program's own (a worker's checkpoints: a fast
    // trial's last CheckpointAcks come after it ended, and only they let
    // the worker prune its older checkpoints).
    int64_t ack_by = cgq_now_ms () + S_SHUTDOWN_ACK_MS;
    bool own = self->ops.unsettled != NULL;
    while ((cgq_link_unacked (link) > 0 || (own && self->ops.unsettled (self->arg) > 0)) &&
           cgq_link_welcomed (link) && cgq_now_ms () < ack_by) {
        s_poll (self, true, own, cgq_now_ms () + 100);
        cgq_env_t *env;
        while ((env = cgq_link_recv (link))) { // Acks are handled inside; no new work
            if (env->body_case == CGQ__ENVELOPE__BODY_CHECKPOINT_ACK && self->ops.checkpoint_ack)
                self->ops.checkpoint_ack (self->arg, env->checkpoint_ack);
            cgq_wire_free (env);
        }
        if (own && self->ops.turn) // the program's timers (watched above) move on
            self->ops.turn (self->arg);
        cgq_link_tick (link, cgq_now_ms ());
    }
    if (cgq_link_unacked (link) > 0)
        cgq_warn ("exiting with %zu result(s) not acknowledged; unless the coordinator recorded "
                  "them, their trials will run again",
                  cgq_link_unacked (link));
    cgq_link_bye (link, "shutdown");
    s_disconnect (self);
}

char *
cgq_shell_hostname (void)
{
    char host[HOST_NAME_MAX + 1] = "";
    if (gethostname (host, sizeof host) < 0 || !*host)
        strcpy (host, "localhost");
    host[HOST_NAME_MAX] = 0;
    return cgq_xstrdup (host);
}

int
cgq_shell_check_id (const char *prog, const char *id)
{
    if (strlen (id) <= 255)
        return 0;
    fprintf (stderr, "%s: --id '%.40s...' is longer than 255 bytes\n", prog, id);
    return -1;
}

int
cgq_shell_auth (const char *prog, const char *who, const char *secret, const char *server,
                cgq_auth_t **auth)
{
    char err[1024];
    if (cgq_auth_client_new (secret, server, auth, err, sizeof err) < 0) {
        fprintf (stderr, "%s: %s\n", prog, err);
        return -1;
    }
    if (*auth)
        cgq_info ("CURVE on: this %s's public key is %s", who, cgq_auth_public_txt (*auth));
    return 0;
}
