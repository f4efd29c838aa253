// scheduler: fits trials onto nodes. Jobs are served round-robin, one trial
// per job per round, so two jobs sharing workers progress alike. Nodes are
// tried in rotation so load spreads; fractional GPU requests go to the GPU
// with the least capacity left that still fits, so shares pack two per GPU.
// Cost per dispatch is O(jobs + nodes); nothing scans trials.
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coord.h"
#include "log.h"
#include "space.h"

#define EPS 1e-9

// Bounds on one node and one turn: a node runs at most this many tasks
// whatever the trials ask for, and one turn dispatches at most this many, so
// a turn's Redis batch and its latency stay bounded (the rest goes next turn).
#define SCHED_MAX_NODE_TASKS 1024
#define SCHED_MAX_PER_TURN 4096

// s_gpu_pick writes into out the positions of GPUs that satisfy r given the
// capacity in free[] (ngpus entries); returns how many, or -1 if none fit.
static int
s_gpu_pick (const gpu_t *gpus, int ngpus, double gpu, bool total, int *out)
{
    if (gpu <= 0)
        return 0;
    if (gpu <= 1.0 + EPS) {
        int best = -1;
        for (int i = 0; i < ngpus; i++) {
            double cap = total ? 1.0 : gpus[i].free;
            if (cap + EPS >= gpu && (best < 0 || cap < (total ? 1.0 : gpus[best].free)))
                best = i;
        }
        if (best < 0)
            return -1;
        if (out)
            out[0] = best;
        return 1;
    }
    int want = (int) llround (gpu), got = 0;
    for (int i = 0; i < ngpus && got < want; i++)
        if (total || gpus[i].free >= 1.0 - EPS) {
            if (out)
                out[got] = i;
            got++;
        }
    return got == want ? want : -1;
}

bool
sched_fits_free (const node_t *n, const req_t *r)
{
    // Trials that ask for nothing (cpu: 0) would otherwise fit without end.
    if (n->ntasks >= SCHED_MAX_NODE_TASKS)
        return false;
    if (n->free_cpus + EPS < r->cpu)
        return false;
    if (r->memory && n->free_memory < r->memory)
        return false;
    return s_gpu_pick (n->gpus, n->ngpus, r->gpu, false, NULL) >= 0;
}

bool
sched_fits_total (const node_t *n, const req_t *r)
{
    if (n->cpus + EPS < r->cpu)
        return false;
    if (r->memory && n->memory < r->memory)
        return false;
    return s_gpu_pick (n->gpus, n->ngpus, r->gpu, true, NULL) >= 0;
}

int
sched_grant (coord_t *c, node_t *n, trial_t *t)
{
    const req_t *r = &t->job->req;
    int want = r->gpu <= 0 ? 0 : r->gpu <= 1.0 + EPS ? 1 : (int) llround (r->gpu);
    int ok = 0;
    // A re-grant after a reconnect keeps the GPUs it was given when they still exist.
    if (t->ngpus != want) {
        free (t->gpus);
        t->gpus = want ? cgq_xcalloc ((size_t) want, sizeof *t->gpus) : NULL;
        t->ngpus = 0;
    }
    if (want && t->ngpus == 0) {
        if (s_gpu_pick (n->gpus, n->ngpus, r->gpu, false, t->gpus) < 0)
            ok = -1;
        t->ngpus = want;
    }
    double share = r->gpu > 1 ? 1.0 : r->gpu;
    for (int i = 0; i < t->ngpus; i++) {
        int g = t->gpus[i];
        if (g < 0 || g >= n->ngpus) {
            ok = -1;
            continue;
        }
        n->gpus[g].free -= share;
        if (n->gpus[g].free < -EPS)
            ok = -1;
    }
    n->free_cpus -= r->cpu;
    if (n->free_memory >= r->memory)
        n->free_memory -= r->memory;
    else {
        n->free_memory = 0;
        ok = -1;
    }
    if (n->free_cpus < -EPS)
        ok = -1;
    t->holds = true;
    n->dirty = true;
    (void) c;
    return ok;
}

// s_reason explains why no connected node can ever run r.
static char *
s_reason (coord_t *c, const req_t *r)
{
    double max_cpu = 0;
    int max_gpu = 0, nodes = 0;
    uint64_t max_mem = 0;
    for (node_t *n = c->nodes; n; n = n->next) {
        nodes++;
        if (n->cpus > max_cpu)
            max_cpu = n->cpus;
        if (n->ngpus > max_gpu)
            max_gpu = n->ngpus;
        if (n->memory > max_mem)
            max_mem = n->memory;
    }
    char cpu[32], gpu[32], mcpu[32];
    cgq_fmt_double (cpu, r->cpu);
    cgq_fmt_double (gpu, r->gpu);
    cgq_fmt_double (mcpu, max_cpu);
    if (r->gpu > 0 && (max_gpu == 0 || (r->gpu > 1 && max_gpu < llround (r->gpu))))
        return cgq_xasprintf ("needs gpu %s but the %d connected node(s) have at most %d GPU(s)",
                              gpu, nodes, max_gpu);
    if (r->memory > max_mem)
        return cgq_xasprintf ("needs memory %llu MiB but the %d connected node(s) offer at most "
                              "%llu MiB",
                              (unsigned long long) (r->memory >> 20), nodes,
                              (unsigned long long) (max_mem >> 20));
    return cgq_xasprintf ("needs cpu %s but the %d connected node(s) offer at most %s", cpu, nodes,
                          mcpu);
}

void
sched_dispatch (coord_t *c, node_t *n, trial_t *t)
{
    job_t *j = t->job;
    const cgq_spec_t *s = j->spec;
    t->attempt++;
    coord_node_attach (n, t);
    t->started = cgq_wall_s ();

    char err[256];
    char **argv = NULL;
    size_t argc = 0;
    if (s->trial.kind == CGQ_TRIAL_COMMAND) {
        if (s->trial.command) {
            argc = 3;
            argv = cgq_xcalloc (argc, sizeof *argv);
            argv[0] = cgq_xstrdup ("/bin/sh");
            argv[1] = cgq_xstrdup ("-c");
            argv[2] = cgq_space_render (s->trial.command, t->params, j->id, t->id, j->spec_dir, 1,
                                        err, sizeof err);
        }
        else {
            argc = s->trial.argc;
            argv = cgq_xcalloc (argc, sizeof *argv);
            for (size_t i = 0; i < argc; i++)
                argv[i] = cgq_space_render (s->trial.argv[i], t->params, j->id, t->id,
                                            j->spec_dir, 0, err, sizeof err);
        }
        for (size_t i = 0; i < argc; i++)
            if (!argv[i])
                argv[i] = cgq_xstrdup ("");
    }
    Cgq__KeyValue *kvs = cgq_xcalloc (s->trial.nenv + 1, sizeof *kvs);
    Cgq__KeyValue **kvp = cgq_xcalloc (s->trial.nenv + 1, sizeof *kvp);
    for (size_t i = 0; i < s->trial.nenv; i++) {
        Cgq__KeyValue kv = CGQ__KEY_VALUE__INIT;
        kvs[i] = kv;
        kvs[i].key = s->trial.env_keys[i];
        kvs[i].value = cgq_space_render (s->trial.env_vals[i], t->params, j->id, t->id,
                                         j->spec_dir, 0, err, sizeof err);
        if (!kvs[i].value)
            kvs[i].value = cgq_xstrdup ("");
        kvp[i] = &kvs[i];
    }
    uint32_t *gpus = cgq_xcalloc ((size_t) t->ngpus + 1, sizeof *gpus);
    cgq_buf_t gl;
    cgq_buf_init (&gl);
    for (int i = 0; i < t->ngpus; i++) {
        gpus[i] = n->gpus[t->gpus[i]].index;
        cgq_buf_printf (&gl, "%s%u", i ? "," : "", gpus[i]);
    }

    Cgq__TaskRef ref = CGQ__TASK_REF__INIT;
    ref.job = j->id;
    ref.trial = t->id;
    ref.attempt = t->attempt;
    Cgq__Assign a = CGQ__ASSIGN__INIT;
    a.task = &ref;
    a.kind = s->trial.kind == CGQ_TRIAL_NOOP ? "noop" : "command";
    a.params_json = t->params_json;
    a.n_argv = argc;
    a.argv = argv;
    a.n_env = s->trial.nenv;
    a.env = kvp;
    a.n_gpus = (size_t) t->ngpus;
    a.gpus = gpus;
    a.gpu_fraction = j->req.gpu > 1 ? 1.0 : j->req.gpu;
    a.cpus = j->req.cpu;
    a.memory = j->req.memory;
    a.timeout_ms = s->trial.timeout_s > 0 ? (uint32_t) (s->trial.timeout_s * 1000) : 0;
    a.spec_dir = j->spec_dir ? j->spec_dir : "";
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_ASSIGN;
    env.assign = &a;
    coord_send (c, c->nodes_sock, n->id, strlen (n->id), false, &env);

    char started[32], attempt[16];
    cgq_fmt_double (started, t->started);
    snprintf (attempt, sizeof attempt, "%u", t->attempt);
    const char *kv[] = {"attempt", attempt, "node", n->id, "gpus", gl.data, "started", started};
    trial_set_state_kv (c, t, T_RUNNING, kv, 8);
    coord_event (c, "trial.running", j->id, (int64_t) t->id, n->id, t->attempt, NULL);
    c->stat_assigns++;

    for (size_t i = 0; i < argc; i++)
        free (argv[i]);
    free (argv);
    for (size_t i = 0; i < s->trial.nenv; i++)
        free (kvs[i].value);
    free (kvs);
    free (kvp);
    free (gpus);
    cgq_buf_fini (&gl);
}

// s_pick_node returns an alive node with room for r, trying nodes in
// rotation from c->node_rr, or NULL.
static node_t *
s_pick_node (coord_t *c, const req_t *r)
{
    if (!c->nodes)
        return NULL;
    node_t *start = c->node_rr ? c->node_rr : c->nodes;
    node_t *n = start;
    do {
        if (sched_fits_free (n, r)) {
            c->node_rr = n->next ? n->next : c->nodes;
            return n;
        }
        n = n->next ? n->next : c->nodes;
    } while (n != start);
    return NULL;
}

static bool
s_any_fits_total (coord_t *c, const req_t *r)
{
    for (node_t *n = c->nodes; n; n = n->next)
        if (sched_fits_total (n, r))
            return true;
    return false;
}

// s_serve tries to start one trial of j. Returns true if it did.
static bool
s_serve (coord_t *c, job_t *j)
{
    if (j->state != J_RUNNING)
        return false;
    if (j->spec->search.concurrency && j->running >= j->spec->search.concurrency)
        return false;
    bool have = j->qhead || !cgq_searcher_done (j->searcher);
    if (!have)
        return false;
    node_t *n = s_pick_node (c, &j->req);
    if (!n) {
        if (c->nodes && !s_any_fits_total (c, &j->req)) {
            char *why = s_reason (c, &j->req);
            job_set_blocked (c, j, why);
            free (why);
        }
        else if (j->blocked && c->nodes)
            job_set_blocked (c, j, NULL); // a node that fits has joined; it is only busy
        return false;
    }
    if (j->blocked)
        job_set_blocked (c, j, NULL);
    trial_t *t = job_dequeue (j);
    if (!t) {
        t = trial_create (c, j);
        if (!t)
            return false;
    }
    // A new attempt picks its GPUs afresh: what t->gpus still holds are
    // positions on the node of an earlier attempt (or, for a recovered trial
    // nobody adopted, GPU indices), meaningless on n and possibly taken there.
    free (t->gpus);
    t->gpus = NULL;
    t->ngpus = 0;
    if (sched_grant (c, n, t) < 0)
        cgq_warn ("node %s over-committed by trial %" PRIu64 ".%" PRIu64, n->id, j->id, t->id);
    sched_dispatch (c, n, t);
    return true;
}

void
sched_run (coord_t *c)
{
    if (!c->sched_dirty)
        return;
    c->sched_dirty = false;
    if (!c->jobs)
        return;
    bool progress = true;
    int dispatched = 0;
    while (progress) {
        progress = false;
        job_t *start = c->rr ? c->rr : c->jobs;
        job_t *j = start;
        do {
            job_t *next = j->next ? j->next : c->jobs;
            if (s_serve (c, j)) {
                progress = true;
                c->rr = next;
                if (++dispatched >= SCHED_MAX_PER_TURN) {
                    c->sched_dirty = true; // more next turn, after this batch is out
                    return;
                }
            }
            j = next;
        } while (j != start);
    }
}
