// early_stop: asha and the median stopping rule.
#include "early_stop.h"

#include <czmq.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pareto.h"
#include "util.h"

// The most asha rungs: grace * reduction^k below max, reduction > 1.
#define S_MAX_RUNGS 64

typedef struct {
    double value;
    uint64_t trial;
} s_entry_t;

// One bucket: the values recorded at one attribute value, sorted by value
// (ascending) for ranks and medians.
typedef struct {
    double at;
    s_entry_t *e;
    size_t n, cap;
    // Several objectives: the recorded vectors (mn rows of m) and their
    // trials, in the order recorded (the rule does not depend on it).
    double *mv;
    uint64_t *mt;
    size_t mn, mcap;
} s_bucket_t;

// A running trial: its last attribute judged (asha: the last rung it was
// recorded at), and for the median rule its running sum, count and best.
typedef struct {
    double last;
    double sum;
    uint64_t n;
    double best;
} s_trial_t;

struct early_stop_s {
    const cgq_spec_t *spec;
    cgq_early_stop_alg_t alg;
    double grace, reduction, max;
    int mode; // +1 larger is better, -1 smaller
    size_t m; // objectives compared: 1, or the job's (multi-objective asha)
    int sense[CGQ_SPEC_MAX_OBJECTIVES];
    double rungs[S_MAX_RUNGS];
    int nrungs;
    s_bucket_t *b; // sorted by at
    size_t nb, capb;
    zhashx_t *trials; // "id" -> s_trial_t (owned)
};

static void
s_trial_destroy (void **item)
{
    free (*item);
    *item = NULL;
}

early_stop_t *
early_stop_new (const cgq_spec_t *spec)
{
    if (spec->early_stop.algorithm == CGQ_EARLY_STOP_NONE
        || spec->early_stop.algorithm == CGQ_EARLY_STOP_HYPERBAND) // hyperband.c's, not ours
        return NULL;
    early_stop_t *self = cgq_xcalloc (1, sizeof *self);
    self->spec = spec;
    self->alg = spec->early_stop.algorithm;
    self->grace = (double) spec->early_stop.grace;
    self->reduction = spec->early_stop.reduction > 1 ? spec->early_stop.reduction : 3;
    self->max = (double) spec->early_stop.max;
    self->mode = spec->early_stop.mode >= 0 ? 1 : -1;
    self->m = 1;
    if (spec->early_stop.nobjectives > 1 && self->alg == CGQ_EARLY_STOP_ASHA) {
        int all[CGQ_SPEC_MAX_OBJECTIVES];
        cgq_spec_objective_senses (spec, all);
        self->m = spec->early_stop.nobjectives;
        for (size_t j = 0; j < self->m; j++)
            self->sense[j] = all[spec->early_stop.obj[j]];
    }
    if (self->alg == CGQ_EARLY_STOP_ASHA)
        for (double m = self->grace; m < self->max && self->nrungs < S_MAX_RUNGS;
             m *= self->reduction)
            self->rungs[self->nrungs++] = m;
    self->trials = zhashx_new ();
    zhashx_set_destructor (self->trials, s_trial_destroy);
    return self;
}

void
early_stop_destroy (early_stop_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    early_stop_t *self = *self_p;
    for (size_t i = 0; i < self->nb; i++) {
        free (self->b[i].e);
        free (self->b[i].mv);
        free (self->b[i].mt);
    }
    free (self->b);
    zhashx_destroy (&self->trials);
    free (self);
    *self_p = NULL;
}

// --- buckets ---------------------------------------------------------------

// s_bucket_pos is the index of the first bucket whose at is >= at.
static size_t
s_bucket_pos (const early_stop_t *self, double at)
{
    size_t lo = 0, hi = self->nb;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (self->b[mid].at < at)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static s_bucket_t *
s_bucket_find (const early_stop_t *self, double at)
{
    size_t i = s_bucket_pos (self, at);
    return i < self->nb && self->b[i].at == at ? &self->b[i] : NULL;
}

// s_bucket_get finds or makes bucket at; NULL when there are too many.
static s_bucket_t *
s_bucket_get (early_stop_t *self, double at, bool *made)
{
    size_t i = s_bucket_pos (self, at);
    *made = false;
    if (i < self->nb && self->b[i].at == at)
        return &self->b[i];
    if (self->nb >= EARLY_STOP_MAX_BUCKETS)
        return NULL;
    if (self->nb == self->capb) {
        self->capb = self->capb ? self->capb * 2 : 8;
        self->b = cgq_xrealloc (self->b, self->capb * sizeof *self->b);
    }
    memmove (&self->b[i + 1], &self->b[i], (self->nb - i) * sizeof *self->b);
    self->nb++;
    memset (&self->b[i], 0, sizeof self->b[i]);
    self->b[i].at = at;
    *made = true;
    return &self->b[i];
}

// s_lower is the number of entries of b below v; s_upper of those <= v.
static size_t
s_lower (const s_bucket_t *b, double v)
{
    size_t lo = 0, hi = b->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (b->e[mid].value < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static size_t
s_upper (const s_bucket_t *b, double v)
{
    size_t lo = 0, hi = b->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (b->e[mid].value <= v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void
s_bucket_add (s_bucket_t *b, uint64_t trial, double value)
{
    if (b->n == b->cap) {
        b->cap = b->cap ? b->cap * 2 : 8;
        b->e = cgq_xrealloc (b->e, b->cap * sizeof *b->e);
    }
    size_t i = s_upper (b, value);
    memmove (&b->e[i + 1], &b->e[i], (b->n - i) * sizeof *b->e);
    b->e[i] = (s_entry_t) {value, trial};
    b->n++;
}

// s_better is the number of entries of b strictly better than v.
static size_t
s_better (const early_stop_t *self, const s_bucket_t *b, double v)
{
    return self->mode > 0 ? b->n - s_upper (b, v) : s_lower (b, v);
}

static double
s_median (const s_bucket_t *b)
{
    return b->n % 2 ? b->e[b->n / 2].value : (b->e[b->n / 2 - 1].value + b->e[b->n / 2].value) / 2;
}

// --- trials ----------------------------------------------------------------

static s_trial_t *
s_trial (early_stop_t *self, uint64_t trial, bool make)
{
    char key[24];
    snprintf (key, sizeof key, "%" PRIu64, trial);
    s_trial_t *t = zhashx_lookup (self->trials, key);
    if (!t && make) {
        t = cgq_xcalloc (1, sizeof *t);
        t->last = -INFINITY;
        t->best = NAN;
        zhashx_insert (self->trials, key, t);
    }
    return t;
}

void
early_stop_forget (early_stop_t *self, uint64_t trial)
{
    if (!self)
        return;
    char key[24];
    snprintf (key, sizeof key, "%" PRIu64, trial);
    zhashx_delete (self->trials, key);
}

static void
s_record (early_stop_t *self, uint64_t trial, double at, double value, early_stop_decision_t *d)
{
    bool made;
    s_bucket_t *b = s_bucket_get (self, at, &made);
    if (!b)
        return;
    s_bucket_add (b, trial, value);
    d->record = true;
    d->new_bucket = made;
    d->at = at;
    d->value = value;
}

static void
s_asha (early_stop_t *self, s_trial_t *t, uint64_t trial, double attr, double value,
        early_stop_decision_t *d)
{
    int k = self->nrungs - 1;
    while (k >= 0 && self->rungs[k] > attr)
        k--;
    if (k < 0 || self->rungs[k] <= t->last)
        return; // below the first rung, or judged at this rung already
    double rung = self->rungs[k];
    t->last = rung;
    s_bucket_t *b = s_bucket_find (self, rung);
    size_t better = b ? s_better (self, b, value) : 0;
    size_t n = (b ? b->n : 0) + 1;
    size_t keep = (size_t) floor ((double) n / self->reduction);
    if (keep < 1)
        keep = 1;
    s_record (self, trial, rung, value, d);
    if (better < keep)
        return;
    char at[32], v[32];
    d->stop = true;
    snprintf (d->why, sizeof d->why,
              "asha: at rung %s=%s its %s %s ranks %zu of %zu recorded there; only the top %zu "
              "(1/%g) go on",
              self->spec->early_stop.attribute, cgq_fmt_double (at, rung),
              self->spec->early_stop.metric, cgq_fmt_double (v, value), better + 1, n, keep,
              self->reduction);
}

static void
s_median_rule (early_stop_t *self, s_trial_t *t, uint64_t trial, double attr, double value,
               early_stop_decision_t *d)
{
    t->last = attr;
    t->sum += value;
    t->n++;
    if (isnan (t->best) || self->mode * value > self->mode * t->best)
        t->best = value;
    if (attr < self->grace || attr > self->max)
        return;
    s_bucket_t *b = s_bucket_find (self, attr);
    if (b && b->n >= EARLY_STOP_MEDIAN_MIN) {
        double med = s_median (b);
        if (self->mode * t->best < self->mode * med) {
            char at[32], best[32], m[32];
            d->stop = true;
            snprintf (d->why, sizeof d->why,
                      "median: at %s=%s its best %s %s is worse than %s, the median of %zu "
                      "other trials' running averages",
                      self->spec->early_stop.attribute, cgq_fmt_double (at, attr),
                      self->spec->early_stop.metric, cgq_fmt_double (best, t->best),
                      cgq_fmt_double (m, med), b->n);
        }
    }
    s_record (self, trial, attr, t->sum / (double) t->n, d);
}

void
early_stop_report (early_stop_t *self, uint64_t trial, double attr, double value,
                   early_stop_decision_t *d)
{
    memset (d, 0, sizeof *d);
    if (!self || !isfinite (attr) || !isfinite (value))
        return;
    s_trial_t *t = s_trial (self, trial, true);
    if (attr <= t->last)
        return;
    if (self->alg == CGQ_EARLY_STOP_ASHA)
        s_asha (self, t, trial, attr, value, d);
    else
        s_median_rule (self, t, trial, attr, value, d);
}

// --- several objectives (multi-objective asha) -----------------------------------

static void
s_mbucket_add (const early_stop_t *self, s_bucket_t *b, uint64_t trial, const double *v)
{
    if (b->mn == b->mcap) {
        b->mcap = b->mcap ? b->mcap * 2 : 8;
        b->mv = cgq_xrealloc (b->mv, b->mcap * self->m * sizeof *b->mv);
        b->mt = cgq_xrealloc (b->mt, b->mcap * sizeof *b->mt);
    }
    memcpy (&b->mv[b->mn * self->m], v, self->m * sizeof *v);
    b->mt[b->mn++] = trial;
}

// s_fmt_vec writes "(name v, name v, ...)" of v into buf.
static const char *
s_fmt_vec (const early_stop_t *self, const double *v, char *buf, size_t n)
{
    size_t at = 0;
    for (size_t j = 0; j < self->m && at < n; j++) {
        char x[32];
        at += (size_t) snprintf (buf + at, n - at, "%s%s %s", j ? ", " : "(",
                                 cgq_spec_objective (self->spec, self->spec->early_stop.obj[j])->metric,
                                 cgq_fmt_double (x, v[j]));
    }
    if (at < n)
        snprintf (buf + at, n - at, ")");
    return buf;
}

static bool
s_finite (const double *v, size_t m)
{
    for (size_t j = 0; j < m; j++)
        if (!isfinite (v[j]))
            return false;
    return true;
}

void
early_stop_report_multi (early_stop_t *self, uint64_t trial, double attr, const double *all,
                         early_stop_decision_t *d)
{
    if (self && self->m == 1) {
        early_stop_report (self, trial, attr, all[0], d);
        return;
    }
    double values[CGQ_SPEC_MAX_OBJECTIVES];
    for (size_t j = 0; self && j < self->m; j++)
        values[j] = all[self->spec->early_stop.obj[j]];
    memset (d, 0, sizeof *d);
    if (!self || !isfinite (attr) || !s_finite (values, self->m))
        return;
    s_trial_t *t = s_trial (self, trial, true);
    if (attr <= t->last)
        return;
    int k = self->nrungs - 1;
    while (k >= 0 && self->rungs[k] > attr)
        k--;
    if (k < 0 || self->rungs[k] <= t->last)
        return;
    double rung = self->rungs[k];
    t->last = rung;
    size_t m = self->m, dominated = 0, better[CGQ_SPEC_MAX_OBJECTIVES] = {0};
    s_bucket_t *b = s_bucket_find (self, rung);
    for (size_t i = 0; b && i < b->mn; i++) {
        const double *o = &b->mv[i * m];
        dominated += cgq_pareto_dominates (o, values, (int) m, self->sense);
        for (size_t j = 0; j < m; j++)
            better[j] += self->sense[j] * o[j] > self->sense[j] * values[j];
    }
    size_t n = (b ? b->mn : 0) + 1;
    size_t keep = (size_t) floor ((double) n / self->reduction);
    if (keep < 1)
        keep = 1;
    bool made;
    b = s_bucket_get (self, rung, &made);
    if (b) {
        s_mbucket_add (self, b, trial, values);
        d->record = true;
        d->new_bucket = made;
        d->at = rung;
        d->value = values[0];
        d->nvalues = m;
        memcpy (d->values, values, m * sizeof *values);
    }
    bool go_on = dominated == 0;
    for (size_t j = 0; j < m; j++)
        go_on |= better[j] < keep;
    if (go_on)
        return;
    char at[32], v[160], ranks[96];
    size_t r = 0;
    for (size_t j = 0; j < m && r < sizeof ranks; j++)
        r += (size_t) snprintf (ranks + r, sizeof ranks - r, "%s%zu", j ? ", " : "", better[j] + 1);
    d->stop = true;
    snprintf (d->why, sizeof d->why,
              "asha: at rung %s=%s its %s is dominated by %zu of %zu recorded there and ranks "
              "%s by objective; only the non-dominated and the top %zu (1/%g) by some objective "
              "go on",
              self->spec->early_stop.attribute, cgq_fmt_double (at, rung),
              s_fmt_vec (self, values, v, sizeof v), dominated, n, ranks, keep, self->reduction);
}

void
early_stop_restore_multi (early_stop_t *self, double at, uint64_t trial, const double *values)
{
    if (!self || self->m == 1) {
        if (self)
            early_stop_restore (self, at, trial, values[0]);
        return;
    }
    if (!isfinite (at) || !s_finite (values, self->m))
        return;
    bool made;
    s_bucket_t *b = s_bucket_get (self, at, &made);
    if (b)
        s_mbucket_add (self, b, trial, values);
}

size_t
early_stop_nobjectives (const early_stop_t *self)
{
    return self ? self->m : 0;
}

void
early_stop_restore (early_stop_t *self, double at, uint64_t trial, double value)
{
    if (!self || !isfinite (at) || !isfinite (value))
        return;
    bool made;
    s_bucket_t *b = s_bucket_get (self, at, &made);
    if (b)
        s_bucket_add (b, trial, value);
}

void
early_stop_trial_state (const early_stop_t *self, uint64_t trial, char *buf, size_t n)
{
    if (n)
        *buf = 0;
    s_trial_t *t = self ? s_trial ((early_stop_t *) self, trial, false) : NULL;
    if (!t || !isfinite (t->last))
        return;
    char last[32], sum[32], best[32];
    snprintf (buf, n, "{\"last\":%s,\"n\":%" PRIu64 ",\"sum\":%s,\"best\":%s}",
              cgq_fmt_double (last, t->last), t->n, cgq_fmt_double (sum, t->sum),
              isfinite (t->best) ? cgq_fmt_double (best, t->best) : "null");
}

int
early_stop_trial_resume (early_stop_t *self, uint64_t trial, const char *json)
{
    if (!self || !json || !*json)
        return -1;
    json_t *o = json_loads (json, 0, NULL);
    json_t *last = json_object_get (o, "last"), *n = json_object_get (o, "n"),
           *sum = json_object_get (o, "sum"), *best = json_object_get (o, "best");
    int rc = -1;
    if (json_is_number (last) && json_is_integer (n) && json_is_number (sum)) {
        s_trial_t *t = s_trial (self, trial, true);
        t->last = json_number_value (last);
        t->n = (uint64_t) json_integer_value (n);
        t->sum = json_number_value (sum);
        t->best = json_is_number (best) ? json_number_value (best) : NAN;
        rc = 0;
    }
    json_decref (o);
    return rc;
}

size_t
early_stop_buckets (const early_stop_t *self)
{
    return self ? self->nb : 0;
}

size_t
early_stop_bucket_size (const early_stop_t *self, double at)
{
    const s_bucket_t *b = self ? s_bucket_find (self, at) : NULL;
    return b ? b->n + b->mn : 0;
}
