// confine: every process a trial starts ends with the trial — when its main
// process exits, at its timeout or stop, and when the worker itself dies
// (kill -9 included). See docs/architecture.md, "Trial confinement".
//
// One of two ways, chosen once per worker (--confine):
//  - cgroup: each trial runs in its own cgroup v2 leaf under
//    <the worker's cgroup>/cgq-worker-PID-START; ending a trial writes 1 to
//    the leaf's cgroup.kill (or, before Linux 5.14, freezes it and SIGKILLs
//    every member) and removes the leaf.
//  - pgroup: the worker is a child subreaper; ending a trial kills its
//    session (its main process leads one), everything descended from it, and
//    the orphans the worker adopted whose environment names the trial's
//    directory (CGQ_TRIAL_DIR).
// In both, a watchdog process forked by the worker (the reaper) holds one end
// of a socket whose other end only the worker holds; when it reads EOF (the
// worker is gone, however it died) it kills what the worker's trials left.
// A worker that starts also sweeps what dead workers left when their reaper
// died too: the state files under WORKDIR/.cgq-confine/ and the
// cgq-worker-PID-START cgroups beside its own whose owner no longer runs.
#ifndef CGQ_CONFINE_H
#define CGQ_CONFINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef enum {
    CGQ_CONFINE_AUTO = 0, // cgroup where usable, else pgroup
    CGQ_CONFINE_CGROUP,
    CGQ_CONFINE_PGROUP,
} cgq_confine_mode_t;

// cgq_confine_mode_parse maps "auto", "cgroup" or "pgroup" to *mode.
// Returns 0, or -1 when name is none of them.
int cgq_confine_mode_parse (const char *name, cgq_confine_mode_t *mode);

typedef struct {
    cgq_confine_mode_t mode;
    const char *workdir; // absolute; state files go to WORKDIR/.cgq-confine/ (copied)
    bool log_json;       // the reaper's few log lines as JSON, like the worker's
    bool no_kill_file;   // tests: act as if cgroup.kill were missing (Linux < 5.14)
} cgq_confine_opts_t;

typedef struct cgq_confine_t cgq_confine_t;

// cgq_confine_new sweeps what dead workers left, picks the mode, makes the
// worker's cgroup (cgroup mode) or makes the process a child subreaper
// (pgroup mode), and forks the reaper. Call it before any thread exists if
// you can (the reaper is written to be safe either way). Returns NULL with
// err filled when the mode asked for cannot be had ("--confine cgroup" where
// cgroup v2 is not usable) or the reaper cannot be started.
cgq_confine_t *cgq_confine_new (const cgq_confine_opts_t *opts, char *err, size_t errlen);

// cgq_confine_destroy removes the leaves of ended trials that were still
// busy (waiting up to 1 s), then closes the socket: the reaper kills what is
// left, removes the worker's cgroup and state file and exits; this waits up
// to 5 s for it. Trials must have ended first. NULL-safe; sets *self_p = NULL.
void cgq_confine_destroy (cgq_confine_t **self_p);

// One line for the start-up log saying how and where trials are confined
// (borrowed for the object's lifetime).
const char *cgq_confine_describe (const cgq_confine_t *self);

// True in cgroup mode.
bool cgq_confine_is_cgroup (const cgq_confine_t *self);

// The worker's cgroup directory, <its cgroup>/cgq-worker-PID-START, in which
// each trial gets a leaf; NULL in pgroup mode. Borrowed.
const char *cgq_confine_cgroup_dir (const cgq_confine_t *self);

// The reaper's pid: a child of the worker that the worker's own reaping of
// orphans must leave alone (cgq_confine_tick reaps it).
pid_t cgq_confine_reaper_pid (const cgq_confine_t *self);

// cgq_confine_tick does the housekeeping of one loop turn: starts another
// reaper if the last one died (it says so in the log), retries removing
// the leaves of ended trials that were still busy, and rewrites the state
// file when it is due.
void cgq_confine_tick (cgq_confine_t *self);

// cgq_confine_deadline is when cgq_confine_tick has work to do (the state
// file, rewritten a moment after trials start or end; cgq_now_ms), or 0.
int64_t cgq_confine_deadline (const cgq_confine_t *self);

// ---------------------------------------------------------------------------
// One trial

typedef struct cgq_confine_trial_t cgq_confine_trial_t;

// cgq_confine_trial_new prepares the confinement of a trial about to be
// forked: in cgroup mode it creates the trial's leaf (named after name,
// e.g. "job-7.trial-3.attempt-1"); in both it tells the reaper about
// trial_dir (absolute, below the workdir). self is borrowed until the trial
// ends. Returns NULL with err filled when the leaf cannot be made.
cgq_confine_trial_t *cgq_confine_trial_new (cgq_confine_t *self, const char *name,
                                            const char *trial_dir, char *err, size_t errlen);

// The trial's leaf directory (an O_PATH fd, close-on-exec) for clone3's
// CLONE_INTO_CGROUP, which starts the child in the leaf; -1 in pgroup mode.
// The child must also call setsid() (pgroup mode relies on the session).
// Valid until cgq_confine_trial_started.
int cgq_confine_trial_leaf_fd (const cgq_confine_trial_t *t);

// The fallback where clone3 or CLONE_INTO_CGROUP is missing (Linux < 5.7,
// or a seccomp filter that refuses clone3): the leaf's cgroup.procs (opened
// on the first call, close-on-exec), to which the forked child writes "0"
// before exec, which moves it into the leaf; -1 in pgroup mode, or -1 with
// err filled when it cannot be opened. Valid until cgq_confine_trial_started.
int cgq_confine_trial_join_fd (cgq_confine_trial_t *t, char *err, size_t errlen);

// The trial's leaf cgroup directory (borrowed), or NULL in pgroup mode.
const char *cgq_confine_trial_cgroup (const cgq_confine_trial_t *t);

// cgq_confine_trial_started records the trial's main process (its session
// and process group id too) once it has exec'd or failed to, and closes the
// join fd in the worker.
void cgq_confine_trial_started (cgq_confine_trial_t *t, pid_t pid);

// cgq_confine_trial_signal sends sig to every process of the trial (SIGKILL
// is repeated until no process of it is left that was not sent one). Returns
// how many processes were signalled.
size_t cgq_confine_trial_signal (cgq_confine_trial_t *t, int sig);

// cgq_confine_trial_end kills what is left of the trial (SIGKILL), removes
// its leaf (later, from cgq_confine_tick, while it is still busy), tells the
// reaper, and frees t. NULL-safe; sets *t_p = NULL.
void cgq_confine_trial_end (cgq_confine_trial_t **t_p);

#endif
