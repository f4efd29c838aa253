// spec_impl: what the parts of the spec parser share (spec.c, spec_space.c,
// spec_search.c, spec_objective.c, spec_trial.c), and nothing a caller of
// spec.h needs. spec.c reads the text (yamldoc.c) and walks the top level;
// each part parses its sections into the cgq_spec_t and reports the first
// error through the context's reader.
#ifndef CGQ_SPEC_IMPL_H
#define CGQ_SPEC_IMPL_H

#include <stdbool.h>
#include <stddef.h>

#include "spec.h"
#include "yamldoc.h"

// The state of one parse: the tree and first error (y), and the nodes that
// later checks report at.
typedef struct {
    cgq_yamldoc_t *y;    // the text's tree, and the first error
    const char *dir;     // the spec's directory: search.file may be read; NULL: it may not
    const cgq_yamldoc_node_t *alg_node, *points_node, *file_key, *file_node, *objective_key,
        *objectives_key, *early_key;
    size_t *point_lines; // search.file: the file's line of each point
    const cgq_yamldoc_node_t *reduction_key;
    const cgq_yamldoc_node_t *brackets_key, *es_alg_node; // hyperband's checks
    bool es_mode_given;
    const cgq_yamldoc_node_t *checkpoint_key; // checkpoint: as written (NULL: absent)
    const cgq_yamldoc_node_t *pbt_mutations;  // search.hyperparam_mutations (pbt)
    const cgq_yamldoc_node_t *pbt_metric_node; // search.metric (pbt)
    bool pbt_resample_given;
    bool random_fraction_given;              // search.random_fraction (bohb)
    const cgq_yamldoc_node_t *es_objectives; // early_stop.objectives (resolved in the check)
} spec_ctx_t;

// spec_is_ident is true for a name that can be written in a template's {}
// and in an expression: a letter or '_', then letters, digits and '_'.
bool spec_is_ident (const char *s, size_t n);

// The nodes of a trial or stage that the template checks report at.
typedef struct {
    const cgq_yamldoc_node_t *cmd, *env, *art; // values (NULL: absent)
    const cgq_yamldoc_node_t *at;              // the stage's mapping (or the trial key)
} spec_stage_nodes_t;

// Each spec_parse_* reads its section (v; key: where the section is written)
// into spec; each spec_check_* checks it against the rest of the spec once
// the whole document is read. All return 0, or -1 with the error set.

// spec_measure.c: a device stage's measure: block into stage->measure.
int spec_parse_measure (spec_ctx_t *c, cgq_stage_t *stage, const cgq_yamldoc_node_t *v,
                        bool in_stage);

// spec_space.c
int spec_parse_space (spec_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *v);
void spec_param_fini (cgq_param_t *p);

// spec_search.c
int spec_parse_search (spec_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *v);
int spec_check_search (spec_ctx_t *c, cgq_spec_t *spec);

// spec_objective.c
int spec_parse_objective (spec_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *key,
                          const cgq_yamldoc_node_t *v);
int spec_parse_objectives (spec_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *key,
                           const cgq_yamldoc_node_t *v);
int spec_parse_early_stop (spec_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *key,
                           const cgq_yamldoc_node_t *v);
int spec_check_early_stop (spec_ctx_t *c, cgq_spec_t *spec);
void spec_objective_fini (cgq_objective_t *o);

// spec_constraints.c
int spec_parse_constraints (spec_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *key,
                            const cgq_yamldoc_node_t *v);
void spec_constraints_fini (cgq_spec_t *spec);

// spec_trial.c. spec_parse_trial reads trial: (in_stage: one of its stages)
// and sets *cmd_node, *env_node, *art_node, and stages_nodes[k] for each
// stage, to what spec_check_templates checks once every param is known.
int spec_parse_trial (spec_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *v,
                      const cgq_yamldoc_node_t **cmd_node, const cgq_yamldoc_node_t **env_node,
                      const cgq_yamldoc_node_t **art_node, bool in_stage,
                      spec_stage_nodes_t *stages_nodes);
int spec_check_templates (spec_ctx_t *c, const cgq_spec_t *spec, const cgq_yamldoc_node_t *cmd,
                          const cgq_yamldoc_node_t *env, const cgq_yamldoc_node_t *art,
                          const spec_stage_nodes_t *stages);
void spec_stage_fini (cgq_stage_t *st);

#endif
