#include "kernel.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dataset.h"
#include "graph.h"
#include "json.h"
#include "node.h"
#include "util.h"

#define S_CODES (CGQ_CG_CODE_DWCONV2D + 1)

const char *const cgq_pred_kernel_feature_names[CGQ_PRED_KERNEL_FEATS] = {
    "in_h",   "in_w",   "in_c",          "out_h", "out_w", "out_c",
    "kernel", "stride", "cin_per_group", "flops", "bytes"};

struct cgq_pred_kernel_t {
    cgq_pred_config_t config;
    cgq_pred_forest_t *forest[S_CODES]; // NULL: an op type the training never saw
    int nodes[S_CODES];                 // training nodes per op type
    double scale, offset;
};

const char *
cgq_pred_kernel_op_name (int code)
{
    if (code == CGQ_CG_CODE_DWCONV2D)
        return "dwconv2d";
    const char *n = code >= 0 ? cgq_cg_op_name ((cgq_cg_op_t)code) : NULL;
    return n ? n : "?";
}

void
cgq_pred_kernel_features (const double *raw, float *out)
{
    double f[CGQ_PRED_NODE_FEATS];
    cgq_pred_node_config (raw, f);
    for (int i = 0; i < CGQ_PRED_KERNEL_FEATS; i++)
        out[i] = (float)f[i];
}

static void
s_opts (const cgq_pred_config_t *cfg, int code, cgq_pred_forest_opts_t *o)
{
    cgq_pred_forest_opts_default (o);
    o->n_estimators = cfg->n_estimators;
    o->max_depth = cfg->max_depth;
    o->min_samples_leaf = cfg->min_samples_leaf;
    o->max_features = cfg->max_features;
    o->bootstrap = cfg->bootstrap;
    o->boost = cfg->gbt;
    o->learning_rate = cfg->learning_rate;
    o->seed = cfg->seed * 31 + (uint64_t)code;
}

// s_sum is the sum of the node predictions of graph g; -1 with err set
// for an op type without a forest.
static int
s_sum (const cgq_pred_kernel_t *self, const cgq_pred_data_t *data, int g, double *sum, char *err,
       size_t err_len)
{
    int n;
    const double *raw = cgq_pred_data_nodes (data, g, &n);
    double s = 0;
    for (int i = 0; i < n; i++) {
        const double *r = raw + (size_t)i * CGQ_CG_NUM_FEATS;
        int code = (int)r[0];
        if (code < 0 || code >= S_CODES || !self->forest[code]) {
            cgq_buf_t b;
            cgq_buf_init (&b);
            for (int c = 0; c < S_CODES; c++)
                if (self->forest[c])
                    cgq_buf_printf (&b, "%s%s", b.len ? ", " : "", cgq_pred_kernel_op_name (c));
            snprintf (err, err_len,
                      "graph %d node %d is op '%s' (code %d), which this kernel model never saw "
                      "in training (it knows: %s); train it on a dataset with %s nodes",
                      g, i, cgq_pred_kernel_op_name (code), code, b.data ? b.data : "",
                      cgq_pred_kernel_op_name (code));
            cgq_buf_fini (&b);
            return -1;
        }
        float f[CGQ_PRED_KERNEL_FEATS];
        cgq_pred_kernel_features (r, f);
        s += cgq_pred_forest_predict (self->forest[code], f);
    }
    *sum = s;
    return 0;
}

cgq_pred_kernel_t *
cgq_pred_kernel_fit (const cgq_pred_config_t *cfg, const cgq_pred_data_t *data, const int *idx,
                     int n, char *err, size_t err_len)
{
    if (n < 1 || !cgq_pred_data_node_labels (data, idx[0])) {
        snprintf (err, err_len,
                  "model kernel trains on per-node times, and the dataset has no %s (make it "
                  "with cgq-cg gen --node-times, or measure with the cpu-local param per_op: "
                  "true and cgq-predictor export)",
                  CGQ_CG_NODE_LABEL_FILE);
        return NULL;
    }
    // The train nodes of each op type, as rows of kernel features.
    float *x[S_CODES] = {NULL};
    double *y[S_CODES] = {NULL};
    int cnt[S_CODES] = {0}, cap[S_CODES] = {0};
    for (int k = 0; k < n; k++) {
        int nn;
        const double *raw = cgq_pred_data_nodes (data, idx[k], &nn);
        const double *lab = cgq_pred_data_node_labels (data, idx[k]);
        for (int i = 0; i < nn; i++) {
            const double *r = raw + (size_t)i * CGQ_CG_NUM_FEATS;
            int c = (int)r[0];
            if (c < 0 || c >= S_CODES)
                continue; // cgq_pred_data_load refused such codes already
            if (cnt[c] == cap[c]) {
                cap[c] = cap[c] ? cap[c] * 2 : 256;
                x[c] = cgq_xrealloc (x[c], sizeof (float) * CGQ_PRED_KERNEL_FEATS * (size_t)cap[c]);
                y[c] = cgq_xrealloc (y[c], sizeof (double) * (size_t)cap[c]);
            }
            cgq_pred_kernel_features (r, x[c] + (size_t)cnt[c] * CGQ_PRED_KERNEL_FEATS);
            y[c][cnt[c]++] = lab[i];
        }
    }
    cgq_pred_kernel_t *self = cgq_xcalloc (1, sizeof *self);
    self->config = *cfg;
    self->scale = 1;
    for (int c = 0; c < S_CODES; c++) {
        if (cnt[c] > 0) {
            cgq_pred_forest_opts_t o;
            s_opts (cfg, c, &o);
            self->forest[c] = cgq_pred_forest_fit (x[c], y[c], cnt[c], CGQ_PRED_KERNEL_FEATS, &o);
            self->nodes[c] = cnt[c];
        }
        free (x[c]);
        free (y[c]);
    }
    // latency ~ a * sum + b, least squares on the relative error:
    // minimise sum_g (a u_g + b v_g - 1)^2 with u = sum/y, v = 1/y.
    double suu = 0, suv = 0, svv = 0, su = 0, sv = 0;
    for (int k = 0; k < n; k++) {
        double s, yk = cgq_pred_data_label (data, idx[k]);
        if (s_sum (self, data, idx[k], &s, err, err_len) < 0 || !(yk > 0))
            continue;
        double u = s / yk, v = 1 / yk;
        suu += u * u;
        suv += u * v;
        svv += v * v;
        su += u;
        sv += v;
    }
    double det = suu * svv - suv * suv;
    if (det > 1e-12 * suu * svv) {
        double a = (su * svv - sv * suv) / det, b = (sv * suu - su * suv) / det;
        if (a > 0 && isfinite (a) && isfinite (b)) {
            self->scale = a;
            self->offset = b;
        }
    }
    return self;
}

void
cgq_pred_kernel_destroy (cgq_pred_kernel_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cgq_pred_kernel_t *self = *self_p;
    for (int c = 0; c < S_CODES; c++)
        cgq_pred_forest_destroy (&self->forest[c]);
    free (self);
    *self_p = NULL;
}

int
cgq_pred_kernel_predict (const cgq_pred_kernel_t *self, const cgq_pred_data_t *data, const int *idx,
                         int n, double *out, char *err, size_t err_len)
{
    for (int k = 0; k < n; k++) {
        double s;
        if (s_sum (self, data, idx ? idx[k] : k, &s, err, err_len) < 0)
            return -1;
        double p = self->scale * s + self->offset;
        out[k] = p > 1e-6 ? p : 1e-6; // a latency; never 0 or below
    }
    return 0;
}

void
cgq_pred_kernel_calibration (const cgq_pred_kernel_t *self, double *scale, double *offset)
{
    *scale = self->scale;
    *offset = self->offset;
}

static int
s_eval (const cgq_pred_kernel_t *self, const cgq_pred_data_t *data, cgq_pred_part_t part,
        cgq_pred_metrics_t *m, char *err, size_t err_len)
{
    int n;
    const int *idx = cgq_pred_data_part (data, part, &n);
    memset (m, 0, sizeof *m);
    if (n == 0)
        return 0;
    double *p = cgq_xcalloc ((size_t)n, sizeof *p), *y = cgq_xcalloc ((size_t)n, sizeof *y);
    int rc = cgq_pred_kernel_predict (self, data, idx, n, p, err, err_len);
    for (int i = 0; i < n; i++)
        y[i] = cgq_pred_data_label (data, idx[i]);
    if (rc == 0)
        cgq_pred_metrics (p, y, (size_t)n, m);
    free (p);
    free (y);
    return rc;
}

static double
s_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static json_t *
s_metrics_json (const cgq_pred_metrics_t *m)
{
    return json_pack ("{s:f, s:f, s:f, s:f, s:f}", "mae", m->mae, "mape", m->mape, "rmse", m->rmse,
                      "srcc", m->srcc, "acc10", m->acc10);
}

int
cgq_pred_kernel_train (const cgq_pred_config_t *cfg, cgq_pred_data_t *data, const char *out_dir,
                       cgq_pred_epoch_fn *on_epoch, void *arg, cgq_pred_result_t *res, char *err,
                       size_t err_len)
{
    memset (res, 0, sizeof *res);
    if (cgq_pred_data_split (data, cfg->seed, cfg->val_frac, cfg->test_frac, cfg->test_family,
                             cfg->log_target, err, err_len) < 0)
        return -1;
    int ntrain;
    const int *train = cgq_pred_data_part (data, CGQ_PRED_TRAIN, &ntrain);
    cgq_pred_data_part (data, CGQ_PRED_VAL, &res->nval);
    cgq_pred_data_part (data, CGQ_PRED_TEST, &res->ntest);
    res->ntrain = ntrain;
    double t0 = s_now ();
    cgq_pred_kernel_t *self = cgq_pred_kernel_fit (cfg, data, train, ntrain, err, err_len);
    if (!self)
        return -1;
    res->train_s = s_now () - t0;
    res->best_epoch = 1;
    cgq_pred_metrics_t tr;
    char why[768];
    const char *part = "train";
    if (s_eval (self, data, CGQ_PRED_TRAIN, &tr, why, sizeof why) < 0 ||
        (part = "validation", s_eval (self, data, CGQ_PRED_VAL, &res->val, why, sizeof why) < 0) ||
        (part = "test", s_eval (self, data, CGQ_PRED_TEST, &res->test, why, sizeof why) < 0)) {
        // An op type in the val or test graphs only: no forest to ask.
        snprintf (err, err_len, "the %s graphs: %s (or pick another seed or split)", part, why);
        cgq_pred_kernel_destroy (&self);
        return -1;
    }
    if (on_epoch) {
        // One "epoch": the fit. train_loss is the train graphs' mean
        // squared relative error, the closest to the GNN's loss.
        cgq_pred_epoch_t e = {.epoch = 1,
                              .train_loss = tr.rmse > 0 ? pow (tr.mape / 100, 2) : 0,
                              .val = res->val,
                              .epoch_s = res->train_s};
        on_epoch (arg, &e);
    }
    int rc = 0;
    if (out_dir) {
        json_t *extra = json_pack ("{s:o, s:o, s:i}", "val", s_metrics_json (&res->val), "test",
                                   s_metrics_json (&res->test), "graphs_train", ntrain);
        rc = cgq_pred_kernel_save (self, out_dir, extra, err, err_len);
        json_decref (extra);
    }
    cgq_pred_kernel_destroy (&self);
    return rc;
}

int
cgq_pred_kernel_save (const cgq_pred_kernel_t *self, const char *dir, const json_t *extra,
                      char *err, size_t err_len)
{
    if (cgq_mkdir_p (dir) < 0) {
        snprintf (err, err_len, "cannot make directory %s: %s", dir, strerror (errno));
        return -1;
    }
    json_t *names = json_array ();
    for (int i = 0; i < CGQ_PRED_KERNEL_FEATS; i++)
        json_array_append_new (names, json_string (cgq_pred_kernel_feature_names[i]));
    json_t *ops = json_object ();
    for (int c = 0; c < S_CODES; c++)
        if (self->forest[c])
            json_object_set_new (ops, cgq_pred_kernel_op_name (c),
                                 json_pack ("{s:i, s:i, s:o}", "code", c, "nodes", self->nodes[c],
                                            "forest", cgq_pred_forest_json (self->forest[c])));
    json_t *o =
        json_pack ("{s:s, s:i, s:o, s:{s:o, s:f, s:f, s:o}}", "format", "cgq-predictor-model",
                   "version", 1, "config", cgq_pred_config_json (&self->config), "kernel",
                   "features", names, "scale", self->scale, "offset", self->offset, "ops", ops);
    if (extra)
        json_object_set (o, "metrics", (json_t *)extra);
    char *path = cgq_xasprintf ("%s/model.json", dir);
    char *tmp = cgq_xasprintf ("%s/model.json.tmp", dir);
    // 17 digits: thresholds and leaf values read back as the same doubles.
    // Written aside and renamed: a crash leaves the old model or the new one,
    // never half of one (a forest model runs to tens of MB).
    errno = 0;
    int rc = json_dump_file (o, tmp, JSON_COMPACT | JSON_REAL_PRECISION (17));
    if (rc == 0 && rename (tmp, path) < 0)
        rc = -1;
    if (rc < 0) {
        snprintf (err, err_len, "cannot write %s: %s", path,
                  errno ? strerror (errno) : "jansson could not write it");
        unlink (tmp);
    }
    free (tmp);
    free (path);
    json_decref (o);
    return rc < 0 ? -1 : 0;
}

static char *
s_json_path (const char *path)
{
    struct stat st;
    return stat (path, &st) == 0 && S_ISDIR (st.st_mode) ? cgq_xasprintf ("%s/model.json", path)
                                                         : cgq_xstrdup (path);
}

bool
cgq_pred_kernel_is (const char *path)
{
    char *p = s_json_path (path);
    json_t *o = json_load_file (p, 0, NULL);
    free (p);
    const char *m = json_string_value (json_object_get (json_object_get (o, "config"), "model"));
    bool is = m && !strcmp (m, "kernel");
    json_decref (o);
    return is;
}

cgq_pred_kernel_t *
cgq_pred_kernel_load (const char *path, char *err, size_t err_len)
{
    char *p = s_json_path (path);
    json_error_t je;
    json_t *o = json_load_file (p, 0, &je);
    cgq_pred_kernel_t *self = NULL;
    char why[512];
    if (!o) {
        snprintf (err, err_len, "%s: %s (expected the model.json of a model: kernel trial)", p,
                  je.text);
        goto done;
    }
    const char *fmt = json_string_value (json_object_get (o, "format"));
    if (!fmt || strcmp (fmt, "cgq-predictor-model") != 0 ||
        json_integer_value (json_object_get (o, "version")) != 1) {
        snprintf (err, err_len, "%s: not a cgq-predictor model of version 1", p);
        goto done;
    }
    self = cgq_xcalloc (1, sizeof *self);
    cgq_pred_config_default (&self->config);
    if (cgq_pred_config_set_json (&self->config, json_object_get (o, "config"), why, sizeof why) <
        0) {
        snprintf (err, err_len, "%s: config: %s", p, why);
        goto fail;
    }
    const json_t *k = json_object_get (o, "kernel");
    const json_t *sc = json_object_get (k, "scale"), *off = json_object_get (k, "offset");
    const json_t *ops = json_object_get (k, "ops");
    if (self->config.model != CGQ_PRED_MODEL_KERNEL || !json_is_number (sc) ||
        !json_is_number (off) || !isfinite (json_number_value (sc)) ||
        !(json_number_value (sc) > 0) || !isfinite (json_number_value (off)) ||
        !json_is_object (ops) || json_object_size (ops) == 0 ||
        json_array_size (json_object_get (k, "features")) != CGQ_PRED_KERNEL_FEATS) {
        snprintf (err, err_len,
                  "%s: not a kernel model: needs config.model kernel and kernel.scale (> 0), "
                  "offset, features (%d names) and ops",
                  p, CGQ_PRED_KERNEL_FEATS);
        goto fail;
    }
    self->scale = json_number_value (sc);
    self->offset = json_number_value (off);
    const char *name;
    json_t *op;
    json_object_foreach ((json_t *)ops, name, op)
    {
        json_int_t c = json_integer_value (json_object_get (op, "code"));
        if (!json_is_integer (json_object_get (op, "code")) || c < 0 || c >= S_CODES ||
            strcmp (cgq_pred_kernel_op_name ((int)c), name) != 0 || self->forest[c]) {
            snprintf (err, err_len, "%s: kernel.ops.%s: code %lld does not name that op", p, name,
                      (long long)c);
            goto fail;
        }
        self->forest[c] =
            cgq_pred_forest_from_json (json_object_get (op, "forest"), why, sizeof why);
        if (!self->forest[c] ||
            cgq_pred_forest_features (self->forest[c]) != CGQ_PRED_KERNEL_FEATS) {
            snprintf (err, err_len, "%s: kernel.ops.%s.forest: %s", p, name,
                      self->forest[c] ? "wrong feature count" : why);
            goto fail;
        }
        self->nodes[c] = (int)json_integer_value (json_object_get (op, "nodes"));
    }
    goto done;
fail:
    cgq_pred_kernel_destroy (&self);
done:
    json_decref (o);
    free (p);
    return self;
}
