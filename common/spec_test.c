// spec_test: the parser of tune.yaml. A full spec parses into every field;
// each class of mistake is reported at its exact line:col with a message that
// says what to write instead.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "space.h"
#include "spec.h"
#include "template.h"
#include "util.h"

static const char *s_full =
    "name: cg-predictor\n"
    "space:\n"
    "  lr:      {loguniform: [1.0e-4, 1.0e-1]}\n"
    "  hidden:  {choice: [64, 128, 256]}\n"
    "  layers:  {randint: [2, 6]}          # inclusive bounds\n"
    "  dropout: {uniform: [0.0, 0.5]}\n"
    "  batch:   {grid: [32, 64]}\n"
    "  gnn: GATv2Conv\n"
    "  opts: {value: {a: 1, b: [true, null, 2.5]}}\n"
    "  flag: yes\n"
    "  quoted: \"64\"\n"
    "search:   {algorithm: random, samples: 64, concurrency: 8, seed: 1}\n"
    "objective: {metric: val_srcc, mode: max}\n"
    "trial:\n"
    "  command: python3 train.py --lr {lr} --hidden {hidden} --out {spec_dir}/t{trial_id}\n"
    "  resources: {cpu: 2, gpu: 0.5, memory: 4G}\n"
    "  timeout: 30m\n"
    "  retries: 2\n"
    "  env: {DATA_DIR: /data/cg, TAG: \"job-{job_id}-{{x}}\"}\n";

static void
t_full (void **state)
{
    char err[512];
    cgq_spec_t *s = cgq_spec_parse (s_full, strlen (s_full), "dir/tune.yaml", err, sizeof err);
    assert_non_null (s);
    assert_string_equal (s->name, "cg-predictor");
    assert_string_equal (s->path, "dir/tune.yaml");
    assert_string_equal (s->text, s_full);
    assert_int_equal (s->nparams, 9);

    const cgq_param_t *p = cgq_spec_param (s, "lr");
    assert_non_null (p);
    assert_int_equal (p->kind, CGQ_PARAM_LOGUNIFORM);
    assert_true (p->lo == 1.0e-4 && p->hi == 1.0e-1);
    assert_int_equal (p->line, 3);
    assert_int_equal (p->col, 3);

    p = cgq_spec_param (s, "hidden");
    assert_int_equal (p->kind, CGQ_PARAM_CHOICE);
    assert_int_equal (json_array_size (p->values), 3);
    assert_int_equal (json_integer_value (json_array_get (p->values, 2)), 256);

    p = cgq_spec_param (s, "layers");
    assert_int_equal (p->kind, CGQ_PARAM_RANDINT);
    assert_true (p->lo == 2 && p->hi == 6);

    p = cgq_spec_param (s, "dropout");
    assert_int_equal (p->kind, CGQ_PARAM_UNIFORM);
    assert_true (p->lo == 0.0 && p->hi == 0.5);

    p = cgq_spec_param (s, "batch");
    assert_int_equal (p->kind, CGQ_PARAM_GRID);
    assert_int_equal (json_integer_value (json_array_get (p->values, 1)), 64);

    p = cgq_spec_param (s, "gnn");
    assert_int_equal (p->kind, CGQ_PARAM_CONST);
    assert_string_equal (json_string_value (p->value), "GATv2Conv");

    p = cgq_spec_param (s, "opts");
    assert_int_equal (p->kind, CGQ_PARAM_CONST);
    char *dump = json_dumps (p->value, JSON_COMPACT);
    assert_string_equal (dump, "{\"a\":1,\"b\":[true,null,2.5]}");
    free (dump);

    assert_true (json_is_true (cgq_spec_param (s, "flag")->value));
    assert_string_equal (json_string_value (cgq_spec_param (s, "quoted")->value), "64");
    assert_null (cgq_spec_param (s, "nope"));
    // Params keep the order written.
    assert_string_equal (s->params[0].name, "lr");
    assert_string_equal (s->params[8].name, "quoted");

    assert_int_equal (s->search.algorithm, CGQ_SEARCH_RANDOM);
    assert_int_equal (s->search.samples, 64);
    assert_int_equal (s->search.concurrency, 8);
    assert_int_equal (s->search.seed, 1);
    assert_string_equal (s->objective.metric, "val_srcc");
    assert_int_equal (s->objective.mode, 1);

    assert_int_equal (s->trial.kind, CGQ_TRIAL_COMMAND);
    assert_string_equal (
        s->trial.command,
        "python3 train.py --lr {lr} --hidden {hidden} --out {spec_dir}/t{trial_id}");
    assert_null (s->trial.argv);
    assert_int_equal (s->trial.argc, 0);
    assert_true (s->trial.cpu == 2);
    assert_true (s->trial.gpu == 0.5);
    assert_int_equal (s->trial.memory, 4ULL << 30);
    assert_true (s->trial.timeout_s == 1800);
    assert_int_equal (s->trial.retries, 2);
    assert_int_equal (s->trial.nenv, 2);
    assert_string_equal (s->trial.env_keys[0], "DATA_DIR");
    assert_string_equal (s->trial.env_vals[0], "/data/cg");
    assert_string_equal (s->trial.env_keys[1], "TAG");
    assert_string_equal (s->trial.env_vals[1], "job-{job_id}-{{x}}");

    char *out = NULL;
    size_t outlen = 0;
    FILE *f = open_memstream (&out, &outlen);
    cgq_spec_describe (s, f);
    fclose (f);
    assert_non_null (strstr (out, "job: cg-predictor (dir/tune.yaml)"));
    assert_non_null (strstr (out, "loguniform [0.0001, 0.1]"));
    assert_non_null (strstr (out, "randint [2, 6]"));
    assert_non_null (strstr (out, "maximize val_srcc"));
    assert_non_null (strstr (out, "memory 4 GiB"));
    assert_non_null (strstr (out, "trials: 128 (2 grid point(s) x 64)"));
    free (out);
    cgq_spec_destroy (&s);
    assert_null (s);
    cgq_spec_destroy (&s); // NULL-safe
}

static void
t_defaults (void **state)
{
    const char *y = "trial: {command: [python3, train.py, \"--lr={lr}\", 64]}\n"
                    "space: {lr: {uniform: [0, 1]}}\n";
    char err[512];
    cgq_spec_t *s = cgq_spec_parse (y, strlen (y), "/a/b/my-job.yml", err, sizeof err);
    assert_non_null (s);
    assert_string_equal (s->name, "my-job");
    assert_int_equal (s->search.algorithm, CGQ_SEARCH_RANDOM);
    assert_int_equal (s->search.samples, 1);
    assert_int_equal (s->search.concurrency, 0);
    assert_int_equal (s->search.seed, 0);
    assert_int_equal (s->search.fail_fast, CGQ_SPEC_FAIL_FAST);
    assert_int_equal (CGQ_SPEC_FAIL_FAST, 5);
    assert_null (s->objective.metric);
    assert_null (s->trial.command);
    assert_int_equal (s->trial.argc, 4);
    assert_string_equal (s->trial.argv[2], "--lr={lr}");
    assert_string_equal (s->trial.argv[3], "64");
    assert_true (s->trial.cpu == 1);
    assert_true (s->trial.gpu == 0);
    assert_int_equal (s->trial.memory, 0);
    assert_true (s->trial.timeout_s == 0);
    assert_int_equal (s->trial.retries, 0);
    assert_int_equal (s->trial.nenv, 0);
    cgq_spec_destroy (&s);

    y = "trial: {kind: noop, timeout: 90}\nsearch: {algorithm: grid}\n";
    s = cgq_spec_parse (y, strlen (y), "x", err, sizeof err);
    assert_non_null (s);
    assert_string_equal (s->name, "x");
    assert_int_equal (s->trial.kind, CGQ_TRIAL_NOOP);
    assert_int_equal (s->search.algorithm, CGQ_SEARCH_GRID);
    assert_true (s->trial.timeout_s == 90);
    assert_int_equal (s->nparams, 0);
    cgq_spec_destroy (&s);

    s = cgq_spec_parse (y, strlen (y), NULL, err, sizeof err);
    assert_non_null (s);
    assert_string_equal (s->name, "job");
    cgq_spec_destroy (&s);
}

// Scalars read as YAML 1.1 does; quoted ones are always strings.
static void
t_scalar_types (void **state)
{
    const char *y = "space:\n"
                    "  a: 64\n  b: 1.0e-4\n  c: true\n  d: ~\n  e: '1.5'\n  f: 0x10\n"
                    "  g: -3\n  h: 1e-3\n  i: 1_000\n  j: off\n  k: .5\n  l: 1.2.3\n"
                    "  m: [1, two, 3.0]\n  n: 99999999999999999999\n"
                    "trial: {kind: noop}\n";
    char err[512];
    cgq_spec_t *s = cgq_spec_parse (y, strlen (y), "t.yaml", err, sizeof err);
    assert_non_null (s);
    assert_true (json_is_integer (cgq_spec_param (s, "a")->value));
    assert_int_equal (json_integer_value (cgq_spec_param (s, "a")->value), 64);
    assert_true (json_is_real (cgq_spec_param (s, "b")->value));
    assert_true (json_real_value (cgq_spec_param (s, "b")->value) == 1.0e-4);
    assert_true (json_is_true (cgq_spec_param (s, "c")->value));
    assert_true (json_is_null (cgq_spec_param (s, "d")->value));
    assert_string_equal (json_string_value (cgq_spec_param (s, "e")->value), "1.5");
    assert_int_equal (json_integer_value (cgq_spec_param (s, "f")->value), 16);
    assert_int_equal (json_integer_value (cgq_spec_param (s, "g")->value), -3);
    assert_true (json_real_value (cgq_spec_param (s, "h")->value) == 1e-3);
    assert_int_equal (json_integer_value (cgq_spec_param (s, "i")->value), 1000);
    assert_true (json_is_false (cgq_spec_param (s, "j")->value));
    assert_true (json_real_value (cgq_spec_param (s, "k")->value) == 0.5);
    assert_string_equal (json_string_value (cgq_spec_param (s, "l")->value), "1.2.3");
    char *dump = json_dumps (cgq_spec_param (s, "m")->value, JSON_COMPACT);
    assert_string_equal (dump, "[1,\"two\",3.0]");
    free (dump);
    assert_true (json_is_real (cgq_spec_param (s, "n")->value));
    cgq_spec_destroy (&s);
}

// s_expect_error parses y and checks that it fails at "t.yaml:LINE:COL: " with
// a message that holds fragment.
static void
s_expect_error (const char *y, int line, int col, const char *fragment)
{
    char err[1024] = "";
    cgq_spec_t *s = cgq_spec_parse (y, strlen (y), "t.yaml", err, sizeof err);
    if (s)
        fail_msg ("parsed without error: %s", y);
    char prefix[64];
    snprintf (prefix, sizeof prefix, "t.yaml:%d:%d: ", line, col);
    if (strncmp (err, prefix, strlen (prefix)) != 0 || !strstr (err, fragment))
        fail_msg ("expected '%s...%s', got '%s'", prefix, fragment, err);
}

#define TRIAL "trial: {command: ./run}\n"

// notify: {url, on}: what is kept, the default events, and each error at its
// line and column.
static void
t_notify (void **state)
{
    const char *y = TRIAL "notify: {url: 'http://127.0.0.1:9/hook', on: [failed, cancelled]}\n";
    char err[512] = "";
    cgq_spec_t *s = cgq_spec_parse (y, strlen (y), "t.yaml", err, sizeof err);
    assert_non_null (s);
    assert_string_equal (s->notify.url, "http://127.0.0.1:9/hook");
    assert_int_equal (s->notify.on, CGQ_NOTIFY_FAILED | CGQ_NOTIFY_CANCELLED);
    cgq_spec_destroy (&s);
    y = TRIAL "notify:\n  url: https://hooks.example/x\n";
    s = cgq_spec_parse (y, strlen (y), "t.yaml", err, sizeof err);
    assert_non_null (s);
    assert_int_equal (s->notify.on, CGQ_NOTIFY_FINISHED | CGQ_NOTIFY_FAILED);
    assert_string_equal (cgq_notify_event_name (CGQ_NOTIFY_CANCELLED), "cancelled");
    cgq_spec_destroy (&s);
    y = TRIAL;
    s = cgq_spec_parse (y, strlen (y), "t.yaml", err, sizeof err);
    assert_null (s->notify.url);
    cgq_spec_destroy (&s);

    s_expect_error (TRIAL "notify: {url: 'ftp://x/y'}\n", 2, 15,
                    "notify.url 'ftp://x/y' is not an http:// or https:// URL");
    s_expect_error (TRIAL "notify: {url: 'http:///y'}\n", 2, 15, "has no host");
    s_expect_error (TRIAL "notify:\n  url: http://h/\n  on: [finished, done]\n", 4, 18,
                    "unknown notify event 'done' (expected one of: finished, failed, cancelled)");
    s_expect_error (TRIAL "notify: {on: [failed]}\n", 2, 1, "notify.url is missing");
    s_expect_error (TRIAL "notify: {url: 'http://h/', when: [failed]}\n", 2, 28,
                    "unknown key 'when' in notify (known keys: url, on)");
    s_expect_error (TRIAL "notify: {url: 'http://h/', on: []}\n", 2, 32, "notify.on is empty");
    s_expect_error (TRIAL "notify: http://h/\n", 2, 9, "notify");
}

// checkpoint: {store, keep, resume}: the defaults, a store under
// {spec_dir} (a relative one too), resume's forms, and the errors.
static void
t_checkpoint (void **state)
{
    char err[512] = "";
    const char *y = TRIAL;
    cgq_spec_t *s = cgq_spec_parse (y, strlen (y), "t.yaml", err, sizeof err);
    assert_non_null (s);
    assert_null (s->checkpoint.store);
    assert_int_equal (s->checkpoint.keep, 1);
    assert_int_equal (s->checkpoint.resume, CGQ_RESUME_LOST | CGQ_RESUME_FAILED);
    cgq_spec_destroy (&s);
    y = TRIAL "checkpoint: {store: /shared/ckpt, keep: 3, resume: true}\n";
    s = cgq_spec_parse (y, strlen (y), "t.yaml", err, sizeof err);
    assert_non_null (s);
    assert_string_equal (s->checkpoint.store, "/shared/ckpt");
    assert_int_equal (s->checkpoint.keep, 3);
    assert_int_equal (s->checkpoint.resume,
                      CGQ_RESUME_LOST | CGQ_RESUME_FAILED | CGQ_RESUME_TIMEOUT);
    cgq_spec_destroy (&s);
    y = TRIAL "checkpoint:\n  store: ckpt/{job_id}\n  resume: [timeout]\n";
    s = cgq_spec_parse (y, strlen (y), "t.yaml", err, sizeof err);
    assert_non_null (s);
    assert_string_equal (s->checkpoint.store, "{spec_dir}/ckpt/{job_id}");
    assert_int_equal (s->checkpoint.resume, CGQ_RESUME_TIMEOUT);
    cgq_spec_destroy (&s);
    y = TRIAL "checkpoint: {store: '{spec_dir}/c', resume: false}\n";
    s = cgq_spec_parse (y, strlen (y), "t.yaml", err, sizeof err);
    assert_non_null (s);
    assert_string_equal (s->checkpoint.store, "{spec_dir}/c");
    assert_int_equal (s->checkpoint.resume, 0);
    cgq_spec_destroy (&s);

    s_expect_error (TRIAL "checkpoint: {keep: 0}\n", 2, 20, "checkpoint.keep");
    s_expect_error (TRIAL "checkpoint: {resume: [lost, crashed]}\n", 2, 29,
                    "unknown checkpoint.resume end 'crashed' (expected one of: lost, failed, "
                    "timeout; or true, false)");
    s_expect_error (TRIAL "checkpoint: {store: '/c/{lr}'}\n", 2, 21, "'{lr}' is not one of {spec_dir}, {job_id}");
    s_expect_error (TRIAL "checkpoint: {store: '/c/{trial_id}'}\n", 2, 21,
                    "names {trial_id}");
    s_expect_error (TRIAL "checkpoint: {stor: /c}\n", 2, 14,
                    "unknown key 'stor' in checkpoint (known keys: store, keep, resume); did you "
                    "mean 'store'?");
    s_expect_error (TRIAL "checkpoint: /c\n", 2, 13, "checkpoint must be a mapping");
    // An HTTP(S) store: kept as written (no {spec_dir}/ before it); a URL
    // with a user, a query or no host, or another scheme, is refused.
    {
        const char *hy = TRIAL "checkpoint: {store: 'https://s3.lab:8443/b'}\n";
        char herr[1024] = "";
        cgq_spec_t *hs = cgq_spec_parse (hy, strlen (hy), "t.yaml", herr, sizeof herr);
        assert_non_null (hs);
        assert_string_equal (hs->checkpoint.store, "https://s3.lab:8443/b");
        cgq_spec_destroy (&hs);
    }
    s_expect_error (TRIAL "checkpoint: {store: 'ftp://s3/b'}\n", 2, 21,
                    "only http:// and https:// stores are built");
    s_expect_error (TRIAL "checkpoint: {store: 'http://u:pw@s3/b'}\n", 2, 21,
                    "is not a store URL");
    s_expect_error (TRIAL "checkpoint: {store: 'http:///b'}\n", 2, 21, "is not a store URL");
    s_expect_error (TRIAL "checkpoint: {store: 'http://h/b?x=1'}\n", 2, 21, "is not a store URL");
}

static void
t_err_syntax (void **state)
{
    s_expect_error ("space:\n  lr: [1, 2\ntrial: x\n", 3, 6, "YAML syntax error");
    s_expect_error ("a: 'unterminated\n", 2, 1, "YAML syntax error");
    s_expect_error ("space:\n\ta: 1\n" TRIAL, 2, 1, "indent with spaces: YAML does not allow tabs");
}

// Aliases can make a small file expand into a huge or cyclic value; both are
// refused quickly instead of exhausting memory.
static void
t_err_limits (void **state)
{
    cgq_buf_t b;
    cgq_buf_init (&b);
    cgq_buf_puts (&b, TRIAL "space:\n  a: &a [x, x, x, x, x, x, x, x, x, x]\n");
    for (char n = 'b'; n <= 'j'; n++)
        cgq_buf_printf (&b, "  %c: &%c [*%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c]\n", n, n,
                        n - 1, n - 1, n - 1, n - 1, n - 1, n - 1, n - 1, n - 1, n - 1, n - 1);
    int64_t t0 = cgq_thread_cpu_ms ();
    s_expect_error (b.data, 8, 6, "the values of the spec have more than 200000 elements");
    assert_true (cgq_thread_cpu_ms () - t0 < 5000);
    cgq_buf_fini (&b);
    s_expect_error (TRIAL "space:\n  a: &x [1, *x]\n", 3, 10, "nested more than 64 levels deep");
    s_expect_error (TRIAL "space:\n  a: \"x\\0y\"\n", 3, 6, "NUL byte");
}

// s_expect_error_n is s_expect_error for text of len bytes, which may hold NULs.
static void
s_expect_error_n (const char *y, size_t len, int line, int col, const char *fragment)
{
    char err[1024] = "";
    cgq_spec_t *s = cgq_spec_parse (y, len, "t.yaml", err, sizeof err);
    if (s) {
        cgq_spec_destroy (&s);
        fail_msg ("parsed without error: %.200s", y);
    }
    char prefix[64];
    snprintf (prefix, sizeof prefix, "t.yaml:%d:%d: ", line, col);
    if (strncmp (err, prefix, strlen (prefix)) != 0 || !strstr (err, fragment))
        fail_msg ("expected '%s...%s', got '%s'", prefix, fragment, err);
}

// s_nest writes TRIAL, then line 2: "space: {a: [[[...]]]}" with levels lists
// (open "["), or "space: {a: {a: ...}}" with levels mappings (open "{a: ").
static void
s_nest (cgq_buf_t *b, const char *open, size_t levels)
{
    bool list = open[0] == '[';
    cgq_buf_reset (b);
    cgq_buf_puts (b, TRIAL "space: ");
    if (list)
        cgq_buf_puts (b, "{a: ");
    for (size_t i = 0; i < levels; i++)
        cgq_buf_puts (b, open);
    for (size_t i = 0; i < levels; i++)
        cgq_buf_puts (b, list ? "]" : "}");
    cgq_buf_puts (b, list ? "}\n" : "\n");
}

// A deeply nested flow value once stalled the coordinator for 36 s: libyaml's
// loader and scanner do work proportional to the nesting for every token.
// The parser stops at the 65th level, at its line:col, whatever follows.
static void
t_err_deep_flow (void **state)
{
    cgq_buf_t b;
    cgq_buf_init (&b);
    const size_t levels[] = {65, 40000, 100000};
    for (size_t i = 0; i < sizeof levels / sizeof *levels; i++) {
        // Level 1 is the top mapping and the '{' at 2:8 level 2, so the
        // first '[', at 2:12, is level 3 and the 65th level 62 columns on.
        s_nest (&b, "[", levels[i]);
        if (levels[i] >= 80000)
            assert_true (b.len > 160000);
        int64_t t0 = cgq_thread_cpu_ms ();
        s_expect_error (b.data, 2, 12 + 62, "value nested more than 64 levels deep");
        assert_true (cgq_thread_cpu_ms () - t0 < 500);

        s_nest (&b, "{a: ", levels[i]);
        if (levels[i] >= 40000)
            assert_true (b.len > 160000);
        t0 = cgq_thread_cpu_ms ();
        // The first "{a: " at 2:8 is level 2; the 65th level is 63 further.
        s_expect_error (b.data, 2, 8 + 63 * 4, "value nested more than 64 levels deep");
        assert_true (cgq_thread_cpu_ms () - t0 < 500);
    }
    // Block nesting is counted the same way: the 65th mapping starts at line
    // 65, column 65.
    cgq_buf_reset (&b);
    cgq_buf_puts (&b, "a:\n");
    for (int i = 1; i < 100; i++)
        cgq_buf_printf (&b, "%*sa:\n", i, "");
    s_expect_error (b.data, 65, 65, "value nested more than 64 levels deep");
    cgq_buf_fini (&b);
}

// Just under every limit parses: 64 levels, CGQ_SPEC_MAX_BYTES bytes.
static void
t_limits_just_under (void **state)
{
    cgq_buf_t b;
    cgq_buf_init (&b);
    s_nest (&b, "[", 62); // the top, {a: ...} and 62 lists: 64 levels
    char err[512] = "";
    cgq_spec_t *s = cgq_spec_parse (b.data, b.len, "t.yaml", err, sizeof err);
    if (!s)
        fail_msg ("%s", err);
    cgq_spec_destroy (&s);

    // Pad to exactly the limit with a comment, then one byte more.
    b.len--; // the newline
    cgq_buf_puts (&b, " # ");
    while (b.len < CGQ_SPEC_MAX_BYTES - 1)
        cgq_buf_puts (&b, "x");
    cgq_buf_puts (&b, "\n");
    assert_int_equal (b.len, CGQ_SPEC_MAX_BYTES);
    int64_t t0 = cgq_thread_cpu_ms ();
    s = cgq_spec_parse (b.data, b.len, "t.yaml", err, sizeof err);
    if (!s)
        fail_msg ("%s", err);
    assert_true (cgq_thread_cpu_ms () - t0 < 2000);
    assert_int_equal (s->nparams, 1);
    cgq_spec_destroy (&s);

    cgq_buf_puts (&b, "#");
    char msg[128];
    snprintf (msg, sizeof msg, "the spec is longer than %lu bytes here",
              (unsigned long) CGQ_SPEC_MAX_BYTES);
    // Byte CGQ_SPEC_MAX_BYTES is the '#' at the start of line 3.
    s_expect_error (b.data, 3, 1, msg);

    // cgq_spec_load reads no more than it needs to refuse a file.
    char path[] = "/tmp/cgq-spec-test-XXXXXX.yaml";
    int fd = mkstemps (path, 5);
    assert_true (fd >= 0);
    FILE *f = fdopen (fd, "w");
    fwrite (b.data, 1, b.len, f);
    for (int i = 0; i < 3 * 1024 * 1024 / 64; i++)
        fputs ("# padding padding padding padding padding padding padding pad\n", f);
    fclose (f);
    s = cgq_spec_load (path, err, sizeof err);
    unlink (path);
    assert_null (s);
    assert_non_null (strstr (err, msg));
    cgq_buf_fini (&b);
}

// Many wide flows at small depth are linear work.
static void
t_limits_wide (void **state)
{
    cgq_buf_t b;
    cgq_buf_init (&b);
    cgq_buf_puts (&b, TRIAL "space:\n  c: {choice: [");
    for (int i = 0; i < 50000; i++)
        cgq_buf_printf (&b, "%s%d", i ? ", " : "", i);
    cgq_buf_puts (&b, "]}\n  k: [");
    for (int i = 0; i < 50000; i++)
        cgq_buf_printf (&b, "%sv%d", i ? "," : "", i);
    cgq_buf_puts (&b, "]\n  m: {value: {");
    for (int i = 0; i < 20000; i++)
        cgq_buf_printf (&b, "%sk%d: %d", i ? ", " : "", i, i);
    cgq_buf_puts (&b, "}}\n");
    assert_true (b.len < CGQ_SPEC_MAX_BYTES);
    char err[512] = "";
    int64_t t0 = cgq_thread_cpu_ms ();
    cgq_spec_t *s = cgq_spec_parse (b.data, b.len, "t.yaml", err, sizeof err);
    int64_t ms = cgq_thread_cpu_ms () - t0;
    if (!s)
        fail_msg ("%s", err);
    assert_int_equal (json_array_size (cgq_spec_param (s, "c")->values), 50000);
    assert_int_equal (json_array_size (cgq_spec_param (s, "k")->value), 50000);
    assert_int_equal (json_object_size (cgq_spec_param (s, "m")->value), 20000);
    assert_true (ms < 1500);
    cgq_spec_destroy (&s);
    cgq_buf_fini (&b);
}

// A NUL byte used to end the text early: "samples: 100" after it was ignored.
static void
t_err_nul (void **state)
{
    const char y[] = TRIAL "space:\n  a: 1\0\nsearch: {samples: 100}\n";
    s_expect_error_n (y, sizeof y - 1, 3, 7, "spec contains a NUL byte at byte 37");
    const char z[] = "\0";
    s_expect_error_n (z, 1, 1, 1, "spec contains a NUL byte at byte 0");
    // Columns count characters, as libyaml's do: "é" is two bytes.
    const char u[] = TRIAL "name: \xc3\xa9t\xc3\xa9\0\n";
    s_expect_error_n (u, sizeof u - 1, 2, 10, "NUL byte");
}

static void
t_err_anchors (void **state)
{
    s_expect_error (TRIAL "space:\n  a: *nope\n", 3, 6, "unknown alias '*nope'");
    s_expect_error (TRIAL "space:\n  a: &x 1\n  b: &x 2\n", 4, 6,
                    "duplicate anchor '&x' (first written at 3:6");
    // Aliases still work as before.
    const char *y = TRIAL "space:\n  a: &v [1, 2]\n  b: {choice: *v}\n  c: {value: *v}\n";
    char err[512] = "";
    cgq_spec_t *s = cgq_spec_parse (y, strlen (y), "t.yaml", err, sizeof err);
    if (!s)
        fail_msg ("%s", err);
    assert_int_equal (json_array_size (cgq_spec_param (s, "b")->values), 2);
    assert_int_equal (cgq_spec_param (s, "c")->kind, CGQ_PARAM_CONST);
    cgq_spec_destroy (&s);
}

static void
t_err_top (void **state)
{
    s_expect_error ("", 1, 1, "the spec is empty");
    s_expect_error ("# only a comment\n", 1, 1, "the spec is empty");
    s_expect_error ("- a\n- b\n", 1, 1, "must be a mapping");
    s_expect_error ("just text\n", 1, 1, "must be a mapping");
    s_expect_error (TRIAL "serch: {samples: 3}\n", 2, 1,
                    "unknown key 'serch' in the spec (known keys: name, space, search, objective, "
                    "objectives, constraints, early_stop, trial, notify, checkpoint, blocked_timeout); did you mean "
                    "'search'?");
    s_expect_error (TRIAL "---\nname: x\n", 3, 1, "second YAML document");
}

static void
t_err_nested_key (void **state)
{
    s_expect_error (
        TRIAL "search:\n  samples: 3\n  samplez: 4\n", 4, 3,
        "unknown key 'samplez' in search (known keys: algorithm, samples, concurrency, seed, fail_fast); "
        "did you mean 'samples'?");
    s_expect_error ("trial: {command: x, resources: {cpus: 2}}\n", 1, 33,
                    "unknown key 'cpus' in trial.resources");
    s_expect_error ("trial: {command: x, resources: {cpus: 2}}\n", 1, 33, "did you mean 'cpu'?");
    s_expect_error (TRIAL "objective: {metric: a, mode: max, expr: b}\n", 2, 35,
                    "objective has both metric and expr");
}

static void
t_err_wrong_type (void **state)
{
    s_expect_error (TRIAL "search:\n  samples: \"many\"\n", 3, 12,
                    "search.samples must be an integer >= 1, not the string 'many'");
    s_expect_error (TRIAL "search: [1, 2]\n", 2, 9, "search must be a mapping, not a list");
    s_expect_error (TRIAL "space:\n  a: {choice: {x: 1}}\n", 3, 15,
                    "choice of space.a must be a list, not a mapping");
    s_expect_error ("trial: {command: {a: 1}}\n", 1, 18,
                    "trial.command must be a string, not a mapping");
    s_expect_error (TRIAL "search: {seed: 1.5}\n", 2, 16,
                    "search.seed must be an integer >= 0, not the number 1.5");
    s_expect_error ("trial: {command: x, retries: -1}\n", 1, 30,
                    "trial.retries must be an integer >= 0, not -1");    s_expect_error (TRIAL "search: {fail_fast: -1}\n", 2, 21,
                    "search.fail_fast must be an integer >= 0, not -1");
    s_expect_error (TRIAL "search: {fail_fats: 3}\n", 2, 10,
                    "unknown key 'fail_fats' in search");
}

// blocked_timeout: a duration, 0 or never (forever); 10m unless given;
// anything else is an error at its line and column.
static void
t_blocked_timeout (void **state)
{
    (void) state;
    const struct {
        const char *v;
        double want;
    } ok[] = {{NULL, CGQ_SPEC_BLOCKED_TIMEOUT_S}, {"90s", 90}, {"2m", 120}, {"0", 0}, {"never", 0}};
    char err[512], y[256];
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        if (ok[i].v)
            snprintf (y, sizeof y, TRIAL "blocked_timeout: %s\n", ok[i].v);
        else
            snprintf (y, sizeof y, TRIAL);
        cgq_spec_t *s = cgq_spec_parse (y, strlen (y), "t.yaml", err, sizeof err);
        if (!s)
            fail_msg ("%s: %s", y, err);
        assert_true (s->blocked_timeout_s == ok[i].want);
        cgq_spec_destroy (&s);
    }
    assert_true (CGQ_SPEC_BLOCKED_TIMEOUT_S == 600);
    s_expect_error (TRIAL "blocked_timeout: soon\n", 2, 18,
                    "blocked_timeout must be a duration like 10m");
    s_expect_error (TRIAL "blocked_timeout: -5s\n", 2, 18, "or 0 / never to wait forever");
    s_expect_error (TRIAL "blocked_timeout: [1]\n", 2, 18, "not a list");
}

// search.fail_fast: any algorithm reads it; 0 turns it off; validate says it.
static void
t_fail_fast (void **state)
{
    const char *algs[] = {"random", "grid", "evolution", "bayes"};
    char err[512], y[256];
    for (size_t i = 0; i < sizeof algs / sizeof algs[0]; i++) {
        snprintf (y, sizeof y, TRIAL "search: {algorithm: %s, fail_fast: 0}\n"
                  "space: {x: {choice: [1, 2]}}\nobjective: {metric: m, mode: max}\n", algs[i]);
        cgq_spec_t *s = cgq_spec_parse (y, strlen (y), "t.yaml", err, sizeof err);
        if (!s)
            fail_msg ("%s: %s", algs[i], err);
        assert_int_equal (s->search.fail_fast, 0);
        char *out = NULL;
        size_t outlen = 0;
        FILE *f = open_memstream (&out, &outlen);
        cgq_spec_describe (s, f);
        fclose (f);
        assert_null (strstr (out, "fails fast"));
        free (out);
        cgq_spec_destroy (&s);
    }
    const char *y2 = TRIAL "search: {fail_fast: 12}\n";
    cgq_spec_t *s = cgq_spec_parse (y2, strlen (y2), "t.yaml", err, sizeof err);
    assert_non_null (s);
    assert_int_equal (s->search.fail_fast, 12);
    char *out = NULL;
    size_t outlen = 0;
    FILE *f = open_memstream (&out, &outlen);
    cgq_spec_describe (s, f);
    fclose (f);
    assert_non_null (strstr (out, "fails fast: the job stops when 12 trial(s) have failed before "
                                  "any succeeds (search.fail_fast; 0: never)"));
    free (out);
    cgq_spec_destroy (&s);
}

static void
t_err_distributions (void **state)
{
    s_expect_error (TRIAL "space:\n  a: {choice: []}\n", 3, 15,
                    "choice of space.a is an empty list");
    s_expect_error (TRIAL "space:\n  a: {grid: []}\n", 3, 13, "grid of space.a is an empty list");
    s_expect_error (TRIAL "space:\n  d: {uniform: [0.5, 0.1]}\n", 3, 16,
                    "uniform bounds of space.d need lo < hi, got [0.5, 0.1] (write [0.1, 0.5]");
    s_expect_error (TRIAL "space:\n  lr: {loguniform: [0, 0.1]}\n", 3, 20,
                    "loguniform bounds of space.lr must be > 0");
    s_expect_error (TRIAL "space:\n  lr: {loguniform: [-1, 0.1]}\n", 3, 20, "must be > 0");
    s_expect_error (TRIAL "space:\n  n: {randint: [1, 2.5]}\n", 3, 20,
                    "randint bounds of space.n must be integers, not the number 2.5");
    s_expect_error (TRIAL "space:\n  n: {randint: [5, 1]}\n", 3, 16,
                    "randint bounds of space.n are inverted");
    s_expect_error (TRIAL "space:\n  n: {uniform: [1]}\n", 3, 16,
                    "must be a list [lo, hi] of two numbers");
    s_expect_error (TRIAL "space:\n  n: {uniform: [a, 1]}\n", 3, 17,
                    "must be numbers, not the string 'a'");
    s_expect_error (TRIAL "space:\n  lr:\n    loguniformm: [1, 2]\n", 4, 5,
                    "unknown distribution 'loguniformm' (expected one of: choice, uniform, "
                    "loguniform, quniform, qloguniform, randint, grid, repeat, assignment, "
                    "value)");
    s_expect_error (TRIAL "space:\n  d: {choice: [1], grid: [2]}\n", 3, 20,
                    "exactly one distribution key");
}

// The kinds of the search issue parse into their fields.
static void
t_new_kinds (void **state)
{
    const char *y =
        TRIAL "search: {algorithm: grid}\n"
              "space:\n"
              "  q: {quniform: [0, 100, 5]}\n"
              "  r: {quniform: [0.1, 0.5, 0.1]}\n"
              "  l: {qloguniform: [16, 1024, 16]}\n"
              "  d: {repeat: 5, of: {choice: [2, 3, 4]}}\n"
              "  u: {of: {uniform: [0, 1]}, repeat: 2}\n"
              "  b: {assignment: {items: [Conv2D, Pool2D, 3], choices: [cpu, acl_cl]}}\n";
    char err[512] = "";
    cgq_spec_t *s = cgq_spec_parse (y, strlen (y), "t.yaml", err, sizeof err);
    if (!s)
        fail_msg ("%s", err);
    const cgq_param_t *p = cgq_spec_param (s, "q");
    assert_int_equal (p->kind, CGQ_PARAM_QUNIFORM);
    assert_true (p->lo == 0 && p->hi == 100 && p->q == 5 && p->integral);
    p = cgq_spec_param (s, "r");
    assert_true (p->q == 0.1 && !p->integral);
    p = cgq_spec_param (s, "l");
    assert_int_equal (p->kind, CGQ_PARAM_QLOGUNIFORM);
    assert_true (p->integral);
    p = cgq_spec_param (s, "d");
    assert_int_equal (p->kind, CGQ_PARAM_REPEAT);
    assert_int_equal (p->repeat, 5);
    assert_int_equal (p->of->kind, CGQ_PARAM_CHOICE);
    assert_int_equal (json_array_size (p->of->values), 3);
    p = cgq_spec_param (s, "u");
    assert_int_equal (p->repeat, 2);
    assert_int_equal (p->of->kind, CGQ_PARAM_UNIFORM);
    p = cgq_spec_param (s, "b");
    assert_int_equal (p->kind, CGQ_PARAM_ASSIGNMENT);
    assert_int_equal (p->line, 9);
    assert_int_equal (p->col, 3);
    char *dump = json_dumps (p->items, JSON_COMPACT);
    assert_string_equal (dump, "[\"Conv2D\",\"Pool2D\",\"3\"]"); // names are text
    free (dump);
    assert_int_equal (json_array_size (p->values), 2);

    char *out = NULL;
    size_t outlen = 0;
    FILE *f = open_memstream (&out, &outlen);
    cgq_spec_describe (s, f);
    fclose (f);
    assert_non_null (strstr (out, "quniform [0, 100] in steps of 5"));
    assert_non_null (strstr (out, "repeat 5 x choice [2,3,4]  (grid axis, 243 values)"));
    assert_non_null (strstr (out, "repeat 2 x uniform [0, 1]\n"));
    assert_non_null (strstr (out, "assignment of [\"Conv2D\",\"Pool2D\",\"3\"] to [\"cpu\","
                                  "\"acl_cl\"]  (grid axis, 8 ids)"));
    assert_non_null (strstr (out, "trials: 1944 (1944 grid point(s) x 1)"));
    assert_null (strstr (out, "without replacement"));
    free (out);
    cgq_spec_destroy (&s);

    // Under random the same space is sampled without replacement.
    y = TRIAL "search: {samples: 9}\n"
              "space: {b: {assignment: {items: [a, b], choices: [x, y, z]}}}\n";
    s = cgq_spec_parse (y, strlen (y), "t.yaml", err, sizeof err);
    f = open_memstream (&out, &outlen);
    cgq_spec_describe (s, f);
    fclose (f);
    assert_non_null (strstr (out, "sampled without replacement: no repeats among 9 combinations"));
    free (out);
    cgq_spec_destroy (&s);

    // cgq validate shows a checkpoint: section, and nothing without one.
    y = TRIAL "checkpoint: {store: /ck, keep: 2, resume: [lost, timeout]}\n";
    s = cgq_spec_parse (y, strlen (y), "t.yaml", err, sizeof err);
    assert_non_null (s);
    f = open_memstream (&out, &outlen);
    cgq_spec_describe (s, f);
    fclose (f);
    assert_non_null (
        strstr (out, "checkpoints: in /ck, the last 2 kept per trial, resumed after a lost node, "
                     "a timeout\n"));
    free (out);
    cgq_spec_destroy (&s);
    y = TRIAL;
    s = cgq_spec_parse (y, strlen (y), "t.yaml", err, sizeof err);
    f = open_memstream (&out, &outlen);
    cgq_spec_describe (s, f);
    fclose (f);
    assert_null (strstr (out, "checkpoints:"));
    free (out);
    cgq_spec_destroy (&s);
}

static void
t_err_new_kinds (void **state)
{
    // quniform, qloguniform
    s_expect_error (TRIAL "space:\n  q: {quniform: [0, 10]}\n", 3, 17,
                    "quniform of space.q must be a list [lo, hi, q] of three numbers, not a "
                    "list of another length (write q: {quniform: [0, 100, 5]})");
    s_expect_error (TRIAL "space:\n  q: {quniform: 3}\n", 3, 17,
                    "quniform of space.q must be a list [lo, hi, q] of three numbers, not the "
                    "integer 3");
    s_expect_error (TRIAL "space:\n  q: {quniform: [a, 1, 1]}\n", 3, 18,
                    "quniform bounds of space.q must be numbers, not the string 'a'");
    s_expect_error (TRIAL "space:\n  q: {quniform: [0, 10, x]}\n", 3, 25,
                    "quniform step q of space.q must be a number, not the string 'x'");
    s_expect_error (TRIAL "space:\n  q: {quniform: [0, 10, 0]}\n", 3, 25,
                    "quniform step q of space.q must be > 0, not 0");
    s_expect_error (TRIAL "space:\n  q: {quniform: [5, 1, 1]}\n", 3, 17,
                    "quniform bounds of space.q need lo < hi, got [5, 1] (write [1, 5, 1]");
    s_expect_error (TRIAL "space:\n  q: {quniform: [0.1, 0.2, 1]}\n", 3, 17,
                    "quniform range [0.1, 0.2] of space.q holds no multiple of q = 1");
    s_expect_error (TRIAL "space:\n  q: {qloguniform: [0, 10, 1]}\n", 3, 20,
                    "qloguniform bounds of space.q must be > 0, got [0, 10]");
    // repeat
    s_expect_error (TRIAL "space:\n  d: {repeat: 0, of: {choice: [1]}}\n", 3, 15,
                    "repeat of space.d must be an integer >= 1, not 0");
    s_expect_error (TRIAL "space:\n  d: {repeat: 65, of: {choice: [1]}}\n", 3, 15,
                    "repeat of space.d must be at most 64, not 65");
    s_expect_error (TRIAL "space:\n  d: {repeat: x, of: {choice: [1]}}\n", 3, 15,
                    "repeat of space.d must be an integer >= 1, not the string 'x'");
    s_expect_error (TRIAL "space:\n  d: {repeat: 3}\n", 3, 7,
                    "repeat of space.d has no 'of', the distribution of each element");
    s_expect_error (TRIAL "space:\n  d: {of: {choice: [1]}}\n", 3, 7,
                    "space.d has 'of' but no 'repeat'");
    s_expect_error (TRIAL "space:\n  d: {repeat: 3, of: [1, 2]}\n", 3, 22,
                    "space.d.of must be a distribution like {choice: [2, 3, 4]}, not a list");
    s_expect_error (TRIAL "space:\n  d: {repeat: 3, of: {grid: [1]}}\n", 3, 23,
                    "a repeat draws each element from one of: choice, uniform, loguniform, "
                    "quniform, qloguniform, randint, not grid");
    s_expect_error (TRIAL "space:\n  d: {repeat: 3, of: {assignment: {}}}\n", 3, 23,
                    "not assignment");
    s_expect_error (TRIAL "space:\n  d: {repeat: 3, of: {repeat: 2, of: {choice: [1]}}}\n", 3, 23,
                    "not repeat");
    s_expect_error (TRIAL "space:\n  d: {repeat: 3, of: {normal: [1]}}\n", 3, 23,
                    "unknown distribution 'normal' in space.d.of (expected one of: choice, "
                    "uniform, loguniform, quniform, qloguniform, randint)");
    s_expect_error (TRIAL "space:\n  d: {repeat: 3, of: {choice: [1]}, x: 1}\n", 3, 37,
                    "unknown key 'x' in space.d (known keys: repeat, of)");
    s_expect_error (TRIAL "space:\n  d: {repeat: 3, of: {choice: []}}\n", 3, 31,
                    "choice of space.d is an empty list");
    s_expect_error (TRIAL "space:\n  d: {repeat: 3, of: {choice: [1], randint: [1, 2]}}\n", 3, 36,
                    "space.d.of must have exactly one distribution key, found 2");
    // assignment
    s_expect_error (TRIAL "space:\n  b: {assignment: [a, b]}\n", 3, 19,
                    "assignment of space.b must be a mapping {items: [...], choices: [...]}, "
                    "not a list");
    s_expect_error (TRIAL "space:\n  b: {assignment: {items: [a]}}\n", 3, 19,
                    "assignment of space.b has no choices");
    s_expect_error (TRIAL "space:\n  b: {assignment: {choices: [a]}}\n", 3, 19,
                    "assignment of space.b has no items");
    s_expect_error (TRIAL "space:\n  b: {assignment: {items: [], choices: [x]}}\n", 3, 27,
                    "items of space.b is an empty list");
    s_expect_error (TRIAL "space:\n  b: {assignment: {items: [a, b, a], choices: [x]}}\n", 3, 34,
                    "duplicate name 'a' in items of space.b (first written at 3:28");
    s_expect_error (TRIAL "space:\n  b: {assignment: {items: [a, [x]], choices: [x]}}\n", 3, 31,
                    "items of space.b must be names, not a list");
    s_expect_error (TRIAL "space:\n  b: {assignment: {items: [a], choices: x}}\n", 3, 41,
                    "choices of space.b must be a list of names, not the string 'x'");
    s_expect_error (TRIAL "space:\n  b: {assignment: {items: [a], choices: [x, ~]}}\n", 3, 45,
                    "choices of space.b must be names, not empty (null)");
    s_expect_error (TRIAL "space:\n  b: {assignment: {items: [a], choices: [x], more: 1}}\n", 3, 46,
                    "unknown key 'more' in space.b.assignment (known keys: items, choices, env)");
    cgq_buf_t b;
    cgq_buf_init (&b);
    cgq_buf_puts (&b, TRIAL "space:\n  b: {assignment: {choices: [x, y], items: [i0");
    for (int i = 1; i < 65; i++)
        cgq_buf_printf (&b, ", i%d", i);
    cgq_buf_puts (&b, "]}}\n");
    s_expect_error (b.data, 3, 44, "items of space.b has 65 names, more than 64");
    // 3^40 > 2^63 > 2^62
    cgq_buf_reset (&b);
    cgq_buf_puts (&b, TRIAL "space:\n  b: {assignment: {choices: [x, y, z], items: [i0");
    for (int i = 1; i < 40; i++)
        cgq_buf_printf (&b, ", i%d", i);
    cgq_buf_puts (&b, "]}}\n");
    s_expect_error (b.data, 3, 19, "assignment of space.b has 3^40 ids, more than 2^63");
    cgq_buf_fini (&b);
    // Under grid a repeat of a choice is an axis of 9^64 points.
    s_expect_error (TRIAL "search: {algorithm: grid}\nspace:\n"
                          "  d: {repeat: 64, of: {choice: [1, 2, 3, 4, 5, 6, 7, 8, 9]}}\n",
                    3, 1, "the search has 1.18e+61 trials, more than 2^63");
}

static void
t_err_search (void **state)
{
    s_expect_error (TRIAL "search:\n  algorithm: random\n  samples: -5\n", 4, 12,
                    "search.samples must be an integer >= 1, not -5");
    s_expect_error (TRIAL "search: {samples: 0}\n", 2, 19,
                    "search.samples must be an integer >= 1, not 0");
    s_expect_error (TRIAL "search: {algorithm: bayes}\n", 2, 21,
                    "algorithm bayes optimises one objective, and the spec has none");
    // An empty key (found by fuzz_spec: it used to loop forever in s_alg_reads).
    s_expect_error (TRIAL "search: {\"\": 1}\n", 2, 10, "unknown key '' in search");
    s_expect_error (TRIAL "search: {algorithm: evolution, &p : 8}\n", 2, 32,
                    "unknown key '' in search");
    s_expect_error (TRIAL "search: {algorithm: grdi}\n", 2, 21,
                    "unknown search.algorithm 'grdi' (expected one of: random, grid, evolution, "
                    "nsga2, bayes, tpe, bohb, cmaes, list, external, pbt)");
    // 2^32 x 2^32 grid points: more trials than fit in 2^63.
    s_expect_error (
        TRIAL
        "search: {samples: 4294967296}\nspace:\n  a: {grid: [1, 2]}\n"
        "  b: {grid: [1, 2, 3]}\n  c: {grid: [1, 2, 3, 4, 5, 6, 7, 8, 9]}\n"
        "  d: {grid: [1, 2, 3, 4, 5, 6, 7, 8, 9]}\n  e: {grid: [1, 2, 3, 4, 5, 6, 7, 8, 9]}\n"
        "  f: {grid: [1, 2, 3, 4, 5, 6, 7, 8, 9]}\n  g: {grid: [1, 2, 3, 4, 5, 6, 7, 8, 9]}\n"
        "  h: {grid: [1, 2, 3, 4, 5, 6, 7, 8, 9]}\n  i: {grid: [1, 2, 3, 4, 5, 6, 7, 8, 9]}\n"
        "  j: {grid: [1, 2, 3, 4, 5, 6, 7, 8, 9]}\n  k: {grid: [1, 2, 3, 4, 5, 6, 7, 8, 9]}\n",
        3, 1, "more than 2^63");
}

static void
t_err_trial (void **state)
{
    s_expect_error ("name: x\ntrial:\n  timeout: 30m\n", 2, 1,
                    "trial.command is missing (write command:");
    s_expect_error ("name: x\n", 1, 1, "trial is missing");
    s_expect_error ("trial: {command: ''}\n", 1, 18, "trial.command is blank");
    s_expect_error ("trial: {command: []}\n", 1, 18, "trial.command is an empty list");
    s_expect_error ("trial: {kind: batch, command: x}\n", 1, 15,
                    "unknown trial.kind 'batch' (expected one of: command, noop, predictor, client)");
    s_expect_error ("trial: {kind: predictor}\n", 1, 9, "kind: predictor needs trial.data");
    s_expect_error ("trial: {kind: predictor, data: d, command: x}\n", 1, 35,
                    "trial.command does not go with kind: predictor");
    s_expect_error ("trial: {command: x, data: d}\n", 1, 27,
                    "trial.data is read by kind: predictor only");
    s_expect_error (
        "trial:\n  command: x\n  resources: {gpu: 1.5}\n", 3, 20,
        "trial.resources.gpu 1.5 is neither a share of one GPU (<= 1) nor a whole number");
    s_expect_error ("trial:\n  command: x\n  resources: {gpu: -1}\n", 3, 20, "must be >= 0");
    s_expect_error ("trial:\n  command: x\n  timeout: soon\n", 3, 12,
                    "trial.timeout must be a duration > 0 like 30m, 90s, 2h or a number of "
                    "seconds, not the string 'soon'");
    s_expect_error ("trial:\n  command: x\n  timeout: 0\n", 3, 12,
                    "trial.timeout must be a duration > 0");
    s_expect_error ("trial:\n  command: x\n  resources:\n    memory: 4Q\n", 4, 13,
                    "trial.resources.memory must be a size like 4G, 512M or a number of bytes, not "
                    "the string '4Q'");
    s_expect_error ("trial:\n  command: x\n  env: {1BAD: x}\n", 3, 9,
                    "bad environment variable name '1BAD'");
    s_expect_error ("trial:\n  command: x\n  env: {A: [1]}\n", 3, 12,
                    "trial.env.A must be a string, not a list");
}

static void
t_err_placeholder (void **state)
{
    s_expect_error (
        "space:\n  lr: {uniform: [0, 1]}\n  hidden: 3\ntrial:\n  command: train --lr {lrr}\n", 5,
        12,
        "unknown placeholder '{lrr}' in trial.command (params: lr, hidden; built-ins: job_id, "
        "trial_id, spec_dir; write {{ for a literal brace)");
    s_expect_error ("space: {lr: 1}\ntrial:\n  command: [train, \"{lr}\", \"--x={y}\"]\n", 3, 28,
                    "unknown placeholder '{y}' in trial.command[2]");
    s_expect_error (
        "space: {lr: 1}\ntrial:\n  command: train\n  env: {A: \"{job_id}\", B: \"{nope}\"}\n", 4,
        27, "unknown placeholder '{nope}' in trial.env.B");
    s_expect_error ("trial:\n  command: awk '{print $1}'\n", 2, 12,
                    "unknown placeholder '{print $1}'");
    s_expect_error ("trial:\n  command: echo {trial_id\n", 2, 12,
                    "unterminated '{' at byte 5 of trial.command");
    s_expect_error ("trial:\n  command: echo }x\n", 2, 12, "stray '}' at byte 5 of trial.command");
}

static void
t_err_duplicate (void **state)
{
    s_expect_error (TRIAL "space:\n  lr: 1\n  hidden: 2\n  lr: 3\n", 5, 3,
                    "duplicate key 'lr' (first written at 3:3");
    s_expect_error (TRIAL "trial: {command: y}\n", 2, 1,
                    "duplicate key 'trial' (first written at 1:1");
    s_expect_error (TRIAL "space:\n  c: {value: {a: 1, a: 2}}\n", 3, 21,
                    "duplicate key 'a' (first written at 3:15");
}

static void
t_err_objective (void **state)
{
    s_expect_error (TRIAL "objective:\n  metric: acc\n", 2, 1,
                    "objective.mode is missing (write mode: max or mode: min)");
    s_expect_error (TRIAL "objective: {mode: max}\n", 2, 1, "objective.metric is missing");
    s_expect_error (TRIAL "objective: {metric: acc, mode: maximum}\n", 2, 32,
                    "objective.mode must be max or min");
}

static void
t_err_param_name (void **state)
{
    s_expect_error (TRIAL "space:\n  learning-rate: 1\n", 3, 3,
                    "bad parameter name 'learning-rate'");
    s_expect_error (TRIAL "space:\n  2x: 1\n", 3, 3, "bad parameter name '2x'");
    s_expect_error (TRIAL "space:\n  trial_id: 1\n", 3, 3,
                    "parameter name 'trial_id' is taken by a built-in");
}

static void
t_load (void **state)
{
    char err[512] = "";
    cgq_spec_t *s = cgq_spec_load ("/nonexistent/dir/tune.yaml", err, sizeof err);
    assert_null (s);
    assert_string_equal (err, "/nonexistent/dir/tune.yaml: cannot read: No such file or directory");

    char path[] = "/tmp/cgq-spec-test-XXXXXX.yaml";
    int fd = mkstemps (path, 5);
    assert_true (fd >= 0);
    FILE *f = fdopen (fd, "w");
    fputs (s_full, f);
    fclose (f);
    s = cgq_spec_load (path, err, sizeof err);
    unlink (path);
    assert_non_null (s);
    assert_string_equal (s->text, s_full);
    assert_int_equal (s->nparams, 9);
    cgq_spec_destroy (&s);
}

// The searchers that learn, their parameters and defaults; objectives as a
// metric, an expression or a list; early_stop completed from the objective.
static void
t_search_new (void **state)
{
    char err[512] = "";
    const char *y = "space:\n  x: {uniform: [0, 1]}\n  g: {grid: [1, 2, 3]}\n"
                    "search: {algorithm: evolution, samples: 250, initial: 50, batch: 50, seed: 3}\n"
                    "objective: {expr: \"(acc*100)/latency_gpu\", mode: max}\n"
                    "early_stop: {algorithm: asha, grace: 2}\n" TRIAL;
    cgq_spec_t *s = cgq_spec_parse (y, strlen (y), "t.yaml", err, sizeof err);
    assert_non_null (s);
    assert_int_equal (s->search.algorithm, CGQ_SEARCH_EVOLUTION);
    assert_int_equal (s->search.population, 50);
    assert_int_equal (s->search.tournament, 5);
    assert_int_equal (s->search.initial, 50);
    assert_int_equal (s->search.batch, 50);
    uint64_t total;
    assert_int_equal (cgq_space_count (s, &total), 0);
    assert_int_equal (total, 250); // a grid param is a choice here, not an axis
    assert_int_equal (s->nobjectives, 1);
    assert_string_equal (s->objective.metric, "(acc*100)/latency_gpu");
    assert_non_null (s->objective.expr);
    json_t *m = json_pack ("{s:f, s:f}", "acc", 0.5, "latency_gpu", 25.0);
    double v = 0;
    assert_int_equal (cgq_spec_objective_value (s, m, &v, err, sizeof err), 0);
    assert_true (v == 2.0);
    json_object_del (m, "acc");
    assert_int_equal (cgq_spec_objective_value (s, m, &v, err, sizeof err), -1);
    assert_non_null (strstr (err, "acc"));
    json_decref (m);
    assert_int_equal (s->early_stop.algorithm, CGQ_EARLY_STOP_ASHA);
    assert_string_equal (s->early_stop.attribute, "epoch");
    assert_string_equal (s->early_stop.metric, "(acc*100)/latency_gpu");
    assert_ptr_equal (s->early_stop.expr, s->objective.expr);
    assert_int_equal (s->early_stop.mode, 1);
    assert_int_equal (s->early_stop.grace, 2);
    assert_true (s->early_stop.reduction == 3);
    assert_int_equal (s->early_stop.max, 100);
    assert_string_equal (s->objective.text, "(acc*100)/latency_gpu");
    cgq_spec_destroy (&s);
    // An expression named: the name goes where the metric's would, the text stays.
    const char *yn = TRIAL "objective: {expr: \"np.power(100, acc)/(np.log10(lat+1)+1)\", "
                           "name: score, mode: max}\nearly_stop: {algorithm: asha}\n";
    s = cgq_spec_parse (yn, strlen (yn), "t.yaml", err, sizeof err);
    if (!s)
        fail_msg ("%s", err);
    assert_string_equal (s->objective.metric, "score");
    assert_string_equal (s->objective.text, "np.power(100, acc)/(np.log10(lat+1)+1)");
    assert_string_equal (s->early_stop.metric, "score");
    assert_ptr_equal (s->early_stop.expr, s->objective.expr);
    m = json_pack ("{s:f, s:f}", "acc", 1.0, "lat", 99.0);
    assert_int_equal (cgq_spec_objective_value (s, m, &v, err, sizeof err), 0);
    assert_true (fabs (v - 100.0 / 3) < 1e-12);
    json_object_del (m, "lat");
    assert_int_equal (cgq_spec_objective_value (s, m, &v, err, sizeof err), -1);
    assert_non_null (strstr (err, "objective expr \"np.power(100, acc)"));
    json_decref (m);
    char *out = NULL;
    size_t outlen = 0;
    FILE *f = open_memstream (&out, &outlen);
    cgq_spec_describe (s, f);
    fclose (f);
    assert_non_null (strstr (out, "objective: maximize score = expr np.power(100, acc)/"));
    free (out);
    cgq_spec_destroy (&s);

    y = "space:\n  x: {uniform: [0, 1]}\n"
        "search: {algorithm: nsga2, samples: 100, population: 20, crossover: 0.8}\n"
        "objectives: [{metric: time, mode: min}, {expr: \"mem/1024\", mode: min},\n"
        "  {metric: acc, mode: max}]\n" TRIAL;
    s = cgq_spec_parse (y, strlen (y), "t.yaml", err, sizeof err);
    assert_non_null (s);
    assert_null (s->objective.metric);
    assert_int_equal (s->nobjectives, 3);
    assert_int_equal (s->search.initial, 20);
    assert_true (s->search.crossover == 0.8);
    int sense[CGQ_SPEC_MAX_OBJECTIVES];
    assert_int_equal (cgq_spec_objective_senses (s, sense), 3);
    assert_int_equal (sense[0], -1);
    assert_int_equal (sense[2], 1);
    m = json_pack ("{s:i, s:i, s:f}", "time", 3, "mem", 2048, "acc", 0.75);
    double vs[3];
    assert_int_equal (cgq_spec_objective_values (s, m, vs, err, sizeof err), 0);
    assert_true (vs[0] == 3 && vs[1] == 2 && vs[2] == 0.75);
    assert_int_equal (cgq_spec_objective_value (s, m, &v, err, sizeof err), -1);
    json_decref (m);
    cgq_spec_destroy (&s);

    y = "space:\n  x: {uniform: [0, 1]}\n  c: 5\n"
        "search: {algorithm: bayes, samples: 30}\n"
        "objective: {metric: y, mode: min}\n"
        "early_stop: {algorithm: median, metric: loss, mode: min, attribute: step}\n" TRIAL;
    s = cgq_spec_parse (y, strlen (y), "t.yaml", err, sizeof err);
    assert_non_null (s);
    assert_int_equal (s->search.initial, 10);
    assert_int_equal (s->search.candidates, 1000);
    assert_string_equal (s->early_stop.metric, "loss");
    assert_null (s->early_stop.expr);
    cgq_spec_destroy (&s);

    y = "space:\n  x: {uniform: [0, 1]}\n  c: 5\n"
        "search:\n  algorithm: list\n  points: [{x: 0.5}, {x: 2}]\n" TRIAL;
    s = cgq_spec_parse (y, strlen (y), "t.yaml", err, sizeof err);
    assert_non_null (s);
    assert_int_equal (cgq_space_count (s, &total), 0);
    assert_int_equal (total, 2);
    cgq_spec_destroy (&s);
}

// tpe: its keys and defaults (Optuna's: 10 random trials, 24 candidates,
// univariate), and what it refuses.
static void
t_search_tpe (void **state)
{
    char err[512] = "";
    const char *y = "space:\n  x: {uniform: [0, 1]}\n  g: {grid: [1, 2, 3]}\n"
                    "search: {algorithm: tpe, samples: 50, seed: 1}\n"
                    "objective: {metric: loss, mode: min}\n" TRIAL;
    cgq_spec_t *s = cgq_spec_parse (y, strlen (y), "t.yaml", err, sizeof err);
    if (!s)
        fail_msg ("%s", err);
    assert_int_equal (s->search.algorithm, CGQ_SEARCH_TPE);
    assert_string_equal (cgq_spec_search_name (s->search.algorithm), "tpe");
    assert_int_equal (s->search.initial, 10);
    assert_int_equal (s->search.candidates, 24);
    assert_false (s->search.multivariate);
    uint64_t total;
    assert_int_equal (cgq_space_count (s, &total), 0);
    assert_int_equal (total, 50); // a grid param is a choice here, not an axis
    cgq_spec_destroy (&s);
    y = "space:\n  x: {uniform: [0, 1]}\n"
        "search: {algorithm: tpe, initial: 5, candidates: 100, multivariate: yes, samples: 9}\n"
        "objective: {metric: acc, mode: max}\n" TRIAL;
    s = cgq_spec_parse (y, strlen (y), "t.yaml", err, sizeof err);
    if (!s)
        fail_msg ("%s", err);
    assert_int_equal (s->search.initial, 5);
    assert_int_equal (s->search.candidates, 100);
    assert_true (s->search.multivariate);
    char *out = NULL;
    size_t outlen = 0;
    FILE *f = open_memstream (&out, &outlen);
    cgq_spec_describe (s, f);
    fclose (f);
    assert_non_null (strstr (out, "search: tpe, 9 trial(s), seed 0"));
    assert_non_null (strstr (out, "5 random first (until so many succeed), 100 candidates per "
                                  "suggestion, multivariate"));
    free (out);
    cgq_spec_destroy (&s);

    s_expect_error (TRIAL "search: {algorithm: tpe, population: 5}\nobjective: {metric: a, "
                          "mode: max}\n",
                    2, 26,
                    "search.population applies to algorithm evolution, nsga2, pbt, not tpe (remove it, "
                    "or set algorithm: evolution)");
    s_expect_error (TRIAL "search: {algorithm: bayes, multivariate: true}\nobjective: {metric: a, "
                          "mode: max}\n",
                    2, 28, "search.multivariate applies to algorithm tpe, bohb, not bayes");
    s_expect_error (TRIAL "search: {algorithm: tpe, multivariate: 1}\nobjective: {metric: a, "
                          "mode: max}\n",
                    2, 40, "search.multivariate must be true or false, not the integer 1");
    s_expect_error (TRIAL "search: {algorithm: tpe, candidates: 0}\nobjective: {metric: a, "
                          "mode: max}\n",
                    2, 38, "search.candidates must be an integer >= 1, not 0");
    s_expect_error (TRIAL "search: {algorithm: tpe, batch: 4}\nobjective: {metric: a, "
                          "mode: max}\n",
                    2, 26, "search.batch applies to algorithm evolution, nsga2, not tpe");
    s_expect_error (TRIAL "search: {algorithm: tpe, multivariat: true}\n", 2, 26,
                    "unknown key 'multivariat' in search (known keys: algorithm, samples, "
                    "concurrency, seed, initial, candidates, multivariate, warm_start, "
                    "fail_fast); did you mean 'multivariate'?");
    // warm_start: jobs and points; what it refuses.
    {
        const char *w = "search: {algorithm: tpe, warm_start: {jobs: [7, 9], points: seen.jsonl}}\n"
                        "objective: {metric: a, mode: min}\n" TRIAL;
        cgq_spec_t *ws = cgq_spec_parse (w, strlen (w), "t.yaml", err, sizeof err);
        if (!ws)
            fail_msg ("%s", err);
        assert_int_equal (ws->search.nwarm_jobs, 2);
        assert_true (ws->search.warm_jobs[0] == 7 && ws->search.warm_jobs[1] == 9);
        assert_string_equal (ws->search.warm_points, "seen.jsonl");
        char *out = NULL;
        size_t outlen = 0;
        FILE *mf = open_memstream (&out, &outlen);
        cgq_spec_describe (ws, mf);
        fclose (mf);
        assert_non_null (strstr (out, "  warm start from job 7, job 9, points seen.jsonl (read by "
                                      "cgq submit)\n"));
        free (out);
        cgq_spec_destroy (&ws);
    }
    s_expect_error ("search: {algorithm: tpe, warm_start: {jobs: 7}}\n"
                    "objective: {metric: a, mode: min}\n" TRIAL,
                    1, 45, "search.warm_start.jobs must be a list of 1 to 64 job ids");
    s_expect_error ("search: {algorithm: tpe, warm_start: {jobs: [0]}}\n"
                    "objective: {metric: a, mode: min}\n" TRIAL,
                    1, 46, "search.warm_start.jobs[]");
    s_expect_error ("search: {algorithm: tpe, warm_start: {job: [3]}}\n"
                    "objective: {metric: a, mode: min}\n" TRIAL,
                    1, 39, "unknown key 'job' in search.warm_start (known keys: jobs, points)");
    s_expect_error ("search: {algorithm: random, warm_start: {jobs: [3]}}\n"
                    "objective: {metric: a, mode: min}\n" TRIAL,
                    1, 29,
                    "search.warm_start applies to algorithm evolution, nsga2, bayes, tpe, "
                    "bohb, cmaes, pbt, not random");
    s_expect_error (TRIAL "search: {algorithm: tpe}\n", 2, 21,
                    "algorithm tpe needs objectives (write objective: {metric: NAME, mode: "
                    "max}, or objectives: [");
    // Several objectives: MOTPE.
    y = TRIAL "search: {algorithm: tpe, samples: 20}\n"
              "objectives: [{metric: a, mode: min}, {metric: b, mode: max}]\n";
    cgq_spec_t *mo = cgq_spec_parse (y, strlen (y), "t.yaml", err, sizeof err);
    if (!mo)
        fail_msg ("%s", err);
    assert_int_equal (mo->nobjectives, 2);
    cgq_spec_destroy (&mo);
}

// cmaes: its keys and defaults (popsize from the params, sigma0 1/6, no
// restarts), and what it refuses: categorical params (naming tpe) and
// several objectives (naming nsga2), each at its line and column.
static void
t_search_cmaes (void **state)
{
    char err[512] = "";
    const char *y = "space:\n  x: {uniform: [0, 1]}\n  n: {randint: [1, 9]}\n"
                    "search: {algorithm: cmaes, samples: 50, popsize: 12, restarts: 2}\n"
                    "objective: {metric: loss, mode: min}\n" TRIAL;
    cgq_spec_t *s = cgq_spec_parse (y, strlen (y), "t.yaml", err, sizeof err);
    if (!s)
        fail_msg ("%s", err);
    assert_int_equal (s->search.algorithm, CGQ_SEARCH_CMAES);
    assert_string_equal (cgq_spec_search_name (s->search.algorithm), "cmaes");
    assert_int_equal (s->search.popsize, 12);
    assert_int_equal (s->search.restarts, 2);
    assert_true (s->search.sigma0 == 1.0 / 6);
    char *out = NULL;
    size_t outlen = 0;
    FILE *f = open_memstream (&out, &outlen);
    cgq_spec_describe (s, f);
    fclose (f);
    assert_non_null (strstr (out, "search: cmaes, 50 trial(s), seed 0"));
    assert_non_null (strstr (out, "popsize 12, sigma0 0.16666666666666666, 2 restart(s) (IPOP)"));
    free (out);
    cgq_spec_destroy (&s);

    s_expect_error ("space:\n  x: {uniform: [0, 1]}\n  act: {choice: [relu, tanh]}\n"
                    "search: {algorithm: cmaes}\nobjective: {metric: a, mode: max}\n" TRIAL,
                    3, 3,
                    "algorithm cmaes searches numeric params only, and param 'act' is "
                    "categorical (choice; use algorithm: tpe, which models categories");
    s_expect_error ("space:\n  x: {uniform: [0, 1]}\n  d: {repeat: 2, of: {choice: [1, 2]}}\n"
                    "search: {algorithm: cmaes}\nobjective: {metric: a, mode: max}\n" TRIAL,
                    3, 3, "param 'd' is categorical (choice; use algorithm: tpe");
    s_expect_error ("space:\n  g: {grid: [1, 2]}\n  x: {uniform: [0, 1]}\n"
                    "search: {algorithm: cmaes}\nobjective: {metric: a, mode: max}\n" TRIAL,
                    2, 3, "param 'g' is categorical (grid; use algorithm: tpe");
    s_expect_error ("space:\n  ops: {assignment: {items: [a], choices: [x, y]}}\n"
                    "search: {algorithm: cmaes}\nobjective: {metric: a, mode: max}\n" TRIAL,
                    2, 3, "param 'ops' is categorical (assignment; use algorithm: tpe");
    s_expect_error ("search: {algorithm: cmaes}\n"
                    "objectives: [{metric: a, mode: min}, {metric: b, mode: min}]\n" TRIAL,
                    1, 21,
                    "algorithm cmaes optimises one objective, and the spec has several "
                    "(objectives: [...]) (write objective: {metric: NAME, mode: max}, or "
                    "algorithm: nsga2 or tpe for a Pareto front)");
    s_expect_error (TRIAL "search: {algorithm: cmaes, sigma0: 0}\nobjective: {metric: a, "
                          "mode: max}\n",
                    2, 36, "search.sigma0 must be in (0, 1], not 0");
    s_expect_error (TRIAL "search: {algorithm: cmaes, popsize: 1}\nobjective: {metric: a, "
                          "mode: max}\n",
                    2, 37, "search.popsize must be an integer >= 2, not 1");
    s_expect_error (TRIAL "search: {algorithm: cmaes, popsize: 10001}\nobjective: {metric: a, "
                          "mode: max}\n",
                    2, 37, "search.popsize");
    s_expect_error (TRIAL "search: {algorithm: cmaes, initial: 5}\nobjective: {metric: a, "
                          "mode: max}\n",
                    2, 28, "search.initial applies to algorithm evolution, nsga2, bayes, tpe, "
                    "bohb, not cmaes");
    s_expect_error (TRIAL "search: {algorithm: tpe, restarts: 5}\nobjective: {metric: a, "
                          "mode: max}\n",
                    2, 26, "search.restarts applies to algorithm cmaes, not tpe");
}

static void
t_err_search_new (void **state)
{
    s_expect_error (TRIAL "search: {algorithm: random, population: 5}\n", 2, 29,
                    "search.population applies to algorithm evolution, nsga2, pbt, not random");
    s_expect_error (TRIAL "search: {algorithm: evolution, candidates: 5}\nobjective: {metric: a, "
                          "mode: max}\n",
                    2, 32, "search.candidates applies to algorithm bayes, tpe, bohb, not evolution");
    s_expect_error (TRIAL "search: {algorithm: evolution, populashun: 5}\n", 2, 32,
                    "unknown key 'populashun' in search (known keys: algorithm, samples, "
                    "concurrency, seed, population, tournament, initial, batch, warm_start, "
                    "fail_fast)");
    s_expect_error (TRIAL "search: {algorithm: evolution, population: 1}\n", 2, 44,
                    "search.population must be an integer >= 2, not 1");
    s_expect_error (TRIAL "search: {algorithm: evolution, population: 4, tournament: 5}\n", 2, 9,
                    "search.tournament 5 is larger than search.population 4");
    s_expect_error (TRIAL "search: {algorithm: nsga2, crossover: 1.5}\n", 2, 39,
                    "search.crossover must be a probability in [0, 1], not 1.5");
    s_expect_error (TRIAL "search: {algorithm: nsga2}\n", 2, 21, "algorithm nsga2 needs objectives");
    s_expect_error (TRIAL "search: {algorithm: evolution}\n"
                          "objectives: [{metric: a, mode: min}, {metric: b, mode: min}]\n",
                    2, 21, "algorithm evolution optimises one objective, and the spec has several");
    s_expect_error (TRIAL "search: {algorithm: bayes, initial: 0}\n", 2, 37,
                    "search.initial must be an integer >= 1, not 0");
    // list
    s_expect_error (TRIAL "search: {algorithm: list}\n", 2, 21,
                    "algorithm list needs the points to try");
    s_expect_error (TRIAL "search: {algorithm: list, points: []}\n", 2, 35,
                    "search.points must be a non-empty list of points, not an empty list");
    s_expect_error (TRIAL "search: {algorithm: list, points: [3]}\n", 2, 36,
                    "search.points[0] must be a mapping of param values, not the integer 3");
    s_expect_error (TRIAL "space: {x: {choice: [1, 2]}}\n"
                          "search: {algorithm: list, points: [{x: 1}, {y: 2}]}\n",
                    3, 44, "search.points[1] names 'y', which is not a param of space");
    s_expect_error (TRIAL "space: {x: {choice: [1, 2]}, z: {uniform: [0, 1]}}\n"
                          "search: {algorithm: list, points: [{x: 1}]}\n",
                    3, 36, "search.points[0] has no value for param 'z'");
    s_expect_error (TRIAL "search: {algorithm: list, points: [{}], file: p.jsonl}\n", 2, 41,
                    "search has both points and file");
    s_expect_error (TRIAL "search: {algorithm: list, file: p.txt}\n", 2, 33,
                    "search.file 'p.txt' must end in .jsonl, .ndjson, .json or .csv");
    s_expect_error (TRIAL "search: {algorithm: list, file: p.jsonl}\n", 2, 33,
                    "search.file 'p.jsonl' is read where the spec file is");
    s_expect_error (TRIAL "search: {algorithm: list, points: [{}], samples: 3}\n", 2, 41,
                    "search.samples applies to algorithm random, grid, evolution, nsga2, bayes, "
                    "tpe, bohb, cmaes, external, not list");
    // external reads samples, concurrency and fail_fast: nothing about how to search.
    s_expect_error (TRIAL "search: {algorithm: external, seed: 3}\n", 2, 31,
                    "search.seed applies to algorithm random, grid, evolution, nsga2, bayes, tpe, bohb, "
                    "cmaes, pbt, not external");
}

static void
t_err_objectives (void **state)
{
    // The column of an expression error is the column inside the YAML line.
    s_expect_error (TRIAL "objective: {expr: \"(acc*100)/\", mode: max}\n", 2, 30,
                    "objective.expr: ");
    s_expect_error (TRIAL "objective: {expr: acc*/2, mode: max}\n", 2, 23, "objective.expr: ");
    s_expect_error (TRIAL "objective:\n  mode: max\n  expr: 'log(acc'\n", 4, 17,
                    "objective.expr: ");
    s_expect_error (TRIAL "objective: {expr: a, metric: b, mode: max}\n", 2, 22,
                    "objective has both metric and expr");
    s_expect_error (TRIAL "objective: {expr: a}\n", 2, 1, "objective.mode is missing");
    s_expect_error (TRIAL "objective: {mode: max, metrc: a}\n", 2, 24,
                    "unknown key 'metrc' in objective (known keys: metric, expr, name, mode)");
    // name: a short name for an expression (issue 23), only for an expression
    s_expect_error (TRIAL "objective: {metric: a, mode: max, name: b}\n", 2, 35,
                    "objective.name applies to expr: a metric: objective is named by its metric");
    s_expect_error (TRIAL "objective: {expr: a*2, mode: max, name: \"a b\"}\n", 2, 41,
                    "objective.name 'a b' must be a word of letters, digits");
    s_expect_error (TRIAL "objective: {metric: a, mode: max}\nobjectives: [{metric: a, mode: "
                          "min}, {metric: b, mode: min}]\n",
                    3, 1, "objective and objectives are exclusive (objective written at 2:1");
    s_expect_error (TRIAL "objectives: [{metric: a, mode: min}, {metric: b, mode: min}]\n"
                          "objective: {metric: a, mode: max}\n",
                    3, 1, "objective and objectives are exclusive (objectives written at 2:1");
    s_expect_error (TRIAL "objectives: [{metric: a, mode: min}]\n", 2, 13,
                    "objectives must list 2 to 8 objectives, not 1");
    s_expect_error (TRIAL "objectives: {metric: a}\n", 2, 13,
                    "objectives must be a list of 2 to 8 objectives, not a mapping");
    s_expect_error (TRIAL "objectives: [{metric: a, mode: min}, {metric: b, mode: most}]\n", 2,
                    56, "objectives[1].mode must be max or min, not 'most'");
    s_expect_error (TRIAL "objectives: [{metric: a, mode: min}, {mode: min}]\n", 2, 38,
                    "objectives[1].metric is missing");
    s_expect_error (TRIAL "objectives:\n  - {metric: a, mode: min}\n  - {expr: \"a +\", mode: min}\n",
                    4, 16, "objectives[1].expr: ");
}

static void
t_err_early_stop (void **state)
{
    const char *obj = "objective: {metric: loss, mode: min}\n";
    char y[512];
#define ES(text) (snprintf (y, sizeof y, TRIAL "%s%s", obj, text), y)
    s_expect_error (ES ("early_stop: {grace: 2}\n"), 3, 1, "early_stop.algorithm is missing");
    s_expect_error (ES ("early_stop: {algorithm: hyperbnd}\n"), 3, 25,
                    "unknown early_stop.algorithm 'hyperbnd' (expected one of: asha, median, "
                    "hyperband)");
    s_expect_error (ES ("early_stop: {algorithm: hyperband}\n"), 3, 25,
                    "early_stop hyperband needs a checkpoint: section");
    s_expect_error (ES ("early_stop: {algorithm: hyperband, max_t: 9, brackets: 4}\n"
                        "checkpoint: {store: /c}\n"),
                    3, 56, "early_stop.brackets 4 is more than max_t 9 and reduction_factor 3 "
                    "allow (floor(log(max_t) / log(reduction_factor)) + 1 = 3");
    s_expect_error (ES ("early_stop: {algorithm: hyperband, max_t: 2}\ncheckpoint: {store: /c}\n"),
                    3, 43, "early_stop.max_t 2 is below reduction_factor 3");
    s_expect_error (ES ("early_stop: {algorithm: hyperband, reduction_factor: 1.5}\n"
                        "checkpoint: {store: /c}\n"),
                    3, 36, "reduction_factor of hyperband must be at least 2, not 1.5");
    s_expect_error (ES ("early_stop: {algorithm: asha, brackets: 2}\n"), 3, 41,
                    "early_stop.brackets applies to algorithm hyperband only");
    s_expect_error (TRIAL "objective: {metric: loss, mode: min}\nsearch: {algorithm: bohb}\n",
                    3, 21, "algorithm bohb proposes the configurations of hyperband's brackets "
                    "and needs early_stop: {algorithm: hyperband");
    s_expect_error (ES ("early_stop: {algorithm: asha, grace: 0}\n"), 3, 38,
                    "early_stop.grace must be an integer >= 1, not 0");
    s_expect_error (ES ("early_stop: {algorithm: asha, reduction: 1}\n"), 3, 42,
                    "early_stop.reduction must be a number > 1, not 1");
    s_expect_error (ES ("early_stop: {algorithm: median, reduction: 2}\n"), 3, 33,
                    "early_stop.reduction applies to algorithms asha and hyperband only");
    s_expect_error (ES ("early_stop: {algorithm: asha, grace: 10, max: 5}\n"), 3, 47,
                    "early_stop.max 5 is below early_stop.grace 10");
    s_expect_error (ES ("early_stop: {algorithm: asha, graec: 1}\n"), 3, 31,
                    "unknown key 'graec' in early_stop (known keys: algorithm, attribute, "
                    "metric, objectives, mode, grace, reduction, max; hyperband also brackets");
    s_expect_error (ES ("early_stop: {algorithm: asha, metric: acc}\n"), 3, 1,
                    "early_stop.mode is missing");
    s_expect_error (ES ("early_stop: {algorithm: asha, mode: most}\n"), 3, 37,
                    "early_stop.mode must be max or min, not 'most'");
    s_expect_error (TRIAL "early_stop: {algorithm: asha}\n", 2, 1,
                    "early_stop.metric is missing and the spec has no objective");
#undef ES
}

// search.file is read by cgq_spec_load, relative to the spec, and inlined
// into spec->text on the same line, so the coordinator parses the same points.
static void
t_list_file (void **state)
{
    char dir[] = "/tmp/cgq-spec-list-XXXXXX";
    assert_non_null (mkdtemp (dir));
    char path[256], pj[256], pc[256];
    snprintf (path, sizeof path, "%s/tune.yaml", dir);
    snprintf (pj, sizeof pj, "%s/p.jsonl", dir);
    snprintf (pc, sizeof pc, "%s/p.csv", dir);
    FILE *f = fopen (pj, "w");
    fputs ("{\"x\": 0.5, \"name\": \"a b\"}\n\n{\"x\": 2, \"name\": \"it's\"}\n", f);
    fclose (f);
    f = fopen (pc, "w");
    fputs ("x,name\n0.25,plain\n3,\"quoted, \"\"text\"\"\"\n", f);
    fclose (f);
    const char *spec = "space:\n  x: {uniform: [0, 10]}\n  name: {choice: [a]}\n"
                       "search: {algorithm: list, file: p.jsonl, concurrency: 2}\n" TRIAL;
    f = fopen (path, "w");
    fputs (spec, f);
    fclose (f);
    char err[1024] = "";
    cgq_spec_t *s = cgq_spec_load (path, err, sizeof err);
    if (!s)
        fail_msg ("%s", err);
    assert_int_equal (json_array_size (s->search.points), 2);
    assert_string_equal (s->search.file, "p.jsonl");
    assert_string_equal (json_string_value (json_object_get (json_array_get (s->search.points, 1),
                                                             "name")),
                         "it's");
    assert_int_equal (s->search.concurrency, 2);
    // The inlined text keeps every line where it was and parses without the file.
    assert_non_null (strstr (s->text, "search: {algorithm: list, points: [{\"x\": 0.5"));
    assert_non_null (strstr (s->text, ", concurrency: 2}\ntrial:"));
    cgq_spec_t *again = cgq_spec_parse (s->text, strlen (s->text), "t.yaml", err, sizeof err);
    assert_non_null (again);
    assert_true (json_equal (again->search.points, s->search.points));
    cgq_spec_destroy (&again);
    cgq_spec_destroy (&s);

    f = fopen (path, "w");
    fputs ("space:\n  x: {uniform: [0, 10]}\n  name: {choice: [a]}\n"
           "search:\n  algorithm: list\n  file: \"p.csv\"\n" TRIAL,
           f);
    fclose (f);
    s = cgq_spec_load (path, err, sizeof err);
    if (!s)
        fail_msg ("%s", err);
    json_t *p1 = json_array_get (s->search.points, 1);
    assert_int_equal (json_integer_value (json_object_get (p1, "x")), 3);
    assert_string_equal (json_string_value (json_object_get (p1, "name")), "quoted, \"text\"");
    assert_true (json_real_value (json_object_get (json_array_get (s->search.points, 0), "x")) ==
                 0.25);
    cgq_spec_destroy (&s);

    // A point of the file that does not fit the space names the file's line.
    f = fopen (pj, "w");
    fputs ("{\"x\": 0.5, \"name\": \"a\"}\n{\"x\": 2}\n", f);
    fclose (f);
    f = fopen (path, "w");
    fputs (spec, f);
    fclose (f);
    s = cgq_spec_load (path, err, sizeof err);
    assert_null (s);
    assert_non_null (strstr (err, "tune.yaml:4:33: point of p.jsonl:2 has no value for param "
                                  "'name'"));
    f = fopen (pj, "w");
    fputs ("{\"x\": 0.5, \"name\": \"a\"}\n{\"x\": 2,\n", f);
    fclose (f);
    s = cgq_spec_load (path, err, sizeof err);
    assert_null (s);
    assert_non_null (strstr (err, "tune.yaml:4:33: search.file p.jsonl:2: "));
    unlink (pj);
    s = cgq_spec_load (path, err, sizeof err);
    assert_null (s);
    assert_non_null (strstr (err, "tune.yaml:4:33: search.file 'p.jsonl': cannot read"));
    unlink (pc);
    unlink (path);
    rmdir (dir);
}


static const char *s_sha = "9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08";

static void
t_device (void **state)
{
    (void) state;
    char err[1024], text[1024];
    snprintf (text, sizeof text,
              "space:\n"
              "  backends: {assignment: {items: [Conv2D, Pool2D], choices: [cpu, acl_cl]}}\n"
              "trial:\n"
              "  on: {device: odroid-xu4, os: tizen}\n"
              "  benchmark: nnpackage\n"
              "  artifact: {url: \"http://a:8080/m.tflite\", sha256: %s}\n"
              "  repeats: 50\n"
              "  warmup: 5\n"
              "  timeout: 60s\n"
              "  env: {BACKENDS: \"{backends}\"}\n",
              s_sha);
    cgq_spec_t *s = cgq_spec_parse (text, strlen (text), "d.yaml", err, sizeof err);
    assert_non_null (s);
    assert_int_equal (s->trial.kind, CGQ_TRIAL_DEVICE);
    assert_string_equal (s->trial.benchmark, "nnpackage");
    assert_string_equal (s->trial.artifact_url, "http://a:8080/m.tflite");
    // sha256 is kept lowercased: the runner compares it with what it computes.
    assert_string_equal (s->trial.artifact_sha256,
                         "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08");
    assert_int_equal (s->trial.repeats, 50);
    assert_int_equal (s->trial.warmup, 5);
    assert_true (s->trial.timeout_s == 60);
    assert_true (s->trial.cpu == 0); // a device, not a CPU slot
    char on[64];
    assert_string_equal (cgq_spec_stage_on (&s->trial, on, sizeof on),
                         "device=odroid-xu4, os=tizen");
    json_t *tags = json_pack ("{s:s, s:s, s:s}", "device", "odroid-xu4", "os", "tizen", "x", "y");
    assert_true (cgq_spec_stage_matches (&s->trial, tags));
    json_object_set_new (tags, "os", json_string ("android"));
    assert_false (cgq_spec_stage_matches (&s->trial, tags));
    json_object_del (tags, "os");
    assert_false (cgq_spec_stage_matches (&s->trial, tags));
    json_decref (tags);
    cgq_spec_destroy (&s);

    // Defaults, no artifact, a numeric tag value read as its text.
    const char *d = "trial: {on: {device: cpu-local, cores: 4}, benchmark: sleep}\n";
    s = cgq_spec_parse (d, strlen (d), "d.yaml", err, sizeof err);
    assert_non_null (s);
    assert_int_equal (s->trial.repeats, 0); // the runner's defaults (runner.yaml)
    assert_int_equal (s->trial.warmup, 0);
    assert_null (s->trial.artifact_url);
    json_t *t2 = json_pack ("{s:s, s:s}", "device", "cpu-local", "cores", "4");
    assert_true (cgq_spec_stage_matches (&s->trial, t2));
    json_decref (t2);
    cgq_spec_destroy (&s);

    // A command trial matches no device.
    const char *cmd = "trial: {command: x}\n";
    s = cgq_spec_parse (cmd, strlen (cmd), "c.yaml", err, sizeof err);
    assert_non_null (s);
    json_t *none = json_object ();
    assert_false (cgq_spec_stage_matches (&s->trial, none));
    json_decref (none);
    cgq_spec_destroy (&s);

    char sha[80];
    snprintf (sha, sizeof sha, "%s", s_sha);
    assert_int_equal (cgq_spec_check_artifact ("file:///tmp/m", sha, err, sizeof err), 0);
    assert_string_equal (sha, "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08");
    snprintf (sha, sizeof sha, "abc");
    assert_int_equal (cgq_spec_check_artifact ("file:///tmp/m", sha, err, sizeof err), -1);
    assert_non_null (strstr (err, "artifact sha256 'abc' is not 64 hex digits"));
    assert_int_equal (cgq_spec_check_artifact ("ftp://x/m", sha, err, sizeof err), -1);
    assert_non_null (strstr (err, "is not http://, https:// or file://"));
}

// measure: {passes: N}: kept for a one-stage device trial, absent is 0 (one
// pass); out of range, a misspelt key, a command trial and a stage refused at
// their line and column.
static void
t_measure_passes (void **state)
{
    (void) state;
    char err[512] = "";
    const char *y = "trial:\n  on: {device: x}\n  benchmark: b\n  measure: {passes: 2}\n";
    cgq_spec_t *s = cgq_spec_parse (y, strlen (y), "t.yaml", err, sizeof err);
    assert_non_null (s);
    assert_int_equal (s->trial.passes, 2);
    cgq_spec_destroy (&s);
    y = "trial: {on: {device: x}, benchmark: b}\n";
    s = cgq_spec_parse (y, strlen (y), "t.yaml", err, sizeof err);
    assert_non_null (s);
    assert_int_equal (s->trial.passes, 0);
    cgq_spec_destroy (&s);
    s_expect_error ("trial:\n  on: {device: x}\n  benchmark: b\n  measure: {passes: 3}\n", 4,
                    21, "trial.measure.passes");
    s_expect_error ("trial:\n  on: {device: x}\n  benchmark: b\n  measure: {passes: 0}\n", 4,
                    21, "trial.measure.passes");
    s_expect_error ("trial:\n  on: {device: x}\n  benchmark: b\n  measure: {pases: 2}\n", 4,
                    13, "did you mean 'passes'");
    s_expect_error ("trial:\n  on: {device: x}\n  benchmark: b\n  measure: 2\n", 4, 12,
                    "measure must be a mapping");
    s_expect_error ("trial:\n  command: x\n  measure: {passes: 2}\n", 3, 3,
                    "trial.measure belongs to a device trial");
    s_expect_error ("trial:\n  stages:\n    - {name: m, on: {device: x}, benchmark: b, "
                    "measure: {passes: 2}}\n",
                    3, 66, "not yet for trial.stages[]");
}

// A device trial's measure: block: every key, what travels in the Assign,
// and each bad value at its line and column.
static void
t_measure (void **state)
{
    (void) state;
    char err[1024];
    const char *y = "trial:\n"
                    "  on: {device: odroid}\n"
                    "  benchmark: b\n"
                    "  measure:\n"
                    "    warmup: 3\n"
                    "    repeats: 20\n"
                    "    precision: 0.02\n"
                    "    max_runs: 500\n"
                    "    max_time: 2m\n"
                    "    interference_reruns: 0\n"
                    "    governor: performance\n"
                    "    frequency: 1800000\n"
                    "    cooldown: {below_c: 50, max_wait: 30s}\n"
                    "    passes: 2\n";
    cgq_spec_t *s = cgq_spec_parse (y, strlen (y), "m.yaml", err, sizeof err);
    if (!s)
        fail_msg ("%s", err);
    const cgq_measure_spec_t *m = &s->trial.measure;
    assert_true (m->given);
    assert_int_equal (s->trial.repeats, 20); // old runners still get them
    assert_int_equal (s->trial.warmup, 3);
    assert_int_equal (m->passes, 2);
    assert_int_equal (m->interference_reruns, 0);
    char *j = cgq_spec_measure_json (m);
    json_t *o = json_loads (j, 0, NULL);
    assert_non_null (o);
    assert_true (json_real_value (json_object_get (o, "precision")) == 0.02);
    assert_int_equal (json_integer_value (json_object_get (o, "max_runs")), 500);
    assert_true (json_real_value (json_object_get (o, "max_time_s")) == 120);
    assert_int_equal (json_integer_value (json_object_get (o, "interference_reruns")), 0);
    assert_string_equal (json_string_value (json_object_get (o, "governor")), "performance");
    assert_int_equal (json_integer_value (json_object_get (o, "frequency_khz")), 1800000);
    assert_true (json_real_value (json_object_get (o, "cooldown_below_c")) == 50);
    assert_true (json_real_value (json_object_get (o, "cooldown_max_wait_s")) == 30);
    assert_int_equal (json_integer_value (json_object_get (o, "passes")), 2);
    json_decref (o);
    free (j);
    cgq_spec_destroy (&s);
    // Without measure: nothing travels; only the keys given do.
    const char *d = "trial: {on: {device: a}, benchmark: b}\n";
    s = cgq_spec_parse (d, strlen (d), "m.yaml", err, sizeof err);
    assert_null (cgq_spec_measure_json (&s->trial.measure));
    cgq_spec_destroy (&s);
    d = "trial: {on: {device: a}, benchmark: b, measure: {cooldown: {below_c: 45}}}\n";
    s = cgq_spec_parse (d, strlen (d), "m.yaml", err, sizeof err);
    j = cgq_spec_measure_json (&s->trial.measure);
    assert_string_equal (j, "{\"cooldown_below_c\":45.0,\"cooldown_max_wait_s\":120.0}");
    free (j);
    cgq_spec_destroy (&s);
    // In a stage too.
    d = "trial:\n  stages:\n  - {name: m, on: {device: a}, benchmark: b, measure: {passes: 1, "
        "precision: 0.05}}\n";
    s = cgq_spec_parse (d, strlen (d), "m.yaml", err, sizeof err);
    if (!s)
        fail_msg ("%s", err);
    assert_int_equal (s->stages[0].measure.passes, 1);
    assert_true (s->stages[0].measure.precision == 0.05);
    cgq_spec_destroy (&s);
#define S_DEV "trial:\n  on: {device: a}\n  benchmark: b\n"
    s_expect_error (S_DEV "  measure: {precision: 2}\n", 4, 24,
                    "measure.precision must be a share between 0 and 1 (exclusive), not 2");
    s_expect_error (S_DEV "  measure: {precision: 0}\n", 4, 24, "measure.precision must be");
    s_expect_error (S_DEV "  measure: {max_runs: 0}\n", 4, 23, "measure.max_runs must be");
    s_expect_error (S_DEV "  measure: {max_time: soon}\n", 4, 23,
                    "measure.max_time must be a duration > 0");
    s_expect_error (S_DEV "  measure: {governor: \"Perf ormance\"}\n", 4, 23,
                    "bad measure.governor 'Perf ormance'");
    s_expect_error (S_DEV "  measure: {frequency: 1.8GHz}\n", 4, 24, "measure.frequency must be");
    s_expect_error (S_DEV "  measure: {cooldown: {max_wait: 1m}}\n", 4, 23,
                    "measure.cooldown needs below_c");
    s_expect_error (S_DEV "  measure: {cooldown: {below_c: 500}}\n", 4, 33,
                    "measure.cooldown.below_c must be degrees Celsius between 0 and 150, not 500");
    s_expect_error (S_DEV "  measure: {cooldown: {below: 50}}\n", 4, 24,
                    "unknown key 'below' in measure.cooldown");
    s_expect_error (S_DEV "  measure: {passes: 0}\n", 4, 21, "measure.passes must be");
    s_expect_error (S_DEV "  measure: {warmups: 2}\n", 4, 13,
                    "unknown key 'warmups' in measure (known keys: warmup, repeats, precision, "
                    "max_runs, max_time, interference_reruns, governor, frequency, cooldown, "
                    "passes); did you mean 'warmup'?");
    s_expect_error (S_DEV "  measure: 3\n", 4, 12, "measure must be a mapping");
    s_expect_error (S_DEV "  repeats: 5\n  measure: {repeats: 6}\n", 5, 13,
                    "measure.repeats and trial.repeats say the same thing (keep one)");
    s_expect_error (S_DEV "  measure: {warmup: 2}\n  warmup: 5\n", 5, 3,
                    "trial.warmup and measure.warmup say the same thing (keep one)");
    s_expect_error ("trial:\n  command: x\n  measure: {precision: 0.1}\n", 3, 3,
                    "trial.measure belongs to a device trial");
#undef S_DEV
}

static void
t_err_device (void **state)
{
    (void) state;
    s_expect_error ("trial: {on: {device: x}, benchmark: b, command: run}\n", 1, 40,
                    "trial.command does not go with benchmark: a runner runs only the benchmarks "
                    "of its own config, never a command from a spec (remove command, or "
                    "benchmark)");
    s_expect_error ("trial:\n  benchmark: b\n", 2, 3,
                    "a device trial needs trial.on, the tags of the devices that may run it "
                    "(write on: {device: odroid-xu4})");
    s_expect_error ("trial:\n  command: x\n  on: {device: x}\n", 3, 3,
                    "trial.on belongs to a device trial, which names a benchmark");
    s_expect_error ("trial:\n  command: x\n  repeats: 5\n", 3, 3,
                    "trial.repeats belongs to a device trial");
    s_expect_error ("trial:\n  on: {device: x}\n  benchmark: b\n  kind: noop\n", 4, 3,
                    "trial.kind does not go with benchmark");
    s_expect_error ("trial:\n  on: {device: x}\n  benchmark: b\n  resources: {cpu: 1}\n", 4, 3,
                    "trial.resources does not apply to a device trial");
    s_expect_error ("trial:\n  on: {}\n  benchmark: b\n", 2, 7,
                    "trial.on is empty (write on: {device: odroid-xu4})");
    s_expect_error ("trial:\n  on: device\n  benchmark: b\n", 2, 7,
                    "trial.on must be a mapping, not the string 'device'");
    s_expect_error ("trial:\n  on: {device: [a, b]}\n  benchmark: b\n", 2, 16,
                    "trial.on.device must be a tag value, not a list");
    s_expect_error ("trial:\n  on: {\"de vice\": a}\n  benchmark: b\n", 2, 8,
                    "bad tag name 'de vice' in trial.on");
    s_expect_error ("trial:\n  on: {device: \"a,b\"}\n  benchmark: b\n", 2, 16,
                    "trial.on.device 'a,b' holds a blank, ',' or '='");
    s_expect_error ("trial:\n  on: {device: a}\n  benchmark: \"rm -rf\"\n", 3, 14,
                    "bad benchmark name 'rm -rf'");
    s_expect_error ("trial:\n  on: {device: a}\n  benchmark: b\n  repeats: 0\n", 4, 12,
                    "trial.repeats must be an integer >= 1, not 0");
    s_expect_error ("trial:\n  on: {device: a}\n  benchmark: b\n  warmup: 0\n", 4, 11,
                    "trial.warmup must be an integer >= 1, not 0 (write e.g. warmup: 5, or leave "
                    "it out for the runner's default)");
    s_expect_error ("trial:\n  on: {device: a}\n  benchmark: b\n  artifact: {url: x}\n", 4, 13,
                    "trial.artifact.sha256 is missing");
    s_expect_error ("trial:\n  on: {device: a}\n  benchmark: b\n  artifact: {sha256: ab}\n", 4,
                    13, "trial.artifact.url is missing");
    s_expect_error ("trial:\n  on: {device: a}\n  benchmark: b\n"
                    "  artifact: {url: \"ftp://h/m\", sha256: ab}\n",
                    4, 19, "trial.artifact url 'ftp://h/m' is not http://, https:// or file://");
    s_expect_error ("trial:\n  on: {device: a}\n  benchmark: b\n"
                    "  artifact: {url: \"http://h/m\", sha256: ab}\n",
                    4, 41, "trial.artifact sha256 'ab' is not 64 hex digits");
    s_expect_error ("trial:\n  on: {device: a}\n  benchmark: b\n"
                    "  artifact: {url: \"http://h/{model}\", sha256: \"{sha}\"}\n",
                    4, 19, "unknown placeholder '{model}' in trial.artifact.url");
    s_expect_error ("trial:\n  on: {device: a}\n  benchmark: b\n"
                    "  artifact: {url: \"http://h/m\", sha: x}\n",
                    4, 33, "unknown key 'sha' in trial.artifact (known keys: url, sha256)");
}

static const char *s_stages =
    "space:\n"
    "  lr: {choice: [0.1, 0.01]}\n"
    "objective: {expr: \"acc * 100 / latency\", mode: max}\n"
    "trial:\n"
    "  retries: 2\n"
    "  timeout: 1m\n"
    "  env: {COMMON: \"{lr}\"}\n"
    "  stages:\n"
    "    - name: train\n"
    "      command: ./train.sh {lr}\n"
    "      resources: {cpu: 2}\n"
    "    - name: measure\n"
    "      on: {device: board}\n"
    "      benchmark: run\n"
    "      artifact: {url: \"http://h/{train.model}.tflite\", sha256: \"{train.sha}\"}\n"
    "      retries: 0\n"
    "      timeout: 10s\n"
    "    - name: report\n"
    "      command: [./report, \"{train.acc}\", \"{measure.latency}\", \"{lr}\"]\n"
    "      env: {LAT: \"{measure.p50_ms}\"}\n";

static void
t_stages (void **state)
{
    (void) state;
    char err[512];
    cgq_spec_t *s = cgq_spec_parse (s_stages, strlen (s_stages), "st.yaml", err, sizeof err);
    if (!s)
        fail_msg ("%s", err);
    assert_int_equal (s->nstages, 3);
    assert_int_equal (cgq_spec_nstages (s), 3);
    const cgq_stage_t *a = cgq_spec_stage (s, 0), *b = cgq_spec_stage (s, 1),
                      *r = cgq_spec_stage (s, 2);
    assert_null (cgq_spec_stage (s, 3));
    assert_string_equal (a->name, "train");
    assert_int_equal (a->kind, CGQ_TRIAL_COMMAND);
    assert_string_equal (a->command, "./train.sh {lr}");
    assert_true (a->cpu == 2);
    assert_int_equal (a->retries, 2); // trial.retries is every stage's default
    assert_true (a->timeout_s == 60);
    assert_string_equal (b->name, "measure");
    assert_int_equal (b->kind, CGQ_TRIAL_DEVICE);
    assert_true (b->cpu == 0);
    assert_int_equal (b->retries, 0);
    assert_true (b->timeout_s == 10);
    assert_string_equal (b->benchmark, "run");
    assert_int_equal (r->argc, 4);
    assert_int_equal (r->nenv, 1);
    assert_int_equal (s->trial.nenv, 1); // trial.env: given to every stage
    assert_int_equal (cgq_spec_stage_index (s, "measure", 7), 1);
    assert_int_equal (cgq_spec_stage_index (s, "nope", 4), -1);
    // A later stage renders an earlier stage's metric as STAGE.METRIC.
    json_t *p = json_pack ("{s:f, s:f}", "lr", 0.1, "train.acc", 0.75);
    char *out = cgq_template_render ("{train.acc} {lr}", p, 1, 2, "", 0, err, sizeof err);
    assert_string_equal (out, "0.75 0.1");
    free (out);
    json_decref (p);
    // Without stages: one stage, trial: itself.
    cgq_spec_t *one = cgq_spec_parse ("trial: {command: x}\n", 20, "o.yaml", err, sizeof err);
    assert_non_null (one);
    assert_int_equal (cgq_spec_nstages (one), 1);
    assert_ptr_equal (cgq_spec_stage (one, 0), &one->trial);
    assert_null (cgq_spec_stage (one, 1));
    cgq_spec_destroy (&one);
    cgq_spec_destroy (&s);
}

static void
t_assignment_env (void **state)
{
    (void) state;
    char err[512];
    const char *y = "space:\n  b: {assignment: {items: [Conv2D, Pool], choices: [cpu, gpu], "
                    "env: \"OP_BACKEND_{item}={choice}\"}}\n" TRIAL;
    cgq_spec_t *s = cgq_spec_parse (y, strlen (y), "t.yaml", err, sizeof err);
    if (!s)
        fail_msg ("%s", err);
    assert_string_equal (cgq_spec_param (s, "b")->env, "OP_BACKEND_{item}={choice}");
    cgq_spec_destroy (&s);
    s_expect_error ("space:\n  b: {assignment: {items: [a], choices: [x], env: \"X_{item}\"}}\n" TRIAL,
                    2, 51, "space.b.assignment.env 'X_{item}' has no '=' (NAME=VALUE");
    s_expect_error ("space:\n  b: {assignment: {items: [a], choices: [x], env: \"X={item}\"}}\n" TRIAL,
                    2, 51, "the name before '=' has no {item}, so every item would set the same");
    s_expect_error ("space:\n  b: {assignment: {items: [a], choices: [x], env: \"X_{item}={lr}\"}}\n"
                    TRIAL,
                    2, 51, "unknown placeholder at byte 9 (only {item} and {choice}");
}

static void
t_err_stages (void **state)
{
    (void) state;
    s_expect_error ("trial:\n  stages: []\n", 2, 11, "trial.stages is empty");
    s_expect_error ("trial:\n  stages: {a: 1}\n", 2, 11, "trial.stages must be a list of stages");
    s_expect_error ("trial:\n  command: x\n  stages:\n    - {name: a, command: y}\n", 2, 3,
                    "trial.command does not go with trial.stages: each stage says what it runs "
                    "(move command into a stage");
    s_expect_error ("trial:\n  stages:\n    - {name: a, command: y}\n  benchmark: b\n", 4, 3,
                    "trial.benchmark does not go with trial.stages");
    s_expect_error ("trial:\n  stages:\n    - {name: a, command: y}\n    - {name: a, command: z}\n",
                    4, 7, "duplicate stage name 'a' (the stage at 3:7 has it");
    s_expect_error ("trial:\n  stages:\n    - {command: y}\n", 3, 7,
                    "trial.stages[0] has no name (write name: train");
    s_expect_error ("trial:\n  stages:\n    - {name: 1a, command: y}\n", 3, 14,
                    "bad stage name '1a'");
    s_expect_error ("trial:\n  stages:\n    - {name: a}\n", 3, 7, "stage 'a' has no command");
    s_expect_error ("trial:\n  stages:\n    - {name: a, command: y, stages: []}\n", 3, 29,
                    "unknown key 'stages' in trial.stages[]");
    s_expect_error ("trial:\n  stages:\n    - a\n", 3, 7, "trial.stages[0] must be a mapping");
    // A stage reads the metrics of the stages before it only.
    s_expect_error ("trial:\n  stages:\n    - {name: a, command: \"x {b.acc}\"}\n"
                    "    - {name: b, command: y}\n",
                    3, 26,
                    "'{b.acc}' in trial.stages[0].command names a metric of stage 'b', which runs "
                    "after stage 'a' (a stage sees the metrics of the stages before it only");
    s_expect_error ("trial:\n  stages:\n    - {name: a, command: y}\n"
                    "    - {name: b, command: [y, \"{b.acc}\"]}\n",
                    4, 30, "'{b.acc}' in trial.stages[1].command[1] names this stage's own metric");
    s_expect_error ("trial:\n  stages:\n    - {name: a, command: y}\n"
                    "    - {name: b, command: y, env: {X: \"{c.acc}\"}}\n",
                    4, 38, "'{c.acc}' in trial.stages[1].env.X names no stage before this one");
    s_expect_error ("trial:\n  env: {X: \"{a.acc}\"}\n  stages:\n    - {name: a, command: y}\n",
                    2, 12, "'{a.acc}' in trial.env.X names a metric of stage 'a'");
    s_expect_error ("trial: {command: \"x {a.acc}\"}\n", 1, 18,
                    "{STAGE.METRIC} reads an earlier stage's metric, and this trial has no stages");
    s_expect_error ("trial:\n  stages:\n    - {name: a, command: y}\n    - {name: b, command: y}\n"
                    "    - {name: c, command: y}\n    - {name: d, command: y}\n"
                    "    - {name: e, command: y}\n    - {name: f, command: y}\n"
                    "    - {name: g, command: y}\n    - {name: h, command: y}\n"
                    "    - {name: i, command: y}\n",
                    11, 7, "trial.stages has 9 stages, more than 8");
}

// kind: client (a Python study's trials): only timeout, retries and env
// beside it; never a stage; needs no CPU.
static void
t_client_kind (void **state)
{
    (void) state;
    char err[1024] = "";
    const char *y = "trial: {kind: client, timeout: 10m, retries: 1}\n";
    cgq_spec_t *s = cgq_spec_parse (y, strlen (y), "t.yaml", err, sizeof err);
    assert_non_null (s);
    assert_int_equal (s->trial.kind, CGQ_TRIAL_CLIENT);
    assert_true (s->trial.cpu == 0);
    assert_true (s->trial.timeout_s == 600);
    cgq_spec_destroy (&s);
    s_expect_error ("trial:\n  kind: client\n  command: python3 x.py\n", 3, 3,
                    "trial.command does not go with kind: client");
    s_expect_error ("trial:\n  resources: {cpu: 2}\n  kind: client\n", 2, 3,
                    "trial.resources does not go with kind: client");
    s_expect_error ("trial:\n  kind: client\n  on: {device: a}\n  benchmark: b\n", 4, 3,
                    "trial.benchmark does not go with kind: client");
    s_expect_error ("trial:\n  stages:\n    - {name: a, kind: client}\n", 3, 23,
                    "kind: client does not go in trial.stages");
    s_expect_error ("trial: {kind: clinet}\n", 1, 15,
                    "expected one of: command, noop, predictor, client");
}


// constraints: [...]: comparisons kept in order; a trial's metrics judged
// (by how much each violated one is exceeded; a missing metric: infeasible
// with a warning); a non-comparison, an unparsable one and an empty list
// refused at their line and column.
static void
t_constraints (void **state)
{
    (void) state;
    const char *y = TRIAL "objective: {metric: acc, mode: max}\n"
                          "constraints: [\"latency_ms <= 20\", \"params <= 5e6\", 'acc > 0.5',\n"
                          "              \"2*mem >= 4\"]\n";
    char err[512] = "";
    cgq_spec_t *s = cgq_spec_parse (y, strlen (y), "t.yaml", err, sizeof err);
    assert_non_null (s);
    assert_int_equal (s->nconstraints, 4);
    assert_string_equal (s->constraints[0].text, "latency_ms <= 20");
    assert_int_equal (s->constraints[0].op, CGQ_EXPR_CMP_LE);
    assert_int_equal (s->constraints[2].op, CGQ_EXPR_CMP_GT);
    assert_int_equal (s->constraints[3].op, CGQ_EXPR_CMP_GE);

    json_t *m = json_pack ("{s:f, s:f, s:f, s:f}", "latency_ms", 12.0, "params", 1e6, "acc", 0.9,
                           "mem", 3.0);
    double total = -1;
    json_t *viol = NULL;
    char *warn = NULL;
    assert_true (cgq_spec_feasible (s, m, &total, &viol, &warn));
    assert_true (total == 0);
    assert_null (viol);
    assert_null (warn);
    json_object_set_new (m, "latency_ms", json_real (23.5));
    json_object_set_new (m, "acc", json_real (0.5)); // equal: > refuses it
    json_object_set_new (m, "mem", json_real (1.0));
    assert_false (cgq_spec_feasible (s, m, &total, &viol, &warn));
    assert_non_null (viol);
    assert_null (warn);
    assert_int_equal (json_object_size (viol), 3);
    assert_true (json_real_value (json_object_get (viol, "latency_ms <= 20")) == 3.5);
    assert_true (json_real_value (json_object_get (viol, "2*mem >= 4")) == 2.0);
    assert_true (json_real_value (json_object_get (viol, "acc > 0.5")) > 0);
    assert_null (json_object_get (viol, "params <= 5e6"));
    assert_true (total >= 5.5 && total < 5.5 + 1e-9);
    json_decref (viol);
    json_object_del (m, "params"); // a typo or a metric not reported: never silently feasible
    json_object_set_new (m, "latency_ms", json_real (1));
    json_object_set_new (m, "acc", json_real (1));
    json_object_set_new (m, "mem", json_real (9));
    assert_false (cgq_spec_feasible (s, m, &total, &viol, &warn));
    assert_true (isinf (total));
    assert_true (json_is_null (json_object_get (viol, "params <= 5e6")));
    assert_non_null (warn);
    assert_non_null (strstr (warn, "constraint \"params <= 5e6\" cannot be computed"));
    free (warn);
    json_decref (viol);
    json_decref (m);
    cgq_spec_destroy (&s);

    s_expect_error (TRIAL "constraints: [\"latency_ms + 20\"]\n", 2, 15,
                    "constraints[0] \"latency_ms + 20\" is not a comparison EXPR <= EXPR");
    s_expect_error (TRIAL "constraints: [\"a <= 1\", \"a == 1\"]\n", 2, 25,
                    "== and != are not");
    s_expect_error (TRIAL "constraints: [\"where(a < 1, 1, 0)\"]\n", 2, 15, "not a comparison");
    s_expect_error (TRIAL "constraints:\n  - \"lat <= \"\n", 3, 13, "constraints[0]: ");
    s_expect_error (TRIAL "constraints: [\"a <= 1 <= 2\"]\n", 2, 23, "do not chain");
    s_expect_error (TRIAL "constraints: []\n", 2, 1, "constraints is an empty list");
    s_expect_error (TRIAL "constraints: \"a <= 1\"\n", 2, 14, "must be a list of comparisons");
    s_expect_error (TRIAL "constraints: [\"a <= 1\", \"a <= 1\"]\n", 2, 25, "repeats");
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (t_full),
        cmocka_unit_test (t_defaults),
        cmocka_unit_test (t_fail_fast),
        cmocka_unit_test (t_blocked_timeout),
        cmocka_unit_test (t_scalar_types),
        cmocka_unit_test (t_err_syntax),
        cmocka_unit_test (t_err_limits),
        cmocka_unit_test (t_err_deep_flow),
        cmocka_unit_test (t_limits_just_under),
        cmocka_unit_test (t_limits_wide),
        cmocka_unit_test (t_err_nul),
        cmocka_unit_test (t_err_anchors),
        cmocka_unit_test (t_err_top),
        cmocka_unit_test (t_err_nested_key),
        cmocka_unit_test (t_err_wrong_type),
        cmocka_unit_test (t_err_distributions),
        cmocka_unit_test (t_new_kinds),
        cmocka_unit_test (t_err_new_kinds),
        cmocka_unit_test (t_err_search),
        cmocka_unit_test (t_err_trial),
        cmocka_unit_test (t_err_placeholder),
        cmocka_unit_test (t_err_duplicate),
        cmocka_unit_test (t_err_objective),
        cmocka_unit_test (t_err_param_name),
        cmocka_unit_test (t_load),
        cmocka_unit_test (t_search_new),
        cmocka_unit_test (t_err_search_new),
        cmocka_unit_test (t_search_tpe),
        cmocka_unit_test (t_search_cmaes),
        cmocka_unit_test (t_err_objectives),
        cmocka_unit_test (t_err_early_stop),
        cmocka_unit_test (t_list_file),
        cmocka_unit_test (t_device),
        cmocka_unit_test (t_err_device),
        cmocka_unit_test (t_measure),
        cmocka_unit_test (t_notify),
        cmocka_unit_test (t_checkpoint),
        cmocka_unit_test (t_stages),
        cmocka_unit_test (t_client_kind),
        cmocka_unit_test (t_err_stages),
        cmocka_unit_test (t_measure_passes),
        cmocka_unit_test (t_assignment_env),
        cmocka_unit_test (t_constraints),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
