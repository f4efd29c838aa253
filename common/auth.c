// auth: CURVE keys, the coordinator's ZAP handler, keygen, protected mode.
#include "auth.h"

#include <arpa/inet.h>
#include <czmq.h>
#include <errno.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "log.h"
#include "util.h"

#define S_ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define S_ZAP_DOMAIN "cgq"
#define S_LOG_PER_S 10 // refusals logged per second; the rest are counted only

// A watcher of one CURVE server socket's handshakes (cgq_auth_watch).
#define S_WATCH_FDS_MAX (1 << 22) // descriptors above this go unnamed
#define S_WATCH_QUEUE_MAX 65536 // events read ahead at most (8 bytes each)
typedef struct {
    cgq_auth_t *auth;
    void *pair;              // receives the socket's monitor events
    char what[16];           // "node", "control"
    pthread_t thread;
    bool started;
    int stop;                // set by cgq_auth_destroy (atomic)
    // Per descriptor: the peer address of its accepted connection (owned),
    // and how many of its DISCONNECTEDs wait in the queue; nfds of them.
    struct s_watch_fd {
        char *addr;
        uint32_t closing;
    } *fds;
    size_t nfds;
    // Events read but not yet handled (s_watch_read): an accepted fd's
    // address is trusted only if no disconnect of that fd is among them.
    struct s_watch_event {
        uint16_t event;
        uint32_t value;
    } *queue;
    size_t qcap, qhead, qlen;
    uint32_t failed;         // a handshake failure waiting for its disconnect (its code)
    bool failed_set;
    int64_t log_second;
    unsigned logged;
    uint64_t unlogged;
} s_watch_t;

struct cgq_auth_t {
    zcert_t *own;          // own key pair
    zcert_t *server;       // client: the coordinator's public certificate
    zcertstore_t *allow;   // server: the allow-list
    char *allow_dir;
    void *zap;             // server: REP bound to S_ZAP_ENDPOINT
    uint64_t refused, accepted;
    int64_t log_second;    // rate limit of refusal lines
    unsigned logged;       // lines in log_second
    uint64_t unlogged;     // refusals not logged since the last line
    s_watch_t *watch[2];   // handshake watchers (their threads add to refused)
    int nwatch;
};

static bool
s_given (const char *s)
{
    return s && *s;
}

// s_load reads a certificate; a secret one (NAME.key_secret, or a file
// holding a secret-key) when want_secret.
static zcert_t *
s_load (const char *path, const char *flag, bool want_secret, char *err, size_t errlen)
{
    struct stat st;
    if (stat (path, &st) < 0) {
        snprintf (err, errlen, "%s %s: %s (write a key pair with `cgq keygen NAME`)", flag, path,
                  strerror (errno));
        return NULL;
    }
    zcert_t *cert = zcert_load (path);
    if (!cert) {
        snprintf (err, errlen, "%s %s: not a CURVE certificate (write one with `cgq keygen NAME`)",
                  flag, path);
        return NULL;
    }
    static const char zero[41] = "0000000000000000000000000000000000000000";
    if (want_secret && strcmp (zcert_secret_txt (cert), zero) == 0) {
        snprintf (err, errlen,
                  "%s %s: holds no secret key (give the NAME.key_secret file that `cgq keygen` "
                  "wrote, not the public NAME.key)",
                  flag, path);
        zcert_destroy (&cert);
        return NULL;
    }
    if (want_secret && (st.st_mode & 077))
        cgq_warn ("%s %s is readable by other users (mode %03o); chmod 600 it", flag, path,
                  (unsigned) (st.st_mode & 0777));
    return cert;
}

int
cgq_auth_client_new (const char *secret_path, const char *server_path, cgq_auth_t **out,
                     char *err, size_t errlen)
{
    *out = NULL;
    if (!s_given (secret_path) && !s_given (server_path))
        return 0;
    if (!s_given (secret_path) || !s_given (server_path)) {
        snprintf (err, errlen,
                  "CURVE needs both --curve-secret (this node's NAME.key_secret) and "
                  "--curve-server (the coordinator's public .key); only %s is set",
                  s_given (secret_path) ? "--curve-secret" : "--curve-server");
        return -1;
    }
    cgq_auth_t *self = cgq_xcalloc (1, sizeof *self);
    self->own = s_load (secret_path, "--curve-secret", true, err, errlen);
    if (self->own)
        self->server = s_load (server_path, "--curve-server", false, err, errlen);
    if (!self->own || !self->server) {
        cgq_auth_destroy (&self);
        return -1;
    }
    *out = self;
    return 0;
}

int
cgq_auth_client_apply (const cgq_auth_t *self, void *sock)
{
    if (!self)
        return 0;
    if (zmq_setsockopt (sock, ZMQ_CURVE_SERVERKEY, zcert_public_key (self->server), 32) < 0
        || zmq_setsockopt (sock, ZMQ_CURVE_PUBLICKEY, zcert_public_key (self->own), 32) < 0
        || zmq_setsockopt (sock, ZMQ_CURVE_SECRETKEY, zcert_secret_key (self->own), 32) < 0)
        return -1;
    return 0;
}

int
cgq_auth_server_new (void *zctx, const char *secret_path, const char *allow_dir,
                     cgq_auth_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!s_given (secret_path) && !s_given (allow_dir))
        return 0;
    if (!s_given (secret_path) || !s_given (allow_dir)) {
        snprintf (err, errlen,
                  "CURVE needs both --curve-secret (the coordinator's NAME.key_secret) and "
                  "--curve-allow (a directory of the public .key files of allowed nodes and "
                  "users); only %s is set",
                  s_given (secret_path) ? "--curve-secret" : "--curve-allow");
        return -1;
    }
    struct stat st;
    if (stat (allow_dir, &st) < 0 || !S_ISDIR (st.st_mode)) {
        snprintf (err, errlen,
                  "--curve-allow %s: %s (create it and copy there the NAME.key file of each "
                  "worker and user)",
                  allow_dir, errno ? strerror (errno) : "not a directory");
        return -1;
    }
    cgq_auth_t *self = cgq_xcalloc (1, sizeof *self);
    self->own = s_load (secret_path, "--curve-secret", true, err, errlen);
    if (!self->own) {
        cgq_auth_destroy (&self);
        return -1;
    }
    self->allow_dir = cgq_xstrdup (allow_dir);
    self->allow = zcertstore_new (allow_dir);
    self->zap = zmq_socket (zctx, ZMQ_REP);
    int linger = 0;
    if (self->zap)
        zmq_setsockopt (self->zap, ZMQ_LINGER, &linger, sizeof linger);
    if (!self->allow || !self->zap || zmq_bind (self->zap, S_ZAP_ENDPOINT) < 0) {
        snprintf (err, errlen, "cannot start the CURVE authentication handler: %s",
                  zmq_strerror (zmq_errno ()));
        cgq_auth_destroy (&self);
        return -1;
    }
    *out = self;
    return 0;
}

int
cgq_auth_server_apply (const cgq_auth_t *self, void *sock)
{
    if (!self)
        return 0;
    int one = 1;
    if (zmq_setsockopt (sock, ZMQ_CURVE_SERVER, &one, sizeof one) < 0
        || zmq_setsockopt (sock, ZMQ_CURVE_SECRETKEY, zcert_secret_key (self->own), 32) < 0
        || zmq_setsockopt (sock, ZMQ_ZAP_DOMAIN, S_ZAP_DOMAIN, strlen (S_ZAP_DOMAIN)) < 0)
        return -1;
    return 0;
}

void *
cgq_auth_zap_socket (const cgq_auth_t *self)
{
    return self ? self->zap : NULL;
}

// s_printable copies at most 64 bytes of a routing id, '?' for what is not
// printable ASCII.
static void
s_printable (char *out, const zmq_msg_t *m)
{
    size_t n = zmq_msg_size ((zmq_msg_t *) m);
    const unsigned char *p = zmq_msg_data ((zmq_msg_t *) m);
    if (n > 64)
        n = 64;
    for (size_t i = 0; i < n; i++)
        out[i] = p[i] >= 0x20 && p[i] < 0x7f ? (char) p[i] : '?';
    out[n] = 0;
}

static void
s_log_refusal (cgq_auth_t *self, const char *key, const char *addr, const char *rid,
               const char *why)
{
    int64_t second = cgq_now_ms () / 1000;
    if (second != self->log_second) {
        if (self->unlogged)
            cgq_warn ("refused %llu more peer(s) without logging each",
                      (unsigned long long) self->unlogged);
        self->log_second = second;
        self->logged = 0;
        self->unlogged = 0;
    }
    if (self->logged >= S_LOG_PER_S) {
        self->unlogged++;
        return;
    }
    self->logged++;
    if (*rid)
        cgq_warn ("refused a peer from %s, routing id '%s' (CURVE key %s): %s", addr, rid, key,
                  why);
    else
        cgq_warn ("refused a peer from %s (CURVE key %s): %s", addr, key, why);
}

// s_reply sends the ZAP reply: version, request id, status, text, user id,
// metadata.
static void
s_reply (cgq_auth_t *self, zmq_msg_t *req_id, const char *status, const char *text,
         const char *user)
{
    zmq_send (self->zap, "1.0", 3, ZMQ_SNDMORE);
    zmq_send (self->zap, zmq_msg_data (req_id), zmq_msg_size (req_id), ZMQ_SNDMORE);
    zmq_send (self->zap, status, strlen (status), ZMQ_SNDMORE);
    zmq_send (self->zap, text, strlen (text), ZMQ_SNDMORE);
    zmq_send (self->zap, user, strlen (user), ZMQ_SNDMORE);
    zmq_send (self->zap, "", 0, 0);
}

// s_handle_one answers one ZAP request: version, request id, domain,
// address, routing id, mechanism, then the credentials (CURVE: the client's
// 32-byte public key). Returns -1 when none was waiting.
static int
s_handle_one (cgq_auth_t *self)
{
    enum { N = 8 };
    zmq_msg_t f[N];
    int n = 0;
    bool more = true;
    while (more) {
        zmq_msg_t m;
        zmq_msg_init (&m);
        if (zmq_msg_recv (&m, self->zap, n == 0 ? ZMQ_DONTWAIT : 0) < 0) {
            zmq_msg_close (&m);
            if (n == 0)
                return -1;
            break;
        }
        more = zmq_msg_more (&m);
        if (n < N)
            f[n++] = m;
        else
            zmq_msg_close (&m);
    }
    if (n < 2) {
        // A REP socket must answer; a request this short cannot name one.
        for (int i = 0; i < n; i++)
            zmq_msg_close (&f[i]);
        zmq_send (self->zap, "", 0, 0);
        return 0;
    }
    char addr[64] = "?", rid[65] = "", key[41] = "(none)", mech[16] = "";
    if (n > 3)
        snprintf (addr, sizeof addr, "%.*s", (int) zmq_msg_size (&f[3]),
                  (const char *) zmq_msg_data (&f[3]));
    if (n > 4)
        s_printable (rid, &f[4]);
    if (n > 5)
        snprintf (mech, sizeof mech, "%.*s", (int) zmq_msg_size (&f[5]),
                  (const char *) zmq_msg_data (&f[5]));
    bool curve = n > 6 && strcmp (mech, "CURVE") == 0 && zmq_msg_size (&f[6]) == 32;
    if (curve)
        zmq_z85_encode (key, zmq_msg_data (&f[6]), 32);
    zcert_t *cert = curve ? zcertstore_lookup (self->allow, key) : NULL;
    if (cert) {
        const char *name = zcert_meta (cert, "name");
        self->accepted++;
        cgq_debug ("accepted a peer from %s (routing id '%s', CURVE key %s%s%s)", addr, rid, key,
                   name ? ", name " : "", name ? name : "");
        // The user id is the key itself: every message of this connection
        // carries it ("User-Id"), and the coordinator checks the node ids
        // the message claims against it (cgq_auth_may_claim).
        s_reply (self, &f[1], "200", "OK", key);
    }
    else {
        __atomic_fetch_add (&self->refused, 1, __ATOMIC_RELAXED);
        char why[512];
        if (curve)
            snprintf (why, sizeof why,
                      "its public key is not in --curve-allow %s (copy its NAME.key there to "
                      "allow it)",
                      self->allow_dir);
        else
            snprintf (why, sizeof why, "mechanism %s is not CURVE", *mech ? mech : "(none)");
        s_log_refusal (self, key, addr, rid, why);
        s_reply (self, &f[1], "400", "key not allowed", "");
    }
    for (int i = 0; i < n; i++)
        zmq_msg_close (&f[i]);
    return 0;
}

void
cgq_auth_zap_handle (cgq_auth_t *self)
{
    if (!self || !self->zap)
        return;
    // Bounded: a flood of connections must not hold the loop.
    for (int i = 0; i < 256; i++)
        if (s_handle_one (self) < 0)
            break;
}

// s_nodes_of writes into out the node id patterns of cert (see auth.h).
static void
s_nodes_of (zcert_t *cert, char *out, size_t len)
{
    const char *nodes = zcert_meta (cert, "nodes");
    const char *name = zcert_meta (cert, "name");
    if (nodes)
        snprintf (out, len, "%s", nodes);
    else if (name && *name)
        snprintf (out, len, "%s,%s-*", name, name);
    else
        snprintf (out, len, "%s", "");
}

bool
cgq_auth_may_claim (cgq_auth_t *self, const char *key_txt, const char *node_id, char *allowed,
                    size_t allowed_len)
{
    char pats[512] = "";
    zcert_t *cert = self && self->allow && key_txt && strlen (key_txt) == 40
                        ? zcertstore_lookup (self->allow, key_txt)
                        : NULL;
    if (cert)
        s_nodes_of (cert, pats, sizeof pats);
    if (allowed && allowed_len)
        snprintf (allowed, allowed_len, "%s", cert ? pats : "(a key not in the allow-list)");
    if (!cert)
        return false;
    char *save = NULL;
    for (char *tok = strtok_r (pats, ",", &save); tok; tok = strtok_r (NULL, ",", &save)) {
        while (*tok == ' ' || *tok == '\t')
            tok++;
        size_t n = strlen (tok);
        while (n && (tok[n - 1] == ' ' || tok[n - 1] == '\t'))
            tok[--n] = 0;
        if (n && fnmatch (tok, node_id, 0) == 0)
            return true;
    }
    return false;
}

uint64_t
cgq_auth_refused (const cgq_auth_t *self)
{
    return self ? __atomic_load_n (&self->refused, __ATOMIC_RELAXED) : 0;
}

// ---------------------------------------------------------------------------
// Peers refused before ZAP: a client without CURVE (the greeting names
// another mechanism) or with another server key (its HELLO does not decrypt)
// never reaches the ZAP handler; libzmq reports such a failure only as a
// monitor event, and names only the bound endpoint in it. The peer's address
// has to be read from the accepted descriptor while the connection exists,
// which a loop polling the monitor among its other work would often miss:
// so a small thread per socket (the only threads cgq starts) reads the
// events as they come, records getpeername() of each accepted descriptor,
// and logs a failed handshake with the address of the descriptor that
// libzmq disconnects right after it (one I/O thread emits both in a row).
// It touches nothing of the daemon but the atomic refusal counter and the
// logger (one write(2) a line). A thread that lags behind the I/O thread
// could read an fd that was closed and given to a later peer: the address
// is read only while no disconnect of that fd is queued, and dropped if
// one came in meanwhile (s_watch_gone).

static void
s_watch_log (s_watch_t *w, const char *addr, uint32_t code)
{
    __atomic_fetch_add (&w->auth->refused, 1, __ATOMIC_RELAXED);
    int64_t second = cgq_now_ms () / 1000;
    if (second != w->log_second) {
        if (w->unlogged)
            cgq_warn ("refused %llu more peer(s) on the %s socket without logging each",
                      (unsigned long long) w->unlogged, w->what);
        w->log_second = second;
        w->logged = 0;
        w->unlogged = 0;
    }
    if (w->logged >= S_LOG_PER_S) {
        w->unlogged++;
        return;
    }
    w->logged++;
    const char *why;
    char buf[160];
    if (code == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH)
        why = "it does not use CURVE (give it --curve-secret, its NAME.key_secret, and "
              "--curve-server, this coordinator's public .key)";
    else if (code == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC)
        why = "its CURVE handshake does not decrypt: its --curve-server is not this "
              "coordinator's public key";
    else {
        snprintf (buf, sizeof buf, "its ZeroMQ handshake failed (error 0x%x): not a cgq peer?",
                  (unsigned) code);
        why = buf;
    }
    cgq_warn ("refused a peer from %s on the %s socket: %s", addr, w->what, why);
}

// s_watch_slot makes room for fd in w->fds: a coordinator of thousands of
// nodes holds descriptors past 1024. False past S_WATCH_FDS_MAX.
static bool
s_watch_slot (s_watch_t *w, int fd)
{
    if (fd < 0)
        return false;
    if ((size_t) fd < w->nfds)
        return true;
    if (fd >= S_WATCH_FDS_MAX)
        return false;
    size_t n = w->nfds ? w->nfds : 256;
    while (n <= (size_t) fd)
        n *= 2;
    w->fds = cgq_xrealloc (w->fds, n * sizeof *w->fds);
    memset (w->fds + w->nfds, 0, (n - w->nfds) * sizeof *w->fds);
    w->nfds = n;
    return true;
}

// s_watch_read appends the events waiting on the monitor socket to w's
// queue, without waiting, until none is left or S_WATCH_QUEUE_MAX are
// queued (a burst of accepts: thousands of nodes reconnecting). False when
// the context is ending.
static bool
s_watch_read (s_watch_t *w)
{
    for (;;) {
        if (w->qlen == w->qcap) {
            if (w->qcap >= S_WATCH_QUEUE_MAX)
                return true;
            // Grow, the queued events first in the new ring.
            size_t cap = w->qcap ? w->qcap * 2 : 256;
            struct s_watch_event *q = cgq_xmalloc (cap * sizeof *q);
            for (size_t i = 0; i < w->qlen; i++)
                q[i] = w->queue[(w->qhead + i) % w->qcap];
            free (w->queue);
            w->queue = q;
            w->qcap = cap;
            w->qhead = 0;
        }
        zmq_msg_t ev, ep;
        zmq_msg_init (&ev);
        zmq_msg_init (&ep);
        if (zmq_msg_recv (&ev, w->pair, ZMQ_DONTWAIT) < 0) {
            int e = zmq_errno ();
            zmq_msg_close (&ev);
            zmq_msg_close (&ep);
            return e == EAGAIN || e == EINTR;
        }
        if (zmq_msg_more (&ev))
            zmq_msg_recv (&ep, w->pair, 0); // the rest of an event is there with its first part
        size_t at = (w->qhead + w->qlen) % w->qcap;
        w->queue[at].event = 0;
        w->queue[at].value = 0;
        if (zmq_msg_size (&ev) >= 6) {
            memcpy (&w->queue[at].event, zmq_msg_data (&ev), 2);
            memcpy (&w->queue[at].value, (char *) zmq_msg_data (&ev) + 2, 4);
        }
        if (w->queue[at].event == ZMQ_EVENT_DISCONNECTED
            && s_watch_slot (w, (int) w->queue[at].value))
            w->fds[w->queue[at].value].closing++;
        w->qlen++;
        zmq_msg_close (&ev);
        zmq_msg_close (&ep);
    }
    return true;
}

// s_watch_gone: the connection of fd is closed, or may be, as far as the
// queued events behind the one being handled (an ACCEPTED of fd) tell.
// libzmq queues an fd's DISCONNECTED before it closes the fd, so while none
// is queued the fd is still that connection's and not yet a later one's (a
// full queue hides what follows it: gone, to be safe).
static bool
s_watch_gone (const s_watch_t *w, int fd)
{
    return w->qlen >= S_WATCH_QUEUE_MAX || (size_t) fd >= w->nfds || w->fds[fd].closing > 0;
}

static void *
s_watch_run (void *arg)
{
    s_watch_t *w = arg;
    for (;;) {
        if (__atomic_load_n (&w->stop, __ATOMIC_ACQUIRE))
            break;
        if (!w->qlen) {
            zmq_pollitem_t item = {w->pair, 0, ZMQ_POLLIN, 0};
            int rc = zmq_poll (&item, 1, 100);
            if (rc < 0 && zmq_errno () != EINTR)
                break;
            if (rc <= 0)
                continue;
            if (!s_watch_read (w))
                break; // the context is ending
            if (!w->qlen)
                continue;
        }
        uint16_t event = w->queue[w->qhead].event;
        uint32_t value = w->queue[w->qhead].value;
        int fd = (int) value;
        if (event == ZMQ_EVENT_MONITOR_STOPPED)
            break;
        if (event == ZMQ_EVENT_ACCEPTED && s_watch_slot (w, fd)) {
            struct sockaddr_storage sa;
            socklen_t len = sizeof sa;
            char host[INET6_ADDRSTRLEN] = "?", out[INET6_ADDRSTRLEN + 16];
            unsigned port = 0;
            // Read only while the fd is surely this connection's, and kept
            // only if it still was after the read: else the address could
            // be a later peer's, which took the number over.
            s_watch_read (w);
            if (!s_watch_gone (w, fd) && getpeername (fd, (struct sockaddr *) &sa, &len) == 0) {
                if (sa.ss_family == AF_INET) {
                    struct sockaddr_in *in = (struct sockaddr_in *) &sa;
                    inet_ntop (AF_INET, &in->sin_addr, host, sizeof host);
                    port = ntohs (in->sin_port);
                }
                else if (sa.ss_family == AF_INET6) {
                    struct sockaddr_in6 *in = (struct sockaddr_in6 *) &sa;
                    inet_ntop (AF_INET6, &in->sin6_addr, host, sizeof host);
                    port = ntohs (in->sin6_port);
                }
                s_watch_read (w);
                if (s_watch_gone (w, fd))
                    port = 0;
            }
            if (port)
                snprintf (out, sizeof out, "%s:%u", host, port);
            else
                snprintf (out, sizeof out, "an address that closed before it could be read");
            free (w->fds[fd].addr);
            w->fds[fd].addr = cgq_xstrdup (out);
        }
        else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL
                 || event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
            w->failed = value;
            w->failed_set = true;
        }
        else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
            w->failed_set = false; // refused by ZAP, which logged it
        else if (event == ZMQ_EVENT_DISCONNECTED) {
            bool known = fd >= 0 && (size_t) fd < w->nfds;
            const char *addr = known && w->fds[fd].addr ? w->fds[fd].addr : "an unknown address";
            if (w->failed_set)
                s_watch_log (w, addr, w->failed);
            w->failed_set = false;
            if (known) {
                free (w->fds[fd].addr);
                w->fds[fd].addr = NULL;
                if (w->fds[fd].closing)
                    w->fds[fd].closing--; // this one, counted when it was queued
            }
        }
        w->qhead = (w->qhead + 1) % w->qcap;
        w->qlen--;
    }
    return NULL;
}

int
cgq_auth_watch (cgq_auth_t *self, void *zctx, void *sock, const char *what)
{
    if (!self)
        return 0;
    if (self->nwatch >= 2) {
        errno = ENOSPC;
        return -1;
    }
    s_watch_t *w = cgq_xcalloc (1, sizeof *w);
    w->auth = self;
    snprintf (w->what, sizeof w->what, "%s", what);
    char ep[64];
    snprintf (ep, sizeof ep, "inproc://cgq-auth-watch-%p", (void *) w);
    int events = ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL
                 | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;
    if (zmq_socket_monitor (sock, ep, events) < 0) {
        free (w);
        return -1;
    }
    w->pair = zmq_socket (zctx, ZMQ_PAIR);
    int zero = 0;
    if (w->pair)
        zmq_setsockopt (w->pair, ZMQ_LINGER, &zero, sizeof zero);
    if (!w->pair || zmq_connect (w->pair, ep) < 0
        || pthread_create (&w->thread, NULL, s_watch_run, w) != 0) {
        int e = errno;
        zmq_socket_monitor (sock, NULL, 0);
        if (w->pair)
            zmq_close (w->pair);
        free (w);
        errno = e;
        return -1;
    }
    w->started = true;
    self->watch[self->nwatch++] = w;
    return 0;
}

uint64_t
cgq_auth_accepted (const cgq_auth_t *self)
{
    return self ? self->accepted : 0;
}

const char *
cgq_auth_public_txt (const cgq_auth_t *self)
{
    return self && self->own ? zcert_public_txt (self->own) : "";
}

void
cgq_auth_destroy (cgq_auth_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cgq_auth_t *self = *self_p;
    for (int i = 0; i < self->nwatch; i++) {
        // The thread ends within its poll interval.
        s_watch_t *w = self->watch[i];
        __atomic_store_n (&w->stop, 1, __ATOMIC_RELEASE);
        if (w->started)
            pthread_join (w->thread, NULL);
        zmq_close (w->pair);
        for (size_t fd = 0; fd < w->nfds; fd++)
            free (w->fds[fd].addr);
        free (w->fds);
        free (w->queue);
        free (w);
    }
    if (self->zap)
        zmq_close (self->zap);
    zcert_destroy (&self->own);
    zcert_destroy (&self->server);
    zcertstore_destroy (&self->allow);
    free (self->allow_dir);
    free (self);
    *self_p = NULL;
}

static bool
s_name_ok (const char *name)
{
    if (!*name || *name == '.' || strlen (name) > 100)
        return false;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')
              || *p == '-' || *p == '_' || *p == '.'))
            return false;
    return true;
}

int
cgq_auth_keygen (const char *dir, const char *name, const char *nodes, char *pub_txt, char *err,
                 size_t errlen)
{
    if (!s_name_ok (name)) {
        snprintf (err, errlen,
                  "bad key name '%s' (use letters, digits, '-', '_' and '.', not first, at most "
                  "100)",
                  name);
        return -1;
    }
    mode_t old = umask (077);
    int rc = cgq_mkdir_p (dir);
    umask (old);
    if (rc < 0) {
        snprintf (err, errlen, "cannot create %s: %s", dir, strerror (errno));
        return -1;
    }
    char *pub = cgq_xasprintf ("%s/%s.key", dir, name);
    char *sec = cgq_xasprintf ("%s/%s.key_secret", dir, name);
    rc = -1;
    if (access (pub, F_OK) == 0 || access (sec, F_OK) == 0) {
        snprintf (err, errlen, "%s already exists; not overwriting a key (remove it first, or pick "
                               "another name)",
                  access (pub, F_OK) == 0 ? pub : sec);
        goto done;
    }
    zcert_t *cert = zcert_new ();
    if (!cert) {
        snprintf (err, errlen, "cannot make a key pair: %s", zmq_strerror (zmq_errno ()));
        goto done;
    }
    zcert_set_meta (cert, "name", "%s", name);
    if (nodes)
        zcert_set_meta (cert, "nodes", "%s", nodes);
    else
        zcert_set_meta (cert, "nodes", "%s,%s-*", name, name);
    zcert_set_meta (cert, "created-by", "cgq keygen");
    // The secret file is born 0600: no moment at which others may read it.
    old = umask (077);
    int src = zcert_save_secret (cert, sec);
    umask (old);
    int prc = src == 0 ? zcert_save_public (cert, pub) : -1;
    if (src == 0)
        chmod (sec, 0600);
    if (prc == 0)
        chmod (pub, 0644);
    if (src < 0 || prc < 0) {
        snprintf (err, errlen, "cannot write %s: %s", src < 0 ? sec : pub, strerror (errno));
        unlink (sec);
        zcert_destroy (&cert);
        goto done;
    }
    snprintf (pub_txt, 41, "%s", zcert_public_txt (cert));
    zcert_destroy (&cert);
    rc = 0;
done:
    free (pub);
    free (sec);
    return rc;
}

bool
cgq_auth_loopback_only (const char *endpoint)
{
    if (!strncmp (endpoint, "ipc://", 6) || !strncmp (endpoint, "inproc://", 9))
        return true;
    if (strncmp (endpoint, "tcp://", 6) != 0)
        return false;
    const char *h = endpoint + 6;
    const char *colon = strrchr (h, ':');
    if (!colon)
        return false;
    char host[128];
    size_t n = (size_t) (colon - h);
    if (n >= sizeof host)
        return false;
    memcpy (host, h, n);
    host[n] = 0;
    if (!strcmp (host, "localhost") || !strcmp (host, "lo") || !strcmp (host, "[::1]"))
        return true;
    struct in_addr a;
    return inet_pton (AF_INET, host, &a) == 1 && (ntohl (a.s_addr) >> 24) == 127;
}
