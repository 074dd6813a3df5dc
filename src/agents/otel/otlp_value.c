/* Attribute values as the mapping needs them (otlp_int.h; the rules: docs/agents-otel.md,
 * "What the mapping derives"). */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "agents/otel/otlp_int.h"
#include "flare/agents/protocol.h"

static char *dupn(const char *s) { return s ? fl_utf8_dup(s, strlen(s)) : NULL; }
static int starts(const char *s, const char *prefix) { return !strncmp(s, prefix, strlen(prefix)); }

/* A function call serialized as {"args":[...],"kwargs":{...}} (OpenLLMetry's
 * traceloop.entity.input: the wrapped function's arguments): the keyword arguments when there
 * are any, else the only positional one, else the args list. Not that shape: NULL. */
static cJSON *call_args(cJSON *j) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "args"), *k = cJSON_GetObjectItemCaseSensitive(j, "kwargs");
    if (!cJSON_IsObject(j) || cJSON_GetArraySize(j) != 2 || !cJSON_IsArray(a) || !cJSON_IsObject(k)) return NULL;
    if (cJSON_GetArraySize(k) > 0) return (cJSON *)k;
    return cJSON_GetArraySize(a) == 1 ? cJSON_GetArrayItem(a, 0) : (cJSON *)a;
}

/* Message text: gen_ai.*.messages are JSON arrays of {role, parts:[{type:"text",content}]}
 * (semconv 1.37); their text parts are joined. Anything else is used as it is. */
char *otlp_message_text(const char *v) {
    cJSON *j = v ? cJSON_Parse(v) : NULL;
    char *out = NULL;
    const cJSON *call = call_args(j);
    if (cJSON_IsString(call)) {
        out = dupn(call->valuestring);
        cJSON_Delete(j);
        return out;
    }
    if (cJSON_IsArray(j)) {
        size_t cap = strlen(v) + 1, n = 0;
        out = malloc(cap);
        const cJSON *m, *p;
        cJSON_ArrayForEach(m, j) {
            const cJSON *parts = cJSON_GetObjectItemCaseSensitive(m, "parts");
            cJSON_ArrayForEach(p, parts) {
                const cJSON *c = cJSON_GetObjectItemCaseSensitive(p, "content");
                const cJSON *ty = cJSON_GetObjectItemCaseSensitive(p, "type");
                if (!out || !cJSON_IsString(c) || (cJSON_IsString(ty) && strcmp(ty->valuestring, "text")))
                    continue;
                size_t l = strlen(c->valuestring);
                if (n + l + 2 > cap) continue; /* cannot happen: text is shorter than its JSON */
                if (n) out[n++] = '\n';
                memcpy(out + n, c->valuestring, l);
                n += l;
            }
        }
        if (out) out[n] = 0;
        if (out && !n) free(out), out = NULL;
    }
    cJSON_Delete(j);
    return out ? out : dupn(v ? v : "");
}

/* Tool arguments as compact JSON text, read by their MIME type (input.mime_type): text/plain
 * is a string even when it starts like a number ("144 / 12"); otherwise a value that is one
 * whole JSON document is parsed (a serialized call: its arguments), anything else is quoted
 * as a JSON string. */
char *otlp_json_text(const char *v, const char *mime) {
    cJSON *j = mime && starts(mime, "text/") ? NULL : cJSON_ParseWithOpts(v, NULL, 1);
    if (!j) j = cJSON_CreateString(v);
    const cJSON *call = call_args(j);
    char *s = j ? cJSON_PrintUnformatted(call ? call : j) : NULL;
    cJSON_Delete(j);
    char *out = s ? fl_utf8_dup(s, strlen(s)) : NULL;
    free(s);
    return out;
}

/* The string a value holds when it is a JSON string literal ("\"391\"", as exporters that
 * JSON.stringify every value write a string result), NULL otherwise. */
char *otlp_json_string(const char *v) {
    cJSON *j = v && v[0] == '"' ? cJSON_ParseWithOpts(v, NULL, 1) : NULL;
    char *out = cJSON_IsString(j) ? dupn(j->valuestring) : NULL;
    cJSON_Delete(j);
    return out;
}

/* A LangChain message as JSON: its kwargs (serialized form {"lc":1,"type":"constructor",
 * "id":[...,"ToolMessage"],"kwargs":{...}}) or the object itself when it has "content". */
static const cJSON *lc_message(const cJSON *j) {
    const cJSON *wrapped = cJSON_GetObjectItemCaseSensitive(j, "output"); /* {"output": ToolMessage} */
    if (cJSON_IsObject(wrapped) && cJSON_GetArraySize(j) == 1) j = wrapped;
    const cJSON *kw = cJSON_GetObjectItemCaseSensitive(j, "kwargs");
    if (cJSON_IsObject(kw) && cJSON_GetObjectItemCaseSensitive(j, "lc")) return kw;
    return cJSON_IsObject(j) && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "content")) ? j : NULL;
}

/* A tool's result without its framework wrapper: a LangChain ToolMessage gives its content,
 * and its status "error" marks the call failed (*failed = 1). NULL: use the value as it is. */
char *otlp_unwrap_result(const char *v, int *failed) {
    char *str = otlp_json_string(v);
    if (str) return str;
    cJSON *j = v && strstr(v, "content") ? cJSON_Parse(v) : NULL;
    const cJSON *m = lc_message(j);
    const cJSON *c = m ? cJSON_GetObjectItemCaseSensitive(m, "content") : NULL;
    const cJSON *st = m ? cJSON_GetObjectItemCaseSensitive(m, "status") : NULL;
    char *out = NULL;
    if (cJSON_IsString(c)) {
        out = dupn(c->valuestring);
        if (cJSON_IsString(st) && !strcmp(st->valuestring, "error")) *failed = 1;
    }
    cJSON_Delete(j);
    return out;
}

/* State keys that hold a graph's answer, in order (LangGraph states are the user's own
 * objects; these are the names the docs and templates use). */
static const char *const answer_keys[] = {"answer", "final_answer", "output", "response", "result", NULL};

/* A graph's whole-state output (LangGraph) answers with a string under one of answer_keys,
 * else its "messages" list's last content; NULL when v is not such a state. */
char *otlp_state_answer(const char *v) {
    cJSON *j = v && v[0] == '{' ? cJSON_Parse(v) : NULL;
    const cJSON *c = NULL;
    for (const char *const *k = answer_keys; cJSON_IsObject(j) && *k && !cJSON_IsString(c); k++)
        c = cJSON_GetObjectItemCaseSensitive(j, *k);
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(j, "messages");
    if (!cJSON_IsString(c) && cJSON_IsArray(msgs)) {
        const cJSON *m = lc_message(cJSON_GetArrayItem(msgs, cJSON_GetArraySize(msgs) - 1));
        c = m ? cJSON_GetObjectItemCaseSensitive(m, "content") : NULL;
    }
    char *out = cJSON_IsString(c) ? dupn(c->valuestring) : NULL;
    cJSON_Delete(j);
    return out;
}

/* Exceptions that frameworks raise for control flow, not failure: LangGraph's ParentCommand
 * (a Command(graph=PARENT) handoff) and GraphBubbleUp / GraphInterrupt. */
static const char *const control_flow[] = {"ParentCommand", "GraphBubbleUp", "GraphInterrupt", NULL};

static int control_flow_text(const char *t) {
    for (const char *const *c = control_flow; t && *c; c++)
        if (strstr(t, *c)) return 1;
    return 0;
}

/* The attribute key of span event ev, NULL when absent. */
static const char *event_attr(const fl_otlp_event *ev, const char *key) {
    for (int a = 0; a < ev->n_attrs; a++)
        if (!strcmp(ev->attrs[a].key, key)) return ev->attrs[a].text;
    return NULL;
}

/* The span's first "exception" event (semconv exceptions.md: exception.type / .message), -1. */
static int exception_event(const fl_otlp_span *s) {
    for (int k = 0; k < s->n_events; k++)
        if (!strcmp(s->events[k].name, "exception")) return k;
    return -1;
}

/* Failed: status ERROR, an error.type attribute (GenAI / semconv), or a recorded exception
 * on a span whose status is not OK (OpenInference, the Vercel AI SDK and OTel's
 * recordException all add the event; a handled exception leaves the status OK). Not when
 * the exception is a framework's control flow. */
int otlp_is_error(const fl_otlp_span *s) {
    int x = exception_event(s);
    if (s->status_code != 2 && !fl_otlp_attr_get(s, "error.type") && (x < 0 || s->status_code == 1)) return 0;
    if (control_flow_text(s->status_msg) || control_flow_text(fl_otlp_attr_str(s, "error.type")))
        return 0;
    for (int k = 0; k < s->n_events; k++)
        if (!strcmp(s->events[k].name, "exception") && (control_flow_text(event_attr(&s->events[k], "exception.type")) ||
                                                       control_flow_text(event_attr(&s->events[k], "exception.message"))))
            return 0;
    return 1;
}

/* What failed, for a failed call without a result: the exception's message, else the status
 * message, error.type, the exception's type, else "error". */
const char *otlp_error_text(const fl_otlp_span *s) {
    int x = exception_event(s);
    const char *v = x >= 0 ? event_attr(&s->events[x], "exception.message") : NULL;
    if (v && v[0]) return v;
    if (s->status_msg && s->status_msg[0]) return s->status_msg;
    v = fl_otlp_attr_str(s, "error.type");
    if (v && v[0]) return v;
    v = x >= 0 ? event_attr(&s->events[x], "exception.type") : NULL;
    return v && v[0] ? v : "error";
}
