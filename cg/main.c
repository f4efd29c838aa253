// cgq-cg: generate CNN models and CG datasets, describe them, and time them
// on this machine's CPU. Exit status: 0 success, 1 failure (cannot write),
// 2 bad input (arguments, a model or dataset that cannot be read).
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dataset.h"
#include "engine.h"
#include "gen.h"
#include "graph.h"
#include "json.h"
#include "util.h"

#ifndef CGQ_CG_VERSION
#define CGQ_CG_VERSION "0.0.0"
#endif

enum { S_OK = 0, S_FAIL = 1, S_BAD = 2 };

static void s_error (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));

static void
s_error (const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    fputs ("cgq-cg: ", stderr);
    vfprintf (stderr, fmt, ap);
    fputc ('\n', stderr);
    va_end (ap);
}

// One option of a command: its long name, argument (NULL for a flag), help.
typedef struct {
    const char *name;
    const char *arg;
    const char *help;
} s_opt_t;

typedef struct s_cmd_t s_cmd_t;
struct s_cmd_t {
    const char *name;
    const char *args;
    const char *summary;
    const char *details;
    const s_opt_t *opts;
    int (*fn) (const s_cmd_t *cmd, const char **vals, char **pos, int npos);
    int npos; // positional arguments required (exactly)
};

static const s_opt_t s_gen_opts[] = {
    {"family", "NAME",
     "mobilenetv2, resnet, vgg, shufflenetv2, shufflenet, or mixed "
     "(default mobilenetv2; mixed: family number (seed mod 5))"},
    {"seed", "N", "random seed (default 0); graph i of a dataset uses seed N+i"},
    {"resolution", "R", "input height and width in [32, 1024] (default: drawn from the range)"},
    {"min-res", "R", "smallest resolution drawn, a multiple of 32 is picked (default 32)"},
    {"max-res", "R", "largest resolution drawn (default 128)"},
    {"classes", "N", "outputs of the last fc (default 1000)"},
    {"no-fold-bn", NULL, "write conv + batchnorm instead of convs with a folded bias"},
    {"out", "PATH", "model.json to write (default: stdout); with --count, the dataset directory"},
    {"count", "N", "write a CG dataset of N graphs to the --out directory"},
    {"label", "LIST",
     "dataset labels per graph, comma-separated, of: latency (median ms on "
     "this CPU), flops, params (default latency)"},
    {"no-models", NULL, "dataset: do not write each model to DIR/models/NNNNNN.json"},
    {"node-times", NULL,
     "dataset: also time every node (per-op mode, --repeats runs after the latency's) "
     "into node-label.csv.gz"},
    {"repeats", "N", "latency label: timed runs per model (default 5)"},
    {"warmup", "N", "latency label: untimed runs first (default 1)"},
    {"threads", "N", "latency label: OpenBLAS threads (default 1)"},
    {NULL, NULL, NULL},
};

static const s_opt_t s_info_opts[] = {
    {"json", NULL, "print one JSON object instead of the table"},
    {NULL, NULL, NULL},
};

static const s_opt_t s_run_opts[] = {
    {"repeats", "N", "timed runs (default 10)"},
    {"warmup", "N", "untimed runs first (default 2)"},
    {"threads", "N", "OpenBLAS threads (default 1)"},
    {"seed", "N", "seed of the random weights and input (default 1)"},
    {"per-op", NULL,
     "also time each node (as many runs again, after the plain ones): node_ms, "
     "sum_node_ms, timed_median_ms, timer_overhead_ms"},
    {NULL, NULL, NULL},
};

static int s_gen (const s_cmd_t *cmd, const char **vals, char **pos, int npos);
static int s_info (const s_cmd_t *cmd, const char **vals, char **pos, int npos);
static int s_run (const s_cmd_t *cmd, const char **vals, char **pos, int npos);

static const s_cmd_t s_cmds[] = {
    {"gen", "", "generate a model (model.json) or a CG dataset (--count N)",
     "Same options, same model: the seed decides widths, depths, kernel sizes and the\n"
     "resolution. A dataset directory holds edge.csv.gz, node-feat.csv.gz,\n"
     "num-node-list.csv.gz, num-edge-list.csv.gz, graph-label.csv.gz and\n"
     "graph-family.csv.gz (cg/README.md).",
     s_gen_opts, s_gen, 0},
    {"info", "MODEL|DIR", "print a model's ops, shapes, FLOPs and parameters, or a dataset's size",
     NULL, s_info_opts, s_info, 1},
    {"run", "MODEL", "time a model on this CPU; prints JSON with each run's latency",
     "Weights and input are random (deterministic from --seed); latency does not\n"
     "depend on them. Single-threaded unless --threads says otherwise.",
     s_run_opts, s_run, 1},
    {NULL, NULL, NULL, NULL, NULL, NULL, 0},
};

static void
s_usage (FILE *f)
{
    fprintf (f,
             "usage: cgq-cg COMMAND [options] [ARGS]\n\n"
             "cgq-cg %s: computational-graph (CNN) models for latency research.\n\n"
             "commands:\n",
             CGQ_CG_VERSION);
    for (const s_cmd_t *c = s_cmds; c->name; c++) {
        char head[64];
        snprintf (head, sizeof head, "%s %s", c->name, c->args);
        fprintf (f, "  %-18s %s\n", head, c->summary);
    }
    fprintf (f, "\n  --help               this text; `cgq-cg COMMAND --help` for a command\n"
                "  --version            print the version\n\n"
                "Exit status: 0 success, 1 failure (cannot write), 2 bad input.\n");
}

static void
s_cmd_help (const s_cmd_t *c, FILE *f)
{
    fprintf (f, "usage: cgq-cg %s [options]%s%s\n\n%s\n", c->name, *c->args ? " " : "", c->args,
             c->summary);
    if (c->details)
        fprintf (f, "\n%s\n", c->details);
    fprintf (f, "\noptions:\n");
    for (const s_opt_t *o = c->opts; o->name; o++) {
        char head[64];
        snprintf (head, sizeof head, "--%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
        fprintf (f, "  %-19s %s\n", head, o->help);
    }
    fprintf (f, "  %-19s %s\n  %-19s %s\n", "--help", "this text", "--version",
             "print the version");
}

// s_int_opt reads option name's value (default def when absent) into *out
// and checks it lies in [lo, hi]. Returns 0, or S_BAD after saying why.
static int
s_int_opt (const s_cmd_t *cmd, const s_opt_t *opts, const char **vals, const char *name,
           long long def, long long lo, long long hi, long long *out)
{
    int i = 0;
    while (opts[i].name && strcmp (opts[i].name, name) != 0)
        i++;
    *out = def;
    if (!vals[i])
        return 0;
    uint64_t v;
    if (cgq_parse_u64 (vals[i], &v) < 0 || v < (uint64_t) lo || v > (uint64_t) hi) {
        s_error ("--%s '%s' is not an integer in [%lld, %lld] (see cgq-cg %s --help)", name,
                 vals[i], lo, hi, cmd->name);
        return S_BAD;
    }
    *out = (long long) v;
    return 0;
}

static const char *
s_val (const s_opt_t *opts, const char **vals, const char *name)
{
    for (int i = 0; opts[i].name; i++)
        if (strcmp (opts[i].name, name) == 0)
            return vals[i];
    return NULL;
}

static double
s_median (const double *v, int n)
{
    double *s = cgq_xmalloc (sizeof (double) * (size_t) (n ? n : 1));
    memcpy (s, v, sizeof (double) * (size_t) n);
    // Insertion sort: n is a handful of runs.
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && s[j - 1] > s[j]; j--) {
            double t = s[j];
            s[j] = s[j - 1];
            s[j - 1] = t;
        }
    double m = n == 0 ? 0 : n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    free (s);
    return m;
}

// s_load loads MODEL or says why (S_BAD).
static cgq_cg_graph_t *
s_load (const char *path)
{
    char err[512];
    cgq_cg_graph_t *g = cgq_cg_graph_load (path, err, sizeof err);
    if (!g)
        s_error ("%s", err);
    return g;
}

// ---------------------------------------------------------------------------
// gen

enum { S_LABEL_LATENCY, S_LABEL_FLOPS, S_LABEL_PARAMS };

static int
s_gen (const s_cmd_t *cmd, const char **vals, char **pos, int npos)
{
    const s_opt_t *o = cmd->opts;
    cgq_cg_gen_opts_t go;
    cgq_cg_gen_opts_default (&go);
    const char *family = s_val (o, vals, "family");
    bool mixed = family && strcmp (family, "mixed") == 0;
    if (family && !mixed && cgq_cg_family_parse (family, &go.family) < 0) {
        s_error ("unknown --family '%s' (expected one of: %s, mixed)", family,
                 cgq_cg_family_list ());
        return S_BAD;
    }
    long long seed, res, min_res, max_res, classes, count, repeats, warmup, threads;
    if (s_int_opt (cmd, o, vals, "seed", 0, 0, INT64_MAX, &seed) ||
        s_int_opt (cmd, o, vals, "resolution", 0, 32, 1024, &res) ||
        s_int_opt (cmd, o, vals, "min-res", go.min_res, 32, 1024, &min_res) ||
        s_int_opt (cmd, o, vals, "max-res", go.max_res, 32, 1024, &max_res) ||
        s_int_opt (cmd, o, vals, "classes", go.classes, 1, 100000, &classes) ||
        s_int_opt (cmd, o, vals, "count", 0, 1, 10000000, &count) ||
        s_int_opt (cmd, o, vals, "repeats", 5, 1, 100000, &repeats) ||
        s_int_opt (cmd, o, vals, "warmup", 1, 0, 100000, &warmup) ||
        s_int_opt (cmd, o, vals, "threads", 1, 1, 1024, &threads))
        return S_BAD;
    if (min_res > max_res || (max_res / 32) * 32 < min_res) {
        s_error ("--min-res %lld .. --max-res %lld holds no multiple of 32 (widen the range)",
                 min_res, max_res);
        return S_BAD;
    }
    go.seed = (uint64_t) seed;
    go.resolution = (int) res;
    go.min_res = (int) min_res;
    go.max_res = (int) max_res;
    go.classes = (int) classes;
    go.fold_bn = !s_val (o, vals, "no-fold-bn");
    const char *out = s_val (o, vals, "out");
    char err[512];

    if (count == 0) {
        if (s_val (o, vals, "label") || s_val (o, vals, "no-models") ||
            s_val (o, vals, "node-times")) {
            s_error ("--label, --no-models and --node-times are for datasets (add --count N "
                     "--out DIR)");
            return S_BAD;
        }
        if (mixed)
            go.family = (cgq_cg_family_t) (go.seed % CGQ_CG_FAMILY_COUNT);
        cgq_cg_graph_t *g = cgq_cg_gen (&go, err, sizeof err);
        if (!g) {
            s_error ("%s", err);
            return S_BAD;
        }
        int rc = S_OK;
        if (!out || strcmp (out, "-") == 0) {
            char *text = cgq_cg_graph_to_json (g);
            fputs (text, stdout);
            free (text);
        }
        else if (cgq_cg_graph_save (g, out, err, sizeof err) < 0) {
            s_error ("%s", err);
            rc = S_FAIL;
        }
        cgq_cg_graph_destroy (&g);
        return rc;
    }

    if (!out) {
        s_error ("--count needs --out DIR, the dataset directory to write");
        return S_BAD;
    }
    // Labels, in the order given.
    int labels[8], nlabels = 0;
    const char *label = s_val (o, vals, "label");
    char *list = cgq_xstrdup (label ? label : "latency");
    for (char *save = NULL, *t = strtok_r (list, ",", &save); t; t = strtok_r (NULL, ",", &save)) {
        int l = !strcmp (t, "latency")  ? S_LABEL_LATENCY
                : !strcmp (t, "flops")  ? S_LABEL_FLOPS
                : !strcmp (t, "params") ? S_LABEL_PARAMS
                                        : -1;
        if (l < 0 || nlabels == 8) {
            s_error ("--label '%s': %s (expected a comma-separated list of: latency, flops, "
                     "params)",
                     label, l < 0 ? "unknown label" : "too many labels");
            free (list);
            return S_BAD;
        }
        labels[nlabels++] = l;
    }
    free (list);
    bool has_latency = false;
    for (int l = 0; l < nlabels; l++)
        has_latency = has_latency || labels[l] == S_LABEL_LATENCY;
    if (nlabels == 0) {
        s_error ("--label is empty (expected a comma-separated list of: latency, flops, params)");
        return S_BAD;
    }
    bool models = !s_val (o, vals, "no-models");
    bool node_times = s_val (o, vals, "node-times") != NULL;
    if (node_times && !has_latency) {
        s_error ("--node-times needs latency among the --label columns (e.g. --label "
                 "latency,flops)");
        return S_BAD;
    }
    double *node_ms = NULL; // every node of every graph, in node-feat order
    size_t nnode_ms = 0;
    char *models_dir = cgq_xasprintf ("%s/models", out);
    if (models && cgq_mkdir_p (models_dir) < 0) {
        s_error ("cannot make directory %s: %s (check the path and permissions)", models_dir,
                 strerror (errno));
        free (models_dir);
        return S_FAIL;
    }
    cgq_cg_dataset_t *ds = cgq_cg_dataset_new (CGQ_CG_NUM_FEATS, nlabels);
    cgq_cg_engine_opts_t eo;
    cgq_cg_engine_opts_default (&eo);
    eo.threads = (int) threads;
    double *ms = cgq_xmalloc (sizeof (double) * (size_t) repeats);
    const char **fams = cgq_xcalloc ((size_t) count, sizeof *fams);
    int rc = S_OK;
    for (long long i = 0; i < count && rc == S_OK; i++) {
        cgq_cg_gen_opts_t gi = go;
        gi.seed = go.seed + (uint64_t) i;
        if (mixed)
            gi.family = (cgq_cg_family_t) (gi.seed % CGQ_CG_FAMILY_COUNT);
        fams[i] = cgq_cg_family_name (gi.family);
        cgq_cg_graph_t *g = cgq_cg_gen (&gi, err, sizeof err);
        if (!g) {
            s_error ("%s", err);
            rc = S_BAD;
            break;
        }
        double lv[8];
        for (int l = 0; l < nlabels && rc == S_OK; l++) {
            if (labels[l] == S_LABEL_FLOPS)
                lv[l] = (double) cgq_cg_graph_flops (g);
            else if (labels[l] == S_LABEL_PARAMS)
                lv[l] = (double) cgq_cg_graph_params (g);
            else {
                cgq_cg_engine_t *e = cgq_cg_engine_new (g, &eo, err, sizeof err);
                if (!e) {
                    s_error ("%s", err);
                    rc = S_BAD;
                    break;
                }
                cgq_cg_engine_bench (e, (int) warmup, (int) repeats, ms);
                // Rounded to a microsecond: finer digits are noise.
                lv[l] = round (s_median (ms, (int) repeats) * 1000) / 1000;
                if (node_times) {
                    // Separate runs, so that the graph's label has no clock reads in it.
                    int n = cgq_cg_engine_nodes (e);
                    node_ms = cgq_xrealloc (node_ms, sizeof (double) * (nnode_ms + (size_t) n));
                    cgq_cg_engine_op_timing (e, (int) repeats);
                    for (long long r = 0; r < repeats; r++)
                        cgq_cg_engine_run (e);
                    cgq_cg_engine_op_medians (e, node_ms + nnode_ms);
                    nnode_ms += (size_t) n;
                }
                cgq_cg_engine_destroy (&e);
            }
        }
        if (rc == S_OK && cgq_cg_dataset_append_graph (ds, g, lv, err, sizeof err) < 0) {
            s_error ("%s", err);
            rc = S_FAIL;
        }
        if (rc == S_OK && models) {
            char *path = cgq_xasprintf ("%s/%06lld.json", models_dir, i);
            if (cgq_cg_graph_save (g, path, err, sizeof err) < 0) {
                s_error ("%s", err);
                rc = S_FAIL;
            }
            free (path);
        }
        cgq_cg_graph_destroy (&g);
    }
    // The family of each graph, so that a predictor can hold a family out
    // (test_family) on a generated dataset as on an exported one.
    if (rc == S_OK && (cgq_cg_dataset_write (ds, out, err, sizeof err) < 0 ||
                       cgq_cg_dataset_write_families (out, fams, (int) count, err, sizeof err) < 0)) {
        s_error ("%s", err);
        rc = S_FAIL;
    }
    // After the dataset, which made the directory.
    if (rc == S_OK && node_times &&
        cgq_cg_dataset_write_node_labels (out, node_ms, nnode_ms, err, sizeof err) < 0) {
        s_error ("%s", err);
        rc = S_FAIL;
    }
    if (rc == S_OK)
        fprintf (stderr, "cgq-cg: wrote %lld graphs to %s\n", count, out);
    free (ms);
    free (node_ms);
    free (fams);
    free (models_dir);
    cgq_cg_dataset_destroy (&ds);
    return rc;
}

// ---------------------------------------------------------------------------
// info

static void
s_shape_str (cgq_cg_shape_t s, char *buf, size_t len)
{
    if (s.rank == 4)
        snprintf (buf, len, "%dx%dx%d", s.c, s.h, s.w);
    else
        snprintf (buf, len, "%d", s.c);
}

static int
s_info_dataset (const char *dir, bool json)
{
    char err[512];
    cgq_cg_dataset_t *ds = cgq_cg_dataset_read (dir, err, sizeof err);
    if (!ds) {
        s_error ("%s", err);
        return S_BAD;
    }
    int count = cgq_cg_dataset_count (ds), nl = cgq_cg_dataset_num_labels (ds);
    long long nodes = 0, edges = 0;
    double *lmin = cgq_xmalloc (sizeof (double) * (size_t) nl);
    double *lmax = cgq_xmalloc (sizeof (double) * (size_t) nl);
    for (int i = 0; i < count; i++) {
        cgq_cg_sample_t s;
        cgq_cg_dataset_get (ds, i, &s);
        nodes += s.nodes;
        edges += s.edges;
        for (int l = 0; l < nl; l++) {
            lmin[l] = i == 0 || s.labels[l] < lmin[l] ? s.labels[l] : lmin[l];
            lmax[l] = i == 0 || s.labels[l] > lmax[l] ? s.labels[l] : lmax[l];
        }
    }
    json_t *o =
        json_pack ("{s:s, s:i, s:I, s:I, s:i, s:i}", "dataset", dir, "graphs", count, "nodes",
                   (json_int_t) nodes, "edges", (json_int_t) edges, "features_per_node",
                   cgq_cg_dataset_num_feats (ds), "labels_per_graph", nl);
    json_t *mins = json_array (), *maxs = json_array ();
    for (int l = 0; l < nl && count > 0; l++) {
        json_array_append_new (mins, json_real (lmin[l]));
        json_array_append_new (maxs, json_real (lmax[l]));
    }
    json_object_set_new (o, "label_min", mins);
    json_object_set_new (o, "label_max", maxs);
    if (json) {
        char *text = cgq_json_dumps (o);
        printf ("%s\n", text);
        free (text);
    }
    else {
        printf ("dataset %s: %d graphs, %lld nodes, %lld edges, %d features per node, %d labels "
                "per graph\n",
                dir, count, nodes, edges, cgq_cg_dataset_num_feats (ds), nl);
        for (int l = 0; l < nl && count > 0; l++) {
            char a[32], b[32];
            printf ("label %d: %s .. %s\n", l, cgq_fmt_double (a, lmin[l]),
                    cgq_fmt_double (b, lmax[l]));
        }
    }
    json_decref (o);
    free (lmin);
    free (lmax);
    cgq_cg_dataset_destroy (&ds);
    return S_OK;
}

static int
s_info (const s_cmd_t *cmd, const char **vals, char **pos, int npos)
{
    bool json = s_val (cmd->opts, vals, "json") != NULL;
    struct stat st;
    if (stat (pos[0], &st) == 0 && S_ISDIR (st.st_mode))
        return s_info_dataset (pos[0], json);
    cgq_cg_graph_t *g = s_load (pos[0]);
    if (!g)
        return S_BAD;
    int n = cgq_cg_graph_size (g);
    int ops[CGQ_CG_CODE_DWCONV2D + 1] = {0};
    for (int i = 0; i < n; i++)
        ops[cgq_cg_node_code (cgq_cg_graph_node (g, i))]++;
    const cgq_cg_node_t *in = cgq_cg_graph_node (g, 0);
    if (json) {
        json_t *o = json_pack (
            "{s:s, s:i, s:i, s:I, s:I, s:[i,i,i]}", "name", cgq_cg_graph_name (g), "nodes", n,
            "edges", cgq_cg_graph_edge_count (g), "flops", (json_int_t) cgq_cg_graph_flops (g),
            "params", (json_int_t) cgq_cg_graph_params (g), "input", in->out.c, in->out.h,
            in->out.w);
        json_t *counts = json_object ();
        for (int c = 0; c <= CGQ_CG_CODE_DWCONV2D; c++)
            if (ops[c])
                json_object_set_new (counts,
                                     c == CGQ_CG_CODE_DWCONV2D ? "dwconv2d"
                                                               : cgq_cg_op_name ((cgq_cg_op_t) c),
                                     json_integer (ops[c]));
        json_object_set_new (o, "ops", counts);
        char *text = cgq_json_dumps (o);
        printf ("%s\n", text);
        free (text);
        json_decref (o);
    }
    else {
        printf ("%-5s %-15s %-14s %-14s %12s %12s\n", "id", "op", "inputs", "output", "params",
                "MFLOPs");
        for (int i = 0; i < n; i++) {
            const cgq_cg_node_t *node = cgq_cg_graph_node (g, i);
            char ins[64] = "", shape[48];
            size_t len = 0;
            for (int j = 0; j < node->ninputs && len < sizeof ins - 12; j++)
                len += (size_t) snprintf (ins + len, sizeof ins - len, "%s%d", j ? "," : "",
                                          node->inputs[j]);
            s_shape_str (node->out, shape, sizeof shape);
            printf ("%-5d %-15s %-14s %-14s %12lld %12.3f\n", i, cgq_cg_node_kind (node), ins,
                    shape, (long long) node->params, (double) node->flops / 1e6);
        }
        printf ("\n%s: %d nodes, %d edges, input %dx%dx%d, %.3f MFLOPs, %.3f M params\nops:",
                cgq_cg_graph_name (g), n, cgq_cg_graph_edge_count (g), in->out.c, in->out.h,
                in->out.w, (double) cgq_cg_graph_flops (g) / 1e6,
                (double) cgq_cg_graph_params (g) / 1e6);
        for (int c = 0; c <= CGQ_CG_CODE_DWCONV2D; c++)
            if (ops[c])
                printf (" %s %d",
                        c == CGQ_CG_CODE_DWCONV2D ? "dwconv2d" : cgq_cg_op_name ((cgq_cg_op_t) c),
                        ops[c]);
        printf ("\n");
    }
    cgq_cg_graph_destroy (&g);
    return S_OK;
}

// ---------------------------------------------------------------------------
// run

static int
s_run (const s_cmd_t *cmd, const char **vals, char **pos, int npos)
{
    long long repeats, warmup, threads, seed;
    if (s_int_opt (cmd, cmd->opts, vals, "repeats", 10, 1, 1000000, &repeats) ||
        s_int_opt (cmd, cmd->opts, vals, "warmup", 2, 0, 1000000, &warmup) ||
        s_int_opt (cmd, cmd->opts, vals, "threads", 1, 1, 1024, &threads) ||
        s_int_opt (cmd, cmd->opts, vals, "seed", 1, 0, INT64_MAX, &seed))
        return S_BAD;
    cgq_cg_graph_t *g = s_load (pos[0]);
    if (!g)
        return S_BAD;
    cgq_cg_engine_opts_t eo;
    cgq_cg_engine_opts_default (&eo);
    eo.threads = (int) threads;
    eo.seed = (uint64_t) seed;
    char err[512];
    cgq_cg_engine_t *e = cgq_cg_engine_new (g, &eo, err, sizeof err);
    if (!e) {
        s_error ("%s: %s", pos[0], err);
        cgq_cg_graph_destroy (&g);
        return S_BAD;
    }
    double *ms = cgq_xmalloc (sizeof (double) * (size_t) repeats);
    cgq_cg_engine_bench (e, (int) warmup, (int) repeats, ms);
    double sum = 0, lo = ms[0], hi = ms[0];
    json_t *runs = json_array ();
    for (long long i = 0; i < repeats; i++) {
        sum += ms[i];
        lo = ms[i] < lo ? ms[i] : lo;
        hi = ms[i] > hi ? ms[i] : hi;
        json_array_append_new (runs, json_real (round (ms[i] * 1000) / 1000));
    }
    double median = s_median (ms, (int) repeats);
    double flops = (double) cgq_cg_graph_flops (g);
    json_t *o = json_pack (
        "{s:s, s:s, s:I, s:I, s:I, s:i, s:i, s:i, s:o, s:f, s:f, s:f, s:f, s:f}", "model",
        cgq_cg_graph_name (g), "file", pos[0], "flops", (json_int_t) cgq_cg_graph_flops (g),
        "params", (json_int_t) cgq_cg_graph_params (g), "bytes",
        (json_int_t) cgq_cg_engine_bytes (e), "threads", (int) threads, "warmup", (int) warmup,
        "repeats", (int) repeats, "latency_ms", runs, "median_ms", round (median * 1000) / 1000,
        "mean_ms", round (sum / (double) repeats * 1000) / 1000, "min_ms", round (lo * 1000) / 1000,
        "max_ms", round (hi * 1000) / 1000, "gflops_per_s",
        median > 0 ? round (flops / (median * 1e6) * 100) / 100 : 0.0);
    if (s_val (cmd->opts, vals, "per-op")) {
        // As many runs again with the clock read around every node: the
        // node medians, their sum, and the timed runs' own median, so that
        // what the per-node times leave out or add can be seen.
        int nn = cgq_cg_engine_nodes (e);
        double *node = cgq_xcalloc ((size_t) nn, sizeof (double));
        double *tms = cgq_xmalloc (sizeof (double) * (size_t) repeats);
        cgq_cg_engine_op_timing (e, (int) repeats);
        cgq_cg_engine_bench (e, 0, (int) repeats, tms);
        cgq_cg_engine_op_medians (e, node);
        json_t *arr = json_array ();
        double total = 0;
        for (int i = 0; i < nn; i++) {
            total += node[i];
            json_array_append_new (arr, json_real (round (node[i] * 1e6) / 1e6));
        }
        json_object_set_new (o, "node_ms", arr);
        json_object_set_new (o, "sum_node_ms", json_real (round (total * 1e6) / 1e6));
        json_object_set_new (o, "timed_median_ms",
                             json_real (round (s_median (tms, (int) repeats) * 1e6) / 1e6));
        json_object_set_new (o, "timer_overhead_ms",
                             json_real (round (cgq_cg_timer_overhead_ms () * 1e6) / 1e6));
        free (node);
        free (tms);
    }
    char *text = cgq_json_dumps (o);
    printf ("%s\n", text);
    free (text);
    json_decref (o);
    free (ms);
    cgq_cg_engine_destroy (&e);
    cgq_cg_graph_destroy (&g);
    return S_OK;
}

// ---------------------------------------------------------------------------

enum { S_OPT_HELP = 1000, S_OPT_VERSION };

int
main (int argc, char **argv)
{
    // OpenBLAS starts its thread pool when it loads, before main, one thread
    // per core, and an idle pool thread keeps polling (sched_yield) on a core
    // that the measured run or a neighbour needs. Start again with one
    // thread; --threads N adds threads to the pool later.
    char self[4096];
    ssize_t len = readlink ("/proc/self/exe", self, sizeof self - 1);
    if (!getenv ("OPENBLAS_NUM_THREADS") && len > 0 && (size_t) len < sizeof self - 1) {
        self[len] = 0; // by its real name, so that ps shows cgq-cg, not exe
        if (setenv ("OPENBLAS_NUM_THREADS", "1", 1) == 0)
            execv (self, argv); // on failure, go on with the pool as it is
    }
    if (argc < 2) {
        s_usage (stderr);
        return S_BAD;
    }
    const char *name = argv[1];
    if (!strcmp (name, "--help") || !strcmp (name, "-h") || !strcmp (name, "help")) {
        s_usage (stdout);
        return S_OK;
    }
    if (!strcmp (name, "--version") || !strcmp (name, "-V")) {
        printf ("cgq-cg %s\n", CGQ_CG_VERSION);
        return S_OK;
    }
    const s_cmd_t *cmd = NULL;
    for (const s_cmd_t *c = s_cmds; c->name; c++)
        if (!strcmp (c->name, name))
            cmd = c;
    if (!cmd) {
        s_error ("unknown command '%s' (expected gen, info or run; see cgq-cg --help)", name);
        return S_BAD;
    }
    struct option lo[32];
    const char *vals[32] = {NULL};
    int n = 0;
    for (; cmd->opts[n].name; n++)
        lo[n] = (struct option){cmd->opts[n].name,
                                cmd->opts[n].arg ? required_argument : no_argument, NULL, n};
    lo[n] = (struct option){"help", no_argument, NULL, S_OPT_HELP};
    lo[n + 1] = (struct option){"version", no_argument, NULL, S_OPT_VERSION};
    lo[n + 2] = (struct option){NULL, 0, NULL, 0};
    opterr = 0;
    optind = 2;
    for (;;) {
        int c = getopt_long (argc, argv, ":hV", lo, NULL);
        if (c == -1)
            break;
        if (c >= 0 && c < n)
            vals[c] = optarg ? optarg : "";
        else if (c == S_OPT_HELP || c == 'h') {
            s_cmd_help (cmd, stdout);
            return S_OK;
        }
        else if (c == S_OPT_VERSION || c == 'V') {
            printf ("cgq-cg %s\n", CGQ_CG_VERSION);
            return S_OK;
        }
        else if (c == ':') {
            s_error ("option %s needs a value (see cgq-cg %s --help)", argv[optind - 1], cmd->name);
            return S_BAD;
        }
        else {
            s_error ("unknown option '%s' for cgq-cg %s (see cgq-cg %s --help)", argv[optind - 1],
                     cmd->name, cmd->name);
            return S_BAD;
        }
    }
    int npos = argc - optind;
    if (npos != cmd->npos) {
        if (npos < cmd->npos)
            s_error ("cgq-cg %s needs %s (usage: cgq-cg %s [options] %s)", cmd->name, cmd->args,
                     cmd->name, cmd->args);
        else
            s_error ("unexpected argument '%s' (usage: cgq-cg %s [options]%s%s)",
                     argv[optind + cmd->npos], cmd->name, *cmd->args ? " " : "", cmd->args);
        return S_BAD;
    }
    return cmd->fn (cmd, vals, argv + optind, npos);
}
