// nodes: the node registry. Owns every node_t: lookup by id, the resources
// each node offers and has free, and the ledger of what each attached trial
// holds. Granting and releasing are the two halves of that ledger and both
// live here, with the one GPU-share rule and the one device rule: a device
// runner's devices each run one device trial at a time, a device trial goes
// only to a device whose tags include all of its on:, and workers run no
// device trials nor runners command trials. It also owns every device_t and
// its quarantine. It knows trials only as holders of resources: it never
// changes a trial's state (jobs.c does).
#ifndef CGQ_NODES_H
#define CGQ_NODES_H

#include "coord.h"

// Most tasks one node runs, whatever the trials ask for: trials that ask for
// nothing (cpu: 0) would otherwise fit without end.
#define NODES_MAX_TASKS 1024

node_t *nodes_find (coord_t *c, const char *id);
// nodes_add registers a new node with no resources (nodes_declare sets them).
node_t *nodes_add (coord_t *c, const char *id);

// nodes_declare sets what n offers, from its Hello (kind: worker or device
// runner), and recomputes its free resources from the trials still attached
// (their GPU positions and devices are kept when still valid). A device that
// another connected runner already serves is left out, with a warning.
// Returns how many attached trials no longer fit.
int nodes_declare (coord_t *c, node_t *n, const char *hostname, uint32_t pid,
                   Cgq__NodeKind kind, const Cgq__Resources *res);

// nodes_client makes n a client node of job (0: not a client) that wants
// to hold want tasks (clamped to NODES_MAX_TASKS); a change that may make
// room marks the schedule dirty. Called after nodes_declare, with each
// Hello and each client Heartbeat.
void nodes_client (coord_t *c, node_t *n, uint64_t job, uint32_t want);

// nodes_remove marks n dead or gone in Redis (state "dead" or "gone"), logs
// why, and frees it. n must have no attached trials left (the caller has
// handed them back to their jobs first).
void nodes_remove (coord_t *c, node_t *n, const char *state, const char *why);
void nodes_destroy_all (coord_t *c);

// The GPU-share rule: a request of gpu <= 1 takes that share of one GPU; an
// integral request > 1 takes that many whole GPUs.
double nodes_gpu_share (const req_t *r); // what each granted GPU gives up
int nodes_gpu_count (const req_t *r);    // how many GPUs are granted

// Whether r fits n's free resources now, and whether it could ever fit n.
bool nodes_fits_free (const node_t *n, const req_t *r);
bool nodes_fits_total (const node_t *n, const req_t *r);

// nodes_attach puts t on n's task list (t->node = n) without resources.
void nodes_attach (node_t *n, trial_t *t);
// nodes_grant takes t's request (t->job->req) from n's free resources,
// picking GPUs unless t already holds positions (a re-grant). t must be
// attached to n. The grant is recorded even when it over-commits n; then it
// returns -1 (the caller logs why), else 0.
int nodes_grant (node_t *n, trial_t *t);
// nodes_release gives back what t holds and detaches it from its node. A
// trial on no node is left alone.
void nodes_release (coord_t *c, trial_t *t);
// nodes_gpus_from_indices turns the GPU indices a recovered trial was given
// (t->gpus) into positions on n (-1 for a GPU n no longer has).
void nodes_gpus_from_indices (const node_t *n, trial_t *t);

// --- devices ---------------------------------------------------------------
// nodes_device_find returns the device id: one a runner declared since
// start-up, else the one Redis remembers (read once, synchronously: never
// call it while pipelined replies are pending); NULL when neither knows it.
device_t *nodes_device_find (coord_t *c, const char *id);
// nodes_device_ref returns the registry's entry for id, creating it without
// reading Redis (nodes_device_find does that when a runner declares it): for
// recovery, to remember which device a running trial holds.
device_t *nodes_device_ref (coord_t *c, const char *id);

// nodes_device_result counts the outcome of t's attempt on its device (call
// it before the release): a success clears the device's failures; a failure
// or timeout adds one, and the quarantine-after-th in a row quarantines it
// (no trial goes there until nodes_device_enable). Stops and losses count
// neither way. A trial without a device is left alone.
void nodes_device_result (coord_t *c, trial_t *t, Cgq__TaskStatus status, const char *error);

// nodes_device_enable returns device id to service (failures 0). Returns 0
// (msg says whether it was quarantined), or -1 for an unknown device.
int nodes_device_enable (coord_t *c, const char *id, char *msg, size_t msglen);
// nodes_device_recovered: runner n says its device id passed its check again
// (Heartbeat.recovered): enabled as by nodes_device_enable when it is n's and
// quarantined; ignored otherwise.
void nodes_device_recovered (coord_t *c, const node_t *n, const char *id);

// nodes_device_state is "idle", "busy", "quarantined" or "offline".
const char *nodes_device_state (const device_t *d);

// nodes_devices_describe appends to b the connected devices, up to max of
// them, as "board-1 (device=tizen), board-2 (device=odroid-xu4, quarantined)",
// or "none" (for blocked reasons).
void nodes_devices_describe (const coord_t *c, cgq_buf_t *b, int max);

// nodes_dirty marks n's hash for writing at the end of the turn
// (nodes_write_dirty visits only the nodes so marked, not the registry).
void nodes_dirty (node_t *n);

// nodes_write queues n's hash: with full, everything it declared (a join),
// else its free resources and running count.
void nodes_write (coord_t *c, node_t *n, bool full);
// nodes_write_dirty queues the hashes of nodes and devices that changed.
// A heartbeat changes nothing in a node's hash but last_seen, which is
// written coarsely (session_liveness, SESSION_SEEN_WRITE_MS).
void nodes_write_dirty (coord_t *c);

// nodes_capacity: the largest offer of any connected worker, for messages
// (device runners run no command trials, so they count as no capacity).
typedef struct {
    int nodes;
    double max_cpu;
    int max_gpu;
    uint64_t max_memory;
} nodes_capacity_t;
void nodes_capacity (const coord_t *c, nodes_capacity_t *cap);

#endif
