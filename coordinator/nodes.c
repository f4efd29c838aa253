// nodes: the registry of connected nodes and the resource ledger.
#include "nodes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

#define EPS 1e-9

node_t *
nodes_find (coord_t *c, const char *id)
{
    return zhashx_lookup (c->node_index, id);
}

node_t *
nodes_add (coord_t *c, const char *id)
{
    node_t *n = cgq_xcalloc (1, sizeof *n);
    n->id = cgq_xstrdup (id);
    n->next = c->nodes;
    c->nodes = n;
    zhashx_insert (c->node_index, n->id, n);
    return n;
}

static void
s_gpus_free (node_t *n)
{
    for (int i = 0; i < n->ngpus; i++)
        free (n->gpus[i].name);
    free (n->gpus);
    n->gpus = NULL;
    n->ngpus = 0;
}

static void
s_node_free (node_t *n)
{
    s_gpus_free (n);
    free (n->hostname);
    free (n->id);
    free (n);
}

double
nodes_gpu_share (const req_t *r)
{
    return r->gpu > 1 ? 1.0 : r->gpu;
}

int
nodes_gpu_count (const req_t *r)
{
    return r->gpu <= 0 ? 0 : r->gpu <= 1.0 + EPS ? 1 : (int) llround (r->gpu);
}

// s_gpu_pick writes into out the positions of GPUs that satisfy a request
// of gpu, given their free capacity (or their whole capacity with total);
// returns how many, or -1 if none fit. A share goes to the GPU with the
// least capacity left that fits, so 0.5 + 0.5 pack onto one GPU.
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
nodes_fits_free (const node_t *n, const req_t *r)
{
    if (n->ntasks >= NODES_MAX_TASKS)
        return false;
    if (n->free_cpus + EPS < r->cpu)
        return false;
    if (r->memory && n->free_memory < r->memory)
        return false;
    return s_gpu_pick (n->gpus, n->ngpus, r->gpu, false, NULL) >= 0;
}

bool
nodes_fits_total (const node_t *n, const req_t *r)
{
    if (n->cpus + EPS < r->cpu)
        return false;
    if (r->memory && n->memory < r->memory)
        return false;
    return s_gpu_pick (n->gpus, n->ngpus, r->gpu, true, NULL) >= 0;
}

void
nodes_attach (node_t *n, trial_t *t)
{
    t->node = n;
    t->nprev = NULL;
    t->nnext = n->tasks;
    if (n->tasks)
        n->tasks->nprev = t;
    n->tasks = t;
    n->ntasks++;
    n->dirty = true;
}

int
nodes_grant (node_t *n, trial_t *t)
{
    const req_t *r = &t->job->req;
    int want = nodes_gpu_count (r);
    int ok = 0;
    // A re-grant after a reconnect keeps the GPUs it was given when they still exist.
    if (t->ngpus != want) {
        free (t->gpus);
        t->gpus = want ? cgq_xcalloc ((size_t) want, sizeof *t->gpus) : NULL;
        t->ngpus = 0;
    }
    if (want && t->ngpus == 0) {
        if (s_gpu_pick (n->gpus, n->ngpus, r->gpu, false, t->gpus) < 0) {
            ok = -1;
            for (int i = 0; i < want; i++)
                t->gpus[i] = -1;
        }
        t->ngpus = want;
    }
    double share = nodes_gpu_share (r);
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
    return ok;
}

void
nodes_release (coord_t *c, trial_t *t)
{
    node_t *n = t->node;
    if (!n)
        return;
    if (t->holds) {
        const req_t *r = &t->job->req;
        n->free_cpus += r->cpu;
        if (n->free_cpus > n->cpus)
            n->free_cpus = n->cpus;
        n->free_memory += r->memory;
        if (n->free_memory > n->memory)
            n->free_memory = n->memory;
        double share = nodes_gpu_share (r);
        for (int i = 0; i < t->ngpus; i++) {
            int g = t->gpus[i];
            if (g >= 0 && g < n->ngpus) {
                n->gpus[g].free += share;
                if (n->gpus[g].free > 1.0 - EPS)
                    n->gpus[g].free = 1.0;
            }
        }
        t->holds = false;
    }
    if (t->nprev)
        t->nprev->nnext = t->nnext;
    else
        n->tasks = t->nnext;
    if (t->nnext)
        t->nnext->nprev = t->nprev;
    t->nnext = t->nprev = NULL;
    n->ntasks--;
    t->node = NULL;
    n->dirty = true;
    c->sched_dirty = true;
}

void
nodes_gpus_from_indices (const node_t *n, trial_t *t)
{
    for (int k = 0; k < t->ngpus; k++) {
        int pos = -1;
        for (int g = 0; g < n->ngpus; g++)
            if (n->gpus[g].index == (uint32_t) t->gpus[k])
                pos = g;
        t->gpus[k] = pos;
    }
}

// s_finite_nonneg keeps a declared amount usable: NaN, infinite or negative
// offers count as nothing.
static double
s_finite_nonneg (double v)
{
    return isfinite (v) && v > 0 ? v : 0;
}

int
nodes_declare (coord_t *c, node_t *n, const char *hostname, uint32_t pid,
               const Cgq__Resources *res)
{
    free (n->hostname);
    n->hostname = cgq_xstrdup (hostname ? hostname : "");
    n->pid = pid;
    s_gpus_free (n);
    n->cpus = res ? s_finite_nonneg (res->cpus) : 0;
    n->memory = res ? res->memory : 0;
    if (res && res->n_gpus) {
        n->ngpus = (int) res->n_gpus;
        n->gpus = cgq_xcalloc (res->n_gpus, sizeof *n->gpus);
        for (size_t i = 0; i < res->n_gpus; i++) {
            n->gpus[i].index = res->gpus[i]->index;
            n->gpus[i].name = cgq_xstrdup (res->gpus[i]->name ? res->gpus[i]->name : "");
            n->gpus[i].free = 1.0;
        }
    }
    n->free_cpus = n->cpus;
    n->free_memory = n->memory;
    // Re-grant what it still runs (the GPU positions stay valid only while
    // the GPU list is unchanged; nodes_grant re-checks them).
    int over = 0;
    for (trial_t *t = n->tasks; t; t = t->nnext) {
        t->holds = false;
        if (nodes_grant (n, t) < 0)
            over++;
    }
    n->dirty = true;
    c->sched_dirty = true;
    return over;
}

void
nodes_write (coord_t *c, node_t *n, bool full)
{
    char key[300];
    cgq_key_node (key, sizeof key, n->id);
    cgq_hset_t h;
    cgq_hset_init (&h, key);
    cgq_buf_t names;
    cgq_buf_init (&names);
    if (full) {
        for (int i = 0; i < n->ngpus; i++)
            cgq_buf_printf (&names, "%s%u:%s", i ? "," : "", n->gpus[i].index,
                            n->gpus[i].name ? n->gpus[i].name : "");
        cgq_hset_str (&h, CGQ_NF_ID, n->id);
        cgq_hset_str (&h, CGQ_NF_KIND, "worker");
        cgq_hset_str (&h, CGQ_NF_STATE, CGQ_NODE_ALIVE);
        cgq_hset_str (&h, CGQ_NF_HOSTNAME, n->hostname ? n->hostname : "");
        cgq_hset_u64 (&h, CGQ_NF_PID, n->pid);
        cgq_hset_dbl (&h, CGQ_NF_CPUS, n->cpus);
        cgq_hset_u64 (&h, CGQ_NF_MEMORY, n->memory);
        cgq_hset_u64 (&h, CGQ_NF_GPUS, (uint64_t) n->ngpus);
        cgq_hset_str (&h, CGQ_NF_GPU_NAMES, names.data);
        cgq_hset_dbl (&h, CGQ_NF_CONNECTED, cgq_wall_s ());
    }
    double free_gpu = 0;
    for (int i = 0; i < n->ngpus; i++)
        free_gpu += n->gpus[i].free;
    cgq_hset_dbl (&h, CGQ_NF_FREE_CPUS, n->free_cpus);
    cgq_hset_dbl (&h, CGQ_NF_FREE_GPUS, free_gpu);
    cgq_hset_u64 (&h, CGQ_NF_RUNNING, n->ntasks);
    cgq_hset_dbl (&h, CGQ_NF_LAST_SEEN, cgq_wall_s ());
    cgq_hset_queue (&h, c->store);
    if (full)
        cgq_store_cmd (c->store, "SADD %s %s", CGQ_KEY_NODES, n->id);
    cgq_buf_fini (&names);
    n->dirty = false;
}

void
nodes_write_dirty (coord_t *c)
{
    for (node_t *n = c->nodes; n; n = n->next)
        if (n->dirty)
            nodes_write (c, n, false);
}

void
nodes_remove (coord_t *c, node_t *n, const char *state, const char *why)
{
    char key[300];
    cgq_key_node (key, sizeof key, n->id);
    cgq_hset_t h;
    cgq_hset_init (&h, key);
    cgq_hset_str (&h, CGQ_NF_STATE, state);
    cgq_hset_u64 (&h, CGQ_NF_RUNNING, 0);
    cgq_hset_queue (&h, c->store);
    cgq_model_event (c->store, strcmp (state, CGQ_NODE_DEAD) == 0 ? "node.dead" : "node.left", 0,
                     -1, n->id, 0, why);
    node_t **pp = &c->nodes;
    while (*pp != n)
        pp = &(*pp)->next;
    *pp = n->next;
    if (c->node_rr == n)
        c->node_rr = n->next;
    zhashx_delete (c->node_index, n->id);
    s_node_free (n);
    c->sched_dirty = true;
}

void
nodes_destroy_all (coord_t *c)
{
    while (c->nodes) {
        node_t *n = c->nodes;
        c->nodes = n->next;
        s_node_free (n);
    }
    if (c->node_index)
        zhashx_purge (c->node_index);
    c->node_rr = NULL;
}

void
nodes_capacity (const coord_t *c, nodes_capacity_t *cap)
{
    memset (cap, 0, sizeof *cap);
    for (const node_t *n = c->nodes; n; n = n->next) {
        cap->nodes++;
        if (n->cpus > cap->max_cpu)
            cap->max_cpu = n->cpus;
        if (n->ngpus > cap->max_gpu)
            cap->max_gpu = n->ngpus;
        if (n->memory > cap->max_memory)
            cap->max_memory = n->memory;
    }
}
