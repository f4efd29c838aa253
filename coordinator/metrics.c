// metrics: /metrics over libmicrohttpd, polled by the coordinator's loop.
#include "metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "coord.h"
#include "jobs.h"
#include "log.h"
#include "notify.h"

struct metrics_srv_s {
    struct MHD_Daemon *mhd;
    int fd;   // MHD's epoll fd
    int port; // bound
};

// Scrapers are few; a client that opens more waits. An idle or slow one is
// cut after this many seconds (MHD does it from metrics_run).
#define S_MAX_CONNECTIONS 16
#define S_CONN_TIMEOUT_S 10

// --- rendering --------------------------------------------------------------

static void
s_head (cgq_buf_t *b, const char *name, const char *type, const char *help)
{
    cgq_buf_printf (b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

// s_label_value appends v escaped as the exposition format wants it.
static void
s_label_value (cgq_buf_t *b, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\')
            cgq_buf_puts (b, "\\\\");
        else if (*v == '"')
            cgq_buf_puts (b, "\\\"");
        else if (*v == '\n')
            cgq_buf_puts (b, "\\n");
        else
            cgq_buf_append (b, v, 1);
    }
}

static void
s_hist (cgq_buf_t *b, const char *name, const char *help, const hist_t *h)
{
    s_head (b, name, "histogram", help);
    uint64_t cum = 0;
    char num[32];
    for (int i = 0; i < h->nbounds; i++) {
        cum += h->counts[i];
        cgq_buf_printf (b, "%s_bucket{le=\"%s\"} %" PRIu64 "\n", name,
                        cgq_fmt_double (num, h->bounds[i]), cum);
    }
    cgq_buf_printf (b, "%s_bucket{le=\"+Inf\"} %" PRIu64 "\n", name, h->count);
    cgq_buf_printf (b, "%s_sum %s\n%s_count %" PRIu64 "\n", name, cgq_fmt_double (num, h->sum),
                    name, h->count);
}

static void
s_counter (cgq_buf_t *b, const char *name, const char *help, uint64_t v)
{
    s_head (b, name, "counter", help);
    cgq_buf_printf (b, "%s %" PRIu64 "\n", name, v);
}

static void
s_gauge (cgq_buf_t *b, const char *name, const char *help, double v)
{
    char num[32];
    s_head (b, name, "gauge", help);
    cgq_buf_printf (b, "%s %s\n", name, cgq_fmt_double (num, v));
}

static const char *
s_class (const req_t *req)
{
    return req->client ? "client" : req->on ? "device" : req->gpu > 0 ? "gpu" : "cpu";
}

void
metrics_render (coord_t *c, cgq_buf_t *b)
{
    bool leader = !c->standby && c->lease[0] && !c->lease_lost;
    s_gauge (b, "cgq_coordinator_leader",
             "1 while this coordinator holds the leader lease, 0 "
             "while it stands by",
             leader ? 1 : 0);
    s_gauge (b, "cgq_coordinator_lease_epoch",
             "the leader's lease epoch (a standby: the epoch of the leader it waits on)",
             (double)(leader ? c->epoch : c->lease_holder_epoch));

    // Jobs and trials (active jobs only: an ended job leaves memory, so the
    // job label stays bounded by what runs now).
    uint64_t njobs = 0;
    s_head (b, "cgq_job_trials", "gauge",
            "trials of each active job by state, as its Redis hash counts them (not yet "
            "created: pending)");
    for (job_t *j = c->jobs; j; j = j->next) {
        if (j->ended)
            continue;
        njobs++;
        for (int k = 0; k < CGQ_TRIAL_NSTATES; k++) {
            uint64_t v = jobs_count (j, k);
            cgq_buf_printf (b, "cgq_job_trials{job=\"%" PRIu64 "\",name=\"", j->id);
            s_label_value (b, j->name ? j->name : "");
            cgq_buf_printf (b, "\",state=\"%s\"} %" PRIu64 "\n", cgq_tstate_names[k], v);
        }
    }
    s_gauge (b, "cgq_jobs_active", "jobs running (not finished or cancelled)", (double)njobs);
    s_head (b, "cgq_trials_ended_total", "counter",
            "trials that reached each final state under this coordinator process");
    for (int k = 0; k < CGQ_TRIAL_NSTATES; k++)
        if (cgq_tstate_terminal ((cgq_tstate_t)k))
            cgq_buf_printf (b, "cgq_trials_ended_total{state=\"%s\"} %" PRIu64 "\n",
                            cgq_tstate_names[k], c->stat_ended[k]);

    // Queue depth per resource class.
    static const char *classes[] = {"cpu", "gpu", "device", "client"};
    uint64_t depth[4] = {0, 0, 0, 0};
    for (job_t *j = c->jobs; j; j = j->next)
        for (uint32_t k = 0; k < j->nstages; k++) {
            // One queue per stage, each with its own resources.
            const char *cls = s_class (&j->req[k]);
            int ci = !strcmp (cls, "cpu") ? 0 : !strcmp (cls, "gpu") ? 1 : !strcmp (cls, "device") ? 2 : 3;
            for (trial_t *t = j->qhead[k]; t; t = t->qnext)
                depth[ci]++;
        }
    s_head (b, "cgq_queue_depth", "gauge",
            "trials waiting for a node (pending or unschedulable), by the resource class of "
            "their job (cpu, gpu, device; client: a study's trials, waiting for an ask)");
    for (int i = 0; i < 4; i++)
        cgq_buf_printf (b, "cgq_queue_depth{class=\"%s\"} %" PRIu64 "\n", classes[i], depth[i]);

    // Nodes and devices.
    uint64_t workers = 0, runners = 0, clients = 0, running = 0;
    for (node_t *n = c->nodes; n; n = n->next) {
        if (n->runner)
            runners++;
        else if (n->client_job)
            clients++;
        else
            workers++;
        running += n->ntasks;
    }
    s_head (b, "cgq_nodes_alive", "gauge", "connected nodes by kind");
    cgq_buf_printf (b, "cgq_nodes_alive{kind=\"%s\"} %" PRIu64 "\n", CGQ_NODE_KIND_WORKER, workers);
    cgq_buf_printf (b, "cgq_nodes_alive{kind=\"%s\"} %" PRIu64 "\n", CGQ_NODE_KIND_RUNNER, runners);
    cgq_buf_printf (b, "cgq_nodes_alive{kind=\"%s\"} %" PRIu64 "\n", CGQ_NODE_KIND_CLIENT, clients);
    s_gauge (b, "cgq_tasks_running", "tasks attached to connected nodes", (double)running);
    uint64_t dev[4] = {0, 0, 0, 0}; // idle, busy, quarantined, offline
    if (c->devices)
        for (device_t *d = zhashx_first (c->devices); d; d = zhashx_next (c->devices))
            dev[d->quarantined ? 2 : !d->node ? 3 : d->task ? 1 : 0]++;
    static const char *dstates[] = {CGQ_DEVICE_IDLE, CGQ_DEVICE_BUSY, CGQ_DEVICE_QUARANTINED,
                                    CGQ_DEVICE_OFFLINE};
    s_head (b, "cgq_devices", "gauge", "devices of device runners by state");
    for (int i = 0; i < 4; i++)
        cgq_buf_printf (b, "cgq_devices{state=\"%s\"} %" PRIu64 "\n", dstates[i], dev[i]);

    // Throughput and latency.
    s_counter (b, "cgq_dispatches_total", "Assigns sent: trial attempts started on a node",
               c->stat_assigns);
    s_counter (b, "cgq_results_total", "results received from nodes", c->stat_results);
    s_hist (b, "cgq_dispatch_latency_seconds",
            "time a trial waited, from becoming pending to its Assign", &c->hist_dispatch);
    s_hist (b, "cgq_redis_batch_seconds", "round trip of one Redis batch (MULTI/EXEC) flush",
            &c->hist_redis);
    s_gauge (b, "cgq_redis_pending_commands", "commands waiting for the next Redis flush",
             c->store ? (double)cgq_store_pending (c->store) : 0);

    // What was refused or dropped.
    s_counter (b, "cgq_frames_dropped_total",
               "node or control frames dropped: over --max-frame, undecodable or malformed",
               cgq_wire_dropped);
    s_counter (b, "cgq_messages_rejected_total",
               "node messages refused: not from the node that runs the task", c->stat_rejected);
    s_counter (b, "cgq_reports_dropped_total",
               "Progress reports not stored: over --max-report or --max-report-rate",
               c->stat_reports_dropped);
    s_counter (b, "cgq_peers_refused_total", "connections refused by CURVE (key not allowed)",
               cgq_auth_refused (c->auth));
    s_counter (b, "cgq_results_deferred_total",
               "results left with their nodes while Redis was down and the buffer full",
               c->stat_deferred);
    notify_render_metrics (c, b);
}

// --- the server -------------------------------------------------------------

static enum MHD_Result
s_reply (struct MHD_Connection *conn, unsigned code, char *body, const char *type)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer (strlen (body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free (body);
        return MHD_NO;
    }
    MHD_add_response_header (r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    enum MHD_Result rc = MHD_queue_response (conn, code, r);
    MHD_destroy_response (r);
    return rc;
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
    coord_t *c = cls;
    const char *text_type = "text/plain; charset=utf-8";
    if (strcmp (method, "GET") != 0 && strcmp (method, "HEAD") != 0)
        return s_reply (conn, MHD_HTTP_METHOD_NOT_ALLOWED,
                        cgq_xstrdup ("only GET /metrics is served here\n"), text_type);
    if (strcmp (url, "/metrics") != 0)
        return s_reply (conn, MHD_HTTP_NOT_FOUND,
                        cgq_xasprintf ("no page %s here: the metrics are at /metrics\n", url),
                        text_type);
    cgq_buf_t b;
    cgq_buf_init (&b);
    metrics_render (c, &b);
    return s_reply (conn, MHD_HTTP_OK, cgq_buf_take (&b),
                    "text/plain; version=0.0.4; charset=utf-8");
}

static bool
s_loopback (const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return (ntohl (((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6)
        return IN6_IS_ADDR_LOOPBACK (&((const struct sockaddr_in6 *)sa)->sin6_addr);
    return false;
}

int
metrics_start (coord_t *c, const char *addr, bool public, char *err, size_t errlen)
{
    const char *colon = strrchr (addr, ':');
    if (!colon || colon == addr || !colon[1]) {
        snprintf (err, errlen,
                  "--metrics '%s' is not HOST:PORT (write e.g. 127.0.0.1:9464, or :0 style "
                  "127.0.0.1:0 for any free port)",
                  addr);
        return -1;
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
        snprintf (err, errlen, "--metrics '%s': cannot resolve '%s' port '%s': %s", addr, host,
                  colon + 1, gai_strerror (gai));
        free (host);
        return -1;
    }
    free (host);
    if (!s_loopback (ai->ai_addr) && !public) {
        snprintf (err, errlen,
                  "refusing to serve /metrics on %s beyond loopback: the page names every "
                  "running job and counts nodes, with no authentication. Bind loopback "
                  "(--metrics 127.0.0.1:9464) and scrape through a proxy or tunnel, or pass "
                  "--metrics-public on a network you trust",
                  addr);
        freeaddrinfo (ai);
        return -1;
    }
    unsigned flags = MHD_USE_EPOLL | (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0);
    struct MHD_Daemon *d = MHD_start_daemon (
        flags, 0, NULL, NULL, s_handler, c, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)S_MAX_CONNECTIONS, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)S_CONN_TIMEOUT_S, MHD_OPTION_END);
    int e = errno;
    bool pub = !s_loopback (ai->ai_addr);
    freeaddrinfo (ai);
    if (!d) {
        snprintf (err, errlen, "cannot serve /metrics on %s: %s (set --metrics to a free port)",
                  addr, e ? strerror (e) : "libmicrohttpd could not start");
        return -1;
    }
    const union MHD_DaemonInfo *fdi = MHD_get_daemon_info (d, MHD_DAEMON_INFO_EPOLL_FD);
    const union MHD_DaemonInfo *pi = MHD_get_daemon_info (d, MHD_DAEMON_INFO_BIND_PORT);
    if (!fdi || fdi->epoll_fd < 0) {
        snprintf (err, errlen, "cannot serve /metrics on %s: libmicrohttpd has no epoll fd", addr);
        MHD_stop_daemon (d);
        return -1;
    }
    struct metrics_srv_s *m = cgq_xcalloc (1, sizeof *m);
    m->mhd = d;
    m->fd = fdi->epoll_fd;
    m->port = pi ? pi->port : 0;
    c->metrics = m;
    if (pub)
        cgq_warn ("--metrics-public: /metrics on %s (port %d) is open to whoever reaches it", addr,
                  m->port);
    cgq_info ("metrics: http://%s/metrics (port %d)", addr, m->port);
    return 0;
}

void
metrics_stop (coord_t *c)
{
    if (!c->metrics)
        return;
    MHD_stop_daemon (c->metrics->mhd);
    free (c->metrics);
    c->metrics = NULL;
}

int
metrics_fd (coord_t *c)
{
    return c->metrics ? c->metrics->fd : -1;
}

int
metrics_port (coord_t *c)
{
    return c->metrics ? c->metrics->port : 0;
}

int64_t
metrics_next_ms (coord_t *c, int64_t now)
{
    if (!c->metrics)
        return 0;
    MHD_UNSIGNED_LONG_LONG ms = 0;
    if (MHD_get_timeout (c->metrics->mhd, &ms) != MHD_YES)
        return 0;
    return now + (int64_t)(ms > 3600000 ? 3600000 : ms);
}

void
metrics_run (coord_t *c)
{
    if (c->metrics)
        MHD_run (c->metrics->mhd);
}

void
metrics_wait (coord_t *c, int64_t ms)
{
    if (!c->metrics) {
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep (&ts, NULL);
        return;
    }
    int64_t now = cgq_now_ms ();
    int64_t due = metrics_next_ms (c, now);
    if (due && due - now < ms)
        ms = due > now ? due - now : 0;
    struct pollfd p = {.fd = c->metrics->fd, .events = POLLIN};
    poll (&p, 1, (int)ms);
    metrics_run (c);
}
