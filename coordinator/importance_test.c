// importance_test: the importance estimator on synthetic jobs: one param
// that determines the objective and others that are noise (the first must
// dominate, numeric or categorical), too few trials, a constant objective,
// missing and mixed-type params.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "importance.h"

// A fixed generator, so the test means the same every run.
static uint64_t s_rng = 88172645463325252ULL;
static double
s_unif (void)
{
    s_rng ^= s_rng << 13;
    s_rng ^= s_rng >> 7;
    s_rng ^= s_rng << 17;
    return (double)(s_rng >> 11) / 9007199254740992.0;
}

static const importance_t *
s_find (const importance_t *v, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp (v[i].name, name))
            return &v[i];
    fail_msg ("no entry for %s", name);
    return NULL;
}

static void
t_numeric_dominates (void **state)
{
    (void)state;
    enum { N = 400 };
    json_t *params[N];
    double y[N];
    static const char *const opt[] = {"adam", "sgd", "rmsprop"};
    for (int i = 0; i < N; i++) {
        double lr = s_unif (), noise = s_unif ();
        params[i] = json_pack ("{s:f,s:f,s:s}", "lr", lr, "noise", noise, "opt",
                               opt[(int)(s_unif () * 3) % 3]);
        y[i] = (lr - 0.3) * (lr - 0.3) + 0.01 * s_unif ();
    }
    importance_t *v = NULL;
    size_t n = importance_compute (params, y, N, &v);
    assert_int_equal (n, 3);
    assert_string_equal (v[0].name, "lr"); // most important first
    const importance_t *lr = s_find (v, n, "lr"), *no = s_find (v, n, "noise"),
                       *op = s_find (v, n, "opt");
    assert_true (lr->numeric);
    assert_false (op->numeric);
    assert_int_equal (lr->bins, IMPORTANCE_BINS);
    assert_int_equal (op->bins, 3);
    assert_int_equal (lr->n, N);
    assert_true (lr->eps2 > 0.8);
    assert_true (no->eps2 < 0.05);
    assert_true (op->eps2 < 0.05);
    assert_true (lr->share > 0.9);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += v[i].share;
    assert_true (sum > 0.999 && sum < 1.001);
    importance_free (v, n);
    for (int i = 0; i < N; i++)
        json_decref (params[i]);
}

static void
t_categorical_dominates (void **state)
{
    (void)state;
    enum { N = 300 };
    json_t *params[N];
    double y[N];
    static const char *const opt[] = {"adam", "sgd", "<img src=x onerror=alert(1)>"};
    for (int i = 0; i < N; i++) {
        int k = (int)(s_unif () * 3) % 3;
        params[i] = json_pack ("{s:s,s:i}", "opt", opt[k], "seed", (int)(s_unif () * 1000));
        y[i] = k * 1.0 + 0.1 * s_unif ();
    }
    importance_t *v = NULL;
    size_t n = importance_compute (params, y, N, &v);
    assert_int_equal (n, 2);
    assert_string_equal (v[0].name, "opt");
    assert_true (v[0].eps2 > 0.9);
    assert_true (s_find (v, n, "seed")->eps2 < 0.05);
    importance_free (v, n);
    for (int i = 0; i < N; i++)
        json_decref (params[i]);
}

static void
t_degenerate (void **state)
{
    (void)state;
    importance_t *v = NULL;
    // No trials: no params.
    assert_int_equal (importance_compute (NULL, NULL, 0, &v), 0);
    importance_free (v, 0);
    // One trial, and a constant objective: every share 0, nothing divided by 0.
    json_t *p[4] = {json_pack ("{s:i}", "a", 1), json_pack ("{s:i}", "a", 2),
                    json_pack ("{s:s,s:i}", "a", "x", "b", 1), json_pack ("[]")};
    double y[4] = {5, 5, 5, 5};
    size_t n = importance_compute (p, y, 1, &v);
    assert_int_equal (n, 1);
    assert_true (v[0].eps2 == 0 && v[0].share == 0);
    importance_free (v, n);
    n = importance_compute (p, y, 4, &v);
    assert_int_equal (n, 2); // a and b; the array is no params
    const importance_t *a = s_find (v, n, "a"), *b = s_find (v, n, "b");
    assert_false (a->numeric); // a number and a string: grouped by value
    assert_int_equal (a->n, 3);
    assert_int_equal (b->n, 1);
    assert_true (a->eps2 == 0 && b->eps2 == 0);
    importance_free (v, n);
    for (int i = 0; i < 4; i++)
        json_decref (p[i]);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (t_numeric_dominates),
        cmocka_unit_test (t_categorical_dominates),
        cmocka_unit_test (t_degenerate),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
