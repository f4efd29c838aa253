// task: one running task of a worker — a trial process in its own session
// (and process group), confined (confine.h) so that all it starts ends with
// it, its stdout/stderr logs, its report pipe (fd 3), its timeout and its
// result. See docs/architecture.md, "Trial process contract".
//
// A task does not block and owns no loop: the worker polls the fds from
// cgq_task_fds, calls cgq_task_on_readable when one is readable, and calls
// cgq_task_tick on every loop turn (after SIGCHLD, at cgq_task_deadline) to
// reap the process and to fire timeouts and kill escalations.
#ifndef CGQ_TASK_H
#define CGQ_TASK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cgq.pb-c.h"
#include "confine.h"
#include "launch.h"
#include "result.h"
#include "spare.h"

typedef struct cgq_task_t cgq_task_t;

// Called once per checkpoint announcement of the trial: a report line whose
// "checkpoint" is true ({"checkpoint": true, "epoch": 12}); step_json is the
// line without "checkpoint" ({"epoch":12}, borrowed for the call), line its
// number among the trial's report lines. The announcement is not a report:
// it is not sent as Progress and is never the result (docs/architecture.md,
// "Checkpoints").
typedef void (cgq_task_checkpoint_fn) (void *arg, cgq_task_t *task, const char *step_json,
                                       uint64_t line);

typedef struct {
    const char *workdir;   // absolute; trial dirs are WORKDIR/job-J/trial-T/attempt-A
    uint64_t log_cap;      // cap of stdout.log and stderr.log each; 0: none
    uint64_t max_report_line; // longer fd-3 report lines are skipped; 0: 1 MiB
    int64_t kill_grace_ms; // SIGTERM -> SIGKILL after a timeout
    cgq_confine_t *confine; // borrowed until the task is destroyed; NULL: signals go to
                            // the trial's process group only (what it moves out escapes)
    cgq_spare_t *spare;     // borrowed; trial directories made ahead (NULL: made at start)
    // Checkpoints: every trial gets CGQ_CHECKPOINT_DIR, TRIAL_DIR/checkpoint.
    cgq_task_checkpoint_fn *on_checkpoint; // NULL: announcements are ignored, with a warning
    const char *restored;    // a directory (on the workdir's file system) moved into place as
                             // CGQ_CHECKPOINT_DIR; NULL: an empty one
    const char *resume_json; // the step the restored checkpoint was announced at (a JSON
                             // object): CGQ_RESUME_STEP, CGQ_RESUME_JSON, and reports at or
                             // before it are not sent; NULL: a fresh start
    const char *notes;       // lines written to stderr.log as "cgq: LINE" before the trial
                             // starts ('\n'-separated; NULL: none)
} cgq_task_opts_t;

// Called once per valid report line (a JSON object, re-encoded compact) with
// seq = 1, 2, ... report_json is borrowed for the call.
typedef void (cgq_task_report_fn) (void *arg, cgq_task_t *task, const char *report_json,
                                   uint64_t seq);

// cgq_task_start starts the "command" task of assign: creates its trial
// directory, forks and execs assign->argv with the contract environment.
// A "predictor" task (argv[0]: the dataset dir, relative to spec_dir) execs
// `cgq-predictor trial --data DIR` instead, found beside this program.
// Always returns a task (caller destroys): one that could not be started at
// all (directory, pipe, cgroup or fork failure) is done at once with TASK_LOST, one
// whose exec failed finishes shortly with TASK_FAILED "cannot run 'x': ...".
// assign and opts are copied. on_report may be NULL.
cgq_task_t *cgq_task_start (const Cgq__Assign *assign, const cgq_task_opts_t *opts,
                            cgq_task_report_fn *on_report, void *arg);

// Tests set cgq_task_spawn_fork (launch.h) to start trials as where clone3
// is missing (Linux < 5.3) or refused: fork, then in cgroup mode the child
// moves itself into its leaf through cgroup.procs. (Else: clone3 with a
// shared address space where it can, into the leaf in cgroup mode; see
// launch.c.)

// cgq_task_predictor_argv is what a "predictor" task execs: {path of
// cgq-predictor, "trial", "--data", DIR, NULL} (4 entries). Caller frees each
// entry and the array.
char **cgq_task_predictor_argv (const Cgq__Assign *assign);

// cgq_task_destroy kills what is left of the trial (SIGKILL: its cgroup or
// session, see cgq_task_opts_t.confine), reaps the process and frees the task. NULL-safe; sets *self_p = NULL.
void cgq_task_destroy (cgq_task_t **self_p);

// The task's ref, borrowed for the task's lifetime.
const Cgq__TaskRef *cgq_task_ref (const cgq_task_t *self);
// The process id (also the session and process group id), or 0 when none was
// started.
pid_t cgq_task_pid (const cgq_task_t *self);
// The absolute trial directory, borrowed.
const char *cgq_task_dir (const cgq_task_t *self);

// cgq_task_fds writes the task's open pipe read ends (at most 3) to fds and
// returns how many.
size_t cgq_task_fds (const cgq_task_t *self, int *fds);

// cgq_task_on_readable reads what is available on fd (one of cgq_task_fds).
void cgq_task_on_readable (cgq_task_t *self, int fd);

// cgq_task_tick reaps the process if it exited (then drains and closes the
// pipes, kills what is left of the trial and builds the result) and fires the
// timeout and the SIGKILL escalation when they are due.
void cgq_task_tick (cgq_task_t *self, int64_t now_ms);

// cgq_task_deadline is the monotonic ms of the next timer, or -1 when none.
int64_t cgq_task_deadline (const cgq_task_t *self);

// cgq_task_stop sends SIGTERM to the task's processes and SIGKILL after grace_ms;
// its result will be TASK_STOPPED with reason as the error. Again on a
// stopping task, it only shortens the grace.
void cgq_task_stop (cgq_task_t *self, const char *reason, int64_t grace_ms);

// True once the process has been reaped and the result is ready.
bool cgq_task_done (const cgq_task_t *self);

// cgq_task_take_result hands over the result of a done task (caller destroys
// it with cgq_result_destroy, node/result.h); NULL when not done or already taken.
Cgq__Result *cgq_task_take_result (cgq_task_t *self);

// cgq_task_fail ends the task as TASK_FAILED with error (copied): a running
// trial is stopped (SIGTERM, SIGKILL after grace_ms); a done one's result
// takes the error (a success or a stop keeps its status: a success's error
// is its note, the trial's warning). The worker calls it when a checkpoint cannot be sealed.
void cgq_task_fail (cgq_task_t *self, const char *error, int64_t grace_ms);

// cgq_task_warn writes one "cgq: ..." line into the trial's stderr.log.
void cgq_task_warn (cgq_task_t *self, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

// The trial's CGQ_CHECKPOINT_DIR (absolute), borrowed.
const char *cgq_task_checkpoint_dir (const cgq_task_t *self);

// cgq_task_env_name turns a param name into its variable, "lr-max" ->
// "CGQ_PARAM_LR_MAX". Caller frees.
char *cgq_task_env_name (const char *param);

#endif
