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
    double steal_s;     // of the pinned CPUs: time a hypervisor gave others
    bool has_steal;     // /proc/stat had the steal column (Linux >= 2.6.11)
    long khz[CGQ_INTERF_MAX_CPUS]; // scaling_cur_freq; 0: not there
    int ncpu;
    double temp_c_max;  // the hottest thermal zone; NAN: none
} cgq_interf_sample_t;

// cgq_interf_sample reads the counters of the CPUs in cpus now; the runs'
// own time is the reaped children's (command benchmarks).
void cgq_interf_sample (const cpu_set_t *cpus, cgq_interf_sample_t *out);

// cgq_interf_sample_self is cgq_interf_sample for a benchmark timed inside
// this process (cpu-local): its own time is RUSAGE_SELF's.
void cgq_interf_sample_self (const cpu_set_t *cpus, cgq_interf_sample_t *out);

// The one shell command that samples a board over its transport: its
// /proc/stat, then a "cgq-freq CPU KHZ" line per cpufreq CPU and a
// "cgq-temp MILLIDEGREES" line per thermal zone (under $CGQ_SYSFS_ROOT on
// the board when the device's env sets it, else /sys).
#define CGQ_INTERF_REMOTE_COMMAND                                                                  \
    "cat /proc/stat; R=${CGQ_SYSFS_ROOT:-/sys}; "                                                  \
    "for f in \"$R\"/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_cur_freq; do [ -r \"$f\" ] && "  \
    "c=${f#\"$R\"/devices/system/cpu/cpu} && echo \"cgq-freq ${c%%/*} $(cat \"$f\")\"; done; "       \
    "for f in \"$R\"/class/thermal/thermal_zone*/temp; do [ -r \"$f\" ] && "                       \
    "echo \"cgq-temp $(cat \"$f\")\"; done; true"

// cgq_interf_parse_remote reads that command's output into *out: the CPUs in
// cpus (NULL: every CPU), their frequencies, the hottest zone. own_s is the
// CPU time the benchmark itself is taken to have used (a board's runs are
// not reaped here). Returns 0, or -1 when no /proc/stat line was in it.
int cgq_interf_parse_remote (const char *text, const cpu_set_t *cpus, double own_s,
                             cgq_interf_sample_t *out);

// /proc/stat counts in clock ticks (10 ms): a busy share over fewer than
// this many CPU-seconds of the pinned CPUs is too coarse to judge (a tick
// either way is several per cent), so it is reported but not flagged.
#define CGQ_INTERF_MIN_WINDOW_S 0.3

// cgq_interf_judge compares two samples: *busy is the share (0..1) of the
// pinned CPUs' time that others used (steal time, a hypervisor's other
// guests, among them); a busy share over max_busy (in a window of at least
// CGQ_INTERF_MIN_WINDOW_S), or a frequency that moved by more than 5 %,
// writes the reason to why and returns true.
bool cgq_interf_judge (const cgq_interf_sample_t *a, const cgq_interf_sample_t *b,
                       double max_busy, double *busy, char *why, size_t whylen);

// cgq_interf_steal is the share (0..1) of the pinned CPUs' time between a
// and b that the hypervisor gave to others (/proc/stat's steal column), or
// -1 when either sample has no steal column.
double cgq_interf_steal (const cgq_interf_sample_t *a, const cgq_interf_sample_t *b);

#endif
