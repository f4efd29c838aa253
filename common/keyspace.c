// keyspace: keys, field names, states and records of cgq's Redis data model.
#include "keyspace.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"

const char *const cgq_tstate_names[CGQ_TRIAL_NSTATES] = {
    "pending", "running", "succeeded", "failed", "stopped", "cancelled", "unschedulable", "stale",
    "paused"};
const char *const cgq_jstate_names[CGQ_JOB_NSTATES] = {"running", "finished", "cancelled",
                                                        "failed"};

int
cgq_tstate_parse (const char *s)
{
    for (int i = 0; s && i < CGQ_TRIAL_NSTATES; i++)
        if (strcmp (s, cgq_tstate_names[i]) == 0)
            return i;
    return -1;
}

bool
cgq_tstate_terminal (cgq_tstate_t s)
{
    return s == CGQ_TRIAL_SUCCEEDED || s == CGQ_TRIAL_FAILED || s == CGQ_TRIAL_STOPPED
           || s == CGQ_TRIAL_CANCELLED;
}

// --- keys ------------------------------------------------------------------

// s_job_key writes "cgq:job:{JOB}" SUFFIX [TRIAL] into buf (size n,
// truncated like snprintf), without printf: the coordinator builds a few of
// these per trial.
static char *
s_job_key (char *buf, size_t n, uint64_t job, const char *suffix, const uint64_t *trial)
{
    char tmp[160], num[24];
    size_t k = 0;
    memcpy (tmp, "cgq:job:{", 9);
    k = 9;
    size_t l = strlen (cgq_fmt_u64 (num, job));
    memcpy (tmp + k, num, l);
    k += l;
    tmp[k++] = '}';
    l = strlen (suffix);
    if (l > 100)
        l = 100;
    memcpy (tmp + k, suffix, l);
    k += l;
    if (trial) {
        l = strlen (cgq_fmt_u64 (num, *trial));
        memcpy (tmp + k, num, l);
        k += l;
    }
    if (n) {
        if (k >= n)
            k = n - 1;
        memcpy (buf, tmp, k);
        buf[k] = 0;
    }
    return buf;
}

char *
cgq_key_job (char *buf, size_t n, uint64_t job)
{
    return s_job_key (buf, n, job, "", NULL);
}

char *
cgq_key_trial (char *buf, size_t n, uint64_t job, uint64_t trial)
{
    return s_job_key (buf, n, job, ":trial:", &trial);
}

char *
cgq_key_reports (char *buf, size_t n, uint64_t job, uint64_t trial)
{
    return s_job_key (buf, n, job, ":reports:", &trial);
}

char *
cgq_key_leaderboard (char *buf, size_t n, uint64_t job)
{
    return s_job_key (buf, n, job, ":leaderboard", NULL);
}

char *
cgq_key_active (char *buf, size_t n, uint64_t job)
{
    return s_job_key (buf, n, job, ":active", NULL);
}

char *
cgq_key_suggestions (char *buf, size_t n, uint64_t job)
{
    return s_job_key (buf, n, job, ":suggestions", NULL);
}

char *
cgq_key_rung (char *buf, size_t n, uint64_t job, double at)
{
    char num[32];
    snprintf (buf, n, "cgq:job:{%" PRIu64 "}:rung:%s", job, cgq_fmt_double (num, at));
    return buf;
}

char *
cgq_key_rungs (char *buf, size_t n, uint64_t job)
{
    snprintf (buf, n, "cgq:job:{%" PRIu64 "}:rungs", job);
    return buf;
}

char *
cgq_key_pareto (char *buf, size_t n, uint64_t job)
{
    snprintf (buf, n, "cgq:job:{%" PRIu64 "}:pareto", job);
    return buf;
}

char *
cgq_key_warm (char *buf, size_t n, uint64_t job)
{
    snprintf (buf, n, "cgq:job:{%" PRIu64 "}:warm", job);
    return buf;
}

char *
cgq_key_node (char *buf, size_t n, const char *node)
{
    snprintf (buf, n, "cgq:node:%s", node);
    return buf;
}

char *
cgq_key_device (char *buf, size_t n, const char *device)
{
    snprintf (buf, n, "cgq:device:%s", device);
    return buf;
}

// --- writing ---------------------------------------------------------------

void
cgq_hset_init (cgq_hset_t *h, const char *key)
{
    h->argc = 0;
    h->nnum = 0;
    h->argv[h->argc] = "HSET";
    h->len[h->argc++] = 4;
    h->argv[h->argc] = key;
    h->len[h->argc++] = strlen (key);
}

void
cgq_hset_str (cgq_hset_t *h, const char *field, const char *value)
{
    if (h->argc + 2 > (int) (sizeof h->argv / sizeof *h->argv)) {
        fprintf (stderr, "cgq_hset: more than %d fields in one HSET (field %s)\n",
                 CGQ_HSET_MAX_FIELDS, field);
        abort ();
    }
    if (!value)
        value = "";
    h->argv[h->argc] = field;
    h->len[h->argc++] = strlen (field);
    h->argv[h->argc] = value;
    h->len[h->argc++] = strlen (value);
}

void
cgq_hset_u64 (cgq_hset_t *h, const char *field, uint64_t value)
{
    cgq_hset_str (h, field, cgq_fmt_u64 (h->num[h->nnum++], value));
}

void
cgq_hset_dbl (cgq_hset_t *h, const char *field, double value)
{
    char *b = h->num[h->nnum++];
    cgq_fmt_double (b, value);
    cgq_hset_str (h, field, b);
}

void
cgq_hset_queue (cgq_hset_t *h, cgq_store_t *store)
{
    if (h->argc > 2)
        cgq_store_cmdargv (store, h->argc, h->argv, h->len);
    h->argc = 2;
    h->nnum = 0;
}

void
cgq_keyspace_event (cgq_store_t *store, const char *type, uint64_t job, int64_t trial,
                 const char *node, uint32_t attempt, const char *detail)
{
    char jobbuf[24], trialbuf[24], attbuf[24], maxlen[24];
    const char *argv[20];
    int n = 0;
    cgq_fmt_u64 (maxlen, CGQ_EVENTS_MAXLEN);
    argv[n++] = "XADD";
    argv[n++] = CGQ_KEY_EVENTS;
    argv[n++] = "MAXLEN";
    argv[n++] = "~";
    argv[n++] = maxlen;
    argv[n++] = "*";
    argv[n++] = "type";
    argv[n++] = type;
    if (job) {
        cgq_fmt_u64 (jobbuf, job);
        argv[n++] = "job";
        argv[n++] = jobbuf;
    }
    if (trial >= 0) {
        cgq_fmt_u64 (trialbuf, (uint64_t) trial);
        argv[n++] = "trial";
        argv[n++] = trialbuf;
    }
    if (node) {
        argv[n++] = "node";
        argv[n++] = node;
    }
    if (attempt) {
        cgq_fmt_u64 (attbuf, attempt);
        argv[n++] = "attempt";
        argv[n++] = attbuf;
    }
    if (detail) {
        argv[n++] = "detail";
        argv[n++] = detail;
    }
    cgq_store_cmdargv (store, n, argv, NULL);
}

void
cgq_keyspace_event_trials (cgq_store_t *store, const char *type, uint64_t job, const char *trials,
                        size_t len)
{
    char maxlen[24];
    cgq_fmt_u64 (maxlen, CGQ_EVENTS_MAXLEN);
    cgq_store_begin (store, 12);
    cgq_store_arg (store, "XADD", 4);
    cgq_store_arg (store, CGQ_KEY_EVENTS, strlen (CGQ_KEY_EVENTS));
    cgq_store_arg (store, "MAXLEN", 6);
    cgq_store_arg (store, "~", 1);
    cgq_store_arg (store, maxlen, strlen (maxlen));
    cgq_store_arg (store, "*", 1);
    cgq_store_arg (store, "type", 4);
    cgq_store_arg (store, type, strlen (type));
    cgq_store_arg (store, "job", 3);
    cgq_store_arg_u64 (store, job);
    cgq_store_arg (store, "trials", 6);
    cgq_store_arg (store, trials, len);
}

// --- reading ---------------------------------------------------------------

const char *
cgq_hash_get (const redisReply *r, const char *field)
{
    if (!r || r->type != REDIS_REPLY_ARRAY)
        return NULL;
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        const redisReply *k = r->element[i], *v = r->element[i + 1];
        if (k->type == REDIS_REPLY_STRING && v->type == REDIS_REPLY_STRING
            && strcmp (k->str, field) == 0)
            return v->str;
    }
    return NULL;
}

bool
cgq_hash_num (const redisReply *r, const char *field, double *out)
{
    const char *v = cgq_hash_get (r, field);
    double d;
    if (!v || cgq_parse_double (v, &d) < 0 || isnan (d))
        return false;
    *out = d;
    return true;
}

uint64_t
cgq_hash_u64 (const redisReply *r, const char *field)
{
    double d;
    if (!cgq_hash_num (r, field, &d) || !(d >= 0))
        return 0;
    return d >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t) d;
}

static char *
s_dup (const redisReply *r, const char *field)
{
    const char *v = cgq_hash_get (r, field);
    return cgq_xstrdup (v ? v : "");
}

// s_dup_nonempty returns NULL for an absent or empty field.
static char *
s_dup_nonempty (const redisReply *r, const char *field)
{
    const char *v = cgq_hash_get (r, field);
    return v && *v ? cgq_xstrdup (v) : NULL;
}

// s_count reads a field that holds either a number, a JSON array or a
// comma-separated list: the number of GPUs "2", "[{...},{...}]" or "0,1".
static double
s_count (const redisReply *r, const char *field)
{
    const char *v = cgq_hash_get (r, field);
    if (!v || !*v)
        return 0;
    double d;
    if (cgq_parse_double (v, &d) == 0)
        return d;
    if (*v == '[') {
        json_t *a = json_loads (v, JSON_DECODE_ANY, NULL);
        double n = json_is_array (a) ? (double) json_array_size (a) : 0;
        json_decref (a);
        return n;
    }
    double n = 0;
    bool item = false;
    for (const char *p = v; *p; p++) {
        if (*p == ',') {
            n += item;
            item = false;
        }
        else if (!isspace ((unsigned char) *p))
            item = true;
    }
    return n + item;
}

static json_t *
s_object (const redisReply *r, const char *field)
{
    const char *v = cgq_hash_get (r, field);
    if (!v || !*v)
        return NULL;
    json_t *o = json_loads (v, JSON_DECODE_ANY, NULL);
    if (!json_is_object (o)) {
        json_decref (o);
        return NULL;
    }
    return o;
}

cgq_job_rec_t *
cgq_job_rec_from (uint64_t id, const redisReply *r)
{
    cgq_job_rec_t *j = cgq_xcalloc (1, sizeof *j);
    j->id = id;
    j->name = s_dup (r, CGQ_JF_NAME);
    j->state = s_dup (r, CGQ_JF_STATE);
    j->spec = s_dup (r, CGQ_JF_SPEC);
    j->spec_path = s_dup (r, CGQ_JF_SPEC_PATH);
    j->spec_dir = s_dup (r, CGQ_JF_SPEC_DIR);
    j->searcher = s_dup (r, CGQ_JF_SEARCHER);
    j->metric = s_dup_nonempty (r, CGQ_JF_METRIC);
    const char *mode = cgq_hash_get (r, CGQ_JF_MODE);
    j->mode = mode && (!strcmp (mode, "min") || !strcmp (mode, "-1")) ? -1 : 1;
    j->blocked = s_dup_nonempty (r, CGQ_JF_BLOCKED);
    cgq_hash_num (r, CGQ_JF_BLOCKED_SINCE, &j->blocked_since);
    j->error = s_dup_nonempty (r, CGQ_JF_ERROR);
    j->paused = s_dup_nonempty (r, CGQ_JF_PAUSED);
    j->hyperband = s_dup_nonempty (r, CGQ_JF_HYPERBAND);
    cgq_hash_num (r, CGQ_JF_CREATED, &j->created);
    cgq_hash_num (r, CGQ_JF_FINISHED, &j->finished);
    double total;
    j->total = cgq_hash_num (r, CGQ_JF_TOTAL, &total) && total >= 0 && total < 9.2e18
                   ? (int64_t) total
                   : -1;
    j->suggested = cgq_hash_u64 (r, CGQ_JF_SUGGESTED);
    double ckb = 0;
    j->checkpoint_bytes = cgq_hash_num (r, CGQ_JF_CHECKPOINT_BYTES, &ckb) && ckb > 0
                              ? (uint64_t) ckb
                              : 0;
    for (int s = 0; s < CGQ_TRIAL_NSTATES; s++)
        j->counts[s] = cgq_hash_u64 (r, cgq_tstate_names[s]);
    double best;
    const char *bt = cgq_hash_get (r, CGQ_JF_BEST_TRIAL);
    uint64_t bti;
    if (bt && cgq_parse_u64 (bt, &bti) == 0 && cgq_hash_num (r, CGQ_JF_BEST_VALUE, &best)) {
        j->has_best = true;
        j->best_trial = bti;
        j->best_value = best;
    }
    return j;
}

void
cgq_job_rec_destroy (cgq_job_rec_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cgq_job_rec_t *j = *self_p;
    free (j->name);
    free (j->state);
    free (j->spec);
    free (j->spec_path);
    free (j->spec_dir);
    free (j->searcher);
    free (j->metric);
    free (j->blocked);
    free (j->error);
    free (j->paused);
    free (j->hyperband);
    free (j);
    *self_p = NULL;
}

uint64_t
cgq_job_rec_done (const cgq_job_rec_t *job)
{
    return job->counts[CGQ_TRIAL_SUCCEEDED] + job->counts[CGQ_TRIAL_FAILED]
           + job->counts[CGQ_TRIAL_STOPPED] + job->counts[CGQ_TRIAL_CANCELLED];
}

bool
cgq_job_rec_terminal (const cgq_job_rec_t *job)
{
    return !strcmp (job->state, cgq_jstate_names[CGQ_JOB_FINISHED])
           || !strcmp (job->state, cgq_jstate_names[CGQ_JOB_CANCELLED])
           || !strcmp (job->state, cgq_jstate_names[CGQ_JOB_FAILED]);
}

cgq_trial_rec_t *
cgq_trial_rec_from (const cgq_job_rec_t *job, uint64_t id, const redisReply *r)
{
    cgq_trial_rec_t *t = cgq_xcalloc (1, sizeof *t);
    t->id = id;
    t->state = s_dup (r, CGQ_TF_STATE);
    t->params = s_object (r, CGQ_TF_PARAMS);
    t->metrics = s_object (r, CGQ_TF_METRICS);
    t->has_value = cgq_hash_num (r, CGQ_TF_VALUE, &t->value);
    if (!t->has_value && job && job->metric && t->metrics) {
        json_t *m = json_object_get (t->metrics, job->metric);
        if (json_is_number (m)) {
            t->value = json_number_value (m);
            t->has_value = true;
        }
    }
    uint64_t attempt = cgq_hash_u64 (r, CGQ_TF_ATTEMPT);
    t->attempt = attempt > UINT32_MAX ? UINT32_MAX : (uint32_t) attempt;
    t->node = s_dup_nonempty (r, CGQ_TF_NODE);
    t->error = s_dup_nonempty (r, CGQ_TF_ERROR);
    t->log = s_dup_nonempty (r, CGQ_TF_LOG);
    t->trial_dir = s_dup_nonempty (r, CGQ_TF_TRIAL_DIR);
    t->gpus = s_dup_nonempty (r, CGQ_TF_GPUS);
    t->last_report = s_dup_nonempty (r, CGQ_TF_LAST_REPORT);
    t->warning = s_dup_nonempty (r, CGQ_TF_WARNING);
    const char *fs = cgq_hash_get (r, CGQ_TF_FEASIBLE);
    t->feasible = fs && *fs ? (strcmp (fs, "0") != 0) : -1;
    t->violation = s_object (r, CGQ_TF_VIOLATION);
    t->lineage = s_object (r, CGQ_TF_LINEAGE);
    t->exploited = s_object (r, CGQ_TF_EXPLOITED);
    t->reports = cgq_hash_u64 (r, CGQ_TF_REPORTS);
    uint64_t stage = cgq_hash_u64 (r, CGQ_TF_STAGE);
    t->stage = stage > UINT32_MAX ? UINT32_MAX : (uint32_t) stage;
    t->stages = s_object (r, CGQ_TF_STAGES);
    size_t plen = strlen (CGQ_TF_RUN_PREFIX);
    for (size_t i = 0; r && r->type == REDIS_REPLY_ARRAY && i + 1 < r->elements; i += 2) {
        const redisReply *k = r->element[i], *v = r->element[i + 1];
        if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING
            || strncmp (k->str, CGQ_TF_RUN_PREFIX, plen) != 0)
            continue;
        json_t *run = json_loads (v->str, 0, NULL);
        if (!json_is_object (run)) {
            json_decref (run);
            continue;
        }
        if (!t->runs)
            t->runs = json_object ();
        json_object_set_new (t->runs, k->str + plen, run);
    }
    t->has_started = cgq_hash_num (r, CGQ_TF_STARTED, &t->started) && t->started > 0;
    t->has_finished = cgq_hash_num (r, CGQ_TF_FINISHED, &t->finished) && t->finished > 0;
    t->has_duration = cgq_hash_num (r, CGQ_TF_DURATION, &t->duration);
    if (!t->has_duration && t->has_started && t->has_finished) {
        t->duration = t->finished - t->started;
        t->has_duration = true;
    }
    return t;
}

// s_run_attempts lists the attempt numbers of t's finished stage runs,
// ascending (stage order: attempts count on across stages). Caller frees.
static uint32_t *
s_run_attempts (const cgq_trial_rec_t *t, size_t *n)
{
    *n = 0;
    uint32_t *a = cgq_xcalloc (json_object_size (t->runs) + 1, sizeof *a);
    const char *k;
    json_t *v;
    json_object_foreach (t->runs, k, v) {
        json_int_t at = json_integer_value (json_object_get (v, "attempt"));
        if (at > 0 && at <= UINT32_MAX)
            a[(*n)++] = (uint32_t) at;
    }
    for (size_t i = 1; i < *n; i++) // insertion sort: a few stages
        for (size_t j = i; j > 0 && a[j] < a[j - 1]; j--) {
            uint32_t x = a[j];
            a[j] = a[j - 1];
            a[j - 1] = x;
        }
    return a;
}

uint32_t
cgq_trial_rec_tries (const cgq_trial_rec_t *t)
{
    if (!t->runs)
        return t->attempt;
    size_t n;
    uint32_t *a = s_run_attempts (t, &n), prev = 0, most = 0;
    for (size_t i = 0; i < n; i++) {
        if (a[i] > prev && a[i] - prev > most)
            most = a[i] - prev;
        prev = a[i] > prev ? a[i] : prev;
    }
    if (t->attempt > prev && t->attempt - prev > most) // a stage still running or failed
        most = t->attempt - prev;
    free (a);
    return most ? most : t->attempt;
}

bool
cgq_trial_rec_run_time (const cgq_trial_rec_t *t, double *seconds)
{
    if (!t->runs) {
        *seconds = t->duration;
        return t->has_duration;
    }
    double sum = 0;
    uint32_t last = 0;
    const char *k;
    json_t *v;
    json_object_foreach (t->runs, k, v) {
        sum += json_number_value (json_object_get (v, "duration"));
        json_int_t at = json_integer_value (json_object_get (v, "attempt"));
        if (at > last)
            last = (uint32_t) at;
    }
    if (t->has_duration && t->attempt > last) // the attempt after the last run: its own time
        sum += t->duration;
    *seconds = sum;
    return true;
}

void
cgq_trial_rec_destroy (cgq_trial_rec_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cgq_trial_rec_t *t = *self_p;
    free (t->state);
    json_decref (t->params);
    json_decref (t->metrics);
    json_decref (t->stages);
    json_decref (t->runs);
    free (t->node);
    free (t->error);
    free (t->log);
    free (t->trial_dir);
    free (t->gpus);
    free (t->last_report);
    free (t->warning);
    json_decref (t->violation);
    json_decref (t->lineage);
    json_decref (t->exploited);
    free (t);
    *self_p = NULL;
}

cgq_node_rec_t *
cgq_node_rec_from (const char *id, const redisReply *h)
{
    cgq_node_rec_t *nd = cgq_xcalloc (1, sizeof *nd);
    nd->id = cgq_xstrdup (id);
    nd->kind = s_dup (h, CGQ_NF_KIND);
    nd->state = s_dup (h, CGQ_NF_STATE);
    nd->hostname = s_dup (h, CGQ_NF_HOSTNAME);
    nd->full = s_dup (h, CGQ_NF_FULL);
    cgq_hash_num (h, CGQ_NF_CPUS, &nd->cpus);
    cgq_hash_num (h, CGQ_NF_FREE_CPUS, &nd->free_cpus);
    nd->gpus = s_count (h, CGQ_NF_GPUS);
    nd->free_gpus = s_count (h, CGQ_NF_FREE_GPUS);
    double running = s_count (h, CGQ_NF_RUNNING);
    nd->running = running > 0 && running < 1e18 ? (uint64_t) running : 0;
    nd->pid = cgq_hash_u64 (h, CGQ_NF_PID);
    const char *c = cgq_hash_get (h, CGQ_NF_CONNECTED);
    nd->connected = c && (!strcmp (c, "1") || !strcmp (c, "true") || !strcmp (c, "yes"));
    nd->has_last_seen = cgq_hash_num (h, CGQ_NF_LAST_SEEN, &nd->last_seen);
    return nd;
}

void
cgq_node_rec_destroy (cgq_node_rec_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cgq_node_rec_t *n = *self_p;
    free (n->id);
    free (n->kind);
    free (n->state);
    free (n->hostname);
    free (n->full);
    free (n);
    *self_p = NULL;
}

cgq_device_rec_t *
cgq_device_rec_from (const char *id, const redisReply *h)
{
    cgq_device_rec_t *d = cgq_xcalloc (1, sizeof *d);
    d->id = cgq_xstrdup (id);
    d->node = s_dup (h, CGQ_DF_NODE);
    const char *tags = cgq_hash_get (h, CGQ_DF_TAGS);
    d->tags = cgq_xstrdup (tags && *tags ? tags : "{}");
    d->state = s_dup (h, CGQ_DF_STATE);
    d->task = s_dup (h, CGQ_DF_TASK);
    d->last_error = s_dup (h, CGQ_DF_LAST_ERROR);
    d->failures = cgq_hash_u64 (h, CGQ_DF_FAILURES);
    const char *q = cgq_hash_get (h, CGQ_DF_QUARANTINED);
    d->quarantined = q && !strcmp (q, "1");
    d->has_updated = cgq_hash_num (h, CGQ_DF_UPDATED, &d->updated);
    return d;
}

void
cgq_device_rec_destroy (cgq_device_rec_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cgq_device_rec_t *d = *self_p;
    free (d->id);
    free (d->node);
    free (d->tags);
    free (d->state);
    free (d->task);
    free (d->last_error);
    free (d);
    *self_p = NULL;
}
