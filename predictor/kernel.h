// kernel: the kernel-level latency predictor (`model: kernel`), nn-Meter's
// approach: each node of a graph is a kernel described by its config (op
// type, input and output shapes, kernel size, stride, FLOPs and bytes moved,
// computed from the node's shapes); one random forest per op type
// (predictor/forest.h) predicts a node's time, trained on the per-node times
// of node-label.csv.gz; a graph's latency is the sum over its nodes, then
// a * sum + b with a and b fitted on the training graphs (minimising the
// relative error), which absorbs what per-node timing adds or leaves out
// (the clock reads, effects between neighbouring ops). docs/predictor.md.
#ifndef CGQ_PRED_KERNEL_H
#define CGQ_PRED_KERNEL_H

#include <jansson.h>
#include <stddef.h>

#include "data.h"
#include "forest.h"
#include "node.h"
#include "train.h"

// Features per node: in_h, in_w, in_c, out_h, out_w, out_c, kernel, stride,
// cin_per_group, flops, bytes (cgq_pred_kernel_feature_names).
#define CGQ_PRED_KERNEL_FEATS CGQ_PRED_NODE_FEATS

extern const char *const cgq_pred_kernel_feature_names[CGQ_PRED_KERNEL_FEATS];

// cgq_pred_kernel_features turns one node's CGQ_CG_NUM_FEATS numbers (op
// code, then the 16 shape numbers, cg/README.md) into its kernel config.
void cgq_pred_kernel_features (const double *raw, float *out);
// cgq_pred_kernel_op_name names an op code ("conv2d", "dwconv2d", ...), or
// "?" out of range.
const char *cgq_pred_kernel_op_name (int code);

typedef struct cgq_pred_kernel_t cgq_pred_kernel_t;

// cgq_pred_kernel_train is cgq_pred_train for cfg->model == kernel: split
// data per cfg, fit the forests and the calibration on the train graphs
// (which need node times), report the validation metrics once through
// on_epoch (epoch 1), evaluate the test graphs, and write the model to
// out_dir when given. Returns 0, or -1 with a reason in err.
int cgq_pred_kernel_train (const cgq_pred_config_t *cfg, cgq_pred_data_t *data, const char *out_dir,
                           cgq_pred_epoch_fn *on_epoch, void *arg, cgq_pred_result_t *res,
                           char *err, size_t err_len);

// cgq_pred_kernel_fit trains on graphs idx[0..n-1] of data (which must have
// node times). Returns the model (caller destroys), or NULL with err set.
cgq_pred_kernel_t *cgq_pred_kernel_fit (const cgq_pred_config_t *cfg, const cgq_pred_data_t *data,
                                        const int *idx, int n, char *err, size_t err_len);
// NULL-safe; sets *self_p = NULL.
void cgq_pred_kernel_destroy (cgq_pred_kernel_t **self_p);

// cgq_pred_kernel_predict writes the predicted latency (ms) of graphs
// idx[0..n-1] of data into out (idx NULL: every graph). A node whose op type
// the model never saw is an error naming the op and the graph, not a guess.
// Returns 0, or -1 with err set.
int cgq_pred_kernel_predict (const cgq_pred_kernel_t *self, const cgq_pred_data_t *data,
                             const int *idx, int n, double *out, char *err, size_t err_len);
// The calibration: latency = scale * (sum of node predictions) + offset.
void cgq_pred_kernel_calibration (const cgq_pred_kernel_t *self, double *scale, double *offset);

// cgq_pred_kernel_save writes DIR/model.json: {"format": "cgq-predictor-model",
// "version": 1, "config": {... "model": "kernel"}, "kernel": {"features": [names],
// "scale", "offset", "ops": {NAME: {"code", "nodes", "forest"}}}, "metrics":
// extra (borrowed, may be NULL)}. Returns 0, or -1 with a reason in err.
int cgq_pred_kernel_save (const cgq_pred_kernel_t *self, const char *dir, const json_t *extra,
                          char *err, size_t err_len);
// cgq_pred_kernel_is: does PATH (model.json or its directory) hold a kernel
// model? (false also when it cannot be read: the GNN loader says why.)
bool cgq_pred_kernel_is (const char *path);
// cgq_pred_kernel_load reads what cgq_pred_kernel_save wrote, checking every
// part. Returns the model (caller destroys), or NULL with a reason naming
// the file in err.
cgq_pred_kernel_t *cgq_pred_kernel_load (const char *path, char *err, size_t err_len);

#endif
