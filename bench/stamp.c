// cgq-bench-stamp [SECONDS]: the trial of bench/dispatch.py. Its first act
// is to read CLOCK_REALTIME, so that the time it reports is when the trial
// process started running its own code (built static: no dynamic loader runs
// before main; a compiled program, because Python's or a shell's start-up
// would add milliseconds). Then it sleeps SECONDS (default 0) and writes
// {"t_us": MICROSECONDS, "score": 0} to fd 3 when CGQ_REPORT_FD is set (a
// cgq trial's report pipe), else to stdout (the Python subprocess peer).
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int
main (int argc, char **argv)
{
    struct timespec ts;
    clock_gettime (CLOCK_REALTIME, &ts);
    long long us = (long long) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
    double secs = argc > 1 ? atof (argv[1]) : 0;
    if (secs > 0) {
        struct timespec d = {(time_t) secs, (long) ((secs - (double) (time_t) secs) * 1e9)};
        while (nanosleep (&d, &d) != 0)
            ;
    }
    char line[64];
    int n = snprintf (line, sizeof line, "{\"t_us\": %lld, \"score\": 0}\n", us);
    int fd = getenv ("CGQ_REPORT_FD") ? 3 : 1;
    return write (fd, line, (size_t) n) == n ? 0 : 1;
}
