// store_int: the store's insides, shared by store.c, store_probe.c (the
// non-blocking probe and gate) and store_sentinel.c (finding the master
// through Redis Sentinel), split for the file-length limit.
// Nothing outside common/store*.c includes it.
#ifndef CGQ_STORE_INT_H
#define CGQ_STORE_INT_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stdint.h>

#include "store.h"
#include "util.h"

struct cgq_store_t {
    // parsed URL
    bool is_unix;
    char *host;     // TCP host (brackets of an IPv6 literal removed)
    int port;
    char *path;     // unix socket path
    char *user;     // NULL: no ACL user
    char *password; // NULL: no AUTH
    int db;
    char *url;      // canonical URL with the password masked
    int timeout_ms;

    // sentinel://: the sentinels asked for the master's address on every
    // connect (host/port above are then the master last found), all at once,
    // a majority's newest config-epoch taken (store_sentinel.c); what they
    // name must say ROLE master.
    char **sent_host;
    int *sent_port;
    size_t nsent;
    char *master_name;
    char *sent_user, *sent_password; // CGQ_SENTINEL_USER / CGQ_SENTINEL_PASSWORD

    // cgq_store_set_replicas: every batch is followed by WAIT replicas
    // wait_ms; applied_seq is the last batch Redis applied, confirmed_seq the
    // last that replicas replicas had (a WAIT confirms all before it).
    int replicas;
    int wait_ms;
    uint64_t applied_seq, confirmed_seq;
    long long fwaited; // the flight's WAIT reply (-1: none)
    bool lagging;      // the last WAIT came back short (logged once)
    bool fwait;        // a WAIT reply follows EXEC's

    redisContext *ctx;
    size_t appended; // replies owed to cgq_store_append callers

    // The batch: formatted commands back to back, and where each one starts,
    // so that one Redis rejects at queue time can be dropped and the rest sent.
    cgq_buf_t batch;
    cgq_buf_t scratch; // cgq_store_cmd's arguments, before they go into batch
    size_t *starts;
    size_t count;
    size_t starts_cap;

    // Commit marker (cgq_store_set_marker): every batch also writes
    // HSET marker_key marker_field TAG:SEQ, so after a connection lost
    // mid-EXEC one read tells whether the batch was applied.
    char *marker_key, *marker_field, *marker_tag;
    uint64_t marker_seq;
    char marker_id[128];   // id of the batch in doubt, or ""
    size_t marker_count;   // its number of commands (the first ones queued)

    // The journal of committed batches (cgq_store_set_journal): what Redis
    // acknowledged but may not have written to disk yet. A FIFO of the
    // batches of the last journal_ms, each exactly as sent (MULTI ... EXEC).
    struct s_entry *journal;
    size_t jhead, jlen, jcap, jbytes;
    int64_t journal_ms;
    bool fresh;            // connected since the last flush: check for lost batches
    uint64_t replayed;     // batches replayed since start (cgq_store_replayed)

    // Fencing (cgq_store_set_fence): each batch is WATCHed on fence_key and
    // sent only while it holds fence_val (or is gone with fence_seq_key still
    // at fence_seq: nobody took over since).
    char *fence_key, *fence_val, *fence_seq_key;
    uint64_t fence_seq;
    bool fenced;
    // The WATCH sent right after the last EXEC, in the same round trip, found
    // the lease ours: the next batch needs no check of its own (a takeover
    // since aborts its EXEC). Anything else sent on the connection, or a new
    // connection, disarms it.
    bool watch_armed;

    // The batch in flight (s_send): its first fcount commands went out as
    // MULTI .. EXEC, with the lease's WATCH/GETs behind; the replies are
    // read as they arrive (cgq_store_flush_poll) or all at once (s_wait).
    // Commands queued meanwhile go after them in batch: if the flight fails,
    // its commands are still first, as if never sent.
    size_t fcount;        // 0: nothing in flight
    size_t fgot, ftotal;  // replies read; expected up to EXEC (MULTI, each, marker, EXEC)
    bool frewatch;        // three fence replies follow EXEC's
    bool *fbad;           // commands Redis refused at queue time (fcount entries)
    size_t fnbad;
    char ftransient[256]; // the first error that a retry may cure
    int frc;              // the outcome so far: 0, 1 (drop fbad, send again), -1
    char *fsent;          // what went out (a marked batch), for the journal
    size_t fsent_len;
    redisReply *ffence[3];
    int fdone;            // an outcome read for another caller, not collected: 1 ok, -1 failed

    int64_t fstart_ms;    // when the flight went out (the gate's flight timeout)

    // cgq_store_set_gate: no blocking connect until a non-blocking probe
    // (connect + PING, polled by the caller's loop) has had an answer.
    bool gate;
    redisContext *probe; // the probe's connection (non-blocking), or NULL
    bool probe_sent;     // its PING is written; waiting for the answer
    int64_t probe_deadline_ms;
    int64_t alive_ms;    // when a probe last had an answer
    uint64_t probes;     // probes started (cgq_store_probes)
    bool probe_silent;   // the last probe's verdict: no answer in timeout_ms

    char errstr[512];
};

#define S_HINT "(is redis-server running? check --redis / CGQ_REDIS)"

// store_probe.c, for s_ensure: a connect may go ahead (no gate, or a
// probe's recent answer); otherwise the probe is started or polled (up to
// a moment while Redis answered lately) and -1 comes back with errstr.
int cgq_store__gate_ensure (cgq_store_t *self);

// store_probe.c: one step of a request on a non-blocking connection c whose
// socket poll() found ready: until *sent, finish the connect (SO_ERROR) and
// write what is appended (*sent once all is out); then read what came into
// c's reader (redisGetReplyFromReader takes the replies). 0, or -1 with
// *fail (why, valid until c is freed).
int cgq_store__nb_io (redisContext *c, bool *sent, const char **fail);

// store_probe.c, for the sentinel path: the same gate for the master the
// sentinels named (self->host/port): 0 when a probe answered lately (or
// now, within a moment), else -1 with errstr and the probe going on.
int cgq_store__gate_probe (cgq_store_t *self);
// ... and forgets what it knew (the sentinels name another master).
void cgq_store__probe_reset (cgq_store_t *self);

// store.c: a blocking connect (AUTH, SELECT/PING) to host:port or the socket;
// and the ROLE master check of what was just connected (disconnects if not).
// 0, or -1 with errstr.
int cgq_store__connect_at (cgq_store_t *self);
void cgq_store__disconnect (cgq_store_t *self);
int cgq_store__check_role (cgq_store_t *self);

// store_sentinel.c: find the master through the sentinels (a majority's
// newest config-epoch) and connect to it if it says ROLE master.
int cgq_store__connect_sentinel (cgq_store_t *self);

#endif
