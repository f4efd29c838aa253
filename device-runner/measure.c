#include "measure.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "artifact.h"
#include "boardsys.h"
#include "engine.h"
#include "gen.h"
#include "graph.h"
#include "interfere.h"
#include "invoke.h"
#include "json.h"
#include "log.h"
#include "measure_opts.h"
#include "stats.h"
#include "sysfs.h"
#include "template.h"
#include "transport.h"
#include "util.h"

// The output of one run that a parse: benchmark reads; more is cut.
#define S_PARSE_CAP (4u << 20)

const char *
cgq_measure_status_name (cgq_measure_status_t st)
{
    switch (st) {
    case CGQ_MEASURE_OK: return "succeeded";
    case CGQ_MEASURE_FAILED: return "failed";
    case CGQ_MEASURE_TIMEOUT: return "timeout";
    case CGQ_MEASURE_BAD: return "bad";
    }
    return "?";
}

static double
s_now_s (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static void
s_sleep (double s)
{
    if (s <= 0)
        return;
    struct timespec ts = {(time_t) s, (long) ((s - floor (s)) * 1e9)};
    while (nanosleep (&ts, &ts) < 0 && errno == EINTR)
        ;
}

static bool
s_is_assignment (const json_t *v)
{
    return json_is_object (v) && json_is_integer (json_object_get (v, "id"))
           && json_is_object (json_object_get (v, "map"));
}

// s_vars builds what templates see: the params (an assignment as its id)
// and the built-ins, which win over a param of the same name.
static json_t *
s_vars (const json_t *params, const char *device, const char *benchmark, const char *artifact)
{
    json_t *v = json_object ();
    const char *k;
    json_t *x;
    json_object_foreach ((json_t *) params, k, x)
    {
        if (s_is_assignment (x))
            json_object_set (v, k, json_object_get (x, "id"));
        else
            json_object_set (v, k, x);
    }
    json_object_set_new (v, "device", json_string (device ? device : ""));
    json_object_set_new (v, "benchmark", json_string (benchmark ? benchmark : ""));
    json_object_set_new (v, "artifact", json_string (artifact ? artifact : ""));
    return v;
}

static char *
s_render (const char *tmpl, const json_t *vars, uint64_t job, uint64_t trial, int shell,
          char *err, size_t errlen)
{
    char why[256] = "";
    char *out = cgq_template_render (tmpl, vars, job, trial, "", shell, why, sizeof why);
    if (!out)
        snprintf (err, errlen, "%s", why);
    return out;
}

char *
cgq_measure_render (const char *tmpl, const char *params_json, const char *device,
                    const char *benchmark, const char *artifact, uint64_t job, uint64_t trial,
                    const char *item, const char *choice, int shell, char *err, size_t errlen)
{
    json_t *params = params_json && *params_json ? json_loads (params_json, 0, NULL) : json_object ();
    if (!json_is_object (params)) {
        snprintf (err, errlen, "params are not a JSON object");
        json_decref (params);
        return NULL;
    }
    json_t *vars = s_vars (params, device, benchmark, artifact);
    if (item)
        json_object_set_new (vars, "item", json_string (item));
    if (choice)
        json_object_set_new (vars, "choice", json_string (choice));
    char *out = s_render (tmpl, vars, job, trial, shell, err, errlen);
    json_decref (vars);
    json_decref (params);
    return out;
}

// A growable list of environment pairs.
typedef struct {
    char **keys, **vals;
    size_t n;
} s_env_t;

static void
s_env_add (s_env_t *e, char *k, char *v) // takes both
{
    e->keys = cgq_xrealloc (e->keys, (e->n + 1) * sizeof *e->keys);
    e->vals = cgq_xrealloc (e->vals, (e->n + 1) * sizeof *e->vals);
    e->keys[e->n] = k;
    e->vals[e->n++] = v;
}

static void
s_env_fini (s_env_t *e)
{
    for (size_t i = 0; i < e->n; i++) {
        free (e->keys[i]);
        free (e->vals[i]);
    }
    free (e->keys);
    free (e->vals);
}

// s_bench_env renders the benchmark's env: a key with {item} once per item
// of every assignment param (OP_BACKEND_{item}={choice}), the others once.
static int
s_bench_env (const cgq_runcfg_bench_t *b, const json_t *params, const json_t *vars, uint64_t job,
             uint64_t trial, s_env_t *env, char *err, size_t errlen)
{
    for (size_t i = 0; i < b->env.n; i++) {
        const char *kt = b->env.keys[i], *vt = b->env.vals[i];
        if (!strstr (kt, "{item}")) {
            char *k = s_render (kt, vars, job, trial, 0, err, errlen);
            char *v = k ? s_render (vt, vars, job, trial, 0, err, errlen) : NULL;
            if (!v) {
                free (k);
                return -1;
            }
            s_env_add (env, k, v);
            continue;
        }
        const char *pk;
        json_t *pv;
        size_t assignments = 0;
        json_object_foreach ((json_t *) params, pk, pv)
            assignments += s_is_assignment (pv);
        if (assignments == 0) {
            // Nothing to render one variable per item from: a plain id (as a
            // person may pass to `measure --params '{"backends": 13}'`) does
            // not say which items and choices it stands for.
            snprintf (err, errlen,
                      "benchmark %s's env %s needs an assignment param, {\"id\": N, \"map\": "
                      "{ITEM: CHOICE, ...}} as cgq sends it; the params have none (give the map: "
                      "--params '{\"backends\": {\"id\": 13, \"map\": {\"Conv2D\": "
                      "\"acl_cl\", ...}}}')",
                      b->name, kt);
            return -1;
        }
        json_object_foreach ((json_t *) params, pk, pv)
        {
            if (!s_is_assignment (pv))
                continue;
            const char *item;
            json_t *choice;
            json_object_foreach (json_object_get (pv, "map"), item, choice)
            {
                json_t *v2 = json_copy ((json_t *) vars);
                json_object_set_new (v2, "item", json_string (item));
                json_object_set (v2, "choice", choice);
                char *k = s_render (kt, v2, job, trial, 0, err, errlen);
                char *v = k ? s_render (vt, v2, job, trial, 0, err, errlen) : NULL;
                json_decref (v2);
                if (!v) {
                    free (k);
                    return -1;
                }
                s_env_add (env, k, v);
            }
        }
    }
    return 0;
}

// The state of one measurement as it goes.
typedef struct {
    const cgq_measure_req_t *req;
    const cgq_runcfg_device_t *dev;
    const cgq_runcfg_bench_t *bench;
    json_t *params;
    json_t *metrics;
    double *samples;
    size_t n, cap;
    double *warm;
    size_t nwarm, capwarm;
    long peak_rss_kb;
    double peak_reported_kb; // parse: memory, the largest reported
    bool max_time_hit;
    char *artifact_path;
    const s_env_t *env;  // the pairs behind envp (a transport exports them on the board)
    double temp_max;     // the hottest thermal zone seen (°C); NAN: none
} s_meas_t;

static void
s_push (double **v, size_t *n, size_t *cap, double x)
{
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 64;
        *v = cgq_xrealloc (*v, *cap * sizeof **v);
    }
    (*v)[(*n)++] = x;
}

// s_match_all adds every match of re's group 1 in text, times scale, to
// the samples (or to out_last only, the last match, when samples is NULL).
static size_t
s_match_all (const regex_t *re, const char *text, double scale, s_meas_t *m, bool warm,
             double *out_last)
{
    size_t found = 0;
    const char *p = text;
    regmatch_t g[2];
    while (*p && regexec (re, p, 2, g, p == text ? 0 : REG_NOTBOL) == 0) {
        if (g[1].rm_so >= 0) {
            char num[64];
            size_t len = (size_t) (g[1].rm_eo - g[1].rm_so);
            if (len < sizeof num) {
                memcpy (num, p + g[1].rm_so, len);
                num[len] = 0;
                double v;
                if (cgq_parse_double (num, &v) == 0 && isfinite (v)) {
                    found++;
                    if (out_last)
                        *out_last = v * scale;
                    else if (warm)
                        s_push (&m->warm, &m->nwarm, &m->capwarm, v * scale);
                    else
                        s_push (&m->samples, &m->n, &m->cap, v * scale);
                }
            }
        }
        if (g[0].rm_eo == 0)
            p++; // an empty match: step over it
        else
            p += g[0].rm_eo;
    }
    return found;
}

// s_converged says whether the median's 95 % CI of the samples so far lies
// within ±precision of the median (a CI needs 6 samples).
static bool
s_converged (s_meas_t *m, double precision)
{
    cgq_stats_t s;
    if (cgq_stats_compute (m->samples, m->n, &s) < 0 || !s.ci_ok)
        return false;
    return s.ci_high - s.p50 <= precision * s.p50 && s.p50 - s.ci_low <= precision * s.p50;
}

static void
s_temp (s_meas_t *m, double c)
{
    if (!isnan (c) && (isnan (m->temp_max) || c > m->temp_max))
        m->temp_max = c;
}

// s_interfered judges a timed phase between the samples a and b and writes
// the interference metrics. Returns true when the phase is to be timed again
// (its samples dropped): interfered, reruns left, max_time not reached.
static bool
s_interfered (s_meas_t *m, const cgq_interf_sample_t *a, const cgq_interf_sample_t *b,
              uint32_t *reruns)
{
    const cgq_runcfg_bench_t *bench = m->bench;
    s_temp (m, a->temp_c_max);
    s_temp (m, b->temp_c_max);
    double busy;
    char why[200];
    bool bad = cgq_interf_judge (a, b, bench->max_busy, &busy, why, sizeof why);
    json_object_set_new (m->metrics, "interference_busy", json_real (busy));
    json_object_set_new (m->metrics, "interference_own_s", json_real (b->child_s - a->child_s));
    if (!json_object_get (m->metrics, "interference_own")) // a board's: s_command_runs
        json_object_set_new (m->metrics, "interference_own", json_string ("rusage"));
    double steal = cgq_interf_steal (a, b);
    if (steal >= 0)
        json_object_set_new (m->metrics, "steal", json_real (steal));
    json_object_set_new (m->metrics, "interference_window_s",
                         json_real (a->ok && b->ok ? b->total_s - a->total_s : 0));
    json_object_set_new (m->metrics, "interference", json_boolean (bad));
    json_object_del (m->metrics, "interference_reason");
    bool again = false;
    if (bad) {
        json_object_set_new (m->metrics, "interference_reason", json_string (why));
        again = *reruns < bench->interference_reruns && !m->max_time_hit;
        cgq_warn ("benchmark %s on %s: measured under interference: %s%s", bench->name,
                  m->req->device, why, again ? "; timing again" : "");
        if (again) {
            ++*reruns;
            m->n = 0; // the interfered samples are dropped
        }
    }
    json_object_set_new (m->metrics, "interference_reruns", json_integer (*reruns));
    return again;
}

// s_board_run runs one shell command on device d's board (d's env and the
// pairs of env exported; NULL: none) and keeps its output in *out (caller:
// cgq_invoke_fini). Returns 0 on exit status 0, else -1.
static int
s_board_run (const cgq_runcfg_device_t *d, const char *workdir, const s_env_t *env,
             const char *command, cgq_invoke_t *out)
{
    const cgq_transport_t *tr = &d->transport;
    char *rcmd = env ? cgq_transport_remote_command (tr, env->keys, env->vals, env->n, command,
                                                     false)
                     : cgq_transport_remote_command (tr, d->env.keys, d->env.vals, d->env.n,
                                                     command, false);
    char **argv = cgq_transport_argv (tr, d->id, workdir, rcmd);
    free (rcmd);
    cgq_invoke_opts_t o = {
        .argv = argv,
        .cwd = workdir,
        .timeout_s = tr->connect_timeout_s + 30,
    };
    int rc = cgq_invoke_run (&o, out);
    cgq_transport_argv_free (argv);
    return rc;
}

// s_board_sample samples a board's load, CPU frequencies and thermal zones
// through its transport with one remote command (interfere.h). own_s: the
// CPU time the benchmark is taken to have used since the previous sample.
// Returns 0, or -1 when the board did not answer (the runs then fail on
// their own with the transport's error).
static int
s_board_sample (s_meas_t *m, double own_s, cgq_interf_sample_t *out)
{
    cgq_invoke_t run;
    int rc = s_board_run (m->dev, m->req->workdir, m->env, CGQ_INTERF_REMOTE_COMMAND, &run);
    if (rc == 0)
        rc = cgq_interf_parse_remote (run.output.data ? run.output.data : "", NULL, own_s, out);
    cgq_invoke_fini (&run);
    if (rc < 0)
        memset (out, 0, sizeof *out);
    return rc;
}

// s_board_hz is the board's clock ticks per second (/proc's USER_HZ): 100
// on every Linux, as here.
static double
s_board_hz (void)
{
    double hz = (double) sysconf (_SC_CLK_TCK);
    return hz > 0 ? hz : 100;
}

// s_board_line finds the line of output that starts with mark; its rest is
// copied to buf (NULL: only whether it is there).
static bool
s_board_line (const cgq_invoke_t *run, const char *mark, char *buf, size_t len)
{
    const char *text = run->output.data ? run->output.data : "";
    size_t ml = strlen (mark);
    for (const char *p = text; p && *p; p = strchr (p, '\n') ? strchr (p, '\n') + 1 : NULL)
        if (!strncmp (p, mark, ml)) {
            if (buf) {
                size_t n = strcspn (p + ml, "\n");
                snprintf (buf, len, "%.*s", (int) n, p + ml);
            }
            return true;
        }
    return false;
}

// s_samples_s is the sum of the timed samples so far, in seconds.
static double
s_samples_s (const s_meas_t *m)
{
    double t = 0;
    for (size_t i = 0; i < m->n; i++)
        t += m->samples[i] / 1e3;
    return t;
}

// s_transport_command is the benchmark's command as one shell line for the
// board: the string form as rendered (already quoted), the list form quoted.
static char *
s_transport_command (const char *line, char **argv, size_t argc)
{
    if (line)
        return cgq_xstrdup (line);
    cgq_buf_t b;
    cgq_buf_init (&b);
    for (size_t i = 0; i < argc; i++) {
        if (i)
            cgq_buf_append (&b, " ", 1);
        cgq_buf_append (&b, "'", 1);
        for (const char *p = argv[i]; *p; p++)
            if (*p == '\'')
                cgq_buf_append (&b, "'\\''", 4);
            else
                cgq_buf_append (&b, p, 1);
        cgq_buf_append (&b, "'", 1);
    }
    cgq_buf_append (&b, "", 1);
    return b.data;
}

// s_command_runs does the warm-up and timed runs of a command benchmark.
static cgq_measure_status_t
s_command_runs (s_meas_t *m, char **envp, uint32_t warmup, uint32_t repeats, char *err,
                size_t errlen)
{
    const cgq_runcfg_bench_t *b = m->bench;
    const cgq_measure_req_t *r = m->req;
    json_t *vars = s_vars (m->params, r->device, b->name, m->artifact_path);
    char **argv = NULL;
    size_t argc = 0;
    char *line = NULL;
    if (b->command) {
        line = s_render (b->command, vars, r->job, r->trial, 1, err, errlen);
        if (line) {
            argv = cgq_xcalloc (4, sizeof *argv);
            argv[0] = cgq_xstrdup ("/bin/sh");
            argv[1] = cgq_xstrdup ("-c");
            argv[2] = line;
            argc = 3;
        }
    } else {
        argv = cgq_xcalloc (b->argc + 1, sizeof *argv);
        for (argc = 0; argc < b->argc; argc++)
            if (!(argv[argc] = s_render (b->argv[argc], vars, r->job, r->trial, 0, err, errlen)))
                break;
        if (argc < b->argc) {
            for (size_t i = 0; i < argc; i++)
                free (argv[i]);
            free (argv);
            argv = NULL;
        }
    }
    json_decref (vars);
    if (!argv)
        return CGQ_MEASURE_BAD;
    // transport.c: the command runs on the board, timed there.
    const cgq_transport_t *tr = &m->dev->transport;
    bool remote = tr->kind != CGQ_TRANSPORT_LOCAL;
    if (remote) {
        char *cmd = s_transport_command (line, argv, argc);
        if (b->pin) { // the benchmark's cpus, on the board: taskset there (toybox, busybox)
            char *q = s_transport_command (NULL, &cmd, 1);
            char *pinned = cgq_xasprintf ("taskset -c %s sh -c %s", b->cpus_text, q);
            free (q);
            free (cmd);
            cmd = pinned;
        }
        char *rcmd = cgq_transport_remote_command (
            tr, m->env->keys, m->env->vals, m->env->n, cmd,
            (b->timing == CGQ_TIMING_PER_RUN ? CGQ_TRANSPORT_TIMED : 0) | CGQ_TRANSPORT_CPU);
        free (cmd);
        for (size_t i = 0; i < argc; i++)
            free (argv[i]);
        free (argv);
        argv = cgq_transport_argv (tr, m->dev->id, r->workdir, rcmd);
        free (rcmd);
        for (argc = 0; argv[argc]; argc++)
            ;
    }
    cgq_invoke_opts_t o = {
        .argv = argv,
        .envp = envp,
        .cwd = r->workdir,
        .cpus = b->pin && !remote ? &b->cpus : NULL,
        .timeout_s = b->timeout_s,
        .output_cap = b->timing == CGQ_TIMING_PARSE ? S_PARSE_CAP : 0,
    };
    cgq_measure_status_t st = CGQ_MEASURE_OK;
    double start = s_now_s ();
    uint32_t runs = 0;
    cgq_interf_sample_t before = {0};
    uint32_t reruns = 0;
    double board_cpu_s = 0; // the board's account of the timed runs' CPU time
    bool board_cpu = true;  // every timed run gave it
    for (uint32_t phase = 0; phase < 2 && st == CGQ_MEASURE_OK; phase++) {
        bool warm = phase == 0;
        if (!warm && b->pin && tr->kind == CGQ_TRANSPORT_LOCAL) // a board's /proc/stat is not ours
            cgq_interf_sample (&b->cpus, &before);
        else if (!warm && remote) // the board's own, through the transport
            s_board_sample (m, 0, &before);
        board_cpu_s = 0;
        board_cpu = true;
        double phase_start = s_now_s ();
        for (uint32_t i = 0;; i++) {
            double now = s_now_s ();
            if (warm && i >= warmup && now - phase_start >= b->warmup_min_s)
                break;
            if (!warm && i >= repeats && now - phase_start >= b->min_time_s &&
                (b->precision <= 0 || s_converged (m, b->precision) || m->n >= b->max_runs))
                break;
            if (b->max_time_s > 0 && now - start >= b->max_time_s && (!warm || i > 0)) {
                m->max_time_hit = true;
                break;
            }
            cgq_invoke_t out;
            int rc = cgq_invoke_run (&o, &out);
            runs++;
            if (remote) { // the board's CPU account (transport.h), stripped before
                          // the output is parsed or quoted in an error
                double cpu_s;
                if (out.output.data
                    && cgq_transport_board_cpu_s (out.output.data, out.output.len,
                                                  s_board_hz (), &cpu_s) == 0)
                    board_cpu_s += cpu_s;
                else
                    board_cpu = false;
                if (out.output.data)
                    cgq_transport_strip_marks (out.output.data, &out.output.len);
            }
            if (rc < 0) {
                if (remote && out.output.data)
                    cgq_transport_strip_timer (out.output.data, &out.output.len);
                char how[400];
                cgq_invoke_describe (&out, b->timeout_s, how, sizeof how);
                snprintf (err, errlen, "benchmark %s on %s: %s run %u: %s", b->name, r->device,
                          warm ? "warm-up" : "timed", i + 1, how);
                st = out.end == CGQ_INVOKE_TIMEOUT ? CGQ_MEASURE_TIMEOUT : CGQ_MEASURE_FAILED;
                cgq_invoke_fini (&out);
                break;
            }
            if (remote && b->timing == CGQ_TIMING_PER_RUN
                && cgq_transport_board_ms (out.output.data ? out.output.data : "", out.output.len,
                                           &out.elapsed_ms) < 0) {
                snprintf (err, errlen, "benchmark %s on %s: run %u: the board's timer printed no "
                                       "'" CGQ_TRANSPORT_TIMER_MARK "' line (does the board's "
                                       "date know +%%s%%N?)",
                          b->name, r->device, i + 1);
                st = CGQ_MEASURE_FAILED;
                cgq_invoke_fini (&out);
                break;
            }
            if (!remote && out.maxrss_kb > m->peak_rss_kb) // remote: the client's, not the board's
                m->peak_rss_kb = out.maxrss_kb;
            if (b->timing == CGQ_TIMING_PER_RUN) {
                if (warm)
                    s_push (&m->warm, &m->nwarm, &m->capwarm, out.elapsed_ms);
                else
                    s_push (&m->samples, &m->n, &m->cap, out.elapsed_ms);
            } else {
                const char *text = out.output.data ? out.output.data : "";
                if (s_match_all (&b->time_re, text, b->time_scale, m, warm, NULL) == 0) {
                    snprintf (err, errlen, "benchmark %s on %s: run %u printed no match of "
                                           "parse.time '%s'",
                              b->name, r->device, i + 1, b->time_re_text);
                    st = CGQ_MEASURE_FAILED;
                    cgq_invoke_fini (&out);
                    break;
                }
                double mem = 0;
                if (b->memory_re_text
                    && s_match_all (&b->memory_re, text, b->memory_scale, m, warm, &mem) > 0
                    && mem > m->peak_reported_kb)
                    m->peak_reported_kb = mem;
            }
            cgq_invoke_fini (&out);
        }
        if (!warm && before.ok && st == CGQ_MEASURE_OK) {
            // Interference: what others did on the pinned CPUs (a board's
            // CPUs) while timed.
            cgq_interf_sample_t after;
            if (remote) {
                // The runs' own CPU time: the board's account when every
                // run gave it, else their wall time as one busy CPU.
                s_board_sample (m, board_cpu ? board_cpu_s : s_samples_s (m), &after);
                json_object_set_new (m->metrics, "interference_own",
                                     json_string (board_cpu ? "board" : "wall"));
            } else
                cgq_interf_sample (&b->cpus, &after);
            if (s_interfered (m, &before, &after, &reruns))
                phase = 0; // the timed phase once more (phase++)
        }
    }
    for (size_t i = 0; i < argc; i++)
        free (argv[i]);
    free (argv);
    json_object_set_new (m->metrics, "invocations", json_integer (runs));
    return st;
}

static int
s_param_int (const json_t *params, const char *name, long long def, long long *out)
{
    json_t *v = json_object_get (params, name);
    if (!v) {
        *out = def;
        return 0;
    }
    if (json_is_integer (v)) {
        *out = json_integer_value (v);
        return 0;
    }
    if (json_is_real (v) && json_real_value (v) == floor (json_real_value (v))) {
        *out = (long long) json_real_value (v);
        return 0;
    }
    uint64_t u;
    if (json_is_string (v) && cgq_parse_u64 (json_string_value (v), &u) == 0) {
        *out = (long long) u;
        return 0;
    }
    return -1;
}

// s_cpu_local times a CG model with the cg/ engine in this process: the
// model from the artifact (a model.json) or generated from the params
// family, seed and resolution.
static cgq_measure_status_t
s_cpu_local (s_meas_t *m, uint32_t warmup, uint32_t repeats, char *err, size_t errlen)
{
    const cgq_runcfg_bench_t *b = m->bench;
    char why[512] = "";
    cgq_cg_graph_t *g = NULL;
    double t0 = s_now_s ();
    if (m->artifact_path) {
        g = cgq_cg_graph_load (m->artifact_path, why, sizeof why);
        if (!g) {
            snprintf (err, errlen, "cpu-local: the artifact is not a CG model: %s", why);
            return CGQ_MEASURE_BAD;
        }
    } else {
        cgq_cg_gen_opts_t go;
        cgq_cg_gen_opts_default (&go);
        json_t *fam = json_object_get (m->params, "family");
        if (fam && (!json_is_string (fam)
                    || cgq_cg_family_parse (json_string_value (fam), &go.family) < 0)) {
            snprintf (err, errlen, "cpu-local: param family must be one of: %s",
                      cgq_cg_family_list ());
            return CGQ_MEASURE_BAD;
        }
        long long seed, res;
        if (s_param_int (m->params, "seed", 0, &seed) < 0 || seed < 0
            || s_param_int (m->params, "resolution", 0, &res) < 0 || res < 0 || res > 1024) {
            snprintf (err, errlen, "cpu-local: params seed and resolution must be whole numbers "
                                   "(resolution 32..1024, or 0 to draw one)");
            return CGQ_MEASURE_BAD;
        }
        go.seed = (uint64_t) seed;
        go.resolution = (int) res;
        g = cgq_cg_gen (&go, why, sizeof why);
        if (!g) {
            snprintf (err, errlen, "cpu-local: %s", why);
            return CGQ_MEASURE_BAD;
        }
    }
    long long threads;
    if (s_param_int (m->params, "threads", 1, &threads) < 0 || threads < 1 || threads > 256) {
        cgq_cg_graph_destroy (&g);
        snprintf (err, errlen, "cpu-local: param threads must be 1..256");
        return CGQ_MEASURE_BAD;
    }
    if (b->pin && sched_setaffinity (0, sizeof b->cpus, &b->cpus) < 0)
        cgq_warn ("cpu-local: cannot pin to cpus %s: %s", b->cpus_text, strerror (errno));
    cgq_cg_engine_opts_t eo;
    cgq_cg_engine_opts_default (&eo);
    eo.threads = (int) threads;
    double t1 = s_now_s ();
    cgq_cg_engine_t *e = cgq_cg_engine_new (g, &eo, why, sizeof why);
    double init_ms = (s_now_s () - t1) * 1e3;
    if (!e) {
        snprintf (err, errlen, "cpu-local: %s", why);
        cgq_cg_graph_destroy (&g);
        return CGQ_MEASURE_BAD;
    }
    json_object_set_new (m->metrics, "model", json_string (cgq_cg_graph_name (g)));
    json_object_set_new (m->metrics, "flops", json_integer (cgq_cg_graph_flops (g)));
    json_object_set_new (m->metrics, "model_params", json_integer (cgq_cg_graph_params (g)));
    json_object_set_new (m->metrics, "engine_bytes",
                         json_integer ((json_int_t) cgq_cg_engine_bytes (e)));
    json_object_set_new (m->metrics, "load_ms", json_real ((t1 - t0) * 1e3));
    json_object_set_new (m->metrics, "init_ms", json_real (init_ms));
    // Param per_op: true also times each node of every timed run (cg/engine.h;
    // the clock reads are in the runs' times); metric node_ms is the array of
    // each node's median, in node order (docs/predictor.md).
    json_t *po = json_object_get (m->params, "per_op");
    bool per_op = json_is_true (po) || (json_is_string (po) && !strcmp (json_string_value (po), "true"))
                  || (json_is_integer (po) && json_integer_value (po) == 1);
    if (per_op)
        cgq_cg_engine_op_timing (e, (int) (b->max_runs > repeats ? b->max_runs : repeats) + 1);
    double start = s_now_s ();
    cgq_interf_sample_t before = {0};
    uint32_t reruns = 0;
    for (uint32_t phase = 0; phase < 2; phase++) {
        bool warm = phase == 0;
        if (!warm && b->pin) // its own time is this process's (RUSAGE_SELF)
            cgq_interf_sample_self (&b->cpus, &before);
        double phase_start = s_now_s ();
        if (per_op)
            cgq_cg_engine_op_reset (e); // the warm-ups are not kept
        for (uint32_t i = 0;; i++) {
            double now = s_now_s ();
            if (warm && i >= warmup && now - phase_start >= b->warmup_min_s)
                break;
            if (!warm && i >= repeats && now - phase_start >= b->min_time_s &&
                (b->precision <= 0 || s_converged (m, b->precision) || m->n >= b->max_runs))
                break;
            if (b->max_time_s > 0 && now - start >= b->max_time_s && (!warm || i > 0)) {
                m->max_time_hit = true;
                break;
            }
            double a = s_now_s ();
            cgq_cg_engine_run (e);
            double ms = (s_now_s () - a) * 1e3;
            if (warm)
                s_push (&m->warm, &m->nwarm, &m->capwarm, ms);
            else
                s_push (&m->samples, &m->n, &m->cap, ms);
        }
        if (!warm && before.ok) {
            cgq_interf_sample_t after;
            cgq_interf_sample_self (&b->cpus, &after);
            if (s_interfered (m, &before, &after, &reruns))
                phase = 0; // the timed phase once more (phase++)
        }
    }
    if (per_op) {
        int nn = cgq_cg_engine_nodes (e);
        double *node = cgq_xcalloc ((size_t) nn, sizeof (double));
        cgq_cg_engine_op_medians (e, node);
        json_t *arr = json_array ();
        for (int i = 0; i < nn; i++)
            json_array_append_new (arr, json_real (node[i]));
        json_object_set_new (m->metrics, "node_ms", arr);
        free (node);
    }
    struct rusage ru;
    getrusage (RUSAGE_SELF, &ru);
    m->peak_rss_kb = ru.ru_maxrss;
    cgq_cg_engine_destroy (&e);
    cgq_cg_graph_destroy (&g);
    return CGQ_MEASURE_OK;
}

static void
s_device_json (s_meas_t *m)
{
    json_object_set_new (m->metrics, "device", json_string (m->dev ? m->dev->id : m->req->device));
    json_t *tags = json_object ();
    for (size_t i = 0; m->dev && i < m->dev->tags.n; i++)
        json_object_set_new (tags, m->dev->tags.keys[i], json_string (m->dev->tags.vals[i]));
    json_object_set_new (m->metrics, "tags", tags);
    json_object_set_new (m->metrics, "benchmark", json_string (m->req->benchmark ? m->req->benchmark : ""));
}

static void
s_finish (s_meas_t *m, cgq_measure_status_t st)
{
    json_t *o = m->metrics;
    if (m->n > 0) {
        cgq_stats_t s;
        cgq_stats_compute (m->samples, m->n, &s);
        cgq_stats_to_json (&s, m->samples, m->n, m->bench ? m->bench->max_samples : 0, "_ms",
                           "samples_ms", o);
        if (st == CGQ_MEASURE_OK)
            json_object_set_new (o, "time", json_real (s.p50));
    }
    if (m->nwarm > 0) {
        json_t *w = json_array ();
        for (size_t i = 0; i < m->nwarm && i < 100; i++)
            json_array_append_new (w, json_real (m->warm[i]));
        json_object_set_new (o, "warmup_ms", w);
    }
    json_object_set_new (o, "warmup_runs", json_integer ((json_int_t) m->nwarm));
    double mem = m->peak_reported_kb > 0 ? m->peak_reported_kb : (double) m->peak_rss_kb;
    if (m->peak_rss_kb > 0)
        json_object_set_new (o, "peak_rss_kb", json_integer (m->peak_rss_kb));
    if (m->peak_reported_kb > 0)
        json_object_set_new (o, "reported_memory_kb", json_real (m->peak_reported_kb));
    if (st == CGQ_MEASURE_OK && mem > 0)
        json_object_set_new (o, "memory", json_real (mem));
    if (m->max_time_hit)
        json_object_set_new (o, "max_time_reached", json_true ());
    if (!isnan (m->temp_max))
        json_object_set_new (o, "temp_c_max", json_real (m->temp_max));
    if (m->bench && m->bench->precision > 0) {
        json_object_set_new (o, "precision", json_real (m->bench->precision));
        json_object_set_new (o, "converged",
                             json_boolean (m->n > 0 && s_converged (m, m->bench->precision)));
    }
}

int
cgq_measure_restore_pinned (const cgq_runcfg_device_t *d, const char *workdir)
{
    if (d->transport.kind != CGQ_TRANSPORT_LOCAL) { // boardsys.c, on the board
        // Only a board that a measurement pinned and did not restore (its
        // marker here) costs a round trip: an offline board must not slow
        // the runner's start by its connect timeout.
        char marker[4096];
        cgq_sysfs_save_path (workdir, d->id, marker, sizeof marker);
        if (access (marker, F_OK) < 0)
            return 0;
        cgq_invoke_t run;
        char how[400];
        int rc = s_board_run (d, workdir, NULL, cgq_boardsys_restore_command (), &run);
        bool restored = rc == 0 && s_board_line (&run, CGQ_BOARDSYS_RESTORED, NULL, 0);
        if (rc < 0)
            cgq_warn ("device %s: cannot look for cpufreq settings a killed measurement left "
                      "pinned on the board: %s (the next measurement that pins restores them)",
                      d->id, cgq_invoke_describe (&run, 0, how, sizeof how));
        else if (restored)
            cgq_warn ("device %s: restored the cpufreq settings that a killed measurement had "
                      "pinned on the board",
                      d->id);
        if (rc == 0)
            unlink (marker);
        cgq_invoke_fini (&run);
        return rc < 0 ? -1 : restored;
    }
    char saved[4096], why[512];
    cgq_sysfs_save_path (workdir, d->id, saved, sizeof saved);
    int rc = cgq_sysfs_restore (saved, why, sizeof why);
    if (rc > 0)
        cgq_warn ("device %s: restored the cpufreq settings that a killed measurement had "
                  "pinned (from %s)",
                  d->id, saved);
    else if (rc < 0)
        cgq_error ("device %s: cannot restore the cpufreq settings a killed measurement left "
                   "in %s: %s",
                   d->id, saved, why);
    return rc;
}

// s_measure_opts applies the stage's measure: (req->measure_json) to a
// copy of the benchmark, which m->bench then points at, and refuses what
// this device cannot honour. On a local device it first restores cpufreq
// settings that a killed measurement left pinned (saved: their file).
static int
s_measure_opts (s_meas_t *m, cgq_runcfg_bench_t *eb, cgq_measure_opts_t *mo, char *saved,
                size_t savedlen, char *err, size_t errlen)
{
    const cgq_measure_req_t *r = m->req;
    *eb = *m->bench;
    if (cgq_measure_opts_parse (r->measure_json, eb, mo, err, errlen) < 0)
        return -1;
    m->bench = eb;
    const cgq_transport_t *tr = &m->dev->transport;
    cgq_sysfs_save_path (r->workdir, m->dev->id, saved, savedlen); // a board's: a marker
    if (tr->kind != CGQ_TRANSPORT_LOCAL)
        return 0; // a board: s_settle_board
    char why[512];
    int rc = cgq_sysfs_restore (saved, why, sizeof why);
    if (rc > 0) {
        cgq_warn ("device %s: restored the cpufreq settings that a killed measurement had "
                  "pinned (from %s)",
                  m->dev->id, saved);
        json_object_set_new (m->metrics, "cpufreq_restored", json_true ());
    }
    else if (rc < 0) {
        snprintf (err, errlen, "device %s: cannot restore the cpufreq settings a killed "
                               "measurement left in %s: %s",
                  m->dev->id, saved, why);
        return -1;
    }
    return 0;
}

// s_settle_board is s_settle on a board, through its transport: the
// cooldown polls the board's thermal zones once a second, the pinning runs
// boardsys.c's commands there. Returns OK, BAD (the board cannot) or FAILED
// (the transport's error).
static cgq_measure_status_t
s_settle_board (s_meas_t *m, const cgq_measure_opts_t *mo, const char *marker, bool *pinned,
                char *err, size_t errlen)
{
    if (mo->below_c > 0) {
        double t0 = s_now_s (), waited = 0;
        cgq_interf_sample_t smp;
        for (;;) {
            if (s_board_sample (m, 0, &smp) < 0) {
                snprintf (err, errlen, "device %s: the board did not answer the cooldown's "
                                       "temperature reading",
                          m->dev->id);
                return CGQ_MEASURE_FAILED;
            }
            if (isnan (smp.temp_c_max)) {
                snprintf (err, errlen, "cooldown is not supported on this device: no thermal "
                                       "zones on the board (remove measure.cooldown)");
                return CGQ_MEASURE_BAD;
            }
            waited = s_now_s () - t0;
            if (smp.temp_c_max < mo->below_c || waited >= mo->max_wait_s)
                break;
            s_sleep (1);
        }
        s_temp (m, smp.temp_c_max);
        json_object_set_new (m->metrics, "waited_s", json_real (waited));
        json_object_set_new (m->metrics, "cooldown_below_c", json_real (mo->below_c));
        json_object_set_new (m->metrics, "cooldown_reached",
                             json_boolean (smp.temp_c_max < mo->below_c));
        json_object_set_new (m->metrics, "temp_c_start", json_real (smp.temp_c_max));
    }
    if (!mo->governor[0] && !mo->khz)
        return CGQ_MEASURE_OK;
    // The marker first: a kill between the board's writes and our return
    // must still leave the runner's start a reason to look.
    FILE *f = fopen (marker, "w");
    if (f) {
        fputs ("board\n", f);
        fclose (f);
    }
    char *cmd = cgq_boardsys_pin_command (mo->governor, mo->khz);
    cgq_invoke_t run;
    int rc = s_board_run (m->dev, m->req->workdir, m->env, cmd, &run);
    free (cmd);
    char why[512];
    cgq_measure_status_t st = CGQ_MEASURE_OK;
    if (s_board_line (&run, CGQ_BOARDSYS_RESTORED, NULL, 0))
        json_object_set_new (m->metrics, "cpufreq_restored", json_true ());
    if (rc < 0 && s_board_line (&run, CGQ_BOARDSYS_ERROR, why, sizeof why)) {
        snprintf (err, errlen, "device %s: %s", m->dev->id, why);
        st = CGQ_MEASURE_BAD;
        unlink (marker); // refused with nothing changed, or changed and put back
    }
    else if (rc < 0) {
        snprintf (err, errlen, "device %s: pinning cpufreq on the board: %s", m->dev->id,
                  cgq_invoke_describe (&run, 0, why, sizeof why));
        st = CGQ_MEASURE_FAILED;
    }
    else {
        *pinned = true;
        if (mo->governor[0])
            json_object_set_new (m->metrics, "governor", json_string (mo->governor));
        if (mo->khz)
            json_object_set_new (m->metrics, "frequency_khz", json_integer ((json_int_t) mo->khz));
    }
    cgq_invoke_fini (&run);
    return st;
}

// s_settle prepares a local device just before its runs: waits for the
// thermal cooldown, pins the governor/frequency (*pinned: restore after).
static int
s_settle (s_meas_t *m, const cgq_measure_opts_t *mo, const char *saved, bool *pinned,
          int *lock_fd, char *err, size_t errlen)
{
    if (m->dev->transport.kind != CGQ_TRANSPORT_LOCAL)
        return 0;
    const cgq_runcfg_bench_t *b = m->bench;
    double c;
    if (mo->below_c > 0) {
        double waited;
        int rc = cgq_sysfs_cooldown (mo->below_c, mo->max_wait_s, &waited, &c, err, errlen);
        if (rc < 0)
            return -1;
        json_object_set_new (m->metrics, "waited_s", json_real (waited));
        json_object_set_new (m->metrics, "cooldown_below_c", json_real (mo->below_c));
        if (rc > 0) {
            json_object_set_new (m->metrics, "cooldown_reached", json_false ());
            cgq_warn ("device %s: still %.1f °C after waiting %.1f s to cool below %.1f °C; "
                      "measuring anyway",
                      m->dev->id, c, waited, mo->below_c);
        }
        else
            json_object_set_new (m->metrics, "cooldown_reached", json_true ());
    }
    if (cgq_sysfs_temp_max (&c) == 0) {
        json_object_set_new (m->metrics, "temp_c_start", json_real (c));
        s_temp (m, c);
    }
    if (mo->governor[0] || mo->khz) {
        // Local devices that pin take turns (WORKDIR/cpufreq.lock, held
        // until restored): one that saved another's pinned values as the
        // originals would put them back after it. A kill releases it.
        char lock[4096];
        snprintf (lock, sizeof lock, "%s/cpufreq.lock", m->req->workdir ? m->req->workdir : ".");
        *lock_fd = open (lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (*lock_fd < 0 || flock (*lock_fd, LOCK_EX) < 0) {
            snprintf (err, errlen, "cannot lock %s: %s", lock, strerror (errno));
            return -1;
        }
        if (cgq_sysfs_pin (b->pin ? &b->cpus : NULL, mo->governor[0] ? mo->governor : NULL,
                           mo->khz, saved, err, errlen)
            < 0)
            return -1;
        *pinned = true;
        if (mo->governor[0])
            json_object_set_new (m->metrics, "governor", json_string (mo->governor));
        if (mo->khz)
            json_object_set_new (m->metrics, "frequency_khz", json_integer ((json_int_t) mo->khz));
    }
    return 0;
}

cgq_measure_status_t
cgq_measure_run (const cgq_measure_req_t *r, char **metrics_json, char *err, size_t errlen)
{
    s_meas_t m;
    memset (&m, 0, sizeof m);
    m.req = r;
    m.temp_max = NAN;
    cgq_runcfg_bench_t eb; // the benchmark with the stage's measure: applied
    cgq_measure_opts_t mo;
    memset (&mo, 0, sizeof mo);
    char saved[4096] = ""; // the cpufreq settings pinning changed (sysfs.c)
    bool pinned = false, board_pinned = false; // board_pinned: boardsys.c's, on the board
    int lock_fd = -1;                          // WORKDIR/cpufreq.lock while pinned
    m.metrics = json_object ();
    err[0] = 0;
    json_object_set_new (m.metrics, "started", json_real (cgq_wall_s ()));
    cgq_measure_status_t st = CGQ_MEASURE_OK;
    s_env_t env = {0};
    char **envp = NULL;
    const cgq_runcfg_t *cfg = r->cfg;
    m.dev = cgq_runcfg_device (cfg, r->device);
    m.bench = cgq_runcfg_bench (cfg, r->benchmark);
    s_device_json (&m);
    if (!m.dev) {
        snprintf (err, errlen, "device '%s' is not one of this runner's", r->device ? r->device : "");
        st = CGQ_MEASURE_BAD;
        goto done;
    }
    if (!m.bench) {
        char *names = cgq_runcfg_bench_names (cfg);
        snprintf (err, errlen, "unknown benchmark '%s' (this runner has: %s; a runner runs only "
                               "the benchmarks of its own config)",
                  r->benchmark ? r->benchmark : "", names);
        free (names);
        st = CGQ_MEASURE_BAD;
        goto done;
    }
    m.params = r->params_json && *r->params_json ? json_loads (r->params_json, 0, NULL)
                                                  : json_object ();
    if (!json_is_object (m.params)) {
        snprintf (err, errlen, "the params are not a JSON object");
        st = CGQ_MEASURE_BAD;
        goto done;
    }
    if (s_measure_opts (&m, &eb, &mo, saved, sizeof saved, err, errlen) < 0) {
        st = CGQ_MEASURE_BAD;
        goto done;
    }
    // The device's own variables, then CGQ_DEVICE_ID; the benchmark's env
    // (rendered) comes later, once the artifact's path is known.
    for (size_t i = 0; i < m.dev->env.n; i++)
        s_env_add (&env, cgq_xstrdup (m.dev->env.keys[i]), cgq_xstrdup (m.dev->env.vals[i]));
    s_env_add (&env, cgq_xstrdup ("CGQ_DEVICE_ID"), cgq_xstrdup (m.dev->id));
    // The trial's (or stage's) env, rendered by the coordinator (Assign.env).
    for (size_t i = 0; i < r->nenv; i++)
        s_env_add (&env, cgq_xstrdup (r->env_keys[i]), cgq_xstrdup (r->env_vals[i]));
    envp = cgq_invoke_env (env.keys, env.vals, env.n);
    m.env = &env;
    const cgq_transport_t *tr = &m.dev->transport; // transport.c
    if (tr->kind != CGQ_TRANSPORT_LOCAL)
        json_object_set_new (m.metrics, "transport", json_string (cgq_transport_kind_name (tr->kind)));
    if (tr->kind != CGQ_TRANSPORT_LOCAL && m.bench->timing == CGQ_TIMING_BUILTIN) {
        snprintf (err, errlen, "device %s: benchmark %s runs inside the runner and cannot run over "
                               "transport %s (use a command benchmark)",
                  m.dev->id, m.bench->name, cgq_transport_kind_name (tr->kind));
        st = CGQ_MEASURE_BAD;
        goto done;
    }
    if (m.dev->check) {
        char why[512];
        if ((tr->kind == CGQ_TRANSPORT_LOCAL
                 ? cgq_invoke_shell (m.dev->check, envp, m.bench->timeout_s, why, sizeof why)
                 : cgq_transport_shell (tr, m.dev->id, r->workdir, env.keys, env.vals, env.n,
                                        m.dev->check, m.bench->timeout_s, why, sizeof why))
            < 0) {
            snprintf (err, errlen, "device %s: check '%s' failed: %s", m.dev->id, m.dev->check,
                      why);
            st = CGQ_MEASURE_FAILED;
            goto done;
        }
    }
    if (r->artifact_url && *r->artifact_url) {
        cgq_artifact_opts_t ao = {
            .dir = cfg->cache_dir,
            .max_bytes = cfg->cache_max,
            .max_artifact = r->max_artifact ? r->max_artifact : cfg->max_artifact,
            .connect_timeout_s = cfg->connect_timeout_s,
            .transfer_timeout_s = cfg->transfer_timeout_s,
            .retries = cfg->retries,
        };
        cgq_artifact_t a;
        if (cgq_artifact_get (&ao, r->artifact_url, r->artifact_sha256, &a, err, errlen) < 0) {
            st = CGQ_MEASURE_BAD;
            goto done;
        }
        m.artifact_path = a.path;
        a.path = NULL;
        json_object_set_new (m.metrics, "artifact_sha256", json_string (a.sha256));
        json_object_set_new (m.metrics, "artifact_cached", json_boolean (a.hit));
        json_object_set_new (m.metrics, "artifact_fetch_ms", json_real (a.fetch_s * 1e3));
        if (tr->kind != CGQ_TRANSPORT_LOCAL) {
            // transport.c: into the board's cache once; a drop here is the board's failure.
            char *remote = NULL;
            bool pushed = false;
            double t0 = s_now_s ();
            if (cgq_transport_push (tr, m.dev->id, r->workdir, m.artifact_path, a.sha256, &remote,
                                    &pushed, err, errlen) < 0) {
                cgq_artifact_fini (&a);
                st = CGQ_MEASURE_FAILED;
                goto done;
            }
            free (m.artifact_path);
            m.artifact_path = remote;
            json_object_set_new (m.metrics, "artifact_pushed", json_boolean (pushed));
            json_object_set_new (m.metrics, "artifact_push_ms", json_real ((s_now_s () - t0) * 1e3));
        }
        cgq_artifact_fini (&a);
    }
    uint32_t warmup = mo.warmup ? mo.warmup : r->warmup ? r->warmup : m.bench->warmup;
    uint32_t repeats = mo.repeats ? mo.repeats : r->repeats ? r->repeats : m.bench->repeats;
    if (s_settle (&m, &mo, saved, &pinned, &lock_fd, err, errlen) < 0) {
        st = CGQ_MEASURE_BAD;
        goto done;
    }
    if (tr->kind != CGQ_TRANSPORT_LOCAL
        && (st = s_settle_board (&m, &mo, saved, &board_pinned, err, errlen)) != CGQ_MEASURE_OK)
        goto done;
    if (m.bench->timing == CGQ_TIMING_BUILTIN)
        st = s_cpu_local (&m, warmup, repeats, err, errlen);
    else {
        json_t *vars = s_vars (m.params, m.dev->id, m.bench->name, m.artifact_path);
        size_t before = env.n;
        int rc = s_bench_env (m.bench, m.params, vars, r->job, r->trial, &env, err, errlen);
        json_decref (vars);
        if (rc < 0) {
            st = CGQ_MEASURE_BAD;
            goto done;
        }
        if (env.n > before) {
            cgq_invoke_env_free (envp);
            envp = cgq_invoke_env (env.keys, env.vals, env.n);
        }
        st = s_command_runs (&m, envp, warmup, repeats, err, errlen);
    }
    if (tr->kind == CGQ_TRANSPORT_LOCAL) {
        double c;
        if (cgq_sysfs_temp_max (&c) == 0)
            s_temp (&m, c);
    }
    if (st == CGQ_MEASURE_OK && m.n == 0) {
        snprintf (err, errlen, "benchmark %s on %s: no timed run fitted in max_time %gs",
                  m.bench->name, m.dev->id, m.bench->max_time_s);
        st = CGQ_MEASURE_FAILED;
    }
    if ((st == CGQ_MEASURE_FAILED || st == CGQ_MEASURE_TIMEOUT) && m.dev->reset) {
        char why[512];
        if ((tr->kind == CGQ_TRANSPORT_LOCAL
                 ? cgq_invoke_shell (m.dev->reset, envp, 0, why, sizeof why)
                 : cgq_transport_shell (tr, m.dev->id, r->workdir, env.keys, env.vals, env.n,
                                        m.dev->reset, tr->connect_timeout_s + 60, why, sizeof why))
            < 0)
            cgq_warn ("device %s: reset '%s' failed: %s", m.dev->id, m.dev->reset, why);
        else
            cgq_info ("device %s: reset after the %s measurement", m.dev->id,
                      cgq_measure_status_name (st));
    }
done:
    if (board_pinned) {
        cgq_invoke_t run;
        char how[400];
        if (s_board_run (m.dev, r->workdir, m.env, cgq_boardsys_restore_command (), &run) < 0) {
            cgq_invoke_describe (&run, 0, how, sizeof how);
            cgq_warn ("device %s: cannot restore the board's cpufreq settings: %s (the runner's "
                      "next start, or the next measurement that pins, does)",
                      r->device, how);
            json_object_set_new (m.metrics, "cpufreq_restore_error", json_string (how));
        }
        else
            unlink (saved); // the marker: nothing left to restore
        cgq_invoke_fini (&run);
    }
    if (pinned) {
        char why[512];
        if (cgq_sysfs_restore (saved, why, sizeof why) < 0) {
            cgq_warn ("device %s: cannot restore the cpufreq settings: %s (kept in %s; the next "
                      "measurement tries again)",
                      r->device, why, saved);
            json_object_set_new (m.metrics, "cpufreq_restore_error", json_string (why));
        }
    }
    if (lock_fd >= 0)
        close (lock_fd); // the next device may pin
    s_finish (&m, st);
    json_object_set_new (m.metrics, "finished", json_real (cgq_wall_s ()));
    if (m.bench && m.bench->cooldown_s > 0 && st != CGQ_MEASURE_BAD)
        s_sleep (m.bench->cooldown_s);
    *metrics_json = cgq_json_dumps (m.metrics);
    json_decref (m.metrics);
    json_decref (m.params);
    cgq_invoke_env_free (envp);
    s_env_fini (&env);
    free (m.samples);
    free (m.warm);
    free (m.artifact_path);
    return st;
}
