// runcfg: runner.yaml → cgq_runcfg_t, read through common/yamldoc.c, the
// bounded reader of specs: a broken or hostile file (160 KB of '[') is
// refused at once rather than stalling the runner's start. Every error names
// FILE:LINE:COL, says what is wrong and what to write; unknown keys are
// errors (with the key most likely meant), so that a typo cannot silently
// change how a device is measured.
#include "runcfg.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "yamldoc.h"

#define S_DEFAULT_CACHE_DIR "./.cgq/artifacts"
#define S_DEFAULT_CACHE_MAX (1ull << 30)
#define S_DEFAULT_MAX_SAMPLES 1000

typedef struct {
    cgq_yamldoc_t *y; // the file's tree, and the first error
} s_ctx_t;

// s_scalar checks that n is a non-empty scalar and returns its text.
static const char *
s_scalar (s_ctx_t *c, const cgq_yamldoc_node_t *n, const char *what, const char *hint)
{
    if (n->type != CGQ_YAMLDOC_SCALAR || n->len == 0) {
        cgq_yamldoc_fail (c->y, n, "%s needs a value (%s)", what, hint);
        return NULL;
    }
    if (strlen (n->text) != n->len) {
        cgq_yamldoc_fail (c->y, n, "%s holds a NUL byte", what);
        return NULL;
    }
    return n->text;
}

static int
s_string (s_ctx_t *c, const cgq_yamldoc_node_t *n, const char *what, const char *hint, char **out)
{
    const char *t = s_scalar (c, n, what, hint);
    if (!t)
        return -1;
    free (*out);
    *out = cgq_xstrdup (t);
    return 0;
}

static int
s_duration (s_ctx_t *c, const cgq_yamldoc_node_t *n, const char *what, double *out)
{
    const char *t = s_scalar (c, n, what, "a duration such as 500ms, 2s or 1m");
    if (!t)
        return -1;
    double v;
    if (cgq_parse_duration (t, &v) < 0 || v < 0 || !isfinite (v))
        return cgq_yamldoc_fail (c->y, n, "%s: '%s' is not a duration (write e.g. 500ms, 2s, 1m)",
                                 what, t);
    *out = v;
    return 0;
}

static int
s_count (s_ctx_t *c, const cgq_yamldoc_node_t *n, const char *what, uint64_t max, uint64_t *out)
{
    const char *t = s_scalar (c, n, what, "a whole number");
    if (!t)
        return -1;
    uint64_t v;
    if (cgq_parse_u64 (t, &v) < 0 || v > max)
        return cgq_yamldoc_fail (c->y, n, "%s: '%s' is not a whole number from 0 to %llu", what, t,
                                 (unsigned long long)max);
    *out = v;
    return 0;
}

static int
s_u32 (s_ctx_t *c, const cgq_yamldoc_node_t *n, const char *what, uint32_t *out)
{
    uint64_t v;
    if (s_count (c, n, what, 1000000000, &v) < 0)
        return -1;
    *out = (uint32_t) v;
    return 0;
}

static void
s_kv_fini (cgq_kv_t *kv)
{
    for (size_t i = 0; i < kv->n; i++) {
        free (kv->keys[i]);
        free (kv->vals[i]);
    }
    free (kv->keys);
    free (kv->vals);
    memset (kv, 0, sizeof *kv);
}

static void
s_kv_add (cgq_kv_t *kv, const char *k, const char *v)
{
    kv->keys = cgq_xrealloc (kv->keys, (kv->n + 1) * sizeof *kv->keys);
    kv->vals = cgq_xrealloc (kv->vals, (kv->n + 1) * sizeof *kv->vals);
    kv->keys[kv->n] = cgq_xstrdup (k);
    kv->vals[kv->n++] = cgq_xstrdup (v);
}

// s_kv reads a mapping of scalars (tags, env). An empty value is allowed
// for env (a variable set to ""), not for tags.
static int
s_kv (s_ctx_t *c, const cgq_yamldoc_node_t *n, const char *what, bool env, cgq_kv_t *out)
{
    if (cgq_yamldoc_expect_map (c->y, n, what,
                                env ? "NAME: value" : "tag: value, e.g. device: odroid-xu4") < 0)
        return -1;
    for (size_t pi = 0; pi < cgq_yamldoc_npairs (n); pi++) {
        const cgq_yamldoc_node_t *k = cgq_yamldoc_key (c->y, n, pi),
                                 *v = cgq_yamldoc_val (c->y, n, pi);
        const char *key = s_scalar (c, k, what, "a name");
        if (!key)
            return -1;
        if (env && (strchr (key, '=') || isdigit ((unsigned char) key[0])))
            return cgq_yamldoc_fail (c->y, k, "%s: '%s' is not a variable name", what, key);
        if (!v || v->type != CGQ_YAMLDOC_SCALAR)
            return cgq_yamldoc_fail (c->y, v, "%s.%s must be a single value, not a list or mapping",
                                     what, key);
        if (!env && v->len == 0)
            return cgq_yamldoc_fail (c->y, v, "%s.%s needs a value", what, key);
        s_kv_add (out, key, v->text);
    }
    return 0;
}

static bool
s_is_word (const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!isalnum ((unsigned char) *s) && *s != '_' && *s != '-' && *s != '.')
            return false;
    return true;
}

int
cgq_runcfg_parse_cpus (const char *text, cpu_set_t *set)
{
    CPU_ZERO (set);
    const char *p = text;
    int n = 0;
    while (*p) {
        char *end;
        errno = 0;
        long a = strtol (p, &end, 10);
        if (end == p || errno || a < 0 || a >= CPU_SETSIZE)
            return -1;
        long b = a;
        p = end;
        if (*p == '-') {
            b = strtol (p + 1, &end, 10);
            if (end == p + 1 || errno || b < a || b >= CPU_SETSIZE)
                return -1;
            p = end;
        }
        for (long i = a; i <= b; i++)
            CPU_SET ((int) i, set);
        n++;
        if (*p == ',')
            p++;
        else if (*p)
            return -1;
    }
    return n > 0 ? 0 : -1;
}

static int
s_device (s_ctx_t *c, const cgq_yamldoc_node_t *n, cgq_runcfg_device_t *d)
{
    const char *known = "id, tags, env, setup, check, reset, transport";
    if (cgq_yamldoc_expect_map (c->y, n, "a device", "id: ..., tags: {...}") < 0)
        return -1;
    for (size_t pi = 0; pi < cgq_yamldoc_npairs (n); pi++) {
        const cgq_yamldoc_node_t *k = cgq_yamldoc_key (c->y, n, pi),
                                 *v = cgq_yamldoc_val (c->y, n, pi);
        const char *key = k->text;
        int rc;
        if (!strcmp (key, "id")) {
            rc = s_string (c, v, "devices[].id", "a name such as odroid-1", &d->id);
            if (rc == 0 && !s_is_word (d->id))
                rc = cgq_yamldoc_fail (
                    c->y, v, "bad device id '%s' (use letters, digits, '_', '-' and '.')", d->id);
        } else if (!strcmp (key, "tags"))
            rc = s_kv (c, v, "tags", false, &d->tags);
        else if (!strcmp (key, "env"))
            rc = s_kv (c, v, "env", true, &d->env);
        else if (!strcmp (key, "setup"))
            rc = s_string (c, v, "setup", "a shell command", &d->setup);
        else if (!strcmp (key, "check"))
            rc = s_string (c, v, "check", "a shell command", &d->check);
        else if (!strcmp (key, "reset"))
            rc = s_string (c, v, "reset", "a shell command", &d->reset);
        else if (!strcmp (key, "transport")) // transport.c
            rc = cgq_transport_parse (c->y, v, &d->transport);
        else
            rc = cgq_yamldoc_unknown_key (c->y, k, "device", known);
        if (rc < 0)
            return -1;
    }
    if (!d->id)
        return cgq_yamldoc_fail (c->y, n, "a device needs an id (write id: NAME)");
    return 0;
}

static int
s_unit_scale (s_ctx_t *c, const cgq_yamldoc_node_t *v, const char *what, bool time, double *scale)
{
    const char *t = s_scalar (c, v, what, time ? "us, ms or s" : "B, KiB, MiB or GiB");
    if (!t)
        return -1;
    static const struct {
        const char *name;
        double scale;
        bool time;
    } units[] = {
        {"ns", 1e-6, true}, {"us", 1e-3, true}, {"ms", 1, true}, {"s", 1000, true},
        {"B", 1.0 / 1024, false}, {"KiB", 1, false}, {"kB", 1, false}, {"KB", 1, false},
        {"MiB", 1024, false}, {"MB", 1024, false}, {"GiB", 1024 * 1024, false},
    };
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (units[i].time == time && !strcmp (units[i].name, t)) {
            *scale = units[i].scale;
            return 0;
        }
    return cgq_yamldoc_fail (c->y, v, "%s: unknown unit '%s' (expected one of: %s)", what, t,
                             time ? "ns, us, ms, s" : "B, KiB (= kB, KB), MiB (= MB), GiB");
}

// The most atoms a report regex may expand to. glibc's regcomp copies an atom
// once per repetition, and copies the copies for every quantifier around or
// after it, so stacked or nested repetitions ("a+++++", "((a{99}){99}){99}")
// cost memory and time exponential in their number: 150 bytes of runner.yaml
// took 24 GB and a minute (found by fuzz_runcfg). Its epsilon closures are
// quadratic in the optional copies besides: (a?){9000} takes 6 GB, so the
// bound is low; a report regex needs a few dozen atoms.
#define S_REGEX_MAX_ATOMS 1000
#define S_REGEX_MAX_DEPTH 32
// The most repetitions nested in one another ("(a+)+" is 2). A repetition of
// a group that can match nothing makes epsilon loops, and regcomp's closure
// of them grows exponentially with each level, whatever the atom count:
// "((a{,0}){,30}){03,}" is 155 atoms and never finished (fuzz_runcfg). A
// report regex needs one level, rarely two.
#define S_REGEX_MAX_NESTED 2

// s_interval reads the interval at p ('{'), as glibc does: "{n}", "{n,}",
// "{n,m}" and "{,m}" (= "{0,m}"). *times is the copies regcomp makes of the
// atom before it: the larger bound plus one (plus two when unbounded, where it
// adds a star), capped just past S_REGEX_MAX_ATOMS. Returns the interval's
// last character ('}', or where reading stopped: regcomp refuses the rest).
static const char *
s_interval (const char *p, unsigned long *times)
{
    unsigned long lo = 0, hi = 0;
    bool comma = false, upper = false;
    for (p++; *p && *p != '}'; p++) {
        if (*p == ',' && !comma)
            comma = true;
        else if (isdigit ((unsigned char) *p)) {
            unsigned long *n = comma ? &hi : &lo;
            *n = *n > S_REGEX_MAX_ATOMS ? *n : *n * 10 + (unsigned long) (*p - '0');
            upper |= comma;
        } else
            break;
    }
    unsigned long most = comma && upper ? (lo > hi ? lo : hi) : lo + comma;
    *times = most > S_REGEX_MAX_ATOMS ? S_REGEX_MAX_ATOMS + 1 : most + 1;
    return *p == '}' ? p : p - 1;
}

// s_regex_atoms estimates the atoms regcomp makes of an extended regex: a
// character or class counts 1, a group the sum of its contents, and a
// quantifier multiplies what it applies to by its largest count (+, * and ?
// by 2: regcomp adds a node to each copy).
// Returns at most S_REGEX_MAX_ATOMS + 1 (too big, or nested too deep). Sets
// *backref on a back-reference (\1 to \9), which makes regexec backtrack:
// exponential in the report's length.
static size_t
s_regex_atoms (const char *re, bool *backref)
{
    const size_t over = S_REGEX_MAX_ATOMS + 1;
    size_t sum[S_REGEX_MAX_DEPTH] = {0}, last = 0;
    // Repetition nesting: of the last atom, and the deepest inside each open group.
    int nest[S_REGEX_MAX_DEPTH] = {0}, lastnest = 0;
    int d = 0;
    for (const char *p = re; *p; p++) {
        size_t atom = 1;
        int atomnest = 0;
        if (*p == '(') {
            if (++d == S_REGEX_MAX_DEPTH)
                return over;
            sum[d] = last = 0;
            nest[d] = lastnest = 0;
            continue;
        }
        if (*p == '|') { // an alternative is a node of its own
            last = 0;
            lastnest = 0;
            if (++sum[d] > S_REGEX_MAX_ATOMS)
                return over;
            continue;
        }
        if (*p == '*' || *p == '?' || *p == '+' || *p == '{') {
            unsigned long times = 2;
            if (*p == '{')
                p = s_interval (p, &times);
            size_t grown = last * times; // last <= S_REGEX_MAX_ATOMS: no overflow
            sum[d] += grown - last;
            last = grown;
            if (++lastnest > S_REGEX_MAX_NESTED)
                return over;
            if (lastnest > nest[d])
                nest[d] = lastnest;
            if (sum[d] > S_REGEX_MAX_ATOMS)
                return over;
            continue;
        }
        if (*p == ')' && d > 0) {
            atomnest = nest[d];
            atom = sum[d--] + 1;
        }
        else if (*p == '\\' && p[1]) {
            if (p[1] >= '1' && p[1] <= '9')
                *backref = true;
            p++;
        }
        else if (*p == '[') { // a bracket expression, [:class:] and all, is one atom
            const char *q = p + 1;
            q += *q == '^';
            q += *q == ']';
            while (*q && *q != ']') {
                char kind = *q == '[' && q[1] && strchr (":.=", q[1]) ? q[1] : 0;
                const char *end = kind == ':' ? ":]" : kind == '.' ? ".]" : "=]";
                const char *close = kind ? strstr (q + 2, end) : NULL;
                q = close ? close + 2 : q + 1;
            }
            if (!*q)
                break; // unterminated: regcomp says so
            p = q;
        }
        last = atom;
        lastnest = atomnest;
        if (atomnest > nest[d])
            nest[d] = atomnest;
        sum[d] += atom;
        if (sum[d] > S_REGEX_MAX_ATOMS)
            return over;
    }
    return sum[0];
}

static int
s_regex (s_ctx_t *c, const cgq_yamldoc_node_t *v, const char *what, char **text, regex_t *re)
{
    if (s_string (c, v, what, "a POSIX extended regex with one group, e.g. 'time: ([0-9.]+) ms'",
                  text) < 0)
        return -1;
    bool backref = false;
    size_t atoms = s_regex_atoms (*text, &backref);
    if (backref) {
        free (*text);
        *text = NULL;
        return cgq_yamldoc_fail (
            c->y, v,
            "%s: back-references (\\1 to \\9) are not allowed: matching them takes "
            "time exponential in the report's length; match the text itself",
            what);
    }
    if (atoms > S_REGEX_MAX_ATOMS) {
        free (*text);
        *text = NULL;
        return cgq_yamldoc_fail (
            c->y, v,
            "%s: the regex repeats too much (more than %d atoms once its repetitions "
            "are expanded, repetitions nested more than %d deep, or groups nested %d "
            "deep): write a{2}b+ rather than (a{99}){99}, ((a?)*)+ or a+++",
            what, S_REGEX_MAX_ATOMS, S_REGEX_MAX_NESTED, S_REGEX_MAX_DEPTH);
    }
    int rc = regcomp (re, *text, REG_EXTENDED);
    if (rc != 0) {
        char msg[200];
        regerror (rc, re, msg, sizeof msg);
        free (*text);
        *text = NULL;
        return cgq_yamldoc_fail (c->y, v, "%s: bad regex: %s", what, msg);
    }
    if (re->re_nsub < 1) {
        regfree (re);
        free (*text);
        *text = NULL;
        return cgq_yamldoc_fail (c->y, v,
                                 "%s: the regex needs a group around the number, e.g. "
                                 "'latency: ([0-9.]+)'",
                                 what);
    }
    return 0;
}

static int
s_parse_section (s_ctx_t *c, const cgq_yamldoc_node_t *n, cgq_runcfg_bench_t *b)
{
    const char *known = "time, time_unit, memory, memory_unit";
    if (cgq_yamldoc_expect_map (c->y, n, "parse", "time: REGEX, time_unit: ms, memory: REGEX") < 0)
        return -1;
    const cgq_yamldoc_node_t *time_node = NULL;
    for (size_t pi = 0; pi < cgq_yamldoc_npairs (n); pi++) {
        const cgq_yamldoc_node_t *k = cgq_yamldoc_key (c->y, n, pi),
                                 *v = cgq_yamldoc_val (c->y, n, pi);
        const char *key = k->text;
        int rc;
        if (!strcmp (key, "time") && !b->time_re_text) {
            rc = s_regex (c, v, "parse.time", &b->time_re_text, &b->time_re);
            time_node = v;
        } else if (!strcmp (key, "memory") && !b->memory_re_text)
            rc = s_regex (c, v, "parse.memory", &b->memory_re_text, &b->memory_re);
        else if (!strcmp (key, "time_unit"))
            rc = s_unit_scale (c, v, "parse.time_unit", true, &b->time_scale);
        else if (!strcmp (key, "memory_unit"))
            rc = s_unit_scale (c, v, "parse.memory_unit", false, &b->memory_scale);
        else
            rc = cgq_yamldoc_unknown_key (c->y, k, "parse", known);
        if (rc < 0)
            return -1;
    }
    if (!time_node)
        return cgq_yamldoc_fail (c->y, n,
                                 "parse needs time: REGEX (its group 1 is one run's time)");
    return 0;
}

static void
s_bench_defaults (cgq_runcfg_bench_t *b, const char *name, double cooldown)
{
    memset (b, 0, sizeof *b);
    b->name = cgq_xstrdup (name);
    b->timing = CGQ_TIMING_PER_RUN;
    b->time_scale = 1;
    b->memory_scale = 1;
    b->warmup = 1;
    b->repeats = 10;
    b->max_time_s = 600;
    b->timeout_s = 60;
    b->cooldown_s = cooldown;
    b->max_samples = S_DEFAULT_MAX_SAMPLES;
    b->max_busy = 0.1;
    b->interference_reruns = 2;
    b->cooldown_max_wait_s = 120;
}

// s_measure_key reads the keys a benchmark shares with a stage's measure:
// that only a measurement does (governor, frequency, cooldown_below_c,
// cooldown_max_wait). Returns 0 or -1 when it read key, 1 when key is not one.
static int
s_measure_key (s_ctx_t *c, const char *key, const cgq_yamldoc_node_t *v, cgq_runcfg_bench_t *b)
{
    if (!strcmp (key, "governor")) {
        if (s_string (c, v, "governor", "a cpufreq governor such as performance", &b->governor)
            < 0)
            return -1;
        for (const char *p = b->governor; *p; p++)
            if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_')
                || p - b->governor >= 32)
                return cgq_yamldoc_fail (c->y, v,
                                         "governor: '%s' is not a cpufreq governor's name "
                                         "(lowercase letters, digits, '_'; e.g. performance)",
                                         b->governor);
        return b->governor[0] ? 0 : cgq_yamldoc_fail (c->y, v, "governor: empty");
    }
    if (!strcmp (key, "frequency")) {
        uint64_t u;
        if (s_count (c, v, "frequency", 100000000, &u) < 0)
            return -1;
        if (u == 0)
            return cgq_yamldoc_fail (c->y, v, "frequency: kHz, at least 1 (e.g. 1800000)");
        b->frequency_khz = u;
        return 0;
    }
    if (!strcmp (key, "cooldown_below_c")) {
        const char *t = s_scalar (c, v, key, "degrees Celsius such as 50");
        char *end = NULL;
        double d = t ? strtod (t, &end) : 0;
        if (!t)
            return -1;
        if (end == t || *end || !(d > 0 && d < 150))
            return cgq_yamldoc_fail (c->y, v,
                                     "cooldown_below_c: '%s' is not degrees Celsius between 0 "
                                     "and 150 (write e.g. 50)",
                                     t);
        b->cooldown_below_c = d;
        return 0;
    }
    if (!strcmp (key, "cooldown_max_wait"))
        return s_duration (c, v, "cooldown_max_wait", &b->cooldown_max_wait_s);
    return 1;
}

static int
s_bench (s_ctx_t *c, const cgq_yamldoc_node_t *kn, const cgq_yamldoc_node_t *n,
         cgq_runcfg_bench_t *b)
{
    const char *known = "command, env, timing, parse, builtin, warmup, warmup_min_time, repeats, "
                        "min_time, max_time, timeout, cpus, cooldown, max_samples, precision, "
                        "max_runs, max_busy, interference_reruns, governor, frequency, "
                        "cooldown_below_c, cooldown_max_wait";
    bool builtin = b->timing == CGQ_TIMING_BUILTIN;
    if (cgq_yamldoc_expect_map (c->y, n, "a benchmark", "command: ..., timing: per-run") < 0)
        return -1;
    const cgq_yamldoc_node_t *timing_node = NULL, *parse_node = NULL, *cmd_node = NULL;
    bool timing_parse = false;
    for (size_t pi = 0; pi < cgq_yamldoc_npairs (n); pi++) {
        const cgq_yamldoc_node_t *k = cgq_yamldoc_key (c->y, n, pi),
                                 *v = cgq_yamldoc_val (c->y, n, pi);
        const char *key = k->text;
        int rc = 0;
        uint64_t u;
        if (!strcmp (key, "command")) {
            cmd_node = v;
            if (v && v->type == CGQ_YAMLDOC_SEQ) {
                for (size_t i = 0; i < cgq_yamldoc_nitems (v) && rc == 0; i++) {
                    const char *a =
                        s_scalar (c, cgq_yamldoc_item (c->y, v, i), "command[]", "an argument");
                    if (!a)
                        return -1;
                    b->argv = cgq_xrealloc (b->argv, (b->argc + 2) * sizeof *b->argv);
                    b->argv[b->argc++] = cgq_xstrdup (a);
                    b->argv[b->argc] = NULL;
                }
                if (b->argc == 0)
                    rc = cgq_yamldoc_fail (c->y, v, "command: an empty list runs nothing");
            }
            else
                rc = s_string (c, v, "command", "a shell command, or a list [program, args...]",
                               &b->command);
        } else if (!strcmp (key, "env"))
            rc = s_kv (c, v, "env", true, &b->env);
        else if (!strcmp (key, "timing")) {
            timing_node = v;
            const char *t = s_scalar (c, v, "timing", "per-run or parse");
            if (!t)
                return -1;
            if (!strcmp (t, "per-run"))
                timing_parse = false;
            else if (!strcmp (t, "parse"))
                timing_parse = true;
            else
                rc = cgq_yamldoc_fail (
                    c->y, v,
                    "timing: unknown '%s' (expected per-run: the runner times each "
                    "run, or parse: regexes read the tool's report)",
                    t);
        } else if (!strcmp (key, "parse")) {
            parse_node = v;
            rc = s_parse_section (c, v, b);
        } else if (!strcmp (key, "builtin")) {
            const char *t = s_scalar (c, v, "builtin", CGQ_RUNCFG_CPU_LOCAL);
            if (!t)
                return -1;
            if (strcmp (t, CGQ_RUNCFG_CPU_LOCAL) != 0)
                rc = cgq_yamldoc_fail (
                    c->y, v,
                    "builtin: unknown '%s' (the built-in benchmark is " CGQ_RUNCFG_CPU_LOCAL ")",
                    t);
            builtin = true;
        } else if (!strcmp (key, "warmup"))
            rc = s_u32 (c, v, "warmup", &b->warmup);
        else if (!strcmp (key, "warmup_min_time"))
            rc = s_duration (c, v, "warmup_min_time", &b->warmup_min_s);
        else if (!strcmp (key, "repeats")) {
            rc = s_u32 (c, v, "repeats", &b->repeats);
            if (rc == 0 && b->repeats == 0)
                rc = cgq_yamldoc_fail (c->y, v, "repeats must be at least 1");
        } else if (!strcmp (key, "min_time"))
            rc = s_duration (c, v, "min_time", &b->min_time_s);
        else if (!strcmp (key, "precision") || !strcmp (key, "max_busy")) {
            bool prec = !strcmp (key, "precision");
            const char *t = s_scalar (c, v, key, "a fraction such as 0.02");
            char *end = NULL;
            double d = t ? strtod (t, &end) : 0;
            if (!t)
                rc = -1;
            else if (end == t || *end || !(d > 0 && d < 1))
                rc = cgq_yamldoc_fail (c->y, v,
                                       "%s: '%s' is not a fraction between 0 and 1 "
                                       "(write e.g. %s)",
                                       key, t, prec ? "0.02 for ±2 % of the median" : "0.1");
            else if (prec)
                b->precision = d;
            else
                b->max_busy = d;
        } else if (!strcmp (key, "interference_reruns"))
            rc = s_u32 (c, v, "interference_reruns", &b->interference_reruns);
        else if (!strcmp (key, "max_runs")) {
            rc = s_u32 (c, v, "max_runs", &b->max_runs);
            if (rc == 0 && b->max_runs == 0)
                rc = cgq_yamldoc_fail (c->y, v, "max_runs must be at least 1");
        }
        else if (!strcmp (key, "max_time"))
            rc = s_duration (c, v, "max_time", &b->max_time_s);
        else if (!strcmp (key, "timeout"))
            rc = s_duration (c, v, "timeout", &b->timeout_s);
        else if (!strcmp (key, "cooldown"))
            rc = s_duration (c, v, "cooldown", &b->cooldown_s);
        else if (!strcmp (key, "max_samples")) {
            rc = s_count (c, v, "max_samples", 1000000, &u);
            b->max_samples = (size_t) u;
        } else if (!strcmp (key, "cpus")) {
            rc = s_string (c, v, "cpus", "CPU numbers such as 0,2-3", &b->cpus_text);
            if (rc == 0 && cgq_runcfg_parse_cpus (b->cpus_text, &b->cpus) < 0)
                rc = cgq_yamldoc_fail (
                    c->y, v, "cpus: '%s' is not a CPU list (write e.g. 2 or 0,2-3)", b->cpus_text);
            b->pin = rc == 0;
        } else if ((rc = s_measure_key (c, key, v, b)) > 0)
            rc = cgq_yamldoc_unknown_key (c->y, k, "benchmark", known);
        if (rc < 0)
            return -1;
    }
    if (b->precision > 0 && b->max_runs == 0)
        b->max_runs = 1000;
    if (b->max_time_s > 0 && b->min_time_s > b->max_time_s)
        return cgq_yamldoc_fail (
            c->y, n, "min_time is longer than max_time: no measurement could meet both");
    if (builtin) {
        if (strcmp (b->name, CGQ_RUNCFG_CPU_LOCAL) != 0)
            return cgq_yamldoc_fail (c->y, kn,
                                     "builtin: " CGQ_RUNCFG_CPU_LOCAL
                                     " goes under the name " CGQ_RUNCFG_CPU_LOCAL ", not '%s'",
                                     b->name);
        if (cmd_node || timing_node || parse_node)
            return cgq_yamldoc_fail (c->y,
                                     cmd_node      ? cmd_node
                                     : timing_node ? timing_node
                                                   : parse_node,
                                     "the built-in " CGQ_RUNCFG_CPU_LOCAL
                                     " runs the CG engine in-process: "
                                     "it takes no command, timing or parse");
        b->timing = CGQ_TIMING_BUILTIN;
        return 0;
    }
    if (!cmd_node)
        return cgq_yamldoc_fail (c->y, n,
                                 "benchmark '%s' needs a command (write command: nnpackage_run "
                                 "--nnpackage {artifact}, or a list)",
                                 b->name);
    if (timing_parse && !parse_node)
        return cgq_yamldoc_fail (c->y, timing_node,
                                 "timing: parse needs a parse: {time: REGEX} section");
    if (parse_node && !timing_parse)
        return cgq_yamldoc_fail (c->y, parse_node,
                                 "parse: goes with timing: parse (add it, or remove parse)");
    b->timing = timing_parse ? CGQ_TIMING_PARSE : CGQ_TIMING_PER_RUN;
    return 0;
}

static int
s_cache (s_ctx_t *c, const cgq_yamldoc_node_t *n, cgq_runcfg_t *cfg)
{
    const char *known = "dir, max_size, max_artifact, connect_timeout, timeout, retries";
    if (cgq_yamldoc_expect_map (c->y, n, "cache", "dir: PATH, max_size: 2G") < 0)
        return -1;
    for (size_t pi = 0; pi < cgq_yamldoc_npairs (n); pi++) {
        const cgq_yamldoc_node_t *k = cgq_yamldoc_key (c->y, n, pi),
                                 *v = cgq_yamldoc_val (c->y, n, pi);
        const char *key = k->text;
        int rc;
        if (!strcmp (key, "dir"))
            rc = s_string (c, v, "cache.dir", "a directory", &cfg->cache_dir);
        else if (!strcmp (key, "max_size")) {
            const char *t = s_scalar (c, v, "cache.max_size", "a size such as 2G");
            if (!t)
                return -1;
            rc = cgq_parse_bytes (t, &cfg->cache_max) < 0 || cfg->cache_max == 0
                     ? cgq_yamldoc_fail (
                           c->y, v, "cache.max_size: '%s' is not a size (write e.g. 512M, 2G)", t)
                     : 0;
        } else if (!strcmp (key, "max_artifact")) {
            const char *t = s_scalar (c, v, "cache.max_artifact", "a size such as 256M");
            if (!t)
                return -1;
            rc = cgq_parse_bytes (t, &cfg->max_artifact) < 0 || cfg->max_artifact == 0
                     ? cgq_yamldoc_fail (
                           c->y, v, "cache.max_artifact: '%s' is not a size (write e.g. 256M, 2G)",
                           t)
                     : 0;
        } else if (!strcmp (key, "connect_timeout"))
            rc = s_duration (c, v, "cache.connect_timeout", &cfg->connect_timeout_s);
        else if (!strcmp (key, "timeout"))
            rc = s_duration (c, v, "cache.timeout", &cfg->transfer_timeout_s);
        else if (!strcmp (key, "retries"))
            rc = s_u32 (c, v, "cache.retries", &cfg->retries);
        else
            rc = cgq_yamldoc_unknown_key (c->y, k, "cache", known);
        if (rc < 0)
            return -1;
    }
    return 0;
}

static cgq_runcfg_bench_t *
s_add_bench (cgq_runcfg_t *cfg, const char *name)
{
    cfg->benches = cgq_xrealloc (cfg->benches, (cfg->nbenches + 1) * sizeof *cfg->benches);
    cgq_runcfg_bench_t *b = &cfg->benches[cfg->nbenches++];
    s_bench_defaults (b, name, cfg->cooldown_s);
    return b;
}

static int
s_root (s_ctx_t *c, const cgq_yamldoc_node_t *root, cgq_runcfg_t *cfg)
{
    const char *known = "coordinator, id, cache, cooldown, devices, benchmarks";
    if (!root || (root->type == CGQ_YAMLDOC_SCALAR && root->len == 0))
        return cgq_yamldoc_fail (c->y, root,
                                 "the file is empty (write devices: and benchmarks:, see "
                                 "docs/devices.md)");
    if (cgq_yamldoc_expect_map (c->y, root, "runner.yaml", "coordinator:, devices:, benchmarks:") <
        0)
        return -1;
    const cgq_yamldoc_node_t *devices = NULL, *benches = NULL;
    // cooldown first: it is every benchmark's default.
    for (size_t pi = 0; pi < cgq_yamldoc_npairs (root); pi++) {
        const cgq_yamldoc_node_t *k = cgq_yamldoc_key (c->y, root, pi),
                                 *v = cgq_yamldoc_val (c->y, root, pi);
        const char *key = k->text;
        int rc = 0;
        if (!strcmp (key, "coordinator"))
            rc = s_string (c, v, "coordinator", "an endpoint such as tcp://host:7700",
                           &cfg->coordinator);
        else if (!strcmp (key, "id"))
            rc = s_string (c, v, "id", "this runner's node id", &cfg->id);
        else if (!strcmp (key, "cache"))
            rc = s_cache (c, v, cfg);
        else if (!strcmp (key, "cooldown"))
            rc = s_duration (c, v, "cooldown", &cfg->cooldown_s);
        else if (!strcmp (key, "devices"))
            devices = v;
        else if (!strcmp (key, "benchmarks"))
            benches = v;
        else
            rc = cgq_yamldoc_unknown_key (c->y, k, "runner.yaml", known);
        if (rc < 0)
            return -1;
    }
    if (!devices)
        return cgq_yamldoc_fail (c->y, root,
                                 "no devices: (write devices: [{id: NAME, tags: {device: KIND}}])");
    if (devices->type != CGQ_YAMLDOC_SEQ || cgq_yamldoc_nitems (devices) == 0)
        return cgq_yamldoc_fail (c->y, devices,
                                 "devices must be a non-empty list of {id, tags, ...}");
    for (size_t i = 0; i < cgq_yamldoc_nitems (devices); i++) {
        cfg->devices = cgq_xrealloc (cfg->devices, (cfg->ndevices + 1) * sizeof *cfg->devices);
        cgq_runcfg_device_t *d = &cfg->devices[cfg->ndevices++];
        memset (d, 0, sizeof *d);
        const cgq_yamldoc_node_t *dn = cgq_yamldoc_item (c->y, devices, i);
        if (s_device (c, dn, d) < 0)
            return -1;
        for (size_t i = 0; i + 1 < cfg->ndevices; i++)
            if (!strcmp (cfg->devices[i].id, d->id))
                return cgq_yamldoc_fail (c->y, dn, "device id '%s' is given twice", d->id);
    }
    // The built-in first, so that a cpu-local: entry adjusts it.
    s_add_bench (cfg, CGQ_RUNCFG_CPU_LOCAL)->timing = CGQ_TIMING_BUILTIN;
    if (!benches)
        return 0;
    if (cgq_yamldoc_expect_map (c->y, benches, "benchmarks",
                                "NAME: {command: ..., timing: per-run}") < 0)
        return -1;
    bool cpu_local_seen = false;
    for (size_t pi = 0; pi < cgq_yamldoc_npairs (benches); pi++) {
        const cgq_yamldoc_node_t *k = cgq_yamldoc_key (c->y, benches, pi),
                                 *v = cgq_yamldoc_val (c->y, benches, pi);
        const char *name = s_scalar (c, k, "benchmarks", "a benchmark name");
        if (!name)
            return -1;
        if (!s_is_word (name))
            return cgq_yamldoc_fail (
                c->y, k, "bad benchmark name '%s' (use letters, digits, '_', '-' and '.')", name);
        cgq_runcfg_bench_t *b = (cgq_runcfg_bench_t *) cgq_runcfg_bench (cfg, name);
        bool is_builtin = !strcmp (name, CGQ_RUNCFG_CPU_LOCAL);
        if (b && (!is_builtin || cpu_local_seen))
            return cgq_yamldoc_fail (c->y, k, "benchmark '%s' is given twice", name);
        cpu_local_seen = cpu_local_seen || is_builtin;
        if (b) {
            // Redefine cpu-local's settings from scratch (builtin implied).
            free (b->name);
            s_bench_defaults (b, name, cfg->cooldown_s);
            b->timing = CGQ_TIMING_BUILTIN;
        } else
            b = s_add_bench (cfg, name);
        if (s_bench (c, k, v, b) < 0)
            return -1;
    }
    return 0;
}

cgq_runcfg_t *
cgq_runcfg_parse (const char *text, size_t len, const char *path, char *err, size_t errlen)
{
    cgq_runcfg_t *cfg = cgq_xcalloc (1, sizeof *cfg);
    cfg->path = cgq_xstrdup (path);
    cfg->cache_max = S_DEFAULT_CACHE_MAX;
    cfg->connect_timeout_s = 10;
    cfg->transfer_timeout_s = 600;
    cfg->retries = 2;
    s_ctx_t c = {.y = cgq_yamldoc_new (path, "runner file", err, errlen)};
    const cgq_yamldoc_node_t *root;
    int rc = cgq_yamldoc_load (
        c.y, text, len, 0, "a runner.yaml names devices and benchmarks: is this the right file?",
        &root);
    if (rc == 0)
        rc = s_root (&c, root, cfg);
    if (rc == 0)
        rc = cgq_yamldoc_end (c.y);
    cgq_yamldoc_destroy (&c.y);
    if (rc < 0) {
        cgq_runcfg_destroy (&cfg);
        return NULL;
    }
    if (!cfg->cache_dir)
        cfg->cache_dir = cgq_xstrdup (S_DEFAULT_CACHE_DIR);
    if (!cfg->max_artifact)
        cfg->max_artifact = cfg->cache_max;
    return cfg;
}

cgq_runcfg_t *
cgq_runcfg_load (const char *path, char *err, size_t errlen)
{
    // One byte past the limit is enough for cgq_runcfg_parse to refuse it.
    cgq_buf_t b;
    cgq_buf_init (&b);
    if (cgq_yamldoc_read_file (path, CGQ_YAMLDOC_MAX_BYTES, &b) < 0) {
        snprintf (err, errlen, "cannot read %s: %s (check --config)", path, strerror (errno));
        cgq_buf_fini (&b);
        return NULL;
    }
    cgq_runcfg_t *cfg = cgq_runcfg_parse (b.data, b.len, path, err, errlen);
    cgq_buf_fini (&b);
    return cfg;
}

void
cgq_runcfg_destroy (cgq_runcfg_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cgq_runcfg_t *self = *self_p;
    for (size_t i = 0; i < self->ndevices; i++) {
        cgq_runcfg_device_t *d = &self->devices[i];
        free (d->id);
        s_kv_fini (&d->tags);
        s_kv_fini (&d->env);
        free (d->setup);
        free (d->check);
        free (d->reset);
        cgq_transport_fini (&d->transport);
    }
    free (self->devices);
    for (size_t i = 0; i < self->nbenches; i++) {
        cgq_runcfg_bench_t *b = &self->benches[i];
        free (b->name);
        free (b->command);
        for (size_t j = 0; j < b->argc; j++)
            free (b->argv[j]);
        free (b->argv);
        s_kv_fini (&b->env);
        if (b->time_re_text)
            regfree (&b->time_re);
        if (b->memory_re_text)
            regfree (&b->memory_re);
        free (b->time_re_text);
        free (b->memory_re_text);
        free (b->cpus_text);
        free (b->governor);
    }
    free (self->benches);
    free (self->path);
    free (self->coordinator);
    free (self->id);
    free (self->cache_dir);
    free (self);
    *self_p = NULL;
}

const cgq_runcfg_device_t *
cgq_runcfg_device (const cgq_runcfg_t *self, const char *id)
{
    for (size_t i = 0; id && i < self->ndevices; i++)
        if (!strcmp (self->devices[i].id, id))
            return &self->devices[i];
    return NULL;
}

const cgq_runcfg_bench_t *
cgq_runcfg_bench (const cgq_runcfg_t *self, const char *name)
{
    for (size_t i = 0; name && i < self->nbenches; i++)
        if (!strcmp (self->benches[i].name, name))
            return &self->benches[i];
    return NULL;
}

char *
cgq_runcfg_bench_names (const cgq_runcfg_t *self)
{
    cgq_buf_t b;
    cgq_buf_init (&b);
    for (size_t i = 0; i < self->nbenches; i++)
        cgq_buf_printf (&b, "%s%s", i ? ", " : "", self->benches[i].name);
    return cgq_buf_take (&b);
}
