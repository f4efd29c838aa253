// recheck: a quarantined device comes back on its own once its check passes
// again (issue 28). The coordinator lists a runner's quarantined devices in
// every Heartbeat answer (Heartbeat.quarantined); the runner runs each idle
// one's `check` every --recheck, in a child process of its own (this same
// program as `cgq-device-runner check ...`, so the loop never blocks), and a
// check that passes is said in the next Heartbeat (Heartbeat.recovered).
// A device with no `check` stays quarantined until `cgq devices enable`.
#ifndef CGQ_RECHECK_H
#define CGQ_RECHECK_H

#include <stddef.h>
#include <stdint.h>

#include "runcfg.h"

#define CGQ_RECHECK_TIMEOUT_S 60 // one check, past it: failed

typedef struct cgq_recheck_t cgq_recheck_t;

// cgq_recheck_new: for rc's devices (borrowed for its lifetime); self_exe,
// config_path and workdir are borrowed too. every_ms 0: never recheck.
cgq_recheck_t *cgq_recheck_new (const cgq_runcfg_t *rc, const char *self_exe,
                                const char *config_path, const char *workdir, int64_t every_ms);
// Kills (SIGKILL, its session) and reaps a check in flight. NULL-safe.
void cgq_recheck_destroy (cgq_recheck_t **self_p);

// cgq_recheck_tick takes the devices that are quarantined and idle now
// (ids, n): a device newly among them gets its first check every_ms later,
// then one every every_ms; a device no longer among them is forgotten. It
// reaps finished checks and calls passed (arg, id) for each that passed
// while its device is still among them.
void cgq_recheck_tick (cgq_recheck_t *self, const char *const *ids, size_t n, int64_t now_ms,
                       void (*passed) (void *arg, const char *id), void *arg);
// The monotonic ms of its next check, or -1.
int64_t cgq_recheck_deadline (const cgq_recheck_t *self);

// cgq_recheck_run runs device's check once, here (on the board through its
// transport), with env the device's and CGQ_DEVICE_ID: the `check` mode.
// Returns 0 when it passed, 1 when the device has no check, -1 with why
// in err (also for a device not in rc).
int cgq_recheck_run (const cgq_runcfg_t *rc, const char *device, const char *workdir, char *err,
                     size_t errlen);

#endif
