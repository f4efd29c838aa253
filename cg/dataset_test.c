// The CG dataset files: what the generator writes reads back exactly (node
// features, edges, counts, labels), and damaged directories are refused
// with the file and line.
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "dataset.h"
#include "gen.h"
#include "graph.h"
#include "util.h"

static const char *s_files[] = {"num-node-list.csv.gz", "num-edge-list.csv.gz", "node-feat.csv.gz",
                                "edge.csv.gz", "graph-label.csv.gz"};

static char *
s_tmpdir (void)
{
    char *dir = cgq_xstrdup ("/tmp/cg_dataset_test.XXXXXX");
    assert_non_null (mkdtemp (dir));
    return dir;
}

static void
s_rmdir (const char *dir)
{
    for (int i = 0; i < 5; i++) {
        char *p = cgq_xasprintf ("%s/%s", dir, s_files[i]);
        unlink (p);
        free (p);
    }
    assert_int_equal (rmdir (dir), 0);
}

// s_gz writes text as dir/name, gzipped.
static void
s_gz (const char *dir, const char *name, const char *text)
{
    char *p = cgq_xasprintf ("%s/%s", dir, name);
    gzFile f = gzopen (p, "wb");
    assert_non_null (f);
    assert_int_equal (gzwrite (f, text, (unsigned) strlen (text)), (int) strlen (text));
    assert_int_equal (gzclose (f), Z_OK);
    free (p);
}

// 20 graphs of every family, both batchnorm styles, with two labels each
// (one with digits that a careless %g would lose), written and read back.
static void
test_round_trip (void **state)
{
    enum { N = 20 };
    cgq_cg_graph_t *g[N];
    double labels[N][2];
    cgq_cg_dataset_t *ds = cgq_cg_dataset_new (CGQ_CG_NUM_FEATS, 2);
    char err[512];
    for (int i = 0; i < N; i++) {
        cgq_cg_gen_opts_t o;
        cgq_cg_gen_opts_default (&o);
        o.family = (cgq_cg_family_t) (i % CGQ_CG_FAMILY_COUNT);
        o.seed = (uint64_t) i;
        o.fold_bn = i % 3 != 0;
        g[i] = cgq_cg_gen (&o, err, sizeof err);
        assert_non_null (g[i]);
        labels[i][0] = 0.1 * i + 1.0 / 3.0;                // a latency in ms
        labels[i][1] = (double) cgq_cg_graph_flops (g[i]); // an integer label
        assert_int_equal (cgq_cg_dataset_append_graph (ds, g[i], labels[i], err, sizeof err), 0);
    }
    char *dir = s_tmpdir ();
    assert_int_equal (cgq_cg_dataset_write (ds, dir, err, sizeof err), 0);
    cgq_cg_dataset_t *back = cgq_cg_dataset_read (dir, err, sizeof err);
    if (!back)
        fail_msg ("%s", err);
    assert_int_equal (cgq_cg_dataset_count (back), N);
    assert_int_equal (cgq_cg_dataset_num_feats (back), CGQ_CG_NUM_FEATS);
    assert_int_equal (cgq_cg_dataset_num_labels (back), 2);
    for (int i = 0; i < N; i++) {
        cgq_cg_sample_t a, b;
        assert_int_equal (cgq_cg_dataset_get (ds, i, &a), 0);
        assert_int_equal (cgq_cg_dataset_get (back, i, &b), 0);
        // Counts and edges as the graph has them.
        int n = cgq_cg_graph_size (g[i]);
        assert_int_equal (b.nodes, n);
        assert_int_equal (b.edges, cgq_cg_graph_edge_count (g[i]));
        int e = 0;
        for (int v = 0; v < n; v++) {
            const cgq_cg_node_t *node = cgq_cg_graph_node (g[i], v);
            for (int j = 0; j < node->ninputs; j++, e++) {
                assert_int_equal (b.edge_index[2 * e], node->inputs[j]);
                assert_int_equal (b.edge_index[2 * e + 1], v);
            }
        }
        // Features as the graph computes them, bit for bit.
        for (int v = 0; v < n; v++) {
            double f[CGQ_CG_NUM_FEATS];
            cgq_cg_graph_features (g[i], v, f);
            assert_memory_equal (b.feats + (size_t) v * CGQ_CG_NUM_FEATS, f, sizeof f);
        }
        assert_memory_equal (a.feats, b.feats, sizeof (double) * (size_t) n * CGQ_CG_NUM_FEATS);
        assert_memory_equal (a.edge_index, b.edge_index, sizeof (int) * 2 * (size_t) b.edges);
        // Labels exactly.
        assert_true (b.labels[0] == labels[i][0]);
        assert_true (b.labels[1] == labels[i][1]);
    }
    assert_int_equal (cgq_cg_dataset_get (back, N, &(cgq_cg_sample_t){0}), -1);

    // Written again, the files are the same bytes.
    char *dir2 = s_tmpdir ();
    assert_int_equal (cgq_cg_dataset_write (back, dir2, err, sizeof err), 0);
    for (int f = 0; f < 5; f++) {
        char *p1 = cgq_xasprintf ("%s/%s", dir, s_files[f]);
        char *p2 = cgq_xasprintf ("%s/%s", dir2, s_files[f]);
        FILE *a = fopen (p1, "rb"), *b = fopen (p2, "rb");
        assert_non_null (a);
        assert_non_null (b);
        cgq_buf_t ba, bb;
        cgq_buf_init (&ba);
        cgq_buf_init (&bb);
        cgq_buf_read (&ba, a);
        cgq_buf_read (&bb, b);
        assert_int_equal (ba.len, bb.len);
        assert_memory_equal (ba.data, bb.data, ba.len);
        cgq_buf_fini (&ba);
        cgq_buf_fini (&bb);
        fclose (a);
        fclose (b);
        free (p1);
        free (p2);
    }
    s_rmdir (dir2);
    free (dir2);

    s_rmdir (dir);
    free (dir);
    for (int i = 0; i < N; i++)
        cgq_cg_graph_destroy (&g[i]);
    cgq_cg_dataset_destroy (&ds);
    cgq_cg_dataset_destroy (&back);
    assert_null (back);
}

// The plain text of a small dataset as OGB's readers expect it.
static void
test_layout (void **state)
{
    cgq_cg_dataset_t *ds = cgq_cg_dataset_new (3, 1);
    double f1[] = {1, 2.5, -3, 4, 5, 6};
    int e1[] = {0, 1};
    double l1 = 12.25;
    double f2[] = {7, 8, 9};
    double l2 = 0.1;
    char err[256];
    assert_int_equal (cgq_cg_dataset_append (ds, 2, f1, 1, e1, &l1, err, sizeof err), 0);
    assert_int_equal (cgq_cg_dataset_append (ds, 1, f2, 0, NULL, &l2, err, sizeof err), 0);
    int bad[] = {0, 2};
    assert_int_equal (cgq_cg_dataset_append (ds, 2, f1, 1, bad, &l1, err, sizeof err), -1);
    assert_non_null (strstr (err, "names node 2"));
    char *dir = s_tmpdir ();
    assert_int_equal (cgq_cg_dataset_write (ds, dir, err, sizeof err), 0);
    static const char *want[5] = {"2\n1\n", "1\n0\n", "1,2.5,-3\n4,5,6\n7,8,9\n", "0,1\n",
                                  "12.25\n0.1\n"};
    for (int f = 0; f < 5; f++) {
        char *p = cgq_xasprintf ("%s/%s", dir, s_files[f]);
        gzFile z = gzopen (p, "rb");
        assert_non_null (z);
        char buf[256];
        int n = gzread (z, buf, sizeof buf - 1);
        assert_true (n >= 0);
        buf[n] = 0;
        assert_string_equal (buf, want[f]);
        gzclose (z);
        free (p);
    }
    s_rmdir (dir);
    free (dir);
    cgq_cg_dataset_destroy (&ds);
}

static void
test_damaged (void **state)
{
    static const struct {
        const char *files[5];
        const char *says;
    } cases[] = {
        {{"2\n1\n", "1\n0\n", "1,2\n3,4\n5,6\n", "0,1\n", "1\n2\n"}, NULL}, // fine
        {{"2\n1\n", "1\n", "1,2\n3,4\n5,6\n", "0,1\n", "1\n2\n"}, "lists 2 graphs but"},
        {{"2\n1\n", "1\n0\n", "1,2\n3,4\n", "0,1\n", "1\n2\n"}, "node-feat.csv.gz ends"},
        {{"2\n1\n", "1\n0\n", "1,2\n3\n5,6\n", "0,1\n", "1\n2\n"},
         "node-feat.csv.gz:2: wrong count (expected 2"},
        {{"2\n1\n", "1\n0\n", "1,2\n3,x\n5,6\n", "0,1\n", "1\n2\n"},
         "node-feat.csv.gz:2: not a list of numbers"},
        {{"2\n1\n", "1\n0\n", "1,2\n3,4\n5,6\n", "0,2\n", "1\n2\n"},
         "edge.csv.gz:1: edge 0,2 is outside graph 0 of 2 nodes"},
        {{"2\n1\n", "1\n0\n", "1,2\n3,4\n5,6\n", "0,-1\n", "1\n2\n"}, "edge.csv.gz:1:"},
        {{"2\n1\n", "1\n0\n", "1,2\n3,4\n5,6\n", "0,1\n1,0\n", "1\n2\n"},
         "edge.csv.gz:2: more lines than the 2 graphs"},
        {{"2\n1\n", "1\n0\n", "1,2\n3,4\n5,6\n", "0,1\n", "1\n"}, "graph-label.csv.gz ends"},
        {{"2\n1\n", "1\n0\n", "1,2\n3,4\n5,6\n", "0,1\n", "1\n2,3\n"},
         "graph-label.csv.gz:2: wrong count"},
        {{"2\nx\n", "1\n0\n", "1,2\n3,4\n5,6\n", "0,1\n", "1\n2\n"},
         "num-node-list.csv.gz:2: 'x' is not a count"},
        {{NULL, "1\n0\n", "1,2\n3,4\n5,6\n", "0,1\n", "1\n2\n"},
         "num-node-list.csv.gz: No such file"},
    };
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        char *dir = s_tmpdir ();
        for (int f = 0; f < 5; f++)
            if (cases[t].files[f])
                s_gz (dir, s_files[f], cases[t].files[f]);
        char err[512] = "";
        cgq_cg_dataset_t *ds = cgq_cg_dataset_read (dir, err, sizeof err);
        if (!cases[t].says) {
            if (!ds)
                fail_msg ("case %zu: %s", t, err);
            assert_int_equal (cgq_cg_dataset_count (ds), 2);
            assert_int_equal (cgq_cg_dataset_num_feats (ds), 2);
            cgq_cg_dataset_destroy (&ds);
        }
        else {
            assert_null (ds);
            if (!strstr (err, cases[t].says))
                fail_msg ("case %zu: error '%s' does not say '%s'", t, err, cases[t].says);
            assert_non_null (strstr (err, dir)); // names the file with its directory
        }
        s_rmdir (dir);
        free (dir);
    }
}

// Node labels: written and read back to the nanosecond; a missing file is
// "none" (err empty), a short, long or damaged one an error with file:line.
static void
test_node_labels (void **state)
{
    char *dir = s_tmpdir ();
    char err[512] = "x";
    assert_null (cgq_cg_dataset_read_node_labels (dir, 3, err, sizeof err));
    assert_string_equal (err, "");
    double ms[3] = {0, 0.0123456789, 12.5};
    assert_int_equal (cgq_cg_dataset_write_node_labels (dir, ms, 3, err, sizeof err), 0);
    double *back = cgq_cg_dataset_read_node_labels (dir, 3, err, sizeof err);
    assert_non_null (back);
    assert_true (back[0] == 0 && back[1] == 0.012346 && back[2] == 12.5);
    free (back);
    assert_null (cgq_cg_dataset_read_node_labels (dir, 4, err, sizeof err));
    assert_non_null (strstr (err, "3 lines for 4 nodes"));
    assert_null (cgq_cg_dataset_read_node_labels (dir, 2, err, sizeof err));
    assert_non_null (strstr (err, "3 lines for 2 nodes"));
    s_gz (dir, CGQ_CG_NODE_LABEL_FILE, "0.1\n-2\n0.3\n");
    assert_null (cgq_cg_dataset_read_node_labels (dir, 3, err, sizeof err));
    assert_non_null (strstr (err, "node-label.csv.gz:2: '-2' is not a time"));
    s_gz (dir, CGQ_CG_NODE_LABEL_FILE, "0.1\nnan\n0.3\n");
    assert_null (cgq_cg_dataset_read_node_labels (dir, 3, err, sizeof err));
    assert_non_null (strstr (err, ":2: 'nan'"));
    char *p = cgq_xasprintf ("%s/%s", dir, CGQ_CG_NODE_LABEL_FILE);
    unlink (p);
    free (p);
    s_rmdir (dir);
    free (dir);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_round_trip),
        cmocka_unit_test (test_layout),
        cmocka_unit_test (test_damaged),
        cmocka_unit_test (test_node_labels),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
