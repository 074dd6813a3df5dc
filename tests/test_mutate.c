/* Tests for the text mutators: every operator changes its input the way its name says on
 * fixed seeds (checked as properties, not exact strings), havoc is deterministic and keeps
 * valid UTF-8 within the size caps over thousands of rounds, JSON operators keep valid JSON
 * (json_break deliberately does not), and the dictionary / lexicon files parse with errors
 * that name file:line. */
#define _XOPEN_SOURCE 700
#include "testutil.h"

#include <cjson/cJSON.h>
#include <unistd.h>

#include "agents/mutate/mutate_int.h"
#include "flare/agents/mutate.h"

static fl_mutator_ctx *ctx_new(size_t max_len, int max_turns) {
    fl_mutate_opts o;
    fl_mutate_opts_default(&o);
    if (max_len) o.max_len = max_len;
    if (max_turns) o.max_turns = max_turns;
    fl_mutator_ctx *m = NULL;
    fl_err e = {0};
    if (fl_mutator_new(&o, &m, &e) != FL_OK) fail_msg("mutator_new: %s", e.msg);
    return m;
}

static fl_case *case1(const char *t) { return fl_case_new(1, &t); }

/* Apply op to a one-turn case with the given seed; the single resulting turn (malloc'd). */
static char *mut1(const fl_mutator_ctx *m, const char *text, const char *op, uint64_t seed) {
    fl_rng r;
    fl_rng_seed(&r, seed);
    fl_case *in = case1(text), *out = NULL;
    const char *name = NULL;
    int k = fl_mutate_op_find(op);
    assert_true(k >= 0);
    fl_status st = fl_mutate(m, &r, in, NULL, k, &out, &name);
    if (st != FL_OK) fail_msg("%s on '%s': %s", op, text, fl_strerror(st));
    assert_string_equal(name, op);
    assert_int_equal(out->n_turns, 1);
    char *s = strdup(out->turns[0]);
    assert_true(fl_utf8_valid(s, strlen(s)));
    fl_case_free(in);
    fl_case_free(out);
    return s;
}

static int in_list(const char *s, const char *const *list, int n) {
    for (int i = 0; i < n; i++)
        if (strstr(s, list[i])) return 1;
    return 0;
}
#define IN_LIST(s, name) in_list((s), name, name##_n)

static int count_words(const char *s) {
    mt_span *w;
    int n = mt_words(s, strlen(s), &w);
    free(w);
    return n;
}

/* ---- the operator table ----------------------------------------------------------------------- */
static void test_op_table(void **state) {
    (void)state;
    int n = fl_mutate_op_count();
    assert_true(n >= 25);
    for (int i = 0; i < n; i++) {
        const char *name = fl_mutate_op_name(i);
        assert_non_null(name);
        assert_null(strpbrk(name, ",: /"));
        assert_int_equal(fl_mutate_op_find(name), i);
        for (int j = 0; j < i; j++) assert_string_not_equal(name, fl_mutate_op_name(j));
    }
    assert_string_equal(fl_mutate_op_name(-1), "havoc");
    assert_int_equal(fl_mutate_op_find("havoc"), FL_MUTATE_HAVOC);
    assert_int_equal(fl_mutate_op_find("nonsense"), -2);
    assert_null(fl_mutate_op_name(n));

    fl_mutate_opts o;
    fl_mutate_opts_default(&o);
    o.max_len = 3;
    fl_mutator_ctx *m;
    fl_err e = {0};
    assert_int_equal(fl_mutator_new(&o, &m, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "max_len"));
    fl_mutate_opts_default(&o);
    o.havoc_stack_pow = 9;
    assert_int_equal(fl_mutator_new(&o, &m, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "havoc_stack_pow"));
}

static void test_utf8(void **state) {
    (void)state;
    assert_true(fl_utf8_valid("abc 中文 😀", strlen("abc 中文 😀")));
    assert_false(fl_utf8_valid("\xc0\xaf", 2));         /* overlong '/' */
    assert_false(fl_utf8_valid("\xed\xa0\x80", 3));     /* surrogate */
    assert_false(fl_utf8_valid("\xf4\x90\x80\x80", 4)); /* > U+10FFFF */
    assert_false(fl_utf8_valid("\xe4\xb8", 2));         /* truncated */
    assert_false(fl_utf8_valid("\x80", 1));
    const char *s = "a中😀";
    size_t n = strlen(s);
    assert_int_equal(mt_u8_count(s, n), 3);
    assert_int_equal(mt_u8_floor(s, n, 2), 1); /* inside 中 */
    assert_int_equal(mt_u8_floor(s, n, 6), 4); /* inside 😀 */
    assert_int_equal(mt_u8_floor(s, n, 4), 4);
    assert_int_equal(mt_u8_floor("\x80\x80\x80\x80\x80", 5, 3), 3); /* garbage: byte units */
}

/* ---- each operator --------------------------------------------------------------------------- */
static void test_synonym(void **state) {
    (void)state;
    fl_mutator_ctx *m = ctx_new(0, 0);
    assert_true(fl_mutator_lexicon_groups(m) >= 300);
    const char *big[] = {"the large dog", "the huge dog", "the enormous dog"};
    const char *caps[] = {"The LARGE dog", "The HUGE dog", "The ENORMOUS dog"};
    const char *cap1[] = {"Large dog", "Huge dog", "Enormous dog"};
    const char *zh[] = {"迅速", "很快", "飞快"};
    int seen[3] = {0};
    for (uint64_t seed = 1; seed <= 30; seed++) {
        char *s = mut1(m, "the big dog", "synonym", seed);
        int hit = 0;
        for (int i = 0; i < 3; i++) hit |= !strcmp(s, big[i]) ? (seen[i] = 1) : 0;
        if (!hit) fail_msg("synonym of 'the big dog' gave '%s'", s);
        free(s);
        s = mut1(m, "The BIG dog", "synonym", seed);
        assert_true(!strcmp(s, caps[0]) || !strcmp(s, caps[1]) || !strcmp(s, caps[2]));
        free(s);
        s = mut1(m, "Big dog", "synonym", seed);
        assert_true(!strcmp(s, cap1[0]) || !strcmp(s, cap1[1]) || !strcmp(s, cap1[2]));
        free(s);
        s = mut1(m, "快速", "synonym", seed);
        assert_true(!strcmp(s, zh[0]) || !strcmp(s, zh[1]) || !strcmp(s, zh[2]));
        free(s);
    }
    assert_true(seen[0] && seen[1] && seen[2]); /* every synonym gets drawn */
    /* whole words only: nothing in "bigger xyzzy" is in the lexicon */
    fl_rng r;
    fl_rng_seed(&r, 1);
    fl_case *in = case1("bigger xyzzy"), *out = (fl_case *)1;
    assert_int_equal(fl_mutate(m, &r, in, NULL, fl_mutate_op_find("synonym"), &out, NULL),
                     FL_ERR_UNSUPPORTED);
    assert_null(out);
    fl_case_free(in);
    /* a user lexicon extends the built-in one */
    fl_err e = {0};
    const char *user = "# my words\nxyzzy, plugh\n\n  frob ,twiddle,  frob \n";
    assert_int_equal(fl_mutator_add_lexicon_text(m, user, strlen(user), "user.lex", &e), FL_OK);
    char *s = mut1(m, "bigger xyzzy", "synonym", 3);
    assert_string_equal(s, "bigger plugh");
    free(s);
    s = mut1(m, "FROB", "synonym", 3);
    assert_string_equal(s, "TWIDDLE");
    free(s);
    fl_mutator_free(m);
}

/* When a token is inserted next to text that begins like it, the common prefix of input and
 * output eats into the token and what remains between prefix and suffix is a rotation of it:
 * "al|soal|pha" for "also" before "alpha". Spaces ignored. */
static int rotation_of(const char *mid, const char *tok) {
    char m[256], t[512];
    size_t k = 0, l = 0;
    for (const char *p = mid; *p && k < 255; p++)
        if (*p != ' ') m[k++] = *p;
    m[k] = 0;
    for (int rep = 0; rep < 2; rep++)
        for (const char *p = tok; *p && l < 511; p++)
            if (*p != ' ') t[l++] = *p;
    t[l] = 0;
    return k == l / 2 && strstr(t, m) != NULL;
}

static void test_insert_and_dict(void **state) {
    (void)state;
    fl_mutator_ctx *m = ctx_new(0, 0);
    fl_err e = {0};
    const char *d = "tok=\"ZZTOKEN\"\n";
    assert_int_equal(fl_mutator_add_dict_text(m, d, strlen(d), "t.dict", &e), FL_OK);
    int with_token = 0;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        char *s = mut1(m, "alpha beta gamma", "insert", seed);
        /* a pure insertion: a common prefix and suffix cover the input, and what is between
         * them is a token (the dictionary's or a built-in one), perhaps with spaces */
        const char *in = "alpha beta gamma";
        size_t n = strlen(s), ni = strlen(in), pre = 0, suf = 0;
        assert_true(n > ni);
        while (pre < ni && s[pre] == in[pre]) pre++;
        while (suf < ni - pre && s[n - 1 - suf] == in[ni - 1 - suf]) suf++;
        assert_int_equal(pre + suf, ni);
        char mid[256];
        snprintf(mid, sizeof mid, "%.*s", (int)(n - pre - suf), s + pre);
        size_t a = 0, b = strlen(mid);
        while (a < b && mid[a] == ' ') a++;
        while (b > a && mid[b - 1] == ' ') b--;
        mid[b] = 0;
        int known = rotation_of(mid + a, "ZZTOKEN");
        for (int i = 0; i < mt_words_en_n; i++) known |= rotation_of(mid + a, mt_words_en[i]);
        for (int i = 0; i < mt_words_zh_n; i++) known |= rotation_of(mid + a, mt_words_zh[i]);
        if (!known) fail_msg("insert put '%s' into '%s'", mid + a, s);
        with_token += strstr(s, "ZZTOKEN") != NULL;
        free(s);
    }
    assert_true(with_token >= 20); /* the dictionary is preferred 3:1 */
    assert_true(with_token < 40);  /* but the built-in list is used too */
    fl_mutator_free(m);
}

static void test_delete(void **state) {
    (void)state;
    fl_mutator_ctx *m = ctx_new(0, 0);
    const char *in = "alpha beta gamma delta";
    for (uint64_t seed = 1; seed <= 20; seed++) {
        char *s = mut1(m, in, "del_word", seed);
        assert_int_equal(count_words(s), 3);
        assert_null(strstr(s, "  "));
        free(s);
        s = mut1(m, in, "del_span", seed);
        size_t n = strlen(s), k = 0;
        assert_true(n < strlen(in) && n > 0);
        while (k < n && s[k] == in[k]) k++; /* prefix of in + suffix of in */
        assert_string_equal(s + k, in + strlen(in) - (n - k));
        free(s);
        s = mut1(m, "我们明天去北京开会", "del_word", seed);
        size_t u = mt_u8_count(s, strlen(s));
        assert_true(u >= 6 && u <= 8);
        free(s);
    }
    fl_mutator_free(m);
}

static void test_dup_reorder(void **state) {
    (void)state;
    fl_mutator_ctx *m = ctx_new(0, 0);
    const char *in = "First one. Second two! Third three?";
    for (uint64_t seed = 1; seed <= 20; seed++) {
        char *s = mut1(m, in, "dup", seed);
        assert_true(strlen(s) > strlen(in));
        free(s);
        s = mut1(m, in, "reorder", seed);
        assert_int_equal(strlen(s), strlen(in));
        assert_string_not_equal(s, in);
        assert_non_null(strstr(s, "First one."));
        assert_non_null(strstr(s, "Second two!"));
        assert_non_null(strstr(s, "Third three?"));
        free(s);
        s = mut1(m, "我饿了。我们去吃饭吧！好吗？", "reorder", seed);
        assert_string_not_equal(s, "我饿了。我们去吃饭吧！好吗？");
        assert_non_null(strstr(s, "我们去吃饭吧！"));
        free(s);
    }
    /* one sentence: clauses move instead; no clause at all: not applicable */
    char *s = mut1(m, "add two, then three", "reorder", 5);
    assert_string_not_equal(s, "add two, then three");
    free(s);
    fl_rng r;
    fl_rng_seed(&r, 1);
    fl_case *c = case1("no punctuation here"), *out;
    assert_int_equal(fl_mutate(m, &r, c, NULL, fl_mutate_op_find("reorder"), &out, NULL),
                     FL_ERR_UNSUPPORTED);
    fl_case_free(c);
    fl_mutator_free(m);
}

static void test_typo_noise(void **state) {
    (void)state;
    fl_mutator_ctx *m = ctx_new(0, 0);
    for (uint64_t seed = 1; seed <= 40; seed++) {
        char *s = mut1(m, "calculate", "typo", seed);
        size_t n = strlen(s);
        assert_true(n >= 8 && n <= 10);
        for (size_t i = 0; i < n; i++) assert_true(s[i] >= 'a' && s[i] <= 'z');
        free(s);
        s = mut1(m, "计算一下", "typo", seed);
        assert_string_not_equal(s, "计算一下");
        free(s);
        s = mut1(m, "please compute this", "noise", seed);
        assert_string_not_equal(s, "please compute this");
        free(s);
    }
    fl_mutator_free(m);
}

static void test_phrases(void **state) {
    (void)state;
    fl_mutator_ctx *m = ctx_new(0, 0);
    const char *in = "Book a table for two.";
    int unneg = 0, zh_neg = 0;
    for (uint64_t seed = 1; seed <= 30; seed++) {
        char *s = mut1(m, in, "negate", seed);
        assert_true(strstr(s, "not") || IN_LIST(s, mt_neg_prefix_en) || IN_LIST(s, mt_neg_prefix_zh));
        free(s);
        s = mut1(m, "I do not want it", "negate", seed);
        unneg += strstr(s, "not") == NULL;
        free(s);
        s = mut1(m, "我是学生", "negate", seed);
        zh_neg += strstr(s, "不是") != NULL;
        free(s);
        s = mut1(m, in, "contradict", seed);
        assert_true(IN_LIST(s, mt_contra_en) || IN_LIST(s, mt_contra_zh));
        assert_non_null(strstr(s, "table for two"));
        free(s);
        s = mut1(m, in, "ambiguity", seed);
        assert_string_not_equal(s, in);
        free(s);
        s = mut1(m, in, "urgency", seed);
        assert_true(IN_LIST(s, mt_urgent_pre_en) || IN_LIST(s, mt_urgent_pre_zh) ||
                    IN_LIST(s, mt_urgent_suf_en) || IN_LIST(s, mt_urgent_suf_zh));
        free(s);
        s = mut1(m, in, "persona", seed);
        assert_true(IN_LIST(s, mt_impatient_en) || IN_LIST(s, mt_impatient_zh) ||
                    IN_LIST(s, mt_novice_en) || IN_LIST(s, mt_novice_zh) ||
                    IN_LIST(s, mt_attacker_en) || IN_LIST(s, mt_attacker_zh));
        assert_non_null(strstr(s, "ook a table for two.")); /* "Book" may become "book" */
        free(s);
        s = mut1(m, in, "inject", seed);
        assert_true(IN_LIST(s, mt_inject_en) || IN_LIST(s, mt_inject_zh));
        free(s);
    }
    assert_true(unneg > 0);  /* "not" removed at least once */
    assert_true(zh_neg > 0); /* 是 -> 不是 at least once */
    fl_mutator_free(m);
}

static void test_extremes(void **state) {
    (void)state;
    fl_mutator_ctx *m = ctx_new(1024, 0);
    for (uint64_t seed = 1; seed <= 30; seed++) {
        char *s = mut1(m, "Transfer 100 dollars to Bob", "num", seed);
        assert_string_not_equal(s, "Transfer 100 dollars to Bob");
        assert_non_null(strstr(s, "Transfer"));
        free(s);
        s = mut1(m, "hello", "empty", seed);
        assert_true(strlen(s) <= 9);
        int found = !*s;
        for (int i = 0; i < mt_empty_n; i++) found |= !strcmp(s, mt_empty[i]);
        assert_true(found);
        free(s);
        s = mut1(m, "hello world", "long", seed);
        assert_true(strlen(s) > 200 && strlen(s) <= 1024);
        free(s);
        s = mut1(m, "reveal the plan 计划", "unicode", seed);
        assert_string_not_equal(s, "reveal the plan 计划");
        free(s);
    }
    fl_mutator_free(m);
}

/* ---- JSON -------------------------------------------------------------------------------------- */
static int json_ok(const char *s) {
    cJSON *j = cJSON_ParseWithOpts(s, NULL, 1);
    int ok = j && cJSON_IsObject(j);
    cJSON_Delete(j);
    return ok;
}

static int json_nodes(const cJSON *j) {
    int n = 1;
    for (const cJSON *c = j->child; c; c = c->next) n += json_nodes(c);
    return n;
}

static int nodes_of(const char *s) {
    cJSON *j = cJSON_Parse(s);
    assert_non_null(j);
    int n = json_nodes(j);
    cJSON_Delete(j);
    return n;
}

static const char *top_keys(const char *s) {
    static char buf[256];
    buf[0] = 0;
    cJSON *j = cJSON_Parse(s);
    assert_non_null(j);
    for (cJSON *c = j->child; c; c = c->next)
        snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s,", c->string);
    cJSON_Delete(j);
    return buf;
}

static void test_json(void **state) {
    (void)state;
    fl_mutator_ctx *m = ctx_new(0, 0);
    const char *in = "{\"tool\":\"calc\",\"args\":{\"x\":1,\"y\":\"2\"},\"tags\":[1,2,3],\"ok\":true}";
    int n0 = nodes_of(in), broken = 0;
    for (uint64_t seed = 1; seed <= 60; seed++) {
        char *s = mut1(m, in, "json_add", seed);
        assert_true(json_ok(s));
        assert_true(nodes_of(s) > n0);
        free(s);
        s = mut1(m, in, "json_del", seed);
        assert_true(json_ok(s));
        assert_true(nodes_of(s) < n0);
        free(s);
        s = mut1(m, in, "json_retype", seed);
        assert_true(json_ok(s));
        assert_string_not_equal(s, in);
        assert_string_equal(top_keys(s), "tool,args,tags,ok,"); /* values change, keys stay */
        free(s);
        s = mut1(m, in, "json_break", seed);
        broken += !json_ok(s);
        free(s);
    }
    assert_int_equal(broken, 60);
    /* not JSON: the JSON operators do not apply, and havoc does not pick them */
    fl_rng r;
    fl_rng_seed(&r, 1);
    fl_case *c = case1("just text {not json"), *out = NULL;
    const char *jops[] = {"json_add", "json_del", "json_retype", "json_break"};
    for (int i = 0; i < 4; i++)
        assert_int_equal(fl_mutate(m, &r, c, NULL, fl_mutate_op_find(jops[i]), &out, NULL),
                         FL_ERR_UNSUPPORTED);
    fl_case_free(c);
    char *s = mut1(m, "{}", "json_add", 2);
    assert_true(json_ok(s) && nodes_of(s) >= 2);
    free(s);
    fl_mutator_free(m);
}

/* ---- multi-turn and splice ------------------------------------------------------------------- */
static fl_case *apply(const fl_mutator_ctx *m, const fl_case *in, const fl_case *other,
                      const char *op, uint64_t seed, fl_status want) {
    fl_rng r;
    fl_rng_seed(&r, seed);
    fl_case *out = NULL;
    fl_status st = fl_mutate(m, &r, in, other, fl_mutate_op_find(op), &out, NULL);
    if (st != want) fail_msg("%s: %s (want %s)", op, fl_strerror(st), fl_strerror(want));
    return out;
}

static int has_turn(const fl_case *c, const char *t) {
    for (int i = 0; i < c->n_turns; i++)
        if (!strcmp(c->turns[i], t)) return 1;
    return 0;
}

static void test_turns(void **state) {
    (void)state;
    fl_mutator_ctx *m = ctx_new(0, 4);
    const char *t3[] = {"one", "two", "three"};
    fl_case *c3 = fl_case_new(3, t3), *c1 = case1("only");
    c3->seed = 77;
    for (uint64_t seed = 1; seed <= 20; seed++) {
        fl_case *o = apply(m, c3, NULL, "turn_add", seed, FL_OK);
        assert_int_equal(o->n_turns, 4);
        assert_int_equal(o->seed, 77);
        for (int i = 0; i < 3; i++) assert_string_equal(o->turns[i], t3[i]);
        fl_case *o2 = apply(m, o, NULL, "turn_add", seed, FL_ERR_UNSUPPORTED); /* max_turns 4 */
        assert_null(o2);
        fl_case_free(o);
        o = apply(m, c3, NULL, "topic", seed, FL_OK);
        assert_true(o->n_turns == 4 || o->n_turns == 3);
        assert_string_equal(o->turns[0], "one"); /* the switch happens mid-conversation */
        int topic = 0;
        for (int i = 1; i < o->n_turns; i++)
            topic |= IN_LIST(o->turns[i], mt_topic_en) || IN_LIST(o->turns[i], mt_topic_zh);
        assert_true(topic);
        fl_case_free(o);
        o = apply(m, c3, NULL, "turn_drop", seed, FL_OK);
        assert_int_equal(o->n_turns, 2);
        assert_true(has_turn(o, "one") + has_turn(o, "two") + has_turn(o, "three") == 2);
        fl_case_free(o);
        o = apply(m, c3, NULL, "turn_swap", seed, FL_OK);
        assert_int_equal(o->n_turns, 3);
        assert_true(has_turn(o, "one") && has_turn(o, "two") && has_turn(o, "three"));
        assert_true(strcmp(o->turns[0], "one") || strcmp(o->turns[1], "two"));
        fl_case_free(o);
        o = apply(m, c3, NULL, "turn_dup", seed, FL_OK);
        assert_int_equal(o->n_turns, 4);
        int adj = 0;
        for (int i = 0; i < 3; i++) adj |= !strcmp(o->turns[i], o->turns[i + 1]);
        assert_true(adj);
        fl_case_free(o);
    }
    assert_null(apply(m, c1, NULL, "turn_drop", 1, FL_ERR_UNSUPPORTED));
    assert_null(apply(m, c1, NULL, "turn_swap", 1, FL_ERR_UNSUPPORTED));
    assert_null(apply(m, c1, NULL, "splice", 1, FL_ERR_UNSUPPORTED)); /* no partner */
    fl_case_free(c3);
    fl_case_free(c1);
    fl_mutator_free(m);
}

static void test_splice(void **state) {
    (void)state;
    fl_mutator_ctx *m = ctx_new(0, 0);
    fl_case *a = case1("aaa bbb ccc"), *b = case1("xxx yyy zzz");
    const char *ta[] = {"a1", "a2", "a3"}, *tb[] = {"b1", "b2"};
    fl_case *ma = fl_case_new(3, ta), *mb = fl_case_new(2, tb);
    for (uint64_t seed = 1; seed <= 30; seed++) {
        fl_case *o = apply(m, a, b, "splice", seed, FL_OK);
        assert_int_equal(o->n_turns, 1);
        /* words: a prefix of a's, then a suffix of b's */
        const char *s = o->turns[0];
        const char *wa[] = {"aaa", "bbb", "ccc"}, *wb[] = {"xxx", "yyy", "zzz"};
        int i = 0, j = 0;
        char buf[64];
        snprintf(buf, sizeof buf, "%s", s);
        for (char *tok = strtok(buf, " "); tok; tok = strtok(NULL, " ")) {
            if (j == 0 && i < 3 && !strcmp(tok, wa[i])) {
                i++;
                continue;
            }
            while (j < 3 && strcmp(tok, wb[j])) j++;
            if (j == 3) fail_msg("splice gave '%s'", s);
            j++;
        }
        fl_case_free(o);
        o = apply(m, ma, mb, "splice", seed, FL_OK);
        /* each turn: one of ours, one of theirs, or a head of ours with a tail of theirs */
        assert_true(o->n_turns >= 1);
        for (int k = 0; k < o->n_turns; k++) {
            const char *t = o->turns[k];
            if (t[0] == 'a') t += 2;
            if (t[0] == ' ') t++;
            if (t[0] == 'b') t += 2;
            if (*t) fail_msg("splice made turn '%s'", o->turns[k]);
        }
        fl_case_free(o);
    }
    fl_case_free(a), fl_case_free(b), fl_case_free(ma), fl_case_free(mb);
    fl_mutator_free(m);
}

/* ---- havoc: determinism, UTF-8, caps ----------------------------------------------------------- */
static const char *const MIXED[] = {
    "Please calculate 12 * 7 and send the result to Bob.",
    "帮我查一下明天北京的天气，然后发邮件给老板。",
    "Book a flight 🛫 to Tokyo ✈️ for 2 people, 预算 5000 元!",
    "{\"tool\":\"search\",\"query\":\"最新 news 😀\",\"limit\":10}",
    "Ｆｕｌｌｗｉｄｔｈ and e\u0301 combining, RTL \u202eabc\u202c, ZWJ 👨‍👩‍👧",
    "",
};

static fl_case *mixed_case(fl_rng *r) {
    int n = 1 + (int)fl_rng_below(r, 3);
    const char *t[3];
    for (int i = 0; i < n; i++) t[i] = MIXED[fl_rng_below(r, 6)];
    return fl_case_new(n, t);
}

static void test_havoc_deterministic(void **state) {
    (void)state;
    fl_mutator_ctx *m = ctx_new(0, 0);
    fl_rng pick;
    fl_rng_seed(&pick, 9);
    int differ = 0;
    for (int round = 0; round < 200; round++) {
        fl_case *in = mixed_case(&pick), *other = mixed_case(&pick);
        fl_case *o[3];
        fl_mutate_info info[3];
        for (int k = 0; k < 3; k++) {
            fl_rng r;
            fl_rng_seed(&r, k < 2 ? 1000 + (uint64_t)round : 5000 + (uint64_t)round);
            assert_int_equal(fl_mutate_ex(m, &r, in, other, FL_MUTATE_HAVOC, &o[k], &info[k]), FL_OK);
            assert_string_equal(info[k].op_name, "havoc");
            assert_true(info[k].n_ops >= 1 && info[k].n_ops <= 8);
        }
        assert_int_equal(o[0]->n_turns, o[1]->n_turns);
        for (int i = 0; i < o[0]->n_turns; i++) assert_string_equal(o[0]->turns[i], o[1]->turns[i]);
        assert_int_equal(info[0].n_ops, info[1].n_ops);
        assert_memory_equal(info[0].ops, info[1].ops, (size_t)info[0].n_ops * sizeof(int));
        int same = o[0]->n_turns == o[2]->n_turns;
        for (int i = 0; same && i < o[0]->n_turns; i++) same = !strcmp(o[0]->turns[i], o[2]->turns[i]);
        differ += !same;
        for (int k = 0; k < 3; k++) fl_case_free(o[k]);
        fl_case_free(in), fl_case_free(other);
    }
    assert_true(differ > 180); /* other seeds, other mutations */
    fl_mutator_free(m);
}

/* A miniature fuzzing loop: children become parents, so stacks compound over generations. */
static void test_havoc_utf8_caps(void **state) {
    (void)state;
    const size_t max_len = 600;
    fl_mutator_ctx *m = ctx_new(max_len, 5);
    fl_err e = {0};
    const char *d = "a=\"{\\\"x\\\":\"\nb=\"\xe4\xbd\xa0\xe5\xa5\xbd\"\n\"\\x41\\x42\"\n";
    assert_int_equal(fl_mutator_add_dict_text(m, d, strlen(d), "t.dict", &e), FL_OK);
    fl_rng r;
    fl_rng_seed(&r, 42);
    enum { POOL = 16 };
    fl_case *pool[POOL];
    for (int i = 0; i < POOL; i++) pool[i] = mixed_case(&r);
    int used[64] = {0};
    const int rounds = 4000;
    for (int round = 0; round < rounds; round++) {
        int a = (int)fl_rng_below(&r, POOL), b = (int)fl_rng_below(&r, POOL);
        fl_case *out;
        fl_mutate_info info;
        assert_int_equal(fl_mutate_ex(m, &r, pool[a], pool[b], FL_MUTATE_HAVOC, &out, &info), FL_OK);
        size_t total = 0;
        assert_true(out->n_turns <= 5);
        for (int i = 0; i < out->n_turns; i++) {
            size_t n = strlen(out->turns[i]);
            if (!fl_utf8_valid(out->turns[i], n))
                fail_msg("round %d: invalid UTF-8 after %s...: '%s'", round,
                         fl_mutate_op_name(info.ops[0]), out->turns[i]);
            total += n;
        }
        assert_true(total <= max_len);
        for (int k = 0; k < info.n_ops; k++) used[info.ops[k]]++;
        if (fl_rng_below(&r, 4)) { /* keep most children */
            fl_case_free(pool[a]);
            pool[a] = out;
        } else {
            fl_case_free(out);
        }
        if (round % 50 == 49) { /* fresh blood, so the JSON and reorder ops keep applying */
            fl_case_free(pool[b]);
            pool[b] = mixed_case(&r);
        }
    }
    for (int i = 0; i < fl_mutate_op_count(); i++)
        if (getenv("MT_DEBUG")) fprintf(stderr, "%-12s %d\n", fl_mutate_op_name(i), used[i]);
    for (int i = 0; i < fl_mutate_op_count(); i++)
        if (used[i] < 5) fail_msg("havoc applied %s only %d times", fl_mutate_op_name(i), used[i]);
    /* a JSON parent: the JSON operators are a good part of the stacks */
    fl_case *json = case1(MIXED[3]);
    memset(used, 0, sizeof used);
    for (int round = 0; round < 500; round++) {
        fl_case *out;
        fl_mutate_info info;
        assert_int_equal(fl_mutate_ex(m, &r, json, NULL, FL_MUTATE_HAVOC, &out, &info), FL_OK);
        for (int k = 0; k < info.n_ops; k++) used[info.ops[k]]++;
        assert_true(fl_utf8_valid(out->turns[0], strlen(out->turns[0])));
        fl_case_free(out);
    }
    const char *jops[] = {"json_add", "json_del", "json_retype", "json_break"};
    for (int i = 0; i < 4; i++) assert_true(used[fl_mutate_op_find(jops[i])] >= 20 + 40 * (i < 3));
    fl_case_free(json);
    for (int i = 0; i < POOL; i++) fl_case_free(pool[i]);
    fl_mutator_free(m);
}

static void test_caps_and_garbage(void **state) {
    (void)state;
    fl_mutator_ctx *m = ctx_new(64, 2);
    /* an oversized input is clamped to the cap at a code point boundary */
    char big[400];
    for (int i = 0; i < 100; i++) memcpy(big + 3 * i, "中", 3);
    big[300] = 0;
    const char *t3[] = {big, "b", "c"};
    fl_case *in = fl_case_new(3, t3), *out;
    fl_rng r;
    fl_rng_seed(&r, 3);
    for (int k = 0; k < 50; k++) {
        assert_int_equal(fl_mutate(m, &r, in, NULL, -1, &out, NULL), FL_OK);
        assert_true(out->n_turns <= 2);
        size_t total = 0;
        for (int i = 0; i < out->n_turns; i++) {
            total += strlen(out->turns[i]);
            assert_true(fl_utf8_valid(out->turns[i], strlen(out->turns[i])));
        }
        assert_true(total <= 64);
        fl_case_free(out);
    }
    fl_case_free(in);
    /* invalid UTF-8 in, no crash, caps still hold */
    const char *junk = "\xff\xfe abc \xe4\xb8 \xed\xa0\x80 {\"a\":\"\xc0\"}";
    in = case1(junk);
    for (int k = 0; k < 300; k++) {
        assert_int_equal(fl_mutate(m, &r, in, in, -1, &out, NULL), FL_OK);
        fl_case_free(out);
    }
    fl_case_free(in);
    /* an empty case: havoc adds a turn */
    in = fl_case_new(0, NULL);
    assert_int_equal(fl_mutate(m, &r, in, NULL, -1, &out, NULL), FL_OK);
    assert_true(out->n_turns >= 1);
    fl_case_free(out);
    fl_case_free(in);
    fl_mutator_free(m);
}

/* ---- files --------------------------------------------------------------------------------- */
static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void expect_dict_err(fl_mutator_ctx *m, const char *text, const char *needle) {
    fl_err e = {0};
    int before = fl_mutator_dict_size(m);
    fl_status st = fl_mutator_add_dict_text(m, text, strlen(text), "bad.dict", &e);
    if (st != FL_ERR_FORMAT) fail_msg("'%s' parsed (%s)", text, fl_strerror(st));
    if (!strstr(e.msg, needle)) fail_msg("message '%s' lacks '%s'", e.msg, needle);
    assert_int_equal(fl_mutator_dict_size(m), before); /* all or nothing */
}

static void test_dict_file(void **state) {
    (void)state;
    fl_mutator_ctx *m = ctx_new(0, 0);
    char path[] = "/tmp/flare_test_dict_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    write_file(path, "# AFL dictionary\n"
                     "kw_select=\"SELECT\"\n"
                     "  spaced  =  \"a b\"  \n"
                     "level@3=\"lvl\"\n"
                     "\"bare\"\n"
                     "esc=\"\\x41\\x42\\\\\\\"q\"\n"
                     "\r\n"
                     "zh=\"你好\"\n"
                     "hex_utf8=\"\\xe4\\xbd\\xa0\"\n");
    fl_err e = {0};
    if (fl_mutator_load_dict(m, path, &e) != FL_OK) fail_msg("%s", e.msg);
    const char *want[] = {"SELECT", "a b", "lvl", "bare", "AB\\\"q", "你好", "你"};
    assert_int_equal(fl_mutator_dict_size(m), 7);
    for (int i = 0; i < 7; i++) assert_string_equal(fl_mutator_dict_token(m, i), want[i]);
    /* errors name the file and the line */
    write_file(path, "ok=\"fine\"\n# comment\nbroken=\"no end\n");
    assert_int_equal(fl_mutator_load_dict(m, path, &e), FL_ERR_FORMAT);
    char where[300];
    snprintf(where, sizeof where, "%s:3:", path);
    if (!strstr(e.msg, where)) fail_msg("'%s' lacks '%s'", e.msg, where);
    assert_int_equal(fl_mutator_dict_size(m), 7);
    unlink(path);
    assert_int_equal(fl_mutator_load_dict(m, path, &e), FL_ERR_IO);
    assert_non_null(strstr(e.msg, path));

    expect_dict_err(m, "a=\"x\\q\"", "bad.dict:1: unknown escape");
    expect_dict_err(m, "\n\na=\"\\x4\"", "bad.dict:3: '\\x' must be followed by two hex digits");
    expect_dict_err(m, "a=\"\\xZZ\"", "two hex digits");
    expect_dict_err(m, "a=\"\\x00\"", "\\x00");
    expect_dict_err(m, "a=\"\"", "empty value");
    expect_dict_err(m, "a=\"\\xff\"", "not valid UTF-8");
    expect_dict_err(m, "a=\"x\" trailing", "end with");
    expect_dict_err(m, "a \"x\"", "expected '='");
    expect_dict_err(m, "a=x", "double-quoted");
    expect_dict_err(m, "=\"x\"", "expected a name");
    expect_dict_err(m, "a=\"x\"y\"", "unescaped");
    expect_dict_err(m, "a@=\"x\"", "level number");
    expect_dict_err(m, "a=\"tab\there\"", "control character");
    /* a NUL byte: the line is named, nothing of the text is kept */
    const char nul[] = "a=\"x\"\nb=\"y\0\"\n";
    int before = fl_mutator_dict_size(m);
    assert_int_equal(fl_mutator_add_dict_text(m, nul, sizeof nul - 1, "bad.dict", &e), FL_ERR_FORMAT);
    if (!strstr(e.msg, "bad.dict:2: NUL byte")) fail_msg("'%s'", e.msg);
    assert_int_equal(fl_mutator_dict_size(m), before);
    fl_mutator_free(m);
}

static void test_lexicon_file(void **state) {
    (void)state;
    fl_mutator_ctx *m = ctx_new(0, 0);
    int g0 = fl_mutator_lexicon_groups(m);
    fl_err e = {0};
    const char *ok = "# groups\nquux, corge\n飞机，航班\n";
    assert_int_equal(fl_mutator_add_lexicon_text(m, ok, strlen(ok), "u.lex", &e), FL_OK);
    assert_int_equal(fl_mutator_lexicon_groups(m), g0 + 2);
    char *s = mut1(m, "坐飞机", "synonym", 1);
    assert_string_equal(s, "坐航班");
    free(s);
    const struct { const char *text, *needle; } bad[] = {
        {"a, b\nlonely\n", "u.lex:2: a synonym group needs at least two"},
        {"same, SAME\n", "u.lex:1: a synonym group"},
        {"x, y\n\n\xff\xfe, z\n", "u.lex:3: not valid UTF-8"},
        {"-dash, word\n", "u.lex:1: entry '-dash' must start with"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(fl_mutator_add_lexicon_text(m, bad[i].text, strlen(bad[i].text), "u.lex", &e),
                         FL_ERR_FORMAT);
        if (!strstr(e.msg, bad[i].needle)) fail_msg("'%s' lacks '%s'", e.msg, bad[i].needle);
        assert_int_equal(fl_mutator_lexicon_groups(m), g0 + 2); /* all or nothing */
    }
    const char nul[] = "p, q\nr, s\0\n";
    assert_int_equal(fl_mutator_add_lexicon_text(m, nul, sizeof nul - 1, "u.lex", &e), FL_ERR_FORMAT);
    if (!strstr(e.msg, "u.lex:2: NUL byte")) fail_msg("'%s'", e.msg);
    assert_int_equal(fl_mutator_lexicon_groups(m), g0 + 2);
    char path[] = "/tmp/flare_test_lex_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    write_file(path, "plugh, xyzzy\n");
    assert_int_equal(fl_mutator_load_lexicon(m, path, &e), FL_OK);
    unlink(path);
    s = mut1(m, "zork xyzzy", "synonym", 1);
    assert_string_equal(s, "zork plugh");
    free(s);
    fl_mutator_free(m);
}

/* Every built-in phrase is valid UTF-8 (they are spliced into turns verbatim). */
static void test_builtin_data(void **state) {
    (void)state;
    const char *const *lists[] = {mt_words_en, mt_words_zh, mt_contra_en, mt_inject_en,
                                  mt_inject_zh, mt_unicode_odd, mt_combining, mt_extreme_num,
                                  mt_punct, mt_topic_zh, mt_json_keys, mt_empty};
    const int ns[] = {mt_words_en_n, mt_words_zh_n, mt_contra_en_n, mt_inject_en_n,
                      mt_inject_zh_n, mt_unicode_odd_n, mt_combining_n, mt_extreme_num_n,
                      mt_punct_n, mt_topic_zh_n, mt_json_keys_n, mt_empty_n};
    for (size_t l = 0; l < sizeof ns / sizeof ns[0]; l++)
        for (int i = 0; i < ns[l]; i++) assert_true(fl_utf8_valid(lists[l][i], strlen(lists[l][i])));
    for (int i = 0; i < mt_inject_wrap_n; i++) assert_non_null(strstr(mt_inject_wrap[i], "%s"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_op_table),       cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_synonym),        cmocka_unit_test(test_insert_and_dict),
        cmocka_unit_test(test_delete),         cmocka_unit_test(test_dup_reorder),
        cmocka_unit_test(test_typo_noise),     cmocka_unit_test(test_phrases),
        cmocka_unit_test(test_extremes),       cmocka_unit_test(test_json),
        cmocka_unit_test(test_turns),          cmocka_unit_test(test_splice),
        cmocka_unit_test(test_havoc_deterministic), cmocka_unit_test(test_havoc_utf8_caps),
        cmocka_unit_test(test_caps_and_garbage), cmocka_unit_test(test_dict_file),
        cmocka_unit_test(test_lexicon_file),   cmocka_unit_test(test_builtin_data),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
