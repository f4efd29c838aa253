// keygen: `cgq keygen NAME [--dir DIR]` writes a CURVE key pair.
#include <stdio.h>
#include <string.h>

#include "auth.h"
#include "cli.h"

int
cgq_cmd_keygen (cgq_cli_t *cli)
{
    const char *dir = cgq_cli_opt (cli, "dir");
    if (!dir || !*dir)
        dir = ".";
    const char *name = cli->pos[0];
    char pub[41], err[1024];
    const char *nodes = cgq_cli_opt (cli, "nodes");
    if (nodes && !*nodes)
        nodes = NULL;
    bool none = nodes && !strcmp (nodes, "none"); // a user's key: may act as no node
    if (cgq_auth_keygen (dir, name, none ? "" : nodes, pub, err, sizeof err) < 0) {
        cgq_cli_error ("%s", err);
        return CGQ_EXIT_BAD;
    }
    printf ("%s/%s.key         public certificate (key %s)\n", dir, name, pub);
    printf ("%s/%s.key_secret  secret certificate, mode 0600: keep it on this machine\n", dir,
            name);
    if (none)
        printf ("node ids it may use: none (a CLI user's key)\n");
    else if (nodes)
        printf ("node ids it may use: %s\n", nodes);
    else
        printf ("node ids it may use: %s, %s-* (set others with --nodes)\n", name, name);
    return CGQ_EXIT_OK;
}
