#include "data.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "dataset.h"
#include "graph.h"
#include "node.h"
#include "util.h"

struct cgq_pred_data_t {
    int count;
    int *node_off; // count + 1
    int *edge_off; // count + 1
    int *edges;    // all edges x 2, node ids local to their graph
    double *raw;   // all nodes x CGQ_CG_NUM_FEATS, as read
    float *enc;    // all nodes x in_dim, encoded with the split's scaling
    bool costs;    // log FLOPs and log bytes as inputs
    int in_dim;    // CGQ_PRED_IN_DIM or CGQ_PRED_IN_DIM_COSTS
    double *label; // count
    int *family;   // count: index into families, or NULL without a family file
    char **families;
    int nfamilies;
    double *node_label; // all nodes: each node's time (ms), or NULL without node-label.csv.gz

    int *parts[3];
    int nparts[3];
    float feat_mean[CGQ_PRED_NUM_SCALED];
    float feat_std[CGQ_PRED_NUM_SCALED];
    bool log_target;
    double y_mean, y_std;
    double node_shift; // log (mean node count of the train graphs)
};

uint64_t
cgq_pred_rng_next (uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

double
cgq_pred_rng_uniform (uint64_t *state)
{
    return (double)(cgq_pred_rng_next (state) >> 11) * (1.0 / 9007199254740992.0);
}

static const char *s_agg_names[] = {"sum", "mean", "gcn"};

const char *
cgq_pred_agg_name (cgq_pred_agg_t agg)
{
    return (unsigned)agg < 3 ? s_agg_names[agg] : "?";
}

int
cgq_pred_agg_parse (const char *name, cgq_pred_agg_t *agg)
{
    for (int i = 0; i < 3; i++)
        if (!strcmp (name, s_agg_names[i])) {
            *agg = (cgq_pred_agg_t)i;
            return 0;
        }
    return -1;
}

// s_read_families reads dir's family file if there is one. Returns 0 (also
// when there is none), or -1 with err set.
static int
s_read_families (cgq_pred_data_t *self, const char *dir, int count, char *err, size_t err_len)
{
    char *path = cgq_xasprintf ("%s/%s", dir, CGQ_CG_FAMILY_FILE);
    gzFile f = gzopen (path, "rb");
    if (!f) {
        free (path);
        return 0;
    }
    self->family = cgq_xcalloc ((size_t)count + 1, sizeof *self->family);
    char line[256];
    int n = 0, rc = 0;
    while (gzgets (f, line, sizeof line)) {
        line[strcspn (line, "\r\n")] = '\0';
        if (n >= count) {
            n++;
            continue;
        }
        int id = -1;
        for (int k = 0; k < self->nfamilies; k++)
            if (!strcmp (self->families[k], line))
                id = k;
        if (id < 0) {
            self->families =
                cgq_xrealloc (self->families, (size_t)(self->nfamilies + 1) * sizeof (char *));
            self->families[self->nfamilies] = cgq_xstrdup (line);
            id = self->nfamilies++;
        }
        self->family[n++] = id;
    }
    if (n < count) {
        snprintf (err, err_len, "%s: %d lines for %d graphs (regenerate the dataset)", path, n,
                  count);
        rc = -1;
    }
    gzclose (f);
    free (path);
    return rc;
}

// s_build turns ds (taken: destroyed here) into the predictor's data; dir
// names it in errors and holds its family file (NULL: none). Training needs
// labels (latency > 0) and at least 3 graphs; prediction (need_labels false)
// takes any count and keeps a missing or non-positive label as NaN.
static cgq_pred_data_t *
s_build (cgq_cg_dataset_t *ds, const char *dir, const char *family_dir, int label,
         int max_graphs, bool need_labels, char *err, size_t err_len)
{
    if (cgq_cg_dataset_num_feats (ds) != CGQ_CG_NUM_FEATS) {
        snprintf (err, err_len,
                  "%s: graphs have %d node features, the predictor reads %d (op code + 16; "
                  "see cg/README.md)",
                  dir, cgq_cg_dataset_num_feats (ds), CGQ_CG_NUM_FEATS);
        cgq_cg_dataset_destroy (&ds);
        return NULL;
    }
    if (label < 0 || label >= cgq_cg_dataset_num_labels (ds)) {
        snprintf (err, err_len, "%s: label column %d does not exist (the dataset has %d)", dir,
                  label, cgq_cg_dataset_num_labels (ds));
        cgq_cg_dataset_destroy (&ds);
        return NULL;
    }
    int count = cgq_cg_dataset_count (ds);
    size_t all_nodes = 0; // of every graph: what the node-label file lists
    for (int i = 0; i < count; i++) {
        cgq_cg_sample_t s;
        cgq_cg_dataset_get (ds, i, &s);
        all_nodes += (size_t)s.nodes;
    }
    if (max_graphs > 0 && max_graphs < count)
        count = max_graphs;
    if (count < (need_labels ? 3 : 1)) {
        snprintf (err, err_len, "%s: %d graphs; %s", dir, count,
                  need_labels ? "the predictor needs at least 3 to train" : "nothing to predict");
        cgq_cg_dataset_destroy (&ds);
        return NULL;
    }
    cgq_pred_data_t *self = cgq_xcalloc (1, sizeof *self);
    self->count = count;
    self->node_off = cgq_xcalloc ((size_t)count + 1, sizeof (int));
    self->edge_off = cgq_xcalloc ((size_t)count + 1, sizeof (int));
    self->label = cgq_xcalloc ((size_t)count, sizeof (double));
    size_t nodes = 0, edges = 0;
    for (int i = 0; i < count; i++) {
        cgq_cg_sample_t s;
        cgq_cg_dataset_get (ds, i, &s);
        nodes += (size_t)s.nodes;
        edges += (size_t)s.edges;
        if (nodes > INT32_MAX / 4 || edges > INT32_MAX / 4) {
            snprintf (err, err_len, "%s: too many nodes for one process (use max_graphs)", dir);
            goto fail;
        }
        self->node_off[i + 1] = (int)nodes;
        self->edge_off[i + 1] = (int)edges;
    }
    self->raw = cgq_xcalloc (nodes * CGQ_CG_NUM_FEATS + 1, sizeof (double));
    self->edges = cgq_xcalloc (edges * 2 + 1, sizeof (int));
    for (int i = 0; i < count; i++) {
        cgq_cg_sample_t s;
        cgq_cg_dataset_get (ds, i, &s);
        memcpy (self->raw + (size_t)self->node_off[i] * CGQ_CG_NUM_FEATS, s.feats,
                (size_t)s.nodes * CGQ_CG_NUM_FEATS * sizeof (double));
        memcpy (self->edges + (size_t)self->edge_off[i] * 2, s.edge_index,
                (size_t)s.edges * 2 * sizeof (int));
        self->label[i] = s.labels[label];
        if (!need_labels && !(self->label[i] > 0 && isfinite (self->label[i])))
            self->label[i] = NAN;
        if (!(self->label[i] > 0) || !isfinite (self->label[i])) {
            if (!need_labels)
                goto labelled;
            snprintf (err, err_len,
                      "%s: graph %d has latency %g; latencies must be > 0 (graph-label.csv.gz "
                      "line %d)",
                      dir, i, self->label[i], i + 1);
            goto fail;
        }
    labelled:
        for (int n = 0; n < s.nodes; n++) {
            double code = s.feats[(size_t)n * CGQ_CG_NUM_FEATS];
            if (!(code >= 0 && code < CGQ_PRED_NUM_OPS) || code != floor (code)) {
                snprintf (err, err_len, "%s: graph %d node %d has op code %g (expected 0..%d)", dir,
                          i, n, code, CGQ_PRED_NUM_OPS - 1);
                goto fail;
            }
        }
    }
    cgq_cg_dataset_destroy (&ds);
    if (family_dir && s_read_families (self, family_dir, count, err, err_len) < 0) {
        cgq_pred_data_destroy (&self);
        return NULL;
    }
    if (family_dir) {
        self->node_label = cgq_cg_dataset_read_node_labels (family_dir, all_nodes, err, err_len);
        if (!self->node_label && err[0]) {
            cgq_pred_data_destroy (&self);
            return NULL;
        }
    }
    for (int k = 0; k < CGQ_PRED_NUM_SCALED; k++)
        self->feat_std[k] = 1;
    self->y_std = 1;
    self->in_dim = CGQ_PRED_IN_DIM;
    return self;
fail:
    cgq_cg_dataset_destroy (&ds);
    cgq_pred_data_destroy (&self);
    return NULL;
}

cgq_pred_data_t *
cgq_pred_data_load (const char *dir, int label, int max_graphs, char *err, size_t err_len)
{
    cgq_cg_dataset_t *ds = cgq_cg_dataset_read (dir, err, err_len);
    return ds ? s_build (ds, dir, dir, label, max_graphs, true, err, err_len) : NULL;
}

cgq_pred_data_t *
cgq_pred_data_read (const char *path, int label, char *err, size_t err_len)
{
    struct stat st;
    if (stat (path, &st) < 0) {
        snprintf (err, err_len, "%s: %s (expected a CG dataset directory or a model.json of "
                                "cgq-cg gen)",
                  path, strerror (errno));
        return NULL;
    }
    if (S_ISDIR (st.st_mode)) {
        cgq_cg_dataset_t *ds = cgq_cg_dataset_read (path, err, err_len);
        return ds ? s_build (ds, path, path, label, 0, false, err, err_len) : NULL;
    }
    char why[512];
    cgq_cg_graph_t *g = cgq_cg_graph_load (path, why, sizeof why);
    if (!g) {
        snprintf (err, err_len, "%s: not a CG model: %s", path, why);
        return NULL;
    }
    cgq_cg_dataset_t *ds = cgq_cg_dataset_new (CGQ_CG_NUM_FEATS, 1);
    double unknown = NAN;
    int rc = cgq_cg_dataset_append_graph (ds, g, &unknown, why, sizeof why);
    cgq_cg_graph_destroy (&g);
    if (rc < 0) {
        snprintf (err, err_len, "%s: %s", path, why);
        cgq_cg_dataset_destroy (&ds);
        return NULL;
    }
    return s_build (ds, path, NULL, 0, 0, false, err, err_len);
}

void
cgq_pred_data_destroy (cgq_pred_data_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cgq_pred_data_t *self = *self_p;
    free (self->node_off);
    free (self->edge_off);
    free (self->edges);
    free (self->raw);
    free (self->enc);
    free (self->label);
    free (self->family);
    free (self->node_label);
    for (int k = 0; k < self->nfamilies; k++)
        free (self->families[k]);
    free (self->families);
    for (int p = 0; p < 3; p++)
        free (self->parts[p]);
    free (self);
    *self_p = NULL;
}

int
cgq_pred_data_count (const cgq_pred_data_t *self)
{
    return self->count;
}

double
cgq_pred_data_label (const cgq_pred_data_t *self, int i)
{
    return self->label[i];
}

const double *
cgq_pred_data_nodes (const cgq_pred_data_t *self, int i, int *nodes)
{
    *nodes = self->node_off[i + 1] - self->node_off[i];
    return self->raw + (size_t)self->node_off[i] * CGQ_CG_NUM_FEATS;
}

const double *
cgq_pred_data_node_labels (const cgq_pred_data_t *self, int i)
{
    return self->node_label ? self->node_label + self->node_off[i] : NULL;
}

const char *
cgq_pred_data_family (const cgq_pred_data_t *self, int i)
{
    return self->family ? self->families[self->family[i]] : NULL;
}

void
cgq_pred_data_set_costs (cgq_pred_data_t *self, bool on)
{
    self->costs = on;
    self->in_dim = on ? CGQ_PRED_IN_DIM_COSTS : CGQ_PRED_IN_DIM;
}

int
cgq_pred_data_in_dim (const cgq_pred_data_t *self)
{
    return self->in_dim;
}

// s_scaled is a node's numbers before standardisation: log(1 + v) of the 16
// shape numbers, then of its FLOPs and bytes moved (predictor/node.h).
static void
s_scaled (const double *r, double *v)
{
    for (int k = 0; k < CGQ_PRED_NUM_SHAPE; k++)
        v[k] = log1p (fmax (r[1 + k], 0));
    double c[CGQ_PRED_NODE_FEATS];
    cgq_pred_node_config (r, c);
    v[CGQ_PRED_NUM_SHAPE] = log1p (fmax (c[CGQ_PRED_NODE_FLOPS], 0));
    v[CGQ_PRED_NUM_SHAPE + 1] = log1p (fmax (c[CGQ_PRED_NODE_BYTES], 0));
}

static void s_encode (cgq_pred_data_t *self);

// s_fit computes the feature and target scalings from the train part.
static void
s_fit (cgq_pred_data_t *self)
{
    double sum[CGQ_PRED_NUM_SCALED] = {0}, sq[CGQ_PRED_NUM_SCALED] = {0};
    double n = 0, ys = 0, yq = 0;
    for (int t = 0; t < self->nparts[CGQ_PRED_TRAIN]; t++) {
        int g = self->parts[CGQ_PRED_TRAIN][t];
        for (int i = self->node_off[g]; i < self->node_off[g + 1]; i++) {
            double v[CGQ_PRED_NUM_SCALED];
            s_scaled (self->raw + (size_t)i * CGQ_CG_NUM_FEATS, v);
            for (int k = 0; k < CGQ_PRED_NUM_SCALED; k++) {
                sum[k] += v[k];
                sq[k] += v[k] * v[k];
            }
            n++;
        }
        double y = self->log_target ? log (self->label[g]) : self->label[g];
        ys += y;
        yq += y * y;
    }
    for (int k = 0; k < CGQ_PRED_NUM_SCALED; k++) {
        double m = n > 0 ? sum[k] / n : 0;
        double var = n > 0 ? sq[k] / n - m * m : 0;
        self->feat_mean[k] = (float)m;
        self->feat_std[k] = var > 1e-12 ? (float)sqrt (var) : 1.0f;
    }
    double nt = self->nparts[CGQ_PRED_TRAIN];
    self->node_shift = nt > 0 && n > 0 ? log (n / nt) : 0;
    self->y_mean = ys / nt;
    double var = yq / nt - self->y_mean * self->y_mean;
    self->y_std = var > 1e-18 ? sqrt (var) : 1.0;
}

int
cgq_pred_data_split (cgq_pred_data_t *self, uint64_t seed, double val_frac, double test_frac,
                     const char *test_family, bool log_target, char *err, size_t err_len)
{
    for (int p = 0; p < 3; p++) {
        free (self->parts[p]);
        self->parts[p] = cgq_xcalloc ((size_t)self->count, sizeof (int));
        self->nparts[p] = 0;
    }
    int *perm = cgq_xcalloc ((size_t)self->count, sizeof (int));
    for (int i = 0; i < self->count; i++)
        perm[i] = i;
    uint64_t rng = seed ^ 0x5eedULL;
    for (int i = self->count - 1; i > 0; i--) {
        int j = (int)(cgq_pred_rng_next (&rng) % (uint64_t)(i + 1));
        int t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    int fam = -1;
    if (test_family && *test_family) {
        if (!self->family) {
            snprintf (err, err_len,
                      "test_family '%s': the dataset has no %s (regenerate it with the "
                      "exporter, or leave test_family out)",
                      test_family, CGQ_CG_FAMILY_FILE);
            free (perm);
            return -1;
        }
        for (int k = 0; k < self->nfamilies; k++)
            if (!strcmp (self->families[k], test_family))
                fam = k;
        if (fam < 0) {
            cgq_buf_t b;
            cgq_buf_init (&b);
            for (int k = 0; k < self->nfamilies; k++)
                cgq_buf_printf (&b, "%s%s", k ? ", " : "", self->families[k]);
            snprintf (err, err_len, "test_family '%s' is not in the dataset (families: %s)",
                      test_family, b.data);
            cgq_buf_fini (&b);
            free (perm);
            return -1;
        }
    }
    int rest = 0;
    for (int i = 0; i < self->count; i++) {
        int g = perm[i];
        if (fam >= 0 && self->family[g] == fam)
            self->parts[CGQ_PRED_TEST][self->nparts[CGQ_PRED_TEST]++] = g;
        else
            perm[rest++] = g;
    }
    int ntest = fam >= 0 ? 0 : (int)lround (test_frac * rest);
    int nval = (int)lround (val_frac * (fam >= 0 ? rest : self->count));
    for (int i = 0; i < rest; i++) {
        cgq_pred_part_t p = i < ntest          ? CGQ_PRED_TEST
                            : i < ntest + nval ? CGQ_PRED_VAL
                                               : CGQ_PRED_TRAIN;
        self->parts[p][self->nparts[p]++] = perm[i];
    }
    free (perm);
    static const char *names[] = {"train", "validation", "test"};
    for (int p = 0; p < 3; p++)
        if (self->nparts[p] == 0) {
            snprintf (err, err_len,
                      "the %s split of %d graphs is empty (val_frac %g, test_frac %g: use "
                      "more graphs or larger fractions)",
                      names[p], self->count, val_frac, test_frac);
            return -1;
        }
    self->log_target = log_target;
    s_fit (self);
    s_encode (self);
    return 0;
}

int
cgq_pred_data_use_scaling (cgq_pred_data_t *self, const float *feat_mean, const float *feat_std,
                           double y_mean, double y_std, bool log_target, char *err,
                           size_t err_len)
{
    int nscaled = self->in_dim - CGQ_PRED_NUM_OPS;
    for (int k = 0; k < nscaled; k++)
        if (!isfinite (feat_mean[k]) || !(feat_std[k] > 0) || !isfinite (feat_std[k])) {
            snprintf (err, err_len, "feature scaling %d is mean %g, std %g (std must be > 0)", k,
                      (double)feat_mean[k], (double)feat_std[k]);
            return -1;
        }
    if (!isfinite (y_mean) || !(y_std > 0) || !isfinite (y_std)) {
        snprintf (err, err_len, "target scaling is mean %g, std %g (std must be > 0)", y_mean,
                  y_std);
        return -1;
    }
    memcpy (self->feat_mean, feat_mean, (size_t)nscaled * sizeof (float));
    memcpy (self->feat_std, feat_std, (size_t)nscaled * sizeof (float));
    self->y_mean = y_mean;
    self->y_std = y_std;
    self->log_target = log_target;
    // Every graph goes to the test part: that is the one prediction reads.
    for (int p = 0; p < 3; p++) {
        free (self->parts[p]);
        self->parts[p] = cgq_xcalloc ((size_t)self->count + 1, sizeof (int));
        self->nparts[p] = 0;
    }
    for (int i = 0; i < self->count; i++)
        self->parts[CGQ_PRED_TEST][self->nparts[CGQ_PRED_TEST]++] = i;
    s_encode (self);
    return 0;
}

// s_encode encodes every node once with the current scaling, so that a batch
// only copies rows.
static void
s_encode (cgq_pred_data_t *self)
{
    size_t nodes = (size_t)self->node_off[self->count];
    free (self->enc);
    size_t dim = (size_t)self->in_dim;
    int nscaled = self->in_dim - CGQ_PRED_NUM_OPS;
    self->enc = cgq_xcalloc (nodes * dim + 1, sizeof (float));
    for (size_t i = 0; i < nodes; i++) {
        const double *r = self->raw + i * CGQ_CG_NUM_FEATS;
        float *x = self->enc + i * dim;
        x[(int)r[0]] = 1.0f;
        double v[CGQ_PRED_NUM_SCALED];
        s_scaled (r, v);
        for (int k = 0; k < nscaled; k++)
            x[CGQ_PRED_NUM_OPS + k] = ((float)v[k] - self->feat_mean[k]) / self->feat_std[k];
    }
}

const int *
cgq_pred_data_part (const cgq_pred_data_t *self, cgq_pred_part_t part, int *n)
{
    *n = self->nparts[part];
    return self->parts[part];
}

void
cgq_pred_data_scaling (const cgq_pred_data_t *self, const float **feat_mean, const float **feat_std,
                       double *y_mean, double *y_std, bool *log_target)
{
    *feat_mean = self->feat_mean;
    *feat_std = self->feat_std;
    *y_mean = self->y_mean;
    *y_std = self->y_std;
    *log_target = self->log_target;
}

double
cgq_pred_data_target (const cgq_pred_data_t *self, int i)
{
    double y = self->log_target ? log (self->label[i]) : self->label[i];
    return (y - self->y_mean) / self->y_std;
}

double
cgq_pred_data_latency (const cgq_pred_data_t *self, double target)
{
    double y = target * self->y_std + self->y_mean;
    return self->log_target ? exp (y) : y;
}

double
cgq_pred_data_node_shift (const cgq_pred_data_t *self)
{
    return self->node_shift;
}

double
cgq_pred_data_node_target (const cgq_pred_data_t *self, int i, int k)
{
    if (!self->node_label)
        return NAN;
    double t = self->node_label[self->node_off[i] + k];
    if (self->log_target)
        return t > 0 ? (log (t) - self->y_mean + self->node_shift) / self->y_std : NAN;
    return (t - self->y_mean * exp (-self->node_shift)) / self->y_std;
}

void
cgq_pred_batch_init (cgq_pred_batch_t *b)
{
    memset (b, 0, sizeof *b);
}

void
cgq_pred_batch_fini (cgq_pred_batch_t *b)
{
    free (b->x);
    free (b->graph_off);
    free (b->target);
    free (b->index);
    free (b->node_target);
    free (b->row_off);
    free (b->col);
    free (b->val);
    free (b->edges);
    memset (b, 0, sizeof *b);
}

void
cgq_pred_batch_reserve (cgq_pred_batch_t *b, int nodes, int graphs)
{
    if ((size_t)nodes > b->cap_nodes) {
        size_t cap = (size_t)nodes + (size_t)nodes / 2;
        b->x = cgq_xrealloc (b->x, cap * CGQ_PRED_IN_DIM_COSTS * sizeof (float));
        b->node_target = cgq_xrealloc (b->node_target, cap * sizeof (float));
        b->row_off = cgq_xrealloc (b->row_off, (cap + 1) * sizeof (int));
        b->cap_nodes = cap;
    }
    if ((size_t)graphs > b->cap_graphs) {
        size_t cap = (size_t)graphs + 8;
        b->graph_off = cgq_xrealloc (b->graph_off, (cap + 1) * sizeof (int));
        b->target = cgq_xrealloc (b->target, cap * sizeof (float));
        b->index = cgq_xrealloc (b->index, cap * sizeof (int));
        b->cap_graphs = cap;
    }
}

void
cgq_pred_batch_build (cgq_pred_batch_t *b, const int *edges, int nedges, cgq_pred_agg_t agg)
{
    int n = b->nodes;
    cgq_pred_batch_reserve (b, n, b->graphs);
    size_t nnz = (size_t)nedges * 2 + (agg == CGQ_PRED_AGG_GCN ? (size_t)n : 0);
    if (nnz > b->cap_nnz) {
        b->cap_nnz = nnz + nnz / 2 + 1;
        b->col = cgq_xrealloc (b->col, b->cap_nnz * sizeof (int));
        b->val = cgq_xrealloc (b->val, b->cap_nnz * sizeof (float));
    }
    // Row lengths: every edge is a neighbour both ways (a node reads its
    // inputs and is read by its consumers), plus the self loop for GCN.
    int *len = b->row_off; // row_off[i + 1] counts row i, then prefix sums
    memset (len, 0, ((size_t)n + 1) * sizeof (int));
    for (int e = 0; e < nedges; e++) {
        len[edges[2 * e] + 1]++;
        len[edges[2 * e + 1] + 1]++;
    }
    if (agg == CGQ_PRED_AGG_GCN)
        for (int i = 0; i < n; i++)
            len[i + 1]++;
    for (int i = 0; i < n; i++)
        len[i + 1] += len[i];
    // Fill, using row_off[i] as the cursor of row i, then shift back.
    int *cur = cgq_xmalloc (((size_t)n + 1) * sizeof (int));
    memcpy (cur, b->row_off, ((size_t)n + 1) * sizeof (int));
    for (int e = 0; e < nedges; e++) {
        int s = edges[2 * e], d = edges[2 * e + 1];
        b->col[cur[d]++] = s;
        b->col[cur[s]++] = d;
    }
    if (agg == CGQ_PRED_AGG_GCN)
        for (int i = 0; i < n; i++)
            b->col[cur[i]++] = i;
    free (cur);
    for (int i = 0; i < n; i++) {
        int deg = b->row_off[i + 1] - b->row_off[i];
        for (int k = b->row_off[i]; k < b->row_off[i + 1]; k++) {
            if (agg == CGQ_PRED_AGG_SUM)
                b->val[k] = 1.0f;
            else if (agg == CGQ_PRED_AGG_MEAN)
                b->val[k] = 1.0f / (float)deg;
            else {
                int j = b->col[k];
                int dj = b->row_off[j + 1] - b->row_off[j];
                b->val[k] = (float)(1.0 / sqrt ((double)deg * dj));
            }
        }
    }
}

void
cgq_pred_data_batch (const cgq_pred_data_t *self, const int *idx, int n, cgq_pred_agg_t agg,
                     cgq_pred_batch_t *b)
{
    int nodes = 0, edges = 0;
    for (int t = 0; t < n; t++) {
        nodes += self->node_off[idx[t] + 1] - self->node_off[idx[t]];
        edges += self->edge_off[idx[t] + 1] - self->edge_off[idx[t]];
    }
    b->graphs = n;
    b->nodes = nodes;
    cgq_pred_batch_reserve (b, nodes, n);
    if ((size_t)edges > b->cap_edges) {
        b->cap_edges = (size_t)edges + (size_t)edges / 2 + 1;
        b->edges = cgq_xrealloc (b->edges, b->cap_edges * 2 * sizeof (int));
    }
    int at = 0, eat = 0;
    for (int t = 0; t < n; t++) {
        int g = idx[t];
        b->graph_off[t] = at;
        b->index[t] = g;
        b->target[t] = (float)cgq_pred_data_target (self, g);
        int len = self->node_off[g + 1] - self->node_off[g];
        size_t dim = (size_t)self->in_dim;
        memcpy (b->x + (size_t)at * dim, self->enc + (size_t)self->node_off[g] * dim,
                (size_t)len * dim * sizeof (float));
        for (int k = 0; k < len; k++)
            b->node_target[at + k] = (float)cgq_pred_data_node_target (self, g, k);
        at += len;
        int base = b->graph_off[t];
        for (int e = self->edge_off[g]; e < self->edge_off[g + 1]; e++, eat++) {
            b->edges[2 * eat] = base + self->edges[2 * e];
            b->edges[2 * eat + 1] = base + self->edges[2 * e + 1];
        }
    }
    b->graph_off[n] = at;
    cgq_pred_batch_build (b, b->edges, edges, agg);
}
