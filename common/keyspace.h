// keyspace: cgq's Redis data model, in one place (named for Redis's keyspace:
// "model" in this project means a trained predictor). It owns the key names,
// the field names of every hash, the state names, and the mapping between those
// hashes and C records: the coordinator writes through it (the only writer)
// and the CLI and recovery read through it. A field renamed here is renamed
// for every program. docs/architecture.md ("Redis data model") is the
// reference for operators reading it with redis-cli.
#ifndef CGQ_KEYSPACE_H
#define CGQ_KEYSPACE_H

#include <hiredis/hiredis.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"

// --- keys ------------------------------------------------------------------
// Each formats into buf (size n) and returns buf. The job id is the hash tag,
// so a whole job lives in one Redis Cluster slot.
char *cgq_key_job (char *buf, size_t n, uint64_t job);                      // cgq:job:{7}
char *cgq_key_trial (char *buf, size_t n, uint64_t job, uint64_t trial);    // cgq:job:{7}:trial:12
char *cgq_key_reports (char *buf, size_t n, uint64_t job, uint64_t trial);  // cgq:job:{7}:reports:12
char *cgq_key_leaderboard (char *buf, size_t n, uint64_t job);              // cgq:job:{7}:leaderboard
char *cgq_key_active (char *buf, size_t n, uint64_t job);                   // cgq:job:{7}:active
// search: {algorithm: external}: every point the job was sent (Suggest), in
// order, as JSON; trial i runs element i (the searcher's state says how many
// were used).
char *cgq_key_suggestions (char *buf, size_t n, uint64_t job);              // cgq:job:{7}:suggestions
char *cgq_key_node (char *buf, size_t n, const char *node);                 // cgq:node:gpu-3
char *cgq_key_device (char *buf, size_t n, const char *device);             // cgq:device:board-1
// Early stopping's records (coordinator/early_stop.h): the values recorded at
// attribute value at (an ASHA rung, or one step of the median rule), and the
// index of those at values.
char *cgq_key_rung (char *buf, size_t n, uint64_t job, double at);          // cgq:job:{7}:rung:9
char *cgq_key_rungs (char *buf, size_t n, uint64_t job);                    // cgq:job:{7}:rungs
// The current Pareto front of a job with several objectives.
char *cgq_key_pareto (char *buf, size_t n, uint64_t job);                   // cgq:job:{7}:pareto
// The warm-start observations a job was submitted with (a JSON array).
char *cgq_key_warm (char *buf, size_t n, uint64_t job);                     // cgq:job:{7}:warm

#define CGQ_KEY_JOB_SEQ "cgq:seq:job"
#define CGQ_KEY_EPOCH_SEQ "cgq:seq:epoch"
// The leader lease: "EPOCH ID" with a time to live (coordinator/lease.h).
#define CGQ_KEY_LEADER "cgq:leader"
#define CGQ_KEY_JOBS "cgq:jobs"
#define CGQ_KEY_NODES "cgq:nodes"
#define CGQ_KEY_DEVICES "cgq:devices" // set: every device id a runner has declared
#define CGQ_KEY_EVENTS "cgq:events"
#define CGQ_KEY_COORDINATOR "cgq:coordinator"
// Notifications not delivered yet (coordinator/notify.h): field "JOB:EVENT",
// value {"url": ..., "body": the JSON summary}.
#define CGQ_KEY_NOTIFY "cgq:notify"
#define CGQ_EVENTS_MAXLEN 100000
#define CGQ_REPORTS_MAXLEN 1000

// --- states ----------------------------------------------------------------
// Trial states; the job hash counts trials under these same names.
typedef enum {
    CGQ_TRIAL_PENDING,
    CGQ_TRIAL_RUNNING,
    CGQ_TRIAL_SUCCEEDED,
    CGQ_TRIAL_FAILED,
    CGQ_TRIAL_STOPPED,
    CGQ_TRIAL_CANCELLED,
    CGQ_TRIAL_UNSCHEDULABLE,
    // Running on a node that has been silent for --stale-after heartbeats:
    // it may be running still. It returns to running when the node is heard
    // from, or is requeued when the node is declared dead (--dead-after).
    // Memory keeps such a trial running (trial_t.stale); only Redis and the
    // counts say stale.
    CGQ_TRIAL_STALE,
    // Stopped by `cgq pause` (at its checkpoint, or at once with --now):
    // not terminal, not queued; `cgq resume` queues it again, to resume
    // from its checkpoints (docs/architecture.md, "Pause and resume").
    CGQ_TRIAL_PAUSED,
    CGQ_TRIAL_NSTATES
} cgq_tstate_t;
extern const char *const cgq_tstate_names[CGQ_TRIAL_NSTATES];
// cgq_tstate_parse returns the state named s, or -1 for NULL or an unknown name.
int cgq_tstate_parse (const char *s);
// Terminal: succeeded, failed, stopped, cancelled.
bool cgq_tstate_terminal (cgq_tstate_t s);

// A job is failed when it stopped itself (search.fail_fast): the field
// error says why.
typedef enum {
    CGQ_JOB_RUNNING,
    CGQ_JOB_FINISHED,
    CGQ_JOB_CANCELLED,
    CGQ_JOB_FAILED,
    CGQ_JOB_NSTATES
} cgq_jstate_t;
extern const char *const cgq_jstate_names[CGQ_JOB_NSTATES];

// Node states: alive; dead (silent too long); gone (said Bye); unknown (a
// restarted coordinator has not heard from it yet).
#define CGQ_NODE_ALIVE "alive"
#define CGQ_NODE_DEAD "dead"
#define CGQ_NODE_GONE "gone"
#define CGQ_NODE_UNKNOWN "unknown"

// Node kinds (cgq:node:ID kind).
#define CGQ_NODE_KIND_WORKER "worker"
#define CGQ_NODE_KIND_RUNNER "device-runner"
#define CGQ_NODE_KIND_CLIENT "client"

// Device states: idle and busy while its runner is connected; quarantined
// (after N failed or timed-out measurements in a row, until cgq devices
// enable) whether connected or not; offline while no runner serves it.
#define CGQ_DEVICE_IDLE "idle"
#define CGQ_DEVICE_BUSY "busy"
#define CGQ_DEVICE_QUARANTINED "quarantined"
#define CGQ_DEVICE_OFFLINE "offline"

// --- fields ----------------------------------------------------------------
// cgq:job:{J}; the counts are the trial state names above.
#define CGQ_JF_ID "id"
#define CGQ_JF_NAME "name"
#define CGQ_JF_STATE "state"
#define CGQ_JF_SPEC "spec"
#define CGQ_JF_SPEC_PATH "spec_path"
#define CGQ_JF_SPEC_DIR "spec_dir"
#define CGQ_JF_CREATED "created"
#define CGQ_JF_FINISHED "finished"
#define CGQ_JF_TOTAL "total"
#define CGQ_JF_SUGGESTED "suggested"
#define CGQ_JF_METRIC "objective_metric"
#define CGQ_JF_MODE "objective_mode"
#define CGQ_JF_BEST_TRIAL "best_trial"
#define CGQ_JF_BEST_VALUE "best_value"
#define CGQ_JF_BLOCKED "blocked"
// When the job became blocked, Unix seconds, kept while it stays blocked so
// that blocked_timeout counts from there across a coordinator restart.
#define CGQ_JF_BLOCKED_SINCE "blocked_since"
#define CGQ_JF_SEARCHER "searcher"
#define CGQ_JF_ERROR "error"
// search.samples and search.concurrency as `cgq update` last set them (absent:
// the spec's own); recovery applies them over the parsed spec.
#define CGQ_JF_SAMPLES "samples"
#define CGQ_JF_CONCURRENCY "concurrency"
// Bytes of the checkpoints the job's trials refer to (their `checkpoints`
// lists), kept with HINCRBY as checkpoints are recorded and let go.
#define CGQ_JF_CHECKPOINT_BYTES "checkpoint_bytes"
// `cgq pause`: "checkpoint" (running trials stop at their next checkpoint)
// or "now" (stopped at once); absent: not paused. Recovery reads it back.
#define CGQ_JF_PAUSED "pause" // not "paused": that is the count of paused trials
// early_stop hyperband: its whole state (coordinator/hyperband.c's dump),
// written at the end of each turn that changed it; recovery loads it.
#define CGQ_JF_HYPERBAND "hyperband"

// cgq:job:{J}:trial:T
#define CGQ_TF_ID "id"
#define CGQ_TF_JOB "job"
#define CGQ_TF_PARAMS "params"
#define CGQ_TF_STATE "state"
#define CGQ_TF_ATTEMPT "attempt"
#define CGQ_TF_NODE "node"
#define CGQ_TF_GPUS "gpus"
#define CGQ_TF_STARTED "started"
#define CGQ_TF_FINISHED "finished"
#define CGQ_TF_DURATION "duration"
#define CGQ_TF_METRICS "metrics"
#define CGQ_TF_VALUE "value"
#define CGQ_TF_ERROR "error"
#define CGQ_TF_WARNING "warning" // a succeeded trial's note: no metrics, a rejected report line
#define CGQ_TF_FEASIBLE "feasible"   // 1 or 0, a succeeded trial of a spec with constraints
#define CGQ_TF_VIOLATION "violation" // JSON {constraint: amount} of an infeasible trial
#define CGQ_TF_LOG "log"
#define CGQ_TF_TRIAL_DIR "trial_dir"
#define CGQ_TF_REPORTS "reports"
#define CGQ_TF_LAST_REPORT "last_report"
#define CGQ_TF_DEVICE "device" // the device a device trial's attempt runs on
// EPOCH:SEQ:INSTANCE of a running attempt's Assign and of the node process it
// went to: a restarted coordinator tells from the node's Hello whether it got it.
#define CGQ_TF_ASSIGN "assign"
#define CGQ_TF_EARLY_STOP "early_stop" // the early stopper's state of a running trial (JSON)
// Multi-stage trials (trial.stages): the stage it runs or waits for (0
// first), the attempts used by the stages before it, and the metrics of the
// stages that finished, {"train": {"acc": 0.9}} (JSON). Written together when
// a stage succeeds, so a restarted coordinator neither loses nor re-runs one.
#define CGQ_TF_STAGE "stage"
#define CGQ_TF_STAGE_BASE "stage_base"
#define CGQ_TF_STAGES "stages"
// A multi-stage trial's finished stage runs, one field per stage: "run:train"
// = {"attempt", "node", "started", "finished", "duration", "trial_dir"}.
#define CGQ_TF_RUN_PREFIX "run:"
// Checkpoints (docs/architecture.md, "Checkpoints"): the latest one recorded,
// JSON {"step", "attempt", "n", "stage", "size", "files", "sha256", "path",
// "host", "at"}, and the ones a next attempt may resume from, newest first
// (a JSON array of those, at most checkpoint.keep; empty or absent: none).
#define CGQ_TF_CHECKPOINT "checkpoint"
#define CGQ_TF_CHECKPOINTS "checkpoints"
// pbt: a child's lineage (JSON {"parent": donor, "replaces", "step", "checkpoint",
// "changed": {"lr": [old, new]}}), its parent (the donor's id), and an
// exploited trial's end (JSON {"by": child, "donor", "step"}).
#define CGQ_TF_LINEAGE "lineage"
#define CGQ_TF_PARENT "parent"
#define CGQ_TF_EXPLOITED "exploited"
// A paused trial: where it was paused, one line ("at checkpoint ckpt-1-3
// (step {"epoch":3})", or that it had none and restarts from zero).
#define CGQ_TF_PAUSED "paused"
// measure: {passes: 2} (coordinator/passes.c): the pass a trial runs or
// waits for (2 once its first succeeded; absent: the first), and the first
// pass's metrics (JSON), written with the transition that queues pass 2.
#define CGQ_TF_PASS "pass"
#define CGQ_TF_PASS1 "pass1"

// cgq:node:ID
#define CGQ_NF_ID "id"
#define CGQ_NF_KIND "kind"
#define CGQ_NF_STATE "state"
#define CGQ_NF_HOSTNAME "hostname"
#define CGQ_NF_PID "pid"
#define CGQ_NF_CPUS "cpus"
#define CGQ_NF_MEMORY "memory"
#define CGQ_NF_GPUS "gpus"
#define CGQ_NF_GPU_NAMES "gpu_names"
#define CGQ_NF_FREE_CPUS "free_cpus"
#define CGQ_NF_FREE_GPUS "free_gpus"
#define CGQ_NF_RUNNING "running"
#define CGQ_NF_CONNECTED "connected"
#define CGQ_NF_LAST_SEEN "last_seen"
#define CGQ_NF_FULL "full" // a worker's disk is full: why it takes no task for now ("": not full)
#define CGQ_NF_DEVICES "devices" // device runner: its device ids, comma-separated

// cgq:device:ID: written by the coordinator; failures and quarantined
// survive its restart (it reads them back when a runner declares the device).
#define CGQ_DF_ID "id"
#define CGQ_DF_NODE "node"              // the runner serving it ("" when none)
#define CGQ_DF_TAGS "tags"              // JSON object of tag -> value
#define CGQ_DF_STATE "state"            // one of the device states above
#define CGQ_DF_TASK "task"              // "7.12#1" (job.trial#attempt) while busy, else ""
#define CGQ_DF_FAILURES "failures"      // consecutive failed or timed-out results
#define CGQ_DF_QUARANTINED "quarantined" // 1 or 0
#define CGQ_DF_LAST_ERROR "last_error"
#define CGQ_DF_UPDATED "updated"

// cgq:coordinator
#define CGQ_CF_EPOCH "epoch"
#define CGQ_CF_PID "pid"
#define CGQ_CF_NODES "nodes"
#define CGQ_CF_CONTROL "control"
#define CGQ_CF_STARTED "started"
#define CGQ_CF_DROPPED "dropped_frames"
#define CGQ_CF_RESULTS "results"
#define CGQ_CF_ASSIGNS "assigns"
#define CGQ_CF_BATCH "batch"
#define CGQ_CF_REJECTED "rejected"               // node messages refused: not from the node that runs the task
#define CGQ_CF_REPORTS_DROPPED "reports_dropped" // Progress reports over --max-report or --max-report-rate
#define CGQ_CF_REFUSED_PEERS "refused_peers"     // connections refused by CURVE (key not allowed, or no CURVE)
#define CGQ_CF_REFUSED_IDS "refused_node_ids"    // node messages refused: their key may not claim that node id

// The report stream's one field: the report's JSON.
#define CGQ_REPORT_FIELD "r"

// --- writing: one HSET built field by field --------------------------------
// cgq_hset_t collects "HSET key f1 v1 f2 v2 ..." without formatting strings
// through printf; numbers are formatted into the builder's own buffers.
// Strings passed in are borrowed until cgq_hset_queue returns.
#define CGQ_HSET_MAX_FIELDS 32

typedef struct {
    int argc;
    const char *argv[2 + 2 * CGQ_HSET_MAX_FIELDS];
    size_t len[2 + 2 * CGQ_HSET_MAX_FIELDS];
    char num[CGQ_HSET_MAX_FIELDS][32];
    int nnum;
} cgq_hset_t;

void cgq_hset_init (cgq_hset_t *h, const char *key);
// More than CGQ_HSET_MAX_FIELDS fields is a programming error: it aborts.
void cgq_hset_str (cgq_hset_t *h, const char *field, const char *value);
void cgq_hset_u64 (cgq_hset_t *h, const char *field, uint64_t value);
void cgq_hset_dbl (cgq_hset_t *h, const char *field, double value);
// cgq_hset_queue adds the HSET to store's batch (nothing when no field was set).
void cgq_hset_queue (cgq_hset_t *h, cgq_store_t *store);

// cgq_keyspace_event queues one XADD to cgq:events (capped). trial < 0, attempt 0,
// node NULL and detail NULL leave their field out.
void cgq_keyspace_event (cgq_store_t *store, const char *type, uint64_t job, int64_t trial,
                      const char *node, uint32_t attempt, const char *detail);
// cgq_keyspace_event_trials queues one XADD to cgq:events for several trials of
// job that made the same transition in one loop turn: fields type, job and
// trials, the space-separated list "TRIAL:ATTEMPT" or "TRIAL:ATTEMPT@NODE"
// (docs/architecture.md, "Events").
void cgq_keyspace_event_trials (cgq_store_t *store, const char *type, uint64_t job,
                             const char *trials, size_t len);

// --- reading: records built from HGETALL replies ---------------------------
// Missing or malformed fields read as "unknown", never as an error, so a
// reader can show whatever is there.

// cgq_hash_get finds field in an HGETALL reply; NULL when absent.
const char *cgq_hash_get (const redisReply *r, const char *field);
// cgq_hash_num parses a numeric field; false when absent or not a number.
bool cgq_hash_num (const redisReply *r, const char *field, double *out);
uint64_t cgq_hash_u64 (const redisReply *r, const char *field); // 0 when absent

typedef struct {
    uint64_t id;
    char *name;      // never NULL ("" when unknown)
    char *state;     // running | finished | cancelled ("" when unknown)
    char *spec;      // the YAML as submitted, never NULL
    char *spec_path; // never NULL
    char *spec_dir;  // never NULL
    char *searcher;  // never NULL
    char *metric;    // objective metric, NULL when the job has no objective
    int mode;        // +1 max, -1 min
    char *blocked;   // why trials are unschedulable, NULL when not blocked
    double blocked_since; // when it became blocked, Unix seconds; 0 when not blocked
    char *error;     // why the job stopped itself (state failed), else NULL
    double created, finished; // Unix seconds, 0 when unknown
    int64_t total;            // trials the search will produce, -1 when unbounded
    uint64_t suggested;       // trials created so far
    uint64_t counts[CGQ_TRIAL_NSTATES];
    bool has_best;
    uint64_t best_trial;
    double best_value;
    uint64_t checkpoint_bytes; // of the checkpoints its trials may resume from (0: none)
    char *paused;    // `cgq pause`: "checkpoint" or "now"; NULL when not paused
    char *hyperband; // early_stop hyperband: its state (JSON, hyperband_dump); else NULL
} cgq_job_rec_t;

typedef struct {
    uint64_t id;
    char *state;     // never NULL
    json_t *params;  // object, NULL when missing (owned)
    json_t *metrics; // object, NULL when missing (owned)
    bool has_value;  // the objective value
    double value;
    uint32_t attempt;
    char *node, *error, *log, *trial_dir, *gpus; // NULL when missing or empty
    char *last_report;                           // JSON of the latest report, NULL when none
    char *warning;                               // a succeeded trial's warning, NULL when none
    int feasible;       // 1, 0; -1: not judged (no constraints, not succeeded)
    json_t *violation;  // an infeasible trial's {constraint: amount}, NULL when none (owned)
    uint64_t reports;                            // reports stored so far
    bool has_started, has_finished, has_duration;
    double started, finished, duration;
    // Multi-stage trials: the stage it runs or waits for, and the metrics of
    // each finished stage ({"train": {...}}, owned); stages NULL otherwise.
    uint32_t stage;
    json_t *stages;
    // ... and each finished stage's run ({"train": {"attempt", "node",
    // "started", "finished", "duration", "trial_dir"}}, owned), NULL otherwise.
    json_t *runs;
    // pbt: a child's lineage ({"parent", "replaces", "step", "checkpoint",
    // "changed"}), an exploited trial's end ({"by", "donor", "step"}); owned,
    // NULL otherwise.
    json_t *lineage, *exploited;
} cgq_trial_rec_t;

typedef struct {
    char *id, *kind, *state, *hostname; // never NULL
    char *full;                         // why it takes no task for now ("": it does); never NULL
    double cpus, free_cpus;
    double gpus, free_gpus; // counts (a list of GPUs counts its entries)
    uint64_t running;
    uint64_t pid;
    bool connected;
    bool has_last_seen;
    double last_seen;
} cgq_node_rec_t;

// cgq_job_rec_from builds a job record from HGETALL of cgq:job:{id}. Caller
// frees with cgq_job_rec_destroy.
cgq_job_rec_t *cgq_job_rec_from (uint64_t id, const redisReply *hash);
void cgq_job_rec_destroy (cgq_job_rec_t **self_p);
// Terminal trials (succeeded, failed, stopped, cancelled) and job state.
uint64_t cgq_job_rec_done (const cgq_job_rec_t *job);
bool cgq_job_rec_terminal (const cgq_job_rec_t *job);

// cgq_trial_rec_from builds a trial record; job (may be NULL) supplies the
// objective metric for trials whose value field is missing.
cgq_trial_rec_t *cgq_trial_rec_from (const cgq_job_rec_t *job, uint64_t id, const redisReply *hash);
// cgq_trial_rec_tries is how many times the trial's most tried stage ran: 1
// for a trial never retried, however many stages it has (its attempt
// numbers count on across stages, so attempt alone says 2 for two stages
// run once each).
uint32_t cgq_trial_rec_tries (const cgq_trial_rec_t *t);
// cgq_trial_rec_run_time is the time the trial ran, every stage's run
// summed (a multi-stage trial's duration field is its last stage's). false
// when unknown.
bool cgq_trial_rec_run_time (const cgq_trial_rec_t *t, double *seconds);
void cgq_trial_rec_destroy (cgq_trial_rec_t **self_p);

cgq_node_rec_t *cgq_node_rec_from (const char *id, const redisReply *hash);
void cgq_node_rec_destroy (cgq_node_rec_t **self_p);

typedef struct {
    char *id, *node, *tags, *state, *task, *last_error; // never NULL (tags: "{}" when unknown)
    uint64_t failures;
    bool quarantined;
    bool has_updated;
    double updated;
} cgq_device_rec_t;

// cgq_device_rec_from builds a device record from HGETALL of cgq:device:ID.
// Caller frees with cgq_device_rec_destroy.
cgq_device_rec_t *cgq_device_rec_from (const char *id, const redisReply *hash);
void cgq_device_rec_destroy (cgq_device_rec_t **self_p);

#endif
