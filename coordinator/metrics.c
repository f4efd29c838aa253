// metrics: /metrics, rendered by the coordinator's loop for the HTTP server's
// threads (http.c).
#include "metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "coord.h"
#include "http.h"
#include "jobs.h"
#include "log.h"
#include "notify.h"
#include "outbox.h"

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
    s_gauge (b, "cgq_acks_held", "Ack messages to nodes held until their batch is durable "
             "(--durable-after) and on --redis-replicas replicas", (double)outbox_held (c));
    s_gauge (b, "cgq_redis_unconfirmed_batches",
             "batches applied by Redis that --redis-replicas replicas have not confirmed (WAIT)",
             c->store ? (double)(cgq_store_applied_seq (c->store)
                                 - cgq_store_confirmed_seq (c->store)) : 0);

    s_gauge (b, "cgq_redis_connected",
             "1 while Redis takes this coordinator's batches, 0 while it is unreachable or "
             "refuses them (the loop goes on without waiting for it)",
             c->store && cgq_store_connected (c->store) && !c->redis_retry_ms ? 1 : 0);
    s_counter (b, "cgq_redis_connect_probes_total",
               "non-blocking probes (connect + PING) of a Redis that was not connected",
               c->store ? cgq_store_probes (c->store) : 0);

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
// The HTTP server (http.c) answers on libmicrohttpd's own threads, which
// never touch coord_t. A scrape of /metrics asks the loop for a page: it
// bumps `asked`, wakes the loop through an eventfd (metrics_fd, polled beside
// the sockets), and waits on the condition variable until the loop has
// rendered a page for a request at least that recent. So the page is as
// fresh as before (rendered after the request came in), and only the loop
// reads its own state.

struct metrics_srv_s {
    struct http_srv_s *http;
    int efd;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t asked, answered; // requests made, and the newest one the page in `page` answers
    char *page;
    bool stopping;
};

char *
metrics_fetch (void *arg, int timeout_ms)
{
    struct metrics_srv_s *m = arg;
    struct timespec until;
    clock_gettime (CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock (&m->mu);
    uint64_t mine = ++m->asked;
    uint64_t one = 1;
    ssize_t w = write (m->efd, &one, sizeof one);
    (void)w; // a full counter still wakes the loop
    while (m->answered < mine && !m->stopping)
        if (pthread_cond_timedwait (&m->cv, &m->mu, &until) == ETIMEDOUT)
            break;
    char *page = m->answered >= mine && m->page ? cgq_xstrdup (m->page) : NULL;
    pthread_mutex_unlock (&m->mu);
    return page;
}

int
metrics_start_http (coord_t *c, const http_cfg_t *cfg, char *err, size_t errlen)
{
    struct metrics_srv_s *m = cgq_xcalloc (1, sizeof *m);
    m->efd = eventfd (0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (m->efd < 0) {
        snprintf (err, errlen, "cannot serve HTTP on %s: eventfd: %s", cfg->addr,
                  strerror (errno));
        free (m);
        return -1;
    }
    pthread_mutex_init (&m->mu, NULL);
    pthread_cond_init (&m->cv, NULL);
    http_cfg_t with = *cfg;
    with.page = metrics_fetch;
    with.page_arg = m;
    m->http = http_start (&with, err, errlen);
    if (!m->http) {
        close (m->efd);
        pthread_mutex_destroy (&m->mu);
        pthread_cond_destroy (&m->cv);
        free (m);
        return -1;
    }
    c->metrics = m;
    return 0;
}

void
metrics_stop (coord_t *c)
{
    struct metrics_srv_s *m = c->metrics;
    if (!m)
        return;
    pthread_mutex_lock (&m->mu);
    m->stopping = true; // a scrape waiting for the loop gives up now
    pthread_cond_broadcast (&m->cv);
    pthread_mutex_unlock (&m->mu);
    http_stop (m->http); // joins its threads
    close (m->efd);
    pthread_mutex_destroy (&m->mu);
    pthread_cond_destroy (&m->cv);
    free (m->page);
    free (m);
    c->metrics = NULL;
}

int
metrics_fd (coord_t *c)
{
    return c->metrics ? c->metrics->efd : -1;
}

int
metrics_port (coord_t *c)
{
    return c->metrics ? http_port (c->metrics->http) : 0;
}

int64_t
metrics_next_ms (coord_t *c, int64_t now)
{
    (void)c;
    (void)now;
    return 0; // libmicrohttpd keeps its own time on its own threads
}

void
metrics_run (coord_t *c)
{
    struct metrics_srv_s *m = c->metrics;
    if (!m)
        return;
    uint64_t n;
    ssize_t r = read (m->efd, &n, sizeof n);
    (void)r;
    pthread_mutex_lock (&m->mu);
    uint64_t asked = m->asked;
    pthread_mutex_unlock (&m->mu);
    if (asked == m->answered)
        return; // only the loop writes answered
    cgq_buf_t b;
    cgq_buf_init (&b);
    metrics_render (c, &b);
    char *page = cgq_buf_take (&b);
    pthread_mutex_lock (&m->mu);
    free (m->page);
    m->page = page;
    m->answered = asked;
    pthread_cond_broadcast (&m->cv);
    pthread_mutex_unlock (&m->mu);
}

void
metrics_wait (coord_t *c, int64_t ms)
{
    if (!c->metrics) {
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep (&ts, NULL);
        return;
    }
    struct pollfd p = {.fd = c->metrics->efd, .events = POLLIN};
    poll (&p, 1, (int)ms);
    metrics_run (c);
}
