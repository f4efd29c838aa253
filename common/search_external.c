// search_external: algorithm external. The params come from a process
// outside the coordinator (cgq optuna-search, or a searcher of your own
// written with clients/python/cgq/searcher.py) in Suggest requests; this
// searcher only queues them, checked against the space, and hands them out
// in the order received: trial i gets the i-th point the job was sent.
//
// The queue lives in memory and in Redis (cgq:job:{J}:suggestions, appended
// by the coordinator in the batch that accepts a Suggest); the saved state
// is only the next trial id, so a restarted coordinator refills the queue
// from that list at index "next" on (recovery.c). observe() does nothing:
// the process outside reads the results from Redis.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "search_impl.h"
#include "util.h"

typedef struct {
    cgq_genome_t genome; // to check a point against the space and write it canonically
    json_t **q;          // the points that wait, a ring of cap slots from head
    size_t head, n, cap;
} s_ext_t;

static int
s_init (cgq_searcher_t *self, const json_t *state, char *err, size_t errlen)
{
    s_ext_t *x = cgq_xcalloc (1, sizeof *x);
    self->impl = x;
    if (cgq_genome_init (&x->genome, self->spec, err, errlen) < 0)
        return -1;
    return state ? cgq_search_state_next (self, state, err, errlen) : 0;
}

static void
s_fini (cgq_searcher_t *self)
{
    s_ext_t *x = self->impl;
    if (!x)
        return;
    for (size_t i = 0; i < x->n; i++)
        json_decref (x->q[(x->head + i) % x->cap]);
    free (x->q);
    cgq_genome_fini (&x->genome);
    free (x);
    self->impl = NULL;
}

static bool
s_done (const cgq_searcher_t *self)
{
    return self->suggested >= self->total;
}

static json_t *
s_suggest (cgq_searcher_t *self)
{
    s_ext_t *x = self->impl;
    if (s_done (self) || x->n == 0)
        return NULL;
    json_t *p = x->q[x->head];
    x->q[x->head] = NULL;
    x->head = (x->head + 1) % x->cap;
    x->n--;
    return p;
}

static void
s_observe (cgq_searcher_t *self, uint64_t trial, const json_t *metrics, double value, bool ok)
{
}

static void
s_save (const cgq_searcher_t *self, json_t *state)
{
    json_object_set_new (state, "next", json_integer ((json_int_t) self->suggested));
}

static size_t
s_footprint (const cgq_searcher_t *self)
{
    const s_ext_t *x = self->impl;
    return sizeof *x + x->cap * sizeof *x->q + x->genome.ngenes * sizeof *x->genome.genes +
           x->n * 128; // a point's JSON, roughly
}

static void
s_give (cgq_searcher_t *self, json_t *point)
{
    s_ext_t *x = self->impl;
    if (x->n == x->cap) {
        size_t cap = x->cap ? 2 * x->cap : 16;
        json_t **q = cgq_xcalloc (cap, sizeof *q);
        for (size_t i = 0; i < x->n; i++)
            q[i] = x->q[(x->head + i) % x->cap];
        free (x->q);
        x->q = q;
        x->head = 0;
        x->cap = cap;
    }
    x->q[(x->head + x->n) % x->cap] = point;
    x->n++;
}

static uint64_t
s_waiting (const cgq_searcher_t *self)
{
    const s_ext_t *x = self->impl;
    return x->n;
}

// s_names writes the names of the params that are not constants, "a, b".
static void
s_names (const cgq_spec_t *spec, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = 0;
    for (size_t i = 0; i < spec->nparams && at < len; i++)
        if (spec->params[i].kind != CGQ_PARAM_CONST)
            at += (size_t) snprintf (buf + at, len - at, "%s%s", at ? ", " : "",
                                     spec->params[i].name);
    if (!at)
        snprintf (buf, len, "none: every param is a constant, send {}");
}

// s_off_step is true when v is not a multiple of p->q (a quantized param):
// the genome would round it to one, and the searcher outside should know
// that its value is not what runs.
static bool
s_off_step (const cgq_param_t *p, const json_t *v)
{
    if ((p->kind != CGQ_PARAM_QUNIFORM && p->kind != CGQ_PARAM_QLOGUNIFORM) ||
        !json_is_number (v))
        return false;
    double k = json_number_value (v) / p->q;
    return fabs (k - round (k)) > 1e-9 * (fabs (k) > 1 ? fabs (k) : 1);
}

// s_param_error writes "param NAME = VALUE is not ...: DOMAIN".
static void
s_param_error (const cgq_param_t *p, const json_t *v, const char *what, char *err, size_t errlen)
{
    char *text = v ? cgq_json_dumps (v) : NULL;
    char *dom = cgq_spec_param_domain (p);
    snprintf (err, errlen, "param %s = %s %s (allowed: %s)", p->name, text ? text : "(missing)",
              what, dom);
    free (text);
    free (dom);
}

json_t *
cgq_searcher_point (const cgq_searcher_t *self, const json_t *params, char *err, size_t errlen)
{
    char scratch[8];
    if (!err || !errlen)
        err = scratch, errlen = sizeof scratch;
    if (self->ops != &cgq_search_external_ops) {
        snprintf (err, errlen,
                  "the job's search is %s, not external: its own searcher chooses the params "
                  "(submit the spec with search: {algorithm: external})",
                  self->algorithm);
        return NULL;
    }
    const cgq_spec_t *spec = self->spec;
    char names[512];
    if (!json_is_object (params)) {
        s_names (spec, names, sizeof names);
        snprintf (err, errlen, "params must be a JSON object of the space's params (%s), not %s",
                  names,
                  json_is_array (params)    ? "an array"
                  : json_is_string (params) ? "a string"
                  : json_is_null (params)   ? "null"
                                            : "a number or boolean");
        return NULL;
    }
    const char *key;
    json_t *v;
    json_object_foreach ((json_t *) params, key, v)
    {
        const cgq_param_t *p = cgq_spec_param (spec, key);
        if (!p) {
            s_names (spec, names, sizeof names);
            snprintf (err, errlen, "'%s' is not a param of the space (its params: %s)", key,
                      names);
            return NULL;
        }
        if (p->kind == CGQ_PARAM_CONST && !json_equal (v, p->value)) {
            s_param_error (p, v, "sets a constant of the space: leave it out", err, errlen);
            return NULL;
        }
        if (s_off_step (p, v)) {
            s_param_error (p, v, "is not a multiple of its step", err, errlen);
            return NULL;
        }
    }
    for (size_t i = 0; i < spec->nparams; i++) {
        const cgq_param_t *p = &spec->params[i];
        if (p->kind == CGQ_PARAM_REPEAT && p->of) {
            const json_t *a = json_object_get (params, p->name);
            for (size_t k = 0; json_is_array (a) && k < json_array_size (a); k++)
                if (s_off_step (p->of, json_array_get (a, k))) {
                    s_param_error (p, a, "has an element that is not a multiple of its step", err,
                                   errlen);
                    return NULL;
                }
        }
        if (p->kind != CGQ_PARAM_CONST && !json_object_get (params, p->name)) {
            char *dom = cgq_spec_param_domain (p);
            snprintf (err, errlen,
                      "param %s is not set (allowed: %s); a suggestion sets every param that is "
                      "not a constant",
                      p->name, dom);
            free (dom);
            return NULL;
        }
    }
    const s_ext_t *x = self->impl;
    double *g = cgq_xcalloc (x->genome.ngenes ? x->genome.ngenes : 1, sizeof *g);
    json_t *point = NULL;
    if (cgq_genome_from_params (&x->genome, params, g, err, errlen) == 0)
        point = cgq_genome_params (&x->genome, g);
    free (g);
    return point;
}

bool
cgq_searcher_external (const cgq_searcher_t *self)
{
    return self->ops == &cgq_search_external_ops;
}

int
cgq_searcher_give (cgq_searcher_t *self, json_t *point)
{
    if (self->ops != &cgq_search_external_ops) {
        json_decref (point);
        return -1;
    }
    s_give (self, point);
    return 0;
}

uint64_t
cgq_searcher_waiting (const cgq_searcher_t *self)
{
    return self->ops == &cgq_search_external_ops ? s_waiting (self) : 0;
}

const cgq_search_ops_t cgq_search_external_ops = {
    .init = s_init,
    .fini = s_fini,
    .suggest = s_suggest,
    .observe = s_observe,
    .done = s_done,
    .save = s_save,
    .footprint = s_footprint,
};
