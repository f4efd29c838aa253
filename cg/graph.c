#include "graph.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "util.h"

// The largest tensor a node may produce, in elements: big enough for any
// ImageNet CNN at batch 1, small enough that sizes never overflow an int.
#define S_MAX_ELEMS (1 << 28)

struct cgq_cg_graph_t {
    char *name;
    cgq_cg_node_t *nodes;
    int size;
    int cap;
    int edges;
    int64_t flops;
    int64_t params;
    bool failed;
    char errstr[256];
};

static const char *s_op_names[CGQ_CG_OP_COUNT] = {
    [CGQ_CG_INPUT] = "input",
    [CGQ_CG_CONV2D] = "conv2d",
    [CGQ_CG_RELU] = "relu",
    [CGQ_CG_RELU6] = "relu6",
    [CGQ_CG_SIGMOID] = "sigmoid",
    [CGQ_CG_HSWISH] = "hswish",
    [CGQ_CG_BATCHNORM] = "batchnorm",
    [CGQ_CG_MAXPOOL] = "maxpool",
    [CGQ_CG_AVGPOOL] = "avgpool",
    [CGQ_CG_GLOBAL_AVGPOOL] = "global_avgpool",
    [CGQ_CG_FC] = "fc",
    [CGQ_CG_ADD] = "add",
    [CGQ_CG_CONCAT] = "concat",
    [CGQ_CG_SHUFFLE] = "shuffle",
    [CGQ_CG_SLICE] = "slice",
};

// Which attributes each op reads; the JSON reader and writer use the same table.
enum {
    S_A_SHAPE = 1 << 0,
    S_A_CHANNELS = 1 << 1,
    S_A_KERNEL = 1 << 2,
    S_A_STRIDE = 1 << 3,
    S_A_PAD = 1 << 4,
    S_A_GROUPS = 1 << 5,
    S_A_OFFSET = 1 << 6,
    S_A_BIAS = 1 << 7,
};

static int
s_op_attrs (cgq_cg_op_t op)
{
    switch (op) {
    case CGQ_CG_INPUT: return S_A_SHAPE;
    case CGQ_CG_CONV2D:
        return S_A_CHANNELS | S_A_KERNEL | S_A_STRIDE | S_A_PAD | S_A_GROUPS | S_A_BIAS;
    case CGQ_CG_MAXPOOL:
    case CGQ_CG_AVGPOOL: return S_A_KERNEL | S_A_STRIDE | S_A_PAD;
    case CGQ_CG_FC: return S_A_CHANNELS;
    case CGQ_CG_SHUFFLE: return S_A_GROUPS;
    case CGQ_CG_SLICE: return S_A_OFFSET | S_A_CHANNELS;
    default: return 0;
    }
}

const char *
cgq_cg_op_name (cgq_cg_op_t op)
{
    return (int) op >= 0 && op < CGQ_CG_OP_COUNT ? s_op_names[op] : NULL;
}

int
cgq_cg_op_parse (const char *name, cgq_cg_op_t *op)
{
    for (int i = 0; i < CGQ_CG_OP_COUNT; i++)
        if (strcmp (name, s_op_names[i]) == 0) {
            *op = (cgq_cg_op_t) i;
            return 0;
        }
    return -1;
}

cgq_cg_graph_t *
cgq_cg_graph_new (const char *name)
{
    cgq_cg_graph_t *self = cgq_xcalloc (1, sizeof *self);
    self->name = cgq_xstrdup (name ? name : "");
    return self;
}

void
cgq_cg_graph_destroy (cgq_cg_graph_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cgq_cg_graph_t *self = *self_p;
    for (int i = 0; i < self->size; i++)
        free (self->nodes[i].inputs);
    free (self->nodes);
    free (self->name);
    free (self);
    *self_p = NULL;
}

static int s_fail (cgq_cg_graph_t *self, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));

static int
s_fail (cgq_cg_graph_t *self, const char *fmt, ...)
{
    if (self->failed)
        return -1; // keep the first reason
    int id = self->size;
    int n = snprintf (self->errstr, sizeof self->errstr, "node %d: ", id);
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (self->errstr + n, sizeof self->errstr - n, fmt, ap);
    va_end (ap);
    self->failed = true;
    return -1;
}

static int64_t
s_elems (cgq_cg_shape_t s)
{
    return (int64_t) s.c * s.h * s.w;
}

// s_infer checks node's attributes against its inputs' shapes and fills
// node->out, flops and params. Returns 0, or -1 via s_fail.
static int
s_infer (cgq_cg_graph_t *self, cgq_cg_node_t *node)
{
    const char *name = s_op_names[node->op];
    int nin = node->ninputs;
    int want = node->op == CGQ_CG_INPUT ? 0 : node->op == CGQ_CG_ADD ? 2 : 1;
    if (node->op == CGQ_CG_CONCAT) {
        if (nin < 1)
            return s_fail (self, "concat needs at least one input");
    }
    else if (nin != want)
        return s_fail (self, "%s takes %d input%s, not %d", name, want, want == 1 ? "" : "s", nin);
    if (node->op == CGQ_CG_INPUT && self->size != 0)
        return s_fail (self, "an input node must be node 0 (a graph has one input)");
    if (node->op != CGQ_CG_INPUT && self->size == 0)
        return s_fail (self, "the first node must be the input, not %s", name);
    for (int i = 0; i < nin; i++)
        if (node->inputs[i] < 0 || node->inputs[i] >= self->size)
            return s_fail (self,
                           "%s input %d is node %d, which does not exist (inputs must be "
                           "added before the nodes that read them)",
                           name, i, node->inputs[i]);

    cgq_cg_shape_t in = {0, 0, 0, 0};
    if (nin > 0)
        in = self->nodes[node->inputs[0]].out;
    cgq_cg_shape_t out = in;
    int64_t flops = 0, params = 0;
    switch (node->op) {
    case CGQ_CG_INPUT:
        out = node->out;
        out.rank = 4;
        if (out.c < 1 || out.h < 1 || out.w < 1)
            return s_fail (self, "input shape %dx%dx%d must be positive", out.c, out.h, out.w);
        break;
    case CGQ_CG_CONV2D:
    case CGQ_CG_MAXPOOL:
    case CGQ_CG_AVGPOOL: {
        bool conv = node->op == CGQ_CG_CONV2D;
        if (in.rank != 4)
            return s_fail (self, "%s needs a [1,C,H,W] input, not [1,%d]", name, in.c);
        if (node->kernel < 1 || node->stride < 1 || node->pad < 0)
            return s_fail (self,
                           "%s kernel %d, stride %d, pad %d: kernel and stride must be >= 1, "
                           "pad >= 0",
                           name, node->kernel, node->stride, node->pad);
        if (!conv && node->pad > node->kernel / 2)
            return s_fail (self,
                           "%s pad %d is more than half the kernel %d (a window would lie "
                           "wholly in the padding)",
                           name, node->pad, node->kernel);
        int hp = in.h + 2 * node->pad, wp = in.w + 2 * node->pad;
        if (hp < node->kernel || wp < node->kernel)
            return s_fail (self, "%s kernel %d is larger than the padded input %dx%d", name,
                           node->kernel, hp, wp);
        out.h = (hp - node->kernel) / node->stride + 1;
        out.w = (wp - node->kernel) / node->stride + 1;
        if (!conv) {
            flops = s_elems (out) * node->kernel * node->kernel;
            break;
        }
        int g = node->groups;
        if (g < 1 || node->channels < 1)
            return s_fail (self, "conv2d channels %d and groups %d must be >= 1", node->channels,
                           g);
        if (in.c % g || node->channels % g)
            return s_fail (self,
                           "conv2d groups %d must divide both the %d input and the %d output "
                           "channels",
                           g, in.c, node->channels);
        out.c = node->channels;
        int64_t k2 = (int64_t) node->kernel * node->kernel;
        params = (int64_t) out.c * (in.c / g) * k2 + (node->bias ? out.c : 0);
        flops = 2 * s_elems (out) * (in.c / g) * k2;
        break;
    }
    case CGQ_CG_RELU:
    case CGQ_CG_RELU6:
    case CGQ_CG_SIGMOID:
    case CGQ_CG_HSWISH: flops = s_elems (out); break;
    case CGQ_CG_BATCHNORM:
        flops = 2 * s_elems (out);
        params = 2 * (int64_t) out.c;
        break;
    case CGQ_CG_GLOBAL_AVGPOOL:
        if (in.rank != 4)
            return s_fail (self, "global_avgpool needs a [1,C,H,W] input, not [1,%d]", in.c);
        flops = s_elems (in);
        out = (cgq_cg_shape_t){2, in.c, 1, 1};
        break;
    case CGQ_CG_FC: {
        if (node->channels < 1)
            return s_fail (self, "fc features %d must be >= 1", node->channels);
        int64_t fan_in = s_elems (in);
        out = (cgq_cg_shape_t){2, node->channels, 1, 1};
        params = fan_in * node->channels + node->channels;
        flops = 2 * fan_in * node->channels;
        break;
    }
    case CGQ_CG_ADD: {
        cgq_cg_shape_t b = self->nodes[node->inputs[1]].out;
        if (memcmp (&in, &b, sizeof in) != 0)
            return s_fail (self,
                           "add of different shapes: node %d is %dx%dx%d, node %d is "
                           "%dx%dx%d",
                           node->inputs[0], in.c, in.h, in.w, node->inputs[1], b.c, b.h, b.w);
        flops = s_elems (out);
        break;
    }
    case CGQ_CG_CONCAT:
        out.c = 0;
        for (int i = 0; i < nin; i++) {
            cgq_cg_shape_t s = self->nodes[node->inputs[i]].out;
            if (s.rank != in.rank || s.h != in.h || s.w != in.w)
                return s_fail (self,
                               "concat of node %d (%dx%d) with node %d (%dx%d): spatial "
                               "sizes differ",
                               node->inputs[0], in.h, in.w, node->inputs[i], s.h, s.w);
            if (out.c > S_MAX_ELEMS - s.c)
                return s_fail (self, "concat has too many channels");
            out.c += s.c;
        }
        break;
    case CGQ_CG_SHUFFLE:
        if (node->groups < 1 || in.c % node->groups)
            return s_fail (self, "shuffle groups %d must be >= 1 and divide the %d channels",
                           node->groups, in.c);
        break;
    case CGQ_CG_SLICE:
        if (node->offset < 0 || node->channels < 1 || node->offset > in.c - node->channels)
            return s_fail (self, "slice of channels [%d, %d) is not inside the %d channels",
                           node->offset, node->offset + node->channels, in.c);
        out.c = node->channels;
        break;
    default: return s_fail (self, "unknown op %d", (int) node->op);
    }
    if (s_elems (out) > S_MAX_ELEMS)
        return s_fail (self, "%s output %dx%dx%d has more than %d elements", name, out.c, out.h,
                       out.w, S_MAX_ELEMS);
    node->in = node->op == CGQ_CG_INPUT ? out : in;
    node->out = out;
    node->flops = flops;
    node->params = params;
    return 0;
}

int
cgq_cg_graph_add (cgq_cg_graph_t *self, const cgq_cg_node_t *spec)
{
    if (self->failed)
        return -1;
    if ((int) spec->op < 0 || spec->op >= CGQ_CG_OP_COUNT)
        return s_fail (self, "unknown op %d", (int) spec->op);
    if (spec->ninputs < 0 || spec->ninputs > 4096)
        return s_fail (self, "%s has %d inputs", s_op_names[spec->op], spec->ninputs);
    // Keep only the attributes of this op, so that two equal models compare
    // equal whatever junk their specs held.
    int attrs = s_op_attrs (spec->op);
    cgq_cg_node_t node = {.op = spec->op, .ninputs = spec->ninputs};
    if (attrs & S_A_SHAPE)
        node.out = spec->out;
    if (attrs & S_A_CHANNELS)
        node.channels = spec->channels;
    if (attrs & S_A_KERNEL)
        node.kernel = spec->kernel;
    if (attrs & S_A_STRIDE)
        node.stride = spec->stride;
    if (attrs & S_A_PAD)
        node.pad = spec->pad;
    if (attrs & S_A_GROUPS)
        node.groups = spec->op == CGQ_CG_CONV2D && spec->groups == 0 ? 1 : spec->groups;
    if (attrs & S_A_OFFSET)
        node.offset = spec->offset;
    if (attrs & S_A_BIAS)
        node.bias = spec->bias;
    node.inputs = cgq_xmalloc (sizeof (int) * (size_t) (spec->ninputs ? spec->ninputs : 1));
    for (int i = 0; i < spec->ninputs; i++)
        node.inputs[i] = spec->inputs[i];
    if (s_infer (self, &node) < 0) {
        free (node.inputs);
        return -1;
    }
    if (self->size == self->cap) {
        self->cap = self->cap ? 2 * self->cap : 32;
        self->nodes = cgq_xrealloc (self->nodes, sizeof *self->nodes * (size_t) self->cap);
    }
    self->nodes[self->size] = node;
    self->edges += node.ninputs;
    self->flops += node.flops;
    self->params += node.params;
    return self->size++;
}

int
cgq_cg_graph_input (cgq_cg_graph_t *self, int c, int h, int w)
{
    cgq_cg_node_t spec = {.op = CGQ_CG_INPUT, .out = {4, c, h, w}};
    return cgq_cg_graph_add (self, &spec);
}

int
cgq_cg_graph_conv (cgq_cg_graph_t *self, int in, int channels, int kernel, int stride, int pad,
                   int groups, bool bias)
{
    cgq_cg_node_t spec = {.op = CGQ_CG_CONV2D,
                          .inputs = &in,
                          .ninputs = 1,
                          .channels = channels,
                          .kernel = kernel,
                          .stride = stride,
                          .pad = pad,
                          .groups = groups,
                          .bias = bias};
    return cgq_cg_graph_add (self, &spec);
}

int
cgq_cg_graph_unary (cgq_cg_graph_t *self, cgq_cg_op_t op, int in)
{
    if (op != CGQ_CG_RELU && op != CGQ_CG_RELU6 && op != CGQ_CG_SIGMOID && op != CGQ_CG_HSWISH &&
        op != CGQ_CG_BATCHNORM && op != CGQ_CG_GLOBAL_AVGPOOL)
        return s_fail (self, "cgq_cg_graph_unary cannot add op %d", (int) op);
    cgq_cg_node_t spec = {.op = op, .inputs = &in, .ninputs = 1};
    return cgq_cg_graph_add (self, &spec);
}

int
cgq_cg_graph_pool (cgq_cg_graph_t *self, cgq_cg_op_t op, int in, int kernel, int stride, int pad)
{
    if (op != CGQ_CG_MAXPOOL && op != CGQ_CG_AVGPOOL)
        return s_fail (self, "cgq_cg_graph_pool cannot add op %d", (int) op);
    cgq_cg_node_t spec = {
        .op = op, .inputs = &in, .ninputs = 1, .kernel = kernel, .stride = stride, .pad = pad};
    return cgq_cg_graph_add (self, &spec);
}

int
cgq_cg_graph_fc (cgq_cg_graph_t *self, int in, int features)
{
    cgq_cg_node_t spec = {.op = CGQ_CG_FC, .inputs = &in, .ninputs = 1, .channels = features};
    return cgq_cg_graph_add (self, &spec);
}

int
cgq_cg_graph_add2 (cgq_cg_graph_t *self, int a, int b)
{
    int ins[2] = {a, b};
    cgq_cg_node_t spec = {.op = CGQ_CG_ADD, .inputs = ins, .ninputs = 2};
    return cgq_cg_graph_add (self, &spec);
}

int
cgq_cg_graph_concat (cgq_cg_graph_t *self, const int *ins, int n)
{
    cgq_cg_node_t spec = {.op = CGQ_CG_CONCAT, .inputs = (int *) ins, .ninputs = n};
    return cgq_cg_graph_add (self, &spec);
}

int
cgq_cg_graph_shuffle (cgq_cg_graph_t *self, int in, int groups)
{
    cgq_cg_node_t spec = {.op = CGQ_CG_SHUFFLE, .inputs = &in, .ninputs = 1, .groups = groups};
    return cgq_cg_graph_add (self, &spec);
}

int
cgq_cg_graph_slice (cgq_cg_graph_t *self, int in, int offset, int count)
{
    cgq_cg_node_t spec = {
        .op = CGQ_CG_SLICE, .inputs = &in, .ninputs = 1, .offset = offset, .channels = count};
    return cgq_cg_graph_add (self, &spec);
}

bool
cgq_cg_graph_failed (const cgq_cg_graph_t *self)
{
    return self->failed;
}

const char *
cgq_cg_graph_errstr (const cgq_cg_graph_t *self)
{
    return self->errstr;
}

const char *
cgq_cg_graph_name (const cgq_cg_graph_t *self)
{
    return self->name;
}

int
cgq_cg_graph_size (const cgq_cg_graph_t *self)
{
    return self->size;
}

const cgq_cg_node_t *
cgq_cg_graph_node (const cgq_cg_graph_t *self, int id)
{
    return id >= 0 && id < self->size ? &self->nodes[id] : NULL;
}

int
cgq_cg_graph_edge_count (const cgq_cg_graph_t *self)
{
    return self->edges;
}

int64_t
cgq_cg_graph_flops (const cgq_cg_graph_t *self)
{
    return self->flops;
}

int64_t
cgq_cg_graph_params (const cgq_cg_graph_t *self)
{
    return self->params;
}

bool
cgq_cg_graph_equal (const cgq_cg_graph_t *a, const cgq_cg_graph_t *b)
{
    if (a->size != b->size)
        return false;
    for (int i = 0; i < a->size; i++) {
        const cgq_cg_node_t *x = &a->nodes[i], *y = &b->nodes[i];
        if (x->op != y->op || x->ninputs != y->ninputs || x->channels != y->channels ||
            x->kernel != y->kernel || x->stride != y->stride || x->pad != y->pad ||
            x->groups != y->groups || x->offset != y->offset || x->bias != y->bias ||
            memcmp (&x->out, &y->out, sizeof x->out) != 0)
            return false;
        for (int j = 0; j < x->ninputs; j++)
            if (x->inputs[j] != y->inputs[j])
                return false;
    }
    return true;
}

int
cgq_cg_node_code (const cgq_cg_node_t *node)
{
    // Depthwise: every group maps one input channel to one output channel.
    if (node->op == CGQ_CG_CONV2D && node->groups > 1 && node->groups == node->channels &&
        node->groups == node->in.c)
        return CGQ_CG_CODE_DWCONV2D;
    return (int) node->op;
}

const char *
cgq_cg_node_kind (const cgq_cg_node_t *node)
{
    return cgq_cg_node_code (node) == CGQ_CG_CODE_DWCONV2D ? "dwconv2d" : s_op_names[node->op];
}

// s_shape_feats writes a shape as the CG dataset does: TensorFlow's NHWC
// order padded with zeros to 5 numbers, [1,H,W,C,0] or [1,C,0,0,0].
static void
s_shape_feats (cgq_cg_shape_t s, double *f)
{
    f[0] = 1;
    if (s.rank == 4) {
        f[1] = s.h;
        f[2] = s.w;
        f[3] = s.c;
    }
    else {
        f[1] = s.c;
        f[2] = 0;
        f[3] = 0;
    }
    f[4] = 0;
}

int
cgq_cg_graph_features (const cgq_cg_graph_t *self, int id, double *f)
{
    const cgq_cg_node_t *n = cgq_cg_graph_node (self, id);
    if (!n)
        return -1;
    memset (f, 0, sizeof (double) * CGQ_CG_NUM_FEATS);
    f[0] = cgq_cg_node_code (n);
    cgq_cg_shape_t in = n->in;
    s_shape_feats (in, f + 1);
    switch (n->op) {
    case CGQ_CG_CONV2D:
        f[6] = n->kernel;
        f[7] = n->kernel;
        f[8] = in.c / n->groups;
        f[9] = n->channels;
        f[10] = n->stride;
        f[11] = n->stride;
        break;
    case CGQ_CG_MAXPOOL:
    case CGQ_CG_AVGPOOL:
        f[6] = n->kernel;
        f[7] = n->kernel;
        f[10] = n->stride;
        f[11] = n->stride;
        break;
    case CGQ_CG_FC:
        f[6] = 1;
        f[7] = 1;
        f[8] = (double) s_elems (in);
        f[9] = n->channels;
        break;
    default: break;
    }
    s_shape_feats (n->out, f + 12);
    return 0;
}

// ---------------------------------------------------------------------------
// model.json

#define S_FORMAT "cgq-cg-model"
#define S_VERSION 1

char *
cgq_cg_graph_to_json (const cgq_cg_graph_t *self)
{
    cgq_buf_t b;
    cgq_buf_init (&b);
    json_t *head =
        json_pack ("{s:s, s:i, s:s}", "format", S_FORMAT, "version", S_VERSION, "name", self->name);
    if (!head) // a name that is not UTF-8; the model is still worth writing
        head = json_pack ("{s:s, s:i, s:s}", "format", S_FORMAT, "version", S_VERSION, "name", "");
    cgq_json_append (&b, head, true);
    json_decref (head);
    // Drop the closing brace to append the nodes, one per line for diffs.
    b.data[--b.len] = 0;
    cgq_buf_puts (&b, ", \"nodes\": [\n");
    for (int i = 0; i < self->size; i++) {
        const cgq_cg_node_t *n = &self->nodes[i];
        int attrs = s_op_attrs (n->op);
        json_t *o = json_object ();
        json_object_set_new (o, "op", json_string (s_op_names[n->op]));
        if (n->ninputs > 0) {
            json_t *ins = json_array ();
            for (int j = 0; j < n->ninputs; j++)
                json_array_append_new (ins, json_integer (n->inputs[j]));
            json_object_set_new (o, "inputs", ins);
        }
        if (attrs & S_A_SHAPE)
            json_object_set_new (o, "shape", json_pack ("[i,i,i]", n->out.c, n->out.h, n->out.w));
        if (attrs & S_A_CHANNELS)
            json_object_set_new (o, "channels", json_integer (n->channels));
        if (attrs & S_A_KERNEL)
            json_object_set_new (o, "kernel", json_integer (n->kernel));
        if (attrs & S_A_STRIDE)
            json_object_set_new (o, "stride", json_integer (n->stride));
        if (attrs & S_A_PAD)
            json_object_set_new (o, "pad", json_integer (n->pad));
        if (attrs & S_A_GROUPS)
            json_object_set_new (o, "groups", json_integer (n->groups));
        if (attrs & S_A_OFFSET)
            json_object_set_new (o, "offset", json_integer (n->offset));
        if (attrs & S_A_BIAS)
            json_object_set_new (o, "bias", json_boolean (n->bias));
        cgq_buf_puts (&b, "  ");
        cgq_json_append (&b, o, true);
        json_decref (o);
        cgq_buf_puts (&b, i + 1 < self->size ? ",\n" : "\n");
    }
    cgq_buf_puts (&b, "]}\n");
    return cgq_buf_take (&b);
}

// s_get_int reads key of o into *v when present (optional keeps the default
// otherwise). Returns 0, or -1 with err filled.
static int
s_get_int (json_t *o, const char *key, bool optional, int *v, const char *where, char *err,
           size_t err_len)
{
    json_t *x = json_object_get (o, key);
    if (!x) {
        if (optional)
            return 0;
        snprintf (err, err_len, "%s: missing \"%s\"", where, key);
        return -1;
    }
    if (!json_is_integer (x) || json_integer_value (x) < -1000000000 ||
        json_integer_value (x) > 1000000000) {
        snprintf (err, err_len, "%s: \"%s\" must be an integer", where, key);
        return -1;
    }
    *v = (int) json_integer_value (x);
    return 0;
}

// s_node_from_json fills spec (inputs in *ins, which the caller frees) from
// node object o. Returns 0, or -1 with err filled.
static int
s_node_from_json (json_t *o, const char *where, cgq_cg_node_t *spec, int **ins, char *err,
                  size_t err_len)
{
    if (!json_is_object (o)) {
        snprintf (err, err_len, "%s: a node must be an object", where);
        return -1;
    }
    const char *opname = json_string_value (json_object_get (o, "op"));
    if (!opname) {
        snprintf (err, err_len, "%s: missing \"op\" (a string such as \"conv2d\")", where);
        return -1;
    }
    memset (spec, 0, sizeof *spec);
    if (cgq_cg_op_parse (opname, &spec->op) < 0) {
        cgq_buf_t ops;
        cgq_buf_init (&ops);
        for (int i = 0; i < CGQ_CG_OP_COUNT; i++)
            cgq_buf_printf (&ops, "%s%s", i ? ", " : "", s_op_names[i]);
        snprintf (err, err_len, "%s: unknown op '%s' (expected one of: %s)", where, opname,
                  ops.data);
        cgq_buf_fini (&ops);
        return -1;
    }
    int attrs = s_op_attrs (spec->op);
    const char *key;
    json_t *val;
    json_object_foreach (o, key, val)
    {
        int a = !strcmp (key, "shape")      ? S_A_SHAPE
                : !strcmp (key, "channels") ? S_A_CHANNELS
                : !strcmp (key, "kernel")   ? S_A_KERNEL
                : !strcmp (key, "stride")   ? S_A_STRIDE
                : !strcmp (key, "pad")      ? S_A_PAD
                : !strcmp (key, "groups")   ? S_A_GROUPS
                : !strcmp (key, "offset")   ? S_A_OFFSET
                : !strcmp (key, "bias")     ? S_A_BIAS
                                            : 0;
        bool known = !strcmp (key, "op") || !strcmp (key, "inputs") || (a & attrs);
        if (!known) {
            snprintf (err, err_len, "%s: %s has no \"%s\" (remove it)", where, opname, key);
            return -1;
        }
    }
    json_t *jins = json_object_get (o, "inputs");
    if (jins && !json_is_array (jins)) {
        snprintf (err, err_len, "%s: \"inputs\" must be an array of node ids", where);
        return -1;
    }
    size_t nin = jins ? json_array_size (jins) : 0;
    *ins = cgq_xmalloc (sizeof (int) * (nin ? nin : 1));
    for (size_t i = 0; i < nin; i++) {
        json_t *x = json_array_get (jins, i);
        if (!json_is_integer (x) || json_integer_value (x) < 0 ||
            json_integer_value (x) > 1000000000) {
            snprintf (err, err_len, "%s: \"inputs\"[%zu] must be a node id", where, i);
            return -1;
        }
        (*ins)[i] = (int) json_integer_value (x);
    }
    spec->inputs = *ins;
    spec->ninputs = (int) nin;
    spec->stride = 1;
    spec->groups = 1;
    if (attrs & S_A_SHAPE) {
        json_t *s = json_object_get (o, "shape");
        if (!json_is_array (s) || json_array_size (s) != 3 ||
            !json_is_integer (json_array_get (s, 0)) || !json_is_integer (json_array_get (s, 1)) ||
            !json_is_integer (json_array_get (s, 2))) {
            snprintf (err, err_len, "%s: input needs \"shape\": [C, H, W]", where);
            return -1;
        }
        spec->out.rank = 4;
        spec->out.c = (int) json_integer_value (json_array_get (s, 0));
        spec->out.h = (int) json_integer_value (json_array_get (s, 1));
        spec->out.w = (int) json_integer_value (json_array_get (s, 2));
    }
    bool need_groups = spec->op == CGQ_CG_SHUFFLE;
    if (((attrs & S_A_CHANNELS) &&
         s_get_int (o, "channels", false, &spec->channels, where, err, err_len) < 0) ||
        ((attrs & S_A_KERNEL) &&
         s_get_int (o, "kernel", false, &spec->kernel, where, err, err_len) < 0) ||
        ((attrs & S_A_STRIDE) &&
         s_get_int (o, "stride", true, &spec->stride, where, err, err_len) < 0) ||
        ((attrs & S_A_PAD) && s_get_int (o, "pad", true, &spec->pad, where, err, err_len) < 0) ||
        ((attrs & S_A_GROUPS) &&
         s_get_int (o, "groups", !need_groups, &spec->groups, where, err, err_len) < 0) ||
        ((attrs & S_A_OFFSET) &&
         s_get_int (o, "offset", true, &spec->offset, where, err, err_len) < 0))
        return -1;
    if (attrs & S_A_BIAS) {
        json_t *b = json_object_get (o, "bias");
        if (b && !json_is_boolean (b)) {
            snprintf (err, err_len, "%s: \"bias\" must be true or false", where);
            return -1;
        }
        spec->bias = b && json_is_true (b);
    }
    return 0;
}

cgq_cg_graph_t *
cgq_cg_graph_from_json (const char *text, const char *source, char *err, size_t err_len)
{
    json_error_t jerr;
    json_t *root = json_loads (text, 0, &jerr);
    if (!root) {
        snprintf (err, err_len, "%s:%d:%d: %s (is it a model written by cgq-cg gen?)", source,
                  jerr.line, jerr.column, jerr.text);
        return NULL;
    }
    cgq_cg_graph_t *g = NULL;
    const char *format = json_string_value (json_object_get (root, "format"));
    json_t *version = json_object_get (root, "version");
    json_t *nodes = json_object_get (root, "nodes");
    if (!format || strcmp (format, S_FORMAT) != 0) {
        snprintf (err, err_len,
                  "%s: not a cgq-cg model (\"format\" is not \"%s\"; make one with "
                  "cgq-cg gen)",
                  source, S_FORMAT);
        goto out;
    }
    if (!json_is_integer (version) || json_integer_value (version) != S_VERSION) {
        snprintf (err, err_len,
                  "%s: model version %s is not %d, the one this cgq-cg reads (use "
                  "the cgq-cg that wrote it)",
                  source, json_is_integer (version) ? "other" : "missing", S_VERSION);
        goto out;
    }
    if (!json_is_array (nodes) || json_array_size (nodes) == 0) {
        snprintf (err, err_len, "%s: \"nodes\" must be a non-empty array", source);
        goto out;
    }
    const char *name = json_string_value (json_object_get (root, "name"));
    g = cgq_cg_graph_new (name);
    for (size_t i = 0; i < json_array_size (nodes); i++) {
        char where[512];
        snprintf (where, sizeof where, "%s: node %zu", source, i);
        cgq_cg_node_t spec;
        int *ins = NULL;
        int rc = s_node_from_json (json_array_get (nodes, i), where, &spec, &ins, err, err_len);
        if (rc == 0 && cgq_cg_graph_add (g, &spec) < 0) {
            snprintf (err, err_len, "%s: %s (fix that node; cgq-cg gen writes valid models)",
                      source, g->errstr);
            rc = -1;
        }
        free (ins);
        if (rc < 0) {
            cgq_cg_graph_destroy (&g);
            break;
        }
    }
out:
    json_decref (root);
    return g;
}

int
cgq_cg_graph_save (const cgq_cg_graph_t *self, const char *path, char *err, size_t err_len)
{
    char *text = cgq_cg_graph_to_json (self);
    FILE *f = fopen (path, "w");
    if (!f) {
        snprintf (err, err_len,
                  "cannot write %s: %s (check the directory exists and is "
                  "writable)",
                  path, strerror (errno));
        free (text);
        return -1;
    }
    size_t len = strlen (text);
    bool ok = fwrite (text, 1, len, f) == len;
    ok = fclose (f) == 0 && ok;
    free (text);
    if (!ok) {
        snprintf (err, err_len, "cannot write %s: %s (check free disk space)", path,
                  strerror (errno));
        return -1;
    }
    return 0;
}

cgq_cg_graph_t *
cgq_cg_graph_load (const char *path, char *err, size_t err_len)
{
    FILE *f = fopen (path, "r");
    if (!f) {
        snprintf (err, err_len,
                  "cannot read %s: %s (check the path; cgq-cg gen --out %s makes "
                  "one)",
                  path, strerror (errno), path);
        return NULL;
    }
    cgq_buf_t b;
    cgq_buf_init (&b);
    int rc = cgq_buf_read (&b, f);
    int saved = errno;
    fclose (f);
    if (rc < 0) {
        snprintf (err, err_len, "cannot read %s: %s", path, strerror (saved));
        cgq_buf_fini (&b);
        return NULL;
    }
    cgq_cg_graph_t *g = cgq_cg_graph_from_json (b.data, path, err, err_len);
    cgq_buf_fini (&b);
    return g;
}
