/* OTLP/JSON ingestion: parsing (hex and base64 ids, 64-bit values as strings or numbers, every
 * attribute type, errors with source and JSON path), the span store (take by trace id, late,
 * unmatched and dropped spans, concurrent add/take), --otlp-file polling (partial lines,
 * appends, bad lines as file:line, truncation) and the mapping of spans to protocol events
 * for each vocabulary (gen_ai semconv, OpenInference, Traceloop, span names), with a fixture
 * whose mapped trace equals the JSON-lines trace of the same run. */
#include "testutil.h"

#include <pthread.h>
#include <unistd.h>

#include "flare/agents/otlp.h"
#include "flare/agents/target.h"

#define FIX "tests/fixtures/otlp/"
#define TWIN_ID "5b8efff798038103d269b633813fc60c"

static char *read_text(const char *path, size_t *len) {
    uint8_t *buf = NULL;
    fl_err e = {0};
    if (fl_file_read(path, &buf, len, &e) != FL_OK) fail_msg("%s", e.msg);
    char *txt = malloc(*len + 1); /* fl_file_read does not terminate */
    assert_non_null(txt);
    memcpy(txt, buf, *len), txt[*len] = 0;
    free(buf);
    return txt;
}

static fl_otlp_span *parse_file(const char *path, int *n) {
    size_t len;
    char *txt = read_text(path, &len);
    fl_otlp_span *sp = NULL;
    fl_err e = {0};
    if (fl_otlp_parse(txt, len, path, &sp, n, &e) != FL_OK) fail_msg("%s", e.msg);
    free(txt);
    return sp;
}

/* A trace from protocol event lines (one per line, as a target writes them). */
static fl_trace *from_lines(const char *text) {
    fl_trace *t = fl_trace_new();
    const char *p = text;
    int done;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        assert_int_equal(fl_trace_feed_line(t, p, len, 0, &done), FL_OK);
        p += len + (nl != NULL);
    }
    assert_int_equal(t->n_protocol, 0);
    return t;
}

static fl_trace *map_spans(const fl_otlp_span *sp, int n) {
    fl_trace *t = fl_trace_new();
    fl_err e = {0};
    assert_int_equal(fl_otlp_map(sp, n, t, &e), FL_OK);
    return t;
}

/* Same events (times aside). */
static void assert_same_events(fl_trace *got, fl_trace *want) {
    for (int i = 0; i < got->n_events; i++) got->events[i].t_ms = 0;
    for (int i = 0; i < want->n_events; i++) want->events[i].t_ms = 0;
    char *a = fl_trace_to_json(got), *b = fl_trace_to_json(want);
    if (strcmp(a, b)) fail_msg("events differ:\n got  %s\n want %s", a, b);
    free(a);
    free(b);
}

static void assert_maps_to(const char *fixture, const char *lines, int64_t tin, int64_t tout) {
    int n;
    fl_otlp_span *sp = parse_file(fixture, &n);
    fl_trace *got = map_spans(sp, n), *want = from_lines(lines);
    assert_same_events(got, want);
    assert_int_equal(got->tokens_in, tin);
    assert_int_equal(got->tokens_out, tout);
    fl_trace_free(got);
    fl_trace_free(want);
    fl_otlp_spans_free(sp, n);
}

/* One request holding one span with the given name, parent and attributes (JSON array text). */
static fl_otlp_span *one_span(const char *name, const char *parent, const char *attrs) {
    char buf[4096];
    snprintf(buf, sizeof buf,
             "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"traceId\":\"%s\",\"spanId\":"
             "\"00000000000000aa\",\"parentSpanId\":\"%s\",\"name\":\"%s\",\"attributes\":%s}]}]}]}",
             TWIN_ID, parent, name, attrs);
    fl_otlp_span *sp;
    int n;
    fl_err e = {0};
    if (fl_otlp_parse(buf, strlen(buf), "inline", &sp, &n, &e) != FL_OK) fail_msg("%s", e.msg);
    assert_int_equal(n, 1);
    return sp;
}

#define A(k, v) "{\"key\":\"" k "\",\"value\":{\"stringValue\":\"" v "\"}}"

/* ---- parsing ------------------------------------------------------------------------------- */
static void test_parse_fields(void **state) {
    (void)state;
    int n;
    fl_otlp_span *sp = parse_file(FIX "traceloop.json", &n);
    assert_int_equal(n, 6);
    /* upper-case hex stored lower-case; times as JSON numbers */
    assert_string_equal(sp[0].trace_id, "0af7651916cd43dd8448eb211c80319c");
    assert_string_equal(sp[0].parent_id, "");
    assert_true(sp[0].start_ns == 1732000000000000000ull);
    assert_true(sp[0].end_ns == 1732000001000000000ull);
    assert_string_equal(sp[0].service, "research-crew");
    assert_string_equal(sp[0].scope, "opentelemetry.instrumentation.crewai");
    assert_string_equal(sp[1].parent_id, "2000000000000001");
    assert_int_equal(sp[4].status_code, 2);
    assert_string_equal(sp[4].status_msg, "rate limited");
    /* attribute types */
    const fl_otlp_attr *a = fl_otlp_attr_get(&sp[3], "gen_ai.usage.prompt_tokens");
    assert_non_null(a);
    assert_int_equal(a->type, FL_OTLP_INT);
    assert_int_equal(a->i, 12);
    a = fl_otlp_attr_get(&sp[3], "llm.is_streaming");
    assert_int_equal(a->type, FL_OTLP_BOOL);
    assert_string_equal(a->text, "false");
    a = fl_otlp_attr_get(&sp[3], "llm.request.functions");
    assert_int_equal(a->type, FL_OTLP_ARRAY);
    assert_string_equal(a->text, "[\"calculator\",1,0.5]");
    int64_t v = 0;
    assert_true(fl_otlp_attr_int(&sp[3], "gen_ai.usage.completion_tokens", &v));
    assert_int_equal(v, 3);
    assert_false(fl_otlp_attr_int(&sp[3], "gen_ai.system", &v));
    assert_null(fl_otlp_attr_get(&sp[3], "absent"));
    fl_otlp_spans_free(sp, n);

    /* intValue as a number and as a string; enum names; status {} */
    sp = parse_file(FIX "openinference_agents_sdk.json", &n);
    assert_int_equal(n, 6);
    assert_int_equal(sp[0].kind, 1); /* "SPAN_KIND_INTERNAL" */
    assert_int_equal(sp[0].status_code, 1);
    assert_true(fl_otlp_attr_int(&sp[5], "llm.token_count.prompt", &v) && v == 30);
    assert_true(fl_otlp_attr_int(&sp[2], "llm.token_count.prompt", &v) && v == 40);
    fl_otlp_spans_free(sp, n);
}

static void test_parse_base64_ids(void **state) {
    (void)state;
    int n;
    fl_otlp_span *sp = parse_file(FIX "names_base64.json", &n);
    assert_int_equal(n, 3);
    assert_string_equal(sp[0].trace_id, "0af7651916cd43dd8448eb211c80319c");
    assert_string_equal(sp[0].span_id, "b7ad6b7169203331");
    assert_string_equal(sp[0].parent_id, ""); /* all-zero parent = root */
    assert_string_equal(sp[1].parent_id, "b7ad6b7169203331");
    assert_string_equal(sp[2].span_id, "53995c3f42cd8ad8");
    assert_int_equal(sp[2].status_code, 2);
    assert_true(sp[2].start_ns == 300 && sp[2].end_ns == 400);
    fl_otlp_spans_free(sp, n);
}

static void test_parse_errors(void **state) {
    (void)state;
    static const struct { const char *in, *msg; } cases[] = {
        {"", "src: not a JSON object"},
        {"[1,2]", "src: not a JSON object"},
        {"{\"resourceSpans\":{}}", "src: resourceSpans: not an array"},
        {"{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"traceId\":\"abc\",\"spanId\":\"00f067aa0ba902b7\"}]}]}]}",
         "src: resourceSpans[0].scopeSpans[0].spans[0].traceId: not 32 hex digits"},
        {"{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"traceId\":\"0af7651916cd43dd8448eb211c80319c\","
         "\"spanId\":\"00f067aa0ba902bz\"}]}]}]}",
         "spans[0].spanId: not 16 hex digits"},
        {"{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"traceId\":\"00000000000000000000000000000000\","
         "\"spanId\":\"00f067aa0ba902b7\"}]}]}]}",
         "traceId: all zero"},
        {"{\"resourceSpans\":[{\"scopeSpans\":[{},{\"spans\":[{\"traceId\":\"0af7651916cd43dd8448eb211c80319c\","
         "\"spanId\":\"00f067aa0ba902b7\",\"attributes\":[{\"key\":\"x\",\"value\":{\"intValue\":\"12a\"}}]}]}]}]}",
         "scopeSpans[1].spans[0].attributes[0]: intValue is not a 64-bit integer"},
        {"{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"traceId\":\"0af7651916cd43dd8448eb211c80319c\","
         "\"spanId\":\"00f067aa0ba902b7\",\"startTimeUnixNano\":\"-5\"}]}]}]}",
         "spans[0].startTimeUnixNano: not an unsigned 64-bit integer"},
        {"{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"traceId\":\"0af7651916cd43dd8448eb211c80319c\","
         "\"spanId\":\"00f067aa0ba902b7\",\"status\":{\"code\":\"BROKEN\"}}]}]}]}",
         "spans[0].status: code is not a StatusCode"},
        {"{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"traceId\":\"0af7651916cd43dd8448eb211c80319c\","
         "\"spanId\":\"00f067aa0ba902b7\",\"attributes\":[{\"key\":\"x\",\"value\":{\"arrayValue\":{\"values\":[1]}}}]}]}]}]}",
         "attributes[0]: malformed arrayValue"},
        {"{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"traceId\":\"0af7651916cd43dd8448eb211c80319c\","
         "\"spanId\":\"00f067aa0ba902b7\",\"kind\":1e300}]}]}]}",
         "spans[0].kind: not a SpanKind"},
        {"{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"traceId\":\"0af7651916cd43dd8448eb211c80319c\","
         "\"spanId\":\"00f067aa0ba902b7\",\"events\":[{\"name\":3}]}]}]}]}",
         "spans[0].events[0]: name is not a string"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fl_otlp_span *sp = (fl_otlp_span *)1;
        int n = 7;
        fl_err e = {0};
        assert_int_equal(fl_otlp_parse(cases[i].in, strlen(cases[i].in), "src", &sp, &n, &e), FL_ERR_FORMAT);
        if (!strstr(e.msg, cases[i].msg)) fail_msg("case %zu: \"%s\" lacks \"%s\"", i, e.msg, cases[i].msg);
        assert_null(sp);
        assert_int_equal(n, 0);
    }
    /* empty requests are fine */
    fl_otlp_span *sp;
    int n;
    fl_err e = {0};
    assert_int_equal(fl_otlp_parse("{}", 2, "src", &sp, &n, &e), FL_OK);
    assert_int_equal(n, 0);
    const char *empty = "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[]}]}]}";
    assert_int_equal(fl_otlp_parse(empty, strlen(empty), "src", &sp, &n, &e), FL_OK);
    assert_int_equal(n, 0);
    fl_otlp_spans_free(sp, n);
}

/* ---- classification and names ------------------------------------------------------------- */
static void check_role(const char *name, const char *parent, const char *attrs, fl_otlp_role want) {
    fl_otlp_span *s = one_span(name, parent, attrs);
    if (fl_otlp_classify(s) != want)
        fail_msg("%s %s: %s, want %s", name, attrs, fl_otlp_role_name(fl_otlp_classify(s)), fl_otlp_role_name(want));
    fl_otlp_spans_free(s, 1);
}

static void test_classify(void **state) {
    (void)state;
    /* gen_ai.operation.name first, even against the other vocabularies and the name */
    check_role("execute_tool x", "", "[" A("gen_ai.operation.name", "invoke_agent") "," A("openinference.span.kind", "TOOL") "]", FL_OTLP_AGENT);
    check_role("s", "", "[" A("gen_ai.operation.name", "invoke_workflow") "]", FL_OTLP_WORKFLOW);
    check_role("s", "", "[" A("gen_ai.operation.name", "execute_tool") "]", FL_OTLP_TOOL);
    check_role("s", "", "[" A("gen_ai.operation.name", "chat") "]", FL_OTLP_LLM);
    check_role("s", "", "[" A("gen_ai.operation.name", "create_agent") "]", FL_OTLP_CREATE_AGENT);
    /* an unknown operation falls through to the next rule */
    check_role("s", "", "[" A("gen_ai.operation.name", "dance") "," A("openinference.span.kind", "TOOL") "]", FL_OTLP_TOOL);
    /* OpenInference before Traceloop */
    check_role("s", "", "[" A("openinference.span.kind", "AGENT") "," A("traceloop.span.kind", "tool") "]", FL_OTLP_AGENT);
    check_role("s", "", "[" A("openinference.span.kind", "LLM") "]", FL_OTLP_LLM);
    check_role("s", "", "[" A("openinference.span.kind", "CHAIN") "]", FL_OTLP_WORKFLOW);
    check_role("s", "00000000000000bb", "[" A("openinference.span.kind", "CHAIN") "]", FL_OTLP_OTHER);
    /* Traceloop before the span name */
    check_role("invoke_agent A", "", "[" A("traceloop.span.kind", "tool") "]", FL_OTLP_TOOL);
    check_role("s", "", "[" A("traceloop.span.kind", "workflow") "]", FL_OTLP_WORKFLOW);
    check_role("s", "", "[" A("traceloop.span.kind", "agent") "]", FL_OTLP_AGENT);
    check_role("s", "", "[" A("traceloop.span.kind", "task") "]", FL_OTLP_OTHER);
    /* the span name prefix: a whole word */
    check_role("invoke_agent Planner", "", "[]", FL_OTLP_AGENT);
    check_role("execute_tool search", "", "[]", FL_OTLP_TOOL);
    check_role("chat gpt-4o", "", "[]", FL_OTLP_LLM);
    check_role("invoke_workflow", "", "[]", FL_OTLP_WORKFLOW);
    check_role("chatter", "", "[]", FL_OTLP_OTHER);
    /* provider only: old gen_ai.system and new gen_ai.provider.name */
    check_role("POST", "", "[" A("gen_ai.system", "openai") "]", FL_OTLP_LLM);
    check_role("POST", "", "[" A("gen_ai.provider.name", "openai") "]", FL_OTLP_LLM);
    check_role("handoff", "", "[" A("from_agent", "a") "," A("to_agent", "b") "]", FL_OTLP_HANDOFF);
}

static void check_name(int tool, const char *span_name, const char *attrs, const char *want) {
    fl_otlp_span *s = one_span(span_name, "", attrs);
    const char *got = tool ? fl_otlp_tool_name(s) : fl_otlp_agent_name(s);
    if (!want ? got != NULL : !got || strcmp(got, want))
        fail_msg("%s %s: got %s, want %s", span_name, attrs, got ? got : "NULL", want ? want : "NULL");
    fl_otlp_spans_free(s, 1);
}

static void test_names(void **state) {
    (void)state;
    check_name(0, "invoke_agent N", "[" A("graph.node.id", "g") "," A("agent.name", "a") "," A("gen_ai.agent.name", "G") "]", "G");
    check_name(0, "invoke_agent N", "[" A("graph.node.id", "g") "," A("agent.name", "a") "]", "a");
    check_name(0, "invoke_agent N", "[" A("graph.node.id", "g") "]", "g");
    check_name(0, "invoke_agent N", "[" A("traceloop.span.kind", "agent") "," A("traceloop.entity.name", "t") "]", "t");
    check_name(0, "invoke_agent N", "[" A("traceloop.span.kind", "tool") "," A("traceloop.entity.name", "t") "]", "N");
    check_name(0, "invoke_agent N", "[" A("gen_ai.agent.name", "") "]", "N"); /* empty = absent */
    check_name(0, "something", "[]", NULL);
    check_name(1, "execute_tool N", "[" A("tool_name", "c") "," A("tool.name", "b") "," A("gen_ai.tool.name", "a") "]", "a");
    check_name(1, "execute_tool N", "[" A("tool_name", "c") "," A("tool.name", "b") "]", "b");
    check_name(1, "execute_tool N", "[" A("tool_name", "c") "]", "c");
    check_name(1, "execute_tool N", "[]", "N");
}

/* ---- mapping --------------------------------------------------------------------------------- */
static void test_map_twin(void **state) {
    (void)state;
    /* the spans of one run, read as the Collector writes them, give the run's own event lines */
    fl_otlp_store *st = fl_otlp_store_new();
    fl_otlp_file *f;
    fl_err e = {0};
    assert_int_equal(fl_otlp_file_open(FIX "twin.otlp.jsonl", &f, &e), FL_OK);
    assert_int_equal(fl_otlp_file_poll(f, st, &e), FL_OK);
    assert_int_equal(fl_otlp_file_lines(f), 2);
    fl_otlp_span *sp;
    int n;
    assert_int_equal(fl_otlp_store_take(st, TWIN_ID, &sp, &n), FL_OK);
    assert_int_equal(n, 10);
    size_t len;
    char *lines = read_text(FIX "twin.events.jsonl", &len);
    fl_trace *want = from_lines(lines), *got = fl_trace_new();
    /* the mapped events go before a DONE already there */
    int done;
    assert_int_equal(fl_trace_feed_line(got, "{\"event\":\"done\"}", 16, 0, &done), FL_OK);
    assert_int_equal(fl_otlp_map(sp, n, got, &e), FL_OK);
    assert_same_events(got, want);
    /* 100+50 in, 20+10 out: the Master span's own totals are not counted twice */
    assert_int_equal(got->tokens_in, 150);
    assert_int_equal(got->tokens_out, 30);
    /* times are relative to the earliest span, in ms, and ordered */
    fl_trace_free(got);
    got = map_spans(sp, n);
    assert_true(fabs(got->events[0].t_ms - 0.1) < 1e-9); /* Master starts 0.1 ms after the workflow */
    for (int i = 1; i < got->n_events; i++) assert_true(got->events[i].t_ms >= got->events[i - 1].t_ms);
    fl_trace_free(got);
    fl_trace_free(want);
    free(lines);
    fl_otlp_spans_free(sp, n);
    fl_otlp_file_free(f);
    fl_otlp_store_free(st);
}

static void test_map_openinference(void **state) {
    (void)state;
    /* OpenAI Agents SDK through OpenInference: a transfer tool hands off to "French Agent"
     * (matched loosely to transfer_to_french_agent; no second, implicit edge); the transfer
     * tool is the edge, not a tool call */
    assert_maps_to(FIX "openinference_agents_sdk.json",
                   "{\"event\":\"message\",\"from\":\"user\",\"to\":\"Triage Agent\",\"content\":\"Say hello in French\"}\n"
                   "{\"event\":\"message\",\"from\":\"Triage Agent\",\"to\":\"French Agent\",\"content\":\"\"}\n"
                   "{\"event\":\"output\",\"content\":\"Bonjour !\"}\n",
                   70, 13);
}

static void test_map_traceloop(void **state) {
    (void)state;
    /* siblings in start order: researcher then writer; an agent error; the workflow output */
    assert_maps_to(FIX "traceloop.json",
                   "{\"event\":\"message\",\"from\":\"user\",\"to\":\"researcher\",\"content\":\"what is 6 times 7\"}\n"
                   "{\"event\":\"tool_call\",\"agent\":\"researcher\",\"tool\":\"calculator\",\"arguments\":{\"args\":[6,7]}}\n"
                   "{\"event\":\"tool_result\",\"agent\":\"researcher\",\"tool\":\"calculator\",\"ok\":true,\"content\":\"42\"}\n"
                   "{\"event\":\"message\",\"from\":\"researcher\",\"to\":\"writer\",\"content\":\"42\"}\n"
                   "{\"event\":\"error\",\"agent\":\"writer\",\"message\":\"rate limited\"}\n"
                   "{\"event\":\"output\",\"content\":\"The answer is 42.\"}\n",
                   12, 3);
}

static void test_map_span_names(void **state) {
    (void)state;
    /* names only: parent invoke_agent -> child invoke_agent; a failed tool without a message */
    assert_maps_to(FIX "names_base64.json",
                   "{\"event\":\"message\",\"from\":\"user\",\"to\":\"Planner\",\"content\":\"\"}\n"
                   "{\"event\":\"message\",\"from\":\"Planner\",\"to\":\"Coder\",\"content\":\"\"}\n"
                   "{\"event\":\"tool_call\",\"agent\":\"Coder\",\"tool\":\"run_tests\"}\n"
                   "{\"event\":\"tool_result\",\"agent\":\"Coder\",\"tool\":\"run_tests\",\"ok\":false,\"content\":\"error\"}\n",
                   0, 0);
}

static void test_map_edges(void **state) {
    (void)state;
    /* A and B siblings under a workflow, C under A, D under C with a handoff C->B before B.
     * Spans arrive out of order (children first): the start times decide. */
    const char *req =
        "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":["
        "{\"traceId\":\"" TWIN_ID "\",\"spanId\":\"0000000000000004\",\"parentSpanId\":\"0000000000000003\",\"name\":\"invoke_agent C\",\"startTimeUnixNano\":\"30\",\"endTimeUnixNano\":\"40\"},"
        "{\"traceId\":\"" TWIN_ID "\",\"spanId\":\"0000000000000005\",\"parentSpanId\":\"0000000000000004\",\"name\":\"invoke_agent C\",\"startTimeUnixNano\":\"31\",\"endTimeUnixNano\":\"39\"},"
        "{\"traceId\":\"" TWIN_ID "\",\"spanId\":\"0000000000000006\",\"parentSpanId\":\"0000000000000004\",\"name\":\"handoff\",\"startTimeUnixNano\":\"35\",\"endTimeUnixNano\":\"35\","
        "\"attributes\":[" A("to_agent", "B") "]},"
        "{\"traceId\":\"" TWIN_ID "\",\"spanId\":\"0000000000000003\",\"parentSpanId\":\"0000000000000001\",\"name\":\"invoke_agent A\",\"startTimeUnixNano\":\"20\",\"endTimeUnixNano\":\"45\"},"
        "{\"traceId\":\"" TWIN_ID "\",\"spanId\":\"0000000000000007\",\"parentSpanId\":\"0000000000000001\",\"name\":\"invoke_agent B\",\"startTimeUnixNano\":\"50\",\"endTimeUnixNano\":\"60\","
        "\"attributes\":[" A("error.type", "TimeoutError") "]},"
        "{\"traceId\":\"" TWIN_ID "\",\"spanId\":\"0000000000000008\",\"parentSpanId\":\"0000000000000001\",\"name\":\"invoke_agent D\",\"startTimeUnixNano\":\"70\",\"endTimeUnixNano\":\"80\","
        "\"attributes\":[" A("output.value", "last words") "]},"
        "{\"traceId\":\"" TWIN_ID "\",\"spanId\":\"0000000000000001\",\"name\":\"invoke_workflow w\",\"startTimeUnixNano\":\"10\",\"endTimeUnixNano\":\"90\"}"
        "]}]}]}";
    fl_otlp_span *sp;
    int n;
    fl_err e = {0};
    assert_int_equal(fl_otlp_parse(req, strlen(req), "inline", &sp, &n, &e), FL_OK);
    fl_trace *got = map_spans(sp, n);
    fl_trace *want = from_lines(
        "{\"event\":\"message\",\"from\":\"user\",\"to\":\"A\",\"content\":\"\"}\n"
        "{\"event\":\"message\",\"from\":\"A\",\"to\":\"C\",\"content\":\"\"}\n"   /* parent -> child */
        "{\"event\":\"message\",\"from\":\"C\",\"to\":\"B\",\"content\":\"\"}\n"   /* handoff, from the enclosing agent */
        "{\"event\":\"error\",\"agent\":\"B\",\"message\":\"TimeoutError\"}\n"    /* no A -> B: the handoff said it */
        "{\"event\":\"message\",\"from\":\"B\",\"to\":\"D\",\"content\":\"\"}\n"   /* sibling order */
        "{\"event\":\"output\",\"content\":\"last words\"}\n");                   /* last top-level agent's output */
    /* t_ms from the earliest start (10 ns): A 10 ns later */
    assert_true(fabs(got->events[0].t_ms - 1e-5) < 1e-12);
    assert_same_events(got, want);
    fl_trace_free(got);
    fl_trace_free(want);
    fl_otlp_spans_free(sp, n);
    /* no spans: nothing */
    fl_trace *t = fl_trace_new();
    assert_int_equal(fl_otlp_map(NULL, 0, t, &e), FL_OK);
    assert_int_equal(t->n_events, 0);
    fl_trace_free(t);
}

static void test_map_transfer_and_handoff(void **state) {
    (void)state;
    /* a transfer tool and the handoff span that follows it describe one handoff: one edge,
     * and no tool call (a handoff is not a tool) */
    const char *req =
        "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":["
        "{\"traceId\":\"" TWIN_ID "\",\"spanId\":\"0000000000000001\",\"name\":\"invoke_agent Triage\",\"startTimeUnixNano\":\"10\",\"endTimeUnixNano\":\"50\"},"
        "{\"traceId\":\"" TWIN_ID "\",\"spanId\":\"0000000000000002\",\"parentSpanId\":\"0000000000000001\",\"name\":\"execute_tool transfer_to_billing_agent\",\"startTimeUnixNano\":\"20\",\"endTimeUnixNano\":\"25\"},"
        "{\"traceId\":\"" TWIN_ID "\",\"spanId\":\"0000000000000003\",\"parentSpanId\":\"0000000000000001\",\"name\":\"handoff\",\"startTimeUnixNano\":\"30\",\"endTimeUnixNano\":\"30\","
        "\"attributes\":[" A("from_agent", "Triage") "," A("to_agent", "Billing Agent") "]},"
        "{\"traceId\":\"" TWIN_ID "\",\"spanId\":\"0000000000000004\",\"name\":\"invoke_agent Billing Agent\",\"startTimeUnixNano\":\"60\",\"endTimeUnixNano\":\"70\"}"
        "]}]}]}";
    fl_otlp_span *sp;
    int n;
    fl_err e = {0};
    assert_int_equal(fl_otlp_parse(req, strlen(req), "inline", &sp, &n, &e), FL_OK);
    fl_trace *got = map_spans(sp, n);
    fl_trace *want = from_lines(
        "{\"event\":\"message\",\"from\":\"user\",\"to\":\"Triage\",\"content\":\"\"}\n"
        "{\"event\":\"message\",\"from\":\"Triage\",\"to\":\"Billing Agent\",\"content\":\"\"}\n");
    assert_same_events(got, want);
    fl_trace_free(got);
    fl_trace_free(want);
    fl_otlp_spans_free(sp, n);
}

static void test_map_arguments(void **state) {
    (void)state;
    /* arguments that are not JSON are kept as a JSON string; args from input.value */
    fl_otlp_span *s = one_span("execute_tool t", "", "[" A("input.value", "not json") "," A("gen_ai.agent.name", "X") "]");
    fl_trace *t = map_spans(s, 1);
    assert_int_equal(t->n_events, 2);
    assert_string_equal(t->events[0].arguments, "\"not json\"");
    assert_string_equal(t->events[0].agent, "X");
    assert_int_equal(t->events[1].ok, 1);
    assert_string_equal(t->events[1].content, "");
    fl_trace_free(t);
    fl_otlp_spans_free(s, 1);
    /* a tool outside any agent */
    s = one_span("execute_tool t", "", "[]");
    t = map_spans(s, 1);
    assert_string_equal(t->events[0].agent, "unknown");
    assert_null(t->events[0].arguments);
    fl_trace_free(t);
    fl_otlp_spans_free(s, 1);
}

static void test_map_large(void **state) {
    (void)state;
    /* 3000 agents in a chain of handoff-free siblings, each with a tool and an LLM call: the
     * mapping stays fast (no quadratic passes) and counts everything once */
    enum { N = 3000 };
    size_t cap = (size_t)N * 3 * 400 + 200, len = 0;
    char *req = malloc(cap);
    len += (size_t)snprintf(req + len, cap - len, "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[");
    for (int i = 0; i < N; i++) {
        long long t = 1000LL * (N - i); /* spans arrive newest first */
        len += (size_t)snprintf(req + len, cap - len,
            "%s{\"traceId\":\"" TWIN_ID "\",\"spanId\":\"%016x\",\"name\":\"invoke_agent a%d\","
            "\"startTimeUnixNano\":\"%lld\",\"endTimeUnixNano\":\"%lld\"},"
            "{\"traceId\":\"" TWIN_ID "\",\"spanId\":\"%016x\",\"parentSpanId\":\"%016x\",\"name\":\"execute_tool t\","
            "\"startTimeUnixNano\":\"%lld\",\"endTimeUnixNano\":\"%lld\"},"
            "{\"traceId\":\"" TWIN_ID "\",\"spanId\":\"%016x\",\"parentSpanId\":\"%016x\",\"name\":\"chat m\","
            "\"startTimeUnixNano\":\"%lld\",\"attributes\":[{\"key\":\"gen_ai.usage.input_tokens\",\"value\":{\"intValue\":2}}]}",
            i ? "," : "", 3 * i + 1, i, t, t + 900, 3 * i + 2, 3 * i + 1, t + 100, t + 200, 3 * i + 3,
            3 * i + 1, t + 300);
    }
    len += (size_t)snprintf(req + len, cap - len, "]}]}]}");
    assert_true(len < cap - 1);
    fl_otlp_span *sp;
    int n;
    fl_err e = {0};
    double t0 = fl_now();
    assert_int_equal(fl_otlp_parse(req, len, "big", &sp, &n, &e), FL_OK);
    assert_int_equal(n, 3 * N);
    fl_trace *t = map_spans(sp, n);
    double dt = fl_now() - t0;
    assert_int_equal(t->n_events, 3 * N); /* N messages + N calls + N results */
    assert_int_equal(t->tokens_in, 2 * N);
    /* oldest agent first: user -> a(N-1) */
    assert_string_equal(t->events[0].agent, "user");
    char want[16];
    snprintf(want, sizeof want, "a%d", N - 1);
    assert_string_equal(t->events[0].to, want);
    print_message("parse + map of %d spans: %.1f ms\n", n, dt * 1e3);
    assert_true(dt < 5.0); /* generous: ASan, a loaded machine */
    fl_trace_free(t);
    fl_otlp_spans_free(sp, n);
    free(req);
}

/* ---- the store ------------------------------------------------------------------------------- */
static char *request_for(const char *trace_id, int k) {
    char *buf = malloc(512);
    snprintf(buf, 512,
             "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"traceId\":\"%s\",\"spanId\":\"%016x\","
             "\"name\":\"execute_tool t\"}]}]}]}",
             trace_id, k + 1);
    return buf;
}

static void add_req(fl_otlp_store *st, const char *id, int k) {
    char *r = request_for(id, k);
    fl_err e = {0};
    assert_int_equal(fl_otlp_store_add_json(st, r, strlen(r), "test", &e), FL_OK);
    free(r);
}

static void test_store(void **state) {
    (void)state;
    const char *a = "0af7651916cd43dd8448eb211c80319c", *b = "4bf92f3577b34da6a3ce929d0e0e4736";
    fl_otlp_store *st = fl_otlp_store_new();
    fl_otlp_stats s;
    add_req(st, a, 0), add_req(st, b, 1), add_req(st, a, 2);
    assert_int_equal(fl_otlp_store_count(st, a), 2);
    assert_int_equal(fl_otlp_store_count(st, "0AF7651916CD43DD8448EB211C80319C"), 2);
    fl_otlp_store_stats(st, &s);
    assert_int_equal(s.spans_in, 3);
    assert_int_equal(s.pending, 3);
    assert_int_equal(s.traces, 2);
    fl_otlp_span *sp;
    int n;
    assert_int_equal(fl_otlp_store_take(st, a, &sp, &n), FL_OK);
    assert_int_equal(n, 2);
    assert_string_equal(sp[0].span_id, "0000000000000001"); /* arrival order */
    assert_string_equal(sp[1].span_id, "0000000000000003");
    fl_otlp_spans_free(sp, n);
    /* a straggler of a taken trace is late, and a second take finds nothing */
    add_req(st, a, 9);
    assert_int_equal(fl_otlp_store_take(st, a, &sp, &n), FL_OK);
    assert_int_equal(n, 0);
    assert_null(sp);
    fl_otlp_store_stats(st, &s);
    assert_int_equal(s.late, 1);
    assert_int_equal(s.pending, 1);
    /* a bad request is counted, nothing added */
    fl_err e = {0};
    assert_int_equal(fl_otlp_store_add_json(st, "{\"resourceSpans\":7}", 19, "POST /v1/traces", &e), FL_ERR_FORMAT);
    assert_non_null(strstr(e.msg, "POST /v1/traces: resourceSpans: not an array"));
    /* expiry: b's spans were never taken */
    fl_otlp_store_expire(st, 3600);
    fl_otlp_store_stats(st, &s);
    assert_int_equal(s.pending, 1);
    fl_otlp_store_expire(st, -1);
    fl_otlp_store_stats(st, &s);
    assert_int_equal(s.pending, 0);
    assert_int_equal(s.traces, 0);
    assert_int_equal(s.unmatched, 1);
    assert_int_equal(s.bad, 1);
    /* full: dropped */
    fl_otlp_store_set_max(st, 2);
    for (int k = 0; k < 4; k++) add_req(st, b, 10 + k);
    fl_otlp_store_stats(st, &s);
    assert_int_equal(s.pending, 2);
    assert_int_equal(s.dropped, 2);
    assert_int_equal(fl_otlp_store_take(st, "not an id", &sp, &n), FL_OK);
    assert_int_equal(n, 0);
    fl_otlp_store_free(st); /* frees what it still holds */
}

enum { N_THREAD_SPANS = 400, N_THREAD_TRACES = 8 };

static void *adder(void *arg) {
    fl_otlp_store *st = arg;
    for (int k = 0; k < N_THREAD_SPANS; k++) {
        char id[33];
        snprintf(id, sizeof id, "%032x", k % N_THREAD_TRACES + 1);
        add_req(st, id, k);
    }
    return NULL;
}

static void test_store_threads(void **state) {
    (void)state;
    /* the receiver adds while the campaign takes: every span is taken once or counted late */
    fl_otlp_store *st = fl_otlp_store_new();
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, adder, st), 0);
    long taken = 0;
    for (int round = 0; round < 50; round++) {
        char id[33];
        snprintf(id, sizeof id, "%032x", round % N_THREAD_TRACES + 1);
        fl_otlp_span *sp;
        int n;
        assert_int_equal(fl_otlp_store_take(st, id, &sp, &n), FL_OK);
        taken += n;
        fl_otlp_spans_free(sp, n);
        usleep(100);
    }
    pthread_join(th, NULL);
    fl_otlp_stats s;
    fl_otlp_store_stats(st, &s);
    assert_int_equal(s.spans_in, N_THREAD_SPANS);
    assert_int_equal(taken + s.late + s.pending, N_THREAD_SPANS);
    fl_otlp_store_free(st);
}

/* ---- --otlp-file ------------------------------------------------------------------------------ */
static void append(const char *path, const char *text) {
    FILE *f = fopen(path, "ab");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_file_poll(void **state) {
    (void)state;
    char path[] = "/tmp/flare_otlp_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    unlink(path);
    const char *a = "0af7651916cd43dd8448eb211c80319c";
    fl_otlp_store *st = fl_otlp_store_new();
    fl_otlp_file *f;
    fl_err e = {0};
    assert_int_equal(fl_otlp_file_open(path, &f, &e), FL_OK);
    assert_int_equal(fl_otlp_file_poll(f, st, &e), FL_OK); /* not there yet */
    char *r1 = request_for(a, 0), *r2 = request_for(a, 1);
    /* a partial line waits for its newline */
    size_t half = strlen(r1) / 2;
    char head[512];
    memcpy(head, r1, half), head[half] = 0;
    append(path, head);
    assert_int_equal(fl_otlp_file_poll(f, st, &e), FL_OK);
    assert_int_equal(fl_otlp_store_count(st, a), 0);
    append(path, r1 + half);
    append(path, "\n\n");
    assert_int_equal(fl_otlp_file_poll(f, st, &e), FL_OK);
    assert_int_equal(fl_otlp_store_count(st, a), 1);
    assert_int_equal(fl_otlp_file_lines(f), 2);
    /* a bad line names file:line; the good line after it is still read */
    append(path, "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"traceId\":\"xyz\"}]}]}]}\n");
    append(path, r2), append(path, "\n");
    assert_int_equal(fl_otlp_file_poll(f, st, &e), FL_ERR_FORMAT);
    char want[128];
    snprintf(want, sizeof want, "%s:3: resourceSpans[0].scopeSpans[0].spans[0].traceId", path);
    if (!strstr(e.msg, want)) fail_msg("\"%s\" lacks \"%s\"", e.msg, want);
    assert_int_equal(fl_otlp_store_count(st, a), 2);
    assert_int_equal(fl_otlp_file_poll(f, st, &e), FL_OK); /* nothing new */
    assert_int_equal(fl_otlp_store_count(st, a), 2);
    /* truncated and rewritten (rotation): read from the start */
    FILE *w = fopen(path, "wb");
    fputs(r2, w), fputs("\n", w);
    fclose(w);
    assert_int_equal(fl_otlp_file_poll(f, st, &e), FL_OK);
    assert_int_equal(fl_otlp_store_count(st, a), 3);
    assert_int_equal(fl_otlp_file_lines(f), 1);
    free(r1), free(r2);
    unlink(path);
    fl_otlp_file_free(f);
    fl_otlp_store_free(st);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_fields),     cmocka_unit_test(test_parse_base64_ids),
        cmocka_unit_test(test_parse_errors),     cmocka_unit_test(test_classify),
        cmocka_unit_test(test_names),            cmocka_unit_test(test_map_twin),
        cmocka_unit_test(test_map_openinference), cmocka_unit_test(test_map_traceloop),
        cmocka_unit_test(test_map_span_names),   cmocka_unit_test(test_map_edges),
        cmocka_unit_test(test_map_transfer_and_handoff), cmocka_unit_test(test_map_arguments),    cmocka_unit_test(test_map_large),    cmocka_unit_test(test_store),
        cmocka_unit_test(test_store_threads),    cmocka_unit_test(test_file_poll),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
