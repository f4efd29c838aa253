// scale: `cgq scale slurm`, cgq workers as Slurm jobs, as many as the queue
// justifies and no more.
//
// Every --interval it reads, from Redis, what each running job still has to
// run and what one of its trials asks for (the spec's cpu, gpu, memory);
// from squeue, the worker jobs it submitted (named cgq-worker, commented
// cgq-scale:CLASS) and whether each one's worker has connected yet (the node
// slurm-JOBID-* in Redis); from sinfo, what a node of each partition has.
// Trials waiting beyond what the workers on their way will take get new
// worker jobs, each said why, bounded by --max-workers overall and per
// partition. Workers leave on their own after --idle without a task (the
// worker's --idle-exit), so nothing here ever cancels a job.
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "keyspace.h"
#include "log.h"
#include "spec.h"
#include "util.h"
#include "view.h"

#define S_MAX_PARTS 32
#define S_MAX_CLASSES 64
#define S_OUT_MAX (1u << 20)   // the most of a Slurm command's output read
#define S_CMD_TIMEOUT_MS 30000 // a Slurm command that hangs this long is killed
#define S_DEFAULT_SCRIPT "orchestration/slurm/cgq-worker.sbatch"
#define S_MAX_TRACKED 1024 // worker jobs followed until they end
#define S_FAILED_STARTS 3  // worker jobs in a row that end unconnected: back off
#define S_BACKOFF_MAX_MS (10 * 60 * 1000)

// What one node of a partition has (sinfo); max: --partition NAME:MAX.
typedef struct {
    char name[64];
    double cpus;
    double gpus;
    uint64_t mem_mb;
    uint64_t max;    // worker jobs at most at once here (0: only --max-workers)
    uint64_t active; // our worker jobs here, pending or running
} s_part_t;

// Trials asking for the same thing, and the worker jobs that serve them.
typedef struct {
    double cpu, gpu;
    uint64_t mem; // bytes
    char key[48]; // the worker jobs' comment: cgq-scale:KEY
    uint64_t waiting;
    char jobs[160];     // which cgq jobs wait, for the message
    uint64_t starting;  // our worker jobs not serving yet (pending, or no node yet)
    uint64_t serving;   // our worker jobs whose worker is connected
} s_class_t;

typedef struct {
    const cgq_cli_t *cli;
    cgq_store_t *store;
    const char *script;
    const char *coordinator;
    const char *idle;
    const char *extra; // --sbatch-args, split on blanks
    uint64_t max_workers;
    uint64_t per_worker; // trials of a class one worker job takes
    bool dry_run;
    s_part_t parts[S_MAX_PARTS];
    size_t nparts;
    bool parts_given; // --partition: only these, in this order
    s_class_t classes[S_MAX_CLASSES];
    size_t nclasses;
    uint64_t active; // our worker jobs, pending or running
    // Jobs already reported unschedulable, so the report is made once.
    uint64_t told[256];
    size_t ntold;
    // The worker jobs submitted and not yet seen to end, and whether each
    // one's worker connected: a job that ends without it (a bad script, a
    // worker that cannot start) is a failed start; S_FAILED_STARTS in a row
    // stop submissions for a back-off that doubles, so a broken setup is
    // not a storm of jobs.
    struct {
        uint64_t id;
        bool connected;
        bool seen; // in this round's squeue
    } tracked[S_MAX_TRACKED];
    size_t ntracked;
    uint64_t failed_starts;
    int64_t backoff_ms, paused_until;
    uint64_t interval_ms;
} s_scale_t;

// s_trim cuts s's trailing blanks and newlines, and returns it past its
// leading ones.
static char *
s_trim (char *s)
{
    size_t n = strlen (s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        s[--n] = 0;
    while (*s == ' ' || *s == '\t' || *s == '\n')
        s++;
    return s;
}

// s_fields splits a line of sinfo's or squeue's '|'-separated output into
// at most n fields (in place); returns how many.
static int
s_fields (char *line, char **f, int n)
{
    char *save = NULL;
    int k = 0;
    for (char *t = strtok_r (line, "|", &save); t && k < n; t = strtok_r (NULL, "|", &save))
        f[k++] = t;
    return k;
}

// s_capture runs argv (PATH searched), its stdout (and stderr, appended)
// read into *out (caller frees), at most S_CMD_TIMEOUT_MS. Returns its exit
// status, or -1 when it could not run or was killed (*out then says why).
static int
s_capture (char *const *argv, char **out)
{
    cgq_buf_t b;
    cgq_buf_init (&b);
    int p[2];
    if (pipe2 (p, O_CLOEXEC) < 0) {
        cgq_buf_printf (&b, "pipe: %s", strerror (errno));
        *out = cgq_buf_take (&b);
        return -1;
    }
    pid_t pid = fork ();
    if (pid == 0) {
        dup2 (p[1], 1);
        dup2 (p[1], 2);
        int devnull = open ("/dev/null", O_RDONLY);
        if (devnull >= 0)
            dup2 (devnull, 0);
        execvp (argv[0], argv);
        dprintf (1, "cannot run %s: %s", argv[0], strerror (errno));
        _exit (127);
    }
    close (p[1]);
    if (pid < 0) {
        close (p[0]);
        cgq_buf_printf (&b, "fork: %s", strerror (errno));
        *out = cgq_buf_take (&b);
        return -1;
    }
    int64_t give_up = cgq_now_ms () + S_CMD_TIMEOUT_MS;
    bool killed = false;
    for (;;) {
        int64_t left = give_up - cgq_now_ms ();
        if (left <= 0) {
            kill (pid, SIGKILL);
            killed = true;
            break;
        }
        struct pollfd pfd = {.fd = p[0], .events = POLLIN};
        int n = poll (&pfd, 1, (int) (left > 1000 ? 1000 : left));
        if (n < 0 && errno != EINTR)
            break;
        if (n <= 0)
            continue;
        char chunk[4096];
        ssize_t r = read (p[0], chunk, sizeof chunk);
        if (r <= 0)
            break;
        if (b.len < S_OUT_MAX)
            cgq_buf_append (&b, chunk, (size_t) r);
    }
    close (p[0]);
    int status = 0;
    while (waitpid (pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (killed)
        cgq_buf_printf (&b, "%s%s did not answer in %d s", b.len ? "; " : "", argv[0],
                        S_CMD_TIMEOUT_MS / 1000);
    *out = cgq_buf_take (&b);
    if (killed || !WIFEXITED (status))
        return -1;
    return WEXITSTATUS (status);
}

// s_gres_gpus: the GPU count of a sinfo %G field ("gpu:4", "gpu:a100:2(S:0)",
// "gpu:2,shard:8", "(null)").
static double
s_gres_gpus (const char *gres)
{
    double n = 0;
    for (const char *g = strstr (gres, "gpu:"); g; g = strstr (g + 4, "gpu:")) {
        if (g != gres && g[-1] != ',')
            continue;
        const char *end = g + 4;
        while (*end && *end != ',' && *end != '(')
            end++;
        // The count is the last ':'-separated part before end.
        const char *c = end;
        while (c > g + 3 && c[-1] != ':')
            c--;
        n += strtod (c, NULL);
    }
    return n;
}

// s_load_parts reads the partitions from sinfo (a node's cpus, gpus and
// memory; the smallest node of a partition, so what fits fits anywhere).
// With --partition, only those, in that order, with their MAX. -1 on error.
static int
s_load_parts (s_scale_t *s)
{
    char *argv[] = {"sinfo", "-h", "-o", "%P|%c|%G|%m", NULL};
    char *out = NULL;
    int rc = s_capture (argv, &out);
    if (rc != 0) {
        cgq_cli_error ("sinfo failed: %s (is Slurm's client installed, and SLURM_CONF set?)",
                       out && *out ? s_trim (out) : "no output");
        free (out);
        return -1;
    }
    s_part_t found[S_MAX_PARTS];
    size_t nfound = 0;
    char *save = NULL;
    for (char *line = strtok_r (out, "\n", &save); line; line = strtok_r (NULL, "\n", &save)) {
        char *f[4] = {0};
        int nf = s_fields (line, f, 4);
        if (nf < 4)
            continue;
        size_t len = strlen (f[0]);
        if (len && f[0][len - 1] == '*')
            f[0][len - 1] = 0; // the default partition
        s_part_t p = {0};
        snprintf (p.name, sizeof p.name, "%s", f[0]);
        p.cpus = strtod (f[1], NULL);
        p.gpus = s_gres_gpus (f[2]);
        p.mem_mb = strtoull (f[3], NULL, 10);
        size_t i = 0;
        while (i < nfound && strcmp (found[i].name, p.name))
            i++;
        if (i == nfound && nfound < S_MAX_PARTS)
            found[nfound++] = p;
        else if (i < nfound) { // several node kinds: keep the smallest of each
            found[i].cpus = fmin (found[i].cpus, p.cpus);
            found[i].gpus = fmin (found[i].gpus, p.gpus);
            found[i].mem_mb = found[i].mem_mb < p.mem_mb ? found[i].mem_mb : p.mem_mb;
        }
    }
    free (out);
    if (!s->parts_given) {
        memcpy (s->parts, found, nfound * sizeof *found);
        s->nparts = nfound;
    }
    else
        for (size_t k = 0; k < s->nparts; k++) {
            size_t i = 0;
            while (i < nfound && strcmp (found[i].name, s->parts[k].name))
                i++;
            if (i == nfound) {
                cgq_cli_error ("--partition %s: sinfo lists no such partition", s->parts[k].name);
                return -1;
            }
            uint64_t max = s->parts[k].max;
            s->parts[k] = found[i];
            s->parts[k].max = max;
        }
    if (s->nparts == 0) {
        cgq_cli_error ("sinfo lists no partition");
        return -1;
    }
    return 0;
}

static void
s_class_key (s_class_t *c)
{
    snprintf (c->key, sizeof c->key, "c%g-g%g-m%" PRIu64, c->cpu, c->gpu, c->mem >> 20);
}

static s_class_t *
s_class_of (s_scale_t *s, double cpu, double gpu, uint64_t mem)
{
    for (size_t i = 0; i < s->nclasses; i++)
        if (s->classes[i].cpu == cpu && s->classes[i].gpu == gpu && s->classes[i].mem == mem)
            return &s->classes[i];
    if (s->nclasses == S_MAX_CLASSES)
        return NULL;
    s_class_t *c = &s->classes[s->nclasses++];
    memset (c, 0, sizeof *c);
    c->cpu = cpu;
    c->gpu = gpu;
    c->mem = mem;
    s_class_key (c);
    return c;
}

static s_class_t *
s_class_by_key (s_scale_t *s, const char *key)
{
    for (size_t i = 0; i < s->nclasses; i++)
        if (!strcmp (s->classes[i].key, key))
            return &s->classes[i];
    // A class no job waits for now: parse it back so its workers still count.
    double cpu = 0, gpu = 0;
    uint64_t mem_mb = 0;
    if (sscanf (key, "c%lf-g%lf-m%" SCNu64, &cpu, &gpu, &mem_mb) != 3)
        return NULL;
    s_class_t *c = s_class_of (s, cpu, gpu, mem_mb << 20);
    if (c)
        snprintf (c->key, sizeof c->key, "%s", key);
    return c;
}

// s_request: what one trial of the job asks for, the most of its command
// stages (stages run one after another, each on a node that fits it).
// false for jobs no Slurm worker serves (device trials, a Python study's).
static bool
s_request (const cgq_spec_t *spec, double *cpu, double *gpu, uint64_t *mem)
{
    *cpu = *gpu = 0;
    *mem = 0;
    bool any = false;
    for (size_t k = 0; k < cgq_spec_nstages (spec); k++) {
        const cgq_stage_t *st = cgq_spec_stage (spec, k);
        if (st->kind == CGQ_TRIAL_DEVICE || st->kind == CGQ_TRIAL_CLIENT)
            continue;
        any = true;
        *cpu = fmax (*cpu, st->cpu);
        *gpu = fmax (*gpu, st->gpu);
        *mem = *mem > st->memory ? *mem : st->memory;
    }
    return any;
}

// s_load_demand fills the classes' waiting counts from the running jobs.
static int
s_load_demand (s_scale_t *s)
{
    redisReply *ids = cgq_store_command (s->store, "ZRANGE %s 0 -1", CGQ_KEY_JOBS);
    if (!ids || ids->type != REDIS_REPLY_ARRAY) {
        cgq_cli_error ("cannot read %s: %s", CGQ_KEY_JOBS, cgq_store_errstr (s->store));
        freeReplyObject (ids);
        return -1;
    }
    for (size_t i = 0; i < ids->elements; i++) {
        uint64_t id = strtoull (ids->element[i]->str, NULL, 10);
        cgq_job_rec_t *job = NULL;
        char err[512];
        if (cgq_view_job_load (s->store, id, &job, err, sizeof err) != CGQ_VIEW_OK)
            continue;
        if (strcmp (job->state, "running") || job->paused) {
            cgq_job_rec_destroy (&job);
            continue;
        }
        cgq_spec_t *spec = cgq_spec_parse (job->spec, strlen (job->spec), job->spec_path, err,
                                           sizeof err);
        double cpu, gpu;
        uint64_t mem;
        if (!spec || !s_request (spec, &cpu, &gpu, &mem)) {
            cgq_spec_destroy (&spec);
            cgq_job_rec_destroy (&job);
            continue;
        }
        const uint64_t *n = job->counts;
        uint64_t waiting = n[CGQ_TRIAL_PENDING] + n[CGQ_TRIAL_UNSCHEDULABLE];
        uint64_t running = n[CGQ_TRIAL_RUNNING] + n[CGQ_TRIAL_STALE];
        // Trials the searcher has not made yet are made only when a node
        // has room: they wait as much as the pending ones.
        uint64_t unmade = job->total < 0 ? UINT64_MAX
                          : (uint64_t) job->total > job->suggested
                              ? (uint64_t) job->total - job->suggested
                              : 0;
        waiting = unmade > UINT64_MAX - waiting ? UINT64_MAX : waiting + unmade;
        uint64_t conc = spec->search.concurrency;
        char key[64];
        cgq_key_job (key, sizeof key, id);
        redisReply *r = cgq_store_command (s->store, "HGET %s %s", key, CGQ_JF_CONCURRENCY);
        if (r && r->type == REDIS_REPLY_STRING)
            conc = strtoull (r->str, NULL, 10); // `cgq update` wins over the spec
        freeReplyObject (r);
        if (conc > 0)
            waiting = conc > running ? (waiting < conc - running ? waiting : conc - running) : 0;
        s_class_t *c = waiting ? s_class_of (s, cpu, gpu, mem) : NULL;
        if (c) {
            c->waiting = waiting > UINT64_MAX - c->waiting ? UINT64_MAX : c->waiting + waiting;
            size_t len = strlen (c->jobs);
            if (len + 24 < sizeof c->jobs)
                snprintf (c->jobs + len, sizeof c->jobs - len, "%s%" PRIu64, len ? "," : "", id);
        }
        cgq_spec_destroy (&spec);
        cgq_job_rec_destroy (&job);
    }
    freeReplyObject (ids);
    return 0;
}

// s_connected: whether the worker of Slurm job jobid has a connected node.
static bool
s_connected (cgq_node_rec_t **nodes, size_t n, const char *jobid)
{
    char prefix[96];
    snprintf (prefix, sizeof prefix, "slurm-%s-", jobid);
    for (size_t i = 0; i < n; i++)
        if (nodes[i]->connected && !strncmp (nodes[i]->id, prefix, strlen (prefix)))
            return true;
    return false;
}

static void s_stamp (char *buf, size_t n);

// s_check_starts: the tracked worker jobs gone from squeue, each a good
// start (its worker connected) or a failed one; too many failed in a row
// pause the submissions.
static void
s_check_starts (s_scale_t *s)
{
    size_t kept = 0;
    for (size_t i = 0; i < s->ntracked; i++) {
        if (s->tracked[i].connected) {
            s->failed_starts = 0;
            s->backoff_ms = 0;
        }
        if (s->tracked[i].seen) {
            s->tracked[i].seen = false;
            s->tracked[kept++] = s->tracked[i];
            continue;
        }
        if (s->tracked[i].connected)
            continue; // it served, then ended: idle, or cancelled
        char stamp[16];
        s_stamp (stamp, sizeof stamp);
        s->failed_starts++;
        printf ("%s Slurm job %" PRIu64 " ended before its worker connected (its output: the "
                "script's --output, cgq-worker-%" PRIu64 ".out by default)\n",
                stamp, s->tracked[i].id, s->tracked[i].id);
        if (s->failed_starts >= S_FAILED_STARTS) {
            s->backoff_ms = s->backoff_ms ? s->backoff_ms * 2 : (int64_t) s->interval_ms * 6;
            if (s->backoff_ms > S_BACKOFF_MAX_MS)
                s->backoff_ms = S_BACKOFF_MAX_MS;
            s->paused_until = cgq_now_ms () + s->backoff_ms;
            printf ("%s %" PRIu64 " worker jobs in a row ended before their worker connected: "
                    "no submission for %.0f s (check the script, --nodes and the workers' "
                    "output)\n",
                    stamp, s->failed_starts, (double) s->backoff_ms / 1000);
        }
        fflush (stdout);
    }
    s->ntracked = kept;
}

// s_load_supply counts our worker jobs per class and partition (squeue).
static int
s_load_supply (s_scale_t *s)
{
    char *argv[] = {"squeue", "-h", "-n", "cgq-worker", "-o", "%i|%T|%P|%k", NULL};
    char *out = NULL;
    if (s_capture (argv, &out) != 0) {
        cgq_cli_error ("squeue failed: %s", out && *out ? s_trim (out) : "no output");
        free (out);
        return -1;
    }
    cgq_node_rec_t **nodes = NULL;
    size_t nnodes = 0;
    char err[512];
    if (cgq_view_nodes_load (s->store, &nodes, &nnodes, err, sizeof err) != 0)
        nnodes = 0; // nothing connected: every running job counts as starting
    s->active = 0;
    for (size_t k = 0; k < s->nparts; k++)
        s->parts[k].active = 0;
    char *save = NULL;
    for (char *line = strtok_r (out, "\n", &save); line; line = strtok_r (NULL, "\n", &save)) {
        char *f[4] = {0};
        int nf = s_fields (line, f, 4);
        if (nf < 4 || strncmp (f[3], "cgq-scale:", 10))
            continue; // not one of ours
        bool pending = !strcmp (f[1], "PENDING") || !strcmp (f[1], "CONFIGURING");
        bool running = !strcmp (f[1], "RUNNING");
        if (!pending && !running)
            continue; // completing, or gone
        s->active++;
        for (size_t k = 0; k < s->nparts; k++)
            if (!strcmp (s->parts[k].name, f[2]))
                s->parts[k].active++;
        bool connected = running && s_connected (nodes, nnodes, f[0]);
        uint64_t jid = strtoull (f[0], NULL, 10);
        for (size_t i = 0; i < s->ntracked; i++)
            if (s->tracked[i].id == jid) {
                s->tracked[i].seen = true;
                s->tracked[i].connected |= connected;
            }
        s_class_t *c = s_class_by_key (s, f[3] + 10);
        if (!c)
            continue;
        if (connected)
            c->serving++;
        else
            c->starting++;
    }
    cgq_view_nodes_free (nodes, nnodes);
    free (out);
    s_check_starts (s);
    return 0;
}

static bool
s_fits (const s_part_t *p, double cpu, double gpu, uint64_t mem)
{
    return p->cpus >= cpu && p->gpus >= gpu && (mem == 0 || p->mem_mb >= (mem >> 20));
}

static bool
s_told (s_scale_t *s, const char *jobs)
{
    uint64_t first = strtoull (jobs, NULL, 10);
    for (size_t i = 0; i < s->ntold; i++)
        if (s->told[i] == first)
            return true;
    if (s->ntold < sizeof s->told / sizeof *s->told)
        s->told[s->ntold++] = first;
    return false;
}

static void
s_stamp (char *buf, size_t n)
{
    time_t now = time (NULL);
    struct tm tm;
    localtime_r (&now, &tm);
    strftime (buf, n, "%H:%M:%S", &tm);
}

// s_submit submits one worker job of class c on partition p. Returns 0.
static int
s_submit (s_scale_t *s, const s_class_t *c, s_part_t *p, const char *why)
{
    char cpus[48], gres[48], mem[48], part[96], comment[96], exp[1024];
    double per = (double) s->per_worker;
    // Whole numbers for sbatch (a spec's cpu and gpu are bounded far below).
    unsigned long long ncpu = (unsigned long long) fmin (1e9, fmax (1, ceil (c->cpu * per)));
    unsigned long long ngpu = (unsigned long long) fmin (1e9, ceil (c->gpu * per));
    snprintf (cpus, sizeof cpus, "--cpus-per-task=%llu", ncpu);
    snprintf (gres, sizeof gres, "--gres=gpu:%llu", ngpu);
    snprintf (mem, sizeof mem, "--mem=%" PRIu64 "M", ((c->mem >> 20) + 1) * s->per_worker);
    snprintf (part, sizeof part, "--partition=%s", p->name);
    snprintf (comment, sizeof comment, "--comment=cgq-scale:%s", c->key);
    snprintf (exp, sizeof exp, "--export=ALL,CGQ_COORDINATOR_NODES=%s,CGQ_IDLE_EXIT=%s",
              s->coordinator, s->idle);
    char *argv[64];
    int n = 0;
    argv[n++] = "sbatch";
    argv[n++] = "--parsable";
    argv[n++] = "--job-name=cgq-worker";
    argv[n++] = part;
    argv[n++] = cpus;
    if (c->gpu > 0)
        argv[n++] = gres;
    if (c->mem > 0)
        argv[n++] = mem;
    argv[n++] = comment;
    argv[n++] = exp;
    char *extra = s->extra ? cgq_xstrdup (s->extra) : NULL;
    char *save = NULL;
    for (char *t = extra ? strtok_r (extra, " \t", &save) : NULL; t && n < 60;
         t = strtok_r (NULL, " \t", &save))
        argv[n++] = t;
    argv[n++] = (char *) s->script;
    argv[n] = NULL;
    char stamp[16];
    s_stamp (stamp, sizeof stamp);
    if (s->dry_run) {
        printf ("%s would submit:", stamp);
        for (int i = 0; i < n; i++)
            printf (" %s", argv[i]);
        printf ("\n    because %s\n", why);
        p->active++;
        s->active++;
        free (extra);
        fflush (stdout);
        return 0;
    }
    char *out = NULL;
    int rc = s_capture (argv, &out);
    free (extra);
    if (rc != 0) {
        printf ("%s sbatch failed (%s); nothing submitted, trying again next round\n", stamp,
                out && *out ? s_trim (out) : "no output");
        free (out);
        fflush (stdout);
        return -1;
    }
    char *id = s_trim (out);
    char *semi = strchr (id, ';'); // --parsable: ID[;CLUSTER]
    if (semi)
        *semi = 0;
    if (s->ntracked < S_MAX_TRACKED) {
        s->tracked[s->ntracked].id = strtoull (id, NULL, 10);
        s->tracked[s->ntracked].connected = false;
        s->tracked[s->ntracked].seen = true; // not yet in squeue's answer
        s->ntracked++;
    }
    printf ("%s submitted Slurm job %s on %s (%s%s%s): %s\n", stamp, id, p->name, cpus + 2,
            c->gpu > 0 ? ", " : "", c->gpu > 0 ? gres + 2 : "", why);
    fflush (stdout);
    free (out);
    p->active++;
    s->active++;
    return 0;
}

// s_round: one look at the queue and what it justifies.
static int
s_round (s_scale_t *s)
{
    s->nclasses = 0;
    if (s_load_parts (s) < 0 || s_load_demand (s) < 0 || s_load_supply (s) < 0)
        return -1;
    for (size_t i = 0; i < s->nclasses; i++) {
        s_class_t *c = &s->classes[i];
        if (c->waiting == 0)
            continue;
        uint64_t want = c->waiting / s->per_worker + (c->waiting % s->per_worker != 0);
        if (want <= c->starting)
            continue; // the workers on their way take them all
        uint64_t need = want - c->starting;
        s_part_t *p = NULL;
        for (size_t k = 0; k < s->nparts && !p; k++)
            if (s_fits (&s->parts[k], c->cpu * (double) s->per_worker,
                        c->gpu * (double) s->per_worker, c->mem * s->per_worker))
                p = &s->parts[k];
        if (!p) {
            if (!s_told (s, c->jobs)) {
                char stamp[16];
                s_stamp (stamp, sizeof stamp);
                printf ("%s unschedulable: job %s needs %g cpu, %g gpu, %" PRIu64
                        " MB per worker; no partition has that on one node:",
                        stamp, c->jobs, c->cpu * (double) s->per_worker,
                        c->gpu * (double) s->per_worker, (c->mem >> 20) * s->per_worker);
                for (size_t k = 0; k < s->nparts; k++)
                    printf (" %s (%g cpu, %g gpu, %" PRIu64 " MB)", s->parts[k].name,
                            s->parts[k].cpus, s->parts[k].gpus, s->parts[k].mem_mb);
                printf ("; nothing submitted for it\n");
                fflush (stdout);
            }
            continue;
        }
        if (cgq_now_ms () < s->paused_until)
            continue; // failed starts: backing off
        for (uint64_t k = 0; k < need; k++) {
            if (s->active >= s->max_workers || (p->max && p->active >= p->max))
                break; // bounded; the next round looks again
            char why[512];
            snprintf (why, sizeof why,
                      "job %s: %" PRIu64 " trial(s) waiting for %g cpu, %g gpu each; %" PRIu64
                      " worker(s) of theirs on the way, %" PRIu64 " serving",
                      c->jobs, c->waiting, c->cpu, c->gpu, c->starting, c->serving);
            if (s_submit (s, c, p, why) < 0)
                break;
            c->starting++;
        }
    }
    return 0;
}

// s_parse_parts reads --partition NAME[:MAX][,NAME[:MAX]...].
static int
s_parse_parts (s_scale_t *s, const char *text)
{
    char *copy = cgq_xstrdup (text);
    char *save = NULL;
    int rc = 0;
    for (char *t = strtok_r (copy, ",", &save); t && rc == 0; t = strtok_r (NULL, ",", &save)) {
        if (s->nparts == S_MAX_PARTS) {
            cgq_cli_error ("--partition: at most %d partitions", S_MAX_PARTS);
            rc = -1;
            break;
        }
        s_part_t *p = &s->parts[s->nparts++];
        memset (p, 0, sizeof *p);
        char *colon = strchr (t, ':');
        if (colon) {
            *colon = 0;
            if (cgq_parse_u64 (colon + 1, &p->max) < 0 || p->max == 0) {
                cgq_cli_error ("--partition %s:%s: MAX must be a whole number above 0", t,
                               colon + 1);
                rc = -1;
            }
        }
        if (!*t || strlen (t) >= sizeof p->name) {
            cgq_cli_error ("--partition '%s': expected NAME[:MAX][,NAME[:MAX]...]", text);
            rc = -1;
        }
        snprintf (p->name, sizeof p->name, "%s", t);
    }
    free (copy);
    s->parts_given = rc == 0 && s->nparts > 0;
    return rc;
}

int
cgq_cmd_scale (cgq_cli_t *cli)
{
    if (strcmp (cli->pos[0], "slurm")) {
        cgq_cli_error ("cgq scale %s: unknown scheduler (known: slurm)", cli->pos[0]);
        return CGQ_EXIT_BAD;
    }
    s_scale_t s;
    memset (&s, 0, sizeof s);
    s.cli = cli;
    uint64_t interval_ms = 10000;
    double dur;
    const char *iv = cgq_cli_opt (cli, "interval");
    if (iv) {
        if (cgq_parse_duration (iv, &dur) < 0 || dur < 0.1 || dur > 3600) {
            cgq_cli_error ("--interval %s: expected a duration from 100ms to 1h (e.g. 10s)", iv);
            return CGQ_EXIT_BAD;
        }
        interval_ms = (uint64_t) (dur * 1000);
    }
    s.interval_ms = interval_ms;
    s.idle = cgq_cli_opt (cli, "idle") ? cgq_cli_opt (cli, "idle") : "5m";
    if (cgq_parse_duration (s.idle, &dur) < 0 || dur <= 0) {
        cgq_cli_error ("--idle %s: expected a duration above 0 (e.g. 5m)", s.idle);
        return CGQ_EXIT_BAD;
    }
    if (cgq_cli_opt_u64 (cli, "max-workers", 4, 1, 100000, &s.max_workers) < 0
        || cgq_cli_opt_u64 (cli, "trials-per-worker", 1, 1, 1024, &s.per_worker) < 0)
        return CGQ_EXIT_BAD;
    const char *parts = cgq_cli_opt (cli, "partition");
    if (parts && s_parse_parts (&s, parts) < 0)
        return CGQ_EXIT_BAD;
    s.coordinator = cgq_cli_opt (cli, "nodes");
    if (!s.coordinator)
        s.coordinator = getenv ("CGQ_COORDINATOR_NODES");
    if (!s.coordinator || !*s.coordinator) {
        cgq_cli_error ("cgq scale slurm: say where the workers connect: --nodes "
                       "tcp://HOST:7700 (or CGQ_COORDINATOR_NODES), an address the compute "
                       "nodes reach");
        return CGQ_EXIT_BAD;
    }
    if (strpbrk (s.coordinator, " ,\t") && strchr (s.coordinator, ' ')) {
        cgq_cli_error ("--nodes '%s': no blanks", s.coordinator);
        return CGQ_EXIT_BAD;
    }
    s.script = cgq_cli_opt (cli, "script");
    if (!s.script)
        s.script = getenv ("CGQ_SLURM_SCRIPT");
    if (!s.script || !*s.script)
        s.script = S_DEFAULT_SCRIPT;
    if (access (s.script, R_OK) != 0) {
        cgq_cli_error ("cgq scale slurm: the batch script %s cannot be read (%s); give "
                       "--script FILE (the project's orchestration/slurm/cgq-worker.sbatch)",
                       s.script, strerror (errno));
        return CGQ_EXIT_BAD;
    }
    s.extra = cgq_cli_opt (cli, "sbatch-args");
    s.dry_run = cgq_cli_flag (cli, "dry-run");
    bool once = cgq_cli_flag (cli, "once");
    if (cgq_cli_store (cli, &s.store) != CGQ_EXIT_OK)
        return CGQ_EXIT_FAIL;
    cgq_cli_catch_signals ();
    char stamp[16];
    s_stamp (stamp, sizeof stamp);
    printf ("%s cgq scale slurm: at most %" PRIu64 " worker job(s), %" PRIu64
            " trial(s) each, idle workers leave after %s; every %.1f s%s\n",
            stamp, s.max_workers, s.per_worker, s.idle, (double) interval_ms / 1000,
            s.dry_run ? " (dry run: nothing submitted)" : "");
    fflush (stdout);
    int rc = CGQ_EXIT_OK;
    while (!cgq_cli_signal) {
        if (s_round (&s) < 0) {
            rc = CGQ_EXIT_FAIL;
            if (once)
                break;
        }
        else if (once)
            break;
        cgq_cli_sleep_ms ((int) interval_ms);
    }
    cgq_store_destroy (&s.store);
    return cgq_cli_signal ? CGQ_EXIT_OK : rc;
}
