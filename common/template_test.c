// template_test: the template language. Values render as the trial reads
// them (quoted for a shell command or not), built-ins and literal braces
// work, malformed and unknown placeholders are errors that say where, and the
// check at parse time agrees with the render.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

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

// s_known accepts the params of the spec arg, as the spec parser does for
// trial: (a spec's own check adds the metrics of earlier stages).
static bool
s_known (const char *name, size_t n, void *arg)
{
    char buf[64];
    if (n >= sizeof buf)
        return false;
    memcpy (buf, name, n);
    buf[n] = 0;
    return cgq_spec_param (arg, buf) != NULL;
}

static void
t_render (void **state)
{
    json_t *params = json_pack ("{s:f, s:i, s:s, s:s, s:b, s:[i,f], s:{s:i}, s:f, s:n}", "lr",
                                0.001, "hidden", 128, "name", "it's a test", "plain", "GATv2Conv",
                                "flag", 1, "list", 1, 0.5, "map", "a", 1, "big", 1e-20, "none");
    char err[512] = "";
    char *r = cgq_template_render ("--lr {lr} --hidden {hidden} --name {name} {plain}", params, 7,
                                   12, "/specs", 0, err, sizeof err);
    assert_string_equal (r, "--lr 0.001 --hidden 128 --name it's a test GATv2Conv");
    free (r);

    r = cgq_template_render ("--lr {lr} --name {name} {plain} {list} {flag}", params, 7, 12,
                             "/specs", 1, err, sizeof err);
    assert_string_equal (r, "--lr 0.001 --name 'it'\\''s a test' GATv2Conv '[1,0.5]' true");
    free (r);

    r = cgq_template_render ("{job_id}/{trial_id} {spec_dir} {map} {big} {none}", params, 7, 12,
                             "/my specs", 1, err, sizeof err);
    assert_string_equal (r, "7/12 '/my specs' '{\"a\":1}' 1e-20 null");
    free (r);

    r = cgq_template_render ("{{literal}} {{{hidden}}} a}}b", params, 7, 12, "/s", 1, err,
                             sizeof err);
    assert_string_equal (r, "{literal} {128} a}b");
    free (r);

    err[0] = 0;
    assert_null (cgq_template_render ("x {lrr} y", params, 7, 12, "/s", 0, err, sizeof err));
    assert_non_null (strstr (err, "unknown placeholder '{lrr}' at byte 2"));
    assert_null (cgq_template_render ("x {lr", params, 7, 12, "/s", 0, err, sizeof err));
    assert_non_null (strstr (err, "bad placeholder"));
    assert_null (cgq_template_render ("x } y", params, 7, 12, "/s", 0, err, sizeof err));
    assert_non_null (strstr (err, "stray '}' at byte 2"));
    json_decref (params);

    // Sampled values print as their shortest text after rounding.
    cgq_spec_t *s =
        s_parse ("space: {lr: {loguniform: [0.001, 0.1]}, c: 0.1}\ntrial:\n  command: x {lr}\n");
    json_t *p = cgq_space_point (s, 0);
    r = cgq_template_render ("{lr} {c}", p, 1, 0, NULL, 0, err, sizeof err);
    char expect[64], a[32];
    snprintf (expect, sizeof expect, "%s 0.1",
              cgq_fmt_double (a, json_real_value (json_object_get (p, "lr"))));
    assert_string_equal (r, expect);
    assert_true (strlen (r) <= 23); // "0.00" and at most 15 digits, then " 0.1"
    free (r);
    json_decref (p);

    size_t at = 99;
    char name[32];
    assert_int_equal (cgq_template_check ("a {lr} {job_id} {{x}} {trial_id}{spec_dir}", s_known, s,
                                          &at, name, sizeof name),
                      0);
    assert_int_equal (cgq_template_check ("a {lr} {lrr}", s_known, s, &at, name, sizeof name), -1);
    assert_int_equal (at, 8);
    assert_string_equal (name, "lrr");
    cgq_spec_destroy (&s);
}

static void
t_value_str (void **state)
{
    json_t *v = json_pack ("[s, i, f, f, b, n, [i, f], {s:s}]", "it's", -3, 0.1, 1e-20, 1, 7, 0.5,
                           "k", "v");
    const char *expect[] = {"it's", "-3",   "0.1",     "1e-20",
                            "true", "null", "[7,0.5]", "{\"k\":\"v\"}"};
    for (size_t i = 0; i < json_array_size (v); i++) {
        char *t = cgq_template_value_str (json_array_get (v, i));
        assert_string_equal (t, expect[i]);
        free (t);
    }
    json_decref (v);
    char *t = cgq_template_value_str (NULL);
    assert_string_equal (t, "null");
    free (t);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (t_render),
        cmocka_unit_test (t_value_str),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
