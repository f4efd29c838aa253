// coord: the coordinator struct's lifetime.
#include "coord.h"

#include <string.h>

#include "jobs.h"
#include "metrics.h"
#include "notify.h"
#include "nodes.h"
#include "outbox.h"

void
coord_init (coord_t *c, const coord_cfg_t *cfg)
{
    memset (c, 0, sizeof *c);
    if (cfg)
        c->cfg = *cfg;
    c->node_index = zhashx_new ();
    metrics_hist_init_dispatch (&c->hist_dispatch);
    metrics_hist_init_redis (&c->hist_redis);
}

void
coord_fini (coord_t *c)
{
    metrics_stop (c);
    notify_fini (c);
    jobs_destroy_all (c);
    nodes_destroy_all (c);
    zhashx_destroy (&c->node_index);
    outbox_free (c);
    for (size_t i = 0; i < c->npoke; i++)
        free (c->poke[i]);
    free (c->poke);
    c->poke = NULL;
    c->npoke = 0;
    cgq_store_destroy (&c->store);
}
