// cgq-worker: runs the tasks a coordinator assigns, as child processes within
// the resources it offers. The loop, the link and the shutdown are every
// node's (node/shell.h); what is the worker's own is here: its options and
// resources, its tasks (task.h) behind the shell's callbacks, their
// confinement (confine.h) and the orphans they leave.
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "allow.h"
#include "auth.h"
#include "checkpoints.h"
#include "ckpt_store.h"
#include "config.h"
#include "confine.h"
#include "gpu.h"
#include "link.h"
#include "log.h"
#include "result.h"
#include "shell.h"
#include "task.h"
#include "util.h"
#include "wire.h"

#define S_PROG "cgq-worker"
#define S_SHUTDOWN_GRACE_MS 2000 // at most this much SIGTERM grace on shutdown

typedef struct {
    char *coordinator;
    char *id;
    double cpus;
    char *gpus;
    uint64_t memory;
    char *workdir;
    char *checkpoint_store;
    char *checkpoint_token_file; // an HTTP(S) store's bearer token (ckpt_store.h)
    int64_t checkpoint_stall_ms;  // an HTTP(S) store's transfer without a byte this long ends
    char *checkpoint_ca_file;     // an https store's CA certificates (PEM)
    uint64_t log_cap;
    uint64_t max_report_line;
    int64_t kill_grace_ms;
    int64_t heartbeat_ms;
    int64_t idle_exit_ms; // 0: never; else exit after this long without a task
    uint64_t min_free;    // 0: never full; else no new task below this free space
    char *confine;
    char *curve_secret;  // CURVE (common/auth.h)
    char *curve_server;
    char *allow_command; // '\n'-separated prefixes (worker/allow.h)
    char *log_level;
    char *log_format;
    bool log_json;
} s_cfg_t;

static const cgq_opt_t s_opts[] = {
    {"coordinator", 0, CGQ_OPT_STRING, offsetof (s_cfg_t, coordinator), "tcp://127.0.0.1:7700",
     "CGQ_COORDINATOR_NODES",
     "coordinator node endpoint; a comma-separated list names a leader and its standbys", 0, 0},
    {"id", 0, CGQ_OPT_STRING, offsetof (s_cfg_t, id), NULL, "CGQ_WORKER_ID",
     "node id, stable across reconnects (default: HOSTNAME-PID)", 0, 0},
    {"cpus", 0, CGQ_OPT_DOUBLE, offsetof (s_cfg_t, cpus), NULL, NULL,
     "CPU slots, fractions allowed (default: number of online cores)", 0, 1e6},
    {"gpus", 0, CGQ_OPT_STRING, offsetof (s_cfg_t, gpus), "none", "CGQ_GPUS",
     "GPUs offered: none, auto (nvidia-smi), 0,1 (these indices), fake:N", 0, 0},
    {"memory", 0, CGQ_OPT_BYTES, offsetof (s_cfg_t, memory), NULL, NULL,
     "memory offered (default: MemTotal)", 0, 0},
    {"workdir", 0, CGQ_OPT_STRING, offsetof (s_cfg_t, workdir), "./.cgq/work", NULL,
     "trial directories live under DIR/job-J/trial-T/attempt-A", 0, 0},
    {"checkpoint-store", 0, CGQ_OPT_STRING, offsetof (s_cfg_t, checkpoint_store), NULL,
     "CGQ_CHECKPOINT_STORE",
     "where trials' checkpoints are sealed when their spec names no checkpoint.store "
     "(default: WORKDIR/checkpoints, which only this machine sees: a trial resumes here only)",
     0, 0},
    {"checkpoint-token-file", 0, CGQ_OPT_STRING, offsetof (s_cfg_t, checkpoint_token_file), NULL,
     NULL,
     "a file whose first line is the bearer token for an HTTP(S) checkpoint store "
     "(CGQ_CHECKPOINT_TOKEN, the token itself, wins when set)",
     0, 0},
    {"checkpoint-ca-file", 0, CGQ_OPT_STRING, offsetof (s_cfg_t, checkpoint_ca_file), NULL, NULL,
     "the CA certificates (PEM) an https checkpoint store's certificate is checked against "
     "(default: the system's)",
     0, 0},
    {"checkpoint-stall", 0, CGQ_OPT_DURATION_MS, offsetof (s_cfg_t, checkpoint_stall_ms), "30s",
     NULL,
     "a request to an HTTP(S) checkpoint store that moves no byte for this long is given up "
     "(and tried again, 3 times at most)",
     1000, 3600000},
    {"log-cap", 0, CGQ_OPT_BYTES, offsetof (s_cfg_t, log_cap), "16M", "CGQ_LOG_CAP",
     "cap of each trial's stdout/stderr log file (0: none)", 0, 0},
    {"max-report-line", 0, CGQ_OPT_BYTES, offsetof (s_cfg_t, max_report_line), "1M",
     "CGQ_MAX_REPORT_LINE", "longer report lines (fd 3) are skipped, with a warning in stderr.log",
     64, 1073741824.0},
    {"kill-grace", 0, CGQ_OPT_DURATION_MS, offsetof (s_cfg_t, kill_grace_ms), "5s", NULL,
     "SIGTERM -> SIGKILL grace for timeouts and stops", 0, 3600000},
    {"heartbeat", 0, CGQ_OPT_DURATION_MS, offsetof (s_cfg_t, heartbeat_ms), "1s", NULL,
     "heartbeat interval until the coordinator's Welcome sets it", 10, 600000},
    {"idle-exit", 0, CGQ_OPT_DURATION_MS, offsetof (s_cfg_t, idle_exit_ms), "0", "CGQ_IDLE_EXIT",
     "exit (Bye, code 0) after this long with no task: a batch-scheduled worker gives its "
     "allocation back (0: never)",
     0, 31536000000.0},
    {"min-free", 0, CGQ_OPT_BYTES, offsetof (s_cfg_t, min_free), "64M", "CGQ_MIN_FREE",
     "take no new task while --workdir's filesystem has less free space than this, or fewer "
     "than 64 free inodes (0: never refuse); the coordinator and cgq nodes show why",
     0, 0},
    {"confine", 0, CGQ_OPT_STRING, offsetof (s_cfg_t, confine), "auto", "CGQ_CONFINE",
     "how all processes of a trial end with it: cgroup (v2), pgroup (session), auto", 0, 0},
    {"curve-secret", 0, CGQ_OPT_STRING, offsetof (s_cfg_t, curve_secret), NULL,
     "CGQ_CURVE_SECRET", "CURVE: this node's secret certificate (NAME.key_secret of cgq keygen)",
     0, 0},
    {"curve-server", 0, CGQ_OPT_STRING, offsetof (s_cfg_t, curve_server), NULL,
     "CGQ_CURVE_SERVER", "CURVE: the coordinator's public certificate (its NAME.key)", 0, 0},
    {"allow-command", 0, CGQ_OPT_LIST, offsetof (s_cfg_t, allow_command), NULL,
     "CGQ_ALLOW_COMMANDS",
     "run only commands that start with this prefix (repeatable; variable: one per line; "
     "kind: predictor runs `cgq-predictor trial --data DIR`)",
     0, 0},
    {"log-level", 0, CGQ_OPT_STRING, offsetof (s_cfg_t, log_level), "info", "CGQ_LOG_LEVEL",
     "debug, info, warn, error", 0, 0},
    {"log-format", 0, CGQ_OPT_STRING, offsetof (s_cfg_t, log_format), "text", "CGQ_LOG_FORMAT",
     "text or json (JSON lines: ts, level, program, msg, job, trial, attempt)", 0, 0},
    {"log-json", 0, CGQ_OPT_BOOL, offsetof (s_cfg_t, log_json), "false", NULL,
     "same as --log-format json", 0, 0},
    {NULL, 0, 0, 0, NULL, NULL, NULL, 0, 0},
};

typedef struct {
    s_cfg_t cfg;
    cgq_confine_mode_t confine_mode;
    cgq_confine_t *confine;
    cgq_spare_t *spare; // NULL: trial directories are made when a trial starts
    char *workdir;   // absolute
    char *hostname;
    cgq_gpu_list_t gpus;
    Cgq__Resources resources;
    Cgq__Gpu *gpu_msgs;
    Cgq__Gpu **gpu_ptrs;
    cgq_shell_t *shell;
    cgq_link_t *link; // the shell's (cgq_shell_link), borrowed
    cgq_auth_t *auth; // CURVE keys, or NULL
    cgq_task_t **tasks;
    size_t n_tasks;
    Cgq__TaskRef **running; // scratch for s_running
    cgq_checkpoints_t *ckpts; // the tasks' checkpoints (checkpoints.h)
    char *ckpt_store;         // absolute: --checkpoint-store, else WORKDIR/checkpoints
    int64_t busy_ms;          // when a task last ran (or the worker started): --idle-exit
    int64_t space_ms;         // when --workdir's free space was last looked at
    bool full;                // below --min-free when last looked at
} s_worker_t;

static size_t
s_running (void *arg, Cgq__TaskRef ***refs)
{
    s_worker_t *w = arg;
    // Tasks waiting for their checkpoint's restore run as far as the
    // coordinator is concerned.
    const Cgq__TaskRef **starting = NULL;
    size_t k = w->ckpts ? cgq_checkpoints_starting (w->ckpts, &starting) : 0;
    w->running = cgq_xrealloc (w->running, (w->n_tasks + k + 1) * sizeof *w->running);
    for (size_t i = 0; i < w->n_tasks; i++)
        w->running[i] = (Cgq__TaskRef *) cgq_task_ref (w->tasks[i]);
    for (size_t i = 0; i < k; i++)
        w->running[w->n_tasks + i] = (Cgq__TaskRef *) starting[i];
    *refs = w->running;
    return w->n_tasks + k;
}

static void
s_on_checkpoint (void *arg, cgq_task_t *task, const char *step_json, uint64_t line)
{
    s_worker_t *w = arg;
    cgq_checkpoints_announce (w->ckpts, task, step_json, line);
}

static void
s_on_report (void *arg, cgq_task_t *task, const char *report_json, uint64_t seq)
{
    s_worker_t *w = arg;
    cgq_link_progress (w->link, cgq_task_ref (task), report_json, seq);
}

static cgq_task_t *
s_find_task (s_worker_t *w, const Cgq__TaskRef *ref)
{
    for (size_t i = 0; i < w->n_tasks; i++)
        if (cgq_result_ref_equal (cgq_task_ref (w->tasks[i]), ref))
            return w->tasks[i];
    return NULL;
}


// s_predictor_allowed applies --allow-command to a "predictor" trial: the
// command checked is the one the worker execs for it, `cgq-predictor trial
// --data DIR`, by the binary's name or by its full path. So
// `--allow-command cgq-predictor` allows every predictor trial, and
// `--allow-command 'cgq-predictor trial --data /data/cg/'` only those on
// datasets under /data/cg. Without an allow-list everything runs. Returns
// NULL or the reason (caller frees).
static char *
s_predictor_allowed (s_worker_t *w, const Cgq__Assign *a)
{
    if (!w->cfg.allow_command || !*w->cfg.allow_command)
        return NULL;
    if (a->n_argv < 1 || !a->argv[0])
        return NULL; // cgq_task_start fails it with its own error
    char **argv = cgq_task_predictor_argv (a);
    Cgq__Assign b = *a;
    b.argv = argv;
    b.n_argv = 4;
    char *why = cgq_allow_check (w->cfg.allow_command, &b);
    if (why && strchr (argv[0], '/')) {
        char *full = argv[0];
        argv[0] = cgq_xstrdup ("cgq-predictor");
        free (why);
        why = cgq_allow_check (w->cfg.allow_command, &b);
        free (full);
    }
    char *out = why ? cgq_xasprintf ("%s; a predictor trial runs `cgq-predictor trial --data "
                                     "DIR` (allow it with --allow-command cgq-predictor)",
                                     why)
                    : NULL;
    free (why);
    for (int i = 0; argv[i]; i++)
        free (argv[i]);
    free (argv);
    return out;
}

// s_start starts a command or predictor task of a, resumed from restored
// (cgq_checkpoints_start_fn).
static void
s_start (void *arg, const Cgq__Assign *a, const char *restored, const char *resume_json,
         const char *notes)
{
    s_worker_t *w = arg;
    if (!restored && a->resume_required) {
        // A PBT child: starting it from zero would run the donor's perturbed
        // params on an untrained model and call it the donor's continuation.
        char *e = cgq_xasprintf ("cannot start: the checkpoint this trial continues from could not "
                                 "be restored, and it must not start afresh (%s)",
                                 notes ? notes : "none named");
        cgq_twarn (a->task->job, a->task->trial, a->task->attempt, "%s", e);
        cgq_link_result (w->link, cgq_result_new (a->task, CGQ__TASK_STATUS__TASK_FAILED, NULL, e));
        free (e);
        return;
    }
    cgq_task_opts_t opts = {
        .workdir = w->workdir,
        .log_cap = w->cfg.log_cap,
        .max_report_line = w->cfg.max_report_line,
        .kill_grace_ms = w->cfg.kill_grace_ms,
        .confine = w->confine,
        .spare = w->spare,
        .on_checkpoint = s_on_checkpoint,
        .restored = restored,
        .resume_json = resume_json,
        .notes = notes,
    };
    cgq_task_t *task = cgq_task_start (a, &opts, s_on_report, w);
    if (cgq_task_done (task)) {
        cgq_link_result (w->link, cgq_task_take_result (task));
        cgq_task_destroy (&task);
        return;
    }
    cgq_tinfo (a->task->job, a->task->trial, a->task->attempt, "started pid %d (%s)",
               (int) cgq_task_pid (task), a->argv[0]);
    w->tasks = cgq_xrealloc (w->tasks, (w->n_tasks + 1) * sizeof *w->tasks);
    w->tasks[w->n_tasks++] = task;
    cgq_checkpoints_started (w->ckpts, task, a->checkpoint_store);
    cgq_checkpoints_inherited (w->ckpts, task, a->resume, a->n_resume);
}

// s_starting says whether task waits for its checkpoint's restore here.
static bool
s_starting (s_worker_t *w, const Cgq__TaskRef *task)
{
    const Cgq__TaskRef **refs;
    size_t n = cgq_checkpoints_starting (w->ckpts, &refs);
    for (size_t i = 0; i < n; i++)
        if (cgq_result_ref_equal (refs[i], task))
            return true;
    return false;
}

static void
s_on_assign (void *arg, const Cgq__Assign *a)
{
    s_worker_t *w = arg;
    if (!a->task) {
        cgq_warn ("ignoring an Assign without a task");
        return;
    }
    // Every line about the task carries its ids (log.h).
    uint64_t jid = a->task->job, tid = a->task->trial;
    uint32_t att = a->task->attempt;
    if (s_find_task (w, a->task) || s_starting (w, a->task)) {
        cgq_tdebug (jid, tid, att, "already running; ignoring the repeated Assign");
        return;
    }
    if (cgq_link_has_result (w->link, a->task, true)) {
        cgq_tdebug (jid, tid, att, "already finished; sent its result again");
        return;
    }
    for (size_t i = 0; i < w->n_tasks; i++) {
        const Cgq__TaskRef *r = cgq_task_ref (w->tasks[i]);
        if (r->job == a->task->job && r->trial == a->task->trial && r->stage == a->task->stage)
            cgq_twarn (jid, tid, att,
                       "attempt %u of the same trial is still running here; starting "
                       "this one as well",
                       r->attempt);
    }
    const char *kind = a->kind ? a->kind : "";
    if (!strcmp (kind, "noop")) {
        cgq_link_result (w->link, cgq_result_noop (a));
        return;
    }
    if (strcmp (kind, "command") != 0 && strcmp (kind, "predictor") != 0) {
        char *e = cgq_xasprintf (
            "unknown task kind '%s' (this worker runs: command, noop, predictor)", kind);
        cgq_link_result (w->link, cgq_result_new (a->task, CGQ__TASK_STATUS__TASK_LOST,
                                                       NULL, e));
        free (e);
        return;
    }
    char *refused = strcmp (kind, "command") == 0 ? cgq_allow_check (w->cfg.allow_command, a)
                                                  : s_predictor_allowed (w, a);
    if (refused) {
        cgq_twarn (jid, tid, att, "%s", refused);
        cgq_link_result (w->link, cgq_result_new (a->task, CGQ__TASK_STATUS__TASK_FAILED,
                                                       NULL, refused));
        free (refused);
        return;
    }
    if (a->n_resume > 0) {
        cgq_checkpoints_restore (w->ckpts, a); // then s_start
        return;
    }
    s_start (w, a, NULL, NULL, NULL);
}

static void
s_on_stop (void *arg, const Cgq__Stop *s)
{
    s_worker_t *w = arg;
    cgq_task_t *task = s->task ? s_find_task (w, s->task) : NULL;
    if (!task && s->task
        && cgq_checkpoints_stop (w->ckpts, s->task,
                                 s->reason && *s->reason ? s->reason : "stopped by the coordinator")) {
        cgq_tinfo (s->task->job, s->task->trial, s->task->attempt,
                   "stopped before it started (its checkpoint was being restored)");
        return;
    }
    if (!task) {
        cgq_tdebug (s->task ? s->task->job : 0, s->task ? s->task->trial : 0,
                    s->task ? s->task->attempt : 0, "Stop for a task not running here; ignored");
        return;
    }
    cgq_tinfo (s->task->job, s->task->trial, s->task->attempt, "stopping (%s)",
               s->reason && *s->reason ? s->reason : "no reason given");
    cgq_task_stop (task, s->reason && *s->reason ? s->reason : "stopped by the coordinator",
                   w->cfg.kill_grace_ms);
}

// s_reap_orphans reaps children that are not tasks. When the worker is PID 1
// of a container or a child subreaper (as --confine pgroup makes it), what a
// trial leaves behind becomes its child once the trial's main process exits;
// unreaped, each would stay a zombie and thousands of trials would fill the
// process table. A task's own process is left for its tick, which needs the
// exit status, and the reaper for cgq_confine_tick.
static void
s_reap_orphans (s_worker_t *w)
{
    for (;;) {
        siginfo_t si;
        memset (&si, 0, sizeof si);
        if (waitid (P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) < 0 || si.si_pid == 0)
            return;
        for (size_t i = 0; i < w->n_tasks; i++)
            if (cgq_task_pid (w->tasks[i]) == si.si_pid)
                return; // exited since its tick: the next turn reaps it, then the rest
        if (w->confine && cgq_confine_reaper_pid (w->confine) == si.si_pid)
            return; // the next cgq_confine_tick reaps it and starts another
        int st;
        if (waitpid (si.si_pid, &st, WNOHANG) <= 0)
            return;
        cgq_debug ("reaped pid %d, left behind by a trial", (int) si.si_pid);
    }
}

// s_reap ticks every task and hands finished ones to the link (report) or
// drops their results (shutdown), then reaps orphans. Returns how many tasks
// still run.
static size_t
s_reap (void *arg, bool report)
{
    s_worker_t *w = arg;
    int64_t now = cgq_now_ms ();
    for (size_t i = 0; i < w->n_tasks;) {
        cgq_task_tick (w->tasks[i], now);
        // A result waits for the task's seals: the coordinator hears of its
        // last checkpoint first, and a retry resumes from it.
        if (!cgq_task_done (w->tasks[i])
            || (report && cgq_checkpoints_sealing (w->ckpts, w->tasks[i]))) {
            i++;
            continue;
        }
        cgq_checkpoints_ended (w->ckpts, w->tasks[i]);
        Cgq__Result *r = cgq_task_take_result (w->tasks[i]);
        if (report)
            cgq_link_result (w->link, r);
        else
            cgq_result_destroy (&r);
        cgq_task_destroy (&w->tasks[i]);
        w->tasks[i] = w->tasks[--w->n_tasks];
    }
    s_reap_orphans (w);
    return w->n_tasks;
}

// s_watch gives the shell every task's pipes and timers, and the
// confinement's (its state file, rewritten a moment after trials start or
// end).
static void
s_watch (void *arg, cgq_shell_t *shell)
{
    s_worker_t *w = arg;
    for (size_t i = 0; i < w->n_tasks; i++) {
        int fds[3];
        size_t k = cgq_task_fds (w->tasks[i], fds);
        for (size_t j = 0; j < k; j++)
            cgq_shell_watch (shell, fds[j], w->tasks[i]);
        cgq_shell_due (shell, cgq_task_deadline (w->tasks[i]));
    }
    int64_t due = cgq_confine_deadline (w->confine);
    if (due > 0)
        cgq_shell_due (shell, due);
    if (w->ckpts) {
        cgq_shell_watch (shell, cgq_checkpoints_fd (w->ckpts), w->ckpts);
        due = cgq_checkpoints_deadline (w->ckpts);
        if (due >= 0)
            cgq_shell_due (shell, due);
    }
}

static void
s_readable (void *arg, void *owner, int fd)
{
    s_worker_t *w = arg;
    if (owner == w->ckpts)
        cgq_checkpoints_on_readable (w->ckpts);
    else
        cgq_task_on_readable (owner, fd);
}

// s_space looks at --workdir's filesystem once a second: below --min-free
// (or S_MIN_INODES) the worker takes no new task, and says why in its
// heartbeats (cgq_link_full), until there is room again. Without it, a full
// disk makes every trial sent here fail or be lost at its start (trial
// directory, logs, result.json) while the coordinator keeps sending them.
#define S_MIN_INODES 64
#define S_SPACE_EVERY_MS 1000

static void
s_space (s_worker_t *w, int64_t now)
{
    if (!w->cfg.min_free || !w->link || now - w->space_ms < S_SPACE_EVERY_MS)
        return;
    w->space_ms = now;
    cgq_shell_due (w->shell, now + S_SPACE_EVERY_MS);
    struct statvfs vfs;
    if (statvfs (w->workdir, &vfs) < 0)
        return; // nothing known: the trials' own errors will say
    uint64_t avail = (uint64_t) vfs.f_bavail * (vfs.f_frsize ? vfs.f_frsize : vfs.f_bsize);
    // f_files 0: a filesystem without an inode count (btrfs): never short.
    bool no_inodes = vfs.f_files > 0 && vfs.f_favail < S_MIN_INODES;
    // Back only with an eighth more than --min-free, so that a disk at the
    // line does not flip the node (and its jobs' blocked state) every second.
    bool full = w->full ? avail < w->cfg.min_free + w->cfg.min_free / 8 || no_inodes
                        : avail < w->cfg.min_free || no_inodes;
    if (full == w->full)
        return; // the reason said stays as it was when it filled: no new heartbeat, log line
    w->full = full;
    if (!full) {
        cgq_info ("--workdir %s has room again (%.1f MiB free): taking tasks", w->workdir,
                  (double) avail / 1048576.0);
        cgq_link_full (w->link, NULL);
        return;
    }
    char why[PATH_MAX + 160];
    if (avail < w->cfg.min_free)
        snprintf (why, sizeof why, "--workdir %s has %.1f MiB free, under --min-free %.1f MiB",
                  w->workdir, (double) avail / 1048576.0, (double) w->cfg.min_free / 1048576.0);
    else
        snprintf (why, sizeof why, "--workdir %s has %llu free inodes, under %d", w->workdir,
                  (unsigned long long) vfs.f_favail, S_MIN_INODES);
    cgq_warn ("taking no new task: %s (free some space; tasks running go on)", why);
    cgq_link_full (w->link, why);
}

static void
s_turn (void *arg)
{
    s_worker_t *w = arg;
    cgq_confine_tick (w->confine);
    int64_t now = cgq_now_ms ();
    s_space (w, now);
    if (w->ckpts)
        cgq_checkpoints_tick (w->ckpts, now);
    // --idle-exit: idle means no task and nothing of the checkpoints still
    // waiting (a restore about to start a task, a seal not yet acked).
    const Cgq__TaskRef **starting = NULL;
    if (w->n_tasks > 0
        || (w->ckpts
            && (cgq_checkpoints_unsettled (w->ckpts) > 0
                || cgq_checkpoints_starting (w->ckpts, &starting) > 0)))
        w->busy_ms = now;
    else if (w->cfg.idle_exit_ms > 0 && now - w->busy_ms >= w->cfg.idle_exit_ms) {
        char why[96];
        snprintf (why, sizeof why, "idle for %" PRId64 " ms (--idle-exit)", now - w->busy_ms);
        cgq_shell_quit (w->shell, why);
    }
}

static void
s_checkpoint_ack (void *arg, const Cgq__CheckpointAck *ack)
{
    s_worker_t *w = arg;
    if (w->ckpts)
        cgq_checkpoints_ack (w->ckpts, ack);
}

// s_stop_all stops every task at shutdown; their results are not reported
// (the coordinator requeues them on Bye).
static size_t
s_stop_all (void *arg, int64_t grace_ms)
{
    s_worker_t *w = arg;
    size_t dropped = w->ckpts ? cgq_checkpoints_drop_starting (w->ckpts) : 0;
    if (dropped > 0)
        cgq_info ("dropping %zu task(s) waiting for their checkpoint's restore", dropped);
    if (w->n_tasks > 0)
        cgq_info ("stopping %zu running task(s)", w->n_tasks);
    for (size_t i = 0; i < w->n_tasks; i++)
        cgq_task_stop (w->tasks[i], "worker shutting down", grace_ms);
    return w->n_tasks;
}

// s_abandon kills what the stopped tasks left after the wait (SIGKILL).
static void
s_abandon (void *arg)
{
    s_worker_t *w = arg;
    for (size_t i = 0; i < w->n_tasks; i++) {
        if (w->ckpts)
            cgq_checkpoints_ended (w->ckpts, w->tasks[i]);
        cgq_task_destroy (&w->tasks[i]);
    }
    w->n_tasks = 0;
}

// s_unsettled: at shutdown, what of the checkpoints still waits for the
// coordinator or the sealer (cgq_checkpoints_unsettled), ticked.
static size_t
s_unsettled (void *arg)
{
    s_worker_t *w = arg;
    if (!w->ckpts)
        return 0;
    cgq_checkpoints_tick (w->ckpts, cgq_now_ms ());
    return cgq_checkpoints_unsettled (w->ckpts);
}

static const cgq_shell_ops_t s_ops = {
    .assign = s_on_assign,
    .stop = s_on_stop,
    .checkpoint_ack = s_checkpoint_ack,
    .running = s_running,
    .watch = s_watch,
    .readable = s_readable,
    .turn = s_turn,
    .reap = s_reap,
    .stop_all = s_stop_all,
    .abandon = s_abandon,
    .unsettled = s_unsettled,
};

static uint64_t
s_default_memory (void)
{
    FILE *f = fopen ("/proc/meminfo", "r");
    uint64_t kib = 0;
    if (f) {
        char line[256];
        while (fgets (line, sizeof line, f))
            if (sscanf (line, "MemTotal: %" SCNu64 " kB", &kib) == 1)
                break;
        fclose (f);
    }
    return kib * 1024;
}

static void
s_build_resources (s_worker_t *w)
{
    cgq__resources__init (&w->resources);
    w->resources.cpus = w->cfg.cpus;
    w->resources.memory = w->cfg.memory;
    w->gpu_msgs = cgq_xcalloc (w->gpus.count, sizeof *w->gpu_msgs);
    w->gpu_ptrs = cgq_xcalloc (w->gpus.count, sizeof *w->gpu_ptrs);
    for (size_t i = 0; i < w->gpus.count; i++) {
        cgq__gpu__init (&w->gpu_msgs[i]);
        w->gpu_msgs[i].index = w->gpus.items[i].index;
        w->gpu_msgs[i].name = w->gpus.items[i].name;
        w->gpu_msgs[i].memory = w->gpus.items[i].memory;
        w->gpu_ptrs[i] = &w->gpu_msgs[i];
    }
    w->resources.n_gpus = w->gpus.count;
    w->resources.gpus = w->gpu_ptrs;
}

static int
s_setup (s_worker_t *w)
{
    if (cgq_log_configure (S_PROG, w->cfg.log_level, w->cfg.log_format, w->cfg.log_json) < 0)
        return 2;
    if (w->cfg.log_format && strcmp (w->cfg.log_format, "json") == 0)
        w->cfg.log_json = true; // the reaper (confine.c) logs as the worker does

    char err[256] = "";
    if (cgq_gpu_discover (w->cfg.gpus, &w->gpus, err, sizeof err) < 0) {
        fprintf (stderr, S_PROG ": %s\n", err);
        return 2;
    }
    if (w->cfg.cpus <= 0)
        w->cfg.cpus = cgq_cores ();
    if (w->cfg.memory == 0)
        w->cfg.memory = s_default_memory ();

    const char *workdir = w->cfg.workdir && *w->cfg.workdir ? w->cfg.workdir : "./.cgq/work";
    if (cgq_mkdir_p (workdir) < 0) {
        fprintf (stderr, S_PROG ": cannot create --workdir %s: %s\n", workdir, strerror (errno));
        return 1;
    }
    // Trials run in their own directories, so every path given to them must
    // be absolute.
    w->workdir = realpath (workdir, NULL);
    if (!w->workdir) {
        fprintf (stderr, S_PROG ": cannot resolve --workdir %s: %s\n", workdir, strerror (errno));
        return 1;
    }

    // The default checkpoint store: absolute, as every path a trial or the
    // coordinator sees.
    const char *store = w->cfg.checkpoint_store;
    char why[256];
    if (store && strstr (store, "://") && !cgq_ckpt_store_valid_url (store, why, sizeof why)) {
        fprintf (stderr, S_PROG ": --checkpoint-store %s: %s (give http://HOST:PORT/PREFIX, or a "
                         "directory shared by the workers for resumes anywhere)\n",
                 store, why);
        return 2;
    }
    {
        // The token of an HTTP(S) store: never in a spec, never logged.
        char terr[512];
        char *tok = cgq_ckpt_store_token_load ("CGQ_CHECKPOINT_TOKEN",
                                               w->cfg.checkpoint_token_file, terr, sizeof terr);
        if (!tok && *terr) {
            fprintf (stderr, S_PROG ": --checkpoint-token-file: %s\n", terr);
            return 2;
        }
        unsetenv ("CGQ_CHECKPOINT_TOKEN"); // not handed down to the trials
        cgq_ckpt_store_opts_t so = {.token = tok,
                                    .retries = (uint32_t) -1,
                                    .stall_s = (double) w->cfg.checkpoint_stall_ms / 1000.0,
                                    .ca_file = w->cfg.checkpoint_ca_file};
        if (so.ca_file && *so.ca_file && access (so.ca_file, R_OK) < 0) {
            fprintf (stderr, S_PROG ": --checkpoint-ca-file %s: %s\n", so.ca_file,
                     strerror (errno));
            if (tok)
                memset (tok, 0, strlen (tok));
            free (tok);
            return 2;
        }
        cgq_ckpt_store_setup (&so);
        if (tok)
            memset (tok, 0, strlen (tok));
        free (tok);
    }
    if (store && *store && store[0] != '/' && !strstr (store, "://")) {
        char cwd[PATH_MAX];
        if (!getcwd (cwd, sizeof cwd)) {
            fprintf (stderr, S_PROG ": cannot resolve --checkpoint-store %s: %s\n", store,
                     strerror (errno));
            return 1;
        }
        w->ckpt_store = cgq_xasprintf ("%s/%s", cwd, store);
    }
    else
        w->ckpt_store = store && *store ? cgq_xstrdup (store)
                                        : cgq_xasprintf ("%s/checkpoints", w->workdir);

    w->hostname = cgq_shell_hostname ();
    if (!w->cfg.id || !*w->cfg.id) {
        free (w->cfg.id);
        w->cfg.id = cgq_xasprintf ("%s-%d", w->hostname, (int) getpid ());
    }
    if (cgq_shell_check_id (S_PROG, w->cfg.id) < 0)
        return 2;
    if (cgq_confine_mode_parse (w->cfg.confine, &w->confine_mode) < 0) {
        fprintf (stderr, S_PROG ": --confine '%s' is not a way to confine trials (expected one "
                         "of: auto, cgroup, pgroup)\n",
                 w->cfg.confine ? w->cfg.confine : "");
        return 2;
    }
    s_build_resources (w);
    return 0;
}

// s_confine sets up trial confinement (before any thread exists, so that the
// reaper is forked from a single-threaded process) and logs how it is done.
static int
s_confine (s_worker_t *w)
{
    char err[1024] = "";
    cgq_confine_opts_t copts = {
        .mode = w->confine_mode,
        .workdir = w->workdir,
        .log_json = w->cfg.log_json,
    };
    w->confine = cgq_confine_new (&copts, err, sizeof err);
    if (!w->confine) {
        cgq_error ("%s", err);
        return -1;
    }
    cgq_info ("%s", cgq_confine_describe (w->confine));
    return 0;
}

static void
s_cleanup (s_worker_t *w)
{
    // First: its thread may be sealing (dropped: a .tmp, never used).
    cgq_checkpoints_destroy (&w->ckpts);
    free (w->ckpt_store);
    for (size_t i = 0; i < w->n_tasks; i++)
        cgq_task_destroy (&w->tasks[i]);
    // After the tasks: the reaper removes the worker's cgroup and state file.
    cgq_confine_destroy (&w->confine);
    cgq_spare_destroy (&w->spare);
    free (w->tasks);
    free (w->running);
    free (w->gpu_msgs);
    free (w->gpu_ptrs);
    cgq_gpu_list_fini (&w->gpus);
    free (w->workdir);
    free (w->hostname);
    cgq_config_free (s_opts, &w->cfg);
    cgq_auth_destroy (&w->auth);
    // Last: the reaper's exit (cgq_confine_destroy) is a SIGCHLD.
    cgq_shell_destroy (&w->shell);
}

int
main (int argc, char **argv)
{
    s_worker_t w;
    memset (&w, 0, sizeof w);
    cgq_gpu_list_init (&w.gpus);
    cgq_log_init (S_PROG, CGQ_LOG_INFO, false);
    int argi = 0;
    int rc = cgq_config_parse (s_opts, &w.cfg, S_PROG, S_PROG " [options]", argc, argv,
                               &argi);
    if (rc == 0 && argi < argc) {
        fprintf (stderr, S_PROG ": unexpected argument '%s' (see --help)\n", argv[argi]);
        rc = -1;
    }
    if (rc != 0) {
        cgq_config_free (s_opts, &w.cfg);
        return rc > 0 ? 0 : 2;
    }
    rc = s_setup (&w);
    if (rc == 0 && !(w.shell = cgq_shell_new (S_PROG, &s_ops, &w)))
        rc = 1;
    if (rc != 0) {
        s_cleanup (&w);
        return rc;
    }
    cgq_info ("node '%s': %g cpus, %" PRIu64 " MiB memory, %zu GPU(s), workdir %s", w.cfg.id,
              w.cfg.cpus, w.cfg.memory >> 20, w.gpus.count, w.workdir);
    if (s_confine (&w) < 0) {
        s_cleanup (&w);
        return 1;
    }
    // A spare trial directory per slot, up to 64 (after the reaper is
    // forked: this starts a thread).
    double keep = w.cfg.cpus < 2 ? 2 : w.cfg.cpus > 64 ? 64 : w.cfg.cpus;
    w.spare = cgq_spare_new (w.workdir, (size_t) keep);

    if (cgq_shell_auth (S_PROG, "node", w.cfg.curve_secret, w.cfg.curve_server, &w.auth) < 0) {
        s_cleanup (&w);
        return 2;
    }
    cgq_link_opts_t lopts = {
        .auth = w.auth,
        .endpoint = w.cfg.coordinator,
        .node_id = w.cfg.id,
        .hostname = w.hostname,
        .resources = &w.resources,
        .heartbeat_ms = w.cfg.heartbeat_ms,
        .batches = true,
    };
    if (cgq_shell_connect (w.shell, &lopts) < 0) {
        s_cleanup (&w);
        return 2;
    }
    w.link = cgq_shell_link (w.shell);
    cgq_checkpoints_opts_t copts = {
        .workdir = w.workdir,
        .store = w.ckpt_store,
        .host = w.hostname,
        .kill_grace_ms = w.cfg.kill_grace_ms,
        .link = w.link,
        .start = s_start,
        .arg = &w,
    };
    if (!(w.ckpts = cgq_checkpoints_new (&copts))) {
        s_cleanup (&w);
        return 1;
    }
    w.busy_ms = cgq_now_ms ();
    cgq_shell_run (w.shell);
    int64_t grace = w.cfg.kill_grace_ms < S_SHUTDOWN_GRACE_MS ? w.cfg.kill_grace_ms
                                                             : S_SHUTDOWN_GRACE_MS;
    cgq_shell_shutdown (w.shell, grace);
    w.link = NULL;
    s_cleanup (&w);
    cgq_info ("stopped");
    return 0;
}
