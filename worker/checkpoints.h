// checkpoints: what the worker does with its trials' checkpoints
// (docs/architecture.md, "Checkpoints"). An announcement on fd 3 hands the
// trial's CGQ_CHECKPOINT_DIR over (renamed away, a fresh empty one in its
// place) to be sealed into the store on the sealer thread (sealer.h); a
// sealed one goes to the coordinator as a Checkpoint, sent again until a
// CheckpointAck names it; an ack lets the older ones of the trial go (its
// keep list). A task's result waits until its seals are done, so that the
// coordinator hears of its last checkpoint before its end. An Assign that
// resumes waits here while its checkpoint is restored and checked, then
// starts (cgq_checkpoints_start_fn).
//
// The loop's side only: it never blocks on the store.
#ifndef CGQ_CHECKPOINTS_H
#define CGQ_CHECKPOINTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cgq.pb-c.h"
#include "link.h"
#include "task.h"

typedef struct cgq_checkpoints_t cgq_checkpoints_t;

// Starts an assigned task whose checkpoint has been restored into
// `restored` (a directory to move into place; NULL: none passed its check,
// or the Assign named none), announced at resume_json (NULL: a fresh
// start); notes are lines for the trial's log (NULL: none). All borrowed for
// the call.
typedef void (cgq_checkpoints_start_fn) (void *arg, const Cgq__Assign *assign,
                                         const char *restored, const char *resume_json,
                                         const char *notes);

typedef struct {
    const char *workdir;  // absolute; staging directories go in WORKDIR/.cgq-ckpt-PID
    const char *store;    // absolute: the store when an Assign names none
    const char *host;     // this host's name, said in each Checkpoint
    int64_t kill_grace_ms; // a task whose checkpoint cannot be sealed is stopped with this grace
    cgq_link_t *link;     // borrowed for the object's lifetime
    cgq_checkpoints_start_fn *start;
    void *arg;
} cgq_checkpoints_opts_t;

// cgq_checkpoints_new removes what dead workers left in their staging
// directories and makes this one's. opts is copied (its strings too).
// Returns NULL (after logging why) when the staging directory or the
// sealer's pipe cannot be made.
cgq_checkpoints_t *cgq_checkpoints_new (const cgq_checkpoints_opts_t *opts);

// cgq_checkpoints_destroy stops the sealer (a seal in progress is dropped:
// a .tmp at worst, never used) and removes the staging directory.
// NULL-safe; sets *self_p = NULL.
void cgq_checkpoints_destroy (cgq_checkpoints_t **self_p);

// cgq_checkpoints_restore takes an Assign that names checkpoints to resume
// from (resume): it is started, through opts.start, once the first of them
// that passes its check is restored. Until then it is listed by
// cgq_checkpoints_starting. assign is copied.
void cgq_checkpoints_restore (cgq_checkpoints_t *self, const Cgq__Assign *assign);

// cgq_checkpoints_starting lists the tasks waiting for their restore (array
// and refs borrowed until the next call into this object); returns how many.
size_t cgq_checkpoints_starting (cgq_checkpoints_t *self, const Cgq__TaskRef ***refs);

// cgq_checkpoints_stop stops a task waiting for its restore: it is not
// started, and its result is TASK_STOPPED. false: not one of those.
bool cgq_checkpoints_stop (cgq_checkpoints_t *self, const Cgq__TaskRef *ref, const char *reason);

// cgq_checkpoints_started: task (borrowed until cgq_checkpoints_ended)
// runs; its checkpoints go into store (NULL or "": opts.store).
void cgq_checkpoints_started (cgq_checkpoints_t *self, cgq_task_t *task, const char *store);

// cgq_checkpoints_inherited: the started task's Assign offered these
// checkpoints of earlier attempts (Assign.resume). In an HTTP store, which
// cannot be listed, they are deleted with the task's own older ones once
// the coordinator no longer names them (a directory store is listed).
void cgq_checkpoints_inherited (cgq_checkpoints_t *self, const cgq_task_t *task,
                                Cgq__Checkpoint *const *resume, size_t n);

// cgq_checkpoints_announce: task's trial announced a checkpoint (task.h,
// cgq_task_checkpoint_fn).
void cgq_checkpoints_announce (cgq_checkpoints_t *self, cgq_task_t *task, const char *step_json,
                               uint64_t line);

// cgq_checkpoints_sealing: a checkpoint of task is still being sealed (its
// result waits).
bool cgq_checkpoints_sealing (const cgq_checkpoints_t *self, const cgq_task_t *task);

// cgq_checkpoints_ended: task is gone (its result handed over or dropped).
void cgq_checkpoints_ended (cgq_checkpoints_t *self, const cgq_task_t *task);

// cgq_checkpoints_ack handles a CheckpointAck.
void cgq_checkpoints_ack (cgq_checkpoints_t *self, const Cgq__CheckpointAck *ack);

// The sealer's fd to poll (readable: work is done), and what to do then.
int cgq_checkpoints_fd (const cgq_checkpoints_t *self);
void cgq_checkpoints_on_readable (cgq_checkpoints_t *self);

// cgq_checkpoints_tick sends again what is unacked; _deadline is when it
// next has something to do (-1: nothing).
void cgq_checkpoints_tick (cgq_checkpoints_t *self, int64_t now_ms);
int64_t cgq_checkpoints_deadline (const cgq_checkpoints_t *self);

// cgq_checkpoints_unsettled: how many Checkpoints still wait for their ack,
// plus the prunes and removals acks asked for that the sealer has not done
// yet. The worker's shutdown waits (bounded) until it is 0, so that a fast
// trial's last acks, which come after its task ended, still prune.
size_t cgq_checkpoints_unsettled (const cgq_checkpoints_t *self);

// Shutdown: tasks waiting for their restore are dropped (their results
// too, as the worker's running tasks' are). Returns how many.
size_t cgq_checkpoints_drop_starting (cgq_checkpoints_t *self);

#endif
