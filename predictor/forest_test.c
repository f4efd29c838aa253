// forest_test: predictor/forest.c against scikit-learn on fixed data
// (forest_expected.py wrote forest_expected.h): single trees with every
// feature tried and no bootstrap give sklearn's tree exactly (node count and
// every test prediction); a forest's test MSE lies within 25 % of sklearn's
// forest's (different random streams, same method); gradient boosting gives
// sklearn's predictions; seeds repeat; JSON
// round-trips exactly and damaged JSON is refused.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "forest.h"
#include "forest_expected.h"

static cgq_pred_forest_t *
s_tree (int max_depth, int min_leaf)
{
    cgq_pred_forest_opts_t o;
    cgq_pred_forest_opts_default (&o);
    o.n_estimators = 1;
    o.bootstrap = false;
    o.max_features = 1.0;
    o.max_depth = max_depth;
    o.min_samples_leaf = min_leaf;
    return cgq_pred_forest_fit (s_xtr, s_ytr, S_N_TRAIN, S_D, &o);
}

static void
s_same_as_sklearn (const char *name, cgq_pred_forest_t *f, int nodes, const double *pred)
{
    if (cgq_pred_forest_nodes (f) != nodes)
        fail_msg ("%s: %d nodes, sklearn's tree has %d", name, cgq_pred_forest_nodes (f), nodes);
    for (int i = 0; pred && i < S_N_TEST; i++) {
        double p = cgq_pred_forest_predict (f, s_xte + i * S_D);
        if (fabs (p - pred[i]) > 1e-12 * (1 + fabs (pred[i])))
            fail_msg ("%s: test sample %d: %.17g, sklearn says %.17g", name, i, p, pred[i]);
    }
}

static void
test_tree_matches_sklearn (void **state)
{
    cgq_pred_forest_t *f = s_tree (0, 5);
    s_same_as_sklearn ("leaf5", f, s_leaf5_nodes, s_leaf5_pred);
    cgq_pred_forest_destroy (&f);
    f = s_tree (4, 1);
    s_same_as_sklearn ("depth4", f, s_depth4_nodes, s_depth4_pred);
    cgq_pred_forest_destroy (&f);
    // Fully grown: its 2-sample nodes tie between features, which sklearn
    // breaks by its own random order, so only the shape is compared.
    f = s_tree (0, 1);
    s_same_as_sklearn ("full", f, s_full_nodes, NULL);
    for (int i = 0; i < S_N_TRAIN; i++)
        assert_true (cgq_pred_forest_predict (f, s_xtr + i * S_D) == s_ytr[i]);
    cgq_pred_forest_destroy (&f);
    cgq_pred_forest_destroy (&f); // NULL-safe
}

static double
s_mse (const cgq_pred_forest_t *f)
{
    double s = 0;
    for (int i = 0; i < S_N_TEST; i++) {
        double e = cgq_pred_forest_predict (f, s_xte + i * S_D) - s_yte[i];
        s += e * e;
    }
    return s / S_N_TEST;
}

static void
test_forest_near_sklearn (void **state)
{
    cgq_pred_forest_opts_t o;
    cgq_pred_forest_opts_default (&o);
    o.n_estimators = 100;
    o.max_features = 0.6;
    o.min_samples_leaf = 2;
    o.seed = 3;
    cgq_pred_forest_t *f = cgq_pred_forest_fit (s_xtr, s_ytr, S_N_TRAIN, S_D, &o);
    double mse = s_mse (f);
    print_message ("forest test MSE %.4f, sklearn's %.4f, the mean's %.4f\n", mse, s_forest_mse,
                   s_mean_mse);
    assert_true (fabs (mse - s_forest_mse) <= 0.25 * s_forest_mse);
    // The same seed, the same forest; another seed, another one.
    cgq_pred_forest_t *g = cgq_pred_forest_fit (s_xtr, s_ytr, S_N_TRAIN, S_D, &o);
    o.seed = 4;
    cgq_pred_forest_t *h = cgq_pred_forest_fit (s_xtr, s_ytr, S_N_TRAIN, S_D, &o);
    bool differ = false;
    for (int i = 0; i < S_N_TEST; i++) {
        assert_true (cgq_pred_forest_predict (f, s_xte + i * S_D) ==
                     cgq_pred_forest_predict (g, s_xte + i * S_D));
        differ = differ || cgq_pred_forest_predict (f, s_xte + i * S_D) !=
                               cgq_pred_forest_predict (h, s_xte + i * S_D);
    }
    assert_true (differ);
    // A stump is far from it: the bound above can fail.
    o.n_estimators = 1;
    o.max_depth = 1;
    cgq_pred_forest_t *stump = cgq_pred_forest_fit (s_xtr, s_ytr, S_N_TRAIN, S_D, &o);
    assert_true (s_mse (stump) > 1.25 * s_forest_mse);
    cgq_pred_forest_destroy (&stump);
    cgq_pred_forest_destroy (&h);
    cgq_pred_forest_destroy (&g);
    cgq_pred_forest_destroy (&f);
}

// Gradient boosting is deterministic (every feature, no subsample): the
// same test predictions as sklearn's GradientBoostingRegressor; and a JSON
// round trip keeps its start and learning rate.
static void
test_boosting_matches_sklearn (void **state)
{
    cgq_pred_forest_opts_t o;
    cgq_pred_forest_opts_default (&o);
    o.boost = true;
    o.n_estimators = 40;
    o.learning_rate = 0.1;
    o.min_samples_leaf = 5;
    cgq_pred_forest_t *f = cgq_pred_forest_fit (s_xtr, s_ytr, S_N_TRAIN, S_D, &o);
    for (int i = 0; i < S_N_TEST; i++) {
        double p = cgq_pred_forest_predict (f, s_xte + i * S_D);
        if (fabs (p - s_gbt_pred[i]) > 1e-9 * (1 + fabs (s_gbt_pred[i])))
            fail_msg ("boosting: test sample %d: %.17g, sklearn says %.17g", i, p, s_gbt_pred[i]);
    }
    json_t *j = cgq_pred_forest_json (f);
    char err[256];
    cgq_pred_forest_t *g = cgq_pred_forest_from_json (j, err, sizeof err);
    if (!g)
        fail_msg ("%s", err);
    for (int i = 0; i < S_N_TEST; i++)
        assert_true (cgq_pred_forest_predict (f, s_xte + i * S_D) ==
                     cgq_pred_forest_predict (g, s_xte + i * S_D));
    json_object_set_new (json_object_get (j, "boost"), "learning_rate", json_real (0));
    assert_null (cgq_pred_forest_from_json (j, err, sizeof err));
    assert_non_null (strstr (err, "learning_rate"));
    json_decref (j);
    cgq_pred_forest_destroy (&g);
    cgq_pred_forest_destroy (&f);
}

static void
test_json (void **state)
{
    cgq_pred_forest_opts_t o;
    cgq_pred_forest_opts_default (&o);
    o.n_estimators = 5;
    cgq_pred_forest_t *f = cgq_pred_forest_fit (s_xtr, s_ytr, S_N_TRAIN, S_D, &o);
    json_t *j = cgq_pred_forest_json (f);
    char *text = json_dumps (j, JSON_COMPACT);
    json_t *back = json_loads (text, 0, NULL);
    char err[256];
    cgq_pred_forest_t *g = cgq_pred_forest_from_json (back, err, sizeof err);
    if (!g)
        fail_msg ("%s", err);
    assert_int_equal (cgq_pred_forest_nodes (g), cgq_pred_forest_nodes (f));
    for (int i = 0; i < S_N_TEST; i++)
        assert_true (cgq_pred_forest_predict (f, s_xte + i * S_D) ==
                     cgq_pred_forest_predict (g, s_xte + i * S_D));
    cgq_pred_forest_destroy (&g);
    // A child pointing back up would loop forever: refused.
    json_t *tree = json_array_get (json_object_get (back, "trees"), 0);
    json_array_set_new (json_object_get (tree, "left"), 0, json_integer (0));
    assert_null (cgq_pred_forest_from_json (back, err, sizeof err));
    assert_non_null (strstr (err, "tree 0 node 0"));
    json_array_set_new (json_object_get (tree, "left"), 0, json_integer (1));
    json_array_set_new (json_object_get (tree, "value"), 3, json_string ("x"));
    assert_null (cgq_pred_forest_from_json (back, err, sizeof err));
    assert_non_null (strstr (err, "tree 0:"));
    json_object_set_new (back, "features", json_integer (0));
    assert_null (cgq_pred_forest_from_json (back, err, sizeof err));
    json_decref (back);
    free (text);
    json_decref (j);
    cgq_pred_forest_destroy (&f);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_tree_matches_sklearn),
        cmocka_unit_test (test_forest_near_sklearn),
        cmocka_unit_test (test_boosting_matches_sklearn),
        cmocka_unit_test (test_json),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
