// jobs_impl: what jobs.c and jobs_nodes.c share, and nothing else includes
// (the module's interface is jobs.h).
#ifndef CGQ_JOBS_IMPL_H
#define CGQ_JOBS_IMPL_H

#include "coord.h"

// jobs_trial_event queues one event of job j (trial < 0: of the job
// itself), after the job's grouped events so far.
void jobs_trial_event (coord_t *c, job_t *j, const char *type, int64_t trial, const char *node,
                       uint32_t attempt, const char *detail);
// jobs_stop_on_node asks t's node to stop t's current attempt (a Stop, sent
// after the flush). Nothing when t is on no node.
void jobs_stop_on_node (coord_t *c, const trial_t *t, const char *reason);
// jobs_trial_end lets go of a trial that reached a terminal state: its node
// slot, its queue place, its hyperband cohort place, its memory.
void jobs_trial_end (coord_t *c, trial_t *t);
// jobs_late_success: the first outcome wins (see jobs.c).
void jobs_late_success (coord_t *c, trial_t *t, const Cgq__Result *r);
// jobs_pause_adopted pauses a trial taken back while its job is paused.
void jobs_pause_adopted (coord_t *c, trial_t *t);
// jobs_resume_judge: t's attempt ended (how: CGQ_RESUME_*) and t runs
// again; keeps or lets go of its checkpoints (see jobs.c).
void jobs_resume_judge (coord_t *c, trial_t *t, unsigned how);

#endif
