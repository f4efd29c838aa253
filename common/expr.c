// expr: a recursive-descent parser whose depth is bounded by CGQ_EXPR_MAX_DEPTH
// emits postfix code; evaluation runs that code on a value stack, so nothing
// recursive runs per trial result. Every node keeps its column, so a runtime
// error (a division by zero) points at the operator that produced it.
#include "expr.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

typedef enum {
    S_NUM,  // push value
    S_NAME, // push metric names[name]
    S_NEG,
    S_ADD,
    S_SUB,
    S_MUL,
    S_DIV,
    S_POW, // '^', '**', pow() and power()
    S_LT,  // comparisons: 1 when true, 0 when false
    S_LE,
    S_GT,
    S_GE,
    S_EQ,
    S_NE,
    S_FUNC,
} s_op_t;

typedef enum {
    S_LOG,
    S_LOG10,
    S_LOG2,
    S_EXP,
    S_SQRT,
    S_ABS,
    S_FPOW,
    S_MIN,
    S_MAX,
    S_CLIP,
    S_WHERE,
} s_fn_t;

// The functions, by the names a spec may call them. NumPy's spellings of the
// same (power, minimum, maximum) are here too, and so is any of these written
// np.NAME, numpy.NAME or math.NAME (s_call strips the prefix), so that an
// objective copied from a Python script (seed 001's
// np.power(100, acc)/(np.log10(latency_gpu+1)+1)) reads as written.
static const struct {
    const char *name;
    s_fn_t fn;
    int min_args, max_args; // max_args 0: no limit
    const char *usage;      // what to write, for arity errors
} s_functions[] = {
    {"log", S_LOG, 1, 1, "log(x), the natural logarithm"},
    {"log10", S_LOG10, 1, 1, "log10(x)"},
    {"log2", S_LOG2, 1, 1, "log2(x)"},
    {"exp", S_EXP, 1, 1, "exp(x)"},
    {"pow", S_FPOW, 2, 2, "pow(base, exponent)"},
    {"power", S_FPOW, 2, 2, "power(base, exponent)"},
    {"sqrt", S_SQRT, 1, 1, "sqrt(x)"},
    {"abs", S_ABS, 1, 1, "abs(x)"},
    {"min", S_MIN, 1, 0, "min(a, b, ...)"},
    {"max", S_MAX, 1, 0, "max(a, b, ...)"},
    {"minimum", S_MIN, 2, 2, "minimum(a, b)"},
    {"maximum", S_MAX, 2, 2, "maximum(a, b)"},
    {"clip", S_CLIP, 3, 3, "clip(x, low, high)"},
    {"where", S_WHERE, 3, 3, "where(condition, if_true, if_false)"},
};
#define S_NFUNCTIONS (sizeof s_functions / sizeof s_functions[0])
#define S_FUNCTION_LIST                                                                           \
    "log, log10, log2, exp, pow, power, sqrt, abs, min, max, minimum, maximum, clip, where; "     \
    "also as np.NAME, numpy.NAME or math.NAME"
static const char *const s_prefixes[] = {"np.", "numpy.", "math."};

typedef struct {
    s_op_t op;
    size_t fn;    // S_FUNC: index into s_functions
    int nargs;    // S_FUNC
    size_t name;  // S_NAME: index into names
    double value; // S_NUM
    int column;   // of the token, for runtime errors
} s_node_t;

struct cgq_expr_t {
    s_node_t *code; // postfix
    size_t ncode;
    size_t capcode;
    char **names; // deduplicated, in order of first use
    size_t nnames;
    size_t max_stack; // the deepest the value stack gets, known at compile time
};

static void s_errf (char *err, size_t errlen, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

static void
s_errf (char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (err, errlen, fmt, ap);
    va_end (ap);
}

// --- lexer -------------------------------------------------------------------

typedef enum {
    T_END,
    T_NUM,
    T_NAME,
    T_OP, // + - * / ^ ** < <= > >= == != (s_tok_t.op)
    T_LP,
    T_RP,
    T_COMMA,
    T_BAD,    // a character that starts no token
    T_BADNUM, // digits with a dangling exponent, or out of range
} s_tok_type_t;

typedef struct {
    s_tok_type_t type;
    size_t start, end; // byte offsets into the text
    double value;      // T_NUM
    s_op_t op;         // T_OP
} s_tok_t;

typedef struct {
    const char *text;
    size_t len;
    s_tok_t tok; // the current token, not yet consumed
    int depth;
    size_t stack; // values on the stack after the code emitted so far
    cgq_expr_t *expr;
    bool failed;
    char *err;
    size_t errlen;
    int column;
} s_parser_t;

static bool
s_is_name_start (char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

static bool
s_is_digit (char c)
{
    return c >= '0' && c <= '9';
}

static bool
s_is_name_char (char c)
{
    return s_is_name_start (c) || s_is_digit (c) || c == '.';
}

static bool
s_is_space (char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

// s_column counts characters, not bytes, so that a column matches what an
// editor shows for a line holding a non-ASCII character.
static int
s_column (const char *text, size_t off)
{
    int col = 1;
    for (size_t i = 0; i < off; i++)
        if (((unsigned char) text[i] & 0xC0) != 0x80)
            col++;
    return col;
}

// s_scan_number reads the number at text[at], written by hand rather than with
// strtod, which would also take "inf", "nan" and hex floats.
static void
s_scan_number (const char *text, size_t at, s_tok_t *tok)
{
    size_t i = at;
    while (s_is_digit (text[i]))
        i++;
    if (text[i] == '.') {
        i++;
        while (s_is_digit (text[i]))
            i++;
    }
    tok->type = T_NUM;
    if (text[i] == 'e' || text[i] == 'E') {
        size_t j = i + 1;
        if (text[j] == '+' || text[j] == '-')
            j++;
        if (!s_is_digit (text[j])) {
            tok->type = T_BADNUM;
            i = j;
        }
        else {
            while (s_is_digit (text[j]))
                j++;
            i = j;
        }
    }
    tok->start = at;
    tok->end = i;
    if (tok->type == T_NUM) {
        char buf[64];
        size_t n = i - at;
        if (n >= sizeof buf) { // more digits than a double holds: strtod on a copy
            char *copy = cgq_xstrndup (text + at, n);
            tok->value = strtod (copy, NULL);
            free (copy);
        }
        else {
            memcpy (buf, text + at, n);
            buf[n] = 0;
            tok->value = strtod (buf, NULL);
        }
        if (!isfinite (tok->value))
            tok->type = T_BADNUM;
    }
}

// s_lex_op reads the operator at t, if one starts there: sets tok's type, op
// and, for the two-character ones, end (relative to start).
static bool
s_lex_op (const char *t, s_tok_t *tok)
{
    static const struct {
        const char *text;
        s_op_t op;
    } ops[] = {{"**", S_POW}, {"<=", S_LE}, {">=", S_GE}, {"==", S_EQ}, {"!=", S_NE},
               {"+", S_ADD},  {"-", S_SUB}, {"*", S_MUL}, {"/", S_DIV}, {"^", S_POW},
               {"<", S_LT},   {">", S_GT}};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        size_t n = strlen (ops[i].text);
        if (strncmp (t, ops[i].text, n) == 0) {
            tok->type = T_OP;
            tok->op = ops[i].op;
            tok->end = tok->start + n;
            return true;
        }
    }
    return false;
}

static void
s_lex (s_parser_t *p, size_t at)
{
    const char *t = p->text;
    while (at < p->len && s_is_space (t[at]))
        at++;
    s_tok_t *tok = &p->tok;
    tok->start = at;
    tok->end = at + 1;
    if (at >= p->len) {
        tok->type = T_END;
        tok->end = at;
    }
    else if (s_is_digit (t[at]) || (t[at] == '.' && s_is_digit (t[at + 1])))
        s_scan_number (t, at, tok);
    else if (s_is_name_start (t[at])) {
        size_t i = at;
        while (s_is_name_char (t[i]))
            i++;
        tok->type = T_NAME;
        tok->end = i;
    }
    else if (s_lex_op (t + at, tok)) {
        // type, op and end are set
    }
    else if (t[at] == '(')
        tok->type = T_LP;
    else if (t[at] == ')')
        tok->type = T_RP;
    else if (t[at] == ',')
        tok->type = T_COMMA;
    else {
        tok->type = T_BAD;
        // Keep a multi-byte character whole, for the message.
        while (tok->end < p->len && ((unsigned char) t[tok->end] & 0xC0) == 0x80)
            tok->end++;
    }
}

static void
s_advance (s_parser_t *p)
{
    s_lex (p, p->tok.end);
}

static bool
s_is_op (const s_parser_t *p, s_op_t op)
{
    return p->tok.type == T_OP && p->tok.op == op;
}

static bool
s_is_comparison (const s_parser_t *p)
{
    return p->tok.type == T_OP && p->tok.op >= S_LT && p->tok.op <= S_NE;
}

// --- errors while parsing ----------------------------------------------------

static bool s_fail_at (s_parser_t *p, size_t at, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

// s_fail_at records the first error only: later ones are consequences.
static bool
s_fail_at (s_parser_t *p, size_t at, const char *fmt, ...)
{
    if (p->failed)
        return false;
    p->failed = true;
    p->column = s_column (p->text, at);
    char msg[256];
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (msg, sizeof msg, fmt, ap);
    va_end (ap);
    s_errf (p->err, p->errlen, "column %d: %s", p->column, msg);
    return false;
}

// s_tok_text copies the current token for a message, cut at 24 bytes.
static const char *
s_tok_text (const s_parser_t *p, char *buf, size_t size)
{
    size_t n = p->tok.end - p->tok.start;
    if (n > 24) {
        snprintf (buf, size, "%.24s...", p->text + p->tok.start);
        return buf;
    }
    snprintf (buf, size, "%.*s", (int) n, p->text + p->tok.start);
    return buf;
}

// s_fail_operand reports what stands where a value was expected.
static bool
s_fail_operand (s_parser_t *p)
{
    char tb[32];
    switch (p->tok.type) {
    case T_END:
        if (strspn (p->text, " \t\n\r") == p->len)
            return s_fail_at (p, 0,
                              "empty expression (write a metric name, a number or a formula, "
                              "e.g. acc or (acc*100)/latency_gpu)");
        return s_fail_at (p, p->tok.start,
                          "the expression ends early (complete it with a number, metric name, "
                          "function or '(')");
    case T_BAD:
        return s_fail_at (p, p->tok.start,
                          "unexpected character '%s' (metric names use letters, digits, '_' and "
                          "'.'; operators are + - * / ^)",
                          s_tok_text (p, tb, sizeof tb));
    case T_BADNUM:
        return s_fail_at (p, p->tok.start,
                          "malformed number '%s' (write a finite number, e.g. 0.5 or 1e-3)",
                          s_tok_text (p, tb, sizeof tb));
    default:
        return s_fail_at (p, p->tok.start,
                          "expected a number, metric name, function or '(' but found '%s' "
                          "(write an operand before it)",
                          s_tok_text (p, tb, sizeof tb));
    }
}

// --- code generation ---------------------------------------------------------

static s_node_t *
s_emit (s_parser_t *p, s_op_t op, size_t at)
{
    cgq_expr_t *e = p->expr;
    if (e->ncode == e->capcode) {
        e->capcode = e->capcode ? 2 * e->capcode : 16;
        e->code = cgq_xrealloc (e->code, e->capcode * sizeof *e->code);
    }
    s_node_t *n = &e->code[e->ncode++];
    memset (n, 0, sizeof *n);
    n->op = op;
    n->column = s_column (p->text, at);
    // Track the stack depth the code will reach, so eval sizes its stack once.
    if (op == S_NUM || op == S_NAME)
        p->stack++;
    else if (op != S_NEG && op != S_FUNC)
        p->stack--;
    if (p->stack > e->max_stack)
        e->max_stack = p->stack;
    return n;
}

static size_t
s_intern (cgq_expr_t *e, const char *s, size_t n)
{
    for (size_t i = 0; i < e->nnames; i++)
        if (strlen (e->names[i]) == n && memcmp (e->names[i], s, n) == 0)
            return i;
    e->names = cgq_xrealloc (e->names, (e->nnames + 1) * sizeof *e->names);
    e->names[e->nnames] = cgq_xstrndup (s, n);
    return e->nnames++;
}

// --- grammar -----------------------------------------------------------------

// s_enter counts one level of nesting at a '(', a call, a sign or a '^': every
// recursive path of the grammar passes one of them, so the bound on depth is
// also the bound on the parser's recursion. (Once an error is recorded parsing
// stops, so depth need not be unwound on failure.)
static bool
s_enter (s_parser_t *p, size_t at)
{
    if (p->depth >= CGQ_EXPR_MAX_DEPTH)
        return s_fail_at (p, at, "the expression nests deeper than %d levels (simplify it)",
                          CGQ_EXPR_MAX_DEPTH);
    p->depth++;
    return true;
}

static bool s_compare (s_parser_t *p);
static bool s_unary (s_parser_t *p);

// s_find_function looks name up, without an np., numpy. or math. prefix.
static size_t
s_find_function (const char *name, size_t len)
{
    for (size_t k = 0; k < sizeof s_prefixes / sizeof s_prefixes[0]; k++) {
        size_t n = strlen (s_prefixes[k]);
        if (len > n && memcmp (name, s_prefixes[k], n) == 0) {
            name += n;
            len -= n;
            break;
        }
    }
    size_t fn = 0;
    while (fn < S_NFUNCTIONS &&
           !(strlen (s_functions[fn].name) == len && memcmp (s_functions[fn].name, name, len) == 0))
        fn++;
    return fn;
}

static bool
s_call (s_parser_t *p)
{
    size_t name_at = p->tok.start, name_len = p->tok.end - p->tok.start;
    size_t fn = s_find_function (p->text + name_at, name_len);
    if (fn == S_NFUNCTIONS)
        return s_fail_at (p, name_at, "unknown function '%.*s' (expected one of: " S_FUNCTION_LIST ")",
                          (int) (name_len > 32 ? 32 : name_len), p->text + name_at);
    const char *fname = s_functions[fn].name;
    if (!s_enter (p, name_at))
        return false;
    s_advance (p); // the name; '(' is next
    size_t lp_at = p->tok.start;
    s_advance (p);
    int nargs = 0;
    for (;;) {
        if (p->tok.type == T_RP && nargs == 0)
            return s_fail_at (p, p->tok.start, "%s needs an argument (write %s)", fname,
                              s_functions[fn].usage);
        if (!s_compare (p))
            return false;
        nargs++;
        if (p->tok.type == T_RP)
            break;
        if (p->tok.type == T_COMMA) {
            if (s_functions[fn].max_args && nargs == s_functions[fn].max_args)
                return s_fail_at (p, p->tok.start, "%s takes %d argument%s (write %s)", fname,
                                  s_functions[fn].max_args,
                                  s_functions[fn].max_args == 1 ? "" : "s", s_functions[fn].usage);
            s_advance (p);
            continue;
        }
        if (p->tok.type == T_END)
            return s_fail_at (p, p->tok.start, "missing ')' to close '%s(' at column %d (add ')')",
                              fname, s_column (p->text, lp_at));
        char tb[32];
        return s_fail_at (p, p->tok.start,
                          "expected ',' or ')' in %s(...) but found '%s' (separate the arguments "
                          "with ',')",
                          fname, s_tok_text (p, tb, sizeof tb));
    }
    p->depth--;
    if (nargs < s_functions[fn].min_args)
        return s_fail_at (p, p->tok.start, "%s takes %d arguments, got %d (write %s)", fname,
                          s_functions[fn].min_args, nargs, s_functions[fn].usage);
    s_node_t *n = s_emit (p, S_FUNC, name_at);
    n->fn = fn;
    n->nargs = nargs;
    p->stack -= (size_t) nargs - 1;
    s_advance (p); // ')'
    return true;
}

static bool
s_primary (s_parser_t *p)
{
    switch (p->tok.type) {
    case T_NUM: {
        s_node_t *n = s_emit (p, S_NUM, p->tok.start);
        n->value = p->tok.value;
        s_advance (p);
        return true;
    }
    case T_NAME: {
        size_t after = p->tok.end;
        while (after < p->len && s_is_space (p->text[after]))
            after++;
        if (after < p->len && p->text[after] == '(')
            return s_call (p);
        size_t name = s_intern (p->expr, p->text + p->tok.start, p->tok.end - p->tok.start);
        s_node_t *n = s_emit (p, S_NAME, p->tok.start);
        n->name = name;
        s_advance (p);
        return true;
    }
    case T_LP: {
        size_t lp_at = p->tok.start;
        if (!s_enter (p, lp_at))
            return false;
        s_advance (p);
        if (!s_compare (p))
            return false;
        p->depth--;
        if (p->tok.type == T_RP) {
            s_advance (p);
            return true;
        }
        if (p->tok.type == T_END)
            return s_fail_at (p, p->tok.start,
                              "missing ')' to close the '(' at column %d (add ')')",
                              s_column (p->text, lp_at));
        char tb[32];
        return s_fail_at (p, p->tok.start,
                          "expected an operator or the ')' closing the '(' at column %d but found "
                          "'%s' (join the parts with an operator: + - * / ^)",
                          s_column (p->text, lp_at), s_tok_text (p, tb, sizeof tb));
    }
    default: return s_fail_operand (p);
    }
}

static bool
s_power (s_parser_t *p)
{
    if (!s_primary (p))
        return false;
    if (!s_is_op (p, S_POW))
        return true;
    size_t at = p->tok.start;
    if (!s_enter (p, at))
        return false;
    s_advance (p);
    // The exponent is a unary so that 2^-1 reads; recursing makes '^'
    // right-associative.
    bool ok = s_unary (p);
    if (ok)
        s_emit (p, S_POW, at);
    p->depth--;
    return ok;
}

static bool
s_unary (s_parser_t *p)
{
    if (!(s_is_op (p, S_SUB) || s_is_op (p, S_ADD)))
        return s_power (p);
    bool neg = s_is_op (p, S_SUB);
    size_t at = p->tok.start;
    if (!s_enter (p, at))
        return false;
    s_advance (p);
    bool ok = s_unary (p);
    if (ok && neg)
        s_emit (p, S_NEG, at);
    p->depth--;
    return ok;
}

static bool
s_product (s_parser_t *p)
{
    if (!s_unary (p))
        return false;
    while (s_is_op (p, S_MUL) || s_is_op (p, S_DIV)) {
        s_op_t op = s_is_op (p, S_MUL) ? S_MUL : S_DIV;
        size_t at = p->tok.start;
        s_advance (p);
        if (!s_unary (p))
            return false;
        s_emit (p, op, at);
    }
    return true;
}

static bool
s_sum (s_parser_t *p)
{
    if (!s_product (p))
        return false;
    while (s_is_op (p, S_ADD) || s_is_op (p, S_SUB)) {
        s_op_t op = s_is_op (p, S_ADD) ? S_ADD : S_SUB;
        size_t at = p->tok.start;
        s_advance (p);
        if (!s_product (p))
            return false;
        s_emit (p, op, at);
    }
    return true;
}

// s_compare is the loosest level: one comparison of two sums at most, so
// that where(latency < 10, acc, 0) reads. Comparisons do not chain: a < b < c
// means something else in Python than in C, so it is refused.
static bool
s_compare (s_parser_t *p)
{
    if (!s_sum (p))
        return false;
    if (!s_is_comparison (p))
        return true;
    s_op_t op = p->tok.op;
    size_t at = p->tok.start;
    s_advance (p);
    if (!s_sum (p))
        return false;
    s_emit (p, op, at);
    if (s_is_comparison (p))
        return s_fail_at (p, p->tok.start,
                          "comparisons do not chain (write one comparison, e.g. a < b, and "
                          "combine two with *: (a < b) * (b < c))");
    return true;
}

cgq_expr_t *
cgq_expr_parse (const char *text, int *column, char *err, size_t errlen)
{
    if (column)
        *column = 0;
    size_t len = strnlen (text, CGQ_EXPR_MAX_LEN + 1);
    if (len > CGQ_EXPR_MAX_LEN) {
        int col = s_column (text, CGQ_EXPR_MAX_LEN);
        if (column)
            *column = col;
        s_errf (err, errlen, "column %d: the expression is longer than %d characters (shorten it)",
                col, CGQ_EXPR_MAX_LEN);
        return NULL;
    }
    s_parser_t p = {.text = text, .len = len, .err = err, .errlen = errlen};
    p.expr = cgq_xcalloc (1, sizeof *p.expr);
    s_lex (&p, 0);
    if (s_compare (&p) && p.tok.type != T_END) {
        char tb[32];
        if (p.tok.type == T_RP)
            s_fail_at (&p, p.tok.start, "unmatched ')' (remove it or add a '(' before it)");
        else if (p.tok.type == T_BAD || p.tok.type == T_BADNUM)
            s_fail_operand (&p);
        else
            s_fail_at (&p, p.tok.start,
                       "unexpected '%s' after a complete expression (join the parts with an "
                       "operator: + - * / ^)",
                       s_tok_text (&p, tb, sizeof tb));
    }
    if (p.failed) {
        if (column)
            *column = p.column;
        cgq_expr_destroy (&p.expr);
        return NULL;
    }
    return p.expr;
}

void
cgq_expr_destroy (cgq_expr_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cgq_expr_t *self = *self_p;
    for (size_t i = 0; i < self->nnames; i++)
        free (self->names[i]);
    free (self->names);
    free (self->code);
    free (self);
    *self_p = NULL;
}

size_t
cgq_expr_nnames (const cgq_expr_t *self)
{
    return self->nnames;
}

const char *
cgq_expr_name (const cgq_expr_t *self, size_t i)
{
    return i < self->nnames ? self->names[i] : NULL;
}

// --- evaluation --------------------------------------------------------------

// s_lookup finds name as a key, else as a dotted path through nested objects.
static const json_t *
s_lookup (const json_t *metrics, const char *name)
{
    const json_t *v = json_object_get (metrics, name);
    if (v || !strchr (name, '.'))
        return v;
    const json_t *at = metrics;
    const char *s = name;
    for (;;) {
        const char *dot = strchr (s, '.');
        size_t n = dot ? (size_t) (dot - s) : strlen (s);
        if (!json_is_object (at))
            return NULL;
        at = json_object_getn (at, s, n);
        if (!at || !dot)
            return at;
        s = dot + 1;
    }
}

static const char *
s_type_name (const json_t *v)
{
    switch (json_typeof (v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "a list";
    case JSON_STRING: return "a string";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    default: return "a number";
    }
}

static int
s_metric (const json_t *metrics, const char *name, double *out, char *err, size_t errlen)
{
    const json_t *v = s_lookup (metrics, name);
    if (json_is_number (v)) {
        *out = json_number_value (v);
        return 0;
    }
    if (v) {
        s_errf (err, errlen, "metric '%s' is %s, not a number (report it as a JSON number)", name,
                s_type_name (v));
        return -1;
    }
    // Name the metrics that are there: the usual cause is a typo or a trial
    // that reports under another name. The list is cut so that the message
    // fits a 256-byte err.
    cgq_buf_t keys;
    cgq_buf_init (&keys);
    const char *key;
    const json_t *value;
    json_object_foreach ((json_t *) metrics, key, value)
    {
        if (keys.len > 120) {
            cgq_buf_puts (&keys, ", ...");
            break;
        }
        if (keys.len)
            cgq_buf_puts (&keys, ", ");
        cgq_buf_puts (&keys, key);
    }
    s_errf (err, errlen, "metric '%s' is missing from the result (metrics: %s)", name,
            keys.len ? keys.data : "none");
    cgq_buf_fini (&keys);
    return -1;
}

// s_not_finite explains why node produced a non-finite value from the finite
// operands args[0..nargs), which is all eval ever feeds it.
static void
s_not_finite (const s_node_t *node, const double *args, int nargs, double r, char *err,
              size_t errlen)
{
    char a[32], b[32];
    cgq_fmt_double (a, args[0]);
    if (nargs > 1)
        cgq_fmt_double (b, args[1]);
    int col = node->column;
    s_fn_t fn = node->op == S_FUNC ? s_functions[node->fn].fn : S_LOG;
    bool is_pow = node->op == S_POW || (node->op == S_FUNC && fn == S_FPOW);
    if (node->op == S_DIV && args[1] == 0)
        s_errf (err, errlen,
                "division by zero at column %d (%s / 0; guard the divisor, e.g. with "
                "max(x, 1e-9))",
                col, a);
    else if (is_pow && args[0] == 0 && args[1] < 0)
        s_errf (err, errlen,
                "0 to the negative power %s at column %d is a division by zero (guard the base, "
                "e.g. with max(x, 1e-9))",
                b, col);
    else if (is_pow && args[0] < 0 && isnan (r))
        s_errf (err, errlen,
                "negative base %s to the fractional power %s at column %d is not a real number "
                "(use abs() or an integer exponent)",
                a, b, col);
    else if (node->op == S_FUNC && (fn == S_LOG || fn == S_LOG10 || fn == S_LOG2) && args[0] <= 0)
        s_errf (err, errlen, "%s of %s at column %d is not finite (it needs a value > 0)",
                s_functions[node->fn].name, a, col);
    else if (node->op == S_FUNC && fn == S_SQRT && args[0] < 0)
        s_errf (err, errlen,
                "sqrt of the negative value %s at column %d is not a real number (use abs() or "
                "max(x, 0))",
                a, col);
    else
        s_errf (err, errlen,
                "the value of %s at column %d overflows (rescale it, e.g. divide by a constant or "
                "take a log)",
                node->op == S_FUNC ? s_functions[node->fn].name : "the operator", col);
}

// s_apply computes function fn of a[0..nargs).
static double
s_apply (s_fn_t fn, const double *a, int nargs)
{
    double r = a[0];
    switch (fn) {
    case S_LOG: return log (a[0]);
    case S_LOG10: return log10 (a[0]);
    case S_LOG2: return log2 (a[0]);
    case S_EXP: return exp (a[0]);
    case S_SQRT: return sqrt (a[0]);
    case S_ABS: return fabs (a[0]);
    case S_FPOW: return pow (a[0], a[1]);
    case S_MIN:
    case S_MAX:
        for (int k = 1; k < nargs; k++)
            r = fn == S_MIN ? fmin (r, a[k]) : fmax (r, a[k]);
        return r;
    case S_CLIP: return fmin (fmax (a[0], a[1]), a[2]); // NumPy's: high wins over low
    case S_WHERE: return a[0] != 0 ? a[1] : a[2];
    }
    return r;
}

// s_binary computes a op b for the operators.
static double
s_binary (s_op_t op, double a, double b)
{
    switch (op) {
    case S_ADD: return a + b;
    case S_SUB: return a - b;
    case S_MUL: return a * b;
    case S_DIV: return a / b;
    case S_POW: return pow (a, b);
    case S_LT: return a < b;
    case S_LE: return a <= b;
    case S_GT: return a > b;
    case S_GE: return a >= b;
    case S_EQ: return a == b;
    case S_NE: return a != b;
    default: return NAN;
    }
}

// Evaluation carries, beside each value on the stack, the first error that
// went into it (a missing metric, a division by zero), as an index into the
// errors met so far, or -1. An error fails the expression only if it reaches
// the result, so that where(lat > 0, acc / lat, 0) guards its division; every
// operator and function but where passes the first error of its operands on,
// which is the one evaluation met first, so the message is the same as if
// evaluation had stopped there.
typedef struct {
    double *v;
    int *err; // per slot: index into msgs, or -1
    char **msgs;
    int nmsgs;
} s_eval_t;

static int
s_record (s_eval_t *ev, const char *msg)
{
    ev->msgs = cgq_xrealloc (ev->msgs, (size_t) (ev->nmsgs + 1) * sizeof *ev->msgs);
    ev->msgs[ev->nmsgs] = cgq_xstrdup (msg);
    return ev->nmsgs++;
}

// s_first_error is the first error among slots [from, from + n), or -1.
static int
s_first_error (const s_eval_t *ev, size_t from, int n)
{
    int e = -1;
    for (int k = 0; k < n; k++)
        if (ev->err[from + (size_t) k] >= 0 && (e < 0 || ev->err[from + (size_t) k] < e))
            e = ev->err[from + (size_t) k];
    return e;
}

// s_run runs the first ncode instructions of self's program and leaves nout
// values on the stack (1 for the whole program; 2 for the operands of a
// comparison at the top), written into out. Returns 0, or -1 with err set to
// the first error that reaches one of them.
static int
s_run (const cgq_expr_t *self, size_t ncode, int nout, const json_t *metrics, double *out,
       char *err, size_t errlen)
{
    if (!json_is_object (metrics)) {
        s_errf (err, errlen, "the result is not a JSON object of metrics");
        return -1;
    }
    double small_v[32];
    int small_err[32];
    bool heap = self->max_stack > 32;
    s_eval_t ev = {
        .v = heap ? cgq_xmalloc (self->max_stack * sizeof *ev.v) : small_v,
        .err = heap ? cgq_xmalloc (self->max_stack * sizeof *ev.err) : small_err,
    };
    size_t sp = 0;
    char msg[256];
    for (size_t i = 0; i < ncode; i++) {
        const s_node_t *n = &self->code[i];
        double r = 0;
        int nargs = 2; // operands popped
        switch (n->op) {
        case S_NUM:
            ev.v[sp] = n->value;
            ev.err[sp++] = -1;
            continue;
        case S_NAME:
            ev.err[sp] = -1;
            if (s_metric (metrics, self->names[n->name], &ev.v[sp], msg, sizeof msg) < 0) {
                ev.v[sp] = 0;
                ev.err[sp] = s_record (&ev, msg);
            }
            sp++;
            continue;
        case S_NEG: ev.v[sp - 1] = -ev.v[sp - 1]; continue;
        case S_FUNC:
            nargs = n->nargs;
            r = s_apply (s_functions[n->fn].fn, &ev.v[sp - (size_t) nargs], nargs);
            break;
        default: r = s_binary (n->op, ev.v[sp - 2], ev.v[sp - 1]); break;
        }
        size_t base = sp - (size_t) nargs;
        int e;
        if (n->op == S_FUNC && s_functions[n->fn].fn == S_WHERE)
            e = ev.err[base] >= 0 ? ev.err[base] : ev.err[base + (ev.v[base] != 0 ? 1 : 2)];
        else
            e = s_first_error (&ev, base, nargs);
        if (e < 0 && !isfinite (r)) {
            s_not_finite (n, &ev.v[base], nargs, r, msg, sizeof msg);
            e = s_record (&ev, msg);
            r = 0; // what follows computes on; the error goes with it
        }
        sp = base;
        ev.v[sp] = r;
        ev.err[sp++] = e;
    }
    int rc = 0;
    int e = s_first_error (&ev, 0, nout);
    if (e >= 0) {
        s_errf (err, errlen, "%s", ev.msgs[e]);
        rc = -1;
    }
    else
        memcpy (out, ev.v, (size_t) nout * sizeof *out);
    for (int k = 0; k < ev.nmsgs; k++)
        free (ev.msgs[k]);
    free (ev.msgs);
    if (heap) {
        free (ev.v);
        free (ev.err);
    }
    return rc;
}

int
cgq_expr_eval (const cgq_expr_t *self, const json_t *metrics, double *out, char *err, size_t errlen)
{
    return s_run (self, self->ncode, 1, metrics, out, err, errlen);
}

int
cgq_expr_comparison (const cgq_expr_t *self)
{
    if (!self || !self->ncode)
        return CGQ_EXPR_CMP_NONE;
    switch (self->code[self->ncode - 1].op) {
    case S_LT: return CGQ_EXPR_CMP_LT;
    case S_LE: return CGQ_EXPR_CMP_LE;
    case S_GT: return CGQ_EXPR_CMP_GT;
    case S_GE: return CGQ_EXPR_CMP_GE;
    case S_EQ: return CGQ_EXPR_CMP_EQ;
    case S_NE: return CGQ_EXPR_CMP_NE;
    default: return CGQ_EXPR_CMP_NONE;
    }
}

int
cgq_expr_eval_sides (const cgq_expr_t *self, const json_t *metrics, double *lhs, double *rhs,
                     char *err, size_t errlen)
{
    if (cgq_expr_comparison (self) == CGQ_EXPR_CMP_NONE) {
        s_errf (err, errlen, "the expression is not a comparison");
        return -1;
    }
    double v[2];
    if (s_run (self, self->ncode - 1, 2, metrics, v, err, errlen) < 0)
        return -1;
    *lhs = v[0];
    *rhs = v[1];
    return 0;
}
