// The task supervisor with real child processes (/bin/sh scripts).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "assert_json.h"
#include "spare.h"
#include "task.h"
#include "task_testing.h"
#include "util.h"

// How a fixture's trials start: the default way (launch.c), by fork
// (as where clone3 is missing), or in directories made ahead (spare.h).
typedef enum { S_DEFAULT = 0, S_FORK, S_SPARE } s_mode_t;
static s_mode_t s_fork = S_FORK;
static s_mode_t s_spare = S_SPARE;

typedef struct {
    s_mode_t mode;
    cgq_spare_t *spare;    // S_SPARE
    char dir[64];          // the temp workdir
    uint64_t seqs[16];     // seq of each report callback
    char *reports[16];     // their JSON
    size_t n_reports;
} s_fixture_t;

static int
s_setup (void **state)
{
    s_fixture_t *f = cgq_xcalloc (1, sizeof *f);
    f->mode = *state ? *(s_mode_t *) *state : S_DEFAULT;
    strcpy (f->dir, "/tmp/cgq-task-test-XXXXXX");
    if (!mkdtemp (f->dir))
        return -1;
    cgq_task_spawn_fork = f->mode == S_FORK;
    if (f->mode == S_SPARE) {
        // Ready before the test starts, else the trials would not use them.
        f->spare = cgq_spare_new (f->dir, 2);
        for (int i = 0; i < 400 && f->spare && cgq_spare_ready (f->spare) < 2; i++)
            usleep (5000);
        if (!f->spare || cgq_spare_ready (f->spare) < 2)
            return -1;
    }
    *state = f;
    return 0;
}

static int
s_teardown (void **state)
{
    s_fixture_t *f = *state;
    cgq_spare_destroy (&f->spare);
    cgq_task_spawn_fork = false;
    char *cmd = cgq_xasprintf ("rm -rf '%s'", f->dir);
    int rc = system (cmd);
    free (cmd);
    for (size_t i = 0; i < f->n_reports; i++)
        free (f->reports[i]);
    free (f);
    return rc == 0 ? 0 : -1;
}

static void
s_on_report (void *arg, cgq_task_t *task, const char *report_json, uint64_t seq)
{
    s_fixture_t *f = arg;
    if (f->n_reports < 16) {
        f->seqs[f->n_reports] = seq;
        f->reports[f->n_reports++] = cgq_xstrdup (report_json);
    }
}

static cgq_task_opts_t
s_opts (s_fixture_t *f)
{
    return (cgq_task_opts_t) {
        .workdir = f->dir, .log_cap = 1 << 20, .kill_grace_ms = 300, .spare = f->spare};
}

static char *
s_read_file (const char *dir, const char *name)
{
    char *path = cgq_xasprintf ("%s/%s", dir, name);
    FILE *fp = fopen (path, "r");
    free (path);
    if (!fp)
        return NULL;
    cgq_buf_t b;
    cgq_buf_init (&b);
    cgq_buf_read (&b, fp);
    fclose (fp);
    return cgq_buf_take (&b);
}

// s_gone: the process no longer exists, or is a zombie nobody has reaped yet.
static bool
s_gone (pid_t pid)
{
    if (kill (pid, 0) < 0 && errno == ESRCH)
        return true;
    char path[64];
    snprintf (path, sizeof path, "/proc/%d/stat", (int) pid);
    FILE *fp = fopen (path, "r");
    if (!fp)
        return true;
    char line[512] = "";
    char *ok = fgets (line, sizeof line, fp);
    fclose (fp);
    const char *paren = ok ? strrchr (line, ')') : NULL;
    return paren && paren[1] == ' ' && paren[2] == 'Z';
}

// s_child_fds waits (2 s at most) until pid has exec'd /bin/sh, then returns
// its open fds, ascending, comma-separated, but stdin when it is /dev/null
// (a /dev/null anywhere else is listed: the worker keeps one open). Caller
// frees.
static char *
s_child_fds (pid_t pid)
{
    char path[64], buf[256];
    snprintf (path, sizeof path, "/proc/%d/cmdline", (int) pid);
    for (int i = 0; i < 200; i++) {
        FILE *fp = fopen (path, "r");
        size_t n = fp ? fread (buf, 1, sizeof buf - 1, fp) : 0;
        if (fp)
            fclose (fp);
        buf[n] = 0;
        if (strcmp (buf, "/bin/sh") == 0)
            break;
        usleep (10000);
    }
    usleep (50000); // past dash's start-up, into the sleep
    bool open_fd[64] = {false};
    for (int fd = 0; fd < 64; fd++) {
        snprintf (path, sizeof path, "/proc/%d/fd/%d", (int) pid, fd);
        ssize_t n = readlink (path, buf, sizeof buf - 1);
        if (n < 0)
            continue;
        buf[n] = 0;
        open_fd[fd] = fd != 0 || strcmp (buf, "/dev/null") != 0;
    }
    cgq_buf_t b;
    cgq_buf_init (&b);
    for (int fd = 0; fd < 64; fd++)
        if (open_fd[fd])
            cgq_buf_printf (&b, "%s%d", b.len ? "," : "", fd);
    return cgq_buf_take (&b);
}

static void
test_reports_and_env (void **state)
{
    s_fixture_t *f = *state;
    tt_assign_t sa;
    tt_assign_init (&sa, 7, 3,
                   "sleep 0.4; echo hello-stdout; echo hello-stderr >&2;"
                   "echo '{\"step\": 1, \"loss\": 0.5}' >&3;"
                   "echo '{\"step\": 2, \"loss\": 0.1, \"tag\": \"a\\\"b\"}' >&3;"
                   "printf '{\"step\": 3, \"loss\": 0.125}' >&3;" // no newline at the end
                   "env > env.txt; pwd > pwd.txt");
    sa.a.params_json = "{\"lr\": 0.01, \"layers\": 3, \"opt\": \"adam\", \"lr-max\": 1e-3,"
                       " \"nested\": {\"a\": [1, 0.1]}, \"flag\": true}";
    uint32_t gpus[] = {1, 3};
    sa.a.gpus = gpus;
    sa.a.n_gpus = 2;
    Cgq__KeyValue kv = CGQ__KEY_VALUE__INIT;
    kv.key = "MY_VAR";
    kv.value = "my value";
    Cgq__KeyValue kv2 = CGQ__KEY_VALUE__INIT;
    kv2.key = "CGQ_JOB_ID"; // the contract variables win over trial.env
    kv2.value = "999";
    Cgq__KeyValue *env[] = {&kv, &kv2};
    sa.a.env = env;
    sa.a.n_env = 2;
    sa.a.spec_dir = "/specs/here";
    cgq_task_opts_t opts = s_opts (f);
    // An inheritable fd of the worker's (as a library might leave one) must
    // not reach the trial.
    int zero = open ("/dev/zero", O_RDONLY);
    assert_true (zero >= 0);
    int stray = fcntl (zero, F_DUPFD, 20);
    close (zero);
    assert_true (stray >= 20 && stray < 64);
    cgq_task_t *task = cgq_task_start (&sa.a, &opts, s_on_report, f);
    close (stray);
    assert_false (cgq_task_done (task));
    assert_true (cgq_task_pid (task) > 0);
    // Only stdout, stderr and the report pipe are inherited (besides stdin,
    // /dev/null): not the worker's /dev/null, nor the pipes it made ahead for
    // the next start (the second run of this test takes pipes made ahead).
    // Read from outside while the shell waits in its first sleep: from
    // inside, dash's own pipeline pipes and saved fds show up.
    char *fds = s_child_fds (cgq_task_pid (task));
    assert_string_equal (fds, "1,2,3");
    free (fds);
    Cgq__Result *r = tt_run (task, 5000);
    assert_non_null (r);
    assert_int_equal (r->status, CGQ__TASK_STATUS__TASK_SUCCEEDED);
    assert_string_equal (r->error, "");
    assert_int_equal (r->exit_code, 0);
    assert_int_equal (r->reports, 3);
    cgq_assert_json (r->metrics_json, "{\"step\": 3, \"loss\": 0.125}");
    assert_int_equal (f->n_reports, 3);
    assert_int_equal (f->seqs[0], 1);
    assert_int_equal (f->seqs[2], 3);
    assert_string_equal (f->reports[0], "{\"step\":1,\"loss\":0.5}");
    assert_string_equal (f->reports[1], "{\"step\":2,\"loss\":0.1,\"tag\":\"a\\\"b\"}");
    assert_non_null (strstr (r->log_tail, "hello-stdout"));
    assert_non_null (strstr (r->log_tail, "hello-stderr"));

    char *dir = cgq_xasprintf ("%s/job-7/trial-3/attempt-1", f->dir);
    assert_string_equal (r->trial_dir, dir);
    assert_string_equal (cgq_task_dir (task), dir);
    char *text = s_read_file (dir, "pwd.txt");
    assert_non_null (text);
    char *expect = cgq_xasprintf ("%s\n", dir);
    assert_string_equal (text, expect);
    free (text);
    free (expect);
    text = s_read_file (dir, "stdout.log");
    assert_string_equal (text, "hello-stdout\n");
    free (text);
    text = s_read_file (dir, "stderr.log");
    assert_string_equal (text, "hello-stderr\n");
    free (text);


    char *envs = s_read_file (dir, "env.txt");
    assert_non_null (envs);
    const char *want[] = {
        "\nCGQ_JOB_ID=7\n", "\nCGQ_TRIAL_ID=3\n", "\nCGQ_ATTEMPT=1\n",
        "\nCGQ_PARAM_LR=0.01\n", "\nCGQ_PARAM_LAYERS=3\n", "\nCGQ_PARAM_OPT=adam\n",
        "\nCGQ_PARAM_LR_MAX=0.001\n", "\nCGQ_PARAM_NESTED={\"a\":[1,0.1]}\n",
        "\nCGQ_PARAM_FLAG=true\n", "\nCGQ_SPEC_DIR=/specs/here\n", "\nCGQ_REPORT_FD=3\n",
        "\nCUDA_VISIBLE_DEVICES=1,3\n", "\nMY_VAR=my value\n", "\nCGQ_PARAMS={\"lr\": 0.01,",
        // GPU indices are nvidia-smi's (PCI bus order); CUDA numbers the
        // fastest GPU first unless told otherwise.
        "\nCUDA_DEVICE_ORDER=PCI_BUS_ID\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        if (!strstr (envs, want[i]))
            fail_msg ("%s not in the environment:\n%s", want[i], envs);
    char *trial_dir_var = cgq_xasprintf ("\nCGQ_TRIAL_DIR=%s\n", dir);
    assert_non_null (strstr (envs, trial_dir_var));
    // The worker's own environment is passed on.
    assert_non_null (strstr (envs, "\nPATH="));
    free (trial_dir_var);
    free (envs);
    free (dir);
    cgq_result_destroy (&r);
    assert_null (r);
    cgq_task_destroy (&task);
    assert_null (task);
}

static void
test_result_json_wins (void **state)
{
    s_fixture_t *f = *state;
    tt_assign_t sa;
    tt_assign_init (&sa, 7, 4,
                   "echo '{\"loss\": 9}' >&3; echo '{\"acc\": 0.9, \"loss\": 0.1}' > result.json;"
                   // no GPU granted: the variable is set, and empty
                   "test \"${CUDA_VISIBLE_DEVICES-unset}\" = '' || exit 3");
    cgq_task_opts_t opts = s_opts (f);
    cgq_task_t *task = cgq_task_start (&sa.a, &opts, NULL, NULL);
    Cgq__Result *r = tt_run (task, 5000);
    assert_non_null (r);
    assert_int_equal (r->status, CGQ__TASK_STATUS__TASK_SUCCEEDED);
    cgq_assert_json (r->metrics_json, "{\"acc\": 0.9, \"loss\": 0.1}");
    assert_int_equal (r->reports, 1);
    cgq_result_destroy (&r);
    cgq_task_destroy (&task);
}

static void
test_huge_result_json_fails (void **state)
{
    s_fixture_t *f = *state;
    tt_assign_t sa;
    tt_assign_init (&sa, 7, 16,
                   "{ printf '{\"x\": \"'; head -c 1100000 /dev/zero | tr '\\0' a;"
                   " printf '\"}'; } > result.json");
    cgq_task_opts_t opts = s_opts (f);
    cgq_task_t *task = cgq_task_start (&sa.a, &opts, NULL, NULL);
    Cgq__Result *r = tt_run (task, 8000);
    assert_non_null (r);
    assert_int_equal (r->status, CGQ__TASK_STATUS__TASK_FAILED);
    assert_string_equal (r->metrics_json, "{}");
    assert_non_null (strstr (r->error, "result metrics are 1100008 bytes, more than the limit"));
    cgq_result_destroy (&r);
    cgq_task_destroy (&task);

    // Past twice the limit the file is not even read (it could be gigabytes).
    tt_assign_init (&sa, 7, 17,
                   "{ printf '{\"x\": \"'; head -c 3000000 /dev/zero | tr '\\0' a;"
                   " printf '\"}'; } > result.json");
    task = cgq_task_start (&sa.a, &opts, NULL, NULL);
    r = tt_run (task, 8000);
    assert_non_null (r);
    assert_int_equal (r->status, CGQ__TASK_STATUS__TASK_FAILED);
    assert_string_equal (r->metrics_json, "{}");
    assert_non_null (strstr (r->error, "result metrics are 3000009 bytes, more than the limit"));
    cgq_result_destroy (&r);
    cgq_task_destroy (&task);
}

// A result.json that is empty or ends before its object does is a write that
// did not complete (a full disk): the trial fails; its last report is not the
// result it meant to give. One complete but followed by junk is only ignored.
static void
test_result_json_cut_fails (void **state)
{
    s_fixture_t *f = *state;
    const char *cmds[2] = {"echo '{\"score\": 1}' >&3; : > result.json",
                           "echo '{\"score\": 1}' >&3; printf '{\"score\": 9' > result.json"};
    const char *want[2] = {"result.json could not be written: the trial's write of it did not "
                           "complete (it holds 0 bytes, ",
                           "result.json could not be written: the trial's write of it did not "
                           "complete (it holds 11 bytes, "};
    cgq_task_opts_t opts = s_opts (f);
    for (int i = 0; i < 2; i++) {
        tt_assign_t sa;
        tt_assign_init (&sa, 7, 40 + (uint64_t) i, cmds[i]);
        cgq_task_t *task = cgq_task_start (&sa.a, &opts, NULL, NULL);
        Cgq__Result *r = tt_run (task, 5000);
        assert_non_null (r);
        assert_int_equal (r->status, CGQ__TASK_STATUS__TASK_FAILED);
        if (strncmp (r->error, want[i], strlen (want[i])) != 0)
            fail_msg ("error %s, want it to start with %s", r->error, want[i]);
        cgq_result_destroy (&r);
        cgq_task_destroy (&task);
    }
    tt_assign_t sa;
    tt_assign_init (&sa, 7, 42, "echo '{\"score\": 1}' >&3; echo '{\"score\": 9} x' > result.json");
    cgq_task_t *task = cgq_task_start (&sa.a, &opts, NULL, NULL);
    Cgq__Result *r = tt_run (task, 5000);
    assert_non_null (r);
    assert_int_equal (r->status, CGQ__TASK_STATUS__TASK_SUCCEEDED);
    cgq_assert_json (r->metrics_json, "{\"score\": 1}");
    assert_string_equal (r->error, "");
    cgq_result_destroy (&r);
    cgq_task_destroy (&task);
}

static void
test_no_reports_empty_metrics (void **state)
{
    s_fixture_t *f = *state;
    tt_assign_t sa;
    // A result.json that is not an object is ignored (with a warning).
    tt_assign_init (&sa, 7, 5, "echo '[1]' > result.json");
    cgq_task_opts_t opts = s_opts (f);
    cgq_task_t *task = cgq_task_start (&sa.a, &opts, NULL, NULL);
    Cgq__Result *r = tt_run (task, 5000);
    assert_non_null (r);
    assert_int_equal (r->status, CGQ__TASK_STATUS__TASK_SUCCEEDED);
    assert_string_equal (r->metrics_json, "{}");
    assert_int_equal (r->reports, 0);
    char *err = s_read_file (r->trial_dir, "stderr.log");
    assert_non_null (strstr (err, "cgq: ignoring result.json: not a JSON object"));
    free (err);
    cgq_result_destroy (&r);
    cgq_task_destroy (&task);
}

static void
test_malformed_report_ignored (void **state)
{
    s_fixture_t *f = *state;
    tt_assign_t sa;
    tt_assign_init (&sa, 7, 6,
                   "echo 'not json at all' >&3; echo '[1, 2]' >&3; echo >&3;"
                   "echo '{\"ok\": 1}' >&3; echo '{broken' >&3; echo still-running");
    cgq_task_opts_t opts = s_opts (f);
    cgq_task_t *task = cgq_task_start (&sa.a, &opts, s_on_report, f);
    Cgq__Result *r = tt_run (task, 5000);
    assert_non_null (r);
    assert_int_equal (r->status, CGQ__TASK_STATUS__TASK_SUCCEEDED);
    cgq_assert_json (r->metrics_json, "{\"ok\": 1}");
    assert_int_equal (r->reports, 1);
    assert_int_equal (f->n_reports, 1);
    char *err = s_read_file (r->trial_dir, "stderr.log");
    assert_non_null (err);
    assert_non_null (
        strstr (err, "cgq: ignoring report line 1: not a JSON object: not json at all\n"));
    assert_non_null (strstr (err, "cgq: ignoring report line 2: not a JSON object: [1, 2]\n"));
    assert_null (strstr (err, "report line 3")); // blank lines are skipped quietly
    assert_non_null (strstr (err, "cgq: ignoring report line 5: not a JSON object: {broken\n"));
    free (err);
    char *out = s_read_file (r->trial_dir, "stdout.log");
    assert_string_equal (out, "still-running\n");
    free (out);
    cgq_result_destroy (&r);
    cgq_task_destroy (&task);
}

static void
test_overlong_report_line (void **state)
{
    s_fixture_t *f = *state;
    tt_assign_t sa;
    tt_assign_init (&sa, 7, 7,
                   "head -c 1100000 /dev/zero | tr '\\0' a >&3; echo >&3;"
                   "echo '{\"x\": 1}' >&3");
    cgq_task_opts_t opts = s_opts (f);
    cgq_task_t *task = cgq_task_start (&sa.a, &opts, NULL, NULL);
    Cgq__Result *r = tt_run (task, 8000);
    assert_non_null (r);
    assert_int_equal (r->status, CGQ__TASK_STATUS__TASK_SUCCEEDED);
    cgq_assert_json (r->metrics_json, "{\"x\": 1}");
    char *err = s_read_file (r->trial_dir, "stderr.log");
    assert_non_null (strstr (err, "cgq: ignoring report line 1: longer than 1048576 bytes "
                                  "(--max-report-line of the worker): aaaa"));
    assert_true (strlen (err) < 400);
    free (err);
    cgq_result_destroy (&r);
    cgq_task_destroy (&task);
}

static void
test_exit_failure_has_stderr_tail (void **state)
{
    s_fixture_t *f = *state;
    tt_assign_t sa;
    tt_assign_init (&sa, 7, 8,
                   "i=1; while [ $i -le 30 ]; do printf 'line-%02d\\n' $i >&2; i=$((i+1)); done;"
                   "exit 1");
    cgq_task_opts_t opts = s_opts (f);
    cgq_task_t *task = cgq_task_start (&sa.a, &opts, NULL, NULL);
    Cgq__Result *r = tt_run (task, 5000);
    assert_non_null (r);
    assert_int_equal (r->status, CGQ__TASK_STATUS__TASK_FAILED);
    assert_int_equal (r->exit_code, 1);
    assert_true (!strncmp (r->error, "exit status 1\nline-11\n", 22));
    assert_non_null (strstr (r->error, "line-30"));
    assert_null (strstr (r->error, "line-10"));
    assert_non_null (strstr (r->log_tail, "line-01"));
    cgq_result_destroy (&r);
    cgq_task_destroy (&task);
}

static void
test_killed_by_signal (void **state)
{
    s_fixture_t *f = *state;
    tt_assign_t sa;
    tt_assign_init (&sa, 7, 9, "echo about to crash >&2; kill -SEGV $$");
    cgq_task_opts_t opts = s_opts (f);
    cgq_task_t *task = cgq_task_start (&sa.a, &opts, NULL, NULL);
    Cgq__Result *r = tt_run (task, 5000);
    assert_non_null (r);
    assert_int_equal (r->status, CGQ__TASK_STATUS__TASK_FAILED);
    assert_int_equal (r->exit_code, -SIGSEGV);
    assert_string_equal (r->error, "killed by signal 11 (SIGSEGV)\nabout to crash");
    cgq_result_destroy (&r);
    cgq_task_destroy (&task);
}

static void
test_timeout_kills_group (void **state)
{
    s_fixture_t *f = *state;
    tt_assign_t sa;
    // The main process ignores SIGTERM (so SIGKILL after the grace is needed)
    // and leaves a background child that must die too.
    tt_assign_init (&sa, 7, 10,
                   "sleep 60 & echo $! > bg.pid; trap '' TERM; echo waiting >&2;"
                   "while :; do sleep 1; done");
    sa.a.timeout_ms = 500;
    cgq_task_opts_t opts = s_opts (f);
    int64_t t0 = cgq_now_ms ();
    cgq_task_t *task = cgq_task_start (&sa.a, &opts, NULL, NULL);
    pid_t pid = cgq_task_pid (task);
    assert_true (cgq_task_deadline (task) > 0);
    Cgq__Result *r = tt_run (task, 5000);
    int64_t took = cgq_now_ms () - t0;
    assert_non_null (r);
    assert_int_equal (r->status, CGQ__TASK_STATUS__TASK_TIMEOUT);
    assert_string_equal (r->error, "timed out after 0.5s\nwaiting");
    assert_int_equal (r->exit_code, -SIGKILL);
    assert_true (took >= 500 + 300);
    assert_true (took < 3000);
    char *bg = s_read_file (r->trial_dir, "bg.pid");
    assert_non_null (bg);
    pid_t bg_pid = (pid_t) atoi (bg);
    free (bg);
    assert_true (bg_pid > 0);
    // The group is killed with SIGKILL; init reaps the orphan soon after.
    bool gone = false;
    for (int i = 0; i < 100 && !gone; i++) {
        gone = s_gone (bg_pid) && s_gone (pid);
        if (!gone)
            usleep (20000);
    }
    assert_true (gone);
    cgq_result_destroy (&r);
    cgq_task_destroy (&task);
}

static void
test_stop (void **state)
{
    s_fixture_t *f = *state;
    tt_assign_t sa;
    tt_assign_init (&sa, 7, 11, "exec sleep 30");
    cgq_task_opts_t opts = s_opts (f);
    cgq_task_t *task = cgq_task_start (&sa.a, &opts, NULL, NULL);
    Cgq__Result *r = tt_run (task, 200);
    assert_null (r);
    cgq_task_stop (task, "job cancelled", 1000);
    r = tt_run (task, 3000);
    assert_non_null (r);
    assert_int_equal (r->status, CGQ__TASK_STATUS__TASK_STOPPED);
    assert_int_equal (r->exit_code, -SIGTERM);
    assert_string_equal (r->error, "stopped: job cancelled");
    cgq_result_destroy (&r);
    cgq_task_destroy (&task);
}

static void
test_log_cap (void **state)
{
    s_fixture_t *f = *state;
    tt_assign_t sa;
    // 100 lines of 50 bytes on stdout, 3 short ones on stderr.
    tt_assign_init (&sa, 7, 12,
                   "i=0; while [ $i -lt 100 ]; do "
                   "echo 0123456789012345678901234567890123456789-line$i; i=$((i+1)); done;"
                   "echo e1 >&2; echo e2 >&2; echo e3 >&2");
    cgq_task_opts_t opts = s_opts (f);
    opts.log_cap = 1000;
    cgq_task_t *task = cgq_task_start (&sa.a, &opts, NULL, NULL);
    Cgq__Result *r = tt_run (task, 5000);
    assert_non_null (r);
    assert_int_equal (r->status, CGQ__TASK_STATUS__TASK_SUCCEEDED);
    char *out = s_read_file (r->trial_dir, "stdout.log");
    const char *marker = "[cgq: log truncated at 1000 bytes (--log-cap of the worker)]\n";
    assert_int_equal (strlen (out), 1000 + 1 + strlen (marker)); // the cut line gets its newline
    assert_string_equal (out + 1001, marker);
    assert_null (strstr (out, "line99"));
    free (out);
    char *err = s_read_file (r->trial_dir, "stderr.log");
    assert_string_equal (err, "e1\ne2\ne3\n");
    free (err);
    // The tail still has the latest output of both streams.
    assert_true (strlen (r->log_tail) <= 4096);
    assert_non_null (strstr (r->log_tail, "line99\ne1\ne2\ne3\n"));
    cgq_result_destroy (&r);
    cgq_task_destroy (&task);
}

static void
test_missing_binary (void **state)
{
    s_fixture_t *f = *state;
    tt_assign_t sa;
    tt_assign_init (&sa, 7, 13, "");
    char *argv[] = {"cgq-no-such-binary-xyz", "--flag"};
    sa.a.argv = argv;
    sa.a.n_argv = 2;
    cgq_task_opts_t opts = s_opts (f);
    cgq_task_t *task = cgq_task_start (&sa.a, &opts, NULL, NULL);
    Cgq__Result *r = tt_run (task, 5000);
    assert_non_null (r);
    assert_int_equal (r->status, CGQ__TASK_STATUS__TASK_FAILED);
    assert_int_equal (r->exit_code, 127);
    assert_string_equal (r->error,
                         "cannot run 'cgq-no-such-binary-xyz': No such file or directory");
    char *err = s_read_file (r->trial_dir, "stderr.log");
    assert_non_null (strstr (err, "cannot run 'cgq-no-such-binary-xyz'"));
    free (err);
    cgq_result_destroy (&r);
    cgq_task_destroy (&task);

    // No argv at all: the task is lost at once, nothing is forked.
    sa.a.n_argv = 0;
    task = cgq_task_start (&sa.a, &opts, NULL, NULL);
    assert_true (cgq_task_done (task));
    assert_int_equal (cgq_task_pid (task), 0);
    r = cgq_task_take_result (task);
    assert_int_equal (r->status, CGQ__TASK_STATUS__TASK_LOST);
    cgq_result_destroy (&r);
    cgq_task_destroy (&task);
}

// s_write_file writes text to dir/name with mode.
static void
s_write_file (const char *dir, const char *name, const char *text, mode_t mode)
{
    char *path = cgq_xasprintf ("%s/%s", dir, name);
    FILE *fp = fopen (path, "w");
    assert_non_null (fp);
    fputs (text, fp);
    fclose (fp);
    assert_int_equal (chmod (path, mode), 0);
    free (path);
}

// s_run_argv runs argv (NULL-terminated) as trial `trial` with PATH=path in
// trial.env; returns the result (caller destroys).
static Cgq__Result *
s_run_argv (s_fixture_t *f, uint64_t trial, char **argv, const char *path)
{
    tt_assign_t sa;
    tt_assign_init (&sa, 8, trial, "");
    sa.a.argv = argv;
    sa.a.n_argv = 0;
    while (argv[sa.a.n_argv])
        sa.a.n_argv++;
    Cgq__KeyValue kv = CGQ__KEY_VALUE__INIT;
    kv.key = "PATH";
    kv.value = (char *) path;
    Cgq__KeyValue *env[] = {&kv};
    sa.a.env = env;
    sa.a.n_env = 1;
    cgq_task_opts_t opts = s_opts (f);
    cgq_task_t *task = cgq_task_start (&sa.a, &opts, NULL, NULL);
    Cgq__Result *r = tt_run (task, 5000);
    assert_non_null (r);
    cgq_task_destroy (&task);
    return r;
}

// A command without a slash is looked up in the trial's PATH (trial.env may
// set it), as execvp does: a match that is not executable is passed over for
// a later one, a file that is neither a binary nor a #! script runs with
// /bin/sh, and a command found only without execute permission fails with
// EACCES.
static void
test_path_lookup (void **state)
{
    s_fixture_t *f = *state;
    char *bin1 = cgq_xasprintf ("%s/bin1", f->dir);
    char *bin2 = cgq_xasprintf ("%s/bin2", f->dir);
    assert_int_equal (mkdir (bin1, 0755), 0);
    assert_int_equal (mkdir (bin2, 0755), 0);
    s_write_file (bin1, "cgq-tool", "#!/bin/sh\necho from-bin1\n", 0644);
    s_write_file (bin2, "cgq-tool", "#!/bin/sh\necho from-bin2 \"$@\"\n", 0755);
    s_write_file (bin2, "cgq-plain", "echo plain-ran \"$1\"\n", 0755);
    s_write_file (bin1, "cgq-noexec", "#!/bin/sh\necho x\n", 0644);
    char *path = cgq_xasprintf ("/nonexistent:%s:%s:/bin:/usr/bin", bin1, bin2);

    char *tool[] = {"cgq-tool", "a1", NULL};
    Cgq__Result *r = s_run_argv (f, 1, tool, path);
    assert_int_equal (r->status, CGQ__TASK_STATUS__TASK_SUCCEEDED);
    char *out = s_read_file (r->trial_dir, "stdout.log");
    assert_string_equal (out, "from-bin2 a1\n");
    free (out);
    cgq_result_destroy (&r);

    char *plain[] = {"cgq-plain", "b1", NULL};
    r = s_run_argv (f, 2, plain, path);
    assert_int_equal (r->status, CGQ__TASK_STATUS__TASK_SUCCEEDED);
    out = s_read_file (r->trial_dir, "stdout.log");
    assert_string_equal (out, "plain-ran b1\n");
    free (out);
    cgq_result_destroy (&r);

    char *noexec[] = {"cgq-noexec", NULL};
    r = s_run_argv (f, 3, noexec, path);
    assert_int_equal (r->status, CGQ__TASK_STATUS__TASK_FAILED);
    assert_int_equal (r->exit_code, 127);
    assert_string_equal (r->error, "cannot run 'cgq-noexec': Permission denied");
    cgq_result_destroy (&r);

    // With a path, PATH is not consulted; a relative one is the trial
    // directory's.
    char *abs[] = {"/bin/echo", "abs", NULL};
    r = s_run_argv (f, 4, abs, "/nonexistent");
    assert_int_equal (r->status, CGQ__TASK_STATUS__TASK_SUCCEEDED);
    out = s_read_file (r->trial_dir, "stdout.log");
    assert_string_equal (out, "abs\n");
    free (out);
    cgq_result_destroy (&r);
    free (path);
    free (bin1);
    free (bin2);
}

static void
s_on_term (int sig)
{
    (void) sig;
}

// s_proc_line returns the line of /proc/PID/file that starts with key
// (caller frees), or NULL.
static char *
s_proc_line (pid_t pid, const char *file, const char *key)
{
    char path[64], line[512];
    snprintf (path, sizeof path, "/proc/%d/%s", (int) pid, file);
    FILE *fp = fopen (path, "r");
    if (!fp)
        return NULL;
    char *found = NULL;
    while (!found && fgets (line, sizeof line, fp))
        if (!strncmp (line, key, strlen (key)))
            found = cgq_xstrdup (line);
    fclose (fp);
    return found;
}

// The trial process as it starts, whichever way it was started: its own
// session and process group, in its directory, no signal blocked, caught
// or ignored that the worker blocks, catches or ignores (SIGTERM caught,
// SIGPIPE ignored, SIGUSR1 blocked here, as a worker might), the worker's
// resource limits.
static void
test_process_as_started (void **state)
{
    s_fixture_t *f = *state;
    unsigned long long inherited_ign = 0;
    char *own = s_proc_line (getpid (), "status", "SigIgn:");
    assert_non_null (own);
    assert_int_equal (sscanf (own, "SigIgn:\t%llx", &inherited_ign), 1);
    free (own);
    struct sigaction sa_term, old_term, old_pipe;
    memset (&sa_term, 0, sizeof sa_term);
    sa_term.sa_handler = s_on_term;
    sigaction (SIGTERM, &sa_term, &old_term);
    struct sigaction ign;
    memset (&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigaction (SIGPIPE, &ign, &old_pipe);
    sigset_t usr1, old_mask;
    sigemptyset (&usr1);
    sigaddset (&usr1, SIGUSR1);
    sigprocmask (SIG_BLOCK, &usr1, &old_mask);

    tt_assign_t sa;
    tt_assign_init (&sa, 8, 9, "");
    char *argv[] = {"sleep", "5", NULL};
    sa.a.argv = argv;
    sa.a.n_argv = 2;
    cgq_task_opts_t opts = s_opts (f);
    cgq_task_t *task = cgq_task_start (&sa.a, &opts, NULL, NULL);
    sigaction (SIGTERM, &old_term, NULL);
    sigaction (SIGPIPE, &old_pipe, NULL);
    sigprocmask (SIG_SETMASK, &old_mask, NULL);
    pid_t pid = cgq_task_pid (task);
    bool running = pid > 0 && !cgq_task_done (task);
    // Read everything first, then stop the trial, then check: a failed check
    // must not leave the process behind. cgq_task_start returns once the
    // child is past its exec's point of no return (CLONE_VFORK), which may be
    // before the kernel has renamed it and reset its caught signals: wait
    // for the name (2 s at most).
    char *name = NULL;
    for (int i = 0; running && i < 200; i++) {
        free (name);
        name = s_proc_line (pid, "status", "Name:");
        if (!name || !strcmp (name, "Name:\tsleep\n"))
            break;
        usleep (10000);
    }
    pid_t sid = running ? getsid (pid) : -1, pgid = running ? getpgid (pid) : -1;
    char cwd[PATH_MAX] = "";
    char link[64];
    snprintf (link, sizeof link, "/proc/%d/cwd", (int) pid);
    if (running && readlink (link, cwd, sizeof cwd - 1) < 0)
        cwd[0] = 0;
    char *sig[3] = {NULL, NULL, NULL};
    const char *keys[] = {"SigBlk:", "SigIgn:", "SigCgt:"};
    for (int i = 0; i < 3 && running; i++)
        sig[i] = s_proc_line (pid, "status", keys[i]);
    char *theirs = running ? s_proc_line (pid, "limits", "Max open files") : NULL;
    char *envs = NULL;
    if (running) {
        char path[64];
        snprintf (path, sizeof path, "/proc/%d/environ", (int) pid);
        FILE *fp = fopen (path, "r");
        cgq_buf_t b;
        cgq_buf_init (&b);
        if (fp) {
            cgq_buf_read (&b, fp);
            fclose (fp);
        }
        for (size_t i = 0; i < b.len; i++)
            if (b.data[i] == 0)
                b.data[i] = '\n';
        envs = cgq_buf_take (&b);
    }
    char *dir = cgq_xstrdup (cgq_task_dir (task));
    cgq_task_stop (task, "done looking", 1000);
    Cgq__Result *r = tt_run (task, 3000);
    int status = r ? (int) r->status : -1, exit_code = r ? r->exit_code : 0;
    cgq_result_destroy (&r);
    cgq_task_destroy (&task);

    assert_true (running);
    assert_non_null (name);
    assert_string_equal (name, "Name:\tsleep\n");
    assert_int_equal (sid, pid);
    assert_int_equal (pgid, pid);
    assert_string_equal (cwd, dir);
    // Nothing blocked or caught; ignored only what this process inherited
    // ignored (a test runner may ignore a real-time signal), less what the
    // trial must get the default of.
    assert_non_null (sig[0]);
    assert_string_equal (sig[0], "SigBlk:\t0000000000000000\n");
    unsigned long long want_ign = inherited_ign
                                  & ~(1ull << (SIGPIPE - 1) | 1ull << (SIGTERM - 1)
                                      | 1ull << (SIGINT - 1) | 1ull << (SIGCHLD - 1));
    unsigned long long got_ign = ~0ull;
    assert_non_null (sig[1]);
    assert_int_equal (sscanf (sig[1], "SigIgn:\t%llx", &got_ign), 1);
    assert_int_equal (got_ign, want_ign);
    assert_non_null (sig[2]);
    assert_string_equal (sig[2], "SigCgt:\t0000000000000000\n");
    char *mine = s_proc_line (getpid (), "limits", "Max open files");
    assert_non_null (mine);
    assert_non_null (theirs);
    assert_string_equal (theirs, mine);
    char *want = cgq_xasprintf ("CGQ_TRIAL_DIR=%s\n", dir);
    assert_non_null (envs);
    assert_non_null (strstr (envs, want));
    assert_int_equal (status, CGQ__TASK_STATUS__TASK_STOPPED);
    assert_int_equal (exit_code, -SIGTERM);
    free (want);
    free (mine);
    free (theirs);
    free (envs);
    free (dir);
    free (name);
    for (int i = 0; i < 3; i++)
        free (sig[i]);
}

// A trial that plants a link where a later job's directory goes: the trial
// of that job is refused, whichever way its directory is made (with a spare
// chain, the whole-chain rename meets the link, and the levels are checked).
static void
test_planted_job_link (void **state)
{
    s_fixture_t *f = *state;
    char *target = cgq_xasprintf ("%s/elsewhere", f->dir);
    char *link = cgq_xasprintf ("%s/job-77", f->dir);
    assert_int_equal (mkdir (target, 0755), 0);
    assert_int_equal (symlink (target, link), 0);
    tt_assign_t sa;
    tt_assign_init (&sa, 77, 0, "echo ran > ran.txt");
    cgq_task_opts_t opts = s_opts (f);
    cgq_task_t *task = cgq_task_start (&sa.a, &opts, NULL, NULL);
    assert_true (cgq_task_done (task));
    assert_int_equal (cgq_task_pid (task), 0);
    Cgq__Result *r = cgq_task_take_result (task);
    assert_int_equal (r->status, CGQ__TASK_STATUS__TASK_LOST);
    char *want = cgq_xasprintf ("%s is a symbolic link; not running a trial there", link);
    assert_non_null (strstr (r->error, want));
    char *ran = cgq_xasprintf ("%s/trial-0/attempt-1/ran.txt", target);
    assert_int_equal (access (ran, F_OK), -1);
    free (ran);
    free (want);
    cgq_result_destroy (&r);
    cgq_task_destroy (&task);
    free (link);
    free (target);
}

static void
test_unwritable_workdir (void **state)
{
    tt_assign_t sa;
    tt_assign_init (&sa, 7, 14, "exit 0");
    cgq_task_opts_t opts = {.workdir = "/proc/cgq-cannot-be-here", .kill_grace_ms = 100};
    cgq_task_t *task = cgq_task_start (&sa.a, &opts, NULL, NULL);
    assert_true (cgq_task_done (task));
    Cgq__Result *r = cgq_task_take_result (task);
    assert_int_equal (r->status, CGQ__TASK_STATUS__TASK_LOST);
    assert_non_null (strstr (r->error, "cannot create trial directory /proc/cgq-cannot-be-here"));
    cgq_result_destroy (&r);
    cgq_task_destroy (&task);
}

static void
test_destroy_running_kills_group (void **state)
{
    s_fixture_t *f = *state;
    tt_assign_t sa;
    tt_assign_init (&sa, 7, 15, "sleep 30 & sleep 30");
    cgq_task_opts_t opts = s_opts (f);
    cgq_task_t *task = cgq_task_start (&sa.a, &opts, NULL, NULL);
    pid_t pid = cgq_task_pid (task);
    usleep (100000);
    cgq_task_destroy (&task);
    // Killed at once; the orphan is a zombie until init reaps it.
    bool gone = false;
    for (int i = 0; i < 500 && !gone; i++) { // 10 s: init reaps late on a loaded machine
        gone = kill (-pid, 0) < 0 && errno == ESRCH;
        if (!gone)
            usleep (20000);
    }
    assert_true (gone);
}

static void
test_endless_background_writer (void **state)
{
    s_fixture_t *f = *state;
    tt_assign_t sa;
    // The main process exits while a child keeps the pipes busy forever.
    tt_assign_init (&sa, 7, 17, "yes & yes >&2 & sleep 0.2; exit 0");
    cgq_task_opts_t opts = s_opts (f);
    opts.log_cap = 4096;
    cgq_task_t *task = cgq_task_start (&sa.a, &opts, NULL, NULL);
    pid_t pid = cgq_task_pid (task);
    Cgq__Result *r = tt_run (task, 5000);
    assert_non_null (r);
    assert_int_equal (r->status, CGQ__TASK_STATUS__TASK_SUCCEEDED);
    assert_non_null (strstr (r->log_tail, "y\ny\n"));
    cgq_result_destroy (&r);
    cgq_task_destroy (&task);
    bool gone = false;
    for (int i = 0; i < 100 && !gone; i++) {
        gone = kill (-pid, 0) < 0 && errno == ESRCH;
        if (!gone)
            usleep (20000);
    }
    assert_true (gone);
}

// s_strict_utf8: valid UTF-8 as jansson (and every proto3 reader) checks it.
static bool
s_strict_utf8 (const char *s)
{
    json_t *j = json_string (s);
    json_decref (j);
    return j != NULL;
}

static void
test_invalid_utf8_output_is_cleaned (void **state)
{
    s_fixture_t *f = *state;
    tt_assign_t sa;
    // Byte sequences that look like UTF-8 but are not: a surrogate (CESU-8,
    // Java's modified UTF-8), overlong forms, a code point above U+10FFFF and
    // a stray continuation byte; then valid 2-, 3- and 4-byte characters.
    tt_assign_init (&sa, 7, 18,
                   "printf 'a\\355\\240\\200b \\340\\200\\200 \\360\\200\\200\\200"
                   " \\364\\220\\200\\200 \\365\\200\\200\\200 \\200 \\303\\251\\342\\202\\254"
                   "\\360\\237\\230\\200\\n' | tee /dev/stderr; exit 1");
    cgq_task_opts_t opts = s_opts (f);
    cgq_task_t *task = cgq_task_start (&sa.a, &opts, NULL, NULL);
    Cgq__Result *r = tt_run (task, 5000);
    assert_non_null (r);
    assert_int_equal (r->status, CGQ__TASK_STATUS__TASK_FAILED);
    if (!s_strict_utf8 (r->error))
        fail_msg ("error is not valid UTF-8: %s", r->error);
    if (!s_strict_utf8 (r->log_tail))
        fail_msg ("log_tail is not valid UTF-8: %s", r->log_tail);
    // Every bad byte becomes '?'; the good characters stay.
    assert_non_null (strstr (r->error, "a???b ??? ???? ???? ???? ? é€😀"));
    cgq_result_destroy (&r);
    cgq_task_destroy (&task);
}

static void
test_helpers (void **state)
{
    // The noop answer and the TaskRef/Result helpers are node/result.c's
    // (node/result_test.c).
    cgq_task_destroy (NULL);

    char *name = cgq_task_env_name ("lr-max.v2");
    assert_string_equal (name, "CGQ_PARAM_LR_MAX_V2");
    free (name);
}

// Checkpoint announcements a test's task made (s_on_checkpoint).
static char *s_ann[4];
static uint64_t s_ann_line[4];
static size_t s_nann;

static void
s_on_checkpoint (void *arg, cgq_task_t *task, const char *step_json, uint64_t line)
{
    (void) arg;
    (void) task;
    if (s_nann < 4) {
        s_ann_line[s_nann] = line;
        s_ann[s_nann++] = cgq_xstrdup (step_json);
    }
}

// The checkpoint contract: an empty CGQ_CHECKPOINT_DIR on a first start; an
// announcement goes to the callback, never as a report nor as the result;
// a resumed start gets its restored directory in place, CGQ_RESUME_STEP and
// _JSON, the notes in stderr.log, and its reports up to the step dropped;
// cgq_task_fail ends a task with its error.
static void
test_checkpoint_contract (void **state)
{
    s_fixture_t *f = *state;
    s_nann = 0;
    tt_assign_t sa;
    tt_assign_init (&sa, 7, 40,
                    "test -d \"$CGQ_CHECKPOINT_DIR\" || exit 5; "
                    "test -z \"$(ls -A \"$CGQ_CHECKPOINT_DIR\")\" || exit 6; "
                    "test -z \"$CGQ_RESUME_STEP$CGQ_RESUME_JSON\" || exit 7; "
                    "echo '{\"epoch\": 1, \"loss\": 2}' >&3; "
                    "echo '{\"checkpoint\": true, \"epoch\": 1, \"batch\": 9}' >&3; "
                    "echo '{\"checkpoint\": false, \"x\": 1}' >&3");
    cgq_task_opts_t opts = s_opts (f);
    opts.on_checkpoint = s_on_checkpoint;
    cgq_task_t *task = cgq_task_start (&sa.a, &opts, s_on_report, f);
    char *want = cgq_xasprintf ("%s/checkpoint", cgq_task_dir (task));
    assert_string_equal (cgq_task_checkpoint_dir (task), want);
    free (want);
    Cgq__Result *r = tt_run (task, 5000);
    assert_non_null (r);
    assert_int_equal (r->status, CGQ__TASK_STATUS__TASK_SUCCEEDED);
    assert_int_equal (s_nann, 1);
    assert_string_equal (s_ann[0], "{\"epoch\":1,\"batch\":9}");
    assert_int_equal (s_ann_line[0], 2);
    // Reports: the first, and the line whose checkpoint is false (a report).
    assert_int_equal (f->n_reports, 2);
    assert_string_equal (r->metrics_json, "{\"checkpoint\":false,\"x\":1}");
    assert_int_equal (r->reports, 2);
    cgq_result_destroy (&r);
    cgq_task_destroy (&task);
    free (s_ann[0]);

    // Resumed: a restored directory moved into place.
    char *restored = cgq_xasprintf ("%s/restored", f->dir);
    assert_int_equal (mkdir (restored, 0700), 0);
    char *file = cgq_xasprintf ("%s/model", restored);
    FILE *fp = fopen (file, "w");
    fputs ("weights", fp);
    fclose (fp);
    free (file);
    tt_assign_init (&sa, 7, 41,
                    "test \"$(cat \"$CGQ_CHECKPOINT_DIR/model\")\" = weights || exit 5; "
                    "test \"$CGQ_RESUME_STEP\" = 3 || exit 6; "
                    "test \"$CGQ_RESUME_JSON\" = '{\"epoch\":3}' || exit 7; "
                    "echo '{\"epoch\": 3, \"loss\": 9}' >&3; "
                    "echo '{\"epoch\": 4, \"loss\": 1}' >&3");
    opts.restored = restored;
    opts.resume_json = "{\"epoch\":3}";
    opts.notes = "resumed from checkpoint ckpt-1-3\nsecond note";
    size_t before = f->n_reports;
    task = cgq_task_start (&sa.a, &opts, s_on_report, f);
    r = tt_run (task, 5000);
    assert_non_null (r);
    if (r->status != CGQ__TASK_STATUS__TASK_SUCCEEDED)
        fail_msg ("resumed trial: %s", r->error);
    assert_int_equal (access (restored, F_OK), -1); // moved, not copied
    assert_int_equal (f->n_reports, before + 1);
    assert_string_equal (f->reports[before], "{\"epoch\":4,\"loss\":1}");
    char *err = s_read_file (cgq_task_dir (task), "stderr.log");
    assert_non_null (strstr (err, "cgq: resumed from checkpoint ckpt-1-3\ncgq: second note\n"));
    assert_non_null (strstr (err, "not sending reports with epoch <= 3: this attempt resumed"));
    free (err);
    cgq_result_destroy (&r);
    cgq_task_destroy (&task);
    free (restored);

    // cgq_task_fail: a running trial stopped, failed with the error.
    tt_assign_init (&sa, 7, 42, "exec sleep 30");
    opts.restored = opts.resume_json = opts.notes = NULL;
    task = cgq_task_start (&sa.a, &opts, NULL, NULL);
    assert_null (tt_run (task, 100));
    cgq_task_fail (task, "cannot seal checkpoint 1", 1000);
    r = tt_run (task, 3000);
    assert_non_null (r);
    assert_int_equal (r->status, CGQ__TASK_STATUS__TASK_FAILED);
    assert_string_equal (r->error, "cannot seal checkpoint 1");
    cgq_result_destroy (&r);
    cgq_task_destroy (&task);
}

#define S_MODES(t)                                                                                \
    cmocka_unit_test_prestate_setup_teardown (t, s_setup, s_teardown, &s_fork),                  \
        cmocka_unit_test_prestate_setup_teardown (t, s_setup, s_teardown, &s_spare)

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown (test_reports_and_env, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_checkpoint_contract, s_setup, s_teardown),
        S_MODES (test_checkpoint_contract),
        cmocka_unit_test_setup_teardown (test_result_json_wins, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_huge_result_json_fails, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_result_json_cut_fails, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_no_reports_empty_metrics, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_malformed_report_ignored, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_overlong_report_line, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_exit_failure_has_stderr_tail, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_killed_by_signal, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_timeout_kills_group, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_stop, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_log_cap, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_missing_binary, s_setup, s_teardown),
        cmocka_unit_test (test_unwritable_workdir),
        cmocka_unit_test_setup_teardown (test_destroy_running_kills_group, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_endless_background_writer, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_invalid_utf8_output_is_cleaned, s_setup,
                                         s_teardown),
        cmocka_unit_test (test_helpers),
        cmocka_unit_test_setup_teardown (test_path_lookup, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_process_as_started, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_planted_job_link, s_setup, s_teardown),
        // The same in the other ways a trial can start.
        S_MODES (test_reports_and_env),
        S_MODES (test_killed_by_signal),
        S_MODES (test_timeout_kills_group),
        S_MODES (test_missing_binary),
        S_MODES (test_path_lookup),
        S_MODES (test_process_as_started),
        S_MODES (test_planted_job_link),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
