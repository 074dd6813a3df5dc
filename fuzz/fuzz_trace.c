/* libFuzzer harness for the agents protocol parsers: the input is split at newlines and fed to
 * fl_trace_feed_line as event lines, and parsed whole as a case file with fl_case_parse. Any
 * bytes must give a trace whose JSON is valid and parses back to the same events, and either a
 * case whose request JSON and file JSON (with its "expect") parse back to the same case, or a
 * failure with a message — never a
 * crash, an out-of-bounds read or a leak.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude fuzz/fuzz_trace.c \
 *       src/agents/protocol/case.c src/agents/protocol/trace.c src/core/<all>.c -lcjson -lm
 */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "flare/agents/protocol.h"
#include "flare/agents/target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_trace(const uint8_t *data, size_t size) {
    fl_trace *t = fl_trace_new();
    if (!t) abort();
    int done = 0, seen_done = 0;
    const char *p = (const char *)data, *end = p + size;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        int events = t->n_events, problems = t->n_protocol;
        if (fl_trace_feed_line(t, p, len, 1.0, &done) != FL_OK) abort();
        /* a line adds at most one event, or one problem, or nothing (blank/unknown) */
        if (t->n_events - events + t->n_protocol - problems > 1) abort();
        if (done && (seen_done || t->events[t->n_events - 1].kind != FL_EV_DONE)) abort();
        seen_done |= done;
        p += len + 1;
    }
    if (t->n_protocol && !t->protocol_msg[0]) abort();
    /* the JSON of the trace is valid and describes the same events */
    char *js = fl_trace_to_json(t);
    cJSON *a = js ? cJSON_Parse(js) : NULL;
    if (!a || cJSON_GetArraySize(a) != t->n_events) abort();
    fl_trace *back = fl_trace_new();
    const cJSON *it;
    cJSON_ArrayForEach(it, a) {
        char *line = cJSON_PrintUnformatted(it);
        if (!line || fl_trace_feed_line(back, line, strlen(line), 1.0, &done) != FL_OK) abort();
        free(line);
    }
    char *js2 = fl_trace_to_json(back);
    if (back->n_protocol || !js2 || strcmp(js, js2)) abort();
    char *rep = fl_trace_report_json(NULL, t);
    cJSON *r = rep ? cJSON_Parse(rep) : NULL;
    if (!r) abort();
    cJSON_Delete(r);
    free(rep);
    free(js2);
    fl_trace_free(back);
    cJSON_Delete(a);
    free(js);
    fl_trace_free(t);
}

static void check_case(const uint8_t *data, size_t size) {
    fl_case *c = NULL;
    fl_err e;
    e.msg[0] = 0;
    if (fl_case_parse((const char *)data, size, "fuzz.json", &c, &e) != FL_OK) {
        if (c || !e.msg[0]) abort();
        return;
    }
    if (c->n_turns < 1) abort();
    char *js = fl_case_to_json(c);
    fl_case *d = NULL;
    if (!js || fl_case_parse(js, strlen(js), "again", &d, &e) != FL_OK) abort();
    char *js2 = fl_case_to_json(d);
    /* a round trip through the request JSON is stable once turns are valid UTF-8 */
    if (!js2 || strcmp(js, js2) || d->seed != c->seed || strcmp(d->id, c->id)) abort();
    free(js);
    free(js2);
    fl_case_free(d);
    /* the file form (a queue entry) keeps the expectations: it parses back to itself */
    js = fl_case_to_file_json(c);
    d = NULL;
    if (!js || fl_case_parse(js, strlen(js), "again", &d, &e) != FL_OK) abort();
    if (!c->expect != !d->expect) abort();
    js2 = fl_case_to_file_json(d);
    if (!js2 || strcmp(js, js2)) abort();
    free(js);
    free(js2);
    fl_case_free(d);
    fl_case_free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    check_trace(data, size);
    check_case(data, size);
    return 0;
}
