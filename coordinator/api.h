// api: the dashboard's read-only JSON API (docs/operations.md, "The
// dashboard"), answered from Redis by the HTTP server's threads (http.h),
// never from the coordinator's memory. Paging, sorting and filtering happen
// here, so a browser never receives a whole 100,000-trial job.
//
//   GET /api/jobs                    newest first: {"total", "offset", "limit", "jobs": [JOB]}
//   GET /api/jobs/ID                 JOB with "spec" (the YAML), "spec_path", "searcher"
//   GET /api/jobs/ID/trials          {"job", "total", "offset", "limit", "sort", "order",
//                                     "state", "trials": [TRIAL]}
//       ?offset=N&limit=N (at most API_MAX_LIMIT) &state=NAME
//       &sort=rank|id|value|state|started|finished|duration|attempts|node|params.X|metrics.X
//       &order=asc|desc (rank asc: best first, as `cgq results`)
//   GET /api/jobs/ID/trials/T        TRIAL with "value", "duration", "log", "trial_dir",
//                                     "gpus", "last_report" and "reports" (the report stream)
//   GET /api/jobs/ID/front           {"job", "front": [{"trial", "values": {metric: v}}]}: a
//                                    job with several objectives: its Pareto front, by id
//   GET /api/jobs/ID/failures        {"job", "groups": [{"error", "count", "trials"}]}: failed
//                                    trials by their error's first line, most first, 10 ids each
//   GET /api/jobs/ID/progress, curves, importance, sample: the charts (api_charts.h)
//   GET /api/events?job=ID           server-sent events (sse.h; http.c routes it there)
//   GET /api/nodes                   {"nodes": [NODE]}
//   GET /api/devices                 {"devices": [DEVICE]} (device runners' devices: state,
//                                     node, tags, task, failures, quarantined, last_error)
//
// TRIAL carries the fields of `cgq results --format json`'s trials, under
// the same names, plus "value" and "duration"; JOB: "job", "name", "state",
// "objective" as there, and "counts", "total", "suggested", "best",
// "created", "finished", "duration", "error", "blocked".
#ifndef CGQ_API_H
#define CGQ_API_H

#include "store.h"

#define API_MAX_LIMIT 500
#define API_DEFAULT_LIMIT 50

// The query arguments the API reads (NULL: not given); others are ignored.
typedef struct {
    const char *offset, *limit, *sort, *order, *state;
} api_query_t;

// api_handle answers GET path (which starts with "/api/"). Returns the HTTP
// status and sets *body to the JSON document (an error: {"error": "..."});
// the caller frees it.
int api_handle (cgq_store_t *store, const char *path, const api_query_t *q, char **body);

#endif
