// http: the coordinator's HTTP server: /metrics (metrics.h), the dashboard's
// pages (web/, compiled in: / the jobs, /jobs/ID, /jobs/ID/trials/T,
// /nodes; /static/FILE) and its read-only JSON API under /api/ (api.h).
// It runs on libmicrohttpd's own threads (a small pool), each with its own
// Redis connection used for reads only, and never reads the coordinator's
// memory: the dashboard is a reader of Redis like the CLI, and /metrics is
// rendered by the loop on request (the page callback: metrics_fetch). A slow browser, a big job
// or a Redis round trip never holds up the loop.
//
// Security: binds loopback unless told otherwise; a HOST beyond loopback
// needs a bearer token (token_file) or insecure. With a token every path
// wants it: "Authorization: Bearer TOKEN", the cookie cgq_token, or
// ?token=TOKEN once (answered with that cookie, HttpOnly, SameSite=Strict).
// Every answer carries Content-Security-Policy: default-src 'self'.
#ifndef CGQ_HTTP_H
#define CGQ_HTTP_H

#include <stdbool.h>
#include <stddef.h>

struct http_srv_s;

typedef struct {
    const char *addr;       // HOST:PORT; port 0: any free port
    const char *token_file; // NULL: no token
    bool insecure;          // allow a HOST beyond loopback without a token
    const char *redis;      // the URL the API reads (NULL: no /api/, pages only)
    int threads;            // libmicrohttpd's pool (0: 4)
    // /metrics: page (any thread) returns the page, rendered within
    // timeout_ms, or NULL (503); the caller frees it. NULL: no /metrics.
    char *(*page) (void *arg, int timeout_ms);
    void *page_arg;
} http_cfg_t;

// http_start binds and starts serving. Returns the server, or NULL with
// err set.
struct http_srv_s *http_start (const http_cfg_t *cfg, char *err, size_t errlen);
// http_stop stops serving, joins the threads (their Redis connections close)
// and frees s (NULL-safe).
void http_stop (struct http_srv_s *s);
// http_port is the port bound.
int http_port (const struct http_srv_s *s);

// http_token_equal compares a presented token with the expected one in time
// that depends only on the expected token's length.
bool http_token_equal (const char *expected, const char *given);

#endif
