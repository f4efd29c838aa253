// spare: trial directories made ahead of the assignments that will use them.
//
// Making a trial's directory the plain way is three mkdirs (job-J, trial-T,
// attempt-A) and two files (stdout.log, stderr.log): five new inodes, about
// 0.6 ms each on the development VM's ext4 and most of a trial's start
// (docs/performance.md, *Trial launch*). A rename costs ~20 us. So a thread
// of this module keeps a few spare chains
// WORKDIR/.cgq-spare-PID/N/trial-0/attempt-1 with both logs open in
// attempt-1/ (and its empty checkpoint/, the trial's CGQ_CHECKPOINT_DIR),
// and a trial start renames one into place: N becomes job-J (if
// new), trial-0 becomes trial-T (if new, and T is not 0), attempt-1 the
// attempt directory (if A is not 1). A new job's first trial 0, attempt 1,
// is one rename.
//
// Not part of the contract: whatever goes wrong, cgq_spare_take returns -1
// and the caller makes the directory the plain way.
#ifndef CGQ_SPARE_H
#define CGQ_SPARE_H

#include <stddef.h>

typedef struct cgq_spare_t cgq_spare_t;

// cgq_spare_new removes what dead workers' pools left in workdir (absolute),
// and starts the thread that keeps `keep` spares ready (1 to 64). Returns
// NULL (and logs why) when the thread cannot be started.
cgq_spare_t *cgq_spare_new (const char *workdir, size_t keep);

// cgq_spare_destroy stops the thread, closes the spares' logs and removes
// this pool's directory. NULL-safe; sets *self_p = NULL.
void cgq_spare_destroy (cgq_spare_t **self_p);

// cgq_spare_take makes dir (WORKDIR/X/Y/Z: exactly three levels below the
// workdir, the last one new) out of a ready spare, Z private (0700), X and Y
// as cgq_mkdir_p would make them (0755), and hands over its two log files,
// empty, opened O_WRONLY|O_CLOEXEC (caller closes). Returns 0, or -1 when
// no spare is ready or dir cannot be had by renames (it exists already, a
// level is not a directory, dir has another shape); the caller then makes
// dir the plain way. (Only a rename that fails half-way, which no case above
// does, could leave an empty directory "trial-0" or "attempt-1" inside X or
// Y; no trial ran there.)
int cgq_spare_take (cgq_spare_t *self, const char *dir, int *out_fd, int *err_fd);

// cgq_spare_refill has the thread make what cgq_spare_take took again. The
// caller says when: once the trial it started runs (cgq_task_start), so
// that the new inodes' work does not compete with the start for the CPUs
// (idle dispatch p50 -0.13 ms, its p99 from 4-5.6 to 1.6 ms on the
// development VM). NULL-safe.
void cgq_spare_refill (cgq_spare_t *self);

// How many spares are ready now (tests).
size_t cgq_spare_ready (cgq_spare_t *self);

#endif
