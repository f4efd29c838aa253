// ckpt: sealing, checking and restoring checkpoints in a directory store, or
// over HTTP(S) through the transport of common/ckpt_store.c.
#include "ckpt.h"
#include "ckpt_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define S_CHUNK (1u << 20)
#define S_MAX_DEPTH 64

volatile const bool *cgq_ckpt_abort = NULL;

static bool
s_aborted (void)
{
    return cgq_ckpt_abort && *cgq_ckpt_abort;
}

void
cgq_ckpt_info_fini (cgq_ckpt_info_t *info)
{
    if (!info)
        return;
    free (info->path);
    free (info->note);
    info->path = info->note = NULL;
}

char *
cgq_ckpt_trial_store (const char *store, uint64_t job, uint64_t trial)
{
    size_t len = strlen (store);
    while (len > 1 && store[len - 1] == '/')
        len--;
    return cgq_xasprintf ("%.*s/job-%" PRIu64 "/trial-%" PRIu64, (int) len, store, job, trial);
}

char *
cgq_ckpt_name (char *buf, uint32_t attempt, uint64_t n)
{
    snprintf (buf, 48, "ckpt-%u-%" PRIu64, attempt, n);
    return buf;
}

bool
cgq_ckpt_parse_name (const char *name, uint32_t *attempt, uint64_t *n)
{
    unsigned a;
    uint64_t k;
    int end = 0;
    if (sscanf (name, "ckpt-%u-%" SCNu64 "%n", &a, &k, &end) != 2 || name[end] != 0
        || strncmp (name, "ckpt-", 5) != 0)
        return false;
    char check[48];
    if (strcmp (cgq_ckpt_name (check, a, k), name) != 0)
        return false; // "ckpt-01-2", "ckpt- 1-2": not a name we write
    *attempt = a;
    *n = k;
    return true;
}

// s_fail writes "what: strerror(e)" and a hint for the errors a store gives
// when it is full or cannot be written, and returns -1.
static int s_fail (char *err, size_t errlen, int e, const char *fmt, ...)
    __attribute__ ((format (printf, 4, 5)));

static int
s_fail (char *err, size_t errlen, int e, const char *fmt, ...)
{
    char what[PATH_MAX + 256];
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (what, sizeof what, fmt, ap);
    va_end (ap);
    const char *hint = "";
    if (e == ENOSPC || e == EDQUOT)
        hint = " (the checkpoint store is full: free space there, or set checkpoint.store)";
    else if (e == EACCES || e == EPERM || e == EROFS)
        hint = " (the worker cannot write there: fix its permissions, or set checkpoint.store "
               "or the worker's --checkpoint-store)";
    else if (e == ENOTDIR)
        hint = " (a part of that path is a file: set checkpoint.store or the worker's "
               "--checkpoint-store to a directory)";
    else if (e == ECANCELED)
        hint = " (the worker is shutting down)";
    snprintf (err, errlen, "%s: %s%s", what, strerror (e), hint);
    return -1;
}

static void
s_hex (const unsigned char *md, char *hex)
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        hex[2 * i] = digits[md[i] >> 4];
        hex[2 * i + 1] = digits[md[i] & 15];
    }
    hex[64] = 0;
}

static void
s_sha256 (const void *data, size_t len, char *hex)
{
    unsigned char md[32];
    unsigned int n = 0;
    EVP_Digest (data, len, md, &n, EVP_sha256 (), NULL);
    s_hex (md, hex);
}

static int
s_write_all (int fd, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t w = write (fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        p += w;
        len -= (size_t) w;
    }
    return 0;
}

static int
s_fsync_path (const char *path)
{
    int fd = open (path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync (fd);
    int e = errno;
    close (fd);
    errno = e;
    return rc;
}

// --- the files of a checkpoint -----------------------------------------------

typedef struct {
    char **paths; // relative, sorted once the walk is over
    size_t n, cap;
    cgq_buf_t note;
    size_t skipped;
} s_list_t;

static void
s_list_fini (s_list_t *l)
{
    for (size_t i = 0; i < l->n; i++)
        free (l->paths[i]);
    free (l->paths);
    cgq_buf_fini (&l->note);
}

static void
s_skip (s_list_t *l, const char *rel, const char *why)
{
    if (l->skipped++ < 3)
        cgq_buf_printf (&l->note, "%s%s (%s)", l->note.len ? ", " : "", rel, why);
}

// s_walk lists the regular files below root/rel (rel "" for root itself).
static int
s_walk (const char *root, const char *rel, int depth, s_list_t *l, char *err, size_t errlen)
{
    char *dir = *rel ? cgq_xasprintf ("%s/%s", root, rel) : cgq_xstrdup (root);
    int fd = open (dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        s_fail (err, errlen, e, "cannot read checkpoint directory %s", dir);
        free (dir);
        return -1;
    }
    DIR *d = fdopendir (fd);
    if (!d) {
        int e = errno;
        close (fd);
        s_fail (err, errlen, e, "cannot read checkpoint directory %s", dir);
        free (dir);
        return -1;
    }
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir (d))) {
        if (!strcmp (e->d_name, ".") || !strcmp (e->d_name, ".."))
            continue;
        char *sub = *rel ? cgq_xasprintf ("%s/%s", rel, e->d_name) : cgq_xstrdup (e->d_name);
        struct stat st;
        if (strpbrk (e->d_name, "\n\r"))
            s_skip (l, "a name with a line break", "not kept");
        else if (fstatat (dirfd (d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            rc = s_fail (err, errlen, errno, "cannot stat %s/%s", root, sub);
        }
        else if (S_ISDIR (st.st_mode)) {
            if (depth >= S_MAX_DEPTH)
                s_skip (l, sub, "nested too deep");
            else
                rc = s_walk (root, sub, depth + 1, l, err, errlen);
        }
        else if (S_ISREG (st.st_mode)) {
            if (l->n == l->cap) {
                l->cap = l->cap ? 2 * l->cap : 64;
                l->paths = cgq_xrealloc (l->paths, l->cap * sizeof *l->paths);
            }
            l->paths[l->n++] = sub;
            sub = NULL;
        }
        else
            s_skip (l, sub, S_ISLNK (st.st_mode) ? "a symbolic link" : "not a regular file");
        free (sub);
    }
    closedir (d);
    free (dir);
    return rc;
}

static int
s_cmp (const void *a, const void *b)
{
    return strcmp (*(char *const *) a, *(char *const *) b);
}

// s_list walks root into l, sorted. 0, or -1 with err.
static int
s_list (const char *root, s_list_t *l, char *err, size_t errlen)
{
    memset (l, 0, sizeof *l);
    cgq_buf_init (&l->note);
    if (s_walk (root, "", 0, l, err, errlen) < 0)
        return -1;
    qsort (l->paths, l->n, sizeof *l->paths, s_cmp);
    return 0;
}

static char *
s_list_note (s_list_t *l)
{
    if (!l->skipped)
        return NULL;
    return cgq_xasprintf ("left out of the checkpoint: %s%s", l->note.data,
                          l->skipped > 3 ? " and more" : "");
}

// s_hash_file hashes path (and fsyncs it when sync): hex, *size.
static int
s_hash_file (const char *path, bool sync, char *hex, uint64_t *size, char *buf, char *err,
             size_t errlen)
{
    int fd = open (path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return s_fail (err, errlen, errno, "cannot read %s", path);
    EVP_MD_CTX *md = EVP_MD_CTX_new ();
    EVP_DigestInit_ex (md, EVP_sha256 (), NULL);
    uint64_t total = 0;
    int rc = 0;
    for (;;) {
        if (s_aborted ()) {
            rc = s_fail (err, errlen, ECANCELED, "checkpoint of %s", path);
            break;
        }
        ssize_t n = read (fd, buf, S_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = s_fail (err, errlen, errno, "cannot read %s", path);
            break;
        }
        if (n == 0)
            break;
        EVP_DigestUpdate (md, buf, (size_t) n);
        total += (uint64_t) n;
    }
    if (rc == 0 && sync && fsync (fd) < 0)
        rc = s_fail (err, errlen, errno, "cannot write %s to disk (fsync)", path);
    unsigned char out[32];
    unsigned int len = 0;
    EVP_DigestFinal_ex (md, out, &len);
    EVP_MD_CTX_free (md);
    close (fd);
    if (rc == 0) {
        s_hex (out, hex);
        *size = total;
    }
    return rc;
}

// s_hash_list writes the manifest of the files of l below root into out.
static int
s_hash_list (const char *root, const s_list_t *l, bool sync, cgq_buf_t *out, uint64_t *size,
             char *err, size_t errlen)
{
    char *buf = cgq_xmalloc (S_CHUNK);
    cgq_buf_puts (out, CGQ_CKPT_MAGIC);
    *size = 0;
    int rc = 0;
    for (size_t i = 0; i < l->n && rc == 0; i++) {
        char *path = cgq_xasprintf ("%s/%s", root, l->paths[i]);
        char hex[65];
        uint64_t n = 0;
        rc = s_hash_file (path, sync, hex, &n, buf, err, errlen);
        if (rc == 0) {
            cgq_buf_printf (out, "%s %" PRIu64 " %s\n", hex, n, l->paths[i]);
            *size += n;
        }
        free (path);
    }
    free (buf);
    return rc;
}

int
cgq_ckpt_manifest (const char *dir, bool sync, cgq_buf_t *out, uint64_t *size, uint64_t *files,
                   char **note, char *err, size_t errlen)
{
    s_list_t l;
    *note = NULL;
    int rc = s_list (dir, &l, err, errlen);
    if (rc == 0)
        rc = s_hash_list (dir, &l, sync, out, size, err, errlen);
    if (rc == 0) {
        *files = l.n;
        *note = s_list_note (&l);
    }
    s_list_fini (&l);
    return rc;
}

// --- copying -------------------------------------------------------------------

// s_mkdirs makes the directories of rel's path below root (not rel's last part).
static int
s_mkdirs (const char *root, const char *rel)
{
    char *p = cgq_xasprintf ("%s/%s", root, rel);
    size_t skip = strlen (root) + 1;
    int rc = 0;
    for (char *q = p + skip; *q && rc == 0; q++) {
        if (*q != '/')
            continue;
        *q = 0;
        if (mkdir (p, 0700) < 0 && errno != EEXIST)
            rc = -1;
        *q = '/';
    }
    int e = errno;
    free (p);
    errno = e;
    return rc;
}

// s_copy_file copies from into to (made new, mode 0600 | from's permissions).
// When hex is given it is the sha256 of what was copied and *size its bytes.
static int
s_copy_file (const char *from, const char *to, bool sync, char *hex, uint64_t *size, char *buf,
             char *err, size_t errlen)
{
    int in = open (from, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (in < 0)
        return s_fail (err, errlen, errno, "cannot read %s", from);
    struct stat st;
    if (fstat (in, &st) < 0 || !S_ISREG (st.st_mode)) {
        close (in);
        return s_fail (err, errlen, errno ? errno : EINVAL, "%s is not a regular file", from);
    }
    int out = open (to, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                    (st.st_mode & 0777) | 0600);
    if (out < 0) {
        int e = errno;
        close (in);
        return s_fail (err, errlen, e, "cannot create %s", to);
    }
    EVP_MD_CTX *md = hex ? EVP_MD_CTX_new () : NULL;
    if (md)
        EVP_DigestInit_ex (md, EVP_sha256 (), NULL);
    uint64_t total = 0;
    int rc = 0;
    for (;;) {
        if (s_aborted ()) {
            rc = s_fail (err, errlen, ECANCELED, "copy of %s", from);
            break;
        }
        ssize_t n = read (in, buf, S_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = s_fail (err, errlen, errno, "cannot read %s", from);
            break;
        }
        if (n == 0)
            break;
        if (md)
            EVP_DigestUpdate (md, buf, (size_t) n);
        if (s_write_all (out, buf, (size_t) n) < 0) {
            rc = s_fail (err, errlen, errno, "cannot write %s", to);
            break;
        }
        total += (uint64_t) n;
    }
    if (rc == 0 && sync && fsync (out) < 0)
        rc = s_fail (err, errlen, errno, "cannot write %s to disk (fsync)", to);
    if (close (out) < 0 && rc == 0)
        rc = s_fail (err, errlen, errno, "cannot write %s", to);
    close (in);
    if (md) {
        unsigned char dg[32];
        unsigned int len = 0;
        EVP_DigestFinal_ex (md, dg, &len);
        EVP_MD_CTX_free (md);
        if (rc == 0)
            s_hex (dg, hex);
    }
    if (size)
        *size = total;
    return rc;
}

// s_fsync_dirs fsyncs root and every directory that holds a file of l.
static int
s_fsync_dirs (const char *root, const s_list_t *l, char *err, size_t errlen)
{
    for (size_t i = 0; i < l->n; i++) {
        const char *slash = strrchr (l->paths[i], '/');
        if (!slash)
            continue;
        // Sorted: a directory's files are together, so one fsync per run.
        if (i > 0) {
            const char *prev = strrchr (l->paths[i - 1], '/');
            if (prev && prev - l->paths[i - 1] == slash - l->paths[i]
                && !strncmp (l->paths[i - 1], l->paths[i], (size_t) (slash - l->paths[i])))
                continue;
        }
        char *dir = cgq_xasprintf ("%s/%.*s", root, (int) (slash - l->paths[i]), l->paths[i]);
        int rc = s_fsync_path (dir);
        int e = errno;
        if (rc < 0) {
            s_fail (err, errlen, e, "cannot write %s to disk (fsync)", dir);
            free (dir);
            return -1;
        }
        free (dir);
    }
    if (s_fsync_path (root) < 0)
        return s_fail (err, errlen, errno, "cannot write %s to disk (fsync)", root);
    return 0;
}

// --- seal --------------------------------------------------------------------------

// s_seal_http seals src into an HTTP store: its manifest made here, every
// file PUT under NAME/files/, then the manifest, last (a checkpoint exists
// once its manifest is there). What was put is deleted again on a failure.
static int
s_seal_http (const char *src, const char *trial_store, uint32_t attempt, uint64_t n,
             cgq_ckpt_info_t *info, char *err, size_t errlen)
{
    char name[48];
    cgq_ckpt_name (name, attempt, n);
    char *base = cgq_ckpt_store_join (trial_store, name);
    cgq_buf_t manifest;
    cgq_buf_init (&manifest);
    s_list_t l;
    uint64_t size = 0;
    size_t put = 0;
    int rc = s_list (src, &l, err, errlen);
    bool listed = rc == 0;
    if (rc == 0)
        rc = s_hash_list (src, &l, false, &manifest, &size, err, errlen);
    for (size_t i = 0; rc == 0 && i < l.n; i++) {
        char *rel = cgq_xasprintf ("files/%s", l.paths[i]);
        char *url = cgq_ckpt_store_join (base, rel);
        char *local = cgq_xasprintf ("%s/%s", src, l.paths[i]);
        if (s_aborted ())
            rc = s_fail (err, errlen, ECANCELED, "checkpoint of %s", local);
        else
            rc = cgq_ckpt_store_put_file (url, local, err, errlen);
        if (rc == 0)
            put++;
        free (rel);
        free (url);
        free (local);
    }
    char *murl = cgq_ckpt_store_join (base, "manifest");
    if (rc == 0)
        rc = cgq_ckpt_store_put_mem (murl, manifest.data, manifest.len, err, errlen);
    if (rc == 0) {
        s_sha256 (manifest.data, manifest.len, info->sha256);
        info->size = size;
        info->files = l.n;
        info->path = base;
        info->note = s_list_note (&l);
        base = NULL;
    }
    else {
        // Not a checkpoint (no manifest): what was put goes, as far as it can.
        char ignored[256];
        for (size_t i = 0; i < put; i++) {
            char *rel = cgq_xasprintf ("files/%s", l.paths[i]);
            char *url = cgq_ckpt_store_join (base, rel);
            cgq_ckpt_store_delete (url, ignored, sizeof ignored);
            free (rel);
            free (url);
        }
    }
    cgq_rm_tree (src);
    if (listed)
        s_list_fini (&l);
    cgq_buf_fini (&manifest);
    free (murl);
    free (base);
    return rc;
}

int
cgq_ckpt_seal (const char *src, const char *trial_store, uint32_t attempt, uint64_t n,
               cgq_ckpt_info_t *info, char *err, size_t errlen)
{
    memset (info, 0, sizeof *info);
    if (cgq_ckpt_store_is_url (trial_store))
        return s_seal_http (src, trial_store, attempt, n, info, err, errlen);
    char name[48];
    cgq_ckpt_name (name, attempt, n);
    char *tmp = cgq_xasprintf ("%s/%s.tmp", trial_store, name);
    char *final = cgq_xasprintf ("%s/%s", trial_store, name);
    char *files = cgq_xasprintf ("%s/files", tmp);
    char *mpath = cgq_xasprintf ("%s/manifest", tmp);
    cgq_buf_t manifest;
    cgq_buf_init (&manifest);
    s_list_t l;
    bool listed = false;
    int rc = 0;
    if (cgq_mkdir_p (trial_store) < 0)
        rc = s_fail (err, errlen, errno, "cannot create checkpoint store directory %s",
                     trial_store);
    if (rc == 0) {
        cgq_rm_tree (tmp); // of an earlier try that died half-way
        if (mkdir (tmp, 0700) < 0)
            rc = s_fail (err, errlen, errno, "cannot create %s", tmp);
    }
    if (rc == 0) {
        rc = s_list (src, &l, err, errlen);
        listed = true;
    }
    if (rc == 0 && rename (src, files) < 0) {
        if (errno != EXDEV)
            rc = s_fail (err, errlen, errno, "cannot move %s to %s", src, files);
        else if (mkdir (files, 0700) < 0)
            rc = s_fail (err, errlen, errno, "cannot create %s", files);
        else {
            // Another file system: a copy, then the trial's copy goes.
            char *buf = cgq_xmalloc (S_CHUNK);
            for (size_t i = 0; i < l.n && rc == 0; i++) {
                char *from = cgq_xasprintf ("%s/%s", src, l.paths[i]);
                char *to = cgq_xasprintf ("%s/%s", files, l.paths[i]);
                if (s_mkdirs (files, l.paths[i]) < 0)
                    rc = s_fail (err, errlen, errno, "cannot create the directories of %s", to);
                else
                    rc = s_copy_file (from, to, false, NULL, NULL, buf, err, errlen);
                free (from);
                free (to);
            }
            free (buf);
        }
    }
    uint64_t size = 0;
    if (rc == 0)
        rc = s_hash_list (files, &l, true, &manifest, &size, err, errlen);
    if (rc == 0)
        rc = s_fsync_dirs (files, &l, err, errlen);
    if (rc == 0) {
        int fd = open (mpath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0)
            rc = s_fail (err, errlen, errno, "cannot create %s", mpath);
        else {
            if (s_write_all (fd, manifest.data, manifest.len) < 0 || fsync (fd) < 0)
                rc = s_fail (err, errlen, errno, "cannot write %s", mpath);
            if (close (fd) < 0 && rc == 0)
                rc = s_fail (err, errlen, errno, "cannot write %s", mpath);
        }
    }
    if (rc == 0 && s_fsync_path (tmp) < 0)
        rc = s_fail (err, errlen, errno, "cannot write %s to disk (fsync)", tmp);
    if (rc == 0 && rename (tmp, final) < 0)
        rc = s_fail (err, errlen, errno, "cannot rename %s to %s", tmp, final);
    if (rc == 0 && s_fsync_path (trial_store) < 0)
        rc = s_fail (err, errlen, errno, "cannot write %s to disk (fsync)", trial_store);
    if (rc == 0) {
        // latest -> ckpt-A-N, replaced atomically; for people only, so a
        // failure here fails nothing.
        char *link = cgq_xasprintf ("%s/.latest-%s", trial_store, name);
        char *latest = cgq_xasprintf ("%s/latest", trial_store);
        unlink (link);
        if (symlink (name, link) == 0 && rename (link, latest) < 0)
            unlink (link);
        free (link);
        free (latest);
        s_sha256 (manifest.data, manifest.len, info->sha256);
        info->size = size;
        info->files = l.n;
        info->path = final;
        info->note = s_list_note (&l);
        final = NULL;
    }
    else {
        cgq_rm_tree (tmp);
        cgq_rm_tree (final); // renamed, but not on disk for sure: not a checkpoint
    }
    cgq_rm_tree (src); // copied, or a failure: the trial's copy is not kept
    if (listed)
        s_list_fini (&l);
    cgq_buf_fini (&manifest);
    free (tmp);
    free (final);
    free (files);
    free (mpath);
    return rc;
}

// --- restore -------------------------------------------------------------------------

static int
s_read_manifest (const char *path, cgq_buf_t *out, char *err, size_t errlen)
{
    char *m = cgq_xasprintf ("%s/manifest", path);
    int fd = open (m, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    int rc = 0;
    if (fd < 0)
        rc = s_fail (err, errlen, errno, "cannot read %s", m);
    char buf[65536];
    while (rc == 0) {
        ssize_t n = read (fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            rc = s_fail (err, errlen, errno, "cannot read %s", m);
        if (n <= 0)
            break;
        cgq_buf_append (out, buf, (size_t) n);
        if (out->len > CGQ_CKPT_STORE_MAX_MANIFEST)
            rc = s_fail (err, errlen, EFBIG, "%s is larger than %u bytes", m,
                         CGQ_CKPT_STORE_MAX_MANIFEST);
    }
    if (fd >= 0)
        close (fd);
    free (m);
    return rc;
}

int
cgq_ckpt_restore (const char *path, const char *sha256, const char *dst, char *err, size_t errlen)
{
    cgq_buf_t m;
    cgq_buf_init (&m);
    bool url = cgq_ckpt_store_is_url (path);
    int rc = 0;
    if (url) {
        char *murl = cgq_ckpt_store_join (path, "manifest");
        rc = cgq_ckpt_store_get_mem (murl, CGQ_CKPT_STORE_MAX_MANIFEST, &m, err, errlen);
        free (murl);
    }
    else
        rc = s_read_manifest (path, &m, err, errlen);
    char hex[65];
    if (rc == 0) {
        s_sha256 (m.data, m.len, hex);
        if (!sha256 || strcmp (hex, sha256) != 0) {
            snprintf (err, errlen, "its manifest's sha256 is %s, not the recorded %s", hex,
                      sha256 ? sha256 : "(none)");
            rc = -1;
        }
    }
    if (rc == 0 && (m.len < strlen (CGQ_CKPT_MAGIC) || memcmp (m.data, CGQ_CKPT_MAGIC, strlen (CGQ_CKPT_MAGIC)))) {
        snprintf (err, errlen, "%s/manifest is not a cgq checkpoint manifest", path);
        rc = -1;
    }
    if (rc == 0 && mkdir (dst, 0700) < 0)
        rc = s_fail (err, errlen, errno, "cannot create %s", dst);
    bool made = rc == 0;
    char *buf = rc == 0 ? cgq_xmalloc (S_CHUNK) : NULL;
    char *line = rc == 0 ? m.data + strlen (CGQ_CKPT_MAGIC) : NULL;
    while (rc == 0 && *line) {
        char *nl = strchr (line, '\n');
        if (!nl) {
            snprintf (err, errlen, "%s/manifest: the last line is cut", path);
            rc = -1;
            break;
        }
        *nl = 0;
        char want[65];
        uint64_t size;
        const char *rel;
        if (!cgq_ckpt_manifest_line (line, want, &size, &rel)) {
            snprintf (err, errlen, "%s/manifest: a malformed line: %.120s", path, line);
            rc = -1;
            break;
        }
        char *frel = cgq_xasprintf ("files/%s", rel);
        char *from = url ? cgq_ckpt_store_join (path, frel) : cgq_xasprintf ("%s/%s", path, frel);
        free (frel);
        char *to = cgq_xasprintf ("%s/%s", dst, rel);
        uint64_t got = 0;
        if (s_mkdirs (dst, rel) < 0)
            rc = s_fail (err, errlen, errno, "cannot create the directories of %s", to);
        else if (url)
            // Streamed, hashed as it comes, stopped past the manifest's size.
            rc = cgq_ckpt_store_get_file (from, to, size, hex, &got, err, errlen);
        else
            rc = s_copy_file (from, to, false, hex, &got, buf, err, errlen);
        if (rc == 0 && (got != size || strcmp (hex, want) != 0)) {
            snprintf (err, errlen,
                      "file %s: %" PRIu64 " bytes with sha256 %.12s..., the manifest says %" PRIu64
                      " bytes with sha256 %.12s...",
                      rel, got, hex, size, want);
            rc = -1;
        }
        free (from);
        free (to);
        line = nl + 1;
    }
    free (buf);
    if (rc < 0 && made)
        cgq_rm_tree (dst);
    cgq_buf_fini (&m);
    return rc;
}

// --- prune -------------------------------------------------------------------------

int
cgq_ckpt_delete (const char *path, char *err, size_t errlen)
{
    return cgq_ckpt_store_delete_checkpoint (path, err, errlen);
}

// s_prune_http: a store over HTTP cannot be listed, so the names this
// attempt may have left behind are tried: its 8 checkpoints before n.
static size_t
s_prune_http (const char *trial_store, uint32_t attempt, uint64_t n, char *const *keep,
              size_t nkeep)
{
    size_t removed = 0;
    for (uint64_t k = n > 8 ? n - 8 : 1; k < n; k++) {
        char name[48], err[512];
        cgq_ckpt_name (name, attempt, k);
        bool kept = false;
        for (size_t i = 0; i < nkeep && !kept; i++)
            kept = keep[i] && !strcmp (keep[i], name);
        if (kept)
            continue;
        char *path = cgq_ckpt_store_join (trial_store, name);
        if (cgq_ckpt_delete (path, err, sizeof err) == 0)
            removed++;
        free (path);
    }
    return removed;
}

size_t
cgq_ckpt_prune (const char *trial_store, uint32_t attempt, uint64_t n, char *const *keep,
                size_t nkeep)
{
    if (cgq_ckpt_store_is_url (trial_store))
        return s_prune_http (trial_store, attempt, n, keep, nkeep);
    DIR *d = opendir (trial_store);
    if (!d)
        return 0;
    size_t removed = 0;
    struct dirent *e;
    while ((e = readdir (d))) {
        uint32_t a;
        uint64_t k;
        if (!cgq_ckpt_parse_name (e->d_name, &a, &k))
            continue;
        if (a > attempt || (a == attempt && k >= n))
            continue;
        bool kept = false;
        for (size_t i = 0; i < nkeep && !kept; i++)
            kept = keep[i] && !strcmp (keep[i], e->d_name);
        if (kept)
            continue;
        // Renamed first, so that a reader never finds half of it under its name.
        char *from = cgq_xasprintf ("%s/%s", trial_store, e->d_name);
        char *gone = cgq_xasprintf ("%s/.gone-%s", trial_store, e->d_name);
        if (rename (from, gone) == 0 && cgq_rm_tree (gone) == 0)
            removed++;
        free (from);
        free (gone);
    }
    closedir (d);
    return removed;
}
