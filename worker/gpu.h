// gpu: which GPUs a worker offers, from its --gpus spec: "none", "auto"
// (ask nvidia-smi), "0,1" (these indices) or "fake:N" (pretend GPUs, for tests).
#ifndef CGQ_GPU_H
#define CGQ_GPU_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t index; // what goes into CUDA_VISIBLE_DEVICES
    char *name;     // owned by the list
    uint64_t memory; // bytes, 0 when unknown
} cgq_gpu_t;

typedef struct {
    cgq_gpu_t *items; // owned; cgq_gpu_list_fini frees it
    size_t count;
} cgq_gpu_list_t;

void cgq_gpu_list_init (cgq_gpu_list_t *list);
void cgq_gpu_list_fini (cgq_gpu_list_t *list);
// cgq_gpu_list_add appends a GPU; name is copied.
void cgq_gpu_list_add (cgq_gpu_list_t *list, uint32_t index, const char *name, uint64_t memory);

// cgq_gpu_discover fills list (initialized by the caller) from spec. "auto"
// when nvidia-smi is missing or fails gives no GPUs (logged at info), not an
// error. Returns 0, or -1 on a malformed spec with a one-line reason in err.
int cgq_gpu_discover (const char *spec, cgq_gpu_list_t *list, char *err, size_t err_len);

// cgq_gpu_parse_smi appends the GPUs in the output of `nvidia-smi
// --query-gpu=index,name,memory.total --format=csv,noheader,nounits`
// (memory in MiB) to list. Returns the number of GPUs parsed, or -1 on a line
// it cannot read (list then holds the lines before it).
int cgq_gpu_parse_smi (const char *text, cgq_gpu_list_t *list);

// Test seam: returns nvidia-smi's output (caller frees) or NULL when it cannot
// be run or fails. The default runs the real binary found on PATH.
extern char *(*cgq_gpu_smi_run) (void);

#endif
