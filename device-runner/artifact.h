// artifact: the files a measurement runs (a model, an nnpackage), fetched
// with libcurl (http, https, file), checked against their sha256 and kept in
// a cache directory by hash: DIR/<sha256>/<file name of the URL>. The least
// recently used entries (by mtime, touched on every hit) are evicted once
// the cache holds more than its cap. Several measurement processes may share
// one cache: lookups and evictions hold an flock on DIR/.lock, downloads go
// to a private DIR/.part-* and are renamed into place.
#ifndef CGQ_ARTIFACT_H
#define CGQ_ARTIFACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *dir;           // created if missing
    uint64_t max_bytes;        // cap of the whole cache
    uint64_t max_artifact;     // cap of one artifact: a longer download is stopped; 0: none
    double connect_timeout_s;  // libcurl CONNECTTIMEOUT
    double transfer_timeout_s; // libcurl TIMEOUT (the whole transfer)
    uint32_t retries;          // extra attempts after a transient failure
} cgq_artifact_opts_t;

typedef struct {
    char *path;      // the cached file (caller frees via cgq_artifact_fini)
    char sha256[65]; // its hash, lowercase hex
    bool hit;        // served from the cache, nothing fetched
    uint64_t bytes;
    double fetch_s;  // time spent getting it (lookup, download, hashing)
} cgq_artifact_t;

// cgq_artifact_get makes url's file available in the cache. sha256 (64 hex
// digits, as the spec's artifact.sha256 must be) is what its content must
// hash to. Returns 0 with *out filled, or -1 with one line in err: a bad URL
// or hash, a failed download (after the retries), or a hash mismatch
// ("...: sha256 is X, expected Y"), in which case nothing is kept.
int cgq_artifact_get (const cgq_artifact_opts_t *opts, const char *url, const char *sha256,
                      cgq_artifact_t *out, char *err, size_t errlen);

void cgq_artifact_fini (cgq_artifact_t *a);

// cgq_artifact_sha256_file hashes a file into hex (65 bytes). 0 or -1 with errno.
int cgq_artifact_sha256_file (const char *path, char *hex);

// cgq_artifact_valid_sha256: 64 hex digits (either case).
bool cgq_artifact_valid_sha256 (const char *s);

#endif
