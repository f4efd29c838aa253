// store: the Redis side of cgq. The coordinator queues every state change of
// one loop turn with cgq_store_cmd() and sends them with one cgq_store_flush():
// a single pipelined MULTI ... EXEC written at once, one round trip per turn
// whatever the number of commands. Readers (recovery, the CLI) use the
// synchronous cgq_store_command() and the pipelined append/get pair.
//
// URLs: redis://[[user]:password@]host[:port][/db]   (default port 6379, db 0)
//       unix:///path/to/redis.sock[?db=N]
//       sentinel://[[user]:password@]host[:port][,host[:port]...]/master_name[/db]
//         (sentinel port 26379 by default; the sentinels' own ACL user and
//         password, if any, from CGQ_SENTINEL_USER / CGQ_SENTINEL_PASSWORD)
// With sentinel://, every (re)connect asks the sentinels in turn for the
// master's address (SENTINEL get-master-addr-by-name) and accepts it only if
// it answers ROLE master; a READONLY reply or a broken connection drops the
// connection, so the next command asks again: a demoted master is never
// written to.
// AUTH (with user for Redis 6 ACLs) and SELECT are sent on every (re)connect.
#ifndef CGQ_STORE_H
#define CGQ_STORE_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cgq_store_t cgq_store_t;

// cgq_store_new parses url; it does not connect. Returns NULL and writes one
// line into err (errlen bytes) when the URL is malformed.
// timeout_ms bounds connect and every command (0: 2000 ms).
cgq_store_t *cgq_store_new (const char *url, int timeout_ms, char *err, size_t errlen);

// cgq_store_destroy disconnects and frees the queued batch. Accepts NULL;
// sets *self_p = NULL.
void cgq_store_destroy (cgq_store_t **self_p);

// cgq_store_connect (re)connects, authenticates and selects the db.
// Returns 0, or -1 with errstr set to "cannot reach Redis at URL: why (check ...)".
int cgq_store_connect (cgq_store_t *self);
bool cgq_store_connected (cgq_store_t *self);
const char *cgq_store_errstr (cgq_store_t *self);
// The URL with any password masked, for messages.
const char *cgq_store_url (cgq_store_t *self);

// cgq_store_cmd queues one command into the current batch, written in RESP
// directly (no printf). Arguments are separated by the format's spaces (an
// interpolated string may hold spaces, "" is an empty argument), as with
// redisFormatCommand, for these conversions: %s, %b (pointer, size_t), %d %i
// %u with l, ll or z, and %%. Any other (%f, %q ...) queues nothing and logs
// an error. Nothing is sent.
void cgq_store_cmd (cgq_store_t *self, const char *fmt, ...);
void cgq_store_cmdargv (cgq_store_t *self, int argc, const char **argv, const size_t *argvlen);

// A command written argument by argument into the batch, for one whose
// number of arguments is known only at run time (SADD key m1 m2 ...):
// cgq_store_begin with the exact count, then that many cgq_store_arg*.
void cgq_store_begin (cgq_store_t *self, size_t argc);
void cgq_store_arg (cgq_store_t *self, const char *arg, size_t len);
void cgq_store_arg_u64 (cgq_store_t *self, uint64_t v);
void cgq_store_arg_dbl (cgq_store_t *self, double v); // as cgq_fmt_double

// Number of commands queued and not yet flushed.
size_t cgq_store_pending (cgq_store_t *self);

// cgq_store_flush sends the queued commands as one MULTI/EXEC batch (connecting
// first if needed) and waits for the reply. Returns 0 on success (the batch is
// then empty); on failure the batch is kept, err/errstr say why, the connection
// is dropped, and the next flush reconnects and sends it again. A command that
// Redis rejects inside EXEC (wrong type) is logged and does not fail the batch.
// An empty batch returns 0 without I/O.
int cgq_store_flush (cgq_store_t *self);

// Flushing without waiting (the coordinator's loop): cgq_store_flush_start
// sends the whole batch as cgq_store_flush would and returns at once: 0
// (sent, or nothing to send, or a batch already in flight) or -1 (not sent:
// errstr; the batch is kept). Commands queued meanwhile wait for the next
// batch. cgq_store_flush_poll reads what has arrived of the answer (all of
// it, blocking, with wait) and says where the batch in flight stands. Only
// one is in flight at a time; any other use of the connection (a command,
// cgq_store_flush) first waits for it, and its outcome is kept for the next
// poll. cgq_store_fd is the connection's socket, to poll for its answer.
enum {
    CGQ_FLUSH_IDLE,   // nothing in flight, nothing to report
    CGQ_FLUSH_FLYING, // in flight: poll again when cgq_store_fd is readable
    CGQ_FLUSH_DONE,   // the batch in flight is applied (and gone from pending)
    CGQ_FLUSH_FAILED, // it was not: its commands are first in the batch again; errstr
};
int cgq_store_flush_start (cgq_store_t *self);
int cgq_store_flush_poll (cgq_store_t *self, bool wait);
bool cgq_store_flying (const cgq_store_t *self);
int cgq_store_fd (const cgq_store_t *self);

// cgq_store_set_marker makes every flushed batch also write
// HSET key field TAG:SEQ inside its MULTI/EXEC. When the connection drops
// after EXEC was sent, the next flush reads the marker first: a batch that
// Redis applied is not sent again, so HINCRBY counters never count twice.
// The coordinator uses key cgq:coordinator, field batch, tag = its epoch.
// NULL key turns it off.
void cgq_store_set_marker (cgq_store_t *self, const char *key, const char *field,
                           const char *tag);

// cgq_store_set_fence makes every batch (and every replayed one) conditional
// on this writer still holding a lease: before MULTI it WATCHes key and
// seq_key and reads both in the same round trip. The batch goes out only if key holds
// value, or key is gone (expired) while seq_key still holds seq (nobody took
// over since); a takeover after the check aborts the EXEC through WATCH.
// Otherwise the flush fails and cgq_store_fenced turns true for good: the
// writer must stop writing. NULL key turns it off.
void cgq_store_set_fence (cgq_store_t *self, const char *key, const char *value,
                          const char *seq_key, uint64_t seq);
bool cgq_store_fenced (const cgq_store_t *self);

// cgq_store_set_journal keeps every batch committed in the last window_ms
// (with the marker on). On each new connection the first flush reads the
// marker: if Redis came back older than the last batch it acknowledged — a
// crash inside its fsync window (appendfsync everysec loses up to ~2 s) —
// the journaled batches after the marker's are sent again, in order, before
// anything else. Batches older than the window are gone from the journal;
// the coordinator acks nothing to a node before its batch is that old
// (loop.c), so what a node forgot is never lost. 0 turns it off.
void cgq_store_set_journal (cgq_store_t *self, int64_t window_ms);
// Number of batches replayed so far.
uint64_t cgq_store_replayed (const cgq_store_t *self);

// cgq_store_set_replicas makes every marked batch wait, in its round trip,
// for WAIT replicas wait_ms (0: off, the default). A batch the replicas do
// not confirm in time is applied all the same, and kept in the journal
// (whatever its window) until a later batch's WAIT confirms it; after a
// failover it is replayed on the new master like a batch an AOF cut lost.
// cgq_store_applied_seq is the marker seq of the last batch Redis applied,
// cgq_store_confirmed_seq the last one the replicas confirmed (the applied
// one with replicas 0): Acks of a batch wait until it is confirmed.
void cgq_store_set_replicas (cgq_store_t *self, int replicas, int wait_ms);
uint64_t cgq_store_applied_seq (const cgq_store_t *self);
uint64_t cgq_store_confirmed_seq (const cgq_store_t *self);

// cgq_store_set_gate (the coordinator's loop) makes a (re)connect never
// block on a Redis that does not answer: before connecting, a non-blocking
// probe (connect + PING, bounded by timeout_ms) must have had an answer in
// the last second; until then whatever needs the connection (a flush, a
// command) fails at once with errstr, and the probe goes on. The caller
// polls cgq_store_probe_fd (events: POLLIN or POLLOUT) and calls
// cgq_store_probe_poll when it is ready: CGQ_PROBE_ALIVE means a connect
// now should be quick. A batch in flight longer than timeout_ms (+ WAIT's)
// fails as a timed-out read would; a command waits at most 250 ms for a
// batch in flight and 300 ms for its own answer to begin (then fails, the
// connection dropped). cgq_store_probes counts probes started.
enum { CGQ_PROBE_NONE, CGQ_PROBE_WAITING, CGQ_PROBE_ALIVE, CGQ_PROBE_DEAD };
void cgq_store_set_gate (cgq_store_t *self, bool on);
int cgq_store_probe_poll (cgq_store_t *self);
int cgq_store_probe_fd (const cgq_store_t *self, short *events);
uint64_t cgq_store_probes (const cgq_store_t *self);
bool cgq_store_probing (const cgq_store_t *self); // a probe is under way

// cgq_store_command runs one command synchronously (connecting if needed).
// Returns the reply (caller frees with freeReplyObject), or NULL on an I/O
// error (errstr says why). An error reply is returned as REDIS_REPLY_ERROR.
// With a fence set, the next batch's lease check goes out behind the
// command, in its round trip (but behind MULTI, EXEC, DISCARD, WATCH and
// UNWATCH); a lease found taken makes cgq_store_fenced true.
redisReply *cgq_store_command (cgq_store_t *self, const char *fmt, ...);
// cgq_store_lease_watched: the next batch needs no lease check of its own
// (one rode behind the last EXEC or command, and found the lease ours).
bool cgq_store_lease_watched (const cgq_store_t *self);

// Pipelined reads: cgq_store_append queues a command on the connection
// (connecting if needed; returns -1 on failure), cgq_store_get_reply reads the
// next reply in order (NULL on I/O error; caller frees).
int cgq_store_append (cgq_store_t *self, const char *fmt, ...);
redisReply *cgq_store_get_reply (cgq_store_t *self);

#endif
