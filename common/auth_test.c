// auth_test: keygen (files, modes, never overwriting), loading keys and the
// errors that say what to set, protected mode's loopback test, and a CURVE
// connection through the ZAP handler: an allowed key gets through, another
// is refused and counted.
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "auth.h"
#include "util.h"

static char s_dir[] = "/tmp/cgq-auth-test-XXXXXX";

static int
s_setup (void **state)
{
    return mkdtemp (s_dir) ? 0 : -1;
}

static int
s_teardown (void **state)
{
    char *cmd = cgq_xasprintf ("rm -rf '%s'", s_dir);
    int rc = system (cmd);
    free (cmd);
    return rc == 0 ? 0 : -1;
}

static char *
s_path (const char *name)
{
    return cgq_xasprintf ("%s/%s", s_dir, name);
}

static void
t_keygen (void **state)
{
    char pub[41], err[512];
    char *keys = s_path ("keys");
    assert_int_equal (cgq_auth_keygen (keys, "node-1", NULL, pub, err, sizeof err), 0);
    assert_int_equal (strlen (pub), 40);
    char *p = s_path ("keys/node-1.key"), *s = s_path ("keys/node-1.key_secret");
    struct stat st;
    assert_int_equal (stat (s, &st), 0);
    assert_int_equal (st.st_mode & 0777, 0600);
    assert_int_equal (stat (p, &st), 0);
    assert_int_equal (st.st_mode & 0777, 0644);
    assert_int_equal (stat (keys, &st), 0);
    assert_int_equal (st.st_mode & 0777, 0700);
    // never overwritten
    assert_int_equal (cgq_auth_keygen (keys, "node-1", NULL, pub, err, sizeof err), -1);
    assert_non_null (strstr (err, "already exists; not overwriting"));
    // names that could leave the directory or hide
    const char *bad[] = {"../x", "a/b", ".hidden", "", "x y"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal (cgq_auth_keygen (keys, bad[i], NULL, pub, err, sizeof err), -1);
        assert_non_null (strstr (err, "bad key name"));
    }
    free (p);
    free (s);
    free (keys);
}

static void
t_client_errors (void **state)
{
    char pub[41], err[512];
    char *keys = s_path ("c");
    assert_int_equal (cgq_auth_keygen (keys, "me", NULL, pub, err, sizeof err), 0);
    char *p = s_path ("c/me.key"), *s = s_path ("c/me.key_secret");
    cgq_auth_t *a = (cgq_auth_t *) 1;
    assert_int_equal (cgq_auth_client_new (NULL, "", &a, err, sizeof err), 0);
    assert_null (a); // off
    assert_int_equal (cgq_auth_client_new (s, NULL, &a, err, sizeof err), -1);
    assert_non_null (strstr (err, "only --curve-secret is set"));
    assert_int_equal (cgq_auth_client_new (s, "/nonexistent.key", &a, err, sizeof err), -1);
    assert_non_null (strstr (err, "--curve-server /nonexistent.key"));
    assert_int_equal (cgq_auth_client_new (s, p, &a, err, sizeof err), 0);
    assert_string_equal (cgq_auth_public_txt (a), pub);
    cgq_auth_destroy (&a);
    assert_null (a);
    cgq_auth_destroy (&a); // NULL-safe
    free (p);
    free (s);
    free (keys);
}

static void
t_loopback_only (void **state)
{
    const char *yes[] = {"tcp://127.0.0.1:7700", "tcp://127.1.2.3:0", "tcp://localhost:7700",
                         "tcp://[::1]:7700",      "tcp://lo:7700",     "ipc:///run/cgq.sock",
                         "inproc://x"};
    const char *no[] = {"tcp://*:7700",        "tcp://0.0.0.0:7700", "tcp://10.0.0.5:7700",
                        "tcp://eth0:7700",     "tcp://[::]:7700",    "tcp://128.0.0.1:1",
                        "tcp://127.0.0.1",     "udp://127.0.0.1:1",  "tcp://localhost.evil:1"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
        assert_true (cgq_auth_loopback_only (yes[i]));
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        assert_false (cgq_auth_loopback_only (no[i]));
}

// s_try connects a CURVE DEALER with client keys to ep and returns whether a
// message made the round trip, handling the server's ZAP requests meanwhile.
static bool
s_try (void *ctx, cgq_auth_t *server, void *router, const char *ep, cgq_auth_t *client)
{
    void *d = zmq_socket (ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt (d, ZMQ_LINGER, &zero, sizeof zero);
    assert_int_equal (cgq_auth_client_apply (client, d), 0);
    assert_int_equal (zmq_connect (d, ep), 0);
    zmq_send (d, "hi", 2, ZMQ_DONTWAIT);
    bool got = false;
    int64_t deadline = cgq_now_ms () + 1500;
    while (!got && cgq_now_ms () < deadline) {
        zmq_pollitem_t items[2] = {{router, 0, ZMQ_POLLIN, 0},
                                   {cgq_auth_zap_socket (server), 0, ZMQ_POLLIN, 0}};
        zmq_poll (items, 2, 50);
        if (items[1].revents & ZMQ_POLLIN)
            cgq_auth_zap_handle (server);
        char buf[64];
        if ((items[0].revents & ZMQ_POLLIN) && zmq_recv (router, buf, sizeof buf, 0) >= 0
            && zmq_recv (router, buf, sizeof buf, 0) == 2)
            got = true;
    }
    zmq_close (d);
    return got;
}

static void
t_zap (void **state)
{
    char pub[41], err[512];
    char *keys = s_path ("z"), *allow = s_path ("z/allow");
    assert_int_equal (cgq_auth_keygen (keys, "coord", NULL, pub, err, sizeof err), 0);
    assert_int_equal (cgq_auth_keygen (keys, "good", NULL, pub, err, sizeof err), 0);
    assert_int_equal (cgq_auth_keygen (keys, "evil", NULL, pub, err, sizeof err), 0);
    assert_int_equal (mkdir (allow, 0700), 0);
    char *cmd = cgq_xasprintf ("cp '%s/good.key' '%s/'", keys, allow);
    assert_int_equal (system (cmd), 0);
    free (cmd);
    char *csec = cgq_xasprintf ("%s/coord.key_secret", keys);
    char *cpub = cgq_xasprintf ("%s/coord.key", keys);
    char *gsec = cgq_xasprintf ("%s/good.key_secret", keys);
    char *esec = cgq_xasprintf ("%s/evil.key_secret", keys);

    void *ctx = zmq_ctx_new ();
    cgq_auth_t *server = NULL, *good = NULL, *evil = NULL;
    assert_int_equal (cgq_auth_server_new (ctx, csec, NULL, &server, err, sizeof err), -1);
    assert_non_null (strstr (err, "only --curve-secret is set"));
    assert_int_equal (cgq_auth_server_new (ctx, csec, allow, &server, err, sizeof err), 0);
    assert_int_equal (cgq_auth_client_new (gsec, cpub, &good, err, sizeof err), 0);
    assert_int_equal (cgq_auth_client_new (esec, cpub, &evil, err, sizeof err), 0);
    void *router = zmq_socket (ctx, ZMQ_ROUTER);
    int zero = 0;
    zmq_setsockopt (router, ZMQ_LINGER, &zero, sizeof zero);
    assert_int_equal (cgq_auth_server_apply (server, router), 0);
    assert_int_equal (zmq_bind (router, "tcp://127.0.0.1:*"), 0);
    char ep[128];
    size_t len = sizeof ep;
    zmq_getsockopt (router, ZMQ_LAST_ENDPOINT, ep, &len);

    assert_true (s_try (ctx, server, router, ep, good));
    assert_int_equal (cgq_auth_accepted (server), 1);

    // node ids: good (keygen's default) may be good and good-*; a key with
    // --nodes gets exactly its patterns; a key not in the allow-list, none
    char gpub[41], bpub[41], allowed[128];
    assert_int_equal (cgq_auth_keygen (keys, "gpu", "box-?, w1", bpub, err, sizeof err), 0);
    cmd = cgq_xasprintf ("cp '%s/gpu.key' '%s/'", keys, allow);
    assert_int_equal (system (cmd), 0);
    free (cmd);
    snprintf (gpub, sizeof gpub, "%s", cgq_auth_public_txt (good));
    assert_true (cgq_auth_may_claim (server, gpub, "good", allowed, sizeof allowed));
    assert_string_equal (allowed, "good,good-*");
    assert_true (cgq_auth_may_claim (server, gpub, "good-1234", NULL, 0));
    assert_false (cgq_auth_may_claim (server, gpub, "goodness", NULL, 0));
    assert_false (cgq_auth_may_claim (server, gpub, "w1", NULL, 0));
    assert_true (cgq_auth_may_claim (server, bpub, "w1", NULL, 0));
    assert_true (cgq_auth_may_claim (server, bpub, "box-7", NULL, 0));
    assert_false (cgq_auth_may_claim (server, bpub, "box-77", allowed, sizeof allowed));
    assert_string_equal (allowed, "box-?, w1");
    assert_false (cgq_auth_may_claim (server, cgq_auth_public_txt (evil), "evil", allowed,
                                      sizeof allowed));
    assert_false (cgq_auth_may_claim (server, NULL, "good", NULL, 0));
    assert_false (cgq_auth_may_claim (NULL, gpub, "good", NULL, 0));
    char upub[41];
    assert_int_equal (cgq_auth_keygen (keys, "user", "", upub, err, sizeof err), 0);
    cmd = cgq_xasprintf ("cp '%s/user.key' '%s/'", keys, allow);
    assert_int_equal (system (cmd), 0);
    free (cmd);
    assert_false (cgq_auth_may_claim (server, upub, "user", allowed, sizeof allowed));
    assert_string_equal (allowed, "");
    assert_false (s_try (ctx, server, router, ep, evil));
    assert_true (cgq_auth_refused (server) >= 1);
    assert_false (s_try (ctx, server, router, ep, NULL)); // no CURVE at all

    zmq_close (router);
    cgq_auth_destroy (&server);
    cgq_auth_destroy (&good);
    cgq_auth_destroy (&evil);
    zmq_ctx_term (ctx);
    free (csec);
    free (cpub);
    free (gsec);
    free (esec);
    free (keys);
    free (allow);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (t_keygen),
        cmocka_unit_test (t_client_errors),
        cmocka_unit_test (t_loopback_only),
        cmocka_unit_test (t_zap),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
