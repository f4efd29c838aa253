// passes: `cgq results JOB --passes`, the pass-to-pass agreement of a
// measurement job whose trials were measured twice (measure: {passes: 2}):
// the ceiling any latency predictor trained on its numbers can reach.
#include "show.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "json.h"
#include "util.h"

static double
s_num (const json_t *m, const char *k)
{
    json_t *v = json_object_get (m, k);
    return v && json_is_number (v) ? json_number_value (v) : NAN;
}

int
cgq_show_passes (FILE *f, const char *format, const cgq_job_rec_t *job, cgq_trial_rec_t **trials,
                 size_t n)
{
    double *a = cgq_xcalloc (n ? n : 1, sizeof *a), *b = cgq_xcalloc (n ? n : 1, sizeof *b);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const cgq_trial_rec_t *t = trials[i];
        if (strcmp (t->state, "succeeded") || !t->metrics)
            continue;
        double x = s_num (t->metrics, "time_pass1"), y = s_num (t->metrics, "time_pass2");
        if (isfinite (x) && isfinite (y)) {
            a[m] = x;
            b[m] = y;
            m++;
        }
    }
    cgq_agree_t g = cgq_agree (a, b, m);
    free (a);
    free (b);
    if (!strcmp (format, "json")) {
        json_t *o = json_pack (
            "{s:I, s:I, s:o, s:o, s:o}", "job", (json_int_t)job->id, "n", (json_int_t)g.n, "acc10",
            isfinite (g.acc10) ? json_real (g.acc10) : json_null (), "median_abs_diff",
            isfinite (g.median_abs) ? json_real (g.median_abs) : json_null (), "srcc",
            isfinite (g.srcc) ? json_real (g.srcc) : json_null ());
        char *s = cgq_json_dumps (o);
        fprintf (f, "%s\n", s);
        free (s);
        json_decref (o);
        return 0;
    }
    if (!g.n) {
        fprintf (f,
                 "job %" PRIu64 " has no succeeded trial measured in two passes (give its "
                 "device trial measure: {passes: 2})\n",
                 job->id);
        return 0;
    }
    size_t within = (size_t)llround (g.acc10 * (double)g.n);
    fprintf (f, "job %" PRIu64 ": %zu trial(s) measured in two passes (metric time, ms)\n", job->id,
             g.n);
    fprintf (f, "acc10          %.3f  (%zu of %zu within ±10 %% of pass 1)\n", g.acc10, within,
             g.n);
    fprintf (f, "median |diff|  %.2f %%\n", 100 * g.median_abs);
    if (isfinite (g.srcc))
        fprintf (f, "srcc           %.4f  (Spearman, pass 1 against pass 2)\n", g.srcc);
    else
        fprintf (f, "srcc           -  (needs 2 trials and passes that are not constant)\n");
    fprintf (f, "(the ceiling of any latency predictor trained on this job's numbers)\n");
    return 0;
}
