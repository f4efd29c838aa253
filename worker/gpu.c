#include "gpu.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "log.h"
#include "util.h"

#define S_FAKE_GPU_MEMORY (16ull << 30)
#define S_MAX_GPUS 1024

static char *
s_smi_run_default (void)
{
    // stderr is dropped: a missing driver is normal on CPU-only hosts.
    FILE *f = popen ("nvidia-smi --query-gpu=index,name,memory.total "
                     "--format=csv,noheader,nounits 2>/dev/null",
                     "r");
    if (!f)
        return NULL;
    cgq_buf_t out;
    cgq_buf_init (&out);
    cgq_buf_read (&out, f); // a short read shows as bad output or a failed status
    int status = pclose (f);
    if (status == -1 || !WIFEXITED (status) || WEXITSTATUS (status) != 0) {
        cgq_buf_fini (&out);
        return NULL;
    }
    return cgq_buf_take (&out);
}

char *(*cgq_gpu_smi_run) (void) = s_smi_run_default;

void
cgq_gpu_list_init (cgq_gpu_list_t *list)
{
    list->items = NULL;
    list->count = 0;
}

void
cgq_gpu_list_fini (cgq_gpu_list_t *list)
{
    for (size_t i = 0; i < list->count; i++)
        free (list->items[i].name);
    free (list->items);
    list->items = NULL;
    list->count = 0;
}

void
cgq_gpu_list_add (cgq_gpu_list_t *list, uint32_t index, const char *name, uint64_t memory)
{
    list->items = cgq_xrealloc (list->items, (list->count + 1) * sizeof *list->items);
    cgq_gpu_t *g = &list->items[list->count++];
    g->index = index;
    g->name = cgq_xstrdup (name);
    g->memory = memory;
}

// s_trim returns s without leading and trailing blanks, in place.
static char *
s_trim (char *s)
{
    while (isspace ((unsigned char) *s))
        s++;
    size_t n = strlen (s);
    while (n > 0 && isspace ((unsigned char) s[n - 1]))
        s[--n] = 0;
    return s;
}

static int
s_parse_index (const char *s, uint32_t *out)
{
    uint64_t v;
    if (cgq_parse_u64 (s, &v) < 0 || v >= S_MAX_GPUS)
        return -1;
    *out = (uint32_t) v;
    return 0;
}

int
cgq_gpu_parse_smi (const char *text, cgq_gpu_list_t *list)
{
    char *copy = cgq_xstrdup (text);
    int parsed = 0;
    char *save = NULL;
    for (char *line = strtok_r (copy, "\n", &save); line; line = strtok_r (NULL, "\n", &save)) {
        line = s_trim (line);
        if (!*line)
            continue;
        // index, name, memory: the name may itself hold commas, so split at the
        // first and the last one.
        char *c1 = strchr (line, ',');
        char *c2 = strrchr (line, ',');
        if (!c1 || c1 == c2) {
            parsed = -1;
            break;
        }
        *c1 = 0;
        *c2 = 0;
        uint32_t index;
        if (s_parse_index (s_trim (line), &index) < 0) {
            parsed = -1;
            break;
        }
        const char *name = s_trim (c1 + 1);
        // memory.total is "[N/A]" on some devices: unknown, not an error.
        double mib = 0;
        if (cgq_parse_double (s_trim (c2 + 1), &mib) < 0 || !(mib >= 0 && mib < 1e12))
            mib = 0;
        cgq_gpu_list_add (list, index, *name ? name : "gpu", (uint64_t) (mib * 1024 * 1024));
        parsed++;
    }
    free (copy);
    return parsed;
}

static int
s_discover_auto (cgq_gpu_list_t *list)
{
    char *out = cgq_gpu_smi_run ();
    if (!out) {
        cgq_info ("--gpus auto: nvidia-smi is missing or failed; offering no GPUs");
        return 0;
    }
    cgq_gpu_list_t found;
    cgq_gpu_list_init (&found);
    if (cgq_gpu_parse_smi (out, &found) < 0) {
        cgq_info ("--gpus auto: cannot read nvidia-smi output; offering no GPUs");
        cgq_gpu_list_fini (&found);
    }
    else
        *list = found;
    free (out);
    return 0;
}

static int
s_discover_indices (const char *spec, cgq_gpu_list_t *list, char *err, size_t err_len)
{
    char *copy = cgq_xstrdup (spec);
    char *save = NULL;
    int rc = 0;
    for (char *tok = strtok_r (copy, ",", &save); tok; tok = strtok_r (NULL, ",", &save)) {
        uint32_t index;
        if (s_parse_index (s_trim (tok), &index) < 0) {
            snprintf (err, err_len,
                      "bad GPU index '%s' in --gpus '%s' (expected none, auto, fake:N or "
                      "a list of indices like 0,1)",
                      s_trim (tok), spec);
            rc = -1;
            break;
        }
        for (size_t i = 0; i < list->count; i++)
            if (list->items[i].index == index) {
                snprintf (err, err_len, "GPU %u is listed twice in --gpus '%s'", index, spec);
                rc = -1;
            }
        if (rc < 0)
            break;
        char name[32];
        snprintf (name, sizeof name, "gpu-%u", index);
        cgq_gpu_list_add (list, index, name, 0);
    }
    free (copy);
    if (rc == 0 && list->count == 0) {
        snprintf (err, err_len, "--gpus '%s' names no GPU (expected none, auto, fake:N or 0,1)",
                  spec);
        rc = -1;
    }
    if (rc < 0) {
        cgq_gpu_list_fini (list);
        return -1;
    }
    // Names and memory are a nicety: take them from nvidia-smi when it runs.
    char *out = cgq_gpu_smi_run ();
    if (out) {
        cgq_gpu_list_t found;
        cgq_gpu_list_init (&found);
        if (cgq_gpu_parse_smi (out, &found) > 0)
            for (size_t i = 0; i < list->count; i++)
                for (size_t j = 0; j < found.count; j++)
                    if (found.items[j].index == list->items[i].index) {
                        free (list->items[i].name);
                        list->items[i].name = cgq_xstrdup (found.items[j].name);
                        list->items[i].memory = found.items[j].memory;
                    }
        cgq_gpu_list_fini (&found);
        free (out);
    }
    return 0;
}

int
cgq_gpu_discover (const char *spec, cgq_gpu_list_t *list, char *err, size_t err_len)
{
    if (!spec || !*spec || !strcmp (spec, "none"))
        return 0;
    if (!strcmp (spec, "auto"))
        return s_discover_auto (list);
    if (!strncmp (spec, "fake:", 5)) {
        uint64_t n;
        if (cgq_parse_u64 (spec + 5, &n) < 0 || n > S_MAX_GPUS) {
            snprintf (err, err_len, "bad --gpus '%s' (expected fake:N with N from 0 to %d)",
                      spec, S_MAX_GPUS);
            return -1;
        }
        for (uint32_t i = 0; i < n; i++) {
            char name[32];
            snprintf (name, sizeof name, "fake-gpu-%u", i);
            cgq_gpu_list_add (list, i, name, S_FAKE_GPU_MEMORY);
        }
        return 0;
    }
    return s_discover_indices (spec, list, err, err_len);
}
