// searcher: one front (cgq_searcher_*) over a table of algorithms. Each
// algorithm is an ops table (search_impl.h); random, grid and list live here,
// the searchers that learn in search_evolution.c (with nsga2),
// search_bayes.c, search_tpe.c and search_cmaes.c, and external (params sent from outside)
// in search_external.c. Adding one means another table and a row in s_algorithms,
// and no caller changes.
#include "searcher.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search_impl.h"
#include "space.h"
#include "util.h"

// --- index walk: random, grid and list --------------------------------------------
// They enumerate trials in index order: the whole state is the next index.

int
cgq_search_state_next (cgq_searcher_t *self, const json_t *state, char *err, size_t errlen)
{
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

static int
s_index_init (cgq_searcher_t *self, const json_t *state, char *err, size_t errlen)
{
    return state ? cgq_search_state_next (self, state, err, errlen) : 0;
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

static const cgq_search_ops_t s_index_ops = {
    .init = s_index_init,
    .fini = s_index_fini,
    .suggest = s_index_suggest,
    .observe = s_index_observe,
    .done = s_index_done,
    .save = s_index_save,
};

// s_list_suggest builds point number self->suggested: the space's constants
// and the point's values, in the order the space is written.
static json_t *
s_list_suggest (cgq_searcher_t *self)
{
    if (s_index_done (self))
        return NULL;
    const cgq_spec_t *spec = self->spec;
    const json_t *pt = json_array_get (spec->search.points, (size_t) self->suggested);
    json_t *o = json_object ();
    for (size_t i = 0; i < spec->nparams; i++) {
        const cgq_param_t *p = &spec->params[i];
        json_t *v = p->kind == CGQ_PARAM_CONST ? p->value : json_object_get (pt, p->name);
        json_object_set (o, p->name, v ? v : json_null ());
    }
    return o;
}

static const cgq_search_ops_t s_list_ops = {
    .init = s_index_init,
    .fini = s_index_fini,
    .suggest = s_list_suggest,
    .observe = s_index_observe,
    .done = s_index_done,
    .save = s_index_save,
};

// --- the table ----------------------------------------------------------------

static const struct {
    cgq_search_alg_t alg;
    const cgq_search_ops_t *ops;
} s_algorithms[] = {
    {CGQ_SEARCH_RANDOM, &s_index_ops},
    {CGQ_SEARCH_GRID, &s_index_ops},
    {CGQ_SEARCH_LIST, &s_list_ops},
    {CGQ_SEARCH_EVOLUTION, &cgq_search_evolution_ops},
    {CGQ_SEARCH_NSGA2, &cgq_search_nsga2_ops},
    {CGQ_SEARCH_TPE, &cgq_search_tpe_ops},
    {CGQ_SEARCH_BOHB, &cgq_search_tpe_ops}, // search_tpe.c, on the largest budget
    {CGQ_SEARCH_CMAES, &cgq_search_cmaes_ops},
    {CGQ_SEARCH_BAYES, &cgq_search_bayes_ops},
    {CGQ_SEARCH_EXTERNAL, &cgq_search_external_ops},
    {CGQ_SEARCH_PBT, &cgq_search_pbt_ops},
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
        snprintf (err, errlen,
                  "search algorithm %d has no searcher (expected one of: random, grid, list, "
                  "evolution, nsga2, bayes, tpe, bohb, cmaes, external)",
                  (int) spec->search.algorithm);
        return NULL;
    }
    const char *name = cgq_spec_search_name (spec->search.algorithm);
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
        if (!json_is_object (state) || !alg || strcmp (alg, name)) {
            snprintf (err, errlen,
                      "searcher state is for algorithm '%s', the spec says '%s' (the "
                      "state belongs to another spec; resubmit the job)",
                      alg ? alg : "(none)", name);
            return NULL;
        }
    }
    cgq_searcher_t *self = cgq_xcalloc (1, sizeof *self);
    self->ops = s_algorithms[i].ops;
    self->algorithm = name;
    self->spec = spec;
    self->total = total;
    if (self->ops->init (self, state, err, errlen) < 0) {
        self->ops->fini (self);
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
    if (trial >= self->suggested)
        return; // not ours: a stale id must not corrupt the state
    self->ops->observe (self, trial, metrics, value, ok);
}

bool
cgq_searcher_rung (cgq_searcher_t *self, uint64_t trial, double budget, const json_t *metrics)
{
    if (!self || trial >= self->suggested || !self->ops->rung || !isfinite (budget))
        return false;
    return self->ops->rung (self, trial, budget, metrics);
}

bool
cgq_searcher_needs_history (const cgq_searcher_t *self)
{
    return self->ops->replay != NULL;
}

int
cgq_searcher_replay (cgq_searcher_t *self, uint64_t trial, const json_t *params,
                     const json_t *metrics, double value, cgq_replay_t outcome, char *err,
                     size_t errlen)
{
    char scratch[8];
    if (!err || !errlen)
        err = scratch, errlen = sizeof scratch;
    if (!self->ops->replay)
        return 0;
    if (trial >= self->suggested) {
        snprintf (err, errlen,
                  "trial %llu was never suggested (the searcher's state says %llu were; the "
                  "state is older than the trials)",
                  (unsigned long long) trial, (unsigned long long) self->suggested);
        return -1;
    }
    return self->ops->replay (self, trial, params, metrics, value, outcome, err, errlen);
}

int
cgq_searcher_warm (cgq_searcher_t *self, const json_t *params, const json_t *metrics, char *err,
                   size_t errlen)
{
    char scratch[8];
    if (!err || !errlen)
        err = scratch, errlen = sizeof scratch;
    if (!self->ops->warm) {
        snprintf (err, errlen, "algorithm %s takes no warm-start points (use algorithm: tpe)",
                  self->algorithm);
        return -1;
    }
    if (!json_is_object (params) || !json_is_object (metrics)) {
        snprintf (err, errlen, "a warm-start point needs params and metrics, both objects");
        return -1;
    }
    return self->ops->warm (self, params, metrics, err, errlen);
}

int
cgq_searcher_warm_json (cgq_searcher_t *self, const char *json, char *err, size_t errlen)
{
    json_error_t je;
    json_t *a = json_loads (json ? json : "", 0, &je);
    if (!json_is_array (a) || json_array_size (a) > CGQ_SEARCH_MAX_WARM) {
        snprintf (err, errlen,
                  "warm_start: the observations are not a JSON array of at most %d points (%s)",
                  CGQ_SEARCH_MAX_WARM, a ? "wrong shape or too many" : je.text);
        json_decref (a);
        return -1;
    }
    for (size_t i = 0; i < json_array_size (a); i++) {
        const json_t *o = json_array_get (a, i);
        const json_t *from = json_object_get (o, "from");
        char why[512];
        if (cgq_searcher_warm (self, json_object_get (o, "params"), json_object_get (o, "metrics"),
                               why, sizeof why) < 0) {
            snprintf (err, errlen, "warm_start point %zu (%s): %s", i + 1,
                      json_is_string (from) ? json_string_value (from) : "?", why);
            json_decref (a);
            return -1;
        }
    }
    json_decref (a);
    return 0;
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

int
cgq_searcher_recount (cgq_searcher_t *self)
{
    uint64_t total;
    if (cgq_space_count (self->spec, &total) < 0 || total < self->suggested)
        return -1;
    self->total = total;
    return 0;
}

size_t
cgq_searcher_nobjectives (const cgq_searcher_t *self)
{
    return self->spec->nobjectives;
}

json_t *
cgq_searcher_save (const cgq_searcher_t *self)
{
    json_t *state = json_object ();
    json_object_set_new (state, "algorithm", json_string (self->algorithm));
    self->ops->save (self, state);
    return state;
}

size_t
cgq_searcher_footprint (const cgq_searcher_t *self)
{
    return sizeof *self + (self->ops->footprint ? self->ops->footprint (self) : 0);
}
