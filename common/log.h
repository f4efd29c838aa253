// log: the one logger of every cgq program. Lines go to stderr (right for
// containers and for the tests that read them), as text or as JSON lines.
#ifndef CGQ_LOG_H
#define CGQ_LOG_H

#include <stdbool.h>

typedef enum {
    CGQ_LOG_DEBUG = 0,
    CGQ_LOG_INFO = 1,
    CGQ_LOG_WARN = 2,
    CGQ_LOG_ERROR = 3,
} cgq_log_level_t;

extern int cgq_log_level;

// cgq_log_init names the program in every line and picks the level and the
// format. May be called again to change either.
void cgq_log_init (const char *prog, int level, bool json);

// cgq_log_level_parse maps "debug|info|warn|error" to a level; -1 if unknown.
int cgq_log_level_parse (const char *name);

// cgq_log_configure is cgq_log_init for a daemon's --log-level and
// --log-json options: an unknown level name prints one line naming it on
// stderr and returns -1 (the caller exits 2); otherwise 0.
int cgq_log_configure (const char *prog, const char *level_name, bool json);

void cgq_log_write (int level, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

// The level is checked before the arguments are formatted.
// cgq_log_if logs at a level chosen at run time.
#define cgq_log_if(level, ...) do { if (cgq_log_level <= (level)) cgq_log_write ((level), __VA_ARGS__); } while (0)
#define cgq_debug(...) do { if (cgq_log_level <= CGQ_LOG_DEBUG) cgq_log_write (CGQ_LOG_DEBUG, __VA_ARGS__); } while (0)
#define cgq_info(...)  do { if (cgq_log_level <= CGQ_LOG_INFO) cgq_log_write (CGQ_LOG_INFO, __VA_ARGS__); } while (0)
#define cgq_warn(...)  do { if (cgq_log_level <= CGQ_LOG_WARN) cgq_log_write (CGQ_LOG_WARN, __VA_ARGS__); } while (0)
#define cgq_error(...) do { if (cgq_log_level <= CGQ_LOG_ERROR) cgq_log_write (CGQ_LOG_ERROR, __VA_ARGS__); } while (0)

#endif
