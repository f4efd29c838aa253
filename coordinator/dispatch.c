// dispatch: from a scheduling choice to an Assign on its way (a command for a
// worker, a benchmark on one device for a device runner).
#include "dispatch.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs.h"
#include "log.h"
#include "nodes.h"
#include "outbox.h"
#include "scheduler.h"
#include "space.h"

// What an Assign carries that must be rendered from the trial's params.
typedef struct {
    char **argv;
    size_t argc;
    Cgq__KeyValue *kvs;
    Cgq__KeyValue **kvp;
    size_t nenv;
    char *artifact_url, *artifact_sha256; // a device trial's, rendered (NULL: none)
} s_rendered_t;

static void
s_rendered_fini (s_rendered_t *r)
{
    for (size_t i = 0; i < r->argc; i++)
        free (r->argv[i]);
    free (r->argv);
    for (size_t i = 0; i < r->nenv; i++)
        free (r->kvs[i].value);
    free (r->kvs);
    free (r->kvp);
    free (r->artifact_url);
    free (r->artifact_sha256);
    memset (r, 0, sizeof *r);
}

// s_render fills r from t's spec and params. Returns 0, or -1 with err set
// to what could not be rendered (r is then empty).
static int
s_render (const trial_t *t, s_rendered_t *r, char *err, size_t errlen)
{
    const job_t *j = t->job;
    const cgq_spec_t *s = j->spec;
    memset (r, 0, sizeof *r);
    char why[256] = "";
    if (s->trial.kind == CGQ_TRIAL_PREDICTOR) {
        // The worker runs its built-in predictor on this dataset directory.
        r->argc = 1;
        r->argv = cgq_xcalloc (2, sizeof *r->argv);
        r->argv[0] = cgq_space_render (s->trial.data, t->params, j->id, t->id, j->spec_dir, 0,
                                       why, sizeof why);
        if (!r->argv[0]) {
            snprintf (err, errlen, "cannot render trial.data: %s", why);
            s_rendered_fini (r);
            return -1;
        }
    }
    if (s->trial.kind == CGQ_TRIAL_COMMAND) {
        if (s->trial.command) {
            r->argc = 3;
            r->argv = cgq_xcalloc (r->argc, sizeof *r->argv);
            r->argv[0] = cgq_xstrdup ("/bin/sh");
            r->argv[1] = cgq_xstrdup ("-c");
            r->argv[2] = cgq_space_render (s->trial.command, t->params, j->id, t->id, j->spec_dir,
                                           1, why, sizeof why);
            if (!r->argv[2]) {
                snprintf (err, errlen, "cannot render trial.command: %s", why);
                s_rendered_fini (r);
                return -1;
            }
        }
        else {
            r->argc = s->trial.argc;
            r->argv = cgq_xcalloc (r->argc + 1, sizeof *r->argv);
            for (size_t i = 0; i < r->argc; i++) {
                r->argv[i] = cgq_space_render (s->trial.argv[i], t->params, j->id, t->id,
                                               j->spec_dir, 0, why, sizeof why);
                if (!r->argv[i]) {
                    snprintf (err, errlen, "cannot render trial.command[%zu]: %s", i, why);
                    s_rendered_fini (r);
                    return -1;
                }
            }
        }
    }
    r->kvs = cgq_xcalloc (s->trial.nenv + 1, sizeof *r->kvs);
    r->kvp = cgq_xcalloc (s->trial.nenv + 1, sizeof *r->kvp);
    for (size_t i = 0; i < s->trial.nenv; i++) {
        Cgq__KeyValue kv = CGQ__KEY_VALUE__INIT;
        r->kvs[i] = kv;
        r->kvs[i].key = s->trial.env_keys[i];
        r->kvs[i].value = cgq_space_render (s->trial.env_vals[i], t->params, j->id, t->id,
                                            j->spec_dir, 0, why, sizeof why);
        r->kvp[i] = &r->kvs[i];
        r->nenv = i + 1;
        if (!r->kvs[i].value) {
            snprintf (err, errlen, "cannot render trial.env.%s: %s", s->trial.env_keys[i], why);
            s_rendered_fini (r);
            return -1;
        }
    }
    if (s->trial.kind == CGQ_TRIAL_DEVICE && s->trial.artifact_url) {
        // The spec checked literal values; rendered ones are checked here, so
        // a runner never gets a hash it could not compare.
        r->artifact_url = cgq_space_render (s->trial.artifact_url, t->params, j->id, t->id,
                                            j->spec_dir, 0, why, sizeof why);
        r->artifact_sha256 = r->artifact_url ? cgq_space_render (s->trial.artifact_sha256, t->params,
                                                                 j->id, t->id, j->spec_dir, 0, why,
                                                                 sizeof why)
                                             : NULL;
        if (!r->artifact_url || !r->artifact_sha256) {
            snprintf (err, errlen, "cannot render trial.artifact: %s", why);
            s_rendered_fini (r);
            return -1;
        }
        if (cgq_spec_check_artifact (r->artifact_url, r->artifact_sha256, why, sizeof why) < 0) {
            snprintf (err, errlen, "trial.%s", why);
            s_rendered_fini (r);
            return -1;
        }
    }
    return 0;
}

// s_timeout_ms turns the spec's timeout into the Assign's milliseconds,
// saturating rather than wrapping (0 means none).
static uint32_t
s_timeout_ms (double timeout_s)
{
    if (!(timeout_s > 0))
        return 0;
    double ms = ceil (timeout_s * 1000);
    return ms >= (double) UINT32_MAX ? UINT32_MAX : (uint32_t) ms;
}

// s_start runs t's next attempt on n.
static void
s_start (coord_t *c, node_t *n, trial_t *t)
{
    job_t *j = t->job;
    const cgq_spec_t *s = j->spec;
    t->attempt++;
    char err[512];
    s_rendered_t r;
    if (s_render (t, &r, err, sizeof err) < 0) {
        cgq_twarn (j->id, t->id, t->attempt, "cannot start: %s", err);
        jobs_failed (c, t, err, false);
        return;
    }
    // A new attempt picks its GPUs afresh: what t->gpus still holds are
    // positions on the node of an earlier attempt (or, for a recovered trial
    // nobody adopted, GPU indices), meaningless on n and possibly taken there.
    free (t->gpus);
    t->gpus = NULL;
    t->ngpus = 0;
    nodes_attach (n, t);
    if (nodes_grant (n, t) < 0)
        cgq_twarn (j->id, t->id, t->attempt, "node %s over-committed by this trial", n->id);

    uint32_t *gpus = cgq_xcalloc ((size_t) t->ngpus + 1, sizeof *gpus);
    cgq_buf_t gl;
    cgq_buf_init (&gl);
    for (int i = 0; i < t->ngpus; i++) {
        gpus[i] = t->gpus[i] >= 0 ? n->gpus[t->gpus[i]].index : 0;
        cgq_buf_printf (&gl, "%s%u", i ? "," : "", gpus[i]);
    }
    Cgq__TaskRef ref = CGQ__TASK_REF__INIT;
    ref.job = j->id;
    ref.trial = t->id;
    ref.attempt = t->attempt;
    Cgq__Assign a = CGQ__ASSIGN__INIT;
    a.task = &ref;
    a.kind = s->trial.kind == CGQ_TRIAL_NOOP     ? "noop"
             : s->trial.kind == CGQ_TRIAL_DEVICE ? "benchmark"
             : s->trial.kind == CGQ_TRIAL_PREDICTOR ? "predictor"
                                                 : "command";
    a.params_json = t->params_json;
    a.n_argv = r.argc;
    a.argv = r.argv;
    a.n_env = r.nenv;
    a.env = r.kvp;
    a.n_gpus = (size_t) t->ngpus;
    a.gpus = gpus;
    a.gpu_fraction = nodes_gpu_share (&j->req);
    a.cpus = j->req.cpu;
    a.memory = j->req.memory;
    a.timeout_ms = s_timeout_ms (s->trial.timeout_s);
    a.spec_dir = j->spec_dir ? j->spec_dir : "";
    if (t->device) {
        a.device_id = t->device->id;
        a.benchmark = s->trial.benchmark;
        a.artifact_url = r.artifact_url ? r.artifact_url : "";
        a.artifact_sha256 = r.artifact_sha256 ? r.artifact_sha256 : "";
        a.repeats = s->trial.repeats;
        a.warmup = s->trial.warmup;
    }
    a.seq = ++n->assign_seq;
    a.epoch = c->epoch;
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_ASSIGN;
    env.assign = &a;
    outbox_push (c, c->nodes_sock, n->id, strlen (n->id), false, &env);
    jobs_started (c, t, n, gl.data);
    if (t->device) {
        char tkey[128];
        cgq_key_trial (tkey, sizeof tkey, j->id, t->id);
        cgq_store_cmd (c->store, "HSET %s %s %s", tkey, CGQ_TF_DEVICE, t->device->id);
    }
    t->assign_seq = a.seq;
    s_rendered_fini (&r);
    free (gpus);
    cgq_buf_fini (&gl);
}

// s_serve tries to start one trial of j. Returns true if it used one up.
static bool
s_serve (coord_t *c, job_t *j)
{
    node_t *n;
    switch (scheduler_choose (c, j, &n)) {
    case SCHEDULE_IDLE:
        return false;
    case SCHEDULE_BLOCKED: {
        char *why = scheduler_blocked_reason (c, &j->req);
        jobs_set_blocked (c, j, why);
        free (why);
        return false;
    }
    case SCHEDULE_WAIT:
        if (j->blocked && c->nodes)
            jobs_set_blocked (c, j, NULL); // a node that fits has joined; it is only busy
        return false;
    case SCHEDULE_GO:
        break;
    }
    if (j->blocked)
        jobs_set_blocked (c, j, NULL);
    trial_t *t = jobs_next_trial (c, j);
    if (!t)
        return false;
    s_start (c, n, t);
    return true;
}

int
dispatch_run (coord_t *c)
{
    if (!c->sched_dirty)
        return 0;
    c->sched_dirty = false;
    int dispatched = 0;
    bool progress = true;
    while (progress && c->jobs) {
        progress = false;
        job_t *start = c->rr ? c->rr : c->jobs;
        job_t *j = start;
        do {
            job_t *next = j->next ? j->next : c->jobs;
            if (s_serve (c, j)) {
                progress = true;
                c->rr = next;
                if (++dispatched >= DISPATCH_MAX_PER_TURN) {
                    c->sched_dirty = true; // more next turn, after this batch is out
                    return dispatched;
                }
            }
            j = next;
        } while (j != start);
    }
    return dispatched;
}
