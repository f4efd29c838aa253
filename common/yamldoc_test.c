// yamldoc_test: the YAML reader on its own: the tree and its marks, the
// first error kept, the limits named after the text they read, the
// "did you mean" guesses, and the bounded file read. (What each reader of
// YAML makes of it: spec_test, config_test, runner_config_test.)
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "util.h"
#include "yamldoc.h"

static void
t_tree (void **state)
{
    char err[256];
    const char *text = "a: [1, 'x', ~]\nb: &k {c: yes}\nd: *k\n";
    cgq_yamldoc_t *y = cgq_yamldoc_new ("t.yaml", "test file", err, sizeof err);
    const cgq_yamldoc_node_t *root;
    assert_int_equal (cgq_yamldoc_load (y, text, strlen (text), 0, NULL, &root), 0);
    assert_int_equal (cgq_yamldoc_end (y), 0);
    assert_int_equal (root->type, CGQ_YAMLDOC_MAP);
    assert_int_equal (cgq_yamldoc_npairs (root), 3);
    const cgq_yamldoc_node_t *a = cgq_yamldoc_val (y, root, 0);
    assert_int_equal (cgq_yamldoc_nitems (a), 3);
    assert_int_equal (a->line, 1);
    assert_int_equal (a->col, 4);
    cgq_yamldoc_scalar_t s;
    cgq_yamldoc_resolve (cgq_yamldoc_item (y, a, 0), &s);
    assert_int_equal (s.kind, CGQ_YAMLDOC_INT);
    cgq_yamldoc_resolve (cgq_yamldoc_item (y, a, 1), &s);
    assert_int_equal (s.kind, CGQ_YAMLDOC_STR);
    assert_true (cgq_yamldoc_is_null (cgq_yamldoc_item (y, a, 2)));
    // An alias is its anchor's node.
    assert_ptr_equal (cgq_yamldoc_val (y, root, 1), cgq_yamldoc_val (y, root, 2));
    json_t *j = cgq_yamldoc_to_json (y, root);
    char *dump = json_dumps (j, JSON_COMPACT);
    assert_string_equal (dump, "{\"a\":[1,\"x\",null],\"b\":{\"c\":true},\"d\":{\"c\":true}}");
    free (dump);
    json_decref (j);
    // Only the first error is kept.
    assert_false (cgq_yamldoc_failed (y));
    assert_int_equal (cgq_yamldoc_fail (y, a, "first %d", 1), -1);
    assert_int_equal (cgq_yamldoc_fail (y, root, "second"), -1);
    assert_string_equal (err, "t.yaml:1:4: first 1");
    assert_true (cgq_yamldoc_failed (y));
    cgq_yamldoc_destroy (&y);
    assert_null (y);
    cgq_yamldoc_destroy (&y); // NULL is fine

    // No document: no root, no error.
    y = cgq_yamldoc_new ("t.yaml", "test file", err, sizeof err);
    assert_int_equal (cgq_yamldoc_load (y, "# nothing\n", 10, 0, NULL, &root), 0);
    assert_null (root);
    cgq_yamldoc_destroy (&y);
}

// Each limit's message names the text as its caller calls it.
static void
t_limits (void **state)
{
    char err[256];
    cgq_yamldoc_t *y = cgq_yamldoc_new ("t.yaml", "test file", err, sizeof err);
    const cgq_yamldoc_node_t *root;
    assert_int_equal (cgq_yamldoc_load (y, "a: 1\nb: 2\n", 10, 6, "make it shorter", &root), -1);
    assert_string_equal (err, "t.yaml:2:2: the test file is longer than 6 bytes here (the limit: "
                              "make it shorter)");
    cgq_yamldoc_destroy (&y);

    y = cgq_yamldoc_new ("t.yaml", "test file", err, sizeof err);
    assert_int_equal (cgq_yamldoc_load (y, "a: 1\n---\nb: 2\n", 14, 0, NULL, &root), 0);
    assert_int_equal (cgq_yamldoc_end (y), -1);
    assert_string_equal (err, "t.yaml:3:1: a second YAML document (a test file is one document; "
                              "remove the '---' line)");
    cgq_yamldoc_destroy (&y);

    y = cgq_yamldoc_new ("t.yaml", "test file", err, sizeof err);
    assert_int_equal (cgq_yamldoc_load (y, "a:\n\tb: 1\n", 9, 0, NULL, &root), -1);
    assert_non_null (strstr (err, "indent with spaces"));
    cgq_yamldoc_destroy (&y);

    // A template's braces inside a flow mapping end it early: say to quote.
    const char *flow = "name: x\ntrial: {command: python3 {spec_dir}/train.py {lr}}\n";
    y = cgq_yamldoc_new ("t.yaml", "test file", err, sizeof err);
    assert_int_equal (cgq_yamldoc_load (y, flow, strlen (flow), 0, NULL, &root), -1);
    assert_string_equal (err, "t.yaml:2:26: YAML syntax error: did not find expected ',' or '}' "
                              "while parsing a flow mapping at 2:8 (quote a value that holds "
                              "{placeholders} inside { } or [ ]: {command: \"python3 "
                              "{spec_dir}/train.py --lr {lr}\"})");
    cgq_yamldoc_destroy (&y);
    // ... and not for a flow mapping broken some other way
    const char *other = "trial: {command: a b: c}\n";
    y = cgq_yamldoc_new ("t.yaml", "test file", err, sizeof err);
    assert_int_equal (cgq_yamldoc_load (y, other, strlen (other), 0, NULL, &root), -1);
    assert_null (strstr (err, "placeholders"));
    cgq_yamldoc_destroy (&y);
}

static void
t_suggest (void **state)
{
    const char *known = "algorithm, samples, concurrency, seed, population, grace";
    char buf[32];
    assert_string_equal (cgq_yamldoc_suggest ("samplez", known, buf, sizeof buf), "samples");
    assert_string_equal (cgq_yamldoc_suggest ("algoritm", known, buf, sizeof buf), "algorithm");
    assert_string_equal (cgq_yamldoc_suggest ("graec", known, buf, sizeof buf), "grace");
    assert_string_equal (cgq_yamldoc_suggest ("populashun", known, buf, sizeof buf), "population");
    assert_null (cgq_yamldoc_suggest ("x", known, buf, sizeof buf));
    assert_null (cgq_yamldoc_suggest ("", known, buf, sizeof buf));
    assert_null (cgq_yamldoc_suggest ("colour", known, buf, sizeof buf));
    assert_null (cgq_yamldoc_suggest ("seed", known, buf, sizeof buf)); // known: no guess
}

// cgq_yamldoc_read_file reads one byte past the limit, not the whole file.
static void
t_read_file (void **state)
{
    char path[] = "/tmp/cgq-yamldoc-test-XXXXXX";
    int fd = mkstemp (path);
    assert_true (fd >= 0);
    assert_int_equal (write (fd, "0123456789", 10), 10);
    close (fd);
    cgq_buf_t b;
    cgq_buf_init (&b);
    assert_int_equal (cgq_yamldoc_read_file (path, 3, &b), 0);
    assert_int_equal (b.len, 4);
    cgq_buf_reset (&b);
    assert_int_equal (cgq_yamldoc_read_file (path, 100, &b), 0);
    assert_int_equal (b.len, 10);
    unlink (path);
    assert_int_equal (cgq_yamldoc_read_file (path, 100, &b), -1);
    cgq_buf_fini (&b);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (t_tree),
        cmocka_unit_test (t_limits),
        cmocka_unit_test (t_suggest),
        cmocka_unit_test (t_read_file),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
