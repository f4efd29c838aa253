// session: node messages and liveness.
#include "session.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "auth.h"
#include "dispatch.h"
#include "jobs.h"
#include "log.h"
#include "nodes.h"
#include "outbox.h"

// s_node_lost hands every task of n back to its job, then removes n.
static void
s_node_lost (coord_t *c, node_t *n, const char *state, const char *why)
{
    cgq_warn ("node %s is %s (%s); %u task(s) return to the queue", n->id, state, why, n->ntasks);
    while (n->tasks) {
        trial_t *t = n->tasks;
        nodes_release (c, t);
        jobs_lost (c, t, why);
    }
    zhashx_update (c->returning, n->id, (void *) (intptr_t) (cgq_now_ms () + RETURNING_MS (c)));
    nodes_remove (c, n, state, why);
}

// s_returning says whether id is a node expected back (c->returning), and
// forgets the expired ones now and then, so the set stays as small as the
// nodes that come and go within a few minutes.
static bool
s_returning (coord_t *c, const char *id)
{
    int64_t now = cgq_now_ms ();
    if (now >= c->returning_prune_ms) {
        c->returning_prune_ms = now + 10000;
        zlistx_t *keys = zhashx_keys (c->returning);
        for (const char *k = zlistx_first (keys); k; k = zlistx_next (keys))
            if ((int64_t) (intptr_t) zhashx_lookup (c->returning, k) <= now)
                zhashx_delete (c->returning, k);
        zlistx_destroy (&keys);
    }
    void *until = zhashx_lookup (c->returning, id);
    return until && (int64_t) (intptr_t) until > now;
}

// s_node_stale marks n's running tasks stale: it has been silent for
// --stale-after heartbeats, so they may or may not run still. No new task
// goes to it (nodes_fits_free) until it is heard from again.
static void
s_node_stale (coord_t *c, node_t *n, int64_t silent_ms)
{
    char why[96];
    snprintf (why, sizeof why, "node %s silent for %" PRId64 " ms", n->id, silent_ms);
    cgq_warn ("%s; its %u task(s) are stale until it is heard from or %" PRId64 " ms of silence",
              why, n->ntasks, c->cfg.heartbeat_ms * c->cfg.dead_after);
    n->stale = true;
    for (trial_t *t = n->tasks; t; t = t->nnext)
        jobs_set_stale (c, t, true, why);
}

// s_node_fresh: a stale node was heard from: its tasks run again.
static void
s_node_fresh (coord_t *c, node_t *n, int64_t silent_ms)
{
    char why[96];
    snprintf (why, sizeof why, "node %s heard from after %" PRId64 " ms", n->id, silent_ms);
    cgq_info ("%s; its %u task(s) are running again", why, n->ntasks);
    n->stale = false;
    for (trial_t *t = n->tasks; t; t = t->nnext)
        jobs_set_stale (c, t, false, why);
    c->sched_dirty = true;
}

static void
s_welcome (coord_t *c, node_t *n)
{
    Cgq__Welcome w = CGQ__WELCOME__INIT;
    w.epoch = c->epoch;
    w.heartbeat_ms = (uint32_t) c->cfg.heartbeat_ms;
    w.max_frame = (uint32_t) c->cfg.max_frame;
    w.batches = true;
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_WELCOME;
    env.welcome = &w;
    outbox_push (c, c->nodes_sock, n->id, strlen (n->id), false, &env);
}

// s_rejected counts a node message that may not change anything and logs
// it, at most S_REJECT_LOG_PER_S lines a second (a flood must not flood the log).
#define S_REJECT_LOG_PER_S 10
static void
s_rejected (coord_t *c, const char *id, const char *what, const Cgq__TaskRef *ref,
            const char *why)
{
    c->stat_rejected++;
    int64_t now = cgq_now_ms () / 1000;
    if (now != c->reject_log_s) {
        c->reject_log_s = now;
        c->reject_log_n = 0;
    }
    if (c->reject_log_n++ >= S_REJECT_LOG_PER_S)
        return;
    char buf[80];
    cgq_twarn (ref ? ref->job : 0, ref ? ref->trial : 0, ref ? ref->attempt : 0,
               "rejected a %s for task %s from '%s': %s (%" PRIu64 " rejected so far)", what,
               cgq_wire_task_str (buf, ref), id, why, c->stat_rejected);
}

// s_owns says whether node n (NULL: the sender never said Hello) may report
// on task ref: only the node that runs that attempt may. A stale attempt or
// an unknown trial passes (jobs_result acks it and changes nothing); the rest
// is counted, logged and ignored, and not acked: it is not the sender's to
// forget.
static bool
s_owns (coord_t *c, node_t *n, const char *id, const Cgq__TaskRef *ref, const char *what)
{
    const char *why = NULL;
    if (!n && s_returning (c, id)) {
        char buf[80];
        cgq_tdebug (ref->job, ref->trial, ref->attempt,
                    "dropped a %s for task %s from '%s' before its Hello (it reconnects; it "
                    "sends its results again after its Hello)",
                    what, cgq_wire_task_str (buf, ref), id);
        return false;
    }
    if (!n)
        why = "the sender never said Hello";
    else {
        trial_t *t = jobs_trial (c, ref->job, ref->trial);
        if (t && t->attempt == ref->attempt) {
            if (t->node && t->node != n)
                why = "another node runs that attempt";
            else if (!t->node && t->expect_node && strcmp (t->expect_node, n->id) != 0)
                why = "another node ran that attempt";
        }
    }
    if (!why)
        return true;
    s_rejected (c, id, what, ref, why);
    return false;
}

// s_report_allowed applies --max-report and --max-report-rate to a Progress
// report of a trial that n runs. A token bucket per trial: up to one second's
// worth at once, then max_report_rate a second. Dropped reports are counted
// (reports_dropped) and the first of each trial is logged.
static bool
s_report_allowed (coord_t *c, const char *id, const Cgq__Progress *p)
{
    trial_t *t = jobs_trial (c, p->task->job, p->task->trial);
    if (!t || t->attempt != p->task->attempt || !p->report_json)
        return true; // jobs_progress ignores it
    size_t len = strlen (p->report_json);
    double rate = c->cfg.max_report_rate > 0 ? c->cfg.max_report_rate : 20;
    double burst = rate > 1 ? rate : 1;
    int64_t now = cgq_now_ms ();
    if (!t->report_ms)
        t->report_tokens = burst;
    else
        t->report_tokens += (double) (now - t->report_ms) * rate / 1000.0;
    if (t->report_tokens > burst)
        t->report_tokens = burst;
    t->report_ms = now;
    char why[160] = "";
    if (c->cfg.max_report && len > c->cfg.max_report)
        snprintf (why, sizeof why, "the report is %zu bytes, over --max-report %llu", len,
                  (unsigned long long) c->cfg.max_report);
    else if (t->report_tokens < 1)
        snprintf (why, sizeof why, "more than %g reports a second (--max-report-rate)", rate);
    else {
        t->report_tokens -= 1;
        return true;
    }
    c->stat_reports_dropped++;
    if (!t->report_warned) {
        t->report_warned = true;
        cgq_twarn (t->job->id, t->id, p->task->attempt,
                   "report not stored: %s (from node '%s'; further drops of this trial are "
                   "only counted, in reports_dropped)",
                   why, id);
    }
    return false;
}

// s_result applies a Result and acks it after the flush: stale or not, the
// node may forget it once this batch is persisted.
// session_buffer_full says whether Redis is down and the batch waiting for it has
// reached --max-buffer commands: then results stay with their nodes (which
// keep them until acked, and send them again), reports are dropped, and no
// trial is dispatched, so memory stays bounded however long the outage.
bool
session_buffer_full (coord_t *c)
{
    if (!c->redis_retry_ms || (int64_t) cgq_store_pending (c->store) < c->cfg.max_buffer)
        return false;
    if (!c->buffer_full) {
        cgq_warn ("Redis is down and %zu state changes wait for it (--max-buffer %" PRId64
                  "): results stay with their nodes until it is back",
                  cgq_store_pending (c->store), c->cfg.max_buffer);
        c->buffer_full = true;
    }
    return true;
}

static void
s_result (coord_t *c, const char *rid, const Cgq__Result *r)
{
    c->stat_results++;
    if (!r->task)
        return;
    if (!s_owns (c, nodes_find (c, rid), rid, r->task, "Result"))
        return;
    if (session_buffer_full (c)) {
        // Not acked: the node keeps it. Meanwhile its absence from the
        // node's running list does not mean it was lost.
        trial_t *t = jobs_trial (c, r->task->job, r->task->trial);
        if (t && t->attempt == r->task->attempt)
            t->deferred = true;
        c->stat_deferred++;
        return;
    }
    node_t *from = nodes_find (c, rid);
    c->result_from = from ? from->id : NULL; // a late success kept ran there
    jobs_result (c, r);
    c->result_from = NULL;
    outbox_ack (c, rid, r->task);
}

static bool
s_lists (const Cgq__TaskRef *const *refs, size_t n, const trial_t *t)
{
    for (size_t i = 0; i < n; i++)
        if (refs[i]->job == t->job->id && refs[i]->trial == t->id
            && refs[i]->attempt == t->attempt)
            return true;
    return false;
}

// s_bye tells the sender of a refused Hello why, in a Bye: the node logs it.
static void
s_bye (coord_t *c, const char *rid, const char *reason)
{
    if (!c->nodes_sock)
        return;
    Cgq__Bye bye = CGQ__BYE__INIT;
    bye.reason = (char *) reason;
    cgq_env_t out = CGQ__ENVELOPE__INIT;
    out.body_case = CGQ__ENVELOPE__BODY_BYE;
    out.bye = &bye;
    cgq_wire_send_to (c->nodes_sock, rid, strlen (rid), 0, &out);
}

// s_offer_ok refuses a Hello whose offer no machine has (--max-node-cpus,
// --max-node-gpus): such a node would take Assigns by the hundred and lose
// them. NaN, infinite and negative amounts count as nothing (nodes.c).
static bool
s_offer_ok (coord_t *c, const char *rid, const Cgq__Hello *h)
{
    const Cgq__Resources *res = h->resources;
    if (!res || h->kind == CGQ__NODE_KIND__NODE_DEVICE_RUNNER)
        return true;
    char why[256];
    if (isfinite (res->cpus) && c->cfg.max_node_cpus > 0 && res->cpus > c->cfg.max_node_cpus)
        snprintf (why, sizeof why,
                  "it offers %g CPU slots, more than --max-node-cpus %g of the coordinator",
                  res->cpus, c->cfg.max_node_cpus);
    else if (c->cfg.max_node_gpus > 0 && res->n_gpus > (size_t) c->cfg.max_node_gpus)
        snprintf (why, sizeof why,
                  "it offers %zu GPUs, more than --max-node-gpus %lld of the coordinator",
                  res->n_gpus, (long long) c->cfg.max_node_gpus);
    else
        return true;
    c->stat_rejected++;
    int64_t now = cgq_now_ms () / 1000;
    if (now != c->reject_log_s) {
        c->reject_log_s = now;
        c->reject_log_n = 0;
    }
    if (c->reject_log_n++ < S_REJECT_LOG_PER_S)
        cgq_warn ("refused the Hello of node '%s': %s (%" PRIu64 " rejected so far)", rid, why,
                  c->stat_rejected);
    char reason[320];
    snprintf (reason, sizeof reason, "refused this node: %s", why);
    s_bye (c, rid, reason);
    return false;
}

// s_client_ok refuses a client's Hello (a Python study) for a job that is
// not running here or whose trials are not kind: client: it could never be
// given anything. The Bye says which, and the client raises it.
static bool
s_client_ok (coord_t *c, const char *rid, const Cgq__Hello *h)
{
    if (h->kind != CGQ__NODE_KIND__NODE_CLIENT)
        return true;
    const job_t *j = jobs_find (c, h->job);
    char reason[256];
    if (!j || j->state != CGQ_JOB_RUNNING)
        snprintf (reason, sizeof reason,
                  "refused this client: job %" PRIu64 " is not running (it ended, or there is no "
                  "such job)",
                  h->job);
    else if (!j->req[0].client)
        snprintf (reason, sizeof reason,
                  "refused this client: job %" PRIu64 " runs its trials on workers, not in a "
                  "client (its spec needs trial: {kind: client})",
                  h->job);
    else
        return true;
    cgq_info ("%s (node '%s')", reason, rid);
    s_bye (c, rid, reason);
    return false;
}

// s_node_full applies a Hello's or a heartbeat's `full` (a worker's disk):
// while set, no new task goes to the node (nodes_fits_free); the reason is
// in its hash for cgq nodes, and logged when it comes and goes.
static void
s_node_full (coord_t *c, node_t *n, const char *full)
{
    if (full && !*full)
        full = NULL;
    if (full ? n->full && !strcmp (n->full, full) : !n->full)
        return;
    if (full)
        cgq_warn ("node %s takes no new task for now: %s", n->id, full);
    else
        cgq_info ("node %s takes tasks again (its disk has room)", n->id);
    free (n->full);
    n->full = full ? cgq_xstrdup (full) : NULL;
    if (!full)
        c->sched_dirty = true;
    char key[300];
    cgq_key_node (key, sizeof key, n->id);
    cgq_hset_t h;
    cgq_hset_init (&h, key);
    cgq_hset_str (&h, CGQ_NF_FULL, full ? full : "");
    cgq_hset_queue (&h, c->store);
}

static void
s_hello (coord_t *c, const char *rid, const Cgq__Hello *h)
{
    if (!s_offer_ok (c, rid, h) || !s_client_ok (c, rid, h))
        return;
    node_t *n = nodes_find (c, rid);
    bool fresh = !n;
    if (!n)
        n = nodes_add (c, rid);
    zhashx_delete (c->returning, rid); // back
    // Results that finished while we were apart come first: they may end
    // tasks that the running list below no longer holds.
    for (size_t i = 0; i < h->n_unacked; i++)
        s_result (c, rid, h->unacked[i]);

    // Tasks we believed were running there but the node no longer has: lost,
    // unless the same process simply had not received their Assign yet when
    // it sent this Hello (it crossed on the wire; the heartbeats tell later).
    bool same_process = !fresh && h->instance && h->instance == n->instance;
    uint64_t seen = h->assign_epoch == c->epoch ? h->assign_seq : 0;
    trial_t *t = n->tasks;
    while (t) {
        trial_t *next = t->nnext;
        if (!s_lists ((const Cgq__TaskRef *const *) h->running, h->n_running, t) && !t->deferred) {
            if (same_process && t->assign_seq > seen) {
                cgq_tdebug (t->job->id, t->id, t->attempt,
                            "node %s's Hello crossed the trial's Assign (seq %" PRIu64
                            " > %" PRIu64 "); still its own",
                            n->id, t->assign_seq, seen);
            } else {
                nodes_release (c, t);
                jobs_lost (c, t, same_process ? "node no longer runs it"
                                              : "node restarted without it");
            }
        }
        t = next;
    }
    n->instance = h->instance;
    n->batches = h->batches;
    // Before anything can be placed on it: a full worker reconnecting (to a
    // restarted coordinator, a standby) says so here, not a heartbeat later.
    s_node_full (c, n, h->full);

    // (Re)declare resources; free capacity is recomputed from what it runs.
    nodes_declare (c, n, h->hostname, h->pid, h->kind, h->resources);
    nodes_client (c, n, h->kind == CGQ__NODE_KIND__NODE_CLIENT ? h->job : 0, h->want);

    // Adopt tasks of a previous coordinator life; stop the ones nobody wants.
    for (size_t i = 0; i < h->n_running; i++) {
        const Cgq__TaskRef *r = h->running[i];
        trial_t *tr = jobs_trial (c, r->job, r->trial);
        if (tr && tr->node == n && tr->attempt == r->attempt)
            continue; // already ours
        if (jobs_readopt (c, n, tr, r->attempt) || jobs_adopt (c, n, tr, r->attempt)) {
            tr->assign_seq = 0; // the node has it: no Assign of ours to wait for
            tr->unseen_hbs = 0;
            continue;
        }
        cgq_tinfo (r->job, r->trial, r->attempt, "node %s runs this task, which is not ours; "
                   "stopping it", rid);
        outbox_stop (c, rid, r, "unknown to the coordinator");
    }
    // Recovered trials this process never got the Assign of: they never ran.
    jobs_requeue_undelivered (c, n->id, h->instance, h->assign_epoch, h->assign_seq);

    n->last_seen_ms = cgq_now_ms ();
    nodes_write (c, n, true);
    if (fresh)
        cgq_keyspace_event (c->store, "node.joined", 0, -1, n->id, 0, NULL);
    cgq_info ("node %s joined: cpus %g, %d GPU(s), memory %llu MiB, %u running", n->id, n->cpus,
              n->ngpus, (unsigned long long) (n->memory >> 20), n->ntasks);
    s_welcome (c, n);
    c->sched_dirty = true;
}

// s_missing finds the tasks we believe n runs that its heartbeat does not
// list. A Result sent before the heartbeat has already been read (one pipe
// keeps order), so such a task ended without one: lost. When the node has not
// yet received the task's Assign (its seq is past what the heartbeat says),
// the Assign may still be on its way; after SESSION_ASSIGN_LOST_HBS such
// heartbeats (seconds of the node's own time) it was lost in a reconnect.
// clock: this heartbeat is one of the node's periodic ones; a client's ask
// (sent at once, however soon after the last) is no measure of time and
// counts no Assign as unseen.
static void
s_missing (coord_t *c, node_t *n, const Cgq__Heartbeat *hb, bool clock)
{
    uint64_t seen = hb->assign_epoch == c->epoch ? hb->assign_seq : 0;
    trial_t *t = n->tasks;
    while (t) {
        trial_t *next = t->nnext;
        if (t->deferred || s_lists ((const Cgq__TaskRef *const *) hb->running, hb->n_running, t)) {
            t->unseen_hbs = 0;
        } else if (t->assign_seq <= seen) {
            nodes_release (c, t);
            jobs_lost (c, t, "node no longer runs it and sent no result");
        } else if (!clock || c->stall_ms > 0 || t->assign_seq > n->assign_out) {
            // The Assign has not left this process yet (its batch is still
            // in flight or kept while Redis is away), or these heartbeats
            // queued up during a stall of ours (a stopped process's I/O
            // thread sends nothing): they prove nothing.
        } else if (++t->unseen_hbs >= SESSION_ASSIGN_LOST_HBS && t->resent == 0
                   && dispatch_resend (c, t) == 0) {
            // Lost in a reconnect, most likely (a stale connection of the
            // node's that held its routing id as the Assign left): say it
            // once more before giving the attempt up. Nothing ran yet, so
            // the same attempt can run.
            cgq_tinfo (t->job->id, t->id, t->attempt,
                       "node %s has not seen its Assign after %u heartbeats; sent it again",
                       n->id, (unsigned) t->unseen_hbs);
            t->unseen_hbs = 0;
        } else if (t->unseen_hbs >= SESSION_ASSIGN_LOST_HBS) {
            char why[128];
            snprintf (why, sizeof why, "its Assign never reached the node (%u heartbeats)",
                      (unsigned) t->unseen_hbs);
            nodes_release (c, t);
            jobs_lost (c, t, why);
        }
        t = next;
    }
}

// s_reconcile stops tasks a node runs that are not ours: an attempt we have
// since given to another node, or a trial that has ended. Such a duplicate
// (say an Assign that crossed a reconnect) would hold resources we count as
// free; its result would be ignored anyway.
static void
s_reconcile (coord_t *c, node_t *n, const Cgq__Heartbeat *hb, bool clock)
{
    for (size_t i = 0; i < hb->n_running; i++) {
        const Cgq__TaskRef *r = hb->running[i];
        trial_t *t = jobs_trial (c, r->job, r->trial);
        if (t && t->node == n && t->attempt == r->attempt) {
            // Cancelled or stopped early but still running there: our Stop may
            // have been lost in a reconnect. Stop is idempotent on the worker;
            // say it again.
            if (t->state == CGQ_TRIAL_CANCELLED)
                outbox_stop (c, n->id, r, "job cancelled");
            else if (t->state == CGQ_TRIAL_STOPPED)
                outbox_stop (c, n->id, r, "stopped early");
            else if (t->state == CGQ_TRIAL_PAUSED)
                outbox_stop (c, n->id, r, "job paused");
            continue;
        }
        if (jobs_readopt (c, n, t, r->attempt)) {
            t->assign_seq = 0;
            t->unseen_hbs = 0;
            continue;
        }
        cgq_tinfo (r->job, r->trial, r->attempt,
                   "node %s runs this task, which is no longer its own; stopping it", n->id);
        outbox_stop (c, n->id, r, "superseded: the coordinator no longer owns this attempt");
    }
    s_missing (c, n, hb, clock);
}

// s_heartbeat answers at once: the answer depends on no state, so nodes
// stay calm while Redis is down.
static void
s_heartbeat (coord_t *c, node_t *n, const char *rid, size_t rid_len, const Cgq__Heartbeat *in)
{
    // A client's heartbeat that changes its want is an ask (or a tell's
    // first half), not a sign of life only: it ends a heartbeat hold (loop.h)
    // rather than starting one, so an ask is never held LOOP_HOLD_MS.
    bool ask = n && n->client_job && in->want != n->want;
    if (!ask)
        c->stat_heartbeats++;
    Cgq__Heartbeat hb = CGQ__HEARTBEAT__INIT;
    hb.epoch = c->epoch;
    hb.unknown = n == NULL;
    // A runner's devices that pass their check again come back first, so
    // that the answer lists only those still quarantined (nodes.c).
    char *quarantined[64];
    if (n && n->runner) {
        for (size_t i = 0; i < in->n_recovered; i++)
            nodes_device_recovered (c, n, in->recovered[i]);
        for (int i = 0; i < n->ndevices && hb.n_quarantined < 64; i++)
            if (n->devices[i]->quarantined)
                quarantined[hb.n_quarantined++] = n->devices[i]->id;
        hb.quarantined = quarantined;
    }
    cgq_env_t out = CGQ__ENVELOPE__INIT;
    out.body_case = CGQ__ENVELOPE__BODY_HEARTBEAT;
    out.heartbeat = &hb;
    if (c->nodes_sock && cgq_wire_send_to (c->nodes_sock, rid, rid_len, 0, &out) < 0)
        cgq_debug ("send to %.*s failed: %s", (int) rid_len, rid, zmq_strerror (errno));
    if (n) {
        // Nothing in the node's hash changes but last_seen: that is written
        // coarsely (session_liveness), not once per heartbeat.
        if (in->draining && !n->draining)
            cgq_info ("node %s is shutting down; no new tasks go to it", n->id);
        n->draining = in->draining;
        s_node_full (c, n, in->full);
        if (n->client_job)
            nodes_client (c, n, n->client_job, in->want);
        s_reconcile (c, n, in, !ask);
    }
}

// s_key_binds says whether the message's CURVE key may speak as node id
// (cgq_auth_may_claim): without CURVE, or for the key that id last proved,
// yes. Otherwise the message is refused: logged (with the rejection lines'
// rate limit) with key and address, counted in refused_node_ids, and a Hello
// is answered with a Bye that says what to configure (so the node's own log
// says it). The id's connection may have been handed over to the sender, so
// a node with that id is not sent new work until its own key is heard again.
static bool
s_key_binds (coord_t *c, const char *id, node_t *n, cgq_env_t *env)
{
    if (!c->auth)
        return true;
    const char *key = c->peer_key && *c->peer_key ? c->peer_key : "(none)";
    if (n && n->key[0] && strcmp (n->key, key) == 0) {
        n->suspect = false;
        return true;
    }
    char allowed[512];
    if (cgq_auth_may_claim (c->auth, key, id, allowed, sizeof allowed)) {
        if (n) {
            snprintf (n->key, sizeof n->key, "%s", key);
            n->suspect = false;
        }
        return true;
    }
    c->stat_refused_ids++;
    if (n)
        n->suspect = true;
    char why[768];
    snprintf (why, sizeof why,
              "its CURVE key %s may claim node ids '%s' only (give the node a matching --id, or "
              "its key the `nodes` it may use: cgq keygen NAME --nodes PATTERNS)",
              key, *allowed ? allowed : "(none: a CLI key)");
    int64_t now = cgq_now_ms () / 1000;
    if (now != c->reject_log_s) {
        c->reject_log_s = now;
        c->reject_log_n = 0;
    }
    if (c->reject_log_n++ < S_REJECT_LOG_PER_S)
        cgq_warn ("refused a %s claiming node id '%s' from %s: %s (%" PRIu64 " refused so far)",
                  cgq_wire_body_name (env), id, c->peer_addr ? c->peer_addr : "?", why,
                  c->stat_refused_ids);
    if (env->body_case == CGQ__ENVELOPE__BODY_HELLO) {
        char reason[1200]; // id (255) and why, whole
        snprintf (reason, sizeof reason, "refused node id '%s': %s", id, why);
        s_bye (c, id, reason);
    }
    return false;
}

void
session_message (coord_t *c, const char *rid, size_t rid_len, cgq_env_t *env)
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
    memcpy (id, rid, rid_len);
    id[rid_len] = '\0';
    node_t *n = nodes_find (c, id);
    if (!s_key_binds (c, id, n, env))
        return;
    if (n) {
        int64_t now = cgq_now_ms ();
        if (n->stale)
            s_node_fresh (c, n, now - n->last_seen_ms);
        n->last_seen_ms = now;
    }
    switch (env->body_case) {
    case CGQ__ENVELOPE__BODY_HELLO:
        s_hello (c, id, env->hello);
        break;
    case CGQ__ENVELOPE__BODY_HEARTBEAT:
        s_heartbeat (c, n, rid, rid_len, env->heartbeat);
        break;
    case CGQ__ENVELOPE__BODY_RESULT:
        s_result (c, id, env->result);
        break;
    case CGQ__ENVELOPE__BODY_RESULT_BATCH:
        for (size_t i = 0; i < env->result_batch->n_results; i++)
            s_result (c, id, env->result_batch->results[i]);
        break;
    case CGQ__ENVELOPE__BODY_PROGRESS:
        if (env->progress->task && s_owns (c, n, id, env->progress->task, "Progress")
            && s_report_allowed (c, id, env->progress) && !session_buffer_full (c))
            jobs_progress (c, env->progress);
        break;
    case CGQ__ENVELOPE__BODY_CHECKPOINT:
        // Like a Result: only from the node that runs the attempt (a stale
        // attempt's is refused by jobs_checkpoint, and acked), and not while
        // Redis is away with the buffer full (no ack: the node sends it again).
        if (env->checkpoint->task && s_owns (c, n, id, env->checkpoint->task, "Checkpoint")
            && !session_buffer_full (c))
            jobs_checkpoint (c, id, env->checkpoint);
        break;
    case CGQ__ENVELOPE__BODY_BYE:
        if (n)
            s_node_lost (c, n, CGQ_NODE_GONE,
                         env->bye->reason && *env->bye->reason ? env->bye->reason : "said bye");
        break;
    default:
        cgq_warn ("node %s sent an unexpected %s message; ignored", id, cgq_wire_body_name (env));
        cgq_wire_dropped++;
    }
}

void
session_liveness (coord_t *c, int64_t now)
{
    int64_t limit = c->cfg.heartbeat_ms * c->cfg.dead_after;
    int64_t stale = c->cfg.heartbeat_ms * (c->cfg.stale_after ? c->cfg.stale_after : 2);
    node_t *n = c->nodes;
    while (n) {
        node_t *next = n->next;
        if (now - n->last_seen_ms > limit) {
            char why[96];
            snprintf (why, sizeof why, "silent for %" PRId64 " ms", now - n->last_seen_ms);
            s_node_lost (c, n, CGQ_NODE_DEAD, why);
        }
        else if (!n->stale && stale < limit && now - n->last_seen_ms > stale)
            s_node_stale (c, n, now - n->last_seen_ms);
        else if (n->last_seen_ms > n->seen_written_ms
                 && now - n->seen_written_ms >= SESSION_SEEN_WRITE_MS)
            nodes_dirty (n); // heard from since its hash was written: last_seen
        n = next;
    }
    jobs_adopt_check (c, now);
}

int64_t
session_poke (coord_t *c, int64_t now)
{
    if (!c->npoke)
        return 0;
    if (!c->poke_until_ms)
        c->poke_until_ms = now + 2 * c->cfg.heartbeat_ms;
    if (now < c->next_poke_ms)
        return c->next_poke_ms;
    Cgq__Heartbeat hb = CGQ__HEARTBEAT__INIT;
    hb.epoch = c->epoch;
    hb.unknown = true;
    cgq_env_t out = CGQ__ENVELOPE__INIT;
    out.body_case = CGQ__ENVELOPE__BODY_HEARTBEAT;
    out.heartbeat = &hb;
    size_t keep = 0;
    for (size_t i = 0; i < c->npoke; i++) {
        if (nodes_find (c, c->poke[i]) || now >= c->poke_until_ms) {
            free (c->poke[i]); // it said Hello (or it is too late: its heartbeat will do)
            continue;
        }
        // Not routable yet (the node has not reconnected): dropped, sent again.
        if (c->nodes_sock)
            (void) cgq_wire_send_to (c->nodes_sock, c->poke[i], strlen (c->poke[i]), 0, &out);
        c->poke[keep++] = c->poke[i];
    }
    c->npoke = keep;
    if (!keep) {
        free (c->poke);
        c->poke = NULL;
        return 0;
    }
    c->next_poke_ms = now + SESSION_POKE_MS;
    return c->next_poke_ms;
}

void
session_stalled (coord_t *c, int64_t now, int64_t stall_ms)
{
    for (node_t *n = c->nodes; n; n = n->next) {
        n->last_seen_ms += stall_ms;
        if (n->last_seen_ms > now)
            n->last_seen_ms = now;
    }
    if (c->adopt_deadline_ms)
        c->adopt_deadline_ms += stall_ms;
    if (c->next_liveness_ms < now + c->cfg.heartbeat_ms)
        c->next_liveness_ms = now + c->cfg.heartbeat_ms;
    cgq_warn ("the coordinator did not listen for %" PRId64 " ms (stopped or busy); that time is "
              "not held against any node",
              stall_ms);
}
