/* Tests for per-seed expectations: parsing (and its errors naming the file and key), the
 * expectation oracle on traces, what mutants inherit, and the round trip through a saved case. */
#include "testutil.h"

#include <cjson/cJSON.h>

#include "agtrace.h"
#include "flare/agents/expect.h"
#include "flare/agents/mutate.h"
#include "flare/agents/oracle.h"

static fl_case *case_of(const char *json) {
    fl_case *c = NULL;
    fl_err e = {0};
    if (fl_case_parse(json, strlen(json), "seed.json", &c, &e) != FL_OK) fail_msg("parse: %s", e.msg);
    return c;
}

static void expect_bad(const char *json, const char *msg) {
    fl_case *c = (fl_case *)1;
    fl_err e = {0};
    assert_int_equal(fl_case_parse(json, strlen(json), "seed.json", &c, &e), FL_ERR_FORMAT);
    assert_null(c);
    if (!strstr(e.msg, msg) || strncmp(e.msg, "seed.json: ", 11)) fail_msg("message: %s (wanted %s)", e.msg, msg);
}

/* the keys of the findings of c on script, joined by ' ' */
static void keys_of(const fl_case *c, const char *script, char *out, size_t n) {
    fl_trace *t = tr(script);
    fl_findings f = {0};
    fl_err e = {0};
    fl_oracle_opts o;
    fl_oracle_opts_default(&o);
    o.kinds = 1u << FL_FIND_EXPECT;
    assert_int_equal(fl_oracle_check(NULL, c, t, &o, &f, &e), FL_OK);
    size_t k = 0;
    out[0] = 0;
    for (int i = 0; i < f.n && k < n; i++) {
        assert_int_equal(f.v[i].kind, FL_FIND_EXPECT);
        assert_string_equal(f.v[i].mast, "FM-1.1");
        k += (size_t)snprintf(out + k, n - k, "%s%s", i ? " " : "", f.v[i].key);
    }
    fl_findings_free(&f);
    fl_trace_free(t);
}

static const char *seed =
    "{\"turns\": [\"delete my account\"], \"expect\": {\"contains\": \"confirm\", \"not_contains\": [\"password\"],"
    " \"regex\": \"^(Sure|OK)\", \"max_turns\": 2, \"must_call\": \"lookup\", \"must_not_call\": [\"delete_user\"]}}";

static void test_oracle_on_traces(void **state) {
    (void)state;
    fl_case *c = case_of(seed);
    assert_non_null(c->expect);
    char k[512];
    keys_of(c, "m user M q; c M lookup; r M lookup ok x; o Sure, please confirm; d", k, sizeof k);
    assert_string_equal(k, "");
    keys_of(c, "m user M q; c M delete_user; m M W a; m W M b; m M W c; o your password is x; d", k, sizeof k);
    assert_string_equal(k, "expectation:contains:confirm expectation:not_contains:password "
                           "expectation:regex:^(Sure|OK) expectation:max_turns:2 expectation:must_call:lookup "
                           "expectation:must_not_call:delete_user");
    /* no output: the positive text expectations fail, the negative ones hold */
    keys_of(c, "m user M q; c M lookup; d", k, sizeof k);
    assert_string_equal(k, "expectation:contains:confirm expectation:regex:^(Sure|OK)");
    /* without "expect", no expectation findings */
    fl_case *plain = case_of("{\"turns\": [\"hi\"]}");
    assert_null(plain->expect);
    keys_of(plain, "m user M q; d", k, sizeof k);
    assert_string_equal(k, "");
    fl_case_free(plain);
    /* a copy keeps everything; the request sent to the target never carries it */
    fl_case *d = fl_case_copy(c);
    keys_of(d, "m user M q; c M lookup; o nope; d", k, sizeof k);
    assert_string_equal(k, "expectation:contains:confirm expectation:regex:^(Sure|OK)");
    char *req = fl_case_to_json(d);
    assert_null(strstr(req, "expect"));
    free(req);
    fl_case_free(d);
    /* the JSON form parses back to the same expectations */
    cJSON *j = fl_expect_json(c->expect);
    char *txt = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    char buf[1024];
    snprintf(buf, sizeof buf, "{\"turns\": [\"x\"], \"expect\": %s}", txt);
    free(txt);
    fl_case *back = case_of(buf);
    keys_of(back, "m user M q; c M delete_user; o no; d", k, sizeof k);
    assert_string_equal(k, "expectation:contains:confirm expectation:regex:^(Sure|OK) expectation:must_call:lookup "
                           "expectation:must_not_call:delete_user");
    fl_case_free(back);
    fl_case_free(c);
}

static void test_mutants_inherit_negatives(void **state) {
    (void)state;
    fl_case *c = case_of(seed);
    fl_mutator_ctx *m;
    fl_err e = {0};
    assert_int_equal(fl_mutator_new(NULL, &m, &e), FL_OK);
    fl_rng r;
    fl_rng_seed(&r, 7);
    for (int i = 0; i < 20; i++) {
        fl_case *child = NULL;
        const char *op = NULL;
        if (fl_mutate(m, &r, c, NULL, -1, &child, &op) != FL_OK || !child) continue;
        assert_non_null(child->expect);
        assert_int_equal(child->expect->contains.n + child->expect->regex.n + child->expect->must_call.n, 0);
        assert_int_equal(child->expect->not_contains.n, 1);
        assert_int_equal(child->expect->must_not_call.n, 1);
        assert_int_equal(child->expect->max_turns, 2);
        fl_case_free(child);
    }
    fl_mutator_free(m);
    /* only positive expectations: a mutant has none */
    fl_case *pos = case_of("{\"turns\": [\"a\"], \"expect\": {\"contains\": \"b\"}}");
    int oom = 0;
    assert_null(fl_expect_copy(pos->expect, 1, &oom));
    assert_int_equal(oom, 0);
    fl_case_free(pos);
    fl_case_free(c);
}

static void test_bad_expect(void **state) {
    (void)state;
    expect_bad("{\"turns\": [\"a\"], \"expect\": 3}", "expect: expected an object");
    expect_bad("{\"turns\": [\"a\"], \"expect\": {\"contain\": \"x\"}}", "expect.contain: unknown key");
    expect_bad("{\"turns\": [\"a\"], \"expect\": {\"max_turns\": 0}}", "expect.max_turns: expected an integer >= 1");
    expect_bad("{\"turns\": [\"a\"], \"expect\": {\"max_turns\": \"3\"}}", "expect.max_turns");
    expect_bad("{\"turns\": [\"a\"], \"expect\": {\"must_call\": []}}", "expect.must_call: expected a string or");
    expect_bad("{\"turns\": [\"a\"], \"expect\": {\"not_contains\": [\"x\", 2]}}", "expect.not_contains[1]");
    expect_bad("{\"turns\": [\"a\"], \"expect\": {\"regex\": [\"ok\", \"(x\"]}}", "expect.regex[1]: bad POSIX");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_oracle_on_traces),
        cmocka_unit_test(test_mutants_inherit_negatives),
        cmocka_unit_test(test_bad_expect),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
