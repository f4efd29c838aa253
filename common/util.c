#include "util.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void
s_oom (size_t size)
{
    fprintf (stderr, "cgq: out of memory allocating %zu bytes\n", size);
    abort ();
}

void *
cgq_xmalloc (size_t size)
{
    void *p = malloc (size ? size : 1);
    if (!p)
        s_oom (size);
    return p;
}

void *
cgq_xcalloc (size_t n, size_t size)
{
    void *p = calloc (n ? n : 1, size ? size : 1);
    if (!p)
        s_oom (n * size);
    return p;
}

void *
cgq_xrealloc (void *p, size_t size)
{
    void *q = realloc (p, size ? size : 1);
    if (!q)
        s_oom (size);
    return q;
}

char *
cgq_xstrdup (const char *s)
{
    return cgq_xstrndup (s, strlen (s));
}

char *
cgq_xstrndup (const char *s, size_t n)
{
    char *p = cgq_xmalloc (n + 1);
    memcpy (p, s, n);
    p[n] = 0;
    return p;
}

char *
cgq_xvasprintf (const char *fmt, va_list ap)
{
    char *s = NULL;
    if (vasprintf (&s, fmt, ap) < 0)
        s_oom (strlen (fmt));
    return s;
}

char *
cgq_xasprintf (const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    char *s = cgq_xvasprintf (fmt, ap);
    va_end (ap);
    return s;
}

int64_t
cgq_now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t
cgq_thread_cpu_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t
cgq_now_us (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

double
cgq_wall_s (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_REALTIME, &ts);
    // Microseconds, as the nearest double to SEC.UUUUUU: cgq_fmt_double then
    // writes it exactly so, without printf (a time with nanoseconds needs 17
    // digits and the slow path, several times per trial).
    return (double) ((int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000) / 1e6;
}

char *
cgq_fmt_u64 (char *buf, uint64_t v)
{
    char tmp[24];
    char *p = tmp + sizeof tmp;
    *--p = 0;
    do {
        *--p = (char) ('0' + v % 10);
        v /= 10;
    } while (v);
    memcpy (buf, p, (size_t) (tmp + sizeof tmp - p));
    return buf;
}

char *
cgq_fmt_double (char *buf, double v)
{
    if (isnan (v)) {
        strcpy (buf, "nan");
        return buf;
    }
    if (isinf (v)) {
        strcpy (buf, v > 0 ? "inf" : "-inf");
        return buf;
    }
    // Fast path, for what the coordinator writes per trial (times in
    // microseconds, params, metrics): the fewest decimals k with
    // round(|v| * 10^k) / 10^k == |v|. With that integer below 2^53 and 10^k
    // exact, the division is exactly what strtod makes of the digits, so they
    // read back as v; and they are what %.15g prints whenever that reads back
    // (fixed notation: 1e-4 <= |v| < 1e15). Else printf, as before.
    double a = fabs (v);
    if (a == 0 || (a >= 1e-4 && a < 1e15)) {
        double p = 1;
        for (int k = 0; k <= 17; k++, p *= 10) {
            double m = a * p;
            if (m >= 9007199254740992.0)
                break;
            uint64_t mi = (uint64_t) (m + 0.5);
            if ((double) mi / p != a)
                continue;
            char tmp[48];
            char *q = tmp + sizeof tmp;
            *--q = 0;
            for (int d = 0; d < k; d++) {
                *--q = (char) ('0' + mi % 10);
                mi /= 10;
            }
            if (k)
                *--q = '.';
            do {
                *--q = (char) ('0' + mi % 10);
                mi /= 10;
            } while (mi);
            if (signbit (v))
                *--q = '-';
            memcpy (buf, q, (size_t) (tmp + sizeof tmp - q));
            return buf;
        }
    }
    for (int prec = 15; prec <= 17; prec++) {
        snprintf (buf, 32, "%.*g", prec, v);
        if (strtod (buf, NULL) == v)
            break;
    }
    return buf;
}

double
cgq_round15 (double v)
{
    if (!isfinite (v))
        return v;
    // Fast path (every sampled parameter takes this): m = |v| * 10^k with
    // 10^14 <= m < 10^15, rounded to the integer n; n / 10^k is then what
    // strtod makes of %.15g's digits (n < 2^53 and 10^k exact, one correctly
    // rounded division). m carries one rounding (at most 1/16 below 2^50), so
    // when its fraction is near .5 the decimal rounding could go the other
    // way: printf decides those.
    static const double p10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                 1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    double a = fabs (v);
    if (a == 0)
        return v;
    int k = 14 - (int) floor (log10 (a));
    for (int tries = 0; tries < 2 && k >= 0 && k <= 22; tries++) {
        double m = a * p10[k];
        if (m >= 1e15)
            k--;
        else if (m < 1e14)
            k++;
        else {
            double n = floor (m + 0.5);
            double frac = m - floor (m);
            if (fabs (frac - 0.5) < 0.125)
                break; // near a tie: printf
            double r = n / p10[k];
            return v < 0 ? -r : r;
        }
    }
    char buf[32];
    snprintf (buf, sizeof buf, "%.15g", v);
    return strtod (buf, NULL);
}

void
cgq_buf_init (cgq_buf_t *b)
{
    b->cap = 64;
    b->len = 0;
    b->data = cgq_xmalloc (b->cap);
    b->data[0] = 0;
}

void
cgq_buf_fini (cgq_buf_t *b)
{
    free (b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

void
cgq_buf_reset (cgq_buf_t *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = 0;
}

void
cgq_buf_reserve (cgq_buf_t *b, size_t extra)
{
    if (!b->data)
        cgq_buf_init (b);
    if (b->len + extra + 1 <= b->cap)
        return;
    size_t cap = b->cap;
    while (b->len + extra + 1 > cap)
        cap *= 2;
    b->data = cgq_xrealloc (b->data, cap);
    b->cap = cap;
}

void
cgq_buf_append (cgq_buf_t *b, const void *data, size_t len)
{
    cgq_buf_reserve (b, len);
    memcpy (b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = 0;
}

void
cgq_buf_puts (cgq_buf_t *b, const char *s)
{
    cgq_buf_append (b, s, strlen (s));
}

void
cgq_buf_printf (cgq_buf_t *b, const char *fmt, ...)
{
    va_list ap, ap2;
    va_start (ap, fmt);
    va_copy (ap2, ap);
    int n = vsnprintf (NULL, 0, fmt, ap);
    va_end (ap);
    if (n > 0) {
        cgq_buf_reserve (b, (size_t) n);
        vsnprintf (b->data + b->len, (size_t) n + 1, fmt, ap2);
        b->len += (size_t) n;
    }
    va_end (ap2);
}

int
cgq_buf_read (cgq_buf_t *b, FILE *f)
{
    char chunk[8192];
    size_t n;
    while ((n = fread (chunk, 1, sizeof chunk, f)) > 0)
        cgq_buf_append (b, chunk, n);
    return ferror (f) ? -1 : 0;
}

char *
cgq_buf_take (cgq_buf_t *b)
{
    if (!b->data)
        cgq_buf_init (b);
    char *d = b->data;
    b->data = NULL;
    b->len = b->cap = 0;
    return d;
}

char *
cgq_sh_quote (const char *s)
{
    bool plain = *s != 0;
    for (const char *p = s; *p && plain; p++)
        if (!isalnum ((unsigned char) *p) && !strchr ("._,:/=+@%-", *p))
            plain = false;
    if (plain)
        return cgq_xstrdup (s);
    cgq_buf_t b;
    cgq_buf_init (&b);
    cgq_buf_puts (&b, "'");
    for (const char *p = s; *p; p++) {
        if (*p == '\'')
            cgq_buf_puts (&b, "'\\''");
        else
            cgq_buf_append (&b, p, 1);
    }
    cgq_buf_puts (&b, "'");
    return cgq_buf_take (&b);
}

int
cgq_parse_double (const char *s, double *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    double v = strtod (s, &end);
    if (errno || end == s || *end)
        return -1;
    *out = v;
    return 0;
}

int
cgq_parse_u64 (const char *s, uint64_t *out)
{
    if (!s || !isdigit ((unsigned char) *s))
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull (s, &end, 10);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

// s_split_number splits "1.5GiB" into 1.5 and "GiB".
static int
s_split_number (const char *s, double *num, const char **unit)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    double v = strtod (s, &end);
    if (errno || end == s || v < 0 || !isfinite (v))
        return -1;
    while (*end == ' ')
        end++;
    *num = v;
    *unit = end;
    return 0;
}

int
cgq_parse_duration (const char *s, double *seconds)
{
    double v;
    const char *u;
    if (s_split_number (s, &v, &u) < 0)
        return -1;
    double mult;
    if (!*u || !strcmp (u, "s") || !strcmp (u, "sec"))
        mult = 1;
    else if (!strcmp (u, "ms"))
        mult = 0.001;
    else if (!strcmp (u, "m") || !strcmp (u, "min"))
        mult = 60;
    else if (!strcmp (u, "h"))
        mult = 3600;
    else if (!strcmp (u, "d"))
        mult = 86400;
    else
        return -1;
    *seconds = v * mult;
    return 0;
}

int
cgq_parse_bytes (const char *s, uint64_t *bytes)
{
    double v;
    const char *u;
    if (s_split_number (s, &v, &u) < 0)
        return -1;
    double mult = 1;
    char c = (char) toupper ((unsigned char) *u);
    if (*u) {
        const char *units = "KMGTP";
        const char *k = strchr (units, c);
        if (!k || !c)
            return -1;
        mult = pow (1024.0, (double) (k - units + 1));
        u++;
        if (*u == 'i' || *u == 'I')
            u++;
        if (*u == 'B' || *u == 'b')
            u++;
        if (*u)
            return -1;
    }
    double r = v * mult;
    if (r >= 18446744073709551615.0)
        return -1;
    *bytes = (uint64_t) r;
    return 0;
}

double
cgq_cores (void)
{
    cpu_set_t set;
    if (sched_getaffinity (0, sizeof set, &set) == 0 && CPU_COUNT (&set) > 0)
        return CPU_COUNT (&set);
    long n = sysconf (_SC_NPROCESSORS_ONLN);
    return n > 0 ? (double) n : 1;
}

int
cgq_mkdir_p (const char *dir)
{
    char *p = cgq_xstrdup (dir);
    int rc = 0;
    for (char *q = p + 1; *q; q++) {
        if (*q != '/')
            continue;
        *q = 0;
        if (mkdir (p, 0755) < 0 && errno != EEXIST) {
            rc = -1;
            break;
        }
        *q = '/';
    }
    if (rc == 0 && mkdir (p, 0755) < 0 && errno != EEXIST)
        rc = -1;
    int saved = errno;
    free (p);
    errno = saved;
    return rc;
}

char *
cgq_self_dir (void)
{
    char path[4096];
    ssize_t n = readlink ("/proc/self/exe", path, sizeof path - 1);
    if (n <= 0)
        return NULL;
    path[n] = 0;
    char *slash = strrchr (path, '/');
    if (!slash)
        return NULL;
    *slash = 0;
    return cgq_xstrdup (path);
}

char *
cgq_which (const char *name)
{
    const char *path = getenv ("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    const char *p = path;
    while (*p) {
        const char *colon = strchr (p, ':');
        size_t len = colon ? (size_t) (colon - p) : strlen (p);
        char *cand = cgq_xasprintf ("%.*s/%s", (int) len, len ? p : ".", name);
        if (access (cand, X_OK) == 0)
            return cand;
        free (cand);
        p += len;
        if (*p == ':')
            p++;
    }
    return NULL;
}

int
cgq_rm_at (int parent_fd, const char *name)
{
    int fd = openat (parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return unlinkat (parent_fd, name, 0) < 0 && errno != ENOENT ? -1 : 0;
    DIR *d = fdopendir (fd);
    if (!d) {
        close (fd);
        return -1;
    }
    int rc = 0;
    struct dirent *e;
    while ((e = readdir (d))) {
        if (!strcmp (e->d_name, ".") || !strcmp (e->d_name, ".."))
            continue;
        if (cgq_rm_at (dirfd (d), e->d_name) < 0)
            rc = -1;
    }
    closedir (d);
    if (unlinkat (parent_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
        rc = -1;
    return rc;
}

int
cgq_rm_tree (const char *path)
{
    return cgq_rm_at (AT_FDCWD, path);
}

void
cgq_sweep_dead (const char *dir, const char *prefix)
{
    DIR *d = opendir (dir);
    if (!d)
        return;
    size_t plen = strlen (prefix);
    struct dirent *e;
    while ((e = readdir (d))) {
        if (strncmp (e->d_name, prefix, plen) != 0)
            continue;
        char *end;
        long pid = strtol (e->d_name + plen, &end, 10);
        if (*end || pid <= 0)
            continue;
        if (pid != (long) getpid () && (kill ((pid_t) pid, 0) == 0 || errno != ESRCH))
            continue;
        cgq_rm_at (dirfd (d), e->d_name);
    }
    closedir (d);
}
