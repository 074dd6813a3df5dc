/* OTLP/JSON: ExportTraceServiceRequest bodies parsed into fl_otlp_span records.
 *
 * The OTLP JSON encoding (opentelemetry-proto, docs/specification.md "JSON Protobuf Encoding")
 * departs from the proto3 JSON mapping in two places that matter here: trace and span ids are
 * hex strings, not base64, and enum fields are integers. Exporters built on a generic
 * protobuf-JSON mapper get both "wrong", so both spellings are accepted: base64 ids of the
 * right byte length and enum names ("STATUS_CODE_ERROR"). 64-bit integers are strings by the
 * proto3 rule, but some hand-rolled emitters write numbers; both are read.
 *
 * A request is parsed all or nothing: the first problem fails it with the JSON path of the
 * offending field, and no span of it is returned.
 */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flare/agents/otlp.h"
#include "flare/agents/protocol.h"

typedef struct pctx {
    const char *source;
    fl_err *e;
    char path[200];
} pctx;

static fl_status bad(pctx *p, const char *what) {
    return fl_fail(p->e, FL_ERR_FORMAT, "%s: %s: %s", p->source, p->path, what);
}

/* Append ".key" or "[i]" to the path; returns the old length for restoring. */
static size_t push(pctx *p, const char *key, int idx) {
    size_t n = strlen(p->path);
    if (key) snprintf(p->path + n, sizeof p->path - n, "%s%s", n ? "." : "", key);
    else snprintf(p->path + n, sizeof p->path - n, "[%d]", idx);
    return n;
}

static char *dup_str(const char *s) { return fl_utf8_dup(s, strlen(s)); }

/* ---- ids ------------------------------------------------------------------------------------ */
int fl_otlp_hex_id(const char *s, int digits) {
    if (!s || (int)strlen(s) != digits) return 0;
    for (int i = 0; i < digits; i++)
        if (!isxdigit((unsigned char)s[i])) return 0;
    return 1;
}

static int b64val(int c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
}

/* s as `digits` lower-case hex digits into out, from hex or from base64 of digits/2 bytes.
 * Returns 0 on success. */
static int parse_id(const char *s, int digits, char *out) {
    static const char hx[] = "0123456789abcdef";
    if (fl_otlp_hex_id(s, digits)) {
        for (int i = 0; i < digits; i++) out[i] = (char)tolower((unsigned char)s[i]);
        out[digits] = 0;
        return 0;
    }
    unsigned char bytes[16];
    int nb = 0, acc = 0, bits = 0;
    size_t len = strlen(s);
    while (len > 0 && s[len - 1] == '=') len--;
    for (size_t i = 0; i < len; i++) {
        int v = b64val((unsigned char)s[i]);
        if (v < 0) return -1;
        acc = (acc << 6) | v;
        bits += 6;
        if (bits >= 8) {
            if (nb == digits / 2) return -1;
            bytes[nb++] = (unsigned char)(acc >> (bits - 8));
            bits -= 8;
            acc &= (1 << bits) - 1;
        }
    }
    if (nb != digits / 2 || bits >= 6) return -1;
    for (int i = 0; i < nb; i++) out[2 * i] = hx[bytes[i] >> 4], out[2 * i + 1] = hx[bytes[i] & 15];
    out[digits] = 0;
    return 0;
}

/* ---- numbers -------------------------------------------------------------------------------- */
/* A 64-bit integer from a decimal string or a JSON number. Returns 0 on success. */
static int get_i64(const cJSON *v, int64_t *out) {
    if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (!(d >= -9.2e18 && d <= 9.2e18)) return -1;
        *out = (int64_t)d;
        return 0;
    }
    if (!cJSON_IsString(v) || !v->valuestring[0]) return -1;
    char *end;
    errno = 0;
    long long x = strtoll(v->valuestring, &end, 10);
    if (errno || *end) return -1;
    *out = x;
    return 0;
}

static int get_u64(const cJSON *v, uint64_t *out) {
    if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (!(d >= 0 && d <= 1.8e19)) return -1;
        *out = (uint64_t)d;
        return 0;
    }
    if (!cJSON_IsString(v) || !v->valuestring[0] || v->valuestring[0] == '-') return -1;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v->valuestring, &end, 10);
    if (errno || *end) return -1;
    *out = x;
    return 0;
}

/* An enum as an integer or one of its names (index = value). */
static int get_enum(const cJSON *v, const char *const *names, int n, int *out) {
    if (cJSON_IsNumber(v)) { /* unknown values of a known range pass: newer protos may add some */
        if (!(v->valuedouble >= 0 && v->valuedouble < 1000)) return -1;
        return *out = (int)v->valuedouble, 0;
    }
    if (!cJSON_IsString(v)) return -1;
    for (int i = 0; i < n; i++)
        if (!strcmp(v->valuestring, names[i])) return *out = i, 0;
    return -1;
}

/* ---- attribute values ------------------------------------------------------------------------- */
/* An AnyValue as plain JSON (for array and kvlist text). NULL when malformed. */
static cJSON *plain(const cJSON *av, int depth) {
    if (!cJSON_IsObject(av) || depth > 32) return NULL;
    const cJSON *v;
    int64_t i;
    if ((v = cJSON_GetObjectItemCaseSensitive(av, "stringValue")))
        return cJSON_IsString(v) ? cJSON_CreateString(v->valuestring) : NULL;
    if ((v = cJSON_GetObjectItemCaseSensitive(av, "intValue")))
        return get_i64(v, &i) ? NULL : cJSON_CreateNumber((double)i);
    if ((v = cJSON_GetObjectItemCaseSensitive(av, "doubleValue")))
        return cJSON_IsNumber(v) ? cJSON_CreateNumber(v->valuedouble) : NULL;
    if ((v = cJSON_GetObjectItemCaseSensitive(av, "boolValue")))
        return cJSON_IsBool(v) ? cJSON_CreateBool(cJSON_IsTrue(v)) : NULL;
    if ((v = cJSON_GetObjectItemCaseSensitive(av, "bytesValue")))
        return cJSON_IsString(v) ? cJSON_CreateString(v->valuestring) : NULL;
    if ((v = cJSON_GetObjectItemCaseSensitive(av, "arrayValue"))) {
        const cJSON *vals = cJSON_GetObjectItemCaseSensitive(v, "values"), *it;
        cJSON *a = cJSON_CreateArray();
        if (vals && !cJSON_IsArray(vals)) return cJSON_Delete(a), NULL;
        cJSON_ArrayForEach(it, vals) {
            cJSON *x = plain(it, depth + 1);
            if (!x) return cJSON_Delete(a), NULL;
            cJSON_AddItemToArray(a, x);
        }
        return a;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(av, "kvlistValue"))) {
        const cJSON *vals = cJSON_GetObjectItemCaseSensitive(v, "values"), *it;
        cJSON *o = cJSON_CreateObject();
        if (vals && !cJSON_IsArray(vals)) return cJSON_Delete(o), NULL;
        cJSON_ArrayForEach(it, vals) {
            const cJSON *k = cJSON_GetObjectItemCaseSensitive(it, "key");
            const cJSON *val = cJSON_GetObjectItemCaseSensitive(it, "value");
            cJSON *x = val ? plain(val, depth + 1) : cJSON_CreateNull();
            if (!cJSON_IsString(k) || !x) return cJSON_Delete(x), cJSON_Delete(o), NULL;
            cJSON_AddItemToObject(o, k->valuestring, x);
        }
        return o;
    }
    return cJSON_CreateString(""); /* an empty AnyValue */
}

static void attr_free(fl_otlp_attr *a) {
    free(a->key);
    free(a->text);
}

static fl_status parse_attr(pctx *p, const cJSON *kv, fl_otlp_attr *a) {
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(kv, "key");
    const cJSON *av = cJSON_GetObjectItemCaseSensitive(kv, "value"), *v;
    char num[64];
    if (!cJSON_IsString(k)) return bad(p, "\"key\" is not a string");
    if (av && !cJSON_IsObject(av)) return bad(p, "\"value\" is not an AnyValue object");
    a->type = FL_OTLP_STR;
    const char *text = "";
    cJSON *js = NULL;
    if (!av) {
        /* a key without a value: an empty string, as protobuf would decode it */
    } else if ((v = cJSON_GetObjectItemCaseSensitive(av, "stringValue"))) {
        if (!cJSON_IsString(v)) return bad(p, "stringValue is not a string");
        text = v->valuestring;
    } else if ((v = cJSON_GetObjectItemCaseSensitive(av, "intValue"))) {
        if (get_i64(v, &a->i)) return bad(p, "intValue is not a 64-bit integer");
        a->type = FL_OTLP_INT;
        a->d = (double)a->i;
        snprintf(num, sizeof num, "%lld", (long long)a->i);
        text = num;
    } else if ((v = cJSON_GetObjectItemCaseSensitive(av, "doubleValue"))) {
        if (cJSON_IsString(v)) { /* "NaN", "Infinity" and numbers as strings (proto3 JSON) */
            char *end;
            a->d = strtod(v->valuestring, &end);
            if (*end || !v->valuestring[0]) return bad(p, "doubleValue is not a number");
        } else if (cJSON_IsNumber(v)) {
            a->d = v->valuedouble;
        } else {
            return bad(p, "doubleValue is not a number");
        }
        a->type = FL_OTLP_DOUBLE;
        snprintf(num, sizeof num, "%.17g", a->d);
        text = num;
    } else if ((v = cJSON_GetObjectItemCaseSensitive(av, "boolValue"))) {
        if (!cJSON_IsBool(v)) return bad(p, "boolValue is not true or false");
        a->type = FL_OTLP_BOOL;
        a->i = cJSON_IsTrue(v);
        text = a->i ? "true" : "false";
    } else if ((v = cJSON_GetObjectItemCaseSensitive(av, "bytesValue"))) {
        if (!cJSON_IsString(v)) return bad(p, "bytesValue is not a string");
        a->type = FL_OTLP_BYTES;
        text = v->valuestring;
    } else if (cJSON_GetObjectItemCaseSensitive(av, "arrayValue") ||
               cJSON_GetObjectItemCaseSensitive(av, "kvlistValue")) {
        a->type = cJSON_GetObjectItemCaseSensitive(av, "arrayValue") ? FL_OTLP_ARRAY : FL_OTLP_KVLIST;
        js = plain(av, 0);
        if (!js) return bad(p, a->type == FL_OTLP_ARRAY ? "malformed arrayValue" : "malformed kvlistValue");
    }
    char *jt = js ? cJSON_PrintUnformatted(js) : NULL;
    cJSON_Delete(js);
    a->key = dup_str(k->valuestring);
    a->text = jt ? fl_utf8_dup(jt, strlen(jt)) : dup_str(text);
    free(jt);
    if (!a->key || !a->text) return fl_fail(p->e, FL_ERR_NOMEM, "%s: out of memory", p->source);
    return FL_OK;
}

static fl_status parse_attrs(pctx *p, const cJSON *obj, fl_otlp_attr **out, int *n) {
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(obj, "attributes"), *it;
    *out = NULL;
    *n = 0;
    if (!arr || cJSON_IsNull(arr)) return FL_OK;
    size_t l0 = push(p, "attributes", 0);
    if (!cJSON_IsArray(arr)) return bad(p, "not an array");
    int cnt = cJSON_GetArraySize(arr), i = 0;
    if (cnt == 0) return p->path[l0] = 0, FL_OK;
    *out = calloc((size_t)cnt, sizeof **out);
    if (!*out) return fl_fail(p->e, FL_ERR_NOMEM, "%s: out of memory", p->source);
    cJSON_ArrayForEach(it, arr) {
        size_t l1 = push(p, NULL, i);
        fl_status st = parse_attr(p, it, &(*out)[i]);
        *n = i + 1; /* the caller frees what was filled, the failed one included */
        if (st) return st;
        p->path[l1] = 0;
        i++;
    }
    p->path[l0] = 0;
    return FL_OK;
}

static const fl_otlp_attr *attr_find(const fl_otlp_attr *a, int n, const char *key) {
    for (int i = 0; i < n; i++)
        if (!strcmp(a[i].key, key)) return &a[i];
    return NULL;
}

/* ---- spans ---------------------------------------------------------------------------------- */
void fl_otlp_span_clear(fl_otlp_span *s) {
    free(s->name);
    free(s->status_msg);
    free(s->service);
    free(s->scope);
    for (int i = 0; i < s->n_attrs; i++) attr_free(&s->attrs[i]);
    free(s->attrs);
    for (int j = 0; j < s->n_events; j++) {
        free(s->events[j].name);
        for (int i = 0; i < s->events[j].n_attrs; i++) attr_free(&s->events[j].attrs[i]);
        free(s->events[j].attrs);
    }
    free(s->events);
}

void fl_otlp_spans_free(fl_otlp_span *spans, int n) {
    for (int i = 0; spans && i < n; i++) fl_otlp_span_clear(&spans[i]);
    free(spans);
}

static const char *const kind_names[] = {"SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL",
                                         "SPAN_KIND_SERVER",      "SPAN_KIND_CLIENT",
                                         "SPAN_KIND_PRODUCER",    "SPAN_KIND_CONSUMER"};
static const char *const code_names[] = {"STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR"};

static fl_status nomem(pctx *p) { return fl_fail(p->e, FL_ERR_NOMEM, "%s: out of memory", p->source); }

static fl_status parse_span(pctx *p, const cJSON *j, fl_otlp_span *s) {
    if (!cJSON_IsObject(j)) return bad(p, "not an object");
    const cJSON *v;
    size_t l;
#define FIELD(k) (l = push(p, k, 0), v = cJSON_GetObjectItemCaseSensitive(j, k))
    if (!FIELD("traceId") || !cJSON_IsString(v) || parse_id(v->valuestring, 32, s->trace_id))
        return bad(p, "not 32 hex digits (or base64 of 16 bytes)");
    if (!strcmp(s->trace_id, "00000000000000000000000000000000")) return bad(p, "all zero");
    p->path[l] = 0;
    if (!FIELD("spanId") || !cJSON_IsString(v) || parse_id(v->valuestring, 16, s->span_id))
        return bad(p, "not 16 hex digits (or base64 of 8 bytes)");
    p->path[l] = 0;
    if (FIELD("parentSpanId") && !cJSON_IsNull(v)) {
        if (!cJSON_IsString(v)) return bad(p, "not a string");
        if (v->valuestring[0] && parse_id(v->valuestring, 16, s->parent_id))
            return bad(p, "not 16 hex digits (or base64 of 8 bytes)");
        if (!strcmp(s->parent_id, "0000000000000000")) s->parent_id[0] = 0;
    }
    p->path[l] = 0;
    if (FIELD("name") && !cJSON_IsString(v)) return bad(p, "not a string");
    p->path[l] = 0;
    if (!(s->name = dup_str(v ? v->valuestring : ""))) return nomem(p);
    if (FIELD("kind") && get_enum(v, kind_names, 6, &s->kind)) return bad(p, "not a SpanKind");
    p->path[l] = 0;
    if (FIELD("startTimeUnixNano") && get_u64(v, &s->start_ns))
        return bad(p, "not an unsigned 64-bit integer");
    p->path[l] = 0;
    if (FIELD("endTimeUnixNano") && get_u64(v, &s->end_ns))
        return bad(p, "not an unsigned 64-bit integer");
    p->path[l] = 0;
    if (s->end_ns < s->start_ns) s->end_ns = s->start_ns; /* clock skew: never negative */
    if (FIELD("status") && !cJSON_IsNull(v)) {
        if (!cJSON_IsObject(v)) return bad(p, "not an object");
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(v, "code");
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(v, "message");
        if (c && get_enum(c, code_names, 3, &s->status_code)) return bad(p, "code is not a StatusCode");
        if (cJSON_IsString(m) && m->valuestring[0] && !(s->status_msg = dup_str(m->valuestring)))
            return nomem(p);
    }
    p->path[l] = 0;
#undef FIELD
    fl_status st = parse_attrs(p, j, &s->attrs, &s->n_attrs);
    if (st) return st;
    const cJSON *evs = cJSON_GetObjectItemCaseSensitive(j, "events"), *it;
    if (evs && !cJSON_IsNull(evs)) {
        l = push(p, "events", 0);
        if (!cJSON_IsArray(evs)) return bad(p, "not an array");
        int cnt = cJSON_GetArraySize(evs);
        if (cnt && !(s->events = calloc((size_t)cnt, sizeof *s->events))) return nomem(p);
        cJSON_ArrayForEach(it, evs) {
            fl_otlp_event *ev = &s->events[s->n_events++];
            size_t l1 = push(p, NULL, s->n_events - 1);
            if (!cJSON_IsObject(it)) return bad(p, "not an object");
            const cJSON *nm = cJSON_GetObjectItemCaseSensitive(it, "name");
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(it, "timeUnixNano");
            if (nm && !cJSON_IsString(nm)) return bad(p, "name is not a string");
            if (t && get_u64(t, &ev->time_ns)) return bad(p, "timeUnixNano is not an unsigned 64-bit integer");
            if (!(ev->name = dup_str(nm ? nm->valuestring : ""))) return nomem(p);
            if ((st = parse_attrs(p, it, &ev->attrs, &ev->n_attrs))) return st;
            p->path[l1] = 0;
        }
        p->path[l] = 0;
    }
    return FL_OK;
}

/* The spans of one request are collected in a growing array. */
typedef struct spanvec {
    fl_otlp_span *v;
    int n, cap;
} spanvec;

static fl_otlp_span *spanvec_push(spanvec *sv) {
    if (sv->n == sv->cap) {
        int cap = sv->cap ? 2 * sv->cap : 8;
        fl_otlp_span *nv = realloc(sv->v, (size_t)cap * sizeof *nv);
        if (!nv) return NULL;
        sv->v = nv;
        sv->cap = cap;
    }
    fl_otlp_span *s = &sv->v[sv->n++];
    memset(s, 0, sizeof *s);
    return s;
}

static fl_status parse_resource_spans(pctx *p, const cJSON *rs, spanvec *sv) {
    if (!cJSON_IsObject(rs)) return bad(p, "not an object");
    const char *service = NULL;
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(rs, "resource");
    fl_otlp_attr *ra = NULL;
    int nra = 0;
    fl_status st = FL_OK;
    if (cJSON_IsObject(res)) {
        size_t l = push(p, "resource", 0);
        st = parse_attrs(p, res, &ra, &nra);
        if (st) goto out;
        p->path[l] = 0;
        const fl_otlp_attr *sn = attr_find(ra, nra, "service.name");
        service = sn ? sn->text : NULL;
    }
    const cJSON *ss = cJSON_GetObjectItemCaseSensitive(rs, "scopeSpans");
    const char *ssname = "scopeSpans";
    if (!ss) ss = cJSON_GetObjectItemCaseSensitive(rs, ssname = "instrumentationLibrarySpans");
    if (!ss || cJSON_IsNull(ss)) goto out;
    size_t l0 = push(p, ssname, 0);
    if (!cJSON_IsArray(ss)) { st = bad(p, "not an array"); goto out; }
    const cJSON *it;
    int i = 0;
    cJSON_ArrayForEach(it, ss) {
        size_t l1 = push(p, NULL, i++);
        if (!cJSON_IsObject(it)) { st = bad(p, "not an object"); goto out; }
        const cJSON *scope = cJSON_GetObjectItemCaseSensitive(it, "scope");
        if (!scope) scope = cJSON_GetObjectItemCaseSensitive(it, "instrumentationLibrary");
        const cJSON *scname = cJSON_GetObjectItemCaseSensitive(scope, "name");
        const cJSON *spans = cJSON_GetObjectItemCaseSensitive(it, "spans"), *sj;
        if (!spans || cJSON_IsNull(spans)) { p->path[l1] = 0; continue; }
        size_t l2 = push(p, "spans", 0);
        if (!cJSON_IsArray(spans)) { st = bad(p, "not an array"); goto out; }
        int k = 0;
        cJSON_ArrayForEach(sj, spans) {
            size_t l3 = push(p, NULL, k++);
            fl_otlp_span *s = spanvec_push(sv);
            if (!s) { st = nomem(p); goto out; }
            if ((st = parse_span(p, sj, s))) goto out;
            if ((service && !(s->service = dup_str(service))) ||
                (cJSON_IsString(scname) && !(s->scope = dup_str(scname->valuestring)))) {
                st = nomem(p);
                goto out;
            }
            p->path[l3] = 0;
        }
        p->path[l2] = 0;
        p->path[l1] = 0;
    }
    p->path[l0] = 0;
out:
    for (int a = 0; a < nra; a++) attr_free(&ra[a]);
    free(ra);
    return st;
}

fl_status fl_otlp_parse(const char *json, size_t len, const char *source, fl_otlp_span **spans,
                        int *n, fl_err *e) {
    pctx p = {.source = source ? source : "OTLP", .e = e};
    *spans = NULL;
    *n = 0;
    cJSON *j = cJSON_ParseWithLength(json, len);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return fl_fail(e, FL_ERR_FORMAT, "%s: not a JSON object (an OTLP/JSON ExportTraceServiceRequest)",
                       p.source);
    }
    spanvec sv = {0};
    fl_status st = FL_OK;
    const cJSON *rss = cJSON_GetObjectItemCaseSensitive(j, "resourceSpans"), *it;
    if (rss && !cJSON_IsNull(rss)) {
        size_t l = push(&p, "resourceSpans", 0);
        if (!cJSON_IsArray(rss)) st = bad(&p, "not an array");
        int i = 0;
        const cJSON *arr = st ? NULL : rss;
        cJSON_ArrayForEach(it, arr) {
            size_t l1 = push(&p, NULL, i++);
            if ((st = parse_resource_spans(&p, it, &sv))) break;
            p.path[l1] = 0;
        }
        p.path[l] = 0;
    }
    cJSON_Delete(j);
    if (st) {
        fl_otlp_spans_free(sv.v, sv.n);
        return st;
    }
    *spans = sv.v;
    *n = sv.n;
    return FL_OK;
}

/* ---- attribute access -------------------------------------------------------------------------- */
const fl_otlp_attr *fl_otlp_attr_get(const fl_otlp_span *s, const char *key) {
    return attr_find(s->attrs, s->n_attrs, key);
}

const char *fl_otlp_attr_str(const fl_otlp_span *s, const char *key) {
    const fl_otlp_attr *a = fl_otlp_attr_get(s, key);
    return a ? a->text : NULL;
}

int fl_otlp_attr_int(const fl_otlp_span *s, const char *key, int64_t *v) {
    const fl_otlp_attr *a = fl_otlp_attr_get(s, key);
    if (!a) return 0;
    if (a->type == FL_OTLP_INT) return *v = a->i, 1;
    if (a->type == FL_OTLP_DOUBLE && a->d >= -9.2e18 && a->d <= 9.2e18 && a->d == (double)(int64_t)a->d)
        return *v = (int64_t)a->d, 1;
    if (a->type == FL_OTLP_STR && a->text[0]) {
        char *end;
        errno = 0;
        long long x = strtoll(a->text, &end, 10);
        if (!errno && !*end) return *v = x, 1;
    }
    return 0;
}
