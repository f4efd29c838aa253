// allow: --allow-command prefixes.
#include "allow.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

// s_shell_tail_ok is true when text (the rest of a shell command after an
// allowed prefix) can only add words: no operator, redirection, command
// substitution or expansion outside single quotes.
static bool
s_shell_tail_ok (const char *text)
{
    char quote = 0;
    for (const char *p = text; *p; p++) {
        char ch = *p;
        if (quote == '\'') {
            if (ch == '\'')
                quote = 0;
            continue;
        }
        if (ch == '\\') {
            if (!p[1] || p[1] == '\n')
                return false;
            p++;
            continue;
        }
        if (quote == '"') {
            if (ch == '"')
                quote = 0;
            else if (ch == '$' || ch == '`')
                return false;
            continue;
        }
        if (ch == '\'' || ch == '"')
            quote = ch;
        else if (strchr (";&|<>()`$\n\r", ch))
            return false;
    }
    return quote == 0;
}

// s_prefix_matches: cmd starts with prefix at a word boundary. For a shell
// command an operator also ends a word (s_shell_tail_ok then judges it).
static bool
s_prefix_matches (const char *cmd, const char *prefix, size_t plen, bool shell)
{
    if (plen == 0 || strncmp (cmd, prefix, plen) != 0)
        return false;
    char next = cmd[plen], last = prefix[plen - 1];
    return next == 0 || next == ' ' || next == '\t' || last == '/' || last == ' '
           || (shell && strchr (";&|<>()`$\n\r", next));
}

char *
cgq_allow_check (const char *prefixes, const Cgq__Assign *a)
{
    if (!prefixes || !*prefixes)
        return NULL;
    bool shell = a->n_argv == 3 && a->argv[0] && !strcmp (a->argv[0], "/bin/sh") && a->argv[1]
                 && !strcmp (a->argv[1], "-c");
    cgq_buf_t cmd;
    cgq_buf_init (&cmd);
    if (shell)
        cgq_buf_puts (&cmd, a->argv[2] ? a->argv[2] : "");
    else
        for (size_t i = 0; i < a->n_argv; i++) {
            if (i)
                cgq_buf_puts (&cmd, " ");
            cgq_buf_puts (&cmd, a->argv[i] ? a->argv[i] : "");
        }
    const char *c = cmd.data ? cmd.data : "";
    char *why = NULL;
    bool prefix_ok = false;
    for (const char *p = prefixes; *p;) {
        const char *nl = strchr (p, '\n');
        size_t n = nl ? (size_t) (nl - p) : strlen (p);
        if (s_prefix_matches (c, p, n, shell)) {
            prefix_ok = true;
            if (!shell || s_shell_tail_ok (c + n))
                goto done;
        }
        p += n + (nl ? 1 : 0);
    }
    {
        char head[160];
        snprintf (head, sizeof head, "%.150s%s", c, strlen (c) > 150 ? "..." : "");
        cgq_buf_t list;
        cgq_buf_init (&list);
        for (const char *p = prefixes; *p;) {
            const char *nl = strchr (p, '\n');
            size_t n = nl ? (size_t) (nl - p) : strlen (p);
            cgq_buf_printf (&list, "%s'%.*s'", list.len ? ", " : "", (int) n, p);
            p += n + (nl ? 1 : 0);
        }
        if (prefix_ok)
            why = cgq_xasprintf ("command not allowed on this worker: '%s' goes on after its "
                                 "allowed prefix with a shell operator, substitution or "
                                 "expansion (--allow-command: %s)",
                                 head, list.data);
        else
            why = cgq_xasprintf ("command not allowed on this worker: '%s' does not start with "
                                 "any --allow-command prefix (allowed: %s)",
                                 head, list.data);
        cgq_buf_fini (&list);
    }
done:
    cgq_buf_fini (&cmd);
    return why;
}
