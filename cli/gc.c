// cgq gc [JOB...] [--dry-run] [--store DIR]: deletes the checkpoints a job
// no longer needs (docs/operations.md, "Checkpoint stores").
//
// It reads the records in Redis (clients read Redis, they never write it)
// and deletes in the stores: a directory store where this machine sees it,
// an HTTP(S) store with DELETE (common/ckpt_store.h).
//
// - A job that ended: everything but its best trial's latest checkpoint goes
//   (the others' records, the unrecorded, the .tmp of a seal that died, the
//   leftovers of a prune), and trial and job directories left empty.
// - A running job: only the sealed checkpoints no record names that are
//   older than their trial's latest recorded one: records only move forward,
//   so none of those can ever be recorded or resumed from. A newer one may
//   be on its way to the coordinator, and a .tmp may be being sealed: both
//   are left alone.
//
// An HTTP store cannot be listed: there only recorded checkpoints are found.
// The job's checkpoint_bytes stays as the coordinator counts it (recorded
// checkpoints); gc says how many bytes it freed.
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckpt_store.h"
#include "cli.h"
#include "show.h"
#include "spec.h"
#include "template.h"
#include "util.h"
#include "view.h"

#define S_TMP_QUIET_S 120 // a .tmp of an ended job untouched this long is a dead seal's

typedef struct {
    bool dry;
    bool said_http;
    uint64_t freed, deleted, failed;
} s_gc_t;

// A recorded checkpoint: its name, where it is, its size.
typedef struct {
    char name[48];
    char *path;
    uint64_t size;
    uint32_t attempt;
    uint64_t n;
} s_rec_t;

typedef struct {
    s_rec_t *v;
    size_t n;
    bool has_latest;
    s_rec_t latest; // the trial's `checkpoint` (path borrowed from v or owned below)
} s_recs_t;

static void
s_recs_fini (s_recs_t *r)
{
    for (size_t i = 0; i < r->n; i++)
        free (r->v[i].path);
    free (r->v);
    if (r->has_latest)
        free (r->latest.path);
    memset (r, 0, sizeof *r);
}

static bool
s_rec_parse (json_t *o, s_rec_t *out)
{
    json_t *p = json_object_get (o, "path");
    if (!json_is_string (p))
        return false;
    const char *path = json_string_value (p);
    const char *slash = strrchr (path, '/');
    if (!slash || !cgq_ckpt_store_parse_name (slash + 1, &out->attempt, &out->n))
        return false;
    snprintf (out->name, sizeof out->name, "%s", slash + 1);
    out->path = cgq_xstrdup (path);
    json_t *s = json_object_get (o, "size");
    out->size =
        json_is_integer (s) && json_integer_value (s) > 0 ? (uint64_t)json_integer_value (s) : 0;
    return true;
}

// s_recs_load reads trial t's `checkpoint` and `checkpoints`.
static int
s_recs_load (cgq_store_t *store, uint64_t job, uint64_t t, s_recs_t *r)
{
    memset (r, 0, sizeof *r);
    char key[128];
    redisReply *rep = cgq_store_command (store, "HMGET %s checkpoint checkpoints",
                                         cgq_key_trial (key, sizeof key, job, t));
    if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements != 2) {
        if (rep)
            freeReplyObject (rep);
        return -1;
    }
    if (rep->element[0]->type == REDIS_REPLY_STRING) {
        json_t *o = json_loads (rep->element[0]->str, 0, NULL);
        if (o && s_rec_parse (o, &r->latest))
            r->has_latest = true;
        json_decref (o);
    }
    if (rep->element[1]->type == REDIS_REPLY_STRING) {
        json_t *a = json_loads (rep->element[1]->str, 0, NULL);
        size_t i;
        json_t *o;
        if (json_is_array (a)) {
            r->v = cgq_xcalloc (json_array_size (a) + 1, sizeof *r->v);
            json_array_foreach (a, i, o)
            {
                if (s_rec_parse (o, &r->v[r->n]))
                    r->n++;
            }
        }
        json_decref (a);
    }
    freeReplyObject (rep);
    return 0;
}

static uint64_t s_du_total;

static int
s_du_cb (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)path;
    (void)ftw;
    if (flag == FTW_F)
        s_du_total += (uint64_t)st->st_size;
    return 0;
}

static uint64_t
s_du (const char *path)
{
    s_du_total = 0;
    nftw (path, s_du_cb, 16, FTW_PHYS);
    return s_du_total;
}

// s_delete deletes (or would) one thing, with what it frees.
static void
s_delete (s_gc_t *g, const char *path, uint64_t bytes, const char *why)
{
    char size[32];
    cgq_show_bytes (size, sizeof size, (double)bytes);
    if (g->dry) {
        printf ("would delete %s (%s; %s)\n", path, size, why);
        g->freed += bytes;
        g->deleted++;
        return;
    }
    char err[1024] = "";
    int rc;
    if (cgq_ckpt_store_is_url (path) ||
        cgq_ckpt_store_parse_name (strrchr (path, '/') + 1, &(uint32_t){0}, &(uint64_t){0}))
        rc = cgq_ckpt_store_delete_checkpoint (path, err, sizeof err);
    else
        rc = cgq_ckpt_store_delete (path, err, sizeof err); // a .tmp, a .gone-
    if (rc < 0) {
        cgq_cli_error ("%s", err);
        g->failed++;
        return;
    }
    printf ("deleted %s (%s; %s)\n", path, size, why);
    g->freed += bytes;
    g->deleted++;
}

static bool
s_named (const s_recs_t *r, const char *name)
{
    for (size_t i = 0; i < r->n; i++)
        if (!strcmp (r->v[i].name, name))
            return true;
    return false;
}

// s_gc_dir sweeps one trial's directory store.
static void
s_gc_dir (s_gc_t *g, const char *tdir, bool ended, const s_recs_t *r, const char *keep)
{
    DIR *d = opendir (tdir);
    if (!d)
        return;
    struct dirent *e;
    double now = (double)time (NULL);
    while ((e = readdir (d))) {
        const char *name = e->d_name;
        if (!strcmp (name, ".") || !strcmp (name, ".."))
            continue;
        char *path = cgq_xasprintf ("%s/%s", tdir, name);
        uint32_t a;
        uint64_t n;
        struct stat st;
        if (lstat (path, &st) < 0) {
            free (path);
            continue;
        }
        if (cgq_ckpt_store_parse_name (name, &a, &n)) {
            if (keep && !strcmp (name, keep))
                ; // the best trial's latest
            else if (ended)
                s_delete (g, path, s_du (path), "the job ended; not its best trial's latest");
            else if (!s_named (r, name) && !(r->has_latest && !strcmp (r->latest.name, name)) &&
                     r->has_latest &&
                     (a < r->latest.attempt || (a == r->latest.attempt && n < r->latest.n)))
                s_delete (g, path, s_du (path), "no record names it, older than the latest");
        }
        else if (ended && S_ISDIR (st.st_mode) &&
                 (!strncmp (name, ".gone-", 6) ||
                  (strlen (name) > 4 && !strcmp (name + strlen (name) - 4, ".tmp")))) {
            if (now - (double)st.st_mtime >= S_TMP_QUIET_S)
                s_delete (g, path, s_du (path), "a seal or a deletion that did not finish");
            else
                printf ("left %s: written less than %d s ago\n", path, S_TMP_QUIET_S);
        }
        free (path);
    }
    closedir (d);
    if (ended && !g->dry) {
        // `latest` is for people: it goes with what it pointed at.
        char *link = cgq_xasprintf ("%s/latest", tdir);
        struct stat st;
        if (lstat (link, &st) == 0 && S_ISLNK (st.st_mode) && stat (link, &st) < 0)
            unlink (link);
        free (link);
        if (rmdir (tdir) == 0) {
            char *job = cgq_xstrdup (tdir);
            char *slash = strrchr (job, '/');
            if (slash) {
                *slash = 0;
                rmdir (job); // once its last trial's directory is gone
            }
            free (job);
        }
    }
}

static void
s_add_dir (char ***v, size_t *n, const char *dir)
{
    for (size_t i = 0; i < *n; i++)
        if (!strcmp ((*v)[i], dir))
            return;
    *v = cgq_xrealloc (*v, (*n + 1) * sizeof **v);
    (*v)[(*n)++] = cgq_xstrdup (dir);
}

static char *
s_dirname (const char *path)
{
    const char *slash = strrchr (path, '/');
    return slash ? cgq_xstrndup (path, (size_t)(slash - path)) : cgq_xstrdup (".");
}

static int
s_gc_job (s_gc_t *g, cgq_store_t *store, const cgq_job_rec_t *j, const char *extra)
{
    bool ended = cgq_job_rec_terminal (j);
    printf ("job %" PRIu64 " (%s, %s)%s\n", j->id, j->name, j->state,
            ended ? ""
                  : ": running, so only checkpoints no record names, older than their "
                    "trial's latest, are deleted");
    // The job's own store, as the coordinator renders it for its trials.
    char *spec_store = NULL;
    char err[1024];
    cgq_spec_t *spec = cgq_spec_parse (j->spec, strlen (j->spec), j->spec_path, err, sizeof err);
    if (spec && spec->checkpoint.store)
        spec_store = cgq_template_render (spec->checkpoint.store, NULL, j->id, 0, j->spec_dir, 0,
                                          err, sizeof err);
    cgq_spec_destroy (&spec);
    uint64_t freed0 = g->freed;
    for (uint64_t t = 0; t < j->suggested; t++) {
        s_recs_t r;
        if (s_recs_load (store, j->id, t, &r) < 0) {
            cgq_cli_error ("cannot read trial %" PRIu64 " of job %" PRIu64 " from Redis", t, j->id);
            free (spec_store);
            return CGQ_EXIT_FAIL;
        }
        const char *keep =
            ended && j->has_best && j->best_trial == t && r.has_latest ? r.latest.name : NULL;
        char **dirs = NULL;
        size_t ndirs = 0;
        for (size_t i = 0; i < r.n; i++) {
            char *dn = s_dirname (r.v[i].path);
            s_add_dir (&dirs, &ndirs, dn);
            free (dn);
        }
        if (r.has_latest) {
            char *dn = s_dirname (r.latest.path);
            s_add_dir (&dirs, &ndirs, dn);
            free (dn);
        }
        const char *stores[] = {spec_store, extra};
        for (size_t i = 0; i < 2; i++)
            if (stores[i] && *stores[i]) {
                char *td = cgq_ckpt_store_trial (stores[i], j->id, t);
                s_add_dir (&dirs, &ndirs, td);
                free (td);
            }
        for (size_t i = 0; i < ndirs; i++) {
            if (!cgq_ckpt_store_is_url (dirs[i])) {
                s_gc_dir (g, dirs[i], ended, &r, keep);
                continue;
            }
            // HTTP: no listing; the recorded ones of an ended job go.
            if (!g->said_http) {
                printf ("an HTTP store cannot be listed: only the checkpoints records name are "
                        "found there (%s)\n",
                        dirs[i]);
                g->said_http = true;
            }
            if (!ended)
                continue;
            const s_rec_t **all = cgq_xcalloc (r.n + 1, sizeof *all);
            size_t nall = 0;
            for (size_t k = 0; k < r.n; k++)
                all[nall++] = &r.v[k];
            if (r.has_latest && !s_named (&r, r.latest.name))
                all[nall++] = &r.latest;
            for (size_t k = 0; k < nall; k++) {
                char *dn = s_dirname (all[k]->path);
                bool here = !strcmp (dn, dirs[i]);
                free (dn);
                if (here && !(keep && !strcmp (all[k]->name, keep)))
                    s_delete (g, all[k]->path, all[k]->size,
                              "the job ended; not its best trial's latest");
            }
            free (all);
        }
        for (size_t i = 0; i < ndirs; i++)
            free (dirs[i]);
        free (dirs);
        s_recs_fini (&r);
    }
    free (spec_store);
    if (j->checkpoint_bytes && g->freed > freed0 && ended) {
        char b[32];
        cgq_show_bytes (b, sizeof b, (double)j->checkpoint_bytes);
        printf ("job %" PRIu64 ": its checkpoint_bytes (%s) counts the checkpoints recorded "
                "when it ran, not what is left in the store\n",
                j->id, b);
    }
    return CGQ_EXIT_OK;
}

int
cgq_cmd_gc (cgq_cli_t *cli)
{
    s_gc_t g = {.dry = cgq_cli_flag (cli, "dry-run")};
    const char *extra = cgq_cli_opt (cli, "store");
    char *extra_abs = NULL;
    if (extra && *extra && extra[0] != '/' && !cgq_ckpt_store_is_url (extra)) {
        char cwd[4096];
        if (!getcwd (cwd, sizeof cwd)) {
            cgq_cli_error ("cannot resolve --store %s: %s", extra, strerror (errno));
            return CGQ_EXIT_FAIL;
        }
        extra = extra_abs = cgq_xasprintf ("%s/%s", cwd, extra);
    }
    uint64_t *ids = NULL;
    size_t nids = 0;
    for (int i = 0; i < cli->npos; i++) {
        ids = cgq_xrealloc (ids, (nids + 1) * sizeof *ids);
        if (cgq_cli_parse_id ("job", cli->pos[i], &ids[nids++]) < 0) {
            free (ids);
            free (extra_abs);
            return CGQ_EXIT_BAD;
        }
    }
    cgq_store_t *store = NULL;
    int rc = cgq_cli_store (cli, &store);
    if (rc != CGQ_EXIT_OK) {
        free (ids);
        free (extra_abs);
        return rc;
    }
    if (!nids) {
        redisReply *r = cgq_store_command (store, "ZRANGE %s 0 -1", CGQ_KEY_JOBS);
        for (size_t i = 0; r && r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
            uint64_t id;
            if (r->element[i]->type == REDIS_REPLY_STRING &&
                cgq_parse_u64 (r->element[i]->str, &id) == 0) {
                ids = cgq_xrealloc (ids, (nids + 1) * sizeof *ids);
                ids[nids++] = id;
            }
        }
        if (r)
            freeReplyObject (r);
    }
    for (size_t i = 0; i < nids && rc == CGQ_EXIT_OK; i++) {
        cgq_job_rec_t *j = NULL;
        char err[512];
        int vr = cgq_view_job_load (store, ids[i], &j, err, sizeof err);
        if (vr != CGQ_VIEW_OK) {
            if (vr == CGQ_VIEW_ABSENT)
                cgq_cli_error ("no job %" PRIu64 " in Redis (cgq status lists the jobs)", ids[i]);
            else
                cgq_cli_error ("%s", err);
            rc = vr == CGQ_VIEW_ABSENT ? CGQ_EXIT_BAD : CGQ_EXIT_FAIL;
            break;
        }
        rc = s_gc_job (&g, store, j, extra);
        cgq_job_rec_destroy (&j);
    }
    char b[32];
    cgq_show_bytes (b, sizeof b, (double)g.freed);
    printf ("%s %" PRIu64 " bytes (%s) in %" PRIu64 " checkpoint(s) and leftovers%s\n",
            g.dry ? "would free" : "freed", g.freed, b, g.deleted,
            g.failed ? "; some could not be deleted (above)" : "");
    cgq_store_destroy (&store);
    free (ids);
    free (extra_abs);
    if (rc == CGQ_EXIT_OK && g.failed)
        rc = CGQ_EXIT_FAIL;
    return rc;
}
