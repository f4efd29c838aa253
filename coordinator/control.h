// control: what the CLI asks on the control socket. SubmitJob (parse and
// check the spec, allocate a job id, create the job), CancelJob, EnableDevice
// (cgq devices enable) and Ping.
// An error that changed nothing is answered at once; an answer that depends
// on this turn's state changes goes out after the flush.
#ifndef CGQ_CONTROL_H
#define CGQ_CONTROL_H

#include "coord.h"

void control_message (coord_t *c, const char *rid, size_t rid_len, cgq_env_t *env);

#endif
