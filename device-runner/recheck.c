// recheck: a quarantined device's check, run again until it passes (recheck.h).
#include "recheck.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "invoke.h"
#include "log.h"
#include "transport.h"
#include "util.h"

typedef struct {
    bool wanted;     // quarantined and idle as the last tick said
    int64_t next_ms; // its next check (monotonic); 0: not scheduled
    pid_t pid;       // the check in flight, or 0
} s_dev_t;

struct cgq_recheck_t {
    const cgq_runcfg_t *rc;
    const char *self_exe, *config_path, *workdir;
    int64_t every_ms;
    s_dev_t *devs; // one per rc->devices[i]
};

cgq_recheck_t *
cgq_recheck_new (const cgq_runcfg_t *rc, const char *self_exe, const char *config_path,
                 const char *workdir, int64_t every_ms)
{
    cgq_recheck_t *self = cgq_xcalloc (1, sizeof *self);
    self->rc = rc;
    self->self_exe = self_exe;
    self->config_path = config_path;
    self->workdir = workdir;
    self->every_ms = every_ms;
    self->devs = cgq_xcalloc (rc->ndevices + 1, sizeof *self->devs);
    return self;
}

void
cgq_recheck_destroy (cgq_recheck_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cgq_recheck_t *self = *self_p;
    for (size_t i = 0; i < self->rc->ndevices; i++)
        if (self->devs[i].pid > 0) {
            kill (-self->devs[i].pid, SIGKILL);
            waitpid (self->devs[i].pid, NULL, 0);
        }
    free (self->devs);
    free (self);
    *self_p = NULL;
}

// s_spawn starts `SELF check --config C --device ID --workdir W` in a
// session of its own that dies with the runner. Returns its pid or -1.
static pid_t
s_spawn (cgq_recheck_t *self, const char *id)
{
    char *argv[] = {(char *) self->self_exe, "check", "--config", (char *) self->config_path,
                    "--device", (char *) id, "--workdir", (char *) self->workdir, NULL};
    pid_t parent = getpid ();
    pid_t pid = fork ();
    if (pid == 0) {
        setsid ();
        prctl (PR_SET_PDEATHSIG, SIGKILL);
        if (getppid () != parent)
            _exit (127);
        execv (argv[0], argv);
        _exit (127);
    }
    if (pid < 0)
        cgq_warn ("device %s: cannot start its check: fork: %s", id, strerror (errno));
    return pid;
}

void
cgq_recheck_tick (cgq_recheck_t *self, const char *const *ids, size_t n, int64_t now_ms,
                  void (*passed) (void *arg, const char *id), void *arg)
{
    for (size_t i = 0; i < self->rc->ndevices; i++) {
        const cgq_runcfg_device_t *d = &self->rc->devices[i];
        s_dev_t *s = &self->devs[i];
        bool wanted = false;
        for (size_t k = 0; k < n && !wanted; k++)
            wanted = !strcmp (ids[k], d->id);
        if (s->pid > 0) {
            int st;
            pid_t w = waitpid (s->pid, &st, WNOHANG);
            if (w == s->pid || (w < 0 && errno == ECHILD)) {
                bool ok = w == s->pid && WIFEXITED (st) && WEXITSTATUS (st) == 0;
                s->pid = 0;
                if (ok && wanted) {
                    cgq_info ("device %s: its check passes again; asking the coordinator to "
                              "return it to service",
                              d->id);
                    passed (arg, d->id);
                }
                else if (wanted)
                    cgq_info ("device %s: its check still fails; next try in %lld ms", d->id,
                              (long long) self->every_ms);
            }
        }
        if (!wanted || !d->check || self->every_ms <= 0) {
            s->wanted = false;
            s->next_ms = 0;
            continue;
        }
        if (!s->wanted) { // newly quarantined: its first check one interval from now
            s->wanted = true;
            s->next_ms = now_ms + self->every_ms;
            cgq_info ("device %s is quarantined; its check runs again every %lld ms", d->id,
                      (long long) self->every_ms);
        }
        if (s->pid == 0 && now_ms >= s->next_ms) {
            pid_t pid = s_spawn (self, d->id);
            s->pid = pid > 0 ? pid : 0;
            s->next_ms = now_ms + self->every_ms;
        }
    }
}

int64_t
cgq_recheck_deadline (const cgq_recheck_t *self)
{
    int64_t d = -1;
    for (size_t i = 0; i < self->rc->ndevices; i++) {
        const s_dev_t *s = &self->devs[i];
        if (s->wanted && s->pid == 0 && (d < 0 || s->next_ms < d))
            d = s->next_ms;
    }
    return d;
}

int
cgq_recheck_run (const cgq_runcfg_t *rc, const char *device, const char *workdir, char *err,
                 size_t errlen)
{
    const cgq_runcfg_device_t *d = cgq_runcfg_device (rc, device);
    if (!d) {
        snprintf (err, errlen, "device '%s' is not one of this runner's", device);
        return -1;
    }
    if (!d->check)
        return 1;
    // The device's own variables, then CGQ_DEVICE_ID, as for a measurement.
    size_t n = d->env.n;
    char **keys = cgq_xcalloc (n + 1, sizeof *keys), **vals = cgq_xcalloc (n + 1, sizeof *vals);
    for (size_t i = 0; i < n; i++) {
        keys[i] = d->env.keys[i];
        vals[i] = d->env.vals[i];
    }
    keys[n] = "CGQ_DEVICE_ID";
    vals[n] = d->id;
    char why[512] = "";
    int rc_; // not rc: that is the config
    if (d->transport.kind == CGQ_TRANSPORT_LOCAL) {
        char **envp = cgq_invoke_env (keys, vals, n + 1);
        rc_ = cgq_invoke_shell (d->check, envp, CGQ_RECHECK_TIMEOUT_S, why, sizeof why);
        cgq_invoke_env_free (envp);
    }
    else
        rc_ = cgq_transport_shell (&d->transport, d->id, workdir, keys, vals, n + 1, d->check,
                                   CGQ_RECHECK_TIMEOUT_S, why, sizeof why);
    free (keys);
    free (vals);
    if (rc_ < 0) {
        snprintf (err, errlen, "device %s: check '%s' failed: %s", d->id, d->check, why);
        return -1;
    }
    return 0;
}
