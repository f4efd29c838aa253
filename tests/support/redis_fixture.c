#include "redis_fixture.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct cgq_test_redis_t {
    char dir[256];
    char conf[300];
    char log[300];
    char sock[300]; // empty: no unix socket
    char url[64];
    char unix_url[320];
    int port;
    pid_t pid;
};

static long long
s_now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (long long) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
s_sleep_ms (int ms)
{
    struct timespec ts = {ms / 1000, (long) (ms % 1000) * 1000000L};
    nanosleep (&ts, NULL);
}

int
cgq_test_free_port (void)
{
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a;
    memset (&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    int port = -1;
    if (bind (fd, (struct sockaddr *) &a, sizeof a) == 0
        && getsockname (fd, (struct sockaddr *) &a, &len) == 0)
        port = ntohs (a.sin_port);
    close (fd);
    return port;
}

// s_ping sends PING on a fresh connection; any reply (+PONG, or -NOAUTH when
// requirepass is set) means the server is up.
static bool
s_ping (int port)
{
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return false;
    struct sockaddr_in a;
    memset (&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    a.sin_port = htons ((uint16_t) port);
    bool ok = false;
    if (connect (fd, (struct sockaddr *) &a, sizeof a) == 0
        && send (fd, "PING\r\n", 6, MSG_NOSIGNAL) == 6) {
        struct pollfd p = {fd, POLLIN, 0};
        char buf[64];
        if (poll (&p, 1, 500) == 1 && recv (fd, buf, sizeof buf, 0) > 0)
            ok = buf[0] == '+' || buf[0] == '-';
    }
    close (fd);
    return ok;
}

static void
s_print_log_tail (const cgq_test_redis_t *self)
{
    FILE *f = fopen (self->log, "r");
    if (!f)
        return;
    char buf[2048];
    fseek (f, 0, SEEK_END);
    long size = ftell (f);
    fseek (f, size > (long) sizeof buf - 1 ? size - (long) sizeof buf + 1 : 0, SEEK_SET);
    size_t n = fread (buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose (f);
    fprintf (stderr, "redis_fixture: tail of %s:\n%s\n", self->log, buf);
}

static int
s_write_conf (cgq_test_redis_t *self, const char *extra)
{
    FILE *f = fopen (self->conf, "w");
    if (!f) {
        fprintf (stderr, "redis_fixture: cannot write %s: %s\n", self->conf, strerror (errno));
        return -1;
    }
    fprintf (f,
             "bind 127.0.0.1\nport %d\ndir %s\nsave \"\"\nappendonly no\ndaemonize no\n"
             "protected-mode no\nlogfile \"\"\ndatabases 16\n",
             self->port, self->dir);
    if (self->sock[0])
        fprintf (f, "unixsocket %s\nunixsocketperm 700\n", self->sock);
    if (extra)
        fprintf (f, "%s\n", extra);
    fclose (f);
    return 0;
}

// s_spawn starts redis-server with the config and waits for PING.
static int
s_spawn (cgq_test_redis_t *self)
{
    const char *bin = getenv ("REDIS_SERVER");
    if (!bin || !*bin)
        bin = "redis-server";
    pid_t parent = getpid ();
    pid_t pid = fork ();
    if (pid < 0) {
        fprintf (stderr, "redis_fixture: fork: %s\n", strerror (errno));
        return -1;
    }
    if (pid == 0) {
        prctl (PR_SET_PDEATHSIG, SIGTERM);
        if (getppid () != parent)
            _exit (127);
        int fd = open (self->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2 (fd, 1);
            dup2 (fd, 2);
            close (fd);
        }
        int null = open ("/dev/null", O_RDONLY);
        if (null >= 0) {
            dup2 (null, 0);
            close (null);
        }
        execlp (bin, bin, self->conf, (char *) NULL);
        fprintf (stderr, "redis_fixture: cannot run %s: %s\n", bin, strerror (errno));
        _exit (127);
    }
    self->pid = pid;
    long long deadline = s_now_ms () + 5000;
    while (s_now_ms () < deadline) {
        int status;
        if (waitpid (pid, &status, WNOHANG) == pid) {
            self->pid = 0;
            fprintf (stderr, "redis_fixture: redis-server on port %d exited at start (status %d)\n",
                     self->port, status);
            s_print_log_tail (self);
            return -1;
        }
        if (s_ping (self->port))
            return 0;
        s_sleep_ms (20);
    }
    fprintf (stderr, "redis_fixture: redis-server on port %d did not answer PING within 5 s\n",
             self->port);
    s_print_log_tail (self);
    cgq_test_redis_down (self);
    return -1;
}

cgq_test_redis_t *
cgq_test_redis_start (const char *extra_conf_lines)
{
    cgq_test_redis_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    const char *tmp = getenv ("TMPDIR");
    if (!tmp || !*tmp || strlen (tmp) > 80)
        tmp = "/tmp";
    snprintf (self->dir, sizeof self->dir, "%s/cgq-redis-XXXXXX", tmp);
    if (!mkdtemp (self->dir)) {
        fprintf (stderr, "redis_fixture: mkdtemp %s: %s\n", self->dir, strerror (errno));
        free (self);
        return NULL;
    }
    snprintf (self->conf, sizeof self->conf, "%s/redis.conf", self->dir);
    snprintf (self->log, sizeof self->log, "%s/redis.log", self->dir);
    if (strlen (self->dir) + strlen ("/redis.sock") < sizeof ((struct sockaddr_un *) 0)->sun_path) {
        snprintf (self->sock, sizeof self->sock, "%s/redis.sock", self->dir);
        snprintf (self->unix_url, sizeof self->unix_url, "unix://%s", self->sock);
    }
    // Another process may take the port between our probe and redis' bind:
    // try a few fresh ports before giving up.
    for (int attempt = 0; attempt < 3; attempt++) {
        self->port = cgq_test_free_port ();
        if (self->port < 0) {
            fprintf (stderr, "redis_fixture: no free loopback port: %s\n", strerror (errno));
            break;
        }
        snprintf (self->url, sizeof self->url, "redis://127.0.0.1:%d/0", self->port);
        if (s_write_conf (self, extra_conf_lines) < 0)
            break;
        if (s_spawn (self) == 0)
            return self;
    }
    cgq_test_redis_stop (&self);
    return NULL;
}

int
cgq_test_redis_down (cgq_test_redis_t *self)
{
    if (!self || self->pid <= 0)
        return -1;
    kill (self->pid, SIGTERM);
    long long deadline = s_now_ms () + 3000;
    int status;
    while (waitpid (self->pid, &status, WNOHANG) == 0) {
        if (s_now_ms () > deadline) {
            kill (self->pid, SIGKILL);
            waitpid (self->pid, &status, 0);
            break;
        }
        s_sleep_ms (10);
    }
    self->pid = 0;
    return 0;
}

int
cgq_test_redis_restart (cgq_test_redis_t *self)
{
    if (!self)
        return -1;
    cgq_test_redis_down (self);
    // The port is ours by now; a quick retry covers a slow socket release.
    for (int attempt = 0; attempt < 3; attempt++) {
        if (s_spawn (self) == 0)
            return 0;
        s_sleep_ms (200);
    }
    return -1;
}

void
cgq_test_redis_stop (cgq_test_redis_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cgq_test_redis_t *self = *self_p;
    cgq_test_redis_down (self);
    DIR *d = opendir (self->dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir (d))) {
            if (!strcmp (e->d_name, ".") || !strcmp (e->d_name, ".."))
                continue;
            char p[600];
            snprintf (p, sizeof p, "%s/%s", self->dir, e->d_name);
            unlink (p);
        }
        closedir (d);
        rmdir (self->dir);
    }
    free (self);
    *self_p = NULL;
}

const char *
cgq_test_redis_url (const cgq_test_redis_t *self)
{
    return self->url;
}

int
cgq_test_redis_port (const cgq_test_redis_t *self)
{
    return self->port;
}

pid_t
cgq_test_redis_pid (const cgq_test_redis_t *self)
{
    return self->pid;
}

const char *
cgq_test_redis_dir (const cgq_test_redis_t *self)
{
    return self->dir;
}

const char *
cgq_test_redis_socket (const cgq_test_redis_t *self)
{
    return self->sock[0] ? self->sock : NULL;
}

const char *
cgq_test_redis_unix_url (const cgq_test_redis_t *self)
{
    return self->unix_url[0] ? self->unix_url : NULL;
}

bool
cgq_test_redis_running (const cgq_test_redis_t *self)
{
    return self && self->pid > 0;
}
