// map: uint64 -> pointer, open addressing with linear probing. Trials are
// looked up by id on every result, so this must not scan.
#include <stdlib.h>
#include <string.h>

#include "coord.h"

static char s_tomb;
#define MAP_TOMB ((void *) &s_tomb)

static size_t
s_hash (uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (size_t) k;
}

void
map_init (map_t *m)
{
    m->cap = 16;
    m->len = m->used = 0;
    m->keys = cgq_xcalloc (m->cap, sizeof *m->keys);
    m->vals = cgq_xcalloc (m->cap, sizeof *m->vals);
}

void
map_fini (map_t *m)
{
    free (m->keys);
    free (m->vals);
    memset (m, 0, sizeof *m);
}

static void
s_grow (map_t *m, size_t cap)
{
    uint64_t *keys = m->keys;
    void **vals = m->vals;
    size_t old = m->cap;
    m->cap = cap;
    m->keys = cgq_xcalloc (cap, sizeof *m->keys);
    m->vals = cgq_xcalloc (cap, sizeof *m->vals);
    m->len = m->used = 0;
    for (size_t i = 0; i < old; i++)
        if (vals[i] && vals[i] != MAP_TOMB)
            map_put (m, keys[i], vals[i]);
    free (keys);
    free (vals);
}

void *
map_get (const map_t *m, uint64_t key)
{
    size_t mask = m->cap - 1;
    for (size_t i = s_hash (key) & mask;; i = (i + 1) & mask) {
        if (!m->vals[i])
            return NULL;
        if (m->vals[i] != MAP_TOMB && m->keys[i] == key)
            return m->vals[i];
    }
}

void
map_put (map_t *m, uint64_t key, void *val)
{
    if ((m->used + 1) * 4 >= m->cap * 3)
        s_grow (m, m->len * 2 >= m->cap / 2 ? m->cap * 2 : m->cap);
    size_t mask = m->cap - 1;
    size_t tomb = SIZE_MAX;
    for (size_t i = s_hash (key) & mask;; i = (i + 1) & mask) {
        if (!m->vals[i]) {
            size_t at = tomb != SIZE_MAX ? tomb : i;
            if (tomb == SIZE_MAX)
                m->used++;
            m->keys[at] = key;
            m->vals[at] = val;
            m->len++;
            return;
        }
        if (m->vals[i] == MAP_TOMB) {
            if (tomb == SIZE_MAX)
                tomb = i;
        }
        else if (m->keys[i] == key) {
            m->vals[i] = val;
            return;
        }
    }
}

void *
map_del (map_t *m, uint64_t key)
{
    size_t mask = m->cap - 1;
    for (size_t i = s_hash (key) & mask;; i = (i + 1) & mask) {
        if (!m->vals[i])
            return NULL;
        if (m->vals[i] != MAP_TOMB && m->keys[i] == key) {
            void *v = m->vals[i];
            m->vals[i] = MAP_TOMB;
            m->len--;
            return v;
        }
    }
}

void *
map_next (const map_t *m, size_t *pos, uint64_t *key)
{
    for (; *pos < m->cap; (*pos)++) {
        void *v = m->vals[*pos];
        if (v && v != MAP_TOMB) {
            if (key)
                *key = m->keys[*pos];
            (*pos)++;
            return v;
        }
    }
    return NULL;
}
