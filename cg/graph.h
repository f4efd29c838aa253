// graph: a CNN for batch-1 inference as a DAG of ops (conv2d, activations,
// batchnorm, pools, fully connected, add, concat, channel shuffle, channel
// slice), with shape inference, FLOPs and parameter counts, the 17 numbers per
// node that the CG dataset stores (see cg/README.md), and a model.json format.
//
// Nodes are added in topological order: a node's inputs must already exist,
// so node ids are a valid execution order and no sort is ever needed. Node 0
// is the one input. The graph owns its nodes; cgq_cg_graph_node returns a
// pointer borrowed until the graph is destroyed.
#ifndef CGQ_CG_GRAPH_H
#define CGQ_CG_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// The op of a node. The numeric values are the op codes written in column 0
// of the dataset's node features, so they never change; new ops go at the end.
typedef enum {
    CGQ_CG_INPUT = 0,
    CGQ_CG_CONV2D = 1,
    CGQ_CG_RELU = 2,
    CGQ_CG_RELU6 = 3,
    CGQ_CG_SIGMOID = 4,
    CGQ_CG_HSWISH = 5,
    CGQ_CG_BATCHNORM = 6, // per-channel scale and shift (running stats folded in)
    CGQ_CG_MAXPOOL = 7,
    CGQ_CG_AVGPOOL = 8,        // averages the in-bounds elements of each window
    CGQ_CG_GLOBAL_AVGPOOL = 9, // [1,C,H,W] -> [1,C]
    CGQ_CG_FC = 10,            // flattens its input; always has a bias
    CGQ_CG_ADD = 11,
    CGQ_CG_CONCAT = 12,  // along channels, in input order
    CGQ_CG_SHUFFLE = 13, // channel shuffle: [g, C/g] -> [C/g, g]
    CGQ_CG_SLICE = 14,   // channels [offset, offset+channels): ShuffleNetV2's split
    CGQ_CG_OP_COUNT
} cgq_cg_op_t;

// The op code of a depthwise conv2d (groups == input channels == output
// channels) in the node features. Not an op of its own: a conv2d node.
#define CGQ_CG_CODE_DWCONV2D 15

// Numbers per node in node-feat.csv.gz: the op code, then the 16 features of
// the CG dataset (input shape 5, kernel shape 4, strides 2, output shape 5).
#define CGQ_CG_NUM_FEATS 17

// A tensor shape for batch 1. rank 4 is [1,C,H,W] (NCHW); rank 2 is [1,C]
// (after global pooling or fc) and then h == w == 1.
typedef struct {
    int rank;
    int c, h, w;
} cgq_cg_shape_t;

// A node. As the argument of cgq_cg_graph_add it is a spec: op, inputs and
// the attributes of that op are read, the rest is ignored (an input node reads
// its shape from out). As the result of cgq_cg_graph_node it also holds the
// inferred shape and costs.
typedef struct {
    cgq_cg_op_t op;
    int *inputs; // node ids, all smaller than this node's; owned by the graph
    int ninputs;
    int channels; // conv2d: output channels; fc: output features; slice: count
    int kernel;   // conv2d, pools: square window
    int stride;   // conv2d, pools
    int pad;      // conv2d, pools: zeros on every side (pools: at most kernel/2)
    int groups;   // conv2d: groups (0 means 1); shuffle: groups
    int offset;   // slice: first channel
    bool bias;    // conv2d: has a bias (batchnorm folded into it)
    // Filled by the graph:
    cgq_cg_shape_t in; // the shape of inputs[0] (an input node: its own shape)
    cgq_cg_shape_t out;
    int64_t flops;  // multiply-adds x2 for conv2d and fc; see cg/README.md
    int64_t params; // weights + biases (+ 2C for batchnorm)
} cgq_cg_node_t;

typedef struct cgq_cg_graph_t cgq_cg_graph_t;

// cgq_cg_graph_new returns an empty graph named name (copied; "" if NULL).
cgq_cg_graph_t *cgq_cg_graph_new (const char *name);
// cgq_cg_graph_destroy frees the graph and its nodes; NULL-safe; sets *self_p = NULL.
void cgq_cg_graph_destroy (cgq_cg_graph_t **self_p);

// cgq_cg_graph_add appends a node built from spec (its inputs array is
// copied) after checking its attributes and inferring its shape. Returns the
// new node's id, or -1 with the reason in cgq_cg_graph_errstr. Errors are
// sticky: after the first one every add returns -1 and the first reason
// stays, so a builder can check once at the end. An input id of -1 (from a
// failed add) is also an error.
int cgq_cg_graph_add (cgq_cg_graph_t *self, const cgq_cg_node_t *spec);

// Shorthands for cgq_cg_graph_add; same returns.
int cgq_cg_graph_input (cgq_cg_graph_t *self, int c, int h, int w);
int cgq_cg_graph_conv (cgq_cg_graph_t *self, int in, int channels, int kernel, int stride, int pad,
                       int groups, bool bias);
// op: relu, relu6, sigmoid, hswish, batchnorm or global_avgpool.
int cgq_cg_graph_unary (cgq_cg_graph_t *self, cgq_cg_op_t op, int in);
// op: maxpool or avgpool.
int cgq_cg_graph_pool (cgq_cg_graph_t *self, cgq_cg_op_t op, int in, int kernel, int stride,
                       int pad);
int cgq_cg_graph_fc (cgq_cg_graph_t *self, int in, int features);
int cgq_cg_graph_add2 (cgq_cg_graph_t *self, int a, int b);
int cgq_cg_graph_concat (cgq_cg_graph_t *self, const int *ins, int n);
int cgq_cg_graph_shuffle (cgq_cg_graph_t *self, int in, int groups);
int cgq_cg_graph_slice (cgq_cg_graph_t *self, int in, int offset, int count);

// cgq_cg_graph_failed is true once an add has failed; errstr says why ("" if not).
bool cgq_cg_graph_failed (const cgq_cg_graph_t *self);
const char *cgq_cg_graph_errstr (const cgq_cg_graph_t *self);

const char *cgq_cg_graph_name (const cgq_cg_graph_t *self);
int cgq_cg_graph_size (const cgq_cg_graph_t *self);
// cgq_cg_graph_node returns node id (borrowed), or NULL if out of range.
const cgq_cg_node_t *cgq_cg_graph_node (const cgq_cg_graph_t *self, int id);
// Edges are (input -> node) for every input of every node, in node order.
int cgq_cg_graph_edge_count (const cgq_cg_graph_t *self);
int64_t cgq_cg_graph_flops (const cgq_cg_graph_t *self);
int64_t cgq_cg_graph_params (const cgq_cg_graph_t *self);
// cgq_cg_graph_equal compares the nodes (ops, inputs, attributes), not names.
bool cgq_cg_graph_equal (const cgq_cg_graph_t *a, const cgq_cg_graph_t *b);

// cgq_cg_node_code is the op code of a node in the features: its op, or
// CGQ_CG_CODE_DWCONV2D for a depthwise conv2d. cgq_cg_node_kind names it
// ("dwconv2d" or the op's name).
int cgq_cg_node_code (const cgq_cg_node_t *node);
const char *cgq_cg_node_kind (const cgq_cg_node_t *node);
// cgq_cg_graph_features writes node id's CGQ_CG_NUM_FEATS features (layout in
// cg/README.md) to feats. Returns 0, or -1 if id is out of range.
int cgq_cg_graph_features (const cgq_cg_graph_t *self, int id, double *feats);

// cgq_cg_op_name is "conv2d", "relu", ... ; NULL for a value out of range.
// cgq_cg_op_parse is its inverse: 0, or -1 for an unknown name.
const char *cgq_cg_op_name (cgq_cg_op_t op);
int cgq_cg_op_parse (const char *name, cgq_cg_op_t *op);

// cgq_cg_graph_to_json returns the model as JSON text, one node per line
// (format in cg/README.md). Caller frees.
char *cgq_cg_graph_to_json (const cgq_cg_graph_t *self);
// cgq_cg_graph_from_json builds a graph from model JSON text; source names
// the text in errors ("model.json"). Returns NULL with a one-line reason
// ("model.json:3:14: ..." or "model.json: node 5: ...") in err.
cgq_cg_graph_t *cgq_cg_graph_from_json (const char *text, const char *source, char *err,
                                        size_t err_len);
// cgq_cg_graph_save / _load write and read a model.json file. 0 / a graph
// (caller destroys), or -1 / NULL with a one-line reason naming path in err.
int cgq_cg_graph_save (const cgq_cg_graph_t *self, const char *path, char *err, size_t err_len);
cgq_cg_graph_t *cgq_cg_graph_load (const char *path, char *err, size_t err_len);

#endif
