// template: the template language (template.h). One lexer serves the
// check at parse time and the render at dispatch, so a template that passes
// the check renders, given the values it names.
#include "template.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "util.h"

static const char *s_builtins[] = {"job_id", "trial_id", "spec_dir"};

typedef enum { S_TOK_END, S_TOK_TEXT, S_TOK_NAME, S_TOK_BAD } s_tok_t;

static bool
s_ident (const char *s, size_t n)
{
    if (n == 0 || !((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z') || s[0] == '_'))
        return false;
    for (size_t i = 1; i < n; i++) {
        if (s[i] == '.' && i + 1 < n && s[i - 1] != '.')
            continue; // STAGE.METRIC: an earlier stage's metric
        if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
            return false;
    }
    return true;
}

// s_lex returns the next token of t from *pos: a run of literal text, a
// placeholder name, or the offending text of a malformed placeholder (the
// rest of t for an unterminated '{', the '}' itself for a stray one).
static s_tok_t
s_lex (const char *t, size_t *pos, const char **s, size_t *n)
{
    size_t i = *pos;
    if (!t[i])
        return S_TOK_END;
    if ((t[i] == '{' && t[i + 1] == '{') || (t[i] == '}' && t[i + 1] == '}')) {
        *s = t + i, *n = 1;
        *pos = i + 2;
        return S_TOK_TEXT;
    }
    if (t[i] == '}') {
        *s = t + i, *n = 1;
        return S_TOK_BAD;
    }
    if (t[i] == '{') {
        const char *close = strchr (t + i + 1, '}');
        *s = t + i + 1;
        *n = close ? (size_t)(close - (t + i + 1)) : strlen (t + i + 1);
        if (!close || !s_ident (*s, *n))
            return S_TOK_BAD;
        *pos = (size_t)(close - t) + 1;
        return S_TOK_NAME;
    }
    size_t j = i;
    while (t[j] && t[j] != '{' && t[j] != '}')
        j++;
    *s = t + i, *n = j - i;
    *pos = j;
    return S_TOK_TEXT;
}

bool
cgq_template_is_builtin (const char *s, size_t n)
{
    for (size_t i = 0; i < sizeof s_builtins / sizeof *s_builtins; i++)
        if (strlen (s_builtins[i]) == n && !memcmp (s_builtins[i], s, n))
            return true;
    return false;
}

int
cgq_template_check (const char *tmpl, cgq_template_known_fn known, void *arg, size_t *at,
                    char *name, size_t namelen)
{
    size_t pos = 0, n;
    const char *s;
    s_tok_t tok;
    while ((tok = s_lex (tmpl, &pos, &s, &n)) != S_TOK_END) {
        if (tok == S_TOK_TEXT)
            continue;
        if (tok == S_TOK_NAME && (cgq_template_is_builtin (s, n) || known (s, n, arg)))
            continue;
        if (at)
            *at = (size_t)(s - tmpl);
        if (name && namelen) {
            size_t m = n < namelen - 1 ? n : namelen - 1;
            memcpy (name, s, m);
            name[m] = 0;
        }
        return -1;
    }
    return 0;
}

// s_value writes one substituted value as the trial's program reads it.
static void
s_value (cgq_buf_t *b, const json_t *v)
{
    char num[32];
    if (json_is_string (v))
        cgq_buf_append (b, json_string_value (v), json_string_length (v));
    else if (json_is_integer (v))
        cgq_buf_printf (b, "%lld", (long long)json_integer_value (v));
    else if (json_is_real (v))
        cgq_buf_puts (b, cgq_fmt_double (num, json_real_value (v)));
    else
        cgq_json_append (b, v, false);
}

char *
cgq_template_value_str (const json_t *v)
{
    cgq_buf_t b;
    cgq_buf_init (&b);
    if (v)
        s_value (&b, v);
    else
        cgq_buf_puts (&b, "null");
    return cgq_buf_take (&b);
}

char *
cgq_template_render (const char *tmpl, const json_t *params, uint64_t job, uint64_t trial,
                     const char *spec_dir, int shell, char *err, size_t errlen)
{
    cgq_buf_t out, val;
    cgq_buf_init (&out);
    cgq_buf_init (&val);
    size_t pos = 0, n;
    const char *s;
    s_tok_t tok;
    while ((tok = s_lex (tmpl, &pos, &s, &n)) != S_TOK_END) {
        if (tok == S_TOK_TEXT) {
            cgq_buf_append (&out, s, n);
            continue;
        }
        if (tok == S_TOK_BAD) {
            if (err && errlen) {
                if (*s == '}')
                    snprintf (err, errlen,
                              "stray '}' at byte %zu of '%s' (write }} for a literal brace)",
                              (size_t)(s - tmpl), tmpl);
                else
                    snprintf (err, errlen,
                              "bad placeholder '{%.*s' at byte %zu of '%s' (write "
                              "{name} with a param name, or {{ for a literal brace)",
                              (int)n, s, (size_t)(s - tmpl - 1), tmpl);
            }
            goto fail;
        }
        cgq_buf_reset (&val);
        char key[256];
        const json_t *v = NULL;
        if (n < sizeof key) {
            memcpy (key, s, n);
            key[n] = 0;
            v = params ? json_object_get (params, key) : NULL;
        }
        if (n == 6 && !memcmp (s, "job_id", 6))
            cgq_buf_printf (&val, "%llu", (unsigned long long)job);
        else if (n == 8 && !memcmp (s, "trial_id", 8))
            cgq_buf_printf (&val, "%llu", (unsigned long long)trial);
        else if (n == 8 && !memcmp (s, "spec_dir", 8))
            cgq_buf_puts (&val, spec_dir ? spec_dir : "");
        else if (v)
            s_value (&val, v);
        else {
            if (err && errlen)
                snprintf (
                    err, errlen,
                    "unknown placeholder '{%.*s}' at byte %zu of '%s' (params "
                    "and built-ins job_id, trial_id, spec_dir only; write {{ for a literal brace)",
                    (int)n, s, (size_t)(s - tmpl - 1), tmpl);
            goto fail;
        }
        if (shell) {
            char *q = cgq_sh_quote (val.data);
            cgq_buf_puts (&out, q);
            free (q);
        }
        else
            cgq_buf_append (&out, val.data, val.len);
    }
    cgq_buf_fini (&val);
    return cgq_buf_take (&out);
fail:
    cgq_buf_fini (&val);
    cgq_buf_fini (&out);
    return NULL;
}
