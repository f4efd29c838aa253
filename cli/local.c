// local: a redis-server on the data a `cgq run` left, for one read command.
#include "local.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store.h"
#include "util.h"

// Loading a large AOF takes a while; past this the command gives up.
#define S_LOAD_TIMEOUT_MS 60000
#define S_LOAD_NOTE_MS 2000 // then it says what it waits for

static pid_t s_pid = 0; // the redis-server started here, or 0

bool
cgq_local_answers (const char *url, int timeout_ms)
{
    char err[256];
    cgq_store_t *s = cgq_store_new (url, timeout_ms, err, sizeof err);
    if (!s)
        return false;
    bool ok = false;
    if (cgq_store_connect (s) == 0) {
        redisReply *r = cgq_store_command (s, "PING");
        ok = r && r->type == REDIS_REPLY_STATUS;
        if (r)
            freeReplyObject (r);
    }
    cgq_store_destroy (&s);
    return ok;
}

// s_last_line copies the last non-empty line of path into buf ("" if none).
static void
s_last_line (const char *path, char *buf, size_t n)
{
    buf[0] = 0;
    FILE *f = fopen (path, "r");
    if (!f)
        return;
    char line[512];
    while (fgets (line, sizeof line, f)) {
        line[strcspn (line, "\n")] = 0;
        if (*line)
            snprintf (buf, n, "%s", line);
    }
    fclose (f);
}

pid_t
cgq_local_spawn (char **argv, int in, int out, int err, bool tie)
{
    pid_t parent = getpid ();
    fflush (stdout);
    fflush (stderr);
    pid_t pid = fork ();
    if (pid < 0)
        return -1;
    if (pid > 0) {
        setpgid (pid, pid); // also here: whichever runs first wins the race
        return pid;
    }
    // Its own process group: a Ctrl-C on the terminal reaches the command,
    // which stops it in turn; tied, the kernel stops it if the command dies first.
    setpgid (0, 0);
    if (tie) {
        prctl (PR_SET_PDEATHSIG, SIGTERM);
        if (getppid () != parent)
            _exit (1);
    }
    sigset_t none;
    sigemptyset (&none);
    sigprocmask (SIG_SETMASK, &none, NULL);
    dup2 (in, STDIN_FILENO);
    dup2 (out, STDOUT_FILENO);
    dup2 (err, STDERR_FILENO);
    execv (argv[0], argv);
    dprintf (STDERR_FILENO, "cgq: cannot run %s: %s\n", argv[0], strerror (errno));
    _exit (127);
}

// s_start runs redis-server on root's data with run's own redis.conf (the
// socket and the directory given again, in case the folder was moved) and
// waits until it answers. 0, or -1 with err set.
static int
s_start (const char *root, const char *sock, const char *url, char *err, size_t errlen)
{
    char *bin = cgq_which ("redis-server");
    if (!bin) {
        snprintf (err, errlen,
                  "the state of a cgq run is in ./%s, and reading it needs redis-server, which is "
                  "not on PATH (install the redis-server package)",
                  CGQ_LOCAL_DIR);
        return -1;
    }
    char *conf = cgq_xasprintf ("%s/redis/redis.conf", root);
    char *dir = cgq_xasprintf ("%s/redis", root);
    char *logs = cgq_xasprintf ("%s/logs", root);
    char *log = cgq_xasprintf ("%s/logs/redis-read.log", root);
    cgq_mkdir_p (logs);
    char *argv[] = {bin, conf, "--unixsocket", (char *) sock, "--dir", dir, "--port", "0", NULL};
    int rc = -1;
    int in = open ("/dev/null", O_RDONLY | O_CLOEXEC);
    int out = open (log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    pid_t pid = in >= 0 && out >= 0 ? cgq_local_spawn (argv, in, out, out, true) : -1;
    int e = errno;
    if (pid < 0)
        snprintf (err, errlen, "cannot start redis-server on ./%s/redis: %s: %s", CGQ_LOCAL_DIR,
                  in < 0 || out < 0 ? log : "fork", strerror (e));
    if (in >= 0)
        close (in);
    if (out >= 0)
        close (out);
    if (pid < 0)
        goto done;
    s_pid = pid;
    int64_t t0 = cgq_now_ms ();
    bool noted = false;
    for (;;) {
        if (cgq_local_answers (url, 500)) {
            rc = 0;
            break;
        }
        int status;
        if (waitpid (pid, &status, WNOHANG) == pid) {
            s_pid = 0;
            char last[512];
            s_last_line (log, last, sizeof last);
            snprintf (err, errlen,
                      "redis-server could not open the state of a cgq run in ./%s/redis (%s: %s)",
                      CGQ_LOCAL_DIR, log, *last ? last : "no output");
            break;
        }
        int64_t waited = cgq_now_ms () - t0;
        if (waited >= S_LOAD_TIMEOUT_MS) {
            snprintf (err, errlen, "redis-server did not load ./%s/redis within %d s (see %s)",
                      CGQ_LOCAL_DIR, S_LOAD_TIMEOUT_MS / 1000, log);
            cgq_local_close ();
            break;
        }
        if (waited >= S_LOAD_NOTE_MS && !noted) {
            fprintf (stderr, "cgq: loading the state of a cgq run from ./%s/redis ...\n",
                     CGQ_LOCAL_DIR);
            noted = true;
        }
        usleep (20 * 1000);
    }
done:
    free (bin);
    free (conf);
    free (dir);
    free (logs);
    free (log);
    return rc;
}

char *
cgq_local_root (char *err, size_t errlen)
{
    char cwd[4096];
    if (!getcwd (cwd, sizeof cwd)) {
        snprintf (err, errlen, "cannot read the working directory: %s", strerror (errno));
        return NULL;
    }
    return cgq_xasprintf ("%s/%s", strcmp (cwd, "/") ? cwd : "", CGQ_LOCAL_DIR);
}

char *
cgq_local_open (bool *started, char *err, size_t errlen)
{
    err[0] = 0;
    *started = false;
    struct stat st;
    if (stat (CGQ_LOCAL_DIR "/redis/redis.conf", &st) != 0)
        return NULL; // no cgq run here
    char *root = cgq_local_root (err, errlen);
    if (!root)
        return NULL;
    char *sock = cgq_xasprintf ("%s/redis.sock", root);
    char *url = cgq_xasprintf ("unix://%s", sock);
    // One reader starts the server; one that comes meanwhile finds it answering.
    char *lock_path = cgq_xasprintf ("%s/redis/read.lock", root);
    int lock = open (lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lock >= 0)
        flock (lock, LOCK_EX);
    if (!cgq_local_answers (url, 500)) {
        if (s_start (root, sock, url, err, errlen) == 0) {
            *started = true;
            static bool registered = false;
            if (!registered)
                atexit (cgq_local_close);
            registered = true;
        }
        else {
            free (url);
            url = NULL;
        }
    }
    if (lock >= 0)
        close (lock); // also releases the lock
    free (lock_path);
    free (root);
    free (sock);
    return url;
}

void
cgq_local_close (void)
{
    if (s_pid <= 0)
        return;
    kill (s_pid, SIGTERM);
    while (waitpid (s_pid, NULL, 0) < 0 && errno == EINTR)
        ;
    s_pid = 0;
}
