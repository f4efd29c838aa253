// api: the dashboard's JSON API, read from Redis (see api.h).
#include "api.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_charts.h"
#include "api_keys.h"
#include "keyspace.h"
#include "util.h"

// Replies read per pipelined round trip when a whole job is loaded.
#define S_CHUNK 512
// Largest offset accepted (more is a bad request, not a slow empty page).
#define S_MAX_OFFSET 1000000000ULL

// --- JSON helpers -------------------------------------------------------------

// s_str is s as a JSON string, null for NULL; bytes that are not UTF-8 (a
// node id, an error from a trial's stderr) become '?' rather than dropping
// the whole text.
static json_t *
s_str (const char *s)
{
    if (!s)
        return json_null ();
    json_t *j = json_string (s);
    if (j)
        return j;
    char *c = cgq_xstrdup (s);
    for (char *p = c; *p; p++)
        if ((unsigned char)*p >= 0x80)
            *p = '?';
    j = json_string (c);
    free (c);
    return j ? j : json_null ();
}

static json_t *
s_num (bool has, double v)
{
    return has && isfinite (v) ? json_real (v) : json_null ();
}

static json_t *
s_copy_or (const json_t *v, json_t *dflt)
{
    if (!v)
        return dflt;
    json_decref (dflt);
    return json_deep_copy (v);
}

static int
s_answer (json_t *doc, int status, char **body)
{
    *body = json_dumps (doc, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref (doc);
    if (!*body) {
        *body = cgq_xstrdup ("{\"error\":\"the answer could not be encoded\"}");
        return 500;
    }
    return status;
}

static int s_error (int status, char **body, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
static int
s_error (int status, char **body, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    char *msg = cgq_xvasprintf (fmt, ap);
    va_end (ap);
    json_t *doc = json_pack ("{s:o}", "error", s_str (msg));
    free (msg);
    return s_answer (doc, status, body);
}

// s_u64 parses a decimal number of at most max; false for anything else.
static bool
s_u64 (const char *s, uint64_t max, uint64_t *out)
{
    if (!s || !*s || strlen (s) > 20)
        return false;
    for (const char *p = s; *p; p++)
        if (!isdigit ((unsigned char)*p))
            return false;
    errno = 0;
    unsigned long long v = strtoull (s, NULL, 10);
    if (errno || v > max)
        return false;
    *out = v;
    return true;
}

// --- reading Redis ------------------------------------------------------------
// The CLI's readers (cli/view.c) belong to another program; these few are
// the dashboard's own, on the same records (common/keyspace.h).

// s_hgetall runs HGETALL key: 1 and *r (caller frees) when the hash
// exists, 0 when absent, -1 on an I/O or Redis error.
static int
s_hgetall (cgq_store_t *store, const char *key, redisReply **out)
{
    redisReply *r = cgq_store_command (store, "HGETALL %s", key);
    if (!r || r->type != REDIS_REPLY_ARRAY) {
        if (r)
            freeReplyObject (r);
        return -1;
    }
    if (r->elements == 0) {
        freeReplyObject (r);
        return 0;
    }
    *out = r;
    return 1;
}

// s_reports reads trial's report stream (oldest first) as a JSON array of
// its report objects; NULL on an error.
static json_t *
s_reports (cgq_store_t *store, uint64_t job, uint64_t trial)
{
    char key[96];
    cgq_key_reports (key, sizeof key, job, trial);
    redisReply *r = cgq_store_command (store, "XRANGE %s - +", key);
    if (!r || r->type != REDIS_REPLY_ARRAY) {
        if (r)
            freeReplyObject (r);
        return NULL;
    }
    json_t *out = json_array ();
    for (size_t i = 0; i < r->elements; i++) { // [id, [field, value, ...]]
        const redisReply *e = r->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 2 ||
            e->element[1]->type != REDIS_REPLY_ARRAY)
            continue;
        const redisReply *f = e->element[1];
        for (size_t k = 0; k + 1 < f->elements; k += 2) {
            if (f->element[k]->type != REDIS_REPLY_STRING ||
                strcmp (f->element[k]->str, CGQ_REPORT_FIELD) ||
                f->element[k + 1]->type != REDIS_REPLY_STRING)
                continue;
            json_t *o = json_loads (f->element[k + 1]->str, 0, NULL);
            if (json_is_object (o))
                json_array_append_new (out, o);
            else
                json_decref (o);
        }
    }
    freeReplyObject (r);
    return out;
}

// --- records as JSON ----------------------------------------------------------

static json_t *
s_objective (const cgq_job_rec_t *j)
{
    if (!j->metric)
        return json_null ();
    return json_pack ("{s:o,s:s}", "metric", s_str (j->metric), "mode",
                      j->mode > 0 ? "max" : "min");
}

static json_t *
s_job_json (const cgq_job_rec_t *j, bool full)
{
    json_t *o = json_object ();
    json_object_set_new (o, "job", json_integer ((json_int_t)j->id));
    json_object_set_new (o, "name", s_str (j->name));
    json_object_set_new (o, "state", s_str (j->state));
    json_object_set_new (o, "objective", s_objective (j));
    json_t *counts = json_object ();
    for (int k = 0; k < CGQ_TRIAL_NSTATES; k++)
        json_object_set_new (counts, cgq_tstate_names[k], json_integer ((json_int_t)j->counts[k]));
    json_object_set_new (o, "counts", counts);
    json_object_set_new (o, "done", json_integer ((json_int_t)cgq_job_rec_done (j)));
    json_object_set_new (o, "total", j->total >= 0 ? json_integer (j->total) : json_null ());
    json_object_set_new (o, "suggested", json_integer ((json_int_t)j->suggested));
    json_object_set_new (o, "best",
                         j->has_best ? json_pack ("{s:I,s:o}", "trial", (json_int_t)j->best_trial,
                                                  "value", s_num (true, j->best_value))
                                     : json_null ());
    json_object_set_new (o, "created", s_num (j->created > 0, j->created));
    json_object_set_new (o, "finished", s_num (j->finished > 0, j->finished));
    double end = j->finished > 0 ? j->finished : cgq_wall_s ();
    json_object_set_new (o, "duration", s_num (j->created > 0, end - j->created));
    json_object_set_new (o, "error", s_str (j->error));
    json_object_set_new (o, "blocked", s_str (j->blocked));
    if (full) {
        json_object_set_new (o, "searcher", s_str (j->searcher));
        json_object_set_new (o, "spec_path", s_str (j->spec_path));
        json_object_set_new (o, "spec", s_str (j->spec));
    }
    return o;
}

// s_trial_json: the fields of `cgq results --format json` (cli/show.c), under
// the same names and with the same nulls, plus value and duration.
static json_t *
s_trial_json (const cgq_trial_rec_t *t)
{
    json_t *o = json_object ();
    json_object_set_new (o, "id", json_integer ((json_int_t)t->id));
    json_object_set_new (o, "state", s_str (t->state));
    json_object_set_new (o, "params", s_copy_or (t->params, json_object ()));
    json_object_set_new (o, "metrics", s_copy_or (t->metrics, json_null ()));
    json_object_set_new (o, "attempts", json_integer (cgq_trial_rec_tries (t)));
    json_object_set_new (o, "node", s_str (t->node));
    json_object_set_new (o, "started", s_num (t->has_started, t->started));
    json_object_set_new (o, "finished", s_num (t->has_finished, t->finished));
    json_object_set_new (o, "error", s_str (t->error));
    json_object_set_new (o, "warning", s_str (t->warning));
    if (t->feasible >= 0) {
        json_object_set_new (o, "feasible", json_boolean (t->feasible));
        json_object_set_new (o, "violation", s_copy_or (t->violation, json_null ()));
    }
    if (t->stages) {
        json_object_set_new (o, "stage", json_integer (t->stage));
        json_object_set_new (o, "stages", json_deep_copy (t->stages));
    }
    if (t->runs)
        json_object_set_new (o, "runs", json_deep_copy (t->runs));
    json_object_set_new (o, "value", s_num (t->has_value, t->value));
    double run;
    bool has_run = cgq_trial_rec_run_time (t, &run);
    json_object_set_new (o, "duration", s_num (has_run, run));
    return o;
}

// --- loading trials -------------------------------------------------------------

typedef struct {
    cgq_trial_rec_t **v;
    size_t n, cap;
} s_trials_t;

static void
s_trials_free (s_trials_t *ts)
{
    for (size_t i = 0; i < ts->n; i++)
        cgq_trial_rec_destroy (&ts->v[i]);
    free (ts->v);
    memset (ts, 0, sizeof *ts);
}

// Which trials s_load reads: lo, lo+step, ... (count of them; step +1 or
// -1), or the count ids given.
typedef struct {
    const uint64_t *ids; // NULL: the range
    uint64_t lo, count;
    int step;
} s_which_t;

static uint64_t
s_which_id (const s_which_t *w, uint64_t i)
{
    return w->ids ? w->ids[i] : w->lo + (uint64_t)w->step * i;
}

// s_load reads the trials w names with pipelined HGETALLs, skipping absent
// ones; state (NULL: any) filters. With fields (nfields of them, the first
// CGQ_TF_STATE) it reads only those, with HMGET: records enough to sort
// on, without the log tails and errors that make up most of a big job.
static int
s_load (cgq_store_t *store, const cgq_job_rec_t *job, const s_which_t *w, const char *state,
        const char *const *fields, size_t nfields, s_trials_t *out)
{
    char key[96];
    redisReply kv[2 * 16];
    redisReply *pairs[2 * 16];
    if (nfields > 16)
        nfields = 16;
    // "HMGET %s f1 f2 ...": the field names are ours, plain words.
    char fmt[256] = "HMGET %s";
    for (size_t f = 0; fields && f < nfields; f++)
        snprintf (fmt + strlen (fmt), sizeof fmt - strlen (fmt), " %s", fields[f]);
    for (uint64_t base = 0; base < w->count; base += S_CHUNK) {
        uint64_t m = w->count - base < S_CHUNK ? w->count - base : S_CHUNK;
        for (uint64_t i = 0; i < m; i++) {
            cgq_key_trial (key, sizeof key, job->id, s_which_id (w, base + i));
            if (cgq_store_append (store, fields ? fmt : "HGETALL %s", key) < 0)
                return -1;
        }
        int rc = 0;
        for (uint64_t i = 0; i < m; i++) { // every reply read, to stay in step
            redisReply *r = cgq_store_get_reply (store);
            if (!r)
                return -1;
            const redisReply *h = r;
            redisReply fake = {.type = REDIS_REPLY_ARRAY, .element = pairs};
            if (r->type != REDIS_REPLY_ARRAY)
                rc = -1;
            else if (fields) { // HMGET's values as the field/value pairs of HGETALL
                for (size_t f = 0; f < nfields && f < r->elements; f++) {
                    if (r->element[f]->type != REDIS_REPLY_STRING)
                        continue;
                    kv[fake.elements] = (redisReply){.type = REDIS_REPLY_STRING,
                                                     .str = (char *)fields[f],
                                                     .len = strlen (fields[f])};
                    pairs[fake.elements] = &kv[fake.elements];
                    fake.elements++;
                    pairs[fake.elements++] = r->element[f];
                }
                h = &fake;
            }
            if (rc == 0 && h->elements > 0) {
                const char *st = cgq_hash_get (h, CGQ_TF_STATE);
                if (!state || (st && !strcmp (st, state))) {
                    if (out->n == out->cap) {
                        out->cap = out->cap ? out->cap * 2 : 64;
                        out->v = cgq_xrealloc (out->v, out->cap * sizeof *out->v);
                    }
                    out->v[out->n++] = cgq_trial_rec_from (job, s_which_id (w, base + i), h);
                }
            }
            freeReplyObject (r);
        }
        if (rc < 0)
            return -1;
    }
    return 0;
}

// --- sorting --------------------------------------------------------------------

typedef enum {
    S_RANK,
    S_ID,
    S_VALUE,
    S_STATE,
    S_STARTED,
    S_FINISHED,
    S_DURATION,
    S_ATTEMPTS,
    S_NODE,
    S_PARAM,
    S_METRIC
} s_sort_t;

static const char *const s_sort_names[] = {"rank",     "id",       "value",    "state", "started",
                                           "finished", "duration", "attempts", "node"};

typedef struct {
    s_sort_t by;
    const char *name; // params.X / metrics.X: X
    int sign;         // +1 asc, -1 desc
} s_sort_ctx_t;

// s_cmp orders the trials by what only their whole records say (duration:
// their stage runs; attempts): every other order is api_keys.c's, which
// reads one key a trial. A trial without the key (no run time yet) goes
// last whichever the order; ties by id.
static bool
s_whole_key (const s_sort_ctx_t *x, const cgq_trial_rec_t *t, double *k)
{
    if (x->by == S_ATTEMPTS) {
        *k = cgq_trial_rec_tries (t);
        return true;
    }
    return cgq_trial_rec_run_time (t, k);
}

static int
s_cmp (const void *a, const void *b, void *arg)
{
    const s_sort_ctx_t *x = arg;
    const cgq_trial_rec_t *p = *(cgq_trial_rec_t *const *)a;
    const cgq_trial_rec_t *q = *(cgq_trial_rec_t *const *)b;
    int byid = p->id < q->id ? -1 : p->id > q->id;
    double kp = 0, kq = 0;
    bool hp = s_whole_key (x, p, &kp), hq = s_whole_key (x, q, &kq);
    if (hp != hq)
        return hp ? -1 : 1;
    int c = hp ? (kp < kq ? -1 : kp > kq) : 0;
    return c ? x->sign * c : byid;
}

// --- a best-first page from the leaderboard --------------------------------------

typedef struct {
    uint64_t id;
    double score;
} s_ranked_t;

static int
s_ranked_cmp (const void *a, const void *b, void *arg)
{
    const s_ranked_t *p = a, *q = b;
    int max = *(const int *)arg > 0;
    if (p->score != q->score)
        return (max ? p->score > q->score : p->score < q->score) ? -1 : 1;
    return p->id < q->id ? -1 : p->id > q->id;
}

// s_rank_page: the ids of a best-first page that lies within the ranked
// trials, read from the sorted set the coordinator keeps of them
// (cgq:job:{J}:leaderboard, the feasible succeeded trials by value) instead
// of sorting every trial: the page's range, widened to every member tied
// with its ends (Redis orders ties by member text, s_cmp by id), ordered as
// s_cmp orders them. Returns 1 with *ids (caller frees) and *n, 0 when the
// page reaches past the ranked trials (the caller sorts), -1 on a Redis error.
static int
s_rank_page (cgq_store_t *store, const cgq_job_rec_t *job, uint64_t offset, uint64_t count,
             uint64_t **ids, size_t *n)
{
    char key[96];
    cgq_key_leaderboard (key, sizeof key, job->id);
    bool max = job->mode > 0;
    redisReply *card = cgq_store_command (store, "ZCARD %s", key);
    if (!card)
        return -1;
    uint64_t ranked = card->type == REDIS_REPLY_INTEGER ? (uint64_t)card->integer : 0;
    freeReplyObject (card);
    if (count == 0 || offset + count > ranked)
        return 0;
    redisReply *r = cgq_store_command (store, max ? "ZREVRANGE %s %llu %llu WITHSCORES"
                                                  : "ZRANGE %s %llu %llu WITHSCORES",
                                       key, (unsigned long long)offset,
                                       (unsigned long long)(offset + count - 1));
    if (!r)
        return -1;
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 || r->elements % 2) {
        freeReplyObject (r); // changed under us: the caller sorts
        return 0;
    }
    char first[64], last[64];
    snprintf (first, sizeof first, "%s", r->element[1]->str ? r->element[1]->str : "0");
    snprintf (last, sizeof last, "%s", r->element[r->elements - 1]->str
                                           ? r->element[r->elements - 1]->str : "0");
    freeReplyObject (r);
    // Members better than the first score come before the widened range.
    redisReply *before = cgq_store_command (store, max ? "ZCOUNT %s (%s +inf" : "ZCOUNT %s -inf (%s",
                                            key, first);
    redisReply *ties = cgq_store_command (store, max ? "ZREVRANGEBYSCORE %s %s %s WITHSCORES"
                                                     : "ZRANGEBYSCORE %s %s %s WITHSCORES",
                                          key, first, last);
    int rc = 0;
    if (!before || !ties)
        rc = -1;
    else if (before->type == REDIS_REPLY_INTEGER && ties->type == REDIS_REPLY_ARRAY
             && (uint64_t)before->integer <= offset) {
        size_t m = ties->elements / 2;
        s_ranked_t *v = cgq_xcalloc (m + 1, sizeof *v);
        for (size_t i = 0; i < m; i++) {
            v[i].id = strtoull (ties->element[2 * i]->str, NULL, 10);
            v[i].score = strtod (ties->element[2 * i + 1]->str, NULL);
        }
        int mode = max ? 1 : -1;
        qsort_r (v, m, sizeof *v, s_ranked_cmp, &mode);
        size_t skip = (size_t)(offset - (uint64_t)before->integer);
        if (skip + count <= m) {
            *ids = cgq_xcalloc (count + 1, sizeof **ids);
            for (size_t i = 0; i < count; i++)
                (*ids)[i] = v[skip + i].id;
            *n = count;
            rc = 1;
        }
        free (v);
    }
    freeReplyObject (before);
    freeReplyObject (ties);
    return rc;
}

// --- the order of a job's trials, kept -----------------------------------------
// Sorting a big job reads all of it. A job that has ended no longer changes,
// so the order of its trials (ids only: 8 bytes a trial) is kept for the
// next poll, keyed by what it was sorted on and by the job's counts (a
// cancelled job's trials may still end after it). A running job's order is
// kept too, but only for a while: S_ORDER_DUTY times what computing it took
// (a small job's, a few ms, is as good as fresh), so that pages polling a
// big running job read
// all of it at most 1/S_ORDER_DUTY of the time, leaving Redis to the
// coordinator (a page of a 300,000-trial job polled every second cost the
// coordinator a quarter of its no-op rate before; docs/performance.md). Its
// page's trials are still read fresh; only their ranks may be that old. A
// few orders, shared by the HTTP threads under a mutex; the least recently
// used goes.

#define S_ORDERS 8
#define S_ORDER_DUTY 20

typedef struct {
    uint64_t job, stamp, used;
    char *how; // sign, state and sort, 0x1f between
    uint64_t *ids;
    size_t n;
    int64_t at_ms, cost_ms; // when it was computed, and what that took
} s_order_t;

static pthread_mutex_t s_orders_mu = PTHREAD_MUTEX_INITIALIZER;
static s_order_t s_orders[S_ORDERS];
static uint64_t s_orders_clock;

// s_order_fresh: whether kept order o still stands for job at now_ms (an
// ended job's while its counts are the same; a running job's for a while).
static bool
s_order_fresh (const s_order_t *o, const cgq_job_rec_t *job, bool ended, int64_t now_ms)
{
    if (ended)
        return o->stamp == api_job_stamp (job);
    return now_ms - o->at_ms < o->cost_ms * S_ORDER_DUTY;
}

// s_order_get copies the kept order into *ids (caller frees); false: none.
static bool
s_order_get (const cgq_job_rec_t *job, bool ended, const char *how, uint64_t **ids, size_t *n)
{
    bool hit = false;
    int64_t now = cgq_now_ms ();
    pthread_mutex_lock (&s_orders_mu);
    for (int i = 0; i < S_ORDERS && !hit; i++) {
        s_order_t *o = &s_orders[i];
        if (o->how && o->job == job->id && !strcmp (o->how, how)
            && s_order_fresh (o, job, ended, now)) {
            *ids = cgq_xcalloc (o->n + 1, sizeof **ids);
            memcpy (*ids, o->ids, o->n * sizeof **ids);
            *n = o->n;
            o->used = ++s_orders_clock;
            hit = true;
        }
    }
    pthread_mutex_unlock (&s_orders_mu);
    return hit;
}

// s_order_put keeps a copy of order (n ids), computed from t0_ms on.
static void
s_order_put (const cgq_job_rec_t *job, const char *how, const uint64_t *order, size_t n,
             int64_t t0_ms)
{
    uint64_t *ids = cgq_xcalloc (n + 1, sizeof *ids);
    memcpy (ids, order, n * sizeof *ids);
    pthread_mutex_lock (&s_orders_mu);
    s_order_t *o = &s_orders[0];
    for (int i = 1; i < S_ORDERS; i++)
        if (s_orders[i].used < o->used)
            o = &s_orders[i];
    free (o->how);
    free (o->ids);
    *o = (s_order_t){.job = job->id,
                     .stamp = api_job_stamp (job),
                     .used = ++s_orders_clock,
                     .how = cgq_xstrdup (how),
                     .ids = ids,
                     .n = n,
                     .at_ms = t0_ms,
                     .cost_ms = cgq_now_ms () - t0_ms};
    pthread_mutex_unlock (&s_orders_mu);
}

// --- the endpoints --------------------------------------------------------------

static int
s_store_error (cgq_store_t *store, char **body)
{
    return s_error (503, body, "cannot read Redis: %s", cgq_store_errstr (store));
}

static int
s_jobs (cgq_store_t *store, const api_query_t *q, char **body)
{
    uint64_t offset = 0, limit = API_DEFAULT_LIMIT;
    if (q->offset && !s_u64 (q->offset, S_MAX_OFFSET, &offset))
        return s_error (400, body, "offset must be a number from 0 to %llu",
                        (unsigned long long)S_MAX_OFFSET);
    if (q->limit && (!s_u64 (q->limit, API_MAX_LIMIT, &limit) || limit == 0))
        return s_error (400, body, "limit must be a number from 1 to %d", API_MAX_LIMIT);
    redisReply *card = cgq_store_command (store, "ZCARD %s", CGQ_KEY_JOBS);
    if (!card || card->type != REDIS_REPLY_INTEGER) {
        if (card)
            freeReplyObject (card);
        return s_store_error (store, body);
    }
    long long total = card->integer;
    freeReplyObject (card);
    redisReply *ids =
        cgq_store_command (store, "ZREVRANGE %s %llu %llu", CGQ_KEY_JOBS,
                           (unsigned long long)offset, (unsigned long long)(offset + limit - 1));
    if (!ids || ids->type != REDIS_REPLY_ARRAY) {
        if (ids)
            freeReplyObject (ids);
        return s_store_error (store, body);
    }
    json_t *jobs = json_array ();
    char key[64];
    size_t sent = 0, valid = 0; // a member that is no job id is skipped
    bool ok = true;
    for (size_t i = 0; i < ids->elements && ok; i++) {
        uint64_t id;
        if (ids->element[i]->type != REDIS_REPLY_STRING ||
            !s_u64 (ids->element[i]->str, UINT64_MAX, &id))
            continue;
        valid++;
        cgq_key_job (key, sizeof key, id);
        if (cgq_store_append (store, "HGETALL %s", key) < 0)
            ok = false;
        else
            sent++;
    }
    ok = ok && sent == valid;
    for (size_t i = 0, k = 0; i < ids->elements && k < sent; i++) {
        uint64_t id;
        if (ids->element[i]->type != REDIS_REPLY_STRING ||
            !s_u64 (ids->element[i]->str, UINT64_MAX, &id))
            continue;
        k++;
        redisReply *r = cgq_store_get_reply (store);
        if (!r) {
            ok = false;
            break;
        }
        if (r->type == REDIS_REPLY_ARRAY && r->elements > 0) {
            cgq_job_rec_t *j = cgq_job_rec_from (id, r);
            json_array_append_new (jobs, s_job_json (j, false));
            cgq_job_rec_destroy (&j);
        }
        freeReplyObject (r);
    }
    freeReplyObject (ids);
    if (!ok) {
        json_decref (jobs);
        return s_store_error (store, body);
    }
    json_t *doc = json_pack ("{s:I,s:I,s:I,s:o}", "total", (json_int_t)total, "offset",
                             (json_int_t)offset, "limit", (json_int_t)limit, "jobs", jobs);
    return s_answer (doc, 200, body);
}

// s_job_load loads job id or answers 404/503 (returns 0 when *job is set).
static int
s_job_load (cgq_store_t *store, uint64_t id, cgq_job_rec_t **job, char **body)
{
    char key[64];
    redisReply *r = NULL;
    int rc = s_hgetall (store, cgq_key_job (key, sizeof key, id), &r);
    if (rc < 0)
        return s_store_error (store, body);
    if (rc == 0)
        return s_error (404, body, "no job %" PRIu64, id);
    *job = cgq_job_rec_from (id, r);
    freeReplyObject (r);
    return 0;
}

static int
s_trials (cgq_store_t *store, const cgq_job_rec_t *job, const api_query_t *q, char **body)
{
    uint64_t offset = 0, limit = API_DEFAULT_LIMIT;
    if (q->offset && !s_u64 (q->offset, S_MAX_OFFSET, &offset))
        return s_error (400, body, "offset must be a number from 0 to %llu",
                        (unsigned long long)S_MAX_OFFSET);
    if (q->limit && (!s_u64 (q->limit, API_MAX_LIMIT, &limit) || limit == 0))
        return s_error (400, body, "limit must be a number from 1 to %d", API_MAX_LIMIT);
    s_sort_ctx_t x = {.by = S_RANK, .sign = 1};
    const char *sort = q->sort ? q->sort : "rank";
    if (!strncmp (sort, "params.", 7) && sort[7]) {
        x.by = S_PARAM;
        x.name = sort + 7;
    }
    else if (!strncmp (sort, "metrics.", 8) && sort[8]) {
        x.by = S_METRIC;
        x.name = sort + 8;
    }
    else {
        size_t k = 0, nk = sizeof s_sort_names / sizeof *s_sort_names;
        while (k < nk && strcmp (sort, s_sort_names[k]))
            k++;
        if (k == nk)
            return s_error (400, body,
                            "sort must be rank, id, value, state, started, finished, duration, "
                            "attempts, node, params.NAME or metrics.NAME");
        x.by = (s_sort_t)k;
    }
    if (q->order && strcmp (q->order, "asc") && strcmp (q->order, "desc"))
        return s_error (400, body, "order must be asc or desc");
    if (q->order && !strcmp (q->order, "desc"))
        x.sign = -1;
    if (q->state && cgq_tstate_parse (q->state) < 0)
        return s_error (400, body,
                        "state must be one of pending, running, succeeded, failed, stopped, "
                        "cancelled, unschedulable, stale");

    s_trials_t ts = {0};
    uint64_t total;
    int rc;
    if (x.by == S_ID && !q->state) {
        // Ids are 0 .. suggested-1: read only the page.
        total = job->suggested;
        uint64_t count = offset < total ? total - offset : 0;
        if (count > limit)
            count = limit;
        s_which_t w = {
            .lo = x.sign > 0 ? offset : total - 1 - offset, .step = x.sign, .count = count};
        rc = s_load (store, job, &w, NULL, NULL, 0, &ts);
    }
    else {
        // Every trial, filtered and sorted here on what the order needs
        // (one key a trial, api_keys.h; all of each trial only when the
        // order needs its stage runs); then the page's trials are read whole.
        bool whole = x.by == S_DURATION || x.by == S_ATTEMPTS;
        bool ended = cgq_job_rec_terminal (job);
        char *how = cgq_xasprintf ("%d\x1f%s\x1f%s", x.sign, q->state ? q->state : "", sort);
        uint64_t *order = NULL;
        size_t n = 0;
        rc = 0;
        // Best first, a page among the ranked trials: from the leaderboard,
        // whatever the job's size (a running job's dashboard polls this).
        uint64_t want = offset < job->suggested ? job->suggested - offset : 0;
        int fast = x.by == S_RANK && x.sign > 0 && !q->state && job->metric
                       ? s_rank_page (store, job, offset, want < limit ? want : limit, &order, &n)
                       : 0;
        if (fast < 0)
            rc = -1;
        else if (fast > 0) {
            s_which_t page = {.ids = order, .count = n};
            rc = s_load (store, job, &page, NULL, NULL, 0, &ts);
            free (order);
            free (how);
            total = job->suggested;
            goto loaded;
        }
        if (rc == 0 && !whole && !s_order_get (job, ended, how, &order, &n)) {
            // One key a trial (api_keys.h): what the order needs, no records.
            static const api_by_t by[] = {
                [S_RANK] = API_BY_RANK,       [S_ID] = API_BY_ID,
                [S_VALUE] = API_BY_VALUE,     [S_STATE] = API_BY_STATE,
                [S_STARTED] = API_BY_STARTED, [S_FINISHED] = API_BY_FINISHED,
                [S_NODE] = API_BY_NODE,       [S_PARAM] = API_BY_PARAM,
                [S_METRIC] = API_BY_METRIC};
            int64_t t0 = cgq_now_ms ();
            rc = api_keys_order (store, job, by[x.by], x.name, x.sign, q->state, &order, &n);
            if (rc == 0)
                s_order_put (job, how, order, n, t0);
        }
        else if (rc == 0 && whole && !s_order_get (job, ended, how, &order, &n)) {
            // Duration and attempts need each trial's stage runs: whole records.
            int64_t t0 = cgq_now_ms ();
            s_which_t all = {.lo = 0, .step = 1, .count = job->suggested};
            rc = s_load (store, job, &all, q->state, NULL, 0, &ts);
            if (rc == 0 && ts.n > 1)
                qsort_r (ts.v, ts.n, sizeof *ts.v, s_cmp, &x);
            n = ts.n;
            order = cgq_xcalloc (n + 1, sizeof *order);
            for (size_t i = 0; i < n; i++)
                order[i] = ts.v[i]->id;
            if (rc == 0)
                s_order_put (job, how, order, n, t0);
            s_trials_free (&ts);
        }
        free (how);
        total = n;
        if (rc == 0) {
            size_t lo = offset < n ? (size_t)offset : n;
            size_t hi = n - lo > limit ? lo + limit : n;
            s_which_t page = {.ids = order + lo, .count = hi - lo};
            rc = s_load (store, job, &page, NULL, NULL, 0, &ts);
        }
        free (order);
    }
loaded:
    if (rc < 0) {
        s_trials_free (&ts);
        return s_store_error (store, body);
    }
    json_t *arr = json_array ();
    for (size_t i = 0; i < ts.n; i++)
        json_array_append_new (arr, s_trial_json (ts.v[i]));
    s_trials_free (&ts);
    json_t *doc = json_pack ("{s:I,s:I,s:I,s:I,s:s,s:s,s:o,s:o}", "job", (json_int_t)job->id,
                             "total", (json_int_t)total, "offset", (json_int_t)offset, "limit",
                             (json_int_t)limit, "sort", sort, "order", x.sign > 0 ? "asc" : "desc",
                             "state", s_str (q->state), "trials", arr);
    return s_answer (doc, 200, body);
}

// s_field is the value of field name in an HGETALL reply (NULL: absent).
static const char *
s_field (const redisReply *h, const char *name)
{
    for (size_t i = 0; i + 1 < h->elements; i += 2)
        if (h->element[i]->type == REDIS_REPLY_STRING && !strcmp (h->element[i]->str, name))
            return h->element[i + 1]->type == REDIS_REPLY_STRING ? h->element[i + 1]->str
                                                                 : NULL;
    return NULL;
}

// s_trial_extra: what a trial's page shows beyond its results row, from its
// hash: the latest checkpoint recorded (or null) and how many a next
// attempt may resume from, where it was paused, pbt's lineage and exploit.
static json_t *
s_trial_extra (const redisReply *h)
{
    json_t *o = json_object ();
    const char *json_fields[] = {CGQ_TF_CHECKPOINT, CGQ_TF_LINEAGE, CGQ_TF_EXPLOITED};
    for (size_t i = 0; i < sizeof json_fields / sizeof *json_fields; i++) {
        const char *v = s_field (h, json_fields[i]);
        json_t *j = v ? json_loads (v, 0, NULL) : NULL;
        json_object_set_new (o, json_fields[i], json_is_object (j) ? j : json_null ());
        if (j && !json_is_object (j))
            json_decref (j);
    }
    const char *list = s_field (h, CGQ_TF_CHECKPOINTS);
    json_t *l = list ? json_loads (list, 0, NULL) : NULL;
    json_object_set_new (o, "checkpoints",
                         json_integer (json_is_array (l) ? (json_int_t)json_array_size (l) : 0));
    json_decref (l);
    json_object_set_new (o, CGQ_TF_PAUSED, s_str (s_field (h, CGQ_TF_PAUSED)));
    return o;
}

static int
s_trial (cgq_store_t *store, const cgq_job_rec_t *job, uint64_t id, char **body)
{
    char key[96];
    redisReply *r = NULL;
    int rc = s_hgetall (store, cgq_key_trial (key, sizeof key, job->id, id), &r);
    if (rc < 0)
        return s_store_error (store, body);
    if (rc == 0)
        return s_error (404, body, "job %" PRIu64 " has no trial %" PRIu64, job->id, id);
    cgq_trial_rec_t *t = cgq_trial_rec_from (job, id, r);
    json_t *extra = s_trial_extra (r);
    freeReplyObject (r);
    json_t *reports = s_reports (store, job->id, id);
    if (!reports) {
        cgq_trial_rec_destroy (&t);
        json_decref (extra);
        return s_store_error (store, body);
    }
    json_t *o = s_trial_json (t);
    json_object_update (o, extra);
    json_decref (extra);
    json_object_set_new (o, "job", json_integer ((json_int_t)job->id));
    json_object_set_new (o, "log", s_str (t->log));
    json_object_set_new (o, "trial_dir", s_str (t->trial_dir));
    json_object_set_new (o, "gpus", s_str (t->gpus));
    json_t *last = t->last_report ? json_loads (t->last_report, 0, NULL) : NULL;
    json_object_set_new (o, "last_report", last ? last : json_null ());
    json_object_set_new (o, "reports", reports);
    cgq_trial_rec_destroy (&t);
    return s_answer (o, 200, body);
}

static json_t *
s_node_json (const cgq_node_rec_t *nd)
{
    json_t *o = json_object ();
    json_object_set_new (o, "id", s_str (nd->id));
    json_object_set_new (o, "kind", s_str (nd->kind));
    json_object_set_new (o, "state", s_str (nd->state));
    json_object_set_new (o, "hostname", s_str (nd->hostname));
    json_object_set_new (o, "cpus", s_num (true, nd->cpus));
    json_object_set_new (o, "free_cpus", s_num (true, nd->free_cpus));
    json_object_set_new (o, "gpus", s_num (true, nd->gpus));
    json_object_set_new (o, "free_gpus", s_num (true, nd->free_gpus));
    json_object_set_new (o, "running", json_integer ((json_int_t)nd->running));
    json_object_set_new (o, "connected", json_boolean (nd->connected));
    json_object_set_new (o, "last_seen", s_num (nd->has_last_seen, nd->last_seen));
    return o;
}

static int
s_cmp_str (const void *a, const void *b)
{
    return strcmp (*(char *const *)a, *(char *const *)b);
}

static json_t *
s_node_rec_json (const char *id, const redisReply *h)
{
    cgq_node_rec_t *nd = cgq_node_rec_from (id, h);
    json_t *o = s_node_json (nd);
    cgq_node_rec_destroy (&nd);
    return o;
}

static json_t *
s_device_rec_json (const char *id, const redisReply *h)
{
    cgq_device_rec_t *d = cgq_device_rec_from (id, h);
    json_t *o = json_object ();
    json_object_set_new (o, "id", s_str (d->id));
    json_object_set_new (o, "node", s_str (*d->node ? d->node : NULL));
    json_object_set_new (o, "state", s_str (d->state));
    json_t *tags = json_loads (d->tags, 0, NULL);
    json_object_set_new (o, "tags", json_is_object (tags) ? tags : json_object ());
    if (tags && !json_is_object (tags))
        json_decref (tags);
    json_object_set_new (o, "task", s_str (*d->task ? d->task : NULL));
    json_object_set_new (o, "failures", json_integer ((json_int_t)d->failures));
    json_object_set_new (o, "quarantined", json_boolean (d->quarantined));
    json_object_set_new (o, "last_error", s_str (*d->last_error ? d->last_error : NULL));
    json_object_set_new (o, "updated", s_num (d->has_updated, d->updated));
    cgq_device_rec_destroy (&d);
    return o;
}

// s_members reads the hash of every member of the set set_key (key names
// it), by id, as JSON (rec); NULL on an error.
static json_t *
s_members (cgq_store_t *store, const char *set_key, char *(*key) (char *, size_t, const char *),
           json_t *(*rec) (const char *, const redisReply *))
{
    redisReply *ids = cgq_store_command (store, "SMEMBERS %s", set_key);
    if (!ids || ids->type != REDIS_REPLY_ARRAY) {
        if (ids)
            freeReplyObject (ids);
        return NULL;
    }
    size_t m = 0;
    char **names = cgq_xcalloc (ids->elements ? ids->elements : 1, sizeof *names);
    for (size_t i = 0; i < ids->elements; i++)
        if (ids->element[i]->type == REDIS_REPLY_STRING)
            names[m++] = ids->element[i]->str; // borrowed from ids
    qsort (names, m, sizeof *names, s_cmp_str);
    char k[512];
    size_t sent = 0;
    for (; sent < m; sent++)
        if (cgq_store_append (store, "HGETALL %s", key (k, sizeof k, names[sent])) < 0)
            break;
    bool ok = sent == m;
    json_t *arr = json_array ();
    for (size_t i = 0; i < sent; i++) {
        redisReply *h = cgq_store_get_reply (store);
        if (!h) {
            ok = false;
            break;
        }
        if (h->type == REDIS_REPLY_ARRAY && h->elements > 0)
            json_array_append_new (arr, rec (names[i], h));
        freeReplyObject (h);
    }
    free (names);
    freeReplyObject (ids);
    if (!ok) {
        json_decref (arr);
        return NULL;
    }
    return arr;
}

static int
s_nodes (cgq_store_t *store, char **body)
{
    json_t *arr = s_members (store, CGQ_KEY_NODES, cgq_key_node, s_node_rec_json);
    if (!arr)
        return s_store_error (store, body);
    return s_answer (json_pack ("{s:o}", "nodes", arr), 200, body);
}

static int
s_devices (cgq_store_t *store, char **body)
{
    json_t *arr = s_members (store, CGQ_KEY_DEVICES, cgq_key_device, s_device_rec_json);
    if (!arr)
        return s_store_error (store, body);
    return s_answer (json_pack ("{s:o}", "devices", arr), 200, body);
}

// s_front: a job with several objectives: its current Pareto front
// (cgq:job:{J}:pareto), by trial id, each with its objective values.
static int
s_front (cgq_store_t *store, const cgq_job_rec_t *job, char **body)
{
    char key[64];
    redisReply *r =
        cgq_store_command (store, "HGETALL %s", cgq_key_pareto (key, sizeof key, job->id));
    if (!r || r->type != REDIS_REPLY_ARRAY) {
        if (r)
            freeReplyObject (r);
        return s_store_error (store, body);
    }
    size_t n = r->elements / 2, m = 0;
    uint64_t *ids = cgq_xcalloc (n + 1, sizeof *ids);
    const redisReply **vals = cgq_xcalloc (n + 1, sizeof *vals);
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        uint64_t id;
        if (r->element[i]->type == REDIS_REPLY_STRING &&
            r->element[i + 1]->type == REDIS_REPLY_STRING &&
            s_u64 (r->element[i]->str, UINT64_MAX, &id)) {
            size_t k = m++; // insertion by id: a front is small
            while (k > 0 && ids[k - 1] > id) {
                ids[k] = ids[k - 1];
                vals[k] = vals[k - 1];
                k--;
            }
            ids[k] = id;
            vals[k] = r->element[i + 1];
        }
    }
    json_t *arr = json_array ();
    for (size_t i = 0; i < m; i++) {
        json_t *v = json_loads (vals[i]->str, 0, NULL);
        json_array_append_new (arr, json_pack ("{s:I,s:o}", "trial", (json_int_t)ids[i], "values",
                                               json_is_object (v) ? v : json_object ()));
        if (v && !json_is_object (v))
            json_decref (v);
    }
    free (ids);
    free (vals);
    freeReplyObject (r);
    return s_answer (json_pack ("{s:I,s:o}", "job", (json_int_t)job->id, "front", arr), 200, body);
}

// s_failures: the job's failed trials grouped by their error's first line
// (at most 200 bytes), most frequent first, each with its first 10 trial
// ids: what went wrong, without paging through the failures.
#define S_FAIL_IDS 10

typedef struct {
    char *error;
    uint64_t count, ids[S_FAIL_IDS];
} s_group_t;

static int
s_cmp_groups (const void *a, const void *b)
{
    const s_group_t *x = a, *y = b;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    return x->ids[0] < y->ids[0] ? -1 : x->ids[0] > y->ids[0];
}

static int
s_failures (cgq_store_t *store, const cgq_job_rec_t *job, char **body)
{
    static const char *const fields[] = {CGQ_TF_STATE, CGQ_TF_ERROR};
    s_trials_t ts = {0};
    s_which_t all = {.lo = 0, .step = 1, .count = job->suggested};
    if (s_load (store, job, &all, cgq_tstate_names[CGQ_TRIAL_FAILED], fields, 2, &ts) < 0) {
        s_trials_free (&ts);
        return s_store_error (store, body);
    }
    s_group_t *g = cgq_xcalloc (ts.n + 1, sizeof *g);
    size_t ng = 0;
    for (size_t i = 0; i < ts.n; i++) { // by id, so each group's ids ascend
        const char *e = ts.v[i]->error ? ts.v[i]->error : "";
        size_t len = strcspn (e, "\n");
        if (len > 200)
            len = 200;
        size_t k = 0;
        while (k < ng && (strlen (g[k].error) != len || strncmp (g[k].error, e, len)))
            k++;
        if (k == ng)
            g[ng++].error = cgq_xstrndup (e, len);
        if (g[k].count < S_FAIL_IDS)
            g[k].ids[g[k].count] = ts.v[i]->id;
        g[k].count++;
    }
    s_trials_free (&ts);
    qsort (g, ng, sizeof *g, s_cmp_groups);
    json_t *arr = json_array ();
    for (size_t k = 0; k < ng; k++) {
        json_t *ids = json_array ();
        for (uint64_t i = 0; i < g[k].count && i < S_FAIL_IDS; i++)
            json_array_append_new (ids, json_integer ((json_int_t)g[k].ids[i]));
        json_array_append_new (arr, json_pack ("{s:o,s:I,s:o}", "error", s_str (g[k].error),
                                               "count", (json_int_t)g[k].count, "trials", ids));
        free (g[k].error);
    }
    free (g);
    return s_answer (json_pack ("{s:I,s:o}", "job", (json_int_t)job->id, "groups", arr), 200, body);
}

// s_segment copies the path segment at *p (up to '/' or the end) into seg
// and moves *p past it and its '/'. false when longer than segn - 1.
static bool
s_segment (const char **p, char *seg, size_t segn)
{
    size_t n = strcspn (*p, "/");
    if (n >= segn)
        return false;
    memcpy (seg, *p, n);
    seg[n] = 0;
    *p += n;
    if (**p == '/')
        (*p)++;
    return true;
}

int
api_handle (cgq_store_t *store, const char *path, const api_query_t *q, char **body)
{
    static const api_query_t none = {0};
    if (!q)
        q = &none;
    if (strncmp (path, "/api/", 5) != 0)
        return s_error (404, body, "no such API path");
    const char *p = path + 5;
    char seg[32];
    if (!strcmp (p, "jobs") || !strcmp (p, "jobs/"))
        return s_jobs (store, q, body);
    if (!strcmp (p, "nodes") || !strcmp (p, "nodes/"))
        return s_nodes (store, body);
    if (!strcmp (p, "devices") || !strcmp (p, "devices/"))
        return s_devices (store, body);
    if (strncmp (p, "jobs/", 5) != 0)
        return s_error (404, body,
                        "no such API path: /api/jobs, /api/jobs/ID, "
                        "/api/jobs/ID/trials, /api/jobs/ID/trials/T and /api/nodes");
    p += 5;
    uint64_t jid, tid;
    if (!s_segment (&p, seg, sizeof seg) || !s_u64 (seg, INT64_MAX, &jid))
        return s_error (400, body, "a job id is a number");
    cgq_job_rec_t *job = NULL;
    int status;
    if (!*p) {
        if ((status = s_job_load (store, jid, &job, body)) != 0)
            return status;
        status = s_answer (s_job_json (job, true), 200, body);
    }
    else if (!strcmp (p, "failures") || !strcmp (p, "failures/")) {
        if ((status = s_job_load (store, jid, &job, body)) != 0)
            return status;
        status = s_failures (store, job, body);
    }
    else if (!strcmp (p, "front") || !strcmp (p, "front/")) {
        if ((status = s_job_load (store, jid, &job, body)) != 0)
            return status;
        status = s_front (store, job, body);
    }
    else if (!strcmp (p, "trials") || !strcmp (p, "trials/")) {
        if ((status = s_job_load (store, jid, &job, body)) != 0)
            return status;
        status = s_trials (store, job, q, body);
    }
    else if (!strncmp (p, "trials/", 7)) {
        p += 7;
        if (!s_segment (&p, seg, sizeof seg) || *p || !s_u64 (seg, INT64_MAX, &tid))
            return s_error (400, body, "a trial id is a number");
        if ((status = s_job_load (store, jid, &job, body)) != 0)
            return status;
        status = s_trial (store, job, tid, body);
    }
    else if (api_charts_path (p)) { // the charts (api_charts.h)
        if ((status = s_job_load (store, jid, &job, body)) != 0)
            return status;
        status = api_charts (store, job, p, q, body);
    }
    else
        return s_error (404, body, "no such API path under /api/jobs/%" PRIu64, jid);
    cgq_job_rec_destroy (&job);
    return status;
}
