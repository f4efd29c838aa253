// ckpt: the checkpoint store, on a file system or over HTTP(S) (its
// transport: common/ckpt_store.h) — a trial's checkpoint sealed into
// STORE/job-J/trial-T/ckpt-A-N, its manifest and sha256, the check and copy
// back when an attempt resumes, and the pruning of old ones. See
// docs/architecture.md, "Checkpoints".
//
// A sealed checkpoint is a directory:
//
//   ckpt-A-N/manifest    "cgq-checkpoint 1\n", then "SHA256 SIZE PATH\n" per
//                        file, sorted by PATH (bytes), PATH relative
//   ckpt-A-N/files/...   the files, as the trial left them
//
// and its sha256 is the manifest's. It is written as ckpt-A-N.tmp, every
// file and directory fsynced, then renamed: a crash mid-seal leaves a .tmp,
// which nothing reads, never a half ckpt-A-N. `latest` (a symbolic link to
// the newest sealed by any attempt) is for people: cgq reads the trial's
// record in Redis, which names the checkpoint and its sha256.
//
// Plain blocking file I/O, thread-safe (no state): the worker calls it on
// its sealer thread (sealer.h), never in its loop.
#ifndef CGQ_CKPT_H
#define CGQ_CKPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

// What a seal produced.
typedef struct {
    uint64_t size;   // bytes of the files
    uint64_t files;  // number of files
    char sha256[65]; // of the manifest, lowercase hex
    char *path;      // the sealed directory, absolute (owned)
    char *note;      // what was left out (links, sockets, odd names), or NULL (owned)
} cgq_ckpt_info_t;

void cgq_ckpt_info_fini (cgq_ckpt_info_t *info);

// cgq_ckpt_abort, when it points at a flag that becomes true, makes a seal
// or restore in progress stop soon with an error (the worker shuts down).
// Set once before any thread runs; NULL: never.
extern volatile const bool *cgq_ckpt_abort;

// cgq_ckpt_trial_store is STORE/job-J/trial-T. Caller frees.
char *cgq_ckpt_trial_store (const char *store, uint64_t job, uint64_t trial);

// cgq_ckpt_name writes "ckpt-A-N" into buf (at least 48 bytes); returns buf.
char *cgq_ckpt_name (char *buf, uint32_t attempt, uint64_t n);

// cgq_ckpt_parse_name reads "ckpt-A-N" (exactly; not a .tmp). false if not one.
bool cgq_ckpt_parse_name (const char *name, uint32_t *attempt, uint64_t *n);

// cgq_ckpt_manifest hashes every regular file below dir into out (the
// manifest text, as above). Links, sockets and the like, and names holding a
// newline, are left out and said in *note (caller frees; NULL when none).
// Files are fsynced when sync. Returns 0, or -1 with err set.
int cgq_ckpt_manifest (const char *dir, bool sync, cgq_buf_t *out, uint64_t *size,
                       uint64_t *files, char **note, char *err, size_t errlen);

// cgq_ckpt_seal makes src (a directory the caller owns, which nobody writes
// any more) checkpoint n of attempt `attempt` in trial_store: moved there by
// rename when both are on one file system, else copied (src is removed in
// both cases, also on failure). Returns 0 with *info filled, or -1 with err
// set (what it wrote is removed; an unreachable or full store says so).
int cgq_ckpt_seal (const char *src, const char *trial_store, uint32_t attempt, uint64_t n,
                   cgq_ckpt_info_t *info, char *err, size_t errlen);

// cgq_ckpt_restore checks the sealed checkpoint at path against sha256 (its
// manifest's hash, then every file's hash and size as it is copied) and
// copies its files into dst, a directory it makes (it must not exist).
// Returns 0, or -1 with err set (dst is removed: nothing of a checkpoint that
// failed its check is ever used).
int cgq_ckpt_restore (const char *path, const char *sha256, const char *dst, char *err,
                      size_t errlen);

// cgq_ckpt_prune removes the sealed checkpoints of trial_store older than
// ckpt-A-N (by attempt, then n) whose names are not in keep (nkeep names);
// a .tmp being written is left alone. Returns how many it removed.
size_t cgq_ckpt_prune (const char *trial_store, uint32_t attempt, uint64_t n,
                       char *const *keep, size_t nkeep);

// cgq_ckpt_delete removes the sealed checkpoint at path (a directory, or a
// URL: its manifest first, then its files). Absent already is success.
// 0, or -1 with err.
int cgq_ckpt_delete (const char *path, char *err, size_t errlen);


#endif
