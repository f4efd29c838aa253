// net_test: the GNN's gradients against finite differences — every
// parameter block of every layer (message passing with each aggregation, the
// readout, the head) and the loss — and its batching.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "data.h"
#include "net.h"
#include "util.h"

enum { IN = 5 };

// Two graphs, 4 and 3 nodes, as one block-diagonal batch: a chain with a
// branch (0->1, 1->2, 0->2, 2->3) and a chain (4->5, 5->6).
static void
s_batch (cgq_pred_batch_t *b, cgq_pred_agg_t agg)
{
    static const int edges[] = {0, 1, 1, 2, 0, 2, 2, 3, 4, 5, 5, 6};
    cgq_pred_batch_init (b);
    b->nodes = 7;
    b->graphs = 2;
    cgq_pred_batch_reserve (b, 7, 2);
    b->x = cgq_xrealloc (b->x, 7 * IN * sizeof (float)); // IN < CGQ_PRED_IN_DIM: fits
    uint64_t rng = 42;
    for (int i = 0; i < 7 * IN; i++)
        b->x[i] = (float)(2 * cgq_pred_rng_uniform (&rng) - 1);
    b->graph_off[0] = 0;
    b->graph_off[1] = 4;
    b->graph_off[2] = 7;
    b->target[0] = 0.7f;
    b->target[1] = -1.2f;
    cgq_pred_batch_build (b, edges, 6, agg);
}

static double
s_loss (cgq_pred_net_t *net, const cgq_pred_batch_t *b, bool train)
{
    float pred[2];
    cgq_pred_net_reseed (net, 99); // the same dropout mask every time
    cgq_pred_net_forward (net, b, train, pred);
    return cgq_pred_net_loss (b, pred, NULL);
}

// s_check compares every analytic gradient with a central difference.
static void
s_check (cgq_pred_agg_t agg, bool readout_mean, float dropout)
{
    cgq_pred_batch_t b;
    s_batch (&b, agg);
    cgq_pred_shape_t shape = {.in_dim = IN,
                              .layers = 3,
                              .hidden = 6,
                              .agg = agg,
                              .readout_mean = readout_mean,
                              .dropout = dropout};
    cgq_pred_net_t *net = cgq_pred_net_new (&shape, 7);
    float pred[2], dpred[2];
    cgq_pred_net_reseed (net, 99);
    cgq_pred_net_forward (net, &b, true, pred);
    cgq_pred_net_loss (&b, pred, dpred);
    cgq_pred_net_backward (net, &b, dpred);
    size_t n = cgq_pred_net_size (net);
    float *p = cgq_pred_net_params (net);
    float *g = cgq_xcalloc (n, sizeof *g);
    memcpy (g, cgq_pred_net_grads (net), n * sizeof *g);
    const float eps = 1e-3f;
    int bad = 0, nonzero = 0, kinks = 0;
    double base = s_loss (net, &b, true);
    for (size_t i = 0; i < n; i++) {
        float keep = p[i];
        p[i] = keep + eps;
        double up = s_loss (net, &b, true);
        p[i] = keep - eps;
        double down = s_loss (net, &b, true);
        p[i] = keep;
        double num = (up - down) / (2 * (double)eps);
        // A ReLU input that crosses zero inside [-eps, eps] makes the loss
        // bend there: the one-sided slopes disagree and no central
        // difference is right. Such points are skipped (and counted).
        double right = (up - base) / eps, left = (base - down) / eps;
        if (fabs (right - left) > 2e-3 + 0.02 * fmax (fabs (right), fabs (left))) {
            kinks++;
            continue;
        }
        if (fabs (num - g[i]) > 2e-3 + 2e-2 * fabs (num)) {
            print_message ("agg %s readout %s dropout %g: param %zu: analytic %g, numeric %g\n",
                           cgq_pred_agg_name (agg), readout_mean ? "mean" : "sum", dropout, i, g[i],
                           num);
            bad++;
        }
        if (fabs (g[i]) > 1e-4)
            nonzero++;
    }
    assert_int_equal (bad, 0);
    assert_true (kinks <= 3);
    // Most gradients are not zero: the check is not vacuous.
    assert_true (nonzero > (int)n / 3);
    free (g);
    cgq_pred_net_destroy (&net);
    cgq_pred_batch_fini (&b);
}

static void
test_grad_sum (void **state)
{
    s_check (CGQ_PRED_AGG_SUM, false, 0);
    s_check (CGQ_PRED_AGG_SUM, true, 0);
}

static void
test_grad_mean (void **state)
{
    s_check (CGQ_PRED_AGG_MEAN, false, 0);
    s_check (CGQ_PRED_AGG_MEAN, true, 0);
}

static void
test_grad_gcn (void **state)
{
    s_check (CGQ_PRED_AGG_GCN, false, 0);
    s_check (CGQ_PRED_AGG_GCN, true, 0);
}

static void
test_grad_dropout (void **state)
{
    s_check (CGQ_PRED_AGG_MEAN, false, 0.3f);
    s_check (CGQ_PRED_AGG_GCN, true, 0.3f);
}

// The loss's own gradient: d MSE / d pred.
static void
test_grad_loss (void **state)
{
    cgq_pred_batch_t b;
    s_batch (&b, CGQ_PRED_AGG_SUM);
    float pred[2] = {0.25f, 0.5f}, dpred[2];
    double l = cgq_pred_net_loss (&b, pred, dpred);
    assert_true (fabs (l - ((0.25 - 0.7) * (0.25 - 0.7) + (0.5 + 1.2) * (0.5 + 1.2)) / 2) < 1e-6);
    for (int i = 0; i < 2; i++) {
        float keep = pred[i];
        pred[i] = keep + 1e-3f;
        double up = cgq_pred_net_loss (&b, pred, NULL);
        pred[i] = keep - 1e-3f;
        double down = cgq_pred_net_loss (&b, pred, NULL);
        pred[i] = keep;
        assert_true (fabs ((up - down) / 2e-3 - dpred[i]) < 1e-3);
    }
    cgq_pred_batch_fini (&b);
}

// Dropout draws a new mask per training forward; evaluation has none.
static void
test_dropout_modes (void **state)
{
    cgq_pred_batch_t b;
    s_batch (&b, CGQ_PRED_AGG_MEAN);
    cgq_pred_shape_t shape = {
        .in_dim = IN, .layers = 2, .hidden = 16, .agg = CGQ_PRED_AGG_MEAN, .dropout = 0.5f};
    cgq_pred_net_t *net = cgq_pred_net_new (&shape, 1);
    float a[2], c[2], e1[2], e2[2];
    cgq_pred_net_forward (net, &b, true, a);
    cgq_pred_net_forward (net, &b, true, c);
    assert_true (a[0] != c[0] || a[1] != c[1]);
    cgq_pred_net_forward (net, &b, false, e1);
    cgq_pred_net_forward (net, &b, false, e2);
    assert_memory_equal (e1, e2, sizeof e1);
    cgq_pred_net_destroy (&net);
    cgq_pred_batch_fini (&b);
}

// The aggregation matrix of each kind, on the first graph of the batch.
static void
test_aggregation_matrix (void **state)
{
    cgq_pred_batch_t b;
    s_batch (&b, CGQ_PRED_AGG_MEAN);
    // Node 2 has neighbours 1, 0 (its inputs) and 3 (its reader): 1/3 each.
    assert_int_equal (b.row_off[3] - b.row_off[2], 3);
    for (int k = b.row_off[2]; k < b.row_off[3]; k++)
        assert_true (fabs (b.val[k] - 1.0f / 3) < 1e-7);
    cgq_pred_batch_fini (&b);
    s_batch (&b, CGQ_PRED_AGG_GCN);
    // Node 3: neighbour 2 (3 neighbours + self = 4) and itself (1 + self = 2).
    assert_int_equal (b.row_off[4] - b.row_off[3], 2);
    for (int k = b.row_off[3]; k < b.row_off[4]; k++) {
        double want = b.col[k] == 3 ? 1.0 / 2 : 1.0 / sqrt (2.0 * 4);
        assert_true (fabs (b.val[k] - want) < 1e-6);
    }
    // No edge crosses from one graph to the other.
    for (int i = 0; i < 7; i++)
        for (int k = b.row_off[i]; k < b.row_off[i + 1]; k++)
            assert_int_equal (i < 4, b.col[k] < 4);
    cgq_pred_batch_fini (&b);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_grad_sum),           cmocka_unit_test (test_grad_mean),
        cmocka_unit_test (test_grad_gcn),           cmocka_unit_test (test_grad_dropout),
        cmocka_unit_test (test_grad_loss),          cmocka_unit_test (test_dropout_modes),
        cmocka_unit_test (test_aggregation_matrix),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
