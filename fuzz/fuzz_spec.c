/* libFuzzer harness for the agent-spec loader (--spec spec.json): any byte string must either
 * load into a spec whose lookups are consistent, or fail with a message naming the input —
 * never crash, leak or read past the buffer (the buffer is not NUL-terminated here). */
#include <stdlib.h>
#include <string.h>

#include "flare/agents/spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fl_spec *s = NULL;
    fl_err e;
    e.msg[0] = 0;
    fl_status st = fl_spec_parse((const char *)data, size, "fuzz.json", &s, &e);
    if (st != FL_OK) {
        if (!e.msg[0] || s) abort();
        return 0;
    }
    /* every declared agent is found under its own name */
    for (int a = 0; a < s->n_agents; a++)
        if (fl_spec_agent_find(s, s->agents[a].name) != a) abort();
    if (fl_spec_edge_find(s, FL_SPEC_USER, s->entry) < 0) abort();
    fl_spec_free(s);
    return 0;
}
