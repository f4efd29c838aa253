// hyperband: Hyperband's brackets as pure decisions (see hyperband.h).
#include "hyperband.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

enum { S_RUNNING, S_REACHED, S_ENDED, S_STOPPED };

typedef struct {
    uint64_t trial;
    uint32_t bracket; // index into brackets
    uint32_t rung;    // the rung it runs toward, or reached
    int state;        // S_*
    double value;     // at its rung, when S_REACHED
} s_trial_t;

typedef struct {
    uint32_t s;     // its rungs are 0..s
    uint32_t n0;    // trials it takes
    uint32_t added; // trials it has
    uint32_t rung;  // the rung whose cohort is open (decided ones are below)
} s_bracket_t;

struct hyperband_s {
    double max_t, eta;
    uint32_t s_max, nbrackets; // brackets in turn: s = s_max, s_max - 1, ...
    int mode;
    bool search_done;
    s_trial_t *trials;
    size_t ntrials, captrials;
    s_bracket_t *brackets;
    size_t nb, capb;
};

static uint32_t
s_n0 (const hyperband_t *self, uint32_t s)
{
    return (uint32_t)ceil ((double)(self->s_max + 1) / (s + 1) * pow (self->eta, s) - 1e-9);
}

static double
s_rung_budget (const hyperband_t *self, uint32_t s, uint32_t rung)
{
    return rung >= s ? self->max_t : self->max_t * pow (self->eta, (double)rung - (double)s);
}

hyperband_t *
hyperband_new (double max_t, double eta, uint32_t brackets, int mode)
{
    if (!(max_t > 1) || !isfinite (max_t) || !(eta >= 2) || !isfinite (eta) ||
        (mode != 1 && mode != -1))
        return NULL;
    uint32_t s_max = (uint32_t)floor (log (max_t) / log (eta) + 1e-9);
    if (s_max > 30 || brackets > s_max + 1)
        return NULL;
    hyperband_t *self = cgq_xcalloc (1, sizeof *self);
    self->max_t = max_t;
    self->eta = eta;
    self->s_max = s_max;
    self->nbrackets = brackets ? brackets : s_max + 1;
    self->mode = mode;
    return self;
}

void
hyperband_destroy (hyperband_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    free ((*self_p)->trials);
    free ((*self_p)->brackets);
    free (*self_p);
    *self_p = NULL;
}

uint32_t
hyperband_s_max (const hyperband_t *self)
{
    return self->s_max;
}

static s_trial_t *
s_find (const hyperband_t *self, uint64_t trial)
{
    for (size_t i = 0; i < self->ntrials; i++)
        if (self->trials[i].trial == trial)
            return &self->trials[i];
    return NULL;
}

static s_bracket_t *
s_bracket_push (hyperband_t *self, uint32_t s)
{
    if (self->nb == self->capb) {
        self->capb = self->capb ? self->capb * 2 : 8;
        self->brackets = cgq_xrealloc (self->brackets, self->capb * sizeof *self->brackets);
    }
    s_bracket_t *b = &self->brackets[self->nb++];
    memset (b, 0, sizeof *b);
    b->s = s;
    b->n0 = s_n0 (self, s);
    return b;
}

static s_trial_t *
s_trial_push (hyperband_t *self)
{
    if (self->ntrials == self->captrials) {
        self->captrials = self->captrials ? self->captrials * 2 : 16;
        self->trials = cgq_xrealloc (self->trials, self->captrials * sizeof *self->trials);
    }
    s_trial_t *t = &self->trials[self->ntrials++];
    memset (t, 0, sizeof *t);
    return t;
}

uint32_t
hyperband_add (hyperband_t *self, uint64_t trial)
{
    s_bracket_t *b = self->nb ? &self->brackets[self->nb - 1] : NULL;
    if (!b || b->added >= b->n0)
        b = s_bracket_push (self, self->s_max - (uint32_t)(self->nb % self->nbrackets));
    b->added++;
    s_trial_t *t = s_trial_push (self);
    t->trial = trial;
    t->bracket = (uint32_t)(b - self->brackets);
    t->state = S_RUNNING;
    return t->bracket;
}

double
hyperband_budget (const hyperband_t *self, uint64_t trial)
{
    const s_trial_t *t = s_find (self, trial);
    if (!t || t->state == S_STOPPED || t->state == S_ENDED)
        return NAN;
    const s_bracket_t *b = &self->brackets[t->bracket];
    return s_rung_budget (self, b->s, t->rung);
}

bool
hyperband_report (hyperband_t *self, uint64_t trial, double attr, double value)
{
    s_trial_t *t = s_find (self, trial);
    if (!t || t->state != S_RUNNING || isnan (attr) || isnan (value))
        return false;
    const s_bracket_t *b = &self->brackets[t->bracket];
    if (t->rung >= b->s || attr < s_rung_budget (self, b->s, t->rung))
        return false;
    t->state = S_REACHED;
    t->value = value;
    return true;
}

bool
hyperband_reached (const hyperband_t *self, uint64_t trial)
{
    const s_trial_t *t = s_find (self, trial);
    return t && t->state == S_REACHED;
}

void
hyperband_ended (hyperband_t *self, uint64_t trial)
{
    s_trial_t *t = s_find (self, trial);
    if (t && t->state == S_RUNNING)
        t->state = S_ENDED;
}

void
hyperband_search_done (hyperband_t *self)
{
    self->search_done = true;
}

// s_before: a ranks before b under mode (best first; ties: lower id first).
static bool
s_before (const s_trial_t *a, const s_trial_t *b, int mode)
{
    if (a->value == b->value)
        return a->trial < b->trial;
    return (a->value > b->value) == (mode > 0);
}

// s_cohort_decide decides bracket bi's open rung when its cohort is
// complete; appends verdicts to *out (n, cap). Returns true if it decided.
static bool
s_cohort_decide (hyperband_t *self, uint32_t bi, hyperband_verdict_t **out, size_t *n, size_t *cap)
{
    s_bracket_t *b = &self->brackets[bi];
    if (b->rung >= b->s || (b->added < b->n0 && !self->search_done))
        return false;
    size_t members = 0, reached = 0;
    for (size_t i = 0; i < self->ntrials; i++) {
        const s_trial_t *t = &self->trials[i];
        if (t->bracket != bi || t->rung != b->rung || t->state == S_STOPPED)
            continue;
        if (t->state == S_RUNNING)
            return false; // still on its way to the budget
        members++;
        reached += t->state == S_REACHED;
    }
    if (!members)
        return false;
    s_trial_t **r = cgq_xcalloc (reached + 1, sizeof *r);
    size_t k = 0;
    for (size_t i = 0; i < self->ntrials; i++) {
        s_trial_t *t = &self->trials[i];
        if (t->bracket == bi && t->rung == b->rung && t->state == S_REACHED)
            r[k++] = t;
    }
    for (size_t i = 1; i < reached; i++) // insertion sort: a cohort is small
        for (size_t j = i; j > 0 && s_before (r[j], r[j - 1], self->mode); j--) {
            s_trial_t *x = r[j];
            r[j] = r[j - 1];
            r[j - 1] = x;
        }
    size_t keep = (size_t)floor ((double)members / self->eta + 1e-9);
    if (keep < 1)
        keep = 1;
    if (keep > reached)
        keep = reached;
    double budget = s_rung_budget (self, b->s, b->rung);
    double next = s_rung_budget (self, b->s, b->rung + 1);
    for (size_t i = 0; i < reached; i++) {
        if (*n == *cap) {
            *cap = *cap ? *cap * 2 : 16;
            *out = cgq_xrealloc (*out, *cap * sizeof **out);
        }
        hyperband_verdict_t *v = &(*out)[(*n)++];
        memset (v, 0, sizeof *v);
        v->trial = r[i]->trial;
        v->promote = i < keep;
        v->value = r[i]->value;
        v->at = budget;
        if (v->promote) {
            r[i]->rung++;
            r[i]->state = S_RUNNING;
            v->budget = next;
            snprintf (v->why, sizeof v->why,
                      "hyperband bracket %u rung %u (budget %g): value %g is #%zu of %zu, in the "
                      "top %zu; promoted to budget %g",
                      bi, b->rung, budget, r[i]->value, i + 1, members, keep, next);
        }
        else {
            r[i]->state = S_STOPPED;
            snprintf (v->why, sizeof v->why,
                      "hyperband bracket %u rung %u (budget %g): value %g is #%zu of %zu, not in "
                      "the top %zu (cut-off %g)",
                      bi, b->rung, budget, r[i]->value, i + 1, members, keep, r[keep - 1]->value);
        }
    }
    free (r);
    b->rung++;
    return true;
}

size_t
hyperband_decide (hyperband_t *self, hyperband_verdict_t **out)
{
    *out = NULL;
    size_t n = 0, cap = 0;
    for (uint32_t bi = 0; bi < self->nb; bi++)
        while (s_cohort_decide (self, bi, out, &n, &cap))
            ; // a promoted cohort may complete at once (all its members ended)
    return n;
}

char *
hyperband_dump (const hyperband_t *self)
{
    json_t *o = json_object (), *bs = json_array (), *ts = json_array ();
    for (size_t i = 0; i < self->nb; i++) {
        const s_bracket_t *b = &self->brackets[i];
        json_array_append_new (bs, json_pack ("[IIII]", (json_int_t)b->s, (json_int_t)b->n0,
                                              (json_int_t)b->added, (json_int_t)b->rung));
    }
    for (size_t i = 0; i < self->ntrials; i++) {
        const s_trial_t *t = &self->trials[i];
        json_array_append_new (ts,
                               json_pack ("[IIIIf]", (json_int_t)t->trial, (json_int_t)t->bracket,
                                          (json_int_t)t->rung, (json_int_t)t->state,
                                          isfinite (t->value) ? t->value : 0.0));
    }
    json_object_set_new (o, "v", json_integer (1));
    json_object_set_new (o, "done", json_boolean (self->search_done));
    json_object_set_new (o, "brackets", bs);
    json_object_set_new (o, "trials", ts);
    char *s = json_dumps (o, JSON_COMPACT);
    json_decref (o);
    return s;
}

hyperband_t *
hyperband_load (double max_t, double eta, uint32_t brackets, int mode, const char *json)
{
    hyperband_t *self = hyperband_new (max_t, eta, brackets, mode);
    json_t *o = json ? json_loads (json, 0, NULL) : NULL;
    json_t *bs = json_object_get (o, "brackets"), *ts = json_object_get (o, "trials");
    if (!self || json_integer_value (json_object_get (o, "v")) != 1 || !json_is_array (bs) ||
        !json_is_array (ts))
        goto bad;
    self->search_done = json_is_true (json_object_get (o, "done"));
    size_t i;
    json_t *e;
    json_array_foreach (bs, i, e)
    {
        json_int_t s, n0, added, rung;
        if (json_unpack (e, "[IIII]", &s, &n0, &added, &rung) < 0 || s < 0 ||
            s > (json_int_t)self->s_max || added < 0 || rung < 0 || rung > s)
            goto bad;
        s_bracket_t *b = s_bracket_push (self, (uint32_t)s);
        b->n0 = (uint32_t)n0;
        b->added = (uint32_t)added;
        b->rung = (uint32_t)rung;
    }
    json_array_foreach (ts, i, e)
    {
        json_int_t id, bi, rung, state;
        double value;
        if (json_unpack (e, "[IIIIF]", &id, &bi, &rung, &state, &value) < 0 || bi < 0 ||
            (size_t)bi >= self->nb || rung < 0 || state < S_RUNNING || state > S_STOPPED)
            goto bad;
        s_trial_t *t = s_trial_push (self);
        t->trial = (uint64_t)id;
        t->bracket = (uint32_t)bi;
        t->rung = (uint32_t)rung;
        t->state = (int)state;
        t->value = value;
    }
    json_decref (o);
    return self;
bad:
    json_decref (o);
    hyperband_destroy (&self);
    return NULL;
}
