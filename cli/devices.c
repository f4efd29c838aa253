// devices: `cgq devices` lists the devices of device runners as the
// coordinator wrote them (cgq:devices, cgq:device:ID); `cgq devices enable ID`
// asks the coordinator to return a quarantined device to service.
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ctl.h"
#include "keyspace.h"
#include "util.h"

#define S_COLS 7

static int
s_cmp_rec (const void *a, const void *b)
{
    const cgq_device_rec_t *x = *(cgq_device_rec_t *const *) a, *y = *(cgq_device_rec_t *const *) b;
    return strcmp (x->id, y->id);
}

int
cgq_devices_load (cgq_store_t *store, cgq_device_rec_t ***out, size_t *n, char *err, size_t errlen)
{
    *out = NULL;
    *n = 0;
    redisReply *ids = cgq_store_command (store, "SMEMBERS %s", CGQ_KEY_DEVICES);
    if (!ids || ids->type != REDIS_REPLY_ARRAY) {
        snprintf (err, errlen, "cannot read %s: %s", CGQ_KEY_DEVICES,
                  ids && ids->str ? ids->str : cgq_store_errstr (store));
        if (ids)
            freeReplyObject (ids);
        return -1;
    }
    cgq_device_rec_t **recs = cgq_xcalloc (ids->elements + 1, sizeof *recs);
    int rc = 0;
    for (size_t i = 0; i < ids->elements; i++) {
        char key[300];
        cgq_key_device (key, sizeof key, ids->element[i]->str);
        if (cgq_store_append (store, "HGETALL %s", key) < 0)
            rc = -1;
    }
    for (size_t i = 0; i < ids->elements; i++) {
        redisReply *h = rc == 0 ? cgq_store_get_reply (store) : NULL;
        if (!h) {
            rc = -1;
            continue;
        }
        if (h->type == REDIS_REPLY_ARRAY && h->elements)
            recs[(*n)++] = cgq_device_rec_from (ids->element[i]->str, h);
        freeReplyObject (h);
    }
    freeReplyObject (ids);
    if (rc < 0) {
        snprintf (err, errlen, "cannot read the devices: %s", cgq_store_errstr (store));
        for (size_t i = 0; i < *n; i++)
            cgq_device_rec_destroy (&recs[i]);
        free (recs);
        *n = 0;
        return -1;
    }
    qsort (recs, *n, sizeof *recs, s_cmp_rec);
    *out = recs;
    return 0;
}

// s_tags writes a tags JSON object as "device=odroid-xu4,os=tizen".
static char *
s_tags (const char *json)
{
    json_t *o = json_loads (json, 0, NULL);
    cgq_buf_t b;
    cgq_buf_init (&b);
    const char *k;
    json_t *v;
    if (json_is_object (o))
        json_object_foreach (o, k, v)
        {
            cgq_buf_printf (&b, "%s%s=%s", b.len ? "," : "", k,
                            json_is_string (v) ? json_string_value (v) : "?");
        }
    json_decref (o);
    char *s = cgq_xstrdup (b.len ? b.data : "-");
    cgq_buf_fini (&b);
    return s;
}

static void
s_print_table (cgq_device_rec_t **recs, size_t n)
{
    const char *heads[S_COLS] = {"id", "node", "state", "task", "failures", "tags", "last error"};
    char *(*cells)[S_COLS] = cgq_xcalloc (n + 1, sizeof *cells);
    size_t width[S_COLS];
    for (int c = 0; c < S_COLS; c++)
        width[c] = strlen (heads[c]);
    for (size_t i = 0; i < n; i++) {
        const cgq_device_rec_t *d = recs[i];
        cells[i][0] = cgq_xstrdup (d->id);
        cells[i][1] = cgq_xstrdup (*d->node ? d->node : "-");
        cells[i][2] = cgq_xstrdup (*d->state ? d->state : "?");
        cells[i][3] = cgq_xstrdup (*d->task ? d->task : "-");
        cells[i][4] = cgq_xasprintf ("%" PRIu64, d->failures);
        cells[i][5] = s_tags (d->tags);
        cells[i][6] = cgq_xasprintf ("%.60s", *d->last_error ? d->last_error : "-");
        for (int c = 0; c < S_COLS; c++)
            if (strlen (cells[i][c]) > width[c])
                width[c] = strlen (cells[i][c]);
    }
    for (int c = 0; c < S_COLS; c++)
        printf ("%-*s%s", c == S_COLS - 1 ? 0 : (int) width[c], heads[c],
                c == S_COLS - 1 ? "\n" : "  ");
    for (size_t i = 0; i < n; i++)
        for (int c = 0; c < S_COLS; c++) {
            printf ("%-*s%s", c == S_COLS - 1 ? 0 : (int) width[c], cells[i][c],
                    c == S_COLS - 1 ? "\n" : "  ");
            free (cells[i][c]);
        }
    free (cells);
}

static void
s_print_json (cgq_device_rec_t **recs, size_t n)
{
    json_t *arr = json_array ();
    for (size_t i = 0; i < n; i++) {
        const cgq_device_rec_t *d = recs[i];
        json_t *tags = json_loads (d->tags, 0, NULL);
        json_array_append_new (
            arr, json_pack ("{s:s, s:s?, s:s, s:s?, s:I, s:b, s:o, s:s?}", "id", d->id, "node",
                            *d->node ? d->node : NULL, "state", d->state, "task",
                            *d->task ? d->task : NULL, "failures", (json_int_t) d->failures,
                            "quarantined", d->quarantined, "tags",
                            json_is_object (tags) ? tags : json_object (), "last_error",
                            *d->last_error ? d->last_error : NULL));
        if (tags && !json_is_object (tags))
            json_decref (tags);
    }
    char *s = json_dumps (arr, JSON_COMPACT);
    printf ("%s\n", s);
    free (s);
    json_decref (arr);
}

// s_enable sends EnableDevice for id and prints the coordinator's answer.
static int
s_enable (const cgq_cli_t *cli, const char *id)
{
    Cgq__EnableDevice ed = CGQ__ENABLE_DEVICE__INIT;
    ed.device_id = (char *) id;
    cgq_env_t env = CGQ__ENVELOPE__INIT;
    env.body_case = CGQ__ENVELOPE__BODY_ENABLE_DEVICE;
    env.enable_device = &ed;
    cgq_env_t *reply = NULL;
    char msg[1024];
    int rc = cgq_ctl_request (cli->coordinator, &env, CGQ_CTL_TIMEOUT_MS, &reply, msg, sizeof msg);
    if (rc != CGQ_EXIT_OK) {
        cgq_cli_error ("%s", msg);
        return rc;
    }
    if (reply->body_case != CGQ__ENVELOPE__BODY_REPLY) {
        cgq_cli_error ("the coordinator at %s answered EnableDevice with '%s' instead of a reply",
                       cli->coordinator, cgq_wire_body_name (reply));
        rc = CGQ_EXIT_FAIL;
    }
    else {
        int code = reply->reply->code;
        const char *text = reply->reply->message && *reply->reply->message
                               ? reply->reply->message
                               : "no message";
        if (code == 0)
            printf ("%s\n", text);
        else
            cgq_cli_error ("%s", text);
        rc = code == 0 ? CGQ_EXIT_OK : code == 2 ? CGQ_EXIT_BAD : CGQ_EXIT_FAIL;
    }
    cgq_wire_free (reply);
    return rc;
}

int
cgq_cmd_devices (cgq_cli_t *cli)
{
    if (cli->npos > 0) {
        if (strcmp (cli->pos[0], "enable") || cli->npos != 2) {
            cgq_cli_error ("expected cgq devices, or cgq devices enable ID (not '%s')",
                           cli->pos[0]);
            return CGQ_EXIT_BAD;
        }
        return s_enable (cli, cli->pos[1]);
    }
    const char *format = cgq_cli_opt (cli, "format");
    if (format && strcmp (format, "table") && strcmp (format, "json")) {
        cgq_cli_error ("unknown --format '%s' (expected table or json)", format);
        return CGQ_EXIT_BAD;
    }
    cgq_store_t *store = NULL;
    int rc = cgq_cli_store (cli, &store);
    if (rc != CGQ_EXIT_OK)
        return rc;
    cgq_device_rec_t **recs = NULL;
    size_t n = 0;
    char err[512];
    if (cgq_devices_load (store, &recs, &n, err, sizeof err) < 0) {
        cgq_cli_error ("%s", err);
        cgq_store_destroy (&store);
        return CGQ_EXIT_FAIL;
    }
    if (format && !strcmp (format, "json"))
        s_print_json (recs, n);
    else if (n == 0)
        printf ("no device runner has declared a device yet (start one with cgq-device-runner "
                "--config runner.yaml)\n");
    else
        s_print_table (recs, n);
    for (size_t i = 0; i < n; i++)
        cgq_device_rec_destroy (&recs[i]);
    free (recs);
    cgq_store_destroy (&store);
    return CGQ_EXIT_OK;
}
