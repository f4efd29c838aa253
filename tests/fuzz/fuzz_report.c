// fuzz_report: what a worker reads from a trial: the report lines on fd 3
// (worker/task.c: split into lines, each a JSON object, overlong ones
// discarded) and the stdout/stderr tails it quotes in a failed result (kept
// as valid UTF-8). A trial runs whatever a spec says, so all of it is hostile.
//
// These parsers are file-local to task.c and work on a cgq_task_t, so this
// target compiles task.c into itself (the SQLite way) and drives the static
// functions on a task that was never started, instead of forking a trial per
// input. The link then takes the rest of the worker from libcgq_worker, whose
// own task.o is never pulled in (every symbol it defines is defined here).
//
// Input: byte 0 chooses how the rest is cut into reads (1..128 bytes each,
// as a pipe may deliver it) and, with bit 7, whether a 1 MiB line without a
// newline comes first, so the overlong-line path is reached.
#include "../../worker/task.c"

#include "fuzz.h"

static void
s_on_report (void *arg, cgq_task_t *task, const char *report_json, uint64_t seq)
{
    // What link.c does with it: a Progress whose report_json must be JSON.
    json_t *again = json_loads (report_json, 0, NULL);
    if (!json_is_object (again) || seq != task->seq)
        abort ();
    json_decref (again);
    (*(uint64_t *) arg)++;
}

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
    fuzz_quiet ();
    return 0;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    Cgq__Assign a = CGQ__ASSIGN__INIT;
    cgq_task_opts_t opts = {.workdir = "/nonexistent"};
    cgq_task_t *t = s_task_new (&a, &opts);
    uint64_t reports = 0;
    t->on_report = s_on_report;
    t->arg = &reports;

    size_t cut = 1 + (data[0] & 0x7f);
    if (data[0] & 0x80) {
        size_t big = S_MAX_REPORT_LINE + 1;
        char *run = cgq_xmalloc (big);
        memset (run, 'x', big);
        s_report_data (t, run, big);
        free (run);
    }
    const char *rest = (const char *) data + 1;
    size_t len = size - 1;
    for (size_t off = 0; off < len; off += cut) {
        size_t n = len - off < cut ? len - off : cut;
        s_report_data (t, rest + off, n);
        s_log (t, &t->err, rest + off, n);
    }
    s_report_eof (t);
    if (reports != t->seq)
        abort ();

    // The tails a failed result quotes, and the same cleaning on raw bytes.
    free (s_last_lines (t->err_tail.data, t->err_tail.len, S_ERR_TAIL_LINES));
    char *clean = s_utf8_clean (rest, len);
    json_t *s = json_string (clean);
    if (!s)
        abort (); // jansson refuses invalid UTF-8: the cleaner must not let any through
    json_decref (s);
    free (clean);
    cgq_task_destroy (&t);
    return 0;
}
