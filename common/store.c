#include "store.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "log.h"
#include "util.h"

#include "store_int.h"

static void s_flight_end (cgq_store_t *self);
static int s_resolve_doubt (cgq_store_t *self);

struct s_entry {
    uint64_t seq;
    int64_t at_ms;
    size_t ncmds; // commands inside MULTI/EXEC, the marker included
    char *data;   // MULTI, the commands, the marker, EXEC
    size_t len;
};

// Most bytes the journal holds, whatever its window: past this the oldest
// batches are dropped (and a crash of Redis right then could lose them).
#define S_JOURNAL_MAX_BYTES (256u << 20)

// hiredis writes with write(2), so a server that went away raises SIGPIPE and
// would kill the daemon; the failed write must come back as EPIPE instead.
static void
s_ignore_sigpipe (void)
{
    struct sigaction old;
    if (sigaction (SIGPIPE, NULL, &old) == 0 && old.sa_handler == SIG_DFL) {
        struct sigaction sa;
        memset (&sa, 0, sizeof sa);
        sa.sa_handler = SIG_IGN;
        sigemptyset (&sa.sa_mask);
        sigaction (SIGPIPE, &sa, NULL);
    }
}

// s_mask_raw copies url with the password of a redis://user:pass@ part
// replaced by ***, for messages about URLs that did not parse.
static char *
s_mask_raw (const char *url)
{
    const char *scheme = strstr (url, "://");
    const char *start = scheme ? scheme + 3 : url;
    const char *at = strrchr (start, '@');
    const char *pw = NULL;
    if (at) {
        pw = memchr (start, ':', (size_t) (at - start));
        if (!pw) // "redis://secret@host": the whole part is the password
            return cgq_xasprintf ("%.*s***%s", (int) (start - url), url, at);
    }
    char *q = strstr (start, "password=");
    if (pw)
        return cgq_xasprintf ("%.*s:***%s", (int) (pw - url), url, at);
    if (q) {
        const char *end = strchr (q, '&');
        return cgq_xasprintf ("%.*s***%s", (int) (q + 9 - url), url, end ? end : "");
    }
    return cgq_xstrdup (url);
}

static int
s_hexval (char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char) tolower ((unsigned char) c);
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

// s_pct_decode decodes %XX escapes, so a password may hold '@', ':' or '/'.
static char *
s_pct_decode (const char *s, size_t n)
{
    char *out = cgq_xmalloc (n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int hi, lo;
        if (s[i] == '%' && i + 2 < n && (hi = s_hexval (s[i + 1])) >= 0
            && (lo = s_hexval (s[i + 2])) >= 0) {
            out[k++] = (char) (hi * 16 + lo);
            i += 2;
        } else
            out[k++] = s[i];
    }
    out[k] = 0;
    return out;
}

static int
s_parse_int_range (const char *s, size_t n, long lo, long hi, int *out)
{
    if (n == 0 || n > 9)
        return -1;
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit ((unsigned char) s[i]))
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v < lo || v > hi)
        return -1;
    *out = (int) v;
    return 0;
}

static int
s_bad_url (char *err, size_t errlen, const char *url, const char *why)
{
    char *m = s_mask_raw (url);
    snprintf (err, errlen,
              "bad Redis URL '%s': %s (expected redis://[[user]:password@]host[:port][/db] or "
              "unix:///path[?db=N])",
              m, why);
    free (m);
    return -1;
}

static int
s_parse_tcp (cgq_store_t *self, const char *url, char *err, size_t errlen)
{
    const char *s = url + strlen ("redis://");
    const char *slash = strchr (s, '/');
    const char *at = NULL;
    // The password may contain '/' when not escaped; the last '@' ends it.
    const char *last_at = strrchr (s, '@');
    if (last_at) {
        at = last_at;
        slash = strchr (at, '/');
    }
    const char *hostport = at ? at + 1 : s;
    const char *hp_end = slash ? slash : hostport + strlen (hostport);
    if (at) {
        const char *colon = memchr (s, ':', (size_t) (at - s));
        if (!colon) {
            // redis://secret@host: the single field is the password, as in
            // redis-cli -u and most clients.
            self->password = s_pct_decode (s, (size_t) (at - s));
        } else {
            if (colon > s)
                self->user = s_pct_decode (s, (size_t) (colon - s));
            self->password = s_pct_decode (colon + 1, (size_t) (at - colon - 1));
        }
        if (!*self->password) {
            free (self->password);
            self->password = NULL;
        }
    }
    const char *port_colon = NULL;
    if (*hostport == '[') {
        const char *close = memchr (hostport, ']', (size_t) (hp_end - hostport));
        if (!close)
            return s_bad_url (err, errlen, url, "missing ']' after the IPv6 address");
        self->host = cgq_xstrndup (hostport + 1, (size_t) (close - hostport - 1));
        if (close + 1 < hp_end) {
            if (close[1] != ':')
                return s_bad_url (err, errlen, url, "expected ':port' after ']'");
            port_colon = close + 1;
        }
    } else {
        port_colon = memchr (hostport, ':', (size_t) (hp_end - hostport));
        const char *host_end = port_colon ? port_colon : hp_end;
        self->host = cgq_xstrndup (hostport, (size_t) (host_end - hostport));
    }
    if (!*self->host)
        return s_bad_url (err, errlen, url, "no host");
    self->port = 6379;
    if (port_colon
        && s_parse_int_range (port_colon + 1, (size_t) (hp_end - port_colon - 1), 1, 65535,
                              &self->port)
               < 0)
        return s_bad_url (err, errlen, url, "the port must be a number from 1 to 65535");
    self->db = 0;
    if (slash && slash[1]) {
        if (s_parse_int_range (slash + 1, strlen (slash + 1), 0, 1000000, &self->db) < 0)
            return s_bad_url (err, errlen, url, "the database after '/' must be a number");
    }
    return 0;
}

static int
s_bad_sentinel (char *err, size_t errlen, const char *url, const char *why)
{
    char *m = s_mask_raw (url);
    snprintf (err, errlen,
              "bad Redis URL '%s': %s (expected sentinel://[[user]:password@]HOST[:PORT]"
              "[,HOST[:PORT]...]/MASTER_NAME[/db], sentinel port 26379 by default)",
              m, why);
    free (m);
    return -1;
}

// s_parse_sentinel: sentinel://[[user]:password@]h1[:p1][,h2[:p2]...]/NAME[/db].
// The user and password are the master's (as in redis://); the sentinels'
// come from CGQ_SENTINEL_USER / CGQ_SENTINEL_PASSWORD.
static int
s_parse_sentinel (cgq_store_t *self, const char *url, char *err, size_t errlen)
{
    const char *s = url + strlen ("sentinel://");
    const char *at = strrchr (s, '@');
    if (at) {
        const char *colon = memchr (s, ':', (size_t) (at - s));
        if (!colon)
            self->password = s_pct_decode (s, (size_t) (at - s));
        else {
            if (colon > s)
                self->user = s_pct_decode (s, (size_t) (colon - s));
            self->password = s_pct_decode (colon + 1, (size_t) (at - colon - 1));
        }
        if (!*self->password) {
            free (self->password);
            self->password = NULL;
        }
    }
    const char *list = at ? at + 1 : s;
    const char *slash = strchr (list, '/');
    if (!slash)
        return s_bad_sentinel (err, errlen, url, "no /MASTER_NAME after the sentinels");
    const char *name = slash + 1;
    const char *name_end = strchr (name, '/');
    size_t nlen = name_end ? (size_t) (name_end - name) : strlen (name);
    if (nlen == 0)
        return s_bad_sentinel (err, errlen, url, "no master name after '/'");
    self->master_name = cgq_xstrndup (name, nlen);
    if (name_end && name_end[1]
        && s_parse_int_range (name_end + 1, strlen (name_end + 1), 0, 1000000, &self->db) < 0)
        return s_bad_sentinel (err, errlen, url, "the database after the master name must be a number");
    const char *p = list;
    while (p < slash) {
        const char *comma = memchr (p, ',', (size_t) (slash - p));
        const char *end = comma ? comma : slash;
        const char *port_colon = NULL;
        char *host;
        if (*p == '[') {
            const char *close = memchr (p, ']', (size_t) (end - p));
            if (!close)
                return s_bad_sentinel (err, errlen, url, "missing ']' after an IPv6 address");
            host = cgq_xstrndup (p + 1, (size_t) (close - p - 1));
            if (close + 1 < end && close[1] != ':') {
                free (host);
                return s_bad_sentinel (err, errlen, url, "expected ':port' after ']'");
            }
            port_colon = close + 1 < end ? close + 1 : NULL;
        } else {
            port_colon = memchr (p, ':', (size_t) (end - p));
            host = cgq_xstrndup (p, (size_t) ((port_colon ? port_colon : end) - p));
        }
        int port = 26379;
        if (!*host) {
            free (host);
            return s_bad_sentinel (err, errlen, url, "a sentinel without a host (an empty entry "
                                                     "between commas?)");
        }
        if (port_colon
            && s_parse_int_range (port_colon + 1, (size_t) (end - port_colon - 1), 1, 65535, &port)
                   < 0) {
            free (host);
            return s_bad_sentinel (err, errlen, url, "a sentinel's port must be a number from 1 to "
                                                     "65535");
        }
        self->sent_host = cgq_xrealloc (self->sent_host, (self->nsent + 1) * sizeof (char *));
        self->sent_port = cgq_xrealloc (self->sent_port, (self->nsent + 1) * sizeof (int));
        self->sent_host[self->nsent] = host;
        self->sent_port[self->nsent++] = port;
        p = comma ? comma + 1 : slash;
    }
    if (!self->nsent)
        return s_bad_sentinel (err, errlen, url, "no sentinel address");
    const char *su = getenv ("CGQ_SENTINEL_USER"), *sp = getenv ("CGQ_SENTINEL_PASSWORD");
    self->sent_user = su && *su ? cgq_xstrdup (su) : NULL;
    self->sent_password = sp && *sp ? cgq_xstrdup (sp) : NULL;
    return 0;
}

static int
s_parse_unix (cgq_store_t *self, const char *url, char *err, size_t errlen)
{
    const char *p = url + strlen ("unix://");
    if (*p != '/')
        return s_bad_url (err, errlen, url, "the socket path must be absolute (unix:///path)");
    const char *q = strchr (p, '?');
    self->path = cgq_xstrndup (p, q ? (size_t) (q - p) : strlen (p));
    if (strlen (self->path) < 2)
        return s_bad_url (err, errlen, url, "no socket path");
    while (q && *q) {
        q++;
        const char *end = strchr (q, '&');
        size_t n = end ? (size_t) (end - q) : strlen (q);
        if (n > 3 && !strncmp (q, "db=", 3)) {
            if (s_parse_int_range (q + 3, n - 3, 0, 1000000, &self->db) < 0)
                return s_bad_url (err, errlen, url, "db= must be a number");
        } else if (n >= 9 && !strncmp (q, "password=", 9)) {
            free (self->password);
            self->password = n > 9 ? s_pct_decode (q + 9, n - 9) : NULL;
        } else if (n >= 5 && !strncmp (q, "user=", 5)) {
            free (self->user);
            self->user = n > 5 ? s_pct_decode (q + 5, n - 5) : NULL;
        } else
            return s_bad_url (err, errlen, url, "unknown query parameter (known: db, user, password)");
        q = end;
    }
    return 0;
}

cgq_store_t *
cgq_store_new (const char *url, int timeout_ms, char *err, size_t errlen)
{
    char dummy[8];
    if (!err || errlen == 0) {
        err = dummy;
        errlen = sizeof dummy;
    }
    err[0] = 0;
    if (!url) {
        snprintf (err, errlen, "no Redis URL given (set --redis or CGQ_REDIS)");
        return NULL;
    }
    cgq_store_t *self = cgq_xcalloc (1, sizeof *self);
    self->timeout_ms = timeout_ms > 0 ? timeout_ms : 2000;
    cgq_buf_init (&self->batch);
    cgq_buf_init (&self->scratch);
    int rc;
    if (!strncmp (url, "redis://", 8)) {
        self->is_unix = false;
        rc = s_parse_tcp (self, url, err, errlen);
    } else if (!strncmp (url, "unix://", 7)) {
        self->is_unix = true;
        rc = s_parse_unix (self, url, err, errlen);
    } else if (!strncmp (url, "sentinel://", 11)) {
        rc = s_parse_sentinel (self, url, err, errlen);
    } else if (!strncmp (url, "rediss://", 9)) {
        rc = s_bad_url (err, errlen, url, "TLS (rediss://) is not supported");
    } else {
        char *m = s_mask_raw (url);
        snprintf (err, errlen,
                  "bad Redis URL '%s': expected redis://host:port/db, unix:///path or "
                  "sentinel://host:port[,host:port...]/master_name[/db]",
                  m);
        free (m);
        rc = -1;
    }
    if (rc < 0) {
        cgq_store_destroy (&self);
        return NULL;
    }
    cgq_buf_t u;
    cgq_buf_init (&u);
    if (self->master_name) {
        cgq_buf_puts (&u, "sentinel://");
        if (self->user || self->password)
            cgq_buf_printf (&u, "%s%s@", self->user ? self->user : "", self->password ? ":***" : "");
        for (size_t i = 0; i < self->nsent; i++) {
            bool v6 = strchr (self->sent_host[i], ':') != NULL;
            cgq_buf_printf (&u, "%s%s%s%s:%d", i ? "," : "", v6 ? "[" : "", self->sent_host[i],
                            v6 ? "]" : "", self->sent_port[i]);
        }
        cgq_buf_printf (&u, "/%s/%d", self->master_name, self->db);
    } else if (self->is_unix) {
        cgq_buf_printf (&u, "unix://%s", self->path);
        char sep = '?';
        if (self->db) {
            cgq_buf_printf (&u, "%cdb=%d", sep, self->db);
            sep = '&';
        }
        if (self->user) {
            cgq_buf_printf (&u, "%cuser=%s", sep, self->user);
            sep = '&';
        }
        if (self->password)
            cgq_buf_printf (&u, "%cpassword=***", sep);
    } else {
        cgq_buf_puts (&u, "redis://");
        if (self->user || self->password)
            cgq_buf_printf (&u, "%s%s@", self->user ? self->user : "", self->password ? ":***" : "");
        bool v6 = strchr (self->host, ':') != NULL;
        cgq_buf_printf (&u, "%s%s%s:%d/%d", v6 ? "[" : "", self->host, v6 ? "]" : "", self->port,
                        self->db);
    }
    self->url = cgq_buf_take (&u);
    snprintf (self->errstr, sizeof self->errstr, "not connected to Redis at %s", self->url);
    s_ignore_sigpipe ();
    return self;
}

void
cgq_store__disconnect (cgq_store_t *self)
{
    if (self->ctx) {
        redisFree (self->ctx);
        self->ctx = NULL;
    }
    self->appended = 0;
    self->watch_armed = false;
}

void
cgq_store_destroy (cgq_store_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cgq_store_t *self = *self_p;
    cgq_store__disconnect (self);
    if (self->probe)
        redisFree (self->probe);
    s_flight_end (self);
    cgq_buf_fini (&self->batch);
    cgq_buf_fini (&self->scratch);
    free (self->starts);
    free (self->host);
    free (self->path);
    free (self->user);
    free (self->password);
    free (self->url);
    for (size_t i = 0; i < self->nsent; i++)
        free (self->sent_host[i]);
    free (self->sent_host);
    free (self->sent_port);
    free (self->master_name);
    free (self->sent_user);
    free (self->sent_password);
    free (self->marker_key);
    free (self->marker_field);
    free (self->marker_tag);
    free (self->fence_key);
    free (self->fence_val);
    free (self->fence_seq_key);
    for (size_t i = 0; i < self->jlen; i++)
        free (self->journal[(self->jhead + i) % self->jcap].data);
    free (self->journal);
    free (self);
    *self_p = NULL;
}

static void
s_io_error (cgq_store_t *self, const char *during)
{
    const char *why = self->ctx && self->ctx->errstr[0] ? self->ctx->errstr : "connection closed";
    // hiredis reports a read past SO_RCVTIMEO as EAGAIN's text.
    if (strstr (why, "temporarily unavailable"))
        why = "timed out";
    snprintf (self->errstr, sizeof self->errstr,
              "lost connection to Redis at %s during %s: %s (timeout %d ms; will reconnect)",
              self->url, during, why, self->timeout_ms);
    cgq_store__disconnect (self);
    self->alive_ms = 0; // gated: the next connect waits for a new probe's answer
}

// s_handshake_error reports an I/O failure of AUTH/SELECT/PING right after
// connecting: something accepted the connection but does not speak Redis (or
// not in time), which for the user is the same as not reaching it.
static void
s_handshake_error (cgq_store_t *self, const char *during)
{
    const char *why = self->ctx && self->ctx->errstr[0] ? self->ctx->errstr : "connection closed";
    if (strstr (why, "temporarily unavailable"))
        snprintf (self->errstr, sizeof self->errstr,
                  "cannot reach Redis at %s: no answer to %s within %d ms " S_HINT, self->url,
                  during, self->timeout_ms);
    else
        snprintf (self->errstr, sizeof self->errstr, "cannot reach Redis at %s: %s during %s " S_HINT,
                  self->url, why, during);
    cgq_store__disconnect (self);
}

// cgq_store__connect_at connects to host:port (or the socket) of the URL, or of the
// master that the sentinels named.
int
cgq_store__connect_at (cgq_store_t *self)
{
    cgq_store__disconnect (self);
    struct timeval tv = {self->timeout_ms / 1000, (self->timeout_ms % 1000) * 1000};
    redisContext *c = self->is_unix ? redisConnectUnixWithTimeout (self->path, tv)
                                    : redisConnectWithTimeout (self->host, self->port, tv);
    if (!c || c->err) {
        const char *why = c ? c->errstr : "out of memory";
        snprintf (self->errstr, sizeof self->errstr, "cannot reach Redis at %s: %s " S_HINT,
                  self->url, why);
        if (c)
            redisFree (c);
        return -1;
    }
    redisSetTimeout (c, tv);
    if (!self->is_unix)
        redisEnableKeepAlive (c);
    self->ctx = c;

    if (self->password) {
        redisReply *r = self->user ? redisCommand (c, "AUTH %s %s", self->user, self->password)
                                   : redisCommand (c, "AUTH %s", self->password);
        if (!r) {
            s_handshake_error (self, "AUTH");
            return -1;
        }
        if (r->type == REDIS_REPLY_ERROR) {
            snprintf (self->errstr, sizeof self->errstr,
                      "authentication failed at Redis %s: %s (check the %spassword in --redis / "
                      "CGQ_REDIS)",
                      self->url, r->str, self->user ? "user and " : "");
            freeReplyObject (r);
            cgq_store__disconnect (self);
            return -1;
        }
        freeReplyObject (r);
    }
    // SELECT (or PING for db 0) proves the connection usable now, so that a
    // missing password is reported here and not by the first real command.
    redisReply *r = self->db ? redisCommand (c, "SELECT %d", self->db) : redisCommand (c, "PING");
    if (!r) {
        s_handshake_error (self, self->db ? "SELECT" : "PING");
        return -1;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        if (!strncmp (r->str, "NOAUTH", 6))
            snprintf (self->errstr, sizeof self->errstr,
                      "authentication required by Redis at %s: %s (put the password in --redis / "
                      "CGQ_REDIS: redis://:PASSWORD@host:port/db)",
                      self->url, r->str);
        else if (self->db)
            snprintf (self->errstr, sizeof self->errstr,
                      "cannot select database %d on Redis at %s: %s (check the /db part of "
                      "--redis / CGQ_REDIS)",
                      self->db, self->url, r->str);
        else
            snprintf (self->errstr, sizeof self->errstr, "Redis at %s is not ready: %s",
                      self->url, r->str);
        freeReplyObject (r);
        cgq_store__disconnect (self);
        return -1;
    }
    freeReplyObject (r);
    snprintf (self->errstr, sizeof self->errstr, "connected");
    self->fresh = true;
    return 0;
}

// cgq_store__check_role: the Redis just connected says ROLE master. A demoted old
// master (a replica now, or one not yet told) is never written to.
int
cgq_store__check_role (cgq_store_t *self)
{
    redisReply *r = redisCommand (self->ctx, "ROLE");
    if (!r) {
        s_handshake_error (self, "ROLE");
        return -1;
    }
    int rc = 0;
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf (self->errstr, sizeof self->errstr,
                  "ROLE refused: %s (the ACL user needs +role to follow a failover)", r->str);
        rc = -1;
    } else if (r->type != REDIS_REPLY_ARRAY || r->elements < 1
               || r->element[0]->type != REDIS_REPLY_STRING) {
        snprintf (self->errstr, sizeof self->errstr, "unexpected answer to ROLE");
        rc = -1;
    } else if (strcmp (r->element[0]->str, "master") != 0) {
        snprintf (self->errstr, sizeof self->errstr,
                  "it says it is a %s, not the master (a failover under way?)",
                  r->element[0]->str);
        rc = -1;
    }
    freeReplyObject (r);
    if (rc < 0)
        cgq_store__disconnect (self);
    return rc;
}

int
cgq_store_connect (cgq_store_t *self)
{
    return self->master_name ? cgq_store__connect_sentinel (self) : cgq_store__connect_at (self);
}

void
cgq_store_set_replicas (cgq_store_t *self, int replicas, int wait_ms)
{
    self->replicas = replicas > 0 ? replicas : 0;
    self->wait_ms = wait_ms > 0 ? wait_ms : 500;
}

uint64_t
cgq_store_applied_seq (const cgq_store_t *self)
{
    return self->applied_seq;
}

uint64_t
cgq_store_confirmed_seq (const cgq_store_t *self)
{
    return self->replicas > 0 ? self->confirmed_seq : self->applied_seq;
}

bool
cgq_store_connected (cgq_store_t *self)
{
    return self && self->ctx != NULL;
}

const char *
cgq_store_errstr (cgq_store_t *self)
{
    return self->errstr;
}

const char *
cgq_store_url (cgq_store_t *self)
{
    return self->url;
}

// s_ensure connects if needed; gated (cgq_store_set_gate), only once a
// non-blocking probe has had an answer (store_probe.c).
static int
s_ensure (cgq_store_t *self)
{
    if (self->ctx)
        return 0;
    if (cgq_store__gate_ensure (self) < 0)
        return -1;
    return cgq_store_connect (self);
}

// The batch is written in RESP directly: "*N\r\n" then "$LEN\r\nARG\r\n" per
// argument, numbers turned into digits by hand. No printf, no allocation per
// command (the batch buffer grows by doubling): at ~8 commands per trial,
// hiredis' redisvFormatCommand (a vsnprintf per argument, a malloc per
// command and per argument) was a third of the coordinator's CPU.

static void
s_mark (cgq_store_t *self)
{
    if (self->count == self->starts_cap) {
        self->starts_cap = self->starts_cap ? self->starts_cap * 2 : 64;
        self->starts = cgq_xrealloc (self->starts, self->starts_cap * sizeof *self->starts);
    }
    self->starts[self->count++] = self->batch.len;
}

// s_utoa writes v in decimal at the end of buf (21 bytes) and returns where
// the digits start.
static char *
s_utoa (char *end, uint64_t v)
{
    char *p = end;
    do {
        *--p = (char) ('0' + v % 10);
        v /= 10;
    } while (v);
    return p;
}

// s_put_len appends PREFIX LEN \r\n ("*3\r\n", "$5\r\n").
static void
s_put_len (cgq_buf_t *b, char prefix, size_t n)
{
    char tmp[24];
    char *end = tmp + sizeof tmp;
    *--end = '\n';
    *--end = '\r';
    char *p = s_utoa (end, n);
    *--p = prefix;
    cgq_buf_append (b, p, (size_t) (tmp + sizeof tmp - p));
}

// s_put_arg appends $LEN\r\nARG\r\n, room made once.
static void
s_put_arg (cgq_buf_t *b, const char *arg, size_t len)
{
    cgq_buf_reserve (b, len + 26);
    char tmp[24];
    char *end = tmp + sizeof tmp;
    *--end = '\n';
    *--end = '\r';
    char *p = s_utoa (end, len);
    *--p = '$';
    size_t hl = (size_t) (tmp + sizeof tmp - p);
    char *w = b->data + b->len;
    memcpy (w, p, hl);
    w += hl;
    memcpy (w, arg, len);
    w += len;
    *w++ = '\r';
    *w++ = '\n';
    *w = 0;
    b->len = (size_t) (w - b->data);
}

// cgq_store_cmd's format: arguments are separated by spaces; each is literal
// text and conversions (%s, %b = pointer + size_t length, %d %i %u with l,
// ll or z, %%), assembled in self->scratch, then written out in RESP.
#define S_ARGS_MAX 64

static void
s_arg_num (cgq_buf_t *a, bool neg, uint64_t v)
{
    char tmp[24];
    char *p = s_utoa (tmp + sizeof tmp, v);
    if (neg)
        *--p = '-';
    cgq_buf_append (a, p, (size_t) (tmp + sizeof tmp - p));
}

static int
s_vformat (cgq_store_t *self, const char *fmt, va_list ap)
{
    cgq_buf_t *args = &self->scratch;
    cgq_buf_reset (args);
    size_t offs[S_ARGS_MAX], lens[S_ARGS_MAX];
    int argc = 0;
    bool in_arg = false;
    for (const char *f = fmt; *f; f++) {
        if (*f == ' ') {
            if (in_arg)
                lens[argc - 1] = args->len - offs[argc - 1];
            in_arg = false;
            continue;
        }
        if (!in_arg) {
            if (argc == S_ARGS_MAX)
                return -1;
            offs[argc++] = args->len;
            in_arg = true;
        }
        if (*f != '%') {
            cgq_buf_append (args, f, 1);
            continue;
        }
        f++;
        int lng = 0;
        bool size = false;
        for (; *f == 'l'; f++)
            lng++;
        if (*f == 'z') {
            size = true;
            f++;
        }
        switch (*f) {
        case 's': {
            const char *str = va_arg (ap, const char *);
            if (str)
                cgq_buf_append (args, str, strlen (str));
            break;
        }
        case 'b': {
            const char *str = va_arg (ap, const char *);
            size_t n = va_arg (ap, size_t);
            if (str)
                cgq_buf_append (args, str, n);
            break;
        }
        case 'd':
        case 'i': {
            long long v = size       ? (long long) va_arg (ap, ssize_t)
                          : lng >= 2 ? va_arg (ap, long long)
                          : lng == 1 ? va_arg (ap, long)
                                     : va_arg (ap, int);
            s_arg_num (args, v < 0, v < 0 ? 0 - (unsigned long long) v : (unsigned long long) v);
            break;
        }
        case 'u': {
            unsigned long long v = size       ? va_arg (ap, size_t)
                                   : lng >= 2 ? va_arg (ap, unsigned long long)
                                   : lng == 1 ? va_arg (ap, unsigned long)
                                              : va_arg (ap, unsigned);
            s_arg_num (args, false, v);
            break;
        }
        case '%':
            cgq_buf_append (args, "%", 1);
            break;
        default: // unknown conversion, or the format ends in '%'
            return -1;
        }
    }
    if (in_arg)
        lens[argc - 1] = args->len - offs[argc - 1];
    if (argc == 0)
        return -1;
    s_mark (self);
    s_put_len (&self->batch, '*', (size_t) argc);
    for (int i = 0; i < argc; i++)
        s_put_arg (&self->batch, args->data + offs[i], lens[i]);
    return 0;
}

void
cgq_store_cmd (cgq_store_t *self, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    int rc = s_vformat (self, fmt, ap);
    va_end (ap);
    if (rc < 0)
        cgq_error ("cannot format Redis command '%s' (a bug: check the format string)", fmt);
}

void
cgq_store_cmdargv (cgq_store_t *self, int argc, const char **argv, const size_t *argvlen)
{
    if (argc <= 0) {
        cgq_error ("cannot queue a Redis command with %d arguments", argc);
        return;
    }
    s_mark (self);
    s_put_len (&self->batch, '*', (size_t) argc);
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i] ? argv[i] : "";
        s_put_arg (&self->batch, a, argvlen ? argvlen[i] : strlen (a));
    }
}

void
cgq_store_begin (cgq_store_t *self, size_t argc)
{
    s_mark (self);
    s_put_len (&self->batch, '*', argc);
}

void
cgq_store_arg (cgq_store_t *self, const char *arg, size_t len)
{
    s_put_arg (&self->batch, arg, len);
}

void
cgq_store_arg_u64 (cgq_store_t *self, uint64_t v)
{
    char tmp[24];
    char *p = s_utoa (tmp + sizeof tmp, v);
    s_put_arg (&self->batch, p, (size_t) (tmp + sizeof tmp - p));
}

void
cgq_store_arg_dbl (cgq_store_t *self, double v)
{
    char tmp[32];
    cgq_fmt_double (tmp, v);
    s_put_arg (&self->batch, tmp, strlen (tmp));
}

size_t
cgq_store_pending (cgq_store_t *self)
{
    return self->count;
}

static size_t
s_cmd_len (cgq_store_t *self, size_t i)
{
    size_t end = i + 1 < self->count ? self->starts[i + 1] : self->batch.len;
    return end - self->starts[i];
}

// s_cmd_name returns the command name of queued command i ("HSET"), for logs.
static void
s_cmd_name (cgq_store_t *self, size_t i, char *out, size_t n)
{
    // RESP: *N\r\n$L\r\nNAME\r\n...
    const char *p = self->batch.data + self->starts[i];
    const char *end = p + s_cmd_len (self, i);
    snprintf (out, n, "?");
    const char *d = memchr (p, '$', (size_t) (end - p));
    if (!d)
        return;
    const char *nl = memchr (d, '\n', (size_t) (end - d));
    if (!nl)
        return;
    long len = strtol (d + 1, NULL, 10);
    if (len < 0 || nl + 1 + len > end)
        return;
    snprintf (out, n, "%.*s", (int) (len < 40 ? len : 40), nl + 1);
}

// s_drop removes the queued commands marked in bad[], keeping the order of
// the others.
static void
s_drop (cgq_store_t *self, const bool *bad, size_t nbad)
{
    cgq_buf_t nb;
    cgq_buf_init (&nb);
    size_t k = 0;
    for (size_t i = 0; i < self->count; i++) {
        if (i < nbad && bad[i])
            continue;
        size_t start = nb.len;
        cgq_buf_append (&nb, self->batch.data + self->starts[i], s_cmd_len (self, i));
        self->starts[k++] = start;
    }
    cgq_buf_fini (&self->batch);
    self->batch = nb;
    self->count = k;
}

static void s_clear_batch (cgq_store_t *self);

// s_consume removes the first k queued commands (a flight Redis applied),
// keeping those queued after them.
static void
s_consume (cgq_store_t *self, size_t k)
{
    if (k >= self->count) {
        s_clear_batch (self);
        return;
    }
    size_t off = self->starts[k];
    memmove (self->batch.data, self->batch.data + off, self->batch.len - off + 1);
    self->batch.len -= off;
    for (size_t i = k; i < self->count; i++)
        self->starts[i - k] = self->starts[i] - off;
    self->count -= k;
}

static void
s_clear_batch (cgq_store_t *self)
{
    cgq_buf_reset (&self->batch);
    self->count = 0;
    // A burst (recovery, a big submit) should not pin megabytes forever.
    if (self->batch.cap > (16u << 20)) {
        cgq_buf_fini (&self->batch);
        cgq_buf_init (&self->batch);
    }
}

// s_journal_prune drops batches older than the window (and the oldest ones
// past the byte cap).
static void
s_journal_prune (cgq_store_t *self, int64_t now)
{
    while (self->jlen) {
        struct s_entry *e = &self->journal[self->jhead];
        // With replicas, a batch they have not confirmed stays, however old:
        // a failover to one of them would have lost it.
        bool old = now - e->at_ms > self->journal_ms
                   && !(self->replicas > 0 && e->seq > self->confirmed_seq);
        bool over = self->jbytes > S_JOURNAL_MAX_BYTES && self->jlen > 1;
        if (!old && !over)
            break;
        if (over && !old)
            cgq_warn ("store: the journal of unsynced batches is over %u MiB; dropping batch %" PRIu64
                      " before its window ended",
                      S_JOURNAL_MAX_BYTES >> 20, e->seq);
        self->jbytes -= e->len;
        free (e->data);
        self->jhead = (self->jhead + 1) % self->jcap;
        self->jlen--;
    }
}

// s_journal_add keeps a committed batch (takes data).
static void
s_journal_add (cgq_store_t *self, uint64_t seq, size_t ncmds, char *data, size_t len)
{
    int64_t now = cgq_now_ms ();
    s_journal_prune (self, now);
    if (self->jlen == self->jcap) {
        size_t cap = self->jcap ? self->jcap * 2 : 64;
        struct s_entry *j = cgq_xcalloc (cap, sizeof *j);
        for (size_t i = 0; i < self->jlen; i++)
            j[i] = self->journal[(self->jhead + i) % self->jcap];
        free (self->journal);
        self->journal = j;
        self->jcap = cap;
        self->jhead = 0;
    }
    struct s_entry *e = &self->journal[(self->jhead + self->jlen) % self->jcap];
    e->seq = seq;
    e->at_ms = now;
    e->ncmds = ncmds;
    e->data = data;
    e->len = len;
    self->jlen++;
    self->jbytes += len;
}

static int s_fence_check (cgq_store_t *self);

// s_replay_lost runs once per new connection, before anything else is
// written: if Redis came back older than the batches it acknowledged (a
// crash inside its fsync window), the marker names an older batch, and the
// journal's later batches are sent again, in order. Returns -1 on I/O error.
static int
s_replay_lost (cgq_store_t *self)
{
    if (!self->fresh || !self->marker_key)
        return 0;
    if (!self->jlen) {
        self->fresh = false;
        return 0;
    }
    redisReply *r = redisCommand (self->ctx, "HGET %s %s", self->marker_key, self->marker_field);
    if (!r) {
        s_io_error (self, "reading the batch marker");
        return -1;
    }
    uint64_t have = 0;
    bool ours = false;
    size_t tlen = strlen (self->marker_tag);
    if (r->type == REDIS_REPLY_STRING && strncmp (r->str, self->marker_tag, tlen) == 0
        && r->str[tlen] == ':') {
        ours = true;
        have = strtoull (r->str + tlen + 1, NULL, 10);
    }
    else if (r->type == REDIS_REPLY_STRING) {
        // Another writer (a newer coordinator) has written since: its state
        // wins; replaying ours would overwrite it.
        cgq_warn ("store: the batch marker is %s, not one of ours (%s:*); not replaying", r->str,
                  self->marker_tag);
        freeReplyObject (r);
        self->fresh = false;
        return 0;
    }
    freeReplyObject (r);
    struct s_entry *last = &self->journal[(self->jhead + self->jlen - 1) % self->jcap];
    // What this Redis lacks must reach its replicas again before it counts.
    uint64_t lacks_from = ours ? have : self->journal[self->jhead].seq - 1;
    if (self->confirmed_seq > lacks_from)
        self->confirmed_seq = lacks_from;
    if (ours && have >= last->seq) {
        self->fresh = false;
        return 0;
    }
    struct s_entry *first = &self->journal[self->jhead];
    if (!ours)
        cgq_error ("store: Redis at %s came back without our batch marker (empty, or restored "
                   "from an old copy); replaying the %zu batch(es) still journaled, older state "
                   "is lost (check its persistence: appendonly yes, appendfsync everysec or always)",
                   self->url, self->jlen);
    else if (have + 1 < first->seq)
        cgq_error ("store: Redis at %s came back without batches %" PRIu64 " to %" PRIu64
                   ", which are no longer journaled (check its persistence: appendonly yes, "
                   "appendfsync everysec or always, and --durable-after)",
                   self->url, have + 1, first->seq - 1);
    size_t count = 0;
    for (size_t i = 0; i < self->jlen; i++) {
        struct s_entry *e = &self->journal[(self->jhead + i) % self->jcap];
        if (ours && e->seq <= have)
            continue;
        if (s_fence_check (self) < 0)
            return -1;
        if (redisAppendFormattedCommand (self->ctx, e->data, e->len) != REDIS_OK) {
            s_io_error (self, "replaying a lost batch");
            return -1;
        }
        for (size_t k = 0; k < e->ncmds + 2; k++) {
            redisReply *x = NULL;
            if (redisGetReply (self->ctx, (void **) &x) != REDIS_OK || !x) {
                s_io_error (self, "replaying a lost batch");
                return -1;
            }
            freeReplyObject (x);
        }
        count++;
    }
    // A replayed batch is only as durable as the replay: Redis may lose it
    // again in its next fsync window (a second crash), so it stays
    // journaled for the whole window from now, not from when it first went.
    int64_t now = cgq_now_ms ();
    for (size_t i = 0; i < self->jlen; i++) {
        struct s_entry *e = &self->journal[(self->jhead + i) % self->jcap];
        if (!ours || e->seq > have)
            e->at_ms = now;
    }
    self->replayed += count;
    cgq_warn ("store: Redis at %s came back older than what it acknowledged (marker %" PRIu64
              ", last %" PRIu64 "); replayed %zu journaled batch(es)",
              self->url, have, last->seq, count);
    self->fresh = false;
    return 0;
}

void
cgq_store_set_journal (cgq_store_t *self, int64_t window_ms)
{
    self->journal_ms = window_ms > 0 ? window_ms : 0;
}

uint64_t
cgq_store_replayed (const cgq_store_t *self)
{
    return self->replayed;
}

// s_fence_append queues WATCH fence_key fence_seq_key, GET fence_key, GET
// fence_seq_key. Both keys are watched: a lease that expired is still ours
// only while the sequence stands where we left it (s_fence_judge).
static int
s_fence_append (cgq_store_t *self)
{
    if (redisAppendCommand (self->ctx, "WATCH %s %s", self->fence_key, self->fence_seq_key)
            != REDIS_OK
        || redisAppendCommand (self->ctx, "GET %s", self->fence_key) != REDIS_OK
        || redisAppendCommand (self->ctx, "GET %s", self->fence_seq_key) != REDIS_OK) {
        s_io_error (self, "checking the lease");
        return -1;
    }
    return 0;
}

// s_fence_judge says what the replies to s_fence_append's commands mean:
// 0 (the lease is ours, watched from now on), 1 (another writer took over:
// self->errstr says how), or -1 (WATCH refused, or a reply missing).
static int
s_fence_judge (cgq_store_t *self, redisReply *const *r)
{
    if (!r[0] || !r[1] || !r[2])
        return -1;
    if (r[0]->type == REDIS_REPLY_ERROR) {
        snprintf (self->errstr, sizeof self->errstr, "Redis at %s refused WATCH: %s", self->url,
                  r[0]->str);
        return -1;
    }
    if (r[1]->type == REDIS_REPLY_STRING) {
        if (strcmp (r[1]->str, self->fence_val) != 0) {
            snprintf (self->errstr, sizeof self->errstr,
                      "fenced: %s is now '%s', not ours ('%s'): another writer took over",
                      self->fence_key, r[1]->str, self->fence_val);
            return 1;
        }
        return 0;
    }
    uint64_t seq = r[2]->type == REDIS_REPLY_STRING ? strtoull (r[2]->str, NULL, 10) : 0;
    if (seq != self->fence_seq) {
        snprintf (self->errstr, sizeof self->errstr,
                  "fenced: %s expired and %s moved on to %" PRIu64 " (ours: %" PRIu64 ")",
                  self->fence_key, self->fence_seq_key, seq, self->fence_seq);
        return 1;
    }
    return 0;
}

// s_fence_read reads the three replies s_fence_append asked for and judges
// them (s_fence_judge); -1 also on an I/O error.
static int
s_fence_read (cgq_store_t *self)
{
    redisReply *r[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++)
        if (redisGetReply (self->ctx, (void **) &r[i]) != REDIS_OK || !r[i]) {
            for (int k = 0; k < i; k++)
                freeReplyObject (r[k]);
            s_io_error (self, "checking the lease");
            return -1;
        }
    int rc = s_fence_judge (self, r);
    for (int i = 0; i < 3; i++)
        freeReplyObject (r[i]);
    return rc;
}

// s_fence_check WATCHes the fence key and checks that we still hold it, in
// one round trip. Returns 0 (go on: a takeover from now on aborts the
// next EXEC), or -1: fenced (self->fenced set, for good) or an I/O error.
static int
s_fence_check (cgq_store_t *self)
{
    if (!self->fence_key)
        return 0;
    if (self->fenced)
        return -1;
    // UNWATCH first: a key watched since the last EXEC and written since
    // (our own lease renewal) would abort the next EXEC whatever WATCH says.
    self->watch_armed = false;
    if (redisAppendCommand (self->ctx, "UNWATCH") != REDIS_OK || s_fence_append (self) < 0) {
        s_io_error (self, "checking the lease");
        return -1;
    }
    redisReply *u = NULL;
    if (redisGetReply (self->ctx, (void **) &u) != REDIS_OK || !u) {
        s_io_error (self, "checking the lease");
        return -1;
    }
    freeReplyObject (u);
    int rc = s_fence_read (self);
    if (rc == 1) {
        self->fenced = true;
        return -1;
    }
    if (rc < 0)
        cgq_store__disconnect (self);
    return rc;
}

void
cgq_store_set_fence (cgq_store_t *self, const char *key, const char *value, const char *seq_key,
                     uint64_t seq)
{
    free (self->fence_key);
    free (self->fence_val);
    free (self->fence_seq_key);
    self->fence_key = key ? cgq_xstrdup (key) : NULL;
    self->fence_val = key ? cgq_xstrdup (value) : NULL;
    self->fence_seq_key = key ? cgq_xstrdup (seq_key) : NULL;
    self->fence_seq = seq;
    self->fenced = false;
    self->watch_armed = false;
}

bool
cgq_store_fenced (const cgq_store_t *self)
{
    return self->fenced;
}

bool
cgq_store_lease_watched (const cgq_store_t *self)
{
    return self->watch_armed;
}

// s_flight_end forgets the flight (its commands stay in the batch).
static void
s_flight_end (cgq_store_t *self)
{
    free (self->fbad);
    free (self->fsent);
    for (int i = 0; i < 3; i++)
        if (self->ffence[i])
            freeReplyObject (self->ffence[i]);
    self->fbad = NULL;
    self->fsent = NULL;
    memset (self->ffence, 0, sizeof self->ffence);
    self->fcount = self->fgot = self->ftotal = self->fnbad = 0;
    self->fwait = false;
}

// s_send sends the whole batch as MULTI .. (marker) .. EXEC, then the next
// batch's lease WATCH, and returns without reading a reply: 0 (in flight),
// or -1 (not sent, or lost on the way: errstr; the batch is kept).
static int
s_send (cgq_store_t *self)
{
    size_t n = self->count;
    bool marked = self->marker_key != NULL;
    if (self->fenced || (!self->watch_armed && s_fence_check (self) < 0))
        return -1;
    redisContext *c = self->ctx;
    // EXEC ends the WATCH: the next one goes out behind it, in this round trip.
    self->watch_armed = false;
    bool rewatch = self->fence_key != NULL;
    if (marked) {
        // Recorded before the write: from here until a definite answer the
        // batch is in doubt (see s_resolve_doubt).
        snprintf (self->marker_id, sizeof self->marker_id, "%s:%" PRIu64, self->marker_tag,
                  ++self->marker_seq);
        self->marker_count = n;
    }
    // A marked batch goes out as one buffer, MULTI .. marker .. EXEC, which
    // the journal keeps as it is if Redis acknowledges it.
    char *sent = NULL;
    size_t sent_len = 0;
    if (marked) {
        char *mk = NULL;
        int mlen = redisFormatCommand (&mk, "HSET %s %s %s", self->marker_key, self->marker_field,
                                       self->marker_id);
        if (mlen < 0) {
            snprintf (self->errstr, sizeof self->errstr, "cannot format the batch marker");
            return -1;
        }
        sent_len = 15 + self->batch.len + (size_t) mlen + 14;
        sent = cgq_xmalloc (sent_len);
        memcpy (sent, "*1\r\n$5\r\nMULTI\r\n", 15);
        memcpy (sent + 15, self->batch.data, self->batch.len);
        memcpy (sent + 15 + self->batch.len, mk, (size_t) mlen);
        memcpy (sent + 15 + self->batch.len + mlen, "*1\r\n$4\r\nEXEC\r\n", 14);
        redisFreeCommand (mk);
    }
    bool queued = sent ? redisAppendFormattedCommand (c, sent, sent_len) == REDIS_OK
                       : redisAppendFormattedCommand (c, "*1\r\n$5\r\nMULTI\r\n", 15) == REDIS_OK
                             && redisAppendFormattedCommand (c, self->batch.data, self->batch.len)
                                    == REDIS_OK
                             && redisAppendFormattedCommand (c, "*1\r\n$4\r\nEXEC\r\n", 14)
                                    == REDIS_OK;
    // WAIT confirms this batch (and every earlier one on the connection) on
    // the replicas before its Acks go out (cgq_store_set_replicas).
    bool wait = marked && self->replicas > 0;
    if (queued && wait)
        queued = redisAppendCommand (c, "WAIT %d %d", self->replicas, self->wait_ms) == REDIS_OK;
    if (queued && rewatch && s_fence_append (self) < 0) {
        free (sent);
        return -1;
    }
    int done = 0;
    while (queued && !done)
        queued = redisBufferWrite (c, &done) == REDIS_OK;
    if (!queued) {
        s_io_error (self, "MULTI/EXEC");
        free (sent);
        return -1;
    }
    self->fcount = n;
    self->fstart_ms = cgq_now_ms ();
    self->fgot = 0;
    self->ftotal = n + 2 + (marked ? 1 : 0);
    self->frewatch = rewatch;
    self->fwait = wait;
    self->fwaited = -1;
    self->fnbad = 0;
    self->ftransient[0] = 0;
    self->frc = 0;
    self->fsent = sent;
    self->fsent_len = sent_len;
    return 0;
}

// s_on_reply takes the flight's next reply (and frees it, but the fence's).
static void
s_on_reply (cgq_store_t *self, redisReply *r)
{
    size_t i = self->fgot++, n = self->fcount, total = self->ftotal;
    char *transient = self->ftransient;
    size_t tsize = sizeof self->ftransient;
    if (i == total && self->fwait) {
        self->fwaited = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
        if (r->type == REDIS_REPLY_ERROR)
            cgq_warn ("store: Redis at %s refused WAIT: %s", self->url, r->str);
        freeReplyObject (r);
        return;
    }
    if (i >= total) {
        self->ffence[i - total - (self->fwait ? 1 : 0)] = r;
        return;
    }
    if (i == 0) {
        if (r->type == REDIS_REPLY_ERROR && !transient[0])
            snprintf (transient, tsize, "MULTI: %s", r->str);
    } else if (i > n && i + 1 < total) {
        if (r->type == REDIS_REPLY_ERROR && !transient[0]) // the marker
            snprintf (transient, tsize, "%s", r->str);
    } else if (i <= n) {
        if (r->type == REDIS_REPLY_ERROR) {
            // "ERR ..." at queue time means this command is malformed and
            // would fail forever; anything else (LOADING, OOM, NOAUTH,
            // READONLY) is the server's state and worth a retry.
            if (!strncmp (r->str, "ERR ", 4)) {
                if (!self->fbad)
                    self->fbad = cgq_xcalloc (n, sizeof *self->fbad);
                self->fbad[i - 1] = true;
                self->fnbad++;
                char name[48];
                s_cmd_name (self, i - 1, name, sizeof name);
                cgq_error ("Redis rejected command %zu (%s) of the batch: %s; dropping it", i - 1,
                           name, r->str);
            } else if (!transient[0])
                snprintf (transient, tsize, "%s", r->str);
        }
    } else {
        // EXEC
        if (r->type == REDIS_REPLY_ARRAY) {
            for (size_t j = 0; j < r->elements; j++) {
                redisReply *e = r->element[j];
                if (e && e->type == REDIS_REPLY_ERROR && j < n) {
                    char name[48];
                    s_cmd_name (self, j, name, sizeof name);
                    cgq_warn ("Redis rejected command %zu (%s) of the batch: %s", j, name, e->str);
                }
            }
            self->frc = 0;
        } else if (r->type == REDIS_REPLY_NIL) {
            // WATCH saw the fence key change: the next check tells
            // whether another writer took over.
            snprintf (self->errstr, sizeof self->errstr,
                      "Redis at %s aborted the batch (EXEC returned nil: %s changed); will "
                      "retry",
                      self->url, self->fence_key ? self->fence_key : "a watched key");
            self->frc = -1;
        } else if (r->type == REDIS_REPLY_ERROR) {
            if (transient[0] || !self->fnbad)
                snprintf (self->errstr, sizeof self->errstr,
                          "Redis at %s refused the batch of %zu commands: %s; will retry",
                          self->url, n, transient[0] ? transient : r->str);
            self->frc = self->fnbad && !transient[0] ? 1 : -1;
        } else {
            snprintf (self->errstr, sizeof self->errstr,
                      "Redis at %s answered EXEC with reply type %d; will retry", self->url,
                      r->type);
            self->frc = -1;
        }
    }
    freeReplyObject (r);
}

// s_flight_replies is how many replies the flight waits for in all.
static size_t
s_flight_replies (const cgq_store_t *self)
{
    return self->ftotal + (self->fwait ? 1 : 0) + (self->frewatch ? 3 : 0);
}

// s_finish ends a flight whose replies are all read (or whose connection
// broke after EXEC's). Returns 0 (applied: its commands leave the batch), 1
// (Redis refused some at queue time: those are dropped, the rest must go
// again) or -1 (not applied: they stay first in the batch).
static int
s_finish (cgq_store_t *self)
{
    int rc = self->frc;
    // Any definite answer (applied, aborted, refused) ends the doubt.
    self->marker_id[0] = 0;
    // The lease as it was right after this EXEC: ours arms the next batch;
    // not ours is found again, and acted on, by the next batch's own check.
    if (self->frewatch) {
        int frc = s_fence_judge (self, self->ffence);
        self->watch_armed = frc == 0 && self->ctx;
        if (frc < 0 && rc == 0)
            rc = -2; // applied, but the connection is not usable
    }
    if (rc == 0 || rc == -2) {
        self->applied_seq = self->marker_seq;
        if (self->fwait && self->fwaited >= self->replicas) {
            if (self->lagging)
                cgq_info ("store: %lld replica(s) of Redis at %s have every batch again (up to %" PRIu64
                          "); held Acks go out",
                          self->fwaited, self->url, self->marker_seq);
            self->lagging = false;
            self->confirmed_seq = self->marker_seq;
        } else if (self->fwait && !self->lagging) {
            self->lagging = true;
            cgq_warn ("store: only %lld of the %d replica(s) asked for (--redis-replicas) of Redis "
                      "at %s confirmed batch %" PRIu64 " within %d ms; its Acks wait, and it stays "
                      "journaled, until they do or a failover replays it",
                      self->fwaited < 0 ? 0 : self->fwaited, self->replicas, self->url,
                      self->marker_seq, self->wait_ms);
        }
    }
    if ((rc == 0 || rc == -2) && self->fsent && (self->journal_ms > 0 || self->replicas > 0)) {
        s_journal_add (self, self->marker_seq, self->fcount + 1, self->fsent, self->fsent_len);
        self->fsent = NULL;
    }
    size_t n = self->fcount;
    if (rc == 1)
        s_drop (self, self->fbad, n);
    if (rc == 0 || rc == -2)
        s_consume (self, n);
    s_flight_end (self);
    if (rc < 0)
        cgq_store__disconnect (self);
    return rc == -2 ? 0 : rc;
}

// s_wait reads the rest of the flight's replies, blocking, and ends it
// (s_finish's answer; -1 also when the connection broke before EXEC's).
static int
s_wait (cgq_store_t *self)
{
    while (self->fgot < s_flight_replies (self)) {
        redisReply *r = NULL;
        if (!self->ctx || redisGetReply (self->ctx, (void **) &r) != REDIS_OK || !r) {
            bool applied_known = self->fgot > self->ftotal - 1;
            s_io_error (self, "MULTI/EXEC");
            if (applied_known)
                return s_finish (self);
            s_flight_end (self); // in doubt (marker_id) until reconnected
            return -1;
        }
        s_on_reply (self, r);
    }
    return s_finish (self);
}

// s_prepare readies the connection for a batch: connected, no pipelined
// replies owed, an earlier batch in doubt settled, lost batches replayed.
// Returns 0, or -1 (errstr).
static int
s_prepare (cgq_store_t *self)
{
    if (s_ensure (self) < 0)
        return -1;
    // Replies owed to pipelined reads would be taken for MULTI's.
    while (self->appended > 0) {
        redisReply *r = cgq_store_get_reply (self);
        if (!r)
            return -1;
        cgq_warn ("store: discarded an unread pipelined reply before a flush");
        freeReplyObject (r);
    }
    if (s_resolve_doubt (self) < 0 || s_replay_lost (self) < 0)
        return -1;
    return 0;
}

// s_settle ends a flight before the connection is used for anything else;
// its outcome waits for cgq_store_flush_poll.
// Gated (cgq_store_set_gate), a command waits for the flight's answer to
// start arriving this long at most: past it the command fails at once
// (s_settle_gated) and the flight stays in flight, for the loop to poll.
#define S_SETTLE_MS 250

static void
s_settle (cgq_store_t *self)
{
    if (!self->fcount)
        return;
    int rc = s_wait (self);
    self->fdone = rc == 0 ? 1 : -1; // -1 also when Redis refused some: the rest goes next time
}

// s_settle_gated is s_settle for a command: gated, it returns -1 (errstr)
// rather than wait on a flight that Redis has not begun to answer.
static int
s_settle_gated (cgq_store_t *self)
{
    if (self->fcount && self->gate && self->ctx) {
        struct pollfd p = {.fd = self->ctx->fd, .events = POLLIN};
        if (poll (&p, 1, S_SETTLE_MS) == 0) {
            snprintf (self->errstr, sizeof self->errstr,
                      "Redis at %s has not answered the batch in flight for %" PRId64
                      " ms (not waiting longer for it here; will retry) " S_HINT,
                      self->url, cgq_now_ms () - self->fstart_ms);
            return -1;
        }
    }
    s_settle (self);
    return 0;
}

// s_resolve_doubt settles a batch whose EXEC went out but whose answer was
// lost with the connection: if the marker holds its id, Redis applied it and
// its commands (the first marker_count of the batch) are dropped rather than
// applied twice; otherwise they are sent again. Returns -1 if Redis cannot be read.
static int
s_resolve_doubt (cgq_store_t *self)
{
    if (!self->marker_id[0])
        return 0;
    redisReply *r = redisCommand (self->ctx, "HGET %s %s", self->marker_key, self->marker_field);
    if (!r) {
        s_io_error (self, "reading the batch marker");
        return -1;
    }
    bool applied = r->type == REDIS_REPLY_STRING && strcmp (r->str, self->marker_id) == 0;
    freeReplyObject (r);
    if (applied) {
        cgq_info ("store: the batch in doubt (%zu commands) was applied before the connection "
                  "was lost; not sending it again",
                  self->marker_count);
        bool *first = cgq_xcalloc (self->count ? self->count : 1, sizeof *first);
        for (size_t i = 0; i < self->marker_count && i < self->count; i++)
            first[i] = true;
        s_drop (self, first, self->count);
        free (first);
    }
    self->marker_id[0] = 0;
    return 0;
}

void
cgq_store_set_marker (cgq_store_t *self, const char *key, const char *field, const char *tag)
{
    free (self->marker_key);
    free (self->marker_field);
    free (self->marker_tag);
    self->marker_key = key ? cgq_xstrdup (key) : NULL;
    self->marker_field = key ? cgq_xstrdup (field) : NULL;
    self->marker_tag = key ? cgq_xstrdup (tag) : NULL;
    self->marker_id[0] = 0;
}

int
cgq_store_flush (cgq_store_t *self)
{
    s_settle (self);
    self->fdone = 0;
    if (self->count == 0)
        return 0;
    if (s_prepare (self) < 0)
        return -1;
    if (self->count == 0)
        return 0;
    int64_t t0 = cgq_now_ms ();
    size_t n = self->count;
    for (int round = 0; round < 3; round++) {
        int rc = s_send (self) < 0 ? -1 : s_wait (self);
        if (rc == 0) {
            cgq_debug ("store: flushed %zu commands in %" PRId64 " ms", n, cgq_now_ms () - t0);
            return 0;
        }
        if (rc < 0)
            return -1;
        if (self->count == 0)
            return 0;
    }
    snprintf (self->errstr, sizeof self->errstr,
              "Redis at %s kept rejecting commands of the batch; will retry", self->url);
    return -1;
}

int
cgq_store_flush_start (cgq_store_t *self)
{
    if (self->fcount || self->count == 0)
        return 0;
    if (s_prepare (self) < 0)
        return -1;
    if (self->count == 0)
        return 0;
    return s_send (self);
}

int
cgq_store_flush_poll (cgq_store_t *self, bool wait)
{
    if (self->fdone) {
        int d = self->fdone;
        self->fdone = 0;
        return d > 0 ? CGQ_FLUSH_DONE : CGQ_FLUSH_FAILED;
    }
    if (!self->fcount)
        return CGQ_FLUSH_IDLE;
    int rc;
    if (wait)
        rc = s_wait (self);
    else {
        struct pollfd p = {.fd = self->ctx ? self->ctx->fd : -1, .events = POLLIN};
        if (p.fd < 0 || poll (&p, 1, 0) <= 0) {
            // Gated, a flight has the same bound as a blocking read: past
            // it (plus WAIT's own time) the connection is dropped and the
            // batch is in doubt, as when a read times out.
            int64_t limit = self->timeout_ms + (self->fwait ? self->wait_ms : 0);
            if (!self->gate || !self->ctx || cgq_now_ms () - self->fstart_ms <= limit)
                return CGQ_FLUSH_FLYING;
            snprintf (self->ctx->errstr, sizeof self->ctx->errstr, "no answer within %" PRId64
                      " ms", limit);
            self->alive_ms = 0;
            self->probe_silent = true;
            bool applied_known = self->fgot > self->ftotal - 1;
            s_io_error (self, "MULTI/EXEC");
            if (applied_known)
                rc = s_finish (self);
            else {
                s_flight_end (self); // in doubt (marker_id) until reconnected
                rc = -1;
            }
            goto out;
        }
        if (redisBufferRead (self->ctx) != REDIS_OK) {
            rc = s_wait (self); // fails at once, as the connection did
        }
        else {
            for (;;) {
                if (self->fgot >= s_flight_replies (self))
                    break;
                redisReply *r = NULL;
                if (redisGetReplyFromReader (self->ctx, (void **) &r) != REDIS_OK) {
                    rc = s_wait (self);
                    goto out;
                }
                if (!r)
                    return CGQ_FLUSH_FLYING;
                s_on_reply (self, r);
            }
            rc = s_finish (self);
        }
    }
out:
    if (rc == 1) {
        // Redis refused some commands as malformed: they are dropped; the
        // rest goes again at once.
        if (self->count && s_send (self) == 0)
            return CGQ_FLUSH_FLYING;
        rc = self->count ? -1 : 0;
    }
    return rc == 0 ? CGQ_FLUSH_DONE : CGQ_FLUSH_FAILED;
}

bool
cgq_store_flying (const cgq_store_t *self)
{
    return self->fcount > 0;
}

int
cgq_store_fd (const cgq_store_t *self)
{
    return self->ctx ? self->ctx->fd : -1;
}

// s_transaction_cmd: fmt is one of the commands that a WATCH behind it
// would confuse (MULTI, EXEC, DISCARD, WATCH, UNWATCH).
static bool
s_transaction_cmd (const char *fmt)
{
    static const char *const names[] = {"MULTI", "EXEC", "DISCARD", "WATCH", "UNWATCH"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        size_t n = strlen (names[i]);
        if (!strncasecmp (fmt, names[i], n) && (fmt[n] == ' ' || !fmt[n]))
            return true;
    }
    return false;
}

// s_gated_wait: gated, a command's answer must begin within S_CMD_MS, not
// the whole timeout_ms: the loop that sends it answers nodes meanwhile. A
// Redis that took longer is dropped (the gate's probe then tells a slow one
// from a gone one) and the command fails. Returns 0, or -1 (errstr).
#define S_CMD_MS 300

static int
s_gated_wait (cgq_store_t *self)
{
    if (!self->gate)
        return 0;
    redisContext *c = self->ctx;
    int done = 0;
    while (!done)
        if (redisBufferWrite (c, &done) != REDIS_OK) {
            s_io_error (self, "a command");
            return -1;
        }
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    if (c->reader->pos < c->reader->len || poll (&p, 1, S_CMD_MS) > 0)
        return 0;
    snprintf (c->errstr, sizeof c->errstr, "no answer within %d ms", S_CMD_MS);
    s_io_error (self, "a command");
    self->probe_silent = true; // no waiting on the next probe either
    return -1;
}

redisReply *
cgq_store_command (cgq_store_t *self, const char *fmt, ...)
{
    if (s_settle_gated (self) < 0 || s_ensure (self) < 0)
        return NULL;
    self->watch_armed = false; // it may write the fence key, or EXEC
    va_list ap;
    va_start (ap, fmt);
    int rc = redisvAppendCommand (self->ctx, fmt, ap);
    va_end (ap);
    if (rc != REDIS_OK) {
        s_io_error (self, "a command");
        return NULL;
    }
    // The next batch's lease check rides behind the command, in its round
    // trip, as it rides behind an EXEC: UNWATCH (the command may have written
    // the fence key: our own lease renewal), then WATCH and the GETs. A
    // command, then a batch, is then two round trips, not three.
    bool want = self->fence_key && !self->fenced && !s_transaction_cmd (fmt);
    bool rearm = want && redisAppendCommand (self->ctx, "UNWATCH") == REDIS_OK
                 && s_fence_append (self) == 0;
    if (s_gated_wait (self) < 0)
        return NULL;
    redisReply *r = NULL;
    if (redisGetReply (self->ctx, (void **) &r) != REDIS_OK || !r) {
        s_io_error (self, "a command");
        return NULL;
    }
    if (want && !rearm)
        cgq_store__disconnect (self); // queued in part (out of memory): replies would not match
    else if (rearm) {
        redisReply *u = NULL;
        int frc = -1;
        if (redisGetReply (self->ctx, (void **) &u) == REDIS_OK && u) {
            freeReplyObject (u);
            frc = s_fence_read (self);
        }
        else
            s_io_error (self, "checking the lease");
        if (frc == 1)
            self->fenced = true;
        else if (frc < 0)
            cgq_store__disconnect (self); // replies may be left unread: a new connection
        self->watch_armed = frc == 0;
    }
    if (r->type == REDIS_REPLY_ERROR && !strncmp (r->str, "READONLY", 8)) {
        // A demoted master: the next command finds the new one.
        snprintf (self->errstr, sizeof self->errstr,
                  "Redis at %s is a replica now (%s); will reconnect", self->url, r->str);
        cgq_store__disconnect (self);
    }
    return r;
}

int
cgq_store_append (cgq_store_t *self, const char *fmt, ...)
{
    if (s_settle_gated (self) < 0 || s_ensure (self) < 0)
        return -1;
    self->watch_armed = false; // as for cgq_store_command
    va_list ap;
    va_start (ap, fmt);
    int rc = redisvAppendCommand (self->ctx, fmt, ap);
    va_end (ap);
    if (rc != REDIS_OK) {
        snprintf (self->errstr, sizeof self->errstr,
                  "cannot queue Redis command '%s' (a bug: check the format string)", fmt);
        return -1;
    }
    self->appended++;
    return 0;
}

redisReply *
cgq_store_get_reply (cgq_store_t *self)
{
    if (!self->ctx) {
        snprintf (self->errstr, sizeof self->errstr,
                  "not connected to Redis at %s (the connection was lost; append again)",
                  self->url);
        return NULL;
    }
    redisReply *r = NULL;
    if (redisGetReply (self->ctx, (void **) &r) != REDIS_OK || !r) {
        s_io_error (self, "a pipelined read");
        return NULL;
    }
    if (self->appended > 0)
        self->appended--;
    return r;
}
