// fuzz_coord: the coordinator's handling of what peers send it. Each input is
// a conversation, played through the cgq_coord library the way loop.c plays
// the sockets (decode with the frame limit, session_message for nodes,
// control_message for the CLI, dispatch_run, coord_turn_end), against a
// coordinator that already has work in flight:
//
//   job 1: 4 command trials (grid), asha early stopping, running on node w1;
//   job 2: a device trial (on: {device: d1}), running on runner r1;
//   w2 is a peer that never said Hello.
//
// So results, progress and heartbeats for real tasks, for other nodes' tasks
// and for unknown ones are all a few mutations away. Redis is real: one
// redis-server per fuzz process (tests/support/redis_fixture.c), emptied
// (FLUSHDB) before each input so every input starts from the same state.
//
// Input: records [op][len: 2 bytes, little-endian][len bytes: one frame].
//   op bits 0-1: the sender: 0 w1, 1 r1, 2 w2, 3 the control socket;
//   bit 2: dispatch_run after the message; bit 3: end the turn (flush);
//   bits 4 and 5 both: a liveness check an hour later (every node dies).
// A short or truncated tail is sent as one frame from w1.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control.h"
#include "dispatch.h"
#include "fuzz.h"
#include "loop.h"
#include "outbox.h"
#include "redis_fixture.h"
#include "session.h"

static cgq_test_redis_t *s_redis;

// The prelude: frames encoded once, played at the start of every input.
typedef struct {
    int sender; // as op bits 0-1
    uint8_t *data;
    size_t len;
} s_frame_t;

static s_frame_t s_prelude[8];
static size_t s_nprelude;

static const char *const s_ids[3] = {"w1", "r1", "w2"};

static const char s_job1[] = "name: fuzz-grid\n"
                             "space: {x: {grid: [1, 2, 3, 4]}}\n"
                             "objective: {metric: acc, mode: max}\n"
                             "early_stop: {algorithm: asha, grace: 1, reduction: 2, max: 8}\n"
                             "trial: {command: 'echo {x}', resources: {cpu: 1}, timeout: 10s, "
                             "retries: 1}\n";

static const char s_job2[] = "name: fuzz-device\n"
                             "space: {b: {choice: [cpu, gpu]}}\n"
                             "objective: {metric: latency, mode: min}\n"
                             "trial: {on: {device: d1}, benchmark: bench, repeats: 2}\n";

static void
s_add (int sender, cgq_env_t *env)
{
    s_frame_t *f = &s_prelude[s_nprelude++];
    f->sender = sender;
    if (cgq_wire_encode (env, &f->data, &f->len) != 0)
        abort ();
}

static void
s_submit (const char *yaml)
{
    Cgq__SubmitJob m = CGQ__SUBMIT_JOB__INIT;
    m.spec_yaml = (char *) yaml;
    m.spec_path = "fuzz.yaml";
    m.spec_dir = "/tmp";
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_SUBMIT_JOB;
    env.submit_job = &m;
    s_add (3, &env);
}

static void
s_hello (int sender, Cgq__NodeKind kind, Cgq__Resources *res)
{
    Cgq__Hello h = CGQ__HELLO__INIT;
    h.node_id = (char *) s_ids[sender];
    h.kind = kind;
    h.hostname = "fuzz";
    h.pid = 1;
    h.resources = res;
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_HELLO;
    env.hello = &h;
    s_add (sender, &env);
}

static void
s_stop_redis (void)
{
    cgq_test_redis_stop (&s_redis);
}

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
    fuzz_quiet ();
    s_redis = cgq_test_redis_start (NULL);
    if (!s_redis) {
        fprintf (stderr, "fuzz_coord: cannot start redis-server (see above)\n");
        exit (1);
    }
    atexit (s_stop_redis);

    s_submit (s_job1);
    s_submit (s_job2);
    Cgq__Gpu gpu = CGQ__GPU__INIT, *gp = &gpu;
    gpu.name = "fake";
    Cgq__Resources res = CGQ__RESOURCES__INIT;
    res.cpus = 4;
    res.memory = 1 << 30;
    res.n_gpus = 1;
    res.gpus = &gp;
    s_hello (0, CGQ__NODE_KIND__NODE_WORKER, &res);
    Cgq__KeyValue tag = CGQ__KEY_VALUE__INIT, *tp = &tag;
    tag.key = "device";
    tag.value = "d1";
    Cgq__Device dev = CGQ__DEVICE__INIT, *dp = &dev;
    dev.id = "d1";
    dev.n_tags = 1;
    dev.tags = &tp;
    Cgq__Resources rres = CGQ__RESOURCES__INIT;
    rres.n_devices = 1;
    rres.devices = &dp;
    s_hello (1, CGQ__NODE_KIND__NODE_DEVICE_RUNNER, &rres);
    return 0;
}

// s_frame hands one frame to the coordinator as loop.c's s_drain would.
static void
s_frame (coord_t *c, int sender, const uint8_t *data, size_t len)
{
    cgq_env_t *env = cgq_wire_decode (data, len, c->cfg.max_frame);
    if (!env)
        return;
    if (sender == 3)
        control_message (c, "cli", 3, env);
    else
        session_message (c, s_ids[sender], strlen (s_ids[sender]), env);
    cgq_wire_free (env);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    coord_cfg_t cfg = {.heartbeat_ms = 1000, .dead_after = 5, .max_frame = 4 << 20,
                       .max_trials = 10000, .max_spec = 1 << 20, .max_params = 1024,
                       .max_node_cpus = 65536, .max_node_gpus = 256};
    coord_t c;
    coord_init (&c, &cfg);
    char err[256];
    c.store = cgq_store_new (cgq_test_redis_url (s_redis), 2000, err, sizeof err);
    if (!c.store)
        abort ();
    redisReply *r = cgq_store_command (c.store, "FLUSHDB");
    if (!r)
        abort (); // the fixture's Redis is gone: nothing below would mean anything
    freeReplyObject (r);
    c.epoch = 1;

    for (size_t i = 0; i < s_nprelude; i++)
        s_frame (&c, s_prelude[i].sender, s_prelude[i].data, s_prelude[i].len);
    dispatch_run (&c);
    coord_turn_end (&c, cgq_now_ms ());
    if (c.stat_assigns != 5) {
        // The fixture itself is broken (a spec or a Hello no longer accepted):
        // fuzzing from here would explore nothing of interest.
        fprintf (stderr, "fuzz_coord: the prelude started %llu trials, not 5\n",
                 (unsigned long long) c.stat_assigns);
        abort ();
    }

    size_t off = 0;
    while (off < size) {
        if (size - off < 3) {
            s_frame (&c, 0, data + off, size - off);
            break;
        }
        uint8_t op = data[off];
        size_t len = (size_t) data[off + 1] | (size_t) data[off + 2] << 8;
        off += 3;
        if (len > size - off)
            len = size - off;
        s_frame (&c, op & 3, data + off, len);
        off += len;
        if ((op & 0x30) == 0x30)
            session_liveness (&c, cgq_now_ms () + 3600 * 1000);
        if (op & 4)
            dispatch_run (&c);
        if (op & 8)
            coord_turn_end (&c, cgq_now_ms ());
    }
    dispatch_run (&c);
    coord_turn_end (&c, cgq_now_ms ());
    coord_fini (&c);
    return 0;
}
