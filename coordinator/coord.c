// coord: the coordinator's event loop. One turn: poll both ROUTER sockets,
// apply every waiting message to memory (which queues Redis commands and
// outgoing messages), run due timers, schedule, flush the Redis batch as one
// MULTI/EXEC, and only then send what the batch made true. A crash can lose
// only work that nobody was told about.
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "coord.h"
#include "log.h"

extern volatile sig_atomic_t coord_stop;

// Messages handled per socket per turn: bounds the latency of one turn while
// still batching thousands of state changes into one Redis round trip.
#define TURN_BUDGET 4096

void
coord_send (coord_t *c, void *sock, const char *rid, size_t rid_len, bool delim, cgq_env_t *env)
{
    out_t *o = cgq_xcalloc (1, sizeof *o);
    if (cgq_wire_encode (env, &o->data, &o->len) < 0) {
        free (o);
        return;
    }
    o->sock = sock;
    o->rid = cgq_xstrndup (rid, rid_len);
    o->rid_len = rid_len;
    o->delim = delim;
    if (c->out_tail)
        c->out_tail->next = o;
    else
        c->out_head = o;
    c->out_tail = o;
}

static void
s_out_free (out_t *o)
{
    free (o->rid);
    free (o->data);
    free (o);
}

static void
s_outbox_send (coord_t *c)
{
    out_t *o = c->out_head;
    while (o) {
        out_t *next = o->next;
        int rc = zmq_send (o->sock, o->rid, o->rid_len, ZMQ_SNDMORE | ZMQ_DONTWAIT);
        if (rc >= 0 && o->delim)
            rc = zmq_send (o->sock, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT);
        if (rc >= 0)
            rc = zmq_send (o->sock, o->data, o->len, ZMQ_DONTWAIT);
        if (rc < 0)
            cgq_debug ("send to %s failed: %s", o->rid, zmq_strerror (errno));
        s_out_free (o);
        o = next;
    }
    c->out_head = c->out_tail = NULL;
}

// coord_send_now bypasses the outbox: for answers that depend on no state
// (heartbeats), so nodes stay calm while Redis is down.
static void
s_send_now (coord_t *c, const char *rid, size_t rid_len, cgq_env_t *env)
{
    if (cgq_wire_send_to (c->nodes_sock, rid, rid_len, 0, env) < 0)
        cgq_debug ("send to %.*s failed: %s", (int) rid_len, rid, zmq_strerror (errno));
}

void
coord_event (coord_t *c, const char *type, uint64_t job, int64_t trial, const char *node,
             uint32_t attempt, const char *detail)
{
    char trialbuf[32], attbuf[16];
    snprintf (trialbuf, sizeof trialbuf, "%" PRId64, trial);
    snprintf (attbuf, sizeof attbuf, "%u", attempt);
    const char *argv[20];
    size_t n = 0;
    char jobbuf[32];
    snprintf (jobbuf, sizeof jobbuf, "%" PRIu64, job);
    char maxlen[16];
    snprintf (maxlen, sizeof maxlen, "%d", CGQ_EVENTS_MAXLEN);
    argv[n++] = "XADD";
    argv[n++] = CGQ_KEY_EVENTS;
    argv[n++] = "MAXLEN";
    argv[n++] = "~";
    argv[n++] = maxlen;
    argv[n++] = "*";
    argv[n++] = "type";
    argv[n++] = type;
    if (job) {
        argv[n++] = "job";
        argv[n++] = jobbuf;
    }
    if (trial >= 0) {
        argv[n++] = "trial";
        argv[n++] = trialbuf;
    }
    if (node) {
        argv[n++] = "node";
        argv[n++] = node;
    }
    if (attempt) {
        argv[n++] = "attempt";
        argv[n++] = attbuf;
    }
    if (detail) {
        argv[n++] = "detail";
        argv[n++] = detail;
    }
    cgq_store_cmdargv (c->store, (int) n, argv, NULL);
}

// --- nodes --------------------------------------------------------------

node_t *
coord_node (coord_t *c, const char *id)
{
    for (node_t *n = c->nodes; n; n = n->next)
        if (strcmp (n->id, id) == 0)
            return n;
    return NULL;
}

void
coord_node_write (coord_t *c, node_t *n)
{
    char key[300], cpus[32], fcpus[32], fgpus[32], seen[32];
    cgq_key_node (key, sizeof key, n->id);
    double free_gpu = 0;
    for (int i = 0; i < n->ngpus; i++)
        free_gpu += n->gpus[i].free;
    cgq_fmt_double (cpus, n->cpus);
    cgq_fmt_double (fcpus, n->free_cpus);
    cgq_fmt_double (fgpus, free_gpu);
    cgq_fmt_double (seen, cgq_wall_s ());
    cgq_store_cmd (c->store, "HSET %s free_cpus %s free_gpus %s running %u last_seen %s", key,
                   fcpus, fgpus, n->ntasks, seen);
    n->dirty = false;
}

static void
s_node_write_full (coord_t *c, node_t *n)
{
    char key[300], cpus[32], now[32];
    cgq_key_node (key, sizeof key, n->id);
    cgq_buf_t names;
    cgq_buf_init (&names);
    for (int i = 0; i < n->ngpus; i++)
        cgq_buf_printf (&names, "%s%u:%s", i ? "," : "", n->gpus[i].index,
                        n->gpus[i].name ? n->gpus[i].name : "");
    cgq_fmt_double (cpus, n->cpus);
    cgq_fmt_double (now, cgq_wall_s ());
    cgq_store_cmd (c->store,
                   "HSET %s id %s kind worker state alive hostname %s pid %u cpus %s memory %llu "
                   "gpus %d gpu_names %s connected %s",
                   key, n->id, n->hostname ? n->hostname : "", n->pid, cpus,
                   (unsigned long long) n->memory, n->ngpus, names.data, now);
    cgq_store_cmd (c->store, "SADD %s %s", CGQ_KEY_NODES, n->id);
    cgq_buf_fini (&names);
    coord_node_write (c, n);
}

static void
s_node_free (node_t *n)
{
    for (int i = 0; i < n->ngpus; i++)
        free (n->gpus[i].name);
    free (n->gpus);
    free (n->hostname);
    free (n->id);
    free (n);
}

// s_node_remove declares n gone (dead or left): its tasks go back to pending.
static void
s_node_remove (coord_t *c, node_t *n, const char *state, const char *why)
{
    cgq_warn ("node %s is %s (%s); %u task(s) return to the queue", n->id, state, why, n->ntasks);
    while (n->tasks) {
        trial_t *t = n->tasks;
        coord_node_release (c, t);
        jobs_lost (c, t, why);
    }
    char key[300];
    cgq_key_node (key, sizeof key, n->id);
    cgq_store_cmd (c->store, "HSET %s state %s running 0", key, state);
    coord_event (c, strcmp (state, "dead") == 0 ? "node.dead" : "node.left", 0, -1, n->id, 0, why);
    node_t **pp = &c->nodes;
    while (*pp != n)
        pp = &(*pp)->next;
    *pp = n->next;
    if (c->node_rr == n)
        c->node_rr = n->next;
    s_node_free (n);
    c->sched_dirty = true;
}

void
coord_node_release (coord_t *c, trial_t *t)
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
        double share = r->gpu > 1 ? 1.0 : r->gpu;
        for (int i = 0; i < t->ngpus; i++) {
            int g = t->gpus[i];
            if (g >= 0 && g < n->ngpus) {
                n->gpus[g].free += share;
                if (n->gpus[g].free > 1.0 - 1e-9)
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
coord_node_attach (node_t *n, trial_t *t)
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

// s_readopt takes back a task that node n still runs although we gave it up
// as lost (the node was only silent, or its Hello crossed the Assign): while
// the trial waits in the queue with the same attempt, that task is still its
// current attempt. Stopping it instead would re-run the trial, and the
// stopped attempt's result would come back as the trial's failure.
static bool
s_readopt (coord_t *c, node_t *n, trial_t *t, const Cgq__TaskRef *r)
{
    if (!t || t->state != T_PENDING || !t->queued || !t->losses || t->node
        || t->attempt != r->attempt)
        return false;
    job_unqueue (t->job, t);
    coord_node_attach (n, t);
    // Its GPU grant is still the positions it had on this node (same worker,
    // same GPU list); sched_grant re-checks them.
    if (sched_grant (c, n, t) < 0)
        cgq_warn ("re-adopted task %" PRIu64 ".%" PRIu64 " exceeds node %s's free resources",
                  r->job, r->trial, n->id);
    const char *kv[] = {"node", n->id};
    trial_set_state_kv (c, t, T_RUNNING, kv, 2);
    cgq_info ("node %s still runs trial %" PRIu64 ".%" PRIu64 " attempt %u that was lost; "
              "adopted it back",
              n->id, r->job, r->trial, r->attempt);
    coord_event (c, "trial.adopted", r->job, (int64_t) r->trial, n->id, r->attempt, NULL);
    return true;
}

static void
s_welcome (coord_t *c, node_t *n)
{
    Cgq__Welcome w = CGQ__WELCOME__INIT;
    w.epoch = c->epoch;
    w.heartbeat_ms = (uint32_t) c->cfg.heartbeat_ms;
    w.max_frame = (uint32_t) c->cfg.max_frame;
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_WELCOME;
    env.welcome = &w;
    coord_send (c, c->nodes_sock, n->id, strlen (n->id), false, &env);
}

void
coord_stop_task (coord_t *c, const char *rid, const Cgq__TaskRef *task, const char *reason)
{
    Cgq__Stop s = CGQ__STOP__INIT;
    s.task = (Cgq__TaskRef *) task;
    s.reason = (char *) reason;
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_STOP;
    env.stop = &s;
    coord_send (c, c->nodes_sock, rid, strlen (rid), false, &env);
}

static void
s_ack (coord_t *c, const char *rid, const Cgq__TaskRef *task)
{
    Cgq__TaskRef *tasks[1] = {(Cgq__TaskRef *) task};
    Cgq__Ack a = CGQ__ACK__INIT;
    a.n_tasks = 1;
    a.tasks = tasks;
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_ACK;
    env.ack = &a;
    coord_send (c, c->nodes_sock, rid, strlen (rid), false, &env);
}

static void
s_result (coord_t *c, node_t *n, const char *rid, const Cgq__Result *r)
{
    bool ack = true;
    if (r->task)
        jobs_result (c, n, r, &ack);
    if (ack && r->task)
        s_ack (c, rid, r->task);
    c->stat_results++;
}

static void
s_hello (coord_t *c, const char *rid, const Cgq__Hello *h)
{
    node_t *n = coord_node (c, rid);
    bool fresh = !n;
    if (!n) {
        n = cgq_xcalloc (1, sizeof *n);
        n->id = cgq_xstrdup (rid);
        n->next = c->nodes;
        c->nodes = n;
    }
    // Results that finished while we were apart come first: they may end
    // tasks that the running list below no longer holds.
    for (size_t i = 0; i < h->n_unacked; i++)
        s_result (c, n, rid, h->unacked[i]);

    // Tasks we believed were running there but the node no longer has: lost.
    trial_t *t = n->tasks;
    while (t) {
        trial_t *next = t->nnext;
        bool still = false;
        for (size_t i = 0; i < h->n_running && !still; i++) {
            const Cgq__TaskRef *r = h->running[i];
            still = r->job == t->job->id && r->trial == t->id && r->attempt == t->attempt;
        }
        if (!still) {
            coord_node_release (c, t);
            jobs_lost (c, t, "node restarted without it");
        }
        t = next;
    }

    // (Re)declare resources; free capacity is recomputed from what it runs.
    free (n->hostname);
    n->hostname = cgq_xstrdup (h->hostname ? h->hostname : "");
    n->pid = h->pid;
    const Cgq__Resources *res = h->resources;
    for (int i = 0; i < n->ngpus; i++)
        free (n->gpus[i].name);
    free (n->gpus);
    n->gpus = NULL;
    n->ngpus = 0;
    n->cpus = res ? res->cpus : 0;
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
    // Re-grant what it still runs (the GPU grant positions stay valid only
    // while the GPU list is unchanged; re-check them).
    for (t = n->tasks; t; t = t->nnext) {
        t->holds = false;
        sched_grant (c, n, t);
    }

    // Adopt tasks of a previous coordinator life; stop the ones nobody wants.
    for (size_t i = 0; i < h->n_running; i++) {
        const Cgq__TaskRef *r = h->running[i];
        trial_t *tr = jobs_trial (c, r->job, r->trial);
        if (tr && tr->node == n && tr->attempt == r->attempt)
            continue; // already ours
        if (s_readopt (c, n, tr, r))
            continue;
        if (tr && tr->state == T_RUNNING && !tr->node && tr->attempt == r->attempt) {
            // adoption: it keeps running there, counted once
            coord_node_attach (n, tr);
            // Recovery kept the GPU indices it was given; map them to positions.
            for (int k = 0; k < tr->ngpus; k++) {
                int pos = -1;
                for (int g = 0; g < n->ngpus; g++)
                    if (n->gpus[g].index == (uint32_t) tr->gpus[k])
                        pos = g;
                tr->gpus[k] = pos;
            }
            if (sched_grant (c, n, tr) < 0)
                cgq_warn ("adopted task %" PRIu64 ".%" PRIu64 " exceeds node %s's free resources",
                          r->job, r->trial, n->id);
            free (tr->expect_node);
            tr->expect_node = NULL;
            tr->adopt_deadline_ms = 0;
            cgq_info ("adopted trial %" PRIu64 ".%" PRIu64 " attempt %u running on %s", r->job,
                      r->trial, r->attempt, n->id);
            coord_event (c, "trial.adopted", r->job, (int64_t) r->trial, n->id, r->attempt, NULL);
            continue;
        }
        char buf[80];
        cgq_info ("node %s runs task %s that is not ours; stopping it", rid,
                  cgq_wire_task_str (buf, r));
        coord_stop_task (c, rid, r, "unknown to the coordinator");
    }

    n->last_seen_ms = cgq_now_ms ();
    s_node_write_full (c, n);
    if (fresh)
        coord_event (c, "node.joined", 0, -1, n->id, 0, NULL);
    cgq_info ("node %s joined: cpus %g, %d GPU(s), memory %llu MiB, %u running", n->id, n->cpus,
              n->ngpus, (unsigned long long) (n->memory >> 20), n->ntasks);
    s_welcome (c, n);
    c->sched_dirty = true;
}

// s_reconcile stops tasks a node runs that are not ours: an attempt we have
// since given to another node, or a trial that has ended. Such a duplicate
// (say an Assign that crossed a reconnect) would hold resources we count as
// free; its result would be ignored anyway.
static void
s_reconcile (coord_t *c, node_t *n, const Cgq__Heartbeat *hb)
{
    for (size_t i = 0; i < hb->n_running; i++) {
        const Cgq__TaskRef *r = hb->running[i];
        trial_t *t = jobs_trial (c, r->job, r->trial);
        if (t && t->node == n && t->attempt == r->attempt) {
            // Cancelled but still running there: our Stop may have been lost
            // in a reconnect. Stop is idempotent on the worker; say it again.
            if (t->state == T_CANCELLED)
                coord_stop_task (c, n->id, r, "job cancelled");
            continue;
        }
        if (s_readopt (c, n, t, r))
            continue;
        char buf[80];
        cgq_info ("node %s runs task %s that is no longer its own; stopping it", n->id,
                  cgq_wire_task_str (buf, r));
        coord_stop_task (c, n->id, r, "superseded: the coordinator no longer owns this attempt");
    }
}

static void
s_node_message (coord_t *c, const char *rid, size_t rid_len, cgq_env_t *env)
{
    char id[256];
    if (rid_len >= sizeof id || memchr (rid, 0, rid_len)) {
        // Not a cgq-worker (it caps ids at 255 bytes): a truncated id could
        // never be answered, and could collide with another node's.
        cgq_wire_dropped++;
        cgq_warn ("dropped a %s from a node whose id is %zu bytes or holds a NUL (at most 255)",
                  cgq_wire_body_name (env), rid_len);
        return;
    }
    snprintf (id, sizeof id, "%.*s", (int) rid_len, rid);
    node_t *n = coord_node (c, id);
    if (n)
        n->last_seen_ms = cgq_now_ms ();
    switch (env->body_case) {
    case CGQ__ENVELOPE__BODY_HELLO:
        s_hello (c, id, env->hello);
        break;
    case CGQ__ENVELOPE__BODY_HEARTBEAT: {
        Cgq__Heartbeat hb = CGQ__HEARTBEAT__INIT;
        hb.epoch = c->epoch;
        hb.unknown = n == NULL;
        cgq_env_t out = CGQ__ENVELOPE__INIT;
        out.body_case = CGQ__ENVELOPE__BODY_HEARTBEAT;
        out.heartbeat = &hb;
        s_send_now (c, rid, rid_len, &out);
        if (n) {
            n->dirty = true;
            s_reconcile (c, n, env->heartbeat);
        }
        break;
    }
    case CGQ__ENVELOPE__BODY_RESULT:
        s_result (c, n, id, env->result);
        break;
    case CGQ__ENVELOPE__BODY_PROGRESS:
        if (n && env->progress->task)
            jobs_progress (c, n, env->progress);
        break;
    case CGQ__ENVELOPE__BODY_BYE:
        if (n)
            s_node_remove (c, n, "gone", env->bye->reason && *env->bye->reason ? env->bye->reason
                                                                                : "said bye");
        break;
    default:
        cgq_warn ("node %s sent an unexpected %s message; ignored", id, cgq_wire_body_name (env));
        cgq_wire_dropped++;
    }
}

void
coord_reply (coord_t *c, const char *rid, size_t rid_len, int code, const char *msg, bool now)
{
    Cgq__Reply r = CGQ__REPLY__INIT;
    r.code = code;
    r.message = (char *) msg;
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_REPLY;
    env.reply = &r;
    if (now)
        cgq_wire_send_to (c->ctl_sock, rid, rid_len, 1, &env);
    else
        coord_send (c, c->ctl_sock, rid, rid_len, true, &env);
}

static void
s_control_message (coord_t *c, const char *rid, size_t rid_len, cgq_env_t *env)
{
    switch (env->body_case) {
    case CGQ__ENVELOPE__BODY_SUBMIT_JOB:
        jobs_submit (c, rid, rid_len, env->submit_job);
        break;
    case CGQ__ENVELOPE__BODY_CANCEL_JOB:
        jobs_cancel (c, rid, rid_len, env->cancel_job->job);
        break;
    case CGQ__ENVELOPE__BODY_PING: {
        char msg[64];
        snprintf (msg, sizeof msg, "epoch %" PRIu64, c->epoch);
        coord_reply (c, rid, rid_len, 0, msg, false);
        break;
    }
    default:
        coord_reply (c, rid, rid_len, 2, "unexpected message on the control socket", false);
    }
}

// s_drain reads up to TURN_BUDGET messages from a ROUTER socket. A node frame
// is [rid][payload]; a REQ frame is [rid][empty][payload].
static int
s_drain (coord_t *c, void *sock, bool control)
{
    int handled = 0;
    while (handled < TURN_BUDGET) {
        zmq_msg_t parts[4];
        int nparts = 0;
        bool more = true;
        while (more) {
            zmq_msg_t m;
            zmq_msg_init (&m);
            if (zmq_msg_recv (&m, sock, ZMQ_DONTWAIT) < 0) {
                zmq_msg_close (&m);
                if (nparts == 0)
                    return handled;
                break; // cannot happen mid-message; be safe
            }
            more = zmq_msg_more (&m);
            if (nparts < 4)
                parts[nparts++] = m;
            else
                zmq_msg_close (&m);
        }
        handled++;
        int payload = control ? 2 : 1;
        if (nparts == payload + 1 && (!control || zmq_msg_size (&parts[1]) == 0)) {
            const char *rid = zmq_msg_data (&parts[0]);
            size_t rid_len = zmq_msg_size (&parts[0]);
            cgq_env_t *env = cgq_wire_decode (zmq_msg_data (&parts[payload]),
                                              zmq_msg_size (&parts[payload]), c->cfg.max_frame);
            if (env) {
                if (control)
                    s_control_message (c, rid, rid_len, env);
                else
                    s_node_message (c, rid, rid_len, env);
                cgq_wire_free (env);
            }
            else
                cgq_warn ("dropped an undecodable %zu-byte frame from %s peer (%" PRIu64
                          " dropped so far)",
                          zmq_msg_size (&parts[payload]), control ? "a control" : "a node",
                          cgq_wire_dropped);
        }
        else {
            cgq_wire_dropped++;
            cgq_warn ("dropped a malformed %d-part message on the %s socket", nparts,
                      control ? "control" : "node");
        }
        for (int i = 0; i < nparts; i++)
            zmq_msg_close (&parts[i]);
    }
    return handled;
}

static void
s_liveness (coord_t *c, int64_t now)
{
    int64_t limit = c->cfg.heartbeat_ms * c->cfg.dead_after;
    node_t *n = c->nodes;
    while (n) {
        node_t *next = n->next;
        if (now - n->last_seen_ms > limit) {
            char why[96];
            snprintf (why, sizeof why, "silent for %" PRId64 " ms", now - n->last_seen_ms);
            s_node_remove (c, n, "dead", why);
        }
        n = next;
    }
    jobs_adopt_check (c, now);
}

static void
s_stats (coord_t *c)
{
    cgq_store_cmd (c->store, "HSET %s dropped_frames %llu results %llu assigns %llu",
                   CGQ_KEY_COORDINATOR, (unsigned long long) cgq_wire_dropped,
                   (unsigned long long) c->stat_results, (unsigned long long) c->stat_assigns);
}

// s_flush persists the turn's batch; on success the outbox goes out.
static void
s_flush (coord_t *c, int64_t now)
{
    if (c->redis_retry_ms && now < c->redis_retry_ms)
        return;
    if (cgq_store_flush (c->store) < 0) {
        c->redis_backoff_ms = c->redis_backoff_ms ? c->redis_backoff_ms * 2 : 100;
        if (c->redis_backoff_ms > 2000)
            c->redis_backoff_ms = 2000;
        c->redis_retry_ms = now + c->redis_backoff_ms;
        cgq_warn ("%s; %zu command(s) kept, retrying in %" PRId64 " ms",
                  cgq_store_errstr (c->store), cgq_store_pending (c->store), c->redis_backoff_ms);
        return;
    }
    if (c->redis_retry_ms)
        cgq_info ("Redis is back; batch persisted");
    c->redis_retry_ms = 0;
    c->redis_backoff_ms = 0;
    s_outbox_send (c);
}

static int64_t
s_min_deadline (int64_t a, int64_t b)
{
    if (!a)
        return b;
    if (!b)
        return a;
    return a < b ? a : b;
}

int
coord_run (coord_t *c)
{
    zmq_pollitem_t items[2] = {{c->nodes_sock, 0, ZMQ_POLLIN, 0}, {c->ctl_sock, 0, ZMQ_POLLIN, 0}};
    c->next_liveness_ms = cgq_now_ms () + c->cfg.heartbeat_ms;
    c->next_stats_ms = cgq_now_ms () + 1000;
    c->sched_dirty = true;
    while (!coord_stop) {
        int64_t now = cgq_now_ms ();
        int64_t deadline = s_min_deadline (c->next_liveness_ms, c->next_stats_ms);
        deadline = s_min_deadline (deadline, c->redis_retry_ms);
        deadline = s_min_deadline (deadline, c->adopt_deadline_ms);
        long timeout = deadline > now ? (long) (deadline - now) : 0;
        if (c->sched_dirty || (c->out_head && !c->redis_retry_ms))
            timeout = 0;
        int rc = zmq_poll (items, 2, timeout);
        if (rc < 0) {
            if (errno == EINTR)
                continue;
            cgq_error ("zmq_poll: %s", zmq_strerror (errno));
            return -1;
        }
        if (items[0].revents & ZMQ_POLLIN)
            s_drain (c, c->nodes_sock, false);
        if (items[1].revents & ZMQ_POLLIN)
            s_drain (c, c->ctl_sock, true);
        now = cgq_now_ms ();
        if (now >= c->next_liveness_ms) {
            s_liveness (c, now);
            c->next_liveness_ms = now + c->cfg.heartbeat_ms;
        }
        if (now >= c->next_stats_ms) {
            s_stats (c);
            c->next_stats_ms = now + 1000;
        }
        for (node_t *n = c->nodes; n; n = n->next)
            if (n->dirty)
                coord_node_write (c, n);
        // While Redis is down, do not start new work whose record could not be kept.
        if (!c->redis_retry_ms)
            sched_run (c);
        jobs_write_dirty (c);
        s_flush (c, now);
    }
    // Last turn: persist what we have; the outbox may go (nodes tolerate it).
    if (cgq_store_pending (c->store))
        s_flush (c, cgq_now_ms ());
    return 0;
}

static void
s_outbox_free (coord_t *c)
{
    out_t *o = c->out_head;
    while (o) {
        out_t *next = o->next;
        s_out_free (o);
        o = next;
    }
    c->out_head = c->out_tail = NULL;
}

void
coord_fini (coord_t *c)
{
    jobs_destroy_all (c);
    while (c->nodes) {
        node_t *n = c->nodes;
        c->nodes = n->next;
        s_node_free (n);
    }
    s_outbox_free (c);
    cgq_store_destroy (&c->store);
}
