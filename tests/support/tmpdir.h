// tmpdir: a unit test's private directory under /tmp, and its removal.
#ifndef CGQ_TEST_TMPDIR_H
#define CGQ_TEST_TMPDIR_H

#include <stddef.h>

// cgq_test_tmpdir makes /tmp/cgq-NAME-XXXXXX into buf (n bytes: 64 is
// plenty for short names). Returns 0, or -1 (errno set).
int cgq_test_tmpdir (char *buf, size_t n, const char *name);

// cgq_test_rmtree removes dir and everything in it. Returns 0, or -1.
int cgq_test_rmtree (const char *dir);

#endif
