// warm: the client's half of search.warm_start (cli/warm.c).
#ifndef CGQ_CLI_WARM_H
#define CGQ_CLI_WARM_H

#include <stddef.h>

#include "spec.h"
#include "store.h"

// cgq_warm_resolve reads the observations spec's search.warm_start names
// (the succeeded trials of its jobs from store, its points file relative to
// spec_path) into *json, a JSON array for SubmitJob.warm_json (caller frees;
// NULL without warm_start), printing notes on stderr. Returns CGQ_EXIT_OK,
// or an exit status with err set (a job that does not exist, one with no
// param in common, a bad line of the points file as FILE:LINE).
int cgq_warm_resolve (const cgq_spec_t *spec, const char *spec_path, cgq_store_t *store,
                      char **json, char *err, size_t errlen);

#endif
