// Tests of node/result.c: the noop answer, a result's owned strings, the
// TaskRef helpers.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "assert_json.h"
#include "result.h"

static void
test_noop_and_helpers (void **state)
{
    Cgq__Assign a = CGQ__ASSIGN__INIT;
    Cgq__TaskRef ref = CGQ__TASK_REF__INIT;
    ref.job = 1;
    ref.trial = 2;
    ref.attempt = 1;
    a.task = &ref;
    a.kind = "noop";
    a.params_json = "{\"a\": 1, \"b\": 2.5, \"c\": \"x\", \"d\": true}";
    Cgq__Result *r = cgq_result_noop (&a);
    assert_int_equal (r->status, CGQ__TASK_STATUS__TASK_SUCCEEDED);
    cgq_assert_json (r->metrics_json, "{\"a\": 1, \"b\": 2.5, \"score\": 3.5}");
    assert_true (cgq_result_ref_equal (r->task, &ref));
    cgq_result_destroy (&r);
    a.params_json = "{\"a\": 1, \"b\": 2}";
    r = cgq_result_noop (&a);
    assert_string_equal (r->metrics_json, "{\"a\":1,\"b\":2,\"score\":3}");
    cgq_result_destroy (&r);
    a.params_json = "";
    r = cgq_result_noop (&a);
    cgq_assert_json (r->metrics_json, "{\"score\": 0}");
    cgq_result_destroy (&r);
    cgq_result_destroy (&r); // NULL-safe

    Cgq__TaskRef other = ref;
    assert_true (cgq_result_ref_equal (&ref, &other));
    other.attempt = 2;
    assert_false (cgq_result_ref_equal (&ref, &other));
}

static void
test_result_new_owns_its_strings (void **state)
{
    Cgq__TaskRef ref = CGQ__TASK_REF__INIT;
    ref.job = 7;
    ref.trial = 3;
    ref.stage = 1;
    ref.attempt = 2;
    Cgq__Result *r = cgq_result_new (&ref, CGQ__TASK_STATUS__TASK_LOST, NULL, NULL);
    assert_int_equal (r->status, CGQ__TASK_STATUS__TASK_LOST);
    assert_string_equal (r->metrics_json, "{}");
    assert_string_equal (r->error, "");
    assert_string_equal (r->log_tail, "");
    assert_string_equal (r->trial_dir, "");
    assert_ptr_not_equal (r->task, &ref);
    assert_true (cgq_result_ref_equal (r->task, &ref));
    cgq_result_destroy (&r);
    assert_null (r);

    r = cgq_result_new (NULL, CGQ__TASK_STATUS__TASK_FAILED, "{\"x\": 1}", "why");
    assert_non_null (r->task);
    assert_int_equal (r->task->job, 0);
    assert_string_equal (r->metrics_json, "{\"x\": 1}");
    assert_string_equal (r->error, "why");
    cgq_result_destroy (&r);

    Cgq__TaskRef *copy = cgq_result_ref_dup (&ref);
    assert_true (cgq_result_ref_equal (copy, &ref));
    free (copy);
    assert_true (cgq_result_ref_equal (NULL, NULL));
    assert_false (cgq_result_ref_equal (&ref, NULL));
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_noop_and_helpers),
        cmocka_unit_test (test_result_new_owns_its_strings),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
