#include "gen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static const char *s_family_names[CGQ_CG_FAMILY_COUNT] = {
    [CGQ_CG_MOBILENETV2] = "mobilenetv2",
    [CGQ_CG_RESNET] = "resnet",
    [CGQ_CG_VGG] = "vgg",
    [CGQ_CG_SHUFFLENETV2] = "shufflenetv2",
    [CGQ_CG_SHUFFLENET] = "shufflenet",
};

const char *
cgq_cg_family_name (cgq_cg_family_t family)
{
    return (int) family >= 0 && family < CGQ_CG_FAMILY_COUNT ? s_family_names[family] : NULL;
}

int
cgq_cg_family_parse (const char *name, cgq_cg_family_t *family)
{
    for (int i = 0; i < CGQ_CG_FAMILY_COUNT; i++)
        if (strcmp (name, s_family_names[i]) == 0) {
            *family = (cgq_cg_family_t) i;
            return 0;
        }
    return -1;
}

const char *
cgq_cg_family_list (void)
{
    return "mobilenetv2, resnet, vgg, shufflenetv2, shufflenet";
}

void
cgq_cg_gen_opts_default (cgq_cg_gen_opts_t *opts)
{
    *opts = (cgq_cg_gen_opts_t){
        .family = CGQ_CG_MOBILENETV2,
        .seed = 0,
        .resolution = 0,
        .min_res = 32,
        .max_res = 128,
        .classes = 1000,
        .fold_bn = true,
    };
}

// A generator's state: the graph being built and the random stream.
typedef struct {
    cgq_cg_graph_t *g;
    uint64_t rng;
    bool fold_bn;
} s_gen_t;

// splitmix64: integer-only, so a seed gives the same model everywhere.
static uint64_t
s_next (s_gen_t *s)
{
    uint64_t z = (s->rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// s_int draws uniformly from [lo, hi].
static int
s_int (s_gen_t *s, int lo, int hi)
{
    return lo + (int) (s_next (s) % (uint64_t) (hi - lo + 1));
}

static int
s_pick (s_gen_t *s, const int *v, int n)
{
    return v[s_int (s, 0, n - 1)];
}

// s_kernel draws the kernel of a depthwise conv: 3 most often, as in the
// families' originals, but 5 and 7 cost little there (MnasNet, ProxylessNAS).
static int
s_kernel (s_gen_t *s)
{
    static const int k[] = {3, 3, 3, 5, 5, 7};
    return s_pick (s, k, 6);
}

// s_dense_kernel draws the kernel of a full conv on node x, where a 7x7
// costs 5x a 3x3 in FLOPs and weights: 5 and 7 are rarer, and never wider
// than the feature map (there they would mostly multiply padding).
static int
s_dense_kernel (s_gen_t *s, int x)
{
    static const int k[] = {3, 3, 3, 3, 3, 3, 5, 5, 7};
    int v = s_pick (s, k, 9);
    const cgq_cg_node_t *n = cgq_cg_graph_node (s->g, x);
    int h = n ? n->out.h : 3;
    while (v > 3 && v > h)
        v -= 2;
    return v;
}

// s_width scales channels c by pct/100 and rounds to a multiple of div,
// never below div nor more than 10% under the exact value (MobileNet's
// make_divisible, in integers).
static int
s_width (int c, int pct, int div)
{
    int v = c * pct;
    int r = (v + div * 50) / (div * 100) * div;
    if (r < div)
        r = div;
    if (r * 100 * 10 < v * 9)
        r += div;
    return r;
}

// s_jitter draws a per-stage channel factor in percent: the per-layer
// channel variation of the CG dataset's variants.
static int
s_jitter (s_gen_t *s, int pct)
{
    static const int j[] = {75, 90, 100, 100, 110, 125};
    return pct * s_pick (s, j, 6) / 100;
}

// s_conv_bn_act adds conv (+ batchnorm when not folded) (+ act if act is not
// CGQ_CG_INPUT). Returns the last node.
static int
s_conv_bn_act (s_gen_t *s, int in, int c, int k, int stride, int groups, cgq_cg_op_t act)
{
    int x = cgq_cg_graph_conv (s->g, in, c, k, stride, k / 2, groups, s->fold_bn);
    if (!s->fold_bn)
        x = cgq_cg_graph_unary (s->g, CGQ_CG_BATCHNORM, x);
    if (act != CGQ_CG_INPUT)
        x = cgq_cg_graph_unary (s->g, act, x);
    return x;
}

static int
s_channels (s_gen_t *s, int x)
{
    const cgq_cg_node_t *n = cgq_cg_graph_node (s->g, x);
    return n ? n->out.c : 1;
}

static int
s_head (s_gen_t *s, int x, int classes)
{
    x = cgq_cg_graph_unary (s->g, CGQ_CG_GLOBAL_AVGPOOL, x);
    return cgq_cg_graph_fc (s->g, x, classes);
}

static void
s_mobilenetv2 (s_gen_t *s, int x, int classes)
{
    static const int widths[] = {35, 50, 75, 100, 130, 140};
    int w = s_pick (s, widths, 6);
    // The activation of the later stages: relu6, or MobileNetV3's hswish.
    cgq_cg_op_t late_act = s_int (s, 0, 1) ? CGQ_CG_HSWISH : CGQ_CG_RELU6;
    x = s_conv_bn_act (s, x, s_width (32, w, 8), 3, 2, 1, CGQ_CG_RELU6);
    // Stage table of MobileNetV2: expansion, channels, blocks, stride.
    static const int stages[7][4] = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                                     {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
    static const int expansions[] = {3, 4, 6, 6};
    for (int st = 0; st < 7; st++) {
        int c = s_width (stages[st][1], s_jitter (s, w), 8);
        int n = stages[st][2] + (st > 0 && st < 6 ? s_int (s, -1, 1) : 0);
        if (n < 1)
            n = 1;
        cgq_cg_op_t act = st >= 4 ? late_act : CGQ_CG_RELU6;
        for (int b = 0; b < n; b++) {
            int stride = b == 0 ? stages[st][3] : 1;
            int t = st == 0 ? 1 : s_pick (s, expansions, 4);
            int k = s_kernel (s);
            int cin = s_channels (s, x);
            int h = x;
            if (t != 1)
                h = s_conv_bn_act (s, h, cin * t, 1, 1, 1, act);
            int ch = s_channels (s, h);
            h = s_conv_bn_act (s, h, ch, k, stride, ch, act);
            h = s_conv_bn_act (s, h, c, 1, 1, 1, CGQ_CG_INPUT); // linear bottleneck
            x = stride == 1 && cin == c ? cgq_cg_graph_add2 (s->g, x, h) : h;
        }
    }
    x = s_conv_bn_act (s, x, s_width (1280, w > 100 ? w : 100, 8), 1, 1, 1, late_act);
    s_head (s, x, classes);
}

static void
s_resnet (s_gen_t *s, int x, int classes)
{
    static const int widths[] = {25, 50, 75, 100};
    int w = s_pick (s, widths, 4);
    static const int stem_k[] = {3, 5, 7, 7};
    x = s_conv_bn_act (s, x, s_width (64, w, 8), s_pick (s, stem_k, 4), 2, 1, CGQ_CG_RELU);
    x = cgq_cg_graph_pool (s->g, CGQ_CG_MAXPOOL, x, 3, 2, 1);
    static const int chans[4] = {64, 128, 256, 512};
    static const int blocks[] = {1, 2, 2, 3};
    for (int st = 0; st < 4; st++) {
        int c = s_width (chans[st], s_jitter (s, w), 8);
        int n = s_pick (s, blocks, 4) + (st == 2 ? s_int (s, 0, 2) : 0);
        for (int b = 0; b < n; b++) {
            int stride = b == 0 && st > 0 ? 2 : 1;
            int k = s_dense_kernel (s, x);
            int h = s_conv_bn_act (s, x, c, k, stride, 1, CGQ_CG_RELU);
            h = s_conv_bn_act (s, h, c, k, 1, 1, CGQ_CG_INPUT);
            int shortcut = x;
            if (stride != 1 || s_channels (s, x) != c)
                shortcut = s_conv_bn_act (s, x, c, 1, stride, 1, CGQ_CG_INPUT);
            x = cgq_cg_graph_add2 (s->g, shortcut, h);
            x = cgq_cg_graph_unary (s->g, CGQ_CG_RELU, x);
        }
    }
    s_head (s, x, classes);
}

static void
s_vgg (s_gen_t *s, int x, int classes)
{
    // VGG is the heaviest family by far (VGG-16 is 31 GFLOPs at 224): its
    // variants are narrower, so that they run in milliseconds too.
    static const int widths[] = {13, 25, 38, 50};
    int w = s_pick (s, widths, 4);
    static const int chans[5] = {64, 128, 256, 512, 512};
    static const int convs[5][2] = {{1, 2}, {1, 2}, {2, 3}, {2, 3}, {2, 3}};
    for (int st = 0; st < 5; st++) {
        int c = s_width (chans[st], s_jitter (s, w), 8);
        int n = s_int (s, convs[st][0], convs[st][1]);
        for (int i = 0; i < n; i++)
            x = s_conv_bn_act (s, x, c, s_dense_kernel (s, x), 1, 1, CGQ_CG_RELU);
        x = cgq_cg_graph_pool (s->g, CGQ_CG_MAXPOOL, x, 2, 2, 0);
    }
    // VGG's 4096-wide classifier over a flattened 7x7 map is 100M+ weights;
    // a global pool and one hidden layer keep the variants runnable.
    static const int hidden[] = {256, 512, 1024};
    x = cgq_cg_graph_unary (s->g, CGQ_CG_GLOBAL_AVGPOOL, x);
    x = cgq_cg_graph_fc (s->g, x, s_pick (s, hidden, 3));
    x = cgq_cg_graph_unary (s->g, CGQ_CG_RELU, x);
    cgq_cg_graph_fc (s->g, x, classes);
}

static void
s_shufflenetv2 (s_gen_t *s, int x, int classes)
{
    // Output channels of the three stages at widths 0.5, 1.0, 1.5, 2.0.
    static const int chans[4][3] = {
        {48, 96, 192}, {116, 232, 464}, {176, 352, 704}, {244, 488, 976}};
    static const int repeats[3] = {4, 8, 4};
    const int *ch = chans[s_int (s, 0, 3)];
    x = s_conv_bn_act (s, x, 24, 3, 2, 1, CGQ_CG_RELU);
    x = cgq_cg_graph_pool (s->g, CGQ_CG_MAXPOOL, x, 3, 2, 1);
    for (int st = 0; st < 3; st++) {
        // Even, so that the split and the two branches halve it exactly.
        int c = s_width (ch[st], s_jitter (s, 100), 4);
        int half = c / 2;
        int n = repeats[st] + s_int (s, -2, 1);
        for (int b = 0; b < n; b++) {
            int k = s_kernel (s);
            int left, right;
            if (b == 0) {
                // Downsampling unit: both branches see the whole input.
                int cin = s_channels (s, x);
                left = s_conv_bn_act (s, x, cin, k, 2, cin, CGQ_CG_INPUT);
                left = s_conv_bn_act (s, left, half, 1, 1, 1, CGQ_CG_RELU);
                right = s_conv_bn_act (s, x, half, 1, 1, 1, CGQ_CG_RELU);
                right = s_conv_bn_act (s, right, half, k, 2, half, CGQ_CG_INPUT);
            }
            else {
                left = cgq_cg_graph_slice (s->g, x, 0, half);
                right = cgq_cg_graph_slice (s->g, x, half, half);
                right = s_conv_bn_act (s, right, half, 1, 1, 1, CGQ_CG_RELU);
                right = s_conv_bn_act (s, right, half, k, 1, half, CGQ_CG_INPUT);
            }
            right = s_conv_bn_act (s, right, half, 1, 1, 1, CGQ_CG_RELU);
            int both[2] = {left, right};
            x = cgq_cg_graph_concat (s->g, both, 2);
            x = cgq_cg_graph_shuffle (s->g, x, 2);
        }
    }
    x = s_conv_bn_act (s, x, ch[2] > 500 ? 2048 : 1024, 1, 1, 1, CGQ_CG_RELU);
    s_head (s, x, classes);
}

static void
s_shufflenet (s_gen_t *s, int x, int classes)
{
    // ShuffleNet v1's stage-2 channels per group count (width 1.0).
    static const int groups[] = {2, 3, 4, 8};
    static const int stage2[] = {200, 240, 272, 384};
    static const int widths[] = {50, 100, 150};
    int gi = s_int (s, 0, 3);
    int g = groups[gi];
    int w = s_pick (s, widths, 3);
    x = s_conv_bn_act (s, x, 24, 3, 2, 1, CGQ_CG_RELU);
    x = cgq_cg_graph_pool (s->g, CGQ_CG_MAXPOOL, x, 3, 2, 1);
    static const int repeats[3] = {4, 8, 4};
    for (int st = 0; st < 3; st++) {
        // A multiple of 4g: the bottleneck (a quarter) must split into g groups.
        int c = s_width (stage2[gi] << st, s_jitter (s, w), 4 * g);
        int n = repeats[st] + s_int (s, -2, 1);
        for (int b = 0; b < n; b++) {
            int k = s_kernel (s);
            int cin = s_channels (s, x);
            int stride = b == 0 ? 2 : 1;
            int out = stride == 2 ? c - cin : c; // the stride-2 unit concatenates its input
            int mid = c / 4;
            // The first 1x1 of the network is not grouped: 24 input channels.
            int g1 = st == 0 && b == 0 ? 1 : g;
            int h = s_conv_bn_act (s, x, mid, 1, 1, g1, CGQ_CG_RELU);
            h = cgq_cg_graph_shuffle (s->g, h, g1);
            h = s_conv_bn_act (s, h, mid, k, stride, mid, CGQ_CG_INPUT);
            h = s_conv_bn_act (s, h, out, 1, 1, g, CGQ_CG_INPUT);
            if (stride == 2) {
                int pooled = cgq_cg_graph_pool (s->g, CGQ_CG_AVGPOOL, x, 3, 2, 1);
                int both[2] = {pooled, h};
                x = cgq_cg_graph_concat (s->g, both, 2);
            }
            else
                x = cgq_cg_graph_add2 (s->g, x, h);
            x = cgq_cg_graph_unary (s->g, CGQ_CG_RELU, x);
        }
    }
    s_head (s, x, classes);
}

cgq_cg_graph_t *
cgq_cg_gen (const cgq_cg_gen_opts_t *opts, char *err, size_t err_len)
{
    if ((int) opts->family < 0 || opts->family >= CGQ_CG_FAMILY_COUNT) {
        snprintf (err, err_len, "unknown family %d (expected one of: %s)", (int) opts->family,
                  cgq_cg_family_list ());
        return NULL;
    }
    if (opts->classes < 1 || opts->classes > 100000) {
        snprintf (err, err_len, "classes %d is not in [1, 100000]", opts->classes);
        return NULL;
    }
    s_gen_t s = {.rng = opts->seed, .fold_bn = opts->fold_bn};
    // Mix the family in, so that two families with one seed are unrelated.
    s.rng ^= 0x51ed270b2f6a3c01ull * (uint64_t) (opts->family + 1);
    int res = opts->resolution;
    // The resolution is the first draw, made even when it is given, so that
    // the rest of the model (drawn after it) depends on family, seed and
    // resolution only, whichever way the resolution was chosen: the name
    // FAMILY-sSEED-rRES then names one graph (cgq-predictor export rebuilds
    // measured models from their names and params).
    if (res != 0)
        (void) s_next (&s);
    if (res == 0) {
        int lo = (opts->min_res + 31) / 32, hi = opts->max_res / 32;
        if (opts->min_res < 32 || opts->max_res > 1024 || lo > hi) {
            snprintf (err, err_len,
                      "resolution range [%d, %d] holds no multiple of 32 in [32, "
                      "1024]",
                      opts->min_res, opts->max_res);
            return NULL;
        }
        res = 32 * s_int (&s, lo, hi);
    }
    else if (res < 32 || res > 1024) {
        // Five stride-2 stages take 32 down to 1; less would not fit them.
        snprintf (err, err_len, "resolution %d is not in [32, 1024]", res);
        return NULL;
    }
    char *name = cgq_xasprintf ("%s-s%llu-r%d", s_family_names[opts->family],
                                (unsigned long long) opts->seed, res);
    s.g = cgq_cg_graph_new (name);
    free (name);
    int x = cgq_cg_graph_input (s.g, 3, res, res);
    switch (opts->family) {
    case CGQ_CG_MOBILENETV2: s_mobilenetv2 (&s, x, opts->classes); break;
    case CGQ_CG_RESNET: s_resnet (&s, x, opts->classes); break;
    case CGQ_CG_VGG: s_vgg (&s, x, opts->classes); break;
    case CGQ_CG_SHUFFLENETV2: s_shufflenetv2 (&s, x, opts->classes); break;
    case CGQ_CG_SHUFFLENET: s_shufflenet (&s, x, opts->classes); break;
    default: break;
    }
    if (cgq_cg_graph_failed (s.g)) {
        // A bug in a family's builder, not a bad option: say which model.
        snprintf (err, err_len,
                  "generating %s: %s (a bug in cg/gen.c; report the family, seed "
                  "and resolution)",
                  cgq_cg_graph_name (s.g), cgq_cg_graph_errstr (s.g));
        cgq_cg_graph_destroy (&s.g);
        return NULL;
    }
    return s.g;
}
