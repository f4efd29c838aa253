// spec_describe: `cgq validate`'s printout of a parsed spec
// (cgq_spec_describe): every param with its domain, the search and its size,
// the objectives and each stage of the trial.
#include "spec.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "space.h"
#include "util.h"

static void
s_describe_json (FILE *f, const json_t *v)
{
    char *s = cgq_json_dumps (v);
    fputs (s, f);
    free (s);
}

static const char *
s_bytes (char *buf, size_t len, uint64_t b)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double) b;
    int u = 0;
    while (v >= 1024 && u < 5)
        v /= 1024, u++;
    char num[32];
    snprintf (buf, len, "%s %s", cgq_fmt_double (num, cgq_round15 (round (v * 100) / 100)),
              units[u]);
    return buf;
}

// s_describe_param writes a param's domain on one line, without a newline.
static void
s_describe_param (FILE *f, const cgq_param_t *p)
{
    char a[32], b[32], q[32];
    switch (p->kind) {
    case CGQ_PARAM_CONST:
        fputs ("= ", f);
        s_describe_json (f, p->value);
        break;
    case CGQ_PARAM_CHOICE:
    case CGQ_PARAM_GRID:
        fprintf (f, "%s ", p->kind == CGQ_PARAM_GRID ? "grid" : "choice");
        s_describe_json (f, p->values);
        break;
    case CGQ_PARAM_UNIFORM:
    case CGQ_PARAM_LOGUNIFORM:
    case CGQ_PARAM_RANDINT:
        fprintf (f, "%s [%s, %s]%s",
                 p->kind == CGQ_PARAM_UNIFORM      ? "uniform"
                 : p->kind == CGQ_PARAM_LOGUNIFORM ? "loguniform"
                                                   : "randint",
                 cgq_fmt_double (a, p->lo), cgq_fmt_double (b, p->hi),
                 p->kind == CGQ_PARAM_RANDINT ? " (inclusive)" : "");
        break;
    case CGQ_PARAM_QUNIFORM:
    case CGQ_PARAM_QLOGUNIFORM:
        fprintf (f, "%s [%s, %s] in steps of %s",
                 p->kind == CGQ_PARAM_QUNIFORM ? "quniform" : "qloguniform",
                 cgq_fmt_double (a, p->lo), cgq_fmt_double (b, p->hi), cgq_fmt_double (q, p->q));
        break;
    case CGQ_PARAM_REPEAT:
        fprintf (f, "repeat %u x ", p->repeat);
        s_describe_param (f, p->of);
        break;
    case CGQ_PARAM_ASSIGNMENT:
        fputs ("assignment of ", f);
        s_describe_json (f, p->items);
        fputs (" to ", f);
        s_describe_json (f, p->values);
        break;
    }
}

char *
cgq_spec_param_domain (const cgq_param_t *p)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream (&text, &len);
    if (!f)
        return cgq_xstrdup ("?"); // only when out of memory
    s_describe_param (f, p);
    fclose (f);
    return text;
}

// s_describe_stage writes one stage (label: "trial" or "stage NAME").
static void
s_describe_stage (const cgq_stage_t *st, const char *label, FILE *f)
{
    char on[256];
    if (st->kind == CGQ_TRIAL_NOOP)
        fprintf (f, "%s: noop (reports the numeric params as metrics)\n", label);
    else if (st->kind == CGQ_TRIAL_CLIENT)
        fprintf (f, "%s: client (run where study.ask() is called, until study.tell())\n", label);
    else if (st->kind == CGQ_TRIAL_PREDICTOR)
        fprintf (f, "%s: predictor (built-in GNN latency predictor) on %s\n", label, st->data);
    else if (st->kind == CGQ_TRIAL_DEVICE) {
        char rep[32], warm[32];
        snprintf (rep, sizeof rep, "%u", st->repeats);
        snprintf (warm, sizeof warm, "%u", st->warmup);
        fprintf (f, "%s: benchmark %s on a device with %s, repeats %s, warmup %s\n",
                 label, st->benchmark, cgq_spec_stage_on (st, on, sizeof on),
                 st->repeats ? rep : "the runner's", st->warmup ? warm : "the runner's");
        if (st->artifact_url)
            fprintf (f, "  artifact: %s (sha256 %s)\n", st->artifact_url,
                     st->artifact_sha256);
        char *mj = cgq_spec_measure_json (&st->measure); // spec_measure.c
        if (mj)
            fprintf (f, "  measure: %s (overrides the runner's benchmark)\n", mj);
        free (mj);
    }
    else if (st->command)
        fprintf (f, "%s: sh -c %s\n", label, st->command);
    else {
        fprintf (f, "%s: exec", label);
        for (size_t i = 0; i < st->argc; i++)
            fprintf (f, " [%s]", st->argv[i]);
        fputc ('\n', f);
    }
    char mem[48], a[32], b[32];
    if (st->kind != CGQ_TRIAL_DEVICE)
        fprintf (f, "  resources: cpu %s, gpu %s, memory %s\n", cgq_fmt_double (a, st->cpu),
             cgq_fmt_double (b, st->gpu),
             st->memory ? s_bytes (mem, sizeof mem, st->memory) : "not set");
    if (st->timeout_s > 0) {
        char t[32];
        fprintf (f, "  timeout: %s s, retries: %u\n", cgq_fmt_double (t, st->timeout_s),
                 st->retries);
    }
    else
        fprintf (f, "  timeout: none, retries: %u\n", st->retries);
    for (size_t i = 0; i < st->nenv; i++)
        fprintf (f, "  env: %s=%s\n", st->env_keys[i], st->env_vals[i]);
}

void
cgq_spec_describe (const cgq_spec_t *self, FILE *f)
{
    char a[32];
    bool grid = self->search.algorithm == CGQ_SEARCH_GRID;
    fprintf (f, "job: %s (%s)\n", self->name, self->path);
    int w = 4;
    for (size_t i = 0; i < self->nparams; i++)
        if ((int) strlen (self->params[i].name) > w)
            w = (int) strlen (self->params[i].name);
    fprintf (f, "params (%zu):\n", self->nparams);
    for (size_t i = 0; i < self->nparams; i++) {
        const cgq_param_t *p = &self->params[i];
        fprintf (f, "  %-*s  ", w, p->name);
        s_describe_param (f, p);
        uint64_t n;
        bool axis = cgq_space_is_axis (self, p);
        if ((axis || p->kind == CGQ_PARAM_CHOICE || p->kind == CGQ_PARAM_ASSIGNMENT) &&
            cgq_space_param_size (p, &n) == 0)
            fprintf (f, "  (%s%llu %s)", axis && p->kind != CGQ_PARAM_GRID ? "grid axis, " : "",
                     (unsigned long long) n, p->kind == CGQ_PARAM_ASSIGNMENT ? "ids" : "values");
        fputc ('\n', f);
    }
    char conc[32] = "unlimited";
    if (self->search.concurrency)
        snprintf (conc, sizeof conc, "%u", self->search.concurrency);
    cgq_search_alg_t alg = self->search.algorithm;
    if (self->search.fail_fast)
        fprintf (f, "fails fast: the job stops when %u trial(s) have failed before any succeeds "
                    "(search.fail_fast; 0: never)\n",
                 self->search.fail_fast);
    if (alg == CGQ_SEARCH_RANDOM || alg == CGQ_SEARCH_GRID)
        fprintf (f, "search: %s, %llu %s, seed %llu, concurrency %s\n", grid ? "grid" : "random",
                 (unsigned long long) self->search.samples,
                 grid ? "repeat(s) of the grid" : "sample(s) per grid point",
                 (unsigned long long) self->search.seed, conc);
    else if (alg == CGQ_SEARCH_LIST)
        fprintf (f, "search: list, %zu point(s)%s%s, concurrency %s\n",
                 json_array_size (self->search.points), self->search.file ? " from " : "",
                 self->search.file ? self->search.file : "", conc);
    else if (alg == CGQ_SEARCH_PBT) {
        char q[32], r[32], iv[32];
        fprintf (f,
                 "search: pbt, population %u, seed %llu, concurrency %s: a trial that checkpoints "
                 "%s (of %s) after its last look is ranked by %s (%s); the bottom %s copy the "
                 "top %s and perturb",
                 self->search.population, (unsigned long long) self->search.seed, conc,
                 cgq_fmt_double (iv, self->search.pbt.interval), self->search.pbt.time_attr,
                 self->search.pbt.metric, self->search.pbt.mode > 0 ? "max" : "min",
                 cgq_fmt_double (q, self->search.pbt.quantile), q);
        for (size_t i = 0; i < self->search.pbt.nmutations; i++)
            fprintf (f, "%s%s", i ? ", " : " ", self->params[self->search.pbt.mutations[i]].name);
        fprintf (f, " (resampled with probability %s)\n",
                 cgq_fmt_double (r, self->search.pbt.resample));
    }
    else if (alg == CGQ_SEARCH_EXTERNAL)
        fprintf (f,
                 "search: external (the params come from a searcher process: cgq "
                 "optuna-search, or your own), at most %llu trial(s), concurrency %s\n",
                 (unsigned long long) self->search.samples, conc);
    else {
        fprintf (f, "search: %s, %llu trial(s), seed %llu, concurrency %s\n",
                 cgq_spec_search_name (alg), (unsigned long long) self->search.samples,
                 (unsigned long long) self->search.seed, conc);
        if (alg == CGQ_SEARCH_EVOLUTION)
            fprintf (f, "  population %u, tournament %u, %u random first, %u in flight\n",
                     self->search.population, self->search.tournament, self->search.initial,
                     self->search.batch);
        else if (alg == CGQ_SEARCH_NSGA2)
            fprintf (f, "  population %u, %u random first, %u in flight, crossover %s\n",
                     self->search.population, self->search.initial, self->search.batch,
                     cgq_fmt_double (a, self->search.crossover));
        else if (alg == CGQ_SEARCH_CMAES) {
            char pop[32];
            snprintf (pop, sizeof pop, "%u", self->search.popsize);
            fprintf (f, "  popsize %s, sigma0 %s, %u restart(s) (IPOP)\n",
                     self->search.popsize ? pop : "4 + 3 ln(params)",
                     cgq_fmt_double (a, self->search.sigma0), self->search.restarts);
        }
        else
            fprintf (f, "  %u random first%s, %u candidates per suggestion%s\n",
                     self->search.initial,
                     alg == CGQ_SEARCH_TPE || alg == CGQ_SEARCH_BOHB ? " (until so many succeed)" : "",
                     self->search.candidates,
                     (alg == CGQ_SEARCH_TPE || alg == CGQ_SEARCH_BOHB) && self->search.multivariate
                         ? ", multivariate"
                         : "");
    }
    if (self->search.nwarm_jobs || self->search.warm_points) {
        fprintf (f, "  warm start from");
        for (size_t i = 0; i < self->search.nwarm_jobs; i++)
            fprintf (f, "%s job %llu", i ? "," : "", (unsigned long long) self->search.warm_jobs[i]);
        if (self->search.warm_points)
            fprintf (f, "%s points %s", self->search.nwarm_jobs ? "," : "",
                     self->search.warm_points);
        fprintf (f, " (read by cgq submit)\n");
    }
    uint64_t d;
    if (cgq_space_without_replacement (self) && cgq_space_sampled_size (self, &d) == 0)
        fprintf (f, "  sampled without replacement: no repeats among %llu combinations\n",
                 (unsigned long long) d);
    if (self->nobjectives == 1 && self->objective.text && strcmp (self->objective.text,
                                                                   self->objective.metric))
        fprintf (f, "objective: %s %s = expr %s\n",
                 self->objective.mode > 0 ? "maximize" : "minimize", self->objective.metric,
                 self->objective.text);
    else if (self->nobjectives == 1)
        fprintf (f, "objective: %s %s%s\n", self->objective.mode > 0 ? "maximize" : "minimize",
                 self->objective.expr ? "expr " : "", self->objective.metric);
    else if (self->nobjectives > 1) {
        fprintf (f, "objectives (Pareto front):");
        for (size_t i = 0; i < self->nobjectives; i++)
            fprintf (f, "%s %s %s", i ? "," : "",
                     self->objectives[i].mode > 0 ? "maximize" : "minimize",
                     self->objectives[i].metric);
        fputc ('\n', f);
    }
    else
        fputs ("objective: none (no leaderboard)\n", f);
    if (self->nconstraints) {
        fprintf (f, "constraints (a trial that violates one is infeasible: never best, never on "
                    "the front):\n");
        for (size_t i = 0; i < self->nconstraints; i++)
            fprintf (f, "  %s\n", self->constraints[i].text);
    }
    if (self->early_stop.algorithm != CGQ_EARLY_STOP_NONE)
        fprintf (f, "early stop: %s on %s (%s) by %s, grace %llu, max %llu\n",
                 self->early_stop.algorithm == CGQ_EARLY_STOP_ASHA        ? "asha"
                 : self->early_stop.algorithm == CGQ_EARLY_STOP_HYPERBAND ? "hyperband"
                                                                          : "median",
                 self->early_stop.metric,
                 self->early_stop.nobjectives > 1 ? "each objective's mode, Pareto"
                 : self->early_stop.mode > 0      ? "max"
                                                  : "min",
                 self->early_stop.attribute, (unsigned long long) self->early_stop.grace,
                 (unsigned long long) self->early_stop.max);
    if (!self->nstages)
        s_describe_stage (&self->trial, "trial", f);
    for (size_t k = 0; k < self->nstages; k++) {
        char label[96];
        snprintf (label, sizeof label, "stage %zu %s", k + 1, self->stages[k].name);
        s_describe_stage (&self->stages[k], label, f);
    }
    if (self->nstages)
        for (size_t i = 0; i < self->trial.nenv; i++)
            fprintf (f, "  env (every stage): %s=%s\n", self->trial.env_keys[i],
                     self->trial.env_vals[i]);
    unsigned rs = self->checkpoint.resume;
    if (self->checkpoint.store || self->checkpoint.keep > 1 ||
        rs != (CGQ_RESUME_LOST | CGQ_RESUME_FAILED))
        fprintf (f, "checkpoints: in %s, the last %u kept per trial, resumed after%s%s%s%s\n",
                 self->checkpoint.store ? self->checkpoint.store
                                        : "each worker's --checkpoint-store",
                 self->checkpoint.keep ? self->checkpoint.keep : 1,
                 rs & CGQ_RESUME_LOST ? " a lost node" : "",
                 rs & CGQ_RESUME_FAILED ? (rs & CGQ_RESUME_LOST ? ", a failure" : " a failure") : "",
                 rs & CGQ_RESUME_TIMEOUT ? ((rs & 3) ? ", a timeout" : " a timeout") : "",
                 rs ? "" : " nothing (every retry starts afresh)");
    uint64_t total = 0;
    uint64_t points = self->search.samples ? self->search.samples : 1;
    if (cgq_space_count (self, &total) == 0)
        points = total / points;
    if (alg == CGQ_SEARCH_PBT)
        fprintf (f, "trials: %u, and one more per exploit (not known up front)\n",
                 self->search.population);
    else if (alg != CGQ_SEARCH_RANDOM && alg != CGQ_SEARCH_GRID &&
             cgq_space_count (self, &total) == 0)
        fprintf (f, "trials: %llu\n", (unsigned long long) total);
    else if (cgq_space_count (self, &total) == 0)
        fprintf (f, "trials: %llu (%llu grid point(s) x %llu)\n", (unsigned long long) total,
                 (unsigned long long) points, (unsigned long long) self->search.samples);
    else
        fputs ("trials: more than 2^63\n", f);
}
