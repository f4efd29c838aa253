// train: the predictor's hyper-parameters (one table that the trial kind's
// params, cgq-predictor --set and the saved model all go through), the
// training loop with its per-epoch metrics, and the saved best model.
// docs/predictor.md is the reference.
#ifndef CGQ_PRED_TRAIN_H
#define CGQ_PRED_TRAIN_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "data.h"
#include "metrics.h"
#include "net.h"

// The GNN's saved model format: 1 (32 inputs per node), 2 (in_dim recorded,
// node_costs, readout additive, node_shift). Loading reads both.
#define CGQ_PRED_MODEL_VERSION 2

typedef enum {
    CGQ_PRED_SELECT_MAPE, // lowest val MAPE
    CGQ_PRED_SELECT_MAE,
    CGQ_PRED_SELECT_RMSE,
    CGQ_PRED_SELECT_SRCC, // highest val SRCC
    CGQ_PRED_SELECT_ACC10,
} cgq_pred_select_t;

// Which predictor a config trains: the GNN (net.c) or the kernel-level one
// (kernel.c: a forest per op type on node times, summed per graph).
typedef enum { CGQ_PRED_MODEL_GNN, CGQ_PRED_MODEL_KERNEL } cgq_pred_model_kind_t;

typedef struct {
    int layers;               // message-passing layers (3)
    int hidden;               // width (64)
    cgq_pred_agg_t agg;       // aggregation: sum | mean | gcn (mean)
    bool readout_mean;        // readout: sum | mean | additive (additive)
    bool readout_additive;    // readout: additive (net.h: per-node latency, summed)
    bool node_costs;          // log FLOPs and log bytes as node inputs (true)
    double node_loss;         // additive: weight of the node-time loss; 0: off (0)
    double lr;                // Adam's learning rate (1e-3)
    double weight_decay;      // L2 added to the gradient (0)
    double dropout;           // (0)
    int batch_size;           // graphs per step (32)
    int epochs;               // (100)
    uint64_t seed;            // split, initialisation, shuffling, dropout (0)
    bool log_target;          // regress log(latency) (true)
    double val_frac;          // (0.1)
    double test_frac;         // (0.1; ignored with test_family)
    char test_family[64];     // hold a whole family out as the test set ("")
    int label;                // label column of the dataset (0)
    int max_graphs;           // use the first N graphs only; 0: all
    cgq_pred_select_t select; // which val metric picks the best epoch (mape)
    cgq_pred_model_kind_t model; // gnn | kernel (gnn)
    // model: kernel — each op type's random forest (predictor/forest.h)
    int n_estimators;      // trees (50)
    int max_depth;         // 0: unlimited (0)
    int min_samples_leaf;  // (1)
    double max_features;   // share of the features tried per split (1)
    bool bootstrap;        // (true)
    bool gbt;              // regressor: forest | gbt (gradient-boosted trees) (forest)
    double learning_rate;  // gbt (0.1)
} cgq_pred_config_t;

// cgq_pred_config_default fills cfg with the defaults above.
void cgq_pred_config_default (cgq_pred_config_t *cfg);

// cgq_pred_config_set sets one hyper-parameter from text ("64", "1e-3",
// "true", "mean"). Returns 0, or -1 with "KEY: what is wrong (what to
// write)" in err, also for an unknown key (which lists the known ones).
int cgq_pred_config_set (cgq_pred_config_t *cfg, const char *key, const char *text, char *err,
                         size_t err_len);
// cgq_pred_config_set_json sets every member of a JSON object (CGQ_PARAMS:
// numbers, strings, booleans). Returns 0, or -1 with err set.
int cgq_pred_config_set_json (cgq_pred_config_t *cfg, const json_t *obj, char *err, size_t err_len);
// cgq_pred_config_json returns cfg as a JSON object (caller decrefs).
json_t *cgq_pred_config_json (const cgq_pred_config_t *cfg);
// cgq_pred_config_help writes one line per key with its default and range.
void cgq_pred_config_help (FILE *f);

typedef struct {
    int epoch;              // 1, 2, ...
    double train_loss;      // mean squared error on normalised targets
    double train_node_loss; // node_loss x the node-time loss (0 when node_loss is 0)
    cgq_pred_metrics_t val; // on the validation graphs
    double epoch_s;         // wall time of the epoch's training steps
} cgq_pred_epoch_t;

// Called after every epoch; a non-zero return stops training there.
typedef int (cgq_pred_epoch_fn) (void *arg, const cgq_pred_epoch_t *e);

typedef struct {
    int best_epoch;
    cgq_pred_metrics_t val;  // of the best epoch
    cgq_pred_metrics_t test; // of the best epoch's model
    int ntrain, nval, ntest;
    double train_s; // wall time of every training step
    double flops;   // sgemm floating-point operations of those steps
} cgq_pred_result_t;

// cgq_pred_train splits data per cfg, trains, and evaluates the best epoch's
// model on the test graphs. With out_dir, writes the best model there
// (cgq_pred_model_save). Returns 0, or -1 with a reason in err.
int cgq_pred_train (const cgq_pred_config_t *cfg, cgq_pred_data_t *data, const char *out_dir,
                    cgq_pred_epoch_fn *on_epoch, void *arg, cgq_pred_result_t *res, char *err,
                    size_t err_len);

// cgq_pred_predict writes the latency predicted by net for graphs
// idx[0..n-1] of data (after a split: it uses data's scalings) into out.
void cgq_pred_predict (cgq_pred_net_t *net, const cgq_pred_data_t *data, const int *idx, int n,
                       double *out);

// cgq_pred_model_save writes DIR/model.json (the config, the feature and
// target scalings, the parameter count and the metrics in extra, borrowed)
// and DIR/model.f32 (the parameters, little-endian float32). Returns 0, or
// -1 with a reason naming the file in err.
int cgq_pred_model_save (const char *dir, const cgq_pred_config_t *cfg, cgq_pred_net_t *net,
                         const cgq_pred_data_t *data, const json_t *extra, char *err,
                         size_t err_len);

// A saved model read back: what cgq_pred_model_save wrote.
typedef struct {
    cgq_pred_config_t config;
    cgq_pred_net_t *net; // its weights loaded; owned
    int in_dim;          // inputs per node: CGQ_PRED_IN_DIM, or _IN_DIM_COSTS with node_costs
    float feat_mean[CGQ_PRED_NUM_SCALED], feat_std[CGQ_PRED_NUM_SCALED]; // in_dim - NUM_OPS used
    double y_mean, y_std, node_shift;
    bool log_target;
    json_t *metrics; // the metrics saved with it (owned reference; may be NULL)
} cgq_pred_model_t;

// cgq_pred_model_load reads a model: PATH is its model.json or the directory
// holding it; the weights file it names must lie beside it. Every part is
// checked (format, config, scalings, weight count against the config's
// network, finite weights). A version 1 model (before node costs and the
// additive readout: 32 inputs per node) loads as node_costs false; version 2
// records its in_dim, which must match its config. Returns the model (caller destroys), or NULL
// with a reason naming the file in err.
cgq_pred_model_t *cgq_pred_model_load (const char *path, char *err, size_t err_len);
// NULL-safe; sets *self_p = NULL.
void cgq_pred_model_destroy (cgq_pred_model_t **self_p);
// cgq_pred_model_predict predicts the latency (ms) of every graph of data
// (cgq_pred_data_read) into out[0..count-1], with the model's scalings
// (cgq_pred_data_use_scaling). Returns 0, or -1 with err set.
int cgq_pred_model_predict (cgq_pred_model_t *self, cgq_pred_data_t *data, double *out,
                            char *err, size_t err_len);
// cgq_pred_model_predict_nodes writes graph i's per-node latencies (ms, one
// per node in node order, summing to the graph's prediction) of a model with
// the additive readout into out, after cgq_pred_model_predict on data.
// Returns 0, or -1 for a model with another readout.
int cgq_pred_model_predict_nodes (cgq_pred_model_t *self, const cgq_pred_data_t *data, int i,
                                  double *out);
#endif
