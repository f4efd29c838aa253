// cgq-coordinator: schedules trials onto nodes and persists every state change
// in Redis. main.c: options, signals, sockets, recovery, then the loop (loop.c).
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>
#include <zmq.h>

#include "auth.h"
#include "config.h"
#include "control.h"
#include "coord.h"
#include "gp.h"
#include "jobs.h"
#include "lease.h"
#include "log.h"
#include "loop.h"
#include "metrics.h"
#include "notify.h"
#include "recovery.h"
#include "space.h"
#include "spec.h"

static void
s_on_signal (int sig)
{
    (void) sig;
    coord_stop = 1;
}

static const cgq_opt_t s_opts[] = {
    {"redis", 0, CGQ_OPT_STRING, offsetof (coord_cfg_t, redis), "redis://127.0.0.1:6379/0",
     "CGQ_REDIS", "Redis URL: redis://[user:pass@]host:port/db or unix:///path.sock or sentinel://host:port[,host:port...]/master_name[/db]",
     0, 0},
    {"bind", 0, CGQ_OPT_STRING, offsetof (coord_cfg_t, bind), "tcp://*:7700", "CGQ_BIND",
     "endpoint for workers and runners (port 0: any free port)", 0, 0},
    {"control", 0, CGQ_OPT_STRING, offsetof (coord_cfg_t, control), "tcp://*:7701", "CGQ_CONTROL",
     "endpoint for the cgq CLI (port 0: any free port)", 0, 0},
    {"heartbeat", 0, CGQ_OPT_DURATION_MS, offsetof (coord_cfg_t, heartbeat_ms), "1s", NULL,
     "node heartbeat interval", 10, 60000},
    {"dead-after", 0, CGQ_OPT_INT, offsetof (coord_cfg_t, dead_after), "5", NULL,
     "a node silent for this many heartbeats is dead; its tasks run elsewhere", 2, 1000},
    {"stale-after", 0, CGQ_OPT_INT, offsetof (coord_cfg_t, stale_after), "2", NULL,
     "a node silent for this many heartbeats has its tasks shown as stale (no new ones go to "
     "it) until it is heard from again or dead-after",
     1, 1000},
    {"max-frame", 0, CGQ_OPT_BYTES, offsetof (coord_cfg_t, max_frame), "4M", "CGQ_MAX_FRAME",
     "larger messages are dropped and counted", 1024, 1073741824.0},
    {"max-trials", 0, CGQ_OPT_INT, offsetof (coord_cfg_t, max_trials),
     CGQ_DEFAULT_MAX_TRIALS_TEXT, "CGQ_MAX_TRIALS", "most trials one job may have", 1, 9.2e18},
    {"max-params", 0, CGQ_OPT_INT, offsetof (coord_cfg_t, max_params), "1024", "CGQ_MAX_PARAMS",
     "most params one trial may have (entries of the spec's space)", 1, 1e9},
    {"max-spec", 0, CGQ_OPT_BYTES, offsetof (coord_cfg_t, max_spec), "1M", "CGQ_MAX_SPEC",
     "largest spec accepted", 1024, 1073741824.0},
    {"max-buffer", 0, CGQ_OPT_INT, offsetof (coord_cfg_t, max_buffer), "200000", NULL,
     "while Redis is down, state changes held in memory (commands) before results are left "
     "with their nodes (which keep them until acked)",
     10, 1e9},
    {"durable-after", 0, CGQ_OPT_DURATION_MS, offsetof (coord_cfg_t, durable_ms), "3s", NULL,
     "Redis may lose writes this recent in a crash (appendfsync everysec: up to 2s): batches "
     "are journaled for replay and results acked to nodes only after this; 0 for appendfsync always",
     0, 600000},
    {"redis-replicas", 0, CGQ_OPT_INT, offsetof (coord_cfg_t, redis_replicas), "0",
     "CGQ_REDIS_REPLICAS",
     "Acks to nodes wait until this many Redis replicas have the batch (WAIT after each batch); "
     "a batch not confirmed stays journaled and is replayed on the new master after a failover",
     0, 100},
    {"redis-wait-timeout", 0, CGQ_OPT_DURATION_MS, offsetof (coord_cfg_t, redis_wait_ms), "500ms",
     NULL, "how long each batch's WAIT waits for --redis-replicas (less than the 2s Redis timeout)",
     1, 1500},
    {"lease", 0, CGQ_OPT_DURATION_MS, offsetof (coord_cfg_t, lease_ms), "5s", NULL,
     "the leader lease: a standby coordinator takes over this long after the leader stops "
     "renewing it (every third of it)",
     300, 600000},
    {"quarantine-after", 0, CGQ_OPT_INT, offsetof (coord_cfg_t, quarantine_after), "3", NULL,
     "a device whose measurements fail or time out this many times in a row is quarantined "
     "until cgq devices enable ID",
     1, 1000000},
    {"curve-secret", 0, CGQ_OPT_STRING, offsetof (coord_cfg_t, curve_secret), NULL,
     "CGQ_CURVE_SECRET",
     "CURVE: the coordinator's secret certificate (NAME.key_secret from `cgq keygen`)", 0, 0},
    {"curve-allow", 0, CGQ_OPT_STRING, offsetof (coord_cfg_t, curve_allow), NULL,
     "CGQ_CURVE_ALLOW",
     "CURVE: directory of the public certificates (NAME.key) of the nodes and users allowed",
     0, 0},
    {"insecure", 0, CGQ_OPT_BOOL, offsetof (coord_cfg_t, insecure), "false", NULL,
     "bind beyond loopback without CURVE: anyone who reaches the ports runs commands on the "
     "workers",
     0, 0},
    {"max-report", 0, CGQ_OPT_BYTES, offsetof (coord_cfg_t, max_report), "64K", "CGQ_MAX_REPORT",
     "larger Progress reports are not stored (counted in reports_dropped)", 64, 1073741824.0},
    {"max-report-rate", 0, CGQ_OPT_DOUBLE, offsetof (coord_cfg_t, max_report_rate), "20",
     "CGQ_MAX_REPORT_RATE",
     "Progress reports stored per second per trial; the rest are counted in reports_dropped",
     0.01, 1e6},
    {"max-node-cpus", 0, CGQ_OPT_DOUBLE, offsetof (coord_cfg_t, max_node_cpus), "65536",
     "CGQ_MAX_NODE_CPUS", "a node offering more CPU slots is refused (its Hello is answered with "
     "a Bye naming this flag)", 1, 1e9},
    {"max-node-gpus", 0, CGQ_OPT_INT, offsetof (coord_cfg_t, max_node_gpus), "256",
     "CGQ_MAX_NODE_GPUS", "a node offering more GPUs is refused (0: no limit)", 0, 1e6},
    {"log-level", 0, CGQ_OPT_STRING, offsetof (coord_cfg_t, log_level), "info", "CGQ_LOG_LEVEL",
     "debug, info, warn or error", 0, 0},
    {"log-format", 0, CGQ_OPT_STRING, offsetof (coord_cfg_t, log_format), "text",
     "CGQ_LOG_FORMAT", "text or json (JSON lines: ts, level, program, msg, job, trial, attempt)",
     0, 0},
    {"log-json", 0, CGQ_OPT_BOOL, offsetof (coord_cfg_t, log_json), "false", NULL,
     "same as --log-format json", 0, 0},
    {"http", 0, CGQ_OPT_STRING, offsetof (coord_cfg_t, http), NULL, "CGQ_HTTP",
     "serve the dashboard (/), its JSON API (/api/) and Prometheus /metrics on HOST:PORT "
     "(e.g. 127.0.0.1:9464; port 0: any free port); off when unset",
     0, 0},
    {"metrics", 0, CGQ_OPT_STRING, offsetof (coord_cfg_t, metrics), NULL, "CGQ_METRICS",
     "the older name of --http (the same server: /metrics, the dashboard and /api/)", 0, 0},
    {"http-token-file", 0, CGQ_OPT_STRING, offsetof (coord_cfg_t, http_token_file), NULL,
     "CGQ_HTTP_TOKEN_FILE",
     "every HTTP request must show the token in FILE (Authorization: Bearer, or ?token= once "
     "in a browser, which sets a cookie); needed to bind --http beyond loopback",
     0, 0},
    {"metrics-public", 0, CGQ_OPT_BOOL, offsetof (coord_cfg_t, metrics_public), "false", NULL,
     "allow --http beyond loopback without a token (as --insecure does): whoever reaches the "
     "port reads jobs, params and metrics", 0,
     0},
    {NULL, 0, 0, 0, NULL, NULL, NULL, 0, 0},
};

// s_bind binds a ROUTER; "tcp://host:0" means any free port. Writes the real
// endpoint into ep.
static void *
s_bind (coord_t *c, const char *what, const char *endpoint, char *ep, size_t eplen)
{
    void *s = zmq_socket (c->zctx, ZMQ_ROUTER);
    int zero = 0, one = 1, hwm = 100000;
    zmq_setsockopt (s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt (s, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt (s, ZMQ_RCVHWM, &hwm, sizeof hwm);
    // A node that reconnects under the same id takes its routing id over.
    // Not with CURVE: there a peer with another allowed key could take a live
    // node's connection (and the Assigns sent to it) just by using its id;
    // the id stays with the connection that has it, ZMTP heartbeats close a
    // dead one within a few heartbeats, and a node that reconnects meanwhile
    // is retried by ZeroMQ until then. Every message is also checked against
    // the ids its key may claim (session.c).
    if (!c->auth)
        zmq_setsockopt (s, ZMQ_ROUTER_HANDOVER, &one, sizeof one);
    else {
        int ivl = (int) c->cfg.heartbeat_ms, ttl = (int) (c->cfg.heartbeat_ms * 3);
        zmq_setsockopt (s, ZMQ_HEARTBEAT_IVL, &ivl, sizeof ivl);
        zmq_setsockopt (s, ZMQ_HEARTBEAT_TIMEOUT, &ttl, sizeof ttl);
    }
    // Larger messages are cut off by ZeroMQ (the peer sees its connection
    // closed). The control socket lets oversized requests through up to a
    // far bound, so that the CLI gets a reply that names the limit.
    int64_t maxmsg = strcmp (what, "control") == 0 ? control_max_message (&c->cfg)
                                                   : (int64_t) c->cfg.max_frame * 4;
    zmq_setsockopt (s, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    if (cgq_auth_server_apply (c->auth, s) < 0 || cgq_auth_watch (c->auth, c->zctx, s, what) < 0) {
        fprintf (stderr, "cgq-coordinator: cannot turn CURVE on for the %s socket: %s\n", what,
                 zmq_strerror (errno));
        zmq_close (s);
        return NULL;
    }
    char *e = cgq_xstrdup (endpoint);
    size_t n = strlen (e);
    if (n > 2 && strcmp (e + n - 2, ":0") == 0)
        e[n - 1] = '*';
    if (zmq_bind (s, e) < 0) {
        fprintf (stderr,
                 "cgq-coordinator: cannot bind %s %s: %s (set --%s or stop the other "
                 "coordinator)\n",
                 what, endpoint, zmq_strerror (errno), strcmp (what, "node") == 0 ? "bind" : "control");
        free (e);
        zmq_close (s);
        return NULL;
    }
    free (e);
    size_t len = eplen;
    zmq_getsockopt (s, ZMQ_LAST_ENDPOINT, ep, &len);
    return s;
}

// s_secure turns CURVE on when configured; without it, only loopback
// endpoints are bound unless --insecure (protected mode, as Redis has it).
static int
s_secure (coord_t *c)
{
    char err[1024];
    if (cgq_auth_server_new (c->zctx, c->cfg.curve_secret, c->cfg.curve_allow, &c->auth, err,
                             sizeof err)
        < 0) {
        fprintf (stderr, "cgq-coordinator: %s\n", err);
        return -1;
    }
    if (c->auth) {
        cgq_info ("CURVE on: public key %s, allow-list %s", cgq_auth_public_txt (c->auth),
                  c->cfg.curve_allow);
        return 0;
    }
    const char *open_ep = !cgq_auth_loopback_only (c->cfg.bind)      ? c->cfg.bind
                          : !cgq_auth_loopback_only (c->cfg.control) ? c->cfg.control
                                                                     : NULL;
    if (open_ep && !c->cfg.insecure) {
        fprintf (stderr,
                 "cgq-coordinator: refusing to bind %s without authentication: anyone who "
                 "reaches it could run commands on every worker. Turn CURVE on (`cgq keygen "
                 "coordinator`, then --curve-secret coordinator.key_secret --curve-allow DIR "
                 "with the .key of each worker and user in DIR; see docs/security.md), bind "
                 "loopback only (--bind tcp://127.0.0.1:7700 --control tcp://127.0.0.1:7701), "
                 "or pass --insecure on a network you trust\n",
                 open_ep);
        return -1;
    }
    if (open_ep)
        cgq_warn ("--insecure: %s is open without authentication; whoever reaches it can run "
                  "commands on every worker",
                  open_ep);
    return 0;
}

// s_holder_gone says whether the lease value "EPOCH HOST:PID" names a
// process of this host that no longer exists.
static bool
s_holder_gone (const char *holder, const char *host)
{
    const char *id = strchr (holder, ' ');
    const char *colon = id ? strrchr (id, ':') : NULL;
    if (!id || !colon || (size_t) (colon - id - 1) != strlen (host)
        || strncmp (id + 1, host, strlen (host)) != 0)
        return false;
    char *end = NULL;
    long pid = strtol (colon + 1, &end, 10);
    if (pid <= 0 || *end || pid == (long) getpid ())
        return false;
    return kill ((pid_t) pid, 0) < 0 && errno == ESRCH;
}

// s_lead waits until this coordinator holds the leader lease (lease.h), as a
// standby while another one does, then makes every write conditional on it.
// Returns 0, or -1 (Redis unusable at start, or stopped while waiting).
static int
s_lead (coord_t *c)
{
    char host[128] = "?", id[200], holder[256] = "", seen[256] = "";
    gethostname (host, sizeof host - 1);
    snprintf (id, sizeof id, "%s:%d", host, (int) getpid ());
    bool standby = false;
    while (!coord_stop) {
        int64_t asked = cgq_now_ms ();
        lease_rc_t rc = lease_acquire (c->store, id, c->cfg.lease_ms, &c->epoch, c->lease,
                                       sizeof c->lease, holder, sizeof holder);
        if (rc == LEASE_OURS) {
            c->lease_valid_ms = asked + c->cfg.lease_ms;
            break;
        }
        if (rc == LEASE_ERROR && !standby) {
            const char *why = holder[0] ? holder : cgq_store_errstr (c->store);
            fprintf (stderr, "cgq-coordinator: cannot take the leader lease in Redis at %s: %s%s\n",
                     cgq_store_url (c->store), why,
                     !strncmp (why, "NOPERM", 6) ? " (the Redis user needs write access to cgq:* "
                                                   "keys and EVAL: see docs/security.md)"
                                                 : "");
            return -1;
        }
        if (rc == LEASE_HELD && s_holder_gone (holder, host)) {
            // Killed on this very host (kill -9, a crash): it can write no
            // more, so there is nothing to wait for.
            cgq_warn ("the lease holder %s ran on this host and is gone; taking over now", holder);
            lease_release (c->store, holder);
            continue;
        }
        if (rc == LEASE_HELD && strcmp (holder, seen) != 0) {
            if (!standby) {
                // What a health check sees in /proc/PID/comm: standing by,
                // so no control endpoint to probe (docker/healthcheck.py).
                prctl (PR_SET_NAME, "cgq-standby", 0, 0, 0);
                printf ("cgq-coordinator standby leader=%s\n", holder);
                fflush (stdout);
            }
            cgq_info ("standby: coordinator %s holds the lease; taking over when it expires",
                      holder);
            snprintf (seen, sizeof seen, "%s", holder);
        }
        standby = true;
        c->standby = true;
        c->lease_holder_epoch = strtoull (holder, NULL, 10);
        // Sleep in short steps (a signal stops it), serving /metrics meanwhile.
        int64_t until = cgq_now_ms () + c->cfg.lease_ms / 3;
        for (int64_t now = cgq_now_ms (); now < until && !coord_stop; now = cgq_now_ms ())
            metrics_wait (c, until - now < 50 ? until - now : 50);
    }
    c->standby = false;
    if (coord_stop)
        return -1;
    if (standby) {
        prctl (PR_SET_NAME, "cgq-coordinator", 0, 0, 0);
        cgq_warn ("took over as leader with epoch %" PRIu64 " (the lease was free)", c->epoch);
    }
    c->next_lease_ms = cgq_now_ms () + c->cfg.lease_ms / 3;
    cgq_store_set_fence (c->store, CGQ_KEY_LEADER, c->lease, CGQ_KEY_EPOCH_SEQ, c->epoch);
    return 0;
}

// s_raise_open_files lifts the open-file limit's soft value to its hard
// one: each node and each CLI holds a connection, and a login shell's 1024
// would stop a coordinator short of a thousand nodes, who would then wait
// unanswered (loop.c watches what is left: s_check_open_files).
static void
s_raise_open_files (void)
{
    struct rlimit rl;
    if (getrlimit (RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= rl.rlim_max)
        return;
    rlim_t want = rl.rlim_max == RLIM_INFINITY ? (rlim_t) 1 << 20 : rl.rlim_max;
    rlim_t was = rl.rlim_cur;
    rl.rlim_cur = want;
    if (setrlimit (RLIMIT_NOFILE, &rl) == 0)
        cgq_info ("open-file limit raised from %llu to %llu (a connection per node and CLI)",
                  (unsigned long long) was, (unsigned long long) want);
}

int
main (int argc, char **argv)
{
    cgq_gp_blas_one_thread (); // the bayes searcher's model: no spinning pool beside the loop
    coord_cfg_t cfg;
    memset (&cfg, 0, sizeof cfg);
    int argi = 0;
    int rc = cgq_config_parse (s_opts, &cfg, "cgq-coordinator",
                               "cgq-coordinator [OPTIONS]\n"
                               "Schedules trials onto cgq-worker nodes; state lives in Redis.",
                               argc, argv, &argi);
    if (rc != 0) {
        cgq_config_free (s_opts, &cfg);
        return rc > 0 ? 0 : 2;
    }
    if (argi < argc) {
        fprintf (stderr, "cgq-coordinator: unexpected argument '%s' (see --help)\n", argv[argi]);
        cgq_config_free (s_opts, &cfg);
        return 2;
    }
    if (cgq_log_configure ("cgq-coordinator", cfg.log_level, cfg.log_format, cfg.log_json) < 0) {
        cgq_config_free (s_opts, &cfg);
        return 2;
    }
    s_raise_open_files ();
    // A submitted spec is held to --max-spec before it is parsed
    // (control.c); the parser's own bound is the flag's largest value, so
    // that specs accepted under a larger --max-spec are still recovered
    // after a restart with a smaller one.
    cgq_spec_set_max_bytes (1u << 30);

    struct sigaction sa;
    memset (&sa, 0, sizeof sa);
    sa.sa_handler = s_on_signal;
    sigaction (SIGINT, &sa, NULL);
    sigaction (SIGTERM, &sa, NULL);
    signal (SIGPIPE, SIG_IGN);

    char err[512];
    cgq_store_t *store = cgq_store_new (cfg.redis, 2000, err, sizeof err);
    if (!store) {
        fprintf (stderr, "cgq-coordinator: %s\n", err);
        cgq_config_free (s_opts, &cfg);
        return 2;
    }
    coord_t c;
    coord_init (&c, &cfg);
    c.store = store;
    int exit_code = 1;
    bool stand_by = false;
    if (cgq_store_connect (c.store) < 0) {
        fprintf (stderr, "cgq-coordinator: %s\n", cgq_store_errstr (c.store));
        goto out;
    }
    const char *http_addr = cfg.http && cfg.http[0] ? cfg.http : cfg.metrics;
    http_cfg_t http = {.addr = http_addr,
                       .token_file = cfg.http_token_file,
                       .insecure = cfg.metrics_public || cfg.insecure,
                       .redis = cfg.redis};
    if (http_addr && http_addr[0] && metrics_start_http (&c, &http, err, sizeof err) < 0) {
        fprintf (stderr, "cgq-coordinator: %s\n", err);
        exit_code = 2;
        goto out;
    }
    // Binds and keys are checked before the lease is taken: a coordinator
    // that would refuse to serve must not stand by, take over and leave the
    // lease held with the epoch bumped.
    c.zctx = zmq_ctx_new ();
    if (s_secure (&c) < 0)
        goto out;
    if (s_lead (&c) < 0) {
        if (coord_stop)
            exit_code = 0; // stopped while standing by
        goto out;
    }
    char tag[32];
    snprintf (tag, sizeof tag, "%" PRIu64, c.epoch);
    cgq_store_set_marker (c.store, CGQ_KEY_COORDINATOR, CGQ_CF_BATCH, tag);
    cgq_store_set_journal (c.store, cfg.durable_ms);
    cgq_store_set_replicas (c.store, (int) cfg.redis_replicas, (int) cfg.redis_wait_ms);
    recovery_nodes (&c);
    if (recovery_jobs (&c) < 0) {
        fprintf (stderr, "cgq-coordinator: cannot read jobs from Redis at %s: %s\n",
                 cgq_store_url (c.store), cgq_store_errstr (c.store));
        goto out;
    }
    if (notify_recover (&c) < 0) {
        fprintf (stderr, "cgq-coordinator: cannot read %s from Redis at %s: %s\n", CGQ_KEY_NOTIFY,
                 cgq_store_url (c.store), cgq_store_errstr (c.store));
        goto out;
    }

    c.nodes_sock = s_bind (&c, "node", cfg.bind, c.nodes_ep, sizeof c.nodes_ep);
    if (!c.nodes_sock)
        goto out;
    c.ctl_sock = s_bind (&c, "control", cfg.control, c.ctl_ep, sizeof c.ctl_ep);
    if (!c.ctl_sock)
        goto out;

    char now[32];
    cgq_fmt_double (now, cgq_wall_s ());
    cgq_hset_t h;
    cgq_hset_init (&h, CGQ_KEY_COORDINATOR);
    cgq_hset_u64 (&h, CGQ_CF_EPOCH, c.epoch);
    cgq_hset_u64 (&h, CGQ_CF_PID, (uint64_t) getpid ());
    cgq_hset_str (&h, CGQ_CF_NODES, c.nodes_ep);
    cgq_hset_str (&h, CGQ_CF_CONTROL, c.ctl_ep);
    cgq_hset_str (&h, CGQ_CF_STARTED, now);
    cgq_hset_queue (&h, c.store);
    jobs_write_dirty (&c); // what recovery changed, whole (the turns' sets included)
    if (cgq_store_flush (c.store) < 0) {
        fprintf (stderr, "cgq-coordinator: %s\n", cgq_store_errstr (c.store));
        goto out;
    }
    printf ("cgq-coordinator ready nodes=%s control=%s epoch=%" PRIu64 "\n", c.nodes_ep, c.ctl_ep,
            c.epoch);
    fflush (stdout);
    cgq_info ("ready: nodes %s, control %s, epoch %" PRIu64 ", Redis %s", c.nodes_ep, c.ctl_ep,
              c.epoch, cgq_store_url (c.store));
    int run = coord_run (&c);
    exit_code = run == 0 ? 0 : 1;
    if (run == 2)
        stand_by = true;
    cgq_info ("stopping");

out:
    // On every way out but a lost lease (someone else's now) the lease goes,
    // so a standby takes over at once: after a clean stop, and after a bind
    // or a Redis read that failed past s_lead. (The release only deletes a
    // lease that still holds our value.)
    if (c.lease[0] && !stand_by)
        lease_release (c.store, c.lease);
    coord_fini (&c);
    if (c.nodes_sock)
        zmq_close (c.nodes_sock);
    if (c.ctl_sock)
        zmq_close (c.ctl_sock);
    cgq_auth_destroy (&c.auth);
    if (c.zctx)
        zmq_ctx_term (c.zctx);
    cgq_config_free (s_opts, &cfg);
    if (stand_by && !coord_stop) {
        // Start over as a standby, with nothing of the old leader's memory.
        // The ZeroMQ sockets are closed above; hiredis's with the store.
        execv ("/proc/self/exe", argv);
        fprintf (stderr, "cgq-coordinator: cannot restart as a standby: %s\n", strerror (errno));
    }
    return exit_code;
}
