// control: what the CLI asks on the control socket. SubmitJob (parse and
// check the spec, allocate a job id, create the job), CancelJob, EnableDevice
// (cgq devices enable), Suggest (the points of an external job's searcher),
// UpdateJob (cgq update: a running job's samples and concurrency), PauseJob
// (cgq pause, cgq resume) and Ping.
// An error that changed nothing is answered at once; an answer that depends
// on this turn's state changes goes out after the flush.
#ifndef CGQ_CONTROL_H
#define CGQ_CONTROL_H

#include "coord.h"

void control_message (coord_t *c, const char *rid, size_t rid_len, cgq_env_t *env);

// control_pause pauses (resume false) or resumes job id (docs/architecture.md,
// "Pause and resume"). Pause: nothing new is dispatched; running trials
// are paused at their next recorded checkpoint (jobs_checkpoint), or at
// once with now; pausing a paused job again changes nothing, or turns a
// checkpoint pause into a pause now. Resume: paused trials are queued again
// with their checkpoints (jobs_resume_trial). Returns the Reply's code: 0
// (done, or nothing to do for a second pause), 2 (unknown or ended job, a
// resume of a job that is not paused), 1 (Redis cannot say whether the job
// exists); msg gets one line for the user.
int control_pause (coord_t *c, uint64_t id, bool resume, bool now, char *msg, size_t msglen);

// control_max_request is the largest control frame decoded: a spec of
// --max-spec and room for its path. control_max_message is the bound of the
// control socket itself (ZMQ_MAXMSGSIZE), far above it, so that a larger
// request reaches control_too_big and gets an answer that names the limit,
// where ZeroMQ would only close the connection.
uint64_t control_max_request (const coord_cfg_t *cfg);

// control_job_seq_at_least queues, in the turn's batch, raising cgq:seq:job
// to at least id: where Redis came back without INCRs it had answered (a
// crash inside its fsync window), after the journal replayed their jobs.
void control_job_seq_at_least (coord_t *c, uint64_t id);
int64_t control_max_message (const coord_cfg_t *cfg);
void control_too_big (coord_t *c, const char *rid, size_t rid_len, size_t size);

#endif
