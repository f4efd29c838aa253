// sysfs.c and the measure: keys that use it, against a fake /sys tree of
// real files under a temp dir (CGQ_SYSFS_ROOT): thermal zones, governor and
// frequency pinning with its save file, the restore after the measurement
// and after a measurement that was killed, the cooldown wait, and a device
// without cpufreq.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "interfere.h"
#include "measure.h"
#include "runcfg.h"
#include "sysfs.h"
#include "transport.h"
#include "util.h"

static char s_dir[256];

static void
s_put (const char *rel, const char *text)
{
    char path[512];
    snprintf (path, sizeof path, "%s/sys/%s", s_dir, rel);
    char *cmd = cgq_xasprintf ("mkdir -p \"$(dirname '%s')\"", path);
    assert_int_equal (system (cmd), 0);
    free (cmd);
    FILE *f = fopen (path, "w");
    assert_non_null (f);
    fputs (text, f);
    fclose (f);
}

static char *
s_get (const char *rel)
{
    static char buf[256];
    char path[512];
    snprintf (path, sizeof path, "%s/sys/%s", s_dir, rel);
    FILE *f = fopen (path, "r");
    assert_non_null (f);
    buf[0] = 0;
    if (!fgets (buf, sizeof buf, f))
        buf[0] = 0;
    fclose (f);
    buf[strcspn (buf, "\n")] = 0;
    return buf;
}

// A two-CPU board at 1.4 GHz under schedutil, zones at 45 and 61.5 °C.
static int
s_setup (void **state)
{
    (void) state;
    snprintf (s_dir, sizeof s_dir, "/tmp/cgq-sysfs-test-XXXXXX");
    assert_non_null (mkdtemp (s_dir));
    for (int c = 0; c < 2; c++) {
        char p[128];
#define S_F(file, val)                                                                             \
    snprintf (p, sizeof p, "devices/system/cpu/cpu%d/cpufreq/" file, c);                           \
    s_put (p, val "\n")
        S_F ("scaling_governor", "schedutil");
        S_F ("scaling_available_governors", "performance powersave userspace schedutil");
        S_F ("scaling_min_freq", "600000");
        S_F ("scaling_max_freq", "1400000");
        S_F ("cpuinfo_min_freq", "600000");
        S_F ("cpuinfo_max_freq", "2000000");
        S_F ("scaling_cur_freq", "1400000");
#undef S_F
    }
    s_put ("class/thermal/thermal_zone0/temp", "45000\n");
    s_put ("class/thermal/thermal_zone1/temp", "61500\n");
    char root[300];
    snprintf (root, sizeof root, "%s/sys", s_dir);
    setenv ("CGQ_SYSFS_ROOT", root, 1);
    return 0;
}

static int
s_teardown (void **state)
{
    (void) state;
    char *cmd = cgq_xasprintf ("rm -rf '%s'", s_dir);
    (void) !system (cmd);
    free (cmd);
    unsetenv ("CGQ_SYSFS_ROOT");
    return 0;
}

static void
test_temp_max (void **state)
{
    (void) state;
    double c = 0;
    assert_int_equal (cgq_sysfs_temp_max (&c), 0);
    assert_true (fabs (c - 61.5) < 1e-9);
    s_put ("class/thermal/thermal_zone2/temp", "garbage\n"); // a sensor that is down
    assert_int_equal (cgq_sysfs_temp_max (&c), 0);
    assert_true (fabs (c - 61.5) < 1e-9);
}

static void
test_pin_and_restore (void **state)
{
    (void) state;
    char save[300], err[512] = "";
    snprintf (save, sizeof save, "%s/saved", s_dir);
    cpu_set_t one;
    CPU_ZERO (&one);
    CPU_SET (1, &one);
    // Up: max is raised before min (min <= max at every step).
    assert_int_equal (cgq_sysfs_pin (&one, "performance", 1800000, save, err, sizeof err), 0);
    assert_string_equal (s_get ("devices/system/cpu/cpu1/cpufreq/scaling_governor"), "performance");
    assert_string_equal (s_get ("devices/system/cpu/cpu1/cpufreq/scaling_min_freq"), "1800000");
    assert_string_equal (s_get ("devices/system/cpu/cpu1/cpufreq/scaling_max_freq"), "1800000");
    assert_string_equal (s_get ("devices/system/cpu/cpu0/cpufreq/scaling_governor"), "schedutil");
    assert_int_equal (access (save, F_OK), 0);
    assert_int_equal (cgq_sysfs_restore (save, err, sizeof err), 1);
    assert_string_equal (s_get ("devices/system/cpu/cpu1/cpufreq/scaling_governor"), "schedutil");
    assert_string_equal (s_get ("devices/system/cpu/cpu1/cpufreq/scaling_min_freq"), "600000");
    assert_string_equal (s_get ("devices/system/cpu/cpu1/cpufreq/scaling_max_freq"), "1400000");
    assert_int_equal (access (save, F_OK), -1);
    assert_int_equal (cgq_sysfs_restore (save, err, sizeof err), 0); // nothing saved
    // Every CPU with cpufreq when no cpus are given.
    assert_int_equal (cgq_sysfs_pin (NULL, "powersave", 0, save, err, sizeof err), 0);
    assert_string_equal (s_get ("devices/system/cpu/cpu0/cpufreq/scaling_governor"), "powersave");
    assert_string_equal (s_get ("devices/system/cpu/cpu1/cpufreq/scaling_governor"), "powersave");
    assert_int_equal (cgq_sysfs_restore (save, err, sizeof err), 1);
    assert_string_equal (s_get ("devices/system/cpu/cpu0/cpufreq/scaling_governor"), "schedutil");
}

static void
test_refusals (void **state)
{
    (void) state;
    char save[300], err[512] = "";
    snprintf (save, sizeof save, "%s/saved", s_dir);
    assert_int_equal (cgq_sysfs_pin (NULL, "turbo", 0, save, err, sizeof err), -1);
    assert_non_null (strstr (err, "no cpufreq governor 'turbo'"));
    assert_non_null (strstr (err, "performance powersave userspace schedutil"));
    assert_int_equal (cgq_sysfs_pin (NULL, NULL, 3000000, save, err, sizeof err), -1);
    assert_non_null (strstr (err, "outside CPU 0's range 600000..2000000"));
    assert_int_equal (access (save, F_OK), -1); // checked before anything changed
    assert_string_equal (s_get ("devices/system/cpu/cpu0/cpufreq/scaling_governor"), "schedutil");
    cpu_set_t far;
    CPU_ZERO (&far);
    CPU_SET (5, &far);
    assert_int_equal (cgq_sysfs_pin (&far, "performance", 0, save, err, sizeof err), -1);
    assert_non_null (strstr (err, "not supported on this device: no cpufreq"));
    // A tree with no cpufreq at all (as on this VM).
    char root[300];
    snprintf (root, sizeof root, "%s/empty", s_dir);
    mkdir (root, 0700);
    setenv ("CGQ_SYSFS_ROOT", root, 1);
    assert_int_equal (cgq_sysfs_pin (NULL, "performance", 0, save, err, sizeof err), -1);
    assert_non_null (strstr (err, "not supported on this device: no cpufreq"));
    double w, c;
    assert_int_equal (cgq_sysfs_cooldown (50, 1, &w, &c, err, sizeof err), -1);
    assert_non_null (strstr (err, "no thermal zones"));
    snprintf (root, sizeof root, "%s/sys", s_dir);
    setenv ("CGQ_SYSFS_ROOT", root, 1);
}

static void
test_cooldown (void **state)
{
    (void) state;
    char err[512] = "";
    double waited, c;
    // Already below: no wait.
    assert_int_equal (cgq_sysfs_cooldown (70, 5, &waited, &c, err, sizeof err), 0);
    assert_true (waited < 0.1);
    // Never below: bounded by max_wait.
    assert_int_equal (cgq_sysfs_cooldown (50, 0.5, &waited, &c, err, sizeof err), 1);
    assert_true (waited >= 0.5 && waited < 2);
    assert_true (fabs (c - 61.5) < 1e-9);
    // Cools down after 400 ms (a child writes the zone): waits about that long.
    pid_t pid = fork ();
    if (pid == 0) {
        struct timespec ts = {0, 400 * 1000 * 1000};
        nanosleep (&ts, NULL);
        s_put ("class/thermal/thermal_zone1/temp", "48000\n");
        _exit (0);
    }
    assert_int_equal (cgq_sysfs_cooldown (50, 10, &waited, &c, err, sizeof err), 0);
    assert_true (waited >= 0.3 && waited < 3);
    assert_true (c < 50);
    waitpid (pid, NULL, 0);
    s_put ("class/thermal/thermal_zone1/temp", "61500\n");
}

static cgq_runcfg_t *
s_cfg (void)
{
    const char *text = "devices: [{id: d1, tags: {device: fake}}]\n"
                       "benchmarks:\n"
                       "  quick: {command: [true], repeats: 3, cpus: \"1\"}\n";
    char err[512] = "";
    cgq_runcfg_t *c = cgq_runcfg_parse (text, strlen (text), "test.yaml", err, sizeof err);
    if (!c)
        fail_msg ("%s", err);
    return c;
}

static json_t *
s_run (cgq_runcfg_t *cfg, const char *measure, cgq_measure_status_t want, char *err)
{
    cgq_measure_req_t r = {.cfg = cfg, .device = "d1", .benchmark = "quick",
                           .workdir = s_dir, .measure_json = measure};
    char *m = NULL;
    cgq_measure_status_t st = cgq_measure_run (&r, &m, err, 1024);
    if (st != want)
        fail_msg ("status %s, want %s (%s)", cgq_measure_status_name (st),
                  cgq_measure_status_name (want), err);
    json_t *j = json_loads (m, 0, NULL);
    free (m);
    assert_non_null (j);
    return j;
}

static void
test_measure_keys (void **state)
{
    (void) state;
    cgq_runcfg_t *cfg = s_cfg ();
    char err[1024];
    // Pinned for the runs, restored after; temperature reported.
    json_t *j = s_run (cfg, "{\"governor\": \"performance\", \"frequency_khz\": 1000000, "
                            "\"repeats\": 4, \"precision\": 0.5}",
                       CGQ_MEASURE_OK, err);
    assert_string_equal (json_string_value (json_object_get (j, "governor")), "performance");
    assert_int_equal (json_integer_value (json_object_get (j, "frequency_khz")), 1000000);
    assert_true (json_integer_value (json_object_get (j, "runs")) >= 4);
    assert_true (fabs (json_number_value (json_object_get (j, "temp_c_max")) - 61.5) < 1e-9);
    assert_true (json_is_boolean (json_object_get (j, "converged")));
    json_decref (j);
    assert_string_equal (s_get ("devices/system/cpu/cpu1/cpufreq/scaling_governor"), "schedutil");
    assert_string_equal (s_get ("devices/system/cpu/cpu1/cpufreq/scaling_min_freq"), "600000");
    // A measurement killed while pinned left its save file: the next one
    // on the device puts the settings back first, and says so.
    char save[300];
    snprintf (save, sizeof save, "%s/cpufreq-d1.saved", s_dir);
    assert_int_equal (cgq_sysfs_pin (NULL, "performance", 0, save, err, 1024), 0);
    j = s_run (cfg, NULL, CGQ_MEASURE_OK, err);
    assert_true (json_is_true (json_object_get (j, "cpufreq_restored")));
    json_decref (j);
    assert_string_equal (s_get ("devices/system/cpu/cpu0/cpufreq/scaling_governor"), "schedutil");
    assert_int_equal (access (save, F_OK), -1);
    // The cooldown: reached at once under 70 °C, bounded under 50 °C.
    j = s_run (cfg, "{\"cooldown_below_c\": 70, \"cooldown_max_wait_s\": 5}", CGQ_MEASURE_OK, err);
    assert_true (json_is_true (json_object_get (j, "cooldown_reached")));
    assert_true (json_number_value (json_object_get (j, "waited_s")) < 0.5);
    json_decref (j);
    j = s_run (cfg, "{\"cooldown_below_c\": 50, \"cooldown_max_wait_s\": 0.3}", CGQ_MEASURE_OK, err);
    assert_true (json_is_false (json_object_get (j, "cooldown_reached")));
    assert_true (json_number_value (json_object_get (j, "waited_s")) >= 0.3);
    json_decref (j);
    // What this device cannot honour, or this runner does not know: bad.
    j = s_run (cfg, "{\"governor\": \"turbo\"}", CGQ_MEASURE_BAD, err);
    assert_non_null (strstr (err, "no cpufreq governor 'turbo'"));
    json_decref (j);
    j = s_run (cfg, "{\"precision\": 2}", CGQ_MEASURE_BAD, err);
    assert_non_null (strstr (err, "measure.precision"));
    json_decref (j);
    j = s_run (cfg, "{\"warmups\": 2}", CGQ_MEASURE_BAD, err);
    assert_non_null (strstr (err, "does not know measure.warmups"));
    json_decref (j);
    j = s_run (cfg, "[1]", CGQ_MEASURE_BAD, err);
    assert_non_null (strstr (err, "not a JSON object"));
    json_decref (j);
    char root[300];
    snprintf (root, sizeof root, "%s/empty", s_dir);
    setenv ("CGQ_SYSFS_ROOT", root, 1);
    j = s_run (cfg, "{\"governor\": \"performance\"}", CGQ_MEASURE_BAD, err);
    assert_non_null (strstr (err, "not supported on this device: no cpufreq"));
    json_decref (j);
    snprintf (root, sizeof root, "%s/sys", s_dir);
    setenv ("CGQ_SYSFS_ROOT", root, 1);
    cgq_runcfg_destroy (&cfg);
}

// runner.yaml's governor/frequency/cooldown_* are the defaults that a
// stage's measure: overrides.
static void
test_runner_yaml_defaults (void **state)
{
    (void) state;
    const char *text = "devices: [{id: d1}]\n"
                       "benchmarks:\n"
                       "  quick: {command: [true], repeats: 2, governor: powersave, "
                       "frequency: 800000, cooldown_below_c: 70, cooldown_max_wait: 3s}\n";
    char err[1024] = "";
    cgq_runcfg_t *cfg = cgq_runcfg_parse (text, strlen (text), "r.yaml", err, sizeof err);
    if (!cfg)
        fail_msg ("%s", err);
    json_t *j = s_run (cfg, NULL, CGQ_MEASURE_OK, err);
    assert_string_equal (json_string_value (json_object_get (j, "governor")), "powersave");
    assert_int_equal (json_integer_value (json_object_get (j, "frequency_khz")), 800000);
    assert_true (json_number_value (json_object_get (j, "cooldown_below_c")) == 70);
    json_decref (j);
    j = s_run (cfg, "{\"governor\": \"performance\", \"cooldown_below_c\": 65}", CGQ_MEASURE_OK,
               err);
    assert_string_equal (json_string_value (json_object_get (j, "governor")), "performance");
    assert_int_equal (json_integer_value (json_object_get (j, "frequency_khz")), 800000);
    assert_true (json_number_value (json_object_get (j, "cooldown_below_c")) == 65);
    json_decref (j);
    assert_string_equal (s_get ("devices/system/cpu/cpu0/cpufreq/scaling_governor"), "schedutil");
    assert_string_equal (s_get ("devices/system/cpu/cpu0/cpufreq/scaling_max_freq"), "1400000");
    cgq_runcfg_destroy (&cfg);
}

static void
test_remote_parse (void **state)
{
    (void) state;
    const char *text = "cpu  10 0 10 100 0 0 0 0 0 0\n"
                       "cpu0 5 0 5 50 0 0 0 0 0 0\n"
                       "cpu1 5 0 5 50 0 0 0 0 0 0\n"
                       "intr 1\n"
                       "cgq-freq 1 1400000\n"
                       "cgq-temp 52000\n"
                       "cgq-temp 48000\n";
    cgq_interf_sample_t a, b;
    assert_int_equal (cgq_interf_parse_remote (text, NULL, 0, &a), 0);
    assert_int_equal (a.ncpu, 2);
    assert_int_equal (a.khz[1], 1400000);
    assert_int_equal (a.khz[0], 0);
    assert_true (fabs (a.temp_c_max - 52) < 1e-9);
    // One second later: 1 s of one CPU busy, the benchmark's own 0.5 s.
    const char *later = "cpu0 55 0 5 100 0 0 0 0 0 0\n"
                        "cpu1 55 0 5 100 0 0 0 0 0 0\n"
                        "cgq-freq 1 1000000\n";
    assert_int_equal (cgq_interf_parse_remote (later, NULL, 0.5, &b), 0);
    double busy;
    char why[160];
    // 0.5 s of others over 2 CPU-seconds: 25 %.
    assert_true (cgq_interf_judge (&a, &b, 0.3, &busy, why, sizeof why)); // the frequency moved
    assert_true (fabs (busy - 0.25) < 1e-6);
    assert_non_null (strstr (why, "frequency changed from 1400000 to 1000000"));
    assert_true (cgq_interf_judge (&a, &b, 0.1, &busy, why, sizeof why));
    assert_non_null (strstr (why, "25 % busy"));
    // A window of 20 ticks (0.2 CPU-seconds) busy with others: too coarse
    // to judge on its busy share.
    const char *soon = "cpu0 25 0 5 50 0 0 0 0 0 0\ncpu1 5 0 5 50 0 0 0 0 0 0\n";
    assert_int_equal (cgq_interf_parse_remote (soon, NULL, 0, &b), 0);
    assert_false (cgq_interf_judge (&a, &b, 0.1, &busy, why, sizeof why));
    assert_true (fabs (busy - 1) < 1e-6);
    assert_string_equal (why, "");
    assert_int_equal (cgq_interf_parse_remote ("ssh: connect refused\n", NULL, 0, &a), -1);
}

// Steal time (/proc/stat's 8th number) is read where the kernel has it and
// named in the reason; a line without it (before 2.6.11) is still read.
static void
test_remote_steal (void **state)
{
    (void) state;
    cgq_interf_sample_t a, b;
    assert_int_equal (cgq_interf_parse_remote ("cpu0 0 0 0 100 0 0 0 0\n", NULL, 0, &a), 0);
    assert_true (a.has_steal);
    // 1 s later: 0.4 s stolen by the hypervisor, 0.1 s others' user time.
    assert_int_equal (cgq_interf_parse_remote ("cpu0 10 0 0 150 0 0 0 40\n", NULL, 0, &b), 0);
    assert_true (fabs (cgq_interf_steal (&a, &b) - 0.4) < 1e-9);
    double busy;
    char why[200];
    assert_true (cgq_interf_judge (&a, &b, 0.1, &busy, why, sizeof why));
    assert_true (fabs (busy - 0.5) < 1e-6);
    assert_non_null (strstr (why, "40 % was steal time"));
    assert_int_equal (cgq_interf_parse_remote ("cpu0 10 0 0 150 0 0 0\n", NULL, 0, &b), 0);
    assert_false (b.has_steal);
    assert_true (cgq_interf_steal (&a, &b) < 0);
}

// The board's CPU account: cutime + cstime of the shell's /proc/$$/stat
// (after the last ')': a command name may hold spaces and parentheses),
// and its lines stripped from what parse: sees.
static void
test_board_cpu_account (void **state)
{
    (void) state;
    char out[] = "took 5 ms\n"
                 CGQ_TRANSPORT_STAT0_MARK "77 (a) b) S 1 77 77 0 -1 4194560 100 0 0 0 1 0 3 1 20 0 "
                 "1 0 5 2 3\n"
                 CGQ_TRANSPORT_STAT1_MARK "77 (a) b) S 1 77 77 0 -1 4194560 100 0 0 0 1 0 40 12 20 "
                 "0 1 0 5 2 3\n"
                 "done\n";
    double s;
    assert_int_equal (cgq_transport_board_cpu_s (out, strlen (out), 100, &s), 0);
    assert_true (fabs (s - 0.48) < 1e-9); // (40 + 12) - (3 + 1) ticks
    size_t len = strlen (out);
    cgq_transport_strip_marks (out, &len);
    assert_string_equal (out, "took 5 ms\ndone\n");
    assert_int_equal (len, strlen (out));
    assert_int_equal (cgq_transport_board_cpu_s (out, len, 100, &s), -1);
    const char *bad = CGQ_TRANSPORT_STAT0_MARK "1 (sh) S 1\n" CGQ_TRANSPORT_STAT1_MARK "1 (sh) S\n";
    assert_int_equal (cgq_transport_board_cpu_s (bad, strlen (bad), 100, &s), -1);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_temp_max),      cmocka_unit_test (test_pin_and_restore),
        cmocka_unit_test (test_refusals),      cmocka_unit_test (test_cooldown),
        cmocka_unit_test (test_measure_keys),  cmocka_unit_test (test_runner_yaml_defaults),
        cmocka_unit_test (test_remote_parse),  cmocka_unit_test (test_remote_steal),
        cmocka_unit_test (test_board_cpu_account),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
