/* mutate_int.h — internals shared by the mutator files (mutate*.c, lexicon*.c, dict.c).
 * Not part of the public API: see include/flare/agents/mutate.h. */
#ifndef FLARE_MUTATE_INT_H
#define FLARE_MUTATE_INT_H

#include <stdint.h>

#include "core/text.h"
#include "flare/agents/mutate.h"

/* ---- UTF-8 units (mutate_utf8.c) --------------------------------------------------------------
 * A "unit" is a valid UTF-8 sequence, or one byte of anything else. In valid text units are
 * exactly code points, so cutting only at unit boundaries never splits a code point, and
 * garbage input still has well-defined (one-byte) units. */
size_t mt_u8_seq(const char *s, size_t n, size_t i);    /* valid sequence length at i, 0 if none */
size_t mt_u8_unit(const char *s, size_t n, size_t i);   /* unit length at i (>= 1 when i < n) */
uint32_t mt_u8_decode(const char *s, size_t n, size_t i); /* code point at i, byte value if invalid */
size_t mt_u8_floor(const char *s, size_t n, size_t i);  /* largest unit boundary <= i */
size_t mt_u8_count(const char *s, size_t n);            /* number of units */
size_t mt_u8_offset(const char *s, size_t n, size_t k); /* byte offset of unit k (n when k >= count) */
int mt_u8_encode(uint32_t cp, char out[4]);             /* bytes written */

/* Code-point classes used for segmenting text into words and sentences. */
int mt_is_space_cp(uint32_t cp);
int mt_is_punct_cp(uint32_t cp); /* ASCII and CJK punctuation, general punctuation, marks */
static inline int mt_is_alnum(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
static inline unsigned char mt_lower(unsigned char c) {
    return (c >= 'A' && c <= 'Z') ? (unsigned char)(c + 32) : c;
}
static inline unsigned char mt_upper(unsigned char c) {
    return (c >= 'a' && c <= 'z') ? (unsigned char)(c - 32) : c;
}

/* Words: maximal runs of ASCII letters/digits/'/_ (kind 0), or single non-ASCII code points
 * that are neither space nor punctuation (kind 1: CJK text has no spaces, so one character
 * stands for a word). */
typedef struct mt_span {
    size_t at, len;
    int kind;
} mt_span;
/* Returns the number of words, -1 out of memory; *out malloc'd (NULL when 0). */
int mt_words(const char *s, size_t n, mt_span **out);
/* Sentences: split after . ! ? (ASCII ones only before space/end) and 。！？; each span
 * excludes surrounding whitespace. With clauses = 1 also split after , ; ，；、. */
int mt_sentences(const char *s, size_t n, int clauses, mt_span **out);

/* ---- building strings (core/text.h) ------------------------------------------------------ */
/* Append s with a space between it and what precedes when both sides are ASCII non-space
 * (so inserted English words do not glue to their neighbours, Chinese ones do). */
void mt_put_word(fl_sb *b, const char *s, size_t n);
/* s[0..n) with the word w inserted at byte at, each join spaced as mt_put_word does. */
void mt_insert_word(fl_sb *b, const char *s, size_t n, size_t at, const char *w);

/* ---- lexicon (lexicon.c) ----------------------------------------------------------------- */
typedef struct mt_lex_entry {
    char *text, *key;
    uint32_t len;
    int group;
} mt_lex_entry;

typedef struct mt_lexicon {
    mt_lex_entry *e;
    int n, cap, n_groups;
    int *gstart, *gmem; /* group g = entries gmem[gstart[g] .. gstart[g+1]) */
} mt_lexicon;

fl_status mt_lex_add_text(mt_lexicon *lx, const char *text, size_t len, const char *name, fl_err *e);
fl_status mt_lex_add_builtin(mt_lexicon *lx, fl_err *e);
void mt_lex_clear(mt_lexicon *lx);
/* Pick uniformly one lexicon match in s and a different member of its group. Returns 1 and
 * fills the span and replacement, 0 when nothing in s is in the lexicon. */
int mt_lex_pick(const mt_lexicon *lx, fl_rng *r, const char *s, size_t n, size_t *at,
                size_t *len, const char **repl, size_t *repl_len);

/* The built-in groups, in the user-file format (lexicon_en.c, lexicon_zh.c). */
extern const char *const mt_lexicon_en[];
extern const char *const mt_lexicon_zh[];

/* ---- dictionary (dict.c) ----------------------------------------------------------------- */
typedef struct mt_dict {
    char **tok;
    int n, cap;
} mt_dict;
fl_status mt_dict_add_text(mt_dict *d, const char *text, size_t len, const char *name, fl_err *e);
/* Add the words of an identifier ("book_flight", "convertCurrency", "read-file": split at
 * '_', '-', '.', '/', spaces and lower-to-upper case changes, lower-cased, two bytes or
 * more) that d does not hold yet; also the whole name with separators as spaces when it has
 * several words. Returns the number added, -1 out of memory. */
int mt_dict_add_ident(mt_dict *d, const char *ident);
void mt_dict_clear(mt_dict *d);

/* ---- the context and the operator table (mutate.c) --------------------------------------- */
struct fl_mutator_ctx {
    fl_mutate_opts o;
    mt_lexicon lex;
    mt_dict dict;
};

/* State of one mutation: the working case is changed in place by the operators. */
typedef struct mt_env {
    const fl_mutator_ctx *m;
    fl_rng *r;
    fl_case *c;
    const fl_case *other; /* splice partner or NULL */
    size_t budget;        /* bytes the turn being rewritten may grow to */
    const fl_mutate_extra *extra; /* more tokens (the automatic dictionary), NULL: none */
} mt_env;
/* A token of the dictionary and the extra tokens together (uniformly), NULL when both are
 * empty (dict.c). */
const char *mt_dict_pick(const mt_env *env);
static inline int mt_dict_count(const mt_env *env) {
    return env->m->dict.n + (env->extra ? env->extra->n : 0);
}

/* A text operator rewrites one turn s[0..n) into o; returns 1 when it produced a change,
 * 0 when it does not apply to this text (o untouched). A case operator changes env->c and
 * returns 1, 0 (not applicable) or -1 (out of memory). */
typedef int (*mt_text_fn)(mt_env *env, const char *s, size_t n, fl_sb *o);
typedef int (*mt_case_fn)(mt_env *env);

/* Case helpers (mutate_case.c): take ownership of s (malloc'd), -1 on allocation failure. */
int mt_case_set_turn(fl_case *c, int i, char *s);
int mt_case_insert_turn(fl_case *c, int at, char *s);
void mt_case_remove_turn(fl_case *c, int at);
/* Apply text operator op to one turn of env->c (used by multi-turn ops to vary a copy). */
int mt_apply_text(mt_env *env, mt_text_fn f);

/* Random helpers. */
static inline const char *mt_pick(fl_rng *r, const char *const *list, int n) {
    return list[fl_rng_below(r, (uint32_t)n)];
}
#define MT_PICK(r, arr) mt_pick((r), (arr), (int)(sizeof(arr) / sizeof(arr[0])))
/* 1 when s contains a CJK code point (used to prefer phrases in the text's language). */
int mt_has_cjk(const char *s, size_t n);
/* Choose from en or zh in the language of s (CJK text: zh, else en). With mix = 1 (the
 * mutator option mix_lang) the other language is chosen one time in four; with mix = 2
 * always (the mix_lang operator). */
const char *mt_pick_lang(fl_rng *r, int mix, const char *s, size_t n, const char *const *en,
                         int n_en, const char *const *zh, int n_zh);
/* 1 when s contains a Han ideograph (Chinese writing, not fullwidth forms or CJK spaces). */
int mt_has_han(const char *s, size_t n);
/* A member of a list that mixes languages (numbers, fill runs): one without Han characters
 * when s has none, unless the mutator's mix_lang option is set (a few tries, then any). */
struct mt_env;
const char *mt_pick_kept(const struct mt_env *env, const char *s, size_t n,
                         const char *const *list, int cnt);
/* ---- phrase lists (mutate_data.c) -------------------------------------------------------- */
#define MT_LIST(name) extern const char *const name[]; extern const int name##_n
MT_LIST(mt_words_en); MT_LIST(mt_words_zh);
MT_LIST(mt_contra_en); MT_LIST(mt_contra_zh);
MT_LIST(mt_ambig_en); MT_LIST(mt_ambig_zh);
MT_LIST(mt_hedge_en); MT_LIST(mt_hedge_zh);
MT_LIST(mt_vague_en); MT_LIST(mt_vague_zh);
MT_LIST(mt_urgent_pre_en); MT_LIST(mt_urgent_pre_zh);
MT_LIST(mt_urgent_suf_en); MT_LIST(mt_urgent_suf_zh);
MT_LIST(mt_impatient_en); MT_LIST(mt_impatient_zh);
MT_LIST(mt_novice_en); MT_LIST(mt_novice_zh);
MT_LIST(mt_attacker_en); MT_LIST(mt_attacker_zh);
MT_LIST(mt_inject_en); MT_LIST(mt_inject_zh);
MT_LIST(mt_inject_wrap);
MT_LIST(mt_extreme_num);
MT_LIST(mt_unicode_odd);
MT_LIST(mt_combining);
MT_LIST(mt_empty);
MT_LIST(mt_punct);
MT_LIST(mt_followup_en); MT_LIST(mt_followup_zh);
MT_LIST(mt_topic_en); MT_LIST(mt_topic_zh);
MT_LIST(mt_json_keys);
MT_LIST(mt_neg_prefix_en); MT_LIST(mt_neg_prefix_zh);
MT_LIST(mt_risky_any); MT_LIST(mt_risky_en); MT_LIST(mt_risky_zh); /* lexicon_risk.c */
#undef MT_LIST
#define MT_PICKL(r, name) mt_pick((r), (name), name##_n)
#define MT_PICKL_LANG(env, s, n, en, zh) \
    mt_pick_lang((env)->r, (env)->m->o.mix_lang, (s), (n), en, en##_n, zh, zh##_n)

/* Operator implementations. */
int mt_op_synonym(mt_env *, const char *, size_t, fl_sb *);
int mt_op_insert(mt_env *, const char *, size_t, fl_sb *);
int mt_op_mix_lang(mt_env *, const char *, size_t, fl_sb *);
int mt_op_risky(mt_env *, const char *, size_t, fl_sb *);
int mt_op_del_word(mt_env *, const char *, size_t, fl_sb *);
int mt_op_del_span(mt_env *, const char *, size_t, fl_sb *);
int mt_op_dup(mt_env *, const char *, size_t, fl_sb *);
int mt_op_reorder(mt_env *, const char *, size_t, fl_sb *);
int mt_op_typo(mt_env *, const char *, size_t, fl_sb *);
int mt_op_noise(mt_env *, const char *, size_t, fl_sb *);
int mt_op_negate(mt_env *, const char *, size_t, fl_sb *);
int mt_op_contradict(mt_env *, const char *, size_t, fl_sb *);
int mt_op_ambiguity(mt_env *, const char *, size_t, fl_sb *);
int mt_op_urgency(mt_env *, const char *, size_t, fl_sb *);
int mt_op_persona(mt_env *, const char *, size_t, fl_sb *);
int mt_op_num(mt_env *, const char *, size_t, fl_sb *);
int mt_op_empty(mt_env *, const char *, size_t, fl_sb *);
int mt_op_long(mt_env *, const char *, size_t, fl_sb *);
int mt_op_unicode(mt_env *, const char *, size_t, fl_sb *);
int mt_op_inject(mt_env *, const char *, size_t, fl_sb *);
int mt_op_json_add(mt_env *, const char *, size_t, fl_sb *);
int mt_op_json_del(mt_env *, const char *, size_t, fl_sb *);
int mt_op_json_retype(mt_env *, const char *, size_t, fl_sb *);
int mt_op_json_break(mt_env *, const char *, size_t, fl_sb *);
int mt_op_splice(mt_env *);
int mt_op_turn_add(mt_env *);
int mt_op_topic(mt_env *);
int mt_op_turn_drop(mt_env *);
int mt_op_turn_swap(mt_env *);
int mt_op_turn_dup(mt_env *);

#endif
