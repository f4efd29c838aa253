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

#include "keyspace.h"
#include "store.h"

// The records (cgq_job_rec_t, cgq_trial_rec_t, cgq_node_rec_t) and the
// state names are the data model's (common/keyspace.h).

// Results of the loaders: found, absent (unknown job or trial), or an I/O
// error with err set to one line.
#define CGQ_VIEW_OK 0
#define CGQ_VIEW_ABSENT 1
#define CGQ_VIEW_ERROR (-1)

// cgq_view_job_load reads cgq:job:{id}. *job is set on CGQ_VIEW_OK; caller
// frees with cgq_job_rec_destroy.
int cgq_view_job_load (cgq_store_t *store, uint64_t id, cgq_job_rec_t **job, char *err,
                       size_t errlen);


// cgq_view_trial_load reads one trial hash; CGQ_VIEW_ABSENT when it does not exist.
int cgq_view_trial_load (cgq_store_t *store, const cgq_job_rec_t *job, uint64_t id,
                         cgq_trial_rec_t **trial, char *err, size_t errlen);

// cgq_view_trials_all reads trials 0 .. suggested-1 with pipelined HGETALLs,
// skipping absent ones, sorted best first (cgq_view_trials_sort). The array
// and its trials are the caller's: free with cgq_view_trials_free.
int cgq_view_trials_all (cgq_store_t *store, const cgq_job_rec_t *job,
                         cgq_trial_rec_t ***trials, size_t *n, char *err, size_t errlen);

// cgq_view_trials_top returns the first k trials of the best-first order,
// read from the leaderboard when it holds k of them, else from all trials.
int cgq_view_trials_top (cgq_store_t *store, const cgq_job_rec_t *job, size_t k,
                         cgq_trial_rec_t ***trials, size_t *n, char *err, size_t errlen);

// cgq_view_trials_best returns at most k succeeded trials, best first (by id
// when the job has no objective): the leaderboard.
int cgq_view_trials_best (cgq_store_t *store, const cgq_job_rec_t *job, size_t k,
                          cgq_trial_rec_t ***trials, size_t *n, char *err, size_t errlen);

// cgq_view_trials_sort orders succeeded trials with a value by the objective
// (job->mode), ties by id, then every other trial by id.
void cgq_view_trials_sort (const cgq_job_rec_t *job, cgq_trial_rec_t **trials, size_t n);

// cgq_view_trial_find finds the trial of lowest id in the given state, among
// the job's active (not yet terminal) trials when active_only, else among all.
// CGQ_VIEW_ABSENT when there is none. Caller destroys *trial.
int cgq_view_trial_find (cgq_store_t *store, const cgq_job_rec_t *job, const char *state,
                         bool active_only, cgq_trial_rec_t **trial, char *err, size_t errlen);

// cgq_view_trials_active reads at most max of the job's active trials (the
// set cgq:job:{J}:active: pending, running, unschedulable), by id. Free with
// cgq_view_trials_free.
int cgq_view_trials_active (cgq_store_t *store, const cgq_job_rec_t *job, size_t max,
                            cgq_trial_rec_t ***trials, size_t *n, char *err, size_t errlen);

// cgq_view_reports reads the report stream of a trial (cgq:job:{J}:reports:T,
// oldest first, at most CGQ_REPORTS_MAXLEN): *reports is a JSON array of the
// report objects (lines that are not objects skipped); caller decrefs.
int cgq_view_reports (cgq_store_t *store, uint64_t job, uint64_t trial, json_t **reports,
                      char *err, size_t errlen);

void cgq_view_trials_free (cgq_trial_rec_t **trials, size_t n);

// cgq_view_nodes_load reads every node of cgq:nodes, sorted by id.
int cgq_view_nodes_load (cgq_store_t *store, cgq_node_rec_t ***nodes, size_t *n, char *err,
                         size_t errlen);
void cgq_view_nodes_free (cgq_node_rec_t **nodes, size_t n);


#endif
