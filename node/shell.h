// shell: what a node program is around its work, the same for cgq-worker and
// cgq-device-runner — signal handlers (SIGTERM and SIGINT stop, SIGCHLD
// wakes the loop, through a self-pipe), the link to the coordinator
// (link.h), the one zmq_poll loop (poll to the nearest deadline over the
// link's socket, the signal pipe and the program's fds; hand each Assign
// and Stop to the program; let it reap what ended; tick the link:
// heartbeats, re-sends, reconnects), and the shutdown (drain, stop the
// work, wait for it, wait briefly for the Acks of the results kept, Bye).
//
// What is the program's own, its tasks or its devices, stays behind
// cgq_shell_ops_t: the shell holds no task and starts nothing. One shell per
// process: the signal handlers are the process's.
#ifndef CGQ_SHELL_H
#define CGQ_SHELL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "link.h"
#include "wire.h"

typedef struct cgq_shell_t cgq_shell_t;

// The program's side. arg is the one given to cgq_shell_new. The link
// (cgq_shell_link) is theirs to use from every callback.
typedef struct {
    // An Assign (each of an AssignBatch in turn): start the task, or answer
    // it at once with a result through the link. Required.
    void (*assign) (void *arg, const Cgq__Assign *assign);
    // A Stop the coordinator sent. Required.
    void (*stop) (void *arg, const Cgq__Stop *stop);
    // A CheckpointAck: whether a checkpoint the node sent was recorded.
    // Optional (a node that sends no Checkpoint gets none).
    void (*checkpoint_ack) (void *arg, const Cgq__CheckpointAck *ack);
    // The running tasks for Hello and every Heartbeat (link.h). Required.
    cgq_link_running_fn *running;
    // Before each poll: the fds to watch (cgq_shell_watch) and the nearest
    // timer (cgq_shell_due). Optional.
    void (*watch) (void *arg, cgq_shell_t *shell);
    // fd, watched for owner, is readable (or in error). Required with watch.
    void (*readable) (void *arg, void *owner, int fd);
    // Once per loop turn, after the messages and before reap: housekeeping
    // of the program's own (the worker's confinement). Optional.
    void (*turn) (void *arg);
    // Collects what ended: each result goes to the link when report, and
    // is dropped when not (at shutdown). Returns how many tasks still run.
    // Required.
    size_t (*reap) (void *arg, bool report);
    // At shutdown: stops every task (SIGTERM, SIGKILL after grace_ms), says
    // so in the log, and returns how many it stopped. Required.
    size_t (*stop_all) (void *arg, int64_t grace_ms);
    // At shutdown, once the wait for the stopped tasks is over: ends what is
    // left of them now (their results dropped). Optional.
    void (*abandon) (void *arg);
    // At shutdown, after abandon: how many of the program's own messages
    // still wait for the coordinator's answer, or for what that answer asks
    // (a worker's Checkpoints not acked, the prunes their acks asked for not
    // done); called once per turn of that wait, so it also ticks them. The
    // shutdown waits for them as for the results' Acks, as long at most,
    // and hands CheckpointAcks to checkpoint_ack meanwhile. Optional.
    size_t (*unsettled) (void *arg);
} cgq_shell_ops_t;

// cgq_shell_new installs the handlers of SIGTERM, SIGINT and SIGCHLD and
// ignores SIGPIPE, for the program named prog (it starts the line printed
// to stderr on failure). ops is copied; arg is borrowed for the shell's
// lifetime. Returns NULL after printing why (the signal pipe could not be
// made).
cgq_shell_t *cgq_shell_new (const char *prog, const cgq_shell_ops_t *ops, void *arg);

// What every node program does before its shell connects, written once:
// cgq_shell_hostname is this host's name ("localhost" when it has none;
// caller frees); cgq_shell_check_id refuses a node id longer than 255 bytes
// (-1 after printing "prog: --id '...' is longer than 255 bytes");
// cgq_shell_auth loads the CURVE keys (*auth NULL when both files are NULL:
// CURVE off) and logs this node's public key, who ("node", "runner")
// naming it, or returns -1 after printing why.
char *cgq_shell_hostname (void);
int cgq_shell_check_id (const char *prog, const char *id);
int cgq_shell_auth (const char *prog, const char *who, const char *secret, const char *server,
                    cgq_auth_t **auth);

// cgq_shell_destroy closes the link (without Bye) if cgq_shell_shutdown did
// not, and the signal pipe; the handlers stay, and a signal after this is
// noted but wakes nothing. Call it last: until then a SIGCHLD (the worker's
// reaper exiting) still has somewhere to go. NULL-safe; sets *self_p = NULL.
void cgq_shell_destroy (cgq_shell_t **self_p);

// cgq_shell_connect makes the ZeroMQ context and the link (opts as in
// link.h, with ops->running) and sends Hello. A node that reads AssignBatch
// (opts->batches) also answers in batches: each loop turn's results wait
// for the turn's end (cgq_link_hold) and leave as one ResultBatch. Returns
// 0, or -1 when the endpoint is unusable (the link logged why).
int cgq_shell_connect (cgq_shell_t *self, const cgq_link_opts_t *opts);

// The link, borrowed: from cgq_shell_connect until cgq_shell_shutdown
// ends; NULL outside.
cgq_link_t *cgq_shell_link (cgq_shell_t *self);

// cgq_shell_run runs the loop until SIGTERM or SIGINT, and logs which one
// came. Returns it, or 0 when the program ended it (cgq_shell_quit).
int cgq_shell_run (cgq_shell_t *self);
// cgq_shell_quit, from a callback: the loop ends after this turn, as on
// SIGTERM (the shutdown that follows is the same), and logs why.
void cgq_shell_quit (cgq_shell_t *self, const char *why);

// cgq_shell_shutdown tells the coordinator that no new task may come
// (cgq_link_drain), stops every task with grace_ms of SIGTERM grace and
// waits for them up to grace_ms + 2 s (their results dropped: the
// coordinator requeues them on Bye), ends what is left (ops->abandon),
// waits up to 5 s for the Acks of the results kept (a result not acked is
// a trial run again), says Bye and closes the link and the context.
void cgq_shell_shutdown (cgq_shell_t *self, int64_t grace_ms);

// For ops->watch: poll fd for readability this turn, and hand it back to
// ops->readable with owner (borrowed).
void cgq_shell_watch (cgq_shell_t *self, int fd, void *owner);
// For ops->watch: the loop wakes by at_ms (cgq_now_ms) at the latest;
// a negative at_ms is no timer.
void cgq_shell_due (cgq_shell_t *self, int64_t at_ms);

#endif
