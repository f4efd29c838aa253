// agree: acc10, median relative difference and Spearman's rho of two passes.
#include "agree.h"

#include <math.h>
#include <stdlib.h>

#include "util.h"

double
cgq_pass_diff (double a, double b)
{
    if (!isfinite (a) || !isfinite (b) || a <= 0)
        return NAN;
    return (b - a) / a;
}

static int
s_cmp_double (const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

typedef struct {
    double v;
    size_t i;
} s_idx_t;

static int
s_cmp_idx (const void *x, const void *y)
{
    const s_idx_t *a = x, *b = y;
    if (a->v != b->v)
        return a->v < b->v ? -1 : 1;
    return a->i < b->i ? -1 : a->i > b->i;
}

void
cgq_ranks (const double *v, size_t n, double *r)
{
    s_idx_t *x = cgq_xcalloc (n, sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = (s_idx_t){v[i], i};
    qsort (x, n, sizeof *x, s_cmp_idx);
    for (size_t i = 0; i < n;) {
        size_t k = i;
        while (k + 1 < n && x[k + 1].v == x[i].v)
            k++;
        double rank = (double)(i + k) / 2 + 1;
        for (size_t m = i; m <= k; m++)
            r[x[m].i] = rank;
        i = k + 1;
    }
    free (x);
}

// s_pearson of x and y; NAN when either is constant.
static double
s_pearson (const double *x, const double *y, size_t n)
{
    double mx = 0, my = 0;
    for (size_t i = 0; i < n; i++) {
        mx += x[i];
        my += y[i];
    }
    mx /= (double)n;
    my /= (double)n;
    double sxy = 0, sxx = 0, syy = 0;
    for (size_t i = 0; i < n; i++) {
        sxy += (x[i] - mx) * (y[i] - my);
        sxx += (x[i] - mx) * (x[i] - mx);
        syy += (y[i] - my) * (y[i] - my);
    }
    if (sxx <= 0 || syy <= 0)
        return NAN;
    return sxy / sqrt (sxx * syy);
}

double
cgq_srcc (const double *a, const double *b, size_t n)
{
    if (n < 2)
        return NAN;
    double *ra = cgq_xcalloc (n, sizeof *ra), *rb = cgq_xcalloc (n, sizeof *rb);
    cgq_ranks (a, n, ra);
    cgq_ranks (b, n, rb);
    double r = s_pearson (ra, rb, n);
    free (ra);
    free (rb);
    return r;
}

cgq_agree_t
cgq_agree (const double *a, const double *b, size_t n)
{
    cgq_agree_t g = {.n = 0, .acc10 = NAN, .median_abs = NAN, .srcc = NAN};
    double *pa = cgq_xcalloc (n ? n : 1, sizeof *pa), *pb = cgq_xcalloc (n ? n : 1, sizeof *pb);
    double *d = cgq_xcalloc (n ? n : 1, sizeof *d);
    size_t m = 0, within = 0;
    for (size_t i = 0; i < n; i++) {
        double diff = cgq_pass_diff (a[i], b[i]);
        if (isnan (diff))
            continue;
        pa[m] = a[i];
        pb[m] = b[i];
        d[m] = fabs (diff);
        // The predictor's acc10 (|pred - true| / true <= 10 %), with a hair
        // of slack so that 110 against 100 counts as it does in numpy.
        if (d[m] <= 0.10 + 1e-12)
            within++;
        m++;
    }
    g.n = m;
    if (m) {
        g.acc10 = (double)within / (double)m;
        qsort (d, m, sizeof *d, s_cmp_double);
        g.median_abs = m % 2 ? d[m / 2] : (d[m / 2 - 1] + d[m / 2]) / 2;
    }
    g.srcc = cgq_srcc (pa, pb, m);
    free (pa);
    free (pb);
    free (d);
    return g;
}
