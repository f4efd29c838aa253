#include "dataset.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "util.h"

struct cgq_cg_dataset_t {
    int num_feats;
    int num_labels;
    int count;
    int cap;
    size_t *node_off; // count + 1: the first node of each graph
    size_t *edge_off; // count + 1: the first edge of each graph
    int *num_nodes;   // per graph, as written in num-node-list
    int *num_edges;
    double *labels; // count x num_labels
    double *feats;  // all nodes x num_feats
    size_t feats_cap;
    int *edges; // all edges x 2
    size_t edges_cap;
};

static const char *s_files[] = {"num-node-list.csv.gz", "num-edge-list.csv.gz", "node-feat.csv.gz",
                                "edge.csv.gz", "graph-label.csv.gz"};

cgq_cg_dataset_t *
cgq_cg_dataset_new (int num_feats, int num_labels)
{
    cgq_cg_dataset_t *self = cgq_xcalloc (1, sizeof *self);
    self->num_feats = num_feats > 0 ? num_feats : 1;
    self->num_labels = num_labels > 0 ? num_labels : 1;
    self->node_off = cgq_xcalloc (1, sizeof (size_t));
    self->edge_off = cgq_xcalloc (1, sizeof (size_t));
    return self;
}

void
cgq_cg_dataset_destroy (cgq_cg_dataset_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cgq_cg_dataset_t *self = *self_p;
    free (self->node_off);
    free (self->edge_off);
    free (self->num_nodes);
    free (self->num_edges);
    free (self->labels);
    free (self->feats);
    free (self->edges);
    free (self);
    *self_p = NULL;
}

int
cgq_cg_dataset_count (const cgq_cg_dataset_t *self)
{
    return self->count;
}

int
cgq_cg_dataset_num_feats (const cgq_cg_dataset_t *self)
{
    return self->num_feats;
}

int
cgq_cg_dataset_num_labels (const cgq_cg_dataset_t *self)
{
    return self->num_labels;
}

int
cgq_cg_dataset_get (const cgq_cg_dataset_t *self, int i, cgq_cg_sample_t *out)
{
    if (i < 0 || i >= self->count)
        return -1;
    out->nodes = self->num_nodes[i];
    out->edges = self->num_edges[i];
    out->feats = self->feats + self->node_off[i] * (size_t) self->num_feats;
    out->edge_index = self->edges + self->edge_off[i] * 2;
    out->labels = self->labels + (size_t) i * (size_t) self->num_labels;
    return 0;
}

// s_grow makes room for graph number self->count.
static void
s_grow_graphs (cgq_cg_dataset_t *self)
{
    if (self->count < self->cap)
        return;
    self->cap = self->cap ? 2 * self->cap : 64;
    size_t cap = (size_t) self->cap;
    self->node_off = cgq_xrealloc (self->node_off, sizeof (size_t) * (cap + 1));
    self->edge_off = cgq_xrealloc (self->edge_off, sizeof (size_t) * (cap + 1));
    self->num_nodes = cgq_xrealloc (self->num_nodes, sizeof (int) * cap);
    self->num_edges = cgq_xrealloc (self->num_edges, sizeof (int) * cap);
    self->labels = cgq_xrealloc (self->labels, sizeof (double) * cap * (size_t) self->num_labels);
}

static void
s_reserve (void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return;
    size_t c = *cap ? *cap : 1024;
    while (c < need)
        c *= 2;
    *p = cgq_xrealloc (*p, c * elem);
    *cap = c;
}

int
cgq_cg_dataset_append (cgq_cg_dataset_t *self, int nodes, const double *feats, int edges,
                       const int *edge_index, const double *labels, char *err, size_t err_len)
{
    if (nodes < 0 || edges < 0) {
        snprintf (err, err_len, "graph %d: negative node (%d) or edge (%d) count", self->count,
                  nodes, edges);
        return -1;
    }
    for (int e = 0; e < 2 * edges; e++)
        if (edge_index[e] < 0 || edge_index[e] >= nodes) {
            snprintf (err, err_len,
                      "graph %d: edge %d names node %d, outside the graph's %d "
                      "nodes",
                      self->count, e / 2, edge_index[e], nodes);
            return -1;
        }
    s_grow_graphs (self);
    size_t n0 = self->node_off[self->count], e0 = self->edge_off[self->count];
    size_t nf = (size_t) self->num_feats;
    s_reserve ((void **) &self->feats, &self->feats_cap, (n0 + (size_t) nodes) * nf,
               sizeof (double));
    s_reserve ((void **) &self->edges, &self->edges_cap, (e0 + (size_t) edges) * 2, sizeof (int));
    if (nodes)
        memcpy (self->feats + n0 * nf, feats, sizeof (double) * (size_t) nodes * nf);
    if (edges)
        memcpy (self->edges + e0 * 2, edge_index, sizeof (int) * 2 * (size_t) edges);
    memcpy (self->labels + (size_t) self->count * (size_t) self->num_labels, labels,
            sizeof (double) * (size_t) self->num_labels);
    self->num_nodes[self->count] = nodes;
    self->num_edges[self->count] = edges;
    self->node_off[self->count + 1] = n0 + (size_t) nodes;
    self->edge_off[self->count + 1] = e0 + (size_t) edges;
    self->count++;
    return 0;
}

int
cgq_cg_dataset_append_graph (cgq_cg_dataset_t *self, const cgq_cg_graph_t *g, const double *labels,
                             char *err, size_t err_len)
{
    if (self->num_feats != CGQ_CG_NUM_FEATS) {
        snprintf (err, err_len, "the dataset has %d features per node, a graph has %d",
                  self->num_feats, CGQ_CG_NUM_FEATS);
        return -1;
    }
    int n = cgq_cg_graph_size (g), ne = cgq_cg_graph_edge_count (g);
    double *feats = cgq_xmalloc (sizeof (double) * (size_t) (n ? n : 1) * CGQ_CG_NUM_FEATS);
    int *edges = cgq_xmalloc (sizeof (int) * 2 * (size_t) (ne ? ne : 1));
    int e = 0;
    for (int i = 0; i < n; i++) {
        cgq_cg_graph_features (g, i, feats + (size_t) i * CGQ_CG_NUM_FEATS);
        const cgq_cg_node_t *node = cgq_cg_graph_node (g, i);
        for (int j = 0; j < node->ninputs; j++) {
            edges[2 * e] = node->inputs[j];
            edges[2 * e + 1] = i;
            e++;
        }
    }
    int rc = cgq_cg_dataset_append (self, n, feats, ne, edges, labels, err, err_len);
    free (feats);
    free (edges);
    return rc;
}

// ---------------------------------------------------------------------------
// Writing

typedef struct {
    gzFile f;
    char *path;
    cgq_buf_t buf;
    bool failed;
} s_writer_t;

static int
s_writer_open (s_writer_t *w, const char *dir, const char *name, char *err, size_t err_len)
{
    memset (w, 0, sizeof *w);
    w->path = cgq_xasprintf ("%s/%s", dir, name);
    cgq_buf_init (&w->buf);
    w->f = gzopen (w->path, "wb6");
    if (!w->f) {
        snprintf (err, err_len, "cannot write %s: %s (check the directory is writable)", w->path,
                  errno ? strerror (errno) : "out of memory");
        return -1;
    }
    return 0;
}

static void
s_writer_flush (s_writer_t *w)
{
    if (w->buf.len && !w->failed) {
        if (gzwrite (w->f, w->buf.data, (unsigned) w->buf.len) != (int) w->buf.len)
            w->failed = true;
    }
    cgq_buf_reset (&w->buf);
}

// s_writer_close flushes and closes; returns 0, or -1 with err filled.
static int
s_writer_close (s_writer_t *w, int rc, char *err, size_t err_len)
{
    if (w->f) {
        s_writer_flush (w);
        int zrc = gzclose (w->f);
        if (rc == 0 && (w->failed || zrc != Z_OK)) {
            snprintf (err, err_len, "cannot write %s: %s (check free disk space)", w->path,
                      errno ? strerror (errno) : "compression failed");
            rc = -1;
        }
    }
    cgq_buf_fini (&w->buf);
    free (w->path);
    return rc;
}

static void
s_put_doubles (s_writer_t *w, const double *v, int n)
{
    char num[32];
    for (int i = 0; i < n; i++) {
        if (i)
            cgq_buf_append (&w->buf, ",", 1);
        cgq_buf_puts (&w->buf, cgq_fmt_double (num, v[i]));
    }
    cgq_buf_append (&w->buf, "\n", 1);
    if (w->buf.len > 1 << 16)
        s_writer_flush (w);
}

int
cgq_cg_dataset_write (const cgq_cg_dataset_t *self, const char *dir, char *err, size_t err_len)
{
    if (cgq_mkdir_p (dir) < 0) {
        snprintf (err, err_len, "cannot make directory %s: %s (check the path and permissions)",
                  dir, strerror (errno));
        return -1;
    }
    s_writer_t w[5];
    int rc = 0, opened = 0;
    for (; opened < 5; opened++)
        if (s_writer_open (&w[opened], dir, s_files[opened], err, err_len) < 0) {
            rc = -1;
            opened++; // close its path and buffer too
            break;
        }
    if (rc == 0) {
        for (int i = 0; i < self->count; i++) {
            cgq_cg_sample_t s;
            cgq_cg_dataset_get (self, i, &s);
            cgq_buf_printf (&w[0].buf, "%d\n", s.nodes);
            cgq_buf_printf (&w[1].buf, "%d\n", s.edges);
            for (int n = 0; n < s.nodes; n++)
                s_put_doubles (&w[2], s.feats + (size_t) n * (size_t) self->num_feats,
                               self->num_feats);
            for (int e = 0; e < s.edges; e++) {
                cgq_buf_printf (&w[3].buf, "%d,%d\n", s.edge_index[2 * e], s.edge_index[2 * e + 1]);
                if (w[3].buf.len > 1 << 16)
                    s_writer_flush (&w[3]);
            }
            s_put_doubles (&w[4], s.labels, self->num_labels);
            for (int k = 0; k < 2; k++)
                if (w[k].buf.len > 1 << 16)
                    s_writer_flush (&w[k]);
        }
    }
    for (int k = 0; k < opened; k++)
        rc = s_writer_close (&w[k], rc, err, err_len);
    return rc;
}

// ---------------------------------------------------------------------------
// Reading

typedef struct {
    gzFile f;
    char *path;
    const char *name;
    long line;
    char buf[1 << 16];
} s_reader_t;

static int
s_reader_open (s_reader_t *r, const char *dir, const char *name, char *err, size_t err_len)
{
    r->path = cgq_xasprintf ("%s/%s", dir, name);
    r->name = name;
    r->line = 0;
    errno = 0;
    r->f = gzopen (r->path, "rb");
    if (!r->f) {
        snprintf (err, err_len,
                  "cannot read %s: %s (a CG dataset directory holds %s, %s, %s, "
                  "%s and %s; cgq-cg gen --count N --out DIR writes one)",
                  r->path, errno ? strerror (errno) : "out of memory", s_files[0], s_files[1],
                  s_files[2], s_files[3], s_files[4]);
        return -1;
    }
    gzbuffer (r->f, 1 << 17);
    return 0;
}

static void
s_reader_close (s_reader_t *r)
{
    if (r->f)
        gzclose (r->f);
    r->f = NULL;
    free (r->path);
    r->path = NULL;
}

// s_reader_next reads the next line into r->buf without its end of line.
// Returns 1 for a line, 0 at the end of the file, -1 with err filled.
static int
s_reader_next (s_reader_t *r, char *err, size_t err_len)
{
    if (!gzgets (r->f, r->buf, sizeof r->buf)) {
        int zerr;
        const char *msg = gzerror (r->f, &zerr);
        if (zerr != Z_OK) {
            snprintf (err, err_len, "%s:%ld: %s (the file is damaged; write it again)", r->path,
                      r->line + 1, zerr == Z_ERRNO ? strerror (errno) : msg);
            return -1;
        }
        return 0;
    }
    r->line++;
    size_t len = strlen (r->buf);
    if (len == sizeof r->buf - 1 && r->buf[len - 1] != '\n') {
        snprintf (err, err_len, "%s:%ld: line longer than %zu bytes", r->path, r->line,
                  sizeof r->buf - 2);
        return -1;
    }
    while (len && (r->buf[len - 1] == '\n' || r->buf[len - 1] == '\r'))
        r->buf[--len] = 0;
    return 1;
}

// s_parse_doubles reads the comma-separated numbers of line into v (at most
// max). Returns how many, or -1 on something that is not a number.
static int
s_parse_doubles (const char *line, double *v, int max)
{
    int n = 0;
    const char *p = line;
    for (;;) {
        char *end;
        errno = 0;
        double x = strtod (p, &end);
        if (end == p || errno == ERANGE || n == max)
            return -1;
        v[n++] = x;
        while (*end == ' ')
            end++;
        if (*end == 0)
            return n;
        if (*end != ',')
            return -1;
        p = end + 1;
    }
}

// s_parse_ints reads comma-separated non-negative integers (as s_parse_doubles).
static int
s_parse_ints (const char *line, int *v, int max)
{
    int n = 0;
    const char *p = line;
    for (;;) {
        char *end;
        errno = 0;
        while (*p == ' ')
            p++;
        if (*p < '0' || *p > '9')
            return -1;
        long x = strtol (p, &end, 10);
        if (errno == ERANGE || x > INT_MAX || n == max)
            return -1;
        v[n++] = (int) x;
        while (*end == ' ')
            end++;
        if (*end == 0)
            return n;
        if (*end != ',')
            return -1;
        p = end + 1;
    }
}

// s_read_counts reads a one-integer-per-line file into *out (caller frees).
// Returns the number of lines, or -1 with err filled.
static int
s_read_counts (const char *dir, const char *name, int **out, char *err, size_t err_len)
{
    s_reader_t *r = cgq_xcalloc (1, sizeof *r);
    int n = 0, cap = 0, rc;
    *out = NULL;
    if (s_reader_open (r, dir, name, err, err_len) < 0) {
        n = -1;
        goto done;
    }
    while ((rc = s_reader_next (r, err, err_len)) == 1) {
        int v;
        if (s_parse_ints (r->buf, &v, 1) != 1) {
            snprintf (err, err_len,
                      "%s:%ld: '%.40s' is not a count (one non-negative integer "
                      "per line)",
                      r->path, r->line, r->buf);
            n = -1;
            goto done;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 256;
            *out = cgq_xrealloc (*out, sizeof (int) * (size_t) cap);
        }
        (*out)[n++] = v;
    }
    if (rc < 0)
        n = -1;
done:
    if (n < 0) {
        free (*out);
        *out = NULL;
    }
    s_reader_close (r);
    free (r);
    return n;
}

cgq_cg_dataset_t *
cgq_cg_dataset_read (const char *dir, char *err, size_t err_len)
{
    cgq_cg_dataset_t *self = NULL;
    int *nodes = NULL, *edges = NULL;
    int count = s_read_counts (dir, s_files[0], &nodes, err, err_len);
    if (count < 0)
        return NULL;
    int count_e = s_read_counts (dir, s_files[1], &edges, err, err_len);
    if (count_e < 0) {
        free (nodes);
        return NULL;
    }
    s_reader_t *feat = cgq_xcalloc (1, sizeof *feat);
    s_reader_t *edge = cgq_xcalloc (1, sizeof *edge);
    s_reader_t *label = cgq_xcalloc (1, sizeof *label);
    double *fv = NULL, *lv = NULL, *gf = NULL;
    int *ev = NULL;
    bool ok = false;
    if (count_e != count) {
        snprintf (err, err_len, "%s/%s lists %d graphs but %s lists %d (write the dataset again)",
                  dir, s_files[0], count, s_files[1], count_e);
        goto out;
    }
    if (s_reader_open (feat, dir, s_files[2], err, err_len) < 0 ||
        s_reader_open (edge, dir, s_files[3], err, err_len) < 0 ||
        s_reader_open (label, dir, s_files[4], err, err_len) < 0)
        goto out;

    // The first lines fix the number of labels and of features: peek at
    // them, and let the loop below read them again from the buffer.
    enum { S_MAX_COLS = 4096 };
    fv = cgq_xmalloc (sizeof (double) * S_MAX_COLS);
    lv = cgq_xmalloc (sizeof (double) * S_MAX_COLS);
    bool label_pending = false, feat_pending = false;
    int num_labels = 1, num_feats = CGQ_CG_NUM_FEATS;
    if (count > 0) {
        int rc = s_reader_next (label, err, err_len);
        if (rc < 0)
            goto out;
        if (rc == 1) {
            label_pending = true;
            num_labels = s_parse_doubles (label->buf, lv, S_MAX_COLS);
            if (num_labels < 1) {
                snprintf (err, err_len, "%s:1: not a list of numbers", label->path);
                goto out;
            }
        }
        rc = s_reader_next (feat, err, err_len);
        if (rc < 0)
            goto out;
        if (rc == 1) {
            feat_pending = true;
            num_feats = s_parse_doubles (feat->buf, fv, S_MAX_COLS);
            if (num_feats < 1) {
                snprintf (err, err_len, "%s:1: not a list of numbers", feat->path);
                goto out;
            }
        }
    }
    self = cgq_cg_dataset_new (num_feats, num_labels);
    size_t nf = (size_t) num_feats;
    for (int i = 0; i < count; i++) {
        int rc = label_pending ? 1 : s_reader_next (label, err, err_len);
        label_pending = false;
        if (rc < 0)
            goto out;
        if (rc == 0) {
            snprintf (err, err_len, "%s ends after %d labels but %s lists %d graphs", label->path,
                      i, s_files[0], count);
            goto out;
        }
        int n = s_parse_doubles (label->buf, lv, S_MAX_COLS);
        if (n != num_labels) {
            snprintf (err, err_len,
                      "%s:%ld: %s (expected %d comma-separated numbers, as on line "
                      "1)",
                      label->path, label->line, n < 0 ? "not a list of numbers" : "wrong count",
                      num_labels);
            goto out;
        }
        // Features of graph i.
        gf = cgq_xrealloc (gf, sizeof (double) * nf * (size_t) (nodes[i] ? nodes[i] : 1));
        for (int k = 0; k < nodes[i]; k++) {
            rc = feat_pending ? 1 : s_reader_next (feat, err, err_len);
            feat_pending = false;
            if (rc == 0)
                snprintf (err, err_len, "%s ends at line %ld but %s lists more nodes", feat->path,
                          feat->line, s_files[0]);
            if (rc <= 0)
                goto out;
            n = s_parse_doubles (feat->buf, fv, S_MAX_COLS);
            if (n == (int) nf)
                memcpy (gf + (size_t) k * nf, fv, sizeof (double) * nf);
            else {
                snprintf (err, err_len,
                          "%s:%ld: %s (expected %zu comma-separated numbers, as on "
                          "line 1)",
                          feat->path, feat->line, n < 0 ? "not a list of numbers" : "wrong count",
                          nf);
                goto out;
            }
        }
        // Edges of graph i.
        ev = cgq_xrealloc (ev, sizeof (int) * 2 * (size_t) (edges[i] ? edges[i] : 1));
        for (int k = 0; k < edges[i]; k++) {
            rc = s_reader_next (edge, err, err_len);
            if (rc == 0)
                snprintf (err, err_len, "%s ends at line %ld but %s lists more edges", edge->path,
                          edge->line, s_files[1]);
            if (rc <= 0)
                goto out;
            if (s_parse_ints (edge->buf, ev + 2 * k, 2) != 2) {
                snprintf (err, err_len, "%s:%ld: '%.40s' is not an edge (src,dst: two node ids)",
                          edge->path, edge->line, edge->buf);
                goto out;
            }
            if (ev[2 * k] >= nodes[i] || ev[2 * k + 1] >= nodes[i]) {
                snprintf (err, err_len,
                          "%s:%ld: edge %d,%d is outside graph %d of %d nodes (the "
                          "files do not match; write the dataset again)",
                          edge->path, edge->line, ev[2 * k], ev[2 * k + 1], i, nodes[i]);
                goto out;
            }
        }
        if (cgq_cg_dataset_append (self, nodes[i], gf, edges[i], ev, lv, err, err_len) < 0)
            goto out;
    }
    // Nothing may follow the last graph.
    s_reader_t *rs[3] = {feat, edge, label};
    for (int k = 0; k < 3; k++) {
        int rc = (k == 0 && feat_pending) ? 1 : s_reader_next (rs[k], err, err_len);
        if (rc < 0)
            goto out;
        if (rc == 1) {
            snprintf (err, err_len,
                      "%s:%ld: more lines than the %d graphs of %s list (the files "
                      "do not match; write the dataset again)",
                      rs[k]->path, rs[k]->line, count, s_files[0]);
            goto out;
        }
    }
    ok = true;
out:
    s_reader_close (feat);
    s_reader_close (edge);
    s_reader_close (label);
    free (feat);
    free (edge);
    free (label);
    free (fv);
    free (lv);
    free (gf);
    free (ev);
    free (nodes);
    free (edges);
    if (!ok)
        cgq_cg_dataset_destroy (&self);
    return self;
}

int
cgq_cg_dataset_write_families (const char *dir, const char *const *names, int n, char *err,
                               size_t err_len)
{
    char *path = cgq_xasprintf ("%s/%s", dir, CGQ_CG_FAMILY_FILE);
    gzFile f = gzopen (path, "wb6");
    int rc = f ? 0 : -1;
    for (int i = 0; rc == 0 && i < n; i++)
        if (gzprintf (f, "%s\n", names[i]) <= 0)
            rc = -1;
    if (f && gzclose (f) != Z_OK)
        rc = -1;
    if (rc < 0)
        snprintf (err, err_len, "cannot write %s: %s", path,
                  errno ? strerror (errno) : "zlib error");
    free (path);
    return rc;
}

int
cgq_cg_dataset_write_node_labels (const char *dir, const double *ms, size_t n, char *err,
                                  size_t err_len)
{
    char *path = cgq_xasprintf ("%s/%s", dir, CGQ_CG_NODE_LABEL_FILE);
    errno = 0;
    gzFile f = gzopen (path, "wb6");
    int rc = f ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        char num[32];
        // To the nanosecond: finer digits are the clock's noise.
        if (gzprintf (f, "%s\n", cgq_fmt_double (num, round (ms[i] * 1e6) / 1e6)) <= 0)
            rc = -1;
    }
    if (f && gzclose (f) != Z_OK)
        rc = -1;
    if (rc < 0)
        snprintf (err, err_len, "cannot write %s: %s", path,
                  errno ? strerror (errno) : "zlib error");
    free (path);
    return rc;
}

double *
cgq_cg_dataset_read_node_labels (const char *dir, size_t nodes, char *err, size_t err_len)
{
    err[0] = '\0';
    char *path = cgq_xasprintf ("%s/%s", dir, CGQ_CG_NODE_LABEL_FILE);
    if (access (path, F_OK) != 0) {
        free (path);
        return NULL;
    }
    gzFile f = gzopen (path, "rb");
    if (!f) {
        snprintf (err, err_len, "cannot read %s: %s", path, strerror (errno));
        free (path);
        return NULL;
    }
    double *v = cgq_xcalloc (nodes + 1, sizeof (double));
    char line[128];
    size_t n = 0;
    bool ok = true;
    while (ok && gzgets (f, line, sizeof line)) {
        line[strcspn (line, "\r\n")] = '\0';
        char *end;
        double x = strtod (line, &end);
        if (end == line || *end || !isfinite (x) || x < 0) {
            snprintf (err, err_len,
                      "%s:%zu: '%s' is not a time in ms >= 0 (regenerate the dataset with "
                      "cgq-cg gen --node-times or cgq-predictor export)",
                      path, n + 1, line);
            ok = false;
        }
        else if (n < nodes)
            v[n] = x;
        n++;
    }
    if (ok && n != nodes) {
        snprintf (err, err_len,
                  "%s: %zu lines for %zu nodes in node-feat.csv.gz (one line per node; "
                  "regenerate the dataset)",
                  path, n, nodes);
        ok = false;
    }
    gzclose (f);
    free (path);
    if (!ok) {
        free (v);
        return NULL;
    }
    return v;
}
