#include "log.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

int cgq_log_level = CGQ_LOG_INFO;
static const char *s_prog = "cgq";
static bool s_json = false;
static const char *s_names[] = {"debug", "info", "warn", "error"};

void
cgq_log_init (const char *prog, int level, bool json)
{
    if (prog)
        s_prog = prog;
    if (level >= CGQ_LOG_DEBUG && level <= CGQ_LOG_ERROR)
        cgq_log_level = level;
    s_json = json;
}

int
cgq_log_level_parse (const char *name)
{
    for (int i = 0; i < 4; i++)
        if (strcmp (name, s_names[i]) == 0)
            return i;
    if (strcmp (name, "warning") == 0)
        return CGQ_LOG_WARN;
    return -1;
}

int
cgq_log_configure (const char *prog, const char *level_name, const char *format, bool json)
{
    int level = cgq_log_level_parse (level_name ? level_name : "info");
    if (level < 0) {
        fprintf (stderr, "%s: --log-level: '%s' is not a level (debug, info, warn or error)\n",
                 prog, level_name);
        return -1;
    }
    if (format && strcmp (format, "json") == 0)
        json = true;
    else if (format && strcmp (format, "text") != 0) {
        fprintf (stderr, "%s: --log-format: '%s' is not a format (text or json)\n", prog, format);
        return -1;
    }
    cgq_log_init (prog, level, json);
    return 0;
}

// s_emit writes one line: text, or a JSON object with the task's ids when
// it has one (job > 0).
static void
s_emit (int level, uint64_t job, uint64_t trial, uint32_t attempt, const char *msg)
{
    struct timeval tv;
    gettimeofday (&tv, NULL);
    struct tm tm;
    gmtime_r (&tv.tv_sec, &tm);
    char ts[64];
    snprintf (ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
              tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
              (int) (tv.tv_usec / 1000));
    if (level < 0 || level > 3)
        level = CGQ_LOG_ERROR;
    if (s_json) {
        // A message that is not UTF-8 (a trial's output quoted in an
        // error) is still logged: its non-ASCII bytes become '?'.
        json_t *m = json_string (msg);
        if (!m) {
            char clean[2048];
            size_t i = 0;
            for (; msg[i] && i + 1 < sizeof clean; i++)
                clean[i] = (unsigned char) msg[i] < 0x80 ? msg[i] : '?';
            clean[i] = 0;
            m = json_string (clean);
        }
        json_t *o = json_pack ("{s:s, s:s, s:s, s:i, s:o}", "ts", ts, "level", s_names[level],
                               "program", s_prog, "pid", (int) getpid (), "msg", m);
        if (o && job) {
            json_object_set_new (o, "job", json_integer ((json_int_t) job));
            json_object_set_new (o, "trial", json_integer ((json_int_t) trial));
            if (attempt)
                json_object_set_new (o, "attempt", json_integer (attempt));
        }
        char *line = o ? json_dumps (o, JSON_COMPACT) : NULL;
        if (line) {
            fprintf (stderr, "%s\n", line);
            free (line);
        }
        json_decref (o);
    }
    else if (job && attempt)
        fprintf (stderr, "%s %s[%d] %s: job=%llu trial=%llu attempt=%u: %s\n", ts, s_prog,
                 (int) getpid (), s_names[level], (unsigned long long) job,
                 (unsigned long long) trial, attempt, msg);
    else if (job)
        fprintf (stderr, "%s %s[%d] %s: job=%llu trial=%llu: %s\n", ts, s_prog, (int) getpid (),
                 s_names[level], (unsigned long long) job, (unsigned long long) trial, msg);
    else
        fprintf (stderr, "%s %s[%d] %s: %s\n", ts, s_prog, (int) getpid (), s_names[level], msg);
}

void
cgq_log_write (int level, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (msg, sizeof msg, fmt, ap);
    va_end (ap);
    s_emit (level, 0, 0, 0, msg);
}

void
cgq_log_task_write (int level, uint64_t job, uint64_t trial, uint32_t attempt, const char *fmt,
                    ...)
{
    char msg[2048];
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (msg, sizeof msg, fmt, ap);
    va_end (ap);
    s_emit (level, job, trial, attempt, msg);
}
