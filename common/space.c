// space: trial index → params without materialising anything. The grid part
// of an index is decoded as a mixed-radix number; the sampled part comes from
// a splitmix64 stream keyed by (seed, index), so any point can be regenerated
// alone, in any order, by any process.
#include "space.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "util.h"

// Counts stay below 2^63 so that they fit Redis integers and int64 fields.
#define S_MAX_COUNT ((uint64_t) INT64_MAX)

typedef struct {
    uint64_t state;
} s_rng_t;

static uint64_t
s_mix (uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

// s_rng_seed gives every (seed, index) its own stream: index is added after
// the seed is mixed, so nearby seeds and nearby indices share nothing.
static void
s_rng_seed (s_rng_t *r, uint64_t seed, uint64_t index)
{
    r->state = s_mix (s_mix (seed ^ 0x6a09e667f3bcc909ULL) + index);
}

static uint64_t
s_rng_next (s_rng_t *r)
{
    r->state += 0x9e3779b97f4a7c15ULL;
    return s_mix (r->state);
}

// s_rng_unit returns a double in [0, 1) with 53 random bits.
static double
s_rng_unit (s_rng_t *r)
{
    return (double) (s_rng_next (r) >> 11) * 0x1.0p-53;
}

// s_rng_below returns a uniform integer in [0, n) for n >= 1: rejection keeps
// it unbiased where a bare modulo would favour small values.
static uint64_t
s_rng_below (s_rng_t *r, uint64_t n)
{
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do
        x = s_rng_next (r);
    while (x >= limit);
    return x % n;
}

// --- sizes --------------------------------------------------------------------

// s_pow sets *out to base^exp; -1 if that exceeds S_MAX_COUNT.
static int
s_pow (uint64_t base, uint64_t exp, uint64_t *out)
{
    uint64_t r = 1;
    for (uint64_t i = 0; i < exp; i++) {
        if (base && r > S_MAX_COUNT / base)
            return -1;
        r *= base;
    }
    *out = r;
    return 0;
}

// s_q_value is the value k * q of a quantized param, without the rounding
// noise of the product (3 * 0.1 is 0.30000000000000004).
static double
s_q_value (const cgq_param_t *p, double k)
{
    double v = p->integral ? k * p->q : cgq_round15 (k * p->q);
    return v == 0 ? 0 : v; // no -0
}

// s_q_range sets the multipliers of a quantized param: its values are
// s_q_value (k) for k in [*kmin, *kmax] (none if kmin > kmax). The quotient
// lo / q may land just beside a whole number (0.3 / 0.1 = 2.9999999999999996),
// so the neighbours are judged by the value they would give.
static void
s_q_range (const cgq_param_t *p, double *kmin, double *kmax)
{
    double a = ceil (p->lo / p->q), b = floor (p->hi / p->q);
    if (s_q_value (p, a - 1) >= p->lo)
        a -= 1;
    if (s_q_value (p, b + 1) <= p->hi)
        b += 1;
    *kmin = a;
    *kmax = b;
}

int
cgq_space_param_size (const cgq_param_t *p, uint64_t *n)
{
    switch (p->kind) {
    case CGQ_PARAM_CONST:
        *n = 1;
        return 0;
    case CGQ_PARAM_CHOICE:
    case CGQ_PARAM_GRID:
        *n = json_array_size (p->values);
        return 0;
    case CGQ_PARAM_RANDINT: // the bounds lie within +-2^53
        *n = (uint64_t) ((int64_t) p->hi - (int64_t) p->lo) + 1;
        return 0;
    case CGQ_PARAM_QUNIFORM:
    case CGQ_PARAM_QLOGUNIFORM: {
        double kmin, kmax;
        s_q_range (p, &kmin, &kmax);
        if (kmax < kmin) {
            *n = 0;
            return 0;
        }
        // Beyond 2^53 multipliers are no longer exact doubles.
        if (!(kmax - kmin < 9007199254740992.0))
            return -1;
        *n = (uint64_t) (kmax - kmin) + 1;
        return 0;
    }
    case CGQ_PARAM_REPEAT: {
        uint64_t m;
        if (!p->of || cgq_space_param_size (p->of, &m) < 0)
            return -1;
        return s_pow (m, p->repeat, n);
    }
    case CGQ_PARAM_ASSIGNMENT:
        return s_pow (json_array_size (p->values), json_array_size (p->items), n);
    case CGQ_PARAM_UNIFORM:
    case CGQ_PARAM_LOGUNIFORM:
        break;
    }
    return -1;
}

bool
cgq_space_is_axis (const cgq_spec_t *spec, const cgq_param_t *p)
{
    // The searchers that learn search a grid param like a choice, and a list
    // gives its points: only random and grid enumerate axes.
    cgq_search_alg_t alg = spec->search.algorithm;
    if (alg != CGQ_SEARCH_RANDOM && alg != CGQ_SEARCH_GRID)
        return false;
    if (p->kind == CGQ_PARAM_GRID)
        return true;
    if (spec->search.algorithm != CGQ_SEARCH_GRID)
        return false;
    return p->kind == CGQ_PARAM_CHOICE || p->kind == CGQ_PARAM_ASSIGNMENT ||
           (p->kind == CGQ_PARAM_REPEAT && p->of &&
            (p->of->kind == CGQ_PARAM_CHOICE || p->of->kind == CGQ_PARAM_RANDINT));
}

// s_grid_size is the product of the axis sizes; -1 when over S_MAX_COUNT.
static int
s_grid_size (const cgq_spec_t *spec, uint64_t *size)
{
    uint64_t g = 1;
    for (size_t i = 0; i < spec->nparams; i++) {
        const cgq_param_t *p = &spec->params[i];
        if (!cgq_space_is_axis (spec, p))
            continue;
        uint64_t n;
        if (cgq_space_param_size (p, &n) < 0 || n == 0 || g > S_MAX_COUNT / n)
            return -1;
        g *= n;
    }
    *size = g;
    return 0;
}

int
cgq_space_count (const cgq_spec_t *spec, uint64_t *count)
{
    if (spec->search.algorithm == CGQ_SEARCH_LIST) {
        *count = json_array_size (spec->search.points);
        return 0;
    }
    uint64_t g;
    if (s_grid_size (spec, &g) < 0)
        return -1;
    uint64_t s = spec->search.samples ? spec->search.samples : 1;
    if (g > S_MAX_COUNT / s)
        return -1;
    *count = g * s;
    return 0;
}

int
cgq_space_check_limit (const cgq_spec_t *spec, uint64_t max, char *err, size_t errlen)
{
    uint64_t total = 0;
    if (cgq_space_count (spec, &total) < 0) {
        snprintf (err, errlen,
                  "the search has more than 2^63 trials, more than the limit of %llu (lower "
                  "search.samples or the grid, or raise cgq-coordinator --max-trials)",
                  (unsigned long long) max);
        return -1;
    }
    if (total > max) {
        snprintf (err, errlen,
                  "the search has %llu trials, more than the limit of %llu (lower search.samples "
                  "or the grid, or raise cgq-coordinator --max-trials)",
                  (unsigned long long) total, (unsigned long long) max);
        return -1;
    }
    return 0;
}

int
cgq_space_sampled_size (const cgq_spec_t *spec, uint64_t *d)
{
    uint64_t D = 1;
    for (size_t i = 0; i < spec->nparams; i++) {
        const cgq_param_t *p = &spec->params[i];
        if (p->kind == CGQ_PARAM_CONST || cgq_space_is_axis (spec, p))
            continue;
        uint64_t n;
        if (cgq_space_param_size (p, &n) < 0 || n == 0 || D > S_MAX_COUNT / n)
            return -1;
        D *= n;
    }
    *d = D;
    return 0;
}

bool
cgq_space_without_replacement (const cgq_spec_t *spec)
{
    uint64_t d;
    uint64_t s = spec->search.samples ? spec->search.samples : 1;
    return spec->search.algorithm == CGQ_SEARCH_RANDOM && cgq_space_sampled_size (spec, &d) == 0 &&
           s <= d;
}

// --- values ---------------------------------------------------------------------

static double
s_clamp (double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

// s_q_json is the value of a quantized param for multiplier k.
static json_t *
s_q_json (const cgq_param_t *p, double k)
{
    double v = s_clamp (s_q_value (p, k), p->lo, p->hi);
    return p->integral ? json_integer ((json_int_t) v) : json_real (v);
}

// s_assignment decodes id: digit k of id in base B, least significant first,
// picks the choice of item k.
static json_t *
s_assignment (const cgq_param_t *p, uint64_t id)
{
    size_t b = json_array_size (p->values), n = json_array_size (p->items);
    json_t *map = json_object ();
    uint64_t rest = id;
    for (size_t k = 0; k < n; k++) {
        json_object_set (map, json_string_value (json_array_get (p->items, k)),
                         json_array_get (p->values, (size_t) (rest % b)));
        rest /= b;
    }
    json_t *v = json_object ();
    json_object_set_new (v, "id", json_integer ((json_int_t) id));
    json_object_set_new (v, "map", map);
    return v;
}

// s_discrete returns value number d (< cgq_space_param_size) of a discrete
// param: the order in which a grid axis enumerates it.
static json_t *
s_discrete (const cgq_param_t *p, uint64_t d)
{
    switch (p->kind) {
    case CGQ_PARAM_CONST:
        return json_incref (p->value);
    case CGQ_PARAM_CHOICE:
    case CGQ_PARAM_GRID:
        return json_incref (json_array_get (p->values, (size_t) d));
    case CGQ_PARAM_RANDINT:
        return json_integer ((json_int_t) p->lo + (json_int_t) d);
    case CGQ_PARAM_QUNIFORM:
    case CGQ_PARAM_QLOGUNIFORM: {
        double kmin, kmax;
        s_q_range (p, &kmin, &kmax);
        return s_q_json (p, kmin + (double) d);
    }
    case CGQ_PARAM_REPEAT: {
        // Element 0 is the most significant digit: a grid varies the last
        // element fastest, as it does the last written axis.
        uint64_t m = 1, digit[CGQ_PARAM_MAX_REPEAT];
        cgq_space_param_size (p->of, &m);
        for (uint32_t i = p->repeat; i-- > 0;) {
            digit[i] = d % m;
            d /= m;
        }
        json_t *a = json_array ();
        for (uint32_t i = 0; i < p->repeat; i++)
            json_array_append_new (a, s_discrete (p->of, digit[i]));
        return a;
    }
    case CGQ_PARAM_ASSIGNMENT:
        return s_assignment (p, d);
    case CGQ_PARAM_UNIFORM:
    case CGQ_PARAM_LOGUNIFORM:
        break;
    }
    return json_null ();
}

// s_sample draws one value of a sampled param from r. The draws of the kinds
// that existed first (choice, uniform, loguniform, randint) must not change:
// they are what makes a spec's trials reproducible across versions.
static json_t *
s_sample (const cgq_param_t *p, s_rng_t *r)
{
    switch (p->kind) {
    case CGQ_PARAM_CONST:
        return json_incref (p->value);
    case CGQ_PARAM_CHOICE:
    case CGQ_PARAM_GRID:
        return json_incref (
            json_array_get (p->values, (size_t) s_rng_below (r, json_array_size (p->values))));
    case CGQ_PARAM_UNIFORM:
        return json_real (
            s_clamp (cgq_round15 (p->lo + s_rng_unit (r) * (p->hi - p->lo)), p->lo, p->hi));
    case CGQ_PARAM_LOGUNIFORM: {
        double l = log (p->lo), h = log (p->hi);
        return json_real (s_clamp (cgq_round15 (exp (l + s_rng_unit (r) * (h - l))), p->lo, p->hi));
    }
    case CGQ_PARAM_RANDINT: {
        // In integers: hi - lo in doubles can round when it exceeds 2^53.
        uint64_t span = (uint64_t) ((int64_t) p->hi - (int64_t) p->lo) + 1;
        return json_integer ((json_int_t) p->lo + (json_int_t) s_rng_below (r, span));
    }
    case CGQ_PARAM_QUNIFORM:
    case CGQ_PARAM_QLOGUNIFORM: {
        double u = s_rng_unit (r), x;
        if (p->kind == CGQ_PARAM_QUNIFORM)
            x = p->lo + u * (p->hi - p->lo);
        else {
            double l = log (p->lo), h = log (p->hi);
            x = exp (l + u * (h - l));
        }
        double kmin, kmax;
        s_q_range (p, &kmin, &kmax);
        return s_q_json (p, s_clamp (round (x / p->q), kmin, kmax));
    }
    case CGQ_PARAM_REPEAT: {
        json_t *a = json_array ();
        for (uint32_t i = 0; i < p->repeat; i++)
            json_array_append_new (a, s_sample (p->of, r));
        return a;
    }
    case CGQ_PARAM_ASSIGNMENT: {
        uint64_t n = 1;
        cgq_space_param_size (p, &n);
        return s_assignment (p, s_rng_below (r, n));
    }
    }
    return json_null ();
}

// --- sampling without replacement -------------------------------------------------

// s_perm returns the image of x under a pseudo-random permutation of
// [0, n) keyed by key: a balanced Feistel network on the smallest even number
// of bits that holds n - 1, with cycle walking back into [0, n). It is a
// bijection for every key, needs no state, and costs O(1) expected (the
// network's domain is less than 4n, so a walk takes under 4 steps on average).
static uint64_t
s_perm (uint64_t x, uint64_t n, uint64_t key)
{
    if (n <= 1)
        return 0;
    x %= n; // an index past the search wraps around instead of walking forever
    int bits = 64 - __builtin_clzll (n - 1); // n - 1 < 2^bits, bits <= 63
    int half = (bits + 1) / 2;               // <= 32
    uint64_t mask = (1ULL << half) - 1;
    do {
        uint64_t l = x >> half, r = x & mask;
        for (uint64_t i = 0; i < 6; i++) {
            uint64_t f = s_mix (r ^ s_mix (key + i * 0x9e3779b97f4a7c15ULL)) & mask;
            uint64_t t = l ^ f;
            l = r;
            r = t;
        }
        x = (l << half) | r;
    } while (x >= n);
    return x;
}

json_t *
cgq_space_point (const cgq_spec_t *spec, uint64_t index)
{
    uint64_t grid;
    if (s_grid_size (spec, &grid) < 0)
        return NULL;
    // The first axis varies slowest: its stride is grid / (its size), the
    // next one's stride is that divided by its own size, and so on.
    uint64_t g = index % grid;
    uint64_t stride = grid;
    s_rng_t rng;
    s_rng_seed (&rng, spec->search.seed, index);
    // Without replacement, sample s of every grid point is point perm(s) of
    // the sampled params, decoded like the grid: first written slowest.
    bool perm = cgq_space_without_replacement (spec);
    uint64_t point = 0, pstride = 1;
    if (perm) {
        cgq_space_sampled_size (spec, &pstride);
        point = s_perm (index / grid, pstride, s_mix (spec->search.seed ^ 0x243f6a8885a308d3ULL));
    }

    json_t *point_json = json_object ();
    for (size_t i = 0; i < spec->nparams; i++) {
        const cgq_param_t *p = &spec->params[i];
        json_t *v;
        uint64_t n = 1;
        if (cgq_space_is_axis (spec, p)) {
            cgq_space_param_size (p, &n);
            stride /= n;
            v = s_discrete (p, (g / stride) % n);
        }
        else if (perm && p->kind != CGQ_PARAM_CONST) {
            cgq_space_param_size (p, &n);
            pstride /= n;
            v = s_discrete (p, (point / pstride) % n);
        }
        else
            v = s_sample (p, &rng);
        json_object_set_new (point_json, p->name, v ? v : json_null ());
    }
    return point_json;
}
