// hist: fixed-bucket latency histograms (no I/O; rendered by metrics.c).
#include "hist.h"

#include <string.h>

static const double s_dispatch_bounds[] = {0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1,
                                           5,     10,    30,   60,   300, 1800};
static const double s_redis_bounds[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                        0.025,  0.05,    0.1,    0.25,  0.5,    1,     2.5};

static void
s_init (hist_t *h, const double *bounds, int n)
{
    memset (h, 0, sizeof *h);
    h->bounds = bounds;
    h->nbounds = n;
}

void
hist_init_dispatch (hist_t *h)
{
    s_init (h, s_dispatch_bounds, (int) (sizeof s_dispatch_bounds / sizeof (double)));
}

void
hist_init_redis (hist_t *h)
{
    s_init (h, s_redis_bounds, (int) (sizeof s_redis_bounds / sizeof (double)));
}

void
hist_observe (hist_t *h, double seconds)
{
    if (!h->bounds || !(seconds >= 0))
        seconds = 0;
    int i = 0;
    while (i < h->nbounds && seconds > h->bounds[i])
        i++;
    if (i < h->nbounds)
        h->counts[i]++;
    h->count++;
    h->sum += seconds;
}
