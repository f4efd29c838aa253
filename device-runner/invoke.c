#include "invoke.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define S_DEFAULT_CAP (64 * 1024)

extern char **environ;

// The process group of the run in flight, for cgq_invoke_kill_group.
static volatile pid_t s_current = 0;

void
cgq_invoke_kill_group (void)
{
    pid_t p = s_current;
    if (p > 0)
        kill (-p, SIGKILL);
}

static double
s_now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec / 1e6;
}

static int
s_pidfd_open (pid_t pid)
{
    return (int) syscall (SYS_pidfd_open, pid, 0);
}

// s_child never returns: it sets up the process and execs, or writes why
// not to errfd and exits 127. It runs in a vfork child, in the parent's
// memory until the exec: system calls and stack variables only. vfork
// rather than fork, because copying the measuring process's page tables
// (large under ASan) would be timed as the benchmark's latency.
static void __attribute__ ((noreturn))
s_child (const cgq_invoke_opts_t *o, int outfd, int errfd, pid_t parent)
{
    setpgid (0, 0);
    // A measuring process killed with -9 takes its run along.
    prctl (PR_SET_PDEATHSIG, SIGKILL);
    if (getppid () != parent)
        _exit (127);
    sigset_t none;
    sigemptyset (&none);
    sigprocmask (SIG_SETMASK, &none, NULL);
    signal (SIGPIPE, SIG_DFL);
    int devnull = open ("/dev/null", O_RDONLY);
    if (devnull >= 0) {
        dup2 (devnull, 0);
        close (devnull);
    }
    dup2 (outfd, 1);
    dup2 (outfd, 2);
    close (outfd);
    const char *what = NULL;
    if (o->cwd && chdir (o->cwd) < 0)
        what = "chdir";
    else if (o->cpus && sched_setaffinity (0, sizeof *o->cpus, o->cpus) < 0)
        what = "sched_setaffinity";
    if (!what) {
        // execvpe, not environ = envp: this child shares the parent's memory.
        execvpe (o->argv[0], o->argv, o->envp ? o->envp : environ);
        what = "exec";
    }
    char msg[300];
    int n = snprintf (msg, sizeof msg, "cannot run '%s': %s: %s", o->argv[0], what,
                      strerror (errno));
    (void) !write (errfd, msg, (size_t) n);
    _exit (127);
}

static void
s_read (int fd, cgq_invoke_t *out, size_t cap, bool *eof)
{
    char buf[8192];
    for (;;) {
        ssize_t n = read (fd, buf, sizeof buf);
        if (n > 0) {
            size_t keep = out->output.len < cap ? cap - out->output.len : 0;
            if ((size_t) n > keep)
                out->truncated = true;
            cgq_buf_append (&out->output, buf, (size_t) n < keep ? (size_t) n : keep);
            continue;
        }
        if (n == 0)
            *eof = true;
        return; // EAGAIN, or an error: nothing more now
    }
}

int
cgq_invoke_run (const cgq_invoke_opts_t *o, cgq_invoke_t *out)
{
    memset (out, 0, sizeof *out);
    cgq_buf_init (&out->output);
    size_t cap = o->output_cap ? o->output_cap : S_DEFAULT_CAP;
    int outp[2], errp[2];
    if (pipe2 (outp, O_CLOEXEC) < 0) {
        out->end = CGQ_INVOKE_ERROR;
        snprintf (out->err, sizeof out->err, "pipe: %s", strerror (errno));
        return -1;
    }
    if (pipe2 (errp, O_CLOEXEC) < 0) {
        close (outp[0]);
        close (outp[1]);
        out->end = CGQ_INVOKE_ERROR;
        snprintf (out->err, sizeof out->err, "pipe: %s", strerror (errno));
        return -1;
    }
    pid_t parent = getpid ();
    double t0 = s_now_ms ();
    pid_t pid = vfork ();
    if (pid == 0)
        s_child (o, outp[1], errp[1], parent); // the read ends are O_CLOEXEC
    close (outp[1]);
    close (errp[1]);
    if (pid < 0) {
        close (outp[0]);
        close (errp[0]);
        out->end = CGQ_INVOKE_ERROR;
        snprintf (out->err, sizeof out->err, "vfork: %s", strerror (errno));
        return -1;
    }
    setpgid (pid, pid); // also here: no race with a kill before the child's own call
    s_current = pid;
    fcntl (outp[0], F_SETFL, O_NONBLOCK);
    int pidfd = s_pidfd_open (pid);
    double deadline = o->timeout_s > 0 ? t0 + o->timeout_s * 1000 : INFINITY;
    bool eof = false, timed_out = false;
    double t1 = t0;
    struct rusage ru;
    int wst = 0;
    memset (&ru, 0, sizeof ru);
    for (;;) {
        struct pollfd p[2];
        int np = 0;
        if (pidfd >= 0)
            p[np++] = (struct pollfd){.fd = pidfd, .events = POLLIN};
        if (!eof)
            p[np++] = (struct pollfd){.fd = outp[0], .events = POLLIN};
        double now = s_now_ms ();
        int timeout = -1;
        if (isfinite (deadline))
            timeout = now >= deadline ? 0 : (int) ceil (deadline - now);
        if (pidfd < 0 && (timeout < 0 || timeout > 10))
            timeout = 10; // no pidfd (old kernel): look every 10 ms
        int rc = np ? poll (p, (nfds_t) np, timeout) : (usleep ((useconds_t) timeout * 1000), 0);
        if (rc < 0 && errno != EINTR)
            usleep (1000); // poll itself failed (ENOMEM): look again shortly
        if (!eof)
            s_read (outp[0], out, cap, &eof);
        // WNOWAIT: the process stays a zombie, so its group id cannot be
        // reused before the group is killed below.
        siginfo_t si;
        memset (&si, 0, sizeof si);
        if (waitid (P_PID, (id_t) pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid) {
            t1 = s_now_ms ();
            break;
        }
        if (s_now_ms () >= deadline) {
            timed_out = true;
            t1 = s_now_ms ();
            break;
        }
    }
    s_current = 0;
    // What the run left behind in its group ends with it (and a run past
    // its timeout, with everything it started).
    kill (-pid, SIGKILL);
    wait4 (pid, &wst, 0, &ru);
    if (!eof)
        s_read (outp[0], out, cap, &eof);
    char emsg[300] = "";
    ssize_t en = read (errp[0], emsg, sizeof emsg - 1);
    if (pidfd >= 0)
        close (pidfd);
    close (outp[0]);
    close (errp[0]);
    out->elapsed_ms = t1 - t0;
    out->maxrss_kb = ru.ru_maxrss;
    if (en > 0) {
        emsg[en] = 0;
        out->end = CGQ_INVOKE_ERROR;
        snprintf (out->err, sizeof out->err, "%.250s", emsg);
        return -1;
    }
    if (timed_out) {
        out->end = CGQ_INVOKE_TIMEOUT;
        return -1;
    }
    if (WIFSIGNALED (wst)) {
        out->end = CGQ_INVOKE_SIGNALED;
        out->status = WTERMSIG (wst);
        return -1;
    }
    out->end = CGQ_INVOKE_EXITED;
    out->status = WEXITSTATUS (wst);
    return out->status == 0 ? 0 : -1;
}

void
cgq_invoke_fini (cgq_invoke_t *out)
{
    if (out)
        cgq_buf_fini (&out->output);
}

char *
cgq_invoke_describe (const cgq_invoke_t *out, double timeout_s, char *buf, size_t len)
{
    char how[300];
    switch (out->end) {
    case CGQ_INVOKE_EXITED: snprintf (how, sizeof how, "exit status %d", out->status); break;
    case CGQ_INVOKE_SIGNALED: snprintf (how, sizeof how, "killed by signal %d", out->status); break;
    case CGQ_INVOKE_TIMEOUT:
        snprintf (how, sizeof how, "timed out after %gs (its process group was killed)", timeout_s);
        break;
    case CGQ_INVOKE_ERROR: snprintf (how, sizeof how, "%s", out->err); break;
    }
    // The last non-empty line of the output says most often what went wrong.
    const char *d = out->output.data ? out->output.data : "";
    size_t e = out->output.len;
    while (e > 0 && (d[e - 1] == '\n' || d[e - 1] == '\r' || d[e - 1] == ' '))
        e--;
    size_t s = e;
    while (s > 0 && d[s - 1] != '\n')
        s--;
    if (e > s)
        snprintf (buf, len, "%s: %.*s", how, (int) (e - s > 200 ? 200 : e - s), d + s);
    else
        snprintf (buf, len, "%s", how);
    return buf;
}

int
cgq_invoke_shell (const char *command, char *const *envp, double timeout_s, char *err,
                  size_t errlen)
{
    char *argv[] = {"/bin/sh", "-c", (char *) command, NULL};
    cgq_invoke_opts_t o = {.argv = argv, .envp = envp, .timeout_s = timeout_s};
    cgq_invoke_t r;
    int rc = cgq_invoke_run (&o, &r);
    if (rc < 0)
        cgq_invoke_describe (&r, timeout_s, err, errlen);
    cgq_invoke_fini (&r);
    return rc;
}

static bool
s_same_name (const char *entry, const char *name)
{
    size_t n = strlen (name);
    return !strncmp (entry, name, n) && entry[n] == '=';
}

char **
cgq_invoke_env (char *const *keys, char *const *vals, size_t n)
{
    size_t base = 0;
    while (environ && environ[base])
        base++;
    char **env = cgq_xcalloc (base + n + 1, sizeof *env);
    size_t k = 0;
    for (size_t i = 0; i < base; i++)
        env[k++] = cgq_xstrdup (environ[i]);
    for (size_t i = 0; i < n; i++) {
        char *entry = cgq_xasprintf ("%s=%s", keys[i], vals[i]);
        size_t j = 0;
        while (j < k && !s_same_name (env[j], keys[i]))
            j++;
        if (j < k) {
            free (env[j]);
            env[j] = entry;
        } else
            env[k++] = entry;
    }
    env[k] = NULL;
    return env;
}

void
cgq_invoke_env_free (char **envp)
{
    for (size_t i = 0; envp && envp[i]; i++)
        free (envp[i]);
    free (envp);
}
