// wire: the one place that turns schemas/cgq.proto messages into ZeroMQ
// frames and back. Every message is one Envelope; see docs/protocol.md.
#ifndef CGQ_WIRE_H
#define CGQ_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "cgq.pb-c.h"

// Bumped whenever a peer of the previous version could misread a message.
#define CGQ_WIRE_VERSION 1
// Default largest frame a receiver accepts (bytes); larger ones are dropped.
#define CGQ_WIRE_MAX_FRAME_DEFAULT (4u << 20)

typedef Cgq__Envelope cgq_env_t;

// cgq_wire_encode packs env (its version is set to CGQ_WIRE_VERSION) into a
// new buffer. Caller frees *data with free(). Returns 0, or -1 if env has no body.
int cgq_wire_encode (cgq_env_t *env, uint8_t **data, size_t *len);

// cgq_wire_decode unpacks one frame. Returns NULL (and counts it in
// cgq_wire_dropped) when the frame is larger than max_len (0: the default),
// does not decode, has no body, or has another major version. Caller frees
// with cgq_wire_free.
cgq_env_t *cgq_wire_decode (const uint8_t *data, size_t len, size_t max_len);
void cgq_wire_free (cgq_env_t *env);

// Frames dropped by cgq_wire_decode since the process started.
extern uint64_t cgq_wire_dropped;

// cgq_wire_send sends env as one frame on a DEALER socket (flags as for
// zmq_send, e.g. ZMQ_DONTWAIT). Returns 0 or -1 with errno.
int cgq_wire_send (void *sock, cgq_env_t *env, int flags);

// cgq_wire_send_to sends env to the peer with routing id rid on a ROUTER.
// empty_delim adds the empty delimiter frame a REQ peer expects.
int cgq_wire_send_to (void *router, const void *rid, size_t rid_len, int empty_delim,
                      cgq_env_t *env);

// cgq_wire_body_name names the body of env for logs ("hello", "result", ...).
const char *cgq_wire_body_name (const cgq_env_t *env);

// cgq_wire_task_str formats a task as "job.trial.stage#attempt" into buf
// (at least 80 bytes). Returns buf.
char *cgq_wire_task_str (char *buf, const Cgq__TaskRef *t);

#endif
