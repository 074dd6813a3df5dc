/* Text operators that change what the user means or who they seem to be: negate, contradict,
 * ambiguity, urgency, persona, inject. Phrases come from mutate_data.c, in the language of the
 * turn three times out of four (mixed-language turns are realistic input too). */
#include <stdlib.h>
#include <string.h>

#include "agents/mutate/mutate_int.h"

/* Where to put a phrase: start, end, or after a random sentence. */
static size_t phrase_pos(fl_rng *r, const char *s, size_t n, fl_sb *o) {
    uint32_t w = fl_rng_below(r, 10);
    if (w < 2) return 0;
    if (w < 7) return n;
    mt_span *v;
    int k = mt_sentences(s, n, 0, &v);
    if (k < 0) o->oom = 1;
    size_t at = n;
    if (k > 0) {
        mt_span x = v[fl_rng_below(r, (uint32_t)k)];
        at = x.at + x.len;
    }
    free(v);
    return at;
}

/* Prefix a phrase; an initial capital of the turn becomes lower case ("Add" -> "... add")
 * unless it looks like a name or an acronym (the next letter is not lower case). */
static void put_prefix(fl_sb *o, const char *s, size_t n, const char *phrase) {
    fl_sb_puts(o, phrase);
    mt_put_word(o, s, n);
    if (o->oom || n < 2) return;
    char last = phrase[strlen(phrase) - 1];
    if (s[0] >= 'A' && s[0] <= 'Z' && s[1] >= 'a' && s[1] <= 'z' && !strchr(".:!?", last)) {
        size_t i = o->n - n;
        o->p[i] = (char)mt_lower((unsigned char)o->p[i]);
    }
}

static int word_eq(const char *s, size_t len, const char *w) {
    if (strlen(w) != len) return 0;
    for (size_t i = 0; i < len; i++)
        if (mt_lower((unsigned char)s[i]) != (unsigned char)w[i]) return 0;
    return 1;
}

/* Negations that can be removed, and the auxiliaries a "not" can follow. */
static const struct { const char *from, *to; } UNNEG[] = {
    {"not", ""},         {"never", "always"},   {"don't", "do"},       {"doesn't", "does"},
    {"didn't", "did"},   {"can't", "can"},      {"cannot", "can"},     {"won't", "will"},
    {"isn't", "is"},     {"aren't", "are"},     {"wasn't", "was"},     {"weren't", "were"},
    {"shouldn't", "should"}, {"wouldn't", "would"}, {"couldn't", "could"}, {"haven't", "have"},
    {"hasn't", "has"},   {"mustn't", "must"},   {"no", "some"},        {"nothing", "everything"},
    {"none", "all"},     {"without", "with"}};
static const char *const AUX[] = {"is", "are", "was", "were", "can", "will", "should", "do",
                                  "does", "did", "could", "would", "must", "have", "has"};
/* Chinese: negators to drop, and verbs 不 can precede. */
static const char *const ZH_NEG[] = {"\xe4\xb8\x8d", "\xe6\xb2\xa1", "\xe5\x88\xab", "\xe5\x8b\xbf"};
static const char *const ZH_VERB[] = {"\xe6\x98\xaf", "\xe8\xa6\x81", "\xe8\x83\xbd", "\xe4\xbc\x9a",
                                      "\xe5\x8f\xaf\xe4\xbb\xa5", "\xe9\x9c\x80\xe8\xa6\x81",
                                      "\xe5\xba\x94\xe8\xaf\xa5", "\xe7\x94\xa8"};

int mt_op_negate(mt_env *env, const char *s, size_t n, fl_sb *o) {
    fl_rng *r = env->r;
    /* gather every possible local edit, keep one uniformly (reservoir) */
    size_t cnt = 0, at = 0, len = 0;
    const char *rep = NULL;
    mt_span *w;
    int nw = mt_words(s, n, &w);
    if (nw < 0) {
        o->oom = 1;
        return 0;
    }
    for (int k = 0; k < nw; k++) {
        const char *p = s + w[k].at;
        if (w[k].kind == 0) {
            for (size_t u = 0; u < sizeof UNNEG / sizeof UNNEG[0]; u++)
                if (word_eq(p, w[k].len, UNNEG[u].from) && fl_rng_below(r, (uint32_t)++cnt) == 0)
                    at = w[k].at, len = w[k].len, rep = UNNEG[u].to;
            for (size_t u = 0; u < sizeof AUX / sizeof AUX[0]; u++)
                if (word_eq(p, w[k].len, AUX[u]) && fl_rng_below(r, (uint32_t)++cnt) == 0)
                    at = w[k].at + w[k].len, len = 0, rep = word_eq(p, w[k].len, "can") ? "not" : " not";
            continue;
        }
        for (size_t u = 0; u < sizeof ZH_NEG / sizeof ZH_NEG[0]; u++)
            if (w[k].len == strlen(ZH_NEG[u]) && !memcmp(p, ZH_NEG[u], w[k].len) &&
                fl_rng_below(r, (uint32_t)++cnt) == 0)
                at = w[k].at, len = w[k].len, rep = "";
        for (size_t u = 0; u < sizeof ZH_VERB / sizeof ZH_VERB[0]; u++)
            if (w[k].at + strlen(ZH_VERB[u]) <= n && !memcmp(p, ZH_VERB[u], strlen(ZH_VERB[u])) &&
                fl_rng_below(r, (uint32_t)++cnt) == 0)
                at = w[k].at, len = 0, rep = "\xe4\xb8\x8d";
    }
    free(w);
    if (cnt && fl_rng_below(r, 3)) {
        if (!*rep && len && at + len < n && s[at + len] == ' ') len++; /* "do not go" -> "do go" */
        fl_sb_put(o, s, at);
        fl_sb_puts(o, rep);
        fl_sb_put(o, s + at + len, n - at - len);
        return 1;
    }
    put_prefix(o, s, n, MT_PICKL_LANG(env, s, n, mt_neg_prefix_en, mt_neg_prefix_zh));
    return 1;
}

int mt_op_contradict(mt_env *env, const char *s, size_t n, fl_sb *o) {
    const char *p = MT_PICKL_LANG(env, s, n, mt_contra_en, mt_contra_zh);
    mt_insert_word(o, s, n, phrase_pos(env->r, s, n, o), p);
    return 1;
}

int mt_op_ambiguity(mt_env *env, const char *s, size_t n, fl_sb *o) {
    fl_rng *r = env->r;
    mt_span *w;
    int nw = mt_words(s, n, &w);
    if (nw < 0) {
        o->oom = 1;
        return 0;
    }
    int mode = (int)fl_rng_below(r, 4);
    if (mode == 1 && nw > 0) { /* "... or maybe <one of its own words>" */
        mt_span x = w[fl_rng_below(r, (uint32_t)nw)];
        free(w);
        fl_sb_put(o, s, n);
        mt_put_word(o, mt_has_cjk(s, n) ? "\xe6\x88\x96\xe8\x80\x85" : "or maybe", mt_has_cjk(s, n) ? 6 : 8);
        mt_put_word(o, s + x.at, x.len);
        mt_put_word(o, "?", 1);
        return 1;
    }
    if (mode == 2 && nw > 0) { /* a number or a long word becomes vague: "some", "it" */
        size_t cnt = 0, a = 0, b = 0;
        for (int k = 0; k < nw; k++)
            if (w[k].kind == 0 && (w[k].len >= 4 || (s[w[k].at] >= '0' && s[w[k].at] <= '9')) &&
                fl_rng_below(r, (uint32_t)++cnt) == 0)
                a = w[k].at, b = a + w[k].len;
        free(w);
        if (cnt) {
            fl_sb_put(o, s, a);
            fl_sb_puts(o, MT_PICKL_LANG(env, s, n, mt_vague_en, mt_vague_zh));
            fl_sb_put(o, s + b, n - b);
            return 1;
        }
        w = NULL;
    }
    if (mode == 3) { /* hedge: "maybe", "sort of", "大概" before a word */
        size_t at = nw > 0 ? w[fl_rng_below(r, (uint32_t)nw)].at : 0;
        free(w);
        mt_insert_word(o, s, n, at, MT_PICKL_LANG(env, s, n, mt_hedge_en, mt_hedge_zh));
        return 1;
    }
    free(w);
    fl_sb_put(o, s, n);
    const char *p = MT_PICKL_LANG(env, s, n, mt_ambig_en, mt_ambig_zh);
    mt_put_word(o, p, strlen(p));
    return 1;
}

int mt_op_urgency(mt_env *env, const char *s, size_t n, fl_sb *o) {
    fl_rng *r = env->r;
    uint32_t where = fl_rng_below(r, 3); /* 0 prefix, 1 suffix, 2 both */
    if (where != 1) put_prefix(o, s, n, MT_PICKL_LANG(env, s, n, mt_urgent_pre_en, mt_urgent_pre_zh));
    else fl_sb_put(o, s, n);
    if (where != 0) {
        const char *p = MT_PICKL_LANG(env, s, n, mt_urgent_suf_en, mt_urgent_suf_zh);
        mt_put_word(o, p, strlen(p));
    }
    return 1;
}

int mt_op_persona(mt_env *env, const char *s, size_t n, fl_sb *o) {
    fl_rng *r = env->r;
    const char *p;
    switch (fl_rng_below(r, 3)) {
    case 0: p = MT_PICKL_LANG(env, s, n, mt_impatient_en, mt_impatient_zh); break;
    case 1: p = MT_PICKL_LANG(env, s, n, mt_novice_en, mt_novice_zh); break;
    default: p = MT_PICKL_LANG(env, s, n, mt_attacker_en, mt_attacker_zh); break;
    }
    put_prefix(o, s, n, p);
    return 1;
}

int mt_op_inject(mt_env *env, const char *s, size_t n, fl_sb *o) {
    fl_rng *r = env->r;
    const char *snip = MT_PICKL_LANG(env, s, n, mt_inject_en, mt_inject_zh);
    size_t at = phrase_pos(r, s, n, o);
    fl_sb_put(o, s, at);
    if (fl_rng_below(r, 3) == 0) { /* in fake chat-template / system markup */
        const char *wrap = MT_PICKL(r, mt_inject_wrap), *hole = strstr(wrap, "%s");
        mt_put_word(o, wrap, (size_t)(hole - wrap));
        fl_sb_puts(o, snip);
        fl_sb_puts(o, hole + 2);
    } else {
        mt_put_word(o, snip, strlen(snip));
    }
    mt_put_word(o, s + at, n - at);
    return 1;
}
