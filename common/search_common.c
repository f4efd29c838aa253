// search_common: what the searchers that learn share: a keyed random stream,
// genomes (points of the space as numbers) and a set of genome hashes. See
// search_impl.h.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "search_impl.h"
#include "space.h"
#include "util.h"

// --- random numbers -------------------------------------------------------------

static uint64_t
s_mix (uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void
cgq_rng_seed (cgq_rng_t *r, uint64_t seed, uint64_t trial, uint64_t purpose)
{
    r->state = s_mix (s_mix (s_mix (seed ^ 0x3c6ef372fe94f82bULL) + trial) + purpose);
}

uint64_t
cgq_rng_next (cgq_rng_t *r)
{
    r->state += 0x9e3779b97f4a7c15ULL;
    return s_mix (r->state);
}

double
cgq_rng_unit (cgq_rng_t *r)
{
    return (double) (cgq_rng_next (r) >> 11) * 0x1.0p-53;
}

uint64_t
cgq_rng_below (cgq_rng_t *r, uint64_t n)
{
    if (n <= 1)
        return 0;
    uint64_t limit = UINT64_MAX - UINT64_MAX % n, x;
    do
        x = cgq_rng_next (r);
    while (x >= limit);
    return x % n;
}

double
cgq_rng_normal (cgq_rng_t *r)
{
    double u = cgq_rng_unit (r), v = cgq_rng_unit (r);
    return sqrt (-2 * log (1 - u)) * cos (2 * M_PI * v);
}

// --- genomes ----------------------------------------------------------------------

static double
s_clamp (double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

// s_q_kmin is the multiplier of a quantized param's smallest value (k * q >=
// lo), judged by the value it gives as space.c judges it.
static double
s_q_kmin (const cgq_param_t *p)
{
    double a = ceil (p->lo / p->q);
    double va = p->integral ? (a - 1) * p->q : cgq_round15 ((a - 1) * p->q);
    return va >= p->lo ? a - 1 : a;
}

// s_q_value is value number d of a quantized param: (kmin + d) * q, as
// space.c computes it (without the rounding noise of the product).
static json_t *
s_q_value (const cgq_param_t *p, double d)
{
    double k = s_q_kmin (p) + d;
    double v = p->integral ? k * p->q : cgq_round15 (k * p->q);
    v = s_clamp (v == 0 ? 0 : v, p->lo, p->hi);
    return p->integral ? json_integer ((json_int_t) v) : json_real (v);
}

// s_gene fills one gene for param p (a param or a repeat's element).
static int
s_gene (cgq_gene_t *gene, const cgq_param_t *p, size_t param, const char *name, char *err,
        size_t errlen)
{
    memset (gene, 0, sizeof *gene);
    gene->p = p;
    gene->param = param;
    uint64_t n = 0;
    switch (p->kind) {
    case CGQ_PARAM_CHOICE:
    case CGQ_PARAM_GRID:
        gene->kind = CGQ_GENE_INDEX;
        gene->n = (double) json_array_size (p->values);
        return 0;
    case CGQ_PARAM_UNIFORM:
        gene->kind = CGQ_GENE_REAL;
        gene->lo = p->lo, gene->hi = p->hi;
        return 0;
    case CGQ_PARAM_LOGUNIFORM:
        gene->kind = CGQ_GENE_LOG;
        gene->lo = log (p->lo), gene->hi = log (p->hi);
        return 0;
    case CGQ_PARAM_RANDINT:
    case CGQ_PARAM_QUNIFORM:
    case CGQ_PARAM_QLOGUNIFORM:
        if (cgq_space_param_size (p, &n) < 0 || n == 0 || n > (1ULL << 53)) {
            snprintf (err, errlen,
                      "param %s has too many values for a searcher that learns (at most 2^53)",
                      name);
            return -1;
        }
        gene->kind = CGQ_GENE_INT;
        gene->n = (double) n;
        gene->logscale = p->kind == CGQ_PARAM_QLOGUNIFORM;
        return 0;
    default:
        break;
    }
    snprintf (err, errlen, "param %s has no gene", name);
    return -1;
}

int
cgq_genome_init (cgq_genome_t *g, const cgq_spec_t *spec, char *err, size_t errlen)
{
    memset (g, 0, sizeof *g);
    g->spec = spec;
    size_t total = 0;
    for (size_t i = 0; i < spec->nparams; i++) {
        const cgq_param_t *p = &spec->params[i];
        total += p->kind == CGQ_PARAM_CONST        ? 0
                 : p->kind == CGQ_PARAM_REPEAT     ? p->repeat
                 : p->kind == CGQ_PARAM_ASSIGNMENT ? json_array_size (p->items)
                                                   : 1;
    }
    g->genes = cgq_xcalloc (total ? total : 1, sizeof *g->genes);
    g->first = cgq_xcalloc (spec->nparams + 1, sizeof *g->first);
    g->count = cgq_xcalloc (spec->nparams + 1, sizeof *g->count);
    g->var = cgq_xcalloc (spec->nparams + 1, sizeof *g->var);
    for (size_t i = 0; i < spec->nparams; i++) {
        const cgq_param_t *p = &spec->params[i];
        g->first[i] = g->ngenes;
        if (p->kind == CGQ_PARAM_CONST)
            continue;
        if (p->kind == CGQ_PARAM_REPEAT) {
            for (uint32_t k = 0; k < p->repeat; k++)
                if (s_gene (&g->genes[g->ngenes++], p->of, i, p->name, err, errlen) < 0)
                    return -1;
        }
        else if (p->kind == CGQ_PARAM_ASSIGNMENT) {
            for (size_t k = 0; k < json_array_size (p->items); k++) {
                cgq_gene_t *gene = &g->genes[g->ngenes++];
                memset (gene, 0, sizeof *gene);
                gene->kind = CGQ_GENE_INDEX;
                gene->p = p;
                gene->param = i;
                gene->n = (double) json_array_size (p->values);
            }
        }
        else if (s_gene (&g->genes[g->ngenes++], p, i, p->name, err, errlen) < 0)
            return -1;
        g->count[i] = g->ngenes - g->first[i];
        g->var[g->nvar++] = i;
    }
    return 0;
}

void
cgq_genome_fini (cgq_genome_t *g)
{
    free (g->genes);
    free (g->first);
    free (g->count);
    free (g->var);
    memset (g, 0, sizeof *g);
}

static double
s_random_gene (const cgq_gene_t *gene, cgq_rng_t *r)
{
    switch (gene->kind) {
    case CGQ_GENE_INDEX:
        return (double) cgq_rng_below (r, (uint64_t) gene->n);
    case CGQ_GENE_INT:
        if (gene->logscale) {
            // As space.c draws a qloguniform: on a log scale, then to the nearest multiple.
            const cgq_param_t *p = gene->p;
            double l = log (p->lo), h = log (p->hi);
            double x = exp (l + cgq_rng_unit (r) * (h - l));
            return s_clamp (round (x / p->q) - s_q_kmin (p), 0, gene->n - 1);
        }
        return (double) cgq_rng_below (r, (uint64_t) gene->n);
    case CGQ_GENE_REAL:
    case CGQ_GENE_LOG:
        return gene->lo + cgq_rng_unit (r) * (gene->hi - gene->lo);
    }
    return 0;
}

void
cgq_genome_random (const cgq_genome_t *g, cgq_rng_t *r, double *x)
{
    for (size_t i = 0; i < g->ngenes; i++)
        x[i] = s_random_gene (&g->genes[i], r);
    cgq_genome_canon (g, x);
}

void
cgq_genome_mutate_gene (const cgq_genome_t *g, cgq_rng_t *r, double *x, size_t i)
{
    const cgq_gene_t *gene = &g->genes[i];
    switch (gene->kind) {
    case CGQ_GENE_INDEX:
        if (gene->n > 1) { // another value, each equally likely
            double o = (double) cgq_rng_below (r, (uint64_t) gene->n - 1);
            x[i] = o >= x[i] ? o + 1 : o;
        }
        break;
    case CGQ_GENE_INT:
        if (gene->n > 1) { // one step; at a bound, the only way left
            double step = cgq_rng_below (r, 2) ? 1 : -1;
            if (x[i] + step < 0 || x[i] + step > gene->n - 1)
                step = -step;
            x[i] += step;
        }
        break;
    case CGQ_GENE_REAL:
    case CGQ_GENE_LOG:
        // A tenth of the range: small enough to refine, large enough to move.
        x[i] = s_clamp (x[i] + 0.1 * (gene->hi - gene->lo) * cgq_rng_normal (r), gene->lo,
                        gene->hi);
        break;
    }
}

void
cgq_genome_mutate (const cgq_genome_t *g, cgq_rng_t *r, double *x)
{
    if (!g->nvar)
        return;
    size_t p = g->var[cgq_rng_below (r, g->nvar)];
    size_t i = g->first[p] + (size_t) cgq_rng_below (r, g->count[p]);
    cgq_genome_mutate_gene (g, r, x, i);
    cgq_genome_canon (g, x);
}

void
cgq_genome_canon (const cgq_genome_t *g, double *x)
{
    for (size_t i = 0; i < g->ngenes; i++) {
        const cgq_gene_t *gene = &g->genes[i];
        switch (gene->kind) {
        case CGQ_GENE_INDEX:
        case CGQ_GENE_INT:
            x[i] = s_clamp (floor (x[i]), 0, gene->n - 1);
            break;
        case CGQ_GENE_REAL:
            x[i] = s_clamp (cgq_round15 (x[i]), gene->p->lo, gene->p->hi);
            break;
        case CGQ_GENE_LOG:
            x[i] = log (s_clamp (cgq_round15 (exp (x[i])), gene->p->lo, gene->p->hi));
            break;
        }
    }
}

static json_t *
s_gene_json (const cgq_gene_t *gene, double v)
{
    const cgq_param_t *p = gene->p;
    switch (p->kind) {
    case CGQ_PARAM_CHOICE:
    case CGQ_PARAM_GRID:
        return json_incref (json_array_get (p->values, (size_t) v));
    case CGQ_PARAM_UNIFORM:
        return json_real (v);
    case CGQ_PARAM_LOGUNIFORM:
        return json_real (s_clamp (cgq_round15 (exp (v)), p->lo, p->hi));
    case CGQ_PARAM_RANDINT:
        return json_integer ((json_int_t) p->lo + (json_int_t) v);
    case CGQ_PARAM_QUNIFORM:
    case CGQ_PARAM_QLOGUNIFORM:
        return s_q_value (p, v);
    default:
        return json_null ();
    }
}

json_t *
cgq_genome_params (const cgq_genome_t *g, const double *x)
{
    const cgq_spec_t *spec = g->spec;
    json_t *o = json_object ();
    for (size_t i = 0; i < spec->nparams; i++) {
        const cgq_param_t *p = &spec->params[i];
        const double *gx = x + g->first[i];
        const cgq_gene_t *gene = &g->genes[g->first[i]];
        json_t *v;
        if (p->kind == CGQ_PARAM_CONST)
            v = json_incref (p->value);
        else if (p->kind == CGQ_PARAM_REPEAT) {
            v = json_array ();
            for (size_t k = 0; k < g->count[i]; k++)
                json_array_append_new (v, s_gene_json (&gene[k], gx[k]));
        }
        else if (p->kind == CGQ_PARAM_ASSIGNMENT) {
            // Digit k of the id in base B is item k's choice.
            uint64_t id = 0, b = json_array_size (p->values);
            json_t *map = json_object ();
            for (size_t k = g->count[i]; k-- > 0;)
                id = id * b + (uint64_t) gx[k];
            for (size_t k = 0; k < g->count[i]; k++)
                json_object_set (map, json_string_value (json_array_get (p->items, k)),
                                 json_array_get (p->values, (size_t) gx[k]));
            v = json_object ();
            json_object_set_new (v, "id", json_integer ((json_int_t) id));
            json_object_set_new (v, "map", map);
        }
        else
            v = s_gene_json (gene, gx[0]);
        json_object_set_new (o, p->name, v);
    }
    return o;
}

// s_gene_from reads one value of gene's param into *x.
static int
s_gene_from (const cgq_gene_t *gene, const json_t *v, double *x)
{
    const cgq_param_t *p = gene->p;
    switch (p->kind) {
    case CGQ_PARAM_CHOICE:
    case CGQ_PARAM_GRID:
        for (size_t j = 0; j < json_array_size (p->values); j++)
            if (json_equal (json_array_get (p->values, j), (json_t *) v)) {
                *x = (double) j;
                return 0;
            }
        return -1;
    case CGQ_PARAM_UNIFORM:
    case CGQ_PARAM_LOGUNIFORM:
        if (!json_is_number (v))
            return -1;
        *x = json_number_value (v);
        if (!(*x >= p->lo && *x <= p->hi))
            return -1;
        if (p->kind == CGQ_PARAM_LOGUNIFORM)
            *x = log (*x);
        return 0;
    case CGQ_PARAM_RANDINT:
        if (!json_is_number (v))
            return -1;
        *x = json_number_value (v) - p->lo;
        return *x >= 0 && *x < gene->n && *x == floor (*x) ? 0 : -1;
    case CGQ_PARAM_QUNIFORM:
    case CGQ_PARAM_QLOGUNIFORM:
        if (!json_is_number (v))
            return -1;
        *x = round (json_number_value (v) / p->q) - s_q_kmin (p);
        return *x >= 0 && *x < gene->n ? 0 : -1;
    default:
        return -1;
    }
}

int
cgq_genome_from_params (const cgq_genome_t *g, const json_t *params, double *x, char *err,
                        size_t errlen)
{
    const cgq_spec_t *spec = g->spec;
    for (size_t i = 0; i < spec->nparams; i++) {
        const cgq_param_t *p = &spec->params[i];
        if (p->kind == CGQ_PARAM_CONST)
            continue;
        const json_t *v = json_object_get (params, p->name);
        const cgq_gene_t *gene = &g->genes[g->first[i]];
        double *gx = x + g->first[i];
        int rc = v ? 0 : -1;
        if (rc == 0 && p->kind == CGQ_PARAM_REPEAT) {
            rc = json_is_array (v) && json_array_size (v) == g->count[i] ? 0 : -1;
            for (size_t k = 0; rc == 0 && k < g->count[i]; k++)
                rc = s_gene_from (&gene[k], json_array_get (v, k), &gx[k]);
        }
        else if (rc == 0 && p->kind == CGQ_PARAM_ASSIGNMENT) {
            const json_t *id = json_object_get (v, "id");
            uint64_t b = json_array_size (p->values), rest;
            rc = json_is_integer (id) && json_integer_value (id) >= 0 ? 0 : -1;
            rest = rc == 0 ? (uint64_t) json_integer_value (id) : 0;
            for (size_t k = 0; rc == 0 && k < g->count[i]; k++) {
                gx[k] = (double) (rest % b);
                rest /= b;
            }
            if (rest)
                rc = -1;
        }
        else if (rc == 0)
            rc = s_gene_from (gene, v, gx);
        if (rc < 0) {
            char *text = v ? cgq_json_dumps (v) : NULL;
            char *dom = cgq_spec_param_domain (p);
            snprintf (err, errlen,
                      "param %s = %s does not belong to the space of the spec (allowed: %s)",
                      p->name, text ? text : "(missing)", dom);
            free (text);
            free (dom);
            return -1;
        }
    }
    return 0;
}

void
cgq_genome_to_unit (const cgq_genome_t *g, const double *x, double *u)
{
    for (size_t i = 0; i < g->ngenes; i++) {
        const cgq_gene_t *gene = &g->genes[i];
        if (gene->kind == CGQ_GENE_INDEX || gene->kind == CGQ_GENE_INT)
            u[i] = (x[i] + 0.5) / gene->n;
        else
            u[i] = (x[i] - gene->lo) / (gene->hi - gene->lo);
        u[i] = s_clamp (u[i], 0, 1);
    }
}

void
cgq_genome_from_unit (const cgq_genome_t *g, const double *u, double *x)
{
    for (size_t i = 0; i < g->ngenes; i++) {
        const cgq_gene_t *gene = &g->genes[i];
        double v = s_clamp (u[i], 0, 1);
        if (gene->kind == CGQ_GENE_INDEX || gene->kind == CGQ_GENE_INT)
            x[i] = s_clamp (floor (v * gene->n), 0, gene->n - 1);
        else
            x[i] = gene->lo + v * (gene->hi - gene->lo);
    }
    cgq_genome_canon (g, x);
}

uint64_t
cgq_genome_hash (const cgq_genome_t *g, const double *x)
{
    uint64_t h = 0x84222325cbf29ce4ULL;
    for (size_t i = 0; i < g->ngenes; i++) {
        double v = x[i] == 0 ? 0 : x[i]; // -0 and 0 are one value
        uint64_t bits;
        memcpy (&bits, &v, sizeof bits);
        h = s_mix (h ^ bits) + i;
    }
    return h ? h : 1; // 0 marks an empty slot
}

bool
cgq_genome_finite (const cgq_genome_t *g, uint64_t *size)
{
    double s = 1;
    for (size_t i = 0; i < g->ngenes; i++) {
        if (g->genes[i].kind == CGQ_GENE_REAL || g->genes[i].kind == CGQ_GENE_LOG)
            return false;
        s *= g->genes[i].n;
    }
    *size = s >= 1.8e19 ? UINT64_MAX : (uint64_t) s;
    return true;
}

double
cgq_genome_q_first (const cgq_param_t *p)
{
    return s_q_kmin (p);
}

// --- hash set -----------------------------------------------------------------------

static void
s_hset_grow (cgq_hset64_t *s)
{
    size_t cap = s->cap ? 2 * s->cap : 64;
    uint64_t *slots = cgq_xcalloc (cap, sizeof *slots);
    for (size_t i = 0; i < s->cap; i++) {
        uint64_t h = s->slots[i];
        if (!h)
            continue;
        size_t j = (size_t) h & (cap - 1);
        while (slots[j])
            j = (j + 1) & (cap - 1);
        slots[j] = h;
    }
    free (s->slots);
    s->slots = slots;
    s->cap = cap;
}

bool
cgq_hset64_has (const cgq_hset64_t *s, uint64_t h)
{
    if (!s->cap)
        return false;
    for (size_t j = (size_t) h & (s->cap - 1); s->slots[j]; j = (j + 1) & (s->cap - 1))
        if (s->slots[j] == h)
            return true;
    return false;
}

bool
cgq_hset64_add (cgq_hset64_t *s, uint64_t h)
{
    if (cgq_hset64_has (s, h))
        return false;
    if (2 * (s->n + 1) > s->cap)
        s_hset_grow (s);
    size_t j = (size_t) h & (s->cap - 1);
    while (s->slots[j])
        j = (j + 1) & (s->cap - 1);
    s->slots[j] = h;
    s->n++;
    return true;
}

void
cgq_hset64_fini (cgq_hset64_t *s)
{
    free (s->slots);
    memset (s, 0, sizeof *s);
}

// --- states -------------------------------------------------------------------------

int
cgq_search_state_ids (const json_t *state, const char *key, uint64_t next, uint64_t **ids,
                      size_t *n, char *err, size_t errlen)
{
    *ids = NULL;
    *n = 0;
    const json_t *a = state ? json_object_get (state, key) : NULL;
    if (!a)
        return 0;
    if (!json_is_array (a)) {
        snprintf (err, errlen, "searcher state has %s that is not a list of trial ids (the state "
                               "belongs to another version; resubmit the job)",
                  key);
        return -1;
    }
    *ids = cgq_xcalloc (json_array_size (a) + 1, sizeof **ids);
    for (size_t i = 0; i < json_array_size (a); i++) {
        const json_t *e = json_array_get (a, i);
        if (!json_is_integer (e) || json_integer_value (e) < 0 ||
            (uint64_t) json_integer_value (e) >= next) {
            snprintf (err, errlen,
                      "searcher state has %s[%zu] that is not a trial id below %llu (the state "
                      "belongs to another spec; resubmit the job)",
                      key, i, (unsigned long long) next);
            free (*ids);
            *ids = NULL;
            return -1;
        }
        (*ids)[(*n)++] = (uint64_t) json_integer_value (e);
    }
    return 0;
}

bool
cgq_search_objectives (const cgq_spec_t *spec, const json_t *metrics, double value, double *out)
{
    if (spec->nobjectives == 1 && isfinite (value)) {
        out[0] = value;
        return true;
    }
    if (!metrics || !spec->nobjectives)
        return false;
    if (cgq_spec_objective_values (spec, metrics, out, NULL, 0) < 0)
        return false;
    for (size_t i = 0; i < spec->nobjectives; i++)
        if (!isfinite (out[i]))
            return false;
    return true;
}

double
cgq_search_violation (const cgq_spec_t *spec, const json_t *metrics)
{
    if (!spec->nconstraints || !metrics)
        return 0;
    double total = 0;
    cgq_spec_feasible (spec, metrics, &total, NULL, NULL);
    return total;
}

void
cgq_search_rows_reserve (uint64_t n, size_t d, size_t *cap, double **x, double **y,
                         double **viol, uint8_t **st)
{
    if (n <= *cap)
        return;
    size_t c = *cap ? *cap : 64;
    while (c < n)
        c *= 2;
    *x = cgq_xrealloc (*x, c * (d ? d : 1) * sizeof **x);
    *y = cgq_xrealloc (*y, c * sizeof **y);
    *viol = cgq_xrealloc (*viol, c * sizeof **viol);
    *st = cgq_xrealloc (*st, c);
    memset (*st + *cap, 0, c - *cap);
    *cap = c;
}
