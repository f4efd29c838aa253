// sse: /api/events as server-sent events (see sse.h).
#include "sse.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/socket.h>

#include "keyspace.h"
#include "log.h"
#include "store.h"
#include "util.h"

// XREAD's block: also how often suspended clients are looked at (heartbeats).
#define S_BLOCK_MS 1000
#define S_REDIS_TIMEOUT_MS 5000
// An event's field past this many bytes is cut (a long error text), and an
// event line past S_MAX_LINE keeps only its id, type, job and trial: a line
// always fits one of libmicrohttpd's blocks (S_BLOCK).
#define S_MAX_FIELD 1024
#define S_MAX_LINE 8192
#define S_BLOCK 16384

typedef struct s_client_s {
    struct s_client_s *next;
    sse_t *sse;
    struct MHD_Connection *conn;
    uint64_t job; // with has_job: only this job's events
    bool has_job;
    uint64_t seq; // the next event it gets
    bool suspended;
    bool started; // sent its opening lines
    double last_write;
} s_client_t;

typedef struct {
    uint64_t job;
    bool has_job;
    char *line; // "id: ...\ndata: {...}\n\n"
} s_event_t;

struct sse_s {
    pthread_mutex_t mu;
    pthread_t thread;
    bool running, quiet;
    char *redis;
    s_event_t ring[SSE_RING];
    uint64_t head; // events seen so far; ring[head % SSE_RING] is the next slot
    s_client_t *clients;
    unsigned nclients;
};

static double
s_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static bool
s_u64 (const char *s, uint64_t *out)
{
    if (!s || !*s || strlen (s) > 19)
        return false;
    for (const char *p = s; *p; p++)
        if (!isdigit ((unsigned char)*p))
            return false;
    *out = strtoull (s, NULL, 10);
    return true;
}

// --- the events thread --------------------------------------------------------------

// s_add keeps one stream entry (id, fields) as an event line (under mu).
static void
s_add (sse_t *self, const redisReply *id, const redisReply *f)
{
    json_t *o = json_object ();
    json_object_set_new (o, "id", json_string (id->str));
    s_event_t ev = {0};
    bool cut = false;
    for (size_t k = 0; k + 1 < f->elements; k += 2) {
        if (f->element[k]->type != REDIS_REPLY_STRING ||
            f->element[k + 1]->type != REDIS_REPLY_STRING)
            continue;
        const char *name = f->element[k]->str, *val = f->element[k + 1]->str;
        size_t len = f->element[k + 1]->len;
        if (len > S_MAX_FIELD) { // cut, on a UTF-8 character's start
            len = S_MAX_FIELD;
            while (len > 0 && ((unsigned char)val[len] & 0xC0) == 0x80)
                len--;
            cut = true;
        }
        json_t *v = json_stringn (val, len);
        json_object_set_new (o, name, v ? v : json_string ("?"));
        if (!strcmp (name, "job"))
            ev.has_job = s_u64 (val, &ev.job);
    }
    char *data = json_dumps (o, JSON_COMPACT | JSON_ENSURE_ASCII);
    if (data && strlen (data) > S_MAX_LINE - 128) { // many long fields: the few that matter
        free (data);
        json_t *few = json_object ();
        for (const char *const *n = (const char *const[]){"id", "type", "job", "trial", NULL}; *n;
             n++)
            if (json_object_get (o, *n))
                json_object_set (few, *n, json_object_get (o, *n));
        json_decref (o);
        o = few;
        cut = true;
        data = json_dumps (o, JSON_COMPACT | JSON_ENSURE_ASCII);
    }
    if (cut && data) {
        free (data);
        json_object_set_new (o, "truncated", json_true ());
        data = json_dumps (o, JSON_COMPACT | JSON_ENSURE_ASCII);
    }
    json_decref (o);
    if (!data || strlen (data) > S_MAX_LINE - 128) {
        free (data);
        return;
    }
    ev.line = cgq_xasprintf ("id: %s\ndata: %s\n\n", id->str, data);
    free (data);
    s_event_t *slot = &self->ring[self->head % SSE_RING];
    free (slot->line);
    *slot = ev;
    self->head++;
}

// s_wake resumes every suspended client (under mu).
static void
s_wake (sse_t *self)
{
    for (s_client_t *c = self->clients; c; c = c->next)
        if (c->suspended) {
            c->suspended = false;
            MHD_resume_connection (c->conn);
        }
}

static void *
s_thread (void *arg)
{
    sse_t *self = arg;
    char err[512], last[64] = "";
    cgq_store_t *st = NULL;
    bool running = true;
    while (running) {
        if (!st)
            st = cgq_store_new (self->redis, S_REDIS_TIMEOUT_MS, err, sizeof err);
        redisReply *r = NULL;
        if (st && !*last) { // start after the newest event: only what happens from now
            r = cgq_store_command (st, "XREVRANGE %s + - COUNT 1", CGQ_KEY_EVENTS);
            if (r && r->type == REDIS_REPLY_ARRAY) {
                if (r->elements && r->element[0]->type == REDIS_REPLY_ARRAY &&
                    r->element[0]->elements > 0 &&
                    r->element[0]->element[0]->type == REDIS_REPLY_STRING)
                    snprintf (last, sizeof last, "%s", r->element[0]->element[0]->str);
                else
                    snprintf (last, sizeof last, "0-0");
            }
            if (r)
                freeReplyObject (r);
            r = NULL;
        }
        if (st && *last)
            r = cgq_store_command (st, "XREAD COUNT 256 BLOCK %d STREAMS %s %s", S_BLOCK_MS,
                                   CGQ_KEY_EVENTS, last);
        pthread_mutex_lock (&self->mu);
        if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 1) {
            const redisReply *s = r->element[0]; // [name, [[id, [f, v...]], ...]]
            if (s->type == REDIS_REPLY_ARRAY && s->elements == 2 &&
                s->element[1]->type == REDIS_REPLY_ARRAY)
                for (size_t i = 0; i < s->element[1]->elements; i++) {
                    const redisReply *e = s->element[1]->element[i];
                    if (e->type != REDIS_REPLY_ARRAY || e->elements < 2 ||
                        e->element[0]->type != REDIS_REPLY_STRING ||
                        e->element[1]->type != REDIS_REPLY_ARRAY)
                        continue;
                    snprintf (last, sizeof last, "%s", e->element[0]->str);
                    s_add (self, e->element[0], e->element[1]);
                }
        }
        s_wake (self); // news, or a heartbeat's chance
        running = self->running;
        pthread_mutex_unlock (&self->mu);
        bool failed = !r || r->type == REDIS_REPLY_ERROR;
        if (r)
            freeReplyObject (r);
        if (failed && running) { // Redis away: try again in a second
            if (st)
                cgq_store_destroy (&st);
            usleep (S_BLOCK_MS * 1000);
        }
    }
    if (st)
        cgq_store_destroy (&st);
    return NULL;
}

sse_t *
sse_start (const char *redis)
{
    sse_t *self = cgq_xcalloc (1, sizeof *self);
    pthread_mutex_init (&self->mu, NULL);
    self->redis = cgq_xstrdup (redis);
    self->running = true;
    if (pthread_create (&self->thread, NULL, s_thread, self) != 0) {
        pthread_mutex_destroy (&self->mu);
        free (self->redis);
        free (self);
        return NULL;
    }
    return self;
}

void
sse_quiesce (sse_t *self)
{
    if (!self)
        return;
    pthread_mutex_lock (&self->mu);
    self->quiet = true;
    self->running = false;
    s_wake (self);
    pthread_mutex_unlock (&self->mu);
}

void
sse_stop (sse_t **self_p)
{
    sse_t *self = *self_p;
    if (!self)
        return;
    sse_quiesce (self);
    pthread_join (self->thread, NULL);
    for (int i = 0; i < SSE_RING; i++)
        free (self->ring[i].line);
    while (self->clients) { // none once MHD stopped; freed here if any
        s_client_t *c = self->clients;
        self->clients = c->next;
        free (c);
    }
    pthread_mutex_destroy (&self->mu);
    free (self->redis);
    free (self);
    *self_p = NULL;
}

// --- a client's stream ------------------------------------------------------------------

// s_gone: the client closed its end (libmicrohttpd reads nothing while it
// sends a response, so a peer that went would otherwise be seen only when
// a write fails, a heartbeat or two later).
static bool
s_gone (struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info (conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci)
        return false;
    char b;
    ssize_t n = recv (ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

// s_read: libmicrohttpd asks for the next bytes of c's stream. Nothing to
// send: suspend (the events thread resumes it) and return 0.
static ssize_t
s_read (void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    s_client_t *c = cls;
    sse_t *self = c->sse;
    size_t n = 0;
    pthread_mutex_lock (&self->mu);
    if (self->quiet) {
        pthread_mutex_unlock (&self->mu);
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    if (s_gone (c->conn)) {
        pthread_mutex_unlock (&self->mu);
        return MHD_CONTENT_READER_END_WITH_ERROR; // closes it; s_free frees its place
    }
    if (!c->started) { // the browser reconnects 2 s after a drop
        n = (size_t)snprintf (buf, max, "retry: 2000\n: cgq events\n\n");
        c->started = true;
    }
    if (self->head - c->seq > SSE_RING) { // fell behind: say so, go on from now
        const char *reset = "event: reset\ndata: {}\n\n";
        if (n + strlen (reset) <= max) {
            memcpy (buf + n, reset, strlen (reset));
            n += strlen (reset);
            c->seq = self->head;
        }
    }
    while (c->seq < self->head) {
        const s_event_t *ev = &self->ring[c->seq % SSE_RING];
        if (c->has_job && (!ev->has_job || ev->job != c->job)) {
            c->seq++;
            continue;
        }
        size_t len = strlen (ev->line);
        if (n + len > max)
            break; // the rest next call
        memcpy (buf + n, ev->line, len);
        n += len;
        c->seq++;
    }
    double now = s_now ();
    if (n == 0 && now - c->last_write >= SSE_HEARTBEAT_S) {
        n = (size_t)snprintf (buf, max, ": heartbeat\n\n"); // finds a closed socket too
    }
    if (n > 0)
        c->last_write = now;
    else {
        c->suspended = true;
        MHD_suspend_connection (c->conn);
    }
    pthread_mutex_unlock (&self->mu);
    return (ssize_t)n;
}

// s_free: the stream ended (the client went, or the server stops).
static void
s_free (void *cls)
{
    s_client_t *c = cls;
    sse_t *self = c->sse;
    pthread_mutex_lock (&self->mu);
    for (s_client_t **p = &self->clients; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    self->nclients--;
    pthread_mutex_unlock (&self->mu);
    free (c);
}

static enum MHD_Result
s_refuse (struct MHD_Connection *conn, unsigned status, const char *json,
          void (*headers) (struct MHD_Response *r))
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer (strlen (json), (void *)json, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header (r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    headers (r);
    enum MHD_Result rc = MHD_queue_response (conn, status, r);
    MHD_destroy_response (r);
    return rc;
}

enum MHD_Result
sse_answer (sse_t *self, struct MHD_Connection *conn, const char *job,
            void (*headers) (struct MHD_Response *r))
{
    uint64_t jid = 0;
    if (job && !s_u64 (job, &jid))
        return s_refuse (conn, MHD_HTTP_BAD_REQUEST, "{\"error\":\"job must be a job id\"}",
                         headers);
    if (!self)
        return s_refuse (conn, MHD_HTTP_SERVICE_UNAVAILABLE,
                         "{\"error\":\"no Redis connection for events\"}", headers);
    pthread_mutex_lock (&self->mu);
    if (self->nclients >= SSE_MAX_CLIENTS || self->quiet) {
        pthread_mutex_unlock (&self->mu);
        return s_refuse (conn, MHD_HTTP_SERVICE_UNAVAILABLE,
                         "{\"error\":\"too many event streams open; the page polls instead\"}",
                         headers);
    }
    s_client_t *c = cgq_xcalloc (1, sizeof *c);
    c->sse = self;
    c->conn = conn;
    c->job = jid;
    c->has_job = job != NULL;
    c->seq = self->head;
    c->last_write = s_now ();
    c->next = self->clients;
    self->clients = c;
    self->nclients++;
    pthread_mutex_unlock (&self->mu);
    struct MHD_Response *r =
        MHD_create_response_from_callback (MHD_SIZE_UNKNOWN, S_BLOCK, s_read, c, s_free);
    if (!r) {
        s_free (c);
        return MHD_NO;
    }
    MHD_add_response_header (r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    headers (r);
    enum MHD_Result rc = MHD_queue_response (conn, MHD_HTTP_OK, r);
    MHD_destroy_response (r);
    return rc;
}
