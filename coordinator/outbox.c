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
        o->durable = c->cfg.durable_ms > 0;
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
s_send_one (coord_t *c, out_t *o)
{
    if (o->assign_seq) {
        // From here its node may see it: until then a heartbeat that does
        // not list its task proves nothing (session.c, s_missing).
        node_t *n = nodes_find (c, o->rid);
        if (n && n->assign_out < o->assign_seq)
            n->assign_out = o->assign_seq;
    }
    int rc = o->sock ? zmq_send (o->sock, o->rid, o->rid_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) : -1;
    if (rc >= 0 && o->delim)
        rc = zmq_send (o->sock, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    if (rc >= 0)
        rc = zmq_send (o->sock, o->data, o->len, ZMQ_DONTWAIT);
    if (rc < 0)
        cgq_debug ("send to %s failed: %s", o->rid, o->sock ? zmq_strerror (errno) : "no socket");
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
    while (c->late_head && c->late_head->not_before_ms <= now) {
        out_t *o = c->late_head;
        c->late_head = o->next;
        if (!c->late_head)
            c->late_tail = NULL;
        s_send_one (c, o);
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
    while (o) {
        out_t *next = o->next;
        if (o->acks)
            s_close_ack (o);
        if (o->durable) {
            o->not_before_ms = now + c->cfg.durable_ms;
            s_append (&c->late_head, &c->late_tail, o);
        }
        else {
            s_send_one (c, o);
            s_free (o);
        }
        o = next;
    }
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
    return c->late_head && !c->redis_retry_ms ? c->late_head->not_before_ms : 0;
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
