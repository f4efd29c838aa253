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
#include "train.h"
#include "util.h"

enum { COUNT = 60 };

static char s_dir[64];

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
        fam[i] = cgq_cg_family_name (o.family);
        cgq_cg_graph_destroy (&g);
    }
    assert_int_equal (cgq_cg_dataset_write (ds, s_dir, err, sizeof err), 0);
    assert_int_equal (cgq_cg_dataset_write_families (s_dir, fam, COUNT, err, sizeof err), 0);
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
    int epochs;
} s_trace_t;

static int
s_on_epoch (void *arg, const cgq_pred_epoch_t *e)
{
    s_trace_t *t = arg;
    if (e->epoch == 1)
        t->first_loss = e->train_loss;
    t->last_loss = e->train_loss;
    t->epochs = e->epoch;
    assert_true (e->val.srcc >= -1 && e->val.srcc <= 1);
    assert_true (e->val.acc10 >= 0 && e->val.acc10 <= 100);
    return 0;
}

static void
s_train (cgq_pred_agg_t agg, double max_loss)
{
    char err[512];
    cgq_pred_data_t *data = cgq_pred_data_load (s_dir, 0, 0, err, sizeof err);
    assert_non_null (data);
    cgq_pred_config_t cfg;
    cgq_pred_config_default (&cfg);
    cfg.agg = agg;
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
    // What the saved model holds reads back into the same config.
    json_t *o = cgq_pred_config_json (&cfg);
    cgq_pred_config_t back;
    cgq_pred_config_default (&back);
    assert_int_equal (cgq_pred_config_set_json (&back, o, err, sizeof err), 0);
    assert_true (back.layers == cfg.layers && back.hidden == cfg.hidden && back.agg == cfg.agg &&
                 back.readout_mean == cfg.readout_mean && back.lr == cfg.lr &&
                 back.weight_decay == cfg.weight_decay && back.dropout == cfg.dropout &&
                 back.batch_size == cfg.batch_size && back.epochs == cfg.epochs &&
                 back.seed == cfg.seed && back.log_target == cfg.log_target &&
                 back.val_frac == cfg.val_frac && back.test_frac == cfg.test_frac &&
                 back.label == cfg.label && back.max_graphs == cfg.max_graphs &&
                 back.select == cfg.select);
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
    assert_int_equal (truncate (w, 12), 0);
    assert_null (cgq_pred_model_load (out, err, sizeof err));
    assert_non_null (strstr (err, "float32 weights"));
    FILE *f = fopen (j, "w");
    assert_non_null (f);
    fputs ("{\"format\": \"cgq-predictor-model\", \"version\": 2}", f);
    fclose (f);
    assert_null (cgq_pred_model_load (j, err, sizeof err));
    assert_non_null (strstr (err, "version 1"));
    assert_null (cgq_pred_data_read ("/nonexistent/x", 0, err, sizeof err));
    free (w);
    free (j);
    free (gpath);
    free (tidx);
    cgq_pred_data_destroy (&all);
    free (out);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_config),     cmocka_unit_test (test_split),
        cmocka_unit_test (test_train_mean), cmocka_unit_test (test_train_sum),
        cmocka_unit_test (test_train_gcn),  cmocka_unit_test (test_save),
        cmocka_unit_test (test_predict_saved),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
