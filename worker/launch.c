#include "launch.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/sched.h> // struct clone_args, CLONE_INTO_CGROUP (Linux 5.7)

#include "log.h"

int
cgq_spawn_pipe (int fds[2])
{
    if (pipe2 (fds, O_CLOEXEC) < 0)
        return -1;
    for (int i = 0; i < 2; i++) {
        if (fds[i] > 3)
            continue;
        int moved = fcntl (fds[i], F_DUPFD_CLOEXEC, 4);
        if (moved < 0) {
            close (fds[0]);
            close (fds[1]);
            return -1;
        }
        close (fds[i]);
        fds[i] = moved;
    }
    return 0;
}

// ---------------------------------------------------------------------------
// Spawn
//
// A trial starts, best first:
//  1. clone3(CLONE_VM | CLONE_VFORK [| CLONE_INTO_CGROUP]) on a stack of its
//     own, as glibc's posix_spawn does with clone(): no copy of the worker's
//     page tables, none to free at exec (a fork of the ~8 MB worker and the
//     exec that drops the copy took ~1.8 ms of the ~2.8 ms start on the
//     development VM). x86-64 only (the entry point is a few lines of
//     assembly), and not under AddressSanitizer, which does not know the
//     child's stack.
//  2. clone3(CLONE_INTO_CGROUP) as a fork (cgroup mode).
//  3. fork(), the child moving itself into its leaf through cgroup.procs
//     (cgroup mode): where clone3 is missing (Linux < 5.3, 5.7 for
//     CLONE_INTO_CGROUP) or refused (a seccomp filter). That move waits for
//     an RCU grace period, 10-20 ms on the development VM.
// A way that fails with an error meaning "not here" is not tried again.

#if defined(__SANITIZE_ADDRESS__)
#define S_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define S_ASAN 1
#endif
#endif
#if defined(__x86_64__) && !defined(S_ASAN)
#define S_SHARED_VM 1
#else
#define S_SHARED_VM 0
#endif

#define S_CHILD_STACK (256 * 1024)
#define S_SH_MAX_ARGS 8192 // a script without #! gets /bin/sh up to this many arguments

bool cgq_task_spawn_fork = false;

static bool s_no_clone3; // clone3 is missing or refused here
static bool s_no_vm;     // CLONE_VM with our own stack failed
static bool s_no_into;   // CLONE_INTO_CGROUP is missing


// The worker's pid, read by the child to detect a parent that died before
// PR_SET_PDEATHSIG was armed.
static pid_t s_worker_pid;

// s_exec_sh runs path, which exec refused as no binary and no #! script,
// with /bin/sh, as execvp does.
static void
s_exec_sh (const char *path, char **argv, char **envp)
{
    size_t argc = 0;
    while (argv[argc])
        argc++;
    if (argc > S_SH_MAX_ARGS)
        return;
    char *sh[argc + 2];
    sh[0] = (char *) "/bin/sh";
    sh[1] = (char *) path;
    for (size_t i = 1; i <= argc; i++)
        sh[i + 1] = argv[i];
    execve ("/bin/sh", sh, envp);
    errno = ENOEXEC;
}

// s_execvpe is execvp run with the trial's environment: PATH is the one in
// envp (glibc's default, /bin:/usr/bin, when it has none; an empty entry is
// the trial directory), EACCES is remembered while later entries are tried.
// Unlike setting environ and calling execvp, it writes nothing outside the
// stack but errno, as a CLONE_VM child must. Returns only on failure.
static void
s_execvpe (char **argv, char **envp)
{
    const char *file = argv[0];
    if (strchr (file, '/')) {
        execve (file, argv, envp);
        if (errno == ENOEXEC)
            s_exec_sh (file, argv, envp);
        return;
    }
    const char *path = "/bin:/usr/bin";
    for (char **e = envp; *e; e++)
        if (!strncmp (*e, "PATH=", 5)) {
            path = *e + 5;
            break;
        }
    size_t flen = strlen (file);
    bool eacces = false;
    char buf[PATH_MAX];
    for (const char *p = path;;) {
        const char *end = strchrnul (p, ':');
        size_t dlen = (size_t) (end - p);
        if (dlen + 1 + flen < sizeof buf) {
            memcpy (buf, p, dlen);
            if (dlen > 0)
                buf[dlen++] = '/';
            memcpy (buf + dlen, file, flen + 1);
            execve (buf, argv, envp);
            if (errno == ENOEXEC) {
                s_exec_sh (buf, argv, envp);
                return;
            }
            if (errno == EACCES)
                eacces = true;
            else if (errno != ENOENT && errno != ENOTDIR && errno != ESTALE && errno != ENODEV
                     && errno != ETIMEDOUT)
                return;
        }
        if (!*end)
            break;
        p = end + 1;
    }
    errno = eacces ? EACCES : ENOENT;
}

// s_child_fail ends a child that could not exec, saying why (sp->status_w).
static void __attribute__ ((noreturn))
s_child_fail (cgq_spawn_t *sp, int stage, int err)
{
    if (sp->status_w >= 0) {
        int fail[2] = {stage, err};
        (void) !write (sp->status_w, fail, sizeof fail);
    }
    else {
        sp->fail[0] = stage;
        sp->fail[1] = err;
    }
    _exit (127);
}

// s_child runs in the new process until exec: only async-signal-safe calls
// (the worker has ZeroMQ threads), and no writes outside its stack but
// sp->fail (it may share the worker's memory). Signals are blocked on entry
// after a CLONE_VM clone: the worker's handlers must not run here.
static void __attribute__ ((noreturn))
s_child (cgq_spawn_t *sp)
{
    // Its own session (and so its own process group): what it starts stays in
    // the session unless it calls setsid() itself, and confine kills by it.
    setsid ();
    // If the worker is killed (-9), its trials must not run on as duplicates
    // of the attempt the coordinator starts elsewhere. The check after prctl
    // closes the race with a worker that died before it.
    prctl (PR_SET_PDEATHSIG, SIGKILL);
    if (getppid () != s_worker_pid)
        _exit (127);
    // Into the trial's own cgroup before exec, so that all it starts is there.
    if (sp->join_fd >= 0 && write (sp->join_fd, "0", 1) < 0)
        s_child_fail (sp, CGQ_SPAWN_FAIL_CGROUP, errno);
    // Ignored signals stay ignored across exec; the trial gets the defaults.
    // (A CLONE_VM child has a copy of the handlers: this does not touch the
    // worker's.) Then unblocked, as the trial expects.
    struct sigaction dfl;
    memset (&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction (SIGPIPE, &dfl, NULL);
    sigaction (SIGTERM, &dfl, NULL);
    sigaction (SIGINT, &dfl, NULL);
    sigaction (SIGCHLD, &dfl, NULL);
    sigset_t none;
    sigemptyset (&none);
    sigprocmask (SIG_SETMASK, &none, NULL);

    if (chdir (sp->dir) < 0)
        s_child_fail (sp, CGQ_SPAWN_FAIL_CHDIR, errno);
    int null_fd = sp->null_fd >= 0 ? sp->null_fd : open ("/dev/null", O_RDONLY);
    if (null_fd >= 0 && null_fd != 0)
        dup2 (null_fd, 0);
    dup2 (sp->out_w, 1);
    dup2 (sp->err_w, 2);
    dup2 (sp->rep_w, 3);
    // Everything above 3 goes at exec, including the status pipe (only after
    // a failed exec could we still write to it).
    if (close_range (4, ~0u, CLOSE_RANGE_CLOEXEC) < 0)
        for (int fd = 4; fd < sp->max_fd; fd++)
            fcntl (fd, F_SETFD, FD_CLOEXEC);
    s_execvpe (sp->argv, sp->envp);
    s_child_fail (sp, CGQ_SPAWN_FAIL_EXEC, errno);
}

#if S_SHARED_VM
// s_clone3_vm calls clone3 with ca (CLONE_VM, a stack of its own) and runs
// fn (arg) in the child on that stack; fn must not return. Returns what
// clone3 returns in the parent (-1 with errno on failure). glibc has no
// clone3 with a function to call, hence these lines: the child starts with
// the parent's registers but rax (0), rcx and r11, and rsp at the top of its
// stack (16-aligned, so that the call leaves it as a function expects).
// fn and arg may sit in any register the compiler chose, rbp included: both
// are read before rbp is cleared (the end of the frame chain).
static pid_t
s_clone3_vm (struct clone_args *ca, void (*fn) (void *), void *arg)
{
    long ret;
    __asm__ volatile ("syscall\n\t"
                      "testq %%rax, %%rax\n\t"
                      "jnz 1f\n\t"
                      "movq %[fn], %%rax\n\t"
                      "movq %[arg], %%rdi\n\t"
                      "xorl %%ebp, %%ebp\n\t"
                      "callq *%%rax\n\t"
                      "movl $60, %%eax\n\t" // SYS_exit, should fn ever return
                      "xorl %%edi, %%edi\n\t"
                      "syscall\n\t"
                      "hlt\n"
                      "1:"
                      : "=a"(ret)
                      : "a"((long) SYS_clone3), "D"(ca), "S"(sizeof *ca), [fn] "r"(fn),
                        [arg] "r"(arg)
                      : "rcx", "r11", "memory");
    if (ret < 0) {
        errno = (int) -ret;
        return -1;
    }
    return (pid_t) ret;
}

static void
s_child_entry (void *arg)
{
    s_child (arg);
}

// The CLONE_VM child's stack: made once, reused (the worker starts one trial
// at a time, and is suspended while the child runs on it), a guard page below.
static char *s_stack;

static char *
s_child_stack (void)
{
    if (!s_stack) {
        long page = sysconf (_SC_PAGESIZE);
        void *m = mmap (NULL, S_CHILD_STACK + (size_t) page, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (m == MAP_FAILED)
            return NULL;
        mprotect (m, (size_t) page, PROT_NONE);
        s_stack = (char *) m + page;
    }
    return s_stack;
}
#endif

// s_clone3 starts the child with clone3 (flags: CLONE_VM, CLONE_INTO_CGROUP
// into cg_fd). Returns the child's pid, or -1 with errno (the child never
// returns from here).
static pid_t
s_clone3 (uint64_t flags, int cg_fd, cgq_spawn_t *sp)
{
    struct clone_args ca;
    memset (&ca, 0, sizeof ca);
    ca.exit_signal = SIGCHLD;
    if (flags & CLONE_INTO_CGROUP)
        ca.cgroup = (uint64_t) cg_fd;
#if S_SHARED_VM
    if (flags & CLONE_VM) {
        char *stack = s_child_stack ();
        if (!stack) {
            errno = ENOMEM;
            return -1;
        }
        ca.flags = flags | CLONE_VFORK;
        ca.stack = (uint64_t) (uintptr_t) stack;
        ca.stack_size = S_CHILD_STACK;
        // No handler of the worker may run in the child, which shares its
        // memory: all blocked until the child has reset them (s_child).
        sigset_t all, old;
        sigfillset (&all);
        pthread_sigmask (SIG_SETMASK, &all, &old);
        pid_t pid = s_clone3_vm (&ca, s_child_entry, sp);
        int saved = errno;
        pthread_sigmask (SIG_SETMASK, &old, NULL);
        errno = saved;
        return pid;
    }
#endif
    ca.flags = flags & ~(uint64_t) CLONE_VM;
    pid_t pid = (pid_t) syscall (SYS_clone3, &ca, sizeof ca);
    if (pid == 0)
        s_child (sp);
    return pid;
}

// s_start starts the child one way: clone3 with flags, or fork () when
// fork_it. A child with memory of its own says why it could not exec through
// a status pipe, read here until its exec closes it; a CLONE_VM child writes
// sp->fail itself (no pipe to make, close and read: ~20 us of a start on the
// development VM). Returns the pid, or -1 with errno.
static pid_t
s_start (cgq_spawn_t *sp, bool fork_it, uint64_t flags, int cg_fd)
{
    sp->fail[0] = sp->fail[1] = 0;
    bool shared = S_SHARED_VM && !fork_it && (flags & CLONE_VM);
    int st[2] = {-1, -1};
    if (!shared && cgq_spawn_pipe (st) < 0)
        return -1;
    sp->status_w = st[1];
    pid_t pid;
    if (fork_it) {
        pid = fork ();
        if (pid == 0)
            s_child (sp);
    }
    else
        pid = s_clone3 (flags, cg_fd, sp);
    if (shared)
        return pid;
    int e = errno;
    close (st[1]);
    if (pid > 0) {
        ssize_t n;
        do
            n = read (st[0], sp->fail, sizeof sp->fail);
        while (n < 0 && errno == EINTR);
        if (n != (ssize_t) sizeof sp->fail)
            sp->fail[0] = sp->fail[1] = 0; // EOF: it exec'd
    }
    close (st[0]);
    errno = e;
    return pid;
}

// cgq_spawn starts the child of sp (the best way that works, see above).
// leaf_fd: the trial's cgroup (O_PATH) or -1. Returns the pid (sp->fail says
// whether it exec'd), or -1 with errno; -2 when the cgroup fallback cannot
// open cgroup.procs (err says why).
pid_t
cgq_spawn (cgq_spawn_t *sp, cgq_confine_trial_t *confined, int leaf_fd, char *err, size_t errlen)
{
    s_worker_pid = getpid ();
    bool cgroup = leaf_fd >= 0;
    bool clone3_ok = !s_no_clone3 && !cgq_task_spawn_fork;
    bool vm = S_SHARED_VM && clone3_ok && !s_no_vm;
    bool into = cgroup && clone3_ok && !s_no_into;
    for (;;) {
        sp->join_fd = -1;
        if (cgroup && !into) {
            sp->join_fd = cgq_confine_trial_join_fd (confined, err, errlen);
            if (sp->join_fd < 0)
                return -2;
        }
        if (!vm && !into)
            break;
        pid_t pid =
            s_start (sp, false, (vm ? CLONE_VM : 0) | (into ? CLONE_INTO_CGROUP : 0), leaf_fd);
        int e = errno;
        if (pid > 0 || e == EAGAIN || e == ENOMEM || e == EMFILE || e == ENFILE)
            return pid;
        if (e == ENOSYS || e == E2BIG || e == EPERM) {
            // No clone3 (Linux < 5.3), or a seccomp filter that refuses it.
            s_no_clone3 = true;
            vm = into = false;
            cgq_info ("clone3 failed (%s): trials are forked%s", strerror (e),
                      cgroup ? ", then moved into their cgroup (10+ ms per trial here)" : "");
        }
        else if (into) {
            // EINVAL: no CLONE_INTO_CGROUP (Linux < 5.7); else this leaf's
            // trouble (EBUSY, ...), which the join below says again.
            if (e == EINVAL && !s_no_into) {
                s_no_into = true;
                cgq_info ("clone3 into a cgroup failed (%s): trials are moved into their "
                          "cgroup after they start (10+ ms per trial here)",
                          strerror (e));
            }
            into = false;
        }
        else {
            s_no_vm = true;
            vm = false;
            cgq_info ("clone3 with a shared address space failed (%s): trials are forked",
                      strerror (e));
        }
    }
    return s_start (sp, true, 0, -1);
}
