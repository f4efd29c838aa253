// Trial confinement with real processes: trials that leave processes behind
// (a background child, a grandchild that calls setsid() after a double fork,
// children that ignore SIGTERM) and workers killed with SIGKILL. Each case
// runs in cgroup mode (skipped, saying why, unless root with a writable
// cgroup v2) and in pgroup mode.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "confine.h"
#include "task.h"
#include "task_testing.h"
#include "tmpdir.h"
#include "util.h"

static cgq_confine_mode_t s_cgroup = CGQ_CONFINE_CGROUP;
static cgq_confine_mode_t s_pgroup = CGQ_CONFINE_PGROUP;

// A grandchild in a session of its own, orphaned at once (the subshell that
// started it exits): it writes its pid to gc.pid and sleeps. The trial waits
// until the file is there.
#define S_GRANDCHILD                                                                              \
    "(setsid sh -c 'echo $$ > gc.pid.tmp; mv gc.pid.tmp gc.pid; exec sleep 60' &);"             \
    "while [ ! -s gc.pid ]; do sleep 0.02; done;"

typedef struct {
    cgq_confine_mode_t mode;
    char dir[64]; // the workdir
} s_fixture_t;

static int
s_setup (void **state)
{
    s_fixture_t *f = cgq_xcalloc (1, sizeof *f);
    f->mode = *state ? *(cgq_confine_mode_t *) *state : CGQ_CONFINE_AUTO;
    if (cgq_test_tmpdir (f->dir, sizeof f->dir, "confine-test") < 0)
        return -1;
    *state = f;
    return 0;
}

static int
s_teardown (void **state)
{
    s_fixture_t *f = *state;
    int rc = cgq_test_rmtree (f->dir);
    free (f);
    return rc;
}

// s_confine makes the fixture's confinement, or skips the test (saying why)
// where cgroup v2 is not usable.
static cgq_confine_t *
s_confine (s_fixture_t *f, bool no_kill_file)
{
    if (f->mode == CGQ_CONFINE_CGROUP && geteuid () != 0) {
        print_message ("skipped: cgroup confinement is tested as root only\n");
        skip ();
    }
    cgq_confine_opts_t o = {.mode = f->mode, .workdir = f->dir, .no_kill_file = no_kill_file};
    char err[1024];
    cgq_confine_t *c = cgq_confine_new (&o, err, sizeof err);
    if (!c && f->mode == CGQ_CONFINE_CGROUP) {
        print_message ("skipped: %s\n", err);
        skip ();
    }
    if (!c)
        fail_msg ("cgq_confine_new: %s", err);
    return c;
}

static cgq_task_opts_t
s_opts (s_fixture_t *f, cgq_confine_t *c)
{
    return (cgq_task_opts_t) {
        .workdir = f->dir, .log_cap = 1 << 20, .kill_grace_ms = 300, .confine = c};
}

// s_gone: no such process, or a zombie (reaped here when it is ours).
static bool
s_gone (pid_t pid)
{
    char path[64], line[512] = "";
    snprintf (path, sizeof path, "/proc/%d/stat", (int) pid);
    FILE *fp = fopen (path, "r");
    if (!fp)
        return true;
    char *ok = fgets (line, sizeof line, fp);
    fclose (fp);
    const char *paren = ok ? strrchr (line, ')') : NULL;
    if (paren && paren[1] == ' ' && paren[2] == 'Z') {
        waitpid (pid, NULL, WNOHANG);
        return true;
    }
    return false;
}

// s_wait_gone waits up to max_ms for pid to be gone.
static bool
s_wait_gone (pid_t pid, int64_t max_ms)
{
    int64_t give_up = cgq_now_ms () + max_ms;
    while (!s_gone (pid)) {
        if (cgq_now_ms () >= give_up)
            return false;
        usleep (10000);
    }
    return true;
}

// s_read_pid waits up to max_ms for dir/name to hold a pid and returns it.
static pid_t
s_read_pid (const char *dir, const char *name, int64_t max_ms)
{
    char *path = cgq_xasprintf ("%s/%s", dir, name);
    int64_t give_up = cgq_now_ms () + max_ms;
    int pid = 0;
    while (pid <= 0 && cgq_now_ms () < give_up) {
        FILE *fp = fopen (path, "r");
        if (!fp || fscanf (fp, "%d", &pid) != 1)
            pid = 0;
        if (fp)
            fclose (fp);
        if (pid <= 0)
            usleep (10000);
    }
    if (pid <= 0)
        fail_msg ("no pid in %s after %" PRId64 " ms", path, max_ms);
    free (path);
    return (pid_t) pid;
}

// s_base checks that f's mode can be had here (or skips the test) and
// returns the cgroup that holds the worker cgroups of this process and its
// children (caller frees), or NULL in pgroup mode.
static char *
s_base (s_fixture_t *f)
{
    cgq_confine_t *c = s_confine (f, false);
    char *base = NULL;
    if (cgq_confine_cgroup_dir (c)) {
        char *dir = cgq_xstrdup (cgq_confine_cgroup_dir (c));
        base = cgq_xstrdup (dirname (dir));
        free (dir);
    }
    cgq_confine_destroy (&c);
    return base;
}

// s_no_trace: nothing is left of dead worker pid: no state file in f's
// workdir, no cgroup in base.
static void
s_no_trace (s_fixture_t *f, const char *base, pid_t pid)
{
    char *cmd = cgq_xasprintf ("! ls '%s/.cgq-confine/worker-%d-'* 2>/dev/null && "
                               "! ls -d '%s/cgq-worker-%d-'* 2>/dev/null",
                               f->dir, (int) pid, base ? base : "/nonexistent", (int) pid);
    if (system (cmd) != 0)
        fail_msg ("dead worker %d left its state file or cgroup", (int) pid);
    free (cmd);
}

static char *
s_trial_dir (s_fixture_t *f, uint64_t trial)
{
    return cgq_xasprintf ("%s/job-9/trial-%" PRIu64 "/attempt-1", f->dir, trial);
}

// s_clean_trial removes what trial left in f's workdir, for a fresh start.
static void
s_clean_trial (s_fixture_t *f, uint64_t trial)
{
    char *cmd = cgq_xasprintf ("rm -rf '%s/job-9/trial-%" PRIu64 "'", f->dir, trial);
    assert_int_equal (system (cmd), 0);
    free (cmd);
}

// s_kill_now cleans up after a failed check: kills pid by PID.
static void
s_kill_now (pid_t pid)
{
    if (pid > 0)
        kill (pid, SIGKILL);
}

static void
test_mode_parse (void **state)
{
    cgq_confine_mode_t m = CGQ_CONFINE_PGROUP;
    assert_int_equal (cgq_confine_mode_parse ("auto", &m), 0);
    assert_int_equal (m, CGQ_CONFINE_AUTO);
    assert_int_equal (cgq_confine_mode_parse ("cgroup", &m), 0);
    assert_int_equal (m, CGQ_CONFINE_CGROUP);
    assert_int_equal (cgq_confine_mode_parse ("pgroup", &m), 0);
    assert_int_equal (m, CGQ_CONFINE_PGROUP);
    assert_int_equal (cgq_confine_mode_parse ("cgroups", &m), -1);
    assert_int_equal (cgq_confine_mode_parse ("", &m), -1);
    assert_int_equal (cgq_confine_mode_parse (NULL, &m), -1);
    assert_int_equal (m, CGQ_CONFINE_PGROUP);
    cgq_confine_destroy (NULL);
}

// The fault itself: with only the process group killed (no confine), the
// grandchild that left the session outlives its trial. If this stops
// holding, the tests below no longer show anything.
static void
test_unconfined_grandchild_survives (void **state)
{
    s_fixture_t *f = *state;
    tt_assign_t sa;
    tt_assign_init (&sa, 9, 1, S_GRANDCHILD "exit 0");
    cgq_task_opts_t opts = s_opts (f, NULL);
    cgq_task_t *task = cgq_task_start (&sa.a, &opts, NULL, NULL);
    Cgq__Result *r = tt_run (task, 5000);
    assert_non_null (r);
    assert_int_equal (r->status, CGQ__TASK_STATUS__TASK_SUCCEEDED);
    pid_t gc = s_read_pid (r->trial_dir, "gc.pid", 1000);
    cgq_result_destroy (&r);
    cgq_task_destroy (&task);
    bool survived = !s_wait_gone (gc, 300);
    s_kill_now (gc);
    assert_true (survived);
    assert_true (s_wait_gone (gc, 2000));
}

// A trial whose main process exits 0 leaving a background child and a
// grandchild in a session of its own: both die with the trial.
static void
test_exit_kills_setsid_grandchild (void **state)
{
    s_fixture_t *f = *state;
    cgq_confine_t *c = s_confine (f, false);
    tt_assign_t sa;
    tt_assign_init (&sa, 9, 2, "sleep 60 & echo $! > bg.pid;" S_GRANDCHILD "exit 0");
    cgq_task_opts_t opts = s_opts (f, c);
    cgq_task_t *task = cgq_task_start (&sa.a, &opts, NULL, NULL);
    Cgq__Result *r = tt_run (task, 5000);
    assert_non_null (r);
    assert_int_equal (r->status, CGQ__TASK_STATUS__TASK_SUCCEEDED);
    pid_t gc = s_read_pid (r->trial_dir, "gc.pid", 1000);
    pid_t bg = s_read_pid (r->trial_dir, "bg.pid", 1000);
    bool gc_gone = s_wait_gone (gc, 3000), bg_gone = s_wait_gone (bg, 3000);
    s_kill_now (gc);
    s_kill_now (bg);
    if (!gc_gone || !bg_gone)
        fail_msg ("left running after the trial ended: %s%s", gc_gone ? "" : "the grandchild ",
                  bg_gone ? "" : "the background child");
    cgq_result_destroy (&r);
    cgq_task_destroy (&task);
    if (f->mode == CGQ_CONFINE_CGROUP) {
        // The trial's leaf is gone (at once, or by the next tick).
        char *leaf = cgq_xasprintf ("%s/job-9.trial-2.attempt-1", cgq_confine_cgroup_dir (c));
        for (int i = 0; i < 100 && access (leaf, F_OK) == 0; i++) {
            usleep (10000);
            cgq_confine_tick (c);
        }
        assert_int_equal (access (leaf, F_OK), -1);
        free (leaf);
    }
    cgq_confine_destroy (&c);
    assert_null (c);
}

// s_in_leaf: pid's cgroup v2 path ends with /leaf.
static bool
s_in_leaf (pid_t pid, const char *leaf)
{
    char path[64], line[PATH_MAX] = "";
    snprintf (path, sizeof path, "/proc/%d/cgroup", (int) pid);
    FILE *fp = fopen (path, "r");
    if (!fp)
        return false;
    bool found = false;
    while (!found && fgets (line, sizeof line, fp)) {
        if (strncmp (line, "0::", 3) != 0)
            continue;
        line[strcspn (line, "\n")] = 0;
        size_t n = strlen (line), k = strlen (leaf);
        found = n > k && line[n - k - 1] == '/' && !strcmp (line + n - k, leaf);
    }
    fclose (fp);
    return found;
}

// In cgroup mode a trial's main process is in its leaf from its first
// instruction, whichever way it was started (cloned into the leaf, or forked
// and moved there before exec, as where clone3 is missing).
static void
s_trial_in_its_leaf (void **state, bool forked)
{
    s_fixture_t *f = *state;
    cgq_confine_t *c = s_confine (f, false);
    cgq_task_spawn_fork = forked;
    tt_assign_t sa;
    tt_assign_init (&sa, 9, forked ? 6 : 5, "");
    char *argv[] = {"sleep", "5", NULL};
    sa.a.argv = argv;
    sa.a.n_argv = 2;
    cgq_task_opts_t opts = s_opts (f, c);
    cgq_task_t *task = cgq_task_start (&sa.a, &opts, NULL, NULL);
    cgq_task_spawn_fork = false;
    pid_t pid = cgq_task_pid (task);
    assert_true (pid > 0);
    char *leaf = cgq_xasprintf ("job-9.trial-%d.attempt-1", forked ? 6 : 5);
    bool in = s_in_leaf (pid, leaf);
    cgq_task_stop (task, "seen", 500);
    Cgq__Result *r = tt_run (task, 3000);
    assert_non_null (r);
    assert_int_equal (r->status, CGQ__TASK_STATUS__TASK_STOPPED);
    cgq_result_destroy (&r);
    cgq_task_destroy (&task);
    cgq_confine_destroy (&c);
    if (!in)
        fail_msg ("pid %d is not in its leaf %s", (int) pid, leaf);
    free (leaf);
}

// A leaf of the trial's name is still there (being removed, or left by an
// earlier run of the attempt): the trial gets NAME.2 beside it.
static void
test_leaf_name_taken (void **state)
{
    s_fixture_t *f = *state;
    cgq_confine_t *c = s_confine (f, false);
    char *taken = cgq_xasprintf ("%s/job-9.trial-7.attempt-1", cgq_confine_cgroup_dir (c));
    assert_int_equal (mkdir (taken, 0755), 0);
    tt_assign_t sa;
    tt_assign_init (&sa, 9, 7, "");
    char *argv[] = {"sleep", "5", NULL};
    sa.a.argv = argv;
    sa.a.n_argv = 2;
    cgq_task_opts_t opts = s_opts (f, c);
    cgq_task_t *task = cgq_task_start (&sa.a, &opts, NULL, NULL);
    pid_t pid = cgq_task_pid (task);
    bool in = pid > 0 && s_in_leaf (pid, "job-9.trial-7.attempt-1.2");
    cgq_task_stop (task, "seen", 500);
    Cgq__Result *r = tt_run (task, 3000);
    cgq_result_destroy (&r);
    cgq_task_destroy (&task);
    int removed = rmdir (taken);
    cgq_confine_destroy (&c);
    free (taken);
    assert_true (in);
    assert_int_equal (removed, 0);
}

static void
test_trial_in_its_leaf (void **state)
{
    s_trial_in_its_leaf (state, false);
}

static void
test_trial_in_its_leaf_forked (void **state)
{
    s_trial_in_its_leaf (state, true);
}

// The grandchild case again with trials forked (and, in cgroup mode, moved
// into their leaf by the child itself).
static void
test_exit_kills_setsid_grandchild_forked (void **state)
{
    cgq_task_spawn_fork = true;
    test_exit_kills_setsid_grandchild (state);
    cgq_task_spawn_fork = false;
}

// At the timeout, a main process that ignores SIGTERM, a child and a
// setsid() grandchild that ignore it too: all get SIGKILL after the grace.
static void
test_timeout_kills_term_ignorers (void **state)
{
    s_fixture_t *f = *state;
    cgq_confine_t *c = s_confine (f, false);
    tt_assign_t sa;
    tt_assign_init (&sa, 9, 3,
                   "trap '' TERM; sleep 60 & echo $! > bg.pid;" S_GRANDCHILD
                   "echo waiting >&2; while :; do sleep 1; done");
    sa.a.timeout_ms = 500;
    cgq_task_opts_t opts = s_opts (f, c);
    int64_t t0 = cgq_now_ms ();
    cgq_task_t *task = cgq_task_start (&sa.a, &opts, NULL, NULL);
    Cgq__Result *r = tt_run (task, 6000);
    int64_t took = cgq_now_ms () - t0;
    assert_non_null (r);
    assert_int_equal (r->status, CGQ__TASK_STATUS__TASK_TIMEOUT);
    assert_int_equal (r->exit_code, -SIGKILL);
    assert_true (took >= 500 + 300);
    pid_t gc = s_read_pid (r->trial_dir, "gc.pid", 1000);
    pid_t bg = s_read_pid (r->trial_dir, "bg.pid", 1000);
    bool gc_gone = s_wait_gone (gc, 3000), bg_gone = s_wait_gone (bg, 3000);
    s_kill_now (gc);
    s_kill_now (bg);
    if (!gc_gone || !bg_gone)
        fail_msg ("left running after the timeout: %s%s", gc_gone ? "" : "the grandchild ",
                  bg_gone ? "" : "the background child");
    cgq_result_destroy (&r);
    cgq_task_destroy (&task);
    cgq_confine_destroy (&c);
}

// Before Linux 5.14 there is no cgroup.kill: the leaf is frozen and each
// member killed.
static void
test_cgroup_without_kill_file (void **state)
{
    s_fixture_t *f = *state;
    cgq_confine_t *c = s_confine (f, true);
    assert_non_null (strstr (cgq_confine_describe (c), "by freezing it"));
    tt_assign_t sa;
    tt_assign_init (&sa, 9, 4, "trap '' TERM; sleep 60 & echo $! > bg.pid;" S_GRANDCHILD "exit 0");
    cgq_task_opts_t opts = s_opts (f, c);
    cgq_task_t *task = cgq_task_start (&sa.a, &opts, NULL, NULL);
    Cgq__Result *r = tt_run (task, 5000);
    assert_non_null (r);
    assert_int_equal (r->status, CGQ__TASK_STATUS__TASK_SUCCEEDED);
    pid_t gc = s_read_pid (r->trial_dir, "gc.pid", 1000);
    pid_t bg = s_read_pid (r->trial_dir, "bg.pid", 1000);
    bool gone = s_wait_gone (gc, 3000) && s_wait_gone (bg, 3000);
    s_kill_now (gc);
    s_kill_now (bg);
    assert_true (gone);
    cgq_result_destroy (&r);
    cgq_task_destroy (&task);
    cgq_confine_destroy (&c);
}

static void
test_describe (void **state)
{
    s_fixture_t *f = *state;
    cgq_confine_t *c = s_confine (f, false);
    const char *d = cgq_confine_describe (c);
    if (f->mode == CGQ_CONFINE_CGROUP) {
        assert_true (cgq_confine_is_cgroup (c));
        assert_non_null (strstr (d, "trials confined in cgroup v2 at "));
        assert_non_null (strstr (d, cgq_confine_cgroup_dir (c)));
        assert_non_null (strstr (cgq_confine_cgroup_dir (c), "/cgq-worker-"));
        struct stat st;
        assert_int_equal (stat (cgq_confine_cgroup_dir (c), &st), 0);
    }
    else {
        assert_false (cgq_confine_is_cgroup (c));
        assert_null (cgq_confine_cgroup_dir (c));
        assert_non_null (strstr (d, "trials confined by session and process group"));
        int on = 0;
        assert_int_equal (prctl (PR_GET_CHILD_SUBREAPER, &on, 0, 0, 0), 0);
        assert_int_equal (on, 1);
    }
    pid_t reaper = cgq_confine_reaper_pid (c);
    assert_true (reaper > 0);

    assert_false (s_gone (reaper));
    char *dir = f->mode == CGQ_CONFINE_CGROUP ? cgq_xstrdup (cgq_confine_cgroup_dir (c)) : NULL;
    cgq_confine_destroy (&c);
    // The reaper cleaned up and exited: no cgroup, no state file.
    assert_true (s_wait_gone (reaper, 1000));
    if (dir)
        assert_int_equal (access (dir, F_OK), -1);
    char *sdir = cgq_xasprintf ("%s/.cgq-confine", f->dir);
    char *cmd = cgq_xasprintf ("test -z \"$(ls -A '%s')\"", sdir);
    assert_int_equal (system (cmd), 0);
    free (cmd);
    free (sdir);
    free (dir);
}

// A pretend worker in a child process: it confines trials in f's mode and
// workdir, starts one running script, optionally kills its own reaper and
// lets cgq_confine_tick start another (which must learn the running trial),
// then waits to be killed. Returns its pid; *reaper is its reaper's.
static pid_t
s_fake_worker_run (s_fixture_t *f, const char *script, bool respawn, bool tick, pid_t *reaper,
                   pid_t *trial)
{
    int p[2];
    assert_int_equal (pipe (p), 0);
    pid_t pid = fork ();
    assert_true (pid >= 0);
    if (pid == 0) {
        close (p[0]);
        cgq_confine_opts_t o = {.mode = f->mode, .workdir = f->dir};
        char err[1024];
        cgq_confine_t *c = cgq_confine_new (&o, err, sizeof err);
        if (!c)
            _exit (3);
        tt_assign_t sa;
        tt_assign_init (&sa, 9, 5, script);
        cgq_task_opts_t opts = s_opts (f, c);
        cgq_task_t *task = cgq_task_start (&sa.a, &opts, NULL, NULL);
        if (cgq_task_done (task))
            _exit (4);
        if (respawn) {
            pid_t first = cgq_confine_reaper_pid (c);
            kill (first, SIGKILL);
            while (cgq_confine_reaper_pid (c) == first || cgq_confine_reaper_pid (c) <= 0) {
                usleep (10000);
                cgq_confine_tick (c);
            }
        }
        // As the worker's loop: the state file is written a moment after
        // the start (cgq_confine_deadline), then the loop only waits. Without
        // tick, the worker is killed before that moment comes.
        while (tick && cgq_confine_deadline (c) > 0) {
            usleep (5000);
            cgq_confine_tick (c);
        }
        pid_t info[3] = {getpid (), cgq_confine_reaper_pid (c), cgq_task_pid (task)};
        (void) !write (p[1], info, sizeof info);
        for (;;)
            pause ();
    }
    close (p[1]);
    pid_t info[3] = {0, 0, 0};
    ssize_t n = read (p[0], info, sizeof info);
    close (p[0]);
    if (n != (ssize_t) sizeof info) {
        int st = 0;
        waitpid (pid, &st, 0);
        fail_msg ("the pretend worker exited with %d before starting its trial",
                  WIFEXITED (st) ? WEXITSTATUS (st) : -1);
    }
    *reaper = info[1];
    if (trial)
        *trial = info[2];
    return pid;
}

static pid_t
s_fake_worker (s_fixture_t *f, const char *script, bool respawn, pid_t *reaper)
{
    return s_fake_worker_run (f, script, respawn, true, reaper, NULL);
}

// s_worker_killed: a worker killed with SIGKILL takes its trial's grandchild
// (setsid, orphaned) with it, through its reaper, which then exits.
static void
s_worker_killed (void **state, bool respawn)
{
    s_fixture_t *f = *state;
    char *base = s_base (f);
    pid_t reaper;
    pid_t worker = s_fake_worker (f, S_GRANDCHILD "while :; do sleep 1; done", respawn, &reaper);
    char *dir = s_trial_dir (f, 5);
    pid_t gc = s_read_pid (dir, "gc.pid", 5000);
    free (dir);
    assert_false (s_gone (gc));
    assert_int_equal (kill (worker, SIGKILL), 0);
    assert_int_equal (waitpid (worker, NULL, 0), worker);
    bool gone = s_wait_gone (gc, 5000);
    s_kill_now (gc);
    if (!gone)
        fail_msg ("the grandchild %d outlived its worker %d", (int) gc, (int) worker);
    assert_true (s_wait_gone (reaper, 5000));
    // The reaper removed the dead worker's cgroup and state file.
    s_no_trace (f, base, worker);
    free (base);
}

static void
test_worker_killed (void **state)
{
    s_worker_killed (state, false);
}

static void
test_worker_killed_after_reaper_restart (void **state)
{
    s_worker_killed (state, true);
}

// A worker killed together with its reaper: the next worker with the same
// workdir finds the state file (and, in cgroup mode, the cgroup) of the dead
// one and kills what its trial left.
static void
test_restart_sweeps (void **state)
{
    s_fixture_t *f = *state;
    char *base = s_base (f);
    pid_t reaper, worker, gc;
    // In cgroup mode any worker that starts on this machine sweeps the
    // cgroups of dead workers beside its own (s_sweep_siblings): one started
    // by a test running in parallel may sweep ours before our own worker
    // does. That is the behaviour under test, done by another: try again
    // (a grandchild that dies with its worker would die every time).
    for (int round = 0;; round++) {
        worker = s_fake_worker (f, S_GRANDCHILD "while :; do sleep 1; done", false, &reaper);
        char *dir = s_trial_dir (f, 5);
        // Generous bounds (they only bound a failure): a loaded machine is slow.
        gc = s_read_pid (dir, "gc.pid", 15000);
        free (dir);
        assert_int_equal (kill (reaper, SIGKILL), 0);
        assert_true (s_wait_gone (reaper, 10000));
        assert_int_equal (kill (worker, SIGKILL), 0);
        assert_int_equal (waitpid (worker, NULL, 0), worker);
        // Nobody is left to kill it...
        if (!s_wait_gone (gc, 300))
            break;
        if (!base || round == 4)
            fail_msg ("the grandchild died with its worker and reaper: nothing left to sweep");
        fprintf (stderr, "test_restart_sweeps: grandchild %d gone before our sweep (another "
                        "worker's?); again\n", (int) gc);
        s_clean_trial (f, 5);
    }
    // ... until a worker starts with the same workdir.
    cgq_confine_t *c = s_confine (f, false);
    bool gone = s_wait_gone (gc, 10000);
    s_kill_now (gc);
    if (!gone)
        fail_msg ("the grandchild %d of dead worker %d was not swept", (int) gc, (int) worker);
    s_no_trace (f, base, worker);
    free (base);
    cgq_confine_destroy (&c);
}

// s_state_lists: whether the state file of worker owner lists a trial pid.
static bool
s_state_lists (s_fixture_t *f, pid_t owner, pid_t pid)
{
    char *cmd = cgq_xasprintf ("grep -q '^trial %d ' '%s/.cgq-confine/worker-%d-'*", (int) pid,
                               f->dir, (int) owner);
    int rc = system (cmd);
    free (cmd);
    return rc == 0;
}

// pgroup mode: a trial that starts (or ends) is written into the state file
// a moment later, from the loop's tick (cgq_confine_deadline says when), not
// during its start; a wave of starts is one write.
static void
test_state_file_after_start (void **state)
{
    s_fixture_t *f = *state;
    cgq_confine_t *c = s_confine (f, false);
    tt_assign_t sa;
    tt_assign_init (&sa, 9, 6, "sleep 30");
    cgq_task_opts_t opts = s_opts (f, c);
    cgq_task_t *task = cgq_task_start (&sa.a, &opts, NULL, NULL);
    assert_false (cgq_task_done (task));
    pid_t pid = cgq_task_pid (task);
    int64_t due = cgq_confine_deadline (c);
    bool listed_at_start = s_state_lists (f, getpid (), pid);
    while (cgq_now_ms () < due)
        usleep (2000);
    cgq_confine_tick (c);
    bool listed_after = s_state_lists (f, getpid (), pid);
    int64_t due_after = cgq_confine_deadline (c);
    cgq_task_stop (task, "done", 300);
    Cgq__Result *r = tt_run (task, 5000);
    cgq_result_destroy (&r);
    cgq_task_destroy (&task);
    int64_t due_end = cgq_confine_deadline (c);
    while (cgq_now_ms () < due_end)
        usleep (2000);
    cgq_confine_tick (c);
    bool listed_end = s_state_lists (f, getpid (), pid);
    cgq_confine_destroy (&c);

    assert_true (due > 0);
    assert_false (listed_at_start);
    assert_true (listed_after);
    assert_int_equal (due_after, 0);
    assert_true (due_end > 0);
    assert_false (listed_end);
}

// pgroup mode: the worker and its reaper killed together right after a
// start, before the state file listed the trial (S_STATE_DELAY_MS): no one
// is left to sweep it, and its main process still dies with the worker
// (PR_SET_PDEATHSIG), as docs/architecture.md says.
static void
test_both_killed_before_state (void **state)
{
    s_fixture_t *f = *state;
    cgq_confine_t *probe = s_confine (f, false); // skips where the mode cannot be had
    cgq_confine_destroy (&probe);
    pid_t reaper, trial = 0;
    pid_t worker = s_fake_worker_run (f, "sleep 60", false, false, &reaper, &trial);
    bool listed = s_state_lists (f, worker, trial);
    assert_int_equal (kill (reaper, SIGKILL), 0);
    bool reaper_gone = s_wait_gone (reaper, 10000);
    assert_int_equal (kill (worker, SIGKILL), 0);
    assert_int_equal (waitpid (worker, NULL, 0), worker);
    bool gone = s_wait_gone (trial, 5000);
    s_kill_now (trial);
    assert_true (trial > 0);
    assert_false (listed);
    assert_true (reaper_gone);
    if (!gone)
        fail_msg ("trial %d outlived its worker %d and reaper %d", (int) trial, (int) worker,
                  (int) reaper);
}

#define S_BOTH(t)                                                                                 \
    cmocka_unit_test_prestate_setup_teardown (t, s_setup, s_teardown, &s_cgroup),                \
        cmocka_unit_test_prestate_setup_teardown (t, s_setup, s_teardown, &s_pgroup)

int
main (void)
{
    // Orphans the trials leave must not become zombies of this process for
    // long: pgroup mode makes it a subreaper, and s_gone reaps them.
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_mode_parse),
        cmocka_unit_test_setup_teardown (test_unconfined_grandchild_survives, s_setup, s_teardown),
        S_BOTH (test_describe),
        S_BOTH (test_exit_kills_setsid_grandchild),
        S_BOTH (test_exit_kills_setsid_grandchild_forked),
        cmocka_unit_test_prestate_setup_teardown (test_trial_in_its_leaf, s_setup, s_teardown,
                                                  &s_cgroup),
        cmocka_unit_test_prestate_setup_teardown (test_trial_in_its_leaf_forked, s_setup,
                                                  s_teardown, &s_cgroup),
        cmocka_unit_test_prestate_setup_teardown (test_leaf_name_taken, s_setup, s_teardown,
                                                  &s_cgroup),
        S_BOTH (test_timeout_kills_term_ignorers),
        cmocka_unit_test_prestate_setup_teardown (test_cgroup_without_kill_file, s_setup,
                                                  s_teardown, &s_cgroup),
        S_BOTH (test_worker_killed),
        S_BOTH (test_worker_killed_after_reaper_restart),
        S_BOTH (test_restart_sweeps),
        cmocka_unit_test_prestate_setup_teardown (test_state_file_after_start, s_setup,
                                                  s_teardown, &s_pgroup),
        cmocka_unit_test_prestate_setup_teardown (test_both_killed_before_state, s_setup,
                                                  s_teardown, &s_pgroup),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
