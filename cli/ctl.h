// ctl: one request to the coordinator's control endpoint over a fresh REQ
// socket, bounded in time, so that the CLI never hangs on a dead coordinator.
#ifndef CGQ_CTL_H
#define CGQ_CTL_H

#include <stddef.h>

#include "wire.h"

#define CGQ_CTL_TIMEOUT_MS 5000

// cgq_ctl_set_curve gives every later request CURVE keys: the user's secret
// certificate and the coordinator's public one (paths borrowed for the
// program's lifetime). NULL, NULL: CURVE off (the default).
void cgq_ctl_set_curve (const char *secret_path, const char *server_path);

// cgq_ctl_request sends req to endpoint and waits at most timeout_ms for the
// answer. Returns an exit status: 0 with *reply set (caller frees with
// cgq_wire_free); 2 when the endpoint is malformed; 1 when the coordinator
// does not answer in time, answers garbage, or a signal interrupted the wait.
// On failure err holds one line that says what to check.
int cgq_ctl_request (const char *endpoint, cgq_env_t *req, int timeout_ms, cgq_env_t **reply,
                     char *err, size_t errlen);

// cgq_ctl_cancel asks the coordinator to cancel job. Returns the exit status
// (the Reply's code, or that of the failed request) and the message to print
// in msg.
int cgq_ctl_cancel (const char *endpoint, uint64_t job, int timeout_ms, char *msg, size_t msglen);

#endif
