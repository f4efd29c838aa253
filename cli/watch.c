// watch: `cgq watch JOB`, a live view of a job in the terminal. On a
// terminal it takes the alternate screen and redraws a frame in place with
// plain ANSI sequences (cursor home, erase line, erase below: what every
// terminal and ssh pass through): the progress line of `cgq run`, the trials
// by state, the top trials, the running trials with their latest report, and
// the nodes and devices with their load. Every line is fitted to the
// terminal's width (TIOCGWINSZ, again on SIGWINCH) and the frame to its
// height. stdin goes to non-canonical, no-echo mode so that `q` quits at once;
// the saved mode is put back on every way out (q, Ctrl-C, SIGTERM, SIGHUP,
// the job's end, an error, exit()). When stdout is not a terminal it prints
// the progress line instead, when it changes (at most every 2 s). Either way
// it ends by itself when the job does, with the summary `cgq run` prints.
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "cli.h"
#include "front.h"
#include "json.h"
#include "progress.h"
#include "show.h"
#include "util.h"
#include "view.h"

#define S_REDIS_GRACE_MS 5000
#define S_PLAIN_EVERY_MS 2000
#define S_MAX_RUNNING 64 // running trials read per refresh

// ---------------------------------------------------------------- the terminal

static struct termios s_saved_mode;
static bool s_mode_changed = false; // stdin is in our mode; s_saved_mode holds the old one
static bool s_screen = false;       // the alternate screen is on
static volatile sig_atomic_t s_resized = 0;
static volatile sig_atomic_t s_suspend = 0; // Ctrl-Z: give the terminal back, then stop

// s_restore undoes what s_enter did; safe to call more than once (atexit,
// every return path).
static void
s_restore (void)
{
    if (s_screen) {
        // cursor shown again, attributes reset, back to the normal screen
        fputs ("\033[?25h\033[0m\033[?1049l", stdout);
        fflush (stdout);
        s_screen = false;
    }
    if (s_mode_changed) {
        tcsetattr (STDIN_FILENO, TCSAFLUSH, &s_saved_mode);
        s_mode_changed = false;
    }
}

static void
s_on_winch (int sig)
{
    (void) sig;
    s_resized = 1;
}

static void
s_on_tstp (int sig)
{
    (void) sig;
    s_suspend = 1;
}

static void
s_enter (void)
{
    static bool registered = false;
    if (!registered) {
        atexit (s_restore);
        registered = true;
    }
    struct sigaction sa;
    memset (&sa, 0, sizeof sa);
    sa.sa_handler = s_on_winch;
    sigemptyset (&sa.sa_mask);
    sigaction (SIGWINCH, &sa, NULL);
    sa.sa_handler = s_on_tstp;
    sigaction (SIGTSTP, &sa, NULL);
    if (isatty (STDIN_FILENO) && tcgetattr (STDIN_FILENO, &s_saved_mode) == 0) {
        struct termios m = s_saved_mode;
        // Keys arrive one by one without echo; ISIG stays on so that Ctrl-C
        // is still SIGINT (caught: the loop ends and restores the mode).
        m.c_lflag &= (tcflag_t) ~(ICANON | ECHO);
        m.c_cc[VMIN] = 0;
        m.c_cc[VTIME] = 0;
        if (tcsetattr (STDIN_FILENO, TCSAFLUSH, &m) == 0)
            s_mode_changed = true;
    }
    // alternate screen, cursor hidden, cleared
    fputs ("\033[?1049h\033[?25l\033[H\033[2J", stdout);
    fflush (stdout);
    s_screen = true;
}

static void
s_term_size (int *w, int *h)
{
    struct winsize ws;
    *w = 80;
    *h = 24;
    if (ioctl (STDOUT_FILENO, TIOCGWINSZ, &ws) == 0) {
        if (ws.ws_col > 0)
            *w = ws.ws_col;
        if (ws.ws_row > 0)
            *h = ws.ws_row;
    }
}

// ---------------------------------------------------------------- the frame

typedef struct {
    char **lines;
    size_t n, cap;
} s_frame_t;

static void
s_frame_add (s_frame_t *f, char *line)
{
    if (f->n == f->cap) {
        f->cap = f->cap ? f->cap * 2 : 64;
        f->lines = cgq_xrealloc (f->lines, f->cap * sizeof *f->lines);
    }
    f->lines[f->n++] = line;
}

static void
s_frame_addf (s_frame_t *f, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

static void
s_frame_addf (s_frame_t *f, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    char *s = NULL;
    if (vasprintf (&s, fmt, ap) < 0)
        s = cgq_xstrdup ("?");
    va_end (ap);
    s_frame_add (f, s);
}

// s_frame_text adds every line of text (what a table printer wrote).
static void
s_frame_text (s_frame_t *f, const char *text)
{
    const char *p = text;
    while (*p) {
        const char *nl = strchr (p, '\n');
        size_t len = nl ? (size_t) (nl - p) : strlen (p);
        s_frame_add (f, cgq_xstrndup (p, len));
        p += len + (nl ? 1 : 0);
    }
}

static void
s_frame_table (s_frame_t *f, const cgq_table_t *t)
{
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream (&text, &len);
    if (!m) {
        fprintf (stderr, "cgq: out of memory\n");
        abort ();
    }
    cgq_table_print (t, m, "  ");
    fclose (m);
    s_frame_text (f, text);
    free (text);
}

static void
s_frame_fini (s_frame_t *f)
{
    for (size_t i = 0; i < f->n; i++)
        free (f->lines[i]);
    free (f->lines);
    memset (f, 0, sizeof *f);
}

// s_fit writes at most width code points of line to out, control characters
// flattened to spaces (a trial's report must not move the cursor).
static void
s_fit (FILE *out, const char *line, int width)
{
    int cps = 0;
    for (const char *p = line; *p; p++) {
        unsigned char c = (unsigned char) *p;
        if ((c & 0xC0) != 0x80) {
            if (cps == width)
                break;
            cps++;
        }
        fputc (c < 0x20 || c == 0x7f ? ' ' : c, out);
    }
}

static char *
s_since (double t)
{
    char clock[32];
    if (t <= 0)
        return cgq_xstrdup ("-");
    return cgq_xstrdup (cgq_show_clock (clock, sizeof clock, cgq_wall_s () - t));
}

static char *
s_params_text (const json_t *params)
{
    cgq_buf_t b;
    cgq_buf_init (&b);
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *) params, k, v) {
        char *val;
        char num[32];
        if (json_is_string (v))
            val = cgq_xstrdup (json_string_value (v));
        else if (json_is_real (v))
            val = cgq_xstrdup (cgq_show_number (num, sizeof num, json_real_value (v)));
        else
            val = cgq_json_dumps (v);
        cgq_buf_printf (&b, "%s%s=%s", b.len ? " " : "", k, val ? val : "?");
        free (val);
    }
    return cgq_buf_take (&b);
}

// s_build makes the frame of one refresh. Returns 0, or -1 with err set
// when Redis failed mid-way.
static int
s_build (s_frame_t *f, cgq_store_t *store, const cgq_job_rec_t *job, size_t top, int width,
         char *err, size_t errlen)
{
    char line[1024], num[32];
    double elapsed = job->created > 0 ? cgq_wall_s () - job->created : 0;
    s_frame_addf (f, "cgq watch: job %" PRIu64 " %s  %s  (q quits)", job->id, job->name,
                  job->state);
    s_frame_add (f, cgq_xstrdup (cgq_progress_line (line, sizeof line, job, elapsed, width)));
    cgq_buf_t b;
    cgq_buf_init (&b);
    for (int s = 0; s < CGQ_TRIAL_NSTATES; s++)
        cgq_buf_printf (&b, "%s%s %" PRIu64, s ? "  " : "", cgq_tstate_names[s], job->counts[s]);
    s_frame_add (f, cgq_buf_take (&b));
    if (job->blocked && job->counts[CGQ_TRIAL_UNSCHEDULABLE])
        s_frame_addf (f, "waiting: %s (cgq cancel %" PRIu64 " cancels the job)", job->blocked,
                      job->id);

    // the top trials
    cgq_trial_rec_t **trials = NULL;
    size_t n = 0;
    if (job->metric) {
        if (cgq_view_trials_best (store, job, top, &trials, &n, err, errlen) != CGQ_VIEW_OK)
            return -1;
        s_frame_add (f, cgq_xstrdup (""));
        if (n == 0)
            s_frame_addf (f, "top: no trial has succeeded yet");
        else {
            s_frame_addf (f, "top %zu by %s (%s):", n, job->metric, job->mode > 0 ? "max" : "min");
            cgq_table_t t;
            cgq_table_init (&t, 4);
            cgq_table_head (&t, 0, "rank", true);
            cgq_table_head (&t, 1, "trial", true);
            cgq_table_head (&t, 2, job->metric, true);
            cgq_table_head (&t, 3, "params", false);
            for (size_t i = 0; i < n; i++) {
                cgq_table_addf (&t, "%zu", i + 1);
                cgq_table_addf (&t, "%" PRIu64, trials[i]->id);
                cgq_table_add (&t, cgq_xstrdup (cgq_show_number (num, sizeof num, trials[i]->value)));
                cgq_table_add (&t, s_params_text (trials[i]->params));
            }
            s_frame_table (f, &t);
            cgq_table_fini (&t);
        }
        cgq_view_trials_free (trials, n);
    }
    else {
        // several objectives (or none): no single ranking; the front when there is one
        char key[64];
        redisReply *r = cgq_store_command (store, "HLEN %s", cgq_key_pareto (key, sizeof key, job->id));
        cgq_front_t front;
        if (r && r->type == REDIS_REPLY_INTEGER && r->integer > 0
            && cgq_front_load (store, job, false, &front, NULL, err, errlen) == 0) {
            s_frame_add (f, cgq_xstrdup (""));
            s_frame_addf (f, "pareto front: %zu trial%s (cgq pareto %" PRIu64 "), best first in %s:",
                          front.front.n, front.front.n == 1 ? "" : "s", job->id,
                          cgq_spec_objective (front.spec, 0)->metric);
            cgq_front_sort (&front.front, false);
            size_t rows = front.front.n < top ? front.front.n : top;
            int m = front.front.m;
            cgq_table_t t;
            cgq_table_init (&t, (size_t) m + 2);
            cgq_table_head (&t, 0, "trial", true);
            for (int k = 0; k < m; k++)
                cgq_table_head (&t, (size_t) k + 1, cgq_spec_objective (front.spec, (size_t) k)->metric,
                                true);
            cgq_table_head (&t, (size_t) m + 1, "params", false);
            for (size_t i = 0; i < rows; i++) {
                cgq_table_addf (&t, "%" PRIu64, front.front.rows[i].rec->id);
                for (int k = 0; k < m; k++)
                    cgq_table_add (&t, cgq_xstrdup (cgq_show_number (num, sizeof num,
                                                                     front.front.rows[i].v[k])));
                cgq_table_add (&t, s_params_text (front.front.rows[i].rec->params));
            }
            s_frame_table (f, &t);
            cgq_table_fini (&t);
            cgq_front_fini (&front);
        }
        else if (r && r->type == REDIS_REPLY_INTEGER && r->integer > 0) { // its size, at least
            s_frame_add (f, cgq_xstrdup (""));
            s_frame_addf (f, "pareto front: %lld trial%s (cgq pareto %" PRIu64 ")", r->integer,
                          r->integer == 1 ? "" : "s", job->id);
        }
        if (r)
            freeReplyObject (r);
    }

    // the running trials, with their latest report
    if (cgq_view_trials_active (store, job, S_MAX_RUNNING, &trials, &n, err, errlen) != CGQ_VIEW_OK)
        return -1;
    size_t running = 0;
    for (size_t i = 0; i < n; i++)
        running += !strcmp (trials[i]->state, cgq_tstate_names[CGQ_TRIAL_RUNNING]);
    s_frame_add (f, cgq_xstrdup (""));
    if (running == 0)
        s_frame_addf (f, "running: none");
    else {
        s_frame_addf (f, "running (%" PRIu64 "):", job->counts[CGQ_TRIAL_RUNNING]);
        cgq_table_t t;
        cgq_table_init (&t, 5);
        cgq_table_head (&t, 0, "trial", true);
        cgq_table_head (&t, 1, "node", false);
        cgq_table_head (&t, 2, "for", true);
        cgq_table_head (&t, 3, "reports", true);
        cgq_table_head (&t, 4, "latest report", false);
        for (size_t i = 0; i < n; i++) {
            const cgq_trial_rec_t *tr = trials[i];
            if (strcmp (tr->state, cgq_tstate_names[CGQ_TRIAL_RUNNING]))
                continue;
            cgq_table_addf (&t, "%" PRIu64, tr->id);
            cgq_table_add (&t, cgq_xstrdup (tr->node ? tr->node : "-"));
            cgq_table_add (&t, s_since (tr->has_started ? tr->started : 0));
            cgq_table_addf (&t, "%" PRIu64, tr->reports);
            cgq_table_add (&t, cgq_xstrdup (tr->last_report ? tr->last_report : "-"));
        }
        s_frame_table (f, &t);
        cgq_table_fini (&t);
    }
    cgq_view_trials_free (trials, n);

    // the nodes and their load
    cgq_node_rec_t **nodes = NULL;
    size_t nn = 0;
    if (cgq_view_nodes_load (store, &nodes, &nn, err, errlen) != CGQ_VIEW_OK)
        return -1;
    s_frame_add (f, cgq_xstrdup (""));
    size_t shown = 0;
    cgq_table_t t;
    cgq_table_init (&t, 6);
    const char *heads[] = {"node", "state", "cpus used/total", "gpus used/total", "running", "kind"};
    const bool right[] = {false, false, true, true, true, false};
    for (size_t c = 0; c < 6; c++)
        cgq_table_head (&t, c, heads[c], right[c]);
    for (size_t i = 0; i < nn; i++) {
        const cgq_node_rec_t *nd = nodes[i];
        if (!strcmp (nd->state, CGQ_NODE_GONE))
            continue; // said goodbye: no load to show
        cgq_table_add (&t, cgq_xstrdup (nd->id));
        cgq_table_add (&t, cgq_xstrdup (*nd->state ? nd->state : "?"));
        cgq_table_addf (&t, "%g/%g", nd->cpus - nd->free_cpus, nd->cpus);
        cgq_table_addf (&t, "%g/%g", nd->gpus - nd->free_gpus, nd->gpus);
        cgq_table_addf (&t, "%" PRIu64, nd->running);
        cgq_table_add (&t, cgq_xstrdup (*nd->kind ? nd->kind : "?"));
        shown++;
    }
    if (shown) {
        s_frame_addf (f, "nodes (%zu):", shown);
        s_frame_table (f, &t);
    }
    else
        s_frame_addf (f, "nodes: none connected");
    cgq_table_fini (&t);
    cgq_view_nodes_free (nodes, nn);

    // devices of device runners, when there are any
    cgq_device_rec_t **devs = NULL;
    size_t nd = 0;
    if (cgq_devices_load (store, &devs, &nd, err, errlen) < 0)
        return -1;
    if (nd) {
        s_frame_add (f, cgq_xstrdup (""));
        s_frame_addf (f, "devices (%zu):", nd);
        cgq_table_t d;
        cgq_table_init (&d, 5);
        const char *dh[] = {"device", "runner", "state", "task", "failures"};
        for (size_t c = 0; c < 5; c++)
            cgq_table_head (&d, c, dh[c], c == 4);
        for (size_t i = 0; i < nd; i++) {
            cgq_table_add (&d, cgq_xstrdup (devs[i]->id));
            cgq_table_add (&d, cgq_xstrdup (*devs[i]->node ? devs[i]->node : "-"));
            cgq_table_add (&d, cgq_xstrdup (devs[i]->state));
            cgq_table_add (&d, cgq_xstrdup (*devs[i]->task ? devs[i]->task : "-"));
            cgq_table_addf (&d, "%" PRIu64, devs[i]->failures);
        }
        s_frame_table (f, &d);
        cgq_table_fini (&d);
    }
    for (size_t i = 0; i < nd; i++)
        cgq_device_rec_destroy (&devs[i]);
    free (devs);
    return 0;
}

// s_draw writes the frame from the top left corner, each line fitted to the
// width and erased to its end, the frame cut to the height, and the rest of
// the screen erased.
static void
s_draw (const s_frame_t *f, int width, int height)
{
    fputs ("\033[H", stdout);
    size_t rows = f->n < (size_t) height ? f->n : (size_t) height;
    for (size_t i = 0; i < rows; i++) {
        s_fit (stdout, f->lines[i], width - 1); // the last column wraps on some terminals
        fputs ("\033[K", stdout);
        if (i + 1 < rows)
            fputs ("\r\n", stdout);
    }
    fputs ("\033[J", stdout);
    fflush (stdout);
}

// s_stop_here suspends the process the way Ctrl-Z asked, with the terminal
// as the shell expects it, and takes it again once continued (fg).
static void
s_stop_here (void)
{
    s_suspend = 0;
    s_restore ();
    signal (SIGTSTP, SIG_DFL);
    raise (SIGTSTP); // stops here until SIGCONT
    s_enter ();
    s_resized = 1; // redraw the whole frame
}

// s_wait sleeps up to ms, reading keys from a terminal stdin. Returns true
// when q (or Q) was pressed.
static bool
s_wait (int ms, bool keys)
{
    int64_t until = cgq_now_ms () + ms;
    for (;;) {
        if (cgq_cli_signal || s_resized || s_suspend)
            return false;
        int left = (int) (until - cgq_now_ms ());
        if (left <= 0)
            return false;
        if (!keys) {
            cgq_cli_sleep_ms (left);
            continue;
        }
        struct pollfd p = {STDIN_FILENO, POLLIN, 0};
        int r = poll (&p, 1, left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) {
            // the terminal went away: nothing more to read; sleep instead
            keys = false;
            continue;
        }
        char buf[64];
        ssize_t got = read (STDIN_FILENO, buf, sizeof buf);
        if (got <= 0) {
            keys = false;
            continue;
        }
        for (ssize_t i = 0; i < got; i++)
            if (buf[i] == 'q' || buf[i] == 'Q')
                return true;
    }
}

int
cgq_cmd_watch (cgq_cli_t *cli)
{
    uint64_t top, interval;
    if (cgq_cli_opt_u64 (cli, "top", 5, 1, 100, &top) < 0 ||
        cgq_cli_opt_u64 (cli, "interval", 1000, 100, 60000, &interval) < 0)
        return CGQ_EXIT_BAD;
    cgq_store_t *store = NULL;
    cgq_job_rec_t *job = NULL;
    int rc = cgq_cli_load_job (cli, cli->pos[0], &store, &job);
    if (rc != CGQ_EXIT_OK)
        return rc;
    uint64_t job_id = job->id;
    char err[512], line[1024];
    cgq_cli_catch_signals ();
    bool tty = isatty (STDOUT_FILENO);
    bool keys = tty && isatty (STDIN_FILENO);
    if (tty && !cgq_job_rec_terminal (job))
        s_enter ();
    int64_t failing_since = 0, last_plain = 0;
    char last_key[128] = "";
    bool quit = false;
    rc = CGQ_EXIT_OK;
    while (!cgq_job_rec_terminal (job)) {
        double elapsed = job->created > 0 ? cgq_wall_s () - job->created : 0;
        if (tty) {
            int w, h;
            s_term_size (&w, &h);
            s_resized = 0;
            s_frame_t f = {0};
            if (s_build (&f, store, job, top, w - 1, err, sizeof err) < 0)
                s_frame_addf (&f, "(cannot read everything: %s; retrying)", err);
            s_draw (&f, w, h);
            s_frame_fini (&f);
        }
        else {
            char key[128];
            snprintf (key, sizeof key, "%" PRIu64 "/%" PRIu64 "/%" PRIu64 "/%d/%" PRIu64,
                      cgq_job_rec_done (job), job->counts[CGQ_TRIAL_RUNNING],
                      job->counts[CGQ_TRIAL_FAILED], job->has_best, job->best_trial);
            int64_t now = cgq_now_ms ();
            if (strcmp (key, last_key) && now - last_plain >= S_PLAIN_EVERY_MS) {
                printf ("%s\n", cgq_progress_line (line, sizeof line, job, elapsed, 0));
                fflush (stdout);
                snprintf (last_key, sizeof last_key, "%s", key);
                last_plain = now;
            }
        }
        if (s_wait ((int) interval, keys)) {
            quit = true;
            break;
        }
        if (cgq_cli_signal)
            break;
        if (s_suspend)
            s_stop_here ();
        cgq_job_rec_t *next = NULL;
        int vr = cgq_view_job_load (store, job_id, &next, err, sizeof err);
        if (vr == CGQ_VIEW_ABSENT) {
            rc = CGQ_EXIT_FAIL;
            break;
        }
        if (vr != CGQ_VIEW_OK) {
            // Redis restarting under us is survivable; one that stays away is not.
            int64_t now = cgq_now_ms ();
            if (!failing_since)
                failing_since = now;
            if (now - failing_since >= S_REDIS_GRACE_MS) {
                rc = CGQ_EXIT_FAIL;
                break;
            }
            continue;
        }
        failing_since = 0;
        cgq_job_rec_destroy (&job);
        job = next;
    }
    s_restore ();
    if (rc == CGQ_EXIT_FAIL)
        cgq_cli_error ("%s", err);
    else if (quit || cgq_cli_signal) {
        // The job goes on; say where it stands.
        double elapsed = job->created > 0 ? cgq_wall_s () - job->created : 0;
        printf ("%s\n", cgq_progress_line (line, sizeof line, job, elapsed, 0));
        if (cgq_cli_signal && !quit)
            rc = cgq_cli_signal == SIGINT ? 130 : 128 + cgq_cli_signal;
    }
    else {
        double took = job->finished > job->created && job->created > 0 ? job->finished - job->created
                                                                        : 0;
        printf ("%s\n", cgq_progress_line (line, sizeof line, job, took, 0));
        fflush (stdout);
        rc = cgq_run_report (store, job, false, top, false);
    }
    cgq_job_rec_destroy (&job);
    cgq_store_destroy (&store);
    return rc;
}
