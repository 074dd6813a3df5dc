/* libFuzzer harness for OTLP/HTTP protobuf ingestion (otlp_pb.c): any bytes given to
 * fl_otlp_parse_protobuf either fail with a message naming the source, or give spans with
 * well-formed ids that fl_otlp_map turns into events — never a crash, an out-of-bounds read or
 * a leak. The seeds are requests packed with the generated code (test_otlp_conv's shapes).
 *
 *   FUZZ_SECONDS=60 fuzz/smoke.sh   (builds every fuzz/fuzz_*.c with clang, ASan+UBSan)
 */
#include <stdlib.h>
#include <string.h>

#include "flare/agents/otlp.h"
#include "flare/agents/target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fl_otlp_span *sp = NULL;
    int n = -1;
    fl_err e;
    e.msg[0] = 0;
    if (fl_otlp_parse_protobuf(data, size, "fuzz", &sp, &n, &e) != FL_OK) {
        if (sp || n || strncmp(e.msg, "fuzz", 4)) abort();
        return 0;
    }
    for (int i = 0; i < n; i++) {
        if (!fl_otlp_hex_id(sp[i].trace_id, 32) || !fl_otlp_hex_id(sp[i].span_id, 16)) abort();
        if (sp[i].parent_id[0] && !fl_otlp_hex_id(sp[i].parent_id, 16)) abort();
        if (!sp[i].name) abort();
    }
    fl_trace *t = fl_trace_new();
    if (fl_otlp_map(sp, n, t, &e) != FL_OK) abort();
    fl_trace_free(t);
    fl_otlp_spans_free(sp, n);
    return 0;
}
