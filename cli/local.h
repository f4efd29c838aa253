// local: the state a `cgq run` left in ./.cgq, for the commands that read it
// afterwards from the same directory. `cgq run` keeps its Redis data in
// ./.cgq/redis (AOF on, its redis.conf beside it) and stops the server when
// the job ends; a read command (status, results, pareto, plot, logs ...) run
// there later starts redis-server on that data for its own duration, so
// nothing has to be decided in advance with --keep.
#ifndef CGQ_LOCAL_H
#define CGQ_LOCAL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

// The state's place, relative to the working directory.
#define CGQ_LOCAL_DIR ".cgq"

// cgq_local_root is the absolute path of ./.cgq (caller frees), where cgq
// run keeps its state and the read commands find it; NULL with err set when
// the working directory cannot be read.
char *cgq_local_root (char *err, size_t errlen);

// cgq_local_open returns the unix:// URL of the Redis holding the state a
// `cgq run` left here: the running one when .cgq/redis.sock answers (a run
// in progress, or --keep), else a redis-server it starts on .cgq/redis for
// the life of this process (stopped at exit, and by the kernel should this
// process die first). *started says which. Returns NULL with err empty when
// there is no such state here, or with err set when it cannot be read.
// Caller frees the URL.
char *cgq_local_open (bool *started, char *err, size_t errlen);

// cgq_local_answers tries one PING at url within timeout_ms; true when
// Redis answers it (not while it loads its data).
bool cgq_local_answers (const char *url, int timeout_ms);

// cgq_local_spawn starts argv[0] (a path) with in, out and err as its
// stdin, stdout and stderr, in a process group of its own, so that a Ctrl-C
// on the terminal reaches only cgq, which stops what it started in order.
// tie: the kernel sends it SIGTERM should cgq die first. Returns its pid, or
// -1 with errno set (fork failed).
pid_t cgq_local_spawn (char **argv, int in, int out, int err, bool tie);

// cgq_local_close stops the redis-server cgq_local_open started, if any, and
// waits for it (it writes nothing: the state is only read). Also run at exit.
void cgq_local_close (void);

#endif
