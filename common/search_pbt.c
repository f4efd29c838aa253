// search_pbt: algorithm pbt, Population Based Training as Ray Tune's
// PopulationBasedTraining does it (exploit: the bottom quantile copies a
// top trial; explore: its params perturbed by 1.2 / 0.8, or resampled),
// written anew for cgq's immutable trials:
//
// - The first search.population trials are random points of the space, or,
//   with search.warm_start, the best warm points first (by the ranking
//   metric, at most population of them), then random ones.
// - A member that records a checkpoint at least perturbation_interval (of
//   time_attr) after its last look is ranked by its latest score among the
//   members that have one. In the bottom quantile, it is *exploited*: it
//   ends (the coordinator stops it, state stopped, event trial.exploited)
//   and a new trial takes its place, with the params of a top-quantile
//   member (the donor, drawn at random among those with a checkpoint)
//   perturbed, resuming from the donor's latest checkpoint. Its lineage
//   names the donor (parent), the trial it replaces, the step and the
//   changed params. So a trial is still one config; the population stays
//   at search.population live members.
// - The search is done when the initial population was suggested, no child
//   waits, and no member is live.
//
// Everything it needs lives in its saved state, O(population): the live
// members (score, steps, params, latest checkpoint record, a pin on the
// donor's checkpoint until their own first one), the children that wait,
// and the count of exploits. Nothing is replayed after a restart.
//
// Determinism: each look draws from a stream keyed by (seed, trial, step).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "search_impl.h"
#include "util.h"

typedef struct {
    uint64_t id;
    bool scored;
    double score;    // as reported (not oriented)
    double t;        // time_attr of the score
    double last;     // time_attr of the last look (or where it started)
    json_t *params;  // owned
    json_t *ckpt;    // its latest checkpoint record (owned); NULL: none yet
    json_t *lineage; // a child: its lineage (owned); NULL: of the first population
    bool pinned;     // a child without a checkpoint of its own: pin_donor's pin_name is needed
    uint64_t pin_donor;
    char pin_name[64];
} s_member_t;

typedef struct {
    json_t *params;  // owned
    json_t *lineage; // owned
    json_t *record;  // the donor's checkpoint record it resumes from (owned)
    double score, t, last;
    uint64_t donor;
    char pin_name[64];
} s_child_t;

typedef struct {
    cgq_genome_t genome;
    s_member_t *m;
    size_t nm, capm;
    s_child_t *q;
    size_t nq, capq;
    uint64_t exploits;
    // warm_start: [[score oriented (higher better), order given, params]],
    // sorted best first at the first suggestion; fed again after a restart
    // (the same points, the same order), so trial i's point is the same.
    json_t *warm;
    bool warm_sorted;
    bool started; // suggested since this object was made (not saved)
} s_pbt_t;

static s_member_t *
s_member (s_pbt_t *x, uint64_t id)
{
    for (size_t i = 0; i < x->nm; i++)
        if (x->m[i].id == id)
            return &x->m[i];
    return NULL;
}

static s_member_t *
s_member_add (s_pbt_t *x, uint64_t id)
{
    if (x->nm == x->capm) {
        x->capm = x->capm ? 2 * x->capm : 8;
        x->m = cgq_xrealloc (x->m, x->capm * sizeof *x->m);
    }
    s_member_t *m = &x->m[x->nm++];
    memset (m, 0, sizeof *m);
    m->id = id;
    return m;
}

static void
s_member_fini (s_member_t *m)
{
    json_decref (m->params);
    json_decref (m->ckpt);
    json_decref (m->lineage);
}

static void
s_child_fini (s_child_t *c)
{
    json_decref (c->params);
    json_decref (c->lineage);
    json_decref (c->record);
}

static void
s_record_name (const json_t *rec, char *buf, size_t len)
{
    json_t *a = json_object_get (rec, "attempt"), *n = json_object_get (rec, "n");
    snprintf (buf, len, "ckpt-%lld-%lld", (long long)json_integer_value (a),
              (long long)json_integer_value (n));
}

// --- ranking and perturbation (pure) ------------------------------------------

// A scored member and its score oriented so that higher is better.
typedef struct {
    double key;
    const s_member_t *m;
} s_rank_t;

// s_rank_cmp orders best first; ties: the older trial (lower id) first.
static int
s_rank_cmp (const void *pa, const void *pb)
{
    const s_rank_t *a = pa, *b = pb;
    if (a->key != b->key)
        return a->key > b->key ? -1 : 1;
    return a->m->id < b->m->id ? -1 : a->m->id > b->m->id;
}

size_t
cgq_pbt_quantile_size (size_t n, double fraction)
{
    if (n <= 1)
        return 0;
    size_t k = (size_t)ceil ((double)n * fraction - 1e-12);
    if ((double)k > (double)n / 2)
        k = n / 2;
    return k;
}

// s_ranked fills order with the scored members, best first; returns how many.
static size_t
s_ranked (const cgq_searcher_t *self, const s_pbt_t *x, const s_member_t **order)
{
    s_rank_t *r = cgq_xcalloc (x->nm + 1, sizeof *r);
    size_t n = 0;
    for (size_t i = 0; i < x->nm; i++)
        if (x->m[i].scored && isfinite (x->m[i].score))
            r[n++] = (s_rank_t){x->m[i].score * self->spec->search.pbt.mode, &x->m[i]};
    qsort (r, n, sizeof *r, s_rank_cmp);
    for (size_t i = 0; i < n; i++)
        order[i] = r[i].m;
    free (r);
    return n;
}

static double
s_clamp (double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

// s_perturb_gene changes gene i of x as Ray's explore does: resampled with
// probability resample, else a categorical shifts to a neighbouring value
// and a number is multiplied by 1.2 or 0.8 (kept in its domain).
static void
s_perturb_gene (const cgq_genome_t *g, cgq_rng_t *r, double resample, double *x, size_t i,
                double *scratch)
{
    const cgq_gene_t *gene = &g->genes[i];
    if (cgq_rng_unit (r) < resample) {
        cgq_genome_random (g, r, scratch);
        x[i] = scratch[i];
        return;
    }
    double f = cgq_rng_below (r, 2) ? 1.2 : 0.8;
    switch (gene->kind) {
    case CGQ_GENE_INDEX: x[i] = s_clamp (x[i] + (f > 1 ? 1 : -1), 0, gene->n - 1); break;
    case CGQ_GENE_REAL: x[i] = s_clamp (x[i] * f, gene->lo, gene->hi); break;
    case CGQ_GENE_LOG: x[i] = s_clamp (x[i] + log (f), gene->lo, gene->hi); break;
    case CGQ_GENE_INT: {
        const cgq_param_t *p = gene->p;
        double base = p->kind == CGQ_PARAM_RANDINT ? p->lo : cgq_genome_q_first (p);
        double v = base + x[i], nv = round (v * f);
        if (nv == v) // 1 * 1.2 rounds back to 1: move one step the same way
            nv = v + (f > 1 ? 1 : -1);
        x[i] = s_clamp (nv - base, 0, gene->n - 1);
        break;
    }
    }
}

json_t *
cgq_pbt_perturb (const cgq_spec_t *spec, const cgq_genome_t *g, const json_t *params, cgq_rng_t *r,
                 json_t *changed)
{
    double *xv = cgq_xcalloc (g->ngenes + 1, sizeof *xv);
    double *scratch = cgq_xcalloc (g->ngenes + 1, sizeof *scratch);
    char err[256];
    if (cgq_genome_from_params (g, params, xv, err, sizeof err) < 0) {
        free (xv);
        free (scratch);
        return NULL;
    }
    for (size_t k = 0; k < spec->search.pbt.nmutations; k++) {
        size_t p = spec->search.pbt.mutations[k];
        for (size_t i = 0; i < g->count[p]; i++)
            s_perturb_gene (g, r, spec->search.pbt.resample, xv, g->first[p] + i, scratch);
    }
    cgq_genome_canon (g, xv);
    json_t *out = cgq_genome_params (g, xv);
    if (changed)
        for (size_t k = 0; k < spec->search.pbt.nmutations; k++) {
            const char *name = spec->params[spec->search.pbt.mutations[k]].name;
            json_t *a = json_object_get (params, name), *b = json_object_get (out, name);
            if (a && b && !json_equal (a, b))
                json_object_set_new (changed, name, json_pack ("[OO]", a, b));
        }
    free (xv);
    free (scratch);
    return out;
}

// --- the ops -------------------------------------------------------------------

static json_t *
s_num_or_null (bool has, double v)
{
    return has && isfinite (v) ? json_real (v) : json_null ();
}

static int
s_load_member (s_pbt_t *x, const json_t *o, char *err, size_t errlen)
{
    json_t *id = json_object_get (o, "id"), *params = json_object_get (o, "params");
    if (!json_is_integer (id) || !json_is_object (params)) {
        snprintf (err, errlen, "pbt state: a member without id or params");
        return -1;
    }
    s_member_t *m = s_member_add (x, (uint64_t)json_integer_value (id));
    json_t *sc = json_object_get (o, "score");
    m->scored = json_is_number (sc);
    m->score = m->scored ? json_number_value (sc) : NAN;
    m->t = json_number_value (json_object_get (o, "t"));
    m->last = json_number_value (json_object_get (o, "last"));
    m->params = json_incref (params);
    json_t *ck = json_object_get (o, "ckpt");
    m->ckpt = json_is_object (ck) ? json_incref (ck) : NULL;
    json_t *lin = json_object_get (o, "lineage");
    m->lineage = json_is_object (lin) ? json_incref (lin) : NULL;
    const char *pin = json_string_value (json_object_get (o, "pin"));
    if (pin) {
        m->pinned = true;
        m->pin_donor = (uint64_t)json_integer_value (json_object_get (o, "pin_donor"));
        snprintf (m->pin_name, sizeof m->pin_name, "%s", pin);
    }
    return 0;
}

static void
s_queue_push (s_pbt_t *x, const s_child_t *c)
{
    if (x->nq == x->capq) {
        x->capq = x->capq ? 2 * x->capq : 4;
        x->q = cgq_xrealloc (x->q, x->capq * sizeof *x->q);
    }
    x->q[x->nq++] = *c;
}

static int
s_init (cgq_searcher_t *self, const json_t *state, char *err, size_t errlen)
{
    s_pbt_t *x = cgq_xcalloc (1, sizeof *x);
    self->impl = x;
    self->total = 0; // unknown: each exploit adds a trial
    if (cgq_genome_init (&x->genome, self->spec, err, errlen) < 0)
        return -1;
    if (!state)
        return 0;
    json_t *next = json_object_get (state, "next");
    if (!json_is_integer (next) || json_integer_value (next) < 0) {
        snprintf (err, errlen, "pbt state without next");
        return -1;
    }
    self->suggested = (uint64_t)json_integer_value (next);
    x->exploits = (uint64_t)json_integer_value (json_object_get (state, "exploits"));
    size_t i;
    json_t *o;
    json_array_foreach (json_object_get (state, "members"), i, o)
    {
        if (s_load_member (x, o, err, errlen) < 0)
            return -1;
    }
    json_array_foreach (json_object_get (state, "queue"), i, o)
    {
        s_child_t c = {0};
        json_t *p = json_object_get (o, "params"), *l = json_object_get (o, "lineage"),
               *r = json_object_get (o, "record");
        if (!json_is_object (p) || !json_is_object (l) || !json_is_object (r)) {
            snprintf (err, errlen, "pbt state: a waiting child without params, lineage or record");
            return -1;
        }
        c.params = json_incref (p);
        c.lineage = json_incref (l);
        c.record = json_incref (r);
        json_t *sc = json_object_get (o, "score");
        c.score = json_is_number (sc) ? json_number_value (sc) : NAN;
        c.t = json_number_value (json_object_get (o, "t"));
        c.last = json_number_value (json_object_get (o, "last"));
        c.donor = (uint64_t)json_integer_value (json_object_get (o, "donor"));
        s_record_name (r, c.pin_name, sizeof c.pin_name);
        s_queue_push (x, &c);
    }
    return 0;
}

static void
s_fini (cgq_searcher_t *self)
{
    s_pbt_t *x = self->impl;
    if (!x)
        return;
    for (size_t i = 0; i < x->nm; i++)
        s_member_fini (&x->m[i]);
    for (size_t i = 0; i < x->nq; i++)
        s_child_fini (&x->q[i]);
    free (x->m);
    free (x->q);
    json_decref (x->warm);
    cgq_genome_fini (&x->genome);
    free (x);
    self->impl = NULL;
}

static bool
s_done (const cgq_searcher_t *self)
{
    const s_pbt_t *x = self->impl;
    return self->suggested >= self->spec->search.population && x->nq == 0 && x->nm == 0;
}

static int
s_warm_cmp (const void *pa, const void *pb)
{
    json_t *a = *(json_t *const *)pa, *b = *(json_t *const *)pb;
    double sa = json_number_value (json_array_get (a, 0)), sb = json_number_value (json_array_get (b, 0));
    if (sa != sb)
        return sa > sb ? -1 : 1;
    json_int_t ia = json_integer_value (json_array_get (a, 1)),
               ib = json_integer_value (json_array_get (b, 1));
    return ia < ib ? -1 : ia > ib;
}

// s_warm_sort orders the warm points best first (ties: in the order given).
static void
s_warm_sort (json_t *warm)
{
    size_t n = json_array_size (warm);
    json_t **v = cgq_xcalloc (n + 1, sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = json_incref (json_array_get (warm, i));
    qsort (v, n, sizeof *v, s_warm_cmp);
    json_array_clear (warm);
    for (size_t i = 0; i < n; i++)
        json_array_append_new (warm, v[i]);
    free (v);
}

// s_warm keeps a warm-start point for the first population: it must give
// every param of the space (the first members are whole configurations)
// and the ranking metric.
static int
s_warm (cgq_searcher_t *self, const json_t *params, const json_t *metrics, char *err, size_t errlen)
{
    s_pbt_t *x = self->impl;
    const cgq_spec_t *spec = self->spec;
    if (x->started) {
        snprintf (err, errlen, "warm-start points come before the job's first trial");
        return -1;
    }
    const char *metric = spec->search.pbt.metric ? spec->search.pbt.metric : spec->objective.metric;
    json_t *v = metric ? json_object_get (metrics, metric) : NULL;
    if (!json_is_number (v) || !isfinite (json_number_value (v))) {
        snprintf (err, errlen, "its metrics lack %s (what pbt ranks by), or it is not a finite number",
                  metric ? metric : "the ranking metric");
        return -1;
    }
    double *xv = cgq_xcalloc (x->genome.ngenes + 1, sizeof *xv);
    for (size_t p = 0; p < spec->nparams; p++)
        if (spec->params[p].name && !json_object_get (params, spec->params[p].name)) {
            snprintf (err, errlen, "no value for %s (pbt starts members from whole points)",
                      spec->params[p].name);
            free (xv);
            return -1;
        }
    if (cgq_genome_from_params (&x->genome, params, xv, err, errlen) < 0) {
        free (xv);
        return -1;
    }
    cgq_genome_canon (&x->genome, xv);
    json_t *p = cgq_genome_params (&x->genome, xv);
    free (xv);
    if (!x->warm)
        x->warm = json_array ();
    json_array_append_new (x->warm,
                           json_pack ("[f, I, o]", json_number_value (v) * spec->search.pbt.mode,
                                      (json_int_t)json_array_size (x->warm), p));
    x->warm_sorted = false;
    return 0;
}

static json_t *
s_suggest (cgq_searcher_t *self)
{
    s_pbt_t *x = self->impl;
    uint64_t id = self->suggested;
    x->started = true;
    if (id < self->spec->search.population && x->warm && id < json_array_size (x->warm)) {
        if (!x->warm_sorted) {
            s_warm_sort (x->warm);
            x->warm_sorted = true;
        }
        json_t *p = json_incref (json_array_get (json_array_get (x->warm, id), 2));
        s_member_t *m = s_member_add (x, id);
        m->params = json_incref (p);
        return p;
    }
    if (id < self->spec->search.population) {
        double *xv = cgq_xcalloc (x->genome.ngenes + 1, sizeof *xv);
        cgq_rng_t r;
        cgq_rng_seed (&r, self->spec->search.seed, id, 0x9b7);
        cgq_genome_random (&x->genome, &r, xv);
        cgq_genome_canon (&x->genome, xv);
        json_t *p = cgq_genome_params (&x->genome, xv);
        free (xv);
        s_member_t *m = s_member_add (x, id);
        m->params = json_incref (p);
        return p;
    }
    if (x->nq == 0)
        return NULL;
    s_child_t c = x->q[0];
    memmove (x->q, x->q + 1, (x->nq - 1) * sizeof *x->q);
    x->nq--;
    s_member_t *m = s_member_add (x, id);
    m->params = json_incref (c.params);
    m->lineage = c.lineage;
    m->scored = isfinite (c.score);
    m->score = c.score;
    m->t = c.t;
    m->last = c.last;
    m->ckpt = NULL;
    m->pinned = true;
    m->pin_donor = c.donor;
    snprintf (m->pin_name, sizeof m->pin_name, "%s", c.pin_name);
    // The child resumes from the donor's record: keep it as its checkpoint
    // until it has one of its own (cgq_searcher_pbt_child gives it out).
    json_t *rec = json_deep_copy (c.record);
    json_object_set_new (rec, "donor", json_integer ((json_int_t)c.donor));
    m->ckpt = rec;
    json_decref (c.record);
    return c.params;
}

static void
s_observe (cgq_searcher_t *self, uint64_t trial, const json_t *metrics, double value, bool ok)
{
    (void)metrics, (void)value, (void)ok;
    s_pbt_t *x = self->impl;
    for (size_t i = 0; i < x->nm; i++)
        if (x->m[i].id == trial) {
            s_member_fini (&x->m[i]);
            memmove (&x->m[i], &x->m[i + 1], (x->nm - i - 1) * sizeof *x->m);
            x->nm--;
            return;
        }
}

static void
s_save (const cgq_searcher_t *self, json_t *state)
{
    const s_pbt_t *x = self->impl;
    json_t *ms = json_array (), *qs = json_array ();
    for (size_t i = 0; i < x->nm; i++) {
        const s_member_t *m = &x->m[i];
        json_t *o = json_pack ("{s:I, s:o, s:f, s:f, s:O}", "id", (json_int_t)m->id, "score",
                               s_num_or_null (m->scored, m->score), "t", m->t, "last", m->last,
                               "params", m->params);
        if (m->ckpt)
            json_object_set (o, "ckpt", m->ckpt);
        if (m->lineage)
            json_object_set (o, "lineage", m->lineage);
        if (m->pinned) {
            json_object_set_new (o, "pin", json_string (m->pin_name));
            json_object_set_new (o, "pin_donor", json_integer ((json_int_t)m->pin_donor));
        }
        json_array_append_new (ms, o);
    }
    for (size_t i = 0; i < x->nq; i++) {
        const s_child_t *c = &x->q[i];
        json_array_append_new (qs, json_pack ("{s:O, s:O, s:O, s:o, s:f, s:f, s:I}", "params",
                                              c->params, "lineage", c->lineage, "record", c->record,
                                              "score", s_num_or_null (true, c->score), "t", c->t,
                                              "last", c->last, "donor", (json_int_t)c->donor));
    }
    json_object_set_new (state, "next", json_integer ((json_int_t)self->suggested));
    json_object_set_new (state, "exploits", json_integer ((json_int_t)x->exploits));
    json_object_set_new (state, "members", ms);
    json_object_set_new (state, "queue", qs);
}

const cgq_search_ops_t cgq_search_pbt_ops = {
    .init = s_init,
    .fini = s_fini,
    .suggest = s_suggest,
    .observe = s_observe,
    .replay = NULL,
    .done = s_done,
    .warm = s_warm,
    .save = s_save,
};

// --- the pbt calls of searcher.h ---------------------------------------------------

bool
cgq_searcher_pbt (const cgq_searcher_t *self)
{
    return self && self->ops == &cgq_search_pbt_ops;
}

void
cgq_searcher_pbt_report (cgq_searcher_t *self, uint64_t trial, double t, double score)
{
    if (!cgq_searcher_pbt (self) || !isfinite (score))
        return;
    s_member_t *m = s_member (self->impl, trial);
    if (!m)
        return;
    m->scored = true;
    m->score = score;
    m->t = t;
}

void
cgq_searcher_pbt_score (const cgq_searcher_t *self, uint64_t trial, double *t, double *score)
{
    *t = *score = NAN;
    if (!cgq_searcher_pbt (self))
        return;
    const s_member_t *m = s_member (self->impl, trial);
    if (m && m->scored) {
        *t = m->t;
        *score = m->score;
    }
}

static double
s_step_of (const cgq_searcher_t *self, const json_t *record)
{
    json_t *step = json_object_get (record, "step");
    json_t *v = json_object_get (step, self->spec->search.pbt.time_attr);
    if (json_is_number (v))
        return json_number_value (v);
    const char *k;
    json_object_foreach (step, k, v)
    {
        if (json_is_number (v))
            return json_number_value (v);
    }
    return NAN;
}

int
cgq_searcher_pbt_checkpoint (cgq_searcher_t *self, uint64_t trial, const json_t *record,
                             cgq_pbt_decision_t *d)
{
    memset (d, 0, sizeof *d);
    if (!cgq_searcher_pbt (self) || !json_is_object (record))
        return 0;
    s_pbt_t *x = self->impl;
    const cgq_spec_t *spec = self->spec;
    s_member_t *m = s_member (x, trial);
    double step = s_step_of (self, record);
    if (!m || !isfinite (step))
        return 0;
    json_decref (m->ckpt);
    m->ckpt = json_incref ((json_t *)record);
    m->pinned = false; // its own checkpoint: the donor's is not needed any more
    if (step - m->last < spec->search.pbt.interval)
        return 0;
    m->last = step;
    if (!m->scored)
        return 0;
    const s_member_t **order = cgq_xcalloc (x->nm + 1, sizeof *order);
    size_t n = s_ranked (self, x, order);
    size_t k = cgq_pbt_quantile_size (n, spec->search.pbt.quantile);
    bool bottom = false;
    for (size_t i = n - k; i < n && k; i++)
        bottom |= order[i] == m;
    // Donors: the top quantile's members that have a checkpoint of their own.
    const s_member_t *donors[64];
    size_t nd = 0;
    for (size_t i = 0; i < k && nd < 64; i++)
        if (order[i]->ckpt && !json_object_get (order[i]->ckpt, "donor"))
            donors[nd++] = order[i];
    snprintf (d->why, sizeof d->why, "rank among %zu scored, quantile %zu: %s", n, k,
              bottom ? "bottom" : "not bottom");
    if (!bottom || nd == 0) {
        free (order);
        return 0;
    }
    cgq_rng_t r;
    cgq_rng_seed (&r, spec->search.seed, trial, 0x7b7 + (uint64_t)llround (step));
    const s_member_t *donor = donors[cgq_rng_below (&r, nd)];
    json_t *changed = json_object ();
    json_t *params = cgq_pbt_perturb (spec, &x->genome, donor->params, &r, changed);
    if (!params) {
        json_decref (changed);
        free (order);
        return 0;
    }
    uint64_t child = spec->search.population + x->exploits;
    x->exploits++;
    char name[64];
    s_record_name (donor->ckpt, name, sizeof name);
    json_t *lineage = json_pack (
        "{s:I, s:I, s:O, s:s, s:o}", "parent", (json_int_t)donor->id, "replaces", (json_int_t)trial,
        "step", json_object_get (donor->ckpt, "step"), "checkpoint", name, "changed", changed);
    s_child_t c = {0};
    c.params = params;
    c.lineage = lineage;
    c.record = json_deep_copy (donor->ckpt);
    c.score = donor->scored ? donor->score : NAN;
    c.t = donor->t;
    c.last = s_step_of (self, donor->ckpt);
    c.donor = donor->id;
    snprintf (c.pin_name, sizeof c.pin_name, "%s", name);
    s_queue_push (x, &c);
    d->exploit = true;
    d->donor = donor->id;
    d->child = child;
    d->step = step;
    d->lineage = lineage; // borrowed from the queue
    snprintf (d->why, sizeof d->why,
              "in the bottom %zu of %zu scored (score %g at %s %g): continues as trial %llu from "
              "trial %llu's checkpoint %s",
              k, n, m->score, spec->search.pbt.time_attr, m->t, (unsigned long long)child,
              (unsigned long long)donor->id, name);
    free (order);
    return 1;
}

json_t *
cgq_searcher_pbt_child (cgq_searcher_t *self, uint64_t trial, json_t **record)
{
    *record = NULL;
    if (!cgq_searcher_pbt (self))
        return NULL;
    s_member_t *m = s_member (self->impl, trial);
    if (!m || !m->lineage)
        return NULL;
    if (m->ckpt && json_object_get (m->ckpt, "donor"))
        *record = m->ckpt;
    return m->lineage;
}

size_t
cgq_searcher_pbt_pins (const cgq_searcher_t *self, uint64_t donor, char names[][64], size_t max)
{
    if (!cgq_searcher_pbt (self))
        return 0;
    const s_pbt_t *x = self->impl;
    size_t n = 0;
    // Each name once: many children may continue the same checkpoint.
    for (size_t i = 0; i < x->nm + x->nq && n < max; i++) {
        const char *name = i < x->nm ? x->m[i].pin_name : x->q[i - x->nm].pin_name;
        bool pins = i < x->nm ? x->m[i].pinned && x->m[i].pin_donor == donor
                              : x->q[i - x->nm].donor == donor;
        bool seen = false;
        for (size_t k = 0; k < n && !seen; k++)
            seen = !strcmp (names[k], name);
        if (pins && !seen)
            snprintf (names[n++], 64, "%s", name);
    }
    return n;
}
