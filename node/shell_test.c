// Tests of node/shell.c: a node program made of fake tasks (one pipe each)
// behind cgq_shell_ops_t, against a fake coordinator (a ROUTER in this
// process, pumped from the program's turn callback). One run goes through
// the whole life: Hello and Welcome, an AssignBatch unpacked into
// assigns, a Stop, the program's fds and reaping, results acked, a
// heartbeat listing the running task, SIGTERM, and the shutdown (drain,
// stop_all, the wait, abandon, the Acks still due, Bye).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "result.h"
#include "shell.h"
#include "util.h"
#include "wire.h"

#define S_NODE "shell-test"
#define S_EPOCH 9
#define S_TASKS 3
#define S_GIVE_UP_MS 20000
// Heartbeats this often: silence of 5 of them reconnects (link.h), so not
// so short that a loaded machine's stall makes the node say Hello again.
#define S_HEARTBEAT_MS 200

typedef struct {
    Cgq__TaskRef *ref; // NULL: not started
    int fds[2];        // the task's "output": readable once it has ended
    bool ended;        // its pipe was read: reap it
    bool stopped;
    bool reaped;
} s_task_t;

typedef struct {
    // The fake coordinator.
    void *ctx;
    void *router;
    char endpoint[256];
    uint8_t rid[256];
    size_t rid_len;
    bool assigned; // the tasks went out (after the first Hello)
    size_t hellos, results, acks_sent, byes;
    size_t results_of[S_TASKS + 1]; // by trial id
    size_t hb_with_task3; // heartbeats that listed task 3 as running
    bool draining_seen;
    // The program.
    cgq_shell_t *shell;
    s_task_t tasks[S_TASKS + 1]; // by trial id, 1..S_TASKS
    Cgq__TaskRef *running[S_TASKS + 1];
    size_t assigns, stops, readables, turns, stop_alls, abandons;
    bool raised;
    int64_t give_up;
} s_fix_t;

// ------------------------------------------------------------- coordinator

static void
s_coord_send (s_fix_t *f, cgq_env_t *env)
{
    assert_int_equal (cgq_wire_send_to (f->router, f->rid, f->rid_len, 0, env), 0);
}

static void
s_coord_assign (s_fix_t *f, Cgq__Assign *a, Cgq__TaskRef *ref, uint64_t trial, uint64_t seq)
{
    cgq__assign__init (a);
    cgq__task_ref__init (ref);
    ref->job = 1;
    ref->trial = trial;
    ref->attempt = 1;
    a->task = ref;
    a->kind = "fake";
    a->epoch = S_EPOCH;
    a->seq = seq;
}

static void
s_coord_ack (s_fix_t *f, Cgq__TaskRef *task)
{
    Cgq__Ack ack = CGQ__ACK__INIT;
    ack.n_tasks = 1;
    ack.tasks = &task;
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_ACK;
    env.ack = &ack;
    s_coord_send (f, &env);
    f->acks_sent++;
}

static void
s_coord_result (s_fix_t *f, const Cgq__Result *r)
{
    assert_non_null (r->task);
    assert_true (r->task->trial >= 1 && r->task->trial <= S_TASKS);
    f->results++;
    f->results_of[r->task->trial]++;
    assert_int_equal (r->status, r->task->trial == 1 ? CGQ__TASK_STATUS__TASK_SUCCEEDED
                                                     : CGQ__TASK_STATUS__TASK_STOPPED);
    s_coord_ack (f, r->task);
}

// s_coord_welcome answers a Hello with a Welcome; the first one also with
// tasks 1 and 2 in one AssignBatch and task 3 alone, then a Stop for task 2.
static void
s_coord_welcome (s_fix_t *f)
{
    Cgq__Welcome w = CGQ__WELCOME__INIT;
    w.epoch = S_EPOCH;
    w.heartbeat_ms = S_HEARTBEAT_MS;
    w.batches = true;
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_WELCOME;
    env.welcome = &w;
    s_coord_send (f, &env);
    if (f->assigned)
        return;
    f->assigned = true;

    Cgq__Assign a[S_TASKS];
    Cgq__TaskRef refs[S_TASKS];
    Cgq__Assign *batch[2] = {&a[0], &a[1]};
    for (int i = 0; i < S_TASKS; i++)
        s_coord_assign (f, &a[i], &refs[i], (uint64_t) i + 1, (uint64_t) i + 1);
    Cgq__AssignBatch b = CGQ__ASSIGN_BATCH__INIT;
    b.n_assigns = 2;
    b.assigns = batch;
    cgq_env_t e1 = CGQ__ENVELOPE__INIT;
    e1.body_case = CGQ__ENVELOPE__BODY_ASSIGN_BATCH;
    e1.assign_batch = &b;
    s_coord_send (f, &e1);
    cgq_env_t e2 = CGQ__ENVELOPE__INIT;
    e2.body_case = CGQ__ENVELOPE__BODY_ASSIGN;
    e2.assign = &a[2];
    s_coord_send (f, &e2);
    Cgq__Stop stop = CGQ__STOP__INIT;
    stop.task = &refs[1];
    stop.reason = "test stop";
    cgq_env_t e3 = CGQ__ENVELOPE__INIT;
    e3.body_case = CGQ__ENVELOPE__BODY_STOP;
    e3.stop = &stop;
    s_coord_send (f, &e3);
}

// s_coord_pump reads what the node sent, waiting up to wait_ms for the
// first message, and answers as a coordinator would.
static void
s_coord_pump (s_fix_t *f, long wait_ms)
{
    for (;;) {
        zmq_pollitem_t it = {.socket = f->router, .events = ZMQ_POLLIN};
        if (zmq_poll (&it, 1, wait_ms) <= 0)
            return;
        wait_ms = 0;
        zmq_msg_t rid, body;
        zmq_msg_init (&rid);
        zmq_msg_init (&body);
        assert_true (zmq_msg_recv (&rid, f->router, 0) >= 0);
        assert_true (zmq_msg_more (&rid));
        assert_true (zmq_msg_recv (&body, f->router, 0) >= 0);
        f->rid_len = zmq_msg_size (&rid);
        assert_true (f->rid_len <= sizeof f->rid);
        memcpy (f->rid, zmq_msg_data (&rid), f->rid_len);
        cgq_env_t *env = cgq_wire_decode (zmq_msg_data (&body), zmq_msg_size (&body), 0);
        zmq_msg_close (&rid);
        zmq_msg_close (&body);
        assert_non_null (env);
        switch (env->body_case) {
        case CGQ__ENVELOPE__BODY_HELLO:
            f->hellos++;
            assert_string_equal (env->hello->node_id, S_NODE);
            assert_true (env->hello->batches);
            s_coord_welcome (f);
            break;
        case CGQ__ENVELOPE__BODY_HEARTBEAT: {
            Cgq__Heartbeat *hb = env->heartbeat;
            for (size_t i = 0; i < hb->n_running; i++)
                if (hb->running[i]->trial == 3)
                    f->hb_with_task3++;
            if (hb->draining)
                f->draining_seen = true;
            Cgq__Heartbeat answer = CGQ__HEARTBEAT__INIT;
            answer.epoch = S_EPOCH;
            cgq_env_t out = CGQ__ENVELOPE__INIT;
            out.body_case = CGQ__ENVELOPE__BODY_HEARTBEAT;
            out.heartbeat = &answer;
            s_coord_send (f, &out);
            break;
        }
        case CGQ__ENVELOPE__BODY_RESULT:
            s_coord_result (f, env->result);
            break;
        case CGQ__ENVELOPE__BODY_RESULT_BATCH:
            for (size_t i = 0; i < env->result_batch->n_results; i++)
                s_coord_result (f, env->result_batch->results[i]);
            break;
        case CGQ__ENVELOPE__BODY_BYE:
            f->byes++;
            break;
        default:
            break;
        }
        cgq_wire_free (env);
    }
}

// ------------------------------------------------------------- the program

static s_task_t *
s_find (s_fix_t *f, const Cgq__TaskRef *ref)
{
    for (int i = 1; i <= S_TASKS; i++)
        if (f->tasks[i].ref && !f->tasks[i].reaped && cgq_result_ref_equal (f->tasks[i].ref, ref))
            return &f->tasks[i];
    return NULL;
}

static void
s_end (s_task_t *t)
{
    assert_int_equal (write (t->fds[1], "x", 1), 1);
}

static void
s_assign (void *arg, const Cgq__Assign *a)
{
    s_fix_t *f = arg;
    f->assigns++;
    assert_non_null (a->task);
    assert_true (a->task->trial >= 1 && a->task->trial <= S_TASKS);
    s_task_t *t = &f->tasks[a->task->trial];
    assert_null (t->ref);
    t->ref = cgq_result_ref_dup (a->task);
    assert_int_equal (pipe2 (t->fds, O_CLOEXEC | O_NONBLOCK), 0);
    if (a->task->trial == 1)
        s_end (t); // ends at once; 2 is stopped, 3 runs until the shutdown
}

static void
s_stop (void *arg, const Cgq__Stop *s)
{
    s_fix_t *f = arg;
    f->stops++;
    s_task_t *t = s_find (f, s->task);
    assert_non_null (t);
    assert_string_equal (s->reason, "test stop");
    t->stopped = true;
    s_end (t);
}

static size_t
s_running (void *arg, Cgq__TaskRef ***refs)
{
    s_fix_t *f = arg;
    size_t n = 0;
    for (int i = 1; i <= S_TASKS; i++)
        if (f->tasks[i].ref && !f->tasks[i].reaped)
            f->running[n++] = f->tasks[i].ref;
    *refs = f->running;
    return n;
}

static void
s_watch (void *arg, cgq_shell_t *shell)
{
    s_fix_t *f = arg;
    for (int i = 1; i <= S_TASKS; i++)
        if (f->tasks[i].ref && !f->tasks[i].ended)
            cgq_shell_watch (shell, f->tasks[i].fds[0], &f->tasks[i]);
    // A timer of the program's own: the loop wakes for it (the link's next
    // deadline may be a heartbeat interval away).
    cgq_shell_due (shell, cgq_now_ms () + 20);
    cgq_shell_due (shell, -1); // no timer: ignored
}

static void
s_readable (void *arg, void *owner, int fd)
{
    s_fix_t *f = arg;
    s_task_t *t = owner;
    assert_int_equal (fd, t->fds[0]);
    char c;
    assert_int_equal (read (fd, &c, 1), 1);
    t->ended = true;
    f->readables++;
}

static void
s_turn (void *arg)
{
    s_fix_t *f = arg;
    f->turns++;
    s_coord_pump (f, 0);
    bool settled = f->results_of[1] && f->results_of[2] && f->hb_with_task3 > 0;
    if (!f->raised && (settled || cgq_now_ms () > f->give_up)) {
        f->raised = true;
        raise (SIGTERM);
    }
}

static size_t
s_reap (void *arg, bool report)
{
    s_fix_t *f = arg;
    cgq_link_t *link = cgq_shell_link (f->shell);
    assert_non_null (link);
    size_t left = 0;
    for (int i = 1; i <= S_TASKS; i++) {
        s_task_t *t = &f->tasks[i];
        if (!t->ref || t->reaped)
            continue;
        if (!t->ended) {
            left++;
            continue;
        }
        t->reaped = true;
        close (t->fds[0]);
        close (t->fds[1]);
        Cgq__Result *r = cgq_result_new (t->ref, t->stopped ? CGQ__TASK_STATUS__TASK_STOPPED
                                                            : CGQ__TASK_STATUS__TASK_SUCCEEDED,
                                         NULL, NULL);
        if (report)
            cgq_link_result (link, r);
        else
            cgq_result_destroy (&r);
    }
    return left;
}

static size_t
s_stop_all (void *arg, int64_t grace_ms)
{
    s_fix_t *f = arg;
    f->stop_alls++;
    assert_int_equal (grace_ms, 100);
    size_t n = 0;
    for (int i = 1; i <= S_TASKS; i++)
        if (f->tasks[i].ref && !f->tasks[i].reaped) {
            f->tasks[i].stopped = true;
            s_end (&f->tasks[i]);
            n++;
        }
    return n;
}

static void
s_abandon (void *arg)
{
    s_fix_t *f = arg;
    f->abandons++;
}

static const cgq_shell_ops_t s_ops = {
    .assign = s_assign,
    .stop = s_stop,
    .running = s_running,
    .watch = s_watch,
    .readable = s_readable,
    .turn = s_turn,
    .reap = s_reap,
    .stop_all = s_stop_all,
    .abandon = s_abandon,
};

static void
test_one_life (void **state)
{
    s_fix_t *f = cgq_xcalloc (1, sizeof *f);
    f->ctx = zmq_ctx_new ();
    f->router = zmq_socket (f->ctx, ZMQ_ROUTER);
    int linger = 0;
    zmq_setsockopt (f->router, ZMQ_LINGER, &linger, sizeof linger);
    assert_int_equal (zmq_bind (f->router, "tcp://127.0.0.1:*"), 0);
    size_t len = sizeof f->endpoint;
    zmq_getsockopt (f->router, ZMQ_LAST_ENDPOINT, f->endpoint, &len);

    f->shell = cgq_shell_new ("shell_test", &s_ops, f);
    assert_non_null (f->shell);
    assert_null (cgq_shell_link (f->shell));
    Cgq__Resources res = CGQ__RESOURCES__INIT;
    cgq_link_opts_t lopts = {
        .endpoint = f->endpoint,
        .node_id = S_NODE,
        .hostname = "localhost",
        .resources = &res,
        .heartbeat_ms = S_HEARTBEAT_MS,
        .batches = true,
    };
    assert_int_equal (cgq_shell_connect (f->shell, &lopts), 0);
    assert_non_null (cgq_shell_link (f->shell));
    f->give_up = cgq_now_ms () + S_GIVE_UP_MS;

    assert_int_equal (cgq_shell_run (f->shell), SIGTERM);
    assert_true (cgq_now_ms () <= f->give_up); // it settled: not the give-up
    assert_true (f->hellos >= 1); // more only if this machine stalled for a second
    assert_int_equal (f->assigns, 3); // the AssignBatch's two, and one alone
    assert_int_equal (f->stops, 1);
    assert_true (f->results_of[1] >= 1); // succeeded
    assert_true (f->results_of[2] >= 1); // stopped
    assert_int_equal (f->results_of[3], 0); // still running
    assert_true (f->readables >= 2);
    assert_true (f->hb_with_task3 > 0);
    assert_true (f->turns > 1);
    assert_int_equal (f->stop_alls, 0);

    // Task 3 is still running: the shutdown stops it, drops its result,
    // waits for the Acks sent for tasks 1 and 2, and says Bye.
    cgq_shell_shutdown (f->shell, 100);
    assert_int_equal (f->stop_alls, 1);
    assert_int_equal (f->abandons, 1);
    assert_true (f->tasks[3].reaped);
    assert_null (cgq_shell_link (f->shell));
    cgq_shell_shutdown (f->shell, 100); // again: nothing left to do
    assert_int_equal (f->stop_alls, 1);

    int64_t until = cgq_now_ms () + 3000;
    while (!f->byes && cgq_now_ms () < until)
        s_coord_pump (f, 100);
    assert_true (f->draining_seen);
    assert_int_equal (f->byes, 1);
    assert_int_equal (f->results_of[3], 0); // its result was dropped

    cgq_shell_destroy (&f->shell);
    assert_null (f->shell);
    cgq_shell_destroy (&f->shell); // NULL-safe
    for (int i = 1; i <= S_TASKS; i++)
        free (f->tasks[i].ref);
    zmq_close (f->router);
    zmq_ctx_term (f->ctx);
    free (f);
}

// A link that cannot be made (a bad endpoint) fails cgq_shell_connect and
// leaves nothing open.
static void
test_connect_fails (void **state)
{
    cgq_shell_t *shell = cgq_shell_new ("shell_test", &s_ops, NULL);
    assert_non_null (shell);
    Cgq__Resources res = CGQ__RESOURCES__INIT;
    cgq_link_opts_t lopts = {
        .endpoint = "nonsense://here",
        .node_id = S_NODE,
        .resources = &res,
    };
    assert_int_equal (cgq_shell_connect (shell, &lopts), -1);
    assert_null (cgq_shell_link (shell));
    cgq_shell_shutdown (shell, 100); // nothing to shut down
    cgq_shell_destroy (&shell);
}

// What both mains do before connecting: the host's name, the id's length,
// the CURVE keys (none: off; a missing file: refused, not ignored).
static void
test_before_connect (void **state)
{
    char *host = cgq_shell_hostname ();
    assert_non_null (host);
    assert_true (*host);
    free (host);
    char id[300];
    memset (id, 'x', 255);
    id[255] = 0;
    assert_int_equal (cgq_shell_check_id ("t", id), 0);
    id[255] = 'x';
    id[256] = 0;
    assert_int_equal (cgq_shell_check_id ("t", id), -1);
    cgq_auth_t *auth = (cgq_auth_t *) 1;
    assert_int_equal (cgq_shell_auth ("t", "node", NULL, NULL, &auth), 0);
    assert_null (auth);
    assert_int_equal (cgq_shell_auth ("t", "node", "/nonexistent/x.key_secret",
                                      "/nonexistent/c.key", &auth),
                      -1);
    assert_null (auth);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_one_life),
        cmocka_unit_test (test_connect_fails),
        cmocka_unit_test (test_before_connect),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
