// task_testing: shared fixtures of task_test and confine_test.
#include "task_testing.h"

#include <poll.h>

#include "util.h"

void
tt_assign_init (tt_assign_t *sa, uint64_t job, uint64_t trial, const char *script)
{
    cgq__assign__init (&sa->a);
    cgq__task_ref__init (&sa->ref);
    sa->ref.job = job;
    sa->ref.trial = trial;
    sa->ref.attempt = 1;
    sa->a.task = &sa->ref;
    sa->a.kind = "command";
    sa->a.params_json = "{}";
    sa->argv[0] = "/bin/sh";
    sa->argv[1] = "-c";
    sa->argv[2] = (char *) script;
    sa->a.argv = sa->argv;
    sa->a.n_argv = 3;
}

Cgq__Result *
tt_run (cgq_task_t *task, int64_t max_ms)
{
    int64_t give_up = cgq_now_ms () + max_ms;
    while (!cgq_task_done (task) && cgq_now_ms () < give_up) {
        int fds[3];
        size_t n = cgq_task_fds (task, fds);
        struct pollfd pfd[3];
        for (size_t i = 0; i < n; i++)
            pfd[i] = (struct pollfd) {.fd = fds[i], .events = POLLIN};
        if (poll (pfd, n, 20) > 0)
            for (size_t i = 0; i < n; i++)
                if (pfd[i].revents)
                    cgq_task_on_readable (task, pfd[i].fd);
        cgq_task_tick (task, cgq_now_ms ());
    }
    return cgq_task_take_result (task);
}
