// scheduler: which node fits, and why none can. Cost per choice is O(nodes);
// nothing scans trials.
#include "scheduler.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "blocked.h"
#include "nodes.h"

// s_pick_node returns a node with room for r, trying nodes in rotation from
// c->node_rr, or NULL.
static node_t *
s_pick_node (coord_t *c, const req_t *r)
{
    if (!c->nodes)
        return NULL;
    node_t *start = c->node_rr ? c->node_rr : c->nodes;
    node_t *n = start;
    do {
        if (nodes_fits_free (n, r)) {
            c->node_rr = n->next ? n->next : c->nodes;
            return n;
        }
        n = n->next ? n->next : c->nodes;
    } while (n != start);
    return NULL;
}

// s_any_fits_total: a node that could ever run r. One whose disk is full
// (a heartbeat's `full`) does not count while it is: a job whose workers
// are all full is blocked with the reason, not silently waiting.
static bool
s_any_fits_total (const coord_t *c, const req_t *r)
{
    for (const node_t *n = c->nodes; n; n = n->next)
        if (!n->full && nodes_fits_total (n, r))
            return true;
    return false;
}

// s_full_reason: why r waits when every node that fits it is full, or NULL.
static char *
s_full_reason (const coord_t *c, const req_t *r)
{
    cgq_buf_t b;
    cgq_buf_init (&b);
    int nfull = 0;
    for (const node_t *n = c->nodes; n; n = n->next)
        if (n->full && nodes_fits_total (n, r) && nfull++ < 4)
            cgq_buf_printf (&b, "%s%s (%s)", nfull > 1 ? ", " : "", n->id, n->full);
    char *why = NULL;
    if (nfull)
        why = cgq_xasprintf ("%s %s%s: free space there, or give the worker a smaller "
                             "--min-free",
                             nfull == 1 ? "the one worker that fits takes no new task, its disk "
                                          "is full:"
                                        : "every worker that fits takes no new task, its disk is "
                                          "full:",
                             b.data, nfull > 4 ? " and more" : "");
    cgq_buf_fini (&b);
    return why;
}

scheduler_verdict_t
scheduler_choose_stage (coord_t *c, const job_t *j, node_t **node, uint32_t *stage)
{
    *node = NULL;
    *stage = 0;
    if (j->state != CGQ_JOB_RUNNING || j->paused) // cgq pause: nothing new starts
        return SCHEDULE_IDLE;
    // Later stages first: a trial that has started is finished before a new
    // one starts. Trials waiting for a later stage count against
    // concurrency like running ones (they are in flight), so they never wait
    // for it themselves.
    scheduler_verdict_t v = SCHEDULE_IDLE;
    for (uint32_t k = j->nstages; k-- > 0;) {
        if (k > 0 && !j->qhead[k])
            continue;
        if (k == 0) {
            if (j->spec->search.concurrency &&
                j->running + j->between >= j->spec->search.concurrency)
                continue;
            if (!j->qhead[0] && cgq_searcher_done (j->searcher))
                continue;
        }
        *node = s_pick_node (c, &j->req[k]);
        if (*node) {
            *stage = k;
            return SCHEDULE_GO;
        }
        // With no node connected at all nothing is known yet: wait, not
        // blocked. A client trial waits for its client to ask, however long.
        if (c->nodes && !j->req[k].client && !s_any_fits_total (c, &j->req[k])) {
            if (v != SCHEDULE_BLOCKED)
                *stage = k;
            v = SCHEDULE_BLOCKED;
        }
        else if (v == SCHEDULE_IDLE)
            v = SCHEDULE_WAIT;
    }
    return v;
}

scheduler_verdict_t
scheduler_choose (coord_t *c, const job_t *j, node_t **node)
{
    uint32_t stage;
    return scheduler_choose_stage (c, j, node, &stage);
}

char *
scheduler_blocked_reason (const coord_t *c, const req_t *r)
{
    if (r->on) {
        char *quarantined = blocked_devices_reason (c, r);
        if (quarantined)
            return quarantined;
        cgq_stage_t want = {.on = (json_t *) r->on};
        char on[256];
        cgq_buf_t b;
        cgq_buf_init (&b);
        cgq_buf_printf (&b, "needs device with %s; connected devices: ",
                        cgq_spec_stage_on (&want, on, sizeof on));
        nodes_devices_describe (c, &b, 8);
        char *why = cgq_xstrdup (b.data);
        cgq_buf_fini (&b);
        return why;
    }
    char *full = s_full_reason (c, r);
    if (full)
        return full;
    nodes_capacity_t cap;
    nodes_capacity (c, &cap);
    if (cap.nodes == 0)
        return cgq_xstrdup ("needs a worker, but only device runners are connected (they run "
                            "device trials only: benchmark and on:)");
    char cpu[32], gpu[32], mcpu[32];
    cgq_fmt_double (cpu, r->cpu);
    cgq_fmt_double (gpu, r->gpu);
    cgq_fmt_double (mcpu, cap.max_cpu);
    if (r->gpu > 0 && (cap.max_gpu == 0 || (r->gpu > 1 && cap.max_gpu < llround (r->gpu))))
        return cgq_xasprintf ("needs gpu %s but the %d connected node(s) have at most %d GPU(s)",
                              gpu, cap.nodes, cap.max_gpu);
    if (r->memory > cap.max_memory)
        return cgq_xasprintf ("needs memory %llu MiB but the %d connected node(s) offer at most "
                              "%llu MiB",
                              (unsigned long long) (r->memory >> 20), cap.nodes,
                              (unsigned long long) (cap.max_memory >> 20));
    return cgq_xasprintf ("needs cpu %s but the %d connected node(s) offer at most %s", cpu,
                          cap.nodes, mcpu);
}
