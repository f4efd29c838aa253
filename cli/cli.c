// cli: the helpers every command of the cgq tool shares: option lookup, ids,
// one-line errors, the Redis connection and job load, the interrupting
// signal, and the progress line left open on the terminal. Commands call
// down into this file; it calls no command (main.c, ctl.c, show.c ... sit above it).
#include "cli.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "local.h"
#include "util.h"
#include "view.h"

volatile sig_atomic_t cgq_cli_signal = 0;

static void
s_on_signal (int sig)
{
    cgq_cli_signal = sig;
}

void
cgq_cli_catch_signals (void)
{
    struct sigaction sa;
    memset (&sa, 0, sizeof sa);
    sa.sa_handler = s_on_signal;
    sigemptyset (&sa.sa_mask);
    sa.sa_flags = 0; // no SA_RESTART: a pending sleep or poll returns at once
    sigaction (SIGINT, &sa, NULL);
    sigaction (SIGTERM, &sa, NULL);
    // A closed terminal (ssh dropped) must clean up like Ctrl-C does.
    sigaction (SIGHUP, &sa, NULL);
    // Progress on a closed pipe: get EPIPE and finish cleanly, not die mid-way.
    signal (SIGPIPE, SIG_IGN);
}

void
cgq_cli_sleep_ms (int ms)
{
    if (ms <= 0 || cgq_cli_signal)
        return;
    struct timespec ts = {ms / 1000, (long) (ms % 1000) * 1000000L};
    nanosleep (&ts, NULL); // EINTR on a signal: return early on purpose
}

void
cgq_cli_error (const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (msg, sizeof msg, fmt, ap);
    va_end (ap);
    fflush (stdout);
    cgq_cli_line_break ();
    fprintf (stderr, "cgq: %s\n", msg);
}

static int
s_opt_index (const cgq_cli_t *cli, const char *name)
{
    for (int i = 0; cli->cmd && cli->cmd->opts[i].name; i++)
        if (strcmp (cli->cmd->opts[i].name, name) == 0)
            return i;
    return -1;
}

const char *
cgq_cli_opt (const cgq_cli_t *cli, const char *name)
{
    int i = s_opt_index (cli, name);
    return i < 0 ? NULL : cli->vals[i];
}

bool
cgq_cli_flag (const cgq_cli_t *cli, const char *name)
{
    return cgq_cli_opt (cli, name) != NULL;
}

int
cgq_cli_opt_u64 (const cgq_cli_t *cli, const char *name, uint64_t def, uint64_t min,
                 uint64_t max, uint64_t *out)
{
    const char *v = cgq_cli_opt (cli, name);
    if (!v) {
        *out = def;
        return 0;
    }
    uint64_t n;
    if (cgq_parse_u64 (v, &n) < 0 || n < min || n > max) {
        cgq_cli_error ("bad --%s '%s' (expected a whole number from %llu to %llu)", name, v,
                       (unsigned long long) min, (unsigned long long) max);
        return -1;
    }
    *out = n;
    return 0;
}

int
cgq_cli_parse_id (const char *what, const char *text, uint64_t *id)
{
    if (cgq_parse_u64 (text, id) < 0) {
        cgq_cli_error ("bad %s id '%s' (expected a number such as 7; `cgq status` lists the jobs)",
                       what, text);
        return -1;
    }
    return 0;
}

int
cgq_cli_store_url (const char *url, cgq_store_t **store)
{
    char err[512];
    cgq_store_t *s = cgq_store_new (url, 2000, err, sizeof err);
    if (!s) {
        cgq_cli_error ("%s (check --redis / CGQ_REDIS)", err);
        return CGQ_EXIT_BAD;
    }
    if (cgq_store_connect (s) < 0) {
        cgq_cli_error ("%s", cgq_store_errstr (s));
        cgq_store_destroy (&s);
        return CGQ_EXIT_FAIL;
    }
    *store = s;
    return CGQ_EXIT_OK;
}

int
cgq_cli_store (const cgq_cli_t *cli, cgq_store_t **store)
{
    if (cli->redis_given)
        return cgq_cli_store_url (cli->redis, store);
    char err[512];
    bool started;
    char *url = cgq_local_open (&started, err, sizeof err);
    if (!url && *err) {
        cgq_cli_error ("%s", err);
        return CGQ_EXIT_FAIL;
    }
    if (!url)
        return cgq_cli_store_url (cli->redis, store);
    fprintf (stderr, "cgq: reading the state of the cgq run in ./%s%s (--redis URL reads another)\n",
             CGQ_LOCAL_DIR, started ? "" : ", which is running");
    int rc = cgq_cli_store_url (url, store);
    free (url);
    return rc;
}

int
cgq_cli_load_job (const cgq_cli_t *cli, const char *text, cgq_store_t **store,
                  cgq_job_rec_t **job)
{
    uint64_t id;
    if (cgq_cli_parse_id ("job", text, &id) < 0)
        return CGQ_EXIT_BAD;
    int rc = cgq_cli_store (cli, store);
    if (rc != CGQ_EXIT_OK)
        return rc;
    char err[512];
    int vr = cgq_view_job_load (*store, id, job, err, sizeof err);
    if (vr != CGQ_VIEW_OK) {
        cgq_cli_error ("%s", err);
        cgq_store_destroy (store);
        return vr == CGQ_VIEW_ABSENT ? CGQ_EXIT_BAD : CGQ_EXIT_FAIL;
    }
    return CGQ_EXIT_OK;
}

// Whether a progress line is drawn on stderr without its newline yet.
static bool s_line_open = false;

void
cgq_cli_line_opened (void)
{
    s_line_open = true;
}

void
cgq_cli_line_break (void)
{
    if (s_line_open) {
        fputc ('\n', stderr);
        s_line_open = false;
    }
}
