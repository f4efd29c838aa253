#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "runcfg.h"
#include "util.h"

static cgq_runcfg_t *
s_parse (const char *text, char *err)
{
    return cgq_runcfg_parse (text, strlen (text), "runner.yaml", err, 512);
}

static void
test_full (void **state)
{
    char err[512] = "";
    cgq_runcfg_t *c = s_parse ("coordinator: tcp://lab:7700\n"
                               "id: lab-1\n"
                               "cooldown: 2s\n"
                               "cache: {dir: /tmp/x, max_size: 2G, retries: 4, timeout: 1m}\n"
                               "devices:\n"
                               "  - id: odroid-1\n"
                               "    tags: {device: odroid-xu4, os: linux}\n"
                               "    env: {ANDROID_SERIAL: abc}\n"
                               "    check: 'true'\n"
                               "    reset: 'echo reset'\n"
                               "benchmarks:\n"
                               "  nnpackage:\n"
                               "    command: nnpackage_run --nnpackage {artifact}\n"
                               "    env: {BACKENDS: 'acl_cl;cpu', 'OP_BACKEND_{item}': '{choice}'}\n"
                               "    timing: parse\n"
                               "    parse: {time: 'mean: ([0-9.]+) us', time_unit: us}\n"
                               "    repeats: 20\n"
                               "    min_time: 1s\n"
                               "    cpus: 0,2-3\n"
                               "  direct:\n"
                               "    command: [tool, -r, '{runs}']\n"
                               "  cpu-local: {repeats: 50, cooldown: 0s}\n",
                               err);
    assert_non_null (c);
    assert_string_equal (c->coordinator, "tcp://lab:7700");
    assert_string_equal (c->id, "lab-1");
    assert_int_equal (c->cache_max, 2ull << 30);
    assert_int_equal (c->max_artifact, 2ull << 30); // defaults to the cache's cap
    assert_int_equal (c->retries, 4);
    assert_true (c->transfer_timeout_s == 60);
    assert_int_equal (c->ndevices, 1);
    const cgq_runcfg_device_t *d = cgq_runcfg_device (c, "odroid-1");
    assert_non_null (d);
    assert_int_equal (d->tags.n, 2);
    assert_string_equal (d->tags.vals[0], "odroid-xu4");
    assert_string_equal (d->env.keys[0], "ANDROID_SERIAL");
    assert_string_equal (d->reset, "echo reset");
    const cgq_runcfg_bench_t *b = cgq_runcfg_bench (c, "nnpackage");
    assert_int_equal (b->timing, CGQ_TIMING_PARSE);
    assert_true (b->time_scale == 1e-3);
    assert_int_equal (b->repeats, 20);
    assert_true (b->cooldown_s == 2); // the file's default
    assert_true (b->pin && CPU_ISSET (0, &b->cpus) && !CPU_ISSET (1, &b->cpus)
                 && CPU_ISSET (3, &b->cpus));
    assert_int_equal (b->env.n, 2);
    b = cgq_runcfg_bench (c, "direct");
    assert_int_equal (b->argc, 3);
    assert_int_equal (b->timing, CGQ_TIMING_PER_RUN);
    b = cgq_runcfg_bench (c, "cpu-local");
    assert_int_equal (b->timing, CGQ_TIMING_BUILTIN);
    assert_int_equal (b->repeats, 50);
    assert_true (b->cooldown_s == 0);
    assert_null (cgq_runcfg_bench (c, "nope"));
    cgq_runcfg_destroy (&c);
    assert_null (c);
}

static void
test_builtin_always_there (void **state)
{
    char err[512] = "";
    cgq_runcfg_t *c = s_parse ("devices: [{id: cpu0, tags: {device: cpu}}]\n", err);
    assert_non_null (c);
    assert_non_null (cgq_runcfg_bench (c, "cpu-local"));
    assert_string_equal (c->cache_dir, "./.cgq/artifacts");
    cgq_runcfg_destroy (&c);
}

// Regexes of ordinary size pass the repetition bound, classes and all.
static void
test_regex_bound (void **state)
{
    char err[512] = "";
    cgq_runcfg_t *c = s_parse ("devices: [{id: a}]\nbenchmarks:\n  x: {command: t, timing: parse, "
                               "parse: {time: '[[:digit:]]{1,3} avg=([0-9.]+)(ms|us){1,2}[]x]+', "
                               "memory: '(((peak)+)+) ([0-9]{1,20})'}}\n",
                               err);
    if (!c)
        fail_msg ("%s", err);
    cgq_runcfg_destroy (&c);
    // Intervals in glibc's every form, and brackets holding a backslash.
    c = s_parse ("devices: [{id: a}]\nbenchmarks:\n  x: {command: t, timing: parse, "
                 "parse: {time: '(a{,3}|b{2,}|c{1,4}|[\\1]){,9}([0-9]+) ms'}}\n",
                 err);
    if (!c)
        fail_msg ("%s", err);
    cgq_runcfg_destroy (&c);
}

// Each bad file: the message names line and column and what is wrong.
static void
test_errors (void **state)
{
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"devices: [{id: a}]\nbenchmarks:\n  x: {command: t, repeat: 3}\n",
         "runner.yaml:3:19: unknown key 'repeat' in benchmark (known keys: command, env, timing, "
         "parse, builtin, warmup, warmup_min_time, repeats, min_time, max_time, timeout, cpus, "
         "cooldown, max_samples, precision, max_runs, max_busy, interference_reruns, governor, "
         "frequency, cooldown_below_c, cooldown_max_wait); did you mean 'repeats'?"},
        {"devices: [{id: a}]\nbenchmarks:\n  x: {command: t, governor: Turbo}\n",
         "runner.yaml:3:29: governor: 'Turbo' is not a cpufreq governor's name"},
        {"devices: [{id: a}]\nbenchmarks:\n  x: {command: t, frequency: 0}\n",
         "runner.yaml:3:30: frequency: kHz, at least 1"},
        {"devices: [{id: a}]\nbenchmarks:\n  x: {command: t, cooldown_below_c: hot}\n",
         "runner.yaml:3:37: cooldown_below_c: 'hot' is not degrees Celsius"},
        {"devices: [{id: a}]\nbenchmarks:\n  x: {command: t, cooldown_max_wait: soon}\n",
         "runner.yaml:3:38: "},
        {"devices: [{id: a}]\nbenchmarks:\n  x: {command: t, precision: 2%}\n",
         "runner.yaml:3:30: precision: '2%' is not a fraction between 0 and 1 (write e.g. 0.02"},
        {"devices: [{id: a}]\nbenchmarks:\n  x: {command: t, max_runs: 0}\n",
         "runner.yaml:3:29: max_runs must be at least 1"},
        {"devicez: []\n",
         "runner.yaml:1:1: unknown key 'devicez' in runner.yaml (known keys: coordinator, id, "
         "cache, cooldown, devices, benchmarks); did you mean 'devices'?"},
        {"devices: [{id: a, tagz: {d: x}}]\n",
         "runner.yaml:1:19: unknown key 'tagz' in device (known keys: id, tags, env, setup, check, "
         "reset, transport); did you mean 'tags'?"},
        {"devices: [{id: a}]\ncache: {colour: blue}\n",
         "runner.yaml:2:9: unknown key 'colour' in cache (known keys: dir, max_size, max_artifact, "
         "connect_timeout, timeout, retries)"},
        // Keys given twice, and a second document, are refused, not resolved.
        {"devices: [{id: a, tags: {d: x, d: y}}]\n",
         "runner.yaml:1:32: duplicate key 'd' (first written at 1:26"},
        {"devices: [{id: a}]\ndevices: [{id: b}]\n",
         "runner.yaml:2:1: duplicate key 'devices' (first written at 1:1"},
        {"devices: [{id: a}]\n---\ndevices: [{id: b}]\n",
         "runner.yaml:3:1: a second YAML document (a runner file is one document"},
        {"benchmarks: {}\n", "runner.yaml:1:1: no devices:"},
        {"devices: [{id: a}, {id: a}]\n", "runner.yaml:1:20: device id 'a' is given twice"},
        {"devices: [{tags: {d: x}}]\n", "runner.yaml:1:11: a device needs an id"},
        {"devices: [{id: a}]\nbenchmarks:\n  x: {command: t, timing: parse}\n",
         "runner.yaml:3:27: timing: parse needs a parse:"},
        {"devices: [{id: a}]\nbenchmarks:\n  x: {command: t, timing: parse, parse: {time: 'a('}}\n",
         "runner.yaml:3:48: parse.time: bad regex"},
        {"devices: [{id: a}]\nbenchmarks:\n  x: {command: t, timing: parse, parse: {time: 'a'}}\n",
         "the regex needs a group"},
        // Stacked and nested repetitions (regcomp's memory is exponential in them).
        {"devices: [{id: a}]\nbenchmarks:\n  x: {command: t, timing: parse, parse: "
         "{time: 'a++++++++++++++++++++++++++++++([0-9]+)'}}\n",
         "runner.yaml:3:48: parse.time: the regex repeats too much"},
        {"devices: [{id: a}]\nbenchmarks:\n  x: {command: t, timing: parse, parse: "
         "{time: '(((a{99}){99}){99})([0-9]+)'}}\n",
         "parse.time: the regex repeats too much"},
        {"devices: [{id: a}]\nbenchmarks:\n  x: {command: t, timing: parse, parse: "
         "{time: '(i?){3000}([0-9]+)'}}\n",
         "parse.time: the regex repeats too much"},
        // "{,m}" is glibc's "{0,m}" and "{n,}" is n copies and a star: both count.
        {"devices: [{id: a}]\nbenchmarks:\n  x: {command: t, timing: parse, parse: "
         "{time: '((a{,30}){,30}){,30}([0-9]+)'}}\n",
         "parse.time: the regex repeats too much"},
        {"devices: [{id: a}]\nbenchmarks:\n  x: {command: t, timing: parse, parse: "
         "{time: 'a{40,}{40,}([0-9]+)'}}\n",
         "parse.time: the regex repeats too much"},
        // Few atoms, but repetitions of a group that matches nothing, nested:
        // regcomp's epsilon closure never ended (fuzz_runcfg).
        {"devices: [{id: a}]\nbenchmarks:\n  x: {command: t, timing: parse, parse: "
         "{time: '((a{,0}){,30}){03,}([0-9]+)'}}\n",
         "parse.time: the regex repeats too much"},
        // Back-references make regexec exponential in the report's length.
        {"devices: [{id: a}]\nbenchmarks:\n  x: {command: t, timing: parse, parse: "
         "{time: '(a*)*\\1([0-9]+)'}}\n",
         "parse.time: back-references"},
        {"devices: [{id: a}]\nbenchmarks:\n  x: {command: t, timeout: soon}\n",
         "runner.yaml:3:28: timeout: 'soon' is not a duration"},
        {"devices: [{id: a}]\nbenchmarks:\n  x: {command: t, cpus: 1-0}\n",
         "cpus: '1-0' is not a CPU list"},
        {"devices: [{id: a}]\nbenchmarks:\n  x: {timing: per-run}\n",
         "runner.yaml:3:6: benchmark 'x' needs a command"},
        {"devices: [{id: a}]\nbenchmarks:\n  cpu-local: {command: t}\n",
         "takes no command, timing or parse"},
        {"devices: [{id: a}]\nbenchmarks:\n  x: {command: t, repeats: 0}\n",
         "repeats must be at least 1"},
        {"devices: [{id: a}]\nbenchmarks:\n  x: {command: t, min_time: 5s, max_time: 1s}\n",
         "min_time is longer than max_time"},
        {"devices: [{id: a}]\ncache: {max_size: lots}\n", "cache.max_size: 'lots' is not a size"},
        {"devices: [{id: a}]\ncache: {max_artifact: 0}\n", "cache.max_artifact: '0' is not a size"},
        {"devices: [{id: a}\n", "runner.yaml:2:1: "},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[512] = "";
        cgq_runcfg_t *c = s_parse (cases[i].text, err);
        if (c || !strstr (err, cases[i].want))
            fail_msg ("case %zu: got '%s', want '%s'", i, err, cases[i].want);
        cgq_runcfg_destroy (&c);
    }
}

// A hostile runner.yaml is refused as fast as a hostile spec, at the line
// and column where it crosses a limit (libyaml's document loader, which read
// runner.yaml before, stalled a coordinator for half a minute on a spec of
// 160 KB of '[').
static void
test_hostile (void **state)
{
    cgq_buf_t b;
    cgq_buf_init (&b);
    for (int i = 0; i < 160 * 1024; i++)
        cgq_buf_puts (&b, "[");
    char err[512] = "";
    int64_t t0 = cgq_thread_cpu_ms ();
    cgq_runcfg_t *c = cgq_runcfg_parse (b.data, b.len, "runner.yaml", err, sizeof err);
    assert_true (cgq_thread_cpu_ms () - t0 < 1000);
    assert_null (c);
    assert_string_equal (err, "runner.yaml:1:65: value nested more than 64 levels deep, counting "
                              "from the top of the runner file (flatten it)");

    // 1,000 levels, flow mappings and block mappings.
    cgq_buf_reset (&b);
    cgq_buf_puts (&b, "devices: ");
    for (int i = 0; i < 1000; i++)
        cgq_buf_puts (&b, "{a: ");
    for (int i = 0; i < 1000; i++)
        cgq_buf_puts (&b, "}");
    t0 = cgq_thread_cpu_ms ();
    c = cgq_runcfg_parse (b.data, b.len, "runner.yaml", err, sizeof err);
    assert_true (cgq_thread_cpu_ms () - t0 < 1000);
    assert_null (c);
    // The top mapping is level 1, the first "{a: " (1:10) level 2.
    assert_non_null (strstr (err, "runner.yaml:1:262: value nested more than 64 levels deep"));
    cgq_buf_reset (&b);
    for (int i = 0; i < 1000; i++)
        cgq_buf_printf (&b, "%*sa:\n", i, "");
    t0 = cgq_thread_cpu_ms ();
    c = cgq_runcfg_parse (b.data, b.len, "runner.yaml", err, sizeof err);
    assert_true (cgq_thread_cpu_ms () - t0 < 1000);
    assert_null (c);
    assert_non_null (strstr (err, "runner.yaml:65:65: value nested more than 64 levels deep"));

    // Past 1 MiB: refused before libyaml reads it; and a NUL byte.
    cgq_buf_reset (&b);
    while (b.len <= 1024 * 1024)
        cgq_buf_puts (&b, "# a runner.yaml is never this long, whatever its comments\n");
    c = cgq_runcfg_parse (b.data, b.len, "runner.yaml", err, sizeof err);
    assert_null (c);
    assert_non_null (strstr (err, "the runner file is longer than 1048576 bytes here"));
    c = cgq_runcfg_parse ("devices: [{id: a}]\n\0x", 21, "runner.yaml", err, sizeof err);
    assert_null (c);
    assert_non_null (strstr (err, "runner.yaml:2:1: runner file contains a NUL byte at byte 19"));
    cgq_buf_fini (&b);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_full),    cmocka_unit_test (test_builtin_always_there),
        cmocka_unit_test (test_errors),  cmocka_unit_test (test_regex_bound),
        cmocka_unit_test (test_hostile),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
