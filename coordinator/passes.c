// passes: measure every trial of a device job twice, the second pass after
// the first in reverse order, as decisions without I/O (passes.h).
#include "passes.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "json.h"
#include "keyspace.h"
#include "util.h"

// The metric the passes compare: the device runner's median latency, ms.
#define PASSES_METRIC "time"

uint32_t
passes_of (const job_t *j)
{
    if (j->nstages != 1 || j->spec->trial.kind != CGQ_TRIAL_DEVICE)
        return 1;
    return j->spec->trial.passes > 1 ? j->spec->trial.passes : 1;
}

// s_time reads the compared metric of a metrics object; NAN when absent.
static double
s_time (const json_t *m)
{
    json_t *v = json_object_get (m, PASSES_METRIC);
    return v && json_is_number (v) ? json_number_value (v) : NAN;
}

bool
passes_first (trial_t *t, const char *metrics_json, const char **kv, int *nkv, passes_first_t *out)
{
    job_t *j = t->job;
    uint32_t passes = passes_of (j);
    if (passes < 2 || t->pass >= passes)
        return false;
    // A result that is not a JSON object fails now, as without passes, and
    // spends no second measurement.
    json_t *m = json_loads (metrics_json, 0, NULL);
    if (!json_is_object (m)) {
        json_decref (m);
        return false;
    }
    free (t->pass1);
    t->pass1 = cgq_xstrdup (metrics_json);
    t->pass = passes;
    // The next pass's attempts are counted from here: this one used no retry,
    // and its late duplicate (attempt <= stage_base) is stale.
    t->stage_base = t->attempt;
    snprintf (out->pass, sizeof out->pass, "%u", t->pass);
    snprintf (out->base, sizeof out->base, "%u", t->stage_base);
    kv[(*nkv)++] = CGQ_TF_PASS;
    kv[(*nkv)++] = out->pass;
    kv[(*nkv)++] = CGQ_TF_PASS1;
    kv[(*nkv)++] = t->pass1;
    kv[(*nkv)++] = CGQ_TF_STAGE_BASE;
    kv[(*nkv)++] = out->base;
    char tb[32];
    snprintf (out->detail, sizeof out->detail,
              "pass 1 of %u succeeded (%s %s ms); the next pass follows the job's first, "
              "in reverse order",
              passes, PASSES_METRIC, cgq_fmt_double (tb, s_time (m)));
    json_decref (m);
    j->pass_held++;
    return true;
}

char *
passes_merge (const trial_t *t, const char *metrics_json)
{
    if (!t->pass1 || passes_of (t->job) < 2)
        return NULL;
    json_t *first = json_loads (t->pass1, 0, NULL);
    json_t *last = json_loads (metrics_json, 0, NULL);
    char *out = NULL;
    if (json_is_object (first) && json_is_object (last)) {
        double a = s_time (first), b = s_time (last);
        if (isfinite (a) && isfinite (b)) {
            json_object_set_new (last, PASSES_METRIC, json_real ((a + b) / 2));
            json_object_set_new (last, PASSES_METRIC "_pass1", json_real (a));
            json_object_set_new (last, PASSES_METRIC "_pass2", json_real (b));
            double d = cgq_pass_diff (a, b);
            if (isfinite (d))
                json_object_set_new (last, "pass_diff", json_real (d));
        }
        out = cgq_json_dumps (last);
    }
    json_decref (first);
    json_decref (last);
    return out;
}

static int
s_cmp_desc (const void *x, const void *y)
{
    const trial_t *a = *(trial_t *const *)x, *b = *(trial_t *const *)y;
    return a->id < b->id ? 1 : a->id > b->id ? -1 : 0;
}

size_t
passes_ready (job_t *j, trial_t ***out)
{
    *out = NULL;
    if (!j->pass_held || j->state != CGQ_JOB_RUNNING || j->qhead[0] ||
        !cgq_searcher_done (j->searcher))
        return 0;
    // Every first pass has ended: no trial still runs (or waits for) one.
    // Waiting for the last one costs the other devices at most one
    // measurement, and keeps the second pass in one order from its start.
    for (trial_t *t = zhashx_first (j->trials); t; t = zhashx_next (j->trials))
        if (t->pass < 2)
            return 0;
    size_t n = 0, cap = zhashx_size (j->trials);
    trial_t **held = cgq_xcalloc (cap ? cap : 1, sizeof *held);
    for (trial_t *t = zhashx_first (j->trials); t; t = zhashx_next (j->trials))
        if (t->state == CGQ_TRIAL_PENDING && !t->queued && !t->node && n < cap)
            held[n++] = t;
    qsort (held, n, sizeof *held, s_cmp_desc);
    j->pass_held = 0;
    if (!n) {
        free (held);
        return 0;
    }
    *out = held;
    return n;
}

bool
passes_recover (job_t *j, trial_t *t, const redisReply *h)
{
    uint64_t pass = cgq_hash_u64 (h, CGQ_TF_PASS);
    const char *p1 = cgq_hash_get (h, CGQ_TF_PASS1);
    if (pass < 2 || !p1 || passes_of (j) < 2)
        return false;
    t->pass = (uint32_t)pass;
    free (t->pass1);
    t->pass1 = cgq_xstrdup (p1);
    if (t->state != CGQ_TRIAL_PENDING)
        return false;
    j->pass_held++;
    return true;
}
