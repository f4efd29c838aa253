#include "net.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

// Where layer l's parameters and buffers are.
typedef struct {
    int d;       // input width
    int cin;     // rows of W: 2d (sum, mean) or d (gcn)
    size_t w, b; // offsets of W (cin x hidden) and b (hidden) in params
    float *c;    // N x cin: [H | A H] or A H
    float *z;    // N x hidden: before relu
    float *mask; // N x hidden: 0 or 1 / (1 - p); NULL without dropout
} s_layer_t;

struct cgq_pred_net_t {
    cgq_pred_shape_t shape;
    size_t size;
    float *params, *grads, *m, *v;
    long step;
    uint64_t rng;
    s_layer_t layer[CGQ_PRED_MAX_LAYERS];
    size_t w1, b1, w2, b2; // head offsets

    // Activations of the last forward, for cap_n nodes and cap_b graphs.
    size_t cap_n, cap_b;
    float *h[CGQ_PRED_MAX_LAYERS + 1]; // h[0] borrowed (the batch's x); h[L]: last output
    float *g, *z1, *y1, *mask1;        // head rows (B, or N when additive) x hidden
    float *u, *wnode, *du;             // N: additive node outputs, d t / d u, d loss / d u
    // Backward scratch.
    float *dh, *dh2, *dc, *dz; // N x max width
    float *dg, *dz1, *dy1;     // B x hidden
    float *ones;               // max(N, B) ones, for column sums as sgemv
    double flops_fwd, flops_bwd;
    bool dropped; // the last forward applied dropout
};

static void
s_init_uniform (float *p, size_t n, double bound, uint64_t *rng)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (float)((2 * cgq_pred_rng_uniform (rng) - 1) * bound);
}

cgq_pred_net_t *
cgq_pred_net_new (const cgq_pred_shape_t *shape, uint64_t seed)
{
    cgq_pred_net_t *self = cgq_xcalloc (1, sizeof *self);
    self->shape = *shape;
    cgq_pred_shape_t *s = &self->shape;
    if (s->layers < 1)
        s->layers = 1;
    if (s->layers > CGQ_PRED_MAX_LAYERS)
        s->layers = CGQ_PRED_MAX_LAYERS;
    size_t at = 0;
    int d = s->in_dim;
    for (int l = 0; l < s->layers; l++) {
        s_layer_t *ly = &self->layer[l];
        ly->d = d;
        ly->cin = s->agg == CGQ_PRED_AGG_GCN ? d : 2 * d;
        ly->w = at;
        at += (size_t)ly->cin * (size_t)s->hidden;
        ly->b = at;
        at += (size_t)s->hidden;
        d = s->hidden;
    }
    self->w1 = at;
    at += (size_t)s->hidden * (size_t)s->hidden;
    self->b1 = at;
    at += (size_t)s->hidden;
    self->w2 = at;
    at += (size_t)s->hidden;
    self->b2 = at;
    at += 1;
    self->size = at;
    self->params = cgq_xcalloc (at, sizeof (float));
    self->grads = cgq_xcalloc (at, sizeof (float));
    self->m = cgq_xcalloc (at, sizeof (float));
    self->v = cgq_xcalloc (at, sizeof (float));
    uint64_t rng = seed * 0x2545f4914f6cdd1dULL + 1;
    for (int l = 0; l < s->layers; l++) {
        s_layer_t *ly = &self->layer[l];
        double bound = 1 / sqrt ((double)ly->d);
        s_init_uniform (self->params + ly->w, (size_t)ly->cin * (size_t)s->hidden, bound, &rng);
        s_init_uniform (self->params + ly->b, (size_t)s->hidden, bound, &rng);
    }
    double bound = 1 / sqrt ((double)s->hidden);
    s_init_uniform (self->params + self->w1, (size_t)s->hidden * (size_t)s->hidden, bound, &rng);
    s_init_uniform (self->params + self->b1, (size_t)s->hidden, bound, &rng);
    s_init_uniform (self->params + self->w2, (size_t)s->hidden, bound, &rng);
    s_init_uniform (self->params + self->b2, 1, bound, &rng);
    self->rng = rng;
    return self;
}

static void
s_free_buffers (cgq_pred_net_t *self)
{
    for (int l = 0; l < self->shape.layers; l++) {
        free (self->layer[l].c);
        free (self->layer[l].z);
        free (self->layer[l].mask);
        self->layer[l].c = self->layer[l].z = self->layer[l].mask = NULL;
        free (self->h[l + 1]);
        self->h[l + 1] = NULL;
    }
    free (self->dh);
    free (self->dh2);
    free (self->dc);
    free (self->dz);
    free (self->ones);
    free (self->u);
    free (self->wnode);
    free (self->du);
    self->dh = self->dh2 = self->dc = self->dz = self->ones = NULL;
    self->u = self->wnode = self->du = NULL;
    self->cap_n = 0;
}

static void
s_free_head (cgq_pred_net_t *self)
{
    free (self->g);
    free (self->z1);
    free (self->y1);
    free (self->mask1);
    free (self->dg);
    free (self->dz1);
    free (self->dy1);
    self->g = self->z1 = self->y1 = self->mask1 = self->dg = self->dz1 = self->dy1 = NULL;
    self->cap_b = 0;
}

void
cgq_pred_net_destroy (cgq_pred_net_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cgq_pred_net_t *self = *self_p;
    s_free_buffers (self);
    s_free_head (self);
    free (self->params);
    free (self->grads);
    free (self->m);
    free (self->v);
    free (self);
    *self_p = NULL;
}

const cgq_pred_shape_t *
cgq_pred_net_shape (const cgq_pred_net_t *self)
{
    return &self->shape;
}

size_t
cgq_pred_net_size (const cgq_pred_net_t *self)
{
    return self->size;
}

float *
cgq_pred_net_params (cgq_pred_net_t *self)
{
    return self->params;
}

float *
cgq_pred_net_grads (cgq_pred_net_t *self)
{
    return self->grads;
}

static float *
s_alloc (size_t n)
{
    return cgq_xmalloc ((n ? n : 1) * sizeof (float));
}

// s_reserve sizes the activation buffers for n nodes and b graphs.
static void
s_reserve (cgq_pred_net_t *self, int n, int b)
{
    const cgq_pred_shape_t *s = &self->shape;
    size_t hid = (size_t)s->hidden;
    if ((size_t)n > self->cap_n || (size_t)b > self->cap_n) {
        s_free_buffers (self);
        size_t cap = (size_t)(n > b ? n : b);
        cap += cap / 4;
        size_t wide = 0;
        for (int l = 0; l < s->layers; l++) {
            s_layer_t *ly = &self->layer[l];
            ly->c = s_alloc (cap * (size_t)ly->cin);
            ly->z = s_alloc (cap * hid);
            if (s->dropout > 0)
                ly->mask = s_alloc (cap * hid);
            self->h[l + 1] = s_alloc (cap * hid);
            if ((size_t)ly->cin > wide)
                wide = (size_t)ly->cin;
        }
        if (hid > wide)
            wide = hid;
        self->dh = s_alloc (cap * wide);
        self->dh2 = s_alloc (cap * wide);
        self->dc = s_alloc (cap * wide);
        self->dz = s_alloc (cap * hid);
        self->ones = s_alloc (cap);
        self->u = s_alloc (cap);
        self->wnode = s_alloc (cap);
        self->du = s_alloc (cap);
        for (size_t i = 0; i < cap; i++)
            self->ones[i] = 1.0f;
        self->cap_n = cap;
    }
    if ((size_t)b > self->cap_b) {
        s_free_head (self);
        size_t cap = (size_t)b + 8;
        self->g = s_alloc (cap * hid);
        self->z1 = s_alloc (cap * hid);
        self->y1 = s_alloc (cap * hid);
        self->mask1 = s_alloc (cap * hid);
        self->dg = s_alloc (cap * hid);
        self->dz1 = s_alloc (cap * hid);
        self->dy1 = s_alloc (cap * hid);
        self->cap_b = cap;
    }
}

// s_spmm: out (n x d, row stride ldo) = A h (h: n x d, stride ldh). A is
// sparse, so this is a gather loop rather than a dense product.
static void
s_spmm (const cgq_pred_batch_t *b, const float *h, int ldh, int d, float *out, int ldo)
{
    for (int i = 0; i < b->nodes; i++) {
        float *o = out + (size_t)i * ldo;
        memset (o, 0, (size_t)d * sizeof (float));
        for (int k = b->row_off[i]; k < b->row_off[i + 1]; k++) {
            const float *r = h + (size_t)b->col[k] * ldh;
            float a = b->val[k];
            for (int t = 0; t < d; t++)
                o[t] += a * r[t];
        }
    }
}

// s_spmm_t: out (n x d, stride ldo) += A^T g (g: n x d, stride ldg).
static void
s_spmm_t_add (const cgq_pred_batch_t *b, const float *g, int ldg, int d, float *out, int ldo)
{
    for (int i = 0; i < b->nodes; i++) {
        const float *r = g + (size_t)i * ldg;
        for (int k = b->row_off[i]; k < b->row_off[i + 1]; k++) {
            float *o = out + (size_t)b->col[k] * ldo;
            float a = b->val[k];
            for (int t = 0; t < d; t++)
                o[t] += a * r[t];
        }
    }
}

// s_linear: z (rows x out) = x (rows x in) W (in x out) + bias.
static void
s_linear (int rows, int in, int out, const float *x, const float *w, const float *bias, float *z)
{
    for (int i = 0; i < rows; i++)
        memcpy (z + (size_t)i * out, bias, (size_t)out * sizeof (float));
    cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, out, in, 1.0f, x, in, w, out,
                 1.0f, z, out);
}

// s_relu_dropout: y = relu (z) * mask (mask NULL: 1). With draw set, fills
// mask first: 0 with probability p, else 1 / (1 - p).
static void
s_relu_dropout (cgq_pred_net_t *self, size_t n, const float *z, float *mask, bool draw, float *y)
{
    if (mask && draw) {
        double p = self->shape.dropout;
        float keep = (float)(1 / (1 - p));
        for (size_t i = 0; i < n; i++)
            mask[i] = cgq_pred_rng_uniform (&self->rng) < p ? 0.0f : keep;
    }
    for (size_t i = 0; i < n; i++) {
        float v = z[i] > 0 ? z[i] : 0.0f;
        y[i] = mask && draw ? v * mask[i] : v;
    }
}

// s_relu_dropout_back: dz = dy * mask * (z > 0).
static void
s_relu_dropout_back (size_t n, const float *z, const float *mask, const float *dy, float *dz)
{
    for (size_t i = 0; i < n; i++)
        dz[i] = z[i] > 0 ? (mask ? dy[i] * mask[i] : dy[i]) : 0.0f;
}

void
cgq_pred_net_forward (cgq_pred_net_t *self, const cgq_pred_batch_t *b, bool train, float *pred)
{
    const cgq_pred_shape_t *s = &self->shape;
    int n = b->nodes, hid = s->hidden;
    bool drop = train && s->dropout > 0;
    s_reserve (self, n, s->additive ? n : b->graphs);
    self->h[0] = b->x;
    double flops = 0;
    for (int l = 0; l < s->layers; l++) {
        s_layer_t *ly = &self->layer[l];
        const float *h = self->h[l];
        if (s->agg == CGQ_PRED_AGG_GCN)
            s_spmm (b, h, ly->d, ly->d, ly->c, ly->cin);
        else {
            for (int i = 0; i < n; i++)
                memcpy (ly->c + (size_t)i * ly->cin, h + (size_t)i * ly->d,
                        (size_t)ly->d * sizeof (float));
            s_spmm (b, h, ly->d, ly->d, ly->c + ly->d, ly->cin);
        }
        s_linear (n, ly->cin, hid, ly->c, self->params + ly->w, self->params + ly->b, ly->z);
        flops += 2.0 * n * ly->cin * hid;
        s_relu_dropout (self, (size_t)n * hid, ly->z, ly->mask, drop, self->h[l + 1]);
    }
    const float *hl = self->h[s->layers];
    if (s->additive) {
        // Head on every node, then each graph's nodes summed in ms.
        s_linear (n, hid, hid, hl, self->params + self->w1, self->params + self->b1, self->z1);
        flops += 2.0 * n * hid * hid;
        s_relu_dropout (self, (size_t)n * hid, self->z1, drop ? self->mask1 : NULL, drop, self->y1);
        for (int i = 0; i < n; i++)
            self->u[i] = self->params[self->b2];
        cblas_sgemv (CblasRowMajor, CblasNoTrans, n, hid, 1.0f, self->y1, hid,
                     self->params + self->w2, 1, 1.0f, self->u, 1);
        flops += 2.0 * n * hid;
        double sig = s->y_std, shift = s->node_shift;
        for (int g = 0; g < b->graphs; g++) {
            int lo = b->graph_off[g], hi = b->graph_off[g + 1];
            if (s->log_target) {
                // log sum exp (sigma u_i), shifted by its largest term.
                double top = -INFINITY, sum = 0;
                for (int i = lo; i < hi; i++)
                    top = fmax (top, sig * self->u[i]);
                for (int i = lo; i < hi; i++)
                    sum += exp (sig * self->u[i] - top);
                double lse = hi > lo ? top + log (sum) : 0;
                for (int i = lo; i < hi; i++)
                    self->wnode[i] = (float)exp (sig * self->u[i] - lse);
                pred[g] = (float)((lse - shift) / sig);
            }
            else {
                double sum = 0;
                for (int i = lo; i < hi; i++) {
                    sum += self->u[i];
                    self->wnode[i] = 1.0f;
                }
                pred[g] = (float)(sum + ((hi - lo) * exp (-shift) - 1) * s->y_mean / sig);
            }
        }
        self->flops_fwd = flops;
        self->dropped = drop;
        return;
    }
    // Readout.
    for (int g = 0; g < b->graphs; g++) {
        float *o = self->g + (size_t)g * hid;
        memset (o, 0, (size_t)hid * sizeof (float));
        int lo = b->graph_off[g], hi = b->graph_off[g + 1];
        for (int i = lo; i < hi; i++)
            cblas_saxpy (hid, 1.0f, hl + (size_t)i * hid, 1, o, 1);
        if (s->readout_mean && hi > lo)
            cblas_sscal (hid, 1.0f / (float)(hi - lo), o, 1);
    }
    // Head.
    s_linear (b->graphs, hid, hid, self->g, self->params + self->w1, self->params + self->b1,
              self->z1);
    flops += 2.0 * b->graphs * hid * hid;
    s_relu_dropout (self, (size_t)b->graphs * hid, self->z1, drop ? self->mask1 : NULL, drop,
                    self->y1);
    for (int g = 0; g < b->graphs; g++)
        pred[g] = self->params[self->b2];
    cblas_sgemv (CblasRowMajor, CblasNoTrans, b->graphs, hid, 1.0f, self->y1, hid,
                 self->params + self->w2, 1, 1.0f, pred, 1);
    flops += 2.0 * b->graphs * hid;
    self->flops_fwd = flops;
    self->dropped = drop;
}

void
cgq_pred_net_reseed (cgq_pred_net_t *self, uint64_t seed)
{
    self->rng = seed;
}

double
cgq_pred_net_loss (const cgq_pred_batch_t *b, const float *pred, float *dpred)
{
    double sum = 0;
    for (int g = 0; g < b->graphs; g++) {
        double e = (double)pred[g] - b->target[g];
        sum += e * e;
        if (dpred)
            dpred[g] = (float)(2 * e / b->graphs);
    }
    return b->graphs ? sum / b->graphs : 0;
}

double
cgq_pred_net_node_loss (const cgq_pred_net_t *self, const cgq_pred_batch_t *b, double weight,
                        float *dnode)
{
    int count = 0;
    double sum = 0;
    for (int i = 0; i < b->nodes; i++)
        if (!isnan (b->node_target[i]))
            count++;
    for (int i = 0; i < b->nodes; i++) {
        double e = isnan (b->node_target[i]) ? 0 : (double)self->u[i] - b->node_target[i];
        sum += e * e;
        if (dnode)
            dnode[i] = count ? (float)(weight * 2 * e / count) : 0.0f;
    }
    return count ? weight * sum / count : 0;
}

const float *
cgq_pred_net_node_outputs (const cgq_pred_net_t *self)
{
    return self->shape.additive ? self->u : NULL;
}

int
cgq_pred_net_node_ms (const cgq_pred_net_t *self, int n, double *out)
{
    const cgq_pred_shape_t *s = &self->shape;
    if (!s->additive)
        return -1;
    double sig = s->y_std, mu = s->y_mean, shift = s->node_shift;
    for (int i = 0; i < n; i++)
        out[i] = s->log_target ? exp (sig * self->u[i] + mu - shift)
                               : sig * self->u[i] + mu * exp (-shift);
    return 0;
}

void
cgq_pred_net_backward (cgq_pred_net_t *self, const cgq_pred_batch_t *b, const float *dpred,
                       const float *dnode)
{
    const cgq_pred_shape_t *s = &self->shape;
    int n = b->nodes, B = b->graphs, hid = s->hidden;
    float *P = self->params, *G = self->grads;
    double flops = 0;
    // Head: out = y1 w2 + b2, per graph (out = pred) or, additive, per node
    // (out = u, and d loss / d u_i = dpred[g] d t_g / d u_i + dnode[i]).
    int rows = s->additive ? n : B;
    const float *dout = dpred;
    if (s->additive) {
        for (int g = 0; g < B; g++)
            for (int i = b->graph_off[g]; i < b->graph_off[g + 1]; i++)
                self->du[i] = dpred[g] * self->wnode[i] + (dnode ? dnode[i] : 0.0f);
        dout = self->du;
    }
    const float *hin = s->additive ? self->h[s->layers] : self->g;
    float *dhin = s->additive ? self->dh : self->dg;
    cblas_sgemv (CblasRowMajor, CblasTrans, rows, hid, 1.0f, self->y1, hid, dout, 1, 0.0f,
                 G + self->w2, 1);
    double db2 = 0;
    for (int r = 0; r < rows; r++)
        db2 += dout[r];
    G[self->b2] = (float)db2;
    memset (self->dy1, 0, (size_t)rows * hid * sizeof (float));
    cblas_sger (CblasRowMajor, rows, hid, 1.0f, dout, 1, P + self->w2, 1, self->dy1, hid);
    s_relu_dropout_back ((size_t)rows * hid, self->z1, self->dropped ? self->mask1 : NULL,
                         self->dy1, self->dz1);
    // z1 = in W1 + b1.
    cblas_sgemm (CblasRowMajor, CblasTrans, CblasNoTrans, hid, hid, rows, 1.0f, hin, hid, self->dz1,
                 hid, 0.0f, G + self->w1, hid);
    cblas_sgemv (CblasRowMajor, CblasTrans, rows, hid, 1.0f, self->dz1, hid, self->ones, 1, 0.0f,
                 G + self->b1, 1);
    cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasTrans, rows, hid, hid, 1.0f, self->dz1, hid,
                 P + self->w1, hid, 0.0f, dhin, hid);
    flops += 4.0 * rows * hid * hid;
    // Readout: every node of graph g gets dg[g] (/ its node count for mean).
    float *dh = self->dh;
    for (int g = 0; g < B && !s->additive; g++) {
        int lo = b->graph_off[g], hi = b->graph_off[g + 1];
        float scale = s->readout_mean && hi > lo ? 1.0f / (float)(hi - lo) : 1.0f;
        for (int i = lo; i < hi; i++) {
            float *o = dh + (size_t)i * hid;
            const float *d = self->dg + (size_t)g * hid;
            for (int t = 0; t < hid; t++)
                o[t] = d[t] * scale;
        }
    }
    // Layers, last to first; dh holds d loss / d h[l+1].
    for (int l = s->layers - 1; l >= 0; l--) {
        s_layer_t *ly = &self->layer[l];
        s_relu_dropout_back ((size_t)n * hid, ly->z, self->dropped ? ly->mask : NULL, dh, self->dz);
        cblas_sgemm (CblasRowMajor, CblasTrans, CblasNoTrans, ly->cin, hid, n, 1.0f, ly->c, ly->cin,
                     self->dz, hid, 0.0f, G + ly->w, hid);
        cblas_sgemv (CblasRowMajor, CblasTrans, n, hid, 1.0f, self->dz, hid, self->ones, 1, 0.0f,
                     G + ly->b, 1);
        flops += 2.0 * n * ly->cin * hid;
        if (l == 0)
            break; // the input features need no gradient
        cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasTrans, n, ly->cin, hid, 1.0f, self->dz, hid,
                     P + ly->w, hid, 0.0f, self->dc, ly->cin);
        flops += 2.0 * n * ly->cin * hid;
        float *dprev = self->dh2;
        int d = ly->d;
        if (s->agg == CGQ_PRED_AGG_GCN) {
            memset (dprev, 0, (size_t)n * d * sizeof (float));
            s_spmm_t_add (b, self->dc, ly->cin, d, dprev, d);
        }
        else {
            for (int i = 0; i < n; i++)
                memcpy (dprev + (size_t)i * d, self->dc + (size_t)i * ly->cin,
                        (size_t)d * sizeof (float));
            s_spmm_t_add (b, self->dc + d, ly->cin, d, dprev, d);
        }
        self->dh2 = dh;
        self->dh = dprev;
        dh = dprev;
    }
    self->flops_bwd = flops;
}

void
cgq_pred_net_adam (cgq_pred_net_t *self, double lr, double weight_decay)
{
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
    self->step++;
    double bc1 = 1 - pow (b1, (double)self->step);
    double bc2 = 1 - pow (b2, (double)self->step);
    double step = lr / bc1, sbc2 = sqrt (bc2);
    float *p = self->params, *g = self->grads, *m = self->m, *v = self->v;
    for (size_t i = 0; i < self->size; i++) {
        float gi = g[i] + (float)weight_decay * p[i];
        m[i] = (float)b1 * m[i] + (float)(1 - b1) * gi;
        v[i] = (float)b2 * v[i] + (float)(1 - b2) * gi * gi;
        p[i] -= (float)(step * m[i] / (sqrt ((double)v[i]) / sbc2 + eps));
    }
}

void
cgq_pred_net_flops (const cgq_pred_net_t *self, double *forward, double *backward)
{
    *forward = self->flops_fwd;
    *backward = self->flops_bwd;
}
