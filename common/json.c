#include "json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void
cgq_json_append (cgq_buf_t *b, const json_t *v, bool spaced)
{
    const char *comma = spaced ? ", " : ",";
    const char *colon = spaced ? ": " : ":";
    switch (json_typeof (v)) {
    case JSON_OBJECT: {
        const char *key;
        json_t *item;
        bool first = true;
        cgq_buf_puts (b, "{");
        json_object_foreach ((json_t *) v, key, item)
        {
            json_t *k = json_string (key);
            char *text = k ? json_dumps (k, JSON_ENCODE_ANY) : NULL;
            json_decref (k);
            if (!text)
                continue; // a key that is not UTF-8, which json_loads refuses anyway
            if (!first)
                cgq_buf_puts (b, comma);
            first = false;
            cgq_buf_puts (b, text);
            cgq_buf_puts (b, colon);
            free (text);
            cgq_json_append (b, item, spaced);
        }
        cgq_buf_puts (b, "}");
        break;
    }
    case JSON_ARRAY:
        cgq_buf_puts (b, "[");
        for (size_t i = 0; i < json_array_size (v); i++) {
            if (i)
                cgq_buf_puts (b, comma);
            cgq_json_append (b, json_array_get (v, i), spaced);
        }
        cgq_buf_puts (b, "]");
        break;
    case JSON_REAL: {
        double d = json_real_value (v);
        if (!isfinite (d)) {
            cgq_buf_puts (b, "null");
            break;
        }
        char num[32];
        cgq_fmt_double (num, d);
        cgq_buf_puts (b, num);
        if (!strpbrk (num, ".eE"))
            cgq_buf_puts (b, ".0");
        break;
    }
    default: {
        char *text = json_dumps (v, JSON_ENCODE_ANY);
        cgq_buf_puts (b, text ? text : "null");
        free (text);
        break;
    }
    }
}

char *
cgq_json_dumps (const json_t *v)
{
    cgq_buf_t b;
    cgq_buf_init (&b);
    cgq_json_append (&b, v, false);
    return cgq_buf_take (&b);
}
