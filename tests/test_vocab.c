/* Tests for the vocabulary of issue 15 §2: the spec's automatic dictionary (identifier
 * splitting, no duplicates), the risky-value operator and the built-in risky lexicon, the
 * language kept by the operators (no CJK into an English turn unless mix_lang), the
 * mix_lang operator, and a short campaign on examples/systems/helpdesk that finds
 * something. */
#define _XOPEN_SOURCE 700
#include "testutil.h"

#include <unistd.h>

#include "agents/mutate/mutate_int.h"
#include "flare/agents/campaign.h"
#include "flare/agents/oracle.h"
#include "flare/agents/mutate.h"
#include "flare/agents/spec.h"

static fl_mutator_ctx *ctx(int mix) {
    fl_mutate_opts o;
    fl_mutate_opts_default(&o);
    o.mix_lang = mix;
    fl_mutator_ctx *m = NULL;
    fl_err e = {0};
    if (fl_mutator_new(&o, &m, &e) != FL_OK) fail_msg("mutator_new: %s", e.msg);
    return m;
}

static int dict_holds(const mt_dict *d, const char *w) {
    for (int i = 0; i < d->n; i++)
        if (!strcmp(d->tok[i], w)) return 1;
    return 0;
}

static void test_ident_split(void **state) {
    (void)state;
    mt_dict d = {0};
    assert_int_equal(mt_dict_add_ident(&d, "book_flight"), 3);
    assert_true(dict_holds(&d, "book") && dict_holds(&d, "flight") && dict_holds(&d, "book flight"));
    assert_int_equal(mt_dict_add_ident(&d, "convertCurrency"), 3);
    assert_true(dict_holds(&d, "convert") && dict_holds(&d, "currency"));
    assert_true(dict_holds(&d, "convert currency"));
    /* words already there are not added again; one-letter parts are dropped */
    assert_int_equal(mt_dict_add_ident(&d, "book-a.flight"), 1); /* only "book a flight" */
    assert_true(dict_holds(&d, "book a flight"));
    assert_int_equal(mt_dict_add_ident(&d, "Checker"), 1);
    assert_true(dict_holds(&d, "checker"));
    assert_int_equal(mt_dict_add_ident(&d, "checker"), 0);
    assert_int_equal(mt_dict_add_ident(&d, ""), 0);
    assert_int_equal(mt_dict_add_ident(&d, "__"), 0);
    assert_int_equal(mt_dict_add_ident(&d, "read_file2X"), 3); /* "read", "file2", "read file2 x" */
    mt_dict_clear(&d);
}

static void test_spec_words(void **state) {
    (void)state;
    const char *js = "{\"agents\":[{\"name\":\"TravelAgent\",\"tools\":[\"book_flight\","
                     "\"convert_currency\"],\"decisions\":{\"pay_method\":[\"credit_card\"]}}],"
                     "\"entry\":\"TravelAgent\",\"edges\":[[\"user\",\"TravelAgent\"]]}";
    fl_spec *s = NULL;
    fl_err e = {0};
    if (fl_spec_parse(js, strlen(js), "<t>", &s, &e) != FL_OK) fail_msg("%s", e.msg);
    fl_mutator_ctx *m = ctx(0);
    assert_int_equal(fl_mutator_add_spec_words(m, s, &e), FL_OK);
    int n = fl_mutator_dict_size(m);
    const char *want[] = {"travel", "agent", "book", "flight", "convert", "currency", "pay",
                          "method", "credit", "card", "book flight"};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        if (!dict_holds(&m->dict, want[i])) fail_msg("spec words lack '%s'", want[i]);
    assert_int_equal(fl_mutator_add_spec_words(m, s, &e), FL_OK); /* idempotent */
    assert_int_equal(fl_mutator_dict_size(m), n);
    assert_int_equal(fl_mutator_add_spec_words(m, NULL, &e), FL_OK); /* no spec: nothing */
    /* the insert operator draws them */
    fl_rng r;
    fl_rng_seed(&r, 7);
    const char *t = "I need help";
    fl_case *in = fl_case_new(1, &t);
    int hits = 0;
    for (int i = 0; i < 200; i++) {
        fl_case *out;
        assert_int_equal(fl_mutate(m, &r, in, NULL, fl_mutate_op_find("insert"), &out, NULL), FL_OK);
        for (size_t k = 0; k < sizeof want / sizeof *want; k++)
            if (strstr(out->turns[0], want[k])) {
                hits++;
                break;
            }
        fl_case_free(out);
    }
    assert_true(hits > 100);
    fl_case_free(in);
    fl_mutator_free(m);
    fl_spec_free(s);
}

/* Every operator applied to an English turn, a few thousand times: no Han characters appear without
 * mix_lang, except through the mix_lang operator; with mix_lang = 1 it does appear. */
static int cjk_count(fl_mutator_ctx *m, int skip_mix_op) {
    fl_rng r;
    fl_rng_seed(&r, 3);
    const char *t[] = {"Please refund my order from last week, it arrived broken.",
                       "Thanks. And what about the second package?"};
    fl_case *in = fl_case_new(2, t);
    int cjk = 0, mix = fl_mutate_op_find("mix_lang");
    for (int op = 0; op < fl_mutate_op_count(); op++) {
        if (op == mix && skip_mix_op) continue;
        for (int i = 0; i < 60; i++) {
            fl_case *out = NULL;
            if (fl_mutate(m, &r, in, in, op, &out, NULL) != FL_OK) continue;
            for (int k = 0; k < out->n_turns; k++) cjk += mt_has_han(out->turns[k], strlen(out->turns[k]));
            fl_case_free(out);
        }
    }
    fl_case_free(in);
    return cjk;
}

static void test_language_kept(void **state) {
    (void)state;
    fl_mutator_ctx *m = ctx(0);
    assert_int_equal(cjk_count(m, 1), 0);
    assert_true(cjk_count(m, 0) > 0); /* the mix_lang operator does mix */
    fl_mutator_free(m);
    m = ctx(1);
    assert_true(cjk_count(m, 1) > 0);
    fl_mutator_free(m);
    /* a Chinese turn gets Chinese phrases */
    m = ctx(0);
    fl_rng r;
    fl_rng_seed(&r, 5);
    const char *t = "请帮我退款，订单上周到了但是坏了";
    fl_case *in = fl_case_new(1, &t);
    int latin = 0;
    for (int i = 0; i < 100; i++) {
        fl_case *out;
        assert_int_equal(fl_mutate(m, &r, in, NULL, fl_mutate_op_find("contradict"), &out, NULL), FL_OK);
        for (const char *p = out->turns[0]; *p; p++) latin += (*p >= 'a' && *p <= 'z');
        fl_case_free(out);
    }
    assert_int_equal(latin, 0);
    fl_case_free(in);
    fl_mutator_free(m);
}

static void test_risky(void **state) {
    (void)state;
    /* the built-in values are valid UTF-8 and cover the classes of the issue */
    const char *const *lists[] = {mt_risky_any, mt_risky_en, mt_risky_zh};
    const int ns[] = {mt_risky_any_n, mt_risky_en_n, mt_risky_zh_n};
    for (int l = 0; l < 3; l++) {
        assert_true(ns[l] >= 18);
        for (int i = 0; i < ns[l]; i++) assert_true(fl_utf8_valid(lists[l][i], strlen(lists[l][i])));
    }
    for (int i = 0; i < mt_risky_zh_n; i++) assert_true(mt_has_han(mt_risky_zh[i], strlen(mt_risky_zh[i])));
    fl_mutator_ctx *m = ctx(0);
    fl_rng r;
    fl_rng_seed(&r, 11);
    const char *t = "Move the meeting to Friday at 3 pm";
    fl_case *in = fl_case_new(1, &t);
    int changed = 0;
    for (int i = 0; i < 200; i++) {
        fl_case *out;
        assert_int_equal(fl_mutate(m, &r, in, NULL, fl_mutate_op_find("risky"), &out, NULL), FL_OK);
        changed += strcmp(out->turns[0], t) != 0;
        assert_true(fl_utf8_valid(out->turns[0], strlen(out->turns[0])));
        assert_false(mt_has_han(out->turns[0], strlen(out->turns[0])));
        fl_case_free(out);
    }
    assert_true(changed >= 190);
    fl_case_free(in);
    /* user extension: -x tokens go to the insertion operators like the built-in ones */
    fl_err e = {0};
    assert_int_equal(fl_mutator_add_dict_text(m, "x=\"-42 parsecs\"\n", 16, "<x>", &e), FL_OK);
    assert_true(dict_holds(&m->dict, "-42 parsecs"));
    fl_mutator_free(m);
}

/* A short campaign on one of the new example systems finds at least one planted defect. */
static void test_fuzz_helpdesk(void **state) {
    (void)state;
    const char *bin = "build/examples/helpdesk";
    TU_NEED(access(bin, X_OK) == 0, "build/examples/helpdesk (make builds it)");
    char dir[] = "/tmp/flare_vocab_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char out[256];
    snprintf(out, sizeof out, "%s/out", dir);
    char *argv[] = {(char *)bin, NULL};
    fl_campaign_opts o;
    fl_campaign_opts_default(&o);
    o.in_dir = "examples/systems/helpdesk/seeds";
    o.out_dir = out;
    o.argv = argv;
    o.spec_path = "examples/systems/helpdesk/spec.json";
    o.seed = 1;
    o.max_execs = 300;
    o.timeout_ms = 200;
    o.write_report = 0;
    fl_campaign_result res;
    fl_err e = {0};
    if (fl_campaign_run(&o, &res, &e) != FL_OK) fail_msg("campaign: %s", e.msg);
    int kinds = 0;
    for (int k = 0; k < FL_FIND_COUNT_; k++) kinds += res.stats.kind_first_exec[k] != 0;
    printf("helpdesk, 300 executions: %d finding kinds\n", kinds);
    assert_true(kinds >= 1);
    /* --mix-lang reaches the campaign and is recorded with it (what mixing does: above) */
    TU_NEED(access("build/flare", X_OK) == 0, "build/flare (make builds it)");
    assert_int_equal(tu_sh(NULL, "build/flare agents fuzz -i examples/systems/helpdesk/seeds "
                                 "-o %s/mix -E 20 -T 300 --mix-lang --quiet -- %s", dir, bin), 0);
    assert_int_equal(tu_sh(NULL, "grep -q '^command_line .*--mix-lang' %s/mix/fuzzer_stats", dir), 0);
    assert_int_equal(tu_sh(NULL, "build/flare agents fuzz -i examples/systems/helpdesk/seeds "
                                 "-o %s/nomix -E 20 -T 300 --quiet -- %s", dir, bin), 0);
    assert_int_equal(tu_sh(NULL, "grep -q -- '--mix-lang' %s/nomix/fuzzer_stats", dir), 1);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ident_split), cmocka_unit_test(test_spec_words),
        cmocka_unit_test(test_language_kept), cmocka_unit_test(test_risky),
        cmocka_unit_test(test_fuzz_helpdesk),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
