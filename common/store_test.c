// store_test: cgq_store against a real redis-server (tests/support fixture):
// URL parsing, connect and errors, the MULTI/EXEC batch (size, speed, Redis
// down and back, rejected commands), AUTH, and password masking.
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "redis_fixture.h"
#include "keyspace.h"
#include "store.h"
#include "util.h"

static cgq_test_redis_t *s_redis; // shared by the tests that need no special config

static int
s_group_setup (void **state)
{
    cgq_log_init ("store_test", CGQ_LOG_WARN, false);
    s_redis = cgq_test_redis_start (NULL);
    return s_redis ? 0 : -1;
}

static int
s_group_teardown (void **state)
{
    cgq_test_redis_stop (&s_redis);
    return 0;
}

static cgq_store_t *
s_open (const char *url, int timeout_ms)
{
    char err[512] = "";
    cgq_store_t *st = cgq_store_new (url, timeout_ms, err, sizeof err);
    if (!st)
        fail_msg ("cgq_store_new (%s): %s", url, err);
    return st;
}

static long long
s_int (cgq_store_t *st, const char *fmt, const char *arg)
{
    redisReply *r = cgq_store_command (st, fmt, arg);
    if (!r)
        fail_msg ("%s: %s", fmt, cgq_store_errstr (st));
    long long v = -1;
    if (r->type == REDIS_REPLY_INTEGER)
        v = r->integer;
    else if (r->type == REDIS_REPLY_STRING)
        v = strtoll (r->str, NULL, 10);
    else if (r->type == REDIS_REPLY_NIL)
        v = 0;
    else
        fail_msg ("%s %s: reply type %d (%s)", fmt, arg, r->type, r->str ? r->str : "");
    freeReplyObject (r);
    return v;
}

static void
s_flushdb (cgq_store_t *st)
{
    redisReply *r = cgq_store_command (st, "FLUSHDB");
    assert_non_null (r);
    assert_int_equal (r->type, REDIS_REPLY_STATUS);
    freeReplyObject (r);
}

static void
t_url_parsing (void **state)
{
    char err[512];
    struct {
        const char *in, *canonical;
    } good[] = {
        {"redis://127.0.0.1:6390/0", "redis://127.0.0.1:6390/0"},
        {"redis://localhost", "redis://localhost:6379/0"},
        {"redis://h:1/", "redis://h:1/0"},
        {"redis://h/15", "redis://h:6379/15"},
        {"redis://:s3cret@h:7/2", "redis://:***@h:7/2"},
        {"redis://alice:s3cret@h:7/2", "redis://alice:***@h:7/2"},
        {"redis://alice:p%40ss%2Fword@h", "redis://alice:***@h:6379/0"},
        {"redis://s3cret@h", "redis://:***@h:6379/0"},
        {"redis://[::1]:6380/1", "redis://[::1]:6380/1"},
        {"unix:///tmp/redis.sock", "unix:///tmp/redis.sock"},
        {"unix:///tmp/r.sock?db=3", "unix:///tmp/r.sock?db=3"},
        {"unix:///tmp/r.sock?db=1&password=pw", "unix:///tmp/r.sock?db=1&password=***"},
        {"sentinel://h1:26380,h2,[::1]:5/mymaster", "sentinel://h1:26380,h2:26379,[::1]:5/mymaster/0"},
        {"sentinel://alice:s3cret@h1/m/3", "sentinel://alice:***@h1:26379/m/3"},
        {"sentinel://:s3cret@h1:1,h2:2/m/", "sentinel://:***@h1:1,h2:2/m/0"},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        err[0] = 0;
        cgq_store_t *st = cgq_store_new (good[i].in, 0, err, sizeof err);
        if (!st)
            fail_msg ("%s: %s", good[i].in, err);
        assert_string_equal (cgq_store_url (st), good[i].canonical);
        assert_false (cgq_store_connected (st));
        assert_null (strstr (cgq_store_url (st), "s3cret"));
        cgq_store_destroy (&st);
        assert_null (st);
    }
    cgq_store_destroy (&(cgq_store_t *){NULL});

    struct {
        const char *in, *msg;
    } bad[] = {
        {"redis:/x", "bad Redis URL 'redis:/x': expected redis://host:port/db, unix:///path or "
                     "sentinel://"},
        {"localhost:6379", "bad Redis URL 'localhost:6379': expected redis://host:port/db, "
                           "unix:///path or sentinel://"},
        {"sentinel://h1:26379", "no /MASTER_NAME after the sentinels"},
        {"sentinel://h1:26379/", "no master name after '/'"},
        {"sentinel://h1:26379/m/x", "the database after the master name must be a number"},
        {"sentinel://h1,,h2/m", "a sentinel without a host"},
        {"sentinel://u:topsecret@h1:0/m", "a sentinel's port must be a number from 1 to 65535"},
        {"sentinel:///m", "no sentinel address"},
        {"sentinel://[::1/m", "missing ']'"},
        {"redis://h:0/0", "the port must be a number from 1 to 65535"},
        {"redis://h:99999/0", "the port must be a number from 1 to 65535"},
        {"redis://h:12x/0", "the port must be a number from 1 to 65535"},
        {"redis://h:1/abc", "the database after '/' must be a number"},
        {"redis://:6379/0", "no host"},
        {"redis://u:topsecret@:1/0", "bad Redis URL 'redis://u:***@:1/0': no host"},
        {"redis://[::1:6379/0", "missing ']'"},
        {"unix://relative.sock", "the socket path must be absolute"},
        {"unix:///tmp/r.sock?db=x", "db= must be a number"},
        {"unix:///tmp/r.sock?foo=1", "unknown query parameter"},
        {"rediss://h:1/0", "TLS (rediss://) is not supported"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        cgq_store_t *st = cgq_store_new (bad[i].in, 0, err, sizeof err);
        assert_null (st);
        if (!strstr (err, bad[i].msg))
            fail_msg ("%s: got '%s', want '%s'", bad[i].in, err, bad[i].msg);
        assert_null (strstr (err, "topsecret"));
    }
    assert_null (cgq_store_new (NULL, 0, err, sizeof err));
    assert_non_null (strstr (err, "no Redis URL"));
}

static void
t_keys (void **state)
{
    char b[128];
    assert_string_equal (cgq_key_job (b, sizeof b, 7), "cgq:job:{7}");
    assert_string_equal (cgq_key_trial (b, sizeof b, 7, 12), "cgq:job:{7}:trial:12");
    assert_string_equal (cgq_key_reports (b, sizeof b, 7, 12), "cgq:job:{7}:reports:12");
    assert_string_equal (cgq_key_leaderboard (b, sizeof b, 7), "cgq:job:{7}:leaderboard");
    assert_string_equal (cgq_key_active (b, sizeof b, 18446744073709551615ull),
                         "cgq:job:{18446744073709551615}:active");
    assert_string_equal (cgq_key_node (b, sizeof b, "gpu-3"), "cgq:node:gpu-3");
    char small[8];
    assert_string_equal (cgq_key_job (small, sizeof small, 123), "cgq:job"); // truncated, terminated
}

static void
t_connect_command (void **state)
{
    cgq_store_t *st = s_open (cgq_test_redis_url (s_redis), 1000);
    assert_int_equal (cgq_store_connect (st), 0);
    assert_true (cgq_store_connected (st));
    s_flushdb (st);
    redisReply *r = cgq_store_command (st, "SET %s %b", "k", "v\0w", (size_t) 3);
    assert_non_null (r);
    assert_string_equal (r->str, "OK");
    freeReplyObject (r);
    r = cgq_store_command (st, "GET k");
    assert_int_equal (r->type, REDIS_REPLY_STRING);
    assert_int_equal (r->len, 3);
    assert_memory_equal (r->str, "v\0w", 3);
    freeReplyObject (r);
    r = cgq_store_command (st, "HINCRBY k f 1"); // an error reply is a reply
    assert_non_null (r);
    assert_int_equal (r->type, REDIS_REPLY_ERROR);
    assert_non_null (strstr (r->str, "WRONGTYPE"));
    freeReplyObject (r);

    // Pipelined reads come back in order.
    for (int i = 0; i < 100; i++)
        assert_int_equal (cgq_store_append (st, "RPUSH l %d", i), 0);
    assert_int_equal (cgq_store_append (st, "LRANGE l 0 -1"), 0);
    for (int i = 0; i < 100; i++) {
        r = cgq_store_get_reply (st);
        assert_non_null (r);
        assert_int_equal (r->integer, i + 1);
        freeReplyObject (r);
    }
    r = cgq_store_get_reply (st);
    assert_int_equal (r->type, REDIS_REPLY_ARRAY);
    assert_int_equal (r->elements, 100);
    assert_string_equal (r->element[99]->str, "99");
    freeReplyObject (r);

    // db from the URL: a key in db 3 is not in db 0.
    char *url3 = cgq_xasprintf ("redis://127.0.0.1:%d/3", cgq_test_redis_port (s_redis));
    cgq_store_t *st3 = s_open (url3, 1000);
    s_flushdb (st3);
    r = cgq_store_command (st3, "SET only3 x");
    freeReplyObject (r);
    assert_int_equal (s_int (st3, "EXISTS %s", "only3"), 1);
    assert_int_equal (s_int (st, "EXISTS %s", "only3"), 0);
    cgq_store_destroy (&st3);
    free (url3);

    // A db the server does not have.
    char *url99 = cgq_xasprintf ("redis://127.0.0.1:%d/99", cgq_test_redis_port (s_redis));
    cgq_store_t *st99 = s_open (url99, 1000);
    assert_int_equal (cgq_store_connect (st99), -1);
    assert_non_null (strstr (cgq_store_errstr (st99), "cannot select database 99"));
    cgq_store_destroy (&st99);
    free (url99);

    // Through the unix socket, with a db.
    const char *sock = cgq_test_redis_socket (s_redis);
    if (sock) {
        char *uurl = cgq_xasprintf ("unix://%s?db=3", sock);
        cgq_store_t *su = s_open (uurl, 1000);
        assert_int_equal (s_int (su, "EXISTS %s", "only3"), 1);
        assert_true (cgq_store_connected (su));
        cgq_store_destroy (&su);
        free (uurl);
    }
    cgq_store_destroy (&st);
}

static void
t_batch_10000 (void **state)
{
    cgq_store_t *st = s_open (cgq_test_redis_url (s_redis), 2000);
    assert_int_equal (cgq_store_flush (st), 0); // empty: no I/O, not even a connect
    assert_false (cgq_store_connected (st));
    s_flushdb (st);
    char key[64];
    for (int i = 0; i < 5000; i++) {
        cgq_key_trial (key, sizeof key, 1, (uint64_t) i);
        cgq_store_cmd (st, "HSET %s state %s attempt %d", key, "running", i);
        cgq_store_cmd (st, "HINCRBY %s %s %d", "cgq:job:{1}", "running", 1);
    }
    assert_int_equal (cgq_store_pending (st), 10000);
    int64_t t0 = cgq_now_ms ();
    assert_int_equal (cgq_store_flush (st), 0);
    int64_t ms = cgq_now_ms () - t0;
    print_message ("flushed 10000 commands in %lld ms\n", (long long) ms);
    assert_true (ms < 1500); // tens of ms normally; slack for sanitizers on a busy box
    assert_int_equal (cgq_store_pending (st), 0);
    assert_int_equal (cgq_store_flush (st), 0); // and now empty

    assert_int_equal (s_int (st, "HGET cgq:job:{1} %s", "running"), 5000);
    assert_int_equal (s_int (st, "DBSIZE%s", ""), 5001);
    redisReply *r = cgq_store_command (st, "HGETALL %s", cgq_key_trial (key, sizeof key, 1, 4321));
    assert_int_equal (r->elements, 4);
    assert_string_equal (r->element[1]->str, "running");
    assert_string_equal (r->element[3]->str, "4321");
    freeReplyObject (r);

    // argv form, binary-safe.
    const char *argv[] = {"SET", "bin", "a\0b"};
    size_t lens[] = {3, 3, 3};
    cgq_store_cmdargv (st, 3, argv, lens);
    assert_int_equal (cgq_store_flush (st), 0);
    r = cgq_store_command (st, "GET bin");
    assert_int_equal (r->len, 3);
    assert_memory_equal (r->str, "a\0b", 3);
    freeReplyObject (r);
    cgq_store_destroy (&st);
}

static void
t_batch_survives_redis_down (void **state)
{
    cgq_test_redis_t *rd = cgq_test_redis_start (NULL);
    assert_non_null (rd);
    cgq_store_t *st = s_open (cgq_test_redis_url (rd), 1000);
    assert_int_equal (cgq_store_connect (st), 0);

    for (int i = 0; i < 100; i++)
        cgq_store_cmd (st, "INCR c%d", i);
    cgq_store_cmd (st, "XADD ev * type %s", "x");
    assert_int_equal (cgq_test_redis_down (rd), 0);

    // The connection dies under the flush.
    assert_int_equal (cgq_store_flush (st), -1);
    assert_false (cgq_store_connected (st));
    assert_int_equal (cgq_store_pending (st), 101);
    assert_non_null (strstr (cgq_store_errstr (st), cgq_test_redis_url (rd)));

    // Nobody listens: connect refused, quickly, with the hint.
    int64_t t0 = cgq_now_ms ();
    assert_int_equal (cgq_store_flush (st), -1);
    assert_true (cgq_now_ms () - t0 < 3000);
    char *want = cgq_xasprintf ("cannot reach Redis at %s: Connection refused (is redis-server "
                                "running? check --redis / CGQ_REDIS)",
                                cgq_test_redis_url (rd));
    assert_string_equal (cgq_store_errstr (st), want);
    free (want);
    assert_int_equal (cgq_store_pending (st), 101);

    // Commands queued meanwhile go after the kept ones.
    cgq_store_cmd (st, "INCR c0");
    cgq_store_cmd (st, "SET last %s", "yes");
    assert_int_equal (cgq_store_pending (st), 103);

    assert_int_equal (cgq_test_redis_restart (rd), 0);
    assert_int_equal (cgq_store_flush (st), 0);
    assert_int_equal (cgq_store_pending (st), 0);
    assert_true (cgq_store_connected (st));
    assert_int_equal (s_int (st, "GET %s", "c0"), 2); // once from the kept batch, once new
    for (int i = 1; i < 100; i++) {
        char k[16];
        snprintf (k, sizeof k, "c%d", i);
        assert_int_equal (s_int (st, "GET %s", k), 1); // exactly once
    }
    assert_int_equal (s_int (st, "XLEN %s", "ev"), 1);
    redisReply *r = cgq_store_command (st, "GET last");
    assert_string_equal (r->str, "yes");
    freeReplyObject (r);
    cgq_store_destroy (&st);
    cgq_test_redis_stop (&rd);
    assert_null (rd);
}

static void
t_batch_rejected_commands (void **state)
{
    cgq_store_t *st = s_open (cgq_test_redis_url (s_redis), 1000);
    s_flushdb (st);
    redisReply *r = cgq_store_command (st, "SET str plain");
    freeReplyObject (r);
    // WRONGTYPE happens inside EXEC: the others still apply.
    cgq_store_cmd (st, "INCR a");
    cgq_store_cmd (st, "HINCRBY str f 1");
    cgq_store_cmd (st, "INCR b");
    assert_int_equal (cgq_store_flush (st), 0);
    assert_int_equal (cgq_store_pending (st), 0);
    assert_int_equal (s_int (st, "GET %s", "a"), 1);
    assert_int_equal (s_int (st, "GET %s", "b"), 1);

    // A malformed command is refused at queue time (EXECABORT): it is
    // dropped and the rest lands, once.
    cgq_store_cmd (st, "INCR a");
    cgq_store_cmd (st, "NOSUCHCOMMAND x");
    cgq_store_cmd (st, "HSET onlykey");
    cgq_store_cmd (st, "INCR b");
    assert_int_equal (cgq_store_flush (st), 0);
    assert_int_equal (cgq_store_pending (st), 0);
    assert_int_equal (s_int (st, "GET %s", "a"), 2);
    assert_int_equal (s_int (st, "GET %s", "b"), 2);

    // A bad format string queues nothing.
    cgq_store_cmd (st, "SET x %q");
    assert_int_equal (cgq_store_pending (st), 0);
    cgq_store_destroy (&st);
}

static void
t_batch_format (void **state)
{
    // cgq_store_cmd writes RESP itself: every conversion, and the argument
    // boundaries (spaces in the format only; an interpolated string may hold
    // spaces; an empty one is an empty argument), as Redis reads them back.
    cgq_store_t *st = s_open (cgq_test_redis_url (s_redis), 1000);
    s_flushdb (st);
    const char bin[] = {'a', 0, 'b'};
    cgq_store_cmd (st, "RPUSH l %s %d %lld %llu %u %ld %zu k:%d:%s %b 100%% %s x", "two words",
                   -42, -9223372036854775807ll - 1, 18446744073709551615ull, 0u, 123456789l,
                   (size_t) 7, 3, "z", bin, sizeof bin, "");
    const char *argv[] = {"RPUSH", "l", "", "end"};
    cgq_store_cmdargv (st, 4, argv, NULL);
    assert_int_equal (cgq_store_pending (st), 2);
    assert_int_equal (cgq_store_flush (st), 0);
    redisReply *r = cgq_store_command (st, "LRANGE l 0 -1");
    assert_non_null (r);
    const char *want[] = {"two words", "-42", "-9223372036854775808", "18446744073709551615",
                          "0", "123456789", "7", "k:3:z", NULL, "100%", "", "x", "", "end"};
    size_t nwant = sizeof want / sizeof *want;
    assert_int_equal (r->type, REDIS_REPLY_ARRAY);
    assert_int_equal (r->elements, nwant);
    for (size_t i = 0; i < nwant; i++) {
        if (!want[i]) {
            assert_int_equal (r->element[i]->len, sizeof bin);
            assert_memory_equal (r->element[i]->str, bin, sizeof bin);
        }
        else
            assert_string_equal (r->element[i]->str, want[i]);
    }
    freeReplyObject (r);
    // A format ending in '%', or with no argument at all, queues nothing.
    cgq_store_cmd (st, "SET x 5%");
    cgq_store_cmd (st, "   ");
    assert_int_equal (cgq_store_pending (st), 0);
    cgq_store_destroy (&st);
}

static void
t_batch_nil_exec (void **state)
{
    // A WATCHed key changed by another client makes EXEC answer nil: the batch
    // is kept, the connection (and with it the WATCH) dropped, and the next
    // flush applies it once.
    cgq_store_t *st = s_open (cgq_test_redis_url (s_redis), 1000);
    cgq_store_t *other = s_open (cgq_test_redis_url (s_redis), 1000);
    s_flushdb (st);
    redisReply *r = cgq_store_command (st, "WATCH w");
    assert_non_null (r);
    freeReplyObject (r);
    r = cgq_store_command (other, "SET w changed");
    freeReplyObject (r);
    cgq_store_cmd (st, "INCR n1");
    cgq_store_cmd (st, "INCR n2");
    assert_int_equal (cgq_store_flush (st), -1);
    assert_non_null (strstr (cgq_store_errstr (st), "EXEC returned nil"));
    assert_int_equal (cgq_store_pending (st), 2);
    assert_false (cgq_store_connected (st));
    assert_int_equal (s_int (other, "EXISTS %s", "n1"), 0);
    cgq_store_cmd (st, "INCR n2");
    assert_int_equal (cgq_store_flush (st), 0);
    assert_int_equal (s_int (other, "GET %s", "n1"), 1);
    assert_int_equal (s_int (other, "GET %s", "n2"), 2);
    cgq_store_destroy (&other);
    cgq_store_destroy (&st);
}

static void
t_auth (void **state)
{
    cgq_test_redis_t *rd = cgq_test_redis_start ("requirepass s3cret\n"
                                                 "user alice on >alicepw ~* &* +@all\n");
    assert_non_null (rd);
    int port = cgq_test_redis_port (rd);

    char *good = cgq_xasprintf ("redis://:s3cret@127.0.0.1:%d/0", port);
    cgq_store_t *st = s_open (good, 1000);
    assert_int_equal (cgq_store_connect (st), 0);
    assert_int_equal (s_int (st, "INCR %s", "n"), 1);
    cgq_store_cmd (st, "INCR n");
    assert_int_equal (cgq_store_flush (st), 0);
    assert_int_equal (s_int (st, "GET %s", "n"), 2);
    char *masked = cgq_xasprintf ("redis://:***@127.0.0.1:%d/0", port);
    assert_string_equal (cgq_store_url (st), masked);
    // The password stays masked in messages too.
    cgq_test_redis_down (rd);
    cgq_store_cmd (st, "INCR n");
    assert_int_equal (cgq_store_flush (st), -1);
    assert_int_equal (cgq_store_flush (st), -1);
    assert_non_null (strstr (cgq_store_errstr (st), masked));
    assert_null (strstr (cgq_store_errstr (st), "s3cret"));
    assert_int_equal (cgq_test_redis_restart (rd), 0);
    assert_int_equal (cgq_store_flush (st), 0); // AUTH again on reconnect
    assert_int_equal (s_int (st, "GET %s", "n"), 1);
    cgq_store_destroy (&st);
    free (masked);
    free (good);

    // ACL user.
    char *acl = cgq_xasprintf ("redis://alice:alicepw@127.0.0.1:%d/1", port);
    st = s_open (acl, 1000);
    assert_int_equal (cgq_store_connect (st), 0);
    assert_int_equal (s_int (st, "INCR %s", "m"), 1);
    cgq_store_destroy (&st);
    free (acl);

    // Wrong password.
    char *bad = cgq_xasprintf ("redis://:wrongpw@127.0.0.1:%d/0", port);
    st = s_open (bad, 1000);
    assert_int_equal (cgq_store_connect (st), -1);
    const char *e = cgq_store_errstr (st);
    assert_non_null (strstr (e, "authentication failed at Redis"));
    assert_non_null (strstr (e, "WRONGPASS"));
    assert_non_null (strstr (e, ":***@"));
    assert_null (strstr (e, "wrongpw"));
    assert_false (cgq_store_connected (st));
    assert_null (cgq_store_command (st, "PING"));
    cgq_store_destroy (&st);
    free (bad);

    // No password at all.
    char *none = cgq_xasprintf ("redis://127.0.0.1:%d/0", port);
    st = s_open (none, 1000);
    assert_int_equal (cgq_store_connect (st), -1);
    assert_non_null (strstr (cgq_store_errstr (st), "authentication required"));
    assert_non_null (strstr (cgq_store_errstr (st), "NOAUTH"));
    cgq_store_destroy (&st);
    free (none);
    cgq_test_redis_stop (&rd);
}

static void
t_unreachable (void **state)
{
    int port = cgq_test_free_port ();
    assert_true (port > 0);
    char *url = cgq_xasprintf ("redis://127.0.0.1:%d/0", port);
    cgq_store_t *st = s_open (url, 1000);
    int64_t t0 = cgq_now_ms ();
    assert_int_equal (cgq_store_connect (st), -1);
    int64_t ms = cgq_now_ms () - t0;
    assert_true (ms < 3000);
    char *want = cgq_xasprintf ("cannot reach Redis at %s: Connection refused (is redis-server "
                                "running? check --redis / CGQ_REDIS)",
                                url);
    assert_string_equal (cgq_store_errstr (st), want);
    assert_null (cgq_store_command (st, "PING"));
    assert_string_equal (cgq_store_errstr (st), want);
    assert_int_equal (cgq_store_append (st, "PING"), -1);
    assert_null (cgq_store_get_reply (st));
    free (want);
    cgq_store_destroy (&st);
    free (url);

    // A socket path that does not exist.
    st = s_open ("unix:///nonexistent/cgq-redis.sock", 500);
    assert_int_equal (cgq_store_connect (st), -1);
    assert_non_null (strstr (cgq_store_errstr (st),
                             "cannot reach Redis at unix:///nonexistent/cgq-redis.sock: No such file"));
    cgq_store_destroy (&st);

    // An address that does not answer: bounded by the timeout, whatever the
    // network does with it (drop, or refuse at once).
    st = s_open ("redis://10.255.255.1:6379/0", 500);
    t0 = cgq_now_ms ();
    assert_int_equal (cgq_store_connect (st), -1);
    ms = cgq_now_ms () - t0;
    assert_true (ms < 3000);
    if (!strstr (cgq_store_errstr (st), "cannot reach Redis at redis://10.255.255.1:6379/0: "))
        fail_msg ("unexpected: %s", cgq_store_errstr (st));
    cgq_store_destroy (&st);
}

static void
t_command_timeout (void **state)
{
    cgq_store_t *st = s_open (cgq_test_redis_url (s_redis), 300);
    int64_t t0 = cgq_now_ms ();
    redisReply *r = cgq_store_command (st, "BLPOP %s 5", "never");
    int64_t ms = cgq_now_ms () - t0;
    assert_null (r);
    assert_true (ms >= 250 && ms < 2000);
    assert_non_null (strstr (cgq_store_errstr (st), "timed out"));
    assert_false (cgq_store_connected (st));
    // The next command reconnects.
    r = cgq_store_command (st, "PING");
    assert_non_null (r);
    assert_string_equal (r->str, "PONG");
    freeReplyObject (r);
    cgq_store_destroy (&st);
}

// The connection is lost after EXEC went out and Redis applied the batch (a
// DEBUG SLEEP inside it outlasts the client's timeout). With a marker the
// next flush finds the batch applied and does not send it again; without
// one, the same loss would apply it twice.
static void
t_batch_in_doubt_applied_once (void **state)
{
    (void) state;
    cgq_test_redis_t *rd = cgq_test_redis_start ("enable-debug-command yes\n");
    assert_non_null (rd);
    char err[256];
    cgq_store_t *st = cgq_store_new (cgq_test_redis_url (rd), 300, err, sizeof err);
    assert_non_null (st);
    cgq_store_set_marker (st, "cgq:coordinator", "batch", "7");
    assert_int_equal (cgq_store_connect (st), 0);

    cgq_store_cmd (st, "INCR doubt");
    cgq_store_cmd (st, "DEBUG SLEEP 0.8");
    assert_int_equal (cgq_store_flush (st), -1); // timed out waiting for EXEC's answer
    assert_int_equal (cgq_store_pending (st), 2);
    cgq_store_cmd (st, "INCR after"); // queued while in doubt: must still be sent
    usleep (1000 * 1000);             // Redis finishes the sleep and applies the batch

    assert_int_equal (cgq_store_flush (st), 0);
    assert_int_equal (cgq_store_pending (st), 0);
    redisReply *r = cgq_store_command (st, "MGET doubt after");
    assert_non_null (r);
    assert_int_equal (r->type, REDIS_REPLY_ARRAY);
    assert_string_equal (r->element[0]->str, "1"); // applied once, not twice
    assert_string_equal (r->element[1]->str, "1");
    freeReplyObject (r);
    r = cgq_store_command (st, "HGET cgq:coordinator batch");
    assert_non_null (r);
    assert_string_equal (r->str, "7:2");
    freeReplyObject (r);

    // A batch that never reached Redis is sent again in full.
    cgq_store_cmd (st, "INCR later");
    assert_int_equal (cgq_test_redis_down (rd), 0);
    assert_int_equal (cgq_store_flush (st), -1);
    assert_int_equal (cgq_test_redis_restart (rd), 0);
    assert_int_equal (cgq_store_flush (st), 0);
    r = cgq_store_command (st, "GET later");
    assert_non_null (r);
    assert_string_equal (r->str, "1");
    freeReplyObject (r);

    cgq_store_destroy (&st);
    cgq_test_redis_stop (&rd);
}

// A Redis that comes back older than what it acknowledged — a host crash
// inside the fsync window — gets the journaled batches after its marker
// again, in order and each once; one that comes back empty gets all the
// journal holds; a marker written by another coordinator stops any replay.
static void t_journal_replays_lost_batches (void **state);

// With replicas 1 and none attached, WAIT comes back short: the batch is
// applied but not confirmed, and stays journaled past its window. A replica
// attached later lets the next batch's WAIT confirm it and every one before.
static void
t_replicas_wait (void **state)
{
    (void) state;
    cgq_test_redis_t *rd = cgq_test_redis_start (NULL);
    assert_non_null (rd);
    char err[256];
    cgq_store_t *st = cgq_store_new (cgq_test_redis_url (rd), 1000, err, sizeof err);
    assert_non_null (st);
    cgq_store_set_marker (st, "cgq:coordinator", "batch", "7");
    cgq_store_set_journal (st, 1); // a 1 ms window: only "unconfirmed" keeps a batch
    cgq_store_set_replicas (st, 1, 50);
    int64_t t0 = cgq_now_ms ();
    for (int i = 1; i <= 3; i++) {
        cgq_store_cmd (st, "INCR w%d", i);
        assert_int_equal (cgq_store_flush (st), 0);
        usleep (5000);
    }
    assert_true (cgq_now_ms () - t0 >= 150); // each WAIT waited its 50 ms
    assert_int_equal (cgq_store_applied_seq (st), 3);
    assert_int_equal (cgq_store_confirmed_seq (st), 0);

    // Redis comes back empty (its replica never had the batches): all three
    // are still journaled, though their 1 ms window is long over.
    assert_int_equal (cgq_test_redis_restart (rd), 0);
    cgq_store_cmd (st, "INCR w4");
    if (cgq_store_flush (st) < 0)
        assert_int_equal (cgq_store_flush (st), 0);
    assert_int_equal (cgq_store_replayed (st), 3);
    assert_int_equal (cgq_store_confirmed_seq (st), 0);

    // A replica attaches: the next batch's WAIT confirms everything.
    char conf[128];
    snprintf (conf, sizeof conf, "replicaof 127.0.0.1 %d\n", cgq_test_redis_port (rd));
    cgq_test_redis_t *rep = cgq_test_redis_start (conf);
    assert_non_null (rep);
    cgq_store_t *rs = cgq_store_new (cgq_test_redis_url (rep), 1000, err, sizeof err);
    uint64_t confirmed = 0;
    for (int i = 0; i < 100 && confirmed < cgq_store_applied_seq (st); i++) {
        cgq_store_cmd (st, "INCR w5");
        assert_int_equal (cgq_store_flush (st), 0);
        confirmed = cgq_store_confirmed_seq (st);
        if (confirmed < cgq_store_applied_seq (st))
            usleep (50000);
    }
    assert_int_equal (confirmed, cgq_store_applied_seq (st));
    redisReply *r = cgq_store_command (rs, "MGET w1 w2 w3 w4");
    assert_non_null (r);
    for (int i = 0; i < 4; i++)
        assert_string_equal (r->element[i]->str, "1"); // on the replica, each once
    freeReplyObject (r);
    // A write to the replica is refused (READONLY) and drops the connection.
    r = cgq_store_command (rs, "SET x 1");
    assert_non_null (r);
    assert_int_equal (r->type, REDIS_REPLY_ERROR);
    freeReplyObject (r);
    assert_false (cgq_store_connected (rs));
    assert_non_null (strstr (cgq_store_errstr (rs), "is a replica now"));
    cgq_store_destroy (&rs);
    cgq_store_destroy (&st);
    cgq_test_redis_stop (&rep);
    cgq_test_redis_stop (&rd);
}

static void
t_journal_replays_lost_batches (void **state)
{
    (void) state;
    cgq_test_redis_t *rd = cgq_test_redis_start (NULL);
    assert_non_null (rd);
    char err[256];
    cgq_store_t *st = cgq_store_new (cgq_test_redis_url (rd), 1000, err, sizeof err);
    assert_non_null (st);
    cgq_store_set_marker (st, "cgq:coordinator", "batch", "9");
    cgq_store_set_journal (st, 60000);
    for (int i = 1; i <= 5; i++) {
        cgq_store_cmd (st, "INCR c%d", i);
        cgq_store_cmd (st, "RPUSH order %d", i);
        assert_int_equal (cgq_store_flush (st), 0);
    }
    // "Crash": batches 4 and 5 vanish, the marker is back at 9:3, and the
    // connection drops.
    cgq_store_t *other = cgq_store_new (cgq_test_redis_url (rd), 1000, err, sizeof err);
    redisReply *r = cgq_store_command (other, "DEL c4 c5");
    freeReplyObject (r);
    r = cgq_store_command (other, "LTRIM order 0 2");
    freeReplyObject (r);
    r = cgq_store_command (other, "HSET cgq:coordinator batch 9:3");
    freeReplyObject (r);
    r = cgq_store_command (other, "CLIENT KILL TYPE normal SKIPME yes");
    freeReplyObject (r);
    cgq_store_cmd (st, "INCR c6");
    if (cgq_store_flush (st) < 0) // the first attempt may meet the killed connection
        assert_int_equal (cgq_store_flush (st), 0);
    assert_int_equal (cgq_store_replayed (st), 2);
    r = cgq_store_command (other, "MGET c1 c2 c3 c4 c5 c6");
    for (int i = 0; i < 6; i++)
        assert_string_equal (r->element[i]->str, "1"); // each applied exactly once
    freeReplyObject (r);
    r = cgq_store_command (other, "LRANGE order 0 -1");
    assert_int_equal (r->elements, 5);
    for (int i = 0; i < 5; i++)
        assert_int_equal (atoi (r->element[i]->str), i + 1); // in order
    freeReplyObject (r);

    // Back empty (no persistence at all): everything journaled is replayed.
    assert_int_equal (cgq_test_redis_restart (rd), 0);
    cgq_store_cmd (st, "INCR c7");
    if (cgq_store_flush (st) < 0)
        assert_int_equal (cgq_store_flush (st), 0);
    assert_int_equal (cgq_store_replayed (st), 8);
    cgq_store_destroy (&other);
    other = cgq_store_new (cgq_test_redis_url (rd), 1000, err, sizeof err);
    r = cgq_store_command (other, "MGET c1 c6 c7");
    for (int i = 0; i < 3; i++)
        assert_string_equal (r->element[i]->str, "1");
    freeReplyObject (r);

    // A newer coordinator's marker: nothing of ours is replayed over it.
    r = cgq_store_command (other, "FLUSHALL");
    freeReplyObject (r);
    r = cgq_store_command (other, "HSET cgq:coordinator batch 10:1");
    freeReplyObject (r);
    r = cgq_store_command (other, "CLIENT KILL TYPE normal SKIPME yes");
    freeReplyObject (r);
    cgq_store_cmd (st, "INCR c8");
    if (cgq_store_flush (st) < 0)
        assert_int_equal (cgq_store_flush (st), 0);
    assert_int_equal (cgq_store_replayed (st), 8);
    r = cgq_store_command (other, "EXISTS c1");
    assert_int_equal (r->integer, 0);
    freeReplyObject (r);

    cgq_store_destroy (&other);
    cgq_store_destroy (&st);
    cgq_test_redis_stop (&rd);
}


// Fencing: a batch is written only while this writer holds the lease key, or
// the key expired with the epoch sequence unchanged; once another writer took
// over, nothing more lands and the store says it is fenced, for good.
static void
t_fence (void **state)
{
    cgq_store_t *st = s_open (cgq_test_redis_url (s_redis), 1000);
    s_flushdb (st);
    cgq_store_t *other = s_open (cgq_test_redis_url (s_redis), 1000);
    redisReply *r = cgq_store_command (st, "SET lease %s", "7 me");
    freeReplyObject (r);
    r = cgq_store_command (st, "SET seq %s", "7");
    freeReplyObject (r);
    cgq_store_set_fence (st, "lease", "7 me", "seq", 7);
    cgq_store_cmd (st, "INCR a");
    assert_int_equal (cgq_store_flush (st), 0);
    assert_false (cgq_store_fenced (st));

    // The WATCH that follows each EXEC (in its round trip) guards the next
    // batch: our own renewal in between does not abort it (the renewal's
    // command re-arms it behind itself)...
    assert_true (cgq_store_lease_watched (st));
    r = cgq_store_command (st, "SET lease %s", "7 me");
    freeReplyObject (r);
    assert_true (cgq_store_lease_watched (st));
    cgq_store_cmd (st, "INCR b");
    assert_int_equal (cgq_store_flush (st), 0);
    assert_int_equal (s_int (other, "GET %s", "b"), 1);
    // ... a takeover does, though nothing was checked since that EXEC; the
    // batch is kept and the next try finds the lease taken.
    cgq_store_cmd (st, "INCR b");
    assert_int_equal (cgq_store_flush (st), 0); // armed again
    r = cgq_store_command (other, "SET lease %s", "9 them");
    freeReplyObject (r);
    cgq_store_cmd (st, "INCR b");
    assert_int_equal (cgq_store_flush (st), -1);
    assert_int_equal (s_int (other, "GET %s", "b"), 2);
    assert_int_equal (cgq_store_pending (st), 1);
    assert_int_equal (cgq_store_flush (st), -1);
    assert_true (cgq_store_fenced (st));
    assert_int_equal (s_int (other, "GET %s", "b"), 2);
    r = cgq_store_command (other, "SET lease %s", "7 me");
    freeReplyObject (r);
    cgq_store_set_fence (st, "lease", "7 me", "seq", 7);
    assert_int_equal (cgq_store_flush (st), 0);
    assert_int_equal (s_int (other, "GET %s", "b"), 3);

    // Expired, nobody took over: still ours.
    r = cgq_store_command (st, "DEL lease");
    freeReplyObject (r);
    cgq_store_cmd (st, "INCR a");
    assert_int_equal (cgq_store_flush (st), 0);
    assert_int_equal (s_int (st, "GET %s", "a"), 2);

    // A command re-arms the check in its own round trip (the GET above did,
    // and found the lease expired but still ours)...
    assert_true (cgq_store_lease_watched (st));
    // ... and the sequence is watched too: expired and the sequence moved on
    // (a takeover that ended) aborts the EXEC, and the next check fences.
    r = cgq_store_command (other, "INCR seq");
    freeReplyObject (r);
    cgq_store_cmd (st, "INCR a");
    assert_int_equal (cgq_store_flush (st), -1);
    assert_false (cgq_store_fenced (st));
    assert_int_equal (cgq_store_flush (st), -1);
    assert_true (cgq_store_fenced (st));
    assert_non_null (strstr (cgq_store_errstr (st), "fenced"));
    assert_int_equal (s_int (other, "GET %s", "a"), 2);

    // A takeover that a command's re-arm sees: fenced at once.
    cgq_store_set_fence (st, "lease", "7 me", "seq", 8);
    r = cgq_store_command (other, "SET lease %s", "8 you");
    freeReplyObject (r);
    r = cgq_store_command (st, "GET a");
    assert_non_null (r);
    freeReplyObject (r);
    assert_true (cgq_store_fenced (st));
    assert_false (cgq_store_lease_watched (st));
    r = cgq_store_command (other, "DEL lease");
    freeReplyObject (r);

    // Held by another writer: fenced, however often it is tried.
    cgq_store_set_fence (st, "lease", "7 me", "seq", 7);
    r = cgq_store_command (other, "SET lease %s", "8 you");
    freeReplyObject (r);
    for (int i = 0; i < 3; i++) {
        assert_int_equal (cgq_store_flush (st), -1);
        assert_true (cgq_store_fenced (st));
    }
    assert_int_equal (s_int (other, "GET %s", "a"), 2);
    cgq_store_destroy (&other);
    cgq_store_destroy (&st);
}

// s_poll_done polls st's batch in flight until it is done (or 5 s pass).
static int
s_poll_done (cgq_store_t *st)
{
    for (int i = 0; i < 5000; i++) {
        int rc = cgq_store_flush_poll (st, false);
        if (rc != CGQ_FLUSH_FLYING)
            return rc;
        usleep (1000);
    }
    return CGQ_FLUSH_FLYING;
}

// A batch in flight: commands queued meanwhile wait for the next one; a
// command on the connection settles it first and the outcome waits for the
// next poll; commands Redis refuses are dropped and the rest sent again
// without the caller's help; a marked batch's marker is written as in a
// blocking flush.
static void
t_flush_async (void **state)
{
    (void) state;
    cgq_store_t *st = s_open (cgq_test_redis_url (s_redis), 1000);
    cgq_store_t *other = s_open (cgq_test_redis_url (s_redis), 1000);
    s_flushdb (st);
    cgq_store_set_marker (st, "mk", "batch", "5");
    assert_int_equal (cgq_store_flush_poll (st, false), CGQ_FLUSH_IDLE);
    for (int i = 0; i < 1000; i++)
        cgq_store_cmd (st, "INCR a");
    assert_int_equal (cgq_store_flush_start (st), 0);
    assert_true (cgq_store_flying (st));
    assert_true (cgq_store_fd (st) >= 0);
    for (int i = 0; i < 7; i++)
        cgq_store_cmd (st, "INCR b");
    assert_int_equal (cgq_store_pending (st), 1007);
    assert_int_equal (cgq_store_flush_start (st), 0); // one at a time: a no-op
    assert_int_equal (s_poll_done (st), CGQ_FLUSH_DONE);
    assert_false (cgq_store_flying (st));
    assert_int_equal (cgq_store_pending (st), 7);
    assert_int_equal (s_int (other, "GET %s", "a"), 1000);
    assert_int_equal (s_int (other, "GET %s", "b"), 0);
    redisReply *r = cgq_store_command (other, "HGET mk batch");
    assert_string_equal (r->str, "5:1");
    freeReplyObject (r);
    assert_int_equal (cgq_store_flush_poll (st, false), CGQ_FLUSH_IDLE);

    // A command while the 7 are in flight: it waits for them, and the next
    // poll reports them done.
    assert_int_equal (cgq_store_flush_start (st), 0);
    assert_int_equal (s_int (st, "GET %s", "b"), 7);
    assert_false (cgq_store_flying (st));
    assert_int_equal (cgq_store_flush_poll (st, false), CGQ_FLUSH_DONE);
    assert_int_equal (cgq_store_flush_poll (st, false), CGQ_FLUSH_IDLE);

    // A malformed command is dropped; the others go again by themselves.
    cgq_store_cmd (st, "INCR c");
    cgq_store_cmd (st, "HSET lonely");
    cgq_store_cmd (st, "INCR c");
    assert_int_equal (cgq_store_flush_start (st), 0);
    assert_int_equal (s_poll_done (st), CGQ_FLUSH_DONE);
    assert_int_equal (cgq_store_pending (st), 0);
    assert_int_equal (s_int (other, "GET %s", "c"), 2);

    // Redis gone while a batch is in flight: it fails, and its commands
    // are kept, first, for the next try.
    cgq_store_cmd (st, "INCR d");
    assert_int_equal (cgq_store_flush_start (st), 0);
    r = cgq_store_command (other, "CLIENT KILL TYPE normal SKIPME yes");
    freeReplyObject (r);
    int rc = s_poll_done (st);
    if (rc == CGQ_FLUSH_FAILED) {
        cgq_store_cmd (st, "INCR e");
        assert_int_equal (cgq_store_pending (st), 2);
        assert_int_equal (cgq_store_flush (st), 0);
    }
    else
        assert_int_equal (rc, CGQ_FLUSH_DONE); // it was applied before the kill
    assert_int_equal (s_int (other, "GET %s", "d"), 1);
    cgq_store_destroy (&other);
    cgq_store_destroy (&st);
}

int
main (void)
{
    // No SIGPIPE handler here: cgq_store must survive a dead server by itself.
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (t_url_parsing),
        cmocka_unit_test (t_keys),
        cmocka_unit_test (t_connect_command),
        cmocka_unit_test (t_batch_10000),
        cmocka_unit_test (t_batch_survives_redis_down),
        cmocka_unit_test (t_batch_rejected_commands),
        cmocka_unit_test (t_batch_format),
        cmocka_unit_test (t_batch_nil_exec),
        cmocka_unit_test (t_auth),
        cmocka_unit_test (t_unreachable),
        cmocka_unit_test (t_command_timeout),
        cmocka_unit_test (t_batch_in_doubt_applied_once),
        cmocka_unit_test (t_journal_replays_lost_batches),
        cmocka_unit_test (t_fence),
        cmocka_unit_test (t_flush_async),
        cmocka_unit_test (t_replicas_wait),
    };
    return cmocka_run_group_tests (tests, s_group_setup, s_group_teardown);
}
