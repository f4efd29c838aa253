// expr: metric expressions, so an objective can combine what a trial reports,
// e.g. `objective: {expr: "(acc*100)/latency_gpu", mode: max}`. The text is
// compiled once (at spec parse time, where its errors belong) into a small
// postfix program that each result is evaluated against without recursion.
//
// Grammar, loosest first:
//   compare := sum (('<' | '<=' | '>' | '>=' | '==' | '!=') sum)?
//                                          1 when true, 0 when false; no chains
//   sum     := product (('+' | '-') product)*
//   product := unary (('*' | '/') unary)*
//   unary   := ('-' | '+') unary | power
//   power   := primary (('^' | '**') unary)?  right-assoc, tighter than unary minus:
//                                          -2^2 = -4, 2^3^2 = 512, 2^-1 = 0.5
//   primary := number | name | function '(' compare (',' compare)* ')' | '(' compare ')'
// Numbers: 3, 0.5, .5, 5., 1e-3, 2.5E+4. Names: [A-Za-z_][A-Za-z0-9_.]*, the
// metrics of the result. Functions: log (natural), log10, log2, exp, sqrt, abs
// (one argument), pow(a, b) and power(a, b), min(a, ...), max(a, ...) (one or
// more), minimum(a, b), maximum(a, b), clip(x, low, high), where(cond, a, b)
// (a when cond is not 0, else b). Each may also be written np.NAME,
// numpy.NAME or math.NAME, as a Python script spells it. A name is a function
// only when '(' follows it, so a metric may be called "exp".
//
// An error (a missing metric, a division by zero) fails the expression only
// when it reaches the result: the branch where() does not take may hold one,
// so where(lat > 0, acc / lat, 0) guards its division.
#ifndef CGQ_EXPR_H
#define CGQ_EXPR_H

#include <jansson.h>
#include <stddef.h>

// Bounds on what cgq_expr_parse accepts, so a hostile spec costs nothing.
#define CGQ_EXPR_MAX_LEN 4096 // characters of text
#define CGQ_EXPR_MAX_DEPTH 64 // nested parentheses, calls, unary signs and '^'

typedef struct cgq_expr_t cgq_expr_t;

// cgq_expr_parse compiles text. Returns a new expression (caller destroys), or
// NULL with err set to "column N: what is wrong (what to write)" and *column
// (may be NULL) set to N, the 1-based column of the offending character
// (counted in UTF-8 characters; one past the end when the text stops early). A
// caller that prints its own FILE:LINE:COL uses *column and the text of err
// after its first ": ".
cgq_expr_t *cgq_expr_parse (const char *text, int *column, char *err, size_t errlen);
void cgq_expr_destroy (cgq_expr_t **self_p);

// The metric names the expression reads, each once, in order of first use,
// so a spec can check them against what a trial reports. The string is
// borrowed until the expression is destroyed; i must be < nnames.
size_t cgq_expr_nnames (const cgq_expr_t *self);
const char *cgq_expr_name (const cgq_expr_t *self, size_t i);

// cgq_expr_eval evaluates the expression with metrics, a JSON object (the
// trial's result, borrowed). A name is looked up as a key of metrics, and if
// no such key exists and it holds dots, as a path into nested objects ("val.acc"
// reads {"val": {"acc": 0.9}}). Returns 0 with the value in *out, or -1 with
// err set if a metric is missing or not a number, or if the value is not a
// finite number (division by zero, log of a negative, overflow), naming the
// column where it happened.
int cgq_expr_eval (const cgq_expr_t *self, const json_t *metrics, double *out, char *err,
                   size_t errlen);

// The comparison at the top of an expression (cgq_expr_comparison): a
// constraint of a spec is one of LT, LE, GT, GE.
enum {
    CGQ_EXPR_CMP_NONE, // not a comparison at the top (a + b, where(a < b, 1, 0))
    CGQ_EXPR_CMP_LT,
    CGQ_EXPR_CMP_LE,
    CGQ_EXPR_CMP_GT,
    CGQ_EXPR_CMP_GE,
    CGQ_EXPR_CMP_EQ,
    CGQ_EXPR_CMP_NE,
};
int cgq_expr_comparison (const cgq_expr_t *self);

// cgq_expr_eval_sides evaluates the two operands of the comparison at the top
// of self (lhs OP rhs) into *lhs and *rhs, so a caller can say by how much it
// fails. Returns 0, or -1 with err set as cgq_expr_eval sets it, or when self
// is not a comparison.
int cgq_expr_eval_sides (const cgq_expr_t *self, const json_t *metrics, double *lhs, double *rhs,
                         char *err, size_t errlen);

#endif
