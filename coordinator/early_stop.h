// early_stop: the rules that stop unpromising trials from their
// intermediate reports (spec early_stop:). Pure decision logic: it reads no
// socket and writes no Redis; jobs.c feeds it each report of a running trial
// and persists what it says to record, recovery.c gives the records back
// after a restart. One early_stop_t per job.
//
// asha (asynchronous successive halving): rungs at grace * reduction^k for
// every k with a rung below max. The first report of a trial whose attribute
// reaches a rung records the trial's value there; the trial goes on only if
// fewer than max(1, floor(n / reduction)) of the n values recorded at that
// rung so far (itself included) are better than its own, else it stops. A
// report that passes several rungs at once is judged at the highest.
//
// median (median stopping rule): from attribute grace on, a trial whose best
// value so far is worse than the median of the other trials' running
// averages at the same attribute value stops, once at least
// EARLY_STOP_MEDIAN_MIN other trials have reported at that value. Each report
// from grace on records the trial's running average at its attribute value.
//
// asha with several objectives (multi-objective asha; the spec's
// early_stop has no metric and the job has objectives: [...]): the first
// report of a trial at a rung records its vector of objectives there; with
// n vectors recorded at that rung so far (itself included) and keep =
// max(1, floor(n / reduction)), the trial goes on when no recorded vector
// dominates its own (it is in the rung's non-dominated set), or when for
// some objective fewer than keep recorded values are strictly better than
// its own (it is in the top 1/reduction of that objective alone: the
// scalarisations are the m single objectives, the corners of the weight
// simplex); else it stops. So with one objective it is asha; with several,
// the trials kept are a superset of what each objective's asha keeps,
// widened by the rung's Pareto front -- Schmucker et al.,
// "Multi-objective asynchronous successive halving" (arXiv:2106.12639,
// 2021) rank by non-dominated sorting; this rule keeps the whole first
// front instead of a ranked share of it.
//
// Per rule, the state is: the values recorded at each attribute value ("a
// bucket": one per rung for asha, one per step for median), and per running
// trial a few numbers (early_stop_trial_state). A report whose attribute is
// not above the trial's previous one, or that lacks the attribute or the
// value, is ignored.
#ifndef CGQ_EARLY_STOP_H
#define CGQ_EARLY_STOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spec.h"

// The median rule acts only when this many other trials reported at a step.
#define EARLY_STOP_MEDIAN_MIN 3
// At most this many buckets (distinct attribute values) per job; reports at
// new attribute values beyond it are not recorded (an attribute that is a
// time in seconds rather than a step count would make one per report).
#define EARLY_STOP_MAX_BUCKETS 100000

typedef struct early_stop_s early_stop_t;

// What one report decided. When record is set the caller persists value as
// the trial's member in bucket at (and at itself in the bucket index when
// new_bucket), and the trial's early_stop_trial_state.
typedef struct {
    bool record;
    bool new_bucket;
    double at, value;
    size_t nvalues;                           // several objectives: the vector recorded
    double values[CGQ_SPEC_MAX_OBJECTIVES];   // (value is values[0])
    bool stop;
    char why[512]; // when stop: one line for the events stream and the trial
} early_stop_decision_t;

// early_stop_new returns the stopper of spec->early_stop, or NULL when the
// spec has none. The spec is borrowed for the stopper's life (its attribute
// and metric names appear in messages). Free with early_stop_destroy.
early_stop_t *early_stop_new (const cgq_spec_t *spec);
void early_stop_destroy (early_stop_t **self_p);

// early_stop_report applies one report of trial: attr is its attribute's
// value, value the metric's (as reported: the spec's mode says which way is
// better). Fills *d. A NaN attr or value is ignored (d->record and d->stop
// false).
void early_stop_report (early_stop_t *self, uint64_t trial, double attr, double value,
                        early_stop_decision_t *d);

// early_stop_report_multi is early_stop_report for a stopper of several
// objectives (early_stop_nobjectives > 1): all holds each of the job's
// objectives as reported (cgq_spec_objective_values; the spec's modes say
// which way is better), of which the stopper compares those of
// spec->early_stop.obj; d->values gets them (what to persist and restore).
// For a stopper of one objective it is early_stop_report of all[0].
void early_stop_report_multi (early_stop_t *self, uint64_t trial, double attr, const double *all,
                              early_stop_decision_t *d);

// early_stop_nobjectives is the number of values a report is judged on: 1,
// or the job's objectives for multi-objective asha (0 for NULL).
size_t early_stop_nobjectives (const early_stop_t *self);

// early_stop_forget drops trial's per-trial state (it ended); its records
// in the buckets stay, the other trials are judged against them.
void early_stop_forget (early_stop_t *self, uint64_t trial);

// early_stop_restore puts back one persisted record (value of trial in
// bucket at) after a restart, each record once, in any order (ascending
// value per bucket, as ZRANGE gives them, costs O(1) each).
void early_stop_restore (early_stop_t *self, double at, uint64_t trial, double value);
// early_stop_restore_multi puts back one persisted vector record (several
// objectives: the d->values that early_stop_report_multi gave).
void early_stop_restore_multi (early_stop_t *self, double at, uint64_t trial,
                               const double *values);

// early_stop_trial_state writes trial's state as a small JSON object into
// buf (n bytes, 160 are enough) for the trial's hash; "" when there is none.
// early_stop_trial_resume reads it back for a running trial after a restart
// (ignored when malformed). Returns 0, -1 if json is not such a state.
void early_stop_trial_state (const early_stop_t *self, uint64_t trial, char *buf, size_t n);
int early_stop_trial_resume (early_stop_t *self, uint64_t trial, const char *json);

// early_stop_buckets is how many buckets hold records, and
// early_stop_bucket_size how many records bucket at holds (0 if none).
size_t early_stop_buckets (const early_stop_t *self);
size_t early_stop_bucket_size (const early_stop_t *self, double at);

#endif
