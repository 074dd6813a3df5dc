/* Module agents/mutate — turning one case into another: the operator table and havoc (this
 * file), text operators (mutate_text.c, mutate_phrase.c, mutate_json.c), case operators
 * (mutate_turns.c, over mutate_case.c), their phrases (mutate_data.c), UTF-8 handling
 * (mutate_utf8.c), synonym lexicons (lexicon*.c), risky values (lexicon_risk.c) and AFL
 * dictionaries and the spec's words (dict.c). Depends on
 * protocol. API: include/flare/agents/mutate.h; docs/agents-mutators.md.
 *
 * The mutator context, the operator table, and the two ways to apply operators: one named
 * operator, or an AFL-style havoc stack of random ones.
 *
 * Operators come in two shapes (mutate_int.h): text operators rewrite one turn, and the
 * dispatcher here picks which turn (a random one it applies to); case operators add, drop,
 * reorder or splice whole turns. After every operator the case is clamped to the size caps,
 * so no stack of operators can grow it past opts.max_len bytes or opts.max_turns turns.
 */
#include <stdlib.h>
#include <string.h>

#include "agents/mutate/mutate_int.h"
#include "flare/agents/expect.h"

/* weight: relative chance in havoc. Destructive operators (empty, long, json_break) and the
 * ones that mostly make the case bigger get less, so a stack keeps some of its parent. */
typedef struct mt_op {
    const char *name;
    int weight;
    mt_text_fn text;
    mt_case_fn whole;
} mt_op;

static const mt_op OPS[] = {
    {"synonym", 6, mt_op_synonym, NULL},       {"insert", 4, mt_op_insert, NULL},
    {"del_word", 4, mt_op_del_word, NULL},     {"del_span", 3, mt_op_del_span, NULL},
    {"dup", 3, mt_op_dup, NULL},               {"reorder", 3, mt_op_reorder, NULL},
    {"splice", 2, NULL, mt_op_splice},         {"typo", 4, mt_op_typo, NULL},
    {"noise", 3, mt_op_noise, NULL},           {"negate", 3, mt_op_negate, NULL},
    {"contradict", 2, mt_op_contradict, NULL}, {"ambiguity", 2, mt_op_ambiguity, NULL},
    {"urgency", 2, mt_op_urgency, NULL},       {"persona", 2, mt_op_persona, NULL},
    {"num", 3, mt_op_num, NULL},               {"empty", 1, mt_op_empty, NULL},
    {"long", 1, mt_op_long, NULL},             {"unicode", 3, mt_op_unicode, NULL},
    {"inject", 2, mt_op_inject, NULL},         {"json_add", 3, mt_op_json_add, NULL},
    {"risky", 3, mt_op_risky, NULL},           {"mix_lang", 1, mt_op_mix_lang, NULL},
    {"json_del", 3, mt_op_json_del, NULL},     {"json_retype", 3, mt_op_json_retype, NULL},
    {"json_break", 1, mt_op_json_break, NULL}, {"turn_add", 2, NULL, mt_op_turn_add},
    {"topic", 2, NULL, mt_op_topic},           {"turn_drop", 1, NULL, mt_op_turn_drop},
    {"turn_swap", 1, NULL, mt_op_turn_swap},   {"turn_dup", 1, NULL, mt_op_turn_dup},
};
#define N_OPS ((int)(sizeof OPS / sizeof OPS[0]))

int fl_mutate_op_count(void) { return N_OPS; }

const char *fl_mutate_op_name(int op) {
    if (op == FL_MUTATE_HAVOC) return "havoc";
    return op >= 0 && op < N_OPS ? OPS[op].name : NULL;
}

int fl_mutate_op_find(const char *name) {
    if (!name) return -2;
    if (!strcmp(name, "havoc")) return FL_MUTATE_HAVOC;
    for (int i = 0; i < N_OPS; i++)
        if (!strcmp(name, OPS[i].name)) return i;
    return -2;
}

/* ---- context ------------------------------------------------------------------------------- */
void fl_mutate_opts_default(fl_mutate_opts *o) {
    o->max_len = 8192;
    o->max_turns = 8;
    o->havoc_stack_pow = 3;
    o->mix_lang = 0;
}

fl_status fl_mutator_new(const fl_mutate_opts *opts, fl_mutator_ctx **out, fl_err *e) {
    *out = NULL;
    fl_mutate_opts o;
    if (opts) o = *opts;
    else fl_mutate_opts_default(&o);
    if (o.max_len < 16) return fl_fail(e, FL_ERR_ARG, "mutator: max_len %zu is below 16 bytes", o.max_len);
    if (o.max_turns < 1) return fl_fail(e, FL_ERR_ARG, "mutator: max_turns %d is below 1", o.max_turns);
    if (o.havoc_stack_pow < 0 || o.havoc_stack_pow > 7)
        return fl_fail(e, FL_ERR_ARG, "mutator: havoc_stack_pow %d is outside 0..7", o.havoc_stack_pow);
    fl_mutator_ctx *m = calloc(1, sizeof *m);
    if (!m) return fl_fail(e, FL_ERR_NOMEM, "mutator: out of memory");
    m->o = o;
    fl_status st = mt_lex_add_builtin(&m->lex, e);
    if (st != FL_OK) {
        fl_mutator_free(m);
        return st;
    }
    *out = m;
    return FL_OK;
}

void fl_mutator_free(fl_mutator_ctx *m) {
    if (!m) return;
    mt_lex_clear(&m->lex);
    mt_dict_clear(&m->dict);
    free(m);
}

/* Read the file at path and add its text to the lexicons (lex) or to the dictionary. */
static fl_status load_text(fl_mutator_ctx *m, const char *path, int lex, fl_err *e) {
    uint8_t *buf;
    size_t len;
    fl_status st = fl_file_read(path, &buf, &len, e);
    if (st != FL_OK) return st;
    st = lex ? mt_lex_add_text(&m->lex, (char *)buf, len, path, e)
             : mt_dict_add_text(&m->dict, (char *)buf, len, path, e);
    free(buf);
    return st;
}

fl_status fl_mutator_add_lexicon_text(fl_mutator_ctx *m, const char *text, size_t len,
                                      const char *name, fl_err *e) {
    return mt_lex_add_text(&m->lex, text, len, name, e);
}

fl_status fl_mutator_load_lexicon(fl_mutator_ctx *m, const char *path, fl_err *e) {
    return load_text(m, path, 1, e);
}

fl_status fl_mutator_add_dict_text(fl_mutator_ctx *m, const char *text, size_t len,
                                   const char *name, fl_err *e) {
    return mt_dict_add_text(&m->dict, text, len, name, e);
}

fl_status fl_mutator_load_dict(fl_mutator_ctx *m, const char *path, fl_err *e) {
    return load_text(m, path, 0, e);
}

int fl_mutator_dict_size(const fl_mutator_ctx *m) { return m->dict.n; }
const char *fl_mutator_dict_token(const fl_mutator_ctx *m, int i) {
    return i >= 0 && i < m->dict.n ? m->dict.tok[i] : NULL;
}
int fl_mutator_lexicon_groups(const fl_mutator_ctx *m) { return m->lex.n_groups; }

/* Enforce the caps: at most max_turns turns, and turns truncated (at unit boundaries) so that
 * together they hold at most max_len bytes. Earlier turns keep their text first. */
static void clamp(const fl_mutate_opts *o, fl_case *c) {
    while (c->n_turns > o->max_turns) mt_case_remove_turn(c, c->n_turns - 1);
    size_t left = o->max_len;
    for (int i = 0; i < c->n_turns; i++) {
        size_t n = strlen(c->turns[i]);
        if (n > left) {
            n = mt_u8_floor(c->turns[i], n, left);
            c->turns[i][n] = 0; /* shrinking in place: the allocation stays valid */
        }
        left -= n;
    }
}

static int apply(mt_env *env, int op) {
    int r = OPS[op].text ? mt_apply_text(env, OPS[op].text) : OPS[op].whole(env);
    if (r > 0) clamp(&env->m->o, env->c);
    return r;
}

/* A turn that looks like a JSON object (the JSON operators check properly). */
static int has_json(const fl_case *c) {
    for (int i = 0; i < c->n_turns; i++) {
        const char *s = c->turns[i];
        while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r') s++;
        if (*s == '{') return 1;
    }
    return 0;
}

/* Havoc weights: splice only with a partner; on JSON input the structural operators count
 * three times, so about a third of the stack edits the structure rather than the text. */
static int weight(int op, int have_other, int json) {
    if (!have_other && OPS[op].whole == mt_op_splice) return 0;
    return OPS[op].weight * (json && !strncmp(OPS[op].name, "json_", 5) ? 3 : 1);
}

static int pick_op(fl_rng *r, const fl_case *c, int have_other) {
    int total = 0, json = has_json(c);
    for (int i = 0; i < N_OPS; i++) total += weight(i, have_other, json);
    int x = (int)fl_rng_below(r, (uint32_t)total);
    for (int i = 0; i < N_OPS; i++) {
        int w = weight(i, have_other, json);
        if (x < w) return i;
        x -= w;
    }
    return 0;
}

fl_status fl_mutate_ex(const fl_mutator_ctx *m, fl_rng *rng, const fl_case *in,
                       const fl_case *splice_with, int op, fl_case **out, fl_mutate_info *info) {
    return fl_mutate_with(m, NULL, rng, in, splice_with, op, out, info);
}

fl_status fl_mutate_with(const fl_mutator_ctx *m, const fl_mutate_extra *x, fl_rng *rng,
                         const fl_case *in, const fl_case *splice_with, int op, fl_case **out,
                         fl_mutate_info *info) {
    *out = NULL;
    fl_mutate_info local;
    if (!info) info = &local;
    info->n_ops = 0;
    info->op_name = fl_mutate_op_name(op);
    if (op < FL_MUTATE_HAVOC || op >= N_OPS) return FL_ERR_ARG;
    fl_case *c = fl_case_new(in->n_turns, (const char *const *)in->turns);
    if (!c) return FL_ERR_NOMEM;
    c->seed = in->seed;
    int oom = 0; /* a mutant keeps the seed's negative expectations only (expect.h) */
    c->expect = fl_expect_copy(in->expect, 1, &oom);
    if (oom) {
        fl_case_free(c);
        return FL_ERR_NOMEM;
    }
    c->id[0] = 0;
    c->traceparent[0] = 0;
    clamp(&m->o, c);
    mt_env env = {m, rng, c, splice_with && splice_with->n_turns > 0 ? splice_with : NULL, 0,
                  x && x->n > 0 ? x : NULL};
    int r;
    if (op >= 0) {
        r = apply(&env, op);
        if (r > 0) info->ops[info->n_ops++] = op;
    } else {
        /* AFL: a stack of 2^i operators, i uniform in 0..k (AFL++ uses 2..2^7 on bytes; text
         * operators do more per step, so the default k is 3) */
        int stack = 1 << fl_rng_below(rng, (uint32_t)m->o.havoc_stack_pow + 1);
        r = 0;
        for (int s = 0; s < stack && r >= 0; s++) {
            for (int tries = 0; tries < 8; tries++) {
                int o = pick_op(rng, c, env.other != NULL);
                r = apply(&env, o);
                if (r < 0) break;
                if (r > 0) {
                    info->ops[info->n_ops++] = o;
                    break;
                }
            }
        }
        if (r >= 0 && info->n_ops == 0) {
            /* nothing applied (tiny or odd input): noise applies to any turn, turn_add to none */
            int o = c->n_turns ? fl_mutate_op_find("noise") : fl_mutate_op_find("turn_add");
            r = apply(&env, o);
            if (r > 0) info->ops[info->n_ops++] = o;
        }
        if (r >= 0) r = 1;
    }
    if (r < 0) {
        fl_case_free(c);
        return FL_ERR_NOMEM;
    }
    if (r == 0) {
        fl_case_free(c);
        return FL_ERR_UNSUPPORTED;
    }
    *out = c;
    return FL_OK;
}

fl_status fl_mutate(const fl_mutator_ctx *m, fl_rng *rng, const fl_case *in,
                    const fl_case *splice_with, int op, fl_case **out, const char **op_name) {
    fl_mutate_info info;
    fl_status st = fl_mutate_ex(m, rng, in, splice_with, op, out, &info);
    if (op_name) *op_name = info.op_name;
    return st;
}

fl_status fl_mutator_add_spec_words(fl_mutator_ctx *m, const fl_spec *spec, fl_err *e) {
    int r = 0;
    for (int a = 0; spec && a < spec->n_agents && r >= 0; a++) {
        const fl_spec_agent *ag = &spec->agents[a];
        r = mt_dict_add_ident(&m->dict, ag->name);
        for (int t = 0; t < ag->n_tools && r >= 0; t++) r = mt_dict_add_ident(&m->dict, ag->tools[t]);
        for (int p = 0; p < ag->n_points && r >= 0; p++) {
            r = mt_dict_add_ident(&m->dict, ag->points[p].name);
            for (int c = 0; c < ag->points[p].n_choices && r >= 0; c++)
                r = mt_dict_add_ident(&m->dict, ag->points[p].choices[c]);
        }
    }
    return r < 0 ? fl_fail(e, FL_ERR_NOMEM, "spec words: out of memory") : FL_OK;
}
