/* Tests for the rule oracles: every kind with traces that must and must not trigger it, MAST
 * tags, signature stability, de-duplication and options. */
#include "testutil.h"

#include <signal.h>

#include "agtrace.h"
#include "flare/agents/oracle.h"

static fl_oracle_opts opts(void) {
    fl_oracle_opts o;
    fl_oracle_opts_default(&o);
    return o;
}

/* Run the oracles over a trace; returns the findings (caller frees). */
static fl_findings run_t(const fl_spec *s, const fl_trace *t, const fl_oracle_opts *o) {
    fl_findings f = {0};
    fl_err e = {0};
    fl_status st = fl_oracle_check(s, NULL, t, o, &f, &e);
    if (st != FL_OK) fail_msg("oracle: %s", e.msg);
    for (int i = 0; i < f.n; i++) {
        assert_int_equal(strlen(f.v[i].signature), 16);
        char sig[17];
        fl_oracle_signature(f.v[i].key, sig);
        assert_string_equal(sig, f.v[i].signature);
        assert_int_equal(strncmp(f.v[i].key, fl_finding_kind_name(f.v[i].kind), strlen(fl_finding_kind_name(f.v[i].kind))), 0);
        assert_true(f.v[i].message[0] != 0);
        assert_true(f.v[i].event >= -1 && f.v[i].event < (t->n_events ? t->n_events : 1));
    }
    return f;
}

static fl_findings run(const fl_spec *s, const char *script, const fl_oracle_opts *o) {
    fl_trace *t = tr(script);
    fl_findings f = run_t(s, t, o);
    fl_trace_free(t);
    return f;
}

/* The finding of kind k (NULL when absent; fails when there are several of that kind unless
 * allow_many). */
static const fl_finding *find(const fl_findings *f, fl_finding_kind k) {
    const fl_finding *r = NULL;
    for (int i = 0; i < f->n; i++)
        if (f->v[i].kind == k) {
            if (r) fail_msg("two %s findings: %s / %s", fl_finding_kind_name(k), r->key, f->v[i].key);
            r = &f->v[i];
        }
    return r;
}

static int count(const fl_findings *f, fl_finding_kind k) {
    int n = 0;
    for (int i = 0; i < f->n; i++) n += f->v[i].kind == k;
    return n;
}

/* The only finding of script is of kind k with key `key`; returns nothing, frees. */
static void expect_one(const fl_spec *s, const char *script, const fl_oracle_opts *o, fl_finding_kind k,
                       const char *key, const char *mast) {
    fl_findings f = run(s, script, o);
    if (f.n != 1) fail_msg("%d findings for '%s' (first: %s)", f.n, script, f.n ? f.v[0].key : "-");
    assert_int_equal(f.v[0].kind, k);
    assert_string_equal(f.v[0].key, key);
    if (mast) assert_string_equal(f.v[0].mast, mast);
    else assert_null(f.v[0].mast);
    fl_findings_free(&f);
}

static void expect_none(const fl_spec *s, const char *script, const fl_oracle_opts *o) {
    fl_findings f = run(s, script, o);
    if (f.n) fail_msg("unexpected finding for '%s': %s (%s)", script, f.v[0].key, f.v[0].message);
    fl_findings_free(&f);
}

static void test_names(void **state) {
    (void)state;
    for (int k = 0; k < FL_FIND_COUNT_; k++) {
        assert_int_equal(fl_finding_kind_parse(fl_finding_kind_name((fl_finding_kind)k)), k);
        for (int j = 0; j < k; j++)
            assert_string_not_equal(fl_finding_kind_name((fl_finding_kind)k), fl_finding_kind_name((fl_finding_kind)j));
    }
    assert_int_equal(fl_finding_kind_parse("nope"), -1);
    assert_string_equal(fl_finding_kind_name(FL_FIND_SPEC), "spec_violation");
}

static void test_clean(void **state) {
    (void)state;
    expect_none(NULL, "m user M q; m M W t; c W calc; r W calc ok 4; m W M 4; o it is 4; d", NULL);
}

static void test_exit_kinds(void **state) {
    (void)state;
    fl_trace *t = tr("m user M q; m M W t");
    t->exit = FL_EXIT_CRASH;
    t->exit_status = -SIGSEGV;
    fl_findings f = run_t(NULL, t, NULL);
    const fl_finding *c = find(&f, FL_FIND_CRASH);
    assert_non_null(c);
    assert_int_equal(f.n, 1); /* no "no output" on top of a crash */
    assert_null(c->mast);
    assert_non_null(strstr(c->key, ":W")); /* the agent holding control */
    assert_non_null(strstr(c->message, "signal"));
    char sig[17];
    memcpy(sig, c->signature, 17);
    fl_findings_free(&f);
    /* same status, same agent, other content: same signature; another status: another */
    fl_trace_free(t);
    t = tr("m user M other words; m M W completely different");
    t->exit = FL_EXIT_CRASH;
    t->exit_status = -SIGSEGV;
    f = run_t(NULL, t, NULL);
    assert_string_equal(f.v[0].signature, sig);
    fl_findings_free(&f);
    t->exit_status = 3;
    f = run_t(NULL, t, NULL);
    assert_string_not_equal(f.v[0].signature, sig);
    assert_non_null(strstr(f.v[0].message, "status 3"));
    fl_findings_free(&f);

    t->exit = FL_EXIT_HANG;
    t->exit_status = -SIGTERM;
    f = run_t(NULL, t, NULL);
    assert_int_equal(f.n, 1);
    assert_int_equal(f.v[0].kind, FL_FIND_HANG);
    assert_string_equal(f.v[0].key, "hang:W");
    fl_findings_free(&f);

    t->exit = FL_EXIT_EOF;
    t->n_protocol = 1; /* the runner's "no done event" */
    f = run_t(NULL, t, NULL);
    assert_int_equal(f.n, 1);
    assert_string_equal(f.v[0].key, "protocol:eof");
    fl_findings_free(&f);
    t->n_protocol = 3;
    snprintf(t->protocol_msg, sizeof t->protocol_msg, "not a JSON object: \"garbage\"");
    f = run_t(NULL, t, NULL);
    assert_int_equal(f.n, 2);
    assert_string_equal(f.v[1].key, "protocol:bad_event");
    assert_non_null(strstr(f.v[1].message, "2 protocol problems"));
    assert_non_null(strstr(f.v[1].message, "garbage"));
    fl_findings_free(&f);

    t->exit = FL_EXIT_LIMIT;
    t->n_protocol = 0;
    f = run_t(NULL, t, NULL);
    assert_int_equal(f.n, 1);
    assert_string_equal(f.v[0].key, "protocol:limit");
    fl_findings_free(&f);
    fl_trace_free(t);

    /* a protocol problem in a case that otherwise ended well */
    t = tr("m user M q; o fine; d");
    t->n_protocol = 1;
    f = run_t(NULL, t, NULL);
    assert_int_equal(f.n, 1);
    assert_string_equal(f.v[0].key, "protocol:bad_event");
    fl_findings_free(&f);
    fl_trace_free(t);
}

static void test_output(void **state) {
    (void)state;
    expect_one(NULL, "m user M q; m M W t; m W M r; d", NULL, FL_FIND_NO_OUTPUT, "no_output:M", "FM-3.1");
    expect_one(NULL, "m user M q; o ; d", NULL, FL_FIND_EMPTY_OUTPUT, "empty_output:M", "FM-3.1");
    expect_one(NULL, "m user M q; o  \t ; d", NULL, FL_FIND_EMPTY_OUTPUT, "empty_output:M", "FM-3.1");
    expect_none(NULL, "m user M q; o .; d", NULL);
    /* only the final output counts for emptiness */
    expect_none(NULL, "m user M q; o ; o now really; d", NULL);
    /* length: default 64 KiB without a spec, from the options */
    fl_oracle_opts o = opts();
    o.max_output_bytes = 10;
    expect_none(NULL, "m user M q; o 0123456789; d", &o);
    expect_one(NULL, "m user M q; o 0123456789A; d", &o, FL_FIND_OUTPUT_LENGTH, "output_length:M", NULL);
    o.max_output_bytes = 0; /* off */
    expect_none(NULL, "m user M q; o 0123456789A; d", &o);
}

static fl_spec *spec_of(const char *text) {
    fl_spec *s;
    fl_err e;
    if (fl_spec_parse(text, strlen(text), "spec.json", &s, &e)) fail_msg("%s", e.msg);
    return s;
}

static const char *demo_spec =
    "{\"agents\": [{\"name\": \"M\", \"decisions\": {\"route\": [\"math\", \"chat\"]}},"
    "              {\"name\": \"W\", \"tools\": [\"calc\", \"search\"]}, {\"name\": \"C\"}, {\"name\": \"R\"}],"
    " \"entry\": \"M\","
    " \"edges\": [[\"M\", \"W\"], [\"W\", \"M\"], [\"M\", \"C\"], [\"C\", \"M\"], [\"C\", \"R\"], [\"R\", \"C\"],"
    "           [\"M\", \"output\"]],"
    " \"limits\": {\"output_bytes\": 20, \"turns\": 6, \"messages\": 5},"
    " \"forbidden_output\": [\"sk-[A-Za-z0-9]{8,}\", {\"name\": \"password\", \"pattern\": \"pass(word)?:\", \"icase\": true}]}";

static void test_output_spec(void **state) {
    (void)state;
    fl_spec *s = spec_of(demo_spec);
    expect_none(s, "m user M q; o 01234567890123456789; d", NULL);
    expect_one(s, "m user M q; o 01234567890123456789X; d", NULL, FL_FIND_OUTPUT_LENGTH, "output_length:M", "FM-1.1");
    fl_findings f = run(s, "m user M q; o 01234567890123456789X; d", NULL);
    assert_non_null(strstr(f.v[0].message, "spec.json"));
    fl_findings_free(&f);
    expect_one(s, "m user M q; o key sk-AbC12345x; d", NULL, FL_FIND_FORBIDDEN, "forbidden_output:sk-[A-Za-z0-9]{8,}",
               "FM-1.1");
    expect_none(s, "m user M q; o key sk-Ab1; d", NULL);
    expect_one(s, "m user M q; o PassWord: x; d", NULL, FL_FIND_FORBIDDEN, "forbidden_output:password", "FM-1.1");
    expect_one(s, "m user M q; o pass: x; d", NULL, FL_FIND_FORBIDDEN, "forbidden_output:password", "FM-1.1");
    /* any output event is checked, both patterns reported, the same pattern once */
    f = run(s, "m user M q; o sk-AAAAAAAAA pass:; o sk-BBBBBBBBB; d", NULL);
    assert_int_equal(count(&f, FL_FIND_FORBIDDEN), 2);
    assert_int_equal(f.v[0].event, 1);
    fl_findings_free(&f);
    fl_spec_free(s);
}

/* Forbidden patterns on every channel, scoped patterns, and the secret detector. */
static void test_channels(void **state) {
    (void)state;
    fl_spec *s = spec_of(demo_spec);
    /* a key leaked through a message and through a tool's arguments: two findings, named */
    fl_findings f = run(s, "m user M q; m M W use sk-AbC12345x; c W calc sk-AbC12345x; r W calc ok 4; m W M 4; o 4; d",
                        NULL);
    assert_int_equal(count(&f, FL_FIND_FORBIDDEN), 2);
    assert_string_equal(f.v[0].key, "forbidden_output:sk-[A-Za-z0-9]{8,}@message");
    assert_int_equal(f.v[0].event, 1);
    assert_non_null(strstr(f.v[0].message, "channel message, event 1, agent M"));
    assert_string_equal(f.v[1].key, "forbidden_output:sk-[A-Za-z0-9]{8,}@tool_arguments");
    assert_int_equal(f.v[1].event, 2);
    assert_non_null(strstr(f.v[1].message, "tool calc by W"));
    fl_findings_free(&f);
    /* a tool result, and the user's own message is the input, never a leak */
    expect_one(s, "m user M sk-AbC12345x; m M W t; r W calc ok pass: 1; m W M 4; o 4; d", NULL, FL_FIND_FORBIDDEN,
               "forbidden_output:password@tool_result", "FM-1.1");
    fl_spec_free(s);
    /* a pattern scoped to channels looks only there */
    s = spec_of("{\"agents\": [{\"name\": \"M\", \"tools\": [\"mail\"]}], \"entry\": \"M\","
                " \"edges\": [[\"M\", \"output\"]],"
                " \"forbidden_output\": [{\"pattern\": \"secret\", \"channels\": [\"tool_arguments\"]}]}");
    expect_none(s, "m user M q; r M mail ok secret; o secret; d", NULL);
    expect_one(s, "m user M q; c M mail the secret; o ok; d", NULL, FL_FIND_FORBIDDEN,
               "forbidden_output:secret@tool_arguments", "FM-1.1");
    fl_spec_free(s);
    /* the built-in secret detector: on without a spec, off by option or by the spec */
    static const char *const leaks[] = {
        "sk-proj-abcdefghijklmnopqrstuvwx",      "AKIAIOSFODNN7EXAMPLE",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "xoxb-1234567890-abcdef",
        "AIzaSyA-abcdefghijklmnopqrstuvwxyz01234", "sk_live_abcdefghijklmnop",
        "-----BEGIN RSA PRIVATE KEY-----",         "eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.abcdefghijk"};
    for (size_t i = 0; i < sizeof leaks / sizeof leaks[0]; i++) {
        char script[256];
        snprintf(script, sizeof script, "m user M q; c M mail to: x, body: %s; o ok; d", leaks[i]);
        f = run(NULL, script, NULL);
        if (count(&f, FL_FIND_FORBIDDEN) != 1) fail_msg("secret %s: %d findings", leaks[i], f.n);
        assert_non_null(strstr(f.v[0].key, "forbidden_output:secret:"));
        assert_non_null(strstr(f.v[0].key, "@tool_arguments"));
        fl_findings_free(&f);
    }
    expect_none(NULL, "m user M q; m M W the task is ask-me later about sky; o AKIA is a word; d", NULL);
    fl_oracle_opts o = opts();
    o.no_secrets = 1;
    expect_none(NULL, "m user M q; o AKIAIOSFODNN7EXAMPLE; d", &o);
    s = spec_of("{\"agents\": [{\"name\": \"M\"}], \"entry\": \"M\", \"edges\": [[\"M\", \"output\"]],"
                " \"secrets\": false}");
    expect_none(s, "m user M q; o AKIAIOSFODNN7EXAMPLE; d", NULL);
    fl_spec_free(s);
}

static void test_stderr_key(void **state) {
    (void)state;
    char k[192];
    fl_oracle_stderr_key("[flare: case 000001]\nTraceback (most recent call last):\n  File \"/srv/a.py\", line 12, in run\n"
                         "    go()\n  File \"/srv/b.py\", line 7, in go\n    d[key]\nKeyError: 'user_42'\n\n",
                         k, sizeof k);
    assert_string_equal(k, "File \"/srv/b.py\", line #, in go | KeyError");
    fl_oracle_stderr_key("TypeError: x is undefined\n    at plan (/app/agent.js:31:9)\n    at main (/app/agent.js:80:3)\n",
                         k, sizeof k);
    assert_string_equal(k, "at plan (/app/agent.js:#:#) | TypeError");
    fl_oracle_stderr_key("worker 3 failed after 1200 ms\n", k, sizeof k);
    assert_string_equal(k, "worker # failed after # ms");
    fl_oracle_stderr_key("\n[flare: pid 9 exited with status 1]\n", k, sizeof k);
    assert_string_equal(k, "");
    fl_oracle_stderr_key(NULL, k, sizeof k);
    assert_string_equal(k, "");
}

static void test_limits(void **state) {
    (void)state;
    fl_oracle_opts o = opts();
    o.max_turns = 3;
    o.max_messages = 0;
    /* turns: M, W, M = 3 */
    expect_none(NULL, "m user M q; m M W a; c W calc; m W M b; m M W c; o x; d", &o);
    fl_findings f = run(NULL, "m user M q; m M W a; m W M b; m M W c; m W M d; o x; d", &o);
    const fl_finding *l = find(&f, FL_FIND_TURN_LIMIT);
    assert_non_null(l);
    assert_string_equal(l->mast, "FM-1.5");
    assert_int_equal(l->event, 4); /* the message that started turn 4 */
    assert_string_equal(l->key, "turn_limit");
    assert_non_null(strstr(l->message, "4 agent turns, limit 3 (default)"));
    fl_findings_free(&f);
    o = opts();
    o.max_messages = 3;
    expect_none(NULL, "m user M q; m M W a; m W M b; o x; d", &o);
    f = run(NULL, "m user M q; m M W a; m W M b; m M W a; o x; d", &o);
    l = find(&f, FL_FIND_MESSAGE_LIMIT);
    assert_non_null(l);
    assert_int_equal(l->event, 3);
    assert_string_equal(l->mast, "FM-1.5");
    fl_findings_free(&f);
    /* the spec's limits win over the options' (spec: 6 turns, 5 messages) */
    fl_spec *s = spec_of(demo_spec);
    o = opts();
    o.max_turns = 1;
    o.max_messages = 1;
    expect_none(s, "m user M q; m M W a; m W M b; m M W a; m W M b; o x; d", &o);
    f = run(s, "m user M q; m M W a; m W M b; m M W a; m W M b; m M W a; o x; d", &o);
    assert_non_null(find(&f, FL_FIND_MESSAGE_LIMIT));
    assert_null(find(&f, FL_FIND_TURN_LIMIT));
    assert_non_null(strstr(find(&f, FL_FIND_MESSAGE_LIMIT)->message, "spec.json"));
    fl_findings_free(&f);
    fl_spec_free(s);
}

static void test_loops(void **state) {
    (void)state;
    fl_oracle_opts o = opts(); /* N = 4, L <= 4 */
    const char *review4 = "m user M q; m M C d; m C R fix; m R C v1; m C R fix; m R C v2; m C R fix; m R C v3; m C R fix; "
                          "m R C v4; m C M ok; o x; d";
    fl_findings f = run(NULL, review4, &o);
    const fl_finding *l = find(&f, FL_FIND_LOOP);
    assert_non_null(l);
    assert_string_equal(l->key, "loop:C>R");
    assert_string_equal(l->mast, "FM-1.3");
    assert_non_null(strstr(l->message, "C -> R -> C 4 times"));
    assert_int_equal(l->event, 2);
    char sig[17];
    memcpy(sig, l->signature, 17);
    fl_findings_free(&f);
    /* three repetitions are not enough (N = 4) */
    expect_none(NULL, "m user M q; m M C d; m C R a; m R C b; m C R a; m R C b; m C R a; m R C b; m C M ok; o x; d", &o);
    /* entered from the other side, longer, other words: same signature */
    f = run(NULL, "m user M q; m M R d; m R C 1; m C R 2; m R C 3; m C R 4; m R C 5; m C R 6; m R C 7; m C R 8; m R C 9;"
                  "m C R 10; m C M ok; o x; d", &o);
    l = find(&f, FL_FIND_LOOP);
    assert_non_null(l);
    assert_string_equal(l->signature, sig);
    assert_non_null(strstr(l->message, "5 times"));
    fl_findings_free(&f);
    /* a three-agent cycle, canonical rotation starting at the smallest name */
    f = run(NULL, "m user M q; m Z A 1; m A B 2; m B Z 3; m Z A 1; m A B 2; m B Z 3; m Z A 1; m A B 2; m B Z 3; m Z A 1; "
                  "m A B 2; m B Z 3; o x; d", &o);
    l = find(&f, FL_FIND_LOOP);
    assert_non_null(l);
    assert_string_equal(l->key, "loop:A>B>Z");
    fl_findings_free(&f);
    /* not closed (A keeps sending to B, B never answers): no loop */
    expect_none(NULL, "m user A q; m A B 1; m A B 2; m A B 3; m A B 4; m A B 5; m B A ok; o x; d", &o);
    /* a self-loop is a cycle of length 1 */
    f = run(NULL, "m user A q; m A A 1; m A A 2; m A A 3; m A A 4; o x; d", &o);
    assert_string_equal(find(&f, FL_FIND_LOOP)->key, "loop:A");
    fl_findings_free(&f);
    /* a conversation with the user is not a loop */
    expect_none(NULL, "m user A q; m A user q; m user A q; m A user q; m user A q; m A user q; m user A q; m A user q; o x; d",
                &o);
    /* cycle longer than the limit L: not reported, until L allows it */
    const char *five = "m A B 1; m B C 1; m C D 1; m D E 1; m E A 1; m A B 1; m B C 1; m C D 1; m D E 1; m E A 1;"
                       "m A B 1; m B C 1; m C D 1; m D E 1; m E A 1; m A B 1; m B C 1; m C D 1; m D E 1; m E A 1; o x; d";
    o.max_messages = 0;
    expect_none(NULL, five, &o);
    o.loop_cycle = 5;
    expect_one(NULL, five, &o, FL_FIND_LOOP, "loop:A>B>C>D>E", "FM-1.3");
    /* A>B>A>B... is reported as the primitive cycle A>B, once */
    o = opts();
    f = run(NULL, "m A B 1; m B A 1; m A B 1; m B A 1; m A B 1; m B A 1; m A B 1; m B A 1; m A B 1; m B A 1; o x; d", &o);
    assert_int_equal(count(&f, FL_FIND_LOOP), 1);
    assert_string_equal(find(&f, FL_FIND_LOOP)->key, "loop:A>B");
    fl_findings_free(&f);
    /* content matching: a Master dispatching different subtasks is no loop; identical ones are */
    const char *dispatch = "m user M q; m M W part 1; m W M r1; m M W part 2; m W M r2; m M W part 3; m W M r3; "
                           "m M W part 4; m W M r4; o x; d";
    const char *stuck = "m user M q; m M W again; m W M same; m M W again; m W M same; m M W again; m W M same; "
                        "m M W again; m W M same; o x; d";
    f = run(NULL, dispatch, &o);
    assert_int_equal(count(&f, FL_FIND_LOOP), 1); /* by edges it repeats */
    fl_findings_free(&f);
    o.loop_match = FL_LOOP_CONTENT;
    expect_none(NULL, dispatch, &o);
    f = run(NULL, stuck, &o);
    assert_int_equal(count(&f, FL_FIND_LOOP), 1);
    assert_non_null(strstr(find(&f, FL_FIND_LOOP)->message, "identical contents"));
    fl_findings_free(&f);
    /* the spec's loop_repetitions wins over the options' */
    fl_spec *s = spec_of("{\"agents\": [{\"name\": \"A\"}, {\"name\": \"B\"}], \"entry\": \"A\","
                         " \"edges\": [[\"A\", \"B\"], [\"B\", \"A\"], [\"A\", \"output\"]], \"limits\": {\"loop_repetitions\": 2}}");
    o = opts();
    expect_one(s, "m user A q; m A B 1; m B A 2; m A B 3; m B A 4; o x; d", &o, FL_FIND_LOOP, "loop:A>B", "FM-1.3");
    fl_spec_free(s);
}

static void test_tool_errors(void **state) {
    (void)state;
    fl_oracle_opts o = opts();
    expect_one(NULL, "m user M q; m M W t; c W calc; r W calc fail division by zero; m W M r; o 42; d", &o,
               FL_FIND_TOOL_ERROR, "tool_error:W/calc", "FM-3.2");
    fl_findings f = run(NULL, "m user M q; m M W t; c W calc; r W calc fail division by zero; m W M r; o 42; d", &o);
    assert_int_equal(f.v[0].event, 3);
    assert_non_null(strstr(f.v[0].message, "division by zero"));
    assert_non_null(strstr(f.v[0].message, "event 5"));
    fl_findings_free(&f);
    /* a successful retry before the output: handled */
    expect_none(NULL, "m user M q; c W calc; r W calc fail x; c W calc; r W calc ok 4; o 4; d", &o);
    /* the retry came after the output: not handled */
    expect_one(NULL, "m user M q; c W calc; r W calc fail x; o 4; c W calc; r W calc ok 4; d", &o, FL_FIND_TOOL_ERROR,
               "tool_error:W/calc", "FM-3.2");
    /* no output at all: that is the no-output oracle's business */
    expect_one(NULL, "m user M q; c W calc; r W calc fail x; d", &o, FL_FIND_NO_OUTPUT, "no_output:W", "FM-3.1");
    /* another agent succeeding with the same tool counts (same-tool rule) */
    expect_none(NULL, "m user M q; c W calc; r W calc fail x; c V calc; r V calc ok 4; o 4; d", &o);
    /* a fallback to another tool: not under the default rule, yes under any-tool */
    const char *fallback = "m user M q; c W calc; r W calc fail x; c W search; r W search ok 4; o 4; d";
    expect_one(NULL, fallback, &o, FL_FIND_TOOL_ERROR, "tool_error:W/calc", "FM-3.2");
    o.recovery = FL_RECOVERY_ANY_TOOL;
    expect_none(NULL, fallback, &o);
    /* an error event reporting it: handled only under error-event */
    const char *reported = "m user M q; c W calc; r W calc fail x; e W calc failed; o sorry; d";
    expect_one(NULL, reported, &o, FL_FIND_TOOL_ERROR, "tool_error:W/calc", "FM-3.2");
    o.recovery = FL_RECOVERY_ERROR_EVENT;
    expect_none(NULL, reported, &o);
    /* two failures of different tools: two findings; the same tool twice: one */
    o = opts();
    f = run(NULL, "m user M q; r W calc fail x; r W search fail y; r W calc fail z; o ?; d", &o);
    assert_int_equal(count(&f, FL_FIND_TOOL_ERROR), 2);
    fl_findings_free(&f);
}

static void test_spec_violations(void **state) {
    (void)state;
    fl_spec *s = spec_of(demo_spec);
    expect_none(s, "m user M q; b M route math; m M W t; c W calc; r W calc ok 4; m W M 4; o it is 4; d", NULL);
    /* implicit entry: the first agent acting is the entry */
    expect_none(s, "b M route math; m M W t; m W M r; o ok; d", NULL);
    expect_one(s, "m user M q; m M W t; m W C r; m C M ok; o ok; d", NULL, FL_FIND_SPEC, "spec_violation:edge:W>C",
               "FM-1.2");
    expect_one(s, "m user W q; m W M r; o ok; d", NULL, FL_FIND_SPEC, "spec_violation:edge:user>W", "FM-1.2");
    expect_one(s, "c W calc; r W calc ok 1; m W M r; o ok; d", NULL, FL_FIND_SPEC, "spec_violation:edge:user>W", "FM-1.2");
    /* the output must come from an agent allowed to answer */
    expect_one(s, "m user M q; m M W t; o from the worker; d", NULL, FL_FIND_SPEC, "spec_violation:edge:W>output",
               "FM-1.2");
    /* both undeclared ends of an edge are reported */
    fl_findings g = run(s, "m user M q; m Ghost Phantom t; o ok; d", NULL);
    assert_int_equal(g.n, 2);
    assert_string_equal(g.v[0].key, "spec_violation:agent:Ghost");
    assert_string_equal(g.v[1].key, "spec_violation:agent:Phantom");
    fl_findings_free(&g);
    /* an undeclared agent's tools are still checked: one no agent declares is reported */
    g = run(s, "m user M q; m M Ghost t; c Ghost shell; m Ghost M r; o ok; d", NULL);
    assert_int_equal(g.n, 2);
    assert_string_equal(g.v[0].key, "spec_violation:agent:Ghost");
    assert_string_equal(g.v[1].key, "spec_violation:tool:Ghost/shell");
    assert_int_equal(g.v[1].event, 2);
    fl_findings_free(&g);
    /* an undeclared agent: one finding per agent, not one per edge or event */
    fl_findings f = run(s, "m user M q; m M Ghost t; c Ghost calc; m Ghost M r; o ok; d", NULL);
    assert_int_equal(f.n, 1);
    assert_string_equal(f.v[0].key, "spec_violation:agent:Ghost");
    assert_int_equal(f.v[0].event, 1);
    fl_findings_free(&f);
    expect_one(s, "m user M q; m M W t; c W shell; r W shell ok x; m W M r; o ok; d", NULL, FL_FIND_SPEC,
               "spec_violation:tool:W/shell", "FM-1.2");
    expect_one(s, "m user M q; c M calc; o ok; d", NULL, FL_FIND_SPEC, "spec_violation:tool:M/calc", "FM-1.2");
    expect_one(s, "m user M q; b M route poetry; o ok; d", NULL, FL_FIND_SPEC, "spec_violation:choice:M/route=poetry",
               "FM-1.2");
    expect_one(s, "m user M q; b M mood happy; o ok; d", NULL, FL_FIND_SPEC, "spec_violation:decision:M/mood", "FM-1.2");
    /* decisions derived from LLM spans: checked only where the spec declares the point */
    expect_none(s, "m user M q; b M llm.tool_choice shell; o ok; d", NULL);
    fl_spec *lt = spec_of("{\"agents\": [{\"name\": \"M\", \"decisions\": {\"llm.tool_choice\": [\"calc\", \"answer\"]}}],"
                          " \"entry\": \"M\", \"edges\": [[\"user\", \"M\"], [\"M\", \"output\"]]}");
    expect_none(lt, "m user M q; b M llm.tool_choice calc; b M llm.tool_choice answer; o ok; d", NULL);
    expect_one(lt, "m user M q; b M llm.tool_choice shell; o ok; d", NULL, FL_FIND_SPEC,
               "spec_violation:choice:M/llm.tool_choice=shell", "FM-1.2");
    fl_spec_free(lt);
    expect_one(s, "m user M q; e Ghost boom; o ok; d", NULL, FL_FIND_SPEC, "spec_violation:agent:Ghost", "FM-1.2");
    /* signature: same edge, other content, other position -> same; other edge -> other */
    fl_findings a = run(s, "m user M q; m M W t; m W C r; m C M ok; o ok; d", NULL);
    fl_findings b = run(s, "m user M something else; b M route chat; m M W t2; m W C r2; m C M k; o k; d", NULL);
    fl_findings c = run(s, "m user M q; m M C t; m C W r; m W M ok; o ok; d", NULL);
    assert_string_equal(a.v[0].signature, b.v[0].signature);
    assert_string_not_equal(a.v[0].signature, c.v[0].signature);
    fl_findings_free(&a);
    fl_findings_free(&b);
    fl_findings_free(&c);
    /* the same disallowed edge many times: one finding */
    f = run(s, "m user M q; m W C a; m C M b; m W C a; m C M b; m W C a; m C M b; o ok; d", NULL);
    assert_int_equal(count(&f, FL_FIND_SPEC), 1);
    fl_findings_free(&f);
    /* without a spec, no spec violations at all */
    expect_none(NULL, "m user M q; m M Ghost t; c Ghost shell; b M mood x; o ok; d", NULL);
    fl_spec_free(s);
}

static void test_dedup_append_kinds(void **state) {
    (void)state;
    /* findings are appended; de-duplication is per case */
    fl_findings f = {0};
    fl_err e;
    fl_trace *t = tr("m user M q; d");
    assert_int_equal(fl_oracle_check(NULL, NULL, t, NULL, &f, &e), FL_OK);
    assert_int_equal(fl_oracle_check(NULL, NULL, t, NULL, &f, &e), FL_OK);
    assert_int_equal(f.n, 2);
    assert_string_equal(f.v[0].signature, f.v[1].signature);
    fl_findings_clear(&f);
    assert_int_equal(f.n, 0);
    /* the kinds mask */
    fl_oracle_opts o = opts();
    o.kinds = ~(1u << FL_FIND_NO_OUTPUT);
    assert_int_equal(fl_oracle_check(NULL, NULL, t, &o, &f, &e), FL_OK);
    assert_int_equal(f.n, 0);
    /* bad options */
    o = opts();
    o.loop_repetitions = 1;
    assert_int_equal(fl_oracle_check(NULL, NULL, t, &o, &f, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "loop"));
    fl_trace_free(t);
    /* many distinct findings are capped per case */
    char script[16384];
    size_t k = (size_t)sprintf(script, "m user M q; ");
    for (int i = 0; i < 100; i++) k += (size_t)sprintf(script + k, "r W tool%d fail x; ", i);
    sprintf(script + k, "o x; d");
    t = tr(script);
    assert_int_equal(fl_oracle_check(NULL, NULL, t, NULL, &f, &e), FL_OK);
    assert_int_equal(f.n, FL_ORACLE_MAX_FINDINGS);
    fl_trace_free(t);
    fl_findings_free(&f);
    /* the case's input size appears in the length message */
    fl_case *c = fl_case_new(1, (const char *const[]){"abcd"});
    t = tr("m user M abcd; o 0123456789A; d");
    o = opts();
    o.max_output_bytes = 4;
    assert_int_equal(fl_oracle_check(NULL, c, t, &o, &f, &e), FL_OK);
    assert_non_null(strstr(find(&f, FL_FIND_OUTPUT_LENGTH)->message, "input was 4 bytes"));
    fl_findings_free(&f);
    fl_trace_free(t);
    fl_case_free(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),       cmocka_unit_test(test_clean),
        cmocka_unit_test(test_exit_kinds),  cmocka_unit_test(test_output),
        cmocka_unit_test(test_output_spec), cmocka_unit_test(test_channels), cmocka_unit_test(test_stderr_key), cmocka_unit_test(test_limits),
        cmocka_unit_test(test_loops),       cmocka_unit_test(test_tool_errors),
        cmocka_unit_test(test_spec_violations), cmocka_unit_test(test_dedup_append_kinds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
