// fuzz: helpers shared by the fuzz targets.
#include "fuzz.h"

#include <string.h>

#include "log.h"
#include "util.h"

char *
fuzz_str (const uint8_t *data, size_t size)
{
    char *s = cgq_xmalloc (size + 1);
    if (size)
        memcpy (s, data, size);
    s[size] = 0;
    return s;
}

void
fuzz_quiet (void)
{
    cgq_log_init ("fuzz", CGQ_LOG_ERROR, false);
}
