// cgq-device-runner: serves the devices of its runner.yaml to a coordinator
// and measures, on each, the benchmarks of that same file (never a command
// from a spec). The loop, the link and the shutdown are every node's
// (node/shell.h), as cgq-worker's; what is the runner's own is here: its
// options and runner.yaml, its devices (device.h) behind the shell's
// callbacks, and the `measure` mode.
//
//   cgq-device-runner --config runner.yaml [options]        the daemon
//   cgq-device-runner measure --config runner.yaml --device ID --benchmark B ...
//                                     one measurement, its JSON on stdout
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <curl/curl.h>
#include <unistd.h>

#include "auth.h"
#include "config.h"
#include "device.h"
#include "gp.h"
#include "invoke.h"
#include "json.h"
#include "link.h"
#include "log.h"
#include "measure.h"
#include "recheck.h"
#include "sysfs.h"
#include "transport.h"
#include "result.h"
#include "runcfg.h"
#include "shell.h"
#include "util.h"
#include "wire.h"

#define S_PROG "cgq-device-runner"
#define S_SETUP_TIMEOUT_S 600
#define S_MAX_TRIAL_ENV 256 // --env entries of one measurement

typedef struct {
    char *coordinator;
    char *id;
    char *workdir;
    int64_t kill_grace_ms;
    int64_t heartbeat_ms;
    char *curve_secret; // CURVE (common/auth.h)
    char *curve_server;
    char *log_level;
    char *log_format;
    bool log_json;
    uint64_t max_artifact;
    int64_t recheck_ms; // a quarantined device's check, again (recheck.h); 0: never
} s_cfg_t;

static const cgq_opt_t s_opts[] = {
    {"coordinator", 0, CGQ_OPT_STRING, offsetof (s_cfg_t, coordinator), NULL,
     "CGQ_COORDINATOR_NODES",
     "coordinator node endpoint (default: runner.yaml's coordinator, else tcp://127.0.0.1:7700)", 0,
     0},
    {"id", 0, CGQ_OPT_STRING, offsetof (s_cfg_t, id), NULL, "CGQ_RUNNER_ID",
     "node id, stable across reconnects (default: runner.yaml's id, else HOSTNAME-runner)", 0, 0},
    {"workdir", 0, CGQ_OPT_STRING, offsetof (s_cfg_t, workdir), "./.cgq/runner", NULL,
     "benchmark commands run in this directory", 0, 0},
    {"kill-grace", 0, CGQ_OPT_DURATION_MS, offsetof (s_cfg_t, kill_grace_ms), "2s", NULL,
     "SIGTERM -> SIGKILL grace when a measurement is stopped", 0, 3600000},
    {"heartbeat", 0, CGQ_OPT_DURATION_MS, offsetof (s_cfg_t, heartbeat_ms), "1s", NULL,
     "heartbeat interval until the coordinator's Welcome sets it", 10, 600000},
    {"curve-secret", 0, CGQ_OPT_STRING, offsetof (s_cfg_t, curve_secret), NULL,
     "CGQ_CURVE_SECRET", "CURVE: this runner's secret certificate (NAME.key_secret of cgq keygen)",
     0, 0},
    {"curve-server", 0, CGQ_OPT_STRING, offsetof (s_cfg_t, curve_server), NULL,
     "CGQ_CURVE_SERVER", "CURVE: the coordinator's public certificate (its NAME.key)", 0, 0},
    {"max-artifact", 0, CGQ_OPT_BYTES, offsetof (s_cfg_t, max_artifact), NULL, "CGQ_MAX_ARTIFACT",
     "largest artifact fetched; a longer download is stopped (default: runner.yaml's "
     "cache.max_artifact, else its cache.max_size)",
     0, 0},
    {"recheck", 0, CGQ_OPT_DURATION_MS, offsetof (s_cfg_t, recheck_ms), "60s", "CGQ_RECHECK",
     "a quarantined device's check runs again this often; when it passes the device returns "
     "to service (0: never; a device without check waits for cgq devices enable)",
     0, 86400000},
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
    cgq_runcfg_t *rc;
    char *config_path; // absolute
    char *self_exe;
    char *workdir;     // absolute
    char *hostname;
    cgq_device_t **devices;
    size_t ndevices;
    Cgq__Device **device_msgs;
    Cgq__Resources resources;
    cgq_shell_t *shell;
    cgq_link_t *link; // the shell's (cgq_shell_link), borrowed
    cgq_auth_t *auth; // CURVE keys, or NULL
    Cgq__TaskRef **running; // scratch for s_running
    cgq_recheck_t *recheck; // quarantined devices' checks (recheck.h)
} s_runner_t;

static size_t
s_running (void *arg, Cgq__TaskRef ***refs)
{
    s_runner_t *r = arg;
    r->running = cgq_xrealloc (r->running, (r->ndevices + 1) * sizeof *r->running);
    size_t n = 0;
    for (size_t i = 0; i < r->ndevices; i++)
        if (cgq_device_task (r->devices[i]))
            r->running[n++] = (Cgq__TaskRef *) cgq_device_task (r->devices[i]);
    *refs = r->running;
    return n;
}

static cgq_device_t *
s_find_device (s_runner_t *r, const char *id)
{
    for (size_t i = 0; id && i < r->ndevices; i++)
        if (!strcmp (cgq_device_id (r->devices[i]), id))
            return r->devices[i];
    return NULL;
}

static cgq_device_t *
s_find_task (s_runner_t *r, const Cgq__TaskRef *ref)
{
    for (size_t i = 0; i < r->ndevices; i++) {
        const Cgq__TaskRef *t = cgq_device_task (r->devices[i]);
        if (t && cgq_result_ref_equal (t, ref))
            return r->devices[i];
    }
    return NULL;
}

static void
s_lost (s_runner_t *r, const Cgq__TaskRef *ref, const char *why)
{
    cgq_twarn (ref->job, ref->trial, ref->attempt, "not measured: %s", why);
    cgq_link_result (r->link, cgq_result_new (ref, CGQ__TASK_STATUS__TASK_LOST, NULL, why));
}

static void
s_on_assign (void *arg, const Cgq__Assign *a)
{
    s_runner_t *r = arg;
    char err[512];
    if (!a->task) {
        cgq_warn ("ignoring an Assign without a task");
        return;
    }
    // Every line about the task carries its ids (log.h).
    uint64_t jid = a->task->job, tid = a->task->trial;
    uint32_t att = a->task->attempt;
    if (s_find_task (r, a->task)) {
        cgq_tdebug (jid, tid, att, "already measuring; ignoring the repeated Assign");
        return;
    }
    if (cgq_link_has_result (r->link, a->task, true)) {
        cgq_tdebug (jid, tid, att, "already measured; sent its result again");
        return;
    }
    if (!a->kind || strcmp (a->kind, "benchmark") != 0) {
        snprintf (err, sizeof err, "a device runner runs device trials only (benchmark: and on:), "
                                   "not kind '%s'",
                  a->kind ? a->kind : "");
        s_lost (r, a->task, err);
        return;
    }
    cgq_device_t *d = s_find_device (r, a->device_id);
    if (!d) {
        snprintf (err, sizeof err, "device '%s' is not served by runner %s",
                  a->device_id ? a->device_id : "", r->cfg.id);
        s_lost (r, a->task, err);
        return;
    }
    if (!cgq_runcfg_bench (r->rc, a->benchmark)) {
        char *names = cgq_runcfg_bench_names (r->rc);
        snprintf (err, sizeof err, "unknown benchmark '%s' (runner %s has: %s; a runner runs "
                                   "only the benchmarks of its own config)",
                  a->benchmark ? a->benchmark : "", r->cfg.id, names);
        free (names);
        s_lost (r, a->task, err);
        return;
    }
    if (cgq_device_start (d, a, err, sizeof err) < 0) {
        s_lost (r, a->task, err);
        return;
    }
    cgq_tinfo (jid, tid, att, "measuring %s on %s", a->benchmark, a->device_id);
}

static void
s_on_stop (void *arg, const Cgq__Stop *s)
{
    s_runner_t *r = arg;
    cgq_device_t *d = s->task ? s_find_task (r, s->task) : NULL;
    if (!d) {
        cgq_tdebug (s->task ? s->task->job : 0, s->task ? s->task->trial : 0,
                    s->task ? s->task->attempt : 0,
                    "Stop for a task not measuring here; ignored");
        return;
    }
    cgq_device_stop (d, s->reason && *s->reason ? s->reason : "stopped by the coordinator");
}

// s_busy counts the devices measuring now.
static size_t
s_busy (const s_runner_t *r)
{
    size_t busy = 0;
    for (size_t i = 0; i < r->ndevices; i++)
        busy += cgq_device_task (r->devices[i]) != NULL;
    return busy;
}

// s_reap hands each finished measurement's result to the link (report) or
// drops it (shutdown). Returns how many devices still measure.
static size_t
s_reap (void *arg, bool report)
{
    s_runner_t *r = arg;
    int64_t now = cgq_now_ms ();
    for (size_t i = 0; i < r->ndevices; i++) {
        Cgq__Result *res = cgq_device_tick (r->devices[i], now);
        if (!res)
            continue;
        if (report)
            cgq_link_result (r->link, res);
        else
            cgq_result_destroy (&res);
    }
    return s_busy (r);
}

// s_watch gives the shell each measuring process's stdout and timers.
static void
s_watch (void *arg, cgq_shell_t *shell)
{
    s_runner_t *r = arg;
    for (size_t i = 0; i < r->ndevices; i++) {
        int fd = cgq_device_fd (r->devices[i]);
        if (fd >= 0)
            cgq_shell_watch (shell, fd, r->devices[i]);
        cgq_shell_due (shell, cgq_device_deadline (r->devices[i]));
    }
    cgq_shell_due (shell, cgq_recheck_deadline (r->recheck));
}

static void
s_recovered (void *arg, const char *id)
{
    s_runner_t *r = arg;
    cgq_link_recovered (r->link, id);
}

// s_turn runs the checks of the devices the coordinator says are
// quarantined (its last Heartbeat answer), those idle here.
static void
s_turn (void *arg)
{
    s_runner_t *r = arg;
    if (!r->link)
        return;
    const char *const *quar;
    size_t nq = cgq_link_quarantined (r->link, &quar);
    const char *idle[64];
    size_t n = 0;
    for (size_t i = 0; i < nq && n < 64; i++) {
        cgq_device_t *d = s_find_device (r, quar[i]);
        if (d && !cgq_device_task (d))
            idle[n++] = cgq_device_id (d);
    }
    cgq_recheck_tick (r->recheck, idle, n, cgq_now_ms (), s_recovered, r);
}

static void
s_readable (void *arg, void *owner, int fd)
{
    cgq_device_on_readable (owner);
}

// s_stop_all stops the measurements in flight at shutdown (the coordinator
// requeues them on Bye); each device has its own grace (--kill-grace).
static size_t
s_stop_all (void *arg, int64_t grace_ms)
{
    s_runner_t *r = arg;
    size_t busy = 0;
    for (size_t i = 0; i < r->ndevices; i++)
        if (cgq_device_task (r->devices[i])) {
            cgq_device_stop (r->devices[i], "device runner shutting down");
            busy++;
        }
    if (busy)
        cgq_info ("stopping %zu measurement(s)", busy);
    return busy;
}

static const cgq_shell_ops_t s_ops = {
    .assign = s_on_assign,
    .stop = s_on_stop,
    .running = s_running,
    .watch = s_watch,
    .readable = s_readable,
    .turn = s_turn,
    .reap = s_reap,
    .stop_all = s_stop_all,
};

// s_take_config removes --config FILE / --config=FILE from argv (the daemon's
// config is runner.yaml, not a mapping of options) and returns FILE.
static const char *
s_take_config (int *argc, char **argv)
{
    const char *path = NULL;
    int k = 1;
    for (int i = 1; i < *argc; i++) {
        if (!strcmp (argv[i], "--") ) {
            while (i < *argc)
                argv[k++] = argv[i++];
            break;
        }
        if (!strcmp (argv[i], "--config") && i + 1 < *argc) {
            path = argv[++i];
            continue;
        }
        if (!strncmp (argv[i], "--config=", 9)) {
            path = argv[i] + 9;
            continue;
        }
        argv[k++] = argv[i];
    }
    *argc = k;
    argv[k] = NULL;
    return path;
}

static cgq_runcfg_t *
s_load (const char *path)
{
    char err[1024];
    cgq_runcfg_t *rc = cgq_runcfg_load (path, err, sizeof err);
    if (!rc) {
        fprintf (stderr, S_PROG ": %s\n", err);
        return NULL;
    }
    // A relative cache.dir is the runner's start directory's, resolved now:
    // benchmarks run in --workdir, where a relative {artifact} points nowhere.
    // (The measuring process starts in the runner's directory, so it
    // resolves it the same way.)
    if (rc->cache_dir && rc->cache_dir[0] != '/') {
        char *cwd = getcwd (NULL, 0);
        if (cwd) {
            const char *rel = rc->cache_dir;
            if (rel[0] == '.' && rel[1] == '/')
                rel += 2;
            char *abs = cgq_xasprintf ("%s/%s", cwd, rel);
            free (rc->cache_dir);
            rc->cache_dir = abs;
            free (cwd);
        }
    }
    return rc;
}

// ------------------------------------------------------------ measure mode

static void
s_measure_usage (FILE *f)
{
    fprintf (f, "usage: " S_PROG " measure --config runner.yaml --device ID --benchmark NAME\n"
                "         [--params JSON] [--artifact URL --sha256 HEX] [--repeats N] [--warmup N]\n"
                "         [--job J] [--trial T] [--workdir DIR] [--log-level LEVEL]\n"
                "         [--measure JSON]  (a stage's measure: block, e.g. '{\"precision\": 0.02}')\n\n"
                "Runs one measurement as the runner would for a task and prints one JSON line:\n"
                "{\"status\": succeeded|failed|timeout|bad, \"error\": \"...\", \"metrics\": {...}}.\n"
                "Exit status: 0 succeeded, 1 failed, 3 timeout, 4 bad request, 2 usage or config.\n");
}

static volatile sig_atomic_t s_measure_killed = 0;

static void
s_measure_on_term (int sig)
{
    // The run in flight ends with the measurement (its own process group).
    cgq_invoke_kill_group ();
    cgq_sysfs_restore_signal (); // governor/frequency back at once (measure: pinning)
    s_measure_killed = sig;
    signal (sig, SIG_DFL);
    raise (sig);
}

static int
s_measure_main (int argc, char **argv)
{
    static const struct option longs[] = {
        {"config", required_argument, NULL, 'c'},   {"device", required_argument, NULL, 'd'},
        {"benchmark", required_argument, NULL, 'b'}, {"params", required_argument, NULL, 'p'},
        {"artifact", required_argument, NULL, 'a'}, {"sha256", required_argument, NULL, 's'},
        {"repeats", required_argument, NULL, 'r'},  {"warmup", required_argument, NULL, 'w'},
        {"job", required_argument, NULL, 'J'},      {"trial", required_argument, NULL, 'T'},
        {"workdir", required_argument, NULL, 'W'},  {"log-level", required_argument, NULL, 'L'},
        {"max-artifact", required_argument, NULL, 'M'},
        {"env", required_argument, NULL, 'E'},
        {"measure", required_argument, NULL, 'm'}, // the stage's measure: as JSON (measure.c)
        {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0},
    };
    const char *config = NULL, *level = "info";
    static char *env_keys[S_MAX_TRIAL_ENV];
    static const char *env_vals[S_MAX_TRIAL_ENV];
    size_t nenv = 0;
    cgq_measure_req_t req;
    memset (&req, 0, sizeof req);
    uint64_t u;
    int c;
    optind = 1;
    while ((c = getopt_long (argc, argv, "", longs, NULL)) != -1) {
        switch (c) {
        case 'c': config = optarg; break;
        case 'd': req.device = optarg; break;
        case 'b': req.benchmark = optarg; break;
        case 'p': req.params_json = optarg; break;
        case 'a': req.artifact_url = optarg; break;
        case 's': req.artifact_sha256 = optarg; break;
        case 'W': req.workdir = optarg; break;
        case 'L': level = optarg; break;
        case 'm': req.measure_json = optarg; break;
        case 'E': {
            // --env NAME=VALUE (repeated): the trial's env, given to the benchmark
            char *eq = strchr (optarg, '=');
            if (!eq || eq == optarg || nenv >= S_MAX_TRIAL_ENV) {
                fprintf (stderr, S_PROG " measure: --env '%s' is not NAME=VALUE (at most %d)\n",
                         optarg, S_MAX_TRIAL_ENV);
                return 2;
            }
            env_keys[nenv] = cgq_xstrndup (optarg, (size_t) (eq - optarg));
            env_vals[nenv++] = eq + 1;
            break;
        }
        case 'M':
            if (cgq_parse_u64 (optarg, &req.max_artifact) < 0) {
                fprintf (stderr, S_PROG " measure: '%s' is not a byte count\n", optarg);
                return 2;
            }
            break;
        case 'r':
        case 'w':
        case 'J':
        case 'T':
            if (cgq_parse_u64 (optarg, &u) < 0 || ((c == 'r' || c == 'w') && u > 1000000000)) {
                fprintf (stderr, S_PROG " measure: '%s' is not a count\n", optarg);
                return 2;
            }
            if (c == 'r')
                req.repeats = (uint32_t) u;
            else if (c == 'w')
                req.warmup = (uint32_t) u;
            else if (c == 'J')
                req.job = u;
            else
                req.trial = u;
            break;
        case 'h': s_measure_usage (stdout); return 0;
        default: s_measure_usage (stderr); return 2;
        }
    }
    if (optind < argc || !config || !req.device || !req.benchmark) {
        s_measure_usage (stderr);
        return 2;
    }
    if (cgq_log_configure (S_PROG " measure", level, NULL, false) < 0)
        return 2;
    cgq_runcfg_t *rc = s_load (config);
    if (!rc)
        return 2;
    req.cfg = rc;
    req.env_keys = (const char *const *) env_keys;
    req.env_vals = env_vals;
    req.nenv = nenv;
    signal (SIGTERM, s_measure_on_term);
    signal (SIGINT, s_measure_on_term);
    curl_global_init (CURL_GLOBAL_DEFAULT);
    char err[2048] = "";
    char *metrics = NULL;
    cgq_measure_status_t st = cgq_measure_run (&req, &metrics, err, sizeof err);
    json_t *line = json_object ();
    json_object_set_new (line, "status", json_string (cgq_measure_status_name (st)));
    json_object_set_new (line, "error", json_string (err));
    json_object_set_new (line, "metrics", json_loads (metrics, 0, NULL));
    char *text = cgq_json_dumps (line);
    printf ("%s\n", text);
    fflush (stdout);
    free (text);
    free (metrics);
    json_decref (line);
    cgq_runcfg_destroy (&rc);
    for (size_t i = 0; i < nenv; i++)
        free (env_keys[i]);
    curl_global_cleanup ();
    return st == CGQ_MEASURE_OK ? 0 : st == CGQ_MEASURE_FAILED ? 1 : st == CGQ_MEASURE_TIMEOUT ? 3 : 4;
}

// ------------------------------------------------------------ check mode

// s_check_main: `check --config runner.yaml --device ID [--workdir DIR]`
// runs the device's check once, as the daemon does for a quarantined device
// (recheck.h). Exit 0 passed, 1 failed (why on stderr), 3 no check, 2 usage.
static int
s_check_main (int argc, char **argv)
{
    static const struct option longs[] = {
        {"config", required_argument, NULL, 'c'}, {"device", required_argument, NULL, 'd'},
        {"workdir", required_argument, NULL, 'W'}, {NULL, 0, NULL, 0},
    };
    const char *config = NULL, *device = NULL, *workdir = ".";
    int c;
    optind = 1;
    while ((c = getopt_long (argc, argv, "", longs, NULL)) != -1) {
        switch (c) {
        case 'c': config = optarg; break;
        case 'd': device = optarg; break;
        case 'W': workdir = optarg; break;
        default: config = NULL; break;
        }
        if (!config && c != 'd' && c != 'W')
            break;
    }
    if (optind != argc || !config || !device) {
        fprintf (stderr, "usage: " S_PROG " check --config runner.yaml --device ID "
                         "[--workdir DIR]\n");
        return 2;
    }
    cgq_runcfg_t *rc = s_load (config);
    if (!rc)
        return 2;
    char err[1024] = "";
    int r = cgq_recheck_run (rc, device, workdir, err, sizeof err);
    if (r < 0)
        fprintf (stderr, S_PROG " check: %s\n", err);
    else if (r > 0)
        fprintf (stderr, S_PROG " check: device %s has no check\n", device);
    cgq_runcfg_destroy (&rc);
    return r < 0 ? 1 : r > 0 ? 3 : 0;
}

// ------------------------------------------------------------ daemon

// s_setup_devices runs each device's setup command; a device whose setup
// fails is not offered (the others are).
static int
s_setup_devices (s_runner_t *r)
{
    cgq_device_opts_t dopts = {
        .self_exe = r->self_exe,
        .config_path = r->config_path,
        .workdir = r->workdir,
        .log_level = r->cfg.log_level,
        .kill_grace_ms = r->cfg.kill_grace_ms,
        .max_artifact = r->cfg.max_artifact,
    };
    r->devices = cgq_xcalloc (r->rc->ndevices + 1, sizeof *r->devices);
    r->device_msgs = cgq_xcalloc (r->rc->ndevices + 1, sizeof *r->device_msgs);
    for (size_t i = 0; i < r->rc->ndevices; i++) {
        const cgq_runcfg_device_t *d = &r->rc->devices[i];
        char terr[256]; // transport.c: its client must be installed
        if (cgq_transport_ready (&d->transport, terr, sizeof terr) < 0) {
            cgq_error ("device %s: %s; not offering it", d->id, terr);
            continue;
        }
        cgq_measure_restore_pinned (d, r->workdir); // a killed measurement's pinning (sysfs.c)
        if (d->setup) {
            char **envp = cgq_invoke_env (d->env.keys, d->env.vals, d->env.n);
            char why[512];
            int rc = cgq_invoke_shell (d->setup, envp, S_SETUP_TIMEOUT_S, why, sizeof why);
            cgq_invoke_env_free (envp);
            if (rc < 0) {
                cgq_error ("device %s: setup '%s' failed: %s; not offering it", d->id, d->setup,
                           why);
                continue;
            }
        }
        cgq_device_t *dev = cgq_device_new (d, &dopts);
        r->device_msgs[r->ndevices] = cgq_device_msg (dev);
        r->devices[r->ndevices++] = dev;
    }
    if (r->ndevices == 0) {
        cgq_error ("no device is usable (every setup failed, or its transport's client is missing)");
        return -1;
    }
    cgq__resources__init (&r->resources);
    r->resources.n_devices = r->ndevices;
    r->resources.devices = r->device_msgs;
    return 0;
}

static int
s_setup (s_runner_t *r, const char *config)
{
    if (cgq_log_configure (S_PROG, r->cfg.log_level, r->cfg.log_format, r->cfg.log_json) < 0)
        return 2;
    if (!config) {
        fprintf (stderr, S_PROG ": --config runner.yaml is required (its devices and benchmarks; "
                                "see docs/devices.md)\n");
        return 2;
    }
    r->config_path = realpath (config, NULL);
    if (!r->config_path) {
        fprintf (stderr, S_PROG ": cannot read %s: %s (check --config)\n", config, strerror (errno));
        return 2;
    }
    if (!(r->rc = s_load (r->config_path)))
        return 2;
    r->self_exe = realpath ("/proc/self/exe", NULL);
    if (!r->self_exe) {
        fprintf (stderr, S_PROG ": cannot find its own executable: %s\n", strerror (errno));
        return 1;
    }
    if (!r->cfg.coordinator)
        r->cfg.coordinator = cgq_xstrdup (r->rc->coordinator ? r->rc->coordinator
                                                             : "tcp://127.0.0.1:7700");
    r->hostname = cgq_shell_hostname ();
    if (!r->cfg.id)
        r->cfg.id = r->rc->id ? cgq_xstrdup (r->rc->id) : cgq_xasprintf ("%s-runner", r->hostname);
    if (cgq_shell_check_id (S_PROG, r->cfg.id) < 0)
        return 2;
    const char *wd = r->cfg.workdir && *r->cfg.workdir ? r->cfg.workdir : "./.cgq/runner";
    if (cgq_mkdir_p (wd) < 0 || !(r->workdir = realpath (wd, NULL))) {
        fprintf (stderr, S_PROG ": cannot create --workdir %s: %s\n", wd, strerror (errno));
        return 1;
    }
    if (cgq_mkdir_p (r->rc->cache_dir) < 0) {
        fprintf (stderr, S_PROG ": cannot create the artifact cache %s: %s (set cache.dir in %s)\n",
                 r->rc->cache_dir, strerror (errno), config);
        return 1;
    }
    if (s_setup_devices (r) < 0)
        return 1;
    r->recheck = cgq_recheck_new (r->rc, r->self_exe, r->config_path, r->workdir,
                                  r->cfg.recheck_ms);
    return 0;
}

static void
s_cleanup (s_runner_t *r)
{
    cgq_auth_destroy (&r->auth);
    cgq_recheck_destroy (&r->recheck);
    for (size_t i = 0; i < r->ndevices; i++)
        cgq_device_destroy (&r->devices[i]);
    for (size_t i = 0; r->rc && r->workdir && i < r->rc->ndevices; i++) // ssh control sockets
        cgq_transport_close (&r->rc->devices[i].transport, r->rc->devices[i].id, r->workdir);
    free (r->devices);
    free (r->device_msgs);
    free (r->running);
    free (r->config_path);
    free (r->self_exe);
    free (r->workdir);
    free (r->hostname);
    cgq_runcfg_destroy (&r->rc);
    cgq_config_free (s_opts, &r->cfg);
    // Last: a measurement killed above is a SIGCHLD.
    cgq_shell_destroy (&r->shell);
}

int
main (int argc, char **argv)
{
    cgq_log_init (S_PROG, CGQ_LOG_INFO, false);
    if (argc > 1 && !strcmp (argv[1], "measure"))
        return s_measure_main (argc - 1, argv + 1);
    if (argc > 1 && !strcmp (argv[1], "check"))
        return s_check_main (argc - 1, argv + 1);
    // The daemon runs no BLAS of its own (measurements run in a process of
    // their own): OpenBLAS's pool would only spin at its start.
    cgq_gp_blas_one_thread ();

    s_runner_t r;
    memset (&r, 0, sizeof r);
    const char *config = s_take_config (&argc, argv);
    int argi = 0;
    int rc = cgq_config_parse (s_opts, &r.cfg, S_PROG,
                               S_PROG " --config runner.yaml [options]\n"
                                      "       " S_PROG " measure --help",
                               argc, argv, &argi);
    if (rc == 0 && argi < argc) {
        fprintf (stderr, S_PROG ": unexpected argument '%s' (see --help)\n", argv[argi]);
        rc = -1;
    }
    if (rc != 0) {
        cgq_config_free (s_opts, &r.cfg);
        return rc > 0 ? 0 : 2;
    }
    rc = s_setup (&r, config);
    if (rc == 0 && !(r.shell = cgq_shell_new (S_PROG, &s_ops, &r)))
        rc = 1;
    if (rc != 0) {
        s_cleanup (&r);
        return rc;
    }
    cgq_info ("runner '%s': %zu device(s), %zu benchmark(s), cache %s (cap %" PRIu64 " MiB)",
              r.cfg.id, r.ndevices, r.rc->nbenches, r.rc->cache_dir, r.rc->cache_max >> 20);

    if (cgq_shell_auth (S_PROG, "runner", r.cfg.curve_secret, r.cfg.curve_server, &r.auth) < 0) {
        s_cleanup (&r);
        return 2;
    }
    cgq_link_opts_t lopts = {
        .auth = r.auth,
        .endpoint = r.cfg.coordinator,
        .node_id = r.cfg.id,
        .hostname = r.hostname,
        .resources = &r.resources,
        .heartbeat_ms = r.cfg.heartbeat_ms,
        .kind = CGQ__NODE_KIND__NODE_DEVICE_RUNNER,
    };
    if (cgq_shell_connect (r.shell, &lopts) < 0) {
        s_cleanup (&r);
        return 2;
    }
    r.link = cgq_shell_link (r.shell);
    cgq_shell_run (r.shell);
    cgq_shell_shutdown (r.shell, r.cfg.kill_grace_ms);
    r.link = NULL;
    s_cleanup (&r);
    cgq_info ("stopped");
    return 0;
}
