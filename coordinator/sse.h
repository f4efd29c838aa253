// sse: live updates for the dashboard, GET /api/events?job=ID as
// server-sent events (text/event-stream). One thread of its own reads
// cgq:events with XREAD BLOCK on its own Redis connection and keeps the last
// SSE_RING events; each client's connection is suspended in libmicrohttpd
// while it has nothing to send (no HTTP thread waits on it) and resumed when
// events come, or once a second to send a heartbeat when one is due. At most
// SSE_MAX_CLIENTS at once (the next gets 503); each event is one line of
// JSON, the stream entry's fields ({"id", "type", "job", "trial", ...}),
// only the job's when ?job= is given; a field over 1 KiB is cut and the
// event says "truncated": true (a long error text never stalls a stream). A
// client that fell more than SSE_RING events behind gets one "reset" event
// (reload what you show).
#ifndef CGQ_SSE_H
#define CGQ_SSE_H

#include <microhttpd.h>

#define SSE_MAX_CLIENTS 16
#define SSE_RING 1024
#define SSE_HEARTBEAT_S 5

typedef struct sse_s sse_t;

// sse_start starts the events thread on redis (a URL as --redis takes);
// NULL if the thread cannot start.
sse_t *sse_start (const char *redis);
// sse_quiesce ends every stream and resumes every suspended connection,
// so that MHD_stop_daemon may run; sse_stop (after MHD_stop_daemon) joins
// the thread and frees it all.
void sse_quiesce (sse_t *self);
void sse_stop (sse_t **self_p);
// sse_answer queues the event stream for conn (job: the ?job= argument,
// NULL: every job); a bad job or too many clients get their 4xx/503 JSON.
// headers adds the server's own headers to a response.
enum MHD_Result sse_answer (sse_t *self, struct MHD_Connection *conn, const char *job,
                            void (*headers) (struct MHD_Response *r));

#endif
