// cgq: the command-line tool. main.c parses the global options and the
// command's options (getopt_long, options anywhere on the line), prints help,
// and dispatches to the command.
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ctl.h"
#include "log.h"
#include "spec.h"
#include "util.h"

static const cgq_cli_opt_t s_no_opts[] = {{NULL}};

static const cgq_cli_opt_t s_submit_opts[] = {
    {"follow", NULL, "show progress until the job ends, then its top 10"},
    {"quiet", NULL, "print only the job id"},
    {"max-spec", "SIZE", "largest spec read (env CGQ_MAX_SPEC, default 1M; the coordinator has its own --max-spec)"},
    {NULL}};

static const cgq_cli_opt_t s_validate_opts[] = {
    {"max-spec", "SIZE", "largest spec read (env CGQ_MAX_SPEC, default 1M)"},
    {NULL}};

static const cgq_cli_opt_t s_run_opts[] = {
    {"workers", "N", "number of local workers (default 1)"},
    {"format", "FMT", "leaderboard format: table or json (default table)"},
    {"top", "K", "leaderboard rows (default 10; json: all trials unless given)"},
    {"cpus", "C", "CPU slots of each worker (default: the cores divided among the workers, at least 1)"},
    {"gpus", "SPEC", "GPUs: auto, none, 0,1 (split among the workers) or fake:N (default auto)"},
    {"keep", NULL, "leave Redis, the coordinator and the workers running afterwards"},
    {"runner", "FILE", "runner.yaml of a local device runner for the spec's device stages "
                       "(default, for the built-in cpu-local benchmark only: this CPU as one device)"},
    {NULL}};

static const cgq_cli_opt_t s_keygen_opts[] = {
    {"dir", "DIR", "where the key files go (default: the current directory)"},
    {"nodes", "PATTERNS", "node ids this key may use, comma-separated globs (default: NAME,NAME-*; '*': any; none: no node, a CLI user's key)"},
    {NULL}};

static const cgq_cli_opt_t s_status_opts[] = {
    {"limit", "N", "jobs listed without JOB, newest first (default 50, 0: all)"},
    {NULL}};

static const cgq_cli_opt_t s_results_opts[] = {
    {"format", "FMT", "table, csv or json (default table); with --group-by also markdown or latex"},
    {"top", "K", "only the K best trials (default: all)"},
    {"group-by", "KEYS", "per group of params (family,dataset): n, mean, std, min, max"},
    {"columns", "NAMES", "only these params/metrics, in this order (acc,lat_ms); a table on a terminal otherwise drops what does not fit"},
    {"passes", NULL, "a job measured in two passes (measure: {passes: 2}): their agreement (acc10, median |diff|, SRCC)"},
    {NULL}};

static const cgq_cli_opt_t s_logs_opts[] = {
    {"stage", "NAME", "a multi-stage trial: only this stage's run and output"},
    {NULL}};

static const cgq_cli_opt_t s_devices_opts[] = {
    {"format", "FMT", "table or json (default table)"},
    {NULL}};

static const cgq_cli_opt_t s_pareto_opts[] = {
    {"format", "FMT", "table, json, csv, seed002 or seed002-sampler (default table)"},
    {"plot", "FILE", "also draw the front among all succeeded trials as an SVG"},
    {"all", NULL, "list every succeeded trial, not only the front"},
    {NULL}};

static const cgq_cli_opt_t s_watch_opts[] = {
    {"top", "K", "rows of the top trials (default 5)"},
    {"interval", "MS", "refresh every MS milliseconds (default 1000)"},
    {NULL}};

static const cgq_cli_opt_t s_plot_opts[] = {
    {"out", "FILE", "the SVG file to write (required)"},
    {"top", "K", "learning curves of the K best trials (default 5)"},
    {"x", "KEY", "report field for the x axis of the learning curves"},
    {NULL}};

static const cgq_cli_opt_t s_update_opts[] = {
    {"samples", "N", "the job's search.samples from now on (at least the trials already suggested)"},
    {"concurrency", "C", "the job's search.concurrency from now on (0: no limit)"},
    {NULL}};

static const cgq_cli_opt_t s_pause_opts[] = {
    {"now", NULL, "stop running trials at once (each keeps its last checkpoint)"},
    {NULL}};

static const cgq_cli_opt_t s_optuna_opts[] = {
    {"sampler", "NAME", "a class of optuna.samplers (default TPESampler; CmaEsSampler, NSGAIISampler, RandomSampler, ...)"},
    {"sampler-args", "JSON", "the sampler's keyword arguments, a JSON object (default {})"},
    {"seed", "N", "the sampler's seed (default: none)"},
    {"ahead", "N", "suggestions kept queued at the coordinator (default 2)"},
    {"quiet", NULL, "no progress lines"},
    {NULL}};

static const cgq_cli_opt_t s_gc_opts[] = {
    {"dry-run", NULL, "say what would be deleted, delete nothing"},
    {"store", "DIR", "also sweep this store (the workers' --checkpoint-store, where this machine sees it)"},
    {NULL}};

static const cgq_cli_opt_t s_scale_opts[] = {
    {"nodes", "URL", "where the workers connect: the coordinator's node endpoint as the compute nodes reach it (env CGQ_COORDINATOR_NODES; required)"},
    {"partition", "LIST", "partitions to use, in order of preference, each NAME or NAME:MAX (most worker jobs there at once) (default: every partition sinfo lists)"},
    {"max-workers", "N", "worker jobs at most at once, pending or running (default 4)"},
    {"trials-per-worker", "K", "trials one worker job is sized for (default 1)"},
    {"idle", "DUR", "a worker with no task this long exits and frees its allocation (default 5m)"},
    {"interval", "DUR", "look at the queue every DUR (default 10s)"},
    {"script", "FILE", "the batch script (env CGQ_SLURM_SCRIPT; default orchestration/slurm/cgq-worker.sbatch)"},
    {"sbatch-args", "ARGS", "more sbatch options, blank-separated (--account=lab --time=4:00:00)"},
    {"once", NULL, "one look, then exit"},
    {"dry-run", NULL, "say what would be submitted, submit nothing"},
    {NULL}};

static const cgq_cli_cmd_t s_cmds[] = {
    {"run", "SPEC", "run a spec on this machine (private Redis, coordinator, workers)",
     "Starts redis-server (data in ./.cgq/redis, AOF on), cgq-coordinator and N cgq-worker\n"
     "processes, submits SPEC, shows progress, prints the leaderboard and stops them all.\n"
     "Logs are in ./.cgq/logs, trial directories in ./.cgq/work. Exit 0 when the job\n"
     "finished with at least one succeeded trial, 1 otherwise, 130 on Ctrl-C.",
     1, 1, s_run_opts, cgq_cmd_run},
    {"submit", "SPEC", "submit a spec to a running coordinator",
     "Validates SPEC locally, then sends it to the coordinator's control endpoint.", 1, 1,
     s_submit_opts, cgq_cmd_submit},
    {"validate", "SPEC", "check a spec and describe its search", NULL, 1, 1, s_validate_opts,
     cgq_cmd_validate},
    {"status", "[JOB]", "list the jobs, or show one job", NULL, 0, 1, s_status_opts,
     cgq_cmd_status},
    {"results", "JOB", "the trials of a job, best first",
     "Succeeded trials ordered by the objective, then the others by id.\n"
     "json: {\"job\", \"name\", \"state\", \"objective\": {\"metric\", \"mode\"} or null,\n"
     "       \"trials\": [{\"id\", \"state\", \"params\", \"metrics\", \"attempts\", \"node\",\n"
     "                   \"started\", \"finished\", \"error\", \"warning\"}]}\n"
     "csv:  id,state,value,<params>,<metrics>,attempts,node,duration,error\n"
     "(hyperband jobs: bracket,rung before the params, in the table and json too)\n"
     "A param or metric named like a built-in column (or like each other) is written\n"
     "params.NAME / metrics.NAME. Table cells of metrics named *_s, *_sec, *_seconds, *_ms\n"
     "and *_bytes carry units.\n"
     "--group-by KEYS: the succeeded trials grouped by those params (or metrics); per\n"
     "group n and the mean, sample std (n-1), min and max of every numeric metric and\n"
     "numeric param not grouped on. table: mean ± std [min, max]; csv: KEYS,n,M_mean,\n"
     "M_std,M_min,M_max,...; json: {\"job\", \"group_by\", \"std\": \"sample\", \"groups\":\n"
     "[{\"key\": {...}, \"n\", \"stats\": {M: {\"n\", \"mean\", \"std\", \"min\", \"max\"}}}]}",
     1, 1, s_results_opts, cgq_cmd_results},
    {"pareto", "JOB", "the Pareto front of a job with several objectives",
     "The succeeded trials no other trial beats in every objective (cgq:job:{JOB}:pareto),\n"
     "best first in the first objective.\n"
     "json:    {\"job\", \"objectives\": [{\"metric\", \"mode\"}], \"trials\": [{\"id\", \"params\",\n"
     "         \"metrics\"}]}\n"
     "csv:     id,<objectives>,<params>\n"
     "seed002: {\"oplist\": [items], \"solutions\": [{\"id\", \"time\", \"memory\"}]} for a space with\n"
     "         one assignment param (id: the assignment id; time and memory: those metrics,\n"
     "         else the first and second objective), ordered by trial id; memory a whole\n"
     "         number when it is one.\n"
     "seed002-sampler: seed 002's random sampler dump: {\"configs\": {ID: \"BACKENDS=\\\"c1;c2\\\"\n"
     "         OP_BACKEND_item=choice ...\"}, \"oplist\", \"solutions\": [{\"exec_time\",\n"
     "         \"max_rss\", \"id\"}], \"mode\": \"name\"}.",
     1, 1, s_pareto_opts, cgq_cmd_pareto},
    {"watch", "JOB", "a live view of a job until it ends (q quits)",
     "On a terminal: the progress line of `cgq run` with an ETA, the trials by state, the\n"
     "top trials with their params, the running trials with their latest report, and the\n"
     "nodes and devices with their load, redrawn in place (plain ANSI: fine over ssh) and\n"
     "fitted to the window. q or Ctrl-C quits (the job keeps running). When stdout is not\n"
     "a terminal: the progress line whenever it changes (at most every 2 s). When the job\n"
     "ends: its final line, leaderboard and failures, as `cgq run` prints them. Exit 0\n"
     "on q, 130 on Ctrl-C; at the job's end 0 when a trial succeeded, else 1.",
     1, 1, s_watch_opts, cgq_cmd_watch},
    {"plot", "JOB", "draw a job's best-so-far curve and learning curves as SVG",
     "Writes FILE (--out): the best objective value so far over the trials in the order\n"
     "they finished, every finished trial's value as a dot; and, when the best trials\n"
     "reported progress (the report stream cgq:job:{JOB}:reports:T), a second plot below\n"
     "it: the objective metric (else the first numeric field) of each report of the K best\n"
     "trials over the report's epoch, step or iteration (--x KEY; else its number).",
     1, 1, s_plot_opts, cgq_cmd_plot},
    {"logs", "JOB TRIAL", "a trial's state, error and output",
     "Prints the trial's stdout.log and stderr.log when its directory is on this\n"
     "machine, else the log tail the worker sent with the result. A multi-stage\n"
     "trial's stages come one after the other, each with its attempt, node and\n"
     "time (--stage NAME: that stage only).",
     2, 2, s_logs_opts, cgq_cmd_logs},
    {"cancel", "JOB", "cancel a job (its running trials are stopped)", NULL, 1, 1, s_no_opts,
     cgq_cmd_cancel},
    {"update", "JOB", "change a running job's samples and concurrency",
     "Sets the job's search.samples (--samples N) and search.concurrency (--concurrency C,\n"
     "0: no limit) while it runs: dispatch uses them at once, and the coordinator keeps\n"
     "them across a restart (the job hash's samples and concurrency; event job.updated).\n"
     "Refused (exit 2) for a job that is not running (a finished job cannot be reopened),\n"
     "samples below the trials already suggested, and samples of a grid or list search,\n"
     "whose trials are the points of the space.",
     1, 1, s_update_opts, cgq_cmd_update},
    {"gc", "[JOB...]", "delete the checkpoints jobs no longer need (all jobs without JOB)",
     "Reads the jobs' records in Redis and deletes in their checkpoint stores (a directory\n"
     "this machine sees, or an HTTP(S) store with DELETE). A job that ended keeps only its\n"
     "best trial's latest checkpoint: the rest goes, with the .tmp of seals that died (quiet\n"
     "for 2 minutes) and empty directories. A running job loses only checkpoints no record\n"
     "names that are older than their trial's latest recorded one; a .tmp being sealed and\n"
     "a checkpoint on its way to being recorded are never touched. An HTTP store cannot be\n"
     "listed: there only recorded checkpoints are found. Prints each deletion and the bytes\n"
     "freed. The job's checkpoint_bytes keeps counting its recorded checkpoints.\n"
     "Exit 0, 1 when something could not be deleted or Redis not read, 2 for an unknown job.",
     0, 1000000, s_gc_opts, cgq_cmd_gc},
    {"scale", "slurm", "run workers as Slurm jobs, as many as the queue justifies",
     "Every --interval: reads the running jobs' waiting trials and what each asks for\n"
     "(cpu, gpu, memory of its spec) from Redis, the worker jobs it submitted (squeue: name\n"
     "cgq-worker, comment cgq-scale:CLASS) and whether their workers connected, and what a\n"
     "node of each partition has (sinfo). Trials waiting beyond the workers on their way get\n"
     "new worker jobs (sbatch SCRIPT, sized for --trials-per-worker trials), each with the\n"
     "reason printed, within --max-workers and each partition's MAX. Trials not made yet by\n"
     "the searcher count as waiting (bounded by the job's concurrency); device trials and\n"
     "Python studies' trials are not a worker's. A job whose trials fit no partition's node\n"
     "is reported unschedulable once and gets nothing. Workers exit after --idle without a\n"
     "task (the worker's --idle-exit), so nothing is ever cancelled here. SIGTERM from Slurm\n"
     "(scancel, preemption, the time limit) hands a worker's trials back to the queue.\n"
     "Runs until Ctrl-C (exit 0); exit 1 when Redis or Slurm could not be read (--once).",
     1, 1, s_scale_opts, cgq_cmd_scale},
    {"pause", "JOB", "pause a job: nothing new starts, running trials stop at a checkpoint",
     "Nothing new is dispatched; each running trial goes on to its next checkpoint, is\n"
     "stopped there and waits as paused (--now: stopped at once, keeping its last\n"
     "checkpoint; one that has none restarts from zero on resume). A trial that never\n"
     "checkpoints runs to its end under a plain pause. Kept across coordinator restarts\n"
     "(the job hash's paused; events job.paused, trial.paused). Pausing again is a\n"
     "no-op, or with --now stops the trials still running to their checkpoint.\n"
     "Refused (exit 2) for a job that is unknown or has ended.",
     1, 1, s_pause_opts, cgq_cmd_pause},
    {"resume", "JOB", "resume a paused job: paused trials continue from their checkpoints",
     "Paused trials are queued again, first, and resume from their latest checkpoint\n"
     "(CGQ_RESUME_STEP set); the paused attempt uses none of their retries. New trials\n"
     "start again. Refused (exit 2) for a job that is not paused.",
     1, 1, s_no_opts, cgq_cmd_resume},
    {"workers", "", "the nodes the coordinator knows", NULL, 0, 0, s_no_opts, cgq_cmd_workers},
    {"keygen", "NAME", "write a CURVE key pair: NAME.key (public) and NAME.key_secret",
     "Writes DIR/NAME.key (the public certificate: copy it into the coordinator's\n"
     "--curve-allow directory, or give it to nodes and users as --curve-server) and\n"
     "DIR/NAME.key_secret (mode 0600: this program's own --curve-secret). Never\n"
     "overwrites a key. A worker or device runner may use only the node ids its\n"
     "key names (--nodes, stored in the certificate; default NAME and NAME-*, which\n"
     "covers a worker's default id HOST-PID when NAME is its host name). See\n"
     "docs/security.md.",
     1, 1, s_keygen_opts, cgq_cmd_keygen},
    {"optuna-search", "JOB", "an Optuna sampler as the searcher of a job (search: external)",
     "Runs python3 -m cgq.optuna_search JOB with these options (the interpreter is\n"
     "$CGQ_PYTHON, else python3 on PATH; it needs the package in clients/python and\n"
     "Optuna: python3 -m venv --system-site-packages .venv && .venv/bin/pip install\n"
     "./clients/python). JOB's spec says search: {algorithm: external}: the searcher\n"
     "replays every finished trial into an in-memory Optuna study, then sends the\n"
     "params the sampler asks for (Suggest) and tells it each result, until the job\n"
     "ends. Kill it and start it again at any time: nothing is lost or run twice.\n"
     "Exit 0 when the job finished, 1 when it was cancelled or failed or Redis or the\n"
     "coordinator could not be reached, 2 for a job or space Optuna cannot take.",
     1, 1, s_optuna_opts, cgq_cmd_optuna_search},
    {"devices", "[enable ID]", "the devices of device runners; enable returns a quarantined one",
     "Lists every device a runner has declared: id, runner, state (idle, busy, quarantined,\n"
     "offline), the task it runs (JOB.TRIAL#ATTEMPT), failed measurements in a row, tags and\n"
     "the last error. A device is quarantined after --quarantine-after failures in a row (a\n"
     "coordinator flag, default 3); `cgq devices enable ID` asks the coordinator to return it.\n"
     "json: [{\"id\", \"node\", \"state\", \"task\", \"failures\", \"quarantined\", \"tags\",\n"
     "        \"last_error\"}]",
     0, 2, s_devices_opts, cgq_cmd_devices},
    {NULL}};

static const char *s_global_help =
    "global options (accepted by every command):\n"
    "  --redis URL          Redis URL (env CGQ_REDIS, default " CGQ_CLI_DEFAULT_REDIS ")\n"
    "                       or sentinel://HOST:PORT[,...]/MASTER_NAME[/DB] (the\n"
    "                       sentinels' password: env CGQ_SENTINEL_PASSWORD)\n"
    "  --coordinator EP     coordinator control endpoint (env CGQ_COORDINATOR,\n"
    "                       default " CGQ_CLI_DEFAULT_COORDINATOR ")\n"
    "  --curve-secret FILE  CURVE: your secret certificate, NAME.key_secret of\n"
    "                       `cgq keygen` (env CGQ_CURVE_SECRET)\n"
    "  --curve-server FILE  CURVE: the coordinator's public certificate (env\n"
    "                       CGQ_CURVE_SERVER)\n"
    "  -h, --help           this help\n"
    "  -V, --version        print the version\n";

static void
s_print_usage (FILE *f)
{
    fprintf (f,
             "usage: cgq [--redis URL] [--coordinator EP] COMMAND [ARGS]\n"
             "\n"
             "cgq %s: a job queue for hyper-parameter tuning and architecture search.\n"
             "\n"
             "commands:\n",
             CGQ_CLI_VERSION);
    for (const cgq_cli_cmd_t *c = s_cmds; c->name; c++) {
        char head[64];
        snprintf (head, sizeof head, "%s %s", c->name, c->args);
        fprintf (f, "  %-18s %s\n", head, c->summary);
    }
    fprintf (f, "  %-18s %s\n", "help [COMMAND]", "this text, or a command's options");
    fprintf (f, "\n%s", s_global_help);
    fprintf (f, "\n"
                "`cgq COMMAND --help` describes a command. Exit status: 0 success, 1 failure\n"
                "(unreachable Redis or coordinator, job failed), 2 bad input.\n");
}

static void
s_print_cmd_help (const cgq_cli_cmd_t *c, FILE *f)
{
    fprintf (f, "usage: cgq %s%s%s%s\n\n%s\n", c->name, c->opts[0].name ? " [options]" : "",
             *c->args ? " " : "", c->args, c->summary);
    if (c->details)
        fprintf (f, "\n%s\n", c->details);
    if (c->opts[0].name) {
        fprintf (f, "\noptions:\n");
        for (const cgq_cli_opt_t *o = c->opts; o->name; o++) {
            char head[64];
            snprintf (head, sizeof head, "--%s%s%s", o->name, o->arg ? " " : "",
                      o->arg ? o->arg : "");
            fprintf (f, "  %-19s %s\n", head, o->help);
        }
    }
    fprintf (f, "\n%s", s_global_help);
}

static const cgq_cli_cmd_t *
s_find_cmd (const char *name)
{
    for (const cgq_cli_cmd_t *c = s_cmds; c->name; c++)
        if (strcmp (c->name, name) == 0)
            return c;
    return NULL;
}

enum {
    S_OPT_REDIS = 1000,
    S_OPT_COORDINATOR,
    S_OPT_HELP,
    S_OPT_VERSION,
    S_OPT_CURVE_SECRET,
    S_OPT_CURVE_SERVER
};

// s_parse fills cli from argv[0..argc-1] (argv[0] is the command name).
// Returns -1 to exit 0 (help printed), 0 to run, or an exit status > 0.
static int
s_parse (cgq_cli_t *cli, const cgq_cli_cmd_t *cmd, int argc, char **argv)
{
    struct option lo[CGQ_CLI_MAX_OPTS + 8];
    int n = 0;
    lo[n++] = (struct option) {"redis", required_argument, NULL, S_OPT_REDIS};
    lo[n++] = (struct option) {"coordinator", required_argument, NULL, S_OPT_COORDINATOR};
    lo[n++] = (struct option) {"help", no_argument, NULL, S_OPT_HELP};
    lo[n++] = (struct option) {"version", no_argument, NULL, S_OPT_VERSION};
    lo[n++] = (struct option) {"curve-secret", required_argument, NULL, S_OPT_CURVE_SECRET};
    lo[n++] = (struct option) {"curve-server", required_argument, NULL, S_OPT_CURVE_SERVER};
    int nopts = 0;
    for (const cgq_cli_opt_t *o = cmd->opts; o->name && nopts < CGQ_CLI_MAX_OPTS; o++, nopts++)
        lo[n++] = (struct option) {o->name, o->arg ? required_argument : no_argument, NULL,
                                   nopts};
    lo[n] = (struct option) {NULL, 0, NULL, 0};

    cli->cmd = cmd;
    opterr = 0;
    optind = 0; // 0 re-initialises GNU getopt, also between parses in tests
    for (;;) {
        int c = getopt_long (argc, argv, ":hV", lo, NULL);
        if (c == -1)
            break;
        if (c >= 0 && c < nopts)
            cli->vals[c] = optarg ? optarg : "";
        else if (c == S_OPT_REDIS) {
            cli->redis = optarg;
            cli->redis_given = true;
        }
        else if (c == S_OPT_COORDINATOR)
            cli->coordinator = optarg;
        else if (c == S_OPT_CURVE_SECRET)
            cli->curve_secret = optarg;
        else if (c == S_OPT_CURVE_SERVER)
            cli->curve_server = optarg;
        else if (c == S_OPT_VERSION || c == 'V') {
            printf ("cgq %s\n", CGQ_CLI_VERSION);
            return -1;
        }
        else if (c == S_OPT_HELP || c == 'h') {
            s_print_cmd_help (cmd, stdout);
            return -1;
        }
        else if (c == ':') {
            cgq_cli_error ("option %s needs a value (see cgq %s --help)", argv[optind - 1],
                           cmd->name);
            return CGQ_EXIT_BAD;
        }
        else {
            cgq_cli_error ("unknown option '%s' for cgq %s (see cgq %s --help)",
                           argv[optind - 1], cmd->name, cmd->name);
            return CGQ_EXIT_BAD;
        }
    }
    cli->pos = argv + optind;
    cli->npos = argc - optind;
    if (cli->npos < cmd->min_pos || cli->npos > cmd->max_pos) {
        if (cli->npos < cmd->min_pos)
            cgq_cli_error ("cgq %s needs %s (usage: cgq %s%s %s)", cmd->name, cmd->args,
                           cmd->name, cmd->opts[0].name ? " [options]" : "", cmd->args);
        else
            cgq_cli_error ("unexpected argument '%s' (usage: cgq %s%s%s%s)",
                           cli->pos[cmd->max_pos], cmd->name,
                           cmd->opts[0].name ? " [options]" : "", *cmd->args ? " " : "",
                           cmd->args);
        return CGQ_EXIT_BAD;
    }
    return 0;
}

int
main (int argc, char **argv)
{
    cgq_log_init ("cgq", CGQ_LOG_WARN, false);
    cgq_cli_t cli;
    memset (&cli, 0, sizeof cli);
    cli.redis = getenv ("CGQ_REDIS");
    cli.redis_given = cli.redis && *cli.redis;
    if (!cli.redis_given)
        cli.redis = CGQ_CLI_DEFAULT_REDIS;
    cli.coordinator = getenv ("CGQ_COORDINATOR");
    if (!cli.coordinator || !*cli.coordinator)
        cli.coordinator = CGQ_CLI_DEFAULT_COORDINATOR;
    cli.curve_secret = getenv ("CGQ_CURVE_SECRET");
    cli.curve_server = getenv ("CGQ_CURVE_SERVER");

    // Global options before the command name; the command's parser accepts
    // them again after it.
    int i = 1;
    while (i < argc && argv[i][0] == '-') {
        const char *a = argv[i];
        const char *val = NULL;
        bool is_redis = strncmp (a, "--redis", 7) == 0 && (a[7] == 0 || a[7] == '=');
        bool is_coord = strncmp (a, "--coordinator", 13) == 0 && (a[13] == 0 || a[13] == '=');
        bool is_secret = strncmp (a, "--curve-secret", 14) == 0 && (a[14] == 0 || a[14] == '=');
        bool is_server = strncmp (a, "--curve-server", 14) == 0 && (a[14] == 0 || a[14] == '=');
        if (!strcmp (a, "--help") || !strcmp (a, "-h")) {
            s_print_usage (stdout);
            return CGQ_EXIT_OK;
        }
        if (!strcmp (a, "--version") || !strcmp (a, "-V")) {
            printf ("cgq %s\n", CGQ_CLI_VERSION);
            return CGQ_EXIT_OK;
        }
        if (!is_redis && !is_coord && !is_secret && !is_server) {
            cgq_cli_error ("unknown option '%s' (see cgq --help)", a);
            return CGQ_EXIT_BAD;
        }
        const char *eq = strchr (a, '=');
        if (eq)
            val = eq + 1;
        else if (i + 1 < argc)
            val = argv[++i];
        else {
            cgq_cli_error ("option %s needs a value (see cgq --help)", a);
            return CGQ_EXIT_BAD;
        }
        if (is_redis) {
            cli.redis = val;
            cli.redis_given = true;
        }
        else if (is_coord)
            cli.coordinator = val;
        else if (is_secret)
            cli.curve_secret = val;
        else
            cli.curve_server = val;
        i++;
    }
    if (i >= argc) {
        s_print_usage (stderr);
        return CGQ_EXIT_BAD;
    }
    const char *name = argv[i];
    if (!strcmp (name, "help")) {
        if (i + 1 < argc && (!strcmp (argv[i + 1], "--help") || !strcmp (argv[i + 1], "-h"))) {
            printf ("usage: cgq help [COMMAND]\n\n"
                    "Without COMMAND: the commands and the global options (as cgq --help).\n"
                    "With COMMAND: its options (as cgq COMMAND --help).\n");
            return CGQ_EXIT_OK;
        }
        if (i + 2 < argc) {
            cgq_cli_error ("unexpected argument '%s' (usage: cgq help [COMMAND])", argv[i + 2]);
            return CGQ_EXIT_BAD;
        }
        if (i + 1 < argc) {
            const cgq_cli_cmd_t *c = s_find_cmd (argv[i + 1]);
            if (!c) {
                cgq_cli_error ("unknown command '%s' (see cgq --help)", argv[i + 1]);
                return CGQ_EXIT_BAD;
            }
            s_print_cmd_help (c, stdout);
        }
        else
            s_print_usage (stdout);
        return CGQ_EXIT_OK;
    }
    const cgq_cli_cmd_t *cmd = s_find_cmd (name);
    if (!cmd) {
        cgq_cli_error ("unknown command '%s' (see cgq --help)", name);
        return CGQ_EXIT_BAD;
    }
    int rc = s_parse (&cli, cmd, argc - i, argv + i);
    if (rc < 0)
        return CGQ_EXIT_OK;
    if (rc > 0)
        return rc;
    cgq_ctl_set_curve (cli.curve_secret, cli.curve_server);
    // The largest spec read: --max-spec of submit/validate, else CGQ_MAX_SPEC.
    const char *max_spec = cgq_cli_opt (&cli, "max-spec");
    if (!max_spec || !*max_spec)
        max_spec = getenv ("CGQ_MAX_SPEC");
    if (max_spec && *max_spec) {
        uint64_t bytes = 0;
        if (cgq_parse_bytes (max_spec, &bytes) < 0 || bytes < 1024 || bytes > (1ull << 30)) {
            cgq_cli_error ("--max-spec '%s' is not a size from 1K to 1G (write e.g. 4M)",
                           max_spec);
            return CGQ_EXIT_BAD;
        }
        cgq_spec_set_max_bytes ((size_t) bytes);
    }
    return cmd->fn (&cli);
}
