#!/usr/bin/python3
"""Writes tpe_expected.h: fixed observation sets, and what Optuna's TPE makes
of them (its Parzen estimator's log densities, the gamma split, the
candidate it chooses, the truncated normal's quantiles), so that tpe_test.c
checks common/tpe.c against Optuna without needing Python at test time.
Regenerate with Debian's Optuna 3.1 (apt-get install python3-optuna):

    /usr/bin/python3 common/tpe_expected.py > common/tpe_expected.h

One deliberate difference, applied here too: Optuna 3.1's truncated normal
log density leaves out -log(sigma) (optuna issue #5109, fixed in Optuna 3.5
by PR #5110), so its kernels are not normalised; cgq's are. The fix is
patched into Optuna below, as 3.5 has it. Everything else is Optuna 3.1's
own code.

Deterministic: the points come from a fixed-seed generator and are written
with repr(), which reads back as the same double.
"""
import math
import random

import numpy as np
import optuna
from optuna import distributions as D
from optuna.samplers._tpe import _truncnorm
from optuna.samplers._tpe.parzen_estimator import _ParzenEstimator
from optuna.samplers._tpe.parzen_estimator import _ParzenEstimatorParameters
from optuna.samplers._tpe.sampler import TPESampler
from optuna.samplers._tpe.sampler import _split_observation_pairs
from optuna.samplers._tpe.sampler import default_gamma
from optuna.samplers._tpe.sampler import default_weights
from optuna.samplers._tpe.sampler import _calculate_weights_below_for_multi_objective

_logpdf_31 = _truncnorm.logpdf


def _logpdf_fixed(x, a, b, loc=0, scale=1):
    return _logpdf_31(x, a, b, loc, scale) - np.log(scale)


_truncnorm.logpdf = _logpdf_fixed  # parzen_estimator calls it through the module


def params(multivariate):
    return _ParzenEstimatorParameters(
        consider_prior=True, prior_weight=1.0, consider_magic_clip=True,
        consider_endpoints=False, weights=default_weights, multivariate=multivariate)


# How each Optuna distribution reads in tpe.h: (kind, low, high, step, n) and
# the map from a value to the estimator's coordinate.
def dim_of(dist):
    if isinstance(dist, D.CategoricalDistribution):
        return ("CGQ_TPE_CATEGORY", 0.0, 0.0, 0.0, len(dist.choices)), float
    if isinstance(dist, D.IntDistribution) and dist.log:
        return ("CGQ_TPE_REAL", math.log(dist.low - 0.5), math.log(dist.high + 0.5), 0.0, 0), \
            math.log
    if isinstance(dist, D.IntDistribution) or dist.step is not None:
        q = float(dist.step)
        return ("CGQ_TPE_STEP", dist.low - 0.5 * q, dist.high + 0.5 * q, q, 0), float
    if dist.log:
        return ("CGQ_TPE_REAL", math.log(dist.low), math.log(dist.high), 0.0, 0), math.log
    return ("CGQ_TPE_REAL", float(dist.low), float(dist.high), 0.0, 0), float


def estimator_cases():
    rng = random.Random(25)
    f = D.FloatDistribution(-5, 10)
    yield "float", {"x": f}, False, [[-3.1], [0.2], [0.25], [4.0], [9.5], [-4.9], [6.6]], \
        [[-5.0], [-4.2], [0.0], [0.33], [2.5], [7.1], [10.0]]
    u = D.FloatDistribution(0, 1)
    obs = [[round(rng.random(), 6)] for _ in range(30)]  # 30: the older 5 on the ramp
    yield "float30", {"x": u}, False, obs, [[0.0], [0.05], [0.31], [0.5], [0.77], [0.999]]
    lg = D.FloatDistribution(1e-4, 1e-1, log=True)
    yield "log", {"lr": lg}, False, [[0.003], [0.0004], [0.05], [0.0021], [0.0011]], \
        [[1e-4], [0.0005], [0.002], [0.01], [0.099]]
    i = D.IntDistribution(0, 20)
    yield "int", {"k": i}, False, [[3], [3], [7], [12], [20], [0], [7], [8], [3]], \
        [[0], [1], [3], [7], [10], [19], [20]]
    s = D.FloatDistribution(0, 1, step=0.25)
    yield "step", {"q": s}, False, [[0.25], [0.5], [0.5], [1.0]], \
        [[0.0], [0.25], [0.5], [0.75], [1.0]]
    il = D.IntDistribution(1, 64, log=True)
    yield "intlog", {"b": il}, False, [[2], [16], [17], [64], [5]], [[1], [2], [8], [33], [64]]
    c = D.CategoricalDistribution(["a", "b", "c", "d"])
    yield "cat", {"c": c}, False, [[0], [2], [2], [3], [2], [0], [1], [2], [2]], \
        [[0], [1], [2], [3]]
    yield "empty", {"x": f}, False, [], [[-5.0], [0.0], [2.5], [9.0]]
    yield "one", {"x": f}, False, [[1.5]], [[-5.0], [1.5], [2.0], [10.0]]
    m = {"x": f, "k": i, "c": D.CategoricalDistribution(["p", "q", "r"])}
    obs = [[round(rng.uniform(-5, 10), 4), rng.randint(0, 20), rng.randint(0, 2)]
           for _ in range(12)]
    pts = [[round(rng.uniform(-5, 10), 4), rng.randint(0, 20), rng.randint(0, 2)]
           for _ in range(6)]
    yield "multi", m, True, obs, pts
    # Multivariate with ramped weights.
    obs = [[round(rng.uniform(-5, 10), 4), rng.randint(0, 20), rng.randint(0, 2)]
           for _ in range(40)]
    yield "multi40", m, True, obs, pts


def c_doubles(xs):
    return "{%s}" % ", ".join(repr(float(x)) for x in xs)


def estimator(space, multivariate, obs):
    names = list(space)
    ob = {k: np.asarray([o[j] for o in obs], dtype=float) for j, k in enumerate(names)}
    return _ParzenEstimator(ob, space, params(multivariate))


def log_pdf(pe, space, pts):
    names = list(space)
    sd = {k: np.asarray([p[j] for p in pts], dtype=float) for j, k in enumerate(names)}
    for k, d in space.items():
        if isinstance(d, D.CategoricalDistribution):
            sd[k] = sd[k].astype(int)
    return pe.log_pdf(sd)


def coords(space, rows):
    maps = [dim_of(d)[1] for d in space.values()]
    return [m(v) for row in rows for m, v in zip(maps, row)]


def main():
    out = ["// Generated by common/tpe_expected.py with Optuna %s and numpy %s (the"
           % (optuna.__version__, np.__version__),
           "// truncated normal's -log(sigma) patched in, as Optuna 3.5 has it); do not edit.",
           "// Points are in tpe.h's coordinates: log(value) for log params, the",
           "// category's index for categorical ones.",
           "// clang-format off",
           "#ifndef CGQ_TPE_EXPECTED_H", "#define CGQ_TPE_EXPECTED_H", "",
           "typedef struct {", "    const char *name;", "    bool multivariate;",
           "    size_t ndim, nobs, npts;", "    cgq_tpe_dim_t dims[3];",
           "    const double *obs, *pts, *log_pdf;", "} s_est_case_t;", ""]
    rows = []
    for name, space, mv, obs, pts in estimator_cases():
        pe = estimator(space, mv, obs)
        lp = log_pdf(pe, space, pts)
        dims = ", ".join("{%s, %r, %r, %r, %d}" % dim_of(d)[0] for d in space.values())
        out.append("static const double s_%s_obs[] = %s;" % (name, c_doubles(coords(space, obs))
                                                             if obs else "{0}"))
        out.append("static const double s_%s_pts[] = %s;" % (name, c_doubles(coords(space, pts))))
        out.append("static const double s_%s_log_pdf[] = %s;" % (name, c_doubles(lp)))
        rows.append('    {"%s", %s, %d, %d, %d, {%s}, s_%s_obs, s_%s_pts, s_%s_log_pdf},'
                    % (name, "true" if mv else "false", len(space), len(obs), len(pts), dims,
                       name, name, name))
    out += ["", "static const s_est_case_t s_est_cases[] = {"] + rows + ["};", ""]

    # gamma and the weights.
    ns = [1, 9, 10, 11, 29, 30, 31, 100, 249, 250, 251, 1000]
    out.append("static const size_t s_gamma_n[] = {%s};" % ", ".join(map(str, ns)))
    out.append("static const size_t s_gamma[] = {%s};"
               % ", ".join(str(default_gamma(n)) for n in ns))
    out.append("static const double s_weights40[] = %s;" % c_doubles(default_weights(40)))
    out.append("")

    # The truncated normal: log mass and quantiles, each region of the code.
    ab = [(-3.0, -1.0), (-40.0, -30.0), (1.0, 2.5), (25.0, 31.0), (-0.5, 0.7), (-9.0, 12.0),
          (-1e-3, 1e-3), (-200.0, -19.0)]
    out.append("static const double s_mass_ab[][2] = {%s};"
               % ", ".join("{%r, %r}" % p for p in ab))
    mass = _truncnorm._log_gauss_mass(np.array([a for a, _ in ab]), np.array([b for _, b in ab]))
    out.append("static const double s_mass[] = %s;" % c_doubles(mass))
    qab = [(0.3, -2.0, 1.0), (0.9, -2.0, 1.0), (0.5, 0.5, 3.0), (0.01, 1.5, 8.0),
           (0.99, -8.0, -1.2), (0.2, -30.0, -22.0), (0.75, -0.1, 0.1), (0.5, -100.0, 100.0)]
    out.append("static const double s_ppf_qab[][3] = {%s};"
               % ", ".join("{%r, %r, %r}" % t for t in qab))
    ppf = [float(_truncnorm.ppf(np.array([q]), np.array([a]), np.array([b]))[0])
           for q, a, b in qab]
    out.append("static const double s_ppf[] = %s;" % c_doubles(ppf))
    out.append("")

    # The split and the choice: 20 trials of (x float, k int), 3 of them in
    # flight (the constant liar: above, whatever their params), candidates
    # scored by log l - log g, univariate (per param) and multivariate.
    rng = random.Random(7)
    space = {"x": D.FloatDistribution(-5, 10), "k": D.IntDistribution(0, 20)}
    trials = []
    for t in range(20):
        x, k = round(rng.uniform(-5, 10), 4), rng.randint(0, 20)
        loss = float("inf") if t in (6, 13, 19) else round((x - 2) ** 2 + 0.3 * (k - 9) ** 2, 6)
        trials.append((x, k, loss))
    scores = [(float("inf"), [float("inf")]) if l == float("inf") else (-float("inf"), [l])
              for _, _, l in trials]
    ncomplete = sum(1 for _, _, l in trials if l != float("inf"))
    below, above = _split_observation_pairs(scores, default_gamma(ncomplete), None)
    cand = [[round(rng.uniform(-5, 10), 4), rng.randint(0, 20)] for _ in range(8)]
    out.append("static const double s_split_x[] = %s;" % c_doubles(t[0] for t in trials))
    out.append("static const double s_split_k[] = %s;" % c_doubles(t[1] for t in trials))
    out.append("static const double s_split_loss[] = {%s};"
               % ", ".join("INFINITY" if t[2] == float("inf") else repr(t[2]) for t in trials))
    out.append("static const size_t s_split_below[] = {%s};" % ", ".join(map(str, below)))
    out.append("static const size_t s_split_above[] = {%s};" % ", ".join(map(str, above)))
    out.append("static const double s_cand_x[] = %s;" % c_doubles(c[0] for c in cand))
    out.append("static const double s_cand_k[] = %s;" % c_doubles(c[1] for c in cand))
    for mv in (False, True):
        tag = "mv" if mv else "uv"
        if mv:
            groups = [list(space)]
        else:
            groups = [[n] for n in space]
        for g in groups:
            sub = {n: space[n] for n in g}
            cols = [list(space).index(n) for n in g]
            ob_b = [[trials[i][c] for c in cols] for i in below]
            ob_a = [[trials[i][c] for c in cols] for i in above]
            pts = [[c_[c] for c in cols] for c_ in cand]
            lb = log_pdf(estimator(sub, mv, ob_b), sub, pts)
            la = log_pdf(estimator(sub, mv, ob_a), sub, pts)
            name = "_".join(g)
            out.append("static const double s_%s_%s_score[] = %s;" % (tag, name,
                                                                      c_doubles(lb - la)))
            samples = {n: np.asarray([p[j] for p in pts], dtype=float) for j, n in enumerate(g)}
            best = TPESampler._compare(samples, lb, la)
            out.append("static const size_t s_%s_%s_best = %d;"
                       % (tag, name, int(np.argmax(lb - la))))
            out.append("// chosen: %s" % best)
    out += multi_objective()
    out += ["", "#endif"]
    print("\n".join(out))


def multi_objective():
    """MOTPE: Optuna's split of several objectives (whole non-dominated
    fronts, then greedy hypervolume subset selection on the front that does
    not fit), the good group's weights (hypervolume contributions), and the
    log densities of a good group's estimator with those weights."""
    out = ["", "// MOTPE.", "typedef struct {", "    const char *name;",
           "    size_t n, m, nbelow;", "    const double *loss;",
           "    const size_t *below, *above;", "    const double *weights;",
           "} s_mo_case_t;", ""]
    rng = random.Random(31)
    cases = []
    # Two objectives on a trade-off curve plus noise: the first front holds
    # more than gamma, so the subset selection decides.
    pts = []
    for _ in range(30):
        a = rng.random()
        pts.append([round(a + 0.3 * rng.random(), 6), round(1 - a + 0.3 * rng.random(), 6)])
    cases.append(("two30", pts, default_gamma(30)))
    # 50 points: gamma 5; a front of 2 fits, the next is selected from.
    pts = [[round(rng.uniform(0, 4), 4), round(rng.uniform(0, 4), 4)] for _ in range(50)]
    cases.append(("two50", pts, default_gamma(50)))
    # Three objectives (one negative: maximised metrics come in negated),
    # duplicates and a zero worst value (the reference's EPS).
    pts = [[round(rng.uniform(-2, 0), 3), round(rng.uniform(0, 1), 3), 0.0 if i % 3 else
            round(-rng.random(), 3)] for i in range(40)]
    pts[7] = list(pts[3])
    pts[21] = list(pts[3])
    cases.append(("three40", pts, 10))
    # Four objectives, a larger good group than the first front.
    pts = [[round(rng.random(), 4) for _ in range(4)] for _ in range(60)]
    cases.append(("four60", pts, 12))
    rows = []
    for name, pts, nb in cases:
        scores = [(-float("inf"), p) for p in pts]
        below, above = _split_observation_pairs(scores, nb, None)
        w = _calculate_weights_below_for_multi_objective(scores, below, None)
        out.append("static const double s_mo_%s_loss[] = %s;"
                   % (name, c_doubles(v for p in pts for v in p)))
        out.append("static const size_t s_mo_%s_below[] = {%s};"
                   % (name, ", ".join(str(int(i)) for i in below)))
        out.append("static const size_t s_mo_%s_above[] = {%s};"
                   % (name, ", ".join(str(int(i)) for i in above)))
        out.append("static const double s_mo_%s_weights[] = %s;" % (name, c_doubles(w)))
        rows.append('    {"%s", %d, %d, %d, s_mo_%s_loss, s_mo_%s_below, s_mo_%s_above, '
                    's_mo_%s_weights},' % (name, len(pts), len(pts[0]), nb, name, name, name,
                                           name))
    out += ["", "static const s_mo_case_t s_mo_cases[] = {"] + rows + ["};", ""]

    # A weighted estimator: the good group of two30 over (x float, k int),
    # its params drawn here, univariate and multivariate.
    name, pts, nb = cases[0]
    scores = [(-float("inf"), p) for p in pts]
    below, _ = _split_observation_pairs(scores, nb, None)
    w = _calculate_weights_below_for_multi_objective(scores, below, None)
    space = {"x": D.FloatDistribution(-5, 10), "k": D.IntDistribution(0, 20)}
    obs = [[round(rng.uniform(-5, 10), 4), rng.randint(0, 20)] for _ in below]
    qs = [[round(rng.uniform(-5, 10), 4), rng.randint(0, 20)] for _ in range(7)]
    out.append("static const double s_mo_est_obs[] = %s;" % c_doubles(coords(space, obs)))
    out.append("static const double s_mo_est_w[] = %s;" % c_doubles(w))
    out.append("static const double s_mo_est_pts[] = %s;" % c_doubles(coords(space, qs)))
    for mv in (False, True):
        names = list(space)
        ob = {k: np.asarray([o[j] for o in obs], dtype=float) for j, k in enumerate(names)}
        pe = _ParzenEstimator(ob, space, params(mv), w)
        out.append("static const double s_mo_est_%s[] = %s;"
                   % ("mv" if mv else "uv", c_doubles(log_pdf(pe, space, qs))))
    return out


if __name__ == "__main__":
    main()
