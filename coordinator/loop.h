// loop: the coordinator's event loop, and all it does. One turn: poll both
// ROUTER sockets to the nearest deadline, read every waiting message and
// hand it on (session.c, control.c), run due timers (liveness, stats),
// start what fits (dispatch.c), write what changed, flush the Redis batch as
// one MULTI/EXEC, and only then send what the batch made true (outbox.c).
#ifndef CGQ_LOOP_H
#define CGQ_LOOP_H

#include "coord.h"

// coord_init zeroes c, takes cfg's values (the caller keeps ownership of
// cfg's strings: they are borrowed until coord_fini) and creates the
// registries. coord_fini frees every job, trial, node and queued message and
// the store (c->store, owned once set). The loop's lifetime is the
// coordinator's: both live here, at the top of the call order.
void coord_init (coord_t *c, const coord_cfg_t *cfg);
void coord_fini (coord_t *c);

// Set by a signal handler (main.c); the loop stops after its turn.
extern volatile sig_atomic_t coord_stop;

// coord_run loops until coord_stop is set. Returns 0, -1 if polling fails, or
// 2 when the lease was lost to another coordinator (nothing more was written).
int coord_run (coord_t *c);

// coord_turn_end is the end of every turn: node and job writes, reaping of
// ended jobs, the flush, and on success the outbox. Unit tests call it to
// play a turn without sockets. Returns 0 if the batch was persisted.
int coord_turn_end (coord_t *c, int64_t now);

// Heartbeat coalescing. A turn that read only heartbeats (no other node
// message, no control request) less than LOOP_QUIET_GAP_MS after the
// previous such turn means many nodes heartbeat and little else happens:
// then the node socket is left unread for LOOP_HOLD_MS, so one turn answers
// the heartbeats of a few milliseconds at once instead of one turn (and two
// thread wake-ups, ours and ZeroMQ's I/O thread's) each. A cluster of a few
// nodes never gets there (its heartbeat-only turns come about a second
// apart); a turn that reads anything else ends the hold, and the control
// socket is never held. The cost: a Result or Hello that arrives during a
// hold waits up to LOOP_HOLD_MS (docs/performance.md, Many idle nodes).
#define LOOP_HOLD_MS 4
#define LOOP_QUIET_GAP_MS 20

// coord_heartbeat_hold is that rule, at the end of a turn that read
// from_nodes node messages, heartbeats of them, and from_ctl requests: it
// sets c->hold_nodes_ms (0: no hold), until when the loop leaves the node
// socket unread.
void coord_heartbeat_hold (coord_t *c, int from_nodes, int from_ctl, uint64_t heartbeats,
                           int64_t now);

#endif
