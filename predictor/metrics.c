#include "metrics.h"

#include <math.h>
#include <stdlib.h>

#include "agree.h"
#include "util.h"

void
cgq_pred_rank (const double *v, size_t n, double *rank)
{
    cgq_ranks (v, n, rank);
}

double
cgq_pred_srcc (const double *a, const double *b, size_t n)
{
    double r = cgq_srcc (a, b, n); // common/agree.c: the passes' agreement counts the same way
    return isnan (r) ? 0 : r;
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
