// util: allocation that aborts on out-of-memory, clocks, a growable buffer,
// and the small parsers (durations, sizes) shared by every program.
#ifndef CGQ_UTIL_H
#define CGQ_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

// Out of memory aborts with the size that failed; these never return NULL.
void *cgq_xmalloc (size_t size);
void *cgq_xcalloc (size_t n, size_t size);
void *cgq_xrealloc (void *p, size_t size);
char *cgq_xstrdup (const char *s);
char *cgq_xstrndup (const char *s, size_t n);
// cgq_xasprintf returns a new string; caller frees. cgq_xvasprintf is the
// same for a va_list (a printf-like function's own arguments).
char *cgq_xasprintf (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));
char *cgq_xvasprintf (const char *fmt, va_list ap) __attribute__ ((format (printf, 1, 0)));

// Monotonic milliseconds (for timers) and microseconds (for latencies), and
// wall-clock seconds (for Redis).
int64_t cgq_now_ms (void);
int64_t cgq_now_us (void);
double cgq_wall_s (void);
// CPU milliseconds the calling thread has used: what a test bounds when it
// guards against a blow-up (quadratic parsing, an uncapped fit), since other
// processes on a loaded machine do not add to it as they add to wall time.
int64_t cgq_thread_cpu_ms (void);

// cgq_fmt_double writes v as the shortest of %.15g/%.17g that reads back as
// v, so 0.1 prints as 0.1. buf must hold 32 bytes. Returns buf.
char *cgq_fmt_double (char *buf, double v);
// cgq_fmt_u64 writes v in decimal into buf (at least 21 bytes), without
// printf, and returns buf.
char *cgq_fmt_u64 (char *buf, uint64_t v);

// cgq_round15 rounds v to 15 significant digits, so that its %.15g text reads
// back as the same double. Sampled params are rounded this way.
double cgq_round15 (double v);

// A growable byte buffer, always NUL-terminated. Embed it; _fini frees data.
typedef struct {
    char *data;
    size_t len;
    size_t cap;
} cgq_buf_t;

void cgq_buf_init (cgq_buf_t *b);
void cgq_buf_fini (cgq_buf_t *b);
void cgq_buf_reset (cgq_buf_t *b);
void cgq_buf_append (cgq_buf_t *b, const void *data, size_t len);
// cgq_buf_reserve makes room for extra more bytes (and the NUL) at the end.
void cgq_buf_reserve (cgq_buf_t *b, size_t extra);
void cgq_buf_puts (cgq_buf_t *b, const char *s);
void cgq_buf_printf (cgq_buf_t *b, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
// cgq_buf_read appends everything f still holds to b. Returns 0, or -1 with
// errno set if reading failed (what was read stays in b).
int cgq_buf_read (cgq_buf_t *b, FILE *f);
// cgq_buf_take returns the data (caller frees) and leaves b empty.
char *cgq_buf_take (cgq_buf_t *b);

// cgq_sh_quote returns s quoted for /bin/sh: unchanged when it holds only
// [A-Za-z0-9._,:/=+@%-] (and is not empty), else in single quotes. Caller frees.
char *cgq_sh_quote (const char *s);

// cgq_parse_duration reads "90", "90s", "500ms", "30m", "2h", "1.5h", "1d"
// into seconds (a bare number is seconds). Returns 0, or -1 if malformed.
int cgq_parse_duration (const char *s, double *seconds);

// cgq_parse_bytes reads "1024", "512K", "4G", "4GB", "1.5GiB" (powers of 1024)
// into bytes. Returns 0, or -1 if malformed.
int cgq_parse_bytes (const char *s, uint64_t *bytes);

// cgq_parse_u64 / cgq_parse_double read a whole string; -1 on junk or overflow.
int cgq_parse_u64 (const char *s, uint64_t *out);
int cgq_parse_double (const char *s, double *out);

// cgq_cores returns the number of CPUs this process may run on (its
// affinity mask, so a container's cpuset counts), at least 1.
double cgq_cores (void);

// cgq_mkdir_p creates dir and its parents (mode 0755). 0 or -1 with errno.
int cgq_mkdir_p (const char *dir);

// cgq_self_dir returns the directory of the running executable (from
// /proc/self/exe), or NULL. Caller frees. Used to find sibling binaries.
char *cgq_self_dir (void);

// cgq_which finds the executable name on $PATH (a default path when it is
// unset). Caller frees; NULL when absent.
char *cgq_which (const char *name);

// cgq_rm_tree removes path and everything below it, following no link
// (a link is removed, not what it points to). 0, or -1 with errno (what
// could be removed is). cgq_rm_at does it for name in the directory
// parent_fd (AT_FDCWD: the working directory).
int cgq_rm_tree (const char *path);
int cgq_rm_at (int parent_fd, const char *name);

// cgq_sweep_dead removes what processes that no longer run left in dir:
// every DIR/PREFIX<pid> whose pid is gone, and one of this process's pid
// (left by an earlier process that had it). Errors are ignored.
void cgq_sweep_dead (const char *dir, const char *prefix);

#endif
