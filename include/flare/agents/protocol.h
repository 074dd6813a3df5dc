/* agents/protocol.h — the shared vocabulary of `flare agents`: a case (what flare sends to the agent
 * system under test) and a trace (what the system reported doing while handling it).
 *
 * Everything in src/agents/ speaks these types:
 *
 *     request  ──► target (process, JSON lines) ──► trace ──┬─► coverage features (new?)
 *        ▲                                                   └─► oracles (findings)
 *        └── mutators ◄── queue (kept when a case added coverage)
 *
 * The wire protocol is documented in docs/agents-protocol.md. A trace is parsed from the
 * event lines; anything wrong with them (not JSON, a missing field, output after "done", no
 * "done") is recorded in the trace as a protocol problem, never a crash.
 */
#ifndef FLARE_AGENTS_PROTOCOL_H
#define FLARE_AGENTS_PROTOCOL_H

#include "flare/flare.h"

/* ---- a case: the input ------------------------------------------------------------------ */
typedef struct fl_case {
    char id[16];      /* "000042" */
    int n_turns;
    char **turns;     /* user messages, UTF-8, owned */
    uint64_t seed;    /* passed to the target (its own randomness) */
    char traceparent[64]; /* W3C "00-<32 hex>-<16 hex>-01", a new trace id per case */
    struct fl_expect *expect; /* the seed file's "expect" (expect.h), owned; NULL: none. Never
                                 sent to the target */
} fl_case;

fl_case *fl_case_new(int n_turns, const char *const *turns);
fl_case *fl_case_copy(const fl_case *c);
void fl_case_free(fl_case *c);
/* The bytes of all its turns (what a case's length means for --max-len and trimming). */
size_t fl_case_bytes(const fl_case *c);
/* The request line (without the trailing newline), malloc'd. */
char *fl_case_to_json(const fl_case *c);
/* The case as a file holds it (a queue entry, a saved failure): the request and the case's
 * "expect", which the target never sees; fl_case_parse reads it back. malloc'd. */
char *fl_case_to_file_json(const fl_case *c);
/* Parse a request / saved case: {"turns":[...]} (id, seed, traceparent optional) or, when
 * the text is not a JSON object, a single-turn case holding the whole text. */
fl_status fl_case_parse(const char *text, size_t len, const char *name, fl_case **out, fl_err *e);

/* ---- a trace: what the system did --------------------------------------------------------- */
typedef enum fl_event_kind {
    FL_EV_MESSAGE = 0, /* from -> to, content */
    FL_EV_TOOL_CALL,   /* agent, tool, arguments (JSON text) */
    FL_EV_TOOL_RESULT, /* agent, tool, ok, content */
    FL_EV_BRANCH,      /* agent, point, choice */
    FL_EV_ERROR,       /* agent, message (in content) */
    FL_EV_OUTPUT,      /* content: final answer to the user */
    FL_EV_DONE
} fl_event_kind;

/* The decision point of the branch events flare derives from LLM spans (which tools the model
 * called, or "answer"): counted in coverage always, checked by the oracle only for agents whose
 * spec declares this point among their decisions. */
#define FL_POINT_LLM_TOOL_CHOICE "llm.tool_choice"

typedef struct fl_event {
    fl_event_kind kind;
    char *agent;    /* MESSAGE: from; others: agent (NULL for OUTPUT/DONE) */
    char *to;       /* MESSAGE only */
    char *tool;     /* TOOL_CALL / TOOL_RESULT */
    char *point;    /* BRANCH */
    char *choice;   /* BRANCH */
    char *content;  /* MESSAGE / TOOL_RESULT / ERROR message / OUTPUT */
    char *arguments;/* TOOL_CALL arguments as compact JSON text */
    int ok;         /* TOOL_RESULT */
    double t_ms;    /* milliseconds since the request was sent */
} fl_event;

/* How the case ended, from flare's side. */
typedef enum fl_exit_kind {
    FL_EXIT_DONE = 0,  /* a "done" event arrived */
    FL_EXIT_CRASH,     /* the target process died (signal or exit) before "done" */
    FL_EXIT_HANG,      /* the per-case timeout expired */
    FL_EXIT_EOF,       /* the target closed stdout without "done" */
    FL_EXIT_LIMIT      /* the per-case byte cap was hit */
} fl_exit_kind;

typedef struct fl_trace {
    int n_events, cap_events;
    fl_event *events;
    fl_exit_kind exit;
    int exit_status;       /* wait status detail: exit code or signal number */
    int n_protocol;        /* protocol problems seen (bad JSON, missing field, after done …) */
    char protocol_msg[256];/* the first one, human-readable */
    double ms;             /* wall time of the case */
    size_t bytes;          /* bytes read from the target for this case */
    int64_t tokens_in, tokens_out; /* model tokens used (gen_ai.usage.* of OTLP spans), 0 if unknown */
    char *err;             /* the target's stderr during the case (its last FL_TRACE_STDERR_MAX
                              bytes), NUL-terminated; NULL or "" when not captured (target.h) */
    size_t err_len, err_cap, err_dropped; /* err_dropped: earlier bytes that did not fit */
} fl_trace;

#define FL_TRACE_STDERR_MAX 16384
/* Append stderr bytes to t->err, keeping the last FL_TRACE_STDERR_MAX. FL_ERR_NOMEM or FL_OK. */
fl_status fl_trace_stderr_add(fl_trace *t, const char *buf, size_t n);

fl_trace *fl_trace_new(void);
void fl_trace_free(fl_trace *t);
void fl_trace_clear(fl_trace *t);
/* Feed one line of target output (without newline). Protocol problems are recorded in t,
 * not returned: the return value is FL_ERR_NOMEM or FL_OK only. Sets *done when the line
 * was the "done" event. */
fl_status fl_trace_feed_line(fl_trace *t, const char *line, size_t len, double t_ms, int *done);
/* The trace as a JSON array of events (for failure files and `flare agents run`). */
char *fl_trace_to_json(const fl_trace *t);
/* The final output text (the last OUTPUT event), or NULL. */
const char *fl_trace_output(const fl_trace *t);

/* ---- helpers for cases and traces ---------------------------------------------------------- */
/* "done", "crash", "hang", "eof", "limit". */
const char *fl_exit_kind_name(fl_exit_kind k);
/* "exited with status 3", "killed by signal 11 (Segmentation fault)", "timed out after
 * 1000 ms", ... into buf. */
const char *fl_trace_describe_exit(const fl_trace *t, char *buf, size_t n);
/* Record a protocol problem in t (counted; the first message is kept). */
void fl_trace_problem(fl_trace *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The whole result as one JSON object, malloc'd: {"case":{request}, "exit":"crash",
 * "exit_status":-11, "ms":..., "bytes":..., "protocol_problems":N, "protocol_first":"...",
 * "events":[fl_trace_to_json]}. c may be NULL (no "case" member). */
char *fl_trace_report_json(const fl_case *c, const fl_trace *t);

/* A new random W3C traceparent for c (trace id and parent id from r, flags 01). */
void fl_case_new_trace(fl_case *c, fl_rng *r);
/* 1 when tp is a valid version-00 traceparent. */
int fl_traceparent_valid(const char *tp);
/* A malloc'd copy of s[0..n) that is valid UTF-8: invalid sequences and NUL bytes become
 * U+FFFD. Every string flare puts in JSON goes through it. */
char *fl_utf8_dup(const char *s, size_t n);

#endif
