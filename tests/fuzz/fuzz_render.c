// fuzz_render: the template renderer (common/template.c): trial.command, env and
// artifact templates are written in a spec and rendered by the coordinator
// for every trial, shell-quoted or not. The first byte picks the shell mode,
// the rest is the template; the params are fixed and cover every kind of
// value (string, integer, real, bool, null, list, mapping, a name with a dot).
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "template.h"

static json_t *s_params;

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
    fuzz_quiet ();
    s_params = json_pack ("{s:s, s:i, s:f, s:b, s:n, s:[i,s], s:{s:i}, s:s, s:s}", "name",
                          "it's $(rm -rf /)", "n", 42, "lr", 0.001, "flag", 1, "none", "list",
                          1, "two", "map", "k", 3, "a.b", "dotted", "empty", "");
    return 0;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    int shell = data[0] & 1;
    char *tmpl = fuzz_str (data + 1, size - 1);
    char err[256];
    free (cgq_template_render (tmpl, s_params, 18446744073709551615ull, 0, "/a dir/'q'", shell, err,
                               sizeof err));
    free (tmpl);
    return 0;
}
