// The engine's kernels against slow, obvious references written here in
// double precision: conv2d (im2col + sgemm, 1x1 direct, depthwise, groups),
// fc, pools, add, concat, shuffle, slice, activations and batchnorm; and the
// buffer planner against an engine that keeps every node's output.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>

#include "engine.h"
#include "gen.h"
#include "graph.h"
#include "util.h"

// s_engine makes an engine that keeps every output, for graph g.
static cgq_cg_engine_t *
s_engine (const cgq_cg_graph_t *g)
{
    assert_false (cgq_cg_graph_failed (g));
    cgq_cg_engine_opts_t o;
    cgq_cg_engine_opts_default (&o);
    o.keep_all = true;
    o.seed = 7;
    char err[256];
    cgq_cg_engine_t *e = cgq_cg_engine_new (g, &o, err, sizeof err);
    if (!e)
        fail_msg ("cgq_cg_engine_new: %s", err);
    return e;
}

static const float *
s_out (cgq_cg_engine_t *e, int id, size_t want)
{
    size_t n = 0;
    const float *y = cgq_cg_engine_output (e, id, &n);
    assert_non_null (y);
    assert_int_equal (n, want);
    return y;
}

// s_check_close asserts max|got - want| <= 1e-4 * max|want|: relative to the
// tensor's scale, since single elements near zero come from sums that cancel.
static void
s_check_close (const float *got, const double *want, size_t n, const char *what)
{
    double scale = 1e-30, diff = 0;
    size_t worst = 0;
    for (size_t i = 0; i < n; i++) {
        scale = fmax (scale, fabs (want[i]));
        if (fabs (got[i] - want[i]) > diff) {
            diff = fabs (got[i] - want[i]);
            worst = i;
        }
    }
    if (diff > 1e-4 * scale)
        fail_msg ("%s: element %zu is %.8g, expected %.8g (max diff %.3g, scale %.3g)", what, worst,
                  got[worst], want[worst], diff, scale);
}

// ---------------------------------------------------------------------------
// conv2d

typedef struct {
    int cin, h, w, cout, k, stride, pad, groups;
    bool bias;
} s_conv_case_t;

static void
s_ref_conv (const s_conv_case_t *c, const float *x, const float *wt, int ho, int wo, double *y)
{
    int cin_g = c->cin / c->groups, cout_g = c->cout / c->groups;
    const float *bias = wt + (size_t) c->cout * cin_g * c->k * c->k;
    for (int co = 0; co < c->cout; co++) {
        int g = co / cout_g;
        for (int oy = 0; oy < ho; oy++)
            for (int ox = 0; ox < wo; ox++) {
                double acc = c->bias ? bias[co] : 0.0;
                for (int ci = 0; ci < cin_g; ci++)
                    for (int ky = 0; ky < c->k; ky++)
                        for (int kx = 0; kx < c->k; kx++) {
                            int iy = oy * c->stride - c->pad + ky;
                            int ix = ox * c->stride - c->pad + kx;
                            if (iy < 0 || iy >= c->h || ix < 0 || ix >= c->w)
                                continue;
                            double xv = x[((size_t) (g * cin_g + ci) * c->h + iy) * c->w + ix];
                            double wv = wt[(((size_t) co * cin_g + ci) * c->k + ky) * c->k + kx];
                            acc += xv * wv;
                        }
                y[((size_t) co * ho + oy) * wo + ox] = acc;
            }
    }
}

static void
test_conv_matches_direct (void **state)
{
    static const s_conv_case_t cases[] = {
        // cin h  w cout k s p g bias
        {3, 8, 8, 4, 1, 1, 0, 1, true},      // 1x1: sgemm on the input itself
        {4, 7, 9, 6, 1, 2, 0, 1, false},     // 1x1 stride 2: through im2col
        {3, 10, 10, 8, 3, 1, 1, 1, true},    // the common 3x3 "same"
        {5, 11, 9, 7, 3, 2, 1, 1, false},    // stride 2 on odd sizes
        {4, 9, 9, 6, 5, 2, 2, 1, true},      // 5x5 stride 2
        {2, 6, 7, 3, 5, 1, 0, 1, true},      // 5x5 without padding
        {3, 5, 5, 2, 7, 1, 3, 1, false},     // a kernel larger than half the input
        {6, 8, 8, 6, 3, 1, 1, 6, true},      // depthwise
        {8, 9, 9, 8, 5, 2, 2, 8, false},     // depthwise 5x5 stride 2
        {5, 6, 6, 5, 7, 1, 3, 5, true},      // depthwise 7x7 on a small map
        {6, 8, 8, 4, 3, 1, 1, 2, true},      // 2 groups
        {8, 6, 6, 16, 3, 2, 0, 4, false},    // 4 groups, stride 2, no pad
        {4, 6, 6, 8, 3, 1, 1, 4, true},      // groups = cin, two outputs per group
        {16, 5, 5, 24, 1, 1, 0, 4, true},    // grouped 1x1 (ShuffleNet)
        {32, 12, 12, 48, 3, 1, 1, 1, false}, // big enough for sgemm's blocked path
    };
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        const s_conv_case_t *c = &cases[t];
        cgq_cg_graph_t *g = cgq_cg_graph_new ("conv");
        int x = cgq_cg_graph_input (g, c->cin, c->h, c->w);
        int y = cgq_cg_graph_conv (g, x, c->cout, c->k, c->stride, c->pad, c->groups, c->bias);
        assert_int_equal (y, 1);
        const cgq_cg_node_t *node = cgq_cg_graph_node (g, y);
        int ho = (c->h + 2 * c->pad - c->k) / c->stride + 1;
        int wo = (c->w + 2 * c->pad - c->k) / c->stride + 1;
        assert_int_equal (node->out.h, ho);
        assert_int_equal (node->out.w, wo);
        cgq_cg_engine_t *e = s_engine (g);
        assert_int_equal (cgq_cg_engine_run (e), 0);
        size_t nin, nw;
        const float *in = cgq_cg_engine_input (e, &nin);
        const float *wt = cgq_cg_engine_params (e, y, &nw);
        assert_int_equal (nin, (size_t) c->cin * c->h * c->w);
        assert_int_equal (nw, (size_t) node->params);
        size_t nout = (size_t) c->cout * ho * wo;
        double *want = cgq_xmalloc (sizeof (double) * nout);
        s_ref_conv (c, in, wt, ho, wo, want);
        char what[128];
        snprintf (what, sizeof what, "conv case %zu (cin %d k %d s %d p %d g %d)", t, c->cin, c->k,
                  c->stride, c->pad, c->groups);
        s_check_close (s_out (e, y, nout), want, nout, what);
        free (want);
        cgq_cg_engine_destroy (&e);
        assert_null (e);
        cgq_cg_graph_destroy (&g);
    }
}

// ---------------------------------------------------------------------------
// fc, pools

static void
test_fc (void **state)
{
    // fc over a [1,C,H,W] input flattens it; fc after global pooling.
    cgq_cg_graph_t *g = cgq_cg_graph_new ("fc");
    int x = cgq_cg_graph_input (g, 4, 3, 5);
    int f1 = cgq_cg_graph_fc (g, x, 7);
    int f2 = cgq_cg_graph_fc (g, f1, 300);
    cgq_cg_engine_t *e = s_engine (g);
    cgq_cg_engine_run (e);
    const float *in = cgq_cg_engine_input (e, NULL);
    int sizes[2][2] = {{60, 7}, {7, 300}};
    const float *ins[2] = {in, s_out (e, f1, 7)};
    int ids[2] = {f1, f2};
    for (int t = 0; t < 2; t++) {
        int nin = sizes[t][0], nout = sizes[t][1];
        const float *w = cgq_cg_engine_params (e, ids[t], NULL);
        double *want = cgq_xmalloc (sizeof (double) * (size_t) nout);
        for (int o = 0; o < nout; o++) {
            double acc = w[(size_t) nout * nin + o];
            for (int i = 0; i < nin; i++)
                acc += (double) w[(size_t) o * nin + i] * ins[t][i];
            want[o] = acc;
        }
        s_check_close (s_out (e, ids[t], (size_t) nout), want, (size_t) nout, "fc");
        free (want);
    }
    cgq_cg_engine_destroy (&e);
    cgq_cg_graph_destroy (&g);
}

static void
s_ref_pool (bool max, const float *x, int c, int h, int w, int k, int s, int p, double *y)
{
    int ho = (h + 2 * p - k) / s + 1, wo = (w + 2 * p - k) / s + 1;
    for (int ci = 0; ci < c; ci++)
        for (int oy = 0; oy < ho; oy++)
            for (int ox = 0; ox < wo; ox++) {
                double acc = max ? -1e300 : 0;
                int count = 0;
                for (int ky = 0; ky < k; ky++)
                    for (int kx = 0; kx < k; kx++) {
                        int iy = oy * s - p + ky, ix = ox * s - p + kx;
                        if (iy < 0 || iy >= h || ix < 0 || ix >= w)
                            continue;
                        double v = x[((size_t) ci * h + iy) * w + ix];
                        acc = max ? fmax (acc, v) : acc + v;
                        count++;
                    }
                y[((size_t) ci * ho + oy) * wo + ox] = max ? acc : acc / count;
            }
}

static void
test_pools (void **state)
{
    // k, stride, pad on a 3x9x7 input: edge windows that the padding cuts.
    static const int cases[][3] = {{3, 2, 1}, {2, 2, 0}, {3, 1, 1}, {5, 3, 2}, {1, 1, 0}};
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++)
        for (int max = 0; max < 2; max++) {
            int k = cases[t][0], s = cases[t][1], p = cases[t][2];
            cgq_cg_graph_t *g = cgq_cg_graph_new ("pool");
            int x = cgq_cg_graph_input (g, 3, 9, 7);
            int y = cgq_cg_graph_pool (g, max ? CGQ_CG_MAXPOOL : CGQ_CG_AVGPOOL, x, k, s, p);
            int gap = cgq_cg_graph_unary (g, CGQ_CG_GLOBAL_AVGPOOL, x);
            cgq_cg_engine_t *e = s_engine (g);
            cgq_cg_engine_run (e);
            const float *in = cgq_cg_engine_input (e, NULL);
            const cgq_cg_node_t *node = cgq_cg_graph_node (g, y);
            size_t n = (size_t) 3 * node->out.h * node->out.w;
            double *want = cgq_xmalloc (sizeof (double) * n);
            s_ref_pool (max, in, 3, 9, 7, k, s, p, want);
            char what[64];
            snprintf (what, sizeof what, "%s k %d s %d p %d", max ? "maxpool" : "avgpool", k, s, p);
            s_check_close (s_out (e, y, n), want, n, what);
            double mean[3] = {0, 0, 0};
            for (int c = 0; c < 3; c++) {
                for (int i = 0; i < 63; i++)
                    mean[c] += in[c * 63 + i];
                mean[c] /= 63;
            }
            s_check_close (s_out (e, gap, 3), mean, 3, "global_avgpool");
            free (want);
            cgq_cg_engine_destroy (&e);
            cgq_cg_graph_destroy (&g);
        }
}

// ---------------------------------------------------------------------------
// add, concat, shuffle, slice, activations, batchnorm

static void
test_elementwise_and_channels (void **state)
{
    enum { C = 12, H = 3, W = 5, HW = H * W, N = C * HW };
    cgq_cg_graph_t *g = cgq_cg_graph_new ("misc");
    int x = cgq_cg_graph_input (g, C, H, W);
    // Scale the input up so that relu6's and hswish's clipping is reached.
    int c = cgq_cg_graph_conv (g, x, C, 1, 1, 0, 1, true);
    int bn = cgq_cg_graph_unary (g, CGQ_CG_BATCHNORM, c);
    int acts[4];
    cgq_cg_op_t ops[4] = {CGQ_CG_RELU, CGQ_CG_RELU6, CGQ_CG_SIGMOID, CGQ_CG_HSWISH};
    for (int i = 0; i < 4; i++)
        acts[i] = cgq_cg_graph_unary (g, ops[i], bn);
    int add = cgq_cg_graph_add2 (g, acts[0], bn);
    int self_add = cgq_cg_graph_add2 (g, bn, bn);
    int cat_in[3] = {acts[1], x, acts[1]};
    int cat = cgq_cg_graph_concat (g, cat_in, 3);
    int shuf = cgq_cg_graph_shuffle (g, bn, 3);
    int slice = cgq_cg_graph_slice (g, bn, 5, 4);
    cgq_cg_engine_t *e = s_engine (g);
    // Widen the values: weights x 8 puts many of them past 6 and below -3.
    size_t nw;
    float *w = cgq_cg_engine_params (e, c, &nw);
    for (size_t i = 0; i < nw; i++)
        w[i] *= 8;
    cgq_cg_engine_run (e);
    const float *in = cgq_cg_engine_input (e, NULL);
    const float *cv = s_out (e, c, N);
    const float *bnv = s_out (e, bn, N);
    const float *bnp = cgq_cg_engine_params (e, bn, NULL);
    double want[3 * N];
    // batchnorm
    for (int ch = 0; ch < C; ch++)
        for (int i = 0; i < HW; i++)
            want[ch * HW + i] = (double) cv[ch * HW + i] * bnp[ch] + bnp[C + ch];
    s_check_close (bnv, want, N, "batchnorm");
    int clipped = 0;
    for (int i = 0; i < N; i++)
        clipped += bnv[i] > 6 || bnv[i] < -3;
    assert_true (clipped > N / 8); // the activations' corners are exercised
    // activations
    for (int a = 0; a < 4; a++) {
        for (int i = 0; i < N; i++) {
            double v = bnv[i];
            switch (ops[a]) {
            case CGQ_CG_RELU: want[i] = v > 0 ? v : 0; break;
            case CGQ_CG_RELU6: want[i] = fmin (fmax (v, 0), 6); break;
            case CGQ_CG_SIGMOID: want[i] = 1 / (1 + exp (-v)); break;
            default: want[i] = v * fmin (fmax (v + 3, 0), 6) / 6; break;
            }
        }
        s_check_close (s_out (e, acts[a], N), want, N, cgq_cg_op_name (ops[a]));
    }
    const float *relu = s_out (e, acts[0], N), *relu6 = s_out (e, acts[1], N);
    // add
    for (int i = 0; i < N; i++)
        want[i] = (double) relu[i] + bnv[i];
    s_check_close (s_out (e, add, N), want, N, "add");
    for (int i = 0; i < N; i++)
        want[i] = 2.0 * bnv[i];
    s_check_close (s_out (e, self_add, N), want, N, "add of a node to itself");
    // concat: channels in input order
    for (int i = 0; i < N; i++) {
        want[i] = relu6[i];
        want[N + i] = in[i];
        want[2 * N + i] = relu6[i];
    }
    s_check_close (s_out (e, cat, 3 * N), want, 3 * N, "concat");
    // shuffle, 3 groups of 4: output channel j*3 + gi is input channel gi*4 + j
    for (int gi = 0; gi < 3; gi++)
        for (int j = 0; j < 4; j++)
            for (int i = 0; i < HW; i++)
                want[(j * 3 + gi) * HW + i] = bnv[(gi * 4 + j) * HW + i];
    s_check_close (s_out (e, shuf, N), want, N, "shuffle");
    // the first output channels of the shuffle, spelled out: 0, 4, 8, 1, ...
    const float *sv = s_out (e, shuf, N);
    assert_memory_equal (sv + 1 * HW, bnv + 4 * HW, sizeof (float) * HW);
    assert_memory_equal (sv + 3 * HW, bnv + 1 * HW, sizeof (float) * HW);
    // slice
    for (int i = 0; i < 4 * HW; i++)
        want[i] = bnv[5 * HW + i];
    s_check_close (s_out (e, slice, 4 * HW), want, 4 * HW, "slice");
    cgq_cg_engine_destroy (&e);
    cgq_cg_graph_destroy (&g);
}

// ---------------------------------------------------------------------------
// buffer planning

// s_branchy builds a graph whose elementwise ops read values that later
// nodes read again, so that working in place would destroy them.
static cgq_cg_graph_t *
s_branchy (void)
{
    cgq_cg_graph_t *g = cgq_cg_graph_new ("branchy");
    int x = cgq_cg_graph_input (g, 4, 6, 6);
    int c = cgq_cg_graph_conv (g, x, 8, 3, 1, 1, 1, true);
    int r = cgq_cg_graph_unary (g, CGQ_CG_RELU, c);       // c is read again below
    int a = cgq_cg_graph_add2 (g, c, r);                  // so is c
    int h = cgq_cg_graph_unary (g, CGQ_CG_HSWISH, a);     // and a
    int a2 = cgq_cg_graph_add2 (g, h, c);                 // the last read of c
    int bn = cgq_cg_graph_unary (g, CGQ_CG_BATCHNORM, x); // never over the input
    int ins[3] = {a2, a, r};
    int cat = cgq_cg_graph_concat (g, ins, 3);
    int p = cgq_cg_graph_conv (g, cat, 4, 1, 1, 0, 1, false);
    int s = cgq_cg_graph_add2 (g, p, bn);
    int gap = cgq_cg_graph_unary (g, CGQ_CG_GLOBAL_AVGPOOL, s);
    cgq_cg_graph_fc (g, gap, 10);
    return g;
}

// Reusing buffers and working in place must not change any result: the
// outputs of generated models (and of s_branchy) equal those of an engine
// that keeps every node's output, run after run.
static void
test_buffer_reuse_keeps_results (void **state)
{
    for (int f = 0; f <= CGQ_CG_FAMILY_COUNT; f++) {
        cgq_cg_gen_opts_t go;
        cgq_cg_gen_opts_default (&go);
        go.family = (cgq_cg_family_t) (f % CGQ_CG_FAMILY_COUNT);
        go.seed = 11;
        go.resolution = 32;
        go.fold_bn = f % 2 == 0;
        go.classes = 10;
        char err[256];
        cgq_cg_graph_t *g =
            f < CGQ_CG_FAMILY_COUNT ? cgq_cg_gen (&go, err, sizeof err) : s_branchy ();
        assert_non_null (g);
        assert_false (cgq_cg_graph_failed (g));
        cgq_cg_engine_opts_t o;
        cgq_cg_engine_opts_default (&o);
        cgq_cg_engine_t *reuse = cgq_cg_engine_new (g, &o, err, sizeof err);
        o.keep_all = true;
        cgq_cg_engine_t *all = cgq_cg_engine_new (g, &o, err, sizeof err);
        assert_non_null (reuse);
        assert_non_null (all);
        assert_true (cgq_cg_engine_bytes (reuse) < cgq_cg_engine_bytes (all));
        int last = cgq_cg_graph_size (g) - 1;
        size_t n;
        // Reused: an inner node's output is gone; the graph's output stays.
        assert_null (cgq_cg_engine_output (reuse, 1, &n));
        assert_int_equal (n, 0);
        for (int run = 0; run < 2; run++) {
            cgq_cg_engine_run (reuse);
            cgq_cg_engine_run (all);
            size_t n1, n2;
            const float *a = cgq_cg_engine_output (reuse, last, &n1);
            const float *b = cgq_cg_engine_output (all, last, &n2);
            assert_int_equal (n1, (size_t) go.classes);
            assert_int_equal (n1, n2);
            assert_memory_equal (a, b, sizeof (float) * n1);
            bool finite = true, nonzero = false;
            for (size_t i = 0; i < n1; i++) {
                finite = finite && isfinite (a[i]);
                nonzero = nonzero || a[i] != 0;
            }
            assert_true (finite);
            assert_true (nonzero);
        }
        cgq_cg_engine_destroy (&reuse);
        cgq_cg_engine_destroy (&all);
        cgq_cg_graph_destroy (&g);
    }
}

static void
test_bench_and_errors (void **state)
{
    cgq_cg_graph_t *g = cgq_cg_graph_new ("small");
    int x = cgq_cg_graph_input (g, 3, 16, 16);
    cgq_cg_graph_conv (g, x, 8, 3, 1, 1, 1, true);
    cgq_cg_engine_t *e = cgq_cg_engine_new (g, NULL, NULL, 0);
    assert_non_null (e);
    double ms[3] = {-1, -1, -1};
    assert_int_equal (cgq_cg_engine_bench (e, 1, 3, ms), 0);
    for (int i = 0; i < 3; i++)
        assert_true (ms[i] >= 0 && ms[i] < 10000);
    assert_null (cgq_cg_engine_params (e, 0, NULL)); // the input has none
    cgq_cg_engine_destroy (&e);
    cgq_cg_engine_destroy (&e); // NULL-safe

    // A graph whose building failed is refused, with its reason.
    cgq_cg_graph_add2 (g, 0, 1);
    char err[256];
    assert_null (cgq_cg_engine_new (g, NULL, err, sizeof err));
    assert_non_null (strstr (err, "add of different shapes"));
    cgq_cg_graph_destroy (&g);
}

// Per-op timing: a node time per node, the input's 0, the node sum within
// the run's wall time, the results the same as without it, and runs past
// the room kept run without being kept.
static void
test_op_timing (void **state)
{
    char err[256];
    cgq_cg_gen_opts_t go;
    cgq_cg_gen_opts_default (&go);
    go.family = CGQ_CG_MOBILENETV2;
    go.seed = 2;
    go.resolution = 64;
    cgq_cg_graph_t *g = cgq_cg_gen (&go, err, sizeof err);
    assert_non_null (g);
    cgq_cg_engine_t *e = cgq_cg_engine_new (g, NULL, err, sizeof err);
    assert_non_null (e);
    int n = cgq_cg_engine_nodes (e);
    assert_int_equal (n, cgq_cg_graph_size (g));
    size_t len;
    cgq_cg_engine_run (e);
    const float *y = cgq_cg_engine_output (e, n - 1, &len);
    float *plain = cgq_xmalloc (sizeof (float) * len);
    memcpy (plain, y, sizeof (float) * len);

    double *med = cgq_xcalloc ((size_t) n, sizeof (double));
    assert_int_equal (cgq_cg_engine_op_medians (e, med), 0); // off: nothing kept
    cgq_cg_engine_op_timing (e, 3);
    cgq_cg_engine_run (e); // a warm-up, then forgotten
    cgq_cg_engine_op_reset (e);
    double ms[5];
    cgq_cg_engine_bench (e, 0, 5, ms); // 2 past the room kept
    assert_int_equal (cgq_cg_engine_op_medians (e, med), 3);
    assert_memory_equal (cgq_cg_engine_output (e, n - 1, NULL), plain, sizeof (float) * len);
    assert_true (med[0] == 0);
    double sum = 0;
    for (int i = 0; i < n; i++) {
        assert_true (med[i] >= 0 && isfinite (med[i]));
        sum += med[i];
    }
    // A median of 3 is at most their sum, so the node medians add up to at
    // most the 3 kept runs' wall times together; and to something.
    assert_true (sum > 0);
    assert_true (sum <= ms[0] + ms[1] + ms[2]);
    assert_true (cgq_cg_timer_overhead_ms () >= 0 && cgq_cg_timer_overhead_ms () < 1);
    cgq_cg_engine_op_timing (e, 0); // off again
    cgq_cg_engine_run (e);
    assert_int_equal (cgq_cg_engine_op_medians (e, med), 0);
    free (med);
    free (plain);
    cgq_cg_engine_destroy (&e);
    cgq_cg_graph_destroy (&g);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_conv_matches_direct),
        cmocka_unit_test (test_fc),
        cmocka_unit_test (test_pools),
        cmocka_unit_test (test_elementwise_and_channels),
        cmocka_unit_test (test_buffer_reuse_keeps_results),
        cmocka_unit_test (test_bench_and_errors),
        cmocka_unit_test (test_op_timing),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
