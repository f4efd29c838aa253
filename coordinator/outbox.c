// outbox: the queue of messages sent after the Redis flush.
#include "outbox.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "log.h"
#include "nodes.h"

// s_append puts o at the end of the list head..tail.
static void
s_append (out_t **head, out_t **tail, out_t *o)
{
    o->next = NULL;
    if (*tail)
        (*tail)->next = o;
    else
        *head = o;
    *tail = o;
}

void
outbox_push (coord_t *c, void *sock, const char *rid, size_t rid_len, bool delim, cgq_env_t *env)
{
    out_t *o = cgq_xcalloc (1, sizeof *o);
    if (cgq_wire_encode (env, &o->data, &o->len) < 0) {
        cgq_error ("cannot encode a %s message for %.*s", cgq_wire_body_name (env), (int) rid_len,
                   rid);
        free (o);
        return;
    }
    o->sock = sock;
    o->rid = cgq_xstrndup (rid, rid_len);
    o->rid_len = rid_len;
    o->delim = delim;
    s_append (&c->out_head, &c->out_tail, o);
}

void
outbox_stop (coord_t *c, const char *node, const Cgq__TaskRef *task, const char *reason)
{
    Cgq__Stop s = CGQ__STOP__INIT;
    s.task = (Cgq__TaskRef *) task;
    s.reason = (char *) reason;
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_STOP;
    env.stop = &s;
    outbox_push (c, c->nodes_sock, node, strlen (node), false, &env);
}

// One Ack carries at most this many tasks (a few dozen KiB).
#define ACK_MAX 4096

void
outbox_ack (coord_t *c, const char *node, const Cgq__TaskRef *task)
{
    // One Ack per node per batch, with every task of it: a loop turn that
    // applies hundreds of a node's results sends it one message, not hundreds.
    if (!c->acks_open)
        c->acks_open = zhashx_new ();
    out_t *o = zhashx_lookup (c->acks_open, node);
    if (!o) {
        o = cgq_xcalloc (1, sizeof *o);
        o->sock = c->nodes_sock;
        o->rid_len = strlen (node);
        o->rid = cgq_xstrndup (node, o->rid_len);
        o->durable = c->cfg.durable_ms > 0 || c->cfg.redis_replicas > 0;
        s_append (&c->out_head, &c->out_tail, o);
        zhashx_insert (c->acks_open, node, o);
    }
    if (o->nacks == o->capacks) {
        o->capacks = o->capacks ? 2 * o->capacks : 16;
        o->acks = cgq_xrealloc (o->acks, o->capacks * sizeof *o->acks);
    }
    // The fields only: a received TaskRef's unknown fields belong to its
    // message, freed before this Ack is encoded.
    Cgq__TaskRef *r = &o->acks[o->nacks++];
    *r = (Cgq__TaskRef) CGQ__TASK_REF__INIT;
    r->job = task->job;
    r->trial = task->trial;
    r->stage = task->stage;
    r->attempt = task->attempt;
    if (o->nacks == ACK_MAX)
        zhashx_delete (c->acks_open, node); // the next one starts another
}

// s_close_ack encodes an open Ack's tasks into o->data.
static void
s_close_ack (out_t *o)
{
    Cgq__TaskRef **tasks = cgq_xcalloc (o->nacks, sizeof *tasks);
    for (size_t i = 0; i < o->nacks; i++)
        tasks[i] = &o->acks[i];
    Cgq__Ack a = CGQ__ACK__INIT;
    a.n_tasks = o->nacks;
    a.tasks = tasks;
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_ACK;
    env.ack = &a;
    if (cgq_wire_encode (&env, &o->data, &o->len) < 0)
        cgq_error ("cannot encode an Ack for %s", o->rid); // cannot happen: the body is set
    free (tasks);
    free (o->acks);
    o->acks = NULL;
    o->nacks = o->capacks = 0;
}

void
outbox_checkpoint_ack (coord_t *c, const char *node, const Cgq__TaskRef *task, uint64_t n,
                       bool recorded, const char *reason, char **keep, size_t nkeep)
{
    Cgq__TaskRef ref = CGQ__TASK_REF__INIT;
    ref.job = task->job;
    ref.trial = task->trial;
    ref.stage = task->stage;
    ref.attempt = task->attempt;
    Cgq__CheckpointAck a = CGQ__CHECKPOINT_ACK__INIT;
    a.task = &ref;
    a.n = n;
    a.recorded = recorded;
    a.reason = (char *) (reason ? reason : "");
    a.keep = keep;
    a.n_keep = nkeep;
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_CHECKPOINT_ACK;
    env.checkpoint_ack = &a;
    out_t *tail = c->out_tail;
    outbox_push (c, c->nodes_sock, node, strlen (node), false, &env);
    if (c->out_tail != tail)
        c->out_tail->durable = c->cfg.durable_ms > 0 || c->cfg.redis_replicas > 0;
}

void
outbox_reply (coord_t *c, const char *rid, size_t rid_len, int code, const char *msg, bool now)
{
    Cgq__Reply r = CGQ__REPLY__INIT;
    r.code = code;
    r.message = (char *) msg;
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_REPLY;
    env.reply = &r;
    if (now && c->ctl_sock)
        cgq_wire_send_to (c->ctl_sock, rid, rid_len, 1, &env);
    else
        outbox_push (c, c->ctl_sock, rid, rid_len, true, &env);
}

static void
s_free (out_t *o)
{
    free (o->acks);
    free (o->rid);
    free (o->data);
    free (o);
}

static void
s_free_list (out_t *o)
{
    while (o) {
        out_t *next = o->next;
        s_free (o);
        o = next;
    }
}

// s_send_one sends o; n is its node when o is an Assign (the caller looked
// it up), else NULL.
static void
s_send_one (coord_t *c, out_t *o, node_t *n)
{
    // From here its node may see it: until then a heartbeat that does not
    // list its task proves nothing (session.c, s_missing).
    if (o->assign_seq && n && n->assign_out < o->assign_seq)
        n->assign_out = o->assign_seq;
    int rc = o->sock ? zmq_send (o->sock, o->rid, o->rid_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) : -1;
    if (rc >= 0 && o->delim)
        rc = zmq_send (o->sock, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    if (rc >= 0)
        rc = zmq_send (o->sock, o->data, o->len, ZMQ_DONTWAIT);
    if (rc < 0)
        cgq_debug ("send to %s failed: %s", o->rid, o->sock ? zmq_strerror (errno) : "no socket");
    if (c->on_sent)
        c->on_sent (c, o);
}

void
outbox_seal (coord_t *c)
{
    if (c->acks_open)
        zhashx_purge (c->acks_open); // later results get Acks of their own
    c->out_sealed = c->out_tail;
}

// s_send_upto sends the queued messages up to last (inclusive; NULL: none)
// and keeps the rest.
void
outbox_send_due (coord_t *c, int64_t now)
{
    if (c->redis_retry_ms)
        return;
    uint64_t confirmed = cgq_store_confirmed_seq (c->store);
    while (c->late_head && c->late_head->not_before_ms <= now
           && c->late_head->batch_seq <= confirmed) {
        out_t *o = c->late_head;
        c->late_head = o->next;
        if (!c->late_head)
            c->late_tail = NULL;
        s_send_one (c, o, NULL); // Acks
        s_free (o);
    }
}

out_t *
outbox_nodes_first (const coord_t *c, out_t *list)
{
    out_t *head = NULL, *tail = NULL, *later = NULL, *later_tail = NULL;
    while (list) {
        out_t *next = list->next;
        if (list->sock == c->nodes_sock)
            s_append (&head, &tail, list);
        else
            s_append (&later, &later_tail, list);
        list = next;
    }
    if (tail)
        tail->next = later;
    return head ? head : later;
}

// Protocol Buffers framing, enough to join encoded Assigns into an
// AssignBatch without decoding them (schemas/cgq.proto).
static size_t
s_varint_put (uint8_t *p, uint64_t v)
{
    size_t n = 0;
    do {
        p[n++] = (uint8_t) ((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    return n;
}

static bool
s_varint_get (const uint8_t *p, size_t len, size_t *at, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; *at < len && shift < 64; shift += 7) {
        uint8_t b = p[(*at)++];
        *v |= (uint64_t) (b & 0x7f) << shift;
        if (!(b & 0x80))
            return true;
    }
    return false;
}

// s_assign_body finds the Assign inside an encoded Envelope (version, then
// field 13), as cgq_wire_encode writes it: false when it is not laid out so.
static bool
s_assign_body (const out_t *o, const uint8_t **body, size_t *len)
{
    size_t at = 0;
    uint64_t v;
    if (at < o->len && o->data[at] == 0x08) { // 1: version, varint
        at++;
        if (!s_varint_get (o->data, o->len, &at, &v))
            return false;
    }
    if (at >= o->len || o->data[at++] != ((13 << 3) | 2)) // 13: assign, bytes
        return false;
    if (!s_varint_get (o->data, o->len, &at, &v) || v != o->len - at)
        return false;
    *body = o->data + at;
    *len = (size_t) v;
    return true;
}

// Room for an AssignBatch envelope's header (version, tag and length).
#define S_HEAD 24
// An AssignBatch stays under this, far below what a node reads (4 MiB).
#define S_BATCH_MAX (1u << 20)

// s_batch_flush sends the Assigns waiting for node n: one alone as it is,
// more as one AssignBatch, each in the order queued.
static void
s_batch_flush (coord_t *c, node_t *n)
{
    out_t *o = n->ab_head;
    n->ab_head = n->ab_tail = NULL;
    size_t bytes = n->ab_bytes;
    n->ab_bytes = 0;
    if (!o)
        return;
    if (o->next) {
        // Envelope: 1 = version, 19 = assign_batch { 1 = assign (repeated) }.
        uint8_t *buf = cgq_xmalloc (S_HEAD + bytes), *p = buf + S_HEAD;
        uint64_t seq = 0;
        bool ok = true;
        for (out_t *x = o; x && ok; x = x->next) {
            const uint8_t *body;
            size_t len;
            ok = s_assign_body (x, &body, &len);
            if (ok) {
                *p++ = (1 << 3) | 2;
                p += s_varint_put (p, len);
                memcpy (p, body, len);
                p += len;
                if (x->assign_seq > seq)
                    seq = x->assign_seq;
            }
        }
        if (ok) {
            size_t inner = (size_t) (p - (buf + S_HEAD));
            uint8_t head[S_HEAD];
            size_t h = 0;
            head[h++] = 0x08;
            h += s_varint_put (head + h, CGQ_WIRE_VERSION);
            h += s_varint_put (head + h, (19 << 3) | 2);
            h += s_varint_put (head + h, inner);
            memcpy (buf + S_HEAD - h, head, h);
            out_t batch = {.sock = o->sock, .rid = o->rid, .rid_len = o->rid_len,
                           .data = buf + S_HEAD - h, .len = inner + h, .assign_seq = seq};
            s_send_one (c, &batch, n);
            free (buf);
            s_free_list (o);
            return;
        }
        free (buf); // not laid out as expected: each goes alone
    }
    while (o) {
        out_t *next = o->next;
        s_send_one (c, o, n);
        s_free (o);
        o = next;
    }
}

// s_flush_waiting sends the Assigns held for each node on the list, each
// node's as one AssignBatch, and empties the list.
static void
s_flush_waiting (coord_t *c, node_t **waiting)
{
    for (node_t *n = *waiting; n; n = n->ab_next) {
        s_batch_flush (c, n);
        n->ab_listed = false;
    }
    *waiting = NULL;
}

static void
s_send_upto (coord_t *c, out_t *last)
{
    int64_t now = cgq_now_ms ();
    // Acks of earlier batches that are durable by now go first.
    outbox_send_due (c, now);
    if (!last)
        return;
    if (c->acks_open && last == c->out_tail)
        zhashx_purge (c->acks_open); // this batch's Acks are complete
    out_t *rest = last->next;
    last->next = NULL;
    out_t *o = outbox_nodes_first (c, c->out_head);
    // The Assigns for a node that reads AssignBatch wait, in order, until
    // another kind of message goes to it or the nodes' part of the list
    // ends, and go as one: before the replies to clients, whose wake-up
    // would otherwise run ahead of a trial's start (~40 us a dispatch here,
    // 150 when the client took the I/O thread's CPU).
    node_t *waiting = NULL;
    while (o) {
        out_t *next = o->next;
        if (waiting && o->sock != c->nodes_sock)
            s_flush_waiting (c, &waiting);
        if (o->acks)
            s_close_ack (o);
        if (o->durable) {
            o->not_before_ms = now + c->cfg.durable_ms;
            o->batch_seq = cgq_store_applied_seq (c->store);
            s_append (&c->late_head, &c->late_tail, o);
            o = next;
            continue;
        }
        // The node: for an Assign, and for another message to a node that
        // may have Assigns waiting.
        node_t *n = o->sock == c->nodes_sock && (o->assign_seq || waiting)
                        ? nodes_find (c, o->rid)
                        : NULL;
        if (n && n->batches && o->assign_seq) {
            if (!n->ab_listed) {
                n->ab_listed = true;
                n->ab_next = waiting;
                waiting = n;
            }
            if (n->ab_head && n->ab_bytes + o->len + 12 > S_BATCH_MAX)
                s_batch_flush (c, n); // a node reads frames of 4 MiB at most
            s_append (&n->ab_head, &n->ab_tail, o);
            n->ab_bytes += o->len + 12;
        }
        else {
            if (n && n->ab_head)
                s_batch_flush (c, n);
            s_send_one (c, o, n);
            s_free (o);
        }
        o = next;
    }
    s_flush_waiting (c, &waiting);
    c->out_head = rest;
    if (!rest)
        c->out_tail = NULL;
    if (c->out_sealed == last || !rest)
        c->out_sealed = NULL;
}

void
outbox_send (coord_t *c)
{
    s_send_upto (c, c->out_tail);
    c->out_sealed = NULL;
}

void
outbox_send_sealed (coord_t *c)
{
    s_send_upto (c, c->out_sealed);
    c->out_sealed = NULL;
}

void
outbox_rehold (coord_t *c, int64_t until_ms)
{
    for (out_t *o = c->late_head; o; o = o->next)
        if (o->not_before_ms < until_ms)
            o->not_before_ms = until_ms;
}

int64_t
outbox_next_due (const coord_t *c)
{
    if (!c->late_head || c->redis_retry_ms)
        return 0;
    if (c->late_head->batch_seq > cgq_store_confirmed_seq (c->store))
        return c->confirm_next_ms; // outbox_confirm_tick
    return c->late_head->not_before_ms;
}

void
outbox_confirm_tick (coord_t *c, int64_t now)
{
    if (!c->late_head || c->redis_retry_ms || now < c->confirm_next_ms
        || c->late_head->batch_seq <= cgq_store_confirmed_seq (c->store))
        return;
    c->confirm_next_ms = now + 200;
    // Nothing else to write: a batch of its own (its marker, and the WAIT
    // behind it) asks the replicas again.
    if (!cgq_store_pending (c->store) && !cgq_store_flying (c->store))
        cgq_store_cmd (c->store, "PING");
}

void
outbox_free (coord_t *c)
{
    zhashx_destroy (&c->acks_open);
    c->out_sealed = NULL;
    s_free_list (c->out_head);
    s_free_list (c->late_head);
    c->out_head = c->out_tail = NULL;
    c->late_head = c->late_tail = NULL;
}

size_t
outbox_len (const coord_t *c)
{
    size_t n = 0;
    for (const out_t *o = c->out_head; o; o = o->next)
        n++;
    return n;
}

size_t
outbox_held (const coord_t *c)
{
    size_t n = 0;
    for (const out_t *o = c->late_head; o; o = o->next)
        n++;
    return n;
}
