// fuzz_runcfg: a device runner's config parser (device-runner/runcfg.c,
// runner.yaml): YAML, durations and sizes, CPU lists and the regular
// expressions that read a benchmark tool's report. The file is the runner
// operator's, but it is the only thing that decides which commands a runner
// ever executes, so a malformed one must be refused, never misread. The
// lookups and the CPU-list parser get the same text.
#include <stdlib.h>

#include "fuzz.h"
#include "runcfg.h"

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
    fuzz_quiet ();
    return 0;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    char err[1024];
    cgq_runcfg_t *cfg = cgq_runcfg_parse ((const char *) data, size, "runner.yaml", err,
                                          sizeof err);
    char *text = fuzz_str (data, size);
    cpu_set_t set;
    (void) cgq_runcfg_parse_cpus (text, &set);
    if (cfg) {
        for (size_t i = 0; i < cfg->ndevices; i++)
            if (cgq_runcfg_device (cfg, cfg->devices[i].id) != &cfg->devices[i])
                abort (); // two devices of one id: the second could never be found
        (void) cgq_runcfg_bench (cfg, text);
        free (cgq_runcfg_bench_names (cfg));
        cgq_runcfg_destroy (&cfg);
    }
    free (text);
    return 0;
}
