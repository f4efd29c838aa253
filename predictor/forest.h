// forest: regression trees (CART, squared error) and random forests of
// them, in C, for the kernel-level latency predictor (predictor/kernel.c).
// A single tree is scikit-learn's DecisionTreeRegressor (best split by the
// same proxy, thresholds half-way between float32 feature values, the same
// stopping rules), so with every feature tried and no bootstrap it builds
// the same tree (predictor/forest_test.c checks it against sklearn). A forest
// bags trees on bootstrap samples and tries max_features of the features at
// each node, as RandomForestRegressor does, from its own seeded generator.
#ifndef CGQ_PRED_FOREST_H
#define CGQ_PRED_FOREST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    int n_estimators;     // trees (1 ..)
    int max_depth;        // 0: grow until the other rules stop
    int min_samples_leaf; // samples each leaf keeps at least (>= 1)
    double max_features;  // share of the features tried per node, (0, 1]: max(1, int(share * d))
    bool bootstrap;       // each tree on n samples drawn with replacement
    uint64_t seed;        // bootstrap draws and feature order
    // Gradient boosting instead of bagging (sklearn's GradientBoostingRegressor,
    // squared error, subsample 1): start at the mean of y, then each tree fits
    // the residuals (Friedman's split criterion) and adds learning_rate times
    // its prediction. bootstrap is ignored; max_depth 0 means 3 (sklearn's).
    bool boost;
    double learning_rate; // (0, 1]; default 0.1
} cgq_pred_forest_opts_t;

typedef struct cgq_pred_forest_t cgq_pred_forest_t;

// cgq_pred_forest_opts_default: 50 trees, depth unlimited, leaf 1, all
// features, bootstrap on, seed 0.
void cgq_pred_forest_opts_default (cgq_pred_forest_opts_t *o);

// cgq_pred_forest_fit trains on n samples of d features (x: n x d, row-major,
// float32 as sklearn stores them) with targets y. n >= 1, d >= 1. Returns the
// forest (caller destroys).
cgq_pred_forest_t *cgq_pred_forest_fit (const float *x, const double *y, int n, int d,
                                        const cgq_pred_forest_opts_t *o);
// NULL-safe; sets *self_p = NULL.
void cgq_pred_forest_destroy (cgq_pred_forest_t **self_p);

// cgq_pred_forest_predict is the mean of the trees' predictions for one
// sample of d features (boosted: the start plus learning_rate times their sum).
double cgq_pred_forest_predict (const cgq_pred_forest_t *self, const float *x);
int cgq_pred_forest_features (const cgq_pred_forest_t *self);
// The number of nodes of all trees together (leaves included).
int cgq_pred_forest_nodes (const cgq_pred_forest_t *self);

// cgq_pred_forest_json returns the trees as JSON (caller decrefs):
// {"features": d, "trees": [{"feature": [..], "threshold": [..], "left": [..],
// "right": [..], "value": [..]}]} (boosted, also "boost": {"init",
// "learning_rate"}), a leaf having feature -1. Reals are written
// with 17 digits, so a forest read back predicts exactly the same.
json_t *cgq_pred_forest_json (const cgq_pred_forest_t *self);
// cgq_pred_forest_from_json reads that back, checking every array (lengths,
// children inside the tree and after their parent, features < d, finite
// numbers). Returns the forest, or NULL with a reason in err.
cgq_pred_forest_t *cgq_pred_forest_from_json (const json_t *j, char *err, size_t err_len);

#endif
