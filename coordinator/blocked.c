// blocked: device jobs that no device can run (blocked.h).
#include "blocked.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs.h"
#include "log.h"
#include "spec.h"
#include "util.h"

#define S_LIST_MAX 8    // devices named in one reason
#define S_ERROR_MAX 200 // bytes of each device's last error in a reason

char *
blocked_devices_reason (const coord_t *c, const req_t *r)
{
    if (!r->on)
        return NULL;
    cgq_stage_t want = {.on = (json_t *) r->on};
    cgq_buf_t b;
    cgq_buf_init (&b);
    int matching = 0, more = 0;
    for (const node_t *n = c->nodes; n; n = n->next)
        for (int i = 0; i < n->ndevices; i++) {
            const device_t *d = n->devices[i];
            if (!cgq_spec_stage_matches (&want, d->tags))
                continue;
            if (!d->quarantined) { // one that can run it: not this reason
                cgq_buf_fini (&b);
                return NULL;
            }
            if (matching++ >= S_LIST_MAX) {
                more++;
                continue;
            }
            const char *e = d->last_error ? d->last_error : "no error recorded";
            size_t len = strcspn (e, "\n");
            cgq_buf_printf (&b, "%s%s (quarantined: %.*s%s)", matching > 1 ? ", " : "devices ",
                            d->id, (int) (len > S_ERROR_MAX ? S_ERROR_MAX : len), e,
                            len > S_ERROR_MAX ? "..." : "");
        }
    if (!matching) {
        cgq_buf_fini (&b);
        return NULL;
    }
    if (more)
        cgq_buf_printf (&b, " and %d more", more);
    cgq_buf_puts (&b, matching == 1 ? ": the one device that can run it is quarantined"
                                    : ": every device that can run it is quarantined");
    cgq_buf_puts (&b, " (cgq devices enable ID returns one)");
    char *why = cgq_xstrdup (b.data);
    cgq_buf_fini (&b);
    return why;
}

void
blocked_tick (coord_t *c, double now)
{
    for (job_t *j = c->jobs; j; j = j->next) {
        double limit = j->spec->blocked_timeout_s;
        if (j->state != CGQ_JOB_RUNNING || !j->blocked || !(j->blocked_since > 0) || !(limit > 0))
            continue;
        // Only a device stage: a command job waiting for a bigger worker
        // waits as it always has.
        if (j->blocked_stage >= j->nstages || !j->req[j->blocked_stage].on)
            continue;
        if (now - j->blocked_since < limit)
            continue;
        char lim[32];
        cgq_fmt_double (lim, limit);
        char *why = cgq_xasprintf ("blocked for %.0fs, past its blocked_timeout of %ss (0 or "
                                   "never waits forever): %s",
                                   floor (now - j->blocked_since), lim, j->blocked);
        jobs_fail (c, j, why);
        free (why);
    }
}
