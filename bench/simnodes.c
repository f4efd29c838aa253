// cgq-simnodes: many idle nodes in one process, for bench/nodes.py.
//
// Opens --nodes DEALER sockets to a coordinator's node endpoint, each with
// its own routing id (PREFIX00000, PREFIX00001, ...), says Hello for each
// (a worker with --cpus slots), and once welcomed sends a Heartbeat every
// interval the Welcome names, the nodes' phases spread evenly over it as
// independent machines' would be. It speaks the real protocol (common/wire,
// schemas/cgq.proto) the way node/link.c does: a Heartbeat answered
// `unknown` or with another epoch means Hello again; an Assign of a noop
// trial is answered at once with its Result (the same one cgq-worker sends);
// anything else is answered with a Result of status LOST, so a job never
// waits on a node that does not really run commands. Acks are counted. It
// keeps no unacked results (loopback, a bench): a result the coordinator
// does not take is not sent again.
//
// It stops by itself after --duration seconds (or on SIGINT/SIGTERM),
// saying Bye for every node. Prints one line "simnodes: welcomed N nodes in
// MS ms" to stdout when every node has been welcomed the first time, and a
// summary line of counters at the end (stdout, one line, key=value).
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>
#include <zmq.h>

#include "result.h"
#include "util.h"
#include "wire.h"

typedef struct {
    void *sock;
    char id[64];
    uint64_t instance;
    bool welcomed;
    bool ever_welcomed;
    uint64_t epoch;
    uint64_t assign_epoch, assign_seq;
    int64_t hello_ms; // last Hello sent
} sim_node_t;

typedef struct {
    uint64_t hellos, welcomes, heartbeats, answers, unknown, assigns, results, acks, stops,
        other, send_fail;
} sim_stats_t;

static volatile sig_atomic_t s_stop = 0;
// The heartbeat interval the coordinator's Welcome names.
static int64_t s_hb_ms = 1000;

static void
s_on_signal (int sig)
{
    (void) sig;
    s_stop = 1;
}

static void
s_usage (FILE *f)
{
    fprintf (f, "usage: cgq-simnodes --coordinator EP [--nodes N] [--cpus C] [--duration S]\n"
                "                    [--prefix ID] [--hello-per-ms K]\n"
                "  --coordinator EP  the coordinator's node endpoint (tcp://127.0.0.1:7700)\n"
                "  --nodes N         simulated nodes, one DEALER socket each (100)\n"
                "  --cpus C          CPU slots each node offers (1)\n"
                "  --duration S      stop after S seconds, saying Bye for each node (30)\n"
                "  --prefix ID       node ids are ID00000, ID00001, ... (sim-)\n"
                "  --hello-per-ms K  connect and say Hello for at most K nodes a millisecond\n"
                "                    at start-up (4)\n"
                "  --connect-only    connect the sockets and say nothing (what a connection\n"
                "                    alone costs the coordinator); prints \"simnodes: connected\"\n");
}

static void
s_send (sim_node_t *n, cgq_env_t *env, sim_stats_t *st)
{
    if (cgq_wire_send (n->sock, env, ZMQ_DONTWAIT) < 0)
        st->send_fail++;
}

static void
s_hello (sim_node_t *n, int cpus, int64_t now, sim_stats_t *st)
{
    Cgq__Resources res = CGQ__RESOURCES__INIT;
    res.cpus = cpus;
    Cgq__Hello h = CGQ__HELLO__INIT;
    h.node_id = n->id;
    h.kind = CGQ__NODE_KIND__NODE_WORKER;
    h.resources = &res;
    h.hostname = "simnodes";
    h.pid = (uint32_t) getpid ();
    h.version = "simnodes";
    h.instance = n->instance;
    h.assign_epoch = n->assign_epoch;
    h.assign_seq = n->assign_seq;
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_HELLO;
    env.hello = &h;
    s_send (n, &env, st);
    n->welcomed = false;
    n->hello_ms = now;
    st->hellos++;
}

static void
s_heartbeat (sim_node_t *n, sim_stats_t *st)
{
    Cgq__Heartbeat hb = CGQ__HEARTBEAT__INIT;
    hb.epoch = n->epoch;
    hb.assign_epoch = n->assign_epoch;
    hb.assign_seq = n->assign_seq;
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &hb;
    s_send (n, &env, st);
    st->heartbeats++;
}

static void
s_answer_assign (sim_node_t *n, const Cgq__Assign *a, sim_stats_t *st)
{
    if (a->epoch > n->assign_epoch || (a->epoch == n->assign_epoch && a->seq > n->assign_seq)) {
        n->assign_epoch = a->epoch;
        n->assign_seq = a->seq;
    }
    st->assigns++;
    if (!a->task)
        return;
    Cgq__Result *r;
    if (a->kind && strcmp (a->kind, "noop") == 0)
        r = cgq_result_noop (a);
    else
        r = cgq_result_new (a->task, CGQ__TASK_STATUS__TASK_LOST, NULL,
                                 "cgq-simnodes runs noop trials only");
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_RESULT;
    env.result = r;
    s_send (n, &env, st);
    cgq_result_destroy (&r);
    st->results++;
}

// s_read handles every message waiting on n's socket. Returns how many
// nodes got their first Welcome.
static int
s_read (sim_node_t *n, int cpus, int64_t now, sim_stats_t *st)
{
    int first = 0;
    for (;;) {
        zmq_msg_t m;
        zmq_msg_init (&m);
        if (zmq_msg_recv (&m, n->sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close (&m);
            return first;
        }
        cgq_env_t *env = cgq_wire_decode (zmq_msg_data (&m), zmq_msg_size (&m), 0);
        zmq_msg_close (&m);
        if (!env) {
            st->other++;
            continue;
        }
        switch (env->body_case) {
        case CGQ__ENVELOPE__BODY_WELCOME:
            st->welcomes++;
            if (!n->ever_welcomed)
                first++;
            n->welcomed = n->ever_welcomed = true;
            n->epoch = env->welcome->epoch;
            if (env->welcome->heartbeat_ms > 0)
                s_hb_ms = env->welcome->heartbeat_ms;
            break;
        case CGQ__ENVELOPE__BODY_HEARTBEAT:
            st->answers++;
            if (!n->welcomed)
                break; // a Hello is on its way
            if (env->heartbeat->unknown || env->heartbeat->epoch != n->epoch) {
                st->unknown++;
                s_hello (n, cpus, now, st);
            }
            break;
        case CGQ__ENVELOPE__BODY_ASSIGN:
            s_answer_assign (n, env->assign, st);
            break;
        case CGQ__ENVELOPE__BODY_ACK:
            st->acks++;
            break;
        case CGQ__ENVELOPE__BODY_STOP:
            st->stops++; // nothing runs: its Result went out already
            break;
        default:
            st->other++;
        }
        cgq_wire_free (env);
    }
}

// s_poll_read: ZMQ_FD is a notification, not a level: after it fires (or
// after a send), ZMQ_EVENTS says whether a message waits.
static int
s_poll_read (sim_node_t *n, int cpus, int64_t now, sim_stats_t *st)
{
    int first = 0;
    for (;;) {
        int ev = 0;
        size_t len = sizeof ev;
        if (zmq_getsockopt (n->sock, ZMQ_EVENTS, &ev, &len) < 0 || !(ev & ZMQ_POLLIN))
            return first;
        first += s_read (n, cpus, now, st);
    }
}

int
main (int argc, char **argv)
{
    const char *endpoint = NULL, *prefix = "sim-";
    long nnodes = 100, cpus = 1, hello_per_ms = 4;
    double duration = 30;
    bool connect_only = false;
    static const struct option opts[] = {{"coordinator", required_argument, 0, 'c'},
                                         {"nodes", required_argument, 0, 'n'},
                                         {"cpus", required_argument, 0, 'p'},
                                         {"duration", required_argument, 0, 'd'},
                                         {"prefix", required_argument, 0, 'x'},
                                         {"hello-per-ms", required_argument, 0, 'r'},
                                         {"connect-only", no_argument, 0, 'o'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int o;
    while ((o = getopt_long (argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'c': endpoint = optarg; break;
        case 'n': nnodes = strtol (optarg, NULL, 10); break;
        case 'p': cpus = strtol (optarg, NULL, 10); break;
        case 'd': duration = strtod (optarg, NULL); break;
        case 'x': prefix = optarg; break;
        case 'r': hello_per_ms = strtol (optarg, NULL, 10); break;
        case 'o': connect_only = true; break;
        case 'h': s_usage (stdout); return 0;
        default: s_usage (stderr); return 2;
        }
    }
    if (!endpoint || nnodes < 1 || nnodes > 100000 || cpus < 0 || duration <= 0
        || hello_per_ms < 1 || strlen (prefix) > 40) {
        s_usage (stderr);
        return 2;
    }
    // One socket is one file descriptor (two with its mailbox's eventfd).
    struct rlimit rl;
    if (getrlimit (RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit (RLIMIT_NOFILE, &rl);
    }
    if (getrlimit (RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
        && rl.rlim_cur < (rlim_t) (3 * nnodes + 64)) {
        fprintf (stderr, "cgq-simnodes: %ld nodes need about %ld file descriptors; the limit is "
                         "%llu (ulimit -n)\n",
                 nnodes, 3 * nnodes + 64, (unsigned long long) rl.rlim_cur);
        return 1;
    }
    signal (SIGINT, s_on_signal);
    signal (SIGTERM, s_on_signal);

    void *ctx = zmq_ctx_new ();
    zmq_ctx_set (ctx, ZMQ_MAX_SOCKETS, (int) nnodes + 16);
    int ep = epoll_create1 (EPOLL_CLOEXEC);
    sim_node_t *nodes = cgq_xcalloc ((size_t) nnodes, sizeof *nodes);
    sim_stats_t st = {0};
    uint64_t seed = (uint64_t) getpid () * 0x9E3779B97F4A7C15ULL ^ (uint64_t) cgq_now_us ();

    int64_t t0 = cgq_now_ms (), end = t0 + (int64_t) (duration * 1000);
    int64_t hb_ms = s_hb_ms;
    long opened = 0, welcomed = 0;
    bool said_welcomed = false;
    int64_t hb_base = t0;
    long hb_next = 0;
    uint64_t round = 0;
    struct epoll_event evs[256];
    while (!s_stop) {
        int64_t now = cgq_now_ms ();
        if (now >= end)
            break;
        // Start-up: open and Hello a few nodes each millisecond (a storm of
        // thousands of connects at once would only measure the backlog).
        long want = (now - t0 + 1) * hello_per_ms;
        while (opened < nnodes && opened < want) {
            sim_node_t *n = &nodes[opened];
            snprintf (n->id, sizeof n->id, "%s%05ld", prefix, opened);
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            n->instance = seed | 1;
            n->sock = zmq_socket (ctx, ZMQ_DEALER);
            if (!n->sock) {
                fprintf (stderr, "cgq-simnodes: socket %ld: %s\n", opened, zmq_strerror (errno));
                return 1;
            }
            int linger = 0, ivl = 100, ivl_max = 2000;
            zmq_setsockopt (n->sock, ZMQ_ROUTING_ID, n->id, strlen (n->id));
            zmq_setsockopt (n->sock, ZMQ_LINGER, &linger, sizeof linger);
            zmq_setsockopt (n->sock, ZMQ_RECONNECT_IVL, &ivl, sizeof ivl);
            zmq_setsockopt (n->sock, ZMQ_RECONNECT_IVL_MAX, &ivl_max, sizeof ivl_max);
            if (zmq_connect (n->sock, endpoint) < 0) {
                fprintf (stderr, "cgq-simnodes: connect %s: %s\n", endpoint,
                         zmq_strerror (errno));
                return 1;
            }
            if (!connect_only) {
                // Level-triggered: the fd stays readable until ZMQ_EVENTS is
                // read, which s_poll_read does (so not for --connect-only).
                int fd;
                size_t fdlen = sizeof fd;
                zmq_getsockopt (n->sock, ZMQ_FD, &fd, &fdlen);
                struct epoll_event e = {.events = EPOLLIN, .data.u64 = (uint64_t) opened};
                epoll_ctl (ep, EPOLL_CTL_ADD, fd, &e);
                s_hello (n, (int) cpus, now, &st);
                welcomed += s_poll_read (n, (int) cpus, now, &st);
            }
            opened++;
        }
        if (connect_only) {
            if (opened == nnodes && !said_welcomed) {
                said_welcomed = true;
                printf ("simnodes: connected %ld sockets in %" PRId64 " ms\n", nnodes, now - t0);
                fflush (stdout);
            }
            int64_t sleep_ms = opened < nnodes ? 1 : end - now;
            epoll_wait (ep, evs, 1, (int) (sleep_ms > 100 ? 100 : sleep_ms));
            continue;
        }
        // The heartbeat cycle runs from the start: node i's turn comes at
        // phase i * interval / nodes of each interval. A welcomed node sends
        // a Heartbeat then; one waiting for its Welcome over a second says
        // Hello again (as node/link.c does); one not opened yet waits.
        // Once the first Welcome names another interval, the cycle restarts
        // with it.
        if (s_hb_ms != hb_ms) {
            hb_ms = s_hb_ms;
            hb_base = now;
            round = 0;
            hb_next = 0;
        }
        for (;;) {
            int64_t due = hb_base + (int64_t) round * hb_ms + hb_next * hb_ms / nnodes;
            if (due > now)
                break;
            sim_node_t *n = &nodes[hb_next];
            if (hb_next < opened) {
                if (n->welcomed)
                    s_heartbeat (n, &st);
                else if (now - n->hello_ms >= 1000)
                    s_hello (n, (int) cpus, now, &st);
                welcomed += s_poll_read (n, (int) cpus, now, &st);
            }
            if (++hb_next == nnodes) {
                hb_next = 0;
                round++;
            }
        }
        if (!said_welcomed && welcomed == nnodes) {
            said_welcomed = true;
            printf ("simnodes: welcomed %ld nodes in %" PRId64 " ms\n", nnodes, now - t0);
            fflush (stdout);
        }
        // Sleep until the next heartbeat or start-up step.
        int64_t next = hb_base + (int64_t) round * hb_ms + hb_next * hb_ms / nnodes;
        if (opened < nnodes)
            next = now + 1;
        if (end < next)
            next = end;
        int timeout = next > now ? (int) (next - now) : 0;
        int k = epoll_wait (ep, evs, (int) (sizeof evs / sizeof evs[0]), timeout);
        if (k < 0 && errno != EINTR) {
            perror ("cgq-simnodes: epoll_wait");
            return 1;
        }
        now = cgq_now_ms ();
        for (int i = 0; i < k; i++)
            welcomed += s_poll_read (&nodes[evs[i].data.u64], (int) cpus, now, &st);
    }
    // Bye from every node, then a short linger so the Byes leave.
    Cgq__Bye bye = CGQ__BYE__INIT;
    bye.reason = "cgq-simnodes stops";
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_BYE;
    env.bye = &bye;
    int linger = 2000;
    for (long i = 0; i < opened; i++) {
        if (nodes[i].welcomed)
            s_send (&nodes[i], &env, &st);
        zmq_setsockopt (nodes[i].sock, ZMQ_LINGER, &linger, sizeof linger);
        zmq_close (nodes[i].sock);
    }
    zmq_ctx_term (ctx);
    close (ep);
    printf ("simnodes: nodes=%ld welcomed=%ld hellos=%" PRIu64 " welcomes=%" PRIu64
            " heartbeats=%" PRIu64 " answers=%" PRIu64 " unknown=%" PRIu64 " assigns=%" PRIu64
            " results=%" PRIu64 " acks=%" PRIu64 " stops=%" PRIu64 " other=%" PRIu64
            " send_fail=%" PRIu64 "\n",
            nnodes, welcomed, st.hellos, st.welcomes, st.heartbeats, st.answers, st.unknown,
            st.assigns, st.results, st.acks, st.stops, st.other, st.send_fail);
    free (nodes);
    return 0;
}
