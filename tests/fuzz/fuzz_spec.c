// fuzz_spec: the job spec parser (common/spec.c) and what the coordinator does
// next with a spec that a CLI user submits: count the space, start the
// searcher, draw the first trials' params, render their command, env and
// artifact templates (common/template.c) and compute objectives from them. All
// of this runs inside the coordinator on text that anyone who can reach its
// control socket sends, so it must be bounded in time and memory.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "searcher.h"
#include "space.h"
#include "spec.h"
#include "template.h"

static FILE *s_null;

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
    fuzz_quiet ();
    s_null = fopen ("/dev/null", "w");
    return 0;
}

static void
s_render (const char *tmpl, const json_t *params, int shell)
{
    if (!tmpl)
        return;
    char err[256];
    free (cgq_template_render (tmpl, params, 7, 3, "/spec/dir", shell, err, sizeof err));
}

// s_trial does with one suggested point what dispatch and a result would.
static void
s_trial (const cgq_spec_t *spec, json_t *params)
{
    for (size_t k = 0; k < cgq_spec_nstages (spec); k++) {
        const cgq_stage_t *st = cgq_spec_stage (spec, k);
        s_render (st->command, params, 1);
        for (size_t i = 0; i < st->argc; i++)
            s_render (st->argv[i], params, 0);
        for (size_t i = 0; i < st->nenv; i++)
            s_render (st->env_vals[i], params, 0);
        s_render (st->artifact_url, params, 0);
        s_render (st->artifact_sha256, params, 0);
    }
    // The params as the trial's metrics: names match, values are numbers or not.
    char err[256];
    double v, vs[CGQ_SPEC_MAX_OBJECTIVES];
    if (spec->nobjectives == 1)
        (void) cgq_spec_objective_value (spec, params, &v, err, sizeof err);
    if (spec->nobjectives > 0)
        (void) cgq_spec_objective_values (spec, params, vs, err, sizeof err);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    char err[1024];
    cgq_spec_t *spec = cgq_spec_parse ((const char *) data, size, "fuzz.yaml", err, sizeof err);
    if (!spec)
        return 0;
    if (s_null)
        cgq_spec_describe (spec, s_null);
    uint64_t total = 0;
    (void) cgq_space_count (spec, &total);
    cgq_searcher_t *s = cgq_searcher_new (spec, NULL, err, sizeof err);
    for (int i = 0; s && i < 3; i++) {
        uint64_t id;
        json_t *params = cgq_searcher_suggest (s, &id);
        if (!params)
            break;
        s_trial (spec, params);
        json_decref (params);
    }
    if (s) {
        json_decref (cgq_searcher_save (s));
        cgq_searcher_destroy (&s);
    }
    cgq_spec_destroy (&spec);
    return 0;
}
