/* mutate.h — text mutators for `flare agents`: turn one case (a list of user turns) into a
 * slightly different one, the way AFL's havoc stage turns one file into another.
 *
 *     fl_mutator_ctx *m;
 *     fl_err e;
 *     if (fl_mutator_new(NULL, &m, &e) != FL_OK) ...;          // built-in lexicon, no -x dict
 *     if (fl_mutator_load_dict(m, "json.dict", &e) != FL_OK) ...; // optional: AFL `-x` file
 *     fl_case *child;
 *     const char *op;
 *     fl_mutate(m, &rng, parent, other_queue_entry, -1, &child, &op); // -1: havoc stack
 *     ... run child, keep it as "queue/id:…,src:…,op:<op>" if it added coverage ...
 *     fl_case_free(child);
 *
 * Every mutator is deterministic for a given fl_rng state (and ctx contents), UTF-8 aware
 * (turns are cut only at code-point boundaries, inserted text is valid UTF-8, so a valid
 * input gives a valid output; bytes that are not valid UTF-8 are treated as one-byte units
 * and never crash anything) and size-capped (opts.max_len bytes over all turns,
 * opts.max_turns turns), so havoc stacking cannot grow memory without bound.
 *
 * The context is read-only once loaded: one ctx may serve several threads as long as each
 * passes its own fl_rng. Operators and their names are listed in docs/agents-mutators.md.
 */
#ifndef FLARE_AGENTS_MUTATE_H
#define FLARE_AGENTS_MUTATE_H

#include "flare/agents/protocol.h"
#include "flare/agents/spec.h"

typedef struct fl_mutate_opts {
    size_t max_len;      /* cap on the bytes of all turns together (default 8192) */
    int max_turns;       /* cap on the number of turns (default 8) */
    int havoc_stack_pow; /* havoc applies 2^i ops, i uniform in 0..k (default k = 3: 1..8) */
    int mix_lang;        /* 0 (default): phrases and words keep to the language of the turn
                          * they go into (only the mix_lang operator mixes); 1: every
                          * operator picks the other language one time in four */
} fl_mutate_opts;

void fl_mutate_opts_default(fl_mutate_opts *o);

typedef struct fl_mutator_ctx fl_mutator_ctx;

/* A context with the built-in English + Chinese lexicon and no dictionary. opts NULL means
 * the defaults; max_len < 16 or max_turns < 1 or havoc_stack_pow outside 0..7 is FL_ERR_ARG. */
fl_status fl_mutator_new(const fl_mutate_opts *opts, fl_mutator_ctx **out, fl_err *e);
void fl_mutator_free(fl_mutator_ctx *m);

/* Extend the lexicon with synonym groups (format in docs/agents-mutators.md: one group per
 * line, entries separated by commas, '#' comment lines). Errors name file:line. */
fl_status fl_mutator_load_lexicon(fl_mutator_ctx *m, const char *path, fl_err *e);
fl_status fl_mutator_add_lexicon_text(fl_mutator_ctx *m, const char *text, size_t len,
                                      const char *name, fl_err *e);

/* Add tokens from an AFL dictionary (`-x`): `name="value"`, `name@level="value"` or bare
 * `"value"` lines, `#` comments, escapes \\ \" \xNN. Values must be non-empty valid UTF-8
 * without NUL. Errors name file:line. May be called several times (tokens accumulate). */
fl_status fl_mutator_load_dict(fl_mutator_ctx *m, const char *path, fl_err *e);
fl_status fl_mutator_add_dict_text(fl_mutator_ctx *m, const char *text, size_t len,
                                   const char *name, fl_err *e);
/* Add the words of the spec's agent names, tool names, decision points and choices
 * ("book_flight" -> "book", "flight", "book flight") to the dictionary the insertion and
 * replacement operators draw from; words already there are not added twice. */
fl_status fl_mutator_add_spec_words(fl_mutator_ctx *m, const fl_spec *spec, fl_err *e);
int fl_mutator_dict_size(const fl_mutator_ctx *m);
const char *fl_mutator_dict_token(const fl_mutator_ctx *m, int i);
/* Number of synonym groups (built-in plus loaded). */
int fl_mutator_lexicon_groups(const fl_mutator_ctx *m);

/* ---- operators ------------------------------------------------------------------------------ */
/* Operators are numbered 0 .. fl_mutate_op_count()-1; each has a short name without ',' or
 * ':' (it goes into queue file names as "op:<name>"). -1 is havoc ("havoc"). */
int fl_mutate_op_count(void);
const char *fl_mutate_op_name(int op);   /* NULL when out of range; "havoc" for -1 */
int fl_mutate_op_find(const char *name); /* op number, -1 for "havoc", -2 when unknown */

#define FL_MUTATE_HAVOC (-1)
#define FL_MUTATE_MAX_STACK 128

/* What one fl_mutate call did. */
typedef struct fl_mutate_info {
    const char *op_name; /* the op's name, or "havoc" */
    int n_ops;           /* operators that changed something, in order (havoc: the stack) */
    int ops[FL_MUTATE_MAX_STACK];
} fl_mutate_info;

/* Mutate `in` into a new case *out (caller frees with fl_case_free). splice_with is another
 * corpus entry for "splice" (NULL: splice is never chosen, and asking for it explicitly is
 * FL_ERR_UNSUPPORTED). op >= 0 applies exactly that operator; when it does not apply to this
 * input (e.g. a JSON operator and no turn is a JSON object, "turn_drop" with one turn) the
 * result is FL_ERR_UNSUPPORTED and *out is NULL. op = -1 (havoc) stacks random applicable
 * operators and always returns FL_OK with a case. Other failures: FL_ERR_NOMEM,
 * FL_ERR_ARG (op out of range). *op_name (may be NULL) gets the name to record.
 * The output keeps in's seed; its id and traceparent are cleared for the caller to assign. */
fl_status fl_mutate(const fl_mutator_ctx *m, fl_rng *rng, const fl_case *in,
                    const fl_case *splice_with, int op, fl_case **out, const char **op_name);
/* The same, reporting the stack (info may be NULL). */
fl_status fl_mutate_ex(const fl_mutator_ctx *m, fl_rng *rng, const fl_case *in,
                       const fl_case *splice_with, int op, fl_case **out, fl_mutate_info *info);

/* Tokens from outside the context, drawn like its dictionary's (the same operators, from
 * the union): the campaign's automatic dictionary from the traces. */
typedef struct fl_mutate_extra {
    const char *const *tok;
    int n;
} fl_mutate_extra;
/* fl_mutate_ex with extra tokens (x may be NULL). */
fl_status fl_mutate_with(const fl_mutator_ctx *m, const fl_mutate_extra *x, fl_rng *rng,
                         const fl_case *in, const fl_case *splice_with, int op, fl_case **out,
                         fl_mutate_info *info);

/* ---- the automatic dictionary from the traces (autodict.c) -------------------------------
 * Words and values the agents wrote (messages, tool arguments and results, outputs) in the
 * traces of kept cases: at most cap tokens (0: FL_AUTODICT_CAP), the newest replacing the
 * oldest; none that occurs in the case's own turns or that m's dictionary holds. Not
 * thread-safe: the caller serialises learn, snapshot and release; a snapshot is immutable and
 * stays valid until released, however the dictionary moves on. */
#define FL_AUTODICT_CAP 256
typedef struct fl_autodict fl_autodict;
fl_autodict *fl_autodict_new(int cap);
void fl_autodict_free(fl_autodict *a);
/* Learn from t, the trace of case c; returns the tokens added, -1 when out of memory. */
int fl_autodict_learn(fl_autodict *a, const fl_mutator_ctx *m, const fl_trace *t,
                      const fl_case *c);
int fl_autodict_size(const fl_autodict *a);
uint64_t fl_autodict_added(const fl_autodict *a); /* tokens learnt, evicted ones included */
/* The current tokens (NULL when none, or out of memory); release it after mutating. */
const fl_mutate_extra *fl_autodict_snapshot(fl_autodict *a);
void fl_autodict_release(fl_autodict *a, const fl_mutate_extra *x);

/* 1 when s[0..n) is valid UTF-8 (no overlong forms, surrogates or code points > U+10FFFF). */
int fl_utf8_valid(const char *s, size_t n);

#endif
