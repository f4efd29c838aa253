// log: the one logger of every cgq program. Lines go to stderr (right for
// containers and for the tests that read them), as text or as JSON lines.
#ifndef CGQ_LOG_H
#define CGQ_LOG_H

#include <stdbool.h>
#include <stdint.h>

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

// cgq_log_configure is cgq_log_init for a daemon's --log-level,
// --log-format (text or json; NULL: text) and --log-json (the older spelling
// of --log-format json) options: an unknown level or format prints one line
// naming it on stderr and returns -1 (the caller exits 2); otherwise 0.
int cgq_log_configure (const char *prog, const char *level_name, const char *format, bool json);

// One line: "TS PROG[PID] LEVEL: MSG", or a JSON object with ts, level,
// program, pid and msg.
void cgq_log_write (int level, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
// A line about one trial's attempt: the text says "job=J trial=T attempt=A: "
// before the message, JSON has job, trial and attempt fields (attempt 0: not
// known, left out). Every trial-related line goes through here (cgq_tinfo...).
void cgq_log_task_write (int level, uint64_t job, uint64_t trial, uint32_t attempt,
                         const char *fmt, ...) __attribute__ ((format (printf, 5, 6)));

// The level is checked before the arguments are formatted.
// cgq_log_if logs at a level chosen at run time.
#define cgq_log_if(level, ...) do { if (cgq_log_level <= (level)) cgq_log_write ((level), __VA_ARGS__); } while (0)
#define cgq_debug(...) do { if (cgq_log_level <= CGQ_LOG_DEBUG) cgq_log_write (CGQ_LOG_DEBUG, __VA_ARGS__); } while (0)
#define cgq_info(...)  do { if (cgq_log_level <= CGQ_LOG_INFO) cgq_log_write (CGQ_LOG_INFO, __VA_ARGS__); } while (0)
#define cgq_warn(...)  do { if (cgq_log_level <= CGQ_LOG_WARN) cgq_log_write (CGQ_LOG_WARN, __VA_ARGS__); } while (0)
#define cgq_error(...) do { if (cgq_log_level <= CGQ_LOG_ERROR) cgq_log_write (CGQ_LOG_ERROR, __VA_ARGS__); } while (0)

// cgq_tlog (level, job, trial, attempt, fmt, ...) and one per level.
#define cgq_tlog(level, ...) do { if (cgq_log_level <= (level)) cgq_log_task_write ((level), __VA_ARGS__); } while (0)
#define cgq_tdebug(...) cgq_tlog (CGQ_LOG_DEBUG, __VA_ARGS__)
#define cgq_tinfo(...) cgq_tlog (CGQ_LOG_INFO, __VA_ARGS__)
#define cgq_twarn(...) cgq_tlog (CGQ_LOG_WARN, __VA_ARGS__)
#define cgq_terror(...) cgq_tlog (CGQ_LOG_ERROR, __VA_ARGS__)

#endif
