/* Cases and traces without processes: the request JSON, case files, W3C trace contexts, and
 * the event-line parser — every event, every protocol problem. */
#include <cjson/cJSON.h>

#include "testutil.h"

#include "flare/agents/protocol.h"
#include "flare/agents/target.h"

/* Feed a NUL-terminated line; returns *done. */
static int feed(fl_trace *t, const char *line, double ms) {
    int done = -1;
    assert_int_equal(fl_trace_feed_line(t, line, strlen(line), ms, &done), FL_OK);
    assert_true(done == 0 || done == 1);
    return done;
}

static cJSON *parse(const char *s) {
    cJSON *j = cJSON_Parse(s);
    if (!j) fail_msg("not JSON: %s", s);
    return j;
}

static const char *jstr(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!cJSON_IsString(v)) fail_msg("no string \"%s\"", k);
    return v->valuestring;
}

/* ---- cases ------------------------------------------------------------------------------- */
static void test_case_json_roundtrip(void **state) {
    const char *turns[] = {"first \"quoted\" line\nwith newline", "跟进：你好", ""};
    fl_case *c = fl_case_new(3, turns);
    assert_non_null(c);
    assert_string_equal(c->id, "000000");
    strcpy(c->id, "000042");
    c->seed = 9007199254740991ull; /* 2^53 - 1: the largest exactly representable seed */
    fl_rng r;
    fl_rng_seed(&r, 7);
    fl_case_new_trace(c, &r);
    char *js = fl_case_to_json(c);
    assert_non_null(js);
    assert_null(strchr(js, '\n')); /* one line */
    cJSON *j = parse(js);
    assert_string_equal(jstr(j, "id"), "000042");
    assert_string_equal(jstr(j, "traceparent"), c->traceparent);
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "turns");
    assert_int_equal(cJSON_GetArraySize(a), 3);
    for (int i = 0; i < 3; i++) assert_string_equal(cJSON_GetArrayItem(a, i)->valuestring, turns[i]);
    cJSON_Delete(j);

    fl_case *d = NULL;
    fl_err e = {0};
    assert_int_equal(fl_case_parse(js, strlen(js), "rt.json", &d, &e), FL_OK);
    assert_string_equal(d->id, c->id);
    assert_true(d->seed == c->seed);
    assert_string_equal(d->traceparent, c->traceparent);
    assert_int_equal(d->n_turns, 3);
    for (int i = 0; i < 3; i++) assert_string_equal(d->turns[i], turns[i]);
    fl_case *cp = fl_case_copy(d);
    assert_ptr_not_equal(cp->turns[0], d->turns[0]);
    char *js2 = fl_case_to_json(cp);
    assert_string_equal(js, js2);
    free(js);
    free(js2);
    fl_case_free(c);
    fl_case_free(d);
    fl_case_free(cp);
    fl_case_free(NULL);
}

/* A turn holding broken UTF-8 still makes a valid JSON line (U+FFFD in place of each bad byte). */
static void test_case_invalid_utf8(void **state) {
    const char *turns[] = {"ok \xE4\xBD then \xFF\xC0\xAF end \xED\xA0\x80"};
    fl_case *c = fl_case_new(1, turns);
    char *js = fl_case_to_json(c);
    cJSON *j = parse(js);
    const char *t0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "turns"), 0)->valuestring;
    assert_non_null(strstr(t0, "ok \xEF\xBF\xBD"));
    assert_non_null(strstr(t0, " end \xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"));
    char *v = fl_utf8_dup(t0, strlen(t0));
    assert_string_equal(v, t0); /* already valid: unchanged */
    free(v);
    v = fl_utf8_dup("a\0b", 3);
    assert_string_equal(v, "a\xEF\xBF\xBD" "b");
    free(v);
    cJSON_Delete(j);
    free(js);
    fl_case_free(c);
}

static void test_case_parse_text_and_errors(void **state) {
    fl_case *c = NULL;
    fl_err e = {0};
    const char *txt = "Compute 2+2 {please}\n";
    assert_int_equal(fl_case_parse(txt, strlen(txt), "seed.txt", &c, &e), FL_OK);
    assert_int_equal(c->n_turns, 1);
    assert_string_equal(c->turns[0], "Compute 2+2 {please}");
    assert_string_equal(c->traceparent, "");
    fl_case_free(c);
    /* a JSON object without "turns" is the user's message itself */
    const char *obj = "{\"query\": \"x\"}";
    assert_int_equal(fl_case_parse(obj, strlen(obj), "q.json", &c, &e), FL_OK);
    assert_string_equal(c->turns[0], obj);
    fl_case_free(c);
    const char *min = "{\"turns\":[\"hello\"]}";
    assert_int_equal(fl_case_parse(min, strlen(min), "m.json", &c, &e), FL_OK);
    assert_true(c->seed == 0 && !strcmp(c->id, "000000") && !c->traceparent[0]);
    fl_case_free(c);

    static const struct {
        const char *text, *msg;
    } bad[] = {
        {"{\"turns\":\"hello\"}", "array of strings"},
        {"{\"turns\":[]}", "empty"},
        {"{\"turns\":[\"a\", 3]}", "turn 2"},
        {"{\"turns\":[\"a\"],\"id\":7}", "\"id\""},
        {"{\"turns\":[\"a\"],\"id\":\"0123456789abcdefg\"}", "\"id\""},
        {"{\"turns\":[\"a\"],\"id\":\"../../etc\"}", "\"id\""},
        {"{\"turns\":[\"a\"],\"id\":\"\"}", "\"id\""},
        {"{\"turns\":[\"a\"],\"seed\":-1}", "\"seed\""},
        {"{\"turns\":[\"a\"],\"seed\":1.5}", "\"seed\""},
        {"{\"turns\":[\"a\"],\"seed\":\"12\"}", "\"seed\""},
        {"{\"turns\":[\"a\"],\"traceparent\":\"00-abc-def-01\"}", "traceparent"},
        {"{\"turns\":[\"a\"],\"traceparent\":\"00-00000000000000000000000000000000-0000000000000001-01\"}",
         "traceparent"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        c = (fl_case *)1;
        e.msg[0] = 0;
        fl_status st = fl_case_parse(bad[i].text, strlen(bad[i].text), "bad.json", &c, &e);
        if (st != FL_ERR_FORMAT) fail_msg("case %zu (%s) parsed", i, bad[i].text);
        assert_null(c);
        assert_non_null(strstr(e.msg, "bad.json"));
        if (!strstr(e.msg, bad[i].msg)) fail_msg("message \"%s\" lacks \"%s\"", e.msg, bad[i].msg);
    }
}

static void test_traceparent(void **state) {
    fl_rng r1, r2;
    fl_rng_seed(&r1, 99);
    fl_rng_seed(&r2, 99);
    fl_case *a = fl_case_new(0, NULL), *b = fl_case_new(0, NULL);
    fl_case_new_trace(a, &r1);
    fl_case_new_trace(b, &r2);
    assert_string_equal(a->traceparent, b->traceparent); /* deterministic by seed */
    assert_int_equal(strlen(a->traceparent), 55);
    assert_true(fl_traceparent_valid(a->traceparent));
    assert_memory_equal(a->traceparent, "00-", 3);
    assert_string_equal(a->traceparent + 52, "-01");
    char prev[64];
    strcpy(prev, a->traceparent);
    fl_case_new_trace(a, &r1);
    assert_string_not_equal(prev, a->traceparent); /* a new trace id per case */
    assert_memory_not_equal(prev + 3, a->traceparent + 3, 32);
    assert_false(fl_traceparent_valid("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0"));
    assert_false(fl_traceparent_valid("00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01"));
    assert_false(fl_traceparent_valid("00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01"));
    assert_false(fl_traceparent_valid("ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"));
    assert_true(fl_traceparent_valid("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"));
    fl_case_free(a);
    fl_case_free(b);
}

/* ---- traces -------------------------------------------------------------------------------- */
static void test_trace_every_event(void **state) {
    fl_trace *t = fl_trace_new();
    assert_int_equal(feed(t, "{\"event\":\"message\",\"from\":\"user\",\"to\":\"Master\",\"content\":\"go\"}", 1), 0);
    assert_int_equal(feed(t, "{\"event\":\"tool_call\",\"agent\":\"Worker\",\"tool\":\"calc\",\"arguments\":{\"a\": [1, 2]}}", 2), 0);
    assert_int_equal(feed(t, "{\"event\":\"tool_call\",\"agent\":\"Worker\",\"tool\":\"noargs\"}", 2.5), 0);
    assert_int_equal(feed(t, "{\"event\":\"tool_result\",\"agent\":\"Worker\",\"tool\":\"calc\",\"ok\":false,\"content\":\"div by 0\"}", 3), 0);
    assert_int_equal(feed(t, "{\"event\":\"tool_result\",\"agent\":\"Worker\",\"tool\":\"calc\",\"ok\":true}", 3.5), 0);
    assert_int_equal(feed(t, "  {\"event\":\"branch\",\"agent\":\"Master\",\"point\":\"route\",\"choice\":\"math\",\"extra\":[1]}\r", 4), 0);
    assert_int_equal(feed(t, "{\"event\":\"error\",\"agent\":\"Checker\",\"message\":\"bad format\"}", 5), 0);
    assert_int_equal(feed(t, "{\"event\":\"span\",\"name\":\"ignored: unknown event\"}", 5.5), 0);
    assert_int_equal(feed(t, "", 5.6), 0);
    assert_int_equal(feed(t, "   \t", 5.7), 0);
    assert_int_equal(feed(t, "{\"event\":\"output\",\"content\":\"4\"}", 6), 0);
    assert_int_equal(feed(t, "{\"event\":\"output\",\"content\":\"final 5\"}", 6.5), 0);
    assert_int_equal(feed(t, "{\"event\":\"done\",\"status\":\"whatever\"}", 7), 1);
    assert_int_equal(t->n_protocol, 0);
    assert_int_equal(t->n_events, 10);

    const fl_event *ev = t->events;
    assert_int_equal(ev[0].kind, FL_EV_MESSAGE);
    assert_string_equal(ev[0].agent, "user");
    assert_string_equal(ev[0].to, "Master");
    assert_string_equal(ev[0].content, "go");
    assert_true(ev[0].t_ms == 1);
    assert_int_equal(ev[1].kind, FL_EV_TOOL_CALL);
    assert_string_equal(ev[1].agent, "Worker");
    assert_string_equal(ev[1].tool, "calc");
    assert_string_equal(ev[1].arguments, "{\"a\":[1,2]}");
    assert_null(ev[2].arguments);
    assert_int_equal(ev[3].kind, FL_EV_TOOL_RESULT);
    assert_int_equal(ev[3].ok, 0);
    assert_string_equal(ev[3].content, "div by 0");
    assert_int_equal(ev[4].ok, 1);
    assert_null(ev[4].content);
    assert_int_equal(ev[5].kind, FL_EV_BRANCH);
    assert_string_equal(ev[5].point, "route");
    assert_string_equal(ev[5].choice, "math");
    assert_int_equal(ev[6].kind, FL_EV_ERROR);
    assert_string_equal(ev[6].agent, "Checker");
    assert_string_equal(ev[6].content, "bad format");
    assert_int_equal(ev[7].kind, FL_EV_OUTPUT);
    assert_null(ev[7].agent);
    assert_int_equal(ev[9].kind, FL_EV_DONE);
    assert_string_equal(fl_trace_output(t), "final 5");

    /* to_json: the wire format again, plus t_ms, parseable back line by line */
    char *js = fl_trace_to_json(t);
    cJSON *a = parse(js);
    assert_int_equal(cJSON_GetArraySize(a), 10);
    fl_trace *back = fl_trace_new();
    const cJSON *it;
    int done = 0;
    cJSON_ArrayForEach(it, a) {
        char *line = cJSON_PrintUnformatted(it);
        done = feed(back, line, cJSON_GetObjectItem(it, "t_ms")->valuedouble);
        free(line);
    }
    assert_int_equal(done, 1);
    assert_int_equal(back->n_protocol, 0);
    char *js2 = fl_trace_to_json(back);
    assert_string_equal(js, js2);
    free(js);
    free(js2);
    cJSON_Delete(a);

    t->exit = FL_EXIT_DONE;
    t->ms = 7.5;
    const char *turns[] = {"hi"};
    fl_case *c = fl_case_new(1, turns);
    char *rep = fl_trace_report_json(c, t);
    cJSON *r = parse(rep);
    assert_string_equal(jstr(r, "exit"), "done");
    assert_string_equal(jstr(cJSON_GetObjectItem(r, "case"), "id"), "000000");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(r, "events")), 10);
    assert_null(cJSON_GetObjectItem(r, "protocol_first"));
    cJSON_Delete(r);
    free(rep);
    fl_case_free(c);

    /* clear keeps the array for reuse and empties the trace */
    fl_event *arr = t->events;
    fl_trace_clear(t);
    assert_int_equal(t->n_events, 0);
    assert_ptr_equal(t->events, arr);
    assert_null(fl_trace_output(t));
    fl_trace_free(t);
    fl_trace_free(back);
    fl_trace_free(NULL);
}

/* Each protocol problem: counted, the line dropped, the first message kept, never fatal. */
static void test_trace_protocol_problems(void **state) {
    static const struct {
        const char *line, *msg;
    } bad[] = {
        {"this is not json", "not a JSON object"},
        {"{\"event\":\"output\",\"content\":\"unterminated", "not a JSON object"},
        {"[1,2,3]", "not a JSON object"},
        {"42", "not a JSON object"},
        {"{\"content\":\"no event\"}", "no string \"event\""},
        {"{\"event\":7}", "no string \"event\""},
        {"{\"event\":\"message\",\"to\":\"W\",\"content\":\"x\"}", "without \"from\""},
        {"{\"event\":\"message\",\"from\":\"M\",\"content\":\"x\"}", "without \"to\""},
        {"{\"event\":\"message\",\"from\":\"M\",\"to\":\"W\"}", "without \"content\""},
        {"{\"event\":\"message\",\"from\":\"M\",\"to\":[],\"content\":\"x\"}", "\"to\" is not a string"},
        {"{\"event\":\"tool_call\",\"agent\":\"W\"}", "without \"tool\""},
        {"{\"event\":\"tool_call\",\"tool\":\"t\"}", "without \"agent\""},
        {"{\"event\":\"tool_result\",\"agent\":\"W\",\"tool\":\"t\"}", "without \"ok\""},
        {"{\"event\":\"tool_result\",\"agent\":\"W\",\"tool\":\"t\",\"ok\":\"yes\"}", "true or false"},
        {"{\"event\":\"tool_result\",\"agent\":\"W\",\"tool\":\"t\",\"ok\":true,\"content\":5}", "\"content\" is not"},
        {"{\"event\":\"branch\",\"agent\":\"M\",\"point\":\"p\"}", "without \"choice\""},
        {"{\"event\":\"branch\",\"agent\":\"M\",\"choice\":\"c\"}", "without \"point\""},
        {"{\"event\":\"error\",\"agent\":\"W\"}", "without \"message\""},
        {"{\"event\":\"error\",\"message\":\"m\"}", "without \"agent\""},
        {"{\"event\":\"output\"}", "without \"content\""},
        {"{\"event\":\"output\",\"content\":null}", "\"content\" is not a string"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fl_trace *t = fl_trace_new();
        assert_int_equal(feed(t, bad[i].line, 1), 0);
        if (t->n_protocol != 1) fail_msg("line %zu (%s): %d problems", i, bad[i].line, t->n_protocol);
        assert_int_equal(t->n_events, 0);
        if (!strstr(t->protocol_msg, bad[i].msg))
            fail_msg("line %zu: message \"%s\" lacks \"%s\"", i, t->protocol_msg, bad[i].msg);
        fl_trace_free(t);
    }
    /* anything after done is a problem; the first message is the one kept */
    fl_trace *t = fl_trace_new();
    feed(t, "{\"event\":\"output\",\"content\":\"a\"}", 1);
    assert_int_equal(feed(t, "{\"event\":\"done\"}", 2), 1);
    assert_int_equal(feed(t, "{\"event\":\"output\",\"content\":\"late\"}", 3), 0);
    assert_int_equal(feed(t, "{\"event\":\"done\"}", 4), 0);
    feed(t, "garbage", 5);
    assert_int_equal(t->n_protocol, 3);
    assert_non_null(strstr(t->protocol_msg, "\"output\" event after done"));
    assert_int_equal(t->n_events, 2);
    assert_string_equal(fl_trace_output(t), "a");
    fl_trace_problem(t, "extra %d", 1);
    assert_int_equal(t->n_protocol, 4);
    assert_non_null(strstr(t->protocol_msg, "after done"));
    char *rep = fl_trace_report_json(NULL, t);
    cJSON *r = parse(rep);
    assert_int_equal((int)cJSON_GetObjectItem(r, "protocol_problems")->valuedouble, 4);
    assert_non_null(strstr(jstr(r, "protocol_first"), "after done"));
    assert_null(cJSON_GetObjectItem(r, "case"));
    cJSON_Delete(r);
    free(rep);
    fl_trace_free(t);

    /* binary junk in a field: stored as valid UTF-8; a line with NUL bytes is not JSON */
    t = fl_trace_new();
    feed(t, "{\"event\":\"output\",\"content\":\"\xFF\xFE ok\"}", 1);
    assert_int_equal(t->n_protocol, 0);
    assert_string_equal(fl_trace_output(t), "\xEF\xBF\xBD\xEF\xBF\xBD ok");
    int done;
    assert_int_equal(fl_trace_feed_line(t, "{\"ev\0ent\":1}", 12, 2, &done), FL_OK);
    assert_int_equal(t->n_protocol, 1);
    fl_trace_free(t);
}

static void test_exit_names(void **state) {
    fl_trace t = {0};
    char buf[160];
    assert_string_equal(fl_exit_kind_name(FL_EXIT_DONE), "done");
    assert_string_equal(fl_exit_kind_name(FL_EXIT_CRASH), "crash");
    assert_string_equal(fl_exit_kind_name(FL_EXIT_HANG), "hang");
    assert_string_equal(fl_exit_kind_name(FL_EXIT_EOF), "eof");
    assert_string_equal(fl_exit_kind_name(FL_EXIT_LIMIT), "limit");
    t.exit = FL_EXIT_CRASH;
    t.exit_status = -11;
    assert_non_null(strstr(fl_trace_describe_exit(&t, buf, sizeof buf), "signal 11"));
    t.exit_status = 3;
    assert_non_null(strstr(fl_trace_describe_exit(&t, buf, sizeof buf), "status 3"));
    t.exit = FL_EXIT_HANG;
    t.exit_status = -9;
    t.ms = 250;
    assert_non_null(strstr(fl_trace_describe_exit(&t, buf, sizeof buf), "250 ms"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_case_json_roundtrip),
        cmocka_unit_test(test_case_invalid_utf8),
        cmocka_unit_test(test_case_parse_text_and_errors),
        cmocka_unit_test(test_traceparent),
        cmocka_unit_test(test_trace_every_event),
        cmocka_unit_test(test_trace_protocol_problems),
        cmocka_unit_test(test_exit_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
