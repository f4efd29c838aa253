// space: the points of a spec's search space, generated lazily. Trial i's
// params are a pure function of (spec, seed, i): nothing is materialised, a
// coordinator that restarts regenerates the same point, and a grid of 2^40
// points costs no memory.
//
// Order: grid axes (grid params; under algorithm: grid also choice,
// assignment and repeat-of-choice/randint params) form a mixed-radix counter,
// the first written param varying slowest. Trial i uses grid point (i mod G)
// and sample (i div G). Sampled params draw from a generator seeded by
// (seed, i), in the order written; except that under algorithm: random, when
// every sampled param is discrete and samples <= D (the number of distinct
// sampled points), sample s is point perm(s) of a seeded permutation of
// [0, D), so no point is tried twice (see docs/spec.md).
#ifndef CGQ_SPACE_H
#define CGQ_SPACE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "spec.h"

// cgq_space_count sets *count to samples x (size of the grid), or under
// algorithm: list to the number of points (evolution, nsga2 and bayes have no
// grid axes: a grid param is searched like a choice). Returns 0, or
// -1 if that overflows 2^63 (the spec parser rejects such specs).
int cgq_space_count (const cgq_spec_t *spec, uint64_t *count);

// The most trials one job may have unless cgq-coordinator --max-trials says
// otherwise; `cgq validate` checks against it.
#define CGQ_DEFAULT_MAX_TRIALS 10000000
#define CGQ_DEFAULT_MAX_TRIALS_TEXT "10000000"

// cgq_space_check_limit is the one check of a search's size, shared by the
// coordinator (submit) and `cgq validate`: 0 when the search has at most max
// trials, else -1 with err set to one line that says how many it has (or that
// they overflow 2^63), the limit, and what to change.
int cgq_space_check_limit (const cgq_spec_t *spec, uint64_t max, char *err, size_t errlen);

// cgq_space_param_size sets *n to the number of distinct values of param p:
// 1 for a constant, the list's length for choice and grid, hi - lo + 1 for
// randint, the multiples of q in [lo, hi] for quniform and qloguniform,
// size(of)^N for a repeat and B^n for an assignment. Returns 0, or -1 for a
// continuous param (uniform, loguniform) and when the number reaches 2^63
// (2^53 for quniform and qloguniform).
int cgq_space_param_size (const cgq_param_t *p, uint64_t *n);

// cgq_space_is_axis is true when p is enumerated as a grid axis of spec
// rather than sampled.
bool cgq_space_is_axis (const cgq_spec_t *spec, const cgq_param_t *p);

// cgq_space_sampled_size sets *d to D, the number of distinct combinations of
// the sampled params (every param but constants and grid axes; 1 if none).
// Returns 0, or -1 if a sampled param is continuous or D reaches 2^63.
int cgq_space_sampled_size (const cgq_spec_t *spec, uint64_t *d);

// cgq_space_without_replacement is true when spec's samples are drawn without
// replacement: algorithm random, every sampled param discrete, and samples <= D.
bool cgq_space_without_replacement (const cgq_spec_t *spec);

// cgq_space_point returns trial index's params as a new JSON object, keys in the
// order written (caller decrefs). Floats are rounded to 15 significant digits
// (cgq_round15), randint values are JSON integers, choices keep their JSON type,
// a repeat is a JSON array and an assignment {"id": ID, "map": {ITEM: CHOICE}}.
json_t *cgq_space_point (const cgq_spec_t *spec, uint64_t index);

#endif
