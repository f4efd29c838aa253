// passes: measurement jobs that measure every trial twice (a device trial's
// measure: {passes: 2}), as decisions without I/O; jobs.c, dispatch.c and
// recovery.c apply them. A trial's first pass that succeeds is kept (its
// metrics in the trial hash's pass1), and the trial waits, pending and
// unqueued, until the first pass of every trial of the job has ended; then
// the waiting trials are queued in reverse order of their ids, so a slow
// drift or a busy spell of the device hits different trials in the two
// passes. The second pass's success ends the trial with both passes' figures
// (passes_merge); only then does the searcher see it. See docs/devices.md,
// "Two passes", and docs/architecture.md.
#ifndef CGQ_PASSES_H
#define CGQ_PASSES_H

#include <hiredis/hiredis.h>
#include <stdbool.h>

#include "coord.h"

// passes_of is the number of passes j's trials are measured in: the spec's
// measure.passes for a one-stage device trial, else 1.
uint32_t passes_of (const job_t *j);

// What passes_first adds to the fields of t's transition: the strings kv
// points at, and the trial.pass event's detail.
typedef struct {
    char pass[16], base[16];
    char detail[200];
} passes_first_t;

// passes_first decides for a succeeded attempt of t (metrics_json borrowed)
// whether t has a pass still to run. If so it keeps this pass's metrics
// (t->pass1), moves t to its next pass with attempts counted from here
// (t->stage_base: no retry used, a late duplicate of this attempt stale),
// counts t as waiting (j->pass_held), appends the fields pass, pass1 and
// stage_base to kv (*nkv strings; room for 6 more; they point into t and
// out, valid while both are) and returns true: the caller makes t pending,
// unqueued, in one HSET with them, and writes the event. False for t's
// last pass, or metrics that are not a JSON object (nothing changed).
bool passes_first (trial_t *t, const char *metrics_json, const char **kv, int *nkv,
                   passes_first_t *out);

// passes_merge returns the metrics of t's last pass (metrics_json) merged
// with its first (t->pass1): every metric of the last pass, and time the
// median of the two passes (their mean), time_pass1, time_pass2 and
// pass_diff ((pass 2 - pass 1) / pass 1). Caller frees. NULL when t has
// no first pass to merge (the job has one pass) or either is not a JSON
// object: the metrics stay as reported.
char *passes_merge (const trial_t *t, const char *metrics_json);

// passes_ready returns j's waiting trials, highest id first, once the job's
// first pass has ended: the searcher has suggested every trial, nothing
// waits in its first queue and every trial in memory is past its first pass
// (a failed one has left); the caller queues them in that order. *out is
// the caller's (free it; NULL when 0 is returned). Cheap when nothing waits
// (j->pass_held == 0); after it nothing is counted as waiting.
size_t passes_ready (job_t *j, trial_t ***out);

// passes_recover reads t's pass back from its trial hash h (recovery). Returns
// true when t is pending for a later pass: it waits for passes_ready, not
// in the queue.
bool passes_recover (job_t *j, trial_t *t, const redisReply *h);

#endif
