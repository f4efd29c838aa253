// invoke: one timed invocation of a command — fork, exec in its own process
// group (optionally pinned to CPUs), its stdout and stderr captured together
// (capped), waited for through a pidfd with the run's timeout, timed with
// the monotonic clock from just before the fork to just after wait4, and its
// peak RSS taken from wait4's rusage. A run past its timeout gets SIGKILL on
// its whole process group. The runner's measurements, and the devices'
// setup/check/reset commands, run through here.
#ifndef CGQ_INVOKE_H
#define CGQ_INVOKE_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

typedef struct {
    char *const *argv;       // argv[0] looked up in PATH
    char *const *envp;       // the whole environment; NULL: the runner's own
    const char *cwd;         // NULL: the runner's
    const cpu_set_t *cpus;   // NULL: no pinning
    double timeout_s;        // 0: none
    size_t output_cap;       // bytes of output kept (the first ones); 0: 64 KiB
} cgq_invoke_opts_t;

typedef enum {
    CGQ_INVOKE_EXITED,   // status holds the exit code
    CGQ_INVOKE_SIGNALED, // status holds the signal
    CGQ_INVOKE_TIMEOUT,  // killed after timeout_s
    CGQ_INVOKE_ERROR,    // could not be started (err says why)
} cgq_invoke_end_t;

typedef struct {
    cgq_invoke_end_t end;
    int status;
    double elapsed_ms;    // fork to reap, monotonic
    long maxrss_kb;       // wait4's ru_maxrss (KiB on Linux)
    cgq_buf_t output;     // stdout and stderr, interleaved as written (caller: _fini)
    bool truncated;       // output went past output_cap
    char err[256];        // CGQ_INVOKE_ERROR: why
} cgq_invoke_t;

// cgq_invoke_run runs one command and fills *out (init'ed here; release with
// cgq_invoke_fini). Returns 0 when it exited with status 0, else -1.
int cgq_invoke_run (const cgq_invoke_opts_t *opts, cgq_invoke_t *out);
void cgq_invoke_fini (cgq_invoke_t *out);

// cgq_invoke_describe writes how a run that did not succeed ended, for a
// person: "exit status 3", "killed by signal 9", "timed out after 2s", with
// the output's last line when there is one. Returns buf.
char *cgq_invoke_describe (const cgq_invoke_t *out, double timeout_s, char *buf, size_t len);

// cgq_invoke_shell runs "/bin/sh -c command" with envp (a device's check,
// reset and setup) and a timeout. Returns 0 on exit status 0, else -1 with
// how it ended in err.
int cgq_invoke_shell (const char *command, char *const *envp, double timeout_s, char *err,
                      size_t errlen);

// cgq_invoke_env builds an environment: the runner's own, then each
// keys[i]=vals[i] (later ones replace earlier ones of the same name). n
// pairs. Caller frees with cgq_invoke_env_free.
char **cgq_invoke_env (char *const *keys, char *const *vals, size_t n);
void cgq_invoke_env_free (char **envp);

// cgq_invoke_kill_group is the SIGTERM hook of a measuring process: SIGKILL
// to the group of the run now in flight, if any (async-signal-safe).
void cgq_invoke_kill_group (void);

#endif
