// coord: the coordinator's one struct and the names its files share.
// main.c (flags, signals), coord.c (loop, sockets, outbox, nodes, control),
// jobs.c (job and trial state machine, results, recovery), scheduler.c
// (resource matching, fair dispatch), map.c (u64 -> pointer table).
#ifndef CGQ_COORD_H
#define CGQ_COORD_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "searcher.h"
#include "spec.h"
#include "store.h"
#include "util.h"
#include "wire.h"

typedef struct {
    char *redis;
    char *bind;
    char *control;
    int64_t heartbeat_ms;
    int64_t dead_after; // heartbeats
    uint64_t max_frame;
    int64_t max_trials; // per job
    uint64_t max_spec;  // bytes
    char *log_level;
    bool log_json;
} coord_cfg_t;

// --- u64 map (open addressing; values are borrowed pointers) -------------
typedef struct {
    uint64_t *keys;
    void **vals;   // NULL: empty slot; MAP_TOMB: deleted
    size_t cap;    // power of two
    size_t len;
    size_t used;   // len + tombstones
} map_t;

void map_init (map_t *m);
void map_fini (map_t *m);
void *map_get (const map_t *m, uint64_t key);
void map_put (map_t *m, uint64_t key, void *val);
void *map_del (map_t *m, uint64_t key);
// map_next iterates: start with *pos = 0; returns NULL at the end.
void *map_next (const map_t *m, size_t *pos, uint64_t *key);

// --- states ---------------------------------------------------------------
typedef enum {
    T_PENDING,
    T_RUNNING,
    T_SUCCEEDED,
    T_FAILED,
    T_STOPPED,
    T_CANCELLED,
    T_UNSCHEDULABLE,
    T_NSTATES
} tstate_t;

extern const char *const tstate_names[T_NSTATES];

typedef enum { J_RUNNING, J_FINISHED, J_CANCELLED } jstate_t;
extern const char *const jstate_names[3];

typedef struct job_s job_t;
typedef struct node_s node_t;
typedef struct trial_s trial_t;

// What one trial needs of a node.
typedef struct {
    double cpu;
    double gpu;      // 0, a share in (0,1], or an integral count > 1
    uint64_t memory;
} req_t;

struct trial_s {
    uint64_t id;
    job_t *job;
    json_t *params;   // owned
    char *params_json;
    tstate_t state;
    uint32_t attempt;  // of the current or last attempt; 0 before the first
    uint32_t losses;   // consecutive node losses
    node_t *node;      // while it holds resources on a node
    char *expect_node; // recovered running trial: node that should adopt it
    int *gpus;         // positions in node->gpus granted (ngpus entries)
    int ngpus;
    bool holds;        // holds resources on node
    bool queued;       // in job's pending queue
    bool has_error;    // its hash holds an error (of an earlier attempt)
    trial_t *qnext;    // pending queue link
    trial_t *nnext, *nprev; // node's task list
    double started;
    int64_t adopt_deadline_ms; // recovered running trial not yet adopted
};

struct job_s {
    uint64_t id;
    char *name;
    cgq_spec_t *spec;
    cgq_searcher_t *searcher;
    jstate_t state;
    req_t req;
    map_t trials;           // active (non-terminal, or cancelled but still on a node)
    trial_t *qhead, *qtail; // pending/unschedulable trials, FIFO
    uint64_t counts[T_NSTATES];
    uint32_t running;
    int64_t best_trial;     // -1: none
    double best_value;
    char *blocked;          // unschedulable reason, or NULL
    char *spec_dir;
    bool dirty;             // counts/searcher changed this turn
    job_t *next;            // coordinator's job list
};

typedef struct {
    uint32_t index;
    char *name;
    double free; // capacity left, 1.0 = whole GPU
} gpu_t;

struct node_s {
    char *id;          // routing id
    char *hostname;
    uint32_t pid;
    double cpus, free_cpus;
    uint64_t memory, free_memory;
    gpu_t *gpus;
    int ngpus;
    int64_t last_seen_ms;
    trial_t *tasks;    // running tasks (nnext/nprev list)
    uint32_t ntasks;
    bool dirty;        // node hash needs an update this turn
    node_t *next;
};

// An outgoing message that waits until the Redis batch it depends on is flushed.
typedef struct out_s {
    void *sock;
    char *rid;
    size_t rid_len;
    bool delim;
    uint8_t *data;
    size_t len;
    struct out_s *next;
} out_t;

typedef struct {
    coord_cfg_t cfg;
    void *zctx;
    void *nodes_sock;
    void *ctl_sock;
    char nodes_ep[256];
    char ctl_ep[256];
    cgq_store_t *store;
    uint64_t epoch;
    job_t *jobs;           // in id order
    job_t *rr;             // round-robin cursor (next job to serve first)
    node_t *nodes;
    node_t *node_rr;       // next node to try first
    out_t *out_head, *out_tail;
    bool sched_dirty;
    int64_t redis_retry_ms;  // next flush attempt after a failure; 0 = none
    int64_t redis_backoff_ms;
    int64_t next_liveness_ms;
    int64_t next_stats_ms;
    int64_t adopt_deadline_ms; // earliest recovered-trial adoption deadline, 0 = none
    uint64_t stat_results, stat_assigns;
} coord_t;

// coord.c
int coord_run (coord_t *c);
void coord_send (coord_t *c, void *sock, const char *rid, size_t rid_len, bool delim,
                 cgq_env_t *env); // queued until after the flush
// coord_stop_task queues a Stop of task for node rid.
void coord_stop_task (coord_t *c, const char *rid, const Cgq__TaskRef *task, const char *reason);
// coord_reply answers a CLI request: with now, at once (an error that
// changed nothing), else after this turn's flush like every other message.
void coord_reply (coord_t *c, const char *rid, size_t rid_len, int code, const char *msg,
                  bool now);
void coord_event (coord_t *c, const char *type, uint64_t job, int64_t trial, const char *node,
                  uint32_t attempt, const char *detail);
node_t *coord_node (coord_t *c, const char *id);
// coord_node_attach puts t on n's task list (t->node = n); resources are
// granted separately (sched_grant). coord_node_release undoes both.
void coord_node_attach (node_t *n, trial_t *t);
void coord_node_release (coord_t *c, trial_t *t);
void coord_node_write (coord_t *c, node_t *n);

// jobs.c
int jobs_recover (coord_t *c);
job_t *jobs_find (coord_t *c, uint64_t id);
void jobs_submit (coord_t *c, const char *rid, size_t rid_len, const Cgq__SubmitJob *m);
void jobs_cancel (coord_t *c, const char *rid, size_t rid_len, uint64_t id);
void jobs_result (coord_t *c, node_t *n, const Cgq__Result *r, bool *ack);
void jobs_progress (coord_t *c, node_t *n, const Cgq__Progress *p);
void jobs_lost (coord_t *c, trial_t *t, const char *why);
void jobs_adopt_check (coord_t *c, int64_t now);
void jobs_destroy_all (coord_t *c);
trial_t *jobs_trial (coord_t *c, uint64_t job, uint64_t trial);
void trial_set_state (coord_t *c, trial_t *t, tstate_t s);
// trial_set_state_kv also sets nkv/2 field-value pairs of the trial hash in
// the same HSET (the values are borrowed for the call). Setting "error"
// marks the trial as holding one (has_error).
void trial_set_state_kv (coord_t *c, trial_t *t, tstate_t s, const char **kv, int nkv);
trial_t *trial_create (coord_t *c, job_t *j);
void job_enqueue (job_t *j, trial_t *t, bool front);
trial_t *job_dequeue (job_t *j);
void job_unqueue (job_t *j, trial_t *t); // removes t from j's queue wherever it is
void job_check_done (coord_t *c, job_t *j);
void jobs_write_dirty (coord_t *c); // once per turn, before the flush
void job_set_blocked (coord_t *c, job_t *j, const char *reason);

// scheduler.c
void sched_run (coord_t *c);
bool sched_fits_free (const node_t *n, const req_t *r);
bool sched_fits_total (const node_t *n, const req_t *r);
int sched_grant (coord_t *c, node_t *n, trial_t *t);
void sched_dispatch (coord_t *c, node_t *n, trial_t *t);

#endif
