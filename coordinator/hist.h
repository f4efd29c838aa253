// hist: the coordinator's latency histograms, kept in coord_t and observed
// where the thing happens (jobs.c: pending until the Assign; loop.c: one
// Redis batch). Plain counting, no I/O: metrics.c renders them at a scrape.
#ifndef CGQ_HIST_H
#define CGQ_HIST_H

#include <stdint.h>

// A Prometheus histogram over fixed upper bounds (seconds), cumulative when
// rendered. bounds points at a static array of nbounds increasing values.
#define HIST_MAX_BUCKETS 20
typedef struct {
    const double *bounds;
    int nbounds;
    uint64_t counts[HIST_MAX_BUCKETS]; // per bucket, not cumulative
    uint64_t count;
    double sum;
} hist_t;

// The bucket sets: dispatch latency (a trial pending until its Assign) and
// one Redis batch's round trip.
void hist_init_dispatch (hist_t *h);
void hist_init_redis (hist_t *h);
// hist_observe counts one value; a negative or NaN one counts as 0.
void hist_observe (hist_t *h, double seconds);

#endif
