// wire_test: every message body survives encode/decode; bad frames (other
// version, garbage, oversized, no body, fuzzed) are dropped and counted,
// never crash; frames go through real ZeroMQ sockets.
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "wire.h"

// s_roundtrip encodes env, decodes it, checks that nothing was dropped and
// that the decoded envelope encodes to the same bytes. Caller frees.
static cgq_env_t *
s_roundtrip (cgq_env_t *env)
{
    uint8_t *data = NULL;
    size_t len = 0;
    assert_int_equal (cgq_wire_encode (env, &data, &len), 0);
    assert_int_equal (env->version, CGQ_WIRE_VERSION);
    assert_true (len > 0);
    uint64_t dropped = cgq_wire_dropped;
    cgq_env_t *out = cgq_wire_decode (data, len, 0);
    assert_non_null (out);
    assert_true (cgq_wire_dropped == dropped);
    assert_int_equal (out->version, CGQ_WIRE_VERSION);
    assert_int_equal (out->body_case, env->body_case);
    uint8_t *again = NULL;
    size_t len2 = 0;
    assert_int_equal (cgq_wire_encode (out, &again, &len2), 0);
    assert_int_equal (len2, len);
    assert_memory_equal (again, data, len);
    free (again);
    free (data);
    return out;
}

static void
s_task (Cgq__TaskRef *t, uint64_t job, uint64_t trial, uint32_t stage, uint32_t attempt)
{
    Cgq__TaskRef init = CGQ__TASK_REF__INIT;
    *t = init;
    t->job = job;
    t->trial = trial;
    t->stage = stage;
    t->attempt = attempt;
}

static void
s_assert_task (const Cgq__TaskRef *t, uint64_t job, uint64_t trial, uint32_t stage,
               uint32_t attempt)
{
    assert_non_null (t);
    assert_true (t->job == job);
    assert_true (t->trial == trial);
    assert_int_equal (t->stage, stage);
    assert_int_equal (t->attempt, attempt);
}

static void
t_hello (void **state)
{
    Cgq__Gpu g0 = CGQ__GPU__INIT, g1 = CGQ__GPU__INIT;
    g0.index = 0;
    g0.name = "NVIDIA H100";
    g0.memory = 80ull << 30;
    g1.index = 3;
    g1.name = "NVIDIA H100";
    Cgq__Gpu *gpus[] = {&g0, &g1};
    Cgq__KeyValue l0 = CGQ__KEY_VALUE__INIT;
    l0.key = "zone";
    l0.value = "eu-1";
    Cgq__KeyValue *labels[] = {&l0};
    Cgq__Resources res = CGQ__RESOURCES__INIT;
    res.cpus = 15.5;
    res.memory = 64ull << 30;
    res.n_gpus = 2;
    res.gpus = gpus;
    res.n_labels = 1;
    res.labels = labels;
    Cgq__TaskRef r0, r1;
    s_task (&r0, 7, 12, 0, 1);
    s_task (&r1, UINT64_MAX, 1ull << 40, 2, 3);
    Cgq__TaskRef *running[] = {&r0, &r1};
    Cgq__TaskRef ut;
    s_task (&ut, 7, 9, 0, 2);
    Cgq__Result un = CGQ__RESULT__INIT;
    un.task = &ut;
    un.status = CGQ__TASK_STATUS__TASK_FAILED;
    un.exit_code = -9;
    un.error = "killed by signal 9";
    Cgq__Result *unacked[] = {&un};
    Cgq__Hello h = CGQ__HELLO__INIT;
    h.node_id = "gpu-3";
    h.kind = CGQ__NODE_KIND__NODE_WORKER;
    h.resources = &res;
    h.n_running = 2;
    h.running = running;
    h.n_unacked = 1;
    h.unacked = unacked;
    h.hostname = "host-a";
    h.pid = 4242;
    h.version = "0.1.0";
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_HELLO;
    env.hello = &h;

    cgq_env_t *o = s_roundtrip (&env);
    assert_string_equal (cgq_wire_body_name (o), "hello");
    Cgq__Hello *x = o->hello;
    assert_string_equal (x->node_id, "gpu-3");
    assert_string_equal (x->hostname, "host-a");
    assert_string_equal (x->version, "0.1.0");
    assert_int_equal (x->pid, 4242);
    assert_non_null (x->resources);
    assert_true (x->resources->cpus == 15.5);
    assert_true (x->resources->memory == 64ull << 30);
    assert_int_equal (x->resources->n_gpus, 2);
    assert_int_equal (x->resources->gpus[1]->index, 3);
    assert_string_equal (x->resources->gpus[0]->name, "NVIDIA H100");
    assert_true (x->resources->gpus[0]->memory == 80ull << 30);
    assert_int_equal (x->resources->n_labels, 1);
    assert_string_equal (x->resources->labels[0]->value, "eu-1");
    assert_int_equal (x->n_running, 2);
    s_assert_task (x->running[0], 7, 12, 0, 1);
    s_assert_task (x->running[1], UINT64_MAX, 1ull << 40, 2, 3);
    assert_int_equal (x->n_unacked, 1);
    s_assert_task (x->unacked[0]->task, 7, 9, 0, 2);
    assert_int_equal (x->unacked[0]->status, CGQ__TASK_STATUS__TASK_FAILED);
    assert_int_equal (x->unacked[0]->exit_code, -9);
    assert_string_equal (x->unacked[0]->error, "killed by signal 9");
    cgq_wire_free (o);
}

static void
t_assign (void **state)
{
    Cgq__TaskRef t;
    s_task (&t, 3, 5, 1, 2);
    char *argv[] = {"python3", "train.py", "--lr=0.001", "it's \"quoted\""};
    Cgq__KeyValue e0 = CGQ__KEY_VALUE__INIT, e1 = CGQ__KEY_VALUE__INIT;
    e0.key = "OMP_NUM_THREADS";
    e0.value = "4";
    e1.key = "EMPTY";
    e1.value = "";
    Cgq__KeyValue *envs[] = {&e0, &e1};
    uint32_t gpus[] = {0, 2, 7};
    Cgq__Assign a = CGQ__ASSIGN__INIT;
    a.task = &t;
    a.kind = "command";
    a.params_json = "{\"lr\":0.001,\"layers\":4}";
    a.n_argv = 4;
    a.argv = argv;
    a.n_env = 2;
    a.env = envs;
    a.n_gpus = 3;
    a.gpus = gpus;
    a.gpu_fraction = 0.5;
    a.cpus = 2.25;
    a.memory = 3ull << 30;
    a.timeout_ms = 30000;
    a.stage = "train";
    a.spec_dir = "/home/u/exp";
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_ASSIGN;
    env.assign = &a;

    cgq_env_t *o = s_roundtrip (&env);
    Cgq__Assign *x = o->assign;
    s_assert_task (x->task, 3, 5, 1, 2);
    assert_string_equal (x->kind, "command");
    assert_string_equal (x->params_json, "{\"lr\":0.001,\"layers\":4}");
    assert_int_equal (x->n_argv, 4);
    for (int i = 0; i < 4; i++)
        assert_string_equal (x->argv[i], argv[i]);
    assert_int_equal (x->n_env, 2);
    assert_string_equal (x->env[0]->key, "OMP_NUM_THREADS");
    assert_string_equal (x->env[0]->value, "4");
    assert_string_equal (x->env[1]->key, "EMPTY");
    assert_string_equal (x->env[1]->value, "");
    assert_int_equal (x->n_gpus, 3);
    assert_int_equal (x->gpus[0], 0);
    assert_int_equal (x->gpus[1], 2);
    assert_int_equal (x->gpus[2], 7);
    assert_true (x->gpu_fraction == 0.5);
    assert_true (x->cpus == 2.25);
    assert_true (x->memory == 3ull << 30);
    assert_int_equal (x->timeout_ms, 30000);
    assert_string_equal (x->stage, "train");
    assert_string_equal (x->spec_dir, "/home/u/exp");
    assert_string_equal (x->device_id, "");
    char buf[80];
    assert_string_equal (cgq_wire_task_str (buf, x->task), "3.5.1#2");
    assert_string_equal (cgq_wire_task_str (buf, NULL), "?");
    cgq_wire_free (o);
}

static void
t_result_progress (void **state)
{
    Cgq__TaskRef t;
    s_task (&t, 1, 2, 0, 1);
    Cgq__Result r = CGQ__RESULT__INIT;
    r.task = &t;
    r.status = CGQ__TASK_STATUS__TASK_TIMEOUT;
    r.metrics_json = "{\"loss\":0.1}";
    r.exit_code = -15;
    r.error = "timed out after 30s";
    r.duration_s = 30.0125;
    r.log_tail = "epoch 3\n\xe2\x9c\x93 done\n";
    r.reports = 17;
    r.trial_dir = "/w/job-1/trial-2/attempt-1";
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_RESULT;
    env.result = &r;
    cgq_env_t *o = s_roundtrip (&env);
    Cgq__Result *x = o->result;
    s_assert_task (x->task, 1, 2, 0, 1);
    assert_int_equal (x->status, CGQ__TASK_STATUS__TASK_TIMEOUT);
    assert_string_equal (x->metrics_json, "{\"loss\":0.1}");
    assert_int_equal (x->exit_code, -15);
    assert_string_equal (x->error, "timed out after 30s");
    assert_true (x->duration_s == 30.0125);
    assert_string_equal (x->log_tail, "epoch 3\n\xe2\x9c\x93 done\n");
    assert_true (x->reports == 17);
    assert_string_equal (x->trial_dir, "/w/job-1/trial-2/attempt-1");
    cgq_wire_free (o);

    Cgq__Progress p = CGQ__PROGRESS__INIT;
    p.task = &t;
    p.report_json = "{\"step\":10,\"loss\":0.5}";
    p.seq = 10;
    cgq_env_t env2 = CGQ__ENVELOPE__INIT;
    env2.body_case = CGQ__ENVELOPE__BODY_PROGRESS;
    env2.progress = &p;
    o = s_roundtrip (&env2);
    assert_string_equal (cgq_wire_body_name (o), "progress");
    s_assert_task (o->progress->task, 1, 2, 0, 1);
    assert_string_equal (o->progress->report_json, "{\"step\":10,\"loss\":0.5}");
    assert_true (o->progress->seq == 10);
    cgq_wire_free (o);
}

static void
t_ack_heartbeat_welcome_stop_bye (void **state)
{
    Cgq__TaskRef t[5];
    Cgq__TaskRef *tp[5];
    for (int i = 0; i < 5; i++) {
        s_task (&t[i], 9, (uint64_t) i * 100, (uint32_t) i % 2, (uint32_t) i + 1);
        tp[i] = &t[i];
    }
    Cgq__Ack a = CGQ__ACK__INIT;
    a.n_tasks = 5;
    a.tasks = tp;
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_ACK;
    env.ack = &a;
    cgq_env_t *o = s_roundtrip (&env);
    assert_int_equal (o->ack->n_tasks, 5);
    for (int i = 0; i < 5; i++)
        s_assert_task (o->ack->tasks[i], 9, (uint64_t) i * 100, (uint32_t) i % 2,
                       (uint32_t) i + 1);
    cgq_wire_free (o);

    Cgq__Heartbeat hb = CGQ__HEARTBEAT__INIT;
    hb.n_running = 2;
    hb.running = tp;
    hb.epoch = 12;
    hb.unknown = 1;
    cgq_env_t e2 = CGQ__ENVELOPE__INIT;
    e2.body_case = CGQ__ENVELOPE__BODY_HEARTBEAT;
    e2.heartbeat = &hb;
    o = s_roundtrip (&e2);
    assert_int_equal (o->heartbeat->n_running, 2);
    s_assert_task (o->heartbeat->running[1], 9, 100, 1, 2);
    assert_true (o->heartbeat->epoch == 12);
    assert_true (o->heartbeat->unknown);
    cgq_wire_free (o);

    Cgq__Welcome w = CGQ__WELCOME__INIT;
    w.epoch = 5;
    w.heartbeat_ms = 1000;
    w.max_frame = 4u << 20;
    cgq_env_t e3 = CGQ__ENVELOPE__INIT;
    e3.body_case = CGQ__ENVELOPE__BODY_WELCOME;
    e3.welcome = &w;
    o = s_roundtrip (&e3);
    assert_true (o->welcome->epoch == 5);
    assert_int_equal (o->welcome->heartbeat_ms, 1000);
    assert_int_equal (o->welcome->max_frame, 4u << 20);
    cgq_wire_free (o);

    Cgq__Stop s = CGQ__STOP__INIT;
    s.task = &t[3];
    s.reason = "job cancelled";
    cgq_env_t e4 = CGQ__ENVELOPE__INIT;
    e4.body_case = CGQ__ENVELOPE__BODY_STOP;
    e4.stop = &s;
    o = s_roundtrip (&e4);
    s_assert_task (o->stop->task, 9, 300, 1, 4);
    assert_string_equal (o->stop->reason, "job cancelled");
    cgq_wire_free (o);

    Cgq__Bye b = CGQ__BYE__INIT;
    b.reason = "SIGTERM";
    cgq_env_t e5 = CGQ__ENVELOPE__INIT;
    e5.body_case = CGQ__ENVELOPE__BODY_BYE;
    e5.bye = &b;
    o = s_roundtrip (&e5);
    assert_string_equal (o->bye->reason, "SIGTERM");
    assert_string_equal (cgq_wire_body_name (o), "bye");
    cgq_wire_free (o);
}

static void
t_cli_messages (void **state)
{
    Cgq__SubmitJob sj = CGQ__SUBMIT_JOB__INIT;
    sj.spec_yaml = "name: demo\ntrial:\n  command: [python3, t.py]\n";
    sj.spec_path = "tune.yaml";
    sj.spec_dir = "/abs/dir";
    cgq_env_t e = CGQ__ENVELOPE__INIT;
    e.body_case = CGQ__ENVELOPE__BODY_SUBMIT_JOB;
    e.submit_job = &sj;
    cgq_env_t *o = s_roundtrip (&e);
    assert_string_equal (o->submit_job->spec_yaml, sj.spec_yaml);
    assert_string_equal (o->submit_job->spec_path, "tune.yaml");
    assert_string_equal (o->submit_job->spec_dir, "/abs/dir");
    cgq_wire_free (o);

    Cgq__SubmitReply sr = CGQ__SUBMIT_REPLY__INIT;
    sr.job = 42;
    sr.trials = 1000000;
    cgq_env_t e2 = CGQ__ENVELOPE__INIT;
    e2.body_case = CGQ__ENVELOPE__BODY_SUBMIT_REPLY;
    e2.submit_reply = &sr;
    o = s_roundtrip (&e2);
    assert_true (o->submit_reply->job == 42);
    assert_true (o->submit_reply->trials == 1000000);
    cgq_wire_free (o);

    Cgq__CancelJob cj = CGQ__CANCEL_JOB__INIT;
    cj.job = 42;
    cgq_env_t e3 = CGQ__ENVELOPE__INIT;
    e3.body_case = CGQ__ENVELOPE__BODY_CANCEL_JOB;
    e3.cancel_job = &cj;
    o = s_roundtrip (&e3);
    assert_true (o->cancel_job->job == 42);
    cgq_wire_free (o);

    Cgq__Reply r = CGQ__REPLY__INIT;
    r.code = 2;
    r.message = "tune.yaml:14:9: unknown distribution 'loguniformm'";
    cgq_env_t e4 = CGQ__ENVELOPE__INIT;
    e4.body_case = CGQ__ENVELOPE__BODY_REPLY;
    e4.reply = &r;
    o = s_roundtrip (&e4);
    assert_int_equal (o->reply->code, 2);
    assert_string_equal (o->reply->message, r.message);
    cgq_wire_free (o);

    // An empty body still counts as a body.
    Cgq__Ping p = CGQ__PING__INIT;
    cgq_env_t e5 = CGQ__ENVELOPE__INIT;
    e5.body_case = CGQ__ENVELOPE__BODY_PING;
    e5.ping = &p;
    o = s_roundtrip (&e5);
    assert_non_null (o->ping);
    assert_string_equal (cgq_wire_body_name (o), "ping");
    cgq_wire_free (o);
}

static void
t_drops (void **state)
{
    // No body: encode refuses, and a hand-packed frame is dropped.
    cgq_env_t empty = CGQ__ENVELOPE__INIT;
    uint8_t *data = NULL;
    size_t len = 0;
    assert_int_equal (cgq_wire_encode (&empty, &data, &len), -1);
    assert_null (data);
    empty.version = CGQ_WIRE_VERSION;
    uint8_t buf[64];
    len = cgq__envelope__pack (&empty, buf);
    uint64_t d0 = cgq_wire_dropped;
    assert_null (cgq_wire_decode (buf, len, 0));
    assert_true (cgq_wire_dropped == d0 + 1);
    assert_null (cgq_wire_decode (buf, 0, 0)); // zero-length frame
    assert_true (cgq_wire_dropped == d0 + 2);

    // Another version.
    Cgq__Bye b = CGQ__BYE__INIT;
    b.reason = "x";
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_BYE;
    env.bye = &b;
    env.version = CGQ_WIRE_VERSION + 1;
    len = cgq__envelope__pack (&env, buf);
    assert_null (cgq_wire_decode (buf, len, 0));
    assert_true (cgq_wire_dropped == d0 + 3);
    env.version = CGQ_WIRE_VERSION;
    len = cgq__envelope__pack (&env, buf);
    cgq_env_t *o = cgq_wire_decode (buf, len, 0);
    assert_non_null (o); // same bytes with the right version pass
    cgq_wire_free (o);
    assert_true (cgq_wire_dropped == d0 + 3);

    // Garbage: an invalid wire type, and a length running past the end.
    const uint8_t junk1[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    const uint8_t junk2[] = {0x08, 0x01, 0x92, 0x01, 0x7f, 'a', 'b'};
    assert_null (cgq_wire_decode (junk1, sizeof junk1, 0));
    assert_null (cgq_wire_decode (junk2, sizeof junk2, 0));
    assert_true (cgq_wire_dropped == d0 + 5);

    // Oversized: a frame over max_len is dropped before decoding, also when
    // it would decode; the default limit applies with max_len 0.
    char *big = malloc (5000);
    memset (big, 'x', 4999);
    big[4999] = 0;
    b.reason = big;
    uint8_t *enc = NULL;
    assert_int_equal (cgq_wire_encode (&env, &enc, &len), 0);
    assert_null (cgq_wire_decode (enc, len, 4096));
    assert_true (cgq_wire_dropped == d0 + 6);
    o = cgq_wire_decode (enc, len, 8192);
    assert_non_null (o);
    assert_int_equal (strlen (o->bye->reason), 4999);
    cgq_wire_free (o);
    free (enc);
    free (big);
    size_t huge = CGQ_WIRE_MAX_FRAME_DEFAULT + 1;
    uint8_t *hb = calloc (1, huge);
    assert_null (cgq_wire_decode (hb, huge, 0));
    assert_true (cgq_wire_dropped == d0 + 7);
    free (hb);
    cgq_wire_free (NULL);
}

// s_fuzz_seed packs a Hello (nested, repeated) or a Result into a buffer.
static size_t
s_fuzz_seed (int which, uint8_t **out)
{
    Cgq__TaskRef t;
    s_task (&t, 77, 1234567, 1, 2);
    Cgq__TaskRef *tp[] = {&t, &t, &t};
    Cgq__Result r = CGQ__RESULT__INIT;
    r.task = &t;
    r.metrics_json = "{\"acc\":0.93}";
    r.error = "exit status 1";
    r.duration_s = 12.5;
    Cgq__Result *rp[] = {&r};
    Cgq__Gpu g = CGQ__GPU__INIT;
    g.name = "A100";
    g.memory = 40ull << 30;
    Cgq__Gpu *gp[] = {&g, &g};
    Cgq__Resources res = CGQ__RESOURCES__INIT;
    res.cpus = 8;
    res.n_gpus = 2;
    res.gpus = gp;
    Cgq__Hello h = CGQ__HELLO__INIT;
    h.node_id = "n1";
    h.resources = &res;
    h.n_running = 3;
    h.running = tp;
    h.n_unacked = 1;
    h.unacked = rp;
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    if (which == 0) {
        env.body_case = CGQ__ENVELOPE__BODY_HELLO;
        env.hello = &h;
    } else {
        env.body_case = CGQ__ENVELOPE__BODY_RESULT;
        env.result = &r;
    }
    size_t len = 0;
    assert_int_equal (cgq_wire_encode (&env, out, &len), 0);
    return len;
}

static void
t_fuzz (void **state)
{
    uint8_t *seed[2];
    size_t seed_len[2];
    for (int i = 0; i < 2; i++)
        seed_len[i] = s_fuzz_seed (i, &seed[i]);
    srand (12345);
    int accepted = 0, dropped = 0;
    uint64_t d0 = cgq_wire_dropped;
    for (int i = 0; i < 10000; i++) {
        int s = rand () % 2;
        size_t len = seed_len[s];
        uint8_t *f = malloc (len + 16);
        memcpy (f, seed[s], len);
        switch (i % 4) {
        case 0: // truncated
            len = (size_t) rand () % len;
            break;
        case 1: // bit flips
            for (int k = 0; k < 1 + rand () % 4; k++)
                f[rand () % len] ^= (uint8_t) (1u << (rand () % 8));
            break;
        case 2: // random bytes of random length
            len = (size_t) rand () % (len + 16);
            for (size_t k = 0; k < len; k++)
                f[k] = (uint8_t) rand ();
            break;
        case 3: // overwritten byte and truncation
            f[rand () % len] = (uint8_t) rand ();
            len -= (size_t) rand () % (len / 4 + 1);
            break;
        }
        cgq_env_t *o = cgq_wire_decode (f, len, 0);
        if (o) {
            assert_int_equal (o->version, CGQ_WIRE_VERSION);
            assert_int_not_equal (o->body_case, CGQ__ENVELOPE__BODY__NOT_SET);
            assert_string_not_equal (cgq_wire_body_name (o), "none");
            // What decodes must encode again.
            uint8_t *again = NULL;
            size_t alen = 0;
            assert_int_equal (cgq_wire_encode (o, &again, &alen), 0);
            free (again);
            cgq_wire_free (o);
            accepted++;
        } else
            dropped++;
        free (f);
    }
    free (seed[0]);
    free (seed[1]);
    assert_int_equal (accepted + dropped, 10000);
    assert_true (cgq_wire_dropped - d0 == (uint64_t) dropped);
    assert_true (dropped > 1000); // the mutations really break frames
    assert_true (accepted > 0);   // and some flips land in values only
}

static void
t_zmq_send (void **state)
{
    void *ctx = zmq_ctx_new ();
    void *router = zmq_socket (ctx, ZMQ_ROUTER);
    void *dealer = zmq_socket (ctx, ZMQ_DEALER);
    void *req = zmq_socket (ctx, ZMQ_REQ);
    int timeout = 2000;
    zmq_setsockopt (router, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    zmq_setsockopt (dealer, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    zmq_setsockopt (req, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    zmq_setsockopt (dealer, ZMQ_ROUTING_ID, "node-1", 6);
    assert_int_equal (zmq_bind (router, "inproc://wire-test"), 0);
    assert_int_equal (zmq_connect (dealer, "inproc://wire-test"), 0);
    assert_int_equal (zmq_connect (req, "inproc://wire-test"), 0);

    Cgq__Bye b = CGQ__BYE__INIT;
    b.reason = "hello over zmq";
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_BYE;
    env.bye = &b;
    assert_int_equal (cgq_wire_send (dealer, &env, 0), 0);
    char rid[256];
    int n = zmq_recv (router, rid, sizeof rid, 0);
    assert_int_equal (n, 6);
    assert_memory_equal (rid, "node-1", 6);
    uint8_t frame[512];
    int fl = zmq_recv (router, frame, sizeof frame, 0);
    assert_true (fl > 0);
    cgq_env_t *o = cgq_wire_decode (frame, (size_t) fl, 0);
    assert_non_null (o);
    assert_string_equal (o->bye->reason, "hello over zmq");
    cgq_wire_free (o);

    Cgq__Reply r = CGQ__REPLY__INIT;
    r.code = 0;
    r.message = "epoch 3";
    cgq_env_t reply = CGQ__ENVELOPE__INIT;
    reply.body_case = CGQ__ENVELOPE__BODY_REPLY;
    reply.reply = &r;
    assert_int_equal (cgq_wire_send_to (router, "node-1", 6, 0, &reply), 0);
    fl = zmq_recv (dealer, frame, sizeof frame, 0);
    assert_true (fl > 0);
    o = cgq_wire_decode (frame, (size_t) fl, 0);
    assert_non_null (o);
    assert_string_equal (o->reply->message, "epoch 3");
    cgq_wire_free (o);

    // REQ peers need the empty delimiter frame.
    Cgq__Ping p = CGQ__PING__INIT;
    cgq_env_t ping = CGQ__ENVELOPE__INIT;
    ping.body_case = CGQ__ENVELOPE__BODY_PING;
    ping.ping = &p;
    assert_int_equal (cgq_wire_send (req, &ping, 0), 0);
    n = zmq_recv (router, rid, sizeof rid, 0);
    assert_true (n > 0);
    int rid_len = n;
    assert_int_equal (zmq_recv (router, frame, sizeof frame, 0), 0); // delimiter
    fl = zmq_recv (router, frame, sizeof frame, 0);
    o = cgq_wire_decode (frame, (size_t) fl, 0);
    assert_non_null (o);
    assert_int_equal (o->body_case, CGQ__ENVELOPE__BODY_PING);
    cgq_wire_free (o);
    assert_int_equal (cgq_wire_send_to (router, rid, (size_t) rid_len, 1, &reply), 0);
    fl = zmq_recv (req, frame, sizeof frame, 0);
    assert_true (fl > 0);
    o = cgq_wire_decode (frame, (size_t) fl, 0);
    assert_non_null (o);
    assert_int_equal (o->reply->code, 0);
    cgq_wire_free (o);

    cgq_env_t none = CGQ__ENVELOPE__INIT;
    assert_int_equal (cgq_wire_send (dealer, &none, ZMQ_DONTWAIT), -1);

    int linger = 0;
    zmq_setsockopt (router, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt (dealer, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt (req, ZMQ_LINGER, &linger, sizeof linger);
    zmq_close (req);
    zmq_close (dealer);
    zmq_close (router);
    zmq_ctx_term (ctx);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (t_hello),
        cmocka_unit_test (t_assign),
        cmocka_unit_test (t_result_progress),
        cmocka_unit_test (t_ack_heartbeat_welcome_stop_bye),
        cmocka_unit_test (t_cli_messages),
        cmocka_unit_test (t_drops),
        cmocka_unit_test (t_fuzz),
        cmocka_unit_test (t_zmq_send),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
