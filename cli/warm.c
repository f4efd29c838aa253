// warm: resolves a spec's search.warm_start into SubmitJob.warm_json on the
// submitting side (docs/architecture.md, "Warm starts"): the succeeded
// trials of the jobs it names, read from Redis, and the points file, read
// from disk, checked here against the spec's space with a searcher of the
// spec so that an error names the file and line (the coordinator checks
// them again).
#include "warm.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"
#include "searcher.h"
#include "util.h"
#include "view.h"

// s_names_add appends the keys of params missing from set (a JSON object
// used as a set) to set.
static void
s_names_add (json_t *set, const json_t *params)
{
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *) params, k, v) json_object_set_new (set, k, json_true ());
}

// s_list writes the keys of set into buf as "a, b, c".
static const char *
s_list (const json_t *set, char *buf, size_t n)
{
    size_t at = 0;
    const char *k;
    json_t *v;
    *buf = 0;
    json_object_foreach ((json_t *) set, k, v)
    {
        if (at < n)
            at += (size_t) snprintf (buf + at, n - at, "%s%s", at ? ", " : "", k);
    }
    return buf;
}

// s_notes prints what of the points' params (seen) the spec does not have,
// and what of the spec's params they lack, for one source.
static void
s_notes (const cgq_spec_t *spec, const char *source, const json_t *seen)
{
    json_t *extra = json_object (), *lack = json_object ();
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *) seen, k, v)
    {
        if (!cgq_spec_param (spec, k))
            json_object_set_new (extra, k, json_true ());
    }
    for (size_t i = 0; i < spec->nparams; i++)
        if (spec->params[i].name && !json_object_get (seen, spec->params[i].name))
            json_object_set_new (lack, spec->params[i].name, json_true ());
    char buf[512];
    if (json_object_size (extra))
        fprintf (stderr, "cgq: warm_start: %s: params not in this space, ignored: %s\n", source,
                 s_list (extra, buf, sizeof buf));
    if (json_object_size (lack))
        fprintf (stderr,
                 "cgq: warm_start: %s: no value for %s: its points are modelled without them\n",
                 source, s_list (lack, buf, sizeof buf));
    json_decref (extra);
    json_decref (lack);
}

// s_common is true when seen shares a param with the spec's space.
static bool
s_common (const cgq_spec_t *spec, const json_t *seen)
{
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *) seen, k, v)
    {
        if (cgq_spec_param (spec, k))
            return true;
    }
    return false;
}

// s_by_id orders trials by id: a job's observations go in trial order
// (docs/spec.md), not in the best-first order the views give.
static int
s_by_id (const void *a, const void *b)
{
    const cgq_trial_rec_t *x = *(cgq_trial_rec_t *const *) a, *y = *(cgq_trial_rec_t *const *) b;
    return x->id < y->id ? -1 : x->id > y->id;
}

// s_job adds job id's succeeded trials to out, in trial order; points whose
// values lie outside this space are left out with a note.
static int
s_job (const cgq_spec_t *spec, cgq_searcher_t *check, cgq_store_t *store, uint64_t id, json_t *out,
       char *err, size_t errlen)
{
    cgq_job_rec_t *job = NULL;
    char why[512];
    int vr = cgq_view_job_load (store, id, &job, why, sizeof why);
    if (vr == CGQ_VIEW_ABSENT) {
        snprintf (err, errlen,
                  "search.warm_start.jobs: job %" PRIu64 " does not exist (cgq status lists the "
                  "jobs)",
                  id);
        return CGQ_EXIT_BAD;
    }
    if (vr != CGQ_VIEW_OK) {
        snprintf (err, errlen, "search.warm_start.jobs: job %" PRIu64 ": %s", id, why);
        return CGQ_EXIT_FAIL;
    }
    cgq_trial_rec_t **trials = NULL;
    size_t n = 0;
    if (cgq_view_trials_all (store, job, &trials, &n, why, sizeof why) != CGQ_VIEW_OK) {
        snprintf (err, errlen, "search.warm_start.jobs: job %" PRIu64 ": %s", id, why);
        cgq_job_rec_destroy (&job);
        return CGQ_EXIT_FAIL;
    }
    if (n > 1)
        qsort (trials, n, sizeof *trials, s_by_id);
    json_t *seen = json_object ();
    size_t used = 0, outside = 0;
    char first_out[600] = "";
    int rc = CGQ_EXIT_OK;
    for (size_t i = 0; i < n; i++) {
        const cgq_trial_rec_t *t = trials[i];
        if (strcmp (t->state, "succeeded") || !t->params || !t->metrics)
            continue;
        s_names_add (seen, t->params);
        if (cgq_searcher_warm (check, t->params, t->metrics, why, sizeof why) < 0) {
            if (!outside++)
                snprintf (first_out, sizeof first_out, "trial %" PRIu64 ": %s", t->id, why);
            continue;
        }
        char from[64];
        snprintf (from, sizeof from, "job %" PRIu64 " trial %" PRIu64, id, t->id);
        json_array_append_new (out, json_pack ("{s:O, s:O, s:s}", "params", t->params, "metrics",
                                               t->metrics, "from", from));
        used++;
    }
    char source[32];
    snprintf (source, sizeof source, "job %" PRIu64, id);
    if (json_object_size (seen) && !s_common (spec, seen)) {
        char a[160], b[160];
        json_t *mine = json_object ();
        for (size_t i = 0; i < spec->nparams; i++)
            if (spec->params[i].name)
                json_object_set_new (mine, spec->params[i].name, json_true ());
        snprintf (err, errlen,
                  "search.warm_start.jobs: job %" PRIu64 " searched another space: no param in "
                  "common with this spec (its params: %s; this spec's: %s)",
                  id, s_list (seen, a, sizeof a), s_list (mine, b, sizeof b));
        json_decref (mine);
        rc = CGQ_EXIT_BAD;
    }
    else {
        s_notes (spec, source, seen);
        if (outside)
            fprintf (stderr, "cgq: warm_start: job %" PRIu64 ": %zu succeeded trial(s) left out, "
                             "they do not fit this spec (first: %s)\n",
                     id, outside, first_out);
        fprintf (stderr, "cgq: warm_start: %zu observation(s) from job %" PRIu64 "\n", used, id);
    }
    json_decref (seen);
    cgq_view_trials_free (trials, n);
    cgq_job_rec_destroy (&job);
    return rc;
}

// s_csv_split splits a CSV line in place into fields (RFC 4180 quoting: a
// field in double quotes may hold commas, "" is a quote; no field spans
// lines); the line's end is dropped. *n fields into *fields (caller frees
// the array). -1 with why set for a quote that does not close, or text
// after a closing quote.
static int
s_csv_split (char *line, char ***fields, size_t *n, char *why, size_t wl)
{
    size_t len = strcspn (line, "\r\n"), cap = 8;
    line[len] = 0;
    *fields = cgq_xmalloc (cap * sizeof **fields);
    *n = 0;
    char *r = line;
    for (;;) {
        char *w = r, *start = r;
        if (*r == '"') {
            r++;
            for (;;) {
                if (!*r) {
                    snprintf (why, wl, "field %zu: a quote that does not close (a field in "
                                       "quotes cannot span lines)", *n + 1);
                    free (*fields);
                    *fields = NULL;
                    return -1;
                }
                if (*r == '"' && r[1] == '"')
                    *w++ = '"', r += 2;
                else if (*r == '"') {
                    r++;
                    break;
                }
                else
                    *w++ = *r++;
            }
            if (*r && *r != ',') {
                snprintf (why, wl, "field %zu: text after its closing quote (write \"\" for a "
                                   "quote inside quotes)", *n + 1);
                free (*fields);
                *fields = NULL;
                return -1;
            }
        }
        else
            while (*r && *r != ',')
                *w++ = *r++;
        char sep = *r;
        *w = 0;
        if (*n == cap)
            *fields = cgq_xrealloc (*fields, (cap *= 2) * sizeof **fields);
        (*fields)[(*n)++] = start;
        if (!sep)
            return 0;
        r++;
    }
}

// s_csv_value is a CSV cell as a JSON value: a JSON number, true or false
// as such, anything else as text; NULL (no value) for an empty cell or null.
static json_t *
s_csv_value (const char *text)
{
    if (!*text)
        return NULL;
    json_t *v = json_loads (text, JSON_DECODE_ANY, NULL);
    if (json_is_number (v) || json_is_boolean (v))
        return v;
    bool null = json_is_null (v);
    json_decref (v);
    return null ? NULL : json_string (text);
}

// s_csv_point reads a CSV data line under header (the column names) as
// {"params": the columns that are params of the space, "metrics": the
// rest}; NULL with why set when it does not fit the header.
static json_t *
s_csv_point (const cgq_spec_t *spec, const json_t *header, char *line, char *why, size_t wl)
{
    char **f;
    size_t n;
    if (s_csv_split (line, &f, &n, why, wl) < 0)
        return NULL;
    if (n != json_array_size (header)) {
        snprintf (why, wl, "%zu fields where the header has %zu (one value per column, empty "
                           "for none)",
                  n, json_array_size (header));
        free (f);
        return NULL;
    }
    json_t *params = json_object (), *metrics = json_object ();
    for (size_t i = 0; i < n; i++) {
        const char *name = json_string_value (json_array_get (header, i));
        json_t *v = s_csv_value (f[i]);
        if (v)
            json_object_set_new (cgq_spec_param (spec, name) ? params : metrics, name, v);
    }
    free (f);
    return json_pack ("{s:o, s:o}", "params", params, "metrics", metrics);
}

// s_csv_header reads the header line: distinct, non-empty column names.
static json_t *
s_csv_header (char *line, char *why, size_t wl)
{
    char **f;
    size_t n;
    if (s_csv_split (line, &f, &n, why, wl) < 0)
        return NULL;
    json_t *h = json_array (), *set = json_object ();
    for (size_t i = 0; i < n && h; i++) {
        if (!*f[i] || json_object_get (set, f[i])) {
            snprintf (why, wl, "the header's column %zu is %s (write the param and metric "
                               "names, each once: x1,x2,loss)",
                      i + 1, *f[i] ? "a name given twice" : "empty");
            json_decref (h);
            h = NULL;
            break;
        }
        json_object_set_new (set, f[i], json_true ());
        json_array_append_new (h, json_string (f[i]));
    }
    json_decref (set);
    free (f);
    return h;
}

// s_points adds the points file's observations to out: JSON lines of
// {"params": {...}, "metrics": {...}}; blank lines and lines starting with
// # are skipped; any other line that is not such a point, or does not fit
// the space, is an error at FILE:LINE.
static int
s_points (const cgq_spec_t *spec, cgq_searcher_t *check, const char *spec_path, json_t *out,
          char *err, size_t errlen)
{
    const char *p = spec->search.warm_points;
    char *path = NULL;
    if (p[0] == '/')
        path = cgq_xstrdup (p);
    else {
        const char *slash = strrchr (spec_path, '/');
        size_t dl = slash ? (size_t) (slash - spec_path) + 1 : 0;
        path = cgq_xmalloc (dl + strlen (p) + 1);
        memcpy (path, spec_path, dl);
        strcpy (path + dl, p);
    }
    FILE *f = fopen (path, "r");
    if (!f) {
        snprintf (err, errlen, "search.warm_start.points: cannot read %s: %s", path,
                  strerror (errno));
        free (path);
        return CGQ_EXIT_BAD;
    }
    char *line = NULL;
    size_t cap = 0, lineno = 0, used = 0, plen = strlen (path);
    ssize_t len;
    json_t *seen = json_object ();
    // A .csv file: a header of param and metric names, then one point a line.
    bool csv = plen > 4 && !strcasecmp (path + plen - 4, ".csv");
    json_t *header = NULL;
    int rc = CGQ_EXIT_OK;
    while (rc == CGQ_EXIT_OK && (len = getline (&line, &cap, f)) >= 0) {
        lineno++;
        size_t k = strspn (line, " \t\r\n");
        if (!line[k] || line[k] == '#')
            continue;
        json_error_t je;
        char why[512], cwhy[256] = "";
        if (csv && !header) {
            if (!(header = s_csv_header (line, cwhy, sizeof cwhy))) {
                snprintf (err, errlen, "%s:%zu: %s", path, lineno, cwhy);
                rc = CGQ_EXIT_BAD;
            }
            continue;
        }
        json_t *o = csv ? s_csv_point (spec, header, line, cwhy, sizeof cwhy)
                        : json_loads (line, JSON_REJECT_DUPLICATES, &je);
        json_t *params = json_object_get (o, "params"), *metrics = json_object_get (o, "metrics");
        if (!o && csv)
            snprintf (err, errlen, "%s:%zu: %s", path, lineno, cwhy);
        else if (!o)
            snprintf (err, errlen, "%s:%zu: not JSON: %s (write one {\"params\": {...}, "
                                   "\"metrics\": {...}} per line)",
                      path, lineno, je.text);
        else if (!json_is_object (params) || !json_is_object (metrics))
            snprintf (err, errlen, "%s:%zu: a point needs \"params\" and \"metrics\", both "
                                   "objects (write {\"params\": {\"lr\": 0.01}, \"metrics\": "
                                   "{\"loss\": 0.3}})",
                      path, lineno);
        else if (cgq_searcher_warm (check, params, metrics, why, sizeof why) < 0)
            snprintf (err, errlen, "%s:%zu: %s", path, lineno, why);
        else {
            char from[600];
            snprintf (from, sizeof from, "%s:%zu", path, lineno);
            s_names_add (seen, params);
            json_array_append_new (out, json_pack ("{s:O, s:O, s:s}", "params", params,
                                                   "metrics", metrics, "from", from));
            used++;
            json_decref (o);
            continue;
        }
        json_decref (o);
        rc = CGQ_EXIT_BAD;
    }
    free (line);
    fclose (f);
    json_decref (header);
    if (rc == CGQ_EXIT_OK) {
        if (used && !s_common (spec, seen)) {
            char a[512];
            snprintf (err, errlen,
                      "search.warm_start.points: %s: no param in common with this spec's space "
                      "(the points have: %s)",
                      path, s_list (seen, a, sizeof a));
            rc = CGQ_EXIT_BAD;
        }
        else {
            s_notes (spec, path, seen);
            fprintf (stderr, "cgq: warm_start: %zu observation(s) from %s\n", used, path);
        }
    }
    json_decref (seen);
    free (path);
    return rc;
}

int
cgq_warm_resolve (const cgq_spec_t *spec, const char *spec_path, cgq_store_t *store, char **json,
                  char *err, size_t errlen)
{
    *json = NULL;
    if (!spec->search.nwarm_jobs && !spec->search.warm_points)
        return CGQ_EXIT_OK;
    if (spec->search.nwarm_jobs && !store) {
        snprintf (err, errlen, "search.warm_start.jobs needs the Redis of those jobs (--redis)");
        return CGQ_EXIT_BAD;
    }
    cgq_searcher_t *check = cgq_searcher_new (spec, NULL, err, errlen);
    if (!check)
        return CGQ_EXIT_BAD;
    json_t *out = json_array ();
    int rc = CGQ_EXIT_OK;
    for (size_t i = 0; i < spec->search.nwarm_jobs && rc == CGQ_EXIT_OK; i++)
        rc = s_job (spec, check, store, spec->search.warm_jobs[i], out, err, errlen);
    if (rc == CGQ_EXIT_OK && spec->search.warm_points)
        rc = s_points (spec, check, spec_path, out, err, errlen);
    if (rc == CGQ_EXIT_OK && json_array_size (out) > CGQ_SEARCH_MAX_WARM) {
        snprintf (err, errlen, "search.warm_start: %zu observations, more than %d",
                  json_array_size (out), CGQ_SEARCH_MAX_WARM);
        rc = CGQ_EXIT_BAD;
    }
    if (rc == CGQ_EXIT_OK)
        *json = json_dumps (out, JSON_COMPACT);
    json_decref (out);
    cgq_searcher_destroy (&check);
    return rc;
}
