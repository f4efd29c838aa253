// checkpoint: checkpoint records decided without I/O (checkpoint.h).
#include "checkpoint.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "util.h"

static bool
s_hex64 (const char *s)
{
    if (!s || strlen (s) != 64)
        return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return false;
    return true;
}

static uint64_t
s_u64 (const json_t *rec, const char *key)
{
    json_t *v = json_object_get (rec, key);
    return json_is_integer (v) && json_integer_value (v) > 0 ? (uint64_t) json_integer_value (v)
                                                            : 0;
}

// s_newer: (a, n) after (b, k).
static bool
s_newer (uint64_t a, uint64_t n, uint64_t b, uint64_t k)
{
    return a > b || (a == b && n > k);
}

void
checkpoint_decide (const trial_t *t, uint32_t keep, const Cgq__Checkpoint *m, const char *node,
                   double now, checkpoint_decision_t *d)
{
    memset (d, 0, sizeof *d);
    const Cgq__TaskRef *r = m->task;
    json_t *step = NULL;
    // The path: absolute in a directory store, a URL in an HTTP(S) one.
    bool url = m->path && (!strncmp (m->path, "http://", 7) || !strncmp (m->path, "https://", 8));
    if (!r || m->n == 0 || !s_hex64 (m->sha256) || !m->path || (m->path[0] != '/' && !url)) {
        snprintf (d->why, sizeof d->why,
                  "malformed Checkpoint (it needs a task, n >= 1, a sha256 of 64 lowercase hex "
                  "digits and an absolute path or an http(s):// URL)");
        return;
    }
    step = json_loads (m->step_json && *m->step_json ? m->step_json : "{}", 0, NULL);
    if (!json_is_object (step)) {
        snprintf (d->why, sizeof d->why, "malformed Checkpoint: its step is not a JSON object");
        json_decref (step);
        return;
    }
    if (!t)
        snprintf (d->why, sizeof d->why, "trial %" PRIu64 ".%" PRIu64 " is not running here (it "
                  "ended, or is unknown)", r->job, r->trial);
    else if (t->state != CGQ_TRIAL_RUNNING)
        snprintf (d->why, sizeof d->why, "the trial is %s, not running",
                  cgq_tstate_names[t->state]);
    else if (r->attempt != t->attempt)
        snprintf (d->why, sizeof d->why,
                  "attempt %u is not the trial's current attempt (%u): a stale attempt's "
                  "checkpoint is never recorded",
                  r->attempt, t->attempt);
    else if (r->stage != t->stage || r->attempt <= t->stage_base)
        snprintf (d->why, sizeof d->why, "stage %u is not the trial's current stage (%u)",
                  r->stage, t->stage);
    if (d->why[0]) {
        json_decref (step);
        return;
    }
    // A re-send, or one overtaken by a newer one of this attempt. A record
    // with "donor" is another trial's (a PBT child resumes from its donor's
    // checkpoint until it has one of its own): its attempt and n say nothing
    // about this trial's, and the trial's first own checkpoint replaces it.
    size_t i;
    json_t *rec, *own = NULL;
    json_array_foreach (t->ckpts, i, rec)
    {
        if (json_object_get (rec, "donor"))
            continue;
        if (!own)
            own = rec;
        if (s_u64 (rec, "attempt") == r->attempt && s_u64 (rec, "n") == m->n) {
            d->record = true;
            json_decref (step);
            return;
        }
    }
    rec = own;
    if (rec && !s_newer (r->attempt, m->n, s_u64 (rec, "attempt"), s_u64 (rec, "n"))) {
        snprintf (d->why, sizeof d->why,
                  "checkpoint %" PRIu64 " of attempt %u is older than the trial's latest (%" PRIu64
                  " of attempt %" PRIu64 ")",
                  m->n, r->attempt, s_u64 (rec, "n"), s_u64 (rec, "attempt"));
        json_decref (step);
        return;
    }
    json_t *latest = json_pack ("{s:o, s:I, s:I, s:I, s:I, s:I, s:s, s:s, s:s, s:s, s:f}", "step",
                                step, "attempt", (json_int_t) r->attempt, "n", (json_int_t) m->n,
                                "stage", (json_int_t) r->stage, "size", (json_int_t) m->size,
                                "files", (json_int_t) m->files, "sha256", m->sha256, "path",
                                m->path, "host", m->host ? m->host : "", "node",
                                node ? node : "", "at", now);
    if (!latest) { // not UTF-8 (a path, a host)
        snprintf (d->why, sizeof d->why, "malformed Checkpoint: a field is not UTF-8 text");
        return;
    }
    d->list = json_array ();
    json_array_append_new (d->list, latest);
    d->bytes = (int64_t) m->size;
    if (keep < 1)
        keep = 1;
    json_array_foreach (t->ckpts, i, rec)
    {
        if (json_object_get (rec, "donor"))
            continue; // the donor's, counted in the donor's bytes
        if (json_array_size (d->list) < keep)
            json_array_append (d->list, rec);
        else
            d->bytes -= (int64_t) s_u64 (rec, "size");
    }
    d->latest = latest;
    d->record = d->changed = true;
}

void
checkpoint_decision_fini (checkpoint_decision_t *d)
{
    json_decref (d->list);
    d->list = d->latest = NULL;
}

size_t
checkpoint_names (const json_t *list, char ***names)
{
    size_t n = json_array_size (list), i;
    *names = cgq_xcalloc (n + 1, sizeof **names);
    json_t *rec;
    json_array_foreach (list, i, rec)
        (*names)[i] = cgq_xasprintf ("ckpt-%" PRIu64 "-%" PRIu64, s_u64 (rec, "attempt"),
                                     s_u64 (rec, "n"));
    return n;
}

int64_t
checkpoint_bytes (const json_t *list)
{
    int64_t b = 0;
    size_t i;
    json_t *rec;
    json_array_foreach (list, i, rec)
        if (!json_object_get (rec, "donor")) // a donor's is counted in the donor's
            b += (int64_t) s_u64 (rec, "size");
    return b;
}

bool
checkpoint_required (const json_t *list)
{
    return json_object_get (json_array_get (list, 0), "donor") != NULL;
}

static char *
s_str (const json_t *rec, const char *key)
{
    const char *s = json_string_value (json_object_get (rec, key));
    return cgq_xstrdup (s ? s : "");
}

size_t
checkpoint_resume (const json_t *list, uint32_t stage, Cgq__Checkpoint ***out)
{
    *out = NULL;
    size_t n = 0, i;
    json_t *rec;
    json_array_foreach (list, i, rec)
    {
        if (s_u64 (rec, "stage") != stage)
            continue; // another stage's: not what this one runs
        *out = cgq_xrealloc (*out, (n + 1) * sizeof **out);
        Cgq__Checkpoint *c = cgq_xcalloc (1, sizeof *c);
        cgq__checkpoint__init (c);
        c->task = cgq_xcalloc (1, sizeof *c->task);
        cgq__task_ref__init (c->task);
        c->task->stage = stage;
        c->task->attempt = (uint32_t) s_u64 (rec, "attempt");
        c->n = s_u64 (rec, "n");
        json_t *step = json_object_get (rec, "step");
        c->step_json = step ? cgq_json_dumps (step) : cgq_xstrdup ("{}");
        c->size = s_u64 (rec, "size");
        c->files = s_u64 (rec, "files");
        c->sha256 = s_str (rec, "sha256");
        c->path = s_str (rec, "path");
        c->host = s_str (rec, "host");
        (*out)[n++] = c;
    }
    return n;
}

void
checkpoint_resume_free (Cgq__Checkpoint **v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free (v[i]->task);
        free (v[i]->step_json);
        free (v[i]->sha256);
        free (v[i]->path);
        free (v[i]->host);
        free (v[i]);
    }
    free (v);
}

json_t *
checkpoint_list_parse (const char *text)
{
    if (!text || !*text)
        return NULL;
    json_t *list = json_loads (text, 0, NULL);
    if (!json_is_array (list) || json_array_size (list) == 0) {
        json_decref (list);
        return NULL;
    }
    return list;
}
