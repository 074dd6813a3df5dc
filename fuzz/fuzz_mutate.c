/* libFuzzer harness for the text mutators, the dictionary parser and the lexicon parser.
 *
 * Input layout: 8 bytes of fl_rng seed, 1 mode byte, then text. Mode < 0xF0: the text is
 * split at NUL bytes into turns (the first half the case, the second half its splice
 * partner) and mutated three generations deep with operator (mode % (ops + 1)) - 1, -1 being
 * havoc. Mode 0xF0..0xF7: the text is an AFL dictionary; 0xF8..0xFF: a lexicon file.
 *
 * Invariants checked: nothing crashes or leaks; every output respects the caps; when every
 * input turn is valid UTF-8, so is every output turn; a parse failure explains itself and
 * leaves the context as it was.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude -Isrc fuzz/fuzz_mutate.c \
 *       src/agents/protocol/... src/agents/mutate/... src/core/... -lcjson
 */
#include <stdlib.h>
#include <string.h>

#include "flare/agents/mutate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { MAX_LEN = 2048, MAX_TURNS = 6 };

static fl_mutator_ctx *shared(void) {
    static fl_mutator_ctx *m;
    if (!m) {
        fl_mutate_opts o;
        fl_mutate_opts_default(&o);
        o.max_len = MAX_LEN;
        o.max_turns = MAX_TURNS;
        fl_err e;
        if (fl_mutator_new(&o, &m, &e) != FL_OK) abort();
        static const char dict[] = "a=\"{\\\"k\\\":\"\nb=\"\xe4\xbd\xa0\\x41\"\n\"\\\\\"\n";
        if (fl_mutator_add_dict_text(m, dict, sizeof dict - 1, "fuzz.dict", &e) != FL_OK) abort();
    }
    return m;
}

static void check(const fl_case *c, int want_valid) {
    size_t total = 0;
    if (c->n_turns > MAX_TURNS) abort();
    for (int i = 0; i < c->n_turns; i++) {
        size_t n = strlen(c->turns[i]);
        total += n;
        if (want_valid && !fl_utf8_valid(c->turns[i], n)) abort();
    }
    if (total > MAX_LEN) abort();
}

static void fuzz_parse(const char *text, size_t n, int lexicon) {
    fl_mutator_ctx *m;
    fl_err e;
    if (fl_mutator_new(NULL, &m, &e) != FL_OK) abort();
    int groups = fl_mutator_lexicon_groups(m);
    e.msg[0] = 0;
    fl_status st = lexicon ? fl_mutator_add_lexicon_text(m, text, n, "fuzz.lex", &e)
                           : fl_mutator_add_dict_text(m, text, n, "fuzz.dict", &e);
    if (st != FL_OK) {
        if (!e.msg[0] || !strstr(e.msg, lexicon ? "fuzz.lex:" : "fuzz.dict:")) abort();
        if (fl_mutator_dict_size(m) != 0 || fl_mutator_lexicon_groups(m) != groups) abort();
    } else {
        for (int i = 0; i < fl_mutator_dict_size(m); i++) {
            const char *t = fl_mutator_dict_token(m, i);
            if (!*t || !fl_utf8_valid(t, strlen(t))) abort();
        }
        /* the new entries must work in mutations */
        fl_rng r;
        fl_rng_seed(&r, n);
        const char *tp = fl_mutator_dict_size(m) ? fl_mutator_dict_token(m, 0) : "make a big list, 快速";
        fl_case *c = fl_case_new(1, &tp), *out;
        for (int k = 0; k < 4; k++) {
            if (fl_mutate(m, &r, c, NULL, k ? -1 : fl_mutate_op_find("insert"), &out, NULL) != FL_OK)
                abort();
            fl_case_free(out);
        }
        fl_case_free(c);
    }
    fl_mutator_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 9) return 0;
    uint64_t seed = 0;
    for (int i = 0; i < 8; i++) seed = seed << 8 | data[i];
    uint8_t mode = data[8];
    const char *text = (const char *)data + 9;
    size_t n = size - 9;
    if (mode >= 0xF0) {
        if (n > 1 << 16) return 0;
        fuzz_parse(text, n, mode >= 0xF8);
        return 0;
    }
    /* turns: NUL-separated; first half the case, second half the splice partner */
    char *copy = malloc(n + 1);
    if (!copy) return 0;
    memcpy(copy, text, n);
    copy[n] = 0;
    const char *turns[16];
    int nt = 0, valid = 1;
    for (size_t i = 0, start = 0; i <= n && nt < 16; i++)
        if (i == n || copy[i] == 0) {
            turns[nt++] = copy + start;
            valid &= fl_utf8_valid(copy + start, i - start);
            start = i + 1;
        }
    int half = (nt + 1) / 2;
    fl_case *in = fl_case_new(half, turns), *other = fl_case_new(nt - half, turns + half);
    if (!in || !other) abort();
    fl_mutator_ctx *m = shared();
    fl_rng r;
    fl_rng_seed(&r, seed);
    int op = (int)(mode % (fl_mutate_op_count() + 1)) - 1;
    for (int gen = 0; gen < 3; gen++) {
        fl_case *out = NULL;
        const char *name = NULL;
        fl_status st = fl_mutate(m, &r, in, other, op, &out, &name);
        if (!name || strcmp(name, fl_mutate_op_name(op))) abort();
        if (st == FL_ERR_UNSUPPORTED && op >= 0) {
            if (out) abort();
            op = -1; /* continue with havoc */
            continue;
        }
        if (st != FL_OK || !out) abort();
        check(out, valid);
        fl_case_free(in);
        in = out;
    }
    fl_case_free(in);
    fl_case_free(other);
    free(copy);
    return 0;
}
