// link: a node's connection to the coordinator — the DEALER socket, the
// Hello/Welcome handshake, heartbeats, reconnects after silence, and the
// results kept until the coordinator acks them (re-sent every 5 s and in every
// Hello). See docs/architecture.md, "Delivery and crash safety".
#ifndef CGQ_LINK_H
#define CGQ_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "auth.h"
#include "wire.h"

typedef struct cgq_link_t cgq_link_t;

// Results are re-sent this often while unacked.
#define CGQ_LINK_RESEND_MS 5000
// Hello is re-sent this often until a Welcome arrives.
#define CGQ_LINK_HELLO_MS 1000
// Silence of heartbeat_ms times this reconnects the socket.
#define CGQ_LINK_DEAD_AFTER 5

// Fills *refs with the node's running tasks (array and refs borrowed until
// the next call) and returns how many there are.
typedef size_t (cgq_link_running_fn) (void *arg, Cgq__TaskRef ***refs);

typedef struct {
    const char *endpoint;             // coordinator node endpoint (copied)
    const char *node_id;              // routing id, stable across reconnects (copied)
    const char *hostname;             // (copied)
    const Cgq__Resources *resources;  // borrowed for the link's lifetime
    int64_t heartbeat_ms;             // until the Welcome says otherwise
    int kind;                         // Cgq__NodeKind: 0 worker (default), 1 device runner
    const cgq_auth_t *auth;           // CURVE keys (borrowed for the link's lifetime); NULL: off
    bool batches;                     // say in Hello that AssignBatch is read here
} cgq_link_opts_t;

// cgq_link_new opens the socket on zmq context ctx, connects and sends Hello.
// Returns NULL (after logging why) when the endpoint is unusable.
cgq_link_t *cgq_link_new (void *ctx, const cgq_link_opts_t *opts, cgq_link_running_fn *running,
                          void *arg);

// cgq_link_destroy closes the socket (without waiting unless cgq_link_bye was
// called) and frees unacked results. NULL-safe; sets *self_p = NULL.
void cgq_link_destroy (cgq_link_t **self_p);

// The socket to poll for ZMQ_POLLIN; it changes after a reconnect, so ask
// again on every loop turn.
void *cgq_link_socket (cgq_link_t *self);

// cgq_link_recv receives what the socket holds, handles Welcome, Heartbeat
// answers and Ack itself, and returns the next message for the node (Assign,
// Stop, CheckpointAck) or NULL when there is nothing more. Caller frees with cgq_wire_free.
cgq_env_t *cgq_link_recv (cgq_link_t *self);

// cgq_link_tick sends what is due (Hello, Heartbeat, result re-sends) and
// reconnects after silence. cgq_link_deadline is when it next has work.
void cgq_link_tick (cgq_link_t *self, int64_t now_ms);
int64_t cgq_link_deadline (const cgq_link_t *self);

// cgq_link_progress sends one report line of a task (best effort).
void cgq_link_progress (cgq_link_t *self, const Cgq__TaskRef *task, const char *report_json,
                        uint64_t seq);

// cgq_link_checkpoint sends a task's sealed checkpoint (best effort: the
// caller keeps it and sends it again until a CheckpointAck names it).
void cgq_link_checkpoint (cgq_link_t *self, const Cgq__Checkpoint *ckpt);

// cgq_link_hold makes results wait (held) until cgq_link_release, which
// sends those that waited as one ResultBatch (one alone as a Result): a
// worker holds them while it handles what it received at once.
void cgq_link_hold (cgq_link_t *self);
void cgq_link_release (cgq_link_t *self);

// cgq_link_quarantined: a device runner's devices that the coordinator's
// last Heartbeat answer listed as quarantined; *ids borrowed until the next
// cgq_link_recv. Returns how many.
size_t cgq_link_quarantined (const cgq_link_t *self, const char *const **ids);
// cgq_link_recovered says in the next Heartbeat (sent at once when
// welcomed) that device id's check passed again (id copied).
void cgq_link_recovered (cgq_link_t *self, const char *id);

// cgq_link_result takes ownership of result (made by cgq_result_new),
// sends it now when the coordinator knows this node, and keeps it until acked.
void cgq_link_result (cgq_link_t *self, Cgq__Result *result);

// cgq_link_has_result says whether a result for task is waiting for its Ack;
// resend asks for it to go out again now.
bool cgq_link_has_result (cgq_link_t *self, const Cgq__TaskRef *task, bool resend);

// Number of results waiting for an Ack.
size_t cgq_link_unacked (const cgq_link_t *self);

// True after a Welcome, until the coordinator forgets this node.
bool cgq_link_welcomed (const cgq_link_t *self);

// cgq_link_drain tells the coordinator, in a heartbeat now and in every one
// after, that this node takes no new task (it is shutting down).
void cgq_link_drain (cgq_link_t *self);

// cgq_link_full says, in a heartbeat now and in every one after, that this
// node takes no new task for the reason why (its disk is full), or with why
// NULL that it takes tasks again. A reason equal to the last one sends nothing.
void cgq_link_full (cgq_link_t *self, const char *why);

// cgq_link_bye sends Bye (when welcomed) and lets the socket linger briefly
// on destroy so that it gets out.
void cgq_link_bye (cgq_link_t *self, const char *reason);

#endif
