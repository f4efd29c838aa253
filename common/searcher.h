// searcher: what proposes the params of the next trial. One interface for every
// algorithm (spec search.algorithm):
//   grid, random  walk the lazy space (space.h) in index order; state: the next index.
//   list          the points of search.points in order; state: the next index.
//   evolution     regularized (aging) evolution, steady state (search_evolution.c).
//   nsga2         multi-objective NSGA-II, steady state (search_nsga2.c).
//   tpe           tree-structured Parzen estimator, as Optuna's TPE (search_tpe.c).
//   cmaes         CMA-ES with IPOP restarts, steady state (search_cmaes.c).
//   bayes         Gaussian process + expected improvement (search_bayes.c).
//   pbt           Population Based Training: a population that copies its best
//                 members' checkpoints and perturbs their params (search_pbt.c).
//   external      the params a process outside the coordinator sends, in the
//                 order received (search_external.c; cgq_searcher_give).
//
// Persisting: cgq_searcher_save returns a small JSON state that the
// coordinator writes to the job hash (field "searcher") every turn. It never
// grows with the number of trials: next id, and for evolution / nsga2 the ids
// of the population (O(population)), for bayes the model's hyper-parameters
// (O(dimensions)), for tpe nothing more. What the searcher learnt from each
// trial is rebuilt after a restart from the trials themselves
// (cgq_searcher_replay), which the coordinator keeps in Redis anyway.
//
// Determinism: every random draw of suggestion i comes from a stream keyed by
// (seed, i), so the same seed and the same observations give the same
// suggestions, and nothing random needs saving.
#ifndef CGQ_SEARCHER_H
#define CGQ_SEARCHER_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "spec.h"

typedef struct cgq_searcher_t cgq_searcher_t;

// How a trial suggested before a restart stands now (cgq_searcher_replay).
typedef enum {
    CGQ_REPLAY_ACTIVE,    // pending or running: cgq_searcher_observe will report it later
    CGQ_REPLAY_SUCCEEDED, // observed with ok = true (metrics and value as observe got them)
    CGQ_REPLAY_FAILED,    // observed with ok = false (failed, cancelled, no result)
} cgq_replay_t;

// cgq_searcher_new creates the searcher of spec->search.algorithm. state is
// what cgq_searcher_save returned before a restart, or NULL for a new job. The
// searcher borrows spec, which must outlive it. Returns NULL with err set if
// state does not fit the spec, or the spec does not fit the algorithm (bayes
// maps the params to at most 64 dimensions).
//
// Recovery: after cgq_searcher_new (spec, saved) of a searcher for which
// cgq_searcher_needs_history is true, call cgq_searcher_replay once for every
// trial id below cgq_searcher_suggested (any order; trial id order is
// natural), then suggest and observe as before: the search continues exactly
// where it was, as if there had been no restart.
cgq_searcher_t *cgq_searcher_new (const cgq_spec_t *spec, const json_t *state, char *err,
                                  size_t errlen);
void cgq_searcher_destroy (cgq_searcher_t **self_p);

// cgq_searcher_suggest returns the params of the next trial (caller decrefs)
// and its id in *trial (ids are 0, 1, 2, ... in suggestion order). Returns NULL
// when it has nothing to suggest now: either done(), or it waits for results
// of trials in flight (evolution and nsga2 breed from results; ask again after
// the next observe).
json_t *cgq_searcher_suggest (cgq_searcher_t *self, uint64_t *trial);

// cgq_searcher_observe tells the searcher how trial ended. metrics is the
// result object (borrowed; may be NULL when the trial failed); value is the
// single objective (cgq_spec_objective_value; NAN if none or failed). nsga2
// computes its objectives from metrics (cgq_spec_objective_values). Each
// trial is observed once. With constraints (spec->constraints), a searcher
// that learns judges feasibility from metrics itself (cgq_spec_feasible), so
// replay, which passes the same metrics, judges the same.
void cgq_searcher_observe (cgq_searcher_t *self, uint64_t trial, const json_t *metrics,
                           double value, bool ok);

// cgq_searcher_rung tells the searcher a trial's value at a rung of
// hyperband (early_stop hyperband): metrics is the report (borrowed) that
// reached the rung's budget (value of the time attribute). bohb keeps it as
// an observation at that budget (a promoted trial's lower rungs count, as
// in BOHB), in its saved state; the others ignore it. Returns true when the
// searcher's state changed (save it).
bool cgq_searcher_rung (cgq_searcher_t *self, uint64_t trial, double budget, const json_t *metrics);

// cgq_searcher_needs_history is true when a searcher created from a saved
// state must be given every earlier trial with cgq_searcher_replay (evolution,
// nsga2, bayes, tpe, cmaes); false for grid, random and list, whose state is complete.
bool cgq_searcher_needs_history (const cgq_searcher_t *self);

// cgq_searcher_replay restores trial (< cgq_searcher_suggested) after a
// restart: its params (borrowed; as suggested), and for a finished trial the
// metrics, value and ok that cgq_searcher_observe got (SUCCEEDED or FAILED).
// Returns 0, or -1 with err set when params do not belong to the spec's space
// (the job's state is corrupt: fail the job). A no-op for searchers that need
// no history.
int cgq_searcher_replay (cgq_searcher_t *self, uint64_t trial, const json_t *params,
                         const json_t *metrics, double value, cgq_replay_t outcome, char *err,
                         size_t errlen);

// cgq_searcher_warm gives the searcher one warm-start observation (spec
// search.warm_start): the params of a point run elsewhere (borrowed; params
// not in the space are ignored, params of the space it lacks are left out
// of the model for it) and the metrics it reached (the objectives, and the
// constraints' metrics). Call it for every observation, in the same order,
// after cgq_searcher_new and before any replay or suggestion, at submit and
// after every restart: the observations are not part of the saved state.
// Returns 0, or -1 with err set when the algorithm takes none (only tpe and
// bayes take them; bayes needs every param of the space), a value lies
// outside its param's domain, or the metrics lack an objective.
int cgq_searcher_warm (cgq_searcher_t *self, const json_t *params, const json_t *metrics,
                       char *err, size_t errlen);

// cgq_searcher_warm_json feeds every observation of json, a JSON array of
// {"params": {...}, "metrics": {...}, "from": "..."} (SubmitJob.warm_json),
// to cgq_searcher_warm in order. At most CGQ_SEARCH_MAX_WARM of them.
// Returns 0, or -1 with err set ("warm_start point N (FROM): why").
#define CGQ_SEARCH_MAX_WARM 100000
int cgq_searcher_warm_json (cgq_searcher_t *self, const char *json, char *err, size_t errlen);

// cgq_searcher_done is true when no trial will ever be suggested again.
bool cgq_searcher_done (const cgq_searcher_t *self);

// Number of trials suggested so far (the next id).
uint64_t cgq_searcher_suggested (const cgq_searcher_t *self);

// Total number of trials the search will suggest, or 0 if not known up front.
uint64_t cgq_searcher_total (const cgq_searcher_t *self);

// cgq_searcher_recount sets the total again from the spec the searcher
// borrows, after its owner changed spec->search.samples (cgq update). Returns
// 0, or -1 (total unchanged) when the count overflows or is below the trials
// already suggested.
int cgq_searcher_recount (cgq_searcher_t *self);

// cgq_searcher_nobjectives is the length of the objective vectors the job
// ranks by (spec->nobjectives): 0 none, 1 a leaderboard, 2..8 a Pareto front
// (compute the front with cgq_pareto_front over the trials' objective vectors,
// cgq_spec_objective_values and cgq_spec_objective_senses).
size_t cgq_searcher_nobjectives (const cgq_searcher_t *self);

// cgq_searcher_save returns the state to persist (caller decrefs). Its size
// does not grow with the number of trials (see above).
json_t *cgq_searcher_save (const cgq_searcher_t *self);

// --- algorithm external: params sent from outside ------------------------------
// A searcher of algorithm external suggests the points a process outside the
// coordinator sends (the Suggest request, docs/protocol.md), in the order
// they arrived: trial i gets the i-th. cgq_searcher_suggest returns NULL
// while none waits (the job waits; after cgq_searcher_give, dispatch again).
// It is done once search.samples points have been suggested. Its saved state
// is the next id only: the caller keeps the points in Redis
// (cgq:job:{J}:suggestions) and gives back those from index
// cgq_searcher_suggested on after a restart.

// The most points that may wait, and the longest params JSON of one point:
// what the coordinator bounds a Suggest with.
#define CGQ_SEARCH_EXTERNAL_MAX_WAITING 10000
#define CGQ_SEARCH_EXTERNAL_MAX_POINT 65536

// cgq_searcher_external is true for a searcher of algorithm external.
bool cgq_searcher_external (const cgq_searcher_t *self);

// cgq_searcher_point checks params (borrowed) sent for an external searcher
// against the space: a JSON object that sets every param that is not a
// constant, and nothing else (a constant may be given with its own value),
// each value in its param's domain (a quantized one a multiple of its step;
// an assignment {"id": N}). Returns the point as the trial will get it, every
// param in the order written, constants included (caller decrefs), or NULL
// with err naming the param and what it allows, e.g. "param lr = 5 does not
// belong to the space of the spec (allowed: loguniform [0.0001, 0.1])"; also
// NULL when self is not external.
json_t *cgq_searcher_point (const cgq_searcher_t *self, const json_t *params, char *err,
                            size_t errlen);

// cgq_searcher_give appends point (from cgq_searcher_point; takes the
// reference) to the points that wait. Returns 0, or -1 when self is not
// external (point released).
int cgq_searcher_give (cgq_searcher_t *self, json_t *point);

// cgq_searcher_waiting is the number of points given and not suggested yet
// (0 for a searcher that is not external).
uint64_t cgq_searcher_waiting (const cgq_searcher_t *self);

// --- algorithm pbt: Population Based Training -------------------------------------
// The coordinator tells a pbt searcher every report's score
// (cgq_searcher_pbt_report) and every recorded checkpoint
// (cgq_searcher_pbt_checkpoint), which may decide an exploit: the trial
// ends (the coordinator stops it, event trial.exploited) and a child waits
// to be suggested, with the donor's params perturbed; when it is suggested,
// cgq_searcher_pbt_child gives its lineage and the donor's checkpoint record
// its first Assign resumes from. See search_pbt.c.

typedef struct {
    bool exploit;      // the trial is exploited: stop it
    uint64_t donor;    // whose checkpoint and params the child continues
    uint64_t child;    // the id the child will get
    double step;       // time_attr of the trial's checkpoint
    const json_t *lineage; // the child's lineage (borrowed until the next call)
    char why[256];     // the decision in words
} cgq_pbt_decision_t;

// cgq_searcher_pbt is true for a searcher of algorithm pbt.
bool cgq_searcher_pbt (const cgq_searcher_t *self);

// cgq_searcher_pbt_report: trial reported score (search.pbt.metric) at
// time_attr t. A no-op for other searchers and unknown trials.
void cgq_searcher_pbt_report (cgq_searcher_t *self, uint64_t trial, double t, double score);

// cgq_searcher_pbt_score: trial's latest score and its time_attr (NAN both
// when it has none, or is not a member).
void cgq_searcher_pbt_score (const cgq_searcher_t *self, uint64_t trial, double *t,
                             double *score);

// cgq_searcher_pbt_checkpoint: trial's checkpoint record (as the trial hash
// keeps it, borrowed) was recorded. Returns 1 with d->exploit set when the
// trial is exploited, else 0 (d->why may say why not).
int cgq_searcher_pbt_checkpoint (cgq_searcher_t *self, uint64_t trial, const json_t *record,
                                 cgq_pbt_decision_t *d);

// cgq_searcher_pbt_child: trial's lineage if it is a child (borrowed; NULL:
// of the first population), and in *record, while it has no checkpoint of
// its own, the donor's record it resumes from (borrowed, with "donor" set).
json_t *cgq_searcher_pbt_child (cgq_searcher_t *self, uint64_t trial, json_t **record);

// cgq_searcher_pbt_pins writes into names (at most max) the names (ckpt-A-N)
// of donor's checkpoints that children still need (waiting, or started
// without a checkpoint of their own): its worker must keep them.
size_t cgq_searcher_pbt_pins (const cgq_searcher_t *self, uint64_t donor, char names[][64],
                              size_t max);

// cgq_searcher_footprint is an estimate of the bytes the searcher holds in
// memory (for benchmarks and monitoring).
size_t cgq_searcher_footprint (const cgq_searcher_t *self);

#endif
