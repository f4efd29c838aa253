// measure: one measurement of one benchmark on one device, start to end —
// the device's check, the artifact (fetched and verified before anything
// runs), warm-up runs kept apart from timed runs, timed runs until both
// repeats and min_time are met (never past max_time), the statistics, the
// device's reset after a failure, and the cool-down. It blocks: the runner
// does each measurement in a process of its own (`cgq-device-runner measure`),
// so that its loop keeps heartbeating and a Stop can end it.
#ifndef CGQ_MEASURE_H
#define CGQ_MEASURE_H

#include <stddef.h>
#include <stdint.h>

#include "runcfg.h"

typedef struct {
    const cgq_runcfg_t *cfg;
    const char *device;          // a device id of cfg
    const char *benchmark;       // a benchmark name of cfg
    const char *params_json;     // the trial's params (NULL or "": {})
    const char *artifact_url;    // NULL or "": none
    const char *artifact_sha256;
    uint32_t repeats, warmup;    // 0: the benchmark's own
    uint64_t job, trial;         // for {job_id} and {trial_id}
    const char *workdir;         // commands run here; NULL: the current directory
    uint64_t max_artifact;       // --max-artifact of the runner; 0: runner.yaml's
    const char *const *env_keys; // the trial's (stage's) env from the spec: after the
    const char *const *env_vals; // device's env, before the benchmark's own
    size_t nenv;
    const char *measure_json;    // the stage's measure: block (Assign.measure_json), a JSON
                                 // object whose keys override the benchmark's; NULL or "": none
} cgq_measure_req_t;

typedef enum {
    CGQ_MEASURE_OK = 0,
    CGQ_MEASURE_FAILED = 1,  // a run or the device check failed (counts against the device)
    CGQ_MEASURE_TIMEOUT = 2, // a run passed its timeout (counts against the device)
    CGQ_MEASURE_BAD = 3,     // the request cannot be measured here: unknown benchmark or
                             // device, bad params, an artifact that cannot be had
} cgq_measure_status_t;

// cgq_measure_run does the whole measurement. Returns its status; *metrics_json
// (always set, caller frees) is the Result's metrics — the statistics on
// success, what is known so far otherwise — and err says what went wrong.
cgq_measure_status_t cgq_measure_run (const cgq_measure_req_t *req, char **metrics_json,
                                      char *err, size_t errlen);

// cgq_measure_restore_pinned puts back the cpufreq settings that a killed
// measurement left pinned on local device d (its save file in workdir,
// sysfs.c), and logs it: the runner calls it for each device at start.
// Returns 1 when it restored some, 0 when nothing was left, -1 on failure.
int cgq_measure_restore_pinned (const cgq_runcfg_device_t *d, const char *workdir);

// cgq_measure_status_name is "succeeded", "failed", "timeout" or "bad".
const char *cgq_measure_status_name (cgq_measure_status_t st);

// cgq_measure_render expands a benchmark template for one measurement:
// {name} is a param of params (an assignment param gives its id), {artifact}
// the cached artifact's path, {device} the device id, {benchmark} the
// benchmark's name, {job_id}/{trial_id}, and {item}/{choice} those of extra
// (NULL: none). With shell, substituted values are shell-quoted. Returns a
// new string, or NULL with err naming the unknown placeholder.
char *cgq_measure_render (const char *tmpl, const char *params_json, const char *device,
                          const char *benchmark, const char *artifact, uint64_t job,
                          uint64_t trial, const char *item, const char *choice, int shell,
                          char *err, size_t errlen);

#endif
