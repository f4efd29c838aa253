// blocked: a device job that no device can run says why (every device with
// its tags quarantined) and gives up after its blocked_timeout
// (docs/devices.md, "Quarantine"). jobs.c keeps the job's blocked_since
// (jobs_set_blocked); nodes.c does not charge a trial the attempt that
// quarantined its device.
#ifndef CGQ_BLOCKED_H
#define CGQ_BLOCKED_H

#include "coord.h"

// blocked_devices_reason explains a device request r that connected devices
// have the tags for but all of them are quarantined: "devices d1
// (quarantined: LAST_ERROR), d2 (...): every device that can run it is
// quarantined (cgq devices enable ID returns one, ...)" (the CLI shows a
// reason starting "devices " as "blocked: ..."). NULL when no connected
// device has r's tags or one of them is not quarantined. Caller frees.
char *blocked_devices_reason (const coord_t *c, const req_t *r);

// blocked_tick fails every running job that has been blocked on a device
// stage for its spec's blocked_timeout (now: Unix seconds), with an error
// that names each device and its quarantine reason. Called once a second.
void blocked_tick (coord_t *c, double now);

#endif
