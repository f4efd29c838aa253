// metrics: the coordinator's /metrics endpoint, in the Prometheus text
// exposition format (version 0.0.4). The HTTP server (http.h: /metrics, the
// dashboard and its JSON API) runs on libmicrohttpd's own threads and never
// reads coord_t; a scrape asks the loop for a page instead: it wakes the loop
// through an eventfd (metrics_fd, polled beside the ZeroMQ sockets), the loop
// renders the page from its live state in metrics_run and hands it back
// under a mutex. So a page is rendered after its request arrived (never
// stale), by the only thread that owns the state (never torn), and a slow
// HTTP client never holds up the loop. docs/operations.md lists the metrics;
// docs/architecture.md ("/metrics and the dashboard") says why.
//
// Also renders the histograms (hist.h) that jobs.c and loop.c fill.
#ifndef CGQ_METRICS_H
#define CGQ_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http.h"
#include "util.h"

struct coord_s;
struct metrics_srv_s;

// metrics_start_http starts the HTTP server (http.h) for c as cfg says:
// /metrics, the dashboard and /api/. Returns 0 (c->metrics set, the bound
// address logged), or -1 with err set (a bad or taken address, a HOST
// beyond loopback without a token or --insecure, an unreadable token file).
int metrics_start_http (struct coord_s *c, const http_cfg_t *cfg, char *err, size_t errlen);
// metrics_fetch (any thread but the loop's) asks the loop for a page and
// waits for it at most timeout_ms. Returns it (caller frees), or NULL when
// the loop did not answer in time or the server is stopping.
// (m: the struct metrics_srv_s, as http.h's page callback wants it.)
char *metrics_fetch (void *m, int timeout_ms);
// metrics_stop stops the server (NULL-safe); closes its sockets.
void metrics_stop (struct coord_s *c);
// metrics_fd is the one fd to poll for input (-1 when off): readable when a
// scrape waits for a page. metrics_next_ms is the absolute time by which
// metrics_run must be called again (always 0: none).
int metrics_fd (struct coord_s *c);
int64_t metrics_next_ms (struct coord_s *c, int64_t now);
// metrics_run renders a page if a scrape asked for one; never blocks.
void metrics_run (struct coord_s *c);
// metrics_wait is the standby's sleep: waits up to ms, serving scrapes.
void metrics_wait (struct coord_s *c, int64_t ms);
// metrics_port is the port bound (0 when off).
int metrics_port (struct coord_s *c);

// metrics_render appends the exposition text for c to b (for the server,
// and for tests).
void metrics_render (struct coord_s *c, cgq_buf_t *b);

#endif
