// pareto: multi-objective helpers for NSGA-II and for the Pareto front of a
// job with several objectives (time and memory, accuracy and latency). They
// work on plain arrays and own nothing: points is n rows of m objectives,
// row-major (point i is points[i*m .. i*m+m)).
//
// Each function takes sense, m ints saying which way objective j is better:
// +1 larger is better (mode: max), -1 smaller is better (mode: min); NULL means
// every objective is minimised. So callers pass the metrics as reported and
// nobody negates values by hand.
//
// A NaN objective is worse than any number (a trial that reported nothing
// never makes the front) and equal to another NaN. Equal points do not
// dominate each other, so duplicates share a rank.
#ifndef CGQ_PARETO_H
#define CGQ_PARETO_H

#include <stdbool.h>
#include <stddef.h>

// cgq_pareto_compare returns 1 if a dominates b (no worse in every objective,
// better in at least one), -1 if b dominates a, and 0 if neither does.
int cgq_pareto_compare (const double *a, const double *b, int m, const int *sense);

// cgq_pareto_dominates is cgq_pareto_compare (a, b, ...) == 1.
bool cgq_pareto_dominates (const double *a, const double *b, int m, const int *sense);

// cgq_pareto_sort is NSGA-II's fast non-dominated sort: ranks[i] is 0 for the
// points no other point dominates, 1 for those only rank-0 points dominate,
// and so on. O(m n^2) time, O(n) memory. Returns the number of fronts (0 for
// n = 0).
int cgq_pareto_sort (const double *points, int n, int m, const int *sense, int *ranks);

// cgq_pareto_sort_constrained is cgq_pareto_sort under Deb's constrained
// domination, for specs with constraints: viol[i] is point i's total
// violation (0 or less: feasible; NaN counts as INFINITY). A feasible point
// dominates every infeasible one, two feasible ones compare by Pareto
// dominance, two infeasible ones by violation (the smaller dominates; equal
// ones share a rank). So the feasible points take ranks 0.. as
// cgq_pareto_sort gives them, and the infeasible ones the ranks after,
// one per distinct violation, smallest first. viol NULL: cgq_pareto_sort.
int cgq_pareto_sort_constrained (const double *points, const double *viol, int n, int m,
                                 const int *sense, int *ranks);

// cgq_pareto_crowding computes NSGA-II's crowding distance of the k points
// idx[0..k) (one front) into dist[0..k): per objective, the gap between a
// point's neighbours divided by the front's range, summed. The extreme points
// of each objective get INFINITY, as do all points when k <= 2; an objective
// on which the whole front is equal adds nothing. Ties are ordered by index,
// so the result does not depend on the order of idx. Sense does not matter.
void cgq_pareto_crowding (const double *points, int m, const int *idx, int k, double *dist);

// cgq_pareto_front writes to out (room for n) the indices, ascending, of the
// points no other point dominates, and returns how many. O(m n^2).
int cgq_pareto_front (const double *points, int n, int m, const int *sense, int *out);

// Bounds on cgq_pareto_hypervolume for m >= 3, whose exact slicing algorithm
// costs about f^(m-1) steps for f points on the front: at most
// CGQ_PARETO_HV_MAX_POINTS points better than the reference in every objective,
// and f^(m-1) <= CGQ_PARETO_HV_BUDGET (m = 3: f <= 3162; m = 4: 215; m = 5: 56;
// m = 6: 25), and m <= CGQ_PARETO_HV_MAX_M. m = 1 and 2 have no bound (O(n log n)).
#define CGQ_PARETO_HV_MAX_POINTS 4096
#define CGQ_PARETO_HV_BUDGET 1e7
#define CGQ_PARETO_HV_MAX_M 16

// cgq_pareto_hypervolume sets *hv to the volume of the region the points
// dominate and ref bounds (ref is m values in the same units and senses as
// the points: the worst acceptable value of each objective). Points not
// strictly better than ref in every objective add nothing. Returns 0, or -1
// when m < 1 or the input exceeds the bounds above (*hv untouched).
int cgq_pareto_hypervolume (const double *points, int n, int m, const int *sense, const double *ref,
                            double *hv);

#endif
