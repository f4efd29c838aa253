// coord: the coordinator's types (coord_t, job_t, trial_t, node_t ...) and
// nothing else: no function is declared here. Which file owns each noun;
// calls go down this list, never up, so no two files call each other:
//
//   main.c       flags, signals, sockets, start-up; then coord_run
//   loop.c       the coordinator's lifetime (coord_init, coord_fini) and the
//                event loop: poll, read messages, hand them on, run timers,
//                flush the Redis batch, then send (coord_run)
//   session.c    what nodes say: Hello and adoption, heartbeats, results,
//                progress, Bye, and liveness
//   control.c    what the CLI says: submit, cancel, suggest, ping
//   metrics.c    /metrics, rendered by the loop (when the HTTP server asks)
//                from the live jobs, nodes, notifications and histograms
//   recovery.c   rebuilds jobs and trials from Redis at start-up
//   dispatch.c   starts trials: asks the scheduler where, renders the Assign
//   scheduler.c  chooses, and only chooses: which node fits, why none can
//   blocked.c    device jobs no device can run: why (quarantined devices),
//                and their blocked_timeout
//   jobs_nodes.c the state machine's part that follows a trial's node: lost,
//                or found again after a restart (adopted, requeued)
//   jobs.c       the job and trial state machine: every transition changes
//                memory and queues its Redis commands in the same call
//   checkpoint.c checkpoint records as pure decisions (no I/O): which one a
//                trial records, what a resumed attempt restores
//   early_stop.c the early stopping rules as pure decisions (no I/O)
//   hyperband.c  Hyperband's brackets as pure decisions (no I/O)
//   passes.c     measure: {passes: 2} as pure decisions (no I/O): what a
//                first pass keeps, when the second starts, in which order
//   outbox.c     messages that wait until the Redis batch they depend on is
//                flushed
//   nodes.c      the node registry: lookup, resources, grant and release of
//                what each trial holds (the GPU-share rule lives there)
//   notify.c     the spec's notify: POSTs (libcurl multi, polled by the loop)
//   hist.c       the latency histograms (plain counting; metrics.c renders)
//   lease.c      the leader lease in Redis (standby coordinators)
//   http.c       the HTTP server on libmicrohttpd's own threads: /metrics,
//                the dashboard's pages (web/, compiled in), the token, /api/;
//                never reads coord_t
//   api.c        the dashboard's JSON API, read from Redis on those threads
//   api_charts.c the job page's charts (best so far, learning curves,
//                importance, a sample for the Pareto scatter), aggregated
//                from Redis on those threads
//   api_keys.c   a job's trials ordered on one key each (HMGET of the fields
//                the order needs, a JSON member read without jansson)
//   importance.c parameter importance as a pure computation (no I/O)
//   sse.c        /api/events: cgq:events as server-sent events, read by a
//                thread of its own (XREAD BLOCK); clients suspended in MHD
//
// Redis key and field names come from common/keyspace.h, never literals.
#ifndef CGQ_COORD_H
#define CGQ_COORD_H

#include <czmq.h>
#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "auth.h"
#include "hist.h"
#include "keyspace.h"
#include "searcher.h"
#include "spec.h"

// A trial lost with JOBS_MAX_LOSSES different nodes in a row fails, and so
// does one lost twice as many times in a row on fewer: a trial that kills its
// node every time ends instead of circling (jobs_lost). The same node lost
// again and again (an operator restarting it) fails nothing sooner.
#define JOBS_MAX_LOSSES 3
#include "store.h"
#include "util.h"
#include "wire.h"

typedef struct {
    char *redis;
    char *bind;
    char *control;
    int64_t heartbeat_ms;
    int64_t dead_after; // heartbeats
    int64_t stale_after; // heartbeats of silence after which a node's tasks show as stale
    uint64_t max_frame;
    int64_t max_trials; // per job
    int64_t max_params; // per trial (the spec's space entries)
    uint64_t max_spec;  // bytes
    int64_t durable_ms; // Redis may lose acknowledged writes this recent (fsync window)
    int64_t redis_replicas; // Acks wait until this many replicas have the batch (WAIT)
    int64_t redis_wait_ms;  // WAIT's timeout, in each batch's round trip
    int64_t lease_ms;   // the leader lease's time to live (lease.h); renewed every third
    int64_t max_buffer; // commands held while Redis is down before results wait on the nodes
    int64_t quarantine_after; // failed results in a row that quarantine a device (0: 3)
    char *curve_secret; // CURVE: own NAME.key_secret (common/auth.h); NULL: off
    char *curve_allow;  // CURVE: directory of allowed public keys
    bool insecure;      // bind beyond loopback without CURVE
    uint64_t max_report;     // bytes of one Progress report kept
    double max_report_rate;  // Progress reports kept per second per trial
    double max_node_cpus;    // a Hello offering more CPUs (or GPUs) is refused; 0: no limit
    int64_t max_node_gpus;
    char *log_level;
    char *log_format;   // text or json
    bool log_json;      // the older spelling of --log-format json
    char *metrics;      // HOST:PORT of /metrics; NULL or "": off
    bool metrics_public; // allow a non-loopback HOST
    char *http;            // HOST:PORT of the dashboard, /api/ and /metrics (--metrics: the same)
    char *http_token_file; // the bearer token HTTP requests must show; NULL: none
} coord_cfg_t;

typedef cgq_tstate_t tstate_t;
typedef cgq_jstate_t jstate_t;

typedef struct job_s job_t;
typedef struct node_s node_t;
typedef struct trial_s trial_t;
typedef struct device_s device_t;

// A growable list of ids.
typedef struct {
    uint64_t *v;
    size_t n, cap;
} ids_t;

// What one trial needs of a node.
typedef struct {
    double cpu;
    double gpu;      // 0, a share in (0,1], or an integral count > 1
    uint64_t memory;
    const json_t *on; // a device trial: the tags its device must have (the spec's); NULL: none
    uint64_t client;  // a client trial (trial.kind client): its job's id; only that job's
                      // client nodes run it, and they run nothing else. 0: not one
} req_t;

// trial_req is what t needs at its current stage.
#define TRIAL_REQ(t) (&(t)->job->req[(t)->stage])

// A trial in memory: only trials that are not terminal (and cancelled ones
// still running on a node) live here. Owned by its job (jobs.c).
struct trial_s {
    uint64_t id;       // also the key of job->trials (which points at it)
    job_t *job;
    json_t *params;    // owned
    char *params_json; // owned
    tstate_t state;
    uint32_t attempt;  // of the current or last attempt; 0 before the first. Attempts
                       // count on across stages, so (trial, attempt) names one task
    uint32_t stage;    // the stage it runs or waits for (cgq_spec_stage), 0 first
    uint32_t stage_base; // attempts used by the stages before it: this stage's
                         // attempts are stage_base+1, stage_base+2, ...
    json_t *stage_metrics; // finished stages' metrics, {"train": {...}} (owned); NULL: none
    uint32_t losses;   // consecutive node losses
    uint64_t node_hash; // of the id of the node it was last attached to (nodes_attach)
    uint64_t lost_on[JOBS_MAX_LOSSES]; // node_hash of the distinct nodes of those losses
    uint32_t nlost_on;
    node_t *node;      // while attached to a node (nodes.c)
    char *expect_node; // recovered running trial: node that should adopt it
    int *gpus;         // positions in node->gpus granted (ngpus entries)
    int ngpus;
    bool holds;        // holds resources on node (nodes.c)
    device_t *device;  // a device trial: the device it holds on node (nodes.c)
    bool queued;       // in job's pending queue
    bool has_error;    // its hash holds an error (of an earlier attempt)
    bool unwritten;    // created this turn: its first HSET (jobs_set_state) carries id, job, params
    trial_t *qnext;    // pending queue link
    trial_t *nnext, *nprev; // node's task list
    double started;
    int64_t pending_since_ms;  // when it last became pending (dispatch latency)
    int64_t adopt_deadline_ms; // recovered running trial not yet adopted
    int64_t report_ms;         // Progress rate limit (session.c): last refill
    double report_tokens;      // reports that may still be stored now
    bool report_warned;        // a dropped report of this trial was logged
    uint64_t assign_seq;       // seq of the Assign that gave it to node (0: adopted)
    // A recovered running trial: its Assign's epoch and seq, and the instance
    // of the node process it was sent to (CGQ_TF_ASSIGN; 0: unknown).
    uint64_t sent_epoch, sent_seq, sent_instance;
    uint8_t unseen_hbs;        // heartbeats since, from a node that had not seen it yet
    uint8_t resent;            // times its Assign was sent again (dispatch_resend)
    bool deferred;             // its node holds its result for us (Redis down, buffer full)
    bool stale;                // running, its node silent: counted and stored as stale (jobs.h)
    // Checkpoints (checkpoint.h): the records a next attempt may resume
    // from, newest first (a JSON array, owned; NULL: none), and how its last
    // attempt ended (CGQ_RESUME_*, 0: it did not end yet), which
    // checkpoint.resume judges.
    json_t *ckpts;
    unsigned end_resume;
    bool hb_pause; // hyperband: reached its rung's budget, pauses at its next checkpoint
    // measure: {passes: 2} (passes.c): the pass it runs or waits for (0 or 1:
    // the first), and the first pass's metrics once it succeeded (owned).
    uint32_t pass;
    char *pass1;
};

struct job_s {
    uint64_t id;
    char *name;
    cgq_spec_t *spec;
    cgq_searcher_t *searcher;
    jstate_t state;
    req_t req[CGQ_SPEC_MAX_STAGES]; // what a trial needs at each stage (one per stage)
    uint32_t nstages;       // cgq_spec_nstages of the spec
    zhashx_t *trials;       // id -> trial_t (borrowed pointers; jobs.c frees trials)
    // Pending/unschedulable trials, one FIFO per stage: qhead[0] holds new
    // and retried first stages, qhead[k] trials whose stage k-1 succeeded.
    trial_t *qhead[CGQ_SPEC_MAX_STAGES], *qtail[CGQ_SPEC_MAX_STAGES];
    uint32_t between;       // trials queued for a stage after the first (they count
                            // against search.concurrency like running ones)
    uint64_t counts[CGQ_TRIAL_NSTATES]; // of trials created so far
    uint64_t dropped;       // trials never created because the job was cancelled
    double created;         // Unix seconds of its submission
    uint32_t running;
    int64_t best_trial;     // -1: none
    double best_value;
    char *blocked;          // unschedulable reason, or NULL
    uint32_t blocked_stage; // the stage no node can run, while blocked
    double blocked_since;   // Unix seconds it became blocked (jobs_set_blocked); 0: not
    char *spec_dir;
    struct early_stop_s *stopper; // early_stop: of the spec (early_stop.h), NULL: none
    // The Pareto front of a job with several objectives (jobs.c): nfront
    // trials, their ids and objective values (nobjectives per trial, row-major).
    uint64_t *front_ids;
    double *front_vals;
    size_t nfront, capfront;
    bool dirty;             // counts/searcher changed this turn
    // The turn's changes to the active set and the leaderboard, written by
    // s_job_write as one SADD, one SREM and one ZADD for the whole turn
    // (not one command per trial); a trial created and ended in the same
    // turn touches neither set.
    ids_t act_add, act_rem;
    ids_t lb_ids;           // leaderboard: ids, and their values in lb_vals
    double *lb_vals;
    // The turn's trial.succeeded and trial.running events, not queued yet:
    // "TRIAL:ATTEMPT[@NODE] " items. Each goes out as one XADD per job
    // (cgq_keyspace_event_trials) at the turn's end, or before any other event
    // of the job, so the stream keeps the order of every job's transitions.
    cgq_buf_t ev_succeeded, ev_running;
    size_t unwritten;       // trials created this turn whose hash is not queued yet
    // `cgq pause` (control_pause): no dispatch; running trials pause at their
    // next checkpoint (JOBS_PAUSE_CHECKPOINT) or were stopped at once
    // (JOBS_PAUSE_NOW). 0: not paused. The job hash's `paused` says so.
    int paused;
    // early_stop: {algorithm: hyperband} (hyperband.h; NULL: none). hb_check:
    // a cohort may have completed (verdicts applied at the turn's end);
    // hb_dirty: its state goes to the job hash's `hyperband` then.
    struct hyperband_s *hb;
    bool hb_check, hb_dirty, hb_done;
    bool best_dirty;        // best_trial/best_value changed this turn
    uint64_t pass_held;     // measure.passes: trials waiting, unqueued, for the first
                            // pass to be dispatched (passes.c)
    bool ended;             // finished or cancelled with nothing left: freed by jobs_reap
    job_t *next;            // coordinator's job list
};

typedef struct {
    uint32_t index;
    char *name;
    double free; // capacity left, 1.0 = whole GPU
} gpu_t;

// A device of a device runner: runs one task at a time. Devices outlive
// their runner's connection (the registry c->devices owns them, nodes.c), so
// failures and quarantine hold across reconnects; Redis keeps them across
// restarts.
struct device_s {
    char *id;
    json_t *tags;       // tag -> value, JSON strings (owned)
    node_t *node;       // the runner serving it; NULL: offline
    trial_t *task;      // the trial it runs; NULL: idle
    uint32_t failures;  // failed or timed-out results in a row
    bool quarantined;
    char *last_error;   // of the last failure, or NULL
    bool loaded;        // failures and quarantine read from Redis (or known to be new)
    bool dirty;         // its hash needs an update this turn
    bool listed;        // on c->dirty_devices (nodes.c, s_device_dirty)
    device_t *dirty_next;
};

// A connected node. Owned by the registry (nodes.c).
struct node_s {
    char *id;          // routing id
    uint64_t id_hash;  // of id (FNV-1a): what trials remember of a node after it is gone
    char *hostname;
    uint32_t pid;
    double cpus, free_cpus;
    uint64_t memory, free_memory;
    gpu_t *gpus;
    int ngpus;
    bool runner;       // a device runner: runs device trials only, one per device
    uint64_t client_job; // a client node (Python study): the job whose client trials it
                         // takes, and it takes nothing else; 0: not a client
    uint32_t want;     // a client node: the tasks it wants to hold now, what it runs
                       // included (Hello.want, Heartbeat.want; at most NODES_MAX_TASKS)
    device_t **devices; // a runner's devices (borrowed from c->devices)
    int ndevices;
    int64_t last_seen_ms;
    uint64_t instance;   // the node process's Hello instance (0: not said)
    uint64_t assign_seq; // of the last Assign sent to it in this epoch
    uint64_t assign_out; // of the last of those that has left this process (outbox.c)
    bool batches;        // its Hello said it reads AssignBatch (and sends ResultBatch)
    struct out_s *ab_head, *ab_tail; // Assigns for it waiting to go as one (outbox.c)
    size_t ab_bytes;     // their encoded size, with room for each one's framing
    node_t *ab_next;     // on the send's list of nodes with waiting Assigns
    bool ab_listed;      // (on that list)
    bool draining;       // shutting down: no new tasks (a heartbeat said so)
    char *full;          // its disk is full: no new tasks for now, why (NULL: not full)
    bool stale;          // silent for --stale-after heartbeats: its tasks are stale, no new ones
    char key[41];        // CURVE key last found bound to this id ("" without CURVE)
    bool suspect;        // a key not bound to this id spoke under it: no new work until
                         // the bound key is heard again (session.c)
    trial_t *tasks;    // attached trials (nnext/nprev list)
    uint32_t ntasks;
    bool dirty;        // node hash needs an update this turn (nodes_dirty sets it)
    bool listed;       // on c->dirty_nodes: a turn's writes visit only those
    node_t *dirty_next;
    struct coord_s *coord;   // the registry it belongs to
    int64_t seen_written_ms; // when its hash last went to Redis (last_seen with it)
    node_t *next;
};

// An outgoing message that waits until the Redis batch it depends on is
// flushed (outbox.c).
typedef struct out_s {
    void *sock;
    char *rid;
    size_t rid_len;
    bool delim;
    uint8_t *data;
    size_t len;
    bool durable;           // send only once the batch it confirms is durable (Acks)
    uint64_t assign_seq;    // an Assign: its seq (the node's assign_out when sent)
    // An Ack still open to more tasks (outbox_ack): encoded by outbox_send.
    Cgq__TaskRef *acks;
    size_t nacks, capacks;
    int64_t not_before_ms;  // for those: when that is
    uint64_t batch_seq;     // and the batch (cgq_store_applied_seq) replicas must confirm
    struct out_s *next;
} out_t;

typedef struct coord_s {
    coord_cfg_t cfg;
    void *zctx;
    void *nodes_sock;
    void *ctl_sock;
    char nodes_ep[256];
    char ctl_ep[256];
    cgq_store_t *store;
    cgq_auth_t *auth;      // CURVE and its ZAP handler (main.c); NULL: off
    uint64_t epoch;
    uint64_t max_job_id;    // highest job id handed out or read (control.c): never again
    uint64_t replays_seen;  // cgq_store_replayed when cgq:seq:job was last raised (loop.c)
    char lease[256];        // our cgq:leader value; "" when not leading under a lease
    int64_t next_lease_ms;  // when to renew it
    // By this process's own clock, until when the lease is surely ours: the
    // start of the last acquire or renewal that succeeded plus its time to
    // live. Past it (Redis unreachable for longer than the lease) a standby
    // may lead: the nodes' messages are dropped unanswered, so they go to
    // the next coordinator of their list, until a renewal says which it is.
    int64_t lease_valid_ms;
    bool lease_doubt_said;       // nodes are not answered (s_lease_in_doubt)
    int64_t lease_doubt_since_ms; // since when: credited to the nodes after
    bool lease_lost;        // another coordinator took over: stop, write nothing
    bool buffer_full;       // Redis down and --max-buffer reached (logged once per outage)
    uint64_t stat_deferred; // results left with their nodes meanwhile
    job_t *jobs;           // in id order
    job_t *rr;             // round-robin cursor (next job to serve first)
    node_t *nodes;         // registry, in join order (newest first)
    zhashx_t *node_index;  // id -> node_t (borrowed)
    node_t *dirty_nodes;   // nodes whose hash may need writing (nodes_dirty)
    device_t *dirty_devices; // devices whose hash may need writing (nodes.c)
    zhashx_t *devices;     // id -> device_t (owned; nodes.c creates it with the first device)
    node_t *node_rr;       // next node to try first
    out_t *out_head, *out_tail;
    out_t *late_head, *late_tail; // sent, flushed, waiting to be durable (outbox.c)
    int64_t confirm_next_ms;      // next empty batch whose WAIT confirms held Acks (outbox.c)
    zhashx_t *acks_open;   // node id -> its Ack of this batch, open to more (outbox.c)
    out_t *out_sealed;     // the last message the batch in flight covers (outbox_seal)
    // For the unit tests: called with each message the outbox has just sent,
    // in the order sent (NULL in the daemon).
    void (*on_sent) (struct coord_s *c, const out_t *o);
    bool async_flush;      // coord_run: batches go out without waiting (loop.c)
    int64_t flight_us;     // when the batch in flight went out
    bool sched_dirty;
    int64_t redis_retry_ms;  // next flush attempt after a failure; 0 = none
    char redis_why[512];     // why that batch failed (a later reconnect resets the store's errstr)
    int64_t redis_backoff_ms;
    bool redis_probe_said;   // the non-blocking probe's wait was logged once (loop.c)
    int64_t next_liveness_ms;
    int64_t next_stats_ms;
    int64_t next_fd_check_ms, fd_warned_ms; // loop.c, s_check_open_files
    int64_t adopt_deadline_ms; // earliest recovered-trial adoption deadline, 0 = none
    // Nodes last seen alive by the coordinator before us (recovery.c): told
    // at once that we do not know them, so they say Hello without waiting
    // for their next heartbeat (session_poke).
    char **poke;
    size_t npoke;
    int64_t next_poke_ms, poke_until_ms;
    // Nodes expected back: alive before a restart (recovery.c) or lost in
    // this run (session.c), id -> until when (ms, a boxed int64_t). What they
    // send before their Hello (reports and results queued across the
    // reconnect) is dropped quietly, not counted as rejected: the node
    // resends its results after its Hello. A stranger's is rejected.
    // Values are the expiry itself, cast: (void *) (intptr_t) ms.
    zhashx_t *returning;
    int64_t returning_prune_ms;
#define RETURNING_MS(c) ((c)->cfg.dead_after * (c)->cfg.heartbeat_ms * 4 + 60000)
    uint64_t stat_results, stat_assigns;
    const char *result_from; // the node whose Result jobs_result is applying (session.c)
    uint64_t stat_rejected, stat_reports_dropped; // hostile or over a limit (session.c)
    uint64_t stat_refused_ids; // messages whose CURVE key may not claim their node id
    // The message being handled (loop.c sets them, NULL outside): its CURVE
    // key ("User-Id", set by the ZAP handler) and the peer's address.
    const char *peer_key, *peer_addr;
    int64_t reject_log_s;   // session.c: rate limit of rejection lines (this second,
    unsigned reject_log_n;  // lines in it)
    int64_t last_tick_ms;  // loop.c: last checkpoint of the loop's own time
    int64_t stall_ms;      // time the loop was not listening, not yet credited to nodes
    uint64_t stat_heartbeats;  // node heartbeats handled, a client's asks not counted (session.c)
    int64_t quiet_turn_ms;     // loop.c: when the last turn of heartbeats only ended
    int64_t hold_nodes_ms;     // loop.c: the node socket is read again from then
    // Observability (metrics.c): the HTTP server, the histograms, and the
    // trials that reached each terminal state in this process's lifetime.
    struct metrics_srv_s *metrics;
    struct notify_s *notify;      // notify.c: job-end POSTs; NULL until the first
    hist_t hist_dispatch; // pending -> Assign, seconds
    hist_t hist_redis;    // one Redis batch flush, seconds
    uint64_t stat_ended[CGQ_TRIAL_NSTATES];
    uint64_t lease_holder_epoch;  // standby: the epoch of the leader it waits on
    bool standby;                 // waiting for the lease (main.c)
} coord_t;

#endif
