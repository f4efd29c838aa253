// Checkpoints in a directory store: the manifest and its sha256, a seal
// (moved, and copied across file systems), a restore that checks every
// byte, a corrupted or half-written checkpoint never restored, pruning, an
// unwritable store, and the sealer thread.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt.h"
#include "sealer.h"
#include "tmpdir.h"
#include "util.h"

typedef struct {
    char dir[64];
} s_fixture_t;

static int
s_setup (void **state)
{
    s_fixture_t *f = cgq_xcalloc (1, sizeof *f);
    if (cgq_test_tmpdir (f->dir, sizeof f->dir, "ckpt-test") < 0)
        return -1;
    *state = f;
    return 0;
}

static int
s_teardown (void **state)
{
    s_fixture_t *f = *state;
    chmod (f->dir, 0700);
    int rc = cgq_test_rmtree (f->dir);
    free (f);
    return rc;
}

static void
s_write (const char *dir, const char *rel, const char *text)
{
    char *path = cgq_xasprintf ("%s/%s", dir, rel);
    char *slash = strrchr (path, '/');
    *slash = 0;
    assert_int_equal (cgq_mkdir_p (path), 0);
    *slash = '/';
    FILE *fp = fopen (path, "w");
    assert_non_null (fp);
    fputs (text, fp);
    fclose (fp);
    free (path);
}

static char *
s_read (const char *dir, const char *rel)
{
    char *path = cgq_xasprintf ("%s/%s", dir, rel);
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

// s_src makes a trial's checkpoint directory under the fixture: two files,
// one in a subdirectory, and a link (left out).
static char *
s_src (const char *dir, const char *name, const char *weights)
{
    char *src = cgq_xasprintf ("%s/%s", dir, name);
    s_write (src, "model.pt", weights);
    s_write (src, "opt/state.bin", "adam");
    char *link = cgq_xasprintf ("%s/outside", src);
    assert_int_equal (symlink ("/etc/passwd", link), 0);
    free (link);
    return src;
}

#define S_MANIFEST                                                                          \
    "cgq-checkpoint 1\n"                                                                    \
    "9a129038d9a00aed0cf6a7ea059ca50a813449061ab87848cf1a13eafdf33b2c 7 model.pt\n"         \
    "f7f376a1fcd0d0e11a10ed1b6577c99784d3a6bbe669b1d13fae43eb64634f6e 4 opt/state.bin\n"
// sha256 of S_MANIFEST: `printf '...' | sha256sum` gives the same.
#define S_SHA "e61aebdb683de40cc29cf5935a1727e2fe0d885723e931880d9a9e15d9cca66d"

// The manifest is the sorted "SHA256 SIZE PATH" lines, what sha256sum
// writes; a link is left out, and said.
static void
test_manifest (void **state)
{
    s_fixture_t *f = *state;
    char *src = s_src (f->dir, "c", "weights");
    cgq_buf_t m;
    cgq_buf_init (&m);
    uint64_t size = 0, files = 0;
    char *note = NULL, err[512];
    assert_int_equal (cgq_ckpt_manifest (src, false, &m, &size, &files, &note, err, sizeof err), 0);
    assert_string_equal (m.data, S_MANIFEST);
    assert_int_equal (size, 11);
    assert_int_equal (files, 2);
    assert_non_null (note);
    assert_non_null (strstr (note, "outside (a symbolic link)"));
    cgq_buf_fini (&m);
    free (note);
    free (src);
}

static void
test_names (void **state)
{
    (void) state;
    uint32_t a;
    uint64_t n;
    char buf[48];
    assert_string_equal (cgq_ckpt_name (buf, 2, 17), "ckpt-2-17");
    assert_true (cgq_ckpt_parse_name ("ckpt-2-17", &a, &n));
    assert_int_equal (a, 2);
    assert_int_equal (n, 17);
    assert_false (cgq_ckpt_parse_name ("ckpt-2-17.tmp", &a, &n));
    assert_false (cgq_ckpt_parse_name ("ckpt-02-17", &a, &n));
    assert_false (cgq_ckpt_parse_name ("ckpt-2", &a, &n));
    assert_false (cgq_ckpt_parse_name ("latest", &a, &n));
    char *ts = cgq_ckpt_trial_store ("/s", 7, 12);
    assert_string_equal (ts, "/s/job-7/trial-12");
    free (ts);
}

// s_seal seals a fresh source as checkpoint n of attempt a in store/job-1/trial-0.
static char *
s_seal (const char *dir, const char *store, uint32_t a, uint64_t n, const char *weights,
        cgq_ckpt_info_t *info)
{
    char name[64];
    snprintf (name, sizeof name, "src-%u-%llu", a, (unsigned long long) n);
    char *src = s_src (dir, name, weights);
    char *ts = cgq_ckpt_trial_store (store, 1, 0);
    char err[1024] = "";
    int rc = cgq_ckpt_seal (src, ts, a, n, info, err, sizeof err);
    if (rc < 0)
        fail_msg ("seal: %s", err);
    assert_int_equal (access (src, F_OK), -1); // moved (or copied and removed)
    free (src);
    return ts;
}

// A seal moves the files into ckpt-A-N (no .tmp left), with the manifest,
// its sha256 and `latest`; a restore gives back exactly the files.
static void
s_seal_restore (const char *dir, const char *store)
{
    cgq_ckpt_info_t info;
    char *ts = s_seal (dir, store, 1, 3, "weights", &info);
    assert_string_equal (info.sha256, S_SHA);
    assert_int_equal (info.size, 11);
    assert_int_equal (info.files, 2);
    char *want = cgq_xasprintf ("%s/ckpt-1-3", ts);
    assert_string_equal (info.path, want);
    char *m = s_read (want, "manifest");
    assert_string_equal (m, S_MANIFEST);
    free (m);
    char *tmp = cgq_xasprintf ("%s.tmp", want);
    assert_int_equal (access (tmp, F_OK), -1);
    char *latest = cgq_xasprintf ("%s/latest", ts);
    char target[64] = "";
    assert_true (readlink (latest, target, sizeof target - 1) > 0);
    assert_string_equal (target, "ckpt-1-3");

    char *dst = cgq_xasprintf ("%s/restored", dir);
    char err[1024] = "";
    if (cgq_ckpt_restore (info.path, info.sha256, dst, err, sizeof err) < 0)
        fail_msg ("restore: %s", err);
    char *w = s_read (dst, "model.pt"), *o = s_read (dst, "opt/state.bin");
    assert_string_equal (w, "weights");
    assert_string_equal (o, "adam");
    free (w);
    free (o);
    char *link = cgq_xasprintf ("%s/outside", dst);
    struct stat st;
    assert_int_equal (lstat (link, &st), -1); // never sealed, never restored
    free (link);
    cgq_rm_tree (dst);
    free (dst);
    free (latest);
    free (tmp);
    free (want);
    free (ts);
    cgq_ckpt_info_fini (&info);
}

static void
test_seal_restore (void **state)
{
    s_fixture_t *f = *state;
    char *store = cgq_xasprintf ("%s/store", f->dir);
    s_seal_restore (f->dir, store);
    free (store);
}

// A store on another file system than the trial's directory: copied.
static void
test_seal_copy (void **state)
{
    s_fixture_t *f = *state;
    struct stat a, b;
    if (stat ("/dev/shm", &b) < 0 || stat (f->dir, &a) < 0 || a.st_dev == b.st_dev)
        skip ();
    char store[64] = "";
    if (cgq_test_tmpdir (store, sizeof store, "ckpt-shm") < 0)
        skip ();
    // cgq_test_tmpdir makes it under /tmp: put the store on /dev/shm instead.
    rmdir (store);
    char *shm = cgq_xasprintf ("/dev/shm/%s", strrchr (store, '/') + 1);
    s_seal_restore (f->dir, shm);
    assert_int_equal (cgq_rm_tree (shm), 0);
    free (shm);
}

// One flipped byte in a sealed file, in the manifest, a missing file, a
// truncated manifest: the restore fails and leaves nothing behind.
static void
test_corrupt (void **state)
{
    s_fixture_t *f = *state;
    char *store = cgq_xasprintf ("%s/store", f->dir);
    cgq_ckpt_info_t info;
    char *ts = s_seal (f->dir, store, 1, 1, "weights", &info);
    char *dst = cgq_xasprintf ("%s/restored", f->dir);
    char err[1024] = "";

    char *model = cgq_xasprintf ("%s/files/model.pt", info.path);
    FILE *fp = fopen (model, "r+");
    assert_non_null (fp);
    fputc ('W', fp); // "Weights"
    fclose (fp);
    assert_int_equal (cgq_ckpt_restore (info.path, info.sha256, dst, err, sizeof err), -1);
    assert_non_null (strstr (err, "file model.pt"));
    assert_int_equal (access (dst, F_OK), -1);

    s_write (info.path, "files/model.pt", "weights"); // good again
    assert_int_equal (cgq_ckpt_restore (info.path, info.sha256, dst, err, sizeof err), 0);
    cgq_rm_tree (dst);

    // The recorded sha256 is not the manifest's (another checkpoint's).
    assert_int_equal (cgq_ckpt_restore (info.path, "00000000000000000000000000000000000000000000"
                                                    "00000000000000000000",
                                        dst, err, sizeof err),
                      -1);
    assert_non_null (strstr (err, "manifest's sha256"));
    assert_int_equal (access (dst, F_OK), -1);

    unlink (model);
    assert_int_equal (cgq_ckpt_restore (info.path, info.sha256, dst, err, sizeof err), -1);
    assert_non_null (strstr (err, "model.pt"));
    assert_int_equal (access (dst, F_OK), -1);

    // A half-written checkpoint: a .tmp with no manifest, or a manifest cut short.
    char *tmp = cgq_xasprintf ("%s/ckpt-1-2.tmp", ts);
    s_write (tmp, "files/model.pt", "weights");
    assert_int_equal (cgq_ckpt_restore (tmp, info.sha256, dst, err, sizeof err), -1);
    assert_int_equal (access (dst, F_OK), -1);
    s_write (tmp, "manifest", "cgq-checkpoint 1\n9a129038d9a00aed0cf6a7e");
    assert_int_equal (cgq_ckpt_restore (tmp, info.sha256, dst, err, sizeof err), -1);
    assert_int_equal (access (dst, F_OK), -1);
    free (tmp);
    free (model);
    free (dst);
    free (ts);
    free (store);
    cgq_ckpt_info_fini (&info);
}

// A manifest whose paths leave the checkpoint is refused, even when its
// sha256 is the recorded one.
static void
test_manifest_paths (void **state)
{
    s_fixture_t *f = *state;
    char *ck = cgq_xasprintf ("%s/evil", f->dir);
    s_write (ck, "manifest",
             "cgq-checkpoint 1\n"
             "9a129038d9a00aed0cf6a7ea059ca50a813449061ab87848cf1a13eafdf33b2c 7 ../x\n");
    s_write (ck, "files/x", "weights");
    cgq_buf_t m;
    cgq_buf_init (&m);
    char *txt = s_read (ck, "manifest");
    // Its own sha256, as a writer that lies would record it.
    char sha[65];
    {
        cgq_buf_t out;
        cgq_buf_init (&out);
        char *note = NULL, err[256];
        uint64_t size, files;
        char *only = cgq_xasprintf ("%s/only", f->dir);
        s_write (only, "m", txt);
        assert_int_equal (cgq_ckpt_manifest (only, false, &out, &size, &files, &note, err,
                                             sizeof err),
                          0);
        // the manifest of a directory holding the file m: its first hash is sha256(txt)
        memcpy (sha, out.data + strlen ("cgq-checkpoint 1\n"), 64);
        sha[64] = 0;
        cgq_buf_fini (&out);
        free (note);
        free (only);
    }
    char *dst = cgq_xasprintf ("%s/restored", f->dir);
    char err[1024] = "";
    assert_int_equal (cgq_ckpt_restore (ck, sha, dst, err, sizeof err), -1);
    assert_non_null (strstr (err, "malformed"));
    assert_int_equal (access (dst, F_OK), -1);
    free (dst);
    free (txt);
    cgq_buf_fini (&m);
    free (ck);
}

// Pruning removes what is older than the acked checkpoint and not kept;
// newer ones (not acked yet) and .tmp stay.
static void
test_prune (void **state)
{
    s_fixture_t *f = *state;
    char *store = cgq_xasprintf ("%s/store", f->dir);
    const uint32_t att[] = {1, 1, 2, 2, 2};
    const uint64_t num[] = {1, 2, 1, 2, 3};
    char *ts = NULL;
    for (int i = 0; i < 5; i++) {
        cgq_ckpt_info_t info;
        free (ts);
        ts = s_seal (f->dir, store, att[i], num[i], "w", &info);
        cgq_ckpt_info_fini (&info);
    }
    char *tmp = cgq_xasprintf ("%s/ckpt-1-9.tmp", ts);
    assert_int_equal (mkdir (tmp, 0700), 0);
    char *keep[] = {cgq_xstrdup ("ckpt-1-2"), cgq_xstrdup ("ckpt-2-2")};
    assert_int_equal (cgq_ckpt_prune (ts, 2, 2, keep, 2), 2); // ckpt-1-1, ckpt-2-1
    const char *left[] = {"ckpt-1-2", "ckpt-2-2", "ckpt-2-3", "ckpt-1-9.tmp", "latest"};
    for (int i = 0; i < 5; i++) {
        char *p = cgq_xasprintf ("%s/%s", ts, left[i]);
        struct stat st;
        assert_int_equal (lstat (p, &st), 0);
        free (p);
    }
    char *gone = cgq_xasprintf ("%s/ckpt-1-1", ts);
    assert_int_equal (access (gone, F_OK), -1);
    free (gone);
    free (keep[0]);
    free (keep[1]);
    free (tmp);
    free (ts);
    free (store);
}

// A store that cannot be written: a clear error, nothing left behind, and the
// source removed (the trial's directory is not kept).
static void
test_unwritable (void **state)
{
    s_fixture_t *f = *state;
    // Root writes anywhere its permissions say no: a store below a file then.
    bool root = geteuid () == 0;
    char *ro = cgq_xasprintf ("%s/ro", f->dir);
    if (root)
        s_write (f->dir, "ro", "a file");
    else
        assert_int_equal (mkdir (ro, 0500), 0);
    char *src = s_src (f->dir, "c", "w");
    char *ts = cgq_ckpt_trial_store (ro, 1, 0);
    cgq_ckpt_info_t info;
    char err[1024] = "";
    assert_int_equal (cgq_ckpt_seal (src, ts, 1, 1, &info, err, sizeof err), -1);
    assert_non_null (strstr (err, "cannot create checkpoint store directory"));
    assert_non_null (strstr (err, root ? "Not a directory" : "Permission denied"));
    if (!root)
        assert_non_null (strstr (err, "--checkpoint-store"));
    assert_int_equal (access (src, F_OK), -1);
    chmod (ro, 0700);
    free (ts);
    free (src);
    free (ro);
}

// The sealer thread: a seal, then a restore whose newest candidate is
// corrupt falls back to the older one and says why.
static void
test_sealer (void **state)
{
    s_fixture_t *f = *state;
    cgq_sealer_t *s = cgq_sealer_new ();
    assert_non_null (s);
    char *store = cgq_xasprintf ("%s/store", f->dir);
    char *ts = cgq_ckpt_trial_store (store, 1, 0);
    Cgq__TaskRef ref = CGQ__TASK_REF__INIT;
    ref.job = 1;
    ref.attempt = 1;
    cgq_ckpt_info_t infos[2];
    for (int i = 0; i < 2; i++) {
        cgq_seal_job_t *job = cgq_seal_job_new (CGQ_SEAL, &ref);
        job->src = s_src (f->dir, i ? "b" : "a", i ? "new" : "old");
        job->trial_store = cgq_xstrdup (ts);
        job->n = (uint64_t) i + 1;
        cgq_sealer_push (s, job);
        struct pollfd p = {.fd = cgq_sealer_fd (s), .events = POLLIN};
        assert_int_equal (poll (&p, 1, 10000), 1);
        job = cgq_sealer_take (s);
        assert_non_null (job);
        assert_int_equal (job->rc, 0);
        infos[i] = job->info;
        memset (&job->info, 0, sizeof job->info);
        cgq_seal_job_free (&job);
    }
    s_write (infos[1].path, "files/model.pt", "NEW");
    cgq_seal_job_t *job = cgq_seal_job_new (CGQ_RESTORE, &ref);
    job->ncands = 2;
    job->cands = cgq_xcalloc (2, sizeof *job->cands);
    for (int i = 0; i < 2; i++) {
        job->cands[i].path = cgq_xstrdup (infos[1 - i].path);
        job->cands[i].sha256 = cgq_xstrdup (infos[1 - i].sha256);
        job->cands[i].step_json = cgq_xstrdup (i ? "{\"epoch\":1}" : "{\"epoch\":2}");
        job->cands[i].host = cgq_xstrdup ("h");
        job->cands[i].attempt = 1;
        job->cands[i].n = (uint64_t) (2 - i);
    }
    job->dst = cgq_xasprintf ("%s/restored", f->dir);
    cgq_sealer_push (s, job);
    struct pollfd p = {.fd = cgq_sealer_fd (s), .events = POLLIN};
    assert_int_equal (poll (&p, 1, 10000), 1);
    job = cgq_sealer_take (s);
    assert_non_null (job);
    assert_int_equal (job->used, 1);
    assert_non_null (job->notes);
    assert_non_null (strstr (job->notes, "checkpoint ckpt-1-2 (step {\"epoch\":2}"));
    assert_non_null (strstr (job->notes, "file model.pt"));
    char *w = s_read (job->dst, "model.pt");
    assert_string_equal (w, "old");
    free (w);
    assert_null (cgq_sealer_take (s));
    cgq_seal_job_free (&job);
    cgq_sealer_destroy (&s);
    assert_null (s);
    for (int i = 0; i < 2; i++)
        cgq_ckpt_info_fini (&infos[i]);
    free (ts);
    free (store);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown (test_manifest, s_setup, s_teardown),
        cmocka_unit_test (test_names),
        cmocka_unit_test_setup_teardown (test_seal_restore, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_seal_copy, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_corrupt, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_manifest_paths, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_prune, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_unwritable, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_sealer, s_setup, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
