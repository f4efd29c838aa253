// coord_testing: fixtures for the coordinator's unit tests.
#include "coord_testing.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "control.h"
#include "jobs.h"
#include "loop.h"
#include "nodes.h"
#include "outbox.h"
#include "session.h"
#include "space.h"

coord_t *
ct_coord_new (const char *url)
{
    coord_cfg_t cfg = {.heartbeat_ms = 1000, .dead_after = 5, .stale_after = 2,
                       .max_frame = 4 << 20, .max_trials = 10000000, .max_params = 1024,
                       .max_node_cpus = 65536, .max_node_gpus = 256,
                       .max_spec = 1 << 20};
    coord_t *c = cgq_xcalloc (1, sizeof *c);
    coord_init (c, &cfg);
    char err[256];
    c->store = cgq_store_new (url, 2000, err, sizeof err);
    if (!c->store)
        fail_msg ("cgq_store_new (%s): %s", url, err);
    c->epoch = 1;
    return c;
}

void
ct_coord_destroy (coord_t **c_p)
{
    if (!c_p || !*c_p)
        return;
    coord_fini (*c_p);
    free (*c_p);
    *c_p = NULL;
}

job_t *
ct_job (coord_t *c, uint64_t id, const char *yaml)
{
    char err[1024];
    cgq_spec_t *spec = cgq_spec_parse (yaml, strlen (yaml), "test.yaml", err, sizeof err);
    if (!spec)
        fail_msg ("spec: %s", err);
    cgq_searcher_t *s = cgq_searcher_new (spec, NULL, err, sizeof err);
    if (!s)
        fail_msg ("searcher: %s", err);
    uint64_t total = 0;
    cgq_space_count (spec, &total);
    job_t *j = jobs_add (c, id, spec, s, "/tmp");
    jobs_submitted (c, j, yaml, "test.yaml", total);
    return j;
}

// s_hello sends node id's Hello offering res, with what x says (NULL: no
// running tasks, instance 0, no Assign seen), as a node of kind.
static void
s_hello (coord_t *c, const char *id, Cgq__NodeKind kind, Cgq__Resources *res, const ct_hello_t *x)
{
    Cgq__Hello h = CGQ__HELLO__INIT;
    h.node_id = (char *) id;
    h.kind = kind;
    h.hostname = "test";
    h.pid = 1;
    h.resources = res;
    if (x) {
        h.n_running = x->nrunning;
        h.running = x->running;
        h.instance = x->instance;
        h.assign_epoch = x->assign_epoch;
        h.assign_seq = x->assign_seq;
        h.batches = x->batches;
    }
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_HELLO;
    env.hello = &h;
    session_message (c, id, strlen (id), &env);
}

node_t *
ct_node (coord_t *c, const char *id, double cpus, int ngpus, uint64_t memory)
{
    Cgq__Gpu gpus[16], *gp[16];
    Cgq__Resources res = CGQ__RESOURCES__INIT;
    res.cpus = cpus;
    res.memory = memory;
    for (int i = 0; i < ngpus && i < 16; i++) {
        Cgq__Gpu g = CGQ__GPU__INIT;
        gpus[i] = g;
        gpus[i].index = (uint32_t) i;
        gpus[i].name = "fake";
        gp[i] = &gpus[i];
    }
    res.n_gpus = (size_t) ngpus;
    res.gpus = gp;
    s_hello (c, id, CGQ__NODE_KIND__NODE_WORKER, &res, NULL);
    node_t *n = nodes_find (c, id);
    assert_non_null (n);
    return n;
}

node_t *
ct_runner (coord_t *c, const char *id, const char *const *devices)
{
    enum { MAXD = 16, MAXT = 8 };
    Cgq__Device dev[MAXD], *dp[MAXD];
    Cgq__KeyValue kv[MAXD][MAXT], *kp[MAXD][MAXT];
    char buf[MAXD][256];
    size_t nd = 0;
    for (; devices && devices[nd] && nd < MAXD; nd++) {
        Cgq__Device d = CGQ__DEVICE__INIT;
        dev[nd] = d;
        snprintf (buf[nd], sizeof buf[nd], "%s", devices[nd]);
        char *colon = strchr (buf[nd], ':');
        assert_non_null (colon);
        *colon = 0;
        dev[nd].id = buf[nd];
        dev[nd].tags = kp[nd];
        char *save = NULL;
        for (char *tag = strtok_r (colon + 1, ",", &save); tag && dev[nd].n_tags < MAXT;
             tag = strtok_r (NULL, ",", &save)) {
            Cgq__KeyValue k = CGQ__KEY_VALUE__INIT;
            char *eq = strchr (tag, '=');
            assert_non_null (eq);
            *eq = 0;
            k.key = tag;
            k.value = eq + 1;
            kv[nd][dev[nd].n_tags] = k;
            kp[nd][dev[nd].n_tags] = &kv[nd][dev[nd].n_tags];
            dev[nd].n_tags++;
        }
        dp[nd] = &dev[nd];
    }
    Cgq__Resources res = CGQ__RESOURCES__INIT;
    res.n_devices = nd;
    res.devices = dp;
    s_hello (c, id, CGQ__NODE_KIND__NODE_DEVICE_RUNNER, &res, NULL);
    node_t *n = nodes_find (c, id);
    assert_non_null (n);
    return n;
}

void
ct_hello (coord_t *c, const char *id, double cpus, const ct_hello_t *x)
{
    Cgq__Resources res = CGQ__RESOURCES__INIT;
    res.cpus = cpus;
    s_hello (c, id, CGQ__NODE_KIND__NODE_WORKER, &res, x);
}

size_t
ct_assigns (const coord_t *c, Cgq__TaskRef *refs, size_t max)
{
    size_t n = 0;
    for (const out_t *o = c->out_head; o; o = o->next) {
        if (o->acks)
            continue; // an Ack still open (encoded when sent)
        cgq_env_t *env = cgq_wire_decode (o->data, o->len, 0);
        assert_non_null (env);
        if (env->body_case == CGQ__ENVELOPE__BODY_ASSIGN) {
            if (n < max) {
                Cgq__TaskRef r = CGQ__TASK_REF__INIT;
                r.job = env->assign->task->job;
                r.trial = env->assign->task->trial;
                r.stage = env->assign->task->stage;
                r.attempt = env->assign->task->attempt;
                refs[n] = r;
            }
            n++;
        }
        cgq_wire_free (env);
    }
    return n;
}

void
ct_result (coord_t *c, const char *node, uint64_t job, uint64_t trial, uint32_t attempt,
           Cgq__TaskStatus status, const char *metrics_json, const char *error)
{
    ct_result_stage (c, node, job, trial, 0, attempt, status, metrics_json, error);
}

char *
ct_assign_get (const coord_t *c, uint64_t trial, uint32_t attempt, const char *what)
{
    char *out = NULL;
    for (const out_t *o = c->out_head; o && !out; o = o->next) {
        if (o->acks)
            continue; // an Ack still open (encoded when sent)
        cgq_env_t *env = cgq_wire_decode (o->data, o->len, 0);
        assert_non_null (env);
        const Cgq__Assign *a = env->assign;
        if (env->body_case == CGQ__ENVELOPE__BODY_ASSIGN && a->task->trial == trial &&
            a->task->attempt == attempt) {
            if (!strcmp (what, "stage"))
                out = cgq_xstrdup (a->stage);
            else if (!strcmp (what, "kind"))
                out = cgq_xstrdup (a->kind);
            else if (!strcmp (what, "artifact_url"))
                out = cgq_xstrdup (a->artifact_url);
            else if (!strncmp (what, "argv", 4)) {
                size_t i = strtoul (what + 4, NULL, 10);
                out = cgq_xstrdup (i < a->n_argv ? a->argv[i] : "");
            }
            else if (!strncmp (what, "env:", 4)) {
                for (size_t i = 0; i < a->n_env && !out; i++)
                    if (!strcmp (a->env[i]->key, what + 4))
                        out = cgq_xstrdup (a->env[i]->value);
                if (!out)
                    out = cgq_xstrdup ("(absent)");
            }
        }
        cgq_wire_free (env);
    }
    return out;
}

void
ct_result_stage (coord_t *c, const char *node, uint64_t job, uint64_t trial, uint32_t stage,
                 uint32_t attempt, Cgq__TaskStatus status, const char *metrics_json,
                 const char *error)
{
    Cgq__TaskRef ref = CGQ__TASK_REF__INIT;
    ref.job = job;
    ref.trial = trial;
    ref.stage = stage;
    ref.attempt = attempt;
    Cgq__Result r = CGQ__RESULT__INIT;
    r.task = &ref;
    r.status = status;
    r.metrics_json = (char *) metrics_json;
    r.error = (char *) error;
    r.duration_s = 0.5;
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_RESULT;
    env.result = &r;
    session_message (c, node, strlen (node), &env);
}

int
ct_suggest (coord_t *c, uint64_t job, const char *const *params, size_t n, char *msg,
            size_t msglen)
{
    Cgq__Suggest s = CGQ__SUGGEST__INIT;
    s.job = job;
    s.params_json = (char **) params;
    s.n_params_json = n;
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_SUGGEST;
    env.suggest = &s;
    control_message (c, "cli", 3, &env);
    // The reply is the last message queued for the control socket.
    int code = -1;
    for (const out_t *o = c->out_head; o; o = o->next) {
        if (o->sock != c->ctl_sock || o->acks || !o->rid || o->rid_len != 3 ||
            memcmp (o->rid, "cli", 3) != 0)
            continue;
        cgq_env_t *r = cgq_wire_decode (o->data, o->len, 0);
        assert_non_null (r);
        if (r->body_case == CGQ__ENVELOPE__BODY_REPLY) {
            code = r->reply->code;
            snprintf (msg, msglen, "%s", r->reply->message ? r->reply->message : "");
        }
        cgq_wire_free (r);
    }
    if (code < 0)
        fail_msg ("Suggest for job %llu queued no reply", (unsigned long long) job);
    return code;
}
