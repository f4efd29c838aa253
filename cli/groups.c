// groups: `cgq results --group-by`: the succeeded trials grouped by params,
// with the mean and standard deviation of each column, as a table, CSV,
// JSON, LaTeX or Markdown (the paper tables of docs/cli.md).
#include "show.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "json.h"
#include "util.h"


typedef struct {
    char *name;  // column name (params.X when a metric has the same name)
    const char *key;
    bool metric; // a metric, else a param
} s_stat_col_t;

typedef struct {
    json_t **key;   // per group-by key: the value (borrowed), NULL when missing
    size_t *cnt;    // per stat column: how many trials have a number for it
    double **vals;  // per stat column: those numbers (mean first, then the std)
    size_t n;       // succeeded trials in the group
} s_group_t;

static int
s_json_cmp (const json_t *a, const json_t *b)
{
    if (!a || !b)
        return !a && !b ? 0 : !a ? 1 : -1; // missing last
    if (json_is_number (a) && json_is_number (b)) {
        double x = json_number_value (a), y = json_number_value (b);
        return x < y ? -1 : x > y;
    }
    char *x = cgq_show_value_text (a, true), *y = cgq_show_value_text (b, true);
    int r = strcmp (x, y);
    free (x);
    free (y);
    return r;
}

static size_t s_sort_nkeys;

static int
s_group_cmp (const void *pa, const void *pb)
{
    const s_group_t *a = pa, *b = pb;
    for (size_t k = 0; k < s_sort_nkeys; k++) {
        int r = s_json_cmp (a->key[k], b->key[k]);
        if (r)
            return r;
    }
    return 0;
}

static const json_t *
s_lookup (const cgq_trial_rec_t *t, const char *key)
{
    const json_t *v = json_object_get (t->params, key);
    return v ? v : json_object_get (t->metrics, key);
}

static bool
s_is_num (const json_t *v)
{
    return json_is_number (v) && isfinite (json_number_value (v));
}

// s_stats_of computes mean, sample std (n - 1; NaN when n < 2), min, max.
static void
s_stats_of (const double *v, size_t n, double *mean, double *sd, double *lo, double *hi)
{
    double sum = 0;
    *lo = INFINITY;
    *hi = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        sum += v[i];
        if (v[i] < *lo)
            *lo = v[i];
        if (v[i] > *hi)
            *hi = v[i];
    }
    *mean = n ? sum / (double) n : NAN;
    double ss = 0;
    for (size_t i = 0; i < n; i++)
        ss += (v[i] - *mean) * (v[i] - *mean);
    *sd = n > 1 ? sqrt (ss / (double) (n - 1)) : NAN;
    // A constant has no spread; the sum above can leave 5e-19 of it.
    if (n > 1 && *lo == *hi) {
        *mean = *lo;
        *sd = 0;
    }
}

// s_decimals is the number of decimals that shows sd to two significant
// digits (a negative count rounds to tens, hundreds ...); -99 when sd is 0
// or missing: then numbers are written in full.
static int
s_decimals (double sd, size_t n)
{
    if (n < 2 || !(sd > 0) || !isfinite (sd))
        return -99;
    return 1 - (int) floor (log10 (sd));
}

// s_fixed writes v with d decimals (see s_decimals; -99: a whole number in
// full, else as %.6g); past 4 decimals, in scientific notation with the
// same last digit.
static char *
s_fixed (char *buf, size_t n, double v, int d)
{
    if (d == -99 && v == floor (v) && fabs (v) < 1e15) { // a whole number in full: 1572864
        snprintf (buf, n, "%.0f", v);
        return buf;
    }
    if (d == -99)
        return cgq_show_number (buf, n, v);
    if (d > 4 && v != 0) { // 0.0000030 reads badly: 3.0e-06, the same last digit
        int p = (int) floor (log10 (fabs (v))) + d;
        snprintf (buf, n, "%.*e", p < 0 ? 0 : p > 15 ? 15 : p, v);
        return buf;
    }
    if (d >= 0)
        snprintf (buf, n, "%.*f", d > 15 ? 15 : d, v);
    else {
        double unit = pow (10, -d);
        snprintf (buf, n, "%.0f", round (v / unit) * unit);
    }
    if (!strcmp (buf, "-0") || strspn (buf, "-0.") == strlen (buf)) // -0.00 is 0.00
        if (buf[0] == '-')
            memmove (buf, buf + 1, strlen (buf));
    return buf;
}

// s_pick_columns keeps, in the order listed, the stat columns named in the
// comma-separated list (by column name or key). Returns the new count, or -1
// with err set naming the unknown one and the choices.
static long
s_pick_columns (s_stat_col_t *cols, size_t ncols, const char *list, char *err, size_t errlen)
{
    s_stat_col_t *out = cgq_xcalloc (ncols + 1, sizeof *out);
    bool *used = cgq_xcalloc (ncols + 1, sizeof *used);
    size_t nout = 0, nl;
    long rc = 0;
    char *copy;
    char **listed = cgq_show_names (list, &copy, &nl);
    for (size_t l = 0; l < nl && rc == 0; l++) {
        const char *k = listed[l];
        size_t c = 0;
        while (c < ncols && strcmp (cols[c].name, k) && strcmp (cols[c].key, k))
            c++;
        if (c == ncols) {
            cgq_buf_t names;
            cgq_buf_init (&names);
            for (size_t i = 0; i < ncols; i++)
                cgq_buf_printf (&names, "%s%s", i ? ", " : "", cols[i].name);
            snprintf (err, errlen, "--columns: no numeric metric or param '%s' to summarise (columns: %s)",
                      k, ncols ? names.data : "none");
            cgq_buf_fini (&names);
            rc = -1;
        }
        else if (!used[c]) {
            used[c] = true;
            out[nout++] = cols[c];
        }
    }
    free (listed);
    free (copy);
    if (rc == 0) {
        for (size_t c = 0; c < ncols; c++)
            if (!used[c])
                free (cols[c].name);
        memcpy (cols, out, nout * sizeof *out);
        rc = (long) nout;
    }
    free (out);
    free (used);
    return rc;
}

// s_tex appends s with LaTeX's special characters escaped.
static void
s_tex (cgq_buf_t *b, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '\\': cgq_buf_puts (b, "\\textbackslash{}"); break;
        case '~': cgq_buf_puts (b, "\\textasciitilde{}"); break;
        case '^': cgq_buf_puts (b, "\\textasciicircum{}"); break;
        case '&': case '%': case '$': case '#': case '_': case '{': case '}':
            cgq_buf_printf (b, "\\%c", *s);
            break;
        default: cgq_buf_append (b, s, 1);
        }
    }
}

// s_md appends s for a Markdown table cell ('|' escaped, lines joined).
static void
s_md (cgq_buf_t *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '|')
            cgq_buf_puts (b, "\\|");
        else if (*s == '\n' || *s == '\r')
            cgq_buf_puts (b, " ");
        else
            cgq_buf_append (b, s, 1);
    }
}

// s_paper_table writes the groups as a Markdown or LaTeX table: the keys, n,
// and "mean ± std" of each column to the std's two significant digits.
static void
s_paper_table (FILE *f, bool latex, char **keys, size_t nkeys, const s_stat_col_t *cols,
               size_t ncols, const s_group_t *groups, size_t ng)
{
    cgq_buf_t b;
    cgq_buf_init (&b);
    if (latex) {
        cgq_buf_puts (&b, "\\begin{tabular}{");
        for (size_t k = 0; k < nkeys; k++)
            cgq_buf_puts (&b, "l");
        for (size_t c = 0; c <= ncols; c++)
            cgq_buf_puts (&b, "r");
        cgq_buf_puts (&b, "}\n\\hline\n");
    }
    else
        cgq_buf_puts (&b, "|");
    for (size_t k = 0; k < nkeys + 1 + ncols; k++) {
        const char *h = k < nkeys ? keys[k] : k == nkeys ? "n" : cols[k - nkeys - 1].name;
        if (latex) {
            cgq_buf_puts (&b, k ? " & " : "");
            if (k == nkeys)
                cgq_buf_puts (&b, "$n$");
            else
                s_tex (&b, h);
        }
        else {
            cgq_buf_puts (&b, " ");
            s_md (&b, h);
            cgq_buf_puts (&b, " |");
        }
    }
    if (latex)
        cgq_buf_puts (&b, " \\\\\n\\hline\n");
    else {
        cgq_buf_puts (&b, "\n|");
        for (size_t k = 0; k < nkeys + 1 + ncols; k++)
            cgq_buf_puts (&b, k < nkeys ? "---|" : "---:|");
        cgq_buf_puts (&b, "\n");
    }
    for (size_t j = 0; j < ng; j++) {
        const s_group_t *g = &groups[j];
        if (!latex)
            cgq_buf_puts (&b, "|");
        for (size_t k = 0; k < nkeys; k++) {
            char *v = g->key[k] ? cgq_show_value_text (g->key[k], false) : cgq_xstrdup ("-");
            if (latex) {
                cgq_buf_puts (&b, k ? " & " : "");
                s_tex (&b, v);
            }
            else {
                cgq_buf_puts (&b, " ");
                s_md (&b, v);
                cgq_buf_puts (&b, " |");
            }
            free (v);
        }
        if (latex)
            cgq_buf_printf (&b, "%s%zu", nkeys ? " & " : "", g->n);
        else
            cgq_buf_printf (&b, " %zu |", g->n);
        for (size_t c = 0; c < ncols; c++) {
            double mean, sd, lo, hi;
            s_stats_of (g->vals[c], g->cnt[c], &mean, &sd, &lo, &hi);
            int d = s_decimals (sd, g->cnt[c]);
            char a[48], e[48];
            if (g->cnt[c] == 0)
                cgq_buf_puts (&b, latex ? " & --" : " - |");
            else if (g->cnt[c] == 1 || d == -99)
                cgq_buf_printf (&b, latex ? " & $%s$" : " %s |", s_fixed (a, sizeof a, mean, d));
            else
                cgq_buf_printf (&b, latex ? " & $%s \\pm %s$" : " %s ± %s |",
                                s_fixed (a, sizeof a, mean, d), s_fixed (e, sizeof e, sd, d));
        }
        cgq_buf_puts (&b, latex ? " \\\\\n" : "\n");
    }
    if (latex)
        cgq_buf_puts (&b, "\\hline\n\\end{tabular}\n");
    fputs (b.data, f);
    cgq_buf_fini (&b);
}

// s_groups_free frees what cgq_show_groups built before its groups.
static void
s_groups_free (s_stat_col_t *cols, size_t ncols, const char **pk, const char **mk, char **keys,
               char *list)
{
    for (size_t c = 0; c < ncols; c++)
        free (cols[c].name);
    free (cols);
    free (pk);
    free (mk);
    free (keys);
    free (list);
}

int
cgq_show_groups (FILE *f, const char *format, const cgq_job_rec_t *job, cgq_trial_rec_t **trials,
                 size_t n, const char *by, const char *columns, char *err, size_t errlen)
{
    // the group-by keys
    size_t nkeys;
    char *list;
    char **keys = cgq_show_names (by, &list, &nkeys);
    if (nkeys == 0) {
        snprintf (err, errlen, "bad --group-by '%s' (expected param names: --group-by family,dataset)",
                  by);
        free (keys);
        free (list);
        return -1;
    }
    // succeeded trials only: the others have no metrics to average
    // (swapped to the front: the caller still frees all n)
    size_t nok = 0;
    for (size_t i = 0; i < n; i++)
        if (!strcmp (trials[i]->state, cgq_tstate_names[CGQ_TRIAL_SUCCEEDED])) {
            cgq_trial_rec_t *tmp = trials[nok];
            trials[nok++] = trials[i];
            trials[i] = tmp;
        }
    for (size_t k = 0; k < nkeys; k++) {
        bool seen = false;
        for (size_t i = 0; i < nok && !seen; i++)
            seen = s_lookup (trials[i], keys[k]) != NULL;
        if (!seen && nok) {
            snprintf (err, errlen,
                      "no succeeded trial of job %" PRIu64 " has a param or metric '%s' to group by",
                      job->id, keys[k]);
            free (keys);
            free (list);
            return -1;
        }
    }
    // the stat columns: numeric metrics, then numeric params not grouped on
    size_t np, nm;
    const char **pk = cgq_show_keys (trials, nok, false, &np);
    const char **mk = cgq_show_keys (trials, nok, true, &nm);
    s_stat_col_t *cols = cgq_xcalloc (np + nm + 1, sizeof *cols);
    size_t ncols = 0;
    for (int pass = 0; pass < 2; pass++) {
        bool metric = pass == 0;
        const char **ks = metric ? mk : pk;
        size_t nk = metric ? nm : np;
        for (size_t k = 0; k < nk; k++) {
            bool grouped = false, numeric = false;
            for (size_t g = 0; g < nkeys && !grouped; g++)
                grouped = !strcmp (keys[g], ks[k]);
            for (size_t i = 0; i < nok && !numeric; i++)
                numeric = s_is_num (json_object_get (metric ? trials[i]->metrics : trials[i]->params, ks[k]));
            if (grouped || !numeric)
                continue;
            bool clash = false;
            for (size_t c = 0; c < ncols && !clash; c++)
                clash = !strcmp (cols[c].key, ks[k]);
            cols[ncols].key = ks[k];
            cols[ncols].metric = metric;
            cols[ncols].name = clash ? cgq_xasprintf ("params.%s", ks[k]) : cgq_xstrdup (ks[k]);
            ncols++;
        }
    }
    if (columns) {
        long picked = s_pick_columns (cols, ncols, columns, err, errlen);
        if (picked < 0) {
            s_groups_free (cols, ncols, pk, mk, keys, list);
            return -1;
        }
        ncols = (size_t) picked;
    }
    // the groups
    s_group_t *groups = cgq_xcalloc (nok + 1, sizeof *groups);
    size_t ng = 0;
    for (size_t i = 0; i < nok; i++) {
        const cgq_trial_rec_t *t = trials[i];
        s_group_t *g = NULL;
        for (size_t j = 0; j < ng && !g; j++) {
            bool same = true;
            for (size_t k = 0; k < nkeys && same; k++) {
                const json_t *v = s_lookup (t, keys[k]);
                same = (!v && !groups[j].key[k]) || (v && groups[j].key[k] && json_equal ((json_t *) v, groups[j].key[k]));
            }
            if (same)
                g = &groups[j];
        }
        if (!g) {
            g = &groups[ng++];
            g->key = cgq_xcalloc (nkeys, sizeof *g->key);
            for (size_t k = 0; k < nkeys; k++)
                g->key[k] = (json_t *) s_lookup (t, keys[k]);
            g->vals = cgq_xcalloc (ncols + 1, sizeof *g->vals);
            g->cnt = cgq_xcalloc (ncols + 1, sizeof *g->cnt);
            for (size_t c = 0; c < ncols; c++)
                g->vals[c] = cgq_xcalloc (nok, sizeof *g->vals[c]);
        }
        g->n++;
        for (size_t c = 0; c < ncols; c++) {
            const json_t *v = json_object_get (cols[c].metric ? t->metrics : t->params, cols[c].key);
            if (s_is_num (v))
                g->vals[c][g->cnt[c]++] = json_number_value (v);
        }
    }
    s_sort_nkeys = nkeys;
    if (ng > 1)
        qsort (groups, ng, sizeof *groups, s_group_cmp);

    char num[32];
    cgq_buf_t b;
    cgq_buf_init (&b);
    if (!strcmp (format, "json")) {
        cgq_buf_printf (&b, "{\n  \"job\": %" PRIu64 ",\n  \"group_by\": [", job->id);
        for (size_t k = 0; k < nkeys; k++) {
            cgq_buf_puts (&b, k ? ", " : "");
            cgq_show_json_str (&b, keys[k]);
        }
        cgq_buf_puts (&b, "],\n  \"std\": \"sample\",\n  \"groups\": [");
        for (size_t j = 0; j < ng; j++) {
            const s_group_t *g = &groups[j];
            cgq_buf_printf (&b, "%s\n    {\"key\": {", j ? "," : "");
            for (size_t k = 0; k < nkeys; k++) {
                cgq_buf_puts (&b, k ? ", " : "");
                cgq_show_json_str (&b, keys[k]);
                cgq_buf_puts (&b, ": ");
                if (g->key[k])
                    cgq_json_append (&b, g->key[k], true);
                else
                    cgq_buf_puts (&b, "null");
            }
            cgq_buf_printf (&b, "}, \"n\": %zu, \"stats\": {", g->n);
            for (size_t c = 0; c < ncols; c++) {
                double mean, sd, lo, hi;
                s_stats_of (g->vals[c], g->cnt[c], &mean, &sd, &lo, &hi);
                cgq_buf_puts (&b, c ? ",\n      " : "\n      ");
                cgq_show_json_str (&b, cols[c].name);
                cgq_buf_printf (&b, ": {\"n\": %zu, \"mean\": ", g->cnt[c]);
                cgq_show_json_num (&b, g->cnt[c] > 0, mean);
                cgq_buf_puts (&b, ", \"std\": ");
                cgq_show_json_num (&b, g->cnt[c] > 1, sd);
                cgq_buf_puts (&b, ", \"min\": ");
                cgq_show_json_num (&b, g->cnt[c] > 0, lo);
                cgq_buf_puts (&b, ", \"max\": ");
                cgq_show_json_num (&b, g->cnt[c] > 0, hi);
                cgq_buf_puts (&b, "}");
            }
            cgq_buf_puts (&b, "}}");
        }
        cgq_buf_puts (&b, ng ? "\n  ]\n}\n" : "]\n}\n");
        fputs (b.data, f);
    }
    else if (!strcmp (format, "csv")) {
        for (size_t k = 0; k < nkeys; k++)
            cgq_show_csv_field (&b, keys[k], k == 0);
        cgq_show_csv_field (&b, "n", false);
        const char *st[] = {"mean", "std", "min", "max"};
        for (size_t c = 0; c < ncols; c++)
            for (size_t s = 0; s < 4; s++) {
                char *h = cgq_xasprintf ("%s_%s", cols[c].name, st[s]);
                cgq_show_csv_field (&b, h, false);
                free (h);
            }
        fprintf (f, "%s\n", b.data);
        for (size_t j = 0; j < ng; j++) {
            const s_group_t *g = &groups[j];
            cgq_buf_reset (&b);
            for (size_t k = 0; k < nkeys; k++) {
                char *v = cgq_show_value_text (g->key[k], true);
                cgq_show_csv_field (&b, v, k == 0);
                free (v);
            }
            cgq_buf_printf (&b, ",%zu", g->n);
            for (size_t c = 0; c < ncols; c++) {
                double v[4];
                s_stats_of (g->vals[c], g->cnt[c], &v[0], &v[1], &v[2], &v[3]);
                for (size_t s = 0; s < 4; s++)
                    cgq_buf_printf (&b, ",%s", g->cnt[c] > (s == 1 ? 1u : 0u) && isfinite (v[s])
                                                   ? cgq_fmt_double (num, v[s]) : "");
            }
            fprintf (f, "%s\n", b.data);
        }
    }
    else if (!strcmp (format, "markdown") || !strcmp (format, "latex")) {
        if (ng == 0)
            fprintf (f, "job %" PRIu64 " has no succeeded trial to group\n", job->id);
        else
            s_paper_table (f, !strcmp (format, "latex"), keys, nkeys, cols, ncols, groups, ng);
    }
    else {
        if (ng == 0)
            fprintf (f, "job %" PRIu64 " has no succeeded trial to group\n", job->id);
        else {
            cgq_table_t t;
            cgq_table_init (&t, nkeys + 1 + ncols);
            for (size_t k = 0; k < nkeys; k++)
                cgq_table_head (&t, k, keys[k], false);
            cgq_table_head (&t, nkeys, "n", true);
            for (size_t c = 0; c < ncols; c++)
                cgq_table_head (&t, nkeys + 1 + c, cols[c].name, true);
            for (size_t j = 0; j < ng; j++) {
                const s_group_t *g = &groups[j];
                for (size_t k = 0; k < nkeys; k++)
                    cgq_table_add (&t, g->key[k] ? cgq_show_value_text (g->key[k], false) : cgq_xstrdup ("-"));
                cgq_table_addf (&t, "%zu", g->n);
                for (size_t c = 0; c < ncols; c++) {
                    double mean, sd, lo, hi;
                    s_stats_of (g->vals[c], g->cnt[c], &mean, &sd, &lo, &hi);
                    char a[48], d[48], l[48], h[48];
                    int dec = s_decimals (sd, g->cnt[c]); // the std's two digits
                    if (g->cnt[c] == 0)
                        cgq_table_add (&t, cgq_xstrdup ("-"));
                    else if (g->cnt[c] == 1)
                        cgq_table_add (&t, cgq_xstrdup (cgq_show_number (a, sizeof a, mean)));
                    else
                        cgq_table_addf (&t, "%s ± %s [%s, %s]", s_fixed (a, sizeof a, mean, dec),
                                        s_fixed (d, sizeof d, sd, dec),
                                        s_fixed (l, sizeof l, lo, dec),
                                        s_fixed (h, sizeof h, hi, dec));
                }
            }
            cgq_table_print (&t, f, "");
            cgq_table_fini (&t);
            fprintf (f, "(mean ± sample std [min, max] over the succeeded trials of each group)\n");
        }
    }
    cgq_buf_fini (&b);
    for (size_t j = 0; j < ng; j++) {
        for (size_t c = 0; c < ncols; c++)
            free (groups[j].vals[c]);
        free (groups[j].vals);
        free (groups[j].cnt);
        free (groups[j].key);
    }
    free (groups);
    s_groups_free (cols, ncols, pk, mk, keys, list);
    return 0;
}
