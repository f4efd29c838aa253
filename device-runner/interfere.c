#include "interfere.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static long
s_khz (int cpu)
{
    char path[96];
    snprintf (path, sizeof path, "/sys/devices/system/cpu/cpu%d/cpufreq/scaling_cur_freq", cpu);
    FILE *f = fopen (path, "r");
    long v = 0;
    if (f) {
        if (fscanf (f, "%ld", &v) != 1)
            v = 0;
        fclose (f);
    }
    return v;
}

void
cgq_interf_sample (const cpu_set_t *cpus, cgq_interf_sample_t *out)
{
    memset (out, 0, sizeof *out);
    struct rusage ru;
    if (getrusage (RUSAGE_CHILDREN, &ru) == 0)
        out->child_s = (double) ru.ru_utime.tv_sec + (double) ru.ru_utime.tv_usec / 1e6 +
                       (double) ru.ru_stime.tv_sec + (double) ru.ru_stime.tv_usec / 1e6;
    double hz = (double) sysconf (_SC_CLK_TCK);
    if (hz <= 0)
        hz = 100;
    FILE *f = fopen ("/proc/stat", "r");
    if (!f)
        return;
    char line[512];
    while (fgets (line, sizeof line, f)) {
        int cpu;
        unsigned long long u, ni, sy, id, io, irq, sirq, st;
        if (strncmp (line, "cpu", 3) != 0 || line[3] < '0' || line[3] > '9')
            continue;
        if (sscanf (line, "cpu%d %llu %llu %llu %llu %llu %llu %llu %llu", &cpu, &u, &ni, &sy,
                    &id, &io, &irq, &sirq, &st) != 9)
            continue;
        if (cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET (cpu, cpus))
            continue;
        double busy = (double) (u + ni + sy + irq + sirq + st) / hz;
        out->busy_s += busy;
        out->total_s += busy + (double) (id + io) / hz;
        if (out->ncpu < CGQ_INTERF_MAX_CPUS)
            out->khz[out->ncpu++] = s_khz (cpu);
        out->ok = true;
    }
    fclose (f);
}

bool
cgq_interf_judge (const cgq_interf_sample_t *a, const cgq_interf_sample_t *b, double max_busy,
                  double *busy, char *why, size_t whylen)
{
    *busy = 0;
    why[0] = 0;
    if (!a->ok || !b->ok)
        return false;
    double total = b->total_s - a->total_s;
    double others = (b->busy_s - a->busy_s) - (b->child_s - a->child_s);
    if (total > 0)
        *busy = others <= 0 ? 0 : others >= total ? 1 : others / total;
    if (total > 0 && *busy > max_busy) {
        snprintf (why, whylen, "others kept the pinned CPUs %.0f %% busy (over %.0f %%)",
                  *busy * 100, max_busy * 100);
        return true;
    }
    for (int i = 0; i < a->ncpu && i < b->ncpu; i++)
        if (a->khz[i] > 0 && b->khz[i] > 0 &&
            labs (b->khz[i] - a->khz[i]) * 20 > a->khz[i]) {
            snprintf (why, whylen, "CPU frequency changed from %ld to %ld kHz", a->khz[i],
                      b->khz[i]);
            return true;
        }
    return false;
}
