// cli: what the files of the cgq command share: the parsed command line, the
// lookup of a command's options, one-line errors, and the signal that
// interrupted a long-running command (run, submit --follow). The helpers live
// in cli.c; the commands (cgq_cmd_*, at the end) in the files each names.
#ifndef CGQ_CLI_H
#define CGQ_CLI_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "keyspace.h"
#include "store.h"

#define CGQ_CLI_VERSION CGQ_VERSION // from the project version in CMakeLists.txt

// Exit statuses of every command.
#define CGQ_EXIT_OK 0
#define CGQ_EXIT_FAIL 1 // unreachable Redis/coordinator, job failed
#define CGQ_EXIT_BAD 2  // bad spec, bad arguments, unknown job or trial

#define CGQ_CLI_DEFAULT_REDIS "redis://127.0.0.1:6379/0"
#define CGQ_CLI_DEFAULT_COORDINATOR "tcp://127.0.0.1:7701"
#define CGQ_CLI_MAX_OPTS 16

// One option of one command: "--name" or "--name VALUE".
typedef struct {
    const char *name;
    const char *arg;  // placeholder for the value ("N"), NULL for a flag
    const char *help; // one line, with the default
} cgq_cli_opt_t;

typedef struct cgq_cli_t cgq_cli_t;

typedef struct {
    const char *name;
    const char *args;    // positional synopsis ("SPEC")
    const char *summary; // one line for `cgq --help`
    const char *details; // more lines for `cgq COMMAND --help`, or NULL
    int min_pos, max_pos;
    const cgq_cli_opt_t *opts; // ends with {NULL}
    int (*fn) (cgq_cli_t *cli);
} cgq_cli_cmd_t;

struct cgq_cli_t {
    const char *redis;       // --redis, else $CGQ_REDIS, else the default
    bool redis_given;        // by --redis or $CGQ_REDIS (else a cgq run's state may be read)
    const char *coordinator; // --coordinator, else $CGQ_COORDINATOR, else the default
    const char *curve_secret; // --curve-secret, else $CGQ_CURVE_SECRET, else NULL (CURVE off)
    const char *curve_server; // --curve-server, else $CGQ_CURVE_SERVER
    const cgq_cli_cmd_t *cmd;
    const char *vals[CGQ_CLI_MAX_OPTS]; // per option of cmd: its value, "" for a given flag, NULL
    char **pos;                         // positional arguments (borrowed from argv)
    int npos;
};

// cgq_cli_opt returns the value given for the command's option name, or NULL.
const char *cgq_cli_opt (const cgq_cli_t *cli, const char *name);
bool cgq_cli_flag (const cgq_cli_t *cli, const char *name);

// cgq_cli_opt_u64 reads option name as an integer in [min, max], def when not
// given. Returns 0, or -1 after printing what is wrong (the caller exits 2).
int cgq_cli_opt_u64 (const cgq_cli_t *cli, const char *name, uint64_t def, uint64_t min,
                     uint64_t max, uint64_t *out);

// cgq_cli_parse_id reads a job or trial id; -1 after printing the error.
int cgq_cli_parse_id (const char *what, const char *text, uint64_t *id);

// cgq_cli_error prints "cgq: MESSAGE" as one line on stderr.
void cgq_cli_error (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));

// cgq_cli_store connects to the Redis a read command reads: cli->redis when
// given (--redis, $CGQ_REDIS), else the state a `cgq run` left in this
// directory (local.h; one line on stderr says so), else the default URL.
// 2 s bound on connect and on every command. Returns an exit status: 0 with
// *store set (caller destroys), 2 for a malformed URL, 1 when Redis cannot be
// reached; the error is printed.
int cgq_cli_store (const cgq_cli_t *cli, cgq_store_t **store);

// cgq_cli_store_url connects to url alone, as cgq_cli_store does: for a
// command that also talks to that Redis's coordinator (submit --follow).
int cgq_cli_store_url (const char *url, cgq_store_t **store);

// cgq_cli_load_job parses text as a job id, connects (cgq_cli_store) and
// loads that job. Returns CGQ_EXIT_OK with *store and *job set (caller
// destroys both), or an exit status with the error printed: CGQ_EXIT_BAD for
// a bad or unknown id.
int cgq_cli_load_job (const cgq_cli_t *cli, const char *text, cgq_store_t **store,
                      cgq_job_rec_t **job);

// Set to the number of the signal (SIGINT, SIGTERM) that asked a long command
// to stop, once cgq_cli_catch_signals installed the handlers. Handlers are
// installed without SA_RESTART so that sleeps and polls return early.
extern volatile sig_atomic_t cgq_cli_signal;
void cgq_cli_catch_signals (void);

// cgq_cli_sleep_ms sleeps ms milliseconds, less when a signal arrives.
void cgq_cli_sleep_ms (int ms);

// A progress line (progress.c) is drawn on stderr with '\r' and no newline:
// cgq_cli_line_opened says one is open, cgq_cli_line_break ends it so that the
// next message starts on a line of its own. cgq_cli_error calls the latter.
void cgq_cli_line_opened (void);
void cgq_cli_line_break (void);

// cgq_devices_load reads every device of cgq:devices with pipelined HGETALLs,
// sorted by id (devices.c). Returns 0 with *out (free each with
// cgq_device_rec_destroy, then the array), or -1 with err set.
int cgq_devices_load (cgq_store_t *store, cgq_device_rec_t ***out, size_t *n, char *err,
                      size_t errlen);

// cgq_run_report prints a finished job's leaderboard (table: the top rows;
// json: the results document, all trials unless top_given) on stdout and a
// summary of its failures on stderr (run.c). Returns 0 when the job finished
// with at least one succeeded trial, else 1.
int cgq_run_report (cgq_store_t *store, const cgq_job_rec_t *job, bool json, uint64_t top,
                    bool top_given);

// The commands; each returns the exit status of the program.
int cgq_cmd_validate (cgq_cli_t *cli); // run.c
int cgq_cmd_submit (cgq_cli_t *cli);   // run.c
int cgq_cmd_run (cgq_cli_t *cli);      // run.c
int cgq_cmd_cancel (cgq_cli_t *cli);   // ctl.c
int cgq_cmd_update (cgq_cli_t *cli);   // ctl.c
int cgq_cmd_pause (cgq_cli_t *cli);    // ctl.c
int cgq_cmd_resume (cgq_cli_t *cli);   // ctl.c
int cgq_cmd_status (cgq_cli_t *cli);   // show.c
int cgq_cmd_results (cgq_cli_t *cli);  // show.c
int cgq_cmd_workers (cgq_cli_t *cli);  // show.c
int cgq_cmd_devices (cgq_cli_t *cli);  // devices.c
int cgq_cmd_logs (cgq_cli_t *cli);     // show.c
int cgq_cmd_keygen (cgq_cli_t *cli);   // keygen.c
int cgq_cmd_pareto (cgq_cli_t *cli);   // pareto.c
int cgq_cmd_watch (cgq_cli_t *cli);    // watch.c
int cgq_cmd_plot (cgq_cli_t *cli);     // plot.c
int cgq_cmd_optuna_search (cgq_cli_t *cli); // optuna.c
int cgq_cmd_gc (cgq_cli_t *cli);       // gc.c
int cgq_cmd_scale (cgq_cli_t *cli);    // scale.c

#endif
