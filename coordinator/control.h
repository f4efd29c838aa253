// control: what the CLI asks on the control socket. SubmitJob (parse and
// check the spec, allocate a job id, create the job), CancelJob, EnableDevice
// (cgq devices enable), Suggest (the points of an external job's searcher),
// UpdateJob (cgq update: a running job's samples and concurrency) and Ping.
// An error that changed nothing is answered at once; an answer that depends
// on this turn's state changes goes out after the flush.
#ifndef CGQ_CONTROL_H
#define CGQ_CONTROL_H

#include "coord.h"

void control_message (coord_t *c, const char *rid, size_t rid_len, cgq_env_t *env);

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
