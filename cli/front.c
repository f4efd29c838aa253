// front: a job's Pareto front, loaded, sorted, printed and plotted.
#include "front.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "pareto.h"
#include "svg.h"
#include "util.h"

// The hypervolume curve is computed at this many points at most, evenly
// spread over the trials (each is one hypervolume of the trials so far).
#define S_HV_STEPS 200

static void
s_list_init (cgq_front_list_t *l, const cgq_spec_t *spec)
{
    memset (l, 0, sizeof *l);
    l->spec = spec;
    l->m = (int) cgq_spec_objective_senses (spec, l->sense);
}

static void
s_list_add (cgq_front_list_t *l, cgq_trial_rec_t *rec, const double *v)
{
    l->rows = cgq_xrealloc (l->rows, (l->n + 1) * sizeof *l->rows);
    l->rows[l->n].rec = rec;
    memcpy (l->rows[l->n].v, v, (size_t) l->m * sizeof *v);
    l->n++;
}

static void
s_list_fini (cgq_front_list_t *l)
{
    for (size_t i = 0; i < l->n && !l->borrowed; i++)
        cgq_trial_rec_destroy (&l->rows[i].rec);
    free (l->rows);
    l->rows = NULL;
    l->n = 0;
}

// s_values computes a trial's objective values; false when it did not
// succeed, its metrics lack one, or it is infeasible (it violates the spec's
// constraints: never on the front).
static bool
s_values (const cgq_spec_t *spec, const cgq_trial_rec_t *t, double *v)
{
    return t->metrics && !strcmp (t->state, "succeeded") && t->feasible != 0
           && cgq_spec_objective_values (spec, t->metrics, v, NULL, 0) == 0;
}

// s_load_kept reads the trials named in cgq:job:{J}:pareto into l. Returns 1
// when there is no such record, 0 when read, -1 on error.
static int
s_load_kept (cgq_store_t *store, const cgq_job_rec_t *job, cgq_front_list_t *l, char *err,
             size_t errlen)
{
    char key[64];
    cgq_key_pareto (key, sizeof key, job->id);
    redisReply *ids = cgq_store_command (store, "HKEYS %s", key);
    if (!ids) {
        snprintf (err, errlen, "cannot read %s: %s", key, cgq_store_errstr (store));
        return -1;
    }
    int rc = ids->type == REDIS_REPLY_ARRAY && ids->elements ? 0 : 1;
    for (size_t i = 0; rc == 0 && i < ids->elements; i++) {
        cgq_trial_rec_t *t = NULL;
        int vr = cgq_view_trial_load (store, job, strtoull (ids->element[i]->str, NULL, 10), &t,
                                      err, errlen);
        if (vr == CGQ_VIEW_ERROR)
            rc = -1;
        double v[CGQ_SPEC_MAX_OBJECTIVES];
        if (vr == CGQ_VIEW_OK && s_values (l->spec, t, v))
            s_list_add (l, t, v);
        else
            cgq_trial_rec_destroy (&t);
    }
    freeReplyObject (ids);
    return rc;
}

// s_load_all reads every succeeded trial whose objectives compute into all.
static int
s_load_all (cgq_store_t *store, const cgq_job_rec_t *job, cgq_front_list_t *all,
            size_t *infeasible, char *err, size_t errlen)
{
    cgq_trial_rec_t **trials = NULL;
    size_t n = 0;
    if (cgq_view_trials_all (store, job, &trials, &n, err, errlen) != CGQ_VIEW_OK)
        return -1;
    for (size_t i = 0; i < n; i++) {
        double v[CGQ_SPEC_MAX_OBJECTIVES];
        *infeasible += !strcmp (trials[i]->state, "succeeded") && trials[i]->feasible == 0;
        if (s_values (all->spec, trials[i], v))
            s_list_add (all, trials[i], v);
        else
            cgq_trial_rec_destroy (&trials[i]);
    }
    free (trials);
    return 0;
}

// s_front_of fills front with the rows of all that no other row dominates;
// the records stay all's.
static void
s_front_of (const cgq_front_list_t *all, cgq_front_list_t *front)
{
    double *pts = cgq_xcalloc (all->n ? all->n * (size_t) all->m : 1, sizeof *pts);
    int *idx = cgq_xcalloc (all->n ? all->n : 1, sizeof *idx);
    for (size_t i = 0; i < all->n; i++)
        memcpy (&pts[i * (size_t) all->m], all->rows[i].v, (size_t) all->m * sizeof *pts);
    int k = cgq_pareto_front (pts, (int) all->n, all->m, all->sense, idx);
    for (int i = 0; i < k; i++)
        s_list_add (front, all->rows[idx[i]].rec, all->rows[idx[i]].v);
    front->borrowed = true;
    free (pts);
    free (idx);
}

static cgq_spec_t *
s_parse_spec (const cgq_job_rec_t *job, char *err, size_t errlen)
{
    return cgq_spec_parse (job->spec, strlen (job->spec), *job->spec_path ? job->spec_path : "spec",
                           err, errlen);
}

int
cgq_front_nobjectives (const cgq_job_rec_t *job)
{
    if (job->metric)
        return 1;
    char err[512];
    cgq_spec_t *spec = s_parse_spec (job, err, sizeof err);
    int m = spec ? (int) spec->nobjectives : 0;
    cgq_spec_destroy (&spec);
    return m;
}

int
cgq_front_load (cgq_store_t *store, const cgq_job_rec_t *job, bool with_all, cgq_front_t *f,
                int *nobjectives, char *err, size_t errlen)
{
    memset (f, 0, sizeof *f);
    char perr[1024];
    f->spec = s_parse_spec (job, perr, sizeof perr);
    if (!f->spec) {
        snprintf (err, errlen, "job %" PRIu64 "'s spec no longer parses: %s", job->id, perr);
        return -1;
    }
    if (nobjectives)
        *nobjectives = (int) f->spec->nobjectives;
    if (f->spec->nobjectives < 2) {
        cgq_spec_destroy (&f->spec);
        return 1;
    }
    s_list_init (&f->all, f->spec);
    s_list_init (&f->front, f->spec);
    int kept = with_all ? 1 : s_load_kept (store, job, &f->front, err, errlen);
    if (kept < 0)
        return -1;
    if (with_all || kept == 1) {
        if (s_load_all (store, job, &f->all, &f->infeasible, err, errlen) < 0)
            return -1;
        f->has_all = true;
    }
    if (kept == 1)
        s_front_of (&f->all, &f->front);
    else if (with_all && s_load_kept (store, job, &f->front, err, errlen) == 1)
        s_front_of (&f->all, &f->front);
    return 0;
}

void
cgq_front_fini (cgq_front_t *f)
{
    s_list_fini (&f->front);
    s_list_fini (&f->all);
    cgq_spec_destroy (&f->spec);
}

static const cgq_spec_t *s_sort_spec; // for s_row_cmp (qsort has no context)

// s_row_cmp orders rows by the first objective, best first, then the next
// objectives, then by trial id.
static int
s_row_cmp (const void *pa, const void *pb)
{
    const cgq_front_row_t *a = pa, *b = pb;
    for (size_t k = 0; k < s_sort_spec->nobjectives; k++) {
        int sense = cgq_spec_objective (s_sort_spec, k)->mode;
        double x = sense * a->v[k], y = sense * b->v[k];
        if (x != y)
            return x > y ? -1 : 1;
    }
    return a->rec->id < b->rec->id ? -1 : a->rec->id > b->rec->id;
}

static int
s_id_cmp (const void *pa, const void *pb)
{
    const cgq_front_row_t *a = pa, *b = pb;
    return a->rec->id < b->rec->id ? -1 : a->rec->id > b->rec->id;
}

void
cgq_front_sort (cgq_front_list_t *l, bool by_id)
{
    s_sort_spec = l->spec;
    if (l->n)
        qsort (l->rows, l->n, sizeof *l->rows, by_id ? s_id_cmp : s_row_cmp);
}

const char *
cgq_front_objectives (const cgq_spec_t *spec, char *buf, size_t n)
{
    size_t off = 0;
    buf[0] = 0;
    for (size_t k = 0; k < spec->nobjectives && off < n; k++) {
        const cgq_objective_t *o = cgq_spec_objective (spec, k);
        off += (size_t) snprintf (buf + off, n - off, "%s%s (%s)", k ? ", " : "", o->metric,
                                  o->mode > 0 ? "maximize" : "minimize");
    }
    return buf;
}

char *
cgq_front_param_text (const json_t *v)
{
    if (!v)
        return cgq_xstrdup ("");
    if (json_is_string (v))
        return cgq_xstrdup (json_string_value (v));
    return cgq_json_dumps (v);
}

void
cgq_front_print_table (const cgq_front_list_t *l, size_t top, FILE *f)
{
    const cgq_spec_t *spec = l->spec;
    size_t n = top && top < l->n ? top : l->n;
    size_t np = spec->nparams;
    size_t ncols = 1 + (size_t) l->m + np;
    char **cells = cgq_xcalloc ((n + 1) * ncols, sizeof *cells);
    size_t *w = cgq_xcalloc (ncols, sizeof *w);
    cells[0] = cgq_xstrdup ("trial");
    for (int k = 0; k < l->m; k++) {
        const cgq_objective_t *o = cgq_spec_objective (spec, (size_t) k);
        cells[1 + k] = cgq_xasprintf ("%s (%s)", o->metric, o->mode > 0 ? "maximize" : "minimize");
    }
    for (size_t p = 0; p < np; p++)
        cells[1 + (size_t) l->m + p] = cgq_xstrdup (spec->params[p].name);
    for (size_t i = 0; i < n; i++) {
        char **row = &cells[(i + 1) * ncols];
        row[0] = cgq_xasprintf ("%" PRIu64, l->rows[i].rec->id);
        for (int k = 0; k < l->m; k++)
            row[1 + k] = cgq_xasprintf ("%.6g", l->rows[i].v[k]);
        for (size_t p = 0; p < np; p++) {
            char *t = cgq_front_param_text (json_object_get (l->rows[i].rec->params,
                                                             spec->params[p].name));
            if (strlen (t) > 40)
                strcpy (t + 37, "...");
            row[1 + (size_t) l->m + p] = t;
        }
    }
    for (size_t i = 0; i < (n + 1) * ncols; i++)
        if (strlen (cells[i]) > w[i % ncols])
            w[i % ncols] = strlen (cells[i]);
    for (size_t i = 0; i <= n; i++) {
        for (size_t c = 0; c < ncols; c++) {
            const char *s = cells[i * ncols + c];
            if (c <= (size_t) l->m) // trial id and objective values: right-aligned
                fprintf (f, "%s%*s", c ? "  " : "", (int) w[c], s);
            else
                fprintf (f, "  %-*s", c + 1 < ncols ? (int) w[c] : 0, s);
        }
        fputc ('\n', f);
    }
    for (size_t i = 0; i < (n + 1) * ncols; i++)
        free (cells[i]);
    free (cells);
    free (w);
}

void
cgq_front_print_summary (cgq_front_t *f, const cgq_job_rec_t *job, size_t top, FILE *out)
{
    char objs[512];
    cgq_front_objectives (f->spec, objs, sizeof objs);
    uint64_t ok = job->counts[CGQ_TRIAL_SUCCEEDED];
    if (f->front.n == 0) {
        fprintf (out, "Pareto front: no trial yet (objectives %s)\n", objs);
        return;
    }
    fprintf (out, "Pareto front: %zu of %" PRIu64 " succeeded trial%s (objectives %s)\n",
             f->front.n, ok, ok == 1 ? "" : "s", objs);
    cgq_front_sort (&f->front, false);
    cgq_front_print_table (&f->front, top, out);
    if (top && f->front.n > top)
        fprintf (out, "(%zu more on the front: cgq pareto %" PRIu64 ")\n", f->front.n - top, job->id);
    else
        fprintf (out, "(cgq pareto %" PRIu64 " --plot FILE.svg draws it)\n", job->id);
}

// s_front_plot is every succeeded trial, the front over it as a staircase.
static cgq_svg_plot_t *
s_front_plot (const cgq_front_t *f, const cgq_job_rec_t *job)
{
    const cgq_front_list_t *all = &f->all, *front = &f->front;
    const cgq_objective_t *ox = cgq_spec_objective (f->spec, 0), *oy = cgq_spec_objective (f->spec, 1);
    char title[256], xl[160], yl[160];
    snprintf (title, sizeof title, "job %" PRIu64 " (%s): Pareto front, %zu of %zu trials%s",
              job->id, job->name, front->n, all->n, all->m > 2 ? " (first two objectives)" : "");
    snprintf (xl, sizeof xl, "%s (%s)", ox->metric, ox->mode > 0 ? "maximize" : "minimize");
    snprintf (yl, sizeof yl, "%s (%s)", oy->metric, oy->mode > 0 ? "maximize" : "minimize");
    cgq_svg_plot_t *p = cgq_svg_plot_new (title, xl, yl);
    size_t n = all->n, nf = front->n;
    double *x = cgq_xcalloc (n + nf + 1, sizeof *x), *y = cgq_xcalloc (n + nf + 1, sizeof *y);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        bool on = false;
        for (size_t j = 0; j < nf && !on; j++)
            on = front->rows[j].rec->id == all->rows[i].rec->id;
        if (!on) {
            x[k] = all->rows[i].v[0];
            y[k] = all->rows[i].v[1];
            k++;
        }
    }
    cgq_svg_plot_series (p, x, y, k, CGQ_SVG_MARKERS, "#9e9e9e", "dominated");
    // The front sorted along x, joined as a staircase.
    cgq_front_row_t *fr = cgq_xcalloc (nf ? nf : 1, sizeof *fr);
    memcpy (fr, front->rows, nf * sizeof *fr);
    for (size_t i = 1; i < nf; i++)
        for (size_t j = i; j > 0 && fr[j].v[0] < fr[j - 1].v[0]; j--) {
            cgq_front_row_t t = fr[j];
            fr[j] = fr[j - 1];
            fr[j - 1] = t;
        }
    for (size_t i = 0; i < nf; i++) {
        x[i] = fr[i].v[0];
        y[i] = fr[i].v[1];
    }
    cgq_svg_plot_series (p, x, y, nf, CGQ_SVG_STEPS, "#d62728", NULL);
    cgq_svg_plot_series (p, x, y, nf, CGQ_SVG_MARKERS, "#d62728", "Pareto front");
    free (fr);
    free (x);
    free (y);
    return p;
}

static int
s_by_finish (const void *pa, const void *pb)
{
    const cgq_front_row_t *a = pa, *b = pb;
    double fa = a->rec->has_finished ? a->rec->finished : INFINITY;
    double fb = b->rec->has_finished ? b->rec->finished : INFINITY;
    if (fa != fb)
        return fa < fb ? -1 : 1;
    return a->rec->id < b->rec->id ? -1 : a->rec->id > b->rec->id;
}

// s_hv_plot is the hypervolume of the trials finished so far, over their
// number. The reference point is each objective's worst value among all the
// trials, moved a tenth of the range further, so that the extreme trials
// count too; the title says so.
static cgq_svg_plot_t *
s_hv_plot (const cgq_front_t *f, const cgq_job_rec_t *job)
{
    const cgq_front_list_t *all = &f->all;
    int m = all->m;
    size_t n = all->n;
    cgq_front_row_t *rows = cgq_xcalloc (n ? n : 1, sizeof *rows);
    memcpy (rows, all->rows, n * sizeof *rows);
    qsort (rows, n, sizeof *rows, s_by_finish);
    double ref[CGQ_SPEC_MAX_OBJECTIVES];
    for (int k = 0; k < m; k++) {
        double worst = NAN, best = NAN;
        for (size_t i = 0; i < n; i++) {
            double v = rows[i].v[k] * all->sense[k]; // larger is better
            worst = i == 0 || v < worst ? v : worst;
            best = i == 0 || v > best ? v : best;
        }
        double margin = best > worst ? (best - worst) / 10 : fmax (fabs (worst) / 10, 1);
        ref[k] = (worst - margin) * all->sense[k];
    }
    double *pts = cgq_xcalloc (n ? n * (size_t) m : 1, sizeof *pts);
    for (size_t i = 0; i < n; i++)
        memcpy (&pts[i * (size_t) m], rows[i].v, (size_t) m * sizeof *pts);
    double *x = cgq_xcalloc (S_HV_STEPS + 1, sizeof *x), *y = cgq_xcalloc (S_HV_STEPS + 1, sizeof *y);
    size_t k = 0;
    bool cut = false;
    for (size_t s = 1; s <= S_HV_STEPS && n; s++) {
        size_t upto = n <= S_HV_STEPS ? s : (n * s + S_HV_STEPS - 1) / S_HV_STEPS;
        if (upto > n || (k && x[k - 1] == (double) upto))
            continue;
        double hv;
        if (cgq_pareto_hypervolume (pts, (int) upto, m, all->sense, ref, &hv) < 0) {
            cut = true; // past the bounds of the exact algorithm (m >= 3)
            break;
        }
        x[k] = (double) upto;
        y[k++] = hv;
    }
    char title[256];
    snprintf (title, sizeof title,
              "job %" PRIu64 ": hypervolume of the front (reference: each objective's worst, "
              "a tenth of its range beyond)%s",
              job->id, cut ? "; stopped where it got too costly to compute" : "");
    cgq_svg_plot_t *p = cgq_svg_plot_new (title, "trials finished", "hypervolume");
    cgq_svg_plot_integer_x (p);
    cgq_svg_plot_series (p, x, y, k, CGQ_SVG_STEPS, "#1f77b4", "hypervolume so far");
    free (rows);
    free (pts);
    free (x);
    free (y);
    return p;
}

int
cgq_front_plot (const cgq_front_t *f, const cgq_job_rec_t *job, const char *path, bool hypervolume,
                char *err, size_t errlen)
{
    cgq_svg_plot_t *plots[2] = {s_front_plot (f, job), hypervolume ? s_hv_plot (f, job) : NULL};
    // One plot is written as a plot of its own (cgq pareto --plot's format).
    int rc = plots[1] ? cgq_svg_plots_save (plots, 2, path, err, errlen)
                      : cgq_svg_plot_save (plots[0], path, err, errlen);
    cgq_svg_plot_destroy (&plots[0]);
    cgq_svg_plot_destroy (&plots[1]);
    return rc;
}
