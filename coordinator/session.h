// session: what nodes say, and what their silence means. Hello (a node
// joins or comes back: its resources, the results it still holds, the tasks
// it still runs — adopted, re-adopted or stopped), Heartbeat (answered at
// once; the running list is reconciled), Result (applied, then acked after
// the flush), Progress, Bye, and the liveness check that declares silent
// nodes dead and hands their tasks back to their jobs.
#ifndef CGQ_SESSION_H
#define CGQ_SESSION_H

#include "coord.h"

// Heartbeats from a node that has not received a task's Assign after which
// the Assign counts as lost (the node sends one a second).
#define SESSION_ASSIGN_LOST_HBS 3

// session_message handles one decoded message from node rid.
void session_message (coord_t *c, const char *rid, size_t rid_len, cgq_env_t *env);

// session_liveness declares dead every node silent for longer than
// heartbeat x dead-after, and hands back recovered trials nobody adopted.
// It also has the hash of every node heard from since its last write, and
// written at least SESSION_SEEN_WRITE_MS ago, written again at the end of
// the turn: that is how last_seen in cgq:node:ID moves (heartbeats alone
// write nothing), so it is at most that plus a heartbeat interval old for a
// live node. One pass a heartbeat interval over the registry: at 2,000 nodes
// a few microseconds, no timer structure needed.
#define SESSION_SEEN_WRITE_MS 5000
void session_liveness (coord_t *c, int64_t now);

// session_buffer_full says whether Redis is down and --max-buffer commands
// wait for it: then results stay with their nodes (unacked, so they keep
// them), reports are dropped and snapshots wait, so memory stays bounded.
bool session_buffer_full (coord_t *c);

// session_poke tells each node of c->poke that has not said Hello yet that
// we do not know it (a Heartbeat with unknown set, which makes a node say
// Hello at once), every SESSION_POKE_MS for up to two heartbeat intervals
// after start-up. A node whose connection is not up yet misses it (a ROUTER
// drops what it cannot route) and gets the next one. So a restarted
// coordinator hears from its nodes within a reconnect interval instead of
// a heartbeat interval. Returns when it wants to run again (0: done).
#define SESSION_POKE_MS 50
int64_t session_poke (coord_t *c, int64_t now);

// session_stalled credits every node with stall_ms of silence: time the
// coordinator itself was not listening (stopped, or busy in one turn) is
// not the nodes' fault. It also gives them one heartbeat interval from now
// before liveness is judged again, so the heartbeats that queued up are
// read first.
void session_stalled (coord_t *c, int64_t now, int64_t stall_ms);

#endif
