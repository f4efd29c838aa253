// notify: job-end notifications over libcurl's multi interface.
#include "notify.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coord.h"
#include "json.h"
#include "log.h"
#include "keyspace.h"

// One POST's limits: a receiver that accepts and never answers costs a
// transfer slot this long, never the loop's time.
#define S_CONNECT_TIMEOUT_MS 5000
#define S_TIMEOUT_MS 10000
#define S_BACKOFF_FIRST_MS 1000
#define S_BACKOFF_MAX_MS 60000
#define S_MAX_IN_FLIGHT 8

typedef struct notice_s {
    char *id; // "JOB:EVENT", the cgq:notify field
    char *url;
    char *body;
    uint32_t attempts; // POSTs started
    bool covered;      // its record is in the batch going out now (notify_covered)
    bool durable;      // its record is in Redis: it may be sent
    int64_t due_ms;    // next POST (when durable and not in flight)
    CURL *easy;        // in flight
    struct curl_slist *headers;
    char errbuf[CURL_ERROR_SIZE];
    struct notice_s *next;
} notice_t;

// libcurl's socket interface: curl says which sockets to watch for what
// (s_on_socket) and when to call it back (s_on_timer); the loop polls them
// beside its ZeroMQ sockets and hands what is ready to
// curl_multi_socket_action. (curl_multi_fdset would leave out every
// descriptor past select()'s 1024, which a coordinator of thousands of
// nodes holds.)
struct notify_s {
    CURLM *multi;
    notice_t *head;
    uint32_t in_flight;
    uint64_t delivered, failed, retried, posts;
    struct {
        curl_socket_t fd;
        short events; // ZMQ_POLLIN | ZMQ_POLLOUT
    } socks[NOTIFY_POLL_MAX];
    int nsocks;
    int64_t timer_ms; // when curl wants its timeout action; 0: no timer
    int64_t kick_ms;  // the last timeout action (one at least every second)
};

static bool s_curl_ready;

static int
s_on_socket (CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
    (void)easy;
    (void)socketp;
    struct notify_s *n = userp;
    int i = 0;
    while (i < n->nsocks && n->socks[i].fd != fd)
        i++;
    if (what == CURL_POLL_REMOVE) {
        if (i < n->nsocks)
            n->socks[i] = n->socks[--n->nsocks];
        return 0;
    }
    if (i == n->nsocks) {
        if (n->nsocks == NOTIFY_POLL_MAX)
            return 0; // not polled: the once-a-second timeout action moves it on
        n->socks[n->nsocks++].fd = fd;
    }
    n->socks[i].events = (short)((what & CURL_POLL_IN ? ZMQ_POLLIN : 0) |
                                 (what & CURL_POLL_OUT ? ZMQ_POLLOUT : 0));
    return 0;
}

static int
s_on_timer (CURLM *multi, long timeout_ms, void *userp)
{
    (void)multi;
    struct notify_s *n = userp;
    n->timer_ms = timeout_ms < 0 ? 0 : cgq_now_ms () + timeout_ms;
    return 0;
}

// s_kick runs curl's timeout action: new transfers start, timeouts fire.
static void
s_kick (struct notify_s *n, int64_t now)
{
    int running = 0;
    n->timer_ms = 0; // the call may set the next one
    n->kick_ms = now;
    curl_multi_socket_action (n->multi, CURL_SOCKET_TIMEOUT, 0, &running);
}

static struct notify_s *
s_get (coord_t *c)
{
    if (!c->notify) {
        if (!s_curl_ready) {
            curl_global_init (CURL_GLOBAL_DEFAULT);
            s_curl_ready = true;
        }
        c->notify = cgq_xcalloc (1, sizeof *c->notify);
        c->notify->multi = curl_multi_init ();
        if (!c->notify->multi) {
            fprintf (stderr, "cgq-coordinator: curl_multi_init failed\n");
            abort ();
        }
        curl_multi_setopt (c->notify->multi, CURLMOPT_SOCKETFUNCTION, s_on_socket);
        curl_multi_setopt (c->notify->multi, CURLMOPT_SOCKETDATA, c->notify);
        curl_multi_setopt (c->notify->multi, CURLMOPT_TIMERFUNCTION, s_on_timer);
        curl_multi_setopt (c->notify->multi, CURLMOPT_TIMERDATA, c->notify);
    }
    return c->notify;
}

static void
s_add (coord_t *c, const char *id, const char *url, const char *body, bool durable)
{
    struct notify_s *n = s_get (c);
    for (notice_t *x = n->head; x; x = x->next)
        if (!strcmp (x->id, id))
            return; // already known (recovery of a record we hold)
    notice_t *x = cgq_xcalloc (1, sizeof *x);
    x->id = cgq_xstrdup (id);
    x->url = cgq_xstrdup (url);
    x->body = cgq_xstrdup (body);
    x->durable = durable;
    x->due_ms = cgq_now_ms ();
    notice_t **pp = &n->head; // FIFO: the oldest goes first
    while (*pp)
        pp = &(*pp)->next;
    *pp = x;
}

static char *
s_record (const char *url, const char *body)
{
    json_t *o = json_pack ("{s:s, s:s}", "url", url, "body", body);
    char *s = cgq_json_dumps (o);
    json_decref (o);
    return s;
}

void
notify_queue (coord_t *c, const char *id, const char *url, const json_t *summary)
{
    char *body = json_dumps (summary, JSON_COMPACT | JSON_SORT_KEYS);
    if (!body)
        return;
    char *rec = s_record (url, body);
    cgq_store_cmd (c->store, "HSET %s %s %s", CGQ_KEY_NOTIFY, id, rec);
    free (rec);
    s_add (c, id, url, body, false);
    free (body);
}

int
notify_recover (coord_t *c)
{
    redisReply *r = cgq_store_command (c->store, "HGETALL %s", CGQ_KEY_NOTIFY);
    if (!r)
        return -1;
    int n = 0;
    for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i + 1 < r->elements; i += 2) {
        const char *id = r->element[i]->str, *rec = r->element[i + 1]->str;
        json_t *o = rec ? json_loads (rec, 0, NULL) : NULL;
        const char *url = json_string_value (json_object_get (o, "url"));
        const char *body = json_string_value (json_object_get (o, "body"));
        if (id && url && body) {
            s_add (c, id, url, body, true);
            n++;
        }
        else if (id) {
            cgq_warn ("notification %s: its record in %s is malformed; dropped", id,
                      CGQ_KEY_NOTIFY);
            cgq_store_cmd (c->store, "HDEL %s %s", CGQ_KEY_NOTIFY, id);
        }
        json_decref (o);
    }
    freeReplyObject (r);
    if (n)
        cgq_info ("%d notification(s) left by the previous coordinator; sending them", n);
    return n;
}

void
notify_covered (coord_t *c)
{
    if (!c->notify)
        return;
    for (notice_t *x = c->notify->head; x; x = x->next)
        x->covered = true;
}

void
notify_flushed (coord_t *c)
{
    if (!c->notify)
        return;
    for (notice_t *x = c->notify->head; x; x = x->next)
        if (x->covered)
            x->durable = true;
}

static void
s_free (notice_t *x)
{
    curl_slist_free_all (x->headers);
    free (x->id);
    free (x->url);
    free (x->body);
    free (x);
}

// s_done ends x for good (delivered or given up): its record goes in the
// next batch.
static void
s_done (coord_t *c, notice_t *x)
{
    struct notify_s *n = c->notify;
    cgq_store_cmd (c->store, "HDEL %s %s", CGQ_KEY_NOTIFY, x->id);
    for (notice_t **pp = &n->head; *pp; pp = &(*pp)->next)
        if (*pp == x) {
            *pp = x->next;
            break;
        }
    s_free (x);
}

static size_t
s_discard (char *ptr, size_t size, size_t nmemb, void *userdata)
{
    (void)ptr;
    (void)userdata;
    return size * nmemb;
}

static void
s_start (coord_t *c, notice_t *x)
{
    struct notify_s *n = c->notify;
    CURL *e = curl_easy_init ();
    if (!e) {
        x->due_ms = cgq_now_ms () + S_BACKOFF_FIRST_MS;
        return;
    }
    if (!x->headers) {
        char h[300];
        x->headers = curl_slist_append (NULL, "Content-Type: application/json");
        snprintf (h, sizeof h, "X-Cgq-Notification: %s", x->id);
        x->headers = curl_slist_append (x->headers, h);
        x->headers = curl_slist_append (x->headers, "Expect:"); // no 100-continue round trip
    }
    x->errbuf[0] = 0;
    curl_easy_setopt (e, CURLOPT_URL, x->url);
    curl_easy_setopt (e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt (e, CURLOPT_POSTFIELDS, x->body);
    curl_easy_setopt (e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen (x->body));
    curl_easy_setopt (e, CURLOPT_HTTPHEADER, x->headers);
    curl_easy_setopt (e, CURLOPT_USERAGENT, "cgq-coordinator/" CGQ_VERSION);
    curl_easy_setopt (e, CURLOPT_CONNECTTIMEOUT_MS, (long)S_CONNECT_TIMEOUT_MS);
    curl_easy_setopt (e, CURLOPT_TIMEOUT_MS, (long)S_TIMEOUT_MS);
    curl_easy_setopt (e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt (e, CURLOPT_WRITEFUNCTION, s_discard);
    curl_easy_setopt (e, CURLOPT_ERRORBUFFER, x->errbuf);
    curl_easy_setopt (e, CURLOPT_PRIVATE, x);
    x->easy = e;
    x->attempts++;
    n->posts++;
    n->in_flight++;
    curl_multi_add_handle (n->multi, e);
}

// s_finished judges one ended transfer: delivered, retried later, or given up.
static void
s_finished (coord_t *c, notice_t *x, CURLcode rc, int64_t now)
{
    struct notify_s *n = c->notify;
    long status = 0;
    curl_easy_getinfo (x->easy, CURLINFO_RESPONSE_CODE, &status);
    curl_multi_remove_handle (n->multi, x->easy);
    curl_easy_cleanup (x->easy);
    x->easy = NULL;
    n->in_flight--;
    char why[CURL_ERROR_SIZE + 64];
    if (rc == CURLE_OK && status >= 200 && status < 300) {
        cgq_info ("notification %s delivered to %s (HTTP %ld, attempt %u)", x->id, x->url, status,
                  x->attempts);
        n->delivered++;
        s_done (c, x);
        return;
    }
    bool retry;
    if (rc != CURLE_OK) {
        snprintf (why, sizeof why, "%s", x->errbuf[0] ? x->errbuf : curl_easy_strerror (rc));
        retry = true; // cannot connect, timed out, connection reset: the receiver may come back
    }
    else {
        snprintf (why, sizeof why, "HTTP %ld", status);
        retry = status >= 500 || status == 429 || status == 408;
    }
    if (retry && x->attempts < NOTIFY_MAX_ATTEMPTS) {
        int64_t backoff = S_BACKOFF_FIRST_MS;
        for (uint32_t i = 1; i < x->attempts && backoff < S_BACKOFF_MAX_MS; i++)
            backoff *= 2;
        if (backoff > S_BACKOFF_MAX_MS)
            backoff = S_BACKOFF_MAX_MS;
        x->due_ms = now + backoff;
        n->retried++;
        cgq_warn ("notification %s to %s failed: %s; retrying in %" PRId64 " ms (attempt %u of %d)",
                  x->id, x->url, why, backoff, x->attempts, NOTIFY_MAX_ATTEMPTS);
        return;
    }
    cgq_error ("notification %s to %s failed: %s; giving up after %u attempt(s)%s", x->id, x->url,
               why, x->attempts, retry ? "" : " (the receiver refused it: not retried)");
    char detail[CURL_ERROR_SIZE + 128];
    snprintf (detail, sizeof detail, "%s: %s", x->id, why);
    uint64_t job = strtoull (x->id, NULL, 10);
    cgq_keyspace_event (c->store, "notify.failed", job, -1, NULL, 0, detail);
    n->failed++;
    s_done (c, x);
}

void
notify_run (coord_t *c, int64_t now, const zmq_pollitem_t *items, int nitems)
{
    struct notify_s *n = c->notify;
    if (!n || !n->head)
        return;
    if (n->in_flight) {
        int running = 0;
        for (int i = 0; i < nitems; i++) {
            short r = items[i].revents;
            int ev = (r & ZMQ_POLLIN ? CURL_CSELECT_IN : 0) | (r & ZMQ_POLLOUT ? CURL_CSELECT_OUT : 0) |
                     (r & ZMQ_POLLERR ? CURL_CSELECT_ERR : 0);
            if (ev)
                curl_multi_socket_action (n->multi, items[i].fd, ev, &running);
        }
        if ((n->timer_ms && now >= n->timer_ms) || now - n->kick_ms >= 1000)
            s_kick (n, now);
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read (n->multi, &left))) {
            if (m->msg != CURLMSG_DONE)
                continue;
            notice_t *x = NULL;
            curl_easy_getinfo (m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
            if (x)
                s_finished (c, x, m->data.result, now);
        }
    }
    // A lost lease stops every write, and a record not yet durable waits
    // for its batch.
    if (c->lease_lost)
        return;
    bool started = false;
    for (notice_t *x = n->head; x && n->in_flight < S_MAX_IN_FLIGHT; x = x->next)
        if (x->durable && !x->easy && x->due_ms <= now) {
            s_start (c, x);
            started = true;
        }
    if (started)
        s_kick (n, now);
}

int
notify_poll_items (coord_t *c, zmq_pollitem_t *items, int max)
{
    struct notify_s *n = c->notify;
    if (!n || !n->in_flight)
        return 0;
    int k = 0;
    for (int i = 0; i < n->nsocks && k < max; i++)
        if (n->socks[i].events)
            items[k++] = (zmq_pollitem_t){NULL, n->socks[i].fd, n->socks[i].events, 0};
    return k;
}

int64_t
notify_next_ms (coord_t *c, int64_t now)
{
    struct notify_s *n = c->notify;
    if (!n || !n->head)
        return 0;
    int64_t due = 0;
    for (notice_t *x = n->head; x; x = x->next)
        if (x->durable && !x->easy && (!due || x->due_ms < due))
            due = x->due_ms;
    if (n->in_flight) {
        // At curl's timer, and at least once a second.
        int64_t t = n->kick_ms + 1000;
        if (n->timer_ms && n->timer_ms < t)
            t = n->timer_ms;
        if (t < now)
            t = now;
        if (!due || t < due)
            due = t;
    }
    return due;
}

void
notify_fini (coord_t *c)
{
    struct notify_s *n = c->notify;
    if (!n)
        return;
    while (n->head) {
        notice_t *x = n->head;
        n->head = x->next;
        if (x->easy) {
            curl_multi_remove_handle (n->multi, x->easy);
            curl_easy_cleanup (x->easy);
        }
        s_free (x);
    }
    curl_multi_cleanup (n->multi);
    free (n);
    c->notify = NULL;
    if (s_curl_ready) {
        curl_global_cleanup ();
        s_curl_ready = false;
    }
}

void
notify_render_metrics (coord_t *c, cgq_buf_t *b)
{
    struct notify_s *n = c->notify;
    uint64_t pending = 0;
    for (notice_t *x = n ? n->head : NULL; x; x = x->next)
        pending++;
    cgq_buf_printf (b,
                    "# HELP cgq_notifications_total job notifications (spec notify:) by outcome\n"
                    "# TYPE cgq_notifications_total counter\n"
                    "cgq_notifications_total{outcome=\"delivered\"} %" PRIu64 "\n"
                    "cgq_notifications_total{outcome=\"failed\"} %" PRIu64 "\n"
                    "# HELP cgq_notification_posts_total HTTP POSTs of notifications, retries "
                    "included\n"
                    "# TYPE cgq_notification_posts_total counter\n"
                    "cgq_notification_posts_total %" PRIu64 "\n"
                    "# HELP cgq_notifications_pending notifications not delivered yet\n"
                    "# TYPE cgq_notifications_pending gauge\n"
                    "cgq_notifications_pending %" PRIu64 "\n",
                    n ? n->delivered : 0, n ? n->failed : 0, n ? n->posts : 0, pending);
}
