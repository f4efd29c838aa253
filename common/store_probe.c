// store_probe: the store's non-blocking probe and the gate that keeps the
// coordinator's loop from blocking on a connect (cgq_store_set_gate).
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "log.h"
#include "store_int.h"

// The probe: a non-blocking connect and one PING, read by whoever polls
// (s_ensure, or the caller's loop through cgq_store_probe_fd). Any answer,
// even an error (NOAUTH, LOADING), shows a live Redis: the blocking connect
// that follows then reports it within a round trip.
#define S_ALIVE_MS 1000 // a probe's answer lets connects through this long
#define S_PROBE_WAIT_MS 200 // how long s_ensure waits for a probe's answer

// The address a probe tries: the URL's, or the master the sentinels named
// last (NULL: none known yet, see cgq_store_probe_poll).
static bool
s_probe_target (const cgq_store_t *self)
{
    return self->is_unix ? self->path != NULL : self->host != NULL;
}

static void
s_probe_end (cgq_store_t *self)
{
    if (self->probe)
        redisFree (self->probe);
    self->probe = NULL;
    self->probe_sent = false;
}

static int
s_probe_fail (cgq_store_t *self, const char *why)
{
    snprintf (self->errstr, sizeof self->errstr, "cannot reach Redis at %s: %s " S_HINT,
              self->url, why);
    s_probe_end (self);
    return -1;
}

static int
s_probe_start (cgq_store_t *self)
{
    if (self->probe)
        return 0;
    redisContext *c = self->is_unix ? redisConnectUnixNonBlock (self->path)
                                    : redisConnectNonBlock (self->host, self->port);
    self->probes++;
    if (!c || c->err) {
        char why[160];
        snprintf (why, sizeof why, "%s", c ? c->errstr : "out of memory");
        if (c)
            redisFree (c);
        return s_probe_fail (self, why);
    }
    self->probe = c;
    self->probe_sent = false;
    self->probe_deadline_ms = cgq_now_ms () + self->timeout_ms;
    if (redisAppendCommand (c, "PING") != REDIS_OK)
        return s_probe_fail (self, c->errstr);
    return 0;
}

int
cgq_store__nb_io (redisContext *c, bool *sent, const char **fail)
{
    if (!*sent) {
        int soerr = 0, done = 0;
        socklen_t len = sizeof soerr;
        if (getsockopt (c->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) == 0 && soerr) {
            *fail = strerror (soerr);
            return -1;
        }
        if (redisBufferWrite (c, &done) != REDIS_OK) {
            *fail = c->errstr;
            return -1;
        }
        *sent = done != 0;
        return 0;
    }
    if (redisBufferRead (c) != REDIS_OK) {
        *fail = c->errstr[0] ? c->errstr : "connection closed";
        return -1;
    }
    return 0;
}

int
cgq_store_probe_poll (cgq_store_t *self)
{
    if (!self->probe)
        return CGQ_PROBE_NONE;
    redisContext *c = self->probe;
    struct pollfd p = {.fd = c->fd, .events = self->probe_sent ? POLLIN : POLLOUT};
    if (poll (&p, 1, 0) > 0) {
        bool reading = self->probe_sent;
        const char *fail = NULL;
        if (cgq_store__nb_io (c, &self->probe_sent, &fail) < 0)
            return s_probe_fail (self, fail), CGQ_PROBE_DEAD;
        if (reading) {
            void *r = NULL;
            if (redisGetReplyFromReader (c, &r) != REDIS_OK)
                return s_probe_fail (self, c->errstr), CGQ_PROBE_DEAD;
            if (r) {
                freeReplyObject (r);
                s_probe_end (self);
                self->probe_silent = false;
                self->alive_ms = cgq_now_ms ();
                return CGQ_PROBE_ALIVE;
            }
        }
    }
    if (cgq_now_ms () >= self->probe_deadline_ms) {
        char why[200];
        snprintf (why, sizeof why,
                  "no answer to PING within %d ms (%s: a stopped redis-server or a black-holed "
                  "network?)",
                  self->timeout_ms, self->probe_sent ? "connected" : "connect under way");
        self->probe_silent = true;
        return s_probe_fail (self, why), CGQ_PROBE_DEAD;
    }
    return CGQ_PROBE_WAITING;
}

int
cgq_store_probe_fd (const cgq_store_t *self, short *events)
{
    if (!self->probe)
        return -1;
    if (events)
        *events = self->probe_sent ? POLLIN : POLLOUT;
    return self->probe->fd;
}

void
cgq_store_set_gate (cgq_store_t *self, bool on)
{
    self->gate = on;
    if (!on)
        s_probe_end (self);
}

bool
cgq_store_probing (const cgq_store_t *self)
{
    return self->probe != NULL;
}

uint64_t
cgq_store_probes (const cgq_store_t *self)
{
    return self->probes;
}

// cgq_store__gate_ensure: gated, a (re)connect that could block (a
// black-holed Redis accepts, or drops SYNs, and never answers) is let
// through only within S_ALIVE_MS of a probe's answer; before that it fails
// at once with errstr, and the probe goes on in the background.
int
cgq_store__gate_ensure (cgq_store_t *self)
{
    // sentinel://: the master is found (and probed) in store_sentinel.c,
    // since a failover needs the sentinels asked again first.
    if (self->nsent)
        return 0;
    return cgq_store__gate_probe (self);
}

void
cgq_store__probe_reset (cgq_store_t *self)
{
    s_probe_end (self);
    self->alive_ms = 0;
    self->probe_silent = false;
}

int
cgq_store__gate_probe (cgq_store_t *self)
{
    if (self->gate && s_probe_target (self)
        && (!self->alive_ms || cgq_now_ms () - self->alive_ms > S_ALIVE_MS)) {
        if (s_probe_start (self) < 0)
            return -1;
        // A live Redis answers the probe within a millisecond or two: wait
        // that long (S_PROBE_WAIT_MS at most), so that a command right after
        // a Redis restart does not fail for nothing.
        // Not when the last probe got no answer at all: that Redis is
        // black-holed until a probe says otherwise.
        int64_t until = cgq_now_ms () + (self->probe_silent ? 0 : S_PROBE_WAIT_MS);
        int p;
        while ((p = cgq_store_probe_poll (self)) == CGQ_PROBE_WAITING) {
            int64_t left = until - cgq_now_ms ();
            if (left <= 0)
                break;
            short ev = 0;
            struct pollfd pf = {.fd = cgq_store_probe_fd (self, &ev), .events = 0};
            pf.events = ev;
            poll (&pf, 1, (int) left);
        }
        if (p == CGQ_PROBE_DEAD)
            return -1;
        if (p != CGQ_PROBE_ALIVE) {
            snprintf (self->errstr, sizeof self->errstr,
                      "no answer from Redis at %s yet (connecting without blocking, up to %d ms "
                      "per try) " S_HINT,
                      self->url, self->timeout_ms);
            return -1;
        }
    }
    return 0;
}
