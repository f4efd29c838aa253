// space: the points of a spec's search space, generated lazily. Trial i's
// params are a pure function of (spec, seed, i): nothing is materialised, a
// coordinator that restarts regenerates the same point, and a grid of 2^20
// points costs no memory.
//
// Order: grid params (and, for algorithm: grid, choice params) form a mixed-
// radix counter, the first written param varying slowest. Trial i uses grid
// point (i mod G) and sample (i div G); sampled params draw from a generator
// seeded by (seed, i), in the order written.
#ifndef CGQ_SPACE_H
#define CGQ_SPACE_H

#include <jansson.h>
#include <stdint.h>

#include "spec.h"

// cgq_space_count sets *count to samples x (size of the grid). Returns 0, or
// -1 if that overflows 2^63 (the spec parser rejects such specs).
int cgq_space_count (const cgq_spec_t *spec, uint64_t *count);

// cgq_space_point returns trial index's params as a new JSON object, keys in the
// order written (caller decrefs). Floats are rounded to 15 significant digits
// (cgq_round15), randint values are JSON integers, choices keep their JSON type.
json_t *cgq_space_point (const cgq_spec_t *spec, uint64_t index);

// cgq_space_render expands a template: "{name}" becomes the value of param
// name, "{job_id}", "{trial_id}" and "{spec_dir}" the built-ins, "{{" and "}}"
// literal braces. Strings appear as they are, numbers as cgq_fmt_double writes
// them, true/false, lists and mappings as compact JSON. With shell != 0 every
// substituted value is quoted with cgq_shell_quote. Returns a new string (caller
// frees), or NULL with err set if a placeholder names no param.
char *cgq_space_render (const char *tmpl, const json_t *params, uint64_t job, uint64_t trial,
                        const char *spec_dir, int shell, char *err, size_t errlen);

// cgq_space_check_template returns 0 if every placeholder of tmpl names a param
// of spec or a built-in, else -1 with the offending name's byte offset in *at.
int cgq_space_check_template (const cgq_spec_t *spec, const char *tmpl, size_t *at, char *name,
                              size_t namelen);

#endif
