// device: one device this runner serves and the measurement running on it
// (one at a time). A measurement is a child process — this same program run
// as `cgq-device-runner measure ...` in its own session — so the runner's
// loop never blocks: it polls the child's stdout (one JSON line: status,
// error, metrics), reaps it, and turns that line into the task's Result. A
// Stop, the trial's timeout or shutdown end it: SIGTERM to its session
// (the measuring process kills the run in flight), SIGKILL after a grace.
#ifndef CGQ_DEVICE_H
#define CGQ_DEVICE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cgq.pb-c.h"
#include "runcfg.h"

typedef struct cgq_device_t cgq_device_t;

typedef struct {
    const char *self_exe;    // this program (absolute); borrowed
    const char *config_path; // runner.yaml (absolute); borrowed
    const char *workdir;     // measurements run here (absolute); borrowed
    const char *log_level;   // passed on to the measuring process; borrowed
    int64_t kill_grace_ms;   // SIGTERM -> SIGKILL
    uint64_t max_artifact;   // --max-artifact, passed on; 0: runner.yaml's
} cgq_device_opts_t;

// cgq_device_new wraps cfg (borrowed for the device's lifetime).
cgq_device_t *cgq_device_new (const cgq_runcfg_device_t *cfg, const cgq_device_opts_t *opts);
// Kills a measurement still running (SIGKILL) and reaps it. NULL-safe.
void cgq_device_destroy (cgq_device_t **self_p);

const char *cgq_device_id (const cgq_device_t *self);
// The Device message for Hello (borrowed for the device's lifetime).
Cgq__Device *cgq_device_msg (cgq_device_t *self);

// The task running on it, or NULL when idle (borrowed).
const Cgq__TaskRef *cgq_device_task (const cgq_device_t *self);

// cgq_device_start starts assign's measurement. Returns 0; or -1 with err
// when it cannot (the device is busy, fork failed) — the caller answers the
// Assign with TASK_LOST.
int cgq_device_start (cgq_device_t *self, const Cgq__Assign *assign, char *err, size_t errlen);

// The stdout fd of the measuring process to poll, or -1.
int cgq_device_fd (const cgq_device_t *self);
// cgq_device_on_readable reads what the measuring process wrote.
void cgq_device_on_readable (cgq_device_t *self);

// cgq_device_tick reaps the measuring process when it exited and fires the
// trial timeout and the SIGKILL escalation. Returns the finished task's
// Result (caller owns; hand it to cgq_link_result), or NULL.
Cgq__Result *cgq_device_tick (cgq_device_t *self, int64_t now_ms);

// cgq_device_deadline is the monotonic ms of its next timer, or -1.
int64_t cgq_device_deadline (const cgq_device_t *self);

// cgq_device_stop ends the measurement (its Result: TASK_STOPPED, reason).
void cgq_device_stop (cgq_device_t *self, const char *reason);

#endif
