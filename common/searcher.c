// searcher: one front (cgq_searcher_*) over a table of algorithms. Each
// algorithm is an ops table; adding evolution, nsga2 or bayes means writing
// another table and a row in s_algorithms, and no caller changes.
#include "searcher.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "space.h"
#include "util.h"

typedef struct {
    // init reads the saved state (NULL: a new job) into self->impl; -1 with
    // err set if the state does not fit.
    int (*init) (cgq_searcher_t *self, const json_t *state, char *err, size_t errlen);
    void (*fini) (cgq_searcher_t *self);
    // suggest returns the params of trial self->suggested, or NULL for none now.
    json_t *(*suggest) (cgq_searcher_t *self);
    void (*observe) (cgq_searcher_t *self, uint64_t trial, const json_t *metrics, double value,
                     bool ok);
    bool (*done) (const cgq_searcher_t *self);
    // save adds the algorithm's fields to state, which already holds "algorithm".
    void (*save) (const cgq_searcher_t *self, json_t *state);
} s_ops_t;

struct cgq_searcher_t {
    const s_ops_t *ops;
    const char *algorithm;  // the name saved in the state
    const cgq_spec_t *spec; // borrowed
    uint64_t suggested;     // the next trial id
    uint64_t total;         // 0: not known up front
    void *impl;             // the algorithm's own state, owned by ops
};

// --- index walk: random and grid ---------------------------------------------
// Both enumerate the lazy space in index order; random differs from grid only
// in which params space.c samples, so the whole state is the next index.

static int
s_index_init (cgq_searcher_t *self, const json_t *state, char *err, size_t errlen)
{
    if (!state)
        return 0;
    const json_t *next = json_object_get (state, "next");
    if (!json_is_integer (next) || json_integer_value (next) < 0 ||
        (uint64_t) json_integer_value (next) > self->total) {
        char *text = json_dumps (next, JSON_ENCODE_ANY | JSON_COMPACT);
        snprintf (err, errlen,
                  "searcher state has next=%s, expected an integer in [0, %llu] (the "
                  "state belongs to another spec; resubmit the job)",
                  text ? text : "(missing)", (unsigned long long) self->total);
        free (text);
        return -1;
    }
    self->suggested = (uint64_t) json_integer_value (next);
    return 0;
}

static void
s_index_fini (cgq_searcher_t *self)
{
}

static bool
s_index_done (const cgq_searcher_t *self)
{
    return self->suggested >= self->total;
}

static json_t *
s_index_suggest (cgq_searcher_t *self)
{
    if (s_index_done (self))
        return NULL;
    return cgq_space_point (self->spec, self->suggested);
}

static void
s_index_observe (cgq_searcher_t *self, uint64_t trial, const json_t *metrics, double value, bool ok)
{
}

static void
s_index_save (const cgq_searcher_t *self, json_t *state)
{
    json_object_set_new (state, "next", json_integer ((json_int_t) self->suggested));
}

static const s_ops_t s_index_ops = {
    .init = s_index_init,
    .fini = s_index_fini,
    .suggest = s_index_suggest,
    .observe = s_index_observe,
    .done = s_index_done,
    .save = s_index_save,
};

// --- the table ----------------------------------------------------------------

static const struct {
    cgq_search_alg_t alg;
    const char *name;
    const s_ops_t *ops;
} s_algorithms[] = {
    {CGQ_SEARCH_RANDOM, "random", &s_index_ops},
    {CGQ_SEARCH_GRID, "grid", &s_index_ops},
};

cgq_searcher_t *
cgq_searcher_new (const cgq_spec_t *spec, const json_t *state, char *err, size_t errlen)
{
    char scratch[8];
    if (!err || !errlen)
        err = scratch, errlen = sizeof scratch;
    err[0] = 0;
    size_t i = 0;
    size_t nalg = sizeof s_algorithms / sizeof *s_algorithms;
    while (i < nalg && s_algorithms[i].alg != spec->search.algorithm)
        i++;
    if (i == nalg) {
        snprintf (err, errlen, "search algorithm %d has no searcher (expected random or grid)",
                  (int) spec->search.algorithm);
        return NULL;
    }
    if (json_is_null (state))
        state = NULL;
    uint64_t total;
    if (cgq_space_count (spec, &total) < 0) {
        snprintf (err, errlen,
                  "the search of %s has more than 2^63 trials (reduce the grid or "
                  "samples)",
                  spec->name);
        return NULL;
    }
    if (state) {
        const char *alg = json_string_value (json_object_get (state, "algorithm"));
        if (!json_is_object (state) || !alg || strcmp (alg, s_algorithms[i].name)) {
            snprintf (err, errlen,
                      "searcher state is for algorithm '%s', the spec says '%s' (the "
                      "state belongs to another spec; resubmit the job)",
                      alg ? alg : "(none)", s_algorithms[i].name);
            return NULL;
        }
    }
    cgq_searcher_t *self = cgq_xcalloc (1, sizeof *self);
    self->ops = s_algorithms[i].ops;
    self->algorithm = s_algorithms[i].name;
    self->spec = spec;
    self->total = total;
    if (self->ops->init (self, state, err, errlen) < 0) {
        free (self);
        return NULL;
    }
    return self;
}

void
cgq_searcher_destroy (cgq_searcher_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cgq_searcher_t *self = *self_p;
    self->ops->fini (self);
    free (self);
    *self_p = NULL;
}

json_t *
cgq_searcher_suggest (cgq_searcher_t *self, uint64_t *trial)
{
    json_t *params = self->ops->suggest (self);
    if (!params)
        return NULL;
    if (trial)
        *trial = self->suggested;
    self->suggested++;
    return params;
}

void
cgq_searcher_observe (cgq_searcher_t *self, uint64_t trial, const json_t *metrics, double value,
                      bool ok)
{
    self->ops->observe (self, trial, metrics, value, ok);
}

bool
cgq_searcher_done (const cgq_searcher_t *self)
{
    return self->ops->done (self);
}

uint64_t
cgq_searcher_suggested (const cgq_searcher_t *self)
{
    return self->suggested;
}

uint64_t
cgq_searcher_total (const cgq_searcher_t *self)
{
    return self->total;
}

json_t *
cgq_searcher_save (const cgq_searcher_t *self)
{
    json_t *state = json_object ();
    json_object_set_new (state, "algorithm", json_string (self->algorithm));
    self->ops->save (self, state);
    return state;
}
