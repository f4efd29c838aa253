/* cgq_report.h: the trial side of a cgq job for C and C++, header only.
 *
 * A cgq trial reports metrics by writing one JSON object per line to the file
 * descriptor named by $CGQ_REPORT_FD (fd 3 under cgq-worker); the last line
 * is the trial's result unless it writes result.json in $CGQ_TRIAL_DIR
 * (docs/architecture.md, "Trial process contract"). Three ways to write one:
 *
 *     #include "cgq_report.h"
 *
 *     cgq_report_num ("epoch", 3);                        // {"epoch":3}
 *     cgq_report ("{\"epoch\": %d, \"loss\": %g}", e, l);  // printf-like; you write the JSON
 *
 *     cgq_line_t l;                                       // a line built field by field,
 *     cgq_line_begin (&l);                                //   names and text escaped,
 *     cgq_line_int (&l, "epoch", e);                      //   NaN/Inf written as null
 *     cgq_line_num (&l, "val_loss", loss);
 *     cgq_line_str (&l, "phase", "val");
 *     cgq_line_send (&l);                                 // {"epoch":3,"val_loss":0.25,"phase":"val"}
 *
 * cgq_report, cgq_report_num and cgq_line_send return 0, or -1 with errno
 * set (EMSGSIZE: the line would not fit CGQ_REPORT_MAX bytes, nothing is
 * written). No allocation, no stdio
 * buffering: each line goes out with write(2) as one piece (a pipe write of
 * at most 4096 bytes is atomic, so lines from threads or forked children
 * never interleave). Outside cgq (no CGQ_REPORT_FD, or one that names no
 * open descriptor) lines go to stderr, so the program also runs by hand.
 *
 * Safe to include in C (C99 or later) and C++ (C++11 or later); every
 * function is static inline. Needs POSIX (write, fcntl). Define
 * CGQ_REPORT_MAX before including to change the largest line (default 4096
 * bytes, newline included; lines above 4096 are no longer atomic on a pipe).
 */
#ifndef CGQ_REPORT_H
#define CGQ_REPORT_H

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <unistd.h>

#ifndef CGQ_REPORT_MAX
#define CGQ_REPORT_MAX 4096
#endif

#if defined(__GNUC__) || defined(__clang__)
#define CGQ_REPORT_PRINTF_(f, a) __attribute__ ((format (printf, f, a)))
#define CGQ_REPORT_UNUSED_ __attribute__ ((unused))
#else
#define CGQ_REPORT_PRINTF_(f, a)
#define CGQ_REPORT_UNUSED_
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* cgq_report_fd: the descriptor reports go to: $CGQ_REPORT_FD when it names
 * an open descriptor, else 2 (stderr). */
static inline int CGQ_REPORT_UNUSED_
cgq_report_fd (void)
{
    const char *s = getenv ("CGQ_REPORT_FD");
    char *end = NULL;
    long fd;
    if (!s || !*s)
        return 2;
    errno = 0;
    fd = strtol (s, &end, 10);
    if (errno || end == s || *end || fd < 0 || fd > 1048576)
        return 2;
    if (fcntl ((int) fd, F_GETFD) == -1)
        return 2;
    return (int) fd;
}

/* cgq_report_write: writes len bytes (one whole line, newline included) to
 * the report descriptor, retrying on EINTR and short writes. */
static inline int CGQ_REPORT_UNUSED_
cgq_report_write (const char *line, size_t len)
{
    int fd = cgq_report_fd ();
    while (len > 0) {
        ssize_t n = write (fd, line, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        line += n;
        len -= (size_t) n;
    }
    return 0;
}

/* cgq_report: printf-like; fmt must produce one JSON object (a newline is
 * added when missing). The caller is responsible for valid JSON: %g of a NaN
 * gives "nan", which the worker rejects (it logs a warning and skips the
 * line); use cgq_line_num for values that may not be finite. */
static inline int CGQ_REPORT_UNUSED_ CGQ_REPORT_PRINTF_ (1, 2)
cgq_report (const char *fmt, ...)
{
    char buf[CGQ_REPORT_MAX];
    va_list ap;
    int n;
    size_t len;
    va_start (ap, fmt);
    n = vsnprintf (buf, sizeof buf, fmt, ap);
    va_end (ap);
    if (n < 0)
        return -1;
    len = (size_t) n;
    /* truncated, or no room for the newline: write nothing rather than half a line */
    if (len >= sizeof buf || (len + 1 >= sizeof buf && (len == 0 || buf[len - 1] != '\n'))) {
        errno = EMSGSIZE;
        return -1;
    }
    if (len == 0 || buf[len - 1] != '\n')
        buf[len++] = '\n';
    return cgq_report_write (buf, len);
}

/* ---- building one line field by field ---- */

typedef struct {
    char buf[CGQ_REPORT_MAX];
    size_t len;
    int fields;
    int overflow;
} cgq_line_t;

static inline void CGQ_REPORT_UNUSED_
cgq_line_begin (cgq_line_t *l)
{
    l->buf[0] = '{';
    l->len = 1;
    l->fields = 0;
    l->overflow = 0;
}

/* room for the closing "}\n" is always kept */
static inline void CGQ_REPORT_UNUSED_
cgq_line_raw_ (cgq_line_t *l, const char *s, size_t n)
{
    if (l->overflow || l->len + n + 2 > sizeof l->buf) {
        l->overflow = 1;
        return;
    }
    memcpy (l->buf + l->len, s, n);
    l->len += n;
}

static inline void CGQ_REPORT_UNUSED_
cgq_line_text_ (cgq_line_t *l, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *) (s ? s : "");
    cgq_line_raw_ (l, "\"", 1);
    for (; *p; p++) {
        char esc[6];
        if (*p == '"' || *p == '\\') {
            esc[0] = '\\';
            esc[1] = (char) *p;
            cgq_line_raw_ (l, esc, 2);
        } else if (*p == '\n') {
            cgq_line_raw_ (l, "\\n", 2);
        } else if (*p == '\t') {
            cgq_line_raw_ (l, "\\t", 2);
        } else if (*p < 0x20 || *p == 0x7f) {
            esc[0] = '\\';
            esc[1] = 'u';
            esc[2] = '0';
            esc[3] = '0';
            esc[4] = hex[*p >> 4];
            esc[5] = hex[*p & 15];
            cgq_line_raw_ (l, esc, 6);
        } else {
            cgq_line_raw_ (l, (const char *) p, 1);
        }
    }
    cgq_line_raw_ (l, "\"", 1);
}

static inline void CGQ_REPORT_UNUSED_
cgq_line_key_ (cgq_line_t *l, const char *name)
{
    if (l->fields++ > 0)
        cgq_line_raw_ (l, ",", 1);
    cgq_line_text_ (l, name);
    cgq_line_raw_ (l, ":", 1);
}

/* a double as the shortest of %.15g / %.16g / %.17g that reads back as the
 * same value; NaN and infinities as null (JSON has neither). */
static inline void CGQ_REPORT_UNUSED_
cgq_line_num (cgq_line_t *l, const char *name, double v)
{
    char num[40];
    int p, n = 0;
    cgq_line_key_ (l, name);
    if (!(v == v) || v > DBL_MAX || v < -DBL_MAX) {
        cgq_line_raw_ (l, "null", 4);
        return;
    }
    for (p = 15; p <= 17; p++) {
        n = snprintf (num, sizeof num, "%.*g", p, v);
        if (strtod (num, NULL) == v)
            break;
    }
    cgq_line_raw_ (l, num, (size_t) n);
}

static inline void CGQ_REPORT_UNUSED_
cgq_line_int (cgq_line_t *l, const char *name, long long v)
{
    char num[32];
    int n = snprintf (num, sizeof num, "%lld", v);
    cgq_line_key_ (l, name);
    cgq_line_raw_ (l, num, (size_t) n);
}

static inline void CGQ_REPORT_UNUSED_
cgq_line_bool (cgq_line_t *l, const char *name, int v)
{
    cgq_line_key_ (l, name);
    if (v)
        cgq_line_raw_ (l, "true", 4);
    else
        cgq_line_raw_ (l, "false", 5);
}

/* text, escaped for JSON (bytes >= 0x80 are copied: pass UTF-8) */
static inline void CGQ_REPORT_UNUSED_
cgq_line_str (cgq_line_t *l, const char *name, const char *value)
{
    cgq_line_key_ (l, name);
    cgq_line_text_ (l, value);
}

/* cgq_line_send closes the object and writes the line; -1 with errno
 * EMSGSIZE when it did not fit (nothing written). l may be reused after
 * cgq_line_begin. */
static inline int CGQ_REPORT_UNUSED_
cgq_line_send (cgq_line_t *l)
{
    if (l->overflow) {
        errno = EMSGSIZE;
        return -1;
    }
    l->buf[l->len++] = '}';
    l->buf[l->len++] = '\n';
    return cgq_report_write (l->buf, l->len);
}

/* cgq_report_num: a one-metric report, {"name":value}. */
static inline int CGQ_REPORT_UNUSED_
cgq_report_num (const char *name, double value)
{
    cgq_line_t l;
    cgq_line_begin (&l);
    cgq_line_num (&l, name, value);
    return cgq_line_send (&l);
}

/* Checkpoints (docs/architecture.md, "Checkpoints"). A trial writes what it
 * needs to resume into cgq_checkpoint_dir () and then announces it:
 *
 *     const char *dir = cgq_checkpoint_dir ();       // $CGQ_CHECKPOINT_DIR
 *     double from;
 *     int epoch = cgq_resume_step (&from) ? (int) from + 1 : 1;  // 1: resumed
 *     ... load DIR/model.bin when resumed ...
 *     for (; epoch <= 10; epoch++) {
 *         ... train, write DIR/model.bin ...
 *         cgq_checkpoint ("epoch", epoch);            // {"checkpoint":true,"epoch":N}
 *     }
 *
 * cgq_checkpoint writes the announcement, then waits (up to timeout_s; 0:
 * 60 s) until the worker has taken the directory over and put an empty one
 * in its place: what is sealed is what the directory held then, and writing
 * the next checkpoint cannot change it. Returns 0, or -1 with errno
 * (ETIMEDOUT: the directory was not taken over in time). Outside cgq the
 * line goes to stderr and nothing waits. */

/* cgq_checkpoint_dir: $CGQ_CHECKPOINT_DIR, or "checkpoint" (relative to the
 * current directory) outside cgq, where the program makes it itself. */
static inline const char *CGQ_REPORT_UNUSED_
cgq_checkpoint_dir (void)
{
    const char *d = getenv ("CGQ_CHECKPOINT_DIR");
    return d && *d ? d : "checkpoint";
}

/* cgq_resume_step: 1 with *step the step this attempt resumes from
 * ($CGQ_RESUME_STEP, the number the checkpoint was announced with), 0 on a
 * fresh start. */
static inline int CGQ_REPORT_UNUSED_
cgq_resume_step (double *step)
{
    const char *s = getenv ("CGQ_RESUME_STEP");
    char *end = NULL;
    double v;
    if (!s || !*s)
        return 0;
    v = strtod (s, &end);
    if (end == s || *end)
        return 0;
    if (step)
        *step = v;
    return 1;
}

static inline int CGQ_REPORT_UNUSED_
cgq_checkpoint_wait_ (const char *dir, int had, dev_t dev, ino_t ino, double timeout_s)
{
    struct stat st;
    long nap_us = 1000; /* 1 ms, doubling to 50 ms */
    double waited = 0;
    if (timeout_s <= 0)
        timeout_s = 60;
    for (;;) {
        struct timeval tv;
        if (stat (dir, &st) == 0 && (!had || st.st_dev != dev || st.st_ino != ino))
            return 0;
        if (waited >= timeout_s) {
            errno = ETIMEDOUT;
            return -1;
        }
        tv.tv_sec = 0;
        tv.tv_usec = nap_us;
        select (0, NULL, NULL, NULL, &tv); /* sleeps, in C99 with POSIX alone */
        waited += (double) nap_us / 1e6;
        if (nap_us < 50000)
            nap_us *= 2;
    }
}

/* cgq_checkpoint_line announces a checkpoint whose step is the line l (made
 * with cgq_line_begin and cgq_line_int/num/...; "checkpoint": true is
 * added), then waits as above. */
static inline int CGQ_REPORT_UNUSED_
cgq_checkpoint_line (cgq_line_t *l, double timeout_s)
{
    const char *dir = cgq_checkpoint_dir ();
    struct stat st;
    int had = stat (dir, &st) == 0, fd = cgq_report_fd ();
    cgq_line_bool (l, "checkpoint", 1);
    if (cgq_line_send (l) < 0)
        return -1;
    if (fd == 2)
        return 0; /* outside cgq: nobody takes it over */
    return cgq_checkpoint_wait_ (dir, had, had ? st.st_dev : 0, had ? st.st_ino : 0, timeout_s);
}

/* cgq_checkpoint: a checkpoint at one numeric step, {"checkpoint":true,"epoch":12}. */
static inline int CGQ_REPORT_UNUSED_
cgq_checkpoint (const char *name, double step)
{
    cgq_line_t l;
    cgq_line_begin (&l);
    cgq_line_num (&l, name, step);
    return cgq_checkpoint_line (&l, 0);
}

#ifdef __cplusplus
}
#endif

#endif /* CGQ_REPORT_H */
