/* oracle.h — rule oracles: what counts as a failure of a multi-agent system in one case, read
 * from its trace (docs/agents-oracles.md has every definition, its options and its source).
 *
 *     fl_findings f = {0};
 *     fl_oracle_check(spec_or_NULL, c, trace, NULL, &f, &e);   // NULL opts: defaults
 *     for (int i = 0; i < f.n; i++)
 *         printf("%s %s [%s] %s\n", fl_finding_kind_name(f.v[i].kind), f.v[i].signature,
 *                f.v[i].mast ? f.v[i].mast : "-", f.v[i].message);
 *     fl_findings_free(&f);
 *
 * Each finding has a kind, the MAST failure mode it instantiates where one applies (Cemri et
 * al. 2025, "Why Do Multi-Agent LLM Systems Fail?", arXiv:2503.13657), a human-readable
 * message, and a signature for de-duplication: 16 hex digits hashing the kind and the
 * agents / edge / tool / pattern involved — never the content, the counts or the event
 * positions, so the same bug found through different inputs has the same signature.
 */
#ifndef FLARE_AGENTS_ORACLE_H
#define FLARE_AGENTS_ORACLE_H

#include "flare/agents/protocol.h"
#include "flare/agents/spec.h"

typedef enum fl_finding_kind {
    FL_FIND_CRASH = 0,     /* the target died before "done" */
    FL_FIND_HANG,          /* the per-case timeout expired */
    FL_FIND_NO_OUTPUT,     /* "done" without any output event */
    FL_FIND_EMPTY_OUTPUT,  /* the final output is empty or white space */
    FL_FIND_TURN_LIMIT,    /* more agent turns than the limit */
    FL_FIND_MESSAGE_LIMIT, /* more messages than the limit */
    FL_FIND_LOOP,          /* a cycle of messages between agents repeated N times */
    FL_FIND_TOOL_ERROR,    /* a failed tool call followed by an output without recovery */
    FL_FIND_PROTOCOL,      /* bad event lines, EOF without "done", byte cap hit */
    FL_FIND_SPEC,          /* an undeclared agent, edge, tool or decision */
    FL_FIND_FORBIDDEN,     /* a message, tool call, tool result or output matches a forbidden
                              pattern or the built-in secret detector */
    FL_FIND_OUTPUT_LENGTH, /* the output is longer than the limit */
    FL_FIND_LLM_JUDGE,     /* an LLM judge's majority verdict (llm.h), never a rule oracle */
    FL_FIND_EXPECT,        /* the case's own "expect" (expect.h) does not hold */
    FL_FIND_COUNT_
} fl_finding_kind;

/* "crash", "hang", "no_output", "empty_output", "turn_limit", "message_limit", "loop",
 * "tool_error", "protocol", "spec_violation", "forbidden_output", "output_length", "llm_judge", "expectation" (also the
 * names of the failures/<kind>/ folders). */
const char *fl_finding_kind_name(fl_finding_kind k);
/* Kind by name, or -1. */
int fl_finding_kind_parse(const char *name);

/* When a failed tool call counts as handled (docs/agents-oracles.md). */
typedef enum fl_recovery {
    FL_RECOVERY_SAME_TOOL = 0, /* default: a later successful result of the same tool (any agent) */
    FL_RECOVERY_ANY_TOOL,      /* a later successful result of any tool by the same agent */
    FL_RECOVERY_ERROR_EVENT    /* either of those, or an error event by the same agent (reported) */
} fl_recovery;

/* What repeats in a loop. */
typedef enum fl_loop_match {
    FL_LOOP_EDGES = 0, /* default: the from -> to sequence of the cycle's messages */
    FL_LOOP_CONTENT    /* the edges and the messages' exact contents */
} fl_loop_match;

typedef struct fl_oracle_opts {
    /* limits used when the spec does not set one (0 = no limit) */
    int max_turns;            /* default 50 */
    int max_messages;         /* default 100 */
    int64_t max_output_bytes; /* default 65536 */
    int loop_repetitions;     /* N >= 2, default 4 (spec: limits.loop_repetitions) */
    int loop_cycle;           /* longest cycle L, default 4 (spec: limits.loop_cycle) */
    fl_loop_match loop_match;
    fl_recovery recovery;
    unsigned kinds;           /* bitmask of (1u << fl_finding_kind) to check; default all */
    int no_secrets;           /* 1: no built-in secret detector (also the spec's "secrets": false) */
} fl_oracle_opts;

void fl_oracle_opts_default(fl_oracle_opts *o);

typedef struct fl_finding {
    fl_finding_kind kind;
    const char *mast;     /* "FM-1.3" etc. (static), or NULL */
    char signature[17];   /* 16 lower-case hex digits of the hash of key */
    char key[192];        /* what the signature hashes: "loop:Checker>Reviser" */
    char message[320];
    int event;            /* index of the event that shows it, -1 when none */
    /* crash, hang and protocol findings with stderr: the normalised end of the target's stderr
     * (fl_oracle_stderr_key) and its signature, a second grouping beside `signature` (the
     * same traceback reached through different agents is one group); "" otherwise */
    char stderr_key[192];
    char stderr_group[17];
} fl_finding;

typedef struct fl_findings {
    int n, cap;
    fl_finding *v;
} fl_findings;

void fl_findings_clear(fl_findings *f); /* n = 0, keeps the memory */
void fl_findings_free(fl_findings *f);

/* At most this many findings per case; the rest are dropped (one per signature anyway). */
#define FL_ORACLE_MAX_FINDINGS 64

/* Append t's findings to out (de-duplicated by signature within the case). spec, c and o may
 * be NULL. Fails only with FL_ERR_NOMEM, or FL_ERR_ARG for bad options. */
fl_status fl_oracle_check(const fl_spec *spec, const fl_case *c, const fl_trace *t, const fl_oracle_opts *o,
                          fl_findings *out, fl_err *e);

/* The normalised last frame and last line of a stderr text into out: for a Python traceback
 * 'File "agent.py", line #, in plan | ZeroDivisionError', for a JavaScript stack
 * 'at plan (agent.js:#:#) | TypeError', else the last line with digits as '#'. flare's own
 * "[flare: ...]" lines and blank lines are ignored. "" when there is no such line. */
void fl_oracle_stderr_key(const char *err, char *out, size_t n);

/* The signature of a key (what fl_finding.signature holds). */
void fl_oracle_signature(const char *key, char out[17]);

#endif
