// front: the Pareto front of a job with several objectives, for every place
// the CLI shows a leaderboard (cgq run, submit --follow, status, plot) and
// for cgq pareto. The front is what the coordinator keeps in
// cgq:job:{J}:pareto, or, for a job without that record, computed here from
// every succeeded trial.
#ifndef CGQ_FRONT_H
#define CGQ_FRONT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "spec.h"
#include "store.h"
#include "view.h"

// One trial and its objective values (as reported, in the spec's order).
typedef struct {
    cgq_trial_rec_t *rec;
    double v[CGQ_SPEC_MAX_OBJECTIVES];
} cgq_front_row_t;

typedef struct {
    const cgq_spec_t *spec;
    int m;                              // objectives
    int sense[CGQ_SPEC_MAX_OBJECTIVES]; // +1 max, -1 min
    cgq_front_row_t *rows;
    size_t n;
    bool borrowed; // rows' records belong to another list
} cgq_front_list_t;

// A job's front, and every succeeded trial when asked for (or needed).
typedef struct {
    cgq_spec_t *spec;       // the job's, parsed again (owned)
    cgq_front_list_t all;   // every succeeded trial whose objectives compute
    cgq_front_list_t front; // the trials none of all dominates
    bool has_all;           // all was loaded
    size_t infeasible;      // with all: succeeded trials left out as infeasible (constraints)
} cgq_front_t;

// cgq_front_load reads job's front into f (zeroed first): from
// cgq:job:{J}:pareto, or computed from every succeeded trial when the
// coordinator keeps none; with_all also loads those. Returns 0, 1 when the
// job has fewer than two objectives (f holds nothing; *nobjectives, if not
// NULL, says how many), or -1 with err set. Free with cgq_front_fini.
int cgq_front_load (cgq_store_t *store, const cgq_job_rec_t *job, bool with_all, cgq_front_t *f,
                    int *nobjectives, char *err, size_t errlen);
void cgq_front_fini (cgq_front_t *f);

// cgq_front_nobjectives parses job's spec and returns its number of
// objectives (0 when it has none or no longer parses).
int cgq_front_nobjectives (const cgq_job_rec_t *job);

// cgq_front_sort orders l best first in the first objective, then the next
// ones, then by trial id; by_id: by trial id alone.
void cgq_front_sort (cgq_front_list_t *l, bool by_id);

// cgq_front_objectives writes "time (min), memory (min)" into buf.
const char *cgq_front_objectives (const cgq_spec_t *spec, char *buf, size_t n);

// cgq_front_print_table prints l's first top rows (0: all) as a table: trial,
// each objective, each param.
void cgq_front_print_table (const cgq_front_list_t *l, size_t top, FILE *f);

// cgq_front_print_summary prints f's front as a leaderboard for a person:
// one line with its size and the objectives, its first top rows best first
// in the first objective (0: all), and where to see all of it.
void cgq_front_print_summary (cgq_front_t *f, const cgq_job_rec_t *job, size_t top, FILE *out);

// cgq_front_param_text is a param value as text: strings bare, the rest as
// compact JSON ("" for NULL). Caller frees.
char *cgq_front_param_text (const json_t *v);

// cgq_front_plot writes path: every succeeded trial and the front as a
// staircase over the first two objectives; with hypervolume, below it the
// hypervolume of the front over the trials in the order they finished
// (cgq plot). f must hold all. Returns 0, or -1 with err set.
int cgq_front_plot (const cgq_front_t *f, const cgq_job_rec_t *job, const char *path,
                    bool hypervolume, char *err, size_t errlen);

#endif
