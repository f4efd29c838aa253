// driver: a main() for the fuzz targets in a build without libFuzzer (gcc,
// the ASan+UBSan build of make test). It feeds every file named on the
// command line, and every file of every directory named, to
// LLVMFuzzerTestOneInput once, in name order, so the seed corpora and the
// regression inputs of tests/fuzz/corpus/ run as ordinary ctest entries.
// Any crash, leak or undefined behaviour fails the test through the
// sanitizers, exactly as it would under libFuzzer.
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"
#include "util.h"

static int
s_run_file (const char *path)
{
    FILE *f = fopen (path, "rb");
    cgq_buf_t b;
    cgq_buf_init (&b);
    if (!f || cgq_buf_read (&b, f) < 0) {
        fprintf (stderr, "driver: cannot read %s\n", path);
        if (f)
            fclose (f);
        cgq_buf_fini (&b);
        return -1;
    }
    fclose (f);
    // A copy of exactly len bytes, so ASan sees a read past the input's end.
    uint8_t *exact = cgq_xmalloc (b.len ? b.len : 1);
    memcpy (exact, b.data, b.len);
    LLVMFuzzerTestOneInput (exact, b.len);
    free (exact);
    cgq_buf_fini (&b);
    return 0;
}

static int
s_name_cmp (const void *a, const void *b)
{
    return strcmp (*(char *const *) a, *(char *const *) b);
}

// s_run_dir runs every regular file of dir; returns how many, or -1.
static int
s_run_dir (const char *dir)
{
    DIR *d = opendir (dir);
    if (!d) {
        fprintf (stderr, "driver: cannot open %s\n", dir);
        return -1;
    }
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir (d))) {
        if (e->d_name[0] == '.')
            continue;
        names = cgq_xrealloc (names, (n + 1) * sizeof *names);
        names[n++] = cgq_xstrdup (e->d_name);
    }
    closedir (d);
    qsort (names, n, sizeof *names, s_name_cmp);
    int ran = 0;
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        snprintf (path, sizeof path, "%s/%s", dir, names[i]);
        struct stat st;
        if (stat (path, &st) == 0 && S_ISREG (st.st_mode) && s_run_file (path) == 0)
            ran++;
        free (names[i]);
    }
    free (names);
    return ran;
}

int
main (int argc, char **argv)
{
    if (argc < 2) {
        fprintf (stderr, "usage: %s FILE|DIR...\n", argv[0]);
        return 2;
    }
    LLVMFuzzerInitialize (&argc, &argv);
    int total = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat (argv[i], &st) < 0) {
            fprintf (stderr, "driver: no such file or directory: %s\n", argv[i]);
            return 1;
        }
        int n = S_ISDIR (st.st_mode) ? s_run_dir (argv[i]) : s_run_file (argv[i]) == 0;
        if (n < 0)
            return 1;
        total += n;
    }
    if (total == 0) {
        fprintf (stderr, "driver: no input found in the arguments (empty corpus?)\n");
        return 1;
    }
    printf ("%s: %d input(s) ran clean\n", argv[0], total);
    return 0;
}
