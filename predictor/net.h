// net: the GNN regressor — message-passing layers over a batch's
// block-diagonal graph, a readout per graph, an MLP head — with its backward
// pass and the Adam optimiser. Every dense product is one cblas_sgemm over
// the whole batch; the sparse aggregation walks the batch's CSR matrix.
//
// Layer l (input H, N x d; A the batch's aggregation matrix, data.h):
//   sum / mean:  Z = [H | A H] W + b     W: 2d x hidden  (GraphConv, k-GNN)
//   gcn:         Z = (A H) W + b         W: d x hidden   (Kipf & Welling)
//   H' = dropout (relu (Z))
// Readout: G = sum or mean of each graph's rows of H_L (B x hidden).
// Head: y = w2 . dropout (relu (G W1 + b1)) + b2, one number per graph.
// Additive readout (shape.additive): the head is applied to every node's row
// of H_L instead, giving one number u_i per node, and a graph's output is
// the sum of its nodes' latencies in ms, put back in the normalised target
// domain (s = shape.node_shift, mu / sigma = shape.y_mean / y_std):
//   log_target:  node i takes exp (sigma u_i + mu - s) ms, so
//                t = (log sum_i exp (sigma u_i) - s) / sigma   (log-sum-exp)
//   otherwise:   node i takes sigma u_i + mu e^-s ms, so
//                t = sum_i u_i + (n e^-s - 1) mu / sigma
// s = log (mean node count) makes u = 0 a typical graph's time split evenly.
// Loss: the mean squared error against the batch's normalised targets, plus
// optionally (cgq_pred_net_node_loss) W x that of the nodes' u against their
// normalised node times.
//
// All parameters live in one float array (weights then bias, layer by layer),
// as do their gradients and Adam's moments, so that the optimiser step and
// saving are loops over one array.
#ifndef CGQ_PRED_NET_H
#define CGQ_PRED_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "data.h"

#define CGQ_PRED_MAX_LAYERS 16

typedef struct {
    int in_dim;         // features per node (CGQ_PRED_IN_DIM for datasets)
    int layers;         // message-passing layers, 1..CGQ_PRED_MAX_LAYERS
    int hidden;         // width of every layer and of the head
    cgq_pred_agg_t agg; // sum, mean or gcn
    bool readout_mean;  // false: sum over a graph's nodes (latency adds up)
    float dropout;      // probability of zeroing an activation while training
    // The additive readout (above) and the target scaling it needs.
    bool additive;
    bool log_target;
    float y_mean, y_std, node_shift;
} cgq_pred_shape_t;

typedef struct cgq_pred_net_t cgq_pred_net_t;

// cgq_pred_net_new makes a network with PyTorch's default initialisation of
// linear layers (uniform in +-1/sqrt(fan_in), weights and biases) from seed.
// Caller destroys.
cgq_pred_net_t *cgq_pred_net_new (const cgq_pred_shape_t *shape, uint64_t seed);
// NULL-safe; sets *self_p = NULL.
void cgq_pred_net_destroy (cgq_pred_net_t **self_p);

const cgq_pred_shape_t *cgq_pred_net_shape (const cgq_pred_net_t *self);

// The parameters and their gradients (cgq_pred_net_size floats each),
// borrowed until destroy. The caller may write the parameters.
size_t cgq_pred_net_size (const cgq_pred_net_t *self);
float *cgq_pred_net_params (cgq_pred_net_t *self);
float *cgq_pred_net_grads (cgq_pred_net_t *self);

// cgq_pred_net_forward computes one prediction per graph of b into
// pred[0..b->graphs-1]. train applies dropout (drawing from the net's own
// generator) and keeps what backward needs.
void cgq_pred_net_forward (cgq_pred_net_t *self, const cgq_pred_batch_t *b, bool train,
                           float *pred);

// cgq_pred_net_reseed restarts the generator that draws dropout masks, so
// that a test can draw the same mask twice.
void cgq_pred_net_reseed (cgq_pred_net_t *self, uint64_t seed);

// cgq_pred_net_loss is the mean squared error of pred against b->target;
// with dpred non-NULL it also writes d loss / d pred. Sums in double.
double cgq_pred_net_loss (const cgq_pred_batch_t *b, const float *pred, float *dpred);

// cgq_pred_net_node_loss (additive readout only) is weight x the mean
// squared error of the last forward's node outputs u against
// b->node_target over the nodes that have one (0 when none has); with dnode
// non-NULL (b->nodes floats) it also writes its d / d u (0 for the others).
double cgq_pred_net_node_loss (const cgq_pred_net_t *self, const cgq_pred_batch_t *b, double weight,
                               float *dnode);
// cgq_pred_net_node_outputs is the last forward's u (b->nodes numbers) of the
// additive readout, borrowed until the next forward; NULL for other readouts.
const float *cgq_pred_net_node_outputs (const cgq_pred_net_t *self);
// cgq_pred_net_node_ms writes the last forward's node outputs as each node's
// latency in ms (exp (sigma u + mu - s), or sigma u + mu e^-s without
// log_target; above) into out[0..n-1], n the batch's nodes: what the
// additive readout sums per graph. Returns 0, or -1 for other readouts.
int cgq_pred_net_node_ms (const cgq_pred_net_t *self, int n, double *out);

// cgq_pred_net_backward sets the gradients (overwriting them) of the loss
// whose d loss / d pred is dpred and, with the additive readout, whose
// d loss / d u is dnode (NULL: none), for the last forward (which had train
// set).
void cgq_pred_net_backward (cgq_pred_net_t *self, const cgq_pred_batch_t *b, const float *dpred,
                            const float *dnode);

// cgq_pred_net_adam takes one Adam step (PyTorch's torch.optim.Adam: betas
// 0.9 / 0.999, eps 1e-8, weight decay added to the gradient as L2).
void cgq_pred_net_adam (cgq_pred_net_t *self, double lr, double weight_decay);

// cgq_pred_net_flops is the floating-point operations of the dense products
// (sgemm) of the last forward, and of the last backward, so that a bench can
// report their rate.
void cgq_pred_net_flops (const cgq_pred_net_t *self, double *forward, double *backward);

#endif
