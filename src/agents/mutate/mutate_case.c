/* Editing the working case of a mutation: replacing, inserting and removing turns, and
 * applying a text operator to one turn. Shared by mutate.c and the multi-turn operators
 * (mutate_turns.c). */
#include <stdlib.h>
#include <string.h>

#include "agents/mutate/mutate_int.h"

int mt_case_set_turn(fl_case *c, int i, char *s) {
    if (!s) return -1;
    free(c->turns[i]);
    c->turns[i] = s;
    return 0;
}

int mt_case_insert_turn(fl_case *c, int at, char *s) {
    if (!s) return -1;
    char **t = realloc(c->turns, (size_t)(c->n_turns + 1) * sizeof *t);
    if (!t) {
        free(s);
        return -1;
    }
    c->turns = t;
    memmove(t + at + 1, t + at, (size_t)(c->n_turns - at) * sizeof *t);
    t[at] = s;
    c->n_turns++;
    return 0;
}

void mt_case_remove_turn(fl_case *c, int at) {
    free(c->turns[at]);
    memmove(c->turns + at, c->turns + at + 1, (size_t)(c->n_turns - at - 1) * sizeof *c->turns);
    c->n_turns--;
}

/* Try f on the turns of env->c, starting at a random one; the first turn it applies to is
 * rewritten. 1 changed, 0 applies to no turn, -1 out of memory. */
int mt_apply_text(mt_env *env, mt_text_fn f) {
    fl_case *c = env->c;
    if (c->n_turns == 0) return 0;
    size_t total = fl_case_bytes(c);
    int start = (int)fl_rng_below(env->r, (uint32_t)c->n_turns);
    for (int k = 0; k < c->n_turns; k++) {
        int i = (start + k) % c->n_turns;
        size_t n = strlen(c->turns[i]);
        size_t others = total - n;
        env->budget = env->m->o.max_len > others ? env->m->o.max_len - others : 0;
        fl_sb b = {0};
        int r = f(env, c->turns[i], n, &b);
        if (b.oom) {
            free(b.p);
            return -1;
        }
        if (r) {
            if (!b.p) b.p = strdup(""); /* produced the empty string */
            if (mt_case_set_turn(c, i, b.p)) return -1;
            return 1;
        }
        free(b.p);
    }
    return 0;
}
