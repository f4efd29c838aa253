#include "train.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"
#include "kernel.h"
#include "util.h"

// ---------------------------------------------------------------------------
// The hyper-parameter table

typedef enum { K_INT, K_U64, K_REAL, K_BOOL, K_STR, K_AGG, K_READOUT, K_SELECT, K_MODEL, K_REGRESSOR } s_type_t;

typedef struct {
    const char *name;
    s_type_t type;
    size_t off;
    double lo, hi; // K_INT, K_REAL: inclusive bounds
    const char *help;
} s_key_t;

#define OFF(f) offsetof (cgq_pred_config_t, f)
static const s_key_t s_keys[] = {
    {"layers", K_INT, OFF (layers), 1, CGQ_PRED_MAX_LAYERS, "message-passing layers"},
    {"hidden", K_INT, OFF (hidden), 1, 4096, "width of every layer and of the head"},
    {"aggregation", K_AGG, OFF (agg), 0, 0, "sum | mean (GraphConv) | gcn"},
    {"readout", K_READOUT, OFF (readout_mean), 0, 0,
     "sum | mean over a graph's nodes | additive (per-node latency, summed)"},
    {"node_costs", K_BOOL, OFF (node_costs), 0, 0, "log FLOPs and log bytes as node inputs"},
    {"node_loss", K_REAL, OFF (node_loss), 0, 1000,
     "additive: weight of the node-time loss (node-label.csv.gz); 0: off"},
    {"lr", K_REAL, OFF (lr), 1e-9, 10, "Adam's learning rate"},
    {"weight_decay", K_REAL, OFF (weight_decay), 0, 10, "L2 penalty added to the gradient"},
    {"dropout", K_REAL, OFF (dropout), 0, 0.95, "probability of dropping an activation"},
    {"batch_size", K_INT, OFF (batch_size), 1, 1 << 20, "graphs per optimiser step"},
    {"epochs", K_INT, OFF (epochs), 1, 1000000, "passes over the train graphs"},
    {"seed", K_U64, OFF (seed), 0, 0, "split, initialisation, shuffling, dropout"},
    {"log_target", K_BOOL, OFF (log_target), 0, 0, "regress log(latency)"},
    {"val_frac", K_REAL, OFF (val_frac), 0, 0.9, "share of the graphs for validation"},
    {"test_frac", K_REAL, OFF (test_frac), 0, 0.9, "share for test (without test_family)"},
    {"test_family", K_STR, OFF (test_family), 0, 0, "a family held out as the test set"},
    {"label", K_INT, OFF (label), 0, 1000, "label column of graph-label.csv.gz"},
    {"max_graphs", K_INT, OFF (max_graphs), 0, INT32_MAX, "use the first N graphs; 0: all"},
    {"select", K_SELECT, OFF (select), 0, 0,
     "val metric of the best epoch: mape | mae | "
     "rmse | srcc | acc10"},
    {"model", K_MODEL, OFF (model), 0, 0,
     "gnn | kernel (a forest per op type on node times, summed)"},
    {"n_estimators", K_INT, OFF (n_estimators), 1, 10000, "kernel: trees per op type"},
    {"max_depth", K_INT, OFF (max_depth), 0, 1000, "kernel: tree depth; 0: unlimited"},
    {"min_samples_leaf", K_INT, OFF (min_samples_leaf), 1, 1000000, "kernel: samples per leaf"},
    {"max_features", K_REAL, OFF (max_features), 0.01, 1, "kernel: share of features per split"},
    {"bootstrap", K_BOOL, OFF (bootstrap), 0, 0, "kernel: each tree on a bootstrap sample"},
    {"regressor", K_REGRESSOR, OFF (gbt), 0, 0,
     "kernel: forest (random forest) | gbt (gradient-boosted trees)"},
    {"learning_rate", K_REAL, OFF (learning_rate), 1e-6, 1, "kernel, gbt: shrinkage per tree"},
};
#define S_NKEYS (sizeof s_keys / sizeof s_keys[0])

static const char *s_select_names[] = {"mape", "mae", "rmse", "srcc", "acc10"};

void
cgq_pred_config_default (cgq_pred_config_t *cfg)
{
    *cfg = (cgq_pred_config_t){
        .layers = 3,
        .hidden = 64,
        .agg = CGQ_PRED_AGG_MEAN,
        .readout_mean = false,
        .readout_additive = true,
        .node_costs = true,
        .node_loss = 0,
        .lr = 1e-3,
        .weight_decay = 0,
        .dropout = 0,
        .batch_size = 32,
        .epochs = 100,
        .seed = 0,
        .log_target = true,
        .val_frac = 0.1,
        .test_frac = 0.1,
        .test_family = "",
        .label = 0,
        .max_graphs = 0,
        .select = CGQ_PRED_SELECT_MAPE,
        .model = CGQ_PRED_MODEL_GNN,
        .n_estimators = 50,
        .max_depth = 0,
        .min_samples_leaf = 1,
        .max_features = 1.0,
        .bootstrap = true,
        .gbt = false,
        .learning_rate = 0.1,
    };
}

static void
s_key_list (cgq_buf_t *b)
{
    for (size_t i = 0; i < S_NKEYS; i++)
        cgq_buf_printf (b, "%s%s", i ? ", " : "", s_keys[i].name);
}

int
cgq_pred_config_set (cgq_pred_config_t *cfg, const char *key, const char *text, char *err,
                     size_t err_len)
{
    const s_key_t *k = NULL;
    for (size_t i = 0; i < S_NKEYS; i++)
        if (!strcmp (s_keys[i].name, key))
            k = &s_keys[i];
    if (!k) {
        cgq_buf_t b;
        cgq_buf_init (&b);
        s_key_list (&b);
        snprintf (err, err_len, "unknown hyper-parameter '%s' (expected one of: %s)", key, b.data);
        cgq_buf_fini (&b);
        return -1;
    }
    char *p = (char *)cfg + k->off;
    char *end;
    switch (k->type) {
    case K_INT: {
        errno = 0;
        double v = strtod (text, &end);
        if (end == text || *end || errno || v != floor (v) || v < k->lo || v > k->hi) {
            snprintf (err, err_len, "%s: '%s' is not an integer in [%.0f, %.0f]", key, text, k->lo,
                      k->hi);
            return -1;
        }
        *(int *)p = (int)v;
        return 0;
    }
    case K_U64: {
        errno = 0;
        double v = strtod (text, &end);
        if (end == text || *end || errno || v != floor (v) || v < 0 || v > 1.8e19) {
            snprintf (err, err_len, "%s: '%s' is not an integer >= 0", key, text);
            return -1;
        }
        *(uint64_t *)p = (uint64_t)v;
        return 0;
    }
    case K_REAL: {
        errno = 0;
        double v = strtod (text, &end);
        if (end == text || *end || errno || !isfinite (v) || v < k->lo || v > k->hi) {
            snprintf (err, err_len, "%s: '%s' is not a number in [%g, %g]", key, text, k->lo,
                      k->hi);
            return -1;
        }
        *(double *)p = v;
        return 0;
    }
    case K_BOOL:
        if (!strcmp (text, "true") || !strcmp (text, "1"))
            *(bool *)p = true;
        else if (!strcmp (text, "false") || !strcmp (text, "0"))
            *(bool *)p = false;
        else {
            snprintf (err, err_len, "%s: '%s' is not a boolean (write true or false)", key, text);
            return -1;
        }
        return 0;
    case K_STR:
        if (strlen (text) >= sizeof cfg->test_family) {
            snprintf (err, err_len, "%s: '%s' is too long (at most %zu characters)", key, text,
                      sizeof cfg->test_family - 1);
            return -1;
        }
        snprintf (p, sizeof cfg->test_family, "%s", text);
        return 0;
    case K_AGG:
        if (cgq_pred_agg_parse (text, (cgq_pred_agg_t *)p) < 0) {
            snprintf (err, err_len, "%s: unknown aggregation '%s' (expected sum, mean or gcn)", key,
                      text);
            return -1;
        }
        return 0;
    case K_READOUT:
        if (strcmp (text, "sum") != 0 && strcmp (text, "mean") != 0 &&
            strcmp (text, "additive") != 0) {
            snprintf (err, err_len, "%s: unknown readout '%s' (expected sum, mean or additive)",
                      key, text);
            return -1;
        }
        cfg->readout_mean = !strcmp (text, "mean");
        cfg->readout_additive = !strcmp (text, "additive");
        return 0;
    case K_SELECT:
        for (int i = 0; i < 5; i++)
            if (!strcmp (text, s_select_names[i])) {
                *(cgq_pred_select_t *)p = (cgq_pred_select_t)i;
                return 0;
            }
        snprintf (err, err_len, "%s: unknown metric '%s' (expected mape, mae, rmse, srcc or acc10)",
                  key, text);
        return -1;
    case K_MODEL:
        if (!strcmp (text, "gnn") || !strcmp (text, "kernel")) {
            *(cgq_pred_model_kind_t *)p =
                !strcmp (text, "gnn") ? CGQ_PRED_MODEL_GNN : CGQ_PRED_MODEL_KERNEL;
            return 0;
        }
        snprintf (err, err_len, "%s: unknown model '%s' (expected gnn or kernel)", key, text);
        return -1;
    case K_REGRESSOR:
        if (!strcmp (text, "forest") || !strcmp (text, "gbt")) {
            *(bool *)p = !strcmp (text, "gbt");
            return 0;
        }
        snprintf (err, err_len, "%s: unknown regressor '%s' (expected forest or gbt)", key, text);
        return -1;
    }
    return -1;
}

int
cgq_pred_config_set_json (cgq_pred_config_t *cfg, const json_t *obj, char *err, size_t err_len)
{
    if (!json_is_object (obj)) {
        snprintf (err, err_len, "the params are not a JSON object");
        return -1;
    }
    const char *key;
    json_t *v;
    json_object_foreach ((json_t *)obj, key, v)
    {
        char text[64];
        if (json_is_string (v))
            snprintf (text, sizeof text, "%s", json_string_value (v));
        else if (json_is_integer (v))
            snprintf (text, sizeof text, "%lld", (long long)json_integer_value (v));
        else if (json_is_real (v))
            cgq_fmt_double (text, json_real_value (v));
        else if (json_is_boolean (v))
            snprintf (text, sizeof text, "%s", json_is_true (v) ? "true" : "false");
        else {
            snprintf (err, err_len, "%s: expected a number, a string or a boolean", key);
            return -1;
        }
        if (cgq_pred_config_set (cfg, key, text, err, err_len) < 0)
            return -1;
    }
    return 0;
}

json_t *
cgq_pred_config_json (const cgq_pred_config_t *cfg)
{
    json_t *o = json_object ();
    for (size_t i = 0; i < S_NKEYS; i++) {
        const s_key_t *k = &s_keys[i];
        const char *p = (const char *)cfg + k->off;
        json_t *v = NULL;
        switch (k->type) {
        case K_INT: v = json_integer (*(const int *)p); break;
        case K_U64: v = json_integer ((json_int_t) * (const uint64_t *)p); break;
        case K_REAL: v = json_real (*(const double *)p); break;
        case K_BOOL: v = json_boolean (*(const bool *)p); break;
        case K_STR: v = json_string (p); break;
        case K_AGG: v = json_string (cgq_pred_agg_name (*(const cgq_pred_agg_t *)p)); break;
        case K_READOUT:
            v = json_string (cfg->readout_additive ? "additive"
                             : cfg->readout_mean   ? "mean"
                                                   : "sum");
            break;
        case K_SELECT: v = json_string (s_select_names[*(const cgq_pred_select_t *)p]); break;
        case K_REGRESSOR: v = json_string (*(const bool *)p ? "gbt" : "forest"); break;
        case K_MODEL:
            v = json_string (*(const cgq_pred_model_kind_t *)p == CGQ_PRED_MODEL_KERNEL ? "kernel"
                                                                                         : "gnn");
            break;
        }
        json_object_set_new (o, k->name, v);
    }
    return o;
}

void
cgq_pred_config_help (FILE *f)
{
    cgq_pred_config_t d;
    cgq_pred_config_default (&d);
    json_t *o = cgq_pred_config_json (&d);
    for (size_t i = 0; i < S_NKEYS; i++) {
        char *v = cgq_json_dumps (json_object_get (o, s_keys[i].name));
        fprintf (f, "  %-16s %-8s %s\n", s_keys[i].name, v, s_keys[i].help);
        free (v);
    }
    json_decref (o);
}

// ---------------------------------------------------------------------------
// Training

void
cgq_pred_predict (cgq_pred_net_t *net, const cgq_pred_data_t *data, const int *idx, int n,
                  double *out)
{
    enum { CHUNK = 256 };
    cgq_pred_batch_t b;
    cgq_pred_batch_init (&b);
    float pred[CHUNK];
    for (int at = 0; at < n; at += CHUNK) {
        int m = n - at < CHUNK ? n - at : CHUNK;
        cgq_pred_data_batch (data, idx + at, m, cgq_pred_net_shape (net)->agg, &b);
        cgq_pred_net_forward (net, &b, false, pred);
        for (int i = 0; i < m; i++)
            out[at + i] = cgq_pred_data_latency (data, pred[i]);
    }
    cgq_pred_batch_fini (&b);
}

static void
s_evaluate (cgq_pred_net_t *net, const cgq_pred_data_t *data, cgq_pred_part_t part,
            cgq_pred_metrics_t *m)
{
    int n;
    const int *idx = cgq_pred_data_part (data, part, &n);
    double *pred = cgq_xcalloc ((size_t)n, sizeof *pred), *y = cgq_xcalloc ((size_t)n, sizeof *y);
    cgq_pred_predict (net, data, idx, n, pred);
    for (int i = 0; i < n; i++)
        y[i] = cgq_pred_data_label (data, idx[i]);
    cgq_pred_metrics (pred, y, (size_t)n, m);
    free (pred);
    free (y);
}

// s_better: is metric set a better than b under sel (NaN never is)?
static bool
s_better (cgq_pred_select_t sel, const cgq_pred_metrics_t *a, const cgq_pred_metrics_t *b)
{
    switch (sel) {
    case CGQ_PRED_SELECT_MAE: return a->mae < b->mae;
    case CGQ_PRED_SELECT_RMSE: return a->rmse < b->rmse;
    case CGQ_PRED_SELECT_SRCC: return a->srcc > b->srcc;
    case CGQ_PRED_SELECT_ACC10: return a->acc10 > b->acc10;
    case CGQ_PRED_SELECT_MAPE:
    default: return a->mape < b->mape;
    }
}

// s_shape is the network a config asks for, with the target scaling (y_mean,
// y_std, log_target) and node shift the additive readout works in.
static cgq_pred_shape_t
s_shape (const cgq_pred_config_t *cfg, double y_mean, double y_std, double node_shift)
{
    return (cgq_pred_shape_t){
        .in_dim = cfg->node_costs ? CGQ_PRED_IN_DIM_COSTS : CGQ_PRED_IN_DIM,
        .layers = cfg->layers,
        .hidden = cfg->hidden,
        .agg = cfg->agg,
        .readout_mean = cfg->readout_mean,
        .dropout = (float)cfg->dropout,
        .additive = cfg->readout_additive,
        .log_target = cfg->log_target,
        .y_mean = (float)y_mean,
        .y_std = (float)y_std,
        .node_shift = (float)node_shift,
    };
}

int
cgq_pred_train (const cgq_pred_config_t *cfg, cgq_pred_data_t *data, const char *out_dir,
                cgq_pred_epoch_fn *on_epoch, void *arg, cgq_pred_result_t *res, char *err,
                size_t err_len)
{
    memset (res, 0, sizeof *res);
    if (cfg->model == CGQ_PRED_MODEL_KERNEL)
        return cgq_pred_kernel_train (cfg, data, out_dir, on_epoch, arg, res, err, err_len);
    if (cfg->node_loss > 0 && !cfg->readout_additive) {
        snprintf (err, err_len,
                  "node_loss %g needs readout: additive (only it predicts per-node "
                  "times; set node_loss 0 or readout additive)",
                  cfg->node_loss);
        return -1;
    }
    if (cfg->node_loss > 0 && !cgq_pred_data_node_labels (data, 0)) {
        snprintf (err, err_len,
                  "node_loss %g needs node times, and the dataset has no %s "
                  "(make it with --node-times / per_op, or set node_loss 0)",
                  cfg->node_loss, "node-label.csv.gz");
        return -1;
    }
    cgq_pred_data_set_costs (data, cfg->node_costs);
    if (cgq_pred_data_split (data, cfg->seed, cfg->val_frac, cfg->test_frac, cfg->test_family,
                             cfg->log_target, err, err_len) < 0)
        return -1;
    int ntrain;
    const int *train = cgq_pred_data_part (data, CGQ_PRED_TRAIN, &ntrain);
    cgq_pred_data_part (data, CGQ_PRED_VAL, &res->nval);
    cgq_pred_data_part (data, CGQ_PRED_TEST, &res->ntest);
    res->ntrain = ntrain;

    const float *fm, *fs;
    double ym, ys;
    bool lt;
    cgq_pred_data_scaling (data, &fm, &fs, &ym, &ys, &lt);
    cgq_pred_shape_t shape = s_shape (cfg, ym, ys, cgq_pred_data_node_shift (data));
    cgq_pred_net_t *net = cgq_pred_net_new (&shape, cfg->seed);
    size_t np = cgq_pred_net_size (net);
    float *best = cgq_xcalloc (np, sizeof *best);
    int *order = cgq_xcalloc ((size_t)ntrain, sizeof *order);
    memcpy (order, train, (size_t)ntrain * sizeof *order);
    int bs = cfg->batch_size < ntrain ? cfg->batch_size : ntrain;
    float *pred = cgq_xcalloc ((size_t)bs, sizeof *pred),
          *dpred = cgq_xcalloc ((size_t)bs, sizeof *dpred), *dnode = NULL;
    size_t dnode_cap = 0;
    cgq_pred_batch_t b;
    cgq_pred_batch_init (&b);
    uint64_t rng = cfg->seed ^ 0xba7c4ULL;
    int rc = 0;
    for (int epoch = 1; epoch <= cfg->epochs; epoch++) {
        for (int i = ntrain - 1; i > 0; i--) {
            int j = (int)(cgq_pred_rng_next (&rng) % (uint64_t)(i + 1));
            int t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        int64_t t0 = cgq_now_ms ();
        double loss = 0, node_loss = 0;
        for (int at = 0; at < ntrain; at += bs) {
            int m = ntrain - at < bs ? ntrain - at : bs;
            cgq_pred_data_batch (data, order + at, m, cfg->agg, &b);
            cgq_pred_net_forward (net, &b, true, pred);
            loss += cgq_pred_net_loss (&b, pred, dpred) * m;
            if (cfg->node_loss > 0) {
                if ((size_t)b.nodes > dnode_cap) {
                    dnode_cap = (size_t)b.nodes + (size_t)b.nodes / 2;
                    dnode = cgq_xrealloc (dnode, dnode_cap * sizeof *dnode);
                }
                node_loss += cgq_pred_net_node_loss (net, &b, cfg->node_loss, dnode) * m;
            }
            cgq_pred_net_backward (net, &b, dpred, dnode);
            cgq_pred_net_adam (net, cfg->lr, cfg->weight_decay);
            double ff, fb;
            cgq_pred_net_flops (net, &ff, &fb);
            res->flops += ff + fb;
        }
        cgq_pred_epoch_t e = {
            .epoch = epoch, .train_loss = loss / ntrain, .train_node_loss = node_loss / ntrain};
        e.epoch_s = (double)(cgq_now_ms () - t0) / 1000.0;
        res->train_s += e.epoch_s;
        if (!isfinite (e.train_loss)) {
            snprintf (err, err_len,
                      "training diverged at epoch %d (loss %g): lower lr (now %g) or use "
                      "log_target",
                      epoch, e.train_loss, cfg->lr);
            rc = -1;
            break;
        }
        s_evaluate (net, data, CGQ_PRED_VAL, &e.val);
        if (res->best_epoch == 0 || s_better (cfg->select, &e.val, &res->val)) {
            res->best_epoch = epoch;
            res->val = e.val;
            memcpy (best, cgq_pred_net_params (net), np * sizeof *best);
        }
        if (on_epoch && on_epoch (arg, &e) != 0)
            break;
    }
    if (rc == 0 && res->best_epoch > 0) {
        memcpy (cgq_pred_net_params (net), best, np * sizeof *best);
        s_evaluate (net, data, CGQ_PRED_TEST, &res->test);
        if (out_dir) {
            json_t *extra = json_pack (
                "{s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "best_epoch",
                res->best_epoch, "val_mae", res->val.mae, "val_mape", res->val.mape, "val_rmse",
                res->val.rmse, "val_srcc", res->val.srcc, "val_acc10", res->val.acc10, "test_mae",
                res->test.mae, "test_mape", res->test.mape, "test_rmse", res->test.rmse,
                "test_srcc", res->test.srcc, "test_acc10", res->test.acc10);
            rc = cgq_pred_model_save (out_dir, cfg, net, data, extra, err, err_len);
            json_decref (extra);
        }
    }
    cgq_pred_batch_fini (&b);
    free (pred);
    free (dpred);
    free (dnode);
    free (order);
    free (best);
    cgq_pred_net_destroy (&net);
    return rc;
}

// ---------------------------------------------------------------------------
// The saved model

static json_t *
s_floats (const float *v, int n)
{
    json_t *a = json_array ();
    for (int i = 0; i < n; i++)
        json_array_append_new (a, json_real ((double)v[i]));
    return a;
}

// s_fnv1a: FNV-1a, 64 bits, of n bytes.
static uint64_t
s_fnv1a (const void *data, size_t n)
{
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

// s_write_aside writes n bytes to DIR/NAME.tmp, syncs it and renames it to
// DIR/NAME. Returns 0, or -1 with err set (the .tmp removed).
static int
s_write_aside (const char *dir, const char *name, const void *data, size_t n, char *err,
               size_t err_len)
{
    char *path = cgq_xasprintf ("%s/%s", dir, name), *tmp = cgq_xasprintf ("%s/%s.tmp", dir, name);
    int rc = 0;
    FILE *f = fopen (tmp, "wb");
    if (!f || fwrite (data, 1, n, f) != n || fflush (f) != 0 || fsync (fileno (f)) != 0)
        rc = -1;
    if (f && fclose (f) != 0)
        rc = -1;
    if (rc == 0 && rename (tmp, path) < 0)
        rc = -1;
    if (rc < 0) {
        snprintf (err, err_len, "cannot write %s: %s", path, strerror (errno));
        unlink (tmp);
    }
    free (tmp);
    free (path);
    return rc;
}

int
cgq_pred_model_save (const char *dir, const cgq_pred_config_t *cfg, cgq_pred_net_t *net,
                     const cgq_pred_data_t *data, const json_t *extra, char *err, size_t err_len)
{
    if (cgq_mkdir_p (dir) < 0) {
        snprintf (err, err_len, "cannot create %s: %s", dir, strerror (errno));
        return -1;
    }
    const float *fm, *fs;
    double ym, ys;
    bool lt;
    cgq_pred_data_scaling (data, &fm, &fs, &ym, &ys, &lt);
    size_t np = cgq_pred_net_size (net);
    int in_dim = cgq_pred_net_shape (net)->in_dim, nscaled = in_dim - CGQ_PRED_NUM_OPS;
    // The weights' hash goes into model.json, so that a pair whose halves
    // come from two saves (a crash between the renames below) is refused,
    // never used.
    char fnv[17];
    snprintf (fnv, sizeof fnv, "%016llx",
              (unsigned long long)s_fnv1a (cgq_pred_net_params (net), np * sizeof (float)));
    json_t *o = json_pack ("{s:s, s:i, s:o, s:i, s:{s:o, s:o, s:f, s:f, s:b, s:f}, s:I, s:s, s:s}",
                           "format", "cgq-predictor-model", "version", CGQ_PRED_MODEL_VERSION,
                           "config", cgq_pred_config_json (cfg), "in_dim", in_dim, "scaling",
                           "feat_mean", s_floats (fm, nscaled), "feat_std", s_floats (fs, nscaled),
                           "y_mean", ym, "y_std", ys, "log_target", lt, "node_shift",
                           (double)cgq_pred_net_shape (net)->node_shift, "params", (json_int_t)np,
                           "weights", "model.f32", "weights_fnv1a", fnv);
    if (extra)
        json_object_set (o, "metrics", (json_t *)extra);
    cgq_buf_t b;
    cgq_buf_init (&b);
    cgq_json_append (&b, o, true);
    cgq_buf_puts (&b, "\n");
    json_decref (o);
    // Each file written aside and renamed (the weights first): a crash
    // leaves each whole, old or new.
    int rc = s_write_aside (dir, "model.f32", cgq_pred_net_params (net), np * sizeof (float), err,
                            err_len);
    if (rc == 0)
        rc = s_write_aside (dir, "model.json", b.data, b.len, err, err_len);
    cgq_buf_fini (&b);
    return rc;
}

// s_floats_get reads n numbers of a JSON array into v. Returns 0 or -1.
static int
s_floats_get (const json_t *a, float *v, int n)
{
    if (!json_is_array (a) || (int)json_array_size (a) != n)
        return -1;
    for (int i = 0; i < n; i++) {
        const json_t *x = json_array_get (a, (size_t)i);
        if (!json_is_number (x))
            return -1;
        v[i] = (float)json_number_value (x);
    }
    return 0;
}

cgq_pred_model_t *
cgq_pred_model_load (const char *path, char *err, size_t err_len)
{
    // PATH is model.json or the directory that holds it; the weights file
    // it names lies beside it.
    struct stat st;
    char *json_path = stat (path, &st) == 0 && S_ISDIR (st.st_mode)
                          ? cgq_xasprintf ("%s/model.json", path)
                          : cgq_xstrdup (path);
    char *dir = cgq_xstrdup (json_path);
    char *slash = strrchr (dir, '/');
    if (slash)
        *slash = '\0';
    else
        strcpy (dir, ".");
    cgq_pred_model_t *self = NULL;
    float *w = NULL;
    char *wpath = NULL;
    FILE *f = NULL;
    json_error_t je;
    json_t *o = json_load_file (json_path, 0, &je);
    if (!o) {
        snprintf (err, err_len, "%s: %s (expected the model.json a predictor trial or "
                                "cgq-predictor train --out wrote)",
                  json_path, je.text);
        goto done;
    }
    const char *fmt = json_string_value (json_object_get (o, "format"));
    json_int_t version = json_integer_value (json_object_get (o, "version"));
    if (!fmt || strcmp (fmt, "cgq-predictor-model") != 0 || version < 1 ||
        version > CGQ_PRED_MODEL_VERSION) {
        snprintf (err, err_len,
                  "%s: not a cgq-predictor model of version 1 to %d (its "
                  "\"format\" and \"version\" say otherwise; a newer "
                  "cgq-predictor may read it)",
                  json_path, CGQ_PRED_MODEL_VERSION);
        goto done;
    }
    self = cgq_xcalloc (1, sizeof *self);
    cgq_pred_config_default (&self->config);
    char why[512];
    if (cgq_pred_config_set_json (&self->config, json_object_get (o, "config"), why, sizeof why)
        < 0) {
        snprintf (err, err_len, "%s: config: %s", json_path, why);
        goto fail;
    }
    if (self->config.model == CGQ_PRED_MODEL_KERNEL) {
        snprintf (err, err_len, "%s: a kernel-level model (model: kernel), not a GNN: load it "
                                "with cgq_pred_kernel_load (cgq-predictor predict does)",
                  json_path);
        goto fail;
    }
    // Version 1 had no node costs (32 inputs) and no in_dim; a config
    // without node_costs is such a model, whatever today's default is.
    if (!json_object_get (json_object_get (o, "config"), "node_costs"))
        self->config.node_costs = false;
    int want_dim = self->config.node_costs ? CGQ_PRED_IN_DIM_COSTS : CGQ_PRED_IN_DIM;
    const json_t *jdim = json_object_get (o, "in_dim");
    self->in_dim = jdim ? (int)json_integer_value (jdim) : CGQ_PRED_IN_DIM;
    if ((version >= 2 && !json_is_integer (jdim)) || self->in_dim != want_dim) {
        snprintf (err, err_len,
                  "%s: in_dim is %s%d, but its config (node_costs %s) reads %d "
                  "inputs per node (the file is damaged or from another version)",
                  json_path, jdim ? "" : "missing: ", self->in_dim,
                  self->config.node_costs ? "true" : "false", want_dim);
        goto fail;
    }
    const json_t *sc = json_object_get (o, "scaling");
    const json_t *ym = json_object_get (sc, "y_mean"), *ys = json_object_get (sc, "y_std");
    const json_t *lt = json_object_get (sc, "log_target");
    const json_t *jshift = json_object_get (sc, "node_shift");
    int nscaled = self->in_dim - CGQ_PRED_NUM_OPS;
    if (s_floats_get (json_object_get (sc, "feat_mean"), self->feat_mean, nscaled) < 0 ||
        s_floats_get (json_object_get (sc, "feat_std"), self->feat_std, nscaled) < 0 ||
        !json_is_number (ym) || !json_is_number (ys) || !json_is_boolean (lt) ||
        (jshift && !json_is_number (jshift))) {
        snprintf (err, err_len,
                  "%s: scaling must hold feat_mean and feat_std (%d numbers each), "
                  "y_mean, y_std and log_target (and node_shift a number)",
                  json_path, nscaled);
        goto fail;
    }
    self->y_mean = json_number_value (ym);
    self->y_std = json_number_value (ys);
    self->log_target = json_is_true (lt);
    self->node_shift = jshift ? json_number_value (jshift) : 0;
    if (self->log_target != self->config.log_target || !isfinite (self->node_shift)) {
        snprintf (err, err_len, "%s: scaling's log_target or node_shift disagrees with its config",
                  json_path);
        goto fail;
    }
    cgq_pred_shape_t shape = s_shape (&self->config, self->y_mean, self->y_std, self->node_shift);
    self->net = cgq_pred_net_new (&shape, 0);
    size_t np = cgq_pred_net_size (self->net);
    if (json_integer_value (json_object_get (o, "params")) != (json_int_t)np) {
        snprintf (err, err_len, "%s: params is %lld, but its config makes a network of %zu",
                  json_path, (long long)json_integer_value (json_object_get (o, "params")), np);
        goto fail;
    }
    const char *wname = json_string_value (json_object_get (o, "weights"));
    if (!wname || !*wname || strchr (wname, '/')) {
        snprintf (err, err_len, "%s: weights must name a file beside it (model.f32)", json_path);
        goto fail;
    }
    wpath = cgq_xasprintf ("%s/%s", dir, wname);
    f = fopen (wpath, "rb");
    if (!f || fstat (fileno (f), &st) < 0) {
        snprintf (err, err_len, "%s: %s", wpath, strerror (errno));
        goto fail;
    }
    if ((size_t)st.st_size != np * sizeof (float)) {
        snprintf (err, err_len, "%s: %lld bytes, the network has %zu float32 weights (%zu bytes)",
                  wpath, (long long)st.st_size, np, np * sizeof (float));
        goto fail;
    }
    w = cgq_pred_net_params (self->net);
    if (fread (w, sizeof (float), np, f) != np) {
        snprintf (err, err_len, "%s: short read: %s", wpath, strerror (errno));
        goto fail;
    }
    for (size_t i = 0; i < np; i++)
        if (!isfinite (w[i])) {
            snprintf (err, err_len, "%s: weight %zu is not finite", wpath, i);
            goto fail;
        }
    const char *want = json_string_value (json_object_get (o, "weights_fnv1a"));
    char got[17];
    snprintf (got, sizeof got, "%016llx", (unsigned long long)s_fnv1a (w, np * sizeof (float)));
    if (want && strcmp (want, got)) { // older models have no hash: nothing to check
        snprintf (err, err_len,
                  "%s does not belong to %s (weights hash %s, the model says %s: a save cut "
                  "short?): train again, or restore both files",
                  wpath, json_path, got, want);
        goto fail;
    }
    self->metrics = json_incref (json_object_get (o, "metrics"));
    goto done;
fail:
    cgq_pred_model_destroy (&self);
done:
    if (f)
        fclose (f);
    json_decref (o);
    free (wpath);
    free (dir);
    free (json_path);
    return self;
}

void
cgq_pred_model_destroy (cgq_pred_model_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cgq_pred_model_t *self = *self_p;
    cgq_pred_net_destroy (&self->net);
    json_decref (self->metrics);
    free (self);
    *self_p = NULL;
}

int
cgq_pred_model_predict (cgq_pred_model_t *self, cgq_pred_data_t *data, double *out, char *err,
                        size_t err_len)
{
    cgq_pred_data_set_costs (data, self->config.node_costs);
    if (cgq_pred_data_use_scaling (data, self->feat_mean, self->feat_std, self->y_mean,
                                   self->y_std, self->log_target, err, err_len)
        < 0)
        return -1;
    int n;
    const int *idx = cgq_pred_data_part (data, CGQ_PRED_TEST, &n);
    cgq_pred_predict (self->net, data, idx, n, out);
    return 0;
}

int
cgq_pred_model_predict_nodes (cgq_pred_model_t *self, const cgq_pred_data_t *data, int i,
                              double *out)
{
    if (!self->config.readout_additive)
        return -1;
    cgq_pred_batch_t b;
    cgq_pred_batch_init (&b);
    cgq_pred_data_batch (data, &i, 1, self->config.agg, &b);
    float pred;
    cgq_pred_net_forward (self->net, &b, false, &pred);
    int rc = cgq_pred_net_node_ms (self->net, b.nodes, out);
    cgq_pred_batch_fini (&b);
    return rc;
}
