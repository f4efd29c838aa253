// search_pbt_test: algorithm pbt's decisions (search_pbt.c) and its spec
// checks: the quantile split, ties, small populations, how each kind of
// param is perturbed or resampled, seeded determinism, the pins on a donor's
// checkpoint, and a saved state that resumes exactly.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "search_impl.h"
#include "searcher.h"
#include "spec.h"
#include "util.h"

#define SPEC_HEAD                                                                                  \
    "space:\n"                                                                                     \
    "  lr: {loguniform: [0.0001, 1.0]}\n"                                                          \
    "  mom: {uniform: [0.0, 1.0]}\n"                                                               \
    "  bs: {randint: [1, 64]}\n"                                                                   \
    "  act: {choice: [relu, tanh, gelu, silu]}\n"                                                  \
    "trial: {command: 'true'}\n"                                                                   \
    "objective: {metric: acc, mode: max}\n"

static cgq_spec_t *
s_spec (const char *search, const char *extra, char *err, size_t errlen)
{
    char text[2048];
    snprintf (text, sizeof text, SPEC_HEAD "%s%s", search, extra);
    return cgq_spec_parse (text, strlen (text), "pbt.yaml", err, errlen);
}

static cgq_spec_t *
s_good (uint32_t population, double resample)
{
    char search[512], err[512];
    snprintf (search, sizeof search,
              "search: {algorithm: pbt, population: %u, perturbation_interval: 4, seed: 7, "
              "resample_probability: %g, hyperparam_mutations: [lr, mom, bs, act]}\n",
              population, resample);
    cgq_spec_t *s = s_spec (search, "checkpoint: {store: /tmp/ck}\n", err, sizeof err);
    if (!s)
        fail_msg ("%s", err);
    return s;
}

static void
test_quantile_size (void **state)
{
    (void)state;
    assert_int_equal (cgq_pbt_quantile_size (0, 0.25), 0);
    assert_int_equal (cgq_pbt_quantile_size (1, 0.25), 0);
    assert_int_equal (cgq_pbt_quantile_size (2, 0.25), 1); // smaller than 1/quantile: 1 each
    assert_int_equal (cgq_pbt_quantile_size (3, 0.25), 1);
    assert_int_equal (cgq_pbt_quantile_size (4, 0.25), 1);
    assert_int_equal (cgq_pbt_quantile_size (5, 0.25), 2);
    assert_int_equal (cgq_pbt_quantile_size (8, 0.25), 2);
    assert_int_equal (cgq_pbt_quantile_size (8, 0.5), 4);
    assert_int_equal (cgq_pbt_quantile_size (3, 0.5), 1); // at most n / 2
}

static void
test_spec_errors (void **state)
{
    (void)state;
    char err[512];
    const char *ck = "checkpoint: {store: /tmp/ck}\n";
    struct {
        const char *search, *extra, *want;
    } cases[] = {
        {"search: {algorithm: pbt, perturbation_interval: 4, hyperparam_mutations: [lr]}\n", "",
         "pbt.yaml:8:21: algorithm pbt continues trials from each other's checkpoints"},
        {"search: {algorithm: pbt, perturbation_interval: 4, hyperparam_mutations: [lrr]}\n", ck,
         "pbt.yaml:8:75: search.hyperparam_mutations names 'lrr', which is not a param"},
        {"search: {algorithm: pbt, perturbation_interval: 4, quantile_fraction: 0.6, "
         "hyperparam_mutations: [lr]}\n",
         ck, "pbt.yaml:8:71: search.quantile_fraction must be in (0, 0.5], not 0.6"},
        {"search: {algorithm: pbt, perturbation_interval: 0, hyperparam_mutations: [lr]}\n", ck,
         "pbt.yaml:8:49: search.perturbation_interval must be > 0, not 0"},
        {"search: {algorithm: pbt, perturbation_interval: -2, hyperparam_mutations: [lr]}\n", ck,
         "search.perturbation_interval must be > 0, not -2"},
        {"search: {algorithm: pbt, hyperparam_mutations: [lr]}\n", ck,
         "algorithm pbt needs search.perturbation_interval"},
        {"search: {algorithm: pbt, perturbation_interval: 2}\n", ck,
         "algorithm pbt needs search.hyperparam_mutations"},
        {"search: {algorithm: pbt, perturbation_interval: 2, hyperparam_mutations: {lr: 3}}\n", ck,
         "search.hyperparam_mutations.lr must be {}"},
        {"search: {algorithm: pbt, perturbation_interval: 2, resample_probability: 2, "
         "hyperparam_mutations: [lr]}\n",
         ck, "search.resample_probability must be a probability in [0, 1]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        err[0] = 0;
        cgq_spec_t *s = s_spec (cases[i].search, cases[i].extra, err, sizeof err);
        if (s || !strstr (err, cases[i].want))
            fail_msg ("case %zu: want '%s', got '%s'", i, cases[i].want, err);
    }
    cgq_spec_t *s = s_spec ("search: {algorithm: pbt, perturbation_interval: 2, "
                            "hyperparam_mutations: {lr: {}, act: {}}}\n",
                            ck, err, sizeof err);
    assert_non_null (s);
    assert_int_equal (s->search.population, 8);
    assert_true (s->search.pbt.quantile == 0.25 && s->search.pbt.resample == 0.25);
    assert_string_equal (s->search.pbt.metric, "acc");
    assert_string_equal (s->search.pbt.time_attr, "epoch");
    assert_int_equal (s->search.pbt.mode, 1);
    assert_int_equal (s->search.pbt.nmutations, 2);
    cgq_spec_destroy (&s);
}

// Perturbing without resampling: every numeric param moves by 1.2 or 0.8
// (log: the same factor on the value), an integer by at least one step, a
// choice to a neighbour; all stay in their domains.
static void
test_perturb (void **state)
{
    (void)state;
    cgq_spec_t *spec = s_good (4, 0);
    cgq_genome_t g;
    char err[256];
    assert_int_equal (cgq_genome_init (&g, spec, err, sizeof err), 0);
    json_t *p = json_pack ("{s:f, s:f, s:i, s:s}", "lr", 0.01, "mom", 0.5, "bs", 10, "act", "tanh");
    for (uint64_t k = 0; k < 200; k++) {
        cgq_rng_t r;
        cgq_rng_seed (&r, 1, k, 3);
        json_t *changed = json_object ();
        json_t *q = cgq_pbt_perturb (spec, &g, p, &r, changed);
        assert_non_null (q);
        double lr = json_number_value (json_object_get (q, "lr"));
        double mom = json_number_value (json_object_get (q, "mom"));
        assert_true (fabs (lr - 0.012) < 1e-9 || fabs (lr - 0.008) < 1e-9);
        assert_true (fabs (mom - 0.6) < 1e-9 || fabs (mom - 0.4) < 1e-9);
        json_int_t bs = json_integer_value (json_object_get (q, "bs"));
        assert_true (bs == 12 || bs == 8);
        const char *act = json_string_value (json_object_get (q, "act"));
        assert_true (!strcmp (act, "relu") || !strcmp (act, "gelu"));
        assert_int_equal (json_object_size (changed), 4);
        json_decref (changed);
        json_decref (q);
    }
    // At the edges: clipped to the domain.
    json_t *e = json_pack ("{s:f, s:f, s:i, s:s}", "lr", 1.0, "mom", 1.0, "bs", 1, "act", "relu");
    for (uint64_t k = 0; k < 50; k++) {
        cgq_rng_t r;
        cgq_rng_seed (&r, 2, k, 3);
        json_t *q = cgq_pbt_perturb (spec, &g, e, &r, NULL);
        assert_true (json_number_value (json_object_get (q, "lr")) <= 1.0);
        assert_true (json_number_value (json_object_get (q, "mom")) <= 1.0);
        json_int_t bs = json_integer_value (json_object_get (q, "bs"));
        assert_true (bs == 1 || bs == 2); // 1 * 1.2 rounds to 1: one step up instead
        json_decref (q);
    }
    json_decref (e);
    json_decref (p);
    cgq_genome_fini (&g);
    cgq_spec_destroy (&spec);
}

// With resample_probability 1 every mutated param is drawn from its space
// entry: over many draws values appear that no perturbation could give.
static void
test_resample (void **state)
{
    (void)state;
    cgq_spec_t *spec = s_good (4, 1);
    cgq_genome_t g;
    char err[256];
    assert_int_equal (cgq_genome_init (&g, spec, err, sizeof err), 0);
    json_t *p = json_pack ("{s:f, s:f, s:i, s:s}", "lr", 0.01, "mom", 0.5, "bs", 10, "act", "tanh");
    int far = 0, silu = 0;
    for (uint64_t k = 0; k < 200; k++) {
        cgq_rng_t r;
        cgq_rng_seed (&r, 1, k, 3);
        json_t *q = cgq_pbt_perturb (spec, &g, p, &r, NULL);
        double lr = json_number_value (json_object_get (q, "lr"));
        assert_true (lr >= 0.0001 && lr <= 1.0);
        far += lr > 0.1 || lr < 0.001;
        silu += !strcmp (json_string_value (json_object_get (q, "act")), "silu");
        json_decref (q);
    }
    assert_true (far > 50);
    assert_true (silu > 20); // two steps from tanh: only a resample reaches it
    json_decref (p);
    cgq_genome_fini (&g);
    cgq_spec_destroy (&spec);
}

static json_t *
s_record (double epoch, int attempt, int n)
{
    return json_pack ("{s:{s:f}, s:i, s:i, s:i, s:i, s:s, s:s}", "step", "epoch", epoch, "attempt",
                      attempt, "n", n, "stage", 0, "size", 10, "sha256",
                      "0000000000000000000000000000000000000000000000000000000000000000", "path",
                      "/tmp/ck/x");
}

// A population of 4, scores 1..4 (trial 3 best): at the interval, trial 0
// (the worst) is exploited from trial 3, the only top-quantile member. The
// others are not; the same look twice within the interval is not repeated.
static void
test_exploit (void **state)
{
    (void)state;
    cgq_spec_t *spec = s_good (4, 0.25);
    char err[256];
    cgq_searcher_t *s = cgq_searcher_new (spec, NULL, err, sizeof err);
    assert_non_null (s);
    assert_true (cgq_searcher_pbt (s));
    json_t *params[4];
    for (uint64_t i = 0; i < 4; i++) {
        uint64_t id;
        params[i] = cgq_searcher_suggest (s, &id);
        assert_int_equal (id, i);
    }
    uint64_t id;
    assert_null (cgq_searcher_suggest (s, &id)); // waits for an exploit
    assert_false (cgq_searcher_done (s));
    for (uint64_t i = 0; i < 4; i++)
        cgq_searcher_pbt_report (s, i, 4, (double)i + 1);
    cgq_pbt_decision_t d;
    json_t *r = s_record (4, 1, 4);
    // Checkpoints before the interval: no look.
    json_t *early = s_record (3, 1, 3);
    assert_int_equal (cgq_searcher_pbt_checkpoint (s, 0, early, &d), 0);
    json_decref (early);
    // Trial 3 (top) checkpoints first: it becomes a donor; 1 and 2 are middle.
    assert_int_equal (cgq_searcher_pbt_checkpoint (s, 3, r, &d), 0);
    assert_int_equal (cgq_searcher_pbt_checkpoint (s, 1, r, &d), 0);
    assert_int_equal (cgq_searcher_pbt_checkpoint (s, 2, r, &d), 0);
    assert_int_equal (cgq_searcher_pbt_checkpoint (s, 0, r, &d), 1);
    assert_true (d.exploit);
    assert_int_equal (d.donor, 3);
    assert_int_equal (d.child, 4);
    assert_int_equal (json_integer_value (json_object_get (d.lineage, "parent")), 3);
    assert_int_equal (json_integer_value (json_object_get (d.lineage, "replaces")), 0);
    assert_string_equal (json_string_value (json_object_get (d.lineage, "checkpoint")), "ckpt-1-4");
    // The donor's checkpoint is pinned while the child waits.
    char names[4][64];
    assert_int_equal (cgq_searcher_pbt_pins (s, 3, names, 4), 1);
    assert_string_equal (names[0], "ckpt-1-4");
    // The same checkpoint again (a re-send): no second look.
    assert_int_equal (cgq_searcher_pbt_checkpoint (s, 0, r, &d), 0);

    // Save, restore: the copy goes on exactly as the original.
    json_t *saved = cgq_searcher_save (s);
    cgq_searcher_t *s2 = cgq_searcher_new (spec, saved, err, sizeof err);
    assert_non_null (s2);
    cgq_searcher_observe (s, 0, NULL, NAN, true);
    cgq_searcher_observe (s2, 0, NULL, NAN, true);
    uint64_t c1, c2;
    json_t *p1 = cgq_searcher_suggest (s, &c1), *p2 = cgq_searcher_suggest (s2, &c2);
    assert_int_equal (c1, 4);
    assert_int_equal (c2, 4);
    assert_true (json_equal (p1, p2));
    // The child's params are the donor's perturbed (lr and mom changed).
    assert_false (json_equal (p1, params[3]));
    json_t *rec;
    json_t *lin = cgq_searcher_pbt_child (s, 4, &rec);
    assert_non_null (lin);
    assert_non_null (rec);
    assert_int_equal (json_integer_value (json_object_get (rec, "donor")), 3);
    assert_null (cgq_searcher_pbt_child (s, 2, &rec));
    // Still pinned while the child runs without a checkpoint of its own ...
    assert_int_equal (cgq_searcher_pbt_pins (s, 3, names, 4), 1);
    json_t *own = s_record (6, 1, 1);
    cgq_searcher_pbt_report (s, 4, 6, 10);
    assert_int_equal (cgq_searcher_pbt_checkpoint (s, 4, own, &d), 0);
    assert_int_equal (cgq_searcher_pbt_pins (s, 3, names, 4), 0); // ... and released after
    json_decref (own);
    // Done once every member ended.
    for (uint64_t i = 1; i < 5; i++)
        cgq_searcher_observe (s, i, NULL, NAN, true);
    assert_true (cgq_searcher_done (s));
    json_decref (p1);
    json_decref (p2);
    json_decref (saved);
    json_decref (r);
    for (int i = 0; i < 4; i++)
        json_decref (params[i]);
    cgq_searcher_destroy (&s);
    cgq_searcher_destroy (&s2);
    cgq_spec_destroy (&spec);
}

// Ties rank the older trial higher; minimising turns the order round; a
// population of 2 still splits 1 / 1; a member without a score is not ranked.
static void
test_ties_and_small (void **state)
{
    (void)state;
    cgq_spec_t *spec = s_good (2, 0.25);
    char err[256];
    cgq_searcher_t *s = cgq_searcher_new (spec, NULL, err, sizeof err);
    uint64_t id;
    json_decref (cgq_searcher_suggest (s, &id));
    json_decref (cgq_searcher_suggest (s, &id));
    json_t *r = s_record (4, 1, 1);
    cgq_pbt_decision_t d;
    cgq_searcher_pbt_report (s, 0, 4, 5);
    // Only one scored: nobody is ranked.
    assert_int_equal (cgq_searcher_pbt_checkpoint (s, 0, r, &d), 0);
    cgq_searcher_pbt_report (s, 1, 4, 5);
    json_t *r8 = s_record (8, 1, 2);
    assert_int_equal (cgq_searcher_pbt_checkpoint (s, 0, r8, &d), 0); // tie: 0 is top
    assert_int_equal (cgq_searcher_pbt_checkpoint (s, 1, r8, &d), 1); // tie: 1 is bottom
    assert_int_equal (d.donor, 0);
    json_decref (r);
    json_decref (r8);
    cgq_searcher_destroy (&s);
    spec->search.pbt.mode = -1; // minimise: the lower score wins
    s = cgq_searcher_new (spec, NULL, err, sizeof err);
    json_decref (cgq_searcher_suggest (s, &id));
    json_decref (cgq_searcher_suggest (s, &id));
    cgq_searcher_pbt_report (s, 0, 4, 1);
    cgq_searcher_pbt_report (s, 1, 4, 9);
    json_t *r4 = s_record (4, 1, 1);
    assert_int_equal (cgq_searcher_pbt_checkpoint (s, 0, r4, &d), 0);
    assert_int_equal (cgq_searcher_pbt_checkpoint (s, 1, r4, &d), 1);
    assert_int_equal (d.donor, 0);
    json_decref (r4);
    cgq_searcher_destroy (&s);
    cgq_spec_destroy (&spec);
}

// The same seed gives the same population and the same decisions; another
// seed another population.
static void
test_determinism (void **state)
{
    (void)state;
    cgq_spec_t *spec = s_good (8, 0.25);
    char err[256];
    json_t *runs[3];
    for (int k = 0; k < 3; k++) {
        spec->search.seed = k < 2 ? 7 : 8;
        cgq_searcher_t *s = cgq_searcher_new (spec, NULL, err, sizeof err);
        json_t *all = json_array ();
        uint64_t id;
        for (int i = 0; i < 8; i++)
            json_array_append_new (all, cgq_searcher_suggest (s, &id));
        for (uint64_t i = 0; i < 8; i++)
            cgq_searcher_pbt_report (s, i, 4, (double)((i * 5) % 8));
        json_t *r = s_record (4, 1, 1);
        cgq_pbt_decision_t d;
        for (uint64_t i = 0; i < 8; i++)
            if (cgq_searcher_pbt_checkpoint (s, i, r, &d))
                json_array_append_new (all, json_pack ("{s:I, s:I}", "trial", (json_int_t)i,
                                                       "donor", (json_int_t)d.donor));
        json_decref (r);
        runs[k] = all;
        cgq_searcher_destroy (&s);
    }
    assert_true (json_equal (runs[0], runs[1]));
    assert_false (json_equal (runs[0], runs[2]));
    assert_true (json_array_size (runs[0]) > 8); // some were exploited
    for (int k = 0; k < 3; k++)
        json_decref (runs[k]);
    cgq_spec_destroy (&spec);
}

// Two children of one donor's checkpoint pin it once.
static void
test_pins_once (void **state)
{
    (void)state;
    cgq_spec_t *spec = s_good (8, 0.25);
    char err[256];
    cgq_searcher_t *s = cgq_searcher_new (spec, NULL, err, sizeof err);
    uint64_t id;
    for (int i = 0; i < 8; i++)
        json_decref (cgq_searcher_suggest (s, &id));
    for (uint64_t i = 0; i < 8; i++)
        cgq_searcher_pbt_report (s, i, 4, (double)i); // 7 best; 0 and 1 bottom
    json_t *r = s_record (4, 1, 4);
    cgq_pbt_decision_t d;
    assert_int_equal (cgq_searcher_pbt_checkpoint (s, 7, r, &d), 0);
    assert_int_equal (cgq_searcher_pbt_checkpoint (s, 0, r, &d), 1);
    assert_int_equal (d.donor, 7); // 6 has no checkpoint yet
    assert_int_equal (cgq_searcher_pbt_checkpoint (s, 1, r, &d), 1);
    assert_int_equal (d.donor, 7);
    assert_int_equal (d.child, 9);
    char names[4][64];
    assert_int_equal (cgq_searcher_pbt_pins (s, 7, names, 4), 1);
    assert_int_equal (cgq_searcher_pbt_pins (s, 6, names, 4), 0);
    json_decref (r);
    cgq_searcher_destroy (&s);
    cgq_spec_destroy (&spec);
}

// warm_start: the first population starts from the best warm points (by
// the ranking metric, at most population of them, ties in the order given),
// the rest random; a searcher made again from its saved state and fed the
// same points (a coordinator restart) suggests the same next members; a
// point without the metric or without every param is refused.
static json_t *
s_warm_point (double lr)
{
    return json_pack ("{s:f, s:f, s:i, s:s}", "lr", lr, "mom", 0.5, "bs", 8, "act", "tanh");
}

static void
test_warm (void **state)
{
    (void)state;
    cgq_spec_t *spec = s_good (4, 0.25);
    char err[256];
    cgq_searcher_t *s = cgq_searcher_new (spec, NULL, err, sizeof err);
    cgq_searcher_t *cold = cgq_searcher_new (spec, NULL, err, sizeof err);
    double lrs[3] = {0.001, 0.01, 0.1}, accs[3] = {0.5, 0.9, 0.7};
    for (int i = 0; i < 3; i++) {
        json_t *p = s_warm_point (lrs[i]), *m = json_pack ("{s:f}", "acc", accs[i]);
        assert_int_equal (cgq_searcher_warm (s, p, m, err, sizeof err), 0);
        json_decref (p);
        json_decref (m);
    }
    json_t *p = s_warm_point (0.5), *m = json_pack ("{s:f}", "loss", 1.0);
    assert_int_equal (cgq_searcher_warm (s, p, m, err, sizeof err), -1);
    assert_non_null (strstr (err, "lack acc"));
    json_object_del (p, "bs");
    json_decref (m);
    m = json_pack ("{s:f}", "acc", 1.0);
    assert_int_equal (cgq_searcher_warm (s, p, m, err, sizeof err), -1);
    assert_non_null (strstr (err, "no value for bs"));
    json_decref (p);
    json_decref (m);
    uint64_t id;
    double want[3] = {0.01, 0.1, 0.001}; // acc 0.9, 0.7, 0.5
    for (int i = 0; i < 3; i++) {
        json_t *q = cgq_searcher_suggest (s, &id);
        assert_int_equal (id, (uint64_t)i);
        assert_true (fabs (json_number_value (json_object_get (q, "lr")) - want[i]) < 1e-12);
        assert_string_equal (json_string_value (json_object_get (q, "act")), "tanh");
        json_decref (q);
        json_decref (cgq_searcher_suggest (cold, &id));
    }
    // Made again from its state, fed the same points: the 4th member is the
    // random one the first searcher gives, the cold one's too.
    json_t *st = cgq_searcher_save (s);
    cgq_searcher_t *again = cgq_searcher_new (spec, st, err, sizeof err);
    assert_non_null (again);
    for (int i = 0; i < 3; i++) {
        json_t *q = s_warm_point (lrs[i]), *mm = json_pack ("{s:f}", "acc", accs[i]);
        assert_int_equal (cgq_searcher_warm (again, q, mm, err, sizeof err), 0);
        json_decref (q);
        json_decref (mm);
    }
    json_t *a = cgq_searcher_suggest (s, &id), *b = cgq_searcher_suggest (again, &id),
           *c = cgq_searcher_suggest (cold, &id);
    assert_int_equal (id, 3);
    assert_true (json_equal (a, b));
    assert_true (json_equal (a, c));
    // After the first suggestion, warm points are refused.
    p = s_warm_point (0.2);
    m = json_pack ("{s:f}", "acc", 1.0);
    assert_int_equal (cgq_searcher_warm (s, p, m, err, sizeof err), -1);
    json_decref (p);
    json_decref (m);
    json_decref (a);
    json_decref (b);
    json_decref (c);
    json_decref (st);
    cgq_searcher_destroy (&again);
    cgq_searcher_destroy (&cold);
    cgq_searcher_destroy (&s);
    cgq_spec_destroy (&spec);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_quantile_size), cmocka_unit_test (test_spec_errors),
        cmocka_unit_test (test_perturb),       cmocka_unit_test (test_resample),
        cmocka_unit_test (test_exploit),       cmocka_unit_test (test_ties_and_small),
        cmocka_unit_test (test_determinism),   cmocka_unit_test (test_pins_once),
        cmocka_unit_test (test_warm),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
