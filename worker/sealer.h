// sealer: the worker's checkpoint thread. Sealing a checkpoint (a copy of
// gigabytes, fsyncs) and restoring one would stop the worker's loop, and
// with it its heartbeats, for as long as they take; so the loop hands them
// to this one thread (ckpt.h does the work) and reads what is done from a
// pipe it polls. Jobs run in the order pushed, one at a time.
#ifndef CGQ_SEALER_H
#define CGQ_SEALER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cgq.pb-c.h"
#include "ckpt.h"

typedef enum {
    CGQ_SEAL,    // src -> checkpoint n of the task in trial_store
    CGQ_RESTORE, // the first of cands that passes its check -> dst
    CGQ_PRUNE,   // trial_store: older than ckpt-A-N and not in keep
    CGQ_REMOVE,  // src, whatever it is (a staging directory, a refused checkpoint)
} cgq_seal_kind_t;

// One restore candidate: a recorded checkpoint (Assign.resume).
typedef struct {
    char *path, *sha256, *step_json, *host; // owned
    uint32_t attempt;
    uint64_t n;
} cgq_seal_cand_t;

// A job and, once done, its outcome. All strings owned (cgq_seal_job_free).
typedef struct cgq_seal_job_s {
    cgq_seal_kind_t kind;
    Cgq__TaskRef ref;   // the task it is for (no pointers)
    char *src;          // SEAL, REMOVE
    char *trial_store;  // SEAL, PRUNE
    uint64_t n;         // SEAL, PRUNE (with ref.attempt)
    char *step_json;    // SEAL: the announcement's step
    cgq_seal_cand_t *cands; // RESTORE, newest first
    size_t ncands;
    char *dst;          // RESTORE
    char **keep;        // PRUNE
    size_t nkeep;
    char **extra;       // PRUNE: checkpoints (paths) to delete as well
    size_t nextra;
    bool cancelled;     // SEAL: dropped (cgq_sealer_cancel)
    // Outcome: rc 0 or -1 with err; SEAL: info; RESTORE: used (index into
    // cands, -1: none passed) and notes ("\n"-separated lines for the
    // trial's log: why a candidate was not used); PRUNE: removed.
    int rc;
    char err[1024];
    cgq_ckpt_info_t info;
    int used;
    char *notes;
    size_t removed;
    struct cgq_seal_job_s *next;
} cgq_seal_job_t;

typedef struct cgq_sealer_t cgq_sealer_t;

cgq_seal_job_t *cgq_seal_job_new (cgq_seal_kind_t kind, const Cgq__TaskRef *ref);
void cgq_seal_job_free (cgq_seal_job_t **job_p);

// cgq_sealer_new makes the pipe; the thread starts with the first push.
// Returns NULL (after logging why) if the pipe cannot be made.
cgq_sealer_t *cgq_sealer_new (void);

// cgq_sealer_destroy makes a job in progress stop soon (cgq_ckpt_abort:
// what it wrote is removed, a .tmp at worst), waits for the thread, and frees
// the jobs not taken. NULL-safe; sets *self_p = NULL.
void cgq_sealer_destroy (cgq_sealer_t **self_p);

// cgq_sealer_push queues job (takes it). A thread that cannot be started
// does the job at once, here.
void cgq_sealer_push (cgq_sealer_t *self, cgq_seal_job_t *job);

// cgq_sealer_cancel makes ref's SEAL jobs still queued fail at once (their
// directories removed, err says why) instead of running: an earlier seal of
// that task failed.
void cgq_sealer_cancel (cgq_sealer_t *self, const Cgq__TaskRef *ref);

// The fd to poll for reading: readable while done jobs wait.
int cgq_sealer_fd (const cgq_sealer_t *self);

// cgq_sealer_take returns one done job (caller frees), or NULL.
cgq_seal_job_t *cgq_sealer_take (cgq_sealer_t *self);

// cgq_sealer_run_job does job here, on the calling thread (tests, and a
// sealer whose thread could not start).
void cgq_sealer_run_job (cgq_seal_job_t *job);

#endif
