// progress: the progress display of `cgq run` and `cgq submit --follow`.
#include "progress.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cli.h"
#include "show.h"
#include "util.h"

#define S_BAR 20
#define S_PLAIN_EVERY_MS 2000
#define S_REDIS_GRACE_MS 5000

double
cgq_progress_eta (const cgq_job_rec_t *job, double elapsed_s)
{
    uint64_t done = cgq_job_rec_done (job);
    if (job->total <= 0 || done == 0 || cgq_job_rec_terminal (job) || elapsed_s <= 0 ||
        done >= (uint64_t) job->total)
        return -1;
    return elapsed_s / (double) done * (double) ((uint64_t) job->total - done);
}

// A piece of the progress line; when the line is wider than the terminal the
// pieces of lowest keep are left out whole, so no word is ever cut.
typedef struct {
    char text[192];
    int keep; // higher stays longer
} s_piece_t;

char *
cgq_progress_line (char *buf, size_t n, const cgq_job_rec_t *job, double elapsed_s, int width)
{
    uint64_t done = cgq_job_rec_done (job);
    s_piece_t p[12];
    size_t np = 0;
    char bar[S_BAR + 3];
    bar[0] = '[';
    int fill = 0;
    if (job->total > 0)
        fill = (int) ((double) done * S_BAR / (double) job->total);
    else if (job->total == 0 || cgq_job_rec_terminal (job))
        fill = S_BAR;
    if (fill > S_BAR)
        fill = S_BAR;
    for (int i = 0; i < S_BAR; i++)
        bar[1 + i] = i < fill ? '#' : '.';
    bar[S_BAR + 1] = ']';
    bar[S_BAR + 2] = 0;
    char num[32], clock[32];
    snprintf (p[np].text, sizeof p[np].text, "%s", bar);
    p[np++].keep = 2;
    if (job->total >= 0)
        snprintf (p[np].text, sizeof p[np].text, "%" PRIu64 "/%" PRId64, done, job->total);
    else
        snprintf (p[np].text, sizeof p[np].text, "%" PRIu64 "/?", done);
    p[np++].keep = 9;
    snprintf (p[np].text, sizeof p[np].text, "running %" PRIu64, job->counts[CGQ_TRIAL_RUNNING]);
    p[np++].keep = 8;
    snprintf (p[np].text, sizeof p[np].text, "failed %" PRIu64, job->counts[CGQ_TRIAL_FAILED]);
    p[np++].keep = 7;
    // What "done" holds besides successes and failures, so that a cancelled
    // job does not read as 10/10 done and all well.
    if (job->counts[CGQ_TRIAL_STOPPED]) { // ended by an early stopper
        snprintf (p[np].text, sizeof p[np].text, "stopped %" PRIu64, job->counts[CGQ_TRIAL_STOPPED]);
        p[np++].keep = 7;
    }
    if (job->counts[CGQ_TRIAL_CANCELLED]) {
        snprintf (p[np].text, sizeof p[np].text, "cancelled %" PRIu64,
                  job->counts[CGQ_TRIAL_CANCELLED]);
        p[np++].keep = 7;
    }
    if (job->counts[CGQ_TRIAL_STALE]) { // on a node gone silent, not yet given up
        snprintf (p[np].text, sizeof p[np].text, "stale %" PRIu64, job->counts[CGQ_TRIAL_STALE]);
        p[np++].keep = 8;
    }
    if (job->counts[CGQ_TRIAL_UNSCHEDULABLE]) {
        snprintf (p[np].text, sizeof p[np].text, "unschedulable %" PRIu64,
                  job->counts[CGQ_TRIAL_UNSCHEDULABLE]);
        p[np++].keep = 8;
    }
    if (job->has_best) {
        snprintf (p[np].text, sizeof p[np].text, "best %.80s=%s (trial %" PRIu64 ")",
                  job->metric ? job->metric : "value",
                  cgq_show_number (num, sizeof num, job->best_value), job->best_trial);
        p[np++].keep = 5;
    }
    snprintf (p[np].text, sizeof p[np].text, "%s", cgq_show_clock (clock, sizeof clock, elapsed_s));
    p[np++].keep = 4;
    double eta = cgq_progress_eta (job, elapsed_s);
    if (eta >= 0) {
        snprintf (p[np].text, sizeof p[np].text, "ETA %s", cgq_show_clock (clock, sizeof clock, eta));
        p[np++].keep = 3;
    }
    bool in[12];
    for (size_t i = 0; i < np; i++)
        in[i] = true;
    for (;;) {
        size_t len = 0, shown = 0;
        for (size_t i = 0; i < np; i++)
            if (in[i]) {
                len += strlen (p[i].text) + (shown ? 2 : 0);
                shown++;
            }
        if (width <= 0 || len <= (size_t) width || shown <= 1)
            break;
        size_t drop = np;
        for (size_t i = 0; i < np; i++)
            if (in[i] && (drop == np || p[i].keep < p[drop].keep))
                drop = i;
        in[drop] = false;
    }
    size_t off = 0;
    buf[0] = 0;
    for (size_t i = 0; i < np && off < n; i++)
        if (in[i])
            off += (size_t) snprintf (buf + off, n - off, "%s%s", off ? "  " : "", p[i].text);
    // Only "done/total" left and still too wide: a terminal a dozen columns wide.
    if (width > 0 && strlen (buf) > (size_t) width)
        buf[width] = 0;
    return buf;
}

static int
s_term_width (void)
{
    struct winsize ws;
    if (ioctl (STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col - 1; // the last column would wrap on some terminals
    return 79;
}

int
cgq_progress_follow (cgq_store_t *store, uint64_t job_id, bool show_waits,
                     cgq_progress_check_fn check, void *arg,
                     cgq_job_rec_t **final)
{
    if (final)
        *final = NULL;
    bool tty = isatty (STDERR_FILENO);
    char *blocked = NULL; // the reason last shown, so that it is shown once per change
    int64_t start = cgq_now_ms ();
    int64_t failing_since = 0;
    int64_t last_plain = 0;
    char last_key[128] = "";
    char line[512], err[512];
    int rc = 0;
    for (;;) {
        if (cgq_cli_signal) {
            rc = CGQ_PROGRESS_SIGNAL;
            break;
        }
        cgq_job_rec_t *job = NULL;
        int vr = cgq_view_job_load (store, job_id, &job, err, sizeof err);
        if (vr == CGQ_VIEW_ABSENT) {
            cgq_cli_error ("%s", err);
            rc = -1;
            break;
        }
        if (vr != CGQ_VIEW_OK) {
            // Redis restarting under us is survivable; a Redis that stays
            // away is not.
            int64_t now = cgq_now_ms ();
            if (!failing_since)
                failing_since = now;
            int c = check ? check (arg, NULL) : 0;
            if (c) {
                rc = c;
                break;
            }
            if (now - failing_since >= S_REDIS_GRACE_MS) {
                cgq_cli_error ("%s", err);
                rc = -1;
                break;
            }
            cgq_cli_sleep_ms (CGQ_PROGRESS_POLL_MS);
            continue;
        }
        failing_since = 0;
        double elapsed = job->created > 0 ? cgq_wall_s () - job->created
                                          : (double) (cgq_now_ms () - start) / 1000.0;
        bool terminal = cgq_job_rec_terminal (job);
        const char *why = show_waits && job->counts[CGQ_TRIAL_UNSCHEDULABLE] && job->blocked
                              ? job->blocked
                              : NULL;
        if (why && !terminal && (!blocked || strcmp (blocked, why)) &&
            !strncmp (why, "devices ", 8)) { // quarantined devices (coordinator/blocked.c)
            cgq_cli_line_break ();
            fprintf (stderr,
                     "cgq: job %" PRIu64 " blocked: %s; it waits for a device to come back, "
                     "failing after its blocked_timeout (cgq cancel %" PRIu64 " cancels it now)\n",
                     job->id, why, job->id);
            free (blocked);
            blocked = cgq_xstrdup (why);
        }
        else if (why && !terminal && (!blocked || strcmp (blocked, why))) {
            cgq_cli_line_break ();
            fprintf (stderr,
                     "cgq: job %" PRIu64 " waits: %s (it waits for a node that can run it; "
                     "Ctrl-C stops waiting, cgq cancel %" PRIu64 " cancels the job)\n",
                     job->id, why, job->id);
            free (blocked);
            blocked = cgq_xstrdup (why);
        }
        else if (!why && blocked) {
            free (blocked);
            blocked = NULL;
        }
        if (tty) {
            cgq_progress_line (line, sizeof line, job, elapsed, s_term_width ());
            fprintf (stderr, "\r%s\033[K", line);
            fflush (stderr);
            cgq_cli_line_opened ();
        }
        else {
            char key[128];
            snprintf (key, sizeof key,
                      "%" PRIu64 "/%" PRIu64 "/%" PRIu64 "/%" PRIu64 "/%d/%" PRIu64 "/%s",
                      cgq_job_rec_done (job), job->counts[CGQ_TRIAL_RUNNING],
                      job->counts[CGQ_TRIAL_STALE], job->counts[CGQ_TRIAL_FAILED], job->has_best,
                      job->best_trial, job->state);
            int64_t now = cgq_now_ms ();
            if (terminal || (strcmp (key, last_key) && now - last_plain >= S_PLAIN_EVERY_MS)) {
                cgq_progress_line (line, sizeof line, job, elapsed, 0);
                fprintf (stderr, "%s\n", line);
                fflush (stderr);
                snprintf (last_key, sizeof last_key, "%s", key);
                last_plain = now;
            }
        }
        int c = !terminal && check ? check (arg, job) : 0;
        if (terminal || c) {
            if (terminal && final)
                *final = job;
            else
                cgq_job_rec_destroy (&job);
            rc = terminal ? 0 : c;
            break;
        }
        cgq_job_rec_destroy (&job);
        cgq_cli_sleep_ms (CGQ_PROGRESS_POLL_MS);
    }
    free (blocked);
    cgq_cli_line_break ();
    return rc;
}
