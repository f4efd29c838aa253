// hyperband: Hyperband's brackets of successive halving (Li et al., 2018)
// as pure decisions, no I/O: which bracket a new trial joins, the budget
// (value of the time attribute) at which it is paused, and, once a rung's
// cohort is complete, which trials are promoted (resumed from their
// checkpoint to the next rung) and which are stopped, with why.
//
// Arithmetic (eta = reduction_factor, R = max_t): s_max = floor(log_eta R);
// bracket s (s_max down to s_max - brackets + 1, in turn) takes
// n0 = ceil((s_max + 1) / (s + 1) * eta^s) trials, its rung i (0..s) has the
// budget R * eta^(i - s), so its last rung's is R. A trial of rung i < s is
// paused at its first report at or past its rung's budget, its value there
// recorded. A rung's cohort is complete when its bracket has all its trials
// (or hyperband_search_done said no more come) and every member either
// reached the budget or ended (failed, lost for good, cancelled); then the
// best max(1, floor(members / eta)) of those that reached it are promoted,
// the others stopped. A trial of its bracket's last rung runs to its end.
//
// jobs.c feeds it (docs/architecture.md, "Hyperband"): it pauses a trial
// that reached its budget at its next checkpoint (jobs_pause_trial), and
// applies the verdicts once per turn (resumes, early stops).
#ifndef CGQ_HYPERBAND_H
#define CGQ_HYPERBAND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct hyperband_s hyperband_t;

// What hyperband_decide says of one trial whose rung's cohort completed.
typedef struct {
    uint64_t trial;
    bool promote;  // true: resume it to the next rung; false: stop it
    double budget; // when promoted: its new rung's budget
    double value;  // its value at the rung just decided
    double at;     // that rung's budget
    char why[256]; // one line: the rung, its value and the cut-off
} hyperband_verdict_t;

// hyperband_new: max_t > 1, eta >= 2, brackets 0 (all: s_max + 1) or
// 1..s_max + 1, mode +1 (higher is better) or -1. NULL for values out of
// range (the spec's check refuses them first). Free with hyperband_destroy.
hyperband_t *hyperband_new (double max_t, double eta, uint32_t brackets, int mode);
void hyperband_destroy (hyperband_t **self_p);

// hyperband_s_max is floor(log_eta max_t): the brackets are s_max + 1 at most.
uint32_t hyperband_s_max (const hyperband_t *self);

// hyperband_add puts a new trial into the bracket being filled (a new one
// when that is full). Returns the bracket's number (0, 1, ...).
uint32_t hyperband_add (hyperband_t *self, uint64_t trial);

// hyperband_budget is the value of the time attribute at which trial is
// paused (its rung's budget); max_t for a trial of its bracket's last rung
// (it runs to its end); NAN for a trial it does not know or has stopped.
double hyperband_budget (const hyperband_t *self, uint64_t trial);

// hyperband_report applies one report of a running trial (attr: its time
// attribute, value: the metric). Returns true when the trial just reached
// its rung's budget below the last rung: its value is recorded and the
// caller pauses it (at its checkpoint). NaNs and unknown trials: false.
bool hyperband_report (hyperband_t *self, uint64_t trial, double attr, double value);

// hyperband_reached: trial reached its rung's budget and waits for its
// cohort's verdict (after a restart: a running one is to pause still).
bool hyperband_reached (const hyperband_t *self, uint64_t trial);

// hyperband_ended: trial ended without reaching its budget (failed,
// cancelled, or succeeded early): it leaves its rung's cohort unranked.
void hyperband_ended (hyperband_t *self, uint64_t trial);

// hyperband_search_done: no more trials come; partly filled brackets
// complete with the trials they have.
void hyperband_search_done (hyperband_t *self);

// hyperband_decide returns the verdicts of every cohort complete now, each
// trial once (*out: caller frees; NULL when none), promoted ones first in
// rank order.
size_t hyperband_decide (hyperband_t *self, hyperband_verdict_t **out);

// hyperband_dump writes the whole state as one JSON text (caller frees),
// for the job hash; hyperband_load reads it back into a new hyperband_t of
// the same parameters after a restart. Returns NULL when json is not such a
// state.
char *hyperband_dump (const hyperband_t *self);
hyperband_t *hyperband_load (double max_t, double eta, uint32_t brackets, int mode,
                             const char *json);

#endif
