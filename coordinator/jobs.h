// jobs: the job and trial state machine. Owns every job_t and trial_t. Each
// transition changes memory and queues its Redis commands (through
// common/keyspace.h) in the same call, so memory and the next flushed batch
// always agree. Only trials that are not terminal live in memory; a job whose
// last trial ended is marked ended and freed by jobs_reap at the end of the
// turn, never inside a caller that may still hold it.
#ifndef CGQ_JOBS_H
#define CGQ_JOBS_H

#include "coord.h"


job_t *jobs_find (coord_t *c, uint64_t id);
// jobs_event queues an event of job j itself (type "job.updated", detail
// borrowed) after the job's grouped trial events of this turn.
void jobs_event (coord_t *c, job_t *j, const char *type, const char *detail);
trial_t *jobs_trial (coord_t *c, uint64_t job, uint64_t trial);

// jobs_add creates job id in memory and appends it to c->jobs. Takes
// ownership of spec and searcher. Writes nothing (see jobs_submitted).
job_t *jobs_add (coord_t *c, uint64_t id, cgq_spec_t *spec, cgq_searcher_t *searcher,
                 const char *spec_dir);
// jobs_submitted writes a new job's hash, its place in cgq:jobs and the
// job.submitted event. yaml and path are the spec as submitted.
void jobs_submitted (coord_t *c, job_t *j, const char *yaml, const char *path, uint64_t total);

// jobs_cancel cancels job id: pending trials are dropped, running ones get
// a Stop and stay in memory until their node reports them stopped. msg gets
// one line for the user whatever the outcome.
typedef enum {
    JOBS_CANCEL_DONE,    // cancelled now
    JOBS_CANCEL_OVER,    // it had already ended (finished or cancelled)
    JOBS_CANCEL_UNKNOWN, // no such job
    JOBS_CANCEL_IO,      // Redis could not be read to tell
} jobs_cancel_t;
jobs_cancel_t jobs_cancel (coord_t *c, uint64_t id, char *msg, size_t msglen);

// cgq pause / cgq resume (control.c decides for the job; docs/architecture.md,
// "Pause and resume"). job_t.paused is one of these (0: not paused).
#define JOBS_PAUSE_CHECKPOINT 1 // running trials pause at their next checkpoint
#define JOBS_PAUSE_NOW 2        // running trials were paused at once
// jobs_pause_trial pauses t (running on a node, or queued after a loss while
// its job is paused): state paused, unqueued, a Stop to its node, its hash's
// `paused` line (where: its latest checkpoint, or none: restarts from zero),
// a trial.paused event. jobs_checkpoint calls it for a paused job's trial
// whose next checkpoint it records.
void jobs_pause_trial (coord_t *c, trial_t *t);
// jobs_resume_trial queues paused t again, first, keeping its checkpoints;
// the paused attempt goes below stage_base, so it uses no retry.
void jobs_resume_trial (coord_t *c, trial_t *t);

// --- trials ----------------------------------------------------------------
// jobs_trial_insert puts a trial into j's memory (state pending, attempt 0)
// without writing anything: for recovery and trial creation. Takes params.
trial_t *jobs_trial_insert (job_t *j, uint64_t id, json_t *params);
// jobs_next_trial returns the next trial of j to start at stage: that
// stage's queue first, else (stage 0) a new one from the searcher (written
// to Redis); NULL if none now.
trial_t *jobs_next_trial (coord_t *c, job_t *j, uint32_t stage);
// jobs_enqueue and jobs_unqueue put t into (take it out of) the queue of
// its stage, t->stage.
void jobs_enqueue (job_t *j, trial_t *t, bool front);
void jobs_unqueue (job_t *j, trial_t *t);
// jobs_queued tells whether any stage of j has a queued trial.
bool jobs_queued (const job_t *j);

// jobs_task_stage_current tells whether a task of t (its stage and attempt,
// from a node) belongs to t's current stage: attempts count on across
// stages, so one of an earlier stage is stale whatever it reports.
bool jobs_task_stage_current (const trial_t *t, uint32_t stage, uint32_t attempt);
// jobs_merged_metrics: a multi-stage trial's result so far, the metrics of
// its finished stages in order, then last (borrowed, may be NULL), later
// names replacing earlier ones. Returns a new reference.
json_t *jobs_merged_metrics (const trial_t *t, const json_t *last);

// jobs_set_state moves t to state s and sets nkv/2 more field-value pairs of
// its hash in the same HSET (borrowed for the call). Setting "error" marks
// the trial as holding one.
void jobs_set_state (coord_t *c, trial_t *t, tstate_t s, const char **kv, int nkv);

// jobs_set_stale marks a running trial stale (its node went silent, so it
// may or may not run still) or running again (the node was heard from):
// the trial hash and the job's counts say so, and the event stream gets
// trial.stale / trial.resumed with why. In memory it stays running
// (t->stale); any other transition clears the mark. Nothing for a trial
// that is not running.
void jobs_set_stale (coord_t *c, trial_t *t, bool stale, const char *why);

// jobs_started records that t's attempt t->attempt now runs on n (t already
// attached there); gpus lists the granted GPU indices ("0,1"). A device
// trial's hash also gets its device, in the same HSET.
void jobs_started (coord_t *c, trial_t *t, node_t *n, const char *gpus);

// jobs_failed ends one failed attempt of t (which holds no node any more):
// back to the queue while retryable and attempts remain, else the trial
// fails with error.
void jobs_failed (coord_t *c, trial_t *t, const char *error, bool retryable);

// jobs_result applies a node's Result. A result for a stale attempt, an
// unknown or a terminal trial changes nothing: the caller acks it anyway,
// so every trial's outcome is recorded once.
void jobs_result (coord_t *c, const Cgq__Result *r);
// jobs_checkpoint judges a node's Checkpoint (checkpoint.h): the current
// attempt's newest becomes the trial's latest (the trial hash's checkpoint
// and checkpoints, the job's checkpoint_bytes), anything else is refused;
// either way node gets a CheckpointAck once the batch is durable.
void jobs_checkpoint (coord_t *c, const char *node, const Cgq__Checkpoint *m);

// jobs_progress records one report of a running trial and, when the job
// has early_stop, lets the stopper judge it: a trial it stops becomes
// stopped at once (its report as its metrics, trial.early_stopped in the
// events) and its node gets a Stop; the trial leaves memory when the node
// reports the task ended.
void jobs_progress (coord_t *c, const Cgq__Progress *p);

// jobs_stopped_value says whether a stopped trial's last report (metrics)
// carries the job's objective(s), so that the searcher observes it as a
// success with that value (*value: the single objective, else NAN), as Ray
// Tune does; false: observed as a failure. Recovery replays it the same way.
bool jobs_stopped_value (const job_t *j, const json_t *metrics, double *value);

// jobs_front_restore puts trial id back on j's Pareto front in memory from
// its cgq:job:{J}:pareto entry (json: {"objective": value, ...}), for
// recovery. Returns 0, or -1 when json does not hold every objective.
int jobs_front_restore (job_t *j, uint64_t id, const char *json);

// jobs_lost hands back a trial whose node was lost (t no longer attached).
void jobs_lost (coord_t *c, trial_t *t, const char *why);

// jobs_requeue_undelivered: after a coordinator restart, node's process
// (instance) said Hello having seen Assigns up to (epoch, seq). Recovered
// running trials it was to run whose Assign was sent to that same process
// later than that never reached it (the coordinator died between saving the
// batch and sending it): they are queued again as trial.requeued, not lost.
void jobs_requeue_undelivered (coord_t *c, const char *node, uint64_t instance, uint64_t epoch,
                               uint64_t seq);

// jobs_readopt takes back a task node n still runs although it was given up
// as lost, while the trial waits in the queue with that same attempt.
// Returns true if it did.
bool jobs_readopt (coord_t *c, node_t *n, trial_t *t, uint32_t attempt);
// jobs_adopt attaches a recovered running trial to the node that reports it.
// Returns true if t was such a trial.
bool jobs_adopt (coord_t *c, node_t *n, trial_t *t, uint32_t attempt);
// jobs_adopt_check hands back recovered running trials whose node did not
// report them by their deadline.
void jobs_adopt_check (coord_t *c, int64_t now);

// jobs_fail ends running job j in state failed with error (its job hash's
// error), as fail_fast does: pending trials dropped, running ones stopped.
void jobs_fail (coord_t *c, job_t *j, const char *error);
// jobs_set_blocked records why no node can run j (NULL: it can again).
void jobs_set_blocked (coord_t *c, job_t *j, const char *reason);

// jobs_unsuggested is how many trials of a running job's search are not
// created yet (0 when the total is not known up front). The job hash counts
// them as pending, and a cancel as cancelled, so that its counts by state
// always add up to its total.
uint64_t jobs_unsuggested (const job_t *j);

// jobs_count is j's count of trials in state k as its job hash says it: the
// trials not created yet count as pending, those a cancel dropped as
// cancelled (the counts by state add up to the total).
uint64_t jobs_count (const job_t *j, int k);

// jobs_check_done ends j when its search is over and no trial is left.
void jobs_check_done (coord_t *c, job_t *j);
// Once per turn, before the flush: counts and searcher state of jobs that
// changed, then ended jobs are freed.
void jobs_write_dirty (coord_t *c);
void jobs_reap (coord_t *c);
void jobs_destroy_all (coord_t *c);

// jobs_each_trial calls fn for every trial of j in memory; fn may end the
// trial (they are collected first).
void jobs_each_trial (job_t *j, void (*fn) (coord_t *c, trial_t *t, void *arg), coord_t *c,
                      void *arg);

#endif
