// recovery: at start-up, rebuilds from Redis the jobs that were running and
// their active trials (cgq:job:{J}:active, never a scan), and marks the nodes
// a previous coordinator saw alive as unknown until they say Hello. Running
// trials wait for their node to report them (adoption) until a deadline.
#ifndef CGQ_RECOVERY_H
#define CGQ_RECOVERY_H

#include "coord.h"

// recovery_nodes marks nodes last seen alive as "unknown" and lists them in
// c->poke (session_poke). Best effort.
void recovery_nodes (coord_t *c);

// recovery_jobs loads every running job. Returns how many were resumed, or
// -1 if Redis could not be read (errstr of c->store says why). A job whose
// spec no longer parses is marked finished with an error, not resumed.
int recovery_jobs (coord_t *c);

#endif
