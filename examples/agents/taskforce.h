/* taskforce.h — the example multi-agent system that `flare agents` fuzzes.
 *
 * Three agents with rule-based stand-ins for LLM calls:
 *
 *     user ──► Master ──► Worker ──► Checker ──► Master ──► output
 *                 ▲          │  ▲        │
 *                 └──────────┘  └────────┘   (escalation on tool failure; revision)
 *
 * The Master splits a user turn into parts and routes each one (math / search / write / file /
 * translate / chat); the Worker does the work with its tools (calculate, search, write_file,
 * read_file, translate); the Checker reviews the Worker's draft and may ask for a revision.
 * Everything an agent does is reported on stdout as one protocol event per line
 * (docs/agents-protocol.md), ending each request with {"event":"done"}.
 *
 * Six defects are planted on purpose (README.md lists them with the inputs that reach them);
 * `--disable NAME,...` switches individual ones off so the correct behaviour can be compared.
 *
 * Build (from the repository root; README.md has the line):
 *     cc -std=c11 -O2 -o taskforce examples/agents/[a-z]*.c -lcjson -lm
 */
#ifndef TASKFORCE_H
#define TASKFORCE_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

/* ---- planted defects (bit per defect; all on by default) --------------------------------- */
enum {
    TF_BUG_LOOP = 1 << 0,     /* Checker <-> Worker revision cycle that never converges */
    TF_BUG_HANDOFF = 1 << 1,  /* Master hands off to "Translator", an undeclared agent */
    TF_BUG_TOOLERR = 1 << 2,  /* a failed tool call ends in an answer without recovery */
    TF_BUG_LEAK = 1 << 3,     /* prompt injection makes the Master print its API key */
    TF_BUG_CRASH = 1 << 4,    /* abort() on very long input or a bidi control character */
    TF_BUG_HANG = 1 << 5,     /* a follow-up turn "wait ..." blocks the Master forever */
    TF_BUG_ALL = (1 << 6) - 1
};
extern unsigned tf_bugs; /* the enabled defects */

/* ---- growable string --------------------------------------------------------------------- */
typedef struct tf_buf {
    char *s;  /* always NUL-terminated once anything was put (or tf_buf_cstr was called) */
    size_t n, cap;
} tf_buf;

void tf_buf_put(tf_buf *b, const char *s);
void tf_buf_putn(tf_buf *b, const char *s, size_t n);
void tf_buf_printf(tf_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *tf_buf_cstr(tf_buf *b); /* "" for an empty buffer */
void tf_buf_clear(tf_buf *b);
void tf_buf_free(tf_buf *b);

/* ---- protocol events (each printed as one JSON line and flushed) ------------------------- */
void tf_emit_message(const char *from, const char *to, const char *content);
void tf_emit_tool_call(const char *agent, const char *tool, cJSON *arguments /* consumed */);
void tf_emit_tool_result(const char *agent, const char *tool, int ok, const char *content);
void tf_emit_branch(const char *agent, const char *point, const char *choice);
void tf_emit_error(const char *agent, const char *message);
void tf_emit_output(const char *content);
void tf_emit_done(void);

/* ---- text helpers ------------------------------------------------------------------------ */
/* Case-insensitive (ASCII) substring test. */
int tf_has(const char *text, const char *word);
/* Lower-cased (ASCII only) malloc'd copy. */
char *tf_lower(const char *s);
/* Next code point of UTF-8 text at *p (advancing *p); invalid bytes decode as U+FFFD. */
uint32_t tf_utf8_next(const char **p);
/* Malloc'd copy of s with invalid UTF-8 replaced by U+FFFD. */
char *tf_utf8_clean(const char *s);
int tf_is_cjk(uint32_t cp);

/* ---- the request being handled ----------------------------------------------------------- */
#define TF_MAX_FILES 8
typedef struct tf_file {
    char path[64];
    tf_buf content;
} tf_file;

typedef struct tf_session {
    uint64_t rng;                 /* splitmix64 state seeded from the request's seed */
    tf_file files[TF_MAX_FILES];  /* the write_file / read_file sandbox, per request */
    int n_files;
    char context[512];            /* the previous part's text, for follow-ups */
    int multi_part;               /* the current turn was split into several parts */
} tf_session;

uint32_t tf_rand_below(tf_session *s, uint32_t n); /* phrasing variants only */

/* ---- Worker tools (tools.c): each emits its tool_call and tool_result events ------------- */
/* Every tool writes its result text to out and returns 1 (ok) or 0 (failed). */
typedef enum tf_calc_mode {
    TF_CALC_EXACT = 0, /* the default: division by zero, domain errors, |x| > 1e15 fail */
    TF_CALC_FLOAT,     /* never fails on arithmetic: "undefined: <why>" when not finite */
    TF_CALC_SYNTAX     /* parse only (arithmetic problems ignored) */
} tf_calc_mode;
int tf_tool_calculate(tf_session *s, const char *agent, const char *expr, tf_calc_mode mode, tf_buf *out);
int tf_tool_search(tf_session *s, const char *agent, const char *query, int broad, tf_buf *out);
int tf_tool_write_file(tf_session *s, const char *agent, const char *path, const char *content,
                       tf_buf *out);
int tf_tool_read_file(tf_session *s, const char *agent, const char *path, tf_buf *out);
int tf_tool_translate(tf_session *s, const char *agent, const char *text, const char *lang,
                      tf_buf *out);

/* The calculator itself (no events): 1 and the value, or 0 and an error message in err. In
 * float mode a non-finite value comes with its reason in err. */
int tf_calc(const char *expr, tf_calc_mode mode, double *value, char *err, size_t err_len);
void tf_format_number(double v, char *out, size_t n);

/* ---- Worker / Checker (agents.c) --------------------------------------------------------- */
typedef enum tf_route { TF_MATH, TF_SEARCH, TF_WRITE, TF_FILE, TF_TRANSLATE, TF_CHAT } tf_route;
extern const char *const tf_route_names[];

typedef enum tf_part_status { TF_PART_OK = 0, TF_PART_NOTFOUND, TF_PART_FAILED } tf_part_status;

/* The first word of text that looks like a file name ("notes.txt", "a.md"): 1 and its
 * offset and length, or 0. */
int tf_file_token(const char *text, size_t *at, size_t *len);
/* Does the text ask for a calculation (an operator between numbers, or "calculate 42")? */
int tf_is_math(const char *text);
/* Run one part through Worker and Checker; the approved answer (or the failure) goes to result. */
tf_part_status tf_work(tf_session *s, tf_route route, const char *part, tf_buf *result);

#endif
