// pareto_test: dominance with senses, NaN and ties; non-dominated sort and
// crowding on hand-made sets; the hypervolume of known shapes in 1, 2 and 3
// objectives, checked against counting unit cells on random integer sets;
// the bounds of the exact algorithm; and a seeded property test that the
// first front is exactly the set no point dominates (by brute force).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pareto.h"
#include "util.h"

// A splitmix64 stream: the tests' randomness is seeded and reproducible.
static uint64_t
s_next (uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int
s_below (uint64_t *state, int n)
{
    return (int) (s_next (state) % (uint64_t) n);
}

static void
t_dominance (void **state)
{
    double a[] = {1, 2}, b[] = {2, 3}, c[] = {1, 3}, d[] = {2, 1}, a2[] = {1, 2};
    assert_int_equal (cgq_pareto_compare (a, b, 2, NULL), 1);
    assert_int_equal (cgq_pareto_compare (b, a, 2, NULL), -1);
    assert_true (cgq_pareto_dominates (a, c, 2, NULL)); // equal in one, better in the other
    assert_false (cgq_pareto_dominates (c, a, 2, NULL));
    assert_int_equal (cgq_pareto_compare (a, d, 2, NULL), 0);  // a trade-off
    assert_int_equal (cgq_pareto_compare (a, a2, 2, NULL), 0); // equal points: neither
    assert_false (cgq_pareto_dominates (a, a2, 2, NULL));
    assert_false (cgq_pareto_dominates (a, a, 2, NULL));

    // Senses: maximise both turns the order round; mixed senses trade off.
    int max2[] = {+1, +1}, min2[] = {-1, -1}, mixed[] = {+1, -1};
    assert_int_equal (cgq_pareto_compare (a, b, 2, max2), -1);
    assert_int_equal (cgq_pareto_compare (a, b, 2, min2), 1);
    assert_int_equal (cgq_pareto_compare (a, b, 2, mixed), 0);
    assert_int_equal (cgq_pareto_compare (d, c, 2, mixed), 1); // larger first, smaller second

    // NaN is worse than any number and equal to NaN.
    double n1[] = {NAN, 0}, n2[] = {NAN, 1}, n3[] = {5, 5};
    assert_int_equal (cgq_pareto_compare (n3, n1, 2, NULL), 0); // 5 > 0 in the second
    assert_int_equal (cgq_pareto_compare (n1, n2, 2, NULL), 1); // NaN ties, 0 < 1
    assert_int_equal (cgq_pareto_compare (n3, n2, 2, max2), 1); // NaN worst under max too
    double one[] = {3}, other[] = {NAN};
    assert_int_equal (cgq_pareto_compare (one, other, 1, NULL), 1);
}

// Minimise both. Ranks worked by hand: A, B, C and B's duplicate F form the
// front; D (by B) and E (by C) the second; G (by A and D) the third; H last.
static const double s_set[] = {
    1, 5, // A 0
    2, 3, // B 0
    4, 1, // C 0
    3, 4, // D 1
    5, 2, // E 1
    2, 3, // F 0 (equals B)
    4, 5, // G 2
    6, 6, // H 3
};
static const int s_set_ranks[] = {0, 0, 0, 1, 1, 0, 2, 3};

static void
t_sort (void **state)
{
    int ranks[8];
    assert_int_equal (cgq_pareto_sort (s_set, 8, 2, NULL, ranks), 4);
    assert_memory_equal (ranks, s_set_ranks, sizeof ranks);

    // The same set with the second objective maximised, written negated.
    double flipped[16];
    for (int i = 0; i < 8; i++)
        flipped[2 * i] = s_set[2 * i], flipped[2 * i + 1] = -s_set[2 * i + 1];
    int sense[] = {-1, +1};
    memset (ranks, 0xff, sizeof ranks);
    assert_int_equal (cgq_pareto_sort (flipped, 8, 2, sense, ranks), 4);
    assert_memory_equal (ranks, s_set_ranks, sizeof ranks);

    // A chain: every point dominates the next.
    double chain[] = {5, 5, 4, 4, 3, 3, 2, 2, 1, 1};
    int chain_ranks[5], want[] = {4, 3, 2, 1, 0};
    assert_int_equal (cgq_pareto_sort (chain, 5, 2, NULL, chain_ranks), 5);
    assert_memory_equal (chain_ranks, want, sizeof want);

    // All equal: one front. None: no fronts.
    double same[] = {1, 1, 1, 1, 1, 1};
    int same_ranks[3], zeros[3] = {0, 0, 0};
    assert_int_equal (cgq_pareto_sort (same, 3, 2, NULL, same_ranks), 1);
    assert_memory_equal (same_ranks, zeros, sizeof zeros);
    assert_int_equal (cgq_pareto_sort (same, 0, 2, NULL, same_ranks), 0);

    // The front: indices ascending, the duplicate kept.
    int front[8], want_front[] = {0, 1, 2, 5};
    assert_int_equal (cgq_pareto_front (s_set, 8, 2, NULL, front), 4);
    assert_memory_equal (front, want_front, sizeof want_front);
}


// Deb's constrained domination: feasible points ranked among themselves as
// cgq_pareto_sort ranks them; every infeasible one after them, by total
// violation (equal violations share a rank; NaN counts as INFINITY),
// however good its objectives.
static void
t_sort_constrained (void **state)
{
    (void) state;
    // 0 and 1 feasible, 1 dominated by 0; 2 and 3 dominate both but are
    // infeasible; 4 as infeasible as 2; 5 cannot be computed.
    double pts[] = {1, 1, 2, 2, 0, 0, -1, -1, 5, 5, -2, -2};
    double viol[] = {0, 0, 3.5, 1, 3.5, NAN};
    int ranks[6], want[] = {0, 1, 3, 2, 3, 4};
    assert_int_equal (cgq_pareto_sort_constrained (pts, viol, 6, 2, NULL, ranks), 5);
    assert_memory_equal (ranks, want, sizeof want);
    // No violation array: plain non-dominated sort.
    int plain[6], want_plain[] = {3, 4, 2, 1, 5, 0};
    assert_int_equal (cgq_pareto_sort_constrained (pts, NULL, 6, 2, NULL, plain), 6);
    assert_memory_equal (plain, want_plain, sizeof want_plain);
    // None feasible: ranks by violation alone.
    double all[] = {2, 1, 2};
    int r3[3], want3[] = {1, 0, 1};
    assert_int_equal (cgq_pareto_sort_constrained (pts, all, 3, 2, NULL, r3), 2);
    assert_memory_equal (r3, want3, sizeof want3);
}

static void
t_crowding (void **state)
{
    // Front (1,4), (2,3), (3,1.5), (4,1), stored among other points and
    // passed out of order. Objective 0 (range 3): (2,3) gets (3-1)/3, (3,1.5)
    // gets (4-2)/3. Objective 1 (range 3): (3,1.5) gets (3-1)/3, (2,3) gets
    // (4-1.5)/3. So (2,3): 4.5/3 = 1.5 and (3,1.5): 4/3; the ends are infinite.
    double pts[] = {9, 9, 3, 1.5, 1, 4, 9, 9, 4, 1, 2, 3};
    int idx[] = {5, 1, 4, 2};
    double dist[4];
    cgq_pareto_crowding (pts, 2, idx, 4, dist);
    assert_true (fabs (dist[0] - 1.5) < 1e-12);
    assert_true (fabs (dist[1] - 4.0 / 3) < 1e-12);
    assert_true (isinf (dist[2]) && dist[2] > 0);
    assert_true (isinf (dist[3]) && dist[3] > 0);

    // One or two points: all infinite.
    int two[] = {1, 2};
    cgq_pareto_crowding (pts, 2, two, 2, dist);
    assert_true (isinf (dist[0]) && isinf (dist[1]));
    cgq_pareto_crowding (pts, 2, two, 1, dist);
    assert_true (isinf (dist[0]));

    // An objective equal across the front adds nothing (and makes no ends).
    double flat[] = {1, 2, 2, 2, 4, 2};
    int all[] = {0, 1, 2};
    cgq_pareto_crowding (flat, 2, all, 3, dist);
    assert_true (isinf (dist[0]) && isinf (dist[2]));
    assert_true (fabs (dist[1] - 1) < 1e-12);

    // Duplicates: ties are ordered by point index, so permuting idx permutes
    // the distances and changes nothing else.
    double dup[] = {1, 3, 2, 2, 2, 2, 2, 2, 3, 1};
    int order_a[] = {0, 1, 2, 3, 4}, order_b[] = {3, 4, 0, 2, 1};
    double da[5], db[5];
    cgq_pareto_crowding (dup, 2, order_a, 5, da);
    cgq_pareto_crowding (dup, 2, order_b, 5, db);
    for (int t = 0; t < 5; t++) {
        double want = da[order_b[t]];
        assert_true (db[t] == want || (isinf (db[t]) && isinf (want)));
    }
    assert_true (isinf (da[0]) && isinf (da[4]));
    // By index the copies of (2,2) are 1, 2, 3 in both objectives: copy 1
    // sits between (1,3) and copy 2 in the first and between (3,1) and copy 2
    // in the second (1/2 + 1/2), copy 3 likewise; copy 2 between equals (0).
    assert_true (fabs (da[1] - 1) < 1e-12);
    assert_true (fabs (da[2] - 0) < 1e-12);
    assert_true (fabs (da[3] - 1) < 1e-12);
}

static void
t_hypervolume_known (void **state)
{
    double hv = -1;
    // The staircase (1,3), (2,2), (3,1) under (4,4): 3 + 2 + 1.
    double stairs[] = {1, 3, 2, 2, 3, 1};
    double ref[] = {4, 4};
    assert_int_equal (cgq_pareto_hypervolume (stairs, 3, 2, NULL, ref, &hv), 0);
    assert_true (fabs (hv - 6) < 1e-12);

    // Dominated points, duplicates and points outside ref add nothing.
    double more[] = {1, 3, 2, 2, 3, 1, 3, 3, 2, 2, 5, 0, 0, 4, 4, 4, 2.5, 3.5};
    assert_int_equal (cgq_pareto_hypervolume (more, 9, 2, NULL, ref, &hv), 0);
    assert_true (fabs (hv - 6) < 1e-12);

    // Maximising both: (3,1), (2,2), (1,3) above (0,0) is the same staircase.
    double up[] = {3, 1, 2, 2, 1, 3}, zero[] = {0, 0};
    int max2[] = {+1, +1};
    assert_int_equal (cgq_pareto_hypervolume (up, 3, 2, max2, zero, &hv), 0);
    assert_true (fabs (hv - 6) < 1e-12);
    // Mixed: minimise time, maximise accuracy; ref (10 s, 0.5).
    double mixed[] = {2, 0.9, 5, 0.95}, mref[] = {10, 0.5};
    int ms[] = {-1, +1};
    assert_int_equal (cgq_pareto_hypervolume (mixed, 2, 2, ms, mref, &hv), 0);
    assert_true (fabs (hv - (8 * 0.4 + 5 * 0.05)) < 1e-12);

    // Nothing inside: 0. One objective: the distance from the best to ref.
    assert_int_equal (cgq_pareto_hypervolume (stairs, 0, 2, NULL, ref, &hv), 0);
    assert_true (hv == 0);
    double line[] = {3, 1, 2, NAN}, r1[] = {5};
    assert_int_equal (cgq_pareto_hypervolume (line, 4, 1, NULL, r1, &hv), 0);
    assert_true (fabs (hv - 4) < 1e-12);

    // 3-D: the cube (1,1,1) under (2,2,2); the three unit corners (1,0,0),
    // (0,1,0), (0,0,1) under (2,2,2) cover all of [0,2]^3 but [0,1]^3: 8 - 1.
    double cube[] = {1, 1, 1}, two3[] = {2, 2, 2};
    assert_int_equal (cgq_pareto_hypervolume (cube, 1, 3, NULL, two3, &hv), 0);
    assert_true (fabs (hv - 1) < 1e-12);
    double corners[] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    assert_int_equal (cgq_pareto_hypervolume (corners, 3, 3, NULL, two3, &hv), 0);
    assert_true (fabs (hv - 7) < 1e-12);
    // (1,2,3), (2,3,1), (3,1,2) under (4,4,4), by inclusion-exclusion:
    // boxes 3*2*1 = 6 each; pairwise 2*1*1 = 2 each; the triple 1*1*1.
    // 18 - 6 + 1 = 13.
    double rot[] = {1, 2, 3, 2, 3, 1, 3, 1, 2}, four3[] = {4, 4, 4};
    assert_int_equal (cgq_pareto_hypervolume (rot, 3, 3, NULL, four3, &hv), 0);
    assert_true (fabs (hv - 13) < 1e-12);
    // With duplicates and a dominated point, and with the senses flipped.
    double rot2[] = {1, 2, 3, 2, 3, 1, 3, 1, 2, 1, 2, 3, 3, 3, 3};
    assert_int_equal (cgq_pareto_hypervolume (rot2, 5, 3, NULL, four3, &hv), 0);
    assert_true (fabs (hv - 13) < 1e-12);
    double neg[15], negref[] = {-4, -4, -4};
    for (int i = 0; i < 15; i++)
        neg[i] = -rot2[i];
    int max3[] = {+1, +1, +1};
    assert_int_equal (cgq_pareto_hypervolume (neg, 5, 3, max3, negref, &hv), 0);
    assert_true (fabs (hv - 13) < 1e-12);

    // Bad m.
    assert_int_equal (cgq_pareto_hypervolume (stairs, 3, 0, NULL, ref, &hv), -1);
    assert_int_equal (cgq_pareto_hypervolume (stairs, 3, CGQ_PARETO_HV_MAX_M + 1, NULL, ref, &hv),
                      -1);
}

// s_cells counts the unit cells of the integer grid below ref that some
// point dominates: the exact volume when coordinates are integers.
static double
s_cells (const double *pts, int n, int m, const int *lo, const int *ref)
{
    int cell[8];
    for (int j = 0; j < m; j++)
        cell[j] = lo[j];
    double count = 0;
    for (;;) {
        for (int i = 0; i < n; i++) {
            bool in = true;
            for (int j = 0; j < m && in; j++)
                in = pts[i * m + j] <= cell[j];
            if (in) {
                count++;
                break;
            }
        }
        int j = 0;
        while (j < m && ++cell[j] == ref[j])
            cell[j] = lo[j], j++;
        if (j == m)
            return count;
    }
}

static void
t_hypervolume_random (void **state)
{
    uint64_t rng = 42;
    for (int round = 0; round < 60; round++) {
        int m = 2 + round % 3; // 2, 3, 4
        int n = 1 + s_below (&rng, 25);
        double pts[25 * 4];
        int lo[4], ref[4];
        double dref[4];
        for (int j = 0; j < m; j++) {
            lo[j] = 0;
            ref[j] = 8;
            dref[j] = 8;
        }
        // Values 0..9: some outside ref, many ties.
        for (int i = 0; i < n * m; i++)
            pts[i] = s_below (&rng, 10);
        double hv = -1;
        assert_int_equal (cgq_pareto_hypervolume (pts, n, m, NULL, dref, &hv), 0);
        double want = s_cells (pts, n, m, lo, ref);
        if (fabs (hv - want) > 1e-9)
            fail_msg ("round %d (m=%d, n=%d): hypervolume %g, cells %g", round, m, n, hv, want);
    }
}

static void
t_hypervolume_bounds (void **state)
{
    // More points better than ref than the bound (m >= 3): refused.
    int n = CGQ_PARETO_HV_MAX_POINTS + 1;
    double *pts = cgq_xmalloc ((size_t) n * 3 * sizeof *pts);
    for (int i = 0; i < n * 3; i++)
        pts[i] = 1;
    double ref[] = {2, 2, 2, 2, 2}, hv = -7;
    assert_int_equal (cgq_pareto_hypervolume (pts, n, 3, NULL, ref, &hv), -1);
    assert_true (hv == -7);
    // ... but a dominated crowd within the bound collapses to its front.
    assert_int_equal (cgq_pareto_hypervolume (pts, n - 1, 3, NULL, ref, &hv), 0);
    assert_true (fabs (hv - 1) < 1e-12);
    // 2-D is never bounded.
    assert_int_equal (cgq_pareto_hypervolume (pts, n, 2, NULL, ref, &hv), 0);
    assert_true (fabs (hv - 1) < 1e-12);
    free (pts);

    // A front whose cost exceeds the budget: points on the plane sum = 1
    // dominate none of each other. 5 objectives: 57^4 > 1e7, 56^4 is not.
    uint64_t rng = 7;
    double front[57 * 5];
    for (int i = 0; i < 57; i++) {
        double sum = 0;
        for (int j = 0; j < 5; j++)
            sum += front[i * 5 + j] = 0.1 + (double) s_below (&rng, 1000000) / 1e6;
        for (int j = 0; j < 5; j++)
            front[i * 5 + j] /= sum;
    }
    int check[57];
    assert_int_equal (cgq_pareto_front (front, 57, 5, NULL, check), 57);
    assert_int_equal (cgq_pareto_hypervolume (front, 57, 5, NULL, ref, &hv), -1);
    assert_int_equal (cgq_pareto_hypervolume (front, 56, 5, NULL, ref, &hv), 0);
    assert_true (hv > 0 && hv < 32);
}

// The first front is exactly the set no other point dominates, every later
// point is dominated by one a rank before it and by none of its own rank or
// later, and cgq_pareto_front agrees. Small integer values make ties common.
static void
t_sort_property (void **state)
{
    uint64_t rng = 20240601;
    for (int round = 0; round < 200; round++) {
        int m = 1 + s_below (&rng, 4);
        int n = s_below (&rng, 120);
        int sense[4];
        for (int j = 0; j < m; j++)
            sense[j] = s_below (&rng, 2) ? +1 : -1;
        const int *sp = round % 5 == 0 ? NULL : sense;
        double *pts = cgq_xmalloc (((size_t) n * m + 1) * sizeof *pts);
        for (int i = 0; i < n * m; i++)
            pts[i] = s_below (&rng, 6) - 2;
        int *ranks = cgq_xmalloc (((size_t) n + 1) * sizeof *ranks);
        int *front = cgq_xmalloc (((size_t) n + 1) * sizeof *front);
        int fronts = cgq_pareto_sort (pts, n, m, sp, ranks);
        int nfront = cgq_pareto_front (pts, n, m, sp, front);
        int max_rank = -1, in_front = 0;
        for (int i = 0; i < n; i++) {
            bool dominated = false, by_previous = false;
            for (int j = 0; j < n; j++) {
                if (!cgq_pareto_dominates (pts + j * m, pts + i * m, m, sp))
                    continue;
                dominated = true;
                assert_true (ranks[j] < ranks[i]);
                by_previous |= ranks[j] == ranks[i] - 1;
            }
            assert_int_equal (ranks[i] == 0, !dominated);
            assert_true (ranks[i] == 0 || by_previous);
            if (!dominated) {
                assert_true (in_front < nfront);
                assert_int_equal (front[in_front++], i);
            }
            if (ranks[i] > max_rank)
                max_rank = ranks[i];
        }
        assert_int_equal (in_front, nfront);
        assert_int_equal (fronts, max_rank + 1);
        free (pts);
        free (ranks);
        free (front);
    }
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (t_dominance),          cmocka_unit_test (t_sort), cmocka_unit_test (t_sort_constrained),
        cmocka_unit_test (t_crowding),           cmocka_unit_test (t_hypervolume_known),
        cmocka_unit_test (t_hypervolume_random), cmocka_unit_test (t_hypervolume_bounds),
        cmocka_unit_test (t_sort_property),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
