// fuzz_wire: Envelope decoding (common/wire.c), what every frame that reaches
// a coordinator or worker socket goes through first. A frame that decodes is
// encoded again, and the helpers that name and format a message must cope
// with whatever decoded.
//
// Encoding what decoded need not decode again: protobuf-c keeps unknown
// fields verbatim, and accepts on input a field number 0 written as a
// non-minimal varint (80 00) that it then writes as 00, which it refuses. cgq
// never forwards a message it decoded, so only the body is compared when the
// copy does decode.
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "wire.h"

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
    fuzz_quiet ();
    return 0;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    cgq_env_t *env = cgq_wire_decode (data, size, 0);
    if (!env)
        return 0;
    (void) cgq_wire_body_name (env);
    char buf[80];
    if (env->body_case == CGQ__ENVELOPE__BODY_RESULT && env->result->task)
        cgq_wire_task_str (buf, env->result->task);
    if (env->body_case == CGQ__ENVELOPE__BODY_PROGRESS && env->progress->task)
        cgq_wire_task_str (buf, env->progress->task);
    uint8_t *out;
    size_t len;
    if (cgq_wire_encode (env, &out, &len) != 0)
        abort (); // it decoded with a body: it must encode
    cgq_env_t *again = cgq_wire_decode (out, len, 0);
    if (again && again->body_case != env->body_case)
        abort ();
    cgq_wire_free (again);
    free (out);
    cgq_wire_free (env);
    return 0;
}
