// gp: the kernel matrix is built from one BLAS product of the scaled inputs
// (|a - b|^2 = |a|^2 + |b|^2 - 2 a.b), factored with LAPACKE_dpotrf and solved
// with dpotrs / dtrsm; the only loops here are O(n^2) element-wise ones.
// Matrices handed to BLAS/LAPACK are column-major; point sets are row-major
// (point i is X + i * dim), which column-major reads as dim x n.
#include "gp.h"

#include <cblas.h>
#include <dlfcn.h>
#include <lapacke.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define S_SQRT5 2.23606797749978969641
#define S_LOG_2PI 1.83787706640934548356
#define S_CHUNK 256      // candidates scored per BLAS call in suggest
#define S_JITTER_TRIES 8 // no jitter, then 1e-10 .. 1e-4 of the signal variance
#define S_XI 0.01        // suggest's exploration margin, in standard deviations of y

struct cgq_gp_t {
    int dim;
    // Hyper-parameters; signal and noise relative to the variance of y.
    double *length; // dim
    double signal, noise;
    // What the model is conditioned on (n = 0: nothing yet).
    int n;
    double *X;           // n x dim, row-major, as given
    double *Z;           // X / length
    double *sq;          // |z_i|^2
    double *L;           // n x n column-major: lower Cholesky factor of K + (noise + jitter) I
    double *y;           // (y - y_mean) / y_sd
    double *alpha;       // (K + (noise + jitter) I)^-1 y
    double y_mean, y_sd; // the standardisation
    double y_best;       // the lowest y
    double lml;
};

// --- randomness --------------------------------------------------------------
// A splitmix64 stream, as space.c uses: seeded, so fits and suggestions repeat.

typedef struct {
    uint64_t state;
} s_rng_t;

static uint64_t
s_rng_next (s_rng_t *r)
{
    uint64_t z = (r->state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void
s_rng_seed (s_rng_t *r, uint64_t seed, uint64_t stream)
{
    r->state = seed ^ 0x243f6a8885a308d3ULL;
    r->state = s_rng_next (r) + stream;
}

static double
s_rng_unit (s_rng_t *r)
{
    return (double) (s_rng_next (r) >> 11) * 0x1.0p-53;
}

static uint64_t
s_rng_below (s_rng_t *r, uint64_t n)
{
    uint64_t limit = UINT64_MAX - UINT64_MAX % n, x;
    do
        x = s_rng_next (r);
    while (x >= limit);
    return x % n;
}

// s_rng_normal draws N(0, 1) by Box-Muller (one of the pair; simplicity over speed).
static double
s_rng_normal (s_rng_t *r)
{
    double u = 1 - s_rng_unit (r), v = s_rng_unit (r);
    return sqrt (-2 * log (u)) * cos (2 * M_PI * v);
}

// --- subsets -----------------------------------------------------------------

typedef struct {
    double y;
    int i;
} s_ranked_t;

static int
s_ranked_cmp (const void *pa, const void *pb)
{
    const s_ranked_t *a = pa, *b = pb;
    if (a->y != b->y)
        return a->y < b->y ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}

// s_subset writes to idx the rows of y to keep under cap: all of them when
// n <= cap, else the nbest lowest and a uniform sample of the others. Returns
// the count. The best rows matter most to where the next suggestion goes; the
// sample keeps the model's picture of the rest of the space.
static int
s_subset (const double *y, int n, int cap, int nbest, s_rng_t *rng, int *idx)
{
    if (n <= cap) {
        for (int i = 0; i < n; i++)
            idx[i] = i;
        return n;
    }
    // The nbest lowest through a max-heap of nbest rows (O(n log nbest), not
    // a sort of all n: at 100,000 observations that sort was a fifth of a
    // suggestion), then the others in row order.
    s_ranked_t *r = cgq_xmalloc ((size_t) n * sizeof *r);
    s_ranked_t *heap = r; // r[0..nbest) while selecting
    for (int i = 0; i < n; i++) {
        s_ranked_t e = {y[i], i};
        int at;
        if (i < nbest)
            at = i; // sift up
        else if (nbest > 0 && s_ranked_cmp (&e, &heap[0]) < 0)
            at = -1; // replaces the root: sift down
        else
            continue;
        if (at >= 0) {
            while (at > 0 && s_ranked_cmp (&heap[(at - 1) / 2], &e) < 0) {
                heap[at] = heap[(at - 1) / 2];
                at = (at - 1) / 2;
            }
            heap[at] = e;
            continue;
        }
        at = 0;
        for (;;) {
            int c = 2 * at + 1;
            if (c >= nbest)
                break;
            if (c + 1 < nbest && s_ranked_cmp (&heap[c], &heap[c + 1]) < 0)
                c++;
            if (s_ranked_cmp (&heap[c], &e) <= 0)
                break;
            heap[at] = heap[c];
            at = c;
        }
        heap[at] = e;
    }
    qsort (r, (size_t) nbest, sizeof *r, s_ranked_cmp);
    // The rest, in row order: those not among the nbest.
    uint8_t *in = cgq_xcalloc ((size_t) n, 1);
    for (int k = 0; k < nbest; k++)
        in[r[k].i] = 1;
    int k = nbest;
    for (int i = 0; i < n; i++)
        if (!in[i])
            r[k++] = (s_ranked_t){y[i], i};
    free (in);
    // A partial Fisher-Yates shuffle of r[nbest..n) draws the sample.
    for (int k = nbest; k < cap; k++) {
        int j = k + (int) s_rng_below (rng, (uint64_t) (n - k));
        s_ranked_t t = r[k];
        r[k] = r[j];
        r[j] = t;
    }
    for (int k = 0; k < cap; k++)
        idx[k] = r[k].i;
    free (r);
    return cap;
}

// --- kernel and factorisation ------------------------------------------------

// s_matern is the Matern 5/2 kernel of squared scaled distance r2.
static double
s_matern (double r2, double signal)
{
    double r = sqrt (r2 > 0 ? r2 : 0);
    return signal * (1 + S_SQRT5 * r + 5.0 / 3.0 * r * r) * exp (-S_SQRT5 * r);
}

// s_scale writes Z = X / length and sq = |z_i|^2 for n points.
static void
s_scale (const double *X, int n, int dim, const double *length, double *Z, double *sq)
{
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < dim; j++)
            Z[(size_t) i * dim + j] = X[(size_t) i * dim + j] / length[j];
        sq[i] = cblas_ddot (dim, Z + (size_t) i * dim, 1, Z + (size_t) i * dim, 1);
    }
}

// The observations one factorisation works on, and its workspace.
typedef struct {
    int n, dim;
    const double *X; // n x dim
    const double *y; // standardised
    double *Z, *sq;  // n x dim, n
    double *L;       // n x n
    double *alpha;   // n
} s_work_t;

static void
s_work_init (s_work_t *w, const double *X, const double *y, int n, int dim)
{
    w->n = n;
    w->dim = dim;
    w->X = X;
    w->y = y;
    w->Z = cgq_xmalloc ((size_t) n * dim * sizeof *w->Z);
    w->sq = cgq_xmalloc ((size_t) n * sizeof *w->sq);
    w->L = cgq_xmalloc ((size_t) n * n * sizeof *w->L);
    w->alpha = cgq_xmalloc ((size_t) n * sizeof *w->alpha);
}

static void
s_work_fini (s_work_t *w)
{
    free (w->Z);
    free (w->sq);
    free (w->L);
    free (w->alpha);
}

// s_factor builds the lower triangle of K + (noise + jitter) I for the
// hyper-parameters, factors it and solves for alpha. Returns the log marginal
// likelihood, or -INFINITY if no jitter up to 1e-4 of the signal makes the
// matrix positive definite.
static double
s_factor (s_work_t *w, const double *length, double signal, double noise)
{
    int n = w->n;
    s_scale (w->X, n, w->dim, length, w->Z, w->sq);
    double jitter = 0;
    for (int attempt = 0; attempt < S_JITTER_TRIES; attempt++) {
        // Gram matrix Z Z^T into the lower triangle, then the kernel in place.
        cblas_dsyrk (CblasColMajor, CblasLower, CblasTrans, n, w->dim, 1.0, w->Z, w->dim, 0.0, w->L,
                     n);
        for (int j = 0; j < n; j++) {
            double *col = w->L + (size_t) j * n;
            col[j] = signal + noise + jitter;
            for (int i = j + 1; i < n; i++)
                col[i] = s_matern (w->sq[i] + w->sq[j] - 2 * col[i], signal);
        }
        if (LAPACKE_dpotrf (LAPACK_COL_MAJOR, 'L', n, w->L, n) == 0) {
            memcpy (w->alpha, w->y, (size_t) n * sizeof *w->alpha);
            LAPACKE_dpotrs (LAPACK_COL_MAJOR, 'L', n, 1, w->L, n, w->alpha, n);
            double logdet = 0;
            for (int i = 0; i < n; i++)
                logdet += log (w->L[(size_t) i * n + i]);
            return -0.5 * cblas_ddot (n, w->y, 1, w->alpha, 1) - logdet - 0.5 * n * S_LOG_2PI;
        }
        jitter = signal * pow (10, -10 + attempt);
    }
    return -INFINITY;
}

// --- hyper-parameter search --------------------------------------------------
// theta = (log length_1 .. log length_dim, log signal, log noise), clamped to
// the bounds; the objective is the negative log marginal likelihood.

typedef struct {
    s_work_t *w;
    int p;           // dim + 2
    double *lo, *hi; // bounds of theta
    double *length;  // scratch for exp(theta)
    int evals;
} s_search_t;

static double
s_objective (s_search_t *s, double *theta)
{
    int dim = s->p - 2;
    for (int k = 0; k < s->p; k++)
        theta[k] = fmin (fmax (theta[k], s->lo[k]), s->hi[k]);
    for (int j = 0; j < dim; j++)
        s->length[j] = exp (theta[j]);
    s->evals++;
    double lml = s_factor (s->w, s->length, exp (theta[dim]), exp (theta[dim + 1]));
    return isfinite (lml) ? -lml : INFINITY;
}

// s_nelder_mead minimises the objective from x (p values, replaced by the best
// point found) with at most max_evals evaluations; returns the best value.
static double
s_nelder_mead (s_search_t *s, double *x, int max_evals)
{
    int p = s->p;
    double *v = cgq_xmalloc ((size_t) (p + 1) * p * sizeof *v); // vertices
    double *f = cgq_xmalloc ((size_t) (p + 1) * sizeof *f);
    double *c = cgq_xmalloc ((size_t) p * sizeof *c);   // centroid of all but the worst
    double *xr = cgq_xmalloc ((size_t) p * sizeof *xr); // reflected
    double *xe = cgq_xmalloc ((size_t) p * sizeof *xe); // expanded or contracted
    int stop = s->evals + max_evals;
    for (int i = 0; i <= p; i++) {
        double *vi = v + (size_t) i * p;
        memcpy (vi, x, (size_t) p * sizeof *vi);
        if (i > 0) {
            // A step of 1 in log space (a factor e), inwards at an upper bound.
            int k = i - 1;
            vi[k] += vi[k] + 1 <= s->hi[k] ? 1 : -1;
        }
        f[i] = s_objective (s, vi);
    }
    while (s->evals < stop) {
        // Order: best at 0, worst at p (insertion sort; p is small).
        for (int i = 1; i <= p; i++)
            for (int j = i; j > 0 && f[j] < f[j - 1]; j--) {
                double t = f[j];
                f[j] = f[j - 1];
                f[j - 1] = t;
                for (int k = 0; k < p; k++) {
                    double u = v[(size_t) j * p + k];
                    v[(size_t) j * p + k] = v[(size_t) (j - 1) * p + k];
                    v[(size_t) (j - 1) * p + k] = u;
                }
            }
        if (isfinite (f[p]) && f[p] - f[0] <= 1e-7 * (1 + fabs (f[0])))
            break;
        double *worst = v + (size_t) p * p;
        for (int k = 0; k < p; k++) {
            c[k] = 0;
            for (int i = 0; i < p; i++)
                c[k] += v[(size_t) i * p + k] / p;
        }
        for (int k = 0; k < p; k++)
            xr[k] = c[k] + (c[k] - worst[k]);
        double fr = s_objective (s, xr);
        if (fr < f[0]) {
            for (int k = 0; k < p; k++)
                xe[k] = c[k] + 2 * (c[k] - worst[k]);
            double fe = s_objective (s, xe);
            bool take_e = fe < fr;
            memcpy (worst, take_e ? xe : xr, (size_t) p * sizeof *worst);
            f[p] = take_e ? fe : fr;
        }
        else if (fr < f[p - 1]) {
            memcpy (worst, xr, (size_t) p * sizeof *worst);
            f[p] = fr;
        }
        else {
            // Contract towards the better of the worst and its reflection.
            bool outside = fr < f[p];
            for (int k = 0; k < p; k++)
                xe[k] = c[k] + 0.5 * ((outside ? xr[k] : worst[k]) - c[k]);
            double fc = s_objective (s, xe);
            if (fc < (outside ? fr : f[p])) {
                memcpy (worst, xe, (size_t) p * sizeof *worst);
                f[p] = fc;
            }
            else {
                // Shrink everything towards the best vertex.
                for (int i = 1; i <= p && s->evals < stop; i++) {
                    double *vi = v + (size_t) i * p;
                    for (int k = 0; k < p; k++)
                        vi[k] = v[k] + 0.5 * (vi[k] - v[k]);
                    f[i] = s_objective (s, vi);
                }
            }
        }
    }
    int best = 0;
    for (int i = 1; i <= p; i++)
        if (f[i] < f[best])
            best = i;
    memcpy (x, v + (size_t) best * p, (size_t) p * sizeof *x);
    double fbest = f[best];
    free (v);
    free (f);
    free (c);
    free (xr);
    free (xe);
    return fbest;
}

// s_search sets self's hyper-parameters to the best of CGQ_GP_RESTARTS
// Nelder-Mead runs on the observations of w; the first starts from the
// current ones, so a search never ends worse than where it began.
static void
s_search (cgq_gp_t *self, s_work_t *w, s_rng_t *rng)
{
    int dim = self->dim, p = dim + 2;
    s_search_t s = {.w = w, .p = p};
    s.lo = cgq_xmalloc ((size_t) p * sizeof *s.lo);
    s.hi = cgq_xmalloc ((size_t) p * sizeof *s.hi);
    s.length = cgq_xmalloc ((size_t) dim * sizeof *s.length);
    for (int j = 0; j < dim; j++) {
        s.lo[j] = log (CGQ_GP_LENGTH_MIN);
        s.hi[j] = log (CGQ_GP_LENGTH_MAX);
    }
    s.lo[dim] = log (CGQ_GP_SIGNAL_MIN);
    s.hi[dim] = log (CGQ_GP_SIGNAL_MAX);
    s.lo[dim + 1] = log (CGQ_GP_NOISE_MIN);
    s.hi[dim + 1] = log (CGQ_GP_NOISE_MAX);

    double *theta = cgq_xmalloc ((size_t) p * sizeof *theta);
    double *best = cgq_xmalloc ((size_t) p * sizeof *best);
    double fbest = INFINITY;
    for (int r = 0; r < CGQ_GP_RESTARTS; r++) {
        if (r == 0) {
            for (int j = 0; j < dim; j++)
                theta[j] = log (self->length[j]);
            theta[dim] = log (self->signal);
            theta[dim + 1] = log (self->noise);
        }
        else {
            // Random starts where good answers usually are: scales 0.05..2,
            // signal 0.3..3, noise 1e-6..0.1 (log-uniform).
            double scale = log (0.05) + s_rng_unit (rng) * (log (2) - log (0.05));
            for (int j = 0; j < dim; j++)
                theta[j] = scale + 0.5 * s_rng_normal (rng);
            theta[dim] = log (0.3) + s_rng_unit (rng) * (log (3) - log (0.3));
            theta[dim + 1] = log (1e-6) + s_rng_unit (rng) * (log (0.1) - log (1e-6));
        }
        int budget = (CGQ_GP_MAX_EVALS - s.evals) / (CGQ_GP_RESTARTS - r);
        double fr = s_nelder_mead (&s, theta, budget);
        if (fr < fbest) {
            fbest = fr;
            memcpy (best, theta, (size_t) p * sizeof *best);
        }
    }
    if (isfinite (fbest)) {
        for (int j = 0; j < dim; j++)
            self->length[j] = exp (best[j]);
        self->signal = exp (best[dim]);
        self->noise = exp (best[dim + 1]);
    }
    free (theta);
    free (best);
    free (s.lo);
    free (s.hi);
    free (s.length);
}

// --- the model ---------------------------------------------------------------

cgq_gp_t *
cgq_gp_new (int dim)
{
    if (dim < 1 || dim > CGQ_GP_MAX_DIM)
        return NULL;
    cgq_gp_t *self = cgq_xcalloc (1, sizeof *self);
    self->dim = dim;
    self->length = cgq_xmalloc ((size_t) dim * sizeof *self->length);
    for (int j = 0; j < dim; j++)
        self->length[j] = 0.5;
    self->signal = 1;
    self->noise = 0.01;
    self->lml = NAN;
    return self;
}

static void
s_clear (cgq_gp_t *self)
{
    free (self->X);
    free (self->Z);
    free (self->sq);
    free (self->L);
    free (self->y);
    free (self->alpha);
    self->X = self->Z = self->sq = self->L = self->y = self->alpha = NULL;
    self->n = 0;
    self->lml = NAN;
}

void
cgq_gp_destroy (cgq_gp_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cgq_gp_t *self = *self_p;
    s_clear (self);
    free (self->length);
    free (self);
    *self_p = NULL;
}

// s_fit selects the observations, standardises y, optionally searches the
// hyper-parameters, and conditions the model.
static int
s_fit (cgq_gp_t *self, const double *X, const double *y, int n, uint64_t seed, bool search)
{
    int dim = self->dim;
    if (n < 1 || !X || !y)
        return -1;
    for (size_t i = 0; i < (size_t) n * dim; i++)
        if (!isfinite (X[i]))
            return -1;
    for (int i = 0; i < n; i++)
        if (!isfinite (y[i]))
            return -1;
    s_rng_t rng;
    s_rng_seed (&rng, seed, 0);

    int *idx = cgq_xmalloc ((size_t) n * sizeof *idx);
    int m = s_subset (y, n, CGQ_GP_MAX_OBS, CGQ_GP_KEEP_BEST, &rng, idx);
    double *Xs = cgq_xmalloc ((size_t) m * dim * sizeof *Xs);
    double *ys = cgq_xmalloc ((size_t) m * sizeof *ys);
    double mean = 0, var = 0;
    for (int k = 0; k < m; k++) {
        memcpy (Xs + (size_t) k * dim, X + (size_t) idx[k] * dim, (size_t) dim * sizeof *Xs);
        mean += y[idx[k]] / m;
    }
    for (int k = 0; k < m; k++)
        var += (y[idx[k]] - mean) * (y[idx[k]] - mean) / m;
    // A constant y has no scale; 1 keeps the model defined (flat at the mean).
    double sd = var > 0 ? sqrt (var) : 1;
    double y_best = INFINITY;
    for (int k = 0; k < m; k++) {
        ys[k] = (y[idx[k]] - mean) / sd;
        y_best = fmin (y_best, y[idx[k]]);
    }
    free (idx);

    // A failed fit leaves the model as it was, hyper-parameters included.
    double *old_length = cgq_xmalloc ((size_t) dim * sizeof *old_length);
    memcpy (old_length, self->length, (size_t) dim * sizeof *old_length);
    double old_signal = self->signal, old_noise = self->noise;

    if (search) {
        // The search sees a smaller subset (its lowest quarter and a sample):
        // each of its hundreds of factorisations then costs 128^3, not 512^3.
        int *hidx = cgq_xmalloc ((size_t) m * sizeof *hidx);
        int h = s_subset (ys, m, CGQ_GP_MAX_HYPER, CGQ_GP_MAX_HYPER / 4, &rng, hidx);
        double *Xh = cgq_xmalloc ((size_t) h * dim * sizeof *Xh);
        double *yh = cgq_xmalloc ((size_t) h * sizeof *yh);
        for (int k = 0; k < h; k++) {
            memcpy (Xh + (size_t) k * dim, Xs + (size_t) hidx[k] * dim, (size_t) dim * sizeof *Xh);
            yh[k] = ys[hidx[k]];
        }
        s_work_t w;
        s_work_init (&w, Xh, yh, h, dim);
        s_search (self, &w, &rng);
        s_work_fini (&w);
        free (hidx);
        free (Xh);
        free (yh);
    }

    s_work_t w;
    s_work_init (&w, Xs, ys, m, dim);
    double lml = s_factor (&w, self->length, self->signal, self->noise);
    if (!isfinite (lml)) {
        memcpy (self->length, old_length, (size_t) dim * sizeof *old_length);
        self->signal = old_signal;
        self->noise = old_noise;
        free (old_length);
        free (Xs);
        free (ys);
        s_work_fini (&w);
        return -1;
    }
    free (old_length);
    s_clear (self);
    self->n = m;
    self->X = Xs;
    self->Z = w.Z;
    self->sq = w.sq;
    self->L = w.L;
    self->y = ys;
    self->alpha = w.alpha;
    self->y_mean = mean;
    self->y_sd = sd;
    self->y_best = y_best;
    self->lml = lml;
    return 0;
}

int
cgq_gp_fit (cgq_gp_t *self, const double *X, const double *y, int n, uint64_t seed)
{
    return s_fit (self, X, y, n, seed, true);
}

int
cgq_gp_condition (cgq_gp_t *self, const double *X, const double *y, int n, uint64_t seed)
{
    return s_fit (self, X, y, n, seed, false);
}

// s_posterior computes the standardised posterior mean and latent variance at
// the c points C (c x dim, row-major, c <= S_CHUNK), with one matrix product
// for the cross-kernel and one triangular solve for the variances.
static void
s_posterior (const cgq_gp_t *self, const double *C, int c, double *mean, double *var)
{
    int n = self->n, dim = self->dim;
    double *Zc = cgq_xmalloc ((size_t) c * dim * sizeof *Zc);
    double *sqc = cgq_xmalloc ((size_t) c * sizeof *sqc);
    double *Ks = cgq_xmalloc ((size_t) n * c * sizeof *Ks); // n x c column-major
    s_scale (C, c, dim, self->length, Zc, sqc);
    cblas_dgemm (CblasColMajor, CblasTrans, CblasNoTrans, n, c, dim, 1.0, self->Z, dim, Zc, dim,
                 0.0, Ks, n);
    for (int j = 0; j < c; j++)
        for (int i = 0; i < n; i++) {
            double *k = Ks + (size_t) j * n + i;
            *k = s_matern (self->sq[i] + sqc[j] - 2 * *k, self->signal);
        }
    cblas_dgemv (CblasColMajor, CblasTrans, n, c, 1.0, Ks, n, self->alpha, 1, 0.0, mean, 1);
    cblas_dtrsm (CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, n, c, 1.0,
                 self->L, n, Ks, n);
    for (int j = 0; j < c; j++) {
        double v = self->signal - cblas_ddot (n, Ks + (size_t) j * n, 1, Ks + (size_t) j * n, 1);
        var[j] = v > 0 ? v : 0;
    }
    free (Zc);
    free (sqc);
    free (Ks);
}

int
cgq_gp_predict (const cgq_gp_t *self, const double *x, double *mean, double *var)
{
    if (self->n == 0)
        return -1;
    double m, v;
    s_posterior (self, x, 1, &m, &v);
    if (mean)
        *mean = self->y_mean + self->y_sd * m;
    if (var)
        *var = v * self->y_sd * self->y_sd;
    return 0;
}

// s_ei is the expected improvement of N(mean, var) below target.
static double
s_ei (double mean, double var, double target)
{
    double imp = target - mean, s = sqrt (var);
    if (!(s > 0))
        return imp > 0 ? imp : 0;
    double z = imp / s;
    double ei = imp * 0.5 * erfc (-z / M_SQRT2) + s * exp (-0.5 * z * z) / sqrt (2 * M_PI);
    return ei > 0 ? ei : 0; // rounding can make a tiny improvement negative
}

double
cgq_gp_ei (const cgq_gp_t *self, const double *x, double best, double xi)
{
    double mean, var;
    if (cgq_gp_predict (self, x, &mean, &var) < 0)
        return 0;
    return s_ei (mean, var, best - xi);
}

void
cgq_gp_ei_many (const cgq_gp_t *self, const double *C, int c, double best, double xi, double *ei)
{
    if (self->n == 0) {
        memset (ei, 0, (size_t) (c > 0 ? c : 0) * sizeof *ei);
        return;
    }
    double mean[S_CHUNK], var[S_CHUNK];
    for (int start = 0; start < c; start += S_CHUNK) {
        int k = c - start < S_CHUNK ? c - start : S_CHUNK;
        s_posterior (self, C + (size_t) start * self->dim, k, mean, var);
        for (int i = 0; i < k; i++)
            ei[start + i] = s_ei (self->y_mean + self->y_sd * mean[i],
                                  var[i] * self->y_sd * self->y_sd, best - xi);
    }
}

int
cgq_gp_predict_many (const cgq_gp_t *self, const double *C, int c, double *mean, double *var)
{
    if (self->n == 0)
        return -1;
    double m[S_CHUNK], v[S_CHUNK];
    for (int start = 0; start < c; start += S_CHUNK) {
        int k = c - start < S_CHUNK ? c - start : S_CHUNK;
        s_posterior (self, C + (size_t) start * self->dim, k, m, v);
        for (int i = 0; i < k; i++) {
            if (mean)
                mean[start + i] = self->y_mean + self->y_sd * m[i];
            if (var)
                var[start + i] = v[i] * self->y_sd * self->y_sd;
        }
    }
    return 0;
}

void
cgq_gp_pof_many (const cgq_gp_t *self, const double *C, int c, double threshold, double *pof)
{
    if (self->n == 0) {
        for (int i = 0; i < c; i++)
            pof[i] = 1;
        return;
    }
    double m[S_CHUNK], v[S_CHUNK];
    for (int start = 0; start < c; start += S_CHUNK) {
        int k = c - start < S_CHUNK ? c - start : S_CHUNK;
        s_posterior (self, C + (size_t) start * self->dim, k, m, v);
        for (int i = 0; i < k; i++) {
            double mean = self->y_mean + self->y_sd * m[i], s = sqrt (v[i]) * self->y_sd;
            pof[start + i] = s > 0 ? 0.5 * erfc (-(threshold - mean) / (s * M_SQRT2))
                             : mean <= threshold ? 1
                                                 : 0;
        }
    }
}

int
cgq_gp_suggest (const cgq_gp_t *self, int ncand, uint64_t seed, double *x_out)
{
    int dim = self->dim;
    if (ncand < 1)
        return -1;
    s_rng_t rng;
    s_rng_seed (&rng, seed, 1);
    if (self->n == 0) {
        for (int j = 0; j < dim; j++)
            x_out[j] = s_rng_unit (&rng);
        return 0;
    }
    // The observations to perturb: the few lowest.
    int nbest = self->n < 5 ? self->n : 5;
    s_ranked_t *ranked = cgq_xmalloc ((size_t) self->n * sizeof *ranked);
    for (int i = 0; i < self->n; i++)
        ranked[i] = (s_ranked_t){self->y[i], i};
    qsort (ranked, (size_t) self->n, sizeof *ranked, s_ranked_cmp);
    double *C = cgq_xmalloc ((size_t) S_CHUNK * dim * sizeof *C);
    double *mean = cgq_xmalloc (S_CHUNK * sizeof *mean);
    double *var = cgq_xmalloc (S_CHUNK * sizeof *var);

    double target = (self->y_best - self->y_mean) / self->y_sd - S_XI;
    // With no improvement expected anywhere (EI underflows to 0 when the
    // model is sure), the most uncertain candidate is the useful one.
    double best_ei = 0, best_var = -1;
    double *widest = cgq_xmalloc ((size_t) dim * sizeof *widest);
    static const double scales[] = {0.2, 0.05, 0.01};
    for (int start = 0; start < ncand; start += S_CHUNK) {
        int c = ncand - start < S_CHUNK ? ncand - start : S_CHUNK;
        for (int k = 0; k < c; k++) {
            double *x = C + (size_t) k * dim;
            if ((start + k) % 2 == 0) {
                for (int j = 0; j < dim; j++)
                    x[j] = s_rng_unit (&rng);
                continue;
            }
            int row = ranked[s_rng_below (&rng, (uint64_t) nbest)].i;
            const double *base = self->X + (size_t) row * dim;
            double scale = scales[s_rng_below (&rng, 3)];
            for (int j = 0; j < dim; j++) {
                double v = base[j] + scale * s_rng_normal (&rng);
                x[j] = v < 0 ? 0 : v > 1 ? 1 : v;
            }
        }
        s_posterior (self, C, c, mean, var);
        for (int k = 0; k < c; k++) {
            double ei = s_ei (mean[k], var[k], target);
            if (ei > best_ei) {
                best_ei = ei;
                memcpy (x_out, C + (size_t) k * dim, (size_t) dim * sizeof *x_out);
            }
            if (var[k] > best_var) {
                best_var = var[k];
                memcpy (widest, C + (size_t) k * dim, (size_t) dim * sizeof *widest);
            }
        }
    }
    if (!(best_ei > 0))
        memcpy (x_out, widest, (size_t) dim * sizeof *x_out);
    free (widest);
    free (ranked);
    free (C);
    free (mean);
    free (var);
    return 0;
}

double
cgq_gp_lml (const cgq_gp_t *self)
{
    return self->lml;
}

int
cgq_gp_nobs (const cgq_gp_t *self)
{
    return self->n;
}

void
cgq_gp_hyper (const cgq_gp_t *self, double *lengths, double *signal, double *noise)
{
    if (lengths)
        memcpy (lengths, self->length, (size_t) self->dim * sizeof *lengths);
    if (signal)
        *signal = self->signal;
    if (noise)
        *noise = self->noise;
}

int
cgq_gp_set_hyper (cgq_gp_t *self, const double *lengths, double signal, double noise)
{
    for (int j = 0; j < self->dim; j++)
        if (!(lengths[j] >= CGQ_GP_LENGTH_MIN && lengths[j] <= CGQ_GP_LENGTH_MAX))
            return -1;
    if (!(signal >= CGQ_GP_SIGNAL_MIN && signal <= CGQ_GP_SIGNAL_MAX) ||
        !(noise >= CGQ_GP_NOISE_MIN && noise <= CGQ_GP_NOISE_MAX))
        return -1;
    memcpy (self->length, lengths, (size_t) self->dim * sizeof *lengths);
    self->signal = signal;
    self->noise = noise;
    return 0;
}

void
cgq_gp_blas_one_thread (void)
{
    if (getenv ("OPENBLAS_NUM_THREADS"))
        return;
    openblas_set_num_threads (1);
    // The pthreads build's own fork and exit hook, which joins the pool's
    // threads; looked up, not linked: the serial and OpenMP builds of
    // libopenblas0 have none.
    int (*shutdown) (void) = (int (*) (void)) dlsym (RTLD_DEFAULT, "blas_thread_shutdown_");
    if (shutdown)
        shutdown ();
}
