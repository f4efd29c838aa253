// api_charts: the job page's charts, aggregated from Redis (api_charts.h).
#include "api_charts.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "importance.h"
#include "util.h"

// Replies read per pipelined round trip.
#define S_CHUNK 512

static json_t *
s_str (const char *s)
{
    if (!s)
        return json_null ();
    json_t *j = json_string (s);
    if (j)
        return j;
    char *c = cgq_xstrdup (s); // not UTF-8: '?' for the odd bytes
    for (char *p = c; *p; p++)
        if ((unsigned char)*p >= 0x80)
            *p = '?';
    j = json_string (c);
    free (c);
    return j ? j : json_null ();
}

static int
s_answer (json_t *doc, int status, char **body)
{
    *body = json_dumps (doc, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref (doc);
    if (!*body) {
        *body = cgq_xstrdup ("{\"error\":\"the answer could not be encoded\"}");
        return 500;
    }
    return status;
}

static int
s_error (int status, char **body, const char *msg)
{
    return s_answer (json_pack ("{s:s}", "error", msg), status, body);
}

static int
s_store_error (cgq_store_t *store, char **body)
{
    char *msg = cgq_xasprintf ("cannot read Redis: %s", cgq_store_errstr (store));
    int rc = s_error (503, body, msg);
    free (msg);
    return rc;
}

// s_limit parses ?limit= (1..max, dflt when absent); false when bad.
static bool
s_limit (const char *s, unsigned max, unsigned dflt, unsigned *out)
{
    *out = dflt;
    if (!s)
        return true;
    if (!*s || strlen (s) > 6)
        return false;
    for (const char *p = s; *p; p++)
        if (!isdigit ((unsigned char)*p))
            return false;
    unsigned long v = strtoul (s, NULL, 10);
    if (v < 1 || v > max)
        return false;
    *out = (unsigned)v;
    return true;
}

// --- reading trials -------------------------------------------------------------

// A trial's fields as HMGET read them (NULL: absent), for a visitor.
typedef void (*s_visit_t) (void *ctx, uint64_t id, const char *const *vals);

// s_scan reads fields (at most 8) of the trials whose ids are ids[0..n) or,
// with ids NULL, 0..n-1, in pipelined chunks, and calls visit for each that
// exists. -1 on a Redis error.
static int
s_scan (cgq_store_t *store, uint64_t job, const uint64_t *ids, uint64_t n,
        const char *const *fields, size_t nf, s_visit_t visit, void *ctx)
{
    char fmt[160] = "HMGET %s", key[96];
    for (size_t f = 0; f < nf && f < 8; f++)
        snprintf (fmt + strlen (fmt), sizeof fmt - strlen (fmt), " %s", fields[f]);
    for (uint64_t base = 0; base < n; base += S_CHUNK) {
        uint64_t m = n - base < S_CHUNK ? n - base : S_CHUNK;
        for (uint64_t i = 0; i < m; i++) {
            cgq_key_trial (key, sizeof key, job, ids ? ids[base + i] : base + i);
            if (cgq_store_append (store, fmt, key) < 0)
                return -1;
        }
        int rc = 0;
        for (uint64_t i = 0; i < m; i++) { // every reply read, to stay in step
            redisReply *r = cgq_store_get_reply (store);
            if (!r)
                return -1;
            if (r->type != REDIS_REPLY_ARRAY || r->elements != nf)
                rc = -1;
            else if (rc == 0) {
                const char *vals[8] = {0};
                bool any = false;
                for (size_t f = 0; f < nf && f < 8; f++)
                    if (r->element[f]->type == REDIS_REPLY_STRING) {
                        vals[f] = r->element[f]->str;
                        any = true;
                    }
                if (any)
                    visit (ctx, ids ? ids[base + i] : base + i, vals);
            }
            freeReplyObject (r);
        }
        if (rc < 0)
            return -1;
    }
    return 0;
}

// The fields every chart reads first, in this order.
#define S_F_STATE 0
#define S_F_VALUE 1
#define S_F_FEASIBLE 2

// s_ranked: a succeeded, feasible trial with an objective value (as the
// leaderboard's rank order and the job's best count them).
static bool
s_ranked (const char *const *vals, double *value)
{
    if (!vals[S_F_STATE] || strcmp (vals[S_F_STATE], cgq_tstate_names[CGQ_TRIAL_SUCCEEDED]) ||
        !vals[S_F_VALUE] || (vals[S_F_FEASIBLE] && !strcmp (vals[S_F_FEASIBLE], "0")))
        return false;
    char *end;
    errno = 0;
    double v = strtod (vals[S_F_VALUE], &end);
    if (errno || end == vals[S_F_VALUE] || *end || !isfinite (v))
        return false;
    *value = v;
    return true;
}

// s_better: a beats b under the job's mode (ties: the lower id).
static bool
s_better (const cgq_job_rec_t *job, double a, uint64_t ida, double b, uint64_t idb)
{
    if (a != b)
        return job->mode > 0 ? a > b : a < b;
    return ida < idb;
}

static json_t *
s_metric (const cgq_job_rec_t *job)
{
    return s_str (job->metric);
}

// --- the best-so-far curve --------------------------------------------------------

typedef struct {
    uint64_t id;
    double value, finished;
} s_done_t;

typedef struct {
    s_done_t *v;
    size_t n, cap;
} s_dones_t;

static void
s_visit_done (void *ctx, uint64_t id, const char *const *vals)
{
    s_dones_t *d = ctx;
    double value;
    if (!s_ranked (vals, &value))
        return;
    double fin = vals[3] ? strtod (vals[3], NULL) : 0;
    if (d->n == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 256;
        d->v = cgq_xrealloc (d->v, d->cap * sizeof *d->v);
    }
    d->v[d->n++] = (s_done_t){id, value, isfinite (fin) ? fin : 0};
}

static int
s_cmp_finished (const void *a, const void *b)
{
    const s_done_t *p = a, *q = b;
    if (p->finished != q->finished)
        return p->finished < q->finished ? -1 : 1;
    return p->id < q->id ? -1 : p->id > q->id;
}

static int
s_progress (cgq_store_t *store, const cgq_job_rec_t *job, char **body)
{
    static const char *const fields[] = {CGQ_TF_STATE, CGQ_TF_VALUE, CGQ_TF_FEASIBLE,
                                         CGQ_TF_FINISHED};
    s_dones_t d = {0};
    json_t *pts = json_array ();
    if (job->metric) {
        if (s_scan (store, job->id, NULL, job->suggested, fields, 4, s_visit_done, &d) < 0) {
            free (d.v);
            json_decref (pts);
            return s_store_error (store, body);
        }
        if (d.n > 1)
            qsort (d.v, d.n, sizeof *d.v, s_cmp_finished);
        // The improvements; past API_PROGRESS_POINTS of them (a search that
        // improves on almost every trial), every k-th and always the last.
        size_t nimp = 0;
        bool *imp = cgq_xcalloc (d.n + 1, sizeof *imp);
        // Strictly better, as the coordinator keeps the job's best (the
        // first to reach a value holds it).
        for (size_t i = 0, b = 0; i < d.n; i++)
            if (i == 0 || (d.v[i].value != d.v[b].value &&
                           s_better (job, d.v[i].value, d.v[i].id, d.v[b].value, d.v[b].id))) {
                imp[i] = true;
                b = i;
                nimp++;
            }
        // every k-th of the first nimp - 1, and the last: at most the bound.
        size_t every = nimp > API_PROGRESS_POINTS
                           ? (nimp - 1 + API_PROGRESS_POINTS - 2) / (API_PROGRESS_POINTS - 1)
                           : 1;
        size_t k = 0, last = 0;
        for (size_t i = 0; i < d.n; i++)
            if (imp[i])
                last = i;
        for (size_t i = 0; i < d.n; i++) {
            if (!imp[i])
                continue;
            if (k++ % every == 0 || i == last)
                json_array_append_new (pts,
                                       json_pack ("{s:I,s:f,s:I,s:f}", "n", (json_int_t)(i + 1),
                                                  "t", d.v[i].finished, "trial",
                                                  (json_int_t)d.v[i].id, "value", d.v[i].value));
        }
        free (imp);
    }
    json_t *doc =
        json_pack ("{s:I,s:o,s:s,s:I,s:o}", "job", (json_int_t)job->id, "metric", s_metric (job),
                   "mode", job->mode > 0 ? "max" : "min", "done", (json_int_t)d.n, "points", pts);
    free (d.v);
    return s_answer (doc, 200, body);
}

// --- the learning curves of the top K ----------------------------------------------

typedef struct {
    const cgq_job_rec_t *job;
    unsigned k, n;
    uint64_t ids[API_CURVES_MAX];
    double values[API_CURVES_MAX];
} s_top_t;

static void
s_visit_top (void *ctx, uint64_t id, const char *const *vals)
{
    s_top_t *t = ctx;
    double v;
    if (!s_ranked (vals, &v))
        return;
    if (t->n == t->k && !s_better (t->job, v, id, t->values[t->n - 1], t->ids[t->n - 1]))
        return;
    unsigned i = t->n < t->k ? t->n++ : t->n - 1; // insertion into the sorted few
    while (i > 0 && s_better (t->job, v, id, t->values[i - 1], t->ids[i - 1])) {
        t->ids[i] = t->ids[i - 1];
        t->values[i] = t->values[i - 1];
        i--;
    }
    t->ids[i] = id;
    t->values[i] = v;
}

// s_step: a report's x: its "step", "epoch" or "iteration" if a number,
// else its place among the trial's reports (1 first).
static double
s_step (const json_t *r, size_t place, const char **name)
{
    static const char *const names[] = {"step", "epoch", "iteration"};
    for (size_t i = 0; i < 3; i++) {
        json_t *v = json_object_get (r, names[i]);
        if (json_is_number (v)) {
            *name = names[i];
            return json_number_value (v);
        }
    }
    *name = "report";
    return (double)place;
}

// s_curve_add appends stream entry e's report as [x, y] to all when it has
// the objective metric as a number; place: its place among the reports.
static void
s_curve_add (json_t *all, const redisReply *e, const cgq_job_rec_t *job, double place,
             const char **xname)
{
    if (e->type != REDIS_REPLY_ARRAY || e->elements < 2 || e->element[1]->type != REDIS_REPLY_ARRAY)
        return;
    const redisReply *f = e->element[1]; // [id, [field, value, ...]]
    for (size_t k = 0; k + 1 < f->elements; k += 2) {
        if (f->element[k]->type != REDIS_REPLY_STRING ||
            strcmp (f->element[k]->str, CGQ_REPORT_FIELD) ||
            f->element[k + 1]->type != REDIS_REPLY_STRING)
            continue;
        json_t *o = json_loads (f->element[k + 1]->str, 0, NULL);
        json_t *y = json_is_object (o) ? json_object_get (o, job->metric) : NULL;
        if (json_is_number (y) && isfinite (json_number_value (y))) {
            double x = s_step (o, place, xname);
            json_array_append_new (all, json_pack ("[f,f]", x, json_number_value (y)));
        }
        json_decref (o);
    }
}

// s_ms: a stream id's milliseconds (0 when not one).
static uint64_t
s_ms (const redisReply *e)
{
    if (e->type != REDIS_REPLY_ARRAY || e->elements < 1 ||
        e->element[0]->type != REDIS_REPLY_STRING)
        return 0;
    return strtoull (e->element[0]->str, NULL, 10);
}

// s_curve_sampled: a long stream (n entries) read as one entry per slice
// of its time span (API_CURVE_POINTS - 1 slices, XRANGE ... COUNT 1 each,
// pipelined) and its last entry: a few hundred O(log n) reads instead of
// the whole stream. A report without a step gets its place estimated from
// its time. NULL on an error.
static json_t *
s_curve_sampled (cgq_store_t *store, const cgq_job_rec_t *job, const char *key, long long n,
                 const char **xname)
{
    redisReply *first = cgq_store_command (store, "XRANGE %s - + COUNT 1", key);
    redisReply *last = cgq_store_command (store, "XREVRANGE %s + - COUNT 1", key);
    json_t *all = NULL;
    if (!first || !last || first->type != REDIS_REPLY_ARRAY || last->type != REDIS_REPLY_ARRAY)
        goto done;
    all = json_array ();
    if (first->elements == 0 || last->elements == 0)
        goto done;
    uint64_t lo = s_ms (first->element[0]), hi = s_ms (last->element[0]);
    const unsigned slices = API_CURVE_POINTS - 1;
    unsigned sent = 0;
    for (unsigned b = 0; b < slices && hi > lo; b++) {
        uint64_t a = lo + (uint64_t)((long double)(hi - lo) * b / slices);
        uint64_t z = lo + (uint64_t)((long double)(hi - lo) * (b + 1) / slices);
        if (z <= a) // a slice under a millisecond: the next one has it
            continue;
        // From a's first entry to (z - 1)'s last: the next slice starts at z.
        sent++;
        if (cgq_store_append (store, "XRANGE %s %" PRIu64 " %" PRIu64 " COUNT 1", key, a, z - 1) <
            0) {
            json_decref (all);
            all = NULL;
            goto done;
        }
    }
    bool ok = true;
    for (unsigned b = 0; b < sent; b++) { // every reply read, to stay in step
        redisReply *r = cgq_store_get_reply (store);
        if (!r) {
            ok = false;
            break;
        }
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 1) {
            double place =
                1 + (double)(n - 1) * (double)(s_ms (r->element[0]) - lo) / (double)(hi - lo);
            s_curve_add (all, r->element[0], job, place, xname);
        }
        else if (r->type != REDIS_REPLY_ARRAY)
            ok = false;
        freeReplyObject (r);
    }
    if (!ok) {
        json_decref (all);
        all = NULL;
        goto done;
    }
    s_curve_add (all, last->element[0], job, (double)n, xname);
done:
    if (first)
        freeReplyObject (first);
    if (last)
        freeReplyObject (last);
    return all;
}

// s_curve: the objective metric of trial's reports as [[x, y]], at most
// API_CURVE_POINTS (every k-th report, always the last; a stream of more
// than API_CURVE_READ_ALL reports is sampled by time, s_curve_sampled);
// NULL on an error.
static json_t *
s_curve (cgq_store_t *store, const cgq_job_rec_t *job, uint64_t trial, const char **xname)
{
    char key[96];
    cgq_key_reports (key, sizeof key, job->id, trial);
    redisReply *len = cgq_store_command (store, "XLEN %s", key);
    if (!len || len->type != REDIS_REPLY_INTEGER) {
        if (len)
            freeReplyObject (len);
        return NULL;
    }
    long long n = len->integer;
    freeReplyObject (len);
    if (n > API_CURVE_READ_ALL)
        return s_curve_sampled (store, job, key, n, xname);
    redisReply *r = cgq_store_command (store, "XRANGE %s - +", key);
    if (!r || r->type != REDIS_REPLY_ARRAY) {
        if (r)
            freeReplyObject (r);
        return NULL;
    }
    json_t *all = json_array ();
    for (size_t i = 0; i < r->elements; i++)
        s_curve_add (all, r->element[i], job, (double)(i + 1), xname);
    freeReplyObject (r);
    size_t m = json_array_size (all);
    if (m <= API_CURVE_POINTS)
        return all;
    json_t *out = json_array ();
    size_t every =
        (m - 1 + API_CURVE_POINTS - 2) / (API_CURVE_POINTS - 1); // with the last: <= bound
    for (size_t i = 0; i < m; i++)
        if (i % every == 0 || i == m - 1)
            json_array_append (out, json_array_get (all, i));
    json_decref (all);
    return out;
}

static int
s_curves (cgq_store_t *store, const cgq_job_rec_t *job, const api_query_t *q, char **body)
{
    static const char *const fields[] = {CGQ_TF_STATE, CGQ_TF_VALUE, CGQ_TF_FEASIBLE};
    unsigned k;
    if (!s_limit (q->limit, API_CURVES_MAX, API_CURVES_DEFAULT, &k)) {
        char *msg = cgq_xasprintf ("limit must be a number from 1 to %d", API_CURVES_MAX);
        int rc = s_error (400, body, msg);
        free (msg);
        return rc;
    }
    s_top_t top = {.job = job, .k = k};
    json_t *arr = json_array ();
    if (job->metric &&
        s_scan (store, job->id, NULL, job->suggested, fields, 3, s_visit_top, &top) < 0) {
        json_decref (arr);
        return s_store_error (store, body);
    }
    for (unsigned i = 0; i < top.n; i++) {
        const char *xname = "report";
        json_t *pts = s_curve (store, job, top.ids[i], &xname);
        if (!pts) {
            json_decref (arr);
            return s_store_error (store, body);
        }
        json_array_append_new (arr, json_pack ("{s:I,s:f,s:s,s:o}", "trial", (json_int_t)top.ids[i],
                                               "value", top.values[i], "x", xname, "points", pts));
    }
    return s_answer (json_pack ("{s:I,s:o,s:o}", "job", (json_int_t)job->id, "metric",
                                s_metric (job), "trials", arr),
                     200, body);
}

// --- importance, and the sample ---------------------------------------------------

typedef struct {
    json_t **params, **metrics;
    double *y;
    uint64_t *ids;
    size_t n, cap;
    bool any; // keep succeeded trials without an objective value (sample)
} s_rows_t;

static void
s_visit_row (void *ctx, uint64_t id, const char *const *vals)
{
    s_rows_t *r = ctx;
    double v = NAN;
    if (!s_ranked (vals, &v)) {
        if (!r->any || !vals[S_F_STATE] ||
            strcmp (vals[S_F_STATE], cgq_tstate_names[CGQ_TRIAL_SUCCEEDED]))
            return;
        v = NAN;
    }
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 256;
        r->params = cgq_xrealloc (r->params, r->cap * sizeof *r->params);
        r->metrics = cgq_xrealloc (r->metrics, r->cap * sizeof *r->metrics);
        r->y = cgq_xrealloc (r->y, r->cap * sizeof *r->y);
        r->ids = cgq_xrealloc (r->ids, r->cap * sizeof *r->ids);
    }
    json_t *p = vals[3] ? json_loads (vals[3], 0, NULL) : NULL;
    json_t *m = vals[4] ? json_loads (vals[4], 0, NULL) : NULL;
    r->params[r->n] = json_is_object (p) ? p : json_object ();
    if (p && !json_is_object (p))
        json_decref (p);
    r->metrics[r->n] = json_is_object (m) ? m : json_null ();
    if (m && !json_is_object (m))
        json_decref (m);
    r->y[r->n] = v;
    r->ids[r->n] = id;
    r->n++;
}

static void
s_rows_free (s_rows_t *r)
{
    for (size_t i = 0; i < r->n; i++) {
        json_decref (r->params[i]);
        json_decref (r->metrics[i]);
    }
    free (r->params);
    free (r->metrics);
    free (r->y);
    free (r->ids);
}

// s_spread: at most max ids spread evenly over 0..total-1 (caller frees).
static uint64_t *
s_spread (uint64_t total, uint64_t max, uint64_t *n)
{
    *n = total < max ? total : max;
    uint64_t *ids = cgq_xcalloc (*n + 1, sizeof *ids);
    for (uint64_t i = 0; i < *n; i++)
        ids[i] = (uint64_t)((long double)i * total / *n);
    return ids;
}

static const char *const s_row_fields[] = {CGQ_TF_STATE, CGQ_TF_VALUE, CGQ_TF_FEASIBLE,
                                           CGQ_TF_PARAMS, CGQ_TF_METRICS};

static int
s_importance (cgq_store_t *store, const cgq_job_rec_t *job, char **body)
{
    s_rows_t rows = {0};
    uint64_t n = 0;
    uint64_t *ids = s_spread (job->metric ? job->suggested : 0, API_IMPORTANCE_TRIALS, &n);
    int rc = s_scan (store, job->id, ids, n, s_row_fields, 4, s_visit_row, &rows);
    free (ids);
    if (rc < 0) {
        s_rows_free (&rows);
        return s_store_error (store, body);
    }
    importance_t *imp = NULL;
    size_t m = importance_compute (rows.params, rows.y, rows.n, &imp);
    json_t *arr = json_array ();
    cgq_buf_t rough;
    cgq_buf_init (&rough);
    for (size_t i = 0; i < m; i++) {
        json_array_append_new (arr, json_pack ("{s:o,s:f,s:f,s:I,s:I,s:b,s:b}", "name",
                                               s_str (imp[i].name), "share", imp[i].share, "eps2",
                                               imp[i].eps2, "bins", (json_int_t)imp[i].bins, "n",
                                               (json_int_t)imp[i].n, "numeric", imp[i].numeric,
                                               "rough", imp[i].rough));
        if (imp[i].rough && rough.len < 400)
            cgq_buf_printf (&rough, "%s%s (%.1f per %s)", rough.len ? ", " : "", imp[i].name,
                            (double)imp[i].n / (double)imp[i].bins,
                            imp[i].numeric ? "bin" : "value");
    }
    importance_free (imp, m);
    char *few = cgq_buf_take (&rough);
    json_t *warning = json_null ();
    if (*few)
        warning = json_sprintf ("few trials per group for %s: these shares are rough, and the "
                                "correction that keeps a noise param near 0 also pushes a param "
                                "with many groups below one with few; more trials settle them",
                                few);
    free (few);
    json_t *doc = json_pack (
        "{s:I,s:o,s:s,s:I,s:b,s:o,s:o}", "job", (json_int_t)job->id, "metric", s_metric (job),
        "method",
        "epsilon-squared of the objective over each param's marginal (numeric params in at "
        "most 10 equal-count bins): fANOVA-style main effects from bin means",
        "trials", (json_int_t)rows.n, "sampled", job->suggested > API_IMPORTANCE_TRIALS, "params",
        arr, "warning", warning);
    s_rows_free (&rows);
    return s_answer (doc, 200, body);
}

static int
s_sample (cgq_store_t *store, const cgq_job_rec_t *job, const api_query_t *q, char **body)
{
    unsigned lim;
    if (!s_limit (q->limit, API_MAX_LIMIT, 200, &lim)) {
        char *msg = cgq_xasprintf ("limit must be a number from 1 to %d", API_MAX_LIMIT);
        int rc = s_error (400, body, msg);
        free (msg);
        return rc;
    }
    s_rows_t rows = {.any = true};
    uint64_t n = 0;
    uint64_t *ids = s_spread (job->suggested, lim, &n);
    int rc = s_scan (store, job->id, ids, n, s_row_fields, 5, s_visit_row, &rows);
    free (ids);
    if (rc < 0) {
        s_rows_free (&rows);
        return s_store_error (store, body);
    }
    json_t *arr = json_array ();
    for (size_t i = 0; i < rows.n; i++)
        json_array_append_new (
            arr, json_pack ("{s:I,s:o,s:O,s:O}", "id", (json_int_t)rows.ids[i], "value",
                            isfinite (rows.y[i]) ? json_real (rows.y[i]) : json_null (), "params",
                            rows.params[i], "metrics", rows.metrics[i]));
    json_t *doc = json_pack ("{s:I,s:I,s:o}", "job", (json_int_t)job->id, "suggested",
                             (json_int_t)job->suggested, "trials", arr);
    s_rows_free (&rows);
    return s_answer (doc, 200, body);
}

// --- routing ------------------------------------------------------------------------

static bool
s_is (const char *what, const char *name)
{
    size_t n = strlen (name);
    return !strncmp (what, name, n) && (!what[n] || !strcmp (what + n, "/"));
}

bool
api_charts_path (const char *what)
{
    return s_is (what, "progress") || s_is (what, "curves") || s_is (what, "importance") ||
           s_is (what, "sample");
}

// --- the answers of ended jobs, kept -------------------------------------------------
// An ended job no longer changes, so a chart's answer for it is kept for the
// next page that asks (a 100,000-trial job's curves read the whole job),
// keyed by the job's counts as api.c keeps orders (a cancelled job's trials
// may still end after it). A few, shared by the HTTP threads under a mutex;
// the least recently used goes.

#define S_KEPT 16

typedef struct {
    uint64_t job, stamp, used;
    char *what; // the chart and its limit
    char *body;
} s_kept_t;

static pthread_mutex_t s_kept_mu = PTHREAD_MUTEX_INITIALIZER;
static s_kept_t s_kept[S_KEPT];
static uint64_t s_kept_clock;

uint64_t
api_job_stamp (const cgq_job_rec_t *job)
{
    uint64_t h = 1469598103934665603ULL ^ job->suggested;
    for (int k = 0; k < CGQ_TRIAL_NSTATES; k++)
        h = (h ^ job->counts[k]) * 1099511628211ULL;
    return h;
}

static char *
s_kept_get (const cgq_job_rec_t *job, const char *what)
{
    char *body = NULL;
    uint64_t stamp = api_job_stamp (job);
    pthread_mutex_lock (&s_kept_mu);
    for (int i = 0; i < S_KEPT && !body; i++)
        if (s_kept[i].what && s_kept[i].job == job->id && s_kept[i].stamp == stamp &&
            !strcmp (s_kept[i].what, what)) {
            body = cgq_xstrdup (s_kept[i].body);
            s_kept[i].used = ++s_kept_clock;
        }
    pthread_mutex_unlock (&s_kept_mu);
    return body;
}

static void
s_kept_put (const cgq_job_rec_t *job, const char *what, const char *body)
{
    pthread_mutex_lock (&s_kept_mu);
    s_kept_t *k = &s_kept[0];
    for (int i = 1; i < S_KEPT; i++)
        if (s_kept[i].used < k->used)
            k = &s_kept[i];
    free (k->what);
    free (k->body);
    *k = (s_kept_t){.job = job->id,
                    .stamp = api_job_stamp (job),
                    .used = ++s_kept_clock,
                    .what = cgq_xstrdup (what),
                    .body = cgq_xstrdup (body)};
    pthread_mutex_unlock (&s_kept_mu);
}

static int
s_chart (cgq_store_t *store, const cgq_job_rec_t *job, const char *what, const api_query_t *q,
         char **body)
{
    if (s_is (what, "progress"))
        return s_progress (store, job, body);
    if (s_is (what, "curves"))
        return s_curves (store, job, q, body);
    if (s_is (what, "importance"))
        return s_importance (store, job, body);
    if (s_is (what, "sample"))
        return s_sample (store, job, q, body);
    return s_error (404, body, "no such chart");
}

int
api_charts (cgq_store_t *store, const cgq_job_rec_t *job, const char *what, const api_query_t *q,
            char **body)
{
    if (!cgq_job_rec_terminal (job))
        return s_chart (store, job, what, q, body);
    char *key = cgq_xasprintf ("%.*s?%s", (int)strcspn (what, "/"), what, q->limit ? q->limit : "");
    *body = s_kept_get (job, key);
    int status = 200;
    if (!*body) {
        status = s_chart (store, job, what, q, body);
        if (status == 200)
            s_kept_put (job, key, *body);
    }
    free (key);
    return status;
}
