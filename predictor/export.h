// export: from measurement results to a CG dataset. A job of cpu-local
// measurements (orchestration/examples/predictor/measure.yaml) gives, per
// trial, the params family and seed and the metrics model
// ("<family>-s<seed>-r<resolution>", which names the resolution the
// generator drew) and time (median ms). The generator is deterministic, so
// each graph is built again from those and labelled with what was measured.
#ifndef CGQ_PRED_EXPORT_H
#define CGQ_PRED_EXPORT_H

#include <jansson.h>
#include <stddef.h>

// cgq_pred_export writes the dataset of the succeeded trials of results
// (`cgq results J --format json` or `cgq run --format json`: an object with
// "trials", or an array of trials; borrowed) to dir, in trial id order: the
// five OGB files with labels latency (metric "time"), flops, params, and
// graph-family.csv.gz; and node-label.csv.gz when the trials carry metric
// node_ms (cpu-local's per_op: every trial, one time per node). Returns the number of graphs, or -1 with a reason in
// err (a trial whose model cannot be built, no succeeded trial, cannot write).
int cgq_pred_export (const json_t *results, const char *dir, char *err, size_t err_len);

#endif
