/* libFuzzer harness for the parsers of LLM replies, text that comes from a model over the
 * network: the generator's {"instructions": [...]} (fl_llm_gen_parse, fenced or not) and the
 * judge's verdict (fl_llm_verdict_parse). Each must give a well-formed result or -1 — never
 * crash, leak or return cases without turns. */
#include <stdlib.h>
#include <string.h>

#include "flare/agents/llm.h"
#include "flare/agents/protocol.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *reply = malloc(size + 1); /* replies arrive as C strings */
    if (!reply) abort();
    memcpy(reply, data, size);
    reply[size] = 0;
    fl_case **cs = NULL;
    int n = fl_llm_gen_parse(reply, &cs);
    if (n < -1 || n == 0) abort();
    for (int i = 0; i < n; i++) {
        if (!cs[i] || cs[i]->n_turns < 1) abort();
        for (int t = 0; t < cs[i]->n_turns; t++)
            if (!cs[i]->turns[t]) abort();
        fl_case_free(cs[i]);
    }
    if (n > 0) free(cs);
    fl_llm_verdict v;
    memset(&v, 0xa5, sizeof v);
    if (fl_llm_verdict_parse(reply, &v) == 0) {
        if (!(v.confidence >= 0 && v.confidence <= 1)) abort();
        if (v.categories >> FL_JUDGE_CAT_COUNT_) abort();
        if (strnlen(v.reason, sizeof v.reason) >= sizeof v.reason) abort();
    }
    free(reply);
    return 0;
}
