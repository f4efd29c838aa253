// expr_test: metric expressions. Precedence and associativity, every
// function, the errors of a bad expression with their exact columns, the
// errors of an evaluation (missing metric, division by zero), the bounds on
// length and depth, and the seed objectives against values worked by hand.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expr.h"
#include "util.h"

// s_eval parses text and evaluates it against the JSON object metrics_text.
static double
s_eval (const char *text, const char *metrics_text)
{
    char err[256] = "";
    cgq_expr_t *e = cgq_expr_parse (text, NULL, err, sizeof err);
    if (!e)
        fail_msg ("'%s' did not parse: %s", text, err);
    json_t *m = json_loads (metrics_text, 0, NULL);
    assert_non_null (m);
    double v = NAN;
    if (cgq_expr_eval (e, m, &v, err, sizeof err) < 0)
        fail_msg ("'%s' did not evaluate: %s", text, err);
    json_decref (m);
    cgq_expr_destroy (&e);
    assert_null (e);
    return v;
}

// s_eval_error evaluates text and returns the error message (static buffer).
static const char *
s_eval_error (const char *text, const char *metrics_text)
{
    static char err[256];
    err[0] = 0;
    cgq_expr_t *e = cgq_expr_parse (text, NULL, err, sizeof err);
    if (!e)
        fail_msg ("'%s' did not parse: %s", text, err);
    json_t *m = json_loads (metrics_text, 0, NULL);
    assert_non_null (m);
    double v = 42;
    assert_int_equal (cgq_expr_eval (e, m, &v, err, sizeof err), -1);
    assert_true (v == 42); // *out is left alone on error
    json_decref (m);
    cgq_expr_destroy (&e);
    return err;
}

static void
s_assert_near (double got, double want, const char *text)
{
    if (!(fabs (got - want) <= 1e-12 * fmax (1, fabs (want))))
        fail_msg ("'%s' = %.17g, expected %.17g", text, got, want);
}

static void
t_precedence (void **state)
{
    struct {
        const char *text;
        double want;
    } cases[] = {
        {"1 + 2 * 3", 7},
        {"(1 + 2) * 3", 9},
        {"10 - 4 - 3", 3},  // left-assoc
        {"64 / 4 / 2", 8},  // left-assoc
        {"2 ^ 3 ^ 2", 512}, // right-assoc: 2^(3^2)
        {"(2 ^ 3) ^ 2", 64},
        {"2 * 3 ^ 2", 18}, // ^ binds tighter than *
        {"-2 ^ 2", -4},    // ... and tighter than unary minus
        {"(-2) ^ 2", 4},
        {"2 ^ -1", 0.5}, // a signed exponent
        {"-2 ^ -2", -0.25},
        {"2 ^ -1 ^ 2", 0.5}, // 2^(-(1^2))
        {"1 - -1", 2},
        {"--3", 3},
        {"+3 - +1", 2},
        {"-3 * -2", 6},
        {"6 / -2 * 3", -9},
        {"1 + 2 * 3 - 4 / 2 ^ 2", 6},
        {".5 + 5. + 1e-3 + 2.5E+1 + 1e2", 130.501},
        {"  \t1+\n2  ", 3},
        {"((((7))))", 7},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        s_assert_near (s_eval (cases[i].text, "{}"), cases[i].want, cases[i].text);
}

static void
t_functions (void **state)
{
    const char *m = "{\"a\": 4, \"b\": -2.5, \"c\": 100}";
    struct {
        const char *text;
        double want;
    } cases[] = {
        {"log(a)", log (4)},
        {"log(exp(2))", 2},
        {"log10(c)", 2},
        {"log10 (1000)", 3}, // a space before '(' still makes a call
        {"exp(0)", 1},
        {"exp(1)", exp (1)},
        {"sqrt(a)", 2},
        {"abs(b)", 2.5},
        {"abs(a)", 4},
        {"pow(a, 0.5)", 2},
        {"pow(2, 10)", 1024},
        {"pow(b, 2)", 6.25},
        {"min(a, b, c)", -2.5},
        {"max(a, b, c)", 100},
        {"min(a)", 4},
        {"max(1, 2, 3, 4, 5, 6, 7, 8, 9, 10)", 10},
        {"-sqrt(a) ^ 2", -4},
        {"max(min(a, c), log10(c) * 3)", 6},
        {"sqrt(sqrt(sqrt(256)))", 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        s_assert_near (s_eval (cases[i].text, m), cases[i].want, cases[i].text);
}

// The spellings of a Python script: NumPy's and math's names and prefixes,
// '**', comparisons and where() as a guard.
static void
t_python_spellings (void **state)
{
    const char *m = "{\"a\": 4, \"b\": -2.5, \"c\": 100, \"zero\": 0}";
    struct {
        const char *text;
        double want;
    } cases[] = {
        {"np.power(2, 10)", 1024},
        {"numpy.power(a, 0.5)", 2},
        {"math.pow(a, 2)", 16},
        {"np.log10(c)", 2},
        {"math.log(exp(3))", 3},
        {"np.log(a)", log (4)},
        {"np.log2(a)", 2},
        {"log2(1024)", 10},
        {"np.sqrt(a) + math.sqrt(c)", 12},
        {"np.exp(0) + np.abs(b)", 3.5},
        {"np.minimum(a, b)", -2.5},
        {"np.maximum(a, c)", 100},
        {"minimum(a, b) + maximum(a, b)", 1.5},
        {"np.clip(c, 0, 10)", 10},
        {"clip(b, 0, 10)", 0},
        {"clip(a, 0, 10)", 4},
        {"clip(a, 5, 3)", 3}, // NumPy's: high wins when low > high
        {"a ** 2", 16},
        {"2 ** 3 ** 2", 512}, // right-assoc, as '^'
        {"-2 ** 2", -4},      // tighter than unary minus, as in Python
        {"2 ** -1", 0.5},
        {"a < c", 1},
        {"a > c", 0},
        {"a <= 4", 1},
        {"a >= 4.5", 0},
        {"a == 4", 1},
        {"a != 4", 0},
        {"1 + 2 < 4", 1},     // arithmetic first
        {"(a < c) * 10", 10}, // a comparison is 1 or 0
        {"(a < c) * (c < a)", 0},
        {"np.where(a > 3, 1, 2)", 1},
        {"where(a > 5, 1, 2)", 2},
        {"where(b, 7, 8)", 7}, // any non-zero number is true
        {"where(zero, 7, 8)", 8},
        {"np.where(a < c, a, c) * 2", 8},
        {"max(a < c, 0.5)", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        s_assert_near (s_eval (cases[i].text, m), cases[i].want, cases[i].text);
    // A prefixed name that is not called is a metric, as before.
    s_assert_near (s_eval ("np.x + 1", "{\"np\": {\"x\": 2}}"), 3, "np.x + 1");
    s_assert_near (s_eval ("exp", "{\"exp\": 5}"), 5, "exp");
}

// where() guards: the branch not taken may divide by zero or lack its
// metric; the taken one, or the condition, still fails the expression.
static void
t_where_guards (void **state)
{
    s_assert_near (s_eval ("where(lat > 0, acc / lat, 0)", "{\"acc\": 1, \"lat\": 0}"), 0,
                   "guarded division");
    s_assert_near (s_eval ("where(lat > 0, acc / lat, 0)", "{\"acc\": 1, \"lat\": 4}"), 0.25,
                   "guarded division, taken");
    s_assert_near (s_eval ("where(1, acc, missing)", "{\"acc\": 3}"), 3, "missing, not taken");
    assert_string_equal (s_eval_error ("where(lat >= 0, acc / lat, 0)",
                                       "{\"acc\": 1, \"lat\": 0}"),
                         "division by zero at column 21 (1 / 0; guard the divisor, e.g. with "
                         "max(x, 1e-9))");
    assert_string_equal (s_eval_error ("where(1 / x, 1, 2)", "{\"x\": 0}"),
                         "division by zero at column 9 (1 / 0; guard the divisor, e.g. with "
                         "max(x, 1e-9))");
    assert_string_equal (s_eval_error ("where(0, 1, y)", "{\"x\": 0}"),
                         "metric 'y' is missing from the result (metrics: x)");
    // Outside where, the first error met is the one reported, whatever
    // follows it, as when evaluation stopped there.
    assert_string_equal (s_eval_error ("max(1, 2/x) + y + log(-1)", "{\"x\": 0}"),
                         "division by zero at column 9 (2 / 0; guard the divisor, e.g. with "
                         "max(x, 1e-9))");
    assert_string_equal (s_eval_error ("y + 2/x", "{\"x\": 0}"),
                         "metric 'y' is missing from the result (metrics: x)");
    assert_string_equal (s_eval_error ("np.log2(x)", "{\"x\": 0}"),
                         "log2 of 0 at column 1 is not finite (it needs a value > 0)");
    // min() of an error and a number is still an error (no NumPy-style inf).
    assert_string_equal (s_eval_error ("min(1 / x, 3)", "{\"x\": 0}"),
                         "division by zero at column 7 (1 / 0; guard the divisor, e.g. with "
                         "max(x, 1e-9))");
}

static void
t_names (void **state)
{
    char err[256];
    cgq_expr_t *e = cgq_expr_parse ("(acc*100)/latency_gpu + acc - val.loss_2 + max(acc, _x)", NULL,
                                    err, sizeof err);
    assert_non_null (e);
    assert_int_equal (cgq_expr_nnames (e), 4); // acc once
    assert_string_equal (cgq_expr_name (e, 0), "acc");
    assert_string_equal (cgq_expr_name (e, 1), "latency_gpu");
    assert_string_equal (cgq_expr_name (e, 2), "val.loss_2");
    assert_string_equal (cgq_expr_name (e, 3), "_x");
    cgq_expr_destroy (&e);

    // A function's name without '(' is a metric.
    e = cgq_expr_parse ("exp + log(exp)", NULL, err, sizeof err);
    assert_non_null (e);
    assert_int_equal (cgq_expr_nnames (e), 1);
    assert_string_equal (cgq_expr_name (e, 0), "exp");
    cgq_expr_destroy (&e);
    s_assert_near (s_eval ("exp + log(exp)", "{\"exp\": 1}"), 1, "exp + log(exp)");

    e = cgq_expr_parse ("3 * 4", NULL, err, sizeof err);
    assert_int_equal (cgq_expr_nnames (e), 0);
    cgq_expr_destroy (&e);
    cgq_expr_destroy (&e); // NULL-safe
    cgq_expr_destroy (NULL);
}

static void
t_metrics (void **state)
{
    // Integers and reals; a dotted name is a key first, else a path.
    s_assert_near (s_eval ("a + b", "{\"a\": 2, \"b\": 0.5}"), 2.5, "a + b");
    s_assert_near (s_eval ("val.acc * 2", "{\"val\": {\"acc\": 0.25}}"), 0.5, "val.acc");
    s_assert_near (s_eval ("val.acc", "{\"val.acc\": 1, \"val\": {\"acc\": 2}}"), 1, "val.acc");
    s_assert_near (s_eval ("a.b.c", "{\"a\": {\"b\": {\"c\": 3}}}"), 3, "a.b.c");

    assert_string_equal (s_eval_error ("(acc*100)/latency_gpu", "{\"acc\": 0.9, \"loss\": 0.1}"),
                         "metric 'latency_gpu' is missing from the result (metrics: acc, loss)");
    assert_string_equal (s_eval_error ("x", "{}"),
                         "metric 'x' is missing from the result (metrics: none)");
    assert_string_equal (s_eval_error ("val.acc", "{\"val\": 3}"),
                         "metric 'val.acc' is missing from the result (metrics: val)");
    assert_string_equal (s_eval_error ("acc + 1", "{\"acc\": \"0.9\"}"),
                         "metric 'acc' is a string, not a number (report it as a JSON number)");
    assert_string_equal (s_eval_error ("acc", "{\"acc\": null}"),
                         "metric 'acc' is null, not a number (report it as a JSON number)");
    assert_string_equal (s_eval_error ("acc", "{\"acc\": true}"),
                         "metric 'acc' is a boolean, not a number (report it as a JSON number)");
    assert_string_equal (s_eval_error ("1", "[1]"), "the result is not a JSON object of metrics");

    // A long list of metrics is cut.
    cgq_buf_t b;
    cgq_buf_init (&b);
    cgq_buf_puts (&b, "{");
    for (int i = 0; i < 100; i++)
        cgq_buf_printf (&b, "%s\"metric_number_%d\": %d", i ? ", " : "", i, i);
    cgq_buf_puts (&b, "}");
    const char *err = s_eval_error ("nope", b.data);
    assert_non_null (strstr (err, "metric 'nope' is missing from the result (metrics: "
                                  "metric_number_0, metric_number_1, "));
    assert_non_null (strstr (err, ", ...)"));
    cgq_buf_fini (&b);
}

static void
t_not_finite (void **state)
{
    assert_string_equal (
        s_eval_error ("(acc*100)/latency_gpu", "{\"acc\": 0.9, \"latency_gpu\": 0}"),
        "division by zero at column 10 (90 / 0; guard the divisor, e.g. with max(x, 1e-9))");
    assert_string_equal (s_eval_error ("0/x", "{\"x\": 0}"),
                         "division by zero at column 2 (0 / 0; guard the divisor, e.g. with "
                         "max(x, 1e-9))");
    assert_string_equal (s_eval_error ("1 + log(x)", "{\"x\": -2}"),
                         "log of -2 at column 5 is not finite (it needs a value > 0)");
    assert_string_equal (s_eval_error ("log10(x)", "{\"x\": 0}"),
                         "log10 of 0 at column 1 is not finite (it needs a value > 0)");
    assert_string_equal (s_eval_error ("sqrt(x)", "{\"x\": -1}"),
                         "sqrt of the negative value -1 at column 1 is not a real number (use "
                         "abs() or max(x, 0))");
    assert_string_equal (s_eval_error ("x ^ 0.5", "{\"x\": -8}"),
                         "negative base -8 to the fractional power 0.5 at column 3 is not a real "
                         "number (use abs() or an integer exponent)");
    assert_string_equal (s_eval_error ("pow(x, -1)", "{\"x\": 0}"),
                         "0 to the negative power -1 at column 1 is a division by zero (guard "
                         "the base, e.g. with max(x, 1e-9))");
    assert_string_equal (s_eval_error ("exp(x)", "{\"x\": 1000}"),
                         "the value of exp at column 1 overflows (rescale it, e.g. divide by a "
                         "constant or take a log)");
    assert_string_equal (s_eval_error ("x * x", "{\"x\": 1e200}"),
                         "the value of the operator at column 3 overflows (rescale it, e.g. "
                         "divide by a constant or take a log)");
    // An error inside a larger expression stops it there.
    assert_string_equal (s_eval_error ("max(1, 2/x) + y", "{\"x\": 0}"),
                         "division by zero at column 9 (2 / 0; guard the divisor, e.g. with "
                         "max(x, 1e-9))");
    // Negative base with an integral exponent is fine.
    s_assert_near (s_eval ("x ^ 3", "{\"x\": -2}"), -8, "x ^ 3");
}

static void
t_parse_errors (void **state)
{
    struct {
        const char *text;
        int column;
        const char *err;
    } cases[] = {
        {"", 1,
         "column 1: empty expression (write a metric name, a number or a formula, e.g. acc or "
         "(acc*100)/latency_gpu)"},
        {"   ", 1,
         "column 1: empty expression (write a metric name, a number or a formula, e.g. acc or "
         "(acc*100)/latency_gpu)"},
        {"foo(acc)", 1,
         "column 1: unknown function 'foo' (expected one of: log, log10, log2, exp, pow, power, "
         "sqrt, abs, min, max, minimum, maximum, clip, where; also as np.NAME, numpy.NAME or "
         "math.NAME)"},
        {"acc * lgo (x)", 7,
         "column 7: unknown function 'lgo' (expected one of: log, log10, log2, exp, pow, power, "
         "sqrt, abs, min, max, minimum, maximum, clip, where; also as np.NAME, numpy.NAME or "
         "math.NAME)"},
        {"np.foo(acc)", 1,
         "column 1: unknown function 'np.foo' (expected one of: log, log10, log2, exp, pow, "
         "power, sqrt, abs, min, max, minimum, maximum, clip, where; also as np.NAME, numpy.NAME "
         "or math.NAME)"},
        {"torch.log(acc)", 1,
         "column 1: unknown function 'torch.log' (expected one of: log, log10, log2, exp, pow, "
         "power, sqrt, abs, min, max, minimum, maximum, clip, where; also as np.NAME, numpy.NAME "
         "or math.NAME)"},
        {"np.(acc)", 1,
         "column 1: unknown function 'np.' (expected one of: log, log10, log2, exp, pow, power, "
         "sqrt, abs, min, max, minimum, maximum, clip, where; also as np.NAME, numpy.NAME or "
         "math.NAME)"},
        {"a < b < c", 7,
         "column 7: comparisons do not chain (write one comparison, e.g. a < b, and combine two "
         "with *: (a < b) * (b < c))"},
        {"a == b != c", 8,
         "column 8: comparisons do not chain (write one comparison, e.g. a < b, and combine two "
         "with *: (a < b) * (b < c))"},
        {"a <", 4,
         "column 4: the expression ends early (complete it with a number, metric name, function "
         "or '(')"},
        {"a = b", 3,
         "column 3: unexpected character '=' (metric names use letters, digits, '_' and '.'; "
         "operators are + - * / ^)"},
        {"minimum(a)", 10, "column 10: minimum takes 2 arguments, got 1 (write minimum(a, b))"},
        {"np.clip(a, 0)", 13,
         "column 13: clip takes 3 arguments, got 2 (write clip(x, low, high))"},
        {"where(a, b, c, d)", 14,
         "column 14: where takes 3 arguments (write where(condition, if_true, if_false))"},
        {"a ** * 2", 6,
         "column 6: expected a number, metric name, function or '(' but found '*' (write an "
         "operand before it)"},
        {"(acc*100", 9, "column 9: missing ')' to close the '(' at column 1 (add ')')"},
        {"((acc*100)/latency", 19, "column 19: missing ')' to close the '(' at column 1 (add ')')"},
        {"(a b)", 4,
         "column 4: expected an operator or the ')' closing the '(' at column 1 but found 'b' "
         "(join the parts with an operator: + - * / ^)"},
        {"pow(acc, 2", 11, "column 11: missing ')' to close 'pow(' at column 4 (add ')')"},
        {"pow(acc 2)", 9,
         "column 9: expected ',' or ')' in pow(...) but found '2' (separate the arguments with "
         "',')"},
        {"pow(1)", 6, "column 6: pow takes 2 arguments, got 1 (write pow(base, exponent))"},
        {"log(1, 2)", 6, "column 6: log takes 1 argument (write log(x), the natural logarithm)"},
        {"pow(1, 2, 3)", 9, "column 9: pow takes 2 arguments (write pow(base, exponent))"},
        {"max()", 5, "column 5: max needs an argument (write max(a, b, ...))"},
        {"acc 100", 5,
         "column 5: unexpected '100' after a complete expression (join the parts with an "
         "operator: + - * / ^)"},
        {"(acc)(loss)", 6,
         "column 6: unexpected '(' after a complete expression (join the parts with an "
         "operator: + - * / ^)"},
        {"acc)", 4, "column 4: unmatched ')' (remove it or add a '(' before it)"},
        {"acc *", 6,
         "column 6: the expression ends early (complete it with a number, metric name, function "
         "or '(')"},
        {"acc * * 2", 7,
         "column 7: expected a number, metric name, function or '(' but found '*' (write an "
         "operand before it)"},
        {"(", 2,
         "column 2: the expression ends early (complete it with a number, metric name, function "
         "or '(')"},
        {" - ", 4,
         "column 4: the expression ends early (complete it with a number, metric name, function "
         "or '(')"},
        {"()", 2,
         "column 2: expected a number, metric name, function or '(' but found ')' (write an "
         "operand before it)"},
        {"min(a,)", 7,
         "column 7: expected a number, metric name, function or '(' but found ')' (write an "
         "operand before it)"},
        {"acc * $x", 7,
         "column 7: unexpected character '$' (metric names use letters, digits, '_' and '.'; "
         "operators are + - * / ^)"},
        {"acc # 2", 5,
         "column 5: unexpected character '#' (metric names use letters, digits, '_' and '.'; "
         "operators are + - * / ^)"},
        {"1e+ 2", 1, "column 1: malformed number '1e+' (write a finite number, e.g. 0.5 or 1e-3)"},
        {"2 * 1e999", 5,
         "column 5: malformed number '1e999' (write a finite number, e.g. 0.5 or 1e-3)"},
        {"acc 1e", 5, "column 5: malformed number '1e' (write a finite number, e.g. 0.5 or 1e-3)"},
        {"1.2.3", 4,
         "column 4: unexpected '.3' after a complete expression (join the parts with an "
         "operator: + - * / ^)"},
        // Columns count characters: 'é' is two bytes and one column.
        {"\xc3\xa9 + 1", 1,
         "column 1: unexpected character '\xc3\xa9' (metric names use letters, digits, '_' and "
         "'.'; operators are + - * / ^)"},
        {"\"x\" + \xc3\xa9", 1,
         "column 1: unexpected character '\"' (metric names use letters, digits, '_' and '.'; "
         "operators are + - * / ^)"},
        {"a + \xc3\xa9\xc3\xa9 + ?", 5,
         "column 5: unexpected character '\xc3\xa9' (metric names use letters, digits, '_' and "
         "'.'; operators are + - * / ^)"},
        {"(\xc3\xa9\xc3\xa9", 2,
         "column 2: unexpected character '\xc3\xa9' (metric names use letters, digits, '_' and "
         "'.'; operators are + - * / ^)"},
        {"x + (\xc3\xa9", 6,
         "column 6: unexpected character '\xc3\xa9' (metric names use letters, digits, '_' and "
         "'.'; operators are + - * / ^)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[256] = "";
        int column = -7;
        cgq_expr_t *e = cgq_expr_parse (cases[i].text, &column, err, sizeof err);
        if (e)
            fail_msg ("'%s' parsed", cases[i].text);
        if (strcmp (err, cases[i].err) != 0 || column != cases[i].column)
            fail_msg ("'%s': got column %d '%s', expected column %d '%s'", cases[i].text, column,
                      err, cases[i].column, cases[i].err);
    }
    // Success resets the column; NULL column and a NULL/0-size err are fine.
    int column = -7;
    cgq_expr_t *e = cgq_expr_parse ("1", &column, NULL, 0);
    assert_non_null (e);
    assert_int_equal (column, 0);
    cgq_expr_destroy (&e);
    assert_null (cgq_expr_parse ("(", NULL, NULL, 0));
    // A short err buffer is truncated, not overrun.
    char tiny[12];
    assert_null (cgq_expr_parse ("foo(1)", NULL, tiny, sizeof tiny));
    assert_string_equal (tiny, "column 1: u");
}

// s_nested writes n of open, then body, then n of close.
static char *
s_nested (int n, const char *open, const char *body, const char *close)
{
    cgq_buf_t b;
    cgq_buf_init (&b);
    for (int i = 0; i < n; i++)
        cgq_buf_puts (&b, open);
    cgq_buf_puts (&b, body);
    for (int i = 0; i < n; i++)
        cgq_buf_puts (&b, close);
    return cgq_buf_take (&b);
}

static void
t_bounds (void **state)
{
    char err[256];
    int column;

    // 64 levels parse; the 65th '(' is the offending character.
    char *ok = s_nested (CGQ_EXPR_MAX_DEPTH, "(", "1", ")");
    cgq_expr_t *e = cgq_expr_parse (ok, &column, err, sizeof err);
    assert_non_null (e);
    cgq_expr_destroy (&e);
    free (ok);
    char *deep = s_nested (CGQ_EXPR_MAX_DEPTH + 1, "(", "1", ")");
    assert_null (cgq_expr_parse (deep, &column, err, sizeof err));
    assert_int_equal (column, 65);
    assert_string_equal (err,
                         "column 65: the expression nests deeper than 64 levels (simplify it)");
    free (deep);

    // Calls, signs and '^' nest too; each is bounded the same way.
    deep = s_nested (CGQ_EXPR_MAX_DEPTH + 1, "abs(", "1", ")");
    assert_null (cgq_expr_parse (deep, &column, err, sizeof err));
    assert_int_equal (column, 4 * 64 + 1);
    free (deep);
    deep = s_nested (100, "-", "1", "");
    assert_null (cgq_expr_parse (deep, &column, err, sizeof err));
    assert_int_equal (column, 65);
    free (deep);
    deep = s_nested (100, "2^", "1", "");
    assert_null (cgq_expr_parse (deep, &column, err, sizeof err));
    assert_int_equal (column, 2 * 64 + 2);
    free (deep);
    ok = s_nested (64, "-", "2", "");
    s_assert_near (s_eval (ok, "{}"), 2, "64 signs");
    free (ok);

    // A wide expression is fine (no depth), and its value stack grows.
    cgq_buf_t b;
    cgq_buf_init (&b);
    cgq_buf_puts (&b, "max(");
    for (int i = 0; i < 500; i++)
        cgq_buf_printf (&b, "%s%d", i ? "," : "", i);
    cgq_buf_puts (&b, ")");
    s_assert_near (s_eval (b.data, "{}"), 499, "max of 500");
    cgq_buf_reset (&b);
    for (int i = 0; i < 1000; i++)
        cgq_buf_printf (&b, "%s1", i ? "+" : "");
    s_assert_near (s_eval (b.data, "{}"), 1000, "1+1+...");
    cgq_buf_fini (&b);

    // 4096 characters parse, 4097 do not.
    char *text = cgq_xmalloc (CGQ_EXPR_MAX_LEN + 2);
    memset (text, ' ', CGQ_EXPR_MAX_LEN + 1);
    text[0] = '1';
    text[CGQ_EXPR_MAX_LEN] = 0;
    e = cgq_expr_parse (text, &column, err, sizeof err);
    assert_non_null (e);
    cgq_expr_destroy (&e);
    text[CGQ_EXPR_MAX_LEN] = ' ';
    text[CGQ_EXPR_MAX_LEN + 1] = 0;
    assert_null (cgq_expr_parse (text, &column, err, sizeof err));
    assert_int_equal (column, 4097);
    assert_string_equal (err, "column 4097: the expression is longer than 4096 characters "
                              "(shorten it)");
    free (text);
}

static void
t_seed_expressions (void **state)
{
    // Seed 001's own spelling, as its script writes it.
    const char *seed1 = "np.power(100, acc)/(np.log10(latency_gpu+1)+1)";
    s_assert_near (s_eval (seed1, "{\"acc\": 0.5, \"latency_gpu\": 9}"), 5, seed1);
    // 0.9 * 100 / 3 = 30
    s_assert_near (s_eval ("(acc*100)/latency_gpu", "{\"acc\": 0.9, \"latency_gpu\": 3}"), 30,
                   "(acc*100)/latency_gpu");
    // 100^0.5 = 10; log10(9 + 1) + 1 = 2; 10 / 2 = 5
    const char *seed2 = "pow(100, acc)/(log10(latency_gpu+1)+1)";
    s_assert_near (s_eval (seed2, "{\"acc\": 0.5, \"latency_gpu\": 9}"), 5, seed2);
    // 100^1 = 100; log10(99 + 1) + 1 = 3; 100 / 3
    s_assert_near (s_eval (seed2, "{\"acc\": 1, \"latency_gpu\": 99}"), 100.0 / 3, seed2);
    // 100^0 = 1; log10(0 + 1) + 1 = 1
    s_assert_near (s_eval (seed2, "{\"latency_gpu\": 0, \"acc\": 0}"), 1, seed2);
    // The same expression evaluates many results.
    char err[256];
    cgq_expr_t *e = cgq_expr_parse ("(acc*100)/latency_gpu", NULL, err, sizeof err);
    for (int i = 1; i <= 10; i++) {
        json_t *m = json_pack ("{s:f, s:i}", "acc", 0.01 * i, "latency_gpu", i);
        double v;
        assert_int_equal (cgq_expr_eval (e, m, &v, err, sizeof err), 0);
        s_assert_near (v, 1, "(acc*100)/latency_gpu");
        json_decref (m);
    }
    cgq_expr_destroy (&e);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (t_precedence), cmocka_unit_test (t_functions),
        cmocka_unit_test (t_names),      cmocka_unit_test (t_metrics),
        cmocka_unit_test (t_not_finite), cmocka_unit_test (t_parse_errors),
        cmocka_unit_test (t_bounds),     cmocka_unit_test (t_seed_expressions),
        cmocka_unit_test (t_python_spellings), cmocka_unit_test (t_where_guards),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
