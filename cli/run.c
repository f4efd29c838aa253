// run: the commands that take a spec. `validate` parses it, `submit` sends it
// to a running coordinator, and `run` is the embedded default: it starts a
// private redis-server (Unix socket only, AOF on, data in ./.cgq/redis), a
// coordinator and workers, submits the spec, follows the job, prints the
// leaderboard and stops everything it started, also on Ctrl-C.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "ctl.h"
#include "front.h"
#include "local.h"
#include "progress.h"
#include "space.h"
#include "show.h"
#include "spec.h"
#include "util.h"
#include "warm.h"
#include "view.h"
#include "yamldoc.h"

#define S_START_TIMEOUT_MS 10000 // Redis PING, coordinator ready line
#define S_STOP_TIMEOUT_MS 10000  // SIGTERM -> SIGKILL
#define S_BLOCKED_GRACE_MS 1000  // blocked with every worker connected for this long
#define S_MAX_WORKERS 256
#define S_DEFAULT_TOP 10

// ---------------------------------------------------------------- spec

// s_script_ext says whether a word names a script by its extension.
static bool
s_script_ext (const char *w)
{
    static const char *const exts[] = {".py", ".sh", ".bash", ".R", ".r", ".jl", ".pl", ".rb",
                                       ".js", ".lua", ".m", NULL};
    const char *dot = strrchr (w, '.');
    if (!dot || dot == w)
        return false;
    for (int i = 0; exts[i]; i++)
        if (!strcmp (dot, exts[i]))
            return true;
    return false;
}

// s_relative_script returns the first word of the stage's command that names a
// script by a relative path (caller frees), or NULL. A trial runs in its own
// directory, so such a path is not found there.
static char *
s_relative_script (const cgq_stage_t *st)
{
    if (st->kind != CGQ_TRIAL_COMMAND)
        return NULL;
    if (st->argv) {
        for (size_t i = 0; i < st->argc; i++) {
            const char *w = st->argv[i];
            if (w[0] != '/' && w[0] != '-' && w[0] != '~' && !strchr (w, '{') && !strchr (w, '$') &&
                s_script_ext (w))
                return cgq_xstrdup (w);
        }
        return NULL;
    }
    if (!st->command)
        return NULL;
    char *copy = cgq_xstrdup (st->command), *found = NULL;
    for (char *save = NULL, *w = strtok_r (copy, " \t\n;&|()", &save); w && !found;
         w = strtok_r (NULL, " \t\n;&|()", &save)) {
        size_t len = strlen (w);
        if (len >= 2 && (w[0] == '\'' || w[0] == '"') && w[len - 1] == w[0]) {
            w[len - 1] = 0;
            w++;
        }
        if (w[0] != '/' && w[0] != '-' && w[0] != '~' && !strchr (w, '{') && !strchr (w, '$') &&
            !strchr (w, '=') && !strchr (w, '\'') && !strchr (w, '"') && s_script_ext (w))
            found = cgq_xstrdup (w);
    }
    free (copy);
    return found;
}

// s_missing_script finds, in the stage's command, a word {spec_dir}/PATH
// (no other placeholder in it) whose file is not in spec_dir: a typo that
// would fail every trial. Returns the message (caller frees), or NULL.
static char *
s_missing_script (const cgq_stage_t *st, const char *spec_dir)
{
    if (st->kind != CGQ_TRIAL_COMMAND || !spec_dir)
        return NULL;
    cgq_buf_t all; // the command's words, one per line
    cgq_buf_init (&all);
    if (st->argv)
        for (size_t i = 0; i < st->argc; i++)
            cgq_buf_printf (&all, "%s\n", st->argv[i]);
    else if (st->command)
        cgq_buf_puts (&all, st->command);
    char *msg = NULL;
    const char *mark = "{spec_dir}/";
    for (const char *p = all.data ? strstr (all.data, mark) : NULL; p && !msg;
         p = strstr (p + 1, mark)) {
        const char *rel = p + strlen (mark);
        size_t n = strcspn (rel, " \t\n;&|()'\"`<>");
        if (n == 0 || memchr (rel, '{', n) || memchr (rel, '$', n) || memchr (rel, '*', n))
            continue; // another placeholder, a variable or a glob: not ours to check
        char *file = cgq_xasprintf ("%s/%.*s", spec_dir, (int) n, rel);
        if (access (file, F_OK) != 0) {
            // The likely typo: a name in that directory one or two edits away.
            char *dir = cgq_xstrdup (file), *slash = strrchr (dir, '/');
            *slash = 0;
            cgq_buf_t names;
            cgq_buf_init (&names);
            DIR *d = opendir (dir);
            for (struct dirent *e; d && (e = readdir (d));)
                if (e->d_name[0] != '.')
                    cgq_buf_printf (&names, "%s%s", names.len ? "," : "", e->d_name);
            if (d)
                closedir (d);
            char guess[256];
            const char *g = names.len ? cgq_yamldoc_suggest (slash + 1, names.data, guess,
                                                             sizeof guess)
                                      : NULL;
            msg = cgq_xasprintf ("trial.command runs {spec_dir}/%.*s, but there is no %s%s%s%s "
                                 "(every trial would fail: fix the path)",
                                 (int) n, rel, file, g ? " (did you mean " : "", g ? g : "",
                                 g ? "?)" : "");
            cgq_buf_fini (&names);
            free (dir);
        }
        free (file);
    }
    cgq_buf_fini (&all);
    return msg;
}

static char *s_spec_dir (const char *path);

// s_check_scripts checks every stage's {spec_dir}/ scripts (s_missing_script):
// prints what is missing, as an error (returns -1) unless warn_only.
static int
s_check_scripts (const cgq_spec_t *spec, const char *path, bool warn_only)
{
    char *abs = s_spec_dir (path);
    int rc = 0;
    for (size_t k = 0; k < cgq_spec_nstages (spec) && rc == 0; k++) {
        char *msg = s_missing_script (cgq_spec_stage (spec, k), abs);
        if (msg) {
            fflush (stdout);
            if (warn_only)
                fprintf (stderr, "%s: warning: %s, unless the workers see another file there\n",
                         path, msg);
            else {
                fprintf (stderr, "%s: %s\n", path, msg);
                rc = -1;
            }
            free (msg);
        }
    }
    free (abs);
    return rc;
}

// s_load_spec parses path; on error prints the parser's FILE:LINE:COL line.
// A command that names its script by a relative path gets a warning: the
// trial runs in its own directory, not beside the spec.
static cgq_spec_t *
s_load_spec (const char *path)
{
    char err[1024];
    cgq_spec_t *spec = cgq_spec_load (path, err, sizeof err);
    if (!spec) {
        fflush (stdout);
        fprintf (stderr, "%s\n", err);
        return NULL;
    }
    char *script = s_relative_script (&spec->trial);
    if (script) {
        const char *w = script[0] == '.' && script[1] == '/' ? script + 2 : script;
        fflush (stdout);
        fprintf (stderr,
                 "%s: warning: trial.command names '%s' by a relative path, but each trial runs "
                 "in its own directory (WORKDIR/job-J/trial-T/attempt-N), where it is not: write "
                 "{spec_dir}/%s to use the one beside the spec\n",
                 path, script, w);
        free (script);
    }
    return spec;
}

int
cgq_cmd_validate (cgq_cli_t *cli)
{
    cgq_spec_t *spec = s_load_spec (cli->pos[0]);
    if (!spec)
        return CGQ_EXIT_BAD;
    if (s_check_scripts (spec, cli->pos[0], false) < 0) {
        cgq_spec_destroy (&spec);
        return CGQ_EXIT_BAD;
    }
    cgq_spec_describe (spec, stdout);
    // The coordinator's check (it may run with a larger --max-trials).
    char err[512];
    int rc = CGQ_EXIT_OK;
    if (cgq_space_check_limit (spec, CGQ_DEFAULT_MAX_TRIALS, err, sizeof err) < 0) {
        cgq_cli_error ("%s: %s; a coordinator started with the default --max-trials "
                       "(" CGQ_DEFAULT_MAX_TRIALS_TEXT ") refuses it",
                       cli->pos[0], err);
        rc = CGQ_EXIT_BAD;
    }
    cgq_spec_destroy (&spec);
    return rc;
}

// s_spec_dir returns the absolute directory of path (caller frees), or NULL.
static char *
s_spec_dir (const char *path)
{
    char *abs = realpath (path, NULL);
    if (!abs)
        return NULL;
    char *slash = strrchr (abs, '/');
    if (slash == abs)
        abs[1] = 0;
    else if (slash)
        *slash = 0;
    return abs;
}

// s_submit sends the spec to the coordinator's control endpoint. Returns an
// exit status; on success *job and *trials (0: unbounded) are set.
static int
s_submit (const char *endpoint, const cgq_spec_t *spec, const char *path, cgq_store_t *store,
          uint64_t *job, uint64_t *trials)
{
    char *warm = NULL;
    char werr[1024];
    int wrc = cgq_warm_resolve (spec, path, store, &warm, werr, sizeof werr);
    if (wrc != CGQ_EXIT_OK) {
        cgq_cli_error ("%s: %s", path, werr);
        return wrc;
    }
    char *dir = s_spec_dir (path);
    if (!dir) {
        cgq_cli_error ("cannot resolve the directory of %s: %s", path, strerror (errno));
        return CGQ_EXIT_BAD;
    }
    Cgq__SubmitJob sj = CGQ__SUBMIT_JOB__INIT;
    sj.spec_yaml = spec->text;
    sj.spec_path = (char *) path;
    sj.spec_dir = dir;
    if (warm)
        sj.warm_json = warm;
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_SUBMIT_JOB;
    env.submit_job = &sj;
    cgq_env_t *reply = NULL;
    char err[1024];
    int rc = cgq_ctl_request (endpoint, &env, CGQ_CTL_TIMEOUT_MS, &reply, err, sizeof err);
    free (dir);
    free (warm);
    if (rc != CGQ_EXIT_OK) {
        cgq_cli_error ("%s", err);
        return rc;
    }
    if (reply->body_case == CGQ__ENVELOPE__BODY_SUBMIT_REPLY) {
        *job = reply->submit_reply->job;
        *trials = reply->submit_reply->trials;
    }
    else if (reply->body_case == CGQ__ENVELOPE__BODY_REPLY) {
        const char *m = reply->reply->message;
        int code = reply->reply->code;
        if (code == 2)
            cgq_cli_error ("the coordinator rejected %s: %s", path, m && *m ? m : "bad spec");
        else
            cgq_cli_error ("the coordinator could not take %s: %s", path,
                           m && *m ? m : "no reason given (see the coordinator's log)");
        rc = code == 2 ? CGQ_EXIT_BAD : CGQ_EXIT_FAIL;
    }
    else {
        cgq_cli_error ("the coordinator at %s answered SubmitJob with '%s'", endpoint,
                       cgq_wire_body_name (reply));
        rc = CGQ_EXIT_FAIL;
    }
    cgq_wire_free (reply);
    return rc;
}

// ---------------------------------------------------------------- the end of a job

// s_print_indented prints text on stderr, each line indented, at most max lines.
static void
s_print_indented (const char *text, int max)
{
    const char *p = text;
    for (int i = 0; *p && i < max; i++) {
        const char *nl = strchr (p, '\n');
        size_t len = nl ? (size_t) (nl - p) : strlen (p);
        fprintf (stderr, "    %.*s\n", (int) len, p);
        p = nl ? nl + 1 : p + len;
    }
}

// cgq_run_report prints the leaderboard (table: top rows; json: the results
// document, all trials unless --top was given) and a summary of failures.
// Returns 0 when the job finished with at least one succeeded trial.
int
cgq_run_report (cgq_store_t *store, const cgq_job_rec_t *job, bool json, uint64_t top, bool top_given)
{
    char err[512], clock[32];
    cgq_front_t front;
    int lr = !json && !job->metric ? cgq_front_load (store, job, false, &front, NULL, err, sizeof err)
                                   : 1;
    if (lr < 0) {
        cgq_cli_error ("%s", err);
        return CGQ_EXIT_FAIL;
    }
    if (lr == 0) { // several objectives: the front is the leaderboard
        cgq_front_print_summary (&front, job, top, stdout);
        cgq_front_fini (&front);
    }
    cgq_trial_rec_t **trials = NULL;
    size_t n = 0;
    int vr = lr == 0 ? CGQ_VIEW_OK
             : json && !top_given
                 ? cgq_view_trials_all (store, job, &trials, &n, err, sizeof err)
                 : cgq_view_trials_best (store, job, top, &trials, &n, err, sizeof err);
    if (vr != CGQ_VIEW_OK) {
        cgq_cli_error ("%s", err);
        return CGQ_EXIT_FAIL;
    }
    if (json)
        cgq_show_results_json (stdout, store, job, trials, n);
    else if (lr != 0)
        cgq_show_leaderboard (stdout, job, trials, n);
    fflush (stdout);
    cgq_view_trials_free (trials, n);

    uint64_t ok = job->counts[CGQ_TRIAL_SUCCEEDED], failed = job->counts[CGQ_TRIAL_FAILED];
    uint64_t stopped = job->counts[CGQ_TRIAL_STOPPED];
    char also[64] = ""; // trials an early stopper ended: ranked, but not run to the end
    if (stopped)
        snprintf (also, sizeof also, ", %" PRIu64 " stopped early", stopped);
    double took = job->finished > job->created && job->created > 0 ? job->finished - job->created : 0;
    bool cancelled = !strcmp (job->state, cgq_jstate_names[CGQ_JOB_CANCELLED]);
    bool gave_up = !strcmp (job->state, cgq_jstate_names[CGQ_JOB_FAILED]);
    if (gave_up) // it stopped itself: say why, and that nothing more ran
        cgq_cli_error ("job %" PRIu64 " failed: %s", job->id,
                       job->error ? job->error : "it stopped itself");
    else if (cancelled)
        cgq_cli_error ("job %" PRIu64 " was cancelled (%" PRIu64 " succeeded, %" PRIu64
                       " failed%s, %" PRIu64 " cancelled)",
                       job->id, ok, failed, also, job->counts[CGQ_TRIAL_CANCELLED]);
    else if (failed == 0)
        cgq_cli_error ("job %" PRIu64 " finished: %" PRIu64 " trial%s succeeded%s in %s", job->id,
                       ok, ok == 1 ? "" : "s", also, cgq_show_clock (clock, sizeof clock, took));
    if (failed > 0) {
        cgq_trial_rec_t *first = NULL;
        int fr = cgq_view_trial_find (store, job, "failed", false, &first, err, sizeof err);
        if (!cancelled && !gave_up)
            cgq_cli_error ("job %" PRIu64 " finished%s: %" PRIu64 " succeeded, %" PRIu64
                           " failed%s%s",
                           job->id, ok ? "" : " with no succeeded trial", ok, failed, also,
                           fr == CGQ_VIEW_OK ? "; first error:" : "");
        if (fr == CGQ_VIEW_OK) {
            fprintf (stderr, "  trial %" PRIu64 " (cgq logs %" PRIu64 " %" PRIu64 "):\n", first->id,
                     job->id, first->id);
            s_print_indented (first->error ? first->error : "(no error recorded)", 20);
        }
        cgq_trial_rec_destroy (&first);
    }
    return !cancelled && !gave_up && ok > 0 ? CGQ_EXIT_OK : CGQ_EXIT_FAIL;
}

// ---------------------------------------------------------------- submit

int
cgq_cmd_submit (cgq_cli_t *cli)
{
    cgq_spec_t *spec = s_load_spec (cli->pos[0]);
    if (!spec)
        return CGQ_EXIT_BAD;
    s_check_scripts (spec, cli->pos[0], true); // the workers may see another file system
    uint64_t job = 0, trials = 0;
    // search.warm_start.jobs: their trials are read here, from Redis.
    cgq_store_t *wstore = NULL;
    int rc = spec->search.nwarm_jobs ? cgq_cli_store (cli, &wstore) : CGQ_EXIT_OK;
    if (rc == CGQ_EXIT_OK)
        rc = s_submit (cli->coordinator, spec, cli->pos[0], wstore, &job, &trials);
    cgq_store_destroy (&wstore);
    cgq_spec_destroy (&spec);
    if (rc != CGQ_EXIT_OK)
        return rc;
    if (cgq_cli_flag (cli, "quiet"))
        printf ("%" PRIu64 "\n", job);
    else if (trials)
        printf ("submitted job %" PRIu64 " (%" PRIu64 " trial%s)\n", job, trials,
                trials == 1 ? "" : "s");
    else
        printf ("submitted job %" PRIu64 " (unbounded search)\n", job);
    fflush (stdout);
    if (!cgq_cli_flag (cli, "follow"))
        return CGQ_EXIT_OK;

    cgq_store_t *store = NULL;
    rc = cgq_cli_store_url (cli->redis, &store);
    if (rc != CGQ_EXIT_OK)
        return rc;
    cgq_cli_catch_signals ();
    cgq_job_rec_t *final = NULL;
    int fr = cgq_progress_follow (store, job, true, NULL, NULL, &final);
    if (fr == 0)
        rc = cgq_run_report (store, final, false, S_DEFAULT_TOP, false);
    else if (fr == CGQ_PROGRESS_SIGNAL) {
        cgq_cli_error ("stopped following job %" PRIu64 "; it keeps running (cgq cancel %" PRIu64
                       " stops it)",
                       job, job);
        rc = cgq_cli_signal == SIGINT ? 130 : 128 + cgq_cli_signal;
    }
    else
        rc = CGQ_EXIT_FAIL;
    cgq_job_rec_destroy (&final);
    cgq_store_destroy (&store);
    return rc;
}

// ---------------------------------------------------------------- processes

typedef struct {
    pid_t pid;   // 0 once reaped (or never started)
    char *what;  // "redis-server", "cgq-coordinator", "cgq-worker local-1"
    char *log;   // its log file, relative to the current directory
    char *id;    // worker id
    int status;  // wait status once reaped
    bool reaped;
    bool reported;
} s_proc_t;

typedef struct {
    char *root;      // ABS/.cgq
    char *sock;      // ABS/.cgq/redis.sock
    char *redis_url; // unix://ABS/.cgq/redis.sock
    char *nodes_ep;
    char *control_ep;
    bool keep;
    s_proc_t redis, coord;
    s_proc_t *workers; // the workers, then the device runner if any (nnodes in all)
    size_t nworkers;
    size_t nnodes;
    cgq_store_t *store;
    uint64_t job;
    int64_t blocked_since;
} s_local_t;

static void
s_nap_ms (int ms)
{
    struct timespec ts = {ms / 1000, (long) (ms % 1000) * 1000000L};
    nanosleep (&ts, NULL);
}

// s_find_binary looks next to the cgq executable first, then on PATH.
static char *
s_find_binary (const char *name)
{
    char *dir = cgq_self_dir ();
    if (dir) {
        char *cand = cgq_xasprintf ("%s/%s", dir, name);
        free (dir);
        if (access (cand, X_OK) == 0)
            return cand;
        free (cand);
    }
    return cgq_which (name);
}

static void
s_describe_status (char *buf, size_t n, int status)
{
    if (WIFEXITED (status))
        snprintf (buf, n, "exited with status %d", WEXITSTATUS (status));
    else if (WIFSIGNALED (status))
        snprintf (buf, n, "was killed by signal %d (%s)", WTERMSIG (status),
                  strsignal (WTERMSIG (status)));
    else
        snprintf (buf, n, "stopped (status 0x%x)", status);
}

// s_print_tail prints the last lines of a log file on stderr.
static void
s_print_tail (const char *path, int lines)
{
    FILE *f = fopen (path, "r");
    if (!f) {
        fprintf (stderr, "  (cannot read %s: %s)\n", path, strerror (errno));
        return;
    }
    char buf[8192];
    fseek (f, 0, SEEK_END);
    long size = ftell (f);
    long from = size > (long) sizeof buf - 1 ? size - (long) sizeof buf + 1 : 0;
    fseek (f, from, SEEK_SET);
    size_t n = fread (buf, 1, sizeof buf - 1, f);
    fclose (f);
    buf[n] = 0;
    while (n > 0 && buf[n - 1] == '\n')
        buf[--n] = 0;
    if (n == 0) {
        fprintf (stderr, "  (%s is empty)\n", path);
        return;
    }
    const char *start = buf + n;
    int seen = 0;
    while (start > buf && seen < lines) {
        start--;
        if (*start == '\n' && ++seen == lines) {
            start++;
            break;
        }
    }
    if (from > 0 && start == buf) { // a cut first line would be misleading
        const char *nl = strchr (buf, '\n');
        start = nl ? nl + 1 : buf;
    }
    fprintf (stderr, "  last lines of %s:\n", path);
    s_print_indented (start, lines);
}

// s_spawn starts argv[0] with stdin from /dev/null and stdout/stderr to the
// given files (truncated), in its own process group so that a Ctrl-C on the
// terminal reaches only cgq, which stops the daemons in order. When tie is
// set the child gets SIGTERM if cgq dies without cleaning up.
static int
s_spawn (s_proc_t *p, char **argv, const char *out_path, const char *err_path, bool tie)
{
    int in = open ("/dev/null", O_RDONLY | O_CLOEXEC);
    int out = open (out_path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    int err = strcmp (out_path, err_path)
                  ? open (err_path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644)
                  : out;
    if (in < 0 || out < 0 || err < 0) {
        cgq_cli_error ("cannot open %s for %s: %s", out < 0 ? out_path : err_path, p->what,
                       strerror (errno));
        goto fail;
    }
    pid_t pid = cgq_local_spawn (argv, in, out, err, tie);
    if (pid < 0) {
        cgq_cli_error ("cannot start %s: fork: %s", p->what, strerror (errno));
        goto fail;
    }
    p->pid = pid;
    p->reaped = false;
    close (in);
    close (out);
    if (err != out)
        close (err);
    return 0;
fail:
    if (in >= 0)
        close (in);
    if (out >= 0)
        close (out);
    if (err >= 0 && err != out)
        close (err);
    return -1;
}

// s_reaped reports whether p has exited, reaping it without blocking.
static bool
s_reaped (s_proc_t *p)
{
    if (p->reaped || p->pid <= 0)
        return true;
    int st;
    pid_t r = waitpid (p->pid, &st, WNOHANG);
    if (r == p->pid || (r < 0 && errno == ECHILD)) {
        p->status = r == p->pid ? st : 0;
        p->reaped = true;
        p->pid = 0;
        return true;
    }
    return false;
}

// s_report_death prints how p ended and the tail of its log, once.
static void
s_report_death (s_proc_t *p, const char *when)
{
    if (p->reported)
        return;
    p->reported = true;
    char how[128];
    s_describe_status (how, sizeof how, p->status);
    cgq_cli_error ("%s %s %s", p->what, how, when);
    s_print_tail (p->log, 15);
}

// s_stop_group stops a set of processes: SIGTERM to each, then waits up to
// S_STOP_TIMEOUT_MS for all of them (a new Ctrl-C cuts the wait short), then
// SIGKILL to each one left, and its process group.
static void
s_stop_group (s_proc_t **procs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!s_reaped (procs[i]))
            kill (procs[i]->pid, SIGTERM);
    int64_t deadline = cgq_now_ms () + S_STOP_TIMEOUT_MS;
    for (;;) {
        size_t left = 0;
        for (size_t i = 0; i < n; i++)
            left += !s_reaped (procs[i]);
        if (left == 0)
            return;
        if (cgq_now_ms () >= deadline || cgq_cli_signal)
            break;
        s_nap_ms (20);
    }
    for (size_t i = 0; i < n; i++) {
        if (s_reaped (procs[i]))
            continue;
        cgq_cli_error ("%s (pid %d) did not stop within %ds of SIGTERM; killing it", procs[i]->what,
                       (int) procs[i]->pid, S_STOP_TIMEOUT_MS / 1000);
        kill (-procs[i]->pid, SIGKILL);
        kill (procs[i]->pid, SIGKILL);
        int st;
        if (waitpid (procs[i]->pid, &st, 0) == procs[i]->pid)
            procs[i]->status = st;
        procs[i]->reaped = true;
        procs[i]->pid = 0;
    }
}

// s_stop_all stops the workers (they stop their trials), then the coordinator
// (it flushes its last batch), then Redis (it fsyncs the AOF).
static void
s_stop_all (s_local_t *l)
{
    cgq_cli_signal = 0; // from here a new signal means "hurry"
    if (l->nnodes) {
        s_proc_t **ws = cgq_xcalloc (l->nnodes, sizeof *ws);
        for (size_t i = 0; i < l->nnodes; i++)
            ws[i] = &l->workers[i];
        s_stop_group (ws, l->nnodes);
        free (ws);
    }
    s_proc_t *c = &l->coord;
    s_stop_group (&c, 1);
    s_proc_t *r = &l->redis;
    s_stop_group (&r, 1);
}

static void
s_proc_fini (s_proc_t *p)
{
    free (p->what);
    free (p->log);
    free (p->id);
}

static void
s_local_fini (s_local_t *l)
{
    cgq_store_destroy (&l->store);
    s_proc_fini (&l->redis);
    s_proc_fini (&l->coord);
    for (size_t i = 0; i < l->nnodes; i++)
        s_proc_fini (&l->workers[i]);
    free (l->workers);
    free (l->root);
    free (l->sock);
    free (l->redis_url);
    free (l->nodes_ep);
    free (l->control_ep);
}

// ---------------------------------------------------------------- start-up

// s_conf_quote returns s in double quotes for redis.conf. Caller frees.
static char *
s_conf_quote (const char *s)
{
    cgq_buf_t b;
    cgq_buf_init (&b);
    cgq_buf_puts (&b, "\"");
    for (const char *p = s; *p; p++) {
        if (*p == '"' || *p == '\\')
            cgq_buf_puts (&b, "\\");
        cgq_buf_append (&b, p, 1);
    }
    cgq_buf_puts (&b, "\"");
    return cgq_buf_take (&b);
}

static int
s_write_redis_conf (const s_local_t *l, const char *conf)
{
    FILE *f = fopen (conf, "w");
    if (!f) {
        cgq_cli_error ("cannot write %s: %s", conf, strerror (errno));
        return -1;
    }
    char *sock = s_conf_quote (l->sock);
    char *data = cgq_xasprintf ("%s/redis", l->root);
    char *qdata = s_conf_quote (data);
    fprintf (f,
             "# written by cgq run: a private Redis for this directory, reachable only\n"
             "# through its Unix socket (redis-cli -s %s)\n"
             "port 0\n"
             "unixsocket %s\n"
             "unixsocketperm 700\n"
             "dir %s\n"
             "appendonly yes\n"
             "appendfsync everysec\n"
             "save \"\"\n"
             "daemonize no\n"
             "logfile \"\"\n",
             l->sock, sock, qdata);
    bool ok = fflush (f) == 0 && !ferror (f);
    ok = fclose (f) == 0 && ok;
    free (sock);
    free (data);
    free (qdata);
    if (!ok) {
        cgq_cli_error ("cannot write %s: %s", conf, strerror (errno));
        return -1;
    }
    return 0;
}

static int
s_start_redis (s_local_t *l, const char *redis_bin)
{
    char *conf = cgq_xasprintf ("%s/redis/redis.conf", l->root);
    if (s_write_redis_conf (l, conf) < 0) {
        free (conf);
        return -1;
    }
    char *argv[] = {(char *) redis_bin, conf, NULL};
    l->redis.what = cgq_xstrdup ("redis-server");
    l->redis.log = cgq_xstrdup (".cgq/logs/redis.log");
    int rc = s_spawn (&l->redis, argv, l->redis.log, l->redis.log, !l->keep);
    free (conf);
    if (rc < 0)
        return -1;
    int64_t deadline = cgq_now_ms () + S_START_TIMEOUT_MS;
    for (;;) {
        if (cgq_cli_signal)
            return -1;
        if (cgq_local_answers (l->redis_url, 500))
            return 0;
        if (s_reaped (&l->redis)) {
            s_report_death (&l->redis, "before it answered PING");
            return -1;
        }
        if (cgq_now_ms () >= deadline) {
            cgq_cli_error ("redis-server did not answer PING on %s within %ds", l->sock,
                           S_START_TIMEOUT_MS / 1000);
            s_print_tail (l->redis.log, 15);
            return -1;
        }
        s_nap_ms (50);
    }
}

// s_parse_ready reads "cgq-coordinator ready nodes=EP control=EP epoch=N".
static bool
s_parse_ready (s_local_t *l, const char *text)
{
    const char *p = strstr (text, "cgq-coordinator ready ");
    if (!p || (p != text && p[-1] != '\n'))
        return false;
    const char *eol = strchr (p, '\n');
    if (!eol)
        return false; // not the whole line yet
    char *line = cgq_xstrndup (p, (size_t) (eol - p));
    char *save = NULL;
    for (char *tok = strtok_r (line, " \r", &save); tok; tok = strtok_r (NULL, " \r", &save)) {
        if (!strncmp (tok, "nodes=", 6)) {
            free (l->nodes_ep);
            l->nodes_ep = cgq_xstrdup (tok + 6);
        }
        else if (!strncmp (tok, "control=", 8)) {
            free (l->control_ep);
            l->control_ep = cgq_xstrdup (tok + 8);
        }
    }
    free (line);
    return l->nodes_ep && l->control_ep;
}

static int
s_start_coordinator (s_local_t *l, const char *bin)
{
    char *argv[] = {(char *) bin,      "--redis",   l->redis_url, "--bind", "tcp://127.0.0.1:0",
                    "--control", "tcp://127.0.0.1:0", NULL};
    const char *ready = ".cgq/logs/coordinator.out";
    l->coord.what = cgq_xstrdup ("cgq-coordinator");
    l->coord.log = cgq_xstrdup (".cgq/logs/coordinator.log");
    // stdout (the ready line only) goes to its own file, read back here; the
    // logs on stderr go to coordinator.log.
    if (s_spawn (&l->coord, argv, ready, l->coord.log, !l->keep) < 0)
        return -1;
    int64_t deadline = cgq_now_ms () + S_START_TIMEOUT_MS;
    char buf[4096];
    for (;;) {
        if (cgq_cli_signal)
            return -1;
        FILE *f = fopen (ready, "r");
        size_t n = f ? fread (buf, 1, sizeof buf - 1, f) : 0;
        if (f)
            fclose (f);
        buf[n] = 0;
        if (s_parse_ready (l, buf))
            return 0;
        if (s_reaped (&l->coord)) {
            s_report_death (&l->coord, "before it was ready");
            return -1;
        }
        if (cgq_now_ms () >= deadline) {
            cgq_cli_error ("cgq-coordinator printed no ready line within %ds (see %s)",
                           S_START_TIMEOUT_MS / 1000, l->coord.log);
            s_print_tail (l->coord.log, 15);
            return -1;
        }
        s_nap_ms (20);
    }
}

// s_gpu_plan returns the --gpus value of each of n workers (caller frees each
// and the array). A list of GPUs, given or found with nvidia-smi for "auto",
// is dealt out round-robin so that two local workers never share a GPU.
static char **
s_gpu_plan (const char *gpus, size_t n)
{
    char **plan = cgq_xcalloc (n, sizeof *plan);
    char *list = NULL;
    if (!strcmp (gpus, "auto") && n > 1) {
        char *smi = cgq_which ("nvidia-smi");
        if (smi) {
            FILE *p = popen ("nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null", "r");
            cgq_buf_t b;
            cgq_buf_init (&b);
            char line[64];
            while (p && fgets (line, sizeof line, p)) {
                line[strcspn (line, " \r\n")] = 0;
                if (*line)
                    cgq_buf_printf (&b, "%s%s", b.len ? "," : "", line);
            }
            if (p)
                pclose (p);
            list = cgq_buf_take (&b);
            free (smi);
        }
        else
            list = cgq_xstrdup ("");
    }
    else if (strcmp (gpus, "auto") && strcmp (gpus, "none") && strncmp (gpus, "fake:", 5) && n > 1)
        list = cgq_xstrdup (gpus);
    if (!list) {
        for (size_t i = 0; i < n; i++)
            plan[i] = cgq_xstrdup (gpus);
        return plan;
    }
    cgq_buf_t *bufs = cgq_xcalloc (n, sizeof *bufs);
    for (size_t i = 0; i < n; i++)
        cgq_buf_init (&bufs[i]);
    size_t k = 0;
    char *save = NULL;
    for (char *tok = strtok_r (list, ",", &save); tok; tok = strtok_r (NULL, ",", &save), k++)
        cgq_buf_printf (&bufs[k % n], "%s%s", bufs[k % n].len ? "," : "", tok);
    for (size_t i = 0; i < n; i++) {
        plan[i] = bufs[i].len ? cgq_buf_take (&bufs[i]) : cgq_xstrdup ("none");
        cgq_buf_fini (&bufs[i]);
    }
    free (bufs);
    free (list);
    return plan;
}

static int
s_start_workers (s_local_t *l, const char *bin, double cpus, const char *gpus)
{
    char **plan = s_gpu_plan (gpus, l->nworkers);
    char *work = cgq_xasprintf ("%s/work", l->root);
    char cpus_text[32];
    snprintf (cpus_text, sizeof cpus_text, "%g", cpus);
    int rc = 0;
    for (size_t i = 0; i < l->nworkers && rc == 0; i++) {
        s_proc_t *w = &l->workers[i];
        w->id = cgq_xasprintf ("local-%zu", i + 1);
        w->what = cgq_xasprintf ("cgq-worker %s", w->id);
        w->log = cgq_xasprintf (".cgq/logs/worker-%zu.log", i + 1);
        char *argv[] = {(char *) bin, "--coordinator", l->nodes_ep, "--workdir", work, "--id",
                        w->id, "--cpus", cpus_text, "--gpus", plan[i], NULL};
        rc = s_spawn (w, argv, w->log, w->log, !l->keep);
    }
    for (size_t i = 0; i < l->nworkers; i++)
        free (plan[i]);
    free (plan);
    free (work);
    return rc;
}

// s_runner_config decides the device runner cgq run starts for spec's device
// stages: none when it has none (*config NULL); the runner.yaml given with
// --runner; else, when every device stage measures the built-in cpu-local
// benchmark, a runner.yaml written into .cgq/ that makes this CPU one device
// carrying every tag the stages ask for. Returns 0, or -1 with the error
// printed (a board's benchmark needs that board's runner.yaml).
static int
s_runner_config (s_local_t *l, const cgq_spec_t *spec, const char *given, char **config)
{
    *config = NULL;
    json_t *tags = json_object ();
    size_t ndevice = 0;
    int rc = 0;
    for (size_t k = 0; k < cgq_spec_nstages (spec) && rc == 0; k++) {
        const cgq_stage_t *st = cgq_spec_stage (spec, k);
        if (st->kind != CGQ_TRIAL_DEVICE)
            continue;
        ndevice++;
        if (given)
            continue;
        if (!st->benchmark || strcmp (st->benchmark, "cpu-local") != 0) {
            cgq_cli_error ("%s%s measures benchmark '%s' on a device runner's devices; cgq run "
                           "starts one by itself only for the built-in cpu-local benchmark: give "
                           "it the runner.yaml of your devices with --runner FILE "
                           "(docs/devices.md), or submit to a cluster with runners",
                           st->name ? "stage " : "the trial", st->name ? st->name : "",
                           st->benchmark ? st->benchmark : "?");
            rc = -1;
            break;
        }
        const char *key;
        json_t *v;
        json_object_foreach (st->on, key, v) {
            json_t *had = json_object_get (tags, key);
            if (had && !json_equal (had, v)) {
                cgq_cli_error ("device stages ask for %s: %s and %s: one local CPU device cannot "
                               "carry both (give --runner FILE)",
                               key, json_string_value (had), json_string_value (v));
                rc = -1;
                break;
            }
            json_object_set (tags, key, v);
        }
    }
    if (rc == 0 && ndevice && given) {
        char *abs = realpath (given, NULL);
        if (!abs) {
            cgq_cli_error ("--runner %s: %s", given, strerror (errno));
            rc = -1;
        }
        *config = abs;
    }
    else if (rc == 0 && ndevice) {
        // Tag values are JSON strings, which YAML reads as they are.
        char *t = json_dumps (tags, JSON_COMPACT | JSON_SORT_KEYS);
        char *path = cgq_xasprintf ("%s/runner.yaml", l->root);
        FILE *f = fopen (path, "w");
        if (!f || fprintf (f,
                           "# written by cgq run: this machine's CPU as one device, measured\n"
                           "# with the built-in cpu-local benchmark (docs/devices.md)\n"
                           "cache: {dir: %s/artifacts}\n"
                           "devices:\n"
                           "  - id: local-cpu\n"
                           "    tags: %s\n"
                           "benchmarks:\n"
                           "  cpu-local: {}\n",
                           l->root, t) < 0) {
            cgq_cli_error ("cannot write %s: %s", path, strerror (errno));
            rc = -1;
        }
        if (f && fclose (f) != 0 && rc == 0) {
            cgq_cli_error ("cannot write %s: %s", path, strerror (errno));
            rc = -1;
        }
        free (t);
        if (rc == 0)
            *config = path;
        else
            free (path);
    }
    json_decref (tags);
    return rc;
}

// s_start_runner starts a cgq-device-runner with config as one more node
// process (it is stopped and checked with the workers).
static int
s_start_runner (s_local_t *l, const char *bin, const char *config)
{
    s_proc_t *r = &l->workers[l->nnodes];
    r->id = cgq_xstrdup ("local-runner");
    r->what = cgq_xstrdup ("cgq-device-runner local-runner");
    r->log = cgq_xstrdup (".cgq/logs/runner.log");
    char *work = cgq_xasprintf ("%s/runner", l->root);
    char *argv[] = {(char *) bin, "--config", (char *) config, "--coordinator", l->nodes_ep,
                    "--id", r->id, "--workdir", work, NULL};
    l->nnodes++;
    int rc = s_spawn (r, argv, r->log, r->log, !l->keep);
    free (work);
    return rc;
}

// s_workers_connected tells whether every worker we started has said Hello to
// this coordinator: its node hash is alive and carries our child's pid (a
// hash left by an earlier run carries another).
static bool
s_workers_connected (s_local_t *l)
{
    char key[256];
    for (size_t i = 0; i < l->nnodes; i++) {
        s_proc_t *w = &l->workers[i];
        if (w->reaped)
            continue;
        cgq_key_node (key, sizeof key, w->id);
        redisReply *r = cgq_store_command (l->store, "HMGET %s " CGQ_NF_STATE " " CGQ_NF_PID, key);
        bool ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
                  r->element[0]->type == REDIS_REPLY_STRING &&
                  !strcmp (r->element[0]->str, CGQ_NODE_ALIVE) &&
                  r->element[1]->type == REDIS_REPLY_STRING &&
                  atoll (r->element[1]->str) == (long long) w->pid;
        if (r)
            freeReplyObject (r);
        if (!ok)
            return false;
    }
    return true;
}

// s_check runs after every progress poll: a daemon that died, or a job that
// no local worker can ever run, ends the run (1, after printing why).
static int
s_check (void *arg, const cgq_job_rec_t *job)
{
    s_local_t *l = arg;
    if (s_reaped (&l->redis)) {
        s_report_death (&l->redis, "while the job was running");
        return 1;
    }
    if (s_reaped (&l->coord)) {
        s_report_death (&l->coord, "while the job was running");
        return 1;
    }
    size_t alive = 0;
    for (size_t i = 0; i < l->nnodes; i++) {
        if (i >= l->nworkers) { // the device runner: its devices are the job's
            if (s_reaped (&l->workers[i])) {
                s_report_death (&l->workers[i], "while the job was running");
                return 1;
            }
            continue;
        }
        if (!s_reaped (&l->workers[i]))
            alive++;
        else
            s_report_death (&l->workers[i], "while the job was running");
    }
    if (alive == 0) {
        cgq_cli_error ("no local worker is left to run job %" PRIu64, l->job);
        return 1;
    }
    if (!job)
        return 0;
    if (!job->blocked && job->counts[CGQ_TRIAL_UNSCHEDULABLE] == 0) {
        l->blocked_since = 0;
        return 0;
    }
    if (!s_workers_connected (l)) {
        l->blocked_since = 0;
        return 0;
    }
    int64_t now = cgq_now_ms ();
    if (!l->blocked_since) {
        l->blocked_since = now;
        return 0;
    }
    if (now - l->blocked_since < S_BLOCKED_GRACE_MS)
        return 0;
    cgq_trial_rec_t *t = NULL;
    char err[512];
    if (cgq_view_trial_find (l->store, job, "unschedulable", true, &t, err, sizeof err) ==
        CGQ_VIEW_OK)
        cgq_cli_error ("trial %" PRIu64 " is unschedulable: %s", t->id,
                       t->error ? t->error : job->blocked ? job->blocked : "no reason given");
    else
        cgq_cli_error ("job %" PRIu64 " is blocked: %s", job->id,
                       job->blocked ? job->blocked : "trials are unschedulable");
    // The usual cause on a first day: a spec that asks for a GPU, run on a
    // laptop. Say how to try it anyway.
    const char *why = t && t->error ? t->error : job->blocked;
    if (why && strstr (why, "needs gpu"))
        fprintf (stderr, "cgq: the local workers offer too few GPUs for it: cgq run --gpus "
                         "fake:N gives them N pretend GPUs to try the spec, --gpus 0,1 names "
                         "real ones (nvidia-smi's indices)\n");
    cgq_trial_rec_destroy (&t);
    return 1;
}

// s_cancel asks the coordinator to cancel our job before it is stopped, so
// that the next cgq run in this directory does not resume it.
static void
s_cancel (s_local_t *l)
{
    // Without Redis the coordinator cannot record the cancellation, so it
    // would not answer.
    if (!l->job || !l->control_ep || s_reaped (&l->coord) || s_reaped (&l->redis))
        return;
    char msg[512];
    if (cgq_ctl_cancel (l->control_ep, l->job, 2000, msg, sizeof msg) != CGQ_EXIT_OK)
        cgq_cli_error ("could not cancel job %" PRIu64 ": %s", l->job, msg);
}

static void
s_print_kept (const s_local_t *l)
{
    cgq_buf_t pids;
    cgq_buf_init (&pids);
    for (size_t i = 0; i < l->nnodes; i++)
        if (l->workers[i].pid > 0)
            cgq_buf_printf (&pids, "%d ", (int) l->workers[i].pid);
    if (l->coord.pid > 0)
        cgq_buf_printf (&pids, "%d ", (int) l->coord.pid);
    if (l->redis.pid > 0)
        cgq_buf_printf (&pids, "%d", (int) l->redis.pid);
    FILE *f = fopen (".cgq/pids", "w");
    if (f) {
        fprintf (f, "%s\n", pids.data);
        fclose (f);
    }
    fprintf (stderr,
             "cgq: left running (--keep): redis-server (pid %d), cgq-coordinator (pid %d), "
             "%zu worker(s)\n"
             "  redis:        redis-cli -s %s\n"
             "  coordinator:  control %s, nodes %s\n"
             "  cli:          cgq --redis %s --coordinator %s status\n"
             "  more workers: cgq-worker --coordinator %s\n"
             "  stop them:    kill %s   (the pids are in .cgq/pids)\n",
             (int) l->redis.pid, (int) l->coord.pid, l->nworkers, l->sock, l->control_ep,
             l->nodes_ep, l->redis_url, l->control_ep, l->nodes_ep, pids.data);
    cgq_buf_fini (&pids);
}

// s_prepare makes ./.cgq and refuses to share it with a Redis that already
// serves it (a run with --keep, or another run in this directory).
static int
s_prepare (s_local_t *l)
{
    char err[512];
    if (!(l->root = cgq_local_root (err, sizeof err))) {
        cgq_cli_error ("%s", err);
        return -1;
    }
    l->sock = cgq_xasprintf ("%s/redis.sock", l->root);
    l->redis_url = cgq_xasprintf ("unix://%s", l->sock);
    struct sockaddr_un sun;
    if (strlen (l->sock) >= sizeof sun.sun_path) {
        cgq_cli_error ("the Redis socket path %s is %zu bytes, more than a Unix socket allows "
                       "(%zu); run cgq run from a directory with a shorter path",
                       l->sock, strlen (l->sock), sizeof sun.sun_path - 1);
        return -1;
    }
    const char *dirs[] = {"redis", "logs", "work"};
    for (int i = 0; i < 3; i++) {
        char *d = cgq_xasprintf ("%s/%s", l->root, dirs[i]);
        int rc = cgq_mkdir_p (d);
        if (rc < 0)
            cgq_cli_error ("cannot create %s: %s (cgq run keeps its state in ./.cgq)", d,
                           strerror (errno));
        free (d);
        if (rc < 0)
            return -1;
    }
    struct stat st;
    if (stat (l->sock, &st) == 0 && cgq_local_answers (l->redis_url, 1000)) {
        cgq_cli_error ("a Redis server already serves %s (left by cgq run --keep, or another cgq "
                       "run in this directory); stop it first: kill $(cat .cgq/pids)",
                       l->sock);
        return -1;
    }
    return 0;
}

int
cgq_cmd_run (cgq_cli_t *cli)
{
    // Everything runs on loopback here, without CURVE: keys meant for a
    // cluster must not reach the private coordinator and workers.
    cgq_ctl_set_curve (NULL, NULL);
    unsetenv ("CGQ_CURVE_SECRET");
    unsetenv ("CGQ_CURVE_SERVER");
    unsetenv ("CGQ_CURVE_ALLOW");
    uint64_t nworkers, top;
    if (cgq_cli_opt_u64 (cli, "workers", 1, 1, S_MAX_WORKERS, &nworkers) < 0 ||
        cgq_cli_opt_u64 (cli, "top", S_DEFAULT_TOP, 1, UINT32_MAX, &top) < 0)
        return CGQ_EXIT_BAD;
    const char *format = cgq_cli_opt (cli, "format");
    if (!format)
        format = "table";
    if (strcmp (format, "table") && strcmp (format, "json")) {
        cgq_cli_error ("bad --format '%s' (expected table or json)", format);
        return CGQ_EXIT_BAD;
    }
    // At least one slot each: with more workers than cores, a default
    // `cpu: 1` trial must still fit somewhere (the cores are shared anyway).
    double cpus = cgq_cores () / (double) nworkers;
    if (cpus < 1)
        cpus = 1;
    const char *cpus_opt = cgq_cli_opt (cli, "cpus");
    if (cpus_opt && (cgq_parse_double (cpus_opt, &cpus) < 0 || !(cpus > 0) || cpus > 1e6)) {
        cgq_cli_error ("bad --cpus '%s' (expected CPU slots per worker, such as 4 or 0.5)",
                       cpus_opt);
        return CGQ_EXIT_BAD;
    }
    const char *gpus = cgq_cli_opt (cli, "gpus");
    if (!gpus)
        gpus = "auto";
    if (!*gpus) {
        cgq_cli_error ("bad --gpus '' (expected auto, none, a list such as 0,1, or fake:N)");
        return CGQ_EXIT_BAD;
    }

    const char *path = cli->pos[0];
    cgq_spec_t *spec = s_load_spec (path);
    if (!spec)
        return CGQ_EXIT_BAD;
    if (s_check_scripts (spec, path, false) < 0) { // every trial would fail: start nothing
        cgq_spec_destroy (&spec);
        return CGQ_EXIT_BAD;
    }
    // Trials that only a process of the user's runs would wait for ever here.
    const char *who = spec->trial.kind == CGQ_TRIAL_CLIENT
                          ? "its trials are kind: client, run by a Python process that asks for "
                            "them (client.study(...) and study.ask(); cgq.local() starts a "
                            "private cluster for it: docs/python.md)"
                      : spec->search.algorithm == CGQ_SEARCH_EXTERNAL
                          ? "its points come from a searcher process of yours (search: {algorithm: "
                            "external}): cgq submit it to a cluster and run cgq optuna-search JOB "
                            "or cgq.searcher.serve_searcher beside it (docs/python.md)"
                          : NULL;
    if (who) {
        cgq_cli_error ("%s: cgq run cannot run this job alone: %s", path, who);
        cgq_spec_destroy (&spec);
        return CGQ_EXIT_BAD;
    }

    s_local_t l;
    memset (&l, 0, sizeof l);
    l.keep = cgq_cli_flag (cli, "keep");
    l.nworkers = (size_t) nworkers;
    l.nnodes = l.nworkers;
    l.workers = cgq_xcalloc (l.nworkers + 1, sizeof *l.workers); // + a device runner
    char *redis_bin = cgq_which ("redis-server");
    char *coord_bin = s_find_binary ("cgq-coordinator");
    char *worker_bin = s_find_binary ("cgq-worker");
    int rc = CGQ_EXIT_FAIL;
    bool started = false, followed = false;
    if (!redis_bin || !coord_bin || !worker_bin) {
        char *self = cgq_self_dir ();
        if (!redis_bin)
            cgq_cli_error ("redis-server is not on PATH (install the redis-server package)");
        else
            cgq_cli_error ("%s is neither next to cgq (in %s) nor on PATH (build it, or add its "
                           "directory to PATH)",
                           coord_bin ? "cgq-worker" : "cgq-coordinator", self ? self : "?");
        free (self);
        goto done;
    }
    if (s_prepare (&l) < 0)
        goto done;
    char *runner_config = NULL, *runner_bin = NULL;
    if (s_runner_config (&l, spec, cgq_cli_opt (cli, "runner"), &runner_config) < 0) {
        rc = CGQ_EXIT_BAD;
        goto done;
    }
    if (runner_config && !(runner_bin = s_find_binary ("cgq-device-runner"))) {
        cgq_cli_error ("the spec has device stages, and cgq-device-runner is neither next to cgq "
                       "nor on PATH (build it, or add its directory to PATH)");
        free (runner_config);
        goto done;
    }

    cgq_cli_catch_signals ();
    started = true;
    bool up = s_start_redis (&l, redis_bin) == 0 && s_start_coordinator (&l, coord_bin) == 0
              && s_start_workers (&l, worker_bin, cpus, gpus) == 0
              && (!runner_config || s_start_runner (&l, runner_bin, runner_config) == 0);
    free (runner_config);
    free (runner_bin);
    if (!up)
        goto stop;
    char err[512];
    l.store = cgq_store_new (l.redis_url, 2000, err, sizeof err);
    if (!l.store || cgq_store_connect (l.store) < 0) {
        cgq_cli_error ("%s", l.store ? cgq_store_errstr (l.store) : err);
        goto stop;
    }
    uint64_t trials = 0;
    rc = s_submit (l.control_ep, spec, path, l.store, &l.job, &trials);
    if (rc != CGQ_EXIT_OK)
        goto stop;
    if (trials)
        fprintf (stderr, "cgq: job %" PRIu64 " (%s): %" PRIu64 " trial%s on %zu local worker%s\n",
                 l.job, spec->name, trials, trials == 1 ? "" : "s", l.nworkers,
                 l.nworkers == 1 ? "" : "s");
    else
        fprintf (stderr, "cgq: job %" PRIu64 " (%s): unbounded search on %zu local worker%s\n",
                 l.job, spec->name, l.nworkers, l.nworkers == 1 ? "" : "s");

    cgq_job_rec_t *final = NULL;
    // s_check says why a job cannot run here, and ends the run
    int fr = cgq_progress_follow (l.store, l.job, false, s_check, &l, &final);
    if (fr == 0) {
        rc = cgq_run_report (l.store, final, !strcmp (format, "json"), top,
                             cgq_cli_opt (cli, "top") != NULL);
        followed = true;
        if (!l.keep)
            fprintf (stderr,
                     "cgq: its state stays in ./.cgq; from this directory `cgq results %" PRIu64
                     "`, `cgq logs %" PRIu64 " TRIAL` and `cgq plot %" PRIu64
                     " --out FILE` read it\n",
                     l.job, l.job, l.job);
    }
    else {
        rc = CGQ_EXIT_FAIL;
        if (fr != CGQ_PROGRESS_SIGNAL)
            s_cancel (&l);
    }
    cgq_job_rec_destroy (&final);

stop:
    if (cgq_cli_signal) {
        int sig = cgq_cli_signal;
        if (l.job)
            cgq_cli_error ("interrupted; cancelling job %" PRIu64 " and stopping what cgq run started",
                           l.job);
        else
            cgq_cli_error ("interrupted; stopping what cgq run started");
        s_cancel (&l);
        rc = sig == SIGINT ? 130 : 128 + sig;
    }
    else if (followed && l.keep) {
        s_print_kept (&l);
        started = false;
    }
    if (started) {
        int saved = rc;
        s_stop_all (&l);
        rc = saved;
    }
done:
    s_local_fini (&l);
    free (redis_bin);
    free (coord_bin);
    free (worker_bin);
    cgq_spec_destroy (&spec);
    return rc;
}
