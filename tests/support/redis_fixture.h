// redis_fixture: a real redis-server for tests, on a free loopback port, with
// its own redis.conf and log in a fresh temp dir (no persistence), stopped by
// PID. Link the test with the cgq_test_support library (common/CMakeLists.txt).
//
//   cgq_test_redis_t *r = cgq_test_redis_start (NULL);   // or "requirepass s3cret\n"
//   assert_non_null (r);
//   cgq_store_t *st = cgq_store_new (cgq_test_redis_url (r), 1000, err, sizeof err);
//   ...
//   cgq_test_redis_down (r);      // Redis is now unreachable (same port, same dir)
//   cgq_test_redis_restart (r);   // and back, empty
//   cgq_test_redis_stop (&r);     // kill, wait, remove the dir
//
// The server gets SIGTERM if the test process dies (PR_SET_PDEATHSIG), so a
// test killed by a timeout leaves no redis-server behind. REDIS_SERVER in the
// environment names another binary (default: redis-server from PATH).
#ifndef CGQ_TEST_REDIS_FIXTURE_H
#define CGQ_TEST_REDIS_FIXTURE_H

#include <stdbool.h>
#include <sys/types.h>

typedef struct cgq_test_redis_t cgq_test_redis_t;

// cgq_test_redis_start starts redis-server and waits (up to 5 s) until it
// answers PING. extra_conf_lines (may be NULL) is appended to redis.conf as
// is, e.g. "requirepass s3cret\n". Returns NULL after printing to stderr why
// (with the tail of the server's log) when it could not start.
cgq_test_redis_t *cgq_test_redis_start (const char *extra_conf_lines);

// cgq_test_redis_stop stops the server (SIGTERM, SIGKILL after 3 s), reaps
// it, removes the temp dir and frees self. Accepts NULL; sets *self_p = NULL.
void cgq_test_redis_stop (cgq_test_redis_t **self_p);

// cgq_test_redis_down stops the server but keeps the port, the dir and the
// object, so a test can see Redis unreachable. Returns 0, or -1 if it was down.
int cgq_test_redis_down (cgq_test_redis_t *self);

// cgq_test_redis_restart stops the server if it runs, then starts it again on
// the same port and dir with the same config (the data is gone: no
// persistence). Returns 0, or -1 after printing why.
int cgq_test_redis_restart (cgq_test_redis_t *self);

// Accessors; strings are borrowed and live until cgq_test_redis_stop.
const char *cgq_test_redis_url (const cgq_test_redis_t *self);     // redis://127.0.0.1:PORT/0
int cgq_test_redis_port (const cgq_test_redis_t *self);
pid_t cgq_test_redis_pid (const cgq_test_redis_t *self);           // 0 while down
const char *cgq_test_redis_dir (const cgq_test_redis_t *self);     // the temp dir
// The server also listens on a unix socket in its dir; NULL when the dir path
// is too long for one. unix_url is unix:///DIR/redis.sock.
const char *cgq_test_redis_socket (const cgq_test_redis_t *self);
const char *cgq_test_redis_unix_url (const cgq_test_redis_t *self);
bool cgq_test_redis_running (const cgq_test_redis_t *self);

// cgq_test_free_port returns a loopback TCP port that was free a moment ago
// (bind to port 0, read it, close), or -1.
int cgq_test_free_port (void);

#endif
