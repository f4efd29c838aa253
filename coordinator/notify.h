// notify: the HTTP POSTs of a spec's notify: {url, on} (docs/spec.md), sent
// with libcurl's multi interface from the coordinator's own loop: the loop
// polls curl's sockets beside its ZeroMQ ones (notify_poll_items) and wakes
// for curl's timers and the retry back-off (notify_next_ms); notify_run does
// what is ready and never blocks.
//
// The promise is at-least-once, across restarts: a notification is first a
// record in the cgq:notify hash, queued in the same Redis batch as the job's
// end; its first POST starts only once that batch is flushed
// (notify_flushed). A 2xx answer deletes the record; a connection error, a
// timeout or a 5xx is retried with back-off (1 s, 2 s, 4 s, ... up to
// NOTIFY_MAX_ATTEMPTS POSTs); any other answer, or the last failure, gives up
// (logged, a notify.failed event in cgq:events, record deleted). A
// coordinator that starts (or takes over) sends the records it finds
// (notify_recover). A duplicate is possible only when a coordinator stops
// between the receiver's 2xx and the next flush; every POST carries the same
// "notification" id (and an X-Cgq-Notification header) to deduplicate on.
//
// notify.c knows nothing of jobs: jobs.c builds the summary (notify_queue).
#ifndef CGQ_NOTIFY_H
#define CGQ_NOTIFY_H

#include <jansson.h>
#include <stdint.h>
#include <zmq.h>

#include "util.h"

#define NOTIFY_MAX_ATTEMPTS 6
// The most of curl's sockets the loop polls (more wait for the
// once-a-second timeout action): 8 transfers at once, two sockets each
// while a connection is raced over IPv4 and IPv6, and their resolvers.
#define NOTIFY_POLL_MAX 32

struct coord_s;

// notify_queue records one notification: id names it ("7:finished"), url
// is where it goes, summary the JSON body (borrowed; serialized here). The
// record goes into the current Redis batch; the POST starts after it is
// flushed.
void notify_queue (struct coord_s *c, const char *id, const char *url, const json_t *summary);
// notify_recover reads the records a previous coordinator left and sends
// them. Returns how many, or -1 when Redis could not be read.
int notify_recover (struct coord_s *c);
// notify_covered: the records queued so far are in the batch going out now;
// notify_flushed: that batch is in Redis (they may be sent).
void notify_covered (struct coord_s *c);
void notify_flushed (struct coord_s *c);

// notify_poll_items appends curl's sockets to items (at most max of them)
// and returns how many it added; notify_next_ms is the absolute time by
// which notify_run must run again (0: none).
int notify_poll_items (struct coord_s *c, zmq_pollitem_t *items, int max);
int64_t notify_next_ms (struct coord_s *c, int64_t now);
// notify_run moves the transfers on (items: the nitems notify_poll_items
// added, as zmq_poll left them), handles the finished ones and starts those
// that are due. Never blocks.
void notify_run (struct coord_s *c, int64_t now, const zmq_pollitem_t *items, int nitems);
// notify_fini drops what is in memory (the records stay in Redis).
void notify_fini (struct coord_s *c);
// notify_render_metrics appends the notification metrics to b.
void notify_render_metrics (struct coord_s *c, cgq_buf_t *b);

#endif
