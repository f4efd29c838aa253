#include "device.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "invoke.h"
#include "log.h"
#include "result.h"
#include "util.h"
#include "wire.h"

#define S_OUTPUT_CAP (8u << 20) // the measuring process's JSON line, samples included

struct cgq_device_t {
    const cgq_runcfg_device_t *cfg;
    cgq_device_opts_t opts;
    Cgq__Device msg;
    Cgq__KeyValue *tags;
    Cgq__KeyValue **tag_ptrs;

    // The measurement in flight (pid 0: idle).
    Cgq__TaskRef *task;
    pid_t pid;
    int fd;
    cgq_buf_t out;
    int64_t started_ms;
    int64_t deadline_ms; // trial timeout; -1: none
    int64_t kill_ms;     // SIGKILL due; -1: none
    char *stop_reason;   // set: Stop or shutdown
    bool timed_out;      // the trial timeout fired
    uint32_t timeout_ms;
};

cgq_device_t *
cgq_device_new (const cgq_runcfg_device_t *cfg, const cgq_device_opts_t *opts)
{
    cgq_device_t *self = cgq_xcalloc (1, sizeof *self);
    self->cfg = cfg;
    self->opts = *opts;
    self->fd = -1;
    cgq_buf_init (&self->out);
    cgq__device__init (&self->msg);
    self->msg.id = cfg->id;
    self->tags = cgq_xcalloc (cfg->tags.n + 1, sizeof *self->tags);
    self->tag_ptrs = cgq_xcalloc (cfg->tags.n + 1, sizeof *self->tag_ptrs);
    for (size_t i = 0; i < cfg->tags.n; i++) {
        cgq__key_value__init (&self->tags[i]);
        self->tags[i].key = cfg->tags.keys[i];
        self->tags[i].value = cfg->tags.vals[i];
        self->tag_ptrs[i] = &self->tags[i];
    }
    self->msg.n_tags = cfg->tags.n;
    self->msg.tags = self->tag_ptrs;
    return self;
}

static void
s_reset (cgq_device_t *self)
{
    free (self->task);
    self->task = NULL;
    self->pid = 0;
    if (self->fd >= 0)
        close (self->fd);
    self->fd = -1;
    cgq_buf_reset (&self->out);
    free (self->stop_reason);
    self->stop_reason = NULL;
    self->timed_out = false;
    self->kill_ms = -1;
    self->deadline_ms = -1;
}

void
cgq_device_destroy (cgq_device_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cgq_device_t *self = *self_p;
    if (self->pid > 0) {
        kill (-self->pid, SIGKILL);
        waitpid (self->pid, NULL, 0);
    }
    s_reset (self);
    cgq_buf_fini (&self->out);
    free (self->tags);
    free (self->tag_ptrs);
    free (self);
    *self_p = NULL;
}

const char *
cgq_device_id (const cgq_device_t *self)
{
    return self->cfg->id;
}

Cgq__Device *
cgq_device_msg (cgq_device_t *self)
{
    return &self->msg;
}

const Cgq__TaskRef *
cgq_device_task (const cgq_device_t *self)
{
    return self->task;
}

int
cgq_device_fd (const cgq_device_t *self)
{
    return self->fd;
}

// s_argv is the measuring process's command line.
static char **
s_argv (const cgq_device_t *self, const Cgq__Assign *a)
{
    char **v = cgq_xcalloc (32 + a->n_env, sizeof *v);
    int n = 0;
    v[n++] = cgq_xstrdup (self->opts.self_exe);
    v[n++] = cgq_xstrdup ("measure");
    v[n++] = cgq_xasprintf ("--config=%s", self->opts.config_path);
    v[n++] = cgq_xasprintf ("--device=%s", self->cfg->id);
    v[n++] = cgq_xasprintf ("--benchmark=%s", a->benchmark ? a->benchmark : "");
    v[n++] = cgq_xasprintf ("--params=%s", a->params_json && *a->params_json ? a->params_json : "{}");
    if (a->artifact_url && *a->artifact_url) {
        v[n++] = cgq_xasprintf ("--artifact=%s", a->artifact_url);
        v[n++] = cgq_xasprintf ("--sha256=%s", a->artifact_sha256 ? a->artifact_sha256 : "");
    }
    if (a->repeats)
        v[n++] = cgq_xasprintf ("--repeats=%u", a->repeats);
    if (a->warmup)
        v[n++] = cgq_xasprintf ("--warmup=%u", a->warmup);
    if (a->measure_json && *a->measure_json) // the stage's measure: (measure.c applies it)
        v[n++] = cgq_xasprintf ("--measure=%s", a->measure_json);
    v[n++] = cgq_xasprintf ("--job=%" PRIu64, a->task->job);
    v[n++] = cgq_xasprintf ("--trial=%" PRIu64, a->task->trial);
    v[n++] = cgq_xasprintf ("--workdir=%s", self->opts.workdir);
    if (self->opts.max_artifact)
        v[n++] = cgq_xasprintf ("--max-artifact=%" PRIu64, self->opts.max_artifact);
    v[n++] = cgq_xasprintf ("--log-level=%s", self->opts.log_level ? self->opts.log_level : "info");
    for (size_t i = 0; i < a->n_env; i++) // the trial's env (Assign.env)
        if (a->env[i] && a->env[i]->key)
            v[n++] = cgq_xasprintf ("--env=%s=%s", a->env[i]->key,
                                    a->env[i]->value ? a->env[i]->value : "");
    v[n] = NULL;
    return v;
}

static void
s_free_argv (char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free (v[i]);
    free (v);
}

int
cgq_device_start (cgq_device_t *self, const Cgq__Assign *a, char *err, size_t errlen)
{
    if (self->pid > 0) {
        char buf[80];
        snprintf (err, errlen, "device %s is busy with task %s (one measurement per device at "
                               "a time)",
                  self->cfg->id, cgq_wire_task_str (buf, self->task));
        return -1;
    }
    int p[2];
    if (pipe2 (p, O_CLOEXEC) < 0) {
        snprintf (err, errlen, "pipe: %s", strerror (errno));
        return -1;
    }
    char **argv = s_argv (self, a);
    // OpenBLAS starts its threads when it loads: the cpu-local engine times
    // one core, so the measuring process must start with one thread.
    char *keys[] = {"OPENBLAS_NUM_THREADS"}, *vals[] = {"1"};
    char **envp = cgq_invoke_env (keys, vals, 1);
    pid_t parent = getpid ();
    pid_t pid = fork ();
    if (pid == 0) {
        setsid ();
        // A runner killed with -9 takes its measurements along (SIGTERM:
        // the measuring process kills its run in flight), so that a
        // restarted runner never measures beside an orphan on one device.
        prctl (PR_SET_PDEATHSIG, SIGTERM);
        if (getppid () != parent)
            _exit (127);
        dup2 (p[1], 1);
        execve (argv[0], argv, envp);
        _exit (127);
    }
    int saved = errno;
    close (p[1]);
    s_free_argv (argv);
    cgq_invoke_env_free (envp);
    if (pid < 0) {
        close (p[0]);
        snprintf (err, errlen, "fork: %s", strerror (saved));
        return -1;
    }
    fcntl (p[0], F_SETFL, O_NONBLOCK);
    self->pid = pid;
    self->fd = p[0];
    self->task = cgq_result_ref_dup (a->task);
    self->started_ms = cgq_now_ms ();
    self->timeout_ms = a->timeout_ms;
    self->deadline_ms = a->timeout_ms ? self->started_ms + a->timeout_ms : -1;
    self->kill_ms = -1;
    return 0;
}

void
cgq_device_on_readable (cgq_device_t *self)
{
    if (self->fd < 0)
        return;
    char buf[65536];
    for (;;) {
        ssize_t n = read (self->fd, buf, sizeof buf);
        if (n > 0) {
            if (self->out.len < S_OUTPUT_CAP)
                cgq_buf_append (&self->out, buf, (size_t) n);
            continue;
        }
        if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
            close (self->fd);
            self->fd = -1;
        }
        return;
    }
}

static void
s_terminate (cgq_device_t *self, int64_t now)
{
    if (self->kill_ms >= 0)
        return;
    kill (-self->pid, SIGTERM);
    self->kill_ms = now + self->opts.kill_grace_ms;
}

void
cgq_device_stop (cgq_device_t *self, const char *reason)
{
    if (self->pid <= 0)
        return;
    if (!self->stop_reason)
        self->stop_reason = cgq_xstrdup (reason);
    s_terminate (self, cgq_now_ms ());
}

int64_t
cgq_device_deadline (const cgq_device_t *self)
{
    if (self->pid <= 0)
        return -1;
    if (self->kill_ms >= 0)
        return self->kill_ms;
    return self->deadline_ms;
}

// s_result turns the measuring process's line and exit into the Result.
static Cgq__Result *
s_result (cgq_device_t *self, int wst, int64_t now)
{
    Cgq__TaskStatus status = CGQ__TASK_STATUS__TASK_FAILED;
    char *error = NULL;
    const char *metrics = "{}";
    char *metrics_owned = NULL;
    json_t *line = self->out.len ? json_loads (self->out.data, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
    if (json_is_object (line)) {
        const char *st = json_string_value (json_object_get (line, "status"));
        st = st ? st : "";
        status = !strcmp (st, "succeeded") ? CGQ__TASK_STATUS__TASK_SUCCEEDED
                 : !strcmp (st, "timeout") ? CGQ__TASK_STATUS__TASK_TIMEOUT
                 : !strcmp (st, "bad")     ? CGQ__TASK_STATUS__TASK_LOST
                                           : CGQ__TASK_STATUS__TASK_FAILED;
        const char *e = json_string_value (json_object_get (line, "error"));
        if (e && *e)
            error = cgq_xstrdup (e);
        json_t *m = json_object_get (line, "metrics");
        if (json_is_object (m))
            metrics = metrics_owned = json_dumps (m, JSON_COMPACT | JSON_REAL_PRECISION (17));
    }
    json_decref (line);
    if (self->stop_reason) {
        status = CGQ__TASK_STATUS__TASK_STOPPED;
        free (error);
        error = cgq_xstrdup (self->stop_reason);
    } else if (self->timed_out) {
        status = CGQ__TASK_STATUS__TASK_TIMEOUT;
        free (error);
        error = cgq_xasprintf ("the measurement took longer than the trial's timeout (%u ms); "
                               "it was killed",
                               self->timeout_ms);
    } else if (!error && status != CGQ__TASK_STATUS__TASK_SUCCEEDED) {
        error = WIFSIGNALED (wst)
                    ? cgq_xasprintf ("the measuring process was killed by signal %d",
                                     WTERMSIG (wst))
                    : cgq_xasprintf ("the measuring process exited with status %d and no "
                                     "result (see the runner's log)",
                                     WIFEXITED (wst) ? WEXITSTATUS (wst) : -1);
    }
    Cgq__Result *r = cgq_result_new (self->task, status, metrics, error);
    r->duration_s = (double) (now - self->started_ms) / 1000.0;
    r->exit_code = WIFSIGNALED (wst) ? -WTERMSIG (wst) : WIFEXITED (wst) ? WEXITSTATUS (wst) : 0;
    free (metrics_owned);
    free (error);
    return r;
}

Cgq__Result *
cgq_device_tick (cgq_device_t *self, int64_t now)
{
    if (self->pid <= 0)
        return NULL;
    // WNOWAIT: the process stays a zombie while its session's group is
    // killed, so that group id cannot belong to anyone else yet.
    siginfo_t si;
    memset (&si, 0, sizeof si);
    if (waitid (P_PID, (id_t) self->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0
        && si.si_pid == self->pid) {
        // Whatever it wrote before exiting is in the pipe: read it all,
        while (self->fd >= 0)
            cgq_device_on_readable (self);
        // and nothing it started outlives it.
        kill (-self->pid, SIGKILL);
        int wst = 0;
        waitpid (self->pid, &wst, 0);
        Cgq__Result *r = s_result (self, wst, now);
        cgq_tinfo (self->task->job, self->task->trial, self->task->attempt,
                   "device %s: %s%s%s", self->cfg->id,
                  r->status == CGQ__TASK_STATUS__TASK_SUCCEEDED ? "measured"
                  : r->status == CGQ__TASK_STATUS__TASK_TIMEOUT ? "timed out"
                  : r->status == CGQ__TASK_STATUS__TASK_STOPPED ? "stopped"
                  : r->status == CGQ__TASK_STATUS__TASK_LOST    ? "not measured"
                                                                : "failed",
                  *r->error ? ": " : "", r->error);
        s_reset (self);
        return r;
    }
    if (self->kill_ms >= 0 && now >= self->kill_ms) {
        kill (-self->pid, SIGKILL);
        self->kill_ms = now + 1000 * 3600; // once
    } else if (self->deadline_ms >= 0 && now >= self->deadline_ms && self->kill_ms < 0) {
        self->timed_out = true;
        s_terminate (self, now);
    }
    return NULL;
}
