// ctl: requests to the coordinator's control ROUTER, `cgq cancel` and `cgq update`.
#include "ctl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "auth.h"
#include "cli.h"
#include "util.h"

static void
s_unreachable (char *err, size_t errlen, const char *endpoint, const char *why)
{
    snprintf (err, errlen,
              "cannot reach the coordinator at %s%s (is cgq-coordinator running? check "
              "--coordinator / CGQ_COORDINATOR)",
              endpoint, why);
}

// s_monitor_event reads one event of a socket monitor: its number, or 0.
static int
s_monitor_event (void *mon)
{
    zmq_msg_t m;
    zmq_msg_init (&m);
    int event = 0;
    if (zmq_msg_recv (&m, mon, ZMQ_DONTWAIT) >= 0 && zmq_msg_size (&m) >= 2) {
        uint16_t e;
        memcpy (&e, zmq_msg_data (&m), sizeof e);
        event = e;
    }
    // the second frame names the endpoint
    while (zmq_msg_more (&m)) {
        zmq_msg_close (&m);
        zmq_msg_init (&m);
        if (zmq_msg_recv (&m, mon, ZMQ_DONTWAIT) < 0)
            break;
    }
    zmq_msg_close (&m);
    return event;
}

// CURVE keys of every request (cgq_ctl_set_curve); NULL: off.
static const char *s_curve_secret, *s_curve_server;

void
cgq_ctl_set_curve (const char *secret_path, const char *server_path)
{
    s_curve_secret = secret_path;
    s_curve_server = server_path;
}

// s_handshake_failed explains a failed ZeroMQ handshake: with CURVE on, the
// coordinator refused this key (or speaks without CURVE); with it off, the
// coordinator wants CURVE.
static void
s_handshake_failed (char *err, size_t errlen, const char *endpoint, const cgq_auth_t *auth,
                    int event)
{
    if (auth && event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
        snprintf (err, errlen,
                  "the coordinator at %s refused this CLI's CURVE key %s (copy the .key file "
                  "beside --curve-secret %s into the coordinator's --curve-allow directory)",
                  endpoint, cgq_auth_public_txt (auth), s_curve_secret);
    else if (auth)
        snprintf (err, errlen,
                  "the CURVE handshake with the coordinator at %s failed (check that "
                  "--curve-server %s is the coordinator's public certificate and that the "
                  "coordinator runs with --curve-secret)",
                  endpoint, s_curve_server);
    else
        snprintf (err, errlen,
                  "the coordinator at %s requires CURVE authentication (set --curve-secret to "
                  "your NAME.key_secret from `cgq keygen` and --curve-server to the "
                  "coordinator's public .key, or CGQ_CURVE_SECRET and CGQ_CURVE_SERVER)",
                  endpoint);
}

static int
s_request_one (const char *endpoint, cgq_env_t *req, int timeout_ms, cgq_env_t **reply,
               char *err, size_t errlen)
{
    *reply = NULL;
    uint8_t *data = NULL;
    size_t len = 0;
    if (cgq_wire_encode (req, &data, &len) < 0) {
        snprintf (err, errlen, "internal error: empty request to the coordinator");
        return CGQ_EXIT_FAIL;
    }
    cgq_auth_t *auth = NULL;
    if (cgq_auth_client_new (s_curve_secret, s_curve_server, &auth, err, errlen) < 0) {
        free (data);
        return CGQ_EXIT_BAD;
    }
    int rc = CGQ_EXIT_FAIL;
    int64_t deadline = cgq_now_ms () + timeout_ms;
    char waited[64];
    snprintf (waited, sizeof waited, " within %ds", (timeout_ms + 999) / 1000);
    void *mon = NULL;
    void *ctx = zmq_ctx_new ();
    void *sock = ctx ? zmq_socket (ctx, ZMQ_REQ) : NULL;
    if (!sock) {
        snprintf (err, errlen, "cannot create a ZeroMQ socket: %s", zmq_strerror (zmq_errno ()));
        goto done;
    }
    int linger = 0;
    zmq_setsockopt (sock, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt (sock, ZMQ_SNDTIMEO, &timeout_ms, sizeof timeout_ms);
    zmq_setsockopt (sock, ZMQ_RCVTIMEO, &timeout_ms, sizeof timeout_ms);
    if (cgq_auth_client_apply (auth, sock) < 0) {
        snprintf (err, errlen, "cannot turn CURVE on: %s", zmq_strerror (zmq_errno ()));
        goto done;
    }
    // A monitor tells a refused connection (nobody listens: fail at once)
    // from a slow coordinator (wait up to timeout_ms).
    char mon_ep[64];
    snprintf (mon_ep, sizeof mon_ep, "inproc://cgq-ctl-monitor-%p", sock);
    // A refused key, a CURVE mismatch, or a request over the coordinator's
    // message limit (ZeroMQ closes the connection) fail at once too.
    int events = ZMQ_EVENT_CONNECTED | ZMQ_EVENT_CONNECT_RETRIED | ZMQ_EVENT_DISCONNECTED
                 | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL
                 | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL;
    if (zmq_socket_monitor (sock, mon_ep, events) == 0) {
        mon = zmq_socket (ctx, ZMQ_PAIR);
        if (mon) {
            zmq_setsockopt (mon, ZMQ_LINGER, &linger, sizeof linger);
            if (zmq_connect (mon, mon_ep) < 0) {
                zmq_close (mon);
                mon = NULL;
            }
        }
    }
    if (zmq_connect (sock, endpoint) < 0) {
        snprintf (err, errlen,
                  "bad coordinator endpoint '%s': %s (expected tcp://HOST:PORT; check "
                  "--coordinator / CGQ_COORDINATOR)",
                  endpoint, zmq_strerror (zmq_errno ()));
        rc = CGQ_EXIT_BAD;
        goto done;
    }
    if (zmq_send (sock, data, len, 0) < 0) {
        if (zmq_errno () == EINTR)
            snprintf (err, errlen, "interrupted while sending to the coordinator at %s", endpoint);
        else
            s_unreachable (err, errlen, endpoint, waited);
        goto done;
    }
    bool connected = false;
    for (;;) {
        int left = (int) (deadline - cgq_now_ms ());
        if (left <= 0) {
            s_unreachable (err, errlen, endpoint, waited);
            goto done;
        }
        zmq_pollitem_t items[2] = {{sock, 0, ZMQ_POLLIN, 0}, {mon, 0, ZMQ_POLLIN, 0}};
        int n = zmq_poll (items, mon ? 2 : 1, left);
        if (n < 0) {
            if (zmq_errno () == EINTR)
                snprintf (err, errlen, "interrupted while waiting for the coordinator at %s",
                          endpoint);
            else
                s_unreachable (err, errlen, endpoint, waited);
            goto done;
        }
        if (mon && (items[1].revents & ZMQ_POLLIN)) {
            int ev = s_monitor_event (mon);
            if (ev == ZMQ_EVENT_CONNECTED)
                connected = true;
            else if (ev == ZMQ_EVENT_CONNECT_RETRIED && !connected) {
                s_unreachable (err, errlen, endpoint, ": connection refused");
                goto done;
            }
            else if (ev == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH
                     || ev == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL
                     || ev == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
                s_handshake_failed (err, errlen, endpoint, auth, ev);
                rc = CGQ_EXIT_BAD;
                goto done;
            }
            else if (ev == ZMQ_EVENT_DISCONNECTED && connected) {
                snprintf (err, errlen,
                          "the coordinator at %s closed the connection while this %zu-byte "
                          "request was on its way (larger than it accepts? see its log)",
                          endpoint, len);
                goto done;
            }
        }
        if (items[0].revents & ZMQ_POLLIN)
            break;
    }
    zmq_msg_t msg;
    zmq_msg_init (&msg);
    if (zmq_msg_recv (&msg, sock, ZMQ_DONTWAIT) < 0) {
        s_unreachable (err, errlen, endpoint, waited);
        zmq_msg_close (&msg);
        goto done;
    }
    *reply = cgq_wire_decode (zmq_msg_data (&msg), zmq_msg_size (&msg), 0);
    zmq_msg_close (&msg);
    if (!*reply) {
        snprintf (err, errlen,
                  "the coordinator at %s answered with a frame that does not decode (is it "
                  "the same cgq version as this CLI, %s?)",
                  endpoint, CGQ_CLI_VERSION);
        goto done;
    }
    rc = CGQ_EXIT_OK;
done:
    if (sock && mon)
        zmq_socket_monitor (sock, NULL, 0);
    if (mon)
        zmq_close (mon);
    if (sock)
        zmq_close (sock);
    if (ctx)
        zmq_ctx_term (ctx);
    cgq_auth_destroy (&auth);
    free (data);
    return rc;
}

// A list "EP1,EP2" names a leader and its standbys: only the leader binds its
// endpoint, so the others stay silent. Each gets a share of the time, at
// least S_MIN_SHARE_MS; the first answer wins.
#define S_MIN_SHARE_MS 1000

int
cgq_ctl_request (const char *endpoint, cgq_env_t *req, int timeout_ms, cgq_env_t **reply,
                 char *err, size_t errlen)
{
    if (!strchr (endpoint, ','))
        return s_request_one (endpoint, req, timeout_ms, reply, err, errlen);
    char *list = cgq_xstrdup (endpoint), *save = NULL;
    size_t n = 1;
    for (const char *p = endpoint; *p; p++)
        n += *p == ',';
    int share = timeout_ms / (int) n > S_MIN_SHARE_MS ? timeout_ms / (int) n : S_MIN_SHARE_MS;
    int rc = CGQ_EXIT_FAIL;
    for (char *ep = strtok_r (list, ", ", &save); ep; ep = strtok_r (NULL, ", ", &save)) {
        rc = s_request_one (ep, req, share, reply, err, errlen);
        if (rc != CGQ_EXIT_FAIL)
            break; // an answer, or a malformed endpoint
    }
    free (list);
    return rc;
}

int
cgq_ctl_cancel (const char *endpoint, uint64_t job, int timeout_ms, char *msg, size_t msglen)
{
    Cgq__CancelJob cj = CGQ__CANCEL_JOB__INIT;
    cj.job = job;
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_CANCEL_JOB;
    env.cancel_job = &cj;
    cgq_env_t *reply = NULL;
    int rc = cgq_ctl_request (endpoint, &env, timeout_ms, &reply, msg, msglen);
    if (rc != CGQ_EXIT_OK)
        return rc;
    if (reply->body_case != CGQ__ENVELOPE__BODY_REPLY) {
        snprintf (msg, msglen, "the coordinator at %s answered CancelJob with '%s' instead of a reply",
                  endpoint, cgq_wire_body_name (reply));
        rc = CGQ_EXIT_FAIL;
    }
    else {
        int code = reply->reply->code;
        const char *text = reply->reply->message;
        if (text && *text)
            snprintf (msg, msglen, "%s", text);
        else
            snprintf (msg, msglen, code == 0 ? "cancelled job %" PRIu64 : "cannot cancel job %" PRIu64,
                      job);
        rc = code == 0 ? CGQ_EXIT_OK : code == 2 ? CGQ_EXIT_BAD : CGQ_EXIT_FAIL;
    }
    cgq_wire_free (reply);
    return rc;
}

int
cgq_cmd_cancel (cgq_cli_t *cli)
{
    uint64_t job;
    if (cgq_cli_parse_id ("job", cli->pos[0], &job) < 0)
        return CGQ_EXIT_BAD;
    char msg[1024];
    int rc = cgq_ctl_cancel (cli->coordinator, job, CGQ_CTL_TIMEOUT_MS, msg, sizeof msg);
    if (rc == CGQ_EXIT_OK)
        printf ("%s\n", msg);
    else
        cgq_cli_error ("%s", msg);
    return rc;
}

// s_reply_request sends env (a request named what) to the coordinator and
// prints its Reply's message, or ok / refused when it has none. The exit
// status follows the reply's code (0 ok, 2 bad input, else a failure).
static int
s_reply_request (cgq_cli_t *cli, cgq_env_t *env, const char *what, const char *ok,
                 const char *refused)
{
    cgq_env_t *reply = NULL;
    char msg[1024];
    int rc = cgq_ctl_request (cli->coordinator, env, CGQ_CTL_TIMEOUT_MS, &reply, msg, sizeof msg);
    if (rc == CGQ_EXIT_OK) {
        if (reply->body_case != CGQ__ENVELOPE__BODY_REPLY) {
            snprintf (msg, sizeof msg,
                      "the coordinator at %s answered %s with '%s' instead of a reply (is it "
                      "older than this CLI?)",
                      cli->coordinator, what, cgq_wire_body_name (reply));
            rc = CGQ_EXIT_FAIL;
        }
        else {
            int code = reply->reply->code;
            snprintf (msg, sizeof msg, "%s",
                      reply->reply->message && *reply->reply->message ? reply->reply->message
                      : code == 0                                     ? ok
                                                                      : refused);
            rc = code == 0 ? CGQ_EXIT_OK : code == 2 ? CGQ_EXIT_BAD : CGQ_EXIT_FAIL;
        }
        cgq_wire_free (reply);
    }
    if (rc == CGQ_EXIT_OK)
        printf ("%s\n", msg);
    else
        cgq_cli_error ("%s", msg);
    return rc;
}

int
cgq_cmd_update (cgq_cli_t *cli)
{
    uint64_t job, samples, conc;
    if (cgq_cli_parse_id ("job", cli->pos[0], &job) < 0 ||
        cgq_cli_opt_u64 (cli, "samples", 0, 1, (uint64_t) INT64_MAX, &samples) < 0 ||
        cgq_cli_opt_u64 (cli, "concurrency", 0, 0, UINT32_MAX, &conc) < 0)
        return CGQ_EXIT_BAD;
    bool set_conc = cgq_cli_opt (cli, "concurrency") != NULL;
    if (!samples && !set_conc) {
        cgq_cli_error ("nothing to update: give --samples N, --concurrency C or both");
        return CGQ_EXIT_BAD;
    }
    Cgq__UpdateJob uj = CGQ__UPDATE_JOB__INIT;
    uj.job = job;
    uj.samples = samples;
    uj.concurrency = (uint32_t) conc;
    uj.set_concurrency = set_conc;
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_UPDATE_JOB;
    env.update_job = &uj;
    return s_reply_request (cli, &env, "UpdateJob", "updated", "the update was refused");
}

// s_pause sends a PauseJob (cgq pause, cgq resume) and prints the answer.
static int
s_pause (cgq_cli_t *cli, bool resume)
{
    uint64_t job;
    if (cgq_cli_parse_id ("job", cli->pos[0], &job) < 0)
        return CGQ_EXIT_BAD;
    Cgq__PauseJob pj = CGQ__PAUSE_JOB__INIT;
    pj.job = job;
    pj.resume = resume;
    pj.now = !resume && cgq_cli_flag (cli, "now");
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_PAUSE_JOB;
    env.pause_job = &pj;
    return s_reply_request (cli, &env, "PauseJob", resume ? "resumed" : "paused", "refused");
}

int
cgq_cmd_pause (cgq_cli_t *cli)
{
    return s_pause (cli, false);
}

int
cgq_cmd_resume (cgq_cli_t *cli)
{
    return s_pause (cli, true);
}
