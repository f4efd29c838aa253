#include "transport.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

#define S_DEFAULT_CACHE_MAX (1024ull * 1024 * 1024)
#define S_DEFAULT_CONNECT_S 10.0
#define S_PUSH_TIMEOUT_S 600.0

const char *
cgq_transport_kind_name (cgq_transport_kind_t kind)
{
    switch (kind) {
    case CGQ_TRANSPORT_LOCAL: return "local";
    case CGQ_TRANSPORT_SSH: return "ssh";
    case CGQ_TRANSPORT_ADB: return "adb";
    case CGQ_TRANSPORT_SDB: return "sdb";
    }
    return "?";
}

static int
s_text (cgq_yamldoc_t *y, const cgq_yamldoc_node_t *v, const char *what, const char *hint,
        char **out)
{
    const char *t;
    if (cgq_yamldoc_get_text (y, v, what, hint, &t) < 0)
        return -1;
    if (!*t)
        return cgq_yamldoc_fail (y, v, "%s is empty (%s)", what, hint);
    free (*out);
    *out = cgq_xstrdup (t);
    return 0;
}

int
cgq_transport_parse (cgq_yamldoc_t *y, const cgq_yamldoc_node_t *v, cgq_transport_t *t)
{
    memset (t, 0, sizeof *t);
    t->cache_max = S_DEFAULT_CACHE_MAX;
    t->connect_timeout_s = S_DEFAULT_CONNECT_S;
    const char *hint = "write transport: local, {ssh: {host: H}}, {adb: {serial: S}} or "
                       "{sdb: {serial: S}}";
    if (v->type == CGQ_YAMLDOC_SCALAR) {
        if (!strcmp (v->text, "local"))
            return 0;
        return cgq_yamldoc_fail (y, v, "unknown transport '%s' (%s)", v->text, hint);
    }
    if (cgq_yamldoc_expect_map (y, v, "transport", hint) < 0)
        return -1;
    if (cgq_yamldoc_npairs (v) != 1)
        return cgq_yamldoc_fail (y, v, "transport names one kind (%s)", hint);
    const cgq_yamldoc_node_t *k = cgq_yamldoc_key (y, v, 0), *m = cgq_yamldoc_val (y, v, 0);
    const char *known;
    if (!strcmp (k->text, "ssh")) {
        t->kind = CGQ_TRANSPORT_SSH;
        known = "host, port, user, key, known_hosts, dir, cache_max, connect_timeout";
        t->dir = cgq_xstrdup ("/tmp/cgq");
    } else if (!strcmp (k->text, "adb") || !strcmp (k->text, "sdb")) {
        t->kind = k->text[0] == 'a' ? CGQ_TRANSPORT_ADB : CGQ_TRANSPORT_SDB;
        known = "serial, dir, cache_max, connect_timeout";
        t->dir = cgq_xstrdup ("/data/local/tmp/cgq");
    } else
        return cgq_yamldoc_fail (y, k, "unknown transport '%s' (%s)", k->text, hint);
    if (cgq_yamldoc_expect_map (y, m, k->text, hint) < 0)
        return -1;
    for (size_t i = 0; i < cgq_yamldoc_npairs (m); i++) {
        const cgq_yamldoc_node_t *kk = cgq_yamldoc_key (y, m, i), *vv = cgq_yamldoc_val (y, m, i);
        const char *key = kk->text;
        int rc;
        long long n;
        double d;
        bool ssh = t->kind == CGQ_TRANSPORT_SSH;
        if (ssh && !strcmp (key, "host"))
            rc = s_text (y, vv, "ssh.host", "a host name or address", &t->host);
        else if (ssh && !strcmp (key, "port")) {
            rc = cgq_yamldoc_get_int (y, vv, "ssh.port", 1, 65535, "a TCP port", &n);
            t->port = (long) n;
        } else if (ssh && !strcmp (key, "user"))
            rc = s_text (y, vv, "ssh.user", "a user name", &t->user);
        else if (ssh && !strcmp (key, "key"))
            rc = s_text (y, vv, "ssh.key", "a private key file", &t->key);
        else if (ssh && !strcmp (key, "known_hosts"))
            rc = s_text (y, vv, "ssh.known_hosts", "a known_hosts file", &t->known_hosts);
        else if (!ssh && !strcmp (key, "serial"))
            rc = s_text (y, vv, "serial", "the device's serial, as `adb devices` lists it",
                         &t->serial);
        else if (!strcmp (key, "dir")) {
            rc = s_text (y, vv, "dir", "an absolute directory on the board", &t->dir);
            if (rc == 0 && (t->dir[0] != '/' || strchr (t->dir, '\'')))
                rc = cgq_yamldoc_fail (y, vv, "dir must be an absolute path without quotes");
        } else if (!strcmp (key, "cache_max")) {
            rc = cgq_yamldoc_get_int (y, vv, "cache_max", 1, (long long) 1 << 50,
                                      "bytes of artifacts kept on the board", &n);
            t->cache_max = (uint64_t) n;
        } else if (!strcmp (key, "connect_timeout")) {
            rc = cgq_yamldoc_get_number (y, vv, "connect_timeout", "seconds", &d);
            if (rc == 0 && !(d > 0 && d <= 3600))
                rc = cgq_yamldoc_fail (y, vv, "connect_timeout must be 0 < seconds <= 3600");
            t->connect_timeout_s = d;
        } else
            rc = cgq_yamldoc_unknown_key (y, kk, k->text, known);
        if (rc < 0)
            return -1;
    }
    // A value that starts with '-' would be read as an option of ssh or adb.
    const char *opt = t->host && t->host[0] == '-'       ? t->host
                      : t->user && t->user[0] == '-'     ? t->user
                      : t->serial && t->serial[0] == '-' ? t->serial
                                                         : NULL;
    if (opt)
        return cgq_yamldoc_fail (y, m, "transport %s: '%s' starts with '-' and would be read as an "
                                       "option of the client (write the host, user or serial)",
                                 k->text, opt);
    if (t->kind == CGQ_TRANSPORT_SSH && !t->host)
        return cgq_yamldoc_fail (y, m, "transport ssh needs a host (write host: ADDRESS)");
    if (t->kind != CGQ_TRANSPORT_SSH && !t->serial)
        return cgq_yamldoc_fail (y, m, "transport %s needs a serial (write serial: SERIAL)",
                                 k->text);
    return 0;
}

void
cgq_transport_fini (cgq_transport_t *t)
{
    if (!t)
        return;
    free (t->host);
    free (t->user);
    free (t->key);
    free (t->known_hosts);
    free (t->serial);
    free (t->dir);
    memset (t, 0, sizeof *t);
}

static bool
s_in_path (const char *name)
{
    const char *path = getenv ("PATH");
    if (!path)
        return false;
    char *copy = cgq_xstrdup (path), *save = NULL;
    bool found = false;
    for (char *d = strtok_r (copy, ":", &save); d && !found; d = strtok_r (NULL, ":", &save)) {
        char *p = cgq_xasprintf ("%s/%s", *d ? d : ".", name);
        found = access (p, X_OK) == 0;
        free (p);
    }
    free (copy);
    return found;
}

int
cgq_transport_ready (const cgq_transport_t *t, char *err, size_t errlen)
{
    const char *bin = t->kind == CGQ_TRANSPORT_SSH   ? "ssh"
                      : t->kind == CGQ_TRANSPORT_ADB ? "adb"
                      : t->kind == CGQ_TRANSPORT_SDB ? "sdb"
                                                     : NULL;
    if (!bin || s_in_path (bin))
        return 0;
    snprintf (err, errlen, "transport %s needs the '%s' program, which is not on PATH (%s)", bin,
              bin,
              t->kind == CGQ_TRANSPORT_SSH   ? "apt-get install openssh-client"
              : t->kind == CGQ_TRANSPORT_ADB ? "apt-get install adb"
                                             : "install Tizen Studio's sdb");
    return -1;
}

// A growable NULL-terminated argv.
typedef struct {
    char **v;
    size_t n;
} s_argv_t;

static void
s_add (s_argv_t *a, char *s) // takes s
{
    a->v = cgq_xrealloc (a->v, (a->n + 2) * sizeof *a->v);
    a->v[a->n++] = s;
    a->v[a->n] = NULL;
}

// s_control_path: the device's ssh control socket, in the runner's workdir
// (a socket path is at most 107 bytes, and ssh adds a temporary suffix to
// it: a long workdir falls back to /tmp with ssh's own hash of the
// connection).
static char *
s_control_path (const char *id, const char *workdir)
{
    char *p = cgq_xasprintf ("%s/ssh-%s.sock", workdir && *workdir ? workdir : ".", id);
    if (strlen (p) > 80) {
        free (p);
        p = cgq_xasprintf ("/tmp/cgq-ssh-%u-%%C", (unsigned) getuid ());
    }
    return p;
}

// s_ssh_opts adds the options every ssh and scp of the device shares.
static void
s_ssh_opts (s_argv_t *a, const cgq_transport_t *t, const char *id, const char *workdir, bool scp)
{
    char *cp = s_control_path (id, workdir);
    s_add (a, cgq_xstrdup ("-o"));
    s_add (a, cgq_xasprintf ("ControlPath=%s", cp));
    free (cp);
    const char *fixed[] = {"ControlMaster=auto", "ControlPersist=600", "BatchMode=yes",
                           "ServerAliveInterval=5", "ServerAliveCountMax=2", "LogLevel=ERROR"};
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++) {
        s_add (a, cgq_xstrdup ("-o"));
        s_add (a, cgq_xstrdup (fixed[i]));
    }
    s_add (a, cgq_xstrdup ("-o"));
    s_add (a, cgq_xasprintf ("ConnectTimeout=%d", (int) (t->connect_timeout_s + 0.999)));
    if (t->known_hosts) {
        s_add (a, cgq_xstrdup ("-o"));
        s_add (a, cgq_xasprintf ("UserKnownHostsFile=%s", t->known_hosts));
    }
    if (t->key) {
        s_add (a, cgq_xstrdup ("-i"));
        s_add (a, cgq_xstrdup (t->key));
        s_add (a, cgq_xstrdup ("-o"));
        s_add (a, cgq_xstrdup ("IdentitiesOnly=yes"));
    }
    if (t->port) {
        s_add (a, cgq_xstrdup (scp ? "-P" : "-p"));
        s_add (a, cgq_xasprintf ("%ld", t->port));
    }
}

static char *
s_target (const cgq_transport_t *t)
{
    return t->user ? cgq_xasprintf ("%s@%s", t->user, t->host) : cgq_xstrdup (t->host);
}

char **
cgq_transport_argv (const cgq_transport_t *t, const char *id, const char *workdir,
                    const char *command)
{
    s_argv_t a = {0};
    if (t->kind == CGQ_TRANSPORT_SSH) {
        s_add (&a, cgq_xstrdup ("ssh"));
        s_ssh_opts (&a, t, id, workdir, false);
        s_add (&a, s_target (t));
        s_add (&a, cgq_xstrdup ("--"));
    } else if (t->kind == CGQ_TRANSPORT_ADB || t->kind == CGQ_TRANSPORT_SDB) {
        s_add (&a, cgq_xstrdup (cgq_transport_kind_name (t->kind)));
        s_add (&a, cgq_xstrdup ("-s"));
        s_add (&a, cgq_xstrdup (t->serial));
        s_add (&a, cgq_xstrdup ("shell"));
    } else {
        s_add (&a, cgq_xstrdup ("/bin/sh"));
        s_add (&a, cgq_xstrdup ("-c"));
    }
    s_add (&a, cgq_xstrdup (command));
    return a.v;
}

void
cgq_transport_argv_free (char **argv)
{
    for (size_t i = 0; argv && argv[i]; i++)
        free (argv[i]);
    free (argv);
}

static void
s_quote (cgq_buf_t *b, const char *s)
{
    cgq_buf_append (b, "'", 1);
    for (; *s; s++) {
        if (*s == '\'')
            cgq_buf_append (b, "'\\''", 4);
        else
            cgq_buf_append (b, s, 1);
    }
    cgq_buf_append (b, "'", 1);
}

static void
s_puts (cgq_buf_t *b, const char *s)
{
    cgq_buf_append (b, s, strlen (s));
}

char *
cgq_transport_remote_command (const cgq_transport_t *t, char *const *keys, char *const *vals,
                              size_t n, const char *command, unsigned how)
{
    cgq_buf_t b;
    cgq_buf_init (&b);
    s_puts (&b, "mkdir -p ");
    s_quote (&b, t->dir);
    s_puts (&b, " && cd ");
    s_quote (&b, t->dir);
    s_puts (&b, " || exit 126; ");
    for (size_t i = 0; i < n; i++) {
        s_puts (&b, "export ");
        s_puts (&b, keys[i]); // a variable name (runcfg checks it)
        s_puts (&b, "=");
        s_quote (&b, vals[i]);
        s_puts (&b, "; ");
    }
    // The board's CPU account: the shell's own /proc/$$/stat (read, a
    // builtin: no child of its own) just before and just after the command;
    // silent where it cannot be read (the runner falls back to wall time).
    if (how & CGQ_TRANSPORT_CPU)
        s_puts (&b, "{ read -r cgq_c0 < /proc/$$/stat; } 2>/dev/null; ");
    if (how & CGQ_TRANSPORT_TIMED)
        // The board's timer: its own clock just before and just after the
        // command (date's %N: GNU coreutils, toybox and busybox have it).
        s_puts (&b, "cgq_t0=$(date +%s%N); ");
    if (how) {
        s_puts (&b, "( ");
        s_puts (&b, command);
        s_puts (&b, " ); cgq_rc=$?; ");
    }
    if (how & CGQ_TRANSPORT_TIMED)
        s_puts (&b, "cgq_t1=$(date +%s%N); echo \"" CGQ_TRANSPORT_TIMER_MARK
                    "$((cgq_t1 - cgq_t0))\"; ");
    if (how & CGQ_TRANSPORT_CPU)
        s_puts (&b, "{ read -r cgq_c1 < /proc/$$/stat; } 2>/dev/null; "
                    "if [ -n \"$cgq_c0\" ] && [ -n \"$cgq_c1\" ]; then echo \""
                    CGQ_TRANSPORT_STAT0_MARK "$cgq_c0\"; echo \"" CGQ_TRANSPORT_STAT1_MARK
                    "$cgq_c1\"; fi; ");
    if (how)
        s_puts (&b, "exit $cgq_rc");
    else
        s_puts (&b, command);
    cgq_buf_append (&b, "", 1);
    return b.data;
}

static int
s_run (char **argv, double timeout_s, cgq_invoke_t *out, char *err, size_t errlen)
{
    cgq_invoke_opts_t o = {.argv = argv, .timeout_s = timeout_s};
    int rc = cgq_invoke_run (&o, out);
    if (rc < 0)
        cgq_invoke_describe (out, timeout_s, err, errlen);
    return rc;
}

int
cgq_transport_shell (const cgq_transport_t *t, const char *id, const char *workdir,
                     char *const *keys, char *const *vals, size_t n, const char *command,
                     double timeout_s, char *err, size_t errlen)
{
    char *remote = cgq_transport_remote_command (t, keys, vals, n, command, false);
    char **argv = cgq_transport_argv (t, id, workdir, remote);
    free (remote);
    cgq_invoke_t out;
    char how[512];
    int rc = s_run (argv, timeout_s, &out, how, sizeof how);
    if (rc < 0)
        snprintf (err, errlen, "%s: %s", cgq_transport_kind_name (t->kind), how);
    cgq_invoke_fini (&out);
    cgq_transport_argv_free (argv);
    return rc;
}

static bool
s_is_sha (const char *s)
{
    size_t n = 0;
    for (; s && s[n]; n++)
        if (!strchr ("0123456789abcdef", s[n]))
            return false;
    return n == 64;
}

int
cgq_transport_push (const cgq_transport_t *t, const char *id, const char *workdir,
                    const char *path, const char *sha256, char **remote, bool *pushed, char *err,
                    size_t errlen)
{
    *remote = NULL;
    *pushed = false;
    if (!s_is_sha (sha256)) {
        snprintf (err, errlen, "the artifact's sha256 '%s' is not 64 hex digits", sha256);
        return -1;
    }
    const char *kind = cgq_transport_kind_name (t->kind);
    char *dst = cgq_xasprintf ("%s/cache/%s", t->dir, sha256);
    // One command: is it there (then it is touched, the newest)?
    char *look = cgq_xasprintf ("mkdir -p cache && if [ -f cache/%s ]; then touch cache/%s; echo "
                                "cgq-cache-hit; else echo cgq-cache-miss; fi",
                                sha256, sha256);
    char *cmd = cgq_transport_remote_command (t, NULL, NULL, 0, look, false);
    free (look);
    char **argv = cgq_transport_argv (t, id, workdir, cmd);
    free (cmd);
    cgq_invoke_t out;
    char how[512];
    int rc = s_run (argv, t->connect_timeout_s + 60, &out, how, sizeof how);
    cgq_transport_argv_free (argv);
    bool hit = rc == 0 && out.output.data && strstr (out.output.data, "cgq-cache-hit");
    bool miss = rc == 0 && out.output.data && strstr (out.output.data, "cgq-cache-miss");
    cgq_invoke_fini (&out);
    if (rc < 0 || (!hit && !miss)) {
        snprintf (err, errlen, "%s: cannot look into the board's cache: %s", kind,
                  rc < 0 ? how : "no answer");
        free (dst);
        return -1;
    }
    if (hit) {
        *remote = dst;
        return 0;
    }
    char *part = cgq_xasprintf ("%s.part", dst);
    s_argv_t a = {0};
    if (t->kind == CGQ_TRANSPORT_SSH) {
        s_add (&a, cgq_xstrdup ("scp"));
        s_add (&a, cgq_xstrdup ("-q"));
        s_ssh_opts (&a, t, id, workdir, true);
        s_add (&a, cgq_xstrdup (path));
        char *tg = s_target (t);
        s_add (&a, cgq_xasprintf ("%s:%s", tg, part));
        free (tg);
    } else {
        s_add (&a, cgq_xstrdup (kind));
        s_add (&a, cgq_xstrdup ("-s"));
        s_add (&a, cgq_xstrdup (t->serial));
        s_add (&a, cgq_xstrdup ("push"));
        s_add (&a, cgq_xstrdup (path));
        s_add (&a, cgq_xstrdup (part));
    }
    rc = s_run (a.v, S_PUSH_TIMEOUT_S, &out, how, sizeof how);
    cgq_invoke_fini (&out);
    cgq_transport_argv_free (a.v);
    free (part);
    if (rc < 0) {
        snprintf (err, errlen, "%s: cannot push the artifact: %s", kind, how);
        free (dst);
        return -1;
    }
    // In place, then the oldest (by mtime; a hit touches its entry) go
    // while the cache is past its bound; the new one stays.
    char *fin = cgq_xasprintf (
        "cd cache && mv %s.part %s && cgq_total=0 && for f in $(ls -t); do "
        "cgq_s=$(wc -c < \"$f\"); cgq_total=$((cgq_total + cgq_s)); "
        "if [ $cgq_total -gt %llu ] && [ \"$f\" != %s ]; then rm -f \"$f\"; fi; done",
        sha256, sha256, (unsigned long long) t->cache_max, sha256);
    cmd = cgq_transport_remote_command (t, NULL, NULL, 0, fin, false);
    free (fin);
    argv = cgq_transport_argv (t, id, workdir, cmd);
    free (cmd);
    rc = s_run (argv, t->connect_timeout_s + 60, &out, how, sizeof how);
    cgq_invoke_fini (&out);
    cgq_transport_argv_free (argv);
    if (rc < 0) {
        snprintf (err, errlen, "%s: cannot store the pushed artifact: %s", kind, how);
        free (dst);
        return -1;
    }
    *pushed = true;
    *remote = dst;
    return 0;
}

int
cgq_transport_board_ms (const char *output, size_t len, double *ms)
{
    const char *mark = CGQ_TRANSPORT_TIMER_MARK;
    size_t ml = strlen (mark);
    const char *found = NULL;
    for (size_t i = 0; i + ml <= len; i++)
        if ((i == 0 || output[i - 1] == '\n') && !memcmp (output + i, mark, ml))
            found = output + i + ml;
    if (!found)
        return -1;
    char *end;
    errno = 0;
    long long ns = strtoll (found, &end, 10);
    if (end == found || errno || ns < 0)
        return -1;
    *ms = (double) ns / 1e6;
    return 0;
}

// s_mark_line finds the last line of output[0..len) that starts with mark
// and returns its rest (up to the newline or len), or NULL.
static const char *
s_mark_line (const char *output, size_t len, const char *mark, size_t *restlen)
{
    size_t ml = strlen (mark);
    const char *found = NULL;
    for (size_t i = 0; i + ml <= len; i++)
        if ((i == 0 || output[i - 1] == '\n') && !memcmp (output + i, mark, ml))
            found = output + i + ml;
    if (found) {
        const char *nl = memchr (found, '\n', len - (size_t) (found - output));
        *restlen = nl ? (size_t) (nl - found) : len - (size_t) (found - output);
    }
    return found;
}

// s_stat_ticks reads cutime + cstime (fields 16 and 17) from one line of
// /proc/PID/stat: after the last ')' (the command name may hold anything).
static int
s_stat_ticks (const char *line, size_t len, unsigned long long *ticks)
{
    char buf[1024];
    if (len >= sizeof buf)
        return -1;
    memcpy (buf, line, len);
    buf[len] = 0;
    char *p = strrchr (buf, ')');
    if (!p)
        return -1;
    // state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
    // utime stime cutime cstime
    unsigned long long f[13];
    char state;
    if (sscanf (p + 1, " %c %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu",
                &state, &f[0], &f[1], &f[2], &f[3], &f[4], &f[5], &f[6], &f[7], &f[8], &f[9],
                &f[10], &f[11], ticks, &f[12])
        != 15)
        return -1;
    *ticks += f[12];
    return 0;
}

int
cgq_transport_board_cpu_s (const char *output, size_t len, double hz, double *s)
{
    size_t l0, l1;
    const char *a = s_mark_line (output, len, CGQ_TRANSPORT_STAT0_MARK, &l0);
    const char *b = s_mark_line (output, len, CGQ_TRANSPORT_STAT1_MARK, &l1);
    unsigned long long t0, t1;
    if (!a || !b || hz <= 0 || s_stat_ticks (a, l0, &t0) < 0 || s_stat_ticks (b, l1, &t1) < 0
        || t1 < t0)
        return -1;
    *s = (double) (t1 - t0) / hz;
    return 0;
}

// s_strip_lines removes the lines of text[0..*len) that start with one of
// marks[0..n) (NUL-terminated again).
static void
s_strip_lines (char *text, size_t *len, const char *const *marks, size_t n_marks)
{
    size_t o = 0;
    for (size_t i = 0; i < *len;) {
        const char *nl = memchr (text + i, '\n', *len - i);
        size_t n = nl ? (size_t) (nl - (text + i)) + 1 : *len - i;
        bool mark = false;
        for (size_t k = 0; k < n_marks && !mark; k++)
            mark = n >= strlen (marks[k]) && !memcmp (text + i, marks[k], strlen (marks[k]));
        if (!mark) {
            memmove (text + o, text + i, n);
            o += n;
        }
        i += n;
    }
    *len = o;
    text[o] = 0;
}

void
cgq_transport_strip_marks (char *text, size_t *len)
{
    static const char *const marks[] = {CGQ_TRANSPORT_STAT0_MARK, CGQ_TRANSPORT_STAT1_MARK};
    s_strip_lines (text, len, marks, 2);
}

void
cgq_transport_strip_timer (char *text, size_t *len)
{
    static const char *const marks[] = {CGQ_TRANSPORT_TIMER_MARK};
    s_strip_lines (text, len, marks, 1);
}

void
cgq_transport_close (const cgq_transport_t *t, const char *id, const char *workdir)
{
    if (t->kind != CGQ_TRANSPORT_SSH)
        return;
    s_argv_t a = {0};
    s_add (&a, cgq_xstrdup ("ssh"));
    s_ssh_opts (&a, t, id, workdir, false);
    s_add (&a, cgq_xstrdup ("-O"));
    s_add (&a, cgq_xstrdup ("exit"));
    s_add (&a, s_target (t));
    cgq_invoke_t out;
    char how[256];
    s_run (a.v, 10, &out, how, sizeof how); // no master running: nothing to close
    cgq_invoke_fini (&out);
    cgq_transport_argv_free (a.v);
}
