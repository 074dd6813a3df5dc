/* otlp_recv.h — where a case's spans come from: the built-in OTLP/HTTP receiver
 * (--otlp-listen), a JSON-lines file the OpenTelemetry Collector writes (--otlp-file), or both,
 * and how they join the case's trace (docs/agents-otel.md, "The receiver").
 *
 *     fl_otlp_src_opts so = {.listen = "127.0.0.1:4318", .file = NULL, .grace_ms = 1000};
 *     fl_otlp_src *src;
 *     if (fl_otlp_src_new(&so, &src, &e)) ...;       // the receiver listens from here on
 *     fl_target_run(t, c, trace, &e);                   // the system exports spans meanwhile
 *     fl_otlp_src_collect(src, c, trace, &e);           // the case's spans, mapped, merged
 *     ...
 *     fl_otlp_src_free(src);
 *
 * Correlation is by trace id only: flare gives every case a traceparent (target.h), the system
 * under test continues that trace, so every span with the case's trace id belongs to the case.
 * Spans of other trace ids (the system's background work, cases of another flare) wait in the
 * store and are dropped as unmatched after a while; spans that arrive for a case already
 * collected are counted as late and dropped.
 */
#ifndef FLARE_AGENTS_OTLP_RECV_H
#define FLARE_AGENTS_OTLP_RECV_H

#include "flare/agents/protocol.h"
#include "flare/agents/httpd.h"
#include "flare/agents/target.h"

struct fl_otlp_store;

/* ---- the receiver ---------------------------------------------------------------------------
 * An fl_httpd answering OTLP/HTTP: POST /v1/traces with an application/json body (the OTLP
 * JSON encoding; gzip allowed) is parsed into st → 200 {} (an empty ExportTraceServiceResponse);
 * a body that does not parse → 400; application/x-protobuf (and any other type) → 415 with a
 * message saying to switch the exporter to http/json; another path → 404; another method → 405.
 * Error bodies are google.rpc.Status JSON ({"code":N,"message":"..."}), which OTLP exporters
 * log. Stop it with fl_httpd_stop. */
fl_status fl_otlp_listen(const char *addr, struct fl_otlp_store *st, fl_httpd **out, fl_err *e);

/* ---- spans for cases ------------------------------------------------------------------------ */
typedef struct fl_otlp_src_opts {
    const char *listen;  /* receiver address, or NULL */
    const char *file;    /* OTLP JSON-lines file to follow, or NULL */
    int grace_ms;        /* how long after a case ended its spans may still come (default 1000) */
} fl_otlp_src_opts;

typedef struct fl_otlp_src fl_otlp_src;

/* Start the receiver and/or open the file (it need not exist yet). Neither given: *out is
 * NULL and every other call is a no-op, so callers need no "if". */
fl_status fl_otlp_src_new(const fl_otlp_src_opts *o, fl_otlp_src **out, fl_err *e);
/* After case c ended with trace t: wait for c's spans — until its top span (the one whose
 * parent is the traceparent's span, or a root) has arrived, no export is half-received and
 * no more came for 2 ms; or 100 ms without a new one; or until grace_ms passed —, take
 * them, map them to events (fl_otlp_map) and insert them before t's "done" event. The stdout events stay; a mapped "output" event is dropped when
 * the target already printed one (the final answer is one thing, whichever channel says it).
 * Thread-safe: parallel workers collect their own cases. FL_ERR_NOMEM only; a bad file line
 * is logged once, not returned. */
fl_status fl_otlp_src_collect(fl_otlp_src *s, const fl_case *c, fl_trace *t, fl_err *e);

/* fl_target_run + fl_otlp_src_collect for tools that run one saved case many times (replay,
 * min): with a source, c runs as a copy under a new trace id drawn from r, because a trace id
 * is collected once (its stragglers then count as late). Without one (s NULL), plainly. */
fl_status fl_otlp_src_run(fl_otlp_src *s, fl_target *t, const fl_case *c, fl_rng *r,
                          fl_trace *tr, fl_err *e);

typedef struct fl_otlp_src_stats {
    long spans;      /* spans received (receiver and file) */
    long merged;     /* spans taken into cases */
    long late;       /* spans that came after their case was collected */
    long unmatched;  /* spans of trace ids no case collected, dropped after a while */
    long bad;        /* requests / lines that did not parse */
} fl_otlp_src_stats;
void fl_otlp_src_stats_get(fl_otlp_src *s, fl_otlp_src_stats *out);
int fl_otlp_src_port(const fl_otlp_src *s); /* the receiver's port, 0 when none */
void fl_otlp_src_free(fl_otlp_src *s);

#endif
