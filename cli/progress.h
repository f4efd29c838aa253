// progress: follow a job until it ends, drawing its progress on stderr (one
// redrawn line on a terminal, a line per change at most every 2 s otherwise).
#ifndef CGQ_PROGRESS_H
#define CGQ_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

#include "store.h"
#include "view.h"

#define CGQ_PROGRESS_POLL_MS 200

// Returned by cgq_progress_follow when cgq_cli_signal was set.
#define CGQ_PROGRESS_SIGNAL (-2)

// A hook called after every poll with the fresh snapshot (NULL when the poll
// failed): 0 to go on, a value > 0 to stop following (cgq_progress_follow
// returns it).
typedef int (*cgq_progress_check_fn) (void *arg, const cgq_job_rec_t *job);

// cgq_progress_follow polls job every CGQ_PROGRESS_POLL_MS until its state is
// finished or cancelled. While trials are unschedulable and show_waits, it
// prints the reason (once per change) and how to stop waiting. It
// returns 0 when the job ended, with *final (if not NULL) set to the
// last snapshot (caller destroys); CGQ_PROGRESS_SIGNAL on a signal; -1 when
// Redis stayed unreachable for 5 s or the job vanished (the error is printed);
// or the value a check returned. check may be NULL.
int cgq_progress_follow (cgq_store_t *store, uint64_t job, bool show_waits,
                         cgq_progress_check_fn check, void *arg,
                         cgq_job_rec_t **final);

// cgq_progress_line formats the one-line summary of a job into buf:
// "[#####.....]  12/24  running 2  failed 0  best val=0.93 (trial 7)  0:12  ETA 0:30".
// width bounds the text (0: no bound): the least useful pieces (the bar, the
// ETA, the clock, best) are left out whole, never cut mid-word. Returns buf.
char *cgq_progress_line (char *buf, size_t n, const cgq_job_rec_t *job, double elapsed_s,
                         int width);

// cgq_progress_eta estimates the seconds left from the pace so far (done
// trials over elapsed_s); -1 when it cannot be told (unbounded, nothing done,
// ended).
double cgq_progress_eta (const cgq_job_rec_t *job, double elapsed_s);

#endif
