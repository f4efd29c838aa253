// searcher: what proposes the params of the next trial. One interface for every
// algorithm; random and grid walk the lazy space (space.h) in index order, so
// their whole state is the next index. Algorithms that learn (evolution, nsga2,
// bayes) use observe() and keep their state in the JSON that save() returns,
// which the coordinator persists in the job hash (field "searcher").
#ifndef CGQ_SEARCHER_H
#define CGQ_SEARCHER_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "spec.h"

typedef struct cgq_searcher_t cgq_searcher_t;

// cgq_searcher_new creates the searcher of spec->search.algorithm. state is
// what cgq_searcher_save returned before a restart, or NULL for a new job. The
// searcher borrows spec, which must outlive it. Returns NULL with err set if
// state does not fit the spec.
cgq_searcher_t *cgq_searcher_new (const cgq_spec_t *spec, const json_t *state, char *err,
                                  size_t errlen);
void cgq_searcher_destroy (cgq_searcher_t **self_p);

// cgq_searcher_suggest returns the params of the next trial (caller decrefs)
// and its id in *trial (ids are 0, 1, 2, ... in suggestion order). Returns NULL
// when it has nothing to suggest now: either done(), or it waits for results.
json_t *cgq_searcher_suggest (cgq_searcher_t *self, uint64_t *trial);

// cgq_searcher_observe tells the searcher how trial ended. metrics is the
// result object (borrowed); value is the objective (NAN if none or failed).
void cgq_searcher_observe (cgq_searcher_t *self, uint64_t trial, const json_t *metrics,
                           double value, bool ok);

// cgq_searcher_done is true when no trial will ever be suggested again.
bool cgq_searcher_done (const cgq_searcher_t *self);

// Number of trials suggested so far (the next id).
uint64_t cgq_searcher_suggested (const cgq_searcher_t *self);

// Total number of trials the search will suggest, or 0 if not known up front.
uint64_t cgq_searcher_total (const cgq_searcher_t *self);

// cgq_searcher_save returns the state to persist (caller decrefs).
json_t *cgq_searcher_save (const cgq_searcher_t *self);

#endif
