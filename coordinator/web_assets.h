// web_assets: the dashboard's files (web/), compiled in. The table is
// generated at build time from web/ by web/embed.cmake (a build output,
// never committed), so the coordinator serves exactly the files it was
// built with and needs no data directory.
#ifndef CGQ_WEB_ASSETS_H
#define CGQ_WEB_ASSETS_H

#include <stddef.h>

typedef struct {
    const char *name; // the file name under web/, e.g. "app.js"
    const unsigned char *data;
    size_t len;
} cgq_web_asset_t;

extern const cgq_web_asset_t cgq_web_assets[];
extern const size_t cgq_web_nassets;

#endif
