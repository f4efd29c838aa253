// store_sentinel: finding the master of a sentinel:// URL (store_int.h).
//
// Every listed sentinel is asked at once, `SENTINEL MASTER NAME` (its
// address and config-epoch), over non-blocking connections with one
// deadline, until a majority of the listed sentinels have answered: a
// sentinel that does not answer costs no more than the deadline, however many
// there are. Of the answers the highest config-epoch wins (a tie: the address
// most of them name): a sentinel that missed a failover (stopped, cut off,
// restarted with an old config) names the old master with an older epoch and
// is outvoted. The master must then say ROLE master. In a loop that must not
// block (cgq_store_set_gate), the deadline is short and the master is first
// probed without blocking, as a redis:// address is (store_probe.c).
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "store_int.h"

#define S_GATED_MS 100 // gated: how long the sentinels' answers are waited for
#define S_MAX_ASK 64   // sentinels asked at once (a URL lists at most this many)

typedef struct {
    redisContext *c;
    bool sent, done; // the request is written; the answer (or failure) is in
    bool authed;     // AUTH's answer is read (with CGQ_SENTINEL_PASSWORD)
    char host[256];
    int port;
    unsigned long long epoch;
    bool ok;
} s_ask_t;

// s_master_reply reads SENTINEL MASTER's flat field list into a. A sentinel
// that flags the master down or a failover under way still names it (its
// epoch says how current it is).
static void
s_master_reply (cgq_store_t *self, s_ask_t *a, const redisReply *r, cgq_buf_t *why, size_t i)
{
    const char *sh = self->sent_host[i];
    int sp = self->sent_port[i];
    if (r->type == REDIS_REPLY_ERROR) {
        cgq_buf_printf (why, "; sentinel %s:%d: %s%s", sh, sp, r->str,
                        !strncmp (r->str, "NOAUTH", 6)      ? " (set CGQ_SENTINEL_PASSWORD)"
                        : strstr (r->str, "No such master") ? " (does it monitor that name?)"
                                                            : "");
        return;
    }
    const char *ip = NULL, *port = NULL, *epoch = NULL;
    if (r->type == REDIS_REPLY_ARRAY)
        for (size_t k = 0; k + 1 < r->elements; k += 2) {
            const redisReply *f = r->element[k], *v = r->element[k + 1];
            if (f->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING)
                continue;
            if (!strcmp (f->str, "ip"))
                ip = v->str;
            else if (!strcmp (f->str, "port"))
                port = v->str;
            else if (!strcmp (f->str, "config-epoch"))
                epoch = v->str;
        }
    char *end = NULL;
    long p = port ? strtol (port, &end, 10) : 0;
    if (!ip || !*ip || strlen (ip) >= sizeof a->host || !port || end == port || *end || p < 1
        || p > 65535) {
        cgq_buf_printf (why, "; sentinel %s:%d: unexpected answer to SENTINEL MASTER %s (is it a "
                             "redis-sentinel?)",
                        sh, sp, self->master_name);
        return;
    }
    snprintf (a->host, sizeof a->host, "%s", ip);
    a->port = (int) p;
    a->epoch = epoch ? strtoull (epoch, NULL, 10) : 0;
    a->ok = true;
}

// s_read reads what sentinel i sent; marks it done on an answer or failure.
static void
s_read (cgq_store_t *self, s_ask_t *a, size_t i, cgq_buf_t *why)
{
    for (;;) {
        void *r = NULL;
        if (redisGetReplyFromReader (a->c, &r) != REDIS_OK) {
            cgq_buf_printf (why, "; sentinel %s:%d: %s", self->sent_host[i], self->sent_port[i],
                            a->c->errstr);
            a->done = true;
            return;
        }
        if (!r)
            return;
        redisReply *rr = r;
        if (self->sent_password && !a->authed) { // AUTH's answer: SENTINEL MASTER's follows
            a->authed = true;
            if (rr->type == REDIS_REPLY_ERROR) {
                cgq_buf_printf (why, "; sentinel %s:%d: AUTH: %s (check CGQ_SENTINEL_PASSWORD)",
                                self->sent_host[i], self->sent_port[i], rr->str);
                a->done = true;
            }
            freeReplyObject (rr);
            if (a->done)
                return;
            continue;
        }
        s_master_reply (self, a, rr, why, i);
        freeReplyObject (rr);
        a->done = true;
        return;
    }
}

// s_ask_all asks every sentinel in parallel until a majority of them have
// answered or the deadline. Returns the number that answered (asks[i].ok).
static size_t
s_ask_all (cgq_store_t *self, s_ask_t *asks, size_t n, int64_t wait_ms, cgq_buf_t *why)
{
    size_t need = n / 2 + 1, answered = 0;
    int64_t deadline = cgq_now_ms () + wait_ms;
    for (size_t i = 0; i < n; i++) {
        s_ask_t *a = &asks[i];
        a->c = redisConnectNonBlock (self->sent_host[i], self->sent_port[i]);
        bool ok = a->c && !a->c->err;
        if (ok && self->sent_password)
            ok = (self->sent_user ? redisAppendCommand (a->c, "AUTH %s %s", self->sent_user,
                                                        self->sent_password)
                                  : redisAppendCommand (a->c, "AUTH %s", self->sent_password))
                 == REDIS_OK;
        if (ok)
            ok = redisAppendCommand (a->c, "SENTINEL MASTER %s", self->master_name) == REDIS_OK;
        if (!ok) {
            cgq_buf_printf (why, "; sentinel %s:%d: %s", self->sent_host[i], self->sent_port[i],
                            a->c ? a->c->errstr : "out of memory");
            a->done = true;
        }
    }
    struct pollfd p[S_MAX_ASK];
    size_t map[S_MAX_ASK];
    for (;;) {
        size_t np = 0;
        answered = 0;
        for (size_t i = 0; i < n; i++) {
            answered += asks[i].ok;
            if (!asks[i].done && np < S_MAX_ASK) {
                p[np] = (struct pollfd) {.fd = asks[i].c->fd,
                                         .events = asks[i].sent ? POLLIN : POLLOUT};
                map[np++] = i;
            }
        }
        int64_t left = deadline - cgq_now_ms ();
        if (!np || answered >= need || left <= 0)
            break;
        if (poll (p, np, (int) left) < 0 && errno != EINTR)
            break;
        for (size_t k = 0; k < np; k++) {
            if (!p[k].revents)
                continue;
            size_t i = map[k];
            s_ask_t *a = &asks[i];
            const char *fail = NULL;
            bool reading = a->sent;
            if (cgq_store__nb_io (a->c, &a->sent, &fail) == 0 && reading)
                s_read (self, a, i, why);
            if (fail && !a->done) {
                cgq_buf_printf (why, "; sentinel %s:%d: %s", self->sent_host[i],
                                self->sent_port[i], fail);
                a->done = true;
            }
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (!asks[i].done && answered < need)
            cgq_buf_printf (why, "; sentinel %s:%d: no answer within %" PRId64 " ms",
                            self->sent_host[i], self->sent_port[i], wait_ms);
        if (asks[i].c)
            redisFree (asks[i].c);
        asks[i].c = NULL;
    }
    return answered;
}

static bool
s_same (const s_ask_t *a, const s_ask_t *b)
{
    return a->port == b->port && a->epoch == b->epoch && !strcmp (a->host, b->host);
}

// s_best: of the answers, the highest config-epoch; among equals, the
// address most sentinels name.
static size_t
s_best (const s_ask_t *asks, size_t n)
{
    size_t best = n, best_votes = 0;
    for (size_t i = 0; i < n; i++) {
        if (!asks[i].ok)
            continue;
        size_t votes = 0;
        for (size_t k = 0; k < n; k++)
            votes += asks[k].ok && s_same (&asks[k], &asks[i]);
        if (best == n || asks[i].epoch > asks[best].epoch
            || (asks[i].epoch == asks[best].epoch && votes > best_votes)) {
            best = i;
            best_votes = votes;
        }
    }
    return best;
}

int
cgq_store__connect_sentinel (cgq_store_t *self)
{
    cgq_store__disconnect (self);
    // Every connect asks afresh: never a connect to what an older ask named,
    // which a failover since may have made the old master (and an old master
    // restarted says ROLE master until a sentinel demotes it).
    cgq_buf_t why;
    cgq_buf_init (&why);
    char *was = self->host ? cgq_xasprintf ("%s:%d", self->host, self->port) : NULL;
    size_t n = self->nsent < S_MAX_ASK ? self->nsent : S_MAX_ASK, need = n / 2 + 1;
    s_ask_t *asks = cgq_xcalloc (n, sizeof *asks);
    size_t answered = s_ask_all (self, asks, n, self->gate ? S_GATED_MS : self->timeout_ms, &why);
    int rc = -1;
    if (answered >= need) {
        size_t best = s_best (asks, n);
        for (size_t i = 0; i < n; i++)
            if (asks[i].ok && !s_same (&asks[i], &asks[best]))
                cgq_warn ("store: sentinel %s:%d names %s:%d (config-epoch %llu) for '%s'; "
                          "%s:%d (config-epoch %llu) is taken, the newest of a majority",
                          self->sent_host[i], self->sent_port[i], asks[i].host, asks[i].port,
                          asks[i].epoch, self->master_name, asks[best].host, asks[best].port,
                          asks[best].epoch);
        char *now = cgq_xasprintf ("%s:%d", asks[best].host, asks[best].port);
        if (!was || strcmp (was, now) != 0)
            cgq_store__probe_reset (self); // what a probe knew was of the old one
        free (self->host);
        self->host = cgq_xstrdup (asks[best].host);
        self->port = asks[best].port;
        if (cgq_store__gate_probe (self) == 0 && cgq_store__connect_at (self) == 0
            && cgq_store__check_role (self) == 0) {
            if (!was || strcmp (was, now) != 0)
                cgq_info ("store: master '%s' is at %s (config-epoch %llu, %zu of %zu sentinels "
                          "answered)%s%s",
                          self->master_name, now, asks[best].epoch, answered, n,
                          was ? "; it was at " : "", was ? was : "");
            if (why.data && *why.data) // the sentinels that did not answer, or answered nonsense
                cgq_warn ("store: master '%s' found, though%s", self->master_name, why.data);
            rc = 0;
        }
        else
            cgq_buf_printf (&why, "; the sentinels' master %s: %s", now, self->errstr);
        free (now);
    }
    else
        cgq_buf_printf (&why, "; %zu of %zu sentinels answered, %zu needed (a majority of those "
                              "listed)",
                        answered, n, need);
    if (rc < 0)
        snprintf (self->errstr, sizeof self->errstr,
                  "cannot find the master '%s' through the sentinels of %s%s (are redis-sentinel "
                  "and the master running? check --redis / CGQ_REDIS; will retry)",
                  self->master_name, self->url, why.data ? why.data : "");
    free (asks);
    free (was);
    cgq_buf_fini (&why);
    return rc;
}
