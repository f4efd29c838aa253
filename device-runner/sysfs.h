// sysfs: what the runner reads and pins in a Linux device's /sys — the
// thermal zones' temperatures, and the cpufreq governor and frequency of the
// pinned CPUs, saved to a file before they are changed and restored after
// the measurement (or, when the measuring process was killed, at the next
// measurement on that device). CGQ_SYSFS_ROOT, when set, replaces "/sys"
// (tests point it at a fake tree of real files). See docs/devices.md.
#ifndef CGQ_SYSFS_H
#define CGQ_SYSFS_H

#include <sched.h>
#include <stddef.h>
#include <stdint.h>

// cgq_sysfs_root is $CGQ_SYSFS_ROOT, or "/sys". Borrowed.
const char *cgq_sysfs_root (void);

// cgq_sysfs_temp_max reads every thermal_zone*/temp (millidegrees) and
// gives the hottest in °C. Returns 0, or -1 when there is none.
int cgq_sysfs_temp_max (double *celsius);

// cgq_sysfs_cooldown waits, polling every 250 ms, until the hottest zone is
// below below_c or max_wait_s has passed. *waited_s: how long it waited;
// *temp_c: the last reading. Returns 0 when it got below, 1 when max_wait_s
// ran out, -1 with err when the device has no thermal zones.
int cgq_sysfs_cooldown (double below_c, double max_wait_s, double *waited_s, double *temp_c,
                        char *err, size_t errlen);

// cgq_sysfs_pin saves the cpufreq settings (scaling_governor,
// scaling_min_freq, scaling_max_freq) of the CPUs in cpus (NULL: every CPU
// with cpufreq) to save_path, then sets governor (NULL: unchanged) and pins
// the frequency to khz (0: unchanged) through scaling_min/max_freq. Returns
// 0; or -1 with err ("not supported on this device: no cpufreq ...", a
// governor or frequency the CPU does not offer, a write refused) after
// putting back what it had changed and removing save_path.
int cgq_sysfs_pin (const cpu_set_t *cpus, const char *governor, uint64_t khz,
                   const char *save_path, char *err, size_t errlen);

// cgq_sysfs_restore_signal writes back, from memory, what the last
// cgq_sysfs_pin of this process changed and removes its save file, with
// async-signal-safe calls only: a measuring process's SIGTERM handler (a
// Stop) restores at once; only a SIGKILL leaves the save file behind.
void cgq_sysfs_restore_signal (void);

// cgq_sysfs_save_path is where the settings pinned for device id are saved
// (WORKDIR/cpufreq-ID.saved; workdir NULL: "."). Returns buf.
char *cgq_sysfs_save_path (const char *workdir, const char *id, char *buf, size_t len);

// cgq_sysfs_restore writes back the settings saved in save_path and removes
// it. Returns 1 when it restored some, 0 when there was no such file, -1
// with err when a write failed (the file is kept for the next try).
int cgq_sysfs_restore (const char *save_path, char *err, size_t errlen);

#endif
