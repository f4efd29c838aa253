// api_charts: the job page's charts, aggregated here so that a browser gets
// a few hundred points whatever the job's size (docs/dashboard.md):
//
//   GET /api/jobs/ID/progress     the best-so-far curve: {"job", "metric", "mode", "done",
//                                 "points": [{"n", "t", "trial", "value"}]}: each succeeded
//                                 trial that improved on the best, in finish order (n: its
//                                 place in that order, 1 first; t: finished, Unix s)
//   GET /api/jobs/ID/curves       ?limit=K (1..API_CURVES_MAX, default 5): the learning
//                                 curves of the K best trials from their reports: {"job",
//                                 "metric", "trials": [{"trial", "value", "x", "points":
//                                 [[x, y]]}]}, at most API_CURVE_POINTS points a curve
//                                 (a stream over API_CURVE_READ_ALL: one report per
//                                 slice of its time span, never read whole)
//   GET /api/jobs/ID/importance   {"job", "metric", "method", "trials", "sampled", "params":
//                                 [{"name", "share", "eps2", "bins", "n", "numeric"}]}
//                                 (importance.h), most important first
//   GET /api/jobs/ID/sample       ?limit=N (1..API_MAX_LIMIT, default 200): succeeded trials
//                                 spread evenly over the job's ids: {"job", "suggested",
//                                 "trials": [{"id", "value", "params", "metrics"}]} (the
//                                 Pareto scatter's other points)
#ifndef CGQ_API_CHARTS_H
#define CGQ_API_CHARTS_H

#include <stdbool.h>

#include "api.h"
#include "keyspace.h"

#define API_CURVES_MAX 20
#define API_CURVES_DEFAULT 5
#define API_CURVE_POINTS 200
// A longer report stream is sampled by time, not read whole.
#define API_CURVE_READ_ALL 2000
#define API_PROGRESS_POINTS 1000
// Importance reads at most this many trials, spread evenly over the ids.
#define API_IMPORTANCE_TRIALS 20000

// api_charts_path: whether what (the path after /api/jobs/ID/) names a chart.
bool api_charts_path (const char *what);

// api_job_stamp: what changes whenever an ended job's answers could (its
// suggested count and its counts by state): the key of what api.c and
// api_charts.c keep for an ended job.
uint64_t api_job_stamp (const cgq_job_rec_t *job);
// api_charts answers it for job, as api_handle does (status, *body).
int api_charts (cgq_store_t *store, const cgq_job_rec_t *job, const char *what,
                const api_query_t *q, char **body);

#endif
