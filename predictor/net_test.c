// net_test: the GNN's gradients against finite differences — every
// parameter block of every layer (message passing with each aggregation, the
// readout — sum, mean, additive in the log and the linear domain —, the head)
// and the loss, with the node-time loss — and its batching.
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

// The shape of a check: the additive readout's scaling, the node loss's
// weight, the input width (IN, or CGQ_PRED_IN_DIM_COSTS as with node costs).
typedef struct {
    bool additive, log_target;
    double node_loss;
    int in_dim;
} s_opts_t;

// Two graphs, 4 and 3 nodes, as one block-diagonal batch: a chain with a
// branch (0->1, 1->2, 0->2, 2->3) and a chain (4->5, 5->6).
static void
s_batch_in (cgq_pred_batch_t *b, cgq_pred_agg_t agg, int in)
{
    static const int edges[] = {0, 1, 1, 2, 0, 2, 2, 3, 4, 5, 5, 6};
    cgq_pred_batch_init (b);
    b->nodes = 7;
    b->graphs = 2;
    cgq_pred_batch_reserve (b, 7, 2);
    b->x = cgq_xrealloc (b->x, 7 * (size_t)in * sizeof (float));
    uint64_t rng = 42;
    for (int i = 0; i < 7 * in; i++)
        b->x[i] = (float)(2 * cgq_pred_rng_uniform (&rng) - 1);
    // Node times for the node loss: node 0 (an input) and node 5 have none.
    static const float nt[] = {NAN, 0.3f, -0.4f, 0.9f, 0.1f, NAN, -1.1f};
    memcpy (b->node_target, nt, sizeof nt);
    b->graph_off[0] = 0;
    b->graph_off[1] = 4;
    b->graph_off[2] = 7;
    b->target[0] = 0.7f;
    b->target[1] = -1.2f;
    cgq_pred_batch_build (b, edges, 6, agg);
}

static void
s_batch (cgq_pred_batch_t *b, cgq_pred_agg_t agg)
{
    s_batch_in (b, agg, IN);
}

static double
s_loss (cgq_pred_net_t *net, const cgq_pred_batch_t *b, bool train, double node_loss)
{
    float pred[2];
    cgq_pred_net_reseed (net, 99); // the same dropout mask every time
    cgq_pred_net_forward (net, b, train, pred);
    double l = cgq_pred_net_loss (b, pred, NULL);
    if (node_loss > 0)
        l += cgq_pred_net_node_loss (net, b, node_loss, NULL);
    return l;
}

// s_check_opts compares every analytic gradient with a central difference.
static void
s_check_opts (cgq_pred_agg_t agg, bool readout_mean, float dropout, const s_opts_t *o)
{
    int in = o && o->in_dim ? o->in_dim : IN;
    double node_loss = o ? o->node_loss : 0;
    cgq_pred_batch_t b;
    s_batch_in (&b, agg, in);
    cgq_pred_shape_t shape = {.in_dim = in,
                              .layers = 3,
                              .hidden = 6,
                              .agg = agg,
                              .readout_mean = readout_mean,
                              .dropout = dropout,
                              .additive = o && o->additive,
                              .log_target = o && o->log_target,
                              // a target scaling of the committed dataset's size
                              .y_mean = 1.2f,
                              .y_std = 1.3f,
                              .node_shift = 1.25f};
    cgq_pred_net_t *net = cgq_pred_net_new (&shape, 7);
    float pred[2], dpred[2], dnode[7];
    cgq_pred_net_reseed (net, 99);
    cgq_pred_net_forward (net, &b, true, pred);
    cgq_pred_net_loss (&b, pred, dpred);
    if (node_loss > 0)
        cgq_pred_net_node_loss (net, &b, node_loss, dnode);
    cgq_pred_net_backward (net, &b, dpred, node_loss > 0 ? dnode : NULL);
    size_t n = cgq_pred_net_size (net);
    float *p = cgq_pred_net_params (net);
    float *g = cgq_xcalloc (n, sizeof *g);
    memcpy (g, cgq_pred_net_grads (net), n * sizeof *g);
    const float eps = 1e-3f;
    int bad = 0, nonzero = 0, kinks = 0;
    double base = s_loss (net, &b, true, node_loss);
    for (size_t i = 0; i < n; i++) {
        float keep = p[i];
        p[i] = keep + eps;
        double up = s_loss (net, &b, true, node_loss);
        p[i] = keep - eps;
        double down = s_loss (net, &b, true, node_loss);
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
            print_message ("agg %s readout %s dropout %g in %d node_loss %g: param %zu: "
                           "analytic %g, numeric %g\n",
                           cgq_pred_agg_name (agg),
                           shape.additive ? (shape.log_target ? "additive-log" : "additive")
                           : readout_mean ? "mean"
                                          : "sum",
                           dropout, in, node_loss, i, g[i], num);
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
s_check (cgq_pred_agg_t agg, bool readout_mean, float dropout)
{
    s_check_opts (agg, readout_mean, dropout, NULL);
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

// The wider input of node costs: the first layer's weights for the two
// extra columns get their gradients like the others.
static void
test_grad_node_costs (void **state)
{
    s_opts_t o = {.in_dim = CGQ_PRED_IN_DIM_COSTS};
    s_check_opts (CGQ_PRED_AGG_MEAN, false, 0, &o);
    s_check_opts (CGQ_PRED_AGG_GCN, false, 0, &o);
}

// The additive readout: the head on every node, then each graph's nodes
// summed in ms, through log-sum-exp with log_target and directly without.
static void
test_grad_additive (void **state)
{
    s_opts_t o = {.additive = true, .log_target = true};
    s_check_opts (CGQ_PRED_AGG_MEAN, false, 0, &o);
    s_check_opts (CGQ_PRED_AGG_SUM, false, 0, &o);
    s_check_opts (CGQ_PRED_AGG_GCN, false, 0.3f, &o);
    o.log_target = false;
    s_check_opts (CGQ_PRED_AGG_MEAN, false, 0, &o);
    s_check_opts (CGQ_PRED_AGG_GCN, false, 0.3f, &o);
    o = (s_opts_t){.additive = true, .log_target = true, .in_dim = CGQ_PRED_IN_DIM_COSTS};
    s_check_opts (CGQ_PRED_AGG_MEAN, false, 0, &o);
}

// The node-time loss added to the graph loss, in both domains.
static void
test_grad_node_loss (void **state)
{
    s_opts_t o = {.additive = true, .log_target = true, .node_loss = 0.5};
    s_check_opts (CGQ_PRED_AGG_MEAN, false, 0, &o);
    s_check_opts (CGQ_PRED_AGG_GCN, false, 0.3f, &o);
    o.log_target = false;
    o.node_loss = 2;
    s_check_opts (CGQ_PRED_AGG_SUM, false, 0, &o);
}

// What the additive readout computes, by hand: a graph's latency is the sum
// of its nodes' (exp (sigma u + mu - s) ms each), and the node loss is the
// mean over the nodes that have a time.
static void
test_additive_values (void **state)
{
    for (int log_target = 0; log_target < 2; log_target++) {
        cgq_pred_batch_t b;
        s_batch (&b, CGQ_PRED_AGG_MEAN);
        cgq_pred_shape_t shape = {.in_dim = IN,
                                  .layers = 2,
                                  .hidden = 8,
                                  .agg = CGQ_PRED_AGG_MEAN,
                                  .additive = true,
                                  .log_target = log_target,
                                  .y_mean = 1.2f,
                                  .y_std = 1.3f,
                                  .node_shift = 1.25f};
        cgq_pred_net_t *net = cgq_pred_net_new (&shape, 3);
        float pred[2];
        cgq_pred_net_forward (net, &b, false, pred);
        const float *u = cgq_pred_net_node_outputs (net);
        assert_non_null (u);
        double mu = 1.2, sig = 1.3, s = 1.25;
        for (int g = 0; g < 2; g++) {
            double ms = 0;
            for (int i = b.graph_off[g]; i < b.graph_off[g + 1]; i++)
                ms += log_target ? exp (sig * u[i] + mu - s) : sig * u[i] + mu * exp (-s);
            double y = pred[g] * sig + mu; // the graph's f(latency)
            double got = log_target ? exp (y) : y;
            assert_true (fabs (got - ms) < 1e-4 * fabs (ms) + 1e-5);
        }
        double want = 0;
        int cnt = 0;
        for (int i = 0; i < 7; i++)
            if (!isnan (b.node_target[i])) {
                want += (u[i] - b.node_target[i]) * (u[i] - b.node_target[i]);
                cnt++;
            }
        assert_int_equal (cnt, 5);
        assert_true (fabs (cgq_pred_net_node_loss (net, &b, 3, NULL) - 3 * want / cnt) < 1e-5);
        cgq_pred_net_destroy (&net);
        cgq_pred_batch_fini (&b);
    }
    // Other readouts have no node outputs.
    cgq_pred_shape_t sum = {.in_dim = IN, .layers = 1, .hidden = 4};
    cgq_pred_net_t *net = cgq_pred_net_new (&sum, 1);
    assert_null (cgq_pred_net_node_outputs (net));
    cgq_pred_net_destroy (&net);
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
        cmocka_unit_test (test_aggregation_matrix), cmocka_unit_test (test_grad_node_costs),
        cmocka_unit_test (test_grad_additive),      cmocka_unit_test (test_grad_node_loss),
        cmocka_unit_test (test_additive_values),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
