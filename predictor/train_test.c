// train_test: training on a tiny dataset of generated CNN graphs must drive
// the loss down; the split by seed and by family; the hyper-parameter table;
// the saved model.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "dataset.h"
#include "gen.h"
#include "node.h"
#include "train.h"
#include "util.h"

enum { COUNT = 60 };

static char s_dir[64];
static char s_ndir[96]; // the same graphs with node times (node-label.csv.gz)

// A dataset of COUNT graphs of the five families whose label is a
// deterministic function of the graph (its FLOPs in millions): learnable,
// so a working network fits it and a broken one does not.
static int
s_setup (void **state)
{
    snprintf (s_dir, sizeof s_dir, "/tmp/cgq-pred-test-XXXXXX");
    assert_non_null (mkdtemp (s_dir));
    cgq_cg_dataset_t *ds = cgq_cg_dataset_new (CGQ_CG_NUM_FEATS, 1);
    const char *fam[COUNT];
    char err[256];
    // Node times: each node's FLOPs in millions (node.h), so that the graph
    // label (cgq_cg_graph_flops) is close to their sum, as with real times.
    double *node_ms = NULL;
    size_t nnodes = 0;
    for (int i = 0; i < COUNT; i++) {
        cgq_cg_gen_opts_t o;
        cgq_cg_gen_opts_default (&o);
        o.family = (cgq_cg_family_t)(i % CGQ_CG_FAMILY_COUNT);
        o.seed = (uint64_t)i;
        o.max_res = 64;
        cgq_cg_graph_t *g = cgq_cg_gen (&o, err, sizeof err);
        assert_non_null (g);
        double label = (double)cgq_cg_graph_flops (g) / 1e6;
        assert_int_equal (cgq_cg_dataset_append_graph (ds, g, &label, err, sizeof err), 0);
        cgq_cg_sample_t smp;
        cgq_cg_dataset_get (ds, i, &smp);
        node_ms = cgq_xrealloc (node_ms, (nnodes + (size_t)smp.nodes) * sizeof *node_ms);
        for (int k = 0; k < smp.nodes; k++) {
            double c[CGQ_PRED_NODE_FEATS];
            cgq_pred_node_config (smp.feats + (size_t)k * CGQ_CG_NUM_FEATS, c);
            node_ms[nnodes++] = c[CGQ_PRED_NODE_FLOPS] / 1e6;
        }
        fam[i] = cgq_cg_family_name (o.family);
        cgq_cg_graph_destroy (&g);
    }
    assert_int_equal (cgq_cg_dataset_write (ds, s_dir, err, sizeof err), 0);
    assert_int_equal (cgq_cg_dataset_write_families (s_dir, fam, COUNT, err, sizeof err), 0);
    snprintf (s_ndir, sizeof s_ndir, "%s/nodes", s_dir);
    assert_int_equal (cgq_cg_dataset_write (ds, s_ndir, err, sizeof err), 0);
    assert_int_equal (cgq_cg_dataset_write_node_labels (s_ndir, node_ms, nnodes, err, sizeof err),
                      0);
    free (node_ms);
    cgq_cg_dataset_destroy (&ds);
    return 0;
}

static int
s_teardown (void **state)
{
    char *cmd = cgq_xasprintf ("rm -rf '%s'", s_dir);
    assert_int_equal (system (cmd), 0);
    free (cmd);
    return 0;
}

typedef struct {
    double first_loss, last_loss;
    double first_node, last_node; // train_node_loss
    int epochs;
} s_trace_t;

static int
s_on_epoch (void *arg, const cgq_pred_epoch_t *e)
{
    s_trace_t *t = arg;
    if (e->epoch == 1) {
        t->first_loss = e->train_loss;
        t->first_node = e->train_node_loss;
    }
    t->last_loss = e->train_loss;
    t->last_node = e->train_node_loss;
    t->epochs = e->epoch;
    assert_true (e->val.srcc >= -1 && e->val.srcc <= 1);
    assert_true (e->val.acc10 >= 0 && e->val.acc10 <= 100);
    return 0;
}

// s_train_with trains on dir with cfg's options and the test's sizes.
static void
s_train_with (const char *dir, cgq_pred_config_t cfg, double max_loss)
{
    cgq_pred_agg_t agg = cfg.agg;
    char err[512];
    cgq_pred_data_t *data = cgq_pred_data_load (dir, 0, 0, err, sizeof err);
    assert_non_null (data);
    cfg.hidden = 32;
    cfg.layers = 2;
    cfg.epochs = 60;
    cfg.batch_size = 8;
    cfg.lr = 3e-3;
    cfg.val_frac = 0.2;
    cfg.test_frac = 0.2;
    s_trace_t t = {0};
    cgq_pred_result_t r;
    int rc = cgq_pred_train (&cfg, data, NULL, s_on_epoch, &t, &r, err, sizeof err);
    if (rc < 0)
        print_message ("%s\n", err);
    assert_int_equal (rc, 0);
    print_message ("agg %s: loss %.4f -> %.4f, val SRCC %.3f, test SRCC %.3f MAPE %.1f %%\n",
                   cgq_pred_agg_name (agg), t.first_loss, t.last_loss, r.val.srcc, r.test.srcc,
                   r.test.mape);
    assert_int_equal (t.epochs, 60);
    assert_int_equal (r.ntrain + r.nval + r.ntest, COUNT);
    assert_true (t.last_loss < max_loss);
    assert_true (t.last_loss < t.first_loss / 5);
    assert_true (r.val.srcc > 0.8);
    if (cfg.node_loss > 0) { // the node loss is reported, and it falls too
        print_message ("node loss %.4f -> %.4f\n", t.first_node, t.last_node);
        assert_true (t.first_node > 0 && t.last_node < t.first_node / 5);
    }
    else
        assert_true (t.first_node == 0 && t.last_node == 0);
    cgq_pred_data_destroy (&data);
}

static void
s_train (cgq_pred_agg_t agg, double max_loss)
{
    cgq_pred_config_t cfg;
    cgq_pred_config_default (&cfg);
    cfg.agg = agg;
    cfg.readout_additive = false; // the sum readout (test_train_additive: the default)
    s_train_with (s_dir, cfg, max_loss);
}

// The additive readout learns (with and without node costs, with the node
// loss on a dataset with node times).
static void
test_train_additive (void **state)
{
    cgq_pred_config_t cfg;
    cgq_pred_config_default (&cfg);
    assert_true (cfg.readout_additive);
    s_train_with (s_dir, cfg, 0.05);
    cfg.node_costs = false;
    s_train_with (s_dir, cfg, 0.05);
    cfg.node_costs = true;
    cfg.node_loss = 0.5;
    s_train_with (s_ndir, cfg, 0.05);
}

// node_loss is refused where it cannot work, saying why.
static void
test_node_loss_refused (void **state)
{
    char err[512];
    cgq_pred_data_t *data = cgq_pred_data_load (s_dir, 0, 0, err, sizeof err);
    assert_non_null (data);
    cgq_pred_config_t cfg;
    cgq_pred_config_default (&cfg);
    cfg.epochs = 1;
    cfg.node_loss = 1;
    cfg.readout_additive = false;
    cgq_pred_result_t r;
    assert_int_equal (cgq_pred_train (&cfg, data, NULL, NULL, NULL, &r, err, sizeof err), -1);
    assert_non_null (strstr (err, "needs readout: additive"));
    cfg.readout_additive = true;
    assert_int_equal (cgq_pred_train (&cfg, data, NULL, NULL, NULL, &r, err, sizeof err), -1);
    assert_non_null (strstr (err, "node-label.csv.gz"));
    cfg.node_loss = 0;
    assert_int_equal (cgq_pred_train (&cfg, data, NULL, NULL, NULL, &r, err, sizeof err), 0);
    cgq_pred_data_destroy (&data);
}

// The node-cost inputs: log(1 + FLOPs) and log(1 + bytes) of node.h,
// standardised on the train nodes, after the 32 of before.
static void
test_node_cost_inputs (void **state)
{
    char err[512];
    cgq_pred_data_t *data = cgq_pred_data_load (s_dir, 0, 0, err, sizeof err);
    assert_non_null (data);
    assert_int_equal (cgq_pred_data_in_dim (data), CGQ_PRED_IN_DIM);
    cgq_pred_data_set_costs (data, true);
    assert_int_equal (cgq_pred_data_in_dim (data), CGQ_PRED_IN_DIM_COSTS);
    assert_int_equal (cgq_pred_data_split (data, 3, 0.1, 0.2, "", true, err, sizeof err), 0);
    const float *fm, *fs;
    double ym, ys;
    bool lt;
    cgq_pred_data_scaling (data, &fm, &fs, &ym, &ys, &lt);
    int g = 4, nodes;
    const double *raw = cgq_pred_data_nodes (data, g, &nodes);
    cgq_pred_batch_t b;
    cgq_pred_batch_init (&b);
    cgq_pred_data_batch (data, &g, 1, CGQ_PRED_AGG_MEAN, &b);
    assert_int_equal (b.nodes, nodes);
    int conv = 0;
    for (int k = 0; k < nodes; k++) {
        double c[CGQ_PRED_NODE_FEATS];
        cgq_pred_node_config (raw + (size_t)k * CGQ_CG_NUM_FEATS, c);
        const float *x = b.x + (size_t)k * CGQ_PRED_IN_DIM_COSTS;
        double fl = (log1p (c[CGQ_PRED_NODE_FLOPS]) - fm[16]) / fs[16];
        double by = (log1p (c[CGQ_PRED_NODE_BYTES]) - fm[17]) / fs[17];
        assert_true (fabs (x[CGQ_PRED_IN_DIM] - fl) < 1e-4);
        assert_true (fabs (x[CGQ_PRED_IN_DIM + 1] - by) < 1e-4);
        assert_true (x[(int)raw[(size_t)k * CGQ_CG_NUM_FEATS]] == 1.0f); // the one-hot first
        conv += c[CGQ_PRED_NODE_FLOPS] > 1e6;
    }
    assert_true (conv > 0);                 // the check saw real costs
    assert_true (fs[16] > 1 && fs[17] > 1); // spread over orders of magnitude
    // No node times here: the batch's node targets are NaN.
    assert_true (isnan (b.node_target[1]));
    cgq_pred_batch_fini (&b);
    cgq_pred_data_destroy (&data);
}

static void
test_train_mean (void **state)
{
    s_train (CGQ_PRED_AGG_MEAN, 0.05);
}

static void
test_train_sum (void **state)
{
    s_train (CGQ_PRED_AGG_SUM, 0.05);
}

static void
test_train_gcn (void **state)
{
    s_train (CGQ_PRED_AGG_GCN, 0.1);
}

static void
test_split (void **state)
{
    char err[512];
    cgq_pred_data_t *data = cgq_pred_data_load (s_dir, 0, 0, err, sizeof err);
    assert_non_null (data);
    // By seed: the same seed, the same split; every graph in one part.
    int n[3], seen[COUNT] = {0};
    assert_int_equal (cgq_pred_data_split (data, 3, 0.1, 0.2, "", true, err, sizeof err), 0);
    int first_val = cgq_pred_data_part (data, CGQ_PRED_VAL, &n[1])[0];
    for (int p = 0; p < 3; p++) {
        const int *idx = cgq_pred_data_part (data, (cgq_pred_part_t)p, &n[p]);
        for (int i = 0; i < n[p]; i++)
            seen[idx[i]]++;
    }
    for (int i = 0; i < COUNT; i++)
        assert_int_equal (seen[i], 1);
    assert_int_equal (n[1], 6);
    assert_int_equal (n[2], 12);
    assert_int_equal (cgq_pred_data_split (data, 3, 0.1, 0.2, "", true, err, sizeof err), 0);
    assert_int_equal (cgq_pred_data_part (data, CGQ_PRED_VAL, &n[1])[0], first_val);
    // By family: the test part is exactly that family.
    assert_int_equal (cgq_pred_data_split (data, 3, 0.1, 0.2, "resnet", true, err, sizeof err), 0);
    const int *test = cgq_pred_data_part (data, CGQ_PRED_TEST, &n[2]);
    assert_int_equal (n[2], COUNT / 5);
    for (int i = 0; i < n[2]; i++)
        assert_string_equal (cgq_pred_data_family (data, test[i]), "resnet");
    const int *train = cgq_pred_data_part (data, CGQ_PRED_TRAIN, &n[0]);
    for (int i = 0; i < n[0]; i++)
        assert_string_not_equal (cgq_pred_data_family (data, train[i]), "resnet");
    assert_int_equal (cgq_pred_data_split (data, 3, 0.1, 0.2, "alexnet", true, err, sizeof err),
                      -1);
    assert_non_null (strstr (err, "families: "));
    // The normalised target inverts.
    assert_true (fabs (cgq_pred_data_latency (data, cgq_pred_data_target (data, 5)) -
                       cgq_pred_data_label (data, 5)) < 1e-9 * cgq_pred_data_label (data, 5));
    cgq_pred_data_destroy (&data);
}

static void
test_config (void **state)
{
    cgq_pred_config_t cfg;
    cgq_pred_config_default (&cfg);
    char err[512];
    assert_int_equal (cgq_pred_config_set (&cfg, "hidden", "128", err, sizeof err), 0);
    assert_int_equal (cfg.hidden, 128);
    assert_int_equal (cgq_pred_config_set (&cfg, "aggregation", "gcn", err, sizeof err), 0);
    assert_int_equal (cfg.agg, CGQ_PRED_AGG_GCN);
    assert_int_equal (cgq_pred_config_set (&cfg, "hidden", "1.5", err, sizeof err), -1);
    assert_int_equal (cgq_pred_config_set (&cfg, "aggregation", "max", err, sizeof err), -1);
    assert_int_equal (cgq_pred_config_set (&cfg, "hiden", "3", err, sizeof err), -1);
    assert_non_null (strstr (err, "expected one of: layers, hidden"));
    json_t *p = json_pack ("{s:f, s:i, s:s, s:b}", "lr", 0.01, "layers", 4, "readout", "mean",
                           "log_target", 0);
    assert_int_equal (cgq_pred_config_set_json (&cfg, p, err, sizeof err), 0);
    assert_true (cfg.lr == 0.01 && cfg.layers == 4 && cfg.readout_mean && !cfg.log_target);
    json_decref (p);
    // The defaults (issue 29): node costs, the additive readout, 100 epochs.
    cgq_pred_config_t d;
    cgq_pred_config_default (&d);
    assert_true (d.node_costs && d.readout_additive && !d.readout_mean && d.node_loss == 0 &&
                 d.epochs == 100);
    assert_int_equal (cgq_pred_config_set (&cfg, "readout", "additive", err, sizeof err), 0);
    assert_true (cfg.readout_additive && !cfg.readout_mean);
    assert_int_equal (cgq_pred_config_set (&cfg, "readout", "max", err, sizeof err), -1);
    assert_non_null (strstr (err, "sum, mean or additive"));
    assert_int_equal (cgq_pred_config_set (&cfg, "node_loss", "-1", err, sizeof err), -1);
    assert_int_equal (cgq_pred_config_set (&cfg, "node_loss", "0.5", err, sizeof err), 0);
    assert_int_equal (cgq_pred_config_set (&cfg, "node_costs", "false", err, sizeof err), 0);
    // What the saved model holds reads back into the same config.
    json_t *o = cgq_pred_config_json (&cfg);
    cgq_pred_config_t back;
    cgq_pred_config_default (&back);
    assert_int_equal (cgq_pred_config_set_json (&back, o, err, sizeof err), 0);
    assert_true (
        back.layers == cfg.layers && back.hidden == cfg.hidden && back.agg == cfg.agg &&
        back.readout_mean == cfg.readout_mean && back.readout_additive == cfg.readout_additive &&
        back.node_costs == cfg.node_costs && back.node_loss == cfg.node_loss && back.lr == cfg.lr &&
        back.weight_decay == cfg.weight_decay && back.dropout == cfg.dropout &&
        back.batch_size == cfg.batch_size && back.epochs == cfg.epochs && back.seed == cfg.seed &&
        back.log_target == cfg.log_target && back.val_frac == cfg.val_frac &&
        back.test_frac == cfg.test_frac && back.label == cfg.label &&
        back.max_graphs == cfg.max_graphs && back.select == cfg.select);
    assert_string_equal (back.test_family, cfg.test_family);
    json_decref (o);
}

static void
test_save (void **state)
{
    char err[512];
    cgq_pred_data_t *data = cgq_pred_data_load (s_dir, 0, 0, err, sizeof err);
    assert_non_null (data);
    cgq_pred_config_t cfg;
    cgq_pred_config_default (&cfg);
    cfg.epochs = 2;
    cfg.hidden = 8;
    cgq_pred_result_t r;
    char *out = cgq_xasprintf ("%s/model", s_dir);
    assert_int_equal (cgq_pred_train (&cfg, data, out, NULL, NULL, &r, err, sizeof err), 0);
    char *path = cgq_xasprintf ("%s/model.json", out);
    json_error_t je;
    json_t *m = json_load_file (path, 0, &je);
    assert_non_null (m);
    assert_int_equal (
        json_integer_value (json_object_get (json_object_get (m, "config"), "hidden")), 8);
    json_int_t np = json_integer_value (json_object_get (m, "params"));
    free (path);
    path = cgq_xasprintf ("%s/model.f32", out);
    struct stat st;
    assert_int_equal (stat (path, &st), 0);
    assert_int_equal (st.st_size, np * 4);
    json_decref (m);
    free (path);
    free (out);
    cgq_pred_data_destroy (&data);
}


// The saved model, read back by cgq_pred_model_load and applied by
// cgq_pred_model_predict to the dataset read for prediction, reproduces the
// test metrics training reported for its best epoch; one graph alone gets the
// prediction it gets inside the dataset; broken model files are refused.
static void
test_predict_saved (void **state)
{
    char err[512];
    cgq_pred_data_t *data = cgq_pred_data_load (s_dir, 0, 0, err, sizeof err);
    assert_non_null (data);
    cgq_pred_config_t cfg;
    cgq_pred_config_default (&cfg);
    cfg.epochs = 6;
    cfg.hidden = 16;
    cfg.layers = 2;
    cfg.agg = CGQ_PRED_AGG_SUM;
    cfg.val_frac = 0.2;
    cfg.test_frac = 0.2;
    cfg.seed = 7;
    cgq_pred_result_t r;
    char *out = cgq_xasprintf ("%s/predict-model", s_dir);
    assert_int_equal (cgq_pred_train (&cfg, data, out, NULL, NULL, &r, err, sizeof err), 0);
    int ntest;
    const int *test = cgq_pred_data_part (data, CGQ_PRED_TEST, &ntest);
    int *tidx = cgq_xcalloc ((size_t)ntest, sizeof *tidx);
    memcpy (tidx, test, (size_t)ntest * sizeof *tidx);
    cgq_pred_data_destroy (&data);

    cgq_pred_model_t *m = cgq_pred_model_load (out, err, sizeof err);
    if (!m)
        print_message ("%s\n", err);
    assert_non_null (m);
    assert_int_equal (m->config.hidden, 16);
    assert_int_equal (m->config.agg, CGQ_PRED_AGG_SUM);
    cgq_pred_data_t *all = cgq_pred_data_read (s_dir, 0, err, sizeof err);
    assert_non_null (all);
    assert_int_equal (cgq_pred_data_count (all), COUNT);
    double pred[COUNT], p[COUNT], y[COUNT];
    assert_int_equal (cgq_pred_model_predict (m, all, pred, err, sizeof err), 0);
    for (int i = 0; i < ntest; i++) {
        p[i] = pred[tidx[i]];
        y[i] = cgq_pred_data_label (all, tidx[i]);
    }
    cgq_pred_metrics_t back;
    cgq_pred_metrics (p, y, (size_t)ntest, &back);
    print_message ("test MAPE trained %.6f, saved model %.6f; SRCC %.6f / %.6f\n", r.test.mape,
                   back.mape, r.test.srcc, back.srcc);
    assert_true (fabs (back.mape - r.test.mape) <= 1e-3 * fabs (r.test.mape) + 1e-9);
    assert_true (fabs (back.mae - r.test.mae) <= 1e-3 * fabs (r.test.mae) + 1e-9);
    assert_true (fabs (back.srcc - r.test.srcc) <= 1e-6);

    // One graph alone: the same prediction as inside the dataset.
    cgq_cg_gen_opts_t o;
    cgq_cg_gen_opts_default (&o);
    o.family = (cgq_cg_family_t)(tidx[0] % CGQ_CG_FAMILY_COUNT);
    o.seed = (uint64_t)tidx[0];
    o.max_res = 64;
    cgq_cg_graph_t *g = cgq_cg_gen (&o, err, sizeof err);
    assert_non_null (g);
    char *gpath = cgq_xasprintf ("%s/one.json", s_dir);
    assert_int_equal (cgq_cg_graph_save (g, gpath, err, sizeof err), 0);
    cgq_cg_graph_destroy (&g);
    cgq_pred_data_t *one = cgq_pred_data_read (gpath, 0, err, sizeof err);
    assert_non_null (one);
    assert_int_equal (cgq_pred_data_count (one), 1);
    assert_true (isnan (cgq_pred_data_label (one, 0)));
    double p1;
    assert_int_equal (cgq_pred_model_predict (m, one, &p1, err, sizeof err), 0);
    assert_true (fabs (p1 - pred[tidx[0]]) <= 1e-4 * pred[tidx[0]]);
    cgq_pred_data_destroy (&one);
    cgq_pred_model_destroy (&m);
    assert_null (m);

    // Broken models: a weights name that leaves the model's directory, a
    // truncated weights file, then a format of another version.
    char *j = cgq_xasprintf ("%s/model.json", out);
    json_error_t je;
    json_t *doc = json_load_file (j, 0, &je);
    assert_non_null (doc);
    json_object_set_new (doc, "weights", json_string ("../model.f32"));
    assert_int_equal (json_dump_file (doc, j, 0), 0);
    assert_null (cgq_pred_model_load (out, err, sizeof err));
    assert_non_null (strstr (err, "beside it"));
    json_object_set_new (doc, "weights", json_string ("model.f32"));
    assert_int_equal (json_dump_file (doc, j, 0), 0);
    json_decref (doc);
    m = cgq_pred_model_load (out, err, sizeof err);
    assert_non_null (m); // put back as it was: it loads again
    cgq_pred_model_destroy (&m);
    char *w = cgq_xasprintf ("%s/model.f32", out);
    // The halves of two saves (a crash between its renames): the weights of
    // another training beside this model.json are refused, not used.
    char *out2 = cgq_xasprintf ("%s/predict-model-2", s_dir);
    cfg.seed = 8;
    cgq_pred_data_t *again = cgq_pred_data_load (s_dir, 0, 0, err, sizeof err);
    assert_int_equal (cgq_pred_train (&cfg, again, out2, NULL, NULL, &r, err, sizeof err), 0);
    cgq_pred_data_destroy (&again);
    char *w2 = cgq_xasprintf ("%s/model.f32", out2);
    char *mv = cgq_xasprintf ("cp '%s' '%s.keep' && cp '%s' '%s'", w, w, w2, w);
    assert_int_equal (system (mv), 0);
    assert_null (cgq_pred_model_load (out, err, sizeof err));
    assert_non_null (strstr (err, "does not belong to"));
    free (mv);
    mv = cgq_xasprintf ("mv '%s.keep' '%s'", w, w);
    assert_int_equal (system (mv), 0);
    m = cgq_pred_model_load (out, err, sizeof err);
    assert_non_null (m);
    cgq_pred_model_destroy (&m);
    free (mv);
    free (w2);
    free (out2);
    assert_int_equal (truncate (w, 12), 0);
    assert_null (cgq_pred_model_load (out, err, sizeof err));
    assert_non_null (strstr (err, "float32 weights"));
    FILE *f = fopen (j, "w");
    assert_non_null (f);
    fputs ("{\"format\": \"cgq-predictor-model\", \"version\": 3}", f);
    fclose (f);
    assert_null (cgq_pred_model_load (j, err, sizeof err));
    assert_non_null (strstr (err, "version 1 to 2"));
    assert_null (cgq_pred_data_read ("/nonexistent/x", 0, err, sizeof err));
    free (w);
    free (j);
    free (gpath);
    free (tidx);
    cgq_pred_data_destroy (&all);
    free (out);
}

// A model with every new option (additive readout, node costs, node loss)
// saved and read back predicts what training evaluated.
static void
test_additive_saved (void **state)
{
    char err[512];
    cgq_pred_data_t *data = cgq_pred_data_load (s_ndir, 0, 0, err, sizeof err);
    assert_non_null (data);
    cgq_pred_config_t cfg;
    cgq_pred_config_default (&cfg);
    cfg.epochs = 6;
    cfg.hidden = 16;
    cfg.layers = 2;
    cfg.readout_additive = true;
    cfg.node_loss = 0.5;
    cfg.val_frac = 0.2;
    cfg.test_frac = 0.2;
    cfg.seed = 5;
    cgq_pred_result_t r;
    char *out = cgq_xasprintf ("%s/additive-model", s_dir);
    assert_int_equal (cgq_pred_train (&cfg, data, out, NULL, NULL, &r, err, sizeof err), 0);
    int ntest;
    const int *test = cgq_pred_data_part (data, CGQ_PRED_TEST, &ntest);
    int tidx[COUNT];
    memcpy (tidx, test, (size_t)ntest * sizeof *tidx);
    cgq_pred_data_destroy (&data);
    cgq_pred_model_t *m = cgq_pred_model_load (out, err, sizeof err);
    if (!m)
        fail_msg ("%s", err);
    assert_true (m->config.readout_additive && m->config.node_costs && m->config.node_loss == 0.5);
    assert_int_equal (m->in_dim, CGQ_PRED_IN_DIM_COSTS);
    assert_true (m->node_shift > 3 && m->node_shift < 6); // log of ~90 nodes
    cgq_pred_data_t *all = cgq_pred_data_read (s_ndir, 0, err, sizeof err);
    assert_non_null (all);
    double pred[COUNT], p[COUNT], y[COUNT];
    assert_int_equal (cgq_pred_model_predict (m, all, pred, err, sizeof err), 0);
    for (int i = 0; i < ntest; i++) {
        p[i] = pred[tidx[i]];
        y[i] = cgq_pred_data_label (all, tidx[i]);
    }
    cgq_pred_metrics_t back;
    cgq_pred_metrics (p, y, (size_t)ntest, &back);
    print_message ("additive: test MAPE trained %.6f, saved model %.6f\n", r.test.mape, back.mape);
    assert_true (fabs (back.mape - r.test.mape) <= 1e-3 * fabs (r.test.mape) + 1e-9);
    assert_true (fabs (back.srcc - r.test.srcc) <= 1e-6);
    // Its nodes' latencies, positive, sum to the graph's.
    for (int t = 0; t < ntest; t++) {
        int nodes;
        cgq_pred_data_nodes (all, tidx[t], &nodes);
        double *ms = cgq_xcalloc ((size_t)nodes, sizeof *ms), sum = 0;
        assert_int_equal (cgq_pred_model_predict_nodes (m, all, tidx[t], ms), 0);
        for (int k = 0; k < nodes; k++) {
            assert_true (ms[k] > 0);
            sum += ms[k];
        }
        assert_true (fabs (sum - pred[tidx[t]]) <= 1e-5 * pred[tidx[t]]);
        free (ms);
    }
    cgq_pred_model_destroy (&m);

    // An in_dim that disagrees with the config is refused, not misread.
    char *j = cgq_xasprintf ("%s/model.json", out);
    json_error_t je;
    json_t *doc = json_load_file (j, 0, &je);
    assert_non_null (doc);
    json_object_set_new (doc, "in_dim", json_integer (CGQ_PRED_IN_DIM));
    assert_int_equal (json_dump_file (doc, j, 0), 0);
    assert_null (cgq_pred_model_load (out, err, sizeof err));
    assert_non_null (strstr (err, "in_dim is 32"));
    json_object_del (doc, "in_dim");
    assert_int_equal (json_dump_file (doc, j, 0), 0);
    assert_null (cgq_pred_model_load (out, err, sizeof err));
    assert_non_null (strstr (err, "in_dim is missing"));
    json_decref (doc);
    free (j);
    cgq_pred_data_destroy (&all);
    free (out);
}

// A model saved in format version 1 (32 inputs, no in_dim, no node_costs in
// its config; predictor/testdata/README.md) still loads, as a model without
// node costs, and predicts what the version that wrote it predicted.
static void
test_v1_model_loads (void **state)
{
    char err[512];
    cgq_pred_model_t *m = cgq_pred_model_load (CGQ_PRED_TESTDATA "/model-v1", err, sizeof err);
    if (!m)
        fail_msg ("%s", err);
    assert_false (m->config.node_costs);
    assert_false (m->config.readout_additive);
    assert_int_equal (m->in_dim, CGQ_PRED_IN_DIM);
    static const char *graphs[] = {"one.json", "two.json"};
    static const double want[] = {8848835.324, 22729158.01};
    for (int i = 0; i < 2; i++) {
        char *path = cgq_xasprintf ("%s/%s", CGQ_PRED_TESTDATA, graphs[i]);
        cgq_pred_data_t *one = cgq_pred_data_read (path, 0, err, sizeof err);
        assert_non_null (one);
        double p;
        assert_int_equal (cgq_pred_model_predict (m, one, &p, err, sizeof err), 0);
        print_message ("%s: %.10g ms (version 1 said %.10g)\n", graphs[i], p, want[i]);
        assert_true (fabs (p - want[i]) <= 1e-6 * want[i]);
        double ms[256];
        assert_int_equal (cgq_pred_model_predict_nodes (m, one, 0, ms), -1); // a sum readout
        cgq_pred_data_destroy (&one);
        free (path);
    }
    cgq_pred_model_destroy (&m);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_config),
        cmocka_unit_test (test_split),
        cmocka_unit_test (test_train_mean),
        cmocka_unit_test (test_train_sum),
        cmocka_unit_test (test_train_gcn),
        cmocka_unit_test (test_save),
        cmocka_unit_test (test_predict_saved),
        cmocka_unit_test (test_train_additive),
        cmocka_unit_test (test_node_loss_refused),
        cmocka_unit_test (test_node_cost_inputs),
        cmocka_unit_test (test_additive_saved),
        cmocka_unit_test (test_v1_model_loads),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
