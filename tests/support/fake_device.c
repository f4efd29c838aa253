// cgq-fake-device: a stand-in for a benchmark tool on a board, for the device
// runner's tests and bench/. Each run sleeps a time drawn from a known
// distribution — uniform on [ms - jitter, ms + jitter], so its mean and
// median are both ms — and can also allocate and touch memory, print a
// report the way a real tool does (for parse: regexes), fail, or hang.
//
//   cgq-fake-device --ms 20 --jitter 4          sleep 16..24 ms
//   cgq-fake-device --ms 5 --alloc-mb 64        and touch 64 MiB first
//   cgq-fake-device --report                    print "latency: X ms" and "max_rss: K KiB"
//   cgq-fake-device --hang                      never end (a hung board)
//   cgq-fake-device --fail 3                    exit with status 3
//   cgq-fake-device --log FILE                  append "START END PID" (wall clock, s)
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static double
s_wall (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_REALTIME, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static void
s_sleep_ms (double ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = {(time_t) (ms / 1000), (long) ((ms - 1000.0 * (double) (time_t) (ms / 1000)) * 1e6)};
    while (nanosleep (&ts, &ts) < 0 && errno == EINTR)
        ;
}

// splitmix64: a small seeded generator, the same numbers on every machine.
static uint64_t
s_next (uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int
main (int argc, char **argv)
{
    static const struct option longs[] = {
        {"ms", required_argument, NULL, 'm'},      {"jitter", required_argument, NULL, 'j'},
        {"seed", required_argument, NULL, 's'},    {"alloc-mb", required_argument, NULL, 'a'},
        {"report", no_argument, NULL, 'r'},        {"hang", no_argument, NULL, 'H'},
        {"fail", required_argument, NULL, 'f'},    {"log", required_argument, NULL, 'l'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0},
    };
    double ms = 10, jitter = 0;
    long alloc_mb = 0;
    int fail = 0;
    bool report = false, hang = false, seeded = false;
    uint64_t seed = 0;
    const char *log = NULL;
    int c;
    while ((c = getopt_long (argc, argv, "", longs, NULL)) != -1) {
        switch (c) {
        case 'm': ms = atof (optarg); break;
        case 'j': jitter = atof (optarg); break;
        case 's': seed = strtoull (optarg, NULL, 10); seeded = true; break;
        case 'a': alloc_mb = atol (optarg); break;
        case 'r': report = true; break;
        case 'H': hang = true; break;
        case 'f': fail = atoi (optarg); break;
        case 'l': log = optarg; break;
        case 'h':
            printf ("usage: cgq-fake-device [--ms MS] [--jitter MS] [--seed N] [--alloc-mb MB] "
                    "[--report] [--hang] [--fail CODE] [--log FILE]\n");
            return 0;
        default: return 2;
        }
    }
    if (ms < 0 || jitter < 0 || jitter > ms || alloc_mb < 0) {
        fprintf (stderr, "cgq-fake-device: need 0 <= jitter <= ms and alloc-mb >= 0\n");
        return 2;
    }
    double start = s_wall ();
    if (!seeded) {
        struct timespec ts;
        clock_gettime (CLOCK_MONOTONIC, &ts);
        seed = (uint64_t) ts.tv_nsec ^ ((uint64_t) getpid () << 32);
    }
    // Uniform on [ms - jitter, ms + jitter]: 53 random bits as a fraction.
    double u = (double) (s_next (&seed) >> 11) / 9007199254740992.0;
    double sleep_ms = ms - jitter + 2 * jitter * u;
    char *mem = NULL;
    if (alloc_mb > 0) {
        size_t n = (size_t) alloc_mb << 20;
        mem = malloc (n);
        if (!mem) {
            fprintf (stderr, "cgq-fake-device: cannot allocate %ld MiB\n", alloc_mb);
            return 1;
        }
        for (size_t i = 0; i < n; i += 4096)
            mem[i] = (char) i; // touch every page: it counts in the peak RSS
    }
    if (hang)
        for (;;)
            pause ();
    s_sleep_ms (sleep_ms);
    free (mem);
    double end = s_wall ();
    if (log) {
        int fd = open (log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd >= 0) {
            char line[128];
            int n = snprintf (line, sizeof line, "%.6f %.6f %d\n", start, end, (int) getpid ());
            (void) !write (fd, line, (size_t) n);
            close (fd);
        }
    }
    if (report) {
        struct rusage ru;
        getrusage (RUSAGE_SELF, &ru);
        printf ("cgq-fake-device: slept\nlatency: %.4f ms\nmax_rss: %ld KiB\n", sleep_ms,
                ru.ru_maxrss);
    }
    if (fail) {
        fprintf (stderr, "cgq-fake-device: failing with status %d as asked\n", fail);
        return fail;
    }
    return 0;
}
