#include "metrics.h"

#include <math.h>
#include <stdlib.h>

#include "util.h"

typedef struct {
    double v;
    size_t i;
} s_item_t;

static int
s_cmp (const void *a, const void *b)
{
    const s_item_t *x = a, *y = b;
    if (x->v < y->v)
        return -1;
    if (x->v > y->v)
        return 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

void
cgq_pred_rank (const double *v, size_t n, double *rank)
{
    s_item_t *it = cgq_xcalloc (n + 1, sizeof *it);
    for (size_t i = 0; i < n; i++)
        it[i] = (s_item_t){v[i], i};
    qsort (it, n, sizeof *it, s_cmp);
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && it[j].v == it[i].v)
            j++;
        // Positions i..j-1 (0-based) hold equal values: ranks i+1..j, mean (i+1+j)/2.
        double r = (double)(i + 1 + j) / 2.0;
        for (size_t k = i; k < j; k++)
            rank[it[k].i] = r;
        i = j;
    }
    free (it);
}

static double
s_pearson (const double *a, const double *b, size_t n)
{
    double ma = 0, mb = 0;
    for (size_t i = 0; i < n; i++) {
        ma += a[i];
        mb += b[i];
    }
    ma /= (double)n;
    mb /= (double)n;
    double sab = 0, saa = 0, sbb = 0;
    for (size_t i = 0; i < n; i++) {
        sab += (a[i] - ma) * (b[i] - mb);
        saa += (a[i] - ma) * (a[i] - ma);
        sbb += (b[i] - mb) * (b[i] - mb);
    }
    if (saa <= 0 || sbb <= 0)
        return 0;
    return sab / sqrt (saa * sbb);
}

double
cgq_pred_srcc (const double *a, const double *b, size_t n)
{
    if (n < 2)
        return 0;
    double *ra = cgq_xcalloc (n, sizeof *ra), *rb = cgq_xcalloc (n, sizeof *rb);
    cgq_pred_rank (a, n, ra);
    cgq_pred_rank (b, n, rb);
    double r = s_pearson (ra, rb, n);
    free (ra);
    free (rb);
    return r;
}

void
cgq_pred_metrics (const double *pred, const double *y, size_t n, cgq_pred_metrics_t *out)
{
    double ae = 0, ape = 0, se = 0, hit = 0;
    for (size_t i = 0; i < n; i++) {
        double e = pred[i] - y[i];
        ae += fabs (e);
        ape += fabs (e) / y[i];
        se += e * e;
        // The same test as nn-Meter: |pred - y| / y <= 0.1.
        if (fabs (e) / y[i] <= 0.10)
            hit++;
    }
    double dn = n ? (double)n : 1;
    out->mae = ae / dn;
    out->mape = 100 * ape / dn;
    out->rmse = sqrt (se / dn);
    out->acc10 = 100 * hit / dn;
    out->srcc = cgq_pred_srcc (pred, y, n);
}
