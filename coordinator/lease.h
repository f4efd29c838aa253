// lease: which coordinator writes. Any number of cgq-coordinator processes may
// run against one Redis; the one holding the lease (key cgq:leader, value
// "EPOCH ID", with a time to live) is the leader and alone writes. The others
// are standbys: they wait, and take the lease (with a new epoch from
// cgq:seq:epoch) when it expires. The leader renews it every lease/3; its
// writes are fenced by it (cgq_store_set_fence), so a leader that was paused
// past its lease can never overwrite its successor's state.
#ifndef CGQ_LEASE_H
#define CGQ_LEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"

typedef enum {
    LEASE_ERROR = -1, // Redis could not be asked (see cgq_store_errstr)
    LEASE_HELD = 0,   // another coordinator holds it (holder says who)
    LEASE_OURS = 1,   // acquired, or renewed
} lease_rc_t;

// lease_acquire takes the lease if nobody holds it: a new epoch, and the
// value "EPOCH ID" written with a time to live of lease_ms. On LEASE_OURS
// *epoch and value (the key's value, for lease_renew and the fence) are set;
// on LEASE_HELD holder gets the current value.
lease_rc_t lease_acquire (cgq_store_t *store, const char *id, int64_t lease_ms, uint64_t *epoch,
                          char *value, size_t value_len, char *holder, size_t holder_len);

// lease_renew extends our lease by lease_ms. An expired lease is taken back
// when nobody took it meanwhile (the epoch sequence is still ours). Returns
// LEASE_HELD when another coordinator has taken over: stop writing.
lease_rc_t lease_renew (cgq_store_t *store, const char *value, uint64_t epoch, int64_t lease_ms);

// lease_release deletes the lease if it is still ours (a clean shutdown: a
// standby takes over at once instead of after the time to live).
void lease_release (cgq_store_t *store, const char *value);

#endif
