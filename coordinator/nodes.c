// nodes: the registry of connected nodes and the resource ledger.
#include "nodes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "log.h"

#define EPS 1e-9

// Failed results in a row that quarantine a device when the flag is unset.
#define S_QUARANTINE_AFTER 3

node_t *
nodes_find (coord_t *c, const char *id)
{
    return zhashx_lookup (c->node_index, id);
}

// s_device_dirty marks d for this turn's writes: nodes_write_dirty visits
// the devices marked, not every device of every lab on every turn.
static void
s_device_dirty (coord_t *c, device_t *d)
{
    d->dirty = true;
    if (d->listed || !c)
        return;
    d->listed = true;
    d->dirty_next = c->dirty_devices;
    c->dirty_devices = d;
}

void
nodes_dirty (node_t *n)
{
    n->dirty = true;
    if (n->listed || !n->coord)
        return;
    n->listed = true;
    n->dirty_next = n->coord->dirty_nodes;
    n->coord->dirty_nodes = n;
}

// s_unlist takes n off the dirty list (it is going away).
static void
s_unlist (coord_t *c, node_t *n)
{
    if (!n->listed)
        return;
    node_t **pp = &c->dirty_nodes;
    while (*pp && *pp != n)
        pp = &(*pp)->dirty_next;
    if (*pp)
        *pp = n->dirty_next;
    n->listed = false;
    n->dirty_next = NULL;
}

node_t *
nodes_add (coord_t *c, const char *id)
{
    node_t *n = cgq_xcalloc (1, sizeof *n);
    n->coord = c;
    n->id = cgq_xstrdup (id);
    n->id_hash = 1469598103934665603ULL; // FNV-1a
    for (const char *p = id; *p; p++)
        n->id_hash = (n->id_hash ^ (unsigned char) *p) * 1099511628211ULL;
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

// s_devices_drop takes n's devices offline (they stay in the registry).
static void
s_devices_drop (node_t *n)
{
    for (int i = 0; i < n->ndevices; i++) {
        n->devices[i]->node = NULL;
        s_device_dirty (n->coord, n->devices[i]);
    }
    free (n->devices);
    n->devices = NULL;
    n->ndevices = 0;
}

static void
s_node_free (node_t *n)
{
    s_devices_drop (n);
    s_gpus_free (n);
    free (n->hostname);
    free (n->full);
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

static bool
s_device_usable (const device_t *d, const req_t *r, bool free_now)
{
    if (d->quarantined || (free_now && d->task))
        return false;
    cgq_stage_t want = {.on = (json_t *) r->on};
    return cgq_spec_stage_matches (&want, d->tags);
}

// s_device_pick returns a device of n that runs r now (free_now) or ever.
static device_t *
s_device_pick (const node_t *n, const req_t *r, bool free_now)
{
    for (int i = 0; i < n->ndevices; i++)
        if (s_device_usable (n->devices[i], r, free_now))
            return n->devices[i];
    return NULL;
}

bool
nodes_fits_free (const node_t *n, const req_t *r)
{
    if (n->draining || n->full || n->stale || n->suspect)
        return false;
    if (n->client_job || r->client)
        return n->client_job && n->client_job == r->client && n->ntasks < n->want;
    if (n->runner || r->on)
        return n->runner && r->on && s_device_pick (n, r, true) != NULL;
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
    if (n->client_job || r->client)
        return n->client_job && n->client_job == r->client;
    if (n->runner || r->on)
        return n->runner && r->on && s_device_pick (n, r, false) != NULL;
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
    t->node_hash = n->id_hash;
    t->nprev = NULL;
    t->nnext = n->tasks;
    if (n->tasks)
        n->tasks->nprev = t;
    n->tasks = t;
    n->ntasks++;
    nodes_dirty (n);
}

// s_device_grant gives t a free matching device of n; a re-grant keeps the
// one it holds when n still serves it.
static int
s_device_grant (node_t *n, trial_t *t)
{
    const req_t *r = TRIAL_REQ (t);
    device_t *d = t->device;
    if (!d || d->node != n || (d->task && d->task != t)) {
        if (d && d->task == t)
            d->task = NULL;
        d = r->on ? s_device_pick (n, r, true) : NULL;
    }
    t->device = d;
    t->holds = true;
    nodes_dirty (n);
    if (!d)
        return -1;
    d->task = t;
    s_device_dirty (n->coord, d);
    return 0;
}

int
nodes_grant (node_t *n, trial_t *t)
{
    const req_t *r = TRIAL_REQ (t);
    if (n->runner || r->on)
        return s_device_grant (n, t);
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
    nodes_dirty (n);
    return ok;
}

void
nodes_release (coord_t *c, trial_t *t)
{
    node_t *n = t->node;
    if (!n)
        return;
    if (t->device) {
        if (t->device->task == t)
            t->device->task = NULL;
        s_device_dirty (c, t->device);
        t->device = NULL;
        t->holds = false;
    }
    if (t->holds && !n->runner) {
        const req_t *r = TRIAL_REQ (t);
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
    }
    t->holds = false;
    if (t->nprev)
        t->nprev->nnext = t->nnext;
    else
        n->tasks = t->nnext;
    if (t->nnext)
        t->nnext->nprev = t->nprev;
    t->nnext = t->nprev = NULL;
    n->ntasks--;
    t->node = NULL;
    nodes_dirty (n);
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

// s_tags_json turns a Device's tags into a JSON object of strings.
static json_t *
s_tags_json (const Cgq__Device *dv)
{
    json_t *o = json_object ();
    for (size_t k = 0; k < dv->n_tags; k++)
        if (dv->tags[k]->key && *dv->tags[k]->key)
            json_object_set_new (o, dv->tags[k]->key,
                                 json_string (dv->tags[k]->value ? dv->tags[k]->value : ""));
    return o;
}

// s_devices_declare replaces n's device list with the devices of res.
static void
s_devices_declare (coord_t *c, node_t *n, const Cgq__Resources *res)
{
    s_devices_drop (n);
    size_t want = res ? res->n_devices : 0;
    if (!want)
        return;
    n->devices = cgq_xcalloc (want, sizeof *n->devices);
    for (size_t i = 0; i < want; i++) {
        const Cgq__Device *dv = res->devices[i];
        if (!dv->id || !*dv->id || strlen (dv->id) > 200) {
            cgq_warn ("node %s declares a device with an empty or over-long id; left out", n->id);
            continue;
        }
        device_t *d = nodes_device_find (c, dv->id);
        if (!d) {
            d = nodes_device_ref (c, dv->id);
            d->loaded = true; // new: Redis has nothing for it
        }
        bool twice = false;
        for (int k = 0; k < n->ndevices; k++)
            twice |= n->devices[k] == d;
        if (twice || (d->node && d->node != n)) {
            cgq_warn ("node %s declares device %s, which %s already serves; left out (give "
                      "each device one runner and a unique id)",
                      n->id, d->id, twice ? "it" : d->node->id);
            continue;
        }
        json_decref (d->tags);
        d->tags = s_tags_json (dv);
        d->node = n;
        s_device_dirty (c, d);
        n->devices[n->ndevices++] = d;
    }
}

int
nodes_declare (coord_t *c, node_t *n, const char *hostname, uint32_t pid, Cgq__NodeKind kind,
               const Cgq__Resources *res)
{
    free (n->hostname);
    n->hostname = cgq_xstrdup (hostname ? hostname : "");
    n->pid = pid;
    n->runner = kind == CGQ__NODE_KIND__NODE_DEVICE_RUNNER;
    s_devices_declare (c, n, n->runner ? res : NULL);
    s_gpus_free (n);
    // A runner offers its devices only: no slots for command trials. A
    // client offers its asks only (nodes_client).
    bool slots = !n->runner && kind != CGQ__NODE_KIND__NODE_CLIENT;
    if (slots)
        n->client_job = 0;
    n->cpus = res && slots ? s_finite_nonneg (res->cpus) : 0;
    n->memory = res && slots ? res->memory : 0;
    if (res && res->n_gpus && slots) {
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
    nodes_dirty (n);
    c->sched_dirty = true;
    return over;
}

void
nodes_client (coord_t *c, node_t *n, uint64_t job, uint32_t want)
{
    if (want > NODES_MAX_TASKS)
        want = NODES_MAX_TASKS;
    if (job != n->client_job)
        nodes_dirty (n);
    if (job != n->client_job || want > n->want)
        c->sched_dirty = true;
    n->client_job = job;
    n->want = job ? want : 0;
}

void
nodes_write (coord_t *c, node_t *n, bool full)
{
    char key[300];
    cgq_key_node (key, sizeof key, n->id);
    cgq_hset_t h;
    cgq_hset_init (&h, key);
    cgq_buf_t names, devs;
    cgq_buf_init (&names);
    cgq_buf_init (&devs);
    if (full) {
        for (int i = 0; i < n->ngpus; i++)
            cgq_buf_printf (&names, "%s%u:%s", i ? "," : "", n->gpus[i].index,
                            n->gpus[i].name ? n->gpus[i].name : "");
        cgq_hset_str (&h, CGQ_NF_ID, n->id);
        for (int i = 0; i < n->ndevices; i++)
            cgq_buf_printf (&devs, "%s%s", i ? "," : "", n->devices[i]->id);
        cgq_hset_str (&h, CGQ_NF_KIND,
                      n->runner       ? CGQ_NODE_KIND_RUNNER
                      : n->client_job ? CGQ_NODE_KIND_CLIENT
                                      : CGQ_NODE_KIND_WORKER);
        cgq_hset_str (&h, CGQ_NF_DEVICES, devs.data);
        cgq_hset_str (&h, CGQ_NF_STATE, CGQ_NODE_ALIVE);
        cgq_hset_str (&h, CGQ_NF_HOSTNAME, n->hostname ? n->hostname : "");
        cgq_hset_str (&h, CGQ_NF_FULL, n->full ? n->full : "");
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
    // When it was last heard from (not when this was written: that is
    // coarse, see session_liveness).
    int64_t now_ms = cgq_now_ms ();
    int64_t wall_us = llround (cgq_wall_s () * 1e6);
    if (n->last_seen_ms > 0 && n->last_seen_ms <= now_ms)
        wall_us -= (now_ms - n->last_seen_ms) * 1000;
    cgq_hset_dbl (&h, CGQ_NF_LAST_SEEN, (double) wall_us / 1e6);
    cgq_hset_queue (&h, c->store);
    if (full)
        cgq_store_cmd (c->store, "SADD %s %s", CGQ_KEY_NODES, n->id);
    cgq_buf_fini (&names);
    cgq_buf_fini (&devs);
    n->dirty = false;
    n->seen_written_ms = now_ms;
}

static void
s_device_write (coord_t *c, device_t *d)
{
    char key[300];
    cgq_key_device (key, sizeof key, d->id);
    char task[96] = "";
    if (d->task)
        snprintf (task, sizeof task, "%llu.%llu#%u", (unsigned long long) d->task->job->id,
                  (unsigned long long) d->task->id, d->task->attempt);
    char *tags = d->tags ? json_dumps (d->tags, JSON_COMPACT) : NULL;
    cgq_hset_t h;
    cgq_hset_init (&h, key);
    cgq_hset_str (&h, CGQ_DF_ID, d->id);
    cgq_hset_str (&h, CGQ_DF_NODE, d->node ? d->node->id : "");
    cgq_hset_str (&h, CGQ_DF_TAGS, tags ? tags : "{}");
    cgq_hset_str (&h, CGQ_DF_STATE, nodes_device_state (d));
    cgq_hset_str (&h, CGQ_DF_TASK, task);
    cgq_hset_u64 (&h, CGQ_DF_FAILURES, d->failures);
    cgq_hset_str (&h, CGQ_DF_QUARANTINED, d->quarantined ? "1" : "0");
    cgq_hset_str (&h, CGQ_DF_LAST_ERROR, d->last_error ? d->last_error : "");
    cgq_hset_dbl (&h, CGQ_DF_UPDATED, cgq_wall_s ());
    cgq_hset_queue (&h, c->store);
    cgq_store_cmd (c->store, "SADD %s %s", CGQ_KEY_DEVICES, d->id);
    free (tags);
    d->dirty = false;
}

void
nodes_write_dirty (coord_t *c)
{
    node_t *n = c->dirty_nodes;
    c->dirty_nodes = NULL;
    while (n) {
        node_t *next = n->dirty_next;
        n->listed = false;
        n->dirty_next = NULL;
        if (n->dirty)
            nodes_write (c, n, false);
        n = next;
    }
    device_t *d = c->dirty_devices;
    c->dirty_devices = NULL;
    while (d) {
        device_t *next = d->dirty_next;
        d->listed = false;
        d->dirty_next = NULL;
        if (d->dirty)
            s_device_write (c, d);
        d = next;
    }
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
    cgq_keyspace_event (c->store, strcmp (state, CGQ_NODE_DEAD) == 0 ? "node.dead" : "node.left", 0,
                     -1, n->id, 0, why);
    node_t **pp = &c->nodes;
    while (*pp != n)
        pp = &(*pp)->next;
    *pp = n->next;
    if (c->node_rr == n)
        c->node_rr = n->next;
    zhashx_delete (c->node_index, n->id);
    s_unlist (c, n);
    for (int i = 0; i < n->ndevices; i++) {
        n->devices[i]->node = NULL;
        s_device_write (c, n->devices[i]);
    }
    s_node_free (n);
    c->sched_dirty = true;
}

static void
s_device_free (device_t *d)
{
    json_decref (d->tags);
    free (d->last_error);
    free (d->id);
    free (d);
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
    c->dirty_nodes = NULL;
    c->dirty_devices = NULL;
    if (c->devices) {
        for (device_t *d = zhashx_first (c->devices); d; d = zhashx_next (c->devices))
            s_device_free (d);
        zhashx_destroy (&c->devices);
    }
}

void
nodes_capacity (const coord_t *c, nodes_capacity_t *cap)
{
    memset (cap, 0, sizeof *cap);
    for (const node_t *n = c->nodes; n; n = n->next) {
        if (n->runner || n->client_job)
            continue;
        cap->nodes++;
        if (n->cpus > cap->max_cpu)
            cap->max_cpu = n->cpus;
        if (n->ngpus > cap->max_gpu)
            cap->max_gpu = n->ngpus;
        if (n->memory > cap->max_memory)
            cap->max_memory = n->memory;
    }
}

// --- devices -----------------------------------------------------------------

device_t *
nodes_device_ref (coord_t *c, const char *id)
{
    if (!c->devices)
        c->devices = zhashx_new ();
    device_t *d = zhashx_lookup (c->devices, id);
    if (!d) {
        d = cgq_xcalloc (1, sizeof *d);
        d->id = cgq_xstrdup (id);
        d->tags = json_object ();
        zhashx_insert (c->devices, d->id, d);
    }
    return d;
}

device_t *
nodes_device_find (coord_t *c, const char *id)
{
    device_t *d = c->devices ? zhashx_lookup (c->devices, id) : NULL;
    if ((d && d->loaded) || !c->store)
        return d;
    // Not seen since start-up: Redis may remember its quarantine. One round
    // trip, once per device and coordinator life.
    char key[300];
    cgq_key_device (key, sizeof key, id);
    redisReply *r = cgq_store_command (c->store, "HGETALL %s", key);
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements == 0) {
        if (!r)
            cgq_warn ("cannot read %s: %s; its quarantine, if any, is not known", key,
                      cgq_store_errstr (c->store));
        else if (d)
            d->loaded = true; // a new device: nothing to read back
        if (r)
            freeReplyObject (r);
        return d;
    }
    cgq_device_rec_t *rec = cgq_device_rec_from (id, r);
    freeReplyObject (r);
    d = nodes_device_ref (c, id);
    json_t *tags = json_loads (rec->tags, 0, NULL);
    if (json_is_object (tags)) {
        json_decref (d->tags);
        d->tags = tags;
    }
    else
        json_decref (tags);
    d->failures = rec->failures > UINT32_MAX ? UINT32_MAX : (uint32_t) rec->failures;
    d->quarantined = rec->quarantined;
    free (d->last_error);
    d->last_error = *rec->last_error ? cgq_xstrdup (rec->last_error) : NULL;
    d->loaded = true;
    cgq_device_rec_destroy (&rec);
    return d;
}

const char *
nodes_device_state (const device_t *d)
{
    if (d->quarantined)
        return CGQ_DEVICE_QUARANTINED;
    if (!d->node)
        return CGQ_DEVICE_OFFLINE;
    return d->task ? CGQ_DEVICE_BUSY : CGQ_DEVICE_IDLE;
}

// s_refund: the attempt of t whose failure has just quarantined device d is
// not charged to t's retries (docs/devices.md, "Quarantine"): its stage_base
// moves past it, in memory and in Redis, so that jobs_failed, which comes
// next, queues t again to wait for a device rather than failing it for the
// device's fault. Earlier failures of the streak were charged as they came
// (nothing could tell them from the trial's own yet).
static void
s_refund (coord_t *c, trial_t *t, const device_t *d)
{
    if (t->attempt <= t->stage_base)
        return;
    t->stage_base++;
    char key[128], base[16];
    snprintf (base, sizeof base, "%u", t->stage_base);
    cgq_store_cmd (c->store, "HSET %s %s %s", cgq_key_trial (key, sizeof key, t->job->id, t->id),
                   CGQ_TF_STAGE_BASE, base);
    cgq_tinfo (t->job->id, t->id, t->attempt,
               "attempt not charged to the trial's retries: it quarantined device %s", d->id);
}

void
nodes_device_result (coord_t *c, trial_t *t, Cgq__TaskStatus status, const char *error)
{
    device_t *d = t->device;
    if (!d)
        return;
    if (status == CGQ__TASK_STATUS__TASK_SUCCEEDED) {
        d->failures = 0;
        s_device_dirty (c, d);
        return;
    }
    if (status != CGQ__TASK_STATUS__TASK_FAILED && status != CGQ__TASK_STATUS__TASK_TIMEOUT)
        return;
    d->failures++;
    free (d->last_error);
    d->last_error = cgq_xasprintf ("%s: %s", status == CGQ__TASK_STATUS__TASK_TIMEOUT ? "timeout" : "failed",
                                   error && *error ? error : "no message");
    s_device_dirty (c, d);
    int64_t limit = c->cfg.quarantine_after > 0 ? c->cfg.quarantine_after : S_QUARANTINE_AFTER;
    if (!d->quarantined && d->failures >= (uint64_t) limit) {
        d->quarantined = true;
        char why[600];
        snprintf (why, sizeof why, "%u failed measurements in a row (last: %.500s)", d->failures,
                  d->last_error);
        cgq_warn ("device %s quarantined: %s; no trial goes there until cgq devices enable %s",
                  d->id, why, d->id);
        cgq_keyspace_event (c->store, "device.quarantined", 0, -1, d->node ? d->node->id : NULL, 0,
                         why);
        c->sched_dirty = true;
        s_refund (c, t, d);
    }
}

int
nodes_device_enable (coord_t *c, const char *id, char *msg, size_t msglen)
{
    device_t *d = nodes_device_find (c, id);
    if (!d) {
        snprintf (msg, msglen, "unknown device '%s' (cgq devices lists them)", id);
        return -1;
    }
    bool was = d->quarantined;
    d->quarantined = false;
    d->failures = 0;
    s_device_dirty (c, d);
    c->sched_dirty = true;
    if (was)
        cgq_keyspace_event (c->store, "device.enabled", 0, -1, d->node ? d->node->id : NULL, 0, d->id);
    snprintf (msg, msglen, was ? "device %s is back in service" : "device %s was not quarantined",
              d->id);
    return 0;
}

void
nodes_device_recovered (coord_t *c, const node_t *n, const char *id)
{
    device_t *d = nodes_device_find (c, id);
    if (!d || d->node != n || !d->quarantined)
        return; // another node's device, or back already: a late or hostile word
    char msg[300];
    nodes_device_enable (c, d->id, msg, sizeof msg);
    cgq_info ("device %s passed its check again on %s: %s", d->id, n->id, msg);
}

void
nodes_devices_describe (const coord_t *c, cgq_buf_t *b, int max)
{
    int shown = 0, more = 0;
    for (const node_t *n = c->nodes; n; n = n->next)
        for (int i = 0; i < n->ndevices; i++) {
            const device_t *d = n->devices[i];
            if (shown >= max) {
                more++;
                continue;
            }
            cgq_buf_printf (b, "%s%s (", shown ? ", " : "", d->id);
            const char *k;
            json_t *v;
            int nt = 0;
            json_object_foreach (d->tags, k, v)
            {
                cgq_buf_printf (b, "%s%s=%s", nt++ ? ", " : "", k, json_string_value (v));
            }
            if (d->quarantined)
                cgq_buf_printf (b, "%squarantined", nt ? ", " : "");
            else if (!nt)
                cgq_buf_puts (b, "no tags");
            cgq_buf_puts (b, ")");
            shown++;
        }
    if (more)
        cgq_buf_printf (b, " and %d more", more);
    if (!shown)
        cgq_buf_puts (b, "none");
}
