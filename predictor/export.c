#include "export.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "dataset.h"
#include "gen.h"
#include "util.h"

static int
s_by_id (const void *a, const void *b)
{
    json_int_t x = json_integer_value (json_object_get (*(json_t *const *)a, "id"));
    json_int_t y = json_integer_value (json_object_get (*(json_t *const *)b, "id"));
    return x < y ? -1 : x > y;
}

// s_graph builds trial t's model again. Returns it, or NULL with err set.
static cgq_cg_graph_t *
s_graph (const json_t *t, char *err, size_t err_len)
{
    const json_t *p = json_object_get (t, "params"), *m = json_object_get (t, "metrics");
    json_int_t id = json_integer_value (json_object_get (t, "id"));
    const char *model = json_string_value (json_object_get (m, "model"));
    cgq_cg_gen_opts_t o;
    cgq_cg_gen_opts_default (&o);
    const char *fam = json_string_value (json_object_get (p, "family"));
    if (fam && cgq_cg_family_parse (fam, &o.family) < 0) {
        snprintf (err, err_len, "trial %lld: unknown family '%s' (expected one of: %s)",
                  (long long)id, fam, cgq_cg_family_list ());
        return NULL;
    }
    json_t *seed = json_object_get (p, "seed");
    o.seed = json_is_integer (seed) ? (uint64_t)json_integer_value (seed) : 0;
    // The resolution the runner's generator drew is in the model's name.
    const char *r = model ? strrchr (model, 'r') : NULL;
    if (!r || r == model || r[-1] != '-' || (o.resolution = atoi (r + 1)) < 32) {
        snprintf (err, err_len,
                  "trial %lld: metric model '%s' does not name a resolution (expected "
                  "FAMILY-sSEED-rRES from the cpu-local benchmark)",
                  (long long)id, model ? model : "(none)");
        return NULL;
    }
    cgq_cg_graph_t *g = cgq_cg_gen (&o, err, err_len);
    if (g && strcmp (cgq_cg_graph_name (g), model) != 0) {
        snprintf (err, err_len, "trial %lld: rebuilt %s, but %s was measured", (long long)id,
                  cgq_cg_graph_name (g), model);
        cgq_cg_graph_destroy (&g);
    }
    return g;
}

int
cgq_pred_export (const json_t *results, const char *dir, char *err, size_t err_len)
{
    const json_t *trials = json_is_array (results) ? results : json_object_get (results, "trials");
    if (!json_is_array (trials)) {
        snprintf (err, err_len, "the results have no trials (expected cgq results --format json)");
        return -1;
    }
    size_t n = json_array_size (trials), k = 0;
    json_t **ok = cgq_xcalloc (n + 1, sizeof *ok);
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_array_get (trials, i);
        const char *st = json_string_value (json_object_get (t, "state"));
        if (st && !strcmp (st, "succeeded") &&
            json_is_number (json_object_get (json_object_get (t, "metrics"), "time")))
            ok[k++] = t;
    }
    qsort (ok, k, sizeof *ok, s_by_id);
    int rc = (int)k;
    // A job measured in two passes (measure: {passes: 2}) gives each graph
    // both: columns 3 and 4, so the dataset carries its own ceiling (the
    // agreement of the passes) beside the label it trains on (time, their
    // mean). Both for every graph, or neither.
    size_t with_passes = 0;
    for (size_t i = 0; i < k; i++) {
        const json_t *m = json_object_get (ok[i], "metrics");
        with_passes += json_is_number (json_object_get (m, "time_pass1")) &&
                       json_is_number (json_object_get (m, "time_pass2"));
    }
    if (with_passes > 0 && with_passes < k) {
        snprintf (err, err_len,
                  "%zu of the %zu succeeded trials have metrics time_pass1 and time_pass2: a "
                  "dataset carries both passes for every graph or for none",
                  with_passes, k);
        rc = -1;
    }
    int nlabels = with_passes > 0 ? 5 : 3;
    cgq_cg_dataset_t *ds = cgq_cg_dataset_new (CGQ_CG_NUM_FEATS, nlabels);
    const char **fams = cgq_xcalloc (k + 1, sizeof *fams);
    // Node times (cpu-local's per_op): for every graph or for none, since
    // node-label.csv.gz has a line for every node.
    size_t with_nodes = 0;
    for (size_t i = 0; i < k; i++)
        with_nodes += json_is_array (json_object_get (json_object_get (ok[i], "metrics"), "node_ms"));
    if (with_nodes > 0 && with_nodes < k) {
        snprintf (err, err_len,
                  "%zu of the %zu succeeded trials have metric node_ms: node labels need every "
                  "graph's (measure all with the cpu-local param per_op: true, or none)",
                  with_nodes, k);
        rc = -1;
    }
    double *node = NULL;
    size_t nnode = 0;
    for (size_t i = 0; i < k && rc >= 0; i++) {
        cgq_cg_graph_t *g = s_graph (ok[i], err, err_len);
        if (!g) {
            rc = -1;
            break;
        }
        const json_t *nm = json_object_get (json_object_get (ok[i], "metrics"), "node_ms");
        size_t n = (size_t)cgq_cg_graph_size (g);
        if (with_nodes > 0) {
            node = cgq_xrealloc (node, sizeof (double) * (nnode + n));
            for (size_t j = 0; j < n && rc >= 0; j++) {
                const json_t *v = json_array_get (nm, j);
                node[nnode + j] = json_number_value (v);
                if (json_array_size (nm) != n || !json_is_number (v) || !(node[nnode + j] >= 0)) {
                    snprintf (err, err_len,
                              "trial %lld: metric node_ms must be %zu times >= 0, one per node "
                              "of %s",
                              (long long)json_integer_value (json_object_get (ok[i], "id")), n,
                              cgq_cg_graph_name (g));
                    rc = -1;
                }
            }
            nnode += n;
            if (rc < 0) {
                cgq_cg_graph_destroy (&g);
                break;
            }
        }
        const json_t *m = json_object_get (ok[i], "metrics");
        double labels[5] = {json_number_value (json_object_get (m, "time")),
                            (double)cgq_cg_graph_flops (g), (double)cgq_cg_graph_params (g),
                            json_number_value (json_object_get (m, "time_pass1")),
                            json_number_value (json_object_get (m, "time_pass2"))};
        const char *name = cgq_cg_graph_name (g);
        for (int f = 0; f < CGQ_CG_FAMILY_COUNT; f++)
            if (!strncmp (name, cgq_cg_family_name ((cgq_cg_family_t)f),
                          strlen (cgq_cg_family_name ((cgq_cg_family_t)f))) &&
                name[strlen (cgq_cg_family_name ((cgq_cg_family_t)f))] == '-')
                fams[i] = cgq_cg_family_name ((cgq_cg_family_t)f);
        if (cgq_cg_dataset_append_graph (ds, g, labels, err, err_len) < 0)
            rc = -1;
        cgq_cg_graph_destroy (&g);
    }
    if (rc == 0)
        snprintf (err, err_len, "no succeeded trial with a metric time in the results");
    if (rc > 0 && (cgq_cg_dataset_write (ds, dir, err, err_len) < 0 ||
                   cgq_cg_dataset_write_families (dir, fams, (int)k, err, err_len) < 0))
        rc = -1;
    if (rc > 0 && with_nodes > 0 &&
        cgq_cg_dataset_write_node_labels (dir, node, nnode, err, err_len) < 0)
        rc = -1;
    free (node);
    cgq_cg_dataset_destroy (&ds);
    free (fams);
    free (ok);
    return rc > 0 ? rc : -1;
}
