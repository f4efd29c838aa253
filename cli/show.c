// show: tables, CSV and JSON, and the read-only commands status, results,
// workers and logs.
#include "show.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "expr.h"
#include "front.h"
#include "json.h"
#include "spec.h"
#include "util.h"

// Table cells longer than this are cut, so that one long param value (a list,
// a path) does not push every other column off the screen.
#define S_CELL_MAX 40

// ---------------------------------------------------------------- formatting

char *
cgq_show_number (char *buf, size_t n, double v)
{
    if (isnan (v))
        snprintf (buf, n, "nan");
    else
        snprintf (buf, n, "%.6g", v);
    return buf;
}

char *
cgq_show_duration (char *buf, size_t n, double s)
{
    if (s < 0 || isnan (s))
        s = 0;
    if (s < 10)
        snprintf (buf, n, "%.2fs", s);
    else if (s < 60)
        snprintf (buf, n, "%.1fs", s);
    else if (s < 3600)
        snprintf (buf, n, "%dm%02ds", (int) (s / 60), (int) fmod (s, 60));
    else
        snprintf (buf, n, "%dh%02dm", (int) (s / 3600), (int) fmod (s / 60, 60));
    return buf;
}

char *
cgq_show_clock (char *buf, size_t n, double s)
{
    if (s < 0 || isnan (s))
        s = 0;
    long t = (long) s;
    if (t >= 3600)
        snprintf (buf, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf (buf, n, "%ld:%02ld", t / 60, t % 60);
    return buf;
}

// s_ago writes how long ago the Unix time t was: "12s", "5m", "3h", "2d".
static char *
s_ago (char *buf, size_t n, double t)
{
    if (t <= 0) {
        snprintf (buf, n, "-");
        return buf;
    }
    double s = cgq_wall_s () - t;
    if (s < 0)
        s = 0;
    if (s < 120)
        snprintf (buf, n, "%ds", (int) s);
    else if (s < 7200)
        snprintf (buf, n, "%dm", (int) (s / 60));
    else if (s < 172800)
        snprintf (buf, n, "%dh", (int) (s / 3600));
    else
        snprintf (buf, n, "%dd", (int) (s / 86400));
    return buf;
}

// cgq_show_value_text returns a param or metric value as text (caller frees):
// strings bare, numbers short (table) or exact (csv), the rest as JSON.
char *
cgq_show_value_text (const json_t *v, bool exact)
{
    char num[32];
    if (!v)
        return cgq_xstrdup ("");
    if (json_is_string (v))
        return cgq_xstrdup (json_string_value (v));
    if (json_is_real (v) && !exact)
        return cgq_xstrdup (cgq_show_number (num, sizeof num, json_real_value (v)));
    cgq_buf_t b;
    cgq_buf_init (&b);
    cgq_json_append (&b, v, true);
    return cgq_buf_take (&b);
}

// ---------------------------------------------------------------- tables

void
cgq_table_init (cgq_table_t *t, size_t ncols)
{
    memset (t, 0, sizeof *t);
    t->ncols = ncols;
    t->head = cgq_xcalloc (ncols, sizeof *t->head);
    t->right = cgq_xcalloc (ncols, sizeof *t->right);
}

void
cgq_table_head (cgq_table_t *t, size_t col, const char *name, bool right)
{
    free (t->head[col]);
    t->head[col] = cgq_xstrdup (name);
    t->right[col] = right;
}

// s_utf8_len counts code points, which is what a terminal shows for text
// without wide characters.
static size_t
s_utf8_len (const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char) *s & 0xC0) != 0x80;
    return n;
}

// cgq_table_add takes a cell (ownership), flattening control characters and
// cutting it at S_CELL_MAX code points.
void
cgq_table_add (cgq_table_t *t, char *cell)
{
    cgq_buf_t b;
    cgq_buf_init (&b);
    size_t cps = 0;
    const char *p = cell ? cell : "";
    for (; *p; p++) {
        unsigned char c = (unsigned char) *p;
        if ((c & 0xC0) != 0x80) {
            if (cps == S_CELL_MAX - 1 && s_utf8_len (p) > 1) {
                cgq_buf_puts (&b, "…");
                break;
            }
            cps++;
        }
        char ch = c < 0x20 || c == 0x7f ? ' ' : (char) c;
        cgq_buf_append (&b, &ch, 1);
    }
    free (cell);
    if (t->ncells == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 64;
        t->cells = cgq_xrealloc (t->cells, t->cap * sizeof *t->cells);
    }
    t->cells[t->ncells++] = cgq_buf_take (&b);
}

void
cgq_table_addf (cgq_table_t *t, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    char *s = NULL;
    if (vasprintf (&s, fmt, ap) < 0)
        s = NULL;
    va_end (ap);
    cgq_table_add (t, s ? s : cgq_xstrdup ("?"));
}

size_t
cgq_table_width (const cgq_table_t *t, size_t col)
{
    size_t w = s_utf8_len (t->head[col] ? t->head[col] : "");
    for (size_t i = col; i < t->ncells; i += t->ncols) {
        size_t len = s_utf8_len (t->cells[i]);
        if (len > w)
            w = len;
    }
    return w;
}

void
cgq_table_hide (cgq_table_t *t, size_t col)
{
    if (!t->hidden)
        t->hidden = cgq_xcalloc (t->ncols, sizeof *t->hidden);
    t->hidden[col] = true;
}

void
cgq_table_print (const cgq_table_t *t, FILE *f, const char *indent)
{
    size_t *w = cgq_xcalloc (t->ncols, sizeof *w);
    size_t lastc = 0; // the last column shown: it gets no padding
    for (size_t c = 0; c < t->ncols; c++) {
        w[c] = cgq_table_width (t, c);
        if (!t->hidden || !t->hidden[c])
            lastc = c;
    }
    size_t nrows = t->ncells / t->ncols;
    for (size_t r = 0; r <= nrows; r++) {
        fputs (indent, f);
        for (size_t c = 0; c < t->ncols; c++) {
            if (t->hidden && t->hidden[c])
                continue;
            const char *s = r == 0 ? (t->head[c] ? t->head[c] : "") : t->cells[(r - 1) * t->ncols + c];
            size_t pad = w[c] - s_utf8_len (s);
            bool last = c == lastc;
            if (t->right[c])
                fprintf (f, "%*s%s", (int) pad, "", s);
            else
                fprintf (f, "%s%*s", s, last ? 0 : (int) pad, "");
            if (!last)
                fputs ("  ", f);
        }
        fputc ('\n', f);
    }
    free (w);
}

void
cgq_table_fini (cgq_table_t *t)
{
    for (size_t c = 0; c < t->ncols; c++)
        free (t->head[c]);
    for (size_t i = 0; i < t->ncells; i++)
        free (t->cells[i]);
    free (t->head);
    free (t->right);
    free (t->hidden);
    free (t->cells);
    memset (t, 0, sizeof *t);
}

// cgq_show_keys collects the keys of every trial's params (or metrics) in order of
// first appearance. The strings are borrowed from the trials.
const char **
cgq_show_keys (cgq_trial_rec_t **trials, size_t n, bool metrics, size_t *nkeys)
{
    size_t cap = 8, k = 0;
    const char **keys = cgq_xcalloc (cap, sizeof *keys);
    for (size_t i = 0; i < n; i++) {
        json_t *o = metrics ? trials[i]->metrics : trials[i]->params;
        const char *key;
        json_t *val;
        json_object_foreach (o, key, val) {
            (void) val;
            bool seen = false;
            for (size_t j = 0; j < k && !seen; j++)
                seen = strcmp (keys[j], key) == 0;
            if (seen)
                continue;
            if (k == cap) {
                cap *= 2;
                keys = cgq_xrealloc (keys, cap * sizeof *keys);
            }
            keys[k++] = key;
        }
    }
    *nkeys = k;
    return keys;
}

// s_duration_cell is the time the trial ran (every stage's, summed).
static char *
s_duration_cell (const cgq_trial_rec_t *t)
{
    char buf[32];
    double d;
    if (!cgq_trial_rec_run_time (t, &d))
        return cgq_xstrdup ("-");
    return cgq_xstrdup (cgq_show_duration (buf, sizeof buf, d));
}

// s_col_name returns the column name of a param (metric false) or metric
// key (caller frees): the key itself, or "params.KEY" / "metrics.KEY" when the
// key is a built-in column's name or both a param's and a metric's, so that
// no header repeats a column.
static char *
s_col_name (const char *key, bool metric, const char *const *builtins, const char **other,
            size_t nother)
{
    bool clash = false;
    for (size_t i = 0; builtins[i] && !clash; i++)
        clash = !strcmp (builtins[i], key);
    for (size_t i = 0; i < nother && !clash; i++)
        clash = !strcmp (other[i], key);
    return clash ? cgq_xasprintf ("%s.%s", metric ? "metrics" : "params", key) : cgq_xstrdup (key);
}

static bool
s_ends_with (const char *s, const char *suffix)
{
    size_t a = strlen (s), b = strlen (suffix);
    return a >= b && !strcmp (s + a - b, suffix);
}

char *
cgq_show_bytes (char *buf, size_t n, double v)
{
    const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    size_t u = 0;
    double a = fabs (v);
    while (a >= 1024 && u + 1 < sizeof units / sizeof units[0]) {
        a /= 1024;
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf (buf, n, "%.0f B", v);
    else
        snprintf (buf, n, "%.3g %s", v, units[u]);
    return buf;
}

// s_unit_cell writes a number for a table, with a unit when the metric's name
// says it: NAME_s, NAME_sec, NAME_seconds (seconds), NAME_ms (milliseconds),
// NAME_bytes or bytes (bytes). Anything else is cgq_show_value_text's.
static char *
s_unit_cell (const char *name, const json_t *v)
{
    char buf[48];
    if (!json_is_number (v))
        return cgq_show_value_text (v, false);
    double x = json_number_value (v);
    if (s_ends_with (name, "_s") || s_ends_with (name, "_sec") || s_ends_with (name, "_seconds"))
        return cgq_xstrdup (x >= 0 && x < 1 ? (snprintf (buf, sizeof buf, "%.3gms", x * 1000), buf)
                                            : cgq_show_duration (buf, sizeof buf, x));
    if (s_ends_with (name, "_ms")) {
        if (x >= 1000 || x <= -1000)
            return cgq_xstrdup (cgq_show_duration (buf, sizeof buf, x / 1000));
        snprintf (buf, sizeof buf, "%.3gms", x);
        return cgq_xstrdup (buf);
    }
    if (s_ends_with (name, "_bytes") || !strcmp (name, "bytes"))
        return cgq_xstrdup (cgq_show_bytes (buf, sizeof buf, x));
    return cgq_show_value_text (v, false);
}

// ---------------------------------------------------------------- trials

// s_board_metrics lists, into out (room for max), the metrics a leaderboard
// shows beside the objective: those an expression objective is made of, and
// for a predictor trial its test scores. The names are borrowed from *spec
// (parsed here; the caller destroys it). *predictor says the trial kind.
static size_t
s_board_metrics (const cgq_job_rec_t *job, cgq_spec_t **spec, const char **out, size_t max,
                 bool *predictor)
{
    static const char *const test[] = {"test_srcc", "test_acc10", "test_mape"};
    char err[512];
    *spec = *job->spec ? cgq_spec_parse (job->spec, strlen (job->spec), "spec", err, sizeof err)
                       : NULL;
    *predictor = false;
    size_t n = 0;
    if (!*spec)
        return 0;
    const cgq_objective_t *o = (*spec)->nobjectives == 1 ? &(*spec)->objective : NULL;
    for (size_t i = 0; o && o->expr && i < cgq_expr_nnames (o->expr) && n < max; i++)
        out[n++] = cgq_expr_name (o->expr, i);
    for (size_t k = 0; k < cgq_spec_nstages (*spec); k++)
        *predictor |= cgq_spec_stage (*spec, k)->kind == CGQ_TRIAL_PREDICTOR;
    for (size_t i = 0; *predictor && i < sizeof test / sizeof *test && n < max; i++)
        if (!job->metric || strcmp (job->metric, test[i]))
            out[n++] = test[i];
    return n;
}

void
cgq_show_leaderboard (FILE *f, const cgq_job_rec_t *job, cgq_trial_rec_t **trials, size_t n)
{
    if (n == 0) {
        fprintf (f, "no trial succeeded\n");
        return;
    }
    size_t np;
    const char **pk = cgq_show_keys (trials, n, false, &np);
    bool ranked = job->metric != NULL;
    cgq_spec_t *spec = NULL;
    const char *mk[32];
    bool predictor;
    size_t nm = s_board_metrics (job, &spec, mk, 32, &predictor);
    // [rank, value,] trial, [metrics...,] params..., duration
    size_t ncols = 2 + nm + np + (ranked ? 2 : 0);
    cgq_table_t t;
    cgq_table_init (&t, ncols);
    size_t c = 0;
    if (ranked)
        cgq_table_head (&t, c++, "rank", true);
    cgq_table_head (&t, c++, "trial", true);
    if (ranked)
        cgq_table_head (&t, c++, job->metric, true);
    for (size_t k = 0; k < nm; k++) {
        bool clash = false; // a param of the same name: say which is which
        for (size_t q = 0; q < np && !clash; q++)
            clash = !strcmp (pk[q], mk[k]);
        char *h = clash ? cgq_xasprintf ("metrics.%s", mk[k]) : cgq_xstrdup (mk[k]);
        cgq_table_head (&t, c++, h, true);
        free (h);
    }
    for (size_t k = 0; k < np; k++)
        cgq_table_head (&t, c++, pk[k], false);
    cgq_table_head (&t, c++, "duration", true);
    char num[32];
    for (size_t i = 0; i < n; i++) {
        const cgq_trial_rec_t *tr = trials[i];
        if (ranked)
            cgq_table_addf (&t, "%zu", i + 1);
        cgq_table_addf (&t, "%" PRIu64, tr->id);
        if (ranked)
            cgq_table_add (&t, cgq_xstrdup (tr->has_value ? cgq_show_number (num, sizeof num, tr->value)
                                                        : "-"));
        for (size_t k = 0; k < nm; k++) {
            const json_t *v = json_object_get (tr->metrics, mk[k]);
            cgq_table_add (&t, v ? s_unit_cell (mk[k], v) : cgq_xstrdup ("-"));
        }
        for (size_t k = 0; k < np; k++)
            cgq_table_add (&t, cgq_show_value_text (json_object_get (tr->params, pk[k]), false));
        cgq_table_add (&t, s_duration_cell (tr));
    }
    cgq_table_print (&t, f, "");
    cgq_table_fini (&t);
    // A predictor job's product is its best model: say where it is.
    if (predictor && ranked && trials[0]->trial_dir) {
        // A GNN keeps its weights beside model.json; a kernel model is the file alone.
        const char *model = json_string_value (json_object_get (trials[0]->params, "model"));
        bool kernel = model && !strcmp (model, "kernel");
        fprintf (f, "best model: %s/model.json (%scgq-predictor predict --model)\n",
                 trials[0]->trial_dir, kernel ? "" : "+ model.f32; ");
    }
    cgq_spec_destroy (&spec);
    free (pk);
}

// cgq_show_names splits a comma-separated list of names (--group-by, --columns),
// each trimmed of spaces, empty ones dropped. Returns them, pointing into
// *copy (caller frees both), and their count in *n.
char **
cgq_show_names (const char *list, char **copy, size_t *n)
{
    *copy = cgq_xstrdup (list);
    char **names = cgq_xcalloc (strlen (list) + 1, sizeof *names);
    *n = 0;
    for (char *save = NULL, *k = strtok_r (*copy, ",", &save); k; k = strtok_r (NULL, ",", &save)) {
        while (*k == ' ')
            k++;
        size_t len = strlen (k);
        while (len && k[len - 1] == ' ')
            k[--len] = 0;
        if (*k)
            names[(*n)++] = k;
    }
    return names;
}

static bool
s_among (const char *name, const char **keys, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (!strcmp (keys[k], name))
            return true;
    return false;
}

// s_pick keeps, of the n names in keys, those among the nlisted names, in
// the order listed.
static size_t
s_pick (const char **keys, size_t n, char **listed, size_t nlisted)
{
    const char **out = cgq_xcalloc (n + 1, sizeof *out);
    size_t m = 0;
    for (size_t l = 0; l < nlisted; l++)
        for (size_t q = 0; q < n; q++)
            if (!strcmp (keys[q], listed[l]) && !s_among (keys[q], out, m)) {
                out[m++] = keys[q];
                break;
            }
    memcpy (keys, out, m * sizeof *out);
    free (out);
    return m;
}

// s_judged is true when some trial was judged against constraints (the
// spec has constraints and a trial succeeded): then results show feasibility.
static bool
s_judged (cgq_trial_rec_t **trials, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (trials[i]->feasible >= 0)
            return true;
    return false;
}

// s_violation_text writes an infeasible trial's largest violation into buf
// ("3.5"; "?" when a constraint could not be computed), "" otherwise.
static const char *
s_violation_text (const cgq_trial_rec_t *t, char *buf, size_t n)
{
    buf[0] = 0;
    if (t->feasible != 0 || !json_is_object (t->violation))
        return buf;
    double max = -INFINITY;
    bool unknown = false;
    const char *k;
    json_t *v;
    json_object_foreach (t->violation, k, v)
    {
        if (json_is_number (v))
            max = fmax (max, json_number_value (v));
        else
            unknown = true;
    }
    if (unknown)
        snprintf (buf, n, "?");
    else if (isfinite (max))
        cgq_show_number (buf, n, max);
    return buf;
}

// s_pbt is true when some trial has a pbt lineage (a child, or exploited):
// then results show it.
static bool
s_pbt (cgq_trial_rec_t **trials, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (trials[i]->lineage || trials[i]->exploited)
            return true;
    return false;
}

// s_lineage_text: "3@8" (a child of trial 3's checkpoint at step 8), "->9"
// (exploited, continued as trial 9), both, or "-". Caller frees.
static char *
s_lineage_text (const cgq_trial_rec_t *t)
{
    cgq_buf_t b;
    cgq_buf_init (&b);
    if (t->lineage) {
        json_t *step = json_object_get (t->lineage, "step"), *v;
        const char *k;
        char num[32] = "?";
        json_object_foreach (step, k, v)
        {
            if (json_is_number (v)) {
                cgq_show_number (num, sizeof num, json_number_value (v));
                break;
            }
        }
        cgq_buf_printf (&b, "%lld@%s",
                        (long long) json_integer_value (json_object_get (t->lineage, "parent")),
                        num);
    }
    if (t->exploited)
        cgq_buf_printf (&b, "%s->%lld", b.len ? " " : "",
                        (long long) json_integer_value (json_object_get (t->exploited, "by")));
    char *out = cgq_xstrdup (b.len ? b.data : "-");
    cgq_buf_fini (&b);
    return out;
}

// s_hb_load: a hyperband job's trials' places (its `hyperband` field, as
// hyperband_dump writes it: trials [[trial, bracket, rung, state, value]]),
// an object "TRIAL" -> [bracket, rung]; NULL when the job has none.
static json_t *
s_hb_load (const cgq_job_rec_t *job)
{
    json_t *o = job->hyperband ? json_loads (job->hyperband, 0, NULL) : NULL;
    json_t *ts = json_object_get (o, "trials"), *out = NULL, *e;
    size_t i;
    if (json_is_array (ts)) {
        out = json_object ();
        json_array_foreach (ts, i, e)
        {
            json_t *id = json_array_get (e, 0);
            if (!json_is_integer (id) || !json_is_integer (json_array_get (e, 1)) ||
                !json_is_integer (json_array_get (e, 2)))
                continue;
            char key[32];
            snprintf (key, sizeof key, "%lld", (long long)json_integer_value (id));
            json_object_set_new (out, key,
                                 json_pack ("[OO]", json_array_get (e, 1), json_array_get (e, 2)));
        }
    }
    json_decref (o);
    return out;
}

// s_hb_cell: trial's bracket (k 0) or rung (k 1) as text ("-" when unknown).
static char *
s_hb_cell (const json_t *hb, uint64_t trial, int k)
{
    char key[32];
    snprintf (key, sizeof key, "%" PRIu64, trial);
    json_t *v = json_array_get (json_object_get (hb, key), (size_t)k);
    return json_is_integer (v) ? cgq_xasprintf ("%lld", (long long)json_integer_value (v))
                               : cgq_xstrdup ("-");
}

int
cgq_show_results_table (FILE *f, const cgq_job_rec_t *job, cgq_trial_rec_t **trials, size_t n,
                        const char *columns, int width, char *err, size_t errlen)
{
    if (n == 0) {
        fprintf (f, "job %" PRIu64 " has no trials yet\n", job->id);
        return 0;
    }
    size_t np, nm;
    const char **pk = cgq_show_keys (trials, n, false, &np);
    const char **mk = cgq_show_keys (trials, n, true, &nm);
    const char *vname = job->metric ? job->metric : "value";
    const char *builtins[] = {"trial", "state", vname, "attempts", "node", "duration", "error", NULL};
    // The objective metric is the value column already.
    size_t nshown = 0;
    for (size_t k = 0; k < nm; k++)
        if (!job->metric || strcmp (mk[k], job->metric))
            mk[nshown++] = mk[k];
    nm = nshown;
    if (columns) { // only the params and metrics named, in that order
        char *copy;
        size_t nl;
        char **listed = cgq_show_names (columns, &copy, &nl);
        const char *missing = NULL;
        for (size_t l = 0; l < nl && !missing; l++)
            if (!s_among (listed[l], pk, np) && !s_among (listed[l], mk, nm))
                missing = listed[l];
        if (missing) {
            cgq_buf_t names;
            cgq_buf_init (&names);
            for (size_t k = 0; k < np + nm; k++)
                cgq_buf_printf (&names, "%s%s", k ? ", " : "", k < np ? pk[k] : mk[k - np]);
            snprintf (err, errlen, "--columns: no param or metric '%s' (the trials have: %s)",
                      missing, names.len ? names.data : "none");
            cgq_buf_fini (&names);
        }
        else {
            np = s_pick (pk, np, listed, nl);
            nm = s_pick (mk, nm, listed, nl);
        }
        free (listed);
        free (copy);
        if (missing) {
            free (pk);
            free (mk);
            return -1;
        }
    }
    // trial, state, value, [feasible, violation,] params..., metrics..., attempts, node,
    // duration, error
    bool judged = s_judged (trials, n), pbt = s_pbt (trials, n);
    json_t *hb = s_hb_load (job); // hyperband: each trial's bracket and rung
    size_t first = (judged ? 5 : 3) + pbt + (hb ? 2 : 0); // the first param column
    size_t ncols = first + 4 + np + nm;
    cgq_table_t t;
    cgq_table_init (&t, ncols);
    size_t c = 0;
    cgq_table_head (&t, c++, "trial", true);
    cgq_table_head (&t, c++, "state", false);
    cgq_table_head (&t, c++, vname, true);
    if (judged) {
        cgq_table_head (&t, c++, "feasible", false);
        cgq_table_head (&t, c++, "violation", true);
    }
    if (pbt)
        cgq_table_head (&t, c++, "lineage", false);
    if (hb) {
        cgq_table_head (&t, c++, "bracket", true);
        cgq_table_head (&t, c++, "rung", true);
    }
    for (size_t k = 0; k < np; k++) {
        char *name = s_col_name (pk[k], false, builtins, mk, nm);
        cgq_table_head (&t, c++, name, false);
        free (name);
    }
    for (size_t k = 0; k < nm; k++) {
        char *name = s_col_name (mk[k], true, builtins, pk, np);
        cgq_table_head (&t, c++, name, true);
        free (name);
    }
    cgq_table_head (&t, c++, "attempts", true);
    cgq_table_head (&t, c++, "node", false);
    cgq_table_head (&t, c++, "duration", true);
    cgq_table_head (&t, c++, "error", false);
    char num[32];
    for (size_t i = 0; i < n; i++) {
        const cgq_trial_rec_t *tr = trials[i];
        cgq_table_addf (&t, "%" PRIu64, tr->id);
        cgq_table_add (&t, cgq_xstrdup (tr->state));
        cgq_table_add (&t, cgq_xstrdup (tr->has_value ? cgq_show_number (num, sizeof num, tr->value)
                                                    : "-"));
        if (judged) {
            cgq_table_add (&t, cgq_xstrdup (tr->feasible < 0 ? "-" : tr->feasible ? "yes" : "no"));
            cgq_table_add (&t, cgq_xstrdup (tr->feasible == 0
                                                ? s_violation_text (tr, num, sizeof num)
                                                : "-"));
        }
        if (pbt)
            cgq_table_add (&t, s_lineage_text (tr));
        if (hb) {
            cgq_table_add (&t, s_hb_cell (hb, tr->id, 0));
            cgq_table_add (&t, s_hb_cell (hb, tr->id, 1));
        }
        for (size_t k = 0; k < np; k++)
            cgq_table_add (&t, cgq_show_value_text (json_object_get (tr->params, pk[k]), false));
        for (size_t k = 0; k < nm; k++) {
            const json_t *v = json_object_get (tr->metrics, mk[k]);
            cgq_table_add (&t, v ? s_unit_cell (mk[k], v) : cgq_xstrdup ("-"));
        }
        cgq_table_addf (&t, "%u", cgq_trial_rec_tries (tr));
        cgq_table_add (&t, cgq_xstrdup (tr->node ? tr->node : "-"));
        cgq_table_add (&t, s_duration_cell (tr));
        cgq_table_add (&t, tr->error     ? cgq_xstrdup (tr->error)
                           : tr->warning ? cgq_xasprintf ("warning: %s", tr->warning)
                                         : cgq_xstrdup (""));
    }
    // On a terminal, the params and metrics that do not fit are left out,
    // the last ones first; the error column may run past the edge.
    size_t hidden = 0;
    if (width > 0 && !columns) {
        size_t total = strlen ("error"); // the last column: its header, its text may run on
        for (size_t k = 0; k + 1 < ncols; k++)
            total += cgq_table_width (&t, k) + 2;
        for (size_t k = first + np + nm; k > first && total > (size_t) width; k--) {
            total -= cgq_table_width (&t, k - 1) + 2;
            cgq_table_hide (&t, k - 1);
            hidden++;
        }
    }
    cgq_table_print (&t, f, "");
    if (hidden)
        fprintf (f, "(%zu more column%s left out to fit the terminal: --columns NAMES picks them; "
                    "--format csv or json has them all)\n",
                 hidden, hidden == 1 ? "" : "s");
    cgq_table_fini (&t);
    json_decref (hb);
    free (pk);
    free (mk);
    return 0;
}

// cgq_show_csv_field appends s quoted as RFC 4180 asks: in double quotes when it
// holds a comma, a quote or a line break, with quotes doubled.
void
cgq_show_csv_field (cgq_buf_t *b, const char *s, bool first)
{
    if (!first)
        cgq_buf_puts (b, ",");
    if (!strpbrk (s, ",\"\r\n")) {
        cgq_buf_puts (b, s);
        return;
    }
    cgq_buf_puts (b, "\"");
    for (const char *p = s; *p; p++) {
        if (*p == '"')
            cgq_buf_puts (b, "\"\"");
        else
            cgq_buf_append (b, p, 1);
    }
    cgq_buf_puts (b, "\"");
}

static void
s_csv_value (cgq_buf_t *b, const json_t *v)
{
    char *s = cgq_show_value_text (v, true);
    cgq_show_csv_field (b, s, false);
    free (s);
}

void
cgq_show_results_csv (FILE *f, const cgq_job_rec_t *job, cgq_trial_rec_t **trials, size_t n)
{
    size_t np, nm;
    const char **pk = cgq_show_keys (trials, n, false, &np);
    const char **mk = cgq_show_keys (trials, n, true, &nm);
    cgq_buf_t b;
    cgq_buf_init (&b);
    const char *builtins[] = {"id", "state", "value", "attempts", "node", "duration", "error", NULL};
    cgq_show_csv_field (&b, "id", true);
    cgq_show_csv_field (&b, "state", false);
    cgq_show_csv_field (&b, "value", false);
    bool judged = s_judged (trials, n);
    if (judged) { // feasible 1/0, violation the JSON of the violated constraints
        cgq_show_csv_field (&b, "feasible", false);
        cgq_show_csv_field (&b, "violation", false);
    }
    bool pbt = s_pbt (trials, n);
    if (pbt) { // parent: the donor's id; lineage, exploited: the JSON of the trial hash
        cgq_show_csv_field (&b, "parent", false);
        cgq_show_csv_field (&b, "lineage", false);
        cgq_show_csv_field (&b, "exploited", false);
    }
    json_t *hb = s_hb_load (job); // hyperband: bracket, rung
    if (hb) {
        cgq_show_csv_field (&b, "bracket", false);
        cgq_show_csv_field (&b, "rung", false);
    }
    for (size_t k = 0; k < np; k++) {
        char *name = s_col_name (pk[k], false, builtins, mk, nm);
        cgq_show_csv_field (&b, name, false);
        free (name);
    }
    for (size_t k = 0; k < nm; k++) {
        char *name = s_col_name (mk[k], true, builtins, pk, np);
        cgq_show_csv_field (&b, name, false);
        free (name);
    }
    cgq_show_csv_field (&b, "attempts", false);
    cgq_show_csv_field (&b, "node", false);
    cgq_show_csv_field (&b, "duration", false);
    cgq_show_csv_field (&b, "error", false);
    fprintf (f, "%s\n", b.data);
    char num[32];
    for (size_t i = 0; i < n; i++) {
        const cgq_trial_rec_t *t = trials[i];
        cgq_buf_reset (&b);
        cgq_buf_printf (&b, "%" PRIu64, t->id);
        cgq_show_csv_field (&b, t->state, false);
        cgq_show_csv_field (&b, t->has_value && isfinite (t->value) ? cgq_fmt_double (num, t->value) : "",
                     false);
        if (judged) {
            cgq_show_csv_field (&b, t->feasible < 0 ? "" : t->feasible ? "1" : "0", false);
            char *vj = t->violation ? cgq_json_dumps (t->violation) : NULL;
            cgq_show_csv_field (&b, vj ? vj : "", false);
            free (vj);
        }
        if (pbt) {
            char *lj = t->lineage ? cgq_json_dumps (t->lineage) : NULL;
            char *ej = t->exploited ? cgq_json_dumps (t->exploited) : NULL;
            if (t->lineage)
                cgq_buf_printf (&b, ",%lld",
                                (long long) json_integer_value (json_object_get (t->lineage,
                                                                                 "parent")));
            else
                cgq_buf_puts (&b, ",");
            cgq_show_csv_field (&b, lj ? lj : "", false);
            cgq_show_csv_field (&b, ej ? ej : "", false);
            free (lj);
            free (ej);
        }
        for (int k = 0; hb && k < 2; k++) {
            char *cell = s_hb_cell (hb, t->id, k);
            cgq_show_csv_field (&b, strcmp (cell, "-") ? cell : "", false);
            free (cell);
        }
        for (size_t k = 0; k < np; k++)
            s_csv_value (&b, json_object_get (t->params, pk[k]));
        for (size_t k = 0; k < nm; k++)
            s_csv_value (&b, json_object_get (t->metrics, mk[k]));
        cgq_buf_printf (&b, ",%u", cgq_trial_rec_tries (t));
        cgq_show_csv_field (&b, t->node ? t->node : "", false);
        double d;
        if (cgq_trial_rec_run_time (t, &d))
            cgq_buf_printf (&b, ",%.3f", d);
        else
            cgq_buf_puts (&b, ",");
        cgq_show_csv_field (&b, t->error ? t->error : "", false);
        fprintf (f, "%s\n", b.data);
    }
    cgq_buf_fini (&b);
    json_decref (hb);
    free (pk);
    free (mk);
}

// s_utf8_lossy returns a copy of s in which every byte that does not start a
// valid UTF-8 sequence (the strict kind jansson checks: no overlong forms, no
// surrogates, nothing above U+10FFFF) is replaced by U+FFFD. Caller frees.
static char *
s_utf8_lossy (const char *s)
{
    const unsigned char *p = (const unsigned char *) s;
    cgq_buf_t b;
    cgq_buf_init (&b);
    while (*p) {
        unsigned char c = p[0];
        size_t n = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : (c & 0xF0) == 0xE0 ? 3
                                : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        bool ok = n > 0;
        for (size_t k = 1; ok && k < n; k++)
            ok = (p[k] & 0xC0) == 0x80; // also stops at the terminating NUL
        if (ok && n > 2)
            ok = c == 0xE0 ? p[1] >= 0xA0 : c == 0xED ? p[1] <= 0x9F : c == 0xF0 ? p[1] >= 0x90
                 : c == 0xF4 ? p[1] <= 0x8F : true;
        if (ok) {
            cgq_buf_append (&b, (const char *) p, n);
            p += n;
        }
        else {
            cgq_buf_puts (&b, "\xEF\xBF\xBD");
            p++;
        }
    }
    return cgq_buf_take (&b);
}

void
cgq_show_json_str (cgq_buf_t *b, const char *s)
{
    if (!s) {
        cgq_buf_puts (b, "null");
        return;
    }
    json_t *j = json_string (s);
    if (!j) {
        // Not UTF-8 (a trial's stderr, a node id can hold any bytes): show
        // what can be shown rather than drop the text; jansson would write
        // null for a string it cannot encode.
        char *clean = s_utf8_lossy (s);
        j = json_string (clean);
        free (clean);
    }
    if (j)
        cgq_json_append (b, j, true);
    else
        cgq_buf_puts (b, "null");
    json_decref (j);
}

void
cgq_show_json_num (cgq_buf_t *b, bool has, double v)
{
    char num[32];
    cgq_buf_puts (b, has && isfinite (v) ? cgq_fmt_double (num, v) : "null");
}

void
cgq_show_results_json (FILE *f, cgq_store_t *store, const cgq_job_rec_t *job,
                       cgq_trial_rec_t **trials, size_t n)
{
    json_t *hb = s_hb_load (job); // hyperband: each trial's bracket and rung
    cgq_buf_t b;
    cgq_buf_init (&b);
    cgq_buf_printf (&b, "{\n  \"job\": %" PRIu64 ",\n  \"name\": ", job->id);
    cgq_show_json_str (&b, job->name);
    cgq_buf_puts (&b, ",\n  \"state\": ");
    cgq_show_json_str (&b, job->state);
    cgq_buf_puts (&b, ",\n  \"objective\": ");
    if (job->metric) {
        cgq_buf_puts (&b, "{\"metric\": ");
        cgq_show_json_str (&b, job->metric);
        cgq_buf_printf (&b, ", \"mode\": \"%s\"}", job->mode > 0 ? "max" : "min");
    }
    else
        cgq_buf_puts (&b, "null");
    // Several objectives: them, and the front's trial ids, best first in the first.
    cgq_front_t front;
    char err[512];
    if (!job->metric && store && cgq_front_load (store, job, false, &front, NULL, err, sizeof err) == 0) {
        cgq_buf_puts (&b, ",\n  \"objectives\": [");
        for (size_t k = 0; k < front.spec->nobjectives; k++) {
            const cgq_objective_t *o = cgq_spec_objective (front.spec, k);
            cgq_buf_puts (&b, k ? ", {\"metric\": " : "{\"metric\": ");
            cgq_show_json_str (&b, o->metric);
            cgq_buf_printf (&b, ", \"mode\": \"%s\"}", o->mode > 0 ? "max" : "min");
        }
        cgq_buf_puts (&b, "],\n  \"front\": [");
        cgq_front_sort (&front.front, false);
        for (size_t i = 0; i < front.front.n; i++)
            cgq_buf_printf (&b, "%s%" PRIu64, i ? ", " : "", front.front.rows[i].rec->id);
        cgq_buf_puts (&b, "]");
        cgq_front_fini (&front);
    }
    cgq_buf_puts (&b, ",\n  \"trials\": [");
    for (size_t i = 0; i < n; i++) {
        const cgq_trial_rec_t *t = trials[i];
        cgq_buf_printf (&b, "%s\n    {\"id\": %" PRIu64 ", \"state\": ", i ? "," : "", t->id);
        cgq_show_json_str (&b, t->state);
        cgq_buf_puts (&b, ", \"params\": ");
        if (t->params)
            cgq_json_append (&b, t->params, true);
        else
            cgq_buf_puts (&b, "{}");
        cgq_buf_puts (&b, ", \"metrics\": ");
        if (t->metrics)
            cgq_json_append (&b, t->metrics, true);
        else
            cgq_buf_puts (&b, "null");
        if (t->lineage) {
            cgq_buf_puts (&b, ", \"lineage\": ");
            cgq_json_append (&b, t->lineage, true);
        }
        if (t->exploited) {
            cgq_buf_puts (&b, ", \"exploited\": ");
            cgq_json_append (&b, t->exploited, true);
        }
        char hkey[32];
        snprintf (hkey, sizeof hkey, "%" PRIu64, t->id);
        const json_t *place = json_object_get (hb, hkey);
        if (place) // hyperband: its bracket and the rung it reached (or runs toward)
            cgq_buf_printf (&b, ", \"bracket\": %lld, \"rung\": %lld",
                            (long long)json_integer_value (json_array_get (place, 0)),
                            (long long)json_integer_value (json_array_get (place, 1)));
        cgq_buf_printf (&b, ", \"attempts\": %u, \"node\": ", cgq_trial_rec_tries (t));
        cgq_show_json_str (&b, t->node);
        cgq_buf_puts (&b, ", \"started\": ");
        cgq_show_json_num (&b, t->has_started, t->started);
        cgq_buf_puts (&b, ", \"finished\": ");
        cgq_show_json_num (&b, t->has_finished, t->finished);
        cgq_buf_puts (&b, ", \"error\": ");
        cgq_show_json_str (&b, t->error);
        cgq_buf_puts (&b, ", \"warning\": ");
        cgq_show_json_str (&b, t->warning);
        if (t->feasible >= 0) { // judged against the spec's constraints
            cgq_buf_printf (&b, ", \"feasible\": %s, \"violation\": ",
                            t->feasible ? "true" : "false");
            if (t->violation)
                cgq_json_append (&b, t->violation, true);
            else
                cgq_buf_puts (&b, "null");
        }
        if (t->stages) { // a multi-stage trial: where it is, each stage's own metrics
            cgq_buf_printf (&b, ", \"stage\": %u, \"stages\": ", t->stage);
            cgq_json_append (&b, t->stages, true);
        }
        if (t->runs) { // ... and each finished stage's run: attempt, node, times, directory
            cgq_buf_puts (&b, ", \"runs\": ");
            cgq_json_append (&b, t->runs, true);
        }
        cgq_buf_puts (&b, "}");
    }
    cgq_buf_puts (&b, n ? "\n  ]\n}\n" : "]\n}\n");
    fputs (b.data, f);
    cgq_buf_fini (&b);
    json_decref (hb);
}

// ---------------------------------------------------------------- commands

static char *
s_best_text (const cgq_job_rec_t *j, bool with_metric)
{
    char num[32];
    if (!j->has_best)
        return cgq_xstrdup ("-");
    if (with_metric && j->metric)
        return cgq_xasprintf ("%s=%s (trial %" PRIu64 ")", j->metric,
                              cgq_show_number (num, sizeof num, j->best_value), j->best_trial);
    return cgq_xasprintf ("%s (trial %" PRIu64 ")", cgq_show_number (num, sizeof num, j->best_value),
                          j->best_trial);
}

// s_front_size is the size of the front the coordinator keeps for a job with
// several objectives (cgq:job:{J}:pareto), or -1 for a job with one or none.
static long long
s_front_size (cgq_store_t *store, const cgq_job_rec_t *j)
{
    if (j->metric || cgq_front_nobjectives (j) < 2)
        return -1;
    char key[64];
    redisReply *r = cgq_store_command (store, "HLEN %s", cgq_key_pareto (key, sizeof key, j->id));
    long long n = r && r->type == REDIS_REPLY_INTEGER ? r->integer : 0;
    if (r)
        freeReplyObject (r);
    return n;
}

static char *
s_done_text (const cgq_job_rec_t *j)
{
    char cancelled[48] = "";
    if (j->counts[CGQ_TRIAL_CANCELLED]) // done, but not run to its end
        snprintf (cancelled, sizeof cancelled, " (%" PRIu64 " cancelled)",
                  j->counts[CGQ_TRIAL_CANCELLED]);
    if (j->total < 0)
        return cgq_xasprintf ("%" PRIu64 "/?%s", cgq_job_rec_done (j), cancelled);
    return cgq_xasprintf ("%" PRIu64 "/%" PRId64 "%s", cgq_job_rec_done (j), j->total, cancelled);
}

static int
s_status_list (cgq_cli_t *cli)
{
    uint64_t limit;
    if (cgq_cli_opt_u64 (cli, "limit", 50, 0, UINT32_MAX, &limit) < 0)
        return CGQ_EXIT_BAD;
    cgq_store_t *store = NULL;
    int rc = cgq_cli_store (cli, &store);
    if (rc != CGQ_EXIT_OK)
        return rc;
    redisReply *card = cgq_store_command (store, "ZCARD %s", CGQ_KEY_JOBS);
    redisReply *r = card && card->type == REDIS_REPLY_INTEGER
                        ? cgq_store_command (store, "ZREVRANGE %s 0 %lld", CGQ_KEY_JOBS,
                                             limit ? (long long) limit - 1 : -1LL)
                        : NULL;
    if (!r || r->type != REDIS_REPLY_ARRAY) {
        if (!card || !r)
            cgq_cli_error ("%s", cgq_store_errstr (store));
        else
            cgq_cli_error ("Redis at %s answered %s for %s (is this a cgq database?)",
                           cgq_store_url (store),
                           card->type == REDIS_REPLY_ERROR ? card->str : "an error",
                           CGQ_KEY_JOBS);
        if (card)
            freeReplyObject (card);
        if (r)
            freeReplyObject (r);
        cgq_store_destroy (&store);
        return CGQ_EXIT_FAIL;
    }
    long long njobs = card->integer;
    freeReplyObject (card);
    if (r->elements == 0) {
        printf ("no jobs yet (submit one with `cgq submit SPEC` or run one with `cgq run SPEC`)\n");
        freeReplyObject (r);
        cgq_store_destroy (&store);
        return CGQ_EXIT_OK;
    }
    cgq_table_t t;
    cgq_table_init (&t, 8);
    const char *heads[] = {"id", "name", "state", "done/total", "running", "failed", "best", "age"};
    const bool right[] = {true, false, false, true, true, true, false, true};
    for (size_t c = 0; c < 8; c++)
        cgq_table_head (&t, c, heads[c], right[c]);
    char err[512], buf[32];
    for (size_t i = 0; i < r->elements && rc == CGQ_EXIT_OK; i++) {
        uint64_t id;
        cgq_job_rec_t *j = NULL;
        if (r->element[i]->type != REDIS_REPLY_STRING ||
            cgq_parse_u64 (r->element[i]->str, &id) < 0)
            continue;
        int vr = cgq_view_job_load (store, id, &j, err, sizeof err);
        if (vr == CGQ_VIEW_ABSENT)
            continue; // listed but its hash is gone: nothing to show
        if (vr != CGQ_VIEW_OK) {
            cgq_cli_error ("%s", err);
            rc = CGQ_EXIT_FAIL;
            break;
        }
        cgq_table_addf (&t, "%" PRIu64, id);
        cgq_table_add (&t, cgq_xstrdup (j->name));
        if (j->paused && !cgq_job_rec_terminal (j))
            cgq_table_addf (&t, "%s (paused)", j->state);
        else if (j->blocked && !cgq_job_rec_terminal (j))
            cgq_table_addf (&t, "%s (blocked)", j->state);
        else
            cgq_table_add (&t, cgq_xstrdup (j->state));
        cgq_table_add (&t, s_done_text (j));
        if (j->counts[CGQ_TRIAL_STALE])
            cgq_table_addf (&t, "%" PRIu64 " (%" PRIu64 " stale)", j->counts[CGQ_TRIAL_RUNNING],
                          j->counts[CGQ_TRIAL_STALE]);
        else
            cgq_table_addf (&t, "%" PRIu64, j->counts[CGQ_TRIAL_RUNNING]);
        cgq_table_addf (&t, "%" PRIu64, j->counts[CGQ_TRIAL_FAILED]);
        long long front = s_front_size (store, j);
        if (front >= 0)
            cgq_table_addf (&t, "front of %lld", front);
        else
            cgq_table_add (&t, s_best_text (j, true));
        cgq_table_add (&t, cgq_xstrdup (s_ago (buf, sizeof buf, j->created)));
        cgq_job_rec_destroy (&j);
    }
    if (rc == CGQ_EXIT_OK) {
        cgq_table_print (&t, stdout, "");
        if (njobs > (long long) r->elements)
            printf ("(%lld older jobs not shown; --limit 0 shows all)\n",
                    njobs - (long long) r->elements);
    }
    cgq_table_fini (&t);
    freeReplyObject (r);
    cgq_store_destroy (&store);
    return rc;
}

static void
s_print_time (const char *label, double t)
{
    if (t <= 0) {
        printf ("%-11s -\n", label);
        return;
    }
    time_t tt = (time_t) t;
    struct tm tm;
    localtime_r (&tt, &tm);
    char when[64], ago[32];
    strftime (when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
    printf ("%-11s %s (%s ago)\n", label, when, s_ago (ago, sizeof ago, t));
}

static int
s_status_job (cgq_cli_t *cli)
{
    cgq_store_t *store = NULL;
    cgq_job_rec_t *j = NULL;
    int rc = cgq_cli_load_job (cli, cli->pos[0], &store, &j);
    if (rc != CGQ_EXIT_OK)
        return rc;
    char clock[32];
    printf ("job %" PRIu64 "  %s  %s\n", j->id, j->name, j->state);
    printf ("%-11s %s\n", "spec", *j->spec_path ? j->spec_path : "-");
    s_print_time ("created", j->created);
    if (cgq_job_rec_terminal (j)) {
        s_print_time ("finished", j->finished);
        if (j->created > 0 && j->finished >= j->created)
            printf ("%-11s %s\n", "took", cgq_show_clock (clock, sizeof clock, j->finished - j->created));
    }
    // The searcher field holds the searcher's saved state; its algorithm is
    // what a person wants to see.
    json_t *ss = json_loads (j->searcher, 0, NULL);
    const char *alg = json_string_value (json_object_get (ss, "algorithm"));
    printf ("%-11s %s\n", "searcher", alg ? alg : *j->searcher ? j->searcher : "-");
    json_decref (ss);
    char err[512];
    cgq_front_t front;
    int lr = j->metric ? 1 : cgq_front_load (store, j, false, &front, NULL, err, sizeof err);
    if (lr < 0) {
        cgq_cli_error ("%s", err);
        cgq_job_rec_destroy (&j);
        cgq_store_destroy (&store);
        return CGQ_EXIT_FAIL;
    }
    char objs[512];
    if (j->metric)
        printf ("%-11s %s (%s)\n", "objective", j->metric, j->mode > 0 ? "max" : "min");
    else if (lr == 0)
        printf ("%-11s %s\n", "objectives", cgq_front_objectives (front.spec, objs, sizeof objs));
    else
        printf ("%-11s none\n", "objective");
    char *done = s_done_text (j);
    printf ("%-11s %s done, %" PRIu64 " created\n", "trials", done, j->suggested);
    free (done);
    printf ("%-11s", "states");
    for (int s = 0; s < CGQ_TRIAL_NSTATES; s++)
        printf (" %s %" PRIu64 "%s", cgq_tstate_names[s], j->counts[s],
                s + 1 < CGQ_TRIAL_NSTATES ? "," : "\n");
    if (lr == 0)
        printf ("%-11s %zu trial%s (cgq pareto %" PRIu64 ")\n", "front", front.front.n,
                front.front.n == 1 ? "" : "s", j->id);
    else {
        char *best = s_best_text (j, true);
        printf ("%-11s %s\n", "best", best);
        free (best);
    }
    if (j->checkpoint_bytes) {
        char size[32];
        printf ("%-11s %s in the checkpoint store\n", "checkpoints",
                cgq_show_bytes (size, sizeof size, (double) j->checkpoint_bytes));
    }
    if (j->blocked && !strncmp (j->blocked, "devices ", 8)) // its devices are quarantined
        printf ("blocked: %s\n", j->blocked);
    else if (j->blocked)
        printf ("unschedulable: %s\n", j->blocked);
    if (j->paused && !cgq_job_rec_terminal (j))
        printf ("%-11s %s: nothing new starts; %" PRIu64 " trial(s) paused (cgq resume %" PRIu64
                ")\n",
                "paused", !strcmp (j->paused, "now") ? "--now" : "at checkpoints",
                j->counts[CGQ_TRIAL_PAUSED], j->id);
    if (j->error)
        printf ("%-11s %s\n", "error", j->error);

    cgq_trial_rec_t **trials = NULL;
    size_t n = 0;
    if (lr == 0) {
        printf ("\n");
        cgq_front_print_summary (&front, j, 5, stdout);
        cgq_front_fini (&front);
    }
    else if (cgq_view_trials_best (store, j, 5, &trials, &n, err, sizeof err) != CGQ_VIEW_OK) {
        cgq_cli_error ("%s", err);
        rc = CGQ_EXIT_FAIL;
    }
    else if (n > 0) {
        printf ("\ntop %zu:\n", n);
        cgq_show_leaderboard (stdout, j, trials, n);
    }
    cgq_view_trials_free (trials, n);
    cgq_job_rec_destroy (&j);
    cgq_store_destroy (&store);
    return rc;
}

int
cgq_cmd_status (cgq_cli_t *cli)
{
    return cli->npos == 0 ? s_status_list (cli) : s_status_job (cli);
}

// s_stdout_width is the terminal's width when stdout is one ($COLUMNS
// first, as shells set it), else 0: no limit for a pipe or a file.
static int
s_stdout_width (void)
{
    if (!isatty (STDOUT_FILENO))
        return 0;
    const char *cols = getenv ("COLUMNS");
    if (cols && atoi (cols) > 0)
        return atoi (cols);
    struct winsize ws;
    if (ioctl (STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    return 0;
}

int
cgq_cmd_results (cgq_cli_t *cli)
{
    const char *format = cgq_cli_opt (cli, "format");
    if (!format)
        format = "table";
    const char *by = cgq_cli_opt (cli, "group-by");
    bool paper = !strcmp (format, "markdown") || !strcmp (format, "latex");
    if (strcmp (format, "table") && strcmp (format, "csv") && strcmp (format, "json") && !paper) {
        cgq_cli_error ("bad --format '%s' (expected table, csv, json, or with --group-by markdown "
                       "or latex)",
                       format);
        return CGQ_EXIT_BAD;
    }
    if (paper && !by) {
        cgq_cli_error ("--format %s is for the tables of --group-by (e.g. --group-by "
                       "family,dataset); the trials themselves: table, csv or json",
                       format);
        return CGQ_EXIT_BAD;
    }
    uint64_t top;
    if (cgq_cli_opt_u64 (cli, "top", 0, 1, UINT32_MAX, &top) < 0)
        return CGQ_EXIT_BAD;
    const char *columns = cgq_cli_opt (cli, "columns");
    cgq_store_t *store = NULL;
    cgq_job_rec_t *j = NULL;
    int rc = cgq_cli_load_job (cli, cli->pos[0], &store, &j);
    if (rc != CGQ_EXIT_OK)
        return rc;
    cgq_trial_rec_t **trials = NULL;
    size_t n = 0;
    char err[512];
    int vr = top ? cgq_view_trials_top (store, j, top, &trials, &n, err, sizeof err)
                 : cgq_view_trials_all (store, j, &trials, &n, err, sizeof err);
    if (vr != CGQ_VIEW_OK) {
        cgq_cli_error ("%s", err);
        rc = CGQ_EXIT_FAIL;
    }
    else if (cgq_cli_flag (cli, "passes"))
        cgq_show_passes (stdout, format, j, trials, n);
    else if (by) {
        if (cgq_show_groups (stdout, format, j, trials, n, by, columns, err, sizeof err) < 0) {
            cgq_cli_error ("%s", err);
            rc = CGQ_EXIT_BAD;
        }
    }
    else if (!strcmp (format, "json"))
        cgq_show_results_json (stdout, store, j, trials, n);
    else if (!strcmp (format, "csv"))
        cgq_show_results_csv (stdout, j, trials, n);
    else if (cgq_show_results_table (stdout, j, trials, n, columns, s_stdout_width (), err,
                                     sizeof err) < 0) {
        cgq_cli_error ("%s", err);
        rc = CGQ_EXIT_BAD;
    }
    cgq_view_trials_free (trials, n);
    cgq_job_rec_destroy (&j);
    cgq_store_destroy (&store);
    return rc;
}

int
cgq_cmd_workers (cgq_cli_t *cli)
{
    cgq_store_t *store = NULL;
    int rc = cgq_cli_store (cli, &store);
    if (rc != CGQ_EXIT_OK)
        return rc;
    cgq_node_rec_t **nodes = NULL;
    size_t n = 0;
    char err[512];
    if (cgq_view_nodes_load (store, &nodes, &n, err, sizeof err) != CGQ_VIEW_OK) {
        cgq_cli_error ("%s", err);
        cgq_store_destroy (&store);
        return CGQ_EXIT_FAIL;
    }
    if (n == 0)
        printf ("no workers have connected yet (start one with cgq-worker --coordinator EP)\n");
    else {
        cgq_table_t t;
        cgq_table_init (&t, 8);
        const char *heads[] = {"id", "state", "cpus free/total", "gpus free/total", "running",
                               "last seen", "host", "kind"};
        const bool right[] = {false, false, true, true, true, true, false, false};
        for (size_t c = 0; c < 8; c++)
            cgq_table_head (&t, c, heads[c], right[c]);
        double now = cgq_wall_s ();
        char buf[32];
        for (size_t i = 0; i < n; i++) {
            const cgq_node_rec_t *nd = nodes[i];
            cgq_table_add (&t, cgq_xstrdup (nd->id));
            bool stale = !nd->has_last_seen || now - nd->last_seen > 10;
            if (!strcmp (nd->state, CGQ_NODE_ALIVE) && stale)
                cgq_table_add (&t, cgq_xstrdup ("dead?"));
            else if (!strcmp (nd->state, CGQ_NODE_ALIVE) && *nd->full)
                cgq_table_add (&t, cgq_xstrdup ("alive (disk full)"));
            else
                cgq_table_add (&t, cgq_xstrdup (*nd->state ? nd->state : "?"));
            cgq_table_addf (&t, "%g/%g", nd->free_cpus, nd->cpus);
            cgq_table_addf (&t, "%g/%g", nd->free_gpus, nd->gpus);
            cgq_table_addf (&t, "%" PRIu64, nd->running);
            if (nd->has_last_seen)
                cgq_table_addf (&t, "%s ago", s_ago (buf, sizeof buf, nd->last_seen));
            else
                cgq_table_add (&t, cgq_xstrdup ("never"));
            cgq_table_add (&t, cgq_xstrdup (*nd->hostname ? nd->hostname : "-"));
            // A device runner offers devices, not slots: cgq devices lists them.
            cgq_table_add (&t, cgq_xstrdup (*nd->kind ? nd->kind : "?"));
        }
        cgq_table_print (&t, stdout, "");
        cgq_table_fini (&t);
        for (size_t i = 0; i < n; i++)
            if (!strcmp (nodes[i]->state, CGQ_NODE_ALIVE) && *nodes[i]->full)
                printf ("%s takes no new task for now: %s\n", nodes[i]->id, nodes[i]->full);
    }
    cgq_view_nodes_free (nodes, n);
    cgq_store_destroy (&store);
    return CGQ_EXIT_OK;
}

// s_cat copies a file to stdout. Returns 0, or -1 when it cannot be opened.
static int
s_cat (const char *path)
{
    FILE *f = fopen (path, "r");
    if (!f)
        return -1;
    char buf[8192];
    size_t n, total = 0;
    int last = '\n';
    while ((n = fread (buf, 1, sizeof buf, f)) > 0) {
        fwrite (buf, 1, n, stdout);
        last = buf[n - 1];
        total += n;
    }
    fclose (f);
    if (total == 0)
        printf ("(empty)\n");
    else if (last != '\n')
        putchar ('\n');
    return 0;
}

// s_print_output prints a run's stdout.log and stderr.log from dir when it
// is on this machine, else the log tail the worker sent (log, may be NULL).
static void
s_print_output (const char *dir, const char *log, bool live)
{
    struct stat st;
    if (dir && stat (dir, &st) == 0 && S_ISDIR (st.st_mode)) {
        const char *names[] = {"stdout.log", "stderr.log"};
        for (int i = 0; i < 2; i++) {
            char *path = cgq_xasprintf ("%s/%s", dir, names[i]);
            printf ("==> %s <==\n", path);
            fflush (stdout);
            if (s_cat (path) < 0)
                printf ("(cannot read: %s)\n", strerror (errno));
            free (path);
        }
    }
    else if (log) {
        if (dir)
            printf ("==> log tail sent by the worker (%s is not on this machine) <==\n", dir);
        else
            printf ("==> log tail sent by the worker <==\n");
        fputs (log, stdout);
        if (*log && log[strlen (log) - 1] != '\n')
            putchar ('\n');
    }
    else if (dir)
        printf ("(%s is not on this machine, and no log tail was sent)\n", dir);
    else
        printf ("(no output recorded%s)\n", live ? " yet" : "");
}

// s_stage_logs prints each finished stage's run of a multi-stage trial (or
// the one named only), then the attempt of the stage it is at, if not one
// of them. Returns 0, or -1 after printing why (no such stage).
static int
s_stage_logs (const cgq_job_rec_t *j, const cgq_trial_rec_t *t, const char *only, bool live)
{
    char err[512];
    cgq_spec_t *spec = cgq_spec_parse (j->spec, strlen (j->spec), "spec", err, sizeof err);
    cgq_buf_t names;
    cgq_buf_init (&names);
    bool found = false;
    uint32_t last = 0;
    for (size_t k = 0; spec && k < cgq_spec_nstages (spec); k++) {
        const char *name = cgq_spec_stage (spec, k)->name;
        cgq_buf_printf (&names, "%s%s", k ? ", " : "", name);
        const json_t *run = json_object_get (t->runs, name);
        json_int_t at = json_integer_value (json_object_get (run, "attempt"));
        if (at > last)
            last = (uint32_t) at;
        if (only && strcmp (only, name))
            continue;
        found = true;
        char dur[32];
        if (run) {
            const char *node = json_string_value (json_object_get (run, "node"));
            printf ("=== stage %s: succeeded, attempt %lld%s%s, %s\n", name, (long long) at,
                    node ? " on " : "", node ? node : "",
                    cgq_show_duration (dur, sizeof dur,
                                       json_number_value (json_object_get (run, "duration"))));
            s_print_output (json_string_value (json_object_get (run, "trial_dir")), NULL, false);
        }
        else if (k == t->stage && t->attempt > last) {
            printf ("=== stage %s: %s, attempt %u%s%s\n", name, t->state, t->attempt,
                    t->node ? " on " : "", t->node ? t->node : "");
            s_print_output (t->trial_dir, t->log, live);
        }
        else if (only)
            printf ("=== stage %s: has not run\n", name);
    }
    if (only && !found) {
        cgq_cli_error ("trial %" PRIu64 " has no stage '%s' (stages: %s)", t->id, only,
                       names.len ? names.data : "none");
        cgq_buf_fini (&names);
        cgq_spec_destroy (&spec);
        return -1;
    }
    cgq_buf_fini (&names);
    cgq_spec_destroy (&spec);
    return 0;
}

int
cgq_cmd_logs (cgq_cli_t *cli)
{
    uint64_t tid;
    if (cgq_cli_parse_id ("trial", cli->pos[1], &tid) < 0)
        return CGQ_EXIT_BAD;
    const char *only = cgq_cli_opt (cli, "stage");
    cgq_store_t *store = NULL;
    cgq_job_rec_t *j = NULL;
    int rc = cgq_cli_load_job (cli, cli->pos[0], &store, &j);
    if (rc != CGQ_EXIT_OK)
        return rc;
    cgq_trial_rec_t *t = NULL;
    char err[512];
    int vr = cgq_view_trial_load (store, j, tid, &t, err, sizeof err);
    if (vr != CGQ_VIEW_OK) {
        cgq_cli_error ("%s", err);
        cgq_job_rec_destroy (&j);
        cgq_store_destroy (&store);
        return vr == CGQ_VIEW_ABSENT ? CGQ_EXIT_BAD : CGQ_EXIT_FAIL;
    }
    char dur[32];
    double ran;
    printf ("job %" PRIu64 " trial %" PRIu64 ": %s", j->id, t->id, t->state);
    if (t->attempt)
        printf (", attempt %u", t->attempt);
    if (t->node)
        printf (" on %s", t->node);
    if (cgq_trial_rec_run_time (t, &ran))
        printf (", %s", cgq_show_duration (dur, sizeof dur, ran));
    printf ("\n");
    if (t->params) {
        cgq_buf_t b;
        cgq_buf_init (&b);
        cgq_json_append (&b, t->params, true);
        printf ("params: %s\n", b.data);
        cgq_buf_fini (&b);
    }
    if (t->error)
        printf ("error: %s\n", t->error);
    if (t->warning)
        printf ("warning: %s\n", t->warning);
    bool live = !strcmp (t->state, cgq_tstate_names[CGQ_TRIAL_PENDING])
                || !strcmp (t->state, cgq_tstate_names[CGQ_TRIAL_RUNNING])
                || !strcmp (t->state, cgq_tstate_names[CGQ_TRIAL_STALE]);
    if (t->stages || t->runs || only) { // a multi-stage trial: stage by stage
        if (s_stage_logs (j, t, only, live) < 0)
            rc = CGQ_EXIT_BAD;
    }
    else
        s_print_output (t->trial_dir, t->log, live);
    cgq_trial_rec_destroy (&t);
    cgq_job_rec_destroy (&j);
    cgq_store_destroy (&store);
    return rc;
}
