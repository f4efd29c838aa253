// spec: tune.yaml → cgq_spec_t. yamldoc.c reads the text into a tree (bounded
// in size, depth and nodes, with the marks every message needs); this file
// then walks it once, in the order written, and stops at the first error so
// that the user sees one precise message.
#include "spec.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "space.h"
#include "template.h"
#include "spec_impl.h"
#include "util.h"
#include "yamldoc.h"

// The limit of a spec's text (cgq_spec_set_max_bytes): set once at start,
// before any parse.
static size_t s_max_bytes = CGQ_SPEC_MAX_BYTES;
static const char *s_size_hint = "raise it with --max-spec of cgq and of the coordinator; a spec "
                                 "describes a search: keep data in files that the trial reads";

void
cgq_spec_set_max_bytes (size_t max)
{
    s_max_bytes = max ? max : CGQ_SPEC_MAX_BYTES;
}

size_t
cgq_spec_max_bytes (void)
{
    return s_max_bytes;
}

bool
spec_is_ident (const char *s, size_t n)
{
    if (n == 0 || !(isalpha ((unsigned char) s[0]) || s[0] == '_'))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!(isalnum ((unsigned char) s[i]) || s[i] == '_'))
            return false;
    return true;
}

// --- notify -----------------------------------------------------------------------

static const struct {
    const char *name;
    unsigned bit;
} s_notify_events[] = {{"finished", CGQ_NOTIFY_FINISHED},
                       {"failed", CGQ_NOTIFY_FAILED},
                       {"cancelled", CGQ_NOTIFY_CANCELLED}};

const char *
cgq_notify_event_name (unsigned event)
{
    for (size_t i = 0; i < sizeof s_notify_events / sizeof s_notify_events[0]; i++)
        if (s_notify_events[i].bit == event)
            return s_notify_events[i].name;
    return "?";
}

static int
s_notify_event (spec_ctx_t *c, const cgq_yamldoc_node_t *e, unsigned *on)
{
    const char *t;
    if (cgq_yamldoc_get_text (c->y, e, "notify.on", "write on: [finished, failed]", &t) < 0)
        return -1;
    for (size_t i = 0; i < sizeof s_notify_events / sizeof s_notify_events[0]; i++)
        if (!strcmp (t, s_notify_events[i].name)) {
            *on |= s_notify_events[i].bit;
            return 0;
        }
    return cgq_yamldoc_fail (
        c->y, e, "unknown notify event '%s' (expected one of: finished, failed, cancelled)", t);
}

// s_parse_blocked_timeout reads blocked_timeout: a duration like 10m, a
// number of seconds, or 0 / never to wait for a device forever.
static int
s_parse_blocked_timeout (spec_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *v)
{
    double s;
    char buf[96];
    const char *text = v->type == CGQ_YAMLDOC_SCALAR && !cgq_yamldoc_is_null (v)
                           ? cgq_yamldoc_text (v)
                           : NULL;
    if (text && !strcmp (text, "never")) {
        spec->blocked_timeout_s = 0;
        return 0;
    }
    if (!text || cgq_parse_duration (text, &s) < 0 || !(s >= 0) || !isfinite (s))
        return cgq_yamldoc_fail (c->y, v,
                                 "blocked_timeout must be a duration like 10m, 90s or a number "
                                 "of seconds, or 0 / never to wait forever, not %s (write e.g. "
                                 "blocked_timeout: 10m)",
                                 cgq_yamldoc_what (v, buf, sizeof buf));
    spec->blocked_timeout_s = s;
    return 0;
}

static int
s_parse_notify (spec_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *key,
                const cgq_yamldoc_node_t *v)
{
    if (cgq_yamldoc_is_null (v))
        return 0;
    if (cgq_yamldoc_expect_map (
            c->y, v, "notify",
            "write notify: {url: http://host:port/path, on: [finished, failed]}") < 0)
        return -1;
    bool on_given = false;
    for (size_t pi = 0; pi < cgq_yamldoc_npairs (v); pi++) {
        const cgq_yamldoc_node_t *k = cgq_yamldoc_key (c->y, v, pi),
                                 *e = cgq_yamldoc_val (c->y, v, pi);
        const char *kt = cgq_yamldoc_text (k);
        if (!strcmp (kt, "url")) {
            const char *t;
            if (cgq_yamldoc_get_text (c->y, e, "notify.url", "write url: http://host:port/path",
                                      &t) < 0)
                return -1;
            const char *rest = !strncmp (t, "http://", 7)    ? t + 7
                               : !strncmp (t, "https://", 8) ? t + 8
                                                             : NULL;
            if (!rest)
                return cgq_yamldoc_fail (
                    c->y, e,
                    "notify.url '%s' is not an http:// or https:// URL (write url: "
                    "http://host:port/path)",
                    t);
            if (!*rest || *rest == '/' || strpbrk (t, " \t\r\n"))
                return cgq_yamldoc_fail (c->y, e,
                                         "notify.url '%s' has no host or holds a space (write url: "
                                         "http://host:port/path)",
                                         t);
            free (spec->notify.url);
            spec->notify.url = cgq_xstrdup (t);
        }
        else if (!strcmp (kt, "on")) {
            on_given = true;
            spec->notify.on = 0;
            if (e->type == CGQ_YAMLDOC_SEQ) {
                if (!cgq_yamldoc_nitems (e))
                    return cgq_yamldoc_fail (
                        c->y, e,
                        "notify.on is empty (write on: [finished, failed], or remove "
                        "notify)");
                for (size_t i = 0; i < cgq_yamldoc_nitems (e); i++)
                    if (s_notify_event (c, cgq_yamldoc_item (c->y, e, i), &spec->notify.on) < 0)
                        return -1;
            }
            else if (s_notify_event (c, e, &spec->notify.on) < 0)
                return -1;
        }
        else
            return cgq_yamldoc_unknown_key (c->y, k, "notify", "url, on");
    }
    if (!spec->notify.url)
        return cgq_yamldoc_fail (c->y, key,
                                 "notify.url is missing (write url: http://host:port/path)");
    if (!on_given)
        spec->notify.on = CGQ_NOTIFY_FINISHED | CGQ_NOTIFY_FAILED;
    return 0;
}

// --- checkpoint ---------------------------------------------------------------------

static const struct {
    const char *name;
    unsigned bit;
} s_resume_ends[] = {{"lost", CGQ_RESUME_LOST},
                     {"failed", CGQ_RESUME_FAILED},
                     {"timeout", CGQ_RESUME_TIMEOUT}};

static int
s_resume_end (spec_ctx_t *c, const cgq_yamldoc_node_t *e, unsigned *bits)
{
    const char *t;
    if (cgq_yamldoc_get_text (c->y, e, "checkpoint.resume", "write resume: [lost, failed]", &t) < 0)
        return -1;
    for (size_t i = 0; i < sizeof s_resume_ends / sizeof s_resume_ends[0]; i++)
        if (!strcmp (t, s_resume_ends[i].name)) {
            *bits |= s_resume_ends[i].bit;
            return 0;
        }
    return cgq_yamldoc_fail (c->y, e,
                             "unknown checkpoint.resume end '%s' (expected one of: lost, failed, "
                             "timeout; or true, false)",
                             t);
}

// s_parse_resume reads checkpoint.resume: true (every end), false (none), an
// end or a list of them.
static int
s_parse_resume (spec_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *e)
{
    cgq_yamldoc_scalar_t sc;
    if (e->type == CGQ_YAMLDOC_SCALAR) {
        cgq_yamldoc_resolve (e, &sc);
        if (sc.kind == CGQ_YAMLDOC_BOOL) {
            spec->checkpoint.resume =
                sc.b ? CGQ_RESUME_LOST | CGQ_RESUME_FAILED | CGQ_RESUME_TIMEOUT : 0;
            return 0;
        }
    }
    spec->checkpoint.resume = 0;
    if (e->type != CGQ_YAMLDOC_SEQ)
        return s_resume_end (c, e, &spec->checkpoint.resume);
    for (size_t i = 0; i < cgq_yamldoc_nitems (e); i++)
        if (s_resume_end (c, cgq_yamldoc_item (c->y, e, i), &spec->checkpoint.resume) < 0)
            return -1;
    return 0;
}

static bool
s_no_params (const char *name, size_t n, void *arg)
{
    (void) name, (void) n, (void) arg;
    return false;
}

// s_parse_checkpoint reads checkpoint: {store, keep, resume}. A store is a
// directory every worker that may run the trials can reach (a shared file
// system): an absolute path, or one under {spec_dir} (a relative path is
// taken as {spec_dir}/PATH).
static int
s_parse_checkpoint (spec_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *v)
{
    if (cgq_yamldoc_is_null (v))
        return 0;
    if (cgq_yamldoc_expect_map (c->y, v, "checkpoint",
                                "write checkpoint: {store: /shared/ckpt, keep: 1}") < 0)
        return -1;
    for (size_t pi = 0; pi < cgq_yamldoc_npairs (v); pi++) {
        const cgq_yamldoc_node_t *k = cgq_yamldoc_key (c->y, v, pi),
                                 *e = cgq_yamldoc_val (c->y, v, pi);
        const char *kt = cgq_yamldoc_text (k);
        if (!strcmp (kt, "store")) {
            const char *t;
            if (cgq_yamldoc_get_text (c->y, e, "checkpoint.store",
                                      "write store: /shared/ckpt or {spec_dir}/ckpt", &t) < 0)
                return -1;
            if (strstr (t, "://")) {
                // An HTTP(S) store (worker/ckpt_store.c): PUT, GET, DELETE.
                const char *rest = !strncmp (t, "http://", 7)    ? t + 7
                                   : !strncmp (t, "https://", 8) ? t + 8
                                                                 : NULL;
                if (!rest)
                    return cgq_yamldoc_fail (c->y, e,
                                             "checkpoint.store '%s': only http:// and https:// "
                                             "stores are built (write store: "
                                             "http://host:port/prefix or a shared directory)",
                                             t);
                size_t host = strcspn (rest, "/");
                if (host == 0 || memchr (rest, '@', host) || strpbrk (t, "?# \t"))
                    return cgq_yamldoc_fail (c->y, e,
                                             "checkpoint.store '%s' is not a store URL: it needs "
                                             "a host and no user, password, query or fragment "
                                             "(write store: http://host:port/prefix; a token "
                                             "goes to the workers: --checkpoint-token-file)",
                                             t);
            }
            size_t at;
            char name[64];
            if (cgq_template_check (t, s_no_params, NULL, &at, name, sizeof name) < 0)
                return cgq_yamldoc_fail (c->y, e,
                                         "checkpoint.store '%s': '{%s}' is not one of "
                                         "{spec_dir}, {job_id} (the store is the job's, not a "
                                         "trial's; write store: {spec_dir}/ckpt)",
                                         t, name);
            if (strstr (t, "{trial_id}"))
                return cgq_yamldoc_fail (c->y, e,
                                         "checkpoint.store '%s' names {trial_id}: the store is "
                                         "the job's (trials get job-J/trial-T in it)",
                                         t);
            free (spec->checkpoint.store);
            spec->checkpoint.store = t[0] == '/' || t[0] == '{' || strstr (t, "://")
                                         ? cgq_xstrdup (t)
                                                                : cgq_xasprintf ("{spec_dir}/%s", t);
        }
        else if (!strcmp (kt, "keep")) {
            long long n;
            if (cgq_yamldoc_get_int (c->y, e, "checkpoint.keep", 1, CGQ_CHECKPOINT_MAX_KEEP,
                                     "write keep: 1 (the latest) or more", &n) < 0)
                return -1;
            spec->checkpoint.keep = (uint32_t) n;
        }
        else if (!strcmp (kt, "resume")) {
            if (s_parse_resume (c, spec, e) < 0)
                return -1;
        }
        else
            return cgq_yamldoc_unknown_key (c->y, k, "checkpoint", "store, keep, resume");
    }
    return 0;
}

static char *
s_default_name (const char *path)
{
    if (!path || !*path || !strcmp (path, "-"))
        return cgq_xstrdup ("job");
    const char *base = strrchr (path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen (base);
    if (n > 5 && !strcmp (base + n - 5, ".yaml"))
        n -= 5;
    else if (n > 4 && !strcmp (base + n - 4, ".yml"))
        n -= 4;
    return n ? cgq_xstrndup (base, n) : cgq_xstrdup ("job");
}

// s_size_d approximates the number of values of a discrete param where that
// number is too large for cgq_space_param_size, for messages.
static double
s_size_d (const cgq_param_t *p)
{
    uint64_t n;
    if (cgq_space_param_size (p, &n) == 0)
        return (double) n;
    switch (p->kind) {
    case CGQ_PARAM_REPEAT:
        return pow (s_size_d (p->of), p->repeat);
    case CGQ_PARAM_ASSIGNMENT:
        return pow ((double) json_array_size (p->values), (double) json_array_size (p->items));
    case CGQ_PARAM_RANDINT:
        return p->hi - p->lo + 1;
    default:
        return INFINITY;
    }
}

static int
s_parse_doc (spec_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *root)
{
    char buf[96];
    if (!root)
        return cgq_yamldoc_fail_at (c->y, 1, 1,
                                    "the spec is empty (write at least trial: {command: ...})");
    if (root->type != CGQ_YAMLDOC_MAP)
        return cgq_yamldoc_fail (c->y, root,
                                 "the spec must be a mapping of name, space, search, objective, "
                                 "trial, not %s (write e.g. trial: {command: ./train.sh})",
                                 cgq_yamldoc_what (root, buf, sizeof buf));
    if (cgq_yamldoc_check_keys (c->y, root) < 0)
        return -1;
    const cgq_yamldoc_node_t *space_key = NULL, *trial_key = NULL, *cmd = NULL, *env = NULL,
                             *art = NULL;
    spec_stage_nodes_t stage_nodes[CGQ_SPEC_MAX_STAGES];
    memset (stage_nodes, 0, sizeof stage_nodes);
    for (size_t pi = 0; pi < cgq_yamldoc_npairs (root); pi++) {
        const cgq_yamldoc_node_t *k = cgq_yamldoc_key (c->y, root, pi),
                                 *v = cgq_yamldoc_val (c->y, root, pi);
        const char *kt = cgq_yamldoc_text (k);
        int rc = 0;
        if (!strcmp (kt, "name")) {
            const char *name;
            rc = cgq_yamldoc_get_text (c->y, v, "name", "write name: my-search", &name);
            if (rc == 0) {
                free (spec->name);
                spec->name = cgq_xstrdup (name);
            }
        }
        else if (!strcmp (kt, "space")) {
            space_key = k;
            rc = spec_parse_space (c, spec, v);
        }
        else if (!strcmp (kt, "search"))
            rc = spec_parse_search (c, spec, v);
        else if (!strcmp (kt, "objective"))
            rc = spec_parse_objective (c, spec, k, v);
        else if (!strcmp (kt, "trial")) {
            trial_key = k;
            rc = spec_parse_trial (c, spec, v, &cmd, &env, &art, false, stage_nodes);
        }
        else if (!strcmp (kt, "objectives"))
            rc = spec_parse_objectives (c, spec, k, v);
        else if (!strcmp (kt, "early_stop"))
            rc = spec_parse_early_stop (c, spec, k, v);
        else if (!strcmp (kt, "notify"))
            rc = s_parse_notify (c, spec, k, v);
        else if (!strcmp (kt, "blocked_timeout"))
            rc = s_parse_blocked_timeout (c, spec, v);
        else if (!strcmp (kt, "constraints"))
            rc = spec_parse_constraints (c, spec, k, v);
        else if (!strcmp (kt, "checkpoint")) {
            c->checkpoint_key = k;
            rc = s_parse_checkpoint (c, spec, v);
        }
        else
            rc = cgq_yamldoc_unknown_key (
                c->y, k, "the spec",
                "name, space, search, objective, objectives, constraints, early_stop, trial, "
                "notify, checkpoint, blocked_timeout");
        if (rc < 0)
            return -1;
    }
    if (!spec->nstages && spec->trial.kind == CGQ_TRIAL_COMMAND && !spec->trial.command &&
        !spec->trial.argc) {
        if (trial_key)
            return cgq_yamldoc_fail (c->y, trial_key,
                                     "trial.command is missing (write command: python3 train.py "
                                     "--lr {lr}, or kind: noop)");
        return cgq_yamldoc_fail (c->y, root,
                                 "trial is missing (write trial: {command: python3 train.py --lr "
                                 "{lr}})");
    }
    if (spec_check_templates (c, spec, cmd, env, art, stage_nodes) < 0 || spec_check_search (c, spec) < 0 ||
        spec_check_early_stop (c, spec) < 0)
        return -1;
    uint64_t total;
    if (cgq_space_count (spec, &total) < 0) {
        double g = (double) spec->search.samples;
        for (size_t i = 0; i < spec->nparams; i++)
            if (cgq_space_is_axis (spec, &spec->params[i]))
                g *= s_size_d (&spec->params[i]);
        return cgq_yamldoc_fail (c->y, space_key ? space_key : root,
                                 "the search has %.3g trials, more than "
                                 "2^63 (use fewer grid values or fewer samples)",
                                 g);
    }
    return 0;
}

// Where search.file is written: its key's start and its value's end.
typedef struct {
    bool has;
    int kline, kcol, eline, ecol;
} s_marks_t;

static cgq_spec_t *s_parse (const char *text, size_t len, const char *path, const char *dir,
                            char *err, size_t errlen, s_marks_t *marks);

cgq_spec_t *
cgq_spec_parse (const char *text, size_t len, const char *path, char *err, size_t errlen)
{
    return s_parse (text, len, path, NULL, err, errlen, NULL);
}

// s_parse parses text; dir (may be NULL) is where search.file is read. marks,
// if not NULL, receives where search.file is written (for cgq_spec_load).
static cgq_spec_t *
s_parse (const char *text, size_t len, const char *path, const char *dir, char *err,
         size_t errlen, s_marks_t *marks)
{
    const char *given = path;
    if (!path)
        path = "spec";
    if (!text)
        text = "", len = 0;
    spec_ctx_t c = {.y = cgq_yamldoc_new (path, "spec", err, errlen), .dir = dir};
    // The text is kept whole (spec->text) only once it is known to be small.
    const cgq_yamldoc_node_t *root = NULL;
    cgq_spec_t *spec = NULL;
    int rc = cgq_yamldoc_load (c.y, text, len, s_max_bytes, s_size_hint, &root);
    if (rc == 0) {
        spec = cgq_xcalloc (1, sizeof *spec);
        spec->path = cgq_xstrdup (path);
        spec->text = cgq_xstrndup (text, len);
        spec->name = s_default_name (given);
        spec->search.algorithm = CGQ_SEARCH_RANDOM;
        spec->search.samples = 1;
        spec->search.fail_fast = CGQ_SPEC_FAIL_FAST;
        spec->blocked_timeout_s = CGQ_SPEC_BLOCKED_TIMEOUT_S;
        spec->trial.kind = CGQ_TRIAL_COMMAND;
        spec->trial.cpu = 1;
        spec->checkpoint.keep = 1;
        spec->checkpoint.resume = CGQ_RESUME_LOST | CGQ_RESUME_FAILED;
        rc = s_parse_doc (&c, spec, root);
    }
    if (rc == 0 && root)
        rc = cgq_yamldoc_end (c.y);
    if (marks && rc == 0 && c.file_key) {
        marks->has = true;
        marks->kline = c.file_key->line, marks->kcol = c.file_key->col;
        marks->eline = c.file_node->eline, marks->ecol = c.file_node->ecol;
    }
    free (c.point_lines);
    cgq_yamldoc_destroy (&c.y);
    if (rc < 0) {
        cgq_spec_destroy (&spec);
        return NULL;
    }
    return spec;
}

// s_offset is the byte offset of (line, col) in text, columns counted in
// characters as libyaml counts them.
static size_t
s_offset (const char *text, size_t len, int line, int col)
{
    size_t i = 0;
    for (int l = 1; l < line && i < len; i++)
        if (text[i] == '\n')
            l++;
    for (int k = 1; k < col && i < len; k++) {
        i++;
        while (i < len && ((unsigned char) text[i] & 0xc0) == 0x80)
            i++;
    }
    return i;
}

// s_inline_points replaces `file: NAME` in spec->text by `points: [...]` on
// the same line and checks that the coordinator will parse the result (it has
// no file to read). Returns the spec, or NULL (destroyed) with err set.
static cgq_spec_t *
s_inline_points (cgq_spec_t *spec, const s_marks_t *m, char *err, size_t errlen)
{
    size_t len = strlen (spec->text);
    size_t a = s_offset (spec->text, len, m->kline, m->kcol);
    size_t b = s_offset (spec->text, len, m->eline, m->ecol);
    cgq_buf_t t;
    cgq_buf_init (&t);
    cgq_buf_append (&t, spec->text, a);
    cgq_buf_puts (&t, "points: ");
    cgq_json_append (&t, spec->search.points, true);
    cgq_buf_append (&t, spec->text + b, len - b);
    char e2[1024];
    cgq_spec_t *inl = s_parse (t.data, t.len, spec->path, NULL, e2, sizeof e2, NULL);
    if (!inl) {
        if (err && errlen)
            snprintf (err, errlen, "%s:%d:%d: the points of search.file '%s' cannot be sent "
                                   "inline: %s (use points: [...] in the spec)",
                      spec->path, m->kline, m->kcol, spec->search.file, e2);
        cgq_buf_fini (&t);
        cgq_spec_destroy (&spec);
        return NULL;
    }
    cgq_buf_fini (&t);
    free (inl->name);
    inl->name = spec->name; // the name follows the file, not the parse
    spec->name = NULL;
    inl->search.file = spec->search.file;
    spec->search.file = NULL;
    cgq_spec_destroy (&spec);
    return inl;
}

cgq_spec_t *
cgq_spec_load (const char *path, char *err, size_t errlen)
{
    // One byte past the limit is enough for cgq_spec_parse to refuse the file.
    cgq_buf_t b;
    cgq_buf_init (&b);
    if (cgq_yamldoc_read_file (path, s_max_bytes, &b) < 0) {
        if (err && errlen)
            snprintf (err, errlen, "%s: cannot read: %s", path, strerror (errno));
        cgq_buf_fini (&b);
        return NULL;
    }
    char *dir = cgq_xstrdup (path);
    char *slash = strrchr (dir, '/');
    if (slash == dir)
        dir[1] = 0;
    else if (slash)
        *slash = 0;
    else
        strcpy (dir, ".");
    s_marks_t marks = {0};
    cgq_spec_t *spec = s_parse (b.data, b.len, path, dir, err, errlen, &marks);
    free (dir);
    if (spec && marks.has)
        spec = s_inline_points (spec, &marks, err, errlen);
    cgq_buf_fini (&b);
    return spec;
}

void
cgq_spec_destroy (cgq_spec_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cgq_spec_t *self = *self_p;
    free (self->name);
    free (self->path);
    free (self->text);
    for (size_t i = 0; i < self->nparams; i++)
        spec_param_fini (&self->params[i]);
    free (self->params);
    json_decref (self->param_index);
    spec_objective_fini (&self->objective);
    for (size_t i = 0; i < CGQ_SPEC_MAX_OBJECTIVES; i++)
        spec_objective_fini (&self->objectives[i]);
    spec_constraints_fini (self);
    free (self->notify.url);
    free (self->checkpoint.store);
    free (self->early_stop.attribute);
    free (self->early_stop.metric);
    json_decref (self->search.points);
    free (self->search.file);
    free (self->search.pbt.metric);
    free (self->search.pbt.time_attr);
    free (self->search.warm_jobs);
    free (self->search.warm_points);
    spec_stage_fini (&self->trial);
    for (size_t i = 0; i < self->nstages; i++)
        spec_stage_fini (&self->stages[i]);
    free (self->stages);
    free (self);
    *self_p = NULL;
}

const cgq_param_t *
cgq_spec_param (const cgq_spec_t *self, const char *name)
{
    if (!self || !name)
        return NULL;
    if (self->param_index) {
        json_t *at = json_object_get (self->param_index, name);
        return at ? &self->params[json_integer_value (at)] : NULL;
    }
    for (size_t i = 0; i < self->nparams; i++)
        if (!strcmp (self->params[i].name, name))
            return &self->params[i];
    return NULL;
}
