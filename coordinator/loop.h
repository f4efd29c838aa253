// loop: the coordinator's event loop, and all it does. One turn: poll both
// ROUTER sockets to the nearest deadline, read every waiting message and
// hand it on (session.c, control.c), run due timers (liveness, stats),
// start what fits (dispatch.c), write what changed, flush the Redis batch as
// one MULTI/EXEC, and only then send what the batch made true (outbox.c).
#ifndef CGQ_LOOP_H
#define CGQ_LOOP_H

#include "coord.h"

// coord_run loops until coord_stop is set. Returns 0, -1 if polling fails, or
// 2 when the lease was lost to another coordinator (nothing more was written).
int coord_run (coord_t *c);

// coord_turn_end is the end of every turn: node and job writes, reaping of
// ended jobs, the flush, and on success the outbox. Unit tests call it to
// play a turn without sockets. Returns 0 if the batch was persisted.
int coord_turn_end (coord_t *c, int64_t now);

#endif
