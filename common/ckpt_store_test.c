// The checkpoint store's transport (ckpt_store.h) without a server: store
// URLs checked and joined (escaped), the token from the environment or a
// file, put/get/delete in a directory with the size limit, and an
// unreachable HTTP store: a clear error after the bounded retries, the
// token never in it. The HTTP paths against a real server are in
// tests/integration/test_checkpoint_http.py.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckpt_store.h"
#include "tmpdir.h"
#include "util.h"

static void
test_urls (void **state)
{
    (void)state;
    char why[256];
    assert_true (cgq_ckpt_store_is_url ("http://h/p"));
    assert_true (cgq_ckpt_store_is_url ("https://h"));
    assert_false (cgq_ckpt_store_is_url ("/shared/ckpt"));
    assert_false (cgq_ckpt_store_is_url ("ftp://h/p"));
    assert_true (cgq_ckpt_store_valid_url ("http://127.0.0.1:8080/ck", why, sizeof why));
    assert_false (cgq_ckpt_store_valid_url ("ftp://h/p", why, sizeof why));
    assert_false (cgq_ckpt_store_valid_url ("http:///p", why, sizeof why));
    assert_non_null (strstr (why, "no host"));
    assert_false (cgq_ckpt_store_valid_url ("http://u:pw@h/p", why, sizeof why));
    assert_non_null (strstr (why, "token"));
    assert_false (cgq_ckpt_store_valid_url ("http://h/p?x", why, sizeof why));

    char *j = cgq_ckpt_store_join ("http://h:1/ck/", "files/a b/%x#?.pt");
    assert_string_equal (j, "http://h:1/ck/files/a%20b/%25x%23%3F.pt");
    free (j);
    j = cgq_ckpt_store_join ("/s/", "files/a b");
    assert_string_equal (j, "/s/files/a b");
    free (j);
    char *t = cgq_ckpt_store_trial ("http://h/ck/", 3, 4);
    assert_string_equal (t, "http://h/ck/job-3/trial-4");
    free (t);
}

static void
test_names (void **state)
{
    (void)state;
    uint32_t a;
    uint64_t n;
    assert_true (cgq_ckpt_store_parse_name ("ckpt-2-15", &a, &n));
    assert_int_equal (a, 2);
    assert_int_equal (n, 15);
    assert_false (cgq_ckpt_store_parse_name ("ckpt-2-15.tmp", &a, &n));
    assert_false (cgq_ckpt_store_parse_name ("ckpt-02-15", &a, &n));
    assert_false (cgq_ckpt_store_parse_name ("ckpt- 2-15", &a, &n));
    assert_false (cgq_ckpt_store_parse_name (".gone-ckpt-2-15", &a, &n));
    assert_false (cgq_ckpt_store_parse_name ("latest", &a, &n));
}

static void
test_token (void **state)
{
    (void)state;
    char dir[64], err[512];
    assert_int_equal (cgq_test_tmpdir (dir, sizeof dir, "ckpt-store-test"), 0);
    char *file = cgq_xasprintf ("%s/token", dir);
    FILE *f = fopen (file, "w");
    assert_non_null (f);
    fputs ("from-file\nsecond line\n", f);
    fclose (f);
    unsetenv ("CGQ_TEST_TOKEN");
    char *tok = cgq_ckpt_store_token_load ("CGQ_TEST_TOKEN", file, err, sizeof err);
    assert_string_equal (tok, "from-file");
    free (tok);
    setenv ("CGQ_TEST_TOKEN", "from-env", 1);
    tok = cgq_ckpt_store_token_load ("CGQ_TEST_TOKEN", file, err, sizeof err);
    assert_string_equal (tok, "from-env");
    free (tok);
    unsetenv ("CGQ_TEST_TOKEN");
    assert_null (cgq_ckpt_store_token_load ("CGQ_TEST_TOKEN", NULL, err, sizeof err));
    assert_string_equal (err, "");
    char *missing = cgq_xasprintf ("%s/nope", dir);
    assert_null (cgq_ckpt_store_token_load ("CGQ_TEST_TOKEN", missing, err, sizeof err));
    assert_non_null (strstr (err, "cannot read the checkpoint store token file"));
    f = fopen (file, "w");
    fclose (f);
    assert_null (cgq_ckpt_store_token_load ("CGQ_TEST_TOKEN", file, err, sizeof err));
    assert_non_null (strstr (err, "is empty"));
    free (missing);
    free (file);
    assert_int_equal (cgq_test_rmtree (dir), 0);
}

static void
test_dir (void **state)
{
    (void)state;
    char dir[64], err[512], hex[65];
    assert_int_equal (cgq_test_tmpdir (dir, sizeof dir, "ckpt-store-test"), 0);
    char *a = cgq_xasprintf ("%s/a", dir), *b = cgq_xasprintf ("%s/b", dir),
         *c = cgq_xasprintf ("%s/c", dir);
    assert_int_equal (cgq_ckpt_store_put_mem (a, "abc", 3, err, sizeof err), 0);
    uint64_t size = 0;
    assert_int_equal (cgq_ckpt_store_get_file (a, b, 3, hex, &size, err, sizeof err), 0);
    assert_int_equal (size, 3);
    assert_string_equal (hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    // More than expected: an error, and nothing of it kept.
    assert_int_equal (cgq_ckpt_store_get_file (a, c, 2, hex, &size, err, sizeof err), -1);
    assert_int_equal (access (c, F_OK), -1);
    cgq_buf_t m;
    cgq_buf_init (&m);
    assert_int_equal (cgq_ckpt_store_get_mem (a, 10, &m, err, sizeof err), 0);
    assert_int_equal (m.len, 3);
    assert_int_equal (cgq_ckpt_store_get_mem (a, 2, &m, err, sizeof err), -1);
    cgq_buf_fini (&m);
    assert_int_equal (cgq_ckpt_store_delete (a, err, sizeof err), 0);
    assert_int_equal (cgq_ckpt_store_delete (a, err, sizeof err), 0); // gone already
    assert_int_equal (cgq_ckpt_store_get_mem (a, 10, &m, err, sizeof err), -1);
    // A sealed checkpoint (a directory) goes whole; a second time is no error.
    char *ck = cgq_xasprintf ("%s/ckpt-1-3", dir);
    char *f = cgq_xasprintf ("%s/files/x", ck);
    assert_int_equal (cgq_mkdir_p (ck), 0);
    char *files = cgq_xasprintf ("%s/files", ck);
    assert_int_equal (cgq_mkdir_p (files), 0);
    assert_int_equal (cgq_ckpt_store_put_mem (f, "x", 1, err, sizeof err), 0);
    assert_int_equal (cgq_ckpt_store_delete_checkpoint (ck, err, sizeof err), 0);
    assert_int_equal (access (ck, F_OK), -1);
    assert_int_equal (cgq_ckpt_store_delete_checkpoint (ck, err, sizeof err), 0);
    free (files);
    free (f);
    free (ck);
    free (a);
    free (b);
    free (c);
    assert_int_equal (cgq_test_rmtree (dir), 0);
}

// A loopback port nothing listens on (bound, then closed).
static int
s_dead_port (void)
{
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK)};
    assert_int_equal (bind (fd, (struct sockaddr *)&sa, sizeof sa), 0);
    socklen_t len = sizeof sa;
    getsockname (fd, (struct sockaddr *)&sa, &len);
    close (fd);
    return ntohs (sa.sin_port);
}

static void
test_unreachable (void **state)
{
    (void)state;
    cgq_ckpt_store_opts_t o = {
        .token = "t0ps3cret", .connect_timeout_s = 1, .retries = 2, .retry_base_ms = 20};
    cgq_ckpt_store_setup (&o);
    char *url = cgq_xasprintf ("http://127.0.0.1:%d/ck/manifest", s_dead_port ());
    char err[1024];
    cgq_buf_t m;
    cgq_buf_init (&m);
    struct timespec t0, t1;
    clock_gettime (CLOCK_MONOTONIC, &t0);
    assert_int_equal (cgq_ckpt_store_get_mem (url, 100, &m, err, sizeof err), -1);
    clock_gettime (CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    assert_true (s >= 0.055 && s < 5); // 20 + 40 ms of pauses: tried 3 times, bounded
    assert_non_null (strstr (err, "GET http://127.0.0.1:"));
    assert_non_null (strstr (err, "the checkpoint store is unreachable"));
    assert_null (strstr (err, "t0ps3cret"));
    assert_int_equal (cgq_ckpt_store_put_mem (url, "x", 1, err, sizeof err), -1);
    assert_non_null (strstr (err, "PUT "));
    assert_int_equal (cgq_ckpt_store_delete (url, err, sizeof err), -1);
    cgq_buf_fini (&m);
    free (url);
    cgq_ckpt_store_setup (NULL);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_urls),        cmocka_unit_test (test_names),
        cmocka_unit_test (test_token),       cmocka_unit_test (test_dir),
        cmocka_unit_test (test_unreachable),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
