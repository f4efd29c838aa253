// spec_trial: the trial: section of a spec and its stages: command, env,
// resources, on: (device tags), artifact, device benchmarks and the
// predictor, the check of every template against the params it may name,
// and the stage lookups (cgq_spec_stage*). Part of the spec parser (spec.c;
// shared internals in spec_impl.h).
#include "spec.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "space.h"
#include "spec_impl.h"
#include "template.h"
#include "util.h"

static int
s_parse_resources (spec_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *v)
{
    if (cgq_yamldoc_is_null (v))
        return 0;
    if (cgq_yamldoc_expect_map (c->y, v, "trial.resources",
                                "write resources: {cpu: 1, gpu: 0.5, memory: 4G}") < 0)
        return -1;
    for (size_t pi = 0; pi < cgq_yamldoc_npairs (v); pi++) {
        const cgq_yamldoc_node_t *k = cgq_yamldoc_key (c->y, v, pi),
                                 *e = cgq_yamldoc_val (c->y, v, pi);
        const char *kt = cgq_yamldoc_text (k);
        double d;
        char buf[96];
        if (!strcmp (kt, "cpu")) {
            if (cgq_yamldoc_get_number (c->y, e, "trial.resources.cpu",
                                        "write e.g. cpu: 2 or cpu: 0.5", &d) < 0)
                return -1;
            if (d < 0)
                return cgq_yamldoc_fail (
                    c->y, e, "trial.resources.cpu must be >= 0, not %s (write e.g. cpu: 1)",
                    cgq_yamldoc_text (e));
            spec->trial.cpu = d;
        }
        else if (!strcmp (kt, "gpu")) {
            if (cgq_yamldoc_get_number (c->y, e, "trial.resources.gpu",
                                        "write e.g. gpu: 1 or gpu: 0.5", &d) < 0)
                return -1;
            if (d < 0)
                return cgq_yamldoc_fail (
                    c->y, e, "trial.resources.gpu must be >= 0, not %s (write e.g. gpu: 1)",
                    cgq_yamldoc_text (e));
            if (d > 1 && d != floor (d))
                return cgq_yamldoc_fail (
                    c->y, e,
                    "trial.resources.gpu %s is neither a share of one GPU (<= 1) "
                    "nor a whole number of GPUs (write gpu: %.0f or gpu: %.0f)",
                    cgq_yamldoc_text (e), floor (d), ceil (d));
            spec->trial.gpu = d;
        }
        else if (!strcmp (kt, "memory")) {
            uint64_t bytes;
            if (e->type != CGQ_YAMLDOC_SCALAR || cgq_yamldoc_is_null (e) ||
                cgq_parse_bytes (cgq_yamldoc_text (e), &bytes) < 0)
                return cgq_yamldoc_fail (c->y, e,
                                         "trial.resources.memory must be a size like 4G, 512M or a "
                                         "number of bytes, not %s (write e.g. memory: 4G)",
                                         cgq_yamldoc_what (e, buf, sizeof buf));
            spec->trial.memory = bytes;
        }
        else
            return cgq_yamldoc_unknown_key (c->y, k, "trial.resources", "cpu, gpu, memory");
    }
    return 0;
}

static int
s_parse_env (spec_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *v)
{
    if (cgq_yamldoc_is_null (v))
        return 0;
    if (cgq_yamldoc_expect_map (c->y, v, "trial.env", "write env: {DATA_DIR: /data}") < 0)
        return -1;
    size_t n = cgq_yamldoc_npairs (v);
    spec->trial.env_keys = cgq_xcalloc (n, sizeof (char *));
    spec->trial.env_vals = cgq_xcalloc (n, sizeof (char *));
    for (size_t pi = 0; pi < cgq_yamldoc_npairs (v); pi++) {
        const cgq_yamldoc_node_t *k = cgq_yamldoc_key (c->y, v, pi),
                                 *e = cgq_yamldoc_val (c->y, v, pi);
        const char *kt = cgq_yamldoc_text (k);
        char buf[96];
        if (!spec_is_ident (kt, k->len))
            return cgq_yamldoc_fail (
                c->y, k,
                "bad environment variable name '%s' in trial.env (use letters, "
                "digits and _, e.g. DATA_DIR)",
                kt);
        if (e->type != CGQ_YAMLDOC_SCALAR || strlen (cgq_yamldoc_text (e)) != e->len)
            return cgq_yamldoc_fail (
                c->y, e, "trial.env.%s must be a string, not %s (write %s: \"value\")", kt,
                e->type == CGQ_YAMLDOC_SCALAR ? "text with a NUL byte"
                                              : cgq_yamldoc_what (e, buf, sizeof buf),
                kt);
        spec->trial.env_keys[spec->trial.nenv] = cgq_xstrdup (kt);
        spec->trial.env_vals[spec->trial.nenv] = cgq_xstrdup (cgq_yamldoc_text (e));
        spec->trial.nenv++;
    }
    return 0;
}

static int
s_parse_command (spec_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *v)
{
    const char *hint = "write command: python3 train.py --lr {lr}, or a list of arguments";
    char buf[96];
    if (v->type == CGQ_YAMLDOC_SEQ) {
        size_t n = cgq_yamldoc_nitems (v);
        if (n == 0)
            return cgq_yamldoc_fail (c->y, v, "trial.command is an empty list (%s)", hint);
        spec->trial.argv = cgq_xcalloc (n + 1, sizeof (char *));
        for (size_t i = 0; i < n; i++) {
            const cgq_yamldoc_node_t *e = cgq_yamldoc_item (c->y, v, i);
            if (e->type != CGQ_YAMLDOC_SCALAR || strlen (cgq_yamldoc_text (e)) != e->len)
                return cgq_yamldoc_fail (
                    c->y, e, "trial.command[%zu] must be a string, not %s (quote it: \"...\")", i,
                    e->type == CGQ_YAMLDOC_SCALAR ? "text with a NUL byte"
                                                  : cgq_yamldoc_what (e, buf, sizeof buf));
            spec->trial.argv[i] = cgq_xstrdup (cgq_yamldoc_text (e));
            spec->trial.argc++;
        }
        if (!*spec->trial.argv[0])
            return cgq_yamldoc_fail (c->y, v, "trial.command[0], the program, is empty (%s)", hint);
        return 0;
    }
    const char *t;
    if (cgq_yamldoc_get_text (c->y, v, "trial.command", hint, &t) < 0)
        return -1;
    const char *q = t;
    while (isspace ((unsigned char) *q))
        q++;
    if (!*q)
        return cgq_yamldoc_fail (c->y, v, "trial.command is blank (%s)", hint);
    spec->trial.command = cgq_xstrdup (t);
    return 0;
}

// s_is_word: a tag name or a benchmark name: letters, digits, '_', '-', '.',
// starting with a letter or a digit.
static bool
s_is_word (const char *s, size_t n)
{
    if (n == 0 || !isalnum ((unsigned char) s[0]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!(isalnum ((unsigned char) s[i]) || strchr ("_-.", s[i])))
            return false;
    return true;
}

// s_parse_on reads on: {device: odroid-xu4, os: tizen}: the tags a device
// must all have. Values are text (numbers as written) without blanks, ','
// or '=', so "device=odroid-xu4, os=tizen" reads back unambiguously.
static int
s_parse_on (spec_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *v)
{
    const char *hint = "write on: {device: odroid-xu4}";
    if (cgq_yamldoc_expect_map (c->y, v, "trial.on", hint) < 0)
        return -1;
    if (cgq_yamldoc_npairs (v) == 0)
        return cgq_yamldoc_fail (c->y, v, "trial.on is empty (%s)", hint);
    if (cgq_yamldoc_npairs (v) > CGQ_STAGE_MAX_TAGS)
        return cgq_yamldoc_fail (c->y, v,
                                 "trial.on has %zu tags, more than %d (match on fewer tags)",
                                 cgq_yamldoc_npairs (v), CGQ_STAGE_MAX_TAGS);
    spec->trial.on = json_object ();
    for (size_t pi = 0; pi < cgq_yamldoc_npairs (v); pi++) {
        const cgq_yamldoc_node_t *k = cgq_yamldoc_key (c->y, v, pi),
                                 *e = cgq_yamldoc_val (c->y, v, pi);
        const char *kt = cgq_yamldoc_text (k);
        char buf[96];
        if (!s_is_word (kt, k->len))
            return cgq_yamldoc_fail (
                c->y, k,
                "bad tag name '%s' in trial.on (use letters, digits, '_', '-' and "
                "'.', e.g. device)",
                kt);
        if (e->type != CGQ_YAMLDOC_SCALAR || cgq_yamldoc_is_null (e) ||
            strlen (cgq_yamldoc_text (e)) != e->len)
            return cgq_yamldoc_fail (
                c->y, e, "trial.on.%s must be a tag value, not %s (write %s: odroid-xu4)", kt,
                e->type == CGQ_YAMLDOC_SCALAR && !cgq_yamldoc_is_null (e)
                    ? "text with a NUL byte"
                    : cgq_yamldoc_what (e, buf, sizeof buf),
                kt);
        const char *val = cgq_yamldoc_text (e);
        for (const char *q = val; *q; q++)
            if (isspace ((unsigned char) *q) || *q == ',' || *q == '=' || iscntrl ((unsigned char) *q))
                return cgq_yamldoc_fail (
                    c->y, e,
                    "trial.on.%s '%s' holds a blank, ',' or '=' (a tag value is one "
                    "word, e.g. odroid-xu4)",
                    kt, val);
        json_object_set_new (spec->trial.on, kt, json_string (val));
    }
    return 0;
}

static int
s_check_url (const char *url, char *err, size_t errlen)
{
    if (strncmp (url, "http://", 7) && strncmp (url, "https://", 8) && strncmp (url, "file://", 7)) {
        snprintf (err, errlen,
                  "artifact url '%.200s' is not http://, https:// or file:// (write e.g. "
                  "url: http://artifacts:8080/models/mobilenetv2.tflite)",
                  url);
        return -1;
    }
    for (const char *q = url; *q; q++)
        if (isspace ((unsigned char) *q) || iscntrl ((unsigned char) *q)) {
            snprintf (err, errlen, "artifact url '%.200s' holds a blank (escape it as %%20)", url);
            return -1;
        }
    return 0;
}

static int
s_check_sha (char *sha256, char *err, size_t errlen)
{
    size_t n = strlen (sha256);
    bool hex = n == 64;
    for (size_t i = 0; hex && i < n; i++)
        hex = isxdigit ((unsigned char) sha256[i]) != 0;
    if (!hex) {
        snprintf (err, errlen,
                  "artifact sha256 '%.80s' is not 64 hex digits (write the output of "
                  "sha256sum FILE)",
                  sha256);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        sha256[i] = (char) tolower ((unsigned char) sha256[i]);
    return 0;
}

int
cgq_spec_check_artifact (const char *url, char *sha256, char *err, size_t errlen)
{
    if (!url || !sha256) {
        snprintf (err, errlen, "an artifact needs both url and sha256");
        return -1;
    }
    return s_check_url (url, err, errlen) < 0 ? -1 : s_check_sha (sha256, err, errlen);
}

// s_parse_artifact reads artifact: {url: ..., sha256: ...}. Both may hold
// placeholders (checked with the other templates once the space is known); a
// literal pair is checked here.
static int
s_parse_artifact (spec_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *v)
{
    const char *hint = "write artifact: {url: http://host/model.tflite, sha256: <64 hex digits>}";
    if (cgq_yamldoc_expect_map (c->y, v, "trial.artifact", hint) < 0)
        return -1;
    const cgq_yamldoc_node_t *url = NULL, *sha = NULL;
    for (size_t pi = 0; pi < cgq_yamldoc_npairs (v); pi++) {
        const cgq_yamldoc_node_t *k = cgq_yamldoc_key (c->y, v, pi),
                                 *e = cgq_yamldoc_val (c->y, v, pi);
        const char *kt = cgq_yamldoc_text (k), *t;
        if (!strcmp (kt, "url")) {
            if (cgq_yamldoc_get_text (c->y, e, "trial.artifact.url", hint, &t) < 0)
                return -1;
            spec->trial.artifact_url = cgq_xstrdup (t);
            url = e;
        }
        else if (!strcmp (kt, "sha256")) {
            if (cgq_yamldoc_get_text (c->y, e, "trial.artifact.sha256", hint, &t) < 0)
                return -1;
            spec->trial.artifact_sha256 = cgq_xstrdup (t);
            sha = e;
        }
        else
            return cgq_yamldoc_unknown_key (c->y, k, "trial.artifact", "url, sha256");
    }
    if (!url)
        return cgq_yamldoc_fail (c->y, v, "trial.artifact.url is missing (%s)", hint);
    if (!sha)
        return cgq_yamldoc_fail (
            c->y, v,
            "trial.artifact.sha256 is missing (a runner measures only an artifact "
            "it has verified; write sha256: followed by the output of sha256sum FILE)");
    char err[512];
    if (!strchr (spec->trial.artifact_url, '{') &&
        s_check_url (spec->trial.artifact_url, err, sizeof err) < 0)
        return cgq_yamldoc_fail (c->y, url, "trial.%s", err);
    if (!strchr (spec->trial.artifact_sha256, '{') &&
        s_check_sha (spec->trial.artifact_sha256, err, sizeof err) < 0)
        return cgq_yamldoc_fail (c->y, sha, "trial.%s", err);
    return 0;
}

// s_check_predictor: kind: predictor needs data: (and no command); data:
// belongs to kind: predictor only.
static int
s_check_predictor (spec_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *kind,
                   const cgq_yamldoc_node_t *command, const cgq_yamldoc_node_t *data)
{
    if (spec->trial.kind != CGQ_TRIAL_PREDICTOR) {
        if (data)
            return cgq_yamldoc_fail (
                c->y, data,
                "trial.data is read by kind: predictor only (write kind: predictor, "
                "or pass the data to your command)");
        return 0;
    }
    if (command)
        return cgq_yamldoc_fail (
            c->y, command,
            "trial.command does not go with kind: predictor, which runs the built-in "
            "GNN predictor (remove command, or kind)");
    if (!data)
        return cgq_yamldoc_fail (
            c->y, kind,
            "kind: predictor needs trial.data, the CG dataset directory (write data: "
            "\"{spec_dir}/data/cpu-local\", quoted: a bare { starts a mapping)");
    return 0;
}

// s_check_client: kind: client runs nothing of ours (the client's process
// does the work between study.ask() and study.tell()), so it takes only the
// keys every stage has: timeout (how long an asked trial may go untold),
// retries, env (ignored by clients, harmless). It needs no CPU of a node.
static int
s_check_client (spec_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *const *keys,
                size_t nkeys)
{
    if (spec->trial.kind != CGQ_TRIAL_CLIENT)
        return 0;
    spec->trial.cpu = 0;
    const cgq_yamldoc_node_t *first = NULL;
    for (size_t i = 0; i < nkeys && !first; i++)
        first = keys[i];
    if (first)
        return cgq_yamldoc_fail (
            c->y, first,
            "trial.%s does not go with kind: client, whose trials run in the client's own "
            "process (study.ask() / study.tell() in Python); beside kind only timeout and "
            "retries (remove %s)",
            cgq_yamldoc_text (first), cgq_yamldoc_text (first));
    return 0;
}

// s_check_device checks the keys of trial that only go together: a device
// stage (benchmark:) names its devices with on: and runs no command; a
// command or noop trial has no device keys. The nodes are the keys seen
// (NULL: absent); device_key is any of on, artifact, repeats, warmup, measure.
static int
s_check_device (spec_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *kind,
                const cgq_yamldoc_node_t *command, const cgq_yamldoc_node_t *resources,
                const cgq_yamldoc_node_t *bench, const cgq_yamldoc_node_t *on,
                const cgq_yamldoc_node_t *device_key)
{
    if (!bench) {
        if (device_key)
            return cgq_yamldoc_fail (
                c->y, device_key,
                "trial.%s belongs to a device trial, which names a benchmark (write "
                "benchmark: NAME, one of the runner's benchmarks, or remove %s)",
                cgq_yamldoc_text (device_key), cgq_yamldoc_text (device_key));
        return 0;
    }
    if (kind)
        return cgq_yamldoc_fail (
            c->y, kind,
            "trial.kind does not go with benchmark: a device trial runs the runner's "
            "benchmark (remove kind, or benchmark)");
    if (command)
        return cgq_yamldoc_fail (
            c->y, command,
            "trial.command does not go with benchmark: a runner runs only the "
            "benchmarks of its own config, never a command from a spec (remove "
            "command, or benchmark)");
    if (resources)
        return cgq_yamldoc_fail (
            c->y, resources,
            "trial.resources does not apply to a device trial: a device runs one "
            "measurement at a time (remove resources; choose devices with on:)");
    if (!on)
        return cgq_yamldoc_fail (
            c->y, bench,
            "a device trial needs trial.on, the tags of the devices that may run it "
            "(write on: {device: odroid-xu4})");
    spec->trial.kind = CGQ_TRIAL_DEVICE;
    spec->trial.cpu = 0;
    return 0;
}

// Where the keys of one stage are written, for the checks after parsing.

static int s_parse_stages (spec_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *k,
                           const cgq_yamldoc_node_t *v, spec_stage_nodes_t *nodes);

// spec_parse_trial reads trial: into spec->trial, or one element of
// trial.stages into it (in_stage: name is allowed, stages is not).
// stages_nodes (room for CGQ_SPEC_MAX_STAGES) receives where each stage's
// templates are written when trial.stages is given.
int
spec_parse_trial (spec_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *v,
               const cgq_yamldoc_node_t **cmd_node, const cgq_yamldoc_node_t **env_node,
               const cgq_yamldoc_node_t **art_node, bool in_stage, spec_stage_nodes_t *stages_nodes)
{
    if (cgq_yamldoc_is_null (v))
        return 0;
    if (cgq_yamldoc_expect_map (c->y, v, "trial",
                                "write trial: {command: python3 train.py --lr {lr}}") < 0)
        return -1;
    const cgq_yamldoc_node_t *stages_k = NULL, *stages_v = NULL, *first_k = NULL;
    const cgq_yamldoc_node_t *data_k = NULL;
    const cgq_yamldoc_node_t *kind_k = NULL, *cmd_k = NULL, *res_k = NULL, *bench_k = NULL,
                             *on_k = NULL, *device_k = NULL;
    for (size_t pi = 0; pi < cgq_yamldoc_npairs (v); pi++) {
        const cgq_yamldoc_node_t *k = cgq_yamldoc_key (c->y, v, pi),
                                 *e = cgq_yamldoc_val (c->y, v, pi);
        const char *kt = cgq_yamldoc_text (k);
        long long n;
        if (!strcmp (kt, "kind")) {
            const char *kind;
            if (cgq_yamldoc_get_text (c->y, e, "trial.kind", "write kind: command or kind: noop",
                                      &kind) < 0)
                return -1;
            kind_k = k;
            if (!strcmp (kind, "command"))
                spec->trial.kind = CGQ_TRIAL_COMMAND;
            else if (!strcmp (kind, "noop"))
                spec->trial.kind = CGQ_TRIAL_NOOP;
            else if (!strcmp (kind, "predictor"))
                spec->trial.kind = CGQ_TRIAL_PREDICTOR;
            else if (!strcmp (kind, "client") && !in_stage)
                spec->trial.kind = CGQ_TRIAL_CLIENT;
            else if (!strcmp (kind, "client"))
                return cgq_yamldoc_fail (c->y, e,
                                         "kind: client does not go in trial.stages: a client's "
                                         "trial is one stage, run where study.ask() is called "
                                         "(write trial: {kind: client} without stages)");
            else
                return cgq_yamldoc_fail (c->y, e,
                                         "unknown trial.kind '%s' (expected one of: command, noop, "
                                         "predictor, client)",
                                         kind);
        }
        else if (!strcmp (kt, "data")) {
            const char *d;
            if (cgq_yamldoc_get_text (c->y, e, "trial.data",
                                      "write data: \"{spec_dir}/data/cpu-local\"", &d) < 0)
                return -1;
            free (spec->trial.data);
            spec->trial.data = cgq_xstrdup (d);
            data_k = e;
        }
        else if (!strcmp (kt, "command")) {
            if (s_parse_command (c, spec, e) < 0)
                return -1;
            *cmd_node = e;
            cmd_k = k;
        }
        else if (!strcmp (kt, "resources")) {
            if (s_parse_resources (c, spec, e) < 0)
                return -1;
            res_k = k;
        }
        else if (!strcmp (kt, "timeout")) {
            double s;
            char buf[96];
            if (e->type != CGQ_YAMLDOC_SCALAR || cgq_yamldoc_is_null (e) ||
                cgq_parse_duration (cgq_yamldoc_text (e), &s) < 0 || !(s > 0) || !isfinite (s))
                return cgq_yamldoc_fail (
                    c->y, e,
                    "trial.timeout must be a duration > 0 like 30m, 90s, 2h or a "
                    "number of seconds, not %s (write e.g. timeout: 30m)",
                    cgq_yamldoc_what (e, buf, sizeof buf));
            spec->trial.timeout_s = s;
        }
        else if (!strcmp (kt, "retries")) {
            if (cgq_yamldoc_get_int (c->y, e, "trial.retries", 0, UINT32_MAX,
                                     "write e.g. retries: 2", &n) < 0)
                return -1;
            spec->trial.retries = (uint32_t) n;
        }
        else if (!strcmp (kt, "env")) {
            if (s_parse_env (c, spec, e) < 0)
                return -1;
            *env_node = e;
        }
        else if (!strcmp (kt, "benchmark")) {
            const char *b;
            const char *hint = "write benchmark: NAME, a benchmark of the runner's config";
            if (cgq_yamldoc_get_text (c->y, e, "trial.benchmark", hint, &b) < 0)
                return -1;
            if (!s_is_word (b, e->len))
                return cgq_yamldoc_fail (
                    c->y, e,
                    "bad benchmark name '%s' (use letters, digits, '_', '-' and '.'; "
                    "%s)",
                    b, hint);
            spec->trial.benchmark = cgq_xstrdup (b);
            bench_k = k;
        }
        else if (!strcmp (kt, "on")) {
            if (s_parse_on (c, spec, e) < 0)
                return -1;
            on_k = device_k = k;
        }
        else if (!strcmp (kt, "artifact")) {
            if (s_parse_artifact (c, spec, e) < 0)
                return -1;
            *art_node = e;
            device_k = k;
        }
        else if (!strcmp (kt, "repeats")) {
            if (cgq_yamldoc_get_int (
                    c->y, e, "trial.repeats", 1, 1000000,
                    "write e.g. repeats: 50, or leave it out for the runner's default", &n) < 0)
                return -1;
            if (spec->trial.measure.repeats)
                return cgq_yamldoc_fail (c->y, k, "trial.repeats and measure.repeats say the same thing "
                                                  "(keep one)");
            spec->trial.repeats = (uint32_t) n;
            device_k = k;
        }
        else if (!strcmp (kt, "warmup")) {
            if (cgq_yamldoc_get_int (
                    c->y, e, "trial.warmup", 1, 1000000,
                    "write e.g. warmup: 5, or leave it out for the runner's default", &n) < 0)
                return -1;
            if (spec->trial.measure.warmup)
                return cgq_yamldoc_fail (c->y, k, "trial.warmup and measure.warmup say the same thing "
                                                  "(keep one)");
            spec->trial.warmup = (uint32_t) n;
            device_k = k;
        }
        else if (!strcmp (kt, "measure")) { // spec_measure.c
            if (spec_parse_measure (c, &spec->trial, e, in_stage) < 0)
                return -1;
            device_k = k;
        }
        else if (!strcmp (kt, "stages") && !in_stage) {
            stages_k = k;
            stages_v = e;
        }
        else if (!strcmp (kt, "name") && in_stage) {
            const char *name;
            if (cgq_yamldoc_get_text (c->y, e, "trial.stages[].name", "write name: train", &name) <
                0)
                return -1;
            if (!spec_is_ident (name, e->len))
                return cgq_yamldoc_fail (
                    c->y, e,
                    "bad stage name '%s' (use letters, digits and _, not starting "
                    "with a digit, e.g. name: train: later stages write "
                    "{%s.METRIC})",
                    name, "train");
            free (spec->trial.name);
            spec->trial.name = cgq_xstrdup (name);
        }
        else
            return cgq_yamldoc_unknown_key (
                c->y, k, in_stage ? "trial.stages[]" : "trial",
                in_stage ? "name, kind, command, data, resources, timeout, "
                           "retries, env, on, benchmark, artifact, repeats, "
                           "warmup, measure"
                         : "kind, command, data, resources, timeout, retries, "
                           "env, on, benchmark, artifact, repeats, warmup, "
                           "measure, stages");
        if (strcmp (kt, "stages") && strcmp (kt, "timeout") && strcmp (kt, "retries") &&
            strcmp (kt, "env") && !first_k)
            first_k = k; // a key that belongs to one stage
    }
    if (stages_k) {
        if (first_k)
            return cgq_yamldoc_fail (
                c->y, first_k,
                "trial.%s does not go with trial.stages: each stage says what it "
                "runs (move %s into a stage; beside stages: only env, timeout and "
                "retries, the defaults of every stage)",
                cgq_yamldoc_text (first_k), cgq_yamldoc_text (first_k));
        return s_parse_stages (c, spec, stages_k, stages_v, stages_nodes);
    }
    if (s_check_predictor (c, spec, kind_k, cmd_k, data_k) < 0 ||
        s_check_client (c, spec,
                        (const cgq_yamldoc_node_t *[]) {cmd_k, res_k, bench_k, device_k}, 4))
        return -1;
    return s_check_device (c, spec, kind_k, cmd_k, res_k, bench_k, on_k, device_k);
}

void
spec_stage_fini (cgq_stage_t *st)
{
    free (st->name);
    free (st->command);
    free (st->data);
    for (size_t i = 0; st->argv && st->argv[i]; i++)
        free (st->argv[i]);
    free (st->argv);
    for (size_t i = 0; i < st->nenv; i++) {
        free (st->env_keys[i]);
        free (st->env_vals[i]);
    }
    free (st->env_keys);
    free (st->env_vals);
    json_decref (st->on);
    free (st->benchmark);
    free (st->artifact_url);
    free (st->artifact_sha256);
    free (st->measure.governor);
    memset (st, 0, sizeof *st);
}

// s_parse_stages reads trial.stages: a list of 1..CGQ_SPEC_MAX_STAGES
// mappings, each a trial of its own with a unique name. Each is parsed by
// spec_parse_trial into spec->trial, then moved into spec->stages; trial's own
// timeout and retries (read before, whatever the key order: see the caller)
// are each stage's defaults.
static int
s_parse_stages (spec_ctx_t *c, cgq_spec_t *spec, const cgq_yamldoc_node_t *k,
                const cgq_yamldoc_node_t *v, spec_stage_nodes_t *nodes)
{
    char buf[96];
    const char *hint = "write stages: [{name: train, command: ./train.sh}, {name: measure, "
                       "on: {device: odroid}, benchmark: run}]";
    if (v->type != CGQ_YAMLDOC_SEQ)
        return cgq_yamldoc_fail (c->y, v, "trial.stages must be a list of stages, not %s (%s)",
                                 cgq_yamldoc_what (v, buf, sizeof buf), hint);
    if (v->len == 0)
        return cgq_yamldoc_fail (
            c->y, v, "trial.stages is empty (%s, or write trial.command for one stage)", hint);
    if (v->len > CGQ_SPEC_MAX_STAGES)
        return cgq_yamldoc_fail (c->y, cgq_yamldoc_item (c->y, v, CGQ_SPEC_MAX_STAGES),
                                 "trial.stages has %zu stages, more than %d (merge some of them)",
                                 (size_t)v->len, CGQ_SPEC_MAX_STAGES);
    cgq_stage_t outer = spec->trial;
    spec->stages = cgq_xcalloc (v->len, sizeof *spec->stages);
    int rc = 0;
    for (size_t i = 0; i < v->len && rc == 0; i++) {
        const cgq_yamldoc_node_t *e = cgq_yamldoc_item (c->y, v, i);
        memset (&spec->trial, 0, sizeof spec->trial);
        spec->trial.kind = CGQ_TRIAL_COMMAND;
        spec->trial.cpu = 1;
        spec->trial.timeout_s = outer.timeout_s;
        spec->trial.retries = outer.retries;
        nodes[i].at = e;
        if (e->type != CGQ_YAMLDOC_MAP)
            rc = cgq_yamldoc_fail (c->y, e, "trial.stages[%zu] must be a mapping, not %s (%s)", i,
                                   cgq_yamldoc_what (e, buf, sizeof buf), hint);
        else
            rc = spec_parse_trial (c, spec, e, &nodes[i].cmd, &nodes[i].env, &nodes[i].art, true,
                                NULL);
        if (rc == 0 && !spec->trial.name)
            rc = cgq_yamldoc_fail (c->y, e,
                                   "trial.stages[%zu] has no name (write name: %s; later stages "
                                   "read its metrics as {NAME.METRIC})",
                                   i, i ? "measure" : "train");
        if (rc == 0 && spec->trial.kind == CGQ_TRIAL_COMMAND && !spec->trial.command &&
            !spec->trial.argc)
            rc = cgq_yamldoc_fail (
                c->y, e,
                "stage '%s' has no command (write command: ./run.sh {lr}, kind: noop, "
                "or benchmark: with on: for a device stage)",
                spec->trial.name);
        for (size_t p = 0; rc == 0 && p < spec->nstages; p++)
            if (!strcmp (spec->stages[p].name, spec->trial.name)) {
                const cgq_yamldoc_node_t *prev = nodes[p].at;
                rc = cgq_yamldoc_fail (c->y, e,
                                       "duplicate stage name '%s' (the stage at %d:%d has it; give "
                                       "each stage its own name)",
                                       spec->trial.name, prev->line, prev->col);
            }
        spec->stages[spec->nstages++] = spec->trial; // the last one too, to be freed
    }
    memset (&spec->trial, 0, sizeof spec->trial);
    spec->trial = outer;
    (void) k;
    return rc;
}

// What a template of stage (0 for trial:) may name besides the built-ins:
// the spec's params, and STAGE.METRIC of a stage before it.
typedef struct {
    const cgq_spec_t *spec;
    size_t stage;
} s_known_t;

static bool
s_known (const char *s, size_t n, void *arg)
{
    const s_known_t *k = arg;
    const cgq_spec_t *spec = k->spec;
    const char *dot = memchr (s, '.', n);
    if (dot) {
        int i = cgq_spec_stage_index (spec, s, (size_t)(dot - s));
        if (i >= 0 && (size_t)i < k->stage && !memchr (dot + 1, '.', n - (size_t)(dot - s) - 1))
            return true;
    }
    if (spec->param_index)
        return json_object_getn (spec->param_index, s, n) != NULL;
    for (size_t i = 0; i < spec->nparams; i++)
        if (strlen (spec->params[i].name) == n && !memcmp (spec->params[i].name, s, n))
            return true;
    return false;
}

// s_check_tmpl reports the first bad placeholder of one template, with the
// names that would have been accepted.
static int
s_check_tmpl (spec_ctx_t *c, const cgq_spec_t *spec, size_t stage, const cgq_yamldoc_node_t *at,
              const char *tmpl, const char *where)
{
    size_t off;
    char name[128];
    s_known_t k = {spec, stage};
    if (cgq_template_check (tmpl, s_known, &k, &off, name, sizeof name) == 0)
        return 0;
    char *dot = strchr (name, '.');
    if (dot && tmpl[off] != '}' && strchr (tmpl + off, '}')) {
        int k = cgq_spec_stage_index (spec, name, (size_t) (dot - name));
        const char *self = cgq_spec_nstages (spec) > stage && spec->nstages
                               ? spec->stages[stage].name
                               : "";
        if (k >= 0 && spec->nstages && strncmp (where, "trial.stages", 12))
            return cgq_yamldoc_fail (
                c->y, at,
                "'{%s}' in %s names a metric of stage '%s', but trial.env is given "
                "to every stage, the first included (move it into the env of a stage "
                "after '%s')",
                name, where, spec->stages[k].name, spec->stages[k].name);
        if (k >= 0 && (size_t) k == stage)
            return cgq_yamldoc_fail (
                c->y, at,
                "'{%s}' in %s names this stage's own metric '%s' (a stage sees the "
                "metrics of the stages before it only)",
                name, where, dot + 1);
        if (k >= 0)
            return cgq_yamldoc_fail (
                c->y, at,
                "'{%s}' in %s names a metric of stage '%s', which runs after stage "
                "'%s' (a stage sees the metrics of the stages before it only; "
                "reorder trial.stages)",
                name, where, spec->stages[k].name, self);
        if (spec->nstages)
            return cgq_yamldoc_fail (c->y, at,
                                     "'{%s}' in %s names no stage before this one (write "
                                     "{STAGE.METRIC} with STAGE one of the earlier stages' names)",
                                     name, where);
        return cgq_yamldoc_fail (
            c->y, at,
            "'{%s}' in %s: {STAGE.METRIC} reads an earlier stage's metric, and "
            "this trial has no stages (write trial.stages, or a param name)",
            name, where);
    }
    if (tmpl[off] == '}')
        return cgq_yamldoc_fail (
            c->y, at, "stray '}' at byte %zu of %s (write }} for a literal brace)", off, where);
    if (!strchr (tmpl + off, '}'))
        return cgq_yamldoc_fail (
            c->y, at, "unterminated '{' at byte %zu of %s (write {{ for a literal brace)",
            off ? off - 1 : 0, where);
    cgq_buf_t names;
    cgq_buf_init (&names);
    for (size_t i = 0; i < spec->nparams && i < 12; i++)
        cgq_buf_printf (&names, "%s%s", i ? ", " : "", spec->params[i].name);
    if (spec->nparams > 12)
        cgq_buf_puts (&names, ", ...");
    if (!spec->nparams)
        cgq_buf_puts (&names, "none");
    cgq_yamldoc_fail (c->y, at,
                      "unknown placeholder '{%s}' in %s (params: %s; built-ins: job_id, trial_id, "
                      "spec_dir; write {{ for a literal brace)",
                      name, where, names.data);
    cgq_buf_fini (&names);
    return -1;
}

// s_check_stage_templates checks the templates of stage k (st), written at
// n. prefix is how messages name the stage's keys ("trial" or
// "trial.stages[1]").
static int
s_check_stage_templates (spec_ctx_t *c, const cgq_spec_t *spec, const cgq_stage_t *st, size_t k,
                         const spec_stage_nodes_t *n, const char *prefix)
{
    char where[200];
    if (st->command) {
        snprintf (where, sizeof where, "%s.command", prefix);
        if (s_check_tmpl (c, spec, k, n->cmd, st->command, where) < 0)
            return -1;
    }
    for (size_t i = 0; i < st->argc; i++) {
        snprintf (where, sizeof where, "%s.command[%zu]", prefix, i);
        const cgq_yamldoc_node_t *at = cgq_yamldoc_item (c->y, n->cmd, i);
        if (s_check_tmpl (c, spec, k, at, st->argv[i], where) < 0)
            return -1;
    }
    for (size_t i = 0; i < st->nenv; i++) {
        snprintf (where, sizeof where, "%s.env.%s", prefix, st->env_keys[i]);
        const cgq_yamldoc_node_t *at = cgq_yamldoc_val (c->y, n->env, i);
        if (s_check_tmpl (c, spec, k, at, st->env_vals[i], where) < 0)
            return -1;
    }
    for (size_t pi = 0; n->art && pi < cgq_yamldoc_npairs (n->art); pi++) {
        const cgq_yamldoc_node_t *key = cgq_yamldoc_key (c->y, n->art, pi);
        bool url = !strcmp (cgq_yamldoc_text (key), "url");
        snprintf (where, sizeof where, "%s.artifact.%s", prefix, cgq_yamldoc_text (key));
        if (s_check_tmpl (c, spec, k, cgq_yamldoc_val (c->y, n->art, pi),
                          url ? st->artifact_url : st->artifact_sha256, where) < 0)
            return -1;
    }
    return 0;
}

int
spec_check_templates (spec_ctx_t *c, const cgq_spec_t *spec, const cgq_yamldoc_node_t *cmd,
                   const cgq_yamldoc_node_t *env, const cgq_yamldoc_node_t *art,
                   const spec_stage_nodes_t *stages)
{
    // trial: itself (with stages: its env only, given to every stage: params only).
    spec_stage_nodes_t n = {cmd, env, art, cmd};
    if (s_check_stage_templates (c, spec, &spec->trial, 0, &n, "trial") < 0)
        return -1;
    for (size_t k = 0; k < spec->nstages; k++) {
        char prefix[64];
        snprintf (prefix, sizeof prefix, "trial.stages[%zu]", k);
        if (s_check_stage_templates (c, spec, &spec->stages[k], k, &stages[k], prefix) < 0)
            return -1;
    }
    return 0;
}

size_t
cgq_spec_nstages (const cgq_spec_t *self)
{
    return self->nstages ? self->nstages : 1;
}

const cgq_stage_t *
cgq_spec_stage (const cgq_spec_t *self, size_t k)
{
    if (!self->nstages)
        return k == 0 ? &self->trial : NULL;
    return k < self->nstages ? &self->stages[k] : NULL;
}

int
cgq_spec_stage_index (const cgq_spec_t *self, const char *name, size_t n)
{
    for (size_t k = 0; k < self->nstages; k++)
        if (self->stages[k].name && strlen (self->stages[k].name) == n &&
            !memcmp (self->stages[k].name, name, n))
            return (int) k;
    return -1;
}

bool
cgq_spec_stage_matches (const cgq_stage_t *stage, const json_t *tags)
{
    if (!stage || !stage->on || !json_is_object (tags))
        return false;
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *) stage->on, k, v)
    {
        json_t *have = json_object_get (tags, k);
        if (!json_is_string (have) || strcmp (json_string_value (have), json_string_value (v)))
            return false;
    }
    return true;
}

char *
cgq_spec_stage_on (const cgq_stage_t *stage, char *buf, size_t n)
{
    if (n)
        buf[0] = 0;
    if (!stage || !stage->on)
        return buf;
    size_t at = 0;
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *) stage->on, k, v)
    {
        if (at >= n)
            break;
        int w = snprintf (buf + at, n - at, "%s%s=%s", at ? ", " : "", k, json_string_value (v));
        at += w > 0 ? (size_t) w : 0;
    }
    return buf;
}
