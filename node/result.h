// result: a task's Result and the TaskRef that names it, as every node
// program builds them — a result that owns all its strings (so the link can
// keep it until the Ack and free it the one way), the answer to a "noop"
// task, and TaskRef copies and comparisons. A node's task may be a trial
// process (cgq-worker), a measurement (cgq-device-runner) or nothing at all
// (bench's cgq-simnodes); all of them answer with these.
#ifndef CGQ_RESULT_H
#define CGQ_RESULT_H

#include <stdbool.h>

#include "cgq.pb-c.h"

// cgq_result_new makes a result whose strings are all owned by it
// (metrics_json NULL: "{}", error NULL: ""; log_tail and trial_dir ""), for
// ref (copied; NULL: a zero TaskRef). Caller destroys it with
// cgq_result_destroy, or hands it to cgq_link_result, which takes it.
Cgq__Result *cgq_result_new (const Cgq__TaskRef *ref, Cgq__TaskStatus status,
                             const char *metrics_json, const char *error);

// Frees a result made by this module (or one whose strings a caller replaced
// with malloc'ed ones). NULL-safe; sets *res_p = NULL.
void cgq_result_destroy (Cgq__Result **res_p);

// cgq_result_noop answers a "noop" assignment: TASK_SUCCEEDED, metrics are
// the numeric params plus "score", their sum (an integer when they all are).
// Caller destroys.
Cgq__Result *cgq_result_noop (const Cgq__Assign *assign);

// cgq_result_ref_dup makes a deep copy of ref (NULL: a zero TaskRef); caller
// frees it with free().
Cgq__TaskRef *cgq_result_ref_dup (const Cgq__TaskRef *ref);

// cgq_result_ref_equal says whether a and b name the same task (job, trial,
// stage, attempt); two NULLs are equal, NULL and a ref are not.
bool cgq_result_ref_equal (const Cgq__TaskRef *a, const Cgq__TaskRef *b);

#endif
