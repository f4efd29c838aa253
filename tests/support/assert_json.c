#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <jansson.h>

#include "assert_json.h"

void
cgq_assert_json (const char *text, const char *expected)
{
    json_t *a = json_loads (text, 0, NULL);
    json_t *b = json_loads (expected, 0, NULL);
    assert_non_null (a);
    assert_non_null (b);
    if (!json_equal (a, b))
        fail_msg ("JSON %s != %s", text, expected);
    json_decref (a);
    json_decref (b);
}
