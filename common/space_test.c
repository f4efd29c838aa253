// space_test: the lazy search space and the searchers over it. Points are a
// pure function of (spec, seed, index); grids are enumerated in mixed-radix
// order; templates render and quote values; searchers resume from their state
// and never materialise the space.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <cmocka.h>

#include "searcher.h"
#include "space.h"
#include "spec.h"
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
t_render (void **state)
{
    json_t *params = json_pack ("{s:f, s:i, s:s, s:s, s:b, s:[i,f], s:{s:i}, s:f, s:n}", "lr",
                                0.001, "hidden", 128, "name", "it's a test", "plain", "GATv2Conv",
                                "flag", 1, "list", 1, 0.5, "map", "a", 1, "big", 1e-20, "none");
    char err[512] = "";
    char *r = cgq_space_render ("--lr {lr} --hidden {hidden} --name {name} {plain}", params, 7, 12,
                                "/specs", 0, err, sizeof err);
    assert_string_equal (r, "--lr 0.001 --hidden 128 --name it's a test GATv2Conv");
    free (r);

    r = cgq_space_render ("--lr {lr} --name {name} {plain} {list} {flag}", params, 7, 12, "/specs",
                          1, err, sizeof err);
    assert_string_equal (r, "--lr 0.001 --name 'it'\\''s a test' GATv2Conv '[1,0.5]' true");
    free (r);

    r = cgq_space_render ("{job_id}/{trial_id} {spec_dir} {map} {big} {none}", params, 7, 12,
                          "/my specs", 1, err, sizeof err);
    assert_string_equal (r, "7/12 '/my specs' '{\"a\":1}' 1e-20 null");
    free (r);

    r = cgq_space_render ("{{literal}} {{{hidden}}} a}}b", params, 7, 12, "/s", 1, err, sizeof err);
    assert_string_equal (r, "{literal} {128} a}b");
    free (r);

    err[0] = 0;
    assert_null (cgq_space_render ("x {lrr} y", params, 7, 12, "/s", 0, err, sizeof err));
    assert_non_null (strstr (err, "unknown placeholder '{lrr}' at byte 2"));
    assert_null (cgq_space_render ("x {lr", params, 7, 12, "/s", 0, err, sizeof err));
    assert_non_null (strstr (err, "bad placeholder"));
    assert_null (cgq_space_render ("x } y", params, 7, 12, "/s", 0, err, sizeof err));
    assert_non_null (strstr (err, "stray '}' at byte 2"));
    json_decref (params);

    // Sampled values print as their shortest text after rounding.
    cgq_spec_t *s =
        s_parse ("space: {lr: {loguniform: [0.001, 0.1]}, c: 0.1}\ntrial:\n  command: x {lr}\n");
    json_t *p = cgq_space_point (s, 0);
    r = cgq_space_render ("{lr} {c}", p, 1, 0, NULL, 0, err, sizeof err);
    char expect[64], a[32];
    snprintf (expect, sizeof expect, "%s 0.1",
              cgq_fmt_double (a, json_real_value (json_object_get (p, "lr"))));
    assert_string_equal (r, expect);
    assert_true (strlen (r) <= 23); // "0.00" and at most 15 digits, then " 0.1"
    free (r);
    json_decref (p);

    size_t at = 99;
    char name[32];
    assert_int_equal (cgq_space_check_template (s, "a {lr} {job_id} {{x}} {trial_id}{spec_dir}",
                                                &at, name, sizeof name),
                      0);
    assert_int_equal (cgq_space_check_template (s, "a {lr} {lrr}", &at, name, sizeof name), -1);
    assert_int_equal (at, 8);
    assert_string_equal (name, "lrr");
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

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (t_reproducible),       cmocka_unit_test (t_bounds),
        cmocka_unit_test (t_grid_cross_product), cmocka_unit_test (t_grid_algorithm),
        cmocka_unit_test (t_count_overflow),     cmocka_unit_test (t_render),
        cmocka_unit_test (t_searcher),           cmocka_unit_test (t_searcher_resume),
        cmocka_unit_test (t_searcher_bad_state), cmocka_unit_test (t_searcher_large),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
