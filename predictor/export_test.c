// export_test: measurement results (as cgq results --format json gives them)
// become a CG dataset whose graphs are the measured models and whose labels
// are the measured times.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "data.h"
#include "dataset.h"
#include "export.h"
#include "gen.h"
#include "util.h"

static json_t *
s_trial (int id, const char *state, cgq_cg_family_t fam, int seed, double ms, const char *model)
{
    char name[96];
    if (!model) {
        cgq_cg_gen_opts_t o;
        cgq_cg_gen_opts_default (&o);
        o.family = fam;
        o.seed = (uint64_t)seed;
        char err[256];
        cgq_cg_graph_t *g = cgq_cg_gen (&o, err, sizeof err); // resolution drawn, as the runner
        assert_non_null (g);
        snprintf (name, sizeof name, "%s", cgq_cg_graph_name (g));
        cgq_cg_graph_destroy (&g);
        model = name;
    }
    return json_pack ("{s:i, s:s, s:{s:s, s:i}, s:{s:f, s:s}}", "id", id, "state", state, "params",
                      "family", cgq_cg_family_name (fam), "seed", seed, "metrics", "time", ms,
                      "model", model);
}

static void
test_export (void **state)
{
    char dir[64];
    snprintf (dir, sizeof dir, "/tmp/cgq-export-test-XXXXXX");
    assert_non_null (mkdtemp (dir));
    json_t *trials = json_array ();
    // Out of id order, one failed trial among them.
    json_array_append_new (trials, s_trial (3, "succeeded", CGQ_CG_VGG, 7, 9.5, NULL));
    json_array_append_new (trials, s_trial (1, "succeeded", CGQ_CG_RESNET, 4, 2.25, NULL));
    json_array_append_new (trials, s_trial (2, "failed", CGQ_CG_RESNET, 5, 1, NULL));
    json_array_append_new (trials, s_trial (0, "succeeded", CGQ_CG_SHUFFLENETV2, 11, 0.5, NULL));
    json_t *doc = json_pack ("{s:i, s:o}", "job", 1, "trials", trials);
    char err[512];
    assert_int_equal (cgq_pred_export (doc, dir, err, sizeof err), 3);
    cgq_cg_dataset_t *ds = cgq_cg_dataset_read (dir, err, sizeof err);
    assert_non_null (ds);
    assert_int_equal (cgq_cg_dataset_count (ds), 3);
    assert_int_equal (cgq_cg_dataset_num_labels (ds), 3);
    const double want[] = {0.5, 2.25, 9.5};
    const cgq_cg_family_t fams[] = {CGQ_CG_SHUFFLENETV2, CGQ_CG_RESNET, CGQ_CG_VGG};
    const int seeds[] = {11, 4, 7};
    for (int i = 0; i < 3; i++) {
        cgq_cg_sample_t s;
        assert_int_equal (cgq_cg_dataset_get (ds, i, &s), 0);
        assert_true (s.labels[0] == want[i]);
        // The graph is the one measured: the runner's model (resolution
        // drawn), node for node, not just one of the same name.
        cgq_cg_gen_opts_t o;
        cgq_cg_gen_opts_default (&o);
        o.family = fams[i];
        o.seed = (uint64_t)seeds[i];
        cgq_cg_graph_t *g = cgq_cg_gen (&o, err, sizeof err);
        assert_non_null (g);
        cgq_cg_dataset_t *one = cgq_cg_dataset_new (CGQ_CG_NUM_FEATS, 1);
        double l = 0;
        assert_int_equal (cgq_cg_dataset_append_graph (one, g, &l, err, sizeof err), 0);
        cgq_cg_sample_t t;
        assert_int_equal (cgq_cg_dataset_get (one, 0, &t), 0);
        assert_int_equal (s.nodes, t.nodes);
        assert_int_equal (s.edges, t.edges);
        assert_memory_equal (s.feats, t.feats, (size_t)s.nodes * CGQ_CG_NUM_FEATS * sizeof (double));
        assert_true (s.labels[1] == (double)cgq_cg_graph_flops (g));
        cgq_cg_dataset_destroy (&one);
        cgq_cg_graph_destroy (&g);
    }
    cgq_cg_dataset_destroy (&ds);
    cgq_pred_data_t *d = cgq_pred_data_load (dir, 0, 0, err, sizeof err);
    assert_non_null (d);
    assert_string_equal (cgq_pred_data_family (d, 0), "shufflenetv2");
    assert_string_equal (cgq_pred_data_family (d, 1), "resnet");
    assert_string_equal (cgq_pred_data_family (d, 2), "vgg");
    cgq_pred_data_destroy (&d);

    // A model name that does not match what the params build is an error.
    json_array_append_new (trials, s_trial (4, "succeeded", CGQ_CG_VGG, 8, 3, "vgg-s9-r64"));
    assert_int_equal (cgq_pred_export (doc, dir, err, sizeof err), -1);
    assert_non_null (strstr (err, "trial 4"));
    json_decref (doc);
    char *cmd = cgq_xasprintf ("rm -rf '%s'", dir);
    assert_int_equal (system (cmd), 0);
    free (cmd);
}

// A job measured in two passes: columns 3 and 4 are each pass's time;
// passes for some trials only is an error.
static void
test_export_passes (void **state)
{
    (void)state;
    char dir[64];
    snprintf (dir, sizeof dir, "/tmp/cgq-export-test-XXXXXX");
    assert_non_null (mkdtemp (dir));
    json_t *trials = json_array ();
    const double p1[] = {1.0, 4.0}, p2[] = {1.2, 3.0};
    for (int i = 0; i < 2; i++) {
        json_t *t = s_trial (i, "succeeded", CGQ_CG_RESNET, 20 + i, (p1[i] + p2[i]) / 2, NULL);
        json_t *m = json_object_get (t, "metrics");
        json_object_set_new (m, "time_pass1", json_real (p1[i]));
        json_object_set_new (m, "time_pass2", json_real (p2[i]));
        json_array_append_new (trials, t);
    }
    json_t *doc = json_pack ("{s:o}", "trials", trials);
    char err[512];
    assert_int_equal (cgq_pred_export (doc, dir, err, sizeof err), 2);
    cgq_cg_dataset_t *ds = cgq_cg_dataset_read (dir, err, sizeof err);
    assert_non_null (ds);
    assert_int_equal (cgq_cg_dataset_num_labels (ds), 5);
    for (int i = 0; i < 2; i++) {
        cgq_cg_sample_t s;
        assert_int_equal (cgq_cg_dataset_get (ds, i, &s), 0);
        assert_true (s.labels[0] == (p1[i] + p2[i]) / 2);
        assert_true (s.labels[3] == p1[i]);
        assert_true (s.labels[4] == p2[i]);
    }
    cgq_cg_dataset_destroy (&ds);
    json_array_append_new (trials, s_trial (2, "succeeded", CGQ_CG_VGG, 3, 2.0, NULL));
    assert_int_equal (cgq_pred_export (doc, dir, err, sizeof err), -1);
    assert_non_null (strstr (err, "both passes for every graph or for none"));
    json_decref (doc);
    char *cmd = cgq_xasprintf ("rm -rf '%s'", dir);
    assert_int_equal (system (cmd), 0);
    free (cmd);
}

// Trials with metric node_ms: node-label.csv.gz, one line per node; a
// wrong count, or node times for some trials only, are errors.
static void
test_export_node_times (void **state)
{
    char dir[64];
    snprintf (dir, sizeof dir, "/tmp/cgq-export-test-XXXXXX");
    assert_non_null (mkdtemp (dir));
    json_t *trials = json_array ();
    size_t total = 0;
    for (int i = 0; i < 2; i++) {
        json_t *t = s_trial (i, "succeeded", CGQ_CG_RESNET, i, 1.5, NULL);
        const char *model = json_string_value (json_object_get (json_object_get (t, "metrics"), "model"));
        int res = atoi (strrchr (model, 'r') + 1);
        cgq_cg_gen_opts_t o;
        cgq_cg_gen_opts_default (&o);
        o.family = CGQ_CG_RESNET;
        o.seed = (uint64_t)i;
        o.resolution = res;
        char err[256];
        cgq_cg_graph_t *g = cgq_cg_gen (&o, err, sizeof err);
        json_t *nm = json_array ();
        for (int j = 0; j < cgq_cg_graph_size (g); j++)
            json_array_append_new (nm, json_real (0.001 * j + i));
        total += (size_t)cgq_cg_graph_size (g);
        json_object_set_new (json_object_get (t, "metrics"), "node_ms", nm);
        cgq_cg_graph_destroy (&g);
        json_array_append_new (trials, t);
    }
    char err[512];
    assert_int_equal (cgq_pred_export (trials, dir, err, sizeof err), 2);
    double *nl = cgq_cg_dataset_read_node_labels (dir, total, err, sizeof err);
    if (!nl)
        fail_msg ("%s", err);
    assert_true (nl[0] == 0 && nl[2] == 0.002 && nl[total - 1] > 1);
    free (nl);
    cgq_pred_data_t *d = cgq_pred_data_read (dir, 0, err, sizeof err); // 2 graphs: not to train
    if (!d)
        fail_msg ("%s", err);
    assert_non_null (cgq_pred_data_node_labels (d, 1));
    assert_true (cgq_pred_data_node_labels (d, 1)[0] == 1);
    cgq_pred_data_destroy (&d);
    // One node time too few.
    json_t *nm = json_object_get (json_object_get (json_array_get (trials, 1), "metrics"), "node_ms");
    json_array_remove (nm, 0);
    assert_int_equal (cgq_pred_export (trials, dir, err, sizeof err), -1);
    assert_non_null (strstr (err, "trial 1: metric node_ms must be"));
    // Node times for one trial of two.
    json_object_del (json_object_get (json_array_get (trials, 1), "metrics"), "node_ms");
    assert_int_equal (cgq_pred_export (trials, dir, err, sizeof err), -1);
    assert_non_null (strstr (err, "1 of the 2 succeeded trials have metric node_ms"));
    json_decref (trials);
    char *cmd = cgq_xasprintf ("rm -rf '%s'", dir);
    assert_int_equal (system (cmd), 0);
    free (cmd);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_export),
        cmocka_unit_test (test_export_node_times),
        cmocka_unit_test (test_export_passes),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
