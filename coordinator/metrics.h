// metrics: the coordinator's /metrics endpoint, in the Prometheus text
// exposition format (version 0.0.4), served by libmicrohttpd from the
// coordinator's own thread: MHD runs without a thread of its own, in epoll
// mode, so the whole HTTP server is one file descriptor that the loop polls
// beside its ZeroMQ sockets (metrics_fd), and metrics_run does what is ready
// without ever blocking. Each scrape is rendered from the live coordinator
// state at that moment, so it can never be stale or torn. docs/operations.md
// lists the metrics; docs/architecture.md says why no thread.
//
// Also renders the histograms (hist.h) that jobs.c and loop.c fill.
#ifndef CGQ_METRICS_H
#define CGQ_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

struct coord_s;

// metrics_start serves /metrics on addr ("HOST:PORT"; port 0: any free
// port) for c. A HOST that is not loopback is refused unless public (the
// --metrics-public option): the page names jobs and counts nodes. Returns 0
// (c->metrics set, the bound address logged), or -1 with err set.
int metrics_start (struct coord_s *c, const char *addr, bool public, char *err, size_t errlen);
// metrics_stop stops the server (NULL-safe); closes its sockets.
void metrics_stop (struct coord_s *c);
// metrics_fd is the one fd to poll for input (-1 when off); metrics_next_ms
// is the absolute time by which metrics_run must be called again (0: none).
int metrics_fd (struct coord_s *c);
int64_t metrics_next_ms (struct coord_s *c, int64_t now);
// metrics_run accepts, reads and answers what is ready; never blocks.
void metrics_run (struct coord_s *c);
// metrics_wait is the standby's sleep: waits up to ms, serving scrapes.
void metrics_wait (struct coord_s *c, int64_t ms);
// metrics_port is the port bound (0 when off).
int metrics_port (struct coord_s *c);

// metrics_render appends the exposition text for c to b (for the server,
// and for tests).
void metrics_render (struct coord_s *c, cgq_buf_t *b);

#endif
