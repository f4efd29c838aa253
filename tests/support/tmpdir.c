#include "tmpdir.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
cgq_test_tmpdir (char *buf, size_t n, const char *name)
{
    int len = snprintf (buf, n, "/tmp/cgq-%s-XXXXXX", name);
    if (len < 0 || (size_t) len >= n) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return mkdtemp (buf) ? 0 : -1;
}

int
cgq_test_rmtree (const char *dir)
{
    size_t n = strlen (dir) + 16;
    char *cmd = malloc (n);
    if (!cmd)
        return -1;
    snprintf (cmd, n, "rm -rf '%s'", dir);
    int rc = system (cmd);
    free (cmd);
    return rc == 0 ? 0 : -1;
}
