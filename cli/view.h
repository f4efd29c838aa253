// view: read-only snapshots of jobs, trials and nodes as the coordinator wrote
// them to Redis (docs/architecture.md, "Redis data model"). Missing or
// malformed fields read as "unknown", never as an error: the CLI must be able
// to show whatever is there.
#ifndef CGQ_VIEW_H
#define CGQ_VIEW_H

#include <hiredis/hiredis.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"

// Trial states, in the order the job hash counts them.
typedef enum {
    CGQ_VIEW_PENDING,
    CGQ_VIEW_RUNNING,
    CGQ_VIEW_SUCCEEDED,
    CGQ_VIEW_FAILED,
    CGQ_VIEW_STOPPED,
    CGQ_VIEW_CANCELLED,
    CGQ_VIEW_UNSCHEDULABLE,
    CGQ_VIEW_NSTATES
} cgq_view_state_t;

extern const char *const cgq_view_state_names[CGQ_VIEW_NSTATES];

typedef struct {
    uint64_t id;
    char *name;      // never NULL ("" when unknown)
    char *state;     // running | finished | cancelled ("" when unknown)
    char *spec_path; // never NULL
    char *searcher;  // never NULL
    char *metric;    // objective metric, NULL when the job has no objective
    int mode;        // +1 max, -1 min
    char *blocked;   // why trials are unschedulable, NULL when not blocked
    double created, finished; // Unix seconds, 0 when unknown
    int64_t total;            // trials the search will produce, -1 when unbounded
    uint64_t suggested;       // trials created so far
    uint64_t counts[CGQ_VIEW_NSTATES];
    bool has_best;
    uint64_t best_trial;
    double best_value;
} cgq_view_job_t;

typedef struct {
    uint64_t id;
    char *state;     // never NULL
    json_t *params;  // object, NULL when missing (owned)
    json_t *metrics; // object, NULL when missing (owned)
    bool has_value;  // the objective value
    double value;
    uint32_t attempt;
    char *node, *error, *log, *trial_dir, *gpus; // NULL when missing or empty
    bool has_started, has_finished, has_duration;
    double started, finished, duration;
} cgq_view_trial_t;

typedef struct {
    char *id, *kind, *state, *hostname; // never NULL
    double cpus, free_cpus;
    double gpus, free_gpus; // counts (a list of GPUs counts its entries)
    uint64_t running;
    uint64_t pid;
    bool connected;
    bool has_last_seen;
    double last_seen;
} cgq_view_node_t;

// Results of the loaders: found, absent (unknown job or trial), or an I/O
// error with err set to one line.
#define CGQ_VIEW_OK 0
#define CGQ_VIEW_ABSENT 1
#define CGQ_VIEW_ERROR (-1)

// cgq_view_job_load reads cgq:job:{id}. *job is set on CGQ_VIEW_OK; caller
// frees with cgq_view_job_destroy.
int cgq_view_job_load (cgq_store_t *store, uint64_t id, cgq_view_job_t **job, char *err,
                       size_t errlen);
void cgq_view_job_destroy (cgq_view_job_t **self_p);

// cgq_view_job_done counts terminal trials (succeeded, failed, stopped, cancelled).
uint64_t cgq_view_job_done (const cgq_view_job_t *job);
bool cgq_view_job_terminal (const cgq_view_job_t *job);

// cgq_view_trial_load reads one trial hash; CGQ_VIEW_ABSENT when it does not exist.
int cgq_view_trial_load (cgq_store_t *store, const cgq_view_job_t *job, uint64_t id,
                         cgq_view_trial_t **trial, char *err, size_t errlen);

// cgq_view_trials_all reads trials 0 .. suggested-1 with pipelined HGETALLs,
// skipping absent ones, sorted best first (cgq_view_trials_sort). The array
// and its trials are the caller's: free with cgq_view_trials_free.
int cgq_view_trials_all (cgq_store_t *store, const cgq_view_job_t *job,
                         cgq_view_trial_t ***trials, size_t *n, char *err, size_t errlen);

// cgq_view_trials_top returns the first k trials of the best-first order,
// read from the leaderboard when it holds k of them, else from all trials.
int cgq_view_trials_top (cgq_store_t *store, const cgq_view_job_t *job, size_t k,
                         cgq_view_trial_t ***trials, size_t *n, char *err, size_t errlen);

// cgq_view_trials_best returns at most k succeeded trials, best first (by id
// when the job has no objective): the leaderboard.
int cgq_view_trials_best (cgq_store_t *store, const cgq_view_job_t *job, size_t k,
                          cgq_view_trial_t ***trials, size_t *n, char *err, size_t errlen);

// cgq_view_trials_sort orders succeeded trials with a value by the objective
// (job->mode), ties by id, then every other trial by id.
void cgq_view_trials_sort (const cgq_view_job_t *job, cgq_view_trial_t **trials, size_t n);

// cgq_view_trial_find finds the trial of lowest id in the given state, among
// the job's active (not yet terminal) trials when active_only, else among all.
// CGQ_VIEW_ABSENT when there is none. Caller destroys *trial.
int cgq_view_trial_find (cgq_store_t *store, const cgq_view_job_t *job, const char *state,
                         bool active_only, cgq_view_trial_t **trial, char *err, size_t errlen);

void cgq_view_trial_destroy (cgq_view_trial_t **self_p);
void cgq_view_trials_free (cgq_view_trial_t **trials, size_t n);

// cgq_view_nodes_load reads every node of cgq:nodes, sorted by id.
int cgq_view_nodes_load (cgq_store_t *store, cgq_view_node_t ***nodes, size_t *n, char *err,
                         size_t errlen);
void cgq_view_nodes_free (cgq_view_node_t **nodes, size_t n);

// cgq_view_hash_get finds field in an HGETALL reply; NULL when absent.
const char *cgq_view_hash_get (const redisReply *r, const char *field);

#endif
