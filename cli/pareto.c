// pareto: `cgq pareto JOB`, the Pareto front of a job with several
// objectives, as the coordinator keeps it in cgq:job:{J}:pareto: a table, JSON,
// CSV, seed 002's dump, and an SVG plot of the front among every trial.
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "front.h"
#include "json.h"
#include "util.h"

// --------------------------------------------------------------- output

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
s_print_csv (const cgq_front_list_t *l, FILE *f)
{
    const cgq_spec_t *spec = l->spec;
    size_t np = spec->nparams;
    s_csv_field (f, "id", true);
    for (int k = 0; k < l->m; k++)
        s_csv_field (f, cgq_spec_objective (spec, (size_t) k)->metric, false);
    for (size_t p = 0; p < np; p++)
        s_csv_field (f, spec->params[p].name, false);
    fputc ('\n', f);
    char num[32];
    for (size_t i = 0; i < l->n; i++) {
        fprintf (f, "%" PRIu64, l->rows[i].rec->id);
        for (int k = 0; k < l->m; k++)
            s_csv_field (f, cgq_fmt_double (num, l->rows[i].v[k]), false);
        for (size_t p = 0; p < np; p++) {
            char *t = cgq_front_param_text (json_object_get (l->rows[i].rec->params,
                                                             spec->params[p].name));
            s_csv_field (f, t, false);
            free (t);
        }
        fputc ('\n', f);
    }
}

static void
s_print_json (const cgq_front_list_t *l, const cgq_job_rec_t *job, FILE *f)
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

// s_seed002_value is t's metric name as reported if it has it, else
// objective k's value (a new reference). A whole number is written as an
// integer (78900, not 78900.0), as seed 002's tools write memory.
static json_t *
s_seed002_value (const cgq_front_row_t *r, const char *name, int k)
{
    json_t *v = json_object_get (r->rec->metrics, name);
    double x = json_is_number (v) ? json_number_value (v) : r->v[k];
    if (json_is_integer (v))
        return json_incref (v);
    if (x == floor (x) && fabs (x) < 9007199254740992.0) // 2^53: exact as a double
        return json_integer ((json_int_t) x);
    return json_real (x);
}

// s_sampler_config is the line seed 002's random sampler writes for one
// assignment: BACKENDS="c1;c2" OP_BACKEND_item=choice ... (each followed by
// a space, as it writes them).
static json_t *
s_sampler_config (const cgq_param_t *asg, const json_t *value)
{
    cgq_buf_t b;
    cgq_buf_init (&b);
    cgq_buf_puts (&b, "BACKENDS=\"");
    size_t i;
    json_t *c;
    json_array_foreach (asg->values, i, c)
        cgq_buf_printf (&b, "%s%s", i ? ";" : "", json_string_value (c));
    cgq_buf_puts (&b, "\" ");
    const json_t *map = json_object_get (value, "map");
    json_array_foreach (asg->items, i, c) {
        const char *item = json_string_value (c);
        const char *choice = json_string_value (json_object_get (map, item));
        cgq_buf_printf (&b, "OP_BACKEND_%s=%s ", item, choice ? choice : "");
    }
    json_t *s = json_string (b.data);
    cgq_buf_fini (&b);
    return s;
}

// s_print_seed002 writes seed 002's brute-force profiler dump
// ({oplist, solutions: [{id, time, memory}]}), or with sampler its random
// sampler's ({configs, oplist, solutions: [{exec_time, max_rss, id}], mode}).
static int
s_print_seed002 (const cgq_front_list_t *l, bool sampler, FILE *f)
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
    cgq_front_row_t *rows = cgq_xcalloc (l->n ? l->n : 1, sizeof *rows);
    memcpy (rows, l->rows, l->n * sizeof *rows);
    json_t *doc = json_object (), *sol = json_array (), *configs = json_object ();
    if (sampler)
        json_object_set_new (doc, "configs", configs);
    else
        json_decref (configs);
    json_object_set (doc, "oplist", asg->items);
    for (size_t i = 0; i < l->n; i++) {
        json_t *a = json_object_get (rows[i].rec->params, asg->name);
        json_t *id = json_object_get (a, "id");
        json_t *t = s_seed002_value (&rows[i], "time", 0), *m = s_seed002_value (&rows[i], "memory", 1);
        if (sampler) {
            char key[32];
            snprintf (key, sizeof key, "%" JSON_INTEGER_FORMAT,
                      json_is_integer (id) ? json_integer_value (id) : (json_int_t) -1);
            json_object_set_new (configs, key, s_sampler_config (asg, a));
            json_array_append_new (sol, json_pack ("{s:o, s:o, s:O}", "exec_time", t, "max_rss", m,
                                                   "id", id ? id : json_null ()));
        }
        else
            json_array_append_new (sol, json_pack ("{s:O, s:o, s:o}", "id", id ? id : json_null (),
                                                   "time", t, "memory", m));
    }
    json_object_set_new (doc, "solutions", sol);
    if (sampler)
        json_object_set_new (doc, "mode", json_string ("name"));
    char *text = cgq_json_dumps (doc);
    fprintf (f, "%s\n", text);
    free (text);
    json_decref (doc);
    free (rows);
    return CGQ_EXIT_OK;
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
        && strcmp (format, "seed002") && strcmp (format, "seed002-sampler")) {
        cgq_cli_error ("bad --format '%s' (expected table, json, csv, seed002 or seed002-sampler)",
                       format);
        return CGQ_EXIT_BAD;
    }
    cgq_store_t *store = NULL;
    cgq_job_rec_t *job = NULL;
    int rc = cgq_cli_load_job (cli, cli->pos[0], &store, &job);
    if (rc != CGQ_EXIT_OK)
        return rc;
    uint64_t id = job->id;
    char err[1024];
    cgq_front_t f;
    int m = 0;
    // With constraints, every trial is read, to say how many infeasible
    // ones the front leaves out.
    bool constrained = strstr (job->spec, "constraints") != NULL;
    int lr = cgq_front_load (store, job, everything || plot || constrained, &f, &m, err,
                             sizeof err);
    if (lr < 0) {
        cgq_cli_error ("%s", err);
        rc = CGQ_EXIT_FAIL;
    }
    else if (lr == 1) {
        cgq_cli_error ("job %" PRIu64 " has %s, not several: it has no Pareto front (see cgq "
                       "results %" PRIu64 ")",
                       id, m ? "one objective" : "no objective", id);
        rc = CGQ_EXIT_BAD;
    }
    if (rc != CGQ_EXIT_OK)
        goto done;
    cgq_front_list_t *out = everything ? &f.all : &f.front;
    bool seed002 = !strncmp (format, "seed002", 7);
    cgq_front_sort (out, seed002);
    if (!strcmp (format, "json"))
        s_print_json (out, job, stdout);
    else if (!strcmp (format, "csv"))
        s_print_csv (out, stdout);
    else if (seed002)
        rc = s_print_seed002 (out, !strcmp (format, "seed002-sampler"), stdout);
    else if (out->n == 0)
        printf ("job %" PRIu64 " has no succeeded trial yet\n", id);
    else
        cgq_front_print_table (out, 0, stdout);
    if (rc == CGQ_EXIT_OK && f.spec->nconstraints) // on stderr for the machine formats
        fprintf (!strcmp (format, "table") ? stdout : stderr,
                 "(%zu infeasible trial%s left out: %s the constraints; cgq results %" PRIu64
                 " lists %s)\n",
                 f.infeasible, f.infeasible == 1 ? "" : "s", f.infeasible == 1 ? "it violates"
                                                                             : "they violate",
                 id, f.infeasible == 1 ? "it" : "them");
    if (rc == CGQ_EXIT_OK && plot && cgq_front_plot (&f, job, plot, false, err, sizeof err) < 0) {
        cgq_cli_error ("%s", err);
        rc = CGQ_EXIT_FAIL;
    }
done:
    cgq_front_fini (&f);
    cgq_job_rec_destroy (&job);
    cgq_store_destroy (&store);
    return rc;
}
