/* Module agents/otel — OpenTelemetry spans as a second source of a case's events: otlp.c parses
 * OTLP/JSON, otlp_map.c turns spans into fl_events, otlp_store.c keeps spans by trace id (and
 * polls --otlp-file), httpd.c is the HTTP server (libmicrohttpd), and this file is the receiver and the
 * per-case span source the campaign uses. Depends on protocol and target. API:
 * include/flare/agents/otlp.h, otlp_recv.h, httpd.h; docs/agents-otel.md.
 *
 * The OTLP/HTTP receiver (an fl_httpd handler feeding the span store) and the per-case span
 * source of otlp_recv.h: wait for a case's spans after it ended, map them, merge them.
 *
 * When are a case's spans all there? flare cannot know: exporters batch, and the system may
 * still be ending spans after it printed "done". Two signals end the wait early:
 *   - the case's top span arrived: OpenTelemetry SDKs export a span when it ends, and a parent
 *     ends after its children, so the span whose parent is the traceparent flare sent (the
 *     system's outermost span for the case) comes last, give or take concurrent exports —
 *     hence: and no request is half-received or being handled (fl_httpd_busy), and 2 ms of
 *     quiet for an export whose first bytes are still on the wire (spans there before the
 *     wait began count as quiet already: the system flushed before it said "done");
 *   - without it (the file source cannot tell, a system that crashed mid-case never ends its
 *     top span), 100 ms without a new span once some arrived.
 * Otherwise the grace period bounds the wait; a case with no spans at all waits all of it.
 * The receiver remembers the (trace id, parent id) pairs of the last RING spans it stored, as
 * 64-bit hashes, to answer "has the top span of this trace arrived?" without touching the
 * store. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "flare/agents/otlp.h"
#include "flare/agents/otlp_recv.h"
#include "flare/agents/target.h"

enum { RING = 4096 };

struct fl_otlp_src {
    fl_otlp_store *store;
    fl_httpd *httpd;
    fl_otlp_file *file;
    pthread_mutex_t mu;         /* the file poller and the ring */
    int grace_ms;
    int file_warned;
    uint64_t ring[RING];        /* hash(trace id, parent id) of recently stored spans */
    int ring_pos;
    atomic_long merged, bad;
};

/* FNV-1a of "trace/parent" with the hex digits in lower case (| 0x20), so that "AB" and "ab"
 * name the same span. */
static uint64_t hex_hash(uint64_t h, const char *s) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)(*s | 0x20);
        h = fl_fnv1a(h, &c, 1);
    }
    return h;
}

static uint64_t pair_hash(const char *trace_id, const char *parent_id) {
    uint64_t h = hex_hash(fl_fnv1a(hex_hash(FL_FNV_BASIS, trace_id), "/", 1), parent_id);
    return h | 1; /* 0 marks an empty ring slot */
}

/* ---- the HTTP side ------------------------------------------------------------------------ */
static char *status_json(int code, const char *msg) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "code", code);
    cJSON_AddStringToObject(o, "message", msg);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

static void handle(const fl_http_req *rq, fl_http_resp *rs, fl_otlp_store *store, fl_otlp_src *src) {
    if (strcmp(rq->path, "/v1/traces")) { /* the path comes without its query string */
        rs->status = 404; /* gRPC NOT_FOUND */
        rs->body = status_json(5, "flare's OTLP receiver takes traces only: POST /v1/traces");
        return;
    }
    if (strcmp(rq->method, "POST")) {
        rs->status = 405;
        rs->body = status_json(12, "POST /v1/traces only");
        return;
    }
    const char *ct = rq->content_type;
    int json = !strcmp(ct, "application/json") || (!*ct && rq->body_len && rq->body[0] == '{');
    int pb = !strcmp(ct, "application/x-protobuf");
    if (!json && !pb) { /* gRPC UNIMPLEMENTED */
        char msg[400];
        snprintf(msg, sizeof msg, "%s bodies are not supported: flare's OTLP receiver reads "
                 "OTLP/HTTP with application/json or application/x-protobuf bodies "
                 "(OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/json or http/protobuf); for "
                 "grpc, run a Collector in between (docs/agents-otel.md)",
                 *ct ? ct : "untyped");
        rs->status = 415;
        rs->body = status_json(12, msg);
        return;
    }
    fl_otlp_span *spans = NULL;
    int n = 0;
    fl_err e = {0};
    if (pb ? fl_otlp_parse_protobuf((const uint8_t *)rq->body, rq->body_len, "POST /v1/traces (protobuf)",
                                    &spans, &n, &e)
           : fl_otlp_parse(rq->body, rq->body_len, "POST /v1/traces", &spans, &n, &e)) {
        if (src) atomic_fetch_add(&src->bad, 1);
        rs->status = e.status == FL_ERR_NOMEM ? 500 : 400; /* gRPC INVALID_ARGUMENT */
        rs->body = status_json(e.status == FL_ERR_NOMEM ? 8 : 3, e.msg);
        return;
    }
    if (src) {
        pthread_mutex_lock(&src->mu);
        for (int i = 0; i < n; i++) {
            src->ring[src->ring_pos] = pair_hash(spans[i].trace_id, spans[i].parent_id);
            src->ring_pos = (src->ring_pos + 1) % RING;
        }
        pthread_mutex_unlock(&src->mu);
    }
    fl_otlp_store_add(store, spans, n);
    rs->status = 200;
    /* an ExportTraceServiceResponse without partialSuccess: "{}" in JSON, no bytes in protobuf */
    rs->body = strdup(pb ? "" : "{}");
    if (pb) rs->content_type = "application/x-protobuf";
}

static void handle_store(const fl_http_req *rq, fl_http_resp *rs, void *user) {
    handle(rq, rs, user, NULL);
}

static void handle_src(const fl_http_req *rq, fl_http_resp *rs, void *user) {
    fl_otlp_src *s = user;
    handle(rq, rs, s->store, s);
}

fl_status fl_otlp_listen(const char *addr, fl_otlp_store *st, fl_httpd **out, fl_err *e) {
    fl_status r = fl_httpd_start(addr, NULL, handle_store, st, out, e);
    if (r) fl_fail(e, r, "--otlp-listen: %s", e->msg);
    return r;
}

/* ---- spans for cases ------------------------------------------------------------------------ */
fl_status fl_otlp_src_new(const fl_otlp_src_opts *o, fl_otlp_src **out, fl_err *e) {
    *out = NULL;
    if (!o || (!o->listen && !o->file)) return FL_OK;
    fl_otlp_src *s = calloc(1, sizeof *s);
    if (!s || !(s->store = fl_otlp_store_new())) {
        free(s);
        return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    }
    pthread_mutex_init(&s->mu, NULL);
    s->grace_ms = o->grace_ms >= 0 ? o->grace_ms : 1000;
    fl_status st = FL_OK;
    if (o->file && (st = fl_otlp_file_open(o->file, &s->file, e))) fl_fail(e, st, "--otlp-file: %s", e->msg);
    if (!st && o->listen && (st = fl_httpd_start(o->listen, NULL, handle_src, s, &s->httpd, e)))
        fl_fail(e, st, "--otlp-listen: %s", e->msg);
    if (st) {
        fl_otlp_src_free(s);
        return st;
    }
    *out = s;
    return FL_OK;
}

static int top_seen(fl_otlp_src *s, const char *tid, const char *parent) {
    uint64_t a = pair_hash(tid, parent), b = pair_hash(tid, "");
    int seen = 0;
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < RING && !seen; i++) seen = s->ring[i] == a || s->ring[i] == b;
    pthread_mutex_unlock(&s->mu);
    return seen;
}

static void poll_file(fl_otlp_src *s) {
    if (!s->file) return;
    fl_err e = {0};
    pthread_mutex_lock(&s->mu);
    if (fl_otlp_file_poll(s->file, s->store, &e) && !s->file_warned) {
        s->file_warned = 1; /* once: a collector writing garbage would flood the log */
        fl_log(1, "--otlp-file: %s (bad lines are skipped and counted)\n", e.msg);
    }
    pthread_mutex_unlock(&s->mu);
}

/* Merge the events of m into t by time, before its "done" (or at the end); the OUTPUT of m is
 * dropped when t has one already. shift_ms moves m's times (counted from its first span) onto
 * t's clock (counted from the request): events from stdout and from spans then interleave
 * as they happened, so an answer printed on stdout comes after the failed tool call a span
 * reported. Ties keep stdout's event first. */
static fl_status merge(fl_trace *t, fl_trace *m, double shift_ms, fl_err *e) {
    int has_output = fl_trace_output(t) != NULL, add = 0;
    for (int i = 0; i < m->n_events; i++) add += !(has_output && m->events[i].kind == FL_EV_OUTPUT);
    int at = t->n_events && t->events[t->n_events - 1].kind == FL_EV_DONE ? t->n_events - 1 : t->n_events;
    fl_event *ne = malloc((size_t)(t->n_events + add + 16) * sizeof *ne);
    if (!ne) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    int k = 0, a = 0, b = 0;
    while (a < at || b < m->n_events) {
        if (b < m->n_events && has_output && m->events[b].kind == FL_EV_OUTPUT) { b++; continue; } /* freed with m */
        double tb = b < m->n_events ? m->events[b].t_ms + shift_ms : 0;
        if (b < m->n_events && tb < 0) tb = 0; /* clocks a little apart */
        if (a < at && (b >= m->n_events || t->events[a].t_ms <= tb)) {
            ne[k++] = t->events[a++];
        } else {
            ne[k] = m->events[b];
            ne[k++].t_ms = tb;
            memset(&m->events[b++], 0, sizeof *m->events);
        }
    }
    for (int i = at; i < t->n_events; i++) ne[k++] = t->events[i];
    free(t->events);
    t->events = ne, t->cap_events = t->n_events + add + 16;
    t->n_events = k;
    t->tokens_in += m->tokens_in;
    t->tokens_out += m->tokens_out;
    return FL_OK;
}

/* Unix time now, in milliseconds. */
static double unix_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

fl_status fl_otlp_src_collect(fl_otlp_src *s, const fl_case *c, fl_trace *t, fl_err *e) {
    if (!s || !fl_traceparent_valid(c->traceparent)) return FL_OK;
    char tid[33], parent[17];
    memcpy(tid, c->traceparent + 3, 32), tid[32] = 0;
    memcpy(parent, c->traceparent + 36, 16), parent[16] = 0;
    /* spans already there when the case ended count as quiet for one polling step: a system
     * that flushed before "done" is collected at once */
    double t0 = fl_now(), changed = t0 - 0.002, deadline = t0 + s->grace_ms / 1000.0;
    /* when the request was sent, on the spans' clock: the case just ended, t->ms after it */
    double sent_ms = unix_ms() - t->ms;
    int last = -1;
    for (;;) {
        poll_file(s);
        double now = fl_now();
        int n = fl_otlp_store_count(s->store, tid);
        if (n != last && (last >= 0 || n == 0)) changed = now;
        last = n;
        if (now >= deadline) break;
        if (n > 0 && s->httpd && now - changed >= 0.002 && !fl_httpd_busy(s->httpd) &&
            top_seen(s, tid, parent))
            break;
        if (n > 0 && now - changed >= 0.100) break;
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    fl_otlp_span *spans = NULL;
    int n = 0;
    if (fl_otlp_store_take(s->store, tid, &spans, &n)) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    /* traces nobody collected (background work, another tool's cases) go after a minute or
     * ten grace periods, whichever is longer */
    fl_otlp_store_expire(s->store, s->grace_ms / 100.0 > 60 ? s->grace_ms / 100.0 : 60);
    if (!n) return FL_OK;
    atomic_fetch_add(&s->merged, n);
    fl_trace *m = fl_trace_new();
    fl_status st = m ? fl_otlp_map(spans, n, m, e) : fl_fail(e, FL_ERR_NOMEM, "out of memory");
    uint64_t first = UINT64_MAX;
    for (int i = 0; i < n; i++) first = spans[i].start_ns < first ? spans[i].start_ns : first;
    if (!st) st = merge(t, m, (double)first / 1e6 - sent_ms, e);
    fl_trace_free(m);
    fl_otlp_spans_free(spans, n);
    return st;
}

fl_status fl_otlp_src_run(fl_otlp_src *s, fl_target *t, const fl_case *c, fl_rng *r,
                          fl_trace *tr, fl_err *e) {
    if (!s) return fl_target_run(t, c, tr, e);
    fl_case *cc = fl_case_copy(c);
    if (!cc) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    fl_case_new_trace(cc, r);
    fl_status st = fl_target_run(t, cc, tr, e);
    if (!st) st = fl_otlp_src_collect(s, cc, tr, e);
    fl_case_free(cc);
    return st;
}

void fl_otlp_src_stats_get(fl_otlp_src *s, fl_otlp_src_stats *out) {
    memset(out, 0, sizeof *out);
    if (!s) return;
    fl_otlp_stats st;
    fl_otlp_store_stats(s->store, &st);
    out->spans = st.spans_in;
    out->merged = atomic_load(&s->merged);
    out->late = st.late;
    out->unmatched = st.unmatched;
    out->bad = st.bad + atomic_load(&s->bad);
}

int fl_otlp_src_port(const fl_otlp_src *s) { return s ? fl_httpd_port(s->httpd) : 0; }

void fl_otlp_src_free(fl_otlp_src *s) {
    if (!s) return;
    fl_httpd_stop(s->httpd); /* first: no handler may run on a freed store */
    fl_otlp_file_free(s->file);
    fl_otlp_store_free(s->store);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
