#include "wire.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <zmq.h>

#include "util.h"

uint64_t cgq_wire_dropped = 0;

int
cgq_wire_encode (cgq_env_t *env, uint8_t **data, size_t *len)
{
    if (env->body_case == CGQ__ENVELOPE__BODY__NOT_SET)
        return -1;
    env->version = CGQ_WIRE_VERSION;
    size_t n = cgq__envelope__get_packed_size (env);
    uint8_t *buf = cgq_xmalloc (n);
    cgq__envelope__pack (env, buf);
    *data = buf;
    *len = n;
    return 0;
}

cgq_env_t *
cgq_wire_decode (const uint8_t *data, size_t len, size_t max_len)
{
    if (max_len == 0)
        max_len = CGQ_WIRE_MAX_FRAME_DEFAULT;
    if (len > max_len) {
        cgq_wire_dropped++;
        return NULL;
    }
    cgq_env_t *env = cgq__envelope__unpack (NULL, len, data);
    if (!env) {
        cgq_wire_dropped++;
        return NULL;
    }
    if (env->version != CGQ_WIRE_VERSION || env->body_case == CGQ__ENVELOPE__BODY__NOT_SET) {
        cgq__envelope__free_unpacked (env, NULL);
        cgq_wire_dropped++;
        return NULL;
    }
    return env;
}

void
cgq_wire_free (cgq_env_t *env)
{
    if (env)
        cgq__envelope__free_unpacked (env, NULL);
}

// Messages up to this size are packed on the stack: heartbeats, acks and
// other small messages, sent by the thousand a second, then cost no malloc.
#define S_SMALL 256

// s_pack packs env into small when it fits, else into a new buffer (*heap).
static int
s_pack (cgq_env_t *env, uint8_t *small, uint8_t **data, size_t *len, uint8_t **heap)
{
    *heap = NULL;
    if (env->body_case == CGQ__ENVELOPE__BODY__NOT_SET) {
        errno = EINVAL;
        return -1;
    }
    env->version = CGQ_WIRE_VERSION;
    size_t n = cgq__envelope__get_packed_size (env);
    *data = n <= S_SMALL ? small : (*heap = cgq_xmalloc (n));
    *len = cgq__envelope__pack (env, *data);
    return 0;
}

int
cgq_wire_send (void *sock, cgq_env_t *env, int flags)
{
    uint8_t small[S_SMALL], *data, *heap;
    size_t len;
    if (s_pack (env, small, &data, &len, &heap) < 0)
        return -1;
    int rc = zmq_send (sock, data, len, flags);
    free (heap);
    return rc < 0 ? -1 : 0;
}

int
cgq_wire_send_to (void *router, const void *rid, size_t rid_len, int empty_delim,
                  cgq_env_t *env)
{
    uint8_t small[S_SMALL], *data, *heap;
    size_t len;
    if (s_pack (env, small, &data, &len, &heap) < 0)
        return -1;
    int rc = zmq_send (router, rid, rid_len, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    if (rc >= 0 && empty_delim)
        rc = zmq_send (router, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    if (rc >= 0)
        rc = zmq_send (router, data, len, ZMQ_DONTWAIT);
    free (heap);
    return rc < 0 ? -1 : 0;
}

const char *
cgq_wire_body_name (const cgq_env_t *env)
{
    switch (env->body_case) {
    case CGQ__ENVELOPE__BODY_HELLO: return "hello";
    case CGQ__ENVELOPE__BODY_WELCOME: return "welcome";
    case CGQ__ENVELOPE__BODY_HEARTBEAT: return "heartbeat";
    case CGQ__ENVELOPE__BODY_ASSIGN: return "assign";
    case CGQ__ENVELOPE__BODY_ASSIGN_BATCH: return "assign_batch";
    case CGQ__ENVELOPE__BODY_RESULT_BATCH: return "result_batch";
    case CGQ__ENVELOPE__BODY_PROGRESS: return "progress";
    case CGQ__ENVELOPE__BODY_RESULT: return "result";
    case CGQ__ENVELOPE__BODY_ACK: return "ack";
    case CGQ__ENVELOPE__BODY_STOP: return "stop";
    case CGQ__ENVELOPE__BODY_BYE: return "bye";
    case CGQ__ENVELOPE__BODY_SUBMIT_JOB: return "submit_job";
    case CGQ__ENVELOPE__BODY_SUBMIT_REPLY: return "submit_reply";
    case CGQ__ENVELOPE__BODY_CANCEL_JOB: return "cancel_job";
    case CGQ__ENVELOPE__BODY_PAUSE_JOB: return "pause_job";
    case CGQ__ENVELOPE__BODY_REPLY: return "reply";
    case CGQ__ENVELOPE__BODY_PING: return "ping";
    case CGQ__ENVELOPE__BODY_ENABLE_DEVICE: return "enable_device";
    case CGQ__ENVELOPE__BODY_SUGGEST: return "suggest";
    case CGQ__ENVELOPE__BODY_UPDATE_JOB: return "update_job";
    case CGQ__ENVELOPE__BODY_CHECKPOINT: return "checkpoint";
    case CGQ__ENVELOPE__BODY_CHECKPOINT_ACK: return "checkpoint_ack";
    default: return "none";
    }
}

char *
cgq_wire_task_str (char *buf, const Cgq__TaskRef *t)
{
    if (!t)
        snprintf (buf, 80, "?");
    else
        snprintf (buf, 80, "%" PRIu64 ".%" PRIu64 ".%u#%u", t->job, t->trial, t->stage, t->attempt);
    return buf;
}
