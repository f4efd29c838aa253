// http: the coordinator's HTTP server on libmicrohttpd's threads (see http.h).
#include "http.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "api.h"
#include "log.h"
#include "sse.h"
#include "store.h"
#include "util.h"
#include "web_assets.h"

// Browsers and scrapers are few; a client that opens more waits. An idle or
// slow one is cut after this many seconds.
#define S_MAX_CONNECTIONS 64
#define S_CONN_TIMEOUT_S 10
#define S_THREADS 4
// A path longer than this is refused (400): no page or API path comes near.
#define S_MAX_PATH 256
// How long a scrape waits for the loop to render /metrics.
#define S_METRICS_WAIT_MS 5000
// The API's Redis connection: connect and each command bounded.
#define S_REDIS_TIMEOUT_MS 5000
#define S_COOKIE "cgq_token"

static const char *const s_csp = "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; "
                                 "form-action 'none'";

struct http_srv_s {
    struct MHD_Daemon *mhd;
    char *(*page) (void *arg, int timeout_ms);
    void *page_arg;
    char *redis; // NULL: no API
    char *token; // NULL: none wanted
    int port;
    pthread_key_t store_key; // each thread's own Redis connection
    sse_t *sse;              // /api/events (NULL: no API)
};

static void
s_store_free (void *p)
{
    cgq_store_t *st = p;
    cgq_store_destroy (&st);
}

// s_store is this thread's Redis connection (made on first use).
static cgq_store_t *
s_store (struct http_srv_s *s)
{
    cgq_store_t *st = pthread_getspecific (s->store_key);
    if (!st) {
        char err[512];
        st = cgq_store_new (s->redis, S_REDIS_TIMEOUT_MS, err, sizeof err);
        if (st)
            pthread_setspecific (s->store_key, st);
    }
    return st;
}

bool
http_token_equal (const char *expected, const char *given)
{
    size_t n = strlen (expected), m = given ? strlen (given) : 0;
    unsigned char diff = n != m;
    // Every byte of the expected token is looked at, whatever was given.
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)expected[i] ^ (unsigned char)(i < m ? given[i] : 0);
    return diff == 0;
}

// --- answering --------------------------------------------------------------

static enum MHD_Result
s_send (struct MHD_Connection *conn, unsigned code, const void *data, size_t len,
        enum MHD_ResponseMemoryMode mode, const char *type, const char *cookie)
{
    struct MHD_Response *r = MHD_create_response_from_buffer (len, (void *)data, mode);
    if (!r) {
        if (mode == MHD_RESPMEM_MUST_FREE)
            free ((void *)data);
        return MHD_NO;
    }
    MHD_add_response_header (r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header (r, "Content-Security-Policy", s_csp);
    MHD_add_response_header (r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header (r, "Referrer-Policy", "no-referrer");
    MHD_add_response_header (r, "Cache-Control", "no-store");
    if (code == MHD_HTTP_UNAUTHORIZED)
        MHD_add_response_header (r, "WWW-Authenticate", "Bearer realm=\"cgq\"");
    if (cookie)
        MHD_add_response_header (r, "Set-Cookie", cookie);
    enum MHD_Result rc = MHD_queue_response (conn, code, r);
    MHD_destroy_response (r);
    return rc;
}

// s_headers: the headers every answer carries, for sse.c's.
static void
s_headers (struct MHD_Response *r)
{
    MHD_add_response_header (r, "Content-Security-Policy", s_csp);
    MHD_add_response_header (r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header (r, "Referrer-Policy", "no-referrer");
    MHD_add_response_header (r, "Cache-Control", "no-store");
}

static enum MHD_Result
s_text (struct MHD_Connection *conn, unsigned code, char *body)
{
    return s_send (conn, code, body, strlen (body), MHD_RESPMEM_MUST_FREE,
                   "text/plain; charset=utf-8", NULL);
}

static const cgq_web_asset_t *
s_asset (const char *name)
{
    for (size_t i = 0; i < cgq_web_nassets; i++)
        if (!strcmp (cgq_web_assets[i].name, name))
            return &cgq_web_assets[i];
    return NULL;
}

static const char *
s_type (const char *name)
{
    const char *dot = strrchr (name, '.');
    if (dot && !strcmp (dot, ".html"))
        return "text/html; charset=utf-8";
    if (dot && !strcmp (dot, ".js"))
        return "text/javascript; charset=utf-8";
    if (dot && !strcmp (dot, ".css"))
        return "text/css; charset=utf-8";
    return "application/octet-stream";
}

static enum MHD_Result
s_file (struct MHD_Connection *conn, const char *name, const char *cookie)
{
    const cgq_web_asset_t *a = s_asset (name);
    if (!a)
        return s_text (conn, MHD_HTTP_NOT_FOUND, cgq_xasprintf ("no file %s here\n", name));
    return s_send (conn, MHD_HTTP_OK, a->data, a->len, MHD_RESPMEM_PERSISTENT, s_type (name),
                   cookie);
}

static bool
s_digits (const char *s)
{
    if (!*s || strlen (s) > 19)
        return false;
    for (; *s; s++)
        if (!isdigit ((unsigned char)*s))
            return false;
    return true;
}

static int
s_hex (char c)
{
    return c >= '0' && c <= '9'                     ? c - '0'
           : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10
                                                    : -1;
}

// s_unescape decodes %XX in the path and query arguments in place, as
// libmicrohttpd would, except %00: C strings would end there and
// "/static/app.js%00.html" would read as "/static/app.js"; it stays as
// the three characters, which no path or argument accepts.
static size_t
s_unescape (void *cls, struct MHD_Connection *conn, char *s)
{
    (void)cls;
    (void)conn;
    char *w = s;
    for (const char *r = s; *r;) {
        if (r[0] == '%' && s_hex (r[1]) >= 0 && s_hex (r[2]) >= 0 &&
            (s_hex (r[1]) | s_hex (r[2]))) {
            *w++ = (char)(s_hex (r[1]) * 16 + s_hex (r[2]));
            r += 3;
        }
        else
            *w++ = *r++;
    }
    *w = 0;
    return (size_t)(w - s);
}

// s_trial_page: /jobs/ID/trials/T.
static bool
s_trial_page (const char *url)
{
    if (strncmp (url, "/jobs/", 6) != 0)
        return false;
    const char *p = url + 6, *slash = strchr (p, '/');
    if (!slash || slash - p > 19 || strncmp (slash, "/trials/", 8) != 0 || !s_digits (slash + 8))
        return false;
    for (; p < slash; p++)
        if (!isdigit ((unsigned char)*p))
            return false;
    return slash > url + 6;
}

// s_arg is the query argument name (NULL: absent); one that holds a NUL
// byte (%00), which C would read cut short, sets *nul.
static const char *
s_arg (struct MHD_Connection *conn, const char *name, bool *nul)
{
    const char *v = NULL;
    size_t n = 0;
    if (MHD_lookup_connection_value_n (conn, MHD_GET_ARGUMENT_KIND, name, strlen (name), &v, &n) !=
        MHD_YES)
        return NULL;
    if (v && strlen (v) != n)
        *nul = true;
    return v;
}

// s_authorized: no token wanted, or the request shows it (bearer header,
// cookie, or ?token=, which also sets *set_cookie).
static bool
s_authorized (struct http_srv_s *s, struct MHD_Connection *conn, bool *set_cookie)
{
    if (!s->token)
        return true;
    const char *h =
        MHD_lookup_connection_value (conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (h && !strncasecmp (h, "Bearer ", 7) && http_token_equal (s->token, h + 7))
        return true;
    const char *c = MHD_lookup_connection_value (conn, MHD_COOKIE_KIND, S_COOKIE);
    if (c && http_token_equal (s->token, c))
        return true;
    const char *q = MHD_lookup_connection_value (conn, MHD_GET_ARGUMENT_KIND, "token");
    if (q && http_token_equal (s->token, q)) {
        *set_cookie = true;
        return true;
    }
    return false;
}

static enum MHD_Result
s_handler (void *cls, struct MHD_Connection *conn, const char *url, const char *method,
           const char *version, const char *upload, size_t *upload_size, void **state)
{
    (void)version;
    (void)upload;
    static int s_seen;
    if (!*state) { // headers only so far: answer once the request is complete
        *state = &s_seen;
        return MHD_YES;
    }
    if (*upload_size) { // a body we do not want: swallow it
        *upload_size = 0;
        return MHD_YES;
    }
    struct http_srv_s *s = cls;
    if (strcmp (method, "GET") != 0 && strcmp (method, "HEAD") != 0)
        return s_text (conn, MHD_HTTP_METHOD_NOT_ALLOWED,
                       cgq_xstrdup ("only GET and HEAD are served here (the dashboard, /api/ "
                                    "and /metrics are read-only)\n"));
    size_t len = strlen (url);
    if (len > S_MAX_PATH)
        return s_text (
            conn, MHD_HTTP_BAD_REQUEST,
            cgq_xasprintf ("a path of %zu bytes: none here is over %d\n", len, S_MAX_PATH));
    for (const char *p = url; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f || *p == '\\')
            return s_text (conn, MHD_HTTP_BAD_REQUEST,
                           cgq_xstrdup ("a path with a control character or backslash\n"));
    if (strstr (url, "..") || strstr (url, "//"))
        return s_text (conn, MHD_HTTP_BAD_REQUEST,
                       cgq_xstrdup ("a path with '..' or '//' is never served\n"));

    bool set_cookie = false;
    if (!s_authorized (s, conn, &set_cookie))
        return s_text (conn, MHD_HTTP_UNAUTHORIZED,
                       cgq_xstrdup ("this server wants its token (--http-token-file): send "
                                    "'Authorization: Bearer TOKEN', or open /?token=TOKEN once "
                                    "in a browser\n"));
    char *cookie =
        set_cookie ? cgq_xasprintf ("%s=%s; Path=/; HttpOnly; SameSite=Strict", S_COOKIE, s->token)
                   : NULL;
    enum MHD_Result rc;
    if (!strcmp (url, "/metrics")) {
        char *page = s->page ? s->page (s->page_arg, S_METRICS_WAIT_MS) : NULL;
        if (!page)
            rc = s_text (conn, MHD_HTTP_SERVICE_UNAVAILABLE,
                         cgq_xstrdup ("the coordinator's loop did not render /metrics in time "
                                      "(it is busy, or stopping); try again\n"));
        else
            rc = s_send (conn, MHD_HTTP_OK, page, strlen (page), MHD_RESPMEM_MUST_FREE,
                         "text/plain; version=0.0.4; charset=utf-8", cookie);
    }
    else if (!strcmp (url, "/api/events")) { // server-sent events (sse.h)
        bool nul = false;
        const char *job = s_arg (conn, "job", &nul);
        static const char bad[] = "{\"error\":\"a query argument holds a NUL byte\"}";
        rc = nul ? s_send (conn, MHD_HTTP_BAD_REQUEST, bad, sizeof bad - 1, MHD_RESPMEM_PERSISTENT,
                           "application/json", cookie)
                 : sse_answer (s->sse, conn, job, s_headers);
    }
    else if (!strncmp (url, "/api/", 5)) {
        char *body = NULL;
        int code;
        cgq_store_t *st = s->redis ? s_store (s) : NULL;
        if (!st) {
            body = cgq_xstrdup ("{\"error\":\"no Redis connection for the API\"}");
            code = MHD_HTTP_SERVICE_UNAVAILABLE;
        }
        else {
            bool nul = false;
            api_query_t q = {
                .offset = s_arg (conn, "offset", &nul),
                .limit = s_arg (conn, "limit", &nul),
                .sort = s_arg (conn, "sort", &nul),
                .order = s_arg (conn, "order", &nul),
                .state = s_arg (conn, "state", &nul),
            };
            if (nul) {
                body = cgq_xstrdup ("{\"error\":\"a query argument holds a NUL byte\"}");
                code = MHD_HTTP_BAD_REQUEST;
            }
            else {
                code = api_handle (st, url, &q, &body);
                if (code == MHD_HTTP_SERVICE_UNAVAILABLE && !cgq_store_connected (st)) {
                    // This thread's connection died (Redis restarted since
                    // it was last used): reads are safe to send again, once,
                    // on a new connection.
                    free (body);
                    code = api_handle (st, url, &q, &body);
                }
            }
        }
        rc = s_send (conn, (unsigned)code, body, strlen (body), MHD_RESPMEM_MUST_FREE,
                     "application/json", cookie);
    }
    else if (!strcmp (url, "/") || !strcmp (url, "/index.html"))
        rc = s_file (conn, "index.html", cookie);
    else if (!strcmp (url, "/favicon.ico")) // browsers ask; none (no 404 in their console)
        rc = s_send (conn, MHD_HTTP_NO_CONTENT, "", 0, MHD_RESPMEM_PERSISTENT, "image/x-icon",
                     cookie);
    else if (!strncmp (url, "/jobs/", 6) && s_digits (url + 6))
        rc = s_file (conn, "job.html", cookie);
    else if (s_trial_page (url))
        rc = s_file (conn, "trial.html", cookie);
    else if (!strcmp (url, "/nodes"))
        rc = s_file (conn, "nodes.html", cookie);
    else if (!strncmp (url, "/static/", 8) && url[8] && !strchr (url + 8, '/'))
        rc = s_file (conn, url + 8, cookie);
    else
        rc = s_text (conn, MHD_HTTP_NOT_FOUND,
                     cgq_xasprintf ("no page %s here: the dashboard is at /, its API under "
                                    "/api/, the metrics at /metrics\n",
                                    url));
    free (cookie);
    return rc;
}

// --- starting ---------------------------------------------------------------

static bool
s_loopback (const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return (ntohl (((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6)
        return IN6_IS_ADDR_LOOPBACK (&((const struct sockaddr_in6 *)sa)->sin6_addr);
    return false;
}

// s_read_token reads the token file: one line of 16 to 512 characters from
// A-Z a-z 0-9 and . _ ~ + / = - (what fits a header, a cookie and a URL).
static char *
s_read_token (const char *path, char *err, size_t errlen)
{
    FILE *f = fopen (path, "r");
    if (!f) {
        snprintf (err, errlen, "--http-token-file %s: %s", path, strerror (errno));
        return NULL;
    }
    char buf[1024];
    size_t n = fread (buf, 1, sizeof buf - 1, f);
    fclose (f);
    buf[n] = 0;
    while (n && isspace ((unsigned char)buf[n - 1]))
        buf[--n] = 0;
    bool ok = n >= 16 && n <= 512;
    for (size_t i = 0; ok && i < n; i++)
        ok = isalnum ((unsigned char)buf[i]) || strchr ("._~+/=-", buf[i]);
    if (!ok) {
        snprintf (err, errlen,
                  "--http-token-file %s: the token must be one line of 16 to 512 characters "
                  "from A-Z a-z 0-9 . _ ~ + / = - (make one with: head -c 32 /dev/urandom | "
                  "base64 > FILE)",
                  path);
        return NULL;
    }
    return cgq_xstrdup (buf);
}

struct http_srv_s *
http_start (const http_cfg_t *cfg, char *err, size_t errlen)
{
    const char *addr = cfg->addr;
    const char *colon = strrchr (addr, ':');
    if (!colon || colon == addr || !colon[1]) {
        snprintf (err, errlen,
                  "--http '%s' is not HOST:PORT (write e.g. 127.0.0.1:9464, or "
                  "127.0.0.1:0 for any free port)",
                  addr);
        return NULL;
    }
    char *host = cgq_xstrndup (addr, (size_t)(colon - addr));
    if (host[0] == '[' && host[strlen (host) - 1] == ']') { // [::1]:9464
        memmove (host, host + 1, strlen (host));
        host[strlen (host) - 1] = 0;
    }
    bool any = strcmp (host, "*") == 0;
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV | (any ? AI_PASSIVE : 0)};
    struct addrinfo *ai = NULL;
    int gai = getaddrinfo (any ? NULL : host, colon + 1, &hints, &ai);
    if (gai != 0 || !ai) {
        snprintf (err, errlen, "--http '%s': cannot resolve '%s' port '%s': %s", addr, host,
                  colon + 1, gai_strerror (gai));
        free (host);
        return NULL;
    }
    free (host);
    bool pub = !s_loopback (ai->ai_addr);
    if (pub && !cfg->token_file && !cfg->insecure) {
        snprintf (err, errlen,
                  "refusing to serve HTTP on %s beyond loopback without a token: the dashboard "
                  "and /metrics show jobs, params, metrics and hosts. Give --http-token-file "
                  "FILE (and put TLS in front: docs/operations.md), bind loopback (--http "
                  "127.0.0.1:9464) and reach it through a proxy or tunnel, or pass --insecure "
                  "(or --metrics-public) on a network you trust",
                  addr);
        freeaddrinfo (ai);
        return NULL;
    }
    struct http_srv_s *s = cgq_xcalloc (1, sizeof *s);
    if (cfg->token_file && !(s->token = s_read_token (cfg->token_file, err, errlen))) {
        freeaddrinfo (ai);
        free (s);
        return NULL;
    }
    s->page = cfg->page;
    s->page_arg = cfg->page_arg;
    s->redis = cfg->redis ? cgq_xstrdup (cfg->redis) : NULL;
    pthread_key_create (&s->store_key, s_store_free);
    // The pool inherits this thread's signal mask: with SIGINT and SIGTERM
    // blocked there, a stop signal always lands on the loop's thread and
    // interrupts its poll at once (coord_stop), never on an HTTP thread.
    sigset_t stop_signals, before;
    sigemptyset (&stop_signals);
    sigaddset (&stop_signals, SIGINT);
    sigaddset (&stop_signals, SIGTERM);
    sigaddset (&stop_signals, SIGHUP);
    pthread_sigmask (SIG_BLOCK, &stop_signals, &before);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
                     (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0);
    s->mhd = MHD_start_daemon (
        flags, 0, NULL, NULL, s_handler, s, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned)(cfg->threads > 0 ? cfg->threads : S_THREADS),
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)S_MAX_CONNECTIONS, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)S_CONN_TIMEOUT_S, MHD_OPTION_UNESCAPE_CALLBACK, s_unescape, NULL, MHD_OPTION_END);
    int e = errno;
    // The events thread too, with the stop signals blocked (as the pool).
    if (s->mhd && s->redis)
        s->sse = sse_start (s->redis); // NULL: /api/events answers 503
    pthread_sigmask (SIG_SETMASK, &before, NULL);
    freeaddrinfo (ai);
    if (!s->mhd) {
        snprintf (err, errlen, "cannot serve HTTP on %s: %s (set --http to a free port)", addr,
                  e ? strerror (e) : "libmicrohttpd could not start");
        pthread_key_delete (s->store_key);
        free (s->redis);
        free (s->token);
        free (s);
        return NULL;
    }
    const union MHD_DaemonInfo *pi = MHD_get_daemon_info (s->mhd, MHD_DAEMON_INFO_BIND_PORT);
    s->port = pi ? pi->port : 0;
    if (pub && !s->token)
        cgq_warn ("--insecure: the dashboard and /metrics on %s (port %d) are open to whoever "
                  "reaches it",
                  addr, s->port);
    cgq_info ("http: dashboard http://%s/ and http://%s/metrics (port %d)%s", addr, addr, s->port,
              s->token ? ", token required" : "");
    return s;
}

void
http_stop (struct http_srv_s *s)
{
    if (!s)
        return;
    sse_quiesce (s->sse);     // no connection left suspended: MHD_stop_daemon wants none
    MHD_stop_daemon (s->mhd); // joins the pool: each thread's store is freed as it exits
    sse_stop (&s->sse);
    pthread_key_delete (s->store_key);
    free (s->redis);
    free (s->token);
    free (s);
}

int
http_port (const struct http_srv_s *s)
{
    return s ? s->port : 0;
}
