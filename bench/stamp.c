// cgq-bench-stamp [SECONDS]: the trial of bench/dispatch.py. It reports when
// the trial process started: on x86-64 its entry point (the process's first
// instruction after exec, before the C library's start-up) reads
// CLOCK_REALTIME with a bare system call and then goes on to _start; main
// reads the clock again, so that the C library's start-up shows on its own
// (about 0.4 ms for a static glibc program on the development VM). Elsewhere
// only main's reading exists and both figures are main's. A compiled program,
// because Python's or a shell's start-up would add milliseconds. Then it
// sleeps SECONDS (default 0) and writes {"t_us": ENTRY_US, "t_main_us":
// MAIN_US, "score": 0} to fd 3 when CGQ_REPORT_FD is set (a cgq trial's report
// pipe), else to stdout (the Python subprocess peer).
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

// Where the entry point leaves its reading (zero until then: .bss).
struct timespec cgq_stamp_entry_ts;

#if defined(__x86_64__) && defined(CGQ_STAMP_ENTRY)
// The ELF entry point (-Wl,-e,cgq_stamp_entry): clock_gettime (228) into
// cgq_stamp_entry_ts, then _start with the stack and every register it reads
// as the kernel (or the dynamic loader) left them: a system call changes only
// rax, rcx and r11, which _start does not read.
__asm__ (".text\n"
         ".globl cgq_stamp_entry\n"
         ".type cgq_stamp_entry, @function\n"
         "cgq_stamp_entry:\n"
         "    movl $228, %eax\n"
         "    xorl %edi, %edi\n" // CLOCK_REALTIME
         "    leaq cgq_stamp_entry_ts(%rip), %rsi\n"
         "    syscall\n"
         "    jmp _start\n");
#endif

static long long
s_us (const struct timespec *ts)
{
    return (long long) ts->tv_sec * 1000000 + ts->tv_nsec / 1000;
}

int
main (int argc, char **argv)
{
    struct timespec ts;
    clock_gettime (CLOCK_REALTIME, &ts);
    long long main_us = s_us (&ts);
    long long us = cgq_stamp_entry_ts.tv_sec ? s_us (&cgq_stamp_entry_ts) : main_us;
    double secs = argc > 1 ? atof (argv[1]) : 0;
    if (secs > 0) {
        struct timespec d = {(time_t) secs, (long) ((secs - (double) (time_t) secs) * 1e9)};
        while (nanosleep (&d, &d) != 0)
            ;
    }
    char line[96];
    int n = snprintf (line, sizeof line, "{\"t_us\": %lld, \"t_main_us\": %lld, \"score\": 0}\n",
                      us, main_us);
    int fd = getenv ("CGQ_REPORT_FD") ? 3 : 1;
    return write (fd, line, (size_t) n) == n ? 0 : 1;
}
