// kernel_test: the kernel-level predictor on a generated dataset whose node
// times are a known function of each node's kernel config (so that the test
// does not depend on how busy the machine is) and whose graph latency is
// 1.2 x their sum + 0.05 ms: the forests learn the nodes, the calibration
// finds 1.2 and 0.05, the saved model reloads and predicts exactly the same,
// a graph with an op type the model never saw is refused with the op named,
// test_family holds a family out, and a dataset without node times is
// refused with what to do.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "data.h"
#include "dataset.h"
#include "gen.h"
#include "kernel.h"
#include "train.h"
#include "util.h"

static char s_dir[64];

// s_node_ms is a node's "time": FLOPs at 20 GFLOP/s plus bytes at 10 GB/s
// plus 2 us, a little different per op type.
static double
s_node_ms (const double *raw)
{
    float f[CGQ_PRED_KERNEL_FEATS];
    cgq_pred_kernel_features (raw, f);
    int code = (int)raw[0];
    if (code == 0)
        return 0;
    return (double)f[9] / 20e6 * (code == CGQ_CG_CODE_DWCONV2D ? 4 : 1) + (double)f[10] / 10e6 +
           0.002;
}

// s_make writes COUNT graphs of the given families into dir, with node
// times (unless no_nodes) and families.
static void
s_make (const char *dir, const cgq_cg_family_t *fams, int nfams, int count, bool no_nodes)
{
    cgq_cg_dataset_t *ds = cgq_cg_dataset_new (CGQ_CG_NUM_FEATS, 1);
    const char **names = cgq_xcalloc ((size_t)count, sizeof *names);
    double *node = NULL;
    size_t nnode = 0;
    char err[256];
    for (int i = 0; i < count; i++) {
        cgq_cg_gen_opts_t go;
        cgq_cg_gen_opts_default (&go);
        go.family = fams[i % nfams];
        go.seed = (uint64_t)i;
        go.max_res = 96;
        cgq_cg_graph_t *g = cgq_cg_gen (&go, err, sizeof err);
        assert_non_null (g);
        int n = cgq_cg_graph_size (g);
        node = cgq_xrealloc (node, sizeof (double) * (nnode + (size_t)n));
        double sum = 0;
        for (int k = 0; k < n; k++) {
            double raw[CGQ_CG_NUM_FEATS];
            cgq_cg_graph_features (g, k, raw);
            node[nnode + (size_t)k] = s_node_ms (raw);
            sum += node[nnode + (size_t)k];
        }
        nnode += (size_t)n;
        double label = 1.2 * sum + 0.05;
        assert_int_equal (cgq_cg_dataset_append_graph (ds, g, &label, err, sizeof err), 0);
        names[i] = cgq_cg_family_name (go.family);
        cgq_cg_graph_destroy (&g);
    }
    assert_int_equal (cgq_cg_dataset_write (ds, dir, err, sizeof err), 0);
    assert_int_equal (cgq_cg_dataset_write_families (dir, names, count, err, sizeof err), 0);
    if (!no_nodes)
        assert_int_equal (cgq_cg_dataset_write_node_labels (dir, node, nnode, err, sizeof err), 0);
    free (node);
    free (names);
    cgq_cg_dataset_destroy (&ds);
}

static void
s_rm (const char *dir)
{
    const char *files[] = {
        "num-node-list.csv.gz", "num-edge-list.csv.gz", "node-feat.csv.gz",     "edge.csv.gz",
        "graph-label.csv.gz",   CGQ_CG_FAMILY_FILE,     CGQ_CG_NODE_LABEL_FILE, "model.json"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char *p = cgq_xasprintf ("%s/%s", dir, files[i]);
        unlink (p);
        free (p);
    }
    rmdir (dir);
}

static int
s_setup (void **state)
{
    snprintf (s_dir, sizeof s_dir, "/tmp/kernel_test.XXXXXX");
    assert_non_null (mkdtemp (s_dir));
    static const cgq_cg_family_t fams[] = {CGQ_CG_MOBILENETV2, CGQ_CG_RESNET, CGQ_CG_VGG};
    s_make (s_dir, fams, 3, 90, false);
    return 0;
}

static int
s_teardown (void **state)
{
    s_rm (s_dir);
    return 0;
}

static int s_epochs;

static int
s_on_epoch (void *arg, const cgq_pred_epoch_t *e)
{
    s_epochs++;
    assert_int_equal (e->epoch, 1);
    return 0;
}

static void
s_cfg (cgq_pred_config_t *cfg)
{
    char err[256];
    cgq_pred_config_default (cfg);
    assert_int_equal (cgq_pred_config_set (cfg, "model", "kernel", err, sizeof err), 0);
    assert_int_equal (cgq_pred_config_set (cfg, "n_estimators", "20", err, sizeof err), 0);
    cfg->test_frac = 0.3;
}

static void
test_train_save_load_predict (void **state)
{
    char err[1024];
    cgq_pred_data_t *data = cgq_pred_data_load (s_dir, 0, 0, err, sizeof err);
    if (!data)
        fail_msg ("%s", err);
    cgq_pred_config_t cfg;
    s_cfg (&cfg);
    char *out = cgq_xasprintf ("%s", s_dir);
    cgq_pred_result_t r;
    s_epochs = 0;
    if (cgq_pred_train (&cfg, data, out, s_on_epoch, NULL, &r, err, sizeof err) < 0)
        fail_msg ("%s", err);
    assert_int_equal (s_epochs, 1);
    print_message ("kernel model: test acc10 %.1f %%, MAPE %.2f %%, SRCC %.4f (%d graphs)\n",
                   r.test.acc10, r.test.mape, r.test.srcc, r.ntest);
    // Node times are a function of the features: the sums come out close.
    assert_true (r.test.acc10 >= 80);
    assert_true (r.test.srcc >= 0.98);

    // Reloaded: the calibration is what the labels were made with, and every
    // graph gets exactly the prediction of the model that was trained.
    assert_true (cgq_pred_kernel_is (s_dir));
    cgq_pred_kernel_t *k = cgq_pred_kernel_load (s_dir, err, sizeof err);
    if (!k)
        fail_msg ("%s", err);
    double scale, offset;
    cgq_pred_kernel_calibration (k, &scale, &offset);
    print_message ("calibration: %.4f x sum + %.4f ms\n", scale, offset);
    assert_true (fabs (scale - 1.2) < 0.1 && fabs (offset - 0.05) < 0.05);
    int ntrain;
    const int *train = cgq_pred_data_part (data, CGQ_PRED_TRAIN, &ntrain);
    cgq_pred_kernel_t *fresh = cgq_pred_kernel_fit (&cfg, data, train, ntrain, err, sizeof err);
    assert_non_null (fresh);
    int n = cgq_pred_data_count (data);
    double *a = cgq_xcalloc ((size_t)n, sizeof *a), *b = cgq_xcalloc ((size_t)n, sizeof *b);
    assert_int_equal (cgq_pred_kernel_predict (k, data, NULL, n, a, err, sizeof err), 0);
    assert_int_equal (cgq_pred_kernel_predict (fresh, data, NULL, n, b, err, sizeof err), 0);
    assert_memory_equal (a, b, sizeof (double) * (size_t)n);
    // The GNN loader says what it is instead of reading garbage.
    assert_null (cgq_pred_model_load (s_dir, err, sizeof err));
    assert_non_null (strstr (err, "kernel-level model"));
    free (a);
    free (b);
    cgq_pred_kernel_destroy (&fresh);

    // A ShuffleNetV2 has slice and shuffle nodes, which it never saw.
    cgq_cg_gen_opts_t go;
    cgq_cg_gen_opts_default (&go);
    go.family = CGQ_CG_SHUFFLENETV2;
    cgq_cg_graph_t *g = cgq_cg_gen (&go, err, sizeof err);
    char *mpath = cgq_xasprintf ("%s/shufflenetv2.json", s_dir);
    assert_int_equal (cgq_cg_graph_save (g, mpath, err, sizeof err), 0);
    cgq_pred_data_t *one = cgq_pred_data_read (mpath, 0, err, sizeof err);
    assert_non_null (one);
    double p = -1;
    assert_int_equal (cgq_pred_kernel_predict (k, one, NULL, 1, &p, err, sizeof err), -1);
    assert_true (p == -1);
    assert_true (strstr (err, "op 'slice'") || strstr (err, "op 'shuffle'") ||
                 strstr (err, "op 'concat'"));
    assert_non_null (strstr (err, "never saw"));
    unlink (mpath);
    free (mpath);
    cgq_pred_data_destroy (&one);
    cgq_cg_graph_destroy (&g);
    cgq_pred_kernel_destroy (&k);
    cgq_pred_kernel_destroy (&k); // NULL-safe
    cgq_pred_data_destroy (&data);
    free (out);
}

static void
test_damaged_model (void **state)
{
    char err[1024];
    char *path = cgq_xasprintf ("%s/bad.json", s_dir);
    static const char *bad[] = {
        "{\"format\": \"cgq-predictor-model\", \"version\": 1, \"config\": {\"model\": "
        "\"kernel\"}, \"kernel\": {\"scale\": 1, \"offset\": 0, \"features\": [], \"ops\": {}}}",
        "{\"format\": \"cgq-predictor-model\", \"version\": 1, \"config\": {\"model\": "
        "\"kernel\"}, \"kernel\": {\"scale\": 1, \"offset\": 0, \"features\": "
        "[1,2,3,4,5,6,7,8,9,10,11], \"ops\": {\"relu\": {\"code\": 3, \"forest\": {}}}}}",
        "{\"format\": \"cgq-predictor-model\", \"version\": 1, \"config\": {\"model\": "
        "\"kernel\"}, \"kernel\": {\"scale\": 1, \"offset\": 0, \"features\": "
        "[1,2,3,4,5,6,7,8,9,10,11], \"ops\": {\"relu\": {\"code\": 2, \"forest\": "
        "{\"features\": 11, \"trees\": [{\"feature\": [0], \"threshold\": [0], \"left\": [0], "
        "\"right\": [0], \"value\": [1]}]}}}}}",
    };
    static const char *says[] = {"not a kernel model", "does not name that op", "tree 0 node 0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        FILE *f = fopen (path, "w");
        fputs (bad[i], f);
        fclose (f);
        assert_true (cgq_pred_kernel_is (path));
        assert_null (cgq_pred_kernel_load (path, err, sizeof err));
        if (!strstr (err, says[i]))
            fail_msg ("case %zu: '%s' does not say '%s'", i, err, says[i]);
        assert_non_null (strstr (err, path));
    }
    unlink (path);
    free (path);
}

static void
test_family_and_no_node_times (void **state)
{
    char err[1024];
    cgq_pred_data_t *data = cgq_pred_data_load (s_dir, 0, 0, err, sizeof err);
    assert_non_null (data);
    cgq_pred_config_t cfg;
    s_cfg (&cfg);
    snprintf (cfg.test_family, sizeof cfg.test_family, "vgg");
    cgq_pred_result_t r;
    if (cgq_pred_train (&cfg, data, NULL, NULL, NULL, &r, err, sizeof err) < 0)
        fail_msg ("%s", err);
    assert_int_equal (r.ntest, 30);
    print_message ("held-out vgg: acc10 %.1f %%, SRCC %.4f\n", r.test.acc10, r.test.srcc);
    // Gradient-boosted trees instead of forests: trained, saved, reloaded.
    cfg.test_family[0] = '\0';
    assert_int_equal (cgq_pred_config_set (&cfg, "regressor", "gbt", err, sizeof err), 0);
    assert_int_equal (cgq_pred_config_set (&cfg, "n_estimators", "60", err, sizeof err), 0);
    char *gdir = cgq_xasprintf ("%s/gbt", s_dir);
    if (cgq_pred_train (&cfg, data, gdir, NULL, NULL, &r, err, sizeof err) < 0)
        fail_msg ("%s", err);
    print_message ("gbt: test acc10 %.1f %%, SRCC %.4f\n", r.test.acc10, r.test.srcc);
    assert_true (r.test.srcc >= 0.95);
    cgq_pred_kernel_t *k = cgq_pred_kernel_load (gdir, err, sizeof err);
    if (!k)
        fail_msg ("%s", err);
    cgq_pred_kernel_destroy (&k);
    char *p = cgq_xasprintf ("%s/model.json", gdir);
    unlink (p);
    rmdir (gdir);
    free (p);
    free (gdir);
    assert_int_equal (cgq_pred_config_set (&cfg, "regressor", "trees", err, sizeof err), -1);
    assert_non_null (strstr (err, "expected forest or gbt"));
    cgq_pred_data_destroy (&data);

    char dir[64];
    snprintf (dir, sizeof dir, "/tmp/kernel_test.XXXXXX");
    assert_non_null (mkdtemp (dir));
    static const cgq_cg_family_t fams[] = {CGQ_CG_RESNET};
    s_make (dir, fams, 1, 5, true);
    data = cgq_pred_data_load (dir, 0, 0, err, sizeof err);
    assert_non_null (data);
    assert_int_equal (cgq_pred_train (&cfg, data, NULL, NULL, NULL, &r, err, sizeof err), -1);
    cfg.test_family[0] = '\0';
    assert_int_equal (cgq_pred_train (&cfg, data, NULL, NULL, NULL, &r, err, sizeof err), -1);
    assert_non_null (strstr (err, "no node-label.csv.gz"));
    assert_non_null (strstr (err, "--node-times"));
    cgq_pred_data_destroy (&data);
    s_rm (dir);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_train_save_load_predict),
        cmocka_unit_test (test_damaged_model),
        cmocka_unit_test (test_family_and_no_node_times),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
