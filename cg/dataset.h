// dataset: many graphs with node features and graph labels, kept in one
// directory in the OGB raw CSV layout that the CG dataset's readers expect:
//
//   edge.csv.gz          "src,dst" per edge; node ids local to each graph
//   node-feat.csv.gz     one line per node: its features, comma-separated
//   num-node-list.csv.gz one line per graph: its node count
//   num-edge-list.csv.gz one line per graph: its edge count
//   graph-label.csv.gz   one line per graph: its labels, comma-separated
//
// Graphs follow each other in every file in the same order. Numbers are
// written as the shortest text that reads back as the same double, so a
// dataset read back holds exactly what was written. cg/README.md has the
// feature layout of graphs from cgq_cg_dataset_append_graph.
#ifndef CGQ_CG_DATASET_H
#define CGQ_CG_DATASET_H

#include <stddef.h>

#include "graph.h"

typedef struct cgq_cg_dataset_t cgq_cg_dataset_t;

// One graph of a dataset; every pointer is borrowed from the dataset until
// it is destroyed or appended to.
typedef struct {
    int nodes;
    int edges;
    const double *feats;   // nodes x num_feats, row by row
    const int *edge_index; // edges x 2: src0, dst0, src1, dst1, ...
    const double *labels;  // num_labels
} cgq_cg_sample_t;

// cgq_cg_dataset_new returns an empty dataset whose graphs have num_feats
// features per node and num_labels labels (both >= 1).
cgq_cg_dataset_t *cgq_cg_dataset_new (int num_feats, int num_labels);
// NULL-safe; sets *self_p = NULL.
void cgq_cg_dataset_destroy (cgq_cg_dataset_t **self_p);

int cgq_cg_dataset_count (const cgq_cg_dataset_t *self);
int cgq_cg_dataset_num_feats (const cgq_cg_dataset_t *self);
int cgq_cg_dataset_num_labels (const cgq_cg_dataset_t *self);
// cgq_cg_dataset_get fills *out with graph i. Returns 0, or -1 if i is out of range.
int cgq_cg_dataset_get (const cgq_cg_dataset_t *self, int i, cgq_cg_sample_t *out);

// cgq_cg_dataset_append copies one graph in (feats: nodes x num_feats;
// edge_index: edges x 2; labels: num_labels). Returns 0, or -1 with the
// reason in err when an edge names a node outside [0, nodes).
int cgq_cg_dataset_append (cgq_cg_dataset_t *self, int nodes, const double *feats, int edges,
                           const int *edge_index, const double *labels, char *err, size_t err_len);
// cgq_cg_dataset_append_graph appends g's node features
// (cgq_cg_graph_features) and edges (input -> node); the dataset must have
// CGQ_CG_NUM_FEATS features. Returns 0, or -1 with the reason in err.
int cgq_cg_dataset_append_graph (cgq_cg_dataset_t *self, const cgq_cg_graph_t *g,
                                 const double *labels, char *err, size_t err_len);

// cgq_cg_dataset_write writes the five files into dir (made if missing,
// files replaced). Returns 0, or -1 with a reason naming the file in err.
int cgq_cg_dataset_write (const cgq_cg_dataset_t *self, const char *dir, char *err, size_t err_len);
// The optional sixth file of a dataset dir: each graph's family, one name
// per line, gzipped (cgq-cg gen --count and cgq-predictor export write it;
// the predictor's test_family reads it).
#define CGQ_CG_FAMILY_FILE "graph-family.csv.gz"

// cgq_cg_dataset_write_families writes dir's family file: names[i] is graph
// i's family (no newline in it). Returns 0, or -1 with a reason in err.
int cgq_cg_dataset_write_families (const char *dir, const char *const *names, int n, char *err,
                                   size_t err_len);

// The optional seventh file: one line per node of every graph, in the node
// order of node-feat.csv.gz, holding that node's time in ms (per-op timing,
// cg/engine.h; `cgq-cg gen --node-times`, `cgq-predictor export`). The
// kernel-level predictor trains on it.
#define CGQ_CG_NODE_LABEL_FILE "node-label.csv.gz"

// cgq_cg_dataset_write_node_labels writes dir's node-label file: ms[i] for
// node i of all graphs together. Returns 0, or -1 with a reason in err.
int cgq_cg_dataset_write_node_labels (const char *dir, const double *ms, size_t n, char *err,
                                      size_t err_len);
// cgq_cg_dataset_read_node_labels reads dir's node-label file, which must
// have exactly nodes lines of one finite number >= 0. Returns the numbers
// (caller frees), or NULL: with err "" when dir has no such file, else with
// a reason naming the file and line.
double *cgq_cg_dataset_read_node_labels (const char *dir, size_t nodes, char *err,
                                         size_t err_len);

// cgq_cg_dataset_read reads the five files of dir and checks that they agree
// (counts, edges inside their graph, the same number of features on every
// line). Returns a dataset (caller destroys), or NULL with a reason naming
// the file and line in err.
cgq_cg_dataset_t *cgq_cg_dataset_read (const char *dir, char *err, size_t err_len);

#endif
