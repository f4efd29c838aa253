// interfere: did something else use the benchmark's CPUs while it was timed?
// Samples /proc/stat for the pinned CPUs and their cpufreq scaling_cur_freq
// (where the kernel has it) before and after the timed runs; the busy time
// not spent by the runs themselves (RUSAGE_CHILDREN of the measuring process)
// is the interference. A measurement over the threshold, or with the
// frequency changed, is flagged in its metrics (never silently kept).
#ifndef CGQ_INTERFERE_H
#define CGQ_INTERFERE_H

#include <jansson.h>
#include <sched.h>
#include <stdbool.h>

#define CGQ_INTERF_MAX_CPUS 64 // pinned CPUs whose frequency is followed

typedef struct {
    bool ok;            // /proc/stat was read
    double busy_s, total_s; // of the pinned CPUs, summed
    double child_s;     // user + system time of the reaped runs
    long khz[CGQ_INTERF_MAX_CPUS]; // scaling_cur_freq; 0: not there
    int ncpu;
} cgq_interf_sample_t;

// cgq_interf_sample reads the counters of the CPUs in cpus now.
void cgq_interf_sample (const cpu_set_t *cpus, cgq_interf_sample_t *out);

// cgq_interf_judge compares two samples: *busy is the share (0..1) of the
// pinned CPUs' time that others used; a busy share over max_busy, or a
// frequency that moved by more than 5 %, writes the reason to why and
// returns true.
bool cgq_interf_judge (const cgq_interf_sample_t *a, const cgq_interf_sample_t *b,
                       double max_busy, double *busy, char *why, size_t whylen);

#endif
