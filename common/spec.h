// spec: the job spec (tune.yaml), parsed with libyaml into one struct. Every
// error names FILE:LINE:COL, says what is wrong and what to write instead;
// unknown keys are errors, so a typo never silently changes a search.
// The reference is docs/spec.md.
#ifndef CGQ_SPEC_H
#define CGQ_SPEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
} cgq_search_alg_t;

typedef enum {
    CGQ_TRIAL_COMMAND, // run trial.command as a child process
    CGQ_TRIAL_NOOP,    // built in: report the numeric params as metrics, spawn nothing
} cgq_trial_kind_t;

typedef struct {
    char *name;  // job name (default: the file name without .yaml)
    char *path;  // as given, for messages
    char *text;  // the YAML text as submitted (owned copy)

    cgq_param_t *params; // in the order written
    size_t nparams;
    json_t *param_index; // param name -> its position in params (owned); NULL: none

    struct {
        cgq_search_alg_t algorithm; // default random
        uint64_t samples;           // default 1; random: points per grid point; grid: repeats
        uint32_t concurrency;       // max running trials of this job; 0 = no limit (default)
        uint64_t seed;              // default 0
    } search;

    struct {
        char *metric; // NULL: no objective (no leaderboard)
        int mode;     // +1 max, -1 min
    } objective;

    struct {
        cgq_trial_kind_t kind;  // trial.kind: command (default) | noop
        char *command;          // string form: run by /bin/sh -c, values shell-quoted
        char **argv;            // list form: exec'd directly; argc entries
        size_t argc;
        double cpu;             // default 1
        double gpu;             // default 0; 0 < gpu <= 1 shares one GPU, > 1 must be integral
        uint64_t memory;        // bytes, default 0 (not checked)
        double timeout_s;       // 0: none
        uint32_t retries;       // extra attempts after a failure, default 0
        char **env_keys;        // trial.env, nenv entries, values are templates
        char **env_vals;
        size_t nenv;
    } trial;
} cgq_spec_t;

// A spec is a page of YAML, not data: cgq_spec_parse refuses longer text before
// parsing it. A build may set another limit with -DCGQ_SPEC_MAX_BYTES=N.
#ifndef CGQ_SPEC_MAX_BYTES
#define CGQ_SPEC_MAX_BYTES (1024 * 1024)
#endif

// cgq_spec_parse parses YAML text (len bytes). path is used in messages only.
// On error returns NULL and writes "PATH:LINE:COL: what is wrong (what to write
// instead)" into err (errlen bytes). Caller destroys the result. Text longer
// than CGQ_SPEC_MAX_BYTES, with a NUL byte, or nested more than 64 levels deep
// is refused as soon as that is seen, so the work is linear in len.
cgq_spec_t *cgq_spec_parse (const char *text, size_t len, const char *path, char *err,
                            size_t errlen);

// cgq_spec_load reads and parses a file; an unreadable file is an error too
// ("PATH: cannot read: No such file or directory"). It reads at most
// CGQ_SPEC_MAX_BYTES + 1 bytes, so a huge file costs no memory.
cgq_spec_t *cgq_spec_load (const char *path, char *err, size_t errlen);

void cgq_spec_destroy (cgq_spec_t **self_p);

// cgq_spec_param finds a param by name; NULL if none. O(1) with param_index.
const cgq_param_t *cgq_spec_param (const cgq_spec_t *self, const char *name);

// cgq_spec_describe writes a human summary to f: one line per param with its
// domain, the search, the objective, the trial and the number of trials.
void cgq_spec_describe (const cgq_spec_t *self, FILE *f);

#endif
