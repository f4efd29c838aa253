// outbox: messages that wait for the Redis batch. Everything the coordinator
// tells a node or the CLI that depends on state (Assign, Ack, Stop, replies)
// is queued here during a turn and sent only after the turn's batch is
// flushed: a crash can lose only work that nobody was told about.
#ifndef CGQ_OUTBOX_H
#define CGQ_OUTBOX_H

#include "coord.h"

// outbox_push encodes env and queues it for peer rid on sock (delim: add the
// empty frame a REQ peer expects). env is borrowed for the call.
void outbox_push (coord_t *c, void *sock, const char *rid, size_t rid_len, bool delim,
                  cgq_env_t *env);

// Builders that queue one message to node id (on the node socket).
void outbox_stop (coord_t *c, const char *node, const Cgq__TaskRef *task, const char *reason);
// outbox_ack waits longer than the rest: a node forgets a result once it is
// acked, so the Ack goes out only when Redis has had cfg.durable_ms to write
// the batch to disk. Until then a Redis crash is repaired by the store's
// journal, and a crash of the coordinator too by the node re-sending it.
void outbox_ack (coord_t *c, const char *node, const Cgq__TaskRef *task);

// outbox_checkpoint_ack tells node whether checkpoint n of task was
// recorded (reason: why not), and the names of the trial's checkpoints the
// coordinator still refers to (keep, nkeep; borrowed). Like an Ack it waits
// until its batch is durable: the node deletes older checkpoints on it.
void outbox_checkpoint_ack (coord_t *c, const char *node, const Cgq__TaskRef *task, uint64_t n,
                            bool recorded, const char *reason, char **keep, size_t nkeep);

// outbox_reply answers a CLI request: with now, at once (an error that
// changed nothing), else after this turn's flush like every other message.
void outbox_reply (coord_t *c, const char *rid, size_t rid_len, int code, const char *msg,
                   bool now);

// outbox_send sends everything queued, in order, and empties the outbox. A
// send that fails (peer gone) is logged at debug and dropped: nodes re-send
// what they still need.
void outbox_send (coord_t *c);

// outbox_seal marks everything queued so far as covered by the batch that
// goes out now (its Acks closed to more tasks); outbox_send_sealed sends
// just that part once the batch is applied, keeping what came after it.
void outbox_seal (coord_t *c);

// outbox_send_due sends the held Acks whose batches are durable by now
// (--durable-after): they wait for nothing else, a batch in flight included.
// While Redis is down (c->redis_retry_ms) none goes: Redis may have lost
// their batches in a crash, to be replayed from the journal when it is back,
// and a coordinator that died meanwhile would take the journal with it.
void outbox_send_due (coord_t *c, int64_t now);

// outbox_rehold holds every held Ack until until_ms at least: Redis is back
// after an outage, and the batches the journal replayed into it are only as
// durable as the replay.
void outbox_rehold (coord_t *c, int64_t until_ms);
void outbox_send_sealed (coord_t *c);
// outbox_nodes_first reorders a list of queued messages: those for the
// nodes first (an Assign: a trial waits to start), then the rest (the
// control socket's answers), each socket's messages in their order (none
// holds across sockets anyway). The sends of a batch go in this order:
// an answer sent first made the Assign wait for it and its reader's
// wake-up (idle dispatch p50 -0.06 ms on the development VM).
out_t *outbox_nodes_first (const coord_t *c, out_t *list);
// outbox_confirm_tick: with --redis-replicas, held Acks whose batch the
// replicas have not confirmed (WAIT came back short) ask again every 200 ms,
// with an empty batch when nothing else is to be written.
void outbox_confirm_tick (coord_t *c, int64_t now);
// outbox_next_due is when the next waiting Ack is due (0: none waits).
int64_t outbox_next_due (const coord_t *c);
// outbox_free drops everything queued without sending it.
void outbox_free (coord_t *c);
size_t outbox_len (const coord_t *c);
// outbox_held: messages (Acks) sent to the late list, not yet out.
size_t outbox_held (const coord_t *c);

#endif
