// fuzz_expr: the metric-expression compiler and evaluator (common/expr.c). The
// text comes from a spec (objective.expr); the values from what a trial
// reports, so both halves take hostile input. The first line of the input is
// the expression, the rest (if any) a JSON object of metrics; without one,
// every name reads 1.5.
#include <stdlib.h>
#include <string.h>

#include "expr.h"
#include "fuzz.h"

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
    fuzz_quiet ();
    return 0;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    char *text = fuzz_str (data, size);
    char *nl = strchr (text, '\n');
    json_t *metrics = NULL;
    if (nl) {
        *nl = 0;
        metrics = json_loads (nl + 1, JSON_DECODE_ANY, NULL);
    }
    char err[256];
    int col = 0;
    cgq_expr_t *e = cgq_expr_parse (text, &col, err, sizeof err);
    if (e) {
        if (!json_is_object (metrics)) {
            json_decref (metrics);
            metrics = json_object ();
            for (size_t i = 0; i < cgq_expr_nnames (e); i++)
                json_object_set_new (metrics, cgq_expr_name (e, i), json_real (1.5));
        }
        double v;
        (void) cgq_expr_eval (e, metrics, &v, err, sizeof err);
        cgq_expr_destroy (&e);
    }
    json_decref (metrics);
    free (text);
    return 0;
}
