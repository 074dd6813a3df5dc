/* libFuzzer harness for OTLP/JSON ingestion: any bytes given to fl_otlp_parse either fail with
 * a message naming the source, or give spans with well-formed ids that the span store holds
 * and gives back whole, and that fl_otlp_map turns into events whose JSON is valid and reads
 * back through the protocol parser without a problem — never a crash, an out-of-bounds read
 * or a leak. Each line is also parsed on its own, as --otlp-file reads a JSON-lines file.
 *
 *   FUZZ_SECONDS=60 fuzz/smoke.sh   (builds every fuzz/fuzz_*.c with clang, ASan+UBSan)
 */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "flare/agents/otlp.h"
#include "flare/agents/target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_events(const fl_trace *t) {
    char *js = fl_trace_to_json(t);
    cJSON *a = js ? cJSON_Parse(js) : NULL;
    if (!a || cJSON_GetArraySize(a) != t->n_events) abort();
    fl_trace *back = fl_trace_new();
    const cJSON *it;
    int done;
    cJSON_ArrayForEach(it, a) {
        char *line = cJSON_PrintUnformatted(it);
        if (!line || fl_trace_feed_line(back, line, strlen(line), 0, &done) != FL_OK) abort();
        free(line);
    }
    if (back->n_protocol || back->n_events != t->n_events) abort();
    if (t->tokens_in < 0 || t->tokens_out < 0) abort();
    fl_trace_free(back);
    cJSON_Delete(a);
    free(js);
}

static void check_request(const char *p, size_t len) {
    fl_otlp_span *sp = NULL;
    int n = -1;
    fl_err e;
    e.msg[0] = 0;
    if (fl_otlp_parse(p, len, "fuzz", &sp, &n, &e) != FL_OK) {
        if (sp || n || strncmp(e.msg, "fuzz", 4)) abort();
        return;
    }
    for (int i = 0; i < n; i++) {
        if (!fl_otlp_hex_id(sp[i].trace_id, 32) || !fl_otlp_hex_id(sp[i].span_id, 16)) abort();
        if (sp[i].parent_id[0] && !fl_otlp_hex_id(sp[i].parent_id, 16)) abort();
        if (sp[i].end_ns < sp[i].start_ns || !sp[i].name) abort();
        fl_otlp_classify(&sp[i]);
    }
    fl_trace *t = fl_trace_new();
    if (fl_otlp_map(sp, n, t, &e) != FL_OK) abort();
    check_events(t);
    fl_trace_free(t);
    /* through the store: the first span's trace comes back whole */
    char id[33] = "";
    if (n) memcpy(id, sp[0].trace_id, 33);
    int want = 0;
    for (int i = 0; i < n; i++) want += !strcmp(sp[i].trace_id, id);
    fl_otlp_store *st = fl_otlp_store_new();
    if (!st) abort();
    fl_otlp_store_add(st, sp, n);
    fl_otlp_span *got;
    int ng;
    if (fl_otlp_store_take(st, id, &got, &ng) != FL_OK || (n && ng != want)) abort();
    fl_otlp_spans_free(got, ng);
    fl_otlp_store_free(st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *p = (const char *)data, *end = p + size;
    check_request(p, size);
    if (!memchr(p, '\n', size)) return 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        check_request(p, len);
        p += len + 1;
    }
    return 0;
}
