// util_test: the parsers, number formatting, quoting and the buffer.
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "util.h"

static void
t_parse_duration_valid (void **state)
{
    struct {
        const char *text;
        double seconds;
    } cases[] = {
        {"90", 90},      {"90s", 90},     {"500ms", 0.5}, {"30m", 1800},   {"2h", 7200},
        {"1.5h", 5400},  {"1d", 86400},   {"0", 0},       {"0.25s", 0.25}, {"1min", 60},
        {"10sec", 10},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double s = -1;
        assert_int_equal (cgq_parse_duration (cases[i].text, &s), 0);
        assert_true (fabs (s - cases[i].seconds) < 1e-9);
    }
}

static void
t_parse_duration_malformed (void **state)
{
    const char *bad[] = {"", "5x", "ms", "-1s", "1.5.2s", "s5", "2 hours", "1e999", "nan", "inf"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        double s = 42;
        assert_int_equal (cgq_parse_duration (bad[i], &s), -1);
        assert_true (s == 42); // untouched on error
    }
    double s;
    assert_int_equal (cgq_parse_duration (NULL, &s), -1);
}

static void
t_parse_bytes_valid (void **state)
{
    struct {
        const char *text;
        uint64_t bytes;
    } cases[] = {
        {"1024", 1024},
        {"0", 0},
        {"512K", 512ull << 10},
        {"512k", 512ull << 10},
        {"4G", 4ull << 30},
        {"4GB", 4ull << 30},
        {"1.5GiB", 3ull << 29},
        {"16M", 16ull << 20},
        {"2T", 2ull << 40},
        {"1P", 1ull << 50},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t b = 1;
        assert_int_equal (cgq_parse_bytes (cases[i].text, &b), 0);
        assert_true (b == cases[i].bytes);
    }
}

static void
t_parse_bytes_malformed (void **state)
{
    const char *bad[] = {"", "G", "4X", "4GBB", "-1", "1e30", "4 GX", "abc"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t b = 7;
        assert_int_equal (cgq_parse_bytes (bad[i], &b), -1);
        assert_true (b == 7);
    }
}

static void
t_parse_u64_double (void **state)
{
    uint64_t u;
    assert_int_equal (cgq_parse_u64 ("18446744073709551615", &u), 0);
    assert_true (u == UINT64_MAX);
    assert_int_equal (cgq_parse_u64 ("18446744073709551616", &u), -1);
    assert_int_equal (cgq_parse_u64 ("-1", &u), -1);
    assert_int_equal (cgq_parse_u64 ("12a", &u), -1);
    assert_int_equal (cgq_parse_u64 ("", &u), -1);
    double d;
    assert_int_equal (cgq_parse_double ("-2.5e-3", &d), 0);
    assert_true (d == -2.5e-3);
    assert_int_equal (cgq_parse_double ("1.0x", &d), -1);
    assert_int_equal (cgq_parse_double ("", &d), -1);
}

static void
t_fmt_double (void **state)
{
    char buf[32];
    assert_string_equal (cgq_fmt_double (buf, 0.1), "0.1");
    assert_string_equal (cgq_fmt_double (buf, 1e-4), "0.0001");
    assert_string_equal (cgq_fmt_double (buf, 0), "0");
    assert_string_equal (cgq_fmt_double (buf, -2.5), "-2.5");
    assert_string_equal (cgq_fmt_double (buf, 1e300), "1e+300");
    assert_string_equal (cgq_fmt_double (buf, 123456789012.0), "123456789012");
    assert_string_equal (cgq_fmt_double (buf, 0.1 + 0.2), "0.30000000000000004");
    assert_string_equal (cgq_fmt_double (buf, NAN), "nan");
    assert_string_equal (cgq_fmt_double (buf, -INFINITY), "-inf");

    assert_string_equal (cgq_fmt_double (buf, 1795708854.123456), "1795708854.123456");
    assert_string_equal (cgq_fmt_double (buf, -0.0), "-0");
    assert_string_equal (cgq_fmt_double (buf, 0.00001), "1e-05");

    // The fast path (no printf) against printf's shortest of %.15g..%.17g:
    // the same digits whenever printf needs no more than 15, never more
    // digits otherwise, and always the same double back.
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < 200000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        double v;
        switch (i % 4) {
        case 0: // a wall time in microseconds, as cgq_wall_s
            v = (double) (int64_t) (1700000000000000ull + x % 200000000000000ull) / 1e6;
            break;
        case 1: // uniform in [0, 1)
            v = (double) (x >> 11) / 9007199254740992.0;
            break;
        case 2: // a few decimals, as sampled params
            v = (double) (int64_t) (x % 2000001) / 1000 - 1000;
            break;
        default: // any magnitude
            v = ((double) (x >> 11) / 9007199254740992.0) * pow (10, (double) (x % 40) - 20);
        }
        char ref[32];
        int prec = 15;
        for (; prec <= 17; prec++) {
            snprintf (ref, sizeof ref, "%.*g", prec, v);
            if (strtod (ref, NULL) == v)
                break;
        }
        cgq_fmt_double (buf, v);
        if (strtod (buf, NULL) != v || strlen (buf) > strlen (ref)
            || (prec == 15 && strcmp (buf, ref) != 0))
            fail_msg ("%.17g: fast path %s, printf %s", v, buf, ref);
    }
    (void) cgq_wall_s ();

    // Every finite double reads back exactly.
    double vals[] = {M_PI, -M_E, 1.0 / 3, 5e-324, 1.7976931348623157e308, -0.000123456789,
                     123456.789e10, 2.2250738585072014e-308};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        cgq_fmt_double (buf, vals[i]);
        assert_true (strtod (buf, NULL) == vals[i]);
        assert_true (strlen (buf) < 32);
    }
    srand (7);
    for (int i = 0; i < 10000; i++) {
        uint64_t bits = ((uint64_t) rand () << 33) ^ ((uint64_t) rand () << 11) ^ (uint64_t) rand ();
        double v;
        memcpy (&v, &bits, sizeof v);
        if (!isfinite (v))
            continue;
        cgq_fmt_double (buf, v);
        assert_true (strtod (buf, NULL) == v);
    }
}

static void
t_round15 (void **state)
{
    double r = cgq_round15 (0.1 + 0.2);
    assert_true (r == 0.3);
    char buf[32];
    assert_string_equal (cgq_fmt_double (buf, r), "0.3");
    assert_true (cgq_round15 (1.0 / 3) == 0.333333333333333);
    assert_true (cgq_round15 (-123.456) == -123.456);
    assert_true (cgq_round15 (0) == 0);
    assert_true (isnan (cgq_round15 (NAN)));
    assert_true (isinf (cgq_round15 (INFINITY)));
    // The %.15g text of a rounded value reads back as the same value.
    double v = cgq_round15 (0.0012345678901234567);
    snprintf (buf, sizeof buf, "%.15g", v);
    assert_true (strtod (buf, NULL) == v);
    // The fast path against printf + strtod, on what the searchers round.
    uint64_t x = 2463534242ull;
    for (int i = 0; i < 300000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        double u = (double) (x >> 11) / 9007199254740992.0;
        double w = i % 3 == 0   ? u
                   : i % 3 == 1 ? -1e3 + u * 2e3
                                : exp (log (1e-6) + u * (log (1e4) - log (1e-6)));
        char ref[32];
        snprintf (ref, sizeof ref, "%.15g", w);
        if (cgq_round15 (w) != strtod (ref, NULL))
            fail_msg ("cgq_round15 (%.17g) = %.17g, printf says %s", w, cgq_round15 (w), ref);
    }
}

static void
t_shell_quote (void **state)
{
    struct {
        const char *in, *out;
    } cases[] = {
        {"train.py", "train.py"},
        {"--lr=0.1", "--lr=0.1"},
        {"a/b:c,d@e%f+g", "a/b:c,d@e%f+g"},
        {"two words", "'two words'"},
        {"it's", "'it'\\''s'"},
        {"", "''"},
        {"$HOME", "'$HOME'"},
        {"a;rm -rf /", "'a;rm -rf /'"},
        {"''", "''\\'''\\'''"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *q = cgq_sh_quote (cases[i].in);
        assert_string_equal (q, cases[i].out);
        free (q);
    }
}

static void
t_buf (void **state)
{
    cgq_buf_t b;
    cgq_buf_init (&b);
    assert_int_equal (b.len, 0);
    assert_string_equal (b.data, "");
    cgq_buf_puts (&b, "abc");
    cgq_buf_append (&b, "\0x", 2); // binary-safe
    assert_int_equal (b.len, 5);
    assert_memory_equal (b.data, "abc\0x", 6);
    cgq_buf_reset (&b);
    assert_int_equal (b.len, 0);
    assert_string_equal (b.data, "");
    for (int i = 0; i < 10000; i++)
        cgq_buf_printf (&b, "%d,", i);
    assert_true (b.len > 10000 * 2);
    assert_int_equal (b.data[b.len], 0);
    assert_memory_equal (b.data, "0,1,2,3,", 8);
    assert_memory_equal (b.data + b.len - 5, "9999,", 5);
    cgq_buf_printf (&b, "%s", ""); // empty output leaves it unchanged
    assert_memory_equal (b.data + b.len - 5, "9999,", 5);
    char *s = cgq_buf_take (&b);
    assert_null (b.data);
    assert_int_equal (b.len, 0);
    assert_int_equal (strncmp (s, "0,1,", 4), 0);
    free (s);
    // A taken buffer can be reused without init.
    cgq_buf_puts (&b, "again");
    assert_string_equal (b.data, "again");
    cgq_buf_fini (&b);
    assert_null (b.data);

    cgq_buf_t z = {0};
    char *e = cgq_buf_take (&z);
    assert_string_equal (e, "");
    free (e);
}

static void
t_xasprintf_strndup (void **state)
{
    char *s = cgq_xasprintf ("%s-%d", "gpu", 3);
    assert_string_equal (s, "gpu-3");
    free (s);
    s = cgq_xstrndup ("abcdef", 3);
    assert_string_equal (s, "abc");
    free (s);
}

// cgq_json_*: one emitter for params, reports and CLI output.
static void
t_json (void **state)
{
    (void) state;
    json_error_t e;
    json_t *v = json_loads ("{\"lr\": 0.1, \"b\": [1, 3.0, 1e-4], \"s\": \"a\\\"b\\n\", "
                            "\"t\": true, \"n\": null, \"o\": {}}",
                            0, &e);
    assert_non_null (v);
    char *text = cgq_json_dumps (v);
    assert_string_equal (text, "{\"lr\":0.1,\"b\":[1,3.0,0.0001],\"s\":\"a\\\"b\\n\",\"t\":true,"
                               "\"n\":null,\"o\":{}}");
    // What it writes reads back as the same values.
    json_t *back = json_loads (text, 0, &e);
    assert_non_null (back);
    assert_true (json_equal (v, back));
    free (text);
    json_decref (back);

    cgq_buf_t b;
    cgq_buf_init (&b);
    cgq_json_append (&b, json_object_get (v, "b"), true);
    assert_string_equal (b.data, "[1, 3.0, 0.0001]");
    cgq_buf_fini (&b);
    json_decref (v);

    // Keys: plain ones as they are, others escaped as jansson does.
    json_t *keys = json_pack ("{s:i, s:i, s:i, s:i, s:i, s:i}", "plain_key-1.x", 1, "q\"uote", 2,
                              "back\\slash", 3, "tab\there", 4, "caf\xc3\xa9", 5, "sl/ash", 6);
    assert_non_null (keys);
    text = cgq_json_dumps (keys);
    char *want = json_dumps (keys, JSON_COMPACT | JSON_PRESERVE_ORDER);
    assert_string_equal (text, want);
    free (text);
    free (want);
    json_decref (keys);

    // A real that needs 17 digits keeps them.
    json_t *r = json_real (0.1 + 0.2);
    text = cgq_json_dumps (r);
    assert_string_equal (text, "0.30000000000000004");
    free (text);
    json_decref (r);
}

// s_flat_check compares cgq_json_flat_number on text with what json_loads
// makes of it: whenever the fast reader answers, jansson agrees. Returns the
// fast reader's answer.
static int
s_flat_check (const char *text, const char *key)
{
    double v = -1;
    size_t n = 99;
    int fast = cgq_json_flat_number (text, key, &v, &n);
    json_t *o = json_loads (text, 0, NULL);
    if (fast == 1) {
        if (!json_is_object (o))
            fail_msg ("fast reader took '%s', json_loads refuses it", text);
        if ((n == 0) != (json_object_size (o) == 0))
            fail_msg ("'%s': %zu members, json_loads %zu", text, n, json_object_size (o));
        if (key) {
            json_t *m = json_object_get (o, key);
            if (!json_is_number (m) || json_number_value (m) != v || !isfinite (v))
                fail_msg ("'%s' key %s: fast %.17g, json_loads %s", text, key, v,
                          m ? "another value" : "absent");
        }
    }
    json_decref (o);
    return fast;
}

static void
t_json_flat (void **state)
{
    (void) state;
    // What a result's metrics usually are: read fast, with the right value.
    const char *yes[] = {"{\"x\":0.123,\"score\":0.123}",
                         " { \"score\" : 1e-3 , \"loss\": -2 }\n",
                         "{\"score\": 7, \"note\": \"ok, done\", \"b\": true, \"n\": null}",
                         "{\"score\": 1, \"score\": 2.5}",
                         "{\"score\": -0.0}",
                         "{\"score\": 123456789012345678}",
                         "{\"score\": 1.5E+299}"};
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
        if (s_flat_check (yes[i], "score") != 1)
            fail_msg ("'%s' should be read fast", yes[i]);
    double v;
    size_t n;
    assert_int_equal (cgq_json_flat_number ("{\"score\": 1, \"score\": 2.5}", "score", &v, &n), 1);
    assert_true (v == 2.5); // the last one, as json_loads keeps it
    assert_int_equal (s_flat_check ("{}", NULL), 1);
    assert_int_equal (s_flat_check ("{\"a\": \"b\"}", NULL), 1);
    // Left to jansson: not objects, nested, escaped, non-ASCII, missing or
    // non-numeric key, huge numbers, bad grammar, trailing text.
    const char *no[] = {"", "[]", "3", "\"s\"", "{", "{\"score\": 1", "{\"score\": 1,}",
                        "{\"score\": [1]}", "{\"score\": 1, \"o\": {}}", "{\"sc\\u006fre\": 1}",
                        "{\"score\": 1, \"\xc3\xa9\": 2}", "{\"loss\": 1}", "{\"score\": \"1\"}",
                        "{\"score\": true}", "{\"score\": 1e400}", "{\"score\": 1234567890123456789}",
                        "{\"score\": 01}", "{\"score\": 1.}", "{\"score\": .5}", "{\"score\": +1}",
                        "{\"score\": 1e}", "{\"score\": NaN}", "{\"score\": 1} x", "{\"score\" 1}",
                        "{score: 1}", "{\"score\": 1 2}", "{\"a\": tru, \"score\": 1}",
                        "{\"score\": 1, \"x\": 1e999}"};
    for (size_t i = 0; i < sizeof no / sizeof *no; i++)
        if (s_flat_check (no[i], "score") != 0)
            fail_msg ("'%s' should be left to json_loads", no[i]);
    // Random texts built from JSON fragments, and mutations of them: the fast
    // reader never answers where json_loads disagrees.
    const char *frag[] = {"{", "}", "\"score\"", "\"x\"", ":", ",", " ", "1", "-0.5", "2e3",
                          "1e999", "\"s\"", "true", "null", "[", "]", "0", "\\", "\"",
                          "99999999999999999999", "1.25", "\n"};
    unsigned seed = 12345;
    int fast = 0;
    for (int i = 0; i < 200000; i++) {
        char text[128];
        size_t len = 0;
        if (i % 2) {
            // a well-formed flat object, perhaps mutated below
            len = (size_t) snprintf (text, sizeof text, "{\"x\": %d.%d, \"score\": %s%d.%de%d}",
                                     rand_r (&seed) % 100, rand_r (&seed) % 1000,
                                     rand_r (&seed) % 2 ? "-" : "", rand_r (&seed) % 10,
                                     rand_r (&seed) % 1000, rand_r (&seed) % 40 - 20);
        }
        else {
            int parts = 1 + rand_r (&seed) % 12;
            for (int k = 0; k < parts; k++) {
                const char *f = frag[rand_r (&seed) % (sizeof frag / sizeof *frag)];
                size_t fl = strlen (f);
                if (len + fl + 1 >= sizeof text)
                    break;
                memcpy (text + len, f, fl);
                len += fl;
            }
            text[len] = 0;
        }
        if (len && rand_r (&seed) % 3 == 0)
            text[rand_r (&seed) % len] = (char) (1 + rand_r (&seed) % 127);
        fast += s_flat_check (text, rand_r (&seed) % 4 ? "score" : NULL);
    }
    assert_true (fast > 50000); // and the fast path is the common one
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (t_parse_duration_valid),
        cmocka_unit_test (t_parse_duration_malformed),
        cmocka_unit_test (t_parse_bytes_valid),
        cmocka_unit_test (t_parse_bytes_malformed),
        cmocka_unit_test (t_parse_u64_double),
        cmocka_unit_test (t_fmt_double),
        cmocka_unit_test (t_round15),
        cmocka_unit_test (t_shell_quote),
        cmocka_unit_test (t_buf),
        cmocka_unit_test (t_xasprintf_strndup),
        cmocka_unit_test (t_json),
        cmocka_unit_test (t_json_flat),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
