// measure_opts: a device stage's measure: block as the runner receives it
// (Assign.measure_json, `measure --measure JSON`): the keys that override
// the runner.yaml benchmark's defaults for one measurement, and those that
// only this measurement does (governor/frequency pinning, the thermal
// cooldown). Written by common/spec_measure.c; see docs/devices.md.
#ifndef CGQ_MEASURE_OPTS_H
#define CGQ_MEASURE_OPTS_H

#include <stddef.h>
#include <stdint.h>

#include "runcfg.h"

typedef struct {
    uint32_t warmup, repeats; // 0: not given
    char governor[40];        // "": unchanged
    uint64_t khz;             // 0: unchanged
    double below_c;           // > 0: wait until the hottest thermal zone is below
    double max_wait_s;        // bound of that wait
    uint32_t passes;          // carried; the coordinator runs the passes
} cgq_measure_opts_t;

// cgq_measure_opts_parse reads json (NULL or "": nothing) into *o (first
// set from the benchmark's runner.yaml governor, frequency and cooldown_*
// keys) and overrides precision, max_runs, max_time and
// interference_reruns in *b, a copy of the benchmark. Returns 0, or -1 with
// err naming the key and value this runner cannot honour.
int cgq_measure_opts_parse (const char *json, cgq_runcfg_bench_t *b, cgq_measure_opts_t *o,
                            char *err, size_t errlen);

#endif
