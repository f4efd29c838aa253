// transport: how the runner reaches a device (runner.yaml's
// devices[].transport). `local` (the default) runs everything on this
// machine, as before. `ssh` (Debian's OpenSSH client, one ControlMaster
// connection per device, its socket in the runner's workdir), `adb` and `sdb`
// (`-s SERIAL push/shell`) run the device's check/reset and the benchmark on
// the board: the artifact is pushed once into a cache on the board keyed by
// its sha256 (oldest evicted past cache_max), and a command benchmark with
// `per-run` timing is timed on the board by a shell timer around the
// command, never by the transport's round trip. See docs/devices.md.
#ifndef CGQ_TRANSPORT_H
#define CGQ_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "invoke.h"
#include "yamldoc.h"

typedef enum {
    CGQ_TRANSPORT_LOCAL = 0,
    CGQ_TRANSPORT_SSH,
    CGQ_TRANSPORT_ADB,
    CGQ_TRANSPORT_SDB,
} cgq_transport_kind_t;

typedef struct {
    cgq_transport_kind_t kind;
    char *host;               // ssh
    long port;                // ssh; 0: ssh's default
    char *user;               // ssh; NULL: ssh's default
    char *key;                // ssh: identity file; NULL: ssh's default
    char *known_hosts;        // ssh: UserKnownHostsFile; NULL: ssh's default
    char *serial;             // adb, sdb
    char *dir;                // the runner's directory on the board
    uint64_t cache_max;       // bytes of artifacts kept on the board
    double connect_timeout_s; // ssh ConnectTimeout; adb: a bound on each command
} cgq_transport_t;

// The marker line the board's timer prints after a per-run command.
#define CGQ_TRANSPORT_TIMER_MARK "cgq-board-ns "

// The board's own account of a run's CPU time: the lines of
// /proc/$$/stat of the shell that ran it, read before and after (its
// cutime + cstime: every child it reaped, the benchmark's processes and
// threads with theirs). Absent when the board's shell cannot read it.
#define CGQ_TRANSPORT_STAT0_MARK "cgq-board-stat0 "
#define CGQ_TRANSPORT_STAT1_MARK "cgq-board-stat1 "

// What cgq_transport_remote_command wraps around the command.
#define CGQ_TRANSPORT_TIMED 1u // the board's timer (CGQ_TRANSPORT_TIMER_MARK)
#define CGQ_TRANSPORT_CPU 2u   // the board's CPU account (CGQ_TRANSPORT_STAT*_MARK)

const char *cgq_transport_kind_name (cgq_transport_kind_t kind);

// cgq_transport_parse reads `transport: local` or `transport: {ssh: {...}}`,
// `{adb: {serial: S}}`, `{sdb: {serial: S}}` at v into *t (zeroed first).
// Returns 0, or -1 with the error set on y (FILE:LINE:COL).
int cgq_transport_parse (cgq_yamldoc_t *y, const cgq_yamldoc_node_t *v, cgq_transport_t *t);
void cgq_transport_fini (cgq_transport_t *t);

// cgq_transport_ready says whether the transport's client is installed (the
// runner's start: sdb is optional). Returns 0, or -1 with why in err.
int cgq_transport_ready (const cgq_transport_t *t, char *err, size_t errlen);

// cgq_transport_argv is the argv that runs the shell command `command` on
// the board (NULL-terminated; free with cgq_transport_argv_free). id and
// workdir name the ssh control socket.
char **cgq_transport_argv (const cgq_transport_t *t, const char *id, const char *workdir,
                           const char *command);
void cgq_transport_argv_free (char **argv);

// cgq_transport_remote_command builds what runs on the board: cd to the
// board's directory, export each keys[i]=vals[i], then command — wrapped in
// the board's timer and/or CPU account as the CGQ_TRANSPORT_* bits of how
// say (0: neither). POSIX sh only (dash, bash, busybox ash, toybox and
// mksh as on Android). Caller frees.
char *cgq_transport_remote_command (const cgq_transport_t *t, char *const *keys,
                                    char *const *vals, size_t n, const char *command,
                                    unsigned how);

// cgq_transport_shell runs command on the board (the device's check or
// reset) with a timeout. Returns 0 on exit status 0, else -1 with how it
// ended (the transport's own error included: ssh's exit 255 and stderr,
// adb's "error: device offline") in err.
int cgq_transport_shell (const cgq_transport_t *t, const char *id, const char *workdir,
                         char *const *keys, char *const *vals, size_t n, const char *command,
                         double timeout_s, char *err, size_t errlen);

// cgq_transport_push puts the local file at path (of that sha256) into the
// board's cache unless one command finds it there already (*pushed false),
// then evicts the oldest entries past cache_max. *remote: its path on the
// board (caller frees). Returns 0, or -1 with the transport's error.
int cgq_transport_push (const cgq_transport_t *t, const char *id, const char *workdir,
                        const char *path, const char *sha256, char **remote, bool *pushed,
                        char *err, size_t errlen);

// cgq_transport_board_ms reads the board timer's line from a run's output.
// Returns 0 with the milliseconds, or -1 when there is none.
int cgq_transport_board_ms (const char *output, size_t len, double *ms);

// cgq_transport_board_cpu_s reads the board's CPU account of a run from its
// output: the CPU seconds its processes used (hz: the board's clock ticks
// per second, USER_HZ). Returns 0, or -1 when the lines are not there or
// malformed.
int cgq_transport_board_cpu_s (const char *output, size_t len, double hz, double *s);

// cgq_transport_strip_marks removes the CGQ_TRANSPORT_STAT*_MARK lines from
// a run's output (text[0..*len), NUL-terminated again), so that a parse:
// regex never sees them.
void cgq_transport_strip_marks (char *text, size_t *len);

// cgq_transport_strip_timer removes the CGQ_TRANSPORT_TIMER_MARK line, so that
// a failed run's error quotes the benchmark's own last lines, not the timer's.
void cgq_transport_strip_timer (char *text, size_t *len);

// cgq_transport_close ends the ssh control connection (the runner's exit).
void cgq_transport_close (const cgq_transport_t *t, const char *id, const char *workdir);

#endif
