// optuna: `cgq optuna-search JOB [options]` runs an Optuna sampler as the
// searcher of an external job: it execs `python3 -m cgq.optuna_search` (the
// Python package in clients/python) with the same arguments, so the CLI
// needs no Python and the searcher no C. The interpreter is $CGQ_PYTHON,
// else python3 on PATH; a missing package gets one line that says how to
// install it, before any Python traceback could.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

// What the interpreter runs: find the module first, so that a missing
// package is one clear line (exit 2), then run it as `python3 -m` would.
// argv[1] is the message for a missing package.
static const char *s_boot =
    "import sys, importlib.util\n"
    "try:\n"
    "    found = importlib.util.find_spec('cgq.optuna_search') is not None\n"
    "except ImportError:\n"
    "    found = False\n"
    "if not found:\n"
    "    sys.stderr.write(sys.argv[1] % sys.executable)\n"
    "    sys.exit(2)\n"
    "del sys.argv[1]\n"
    "import runpy\n"
    "runpy.run_module('cgq.optuna_search', run_name='__main__', alter_sys=True)\n";

static const char *s_missing =
    "cgq: optuna-search needs the Python package cgq, which %s cannot import: install it "
    "into a venv that sees Debian's python3-optuna, python3-zmq, python3-redis and "
    "python3-protobuf (python3 -m venv --system-site-packages .venv && .venv/bin/pip install "
    "./clients/python), then activate the venv or set CGQ_PYTHON=.venv/bin/python3\n";

int
cgq_cmd_optuna_search (cgq_cli_t *cli)
{
    uint64_t job;
    if (cgq_cli_parse_id ("job", cli->pos[0], &job) < 0)
        return CGQ_EXIT_BAD;
    const char *python = getenv ("CGQ_PYTHON");
    if (!python || !*python)
        python = "python3";
    char jobs[32];
    snprintf (jobs, sizeof jobs, "%llu", (unsigned long long) job);
    const char *argv[32];
    int n = 0;
    argv[n++] = python;
    argv[n++] = "-c";
    argv[n++] = s_boot;
    argv[n++] = s_missing;
    argv[n++] = jobs;
    static const char *const opts[] = {"sampler", "sampler-args", "seed", "ahead"};
    char flags[4][32];
    for (size_t i = 0; i < sizeof opts / sizeof *opts; i++) {
        const char *v = cgq_cli_opt (cli, opts[i]);
        if (v) {
            snprintf (flags[i], sizeof flags[i], "--%s", opts[i]);
            argv[n++] = flags[i];
            argv[n++] = v;
        }
    }
    if (cgq_cli_flag (cli, "quiet"))
        argv[n++] = "--quiet";
    argv[n++] = "--redis";
    argv[n++] = cli->redis;
    argv[n++] = "--coordinator";
    argv[n++] = cli->coordinator;
    if (cli->curve_secret && *cli->curve_secret) {
        argv[n++] = "--curve-secret";
        argv[n++] = cli->curve_secret;
    }
    if (cli->curve_server && *cli->curve_server) {
        argv[n++] = "--curve-server";
        argv[n++] = cli->curve_server;
    }
    argv[n] = NULL;
    setenv ("CGQ_PROG", "cgq optuna-search", 1);
    fflush (NULL);
    execvp (python, (char *const *) argv);
    cgq_cli_error ("cannot run %s: %s (set CGQ_PYTHON to a Python 3 that has the cgq package and "
                   "Optuna)",
                   python, strerror (errno));
    return CGQ_EXIT_FAIL;
}
