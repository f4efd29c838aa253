// pareto: dominance, NSGA-II's sort and crowding, the front, and the exact
// hypervolume by slicing. Values are turned into "smaller is better" keys one
// comparison at a time, so callers' arrays are never copied or negated except
// by the hypervolume, which needs its own sorted copy anyway.
#include "pareto.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

// s_cmp orders a against b in one objective: -1 if a is better, 1 if worse,
// 0 if equal. NaN is worse than any number.
static int
s_cmp (double a, double b, int sense)
{
    bool na = isnan (a), nb = isnan (b);
    if (na || nb)
        return na && nb ? 0 : na ? 1 : -1;
    if (a == b)
        return 0;
    bool a_less = a < b;
    return (sense > 0) != a_less ? -1 : 1;
}

int
cgq_pareto_compare (const double *a, const double *b, int m, const int *sense)
{
    bool a_better = false, b_better = false;
    for (int j = 0; j < m; j++) {
        int c = s_cmp (a[j], b[j], sense ? sense[j] : -1);
        if (c < 0)
            a_better = true;
        else if (c > 0)
            b_better = true;
        if (a_better && b_better)
            return 0;
    }
    return a_better ? 1 : b_better ? -1 : 0;
}

bool
cgq_pareto_dominates (const double *a, const double *b, int m, const int *sense)
{
    return cgq_pareto_compare (a, b, m, sense) == 1;
}

// Deb's sort keeps, for every point, the list of points it dominates (O(n^2)
// memory). Here only the count of dominators is kept, and each front compares
// its members again with the unranked points: twice the comparisons, O(n) memory.
int
cgq_pareto_sort (const double *points, int n, int m, const int *sense, int *ranks)
{
    if (n <= 0)
        return 0;
    int *count = cgq_xcalloc ((size_t) n, sizeof *count);
    int *queue = cgq_xmalloc ((size_t) n * sizeof *queue); // the fronts, one after another
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            int c = cgq_pareto_compare (points + (size_t) i * m, points + (size_t) j * m, m, sense);
            if (c > 0)
                count[j]++;
            else if (c < 0)
                count[i]++;
        }
    int tail = 0;
    for (int i = 0; i < n; i++) {
        ranks[i] = -1;
        if (count[i] == 0) {
            ranks[i] = 0;
            queue[tail++] = i;
        }
    }
    int fronts = 0, head = 0;
    while (head < tail) {
        int end = tail;
        for (; head < end; head++) {
            const double *p = points + (size_t) queue[head] * m;
            for (int j = 0; j < n; j++)
                if (ranks[j] < 0 && cgq_pareto_dominates (p, points + (size_t) j * m, m, sense) &&
                    --count[j] == 0) {
                    ranks[j] = fronts + 1;
                    queue[tail++] = j;
                }
        }
        fronts++;
    }
    free (count);
    free (queue);
    return fronts;
}

static double
s_viol (const double *viol, int i)
{
    return isnan (viol[i]) ? INFINITY : viol[i];
}

static int
s_cmp_double (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

int
cgq_pareto_sort_constrained (const double *points, const double *viol, int n, int m,
                             const int *sense, int *ranks)
{
    if (!viol)
        return cgq_pareto_sort (points, n, m, sense, ranks);
    if (n <= 0)
        return 0;
    double *fp = cgq_xmalloc (((size_t) n * (size_t) m + 1) * sizeof *fp);
    double *iv = cgq_xmalloc ((size_t) n * sizeof *iv);
    int *at = cgq_xmalloc ((size_t) n * sizeof *at), *fr = cgq_xmalloc ((size_t) n * sizeof *fr);
    int nfeas = 0, ninf = 0;
    for (int i = 0; i < n; i++) {
        if (s_viol (viol, i) > 0) {
            iv[ninf++] = s_viol (viol, i);
            continue;
        }
        memcpy (&fp[(size_t) nfeas * m], &points[(size_t) i * m], (size_t) m * sizeof *fp);
        at[nfeas++] = i;
    }
    int fronts = cgq_pareto_sort (fp, nfeas, m, sense, fr);
    for (int k = 0; k < nfeas; k++)
        ranks[at[k]] = fr[k];
    // The infeasible: one rank per distinct violation, after the feasible fronts.
    qsort (iv, (size_t) ninf, sizeof *iv, s_cmp_double);
    int distinct = 0;
    for (int k = 0; k < ninf; k++)
        if (k == 0 || iv[k] != iv[distinct - 1])
            iv[distinct++] = iv[k];
    for (int i = 0; i < n; i++) {
        double v = s_viol (viol, i);
        if (!(v > 0))
            continue;
        int lo = 0, hi = distinct - 1;
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (iv[mid] < v)
                lo = mid + 1;
            else
                hi = mid;
        }
        ranks[i] = fronts + lo;
    }
    fronts += distinct;
    free (fp);
    free (iv);
    free (at);
    free (fr);
    return fronts;
}

typedef struct {
    double v;
    int idx; // the point's index, to break ties the same way whatever idx's order
    int at;  // position in idx[] and dist[]
} s_entry_t;

static int
s_entry_cmp (const void *pa, const void *pb)
{
    const s_entry_t *a = pa, *b = pb;
    int c = s_cmp (a->v, b->v, -1);
    if (c)
        return c;
    return (a->idx > b->idx) - (a->idx < b->idx);
}

void
cgq_pareto_crowding (const double *points, int m, const int *idx, int k, double *dist)
{
    for (int t = 0; t < k; t++)
        dist[t] = k <= 2 ? INFINITY : 0;
    if (k <= 2)
        return;
    s_entry_t *e = cgq_xmalloc ((size_t) k * sizeof *e);
    for (int o = 0; o < m; o++) {
        for (int t = 0; t < k; t++)
            e[t] = (s_entry_t){points[(size_t) idx[t] * m + o], idx[t], t};
        qsort (e, (size_t) k, sizeof *e, s_entry_cmp);
        double range = e[k - 1].v - e[0].v;
        if (!(range > 0)) // all equal (or NaN): this objective separates nobody
            continue;
        dist[e[0].at] = dist[e[k - 1].at] = INFINITY;
        if (!isfinite (range))
            continue;
        for (int t = 1; t < k - 1; t++)
            dist[e[t].at] += (e[t + 1].v - e[t - 1].v) / range;
    }
    free (e);
}

int
cgq_pareto_front (const double *points, int n, int m, const int *sense, int *out)
{
    int count = 0;
    for (int i = 0; i < n; i++) {
        bool dominated = false;
        for (int j = 0; j < n && !dominated; j++)
            dominated = j != i && cgq_pareto_dominates (points + (size_t) j * m,
                                                        points + (size_t) i * m, m, sense);
        if (!dominated)
            out[count++] = i;
    }
    return count;
}

// --- hypervolume -------------------------------------------------------------
// The copy the volume is computed on holds minimisation keys with the
// objectives reversed: row = (key of objective m-1, ..., key of objective 0).
// Slicing always cuts along a row's first value and recurses on the rest, so
// the rows a level hands down are its own rows minus their first value.

static int
s_row_cmp (const void *pa, const void *pb)
{
    // Rows have at least two values; only the first two decide the order.
    const double *a = pa, *b = pb;
    if (a[0] != b[0])
        return a[0] < b[0] ? -1 : 1;
    // The sweep of two objectives relies on the better second value first.
    return (a[1] > b[1]) - (a[1] < b[1]);
}

// s_hv is the volume dominated by rows[0..c) (k >= 2 values each, all strictly
// below ref) and bounded by ref. It sorts rows in place.
static double
s_hv (double *rows, int c, int k, const double *ref)
{
    if (c == 0)
        return 0;
    qsort (rows, (size_t) c, (size_t) k * sizeof *rows, s_row_cmp);
    double v = 0;
    if (k == 2) {
        // Sweep along the first value: each point lowers the staircase of the
        // second and adds the strip between the old step and its own.
        double prev = ref[1];
        for (int i = 0; i < c; i++) {
            const double *r = rows + 2 * i;
            if (r[1] < prev) {
                v += (ref[0] - r[0]) * (prev - r[1]);
                prev = r[1];
            }
        }
        return v;
    }
    // Slice along the first value: between the i-th and the next cut, the
    // cross-section is the (k-1)-volume of the first i+1 points.
    double *sub = cgq_xmalloc ((size_t) c * (size_t) (k - 1) * sizeof *sub);
    for (int i = 0; i < c; i++) {
        memcpy (sub + (size_t) i * (k - 1), rows + (size_t) i * k + 1,
                (size_t) (k - 1) * sizeof *sub);
        double lo = rows[(size_t) i * k], hi = i + 1 < c ? rows[(size_t) (i + 1) * k] : ref[0];
        if (hi > lo)
            v += s_hv (sub, i + 1, k - 1, ref + 1) * (hi - lo);
    }
    free (sub);
    return v;
}

int
cgq_pareto_hypervolume (const double *points, int n, int m, const int *sense, const double *ref,
                        double *hv)
{
    if (m < 1 || m > CGQ_PARETO_HV_MAX_M || n < 0)
        return -1;
    double rref[CGQ_PARETO_HV_MAX_M];
    for (int t = 0; t < m; t++) {
        int j = m - 1 - t;
        rref[t] = sense && sense[j] > 0 ? -ref[j] : ref[j];
    }
    // Keep the points strictly better than ref everywhere (NaN fails the test).
    double *rows = cgq_xmalloc (((size_t) n + 1) * (size_t) m * sizeof *rows);
    int c = 0;
    for (int i = 0; i < n; i++) {
        double *r = rows + (size_t) c * m;
        bool inside = true;
        for (int t = 0; t < m && inside; t++) {
            int j = m - 1 - t;
            double x = points[(size_t) i * m + j];
            r[t] = sense && sense[j] > 0 ? -x : x;
            inside = r[t] < rref[t];
        }
        c += inside;
    }
    int rc = 0;
    if (m == 1) {
        double best = rref[0];
        for (int i = 0; i < c; i++)
            best = fmin (best, rows[i]);
        *hv = rref[0] - best;
    }
    else if (m == 2)
        *hv = s_hv (rows, c, 2, rref);
    else if (c > CGQ_PARETO_HV_MAX_POINTS)
        rc = -1;
    else {
        // Dominated points and repeats add nothing but cost a factor in every
        // level: keep one copy of each point of the front.
        double *front = cgq_xmalloc ((size_t) c * (size_t) m * sizeof *front);
        int f = 0;
        for (int i = 0; i < c; i++) {
            const double *r = rows + (size_t) i * m;
            bool drop = false;
            for (int j = 0; j < c && !drop; j++) {
                const double *o = rows + (size_t) j * m;
                drop = j != i && (cgq_pareto_dominates (o, r, m, NULL) ||
                                  (j < i && memcmp (o, r, (size_t) m * sizeof *r) == 0));
            }
            if (!drop)
                memcpy (front + (size_t) f++ * m, r, (size_t) m * sizeof *r);
        }
        if (pow (f, m - 1) > CGQ_PARETO_HV_BUDGET)
            rc = -1;
        else
            *hv = s_hv (front, f, m, rref);
        free (front);
    }
    free (rows);
    return rc;
}
