// json: JSON text the way cgq writes it everywhere (params in Redis, reports,
// the CLI's output): compact, keys in insertion order, and reals as the
// shortest text that reads back as the same double, so 0.1 stays 0.1 where
// jansson's json_dumps would write 0.10000000000000001.
#ifndef CGQ_JSON_H
#define CGQ_JSON_H

#include <jansson.h>
#include <stdbool.h>

#include "util.h"

// cgq_json_append writes v to b. spaced puts a space after ',' and ':' (for
// people); otherwise the text is compact. Integral reals keep a ".0" so they
// read back as reals; non-finite reals (not valid JSON) become null.
void cgq_json_append (cgq_buf_t *b, const json_t *v, bool spaced);

// cgq_json_dumps returns v as compact JSON text. Caller frees.
char *cgq_json_dumps (const json_t *v);

// cgq_json_flat_number reads text the way json_loads would, without building
// it, for the one common case: a JSON object whose members are all scalars
// (numbers, plain ASCII strings, true, false, null). Returns 1 when text is
// such an object and key is NULL or names a finite number member (the last
// one if it repeats), in *value; *nmembers counts the members (repeats
// included). Returns 0 for anything else (not an object, nested values,
// escapes, non-ASCII, numbers json_loads would refuse, key absent or not a
// finite number): then parse it with json_loads, which decides.
int cgq_json_flat_number (const char *text, const char *key, double *value, size_t *nmembers);

#endif
