// importance: per-param variance explained (see importance.h).
#include "importance.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

typedef struct {
    double x; // numeric value, or the group's index
    double y;
} s_pt_t;

static int
s_cmp_x (const void *a, const void *b)
{
    const s_pt_t *p = a, *q = b;
    return p->x < q->x ? -1 : p->x > q->x;
}

static int
s_cmp_imp (const void *a, const void *b)
{
    const importance_t *p = a, *q = b;
    if (p->eps2 != q->eps2)
        return p->eps2 > q->eps2 ? -1 : 1;
    return strcmp (p->name, q->name);
}

// s_eps2: the bias-corrected correlation ratio of y over the groups of pts
// (sorted by x; a group is a run of equal x, and for numeric params runs are
// merged into at most IMPORTANCE_BINS equal-count bins). Sets *bins.
static double
s_eps2 (s_pt_t *pts, size_t n, bool numeric, size_t *bins)
{
    *bins = 0;
    if (n < 2)
        return 0;
    qsort (pts, n, sizeof *pts, s_cmp_x);
    double mean = 0;
    for (size_t i = 0; i < n; i++)
        mean += pts[i].y;
    mean /= (double)n;
    double sst = 0;
    for (size_t i = 0; i < n; i++)
        sst += (pts[i].y - mean) * (pts[i].y - mean);
    // Groups: runs of equal x; numeric runs are joined until a bin holds
    // at least n / IMPORTANCE_BINS points (equal x never split).
    size_t target = numeric ? (n + IMPORTANCE_BINS - 1) / IMPORTANCE_BINS : 1;
    double ssb = 0, ssw = 0;
    size_t k = 0;
    for (size_t lo = 0; lo < n;) {
        size_t hi = lo;
        do {
            double x = pts[hi].x;
            while (hi < n && pts[hi].x == x)
                hi++;
        } while (hi < n && hi - lo < target);
        double m = 0;
        for (size_t i = lo; i < hi; i++)
            m += pts[i].y;
        m /= (double)(hi - lo);
        for (size_t i = lo; i < hi; i++)
            ssw += (pts[i].y - m) * (pts[i].y - m);
        ssb += (double)(hi - lo) * (m - mean) * (m - mean);
        k++;
        lo = hi;
    }
    *bins = k;
    if (k < 2 || sst <= 0 || n <= k)
        return 0;
    double msw = ssw / (double)(n - k);
    double e = (ssb - (double)(k - 1) * msw) / sst;
    return e > 0 ? (e < 1 ? e : 1) : 0;
}

size_t
importance_compute (json_t *const *params, const double *y, size_t n, importance_t **out)
{
    // The names, in first-seen order.
    json_t *names = json_object ();
    for (size_t i = 0; i < n; i++) {
        const char *k;
        json_t *v;
        if (json_is_object (params[i]))
            json_object_foreach (params[i], k, v) json_object_set_new (names, k, json_true ());
    }
    size_t m = json_object_size (names), j = 0;
    importance_t *res = cgq_xcalloc (m + 1, sizeof *res);
    s_pt_t *pts = cgq_xcalloc (n + 1, sizeof *pts);
    const char *name;
    json_t *unused;
    json_object_foreach (names, name, unused)
    {
        bool numeric = true;
        size_t c = 0;
        for (size_t i = 0; i < n; i++) {
            json_t *v = json_is_object (params[i]) ? json_object_get (params[i], name) : NULL;
            if (!v)
                continue;
            if (!json_is_number (v))
                numeric = false;
        }
        // Categories: by the value's JSON text, numbered in a scratch object.
        json_t *cats = numeric ? NULL : json_object ();
        for (size_t i = 0; i < n; i++) {
            json_t *v = json_is_object (params[i]) ? json_object_get (params[i], name) : NULL;
            if (!v)
                continue;
            double x;
            if (numeric)
                x = json_number_value (v);
            else {
                char *txt = json_dumps (v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_SORT_KEYS);
                json_t *idx = json_object_get (cats, txt ? txt : "");
                if (!idx) {
                    idx = json_integer ((json_int_t)json_object_size (cats));
                    json_object_set_new (cats, txt ? txt : "", idx);
                }
                x = (double)json_integer_value (idx);
                free (txt);
            }
            pts[c++] = (s_pt_t){x, y[i]};
        }
        json_decref (cats);
        res[j].name = cgq_xstrdup (name);
        res[j].numeric = numeric;
        res[j].n = c;
        res[j].eps2 = s_eps2 (pts, c, numeric, &res[j].bins);
        res[j].rough = res[j].bins > 1 && c < IMPORTANCE_MIN_PER_GROUP * res[j].bins;
        j++;
    }
    free (pts);
    json_decref (names);
    double sum = 0;
    for (size_t i = 0; i < m; i++)
        sum += res[i].eps2;
    for (size_t i = 0; i < m; i++)
        res[i].share = sum > 0 ? res[i].eps2 / sum : 0;
    qsort (res, m, sizeof *res, s_cmp_imp);
    *out = res;
    return m;
}

void
importance_free (importance_t *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free (v[i].name);
    free (v);
}
