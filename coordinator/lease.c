// lease: acquire, renew and release cgq:leader with Lua scripts, each one
// atomic in Redis.
#include "lease.h"

#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "keyspace.h"

// KEYS: leader, epoch sequence. ARGV: id, lease ms.
static const char *S_ACQUIRE
    = "local v = redis.call('GET', KEYS[1]) "
      "if v then return {0, v} end "
      "local e = redis.call('INCR', KEYS[2]) "
      "local val = e .. ' ' .. ARGV[1] "
      "redis.call('SET', KEYS[1], val, 'PX', ARGV[2]) "
      "return {e, val}";

// KEYS: leader, epoch sequence. ARGV: value, lease ms, epoch.
static const char *S_RENEW
    = "local v = redis.call('GET', KEYS[1]) "
      "if v == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end "
      "if not v and redis.call('GET', KEYS[2]) == ARGV[3] then "
      "  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end "
      "return 0";

// KEYS: leader. ARGV: value.
static const char *S_RELEASE
    = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end "
      "return 0";

lease_rc_t
lease_acquire (cgq_store_t *store, const char *id, int64_t lease_ms, uint64_t *epoch, char *value,
               size_t value_len, char *holder, size_t holder_len)
{
    redisReply *r = cgq_store_command (store, "EVAL %s 2 %s %s %s %" PRId64, S_ACQUIRE,
                                       CGQ_KEY_LEADER, CGQ_KEY_EPOCH_SEQ, id, lease_ms);
    if (!r)
        return LEASE_ERROR;
    lease_rc_t rc = LEASE_ERROR;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2
        && r->element[0]->type == REDIS_REPLY_INTEGER && r->element[1]->type == REDIS_REPLY_STRING) {
        if (r->element[0]->integer > 0) {
            *epoch = (uint64_t) r->element[0]->integer;
            snprintf (value, value_len, "%s", r->element[1]->str);
            rc = LEASE_OURS;
        } else {
            snprintf (holder, holder_len, "%s", r->element[1]->str);
            rc = LEASE_HELD;
        }
    } else if (holder_len) {
        snprintf (holder, holder_len, "%s", r->type == REDIS_REPLY_ERROR ? r->str : "?");
    }
    freeReplyObject (r);
    return rc;
}

lease_rc_t
lease_renew (cgq_store_t *store, const char *value, uint64_t epoch, int64_t lease_ms)
{
    redisReply *r = cgq_store_command (store, "EVAL %s 2 %s %s %s %" PRId64 " %" PRIu64, S_RENEW,
                                       CGQ_KEY_LEADER, CGQ_KEY_EPOCH_SEQ, value, lease_ms, epoch);
    if (!r)
        return LEASE_ERROR;
    lease_rc_t rc = r->type == REDIS_REPLY_INTEGER ? (r->integer ? LEASE_OURS : LEASE_HELD)
                                                   : LEASE_ERROR;
    freeReplyObject (r);
    return rc;
}

void
lease_release (cgq_store_t *store, const char *value)
{
    redisReply *r = cgq_store_command (store, "EVAL %s 1 %s %s", S_RELEASE, CGQ_KEY_LEADER, value);
    if (r)
        freeReplyObject (r);
}
