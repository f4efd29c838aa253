// ckpt_store: put, get and delete in a directory or an HTTP(S) checkpoint store.
#include "ckpt_store.h"

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

#define S_CHUNK (1u << 20)
#define S_FLOOR_BPS 65536 // the slowest average a whole request may go at

volatile const bool *cgq_ckpt_store_abort = NULL;

static pthread_mutex_t s_mu = PTHREAD_MUTEX_INITIALIZER;
static cgq_ckpt_store_opts_t s_opts = {.retries = (uint32_t)-1};
static char *s_token;
static char *s_ca_file;
static pthread_once_t s_once = PTHREAD_ONCE_INIT;

static void
s_global_init (void)
{
    curl_global_init (CURL_GLOBAL_DEFAULT);
}

void
cgq_ckpt_store_setup (const cgq_ckpt_store_opts_t *opts)
{
    pthread_once (&s_once, s_global_init);
    pthread_mutex_lock (&s_mu);
    free (s_token);
    free (s_ca_file);
    s_token = s_ca_file = NULL;
    memset (&s_opts, 0, sizeof s_opts);
    s_opts.retries = (uint32_t)-1;
    if (opts) {
        s_opts = *opts;
        s_token = opts->token && *opts->token ? cgq_xstrdup (opts->token) : NULL;
        s_ca_file = opts->ca_file && *opts->ca_file ? cgq_xstrdup (opts->ca_file) : NULL;
    }
    s_opts.token = s_opts.ca_file = NULL;
    pthread_mutex_unlock (&s_mu);
}

char *
cgq_ckpt_store_token_load (const char *env, const char *file, char *err, size_t errlen)
{
    err[0] = 0;
    const char *e = env ? getenv (env) : NULL;
    if (e && *e)
        return cgq_xstrdup (e);
    if (!file || !*file)
        return NULL;
    FILE *f = fopen (file, "r");
    if (!f) {
        snprintf (err, errlen, "cannot read the checkpoint store token file %s: %s", file,
                  strerror (errno));
        return NULL;
    }
    char line[4096];
    char *tok = NULL;
    if (fgets (line, sizeof line, f)) {
        line[strcspn (line, "\r\n")] = 0;
        if (*line)
            tok = cgq_xstrdup (line);
    }
    fclose (f);
    if (!tok)
        snprintf (err, errlen,
                  "the checkpoint store token file %s is empty (write the token on "
                  "its first line)",
                  file);
    return tok;
}

bool
cgq_ckpt_store_is_url (const char *store)
{
    return store && (!strncmp (store, "http://", 7) || !strncmp (store, "https://", 8));
}

bool
cgq_ckpt_store_valid_url (const char *url, char *why, size_t whylen)
{
    const char *rest = !strncmp (url, "http://", 7)    ? url + 7
                       : !strncmp (url, "https://", 8) ? url + 8
                                                       : NULL;
    if (!rest) {
        snprintf (why, whylen, "only http:// and https:// stores are built");
        return false;
    }
    size_t host = strcspn (rest, "/");
    if (host == 0) {
        snprintf (why, whylen, "it names no host");
        return false;
    }
    if (memchr (rest, '@', host)) {
        snprintf (why, whylen,
                  "it holds a user or password (give a token to the worker "
                  "instead: --checkpoint-token-file or CGQ_CHECKPOINT_TOKEN)");
        return false;
    }
    if (strpbrk (url, "?# \t\r\n")) {
        snprintf (why, whylen, "it holds a query, a fragment or a space");
        return false;
    }
    return true;
}

char *
cgq_ckpt_store_join (const char *base, const char *rel)
{
    size_t bl = strlen (base);
    while (bl > 0 && base[bl - 1] == '/')
        bl--;
    if (!cgq_ckpt_store_is_url (base))
        return cgq_xasprintf ("%.*s/%s", (int)bl, base, rel);
    cgq_buf_t b;
    cgq_buf_init (&b);
    cgq_buf_append (&b, base, bl);
    cgq_buf_puts (&b, "/");
    static const char keep[] = "-._~/";
    for (const unsigned char *p = (const unsigned char *)rel; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            strchr (keep, *p))
            cgq_buf_append (&b, (const char *)p, 1);
        else
            cgq_buf_printf (&b, "%%%02X", *p);
    }
    char *out = cgq_buf_take (&b);
    cgq_buf_fini (&b);
    return out;
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

static bool
s_aborted (void)
{
    return cgq_ckpt_store_abort && *cgq_ckpt_store_abort;
}

// --- a directory store -----------------------------------------------------------

char *
cgq_ckpt_store_trial (const char *store, uint64_t job, uint64_t trial)
{
    size_t len = strlen (store);
    while (len > 1 && store[len - 1] == '/')
        len--;
    return cgq_xasprintf ("%.*s/job-%" PRIu64 "/trial-%" PRIu64, (int)len, store, job, trial);
}

bool
cgq_ckpt_store_parse_name (const char *name, uint32_t *attempt, uint64_t *n)
{
    unsigned a;
    uint64_t k;
    int end = 0;
    if (strncmp (name, "ckpt-", 5) != 0 ||
        sscanf (name, "ckpt-%u-%" SCNu64 "%n", &a, &k, &end) != 2 || name[end] != 0)
        return false;
    char check[48];
    snprintf (check, sizeof check, "ckpt-%u-%" PRIu64, a, k);
    if (strcmp (check, name) != 0)
        return false; // "ckpt-01-2", "ckpt- 1-2": not a name cgq writes
    *attempt = a;
    *n = k;
    return true;
}

// --- HTTP ---------------------------------------------------------------------

typedef enum { S_PUT, S_GET, S_DELETE } s_method_t;

// What a request reads from (PUT) or writes into (GET).
typedef struct {
    FILE *in;        // PUT of a file
    const char *mem; // PUT of bytes
    size_t mem_len, mem_at;
    int out_fd;         // GET into a file, or -1
    cgq_buf_t *out_buf; // GET into memory
    size_t out_buf_start;
    EVP_MD_CTX *md; // GET: hashed as it comes
    uint64_t got, max;
    bool over, write_failed;
    int write_errno;
} s_io_t;

static size_t
s_read_cb (char *ptr, size_t size, size_t nmemb, void *arg)
{
    s_io_t *io = arg;
    if (s_aborted ())
        return CURL_READFUNC_ABORT;
    size_t want = size * nmemb;
    if (io->in) {
        size_t n = fread (ptr, 1, want, io->in);
        if (n == 0 && ferror (io->in))
            return CURL_READFUNC_ABORT;
        return n;
    }
    size_t left = io->mem_len - io->mem_at;
    size_t n = left < want ? left : want;
    memcpy (ptr, io->mem + io->mem_at, n);
    io->mem_at += n;
    return n;
}

static size_t
s_write_cb (char *ptr, size_t size, size_t nmemb, void *arg)
{
    s_io_t *io = arg;
    size_t n = size * nmemb;
    if (s_aborted ())
        return 0;
    if (io->got + n > io->max) {
        io->over = true;
        return 0;
    }
    if (io->out_fd >= 0) {
        const char *p = ptr;
        size_t left = n;
        while (left > 0) {
            ssize_t w = write (io->out_fd, p, left);
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0) {
                io->write_failed = true;
                io->write_errno = errno;
                return 0;
            }
            p += w;
            left -= (size_t)w;
        }
    }
    else if (io->out_buf)
        cgq_buf_append (io->out_buf, ptr, n);
    if (io->md)
        EVP_DigestUpdate (io->md, ptr, n);
    io->got += n;
    return n;
}

static size_t
s_discard_cb (char *ptr, size_t size, size_t nmemb, void *arg)
{
    (void)ptr;
    (void)arg;
    return size * nmemb;
}

// s_transient: worth another attempt (the network, the server's 5xx but a
// full store, 429), as the artifact fetcher of device-runner/artifact.c.
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
    case CURLE_PARTIAL_FILE: return true;
    case CURLE_OK: return (http >= 500 && http != 507) || http == 429;
    default: return false;
    }
}

// s_io_reset readies io for another attempt. -1 with errno if it cannot.
static int
s_io_reset (s_io_t *io)
{
    io->mem_at = 0;
    io->got = 0;
    io->over = io->write_failed = false;
    if (io->in && fseek (io->in, 0, SEEK_SET) < 0)
        return -1;
    if (io->out_fd >= 0 && (ftruncate (io->out_fd, 0) < 0 || lseek (io->out_fd, 0, SEEK_SET) < 0))
        return -1;
    if (io->out_buf)
        io->out_buf->len = io->out_buf_start;
    if (io->md)
        EVP_DigestInit_ex (io->md, EVP_sha256 (), NULL);
    return 0;
}

static const char *
s_method_name (s_method_t m)
{
    return m == S_PUT ? "PUT" : m == S_GET ? "GET" : "DELETE";
}

// s_http does one request with the retries. 0 on a 2xx (DELETE: 404 too),
// else -1 with err.
static int
s_http (s_method_t m, const char *url, s_io_t *io, uint64_t put_len, char *err, size_t errlen)
{
    pthread_once (&s_once, s_global_init);
    pthread_mutex_lock (&s_mu);
    cgq_ckpt_store_opts_t o = s_opts;
    char *auth = s_token ? cgq_xasprintf ("Authorization: Bearer %s", s_token) : NULL;
    char *ca = s_ca_file ? cgq_xstrdup (s_ca_file) : NULL;
    pthread_mutex_unlock (&s_mu);
    uint32_t retries = o.retries == (uint32_t)-1 ? 3 : o.retries;
    long connect_ms = (long)((o.connect_timeout_s > 0 ? o.connect_timeout_s : 10) * 1000);
    long stall_s = (long)(o.stall_s > 0 ? o.stall_s + 0.999 : 30);
    uint32_t base_ms = o.retry_base_ms ? o.retry_base_ms : 250;
    int rc = -1;
    for (uint32_t attempt = 1;; attempt++) {
        if (s_io_reset (io) < 0) {
            snprintf (err, errlen, "%s %s: cannot start over: %s", s_method_name (m), url,
                      strerror (errno));
            break;
        }
        CURL *h = curl_easy_init ();
        if (!h) {
            snprintf (err, errlen, "%s %s: cannot make a libcurl handle", s_method_name (m), url);
            break;
        }
        char cerr[CURL_ERROR_SIZE] = "";
        struct curl_slist *hdr = NULL;
        if (auth)
            hdr = curl_slist_append (hdr, auth);
        hdr = curl_slist_append (hdr, "Expect:"); // no 100-continue round trip
        curl_easy_setopt (h, CURLOPT_URL, url);
        curl_easy_setopt (h, CURLOPT_PROTOCOLS_STR, "http,https");
        if (ca)
            curl_easy_setopt (h, CURLOPT_CAINFO, ca);
        curl_easy_setopt (h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt (h, CURLOPT_FAILONERROR, 1L); // an error page is never a body
        curl_easy_setopt (h, CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
        curl_easy_setopt (h, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt (h, CURLOPT_LOW_SPEED_TIME, stall_s);
        // A backstop for what the stall check misses (a server that takes the
        // body and never answers): the whole request within the stall time
        // plus its bytes at S_FLOOR_BPS.
        uint64_t bytes = m == S_PUT ? put_len : m == S_GET && io->max != UINT64_MAX ? io->max : 0;
        curl_easy_setopt (h, CURLOPT_TIMEOUT_MS,
                          (long)(stall_s * 1000 + (bytes / S_FLOOR_BPS) * 1000));
        curl_easy_setopt (h, CURLOPT_ERRORBUFFER, cerr);
        curl_easy_setopt (h, CURLOPT_HTTPHEADER, hdr);
        curl_easy_setopt (h, CURLOPT_USERAGENT, "cgq-worker/" CGQ_VERSION);
        if (m == S_PUT) {
            curl_easy_setopt (h, CURLOPT_UPLOAD, 1L);
            curl_easy_setopt (h, CURLOPT_READFUNCTION, s_read_cb);
            curl_easy_setopt (h, CURLOPT_READDATA, io);
            curl_easy_setopt (h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)put_len);
            curl_easy_setopt (h, CURLOPT_WRITEFUNCTION, s_discard_cb);
        }
        else if (m == S_GET) {
            curl_easy_setopt (h, CURLOPT_WRITEFUNCTION, s_write_cb);
            curl_easy_setopt (h, CURLOPT_WRITEDATA, io);
        }
        else {
            curl_easy_setopt (h, CURLOPT_CUSTOMREQUEST, "DELETE");
            curl_easy_setopt (h, CURLOPT_NOBODY, 1L);
        }
        CURLcode cc = curl_easy_perform (h);
        long http = 0;
        curl_easy_getinfo (h, CURLINFO_RESPONSE_CODE, &http);
        curl_easy_cleanup (h);
        curl_slist_free_all (hdr);
        if (cc == CURLE_HTTP_RETURNED_ERROR && http >= 400)
            cc = CURLE_OK; // judged by its code below
        bool ok_code = (http >= 200 && http < 300) || (m == S_DELETE && http == 404);
        // A GET whose body is not the one answered (2xx) is not used either.
        if (cc == CURLE_OK && ok_code) {
            rc = 0;
            break;
        }
        const char *hint = "";
        if (s_aborted ())
            snprintf (err, errlen, "%s %s: stopped (the worker is shutting down)",
                      s_method_name (m), url);
        else if (io->over)
            snprintf (err, errlen, "GET %s: more than the %llu bytes expected came", url,
                      (unsigned long long)io->max);
        else if (io->write_failed)
            snprintf (err, errlen, "GET %s: cannot write what came: %s", url,
                      strerror (io->write_errno));
        else if (cc != CURLE_OK) {
            if (cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST)
                hint = " (the checkpoint store is unreachable: is it running, and is its URL "
                       "in checkpoint.store or the worker's --checkpoint-store right?)";
            else if (cc == CURLE_OPERATION_TIMEDOUT)
                hint = " (the checkpoint store did not answer in time: is it up and not "
                       "overloaded? the worker's --checkpoint-stall is how long it waits)";
            snprintf (err, errlen, "%s %s: %s%s", s_method_name (m), url,
                      *cerr ? cerr : curl_easy_strerror (cc), hint);
        }
        else {
            if (http == 507 || http == 413)
                hint = " (the checkpoint store is full: free space there, or set "
                       "checkpoint.store)";
            else if (http == 401 || http == 403)
                hint = " (the store refused the worker: give it a token with "
                       "--checkpoint-token-file or CGQ_CHECKPOINT_TOKEN)";
            else if (http == 404 && m == S_GET)
                hint = " (not in the store)";
            snprintf (err, errlen, "%s %s: the store answered HTTP %ld%s", s_method_name (m), url,
                      http, hint);
        }
        if (s_aborted () || io->over || io->write_failed || !s_transient (cc, http) ||
            attempt > retries)
            break;
        uint64_t pause = (uint64_t)base_ms << (attempt - 1 < 10 ? attempt - 1 : 10);
        cgq_warn ("checkpoint store: %s (attempt %u of %u; again in %llu ms)", err, attempt,
                  retries + 1, (unsigned long long)pause);
        struct timespec ts = {(time_t)(pause / 1000), (long)(pause % 1000) * 1000000};
        while (nanosleep (&ts, &ts) < 0 && errno == EINTR)
            ;
    }
    free (auth);
    free (ca);
    return rc;
}

// --- the interface ------------------------------------------------------------------

int
cgq_ckpt_store_put_file (const char *loc, const char *local, char *err, size_t errlen)
{
    if (!cgq_ckpt_store_is_url (loc)) {
        char hex[65];
        uint64_t size;
        return cgq_ckpt_store_get_file (local, loc, UINT64_MAX, hex, &size, err, errlen);
    }
    FILE *f = fopen (local, "rb");
    if (!f) {
        snprintf (err, errlen, "cannot read %s: %s", local, strerror (errno));
        return -1;
    }
    struct stat st;
    if (fstat (fileno (f), &st) < 0) {
        snprintf (err, errlen, "cannot stat %s: %s", local, strerror (errno));
        fclose (f);
        return -1;
    }
    s_io_t io = {.in = f, .out_fd = -1};
    int rc = s_http (S_PUT, loc, &io, (uint64_t)st.st_size, err, errlen);
    fclose (f);
    return rc;
}

int
cgq_ckpt_store_put_mem (const char *loc, const void *data, size_t len, char *err, size_t errlen)
{
    if (!cgq_ckpt_store_is_url (loc)) {
        int fd = open (loc, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0) {
            snprintf (err, errlen, "cannot create %s: %s", loc, strerror (errno));
            return -1;
        }
        const char *p = data;
        size_t left = len;
        while (left > 0) {
            ssize_t w = write (fd, p, left);
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0) {
                snprintf (err, errlen, "cannot write %s: %s", loc, strerror (errno));
                close (fd);
                return -1;
            }
            p += w;
            left -= (size_t)w;
        }
        if (fsync (fd) < 0 || close (fd) < 0) {
            snprintf (err, errlen, "cannot write %s: %s", loc, strerror (errno));
            return -1;
        }
        return 0;
    }
    s_io_t io = {.mem = data, .mem_len = len, .out_fd = -1};
    return s_http (S_PUT, loc, &io, len, err, errlen);
}

int
cgq_ckpt_store_get_mem (const char *loc, uint64_t max, cgq_buf_t *out, char *err, size_t errlen)
{
    if (!cgq_ckpt_store_is_url (loc)) {
        int fd = open (loc, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
            snprintf (err, errlen, "cannot read %s: %s", loc, strerror (errno));
            return -1;
        }
        char buf[65536];
        size_t start = out->len;
        int rc = 0;
        for (;;) {
            ssize_t n = read (fd, buf, sizeof buf);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0) {
                snprintf (err, errlen, "cannot read %s: %s", loc, strerror (errno));
                rc = -1;
            }
            if (n <= 0)
                break;
            cgq_buf_append (out, buf, (size_t)n);
            if (out->len - start > max) {
                snprintf (err, errlen, "%s is larger than %llu bytes", loc,
                          (unsigned long long)max);
                rc = -1;
                break;
            }
        }
        close (fd);
        return rc;
    }
    s_io_t io = {.out_fd = -1, .out_buf = out, .out_buf_start = out->len, .max = max};
    return s_http (S_GET, loc, &io, 0, err, errlen);
}

int
cgq_ckpt_store_get_file (const char *loc, const char *local, uint64_t max, char *hex,
                         uint64_t *size, char *err, size_t errlen)
{
    int out = open (local, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (out < 0) {
        snprintf (err, errlen, "cannot create %s: %s", local, strerror (errno));
        return -1;
    }
    s_io_t io = {.out_fd = out, .md = EVP_MD_CTX_new (), .max = max};
    EVP_DigestInit_ex (io.md, EVP_sha256 (), NULL);
    int rc = 0;
    if (cgq_ckpt_store_is_url (loc))
        rc = s_http (S_GET, loc, &io, 0, err, errlen);
    else {
        int in = open (loc, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (in < 0) {
            snprintf (err, errlen, "cannot read %s: %s", loc, strerror (errno));
            rc = -1;
        }
        char *buf = in >= 0 ? cgq_xmalloc (S_CHUNK) : NULL;
        while (rc == 0) {
            ssize_t n = read (in, buf, S_CHUNK);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0) {
                snprintf (err, errlen, "cannot read %s: %s", loc, strerror (errno));
                rc = -1;
            }
            if (n <= 0)
                break;
            if (s_write_cb (buf, 1, (size_t)n, &io) != (size_t)n) {
                snprintf (err, errlen, "%s: %s", loc,
                          io.over ? "larger than expected" : strerror (io.write_errno));
                rc = -1;
            }
        }
        free (buf);
        if (in >= 0)
            close (in);
    }
    unsigned char dg[32];
    unsigned int len = 0;
    EVP_DigestFinal_ex (io.md, dg, &len);
    EVP_MD_CTX_free (io.md);
    if (close (out) < 0 && rc == 0) {
        snprintf (err, errlen, "cannot write %s: %s", local, strerror (errno));
        rc = -1;
    }
    if (rc == 0) {
        s_hex (dg, hex);
        *size = io.got;
    }
    else
        unlink (local);
    return rc;
}

int
cgq_ckpt_store_delete (const char *loc, char *err, size_t errlen)
{
    if (!cgq_ckpt_store_is_url (loc)) {
        if (cgq_rm_tree (loc) < 0) {
            snprintf (err, errlen, "cannot remove %s: %s", loc, strerror (errno));
            return -1;
        }
        return 0;
    }
    s_io_t io = {.out_fd = -1};
    return s_http (S_DELETE, loc, &io, 0, err, errlen);
}

// s_safe_rel: a manifest's path, relative and without "." or ".." parts.
static bool
s_safe_rel (const char *p)
{
    if (!*p || *p == '/')
        return false;
    for (const char *q = p; *q;) {
        const char *e = strchrnul (q, '/');
        size_t n = (size_t)(e - q);
        if (n == 0 || (n == 1 && q[0] == '.') || (n == 2 && q[0] == '.' && q[1] == '.'))
            return false;
        q = *e ? e + 1 : e;
    }
    return true;
}

bool
cgq_ckpt_manifest_line (const char *line, char want[65], uint64_t *size, const char **rel)
{
    int at = 0;
    if (sscanf (line, "%64[0-9a-f] %" SCNu64 " %n", want, size, &at) != 2 || at == 0 ||
        strlen (want) != 64 || !s_safe_rel (line + at))
        return false;
    *rel = line + at;
    return true;
}

int
cgq_ckpt_store_delete_checkpoint (const char *path, char *err, size_t errlen)
{
    if (!cgq_ckpt_store_is_url (path)) {
        // Renamed first, so that a reader never finds half of it under its name.
        const char *slash = strrchr (path, '/');
        char *gone = slash ? cgq_xasprintf ("%.*s/.gone-%s", (int)(slash - path), path, slash + 1)
                           : cgq_xasprintf (".gone-%s", path);
        int rc = 0;
        if (rename (path, gone) < 0 && errno != ENOENT) {
            snprintf (err, errlen, "cannot remove %s: %s", path, strerror (errno));
            rc = -1;
        }
        else if (cgq_rm_tree (gone) < 0) {
            snprintf (err, errlen, "cannot remove %s: %s", gone, strerror (errno));
            rc = -1;
        }
        free (gone);
        return rc;
    }
    // The manifest first (it is the checkpoint), then the files it names.
    char *murl = cgq_ckpt_store_join (path, "manifest");
    cgq_buf_t m;
    cgq_buf_init (&m);
    int rc = cgq_ckpt_store_get_mem (murl, CGQ_CKPT_STORE_MAX_MANIFEST, &m, err, errlen);
    if (rc < 0 && strstr (err, "HTTP 404")) {
        free (murl);
        cgq_buf_fini (&m);
        return 0; // gone already
    }
    if (rc == 0)
        rc = cgq_ckpt_store_delete (murl, err, errlen);
    const char *magic = CGQ_CKPT_MAGIC;
    char *line = rc == 0 && m.len >= strlen (magic) && !memcmp (m.data, magic, strlen (magic))
                     ? m.data + strlen (magic)
                     : NULL;
    while (line && *line && rc == 0) {
        char *nl = strchr (line, '\n');
        if (!nl)
            break;
        *nl = 0;
        char want[65];
        uint64_t size;
        const char *name;
        if (cgq_ckpt_manifest_line (line, want, &size, &name)) {
            char *rel = cgq_xasprintf ("files/%s", name);
            char *url = cgq_ckpt_store_join (path, rel);
            rc = cgq_ckpt_store_delete (url, err, errlen);
            free (rel);
            free (url);
        }
        line = nl + 1;
    }
    free (murl);
    cgq_buf_fini (&m);
    return rc;
}
