#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util.h"
#include "yamldoc.h"

// One value read from a flag, waiting to be applied after the config file and
// the environment (flags win, but --config must be known before they apply).
typedef struct {
    const cgq_opt_t *opt;
    const char *value; // borrowed from argv, or a literal for bools
    char *name;        // how the user wrote it ("--heartbeat", "-r"), for messages
} s_flag_t;

static const char *
s_metavar (cgq_opt_type_t type)
{
    switch (type) {
    case CGQ_OPT_STRING:
    case CGQ_OPT_LIST: return "VALUE";
    case CGQ_OPT_INT: return "N";
    case CGQ_OPT_DOUBLE: return "X";
    case CGQ_OPT_BOOL: return "";
    case CGQ_OPT_DURATION_MS: return "DUR";
    case CGQ_OPT_BYTES: return "BYTES";
    }
    return "VALUE";
}

static const char *
s_expected (cgq_opt_type_t type)
{
    switch (type) {
    case CGQ_OPT_STRING:
    case CGQ_OPT_LIST: return "a string";
    case CGQ_OPT_INT: return "an integer (write e.g. 5, -3)";
    case CGQ_OPT_DOUBLE: return "a number (write e.g. 0.5, 2, 1e-3)";
    case CGQ_OPT_BOOL: return "a boolean (write true or false)";
    case CGQ_OPT_DURATION_MS: return "a duration (write e.g. 500ms, 2s, 1m)";
    case CGQ_OPT_BYTES: return "a size (write e.g. 512M, 4G, 1024)";
    }
    return "a value";
}

// Option names match with '-' and '_' taken as equal, so a config file may
// write dead_after for --dead-after.
static bool
s_name_eq (const char *a, const char *b, size_t blen)
{
    size_t i = 0;
    for (; i < blen && a[i]; i++) {
        char x = a[i] == '_' ? '-' : a[i];
        char y = b[i] == '_' ? '-' : b[i];
        if (x != y)
            return false;
    }
    return i == blen && a[i] == 0;
}

static const cgq_opt_t *
s_find_long (const cgq_opt_t *opts, const char *name, size_t len)
{
    for (const cgq_opt_t *o = opts; o->name; o++)
        if (s_name_eq (o->name, name, len))
            return o;
    return NULL;
}

static const cgq_opt_t *
s_find_short (const cgq_opt_t *opts, char c)
{
    for (const cgq_opt_t *o = opts; o->name; o++)
        if (o->short_name && o->short_name == c)
            return o;
    return NULL;
}

static int
s_parse_bool (const char *s, bool *out)
{
    static const char *yes[] = {"true", "1", "yes", "on", "y"};
    static const char *no[] = {"false", "0", "no", "off", "n"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (!strcasecmp (s, yes[i])) {
            *out = true;
            return 0;
        }
        if (!strcasecmp (s, no[i])) {
            *out = false;
            return 0;
        }
    }
    return -1;
}

static int
s_parse_int (const char *s, int64_t *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll (s, &end, 10);
    if (errno || end == s || *end)
        return -1;
    *out = v;
    return 0;
}

// s_set parses text into the field of opt. On error writes into err
// "'text' is not ..." or "'text' must be between ...", without the source.
static int
s_set (const cgq_opt_t *opt, void *cfg, const char *text, char *err, size_t errlen)
{
    char *field = (char *) cfg + opt->offset;
    double num = 0;
    switch (opt->type) {
    case CGQ_OPT_STRING:
    case CGQ_OPT_LIST: {
        char **sp = (char **) field;
        free (*sp);
        *sp = cgq_xstrdup (text);
        return 0;
    }
    case CGQ_OPT_BOOL: {
        bool b;
        if (s_parse_bool (text, &b) < 0)
            goto bad;
        *(bool *) field = b;
        return 0;
    }
    case CGQ_OPT_INT: {
        int64_t v;
        if (s_parse_int (text, &v) < 0)
            goto bad;
        num = (double) v;
        break;
    }
    case CGQ_OPT_DOUBLE:
        if (cgq_parse_double (text, &num) < 0 || isnan (num))
            goto bad;
        break;
    case CGQ_OPT_DURATION_MS: {
        double s;
        if (cgq_parse_duration (text, &s) < 0 || s * 1000 > 9e18)
            goto bad;
        num = (double) llround (s * 1000);
        break;
    }
    case CGQ_OPT_BYTES: {
        uint64_t v;
        if (cgq_parse_bytes (text, &v) < 0)
            goto bad;
        num = (double) v;
        break;
    }
    }

    if (opt->min != 0 || opt->max != 0) {
        const char *unit = opt->type == CGQ_OPT_DURATION_MS ? " ms" : "";
        // max 0 with min set means "at least min": a bound pair that admits
        // nothing is never what a table author meant.
        if (opt->max > opt->min && (num < opt->min || num > opt->max)) {
            snprintf (err, errlen, "'%s' must be between %g and %g%s", text, opt->min, opt->max,
                      unit);
            return -1;
        }
        if (opt->max <= opt->min && num < opt->min) {
            snprintf (err, errlen, "'%s' must be at least %g%s", text, opt->min, unit);
            return -1;
        }
    }

    switch (opt->type) {
    case CGQ_OPT_INT:
        *(int64_t *) field = (int64_t) num;
        s_parse_int (text, (int64_t *) field); // exact, beyond 2^53 too
        break;
    case CGQ_OPT_DOUBLE: *(double *) field = num; break;
    case CGQ_OPT_DURATION_MS: *(int64_t *) field = (int64_t) num; break;
    case CGQ_OPT_BYTES: cgq_parse_bytes (text, (uint64_t *) field); break;
    default: break;
    }
    return 0;

bad:
    snprintf (err, errlen, "'%s' is not %s", text, s_expected (opt->type));
    return -1;
}

// s_clear does not free: the struct may arrive uninitialized or holding
// string literals, so whatever it held is not ours.
static void
s_clear (const cgq_opt_t *opt, void *cfg)
{
    char *field = (char *) cfg + opt->offset;
    switch (opt->type) {
    case CGQ_OPT_STRING:
    case CGQ_OPT_LIST: *(char **) field = NULL; break;
    case CGQ_OPT_BOOL: *(bool *) field = false; break;
    case CGQ_OPT_INT:
    case CGQ_OPT_DURATION_MS: *(int64_t *) field = 0; break;
    case CGQ_OPT_DOUBLE: *(double *) field = 0; break;
    case CGQ_OPT_BYTES: *(uint64_t *) field = 0; break;
    }
}

// s_unknown_option reports key k, which names no option, with the option it
// most likely misspells.
static int
s_unknown_option (cgq_yamldoc_t *y, const cgq_opt_t *opts, const cgq_yamldoc_node_t *k)
{
    cgq_buf_t names;
    cgq_buf_init (&names);
    for (const cgq_opt_t *o = opts; o->name; o++)
        cgq_buf_printf (&names, "%s%s", o == opts ? "" : ", ", o->name);
    char *word = cgq_xstrdup (cgq_yamldoc_text (k)); // dead_afer: spelt as the table does
    for (char *p = word; *p; p++)
        if (*p == '_')
            *p = '-';
    char near[64];
    const char *guess = cgq_yamldoc_suggest (word, names.data ? names.data : "", near, sizeof near);
    cgq_yamldoc_fail (y, k, "unknown option '%s' (%s%s%ssee --help)", cgq_yamldoc_text (k),
                      guess ? "did you mean '" : "", guess ? guess : "", guess ? "'? " : "");
    free (word);
    cgq_buf_fini (&names);
    return -1;
}

// s_apply_file applies the mapping of option names to scalars at root.
static int
s_apply_file (cgq_yamldoc_t *y, const cgq_opt_t *opts, void *cfg, const cgq_yamldoc_node_t *root)
{
    if (!root || cgq_yamldoc_is_null (root))
        return 0; // a file holding only comments
    if (root->type != CGQ_YAMLDOC_MAP)
        return cgq_yamldoc_fail (y, root,
                                 "expected a mapping of option names to values (e.g. redis: "
                                 "redis://host:6379/0)");
    if (cgq_yamldoc_check_keys (y, root) < 0)
        return -1;
    for (size_t i = 0; i < cgq_yamldoc_npairs (root); i++) {
        const cgq_yamldoc_node_t *k = cgq_yamldoc_key (y, root, i),
                                 *v = cgq_yamldoc_val (y, root, i);
        const char *key = cgq_yamldoc_text (k);
        const cgq_opt_t *opt = s_find_long (opts, key, k->len);
        if (!opt)
            return s_unknown_option (y, opts, k);
        if (v->type != CGQ_YAMLDOC_SCALAR)
            return cgq_yamldoc_fail (
                y, v, "option '%s' needs a single value, not a list or mapping", key);
        if (strlen (cgq_yamldoc_text (v)) != v->len)
            return cgq_yamldoc_fail (y, v, "option '%s' holds a NUL byte (remove the \\0)", key);
        char err[512];
        if (s_set (opt, cfg, cgq_yamldoc_text (v), err, sizeof err) < 0)
            return cgq_yamldoc_fail (y, v, "%s: %s", key, err);
    }
    return 0;
}

// s_load_file applies a config file. It is read through the bounded reader
// that specs go through: a hostile or broken file (160 KB of '[') is refused
// at once, at its line and column, rather than stalling the daemon's start.
static int
s_load_file (const cgq_opt_t *opts, void *cfg, const char *prog, const char *path)
{
    cgq_buf_t text;
    cgq_buf_init (&text);
    if (cgq_yamldoc_read_file (path, CGQ_YAMLDOC_MAX_BYTES, &text) < 0) {
        fprintf (stderr, "%s: cannot read config file '%s': %s (check --config)\n", prog, path,
                 strerror (errno));
        cgq_buf_fini (&text);
        return -1;
    }
    char err[1024];
    cgq_yamldoc_t *y = cgq_yamldoc_new (path, "config file", err, sizeof err);
    const cgq_yamldoc_node_t *root;
    int rc = cgq_yamldoc_load (y, text.data, text.len, 0,
                               "a config file holds option: value lines; check --config", &root);
    if (rc == 0)
        rc = s_apply_file (y, opts, cfg, root);
    if (rc == 0 && root)
        rc = cgq_yamldoc_end (y);
    if (rc < 0)
        fprintf (stderr, "%s\n", err);
    cgq_yamldoc_destroy (&y);
    cgq_buf_fini (&text);
    return rc;
}

static int
s_missing_value (const char *prog, const char *flag, const cgq_opt_t *opt)
{
    fprintf (stderr, "%s: %s needs a value (write %s %s)\n", prog, flag, flag,
             s_metavar (opt->type));
    return -1;
}

// s_scan walks argv: flags into flags[], positional arguments into pos[],
// --config into *config_path. Returns 0, 1 (--help seen), 2 (--version seen) or -1.
static int
s_scan (const cgq_opt_t *opts, const char *prog, int argc, char **argv, s_flag_t *flags,
        int *nflags, char **pos, int *npos, char **other, int *nother, const char **config_path)
{
    bool help = false, version = false;
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        if (!strcmp (a, "--")) {
            other[(*nother)++] = a;
            for (i++; i < argc; i++)
                pos[(*npos)++] = argv[i];
            break;
        }
        // "-" (stdin) and negative numbers are values, not flags.
        bool numeric = a[0] == '-' && (isdigit ((unsigned char) a[1]) || a[1] == '.')
                       && !s_find_short (opts, a[1]);
        if (a[0] != '-' || a[1] == 0 || numeric) {
            pos[(*npos)++] = a;
            continue;
        }
        other[(*nother)++] = a;
        const cgq_opt_t *opt = NULL;
        const char *value = NULL;
        char *shown;
        if (a[1] == '-') {
            const char *name = a + 2;
            const char *eq = strchr (name, '=');
            size_t len = eq ? (size_t) (eq - name) : strlen (name);
            shown = cgq_xasprintf ("--%.*s", (int) len, name);
            if (s_name_eq ("help", name, len)) {
                free (shown);
                help = true;
                continue;
            }
            if (s_name_eq ("version", name, len) && !s_find_long (opts, name, len)) {
                free (shown);
                version = true;
                continue;
            }
            if (s_name_eq ("config", name, len)) {
                free (shown);
                if (eq)
                    *config_path = eq + 1;
                else if (i + 1 < argc)
                    *config_path = other[(*nother)++] = argv[++i];
                else {
                    fprintf (stderr, "%s: --config needs a value (write --config FILE)\n", prog);
                    return -1;
                }
                continue;
            }
            opt = s_find_long (opts, name, len);
            if (!opt && len > 3 && !strncmp (name, "no-", 3)) {
                const cgq_opt_t *b = s_find_long (opts, name + 3, len - 3);
                if (b && b->type == CGQ_OPT_BOOL && !eq) {
                    opt = b;
                    value = "false";
                }
            }
            if (!opt) {
                fprintf (stderr, "%s: unknown option '%s' (see %s --help)\n", prog, shown, prog);
                free (shown);
                return -1;
            }
            if (eq)
                value = eq + 1;
        } else {
            shown = cgq_xasprintf ("-%c", a[1]);
            if (a[1] == 'h' && !s_find_short (opts, 'h') && !a[2]) {
                free (shown);
                help = true;
                continue;
            }
            opt = s_find_short (opts, a[1]);
            if (!opt) {
                fprintf (stderr, "%s: unknown option '%s' (see %s --help)\n", prog, shown, prog);
                free (shown);
                return -1;
            }
            if (a[2])
                value = a[2] == '=' ? a + 3 : a + 2; // -r=URL or -rURL
        }
        if (!value) {
            if (opt->type == CGQ_OPT_BOOL)
                value = "true";
            else if (i + 1 < argc)
                value = other[(*nother)++] = argv[++i];
            else {
                s_missing_value (prog, shown, opt);
                free (shown);
                return -1;
            }
        }
        flags[*nflags].opt = opt;
        flags[*nflags].value = value;
        flags[*nflags].name = shown;
        (*nflags)++;
    }
    return help ? 1 : version ? 2 : 0;
}

// s_list_seen is true when flags[0..i) already gave the option of flags[i]:
// a repeated list flag adds to the list.
static bool
s_list_seen (const s_flag_t *flags, int i)
{
    for (int j = 0; j < i; j++)
        if (flags[j].opt == flags[i].opt)
            return true;
    return false;
}

int
cgq_config_parse (const cgq_opt_t *opts, void *cfg, const char *prog, const char *usage,
                  int argc, char **argv, int *argi)
{
    char err[512];
    int rc = 0;
    int n = argc > 0 ? argc : 1;
    s_flag_t *flags = cgq_xcalloc ((size_t) n, sizeof *flags);
    char **pos = cgq_xcalloc ((size_t) n, sizeof *pos);
    char **other = cgq_xcalloc ((size_t) n, sizeof *other);
    int nflags = 0, npos = 0, nother = 0;
    const char *config_path = NULL;

    for (const cgq_opt_t *o = opts; o->name; o++) {
        s_clear (o, cfg);
        if (o->def && s_set (o, cfg, o->def, err, sizeof err) < 0) {
            fprintf (stderr, "%s: built-in default of --%s: %s (a bug in the option table)\n",
                     prog, o->name, err);
            rc = -1;
            goto done;
        }
    }

    rc = s_scan (opts, prog, argc, argv, flags, &nflags, pos, &npos, other, &nother,
                 &config_path);
    if (rc == 1) {
        cgq_config_print_help (opts, prog, usage);
        goto done;
    }
    if (rc == 2) {
        printf ("%s %s\n", prog, CGQ_VERSION);
        rc = 1;
        goto done;
    }
    if (rc < 0)
        goto done;

    if (config_path && s_load_file (opts, cfg, prog, config_path) < 0) {
        rc = -1;
        goto done;
    }

    for (const cgq_opt_t *o = opts; o->name; o++) {
        const char *v = o->env ? getenv (o->env) : NULL;
        // An empty variable counts as unset: compose files and shells often
        // pass VAR= when they mean "no value".
        if (!v || !*v)
            continue;
        if (s_set (o, cfg, v, err, sizeof err) < 0) {
            fprintf (stderr, "%s: %s: %s\n", prog, o->env, err);
            rc = -1;
            goto done;
        }
    }

    for (int i = 0; i < nflags; i++) {
        if (flags[i].opt->type == CGQ_OPT_LIST && s_list_seen (flags, i)) {
            char **sp = (char **) ((char *) cfg + flags[i].opt->offset);
            char *joined = cgq_xasprintf ("%s\n%s", *sp ? *sp : "", flags[i].value);
            free (*sp);
            *sp = joined;
            continue;
        }
        if (s_set (flags[i].opt, cfg, flags[i].value, err, sizeof err) < 0) {
            fprintf (stderr, "%s: %s: %s\n", prog, flags[i].name, err);
            rc = -1;
            goto done;
        }
    }

    // Options first, then the positional arguments in their order, so that
    // callers read argv[*argi ..] as the operands.
    if (argc > 0) {
        int k = 1;
        for (int i = 0; i < nother; i++)
            argv[k++] = other[i];
        if (argi)
            *argi = k;
        for (int i = 0; i < npos; i++)
            argv[k++] = pos[i];
    } else if (argi)
        *argi = 0;

done:
    for (int i = 0; i < nflags; i++)
        free (flags[i].name);
    free (flags);
    free (pos);
    free (other);
    // The caller exits on 1 or -1; freeing here keeps leak checkers quiet
    // whether or not it calls cgq_config_free (which is then a no-op).
    if (rc != 0)
        cgq_config_free (opts, cfg);
    return rc;
}

void
cgq_config_free (const cgq_opt_t *opts, void *cfg)
{
    if (!opts || !cfg)
        return;
    for (const cgq_opt_t *o = opts; o->name; o++) {
        if (o->type != CGQ_OPT_STRING && o->type != CGQ_OPT_LIST)
            continue;
        char **sp = (char **) ((char *) cfg + o->offset);
        free (*sp);
        *sp = NULL;
    }
}

// s_range_num writes a bound of an option's range for --help: whole numbers
// as integers (1073741824, not 1.07374e+09), sizes in whole K/M/G as such
// (1G), the rest with %g.
static void
s_range_num (char *buf, size_t n, double v, cgq_opt_type_t type)
{
    static const char *const units[] = {"K", "M", "G", "T"};
    if (type == CGQ_OPT_BYTES && v >= 1024 && v == floor (v)) {
        double u = v;
        int k = -1;
        while (u >= 1024 && fmod (u, 1024) == 0 && k < 3) {
            u /= 1024;
            k++;
        }
        if (k >= 0) {
            snprintf (buf, n, "%.0f%s", u, units[k]);
            return;
        }
    }
    if (v == floor (v) && fabs (v) < 1e19)
        snprintf (buf, n, "%.0f", v);
    else
        snprintf (buf, n, "%g", v);
}

void
cgq_config_print_help (const cgq_opt_t *opts, const char *prog, const char *usage)
{
    size_t plen = strlen (prog);
    if (usage && !strncmp (usage, prog, plen) && (usage[plen] == ' ' || usage[plen] == 0))
        printf ("usage: %s\n", usage);
    else
        printf ("usage: %s %s\n", prog, usage ? usage : "[options]");
    printf ("\noptions:\n");

    size_t nopts = 0;
    while (opts[nopts].name)
        nopts++;
    size_t rows = nopts + 2;
    char **flag = cgq_xcalloc (rows, sizeof *flag);
    const char **env = cgq_xcalloc (rows, sizeof *env);
    const char **def = cgq_xcalloc (rows, sizeof *def);
    char **help = cgq_xcalloc (rows, sizeof *help);
    size_t wf = 4, we = 3, wd = 7;
    for (size_t i = 0; i < nopts; i++) {
        const cgq_opt_t *o = &opts[i];
        const char *mv = s_metavar (o->type);
        if (o->short_name)
            flag[i] = cgq_xasprintf ("-%c, --%s%s%s", o->short_name, o->name, *mv ? " " : "", mv);
        else
            flag[i] = cgq_xasprintf ("    --%s%s%s", o->name, *mv ? " " : "", mv);
        env[i] = o->env ? o->env : "";
        if (o->def)
            def[i] = o->def;
        else
            def[i] = o->type == CGQ_OPT_BOOL                                  ? "false"
                     : o->type == CGQ_OPT_STRING || o->type == CGQ_OPT_LIST ? "-"
                                                                              : "0";
        const char *h = o->help ? o->help : "";
        const char *unit = o->type == CGQ_OPT_DURATION_MS ? " ms" : "";
        char lo[48], hi[48];
        s_range_num (lo, sizeof lo, o->min, o->type);
        s_range_num (hi, sizeof hi, o->max, o->type);
        if (o->max > o->min)
            help[i] = cgq_xasprintf ("%s (%s to %s%s)", h, lo, hi, unit);
        else if (o->min != 0 || o->max != 0)
            help[i] = cgq_xasprintf ("%s (at least %s%s)", h, lo, unit);
        else
            help[i] = cgq_xstrdup (h);
    }
    flag[nopts] = cgq_xstrdup ("    --config FILE");
    env[nopts] = "";
    def[nopts] = "-";
    help[nopts] = cgq_xstrdup ("read options from a YAML file (name: value); env and flags override it");
    flag[nopts + 1] = cgq_xstrdup ("-h, --help");
    env[nopts + 1] = "";
    def[nopts + 1] = "";
    help[nopts + 1] = cgq_xstrdup ("print this help and exit");
    for (size_t i = 0; i < rows; i++) {
        wf = strlen (flag[i]) > wf ? strlen (flag[i]) : wf;
        we = strlen (env[i]) > we ? strlen (env[i]) : we;
        wd = strlen (def[i]) > wd ? strlen (def[i]) : wd;
    }
    printf ("  %-*s  %-*s  %-*s  %s\n", (int) wf, "flag", (int) we, "env", (int) wd, "default",
            "meaning");
    for (size_t i = 0; i < rows; i++) {
        printf ("  %-*s  %-*s  %-*s  %s\n", (int) wf, flag[i], (int) we, env[i], (int) wd,
                def[i], help[i]);
        free (flag[i]);
        free (help[i]);
    }
    free (flag);
    free (env);
    free (def);
    free (help);
}
