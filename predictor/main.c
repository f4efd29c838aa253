// cgq-predictor: train the GNN latency predictor on a CG dataset, by hand
// (train) or as the built-in trial kind `predictor` of cgq-worker (trial).
// Exit status: 0 success, 1 failure (training diverged, cannot write),
// 2 bad input (arguments, params, a dataset that cannot be read).
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgq_report.h"
#include "data.h"
#include "export.h"
#include "dataset.h"
#include "kernel.h"
#include "train.h"
#include "util.h"

#ifndef CGQ_PRED_VERSION
#define CGQ_PRED_VERSION "0.0.0"
#endif

enum { S_OK = 0, S_FAIL = 1, S_BAD = 2 };

static void s_error (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));

static void
s_error (const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    fputs ("cgq-predictor: ", stderr);
    vfprintf (stderr, fmt, ap);
    fputc ('\n', stderr);
    va_end (ap);
}

static void
s_usage (FILE *f)
{
    fputs ("usage: cgq-predictor train --data DIR [--set KEY=VALUE]... [--out DIR] [--json]\n"
           "       cgq-predictor trial --data DIR      (the worker's `predictor` trial kind)\n"
           "       cgq-predictor export --results FILE --out DIR\n"
           "       cgq-predictor predict --model PATH --data PATH [--label N] "
           "[--format table|csv|json]\n"
           "       cgq-predictor features --data DIR [--set KEY=VALUE]...\n"
           "       cgq-predictor features --data DIR [--set KEY=VALUE]...\n"
           "       cgq-predictor --help | --version\n"
           "\n"
           "Trains a GNN that predicts a model's latency from its computational graph, on\n"
           "a CG dataset (OGB raw CSV layout, cg/README.md), and reports validation MAE,\n"
           "MAPE, RMSE, SRCC and +-10 % accuracy every epoch; at the end the best epoch's\n"
           "test metrics. --out (train) or the trial directory (trial) receives the best\n"
           "model: model.json (config, scalings, metrics) and model.f32 (weights).\n"
           "With --set model=kernel it trains the kernel-level predictor instead: a random\n"
           "forest per op type on the dataset's node times (node-label.csv.gz), summed per\n"
           "graph; it fits once and saves model.json alone (docs/predictor.md).\n"
           "\n"
           "trial reads the hyper-parameters from $CGQ_PARAMS (a JSON object) and writes\n"
           "one JSON report per epoch to $CGQ_REPORT_FD (docs/predictor.md).\n"
           "\n"
           "export turns the results of a cpu-local measurement job (`cgq results J --format\n"
           "json`, FILE or - for stdin) into a CG dataset in DIR: each graph built again\n"
           "from its params and labelled with its measured time, FLOPs and parameters.\n"
           "\n"
           "predict applies a saved model (--model: its model.json or the directory holding\n"
           "it, e.g. the best trial's) to --data: a CG dataset directory or one CG model\n"
           "(model.json of cgq-cg gen). It prints each graph's predicted latency and, where\n"
           "the dataset has it, the measured one, then MAE, MAPE, RMSE, SRCC and +-10 %\n"
           "accuracy over the labelled graphs.\n"
           "\n"
           "features prints a JSON line per graph: its family, label, part of the split that\n"
           "the same --set keys make (seed, val_frac, test_frac, test_family), its total\n"
           "FLOPs and bytes moved, and per op type [count, FLOPs, bytes]: what the baselines\n"
           "of bench/predictor_baselines.py are fitted on, on the models' own splits.\n"
           "\n"
           "hyper-parameters (KEY, default, meaning):\n",
           f);
    cgq_pred_config_help (f);
}

typedef struct {
    bool json;  // train --json: a JSON line per epoch on stdout
    bool trial; // reports to $CGQ_REPORT_FD
} s_out_t;

static void
s_line_metrics (cgq_line_t *l, const char *prefix, const cgq_pred_metrics_t *m)
{
    char k[32];
    snprintf (k, sizeof k, "%s_mae", prefix);
    cgq_line_num (l, k, m->mae);
    snprintf (k, sizeof k, "%s_mape", prefix);
    cgq_line_num (l, k, m->mape);
    snprintf (k, sizeof k, "%s_rmse", prefix);
    cgq_line_num (l, k, m->rmse);
    snprintf (k, sizeof k, "%s_srcc", prefix);
    cgq_line_num (l, k, m->srcc);
    snprintf (k, sizeof k, "%s_acc10", prefix);
    cgq_line_num (l, k, m->acc10);
}

static int
s_on_epoch (void *arg, const cgq_pred_epoch_t *e)
{
    const s_out_t *o = arg;
    if (o->trial || o->json) {
        cgq_line_t l;
        cgq_line_begin (&l);
        cgq_line_int (&l, "epoch", e->epoch);
        cgq_line_num (&l, "train_loss", e->train_loss);
        if (e->train_node_loss > 0) // node_loss on
            cgq_line_num (&l, "train_node_loss", e->train_node_loss);
        s_line_metrics (&l, "val", &e->val);
        cgq_line_num (&l, "epoch_s", e->epoch_s);
        cgq_line_send (&l);
    }
    else
        printf ("epoch %4d  loss %.4f  val: MAE %.4g ms  MAPE %.2f %%  RMSE %.4g  SRCC %.4f  "
                "acc10 %.1f %%  (%.2f s)\n",
                e->epoch, e->train_loss, e->val.mae, e->val.mape, e->val.rmse, e->val.srcc,
                e->val.acc10, e->epoch_s);
    fflush (stdout);
    return 0;
}

static int
s_run (const char *data_dir, cgq_pred_config_t *cfg, const char *out_dir, s_out_t *o)
{
    char err[1024];
    cgq_pred_data_t *data =
        cgq_pred_data_load (data_dir, cfg->label, cfg->max_graphs, err, sizeof err);
    if (!data) {
        s_error ("%s", err);
        return S_BAD;
    }
    cgq_pred_result_t r;
    int rc = cgq_pred_train (cfg, data, out_dir, s_on_epoch, o, &r, err, sizeof err);
    cgq_pred_data_destroy (&data);
    if (rc < 0) {
        s_error ("%s", err);
        return r.best_epoch > 0 || strstr (err, "diverged") ? S_FAIL : S_BAD;
    }
    double gflops = r.train_s > 0 ? r.flops / r.train_s / 1e9 : 0;
    if (o->trial || o->json) {
        // The final line is the trial's result: the best epoch's metrics.
        cgq_line_t l;
        cgq_line_begin (&l);
        // A kernel model is fitted once: one "epoch".
        cgq_line_int (&l, "epoch", cfg->model == CGQ_PRED_MODEL_KERNEL ? 1 : cfg->epochs);
        cgq_line_int (&l, "best_epoch", r.best_epoch);
        s_line_metrics (&l, "val", &r.val);
        s_line_metrics (&l, "test", &r.test);
        cgq_line_num (&l, "train_s", r.train_s);
        cgq_line_num (&l, "train_gflops", gflops);
        cgq_line_int (&l, "graphs_train", r.ntrain);
        cgq_line_send (&l);
    }
    else {
        if (cfg->model == CGQ_PRED_MODEL_KERNEL)
            printf ("kernel model (train %d, val %d, test %d graphs; fitted in %.1f s)\n",
                    r.ntrain, r.nval, r.ntest, r.train_s);
        else
            printf ("best epoch %d of %d (train %d, val %d, test %d graphs; %.1f s of training, "
                    "%.1f GFLOP/s of sgemm work per second of it)\n",
                    r.best_epoch, cfg->epochs, r.ntrain, r.nval, r.ntest, r.train_s, gflops);
        printf ("  val:  MAE %.4g ms  MAPE %.2f %%  RMSE %.4g  SRCC %.4f  acc10 %.1f %%\n",
                r.val.mae, r.val.mape, r.val.rmse, r.val.srcc, r.val.acc10);
        printf ("  test: MAE %.4g ms  MAPE %.2f %%  RMSE %.4g  SRCC %.4f  acc10 %.1f %%\n",
                r.test.mae, r.test.mape, r.test.rmse, r.test.srcc, r.test.acc10);
        if (out_dir && cfg->model == CGQ_PRED_MODEL_KERNEL)
            printf ("model: %s/model.json\n", out_dir);
        else if (out_dir)
            printf ("best model: %s/model.json, %s/model.f32\n", out_dir, out_dir);
    }
    return S_OK;
}

static int s_features (const char *data_dir, const cgq_pred_config_t *cfg);

// s_main: train, trial, or (features) the per-graph features of the
// baselines with the split the same --set keys make.
static int
s_main (int argc, char **argv, bool trial, bool features)
{
    static const struct option opts[] = {
        {"data", required_argument, NULL, 'd'}, {"set", required_argument, NULL, 's'},
        {"out", required_argument, NULL, 'o'},  {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},       {NULL, 0, NULL, 0},
    };
    cgq_pred_config_t cfg;
    cgq_pred_config_default (&cfg);
    const char *data = NULL, *out = NULL;
    s_out_t o = {.trial = trial};
    char err[512];
    int c;
    optind = 1;
    while ((c = getopt_long (argc, argv, "d:s:o:jh", opts, NULL)) != -1) {
        switch (c) {
        case 'd': data = optarg; break;
        case 's': {
            char *eq = strchr (optarg, '=');
            if (!eq || eq == optarg) {
                s_error ("--set %s: write --set KEY=VALUE, e.g. --set hidden=128", optarg);
                return S_BAD;
            }
            *eq = '\0';
            if (cgq_pred_config_set (&cfg, optarg, eq + 1, err, sizeof err) < 0) {
                s_error ("--set %s", err);
                return S_BAD;
            }
            break;
        }
        case 'o': out = optarg; break;
        case 'j':
            o.json = true;
            setenv ("CGQ_REPORT_FD", "1", 1); // cgq_line_send writes to stdout
            break;
        case 'h': s_usage (stdout); return S_OK;
        default: s_usage (stderr); return S_BAD;
        }
    }
    if (optind < argc) {
        s_error ("unexpected argument '%s' (see --help)", argv[optind]);
        return S_BAD;
    }
    if (!data) {
        s_error ("--data DIR is missing (a CG dataset directory, e.g. datasets/cg-cpu-local)");
        return S_BAD;
    }
    if (trial) {
        // The params of the trial, as cgq-worker passes them.
        const char *p = getenv ("CGQ_PARAMS");
        json_error_t je;
        json_t *params = json_loads (p ? p : "{}", 0, &je);
        if (!params || cgq_pred_config_set_json (&cfg, params, err, sizeof err) < 0) {
            if (!params)
                snprintf (err, sizeof err, "CGQ_PARAMS is not JSON: %s", je.text);
            s_error ("params: %s", err);
            json_decref (params);
            return S_BAD;
        }
        json_decref (params);
        out = ".";
    }
    if (features)
        return s_features (data, &cfg);
    return s_run (data, &cfg, out, &o);
}

// s_features prints one JSON line per graph: its index, family, label,
// which part of the split the config makes it (train, val, test), its
// nodes, total FLOPs and bytes moved (predictor/node.h, the kernel model's
// and the GNN's count), and per op type [count, FLOPs, bytes]: what the
// baselines of docs/predictor.md (a per-family linear fit, a random forest
// on aggregated op features; bench/predictor_baselines.py) are fitted on,
// graph for graph on the same splits as the kernel model and the GNN.
static int
s_features (const char *data_dir, const cgq_pred_config_t *cfg)
{
    char err[1024];
    cgq_pred_data_t *data =
        cgq_pred_data_load (data_dir, cfg->label, cfg->max_graphs, err, sizeof err);
    if (!data || cgq_pred_data_split (data, cfg->seed, cfg->val_frac, cfg->test_frac,
                                      cfg->test_family, true, err, sizeof err) < 0) {
        s_error ("%s", err);
        cgq_pred_data_destroy (&data);
        return S_BAD;
    }
    int n = cgq_pred_data_count (data);
    char *part = cgq_xcalloc ((size_t)n + 1, 1);
    const char *names[] = {"train", "val", "test"};
    const cgq_pred_part_t parts[] = {CGQ_PRED_TRAIN, CGQ_PRED_VAL, CGQ_PRED_TEST};
    for (int k = 0; k < 3; k++) {
        int m;
        const int *idx = cgq_pred_data_part (data, parts[k], &m);
        for (int j = 0; j < m; j++)
            part[idx[j]] = (char)(k + 1);
    }
    for (int i = 0; i < n; i++) {
        int nodes;
        const double *raw = cgq_pred_data_nodes (data, i, &nodes);
        json_t *ops = json_object ();
        double flops = 0, bytes = 0;
        for (int v = 0; v < nodes; v++) {
            double c[CGQ_PRED_NODE_FEATS];
            cgq_pred_node_config (raw + (size_t)v * CGQ_CG_NUM_FEATS, c);
            const char *op = cgq_pred_kernel_op_name ((int)raw[(size_t)v * CGQ_CG_NUM_FEATS]);
            json_t *a = json_object_get (ops, op);
            if (!a) {
                a = json_pack ("[i, f, f]", 0, 0.0, 0.0);
                json_object_set_new (ops, op, a);
            }
            json_array_set_new (a, 0, json_integer (json_integer_value (json_array_get (a, 0)) + 1));
            json_array_set_new (a, 1, json_real (json_real_value (json_array_get (a, 1)) +
                                                 c[CGQ_PRED_NODE_FLOPS]));
            json_array_set_new (a, 2, json_real (json_real_value (json_array_get (a, 2)) +
                                                 c[CGQ_PRED_NODE_BYTES]));
            flops += c[CGQ_PRED_NODE_FLOPS];
            bytes += c[CGQ_PRED_NODE_BYTES];
        }
        const char *fam = cgq_pred_data_family (data, i);
        json_t *o = json_pack ("{s:i, s:s, s:f, s:s, s:i, s:f, s:f, s:o}", "i", i, "family",
                               fam ? fam : "", "label", cgq_pred_data_label (data, i), "part",
                               part[i] ? names[part[i] - 1] : "none", "nodes", nodes, "flops",
                               flops, "bytes", bytes, "ops", ops);
        char *line = json_dumps (o, JSON_COMPACT);
        puts (line);
        free (line);
        json_decref (o);
    }
    free (part);
    cgq_pred_data_destroy (&data);
    return S_OK;
}

static int
s_export (int argc, char **argv)
{
    static const struct option opts[] = {
        {"results", required_argument, NULL, 'r'},
        {"out", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *results = NULL, *out = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long (argc, argv, "r:o:h", opts, NULL)) != -1) {
        if (c == 'r')
            results = optarg;
        else if (c == 'o')
            out = optarg;
        else if (c == 'h') {
            s_usage (stdout);
            return S_OK;
        }
        else {
            s_usage (stderr);
            return S_BAD;
        }
    }
    if (!results || !out || optind < argc) {
        s_error ("export needs --results FILE (or -) and --out DIR, and nothing else");
        return S_BAD;
    }
    json_error_t je;
    json_t *doc =
        !strcmp (results, "-") ? json_loadf (stdin, 0, &je) : json_load_file (results, 0, &je);
    if (!doc) {
        s_error ("%s:%d: not JSON: %s (expected cgq results J --format json)", results, je.line,
                 je.text);
        return S_BAD;
    }
    char err[1024];
    int n = cgq_pred_export (doc, out, err, sizeof err);
    json_decref (doc);
    if (n < 0) {
        s_error ("%s: %s", results, err);
        return S_FAIL;
    }
    printf ("wrote %d graphs to %s\n", n, out);
    return S_OK;
}


// s_predict: cgq-predictor predict --model PATH --data PATH.
static int
s_predict (int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, NULL, 'm'}, {"data", required_argument, NULL, 'd'},
        {"label", required_argument, NULL, 'l'}, {"format", required_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'},        {NULL, 0, NULL, 0},
    };
    const char *model_path = NULL, *data_path = NULL, *format = "table";
    long label = 0;
    int c;
    optind = 1;
    while ((c = getopt_long (argc, argv, "m:d:l:f:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model_path = optarg; break;
        case 'd': data_path = optarg; break;
        case 'l': {
            char *end;
            errno = 0;
            label = strtol (optarg, &end, 10);
            if (errno || *end || end == optarg || label < 0 || label > 1000) {
                s_error ("--label %s: write the label column's number (0 is the first)", optarg);
                return S_BAD;
            }
            break;
        }
        case 'f': format = optarg; break;
        case 'h': s_usage (stdout); return S_OK;
        default: s_usage (stderr); return S_BAD;
        }
    }
    if (!model_path || !data_path || optind < argc) {
        s_error ("predict needs --model PATH and --data PATH, and nothing else (see --help)");
        return S_BAD;
    }
    enum { TABLE, CSV, JSON } fmt;
    if (!strcmp (format, "table"))
        fmt = TABLE;
    else if (!strcmp (format, "csv"))
        fmt = CSV;
    else if (!strcmp (format, "json"))
        fmt = JSON;
    else {
        s_error ("--format %s: expected table, csv or json", format);
        return S_BAD;
    }
    char err[1024];
    cgq_pred_kernel_t *kmodel = NULL;
    cgq_pred_model_t *model = NULL;
    if (cgq_pred_kernel_is (model_path))
        kmodel = cgq_pred_kernel_load (model_path, err, sizeof err);
    else
        model = cgq_pred_model_load (model_path, err, sizeof err);
    if (!model && !kmodel) {
        s_error ("%s", err);
        return S_BAD;
    }
    cgq_pred_data_t *data = cgq_pred_data_read (data_path, (int)label, err, sizeof err);
    if (!data) {
        s_error ("%s", err);
        cgq_pred_model_destroy (&model);
        cgq_pred_kernel_destroy (&kmodel);
        return S_BAD;
    }
    int n = cgq_pred_data_count (data);
    double *pred = cgq_xcalloc ((size_t)n, sizeof *pred);
    double *lp = cgq_xcalloc ((size_t)n, sizeof *lp), *ly = cgq_xcalloc ((size_t)n, sizeof *ly);
    int rc = S_OK;
    if (kmodel ? cgq_pred_kernel_predict (kmodel, data, NULL, n, pred, err, sizeof err) < 0
               : cgq_pred_model_predict (model, data, pred, err, sizeof err) < 0) {
        s_error ("%s: %s", model_path, err);
        rc = S_BAD;
        goto done;
    }
    size_t nl = 0;
    for (int i = 0; i < n; i++) {
        double y = cgq_pred_data_label (data, i);
        if (isfinite (y)) {
            lp[nl] = pred[i];
            ly[nl++] = y;
        }
    }
    cgq_pred_metrics_t m;
    if (nl > 0)
        cgq_pred_metrics (lp, ly, nl, &m);
    if (fmt == JSON) {
        json_t *graphs = json_array ();
        for (int i = 0; i < n; i++) {
            double y = cgq_pred_data_label (data, i);
            const char *fam = cgq_pred_data_family (data, i);
            json_t *g = json_pack ("{s:i, s:f}", "graph", i, "predicted_ms", pred[i]);
            if (fam)
                json_object_set_new (g, "family", json_string (fam));
            if (isfinite (y))
                json_object_set_new (g, "measured_ms", json_real (y));
            int nodes;
            cgq_pred_data_nodes (data, i, &nodes);
            double *node_ms = cgq_xcalloc ((size_t)nodes + 1, sizeof *node_ms);
            if (model && cgq_pred_model_predict_nodes (model, data, i, node_ms) == 0) {
                json_t *a = json_array (); // additive readout: what it summed
                for (int k = 0; k < nodes; k++)
                    json_array_append_new (a, json_real (node_ms[k]));
                json_object_set_new (g, "node_ms", a);
            }
            free (node_ms);
            json_array_append_new (graphs, g);
        }
        json_t *doc = json_pack ("{s:s, s:s, s:o}", "model", model_path, "data", data_path,
                                 "graphs", graphs);
        if (nl > 0)
            json_object_set_new (doc, "metrics",
                                 json_pack ("{s:I, s:f, s:f, s:f, s:f, s:f}", "n", (json_int_t)nl,
                                            "mae", m.mae, "mape", m.mape, "rmse", m.rmse, "srcc",
                                            m.srcc, "acc10", m.acc10));
        json_dumpf (doc, stdout, JSON_INDENT (1) | JSON_REAL_PRECISION (10));
        fputc ('\n', stdout);
        json_decref (doc);
        goto done;
    }
    if (fmt == CSV)
        puts ("graph,family,predicted_ms,measured_ms");
    else
        printf ("%6s  %-14s  %12s  %12s  %8s\n", "graph", "family", "predicted_ms", "measured_ms",
                "error");
    for (int i = 0; i < n; i++) {
        double y = cgq_pred_data_label (data, i);
        const char *fam = cgq_pred_data_family (data, i);
        if (fmt == CSV) {
            printf ("%d,%s,%.6g,", i, fam ? fam : "", pred[i]);
            if (isfinite (y))
                printf ("%.6g", y);
            putchar ('\n');
        }
        else if (isfinite (y))
            printf ("%6d  %-14s  %12.4f  %12.4f  %+7.1f%%\n", i, fam ? fam : "-", pred[i], y,
                    (pred[i] - y) / y * 100);
        else
            printf ("%6d  %-14s  %12.4f  %12s  %8s\n", i, fam ? fam : "-", pred[i], "-", "-");
    }
    if (fmt == TABLE && nl > 0)
        printf ("%zu labelled graphs: MAE %.4g ms  MAPE %.2f %%  RMSE %.4g  SRCC %.4f  acc10 %.1f "
                "%%\n",
                nl, m.mae, m.mape, m.rmse, m.srcc, m.acc10);
done:
    free (pred);
    free (lp);
    free (ly);
    cgq_pred_data_destroy (&data);
    cgq_pred_model_destroy (&model);
    cgq_pred_kernel_destroy (&kmodel);
    return rc;
}

int
main (int argc, char **argv)
{
    // OpenBLAS starts a thread per core when it loads, and idle pool threads
    // poll: one thread unless told otherwise (as cgq-cg does).
    char self[4096];
    ssize_t len = readlink ("/proc/self/exe", self, sizeof self - 1);
    if (!getenv ("OPENBLAS_NUM_THREADS") && len > 0 && (size_t)len < sizeof self - 1) {
        self[len] = 0;
        if (setenv ("OPENBLAS_NUM_THREADS", "1", 1) == 0)
            execv (self, argv);
    }
    if (argc < 2) {
        s_usage (stderr);
        return S_BAD;
    }
    const char *cmd = argv[1];
    if (!strcmp (cmd, "--help") || !strcmp (cmd, "-h") || !strcmp (cmd, "help")) {
        s_usage (stdout);
        return S_OK;
    }
    if (!strcmp (cmd, "--version") || !strcmp (cmd, "-V")) {
        printf ("cgq-predictor %s\n", CGQ_PRED_VERSION);
        return S_OK;
    }
    if (!strcmp (cmd, "train") || !strcmp (cmd, "trial") || !strcmp (cmd, "features"))
        return s_main (argc - 1, argv + 1, !strcmp (cmd, "trial"), !strcmp (cmd, "features"));
    if (!strcmp (cmd, "export"))
        return s_export (argc - 1, argv + 1);
    if (!strcmp (cmd, "predict"))
        return s_predict (argc - 1, argv + 1);
    s_error ("unknown command '%s' (expected train, trial, export, predict or features; see "
             "--help)",
             cmd);
    return S_BAD;
}
