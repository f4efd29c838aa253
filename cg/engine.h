// engine: runs one graph (batch 1, float32, NCHW) on this machine's CPU so
// that its latency can be measured for real. Convolutions go through OpenBLAS
// (im2col + sgemm; 1x1 stride-1 convs straight to sgemm), depthwise convs and
// the memory-bound ops are plain loops. Everything a run needs is allocated
// when the engine is made: a run does no malloc. Weights and input are random
// but deterministic (from opts.seed), scaled so activations neither vanish
// nor overflow; latency does not depend on their values.
#ifndef CGQ_CG_ENGINE_H
#define CGQ_CG_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph.h"

typedef struct {
    // OpenBLAS threads. The default 1 gives stable single-core figures. The
    // setting is process-wide (openblas_set_num_threads): the last engine
    // made decides it. Start a timing process with OPENBLAS_NUM_THREADS=1:
    // OpenBLAS starts a thread per core when it loads, and idle ones poll.
    int threads;
    uint64_t seed; // weights and input; default 1
    // Give every node its own output buffer instead of reusing buffers whose
    // values are no longer needed, so that cgq_cg_engine_output works for
    // every node (tests). Uses more memory and cache than a real engine.
    bool keep_all;
} cgq_cg_engine_opts_t;

typedef struct cgq_cg_engine_t cgq_cg_engine_t;

// cgq_cg_engine_opts_default: 1 thread, seed 1, buffers reused.
void cgq_cg_engine_opts_default (cgq_cg_engine_opts_t *opts);

// cgq_cg_engine_new plans and allocates everything to run graph (which is
// borrowed: keep it alive until the engine is destroyed). opts may be NULL
// for the defaults. Returns NULL with a one-line reason in err (a graph that
// failed to build, or one that needs more than 4 GiB).
cgq_cg_engine_t *cgq_cg_engine_new (const cgq_cg_graph_t *graph, const cgq_cg_engine_opts_t *opts,
                                    char *err, size_t err_len);
// NULL-safe; sets *self_p = NULL.
void cgq_cg_engine_destroy (cgq_cg_engine_t **self_p);

// cgq_cg_engine_run computes every node once. Returns 0 (it cannot fail
// once made; the int is for future engines that can).
int cgq_cg_engine_run (cgq_cg_engine_t *self);

// cgq_cg_engine_bench runs warmup times untimed, then repeats times, writing
// each run's wall time in milliseconds to ms[0..repeats-1]. Returns 0.
int cgq_cg_engine_bench (cgq_cg_engine_t *self, int warmup, int repeats, double *ms);

// Per-op timing. cgq_cg_engine_op_timing(self, cap) switches it on (cap > 0:
// room for cap runs, allocated here, so that a run still does no malloc) or
// off (0). While on, every run reads the clock around each node's kernel and
// keeps the node times of its first cap runs (later runs are run and timed
// but not kept). The clock reads cost about cgq_cg_timer_overhead_ms per node
// (measured at the call), which a run's wall time then includes.
void cgq_cg_engine_op_timing (cgq_cg_engine_t *self, int cap);
// cgq_cg_engine_op_reset forgets the runs kept so far (e.g. the warm-ups).
void cgq_cg_engine_op_reset (cgq_cg_engine_t *self);
// cgq_cg_engine_op_medians writes each node's median time (ms) over the runs
// kept into out[0..nodes-1] (0 for a node that did nothing, e.g. the input).
// Returns the number of runs it used (0: none kept, out left as it was).
int cgq_cg_engine_op_medians (const cgq_cg_engine_t *self, double *out);
// cgq_cg_engine_nodes is the graph's node count.
int cgq_cg_engine_nodes (const cgq_cg_engine_t *self);
// cgq_cg_timer_overhead_ms is the median cost of one pair of clock reads
// (the per-node cost of per-op timing), in milliseconds, measured now.
double cgq_cg_timer_overhead_ms (void);

// cgq_cg_engine_input is the input tensor (C*H*W floats, NCHW), which the
// caller may overwrite. Borrowed until destroy; *count gets its length.
float *cgq_cg_engine_input (cgq_cg_engine_t *self, size_t *count);
// cgq_cg_engine_params is node id's parameters, which the caller may
// overwrite, or NULL for a node without any. Layouts: conv2d weights
// [Cout][Cin/groups][k][k] then bias [Cout] if it has one; fc weights
// [out][in] then bias [out]; batchnorm scale [C] then shift [C].
float *cgq_cg_engine_params (cgq_cg_engine_t *self, int id, size_t *count);
// cgq_cg_engine_output is node id's output after a run (C*H*W floats), or
// NULL when its buffer has been reused by a later node (only graph outputs
// and the input keep theirs, unless opts.keep_all).
const float *cgq_cg_engine_output (const cgq_cg_engine_t *self, int id, size_t *count);
// cgq_cg_engine_bytes is the memory allocated: activations, weights, scratch.
size_t cgq_cg_engine_bytes (const cgq_cg_engine_t *self);

#endif
