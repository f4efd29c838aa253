#ifndef CGQ_LAUNCH_H
#define CGQ_LAUNCH_H

// launch.h: how the worker starts a trial's process (clone3 with a shared
// address space where it can, into the trial's cgroup in cgroup mode; fork
// where clone3 is missing or refused). task.c prepares the pipes, the
// environment and the directory; this starts the child, which execs the
// trial or says why it could not.

#include <stdbool.h>
#include <sys/types.h>

#include "confine.h"

// Why a child could not exec (cgq_spawn_t.fail[0]); 0: it exec'd.
enum { CGQ_SPAWN_FAIL_CHDIR = 1, CGQ_SPAWN_FAIL_EXEC = 2, CGQ_SPAWN_FAIL_CGROUP = 3 };

// What the child needs; in its own memory after a fork, shared with the
// (suspended) worker after a CLONE_VM clone, where the child must write
// nothing but its own stack and, should it fail, `fail`.
typedef struct {
    const char *dir; // the trial's directory: the child's working directory
    char **argv;
    char **envp;
    int out_w, err_w, rep_w; // become its fds 1, 2 and 3
    int null_fd; // /dev/null for its stdin, or -1: it opens one
    int join_fd; // set by cgq_spawn: -1, already in its cgroup, or none
    int max_fd;
    // Set by cgq_spawn: how the child says why it could not exec: the write
    // end of a status pipe (a child of its own memory), or -1: fail[] itself
    // (CLONE_VM; the worker is suspended until the child execs or exits, so
    // nothing races).
    int status_w;
    int fail[2]; // CGQ_SPAWN_FAIL_* and errno; {0, 0}: it exec'd
} cgq_spawn_t;

// cgq_spawn starts the child of sp (the best way that works; launch.c says
// which are tried). leaf_fd: the trial's cgroup (O_PATH) or -1. Returns the
// pid (sp->fail says whether it exec'd), or -1 with errno; -2 when the cgroup
// fallback cannot open cgroup.procs (err says why). Call from the thread
// that reaps the children, one trial at a time.
pid_t cgq_spawn (cgq_spawn_t *sp, cgq_confine_trial_t *confined, int leaf_fd, char *err,
                 size_t errlen);

// cgq_spawn_pipe makes a CLOEXEC pipe whose ends are above fd 3, so that the
// child can dup2 them onto 1, 2 and 3 without clobbering one with another.
// 0, or -1 with errno.
int cgq_spawn_pipe (int fds[2]);

// Tests: start trials as where clone3 is missing (Linux < 5.3) or refused.
extern bool cgq_task_spawn_fork;

#endif
