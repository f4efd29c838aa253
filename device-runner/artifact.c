#include "artifact.h"

#include <ctype.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

#define S_RETRY_BASE_MS 250 // first pause between attempts; doubles each time

bool
cgq_artifact_valid_sha256 (const char *s)
{
    if (!s || strlen (s) != 64)
        return false;
    for (const char *p = s; *p; p++)
        if (!isxdigit ((unsigned char) *p))
            return false;
    return true;
}

static void
s_hex (const unsigned char *md, char *hex)
{
    for (int i = 0; i < 32; i++)
        sprintf (hex + 2 * i, "%02x", md[i]);
    hex[64] = 0;
}

int
cgq_artifact_sha256_file (const char *path, char *hex)
{
    FILE *f = fopen (path, "rb");
    if (!f)
        return -1;
    EVP_MD_CTX *md = EVP_MD_CTX_new ();
    EVP_DigestInit_ex (md, EVP_sha256 (), NULL);
    char buf[65536];
    size_t n;
    while ((n = fread (buf, 1, sizeof buf, f)) > 0)
        EVP_DigestUpdate (md, buf, n);
    int rc = ferror (f) ? -1 : 0;
    unsigned char out[32];
    unsigned int len = 0;
    EVP_DigestFinal_ex (md, out, &len);
    EVP_MD_CTX_free (md);
    fclose (f);
    if (rc == 0)
        s_hex (out, hex);
    return rc;
}

void
cgq_artifact_fini (cgq_artifact_t *a)
{
    if (!a)
        return;
    free (a->path);
    a->path = NULL;
}

// s_lock takes the cache's lock (blocking). Returns the fd, or -1.
static int
s_lock (const char *dir)
{
    char *p = cgq_xasprintf ("%s/.lock", dir);
    int fd = open (p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    free (p);
    if (fd < 0)
        return -1;
    while (flock (fd, LOCK_EX) < 0)
        if (errno != EINTR) {
            close (fd);
            return -1;
        }
    return fd;
}

static void
s_unlock (int fd)
{
    if (fd >= 0)
        close (fd); // releases the flock
}

// s_base is the file name a URL ends in ("model" when it ends in '/'), with
// the query and fragment cut off and anything odd replaced, so that tools
// that go by the extension (.tflite, .json) still can.
static char *
s_base (const char *url)
{
    const char *end = url + strcspn (url, "?#");
    const char *start = end;
    while (start > url && start[-1] != '/')
        start--;
    if (start == end)
        return cgq_xstrdup ("model");
    char *b = cgq_xstrndup (start, (size_t) (end - start));
    for (char *p = b; *p; p++)
        if (!isalnum ((unsigned char) *p) && *p != '.' && *p != '-' && *p != '_')
            *p = '_';
    if (b[0] == '.')
        b[0] = '_';
    return b;
}

// s_entry_file returns the file inside the cache entry dir DIR/<sha> (the one
// regular file in it), or NULL. Caller frees.
static char *
s_entry_file (const char *entry)
{
    DIR *d = opendir (entry);
    if (!d)
        return NULL;
    char *found = NULL;
    struct dirent *e;
    while (!found && (e = readdir (d)))
        if (e->d_name[0] != '.')
            found = cgq_xasprintf ("%s/%s", entry, e->d_name);
    closedir (d);
    return found;
}

typedef struct {
    char *path;     // cache entry directory
    uint64_t bytes;
    struct timespec used;
} s_entry_t;

static int
s_older (const void *a, const void *b)
{
    const s_entry_t *x = a, *y = b;
    if (x->used.tv_sec != y->used.tv_sec)
        return x->used.tv_sec < y->used.tv_sec ? -1 : 1;
    return x->used.tv_nsec < y->used.tv_nsec ? -1 : x->used.tv_nsec > y->used.tv_nsec;
}

static void
s_remove_entry (const char *entry)
{
    char *f = s_entry_file (entry);
    if (f) {
        unlink (f);
        free (f);
    }
    rmdir (entry);
}

// s_evict removes the least recently used entries (not keep) until the
// cache holds at most max bytes. Called with the lock held.
static void
s_evict (const char *dir, uint64_t max, const char *keep)
{
    DIR *d = opendir (dir);
    if (!d)
        return;
    s_entry_t *v = NULL;
    size_t n = 0;
    uint64_t total = 0;
    struct dirent *e;
    while ((e = readdir (d))) {
        if (!cgq_artifact_valid_sha256 (e->d_name))
            continue;
        char *entry = cgq_xasprintf ("%s/%s", dir, e->d_name);
        char *f = s_entry_file (entry);
        struct stat st;
        if (!f || stat (f, &st) < 0) {
            free (f);
            free (entry);
            continue;
        }
        free (f);
        v = cgq_xrealloc (v, (n + 1) * sizeof *v);
        v[n].path = entry;
        v[n].bytes = (uint64_t) st.st_size;
        v[n].used = st.st_mtim;
        total += v[n].bytes;
        n++;
    }
    closedir (d);
    qsort (v, n, sizeof *v, s_older);
    for (size_t i = 0; i < n && total > max; i++) {
        if (keep && !strcmp (v[i].path, keep))
            continue;
        cgq_info ("artifact cache: evicting %s (%llu bytes, least recently used)", v[i].path,
                  (unsigned long long) v[i].bytes);
        s_remove_entry (v[i].path);
        total -= v[i].bytes;
    }
    for (size_t i = 0; i < n; i++)
        free (v[i].path);
    free (v);
}

typedef struct {
    FILE *f;
    EVP_MD_CTX *md;
    uint64_t bytes;
    uint64_t max;   // opts.max_artifact (0: none)
    bool over;      // stopped: more than max bytes came
} s_sink_t;

static size_t
s_write (char *ptr, size_t size, size_t nmemb, void *arg)
{
    s_sink_t *s = arg;
    size_t n = size * nmemb;
    if (s->max && s->bytes + n > s->max) {
        s->over = true;
        return 0; // libcurl stops the transfer (CURLE_WRITE_ERROR)
    }
    if (fwrite (ptr, 1, n, s->f) != n)
        return 0;
    EVP_DigestUpdate (s->md, ptr, n);
    s->bytes += n;
    return n;
}

// s_transient: worth another attempt (the network, the server's 5xx), not a
// bad URL, a 404 or an unsupported scheme.
static bool
s_transient (CURLcode rc, long http)
{
    switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
        return true;
    case CURLE_HTTP_RETURNED_ERROR:
        return http >= 500 || http == 429;
    default:
        return false;
    }
}

// s_download fetches url into path, hashing it. 0, or -1 with err.
static int
s_download (const cgq_artifact_opts_t *o, const char *url, const char *path, char *hex,
            uint64_t *bytes, char *err, size_t errlen)
{
    uint32_t attempts = o->retries + 1;
    for (uint32_t attempt = 1;; attempt++) {
        s_sink_t s = {.f = fopen (path, "wb"), .md = EVP_MD_CTX_new (), .max = o->max_artifact};
        if (!s.f) {
            snprintf (err, errlen, "cannot write %s: %s", path, strerror (errno));
            EVP_MD_CTX_free (s.md);
            return -1;
        }
        EVP_DigestInit_ex (s.md, EVP_sha256 (), NULL);
        CURL *h = curl_easy_init ();
        char cerr[CURL_ERROR_SIZE] = "";
        curl_easy_setopt (h, CURLOPT_URL, url);
        curl_easy_setopt (h, CURLOPT_PROTOCOLS_STR, "http,https,file");
        curl_easy_setopt (h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
        curl_easy_setopt (h, CURLOPT_FOLLOWLOCATION, 1L);
        curl_easy_setopt (h, CURLOPT_MAXREDIRS, 5L);
        curl_easy_setopt (h, CURLOPT_FAILONERROR, 1L);
        curl_easy_setopt (h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt (h, CURLOPT_CONNECTTIMEOUT_MS, (long) (o->connect_timeout_s * 1000));
        curl_easy_setopt (h, CURLOPT_TIMEOUT_MS, (long) (o->transfer_timeout_s * 1000));
        curl_easy_setopt (h, CURLOPT_WRITEFUNCTION, s_write);
        curl_easy_setopt (h, CURLOPT_WRITEDATA, &s);
        curl_easy_setopt (h, CURLOPT_ERRORBUFFER, cerr);
        curl_easy_setopt (h, CURLOPT_USERAGENT, "cgq-device-runner/" CGQ_VERSION);
        // A server that announces a larger file is refused before its body;
        // one that does not is stopped by s_write once it sends too much.
        if (o->max_artifact)
            curl_easy_setopt (h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t) o->max_artifact);
        CURLcode rc = curl_easy_perform (h);
        long http = 0;
        curl_easy_getinfo (h, CURLINFO_RESPONSE_CODE, &http);
        curl_easy_cleanup (h);
        bool closed = fclose (s.f) == 0;
        unsigned char md[32];
        unsigned int len = 0;
        EVP_DigestFinal_ex (s.md, md, &len);
        EVP_MD_CTX_free (s.md);
        if (rc == CURLE_OK && closed) {
            s_hex (md, hex);
            *bytes = s.bytes;
            return 0;
        }
        bool too_big = s.over || rc == CURLE_FILESIZE_EXCEEDED;
        if (too_big)
            snprintf (err, errlen,
                      "artifact %s is larger than the limit of %llu bytes (%s); the download "
                      "was stopped%s and nothing was kept (raise cache.max_artifact in "
                      "runner.yaml, or --max-artifact of the runner)",
                      url, (unsigned long long) o->max_artifact,
                      s.over ? "it kept coming" : "the server announced more",
                      s.over ? " there" : " before its body");
        else if (rc == CURLE_OK)
            snprintf (err, errlen, "cannot write %s: %s", path, strerror (errno));
        else
            snprintf (err, errlen, "cannot fetch %s: %s", url, *cerr ? cerr : curl_easy_strerror (rc));
        if (too_big || rc == CURLE_OK || !s_transient (rc, http) || attempt >= attempts)
            return -1;
        int64_t pause = (int64_t) S_RETRY_BASE_MS << (attempt - 1);
        cgq_warn ("%s (attempt %u of %u; again in %lld ms)", err, attempt, attempts,
                  (long long) pause);
        struct timespec ts = {pause / 1000, (pause % 1000) * 1000000};
        while (nanosleep (&ts, &ts) < 0 && errno == EINTR)
            ;
    }
}

static double
s_now_s (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

int
cgq_artifact_get (const cgq_artifact_opts_t *o, const char *url, const char *sha256,
                  cgq_artifact_t *out, char *err, size_t errlen)
{
    memset (out, 0, sizeof *out);
    double t0 = s_now_s ();
    if (!url || !*url) {
        snprintf (err, errlen, "no artifact URL");
        return -1;
    }
    if (!cgq_artifact_valid_sha256 (sha256)) {
        snprintf (err, errlen, "artifact %s: sha256 '%.80s' is not 64 hex digits", url,
                  sha256 ? sha256 : "");
        return -1;
    }
    char want[65];
    for (int i = 0; i < 64; i++)
        want[i] = (char) tolower ((unsigned char) sha256[i]);
    want[64] = 0;
    if (cgq_mkdir_p (o->dir) < 0) {
        snprintf (err, errlen, "cannot create the artifact cache %s: %s", o->dir, strerror (errno));
        return -1;
    }
    char *entry = cgq_xasprintf ("%s/%s", o->dir, want);
    int lock = s_lock (o->dir);
    if (lock < 0) {
        snprintf (err, errlen, "cannot lock the artifact cache %s: %s", o->dir, strerror (errno));
        free (entry);
        return -1;
    }
    char *file = s_entry_file (entry);
    struct stat st;
    if (file && stat (file, &st) == 0) {
        utimensat (AT_FDCWD, file, NULL, 0); // most recently used now
        s_unlock (lock);
        out->path = file;
        out->hit = true;
        out->bytes = (uint64_t) st.st_size;
        memcpy (out->sha256, want, sizeof want);
        out->fetch_s = s_now_s () - t0;
        free (entry);
        return 0;
    }
    free (file);
    s_unlock (lock);

    // Download outside the lock: another measurement may use the cache.
    char *part = cgq_xasprintf ("%s/.part-XXXXXX", o->dir);
    if (!mkdtemp (part)) {
        snprintf (err, errlen, "cannot create a download directory in %s: %s", o->dir,
                  strerror (errno));
        free (part);
        free (entry);
        return -1;
    }
    char *base = s_base (url);
    char *tmp = cgq_xasprintf ("%s/%s", part, base);
    char got[65];
    uint64_t bytes = 0;
    int rc = s_download (o, url, tmp, got, &bytes, err, errlen);
    if (rc == 0 && strcmp (got, want) != 0) {
        snprintf (err, errlen, "artifact %s: sha256 is %s, expected %s (the file changed, or the "
                               "spec's sha256 is wrong); nothing was measured",
                  url, got, want);
        rc = -1;
    }
    if (rc < 0) {
        unlink (tmp);
        rmdir (part);
        free (tmp);
        free (base);
        free (part);
        free (entry);
        return -1;
    }
    lock = s_lock (o->dir);
    if (rename (part, entry) < 0) {
        // Another measurement put it there first: use that one.
        unlink (tmp);
        rmdir (part);
    }
    free (tmp);
    out->path = cgq_xasprintf ("%s/%s", entry, base);
    if (access (out->path, R_OK) < 0) {
        free (out->path);
        out->path = s_entry_file (entry);
    }
    s_evict (o->dir, o->max_bytes, entry);
    s_unlock (lock);
    out->bytes = bytes;
    memcpy (out->sha256, want, sizeof want);
    out->fetch_s = s_now_s () - t0;
    free (base);
    free (part);
    free (entry);
    if (!out->path) {
        snprintf (err, errlen, "artifact %s vanished from the cache %s", url, o->dir);
        return -1;
    }
    cgq_info ("artifact %s: fetched %llu bytes into %s", url, (unsigned long long) bytes,
              out->path);
    return 0;
}
