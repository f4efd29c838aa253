// progress: the progress display of `cgq run` and `cgq submit --follow`.
#include "progress.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cli.h"
#include "show.h"
#include "util.h"

#define S_BAR 20
#define S_PLAIN_EVERY_MS 2000
#define S_REDIS_GRACE_MS 5000

char *
cgq_progress_line (char *buf, size_t n, const cgq_job_rec_t *job, double elapsed_s, int width)
{
    uint64_t done = cgq_job_rec_done (job);
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

    char total[32], best[160] = "", clock[32], num[32], extra[96] = "";
    if (job->total >= 0)
        snprintf (total, sizeof total, "%" PRId64, job->total);
    else
        snprintf (total, sizeof total, "?");
    if (job->has_best)
        snprintf (best, sizeof best, "  best %s=%s (trial %" PRIu64 ")",
                  job->metric ? job->metric : "value",
                  cgq_show_number (num, sizeof num, job->best_value), job->best_trial);
    int len = 0;
    if (job->counts[CGQ_TRIAL_STALE])
        len = snprintf (extra, sizeof extra, "  stale %" PRIu64, job->counts[CGQ_TRIAL_STALE]);
    if (job->counts[CGQ_TRIAL_UNSCHEDULABLE] && len >= 0 && (size_t) len < sizeof extra)
        snprintf (extra + len, sizeof extra - (size_t) len, "  unschedulable %" PRIu64,
                  job->counts[CGQ_TRIAL_UNSCHEDULABLE]);
    snprintf (buf, n, "%s %" PRIu64 "/%s  running %" PRIu64 "  failed %" PRIu64 "%s%s  %s", bar,
              done, total, job->counts[CGQ_TRIAL_RUNNING], job->counts[CGQ_TRIAL_FAILED], extra,
              best, cgq_show_clock (clock, sizeof clock, elapsed_s));
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

// Whether a progress line is drawn on the terminal without its newline yet.
static bool s_line_open = false;

void
cgq_progress_break (void)
{
    if (s_line_open) {
        fputc ('\n', stderr);
        s_line_open = false;
    }
}

int
cgq_progress_follow (cgq_store_t *store, uint64_t job_id, cgq_progress_check_fn check, void *arg,
                     cgq_job_rec_t **final)
{
    if (final)
        *final = NULL;
    bool tty = isatty (STDERR_FILENO);
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
        if (tty) {
            cgq_progress_line (line, sizeof line, job, elapsed, s_term_width ());
            fprintf (stderr, "\r%s\033[K", line);
            fflush (stderr);
            s_line_open = true;
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
    cgq_progress_break ();
    return rc;
}
