// tpe: the Parzen estimator of TPE, the gamma split and the weights. See
// tpe.h; Optuna's samplers/_tpe (parzen_estimator.py, sampler.py,
// _truncnorm.py) is the reference the tests hold it to.
#include "tpe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pareto.h"
#include "util.h"

#define S_PRIOR_WEIGHT 1.0
#define S_SIGMA0 0.2     // multivariate: Scott's rule's factor (Optuna's SIGMA0_MAGNITUDE)
#define S_FLAT 25        // default_weights: the most recent 25 observations weigh 1
#define S_GAMMA_MAX 25   // default_gamma's cap
#define S_MAGIC_CLIP 100 // the narrowest kernel is range / min(100, kernels + 1)
#define S_LOG_SQRT_2PI 0.91893853320467274178

struct cgq_tpe_t {
    size_t ndim, nobs, ncomp; // ncomp = nobs + 1: the observations, then the prior
    cgq_tpe_dim_t *dims;
    double *logw; // ncomp: log of the normalised weights
    double *cumw; // ncomp: their running sum (sampling)
    // ndim rows of ncomp (row d is dimension d). REAL, STEP: the kernels'
    // means and widths, and lognorm the log of what the density is divided
    // by (REAL: sigma sqrt(2 pi) times the mass inside the bounds; STEP: the
    // mass inside the bounds). CATEGORY: mu is the observed category (the
    // prior: -1).
    double *mu, *sigma, *lognorm;
    // CATEGORY: log of an observation's kernel at its own category and at
    // any other (per dimension).
    double *cat_hit, *cat_miss;
    // One CATEGORY dimension alone: log of the whole mixture per category
    // (Optuna's shortcut; the same numbers as the sum over kernels).
    double *cat_mix;
};

// --- the standard normal ------------------------------------------------------------

// s_log_ndtr is log Phi(x), accurate in both tails.
static double
s_log_ndtr (double x)
{
    if (x > 6)
        return log1p (-0.5 * erfc (x / M_SQRT2));
    if (x > -20)
        return log (0.5 * erfc (-x / M_SQRT2));
    // Far in the left tail Phi underflows: its asymptotic series,
    // phi(x)/(-x) (1 - 1/x^2 + 3/x^4 - 15/x^6 + ...), summed in logs.
    double sum = 1, term = 1, inv = 1 / (x * x), last;
    int i = 0;
    do {
        last = sum;
        i++;
        term *= -(2 * i - 1) * inv;
        sum += term;
    } while (fabs (sum - last) > 0x1p-52 && i < 100);
    return -0.5 * x * x - log (-x) - S_LOG_SQRT_2PI + log (sum);
}

// s_log_diff is log(exp(lp) - exp(lq)) for lp >= lq.
static double
s_log_diff (double lp, double lq)
{
    return lp + log1p (-exp (lq - lp));
}

double
cgq_tpe_log_mass (double a, double b)
{
    // Work in the left tail, where the differences are accurate.
    if (b <= 0)
        return s_log_diff (s_log_ndtr (b), s_log_ndtr (a));
    if (a > 0)
        return s_log_diff (s_log_ndtr (-a), s_log_ndtr (-b));
    // Around the centre: 1 minus both tails, without cancellation.
    return log1p (-0.5 * erfc (-a / M_SQRT2) - 0.5 * erfc (b / M_SQRT2));
}

// s_log_add is log(exp(p) + exp(q)).
static double
s_log_add (double p, double q)
{
    double m = p > q ? p : q;
    if (m == -INFINITY)
        return -INFINITY;
    return m + log (exp (p - m) + exp (q - m));
}

// s_ndtri_exp solves log Phi(x) = y for x in [lo, hi], where the root lies.
// Newton's method from the left end: log Phi is concave and increasing, so
// each step lands at or left of the root and the steps only move right
// (quadratic near the root); bisection where rounding would break that.
static double
s_ndtri_exp (double y, double lo, double hi)
{
    double x = lo;
    for (int i = 0; i < 200; i++) {
        double lp = s_log_ndtr (x), f = lp - y;
        if (f == 0)
            return x;
        if (f < 0)
            lo = x;
        else
            hi = x;
        double d = exp (-0.5 * x * x - S_LOG_SQRT_2PI - lp); // phi / Phi
        double nx = x - f / d;
        if (!(nx > lo && nx < hi))
            nx = 0.5 * (lo + hi);
        if (fabs (nx - x) <= 1e-15 * (1 + fabs (x)))
            return nx;
        x = nx;
    }
    return x;
}

double
cgq_tpe_ppf (double q, double a, double b)
{
    if (q <= 0)
        return a;
    if (q >= 1)
        return b;
    double mass = cgq_tpe_log_mass (a, b);
    // Solve in whichever tail holds a, for accuracy, as Optuna does.
    if (a < 0)
        return s_ndtri_exp (s_log_add (s_log_ndtr (a), log (q) + mass), a, b);
    return -s_ndtri_exp (s_log_add (s_log_ndtr (-b), log1p (-q) + mass), -b, -a);
}

// --- gamma, weights, split ------------------------------------------------------------

size_t
cgq_tpe_gamma (size_t n)
{
    double g = ceil (0.1 * (double)n); // 0.1 * 30 is 3.0000000000000004: 4, as Optuna
    return g < S_GAMMA_MAX ? (size_t)g : S_GAMMA_MAX;
}

void
cgq_tpe_weights (size_t n, double *w)
{
    if (n < S_FLAT) {
        for (size_t i = 0; i < n; i++)
            w[i] = 1;
        return;
    }
    // numpy's linspace(1/n, 1, n - 25): start + i * step, the last exactly 1.
    size_t ramp = n - S_FLAT;
    double start = 1.0 / (double)n;
    double step = ramp > 1 ? (1.0 - start) / (double)(ramp - 1) : 0;
    for (size_t i = 0; i < ramp; i++)
        w[i] = (double)i * step + start;
    if (ramp > 1)
        w[ramp - 1] = 1.0;
    for (size_t i = ramp; i < n; i++)
        w[i] = 1;
}

typedef struct {
    double key;
    size_t i;
} s_keyed_t;

// s_sort sorts a (n entries, in index order) by key, ties kept in index
// order: a bottom-up merge sort, stable, with the comparison inline (qsort's
// callback was a third of a suggestion's time at 100,000 trials).
static void
s_sort (s_keyed_t *a, size_t n)
{
    s_keyed_t *tmp = cgq_xmalloc ((n ? n : 1) * sizeof *tmp), *src = a, *dst = tmp;
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                dst[k++] = src[j].key < src[i].key ? src[j++] : src[i++];
            while (i < mid)
                dst[k++] = src[i++];
            while (j < hi)
                dst[k++] = src[j++];
        }
        s_keyed_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != a)
        memcpy (a, src, n * sizeof *a);
    free (tmp);
}

void
cgq_tpe_split (const double *loss, size_t n, size_t nbelow, size_t *below, size_t *above)
{
    // The nbelow smallest, kept sorted as the trials go by (nbelow is at
    // most 25: cheaper than sorting them all). A later trial displaces one
    // only when strictly better, so ties go to the older, as a stable sort.
    nbelow = nbelow < n ? nbelow : n;
    s_keyed_t *k = cgq_xmalloc ((nbelow ? nbelow : 1) * sizeof *k);
    bool *in = cgq_xcalloc (n ? n : 1, sizeof *in);
    size_t nk = 0;
    for (size_t i = 0; i < n && nbelow; i++) {
        if (nk == nbelow && !(loss[i] < k[nk - 1].key))
            continue;
        size_t at = nk < nbelow ? nk++ : nk - 1;
        while (at > 0 && loss[i] < k[at - 1].key) {
            k[at] = k[at - 1];
            at--;
        }
        k[at] = (s_keyed_t){loss[i], i};
    }
    for (size_t i = 0; i < nk; i++)
        in[k[i].i] = true;
    size_t nb = 0, na = 0;
    for (size_t i = 0; i < n; i++) {
        if (in[i])
            below[nb++] = i;
        else
            above[na++] = i;
    }
    free (in);
    free (k);
}

size_t
cgq_tpe_best (const double *score, size_t m)
{
    size_t best = 0;
    bool any = false;
    for (size_t i = 0; i < m; i++)
        if (!isnan (score[i]) && (!any || score[i] > score[best])) {
            best = i;
            any = true;
        }
    return best;
}

// --- the estimator ----------------------------------------------------------------------

// s_univariate_sigmas sets the widths of dimension d's kernels from their
// neighbours: sorted means (the prior's among them) between the bounds; the
// first and last kernel look inward only (consider_endpoints off).
static void
s_univariate_sigmas (cgq_tpe_t *self, size_t d)
{
    const cgq_tpe_dim_t *dim = &self->dims[d];
    size_t m = self->ncomp;
    const double *mu = &self->mu[d * m];
    double *sigma = &self->sigma[d * m];
    s_keyed_t *k = cgq_xmalloc (m * sizeof *k);
    double *s = cgq_xmalloc ((m + 2) * sizeof *s);
    for (size_t i = 0; i < m; i++)
        k[i] = (s_keyed_t){mu[i], i};
    s_sort (k, m);
    s[0] = dim->low;
    for (size_t i = 0; i < m; i++)
        s[i + 1] = k[i].key;
    s[m + 1] = dim->high;
    for (size_t i = 0; i < m; i++) {
        double left = s[i + 1] - s[i], right = s[i + 2] - s[i + 1];
        double w = left > right ? left : right;
        if (m >= 2 && i == 0)
            w = right;
        else if (m >= 2 && i == m - 1)
            w = left;
        sigma[k[i].i] = w;
    }
    free (s);
    free (k);
}

cgq_tpe_t *
cgq_tpe_new (const cgq_tpe_dim_t *dims, size_t ndim, const double *obs, size_t nobs,
             bool multivariate)
{
    return cgq_tpe_new_weighted (dims, ndim, obs, nobs, multivariate, NULL);
}

cgq_tpe_t *
cgq_tpe_new_weighted (const cgq_tpe_dim_t *dims, size_t ndim, const double *obs, size_t nobs,
                      bool multivariate, const double *weights)
{
    cgq_tpe_t *self = cgq_xcalloc (1, sizeof *self);
    size_t m = nobs + 1;
    self->ndim = ndim;
    self->nobs = nobs;
    self->ncomp = m;
    self->dims = cgq_xmalloc ((ndim ? ndim : 1) * sizeof *self->dims);
    if (ndim)
        memcpy (self->dims, dims, ndim * sizeof *dims);
    self->logw = cgq_xmalloc (m * sizeof *self->logw);
    self->cumw = cgq_xmalloc (m * sizeof *self->cumw);
    size_t cells = (ndim ? ndim : 1) * m;
    self->mu = cgq_xmalloc (cells * sizeof *self->mu);
    self->sigma = cgq_xmalloc (cells * sizeof *self->sigma);
    self->lognorm = cgq_xmalloc (cells * sizeof *self->lognorm);
    self->cat_hit = cgq_xcalloc (ndim ? ndim : 1, sizeof *self->cat_hit);
    self->cat_miss = cgq_xcalloc (ndim ? ndim : 1, sizeof *self->cat_miss);

    // Weights: the given ones or Optuna's default_weights over the
    // observations, then the prior.
    double *w = cgq_xmalloc (m * sizeof *w), sum = 0;
    if (weights)
        memcpy (w, weights, nobs * sizeof *w);
    else
        cgq_tpe_weights (nobs, w);
    w[nobs] = S_PRIOR_WEIGHT;
    for (size_t k = 0; k < m; k++)
        sum += w[k];
    double run = 0;
    for (size_t k = 0; k < m; k++) {
        self->logw[k] = log (w[k] / sum);
        run += w[k] / sum;
        self->cumw[k] = run;
    }
    free (w);

    for (size_t d = 0; d < ndim; d++) {
        const cgq_tpe_dim_t *dim = &dims[d];
        double *mu = &self->mu[d * m], *sigma = &self->sigma[d * m];
        double *lognorm = &self->lognorm[d * m];
        for (size_t k = 0; k < nobs; k++)
            mu[k] = obs[k * ndim + d];
        if (dim->kind == CGQ_TPE_CATEGORY) {
            double v = S_PRIOR_WEIGHT / (double)m, row = dim->n * v + 1;
            mu[nobs] = -1;
            self->cat_hit[d] = log ((v + 1) / row);
            self->cat_miss[d] = log (v / row);
            continue;
        }
        double range = dim->high - dim->low;
        mu[nobs] = 0.5 * (dim->low + dim->high);
        if (multivariate) {
            double n = nobs > 0 ? (double)nobs : 1;
            double s0 = S_SIGMA0 * pow (n, -1.0 / ((double)ndim + 4));
            for (size_t k = 0; k < m; k++)
                sigma[k] = s0 * range;
        }
        else
            s_univariate_sigmas (self, d);
        double clip = (double)m + 1 < S_MAGIC_CLIP ? (double)m + 1 : S_MAGIC_CLIP;
        double lo = range / clip;
        for (size_t k = 0; k < m; k++)
            sigma[k] = sigma[k] < lo ? lo : sigma[k] > range ? range : sigma[k];
        sigma[nobs] = range;
        for (size_t k = 0; k < m; k++) {
            double mass =
                cgq_tpe_log_mass ((dim->low - mu[k]) / sigma[k], (dim->high - mu[k]) / sigma[k]);
            lognorm[k] = dim->kind == CGQ_TPE_REAL ? log (sigma[k]) + S_LOG_SQRT_2PI + mass : mass;
        }
    }

    if (ndim == 1 && dims[0].kind == CGQ_TPE_CATEGORY) {
        int n = dims[0].n;
        double *p = cgq_xcalloc ((size_t)n, sizeof *p);
        double hit = exp (self->cat_hit[0]), miss = exp (self->cat_miss[0]);
        for (size_t k = 0; k < nobs; k++) {
            double wk = exp (self->logw[k]);
            int c = (int)self->mu[k];
            for (int j = 0; j < n; j++)
                p[j] += wk * (j == c ? hit : miss);
        }
        self->cat_mix = cgq_xmalloc ((size_t)n * sizeof *self->cat_mix);
        for (int j = 0; j < n; j++)
            self->cat_mix[j] = log (p[j] + exp (self->logw[nobs]) / n);
        free (p);
    }
    return self;
}

void
cgq_tpe_destroy (cgq_tpe_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cgq_tpe_t *self = *self_p;
    free (self->dims);
    free (self->logw);
    free (self->cumw);
    free (self->mu);
    free (self->sigma);
    free (self->lognorm);
    free (self->cat_hit);
    free (self->cat_miss);
    free (self->cat_mix);
    free (self);
    *self_p = NULL;
}

// s_kernel_log_pdf is kernel k's log density in dimension d at x.
static double
s_kernel_log_pdf (const cgq_tpe_t *self, size_t d, size_t k, double x)
{
    const cgq_tpe_dim_t *dim = &self->dims[d];
    size_t at = d * self->ncomp + k;
    double mu = self->mu[at];
    if (dim->kind == CGQ_TPE_CATEGORY) {
        if (mu < 0)
            return -log ((double)dim->n);
        return (int)mu == (int)x ? self->cat_hit[d] : self->cat_miss[d];
    }
    if (x < dim->low || x > dim->high)
        return -INFINITY;
    double sigma = self->sigma[at];
    if (dim->kind == CGQ_TPE_REAL) {
        double z = (x - mu) / sigma;
        return -0.5 * z * z - self->lognorm[at];
    }
    double lo = x - 0.5 * dim->step, hi = x + 0.5 * dim->step;
    lo = lo < dim->low ? dim->low : lo;
    hi = hi > dim->high ? dim->high : hi;
    return cgq_tpe_log_mass ((lo - mu) / sigma, (hi - mu) / sigma) - self->lognorm[at];
}

void
cgq_tpe_log_pdf (const cgq_tpe_t *self, const double *x, size_t m, double *out)
{
    size_t nc = self->ncomp, nd = self->ndim;
    if (self->cat_mix) {
        for (size_t j = 0; j < m; j++) {
            int c = (int)x[j];
            out[j] = c >= 0 && c < self->dims[0].n ? self->cat_mix[c] : -INFINITY;
        }
        return;
    }
    double *acc = cgq_xmalloc (nc * sizeof *acc);
    for (size_t j = 0; j < m; j++) {
        const double *xj = &x[j * nd];
        double top = -INFINITY;
        for (size_t k = 0; k < nc; k++) {
            double a = self->logw[k];
            for (size_t d = 0; d < nd && a > -INFINITY; d++)
                a += s_kernel_log_pdf (self, d, k, xj[d]);
            acc[k] = a;
            if (a > top)
                top = a;
        }
        if (top == -INFINITY) {
            out[j] = -INFINITY;
            continue;
        }
        // Kernels more than e^50 below the largest add under 2e-22 each to
        // a sum of at least 1: below rounding for any history that fits in
        // memory. Most kernels are that far from a point once there are
        // many, and exp is the cost of a suggestion then.
        double sum = 0;
        for (size_t k = 0; k < nc; k++)
            if (acc[k] - top > -50)
                sum += exp (acc[k] - top);
        out[j] = log (sum) + top;
    }
    free (acc);
}

// s_pick is the kernel whose share of the weights holds u.
static size_t
s_pick (const cgq_tpe_t *self, double u)
{
    size_t lo = 0, hi = self->ncomp - 1;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (self->cumw[mid] > u)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

void
cgq_tpe_sample (const cgq_tpe_t *self, cgq_rng_t *r, size_t m, double *out)
{
    size_t nc = self->ncomp, nd = self->ndim;
    for (size_t j = 0; j < m; j++) {
        size_t k = s_pick (self, cgq_rng_unit (r));
        for (size_t d = 0; d < nd; d++) {
            const cgq_tpe_dim_t *dim = &self->dims[d];
            double mu = self->mu[d * nc + k], u = cgq_rng_unit (r), v;
            if (dim->kind == CGQ_TPE_CATEGORY) {
                // Walk the kernel's probabilities: its own category has more.
                double hit = exp (self->cat_hit[d]), miss = exp (self->cat_miss[d]);
                double run = 0;
                int c = 0;
                for (; c < dim->n - 1; c++) {
                    run += mu < 0 ? 1.0 / dim->n : (int)mu == c ? hit : miss;
                    if (run > u)
                        break;
                }
                v = c;
            }
            else {
                double sigma = self->sigma[d * nc + k];
                double z = cgq_tpe_ppf (u, (dim->low - mu) / sigma, (dim->high - mu) / sigma);
                v = mu + sigma * z;
                v = v < dim->low ? dim->low : v > dim->high ? dim->high : v;
                if (dim->kind == CGQ_TPE_STEP) {
                    // To the nearest value (half to even, as numpy's round).
                    double first = dim->low + 0.5 * dim->step;
                    double last = nearbyint ((dim->high - first) / dim->step - 0.5);
                    double i = nearbyint ((v - first) / dim->step);
                    i = i < 0 ? 0 : i > last ? last : i;
                    v = first + i * dim->step;
                }
            }
            out[j * nd + d] = v;
        }
    }
}

// --- multi-objective: the split and the good group's weights (MOTPE) -----------------

#define S_EPS 1e-12 // Optuna's EPS: a reference coordinate of 0, a contribution's floor
// Above this many objectives the exact hypervolumes cost too much for a
// suggestion made inside the coordinator's loop (a front of hundreds and
// 25 chosen: seconds at 6 objectives): the subset is chosen by each point's
// own box and the weights are all 1 (tpe.h).
#define S_EXACT_MAX_M 4

// s_ref is Optuna's reference point for the k points idx of loss (n rows of
// m): per objective max(1.1 w, 0.9 w) of the worst value w, EPS where that is 0.
static void
s_ref (const double *loss, size_t m, const size_t *idx, size_t k, double *ref)
{
    for (size_t j = 0; j < m; j++) {
        double w = -INFINITY;
        for (size_t i = 0; i < k; i++)
            w = loss[idx[i] * m + j] > w ? loss[idx[i] * m + j] : w;
        ref[j] = 1.1 * w > 0.9 * w ? 1.1 * w : 0.9 * w;
        if (ref[j] == 0)
            ref[j] = S_EPS;
    }
}

// s_hv is the hypervolume of k points (rows of m, minimised) below ref; NaN
// when past cgq_pareto_hypervolume's bounds (7 or 8 objectives, many points).
static double
s_hv (const double *pts, size_t k, size_t m, const double *ref)
{
    double hv = 0;
    if (k && cgq_pareto_hypervolume (pts, (int)k, (int)m, NULL, ref, &hv) < 0)
        return NAN;
    return hv;
}

// s_hssp is Optuna's _solve_hssp: the greedy choice of k of the nc points
// cand (one front) that adds the most hypervolume each time, the first of
// equals; each remaining point's contribution is cut by the part it shares
// with the one chosen. Writes the chosen indices to out in the order
// chosen. Past the hypervolume's bounds: the first k of cand.
static void
s_hssp (const double *loss, size_t m, const size_t *cand, size_t nc, size_t k, const double *ref,
        size_t *out)
{
    double *contrib = cgq_xmalloc (nc * sizeof *contrib);
    double *sel = cgq_xmalloc ((k + 1) * m * sizeof *sel);
    bool *taken = cgq_xcalloc (nc, sizeof *taken);
    bool ok = true;
    for (size_t j = 0; j < nc && ok; j++) {
        contrib[j] = s_hv (&loss[cand[j] * m], 1, m, ref);
        ok = !isnan (contrib[j]);
    }
    double hv_sel = 0;
    // Many objectives: the k largest boxes, without the updates.
    bool exact = m <= S_EXACT_MAX_M;
    for (size_t ns = 0; ns < k && ok && !exact; ns++) {
        size_t best = 0;
        bool any = false;
        for (size_t j = 0; j < nc; j++)
            if (!taken[j] && (!any || contrib[j] > contrib[best])) {
                best = j;
                any = true;
            }
        taken[best] = true;
        out[ns] = cand[best];
    }
    for (size_t ns = 0; ns < k && ok && exact; ns++) {
        size_t best = 0;
        bool any = false;
        for (size_t j = 0; j < nc; j++)
            if (!taken[j] && (!any || contrib[j] > contrib[best])) {
                best = j;
                any = true;
            }
        taken[best] = true;
        const double *s = &loss[cand[best] * m];
        for (size_t j = 0; j < nc && ok; j++) {
            if (taken[j])
                continue;
            const double *v = &loss[cand[j] * m];
            for (size_t c = 0; c < m; c++)
                sel[ns * m + c] = s[c] > v[c] ? s[c] : v[c];
            double hv = s_hv (sel, ns + 1, m, ref);
            ok = !isnan (hv);
            contrib[j] -= hv - hv_sel;
        }
        memcpy (&sel[ns * m], s, m * sizeof *s);
        out[ns] = cand[best];
        hv_sel = s_hv (sel, ns + 1, m, ref);
        ok = ok && !isnan (hv_sel);
    }
    if (!ok)
        for (size_t i = 0; i < k; i++)
            out[i] = cand[i];
    free (contrib);
    free (sel);
    free (taken);
}

void
cgq_tpe_split_multi (const double *loss, size_t n, size_t m, size_t nbelow, size_t *below,
                     size_t *above)
{
    nbelow = nbelow < n ? nbelow : n;
    bool *in = cgq_xcalloc (n ? n : 1, sizeof *in);
    bool *peeled = cgq_xcalloc (n ? n : 1, sizeof *peeled);
    size_t *cand = cgq_xmalloc ((n ? n : 1) * sizeof *cand);
    size_t nb = 0, left = n;
    // The fronts one at a time, only as many as the good group needs (a
    // full non-dominated sort is O(m n^2)): each is the non-dominated set of
    // the points not peeled yet, kept online (a point dominated by a member
    // is skipped, one that dominates members replaces them): O(m n f) for a
    // front of f. Then in index order, as Optuna lists a rank.
    while (nb < nbelow && left > 0) {
        size_t nc = 0;
        for (size_t i = 0; i < n; i++) {
            if (peeled[i])
                continue;
            bool dominated = false;
            size_t keep = 0;
            for (size_t k = 0; k < nc; k++) {
                int c = cgq_pareto_compare (&loss[cand[k] * m], &loss[i * m], (int)m, NULL);
                dominated = dominated || c == 1;
                if (c != -1) // a member i dominates leaves the front
                    cand[keep++] = cand[k];
            }
            nc = keep;
            if (!dominated)
                cand[nc++] = i;
        }
        for (size_t k = 1; k < nc; k++) // insertion sort: fronts are small
            for (size_t j = k; j > 0 && cand[j - 1] > cand[j]; j--) {
                size_t t = cand[j];
                cand[j] = cand[j - 1];
                cand[j - 1] = t;
            }
        for (size_t k = 0; k < nc; k++)
            peeled[cand[k]] = true;
        left -= nc;
        if (nb + nc <= nbelow) {
            for (size_t i = 0; i < nc; i++) {
                below[nb++] = cand[i];
                in[cand[i]] = true;
            }
            continue;
        }
        double *ref = cgq_xmalloc (m * sizeof *ref);
        s_ref (loss, m, cand, nc, ref);
        s_hssp (loss, m, cand, nc, nbelow - nb, ref, &below[nb]);
        for (size_t i = nb; i < nbelow; i++)
            in[below[i]] = true;
        nb = nbelow;
        free (ref);
    }
    size_t na = 0;
    for (size_t i = 0; i < n; i++)
        if (!in[i])
            above[na++] = i;
    free (peeled);
    free (in);
    free (cand);
}

void
cgq_tpe_weights_multi (const double *loss, size_t m, const size_t *idx, size_t k, double *w)
{
    if (k <= 1 || m > S_EXACT_MAX_M) {
        for (size_t i = 0; i < k; i++)
            w[i] = 1;
        return;
    }
    double *ref = cgq_xmalloc (m * sizeof *ref);
    double *pts = cgq_xmalloc (k * m * sizeof *pts);
    s_ref (loss, m, idx, k, ref);
    for (size_t i = 0; i < k; i++)
        memcpy (&pts[i * m], &loss[idx[i] * m], m * sizeof *pts);
    double hv = s_hv (pts, k, m, ref), top = 0;
    bool ok = !isnan (hv);
    for (size_t i = 0; i < k && ok; i++) {
        // Without point i: the last row moved into its place.
        double keep[CGQ_TPE_MAX_OBJECTIVES];
        memcpy (keep, &pts[i * m], m * sizeof *pts);
        memcpy (&pts[i * m], &pts[(k - 1) * m], m * sizeof *pts);
        double without = s_hv (pts, k - 1, m, ref);
        memcpy (&pts[i * m], keep, m * sizeof *pts);
        ok = !isnan (without);
        w[i] = hv - without + S_EPS;
        top = w[i] > top ? w[i] : top;
    }
    for (size_t i = 0; i < k; i++) {
        double x = ok && top > 0 ? w[i] / top : 1;
        w[i] = x < 0 ? 0 : x > 1 ? 1 : x;
    }
    free (ref);
    free (pts);
}
