// Spare trial directories: what a take leaves in place, what it refuses,
// and the pool's own directory.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spare.h"
#include "tmpdir.h"
#include "util.h"

typedef struct {
    char dir[64]; // the workdir
} s_fixture_t;

static int
s_setup (void **state)
{
    s_fixture_t *f = cgq_xcalloc (1, sizeof *f);
    if (cgq_test_tmpdir (f->dir, sizeof f->dir, "spare-test") < 0)
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

// s_wait_ready waits (2 s at most) until n spares are ready.
static void
s_wait_ready (cgq_spare_t *s, size_t n)
{
    for (int i = 0; i < 400 && cgq_spare_ready (s) < n; i++)
        usleep (5000);
    assert_int_equal (cgq_spare_ready (s), n);
}

// s_refilled has what was taken made again, as a start does once its trial
// runs, and waits until n spares are ready.
static void
s_refilled (cgq_spare_t *s, size_t n)
{
    cgq_spare_refill (s);
    s_wait_ready (s, n);
}

// The mode mkdir (path, mode) gives under this umask.
static mode_t
s_made (mode_t mode)
{
    mode_t um = umask (0);
    umask (um);
    return mode & ~um;
}

static mode_t
s_mode (const char *path)
{
    struct stat st;
    if (lstat (path, &st) < 0)
        fail_msg ("%s: %s", path, strerror (errno));
    assert_true (S_ISDIR (st.st_mode) || S_ISREG (st.st_mode));
    return st.st_mode & 07777;
}

// s_take takes dir (WORKDIR/rel) and checks what it left: the logs empty,
// private, open for writing; dir private.
static void
s_take (s_fixture_t *f, cgq_spare_t *s, const char *rel)
{
    char *dir = cgq_xasprintf ("%s/%s", f->dir, rel);
    int out = -1, err = -1;
    assert_int_equal (cgq_spare_take (s, dir, &out, &err), 0);
    assert_int_equal (s_mode (dir), s_made (0700));
    const char *names[2] = {"stdout.log", "stderr.log"};
    int fds[2] = {out, err};
    for (int i = 0; i < 2; i++) {
        char *path = cgq_xasprintf ("%s/%s", dir, names[i]);
        assert_int_equal (s_mode (path), s_made (0600));
        assert_int_equal (write (fds[i], names[i], strlen (names[i])), (ssize_t) strlen (names[i]));
        assert_int_equal (fcntl (fds[i], F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
        close (fds[i]);
        FILE *fp = fopen (path, "r");
        assert_non_null (fp);
        char buf[32] = "";
        assert_non_null (fgets (buf, sizeof buf, fp));
        fclose (fp);
        assert_string_equal (buf, names[i]); // the fd is that file, and it was empty
        free (path);
    }
    free (dir);
}

// s_pools counts the .cgq-spare-* entries in dir.
static int
s_pools (const char *dir)
{
    DIR *d = opendir (dir);
    assert_non_null (d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir (d)))
        n += strncmp (e->d_name, ".cgq-spare-", 11) == 0;
    closedir (d);
    return n;
}

static void
test_take_levels (void **state)
{
    s_fixture_t *f = *state;
    cgq_spare_t *s = cgq_spare_new (f->dir, 2);
    assert_non_null (s);
    s_wait_ready (s, 2);
    // A new job: the whole chain, job and trial as mkdir -p makes them.
    s_take (f, s, "job-1/trial-0/attempt-1");
    char *job = cgq_xasprintf ("%s/job-1", f->dir);
    char *trial = cgq_xasprintf ("%s/job-1/trial-0", f->dir);
    assert_int_equal (s_mode (job), s_made (0755));
    assert_int_equal (s_mode (trial), s_made (0755));
    s_refilled (s, 2);
    // A new trial of that job; another attempt of that trial; a stage.
    s_take (f, s, "job-1/trial-1/attempt-1");
    s_take (f, s, "job-1/trial-0/attempt-2");
    s_refilled (s, 2);
    s_take (f, s, "job-1/trial-0/attempt-2.stage-1");
    // A job this pool never took for, whose directory is there (an earlier
    // worker's): guessed new, found not, and taken as it is.
    char *job4 = cgq_xasprintf ("%s/job-4", f->dir);
    char *old_trial = cgq_xasprintf ("%s/trial-0/attempt-1", job4);
    assert_int_equal (cgq_mkdir_p (old_trial), 0);
    s_refilled (s, 2);
    s_take (f, s, "job-4/trial-0/attempt-2");
    s_take (f, s, "job-4/trial-1/attempt-1");
    s_refilled (s, 2);
    // The last job's directory gone meanwhile: made again.
    assert_int_equal (cgq_test_rmtree (job4), 0);
    s_take (f, s, "job-4/trial-2/attempt-1");
    free (old_trial);
    free (job4);
    s_refilled (s, 2);
    // A chain's levels are named trial-0 and attempt-1 (one rename fewer
    // each where they fit): a new job whose first trial or attempt is
    // another has them renamed, and nothing of those names is left.
    s_take (f, s, "job-9/trial-7/attempt-3");
    s_take (f, s, "job-10/trial-0/attempt-2");
    s_refilled (s, 2);
    s_take (f, s, "job-11/trial-5/attempt-1");
    const char *only[][2] = {{"job-9", "trial-7"},           {"job-9/trial-7", "attempt-3"},
                             {"job-10", "trial-0"},          {"job-10/trial-0", "attempt-2"},
                             {"job-11", "trial-5"},          {"job-11/trial-5", "attempt-1"}};
    for (size_t i = 0; i < sizeof only / sizeof *only; i++) {
        char *ls = cgq_xasprintf ("test \"$(ls -a '%s/%s' | tr '\\n' ' ')\" = '. .. %s '", f->dir,
                                  only[i][0], only[i][1]);
        if (system (ls) != 0)
            fail_msg ("%s/%s holds more than %s", f->dir, only[i][0], only[i][1]);
        free (ls);
    }
    s_refilled (s, 2);
    // Nothing but the attempt directories is left in the trial directories.
    char *cmd = cgq_xasprintf ("test \"$(ls -a '%s' | tr '\\n' ' ')\" = "
                               "'. .. attempt-1 attempt-2 attempt-2.stage-1 '",
                               trial);
    assert_int_equal (system (cmd), 0);
    free (cmd);
    cmd = cgq_xasprintf ("test \"$(ls -a '%s' | tr '\\n' ' ')\" = '. .. trial-0 trial-1 '", job);
    assert_int_equal (system (cmd), 0);
    free (cmd);
    free (job);
    free (trial);
    cgq_spare_destroy (&s);
    assert_null (s);
    cgq_spare_destroy (&s);
    // The pool's own directory goes with it.
    assert_int_equal (s_pools (f->dir), 0);
}

// What a start took is made again only when the start says so (once the
// trial runs): not while it competes for the CPUs.
static void
test_refill_after_start (void **state)
{
    s_fixture_t *f = *state;
    cgq_spare_t *s = cgq_spare_new (f->dir, 2);
    assert_non_null (s);
    s_wait_ready (s, 2);
    s_take (f, s, "job-1/trial-0/attempt-1");
    s_take (f, s, "job-1/trial-1/attempt-1");
    usleep (100 * 1000);
    assert_int_equal (cgq_spare_ready (s), 0);
    s_refilled (s, 2);
    cgq_spare_refill (NULL);
    cgq_spare_destroy (&s);
}

static void
test_take_refused (void **state)
{
    s_fixture_t *f = *state;
    cgq_spare_t *s = cgq_spare_new (f->dir, 1);
    assert_non_null (s);
    s_wait_ready (s, 1);
    int out = -1, err = -1;
    // An attempt directory that exists (a rerun) is never replaced, nor what
    // is in it touched.
    char *dir = cgq_xasprintf ("%s/job-2/trial-0/attempt-1", f->dir);
    assert_int_equal (cgq_mkdir_p (dir), 0);
    char *keep = cgq_xasprintf ("%s/result.json", dir);
    FILE *fp = fopen (keep, "w");
    assert_non_null (fp);
    fclose (fp);
    assert_int_equal (cgq_spare_take (s, dir, &out, &err), -1);
    assert_int_equal (access (keep, F_OK), 0);
    // Not three levels below the workdir, or not below it at all.
    assert_int_equal (cgq_spare_take (s, "/tmp/elsewhere/job-2/trial-0/attempt-2", &out, &err),
                      -1);
    const char *bad[] = {"/job-2/trial-0", "/job-2/trial-0/attempt-2/x", "/job-2//attempt-2",
                         "/job-2/trial-0/"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        s_wait_ready (s, 1);
        char *path = cgq_xasprintf ("%s%s", f->dir, bad[i]);
        assert_int_equal (cgq_spare_take (s, path, &out, &err), -1);
        free (path);
    }
    // A level that is a file.
    char *file = cgq_xasprintf ("%s/job-3", f->dir);
    fp = fopen (file, "w");
    assert_non_null (fp);
    fclose (fp);
    s_wait_ready (s, 1);
    char *under = cgq_xasprintf ("%s/job-3/trial-0/attempt-1", f->dir);
    assert_int_equal (cgq_spare_take (s, under, &out, &err), -1);
    // Still usable after each refusal.
    s_wait_ready (s, 1);
    s_take (f, s, "job-2/trial-0/attempt-2");
    free (under);
    free (file);
    free (keep);
    free (dir);
    cgq_spare_destroy (&s);
}

static void
test_sweep (void **state)
{
    s_fixture_t *f = *state;
    // A pool of a process that has exited, and one of a process that runs.
    pid_t dead = fork ();
    if (dead == 0)
        _exit (0);
    assert_true (dead > 0);
    assert_int_equal (waitpid (dead, NULL, 0), dead);
    char *gone = cgq_xasprintf ("%s/.cgq-spare-%d/4/t/a", f->dir, (int) dead);
    char *alive = cgq_xasprintf ("%s/.cgq-spare-%d", f->dir, (int) getppid ());
    assert_int_equal (cgq_mkdir_p (gone), 0);
    assert_int_equal (cgq_mkdir_p (alive), 0);
    cgq_spare_t *s = cgq_spare_new (f->dir, 1);
    assert_non_null (s);
    char *gone_root = cgq_xasprintf ("%s/.cgq-spare-%d", f->dir, (int) dead);
    assert_int_equal (access (gone_root, F_OK), -1);
    assert_int_equal (access (alive, F_OK), 0);
    assert_int_equal (s_pools (f->dir), 2); // the live one and this one
    cgq_spare_destroy (&s);
    assert_int_equal (s_pools (f->dir), 1);
    free (gone_root);
    free (gone);
    free (alive);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown (test_take_levels, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_refill_after_start, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_take_refused, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_sweep, s_setup, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
