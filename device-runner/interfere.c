#include "interfere.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "sysfs.h"

static long
s_khz (int cpu)
{
    char path[512];
    snprintf (path, sizeof path, "%s/devices/system/cpu/cpu%d/cpufreq/scaling_cur_freq",
              cgq_sysfs_root (), cpu);
    FILE *f = fopen (path, "r");
    long v = 0;
    if (f) {
        if (fscanf (f, "%ld", &v) != 1)
            v = 0;
        fclose (f);
    }
    return v;
}

static double
s_tv (struct timeval a, struct timeval b)
{
    return (double) a.tv_sec + (double) a.tv_usec / 1e6 + (double) b.tv_sec
           + (double) b.tv_usec / 1e6;
}

// s_stat_line adds one "cpuN ..." line of /proc/stat to out when N is in
// cpus (NULL: any). Returns the CPU number, or -1 when not counted.
static int
s_stat_line (const char *line, const cpu_set_t *cpus, double hz, cgq_interf_sample_t *out)
{
    int cpu;
    unsigned long long u, ni, sy, id, io, irq, sirq, st = 0;
    if (strncmp (line, "cpu", 3) != 0 || line[3] < '0' || line[3] > '9')
        return -1;
    int got = sscanf (line, "cpu%d %llu %llu %llu %llu %llu %llu %llu %llu", &cpu, &u, &ni, &sy,
                      &id, &io, &irq, &sirq, &st);
    if (got < 8) // steal (the 8th number) is optional: kernels before 2.6.11
        return -1;
    if (cpu < 0 || cpu >= CPU_SETSIZE || (cpus && !CPU_ISSET (cpu, cpus)))
        return -1;
    double busy = (double) (u + ni + sy + irq + sirq + st) / hz;
    out->busy_s += busy;
    out->total_s += busy + (double) (id + io) / hz;
    out->has_steal = (out->ok ? out->has_steal : true) && got == 9;
    out->steal_s += (double) st / hz;
    out->ok = true;
    return cpu;
}

static void
s_sample (const cpu_set_t *cpus, bool self, cgq_interf_sample_t *out)
{
    memset (out, 0, sizeof *out);
    struct rusage ru;
    if (getrusage (self ? RUSAGE_SELF : RUSAGE_CHILDREN, &ru) == 0)
        out->child_s = s_tv (ru.ru_utime, ru.ru_stime);
    double t;
    out->temp_c_max = cgq_sysfs_temp_max (&t) == 0 ? t : NAN;
    double hz = (double) sysconf (_SC_CLK_TCK);
    if (hz <= 0)
        hz = 100;
    FILE *f = fopen ("/proc/stat", "r");
    if (!f)
        return;
    char line[512];
    while (fgets (line, sizeof line, f)) {
        int cpu = s_stat_line (line, cpus, hz, out);
        if (cpu >= 0 && out->ncpu < CGQ_INTERF_MAX_CPUS)
            out->khz[out->ncpu++] = s_khz (cpu);
    }
    fclose (f);
}

void
cgq_interf_sample (const cpu_set_t *cpus, cgq_interf_sample_t *out)
{
    s_sample (cpus, false, out);
}

void
cgq_interf_sample_self (const cpu_set_t *cpus, cgq_interf_sample_t *out)
{
    s_sample (cpus, true, out);
}

int
cgq_interf_parse_remote (const char *text, const cpu_set_t *cpus, double own_s,
                         cgq_interf_sample_t *out)
{
    memset (out, 0, sizeof *out);
    out->temp_c_max = NAN;
    out->child_s = own_s;
    double hz = (double) sysconf (_SC_CLK_TCK); // the board's USER_HZ: 100 on every Linux
    if (hz <= 0)
        hz = 100;
    int order[CGQ_INTERF_MAX_CPUS];
    const char *p = text;
    while (p && *p) {
        const char *nl = strchr (p, '\n');
        size_t len = nl ? (size_t) (nl - p) : strlen (p);
        char line[512];
        if (len >= sizeof line)
            len = sizeof line - 1;
        memcpy (line, p, len);
        line[len] = 0;
        int cpu;
        long v;
        if ((cpu = s_stat_line (line, cpus, hz, out)) >= 0) {
            if (out->ncpu < CGQ_INTERF_MAX_CPUS)
                order[out->ncpu++] = cpu;
        }
        else if (sscanf (line, "cgq-freq %d %ld", &cpu, &v) == 2) {
            for (int i = 0; i < out->ncpu; i++)
                if (order[i] == cpu)
                    out->khz[i] = v;
        }
        else if (sscanf (line, "cgq-temp %ld", &v) == 1) {
            double c = (double) v / 1000.0;
            if (isnan (out->temp_c_max) || c > out->temp_c_max)
                out->temp_c_max = c;
        }
        p = nl ? nl + 1 : NULL;
    }
    return out->ok ? 0 : -1;
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
    if (total >= CGQ_INTERF_MIN_WINDOW_S && *busy > max_busy) {
        double steal = cgq_interf_steal (a, b);
        if (steal >= 0.005)
            snprintf (why, whylen,
                      "others kept the pinned CPUs %.0f %% busy (over %.0f %%; %.0f %% was "
                      "steal time: the hypervisor's other guests)",
                      *busy * 100, max_busy * 100, steal * 100);
        else
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

double
cgq_interf_steal (const cgq_interf_sample_t *a, const cgq_interf_sample_t *b)
{
    if (!a->ok || !b->ok || !a->has_steal || !b->has_steal)
        return -1;
    double total = b->total_s - a->total_s, st = b->steal_s - a->steal_s;
    if (total <= 0 || st <= 0)
        return 0;
    return st >= total ? 1 : st / total;
}
