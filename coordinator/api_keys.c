// api_keys: a job's trials ordered on one key each (see api_keys.h).
#include "api_keys.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

// Replies read per pipelined round trip.
#define S_CHUNK 1024
// Deepest nesting the scanner reads (jansson reads 2,048).
#define S_MAX_DEPTH 32

// --- one member of a JSON object, without building it --------------------------

static const char *
s_ws (const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    return p;
}

static bool
s_digit (char c)
{
    return c >= '0' && c <= '9';
}

// s_jstring reads the string at p (its '"'): *s and *len its bytes, which
// are its value (no escapes); NULL for what jansson must read.
static const char *
s_jstring (const char *p, const char **s, size_t *len)
{
    const char *b = ++p;
    for (;; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '"')
            break;
        if (c < 0x20 || c >= 0x80 || c == '\\') // the text's end (NUL) too
            return NULL;
    }
    *s = b;
    *len = (size_t)(p - b);
    return p + 1;
}

// s_jnumber reads the number at p as jansson does: an integer (no fraction,
// no exponent) with strtoll, a real with strtod.
static const char *
s_jnumber (const char *p, double *out)
{
    const char *b = p;
    bool real = false;
    if (*p == '-')
        p++;
    if (*p == '0') {
        if (s_digit (*++p))
            return NULL;
    }
    else if (*p >= '1' && *p <= '9') {
        while (s_digit (*p))
            p++;
    }
    else
        return NULL;
    if (*p == '.') {
        if (!s_digit (*++p))
            return NULL;
        while (s_digit (*p))
            p++;
        real = true;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (!s_digit (*p))
            return NULL;
        while (s_digit (*p))
            p++;
        real = true;
    }
    char *end;
    errno = 0;
    if (!real) {
        if (p - b - (*b == '-') > 18)
            return NULL; // may overflow json_int_t: jansson's call
        long long v = strtoll (b, &end, 10);
        if (end != p || errno)
            return NULL;
        *out = (double)v; // json_number_value of an integer
    }
    else {
        double v = strtod (b, &end);
        if (end != p || isinf (v) || isnan (v))
            return NULL;
        *out = v;
    }
    return p;
}

// s_jvalue reads the value at p (depth: its containers' count); with m,
// what it is.
static const char *
s_jvalue (const char *p, int depth, api_json_member_t *m)
{
    api_json_member_t v = {.kind = API_JSON_OTHER};
    switch (*p) {
    case '{':
    case '[': {
        if (depth >= S_MAX_DEPTH)
            return NULL;
        bool obj = *p == '{';
        char close = obj ? '}' : ']';
        p = s_ws (p + 1);
        if (*p != close)
            for (;;) {
                if (obj) {
                    const char *k;
                    size_t kl;
                    if (*p != '"' || !(p = s_jstring (p, &k, &kl)))
                        return NULL;
                    p = s_ws (p);
                    if (*p != ':')
                        return NULL;
                    p = s_ws (p + 1);
                }
                if (!(p = s_jvalue (p, depth + 1, NULL)))
                    return NULL;
                p = s_ws (p);
                if (*p == ',')
                    p = s_ws (p + 1);
                else if (*p == close)
                    break;
                else
                    return NULL;
            }
        p++;
        break;
    }
    case '"':
        v.kind = API_JSON_STRING;
        p = s_jstring (p, &v.str, &v.len);
        break;
    case 't':
    case 'f':
    case 'n': {
        static const char *const words[] = {"true", "false", "null"};
        int w = *p == 't' ? 0 : *p == 'f' ? 1 : 2;
        size_t wl = strlen (words[w]);
        if (strncmp (p, words[w], wl))
            return NULL;
        p += wl;
        v.kind = w == 2 ? API_JSON_MISSING : API_JSON_BOOL;
        v.num = w == 0;
        break;
    }
    default:
        v.kind = API_JSON_NUMBER;
        p = s_jnumber (p, &v.num);
        break;
    }
    if (p && m)
        *m = v;
    return p;
}

int
api_json_member (const char *text, const char *name, api_json_member_t *m)
{
    *m = (api_json_member_t){.kind = API_JSON_MISSING};
    const char *p = s_ws (text);
    if (*p != '{')
        return 0; // not an object, or no JSON: missing either way
    size_t nl = strlen (name);
    bool found = false;
    p = s_ws (p + 1);
    if (*p != '}')
        for (;;) {
            const char *k;
            size_t kl;
            if (*p != '"' || !(p = s_jstring (p, &k, &kl)))
                return -1;
            p = s_ws (p);
            if (*p != ':')
                return -1;
            p = s_ws (p + 1);
            bool hit = kl == nl && !memcmp (k, name, nl);
            if (hit && found)
                return -1; // jansson keeps the last: let it say
            api_json_member_t v;
            if (!(p = s_jvalue (p, 1, hit ? &v : NULL)))
                return -1;
            if (hit) {
                *m = v;
                found = true;
            }
            p = s_ws (p);
            if (*p == ',')
                p = s_ws (p + 1);
            else if (*p == '}')
                break;
            else
                return -1;
        }
    if (*s_ws (p + 1)) {
        *m = (api_json_member_t){.kind = API_JSON_MISSING};
        return -1;
    }
    return 0;
}

// --- the keys -------------------------------------------------------------------

// One trial's key: numbers (cls 0) before strings (1) before anything else
// (2); missing (3) last whichever the order; str: an offset in the arena.
typedef struct {
    uint64_t id;
    double num;
    size_t str;
    int8_t cls;
    int8_t ranked;
} s_ent_t;

typedef struct {
    s_ent_t *v;
    size_t n, cap;
    char *arena;
    size_t alen, acap;
} s_ents_t;

static size_t
s_arena_put (s_ents_t *e, const char *s, size_t len)
{
    if (e->alen + len + 1 > e->acap) {
        e->acap = (e->alen + len + 1) * 2;
        e->arena = cgq_xrealloc (e->arena, e->acap);
    }
    size_t at = e->alen;
    memcpy (e->arena + at, s, len);
    e->arena[at + len] = '\0';
    e->alen += len + 1;
    return at;
}

// s_json_key: member name of JSON text v (NULL: absent), as api.c's
// s_key_json reads it from jansson's object.
static void
s_json_key (s_ents_t *e, s_ent_t *k, const char *v, const char *name, bool numbers_only)
{
    api_json_member_t m = {.kind = API_JSON_MISSING};
    json_t *o = NULL;
    if (v && *v && api_json_member (v, name, &m) < 0) {
        o = json_loads (v, JSON_DECODE_ANY, NULL);
        json_t *x = json_is_object (o) ? json_object_get (o, name) : NULL;
        if (json_is_number (x))
            m = (api_json_member_t){.kind = API_JSON_NUMBER, .num = json_number_value (x)};
        else if (json_is_boolean (x))
            m = (api_json_member_t){.kind = API_JSON_BOOL, .num = json_is_true (x)};
        else if (json_is_string (x))
            m = (api_json_member_t){.kind = API_JSON_STRING,
                                    .str = json_string_value (x),
                                    .len = strlen (json_string_value (x))};
        else
            m = (api_json_member_t){.kind =
                                        x && !json_is_null (x) ? API_JSON_OTHER : API_JSON_MISSING};
    }
    if (numbers_only && m.kind != API_JSON_NUMBER)
        m.kind = API_JSON_MISSING;
    switch (m.kind) {
    case API_JSON_NUMBER:
    case API_JSON_BOOL:
        k->cls = 0;
        k->num = m.num;
        break;
    case API_JSON_STRING:
        k->cls = 1;
        k->str = s_arena_put (e, m.str, m.len);
        break;
    case API_JSON_OTHER: k->cls = 2; break;
    default: k->cls = 3; break;
    }
    json_decref (o);
}

// The fields each order reads (HMGET), the state first.
static const char *const s_fields[][5] = {
    [API_BY_RANK] = {CGQ_TF_STATE, CGQ_TF_VALUE, CGQ_TF_FEASIBLE, CGQ_TF_METRICS},
    [API_BY_ID] = {CGQ_TF_STATE},
    [API_BY_VALUE] = {CGQ_TF_STATE, CGQ_TF_VALUE, CGQ_TF_METRICS},
    [API_BY_STATE] = {CGQ_TF_STATE},
    [API_BY_STARTED] = {CGQ_TF_STATE, CGQ_TF_STARTED},
    [API_BY_FINISHED] = {CGQ_TF_STATE, CGQ_TF_FINISHED},
    [API_BY_NODE] = {CGQ_TF_STATE, CGQ_TF_NODE},
    [API_BY_PARAM] = {CGQ_TF_STATE, CGQ_TF_PARAMS},
    [API_BY_METRIC] = {CGQ_TF_STATE, CGQ_TF_METRICS},
};

// s_field: the value of fields[f] in an HMGET reply, NULL when absent.
static const char *
s_field (const redisReply *r, const char *const *fields, const char *name)
{
    for (size_t f = 0; f < r->elements && fields[f]; f++)
        if (!strcmp (fields[f], name))
            return r->element[f]->type == REDIS_REPLY_STRING ? r->element[f]->str : NULL;
    return NULL;
}

// s_value: the trial's value as cgq_trial_rec_from reads it: the value
// field, else the objective's metric when it is a number.
static bool
s_value (s_ents_t *e, const cgq_job_rec_t *job, const redisReply *r, const char *const *fields,
         double *out)
{
    const char *v = s_field (r, fields, CGQ_TF_VALUE);
    double d;
    if (v && cgq_parse_double (v, &d) == 0 && !isnan (d)) {
        *out = d;
        return true;
    }
    if (!job->metric)
        return false;
    s_ent_t k = {0};
    s_json_key (e, &k, s_field (r, fields, CGQ_TF_METRICS), job->metric, true);
    *out = k.num;
    return k.cls == 0;
}

// s_ent fills k from trial r's fields for order by.
static void
s_ent (s_ents_t *e, s_ent_t *k, const cgq_job_rec_t *job, api_by_t by, const char *name,
       const redisReply *r)
{
    const char *const *fields = s_fields[by];
    const char *state = s_field (r, fields, CGQ_TF_STATE);
    const char *v;
    double d;
    k->cls = 3;
    switch (by) {
    case API_BY_RANK: {
        bool has = s_value (e, job, r, fields, &d);
        const char *fs = s_field (r, fields, CGQ_TF_FEASIBLE);
        bool feasible = !(fs && *fs && !strcmp (fs, "0"));
        k->ranked = job->metric && has && feasible && state &&
                    !strcmp (state, cgq_tstate_names[CGQ_TRIAL_SUCCEEDED]);
        k->num = has ? d : 0;
        break;
    }
    case API_BY_ID: break;
    case API_BY_VALUE:
        if (s_value (e, job, r, fields, &d)) {
            k->cls = 0;
            k->num = d;
        }
        break;
    case API_BY_STATE:
        k->cls = 1;
        k->str = s_arena_put (e, state ? state : "", state ? strlen (state) : 0);
        break;
    case API_BY_STARTED:
    case API_BY_FINISHED:
        v = s_field (r, fields, by == API_BY_STARTED ? CGQ_TF_STARTED : CGQ_TF_FINISHED);
        if (v && cgq_parse_double (v, &d) == 0 && !isnan (d) && d > 0) {
            k->cls = 0;
            k->num = d;
        }
        break;
    case API_BY_NODE:
        v = s_field (r, fields, CGQ_TF_NODE);
        if (v && *v) {
            k->cls = 1;
            k->str = s_arena_put (e, v, strlen (v));
        }
        break;
    case API_BY_PARAM:
    case API_BY_METRIC:
        s_json_key (e, k, s_field (r, fields, by == API_BY_PARAM ? CGQ_TF_PARAMS : CGQ_TF_METRICS),
                    name, false);
        break;
    }
}

// s_u64_at writes v in decimal and a NUL at p (21 bytes at most).
static void
s_u64_at (char *p, uint64_t v)
{
    char tmp[21];
    size_t n = 0;
    do
        tmp[n++] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    while (n)
        *p++ = tmp[--n];
    *p = '\0';
}

typedef struct {
    api_by_t by;
    int sign, max;
    const char *arena;
} s_cmp_ctx_t;

// s_cmp is api.c's s_cmp on these keys.
static int
s_cmp (const void *a, const void *b, void *arg)
{
    const s_cmp_ctx_t *x = arg;
    const s_ent_t *p = a, *q = b;
    int byid = p->id < q->id ? -1 : p->id > q->id;
    if (x->by == API_BY_ID)
        return x->sign * byid;
    if (x->by == API_BY_RANK) {
        int c = 0;
        if (p->ranked != q->ranked)
            c = p->ranked ? -1 : 1;
        else if (p->ranked && p->num != q->num)
            c = (x->max ? p->num > q->num : p->num < q->num) ? -1 : 1;
        return x->sign * (c ? c : byid);
    }
    if (p->cls != q->cls)
        return p->cls < q->cls ? -1 : 1;
    int c = 0;
    if (p->cls == 0)
        c = p->num < q->num ? -1 : p->num > q->num;
    else if (p->cls == 1)
        c = strcmp (x->arena + p->str, x->arena + q->str);
    return c ? x->sign * c : byid;
}

int
api_keys_order (cgq_store_t *store, const cgq_job_rec_t *job, api_by_t by, const char *name,
                int sign, const char *state, uint64_t **ids, size_t *n)
{
    const char *const *fields = s_fields[by];
    char fmt[128] = "HMGET %s"; // the field names are ours, plain words
    for (size_t f = 0; fields[f]; f++)
        snprintf (fmt + strlen (fmt), sizeof fmt - strlen (fmt), " %s", fields[f]);
    s_ents_t e = {0};
    // The keys' common prefix once (cgq:job:{J}:trial:), each id appended
    // by hand: snprintf for 100,000 keys was a tenth of the sort.
    char key[96];
    cgq_key_trial (key, sizeof key, job->id, 0);
    size_t plen = strlen (key) - 1;
    bool fast_key = plen > 0 && key[plen] == '0' && plen + 21 < sizeof key;
    int rc = 0;
    uint64_t count = job->suggested;
    for (uint64_t base = 0; base < count && rc == 0; base += S_CHUNK) { // rc 1: an error reply
        uint64_t m = count - base < S_CHUNK ? count - base : S_CHUNK;
        for (uint64_t i = 0; i < m; i++) {
            if (fast_key)
                s_u64_at (key + plen, base + i);
            else
                cgq_key_trial (key, sizeof key, job->id, base + i);
            if (cgq_store_append (store, fmt, key) < 0) {
                rc = -1;
                break;
            }
        }
        for (uint64_t i = 0; i < m && rc >= 0; i++) { // every reply read, to stay in step
            redisReply *r = cgq_store_get_reply (store);
            if (!r) {
                rc = -1; // the connection is gone
                break;
            }
            if (r->type != REDIS_REPLY_ARRAY) {
                freeReplyObject (r);
                rc = 1; // an error reply: the rest still to read
                continue;
            }
            bool exists = false;
            for (size_t f = 0; f < r->elements; f++)
                exists = exists || r->element[f]->type == REDIS_REPLY_STRING;
            const char *st = s_field (r, fields, CGQ_TF_STATE);
            if (exists && (!state || (st && !strcmp (st, state)))) {
                if (e.n == e.cap) {
                    e.cap = e.cap ? e.cap * 2 : 1024;
                    e.v = cgq_xrealloc (e.v, e.cap * sizeof *e.v);
                }
                s_ent_t *k = &e.v[e.n++];
                *k = (s_ent_t){.id = base + i};
                s_ent (&e, k, job, by, name, r);
            }
            freeReplyObject (r);
        }
    }
    if (rc == 0) {
        s_cmp_ctx_t x = {.by = by, .sign = sign, .max = job->mode > 0, .arena = e.arena};
        if (e.n > 1)
            qsort_r (e.v, e.n, sizeof *e.v, s_cmp, &x);
        *ids = cgq_xcalloc (e.n + 1, sizeof **ids);
        for (size_t i = 0; i < e.n; i++)
            (*ids)[i] = e.v[i].id;
        *n = e.n;
    }
    free (e.v);
    free (e.arena);
    return rc == 0 ? 0 : -1;
}
