/* OTLP/HTTP protobuf (application/x-protobuf): the default encoding of the Python SDK's
 * exporter and of many Collectors' otlphttp exporters.
 *
 * The request is decoded with protobuf-c (proto/otlp_trace.proto, generated at build time)
 * and rewritten as the OTLP JSON encoding, which fl_otlp_parse then reads: one reader of
 * spans, one set of checks and error messages (the JSON path names the span), for both
 * encodings. The rewrite costs a JSON print and parse per request; for the span counts of
 * agent runs this is small next to the HTTP exchange (docs/agents-otel.md).
 */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flare/agents/otlp.h"
#include "otlp/otlp_trace.pb-c.h"

static char *hex(const ProtobufCBinaryData *b, char *out) {
    static const char d[] = "0123456789abcdef";
    for (size_t i = 0; i < b->len; i++) out[2 * i] = d[b->data[i] >> 4], out[2 * i + 1] = d[b->data[i] & 15];
    out[2 * b->len] = 0;
    return out;
}

static void add_u64(cJSON *o, const char *k, uint64_t v) {
    char buf[24];
    snprintf(buf, sizeof buf, "%" PRIu64, v);
    cJSON_AddStringToObject(o, k, buf);
}

static cJSON *kv_list(Flare__Otlp__KeyValue **kv, size_t n);

static cJSON *any_value(const Flare__Otlp__AnyValue *v) {
    cJSON *o = cJSON_CreateObject();
    if (!v || !o) return o;
    char buf[24];
    switch (v->value_case) {
    case FLARE__OTLP__ANY_VALUE__VALUE_STRING_VALUE: cJSON_AddStringToObject(o, "stringValue", v->string_value); break;
    case FLARE__OTLP__ANY_VALUE__VALUE_BOOL_VALUE: cJSON_AddBoolToObject(o, "boolValue", v->bool_value); break;
    case FLARE__OTLP__ANY_VALUE__VALUE_INT_VALUE:
        snprintf(buf, sizeof buf, "%" PRId64, v->int_value);
        cJSON_AddStringToObject(o, "intValue", buf);
        break;
    case FLARE__OTLP__ANY_VALUE__VALUE_DOUBLE_VALUE: cJSON_AddNumberToObject(o, "doubleValue", v->double_value); break;
    case FLARE__OTLP__ANY_VALUE__VALUE_ARRAY_VALUE: {
        cJSON *a = cJSON_CreateArray(), *w = cJSON_CreateObject();
        for (size_t i = 0; v->array_value && i < v->array_value->n_values; i++)
            cJSON_AddItemToArray(a, any_value(v->array_value->values[i]));
        cJSON_AddItemToObject(w, "values", a);
        cJSON_AddItemToObject(o, "arrayValue", w);
        break;
    }
    case FLARE__OTLP__ANY_VALUE__VALUE_KVLIST_VALUE: {
        cJSON *w = cJSON_CreateObject();
        cJSON_AddItemToObject(w, "values", v->kvlist_value ? kv_list(v->kvlist_value->values, v->kvlist_value->n_values)
                                                           : cJSON_CreateArray());
        cJSON_AddItemToObject(o, "kvlistValue", w);
        break;
    }
    case FLARE__OTLP__ANY_VALUE__VALUE_BYTES_VALUE: {
        /* the JSON encoding's bytes are base64 */
        static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        const ProtobufCBinaryData *b = &v->bytes_value;
        char *s = malloc(4 * (b->len / 3 + 1) + 1);
        if (!s) break;
        size_t k = 0;
        for (size_t i = 0; i < b->len; i += 3) {
            uint32_t x = (uint32_t)b->data[i] << 16 | (i + 1 < b->len ? (uint32_t)b->data[i + 1] << 8 : 0) |
                         (i + 2 < b->len ? b->data[i + 2] : 0);
            s[k++] = b64[x >> 18 & 63], s[k++] = b64[x >> 12 & 63];
            s[k++] = i + 1 < b->len ? b64[x >> 6 & 63] : '=';
            s[k++] = i + 2 < b->len ? b64[x & 63] : '=';
        }
        s[k] = 0;
        cJSON_AddStringToObject(o, "bytesValue", s);
        free(s);
        break;
    }
    default: break;
    }
    return o;
}

static cJSON *kv_list(Flare__Otlp__KeyValue **kv, size_t n) {
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "key", kv[i]->key);
        cJSON_AddItemToObject(o, "value", any_value(kv[i]->value));
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

/* An id of the wrong length is written as it came (hex of its bytes): fl_otlp_parse then
 * names the span and says what is wrong, as for JSON. */
static cJSON *span_json(const Flare__Otlp__Span *s) {
    cJSON *o = cJSON_CreateObject();
    char *h = malloc(2 * (s->trace_id.len + s->span_id.len + s->parent_span_id.len) + 3);
    if (!o || !h) {
        free(h);
        return o;
    }
    cJSON_AddStringToObject(o, "traceId", hex(&s->trace_id, h));
    cJSON_AddStringToObject(o, "spanId", hex(&s->span_id, h));
    if (s->parent_span_id.len) cJSON_AddStringToObject(o, "parentSpanId", hex(&s->parent_span_id, h));
    free(h);
    cJSON_AddStringToObject(o, "name", s->name);
    cJSON_AddNumberToObject(o, "kind", s->kind);
    add_u64(o, "startTimeUnixNano", s->start_time_unix_nano);
    add_u64(o, "endTimeUnixNano", s->end_time_unix_nano);
    cJSON_AddItemToObject(o, "attributes", kv_list(s->attributes, s->n_attributes));
    cJSON *ev = cJSON_CreateArray();
    for (size_t i = 0; i < s->n_events; i++) {
        cJSON *e = cJSON_CreateObject();
        add_u64(e, "timeUnixNano", s->events[i]->time_unix_nano);
        cJSON_AddStringToObject(e, "name", s->events[i]->name);
        cJSON_AddItemToObject(e, "attributes", kv_list(s->events[i]->attributes, s->events[i]->n_attributes));
        cJSON_AddItemToArray(ev, e);
    }
    cJSON_AddItemToObject(o, "events", ev);
    if (s->status) {
        cJSON *st = cJSON_CreateObject();
        cJSON_AddNumberToObject(st, "code", s->status->code);
        if (s->status->message && s->status->message[0]) cJSON_AddStringToObject(st, "message", s->status->message);
        cJSON_AddItemToObject(o, "status", st);
    }
    return o;
}

fl_status fl_otlp_parse_protobuf(const uint8_t *buf, size_t len, const char *source, fl_otlp_span **spans,
                                 int *n, fl_err *e) {
    *spans = NULL, *n = 0;
    Flare__Otlp__ExportTraceServiceRequest *rq = flare__otlp__export_trace_service_request__unpack(NULL, len, buf);
    if (!rq)
        return fl_fail(e, FL_ERR_FORMAT, "%s: not an OTLP ExportTraceServiceRequest in protobuf "
                       "(%zu bytes that do not decode)", source, len);
    cJSON *root = cJSON_CreateObject(), *rss = cJSON_AddArrayToObject(root, "resourceSpans");
    for (size_t i = 0; rss && i < rq->n_resource_spans; i++) {
        const Flare__Otlp__ResourceSpans *r = rq->resource_spans[i];
        cJSON *ro = cJSON_CreateObject();
        if (r->resource) {
            cJSON *res = cJSON_AddObjectToObject(ro, "resource");
            cJSON_AddItemToObject(res, "attributes", kv_list(r->resource->attributes, r->resource->n_attributes));
        }
        cJSON *sss = cJSON_AddArrayToObject(ro, "scopeSpans");
        for (size_t k = 0; k < r->n_scope_spans; k++) {
            const Flare__Otlp__ScopeSpans *ss = r->scope_spans[k];
            cJSON *so = cJSON_CreateObject();
            if (ss->scope) cJSON_AddStringToObject(cJSON_AddObjectToObject(so, "scope"), "name", ss->scope->name);
            cJSON *sp = cJSON_AddArrayToObject(so, "spans");
            for (size_t j = 0; j < ss->n_spans; j++) cJSON_AddItemToArray(sp, span_json(ss->spans[j]));
            cJSON_AddItemToArray(sss, so);
        }
        cJSON_AddItemToArray(rss, ro);
    }
    flare__otlp__export_trace_service_request__free_unpacked(rq, NULL);
    char *txt = rss ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!txt) return fl_fail(e, FL_ERR_NOMEM, "%s: out of memory decoding a protobuf request", source);
    fl_status st = fl_otlp_parse(txt, strlen(txt), source, spans, n, e);
    free(txt);
    return st;
}
