#include "confine.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

#define S_STATE_DIR ".cgq-confine" // under the workdir: one state file per worker
#define S_CG_PREFIX "cgq-worker-"  // the worker's cgroup: cgq-worker-PID-START
#define S_MAX_SLOTS 4096           // trials at once (the coordinator sends a node at most 1024)
#define S_SUFFIX_MAX 232           // a trial directory after the workdir, NUL included
#define S_MAX_PROCS (1 << 18)      // processes one /proc scan holds
#define S_MAX_KILLED (1 << 16)     // pids one kill remembers, so as not to count them twice
#define S_KILL_PASSES 16           // SIGKILL rounds, each catching what forked during the last
#define S_CG_DEPTH 16              // cgroup levels walked below a leaf (trials may nest their own)
#define S_PF_KTHREAD 0x00200000    // /proc/PID/stat flags: a kernel thread
#define S_END_WAIT_MS 50           // how long ending a trial waits for its leaf to empty
#define S_REAPER_WAIT_MS 5000      // how long destroy waits for the reaper
#define S_REAPER_EMPTY_MS 30000    // how long the reaper waits for killed trials to be gone

// ---------------------------------------------------------------------------
// Async-signal-safe helpers. The reaper is forked from a worker that may have
// ZeroMQ threads and never execs, so it may only make system calls and use
// memory it already has: no malloc, no stdio. The worker uses the same code
// for the same jobs.

// s_cat appends s to the string in buf (cap bytes); false when it does not fit.
static bool
s_cat (char *buf, size_t cap, const char *s)
{
    size_t n = strlen (buf), m = strlen (s);
    if (n + m + 1 > cap)
        return false;
    memcpy (buf + n, s, m + 1);
    return true;
}

// s_utoa writes v in decimal to buf (24 bytes) and returns buf.
static char *
s_utoa (char *buf, uint64_t v)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char) ('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        buf[i] = tmp[n - 1 - i];
    buf[n] = 0;
    return buf;
}

// s_path writes a/b/c to buf (b and c may be NULL); false when it does not fit.
static bool
s_path (char *buf, size_t cap, const char *a, const char *b, const char *c)
{
    buf[0] = 0;
    return s_cat (buf, cap, a) && (!b || (s_cat (buf, cap, "/") && s_cat (buf, cap, b)))
           && (!c || (s_cat (buf, cap, "/") && s_cat (buf, cap, c)));
}

static void
s_proc_path (char *buf, size_t cap, pid_t pid, const char *file)
{
    char num[24];
    s_path (buf, cap, "/proc", s_utoa (num, (uint64_t) pid), file);
}

// s_read_text reads at most cap - 1 bytes of path into buf and ends them with
// NUL; returns their count, or -1 when path cannot be opened.
static ssize_t
s_read_text (const char *path, char *buf, size_t cap)
{
    int fd;
    do
        fd = open (path, O_RDONLY | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return -1;
    size_t len = 0;
    while (len + 1 < cap) {
        ssize_t n = read (fd, buf + len, cap - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t) n;
    }
    close (fd);
    buf[len] = 0;
    return (ssize_t) len;
}

// s_write_text writes text to the existing file path (a cgroup file); 0, or
// -1 with errno.
static int
s_write_text (const char *path, const char *text)
{
    int fd;
    do
        fd = open (path, O_WRONLY | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return -1;
    size_t len = strlen (text);
    ssize_t n;
    do
        n = write (fd, text, len);
    while (n < 0 && errno == EINTR);
    int saved = errno;
    close (fd);
    errno = saved;
    return n == (ssize_t) len ? 0 : -1;
}

static int64_t
s_mono_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
s_sleep_ms (int ms)
{
    struct timespec ts = {ms / 1000, (long) (ms % 1000) * 1000000L};
    while (nanosleep (&ts, &ts) < 0 && errno == EINTR)
        ;
}

// s_parse_pid: the pid that name spells (digits only), or 0.
static pid_t
s_parse_pid (const char *name)
{
    uint64_t v = 0;
    if (!*name)
        return 0;
    for (const char *p = name; *p; p++) {
        if (*p < '0' || *p > '9' || v > INT32_MAX / 10)
            return 0;
        v = v * 10 + (uint64_t) (*p - '0');
    }
    return v <= INT32_MAX ? (pid_t) v : 0;
}

// One log line built without malloc, for the reaper.
typedef struct {
    char text[1536];
    size_t len;
} s_line_t;

static void
s_line_add (s_line_t *l, const char *s)
{
    size_t m = strlen (s);
    if (m > sizeof l->text - 1 - l->len)
        m = sizeof l->text - 1 - l->len;
    memcpy (l->text + l->len, s, m);
    l->len += m;
    l->text[l->len] = 0;
}

static void
s_line_num (s_line_t *l, uint64_t v)
{
    char num[24];
    s_line_add (l, s_utoa (num, v));
}

// s_line_pad adds v with at least width digits.
static void
s_line_pad (s_line_t *l, uint64_t v, size_t width)
{
    char num[24];
    s_utoa (num, v);
    for (size_t n = strlen (num); n < width; n++)
        s_line_add (l, "0");
    s_line_add (l, num);
}

// s_line_ts adds the UTC time as the logger writes it, 2024-05-01T12:00:00.000Z
// (gmtime_r may take a lock, so the date is computed here: days since
// 1970-01-01 to a proleptic Gregorian date, counting in 400-year eras that
// start on March 1st).
static void
s_line_ts (s_line_t *l)
{
    struct timespec ts;
    clock_gettime (CLOCK_REALTIME, &ts);
    int64_t secs = ts.tv_sec < 0 ? 0 : (int64_t) ts.tv_sec;
    int64_t days = secs / 86400, rem = secs % 86400;
    int64_t z = days + 719468; // days since 0000-03-01
    int64_t era = z / 146097, doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153; // month from March = 0
    int64_t day = doy - (153 * mp + 2) / 5 + 1;
    int64_t month = mp < 10 ? mp + 3 : mp - 9;
    int64_t year = yoe + era * 400 + (month <= 2);
    s_line_pad (l, (uint64_t) year, 4);
    s_line_add (l, "-");
    s_line_pad (l, (uint64_t) month, 2);
    s_line_add (l, "-");
    s_line_pad (l, (uint64_t) day, 2);
    s_line_add (l, "T");
    s_line_pad (l, (uint64_t) (rem / 3600), 2);
    s_line_add (l, ":");
    s_line_pad (l, (uint64_t) (rem / 60 % 60), 2);
    s_line_add (l, ":");
    s_line_pad (l, (uint64_t) (rem % 60), 2);
    s_line_add (l, ".");
    s_line_pad (l, (uint64_t) (ts.tv_nsec / 1000000), 3);
    s_line_add (l, "Z");
}

// s_line_emit writes msg to stderr as one line of the worker's log format
// (text or JSON), when level passes --log-level.
static void
s_line_emit (int level, bool json, const s_line_t *msg)
{
    static const char *names[] = {"debug", "info", "warn", "error"};
    if (cgq_log_level > level || level < 0 || level > 3)
        return;
    s_line_t out = {.len = 0};
    out.text[0] = 0;
    if (json) {
        s_line_add (&out, "{\"ts\":\"");
        s_line_ts (&out);
        s_line_add (&out, "\",\"level\":\"");
        s_line_add (&out, names[level]);
        s_line_add (&out, "\",\"program\":\"cgq-worker\",\"pid\":");
        s_line_num (&out, (uint64_t) getpid ());
        s_line_add (&out, ",\"msg\":\"");
        for (size_t i = 0; i < msg->len; i++) {
            unsigned char c = (unsigned char) msg->text[i];
            char one[2] = {(char) c, 0};
            if (c == '"' || c == '\\') {
                s_line_add (&out, "\\");
                s_line_add (&out, one);
            }
            else if (c < 0x20)
                s_line_add (&out, " ");
            else
                s_line_add (&out, one);
        }
        s_line_add (&out, "\"}");
    }
    else {
        s_line_ts (&out);
        s_line_add (&out, " cgq-worker[");
        s_line_num (&out, (uint64_t) getpid ());
        s_line_add (&out, "] ");
        s_line_add (&out, names[level]);
        s_line_add (&out, ": ");
        s_line_add (&out, msg->text);
    }
    s_line_add (&out, "\n");
    (void) !write (2, out.text, out.len);
}

// ---------------------------------------------------------------------------
// Processes, from /proc (async-signal-safe)

typedef struct {
    pid_t pid, ppid, sid;
    char state;   // R, S, D, Z, ...
    bool kthread; // a kernel thread
    bool matched; // belongs to a trial being signalled
    uint64_t start; // clock ticks after boot; with pid, names one process for good
} s_proc_t;

// s_stat reads /proc/PID/stat into *p; false when pid does not exist.
static bool
s_stat (pid_t pid, s_proc_t *p)
{
    char path[64], buf[1024];
    s_proc_path (path, sizeof path, pid, "stat");
    if (s_read_text (path, buf, sizeof buf) <= 0)
        return false;
    // The command name (field 2) may hold anything, ')' included.
    const char *s = strrchr (buf, ')');
    if (!s || s[1] != ' ' || !s[2])
        return false;
    s += 2;
    memset (p, 0, sizeof *p);
    p->pid = pid;
    p->state = *s++;
    int64_t f[23] = {0}; // fields 4 (ppid) to 22 (starttime), as proc(5) numbers them
    for (int i = 4; i <= 22; i++) {
        while (*s == ' ')
            s++;
        bool neg = *s == '-';
        if (neg)
            s++;
        if (*s < '0' || *s > '9')
            return false;
        uint64_t v = 0;
        while (*s >= '0' && *s <= '9')
            v = v * 10 + (uint64_t) (*s++ - '0');
        f[i] = neg ? -(int64_t) v : (int64_t) v;
    }
    p->ppid = (pid_t) f[4];
    p->sid = (pid_t) f[6];
    p->kthread = (f[9] & S_PF_KTHREAD) != 0;
    p->start = (uint64_t) f[22];
    return true;
}

// s_alive: the process pid started at start runs (a zombie does not).
static bool
s_alive (pid_t pid, uint64_t start)
{
    s_proc_t p;
    return pid > 0 && s_stat (pid, &p) && p.state != 'Z' && p.state != 'X' && p.start == start;
}

// s_env_trial_dir copies the value of CGQ_TRIAL_DIR in pid's environment (as
// it was at its last exec, which setenv does not change) to out; false when
// there is none, it is unreadable or it does not fit.
static bool
s_env_trial_dir (pid_t pid, char *out, size_t cap)
{
    static const char key[] = "CGQ_TRIAL_DIR=";
    const size_t klen = sizeof key - 1;
    char path[64];
    s_proc_path (path, sizeof path, pid, "environ");
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    size_t pos = 0, olen = 0; // position in the current entry; bytes of its value
    bool candidate = true;    // the current entry is (so far) CGQ_TRIAL_DIR=...
    bool found = false, over = false;
    char chunk[4096];
    while (!found) {
        ssize_t n = read (fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        for (ssize_t i = 0; i < n && !found; i++) {
            char c = chunk[i];
            if (c == 0) {
                if (candidate && pos >= klen)
                    found = true; // the first one is what getenv sees
                else {
                    pos = olen = 0;
                    candidate = true;
                    over = false;
                }
                continue;
            }
            if (candidate) {
                if (pos < klen)
                    candidate = c == key[pos];
                else if (olen + 1 < cap)
                    out[olen++] = c;
                else
                    over = true;
            }
            pos++;
        }
    }
    if (!found && candidate && pos >= klen)
        found = true; // the last entry, without its NUL
    close (fd);
    out[olen] = 0;
    return found && !over;
}

// A trial as the pgroup kill sees it.
typedef struct {
    pid_t pid;          // its main process, leader of its session; 0: not started
    uint64_t start;     // that process's start time, to tell a pid that was reused
    bool strict;        // count its session only while the main process itself runs
    const char *dir_a;  // the trial directory is dir_a followed by dir_b
    const char *dir_b;
    bool session_ok;    // (set by s_match) its session's members are its own
} s_target_t;

static bool
s_dir_is (const char *value, const s_target_t *t)
{
    size_t a = strlen (t->dir_a);
    return strncmp (value, t->dir_a, a) == 0 && strcmp (value + a, t->dir_b) == 0;
}

// Scratch space for scans, mapped once (it is too big for the stack and the
// reaper cannot malloc).
typedef struct {
    s_proc_t *procs; // S_MAX_PROCS
    size_t n;
    pid_t *killed; // S_MAX_KILLED
    size_t n_killed;
    pid_t *matched; // S_MAX_KILLED: pids matched so far, for the descendants
    size_t n_matched;
} s_scan_t;

static size_t
s_scan_bytes (void)
{
    return S_MAX_PROCS * sizeof (s_proc_t) + 2 * S_MAX_KILLED * sizeof (pid_t);
}

static bool
s_scan_reserve (s_scan_t *sc)
{
    if (sc->procs)
        return true;
    void *p = mmap (NULL, s_scan_bytes (), PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return false;
    sc->procs = p;
    sc->killed = (pid_t *) (sc->procs + S_MAX_PROCS);
    sc->matched = sc->killed + S_MAX_KILLED;
    return true;
}

static void
s_scan_release (s_scan_t *sc)
{
    if (sc->procs)
        munmap (sc->procs, s_scan_bytes ());
    memset (sc, 0, sizeof *sc);
}

// s_scan reads every process of /proc into sc.
static bool
s_scan (s_scan_t *sc)
{
    sc->n = 0;
    int fd = open ("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return false;
    char buf[8192] __attribute__ ((aligned (8)));
    for (;;) {
        ssize_t n = getdents64 (fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        for (ssize_t off = 0; off < n;) {
            const struct dirent64 *d = (const struct dirent64 *) (buf + off);
            off += d->d_reclen;
            pid_t pid = s_parse_pid (d->d_name);
            if (pid > 0 && sc->n < S_MAX_PROCS && s_stat (pid, &sc->procs[sc->n]))
                sc->n++;
        }
    }
    close (fd);
    return true;
}

static bool
s_has (const pid_t *set, size_t n, pid_t pid)
{
    for (size_t i = 0; i < n; i++)
        if (set[i] == pid)
            return true;
    return false;
}

static void
s_matched_add (s_scan_t *sc, s_proc_t *p)
{
    p->matched = true;
    if (sc->n_matched < S_MAX_KILLED)
        sc->matched[sc->n_matched++] = p->pid;
}

// s_match marks in sc the processes of the targets: the members of a
// target's session, the processes whose environment names a target's
// directory (only children of env_parent are read, or every process when it
// is 0), and whatever descends from those. Never me, pid 1 or kernel threads.
static void
s_match (s_scan_t *sc, s_target_t *t, size_t nt, pid_t env_parent, pid_t me)
{
    // A session id is the pid of the process that made the session, and the
    // kernel does not hand that number out again while a member lives. So
    // unless the number now belongs to a process with another start time
    // (the session died out and the pid was reused), members are the trial's.
    for (size_t k = 0; k < nt; k++) {
        t[k].session_ok = t[k].pid > 0 && !t[k].strict;
        for (size_t i = 0; i < sc->n && t[k].pid > 0; i++)
            if (sc->procs[i].pid == t[k].pid) {
                bool same = sc->procs[i].start == t[k].start;
                bool running = sc->procs[i].state != 'Z' && sc->procs[i].state != 'X';
                t[k].session_ok = same && (!t[k].strict || running);
                break;
            }
    }
    char value[PATH_MAX];
    sc->n_matched = 0;
    for (size_t i = 0; i < sc->n; i++) {
        s_proc_t *p = &sc->procs[i];
        p->matched = false;
        if (p->pid == me || p->pid == 1 || p->kthread)
            continue;
        for (size_t k = 0; k < nt && !p->matched; k++)
            if (t[k].session_ok && p->sid == t[k].pid)
                s_matched_add (sc, p);
        if (p->matched || p->state == 'Z' || (env_parent > 0 && p->ppid != env_parent))
            continue;
        if (s_env_trial_dir (p->pid, value, sizeof value))
            for (size_t k = 0; k < nt && !p->matched; k++)
                if (s_dir_is (value, &t[k]))
                    s_matched_add (sc, p);
    }
    // Descendants, one generation per round.
    for (bool more = sc->n_matched > 0; more;) {
        more = false;
        for (size_t i = 0; i < sc->n; i++) {
            s_proc_t *p = &sc->procs[i];
            if (p->matched || p->pid == me || p->pid == 1 || p->kthread)
                continue;
            if (s_has (sc->matched, sc->n_matched, p->ppid)) {
                s_matched_add (sc, p);
                more = true;
            }
        }
    }
}

// s_kill_targets sends sig to every process of the targets (see s_match) and
// returns how many it signalled. SIGKILL goes round again while a round finds
// a process it had not killed yet (one forked before its parent died); a
// killed process cannot fork, so the rounds end.
static size_t
s_kill_targets (s_scan_t *sc, s_target_t *t, size_t nt, int sig, pid_t env_parent, pid_t me)
{
    size_t total = 0;
    sc->n_killed = 0;
    if (nt == 0 || !s_scan_reserve (sc))
        return 0;
    for (int pass = 0; pass < S_KILL_PASSES; pass++) {
        if (!s_scan (sc))
            break;
        s_match (sc, t, nt, env_parent, me);
        size_t fresh = 0;
        for (size_t i = 0; i < sc->n; i++) {
            s_proc_t *p = &sc->procs[i];
            if (!p->matched || p->state == 'Z' || p->state == 'X')
                continue;
            if (sig == SIGKILL && s_has (sc->killed, sc->n_killed, p->pid))
                continue;
            if (kill (p->pid, sig) == 0) {
                fresh++;
                if (sc->n_killed < S_MAX_KILLED)
                    sc->killed[sc->n_killed++] = p->pid;
            }
        }
        total += fresh;
        if (sig != SIGKILL || fresh == 0)
            break;
    }
    return total;
}

// ---------------------------------------------------------------------------
// cgroup v2 (async-signal-safe)

typedef void (s_cg_fn) (const char *dir, void *arg);

// s_cg_walk calls fn on every cgroup below the one at path, deepest first,
// then on path itself (so fn may remove them). path is a PATH_MAX buffer,
// restored on return.
static void
s_cg_walk (char *path, int depth, s_cg_fn *fn, void *arg)
{
    int fd = depth < S_CG_DEPTH ? open (path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (fd >= 0) {
        size_t len = strlen (path);
        char buf[2048] __attribute__ ((aligned (8)));
        for (;;) {
            ssize_t n = getdents64 (fd, buf, sizeof buf);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                break;
            for (ssize_t off = 0; off < n;) {
                const struct dirent64 *d = (const struct dirent64 *) (buf + off);
                off += d->d_reclen;
                if ((d->d_type != DT_DIR && d->d_type != DT_UNKNOWN) || !strcmp (d->d_name, ".")
                    || !strcmp (d->d_name, ".."))
                    continue;
                if (s_cat (path, PATH_MAX, "/") && s_cat (path, PATH_MAX, d->d_name))
                    s_cg_walk (path, depth + 1, fn, arg);
                path[len] = 0;
            }
        }
        close (fd);
    }
    fn (path, arg);
}

typedef struct {
    int sig; // 0: only count
    size_t count;
} s_sig_arg_t;

static void
s_cg_signal_one (s_sig_arg_t *a, uint64_t pid)
{
    if (pid > 0 && pid <= INT32_MAX && (pid_t) pid != getpid () && kill ((pid_t) pid, a->sig) == 0)
        a->count++;
}

// s_cg_signal_fn sends a->sig to every process listed in dir/cgroup.procs.
static void
s_cg_signal_fn (const char *dir, void *arg)
{
    s_sig_arg_t *a = arg;
    char path[PATH_MAX];
    if (!s_path (path, sizeof path, dir, "cgroup.procs", NULL))
        return;
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    char buf[4096];
    uint64_t v = 0; // the number being read; it may go on in the next chunk
    for (;;) {
        ssize_t n = read (fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] >= '0' && buf[i] <= '9' && v < UINT32_MAX)
                v = v * 10 + (uint64_t) (buf[i] - '0');
            else {
                s_cg_signal_one (a, v);
                v = 0;
            }
        }
    }
    s_cg_signal_one (a, v);
    close (fd);
}

static void
s_cg_rmdir_fn (const char *dir, void *arg)
{
    (void) arg;
    rmdir (dir);
}

// s_cg_event reads key's value from dir/cgroup.events ("populated 1"); -1
// when the cgroup is gone or has no such key.
static int
s_cg_event (const char *dir, const char *key)
{
    char path[PATH_MAX], buf[256];
    if (!s_path (path, sizeof path, dir, "cgroup.events", NULL)
        || s_read_text (path, buf, sizeof buf) < 0)
        return -1;
    size_t klen = strlen (key);
    for (const char *line = buf; line && *line;) {
        if (!strncmp (line, key, klen) && line[klen] == ' ')
            return line[klen + 1] == '1' ? 1 : 0;
        line = strchr (line, '\n');
        if (line)
            line++;
    }
    return -1;
}

// s_cg_wait_empty waits up to ms for the cgroup at dir to hold no process;
// true when it is empty or gone.
static bool
s_cg_wait_empty (const char *dir, int ms)
{
    int64_t until = s_mono_ms () + ms;
    for (;;) {
        if (s_cg_event (dir, "populated") <= 0)
            return true;
        if (s_mono_ms () >= until)
            return false;
        s_sleep_ms (2);
    }
}

// s_cg_signal sends sig to every process in the cgroup at dir and below;
// returns how many. (Between reading a pid and signalling it, the process
// may exit and its pid be reused: the narrow race every cgroup manager has
// for signals other than SIGKILL, which goes through cgroup.kill.)
static size_t
s_cg_signal (const char *dir, int sig)
{
    char path[PATH_MAX];
    s_sig_arg_t a = {sig, 0};
    if (s_path (path, sizeof path, dir, NULL, NULL))
        s_cg_walk (path, 0, s_cg_signal_fn, &a);
    return a.count;
}

// s_cg_count counts the processes in the cgroup at dir and below (signal 0
// sends nothing).
static size_t
s_cg_count (const char *dir)
{
    return s_cg_signal (dir, 0);
}

// s_cg_kill SIGKILLs every process in the cgroup at dir and below: one write
// to cgroup.kill (Linux 5.14), which the kernel makes race-free against
// fork. Without it (or when kill_file is false), the cgroup is frozen so
// that no member forks or exits while it is read (fatal signals still reach
// frozen tasks), and every member gets SIGKILL until none is left.
static void
s_cg_kill (const char *dir, bool kill_file)
{
    char path[PATH_MAX];
    if (kill_file && s_path (path, sizeof path, dir, "cgroup.kill", NULL)
        && s_write_text (path, "1") == 0)
        return;
    char freeze[PATH_MAX];
    bool frozen = s_path (freeze, sizeof freeze, dir, "cgroup.freeze", NULL)
                  && s_write_text (freeze, "1") == 0;
    for (int i = 0; frozen && i < 50 && s_cg_event (dir, "frozen") == 0; i++)
        s_sleep_ms (2);
    for (int pass = 0; pass < 100; pass++) {
        if (!s_path (path, sizeof path, dir, NULL, NULL))
            break;
        s_sig_arg_t a = {SIGKILL, 0};
        s_cg_walk (path, 0, s_cg_signal_fn, &a);
        if (a.count == 0)
            break;
        s_sleep_ms (2);
    }
    if (frozen)
        s_write_text (freeze, "0");
}

// s_cg_remove removes the cgroup at dir and every cgroup below it; true when
// dir is gone.
static bool
s_cg_remove (const char *dir)
{
    char path[PATH_MAX];
    if (!s_path (path, sizeof path, dir, NULL, NULL))
        return false;
    s_cg_walk (path, 0, s_cg_rmdir_fn, NULL);
    return access (dir, F_OK) < 0 && errno == ENOENT;
}

// s_cg_clear kills everything in the cgroup at dir and below, waits up to
// wait_ms for it to be gone and removes the cgroups. Returns how many
// processes it killed.
static size_t
s_cg_clear (const char *dir, bool kill_file, int wait_ms)
{
    size_t n = s_cg_count (dir);
    s_cg_kill (dir, kill_file);
    s_cg_wait_empty (dir, wait_ms);
    s_cg_remove (dir);
    return n;
}

// ---------------------------------------------------------------------------
// The worker's state

// What the worker tells the reaper, one record per message on a
// SOCK_SEQPACKET socket.
enum { S_REC_ADD = 1, S_REC_PID = 2, S_REC_DEL = 3 };

typedef struct {
    uint32_t op;
    uint32_t slot;
    int32_t pid;
    uint32_t unused;
    uint64_t start;
    char suffix[S_SUFFIX_MAX]; // the trial directory after the workdir
} s_rec_t;

struct cgq_confine_t {
    bool cgroup;
    bool kill_file; // use cgroup.kill (the kernel has it, the tests did not turn it off)
    bool log_json;
    char *workdir;
    char *dir;        // cgroup mode: <the worker's cgroup>/cgq-worker-PID-START
    int dir_fd;       // cgroup mode: dir (O_PATH), where leaves are made and opened; -1
    char *state_path; // WORKDIR/.cgq-confine/worker-PID-START; NULL when it cannot be written
    int64_t state_due_ms; // when the state file is rewritten (cgq_now_ms); 0: it is current
    char *describe;
    pid_t me;
    uint64_t my_start;
    int sock;     // the worker's end of the reaper's socket, -1 when none
    pid_t reaper; // 0 when none
    cgq_confine_trial_t **trials; // S_MAX_SLOTS, by slot; NULL: free
    size_t n_trials;
    char **pending; // leaves of ended trials that were still busy
    size_t n_pending;
    s_scan_t scan;
};

struct cgq_confine_trial_t {
    cgq_confine_t *owner;
    uint32_t slot;
    char *dir;          // the trial directory
    const char *suffix; // its part after the workdir (inside dir)
    char *leaf;         // cgroup mode: its leaf
    int leaf_fd;        // cgroup mode: the leaf directory (O_PATH), for CLONE_INTO_CGROUP
    int join_fd;        // cgroup mode: its cgroup.procs, opened when asked for
    pid_t pid;
    uint64_t start;
    bool killed; // every process of it got SIGKILL: none can fork any more
};

// ---------------------------------------------------------------------------
// The reaper

// s_reaper_cleanup kills what the worker's trials left: in cgroup mode the
// whole of the worker's cgroup, in pgroup mode every process of the trials
// it was told about; then it removes the state file.
static void
s_reaper_cleanup (cgq_confine_t *self, const s_rec_t *slots, s_target_t *targets)
{
    size_t killed = 0;
    if (self->cgroup)
        killed = s_cg_clear (self->dir, self->kill_file, S_REAPER_EMPTY_MS);
    else if (slots && targets) {
        size_t n = 0;
        for (size_t i = 0; i < S_MAX_SLOTS; i++)
            if (slots[i].op)
                targets[n++] = (s_target_t) {.pid = slots[i].pid, .start = slots[i].start,
                                             .dir_a = self->workdir, .dir_b = slots[i].suffix};
        // The worker is gone, and with it the orphans it had adopted: they
        // are someone else's now, so every process's environment is read.
        killed = s_kill_targets (&self->scan, targets, n, SIGKILL, 0, getpid ());
    }
    if (self->state_path)
        unlink (self->state_path);
    if (killed > 0) {
        s_line_t l = {.len = 0};
        l.text[0] = 0;
        s_line_add (&l, "reaper: worker ");
        s_line_num (&l, (uint64_t) self->me);
        s_line_add (&l, " is gone; killed ");
        s_line_num (&l, killed);
        s_line_add (&l, " process(es) its trials left");
        s_line_emit (CGQ_LOG_WARN, self->log_json, &l);
    }
}

// s_reaper_main is the reaper: it learns the worker's trials from fd until
// EOF, which comes when the worker exits or is killed (only the worker holds
// the other end), then cleans up and exits.
static void __attribute__ ((noreturn))
s_reaper_main (cgq_confine_t *self, int fd)
{
    prctl (PR_SET_NAME, "cgq-reaper", 0, 0, 0);
    // A signal to the worker's process group (Ctrl-C in a terminal) must not
    // take the reaper first; it exits by itself once the worker is gone.
    setpgid (0, 0);
    struct sigaction sa;
    memset (&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    int ignored[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof ignored / sizeof *ignored; i++)
        sigaction (ignored[i], &sa, NULL);
    sa.sa_handler = SIG_DFL;
    sigaction (SIGCHLD, &sa, NULL);
    sigset_t none;
    sigemptyset (&none);
    sigprocmask (SIG_SETMASK, &none, NULL);
    // Nothing of the worker's but the socket: not its ZeroMQ connections, not
    // the trials' pipes.
    if (fd > 3)
        close_range (3, (unsigned) fd - 1, 0);
    close_range ((unsigned) fd + 1, ~0u, 0);

    s_rec_t *slots = mmap (NULL, S_MAX_SLOTS * sizeof *slots, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    s_target_t *targets = mmap (NULL, S_MAX_SLOTS * sizeof *targets, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (slots == MAP_FAILED)
        slots = NULL;
    if (targets == MAP_FAILED)
        targets = NULL;
    for (;;) {
        s_rec_t rec;
        ssize_t n = recv (fd, &rec, sizeof rec, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if (n != (ssize_t) sizeof rec || rec.slot >= S_MAX_SLOTS || !slots)
            continue;
        s_rec_t *s = &slots[rec.slot];
        rec.suffix[S_SUFFIX_MAX - 1] = 0;
        if (rec.op == S_REC_ADD)
            *s = rec;
        else if (rec.op == S_REC_PID && s->op) {
            s->pid = rec.pid;
            s->start = rec.start;
        }
        else if (rec.op == S_REC_DEL)
            s->op = 0;
    }
    s_reaper_cleanup (self, slots, targets);
    _exit (0);
}

static void
s_send (cgq_confine_t *self, uint32_t op, const cgq_confine_trial_t *t)
{
    // In cgroup mode the reaper clears the worker's whole cgroup and needs no
    // list: no message (and no wake-up of the reaper) per trial start and end.
    if (self->sock < 0 || self->cgroup)
        return;
    s_rec_t rec;
    memset (&rec, 0, sizeof rec);
    rec.op = op;
    rec.slot = t->slot;
    rec.pid = t->pid;
    rec.start = t->start;
    size_t len = strlen (t->suffix);
    memcpy (rec.suffix, t->suffix, len < S_SUFFIX_MAX ? len : S_SUFFIX_MAX - 1);
    ssize_t n;
    do
        n = send (self->sock, &rec, sizeof rec, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    // A failure means the reaper died: cgq_confine_tick starts another and
    // tells it every trial.
}

// s_reaper_start forks the reaper and tells it the trials that run now.
static int
s_reaper_start (cgq_confine_t *self)
{
    int sv[2];
    if (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return -1;
    pid_t pid = fork ();
    if (pid < 0) {
        int saved = errno;
        close (sv[0]);
        close (sv[1]);
        errno = saved;
        return -1;
    }
    if (pid == 0) {
        close (sv[0]);
        s_reaper_main (self, sv[1]);
    }
    close (sv[1]);
    self->sock = sv[0];
    self->reaper = pid;
    for (uint32_t i = 0; i < S_MAX_SLOTS; i++) {
        const cgq_confine_trial_t *t = self->trials[i];
        if (t)
            s_send (self, S_REC_ADD, t);
    }
    return 0;
}

// ---------------------------------------------------------------------------
// State files and sweeping

// How long after a trial starts or ends the state file is rewritten (pgroup
// mode): not at once, where the new inode (~1 ms on the development VM's
// ext4) competed with the trial's exec, and once for a wave of starts. The
// reaper hears of each trial at once; the state file only matters when the
// worker and the reaper both die, and a trial's main process dies with the
// worker anyway (PR_SET_PDEATHSIG).
#define S_STATE_DELAY_MS 20

// s_state_write writes the state file: who owns it and what to kill if both
// the worker and its reaper die. A worker that starts with this workdir
// reads it when the owner no longer runs.
static void
s_state_write (cgq_confine_t *self)
{
    if (!self->state_path)
        return;
    char *tmp = cgq_xasprintf ("%s.tmp", self->state_path);
    FILE *f = fopen (tmp, "w");
    if (!f) {
        cgq_warn ("cannot write %s: %s (a restarted worker will not find what this one leaves)",
                  tmp, strerror (errno));
        free (tmp);
        return;
    }
    fprintf (f, "# cgq-worker confinement: what to kill if this worker and its reaper die\n");
    fprintf (f, "owner %d %" PRIu64 "\n", (int) self->me, self->my_start);
    if (self->cgroup)
        fprintf (f, "cgroup %s\n", self->dir);
    for (uint32_t i = 0; i < S_MAX_SLOTS; i++) {
        const cgq_confine_trial_t *t = self->trials[i];
        if (t && !self->cgroup)
            fprintf (f, "trial %d %" PRIu64 " %s\n", (int) t->pid, t->start, t->dir);
    }
    bool ok = fflush (f) == 0;
    ok = fclose (f) == 0 && ok;
    if (!ok || rename (tmp, self->state_path) < 0) {
        cgq_warn ("cannot write %s: %s", self->state_path, strerror (errno));
        unlink (tmp);
    }
    free (tmp);
}

// s_state_changed has the state file rewritten within S_STATE_DELAY_MS
// (cgq_confine_tick, by cgq_confine_deadline).
static void
s_state_changed (cgq_confine_t *self)
{
    if (self->state_path && !self->state_due_ms)
        self->state_due_ms = cgq_now_ms () + S_STATE_DELAY_MS;
}

// s_owner_parse reads "cgq-worker-PID-START" (prefix "cgq-worker-") or
// "worker-PID-START" at name; true when name is exactly that, or that
// followed by ".tmp" when tmp is not NULL (then *tmp says which).
static bool
s_owner_parse (const char *name, const char *prefix, pid_t *pid, uint64_t *start, bool *tmp)
{
    size_t plen = strlen (prefix);
    if (strncmp (name, prefix, plen) != 0)
        return false;
    const char *s = name + plen;
    uint64_t v[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        if (*s < '0' || *s > '9')
            return false;
        while (*s >= '0' && *s <= '9' && v[i] < UINT64_MAX / 10)
            v[i] = v[i] * 10 + (uint64_t) (*s++ - '0');
        if (i == 0 && *s++ != '-')
            return false;
    }
    if (tmp)
        *tmp = !strcmp (s, ".tmp");
    if (*s && !(tmp && *tmp))
        return false;
    if (v[0] == 0 || v[0] > INT32_MAX)
        return false;
    *pid = (pid_t) v[0];
    *start = v[1];
    return true;
}

// s_sweep_cgroup kills and removes a dead worker's cgroup; returns how many
// processes it killed.
static size_t
s_sweep_cgroup (cgq_confine_t *self, const char *dir)
{
    size_t n = s_cg_clear (dir, self->kill_file, 2000);
    if (access (dir, F_OK) == 0)
        cgq_warn ("cannot remove %s, left by a dead worker: it still has processes", dir);
    return n;
}

// s_sweep_file kills what the state file at path lists: the cgroup of a
// dead worker, or the processes of its trials. Returns how many it killed.
static size_t
s_sweep_file (cgq_confine_t *self, const char *path, pid_t owner, uint64_t owner_start)
{
    FILE *f = fopen (path, "r");
    if (!f)
        return 0;
    s_target_t *targets = NULL;
    char **dirs = NULL;
    size_t n = 0, killed = 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline (&line, &cap, f)) > 0) {
        if (line[len - 1] == '\n')
            line[--len] = 0;
        int pid = 0, at = 0;
        unsigned long long start = 0;
        if (!strncmp (line, "cgroup ", 7)) {
            // Only the cgroup this worker made: the name says whose it is.
            const char *base = strrchr (line + 7, '/');
            pid_t p;
            uint64_t s;
            if (base && s_owner_parse (base + 1, S_CG_PREFIX, &p, &s, NULL) && p == owner
                && s == owner_start)
                killed += s_sweep_cgroup (self, line + 7);
        }
        else if (sscanf (line, "trial %d %llu %n", &pid, &start, &at) == 2 && at > 0) {
            targets = cgq_xrealloc (targets, (n + 1) * sizeof *targets);
            dirs = cgq_xrealloc (dirs, (n + 1) * sizeof *dirs);
            dirs[n] = cgq_xstrdup (line + at);
            // Long after, the session's number may belong to someone else:
            // only the environment and the main process itself are trusted.
            targets[n] = (s_target_t) {.pid = pid, .start = start, .strict = true,
                                       .dir_a = dirs[n], .dir_b = ""};
            n++;
        }
    }
    free (line);
    fclose (f);
    killed += s_kill_targets (&self->scan, targets, n, SIGKILL, 0, self->me);
    for (size_t i = 0; i < n; i++)
        free (dirs[i]);
    free (dirs);
    free (targets);
    return killed;
}

// s_sweep_state_files sweeps after the dead workers whose state files are in
// WORKDIR/.cgq-confine.
static void
s_sweep_state_files (cgq_confine_t *self, const char *state_dir)
{
    DIR *d = opendir (state_dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir (d))) {
        pid_t pid;
        uint64_t start;
        bool tmp;
        if (!s_owner_parse (e->d_name, "worker-", &pid, &start, &tmp) || s_alive (pid, start))
            continue;
        char *path = cgq_xasprintf ("%s/%s", state_dir, e->d_name);
        size_t killed = tmp ? 0 : s_sweep_file (self, path, pid, start);
        if (killed > 0)
            cgq_warn ("killed %zu process(es) left by the trials of dead worker %d (from %s)",
                      killed, (int) pid, path);
        unlink (path);
        free (path);
    }
    closedir (d);
}

// s_sweep_siblings sweeps the cgq-worker-PID-START cgroups beside ours whose
// owner no longer runs (a worker and its reaper both killed, whatever their
// workdir). Owners are told by pid and start time, so workers that share a
// parent cgroup must share a pid namespace.
static void
s_sweep_siblings (cgq_confine_t *self, const char *base)
{
    DIR *d = opendir (base);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir (d))) {
        pid_t pid;
        uint64_t start;
        if (!s_owner_parse (e->d_name, S_CG_PREFIX, &pid, &start, NULL) || s_alive (pid, start))
            continue;
        char *dir = cgq_xasprintf ("%s/%s", base, e->d_name);
        size_t killed = s_sweep_cgroup (self, dir);
        if (killed > 0)
            cgq_warn ("killed %zu process(es) left in %s by dead worker %d", killed, dir, (int) pid);
        free (dir);
    }
    closedir (d);
}

// ---------------------------------------------------------------------------
// Choosing the mode

// s_unescape undoes mountinfo's octal escapes (\040 for a space) in place.
static void
s_unescape (char *s)
{
    char *o = s;
    for (; *s; s++) {
        if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' && s[3] >= '0'
            && s[3] <= '7') {
            *o++ = (char) ((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
            s += 3;
        }
        else
            *o++ = *s;
    }
    *o = 0;
}

// s_cgroup_base finds the directory of this process's cgroup v2: the "0::"
// line of /proc/self/cgroup, below the mount point of a cgroup2 file system
// whose root holds it (/proc/self/mountinfo; on a hybrid host it is not
// /sys/fs/cgroup but /sys/fs/cgroup/unified). Returns it (caller frees), or
// NULL with why.
static char *
s_cgroup_base (char *why, size_t cap)
{
    FILE *f = fopen ("/proc/self/cgroup", "r");
    char *line = NULL, *cg = NULL;
    size_t lcap = 0;
    ssize_t len;
    while (f && (len = getline (&line, &lcap, f)) > 0) {
        if (line[len - 1] == '\n')
            line[len - 1] = 0;
        if (!strncmp (line, "0::", 3) && !cg)
            cg = cgq_xstrdup (line + 3);
    }
    if (f)
        fclose (f);
    if (!cg || cg[0] != '/') {
        snprintf (why, cap, "this process is in no cgroup v2 hierarchy (/proc/self/cgroup has "
                            "no \"0::/...\" line: cgroup v1 only?)");
        free (line);
        free (cg);
        return NULL;
    }
    char *base = NULL;
    bool mounted = false;
    f = fopen ("/proc/self/mountinfo", "r");
    while (f && !base && (len = getline (&line, &lcap, f)) > 0) {
        // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
        char *sep = strstr (line, " - ");
        if (!sep || strncmp (sep + 3, "cgroup2 ", 8) != 0)
            continue;
        mounted = true;
        *sep = 0;
        char *fields[5] = {NULL};
        char *save = NULL, *tok = strtok_r (line, " ", &save);
        for (int i = 0; tok && i < 5; i++, tok = strtok_r (NULL, " ", &save))
            fields[i] = tok;
        if (!fields[4])
            continue;
        char *root = fields[3], *point = fields[4];
        s_unescape (root);
        s_unescape (point);
        size_t rlen = strcmp (root, "/") == 0 ? 0 : strlen (root);
        if (strncmp (cg, root, rlen) != 0 || (cg[rlen] != '/' && cg[rlen] != 0))
            continue;
        const char *rel = cg + rlen;
        base = cgq_xasprintf ("%s%s", point, strcmp (rel, "/") == 0 ? "" : rel);
    }
    if (f)
        fclose (f);
    free (line);
    struct stat st;
    if (!base)
        snprintf (why, cap, "%s", mounted ? "no cgroup2 mount holds this process's cgroup"
                                          : "no cgroup2 file system is mounted");
    else if (stat (base, &st) < 0 || !S_ISDIR (st.st_mode)) {
        snprintf (why, cap, "cannot find this process's cgroup %s at %s: %s", cg, base,
                  strerror (errno));
        free (base);
        base = NULL;
    }
    free (cg);
    return base;
}

// s_cgroup_setup makes the worker's cgroup under base and checks that a
// process can be moved into a leaf of it. It stays empty itself (no
// controllers are enabled below it), so the "no internal processes" rule
// never applies to it, and the worker does not have to move. 0, or -1 with
// why.
static int
s_cgroup_setup (cgq_confine_t *self, const char *base, bool no_kill_file, char *why, size_t cap)
{
    char *dir = cgq_xasprintf ("%s/" S_CG_PREFIX "%d-%" PRIu64, base, (int) self->me,
                               self->my_start);
    if (mkdir (dir, 0755) < 0 && errno != EEXIST) {
        snprintf (why, cap, "cannot create %s: %s", dir, strerror (errno));
        free (dir);
        return -1;
    }
    char *probe = cgq_xasprintf ("%s/probe", dir);
    char *procs = cgq_xasprintf ("%s/cgroup.procs", probe);
    int err = 0;
    int fd = -1;
    if (mkdir (probe, 0755) < 0 || (fd = open (procs, O_WRONLY | O_CLOEXEC)) < 0)
        err = errno;
    else {
        pid_t pid = fork ();
        if (pid == 0)
            _exit (write (fd, "0", 1) == 1 ? 0 : (errno & 0x7f) ? errno & 0x7f : 1);
        int st = 0;
        if (pid < 0)
            err = errno;
        else {
            while (waitpid (pid, &st, 0) < 0 && errno == EINTR)
                ;
            err = WIFEXITED (st) ? WEXITSTATUS (st) : EIO;
        }
        close (fd);
    }
    for (int i = 0; i < 100 && rmdir (probe) < 0 && errno == EBUSY; i++)
        s_sleep_ms (5);
    if (err) {
        snprintf (why, cap, "cannot move a process into %s: %s", probe, strerror (err));
        rmdir (dir);
        free (dir);
        free (probe);
        free (procs);
        return -1;
    }
    free (probe);
    free (procs);
    char *kill_path = cgq_xasprintf ("%s/cgroup.kill", dir);
    self->kill_file = !no_kill_file && access (kill_path, F_OK) == 0;
    free (kill_path);
    self->dir = dir;
    // The leaves are made relative to it: no walk of the cgroup mounts'
    // path at each start (-1: by path, as before).
    self->dir_fd = open (dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    self->cgroup = true;
    return 0;
}

int
cgq_confine_mode_parse (const char *name, cgq_confine_mode_t *mode)
{
    static const char *names[] = {"auto", "cgroup", "pgroup"};
    for (int i = 0; i < 3; i++)
        if (name && !strcmp (name, names[i])) {
            *mode = (cgq_confine_mode_t) i;
            return 0;
        }
    return -1;
}

cgq_confine_t *
cgq_confine_new (const cgq_confine_opts_t *opts, char *err, size_t errlen)
{
    cgq_confine_t *self = cgq_xcalloc (1, sizeof *self);
    self->sock = -1;
    self->dir_fd = -1;
    self->log_json = opts->log_json;
    self->workdir = cgq_xstrdup (opts->workdir);
    self->trials = cgq_xcalloc (S_MAX_SLOTS, sizeof *self->trials);
    self->me = getpid ();
    s_proc_t me;
    if (s_stat (self->me, &me))
        self->my_start = me.start;
    if (!s_scan_reserve (&self->scan)) {
        snprintf (err, errlen, "cannot map %zu bytes for process scans: %s", s_scan_bytes (),
                  strerror (errno));
        cgq_confine_destroy (&self);
        return NULL;
    }
    char *state_dir = cgq_xasprintf ("%s/" S_STATE_DIR, self->workdir);
    if (mkdir (state_dir, 0755) == 0 || errno == EEXIST)
        self->state_path = cgq_xasprintf ("%s/worker-%d-%" PRIu64, state_dir, (int) self->me,
                                          self->my_start);
    else
        cgq_warn ("cannot create %s: %s (a restarted worker will not find what this one leaves)",
                  state_dir, strerror (errno));
    // First what dead workers left: their trials compete with ours.
    self->kill_file = !opts->no_kill_file;
    s_sweep_state_files (self, state_dir);
    free (state_dir);

    char why[1024] = "";
    if (opts->mode == CGQ_CONFINE_PGROUP)
        snprintf (why, sizeof why, "--confine pgroup");
    else {
        char *base = s_cgroup_base (why, sizeof why);
        if (base) {
            s_sweep_siblings (self, base);
            s_cgroup_setup (self, base, opts->no_kill_file, why, sizeof why);
        }
        free (base);
        if (!self->cgroup && opts->mode == CGQ_CONFINE_CGROUP) {
            snprintf (err, errlen,
                      "--confine cgroup: cgroup v2 is not usable here: %s (run the worker as root "
                      "or in a delegated cgroup, or use --confine pgroup)",
                      why);
            cgq_confine_destroy (&self);
            return NULL;
        }
    }
    // pgroup: an orphan of a trial becomes the worker's child rather than
    // init's, so that it is found (and reaped) while the worker runs.
    if (!self->cgroup && prctl (PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
        cgq_warn ("cannot become a child subreaper: %s", strerror (errno));
    s_state_write (self);
    if (s_reaper_start (self) < 0) {
        snprintf (err, errlen, "cannot start the reaper process: %s", strerror (errno));
        cgq_confine_destroy (&self);
        return NULL;
    }
    if (self->cgroup)
        self->describe = cgq_xasprintf (
            "trials confined in cgroup v2 at %s (a leaf per trial, ended %s; reaper pid %d)",
            self->dir, self->kill_file ? "with cgroup.kill" : "by freezing it and SIGKILL to each",
            (int) self->reaper);
    else
        self->describe = cgq_xasprintf (
            "trials confined by session and process group, the worker a child subreaper (no "
            "cgroup: %s; reaper pid %d); a trial process that leaves its session, is orphaned "
            "and execs without CGQ_TRIAL_DIR escapes",
            why, (int) self->reaper);
    return self;
}

// s_pending_retry removes the leaves in the pending list that are empty now.
static void
s_pending_retry (cgq_confine_t *self)
{
    for (size_t i = 0; i < self->n_pending;) {
        s_cg_kill (self->pending[i], self->kill_file);
        if (s_cg_remove (self->pending[i])) {
            free (self->pending[i]);
            self->pending[i] = self->pending[--self->n_pending];
        }
        else
            i++;
    }
}

void
cgq_confine_destroy (cgq_confine_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cgq_confine_t *self = *self_p;
    int64_t until = s_mono_ms () + 1000;
    while (self->n_pending > 0 && s_mono_ms () < until) {
        s_pending_retry (self);
        if (self->n_pending > 0)
            s_sleep_ms (10);
    }
    for (size_t i = 0; i < self->n_pending; i++)
        free (self->pending[i]);
    free (self->pending);
    if (self->sock >= 0)
        close (self->sock);
    if (self->reaper > 0) {
        // EOF tells the reaper to clean up: our cgroup and state file go.
        int st;
        pid_t r = 0;
        until = s_mono_ms () + S_REAPER_WAIT_MS;
        while ((r = waitpid (self->reaper, &st, WNOHANG)) == 0 && s_mono_ms () < until)
            s_sleep_ms (5);
        if (r == 0)
            cgq_warn ("the reaper (pid %d) is still cleaning up; leaving it to finish",
                      (int) self->reaper);
    }
    else {
        if (self->dir)
            s_cg_clear (self->dir, self->kill_file, 1000);
        if (self->state_path)
            unlink (self->state_path);
    }
    s_scan_release (&self->scan);
    free (self->trials);
    free (self->workdir);
    if (self->dir_fd >= 0)
        close (self->dir_fd);
    free (self->dir);
    free (self->state_path);
    free (self->describe);
    free (self);
    *self_p = NULL;
}

const char *
cgq_confine_describe (const cgq_confine_t *self)
{
    return self->describe;
}

bool
cgq_confine_is_cgroup (const cgq_confine_t *self)
{
    return self->cgroup;
}

const char *
cgq_confine_cgroup_dir (const cgq_confine_t *self)
{
    return self->dir;
}

pid_t
cgq_confine_reaper_pid (const cgq_confine_t *self)
{
    return self->reaper;
}

void
cgq_confine_tick (cgq_confine_t *self)
{
    int st = 0;
    pid_t r = self->reaper > 0 ? waitpid (self->reaper, &st, WNOHANG) : -1;
    if (self->reaper <= 0 || r == self->reaper || (r < 0 && errno == ECHILD)) {
        if (self->reaper > 0) {
            char how[64];
            if (r == self->reaper && WIFSIGNALED (st))
                snprintf (how, sizeof how, "was killed by signal %d", WTERMSIG (st));
            else
                snprintf (how, sizeof how, "exited");
            cgq_warn ("the reaper (pid %d) %s; starting another, or a killed worker's trials "
                      "would outlive it",
                      (int) self->reaper, how);
        }
        if (self->sock >= 0)
            close (self->sock);
        self->sock = -1;
        self->reaper = 0;
        if (s_reaper_start (self) < 0)
            cgq_error ("cannot start the reaper process: %s (trying again in a moment)",
                       strerror (errno));
    }
    s_pending_retry (self);
    if (self->state_due_ms && cgq_now_ms () >= self->state_due_ms) {
        self->state_due_ms = 0;
        s_state_write (self);
    }
}

int64_t
cgq_confine_deadline (const cgq_confine_t *self)
{
    return self ? self->state_due_ms : 0;
}

// ---------------------------------------------------------------------------
// Trials

cgq_confine_trial_t *
cgq_confine_trial_new (cgq_confine_t *self, const char *name, const char *trial_dir, char *err,
                       size_t errlen)
{
    size_t wlen = strlen (self->workdir);
    if (strncmp (trial_dir, self->workdir, wlen) != 0 || strlen (trial_dir + wlen) >= S_SUFFIX_MAX) {
        snprintf (err, errlen, "trial directory %s is not below %s or is too long", trial_dir,
                  self->workdir);
        return NULL;
    }
    uint32_t slot = 0;
    while (slot < S_MAX_SLOTS && self->trials[slot])
        slot++;
    if (slot == S_MAX_SLOTS) {
        snprintf (err, errlen, "more than %d trials at once", S_MAX_SLOTS);
        return NULL;
    }
    cgq_confine_trial_t *t = cgq_xcalloc (1, sizeof *t);
    t->owner = self;
    t->slot = slot;
    t->dir = cgq_xstrdup (trial_dir);
    t->suffix = t->dir + wlen;
    t->join_fd = -1;
    t->leaf_fd = -1;
    if (self->cgroup) {
        // A leaf of the same name may still be waiting to be removed.
        t->leaf = cgq_xasprintf ("%s/%s", self->dir, name);
        int at = self->dir_fd >= 0 ? self->dir_fd : AT_FDCWD;
        size_t skip = self->dir_fd >= 0 ? strlen (self->dir) + 1 : 0;
        int rc;
        for (int n = 2; (rc = mkdirat (at, t->leaf + skip, 0755)) < 0 && errno == EEXIST && n < 1000;
             n++) {
            free (t->leaf);
            t->leaf = cgq_xasprintf ("%s/%s.%d", self->dir, name, n);
        }
        // The directory, not cgroup.procs: a child cloned into it
        // (CLONE_INTO_CGROUP) starts there, without the migration that a
        // write to cgroup.procs costs (the cgroup's threadgroup lock taken
        // for writing: an RCU grace period, ~10-20 ms on the development VM).
        if (rc == 0)
            t->leaf_fd = openat (at, t->leaf + skip, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (t->leaf_fd < 0) {
            snprintf (err, errlen, "cannot create cgroup %s: %s", t->leaf, strerror (errno));
            if (rc == 0)
                rmdir (t->leaf);
            free (t->leaf);
            free (t->dir);
            free (t);
            return NULL;
        }
    }
    self->trials[slot] = t;
    self->n_trials++;
    s_send (self, S_REC_ADD, t);
    return t;
}

int
cgq_confine_trial_leaf_fd (const cgq_confine_trial_t *t)
{
    return t->leaf_fd;
}

int
cgq_confine_trial_join_fd (cgq_confine_trial_t *t, char *err, size_t errlen)
{
    if (t->join_fd >= 0 || !t->leaf)
        return t->join_fd;
    char *procs = cgq_xasprintf ("%s/cgroup.procs", t->leaf);
    t->join_fd = open (procs, O_WRONLY | O_CLOEXEC);
    if (t->join_fd < 0)
        snprintf (err, errlen, "cannot open %s: %s", procs, strerror (errno));
    free (procs);
    return t->join_fd;
}

const char *
cgq_confine_trial_cgroup (const cgq_confine_trial_t *t)
{
    return t->leaf;
}

void
cgq_confine_trial_started (cgq_confine_trial_t *t, pid_t pid)
{
    if (t->join_fd >= 0)
        close (t->join_fd);
    t->join_fd = -1;
    if (t->leaf_fd >= 0)
        close (t->leaf_fd);
    t->leaf_fd = -1;
    t->pid = pid;
    // Its start time tells its session from a later one of the same number
    // (pgroup mode: the reaper's records, the state file, the kill). cgroup
    // mode goes by the leaf: no read of /proc/PID/stat per start.
    s_proc_t p;
    if (pid > 0 && !t->owner->cgroup && s_stat (pid, &p))
        t->start = p.start;
    s_send (t->owner, S_REC_PID, t);
    if (!t->owner->cgroup)
        s_state_changed (t->owner);
}

size_t
cgq_confine_trial_signal (cgq_confine_trial_t *t, int sig)
{
    cgq_confine_t *self = t->owner;
    size_t n;
    if (self->cgroup) {
        if (sig == SIGKILL) {
            n = s_cg_count (t->leaf);
            s_cg_kill (t->leaf, self->kill_file);
        }
        else
            n = s_cg_signal (t->leaf, sig);
    }
    else {
        // The worker is a subreaper: a process of the trial that left its
        // session either descends from one that did not, or is an orphan
        // the worker adopted; only those have their environment read.
        s_target_t target = {.pid = t->pid, .start = t->start, .dir_a = t->dir, .dir_b = ""};
        n = s_kill_targets (&self->scan, &target, 1, sig, self->me, self->me);
    }
    if (sig == SIGKILL)
        t->killed = true;
    return n;
}

void
cgq_confine_trial_end (cgq_confine_trial_t **t_p)
{
    if (!t_p || !*t_p)
        return;
    cgq_confine_trial_t *t = *t_p;
    cgq_confine_t *self = t->owner;
    if (!t->killed)
        cgq_confine_trial_signal (t, SIGKILL);
    if (t->join_fd >= 0)
        close (t->join_fd);
    if (t->leaf_fd >= 0)
        close (t->leaf_fd);
    if (t->leaf) {
        s_cg_wait_empty (t->leaf, S_END_WAIT_MS);
        if (!s_cg_remove (t->leaf)) {
            self->pending = cgq_xrealloc (self->pending, (self->n_pending + 1) * sizeof (char *));
            self->pending[self->n_pending++] = t->leaf;
            t->leaf = NULL;
        }
    }
    s_send (self, S_REC_DEL, t);
    self->trials[t->slot] = NULL;
    self->n_trials--;
    if (!self->cgroup)
        s_state_changed (self);
    free (t->leaf);
    free (t->dir);
    free (t);
    *t_p = NULL;
}
