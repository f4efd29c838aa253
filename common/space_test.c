// space_test: the lazy search space and the searchers over it. Points are a
// pure function of (spec, seed, index); grids are enumerated in mixed-radix
// order; searchers resume from their state and never materialise the space.
// (Templates, which render points' values: template_test.)
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <cmocka.h>
#include <math.h>

#include "searcher.h"
#include "space.h"
#include "spec.h"
#include "template.h"
#include "util.h"

static cgq_spec_t *
s_parse (const char *y)
{
    char err[512] = "";
    cgq_spec_t *s = cgq_spec_parse (y, strlen (y), "t.yaml", err, sizeof err);
    if (!s)
        fail_msg ("spec did not parse: %s", err);
    return s;
}

static char *
s_point_text (const cgq_spec_t *spec, uint64_t index)
{
    json_t *p = cgq_space_point (spec, index);
    assert_non_null (p);
    char *t = json_dumps (p, JSON_COMPACT);
    json_decref (p);
    return t;
}

#define S_MIXED                                                                                    \
    "space:\n"                                                                                     \
    "  lr:      {loguniform: [1.0e-4, 1.0e-1]}\n"                                                  \
    "  hidden:  {choice: [64, 128, 256]}\n"                                                        \
    "  layers:  {randint: [2, 6]}\n"                                                               \
    "  dropout: {uniform: [0.0, 0.5]}\n"                                                           \
    "  batch:   {grid: [32, 64]}\n"                                                                \
    "  gnn: GATv2Conv\n"                                                                           \
    "search: {samples: 5000, seed: %d}\n"                                                          \
    "trial: {kind: noop}\n"

static cgq_spec_t *
s_mixed_spec (int seed)
{
    char y[1024];
    snprintf (y, sizeof y, S_MIXED, seed);
    return s_parse (y);
}

static void
t_reproducible (void **state)
{
    cgq_spec_t *a = s_mixed_spec (7), *b = s_mixed_spec (7), *c = s_mixed_spec (8);
    uint64_t total;
    assert_int_equal (cgq_space_count (a, &total), 0);
    assert_int_equal (total, 10000);
    int differ_seed = 0, differ_index = 0;
    for (uint64_t i = 0; i < 50; i++) {
        char *ta = s_point_text (a, i), *ta2 = s_point_text (a, i), *tb = s_point_text (b, i);
        char *tc = s_point_text (c, i), *tn = s_point_text (a, i + 2);
        assert_string_equal (ta, ta2);
        assert_string_equal (ta, tb); // another parse of the same spec: same points
        differ_seed += strcmp (ta, tc) != 0;
        differ_index += strcmp (ta, tn) != 0;
        free (ta), free (ta2), free (tb), free (tc), free (tn);
    }
    assert_int_equal (differ_seed, 50);
    assert_int_equal (differ_index, 50);

    // Keys in the order written, constants as written, floats with at most 15
    // significant digits.
    json_t *p = cgq_space_point (a, 3);
    const char *expect[] = {"lr", "hidden", "layers", "dropout", "batch", "gnn"};
    size_t k = 0;
    const char *key;
    json_t *v;
    json_object_foreach (p, key, v) assert_string_equal (key, expect[k++]);
    assert_int_equal (k, 6);
    assert_string_equal (json_string_value (json_object_get (p, "gnn")), "GATv2Conv");
    double lr = json_real_value (json_object_get (p, "lr"));
    assert_true (cgq_round15 (lr) == lr);
    char buf[32];
    snprintf (buf, sizeof buf, "%.15g", lr);
    assert_true (strtod (buf, NULL) == lr);
    json_decref (p);
    cgq_spec_destroy (&a);
    cgq_spec_destroy (&b);
    cgq_spec_destroy (&c);
}

static void
t_bounds (void **state)
{
    cgq_spec_t *s = s_mixed_spec (1);
    int layers[7] = {0}, hidden[3] = {0};
    double lr_min = 1, lr_max = 0, dr_min = 1, dr_max = 0;
    int lr_low_decade = 0; // [1e-4, 1e-3): a third of the draws on a log scale
    for (uint64_t i = 0; i < 10000; i++) {
        json_t *p = cgq_space_point (s, i);
        double lr = json_real_value (json_object_get (p, "lr"));
        double dr = json_real_value (json_object_get (p, "dropout"));
        json_t *l = json_object_get (p, "layers");
        assert_true (json_is_real (json_object_get (p, "lr")));
        assert_true (json_is_integer (l));
        assert_true (lr >= 1.0e-4 && lr <= 1.0e-1);
        assert_true (dr >= 0.0 && dr <= 0.5);
        lr_min = lr < lr_min ? lr : lr_min, lr_max = lr > lr_max ? lr : lr_max;
        dr_min = dr < dr_min ? dr : dr_min, dr_max = dr > dr_max ? dr : dr_max;
        lr_low_decade += lr < 1.0e-3;
        json_int_t li = json_integer_value (l);
        assert_true (li >= 2 && li <= 6);
        layers[li]++;
        json_int_t h = json_integer_value (json_object_get (p, "hidden"));
        assert_true (h == 64 || h == 128 || h == 256);
        hidden[h == 64 ? 0 : h == 128 ? 1 : 2]++;
        assert_int_equal (json_integer_value (json_object_get (p, "batch")), i % 2 ? 64 : 32);
        json_decref (p);
    }
    for (int i = 2; i <= 6; i++)
        assert_true (layers[i] > 1500 && layers[i] < 2500); // both ends inclusive, ~2000 each
    for (int i = 0; i < 3; i++)
        assert_true (hidden[i] > 3000 && hidden[i] < 3700);
    assert_true (lr_min < 1.1e-4 && lr_max > 0.09);
    assert_true (dr_min < 0.01 && dr_max > 0.49);
    assert_true (lr_low_decade > 3000 && lr_low_decade < 3700);
    cgq_spec_destroy (&s);
}

static void
t_grid_cross_product (void **state)
{
    cgq_spec_t *s = s_parse ("space:\n"
                             "  a: {grid: [1, 2, 3]}\n"
                             "  u: {uniform: [0, 1]}\n"
                             "  b: {grid: [x, y]}\n"
                             "  c: {choice: [p, q]}\n"
                             "search: {samples: 4}\n"
                             "trial: {kind: noop}\n");
    uint64_t total;
    assert_int_equal (cgq_space_count (s, &total), 0);
    assert_int_equal (total, 24);
    const char *expect[6] = {"1x", "1y", "2x", "2y", "3x", "3y"};
    for (uint64_t i = 0; i < total; i++) {
        json_t *p = cgq_space_point (s, i);
        char got[16];
        snprintf (got, sizeof got, "%lld%s",
                  (long long) json_integer_value (json_object_get (p, "a")),
                  json_string_value (json_object_get (p, "b")));
        assert_string_equal (got, expect[i % 6]); // first axis slowest, samples repeat the grid
        json_decref (p);
    }
    // Each repeat of a grid point draws its own samples.
    json_t *p0 = cgq_space_point (s, 0), *p6 = cgq_space_point (s, 6);
    assert_true (json_real_value (json_object_get (p0, "u")) !=
                 json_real_value (json_object_get (p6, "u")));
    json_decref (p0);
    json_decref (p6);
    cgq_spec_destroy (&s);
}

static void
t_grid_algorithm (void **state)
{
    cgq_spec_t *s = s_parse ("space:\n"
                             "  opt: {choice: [sgd, adam]}\n"
                             "  bs: {grid: [16, 32, 64]}\n"
                             "  lr: {uniform: [0.1, 0.2]}\n"
                             "  k: 3\n"
                             "search: {algorithm: grid}\n"
                             "trial: {kind: noop}\n");
    uint64_t total;
    assert_int_equal (cgq_space_count (s, &total), 0);
    assert_int_equal (total, 6);
    int seen[2][3] = {{0}};
    for (uint64_t i = 0; i < total; i++) {
        json_t *p = cgq_space_point (s, i);
        const char *opt = json_string_value (json_object_get (p, "opt"));
        json_int_t bs = json_integer_value (json_object_get (p, "bs"));
        int o = !strcmp (opt, "adam"), b = bs == 16 ? 0 : bs == 32 ? 1 : 2;
        assert_int_equal (o, i / 3); // choice written first: the slowest axis
        assert_int_equal (b, i % 3);
        seen[o][b]++;
        double lr = json_real_value (json_object_get (p, "lr"));
        assert_true (lr >= 0.1 && lr <= 0.2); // uniform is still sampled
        assert_int_equal (json_integer_value (json_object_get (p, "k")), 3);
        json_decref (p);
    }
    for (int o = 0; o < 2; o++)
        for (int b = 0; b < 3; b++)
            assert_int_equal (seen[o][b], 1);
    cgq_spec_destroy (&s);
}

static void
t_count_overflow (void **state)
{
    cgq_spec_t *s =
        s_parse ("space: {a: {grid: [1, 2]}, b: {choice: [1, 2, 3]}}\ntrial: {kind: noop}\n");
    uint64_t total = 0;
    s->search.samples = 1ULL << 61;
    assert_int_equal (cgq_space_count (s, &total), 0);
    assert_int_equal (total, 1ULL << 62);
    s->search.samples = 1ULL << 62; // 2^63: one past what fits
    assert_int_equal (cgq_space_count (s, &total), -1);
    s->search.samples = (1ULL << 63) + 1; // would wrap to a small number in uint64
    assert_int_equal (cgq_space_count (s, &total), -1);
    s->search.samples = 1;
    s->search.algorithm = CGQ_SEARCH_GRID; // the choice becomes an axis
    assert_int_equal (cgq_space_count (s, &total), 0);
    assert_int_equal (total, 6);
    // Far indices are as cheap as near ones.
    s->search.samples = 1ULL << 40;
    json_t *p = cgq_space_point (s, (1ULL << 42) + 5);
    assert_int_equal (json_integer_value (json_object_get (p, "a")), 2);
    assert_int_equal (json_integer_value (json_object_get (p, "b")), 1); // (2^42 + 5) mod 6 = 3
    json_decref (p);
    cgq_spec_destroy (&s);
}

static void
t_searcher (void **state)
{
    cgq_spec_t *s = s_parse ("space: {a: {grid: [1, 2, 3]}, u: {uniform: [0, 1]}}\n"
                             "search: {samples: 2, seed: 3}\ntrial: {kind: noop}\n");
    char err[512] = "";
    cgq_searcher_t *se = cgq_searcher_new (s, NULL, err, sizeof err);
    assert_non_null (se);
    assert_int_equal (cgq_searcher_total (se), 6);
    assert_int_equal (cgq_searcher_suggested (se), 0);
    assert_false (cgq_searcher_done (se));
    for (uint64_t i = 0; i < 6; i++) {
        uint64_t id = 99;
        json_t *p = cgq_searcher_suggest (se, &id);
        assert_non_null (p);
        assert_int_equal (id, i);
        json_t *want = cgq_space_point (s, i);
        assert_true (json_equal (p, want));
        json_decref (want);
        json_decref (p);
        cgq_searcher_observe (se, id, NULL, 1.0, true);
        assert_int_equal (cgq_searcher_suggested (se), i + 1);
    }
    assert_true (cgq_searcher_done (se));
    uint64_t id = 99;
    assert_null (cgq_searcher_suggest (se, &id));
    assert_int_equal (id, 99);
    assert_int_equal (cgq_searcher_suggested (se), 6);
    json_t *st = cgq_searcher_save (se);
    char *t = json_dumps (st, JSON_COMPACT);
    assert_string_equal (t, "{\"algorithm\":\"random\",\"next\":6}");
    free (t);
    json_decref (st);
    cgq_searcher_destroy (&se);
    assert_null (se);
    cgq_searcher_destroy (&se);
    cgq_spec_destroy (&s);
}

static void
t_searcher_resume (void **state)
{
    cgq_spec_t *s = s_mixed_spec (5);
    char err[512] = "";
    cgq_searcher_t *a = cgq_searcher_new (s, NULL, err, sizeof err);
    for (int i = 0; i < 37; i++)
        json_decref (cgq_searcher_suggest (a, NULL));
    json_t *st = cgq_searcher_save (a);
    // The state goes through Redis as text.
    char *text = json_dumps (st, JSON_COMPACT);
    json_decref (st);
    st = json_loads (text, 0, NULL);
    free (text);
    cgq_searcher_t *b = cgq_searcher_new (s, st, err, sizeof err);
    assert_non_null (b);
    json_decref (st);
    assert_int_equal (cgq_searcher_suggested (b), 37);
    for (int i = 0; i < 5; i++) {
        uint64_t ia, ib;
        json_t *pa = cgq_searcher_suggest (a, &ia), *pb = cgq_searcher_suggest (b, &ib);
        assert_int_equal (ia, 37 + i);
        assert_int_equal (ib, ia);
        assert_true (json_equal (pa, pb));
        json_decref (pa);
        json_decref (pb);
    }
    cgq_searcher_destroy (&a);
    cgq_searcher_destroy (&b);

    // A null state is a new job.
    json_t *null = json_null ();
    b = cgq_searcher_new (s, null, err, sizeof err);
    assert_non_null (b);
    assert_int_equal (cgq_searcher_suggested (b), 0);
    cgq_searcher_destroy (&b);
    cgq_spec_destroy (&s);
}

static void
t_searcher_bad_state (void **state)
{
    cgq_spec_t *s =
        s_parse ("space: {a: {grid: [1, 2]}}\nsearch: {samples: 3}\ntrial: {kind: noop}\n");
    char err[512];
    const char *bad[] = {
        "{\"algorithm\": \"grid\", \"next\": 1}",   // another algorithm
        "{\"algorithm\": \"random\", \"next\": 7}", // past total (6)
        "{\"algorithm\": \"random\", \"next\": -1}",
        "{\"algorithm\": \"random\", \"next\": \"3\"}",
        "{\"algorithm\": \"random\"}",
        "{\"next\": 1}",
        "[1, 2]",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        json_t *st = json_loads (bad[i], JSON_DECODE_ANY, NULL);
        assert_non_null (st);
        err[0] = 0;
        cgq_searcher_t *se = cgq_searcher_new (s, st, err, sizeof err);
        if (se)
            fail_msg ("state %s was accepted", bad[i]);
        assert_non_null (strstr (err, "searcher state"));
        json_decref (st);
    }
    err[0] = 0;
    json_t *st = json_loads ("{\"algorithm\": \"random\", \"next\": 1}", 0, NULL);
    cgq_searcher_t *se = cgq_searcher_new (s, st, err, sizeof err);
    assert_non_null (se);
    uint64_t id;
    json_t *p = cgq_searcher_suggest (se, &id);
    assert_int_equal (id, 1);
    assert_int_equal (json_integer_value (json_object_get (p, "a")), 2);
    json_decref (p);
    json_decref (st);
    cgq_searcher_destroy (&se);

    // The full state is accepted: the search is done.
    st = json_loads ("{\"algorithm\": \"random\", \"next\": 6}", 0, NULL);
    se = cgq_searcher_new (s, st, err, sizeof err);
    assert_true (cgq_searcher_done (se));
    json_decref (st);
    cgq_searcher_destroy (&se);
    cgq_spec_destroy (&s);
}

// Allocation accounting for jansson, which makes every point.
static size_t s_json_bytes;

static void *
s_count_malloc (size_t n)
{
    s_json_bytes += n;
    return malloc (n);
}

static long
s_maxrss_kb (void)
{
    struct rusage ru;
    getrusage (RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

static void
t_searcher_large (void **state)
{
    cgq_spec_t *s =
        s_parse ("space:\n  lr: {loguniform: [1.0e-5, 1]}\n  h: {choice: [1, 2, 3]}\n"
                 "  n: {randint: [1, 100]}\nsearch: {samples: 1000000}\ntrial: {kind: noop}\n");
    long rss0 = s_maxrss_kb ();
    s_json_bytes = 0;
    json_set_alloc_funcs (s_count_malloc, free);
    int64_t t0 = cgq_now_ms ();
    char err[256];
    cgq_searcher_t *se = cgq_searcher_new (s, NULL, err, sizeof err);
    assert_non_null (se);
    assert_int_equal (cgq_searcher_total (se), 1000000);
    for (int i = 0; i < 1000; i++) {
        json_t *p = cgq_searcher_suggest (se, NULL);
        assert_non_null (p);
        json_decref (p);
    }
    int64_t ms = cgq_now_ms () - t0;
    json_set_alloc_funcs (malloc, free);
    assert_int_equal (cgq_searcher_suggested (se), 1000);
    assert_false (cgq_searcher_done (se));
    // 1000 points of 3 params: well under 1 MB; anything sized by 10^6 would
    // be at least 8 MB.
    assert_true (s_json_bytes > 0 && s_json_bytes < (1u << 20));
    assert_true (s_maxrss_kb () - rss0 < 8 * 1024);
    assert_true (ms < 2000);
    cgq_searcher_destroy (&se);
    cgq_spec_destroy (&s);
}

// --- the kinds of the search issue -------------------------------------------

static bool
s_multiple (double v, double q)
{
    double k = v / q;
    return fabs (k - round (k)) < 1e-9;
}

static void
t_quantized (void **state)
{
    cgq_spec_t *s = s_parse ("space:\n"
                             "  q: {quniform: [0, 100, 5]}\n"
                             "  r: {quniform: [0.1, 0.5, 0.1]}\n"
                             "  l: {qloguniform: [16, 1024, 16]}\n"
                             "  o: {quniform: [0.3, 2.9, 1]}\n"
                             "  u: {uniform: [0, 1]}\n" // continuous: drawn with replacement
                             "search: {samples: 4000, seed: 2}\n"
                             "trial: {kind: noop}\n");
    assert_false (cgq_space_without_replacement (s));
    int q_ends = 0, r_lo = 0, r_hi = 0, l_low = 0;
    for (uint64_t i = 0; i < 4000; i++) {
        json_t *p = cgq_space_point (s, i);
        json_t *q = json_object_get (p, "q"), *r = json_object_get (p, "r");
        json_t *l = json_object_get (p, "l"), *o = json_object_get (p, "o");
        assert_true (json_is_integer (q)); // lo, hi and q are integers
        json_int_t qi = json_integer_value (q);
        assert_true (qi >= 0 && qi <= 100 && qi % 5 == 0);
        q_ends += qi == 0 || qi == 100;
        assert_true (json_is_real (r));
        double rv = json_real_value (r);
        assert_true (rv >= 0.1 && rv <= 0.5 && s_multiple (rv, 0.1));
        assert_true (cgq_round15 (rv) == rv); // 0.3, not 0.30000000000000004
        r_lo += rv == 0.1;
        r_hi += rv == 0.5;
        json_int_t li = json_integer_value (l);
        assert_true (json_is_integer (l) && li >= 16 && li <= 1024 && li % 16 == 0);
        l_low += li <= 128;
        // Bounds that are not multiples: the values are the multiples inside.
        double ov = json_real_value (o);
        assert_true (ov == 1 || ov == 2);
        json_decref (p);
    }
    assert_true (q_ends > 0);
    assert_true (r_lo > 0 && r_hi > 0);
    // On a log scale [16, 128] is half the range: about half of the draws.
    assert_true (l_low > 1600 && l_low < 2400);
    cgq_spec_destroy (&s);
}

static void
t_repeat (void **state)
{
    cgq_spec_t *s = s_parse ("space:\n"
                             "  d: {repeat: 5, of: {choice: [2, 3, 4]}}\n"
                             "  n: {repeat: 2, of: {randint: [1, 3]}}\n"
                             "  w: {repeat: 3, of: {quniform: [0, 10, 5]}}\n"
                             "  u: {repeat: 4, of: {uniform: [0, 1]}}\n"
                             "search: {samples: 500, seed: 9}\n"
                             "trial: {kind: noop}\n");
    bool seen[5][5] = {{false}}; // element i took value 2 + v
    for (uint64_t i = 0; i < 500; i++) {
        json_t *p = cgq_space_point (s, i);
        json_t *d = json_object_get (p, "d"), *n = json_object_get (p, "n");
        json_t *w = json_object_get (p, "w"), *u = json_object_get (p, "u");
        assert_int_equal (json_array_size (d), 5);
        assert_int_equal (json_array_size (n), 2);
        assert_int_equal (json_array_size (w), 3);
        assert_int_equal (json_array_size (u), 4);
        for (size_t k = 0; k < 5; k++) {
            json_int_t v = json_integer_value (json_array_get (d, k));
            assert_true (v >= 2 && v <= 4);
            seen[k][v - 2] = true;
        }
        for (size_t k = 0; k < 2; k++) {
            json_int_t v = json_integer_value (json_array_get (n, k));
            assert_true (v >= 1 && v <= 3);
        }
        for (size_t k = 0; k < 3; k++) {
            json_t *v = json_array_get (w, k);
            assert_true (json_is_integer (v) && json_integer_value (v) % 5 == 0 &&
                         json_integer_value (v) >= 0 && json_integer_value (v) <= 10);
        }
        for (size_t k = 0; k < 4; k++) {
            double v = json_real_value (json_array_get (u, k));
            assert_true (v >= 0 && v <= 1);
        }
        json_decref (p);
    }
    for (int k = 0; k < 5; k++)
        for (int v = 0; v < 3; v++)
            assert_true (seen[k][v]);
    // The template text of a list is compact JSON.
    json_t *p = cgq_space_point (s, 0);
    char *t = cgq_template_value_str (json_object_get (p, "n"));
    assert_true (strlen (t) == 5 && t[0] == '[' && t[2] == ',' && t[4] == ']');
    free (t);
    json_decref (p);
    cgq_spec_destroy (&s);

    // Under grid a repeat of a choice is an axis: the last element varies
    // fastest, as the last written axis does.
    s = s_parse ("space:\n  d: {repeat: 3, of: {choice: [a, b]}}\n  k: {grid: [1, 2]}\n"
                 "search: {algorithm: grid}\ntrial: {kind: noop}\n");
    uint64_t total;
    assert_int_equal (cgq_space_count (s, &total), 0);
    assert_int_equal (total, 16);
    const char *expect[8] = {"aaa", "aab", "aba", "abb", "baa", "bab", "bba", "bbb"};
    for (uint64_t i = 0; i < total; i++) {
        json_t *pt = cgq_space_point (s, i);
        json_t *d = json_object_get (pt, "d");
        char got[4];
        for (size_t k = 0; k < 3; k++)
            got[k] = json_string_value (json_array_get (d, k))[0];
        got[3] = 0;
        assert_string_equal (got, expect[i / 2]);
        assert_int_equal (json_integer_value (json_object_get (pt, "k")), 1 + (int) (i % 2));
        json_decref (pt);
    }
    cgq_spec_destroy (&s);
}

// s_bits5 is an assignment spec of 5 items and 2 choices.
#define S_BITS5                                                                                    \
    "space:\n  b: {assignment: {items: [i0, i1, i2, i3, i4], choices: [c0, c1]}}\n"                \
    "trial: {kind: noop}\n"

static void
t_assignment (void **state)
{
    // Digit k of the id in base B, least significant first, is item k's
    // choice: 13 = 0b01101 puts items 0, 2 and 3 on c1.
    cgq_spec_t *s = s_parse (S_BITS5 "search: {algorithm: grid}\n");
    uint64_t total;
    assert_int_equal (cgq_space_count (s, &total), 0);
    assert_int_equal (total, 32);
    bool seen[32] = {false};
    for (uint64_t i = 0; i < total; i++) {
        json_t *p = cgq_space_point (s, i);
        json_t *b = json_object_get (p, "b");
        json_int_t id = json_integer_value (json_object_get (b, "id"));
        assert_int_equal (id, i); // the grid walks the ids in order
        assert_false (seen[id]);
        seen[id] = true;
        json_t *map = json_object_get (b, "map");
        assert_int_equal (json_object_size (map), 5);
        for (int k = 0; k < 5; k++) {
            char item[4];
            snprintf (item, sizeof item, "i%d", k);
            const char *c = json_string_value (json_object_get (map, item));
            assert_string_equal (c, (id >> k) & 1 ? "c1" : "c0");
        }
        if (id == 13) {
            char *t = cgq_template_value_str (b);
            assert_string_equal (
                t, "{\"id\":13,\"map\":{\"i0\":\"c1\",\"i1\":\"c0\",\"i2\":\"c1\",\"i3\":\"c1\","
                   "\"i4\":\"c0\"}}");
            free (t);
        }
        json_decref (p);
    }
    cgq_spec_destroy (&s);

    // Base 3: 5 = 12 in base 3, so item 0 takes choices[2] and item 1 choices[1].
    s = s_parse ("space:\n  b: {assignment: {items: [x, y, z], choices: [cpu, gpu, npu]}}\n"
                 "search: {algorithm: grid}\ntrial: {kind: noop}\n");
    json_t *p = cgq_space_point (s, 5);
    json_t *map = json_object_get (json_object_get (p, "b"), "map");
    assert_string_equal (json_string_value (json_object_get (map, "x")), "npu");
    assert_string_equal (json_string_value (json_object_get (map, "y")), "gpu");
    assert_string_equal (json_string_value (json_object_get (map, "z")), "cpu");
    json_decref (p);
    cgq_spec_destroy (&s);
}

static void
t_assignment_large (void **state)
{
    cgq_buf_t b;
    cgq_buf_init (&b);
    cgq_buf_puts (&b, "space:\n  b: {assignment: {choices: [c0, c1], items: [i0");
    for (int i = 1; i < 40; i++)
        cgq_buf_printf (&b, ", i%d", i);
    cgq_buf_puts (&b, "]}}\nsearch: {algorithm: grid}\ntrial: {kind: noop}\n");
    cgq_spec_t *s = s_parse (b.data);
    cgq_buf_fini (&b);
    uint64_t total;
    assert_int_equal (cgq_space_count (s, &total), 0);
    assert_int_equal (total, 1ULL << 40);

    // The last id costs what the first one does: nothing sized by 2^40.
    long rss0 = s_maxrss_kb ();
    size_t bytes[2];
    uint64_t at[2] = {0, (1ULL << 40) - 1};
    for (int k = 0; k < 2; k++) {
        s_json_bytes = 0;
        json_set_alloc_funcs (s_count_malloc, free);
        json_t *p = cgq_space_point (s, at[k]);
        json_set_alloc_funcs (malloc, free);
        bytes[k] = s_json_bytes;
        json_t *v = json_object_get (p, "b");
        assert_int_equal (json_integer_value (json_object_get (v, "id")), at[k]);
        json_t *map = json_object_get (v, "map");
        assert_int_equal (json_object_size (map), 40);
        assert_string_equal (json_string_value (json_object_get (map, "i39")), k ? "c1" : "c0");
        assert_string_equal (json_string_value (json_object_get (map, "i0")), k ? "c1" : "c0");
        json_decref (p);
    }
    assert_true (bytes[0] > 0 && bytes[0] < 16384);
    assert_int_equal (bytes[1], bytes[0]);
    assert_true (s_maxrss_kb () - rss0 < 1024);

    // Random search over the same 2^40 ids: without replacement, and cheap.
    s->search.algorithm = CGQ_SEARCH_RANDOM;
    s->search.samples = 1000;
    assert_true (cgq_space_without_replacement (s));
    json_t *ids = json_object ();
    for (uint64_t i = 0; i < 1000; i++) {
        json_t *p = cgq_space_point (s, i);
        json_int_t id = json_integer_value (json_object_get (json_object_get (p, "b"), "id"));
        assert_true (id >= 0 && id < (json_int_t) (1ULL << 40));
        char key[32];
        snprintf (key, sizeof key, "%lld", (long long) id);
        assert_null (json_object_get (ids, key));
        json_object_set_new (ids, key, json_true ());
        json_decref (p);
    }
    json_decref (ids);
    cgq_spec_destroy (&s);
}

// s_sequence returns the points 0..n-1 of spec as one JSON text per point,
// joined by newlines (caller frees).
static char *
s_sequence (const cgq_spec_t *spec, uint64_t n)
{
    cgq_buf_t b;
    cgq_buf_init (&b);
    for (uint64_t i = 0; i < n; i++) {
        char *t = s_point_text (spec, i);
        cgq_buf_printf (&b, "%s\n", t);
        free (t);
    }
    return cgq_buf_take (&b);
}

// s_all_distinct checks that the n points of spec from index first on, at
// stride step, are distinct once the params in skip are left out.
static void
s_all_distinct (const cgq_spec_t *spec, uint64_t first, uint64_t step, uint64_t n, const char *skip)
{
    json_t *seen = json_object ();
    for (uint64_t i = 0; i < n; i++) {
        json_t *p = cgq_space_point (spec, first + i * step);
        if (skip)
            json_object_del (p, skip);
        char *t = json_dumps (p, JSON_COMPACT | JSON_SORT_KEYS);
        if (json_object_get (seen, t))
            fail_msg ("point %llu repeats %s", (unsigned long long) (first + i * step), t);
        json_object_set_new (seen, t, json_true ());
        free (t);
        json_decref (p);
    }
    json_decref (seen);
}

// s_choice1000 is a spec of one 1000-value choice sampled 1000 times.
static cgq_spec_t *
s_choice1000 (int seed)
{
    cgq_buf_t b;
    cgq_buf_init (&b);
    cgq_buf_puts (&b, "space:\n  c: {choice: [0");
    for (int i = 1; i < 1000; i++)
        cgq_buf_printf (&b, ", %d", i);
    cgq_buf_printf (&b, "]}\nsearch: {samples: 1000, seed: %d}\ntrial: {kind: noop}\n", seed);
    cgq_spec_t *s = s_parse (b.data);
    cgq_buf_fini (&b);
    return s;
}

static void
t_without_replacement (void **state)
{
    // Seed 002's case: 32 profiles of a 32-id assignment try every one once.
    cgq_spec_t *s = s_parse (S_BITS5 "search: {samples: 32, seed: 2}\n");
    assert_true (cgq_space_without_replacement (s));
    s_all_distinct (s, 0, 1, 32, NULL);
    cgq_spec_destroy (&s);

    // 1000 samples of a 1000-value choice: all distinct, in a shuffled order.
    cgq_spec_t *a = s_choice1000 (5), *a2 = s_choice1000 (5), *c = s_choice1000 (6);
    s_all_distinct (a, 0, 1, 1000, NULL);
    int in_place = 0;
    for (uint64_t i = 0; i < 1000; i++) {
        json_t *p = cgq_space_point (a, i);
        in_place += json_integer_value (json_object_get (p, "c")) == (json_int_t) i;
        json_decref (p);
    }
    assert_true (in_place < 20); // a shuffle, not the identity
    // The same seed gives the same sequence, another seed another one.
    char *sa = s_sequence (a, 1000), *sa2 = s_sequence (a2, 1000), *sc = s_sequence (c, 1000);
    assert_string_equal (sa, sa2);
    assert_string_not_equal (sa, sc);
    free (sa), free (sa2), free (sc);
    // Any trial can be regenerated alone, in any order.
    char *t999 = s_point_text (a, 999), *t0 = s_point_text (a, 0), *t999b = s_point_text (a, 999);
    assert_string_equal (t999, t999b);
    free (t999), free (t0), free (t999b);
    cgq_spec_destroy (&a);
    cgq_spec_destroy (&a2);
    cgq_spec_destroy (&c);

    // Every discrete kind together: 3 x 4 x 3 x 2^2 x 2 = 288 combinations.
    s = s_parse ("space:\n"
                 "  c: {choice: [a, b, c]}\n"
                 "  n: {randint: [1, 4]}\n"
                 "  q: {quniform: [0, 1, 0.5]}\n"
                 "  r: {repeat: 2, of: {choice: [x, y]}}\n"
                 "  b: {assignment: {items: [conv], choices: [cpu, gpu]}}\n"
                 "  k: 7\n"
                 "search: {samples: 288, seed: 1}\n"
                 "trial: {kind: noop}\n");
    uint64_t d;
    assert_int_equal (cgq_space_sampled_size (s, &d), 0);
    assert_int_equal (d, 288);
    assert_true (cgq_space_without_replacement (s));
    s_all_distinct (s, 0, 1, 288, NULL);
    cgq_spec_destroy (&s);

    // Per grid point: sample s of each grid point is point perm(s).
    s = s_parse ("space:\n  g: {grid: [1, 2]}\n  c: {choice: [a, b, c, d, e]}\n"
                 "search: {samples: 5, seed: 4}\ntrial: {kind: noop}\n");
    assert_true (cgq_space_without_replacement (s));
    s_all_distinct (s, 0, 2, 5, "g"); // grid point 0
    s_all_distinct (s, 1, 2, 5, "g"); // grid point 1
    for (uint64_t i = 0; i < 10; i += 2) {
        json_t *p = cgq_space_point (s, i), *q = cgq_space_point (s, i + 1);
        assert_true (json_equal (json_object_get (p, "c"), json_object_get (q, "c")));
        json_decref (p);
        json_decref (q);
    }
    cgq_spec_destroy (&s);
}

// With replacement whenever the rule does not hold: a continuous param, more
// samples than points, or algorithm grid. Then the values are today's.
static void
t_with_replacement (void **state)
{
#define S_BASE "space:\n  c: {choice: [a, b, c]}\n  n: {randint: [1, 3]}\n"
    cgq_spec_t *more = s_parse (S_BASE "search: {samples: 10, seed: 3}\ntrial: {kind: noop}\n");
    assert_false (cgq_space_without_replacement (more)); // 10 samples > 9 points
    // A continuous param written last does not change the draws before it.
    cgq_spec_t *cont = s_parse (S_BASE "  u: {uniform: [0, 1]}\n"
                                       "search: {samples: 5, seed: 3}\ntrial: {kind: noop}\n");
    assert_false (cgq_space_without_replacement (cont));
    int repeats = 0;
    json_t *seen = json_object ();
    for (uint64_t i = 0; i < 10; i++) {
        json_t *p = cgq_space_point (more, i), *q = cgq_space_point (cont, i);
        assert_true (json_equal (json_object_get (p, "c"), json_object_get (q, "c")));
        assert_true (json_equal (json_object_get (p, "n"), json_object_get (q, "n")));
        char *t = json_dumps (p, JSON_COMPACT);
        repeats += json_object_get (seen, t) != NULL;
        json_object_set_new (seen, t, json_true ());
        free (t);
        json_decref (p);
        json_decref (q);
    }
    assert_true (repeats >= 1); // 10 draws from 9 points
    json_decref (seen);
    cgq_spec_destroy (&more);
    cgq_spec_destroy (&cont);

    cgq_spec_t *g = s_parse ("space:\n  n: {randint: [1, 1000]}\n"
                             "search: {algorithm: grid, samples: 3}\ntrial: {kind: noop}\n");
    assert_false (cgq_space_without_replacement (g));
    cgq_spec_destroy (&g);
}

// The searcher walks the permutation: seed 002 never profiles an id twice.
static void
t_searcher_without_replacement (void **state)
{
    cgq_spec_t *s = s_parse (S_BITS5 "search: {samples: 32, seed: 7}\n");
    char err[256];
    cgq_searcher_t *se = cgq_searcher_new (s, NULL, err, sizeof err);
    assert_non_null (se);
    bool seen[32] = {false};
    json_t *p;
    uint64_t id;
    while ((p = cgq_searcher_suggest (se, &id))) {
        json_int_t b = json_integer_value (json_object_get (json_object_get (p, "b"), "id"));
        assert_false (seen[b]);
        seen[b] = true;
        json_decref (p);
    }
    for (int i = 0; i < 32; i++)
        assert_true (seen[i]);
    cgq_searcher_destroy (&se);
    cgq_spec_destroy (&s);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (t_reproducible),
        cmocka_unit_test (t_bounds),
        cmocka_unit_test (t_grid_cross_product),
        cmocka_unit_test (t_grid_algorithm),
        cmocka_unit_test (t_count_overflow),
        cmocka_unit_test (t_searcher),
        cmocka_unit_test (t_searcher_resume),
        cmocka_unit_test (t_searcher_bad_state),
        cmocka_unit_test (t_searcher_large),
        cmocka_unit_test (t_quantized),
        cmocka_unit_test (t_repeat),
        cmocka_unit_test (t_assignment),
        cmocka_unit_test (t_assignment_large),
        cmocka_unit_test (t_without_replacement),
        cmocka_unit_test (t_with_replacement),
        cmocka_unit_test (t_searcher_without_replacement),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
