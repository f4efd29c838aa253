// Shape inference, FLOPs, parameters and node features of a hand-built graph
// against numbers worked out by hand; the errors of bad graphs; model.json.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "graph.h"
#include "util.h"

// The hand-built graph: every op once, small enough to count by hand.
static cgq_cg_graph_t *
s_small (void)
{
    cgq_cg_graph_t *g = cgq_cg_graph_new ("small");
    assert_int_equal (cgq_cg_graph_input (g, 3, 32, 32), 0);
    assert_int_equal (cgq_cg_graph_conv (g, 0, 16, 3, 2, 1, 1, true), 1);   // 16x16x16
    assert_int_equal (cgq_cg_graph_unary (g, CGQ_CG_BATCHNORM, 1), 2);      // 16x16x16
    assert_int_equal (cgq_cg_graph_unary (g, CGQ_CG_RELU, 2), 3);           // 16x16x16
    assert_int_equal (cgq_cg_graph_conv (g, 3, 16, 3, 1, 1, 16, false), 4); // depthwise
    assert_int_equal (cgq_cg_graph_conv (g, 4, 16, 1, 1, 0, 1, false), 5);  // 16x16x16
    assert_int_equal (cgq_cg_graph_add2 (g, 3, 5), 6);                      // 16x16x16
    assert_int_equal (cgq_cg_graph_shuffle (g, 6, 4), 7);                   // 16x16x16
    assert_int_equal (cgq_cg_graph_slice (g, 7, 4, 8), 8);                  // 8x16x16
    int cat[2] = {8, 6};
    assert_int_equal (cgq_cg_graph_concat (g, cat, 2), 9);                     // 24x16x16
    assert_int_equal (cgq_cg_graph_pool (g, CGQ_CG_MAXPOOL, 9, 3, 2, 1), 10);  // 24x8x8
    assert_int_equal (cgq_cg_graph_pool (g, CGQ_CG_AVGPOOL, 10, 2, 2, 0), 11); // 24x4x4
    assert_int_equal (cgq_cg_graph_conv (g, 11, 32, 3, 1, 0, 1, false), 12);   // 32x2x2
    assert_int_equal (cgq_cg_graph_unary (g, CGQ_CG_HSWISH, 12), 13);          // 32x2x2
    assert_int_equal (cgq_cg_graph_unary (g, CGQ_CG_GLOBAL_AVGPOOL, 13), 14);  // [1,32]
    assert_int_equal (cgq_cg_graph_fc (g, 14, 10), 15);                        // [1,10]
    assert_int_equal (cgq_cg_graph_unary (g, CGQ_CG_SIGMOID, 15), 16);         // [1,10]
    assert_false (cgq_cg_graph_failed (g));
    assert_string_equal (cgq_cg_graph_errstr (g), "");
    return g;
}

static void
test_shapes_flops_params (void **state)
{
    cgq_cg_graph_t *g = s_small ();
    // rank, c, h, w; flops; params: worked out by hand.
    static const struct {
        int rank, c, h, w;
        int64_t flops, params;
    } want[17] = {
        {4, 3, 32, 32, 0, 0},
        {4, 16, 16, 16, 2 * 16 * 16 * 16 * 3 * 9, 16 * 3 * 9 + 16}, // 221184, 448
        {4, 16, 16, 16, 2 * 4096, 2 * 16},                          // batchnorm
        {4, 16, 16, 16, 4096, 0},                                   // relu
        {4, 16, 16, 16, 2 * 4096 * 1 * 9, 16 * 9},                  // depthwise: 73728, 144
        {4, 16, 16, 16, 2 * 4096 * 16, 16 * 16},                    // 1x1: 131072, 256
        {4, 16, 16, 16, 4096, 0},                                   // add
        {4, 16, 16, 16, 0, 0},                                      // shuffle
        {4, 8, 16, 16, 0, 0},                                       // slice
        {4, 24, 16, 16, 0, 0},                                      // concat
        {4, 24, 8, 8, 24 * 64 * 9, 0},                              // maxpool: 13824
        {4, 24, 4, 4, 24 * 16 * 4, 0},                              // avgpool: 1536
        {4, 32, 2, 2, 2 * 32 * 4 * 24 * 9, 32 * 24 * 9},            // 55296, 6912
        {4, 32, 2, 2, 128, 0},                                      // hswish
        {2, 32, 1, 1, 128, 0},                                      // global_avgpool
        {2, 10, 1, 1, 2 * 32 * 10, 32 * 10 + 10},                   // fc: 640, 330
        {2, 10, 1, 1, 10, 0},                                       // sigmoid
    };
    assert_int_equal (cgq_cg_graph_size (g), 17);
    int64_t flops = 0, params = 0;
    for (int i = 0; i < 17; i++) {
        const cgq_cg_node_t *n = cgq_cg_graph_node (g, i);
        assert_int_equal (n->out.rank, want[i].rank);
        assert_int_equal (n->out.c, want[i].c);
        assert_int_equal (n->out.h, want[i].h);
        assert_int_equal (n->out.w, want[i].w);
        assert_int_equal (n->flops, want[i].flops);
        assert_int_equal (n->params, want[i].params);
        flops += want[i].flops;
        params += want[i].params;
    }
    assert_int_equal (flops, 221184 + 8192 + 4096 + 73728 + 131072 + 4096 + 13824 + 1536 + 55296 +
                                 128 + 128 + 640 + 10);
    assert_int_equal (cgq_cg_graph_flops (g), flops);
    assert_int_equal (cgq_cg_graph_params (g), 448 + 32 + 144 + 256 + 6912 + 330);
    assert_int_equal (cgq_cg_graph_edge_count (g), 18); // 14 single-input nodes, add 2, concat 2
    assert_null (cgq_cg_graph_node (g, 17));
    assert_null (cgq_cg_graph_node (g, -1));
    cgq_cg_graph_destroy (&g);
    assert_null (g);
    cgq_cg_graph_destroy (&g); // NULL-safe
}

static void
test_features (void **state)
{
    cgq_cg_graph_t *g = s_small ();
    double f[CGQ_CG_NUM_FEATS];
    // op, input [1,H,W,C,0], kernel [kh,kw,cin/g,cout], strides, output [1,H,W,C,0]
    static const struct {
        int id;
        double f[CGQ_CG_NUM_FEATS];
    } want[] = {
        {0, {0, 1, 32, 32, 3, 0, 0, 0, 0, 0, 0, 0, 1, 32, 32, 3, 0}},
        {1, {1, 1, 32, 32, 3, 0, 3, 3, 3, 16, 2, 2, 1, 16, 16, 16, 0}},
        {2, {6, 1, 16, 16, 16, 0, 0, 0, 0, 0, 0, 0, 1, 16, 16, 16, 0}},
        {4, {15, 1, 16, 16, 16, 0, 3, 3, 1, 16, 1, 1, 1, 16, 16, 16, 0}}, // dwconv2d
        {6, {11, 1, 16, 16, 16, 0, 0, 0, 0, 0, 0, 0, 1, 16, 16, 16, 0}},
        {9, {12, 1, 16, 16, 8, 0, 0, 0, 0, 0, 0, 0, 1, 16, 16, 24, 0}}, // first input's shape
        {10, {7, 1, 16, 16, 24, 0, 3, 3, 0, 0, 2, 2, 1, 8, 8, 24, 0}},
        {14, {9, 1, 2, 2, 32, 0, 0, 0, 0, 0, 0, 0, 1, 32, 0, 0, 0}},
        {15, {10, 1, 32, 0, 0, 0, 1, 1, 32, 10, 0, 0, 1, 10, 0, 0, 0}},
    };
    for (size_t t = 0; t < sizeof want / sizeof want[0]; t++) {
        assert_int_equal (cgq_cg_graph_features (g, want[t].id, f), 0);
        for (int k = 0; k < CGQ_CG_NUM_FEATS; k++)
            if (f[k] != want[t].f[k])
                fail_msg ("node %d feature %d is %g, expected %g", want[t].id, k, f[k],
                          want[t].f[k]);
    }
    assert_int_equal (cgq_cg_graph_features (g, 99, f), -1);
    assert_string_equal (cgq_cg_node_kind (cgq_cg_graph_node (g, 4)), "dwconv2d");
    assert_string_equal (cgq_cg_node_kind (cgq_cg_graph_node (g, 5)), "conv2d");
    cgq_cg_graph_destroy (&g);
}

// s_expect_fail checks that the graph has failed with reason containing what.
static void
s_expect_fail (cgq_cg_graph_t *g, int rc, const char *what)
{
    assert_int_equal (rc, -1);
    assert_true (cgq_cg_graph_failed (g));
    if (!strstr (cgq_cg_graph_errstr (g), what))
        fail_msg ("error '%s' does not say '%s'", cgq_cg_graph_errstr (g), what);
}

static void
test_bad_graphs (void **state)
{
    static const char *reasons[] = {"add of different shapes",
                                    "groups 3 must divide",
                                    "must be node 0",
                                    "first node must be the input",
                                    "more than half the kernel",
                                    "larger than the padded",
                                    "not inside the 16 channels",
                                    "does not exist",
                                    "shuffle groups 5",
                                    "needs a [1,C,H,W] input"};
    for (int t = 0; t < 10; t++) {
        cgq_cg_graph_t *g = cgq_cg_graph_new (NULL);
        int x = t == 3 ? 0 : cgq_cg_graph_input (g, 16, 8, 8);
        int c = t == 3 ? 0 : cgq_cg_graph_conv (g, x, 16, 3, 2, 1, 1, false); // 16x4x4
        int rc = -1;
        switch (t) {
        case 0: rc = cgq_cg_graph_add2 (g, x, c); break;
        case 1: rc = cgq_cg_graph_conv (g, x, 16, 3, 1, 1, 3, false); break;
        case 2: rc = cgq_cg_graph_input (g, 3, 8, 8); break;
        case 3: rc = cgq_cg_graph_unary (g, CGQ_CG_RELU, 0); break;
        case 4: rc = cgq_cg_graph_pool (g, CGQ_CG_MAXPOOL, x, 3, 1, 2); break;
        case 5: rc = cgq_cg_graph_conv (g, c, 8, 7, 1, 1, 1, false); break;
        case 6: rc = cgq_cg_graph_slice (g, c, 10, 8); break;
        case 7: rc = cgq_cg_graph_unary (g, CGQ_CG_RELU, 5); break;
        case 8: rc = cgq_cg_graph_shuffle (g, c, 5); break;
        case 9:
            rc = cgq_cg_graph_unary (g, CGQ_CG_GLOBAL_AVGPOOL, c);
            rc = cgq_cg_graph_conv (g, rc, 8, 1, 1, 0, 1, false);
            break;
        }
        s_expect_fail (g, rc, reasons[t]);
        // Sticky: later adds fail too and the first reason stays.
        char first[256];
        snprintf (first, sizeof first, "%s", cgq_cg_graph_errstr (g));
        assert_int_equal (cgq_cg_graph_unary (g, CGQ_CG_RELU, 0), -1);
        assert_string_equal (cgq_cg_graph_errstr (g), first);
        cgq_cg_graph_destroy (&g);
    }
    // An input id of -1 from a failed add is itself an error.
    cgq_cg_graph_t *g = cgq_cg_graph_new ("x");
    cgq_cg_graph_input (g, 3, 8, 8);
    s_expect_fail (g, cgq_cg_graph_unary (g, CGQ_CG_RELU, -1), "node -1");
    cgq_cg_graph_destroy (&g);
}

static void
test_json_round_trip (void **state)
{
    cgq_cg_graph_t *g = s_small ();
    char *text = cgq_cg_graph_to_json (g);
    char err[512];
    cgq_cg_graph_t *back = cgq_cg_graph_from_json (text, "text", err, sizeof err);
    if (!back)
        fail_msg ("%s", err);
    assert_true (cgq_cg_graph_equal (g, back));
    assert_string_equal (cgq_cg_graph_name (back), "small");
    assert_int_equal (cgq_cg_graph_flops (back), cgq_cg_graph_flops (g));
    char *again = cgq_cg_graph_to_json (back);
    assert_string_equal (text, again);
    // One node per line.
    assert_non_null (strstr (text, "\n  {\"op\": \"conv2d\", \"inputs\": [0], \"channels\": 16, "
                                   "\"kernel\": 3, \"stride\": 2, \"pad\": 1, \"groups\": 1, "
                                   "\"bias\": true},\n"));

    // Through a file.
    char dir[] = "/tmp/cg_graph_test.XXXXXX";
    assert_non_null (mkdtemp (dir));
    char *path = cgq_xasprintf ("%s/model.json", dir);
    assert_int_equal (cgq_cg_graph_save (g, path, err, sizeof err), 0);
    cgq_cg_graph_t *loaded = cgq_cg_graph_load (path, err, sizeof err);
    assert_non_null (loaded);
    assert_true (cgq_cg_graph_equal (g, loaded));
    cgq_cg_graph_destroy (&loaded);
    unlink (path);
    assert_null (cgq_cg_graph_load (path, err, sizeof err));
    assert_non_null (strstr (err, "cannot read"));
    assert_non_null (strstr (err, "model.json"));
    rmdir (dir);
    free (path);

    // A name that JSON cannot hold is dropped, not the model.
    cgq_cg_graph_t *odd = cgq_cg_graph_new ("\xff\xfe");
    cgq_cg_graph_input (odd, 3, 8, 8);
    char *odd_text = cgq_cg_graph_to_json (odd);
    cgq_cg_graph_t *odd_back = cgq_cg_graph_from_json (odd_text, "odd", err, sizeof err);
    assert_non_null (odd_back);
    assert_true (cgq_cg_graph_equal (odd, odd_back));
    assert_string_equal (cgq_cg_graph_name (odd_back), "");
    cgq_cg_graph_destroy (&odd_back);
    cgq_cg_graph_destroy (&odd);
    free (odd_text);

    // A different graph is not equal.
    cgq_cg_graph_t *other = cgq_cg_graph_new ("small");
    cgq_cg_graph_input (other, 3, 32, 32);
    cgq_cg_graph_conv (other, 0, 16, 3, 2, 1, 1, false);
    assert_false (cgq_cg_graph_equal (g, other));
    cgq_cg_graph_destroy (&other);

    free (text);
    free (again);
    cgq_cg_graph_destroy (&back);
    cgq_cg_graph_destroy (&g);
}

static void
test_json_errors (void **state)
{
    static const struct {
        const char *text;
        const char *says;
    } cases[] = {
        {"{", "m.json:1:"},
        {"{\"format\": \"other\", \"version\": 1, \"nodes\": []}", "not a cgq-cg model"},
        {"{\"format\": \"cgq-cg-model\", \"version\": 9, \"nodes\": [{}]}", "version"},
        {"{\"format\": \"cgq-cg-model\", \"version\": 1, \"nodes\": []}", "non-empty"},
        {"{\"format\": \"cgq-cg-model\", \"version\": 1, \"nodes\": [{\"op\": \"conv3d\"}]}",
         "m.json: node 0: unknown op 'conv3d' (expected one of: input, conv2d,"},
        {"{\"format\": \"cgq-cg-model\", \"version\": 1, \"nodes\": [{\"op\": \"input\", "
         "\"shape\": [3, 8, 8], \"kernel\": 3}]}",
         "node 0: input has no \"kernel\""},
        {"{\"format\": \"cgq-cg-model\", \"version\": 1, \"nodes\": [{\"op\": \"input\", "
         "\"shape\": [3, 8, 8]}, {\"op\": \"conv2d\", \"inputs\": [0], \"kernel\": 3}]}",
         "node 1: missing \"channels\""},
        {"{\"format\": \"cgq-cg-model\", \"version\": 1, \"nodes\": [{\"op\": \"input\", "
         "\"shape\": [3, 8, 8]}, {\"op\": \"add\", \"inputs\": [0, 1]}]}",
         "node 1: add input 1 is node 1, which does not exist"},
    };
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        char err[512] = "";
        assert_null (cgq_cg_graph_from_json (cases[t].text, "m.json", err, sizeof err));
        if (!strstr (err, cases[t].says))
            fail_msg ("case %zu: error '%s' does not say '%s'", t, err, cases[t].says);
    }
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_shapes_flops_params), cmocka_unit_test (test_features),
        cmocka_unit_test (test_bad_graphs),          cmocka_unit_test (test_json_round_trip),
        cmocka_unit_test (test_json_errors),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
