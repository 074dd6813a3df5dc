/* Tests for the agent spec loader: a full spec, its lookups, and an error (naming the file and
 * the JSON path) for every kind of mistake. */
#include "testutil.h"

#include <unistd.h>

#include "flare/agents/spec.h"

static const char *full_spec =
    "{\"_comment\": \"task decomposition\", \"description\": \"demo\",\n"
    " \"agents\": [\n"
    "   {\"name\": \"Master\", \"description\": \"splits\", \"decisions\": {\"route\": [\"math\", \"search\", \"chat\"],"
    "    \"review\": [\"yes\", \"no\"]}},\n"
    "   {\"name\": \"Worker\", \"tools\": [\"calculate\", \"search\"]},\n"
    "   {\"name\": \"Checker\"}],\n"
    " \"entry\": \"Master\",\n"
    " \"edges\": [[\"Master\", \"Worker\"], [\"Worker\", \"Master\"], [\"Master\", \"Checker\"],\n"
    "           [\"Checker\", \"Master\"], [\"Master\", \"output\"], [\"Master\", \"user\"]],\n"
    " \"limits\": {\"turns\": 20, \"messages\": 40, \"output_bytes\": 4000, \"loop_repetitions\": 3, \"loop_cycle\": 5},\n"
    " \"forbidden_output\": [\"sk-[A-Za-z0-9]{8,}\", {\"name\": \"pw\", \"pattern\": \"pass(word)?\", \"icase\": true}]}\n";

static fl_spec *parse_ok(const char *text) {
    fl_spec *s = NULL;
    fl_err e = {0};
    fl_status st = fl_spec_parse(text, strlen(text), "spec.json", &s, &e);
    if (st != FL_OK) fail_msg("parse failed: %s", e.msg);
    return s;
}

static void test_full(void **state) {
    (void)state;
    fl_spec *s = parse_ok(full_spec);
    assert_int_equal(s->n_agents, 3);
    assert_string_equal(s->agents[0].name, "Master");
    assert_int_equal(s->entry, 0);
    assert_int_equal(s->agents[1].n_tools, 2);
    assert_int_equal(s->agents[0].n_points, 2);
    assert_int_equal(s->agents[0].n_items, 5); /* 3 + 2 choices */
    assert_int_equal(s->agents[1].n_items, 2);
    assert_int_equal(s->agents[2].n_items, 0);
    /* six listed + the implied user -> entry */
    assert_int_equal(s->n_edges, 7);
    assert_true(fl_spec_edge_find(s, FL_SPEC_USER, 0) >= 0);
    assert_true(fl_spec_edge_find(s, 0, FL_SPEC_OUTPUT) >= 0);
    assert_true(fl_spec_edge_find(s, 0, FL_SPEC_USER) >= 0);
    assert_int_equal(fl_spec_edge_find(s, 1, 2), -1);
    assert_int_equal(fl_spec_edge_find(s, 1, FL_SPEC_OUTPUT), -1);
    assert_int_equal(fl_spec_agent_find(s, "Checker"), 2);
    assert_int_equal(fl_spec_agent_find(s, "user"), FL_SPEC_USER);
    assert_int_equal(fl_spec_agent_find(s, "output"), FL_SPEC_OUTPUT);
    assert_int_equal(fl_spec_agent_find(s, "Nobody"), FL_SPEC_NONE);
    assert_int_equal(fl_spec_agent_find(s, NULL), FL_SPEC_NONE);
    assert_int_equal(fl_spec_tool_find(s, 1, "search"), 1);
    assert_int_equal(fl_spec_tool_find(s, 0, "search"), -1);
    int ch;
    assert_int_equal(fl_spec_point_find(s, 0, "review", "no", &ch), 1);
    assert_int_equal(ch, 1);
    assert_int_equal(fl_spec_point_find(s, 0, "route", "poetry", &ch), 0);
    assert_int_equal(ch, -1);
    assert_int_equal(fl_spec_point_find(s, 0, "mood", "x", &ch), -1);
    /* item indices: tools first, then each point's choices in order; all distinct */
    assert_int_equal(fl_spec_item_choice(s, 0, 0, 0), 0);
    assert_int_equal(fl_spec_item_choice(s, 0, 1, 1), 4);
    assert_int_equal(fl_spec_item_tool(s, 1, 1), 1);
    assert_string_equal(fl_spec_agent_name(s, FL_SPEC_OUTPUT), "output");
    assert_string_equal(fl_spec_agent_name(s, 1), "Worker");
    assert_int_equal(s->max_turns, 20);
    assert_int_equal(s->max_messages, 40);
    assert_int_equal(s->max_output_bytes, 4000);
    assert_int_equal(s->loop_repetitions, 3);
    assert_int_equal(s->loop_cycle, 5);
    /* the regex dialect: POSIX ERE, icase per pattern */
    assert_int_equal(s->n_forbidden, 2);
    assert_string_equal(s->forbidden[0].name, "sk-[A-Za-z0-9]{8,}");
    assert_string_equal(s->forbidden[1].name, "pw");
    assert_int_equal(regexec(&s->forbidden[0].re, "key sk-ABCdef123 here", 0, NULL, 0), 0);
    assert_int_not_equal(regexec(&s->forbidden[0].re, "key sk-short", 0, NULL, 0), 0);
    assert_int_equal(regexec(&s->forbidden[1].re, "my PASSWORD is", 0, NULL, 0), 0);
    assert_int_equal(regexec(&s->forbidden[1].re, "Pass it on", 0, NULL, 0), 0);
    assert_string_equal(s->path, "spec.json");
    fl_spec_free(s);
    fl_spec_free(NULL);
}

static void test_minimal_and_file(void **state) {
    (void)state;
    char path[] = "/tmp/flare_test_spec_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *text = "{\"agents\": [{\"name\": \"Solo\"}], \"entry\": \"Solo\", \"edges\": []}";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    fl_spec *s;
    fl_err e = {0};
    assert_int_equal(fl_spec_load(path, &s, &e), FL_OK);
    assert_string_equal(s->path, path);
    assert_int_equal(s->n_edges, 1); /* user -> Solo */
    assert_int_equal(s->edges[0].from, FL_SPEC_USER);
    assert_int_equal(s->max_turns, 0);
    assert_int_equal(s->n_forbidden, 0);
    fl_spec_free(s);
    unlink(path);
    assert_int_equal(fl_spec_load(path, &s, &e), FL_ERR_IO);
    assert_null(s);
    assert_non_null(strstr(e.msg, path));
}

/* Each broken spec fails with FL_ERR_FORMAT and a message holding every needle. */
static void expect_bad(const char *text, const char *n1, const char *n2) {
    fl_spec *s = (fl_spec *)1;
    fl_err e = {0};
    fl_status st = fl_spec_parse(text, strlen(text), "bad.json", &s, &e);
    if (st != FL_ERR_FORMAT) fail_msg("accepted or wrong status (%d) for: %s", st, text);
    assert_null(s);
    if (strncmp(e.msg, "bad.json: ", 10)) fail_msg("message does not start with the file: %s", e.msg);
    if (n1 && !strstr(e.msg, n1)) fail_msg("message lacks '%s': %s", n1, e.msg);
    if (n2 && !strstr(e.msg, n2)) fail_msg("message lacks '%s': %s", n2, e.msg);
}

#define AG "\"agents\": [{\"name\": \"A\", \"tools\": [\"t\"]}, {\"name\": \"B\"}], \"entry\": \"A\""

static void test_errors(void **state) {
    (void)state;
    expect_bad("{\"agents\": [", "not valid JSON", "line 1");
    expect_bad("{\n\"agents\": [}\n", "line 2", NULL);
    expect_bad("[]", "$: expected an object", NULL);
    expect_bad("{" AG ", \"edges\": [], \"agent\": 1}", "$: unknown key \"agent\"", "known: agents");
    expect_bad("{\"entry\": \"A\", \"edges\": []}", "missing \"agents\"", NULL);
    expect_bad("{\"agents\": [], \"entry\": \"A\", \"edges\": []}", "$.agents: no agents", NULL);
    expect_bad("{\"agents\": {\"A\": 1}, \"entry\": \"A\", \"edges\": []}", "$.agents: expected an array", "found an object");
    expect_bad("{\"agents\": [{\"name\": \"A\", \"tool\": [\"t\"]}], \"entry\": \"A\", \"edges\": []}",
               "$.agents[0]: unknown key \"tool\"", "tools");
    expect_bad("{\"agents\": [{\"tools\": []}], \"entry\": \"A\", \"edges\": []}", "$.agents[0]: missing \"name\"", NULL);
    expect_bad("{\"agents\": [{\"name\": 7}], \"entry\": \"A\", \"edges\": []}", "$.agents[0].name: expected a string",
               "found a number");
    expect_bad("{\"agents\": [{\"name\": \"A\"}, {\"name\": \"A\"}], \"entry\": \"A\", \"edges\": []}",
               "$.agents[1].name: duplicate agent \"A\"", NULL);
    expect_bad("{\"agents\": [{\"name\": \"user\"}], \"entry\": \"user\", \"edges\": []}", "$.agents[0].name", "reserved");
    expect_bad("{\"agents\": [{\"name\": \"A\", \"tools\": [\"t\", \"t\"]}], \"entry\": \"A\", \"edges\": []}",
               "$.agents[0].tools[1]: duplicate tool \"t\"", NULL);
    expect_bad("{\"agents\": [{\"name\": \"A\", \"tools\": [\"t\", 3]}], \"entry\": \"A\", \"edges\": []}",
               "$.agents[0].tools[1]: expected a string", NULL);
    expect_bad("{\"agents\": [{\"name\": \"A\", \"decisions\": {\"route\": []}}], \"entry\": \"A\", \"edges\": []}",
               "$.agents[0].decisions.route", "at least one choice");
    expect_bad("{\"agents\": [{\"name\": \"A\", \"decisions\": {\"route\": [\"x\", \"x\"]}}], \"entry\": \"A\", \"edges\": []}",
               "$.agents[0].decisions.route[1]: duplicate choice", NULL);
    expect_bad("{\"agents\": [{\"name\": \"A\", \"decisions\": [\"x\"]}], \"entry\": \"A\", \"edges\": []}",
               "$.agents[0].decisions: expected an object", NULL);
    expect_bad("{\"agents\": [{\"name\": \"A\"}], \"edges\": []}", "missing \"entry\"", NULL);
    expect_bad("{\"agents\": [{\"name\": \"A\"}], \"entry\": \"Z\", \"edges\": []}", "$.entry: \"Z\" is not a declared agent",
               "declared: A");
    expect_bad("{" AG "}", "missing \"edges\"", NULL);
    expect_bad("{" AG ", \"edges\": [[\"A\", \"B\"], [\"B\", \"Checkr\"]]}", "$.edges[1][1]: unknown agent \"Checkr\"",
               "declared: A, B");
    expect_bad("{" AG ", \"edges\": [[\"A\", \"B\", \"A\"]]}", "$.edges[0]: expected a [from, to] pair", NULL);
    expect_bad("{" AG ", \"edges\": [[\"output\", \"B\"]]}", "$.edges[0][0]", "can only end an edge");
    expect_bad("{" AG ", \"edges\": [[\"user\", \"output\"]]}", "$.edges[0]", "user -> output");
    expect_bad("{" AG ", \"edges\": [[\"A\", \"B\"], [\"A\", \"B\"]]}", "$.edges[1]: duplicate edge A -> B", NULL);
    expect_bad("{" AG ", \"edges\": [], \"limits\": {\"turns\": -1}}", "$.limits.turns", "non-negative integer");
    expect_bad("{" AG ", \"edges\": [], \"limits\": {\"messages\": 2.5}}", "$.limits.messages", NULL);
    expect_bad("{" AG ", \"edges\": [], \"limits\": {\"turn\": 2}}", "$.limits: unknown key \"turn\"", NULL);
    expect_bad("{" AG ", \"edges\": [], \"limits\": {\"loop_repetitions\": 1}}", "$.limits.loop_repetitions", NULL);
    expect_bad("{" AG ", \"edges\": [], \"limits\": {\"turns\": 1, \"turns\": 2}}", "$.limits: duplicate key \"turns\"", NULL);
    expect_bad("{" AG ", \"edges\": [], \"forbidden_output\": [\"ok\", \"(unclosed\"]}", "$.forbidden_output[1]",
               "bad POSIX extended regex");
    expect_bad("{" AG ", \"edges\": [], \"forbidden_output\": [{\"pattern\": \"x\", \"icase\": 1}]}",
               "$.forbidden_output[0].icase: expected true or false", NULL);
    expect_bad("{" AG ", \"edges\": [], \"forbidden_output\": [{\"name\": \"n\", \"icase\": true}]}",
               "$.forbidden_output[0]: missing \"pattern\"", NULL);
    expect_bad("{" AG ", \"edges\": [], \"forbidden_output\": [\"\"]}", "$.forbidden_output[0]", "empty pattern");
    expect_bad("{" AG ", \"edges\": [], \"forbidden_output\": [{\"pattern\": \"a\", \"channels\": [\"output\", \"stderr\"]}]}",
               "$.forbidden_output[0].channels[1]: unknown channel \"stderr\"", NULL);
    expect_bad("{" AG ", \"edges\": [], \"forbidden_output\": [{\"pattern\": \"a\", \"channels\": []}]}",
               "$.forbidden_output[0].channels: expected a non-empty array", NULL);
    expect_bad("{" AG ", \"edges\": [], \"secrets\": \"no\"}", "$.secrets: expected true or false", NULL);
    expect_bad("{" AG ", \"edges\": [], \"forbidden_output\": [{\"pattern\": \"a\", \"flags\": \"i\"}]}",
               "$.forbidden_output[0]: unknown key \"flags\"", NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full),
        cmocka_unit_test(test_minimal_and_file),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
