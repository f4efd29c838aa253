// gen: seeded generation of CNN variants of several families, the way the CG
// dataset was made (nn-Meter: each family's models vary in output channels
// per layer, kernel sizes, depth and input resolution). The seed decides
// everything through an integer-only random generator, so the same options
// give the same graph on every machine.
#ifndef CGQ_CG_GEN_H
#define CGQ_CG_GEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph.h"

typedef enum {
    CGQ_CG_MOBILENETV2 = 0, // inverted residuals: expand 1x1, depthwise kxk, project 1x1, add
    CGQ_CG_RESNET,          // basic blocks: two kxk convs and an add
    CGQ_CG_VGG,             // plain conv stacks and max pools
    CGQ_CG_SHUFFLENETV2,    // channel split, 1x1 / depthwise / 1x1, concat, shuffle
    CGQ_CG_SHUFFLENET,      // (v1) 1x1 group convs, shuffle, depthwise; add or avgpool+concat
    CGQ_CG_FAMILY_COUNT
} cgq_cg_family_t;

typedef struct {
    cgq_cg_family_t family;
    uint64_t seed;
    int resolution; // input height = width; 0 draws one from [min_res, max_res]
    int min_res;    // multiples of 32 are drawn; default 32
    int max_res;    // default 128
    int classes;    // fc outputs; default 1000
    bool fold_bn;   // true (default): convs carry a bias; false: conv, batchnorm
} cgq_cg_gen_opts_t;

// cgq_cg_gen_opts_default fills opts with the defaults above (family
// mobilenetv2, seed 0).
void cgq_cg_gen_opts_default (cgq_cg_gen_opts_t *opts);

// cgq_cg_gen builds a model named "<family>-s<seed>-r<resolution>". Returns
// the graph (caller destroys), or NULL with a one-line reason in err for
// options out of range (a resolution below 32 or above 1024, classes < 1).
cgq_cg_graph_t *cgq_cg_gen (const cgq_cg_gen_opts_t *opts, char *err, size_t err_len);

// cgq_cg_family_name is "mobilenetv2", "resnet", "vgg", "shufflenetv2" or
// "shufflenet"; cgq_cg_family_parse is its inverse (0, or -1 if unknown).
const char *cgq_cg_family_name (cgq_cg_family_t family);
int cgq_cg_family_parse (const char *name, cgq_cg_family_t *family);
// cgq_cg_family_list is the names, comma-separated, for help and errors.
const char *cgq_cg_family_list (void);

#endif
