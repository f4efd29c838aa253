#include "task.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/sched.h> // struct clone_args, CLONE_INTO_CGROUP (Linux 5.7)

#include "ckpt.h"
#include "confine.h"
#include "json.h"
#include "log.h"
#include "result.h"
#include "space.h"
#include "launch.h"
#include "template.h"
#include "util.h"
#include "wire.h"

// The ids every log line about this task carries (log.h).
#define S_IDS(self) (self)->ref.job, (self)->ref.trial, (self)->ref.attempt

extern char **environ;

#define S_TAIL_BYTES 4096       // log_tail sent with the result
#define S_ERR_TAIL_LINES 20     // stderr lines appended to a failure's error
#define S_MAX_REPORT_LINE (1u << 20)
#define S_REPORT_HEAD 200       // chars of a bad report line quoted in the warning
#define S_READ_CHUNK 65536
#define S_READS_PER_WAKE 16     // bounded so one chatty trial cannot starve the loop
#define S_READS_AT_EXIT 64      // a background child that writes forever must not hang us
#define S_MAX_METRICS (1u << 20) // larger results would exceed the coordinator's frame limit

typedef struct {
    int fd;           // pipe read end, -1 when closed
    int log_fd;       // stdout.log / stderr.log, -1 when not open
    uint64_t written; // bytes in the log file
    bool truncated;   // cap reached or a write failed: the rest is dropped
    bool last_nl;     // last byte written was '\n'
    int write_errno;  // a write to log_fd failed with it (ENOSPC: the disk is full); 0: none
    bool marked;      // after write_errno: its marker line is in the file
} s_stream_t;

struct cgq_task_t {
    Cgq__TaskRef ref;
    char *argv0;
    char *trial_dir;
    pid_t pid;
    cgq_confine_trial_t *confined; // NULL: the session alone (opts.confine was NULL)
    uint64_t log_cap;
    uint64_t max_line; // of a report line (opts.max_report_line)
    int64_t started_ms;
    int64_t timeout_ms; // 0: none
    int64_t timeout_at; // -1: none or fired
    int64_t kill_at;    // -1: no SIGKILL pending
    int64_t grace_ms;
    s_stream_t out, err;
    int report_fd;
    cgq_buf_t report_line;
    uint64_t report_lines; // lines seen on fd 3, valid or not
    char *report_note;     // the first rejected report line and why (goes with the result)
    bool report_discarding; // inside a line longer than S_MAX_REPORT_LINE
    char *report_head;      // its first chars, for the warning
    json_t *last_report;
    uint64_t seq;
    cgq_buf_t tail;     // last output of stdout + stderr
    cgq_buf_t err_tail; // last output of stderr alone
    bool timed_out;
    bool stopped;
    char *stop_reason;
    bool exited;
    int wait_status;
    int fail_stage; // CGQ_SPAWN_FAIL_* when the child could not exec
    int fail_errno;
    bool done;
    Cgq__Result *result;
    cgq_task_report_fn *on_report;
    void *arg;
    // Checkpoints (docs/architecture.md, "Checkpoints").
    char *ckpt_dir;                       // CGQ_CHECKPOINT_DIR
    cgq_task_checkpoint_fn *on_checkpoint;
    char *resume_json;    // the step it resumed from (NULL: a fresh start)
    char *resume_attr;    // its first numeric attribute: reports at or before it are dropped
    double resume_value;
    uint64_t resume_dropped; // reports dropped so far
    char *fail_error;     // cgq_task_fail's error: the result is TASK_FAILED with it
};

// ---------------------------------------------------------------------------
// Strings

static char *
s_str (const char *s)
{
    return cgq_xstrdup (s ? s : "");
}

static void
s_set_str (char **field, const char *s)
{
    free (*field);
    *field = s_str (s);
}

char *
cgq_task_env_name (const char *param)
{
    char *name = cgq_xasprintf ("CGQ_PARAM_%s", param);
    for (char *p = name + strlen ("CGQ_PARAM_"); *p; p++)
        *p = isalnum ((unsigned char) *p) ? (char) toupper ((unsigned char) *p) : '_';
    return name;
}

// ---------------------------------------------------------------------------
// Text helpers

// s_utf8_clean returns a copy of data[0..len) that is valid UTF-8: a sequence
// cut at the start is skipped and any invalid byte becomes '?', so tails of
// binary or truncated output can go into protobuf strings and JSON. Valid
// means what proto3 readers and jansson accept: no overlong forms, no UTF-16
// surrogates (CESU-8, Java's modified UTF-8), nothing above U+10FFFF.
static char *
s_utf8_clean (const char *data, size_t len)
{
    const unsigned char *s = (const unsigned char *) data;
    size_t i = 0;
    while (i < len && i < 3 && (s[i] & 0xC0) == 0x80)
        i++;
    char *out = cgq_xmalloc (len - i + 1);
    size_t o = 0;
    while (i < len) {
        unsigned char c = s[i];
        size_t n = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : (c & 0xF0) == 0xE0 ? 3
                                : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        bool ok = n > 0 && i + n <= len;
        for (size_t k = 1; ok && k < n; k++)
            ok = (s[i + k] & 0xC0) == 0x80;
        // The second byte bounds what the first allows (Unicode, Table 3-7).
        if (ok && n > 2) {
            unsigned char c1 = s[i + 1];
            ok = c == 0xE0 ? c1 >= 0xA0 : c == 0xED ? c1 <= 0x9F : c == 0xF0 ? c1 >= 0x90
                 : c == 0xF4 ? c1 <= 0x8F : true;
        }
        if (ok && n == 1 && c == 0)
            ok = false; // NUL would end the C string early
        if (!ok) {
            out[o++] = '?';
            i++;
            continue;
        }
        memcpy (out + o, s + i, n);
        o += n;
        i += n;
    }
    out[o] = 0;
    return out;
}

static void
s_tail_append (cgq_buf_t *tail, const char *data, size_t len)
{
    if (len >= S_TAIL_BYTES * 2) {
        data += len - S_TAIL_BYTES * 2;
        len = S_TAIL_BYTES * 2;
    }
    cgq_buf_append (tail, data, len);
    if (tail->len > S_TAIL_BYTES * 2) {
        size_t drop = tail->len - S_TAIL_BYTES;
        memmove (tail->data, tail->data + drop, tail->len - drop);
        tail->len -= drop;
        tail->data[tail->len] = 0;
    }
}

// s_last_lines returns the last max_lines lines of text[0..len), without the
// final newline; a partial first line is kept only when it is all there is.
static char *
s_last_lines (const char *text, size_t len, int max_lines)
{
    while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r'))
        len--;
    size_t start = len;
    int lines = 0;
    while (start > 0) {
        if (text[start - 1] == '\n' && ++lines == max_lines)
            break;
        start--;
    }
    return s_utf8_clean (text + start, len - start);
}

static char *
s_fmt_seconds (int64_t ms)
{
    char buf[32];
    return cgq_xasprintf ("%ss", cgq_fmt_double (buf, (double) ms / 1000.0));
}

// ---------------------------------------------------------------------------
// Logs

// s_write_all writes data at fd's offset and returns 0, or the errno of the
// write that failed (ENOSPC on a full disk); *done counts the bytes written.
static int
s_write_all (int fd, const char *data, size_t len, size_t *done)
{
    *done = 0;
    while (len > 0) {
        ssize_t n = write (fd, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno;
        if (n == 0)
            return EIO;
        data += n;
        len -= (size_t) n;
        *done += (size_t) n;
    }
    return 0;
}

// s_log_mark writes the marker of a log whose write failed (s->write_errno).
// On a full disk the marker cannot go after the last byte written: the log
// is then cut back to the start of its last block (freed for the marker; the
// in-memory tail still has those bytes) and the marker says how much went.
// A full disk does not stop the trial; the result names the cut either way.
static void
s_log_mark (s_stream_t *s)
{
    if (s->log_fd < 0 || s->marked || !s->write_errno)
        return;
    for (int tries = 0; tries < 2 && !s->marked; tries++) {
        uint64_t dropped = 0;
        if (tries == 1) {
            struct stat st;
            uint64_t blk = fstat (s->log_fd, &st) == 0 && st.st_blksize > 0
                               ? (uint64_t) st.st_blksize : 4096;
            if (s->written == 0)
                return;
            uint64_t keep = (s->written - 1) / blk * blk;
            if (ftruncate (s->log_fd, (off_t) keep) < 0
                || lseek (s->log_fd, (off_t) keep, SEEK_SET) < 0)
                return;
            dropped = s->written - keep;
            s->written = keep;
            s->last_nl = keep == 0; // unknown: a '\n' before the marker at worst is one too many
        }
        char *marker;
        if (dropped)
            marker = cgq_xasprintf ("%s[cgq: log truncated at %" PRIu64 " bytes: %s (its last "
                                    "%" PRIu64 " bytes were dropped to make room for this line)]\n",
                                    s->last_nl ? "" : "\n", s->written, strerror (s->write_errno),
                                    dropped);
        else
            marker = cgq_xasprintf ("%s[cgq: log truncated at %" PRIu64 " bytes: %s]\n",
                                    s->last_nl || s->written == 0 ? "" : "\n", s->written,
                                    strerror (s->write_errno));
        size_t done;
        if (s_write_all (s->log_fd, marker, strlen (marker), &done) == 0)
            s->marked = true;
        else if (done > 0) {
            // A marker cut short is no marker: take it back before the next try.
            if (ftruncate (s->log_fd, (off_t) s->written) < 0
                || lseek (s->log_fd, (off_t) s->written, SEEK_SET) < 0) {
                free (marker);
                return;
            }
        }
        free (marker);
    }
}

// s_log writes output of stream s to its log file within the cap and to the
// in-memory tails.
static void
s_log (cgq_task_t *self, s_stream_t *s, const char *data, size_t len)
{
    if (len == 0)
        return;
    s_tail_append (&self->tail, data, len);
    if (s == &self->err)
        s_tail_append (&self->err_tail, data, len);
    if (s->log_fd < 0 || s->truncated)
        return;
    size_t room = len;
    if (self->log_cap > 0 && s->written + len > self->log_cap)
        room = (size_t) (self->log_cap - s->written);
    if (room > 0) {
        size_t done;
        int en = s_write_all (s->log_fd, data, room, &done);
        s->written += done;
        if (done > 0)
            s->last_nl = data[done - 1] == '\n';
        if (en) {
            s->write_errno = en;
            s->truncated = true;
            s_log_mark (s);
            return;
        }
    }
    if (room < len) {
        char *marker = cgq_xasprintf (
            "%s[cgq: log truncated at %" PRIu64 " bytes (--log-cap of the worker)]\n",
            s->last_nl || s->written == 0 ? "" : "\n", self->log_cap);
        size_t done;
        s_write_all (s->log_fd, marker, strlen (marker), &done);
        free (marker);
        s->truncated = true;
    }
}

static void s_warn (cgq_task_t *self, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

// s_warn writes one "cgq: ..." line into the trial's stderr.log.
static void
s_warn (cgq_task_t *self, const char *fmt, ...)
{
    cgq_buf_t line;
    cgq_buf_init (&line);
    cgq_buf_puts (&line, "cgq: ");
    va_list ap;
    va_start (ap, fmt);
    char *msg = NULL;
    if (vasprintf (&msg, fmt, ap) >= 0) {
        cgq_buf_puts (&line, msg);
        free (msg);
    }
    va_end (ap);
    cgq_buf_puts (&line, "\n");
    s_log (self, &self->err, line.data, line.len);
    cgq_buf_fini (&line);
}

// ---------------------------------------------------------------------------
// Reports

static void
s_report_line (cgq_task_t *self, const char *line, size_t len)
{
    self->report_lines++;
    bool blank = true;
    for (size_t i = 0; i < len && blank; i++)
        blank = isspace ((unsigned char) line[i]);
    if (blank)
        return;
    json_error_t jerr;
    json_t *obj = json_loadb (line, len, 0, &jerr);
    if (!json_is_object (obj)) {
        json_decref (obj);
        char *head = cgq_xstrndup (line, len < S_REPORT_HEAD ? len : S_REPORT_HEAD);
        s_warn (self, "ignoring report line %" PRIu64 ": not a JSON object: %s",
                self->report_lines, head);
        if (!self->report_note)
            self->report_note = cgq_xasprintf ("ignoring report line %" PRIu64
                                               ": not a JSON object: %s",
                                               self->report_lines, head);
        free (head);
        return;
    }
    json_t *flag = json_object_get (obj, "checkpoint");
    if (json_is_true (flag)) {
        // An announcement: the directory now holds a checkpoint (not a report).
        json_object_del (obj, "checkpoint");
        char *step = cgq_json_dumps (obj);
        json_decref (obj);
        if (self->on_checkpoint && step)
            self->on_checkpoint (self->arg, self, step, self->report_lines);
        else
            s_warn (self, "ignoring checkpoint announcement (report line %" PRIu64
                          "): this worker does not seal checkpoints",
                    self->report_lines);
        free (step);
        return;
    }
    if (self->resume_attr) {
        // A resumed attempt: what it reports up to the step it resumed from
        // is in the learning curve already (the attempt before reported it).
        json_t *at = json_object_get (obj, self->resume_attr);
        if (json_is_number (at) && json_number_value (at) <= self->resume_value) {
            char v[32];
            if (self->resume_dropped++ == 0)
                s_warn (self,
                        "not sending reports with %s <= %s: this attempt resumed from the "
                        "checkpoint at %s, and the attempt before sent them",
                        self->resume_attr, cgq_fmt_double (v, self->resume_value),
                        self->resume_json);
            json_decref (obj);
            return;
        }
    }
    char *compact = cgq_json_dumps (obj);
    json_decref (self->last_report);
    self->last_report = obj;
    self->seq++;
    if (self->on_report && compact)
        self->on_report (self->arg, self, compact, self->seq);
    free (compact);
}

static void
s_report_overlong_end (cgq_task_t *self)
{
    self->report_lines++;
    s_warn (self,
            "ignoring report line %" PRIu64 ": longer than %" PRIu64
            " bytes (--max-report-line of the worker): %s",
            self->report_lines, self->max_line, self->report_head ? self->report_head : "");
    if (!self->report_note)
        self->report_note = cgq_xasprintf ("ignoring report line %" PRIu64 ": longer than %" PRIu64
                                           " bytes (--max-report-line of the worker)",
                                           self->report_lines, self->max_line);
    free (self->report_head);
    self->report_head = NULL;
    self->report_discarding = false;
}

static void
s_report_data (cgq_task_t *self, const char *data, size_t len)
{
    while (len > 0) {
        const char *nl = memchr (data, '\n', len);
        size_t chunk = nl ? (size_t) (nl - data) : len;
        if (self->report_discarding) {
            if (nl)
                s_report_overlong_end (self);
        }
        else if (self->report_line.len + chunk > self->max_line) {
            cgq_buf_append (&self->report_line, data, chunk);
            self->report_head = cgq_xstrndup (self->report_line.data, S_REPORT_HEAD);
            cgq_buf_reset (&self->report_line);
            self->report_discarding = true;
            if (nl)
                s_report_overlong_end (self);
        }
        else if (nl) {
            if (self->report_line.len > 0) {
                cgq_buf_append (&self->report_line, data, chunk);
                s_report_line (self, self->report_line.data, self->report_line.len);
                cgq_buf_reset (&self->report_line);
            }
            else
                s_report_line (self, data, chunk);
        }
        else
            cgq_buf_append (&self->report_line, data, chunk);
        if (!nl)
            break;
        data += chunk + 1;
        len -= chunk + 1;
    }
}

// s_report_eof handles a last line without its newline.
static void
s_report_eof (cgq_task_t *self)
{
    if (self->report_discarding)
        s_report_overlong_end (self);
    else if (self->report_line.len > 0) {
        s_report_line (self, self->report_line.data, self->report_line.len);
        cgq_buf_reset (&self->report_line);
    }
}

// ---------------------------------------------------------------------------
// Pipes

static void
s_close (int *fd)
{
    if (*fd >= 0)
        close (*fd);
    *fd = -1;
}

// s_read_fd reads what fd has now (more of it when drain); at EOF or on an
// error it closes fd.
static void
s_read_fd (cgq_task_t *self, int *fd, bool drain)
{
    char *chunk = cgq_xmalloc (S_READ_CHUNK);
    int max_reads = drain ? S_READS_AT_EXIT : S_READS_PER_WAKE;
    for (int i = 0; *fd >= 0 && i < max_reads; i++) {
        ssize_t n = read (*fd, chunk, S_READ_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (n <= 0) {
            if (fd == &self->report_fd)
                s_report_eof (self);
            s_close (fd);
            break;
        }
        if (fd == &self->out.fd)
            s_log (self, &self->out, chunk, (size_t) n);
        else if (fd == &self->err.fd)
            s_log (self, &self->err, chunk, (size_t) n);
        else
            s_report_data (self, chunk, (size_t) n);
    }
    free (chunk);
}

// The pipes of the next trial (stdout, stderr, report), made once a trial
// runs rather than during the next one's start (~30 us of it on the
// development VM), and /dev/null for the trials' stdin, opened once (~30 us
// more). Trials start from the worker's main thread alone, one at a time.
static int s_ahead[3][2];
static bool s_ahead_ready;
static int s_null_fd = -1;

// s_pipes_close closes both ends of the first n pipes of p.
static void
s_pipes_close (int p[][2], int n)
{
    for (int i = 0; i < n; i++) {
        close (p[i][0]);
        close (p[i][1]);
    }
}

// s_pipes fills p with the three pipes of a start: the ones made ahead,
// else new ones. Returns 0, or -1 with errno (none left open).
static int
s_pipes (int p[3][2])
{
    if (s_ahead_ready) {
        memcpy (p, s_ahead, sizeof s_ahead);
        s_ahead_ready = false;
        return 0;
    }
    for (int i = 0; i < 3; i++) {
        if (cgq_spawn_pipe (p[i]) == 0)
            continue;
        int e = errno;
        s_pipes_close (p, i);
        errno = e;
        return -1;
    }
    return 0;
}

// s_pipes_ahead makes the next start's pipes (if it cannot, that start makes
// its own and says why it cannot).
static void
s_pipes_ahead (void)
{
    if (!s_ahead_ready)
        s_ahead_ready = s_pipes (s_ahead) == 0;
}

// s_devnull is /dev/null, open above fd 3 (close-on-exec), or -1: the child
// then opens one itself.
static int
s_devnull (void)
{
    if (s_null_fd < 0) {
        int fd = open ("/dev/null", O_RDONLY | O_CLOEXEC);
        if (fd >= 0 && fd <= 3) {
            int moved = fcntl (fd, F_DUPFD_CLOEXEC, 4);
            close (fd);
            fd = moved;
        }
        s_null_fd = fd;
    }
    return s_null_fd;
}

static void
s_nonblock (int fd)
{
    int fl = fcntl (fd, F_GETFL);
    if (fl >= 0)
        fcntl (fd, F_SETFL, fl | O_NONBLOCK);
}

// ---------------------------------------------------------------------------
// Environment

typedef struct {
    char **items;     // "NAME=value"; owned, but items[i] == s_base.items[i] (i < nbase)
    size_t count;
    size_t nbase;     // items[0..nbase) started as the base's
} s_env_t;

// The worker's own environment and CUDA_DEVICE_ORDER, made once: a trial's
// start copies the pointers (the worker never changes its environment).
static s_env_t s_base;
static bool s_base_made;

static bool
s_env_shared (const s_env_t *env, size_t i)
{
    return env != &s_base && i < env->nbase && env->items[i] == s_base.items[i];
}

static void
s_env_set (s_env_t *env, const char *name, const char *value)
{
    size_t nlen = strlen (name);
    char *entry = cgq_xasprintf ("%s=%s", name, value);
    for (size_t i = 0; i < env->count; i++)
        if (!strncmp (env->items[i], name, nlen) && env->items[i][nlen] == '=') {
            if (!s_env_shared (env, i))
                free (env->items[i]);
            env->items[i] = entry;
            return;
        }
    env->items = cgq_xrealloc (env->items, (env->count + 2) * sizeof *env->items);
    env->items[env->count++] = entry;
    env->items[env->count] = NULL;
}

static void
s_env_free (s_env_t *env)
{
    for (size_t i = 0; i < env->count; i++)
        if (!s_env_shared (env, i))
            free (env->items[i]);
    free (env->items);
}

// s_env_build is the worker's environment + assign->env + the contract
// variables, later ones winning.
static void
s_env_build (cgq_task_t *self, const Cgq__Assign *a, s_env_t *env)
{
    if (!s_base_made) {
        s_base.items = cgq_xcalloc (1, sizeof *s_base.items);
        for (char **e = environ; e && *e; e++) {
            const char *eq = strchr (*e, '=');
            if (!eq)
                continue;
            char *name = cgq_xstrndup (*e, (size_t) (eq - *e));
            s_env_set (&s_base, name, eq + 1);
            free (name);
        }
        // Granted GPU indices are nvidia-smi's, in PCI bus order; CUDA
        // numbers the fastest GPU first by default, so on a host with mixed
        // GPUs CUDA_VISIBLE_DEVICES=1 would name another GPU than the one
        // granted. trial.env may still say otherwise.
        s_env_set (&s_base, "CUDA_DEVICE_ORDER", "PCI_BUS_ID");
        s_base_made = true;
    }
    env->nbase = env->count = s_base.count;
    env->items = cgq_xmalloc ((s_base.count + 1) * sizeof *env->items);
    memcpy (env->items, s_base.items, (s_base.count + 1) * sizeof *env->items);
    for (size_t i = 0; i < a->n_env; i++)
        if (a->env[i]->key && *a->env[i]->key)
            s_env_set (env, a->env[i]->key, a->env[i]->value ? a->env[i]->value : "");

    char num[32];
    snprintf (num, sizeof num, "%" PRIu64, self->ref.job);
    s_env_set (env, "CGQ_JOB_ID", num);
    snprintf (num, sizeof num, "%" PRIu64, self->ref.trial);
    s_env_set (env, "CGQ_TRIAL_ID", num);
    snprintf (num, sizeof num, "%u", self->ref.attempt);
    s_env_set (env, "CGQ_ATTEMPT", num);
    const char *params_text = a->params_json && *a->params_json ? a->params_json : "{}";
    s_env_set (env, "CGQ_PARAMS", params_text);
    json_error_t jerr;
    json_t *params = json_loads (params_text, 0, &jerr);
    if (json_is_object (params)) {
        const char *key;
        json_t *value;
        json_object_foreach (params, key, value) {
            char *name = cgq_task_env_name (key);
            // Exactly as "{name}" reads in the command (before shell quoting).
            char *text = cgq_template_value_str (value);
            s_env_set (env, name, text);
            free (text);
            free (name);
        }
    }
    else
        cgq_twarn (S_IDS (self), "params are not a JSON object; no CGQ_PARAM_* variables set");
    json_decref (params);
    s_env_set (env, "CGQ_TRIAL_DIR", self->trial_dir);
    s_env_set (env, "CGQ_CHECKPOINT_DIR", self->ckpt_dir);
    if (self->resume_json) {
        s_env_set (env, "CGQ_RESUME_JSON", self->resume_json);
        json_t *step = json_loads (self->resume_json, 0, NULL);
        char *v = self->resume_attr
                      ? cgq_template_value_str (json_object_get (step, self->resume_attr))
                      : NULL;
        s_env_set (env, "CGQ_RESUME_STEP", v ? v : "");
        free (v);
        json_decref (step);
    }
    s_env_set (env, "CGQ_SPEC_DIR", a->spec_dir ? a->spec_dir : "");
    s_env_set (env, "CGQ_REPORT_FD", "3");
    cgq_buf_t gpus;
    cgq_buf_init (&gpus);
    for (size_t i = 0; i < a->n_gpus; i++)
        cgq_buf_printf (&gpus, "%s%u", i ? "," : "", a->gpus[i]);
    s_env_set (env, "CUDA_VISIBLE_DEVICES", gpus.data);
    cgq_buf_fini (&gpus);
}

// ---------------------------------------------------------------------------
// Start

static cgq_task_t *
s_task_new (const Cgq__Assign *a, const cgq_task_opts_t *opts)
{
    cgq_task_t *self = cgq_xcalloc (1, sizeof *self);
    cgq__task_ref__init (&self->ref);
    if (a->task) {
        self->ref.job = a->task->job;
        self->ref.trial = a->task->trial;
        self->ref.stage = a->task->stage;
        self->ref.attempt = a->task->attempt;
    }
    self->argv0 = s_str (a->n_argv > 0 ? a->argv[0] : "");
    // Stage 0 is the trial itself; later stages get their own directory so
    // that they do not overwrite its logs.
    if (self->ref.stage == 0)
        self->trial_dir = cgq_xasprintf ("%s/job-%" PRIu64 "/trial-%" PRIu64 "/attempt-%u",
                                         opts->workdir, self->ref.job, self->ref.trial,
                                         self->ref.attempt);
    else
        self->trial_dir = cgq_xasprintf ("%s/job-%" PRIu64 "/trial-%" PRIu64
                                         "/attempt-%u.stage-%u",
                                         opts->workdir, self->ref.job, self->ref.trial,
                                         self->ref.attempt, self->ref.stage);
    self->ckpt_dir = cgq_xasprintf ("%s/checkpoint", self->trial_dir);
    self->on_checkpoint = opts->on_checkpoint;
    if (opts->resume_json) {
        self->resume_json = cgq_xstrdup (opts->resume_json);
        json_t *step = json_loads (opts->resume_json, 0, NULL);
        const char *key;
        json_t *v;
        json_object_foreach (step, key, v)
        {
            if (json_is_number (v)) {
                self->resume_attr = cgq_xstrdup (key);
                self->resume_value = json_number_value (v);
                break;
            }
        }
        json_decref (step);
    }
    self->log_cap = opts->log_cap;
    self->max_line = opts->max_report_line ? opts->max_report_line : S_MAX_REPORT_LINE;
    self->grace_ms = opts->kill_grace_ms;
    self->started_ms = cgq_now_ms ();
    self->timeout_ms = a->timeout_ms;
    self->timeout_at = a->timeout_ms > 0 ? self->started_ms + a->timeout_ms : -1;
    self->kill_at = -1;
    self->out = (s_stream_t) {.fd = -1, .log_fd = -1, .last_nl = true};
    self->err = (s_stream_t) {.fd = -1, .log_fd = -1, .last_nl = true};
    self->report_fd = -1;
    cgq_buf_init (&self->report_line);
    cgq_buf_init (&self->tail);
    cgq_buf_init (&self->err_tail);
    return self;
}

// s_lost finishes a task that never ran.
static void
s_lost (cgq_task_t *self, const char *error)
{
    cgq_twarn (S_IDS (self), "%s", error);
    self->result = cgq_result_new (&self->ref, CGQ__TASK_STATUS__TASK_LOST, NULL, error);
    s_set_str (&self->result->trial_dir, self->trial_dir);
    s_close (&self->out.log_fd);
    s_close (&self->err.log_fd);
    cgq_confine_trial_end (&self->confined);
    self->done = true;
}

// s_lost_errno is s_lost for a start that failed with errno e, its error
// formatted from fmt: out of file descriptors, it says which limit to raise;
// on a full disk, that it is full.
static void s_lost_errno (cgq_task_t *self, int e, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

static void
s_lost_errno (cgq_task_t *self, int e, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    char *what = cgq_xvasprintf (fmt, ap);
    va_end (ap);
    struct rlimit rl;
    char *msg = NULL;
    if (e == ENFILE)
        msg = cgq_xasprintf ("%s (the system's open file table is full: see fs.file-max)",
                             what);
    else if (e == EMFILE && getrlimit (RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        msg = cgq_xasprintf ("%s (the worker is at its open file limit, %llu: raise it, with "
                             "ulimit -n or systemd's LimitNOFILE=)",
                             what, (unsigned long long) rl.rlim_cur);
    else if (e == EMFILE)
        msg = cgq_xasprintf ("%s (the worker is at its open file limit: raise it)", what);
    else if (e == ENOSPC || e == EDQUOT)
        msg = cgq_xasprintf ("%s (the filesystem of the worker's --workdir is full, of space "
                             "or of inodes: free some)", what);
    s_lost (self, msg ? msg : what);
    free (msg);
    free (what);
}

// cgq_task_predictor_argv is the command of a "predictor" task: cgq-predictor
// (beside this worker's binary, else from PATH) training on the dataset
// directory that the assignment's argv[0] names, relative to the spec's
// directory. The trial then runs, is confined, logged, timed out and stopped
// exactly as a command; exec'ing a separate program keeps OpenBLAS's thread
// pool out of the worker. Returns a NULL-terminated argv, all owned.
char **
cgq_task_predictor_argv (const Cgq__Assign *a)
{
    char **argv = cgq_xcalloc (5, sizeof *argv);
    char self[PATH_MAX];
    ssize_t len = readlink ("/proc/self/exe", self, sizeof self - 1);
    char *dir = len > 0 ? cgq_xstrndup (self, (size_t) len) : NULL;
    char *slash = dir ? strrchr (dir, '/') : NULL;
    if (slash)
        *slash = '\0';
    char *path = slash ? cgq_xasprintf ("%s/cgq-predictor", dir) : NULL;
    argv[0] = path && access (path, X_OK) == 0 ? path : cgq_xstrdup ("cgq-predictor");
    if (argv[0] != path)
        free (path);
    free (dir);
    argv[1] = cgq_xstrdup ("trial");
    argv[2] = cgq_xstrdup ("--data");
    const char *data = a->argv[0];
    argv[3] = data[0] != '/' && a->spec_dir && *a->spec_dir
                  ? cgq_xasprintf ("%s/%s", a->spec_dir, data)
                  : cgq_xstrdup (data);
    return argv;
}

// s_confined_dir makes dir (created under workdir) private to the worker's
// user (0700) after checking that no part of it below workdir is a symbolic
// link: trials write in the work directory, and one that replaced a later
// attempt's directory by a link would otherwise have the worker chmod, and
// write logs into, whatever it points to. Returns NULL, or the error (caller
// frees).
static char *
s_confined_dir (const char *workdir, const char *dir)
{
    size_t n = strlen (workdir);
    char *p = cgq_xstrdup (dir);
    char *err = NULL;
    for (char *q = p + n + 1; !err; q++) {
        bool end = *q == 0;
        if (*q != '/' && !end)
            continue;
        *q = 0;
        struct stat st;
        memset (&st, 0, sizeof st);
        if (lstat (p, &st) < 0 || !S_ISDIR (st.st_mode))
            err = cgq_xasprintf ("trial directory %s: %s is %s; not running a trial there", dir,
                                 p, S_ISLNK (st.st_mode) ? "a symbolic link" : "not a directory");
        if (end)
            break;
        *q = '/';
    }
    free (p);
    if (!err && chmod (dir, 0700) < 0)
        err = cgq_xasprintf ("cannot make trial directory %s private: %s", dir, strerror (errno));
    return err;
}

// s_checkpoint_dir makes the trial's CGQ_CHECKPOINT_DIR: the restored
// checkpoint moved into place, else an empty directory (a spare trial
// directory comes with one, made ahead). An earlier run's leftovers there are
// not the trial's. Returns NULL, or the error (caller frees).
static char *
s_checkpoint_dir (cgq_task_t *self, const cgq_task_opts_t *opts, bool made)
{
    if (opts->restored) {
        rmdir (self->ckpt_dir); // the spare's empty one
        if (rename (opts->restored, self->ckpt_dir) == 0)
            return NULL;
        s_warn (self, "cannot move the restored checkpoint %s to %s: %s; starting without it",
                opts->restored, self->ckpt_dir, strerror (errno));
        cgq_rm_tree (opts->restored);
        free (self->resume_json);
        free (self->resume_attr);
        self->resume_json = self->resume_attr = NULL;
    }
    else if (made)
        return NULL;
    if (mkdir (self->ckpt_dir, 0700) == 0)
        return NULL;
    if (errno == EEXIST && cgq_rm_tree (self->ckpt_dir) == 0 && mkdir (self->ckpt_dir, 0700) == 0)
        return NULL;
    int en = errno;
    return cgq_xasprintf ("cannot create checkpoint directory %s: %s%s", self->ckpt_dir,
                          strerror (en),
                          en == ENOSPC || en == EDQUOT
                              ? " (the filesystem of the worker's --workdir is full, of space "
                                "or of inodes: free some)"
                              : "");
}

cgq_task_t *
cgq_task_start (const Cgq__Assign *a, const cgq_task_opts_t *opts, cgq_task_report_fn *on_report,
                void *arg)
{
    cgq_task_t *self = s_task_new (a, opts);
    self->on_report = on_report;
    self->arg = arg;
    if (a->n_argv == 0 || !a->argv[0] || !*a->argv[0]) {
        s_lost (self, "assignment has no command (argv is empty)");
        return self;
    }
    // Made ahead (spare.h): one to three renames instead of five new inodes.
    bool made = opts->spare
                && cgq_spare_take (opts->spare, self->trial_dir, &self->out.log_fd,
                                   &self->err.log_fd) == 0;
    if (!made && cgq_mkdir_p (self->trial_dir) < 0) {
        int en = errno;
        s_lost_errno (self, en, "cannot create trial directory %s: %s%s", self->trial_dir,
                      strerror (en), en == ENOSPC || en == EDQUOT ? "" : " (check --workdir)");
        return self;
    }
    char *unsafe = s_confined_dir (opts->workdir, self->trial_dir);
    if (unsafe) {
        s_lost (self, unsafe);
        free (unsafe);
        return self;
    }
    if (!made) {
        // A result.json left by an earlier run of this attempt would pass for ours.
        char *result_path = cgq_xasprintf ("%s/result.json", self->trial_dir);
        unlink (result_path);
        free (result_path);
    }

    const char *log_names[2] = {"stdout.log", "stderr.log"};
    s_stream_t *streams[2] = {&self->out, &self->err};
    for (int i = 0; i < 2 && !made; i++) {
        char *path = cgq_xasprintf ("%s/%s", self->trial_dir, log_names[i]);
        // O_NOFOLLOW: a link planted by an earlier run must not make us
        // truncate the file it points to.
        streams[i]->log_fd =
            open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (streams[i]->log_fd < 0) {
            int en = errno;
            s_lost_errno (self, en, "cannot create %s: %s", path, strerror (en));
            free (path);
            return self;
        }
        free (path);
    }

    if (opts->notes)
        for (const char *p = opts->notes; *p;) {
            const char *nl = strchrnul (p, '\n');
            s_warn (self, "%.*s", (int) (nl - p), p);
            p = *nl ? nl + 1 : nl;
        }
    char *unready = s_checkpoint_dir (self, opts, made);
    if (unready) {
        s_lost (self, unready);
        free (unready);
        return self;
    }

    int pipes[3][2]; // stdout, stderr, report
    if (s_pipes (pipes) < 0) {
        int en = errno;
        s_lost_errno (self, en, "cannot create pipes: %s", strerror (en));
        return self;
    }
    if (opts->confine) {
        char name[96], err[PATH_MAX + 128];
        if (self->ref.stage == 0)
            snprintf (name, sizeof name, "job-%" PRIu64 ".trial-%" PRIu64 ".attempt-%u",
                      self->ref.job, self->ref.trial, self->ref.attempt);
        else
            snprintf (name, sizeof name, "job-%" PRIu64 ".trial-%" PRIu64 ".attempt-%u.stage-%u",
                      self->ref.job, self->ref.trial, self->ref.attempt, self->ref.stage);
        errno = 0;
        self->confined = cgq_confine_trial_new (opts->confine, name, self->trial_dir, err,
                                                sizeof err);
        if (!self->confined) {
            int en = errno;
            s_pipes_close (pipes, 3);
            s_lost_errno (self, en, "%s", err);
            return self;
        }
    }
    int leaf_fd = self->confined ? cgq_confine_trial_leaf_fd (self->confined) : -1;

    s_env_t env;
    s_env_build (self, a, &env);
    bool predictor = a->kind && !strcmp (a->kind, "predictor");
    char **argv;
    if (predictor) {
        argv = cgq_task_predictor_argv (a);
        free (self->argv0);
        self->argv0 = cgq_xstrdup (argv[0]);
    }
    else {
        argv = cgq_xcalloc (a->n_argv + 1, sizeof *argv);
        for (size_t i = 0; i < a->n_argv; i++)
            argv[i] = a->argv[i];
    }
    struct rlimit rl;
    int max_fd = getrlimit (RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 65536 ? (int) rl.rlim_cur
                                                                            : 65536;

    cgq_spawn_t sp = {.dir = self->trial_dir, .argv = argv, .envp = env.items,
                      .out_w = pipes[0][1], .err_w = pipes[1][1], .rep_w = pipes[2][1],
                      .null_fd = s_devnull (), .status_w = -1, .max_fd = max_fd};
    char jerr[PATH_MAX + 64] = "";
    pid_t pid = cgq_spawn (&sp, self->confined, leaf_fd, jerr, sizeof jerr);
    int fork_errno = errno;
    for (size_t i = 0; predictor && argv[i]; i++)
        free (argv[i]);
    free (argv);
    s_env_free (&env);
    for (int i = 0; i < 3; i++)
        close (pipes[i][1]);
    if (pid < 0) {
        cgq_spare_refill (opts->spare);
        for (int i = 0; i < 3; i++)
            close (pipes[i][0]);
        if (pid == -2)
            s_lost (self, jerr);
        else
            s_lost_errno (self, fork_errno, "cannot fork: %s", strerror (fork_errno));
        return self;
    }
    // No setpgid (pid, pid) here: it could make the child a group leader
    // before its setsid(), which would then fail. s_spawn returns only after
    // the child's exec (CLONE_VFORK, or the status pipe's EOF), so after its
    // setsid(): a kill after cgq_task_start reaches its session and group.
    self->pid = pid;
    self->out.fd = pipes[0][0];
    self->err.fd = pipes[1][0];
    self->report_fd = pipes[2][0];
    s_nonblock (self->out.fd);
    s_nonblock (self->err.fd);
    s_nonblock (self->report_fd);

    // The trial runs (or failed to exec: sp.fail says which): the spare
    // directory and the pipes it took are made again now, not while the
    // start competed for the CPUs.
    cgq_spare_refill (opts->spare);
    s_pipes_ahead ();
    if (self->confined)
        cgq_confine_trial_started (self->confined, pid);
    if (sp.fail[0]) {
        self->fail_stage = sp.fail[0];
        self->fail_errno = sp.fail[1];
        if (sp.fail[0] == CGQ_SPAWN_FAIL_EXEC)
            s_warn (self, "cannot run '%s': %s", self->argv0, strerror (sp.fail[1]));
        else if (sp.fail[0] == CGQ_SPAWN_FAIL_CGROUP)
            s_warn (self, "cannot move the trial into cgroup %s: %s",
                    cgq_confine_trial_cgroup (self->confined), strerror (sp.fail[1]));
        else
            s_warn (self, "cannot enter trial directory %s: %s", self->trial_dir,
                    strerror (sp.fail[1]));
    }
    cgq_tdebug (S_IDS (self), "started pid %d in %s", (int) pid, self->trial_dir);
    return self;
}

// ---------------------------------------------------------------------------
// Exit

// s_signal sends sig to every process of the trial: what confine knows of it
// (its cgroup, or its session and what descends from it), else its process
// group. Returns how many processes were signalled (confined) or 1/0.
static size_t
s_signal (cgq_task_t *self, int sig)
{
    if (self->confined)
        return cgq_confine_trial_signal (self->confined, sig);
    return self->pid > 0 && killpg (self->pid, sig) == 0 ? 1 : 0;
}

// s_metrics returns the result object: result.json if it holds one, else the
// last report, else {}. A result.json too large to send is not read at all
// (it could be gigabytes); *too_big is then its size.
static json_t *
s_metrics (cgq_task_t *self, long long *too_big, char **cut)
{
    char *path = cgq_xasprintf ("%s/result.json", self->trial_dir);
    json_t *metrics = NULL;
    struct stat st;
    *too_big = 0;
    *cut = NULL;
    // A link (to a file outside the trial directory) is not the trial's result.
    if (lstat (path, &st) == 0 && !S_ISREG (st.st_mode)) {
        s_warn (self, "ignoring result.json: not a regular file (a link?)");
        free (path);
        return self->last_report ? json_deep_copy (self->last_report) : json_object ();
    }
    if (lstat (path, &st) == 0 && st.st_size > (off_t) S_MAX_METRICS * 2) {
        *too_big = (long long) st.st_size;
        free (path);
        return json_object ();
    }
    if (access (path, F_OK) == 0) {
        json_error_t jerr;
        json_t *doc = json_load_file (path, 0, &jerr);
        if (json_is_object (doc))
            metrics = doc;
        else if (!doc && lstat (path, &st) == 0 && jerr.position >= st.st_size) {
            // Empty, or the text ends before the object does: the trial's
            // write of it did not complete (a full disk). Its last report is
            // not the result it meant to give.
            *cut = cgq_xasprintf ("%lld bytes, %s", (long long) st.st_size, jerr.text);
        }
        else {
            if (doc)
                s_warn (self, "ignoring result.json: not a JSON object");
            else
                s_warn (self, "ignoring result.json: %s (line %d)", jerr.text, jerr.line);
            json_decref (doc);
        }
    }
    free (path);
    if (!metrics && self->last_report)
        metrics = json_incref (self->last_report);
    return metrics ? metrics : json_object ();
}

// s_disk_note says what a failed log write cost (NULL when none did and
// result_cut is NULL): "stdout.log truncated at 4096 bytes: No space left on
// device", and for a result.json cut short (result_cut: its size and JSON
// error), that it could not be written and why. With a full disk and no
// result.json at all, it says the result is the last report: a trial that
// wrote one may have lost it.
static char *
s_disk_note (cgq_task_t *self, const char *result_cut)
{
    cgq_buf_t b;
    cgq_buf_init (&b);
    const char *names[2] = {"stdout.log", "stderr.log"};
    s_stream_t *streams[2] = {&self->out, &self->err};
    int en = 0;
    if (result_cut) {
        // The cause is the errno of a log write if one failed, else whether
        // the directory's filesystem is full now.
        for (int i = 0; i < 2 && !en; i++)
            en = streams[i]->write_errno;
        struct statvfs vfs;
        if (!en && statvfs (self->trial_dir, &vfs) == 0 && vfs.f_bavail == 0)
            en = ENOSPC;
        cgq_buf_printf (&b, "result.json could not be written: %s (it holds %s)",
                        en ? strerror (en) : "the trial's write of it did not complete",
                        result_cut);
    }
    for (int i = 0; i < 2; i++) {
        s_stream_t *s = streams[i];
        if (!s->write_errno)
            continue;
        if (!en)
            en = s->write_errno;
        cgq_buf_printf (&b, "%s%s truncated at %" PRIu64 " bytes: %s%s", b.len ? "; " : "",
                        names[i], s->written, strerror (s->write_errno),
                        s->marked ? "" : " (no room left for its marker line)");
    }
    if (!result_cut && (en == ENOSPC || en == EDQUOT)) {
        char *path = cgq_xasprintf ("%s/result.json", self->trial_dir);
        if (access (path, F_OK) < 0 && errno == ENOENT)
            cgq_buf_printf (&b, "; no result.json: the result is the last report (a "
                                "result.json the trial wrote on the full disk is lost)");
        free (path);
    }
    if (b.len == 0) {
        cgq_buf_fini (&b);
        return NULL;
    }
    char *out = cgq_xstrndup (b.data, b.len);
    cgq_buf_fini (&b);
    return out;
}

static void
s_finish (cgq_task_t *self)
{
    s_read_fd (self, &self->out.fd, true);
    s_read_fd (self, &self->err.fd, true);
    s_read_fd (self, &self->report_fd, true);
    // What the trial left behind (background children, daemons it started)
    // dies with it.
    size_t left = s_signal (self, SIGKILL);
    if (left > 0) {
        cgq_tdebug (S_IDS (self), "killed %zu process(es) it left behind", left);
    }
    char *leaf = self->confined && cgq_confine_trial_cgroup (self->confined)
                     ? cgq_xstrdup (cgq_confine_trial_cgroup (self->confined))
                     : NULL;
    cgq_confine_trial_end (&self->confined);
    s_close (&self->out.fd);
    s_close (&self->err.fd);
    if (self->report_fd >= 0) {
        s_report_eof (self);
        s_close (&self->report_fd);
    }

    Cgq__TaskStatus status;
    char *error = NULL;
    int st = self->wait_status;
    int exit_code = WIFEXITED (st) ? WEXITSTATUS (st) : WIFSIGNALED (st) ? -WTERMSIG (st) : -1;
    bool with_stderr = true;
    if (self->fail_error) {
        status = CGQ__TASK_STATUS__TASK_FAILED;
        error = cgq_xstrdup (self->fail_error);
        with_stderr = false;
    }
    else if (self->stopped) {
        status = CGQ__TASK_STATUS__TASK_STOPPED;
        error = cgq_xasprintf ("stopped: %s", self->stop_reason ? self->stop_reason : "");
        with_stderr = false;
    }
    else if (self->timed_out) {
        status = CGQ__TASK_STATUS__TASK_TIMEOUT;
        char *dur = s_fmt_seconds (self->timeout_ms);
        error = cgq_xasprintf ("timed out after %s", dur);
        free (dur);
    }
    else if (self->fail_stage == CGQ_SPAWN_FAIL_EXEC) {
        status = CGQ__TASK_STATUS__TASK_FAILED;
        error = cgq_xasprintf ("cannot run '%s': %s", self->argv0, strerror (self->fail_errno));
        with_stderr = false;
    }
    else if (self->fail_stage == CGQ_SPAWN_FAIL_CGROUP) {
        status = CGQ__TASK_STATUS__TASK_LOST;
        error = cgq_xasprintf ("cannot move the trial into cgroup %s: %s", leaf ? leaf : "?",
                               strerror (self->fail_errno));
        with_stderr = false;
    }
    else if (self->fail_stage == CGQ_SPAWN_FAIL_CHDIR) {
        status = CGQ__TASK_STATUS__TASK_LOST;
        error = cgq_xasprintf ("cannot enter trial directory %s: %s", self->trial_dir,
                               strerror (self->fail_errno));
        with_stderr = false;
    }
    else if (WIFEXITED (st) && WEXITSTATUS (st) == 0)
        status = CGQ__TASK_STATUS__TASK_SUCCEEDED;
    else if (WIFEXITED (st)) {
        status = CGQ__TASK_STATUS__TASK_FAILED;
        error = cgq_xasprintf ("exit status %d", WEXITSTATUS (st));
    }
    else {
        status = CGQ__TASK_STATUS__TASK_FAILED;
        const char *abbrev = WIFSIGNALED (st) ? sigabbrev_np (WTERMSIG (st)) : NULL;
        error = cgq_xasprintf ("killed by signal %d (SIG%s)", WIFSIGNALED (st) ? WTERMSIG (st) : 0,
                               abbrev ? abbrev : "?");
    }
    free (leaf);
    if (error && with_stderr && self->err_tail.len > 0) {
        char *lines = s_last_lines (self->err_tail.data, self->err_tail.len, S_ERR_TAIL_LINES);
        if (*lines) {
            char *full = cgq_xasprintf ("%s\n%s", error, lines);
            free (error);
            error = full;
        }
        free (lines);
    }

    s_log_mark (&self->out); // a second try, now that the trial is gone
    s_log_mark (&self->err);
    long long file_len;
    char *cut = NULL;
    json_t *metrics = s_metrics (self, &file_len, &cut);
    char *disk_note = s_disk_note (self, cut);
    if (cut && status == CGQ__TASK_STATUS__TASK_SUCCEEDED) {
        status = CGQ__TASK_STATUS__TASK_FAILED;
        free (error);
        error = disk_note;
        disk_note = NULL;
    }
    free (cut);
    char *metrics_text = cgq_json_dumps (metrics);
    json_decref (metrics);
    size_t metrics_len = file_len > 0 ? (size_t) file_len : metrics_text ? strlen (metrics_text) : 0;
    if (metrics_len > S_MAX_METRICS) {
        free (metrics_text);
        metrics_text = NULL;
        if (status == CGQ__TASK_STATUS__TASK_SUCCEEDED) {
            status = CGQ__TASK_STATUS__TASK_FAILED;
            free (error);
            error = cgq_xasprintf ("result metrics are %zu bytes, more than the limit of %u "
                                   "(write fewer or smaller values to result.json)",
                                   metrics_len, S_MAX_METRICS);
        }
    }
    s_close (&self->out.log_fd);
    s_close (&self->err.log_fd);
    // A success carries the first rejected report line as its error: the
    // coordinator shows it when the metrics it needed are missing, and keeps
    // it as the trial's warning otherwise.
    if (status == CGQ__TASK_STATUS__TASK_SUCCEEDED && !error && self->report_note)
        error = cgq_xstrdup (self->report_note);
    if (disk_note) {
        // On a success it is the trial's warning; on a failure a line of its error.
        char *full = !error ? cgq_xstrdup (disk_note)
                     : status == CGQ__TASK_STATUS__TASK_SUCCEEDED
                         ? cgq_xasprintf ("%s; %s", error, disk_note)
                         : cgq_xasprintf ("%s\n%s", error, disk_note);
        free (error);
        error = full;
        free (disk_note);
    }

    Cgq__Result *r = cgq_result_new (&self->ref, status, metrics_text, error);
    free (metrics_text);
    free (error);
    r->exit_code = exit_code;
    r->duration_s = (double) (cgq_now_ms () - self->started_ms) / 1000.0;
    size_t tail_len = self->tail.len < S_TAIL_BYTES ? self->tail.len : S_TAIL_BYTES;
    free (r->log_tail);
    r->log_tail = s_utf8_clean (self->tail.data + self->tail.len - tail_len, tail_len);
    r->reports = self->seq;
    s_set_str (&r->trial_dir, self->trial_dir);
    self->result = r;
    self->done = true;
    cgq_tdebug (S_IDS (self), "%s%s%s",
               protobuf_c_enum_descriptor_get_value (&cgq__task_status__descriptor, (int) status)
                   ->name,
               r->error[0] ? ": " : "", r->error);
}

void
cgq_task_tick (cgq_task_t *self, int64_t now_ms)
{
    if (self->done || self->pid <= 0)
        return;
    if (!self->exited) {
        int st;
        pid_t r;
        do
            r = waitpid (self->pid, &st, WNOHANG);
        while (r < 0 && errno == EINTR);
        if (r == self->pid) {
            self->exited = true;
            self->wait_status = st;
        }
        else if (r < 0) {
            // Reaped elsewhere; nothing more to learn about its status.
            self->exited = true;
            self->wait_status = 0;
            cgq_twarn (S_IDS (self), "pid %d: waitpid: %s", (int) self->pid, strerror (errno));
        }
    }
    if (self->exited) {
        s_finish (self);
        return;
    }
    if (self->timeout_at >= 0 && now_ms >= self->timeout_at) {
        self->timeout_at = -1;
        if (!self->stopped) {
            self->timed_out = true;
            cgq_tinfo (S_IDS (self), "timed out after %" PRId64 " ms; sending SIGTERM to its processes",
                       self->timeout_ms);
            s_signal (self, SIGTERM);
            if (self->kill_at < 0)
                self->kill_at = now_ms + self->grace_ms;
        }
    }
    if (self->kill_at >= 0 && now_ms >= self->kill_at) {
        self->kill_at = -1;
        cgq_tinfo (S_IDS (self), "still running after the grace period; sending SIGKILL");
        s_signal (self, SIGKILL);
    }
}

int64_t
cgq_task_deadline (const cgq_task_t *self)
{
    if (self->done)
        return -1;
    int64_t d = self->timeout_at;
    if (self->kill_at >= 0 && (d < 0 || self->kill_at < d))
        d = self->kill_at;
    return d;
}

void
cgq_task_fail (cgq_task_t *self, const char *error, int64_t grace_ms)
{
    if (self->fail_error)
        return; // the first reason stands
    if (self->done && self->result) {
        Cgq__Result *r = self->result;
        char *e = r->error && *r->error ? cgq_xasprintf ("%s; %s", r->error, error)
                                        : cgq_xstrdup (error);
        free (r->error);
        r->error = e;
        if (r->status != CGQ__TASK_STATUS__TASK_SUCCEEDED
            && r->status != CGQ__TASK_STATUS__TASK_STOPPED)
            r->status = CGQ__TASK_STATUS__TASK_FAILED;
        return;
    }
    self->fail_error = cgq_xstrdup (error);
    s_warn (self, "%s", error);
    if (self->pid <= 0 || self->exited)
        return;
    int64_t now = cgq_now_ms ();
    if (self->kill_at < 0 || now + grace_ms < self->kill_at) {
        s_signal (self, SIGTERM);
        self->kill_at = now + grace_ms;
    }
}

void
cgq_task_warn (cgq_task_t *self, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    char *msg = cgq_xvasprintf (fmt, ap);
    va_end (ap);
    s_warn (self, "%s", msg);
    free (msg);
}

const char *
cgq_task_checkpoint_dir (const cgq_task_t *self)
{
    return self->ckpt_dir;
}

void
cgq_task_stop (cgq_task_t *self, const char *reason, int64_t grace_ms)
{
    if (self->done || self->pid <= 0 || self->exited)
        return;
    int64_t now = cgq_now_ms ();
    if (!self->stopped && !self->timed_out) {
        self->stopped = true;
        self->stop_reason = s_str (reason);
    }
    if (self->kill_at < 0 || now + grace_ms < self->kill_at) {
        s_signal (self, SIGTERM);
        self->kill_at = now + grace_ms;
    }
}

// ---------------------------------------------------------------------------
// Accessors and destruction

size_t
cgq_task_fds (const cgq_task_t *self, int *fds)
{
    size_t n = 0;
    if (self->out.fd >= 0)
        fds[n++] = self->out.fd;
    if (self->err.fd >= 0)
        fds[n++] = self->err.fd;
    if (self->report_fd >= 0)
        fds[n++] = self->report_fd;
    return n;
}

void
cgq_task_on_readable (cgq_task_t *self, int fd)
{
    if (fd < 0)
        return;
    if (fd == self->out.fd)
        s_read_fd (self, &self->out.fd, false);
    else if (fd == self->err.fd)
        s_read_fd (self, &self->err.fd, false);
    else if (fd == self->report_fd)
        s_read_fd (self, &self->report_fd, false);
}

const Cgq__TaskRef *
cgq_task_ref (const cgq_task_t *self)
{
    return &self->ref;
}

pid_t
cgq_task_pid (const cgq_task_t *self)
{
    return self->pid;
}

const char *
cgq_task_dir (const cgq_task_t *self)
{
    return self->trial_dir;
}

bool
cgq_task_done (const cgq_task_t *self)
{
    return self->done;
}

Cgq__Result *
cgq_task_take_result (cgq_task_t *self)
{
    Cgq__Result *r = self->result;
    self->result = NULL;
    return r;
}

void
cgq_task_destroy (cgq_task_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cgq_task_t *self = *self_p;
    if (self->pid > 0 && !self->exited) {
        s_signal (self, SIGKILL);
        int st;
        while (waitpid (self->pid, &st, 0) < 0 && errno == EINTR)
            ;
    }
    else if (self->pid > 0 && !self->done)
        s_signal (self, SIGKILL);
    cgq_confine_trial_end (&self->confined);
    s_close (&self->out.fd);
    s_close (&self->err.fd);
    s_close (&self->report_fd);
    s_close (&self->out.log_fd);
    s_close (&self->err.log_fd);
    cgq_result_destroy (&self->result);
    json_decref (self->last_report);
    cgq_buf_fini (&self->report_line);
    cgq_buf_fini (&self->tail);
    cgq_buf_fini (&self->err_tail);
    free (self->report_head);
    free (self->report_note);
    free (self->stop_reason);
    free (self->argv0);
    free (self->trial_dir);
    free (self->ckpt_dir);
    free (self->resume_json);
    free (self->resume_attr);
    free (self->fail_error);
    free (self);
    *self_p = NULL;
}
