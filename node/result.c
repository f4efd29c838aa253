#include "result.h"

#include <jansson.h>
#include <stdlib.h>

#include "json.h"
#include "util.h"

static char *
s_str (const char *s)
{
    return cgq_xstrdup (s ? s : "");
}

Cgq__TaskRef *
cgq_result_ref_dup (const Cgq__TaskRef *ref)
{
    Cgq__TaskRef *r = cgq_xmalloc (sizeof *r);
    cgq__task_ref__init (r);
    if (ref) {
        r->job = ref->job;
        r->trial = ref->trial;
        r->stage = ref->stage;
        r->attempt = ref->attempt;
    }
    return r;
}

bool
cgq_result_ref_equal (const Cgq__TaskRef *a, const Cgq__TaskRef *b)
{
    if (!a || !b)
        return a == b;
    return a->job == b->job && a->trial == b->trial && a->stage == b->stage
           && a->attempt == b->attempt;
}

Cgq__Result *
cgq_result_new (const Cgq__TaskRef *ref, Cgq__TaskStatus status, const char *metrics_json,
                const char *error)
{
    Cgq__Result *r = cgq_xmalloc (sizeof *r);
    cgq__result__init (r);
    r->task = cgq_result_ref_dup (ref);
    r->status = status;
    r->metrics_json = s_str (metrics_json ? metrics_json : "{}");
    r->error = s_str (error);
    r->log_tail = s_str (NULL);
    r->trial_dir = s_str (NULL);
    return r;
}

void
cgq_result_destroy (Cgq__Result **res_p)
{
    if (!res_p || !*res_p)
        return;
    Cgq__Result *r = *res_p;
    free (r->task);
    free (r->metrics_json);
    free (r->error);
    free (r->log_tail);
    free (r->trial_dir);
    free (r);
    *res_p = NULL;
}

Cgq__Result *
cgq_result_noop (const Cgq__Assign *assign)
{
    json_t *metrics = json_object ();
    json_t *params = assign->params_json && *assign->params_json
                         ? json_loads (assign->params_json, 0, NULL)
                         : NULL;
    double score = 0;
    json_int_t int_score = 0;
    bool all_int = true; // integer params sum to an integer score
    if (json_is_object (params)) {
        const char *key;
        json_t *value;
        json_object_foreach (params, key, value) {
            if (json_is_number (value)) {
                json_object_set (metrics, key, value);
                score += json_number_value (value);
                if (json_is_integer (value)
                    && !__builtin_add_overflow (int_score, json_integer_value (value), &int_score))
                    continue;
                all_int = false;
            }
        }
    }
    json_object_set_new (metrics, "score", all_int ? json_integer (int_score) : json_real (score));
    char *text = cgq_json_dumps (metrics);
    Cgq__Result *r = cgq_result_new (assign->task, CGQ__TASK_STATUS__TASK_SUCCEEDED, text, NULL);
    free (text);
    json_decref (metrics);
    json_decref (params);
    return r;
}
