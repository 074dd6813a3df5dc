/* llm.h — the LLM in the loop of `flare agents fuzz` (optional: everything works without it):
 * one client for an OpenAI-compatible server (llama.cpp server, vLLM, Ollama, a hosted API),
 * a generator that asks it for new user instructions, and a judge that asks it whether a case
 * that passed every rule oracle still looks wrong (docs/agents-llm.md).
 *
 *     fl_llm_opts o;
 *     fl_llm_opts_default(&o);
 *     o.base_url = "http://127.0.0.1:8080"; o.model = "qwen2.5"; o.max_calls = 200;
 *     fl_llm *l;
 *     if (fl_llm_new(&o, &l, &e)) ...;
 *     fl_llm_msg m[2] = {{"system", "You are a tester."}, {"user", "Say hi as JSON."}};
 *     char *reply;
 *     if (fl_llm_chat(l, 2, m, 1, &reply, &e) == FL_OK) ...;   // the message content, malloc'd
 *     fl_llm_free(l);
 *
 * The client is careful with what it is given:
 *   - it contacts only base_url (http or https; no redirects, no proxy from the environment);
 *   - the API key (FLARE_LLM_API_KEY, else OPENAI_API_KEY) goes into the Authorization header
 *     and nowhere else: never logged, never in error messages, never in the cache;
 *   - a hard budget (max_calls HTTP requests, max_tokens total tokens from the replies'
 *     "usage") ends LLM use for the rest of the run once reached;
 *   - successful replies are cached on disk (cache_dir/<hash>.json, written atomically), keyed
 *     by a hash of the base URL and the request body (model, messages, temperature, seed,
 *     response_format): a repeated campaign costs no call and no budget.
 *   - 429 (honouring Retry-After, capped), 5xx, timeouts and connection errors are retried
 *     with exponential backoff; other 4xx are not.
 *   - nothing fails silently: a request that failed (HTTP status, refused connection,
 *     timeout, a body that is no completion), a request refused by the spent budget and a
 *     reply without usable content are logged at the default level, each kind at most once
 *     per log_every_s, with the number of messages held back since (fl_llm_say).
 * One fl_llm may be used from several threads (its counters and budget are locked).
 */
#ifndef FLARE_AGENTS_LLM_H
#define FLARE_AGENTS_LLM_H

#include "flare/agents/protocol.h"
#include "flare/agents/oracle.h"
#include "flare/agents/spec.h"

typedef struct fl_llm_opts {
    const char *base_url;   /* "http://host:port" (a trailing "/" or "/v1" is accepted) */
    const char *model;      /* "model" of every request */
    double temperature;     /* default 0.7 */
    uint64_t seed;          /* "seed" of every request (the judge adds the vote number) */
    int64_t max_calls;      /* HTTP requests, retries included; 0: no limit (default 0) */
    int64_t max_tokens;     /* total tokens over the replies' usage; 0: no limit */
    int max_reply_tokens;   /* "max_tokens" of each request; 0: not sent (default 1024) */
    const char *cache_dir;  /* NULL: no cache */
    int timeout_ms;         /* whole request (default 60000) */
    int connect_timeout_ms; /* default 5000 */
    int retries;            /* after the first attempt (default 3) */
    int backoff_ms;         /* first retry delay, doubled each time (default 500) */
    int max_backoff_ms;     /* cap of a delay, Retry-After included (default 30000) */
    const char *api_key;    /* NULL: FLARE_LLM_API_KEY, else OPENAI_API_KEY, else none */
    double log_every_s;     /* fl_llm_say: one message per kind per this many seconds (60) */
} fl_llm_opts;

void fl_llm_opts_default(fl_llm_opts *o);

typedef struct fl_llm fl_llm;

fl_status fl_llm_new(const fl_llm_opts *o, fl_llm **out, fl_err *e);
void fl_llm_free(fl_llm *l);

typedef struct fl_llm_msg {
    const char *role;    /* "system", "user", "assistant" */
    const char *content;
} fl_llm_msg;

/* POST {base}/v1/chat/completions; *reply = choices[0].message.content (malloc'd). json_mode
 * asks for response_format {"type":"json_object"}. Fails with FL_ERR_IO when the server gave
 * no usable reply after the retries, or when the budget is exhausted (fl_llm_exhausted). */
fl_status fl_llm_chat(fl_llm *l, int n, const fl_llm_msg *msgs, int json_mode, char **reply,
                      fl_err *e);
/* The same with an explicit seed (votes of the judge). */
fl_status fl_llm_chat_seed(fl_llm *l, int n, const fl_llm_msg *msgs, int json_mode,
                           uint64_t seed, char **reply, fl_err *e);

/* POST {base}/v1/embeddings for one text: *v (malloc'd) of *dim floats. Cached and budgeted
 * like chat. */
fl_status fl_llm_embed(fl_llm *l, const char *text, float **v, int *dim, fl_err *e);

typedef struct fl_llm_stats {
    int64_t calls;      /* HTTP requests sent (retries included) */
    int64_t tokens;     /* usage.total_tokens summed over the replies */
    int64_t cache_hits; /* replies served from the cache */
    int64_t retries;    /* requests that were retries */
    int64_t failures;   /* fl_llm_chat / fl_llm_embed calls that failed */
    int64_t malformed;  /* replies without usable content (fl_llm_malformed) */
    int exhausted;      /* the budget ran out */
} fl_llm_stats;

void fl_llm_stats_get(fl_llm *l, fl_llm_stats *s);
uint64_t fl_llm_seed(const fl_llm *l); /* opts.seed */
int fl_llm_exhausted(fl_llm *l);

/* What went wrong, said at the default log level (fl_log 1) without flooding it: the first
 * message of a kind is printed, later ones of that kind within opts.log_every_s are held back
 * and counted, and the next one printed after that says how many were ("... (3 more like it
 * held back)"); fl_llm_free says what is still held back. */
typedef enum fl_llm_say_kind {
    FL_LLM_SAY_MALFORMED, /* a reply with no usable content (generator, judge) */
    FL_LLM_SAY_HTTP,      /* a request that failed after its retries */
    FL_LLM_SAY_BUDGET,    /* a request not sent: the budget is spent */
    FL_LLM_SAY_COUNT_
} fl_llm_say_kind;
void fl_llm_say(fl_llm *l, fl_llm_say_kind k, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A reply without usable content: counted in stats.malformed and said (FL_LLM_SAY_MALFORMED). */
void fl_llm_malformed(fl_llm *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- generator (llm_gen.c) -------------------------------------------------------------------
 * Ask for n_want new user instructions, as {"instructions":[...]} where an item is a string
 * (one turn) or an array of strings (several turns). The prompt names a tester persona (the
 * round picks one of fl_llm_persona_count(), in turn), ONE coverage gap of the spec as its
 * target (an allowed edge not seen, a declared tool not called, a decision choice not taken:
 * gap round % fl_llm_gen_gap_count(), with the spec's descriptions of the agents involved;
 * none without a spec or gaps), recent findings and a few corpus entries. A malformed reply is
 * asked again once with a correction; then the round gives nothing (*n_out = 0, FL_OK, said
 * and counted by fl_llm_malformed): only the transport and the budget fail. */
typedef struct fl_llm_gen_in {
    const fl_spec *spec;
    const struct fl_agcov *cov;
    const char *const *findings; /* "loop: Master<->Checker ..." lines */
    int n_findings;
    const fl_case *const *corpus;
    int n_corpus;
    int n_want;                  /* default 4 when 0 */
    uint64_t round;              /* picks the persona */
} fl_llm_gen_in;

typedef enum fl_llm_gap_kind { FL_LLM_GAP_EDGE, FL_LLM_GAP_TOOL, FL_LLM_GAP_CHOICE } fl_llm_gap_kind;
/* The gaps the prompt rotates through (0 without a spec); cov NULL: nothing seen yet. */
int fl_llm_gen_gap_count(const fl_spec *s, const struct fl_agcov *cov);

int fl_llm_persona_count(void);
const char *fl_llm_persona_name(int i); /* "demanding", "novice", "attacker" */
/* The prompt (system, user), malloc'd into msgs[0..1].content; for tests and the docs. */
fl_status fl_llm_gen_prompt(const fl_llm_gen_in *g, char **system, char **user, fl_err *e);
/* Parse a reply: cases (malloc'd array of owned cases, at most 64) or -1 when it holds none.
 * Accepted, in this order: the requested JSON (also a bare array of items, or the items under
 * another key); the same inside a ``` fence, with or without a language tag, with text around
 * it; a plain list of lines (numbered or bulleted lines, stripped of their markers; without
 * markers, at least two lines of two words or more). An item is a string, an array of
 * strings, or an object with "turns" or a string member. */
int fl_llm_gen_parse(const char *reply, fl_case ***out);
/* The request alone, for a prompt built earlier (the campaign builds it under its lock and
 * asks without it). */
fl_status fl_llm_gen_ask(fl_llm *l, const char *system, const char *user, fl_case ***out,
                         int *n_out, fl_err *e);
fl_status fl_llm_generate(fl_llm *l, const fl_llm_gen_in *g, fl_case ***out, int *n_out,
                          fl_err *e);

/* ---- judge (llm_judge.c) ---------------------------------------------------------------------- */
typedef enum fl_judge_cat {
    FL_JUDGE_GOAL_DEVIATION = 0,
    FL_JUDGE_LOGICAL_INCONSISTENCY,
    FL_JUDGE_DEADLOCK,
    FL_JUDGE_SAFETY_ISSUE,
    FL_JUDGE_CAT_COUNT_
} fl_judge_cat;

const char *fl_judge_cat_name(fl_judge_cat c);

typedef struct fl_llm_verdict {
    int is_anomaly;
    double confidence;   /* in [0, 1] */
    unsigned categories; /* bits 1u << fl_judge_cat */
    char reason[240];
} fl_llm_verdict;

/* Parse {"is_anomaly":bool,"confidence":number,"categories":[...],"reason":string}; -1 when
 * the reply is not that (unknown categories, confidence outside [0,1], missing keys). */
int fl_llm_verdict_parse(const char *reply, fl_llm_verdict *v);

typedef struct fl_llm_judge_opts {
    double threshold; /* confidence needed (default 0.8) */
    int votes;        /* k verdicts (seeds seed, seed+1, ...); a strict majority must agree */
} fl_llm_judge_opts;

/* Judge one case. *found = 1 and *f filled (kind FL_FIND_LLM_JUDGE, categories of the
 * agreeing verdicts in the key and the message) when more than votes/2 verdicts say
 * is_anomaly with confidence >= threshold. Malformed verdicts are asked again once, then
 * count as abstentions (logged). Fails only on transport / budget errors. */
fl_status fl_llm_judge(fl_llm *l, const fl_spec *spec, const fl_case *c, const fl_trace *t,
                       const fl_llm_judge_opts *o, fl_finding *f, int *found, fl_err *e);

#endif
