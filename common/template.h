// template: the template language of commands, env values, artifact URLs and
// device benchmarks: "{name}" is replaced by the value of param name (or, in
// a later stage, "{STAGE.METRIC}" by an earlier stage's metric), "{job_id}",
// "{trial_id}" and "{spec_dir}" by the built-ins, "{{" and "}}" by literal
// braces. It knows the syntax and how a value is written; what names a spec
// defines is the caller's to say (cgq_template_check's known).
//
// The coordinator renders a trial's templates (dispatch.c), the worker writes
// CGQ_PARAM_<NAME> as a value reads in them (task.c), the device runner
// renders its benchmarks' (measure.c), and the spec parser checks each one.
#ifndef CGQ_TEMPLATE_H
#define CGQ_TEMPLATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// cgq_template_render expands tmpl: "{name}" becomes the value of params'
// key name (a later stage's render passes the params with "STAGE.METRIC" keys
// added), the built-ins job, trial and spec_dir (NULL reads as ""), "{{" and
// "}}" literal braces. Values are written as cgq_template_value_str writes
// them; with shell != 0 each is quoted with cgq_sh_quote. Returns a new
// string (caller frees), or NULL with err set if a placeholder names nothing
// in params or is malformed (an unclosed '{', a stray '}').
char *cgq_template_render (const char *tmpl, const json_t *params, uint64_t job, uint64_t trial,
                           const char *spec_dir, int shell, char *err, size_t errlen);

// cgq_template_value_str writes one value the way cgq_template_render
// substitutes it (before any shell quoting): strings as they are, integers in
// decimal, reals as cgq_fmt_double writes them, true/false/null, lists and
// mappings as compact JSON. NULL reads as null. Returns a new string; caller
// frees.
char *cgq_template_value_str (const json_t *v);

// cgq_template_known_fn says whether the placeholder name (n bytes, not
// NUL-terminated; letters, digits, '_' and single dots) names a value the
// template will be rendered with. arg is cgq_template_check's.
typedef bool (*cgq_template_known_fn) (const char *name, size_t n, void *arg);

// cgq_template_check returns 0 if every placeholder of tmpl is well formed and
// names a built-in or a name that known accepts; else -1 with the offending
// text's byte offset in *at and the text in name (at most namelen - 1 bytes).
// at and name may be NULL.
int cgq_template_check (const char *tmpl, cgq_template_known_fn known, void *arg, size_t *at,
                        char *name, size_t namelen);

// cgq_template_is_builtin is true for the names every template may use:
// job_id, trial_id, spec_dir (n bytes of s).
bool cgq_template_is_builtin (const char *s, size_t n);

#endif
