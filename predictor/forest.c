#include "forest.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "util.h"

// sklearn/tree/_splitter.pyx: values closer than this count as equal.
#define S_FEATURE_THRESHOLD 1e-7

typedef struct {
    int *feature; // -1 for a leaf
    double *threshold;
    int *left, *right;
    double *value;
    int n, cap;
} s_tree_t;

struct cgq_pred_forest_t {
    int d;
    int ntrees;
    s_tree_t *trees;
    bool boost; // init + lr * sum of the trees, else their mean
    double init, lr;
};

typedef struct {
    float v;
    int i;
} s_pair_t;

// What one tree's build shares: the data, the rules, the scratch.
typedef struct {
    const float *x;
    const double *y;
    int d;
    const cgq_pred_forest_opts_t *o;
    int max_features;
    uint64_t rng;
    int *feats;     // d: the feature order of the node being split
    s_pair_t *pair; // n: (value, sample) of one feature, sorted
} s_build_t;

void
cgq_pred_forest_opts_default (cgq_pred_forest_opts_t *o)
{
    *o = (cgq_pred_forest_opts_t){.n_estimators = 50,
                                  .max_depth = 0,
                                  .min_samples_leaf = 1,
                                  .max_features = 1.0,
                                  .bootstrap = true,
                                  .seed = 0,
                                  .boost = false,
                                  .learning_rate = 0.1};
}

static int
s_tree_add (s_tree_t *t)
{
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 64;
        t->feature = cgq_xrealloc (t->feature, sizeof (int) * (size_t)t->cap);
        t->threshold = cgq_xrealloc (t->threshold, sizeof (double) * (size_t)t->cap);
        t->left = cgq_xrealloc (t->left, sizeof (int) * (size_t)t->cap);
        t->right = cgq_xrealloc (t->right, sizeof (int) * (size_t)t->cap);
        t->value = cgq_xrealloc (t->value, sizeof (double) * (size_t)t->cap);
    }
    int id = t->n++;
    t->feature[id] = -1;
    t->threshold[id] = 0;
    t->left[id] = t->right[id] = -1;
    t->value[id] = 0;
    return id;
}

static void
s_tree_fini (s_tree_t *t)
{
    free (t->feature);
    free (t->threshold);
    free (t->left);
    free (t->right);
    free (t->value);
}

static int
s_pair_cmp (const void *a, const void *b)
{
    float x = ((const s_pair_t *)a)->v, y = ((const s_pair_t *)b)->v;
    return x < y ? -1 : x > y;
}

// s_grow builds the subtree of samples idx[0..n-1] (which it reorders:
// the left child's first) at depth and returns its node id.
static int
s_grow (s_build_t *b, s_tree_t *t, int *idx, int n, int depth)
{
    const cgq_pred_forest_opts_t *o = b->o;
    double sum = 0, sq = 0;
    for (int k = 0; k < n; k++) {
        double v = b->y[idx[k]];
        sum += v;
        sq += v * v;
    }
    double mean = sum / n;
    double impurity = sq / n - mean * mean;
    int id = s_tree_add (t);
    t->value[id] = mean;
    if ((o->max_depth > 0 && depth >= o->max_depth) || n < 2 || n < 2 * o->min_samples_leaf ||
        impurity <= DBL_EPSILON)
        return id;

    // The best split: the largest sum_l^2/n_l + sum_r^2/n_r (sklearn's
    // proxy of the impurity decrease), the first found on a tie.
    for (int f = 0; f < b->d; f++)
        b->feats[f] = f;
    for (int f = b->d - 1; f > 0; f--) { // a fresh random order per node
        int j = (int)(cgq_pred_rng_next (&b->rng) % (uint64_t)(f + 1));
        int tmp = b->feats[f];
        b->feats[f] = b->feats[j];
        b->feats[j] = tmp;
    }
    double best = -INFINITY, best_thr = 0;
    int best_f = -1, tried = 0;
    for (int fi = 0; fi < b->d && tried < b->max_features; fi++) {
        int f = b->feats[fi];
        s_pair_t *p = b->pair;
        for (int k = 0; k < n; k++)
            p[k] = (s_pair_t){b->x[(size_t)idx[k] * b->d + f], idx[k]};
        qsort (p, (size_t)n, sizeof *p, s_pair_cmp);
        if ((double)p[n - 1].v <= (double)p[0].v + S_FEATURE_THRESHOLD)
            continue; // constant here: does not count as tried
        tried++;
        double sl = 0;
        for (int k = 1; k < n; k++) {
            sl += b->y[p[k - 1].i];
            if ((double)p[k].v <= (double)p[k - 1].v + S_FEATURE_THRESHOLD)
                continue;
            if (k < o->min_samples_leaf || n - k < o->min_samples_leaf)
                continue;
            double sr = sum - sl, proxy;
            if (o->boost) { // friedman_mse: (n_r s_l - n_l s_r)^2 / (n_l n_r)
                double diff = (double)(n - k) * sl - (double)k * sr;
                proxy = diff * diff / ((double)k * (double)(n - k));
            }
            else
                proxy = sl * sl / k + sr * sr / (n - k);
            if (proxy > best) {
                best = proxy;
                best_f = f;
                double thr = (double)p[k - 1].v / 2.0 + (double)p[k].v / 2.0;
                if (thr == (double)p[k].v || isinf (thr))
                    thr = (double)p[k - 1].v;
                best_thr = thr;
            }
        }
    }
    if (best_f < 0)
        return id;
    // Partition: x <= threshold to the left, as prediction walks.
    int nl = 0;
    for (int k = 0; k < n; k++)
        if ((double)b->x[(size_t)idx[k] * b->d + best_f] <= best_thr) {
            int tmp = idx[nl];
            idx[nl++] = idx[k];
            idx[k] = tmp;
        }
    t->feature[id] = best_f;
    t->threshold[id] = best_thr;
    int l = s_grow (b, t, idx, nl, depth + 1);
    int r = s_grow (b, t, idx + nl, n - nl, depth + 1);
    t->left[id] = l;
    t->right[id] = r;
    return id;
}

cgq_pred_forest_t *
cgq_pred_forest_fit (const float *x, const double *y, int n, int d, const cgq_pred_forest_opts_t *o)
{
    cgq_pred_forest_t *self = cgq_xcalloc (1, sizeof *self);
    self->d = d;
    self->ntrees = o->n_estimators > 0 ? o->n_estimators : 1;
    self->trees = cgq_xcalloc ((size_t)self->ntrees, sizeof (s_tree_t));
    s_build_t b = {.x = x, .y = y, .d = d, .o = o, .rng = o->seed};
    b.max_features = (int)(o->max_features * d);
    if (b.max_features < 1 || o->max_features >= 1)
        b.max_features = o->max_features >= 1 ? d : 1;
    b.feats = cgq_xmalloc (sizeof (int) * (size_t)d);
    b.pair = cgq_xmalloc (sizeof (s_pair_t) * (size_t)n);
    int *idx = cgq_xmalloc (sizeof (int) * (size_t)n);
    cgq_pred_forest_opts_t bo = *o; // boosting: sklearn's depth 3 unless told
    double *res = NULL, *pred = NULL;
    if (o->boost) {
        if (bo.max_depth <= 0)
            bo.max_depth = 3;
        b.o = &bo;
        self->boost = true;
        self->lr = o->learning_rate > 0 ? o->learning_rate : 0.1;
        double sum = 0;
        for (int k = 0; k < n; k++)
            sum += y[k];
        self->init = sum / n;
        res = cgq_xmalloc (sizeof (double) * (size_t)n);
        pred = cgq_xmalloc (sizeof (double) * (size_t)n);
        for (int k = 0; k < n; k++) {
            pred[k] = self->init;
            res[k] = y[k] - pred[k];
        }
        b.y = res;
    }
    for (int t = 0; t < self->ntrees; t++) {
        for (int k = 0; k < n; k++)
            idx[k] =
                o->bootstrap && !o->boost ? (int)(cgq_pred_rng_next (&b.rng) % (uint64_t)n) : k;
        s_grow (&b, &self->trees[t], idx, n, 0);
        if (!o->boost)
            continue;
        const s_tree_t *tr = &self->trees[t];
        for (int k = 0; k < n; k++) {
            int i = 0;
            while (tr->feature[i] >= 0)
                i = (double)x[(size_t)k * d + tr->feature[i]] <= tr->threshold[i] ? tr->left[i]
                                                                                  : tr->right[i];
            pred[k] += self->lr * tr->value[i];
            res[k] = y[k] - pred[k];
        }
    }
    free (res);
    free (pred);
    free (idx);
    free (b.pair);
    free (b.feats);
    return self;
}

void
cgq_pred_forest_destroy (cgq_pred_forest_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cgq_pred_forest_t *self = *self_p;
    for (int t = 0; t < self->ntrees; t++)
        s_tree_fini (&self->trees[t]);
    free (self->trees);
    free (self);
    *self_p = NULL;
}

double
cgq_pred_forest_predict (const cgq_pred_forest_t *self, const float *x)
{
    double sum = 0;
    for (int t = 0; t < self->ntrees; t++) {
        const s_tree_t *tr = &self->trees[t];
        int i = 0;
        while (tr->feature[i] >= 0)
            i = (double)x[tr->feature[i]] <= tr->threshold[i] ? tr->left[i] : tr->right[i];
        sum += tr->value[i];
    }
    return self->boost ? self->init + self->lr * sum : sum / self->ntrees;
}

int
cgq_pred_forest_features (const cgq_pred_forest_t *self)
{
    return self->d;
}

int
cgq_pred_forest_nodes (const cgq_pred_forest_t *self)
{
    int n = 0;
    for (int t = 0; t < self->ntrees; t++)
        n += self->trees[t].n;
    return n;
}

json_t *
cgq_pred_forest_json (const cgq_pred_forest_t *self)
{
    json_t *trees = json_array ();
    for (int t = 0; t < self->ntrees; t++) {
        const s_tree_t *tr = &self->trees[t];
        json_t *f = json_array (), *th = json_array (), *l = json_array (), *r = json_array (),
               *v = json_array ();
        for (int i = 0; i < tr->n; i++) {
            json_array_append_new (f, json_integer (tr->feature[i]));
            json_array_append_new (th, json_real (tr->threshold[i]));
            json_array_append_new (l, json_integer (tr->left[i]));
            json_array_append_new (r, json_integer (tr->right[i]));
            json_array_append_new (v, json_real (tr->value[i]));
        }
        json_array_append_new (trees,
                               json_pack ("{s:o, s:o, s:o, s:o, s:o}", "feature", f, "threshold",
                                          th, "left", l, "right", r, "value", v));
    }
    json_t *o = json_pack ("{s:i, s:o}", "features", self->d, "trees", trees);
    if (self->boost)
        json_object_set_new (
            o, "boost", json_pack ("{s:f, s:f}", "init", self->init, "learning_rate", self->lr));
    return o;
}

// s_numbers checks that a is an array of n numbers (integers when ints).
static int
s_numbers (const json_t *a, size_t n, bool ints)
{
    if (!json_is_array (a) || json_array_size (a) != n)
        return -1;
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get (a, i);
        if (ints ? !json_is_integer (v) : !json_is_number (v))
            return -1;
        if (!ints && !isfinite (json_number_value (v)))
            return -1;
    }
    return 0;
}

cgq_pred_forest_t *
cgq_pred_forest_from_json (const json_t *j, char *err, size_t err_len)
{
    const json_t *trees = json_object_get (j, "trees");
    json_int_t d = json_integer_value (json_object_get (j, "features"));
    if (d < 1 || d > 4096 || !json_is_array (trees) || json_array_size (trees) < 1) {
        snprintf (err, err_len, "a forest needs features (1..4096) and a non-empty trees array");
        return NULL;
    }
    const json_t *boost = json_object_get (j, "boost");
    const json_t *init = json_object_get (boost, "init"),
                 *lr = json_object_get (boost, "learning_rate");
    if (boost &&
        (!json_is_number (init) || !isfinite (json_number_value (init)) || !json_is_number (lr) ||
         !(json_number_value (lr) > 0) || !(json_number_value (lr) <= 1))) {
        snprintf (err, err_len, "boost needs a finite init and a learning_rate in (0, 1]");
        return NULL;
    }
    cgq_pred_forest_t *self = cgq_xcalloc (1, sizeof *self);
    self->d = (int)d;
    self->ntrees = (int)json_array_size (trees);
    if (boost) {
        self->boost = true;
        self->init = json_number_value (init);
        self->lr = json_number_value (lr);
    }
    self->trees = cgq_xcalloc ((size_t)self->ntrees, sizeof (s_tree_t));
    for (int t = 0; t < self->ntrees; t++) {
        const json_t *o = json_array_get (trees, (size_t)t);
        const json_t *f = json_object_get (o, "feature");
        size_t n = json_array_size (f);
        if (n < 1 || n > INT32_MAX / 2 || s_numbers (f, n, true) < 0 ||
            s_numbers (json_object_get (o, "threshold"), n, false) < 0 ||
            s_numbers (json_object_get (o, "left"), n, true) < 0 ||
            s_numbers (json_object_get (o, "right"), n, true) < 0 ||
            s_numbers (json_object_get (o, "value"), n, false) < 0) {
            snprintf (err, err_len,
                      "tree %d: feature, threshold, left, right and value must be arrays of "
                      "the same non-zero length, of integers and finite numbers",
                      t);
            goto fail;
        }
        s_tree_t *tr = &self->trees[t];
        for (size_t i = 0; i < n; i++) {
            int id = s_tree_add (tr);
            tr->feature[id] = (int)json_integer_value (json_array_get (f, i));
            tr->threshold[id] =
                json_number_value (json_array_get (json_object_get (o, "threshold"), i));
            json_int_t l = json_integer_value (json_array_get (json_object_get (o, "left"), i));
            json_int_t r = json_integer_value (json_array_get (json_object_get (o, "right"), i));
            tr->value[id] = json_number_value (json_array_get (json_object_get (o, "value"), i));
            bool leaf = tr->feature[id] == -1 && l == -1 && r == -1;
            // Children come after their parent: no cycle, every walk ends.
            bool inner = tr->feature[id] >= 0 && tr->feature[id] < d && l > (json_int_t)i &&
                         r > (json_int_t)i && l < (json_int_t)n && r < (json_int_t)n;
            if (!leaf && !inner) {
                snprintf (err, err_len,
                          "tree %d node %zu: feature %d, children %lld and %lld (a leaf has "
                          "-1, -1, -1; an inner node a feature < %lld and children after it)",
                          t, i, tr->feature[id], (long long)l, (long long)r, (long long)d);
                goto fail;
            }
            tr->left[id] = (int)l;
            tr->right[id] = (int)r;
        }
    }
    return self;
fail:
    cgq_pred_forest_destroy (&self);
    return NULL;
}
