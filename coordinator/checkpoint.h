// checkpoint: a trial's checkpoint records as pure decisions, no I/O, like
// early_stop.c: whether a node's Checkpoint becomes the trial's latest, the
// list it then may resume from, and what an Assign restores. jobs.c
// persists what is decided (the trial hash's checkpoint and checkpoints,
// the job's checkpoint_bytes), dispatch.c puts the list into the Assign.
// See docs/architecture.md, "Checkpoints".
#ifndef CGQ_CHECKPOINT_H
#define CGQ_CHECKPOINT_H

#include "coord.h"

typedef struct {
    bool record;     // the checkpoint is in the trial's list now (acked as recorded)
    bool changed;    // ... and the list changed: write it (a re-sent one changes nothing)
    char why[192];   // not recorded: why
    json_t *list;    // changed: the new list, newest first, at most keep (new reference)
    json_t *latest;  // changed: the new record (borrowed from list)
    int64_t bytes;   // changed: how the job's checkpoint bytes change
} checkpoint_decision_t;

// checkpoint_decide judges checkpoint m of trial t (NULL: not in memory, a
// terminal or unknown trial) from node `node` at wall time now. Recorded
// only for t's current attempt of its current stage while it runs, and
// only if newer than its latest: a stale attempt's (a partitioned worker,
// an attempt given up on) is refused. A malformed message is refused.
void checkpoint_decide (const trial_t *t, uint32_t keep, const Cgq__Checkpoint *m,
                        const char *node, double now, checkpoint_decision_t *d);
void checkpoint_decision_fini (checkpoint_decision_t *d);

// checkpoint_names gives the names (ckpt-A-N) of list's records (array and
// names: caller frees each and the array); returns how many.
size_t checkpoint_names (const json_t *list, char ***names);

// checkpoint_bytes is the size of list's records together.
int64_t checkpoint_bytes (const json_t *list);

// checkpoint_required is true when list's newest record is another trial's
// (a PBT child's donor's, marked "donor"): the Assign must resume from it
// (Assign.resume_required), never start afresh.
bool checkpoint_required (const json_t *list);

// checkpoint_resume builds what an Assign of stage restores from list: its
// records of that stage, newest first, as Checkpoints (all owned; free with
// checkpoint_resume_free). Returns how many (0: a fresh start).
size_t checkpoint_resume (const json_t *list, uint32_t stage, Cgq__Checkpoint ***out);
void checkpoint_resume_free (Cgq__Checkpoint **v, size_t n);

// checkpoint_list_parse reads a trial hash's checkpoints field (a JSON
// array, as jobs.c writes it) for recovery; NULL when absent, empty or not
// an array.
json_t *checkpoint_list_parse (const char *text);

#endif
