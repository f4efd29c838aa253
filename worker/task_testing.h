// task_testing: what the worker's unit tests share to run one task as the
// worker's loop does, without a coordinator.
#ifndef CGQ_TASK_TESTING_H
#define CGQ_TASK_TESTING_H

#include "task.h"

// tt_assign_t is a "command" Assign that runs script with /bin/sh -c as
// task job.trial attempt 1. Its strings are borrowed from static storage
// and from the caller's script, which must outlive it.
typedef struct {
    Cgq__Assign a;
    Cgq__TaskRef ref;
    char *argv[3];
} tt_assign_t;

void tt_assign_init (tt_assign_t *sa, uint64_t job, uint64_t trial, const char *script);

// tt_run drives task like the worker's loop until it is done or max_ms
// passes, and returns its result (caller destroys; NULL if not done).
Cgq__Result *tt_run (cgq_task_t *task, int64_t max_ms);

#endif
