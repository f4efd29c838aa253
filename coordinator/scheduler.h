// scheduler: chooses, and only chooses. For a job it says whether
// there is anything to start, on which node (nodes are tried in rotation so
// load spreads), or why no connected node could ever run it. The only state
// it changes is its rotation cursor (c->node_rr). Acting on a choice is
// dispatch.c's work; fairness between jobs is its round-robin.
#ifndef CGQ_SCHEDULER_H
#define CGQ_SCHEDULER_H

#include "coord.h"

typedef enum {
    SCHEDULE_IDLE,    // nothing to start now (no work, at its concurrency, not running)
    SCHEDULE_WAIT,    // work to start, and some node fits it once it has room
    SCHEDULE_BLOCKED, // work to start, and no connected node could ever fit it
    SCHEDULE_GO,      // start one trial on *node
} scheduler_verdict_t;

// scheduler_choose decides for job j. On SCHEDULE_GO *node is the node to use and
// the rotation moves past it.
scheduler_verdict_t scheduler_choose (coord_t *c, const job_t *j, node_t **node);
// scheduler_choose_stage is scheduler_choose for a job whose trials have
// stages: *stage is the stage to start on *node (SCHEDULE_GO), or the one no
// connected node could ever run (SCHEDULE_BLOCKED; j->req[*stage] says
// what it needs). Later stages go first.
scheduler_verdict_t scheduler_choose_stage (coord_t *c, const job_t *j, node_t **node,
                                            uint32_t *stage);

// scheduler_blocked_reason explains why no connected node can ever run r, e.g.
// "needs gpu 1 but the 2 connected node(s) have at most 0 GPU(s)", or for a
// device trial "needs device with device=odroid-xu4; connected devices:
// board-1 (device=tizen)". Caller frees.
char *scheduler_blocked_reason (const coord_t *c, const req_t *r);

#endif
