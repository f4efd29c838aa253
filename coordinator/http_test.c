// http_test: the HTTP server without Redis: the token compare, what
// http_start refuses (a bad address, beyond loopback without a token, a bad
// token file), and a real server on a free loopback port answering over a
// socket: a page with its CSP, /metrics through the page callback, the API
// without Redis (503), the token wanted when set.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "http.h"

static void
t_token_equal (void **state)
{
    (void)state;
    assert_true (http_token_equal ("0123456789abcdef", "0123456789abcdef"));
    assert_false (http_token_equal ("0123456789abcdef", "0123456789abcdeF"));
    assert_false (http_token_equal ("0123456789abcdef", "0123456789abcde"));
    assert_false (http_token_equal ("0123456789abcdef", "0123456789abcdef0"));
    assert_false (http_token_equal ("0123456789abcdef", ""));
    assert_false (http_token_equal ("0123456789abcdef", NULL));
}

static void
t_refusals (void **state)
{
    (void)state;
    char err[512];
    http_cfg_t cfg = {.addr = "nonsense"};
    assert_null (http_start (&cfg, err, sizeof err));
    assert_non_null (strstr (err, "HOST:PORT"));
    cfg.addr = "0.0.0.0:0"; // beyond loopback, no token: refused before binding
    assert_null (http_start (&cfg, err, sizeof err));
    assert_non_null (strstr (err, "--http-token-file"));
    char path[] = "/tmp/cgq-http-test-XXXXXX";
    int fd = mkstemp (path);
    assert_true (fd >= 0);
    assert_int_equal (write (fd, "short\n", 6), 6);
    close (fd);
    cfg.addr = "127.0.0.1:0";
    cfg.token_file = path;
    assert_null (http_start (&cfg, err, sizeof err));
    assert_non_null (strstr (err, "16 to 512"));
    unlink (path);
    cfg.token_file = "/nonexistent/token";
    assert_null (http_start (&cfg, err, sizeof err));
    assert_non_null (strstr (err, "--http-token-file"));
}

// s_get sends one request and returns the whole answer (caller frees).
static char *
s_get (int port, const char *path, const char *extra)
{
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons ((uint16_t)port)};
    sa.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    assert_int_equal (connect (fd, (struct sockaddr *)&sa, sizeof sa), 0);
    char req[1024];
    int n = snprintf (req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n%s\r\n",
                      path, extra ? extra : "");
    assert_int_equal (write (fd, req, (size_t)n), n);
    size_t cap = 1 << 16, len = 0;
    char *out = calloc (1, cap);
    ssize_t r;
    while ((r = read (fd, out + len, cap - 1 - len)) > 0)
        len += (size_t)r;
    close (fd);
    return out;
}

static char *
s_page (void *arg, int timeout_ms)
{
    (void)timeout_ms;
    return strdup (arg);
}

static void
t_serves (void **state)
{
    (void)state;
    char err[512];
    http_cfg_t cfg = {.addr = "127.0.0.1:0", .page = s_page, .page_arg = "cgq_up 1\n"};
    struct http_srv_s *s = http_start (&cfg, err, sizeof err);
    assert_non_null (s);
    int port = http_port (s);
    assert_true (port > 0);
    char *a = s_get (port, "/", NULL);
    assert_non_null (strstr (a, "HTTP/1.1 200"));
    assert_non_null (strstr (a, "Content-Security-Policy: default-src 'self'"));
    assert_non_null (strstr (a, "<script src=\"/static/app.js\""));
    free (a);
    a = s_get (port, "/metrics", NULL);
    assert_non_null (strstr (a, "\r\n\r\ncgq_up 1\n"));
    free (a);
    a = s_get (port, "/api/jobs", NULL); // no Redis given
    assert_non_null (strstr (a, "HTTP/1.1 503"));
    free (a);
    a = s_get (port, "/static/../CMakeLists.txt", NULL);
    assert_non_null (strstr (a, "HTTP/1.1 400"));
    free (a);
    http_stop (s);

    char path[] = "/tmp/cgq-http-test-XXXXXX";
    int fd = mkstemp (path);
    assert_int_equal (write (fd, "0123456789abcdefXYZ\n", 20), 20);
    close (fd);
    cfg.token_file = path;
    s = http_start (&cfg, err, sizeof err);
    unlink (path);
    assert_non_null (s);
    port = http_port (s);
    a = s_get (port, "/metrics", NULL);
    assert_non_null (strstr (a, "HTTP/1.1 401"));
    free (a);
    a = s_get (port, "/metrics", "Authorization: Bearer 0123456789abcdefXYZ\r\n");
    assert_non_null (strstr (a, "HTTP/1.1 200"));
    free (a);
    a = s_get (port, "/?token=0123456789abcdefXYZ", NULL);
    assert_non_null (strstr (a, "Set-Cookie: cgq_token=0123456789abcdefXYZ; Path=/; HttpOnly"));
    free (a);
    a = s_get (port, "/", "Cookie: cgq_token=0123456789abcdefXYZ\r\n");
    assert_non_null (strstr (a, "HTTP/1.1 200"));
    free (a);
    http_stop (s);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (t_token_equal),
        cmocka_unit_test (t_refusals),
        cmocka_unit_test (t_serves),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
