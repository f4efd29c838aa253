#include "link.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <czmq.h>
#include <unistd.h>
#include <zmq.h>

#include "log.h"
#include "result.h"
#include "util.h"

#define S_VERSION "0.1.0"
#define S_BYE_LINGER_MS 1000
#define S_ENVELOPE_SLACK 16 // an Envelope around a Result: version, body tag, length

// Results not yet acked: a list in the order they last went out (so the
// oldest is the next to re-send) and an index by task, so that an Ack, an
// Assign's duplicate check and the deadline cost O(1) however many results
// wait (the coordinator holds Acks until their batch is durable, so
// thousands may wait at once).
typedef struct s_unacked_s {
    Cgq__Result *result; // owned
    int64_t sent_ms;     // last time it went out (alone or in a Hello)
    char key[80];        // cgq_wire_task_str of its task: the index key
    bool in_hello;       // carried by the last Hello
    bool held;           // waits in the link's held list (cgq_link_hold)
    struct s_unacked_s *prev, *next;
} s_unacked_t;

struct cgq_link_t {
    void *ctx;
    void *sock;
    char *endpoint;
    char *node_id;
    char *hostname;
    const Cgq__Resources *resources;
    cgq_link_running_fn *running;
    void *arg;
    int64_t heartbeat_ms;
    bool welcomed;
    uint64_t epoch;
    uint32_t max_frame;
    int64_t last_rx_ms;    // anything received (or the last (re)connect)
    int64_t last_hello_ms;
    int64_t last_hb_ms;
    s_unacked_t *uhead, *utail; // by sent_ms, oldest first
    zhashx_t *uindex;           // task key -> s_unacked_t (borrowed)
    size_t n_unacked;
    bool bye;
    const cgq_auth_t *auth; // CURVE keys, or NULL
    bool hinted;            // s_hint_never_welcomed said its piece
    bool ever_welcomed;     // some coordinator answered this process once
    unsigned retries;       // reconnections so far (for the log)
    bool draining;         // said in every heartbeat: no new tasks
    char *full;            // said in every heartbeat: no new tasks for now, why (NULL: none)
    char **eps;            // the coordinators' endpoints (leader and standbys)
    size_t neps, epi;      // how many; the one in use (endpoint == eps[epi])
    int kind;              // Cgq__NodeKind
    uint64_t instance;     // drawn once per link: this process's Hellos share it
    uint64_t assign_epoch; // the last Assign received: its coordinator epoch
    uint64_t assign_seq;   // and its seq
    bool batches;          // AssignBatch is read here (said in Hello)
    bool peer_batches;     // the coordinator reads ResultBatch (its Welcome said so)
    bool holding;          // results wait in held until cgq_link_release
    s_unacked_t **held;
    size_t nheld, capheld;
    // A device runner's devices: quarantined as the last Heartbeat answer
    // said, and those whose check passed since (for the next Heartbeat).
    char **quar;
    size_t nquar;
    char **rec;
    size_t nrec;
};

static void
s_strv_free (char ***v, size_t *n)
{
    for (size_t i = 0; i < *n; i++)
        free ((*v)[i]);
    free (*v);
    *v = NULL;
    *n = 0;
}

// s_touch records that u went out at now: it moves to the list's tail.
static void
s_touch (cgq_link_t *self, s_unacked_t *u, int64_t now)
{
    u->sent_ms = now;
    if (self->utail == u)
        return;
    if (u->prev)
        u->prev->next = u->next;
    else
        self->uhead = u->next;
    if (u->next)
        u->next->prev = u->prev;
    u->prev = self->utail;
    u->next = NULL;
    if (self->utail)
        self->utail->next = u;
    else
        self->uhead = u;
    self->utail = u;
}

static void
s_unacked_drop (cgq_link_t *self, s_unacked_t *u)
{
    if (u->prev)
        u->prev->next = u->next;
    else
        self->uhead = u->next;
    if (u->next)
        u->next->prev = u->prev;
    else
        self->utail = u->prev;
    zhashx_delete (self->uindex, u->key);
    if (u->held)
        for (size_t i = 0; i < self->nheld; i++)
            if (self->held[i] == u) {
                self->held[i] = self->held[--self->nheld];
                break;
            }
    cgq_result_destroy (&u->result);
    free (u);
    self->n_unacked--;
}

static int
s_open (cgq_link_t *self)
{
    self->sock = zmq_socket (self->ctx, ZMQ_DEALER);
    if (!self->sock) {
        cgq_error ("cannot create a ZeroMQ socket: %s", zmq_strerror (errno));
        return -1;
    }
    int linger = 0, ivl = 100, ivl_max = 2000;
    zmq_setsockopt (self->sock, ZMQ_ROUTING_ID, self->node_id, strlen (self->node_id));
    zmq_setsockopt (self->sock, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt (self->sock, ZMQ_RECONNECT_IVL, &ivl, sizeof ivl);
    zmq_setsockopt (self->sock, ZMQ_RECONNECT_IVL_MAX, &ivl_max, sizeof ivl_max);
    if (cgq_auth_client_apply (self->auth, self->sock) < 0) {
        cgq_error ("cannot turn CURVE on: %s", zmq_strerror (errno));
        zmq_close (self->sock);
        self->sock = NULL;
        return -1;
    }
    if (zmq_connect (self->sock, self->endpoint) < 0) {
        cgq_error ("cannot connect to %s: %s (set --coordinator to the coordinator's node "
                   "endpoint, e.g. tcp://host:7700)",
                   self->endpoint, zmq_strerror (errno));
        zmq_close (self->sock);
        self->sock = NULL;
        return -1;
    }
    self->last_rx_ms = cgq_now_ms ();
    return 0;
}

static void
s_send (cgq_link_t *self, cgq_env_t *env)
{
    if (cgq_wire_send (self->sock, env, ZMQ_DONTWAIT) < 0)
        // A full queue or no connection yet: everything that matters is sent
        // again (Hello, Heartbeat, results), so dropping is safe.
        cgq_debug ("cannot send %s to %s: %s", cgq_wire_body_name (env), self->endpoint,
                   zmq_strerror (errno));
}

static void
s_send_hello (cgq_link_t *self, int64_t now)
{
    Cgq__Hello hello = CGQ__HELLO__INIT;
    hello.node_id = self->node_id;
    hello.kind = (Cgq__NodeKind) self->kind;
    hello.instance = self->instance;
    hello.assign_epoch = self->assign_epoch;
    hello.assign_seq = self->assign_seq;
    hello.batches = self->batches;
    hello.full = self->full ? self->full : (char *) "";
    hello.resources = (Cgq__Resources *) self->resources;
    Cgq__TaskRef **running = NULL;
    hello.n_running = self->running ? self->running (self->arg, &running) : 0;
    hello.running = running;
    // A Hello over the coordinator's frame limit would be dropped again and
    // again: results that do not fit follow one by one after the Welcome.
    Cgq__Result **unacked = cgq_xcalloc (self->n_unacked + 1, sizeof *unacked);
    s_unacked_t **sent = cgq_xcalloc (self->n_unacked + 1, sizeof *sent);
    size_t n = 0, bytes = 0;
    for (s_unacked_t *u = self->uhead; u; u = u->next) {
        size_t size = cgq__result__get_packed_size (u->result) + 16;
        if (bytes + size > self->max_frame / 2)
            continue;
        bytes += size;
        sent[n] = u;
        unacked[n++] = u->result;
    }
    for (s_unacked_t *u = self->uhead; u; u = u->next)
        u->in_hello = false;
    for (size_t i = 0; i < n; i++) {
        s_touch (self, sent[i], now);
        sent[i]->in_hello = true;
    }
    free (sent);
    hello.n_unacked = n;
    hello.unacked = unacked;
    hello.hostname = self->hostname;
    hello.pid = (uint32_t) getpid ();
    hello.version = S_VERSION;
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_HELLO;
    env.hello = &hello;
    s_send (self, &env);
    free (unacked);
    self->last_hello_ms = now;
    cgq_debug ("hello to %s: %zu running, %zu of %zu unacked results", self->endpoint,
               hello.n_running, n, self->n_unacked);
}

static void
s_send_heartbeat (cgq_link_t *self, int64_t now)
{
    Cgq__Heartbeat hb = CGQ__HEARTBEAT__INIT;
    Cgq__TaskRef **running = NULL;
    hb.n_running = self->running ? self->running (self->arg, &running) : 0;
    hb.running = running;
    hb.epoch = self->epoch;
    hb.assign_epoch = self->assign_epoch;
    hb.assign_seq = self->assign_seq;
    hb.draining = self->draining;
    hb.full = self->full ? self->full : (char *) "";
    hb.recovered = self->rec;
    hb.n_recovered = self->nrec;
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &hb;
    s_send (self, &env);
    self->last_hb_ms = now;
    s_strv_free (&self->rec, &self->nrec); // said once; a check that passes again says it again
}

static void
s_send_result (cgq_link_t *self, s_unacked_t *u, int64_t now)
{
    if (self->holding) {
        if (u->held)
            return;
        u->held = true;
        if (self->nheld == self->capheld) {
            self->capheld = self->capheld ? 2 * self->capheld : 64;
            self->held = cgq_xrealloc (self->held, self->capheld * sizeof *self->held);
        }
        self->held[self->nheld++] = u;
        s_touch (self, u, now);
        return;
    }
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_RESULT;
    env.result = u->result;
    s_send (self, &env);
    s_touch (self, u, now);
}

static size_t
s_result_frame (const Cgq__Result *r)
{
    return cgq__result__get_packed_size (r) + S_ENVELOPE_SLACK;
}

// s_keep_end shortens *s by drop bytes from its start, at a UTF-8 character
// boundary.
static void
s_keep_end (char **s, size_t drop)
{
    size_t len = strlen (*s);
    const char *p = *s + (drop < len ? drop : len);
    while (((unsigned char) *p & 0xC0) == 0x80)
        p++;
    char *t = cgq_xstrdup (p);
    free (*s);
    *s = t;
}

// s_keep_start shortens *s by drop bytes from its end, at a UTF-8 character
// boundary.
static void
s_keep_start (char **s, size_t drop)
{
    size_t len = strlen (*s);
    size_t n = drop < len ? len - drop : 0;
    while (n > 0 && ((unsigned char) (*s)[n] & 0xC0) == 0x80)
        n--;
    (*s)[n] = 0;
}

// s_fit makes result fit the coordinator's frame limit, which drops larger
// frames: such a result would be re-sent every 5 s forever and its trial
// never end. Metrics that cannot fit fail the trial, saying why; then the
// log tail loses its start (the trial's files keep everything) and the error
// its end (its first line says what happened).
static void
s_fit (cgq_link_t *self, Cgq__Result *r)
{
    size_t limit = self->max_frame, size = s_result_frame (r);
    if (size <= limit)
        return;
    cgq_twarn (r->task->job, r->task->trial, r->task->attempt,
               "its %zu-byte result is over the coordinator's frame limit of %zu bytes; "
               "cutting it down",
               size, limit);
    char *tail = r->log_tail, *error = r->error;
    r->log_tail = (char *) "";
    r->error = (char *) "";
    bool metrics_fit = s_result_frame (r) <= limit;
    r->log_tail = tail;
    r->error = error;
    if (!metrics_fit) {
        size_t bytes = strlen (r->metrics_json);
        free (r->metrics_json);
        r->metrics_json = cgq_xstrdup ("{}");
        if (r->status == CGQ__TASK_STATUS__TASK_SUCCEEDED)
            r->status = CGQ__TASK_STATUS__TASK_FAILED;
        r->error = cgq_xasprintf ("result metrics are %zu bytes, too many for the coordinator's "
                                  "frame limit of %zu bytes (write fewer or smaller values, or "
                                  "raise its --max-frame)%s%s",
                                  bytes, limit, *error ? "\n" : "", error);
        free (error);
    }
    size = s_result_frame (r);
    if (size > limit)
        s_keep_end (&r->log_tail, size - limit);
    size = s_result_frame (r);
    if (size > limit)
        s_keep_start (&r->error, size - limit);
    size = s_result_frame (r);
    if (size > limit)
        s_keep_start (&r->trial_dir, size - limit);
}

// s_forget marks the node unknown to the coordinator: Hello again at once.
static void
s_forget (cgq_link_t *self, const char *why)
{
    cgq_info ("coordinator %s: %s; sending Hello again", self->endpoint, why);
    self->welcomed = false;
    s_send_hello (self, cgq_now_ms ());
}

cgq_link_t *
cgq_link_new (void *ctx, const cgq_link_opts_t *opts, cgq_link_running_fn *running, void *arg)
{
    cgq_link_t *self = cgq_xcalloc (1, sizeof *self);
    self->uindex = zhashx_new ();
    self->ctx = ctx;
    // "EP1,EP2,...": a leader and its standbys. One at a time; the next one
    // after each silence (only the leader binds its endpoint).
    char *list = cgq_xstrdup (opts->endpoint), *save = NULL;
    for (char *ep = strtok_r (list, ", ", &save); ep; ep = strtok_r (NULL, ", ", &save)) {
        self->eps = cgq_xrealloc (self->eps, (self->neps + 1) * sizeof *self->eps);
        self->eps[self->neps++] = cgq_xstrdup (ep);
    }
    free (list);
    if (!self->neps) {
        self->eps = cgq_xcalloc (1, sizeof *self->eps);
        self->eps[self->neps++] = cgq_xstrdup (opts->endpoint);
    }
    self->endpoint = self->eps[0];
    self->node_id = cgq_xstrdup (opts->node_id);
    self->hostname = cgq_xstrdup (opts->hostname ? opts->hostname : "");
    self->resources = opts->resources;
    self->running = running;
    self->arg = arg;
    self->heartbeat_ms = opts->heartbeat_ms > 0 ? opts->heartbeat_ms : 1000;
    self->kind = opts->kind;
    self->batches = opts->batches;
    self->auth = opts->auth;
    // Never 0 (which means "not said"); time and pid when the kernel has no
    // entropy to give.
    if (getrandom (&self->instance, sizeof self->instance, GRND_NONBLOCK)
        != (ssize_t) sizeof self->instance)
        self->instance = ((uint64_t) cgq_now_ms () << 20) ^ (uint64_t) getpid ();
    self->instance |= 1;
    self->max_frame = CGQ_WIRE_MAX_FRAME_DEFAULT;
    if (s_open (self) < 0) {
        cgq_link_destroy (&self);
        return NULL;
    }
    cgq_info ("connecting to coordinator %s as node '%s'", self->endpoint, self->node_id);
    s_send_hello (self, cgq_now_ms ());
    return self;
}

void
cgq_link_destroy (cgq_link_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cgq_link_t *self = *self_p;
    if (self->sock) {
        if (self->bye) {
            int linger = S_BYE_LINGER_MS;
            zmq_setsockopt (self->sock, ZMQ_LINGER, &linger, sizeof linger);
        }
        zmq_close (self->sock);
    }
    while (self->uhead)
        s_unacked_drop (self, self->uhead);
    zhashx_destroy (&self->uindex);
    free (self->held);
    free (self->full);
    s_strv_free (&self->quar, &self->nquar);
    s_strv_free (&self->rec, &self->nrec);
    for (size_t i = 0; i < self->neps; i++)
        free (self->eps[i]);
    free (self->eps);
    free (self->node_id);
    free (self->hostname);
    free (self);
    *self_p = NULL;
}

void *
cgq_link_socket (cgq_link_t *self)
{
    return self->sock;
}

static void
s_on_welcome (cgq_link_t *self, const Cgq__Welcome *w)
{
    bool first = !self->welcomed;
    self->welcomed = true;
    self->ever_welcomed = true;
    self->epoch = w->epoch;
    self->peer_batches = w->batches;
    if (w->heartbeat_ms > 0)
        self->heartbeat_ms = w->heartbeat_ms;
    if (w->max_frame > 0 && w->max_frame != self->max_frame) {
        self->max_frame = w->max_frame;
        for (s_unacked_t *u = self->uhead; u; u = u->next)
            s_fit (self, u->result);
    }
    if (first)
        cgq_info ("welcomed by coordinator %s (epoch %" PRIu64 ", heartbeat %" PRId64 " ms)",
                  self->endpoint, self->epoch, self->heartbeat_ms);
    // Results the Hello did not carry (finished after it left, or did not
    // fit) go now, ahead of the first heartbeat: a heartbeat that lists
    // neither a task nor, before it, its Result says the task was lost.
    int64_t now = cgq_now_ms ();
    s_unacked_t *u = self->uhead;
    for (size_t i = 0, n = self->n_unacked; i < n && u; i++) {
        s_unacked_t *next = u->next; // s_send_result moves u to the tail
        if (!u->in_hello)
            s_send_result (self, u, now);
        u = next;
    }
    // The first heartbeat follows one interval after the Welcome.
    self->last_hb_ms = now;
}

static void
s_on_ack (cgq_link_t *self, const Cgq__Ack *ack)
{
    char key[80];
    for (size_t a = 0; a < ack->n_tasks; a++) {
        if (!ack->tasks[a])
            continue;
        s_unacked_t *u = zhashx_lookup (self->uindex, cgq_wire_task_str (key, ack->tasks[a]));
        if (u)
            s_unacked_drop (self, u);
    }
}

// s_assign_seen records the last Assign received, said in every Hello and
// Heartbeat: an Assign sent later may cross them (see schemas/cgq.proto).
static void
s_assign_seen (cgq_link_t *self, const Cgq__Assign *a)
{
    if (a->epoch > self->assign_epoch
        || (a->epoch == self->assign_epoch && a->seq > self->assign_seq)) {
        self->assign_epoch = a->epoch;
        self->assign_seq = a->seq;
    }
}

cgq_env_t *
cgq_link_recv (cgq_link_t *self)
{
    while (self->sock) {
        zmq_msg_t msg;
        zmq_msg_init (&msg);
        if (zmq_msg_recv (&msg, self->sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close (&msg);
            return NULL;
        }
        self->last_rx_ms = cgq_now_ms ();
        cgq_env_t *env = cgq_wire_decode (zmq_msg_data (&msg), zmq_msg_size (&msg), 0);
        size_t size = zmq_msg_size (&msg);
        zmq_msg_close (&msg);
        if (!env) {
            cgq_warn ("dropped an unreadable frame of %zu bytes from %s", size, self->endpoint);
            continue;
        }
        switch (env->body_case) {
        case CGQ__ENVELOPE__BODY_WELCOME:
            s_on_welcome (self, env->welcome);
            break;
        case CGQ__ENVELOPE__BODY_HEARTBEAT:
            if (!self->welcomed)
                break; // a Hello is already on its way
            if (env->heartbeat->unknown)
                s_forget (self, "it does not know this node");
            else if (env->heartbeat->epoch != self->epoch) {
                char why[96];
                snprintf (why, sizeof why, "its epoch changed from %" PRIu64 " to %" PRIu64,
                          self->epoch, env->heartbeat->epoch);
                s_forget (self, why);
            }
            else {
                s_strv_free (&self->quar, &self->nquar);
                if (env->heartbeat->n_quarantined) {
                    self->quar = cgq_xcalloc (env->heartbeat->n_quarantined, sizeof *self->quar);
                    for (size_t i = 0; i < env->heartbeat->n_quarantined; i++)
                        self->quar[self->nquar++] = cgq_xstrdup (env->heartbeat->quarantined[i]);
                }
            }
            break;
        case CGQ__ENVELOPE__BODY_ACK:
            s_on_ack (self, env->ack);
            break;
        case CGQ__ENVELOPE__BODY_BYE:
            // The coordinator refused this node's Hello (its CURVE key may
            // not use this node id); it says what to configure. Said once
            // per Hello, which the node sends again after its silence period.
            cgq_error ("coordinator %s: %s", self->endpoint,
                       env->bye->reason && *env->bye->reason ? env->bye->reason
                                                             : "it refused this node");
            self->hinted = true;
            break;
        case CGQ__ENVELOPE__BODY_ASSIGN:
            s_assign_seen (self, env->assign);
            return env;
        case CGQ__ENVELOPE__BODY_ASSIGN_BATCH:
            for (size_t i = 0; i < env->assign_batch->n_assigns; i++)
                s_assign_seen (self, env->assign_batch->assigns[i]);
            return env;
        case CGQ__ENVELOPE__BODY_STOP:
        case CGQ__ENVELOPE__BODY_CHECKPOINT_ACK:
            return env;
        default:
            cgq_warn ("ignoring unexpected %s message from %s", cgq_wire_body_name (env),
                      self->endpoint);
            break;
        }
        cgq_wire_free (env);
    }
    return NULL;
}

// s_hint_never_welcomed says what to configure when the coordinator never
// answered: a coordinator with CURVE on refuses a node without keys, or with
// a key not in its allow-list, and this side sees only silence.
static void
s_hint_never_welcomed (cgq_link_t *self)
{
    if (self->auth)
        cgq_warn ("no Welcome from %s: if its CURVE allow-list (--curve-allow) lacks this node's "
                  "public key %s, the coordinator refuses it (its log names the key); also "
                  "check that --curve-server is the coordinator's public certificate",
                  self->endpoint, cgq_auth_public_txt (self->auth));
    else
        cgq_warn ("no Welcome from %s: if the coordinator has CURVE on, give this node "
                  "--curve-secret (its NAME.key_secret) and --curve-server (the coordinator's "
                  ".key)",
                  self->endpoint);
}

static void
s_reconnect (cgq_link_t *self, int64_t now)
{
    self->retries++;
    if (!self->ever_welcomed)
        // Never answered: most often nothing listens there.
        cgq_warn ("no answer from coordinator %s for %" PRId64 " ms (is it running, and is "
                  "--coordinator its nodes endpoint?); retrying (try %u)",
                  self->endpoint, now - self->last_rx_ms, self->retries + 1);
    else
        cgq_warn ("no message from coordinator %s for %" PRId64 " ms; reconnecting",
                  self->endpoint, now - self->last_rx_ms);
    if (self->sock && !self->welcomed && !self->hinted) {
        s_hint_never_welcomed (self);
        self->hinted = true;
    }
    if (self->sock)
        zmq_close (self->sock);
    self->sock = NULL;
    self->welcomed = false;
    if (self->neps > 1) {
        self->epi = (self->epi + 1) % self->neps;
        self->endpoint = self->eps[self->epi];
        cgq_info ("trying coordinator %s (%zu of %zu)", self->endpoint, self->epi + 1, self->neps);
    }
    if (s_open (self) < 0) {
        // The endpoint worked before; try again after another silence period.
        self->last_rx_ms = now;
        return;
    }
    s_send_hello (self, now);
}

void
cgq_link_tick (cgq_link_t *self, int64_t now)
{
    if (!self->sock || now - self->last_rx_ms >= self->heartbeat_ms * CGQ_LINK_DEAD_AFTER) {
        s_reconnect (self, now);
        return;
    }
    if (!self->welcomed) {
        if (now - self->last_hello_ms >= CGQ_LINK_HELLO_MS)
            s_send_hello (self, now);
        return;
    }
    if (now - self->last_hb_ms >= self->heartbeat_ms)
        s_send_heartbeat (self, now);
    // Oldest first; each re-send moves it to the tail, so stop at the first
    // that is not due (or at one already sent this round).
    for (size_t k = self->n_unacked; k > 0 && self->uhead; k--) {
        s_unacked_t *u = self->uhead;
        if (now - u->sent_ms < CGQ_LINK_RESEND_MS)
            break;
        s_send_result (self, u, now);
    }
}

static int64_t
s_min (int64_t a, int64_t b)
{
    return a < b ? a : b;
}

int64_t
cgq_link_deadline (const cgq_link_t *self)
{
    int64_t d = self->last_rx_ms + self->heartbeat_ms * CGQ_LINK_DEAD_AFTER;
    if (!self->welcomed)
        return s_min (d, self->last_hello_ms + CGQ_LINK_HELLO_MS);
    d = s_min (d, self->last_hb_ms + self->heartbeat_ms);
    if (self->uhead)
        d = s_min (d, self->uhead->sent_ms + CGQ_LINK_RESEND_MS);
    return d;
}

void
cgq_link_progress (cgq_link_t *self, const Cgq__TaskRef *task, const char *report_json,
                   uint64_t seq)
{
    // Leave room for the envelope: the coordinator drops frames over max_frame.
    if (strlen (report_json) + 256 > self->max_frame) {
        cgq_twarn (task->job, task->trial, task->attempt,
                   "report %" PRIu64 " is larger than the coordinator's frame limit "
                   "(%u bytes); not sent",
                   seq, self->max_frame);
        return;
    }
    Cgq__Progress p = CGQ__PROGRESS__INIT;
    p.task = (Cgq__TaskRef *) task;
    p.report_json = (char *) report_json;
    p.seq = seq;
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_PROGRESS;
    env.progress = &p;
    s_send (self, &env);
}

void
cgq_link_checkpoint (cgq_link_t *self, const Cgq__Checkpoint *ckpt)
{
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_CHECKPOINT;
    env.checkpoint = (Cgq__Checkpoint *) ckpt;
    s_send (self, &env);
}

void
cgq_link_hold (cgq_link_t *self)
{
    self->holding = true;
}

void
cgq_link_release (cgq_link_t *self)
{
    self->holding = false;
    size_t n = self->nheld;
    self->nheld = 0;
    for (size_t i = 0; i < n; i++)
        self->held[i]->held = false;
    if (!n || !self->welcomed)
        return; // not welcomed: they go after the Welcome
    if (n == 1 || !self->peer_batches) {
        int64_t now = cgq_now_ms ();
        for (size_t i = 0; i < n; i++)
            s_send_result (self, self->held[i], now);
        return;
    }
    // As many per ResultBatch as fit in half a frame (each fits alone: s_fit).
    Cgq__Result **rs = cgq_xcalloc (n, sizeof *rs);
    for (size_t i = 0; i < n;) {
        size_t k = 0, bytes = 0;
        while (i + k < n) {
            size_t size = s_result_frame (self->held[i + k]->result);
            if (k > 0 && bytes + size > self->max_frame / 2)
                break;
            bytes += size;
            rs[k] = self->held[i + k]->result;
            k++;
        }
        Cgq__ResultBatch b = CGQ__RESULT_BATCH__INIT;
        b.n_results = k;
        b.results = rs;
        cgq_env_t env = CGQ__ENVELOPE__INIT;
        env.body_case = CGQ__ENVELOPE__BODY_RESULT_BATCH;
        env.result_batch = &b;
        s_send (self, &env);
        i += k;
    }
    free (rs);
}

void
cgq_link_result (cgq_link_t *self, Cgq__Result *result)
{
    s_fit (self, result);
    // Built-in tasks finish by the thousand per second: only processes that
    // ran, and failures, are worth a line at info.
    bool quiet = result->status == CGQ__TASK_STATUS__TASK_SUCCEEDED
                 && (!result->trial_dir || !result->trial_dir[0]);
    cgq_tlog (quiet ? CGQ_LOG_DEBUG : CGQ_LOG_INFO, result->task->job, result->task->trial,
              result->task->attempt, "%s%s%s",
              protobuf_c_enum_descriptor_get_value (&cgq__task_status__descriptor,
                                                    (int) result->status)
                  ->name,
              result->error[0] ? ": " : "", result->error);
    s_unacked_t *u = cgq_xcalloc (1, sizeof *u);
    u->result = result;
    cgq_wire_task_str (u->key, result->task);
    s_unacked_t *old = zhashx_lookup (self->uindex, u->key);
    if (old)
        s_unacked_drop (self, old); // the same task's newer result replaces it
    zhashx_insert (self->uindex, u->key, u);
    self->n_unacked++;
    u->prev = self->utail;
    if (self->utail)
        self->utail->next = u;
    else
        self->uhead = u;
    self->utail = u;
    u->sent_ms = cgq_now_ms ();
    if (self->welcomed)
        s_send_result (self, u, u->sent_ms);
}

bool
cgq_link_has_result (cgq_link_t *self, const Cgq__TaskRef *task, bool resend)
{
    char key[80];
    s_unacked_t *u = zhashx_lookup (self->uindex, cgq_wire_task_str (key, task));
    if (!u)
        return false;
    if (resend && self->welcomed)
        s_send_result (self, u, cgq_now_ms ());
    return true;
}

size_t
cgq_link_unacked (const cgq_link_t *self)
{
    return self->n_unacked;
}

bool
cgq_link_welcomed (const cgq_link_t *self)
{
    return self->welcomed;
}

void
cgq_link_bye (cgq_link_t *self, const char *reason)
{
    // Without a Welcome nobody may be listening, and lingering would only
    // delay the exit.
    if (!self->sock || !self->welcomed)
        return;
    Cgq__Bye bye = CGQ__BYE__INIT;
    bye.reason = (char *) (reason ? reason : "");
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_BYE;
    env.bye = &bye;
    s_send (self, &env);
    self->bye = true;
}

void
cgq_link_full (cgq_link_t *self, const char *why)
{
    if (why ? self->full && !strcmp (self->full, why) : !self->full)
        return;
    free (self->full);
    self->full = why ? cgq_xstrdup (why) : NULL;
    if (self->welcomed)
        s_send_heartbeat (self, cgq_now_ms ());
}

void
cgq_link_drain (cgq_link_t *self)
{
    self->draining = true;
    if (self->welcomed)
        s_send_heartbeat (self, cgq_now_ms ());
}

size_t
cgq_link_quarantined (const cgq_link_t *self, const char *const **ids)
{
    *ids = (const char *const *) self->quar;
    return self->nquar;
}

void
cgq_link_recovered (cgq_link_t *self, const char *id)
{
    for (size_t i = 0; i < self->nrec; i++)
        if (!strcmp (self->rec[i], id))
            return;
    self->rec = cgq_xrealloc (self->rec, (self->nrec + 1) * sizeof *self->rec);
    self->rec[self->nrec++] = cgq_xstrdup (id);
    if (self->welcomed)
        s_send_heartbeat (self, cgq_now_ms ()); // now, not a heartbeat later
}
