// dispatch: starts trials. Serves jobs round-robin, one trial per job per
// round, so two jobs sharing workers progress alike; asks the scheduler
// where each can run; renders the trial's command and env and queues the
// Assign. A trial whose command or env cannot be rendered fails with that
// message instead of running with an empty one.
#ifndef CGQ_DISPATCH_H
#define CGQ_DISPATCH_H

#include "coord.h"

// Most trials started in one turn: bounds a turn's Redis batch and latency
// (the rest goes next turn).
#define DISPATCH_MAX_PER_TURN 4096

// dispatch_run starts what fits, when something changed (c->sched_dirty).
// Returns how many trials it started.
int dispatch_run (coord_t *c);

// dispatch_resend queues t's Assign to its node again, as it was (same
// attempt, seq, GPUs): for an Assign the node's heartbeats say it never got
// (lost in a reconnect). A node that has it after all ignores the repeat.
// Returns 0, or -1 when t has no Assign to repeat.
int dispatch_resend (coord_t *c, trial_t *t);

#endif
