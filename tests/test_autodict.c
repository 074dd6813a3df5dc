/* The automatic dictionary from the traces (src/agents/mutate/autodict.c, issue 15 §2): what
 * is learnt from which events, what is not (the case's own words, the dictionary's tokens,
 * short words), the bound (the newest tokens stay), snapshots that outlive changes, the
 * mutators drawing from it, and a campaign that learns. */
#include <sys/stat.h>

#include "testutil.h"

#include "agents/campaign/campaign_int.h"
#include "flare/agents/campaign.h"
#include "flare/agents/mutate.h"
#include "campfix.h"

static fl_trace *trace_of(const char *const *lines, int n) {
    fl_trace *t = fl_trace_new();
    assert_non_null(t);
    for (int i = 0; i < n; i++) {
        int done = 0;
        assert_int_equal(fl_trace_feed_line(t, lines[i], strlen(lines[i]), i, &done), FL_OK);
    }
    return t;
}

static int has(const fl_mutate_extra *x, const char *w) {
    for (int i = 0; x && i < x->n; i++)
        if (!strcmp(x->tok[i], w)) return 1;
    return 0;
}

static const char *const EVENTS[] = {
    "{\"event\":\"message\",\"from\":\"user\",\"to\":\"Desk\",\"content\":\"refund my order\"}",
    "{\"event\":\"tool_call\",\"agent\":\"Desk\",\"tool\":\"lookup\",\"arguments\":{\"ticket\":\"ORD-1234\"}}",
    "{\"event\":\"tool_result\",\"agent\":\"Desk\",\"tool\":\"lookup\",\"ok\":true,\"content\":\"Order owner alice@example.com, 99.50 EUR\"}",
    "{\"event\":\"output\",\"content\":\"Escalated to Supervisor.\"}",
    "{\"event\":\"done\"}"};

static void test_learn(void **state) {
    (void)state;
    fl_mutator_ctx *m;
    fl_err e = {0};
    assert_int_equal(fl_mutator_new(NULL, &m, &e), FL_OK);
    const char *dict = "t=\"Escalated\"\n";
    assert_int_equal(fl_mutator_add_dict_text(m, dict, strlen(dict), "d", &e), FL_OK);
    fl_autodict *a = fl_autodict_new(0);
    fl_trace *t = trace_of(EVENTS, 5);
    const char *turns[] = {"please refund my order"};
    fl_case *c = fl_case_new(1, turns);
    assert_true(fl_autodict_learn(a, m, t, c) > 0);
    const fl_mutate_extra *x = fl_autodict_snapshot(a);
    assert_non_null(x);
    assert_true(has(x, "ORD-1234"));          /* a tool argument */
    assert_true(has(x, "alice@example.com")); /* a tool result */
    assert_true(has(x, "99.50"));             /* a value */
    assert_true(has(x, "Supervisor"));        /* the output, without its full stop */
    assert_true(has(x, "ticket"));
    assert_false(has(x, "refund"));           /* the fuzzer's own input coming back */
    assert_false(has(x, "Order"));            /* ... ignoring case */
    assert_false(has(x, "Escalated"));        /* in the dictionary already */
    assert_false(has(x, "EUR"));              /* too short for a word */
    int n = x->n;
    assert_int_equal(fl_autodict_learn(a, m, t, c), 0); /* nothing twice */
    assert_int_equal(fl_autodict_size(a), n);
    fl_autodict_release(a, x);
    fl_case_free(c);
    fl_trace_free(t);
    fl_autodict_free(a);
    fl_mutator_free(m);
}

static void test_bound_and_snapshots(void **state) {
    (void)state;
    fl_mutator_ctx *m;
    fl_err e = {0};
    assert_int_equal(fl_mutator_new(NULL, &m, &e), FL_OK);
    fl_autodict *a = fl_autodict_new(3);
    fl_case *c = fl_case_new(0, NULL);
    const char *first[] = {"{\"event\":\"output\",\"content\":\"alpha bravo charlie\"}"};
    fl_trace *t1 = trace_of(first, 1);
    assert_int_equal(fl_autodict_learn(a, m, t1, c), 3);
    const fl_mutate_extra *old = fl_autodict_snapshot(a);
    const char *second[] = {"{\"event\":\"output\",\"content\":\"delta echo\"}"};
    fl_trace *t2 = trace_of(second, 1);
    assert_int_equal(fl_autodict_learn(a, m, t2, c), 2);
    assert_int_equal(fl_autodict_size(a), 3); /* bounded */
    assert_int_equal(fl_autodict_added(a), 5);
    const fl_mutate_extra *now = fl_autodict_snapshot(a);
    assert_true(has(now, "charlie") && has(now, "delta") && has(now, "echo")); /* the newest */
    assert_false(has(now, "alpha"));
    assert_true(has(old, "alpha") && old->n == 3); /* the old snapshot is untouched */
    fl_autodict_release(a, old);
    fl_autodict_release(a, now);
    fl_trace_free(t1), fl_trace_free(t2);
    fl_case_free(c);
    fl_autodict_free(a);
    fl_mutator_free(m);
}

/* insert draws from the extra tokens as from the dictionary */
static void test_mutators_use_it(void **state) {
    (void)state;
    fl_mutator_ctx *m;
    fl_err e = {0};
    assert_int_equal(fl_mutator_new(NULL, &m, &e), FL_OK);
    const char *tok[] = {"ZQXTOKEN"};
    fl_mutate_extra x = {tok, 1};
    const char *turns[] = {"book a table for two"};
    fl_case *in = fl_case_new(1, turns);
    int with = 0, without = 0;
    for (int pass = 0; pass < 2; pass++) {
        fl_rng r;
        fl_rng_seed(&r, 7);
        for (int i = 0; i < 100; i++) {
            fl_case *out = NULL;
            assert_int_equal(fl_mutate_with(m, pass ? NULL : &x, &r, in, NULL,
                                            fl_mutate_op_find("insert"), &out, NULL), FL_OK);
            int hit = strstr(out->turns[0], "ZQXTOKEN") != NULL;
            if (pass) without += hit;
            else with += hit;
            fl_case_free(out);
        }
    }
    assert_true(with > 50); /* 3 in 4 from the dictionary's tokens */
    assert_int_equal(without, 0);
    fl_case_free(in);
    fl_mutator_free(m);
}

/* A campaign learns (--auto-dict) from campaign_tgt's traces ("done: 42" is the system's, not
 * the seed's), and learns nothing by default. */
static void test_campaign(void **state) {
    (void)state;
    char tmp[] = "/tmp/flare_autodict_XXXXXX", tgt[128], seeds[128], out[2][160], p[256];
    assert_int_equal(camp_tmp_new(tmp, tgt, sizeof tgt), 0);
    snprintf(seeds, sizeof seeds, "%s/seeds", tmp);
    mkdir(seeds, 0755);
    snprintf(p, sizeof p, "%s/a.txt", seeds), write_file(p, "what is math");
    fl_err e = {0};
    char *argv[] = {tgt, NULL};
    fl_campaign_result r[2];
    for (int k = 0; k < 2; k++) {
        fl_campaign_opts o;
        fl_campaign_opts_default(&o);
        snprintf(out[k], sizeof out[k], "%s/out%d", tmp, k);
        o.in_dir = seeds, o.out_dir = out[k], o.argv = argv, o.max_execs = 50, o.seed = 1;
        o.timeout_ms = 2000, o.write_report = 0, o.auto_dict = k ? 0 : 16;
        assert_int_equal(fl_campaign_run(&o, &r[k], &e), FL_OK);
    }
    assert_true(r[0].stats.auto_dict > 0 && r[0].stats.auto_dict <= 16);
    assert_true(r[0].stats.auto_dict_learnt >= (uint64_t)r[0].stats.auto_dict);
    assert_int_equal(r[1].stats.auto_dict, 0);
    assert_int_equal(camp_tmp_remove(tmp), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_learn),
        cmocka_unit_test(test_bound_and_snapshots),
        cmocka_unit_test(test_mutators_use_it),
        cmocka_unit_test(test_campaign),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
