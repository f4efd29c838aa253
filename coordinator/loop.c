// loop: the coordinator's lifetime (coord_init, coord_fini) and its event
// loop: poll, read, hand on, timers, flush, send.
#include "loop.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <zmq.h>

#include "blocked.h"
#include "control.h"
#include "dispatch.h"
#include "hist.h"
#include "jobs.h"
#include "lease.h"
#include "log.h"
#include "metrics.h"
#include "notify.h"
#include "nodes.h"
#include "outbox.h"
#include "session.h"

volatile sig_atomic_t coord_stop = 0;

void
coord_init (coord_t *c, const coord_cfg_t *cfg)
{
    memset (c, 0, sizeof *c);
    if (cfg)
        c->cfg = *cfg;
    c->node_index = zhashx_new ();
    c->returning = zhashx_new (); // values: the expiry in ms, as (void *) (intptr_t)
    hist_init_dispatch (&c->hist_dispatch);
    hist_init_redis (&c->hist_redis);
}

void
coord_fini (coord_t *c)
{
    metrics_stop (c);
    notify_fini (c);
    jobs_destroy_all (c);
    nodes_destroy_all (c);
    zhashx_destroy (&c->node_index);
    zhashx_destroy (&c->returning);
    outbox_free (c);
    for (size_t i = 0; i < c->npoke; i++)
        free (c->poke[i]);
    free (c->poke);
    c->poke = NULL;
    c->npoke = 0;
    cgq_store_destroy (&c->store);
}

// Longer than this without listening (stopped, or busy within one turn) is a
// stall, credited to the nodes (session_stalled).
#define STALL_SLACK_MS 250

// s_tick is a checkpoint of the loop's own time: more than allowed_ms since
// the previous one is a stall.
static void
s_tick (coord_t *c, int64_t now, int64_t allowed_ms)
{
    int64_t dt = now - c->last_tick_ms;
    if (c->last_tick_ms && dt > allowed_ms + STALL_SLACK_MS)
        c->stall_ms += dt - allowed_ms;
    c->last_tick_ms = now;
}

// Messages handled per socket per turn: bounds the latency of one turn while
// still batching thousands of state changes into one Redis round trip.
#define TURN_BUDGET 4096

// s_lease_in_doubt: this coordinator has not renewed its lease within the
// lease's time (Redis unreachable): a standby may hold it now, so the nodes
// must not be kept here (they would stay with a leader that can write
// nothing, while the standby leads an empty cluster). Said once.
static bool
s_lease_in_doubt (coord_t *c)
{
    // A lease's time past its end: a standby takes it within that, and a
    // failover of Redis itself (sentinels) has the time to finish first.
    if (!c->lease[0] || cgq_now_ms () <= c->lease_valid_ms + c->cfg.lease_ms)
        return false;
    if (!c->lease_doubt_said) {
        c->lease_doubt_since_ms = cgq_now_ms ();
        cgq_warn ("the leader lease was not renewed for twice its %" PRId64 " ms (Redis "
                  "unreachable): a standby may lead now, so nodes are not answered until a "
                  "renewal says which coordinator leads",
                  c->cfg.lease_ms);
    }
    c->lease_doubt_said = true;
    return true;
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
            size_t size = zmq_msg_size (&parts[payload]);
            uint64_t limit = control ? control_max_request (&c->cfg) : c->cfg.max_frame;
            cgq_env_t *env = size > limit ? NULL
                                          : cgq_wire_decode (zmq_msg_data (&parts[payload]),
                                                             size, limit);
            if (size > limit) {
                cgq_wire_dropped++;
                if (control)
                    control_too_big (c, rid, rid_len, size);
                else
                    cgq_warn ("dropped a %zu-byte frame from a node peer: over --max-frame "
                              "(%" PRIu64 " dropped so far)",
                              size, cgq_wire_dropped);
            }
            else if (env) {
                if (control)
                    control_message (c, rid, rid_len, env);
                else if (s_lease_in_doubt (c))
                    ; // unanswered: the node tries the next coordinator of its list
                else {
                    c->peer_key = c->auth ? zmq_msg_gets (&parts[payload], "User-Id") : NULL;
                    c->peer_addr = zmq_msg_gets (&parts[payload], "Peer-Address");
                    session_message (c, rid, rid_len, env);
                    c->peer_key = c->peer_addr = NULL;
                }
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
s_stats (coord_t *c)
{
    cgq_hset_t h;
    cgq_hset_init (&h, CGQ_KEY_COORDINATOR);
    cgq_hset_u64 (&h, CGQ_CF_DROPPED, cgq_wire_dropped);
    cgq_hset_u64 (&h, CGQ_CF_RESULTS, c->stat_results);
    cgq_hset_u64 (&h, CGQ_CF_ASSIGNS, c->stat_assigns);
    cgq_hset_u64 (&h, CGQ_CF_REJECTED, c->stat_rejected);
    cgq_hset_u64 (&h, CGQ_CF_REPORTS_DROPPED, c->stat_reports_dropped);
    if (c->auth)
    {
        cgq_hset_u64 (&h, CGQ_CF_REFUSED_PEERS, cgq_auth_refused (c->auth));
        cgq_hset_u64 (&h, CGQ_CF_REFUSED_IDS, c->stat_refused_ids);
    }
    cgq_hset_queue (&h, c->store);
}

// s_check_open_files warns, at most every 10 s, while fewer than 32 open
// files are left: at the limit ZeroMQ cannot accept a connection, and a
// node or CLI that connects waits unanswered, with nothing said anywhere.
static void
s_check_open_files (coord_t *c, int64_t now)
{
    if (now < c->next_fd_check_ms)
        return;
    c->next_fd_check_ms = now + 5000;
    struct rlimit rl;
    if (getrlimit (RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
        return;
    unsigned long open = 0;
    DIR *d = opendir ("/proc/self/fd");
    if (d) {
        for (struct dirent *e; (e = readdir (d));)
            open += e->d_name[0] != '.';
        closedir (d);
        open--; // the directory's own
    }
    else if (errno == EMFILE)
        open = (unsigned long) rl.rlim_cur; // not one left, not even for this
    else
        return;
    if (open + 32 < rl.rlim_cur)
        return;
    if (now < c->fd_warned_ms + 10000)
        return;
    c->fd_warned_ms = now;
    cgq_warn ("%lu of this coordinator's %llu open files are in use: nodes and CLIs that connect "
              "now wait unanswered; raise its limit (ulimit -n, systemd's LimitNOFILE=, docker's "
              "--ulimit nofile=): each node holds one",
              open, (unsigned long long) rl.rlim_cur);
}

// s_lease_lost makes the loop end without another write or send.
static void
s_lease_lost (coord_t *c, const char *why)
{
    cgq_error ("lost the leader lease (%s): another coordinator leads now; this one stops "
               "writing and stands by",
               why);
    c->lease_lost = true;
    outbox_free (c);
}

// s_renew extends the lease when due. Runs first thing in a turn, before
// anything read is acted on: after a pause past the lease, the turn stops
// here. Redis being down is not a loss: the fence guards every write.
static void
s_renew (coord_t *c, int64_t now)
{
    if (!c->lease[0] || now < c->next_lease_ms)
        return;
    // A renewal would first wait for the batch in flight, blocking the loop
    // while Redis does not answer: it goes after it (the fence guards the
    // batch meanwhile; a flight that gets no answer fails in timeout_ms).
    if (cgq_store_flying (c->store)) {
        c->next_lease_ms = now + 20;
        return;
    }
    lease_rc_t rc = lease_renew (c->store, c->lease, c->epoch, c->cfg.lease_ms);
    if (rc == LEASE_HELD)
        s_lease_lost (c, "it was taken while this one did not renew it");
    else if (rc == LEASE_OURS) {
        c->next_lease_ms = now + c->cfg.lease_ms / 3;
        c->lease_valid_ms = now + c->cfg.lease_ms;
        if (c->lease_doubt_said) {
            // The nodes' silence meanwhile was this coordinator's doing.
            cgq_info ("the leader lease is still ours: answering the nodes again");
            session_stalled (c, now, now - c->lease_doubt_since_ms);
        }
        c->lease_doubt_said = false;
    }
    else
        c->next_lease_ms = now + 100; // Redis unreachable: try again soon
}

// s_flush_failed backs off after a batch Redis did not take (or a lost lease).
static void
s_flush_failed (coord_t *c, int64_t now)
{
    if (cgq_store_fenced (c->store)) {
        s_lease_lost (c, cgq_store_errstr (c->store));
        return;
    }
    // Kept for the replies while Redis is down: the store's own errstr is
    // reset by the next (re)connect, a lease renewal's, though the cause
    // (an OOM refusal) stands.
    snprintf (c->redis_why, sizeof c->redis_why, "%s", cgq_store_errstr (c->store));
    c->redis_backoff_ms = c->redis_backoff_ms ? c->redis_backoff_ms * 2 : 100;
    if (c->redis_backoff_ms > 2000)
        c->redis_backoff_ms = 2000;
    c->redis_retry_ms = now + c->redis_backoff_ms;
    // A probe under way has said it once (its start failed a flush with the
    // cause before); its verdict, or the answer, is logged when it comes.
    if (cgq_store_probing (c->store) && c->redis_probe_said) {
        cgq_debug ("%s; %zu command(s) kept", cgq_store_errstr (c->store),
                   cgq_store_pending (c->store));
        return;
    }
    c->redis_probe_said = cgq_store_probing (c->store);
    cgq_warn ("%s; %zu command(s) kept, retrying in %" PRId64 " ms", cgq_store_errstr (c->store),
              cgq_store_pending (c->store), c->redis_backoff_ms);
}

// s_flushed: a batch is applied; what waited for Redis may go on.
static void
s_flushed (coord_t *c)
{
    if (c->redis_retry_ms) {
        cgq_info ("Redis is back; batch persisted%s", c->buffer_full ? "; nodes send the results "
                                                                        "they held" : "");
        outbox_rehold (c, cgq_now_ms () + c->cfg.durable_ms);
    }
    c->buffer_full = false;
    notify_flushed (c);
    c->redis_retry_ms = 0;
    c->redis_backoff_ms = 0;
    c->redis_probe_said = false;
    c->redis_why[0] = 0;
    // The journal replayed batches Redis had lost (a crash inside its fsync
    // window), jobs among them whose INCR it lost too: the counter goes past
    // them in the next batch. (Not in every job's batch: a Lua call there
    // was ~28 us of Redis's time on each submit's critical path.)
    uint64_t replayed = cgq_store_replayed (c->store);
    if (replayed != c->replays_seen) {
        c->replays_seen = replayed;
        control_job_seq_at_least (c, c->max_job_id);
    }
}

// s_flush persists the turn's batch, waiting for Redis; on success the
// outbox goes out.
static int
s_flush (coord_t *c, int64_t now)
{
    if (c->lease_lost || (c->redis_retry_ms && now < c->redis_retry_ms))
        return -1;
    size_t pending = cgq_store_pending (c->store);
    int64_t t0 = pending ? cgq_now_us () : 0;
    notify_covered (c);
    int frc = cgq_store_flush (c->store);
    if (pending && frc == 0)
        hist_observe (&c->hist_redis, (double) (cgq_now_us () - t0) / 1e6);
    if (frc < 0) {
        s_flush_failed (c, now);
        return -1;
    }
    s_flushed (c);
    outbox_send (c);
    return 0;
}

// s_collect settles the batch in flight if its answer is in: its part of
// the outbox goes out (the rest waits for the next batch), or it failed and
// goes again after a back-off. Returns cgq_store_flush_poll's answer.
static int
s_collect (coord_t *c, int64_t now)
{
    int rc = cgq_store_flush_poll (c->store, false);
    if (rc == CGQ_FLUSH_DONE) {
        hist_observe (&c->hist_redis, (double) (cgq_now_us () - c->flight_us) / 1e6);
        s_flushed (c);
        outbox_send_sealed (c);
    }
    else if (rc == CGQ_FLUSH_FAILED) {
        c->out_sealed = NULL; // the retry covers it all again
        s_flush_failed (c, now);
    }
    return rc;
}

// s_flush_async is s_flush without the wait (coord_run): the batch in
// flight is collected if it can be, and the next one, everything queued
// since, goes out at once. The loop polls the store's socket meanwhile and
// goes on reading nodes: building the next batch overlaps with Redis
// applying this one.
static int
s_flush_async (coord_t *c, int64_t now)
{
    if (c->lease_lost)
        return -1;
    int rc = s_collect (c, now);
    // Held Acks that are due go now, whatever is in flight: their batches
    // are long applied (else the loop would spin on their deadline).
    if (!c->lease_lost)
        outbox_send_due (c, cgq_now_ms ());
    if (c->lease_lost)
        return -1;
    if (rc == CGQ_FLUSH_FLYING || cgq_store_flying (c->store))
        return 0;
    if (c->redis_retry_ms && now < c->redis_retry_ms)
        return -1;
    if (!cgq_store_pending (c->store)) {
        outbox_send (c); // covered by batches already applied
        return 0;
    }
    notify_covered (c);
    outbox_seal (c);
    c->flight_us = cgq_now_us ();
    if (cgq_store_flush_start (c->store) < 0) {
        c->out_sealed = NULL;
        s_flush_failed (c, now);
        return -1;
    }
    return 0;
}

int
coord_turn_end (coord_t *c, int64_t now)
{
    // Node hashes and the stats are snapshots: with the buffer full they stay
    // dirty and are written once when Redis is back, not once per heartbeat.
    if (!session_buffer_full (c))
        nodes_write_dirty (c);
    jobs_write_dirty (c);
    jobs_reap (c);
    outbox_confirm_tick (c, now);
    int rc = c->async_flush ? s_flush_async (c, now) : s_flush (c, now);
    s_tick (c, cgq_now_ms (), 0);
    return rc;
}

void
coord_heartbeat_hold (coord_t *c, int from_nodes, int from_ctl, uint64_t heartbeats, int64_t now)
{
    if (from_nodes <= 0 && from_ctl <= 0)
        return; // a turn for a timer: says nothing about the traffic
    bool quiet = from_ctl == 0 && heartbeats == (uint64_t) from_nodes;
    c->hold_nodes_ms = quiet && c->quiet_turn_ms && now - c->quiet_turn_ms < LOOP_QUIET_GAP_MS
                           ? now + LOOP_HOLD_MS
                           : 0;
    c->quiet_turn_ms = quiet ? now : 0;
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
    // The sockets, the ZAP handler's (CURVE: peers wait on our answers),
    // then the eventfd by which the HTTP server asks for /metrics (metrics.h):
    // never a blocking call.
    // curl's sockets (notify.h) come after them, renewed every turn.
    zmq_pollitem_t items[6 + NOTIFY_POLL_MAX] = {{c->nodes_sock, 0, ZMQ_POLLIN, 0},
                                                 {c->ctl_sock, 0, ZMQ_POLLIN, 0}};
    int nitems = 2, zap = -1, http = -1;
    if (c->auth) {
        zap = nitems;
        items[nitems++] = (zmq_pollitem_t) {cgq_auth_zap_socket (c->auth), 0, ZMQ_POLLIN, 0};
    }
    if (metrics_fd (c) >= 0) {
        http = nitems;
        items[nitems++] = (zmq_pollitem_t) {NULL, metrics_fd (c), ZMQ_POLLIN, 0};
    }
    c->async_flush = true;
    // From here on no connect may block the loop (cgq_store_set_gate).
    cgq_store_set_gate (c->store, true);
    c->next_liveness_ms = cgq_now_ms () + c->cfg.heartbeat_ms;
    c->next_stats_ms = cgq_now_ms () + 1000;
    c->sched_dirty = true;
    while (!coord_stop) {
        int64_t now = cgq_now_ms ();
        int64_t deadline = s_min_deadline (c->next_liveness_ms, c->next_stats_ms);
        deadline = s_min_deadline (deadline, c->redis_retry_ms);
        deadline = s_min_deadline (deadline, c->adopt_deadline_ms);
        deadline = s_min_deadline (deadline, outbox_next_due (c));
        deadline = s_min_deadline (deadline, c->lease[0] ? c->next_lease_ms : 0);
        deadline = s_min_deadline (deadline, metrics_next_ms (c, now));
        deadline = s_min_deadline (deadline, notify_next_ms (c, now));
        deadline = s_min_deadline (deadline, session_poke (c, now));
        bool hold = c->hold_nodes_ms > now;
        if (hold)
            deadline = s_min_deadline (deadline, c->hold_nodes_ms);
        items[0].events = hold ? 0 : ZMQ_POLLIN;
        long timeout = deadline > now ? (long) (deadline - now) : 0;
        bool flying = cgq_store_flying (c->store);
        if (c->sched_dirty || (c->out_head && !c->redis_retry_ms && !flying))
            timeout = 0;
        s_tick (c, now, 0);
        // The batch in flight's answer wakes the loop (s_flush_async).
        int nfixed = nitems;
        if (flying && cgq_store_fd (c->store) >= 0)
            items[nfixed++] = (zmq_pollitem_t) {NULL, cgq_store_fd (c->store), ZMQ_POLLIN, 0};
        // The non-blocking probe of a Redis that did not answer: its
        // answer lets the next flush connect at once.
        short probe_ev = 0;
        int probe_fd = cgq_store_probe_fd (c->store, &probe_ev);
        int probe_item = -1;
        if (probe_fd >= 0) {
            probe_item = nfixed;
            items[nfixed++] = (zmq_pollitem_t) {NULL, probe_fd, probe_ev, 0};
        }
        int ncurl = notify_poll_items (c, items + nfixed, NOTIFY_POLL_MAX);
        int rc = zmq_poll (items, nfixed + ncurl, timeout);
        if (rc < 0) {
            if (errno == EINTR)
                continue;
            cgq_error ("zmq_poll: %s", zmq_strerror (errno));
            return -1;
        }
        s_tick (c, cgq_now_ms (), timeout);
        // A batch applied releases its Assigns before anything else is read.
        if (flying && nfixed > nitems && (items[nitems].revents & ZMQ_POLLIN))
            s_collect (c, cgq_now_ms ());
        if (probe_item >= 0 && items[probe_item].revents
            && cgq_store_probe_poll (c->store) == CGQ_PROBE_ALIVE) {
            cgq_info ("Redis at %s answers again; reconnecting", cgq_store_url (c->store));
            if (c->redis_retry_ms)
                c->redis_retry_ms = cgq_now_ms (); // flush now
            c->redis_backoff_ms = 0;
        }
        s_renew (c, cgq_now_ms ());
        if (c->lease_lost)
            break;
        int backlog = 0, from_nodes = 0, from_ctl = 0;
        uint64_t hbs = c->stat_heartbeats;
        if (items[0].revents & ZMQ_POLLIN) {
            from_nodes = s_drain (c, c->nodes_sock, false);
            backlog = from_nodes >= TURN_BUDGET;
        }
        if (items[1].revents & ZMQ_POLLIN)
            from_ctl = s_drain (c, c->ctl_sock, true);
        if (zap >= 0 && (items[zap].revents & ZMQ_POLLIN))
            cgq_auth_zap_handle (c->auth);
        if (http >= 0)
            metrics_run (c); // a /metrics page asked for by the HTTP threads
        notify_run (c, cgq_now_ms (), items + nfixed, ncurl);
        now = cgq_now_ms ();
        s_tick (c, now, 0);
        // Liveness is judged only after the sockets are drained, and only by
        // time the coordinator itself was listening.
        if (c->stall_ms) {
            session_stalled (c, now, c->stall_ms);
            c->stall_ms = 0;
        }
        if (now >= c->next_liveness_ms && !backlog && !c->lease_doubt_said) {
            session_liveness (c, now);
            c->next_liveness_ms = now + c->cfg.heartbeat_ms;
        }
        if (now >= c->next_stats_ms && !c->buffer_full) {
            s_stats (c);
            blocked_tick (c, cgq_wall_s ());
            c->next_stats_ms = now + 1000;
        }
        s_check_open_files (c, now);
        // While Redis is down, do not start new work whose record could not be kept.
        if (!c->redis_retry_ms)
            dispatch_run (c);
        coord_turn_end (c, now);
        if (c->lease_lost)
            break;
        coord_heartbeat_hold (c, from_nodes, from_ctl, c->stat_heartbeats - hbs, cgq_now_ms ());
    }
    if (c->lease_lost)
        return 2;
    // Last turn: persist what we have; the outbox may go (nodes tolerate it).
    c->async_flush = false;
    if (cgq_store_flying (c->store) || cgq_store_pending (c->store))
        s_flush (c, cgq_now_ms ());
    return 0;
}
