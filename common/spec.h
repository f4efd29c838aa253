// spec: the job spec (tune.yaml), read by common/yamldoc.c into one struct. Every
// error names FILE:LINE:COL, says what is wrong and what to write instead;
// unknown keys are errors, so a typo never silently changes a search.
// The reference is docs/spec.md.
#ifndef CGQ_SPEC_H
#define CGQ_SPEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "expr.h"

typedef enum {
    CGQ_PARAM_CONST,       // gnn: GATv2Conv            (any scalar, list or mapping)
    CGQ_PARAM_CHOICE,      // {choice: [64, 128, 256]}  (sampled; enumerated by algorithm: grid)
    CGQ_PARAM_UNIFORM,     // {uniform: [lo, hi]}
    CGQ_PARAM_LOGUNIFORM,  // {loguniform: [lo, hi]}    (0 < lo < hi)
    CGQ_PARAM_RANDINT,     // {randint: [lo, hi]}       (integers, both bounds inclusive)
    CGQ_PARAM_GRID,        // {grid: [32, 64]}          (always crossed with everything else)
    CGQ_PARAM_QUNIFORM,    // {quniform: [lo, hi, q]}   (multiples of q in [lo, hi])
    CGQ_PARAM_QLOGUNIFORM, // {qloguniform: [lo, hi, q]} (the same, drawn on a log scale)
    CGQ_PARAM_REPEAT,      // {repeat: N, of: {choice: [2, 3]}} (a list of N draws)
    CGQ_PARAM_ASSIGNMENT,  // {assignment: {items: [...], choices: [...]}} (an id in [0, B^n))
} cgq_param_kind_t;

// The most elements of a repeat and the most items of an assignment.
#define CGQ_PARAM_MAX_REPEAT 64
#define CGQ_PARAM_MAX_ITEMS 64

typedef struct cgq_param_s {
    char *name; // NULL for the element of a repeat
    cgq_param_kind_t kind;
    json_t *value;          // CONST: the value (owned)
    json_t *values;         // CHOICE, GRID: non-empty JSON array; ASSIGNMENT: the choices (owned)
    json_t *items;          // ASSIGNMENT: the item names, a JSON array of strings (owned)
    char *env;              // ASSIGNMENT: "OP_BACKEND_{item}={choice}", one variable per
                            // item for command trials (owned); NULL: none
    double lo, hi;          // UNIFORM, LOGUNIFORM, RANDINT (integral), QUNIFORM, QLOGUNIFORM
    double q;               // QUNIFORM, QLOGUNIFORM: the step, > 0
    bool integral;          // QUNIFORM, QLOGUNIFORM: lo, hi, q integers: values are JSON integers
    uint32_t repeat;        // REPEAT: the length of the list, 1..CGQ_PARAM_MAX_REPEAT
    struct cgq_param_s *of; // REPEAT: the distribution of each element (owned)
    int line, col;          // where the param is written (1-based)
} cgq_param_t;

typedef enum {
    CGQ_SEARCH_RANDOM,
    CGQ_SEARCH_GRID,
    CGQ_SEARCH_EVOLUTION, // regularized (aging) evolution, steady state
    CGQ_SEARCH_NSGA2,     // multi-objective: non-dominated sort + crowding
    CGQ_SEARCH_BAYES,     // Gaussian process + expected improvement
    CGQ_SEARCH_TPE,       // tree-structured Parzen estimator (Optuna's TPE)
    CGQ_SEARCH_LIST,      // the points of search.points (or search.file), in order
    CGQ_SEARCH_EXTERNAL,  // the points a process outside the coordinator sends (Suggest)
    CGQ_SEARCH_CMAES,     // CMA-ES with IPOP restarts (as Optuna's CmaEsSampler)
    CGQ_SEARCH_PBT,       // Population Based Training (search_pbt.c; needs checkpoint:)
    CGQ_SEARCH_BOHB,      // TPE on the largest budget with enough results, for hyperband
} cgq_search_alg_t;

// The most params search.hyperparam_mutations of algorithm pbt may name.
#define CGQ_SPEC_PBT_MAX_MUTATIONS 64

// search.samples of algorithm external when the spec leaves it out: the
// searcher outside decides when to stop sending (or the job is cancelled).
#define CGQ_SPEC_EXTERNAL_SAMPLES 1000000

// The largest search.popsize of algorithm cmaes (and where IPOP's doubling stops).
#define CGQ_SPEC_CMAES_MAX_POPSIZE 10000

// The most objectives of objectives: [...].
#define CGQ_SPEC_MAX_OBJECTIVES 8

// One objective: a metric the trial reports, or an expression over metrics.
typedef struct {
    char *metric;     // the metric's name, else the expression's name: (its short name
                      // in tables, plots and Redis) or text; owned
    char *text;       // expr: the expression's text (owned); NULL for metric:
    cgq_expr_t *expr; // expr: the compiled expression (owned); NULL for metric:
    int mode;         // +1 max, -1 min
} cgq_objective_t;

// The most comparisons of constraints: [...].
#define CGQ_SPEC_MAX_CONSTRAINTS 32

// One constraint: a comparison over a trial's metrics that a feasible trial
// satisfies, e.g. "latency_ms <= 20" (docs/spec.md, "constraints").
typedef struct {
    char *text;       // as written: its name in a trial's violation (owned)
    cgq_expr_t *expr; // compiled, a comparison at the top (owned)
    int op;           // CGQ_EXPR_CMP_LT, _LE, _GT or _GE
} cgq_constraint_t;

typedef enum {
    CGQ_EARLY_STOP_NONE,
    CGQ_EARLY_STOP_ASHA,   // successive halving at rungs grace * reduction^k
    CGQ_EARLY_STOP_MEDIAN, // stop below the median of the others at the same attribute
    CGQ_EARLY_STOP_HYPERBAND, // brackets of successive halving; promotions resume paused trials
} cgq_early_stop_alg_t;

typedef enum {
    CGQ_TRIAL_COMMAND, // run trial.command as a child process
    CGQ_TRIAL_NOOP,    // built in: report the numeric params as metrics, spawn nothing
    CGQ_TRIAL_DEVICE,  // a benchmark of a device runner (set by benchmark:, not by kind:)
    CGQ_TRIAL_PREDICTOR, // built in: train the GNN latency predictor on trial.data (predictor/)
    CGQ_TRIAL_CLIENT,  // run in a client's own process (Python study.ask/tell): only a
                       // client node attached to the job gets it, one per ask
} cgq_trial_kind_t;

// A device stage's measure: block (common/spec_measure.c): how the runner
// measures, overriding its runner.yaml benchmark's defaults. Zero / NULL:
// not given (the runner's own). It travels as Assign.measure_json.
typedef struct {
    bool given;               // measure: was written
    uint32_t warmup, repeats; // also copied to the stage's warmup/repeats (old runners)
    double precision;         // 0 < p < 1: the median's 95 % CI within ±p
    uint32_t max_runs;
    double max_time_s;
    int32_t interference_reruns; // -1: not given
    char *governor;           // owned; e.g. "performance"
    uint64_t frequency_khz;
    double cooldown_below_c;  // > 0: wait until the hottest thermal zone is below
    double cooldown_max_wait_s; // bound of that wait (default 120 s)
    uint32_t passes;          // parsed and carried only (another part measures them)
} cgq_measure_spec_t;

// The most tags of on: {...}.
#define CGQ_STAGE_MAX_TAGS 16

// The most stages of trial.stages: [...].
#define CGQ_SPEC_MAX_STAGES 8

// What one attempt runs and where. trial: is one stage; trial.stages: [...]
// is a list of these (cgq_spec_stage), each with its own command or
// benchmark, resources or on:, timeout and retries, run one after another.
typedef struct {
    char *name;             // trial.stages[i].name (an identifier); NULL for trial: itself
    cgq_trial_kind_t kind;  // trial.kind: command (default) | noop | predictor | client;
                            // DEVICE with benchmark:
    char *command;          // string form: run by /bin/sh -c, values shell-quoted
    char *data;             // kind predictor: the CG dataset dir, a template ({spec_dir}/...)
    char **argv;            // list form: exec'd directly; argc entries
    size_t argc;
    double cpu;             // default 1 (0 for a device stage)
    double gpu;             // default 0; 0 < gpu <= 1 shares one GPU, > 1 must be integral
    uint64_t memory;        // bytes, default 0 (not checked)
    double timeout_s;       // 0: none
    uint32_t retries;       // extra attempts after a failure, default 0
    char **env_keys;        // trial.env, nenv entries, values are templates
    char **env_vals;
    size_t nenv;
    // A device stage (kind DEVICE): a benchmark that a device runner defines
    // in its own config, measured on one free device whose tags include every
    // tag of on. A spec never gives a runner a command.
    json_t *on;             // tag -> value, JSON strings, 1..CGQ_STAGE_MAX_TAGS (owned); NULL: none
    char *benchmark;        // the runner's benchmark name
    char *artifact_url;     // template (params allowed); NULL: no artifact
    char *artifact_sha256;  // template; literal: 64 lowercase hex digits
    uint32_t repeats;       // timed runs, >= 1; 0 (not given): the runner's default
    uint32_t warmup;        // untimed runs before them, >= 1; 0 (not given): the runner's default
    uint32_t passes;        // measure: {passes: N}: 1 or 2 (0: not given, one pass); a
                            // one-stage device trial only (coordinator/passes.c)
    cgq_measure_spec_t measure; // measure: {...} of a device stage
} cgq_stage_t;

#define CGQ_SPEC_FAIL_FAST 5 // search.fail_fast's default
#define CGQ_SPEC_BLOCKED_TIMEOUT_S 600.0 // blocked_timeout's default (10m)

typedef struct {
    char *name;  // job name (default: the file name without .yaml)
    char *path;  // as given, for messages
    char *text;  // the YAML text as submitted (owned copy)

    cgq_param_t *params; // in the order written
    size_t nparams;
    json_t *param_index; // param name -> its position in params (owned); NULL: none

    struct {
        cgq_search_alg_t algorithm; // default random
        uint64_t samples;           // default 1; random: points per grid point; grid: repeats;
                                    // external: CGQ_SPEC_EXTERNAL_SAMPLES
        uint32_t concurrency;       // max running trials of this job; 0 = no limit (default)
        // The job stops (state failed) when this many trials have failed and
        // none has succeeded yet: a typo fails 5 trials, not 10,000. 0: never.
        uint32_t fail_fast; // default CGQ_SPEC_FAIL_FAST
        uint64_t seed;              // default 0
        // evolution, nsga2: population (default 50); evolution: tournament
        // (default 5); evolution, nsga2, bayes: initial random points
        // (default population, or 10 for bayes); evolution, nsga2: batch,
        // the children in flight at once (default population).
        uint32_t population, tournament, initial, batch;
        double crossover; // nsga2: probability of crossover (default 0.9)
        double mutation;  // nsga2: per-gene probability of mutation (default 0: 1/genes)
        uint32_t candidates; // bayes: candidates per suggestion (default 1000); tpe: 24
        bool multivariate;   // tpe: one joint estimator instead of one per param (default false)
        // bohb: the share of suggestions after the startup drawn at random
        // (default 1/3, as Falkner et al. 2018 and HpBandSter); 0 otherwise.
        double random_fraction;
        // cmaes: the population lambda (0: 4 + floor(3 ln n)), the initial
        // step size in the [0,1] box (default 1/6), IPOP restarts (default 0).
        uint32_t popsize, restarts;
        double sigma0;
        json_t *points;      // list: the points, a JSON array of objects (owned)
        char *file;          // list: search.file as written (NULL: points written inline)
        // pbt (search_pbt.c): population is search.population (default 8).
        // metric/mode: what ranks the population (default: the objective's);
        // time_attr: the report's step attribute (default "epoch"); every
        // perturbation_interval of it a trial that recorded a checkpoint is
        // ranked; quantile_fraction (0.25) the bottom/top share;
        // resample_probability (0.25); mutations: indices into params of
        // the params hyperparam_mutations names, in the order written.
        struct {
            char *metric;  // owned; NULL: the objective's
            int mode;      // +1 max, -1 min
            char *time_attr; // owned; NULL: "epoch"
            double interval, quantile, resample;
            size_t mutations[CGQ_SPEC_PBT_MAX_MUTATIONS];
            size_t nmutations;
        } pbt;
        // tpe, bayes, cmaes: warm_start: {jobs: [7, 9], points: FILE}: observations the
        // searcher starts from (resolved by the submitting client into the
        // SubmitJob, docs/architecture.md). warm_points as written.
        uint64_t *warm_jobs; // owned; NULL: none
        size_t nwarm_jobs;
        char *warm_points; // owned; NULL: none
    } search;

    // objective: {metric|expr, mode}. metric is NULL when the spec has no
    // objective, or several (objectives: [...]); with expr: it is the
    // expression's text. Compute values with cgq_spec_objective_value(s).
    cgq_objective_t objective;
    cgq_objective_t objectives[CGQ_SPEC_MAX_OBJECTIVES]; // objectives: [...] (2..8)
    size_t nobjectives; // 0: none, 1: objective:, 2..8: objectives: (in objectives[])

    // constraints: [...]: a succeeded trial that violates one is infeasible
    // (never the best, never on the front); cgq_spec_feasible judges.
    cgq_constraint_t *constraints; // owned; NULL: none
    size_t nconstraints;           // 0..CGQ_SPEC_MAX_CONSTRAINTS

    // early_stop: parsed and checked here, acted on by the coordinator.
    struct {
        cgq_early_stop_alg_t algorithm; // NONE when the key is absent
        char *attribute;                // the progress counter of a report (default "epoch")
        char *metric;                   // the metric compared (default: the objective's)
        cgq_expr_t *expr;               // when the default objective is an expr (borrowed)
        int mode;                       // +1 max, -1 min (default: the objective's)
        uint64_t grace;                 // no stop before attribute reaches grace (default 1)
        double reduction;               // asha: keep 1/reduction at each rung (default 3)
        uint64_t max;                   // the attribute's largest value (default 100)
        size_t nobjectives; // multi-objective asha (no metric, a job of objectives: [...]):
                            // how many of the job's objectives are compared; else 0
        size_t obj[CGQ_SPEC_MAX_OBJECTIVES]; // their indices in objectives[] (all, or
                                             // early_stop.objectives: [names])
        uint32_t brackets;              // hyperband: brackets used (0: all, s_max + 1)
    } early_stop;

    // trial: without stages: the one stage. With trial.stages: only its
    // env (given to every command stage) and the defaults of timeout and
    // retries are used; the stages are stages[0..nstages). Read stages with
    // cgq_spec_stage and cgq_spec_nstages, which cover both forms.
    cgq_stage_t trial;

    // notify: {url, on}: the coordinator POSTs a JSON summary of the job to
    // url when it ends with one of the events in on (docs/spec.md).
    struct {
        char *url;   // http:// or https://; NULL: no notify
        unsigned on; // CGQ_NOTIFY_* bits (default: finished | failed)
    } notify;
    // blocked_timeout: how long a job may stay blocked on its devices (every
    // device that could run it quarantined, or none with its tags) before it
    // fails; CGQ_SPEC_BLOCKED_TIMEOUT_S unless given; 0 (0 or never): forever.
    double blocked_timeout_s;
    cgq_stage_t *stages; // trial.stages (owned); NULL: none
    size_t nstages;      // 0: no stages: (trial: is the one stage), else 1..CGQ_SPEC_MAX_STAGES

    // checkpoint: {store, keep, resume} (docs/spec.md, "checkpoint"): where
    // the workers seal a trial's checkpoints, how many the coordinator keeps
    // per trial, and after which ends of an attempt the next one resumes from
    // them. Every command trial may checkpoint; without the section the
    // defaults hold.
    struct {
        char *store;     // a directory, absolute or {spec_dir}/...; NULL: the worker's
                         // --checkpoint-store (owned)
        uint32_t keep;   // default 1
        unsigned resume; // CGQ_RESUME_* bits (default lost | failed)
    } checkpoint;
} cgq_spec_t;

// The ends of an attempt after which the next attempt resumes from the
// trial's checkpoints (checkpoint.resume): its node lost, a failure
// retried, a timeout retried.
#define CGQ_RESUME_LOST 1u
#define CGQ_RESUME_FAILED 2u
#define CGQ_RESUME_TIMEOUT 4u
#define CGQ_CHECKPOINT_MAX_KEEP 100

// The events a job's end can be, one per end (docs/spec.md, "notify"):
// finished (at least one trial succeeded or was stopped early with a value),
// failed (finished, but none did), cancelled.
#define CGQ_NOTIFY_FINISHED 1u
#define CGQ_NOTIFY_FAILED 2u
#define CGQ_NOTIFY_CANCELLED 4u
// cgq_notify_event_name: "finished", "failed" or "cancelled" for one bit.
const char *cgq_notify_event_name (unsigned event);

// A spec is a page of YAML, not data: cgq_spec_parse refuses longer text before
// parsing it. CGQ_SPEC_MAX_BYTES is the default limit (a build may set another
// with -DCGQ_SPEC_MAX_BYTES=N); a program sets its own once, at start, with
// cgq_spec_set_max_bytes (the coordinator's --max-spec, cgq's --max-spec).
#ifndef CGQ_SPEC_MAX_BYTES
#define CGQ_SPEC_MAX_BYTES (1024 * 1024)
#endif
void cgq_spec_set_max_bytes (size_t max);
size_t cgq_spec_max_bytes (void);

// cgq_spec_parse parses YAML text (len bytes). path is used in messages only.
// On error returns NULL and writes "PATH:LINE:COL: what is wrong (what to write
// instead)" into err (errlen bytes). Caller destroys the result. Text longer
// than cgq_spec_max_bytes (), with a NUL byte, or nested more than 64 levels deep
// is refused as soon as that is seen, so the work is linear in len.
cgq_spec_t *cgq_spec_parse (const char *text, size_t len, const char *path, char *err,
                            size_t errlen);

// cgq_spec_load reads and parses a file; an unreadable file is an error too
// ("PATH: cannot read: No such file or directory"). It reads at most
// cgq_spec_max_bytes () + 1 bytes, so a huge file costs no memory.
//
// Only cgq_spec_load reads search.file (algorithm: list), relative to the
// spec's directory: cgq_spec_parse, which the coordinator runs on the text it
// receives, refuses it. So that the coordinator sees the same points,
// cgq_spec_load then sets spec->text to the text with `file: NAME` replaced, on
// the same line, by `points: [...]` (the file's points as flow JSON): every
// other line and column stays where it was, and cgq submit sends spec->text.
cgq_spec_t *cgq_spec_load (const char *path, char *err, size_t errlen);

void cgq_spec_destroy (cgq_spec_t **self_p);

// cgq_spec_objective returns objective i (< nobjectives): &objective for a
// single one, &objectives[i] for several; NULL when i is out of range.
const cgq_objective_t *cgq_spec_objective (const cgq_spec_t *self, size_t i);

// cgq_spec_objective_value computes the single objective (metric or expr) of
// a trial's result metrics (a JSON object, borrowed). Returns 0 with *out, or
// -1 with err set ("result has no numeric metric 'acc' (metrics: a, b)", or
// what the expression could not compute) when a metric is missing or not a
// finite number, when the spec has no objective, or has several.
int cgq_spec_objective_value (const cgq_spec_t *self, const json_t *metrics, double *out,
                              char *err, size_t errlen);

// cgq_spec_objective_values computes every objective (nobjectives values, one
// objective too) into out, in the order written, as reported (not negated:
// cgq_spec_objective_senses says which way is better). Returns 0, or -1 with
// err set for the first that cannot be computed.
int cgq_spec_objective_values (const cgq_spec_t *self, const json_t *metrics, double *out,
                               char *err, size_t errlen);

// cgq_spec_feasible judges a succeeded trial's metrics (a JSON object,
// borrowed) against the spec's constraints; true when it satisfies all of
// them (always, for a spec without constraints). Each out-parameter may be
// NULL. *total: the sum over violated constraints of by how much each is
// violated (lhs - rhs for <, <=; rhs - lhs for >, >=; DBL_MIN for an
// equality that < or > refuses), INFINITY when one cannot be computed (a
// metric the trial did not report): 0 when feasible. *violation: a JSON
// object {constraint text: amount} of the violated ones, null as the amount
// of one that cannot be computed, or NULL when feasible (caller decrefs).
// *warning: what could not be computed and why, or NULL (caller frees).
bool cgq_spec_feasible (const cgq_spec_t *self, const json_t *metrics, double *total,
                        json_t **violation, char **warning);

// cgq_spec_objective_senses writes each objective's mode (+1 max, -1 min) into
// sense (room for CGQ_SPEC_MAX_OBJECTIVES), the form pareto.h takes, and
// returns nobjectives.
size_t cgq_spec_objective_senses (const cgq_spec_t *self, int *sense);

// cgq_spec_nstages is the number of stages a trial runs: nstages, or 1
// when the spec has no trial.stages.
size_t cgq_spec_nstages (const cgq_spec_t *self);

// cgq_spec_stage returns stage k (< cgq_spec_nstages): &trial when the spec
// has no trial.stages, else &stages[k]; NULL when k is out of range.
const cgq_stage_t *cgq_spec_stage (const cgq_spec_t *self, size_t k);

// cgq_spec_measure_json is a device stage's measure: block as the JSON object
// that Assign.measure_json carries (only the keys given), or NULL when no
// measure: was written. Caller frees.
char *cgq_spec_measure_json (const cgq_measure_spec_t *m);

// cgq_spec_stage_index finds a stage by name (n bytes); -1 if none.
int cgq_spec_stage_index (const cgq_spec_t *self, const char *name, size_t n);

// cgq_spec_stage_matches tells whether a device with tags (a JSON object of
// strings, borrowed) has every tag of stage->on with the same value. A stage
// that is not a device stage matches nothing.
bool cgq_spec_stage_matches (const cgq_stage_t *stage, const json_t *tags);

// cgq_spec_stage_on writes stage->on as "device=odroid-xu4, os=tizen" into buf
// (n bytes, truncated) and returns buf; "" for a stage without on.
char *cgq_spec_stage_on (const cgq_stage_t *stage, char *buf, size_t n);

// cgq_spec_check_artifact checks an artifact's url (http://, https:// or
// file://, no whitespace) and sha256 (64 hex digits, lowercased in place) as
// the runner will need them: the spec's literal values, or what dispatch
// rendered from templates. Returns 0, or -1 with err set to what is wrong.
int cgq_spec_check_artifact (const char *url, char *sha256, char *err, size_t errlen);

// cgq_spec_search_name is the name of an algorithm as a spec writes it.
const char *cgq_spec_search_name (cgq_search_alg_t alg);

// cgq_spec_param finds a param by name; NULL if none. O(1) with param_index.
const cgq_param_t *cgq_spec_param (const cgq_spec_t *self, const char *name);

// cgq_spec_param_domain describes param p's domain as cgq validate prints it
// ("loguniform [0.0001, 0.1]", "choice [64,128]", "= GATv2Conv"), for
// messages that say what a value must be. Caller frees.
char *cgq_spec_param_domain (const cgq_param_t *p);

// cgq_spec_describe writes a human summary to f: one line per param with its
// domain, the search, the objective, the trial and the number of trials.
void cgq_spec_describe (const cgq_spec_t *self, FILE *f);

#endif
