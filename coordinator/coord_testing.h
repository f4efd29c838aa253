// coord_testing: fixtures for the coordinator's unit tests. They drive the
// cgq_coord library as the loop does, without sockets: messages to nodes
// and the CLI collect in the outbox, where the tests read them.
#ifndef CGQ_COORD_TESTING_H
#define CGQ_COORD_TESTING_H

#include "coord.h"

// ct_coord_new returns a coordinator on store url (not connected until
// the first flush; "redis://127.0.0.1:1/0" for tests that never flush).
// Free with ct_coord_destroy.
coord_t *ct_coord_new (const char *url);
void ct_coord_destroy (coord_t **c_p);

// ct_job submits yaml as job id (spec parsed, job hash queued). Fails the
// test if the spec does not parse.
job_t *ct_job (coord_t *c, uint64_t id, const char *yaml);

// ct_node joins a node with cpus, ngpus GPUs (indices 0..ngpus-1) and
// memory bytes, as its Hello would (no running tasks).
node_t *ct_node (coord_t *c, const char *id, double cpus, int ngpus, uint64_t memory);

// ct_runner joins a device runner with the devices given, each written
// "ID:tag=value,tag=value" ("ID:" for none), NULL-terminated, as its Hello
// would (no running tasks).
node_t *ct_runner (coord_t *c, const char *id, const char *const *devices);

// What a worker's Hello says beyond ct_node's: the tasks it still runs (a
// reconnect, or a restarted coordinator's first Hello), its process
// instance and the last Assign it saw (the rules for Assigns that crossed).
typedef struct {
    Cgq__TaskRef **running;
    size_t nrunning;
    uint64_t instance, assign_epoch, assign_seq;
    bool batches; // reads AssignBatch
} ct_hello_t;

// ct_hello sends worker id's Hello offering cpus, with what x says.
void ct_hello (coord_t *c, const char *id, double cpus, const ct_hello_t *x);

// ct_assigns decodes the Assigns queued in the outbox (in order) into
// refs[] (at most max) and returns how many there are; the outbox is kept.
size_t ct_assigns (const coord_t *c, Cgq__TaskRef *refs, size_t max);

// ct_result applies a Result for task (job, trial, attempt) as a node sends it.
void ct_result (coord_t *c, const char *node, uint64_t job, uint64_t trial, uint32_t attempt,
                Cgq__TaskStatus status, const char *metrics_json, const char *error);

// ct_result_stage is ct_result for a task of one stage of a trial.
void ct_result_stage (coord_t *c, const char *node, uint64_t job, uint64_t trial, uint32_t stage,
                      uint32_t attempt, Cgq__TaskStatus status, const char *metrics_json,
                      const char *error);

// ct_assign_get reads one field of the queued Assign of (trial, attempt):
// "stage", "kind", "artifact_url", "argvN" (argument N, "" past the end) or
// "env:NAME" ("(absent)" when not set). Caller frees; NULL: no such Assign.
char *ct_assign_get (const coord_t *c, uint64_t trial, uint32_t attempt, const char *what);

// ct_suggest sends Suggest{job, params[0..n)} as the control socket would
// hand it on and returns the Reply's code, its message in msg. The reply
// stays in the outbox (free it with outbox_free); a reply that waits for
// the flush is found there all the same.
int ct_suggest (coord_t *c, uint64_t job, const char *const *params, size_t n, char *msg,
                size_t msglen);

#endif
