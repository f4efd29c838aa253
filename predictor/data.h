// data: a CG dataset (cg/dataset.h) made ready for the GNN — node features
// encoded as floats, graphs split into train / validation / test, and
// mini-batches of graphs packed as one block-diagonal graph, so that a
// layer's dense products over a whole batch are single sgemm calls.
//
// Encoding of a node's 17 numbers (op code, then 16 shape numbers; see
// cg/README.md): the op code becomes a one-hot of CGQ_PRED_NUM_OPS columns,
// and each shape number v becomes log(1 + v), standardised with the mean and
// standard deviation over the training graphs' nodes. So a node has
// CGQ_PRED_IN_DIM inputs. With node costs on (cgq_pred_data_set_costs) two
// more follow: log(1 + FLOPs) and log(1 + bytes moved) of the node
// (predictor/node.h), standardised the same way: CGQ_PRED_IN_DIM_COSTS.
#ifndef CGQ_PRED_DATA_H
#define CGQ_PRED_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CGQ_PRED_NUM_OPS 16   // op codes 0..15 (cg/graph.h)
#define CGQ_PRED_NUM_SHAPE 16 // the shape numbers after the op code
#define CGQ_PRED_IN_DIM (CGQ_PRED_NUM_OPS + CGQ_PRED_NUM_SHAPE)
#define CGQ_PRED_NUM_COSTS 2 // log FLOPs, log bytes moved
#define CGQ_PRED_NUM_SCALED (CGQ_PRED_NUM_SHAPE + CGQ_PRED_NUM_COSTS)
#define CGQ_PRED_IN_DIM_COSTS (CGQ_PRED_IN_DIM + CGQ_PRED_NUM_COSTS)

// How message passing aggregates a node's neighbours (edges both ways).
typedef enum {
    CGQ_PRED_AGG_SUM,  // GraphConv: W_self h_i + W_nbr sum_j h_j
    CGQ_PRED_AGG_MEAN, // GraphConv: W_self h_i + W_nbr mean_j h_j
    CGQ_PRED_AGG_GCN,  // GCN: W sum_j h_j / sqrt(d_i d_j) over neighbours and self
} cgq_pred_agg_t;

typedef struct cgq_pred_data_t cgq_pred_data_t;

// A mini-batch: its graphs as one block-diagonal graph. Every array is owned
// by the batch and reused by the next cgq_pred_data_batch into it.
typedef struct {
    int graphs;     // B
    int nodes;      // N, all graphs together
    float *x;       // N x the data's in_dim (cgq_pred_data_in_dim), row-major
    int *graph_off; // B + 1: graph g's nodes are [graph_off[g], graph_off[g+1])
    float *target;  // B: the normalised target (see cgq_pred_data_target)
    int *index;     // B: the dataset index of each graph
    // N: each node's normalised time for the additive readout's node loss
    // (see cgq_pred_data_node_target), NaN where it has none; all NaN when
    // the dataset has no node times.
    float *node_target;
    // The aggregation matrix A (N x N, sparse, CSR): row i holds i's
    // neighbours j with weight a_ij, per the aggregation it was built for.
    int *row_off; // N + 1
    int *col;     // nnz
    float *val;   // nnz
    int *edges;   // scratch: the batch's edges (src, dst)
    size_t cap_nodes, cap_graphs, cap_nnz, cap_edges;
} cgq_pred_batch_t;

// cgq_pred_data_load reads the dataset in dir (cg/dataset.h) with label
// column label as the latency (ms, > 0), and the family file if present.
// max_graphs > 0 keeps only the first max_graphs graphs. Returns the data
// (caller destroys), or NULL with a one-line reason in err.
cgq_pred_data_t *cgq_pred_data_load (const char *dir, int label, int max_graphs, char *err,
                                     size_t err_len);
// cgq_pred_data_read reads graphs to predict: a CG dataset directory (with
// its family file if present) or one CG model (a model.json of `cgq-cg gen`).
// Label column label is kept where it is a latency (> 0), else NaN; a single
// model has none. Call cgq_pred_data_use_scaling before predicting. Returns
// the data (caller destroys), or NULL with a one-line reason in err.
cgq_pred_data_t *cgq_pred_data_read (const char *path, int label, char *err, size_t err_len);
// cgq_pred_data_use_scaling sets a saved model's feature and target scalings
// (instead of a split's; feat_mean and feat_std hold in_dim - NUM_OPS numbers
// each, in_dim as set by cgq_pred_data_set_costs), encodes every graph with
// them, and puts every graph in the test part. Returns 0, or -1 with err set for a scaling that
// cannot be (std <= 0, not finite).
int cgq_pred_data_use_scaling (cgq_pred_data_t *self, const float *feat_mean,
                               const float *feat_std, double y_mean, double y_std,
                               bool log_target, char *err, size_t err_len);

// cgq_pred_data_set_costs turns the two node-cost inputs on or off (off
// after load); call it before cgq_pred_data_split or _use_scaling.
void cgq_pred_data_set_costs (cgq_pred_data_t *self, bool on);
// Inputs per node: CGQ_PRED_IN_DIM, or CGQ_PRED_IN_DIM_COSTS with costs.
int cgq_pred_data_in_dim (const cgq_pred_data_t *self);

// NULL-safe; sets *self_p = NULL.
void cgq_pred_data_destroy (cgq_pred_data_t **self_p);

int cgq_pred_data_count (const cgq_pred_data_t *self);
// The label (latency) of graph i.
double cgq_pred_data_label (const cgq_pred_data_t *self, int i);
// cgq_pred_data_nodes is graph i's node features as read (*nodes rows of
// CGQ_CG_NUM_FEATS numbers: op code, then the 16 shape numbers), borrowed.
const double *cgq_pred_data_nodes (const cgq_pred_data_t *self, int i, int *nodes);
// cgq_pred_data_node_labels is graph i's node times (ms, one per node, from
// node-label.csv.gz), borrowed, or NULL when the dataset has none.
const double *cgq_pred_data_node_labels (const cgq_pred_data_t *self, int i);
// The family name of graph i, or NULL when the dataset has no family file.
const char *cgq_pred_data_family (const cgq_pred_data_t *self, int i);

// cgq_pred_data_split shuffles the graph indices with seed and assigns
// test_frac of them to test, val_frac to validation and the rest to train.
// With test_family set (non-empty) every graph of that family is the test
// set and the others are split into train and validation only. Then it fits
// the feature standardisation and, with log_target, the target's log, on the
// train graphs (see cgq_pred_data_target). Returns 0, or -1 with a reason in
// err (an empty split, an unknown family, no family file).
int cgq_pred_data_split (cgq_pred_data_t *self, uint64_t seed, double val_frac, double test_frac,
                         const char *test_family, bool log_target, char *err, size_t err_len);

typedef enum { CGQ_PRED_TRAIN, CGQ_PRED_VAL, CGQ_PRED_TEST } cgq_pred_part_t;

// cgq_pred_data_part returns the indices of a part (borrowed until the next
// split) and their count in *n.
const int *cgq_pred_data_part (const cgq_pred_data_t *self, cgq_pred_part_t part, int *n);

// The fitted scalings: shape feature means and stds (in_dim -
// CGQ_PRED_NUM_OPS each: the 16 shape numbers, then the costs if on), the target's mean and std (of
// log(latency) with log_target).
void cgq_pred_data_scaling (const cgq_pred_data_t *self, const float **feat_mean,
                            const float **feat_std, double *y_mean, double *y_std,
                            bool *log_target);
// cgq_pred_data_target is graph i's label normalised: (f(y) - mean) / std,
// f = log with log_target, else identity. cgq_pred_data_latency inverts it.
double cgq_pred_data_target (const cgq_pred_data_t *self, int i);
double cgq_pred_data_latency (const cgq_pred_data_t *self, double target);
// cgq_pred_data_node_shift is log of the mean node count of the train graphs
// (0 before a split): the additive readout's prior that a node takes
// 1 / (mean node count) of a typical graph (net.h).
double cgq_pred_data_node_shift (const cgq_pred_data_t *self);
// cgq_pred_data_node_target is node k (of every graph's nodes, in order) of
// graph i's time normalised as the additive readout's node output u (net.h):
// (log t - y_mean + shift) / y_std with log_target (NaN for t <= 0, the
// input node), else (t - y_mean e^-shift) / y_std. NaN without node times.
double cgq_pred_data_node_target (const cgq_pred_data_t *self, int i, int k);

// cgq_pred_data_batch packs graphs idx[0..n-1] into b (built with
// cgq_pred_batch_init), with A for agg. Call after a split.
void cgq_pred_data_batch (const cgq_pred_data_t *self, const int *idx, int n, cgq_pred_agg_t agg,
                          cgq_pred_batch_t *b);

// cgq_pred_batch_build fills b's A from its graph's edge list (edges x 2,
// src -> dst, node ids of the batch) for agg; b->nodes must be set and
// b->row_off etc. are (re)allocated. Used by cgq_pred_data_batch and tests.
void cgq_pred_batch_build (cgq_pred_batch_t *b, const int *edges, int nedges, cgq_pred_agg_t agg);

void cgq_pred_batch_init (cgq_pred_batch_t *b);
void cgq_pred_batch_fini (cgq_pred_batch_t *b);
// Grows b's arrays to hold nodes, graphs (contents kept).
void cgq_pred_batch_reserve (cgq_pred_batch_t *b, int nodes, int graphs);

// The aggregation's name ("sum", "mean", "gcn") and its parser (0 / -1).
const char *cgq_pred_agg_name (cgq_pred_agg_t agg);
int cgq_pred_agg_parse (const char *name, cgq_pred_agg_t *agg);

// cgq_pred_rng: the seeded random numbers of the predictor (splitmix64), so
// that the same seed gives the same split, initialisation and dropout.
uint64_t cgq_pred_rng_next (uint64_t *state);
// A uniform double in [0, 1).
double cgq_pred_rng_uniform (uint64_t *state);

#endif
