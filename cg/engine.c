#include "engine.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "util.h"

// The loops below are what a run measures, so they get the vector width of
// the CPU they run on (OpenBLAS picks its kernels at run time the same way):
// GCC compiles each twice and the loader picks one. Not under ASan, whose
// run-time is not ready yet when the loader runs the ifunc resolvers.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) &&                             \
    !defined(__SANITIZE_ADDRESS__)
#define S_VECTOR __attribute__ ((target_clones ("avx2", "default")))
#else
#define S_VECTOR
#endif

// More than this is a model no benchmark of this engine is meant for (or a
// typo in a resolution); refuse it rather than swap.
#define S_MAX_BYTES ((size_t) 4 << 30)

typedef struct {
    float *out;    // into one of the engine's buffers
    float *params; // into the weight arena, or NULL
    size_t nparams;
    bool kept; // out still holds this node's values after a run
} s_node_t;

struct cgq_cg_engine_t {
    const cgq_cg_graph_t *g;
    int n;
    s_node_t *nodes;
    float **bufs;
    int nbufs;
    float *weights;
    float *col; // im2col scratch, shared by every conv
    size_t bytes;
    // Per-op timing: op_ms[r * n + i] is node i's time in kept run r.
    double *op_ms;
    int op_cap, op_runs;
};

void
cgq_cg_engine_opts_default (cgq_cg_engine_opts_t *opts)
{
    *opts = (cgq_cg_engine_opts_t){.threads = 1, .seed = 1, .keep_all = false};
}

static size_t
s_elems (cgq_cg_shape_t s)
{
    return (size_t) s.c * (size_t) s.h * (size_t) s.w;
}

// ---------------------------------------------------------------------------
// Deterministic random values

static uint64_t
s_next (uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// s_fill writes n values uniform in [lo, hi).
static void
s_fill (uint64_t *state, float *v, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++) {
        float u = (float) (s_next (state) >> 40) * (1.0f / 16777216.0f);
        v[i] = lo + (hi - lo) * u;
    }
}

// ---------------------------------------------------------------------------
// Planning

static size_t
s_param_count (const cgq_cg_node_t *n)
{
    switch (n->op) {
    case CGQ_CG_CONV2D:
    case CGQ_CG_FC:
    case CGQ_CG_BATCHNORM: return (size_t) n->params;
    default: return 0;
    }
}

static bool
s_in_place (const cgq_cg_node_t *n)
{
    switch (n->op) {
    case CGQ_CG_RELU:
    case CGQ_CG_RELU6:
    case CGQ_CG_SIGMOID:
    case CGQ_CG_HSWISH:
    case CGQ_CG_BATCHNORM: return true;
    case CGQ_CG_ADD: return n->inputs[0] != n->inputs[1];
    default: return false;
    }
}

// s_plan assigns each node an output buffer. A buffer is free again after
// the last reader of its node has run, and elementwise ops write over their
// input when they are its last reader, as real engines do: the working set,
// and so the cache behaviour, stays that of one inference. Fills buf_of
// (node -> buffer) and caps (floats per buffer); returns the buffer count.
static int
s_plan (const cgq_cg_graph_t *g, bool keep_all, int *buf_of, size_t **caps_p, bool *kept)
{
    int n = cgq_cg_graph_size (g);
    int *last = cgq_xmalloc (sizeof (int) * (size_t) n);
    for (int i = 0; i < n; i++)
        last[i] = -1;
    for (int i = 0; i < n; i++) {
        const cgq_cg_node_t *node = cgq_cg_graph_node (g, i);
        for (int j = 0; j < node->ninputs; j++)
            last[node->inputs[j]] = i;
    }
    last[0] = n; // the input is never overwritten: every run reads the same values
    for (int i = 0; i < n; i++) {
        if (last[i] < 0)
            last[i] = n; // a graph output
        kept[i] = keep_all || last[i] == n;
    }
    size_t *caps = NULL;
    int nbufs = 0;
    int *free_list = cgq_xmalloc (sizeof (int) * (size_t) n);
    int nfree = 0;
    for (int i = 0; i < n; i++) {
        const cgq_cg_node_t *node = cgq_cg_graph_node (g, i);
        size_t need = s_elems (node->out);
        int b = -1;
        bool took_input = false;
        if (!keep_all && s_in_place (node) && node->inputs[0] != 0 && last[node->inputs[0]] == i) {
            b = buf_of[node->inputs[0]];
            took_input = true;
        }
        else if (!keep_all && nfree > 0) {
            // Best fit; else the largest free buffer, grown.
            int best = -1, largest = 0;
            for (int f = 0; f < nfree; f++) {
                size_t cap = caps[free_list[f]];
                if (cap >= need && (best < 0 || cap < caps[free_list[best]]))
                    best = f;
                if (cap > caps[free_list[largest]])
                    largest = f;
            }
            int f = best >= 0 ? best : largest;
            b = free_list[f];
            free_list[f] = free_list[--nfree];
        }
        if (b < 0) {
            caps = cgq_xrealloc (caps, sizeof (size_t) * (size_t) (nbufs + 1));
            caps[nbufs] = 0;
            b = nbufs++;
        }
        if (caps[b] < need)
            caps[b] = need;
        buf_of[i] = b;
        if (keep_all)
            continue;
        // Inputs read for the last time give their buffers back, once each.
        for (int j = 0; j < node->ninputs; j++) {
            int in = node->inputs[j];
            bool seen = false;
            for (int k = 0; k < j; k++)
                seen = seen || node->inputs[k] == in;
            if (seen || last[in] != i || (took_input && j == 0))
                continue;
            free_list[nfree++] = buf_of[in];
        }
    }
    free (free_list);
    free (last);
    *caps_p = caps;
    return nbufs;
}

// s_col_len is the im2col scratch a conv needs, in floats (0: none).
static size_t
s_col_len (const cgq_cg_node_t *n)
{
    if (n->op != CGQ_CG_CONV2D)
        return 0;
    bool depthwise = n->groups == n->in.c && n->groups == n->channels;
    bool direct = n->kernel == 1 && n->stride == 1 && n->pad == 0;
    if (depthwise || direct)
        return 0;
    return (size_t) (n->in.c / n->groups) * (size_t) n->kernel * (size_t) n->kernel *
           (size_t) n->out.h * (size_t) n->out.w;
}

cgq_cg_engine_t *
cgq_cg_engine_new (const cgq_cg_graph_t *graph, const cgq_cg_engine_opts_t *opts, char *err,
                   size_t err_len)
{
    cgq_cg_engine_opts_t o;
    if (opts)
        o = *opts;
    else
        cgq_cg_engine_opts_default (&o);
    if (cgq_cg_graph_failed (graph)) {
        snprintf (err, err_len, "cannot run graph '%s': %s", cgq_cg_graph_name (graph),
                  cgq_cg_graph_errstr (graph));
        return NULL;
    }
    int n = cgq_cg_graph_size (graph);
    if (n == 0) {
        snprintf (err, err_len, "cannot run graph '%s': it has no nodes",
                  cgq_cg_graph_name (graph));
        return NULL;
    }
    if (o.threads < 1)
        o.threads = 1;

    int *buf_of = cgq_xmalloc (sizeof (int) * (size_t) n);
    bool *kept = cgq_xmalloc (sizeof (bool) * (size_t) n);
    size_t *caps = NULL;
    int nbufs = s_plan (graph, o.keep_all, buf_of, &caps, kept);
    size_t nweights = 0, col_len = 0, acts = 0;
    for (int i = 0; i < n; i++) {
        const cgq_cg_node_t *node = cgq_cg_graph_node (graph, i);
        nweights += s_param_count (node);
        size_t c = s_col_len (node);
        if (c > col_len)
            col_len = c;
    }
    for (int b = 0; b < nbufs; b++)
        acts += caps[b];
    size_t bytes = (acts + nweights + col_len) * sizeof (float);
    if (bytes > S_MAX_BYTES) {
        snprintf (err, err_len,
                  "graph '%s' needs %.1f GiB to run, more than the %.0f GiB this "
                  "engine allows (use a smaller resolution or width)",
                  cgq_cg_graph_name (graph), (double) bytes / (1 << 30),
                  (double) S_MAX_BYTES / (1 << 30));
        free (buf_of);
        free (kept);
        free (caps);
        return NULL;
    }

    cgq_cg_engine_t *self = cgq_xcalloc (1, sizeof *self);
    self->g = graph;
    self->n = n;
    self->nodes = cgq_xcalloc ((size_t) n, sizeof *self->nodes);
    self->nbufs = nbufs;
    self->bufs = cgq_xcalloc ((size_t) nbufs, sizeof (float *));
    // calloc: the pages are touched before the first run, not during it.
    for (int b = 0; b < nbufs; b++)
        self->bufs[b] = cgq_xcalloc (caps[b], sizeof (float));
    self->weights = cgq_xmalloc (sizeof (float) * (nweights ? nweights : 1));
    self->col = col_len ? cgq_xcalloc (col_len, sizeof (float)) : NULL;
    self->bytes = bytes;

    uint64_t rng = o.seed;
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        const cgq_cg_node_t *node = cgq_cg_graph_node (graph, i);
        s_node_t *sn = &self->nodes[i];
        sn->out = self->bufs[buf_of[i]];
        sn->kept = kept[i];
        sn->nparams = s_param_count (node);
        if (!sn->nparams)
            continue;
        sn->params = self->weights + off;
        off += sn->nparams;
        // He-uniform weights keep the variance of activations through relu
        // layers; small biases and shifts; scales near 1.
        if (node->op == CGQ_CG_BATCHNORM) {
            size_t c = (size_t) node->out.c;
            s_fill (&rng, sn->params, c, 0.5f, 1.5f);
            s_fill (&rng, sn->params + c, c, -0.1f, 0.1f);
            continue;
        }
        size_t cout = (size_t) node->channels;
        size_t nw = node->op == CGQ_CG_FC ? cout * s_elems (node->in)
                                          : cout * (size_t) (node->in.c / node->groups) *
                                                (size_t) node->kernel * (size_t) node->kernel;
        float a = sqrtf (6.0f * (float) cout / (float) nw);
        s_fill (&rng, sn->params, nw, -a, a);
        if (sn->nparams > nw)
            s_fill (&rng, sn->params + nw, sn->nparams - nw, -0.1f, 0.1f);
    }
    const cgq_cg_node_t *in = cgq_cg_graph_node (graph, 0);
    s_fill (&rng, self->nodes[0].out, s_elems (in->out), -1.0f, 1.0f);
    openblas_set_num_threads (o.threads);
    free (buf_of);
    free (kept);
    free (caps);
    return self;
}

void
cgq_cg_engine_destroy (cgq_cg_engine_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cgq_cg_engine_t *self = *self_p;
    for (int b = 0; b < self->nbufs; b++)
        free (self->bufs[b]);
    free (self->bufs);
    free (self->nodes);
    free (self->weights);
    free (self->col);
    free (self->op_ms);
    free (self);
    *self_p = NULL;
}

// ---------------------------------------------------------------------------
// Kernels

// s_range gives the outputs o in [*lo, *hi) whose input o*stride + off lies
// in [0, n): the part of a row that needs no bounds checks.
static void
s_range (int off, int stride, int n, int out, int *lo, int *hi)
{
    int l = off >= 0 ? 0 : (-off + stride - 1) / stride;
    int h = n - 1 - off < 0 ? 0 : (n - 1 - off) / stride + 1;
    if (h > out)
        h = out;
    if (l > h)
        l = h;
    *lo = l;
    *hi = h;
}

// s_im2col lays out x [c][h][w] as col [c*k*k][ho*wo]: row (ci, ky, kx)
// holds the input each output position sees through that kernel tap.
static void
s_im2col (const float *x, int c, int h, int w, int k, int stride, int pad, int ho, int wo,
          float *col)
{
    size_t npos = (size_t) ho * (size_t) wo;
    for (int ci = 0; ci < c; ci++)
        for (int ky = 0; ky < k; ky++)
            for (int kx = 0; kx < k; kx++) {
                float *row = col + (((size_t) ci * k + ky) * k + kx) * npos;
                int ylo, yhi, xlo, xhi;
                s_range (ky - pad, stride, h, ho, &ylo, &yhi);
                s_range (kx - pad, stride, w, wo, &xlo, &xhi);
                for (int oy = 0; oy < ho; oy++) {
                    float *r = row + (size_t) oy * wo;
                    if (oy < ylo || oy >= yhi || xlo >= xhi) {
                        memset (r, 0, sizeof (float) * (size_t) wo);
                        continue;
                    }
                    const float *xr =
                        x + ((size_t) ci * h + (size_t) (oy * stride + ky - pad)) * w + (kx - pad);
                    for (int ox = 0; ox < xlo; ox++)
                        r[ox] = 0;
                    if (stride == 1)
                        memcpy (r + xlo, xr + xlo, sizeof (float) * (size_t) (xhi - xlo));
                    else
                        for (int ox = xlo; ox < xhi; ox++)
                            r[ox] = xr[ox * stride];
                    for (int ox = xhi; ox < wo; ox++)
                        r[ox] = 0;
                }
            }
}

// s_fill_bias starts each of the m rows of y (n wide) at its bias, or at 0.
// Returns the beta for sgemm: 1 to add onto the bias, 0 to overwrite.
static float
s_fill_bias (float *y, const float *bias, int m, size_t n)
{
    if (!bias)
        return 0.0f;
    for (int r = 0; r < m; r++)
        for (size_t i = 0; i < n; i++)
            y[(size_t) r * n + i] = bias[r];
    return 1.0f;
}

// s_depthwise: one output channel per input channel, so sgemm would see
// 1-row matrices; a direct loop over kernel taps and rows instead (the work
// is memory-bound anyway). The output never aliases the input.
S_VECTOR static void
s_depthwise (const cgq_cg_node_t *node, const float *restrict x, const float *restrict w,
             const float *restrict bias, float *restrict y)
{
    int c = node->in.c, h = node->in.h, wd = node->in.w;
    int k = node->kernel, s = node->stride, p = node->pad, ho = node->out.h, wo = node->out.w;
    size_t npos = (size_t) ho * (size_t) wo;
    for (int ci = 0; ci < c; ci++) {
        const float *xc = x + (size_t) ci * h * wd;
        const float *wc = w + (size_t) ci * k * k;
        float *yc = y + (size_t) ci * npos;
        float b0 = bias ? bias[ci] : 0.0f;
        for (size_t i = 0; i < npos; i++)
            yc[i] = b0;
        for (int ky = 0; ky < k; ky++) {
            int ylo, yhi;
            s_range (ky - p, s, h, ho, &ylo, &yhi);
            for (int kx = 0; kx < k; kx++) {
                int xlo, xhi;
                s_range (kx - p, s, wd, wo, &xlo, &xhi);
                float wv = wc[ky * k + kx];
                for (int oy = ylo; oy < yhi; oy++) {
                    const float *xr = xc + (size_t) (oy * s + ky - p) * wd + (kx - p);
                    float *yr = yc + (size_t) oy * wo;
                    if (s == 1)
                        for (int ox = xlo; ox < xhi; ox++)
                            yr[ox] += wv * xr[ox];
                    else
                        for (int ox = xlo; ox < xhi; ox++)
                            yr[ox] += wv * xr[ox * s];
                }
            }
        }
    }
}

static void
s_conv (const cgq_cg_node_t *node, const float *x, const float *w, float *col, float *y)
{
    int cin = node->in.c, h = node->in.h, wd = node->in.w;
    int cout = node->channels, k = node->kernel, s = node->stride, p = node->pad;
    int ho = node->out.h, wo = node->out.w, g = node->groups;
    size_t npos = (size_t) ho * (size_t) wo;
    int cin_g = cin / g, cout_g = cout / g;
    int kk = cin_g * k * k;
    const float *bias = node->bias ? w + (size_t) cout * kk : NULL;

    if (g == cin && g == cout) {
        s_depthwise (node, x, w, bias, y);
        return;
    }
    bool direct = k == 1 && s == 1 && p == 0;
    for (int gi = 0; gi < g; gi++) {
        const float *xg = x + (size_t) gi * cin_g * h * wd;
        const float *b = xg; // a 1x1 stride-1 conv reads its input as the matrix itself
        if (!direct) {
            s_im2col (xg, cin_g, h, wd, k, s, p, ho, wo, col);
            b = col;
        }
        float *yg = y + (size_t) gi * cout_g * npos;
        float beta = s_fill_bias (yg, bias ? bias + gi * cout_g : NULL, cout_g, npos);
        cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasNoTrans, cout_g, (int) npos, kk, 1.0f,
                     w + (size_t) gi * cout_g * kk, kk, b, (int) npos, beta, yg, (int) npos);
    }
}

static void
s_pool (const cgq_cg_node_t *node, const float *x, float *y)
{
    int c = node->in.c, h = node->in.h, w = node->in.w;
    int k = node->kernel, s = node->stride, p = node->pad, ho = node->out.h, wo = node->out.w;
    bool max = node->op == CGQ_CG_MAXPOOL;
    for (int ci = 0; ci < c; ci++) {
        const float *xc = x + (size_t) ci * h * w;
        float *yc = y + (size_t) ci * ho * wo;
        for (int oy = 0; oy < ho; oy++) {
            int y0 = oy * s - p, y1 = y0 + k;
            y0 = y0 < 0 ? 0 : y0;
            y1 = y1 > h ? h : y1;
            for (int ox = 0; ox < wo; ox++) {
                int x0 = ox * s - p, x1 = x0 + k;
                x0 = x0 < 0 ? 0 : x0;
                x1 = x1 > w ? w : x1;
                // pad <= kernel/2 (checked by the graph): never an empty window.
                float acc = max ? -INFINITY : 0.0f;
                for (int iy = y0; iy < y1; iy++)
                    for (int ix = x0; ix < x1; ix++) {
                        float v = xc[(size_t) iy * w + ix];
                        if (max)
                            acc = v > acc ? v : acc;
                        else
                            acc += v;
                    }
                if (!max)
                    acc /= (float) ((y1 - y0) * (x1 - x0));
                yc[(size_t) oy * wo + ox] = acc;
            }
        }
    }
}

// Elementwise ops work in place on y (restrict: the compiler may vectorize);
// s_node_run copies the input over first when the two differ.
S_VECTOR static void
s_relu (float *restrict y, size_t n)
{
    for (size_t k = 0; k < n; k++)
        y[k] = y[k] > 0.0f ? y[k] : 0.0f;
}

S_VECTOR static void
s_relu6 (float *restrict y, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        float v = y[k] > 0.0f ? y[k] : 0.0f;
        y[k] = v < 6.0f ? v : 6.0f;
    }
}

static void
s_sigmoid (float *restrict y, size_t n)
{
    for (size_t k = 0; k < n; k++)
        y[k] = 1.0f / (1.0f + expf (-y[k]));
}

S_VECTOR static void
s_hswish (float *restrict y, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        float r = y[k] + 3.0f;
        r = r > 0.0f ? r : 0.0f;
        r = r < 6.0f ? r : 6.0f;
        y[k] = y[k] * r * (1.0f / 6.0f);
    }
}

S_VECTOR static void
s_batchnorm (float *restrict y, const float *restrict scale, const float *restrict shift, int c,
             size_t hw)
{
    for (int ci = 0; ci < c; ci++) {
        float a = scale[ci], b = shift[ci];
        float *yc = y + (size_t) ci * hw;
        for (size_t k = 0; k < hw; k++)
            yc[k] = yc[k] * a + b;
    }
}

S_VECTOR static void
s_add (float *restrict y, const float *restrict b, size_t n)
{
    for (size_t k = 0; k < n; k++)
        y[k] += b[k];
}

static void
s_node_run (cgq_cg_engine_t *self, int i)
{
    const cgq_cg_node_t *node = cgq_cg_graph_node (self->g, i);
    s_node_t *sn = &self->nodes[i];
    float *y = sn->out;
    const float *x = node->ninputs > 0 ? self->nodes[node->inputs[0]].out : NULL;
    size_t n = s_elems (node->out);
    size_t hw = (size_t) node->out.h * (size_t) node->out.w;
    switch (node->op) {
    case CGQ_CG_INPUT: break;
    case CGQ_CG_CONV2D: s_conv (node, x, sn->params, self->col, y); break;
    case CGQ_CG_RELU:
    case CGQ_CG_RELU6:
    case CGQ_CG_SIGMOID:
    case CGQ_CG_HSWISH:
    case CGQ_CG_BATCHNORM:
    case CGQ_CG_ADD:
        if (y != x)
            memcpy (y, x, sizeof (float) * n);
        if (node->op == CGQ_CG_RELU)
            s_relu (y, n);
        else if (node->op == CGQ_CG_RELU6)
            s_relu6 (y, n);
        else if (node->op == CGQ_CG_SIGMOID)
            s_sigmoid (y, n);
        else if (node->op == CGQ_CG_HSWISH)
            s_hswish (y, n);
        else if (node->op == CGQ_CG_BATCHNORM)
            s_batchnorm (y, sn->params, sn->params + node->out.c, node->out.c, hw);
        else
            s_add (y, self->nodes[node->inputs[1]].out, n);
        break;
    case CGQ_CG_MAXPOOL:
    case CGQ_CG_AVGPOOL: s_pool (node, x, y); break;
    case CGQ_CG_GLOBAL_AVGPOOL: {
        size_t ihw = (size_t) node->in.h * (size_t) node->in.w;
        for (int c = 0; c < node->in.c; c++) {
            float acc = 0.0f;
            for (size_t k = 0; k < ihw; k++)
                acc += x[c * ihw + k];
            y[c] = acc / (float) ihw;
        }
        break;
    }
    case CGQ_CG_FC: {
        int in = (int) s_elems (node->in), out = node->channels;
        const float *w = sn->params;
        memcpy (y, w + (size_t) out * in, sizeof (float) * (size_t) out);
        cblas_sgemv (CblasRowMajor, CblasNoTrans, out, in, 1.0f, w, in, x, 1, 1.0f, y, 1);
        break;
    }
    case CGQ_CG_CONCAT: {
        float *dst = y;
        for (int j = 0; j < node->ninputs; j++) {
            const cgq_cg_node_t *in = cgq_cg_graph_node (self->g, node->inputs[j]);
            size_t len = s_elems (in->out);
            memcpy (dst, self->nodes[node->inputs[j]].out, sizeof (float) * len);
            dst += len;
        }
        break;
    }
    case CGQ_CG_SHUFFLE: {
        // Viewing the channels as [g][c/g], write them out as [c/g][g].
        int g = node->groups, per = node->out.c / g;
        for (int gi = 0; gi < g; gi++)
            for (int j = 0; j < per; j++)
                memcpy (y + ((size_t) j * g + gi) * hw, x + ((size_t) gi * per + j) * hw,
                        sizeof (float) * hw);
        break;
    }
    case CGQ_CG_SLICE: memcpy (y, x + (size_t) node->offset * hw, sizeof (float) * n); break;
    default: break;
    }
}

static double
s_now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec / 1e6;
}

int
cgq_cg_engine_run (cgq_cg_engine_t *self)
{
#if defined(__SSE__)
    // Flush denormals to zero, as inference runtimes do: a few denormal
    // activations would otherwise make a run many times slower at random.
    unsigned csr = _mm_getcsr ();
    _mm_setcsr (csr | 0x8040);
#endif
    if (self->op_cap > 0) {
        // A run past the room kept is timed into a row that is dropped.
        bool keep = self->op_runs < self->op_cap;
        double *row = self->op_ms + (size_t) (keep ? self->op_runs : self->op_cap) * self->n;
        double t = s_now_ms ();
        for (int i = 0; i < self->n; i++) {
            s_node_run (self, i);
            double u = s_now_ms ();
            row[i] = u - t;
            t = u;
        }
        if (keep)
            self->op_runs++;
    }
    else
        for (int i = 0; i < self->n; i++)
            s_node_run (self, i);
#if defined(__SSE__)
    _mm_setcsr (csr);
#endif
    return 0;
}

void
cgq_cg_engine_op_timing (cgq_cg_engine_t *self, int cap)
{
    free (self->op_ms);
    self->op_ms = NULL;
    self->op_cap = cap > 0 ? cap : 0;
    self->op_runs = 0;
    if (self->op_cap > 0) // one row more: where runs past cap are timed
        self->op_ms = cgq_xcalloc ((size_t) (self->op_cap + 1) * (size_t) self->n, sizeof (double));
}

void
cgq_cg_engine_op_reset (cgq_cg_engine_t *self)
{
    self->op_runs = 0;
}

static int
s_cmp_double (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

int
cgq_cg_engine_op_medians (const cgq_cg_engine_t *self, double *out)
{
    int r = self->op_runs;
    if (r == 0)
        return 0;
    double *col = cgq_xmalloc (sizeof (double) * (size_t) r);
    for (int i = 0; i < self->n; i++) {
        for (int k = 0; k < r; k++)
            col[k] = self->op_ms[(size_t) k * self->n + i];
        qsort (col, (size_t) r, sizeof (double), s_cmp_double);
        out[i] = r % 2 ? col[r / 2] : (col[r / 2 - 1] + col[r / 2]) / 2;
        if (cgq_cg_graph_node (self->g, i)->op == CGQ_CG_INPUT)
            out[i] = 0; // nothing ran: what was read is the clock's own cost
    }
    free (col);
    return r;
}

int
cgq_cg_engine_nodes (const cgq_cg_engine_t *self)
{
    return self->n;
}

double
cgq_cg_timer_overhead_ms (void)
{
    enum { N = 1001 };
    double *d = cgq_xmalloc (sizeof (double) * N);
    for (int i = 0; i < N; i++) {
        double a = s_now_ms ();
        d[i] = s_now_ms () - a;
    }
    qsort (d, N, sizeof (double), s_cmp_double);
    double m = d[N / 2];
    free (d);
    return m;
}

int
cgq_cg_engine_bench (cgq_cg_engine_t *self, int warmup, int repeats, double *ms)
{
    for (int i = 0; i < warmup; i++)
        cgq_cg_engine_run (self);
    for (int i = 0; i < repeats; i++) {
        double t0 = s_now_ms ();
        cgq_cg_engine_run (self);
        ms[i] = s_now_ms () - t0;
    }
    return 0;
}

float *
cgq_cg_engine_input (cgq_cg_engine_t *self, size_t *count)
{
    if (count)
        *count = s_elems (cgq_cg_graph_node (self->g, 0)->out);
    return self->nodes[0].out;
}

float *
cgq_cg_engine_params (cgq_cg_engine_t *self, int id, size_t *count)
{
    if (id < 0 || id >= self->n || !self->nodes[id].params) {
        if (count)
            *count = 0;
        return NULL;
    }
    if (count)
        *count = self->nodes[id].nparams;
    return self->nodes[id].params;
}

const float *
cgq_cg_engine_output (const cgq_cg_engine_t *self, int id, size_t *count)
{
    if (id < 0 || id >= self->n || !self->nodes[id].kept) {
        if (count)
            *count = 0;
        return NULL;
    }
    if (count)
        *count = s_elems (cgq_cg_graph_node (self->g, id)->out);
    return self->nodes[id].out;
}

size_t
cgq_cg_engine_bytes (const cgq_cg_engine_t *self)
{
    return self->bytes;
}
