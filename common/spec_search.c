// spec_search: the search: section of a spec (the algorithm and the keys
// each one reads), the points of algorithm list, inline or from a CSV or
// JSON-lines file (search.file, read only where the spec's directory is
// known: cgq submit and validate, never the coordinator), and the checks of
// what an algorithm needs from the rest of the spec. Part of the spec parser
// (spec.c; shared internals in spec_impl.h).
#include "spec.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "spec_impl.h"
#include "template.h"
#include "util.h"

static const struct {
    cgq_search_alg_t alg;
    const char *name;
    const char *keys; // the keys of search that this algorithm reads
} s_search_algs[] = {
    {CGQ_SEARCH_RANDOM, "random", "algorithm, samples, concurrency, seed, fail_fast"},
    {CGQ_SEARCH_GRID, "grid", "algorithm, samples, concurrency, seed, fail_fast"},
    {CGQ_SEARCH_EVOLUTION, "evolution",
     "algorithm, samples, concurrency, seed, population, tournament, initial, batch, warm_start, "
     "fail_fast"},
    {CGQ_SEARCH_NSGA2, "nsga2",
     "algorithm, samples, concurrency, seed, population, initial, batch, crossover, mutation, "
     "warm_start, fail_fast"},
    {CGQ_SEARCH_BAYES, "bayes",
     "algorithm, samples, concurrency, seed, initial, candidates, warm_start, fail_fast"},
    {CGQ_SEARCH_TPE, "tpe",
     "algorithm, samples, concurrency, seed, initial, candidates, multivariate, warm_start, "
     "fail_fast"},
    {CGQ_SEARCH_BOHB, "bohb",
     "algorithm, samples, concurrency, seed, initial, candidates, multivariate, random_fraction, "
     "warm_start, fail_fast"},
    {CGQ_SEARCH_CMAES, "cmaes",
     "algorithm, samples, concurrency, seed, popsize, sigma0, restarts, warm_start, fail_fast"},
    {CGQ_SEARCH_LIST, "list", "algorithm, points, file, concurrency, fail_fast"},
    {CGQ_SEARCH_EXTERNAL, "external", "algorithm, samples, concurrency, fail_fast"},
    {CGQ_SEARCH_PBT, "pbt",
     "algorithm, population, concurrency, seed, metric, mode, time_attr, perturbation_interval, "
     "quantile_fraction, resample_probability, hyperparam_mutations, warm_start, fail_fast"},
};
#define S_NALGS (sizeof s_search_algs / sizeof *s_search_algs)
static const char *s_alg_names =
    "random, grid, evolution, nsga2, bayes, tpe, bohb, cmaes, list, external, pbt";

const char *
cgq_spec_search_name (cgq_search_alg_t alg)
{
    for (size_t i = 0; i < S_NALGS; i++)
        if (s_search_algs[i].alg == alg)
            return s_search_algs[i].name;
    return "?";
}

// s_alg_reads is true when algorithm alg reads search.key. An empty key (a
// YAML key written as "" or as an anchor alone) reads nothing: strstr would
// find it everywhere, and the loop below would never advance.
static bool
s_alg_reads (cgq_search_alg_t alg, const char *key)
{
    if (!*key)
        return false;
    for (size_t i = 0; i < S_NALGS; i++) {
        if (s_search_algs[i].alg != alg)
            continue;
        size_t n = strlen (key);
        for (const char *p = s_search_algs[i].keys; (p = strstr (p, key)); p += n)
            if ((p == s_search_algs[i].keys || p[-1] == ' ') && (p[n] == ',' || p[n] == 0))
                return true;
    }
    return false;
}

// s_readers lists the algorithms that read search.key, for messages.
static void
s_readers (const char *key, char *buf, size_t len)
{
    buf[0] = 0;
    size_t at = 0;
    for (size_t i = 0; i < S_NALGS; i++)
        if (s_alg_reads (s_search_algs[i].alg, key) && at < len)
            at += (size_t) snprintf (buf + at, len - at, "%s%s", at ? ", " : "",
                                     s_search_algs[i].name);
}

static int
s_get_u32 (spec_ctx_t *c, const cgq_yamldoc_node_t *e, const char *what, long long min,
           const char *hint, uint32_t *out)
{
    long long n;
    if (cgq_yamldoc_get_int (c->y, e, what, min, 1000000, hint, &n) < 0)
        return -1;
    *out = (uint32_t) n;
    return 0;
}

static int
s_get_prob (spec_ctx_t *c, const cgq_yamldoc_node_t *e, const char *what, const char *hint,
            double *out)
{
    double d;
    if (cgq_yamldoc_get_number (c->y, e, what, hint, &d) < 0)
        return -1;
    if (d < 0 || d > 1)
        return cgq_yamldoc_fail (c->y, e, "%s must be a probability in [0, 1], not %s (%s)", what,
                                 cgq_yamldoc_text (e), hint);
    *out = d;
    return 0;
}

static int s_read_points_file (spec_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *e);

// The most jobs a warm_start names.
#define S_WARM_MAX_JOBS 64

// s_parse_warm_start reads search.warm_start: {jobs: [7, 9], points: FILE}.
static int
s_parse_warm_start (spec_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *v)
{
    const char *hint = "write warm_start: {jobs: [7, 9]} or warm_start: {points: seen.jsonl}";
    if (cgq_yamldoc_expect_map (c->y, v, "search.warm_start", hint) < 0)
        return -1;
    if (cgq_yamldoc_npairs (v) == 0)
        return cgq_yamldoc_fail (c->y, v, "search.warm_start is empty (%s)", hint);
    for (size_t pi = 0; pi < cgq_yamldoc_npairs (v); pi++) {
        const cgq_yamldoc_node_t *k = cgq_yamldoc_key (c->y, v, pi),
                                 *e = cgq_yamldoc_val (c->y, v, pi);
        const char *key = cgq_yamldoc_text (k);
        if (!strcmp (key, "jobs")) {
            char buf[96];
            if (e->type != CGQ_YAMLDOC_SEQ || cgq_yamldoc_nitems (e) < 1 ||
                cgq_yamldoc_nitems (e) > S_WARM_MAX_JOBS)
                return cgq_yamldoc_fail (c->y, e,
                                         "search.warm_start.jobs must be a list of 1 to %d job "
                                         "ids, not %s (write jobs: [7, 9])",
                                         S_WARM_MAX_JOBS, cgq_yamldoc_what (e, buf, sizeof buf));
            size_t n = cgq_yamldoc_nitems (e);
            free (spec->search.warm_jobs);
            spec->search.warm_jobs = cgq_xcalloc (n, sizeof *spec->search.warm_jobs);
            spec->search.nwarm_jobs = n;
            for (size_t i = 0; i < n; i++) {
                long long id;
                if (cgq_yamldoc_get_int (c->y, cgq_yamldoc_item (c->y, e, i),
                                         "search.warm_start.jobs[]", 1, LLONG_MAX,
                                         "write a job id such as 7 (cgq status lists them)",
                                         &id) < 0)
                    return -1;
                spec->search.warm_jobs[i] = (uint64_t)id;
            }
        }
        else if (!strcmp (key, "points")) {
            const char *t;
            if (cgq_yamldoc_get_text (c->y, e, "search.warm_start.points",
                                      "write points: seen.jsonl (JSON lines of {params, "
                                      "metrics}, relative to the spec)",
                                      &t) < 0)
                return -1;
            free (spec->search.warm_points);
            spec->search.warm_points = cgq_xstrdup (t);
        }
        else
            return cgq_yamldoc_unknown_key (c->y, k, "search.warm_start", "jobs, points");
    }
    return 0;
}

int
spec_parse_search (spec_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *v)
{
    if (cgq_yamldoc_is_null (v))
        return 0;
    if (cgq_yamldoc_expect_map (c->y, v, "search",
                                "write search: {algorithm: random, samples: 16}") < 0)
        return -1;
    // The algorithm first: it decides which other keys mean something.
    for (size_t pi = 0; pi < cgq_yamldoc_npairs (v); pi++) {
        const cgq_yamldoc_node_t *k = cgq_yamldoc_key (c->y, v, pi),
                                 *e = cgq_yamldoc_val (c->y, v, pi);
        if (strcmp (cgq_yamldoc_text (k), "algorithm"))
            continue;
        const char *a;
        char hint[128];
        snprintf (hint, sizeof hint, "write e.g. algorithm: random; one of: %s", s_alg_names);
        if (cgq_yamldoc_get_text (c->y, e, "search.algorithm", hint, &a) < 0)
            return -1;
        size_t i = 0;
        while (i < S_NALGS && strcmp (a, s_search_algs[i].name))
            i++;
        if (i == S_NALGS)
            return cgq_yamldoc_fail (c->y, e, "unknown search.algorithm '%s' (expected one of: %s)",
                                     a, s_alg_names);
        spec->search.algorithm = s_search_algs[i].alg;
        c->alg_node = e;
    }
    cgq_search_alg_t alg = spec->search.algorithm;
    const char *aname = cgq_spec_search_name (alg);
    bool samples_given = false;
    for (size_t pi = 0; pi < cgq_yamldoc_npairs (v); pi++) {
        const cgq_yamldoc_node_t *k = cgq_yamldoc_key (c->y, v, pi),
                                 *e = cgq_yamldoc_val (c->y, v, pi);
        const char *key = cgq_yamldoc_text (k);
        long long n;
        if (!strcmp (key, "algorithm"))
            continue;
        if (!s_alg_reads (alg, key)) {
            char who[128];
            s_readers (key, who, sizeof who);
            if (*who)
                return cgq_yamldoc_fail (
                    c->y, k,
                    "search.%s applies to algorithm %s, not %s (remove it, or set "
                    "algorithm: %.*s)",
                    key, who, aname, (int)strcspn (who, ","), who);
            for (size_t i = 0; i < S_NALGS; i++)
                if (s_search_algs[i].alg == alg)
                    return cgq_yamldoc_unknown_key (c->y, k, "search", s_search_algs[i].keys);
        }
        if (!strcmp (key, "samples")) {
            if (cgq_yamldoc_get_int (c->y, e, "search.samples", 1, LLONG_MAX,
                                     "write e.g. samples: 16", &n) < 0)
                return -1;
            spec->search.samples = (uint64_t) n;
            samples_given = true;
        }
        else if (!strcmp (key, "concurrency")) {
            if (cgq_yamldoc_get_int (c->y, e, "search.concurrency", 0, UINT32_MAX,
                                     "write e.g. concurrency: 8, or 0 for no limit", &n) < 0)
                return -1;
            spec->search.concurrency = (uint32_t) n;
        }
        else if (!strcmp (key, "fail_fast")) {
            if (cgq_yamldoc_get_int (c->y, e, "search.fail_fast", 0, UINT32_MAX,
                                     "write e.g. fail_fast: 5, or 0 to run every trial whatever "
                                     "fails",
                                     &n) < 0)
                return -1;
            spec->search.fail_fast = (uint32_t) n;
        }
        else if (!strcmp (key, "seed")) {
            if (cgq_yamldoc_get_int (c->y, e, "search.seed", 0, LLONG_MAX, "write e.g. seed: 1",
                                     &n) < 0)
                return -1;
            spec->search.seed = (uint64_t) n;
        }
        else if (!strcmp (key, "population")) {
            if (s_get_u32 (c, e, "search.population", 2, "write e.g. population: 50",
                           &spec->search.population) < 0)
                return -1;
        }
        else if (!strcmp (key, "tournament")) {
            if (s_get_u32 (c, e, "search.tournament", 1, "write e.g. tournament: 5",
                           &spec->search.tournament) < 0)
                return -1;
        }
        else if (!strcmp (key, "initial")) {
            if (s_get_u32 (c, e, "search.initial", 1, "write e.g. initial: 50",
                           &spec->search.initial) < 0)
                return -1;
        }
        else if (!strcmp (key, "batch")) {
            if (s_get_u32 (c, e, "search.batch", 1, "write e.g. batch: 50", &spec->search.batch) <
                0)
                return -1;
        }
        else if (!strcmp (key, "candidates")) {
            if (s_get_u32 (c, e, "search.candidates", 1, "write e.g. candidates: 1000",
                           &spec->search.candidates) < 0)
                return -1;
        }
        else if (!strcmp (key, "multivariate")) {
            if (cgq_yamldoc_get_bool (c->y, e, "search.multivariate",
                                      "write multivariate: true for one joint model of all "
                                      "params, or false for one per param",
                                      &spec->search.multivariate) < 0)
                return -1;
        }
        else if (!strcmp (key, "popsize")) {
            if (cgq_yamldoc_get_int (c->y, e, "search.popsize", 2, CGQ_SPEC_CMAES_MAX_POPSIZE,
                                     "write e.g. popsize: 16, or leave it out for 4 + 3 "
                                     "ln(params)",
                                     &n) < 0)
                return -1;
            spec->search.popsize = (uint32_t) n;
        }
        else if (!strcmp (key, "restarts")) {
            if (cgq_yamldoc_get_int (c->y, e, "search.restarts", 0, 30,
                                     "write e.g. restarts: 3 (each doubles popsize)", &n) < 0)
                return -1;
            spec->search.restarts = (uint32_t) n;
        }
        else if (!strcmp (key, "sigma0")) {
            double d;
            if (cgq_yamldoc_get_number (c->y, e, "search.sigma0", "write e.g. sigma0: 0.2", &d) <
                0)
                return -1;
            if (!(d > 0 && d <= 1))
                return cgq_yamldoc_fail (c->y, e,
                                         "search.sigma0 must be in (0, 1], not %s (the step size "
                                         "in the box [0, 1] of every param; write e.g. sigma0: "
                                         "0.2)",
                                         cgq_yamldoc_text (e));
            spec->search.sigma0 = d;
        }
        else if (!strcmp (key, "metric")) {
            const char *m;
            if (cgq_yamldoc_get_text (c->y, e, "search.metric", "write e.g. metric: accuracy",
                                      &m) < 0)
                return -1;
            free (spec->search.pbt.metric);
            spec->search.pbt.metric = cgq_xstrdup (m);
            c->pbt_metric_node = e;
        }
        else if (!strcmp (key, "mode")) {
            const char *m;
            if (cgq_yamldoc_get_text (c->y, e, "search.mode", "write mode: max or mode: min",
                                      &m) < 0)
                return -1;
            if (strcmp (m, "max") && strcmp (m, "min"))
                return cgq_yamldoc_fail (c->y, e,
                                         "search.mode must be max or min, not '%s' (write mode: "
                                         "max)",
                                         m);
            spec->search.pbt.mode = !strcmp (m, "max") ? 1 : -1;
        }
        else if (!strcmp (key, "time_attr")) {
            const char *m;
            if (cgq_yamldoc_get_text (c->y, e, "search.time_attr",
                                      "write e.g. time_attr: epoch (the step attribute the trial "
                                      "reports and checkpoints with)",
                                      &m) < 0)
                return -1;
            free (spec->search.pbt.time_attr);
            spec->search.pbt.time_attr = cgq_xstrdup (m);
        }
        else if (!strcmp (key, "perturbation_interval")) {
            double d;
            if (cgq_yamldoc_get_number (c->y, e, "search.perturbation_interval",
                                        "write e.g. perturbation_interval: 4", &d) < 0)
                return -1;
            if (!(d > 0) || !isfinite (d))
                return cgq_yamldoc_fail (c->y, e,
                                         "search.perturbation_interval must be > 0, not %s (how "
                                         "many steps of time_attr between two looks at a trial; "
                                         "write e.g. perturbation_interval: 4)",
                                         cgq_yamldoc_text (e));
            spec->search.pbt.interval = d;
        }
        else if (!strcmp (key, "quantile_fraction")) {
            double d;
            if (cgq_yamldoc_get_number (c->y, e, "search.quantile_fraction",
                                        "write e.g. quantile_fraction: 0.25", &d) < 0)
                return -1;
            if (!(d > 0 && d <= 0.5))
                return cgq_yamldoc_fail (c->y, e,
                                         "search.quantile_fraction must be in (0, 0.5], not %s "
                                         "(the share of the population in the bottom, and in the "
                                         "top, quantile; write e.g. quantile_fraction: 0.25)",
                                         cgq_yamldoc_text (e));
            spec->search.pbt.quantile = d;
        }
        else if (!strcmp (key, "resample_probability")) {
            if (s_get_prob (c, e, "search.resample_probability",
                            "write e.g. resample_probability: 0.25",
                            &spec->search.pbt.resample) < 0)
                return -1;
            c->pbt_resample_given = true;
        }
        else if (!strcmp (key, "random_fraction")) {
            if (s_get_prob (c, e, "search.random_fraction",
                            "write e.g. random_fraction: 0.33 (BOHB's share of configurations "
                            "drawn at random after the startup)",
                            &spec->search.random_fraction) < 0)
                return -1;
            c->random_fraction_given = true;
        }
        else if (!strcmp (key, "hyperparam_mutations")) {
            bool map = e->type == CGQ_YAMLDOC_MAP;
            if (!map && e->type != CGQ_YAMLDOC_SEQ)
                return cgq_yamldoc_fail (c->y, e,
                                         "search.hyperparam_mutations must be a list of param "
                                         "names or a mapping of them (write e.g. "
                                         "hyperparam_mutations: [lr, momentum])");
            if (map && cgq_yamldoc_check_keys (c->y, e) < 0)
                return -1;
            c->pbt_mutations = e;
        }
        else if (!strcmp (key, "crossover")) {
            if (s_get_prob (c, e, "search.crossover", "write e.g. crossover: 0.9",
                            &spec->search.crossover) < 0)
                return -1;
        }
        else if (!strcmp (key, "mutation")) {
            if (s_get_prob (c, e, "search.mutation",
                            "write e.g. mutation: 0.1, or leave it out for 1/(number of genes)",
                            &spec->search.mutation) < 0)
                return -1;
        }
        else if (!strcmp (key, "points")) {
            if (c->file_key)
                return cgq_yamldoc_fail (c->y, k,
                                         "search has both points and file (keep one of them)");
            char buf[96];
            if (e->type != CGQ_YAMLDOC_SEQ || cgq_yamldoc_nitems (e) == 0)
                return cgq_yamldoc_fail (
                    c->y, e,
                    "search.points must be a non-empty list of points, not %s (write "
                    "points: [{lr: 0.01, hidden: 64}, {lr: 0.1, hidden: 128}])",
                    e->type == CGQ_YAMLDOC_SEQ ? "an empty list"
                                               : cgq_yamldoc_what (e, buf, sizeof buf));
            for (size_t i = 0; i < cgq_yamldoc_nitems (e); i++) {
                const cgq_yamldoc_node_t *pt = cgq_yamldoc_item (c->y, e, i);
                if (pt->type != CGQ_YAMLDOC_MAP)
                    return cgq_yamldoc_fail (
                        c->y, pt,
                        "search.points[%zu] must be a mapping of param values, not %s "
                        "(write {lr: 0.01, hidden: 64})",
                        i, cgq_yamldoc_what (pt, buf, sizeof buf));
            }
            json_decref (spec->search.points);
            spec->search.points = cgq_yamldoc_to_json (c->y, e);
            if (!spec->search.points)
                return -1;
            c->points_node = e;
        }
        else if (!strcmp (key, "warm_start")) {
            if (s_parse_warm_start (c, spec, e) < 0)
                return -1;
        }
        else if (!strcmp (key, "file")) {
            if (c->points_node)
                return cgq_yamldoc_fail (c->y, k,
                                         "search has both points and file (keep one of them)");
            c->file_key = k;
            if (s_read_points_file (c, spec, e) < 0)
                return -1;
        }
    }
    if (alg == CGQ_SEARCH_LIST && !c->points_node && !c->file_key)
        return cgq_yamldoc_fail (
            c->y, c->alg_node,
            "algorithm list needs the points to try (write points: [{lr: 0.01}, "
            "...] or file: points.jsonl)");
    // Defaults that depend on the algorithm.
    if (alg == CGQ_SEARCH_EXTERNAL && !samples_given)
        spec->search.samples = CGQ_SPEC_EXTERNAL_SAMPLES;
    bool evo = alg == CGQ_SEARCH_EVOLUTION, ns = alg == CGQ_SEARCH_NSGA2;
    if (!spec->search.population)
        spec->search.population = alg == CGQ_SEARCH_PBT ? 8 : 50;
    if (!spec->search.pbt.quantile)
        spec->search.pbt.quantile = 0.25;
    if (!c->pbt_resample_given)
        spec->search.pbt.resample = 0.25;
    if (!c->random_fraction_given)
        spec->search.random_fraction = 1.0 / 3; // BOHB's, as HpBandSter's
    if (alg != CGQ_SEARCH_BOHB)
        spec->search.random_fraction = 0;
    if (!spec->search.tournament)
        spec->search.tournament = 5;
    if (!spec->search.initial)
        spec->search.initial =
            alg == CGQ_SEARCH_BAYES || alg == CGQ_SEARCH_TPE || alg == CGQ_SEARCH_BOHB
                ? 10
                : spec->search.population;
    if (!spec->search.batch)
        spec->search.batch = spec->search.population;
    if (!spec->search.candidates)
        spec->search.candidates = alg == CGQ_SEARCH_TPE || alg == CGQ_SEARCH_BOHB ? 24 : 1000;
    if (!spec->search.sigma0)
        spec->search.sigma0 = 1.0 / 6;
    if (evo && spec->search.tournament > spec->search.population)
        return cgq_yamldoc_fail (
            c->y, v,
            "search.tournament %u is larger than search.population %u (a tournament "
            "draws from the population; write e.g. tournament: %u)",
            spec->search.tournament, spec->search.population,
            spec->search.population < 5 ? spec->search.population : 5);
    (void) ns;
    return 0;
}

// --- algorithm list: points ---------------------------------------------------

// s_csv_field reads one field of a CSV line at *p (comma separated, "..."
// quoting with "" for a quote) into a new JSON value: an integer, a real,
// true/false, or else text. Returns NULL with *bad set on a malformed quote.
static json_t *
s_csv_field (const char **p, bool *bad)
{
    cgq_buf_t b;
    cgq_buf_init (&b);
    const char *s = *p;
    bool quoted = *s == '"';
    if (quoted) {
        s++;
        for (;;) {
            if (!*s) {
                *bad = true;
                cgq_buf_fini (&b);
                return NULL;
            }
            if (*s == '"' && s[1] == '"')
                cgq_buf_append (&b, "\"", 1), s += 2;
            else if (*s == '"') {
                s++;
                break;
            }
            else
                cgq_buf_append (&b, s++, 1);
        }
        if (*s && *s != ',') {
            *bad = true;
            cgq_buf_fini (&b);
            return NULL;
        }
    }
    else {
        size_t n = strcspn (s, ",");
        cgq_buf_append (&b, s, n);
        s += n;
    }
    if (*s == ',')
        s++;
    *p = s;
    char *t = b.data ? b.data : (char *) "";
    json_t *v = NULL;
    if (!quoted && *t) {
        char *end;
        errno = 0;
        long long i = strtoll (t, &end, 10);
        if (!*end && !errno)
            v = json_integer (i);
        else {
            double d = strtod (t, &end);
            if (!*end && isfinite (d))
                v = json_real (d);
            else if (!strcmp (t, "true") || !strcmp (t, "false"))
                v = json_boolean (!strcmp (t, "true"));
        }
    }
    if (!v)
        v = json_string (t);
    if (!v)
        v = json_string (""); // not UTF-8: the point check names the param
    cgq_buf_fini (&b);
    return v;
}

// s_read_points_file reads search.file (relative to c->dir) into
// spec->search.points: .jsonl / .ndjson (one JSON object a line), .json (one
// array of objects) or .csv (a header of param names, then one point a line).
static int
s_read_points_file (spec_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *e)
{
    const char *name;
    if (cgq_yamldoc_get_text (c->y, e, "search.file", "write file: points.jsonl (or .csv, .json)",
                              &name) < 0)
        return -1;
    c->file_node = e;
    free (spec->search.file);
    spec->search.file = cgq_xstrdup (name);
    const char *dot = strrchr (name, '.');
    const char *ext = dot && !strchr (dot, '/') ? dot + 1 : "";
    int fmt = !strcmp (ext, "jsonl") || !strcmp (ext, "ndjson") ? 1
              : !strcmp (ext, "json")                           ? 2
              : !strcmp (ext, "csv")                            ? 3
                                                                : 0;
    if (!fmt)
        return cgq_yamldoc_fail (
            c->y, e,
            "search.file '%s' must end in .jsonl, .ndjson, .json or .csv (the format "
            "of the points)",
            name);
    if (!c->dir)
        return cgq_yamldoc_fail (
            c->y, e,
            "search.file '%s' is read where the spec file is, by cgq validate and "
            "cgq submit, which send its points inline (write points: [...] to pass "
            "them in the text)",
            name);
    char *path = name[0] == '/' ? cgq_xstrdup (name) : cgq_xasprintf ("%s/%s", c->dir, name);
    FILE *f = fopen (path, "rb");
    if (!f) {
        int rc = cgq_yamldoc_fail (c->y, e,
                                   "search.file '%s': cannot read %s: %s (the path is relative to "
                                   "the spec's directory)",
                                   name, path, strerror (errno));
        free (path);
        return rc;
    }
    free (path);
    cgq_buf_t b;
    cgq_buf_init (&b);
    char chunk[16384];
    size_t got;
    while (b.len <= cgq_spec_max_bytes () && (got = fread (chunk, 1, sizeof chunk, f)) > 0)
        cgq_buf_append (&b, chunk, got);
    fclose (f);
    if (b.len > cgq_spec_max_bytes ()) {
        cgq_buf_fini (&b);
        return cgq_yamldoc_fail (
            c->y, e,
            "search.file '%s' is longer than %lu bytes (the points travel inside the "
            "spec, which has that limit; split the search)",
            name, (unsigned long)cgq_spec_max_bytes ());
    }
    const char *text = b.data ? b.data : "";
    if (b.len && memchr (text, 0, b.len)) {
        cgq_buf_fini (&b);
        return cgq_yamldoc_fail (c->y, e,
                                 "search.file '%s' holds a NUL byte (points are UTF-8 text)", name);
    }
    json_t *points = json_array ();
    size_t cap = 0, lineno = 0;
    int rc = 0;
    json_t *header = NULL;
    if (fmt == 2) {
        json_error_t je;
        json_t *all = json_loadb (text, b.len, 0, &je);
        if (!json_is_array (all))
            rc = cgq_yamldoc_fail (c->y, e, "search.file %s:%d: %s (write a JSON array of objects)",
                                   name, je.line, all ? "not a JSON array" : je.text);
        for (size_t i = 0; rc == 0 && i < json_array_size (all); i++) {
            if (!json_is_object (json_array_get (all, i)))
                rc = cgq_yamldoc_fail (c->y, e, "search.file %s: point %zu is not a JSON object",
                                       name, i);
            json_array_append (points, json_array_get (all, i));
        }
        json_decref (all);
    }
    for (const char *line = text; fmt != 2 && rc == 0 && line < text + b.len;) {
        const char *nl = memchr (line, '\n', (size_t) (text + b.len - line));
        size_t n = nl ? (size_t) (nl - line) : (size_t) (text + b.len - line);
        char *l = cgq_xstrndup (line, n);
        line += n + 1;
        lineno++;
        if (n && l[n - 1] == '\r')
            l[--n] = 0;
        const char *q = l;
        while (isspace ((unsigned char) *q))
            q++;
        if (!*q) {
            free (l);
            continue;
        }
        json_t *pt = NULL;
        if (fmt == 1) {
            json_error_t je;
            pt = json_loads (l, 0, &je);
            if (!json_is_object (pt))
                rc = cgq_yamldoc_fail (c->y, e,
                                       "search.file %s:%zu: %s (write one JSON object a line)",
                                       name, lineno, pt ? "not a JSON object" : je.text);
        }
        else if (!header) {
            header = json_array ();
            bool bad = false;
            for (const char *p = l; !bad && *p;) {
                json_t *h = s_csv_field (&p, &bad);
                if (h)
                    json_array_append_new (header, h);
            }
            if (bad)
                rc = cgq_yamldoc_fail (
                    c->y, e, "search.file %s:%zu: unterminated quote in the header", name, lineno);
            free (l);
            continue;
        }
        else {
            pt = json_object ();
            bool bad = false;
            size_t i = 0;
            for (const char *p = l; !bad && *p; i++) {
                json_t *val = s_csv_field (&p, &bad);
                if (!val)
                    break;
                json_t *h = json_array_get (header, i);
                if (!h) {
                    json_decref (val);
                    rc = cgq_yamldoc_fail (
                        c->y, e, "search.file %s:%zu: more fields than the header's %zu names",
                        name, lineno, json_array_size (header));
                    break;
                }
                char *hs = cgq_template_value_str (h);
                json_object_set_new (pt, hs, val);
                free (hs);
            }
            if (bad)
                rc = cgq_yamldoc_fail (c->y, e, "search.file %s:%zu: unterminated quote", name,
                                       lineno);
            else if (rc == 0 && i != json_array_size (header))
                rc = cgq_yamldoc_fail (c->y, e,
                                       "search.file %s:%zu: %zu fields, the header has %zu names",
                                       name, lineno, i, json_array_size (header));
        }
        free (l);
        if (rc < 0) {
            json_decref (pt);
            break;
        }
        size_t at = json_array_size (points);
        if (at == cap) {
            cap = cap ? 2 * cap : 64;
            c->point_lines = cgq_xrealloc (c->point_lines, cap * sizeof *c->point_lines);
        }
        c->point_lines[at] = lineno;
        json_array_append_new (points, pt);
    }
    json_decref (header);
    cgq_buf_fini (&b);
    if (rc == 0 && json_array_size (points) == 0)
        rc = cgq_yamldoc_fail (c->y, e, "search.file '%s' holds no points (write one point a line)",
                               name);
    if (rc < 0) {
        json_decref (points);
        return -1;
    }
    json_decref (spec->search.points);
    spec->search.points = points;
    return 0;
}

// s_check_points checks every point of algorithm list against the space: a
// value for each param that is not a constant, and no other names.
static int
s_check_points (spec_ctx_t *c, cgq_spec_t *spec)
{
    for (size_t i = 0; i < json_array_size (spec->search.points); i++) {
        json_t *pt = json_array_get (spec->search.points, i);
        const cgq_yamldoc_node_t *at =
            c->points_node ? cgq_yamldoc_item (c->y, c->points_node, i) : c->file_node;
        char where[512];
        if (c->points_node)
            snprintf (where, sizeof where, "search.points[%zu]", i);
        else if (c->point_lines)
            snprintf (where, sizeof where, "point of %s:%zu", spec->search.file,
                      c->point_lines[i]);
        else
            snprintf (where, sizeof where, "point %zu of %s", i, spec->search.file);
        const char *key;
        json_t *val;
        json_object_foreach (pt, key, val)
        {
            const cgq_param_t *p = cgq_spec_param (spec, key);
            if (!p)
                return cgq_yamldoc_fail (
                    c->y, at,
                    "%s names '%s', which is not a param of space (declare it in "
                    "space, e.g. %s: {choice: [...]}, or remove it)",
                    where, key, key);
            if (p->kind == CGQ_PARAM_CONST)
                return cgq_yamldoc_fail (
                    c->y, at,
                    "%s sets '%s', a constant of space (remove it from the point, or "
                    "make the param a distribution)",
                    where, key);
        }
        for (size_t j = 0; j < spec->nparams; j++) {
            const cgq_param_t *p = &spec->params[j];
            if (p->kind != CGQ_PARAM_CONST && !json_object_get (pt, p->name))
                return cgq_yamldoc_fail (c->y, at,
                                         "%s has no value for param '%s' (every point sets every "
                                         "param that is not a constant)",
                                         where, p->name);
        }
    }
    return 0;
}

// s_check_pbt: population based training continues trials from others'
// checkpoints, ranks them by one metric, and perturbs the params it names.
static int
s_check_pbt (spec_ctx_t *c, cgq_spec_t *spec)
{
    const cgq_yamldoc_node_t *at = c->alg_node;
    if (!c->checkpoint_key)
        return cgq_yamldoc_fail (
            c->y, at,
            "algorithm pbt continues trials from each other's checkpoints, and the spec has no "
            "checkpoint section (write checkpoint: {store: /shared/ckpt}, a directory every "
            "worker sees, and make the trial call cgq.checkpoint())");
    if (!spec->search.pbt.interval)
        return cgq_yamldoc_fail (c->y, at,
                                 "algorithm pbt needs search.perturbation_interval (write e.g. "
                                 "perturbation_interval: 4, in steps of time_attr)");
    if (!spec->search.pbt.metric) {
        if (spec->nobjectives != 1 || !spec->objective.metric || spec->objective.expr)
            return cgq_yamldoc_fail (c->y, at,
                                     "algorithm pbt ranks the population by one reported metric "
                                     "(write search.metric: NAME and search.mode: max, or "
                                     "objective: {metric: NAME, mode: max})");
        spec->search.pbt.metric = cgq_xstrdup (spec->objective.metric);
        if (!spec->search.pbt.mode)
            spec->search.pbt.mode = spec->objective.mode;
    }
    if (!spec->search.pbt.mode)
        return cgq_yamldoc_fail (c->y, c->pbt_metric_node ? c->pbt_metric_node : at,
                                 "search.metric needs search.mode (write mode: max or mode: min)");
    if (!spec->search.pbt.time_attr)
        spec->search.pbt.time_attr = cgq_xstrdup ("epoch");
    const cgq_yamldoc_node_t *m = c->pbt_mutations;
    if (!m)
        return cgq_yamldoc_fail (c->y, at,
                                 "algorithm pbt needs search.hyperparam_mutations, the params "
                                 "it perturbs (write e.g. hyperparam_mutations: [lr])");
    bool map = m->type == CGQ_YAMLDOC_MAP;
    size_t n = map ? cgq_yamldoc_npairs (m) : cgq_yamldoc_nitems (m);
    if (n == 0 || n > CGQ_SPEC_PBT_MAX_MUTATIONS)
        return cgq_yamldoc_fail (c->y, m,
                                 "search.hyperparam_mutations names %zu params (write 1 to %d "
                                 "param names of space, e.g. [lr])",
                                 n, CGQ_SPEC_PBT_MAX_MUTATIONS);
    for (size_t i = 0; i < n; i++) {
        const cgq_yamldoc_node_t *e = map ? cgq_yamldoc_key (c->y, m, i) : cgq_yamldoc_item (c->y, m, i);
        if (map) {
            const cgq_yamldoc_node_t *val = cgq_yamldoc_val (c->y, m, i);
            if (!cgq_yamldoc_is_null (val) &&
                !(val->type == CGQ_YAMLDOC_MAP && cgq_yamldoc_npairs (val) == 0))
                return cgq_yamldoc_fail (c->y, val,
                                         "search.hyperparam_mutations.%s must be {} (the param "
                                         "is resampled from its own space entry; write %s: {})",
                                         cgq_yamldoc_text (e), cgq_yamldoc_text (e));
        }
        const char *name;
        if (cgq_yamldoc_get_text (c->y, e, "a name of search.hyperparam_mutations",
                                  "write a param name of space, e.g. lr", &name) < 0)
            return -1;
        size_t j = 0;
        while (j < spec->nparams && strcmp (spec->params[j].name, name))
            j++;
        if (j == spec->nparams)
            return cgq_yamldoc_fail (c->y, e,
                                     "search.hyperparam_mutations names '%s', which is not a "
                                     "param of space (write one of the space's names)",
                                     name);
        const cgq_param_t *p = &spec->params[j];
        if (p->kind == CGQ_PARAM_CONST || p->kind == CGQ_PARAM_REPEAT ||
            p->kind == CGQ_PARAM_ASSIGNMENT)
            return cgq_yamldoc_fail (c->y, e,
                                     "search.hyperparam_mutations names '%s', which pbt cannot "
                                     "perturb (a constant, repeat or assignment; pbt perturbs "
                                     "choice, grid, randint, uniform, loguniform and their q "
                                     "forms)",
                                     name);
        for (size_t k = 0; k < spec->search.pbt.nmutations; k++)
            if (spec->search.pbt.mutations[k] == j)
                return cgq_yamldoc_fail (c->y, e,
                                         "search.hyperparam_mutations names '%s' twice", name);
        spec->search.pbt.mutations[spec->search.pbt.nmutations++] = j;
    }
    return 0;
}

// spec_check_search checks what the algorithm needs from the rest of the spec.
int
spec_check_search (spec_ctx_t *c, cgq_spec_t *spec)
{
    cgq_search_alg_t alg = spec->search.algorithm;
    const cgq_yamldoc_node_t *at = c->alg_node;
    if (alg == CGQ_SEARCH_BOHB && spec->early_stop.algorithm != CGQ_EARLY_STOP_HYPERBAND)
        return cgq_yamldoc_fail (
            c->y, at,
            "algorithm bohb proposes the configurations of hyperband's brackets and needs "
            "early_stop: {algorithm: hyperband, max_t: 81, reduction_factor: 3} (or write "
            "algorithm: tpe)");
    if ((alg == CGQ_SEARCH_EVOLUTION || alg == CGQ_SEARCH_BAYES || alg == CGQ_SEARCH_CMAES ||
         alg == CGQ_SEARCH_BOHB) &&
        spec->nobjectives != 1)
        return cgq_yamldoc_fail (
            c->y, at,
            "algorithm %s optimises one objective, and the spec has %s (write "
            "objective: {metric: NAME, mode: max}%s)",
            cgq_spec_search_name (alg), spec->nobjectives ? "several (objectives: [...])" : "none",
            spec->nobjectives ? ", or algorithm: nsga2 or tpe for a Pareto front" : "");
    if ((alg == CGQ_SEARCH_NSGA2 || alg == CGQ_SEARCH_TPE) && spec->nobjectives == 0)
        return cgq_yamldoc_fail (
            c->y, at,
            "algorithm %s needs objectives (write objective: {metric: NAME, mode: max}, or "
            "objectives: [{metric: time, mode: min}, {metric: memory, mode: min}])",
            cgq_spec_search_name (alg));
    if (alg == CGQ_SEARCH_LIST)
        return s_check_points (c, spec);
    if (alg == CGQ_SEARCH_PBT)
        return s_check_pbt (c, spec);
    if (alg == CGQ_SEARCH_CMAES)
        for (size_t i = 0; i < spec->nparams; i++) {
            const cgq_param_t *p = &spec->params[i];
            const cgq_param_t *e = p->kind == CGQ_PARAM_REPEAT ? p->of : p;
            if (e->kind == CGQ_PARAM_CHOICE || e->kind == CGQ_PARAM_GRID ||
                e->kind == CGQ_PARAM_ASSIGNMENT)
                return cgq_yamldoc_fail_at (
                    c->y, p->line, p->col,
                    "algorithm cmaes searches numeric params only, and param '%s' is "
                    "categorical (%s; use algorithm: tpe, which models categories, or make it "
                    "a randint/uniform)",
                    p->name,
                    e->kind == CGQ_PARAM_CHOICE ? "choice"
                    : e->kind == CGQ_PARAM_GRID ? "grid"
                                                : "assignment");
        }
    return 0;
}
