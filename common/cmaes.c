// cmaes: the CMA-ES update (cmaes.h). Variable names follow the tutorial:
// m mean, sigma step size, C covariance = B diag(D^2) B^T, p_c and p_sigma
// the evolution paths, w the weights, mu_eff the variance effective
// selection mass.
#include "cmaes.h"

#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define S_EIG_MIN 1e-300
#define S_TOLXUP 1e4
#define S_TOLCOND 1e14

struct cgq_cmaes_t {
    size_t n, lambda, mu;
    double *w; // lambda weights: mu positive, then negative
    double mu_eff, c_sigma, d_sigma, c_c, c_1, c_mu, chi_n;
    double *m, sigma, *C, *B, *D, *pc, *ps;
    uint64_t g;   // updates done
    size_t hterm; // TolFun's history: 2 * hterm values
    double *hist;
    double *y, *tmp; // scratch: lambda * n, n
    size_t *rank;    // scratch: lambda
};

cgq_cmaes_t *
cgq_cmaes_new (size_t n, size_t lambda, const double *mean, double sigma)
{
    cgq_cmaes_t *s = cgq_xcalloc (1, sizeof *s);
    double dn = (double)n;
    s->n = n;
    s->lambda = lambda >= 2 ? lambda : 4 + (size_t)floor (3 * log (dn));
    s->mu = s->lambda / 2;
    size_t L = s->lambda;
    s->w = cgq_xcalloc (L, sizeof *s->w);
    // eq. 49: w'_i = ln((lambda + 1) / 2) - ln i
    double spos = 0, spos2 = 0, sneg = 0, sneg2 = 0;
    for (size_t i = 0; i < L; i++) {
        s->w[i] = log ((L + 1) / 2.0) - log ((double)(i + 1));
        if (s->w[i] >= 0)
            spos += s->w[i], spos2 += s->w[i] * s->w[i];
        else
            sneg += s->w[i], sneg2 += s->w[i] * s->w[i];
    }
    s->mu_eff = spos * spos / spos2;
    double mu_eff_neg = sneg2 > 0 ? sneg * sneg / sneg2 : 0;
    // eq. 54-58
    double alpha_cov = 2;
    s->c_sigma = (s->mu_eff + 2) / (dn + s->mu_eff + 5);
    s->d_sigma = 1 + 2 * fmax (0, sqrt ((s->mu_eff - 1) / (dn + 1)) - 1) + s->c_sigma;
    s->c_c = (4 + s->mu_eff / dn) / (dn + 4 + 2 * s->mu_eff / dn);
    s->c_1 = alpha_cov / ((dn + 1.3) * (dn + 1.3) + s->mu_eff);
    s->c_mu = fmin (1 - s->c_1, alpha_cov * (s->mu_eff - 2 + 1 / s->mu_eff) /
                                    ((dn + 2) * (dn + 2) + alpha_cov * s->mu_eff / 2));
    // eq. 50-53: the negative weights' scale
    double a_mu = 1 + s->c_1 / s->c_mu;
    double a_eff = 1 + 2 * mu_eff_neg / (s->mu_eff + 2);
    double a_pd = (1 - s->c_1 - s->c_mu) / (dn * s->c_mu);
    double a_neg = fmin (a_mu, fmin (a_eff, a_pd));
    for (size_t i = 0; i < L; i++)
        s->w[i] = s->w[i] >= 0 ? s->w[i] / spos : a_neg * s->w[i] / -sneg;
    s->chi_n = sqrt (dn) * (1 - 1 / (4 * dn) + 1 / (21 * dn * dn));
    s->m = cgq_xmalloc (n * sizeof *s->m);
    memcpy (s->m, mean, n * sizeof *s->m);
    s->sigma = sigma;
    s->C = cgq_xcalloc (n * n, sizeof *s->C);
    s->B = cgq_xcalloc (n * n, sizeof *s->B);
    s->D = cgq_xmalloc (n * sizeof *s->D);
    for (size_t i = 0; i < n; i++) {
        s->C[i * n + i] = s->B[i * n + i] = 1;
        s->D[i] = 1;
    }
    s->pc = cgq_xcalloc (n, sizeof *s->pc);
    s->ps = cgq_xcalloc (n, sizeof *s->ps);
    s->hterm = 10 + (size_t)ceil (30 * dn / (double)L);
    s->hist = cgq_xcalloc (2 * s->hterm, sizeof *s->hist);
    s->y = cgq_xmalloc (L * n * sizeof *s->y);
    s->tmp = cgq_xmalloc (n * sizeof *s->tmp);
    s->rank = cgq_xmalloc (L * sizeof *s->rank);
    return s;
}

void
cgq_cmaes_destroy (cgq_cmaes_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cgq_cmaes_t *s = *self_p;
    free (s->w);
    free (s->m);
    free (s->C);
    free (s->B);
    free (s->D);
    free (s->pc);
    free (s->ps);
    free (s->hist);
    free (s->y);
    free (s->tmp);
    free (s->rank);
    free (s);
    *self_p = NULL;
}

static void s_decompose (cgq_cmaes_t *s);

void
cgq_cmaes_set_cov (cgq_cmaes_t *self, const double *cov)
{
    memcpy (self->C, cov, self->n * self->n * sizeof *self->C);
    s_decompose (self);
}

int
cgq_cmaes_warm_mgd (size_t n, size_t np, const double *x, const double *f, double gamma,
                    double alpha, double *mean, double *sigma, double *cov)
{
    if (!n || !np)
        return -1;
    // The best k by f, ties by position (Python's sorted is stable).
    size_t *idx = cgq_xmalloc (np * sizeof *idx);
    for (size_t i = 0; i < np; i++) {
        size_t j = i;
        while (j > 0 && (f[idx[j - 1]] > f[i] || (f[idx[j - 1]] == f[i] && idx[j - 1] > i))) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = i;
    }
    size_t k = (size_t)floor ((double)np * gamma);
    k = k < 1 ? 1 : k > np ? np : k;
    memset (mean, 0, n * sizeof *mean);
    memset (cov, 0, n * n * sizeof *cov);
    for (size_t r = 0; r < k; r++) {
        const double *p = &x[idx[r] * n];
        for (size_t a = 0; a < n; a++) {
            mean[a] += p[a];
            for (size_t b = 0; b < n; b++)
                cov[a * n + b] += p[a] * p[b];
        }
    }
    for (size_t a = 0; a < n; a++)
        mean[a] /= (double)k;
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < n; b++)
            cov[a * n + b] = cov[a * n + b] / (double)k - mean[a] * mean[b] +
                             (a == b ? alpha * alpha : 0);
    free (idx);
    // det(Sigma) from its Cholesky factor, in logs (it underflows in many
    // dimensions): log det = 2 sum log L_ii.
    double *l = cgq_xmalloc (n * n * sizeof *l);
    memcpy (l, cov, n * n * sizeof *l);
    lapack_int info = LAPACKE_dpotrf (LAPACK_ROW_MAJOR, 'L', (lapack_int)n, l, (lapack_int)n);
    double logdet = 0;
    for (size_t a = 0; a < n && info == 0; a++)
        logdet += 2 * log (l[a * n + a]);
    free (l);
    if (info != 0 || !isfinite (logdet))
        return -1;
    *sigma = exp (logdet / (2.0 * (double)n));
    double scale = exp (logdet / (double)n);
    for (size_t a = 0; a < n * n; a++)
        cov[a] /= scale;
    return 0;
}

size_t
cgq_cmaes_lambda (const cgq_cmaes_t *self)
{
    return self->lambda;
}
size_t
cgq_cmaes_dim (const cgq_cmaes_t *self)
{
    return self->n;
}
const double *
cgq_cmaes_mean (const cgq_cmaes_t *self)
{
    return self->m;
}
double
cgq_cmaes_sigma (const cgq_cmaes_t *self)
{
    return self->sigma;
}
const double *
cgq_cmaes_cov (const cgq_cmaes_t *self)
{
    return self->C;
}
const double *
cgq_cmaes_pc (const cgq_cmaes_t *self)
{
    return self->pc;
}
const double *
cgq_cmaes_psigma (const cgq_cmaes_t *self)
{
    return self->ps;
}
const double *
cgq_cmaes_weights (const cgq_cmaes_t *self)
{
    return self->w;
}
uint64_t
cgq_cmaes_generation (const cgq_cmaes_t *self)
{
    return self->g;
}

void
cgq_cmaes_sample (const cgq_cmaes_t *self, const double *z, double *x)
{
    size_t n = self->n;
    for (size_t i = 0; i < n; i++) {
        double v = 0;
        for (size_t j = 0; j < n; j++)
            v += self->B[i * n + j] * self->D[j] * z[j];
        x[i] = self->m[i] + self->sigma * v;
    }
}

// s_invsqrt writes C^{-1/2} v = B D^{-1} B^T v into out.
static void
s_invsqrt (const cgq_cmaes_t *s, const double *v, double *out)
{
    size_t n = s->n;
    for (size_t j = 0; j < n; j++) {
        double t = 0;
        for (size_t i = 0; i < n; i++)
            t += s->B[i * n + j] * v[i];
        s->tmp[j] = t / s->D[j];
    }
    for (size_t i = 0; i < n; i++) {
        double t = 0;
        for (size_t j = 0; j < n; j++)
            t += s->B[i * n + j] * s->tmp[j];
        out[i] = t;
    }
}

// s_decompose sets B and D from C (symmetrised first).
static void
s_decompose (cgq_cmaes_t *s)
{
    size_t n = s->n;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < i; j++)
            s->C[i * n + j] = s->C[j * n + i] = (s->C[i * n + j] + s->C[j * n + i]) / 2;
    memcpy (s->B, s->C, n * n * sizeof *s->B);
    // Row-major, upper triangle: the eigenvectors come back as B's columns.
    if (LAPACKE_dsyev (LAPACK_ROW_MAJOR, 'V', 'U', (lapack_int)n, s->B, (lapack_int)n, s->D) != 0) {
        // No convergence (a C of NaNs): start the shape over, keep the mean.
        memset (s->C, 0, n * n * sizeof *s->C);
        memset (s->B, 0, n * n * sizeof *s->B);
        for (size_t i = 0; i < n; i++)
            s->C[i * n + i] = s->B[i * n + i] = s->D[i] = 1;
        return;
    }
    for (size_t i = 0; i < n; i++)
        s->D[i] = sqrt (s->D[i] < S_EIG_MIN ? S_EIG_MIN : s->D[i]);
}

// s_rank sorts idx (L positions) by f, ties by position: an insertion
// sort, lambda is small and it needs no global for the comparison.
static void
s_rank (const double *f, size_t *idx, size_t L)
{
    for (size_t i = 0; i < L; i++) {
        size_t v = idx[i], j = i;
        while (j > 0 && (f[idx[j - 1]] > f[v] || (f[idx[j - 1]] == f[v] && idx[j - 1] > v))) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = v;
    }
}

void
cgq_cmaes_tell (cgq_cmaes_t *s, const double *x, const double *f)
{
    size_t n = s->n, L = s->lambda;
    double dn = (double)n;
    for (size_t i = 0; i < L; i++)
        s->rank[i] = i;
    s_rank (f, s->rank, L);
    size_t h = 2 * (size_t)(s->g % s->hterm);
    // The worst finite value: a failed trial (+inf, ranked last) must not
    // keep TolFun from ever firing.
    size_t last = L - 1;
    while (last > 0 && !isfinite (f[s->rank[last]]))
        last--;
    s->hist[h] = f[s->rank[0]];
    s->hist[h + 1] = f[s->rank[last]];
    // y_i:lambda in rank order
    for (size_t k = 0; k < L; k++)
        for (size_t i = 0; i < n; i++)
            s->y[k * n + i] = (x[s->rank[k] * n + i] - s->m[i]) / s->sigma;
    double *yw = cgq_xcalloc (n, sizeof *yw), *cy = cgq_xmalloc (n * sizeof *cy);
    for (size_t k = 0; k < s->mu; k++)
        for (size_t i = 0; i < n; i++)
            yw[i] += s->w[k] * s->y[k * n + i];
    for (size_t i = 0; i < n; i++)
        s->m[i] += s->sigma * yw[i]; // c_m = 1
    // p_sigma and sigma (eq. 31, 37)
    s_invsqrt (s, yw, cy);
    double a = sqrt (s->c_sigma * (2 - s->c_sigma) * s->mu_eff), nps = 0;
    for (size_t i = 0; i < n; i++) {
        s->ps[i] = (1 - s->c_sigma) * s->ps[i] + a * cy[i];
        nps += s->ps[i] * s->ps[i];
    }
    nps = sqrt (nps);
    s->sigma *= exp (s->c_sigma / s->d_sigma * (nps / s->chi_n - 1));
    // h_sigma, p_c (eq. 24)
    double thr = (1.4 + 2 / (dn + 1)) * s->chi_n;
    bool hs = nps / sqrt (1 - pow (1 - s->c_sigma, 2.0 * (double)(s->g + 1))) < thr;
    double b = sqrt (s->c_c * (2 - s->c_c) * s->mu_eff);
    for (size_t i = 0; i < n; i++)
        s->pc[i] = (1 - s->c_c) * s->pc[i] + (hs ? b * yw[i] : 0);
    // C (eq. 47): the negative weights scaled by n / |C^{-1/2} y|^2
    double wsum = 0;
    for (size_t k = 0; k < L; k++)
        wsum += s->w[k];
    double dh = hs ? 0 : s->c_c * (2 - s->c_c);
    double keep = 1 + s->c_1 * dh - s->c_1 - s->c_mu * wsum;
    double *wo = cgq_xmalloc (L * sizeof *wo);
    for (size_t k = 0; k < L; k++) {
        if (s->w[k] >= 0) {
            wo[k] = s->w[k];
            continue;
        }
        s_invsqrt (s, &s->y[k * n], cy);
        double q = 0;
        for (size_t i = 0; i < n; i++)
            q += cy[i] * cy[i];
        wo[k] = s->w[k] * dn / (q > 0 ? q : S_EIG_MIN);
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            double r = 0;
            for (size_t k = 0; k < L; k++)
                r += wo[k] * s->y[k * n + i] * s->y[k * n + j];
            s->C[i * n + j] = keep * s->C[i * n + j] + s->c_1 * s->pc[i] * s->pc[j] + s->c_mu * r;
        }
    free (wo);
    free (yw);
    free (cy);
    s->g++;
    s_decompose (s);
}

bool
cgq_cmaes_should_stop (const cgq_cmaes_t *s, double tolfun, double tolx, const char **why)
{
    size_t n = s->n;
    const char *w = NULL;
    if (s->g > s->hterm) {
        double lo = INFINITY, hi = -INFINITY;
        for (size_t i = 0; i < 2 * s->hterm; i++)
            lo = fmin (lo, s->hist[i]), hi = fmax (hi, s->hist[i]);
        if (hi - lo < tolfun)
            w = "tolfun";
    }
    double dmax = 0, dmin = INFINITY;
    for (size_t i = 0; i < n; i++)
        dmax = fmax (dmax, s->D[i]), dmin = fmin (dmin, s->D[i]);
    bool small = true;
    for (size_t i = 0; i < n && small; i++)
        small = s->sigma * s->C[i * n + i] < tolx && s->sigma * fabs (s->pc[i]) < tolx;
    if (!w && small)
        w = "tolx";
    if (!w && s->sigma * dmax > S_TOLXUP)
        w = "tolxup";
    if (!w) {
        size_t a = (size_t)(s->g % n);
        bool same = true;
        for (size_t i = 0; i < n && same; i++)
            same = s->m[i] == s->m[i] + 0.1 * s->sigma * s->D[a] * s->B[i * n + a];
        if (same)
            w = "noeffectaxis";
    }
    for (size_t i = 0; i < n && !w; i++)
        if (s->m[i] == s->m[i] + 0.2 * s->sigma * sqrt (s->C[i * n + i]))
            w = "noeffectcoord";
    if (!w && dmax * dmax / (dmin * dmin) > S_TOLCOND)
        w = "conditioncov";
    if (why)
        *why = w;
    return w != NULL;
}
