/* Case operators: splice two corpus entries, and the multi-turn mutations (a follow-up turn,
 * a topic switch mid-conversation, dropping, swapping and repeating turns). */
#include <stdlib.h>
#include <string.h>

#include "agents/mutate/mutate_int.h"

/* A word boundary of s chosen at random among word starts and the end (or 0 when s has no
 * words); -1 on out of memory. */
static long cut_point(fl_rng *r, const char *s, size_t n) {
    mt_span *w;
    int nw = mt_words(s, n, &w);
    if (nw < 0) return -1;
    uint32_t k = fl_rng_below(r, (uint32_t)nw + 1);
    long at = k < (uint32_t)nw ? (long)w[k].at : (long)n;
    free(w);
    return at;
}

int mt_op_splice(mt_env *env) {
    fl_rng *r = env->r;
    fl_case *c = env->c;
    const fl_case *x = env->other;
    if (!x || x->n_turns == 0) return 0;
    if ((c->n_turns > 1 || x->n_turns > 1) && fl_rng_below(r, 2)) {
        /* conversation splice: our first i turns, then theirs from j on */
        int i = c->n_turns ? 1 + (int)fl_rng_below(r, (uint32_t)c->n_turns) : 0;
        int j = (int)fl_rng_below(r, (uint32_t)x->n_turns);
        while (c->n_turns > i) mt_case_remove_turn(c, c->n_turns - 1);
        for (int k = j; k < x->n_turns; k++)
            if (mt_case_insert_turn(c, c->n_turns, strdup(x->turns[k]))) return -1;
        return 1;
    }
    /* text splice, as AFL splices files: the head of one of our turns, the tail of theirs */
    if (c->n_turns == 0) return mt_case_insert_turn(c, 0, strdup(x->turns[0])) ? -1 : 1;
    int ti = (int)fl_rng_below(r, (uint32_t)c->n_turns);
    const char *a = c->turns[ti], *b = x->turns[fl_rng_below(r, (uint32_t)x->n_turns)];
    size_t na = strlen(a), nb = strlen(b);
    for (int tries = 0; tries < 4; tries++) {
        long ca = cut_point(r, a, na), cb = cut_point(r, b, nb);
        if (ca < 0 || cb < 0) return -1;
        if (nb - (size_t)cb == na - (size_t)ca && !memcmp(a + ca, b + cb, na - (size_t)ca))
            continue; /* same tail: no change */
        fl_sb o = {0};
        fl_sb_put(&o, a, (size_t)ca);
        mt_put_word(&o, b + cb, nb - (size_t)cb);
        if (o.oom) {
            free(o.p);
            return -1;
        }
        if (!o.p) o.p = strdup("");
        return mt_case_set_turn(c, ti, o.p) ? -1 : 1;
    }
    return 0;
}

int mt_op_turn_add(mt_env *env) {
    fl_rng *r = env->r;
    fl_case *c = env->c;
    if (c->n_turns >= env->m->o.max_turns) return 0;
    const char *last = c->n_turns ? c->turns[c->n_turns - 1] : "";
    if (c->n_turns && fl_rng_below(r, 4) == 0) {
        /* the user says an earlier thing again, a little differently */
        int from = (int)fl_rng_below(r, (uint32_t)c->n_turns);
        if (mt_case_insert_turn(c, c->n_turns, strdup(c->turns[from]))) return -1;
        static const mt_text_fn VARY[] = {mt_op_synonym, mt_op_typo, mt_op_noise, mt_op_negate};
        fl_case one = {.n_turns = 1, .turns = &c->turns[c->n_turns - 1]};
        mt_env sub = *env;
        sub.c = &one;
        if (mt_apply_text(&sub, VARY[fl_rng_below(r, 4)]) < 0) return -1;
        return 1;
    }
    const char *t = mt_dict_count(env) && fl_rng_below(r, 4) == 0 ? mt_dict_pick(env) : NULL;
    if (!t) t = MT_PICKL_LANG(env, last, strlen(last), mt_followup_en, mt_followup_zh);
    return mt_case_insert_turn(c, c->n_turns, strdup(t)) ? -1 : 1;
}

int mt_op_topic(mt_env *env) {
    fl_rng *r = env->r;
    fl_case *c = env->c;
    const char *first = c->n_turns ? c->turns[0] : "";
    const char *t = MT_PICKL_LANG(env, first, strlen(first), mt_topic_en, mt_topic_zh);
    if (c->n_turns >= 2 && (c->n_turns >= env->m->o.max_turns || fl_rng_below(r, 3) == 0)) {
        /* replace a later turn: the conversation swerves */
        int at = 1 + (int)fl_rng_below(r, (uint32_t)c->n_turns - 1);
        return mt_case_set_turn(c, at, strdup(t)) ? -1 : 1;
    }
    if (c->n_turns >= env->m->o.max_turns) return 0;
    /* insert mid-conversation (after the first turn), or append */
    int at = c->n_turns ? 1 + (int)fl_rng_below(r, (uint32_t)c->n_turns) : 0;
    return mt_case_insert_turn(c, at, strdup(t)) ? -1 : 1;
}

int mt_op_turn_drop(mt_env *env) {
    fl_case *c = env->c;
    if (c->n_turns < 2) return 0;
    mt_case_remove_turn(c, (int)fl_rng_below(env->r, (uint32_t)c->n_turns));
    return 1;
}

int mt_op_turn_swap(mt_env *env) {
    fl_case *c = env->c;
    if (c->n_turns < 2) return 0;
    int i = (int)fl_rng_below(env->r, (uint32_t)c->n_turns);
    int j = (int)fl_rng_below(env->r, (uint32_t)c->n_turns - 1);
    if (j >= i) j++;
    char *t = c->turns[i];
    c->turns[i] = c->turns[j];
    c->turns[j] = t;
    return 1;
}

int mt_op_turn_dup(mt_env *env) {
    fl_case *c = env->c;
    if (c->n_turns == 0 || c->n_turns >= env->m->o.max_turns) return 0;
    int i = (int)fl_rng_below(env->r, (uint32_t)c->n_turns);
    return mt_case_insert_turn(c, i + 1, strdup(c->turns[i])) ? -1 : 1;
}
