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
            // A key of printable ASCII without '"' or '\\' (nearly all) is
            // written as it is; others as jansson escapes them.
            const char *q = key;
            while (*q >= 0x20 && *q < 0x7f && *q != '"' && *q != '\\')
                q++;
            char *text = NULL;
            if (*q) {
                json_t *k = json_string (key);
                text = k ? json_dumps (k, JSON_ENCODE_ANY) : NULL;
                json_decref (k);
                if (!text)
                    continue; // a key that is not UTF-8, which json_loads refuses anyway
            }
            if (!first)
                cgq_buf_puts (b, comma);
            first = false;
            if (text)
                cgq_buf_puts (b, text);
            else {
                cgq_buf_append (b, "\"", 1);
                cgq_buf_append (b, key, (size_t) (q - key));
                cgq_buf_append (b, "\"", 1);
            }
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

// s_ws skips JSON whitespace.
static const char *
s_ws (const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    return p;
}

// s_plain_string reads a string with no escapes, control or non-ASCII
// bytes, p at its opening quote. Returns the end of its text (the closing
// quote), NULL for anything else.
static const char *
s_plain_string (const char *p)
{
    if (*p != '"')
        return NULL;
    for (p++; *p != '"'; p++)
        if (*p == '\\' || (unsigned char) *p < 0x20 || (unsigned char) *p >= 0x80)
            return NULL;
    return p;
}

// s_number reads a JSON number at p (RFC 8259 grammar). Returns its end,
// NULL if it is not one or might be one json_loads refuses: an integer
// perhaps too large for json_int_t, a real whose magnitude might pass
// DBL_MAX (jansson fails on those; these few are left to it).
static const char *
s_number (const char *p)
{
    const char *q = p;
    if (*q == '-')
        q++;
    if (*q == '0')
        q++;
    else if (*q >= '1' && *q <= '9')
        while (*q >= '0' && *q <= '9')
            q++;
    else
        return NULL;
    long digits = (long) (q - p), exp = 0;
    bool real = false;
    if (*q == '.') {
        real = true;
        q++;
        if (!(*q >= '0' && *q <= '9'))
            return NULL;
        while (*q >= '0' && *q <= '9')
            q++;
    }
    if (*q == 'e' || *q == 'E') {
        real = true;
        q++;
        bool neg = *q == '-';
        if (*q == '+' || *q == '-')
            q++;
        if (!(*q >= '0' && *q <= '9'))
            return NULL;
        for (; *q >= '0' && *q <= '9'; q++)
            if (exp < 100000)
                exp = exp * 10 + (*q - '0');
        if (neg)
            exp = -exp;
    }
    if (real ? digits + exp > 300 : digits > 18)
        return NULL;
    return q;
}

int
cgq_json_flat_number (const char *text, const char *key, double *value, size_t *nmembers)
{
    size_t klen = key ? strlen (key) : 0, n = 0;
    bool found = false;
    double v = NAN;
    const char *p = s_ws (text);
    if (*p++ != '{')
        return 0;
    p = s_ws (p);
    if (*p == '}')
        p++;
    else
        for (;;) {
            const char *kend = s_plain_string (p);
            if (!kend)
                return 0;
            bool mine = key && (size_t) (kend - p - 1) == klen && !memcmp (p + 1, key, klen);
            p = s_ws (kend + 1);
            if (*p++ != ':')
                return 0;
            p = s_ws (p);
            bool number = false;
            const char *end;
            if (*p == '"')
                end = (end = s_plain_string (p)) ? end + 1 : NULL;
            else if (!strncmp (p, "true", 4))
                end = p + 4;
            else if (!strncmp (p, "false", 5))
                end = p + 5;
            else if (!strncmp (p, "null", 4))
                end = p + 4;
            else
                number = (end = s_number (p)) != NULL;
            if (!end)
                return 0;
            if (mine) {
                found = number;
                v = number ? strtod (p, NULL) : NAN;
            }
            n++;
            p = s_ws (end);
            if (*p == '}') {
                p++;
                break;
            }
            if (*p++ != ',')
                return 0;
            p = s_ws (p);
        }
    if (*s_ws (p))
        return 0; // something after the object
    if (key && !(found && isfinite (v)))
        return 0;
    *value = v;
    *nmembers = n;
    return 1;
}
