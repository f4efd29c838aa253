// The real cgq-worker binary against a fake coordinator: a ROUTER socket in
// this process that plays the coordinator's side of docs/protocol.md.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "assert_json.h"
#include "task.h"
#include "tmpdir.h"
#include "util.h"
#include "wire.h"

extern char **environ;

#define S_NODE "test-node"
#define S_EPOCH 5

typedef struct {
    void *ctx;
    void *router;
    char endpoint[256];
    char dir[64];
    pid_t pid;         // the worker, 0 when not running
    bool subreaper;    // start it as a child subreaper (as if it were PID 1)
    bool answer_hb;    // answer Heartbeats with {epoch S_EPOCH}
    bool hb_unknown;   // ... with unknown = true (once)
    size_t heartbeats; // Heartbeats received
    size_t hb_running; // tasks listed in the last Heartbeat
    size_t last_size;  // bytes of the last envelope s_next returned
} s_fake_t;

static int
s_setup (void **state)
{
    s_fake_t *f = cgq_xcalloc (1, sizeof *f);
    if (cgq_test_tmpdir (f->dir, sizeof f->dir, "worker-test") < 0)
        return -1;
    f->ctx = zmq_ctx_new ();
    f->router = zmq_socket (f->ctx, ZMQ_ROUTER);
    int one = 1, linger = 0;
    zmq_setsockopt (f->router, ZMQ_ROUTER_HANDOVER, &one, sizeof one);
    zmq_setsockopt (f->router, ZMQ_LINGER, &linger, sizeof linger);
    if (zmq_bind (f->router, "tcp://127.0.0.1:*") < 0)
        return -1;
    size_t len = sizeof f->endpoint;
    zmq_getsockopt (f->router, ZMQ_LAST_ENDPOINT, f->endpoint, &len);
    f->answer_hb = true;
    *state = f;
    return 0;
}

static int
s_teardown (void **state)
{
    s_fake_t *f = *state;
    if (f->pid > 0) {
        kill (f->pid, SIGKILL);
        waitpid (f->pid, NULL, 0);
    }
    zmq_close (f->router);
    zmq_ctx_term (f->ctx);
    int rc = cgq_test_rmtree (f->dir);
    free (f);
    return rc;
}

// s_start runs cgq-worker against the fake with extra flags (NULL-terminated).
static void
s_start (s_fake_t *f, ...)
{
    const char *bin_dir = getenv ("CGQ_BIN_DIR");
    char *bin = cgq_xasprintf ("%s/cgq-worker", bin_dir ? bin_dir : "./bin");
    char *workdir = cgq_xasprintf ("%s/work", f->dir);
    char *argv[32] = {bin, "--coordinator", f->endpoint, "--id", S_NODE, "--workdir", workdir,
                      "--gpus", "fake:2", "--cpus", "3", "--memory", "1G"};
    int argc = 13;
    va_list ap;
    va_start (ap, f);
    for (char *a; (a = va_arg (ap, char *)) && argc < 31;)
        argv[argc++] = a;
    va_end (ap);
    argv[argc] = NULL;
    int rc = 0;
    if (f->subreaper) {
        // The attribute survives execve: orphans of the trials become the
        // worker's children, as they do when it is PID 1 of a container.
        f->pid = fork ();
        if (f->pid == 0) {
            prctl (PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
            execv (bin, argv);
            _exit (127);
        }
        rc = f->pid < 0 ? errno : 0;
    }
    else
        rc = posix_spawn (&f->pid, bin, NULL, NULL, argv, environ);
    free (bin);
    free (workdir);
    assert_int_equal (rc, 0);
}

// s_wait_exit waits up to max_ms for the worker to exit; returns its status
// (as from waitpid) or -1 when it is still running.
static int
s_wait_exit (s_fake_t *f, int64_t max_ms)
{
    int64_t give_up = cgq_now_ms () + max_ms;
    while (cgq_now_ms () < give_up) {
        int st;
        pid_t r = waitpid (f->pid, &st, WNOHANG);
        if (r == f->pid) {
            f->pid = 0;
            return st;
        }
        usleep (20000);
    }
    return -1;
}

static void
s_send (s_fake_t *f, cgq_env_t *env)
{
    assert_int_equal (cgq_wire_send_to (f->router, S_NODE, strlen (S_NODE), 0, env), 0);
}

static void
s_send_welcome_max (s_fake_t *f, uint32_t heartbeat_ms, uint32_t max_frame)
{
    Cgq__Welcome w = CGQ__WELCOME__INIT;
    w.epoch = S_EPOCH;
    w.heartbeat_ms = heartbeat_ms;
    w.max_frame = max_frame;
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_WELCOME;
    env.welcome = &w;
    s_send (f, &env);
}

static void
s_send_welcome (s_fake_t *f, uint32_t heartbeat_ms)
{
    s_send_welcome_max (f, heartbeat_ms, 0);
}

static void
s_send_ack (s_fake_t *f, const Cgq__TaskRef *task)
{
    Cgq__Ack ack = CGQ__ACK__INIT;
    Cgq__TaskRef *tasks[] = {(Cgq__TaskRef *) task};
    ack.tasks = tasks;
    ack.n_tasks = 1;
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_ACK;
    env.ack = &ack;
    s_send (f, &env);
}

static void
s_send_assign (s_fake_t *f, uint64_t trial, const char *kind, const char *params,
               const char *script, uint32_t timeout_ms)
{
    Cgq__TaskRef ref = CGQ__TASK_REF__INIT;
    ref.job = 1;
    ref.trial = trial;
    ref.attempt = 1;
    Cgq__Assign a = CGQ__ASSIGN__INIT;
    a.task = &ref;
    a.kind = (char *) kind;
    a.params_json = (char *) params;
    char *argv[] = {"/bin/sh", "-c", (char *) script};
    if (script) {
        a.argv = argv;
        a.n_argv = 3;
    }
    uint32_t gpus[] = {1};
    a.gpus = gpus;
    a.n_gpus = 1;
    a.timeout_ms = timeout_ms;
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_ASSIGN;
    env.assign = &a;
    s_send (f, &env);
}

// s_next returns the next message from the worker other than a Heartbeat
// (those are answered here), or NULL after max_ms. Caller frees.
static cgq_env_t *
s_next (s_fake_t *f, int64_t max_ms)
{
    int64_t give_up = cgq_now_ms () + max_ms;
    while (true) {
        int64_t left = give_up - cgq_now_ms ();
        if (left <= 0)
            return NULL;
        zmq_pollitem_t item = {.socket = f->router, .events = ZMQ_POLLIN};
        if (zmq_poll (&item, 1, (long) left) <= 0)
            continue;
        zmq_msg_t id, body;
        zmq_msg_init (&id);
        zmq_msg_init (&body);
        assert_true (zmq_msg_recv (&id, f->router, 0) >= 0);
        assert_true (zmq_msg_more (&id));
        assert_true (zmq_msg_recv (&body, f->router, 0) >= 0);
        assert_false (zmq_msg_more (&body));
        assert_int_equal (zmq_msg_size (&id), strlen (S_NODE));
        assert_memory_equal (zmq_msg_data (&id), S_NODE, strlen (S_NODE));
        cgq_env_t *env = cgq_wire_decode (zmq_msg_data (&body), zmq_msg_size (&body), 0);
        f->last_size = zmq_msg_size (&body);
        zmq_msg_close (&id);
        zmq_msg_close (&body);
        assert_non_null (env);
        if (env->body_case != CGQ__ENVELOPE__BODY_HEARTBEAT)
            return env;
        f->heartbeats++;
        f->hb_running = env->heartbeat->n_running;
        if (f->answer_hb) {
            Cgq__Heartbeat hb = CGQ__HEARTBEAT__INIT;
            hb.epoch = S_EPOCH;
            hb.unknown = f->hb_unknown;
            f->hb_unknown = false;
            cgq_env_t ans = CGQ__ENVELOPE__INIT;
            ans.body_case = CGQ__ENVELOPE__BODY_HEARTBEAT;
            ans.heartbeat = &hb;
            s_send (f, &ans);
        }
        cgq_wire_free (env);
    }
}

// s_expect returns the next message with body_case, skipping others
// (Hello re-sends, Progress, ...), or fails after max_ms.
static cgq_env_t *
s_expect (s_fake_t *f, Cgq__Envelope__BodyCase body_case, int64_t max_ms)
{
    int64_t give_up = cgq_now_ms () + max_ms;
    while (cgq_now_ms () < give_up) {
        cgq_env_t *env = s_next (f, give_up - cgq_now_ms ());
        if (env && env->body_case == body_case)
            return env;
        cgq_wire_free (env);
    }
    fail_msg ("no message of body %d within %lld ms", (int) body_case, (long long) max_ms);
    return NULL;
}

// s_wait_welcomed waits for a Heartbeat: only a welcomed worker sends them.
static void
s_wait_welcomed (s_fake_t *f)
{
    size_t before = f->heartbeats;
    int64_t give_up = cgq_now_ms () + 3000;
    while (f->heartbeats == before && cgq_now_ms () < give_up)
        cgq_wire_free (s_next (f, 50));
    assert_true (f->heartbeats > before);
}

static void
s_terminate (s_fake_t *f)
{
    assert_int_equal (kill (f->pid, SIGTERM), 0);
    cgq_env_t *bye = s_expect (f, CGQ__ENVELOPE__BODY_BYE, 5000);
    cgq_wire_free (bye);
    int st = s_wait_exit (f, 5000);
    assert_true (st != -1);
    assert_true (WIFEXITED (st));
    assert_int_equal (WEXITSTATUS (st), 0); // also: no leaks under ASan
}

static void
test_hello_assign_result_ack (void **state)
{
    s_fake_t *f = *state;
    s_start (f, "--heartbeat", "200ms", NULL);

    cgq_env_t *env = s_expect (f, CGQ__ENVELOPE__BODY_HELLO, 5000);
    Cgq__Hello *h = env->hello;
    assert_string_equal (h->node_id, S_NODE);
    assert_int_equal (h->kind, CGQ__NODE_KIND__NODE_WORKER);
    assert_string_equal (h->version, "0.1.0");
    assert_int_equal (h->pid, f->pid);
    assert_true (h->resources->cpus == 3);
    assert_int_equal (h->resources->memory, 1ull << 30);
    assert_int_equal (h->resources->n_gpus, 2);
    assert_string_equal (h->resources->gpus[1]->name, "fake-gpu-1");
    assert_int_equal (h->n_running, 0);
    assert_int_equal (h->n_unacked, 0);
    cgq_wire_free (env);

    s_send_welcome (f, 200);
    s_send_assign (f, 0, "noop", "{\"x\": 2, \"y\": 3}", NULL, 0);
    env = s_expect (f, CGQ__ENVELOPE__BODY_RESULT, 5000);
    assert_int_equal (env->result->task->trial, 0);
    assert_int_equal (env->result->status, CGQ__TASK_STATUS__TASK_SUCCEEDED);
    cgq_assert_json (env->result->metrics_json, "{\"x\": 2, \"y\": 3, \"score\": 5}");
    s_send_ack (f, env->result->task);
    cgq_wire_free (env);

    s_send_assign (f, 1, "command", "{\"lr\": 0.5}",
                   "echo \"{\\\"loss\\\": $CGQ_PARAM_LR}\" >&3; sleep 0.3;"
                   "echo \"{\\\"loss\\\": 0.25, \\\"gpu\\\": \\\"$CUDA_VISIBLE_DEVICES\\\"}\" >&3",
                   0);
    size_t progress = 0;
    int64_t give_up = cgq_now_ms () + 5000;
    Cgq__Result *result = NULL;
    while (!result && cgq_now_ms () < give_up) {
        env = s_next (f, give_up - cgq_now_ms ());
        if (!env)
            break;
        if (env->body_case == CGQ__ENVELOPE__BODY_PROGRESS) {
            progress++;
            assert_int_equal (env->progress->seq, progress);
            assert_int_equal (env->progress->task->trial, 1);
            if (progress == 1)
                assert_string_equal (env->progress->report_json, "{\"loss\":0.5}");
            cgq_wire_free (env);
        }
        else if (env->body_case == CGQ__ENVELOPE__BODY_RESULT) {
            result = env->result;
            env->result = NULL; // keep it past the envelope
            env->body_case = CGQ__ENVELOPE__BODY__NOT_SET;
            cgq_wire_free (env);
        }
        else
            cgq_wire_free (env);
    }
    assert_non_null (result);
    assert_int_equal (progress, 2);
    assert_int_equal (result->status, CGQ__TASK_STATUS__TASK_SUCCEEDED);
    assert_int_equal (result->reports, 2);
    cgq_assert_json (result->metrics_json, "{\"loss\": 0.25, \"gpu\": \"1\"}");
    assert_non_null (strstr (result->trial_dir, "/work/job-1/trial-1/attempt-1"));
    assert_true (result->duration_s >= 0.3);
    s_send_ack (f, result->task);
    cgq__result__free_unpacked (result, NULL);
    assert_true (f->heartbeats >= 1);

    s_terminate (f);
}

static void
test_resend_and_rehello (void **state)
{
    s_fake_t *f = *state;
    s_start (f, "--heartbeat", "200ms", NULL);
    cgq_wire_free (s_expect (f, CGQ__ENVELOPE__BODY_HELLO, 5000));
    s_send_welcome (f, 200);
    s_send_assign (f, 2, "noop", "{\"a\": 1}", NULL, 0);
    cgq_env_t *env = s_expect (f, CGQ__ENVELOPE__BODY_RESULT, 5000);
    int64_t first = cgq_now_ms ();
    cgq_wire_free (env);
    // Not acked: it comes again after about 5 s.
    env = s_expect (f, CGQ__ENVELOPE__BODY_RESULT, 7000);
    int64_t gap = cgq_now_ms () - first;
    assert_true (gap >= 4500);
    assert_int_equal (env->result->task->trial, 2);
    cgq_wire_free (env);

    // A coordinator that forgets the node gets a Hello with the unacked result.
    f->hb_unknown = true;
    env = s_expect (f, CGQ__ENVELOPE__BODY_HELLO, 3000);
    assert_int_equal (env->hello->n_unacked, 1);
    assert_int_equal (env->hello->unacked[0]->task->trial, 2);
    s_send_welcome (f, 200);
    s_send_ack (f, env->hello->unacked[0]->task);
    cgq_wire_free (env);

    // Acked: a forgetful coordinator now hears of nothing unacked.
    usleep (300000);
    f->hb_unknown = true;
    env = s_expect (f, CGQ__ENVELOPE__BODY_HELLO, 3000);
    assert_int_equal (env->hello->n_unacked, 0);
    cgq_wire_free (env);
    s_send_welcome (f, 200);
    s_wait_welcomed (f);
    s_terminate (f);
}

static void
test_stop_and_shutdown_with_running_task (void **state)
{
    s_fake_t *f = *state;
    s_start (f, "--heartbeat", "200ms", "--kill-grace", "1s", NULL);
    cgq_wire_free (s_expect (f, CGQ__ENVELOPE__BODY_HELLO, 5000));
    s_send_welcome (f, 200);

    // Stop: SIGTERM to the group, result STOPPED.
    s_send_assign (f, 3, "command", "{}", "exec sleep 30", 0);
    int64_t give_up = cgq_now_ms () + 5000;
    // The task is listed in the heartbeats while it runs.
    while (f->hb_running == 0 && cgq_now_ms () < give_up)
        cgq_wire_free (s_next (f, 100));
    assert_int_equal (f->hb_running, 1);
    Cgq__TaskRef ref = CGQ__TASK_REF__INIT;
    ref.job = 1;
    ref.trial = 3;
    ref.attempt = 1;
    Cgq__Stop stop = CGQ__STOP__INIT;
    stop.task = &ref;
    stop.reason = "job cancelled";
    cgq_env_t senv = CGQ__ENVELOPE__INIT;
    senv.body_case = CGQ__ENVELOPE__BODY_STOP;
    senv.stop = &stop;
    s_send (f, &senv);
    cgq_env_t *env = s_expect (f, CGQ__ENVELOPE__BODY_RESULT, 4000);
    assert_int_equal (env->result->status, CGQ__TASK_STATUS__TASK_STOPPED);
    assert_string_equal (env->result->error, "stopped: job cancelled");
    s_send_ack (f, env->result->task);
    cgq_wire_free (env);

    // Shutdown with a task running that ignores SIGTERM and has a child:
    // the worker kills the group and exits 0 without reporting it.
    s_send_assign (f, 4, "command", "{}",
                   "sleep 60 & echo $! > bg.pid; trap '' TERM; while :; do sleep 1; done", 0);
    usleep (500000);
    char *bg_path = cgq_xasprintf ("%s/work/job-1/trial-4/attempt-1/bg.pid", f->dir);
    FILE *fp = fopen (bg_path, "r");
    free (bg_path);
    assert_non_null (fp);
    int bg = 0;
    assert_int_equal (fscanf (fp, "%d", &bg), 1);
    fclose (fp);
    assert_int_equal (kill (bg, 0), 0);
    int64_t t0 = cgq_now_ms ();
    assert_int_equal (kill (f->pid, SIGTERM), 0);
    give_up = cgq_now_ms () + 6000;
    bool bye = false;
    while (!bye && cgq_now_ms () < give_up) {
        env = s_next (f, give_up - cgq_now_ms ());
        if (!env)
            break;
        if (env->body_case == CGQ__ENVELOPE__BODY_RESULT)
            fail_msg ("a task killed by the shutdown was reported");
        bye = env->body_case == CGQ__ENVELOPE__BODY_BYE;
        cgq_wire_free (env);
    }
    assert_true (bye);
    int st = s_wait_exit (f, 5000);
    assert_true (st != -1 && WIFEXITED (st));
    assert_int_equal (WEXITSTATUS (st), 0);
    // The grace on shutdown is min(--kill-grace, 2s) = 1 s.
    assert_true (cgq_now_ms () - t0 >= 900);
    bool gone = false;
    for (int i = 0; i < 100 && !gone; i++) {
        gone = kill (bg, 0) < 0 && errno == ESRCH;
        if (!gone)
            usleep (20000);
    }
    assert_true (gone);
}

// A worker told to stop while it holds an unacknowledged result waits (2 s
// at most) for the Ack before its Bye, so that finished work is not re-run.
static void
test_shutdown_waits_for_ack (void **state)
{
    s_fake_t *f = *state;
    s_start (f, "--heartbeat", "200ms", NULL);
    cgq_wire_free (s_expect (f, CGQ__ENVELOPE__BODY_HELLO, 5000));
    s_send_welcome (f, 200);
    s_send_assign (f, 4, "noop", "{\"a\": 1}", NULL, 0);
    cgq_env_t *res = s_expect (f, CGQ__ENVELOPE__BODY_RESULT, 5000);
    assert_int_equal (kill (f->pid, SIGTERM), 0);
    // No Bye while the result waits for its Ack ...
    int64_t t0 = cgq_now_ms ();
    cgq_env_t *env;
    while (cgq_now_ms () - t0 < 500 && (env = s_next (f, 50))) {
        assert_int_not_equal (env->body_case, CGQ__ENVELOPE__BODY_BYE);
        cgq_wire_free (env);
    }
    // ... and once it is acknowledged the worker says Bye and exits 0.
    s_send_ack (f, res->result->task);
    cgq_wire_free (res);
    cgq_env_t *bye = s_expect (f, CGQ__ENVELOPE__BODY_BYE, 3000);
    assert_true (cgq_now_ms () - t0 < 2000);
    cgq_wire_free (bye);
    int st = s_wait_exit (f, 5000);
    assert_true (st != -1 && WIFEXITED (st));
    assert_int_equal (WEXITSTATUS (st), 0);
}

static void
test_reconnect_after_silence (void **state)
{
    s_fake_t *f = *state;
    s_start (f, "--heartbeat", "100ms", NULL);
    cgq_wire_free (s_expect (f, CGQ__ENVELOPE__BODY_HELLO, 5000));
    s_send_welcome (f, 100);
    // Nothing answers the heartbeats: after 5 x 100 ms the worker opens a new
    // socket and says Hello again.
    f->answer_hb = false;
    int64_t t0 = cgq_now_ms ();
    cgq_env_t *env = s_expect (f, CGQ__ENVELOPE__BODY_HELLO, 3000);
    int64_t took = cgq_now_ms () - t0;
    assert_true (took >= 400);
    assert_string_equal (env->hello->node_id, S_NODE);
    cgq_wire_free (env);
    f->answer_hb = true;
    s_send_welcome (f, 100);
    s_wait_welcomed (f);
    s_terminate (f);
}

static void
test_hello_repeats_until_welcome (void **state)
{
    s_fake_t *f = *state;
    s_start (f, NULL);
    int64_t t0 = cgq_now_ms ();
    cgq_wire_free (s_expect (f, CGQ__ENVELOPE__BODY_HELLO, 5000));
    cgq_wire_free (s_expect (f, CGQ__ENVELOPE__BODY_HELLO, 3000));
    assert_true (cgq_now_ms () - t0 >= 800);
    // SIGTERM works before any Welcome, too, and exits at once (no Bye).
    t0 = cgq_now_ms ();
    assert_int_equal (kill (f->pid, SIGTERM), 0);
    int st = s_wait_exit (f, 5000);
    assert_true (st != -1 && WIFEXITED (st));
    assert_int_equal (WEXITSTATUS (st), 0);
    assert_true (cgq_now_ms () - t0 < 900);
}

// s_zombies counts the zombie children of pid.
static size_t
s_zombies (pid_t pid)
{
    size_t n = 0;
    DIR *d = opendir ("/proc");
    struct dirent *e;
    while (d && (e = readdir (d))) {
        char path[300], line[512] = "";
        snprintf (path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *fp = e->d_name[0] >= '1' && e->d_name[0] <= '9' ? fopen (path, "r") : NULL;
        if (!fp)
            continue;
        char *ok = fgets (line, sizeof line, fp);
        fclose (fp);
        const char *paren = ok ? strrchr (line, ')') : NULL;
        char st = 0;
        int ppid = 0;
        if (paren && sscanf (paren + 1, " %c %d", &st, &ppid) == 2 && ppid == (int) pid)
            n += st == 'Z';
    }
    if (d)
        closedir (d);
    return n;
}

static void
test_orphans_reaped_as_pid1 (void **state)
{
    s_fake_t *f = *state;
    f->subreaper = true;
    s_start (f, "--heartbeat", "200ms", NULL);
    cgq_wire_free (s_expect (f, CGQ__ENVELOPE__BODY_HELLO, 5000));
    s_send_welcome (f, 200);
    // The background child outlives the trial's main process; the worker
    // kills the group when the main process exits, and the child, now the
    // worker's own, must be reaped. The second one ends while the trial runs.
    s_send_assign (f, 5, "command", "{}",
                   "sleep 30 & echo $! > bg.pid; (sleep 0.1 &); sleep 0.5; exit 0", 0);
    cgq_env_t *env = s_expect (f, CGQ__ENVELOPE__BODY_RESULT, 5000);
    assert_int_equal (env->result->status, CGQ__TASK_STATUS__TASK_SUCCEEDED);
    s_send_ack (f, env->result->task);
    cgq_wire_free (env);
    char *bg_path = cgq_xasprintf ("%s/work/job-1/trial-5/attempt-1/bg.pid", f->dir);
    FILE *fp = fopen (bg_path, "r");
    free (bg_path);
    assert_non_null (fp);
    int bg = 0;
    assert_int_equal (fscanf (fp, "%d", &bg), 1);
    fclose (fp);
    // Gone for good: a zombie still answers kill (pid, 0).
    bool gone = false;
    for (int i = 0; i < 100 && !gone; i++) {
        gone = kill (bg, 0) < 0 && errno == ESRCH;
        if (!gone)
            cgq_wire_free (s_next (f, 20));
    }
    if (!gone || s_zombies (f->pid) > 0)
        fail_msg ("the worker left %zu zombie(s), the background child %s", s_zombies (f->pid),
                  gone ? "reaped" : "among them");
    s_terminate (f);
}

static void
test_results_fit_the_frame_limit (void **state)
{
    s_fake_t *f = *state;
    s_start (f, "--heartbeat", "200ms", NULL);
    cgq_wire_free (s_expect (f, CGQ__ENVELOPE__BODY_HELLO, 5000));
    // The coordinator drops larger frames (--max-frame): a result that does
    // not fit would be re-sent every 5 s forever and its trial never end.
    const uint32_t max_frame = 2048;
    s_send_welcome_max (f, 200, max_frame);
    s_wait_welcomed (f);

    // A failure with a long stderr: the error and the log tail are cut to fit.
    s_send_assign (f, 6, "command", "{}",
                   "i=0; while [ $i -lt 200 ]; do echo \"stderr line $i of a failing trial\" >&2;"
                   " i=$((i+1)); done; echo last-words >&2; exit 1", 0);
    cgq_env_t *env = s_expect (f, CGQ__ENVELOPE__BODY_RESULT, 5000);
    if (f->last_size > max_frame)
        fail_msg ("a %zu-byte Result over the %u-byte frame limit", f->last_size, max_frame);
    Cgq__Result *r = env->result;
    assert_int_equal (r->status, CGQ__TASK_STATUS__TASK_FAILED);
    assert_true (!strncmp (r->error, "exit status 1\n", 14));
    assert_non_null (strstr (r->log_tail, "last-words"));
    s_send_ack (f, r->task);
    cgq_wire_free (env);

    // Metrics that cannot fit: the trial fails, saying why.
    s_send_assign (f, 7, "command", "{}",
                   "{ printf '{\"x\": \"'; head -c 3000 /dev/zero | tr '\\0' a; printf '\"}'; }"
                   " > result.json", 0);
    env = s_expect (f, CGQ__ENVELOPE__BODY_RESULT, 5000);
    if (f->last_size > max_frame)
        fail_msg ("a %zu-byte Result over the %u-byte frame limit", f->last_size, max_frame);
    r = env->result;
    assert_int_equal (r->status, CGQ__TASK_STATUS__TASK_FAILED);
    assert_string_equal (r->metrics_json, "{}");
    assert_non_null (strstr (r->error, "frame limit"));
    s_send_ack (f, r->task);
    cgq_wire_free (env);
    s_terminate (f);
}

static void
test_bad_options (void **state)
{
    s_fake_t *f = *state;
    s_start (f, "--no-such-flag", NULL);
    int st = s_wait_exit (f, 5000);
    assert_true (st != -1 && WIFEXITED (st));
    assert_int_equal (WEXITSTATUS (st), 2);
    s_start (f, "--gpus", "zero", NULL);
    st = s_wait_exit (f, 5000);
    assert_true (st != -1 && WIFEXITED (st));
    assert_int_equal (WEXITSTATUS (st), 2);
    s_start (f, "--help", NULL);
    st = s_wait_exit (f, 5000);
    assert_true (st != -1 && WIFEXITED (st));
    assert_int_equal (WEXITSTATUS (st), 0);
}

// A worker says `batches` in its Hello and reads an AssignBatch: each
// Assign in it runs, in order, a repeated one once. To a coordinator whose Welcome says
// `batches`, the no-op results of that one message go back as one
// ResultBatch; each is acked, and kept until then, on its own.
static void
test_assign_batch_result_batch (void **state)
{
    s_fake_t *f = *state;
    s_start (f, "--heartbeat", "200ms", NULL);
    cgq_env_t *env = s_expect (f, CGQ__ENVELOPE__BODY_HELLO, 5000);
    assert_true (env->hello->batches);
    cgq_wire_free (env);
    Cgq__Welcome w = CGQ__WELCOME__INIT;
    w.epoch = S_EPOCH;
    w.heartbeat_ms = 200;
    w.batches = true;
    cgq_env_t wel = CGQ__ENVELOPE__INIT;
    wel.body_case = CGQ__ENVELOPE__BODY_WELCOME;
    wel.welcome = &w;
    s_send (f, &wel);
    s_wait_welcomed (f);

    enum { N = 3 };
    Cgq__TaskRef refs[N];
    Cgq__Assign as[N], *ap[N + 1];
    char params[N][32];
    for (int i = 0; i < N; i++) {
        refs[i] = (Cgq__TaskRef) CGQ__TASK_REF__INIT;
        refs[i].job = 1;
        refs[i].trial = 10 + i;
        refs[i].attempt = 1;
        as[i] = (Cgq__Assign) CGQ__ASSIGN__INIT;
        as[i].task = &refs[i];
        as[i].kind = "noop";
        snprintf (params[i], sizeof params[i], "{\"x\": %d}", i);
        as[i].params_json = params[i];
        as[i].epoch = S_EPOCH;
        as[i].seq = 1 + i;
        ap[i] = &as[i];
    }
    // The first again, as a coordinator's resend can put it: it runs once.
    ap[N] = &as[0];
    Cgq__AssignBatch b = CGQ__ASSIGN_BATCH__INIT;
    b.n_assigns = N + 1;
    b.assigns = ap;
    cgq_env_t ab = CGQ__ENVELOPE__INIT;
    ab.body_case = CGQ__ENVELOPE__BODY_ASSIGN_BATCH;
    ab.assign_batch = &b;
    s_send (f, &ab);

    env = s_expect (f, CGQ__ENVELOPE__BODY_RESULT_BATCH, 5000);
    assert_int_equal (env->result_batch->n_results, N);
    for (int i = 0; i < N; i++) {
        const Cgq__Result *r = env->result_batch->results[i];
        assert_int_equal (r->task->trial, 10 + i); // in the order assigned
        assert_int_equal (r->status, CGQ__TASK_STATUS__TASK_SUCCEEDED);
        char want[16];
        snprintf (want, sizeof want, "\"x\":%d", i);
        assert_non_null (strstr (r->metrics_json, want));
    }
    cgq_wire_free (env);
    // The last Assign seen is said in the heartbeats.
    env = s_next (f, 0);
    cgq_wire_free (env);
    // Acked one by one: the two not acked are sent again.
    s_send_ack (f, &refs[1]);
    int64_t give_up = cgq_now_ms () + 8000;
    bool seen[N] = {false};
    while (cgq_now_ms () < give_up && !(seen[0] && seen[2])) {
        env = s_next (f, 200);
        if (env && env->body_case == CGQ__ENVELOPE__BODY_RESULT)
            seen[env->result->task->trial - 10] = true;
        if (env && env->body_case == CGQ__ENVELOPE__BODY_RESULT_BATCH)
            for (size_t i = 0; i < env->result_batch->n_results; i++)
                seen[env->result_batch->results[i]->task->trial - 10] = true;
        cgq_wire_free (env);
    }
    assert_true (seen[0]);
    assert_false (seen[1]);
    assert_true (seen[2]);
    s_send_ack (f, &refs[0]);
    s_send_ack (f, &refs[2]);
    s_terminate (f);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown (test_hello_assign_result_ack, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_resend_and_rehello, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_stop_and_shutdown_with_running_task, s_setup,
                                         s_teardown),
        cmocka_unit_test_setup_teardown (test_shutdown_waits_for_ack, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_reconnect_after_silence, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_hello_repeats_until_welcome, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_orphans_reaped_as_pid1, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_results_fit_the_frame_limit, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_bad_options, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_assign_batch_result_batch, s_setup, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
