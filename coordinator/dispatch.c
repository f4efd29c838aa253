// dispatch: from a scheduling choice to an Assign on its way (a command for a
// worker, a benchmark on one device for a device runner).
#include "dispatch.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "jobs.h"
#include "json.h"
#include "log.h"
#include "nodes.h"
#include "outbox.h"
#include "passes.h"
#include "scheduler.h"
#include "template.h"

// What an Assign carries that must be rendered from the trial's params.
typedef struct {
    char **argv;
    size_t argc;
    Cgq__KeyValue *kvs; // keys and values owned
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
    for (size_t i = 0; i < r->nenv; i++) {
        free (r->kvs[i].key);
        free (r->kvs[i].value);
    }
    free (r->kvs);
    free (r->kvp);
    free (r->artifact_url);
    free (r->artifact_sha256);
    memset (r, 0, sizeof *r);
}

// s_env_add appends one variable (both strings taken) to r's env.
static void
s_env_add (s_rendered_t *r, size_t *cap, char *key, char *value)
{
    if (r->nenv + 1 >= *cap) {
        *cap = *cap ? 2 * *cap : 16;
        r->kvs = cgq_xrealloc (r->kvs, *cap * sizeof *r->kvs);
        r->kvp = cgq_xrealloc (r->kvp, *cap * sizeof *r->kvp);
    }
    Cgq__KeyValue kv = CGQ__KEY_VALUE__INIT;
    kv.key = key;
    kv.value = value;
    r->kvs[r->nenv++] = kv;
    for (size_t i = 0; i < r->nenv; i++) // kvs may have moved
        r->kvp[i] = &r->kvs[i];
}

// s_env_name makes an environment variable name of parts: upper-cased,
// anything but letters and digits as '_' (CGQ_STAGE_TRAIN_VAL_ACC).
static char *
s_env_name (const char *prefix, const char *a, const char *b)
{
    cgq_buf_t n;
    cgq_buf_init (&n);
    cgq_buf_printf (&n, "%s%s_%s", prefix, a, b);
    for (size_t i = strlen (prefix); i < n.len; i++) {
        char ch = n.data[i];
        if (ch >= 'a' && ch <= 'z')
            n.data[i] = (char) (ch - 'a' + 'A');
        else if (!((ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')))
            n.data[i] = '_';
    }
    return cgq_buf_take (&n);
}

// s_render_vars is what t's templates may name: its params, and for a
// later stage every metric of the stages before it as "STAGE.METRIC".
// New reference.
static json_t *
s_render_vars (const trial_t *t)
{
    json_t *vars = json_copy (t->params);
    const char *sk, *mk;
    json_t *sm, *mv;
    json_object_foreach (t->stage_metrics, sk, sm)
    {
        json_object_foreach (sm, mk, mv)
        {
            char *name = cgq_xmalloc (strlen (sk) + strlen (mk) + 2);
            sprintf (name, "%s.%s", sk, mk);
            json_object_set (vars, name, mv);
            free (name);
        }
    }
    return vars;
}

// s_stage_env adds what a stage of a multi-stage trial is told: its name and
// index, and every metric of the stages before it, one variable each
// (CGQ_STAGE_<STAGE>_<METRIC>) and all as JSON (CGQ_STAGE_METRICS).
static void
s_stage_env (const trial_t *t, const cgq_stage_t *st, s_rendered_t *r, size_t *cap)
{
    if (t->job->nstages < 2)
        return;
    char idx[16];
    snprintf (idx, sizeof idx, "%u", t->stage);
    s_env_add (r, cap, cgq_xstrdup ("CGQ_STAGE"), cgq_xstrdup (st->name ? st->name : ""));
    s_env_add (r, cap, cgq_xstrdup ("CGQ_STAGE_INDEX"), cgq_xstrdup (idx));
    s_env_add (r, cap, cgq_xstrdup ("CGQ_STAGE_METRICS"),
               t->stage_metrics ? cgq_json_dumps (t->stage_metrics) : cgq_xstrdup ("{}"));
    const char *sk, *mk;
    json_t *sm, *mv;
    json_object_foreach (t->stage_metrics, sk, sm)
    {
        json_object_foreach (sm, mk, mv)
            s_env_add (r, cap, s_env_name ("CGQ_STAGE_", sk, mk), cgq_template_value_str (mv));
    }
}

// s_assignment_env adds, for each assignment param with an env template
// (space.NAME.assignment.env: "OP_BACKEND_{item}={choice}"), one variable
// per item of the trial's assignment. Returns 0, or -1 with err set.
static int
s_assignment_env (const trial_t *t, s_rendered_t *r, size_t *cap, char *err, size_t errlen)
{
    const cgq_spec_t *s = t->job->spec;
    for (size_t i = 0; i < s->nparams; i++) {
        const cgq_param_t *p = &s->params[i];
        if (p->kind != CGQ_PARAM_ASSIGNMENT || !p->env)
            continue;
        json_t *map = json_object_get (json_object_get (t->params, p->name), "map");
        const char *item;
        json_t *choice;
        json_object_foreach (map, item, choice)
        {
            json_t *v = json_pack ("{s:s, s:O}", "item", item, "choice", choice);
            char why[256];
            char *line = cgq_template_render (p->env, v, t->job->id, t->id, t->job->spec_dir, 0,
                                              why, sizeof why);
            json_decref (v);
            char *eq = line ? strchr (line, '=') : NULL;
            if (!eq) {
                snprintf (err, errlen, "cannot render space.%s.assignment.env: %s", p->name,
                          line ? "no '=' in it" : why);
                free (line);
                return -1;
            }
            *eq = 0;
            s_env_add (r, cap, cgq_xstrdup (line), cgq_xstrdup (eq + 1));
            free (line);
        }
    }
    return 0;
}

// s_env_render adds the env of a spec (trial.env, or a stage's), rendered.
static int
s_env_render (const trial_t *t, const cgq_stage_t *st, const json_t *vars, const char *where,
              s_rendered_t *r, size_t *cap, char *err, size_t errlen)
{
    const job_t *j = t->job;
    for (size_t i = 0; i < st->nenv; i++) {
        char why[256] = "";
        char *v = cgq_template_render (st->env_vals[i], vars, j->id, t->id, j->spec_dir, 0, why,
                                       sizeof why);
        if (!v) {
            snprintf (err, errlen, "cannot render %s.env.%s: %s", where, st->env_keys[i], why);
            return -1;
        }
        s_env_add (r, cap, cgq_xstrdup (st->env_keys[i]), v);
    }
    return 0;
}

// s_render_stage fills r from stage st of t with the names in vars.
static int
s_render_stage (const trial_t *t, const cgq_stage_t *st, const json_t *vars, s_rendered_t *r,
                char *err, size_t errlen)
{
    const job_t *j = t->job;
    char why[256] = "";
    if (st->kind == CGQ_TRIAL_PREDICTOR) {
        // The worker runs its built-in predictor on this dataset directory.
        r->argc = 1;
        r->argv = cgq_xcalloc (2, sizeof *r->argv);
        r->argv[0] =
            cgq_template_render (st->data, vars, j->id, t->id, j->spec_dir, 0, why, sizeof why);
        if (!r->argv[0]) {
            snprintf (err, errlen, "cannot render trial.data: %s", why);
            return -1;
        }
    }
    if (st->kind == CGQ_TRIAL_COMMAND) {
        if (st->command) {
            r->argc = 3;
            r->argv = cgq_xcalloc (r->argc, sizeof *r->argv);
            r->argv[0] = cgq_xstrdup ("/bin/sh");
            r->argv[1] = cgq_xstrdup ("-c");
            r->argv[2] = cgq_template_render (st->command, vars, j->id, t->id, j->spec_dir, 1, why,
                                              sizeof why);
            if (!r->argv[2]) {
                snprintf (err, errlen, "cannot render trial.command: %s", why);
                return -1;
            }
        }
        else {
            r->argc = st->argc;
            r->argv = cgq_xcalloc (r->argc + 1, sizeof *r->argv);
            for (size_t i = 0; i < r->argc; i++) {
                r->argv[i] = cgq_template_render (st->argv[i], vars, j->id, t->id, j->spec_dir, 0,
                                                  why, sizeof why);
                if (!r->argv[i]) {
                    snprintf (err, errlen, "cannot render trial.command[%zu]: %s", i, why);
                    return -1;
                }
            }
        }
    }
    // The env: what cgq tells (stages, assignments), then trial.env, then
    // the stage's own, so that the spec may override what cgq sets.
    size_t cap = 16;
    r->kvs = cgq_xcalloc (cap, sizeof *r->kvs);
    r->kvp = cgq_xcalloc (cap, sizeof *r->kvp);
    s_stage_env (t, st, r, &cap);
    if (s_assignment_env (t, r, &cap, err, errlen) < 0)
        return -1;
    if (st != &j->spec->trial &&
        s_env_render (t, &j->spec->trial, vars, "trial", r, &cap, err, errlen) < 0)
        return -1;
    if (s_env_render (t, st, vars, j->spec->nstages ? "trial.stages[]" : "trial", r, &cap, err,
                      errlen) < 0)
        return -1;
    if (st->kind == CGQ_TRIAL_DEVICE && st->artifact_url) {
        // The spec checked literal values; rendered ones are checked here, so
        // a runner never gets a hash it could not compare.
        r->artifact_url = cgq_template_render (st->artifact_url, vars, j->id, t->id, j->spec_dir, 0,
                                               why, sizeof why);
        r->artifact_sha256 = r->artifact_url
                                 ? cgq_template_render (st->artifact_sha256, vars, j->id, t->id,
                                                        j->spec_dir, 0, why, sizeof why)
                                 : NULL;
        if (!r->artifact_url || !r->artifact_sha256) {
            snprintf (err, errlen, "cannot render trial.artifact: %s", why);
            return -1;
        }
        if (cgq_spec_check_artifact (r->artifact_url, r->artifact_sha256, why, sizeof why) < 0) {
            snprintf (err, errlen, "trial.%s", why);
            return -1;
        }
    }
    return 0;
}

// s_render fills r from t's current stage and its params (and earlier
// stages' metrics). Returns 0, or -1 with err set to what could not be
// rendered (r is then empty).
static int
s_render (const trial_t *t, s_rendered_t *r, char *err, size_t errlen)
{
    memset (r, 0, sizeof *r);
    const cgq_stage_t *st = cgq_spec_stage (t->job->spec, t->stage);
    if (!st) {
        snprintf (err, errlen, "the spec has no stage %u", t->stage);
        return -1;
    }
    json_t *vars = s_render_vars (t);
    int rc = s_render_stage (t, st, vars, r, err, errlen);
    json_decref (vars);
    if (rc < 0)
        s_rendered_fini (r);
    return rc;
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

// s_assign queues the Assign of t's current attempt on n (attached,
// resources granted), rendered as r, with seq; gl (if not NULL) gets the GPU
// indices it grants.
static void
s_assign (coord_t *c, node_t *n, trial_t *t, uint64_t seq, const s_rendered_t *rp,
          cgq_buf_t *gl)
{
    job_t *j = t->job;
    const cgq_stage_t *st = cgq_spec_stage (j->spec, t->stage);
    const req_t *req = TRIAL_REQ (t);
    s_rendered_t r = *rp;
    uint32_t *gpus = cgq_xcalloc ((size_t) t->ngpus + 1, sizeof *gpus);
    for (int i = 0; i < t->ngpus; i++) {
        gpus[i] = t->gpus[i] >= 0 ? n->gpus[t->gpus[i]].index : 0;
        if (gl)
            cgq_buf_printf (gl, "%s%u", i ? "," : "", gpus[i]);
    }
    Cgq__TaskRef ref = CGQ__TASK_REF__INIT;
    ref.job = j->id;
    ref.trial = t->id;
    ref.stage = t->stage;
    ref.attempt = t->attempt;
    Cgq__Assign a = CGQ__ASSIGN__INIT;
    char *measure_json = NULL; // the stage's measure: (spec_measure.c)
    a.task = &ref;
    a.kind = st->kind == CGQ_TRIAL_NOOP        ? "noop"
             : st->kind == CGQ_TRIAL_DEVICE    ? "benchmark"
             : st->kind == CGQ_TRIAL_PREDICTOR ? "predictor"
             : st->kind == CGQ_TRIAL_CLIENT    ? "client"
                                               : "command";
    a.stage = st->name ? st->name : "";
    a.params_json = t->params_json;
    a.n_argv = r.argc;
    a.argv = r.argv;
    a.n_env = r.nenv;
    a.env = r.kvp;
    a.n_gpus = (size_t) t->ngpus;
    a.gpus = gpus;
    a.gpu_fraction = nodes_gpu_share (req);
    a.cpus = req->cpu;
    a.memory = req->memory;
    a.timeout_ms = s_timeout_ms (st->timeout_s);
    a.spec_dir = j->spec_dir ? j->spec_dir : "";
    if (t->device) {
        a.device_id = t->device->id;
        a.benchmark = st->benchmark;
        a.artifact_url = r.artifact_url ? r.artifact_url : "";
        a.artifact_sha256 = r.artifact_sha256 ? r.artifact_sha256 : "";
        a.repeats = st->repeats;
        a.warmup = st->warmup;
        measure_json = cgq_spec_measure_json (&st->measure); // "": none
        a.measure_json = measure_json ? measure_json : "";
    }
    a.seq = seq;
    a.epoch = c->epoch;
    // Checkpoints: where a worker seals them, and what a later attempt
    // restores (docs/architecture.md, "Checkpoints").
    char *store = NULL;
    Cgq__Checkpoint **resume = NULL;
    if (st->kind == CGQ_TRIAL_COMMAND || st->kind == CGQ_TRIAL_PREDICTOR) {
        if (j->spec->checkpoint.store) {
            char why[256];
            store = cgq_template_render (j->spec->checkpoint.store, NULL, j->id, t->id,
                                         j->spec_dir, 0, why, sizeof why);
        }
        a.checkpoint_store = store ? store : "";
        a.checkpoint_keep = j->spec->checkpoint.keep;
        a.n_resume = checkpoint_resume (t->ckpts, t->stage, &resume);
        a.resume = resume;
        a.resume_required = a.n_resume > 0 && checkpoint_required (t->ckpts);
    }
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_ASSIGN;
    env.assign = &a;
    outbox_push (c, c->nodes_sock, n->id, strlen (n->id), false, &env);
    if (c->out_tail)
        c->out_tail->assign_seq = seq; // n->assign_out once it has left (outbox.c)
    checkpoint_resume_free (resume, a.n_resume);
    free (store);
    free (measure_json);
    free (gpus);
}

// s_start runs t's next attempt on n.
static void
s_start (coord_t *c, node_t *n, trial_t *t)
{
    job_t *j = t->job;
    t->attempt++;
    t->resent = 0;
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
    cgq_buf_t gl;
    cgq_buf_init (&gl);
    uint64_t seq = ++n->assign_seq;
    s_assign (c, n, t, seq, &r, &gl);
    s_rendered_fini (&r);
    t->assign_seq = seq;
    jobs_started (c, t, n, gl.data);
    cgq_buf_fini (&gl);
}

int
dispatch_resend (coord_t *c, trial_t *t)
{
    char err[512];
    s_rendered_t r;
    if (!t->node || !t->assign_seq || s_render (t, &r, err, sizeof err) < 0)
        return -1;
    s_assign (c, t->node, t, t->assign_seq, &r, NULL);
    s_rendered_fini (&r);
    t->resent++;
    return 0;
}

// s_serve tries to start one trial of j. Returns true if it used one up.
static bool
s_serve (coord_t *c, job_t *j)
{
    node_t *n;
    uint32_t stage;
    trial_t **next_pass; // measure.passes: the second pass once the first has ended
    size_t npass = passes_ready (j, &next_pass);
    for (size_t i = 0; i < npass; i++)
        jobs_enqueue (j, next_pass[i], false);
    if (npass)
        cgq_info ("job %" PRIu64 ": first pass done; %zu trial(s) queued for pass 2, "
                  "highest id first", j->id, npass);
    free (next_pass);
    switch (scheduler_choose_stage (c, j, &n, &stage)) {
    case SCHEDULE_IDLE:
        return false;
    case SCHEDULE_BLOCKED: {
        char *why = scheduler_blocked_reason (c, &j->req[stage]);
        jobs_set_blocked (c, j, why);
        j->blocked_stage = stage;
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
    // Another stage may still be blocked (its trials wait for a device
    // while first stages run on workers): only this stage's block is over.
    if (j->blocked && j->blocked_stage == stage)
        jobs_set_blocked (c, j, NULL);
    trial_t *t = jobs_next_trial (c, j, stage);
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
