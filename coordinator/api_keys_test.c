// api_keys_test: api_json_member, the scanner the dashboard's sorts read a
// param or metric with, says what jansson says (json_loads with
// JSON_DECODE_ANY, then json_object_get) or hands the text to jansson:
// hand-picked texts (ties of types, escapes, duplicates, overflow, bad
// JSON), then 200,000 texts built and mutated at random.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "api_keys.h"

// What jansson makes of member name of text, as api_json_member reports it.
static api_json_member_t
s_jansson (const char *text, const char *name, json_t **keep)
{
    json_t *o = json_loads (text, JSON_DECODE_ANY, NULL);
    json_t *x = json_is_object (o) ? json_object_get (o, name) : NULL;
    api_json_member_t m = {.kind = API_JSON_MISSING};
    if (json_is_number (x))
        m = (api_json_member_t){.kind = API_JSON_NUMBER, .num = json_number_value (x)};
    else if (json_is_boolean (x))
        m = (api_json_member_t){.kind = API_JSON_BOOL, .num = json_is_true (x)};
    else if (json_is_string (x))
        m = (api_json_member_t){
            .kind = API_JSON_STRING, .str = json_string_value (x), .len = json_string_length (x)};
    else if (x && !json_is_null (x))
        m.kind = API_JSON_OTHER;
    *keep = o;
    return m;
}

// s_check: the scanner agrees with jansson on text, or passes it on (-1);
// returns whether it read the text itself.
static bool
s_check (const char *text, const char *name)
{
    json_t *keep;
    api_json_member_t want = s_jansson (text, name, &keep), got;
    int rc = api_json_member (text, name, &got);
    if (rc == 0) {
        if (got.kind != want.kind)
            fail_msg ("%s [%s]: kind %d, jansson %d", text, name, got.kind, want.kind);
        if ((got.kind == API_JSON_NUMBER || got.kind == API_JSON_BOOL) && got.num != want.num)
            fail_msg ("%s [%s]: %.17g, jansson %.17g", text, name, got.num, want.num);
        if (got.kind == API_JSON_STRING &&
            (got.len != want.len || memcmp (got.str, want.str, got.len)))
            fail_msg ("%s [%s]: string %.*s, jansson %s", text, name, (int)got.len, got.str,
                      want.str);
    }
    else
        assert_int_equal (rc, -1);
    json_decref (keep);
    return rc == 0;
}

static void
t_cases (void **state)
{
    (void)state;
    // Read here: every kind, ties of types, spacing, nesting, other members.
    const char *const read[] = {
        "{\"x\": 1}",
        "{\"x\":-0}",
        "{\"x\": 0.5e-3}",
        "{\"x\": 1E+2}",
        "{\"x\": -12.25}",
        "{\"x\": 123456789012345678}",
        "{\"x\": 1e-400}",
        "{\"x\": true}",
        "{\"x\": false}",
        "{\"x\": null}",
        "{\"x\": \"adam\"}",
        "{\"x\": \"\"}",
        "{\"x\": [1, {\"y\": [2]}]}",
        "{\"x\": {}}",
        "{\"y\": 1}",
        "{}",
        " \t\r\n{ \"y\" : [ ] , \"x\" : \"a b\" } \n",
        "{\"xx\": 1, \"x\": 2}",
        "{\"X\": 1}",
        "[1]",
        "\"x\"",
        "3",
        "",
        "   ",
        "nul",
        "{\"x\": \"\x7f\"}",
        "{\"a\": {\"x\": 1}}",
    };
    for (size_t i = 0; i < sizeof read / sizeof *read; i++)
        if (!s_check (read[i], "x") && read[i][0] == '{')
            fail_msg ("not read: %s", read[i]);
    // Handed to jansson: escapes, UTF-8, overflow, duplicates, bad JSON.
    const char *const passed[] = {
        "{\"x\": \"caf\\u00e9\"}",
        "{\"x\": \"caf\xc3\xa9\"}",
        "{\"x\": \"\xff\"}",
        "{\"x\": 1234567890123456789012}",
        "{\"x\": 1e400}",
        "{\"x\": -1e400}",
        "{\"x\": 1, \"x\": 2}",
        "{\"x\": 01}",
        "{\"x\": 1.}",
        "{\"x\": .5}",
        "{\"x\": +1}",
        "{\"x\": 1,}",
        "{\"x\": 1} x",
        "{\"x\": tru}",
        "{\"x\": truex}",
        "{\"x\" 1}",
        "{x: 1}",
        "{\"x\": [1,]}",
        "{\"x\": \"a\tb\"}",
        "{\"x\": NaN}",
        "{\"x\": 0x10}",
        "{\"x\": 1",
        "{\"x\": \"abc",
        "{\"\\u0078\": 1}",
        "{\"x\": [[[[[[[[[[[[[[[[[[[[[[[[["
        "[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}",
    };
    for (size_t i = 0; i < sizeof passed / sizeof *passed; i++) {
        api_json_member_t m;
        if (api_json_member (passed[i], "x", &m) != -1)
            fail_msg ("read, not passed to jansson: %s", passed[i]);
        s_check (passed[i], "x");
    }
}

static uint64_t s_rng = 0x9E3779B97F4A7C15ULL;
static unsigned
s_next (unsigned n)
{
    s_rng ^= s_rng << 13;
    s_rng ^= s_rng >> 7;
    s_rng ^= s_rng << 17;
    return (unsigned)(s_rng % n);
}

static void
s_put (char *buf, size_t cap, size_t *len, const char *s)
{
    size_t l = strlen (s);
    if (*len + l < cap) {
        memcpy (buf + *len, s, l + 1);
        *len += l;
    }
}

static void
s_value (char *buf, size_t cap, size_t *len, int depth)
{
    static const char *const atoms[] = {"0",
                                        "-0",
                                        "1",
                                        "-7",
                                        "2.5",
                                        "1e3",
                                        "-3.25E-2",
                                        "123456789012345678",
                                        "1234567890123456789",
                                        "1e400",
                                        "true",
                                        "false",
                                        "null",
                                        "\"a\"",
                                        "\"b c\"",
                                        "\"\"",
                                        "\"x\"",
                                        "\"\\n\"",
                                        "\"\xc3\xa9\"",
                                        "1e-320",
                                        "99999999999999999999"};
    unsigned k = s_next (depth > 3 ? 1 : 10);
    if (k == 1 || k == 2) {
        bool obj = k == 1;
        s_put (buf, cap, len, obj ? "{" : "[");
        unsigned n = s_next (4);
        for (unsigned i = 0; i < n; i++) {
            if (i)
                s_put (buf, cap, len, s_next (3) ? "," : " , ");
            if (obj)
                s_put (buf, cap, len, s_next (2) ? "\"x\":" : "\"y\" :");
            s_value (buf, cap, len, depth + 1);
        }
        s_put (buf, cap, len, obj ? "}" : "]");
    }
    else
        s_put (buf, cap, len, atoms[s_next (sizeof atoms / sizeof *atoms)]);
}

static void
t_fuzz (void **state)
{
    (void)state;
    static const char *const names[] = {"x", "y", "xy", "z"};
    static const char *const keys[] = {"\"x\"", "\"y\"", "\"xy\"", "\"z\"", "\"X\"", "\"x \""};
    const char junk[] = "{}[],:\" \t\n-+.eE0123456789tfnul\\x";
    size_t read = 0, runs = 200000;
    char buf[512];
    for (size_t r = 0; r < runs; r++) {
        size_t len = 0;
        buf[0] = '\0';
        s_put (buf, sizeof buf, &len, s_next (8) ? "{" : " { ");
        unsigned n = s_next (5);
        for (unsigned i = 0; i < n; i++) {
            if (i)
                s_put (buf, sizeof buf, &len, ",");
            s_put (buf, sizeof buf, &len, keys[s_next (sizeof keys / sizeof *keys)]);
            s_put (buf, sizeof buf, &len, s_next (4) ? ":" : " : ");
            s_value (buf, sizeof buf, &len, 1);
        }
        s_put (buf, sizeof buf, &len, s_next (8) ? "}" : "} ");
        // A third mutated: a byte replaced, dropped or cut short.
        if (len > 2 && s_next (3) == 0) {
            size_t at = s_next ((unsigned)len);
            switch (s_next (3)) {
            case 0: buf[at] = junk[s_next (sizeof junk - 1)]; break;
            case 1: memmove (buf + at, buf + at + 1, len - at); break;
            default: buf[at] = '\0'; break;
            }
        }
        read += s_check (buf, names[s_next (sizeof names / sizeof *names)]);
    }
    // Most texts are read here, not handed on (else it saves nothing).
    if (read < runs / 3)
        fail_msg ("only %zu of %zu texts read without jansson", read, runs);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (t_cases),
        cmocka_unit_test (t_fuzz),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
