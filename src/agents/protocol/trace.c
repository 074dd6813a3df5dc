/* Module agents/protocol — what flare and the system under test say to each other, and the
 * spec that says what the system is: a case (case.c: the request, its JSON, its W3C trace
 * context), a trace (this file: the event lines parsed into fl_events) and the agent spec
 * (spec.c). Every other agents module speaks these types; this one depends only on core.
 * API: include/flare/agents/protocol.h, spec.h; wire format: docs/agents-protocol.md.
 *
 * Traces: the event lines of one case, parsed into fl_event records.
 *
 * The parser is the protocol's referee. Each line is one JSON object with a string "event";
 * known events must carry their required fields with the right types, unknown events and
 * unknown fields are ignored (so a target can add its own without breaking flare), blank lines
 * are skipped. Everything else — a line that is not a JSON object, a missing or mistyped
 * field, anything after "done" — is a protocol problem: counted in the trace, the first one
 * kept as a message, the line dropped. A bad target can make a case fail, never flare.
 *
 * Strings are stored as valid UTF-8 (fl_utf8_dup), so a trace always serialises to valid
 * JSON whatever bytes the target wrote.
 */
#include <cjson/cJSON.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flare/agents/protocol.h"

fl_trace *fl_trace_new(void) { return calloc(1, sizeof(fl_trace)); }

static void event_free(fl_event *ev) {
    free(ev->agent);
    free(ev->to);
    free(ev->tool);
    free(ev->point);
    free(ev->choice);
    free(ev->content);
    free(ev->arguments);
}

void fl_trace_clear(fl_trace *t) {
    for (int i = 0; i < t->n_events; i++) event_free(&t->events[i]);
    fl_event *ev = t->events;
    int cap = t->cap_events;
    char *err = t->err;
    size_t err_cap = t->err_cap;
    memset(t, 0, sizeof *t);
    t->events = ev; /* the arrays are reused: no allocation per case in the steady state */
    t->cap_events = cap;
    t->err = err;
    t->err_cap = err_cap;
    if (err) err[0] = 0;
}

void fl_trace_free(fl_trace *t) {
    if (!t) return;
    fl_trace_clear(t);
    free(t->events);
    free(t->err);
    free(t);
}

fl_status fl_trace_stderr_add(fl_trace *t, const char *buf, size_t n) {
    if (n >= FL_TRACE_STDERR_MAX) { /* only the tail can be kept */
        t->err_dropped += t->err_len + n - (FL_TRACE_STDERR_MAX - 1);
        buf += n - (FL_TRACE_STDERR_MAX - 1);
        n = FL_TRACE_STDERR_MAX - 1;
        t->err_len = 0;
    }
    if (t->err_len + n >= FL_TRACE_STDERR_MAX) { /* drop the oldest bytes: a traceback ends last */
        size_t drop = t->err_len + n - (FL_TRACE_STDERR_MAX - 1);
        memmove(t->err, t->err + drop, t->err_len - drop);
        t->err_len -= drop;
        t->err_dropped += drop;
    }
    if (t->err_len + n + 1 > t->err_cap) {
        size_t cap = t->err_cap ? t->err_cap : 1024;
        while (cap < t->err_len + n + 1) cap *= 2;
        char *p = realloc(t->err, cap);
        if (!p) return FL_ERR_NOMEM;
        t->err = p;
        t->err_cap = cap;
    }
    memcpy(t->err + t->err_len, buf, n);
    t->err_len += n;
    t->err[t->err_len] = 0;
    return FL_OK;
}

void fl_trace_problem(fl_trace *t, const char *fmt, ...) {
    if (t->n_protocol++ > 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->protocol_msg, sizeof t->protocol_msg, fmt, ap);
    va_end(ap);
}

/* The start of a line for messages: at most 48 bytes, non-printable bytes as '?'. */
static const char *snippet(const char *line, size_t len, char buf[64]) {
    size_t n = len < 48 ? len : 48, k = 0;
    for (size_t i = 0; i < n; i++)
        buf[k++] = (unsigned char)line[i] < 0x20 || line[i] == 0x7f ? '?' : line[i];
    if (len > n) buf[k++] = '.', buf[k++] = '.', buf[k++] = '.';
    buf[k] = 0;
    return buf;
}

/* ---- the events ------------------------------------------------------------------------- */
/* One field of an event: the JSON key, where its string goes, whether it is required. */
typedef struct field {
    const char *key;
    size_t off;
    int required;
} field;

#define F_(key, member, req) {key, offsetof(fl_event, member), req}
static const struct {
    const char *name;
    fl_event_kind kind;
    field f[3];
} event_spec[] = {
    {"message", FL_EV_MESSAGE, {F_("from", agent, 1), F_("to", to, 1), F_("content", content, 1)}},
    {"tool_call", FL_EV_TOOL_CALL, {F_("agent", agent, 1), F_("tool", tool, 1)}},
    {"tool_result", FL_EV_TOOL_RESULT,
     {F_("agent", agent, 1), F_("tool", tool, 1), F_("content", content, 0)}},
    {"branch", FL_EV_BRANCH, {F_("agent", agent, 1), F_("point", point, 1), F_("choice", choice, 1)}},
    {"error", FL_EV_ERROR, {F_("agent", agent, 1), F_("message", content, 1)}},
    {"output", FL_EV_OUTPUT, {F_("content", content, 1)}},
    {"done", FL_EV_DONE, {{0}}},
};
#undef F_
enum { N_EVENT_SPEC = sizeof event_spec / sizeof event_spec[0] };

static const char *event_name(fl_event_kind k) {
    for (int i = 0; i < N_EVENT_SPEC; i++)
        if (event_spec[i].kind == k) return event_spec[i].name;
    return "?";
}

static int is_done(const fl_trace *t) {
    return t->n_events > 0 && t->events[t->n_events - 1].kind == FL_EV_DONE;
}

/* Fill ev from the JSON object per spec s. Returns 0, -1 on a protocol problem (recorded),
 * -2 when out of memory. */
static int fill_event(fl_trace *t, int s, const cJSON *j, fl_event *ev) {
    const char *name = event_spec[s].name;
    for (int f = 0; f < 3 && event_spec[s].f[f].key; f++) {
        const field *fd = &event_spec[s].f[f];
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, fd->key);
        if (!v && !fd->required) continue;
        if (!v) return fl_trace_problem(t, "\"%s\" event without \"%s\"", name, fd->key), -1;
        if (!cJSON_IsString(v))
            return fl_trace_problem(t, "\"%s\" event: \"%s\" is not a string", name, fd->key), -1;
        char *str = fl_utf8_dup(v->valuestring, strlen(v->valuestring));
        if (!str) return -2;
        *(char **)((char *)ev + fd->off) = str;
    }
    if (ev->kind == FL_EV_TOOL_RESULT) {
        const cJSON *ok = cJSON_GetObjectItemCaseSensitive(j, "ok");
        if (!ok) return fl_trace_problem(t, "\"tool_result\" event without \"ok\""), -1;
        if (!cJSON_IsBool(ok))
            return fl_trace_problem(t, "\"tool_result\" event: \"ok\" is not true or false"), -1;
        ev->ok = cJSON_IsTrue(ok);
    }
    if (ev->kind == FL_EV_TOOL_CALL) {
        /* arguments: any JSON value, kept as compact text; absent stays NULL */
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "arguments");
        if (a) {
            char *txt = cJSON_PrintUnformatted(a);
            if (!txt) return -2;
            ev->arguments = fl_utf8_dup(txt, strlen(txt));
            free(txt);
            if (!ev->arguments) return -2;
        }
    }
    return 0;
}

fl_status fl_trace_feed_line(fl_trace *t, const char *line, size_t len, double t_ms, int *done) {
    char buf[64];
    *done = 0;
    while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t'))
        len--;
    size_t lead = 0;
    while (lead < len && (line[lead] == ' ' || line[lead] == '\t')) lead++;
    if (lead == len) return FL_OK; /* blank line */

    /* Not even the start of an object: no parse (and no allocation) for a flood of junk. */
    cJSON *j = line[lead] == '{' ? cJSON_ParseWithLength(line + lead, len - lead) : NULL;
    const cJSON *evname = cJSON_GetObjectItemCaseSensitive(j, "event");
    if (!cJSON_IsObject(j)) {
        fl_trace_problem(t, "not a JSON object: \"%s\"", snippet(line, len, buf));
    } else if (!cJSON_IsString(evname)) {
        fl_trace_problem(t, "no string \"event\" in \"%s\"", snippet(line, len, buf));
    } else {
        int s = 0;
        while (s < N_EVENT_SPEC && strcmp(event_spec[s].name, evname->valuestring)) s++;
        if (s == N_EVENT_SPEC) goto out; /* an unknown event: ignored, by design */
        if (is_done(t)) {
            fl_trace_problem(t, "\"%s\" event after done", event_spec[s].name);
            goto out;
        }
        if (t->n_events == t->cap_events) {
            int cap = t->cap_events ? 2 * t->cap_events : 16;
            fl_event *ne = realloc(t->events, (size_t)cap * sizeof *ne);
            if (!ne) goto nomem;
            t->events = ne;
            t->cap_events = cap;
        }
        fl_event *ev = &t->events[t->n_events];
        memset(ev, 0, sizeof *ev);
        ev->kind = event_spec[s].kind;
        ev->t_ms = t_ms;
        int rc = fill_event(t, s, j, ev);
        if (rc == -2) {
            event_free(ev);
            goto nomem;
        }
        if (rc < 0) {
            event_free(ev);
            goto out;
        }
        t->n_events++;
        *done = ev->kind == FL_EV_DONE;
    }
out:
    cJSON_Delete(j);
    return FL_OK;
nomem:
    cJSON_Delete(j);
    return FL_ERR_NOMEM;
}

const char *fl_trace_output(const fl_trace *t) {
    for (int i = t->n_events - 1; i >= 0; i--)
        if (t->events[i].kind == FL_EV_OUTPUT) return t->events[i].content;
    return NULL;
}

/* ---- JSON out ------------------------------------------------------------------------------ */
static cJSON *events_json(const fl_trace *t) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < t->n_events; i++) {
        const fl_event *ev = &t->events[i];
        cJSON *o = cJSON_CreateObject();
        if (!o) goto fail;
        cJSON_AddItemToArray(a, o);
        cJSON_AddStringToObject(o, "event", event_name(ev->kind));
        if (ev->agent) cJSON_AddStringToObject(o, ev->kind == FL_EV_MESSAGE ? "from" : "agent", ev->agent);
        if (ev->to) cJSON_AddStringToObject(o, "to", ev->to);
        if (ev->tool) cJSON_AddStringToObject(o, "tool", ev->tool);
        if (ev->arguments) cJSON_AddRawToObject(o, "arguments", ev->arguments);
        if (ev->kind == FL_EV_TOOL_RESULT) cJSON_AddBoolToObject(o, "ok", ev->ok);
        if (ev->point) cJSON_AddStringToObject(o, "point", ev->point);
        if (ev->choice) cJSON_AddStringToObject(o, "choice", ev->choice);
        if (ev->content)
            cJSON_AddStringToObject(o, ev->kind == FL_EV_ERROR ? "message" : "content", ev->content);
        cJSON_AddNumberToObject(o, "t_ms", ev->t_ms);
    }
    return a;
fail:
    cJSON_Delete(a);
    return NULL;
}

char *fl_trace_to_json(const fl_trace *t) {
    cJSON *a = events_json(t);
    char *s = a ? cJSON_PrintUnformatted(a) : NULL;
    cJSON_Delete(a);
    return s;
}

static const char *const exit_names[] = {
    [FL_EXIT_DONE] = "done", [FL_EXIT_CRASH] = "crash", [FL_EXIT_HANG] = "hang",
    [FL_EXIT_EOF] = "eof",   [FL_EXIT_LIMIT] = "limit",
};

const char *fl_exit_kind_name(fl_exit_kind k) {
    return (unsigned)k < sizeof exit_names / sizeof exit_names[0] ? exit_names[k] : "?";
}

const char *fl_trace_describe_exit(const fl_trace *t, char *buf, size_t n) {
    int st = t->exit_status;
    char how[96] = "";
    if (st < 0) snprintf(how, sizeof how, "signal %d (%s)", -st, strsignal(-st));
    switch (t->exit) {
    case FL_EXIT_DONE: snprintf(buf, n, "done after %.1f ms", t->ms); break;
    case FL_EXIT_CRASH:
        if (st < 0) snprintf(buf, n, "crash: killed by %s", how);
        else if (st > 255) snprintf(buf, n, "crash: HTTP status %d", st); /* http_target.h */
        else if (st > 0) snprintf(buf, n, "crash: exited with status %d", st);
        else snprintf(buf, n, "crash: the request could not be delivered or was not answered "
                              "(stdin closed, or the HTTP connection failed)");
        break;
    case FL_EXIT_HANG: snprintf(buf, n, "hang: no done after %.0f ms, stopped by %s", t->ms, how); break;
    case FL_EXIT_EOF: snprintf(buf, n, "eof: stdout closed without done"); break;
    case FL_EXIT_LIMIT:
        snprintf(buf, n, "limit: %zu bytes of output without done, stopped by %s", t->bytes, how);
        break;
    }
    return buf;
}

char *fl_trace_report_json(const fl_case *c, const fl_trace *t) {
    cJSON *o = cJSON_CreateObject(), *ev = events_json(t);
    char *out = NULL;
    if (!o || !ev) goto done;
    if (c) {
        char *req = fl_case_to_json(c);
        if (!req) goto done;
        cJSON_AddRawToObject(o, "case", req);
        free(req);
    }
    cJSON_AddStringToObject(o, "exit", fl_exit_kind_name(t->exit));
    cJSON_AddNumberToObject(o, "exit_status", t->exit_status);
    cJSON_AddNumberToObject(o, "ms", t->ms);
    cJSON_AddNumberToObject(o, "bytes", (double)t->bytes);
    cJSON_AddNumberToObject(o, "protocol_problems", t->n_protocol);
    if (t->n_protocol) {
        char *m = fl_utf8_dup(t->protocol_msg, strlen(t->protocol_msg));
        if (m) cJSON_AddStringToObject(o, "protocol_first", m);
        free(m);
    }
    if (t->err_len) { /* the case's stderr, as captured (valid UTF-8, maybe cut at the front) */
        char *m = fl_utf8_dup(t->err, t->err_len);
        if (m) cJSON_AddStringToObject(o, "stderr", m);
        free(m);
        if (t->err_dropped) cJSON_AddNumberToObject(o, "stderr_dropped", (double)t->err_dropped);
    }
    cJSON_AddItemToObject(o, "events", ev);
    ev = NULL;
    out = cJSON_PrintUnformatted(o);
done:
    cJSON_Delete(ev);
    cJSON_Delete(o);
    return out;
}
