/* otlp.h — OpenTelemetry traces as a source of agent events: OTLP/JSON parsing, a span store
 * keyed by trace id, and the mapping of one trace's spans to fl_trace events.
 *
 *     fl_otlp_store *st = fl_otlp_store_new();
 *     // a receiver thread, or a file poller, adds spans as they arrive:
 *     fl_otlp_store_add_json(st, body, len, "POST /v1/traces", &e);
 *     fl_otlp_file *f; fl_otlp_file_open("spans.jsonl", &f, &e);
 *     fl_otlp_file_poll(f, st, &e);                    // new complete lines only
 *     // the campaign thread, after a case (and a grace period):
 *     fl_otlp_span *sp; int n;
 *     fl_otlp_store_take(st, trace_id_of_case, &sp, &n); // removes them from the store
 *     fl_otlp_map(sp, n, trace, &e);                   // appends events (+ tokens) to trace
 *     fl_otlp_spans_free(sp, n);
 *
 * What is accepted (docs/agents-otel.md has the details and sources):
 *   - the OTLP JSON encoding of ExportTraceServiceRequest: {"resourceSpans":[{"resource":
 *     {...},"scopeSpans":[{"scope":{...},"spans":[...]}]}]}; the older "instrumentationLibrary
 *     Spans" name of scopeSpans too; unknown fields are ignored;
 *   - traceId / spanId / parentSpanId as hex (32 / 16 digits, either case; stored lower-case)
 *     or, as protobuf-JSON mappers that follow the proto3 bytes rule write them, base64 of the
 *     16 / 8 bytes; an all-zero or empty parentSpanId means "no parent";
 *   - 64-bit integers (times, intValue) as decimal strings or as JSON numbers;
 *   - attribute values stringValue, intValue, doubleValue, boolValue, arrayValue, kvlistValue,
 *     bytesValue.
 * A malformed request is an FL_ERR_FORMAT naming the source and the JSON path of the problem
 * ("spans.jsonl:3: resourceSpans[0].scopeSpans[0].spans[2].traceId: not 32 hex digits");
 * nothing of that request is kept.
 *
 * The store is thread-safe (one mutex): the HTTP receiver adds while the campaign takes.
 */
#ifndef FLARE_AGENTS_OTLP_H
#define FLARE_AGENTS_OTLP_H

#include <stdint.h>
#include <stdio.h>

#include "flare/agents/protocol.h"

/* ---- spans ------------------------------------------------------------------------------- */
typedef enum fl_otlp_type {
    FL_OTLP_STR = 0, FL_OTLP_INT, FL_OTLP_DOUBLE, FL_OTLP_BOOL,
    FL_OTLP_ARRAY,   /* text: the values as a compact JSON array ("[\"a\",1]") */
    FL_OTLP_KVLIST,  /* text: a compact JSON object */
    FL_OTLP_BYTES    /* text: the base64 as sent */
} fl_otlp_type;

typedef struct fl_otlp_attr {
    char *key;
    fl_otlp_type type;
    char *text;  /* STR: the string; INT/DOUBLE/BOOL: decimal text ("42", "0.5", "true"); else JSON */
    int64_t i;   /* INT, BOOL (0/1) */
    double d;    /* INT, DOUBLE */
} fl_otlp_attr;

typedef struct fl_otlp_event { /* a span event ("exception", "gen_ai.content.prompt" …) */
    char *name;
    uint64_t time_ns;
    int n_attrs;
    fl_otlp_attr *attrs;
} fl_otlp_event;

typedef struct fl_otlp_span {
    char trace_id[33], span_id[17], parent_id[17]; /* lower-case hex; parent_id "" for a root */
    char *name;
    int kind;                   /* SpanKind 0..5 (1 internal, 2 server, 3 client …) */
    uint64_t start_ns, end_ns;  /* Unix nanoseconds */
    int status_code;            /* 0 unset, 1 ok, 2 error */
    char *status_msg;           /* NULL when absent */
    char *service;              /* resource attribute service.name, NULL when absent */
    char *scope;                /* instrumentation scope name, NULL when absent */
    int n_attrs;
    fl_otlp_attr *attrs;
    int n_events;
    fl_otlp_event *events;
} fl_otlp_span;

/* Parse one ExportTraceServiceRequest. source names the input in error messages ("file:line",
 * "POST /v1/traces"). On success *spans (malloc'd, free with fl_otlp_spans_free) holds *n
 * spans (possibly 0). */
fl_status fl_otlp_parse(const char *json, size_t len, const char *source, fl_otlp_span **spans,
                        int *n, fl_err *e);
/* The same for the protobuf encoding (OTLP/HTTP application/x-protobuf): a bad message is
 * FL_ERR_FORMAT naming source; the spans go through fl_otlp_parse's checks. */
fl_status fl_otlp_parse_protobuf(const uint8_t *buf, size_t len, const char *source,
                                 fl_otlp_span **spans, int *n, fl_err *e);
void fl_otlp_spans_free(fl_otlp_span *spans, int n);
/* Free what one span owns (not the struct itself). */
void fl_otlp_span_clear(fl_otlp_span *s);

/* The attribute named key, or NULL. */
const fl_otlp_attr *fl_otlp_attr_get(const fl_otlp_span *s, const char *key);
/* Its text (any type), or NULL when absent. */
const char *fl_otlp_attr_str(const fl_otlp_span *s, const char *key);
/* 1 and *v when present as an int (or a string/double holding an integer), else 0. */
int fl_otlp_attr_int(const fl_otlp_span *s, const char *key, int64_t *v);

/* 1 when s is 32 (or 16) hex digits, for callers checking a trace (or span) id. */
int fl_otlp_hex_id(const char *s, int digits);

/* ---- the store --------------------------------------------------------------------------- */
typedef struct fl_otlp_store fl_otlp_store;

typedef struct fl_otlp_stats {
    long spans_in;     /* spans added, all told */
    long pending;      /* spans held now, waiting to be taken */
    long traces;       /* distinct trace ids held now */
    long late;         /* spans that arrived for a trace id already taken (dropped) */
    long unmatched;    /* spans dropped by fl_otlp_store_expire (no case ever took them) */
    long dropped;      /* spans dropped because the store was full */
    long bad;          /* requests that failed to parse (fl_otlp_store_add_json) */
} fl_otlp_stats;

fl_otlp_store *fl_otlp_store_new(void);
void fl_otlp_store_free(fl_otlp_store *st);
/* Move spans into the store (they are owned by it afterwards; spans[] itself is freed too).
 * Spans of a trace id taken before are counted as late and freed. Never fails: when the
 * store is full (max_spans, default 1,000,000) spans are dropped and counted. */
void fl_otlp_store_add(fl_otlp_store *st, fl_otlp_span *spans, int n);
/* Parse and add; a parse failure is counted in stats.bad and returned. */
fl_status fl_otlp_store_add_json(fl_otlp_store *st, const char *json, size_t len,
                                 const char *source, fl_err *e);
/* Remove and return every span of trace_id (32 hex, either case) in arrival order; *spans is
 * NULL and *n 0 when there are none. The id is remembered (the last 4096 taken) so that
 * stragglers count as late. Returns FL_ERR_NOMEM only. */
fl_status fl_otlp_store_take(fl_otlp_store *st, const char *trace_id, fl_otlp_span **spans,
                             int *n);
/* Number of spans held for trace_id now (for "wait until the spans of this case arrived"). */
int fl_otlp_store_count(fl_otlp_store *st, const char *trace_id);
/* Drop traces whose last span arrived more than max_age_s ago (fl_now clock), counting their
 * spans as unmatched: spans of the system's own background work, or of cases long gone. */
void fl_otlp_store_expire(fl_otlp_store *st, double max_age_s);
void fl_otlp_store_set_max(fl_otlp_store *st, long max_spans);
void fl_otlp_store_stats(fl_otlp_store *st, fl_otlp_stats *out);

/* ---- --otlp-file: JSON lines, read incrementally ------------------------------------------ */
typedef struct fl_otlp_file fl_otlp_file;

/* The file need not exist yet (the Collector may create it later). */
fl_status fl_otlp_file_open(const char *path, fl_otlp_file **out, fl_err *e);
/* Read the complete lines appended since the last poll into st (a trailing partial line waits
 * for its newline). A file that shrank (rotated, truncated) is read again from the start.
 * Every good line is added; a bad line is skipped, counted in st's stats.bad, and the first
 * one's error ("PATH:LINE: ...") is returned as FL_ERR_FORMAT after the whole poll. */
fl_status fl_otlp_file_poll(fl_otlp_file *f, fl_otlp_store *st, fl_err *e);
long fl_otlp_file_lines(const fl_otlp_file *f); /* complete lines read so far */
void fl_otlp_file_free(fl_otlp_file *f);

/* ---- spans -> events ----------------------------------------------------------------------- */
/* Append the events of one trace's spans to out (see docs/agents-otel.md for the rules):
 * MESSAGE edges (handoffs, parent/child and sibling agents, user -> first agent), TOOL_CALL
 * and TOOL_RESULT for tool spans, ERROR for failed agent spans, OUTPUT from the root /
 * workflow span's output, in start-time order; t_ms counts from the earliest span start.
 * Token usage is added to out->tokens_in / tokens_out. No DONE event is added: the caller
 * decides when a case is over. If out already ends with DONE the new events go before it.
 * Returns FL_ERR_NOMEM only. */
fl_status fl_otlp_map(const fl_otlp_span *spans, int n, fl_trace *out, fl_err *e);

/* How a span was classified (exposed for tests and `flare agents` diagnostics). */
typedef enum fl_otlp_role {
    FL_OTLP_OTHER = 0, FL_OTLP_WORKFLOW, FL_OTLP_AGENT, FL_OTLP_TOOL, FL_OTLP_LLM,
    FL_OTLP_CREATE_AGENT, FL_OTLP_HANDOFF
} fl_otlp_role;
fl_otlp_role fl_otlp_classify(const fl_otlp_span *s);
/* The same, and the name of the convention whose table matched ("gen_ai", "openinference",
 * "langgraph", "traceloop", "vercel-ai", "openai-agents", "gen_ai-name"), NULL when none did.
 * The tables are in src/agents/otel/otlp_conv.c, documented in docs/agents-otel.md. */
fl_otlp_role fl_otlp_classify_conv(const fl_otlp_span *s, const char **convention);
const char *fl_otlp_role_name(fl_otlp_role r);
/* The roles fl_otlp_map uses for one trace's spans: each span's table role, then what the
 * trace's shape derives (a root agent over agents, a CHAIN under the case's span: workflow).
 * roles has n entries. Returns FL_ERR_NOMEM only. */
fl_status fl_otlp_roles(const fl_otlp_span *spans, int n, fl_otlp_role *roles, fl_err *e);
/* What a span says, looked up through the conventions' tables. */
typedef enum fl_otlp_field {
    FL_OTLP_F_AGENT = 0, FL_OTLP_F_TOOL, FL_OTLP_F_ARGS, FL_OTLP_F_RESULT, FL_OTLP_F_INPUT,
    FL_OTLP_F_OUTPUT, FL_OTLP_F_ARGS_MIME, FL_OTLP_F_PARENT_AGENT, FL_OTLP_F_COUNT
} fl_otlp_field;
/* The first non-empty value, or NULL. */
const char *fl_otlp_field_get(const fl_otlp_span *s, fl_otlp_field f);
/* The first value present, empty or not (an empty answer is an answer), or NULL. */
const char *fl_otlp_field_raw(const fl_otlp_span *s, fl_otlp_field f);
/* The agent / tool name a span names by the precedence rules, or NULL. */
const char *fl_otlp_agent_name(const fl_otlp_span *s);
const char *fl_otlp_tool_name(const fl_otlp_span *s);
/* What an LLM span's model chose, by the conventions' tables: the names of the tools it
 * called, sorted, distinct, joined by '+' ("calculate", "lookup+search"), or "answer" when it
 * replied without calling one. Returns 1 with *choice malloc'd, 0 when the span does not
 * record its reply (*choice NULL), -1 out of memory. fl_otlp_map turns it into a branch event
 * at point FL_POINT_LLM_TOOL_CHOICE. */
int fl_otlp_llm_choice(const fl_otlp_span *s, char **choice);


/* ---- flare agents spans ------------------------------------------------------------------- */
/* Print to out, per trace in path (a .json file with one OTLP/JSON request, another file with
 * one per line, or a folder of *.json / *.jsonl), the span tree with each span's role and
 * matching convention, then the mapped events; with spec_path, events naming an undeclared
 * agent, edge or tool are marked. Errors name the file (and line) and what is wrong. */
fl_status fl_otlp_show(const char *path, const char *spec_path, FILE *out, fl_err *e);

#endif
