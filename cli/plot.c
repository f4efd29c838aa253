// plot: `cgq plot JOB --out FILE.svg`. The first plot is the best objective
// value so far over the trials in the order they finished (a staircase), with
// every finished trial's value as a dot. When the best trials reported
// progress (the report stream of each trial), a second plot below it shows
// their learning curves: the objective metric (else the first numeric field)
// of each report over the report's epoch/step/iteration (or --x, else the
// report's number).
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "front.h"
#include "svg.h"
#include "util.h"
#include "view.h"

static const char *const s_colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                       "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
#define S_NCOLORS (sizeof s_colors / sizeof s_colors[0])

static int
s_by_finish (const void *a, const void *b)
{
    const cgq_trial_rec_t *x = *(cgq_trial_rec_t *const *) a;
    const cgq_trial_rec_t *y = *(cgq_trial_rec_t *const *) b;
    double fx = x->has_finished ? x->finished : INFINITY;
    double fy = y->has_finished ? y->finished : INFINITY;
    if (fx != fy)
        return fx < fy ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

// s_ranked: a trial with a value on the leaderboard, succeeded or stopped
// early (its last report is its value, as the coordinator ranks it), and
// not infeasible (constraints: never ranked, never the best so far).
static bool
s_ranked (const cgq_job_rec_t *job, const cgq_trial_rec_t *t)
{
    return job->metric && t->has_value && isfinite (t->value) && t->feasible != 0 &&
           (!strcmp (t->state, cgq_tstate_names[CGQ_TRIAL_SUCCEEDED]) ||
            !strcmp (t->state, cgq_tstate_names[CGQ_TRIAL_STOPPED]));
}

static bool
s_stopped (const cgq_trial_rec_t *t)
{
    return !strcmp (t->state, cgq_tstate_names[CGQ_TRIAL_STOPPED]);
}

static const char *const s_xkeys[] = {"epoch", "step", "iteration", "iter"};
#define S_NXKEYS (sizeof s_xkeys / sizeof s_xkeys[0])

// s_report_x picks the x of report i: the field xkey, else the first of
// epoch, step, iteration that is a number, else i + 1.
static double
s_report_x (const json_t *r, const char *xkey, size_t i)
{
    if (xkey) {
        const json_t *v = json_object_get (r, xkey);
        return json_is_number (v) ? json_number_value (v) : NAN;
    }
    for (size_t k = 0; k < S_NXKEYS; k++) {
        const json_t *v = json_object_get (r, s_xkeys[k]);
        if (json_is_number (v))
            return json_number_value (v);
    }
    return (double) (i + 1);
}

// s_x_label names the x axis after what s_report_x read: xkey, else the one
// x field every report with a y holds, else "report number".
static const char *
s_x_label (json_t *const *reports, size_t n, const char *xkey, const char *metric)
{
    if (xkey)
        return xkey;
    const char *seen = NULL;
    for (size_t t = 0; t < n; t++) {
        size_t i;
        json_t *r;
        json_array_foreach (reports[t], i, r) {
            if (!json_is_number (json_object_get (r, metric)))
                continue;
            const char *used = NULL;
            for (size_t k = 0; k < S_NXKEYS && !used; k++)
                if (json_is_number (json_object_get (r, s_xkeys[k])))
                    used = s_xkeys[k];
            if (!used || (seen && strcmp (seen, used)))
                return used ? "epoch, step or iteration" : "report number";
            seen = used;
        }
    }
    return seen ? seen : "report number";
}

// s_times counts the reports of one trial that hold metric as a number.
static size_t
s_times (const json_t *reports, const char *metric)
{
    size_t i, n = 0;
    json_t *r;
    json_array_foreach (reports, i, r)
        n += json_is_number (json_object_get (r, metric));
    return n;
}

// s_curve_metric chooses the y of the learning curves: the objective metric
// when some trial reported it at least twice (a curve, not a dot), else the
// first numeric field, not an x field, that some trial reported twice. NULL
// when no trial reported any metric twice: then there is no curve to draw.
static const char *
s_curve_metric (const cgq_job_rec_t *job, json_t *const *reports, size_t n, const char *xkey)
{
    for (size_t t = 0; t < n && job->metric; t++)
        if (s_times (reports[t], job->metric) >= 2)
            return job->metric;
    for (size_t t = 0; t < n; t++) {
        size_t i;
        json_t *r;
        json_array_foreach (reports[t], i, r) {
            const char *k;
            json_t *v;
            json_object_foreach (r, k, v) {
                bool is_x = false;
                for (size_t x = 0; x < S_NXKEYS && !xkey; x++)
                    is_x = is_x || !strcmp (k, s_xkeys[x]);
                if (xkey)
                    is_x = !strcmp (k, xkey);
                if (json_is_number (v) && !is_x && s_times (reports[t], k) >= 2)
                    return k;
            }
        }
    }
    return NULL;
}

// s_any_report says whether any of the trials has a report.
static bool
s_any_report (json_t *const *reports, size_t n)
{
    for (size_t t = 0; t < n; t++)
        if (json_array_size (reports[t]))
            return true;
    return false;
}

// s_plot_front draws a job with several objectives: its front among every
// succeeded trial, and the front's hypervolume as the trials finished.
static int
s_plot_front (cgq_store_t *store, const cgq_job_rec_t *job, const char *out)
{
    char err[1024];
    cgq_front_t f;
    int rc = cgq_front_load (store, job, true, &f, NULL, err, sizeof err);
    if (rc == 1) {
        cgq_cli_error ("job %" PRIu64 " has no objective: nothing to plot (cgq results %" PRIu64
                       " --format csv gives its metrics)",
                       job->id, job->id);
        return CGQ_EXIT_BAD;
    }
    if (rc == 0 && cgq_front_plot (&f, job, out, true, err, sizeof err) == 0)
        printf ("wrote %s: the Pareto front, %zu of %zu succeeded trials, and its hypervolume as "
                "they finished (cgq pareto %" PRIu64 " lists it)\n",
                out, f.front.n, f.all.n, job->id);
    else {
        cgq_cli_error ("%s", err);
        rc = CGQ_EXIT_FAIL;
    }
    cgq_front_fini (&f);
    return rc;
}

int
cgq_cmd_plot (cgq_cli_t *cli)
{
    const char *out = cgq_cli_opt (cli, "out");
    const char *xkey = cgq_cli_opt (cli, "x");
    uint64_t top;
    if (!out || !*out) {
        cgq_cli_error ("cgq plot needs --out FILE.svg (see cgq plot --help)");
        return CGQ_EXIT_BAD;
    }
    if (cgq_cli_opt_u64 (cli, "top", 5, 1, S_NCOLORS, &top) < 0)
        return CGQ_EXIT_BAD;
    cgq_store_t *store = NULL;
    cgq_job_rec_t *job = NULL;
    int rc = cgq_cli_load_job (cli, cli->pos[0], &store, &job);
    if (rc != CGQ_EXIT_OK)
        return rc;
    char err[512];
    if (!job->metric) {
        rc = s_plot_front (store, job, out);
        cgq_job_rec_destroy (&job);
        cgq_store_destroy (&store);
        return rc;
    }
    cgq_trial_rec_t **trials = NULL;
    size_t n = 0;
    if (cgq_view_trials_all (store, job, &trials, &n, err, sizeof err) != CGQ_VIEW_OK) {
        cgq_cli_error ("%s", err);
        cgq_job_rec_destroy (&job);
        cgq_store_destroy (&store);
        return CGQ_EXIT_FAIL;
    }
    // trials[] is best first: the first `top` ranked ones get learning curves.
    size_t ncurves = 0;
    json_t **reports = cgq_xcalloc (top, sizeof *reports);
    uint64_t *curve_ids = cgq_xcalloc (top, sizeof *curve_ids);
    for (size_t i = 0; i < n && ncurves < top && rc == CGQ_EXIT_OK; i++) {
        if (!s_ranked (job, trials[i]))
            continue;
        if (cgq_view_reports (store, job->id, trials[i]->id, &reports[ncurves], err, sizeof err) !=
            CGQ_VIEW_OK) {
            cgq_cli_error ("%s", err);
            rc = CGQ_EXIT_FAIL;
            break;
        }
        curve_ids[ncurves++] = trials[i]->id;
    }

    // the best so far, in the order the trials finished
    size_t nr = 0;
    double *x = cgq_xcalloc (n ? n : 1, sizeof *x), *y = cgq_xcalloc (n ? n : 1, sizeof *y);
    double *best = cgq_xcalloc (n ? n : 1, sizeof *best);
    cgq_trial_rec_t **order = cgq_xcalloc (n ? n : 1, sizeof *order);
    for (size_t i = 0; i < n; i++)
        if (s_ranked (job, trials[i]))
            order[nr++] = trials[i];
    qsort (order, nr, sizeof *order, s_by_finish);
    for (size_t i = 0; i < nr; i++) {
        x[i] = (double) (i + 1);
        y[i] = order[i]->value;
        bool better = i == 0 || (job->mode > 0 ? y[i] > best[i - 1] : y[i] < best[i - 1]);
        best[i] = better ? y[i] : best[i - 1];
    }
    char *title = cgq_xasprintf ("job %" PRIu64 " %s: best %s so far (%s)", job->id, job->name,
                                 job->metric, job->mode > 0 ? "maximize" : "minimize");
    cgq_svg_plot_t *plots[2] = {cgq_svg_plot_new (title, "trials finished", job->metric), NULL};
    free (title);
    cgq_svg_plot_integer_x (plots[0]);
    // Trials an early stopper ended are dots of their own colour.
    double *sx = cgq_xcalloc (nr ? nr : 1, sizeof *sx), *sy = cgq_xcalloc (nr ? nr : 1, sizeof *sy);
    size_t ns = 0, nd = 0;
    for (size_t i = 0; i < nr; i++) {
        if (s_stopped (order[i])) {
            sx[ns] = x[i];
            sy[ns++] = y[i];
        }
        else {
            x[nd] = x[i];
            y[nd++] = y[i];
        }
    }
    cgq_svg_plot_series (plots[0], x, y, nd, CGQ_SVG_MARKERS, "#9ab", "each trial");
    if (ns)
        cgq_svg_plot_series (plots[0], sx, sy, ns, CGQ_SVG_MARKERS, "#e377c2", "stopped early");
    free (sx);
    free (sy);
    for (size_t i = 0; i < nr; i++)
        x[i] = (double) (i + 1);
    cgq_svg_plot_series (plots[0], x, best, nr, CGQ_SVG_STEPS, "#1f77b4", "best so far");

    // learning curves
    size_t drawn = 0;
    const char *metric = rc == CGQ_EXIT_OK ? s_curve_metric (job, reports, ncurves, xkey) : NULL;
    if (metric) {
        title = cgq_xasprintf ("job %" PRIu64 " %s: learning curves of the top %zu", job->id,
                               job->name, ncurves);
        plots[1] = cgq_svg_plot_new (title, s_x_label (reports, ncurves, xkey, metric), metric);
        free (title);
        for (size_t t = 0; t < ncurves; t++) {
            size_t m = json_array_size (reports[t]), k = 0;
            double *cx = cgq_xcalloc (m ? m : 1, sizeof *cx), *cy = cgq_xcalloc (m ? m : 1, sizeof *cy);
            size_t i;
            json_t *r;
            json_array_foreach (reports[t], i, r) {
                const json_t *v = json_object_get (r, metric);
                if (!json_is_number (v))
                    continue;
                cx[k] = s_report_x (r, xkey, i);
                cy[k] = json_number_value (v);
                k++;
            }
            if (k) {
                char legend[64];
                snprintf (legend, sizeof legend, "trial %" PRIu64, curve_ids[t]);
                // One report is a dot: a line through one point draws nothing.
                cgq_svg_plot_series (plots[1], cx, cy, k, k == 1 ? CGQ_SVG_MARKERS : CGQ_SVG_LINE,
                                     s_colors[t % S_NCOLORS], legend);
                drawn++;
            }
            free (cx);
            free (cy);
        }
    }
    if (rc == CGQ_EXIT_OK) {
        if (cgq_svg_plots_save (plots, plots[1] ? 2 : 1, out, err, sizeof err) < 0) {
            cgq_cli_error ("%s", err);
            rc = CGQ_EXIT_FAIL;
        }
        else if (plots[1])
            printf ("wrote %s: best %s over %zu finished trials; learning curves (%s) of %zu\n",
                    out, job->metric, nr, metric, drawn);
        else
            printf ("wrote %s: best %s over %zu finished trials (%s)\n", out, job->metric, nr,
                    s_any_report (reports, ncurves)
                        ? "no learning curves: the top trials reported each metric at most once; "
                          "report progress each epoch (cgq.report in Python) for curves"
                        : "no trial reported progress");
    }
    cgq_svg_plot_destroy (&plots[0]);
    cgq_svg_plot_destroy (&plots[1]);
    for (size_t t = 0; t < ncurves; t++)
        json_decref (reports[t]);
    free (reports);
    free (curve_ids);
    free (x);
    free (y);
    free (best);
    free (order);
    cgq_view_trials_free (trials, n);
    cgq_job_rec_destroy (&job);
    cgq_store_destroy (&store);
    return rc;
}
