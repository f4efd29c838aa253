// jobs_nodes: what happens to a job's trials when their node does: lost
// (handed back), or found again after a coordinator restart (adopted,
// re-adopted, or an Assign it never got requeued). Part of the job and
// trial state machine of jobs.c, split off by size; jobs_impl.h names what
// the two share.
#include "jobs.h"
#include "jobs_impl.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "log.h"
#include "nodes.h"

// s_requeue puts a running trial back in its job's queue, its last
// attempt's fate in its error field.
static void
s_requeue (coord_t *c, trial_t *t, const char *err)
{
    const char *kv[] = {CGQ_TF_ERROR, err};
    jobs_set_state (c, t, CGQ_TRIAL_PENDING, kv, 2);
    jobs_enqueue (t->job, t, true);
    c->sched_dirty = true;
}

typedef struct {
    const char *node;
    uint64_t instance, epoch, seq;
} s_hello_view_t;

void
jobs_lost (coord_t *c, trial_t *t, const char *why)
{
    job_t *j = t->job;
    if (t->state == CGQ_TRIAL_CANCELLED || t->state == CGQ_TRIAL_STOPPED) {
        jobs_trial_end (c, t);
        return;
    }
    if (t->state != CGQ_TRIAL_RUNNING)
        return;
    t->losses++;
    bool known = false;
    for (uint32_t i = 0; i < t->nlost_on; i++)
        known |= t->lost_on[i] == t->node_hash;
    if (!known && t->nlost_on < JOBS_MAX_LOSSES)
        t->lost_on[t->nlost_on++] = t->node_hash;
    char err[256];
    jobs_trial_event (c, j, "trial.lost", (int64_t)t->id, NULL, t->attempt, why);
    if (t->nlost_on >= JOBS_MAX_LOSSES || t->losses >= 2 * JOBS_MAX_LOSSES) {
        snprintf (err, sizeof err, "lost %u times in a row, on %u node(s), running it (last: %s)",
                  t->losses, t->nlost_on, why);
        jobs_failed (c, t, err, false);
        return;
    }
    snprintf (err, sizeof err, "attempt %u lost: %s", t->attempt, why);
    jobs_resume_judge (c, t, CGQ_RESUME_LOST);
    s_requeue (c, t, err);
    if (j->paused) // it waits for cgq resume with the others, from its last checkpoint
        jobs_pause_trial (c, t);
}

// s_undelivered: a recovered running trial whose node's process never got
// its Assign (the node's Hello says the last Assign it saw is older: the
// coordinator died between saving the batch and sending it). Nothing of it
// ran: queued again without counting a loss.
static void
s_undelivered (coord_t *c, trial_t *t, void *arg)
{
    const s_hello_view_t *v = arg;
    if (t->state != CGQ_TRIAL_RUNNING || t->node || !t->adopt_deadline_ms || !t->expect_node ||
        strcmp (t->expect_node, v->node) != 0 || !v->instance || !t->sent_instance ||
        v->instance != t->sent_instance || !t->sent_epoch ||
        (v->epoch > t->sent_epoch || (v->epoch == t->sent_epoch && v->seq >= t->sent_seq)))
        return;
    t->adopt_deadline_ms = 0;
    char why[300];
    snprintf (why, sizeof why,
              "attempt %u never reached node %s (its Hello saw Assigns up to %" PRIu64 ":%" PRIu64
              ", this one was %" PRIu64 ":%" PRIu64 "); run again",
              t->attempt, v->node, v->epoch, v->seq, t->sent_epoch, t->sent_seq);
    cgq_tinfo (t->job->id, t->id, t->attempt, "%s", why);
    jobs_trial_event (c, t->job, "trial.requeued", (int64_t)t->id, v->node, t->attempt, why);
    s_requeue (c, t, why);
}

void
jobs_requeue_undelivered (coord_t *c, const char *node, uint64_t instance, uint64_t epoch,
                          uint64_t seq)
{
    if (!c->adopt_deadline_ms)
        return; // no recovered trial awaits its node
    s_hello_view_t v = {.node = node, .instance = instance, .epoch = epoch, .seq = seq};
    for (job_t *j = c->jobs; j; j = j->next)
        jobs_each_trial (j, s_undelivered, c, &v);
}

// s_readopt_older: the node we gave up on still runs an older attempt of a
// trial that runs again elsewhere. First come, first served: the older one
// is further along, so it is adopted back and the newer one withdrawn (as a
// late success would withdraw it; see jobs_late_success).
static bool
s_readopt_older (coord_t *c, node_t *n, trial_t *t, uint32_t attempt)
{
    char detail[160];
    snprintf (detail, sizeof detail, "node %s came back still running attempt %u; attempt %u %s",
              n->id, attempt, t->attempt, t->node ? "is stopped" : "is dropped");
    if (t->node) {
        jobs_stop_on_node (c, t, "an earlier attempt is still running");
        nodes_release (c, t);
    }
    t->attempt = attempt;
    nodes_attach (n, t);
    if (nodes_grant (n, t) < 0)
        cgq_twarn (t->job->id, t->id, attempt, "re-adopted task exceeds node %s's free resources",
                   n->id);
    char abuf[16];
    snprintf (abuf, sizeof abuf, "%u", attempt);
    const char *kv[] = {CGQ_TF_NODE, n->id, CGQ_TF_ATTEMPT, abuf};
    jobs_set_state (c, t, CGQ_TRIAL_RUNNING, kv, 4);
    cgq_tinfo (t->job->id, t->id, attempt, "%s", detail);
    jobs_trial_event (c, t->job, "trial.adopted", (int64_t)t->id, n->id, attempt, detail);
    jobs_pause_adopted (c, t);
    return true;
}

bool
jobs_readopt (coord_t *c, node_t *n, trial_t *t, uint32_t attempt)
{
    // While the trial waits in the queue with the same attempt, that task is
    // still its current attempt. Stopping it instead would re-run the trial,
    // and the stopped attempt's result would come back as its failure.
    if (t && t->state == CGQ_TRIAL_RUNNING && t->losses && attempt < t->attempt && t->node != n &&
        attempt > t->stage_base)
        return s_readopt_older (c, n, t, attempt);
    if (!t || t->state != CGQ_TRIAL_PENDING || !t->queued || !t->losses || t->node ||
        t->attempt != attempt)
        return false;
    jobs_unqueue (t->job, t);
    nodes_attach (n, t);
    // Its GPU grant is still the positions it had on this node (same worker,
    // same GPU list); nodes_grant re-checks them.
    if (nodes_grant (n, t) < 0)
        cgq_twarn (t->job->id, t->id, attempt, "re-adopted task exceeds node %s's free resources",
                   n->id);
    const char *kv[] = {CGQ_TF_NODE, n->id};
    jobs_set_state (c, t, CGQ_TRIAL_RUNNING, kv, 2);
    cgq_tinfo (t->job->id, t->id, attempt,
               "node %s still runs this attempt, which was lost; "
               "adopted it back",
               n->id);
    jobs_trial_event (c, t->job, "trial.adopted", (int64_t)t->id, n->id, attempt, NULL);
    jobs_pause_adopted (c, t);
    return true;
}

bool
jobs_adopt (coord_t *c, node_t *n, trial_t *t, uint32_t attempt)
{
    if (!t || t->state != CGQ_TRIAL_RUNNING || t->node || t->attempt != attempt)
        return false;
    // Adoption: it keeps running there, counted once.
    nodes_attach (n, t);
    nodes_gpus_from_indices (n, t); // recovery kept the GPU indices it was given
    if (nodes_grant (n, t) < 0)
        cgq_twarn (t->job->id, t->id, attempt, "adopted task exceeds node %s's free resources",
                   n->id);
    free (t->expect_node);
    t->expect_node = NULL;
    t->adopt_deadline_ms = 0;
    cgq_tinfo (t->job->id, t->id, attempt, "adopted: running on %s", n->id);
    jobs_trial_event (c, t->job, "trial.adopted", (int64_t)t->id, n->id, attempt, NULL);
    jobs_set_stale (c, t, false, "its node reported it after the coordinator restarted");
    jobs_pause_adopted (c, t);
    return true;
}

static void
s_adopt_expired (coord_t *c, trial_t *t, void *arg)
{
    int64_t now = *(int64_t *)arg;
    // Only trials still awaiting adoption: one whose result came meanwhile
    // may be queued again.
    if (!t->adopt_deadline_ms || t->state != CGQ_TRIAL_RUNNING || t->node ||
        now < c->adopt_deadline_ms)
        return;
    t->adopt_deadline_ms = 0;
    char why[300];
    snprintf (why, sizeof why, "node %s did not report it after the coordinator restarted",
              t->expect_node ? t->expect_node : "?");
    jobs_lost (c, t, why);
}

void
jobs_adopt_check (coord_t *c, int64_t now)
{
    if (!c->adopt_deadline_ms || now < c->adopt_deadline_ms)
        return;
    // One deadline for all recovered trials (c->adopt_deadline_ms, which a
    // stall of the coordinator pushes back).
    for (job_t *j = c->jobs; j; j = j->next)
        jobs_each_trial (j, s_adopt_expired, c, &now);
    c->adopt_deadline_ms = 0;
}
