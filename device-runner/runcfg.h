// runcfg: a device runner's own config (runner.yaml) — where the coordinator
// is, the devices this runner serves, the benchmarks it can run on them (the
// only commands it ever executes), and its artifact cache. See
// docs/devices.md for the reference. The built-in benchmark cpu-local is
// always there; a `cpu-local:` entry only changes its settings.
#ifndef CGQ_RUNCFG_H
#define CGQ_RUNCFG_H

#include <regex.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transport.h"

#define CGQ_RUNCFG_CPU_LOCAL "cpu-local"

// Key/value pairs in the order written (tags, env).
typedef struct {
    char **keys;
    char **vals;
    size_t n;
} cgq_kv_t;

typedef struct {
    char *id;
    cgq_kv_t tags;
    cgq_kv_t env;    // exported to every command run for this device
    char *setup;     // /bin/sh -c once at start; NULL: none
    char *check;     // before every measurement; failing fails the task
    char *reset;     // after a failed or timed-out measurement
    cgq_transport_t transport; // how the board is reached; zeroed: local
} cgq_runcfg_device_t;

typedef enum {
    CGQ_TIMING_PER_RUN, // the runner times each invocation (monotonic clock, wait4 RSS)
    CGQ_TIMING_PARSE,   // regexes read the tool's own report
    CGQ_TIMING_BUILTIN, // cpu-local: the engine is timed in-process
} cgq_timing_t;

typedef struct {
    char *name;
    cgq_timing_t timing;
    char *command;          // string form: /bin/sh -c, substituted values shell-quoted
    char **argv;            // list form: exec'd directly; argc entries
    size_t argc;
    cgq_kv_t env;           // templates; a key holding {item} is set once per assignment item
    char *time_re_text;     // parse: every match is one sample; group 1 the number
    regex_t time_re;
    double time_scale;      // to milliseconds
    char *memory_re_text;   // parse: the last match; NULL: none
    regex_t memory_re;
    double memory_scale;    // to KiB
    uint32_t warmup;        // untimed runs (the Assign's warmup, when > 0, wins)
    double warmup_min_s;    // and at least this long warming up
    uint32_t repeats;       // timed runs at least (the Assign's repeats, when > 0, wins)
    double min_time_s;      // and at least this long measuring
    double max_time_s;      // never longer than this (warm-up included); 0: none
    double precision;       // > 0: timed runs go on until the median's 95 % CI is
                            // within ±precision of it (or max_runs/max_time)
    uint32_t max_runs;      // with precision: timed runs at most (default 1000)
    double max_busy;        // with cpus: others' share of the pinned CPUs that flags
                            // the measurement (default 0.1)
    uint32_t interference_reruns; // timed phases run again after interference (default 2)
    double timeout_s;       // one run; 0: none
    double cooldown_s;      // pause after each measurement on the device
    bool pin;               // cpus set
    cpu_set_t cpus;         // sched_setaffinity of every run
    char *cpus_text;
    size_t max_samples;     // samples kept in the result
    // Defaults of a stage's measure: keys that only a measurement does
    // (measure_opts.c, sysfs.c): NULL / 0 none.
    char *governor;         // cpufreq governor of the CPUs for the runs
    uint64_t frequency_khz; // pinned through scaling_min/max_freq
    double cooldown_below_c;   // wait before the runs until the hottest zone is below
    double cooldown_max_wait_s; // that wait's bound (default 120)
} cgq_runcfg_bench_t;

typedef struct {
    char *path;
    char *coordinator;      // NULL: not set in the file
    char *id;
    char *cache_dir;        // default ./.cgq/artifacts
    uint64_t cache_max;     // bytes; default 1 GiB
    uint64_t max_artifact;  // bytes of one artifact; default cache_max
    double connect_timeout_s; // default 10
    double transfer_timeout_s; // whole download; default 600
    uint32_t retries;       // extra fetch attempts; default 2
    double cooldown_s;      // default of each benchmark's cooldown
    cgq_runcfg_device_t *devices;
    size_t ndevices;
    cgq_runcfg_bench_t *benches;
    size_t nbenches;
} cgq_runcfg_t;

// cgq_runcfg_load reads path. Returns the config (caller frees with
// cgq_runcfg_destroy) or NULL with "FILE:LINE:COL: what is wrong" in err.
cgq_runcfg_t *cgq_runcfg_load (const char *path, char *err, size_t errlen);

// cgq_runcfg_parse reads YAML text; path is used in messages only.
cgq_runcfg_t *cgq_runcfg_parse (const char *text, size_t len, const char *path, char *err,
                                size_t errlen);

// NULL-safe; sets *self_p = NULL.
void cgq_runcfg_destroy (cgq_runcfg_t **self_p);

// Lookups (borrowed; NULL when there is none of that name).
const cgq_runcfg_device_t *cgq_runcfg_device (const cgq_runcfg_t *self, const char *id);
const cgq_runcfg_bench_t *cgq_runcfg_bench (const cgq_runcfg_t *self, const char *name);

// cgq_runcfg_bench_names is the benchmark names, comma-separated (for errors).
// Caller frees.
char *cgq_runcfg_bench_names (const cgq_runcfg_t *self);

// cgq_runcfg_parse_cpus reads "0,2-3" into set. Returns 0, or -1 if malformed
// or a CPU is >= CPU_SETSIZE.
int cgq_runcfg_parse_cpus (const char *text, cpu_set_t *set);

#endif
