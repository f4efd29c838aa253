// view: snapshots of Redis state for the CLI's displays.
#include "view.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

// Pipelined reads go out in chunks so that a job of a million trials never
// holds a million replies at once.
#define S_CHUNK 512

static bool
s_is_empty_hash (const redisReply *r)
{
    return !r || r->type != REDIS_REPLY_ARRAY || r->elements == 0;
}

static int
s_io_error (cgq_store_t *store, const redisReply *r, char *err, size_t errlen)
{
    if (!r)
        snprintf (err, errlen, "%s", cgq_store_errstr (store));
    else if (r->type == REDIS_REPLY_ERROR)
        snprintf (err, errlen, "Redis at %s answered: %s", cgq_store_url (store), r->str);
    else
        snprintf (err, errlen, "Redis at %s answered with an unexpected reply type %d",
                  cgq_store_url (store), r->type);
    return CGQ_VIEW_ERROR;
}

int
cgq_view_job_load (cgq_store_t *store, uint64_t id, cgq_job_rec_t **job, char *err,
                   size_t errlen)
{
    char key[64];
    cgq_key_job (key, sizeof key, id);
    redisReply *r = cgq_store_command (store, "HGETALL %s", key);
    if (!r || r->type != REDIS_REPLY_ARRAY) {
        int rc = s_io_error (store, r, err, errlen);
        if (r)
            freeReplyObject (r);
        return rc;
    }
    if (s_is_empty_hash (r)) {
        freeReplyObject (r);
        snprintf (err, errlen, "no job %" PRIu64 " in Redis at %s (`cgq status` lists the jobs)",
                  id, cgq_store_url (store));
        return CGQ_VIEW_ABSENT;
    }
    cgq_job_rec_t *j = cgq_job_rec_from (id, r);
    freeReplyObject (r);
    *job = j;
    return CGQ_VIEW_OK;
}

void
cgq_view_trials_free (cgq_trial_rec_t **trials, size_t n)
{
    for (size_t i = 0; trials && i < n; i++)
        cgq_trial_rec_destroy (&trials[i]);
    free (trials);
}

int
cgq_view_trial_load (cgq_store_t *store, const cgq_job_rec_t *job, uint64_t id,
                     cgq_trial_rec_t **trial, char *err, size_t errlen)
{
    char key[96];
    cgq_key_trial (key, sizeof key, job->id, id);
    redisReply *r = cgq_store_command (store, "HGETALL %s", key);
    if (!r || r->type != REDIS_REPLY_ARRAY) {
        int rc = s_io_error (store, r, err, errlen);
        if (r)
            freeReplyObject (r);
        return rc;
    }
    if (s_is_empty_hash (r)) {
        freeReplyObject (r);
        snprintf (err, errlen,
                  "job %" PRIu64 " has no trial %" PRIu64 " (it has %" PRIu64
                  " so far, ids 0 to %" PRIu64 ")",
                  job->id, id, job->suggested, job->suggested ? job->suggested - 1 : 0);
        return CGQ_VIEW_ABSENT;
    }
    *trial = cgq_trial_rec_from (job, id, r);
    freeReplyObject (r);
    return CGQ_VIEW_OK;
}

// s_load_ids appends the trials with the given ids (absent ones skipped) to
// the growing array *out of *n entries (capacity *cap).
static int
s_load_ids (cgq_store_t *store, const cgq_job_rec_t *job, const uint64_t *ids, size_t nids,
            cgq_trial_rec_t ***out, size_t *n, size_t *cap, char *err, size_t errlen)
{
    char key[96];
    for (size_t base = 0; base < nids; base += S_CHUNK) {
        size_t m = nids - base < S_CHUNK ? nids - base : S_CHUNK;
        for (size_t i = 0; i < m; i++) {
            cgq_key_trial (key, sizeof key, job->id, ids[base + i]);
            if (cgq_store_append (store, "HGETALL %s", key) < 0)
                return s_io_error (store, NULL, err, errlen);
        }
        int rc = CGQ_VIEW_OK;
        // Every queued reply is read even after an error, so that the
        // connection stays in step for the next command.
        for (size_t i = 0; i < m; i++) {
            redisReply *r = cgq_store_get_reply (store);
            if (!r) {
                return s_io_error (store, NULL, err, errlen);
            }
            if (r->type != REDIS_REPLY_ARRAY) {
                if (rc == CGQ_VIEW_OK)
                    rc = s_io_error (store, r, err, errlen);
            }
            else if (!s_is_empty_hash (r) && rc == CGQ_VIEW_OK) {
                if (*n == *cap) {
                    *cap = *cap ? *cap * 2 : 64;
                    *out = cgq_xrealloc (*out, *cap * sizeof **out);
                }
                (*out)[(*n)++] = cgq_trial_rec_from (job, ids[base + i], r);
            }
            freeReplyObject (r);
        }
        if (rc != CGQ_VIEW_OK)
            return rc;
    }
    return CGQ_VIEW_OK;
}

static const cgq_job_rec_t *s_sort_job;

static int
s_cmp_trials (const void *a, const void *b)
{
    const cgq_trial_rec_t *x = *(cgq_trial_rec_t *const *) a;
    const cgq_trial_rec_t *y = *(cgq_trial_rec_t *const *) b;
    // Ranked: succeeded with a value and not infeasible (constraints); the
    // rest come after, by id.
    bool rx = s_sort_job->metric && x->has_value && x->feasible != 0
              && !strcmp (x->state, cgq_tstate_names[CGQ_TRIAL_SUCCEEDED]);
    bool ry = s_sort_job->metric && y->has_value && y->feasible != 0
              && !strcmp (y->state, cgq_tstate_names[CGQ_TRIAL_SUCCEEDED]);
    if (rx != ry)
        return rx ? -1 : 1;
    if (rx && x->value != y->value) {
        bool x_better = s_sort_job->mode > 0 ? x->value > y->value : x->value < y->value;
        return x_better ? -1 : 1;
    }
    return x->id < y->id ? -1 : x->id > y->id;
}

void
cgq_view_trials_sort (const cgq_job_rec_t *job, cgq_trial_rec_t **trials, size_t n)
{
    s_sort_job = job; // qsort has no context argument; the CLI is single-threaded
    if (n > 1)
        qsort (trials, n, sizeof *trials, s_cmp_trials);
    s_sort_job = NULL;
}

int
cgq_view_trials_all (cgq_store_t *store, const cgq_job_rec_t *job,
                     cgq_trial_rec_t ***trials, size_t *n, char *err, size_t errlen)
{
    *trials = NULL;
    *n = 0;
    size_t cap = 0;
    uint64_t ids[S_CHUNK];
    for (uint64_t base = 0; base < job->suggested; base += S_CHUNK) {
        size_t m = 0;
        for (uint64_t id = base; id < job->suggested && m < S_CHUNK; id++)
            ids[m++] = id;
        int rc = s_load_ids (store, job, ids, m, trials, n, &cap, err, errlen);
        if (rc != CGQ_VIEW_OK) {
            cgq_view_trials_free (*trials, *n);
            *trials = NULL;
            *n = 0;
            return rc;
        }
    }
    cgq_view_trials_sort (job, *trials, *n);
    return CGQ_VIEW_OK;
}


// s_reply_ids takes an array reply of trial ids (freeing it) and returns the
// ids it holds as numbers, *n of them (caller frees); entries that are not
// ids are skipped.
static uint64_t *
s_reply_ids (redisReply *r, size_t *n)
{
    uint64_t *ids = cgq_xcalloc (r->elements ? r->elements : 1, sizeof *ids);
    *n = 0;
    for (size_t i = 0; i < r->elements; i++)
        if (r->element[i]->type == REDIS_REPLY_STRING
            && cgq_parse_u64 (r->element[i]->str, &ids[*n]) == 0)
            (*n)++;
    freeReplyObject (r);
    return ids;
}

int
cgq_view_trials_top (cgq_store_t *store, const cgq_job_rec_t *job, size_t k,
                     cgq_trial_rec_t ***trials, size_t *n, char *err, size_t errlen)
{
    *trials = NULL;
    *n = 0;
    if (k == 0)
        return CGQ_VIEW_OK;
    if (job->metric) {
        char key[64];
        cgq_key_leaderboard (key, sizeof key, job->id);
        // A few extra entries make up for ties that the id order settles.
        long long last = (long long) (k > 1000000 ? 1000000 : k) + 8;
        redisReply *r = cgq_store_command (store, "%s %s 0 %lld",
                                           job->mode > 0 ? "ZREVRANGE" : "ZRANGE", key, last);
        if (!r || r->type != REDIS_REPLY_ARRAY) {
            int rc = s_io_error (store, r, err, errlen);
            if (r)
                freeReplyObject (r);
            return rc;
        }
        size_t nids = 0;
        uint64_t *ids = s_reply_ids (r, &nids);
        size_t cap = 0;
        int rc = s_load_ids (store, job, ids, nids, trials, n, &cap, err, errlen);
        free (ids);
        if (rc != CGQ_VIEW_OK) {
            cgq_view_trials_free (*trials, *n);
            *trials = NULL;
            *n = 0;
            return rc;
        }
        size_t ranked = 0;
        for (size_t i = 0; i < *n; i++)
            ranked += (*trials)[i]->has_value && (*trials)[i]->feasible != 0
                      && !strcmp ((*trials)[i]->state, cgq_tstate_names[CGQ_TRIAL_SUCCEEDED]);
        if (ranked >= k) {
            cgq_view_trials_sort (job, *trials, *n);
            for (size_t i = k; i < *n; i++)
                cgq_trial_rec_destroy (&(*trials)[i]);
            *n = k;
            return CGQ_VIEW_OK;
        }
        cgq_view_trials_free (*trials, *n);
        *trials = NULL;
        *n = 0;
    }
    int rc = cgq_view_trials_all (store, job, trials, n, err, errlen);
    if (rc != CGQ_VIEW_OK)
        return rc;
    for (size_t i = k; i < *n; i++)
        cgq_trial_rec_destroy (&(*trials)[i]);
    if (*n > k)
        *n = k;
    return CGQ_VIEW_OK;
}

int
cgq_view_trials_best (cgq_store_t *store, const cgq_job_rec_t *job, size_t k,
                      cgq_trial_rec_t ***trials, size_t *n, char *err, size_t errlen)
{
    int rc = job->metric ? cgq_view_trials_top (store, job, k, trials, n, err, errlen)
                         : cgq_view_trials_all (store, job, trials, n, err, errlen);
    if (rc != CGQ_VIEW_OK)
        return rc;
    size_t kept = 0;
    for (size_t i = 0; i < *n; i++) {
        cgq_trial_rec_t *t = (*trials)[i];
        bool ok = !strcmp (t->state, cgq_tstate_names[CGQ_TRIAL_SUCCEEDED]) && (!job->metric || t->has_value)
                  && t->feasible != 0; // an infeasible trial is never among the best
        if (ok && kept < k)
            (*trials)[kept++] = t;
        else
            cgq_trial_rec_destroy (&t);
    }
    *n = kept;
    return CGQ_VIEW_OK;
}

static int
s_cmp_nodes (const void *a, const void *b)
{
    const cgq_node_rec_t *x = *(cgq_node_rec_t *const *) a;
    const cgq_node_rec_t *y = *(cgq_node_rec_t *const *) b;
    return strcmp (x->id, y->id);
}

int
cgq_view_nodes_load (cgq_store_t *store, cgq_node_rec_t ***nodes, size_t *n, char *err,
                     size_t errlen)
{
    *nodes = NULL;
    *n = 0;
    redisReply *r = cgq_store_command (store, "SMEMBERS %s", CGQ_KEY_NODES);
    if (!r || r->type != REDIS_REPLY_ARRAY) {
        int rc = s_io_error (store, r, err, errlen);
        if (r)
            freeReplyObject (r);
        return rc;
    }
    size_t m = 0;
    char **ids = cgq_xcalloc (r->elements ? r->elements : 1, sizeof *ids);
    for (size_t i = 0; i < r->elements; i++)
        if (r->element[i]->type == REDIS_REPLY_STRING)
            ids[m++] = cgq_xstrdup (r->element[i]->str);
    freeReplyObject (r);

    int rc = CGQ_VIEW_OK;
    char key[512];
    cgq_node_rec_t **out = cgq_xcalloc (m ? m : 1, sizeof *out);
    size_t k = 0;
    for (size_t i = 0; i < m && rc == CGQ_VIEW_OK; i++) {
        cgq_key_node (key, sizeof key, ids[i]);
        if (cgq_store_append (store, "HGETALL %s", key) < 0)
            rc = s_io_error (store, NULL, err, errlen);
    }
    for (size_t i = 0; i < m && rc == CGQ_VIEW_OK; i++) {
        redisReply *h = cgq_store_get_reply (store);
        if (!h) {
            rc = s_io_error (store, NULL, err, errlen);
            break;
        }
        if (h->type == REDIS_REPLY_ARRAY) {
            cgq_node_rec_t *nd = cgq_node_rec_from (ids[i], h);
            out[k++] = nd;
        }
        freeReplyObject (h);
    }
    for (size_t i = 0; i < m; i++)
        free (ids[i]);
    free (ids);
    if (rc != CGQ_VIEW_OK) {
        cgq_view_nodes_free (out, k);
        return rc;
    }
    if (k > 1)
        qsort (out, k, sizeof *out, s_cmp_nodes);
    *nodes = out;
    *n = k;
    return CGQ_VIEW_OK;
}

void
cgq_view_nodes_free (cgq_node_rec_t **nodes, size_t n)
{
    for (size_t i = 0; nodes && i < n; i++)
        cgq_node_rec_destroy (&nodes[i]);
    free (nodes);
}

static int
s_cmp_u64 (const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
    return x < y ? -1 : x > y;
}

int
cgq_view_trial_find (cgq_store_t *store, const cgq_job_rec_t *job, const char *state,
                     bool active_only, cgq_trial_rec_t **trial, char *err, size_t errlen)
{
    *trial = NULL;
    uint64_t *ids = NULL;
    size_t nids = 0;
    if (active_only) {
        char key[64];
        cgq_key_active (key, sizeof key, job->id);
        redisReply *r = cgq_store_command (store, "SMEMBERS %s", key);
        if (!r || r->type != REDIS_REPLY_ARRAY) {
            int rc = s_io_error (store, r, err, errlen);
            if (r)
                freeReplyObject (r);
            return rc;
        }
        ids = cgq_xcalloc (r->elements ? r->elements : 1, sizeof *ids);
        for (size_t i = 0; i < r->elements; i++)
            if (r->element[i]->type == REDIS_REPLY_STRING &&
                cgq_parse_u64 (r->element[i]->str, &ids[nids]) == 0)
                nids++;
        freeReplyObject (r);
        qsort (ids, nids, sizeof *ids, s_cmp_u64);
    }
    else {
        nids = (size_t) job->suggested;
        ids = cgq_xcalloc (nids ? nids : 1, sizeof *ids);
        for (size_t i = 0; i < nids; i++)
            ids[i] = i;
    }
    int rc = CGQ_VIEW_ABSENT;
    for (size_t base = 0; base < nids && rc == CGQ_VIEW_ABSENT; base += S_CHUNK) {
        cgq_trial_rec_t **got = NULL;
        size_t n = 0, cap = 0;
        size_t m = nids - base < S_CHUNK ? nids - base : S_CHUNK;
        int lr = s_load_ids (store, job, ids + base, m, &got, &n, &cap, err, errlen);
        if (lr != CGQ_VIEW_OK)
            rc = lr;
        for (size_t i = 0; i < n; i++) {
            if (rc == CGQ_VIEW_ABSENT && !strcmp (got[i]->state, state)) {
                *trial = got[i];
                got[i] = NULL;
                rc = CGQ_VIEW_OK;
            }
        }
        cgq_view_trials_free (got, n);
    }
    free (ids);
    if (rc == CGQ_VIEW_ABSENT)
        snprintf (err, errlen, "job %" PRIu64 " has no %s trial", job->id, state);
    return rc;
}

int
cgq_view_trials_active (cgq_store_t *store, const cgq_job_rec_t *job, size_t max,
                        cgq_trial_rec_t ***trials, size_t *n, char *err, size_t errlen)
{
    *trials = NULL;
    *n = 0;
    char key[64];
    cgq_key_active (key, sizeof key, job->id);
    redisReply *r = cgq_store_command (store, "SMEMBERS %s", key);
    if (!r || r->type != REDIS_REPLY_ARRAY) {
        int rc = s_io_error (store, r, err, errlen);
        if (r)
            freeReplyObject (r);
        return rc;
    }
    size_t nids = 0;
    uint64_t *ids = s_reply_ids (r, &nids);
    qsort (ids, nids, sizeof *ids, s_cmp_u64);
    if (nids > max)
        nids = max;
    size_t cap = 0;
    int rc = s_load_ids (store, job, ids, nids, trials, n, &cap, err, errlen);
    free (ids);
    if (rc != CGQ_VIEW_OK) {
        cgq_view_trials_free (*trials, *n);
        *trials = NULL;
        *n = 0;
    }
    return rc;
}

int
cgq_view_reports (cgq_store_t *store, uint64_t job, uint64_t trial, json_t **reports, char *err,
                  size_t errlen)
{
    *reports = NULL;
    char key[96];
    cgq_key_reports (key, sizeof key, job, trial);
    redisReply *r = cgq_store_command (store, "XRANGE %s - +", key);
    if (!r || r->type != REDIS_REPLY_ARRAY) {
        int rc = s_io_error (store, r, err, errlen);
        if (r)
            freeReplyObject (r);
        return rc;
    }
    json_t *out = json_array ();
    // Each entry: [id, [field, value, ...]].
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 2 || e->element[1]->type != REDIS_REPLY_ARRAY)
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
    *reports = out;
    return CGQ_VIEW_OK;
}
