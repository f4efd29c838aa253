// config_test: precedence (default < file < env < flag), every value type,
// flag forms, positional arguments, the messages of every kind of error, and
// hostile config files refused at once.
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "util.h"

typedef struct {
    char *redis;
    char *bind;
    int64_t heartbeat_ms;
    int64_t dead_after;
    uint64_t max_frame;
    double cpus;
    bool log_json;
    bool verbose;
    char *format;
} t_cfg_t;

static const cgq_opt_t s_opts[] = {
    {"redis", 'r', CGQ_OPT_STRING, offsetof (t_cfg_t, redis), "redis://127.0.0.1:6379/0",
     "CGQT_REDIS", "Redis URL", 0, 0},
    {"bind", 0, CGQ_OPT_STRING, offsetof (t_cfg_t, bind), NULL, "CGQT_BIND", "node endpoint", 0, 0},
    {"heartbeat", 0, CGQ_OPT_DURATION_MS, offsetof (t_cfg_t, heartbeat_ms), "1s", "CGQT_HEARTBEAT",
     "heartbeat interval", 10, 60000},
    {"dead-after", 'd', CGQ_OPT_INT, offsetof (t_cfg_t, dead_after), "5", NULL,
     "missed heartbeats before a node is dead", 1, 1000},
    {"max-frame", 0, CGQ_OPT_BYTES, offsetof (t_cfg_t, max_frame), "4M", NULL, "largest frame", 0, 0},
    {"cpus", 0, CGQ_OPT_DOUBLE, offsetof (t_cfg_t, cpus), "1.5", "CGQT_CPUS", "CPU slots", 0, 0},
    {"log-json", 0, CGQ_OPT_BOOL, offsetof (t_cfg_t, log_json), NULL, "CGQT_LOG_JSON",
     "log JSON lines", 0, 0},
    {"verbose", 'v', CGQ_OPT_BOOL, offsetof (t_cfg_t, verbose), "false", NULL, "say more", 0, 0},
    {"format", 'f', CGQ_OPT_STRING, offsetof (t_cfg_t, format), "table", NULL, "output format", 0, 0},
    {NULL},
};

static const char *s_env_names[] = {"CGQT_REDIS", "CGQT_BIND", "CGQT_HEARTBEAT", "CGQT_CPUS",
                                    "CGQT_LOG_JSON"};

static char s_dir[64];
static char s_err[4096];
static char s_out[8192];

static int
s_setup (void **state)
{
    for (size_t i = 0; i < sizeof s_env_names / sizeof s_env_names[0]; i++)
        unsetenv (s_env_names[i]);
    return 0;
}

static int
s_group_setup (void **state)
{
    snprintf (s_dir, sizeof s_dir, "/tmp/cgq-config-test-XXXXXX");
    return mkdtemp (s_dir) ? 0 : -1;
}

static int
s_group_teardown (void **state)
{
    char cmd[128];
    snprintf (cmd, sizeof cmd, "rm -rf '%s'", s_dir);
    return system (cmd) == 0 ? 0 : -1;
}

static char *
s_write_file (const char *name, const char *text)
{
    char *path = cgq_xasprintf ("%s/%s", s_dir, name);
    FILE *f = fopen (path, "w");
    assert_non_null (f);
    fputs (text, f);
    fclose (f);
    return path;
}

// s_read_fd reads what was captured into path, into out.
static void
s_slurp (const char *path, char *out, size_t n)
{
    FILE *f = fopen (path, "r");
    size_t k = f ? fread (out, 1, n - 1, f) : 0;
    out[k] = 0;
    if (f)
        fclose (f);
}

// s_parse runs cgq_config_parse on a NULL-terminated argument list with
// stdout and stderr captured into s_out and s_err.
static int
s_parse_v (t_cfg_t *cfg, char **argv_out, int *argc_out, int *argi, const char *const *args)
{
    static char *argv[64];
    int argc = 0;
    argv[argc++] = "prog";
    for (; args[argc - 1]; argc++)
        argv[argc] = (char *) args[argc - 1];
    argv[argc] = NULL;
    char *outp = cgq_xasprintf ("%s/stdout", s_dir);
    char *errp = cgq_xasprintf ("%s/stderr", s_dir);
    fflush (stdout);
    fflush (stderr);
    int so = dup (1), se = dup (2);
    int fo = open (outp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int fe = open (errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2 (fo, 1);
    dup2 (fe, 2);
    memset (cfg, 0, sizeof *cfg);
    int rc = cgq_config_parse (s_opts, cfg, "prog", "[options] [JOB...]", argc, argv, argi);
    fflush (stdout);
    fflush (stderr);
    dup2 (so, 1);
    dup2 (se, 2);
    close (so);
    close (se);
    close (fo);
    close (fe);
    s_slurp (outp, s_out, sizeof s_out);
    s_slurp (errp, s_err, sizeof s_err);
    free (outp);
    free (errp);
    if (argv_out)
        for (int i = 0; i < argc; i++)
            argv_out[i] = argv[i];
    if (argc_out)
        *argc_out = argc;
    return rc;
}

#define S_ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define s_parse(cfg, ...) s_parse_v (cfg, NULL, NULL, NULL, S_ARGS (__VA_ARGS__))

static void
t_defaults (void **state)
{
    t_cfg_t c;
    int argi = -1;
    assert_int_equal (s_parse_v (&c, NULL, NULL, &argi, (const char *const[]){NULL}), 0);
    assert_int_equal (argi, 1);
    assert_string_equal (c.redis, "redis://127.0.0.1:6379/0");
    assert_null (c.bind);
    assert_int_equal (c.heartbeat_ms, 1000);
    assert_int_equal (c.dead_after, 5);
    assert_true (c.max_frame == 4u << 20);
    assert_true (c.cpus == 1.5);
    assert_false (c.log_json);
    assert_false (c.verbose);
    assert_string_equal (c.format, "table");
    assert_string_equal (s_err, "");
    cgq_config_free (s_opts, &c);
    assert_null (c.redis);
    assert_null (c.format);
    cgq_config_free (s_opts, &c); // twice is harmless
}

static void
t_env_over_default_flag_over_env (void **state)
{
    t_cfg_t c;
    setenv ("CGQT_REDIS", "redis://env:1/2", 1);
    setenv ("CGQT_HEARTBEAT", "250ms", 1);
    setenv ("CGQT_LOG_JSON", "yes", 1);
    setenv ("CGQT_CPUS", "", 1); // empty counts as unset
    assert_int_equal (s_parse (&c, "--heartbeat", "2s"), 0);
    assert_string_equal (c.redis, "redis://env:1/2");
    assert_int_equal (c.heartbeat_ms, 2000);
    assert_true (c.log_json);
    assert_true (c.cpus == 1.5);
    cgq_config_free (s_opts, &c);

    assert_int_equal (s_parse (&c, "--redis=redis://flag:3/4", "--log-json=false"), 0);
    assert_string_equal (c.redis, "redis://flag:3/4");
    assert_int_equal (c.heartbeat_ms, 250);
    assert_false (c.log_json);
    cgq_config_free (s_opts, &c);
}

static void
t_config_file (void **state)
{
    char *path = s_write_file ("ok.yaml", "# options\n"
                                          "redis: redis://file:9/1\n"
                                          "heartbeat: 3s\n"
                                          "dead_after: 7\n"
                                          "max-frame: 1G\n"
                                          "log-json: true\n"
                                          "bind: tcp://*:7000\n");
    t_cfg_t c;
    assert_int_equal (s_parse (&c, "--config", path), 0);
    assert_string_equal (c.redis, "redis://file:9/1");
    assert_int_equal (c.heartbeat_ms, 3000);
    assert_int_equal (c.dead_after, 7);
    assert_true (c.max_frame == 1ull << 30);
    assert_true (c.log_json);
    assert_string_equal (c.bind, "tcp://*:7000");
    cgq_config_free (s_opts, &c);

    // The environment beats the file, flags beat both, wherever --config is.
    setenv ("CGQT_REDIS", "redis://env:1/0", 1);
    char *arg = cgq_xasprintf ("--config=%s", path);
    assert_int_equal (s_parse (&c, "--heartbeat", "5s", arg), 0);
    assert_string_equal (c.redis, "redis://env:1/0");
    assert_int_equal (c.heartbeat_ms, 5000);
    assert_int_equal (c.dead_after, 7);
    cgq_config_free (s_opts, &c);
    free (arg);

    char *empty = s_write_file ("empty.yaml", "# nothing here\n");
    assert_int_equal (s_parse (&c, "--config", empty), 0);
    assert_string_equal (c.redis, "redis://env:1/0");
    cgq_config_free (s_opts, &c);
    free (empty);
    free (path);
}

static void
t_config_file_errors (void **state)
{
    t_cfg_t c;
    char *path = s_write_file ("bad1.yaml", "redis: redis://x:1/0\n  \nheartbat: 2s\n");
    assert_int_equal (s_parse (&c, "--config", path), -1);
    char *want = cgq_xasprintf (
        "%s:3:1: unknown option 'heartbat' (did you mean 'heartbeat'? see --help)\n", path);
    assert_string_equal (s_err, want);
    assert_null (c.redis); // freed on error
    free (want);
    free (path);

    path = s_write_file ("bad2.yaml", "redis: redis://x:1/0\nheartbeat:   5x\n");
    assert_int_equal (s_parse (&c, "--config", path), -1);
    want = cgq_xasprintf ("%s:2:14: heartbeat: '5x' is not a duration (write e.g. 500ms, 2s, 1m)\n",
                          path);
    assert_string_equal (s_err, want);
    free (want);
    free (path);

    path = s_write_file ("bad3.yaml", "redis: [a, b]\n");
    assert_int_equal (s_parse (&c, "--config", path), -1);
    assert_non_null (strstr (s_err, ":1:8: option 'redis' needs a single value"));
    free (path);

    path = s_write_file ("bad4.yaml", "redis: \"unterminated\n");
    assert_int_equal (s_parse (&c, "--config", path), -1);
    assert_non_null (strstr (s_err, path));
    assert_non_null (strstr (s_err, "quoted scalar"));
    free (path);

    path = s_write_file ("bad5.yaml", "- a\n- b\n");
    assert_int_equal (s_parse (&c, "--config", path), -1);
    assert_non_null (strstr (s_err, ":1:1: expected a mapping of option names"));
    free (path);

    path = s_write_file ("bad6.yaml", "dead-after: 0\n");
    assert_int_equal (s_parse (&c, "--config", path), -1);
    assert_non_null (strstr (s_err, ":1:13: dead-after: '0' must be between 1 and 1000"));
    free (path);

    assert_int_equal (s_parse (&c, "--config", "/nonexistent/cgq.yaml"), -1);
    assert_string_equal (s_err, "prog: cannot read config file '/nonexistent/cgq.yaml': No such "
                                "file or directory (check --config)\n");
    assert_int_equal (s_parse (&c, "--config"), -1);
    assert_non_null (strstr (s_err, "--config needs a value"));
}

// A config file goes through the spec's bounded reader: a hostile or broken
// file is refused at once, at its line and column, and a typo gets the option
// it most likely means.
static void
t_config_file_hostile (void **state)
{
    t_cfg_t c;
    // 160 KB of '[': libyaml's document loader, which read config files
    // before, works in proportion to the nesting for every token (as a spec,
    // this text stalled a coordinator for half a minute).
    cgq_buf_t b;
    cgq_buf_init (&b);
    for (int i = 0; i < 160 * 1024; i++)
        cgq_buf_puts (&b, "[");
    char *path = s_write_file ("brackets.yaml", b.data);
    int64_t t0 = cgq_thread_cpu_ms ();
    assert_int_equal (s_parse (&c, "--config", path), -1);
    assert_true (cgq_thread_cpu_ms () - t0 < 1000);
    char *want = cgq_xasprintf ("%s:1:65: value nested more than 64 levels deep, counting from "
                                "the top of the config file (flatten it)\n",
                                path);
    assert_string_equal (s_err, want);
    free (want);
    free (path);

    // 1,000 levels of block mappings: stopped at the 65th, line 65 column 65.
    cgq_buf_reset (&b);
    for (int i = 0; i < 1000; i++)
        cgq_buf_printf (&b, "%*sa:\n", i, "");
    path = s_write_file ("deep.yaml", b.data);
    t0 = cgq_thread_cpu_ms ();
    assert_int_equal (s_parse (&c, "--config", path), -1);
    assert_true (cgq_thread_cpu_ms () - t0 < 1000);
    assert_non_null (strstr (s_err, ":65:65: value nested more than 64 levels deep"));
    free (path);

    // Larger than any config file: refused before it is parsed.
    cgq_buf_reset (&b);
    while (b.len <= 1024 * 1024)
        cgq_buf_puts (&b, "# a long comment, line after line, that no config file has\n");
    path = s_write_file ("huge.yaml", b.data);
    assert_int_equal (s_parse (&c, "--config", path), -1);
    assert_non_null (strstr (s_err, "the config file is longer than 1048576 bytes here"));
    free (path);
    cgq_buf_fini (&b);

    // A key given twice, and a second document, which were silently
    // resolved (the last key won, the document was ignored).
    path = s_write_file ("dup.yaml", "redis: redis://a:1/0\nredis: redis://b:1/0\n");
    assert_int_equal (s_parse (&c, "--config", path), -1);
    assert_non_null (strstr (s_err, ":2:1: duplicate key 'redis' (first written at 1:1"));
    free (path);
    path = s_write_file ("two.yaml", "redis: redis://a:1/0\n---\nbind: tcp://*:1\n");
    assert_int_equal (s_parse (&c, "--config", path), -1);
    assert_non_null (strstr (s_err, ":3:1: a second YAML document"));
    free (path);

    // A typo gets the option it most likely means, written either way;
    // nothing near gets no guess.
    path = s_write_file ("typo.yaml", "dead_afer: 3\n");
    assert_int_equal (s_parse (&c, "--config", path), -1);
    assert_non_null (
        strstr (s_err, ":1:1: unknown option 'dead_afer' (did you mean 'dead-after'? see --help)"));
    free (path);
    path = s_write_file ("far.yaml", "colour: blue\n");
    assert_int_equal (s_parse (&c, "--config", path), -1);
    assert_non_null (strstr (s_err, ":1:1: unknown option 'colour' (see --help)"));
    free (path);
}

static void
t_flag_forms (void **state)
{
    t_cfg_t c;
    assert_int_equal (s_parse (&c, "-r", "redis://short:1/0", "-d", "9", "-v", "-fjson"), 0);
    assert_string_equal (c.redis, "redis://short:1/0");
    assert_int_equal (c.dead_after, 9);
    assert_true (c.verbose);
    assert_string_equal (c.format, "json");
    cgq_config_free (s_opts, &c);

    assert_int_equal (s_parse (&c, "--verbose", "--log-json", "--dead-after=12", "--cpus", "0.25",
                               "--max-frame", "512K", "--bind", ""),
                      0);
    assert_true (c.verbose);
    assert_true (c.log_json);
    assert_int_equal (c.dead_after, 12);
    assert_true (c.cpus == 0.25);
    assert_true (c.max_frame == 512u << 10);
    assert_string_equal (c.bind, "");
    cgq_config_free (s_opts, &c);

    // Booleans: explicit values, --no-NAME, and the last flag wins.
    setenv ("CGQT_LOG_JSON", "1", 1);
    assert_int_equal (s_parse (&c, "--no-log-json", "--verbose=yes", "--verbose=off"), 0);
    assert_false (c.log_json);
    assert_false (c.verbose);
    cgq_config_free (s_opts, &c);
    assert_int_equal (s_parse (&c, "--verbose=maybe"), -1);
    assert_string_equal (s_err, "prog: --verbose: 'maybe' is not a boolean (write true or false)\n");
}

static void
t_value_errors (void **state)
{
    t_cfg_t c;
    assert_int_equal (s_parse (&c, "--heartbeat", "5x"), -1);
    assert_string_equal (s_err,
                         "prog: --heartbeat: '5x' is not a duration (write e.g. 500ms, 2s, 1m)\n");
    assert_null (c.redis);
    assert_int_equal (s_parse (&c, "--heartbeat=5ms"), -1);
    assert_string_equal (s_err, "prog: --heartbeat: '5ms' must be between 10 and 60000 ms\n");
    assert_int_equal (s_parse (&c, "--heartbeat", "2m"), -1);
    assert_non_null (strstr (s_err, "must be between 10 and 60000"));
    assert_int_equal (s_parse (&c, "--heartbeat", "10ms"), 0); // bounds are inclusive
    assert_int_equal (c.heartbeat_ms, 10);
    cgq_config_free (s_opts, &c);
    assert_int_equal (s_parse (&c, "-d", "1001"), -1);
    assert_string_equal (s_err, "prog: -d: '1001' must be between 1 and 1000\n");
    assert_int_equal (s_parse (&c, "--dead-after", "3.5"), -1);
    assert_non_null (strstr (s_err, "'3.5' is not an integer"));
    assert_int_equal (s_parse (&c, "--max-frame", "4Q"), -1);
    assert_non_null (strstr (s_err, "'4Q' is not a size (write e.g. 512M, 4G, 1024)"));
    assert_int_equal (s_parse (&c, "--cpus", "two"), -1);
    assert_non_null (strstr (s_err, "--cpus: 'two' is not a number"));
    setenv ("CGQT_HEARTBEAT", "fast", 1);
    assert_int_equal (s_parse (&c, "--verbose"), -1);
    assert_string_equal (s_err,
                         "prog: CGQT_HEARTBEAT: 'fast' is not a duration (write e.g. 500ms, 2s, 1m)\n");
    // A good flag does not hide a bad variable: both are read.
    assert_int_equal (s_parse (&c, "--heartbeat", "1s"), -1);
    unsetenv ("CGQT_HEARTBEAT");
    assert_int_equal (s_parse (&c, "--redis"), -1);
    assert_string_equal (s_err, "prog: --redis needs a value (write --redis VALUE)\n");
}

static void
t_unknown_flag (void **state)
{
    t_cfg_t c;
    assert_int_equal (s_parse (&c, "--foo"), -1);
    assert_string_equal (s_err, "prog: unknown option '--foo' (see prog --help)\n");
    assert_int_equal (s_parse (&c, "--foo=bar"), -1);
    assert_string_equal (s_err, "prog: unknown option '--foo' (see prog --help)\n");
    assert_int_equal (s_parse (&c, "-x"), -1);
    assert_string_equal (s_err, "prog: unknown option '-x' (see prog --help)\n");
    assert_int_equal (s_parse (&c, "--no-format"), -1); // --no- only for booleans
    assert_null (c.redis);
}

static void
t_positional (void **state)
{
    t_cfg_t c;
    char *argv[64];
    int argc = 0, argi = 0;
    assert_int_equal (s_parse_v (&c, argv, &argc, &argi,
                                 S_ARGS ("results", "7", "--format", "csv", "-v", "-", "8", "-3",
                                         "--", "--not-a-flag", "-r")),
                      0);
    assert_string_equal (c.format, "csv");
    assert_true (c.verbose);
    assert_string_equal (c.redis, "redis://127.0.0.1:6379/0");
    assert_int_equal (argc - argi, 7);
    const char *want[] = {"results", "7", "-", "8", "-3", "--not-a-flag", "-r"};
    for (int i = 0; i < 7; i++)
        assert_string_equal (argv[argi + i], want[i]);
    assert_string_equal (argv[0], "prog");
    cgq_config_free (s_opts, &c);

    // A flag's separate value is not positional.
    assert_int_equal (s_parse_v (&c, argv, &argc, &argi, S_ARGS ("-f", "7", "x")), 0);
    assert_int_equal (argc - argi, 1);
    assert_string_equal (argv[argi], "x");
    assert_string_equal (c.format, "7");
    cgq_config_free (s_opts, &c);
}

static void
t_help (void **state)
{
    t_cfg_t c;
    setenv ("CGQT_HEARTBEAT", "bad", 1); // --help works even with a bad environment
    assert_int_equal (s_parse (&c, "--redis", "x", "--help"), 1);
    unsetenv ("CGQT_HEARTBEAT");
    assert_null (c.redis);
    assert_string_equal (s_err, "");
    assert_int_equal (strncmp (s_out, "usage: prog [options] [JOB...]\n", 31), 0);
    const char *must[] = {"-r, --redis VALUE", "CGQT_REDIS", "redis://127.0.0.1:6379/0",
                          "Redis URL", "--heartbeat DUR", "60000", "--dead-after N",
                          "--max-frame BYTES", "4M", "--log-json ", "--config FILE",
                          "-h, --help", "heartbeat interval"};
    for (size_t i = 0; i < sizeof must / sizeof must[0]; i++)
        if (!strstr (s_out, must[i]))
            fail_msg ("help lacks '%s':\n%s", must[i], s_out);
    // One line per option: the default of --redis is on the line of --redis.
    const char *line = strstr (s_out, "--redis VALUE");
    const char *eol = strchr (line, '\n');
    const char *def = strstr (line, "redis://127.0.0.1:6379/0");
    assert_true (def && def < eol);
    assert_int_equal (s_parse (&c, "-h"), 1);
    assert_non_null (strstr (s_out, "usage: prog"));
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup (t_defaults, s_setup),
        cmocka_unit_test_setup (t_env_over_default_flag_over_env, s_setup),
        cmocka_unit_test_setup (t_config_file, s_setup),
        cmocka_unit_test_setup (t_config_file_errors, s_setup),
        cmocka_unit_test_setup (t_config_file_hostile, s_setup),
        cmocka_unit_test_setup (t_flag_forms, s_setup),
        cmocka_unit_test_setup (t_value_errors, s_setup),
        cmocka_unit_test_setup (t_unknown_flag, s_setup),
        cmocka_unit_test_setup (t_positional, s_setup),
        cmocka_unit_test_setup (t_help, s_setup),
    };
    return cmocka_run_group_tests (tests, s_group_setup, s_group_teardown);
}
