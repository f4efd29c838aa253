// pareto: `cgq pareto JOB`, the Pareto front of a job with several
// objectives, as the coordinator keeps it in cgq:job:{J}:pareto: a table, JSON,
// CSV, seed 002's dump, and an SVG plot of the front among every trial.
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "json.h"
#include "pareto.h"
#include "spec.h"
#include "svg.h"
#include "util.h"
#include "view.h"

// One trial of the listing: its record and its objective values.
typedef struct {
    cgq_trial_rec_t *rec;
    double v[CGQ_SPEC_MAX_OBJECTIVES];
} s_row_t;

typedef struct {
    const cgq_spec_t *spec;
    int m;                               // objectives
    int sense[CGQ_SPEC_MAX_OBJECTIVES];  // +1 max, -1 min
    s_row_t *rows;
    size_t n;
} s_list_t;

static const cgq_spec_t *s_sort_spec; // for s_row_cmp (qsort has no context)

// s_row_cmp orders rows by the first objective, best first, then the next
// objectives, then by trial id.
static int
s_row_cmp (const void *pa, const void *pb)
{
    const s_row_t *a = pa, *b = pb;
    for (size_t k = 0; k < s_sort_spec->nobjectives; k++) {
        int sense = cgq_spec_objective (s_sort_spec, k)->mode;
        double x = sense * a->v[k], y = sense * b->v[k];
        if (x != y)
            return x > y ? -1 : 1;
    }
    return a->rec->id < b->rec->id ? -1 : a->rec->id > b->rec->id;
}

static void
s_list_add (s_list_t *l, cgq_trial_rec_t *rec, const double *v)
{
    l->rows = cgq_xrealloc (l->rows, (l->n + 1) * sizeof *l->rows);
    l->rows[l->n].rec = rec;
    memcpy (l->rows[l->n].v, v, (size_t) l->m * sizeof *v);
    l->n++;
}

static void
s_list_fini (s_list_t *l)
{
    for (size_t i = 0; i < l->n; i++)
        cgq_trial_rec_destroy (&l->rows[i].rec);
    free (l->rows);
}

// s_values computes a trial's objective values; false when it did not
// succeed or its metrics lack one.
static bool
s_values (const cgq_spec_t *spec, const cgq_trial_rec_t *t, double *v)
{
    return t->metrics && !strcmp (t->state, "succeeded")
           && cgq_spec_objective_values (spec, t->metrics, v, NULL, 0) == 0;
}

// s_load_front reads the trials named in cgq:job:{J}:pareto into l.
static int
s_load_front (cgq_store_t *store, const cgq_job_rec_t *job, s_list_t *l, char *err, size_t errlen)
{
    char key[64];
    redisReply *ids = cgq_store_command (store, "HKEYS %s", cgq_key_pareto (key, sizeof key, job->id));
    if (!ids) {
        snprintf (err, errlen, "cannot read %s: %s", key, cgq_store_errstr (store));
        return -1;
    }
    for (size_t i = 0; ids->type == REDIS_REPLY_ARRAY && i < ids->elements; i++) {
        cgq_trial_rec_t *t = NULL;
        int rc = cgq_view_trial_load (store, job, strtoull (ids->element[i]->str, NULL, 10), &t,
                                      err, errlen);
        if (rc == CGQ_VIEW_ERROR) {
            freeReplyObject (ids);
            return -1;
        }
        double v[CGQ_SPEC_MAX_OBJECTIVES];
        if (rc == CGQ_VIEW_OK && s_values (l->spec, t, v))
            s_list_add (l, t, v);
        else
            cgq_trial_rec_destroy (&t);
    }
    freeReplyObject (ids);
    return 0;
}

// s_load_all reads every succeeded trial whose objectives can be computed
// into all.
static int
s_load_all (cgq_store_t *store, const cgq_job_rec_t *job, s_list_t *all, char *err, size_t errlen)
{
    cgq_trial_rec_t **trials = NULL;
    size_t n = 0;
    if (cgq_view_trials_all (store, job, &trials, &n, err, errlen) != CGQ_VIEW_OK)
        return -1;
    for (size_t i = 0; i < n; i++) {
        double v[CGQ_SPEC_MAX_OBJECTIVES];
        if (s_values (all->spec, trials[i], v))
            s_list_add (all, trials[i], v);
        else
            cgq_trial_rec_destroy (&trials[i]);
    }
    free (trials);
    return 0;
}

// s_front_of fills front with the rows of all that no other row dominates
// (the records are borrowed: front->rows[i].rec must not be destroyed).
static void
s_front_of (const s_list_t *all, s_list_t *front)
{
    double *pts = cgq_xcalloc (all->n ? all->n * (size_t) all->m : 1, sizeof *pts);
    int *idx = cgq_xcalloc (all->n ? all->n : 1, sizeof *idx);
    for (size_t i = 0; i < all->n; i++)
        memcpy (&pts[i * (size_t) all->m], all->rows[i].v, (size_t) all->m * sizeof *pts);
    int k = cgq_pareto_front (pts, (int) all->n, all->m, all->sense, idx);
    for (int i = 0; i < k; i++)
        s_list_add (front, all->rows[idx[i]].rec, all->rows[idx[i]].v);
    free (pts);
    free (idx);
}

// --------------------------------------------------------------- output

// s_text is a param value as text: strings bare, the rest as compact JSON.
static char *
s_text (const json_t *v)
{
    if (!v)
        return cgq_xstrdup ("");
    if (json_is_string (v))
        return cgq_xstrdup (json_string_value (v));
    return cgq_json_dumps (v);
}

// s_param_names lists the spec's param names, in the order written.
static size_t
s_param_names (const cgq_spec_t *spec, const char **names)
{
    size_t n = 0;
    for (size_t i = 0; i < spec->nparams; i++)
        names[n++] = spec->params[i].name;
    return n;
}

static void
s_print_table (const s_list_t *l, FILE *f)
{
    const cgq_spec_t *spec = l->spec;
    const char **pn = cgq_xcalloc (spec->nparams + 1, sizeof *pn);
    size_t np = s_param_names (spec, pn);
    size_t ncols = 1 + (size_t) l->m + np;
    char **cells = cgq_xcalloc ((l->n + 1) * ncols, sizeof *cells);
    size_t *w = cgq_xcalloc (ncols, sizeof *w);
    cells[0] = cgq_xstrdup ("trial");
    for (int k = 0; k < l->m; k++) {
        const cgq_objective_t *o = cgq_spec_objective (spec, (size_t) k);
        cells[1 + k] = cgq_xasprintf ("%s (%s)", o->metric, o->mode > 0 ? "max" : "min");
    }
    for (size_t p = 0; p < np; p++)
        cells[1 + (size_t) l->m + p] = cgq_xstrdup (pn[p]);
    for (size_t i = 0; i < l->n; i++) {
        char **row = &cells[(i + 1) * ncols];
        row[0] = cgq_xasprintf ("%" PRIu64, l->rows[i].rec->id);
        for (int k = 0; k < l->m; k++)
            row[1 + k] = cgq_xasprintf ("%.6g", l->rows[i].v[k]);
        for (size_t p = 0; p < np; p++) {
            char *t = s_text (json_object_get (l->rows[i].rec->params, pn[p]));
            if (strlen (t) > 40)
                strcpy (t + 37, "...");
            row[1 + (size_t) l->m + p] = t;
        }
    }
    for (size_t i = 0; i < (l->n + 1) * ncols; i++)
        if (strlen (cells[i]) > w[i % ncols])
            w[i % ncols] = strlen (cells[i]);
    for (size_t i = 0; i <= l->n; i++) {
        for (size_t c = 0; c < ncols; c++) {
            const char *s = cells[i * ncols + c];
            if (c <= (size_t) l->m) // trial id and objective values: right-aligned
                fprintf (f, "%s%*s", c ? "  " : "", (int) w[c], s);
            else
                fprintf (f, "  %-*s", c + 1 < ncols ? (int) w[c] : 0, s);
        }
        fputc ('\n', f);
    }
    for (size_t i = 0; i < (l->n + 1) * ncols; i++)
        free (cells[i]);
    free (cells);
    free (w);
    free (pn);
}

// s_csv_field writes s as an RFC 4180 field.
static void
s_csv_field (FILE *f, const char *s, bool first)
{
    if (!first)
        fputc (',', f);
    if (!strpbrk (s, ",\"\r\n")) {
        fputs (s, f);
        return;
    }
    fputc ('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc ('"', f);
        fputc (*s, f);
    }
    fputc ('"', f);
}

static void
s_print_csv (const s_list_t *l, FILE *f)
{
    const cgq_spec_t *spec = l->spec;
    const char **pn = cgq_xcalloc (spec->nparams + 1, sizeof *pn);
    size_t np = s_param_names (spec, pn);
    s_csv_field (f, "id", true);
    for (int k = 0; k < l->m; k++)
        s_csv_field (f, cgq_spec_objective (spec, (size_t) k)->metric, false);
    for (size_t p = 0; p < np; p++)
        s_csv_field (f, pn[p], false);
    fputc ('\n', f);
    char num[32];
    for (size_t i = 0; i < l->n; i++) {
        fprintf (f, "%" PRIu64, l->rows[i].rec->id);
        for (int k = 0; k < l->m; k++)
            s_csv_field (f, cgq_fmt_double (num, l->rows[i].v[k]), false);
        for (size_t p = 0; p < np; p++) {
            char *t = s_text (json_object_get (l->rows[i].rec->params, pn[p]));
            s_csv_field (f, t, false);
            free (t);
        }
        fputc ('\n', f);
    }
    free (pn);
}

static void
s_print_json (const s_list_t *l, const cgq_job_rec_t *job, FILE *f)
{
    json_t *doc = json_object (), *objs = json_array (), *trials = json_array ();
    json_object_set_new (doc, "job", json_integer ((json_int_t) job->id));
    for (int k = 0; k < l->m; k++) {
        const cgq_objective_t *o = cgq_spec_objective (l->spec, (size_t) k);
        json_array_append_new (objs, json_pack ("{s:s, s:s}", "metric", o->metric, "mode",
                                                o->mode > 0 ? "max" : "min"));
    }
    json_object_set_new (doc, "objectives", objs);
    for (size_t i = 0; i < l->n; i++) {
        const cgq_trial_rec_t *t = l->rows[i].rec;
        json_array_append_new (trials, json_pack ("{s:I, s:O, s:O}", "id", (json_int_t) t->id,
                                                  "params", t->params ? t->params : json_null (),
                                                  "metrics", t->metrics));
    }
    json_object_set_new (doc, "trials", trials);
    char *text = cgq_json_dumps (doc);
    fprintf (f, "%s\n", text);
    free (text);
    json_decref (doc);
}

// s_seed002_value is t's metric name as reported (a JSON number, new
// reference) if it has it, else objective k's value.
static json_t *
s_seed002_value (const s_row_t *r, const char *name, int k)
{
    json_t *v = json_object_get (r->rec->metrics, name);
    return json_is_number (v) ? json_incref (v) : json_real (r->v[k]);
}

static int
s_print_seed002 (const s_list_t *l, FILE *f)
{
    const cgq_param_t *asg = NULL;
    for (size_t i = 0; i < l->spec->nparams; i++)
        if (l->spec->params[i].kind == CGQ_PARAM_ASSIGNMENT) {
            if (asg) {
                cgq_cli_error ("--format seed002 needs exactly one assignment param; the space has "
                               "'%s' and '%s' (use --format json)",
                               asg->name, l->spec->params[i].name);
                return CGQ_EXIT_BAD;
            }
            asg = &l->spec->params[i];
        }
    if (!asg) {
        cgq_cli_error ("--format seed002 needs an assignment param in the space (items x choices); "
                       "this job has none (use --format json or csv)");
        return CGQ_EXIT_BAD;
    }
    // The dump lists solutions by id, as seed 002's profiler writes them.
    s_row_t *rows = cgq_xcalloc (l->n ? l->n : 1, sizeof *rows);
    memcpy (rows, l->rows, l->n * sizeof *rows);
    json_t *doc = json_object (), *sol = json_array ();
    json_object_set (doc, "oplist", asg->items);
    for (size_t i = 0; i < l->n; i++) {
        json_t *a = json_object_get (rows[i].rec->params, asg->name);
        json_t *id = json_object_get (a, "id");
        json_array_append_new (sol, json_pack ("{s:O, s:o, s:o}", "id", id ? id : json_null (),
                                               "time", s_seed002_value (&rows[i], "time", 0),
                                               "memory", s_seed002_value (&rows[i], "memory", 1)));
    }
    json_object_set_new (doc, "solutions", sol);
    char *text = cgq_json_dumps (doc);
    fprintf (f, "%s\n", text);
    free (text);
    json_decref (doc);
    free (rows);
    return CGQ_EXIT_OK;
}

static int
s_id_cmp (const void *pa, const void *pb)
{
    const s_row_t *a = pa, *b = pb;
    return a->rec->id < b->rec->id ? -1 : a->rec->id > b->rec->id;
}

// s_plot draws every succeeded trial, the front over it as a staircase.
static int
s_plot (const s_list_t *all, const s_list_t *front, const cgq_job_rec_t *job, const char *path)
{
    const cgq_objective_t *ox = cgq_spec_objective (all->spec, 0),
                          *oy = cgq_spec_objective (all->spec, 1);
    char title[256], xl[160], yl[160];
    snprintf (title, sizeof title, "job %" PRIu64 " (%s): Pareto front, %zu of %zu trials%s",
              job->id, job->name, front->n, all->n,
              all->m > 2 ? " (first two objectives)" : "");
    snprintf (xl, sizeof xl, "%s (%s)", ox->metric, ox->mode > 0 ? "max" : "min");
    snprintf (yl, sizeof yl, "%s (%s)", oy->metric, oy->mode > 0 ? "max" : "min");
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
    s_row_t *fr = cgq_xcalloc (nf ? nf : 1, sizeof *fr);
    memcpy (fr, front->rows, nf * sizeof *fr);
    for (size_t i = 1; i < nf; i++)
        for (size_t j = i; j > 0 && fr[j].v[0] < fr[j - 1].v[0]; j--) {
            s_row_t t = fr[j];
            fr[j] = fr[j - 1];
            fr[j - 1] = t;
        }
    for (size_t i = 0; i < nf; i++) {
        x[i] = fr[i].v[0];
        y[i] = fr[i].v[1];
    }
    cgq_svg_plot_series (p, x, y, nf, CGQ_SVG_STEPS, "#d62728", NULL);
    cgq_svg_plot_series (p, x, y, nf, CGQ_SVG_MARKERS, "#d62728", "Pareto front");
    char err[512];
    int rc = cgq_svg_plot_save (p, path, err, sizeof err);
    if (rc < 0)
        cgq_cli_error ("%s", err);
    cgq_svg_plot_destroy (&p);
    free (fr);
    free (x);
    free (y);
    return rc < 0 ? CGQ_EXIT_FAIL : CGQ_EXIT_OK;
}

int
cgq_cmd_pareto (cgq_cli_t *cli)
{
    const char *format = cgq_cli_opt (cli, "format");
    const char *plot = cgq_cli_opt (cli, "plot");
    bool everything = cgq_cli_flag (cli, "all");
    if (!format)
        format = "table";
    if (strcmp (format, "table") && strcmp (format, "csv") && strcmp (format, "json")
        && strcmp (format, "seed002")) {
        cgq_cli_error ("bad --format '%s' (expected table, json, csv or seed002)", format);
        return CGQ_EXIT_BAD;
    }
    cgq_store_t *store = NULL;
    cgq_job_rec_t *job = NULL;
    int rc = cgq_cli_load_job (cli, cli->pos[0], &store, &job);
    if (rc != CGQ_EXIT_OK)
        return rc;
    uint64_t id = job->id;
    char err[1024];
    cgq_spec_t *spec = cgq_spec_parse (job->spec, strlen (job->spec),
                                       *job->spec_path ? job->spec_path : "spec", err, sizeof err);
    s_list_t all = {0}, front = {0};
    bool kept = false; // the coordinator keeps this job's front (else computed here)
    char key[64];
    if (!spec) {
        cgq_cli_error ("job %" PRIu64 "'s spec no longer parses: %s", id, err);
        rc = CGQ_EXIT_FAIL;
        goto done;
    }
    if (spec->nobjectives < 2) {
        cgq_cli_error ("job %" PRIu64 " has %s, not several: it has no Pareto front (see cgq "
                       "results %" PRIu64 ")",
                       id, spec->nobjectives ? "one objective" : "no objective", id);
        rc = CGQ_EXIT_BAD;
        goto done;
    }
    all.spec = front.spec = spec;
    all.m = front.m = (int) cgq_spec_objective_senses (spec, all.sense);
    memcpy (front.sense, all.sense, sizeof front.sense);
    redisReply *ex = cgq_store_command (store, "EXISTS %s", cgq_key_pareto (key, sizeof key, id));
    kept = ex && ex->type == REDIS_REPLY_INTEGER && ex->integer == 1;
    if (ex)
        freeReplyObject (ex);
    bool need_all = everything || plot || !kept;
    if (need_all && s_load_all (store, job, &all, err, sizeof err) < 0) {
        cgq_cli_error ("%s", err);
        rc = CGQ_EXIT_FAIL;
        goto done;
    }
    if (!kept)
        s_front_of (&all, &front);
    else if (s_load_front (store, job, &front, err, sizeof err) < 0) {
        cgq_cli_error ("%s", err);
        rc = CGQ_EXIT_FAIL;
        goto done;
    }
    s_sort_spec = spec;
    s_list_t *out = everything ? &all : &front;
    qsort (out->rows, out->n, sizeof *out->rows, strcmp (format, "seed002") ? s_row_cmp : s_id_cmp);
    if (!strcmp (format, "json"))
        s_print_json (out, job, stdout);
    else if (!strcmp (format, "csv"))
        s_print_csv (out, stdout);
    else if (!strcmp (format, "seed002"))
        rc = s_print_seed002 (out, stdout);
    else if (out->n == 0)
        printf ("job %" PRIu64 " has no succeeded trial yet\n", id);
    else
        s_print_table (out, stdout);
    if (rc == CGQ_EXIT_OK && plot)
        rc = s_plot (&all, &front, job, plot);
done:
    // Front rows borrow all's records unless the front was read on its own.
    if (!kept)
        front.n = 0;
    s_list_fini (&front);
    s_list_fini (&all);
    cgq_spec_destroy (&spec);
    cgq_job_rec_destroy (&job);
    cgq_store_destroy (&store);
    return rc;
}
