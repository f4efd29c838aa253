// The generator: same seed, same graph; different seeds, different graphs;
// every family builds at the smallest and a large resolution; options.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gen.h"
#include "graph.h"

static cgq_cg_graph_t *
s_gen (cgq_cg_family_t family, uint64_t seed, int res, bool fold_bn)
{
    cgq_cg_gen_opts_t o;
    cgq_cg_gen_opts_default (&o);
    o.family = family;
    o.seed = seed;
    o.resolution = res;
    o.fold_bn = fold_bn;
    char err[256];
    cgq_cg_graph_t *g = cgq_cg_gen (&o, err, sizeof err);
    if (!g)
        fail_msg ("%s seed %llu: %s", cgq_cg_family_name (family), (unsigned long long) seed, err);
    return g;
}

static void
test_same_seed_same_graph (void **state)
{
    for (int f = 0; f < CGQ_CG_FAMILY_COUNT; f++)
        for (uint64_t seed = 0; seed < 4; seed++) {
            cgq_cg_graph_t *a = s_gen ((cgq_cg_family_t) f, seed, 0, true);
            cgq_cg_graph_t *b = s_gen ((cgq_cg_family_t) f, seed, 0, true);
            assert_true (cgq_cg_graph_equal (a, b));
            assert_string_equal (cgq_cg_graph_name (a), cgq_cg_graph_name (b));
            char *ja = cgq_cg_graph_to_json (a), *jb = cgq_cg_graph_to_json (b);
            assert_string_equal (ja, jb);
            free (ja);
            free (jb);
            cgq_cg_graph_destroy (&a);
            cgq_cg_graph_destroy (&b);
        }
}

static void
test_different_seeds_differ (void **state)
{
    for (int f = 0; f < CGQ_CG_FAMILY_COUNT; f++) {
        // Every pair of eight seeds differs, at a fixed resolution too (so
        // widths, depths or kernels differ, not only the input size).
        cgq_cg_graph_t *g[8];
        for (int s = 0; s < 8; s++)
            g[s] = s_gen ((cgq_cg_family_t) f, (uint64_t) s * 1000 + 1, 64, true);
        for (int i = 0; i < 8; i++)
            for (int j = i + 1; j < 8; j++)
                if (cgq_cg_graph_equal (g[i], g[j]))
                    fail_msg ("%s: seeds %d and %d give the same graph",
                              cgq_cg_family_name ((cgq_cg_family_t) f), i * 1000 + 1, j * 1000 + 1);
        for (int s = 0; s < 8; s++)
            cgq_cg_graph_destroy (&g[s]);
    }
}

static void
test_families_build (void **state)
{
    static const int res[] = {32, 224};
    for (int f = 0; f < CGQ_CG_FAMILY_COUNT; f++)
        for (int r = 0; r < 2; r++)
            for (uint64_t seed = 0; seed < 6; seed++) {
                bool fold = seed % 2 == 0;
                cgq_cg_graph_t *g = s_gen ((cgq_cg_family_t) f, seed, res[r], fold);
                int n = cgq_cg_graph_size (g);
                const cgq_cg_node_t *in = cgq_cg_graph_node (g, 0);
                const cgq_cg_node_t *last = cgq_cg_graph_node (g, n - 1);
                assert_int_equal (in->out.h, res[r]);
                assert_int_equal (in->out.c, 3);
                assert_int_equal (last->op, CGQ_CG_FC);
                assert_int_equal (last->out.c, 1000);
                // Each family's signature ops, and batchnorm only when not folded.
                int count[CGQ_CG_CODE_DWCONV2D + 1] = {0};
                for (int i = 0; i < n; i++)
                    count[cgq_cg_node_code (cgq_cg_graph_node (g, i))]++;
                assert_int_equal (count[CGQ_CG_BATCHNORM] > 0, !fold);
                assert_true (count[CGQ_CG_CONV2D] > 0);
                switch ((cgq_cg_family_t) f) {
                case CGQ_CG_MOBILENETV2:
                    assert_true (count[CGQ_CG_CODE_DWCONV2D] >= 10);
                    assert_true (count[CGQ_CG_ADD] >= 5);
                    break;
                case CGQ_CG_RESNET:
                    assert_true (count[CGQ_CG_ADD] >= 4);
                    assert_int_equal (count[CGQ_CG_CODE_DWCONV2D], 0);
                    break;
                case CGQ_CG_VGG:
                    assert_int_equal (count[CGQ_CG_ADD], 0);
                    assert_int_equal (count[CGQ_CG_MAXPOOL], 5);
                    break;
                case CGQ_CG_SHUFFLENETV2:
                    assert_true (count[CGQ_CG_SLICE] > 0);
                    assert_true (count[CGQ_CG_SHUFFLE] > 0);
                    assert_true (count[CGQ_CG_CONCAT] > 0);
                    break;
                case CGQ_CG_SHUFFLENET:
                    assert_true (count[CGQ_CG_SHUFFLE] > 0);
                    assert_int_equal (count[CGQ_CG_AVGPOOL], 3);
                    break;
                default: break;
                }
                // Kernel sizes are 1, 2 (pools), 3, 5 or 7.
                for (int i = 0; i < n; i++) {
                    int k = cgq_cg_graph_node (g, i)->kernel;
                    assert_true (k == 0 || k == 1 || k == 2 || k == 3 || k == 5 || k == 7);
                }
                cgq_cg_graph_destroy (&g);
            }
}

static void
test_resolution_range_and_errors (void **state)
{
    cgq_cg_gen_opts_t o;
    cgq_cg_gen_opts_default (&o);
    assert_int_equal (o.min_res, 32);
    assert_int_equal (o.max_res, 128);
    o.min_res = 96;
    o.max_res = 160;
    bool seen[3] = {false, false, false};
    char err[256];
    for (uint64_t seed = 0; seed < 40; seed++) {
        o.seed = seed;
        cgq_cg_graph_t *g = cgq_cg_gen (&o, err, sizeof err);
        assert_non_null (g);
        int h = cgq_cg_graph_node (g, 0)->out.h;
        assert_true (h == 96 || h == 128 || h == 160);
        seen[(h - 96) / 32] = true;
        cgq_cg_graph_destroy (&g);
    }
    assert_true (seen[0] && seen[1] && seen[2]);

    o.resolution = 16;
    assert_null (cgq_cg_gen (&o, err, sizeof err));
    assert_non_null (strstr (err, "resolution 16"));
    o.resolution = 0;
    o.min_res = 100;
    o.max_res = 120;
    assert_null (cgq_cg_gen (&o, err, sizeof err));
    assert_non_null (strstr (err, "no multiple of 32"));
    o.max_res = 128;
    o.classes = 0;
    assert_null (cgq_cg_gen (&o, err, sizeof err));
    assert_non_null (strstr (err, "classes 0"));

    cgq_cg_family_t f;
    for (int i = 0; i < CGQ_CG_FAMILY_COUNT; i++) {
        assert_int_equal (cgq_cg_family_parse (cgq_cg_family_name ((cgq_cg_family_t) i), &f), 0);
        assert_int_equal (f, i);
        assert_non_null (strstr (cgq_cg_family_list (), cgq_cg_family_name (f)));
    }
    assert_int_equal (cgq_cg_family_parse ("alexnet", &f), -1);
}

// A name names one graph: the model generated with its resolution drawn and
// the one generated with that resolution given are the same, node for node
// (cgq-predictor export rebuilds measured models that way).
static void
test_name_names_one_graph (void **state)
{
    (void) state;
    char err[256];
    for (int f = 0; f < CGQ_CG_FAMILY_COUNT; f++)
        for (uint64_t seed = 0; seed < 6; seed++) {
            cgq_cg_gen_opts_t o;
            cgq_cg_gen_opts_default (&o);
            o.family = (cgq_cg_family_t) f;
            o.seed = seed;
            cgq_cg_graph_t *drawn = cgq_cg_gen (&o, err, sizeof err);
            assert_non_null (drawn);
            o.resolution = cgq_cg_graph_node (drawn, 0)->out.h;
            cgq_cg_graph_t *given = cgq_cg_gen (&o, err, sizeof err);
            assert_non_null (given);
            assert_string_equal (cgq_cg_graph_name (drawn), cgq_cg_graph_name (given));
            char *a = cgq_cg_graph_to_json (drawn), *b = cgq_cg_graph_to_json (given);
            assert_string_equal (a, b);
            free (a);
            free (b);
            cgq_cg_graph_destroy (&drawn);
            cgq_cg_graph_destroy (&given);
        }
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_same_seed_same_graph),
        cmocka_unit_test (test_different_seeds_differ),
        cmocka_unit_test (test_families_build),
        cmocka_unit_test (test_resolution_range_and_errors),
        cmocka_unit_test (test_name_names_one_graph),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
