#include "sysfs.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

const char *
cgq_sysfs_root (void)
{
    const char *r = getenv ("CGQ_SYSFS_ROOT");
    return r && *r ? r : "/sys";
}

// s_read reads the first line of path into buf (newline cut). -1: absent.
static int
s_read (const char *path, char *buf, size_t len)
{
    FILE *f = fopen (path, "r");
    if (!f)
        return -1;
    bool ok = fgets (buf, (int) len, f) != NULL;
    fclose (f);
    if (!ok)
        return -1;
    buf[strcspn (buf, "\n")] = 0;
    return 0;
}

static int
s_write (const char *path, const char *val, char *err, size_t errlen)
{
    FILE *f = fopen (path, "w");
    if (!f || fputs (val, f) == EOF || fclose (f) == EOF) {
        snprintf (err, errlen, "cannot write '%s' to %s: %s (the runner needs write access to "
                               "cpufreq: run it as root or give its user the files)",
                  val, path, strerror (errno));
        if (f)
            fclose (f);
        return -1;
    }
    return 0;
}

int
cgq_sysfs_temp_max (double *celsius)
{
    char pat[512];
    snprintf (pat, sizeof pat, "%s/class/thermal/thermal_zone*/temp", cgq_sysfs_root ());
    glob_t g;
    int found = 0;
    if (glob (pat, 0, NULL, &g) != 0)
        return -1;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        char buf[64];
        double v;
        if (s_read (g.gl_pathv[i], buf, sizeof buf) < 0 || cgq_parse_double (buf, &v) < 0)
            continue; // a zone whose sensor is down reads EIO: skip it
        v /= 1000.0;
        if (!found++ || v > *celsius)
            *celsius = v;
    }
    globfree (&g);
    return found ? 0 : -1;
}

static double
s_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

int
cgq_sysfs_cooldown (double below_c, double max_wait_s, double *waited_s, double *temp_c,
                    char *err, size_t errlen)
{
    double t0 = s_now ();
    *waited_s = 0;
    if (cgq_sysfs_temp_max (temp_c) < 0) {
        snprintf (err, errlen, "cooldown is not supported on this device: no thermal zones (%s/"
                               "class/thermal/thermal_zone*/temp; remove measure.cooldown)",
                  cgq_sysfs_root ());
        return -1;
    }
    while (*temp_c >= below_c) {
        if (s_now () - t0 >= max_wait_s) {
            *waited_s = s_now () - t0;
            return 1;
        }
        struct timespec ts = {0, 250 * 1000 * 1000};
        nanosleep (&ts, NULL);
        if (cgq_sysfs_temp_max (temp_c) < 0)
            break;
    }
    *waited_s = s_now () - t0;
    return 0;
}

// The cpufreq files of one CPU that pinning changes, in the order restored.
static const char *const s_files[] = {"scaling_governor", "scaling_max_freq", "scaling_min_freq"};

static void
s_cpufreq (int cpu, const char *file, char *path, size_t len)
{
    snprintf (path, len, "%s/devices/system/cpu/cpu%d/cpufreq/%s", cgq_sysfs_root (), cpu, file);
}

// s_word_in says whether word is one of the space-separated words of list.
static bool
s_word_in (const char *word, const char *list)
{
    size_t n = strlen (word);
    for (const char *p = list; (p = strstr (p, word)); p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == 0 || p[n] == ' ' || p[n] == '\n'))
            return true;
    return false;
}

// s_cpus lists the CPUs to pin: those of set, or every cpuN with cpufreq.
static int
s_cpus (const cpu_set_t *set, int *out, int max, char *err, size_t errlen)
{
    int n = 0;
    char path[512];
    if (set) {
        for (int c = 0; c < CPU_SETSIZE && n < max; c++)
            if (CPU_ISSET (c, set))
                out[n++] = c;
    } else {
        for (int c = 0; c < CPU_SETSIZE && n < max; c++) {
            snprintf (path, sizeof path, "%s/devices/system/cpu/cpu%d", cgq_sysfs_root (), c);
            if (access (path, F_OK) < 0)
                break;
            out[n++] = c;
        }
    }
    for (int i = 0; i < n; i++) {
        s_cpufreq (out[i], "scaling_governor", path, sizeof path);
        if (access (path, F_OK) < 0) {
            snprintf (err, errlen, "governor/frequency pinning is not supported on this device: "
                                   "no cpufreq (%s is absent; remove measure.governor and "
                                   "measure.frequency)",
                      path);
            return -1;
        }
    }
    if (n == 0) {
        snprintf (err, errlen, "governor/frequency pinning is not supported on this device: no "
                               "cpufreq (no CPU under %s/devices/system/cpu)",
                  cgq_sysfs_root ());
        return -1;
    }
    return n;
}

// What the last pin changed, kept for cgq_sysfs_restore_signal: fixed
// buffers, so that the handler needs no allocation nor stdio.
#define S_UNDO_MAX 192
static struct {
    char path[320];
    char val[64];
} s_undo[S_UNDO_MAX];
static volatile int s_nundo = 0;
static char s_undo_save[512];

char *
cgq_sysfs_save_path (const char *workdir, const char *id, char *buf, size_t len)
{
    snprintf (buf, len, "%s/cpufreq-%s.saved", workdir ? workdir : ".", id);
    return buf;
}

void
cgq_sysfs_restore_signal (void)
{
    int n = s_nundo;
    if (n == 0)
        return;
    for (int round = 0; round < 2; round++) // min/max: as in cgq_sysfs_restore
        for (int i = 0; i < n; i++) {
            int fd = open (s_undo[i].path, O_WRONLY | O_TRUNC);
            if (fd < 0)
                continue;
            ssize_t w = write (fd, s_undo[i].val, strlen (s_undo[i].val));
            (void) w;
            close (fd);
        }
    unlink (s_undo_save);
    s_nundo = 0;
}

int
cgq_sysfs_pin (const cpu_set_t *cpus, const char *governor, uint64_t khz, const char *save_path,
               char *err, size_t errlen)
{
    int list[256];
    int n = s_cpus (cpus, list, 256, err, errlen);
    if (n < 0)
        return -1;
    char path[512], buf[512];
    // Check everything before changing anything.
    for (int i = 0; i < n; i++) {
        if (governor) {
            s_cpufreq (list[i], "scaling_available_governors", path, sizeof path);
            if (s_read (path, buf, sizeof buf) == 0 && !s_word_in (governor, buf)) {
                snprintf (err, errlen, "CPU %d has no cpufreq governor '%s' (it offers: %s)",
                          list[i], governor, buf);
                return -1;
            }
        }
        if (khz) {
            char lo[64], hi[64];
            uint64_t l, h;
            s_cpufreq (list[i], "cpuinfo_min_freq", path, sizeof path);
            int a = s_read (path, lo, sizeof lo);
            s_cpufreq (list[i], "cpuinfo_max_freq", path, sizeof path);
            int b = s_read (path, hi, sizeof hi);
            if (a == 0 && b == 0 && cgq_parse_u64 (lo, &l) == 0 && cgq_parse_u64 (hi, &h) == 0
                && (khz < l || khz > h)) {
                snprintf (err, errlen,
                          "frequency %" PRIu64 " kHz is outside CPU %d's range %" PRIu64
                          "..%" PRIu64 " kHz",
                          khz, list[i], l, h);
                return -1;
            }
        }
    }
    FILE *f = fopen (save_path, "w");
    if (!f) {
        snprintf (err, errlen, "cannot save the cpufreq settings to %s: %s", save_path,
                  strerror (errno));
        return -1;
    }
    int nundo = 0;
    s_nundo = 0;
    for (int i = 0; i < n; i++)
        for (size_t k = 0; k < sizeof s_files / sizeof *s_files; k++) {
            s_cpufreq (list[i], s_files[k], path, sizeof path);
            if (s_read (path, buf, sizeof buf) == 0) {
                fprintf (f, "%d %s %s\n", list[i], s_files[k], buf);
                if (nundo < S_UNDO_MAX && strlen (path) < sizeof s_undo[0].path
                    && strlen (buf) < sizeof s_undo[0].val) {
                    memcpy (s_undo[nundo].path, path, strlen (path) + 1);
                    memcpy (s_undo[nundo].val, buf, strlen (buf) + 1);
                    nundo++;
                }
            }
        }
    snprintf (s_undo_save, sizeof s_undo_save, "%s", save_path);
    if (fclose (f) == EOF) {
        snprintf (err, errlen, "cannot save the cpufreq settings to %s: %s", save_path,
                  strerror (errno));
        unlink (save_path);
        return -1;
    }
    s_nundo = nundo; // armed only once the file is whole
    for (int i = 0; i < n; i++) {
        if (governor) {
            s_cpufreq (list[i], "scaling_governor", path, sizeof path);
            if (s_write (path, governor, err, errlen) < 0)
                goto undo;
        }
        if (khz) {
            // Raise max first when going up, lower min first when going
            // down: min <= max holds at every step (the kernel refuses else).
            char cur[64];
            uint64_t curmax = 0;
            s_cpufreq (list[i], "scaling_max_freq", path, sizeof path);
            if (s_read (path, cur, sizeof cur) == 0)
                cgq_parse_u64 (cur, &curmax);
            snprintf (buf, sizeof buf, "%" PRIu64, khz);
            const char *order[2] = {"scaling_min_freq", "scaling_max_freq"};
            if (khz > curmax) {
                order[0] = "scaling_max_freq";
                order[1] = "scaling_min_freq";
            }
            for (int k = 0; k < 2; k++) {
                s_cpufreq (list[i], order[k], path, sizeof path);
                if (s_write (path, buf, err, errlen) < 0)
                    goto undo;
            }
        }
    }
    return 0;
undo:;
    // Put back what was changed; the error to report is the first one.
    char why[256];
    if (cgq_sysfs_restore (save_path, why, sizeof why) < 0) {
        size_t l = strlen (err);
        snprintf (err + l, errlen - l, "; restoring failed too: %s (kept in %s)", why, save_path);
    }
    return -1;
}

int
cgq_sysfs_restore (const char *save_path, char *err, size_t errlen)
{
    FILE *f = fopen (save_path, "r");
    if (!f)
        return 0;
    s_nundo = 0; // the file is the truth from here
    char line[600];
    int rc = 1;
    // Two rounds: a min above the max saved (or the reverse) is refused by
    // the kernel until the other side is back; the second round sets it.
    for (int round = 0; round < 2; round++) {
        rewind (f);
        rc = 1;
        while (fgets (line, sizeof line, f)) {
            int cpu;
            char file[64], val[512];
            if (sscanf (line, "%d %63s %511[^\n]", &cpu, file, val) != 3)
                continue;
            bool known = false;
            for (size_t k = 0; k < sizeof s_files / sizeof *s_files; k++)
                known |= !strcmp (file, s_files[k]);
            if (!known)
                continue;
            char path[512];
            s_cpufreq (cpu, file, path, sizeof path);
            if (s_write (path, val, err, errlen) < 0)
                rc = -1;
        }
        if (rc == 1)
            break;
    }
    fclose (f);
    if (rc == 1)
        unlink (save_path);
    return rc;
}
