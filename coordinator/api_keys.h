// api_keys: the order of a job's trials for the dashboard's trial list
// (api.c), computed from a sort key per trial instead of whole records.
//
// A cold sort of a 100,000-trial job by a param used to read nine fields of
// every trial, build a full record of each (params and metrics parsed by
// jansson, a dozen strings copied) and look the param up in a JSON object
// at every comparison: memory allocation was most of its time. Here each
// trial is read with HMGET of the state and the one or three fields the
// order needs, its key (a number, a string or missing) is taken out of
// them at once, the JSON ones by a small scanner that reads the one member
// without building anything (jansson only for the text it does not read:
// escapes, bytes above 0x7f, huge integers, deep nesting), and the keys, 32
// bytes a trial, are sorted. The order is the one api.c's comparator gives
// on full records (tests/integration/test_dashboard_api.py checks it
// against Python's, ties and missing values included).
#ifndef CGQ_API_KEYS_H
#define CGQ_API_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include "keyspace.h"
#include "store.h"

// What a trial list may be ordered by here (api.c orders by duration and
// attempts on whole records: they need a trial's stage runs).
typedef enum {
    API_BY_RANK,     // cgq results' order: ranked trials best first, then by id
    API_BY_ID,       // with a state filter (without one api.c reads the page alone)
    API_BY_VALUE,    // the objective's value
    API_BY_STATE,    // the state's name
    API_BY_STARTED,  // when it started
    API_BY_FINISHED, // when it finished
    API_BY_NODE,     // the node's id
    API_BY_PARAM,    // params.NAME
    API_BY_METRIC    // metrics.NAME
} api_by_t;

// api_keys_order reads every trial of job (ids 0 .. suggested-1) that
// exists (any field read present) and whose state is state (NULL: any),
// and sets *ids (caller frees; never NULL on success) and *n to their ids
// in the order by (name: the param or metric for API_BY_PARAM/_METRIC),
// as api.c's comparator orders whole records: ascending for sign +1, each
// key comparison reversed for -1; numbers before strings before objects
// and arrays, missing last either way; ties by id ascending (rank and id:
// all of it reversed for -1). -1 on a Redis error (nothing set).
int api_keys_order (cgq_store_t *store, const cgq_job_rec_t *job, api_by_t by, const char *name,
                    int sign, const char *state, uint64_t **ids, size_t *n);

// A member of a JSON object, as api.c sorts on it.
typedef enum {
    API_JSON_NUMBER,  // num
    API_JSON_BOOL,    // num 1 or 0
    API_JSON_STRING,  // str (len bytes, no NUL inside; borrowed from the text)
    API_JSON_OTHER,   // an object or an array
    API_JSON_MISSING, // null, no such member, or the text is no JSON object
} api_json_kind_t;

typedef struct {
    api_json_kind_t kind;
    double num;
    const char *str;
    size_t len;
} api_json_member_t;

// api_json_member finds member name of the JSON object in text as
// json_loads (text, JSON_DECODE_ANY) then json_object_get would (a text
// jansson rejects, or that is no object: missing). Returns 0 with *m set,
// or -1 when text holds what it does not read itself (a backslash, a byte
// below 0x20 or above 0x7f in a string, an integer of more than 18 digits,
// a real that overflows, nesting deeper than 32, name twice, or anything
// it would have to reject): then ask jansson.
int api_json_member (const char *text, const char *name, api_json_member_t *m);

#endif
