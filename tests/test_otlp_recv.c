/* The OTLP/HTTP receiver and the per-case span source (otlp_recv.h): exports over a real
 * loopback socket land in the store by trace id; protobuf, bad JSON, wrong paths and methods
 * get their statuses; a case collects its spans (early when its top span came, after the grace
 * period when none did), late spans are counted; the file source; and, with $FLARE_BIN,
 * `flare agents run` / `agents fuzz --otlp-listen` against tests/targets/otlp_tgt.c, a target
 * that prints only "done" and reports everything else as spans. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#include "flare/agents/otlp.h"
#include "flare/agents/otlp_recv.h"
#include "otlp/otlp_trace.pb-c.h"
#include "flare/agents/target.h"

static char tmp[64], tgt[128];

static int setup(void **state) {
    strcpy(tmp, "/tmp/flare_otlprecv_XXXXXX");
    if (!mkdtemp(tmp)) return -1;
    snprintf(tgt, sizeof tgt, "%s/otlp_tgt", tmp);
    return tu_build_target("otlp_tgt", tgt);
}

static int teardown(void **state) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    return system(cmd) == 0 ? 0 : -1;
}

/* POST body to 127.0.0.1:port path; returns the status, the response body in out. */
static int post_n(int port, const char *path, const char *ctype, const char *body, size_t blen,
                  char *out, size_t n);
static int post(int port, const char *path, const char *ctype, const char *body, char *out,
                size_t n) {
    return post_n(port, path, ctype, body, body ? strlen(body) : 0, out, n);
}

static int post_n(int port, const char *path, const char *ctype, const char *body, size_t blen,
                  char *out, size_t n) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    char head[512];
    int hn = snprintf(head, sizeof head, "%s %s HTTP/1.1\r\nContent-Type: %s\r\nContent-Length: "
                      "%zu\r\nConnection: close\r\n\r\n", body ? "POST" : "GET", path, ctype,
                      blen);
    assert_int_equal(send(fd, head, (size_t)hn, MSG_NOSIGNAL), hn);
    if (body) assert_int_equal(send(fd, body, blen, MSG_NOSIGNAL), (ssize_t)blen);
    static char buf[65536];
    size_t len = 0;
    ssize_t got;
    while ((got = recv(fd, buf + len, sizeof buf - 1 - len, 0)) > 0) len += (size_t)got;
    buf[len] = 0;
    close(fd);
    char *b = strstr(buf, "\r\n\r\n");
    snprintf(out, n, "%s", b ? b + 4 : "");
    return atoi(buf + 9);
}

/* An export of three spans of trace tid: Planner (child of `parent`) → Coder → run_code. */
static void export_json(char *out, size_t n, const char *tid, const char *parent) {
    snprintf(out, n,
        "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":["
        "{\"traceId\":\"%s\",\"spanId\":\"00000000000000c3\",\"parentSpanId\":\"00000000000000c2\","
        "\"name\":\"execute_tool run_code\",\"startTimeUnixNano\":\"3000\",\"endTimeUnixNano\":\"4000\","
        "\"attributes\":[{\"key\":\"gen_ai.operation.name\",\"value\":{\"stringValue\":\"execute_tool\"}},"
        "{\"key\":\"gen_ai.tool.name\",\"value\":{\"stringValue\":\"run_code\"}}]},"
        "{\"traceId\":\"%s\",\"spanId\":\"00000000000000c2\",\"parentSpanId\":\"00000000000000c1\","
        "\"name\":\"invoke_agent Coder\",\"startTimeUnixNano\":\"2000\",\"endTimeUnixNano\":\"5000\","
        "\"attributes\":[{\"key\":\"gen_ai.operation.name\",\"value\":{\"stringValue\":\"invoke_agent\"}},"
        "{\"key\":\"gen_ai.agent.name\",\"value\":{\"stringValue\":\"Coder\"}}]},"
        "{\"traceId\":\"%s\",\"spanId\":\"00000000000000c1\",\"parentSpanId\":\"%s\","
        "\"name\":\"invoke_agent Planner\",\"startTimeUnixNano\":\"1000\",\"endTimeUnixNano\":\"6000\","
        "\"attributes\":[{\"key\":\"gen_ai.operation.name\",\"value\":{\"stringValue\":\"invoke_agent\"}},"
        "{\"key\":\"gen_ai.agent.name\",\"value\":{\"stringValue\":\"Planner\"}},"
        "{\"key\":\"output.value\",\"value\":{\"stringValue\":\"from spans\"}}]}"
        "]}]}]}", tid, tid, tid, parent);
}

static fl_case *mkcase(uint64_t seed, char *tid, char *parent) {
    const char *turns[] = {"write code"};
    fl_case *c = fl_case_new(1, turns);
    fl_rng r;
    fl_rng_seed(&r, seed);
    fl_case_new_trace(c, &r);
    memcpy(tid, c->traceparent + 3, 32), tid[32] = 0;
    memcpy(parent, c->traceparent + 36, 16), parent[16] = 0;
    return c;
}

/* Events from stdout and from spans merge by time (issue 16): an answer printed on stdout at
 * 900 ms comes after the failed tool call the spans put at 200-300 ms. */
static void test_time_order(void **state) {
    (void)state;
    fl_otlp_src_opts so = {.listen = "127.0.0.1:0", .grace_ms = 3000};
    fl_otlp_src *src = NULL;
    fl_err e = {0};
    if (fl_otlp_src_new(&so, &src, &e)) fail_msg("src: %s", e.msg);
    char tid[33], parent[17], body[4096], out[256];
    fl_case *c = mkcase(9, tid, parent);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned long long now = (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
    unsigned long long ms = 1000000ull;
    snprintf(body, sizeof body,
        "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":["
        "{\"traceId\":\"%s\",\"spanId\":\"00000000000000d1\",\"parentSpanId\":\"%s\","
        "\"name\":\"invoke_agent Planner\",\"startTimeUnixNano\":\"%llu\",\"endTimeUnixNano\":\"%llu\"},"
        "{\"traceId\":\"%s\",\"spanId\":\"00000000000000d2\",\"parentSpanId\":\"00000000000000d1\","
        "\"name\":\"execute_tool run_code\",\"startTimeUnixNano\":\"%llu\",\"endTimeUnixNano\":\"%llu\","
        "\"status\":{\"code\":2,\"message\":\"boom\"}}]}]}]}",
        tid, parent, now - 900 * ms, now - 20 * ms, tid, now - 800 * ms, now - 700 * ms);
    assert_int_equal(post(fl_otlp_src_port(src), "/v1/traces", "application/json", body, out, sizeof out), 200);
    fl_trace *t = fl_trace_new();
    int done = 0;
    const char *l1 = "{\"event\":\"output\",\"content\":\"all fine\"}", *l2 = "{\"event\":\"done\"}";
    fl_trace_feed_line(t, l1, strlen(l1), 900, &done);
    fl_trace_feed_line(t, l2, strlen(l2), 950, &done);
    t->ms = 1000; /* the case took 1 s and ended now */
    assert_int_equal(fl_otlp_src_collect(src, c, t, &e), FL_OK);
    static const fl_event_kind want[] = {FL_EV_MESSAGE, FL_EV_TOOL_CALL, FL_EV_TOOL_RESULT, FL_EV_OUTPUT, FL_EV_DONE};
    char *j = fl_trace_to_json(t);
    if (t->n_events != 5) fail_msg("%s", j);
    for (int i = 0; i < 5; i++)
        if (t->events[i].kind != want[i]) fail_msg("event %d: %s", i, j);
    /* the span times sit on the request's clock (about 100 and 200 ms; scheduling slack) */
    if (t->events[1].t_ms < 50 || t->events[1].t_ms > 600 || t->events[2].t_ms < t->events[1].t_ms)
        fail_msg("times: %s", j);
    free(j);
    fl_trace_free(t);
    fl_case_free(c);
    fl_otlp_src_free(src);
}

static void test_receiver(void **state) {
    fl_otlp_store *st = fl_otlp_store_new();
    fl_httpd *h = NULL;
    fl_err e = {0};
    if (fl_otlp_listen("127.0.0.1:0", st, &h, &e)) fail_msg("listen: %s", e.msg);
    int port = fl_httpd_port(h);
    char body[4096], out[2048];
    const char *tid = "0af7651916cd43dd8448eb211c80319c";
    export_json(body, sizeof body, tid, "b7ad6b7169203331");
    assert_int_equal(post(port, "/v1/traces", "application/json", body, out, sizeof out), 200);
    assert_string_equal(out, "{}");
    assert_int_equal(fl_otlp_store_count(st, tid), 3);
    assert_int_equal(fl_otlp_store_count(st, "0af7651916cd43dd8448eb211c80319d"), 0);
    /* protobuf: a request built with the generated code lands like JSON; a truncated one is
     * a 400 naming the encoding; other types a clear 415 */
    {
        uint8_t id[16] = {0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd, 0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80, 0x31, 0x9e};
        uint8_t sid[8] = {1, 2, 3, 4, 5, 6, 7, 8};
        Flare__Otlp__Span sp = FLARE__OTLP__SPAN__INIT, *spp = &sp;
        sp.trace_id = (ProtobufCBinaryData){16, id};
        sp.span_id = (ProtobufCBinaryData){8, sid};
        sp.name = "invoke_agent A";
        Flare__Otlp__ScopeSpans ss = FLARE__OTLP__SCOPE_SPANS__INIT, *ssp = &ss;
        ss.n_spans = 1, ss.spans = &spp;
        Flare__Otlp__ResourceSpans rs = FLARE__OTLP__RESOURCE_SPANS__INIT, *rsp = &rs;
        rs.n_scope_spans = 1, rs.scope_spans = &ssp;
        Flare__Otlp__ExportTraceServiceRequest rq = FLARE__OTLP__EXPORT_TRACE_SERVICE_REQUEST__INIT;
        rq.n_resource_spans = 1, rq.resource_spans = &rsp;
        uint8_t pb[256];
        size_t len = flare__otlp__export_trace_service_request__pack(&rq, pb);
        assert_int_equal(post_n(port, "/v1/traces", "application/x-protobuf", (const char *)pb, len, out, sizeof out), 200);
        assert_string_equal(out, ""); /* an empty ExportTraceServiceResponse */
        assert_int_equal(fl_otlp_store_count(st, "0af7651916cd43dd8448eb211c80319e"), 1);
    }
    assert_int_equal(post(port, "/v1/traces", "application/x-protobuf", "\x0a\x02", out, sizeof out), 400);
    assert_non_null(strstr(out, "protobuf"));
    assert_int_equal(post(port, "/v1/traces", "application/grpc", "x", out, sizeof out), 415);
    assert_non_null(strstr(out, "application/grpc"));
    assert_non_null(strstr(out, "Collector"));
    /* bad JSON: 400 naming the problem; nothing stored */
    assert_int_equal(post(port, "/v1/traces", "application/json", "{\"resourceSpans\":[{\"scopeSpans\":"
                          "[{\"spans\":[{\"traceId\":\"xyz\"}]}]}]}", out, sizeof out), 400);
    assert_non_null(strstr(out, "traceId"));
    assert_int_equal(post(port, "/v1/metrics", "application/json", "{}", out, sizeof out), 404);
    assert_non_null(strstr(out, "/v1/traces"));
    assert_int_equal(post(port, "/v1/traces", "application/json", NULL, out, sizeof out), 405);
    fl_httpd_stop(h);
    fl_otlp_stats s;
    fl_otlp_store_stats(st, &s);
    assert_int_equal(s.spans_in, 4); /* 3 as JSON, 1 as protobuf */
    fl_otlp_store_free(st);
}

static void test_collect(void **state) {
    fl_otlp_src_opts so = {.listen = "127.0.0.1:0", .grace_ms = 3000};
    fl_otlp_src *src = NULL;
    fl_err e = {0};
    if (fl_otlp_src_new(&so, &src, &e)) fail_msg("src: %s", e.msg);
    int port = fl_otlp_src_port(src);
    char tid[33], parent[17], body[4096], out[256];
    fl_case *c = mkcase(7, tid, parent);
    export_json(body, sizeof body, tid, parent);
    assert_int_equal(post(port, "/v1/traces", "application/json", body, out, sizeof out), 200);
    /* the stdout side: an output and done */
    fl_trace *t = fl_trace_new();
    int done = 0;
    const char *l1 = "{\"event\":\"output\",\"content\":\"from stdout\"}", *l2 = "{\"event\":\"done\"}";
    fl_trace_feed_line(t, l1, strlen(l1), 1, &done);
    fl_trace_feed_line(t, l2, strlen(l2), 2, &done);
    assert_true(done);
    double t0 = fl_now();
    assert_int_equal(fl_otlp_src_collect(src, c, t, &e), FL_OK);
    double took = fl_now() - t0;
    assert_true(took < 1.0); /* the top span came: no need to wait out 3 s */
    int tool = 0, handoff = 0, outputs = 0;
    for (int i = 0; i < t->n_events; i++) {
        const fl_event *ev = &t->events[i];
        tool += ev->kind == FL_EV_TOOL_CALL && !strcmp(ev->tool, "run_code");
        handoff += ev->kind == FL_EV_MESSAGE && !strcmp(ev->agent, "Planner") && !strcmp(ev->to, "Coder");
        outputs += ev->kind == FL_EV_OUTPUT;
    }
    assert_int_equal(tool, 1);
    assert_int_equal(handoff, 1);
    assert_int_equal(outputs, 1); /* the stdout answer stays, the span's is not a second one */
    assert_string_equal(fl_trace_output(t), "from stdout");
    assert_int_equal(t->events[t->n_events - 1].kind, FL_EV_DONE);
    /* the same spans again: the case is over, they are late */
    assert_int_equal(post(port, "/v1/traces", "application/json", body, out, sizeof out), 200);
    fl_otlp_src_stats ss;
    fl_otlp_src_stats_get(src, &ss);
    assert_int_equal(ss.spans, 6);
    assert_int_equal(ss.merged, 3);
    assert_int_equal(ss.late, 3);
    /* a case without spans waits out the grace period and is left as it was */
    fl_otlp_src_free(src);
    so.grace_ms = 150;
    assert_int_equal(fl_otlp_src_new(&so, &src, &e), FL_OK);
    fl_case *c2 = mkcase(8, tid, parent);
    int n_before = t->n_events;
    t0 = fl_now();
    assert_int_equal(fl_otlp_src_collect(src, c2, t, &e), FL_OK);
    took = fl_now() - t0;
    assert_true(took >= 0.14 && took < 1.0);
    assert_int_equal(t->n_events, n_before);
    fl_otlp_src_free(src);
    /* no source at all: a no-op */
    so.listen = NULL;
    assert_int_equal(fl_otlp_src_new(&so, &src, &e), FL_OK);
    assert_null(src);
    assert_int_equal(fl_otlp_src_collect(NULL, c2, t, &e), FL_OK);
    fl_trace_free(t);
    fl_case_free(c);
    fl_case_free(c2);
}

static void test_file(void **state) {
    char path[128], tid[33], parent[17], body[4096];
    snprintf(path, sizeof path, "%s/spans.jsonl", tmp);
    fl_otlp_src_opts so = {.file = path, .grace_ms = 2000};
    fl_otlp_src *src = NULL;
    fl_err e = {0};
    if (fl_otlp_src_new(&so, &src, &e)) fail_msg("src: %s", e.msg); /* the file need not exist */
    fl_case *c = mkcase(9, tid, parent);
    export_json(body, sizeof body, tid, parent);
    FILE *f = fopen(path, "w");
    fprintf(f, "%s\n", body);
    fclose(f);
    fl_trace *t = fl_trace_new();
    double t0 = fl_now();
    assert_int_equal(fl_otlp_src_collect(src, c, t, &e), FL_OK);
    assert_true(fl_now() - t0 < 1.0); /* quiet for 100 ms after spans came */
    int tool = 0;
    for (int i = 0; i < t->n_events; i++) tool += t->events[i].kind == FL_EV_TOOL_CALL;
    assert_int_equal(tool, 1);
    assert_non_null(fl_trace_output(t)); /* no stdout answer: the span's counts */
    fl_trace_free(t);
    fl_case_free(c);
    fl_otlp_src_free(src);
}

/* ---- through the flare binary ------------------------------------------------------------- */
static const char *flare_bin(void) {
    const char *b = getenv("FLARE_BIN");
    return b ? b : "build/flare";
}

static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof sa;
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
    close(fd);
    return ntohs(sa.sin_port);
}

/* The output of a shell command, malloc'd. */
static char *capture(const char *cmd) {
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t cap = 1 << 16, n = 0;
    char *s = malloc(cap);
    while (n + 1 < cap && (n += fread(s + n, 1, cap - 1 - n, p)) && !feof(p)) {}
    s[n] = 0;
    pclose(p);
    return s;
}

static long stat_of(const char *stats, const char *key) {
    const char *p = strstr(stats, key);
    if (!p) return -1;
    p = strchr(p, ':');
    return p ? atol(p + 1) : -1;
}

static void test_cli(void **state) {
    TU_NEED(access(flare_bin(), X_OK) == 0, "the flare binary (FLARE_BIN; tests/run.sh sets it)");
    char cmd[2048], case_path[128];
    snprintf(case_path, sizeof case_path, "%s/case.json", tmp);
    FILE *f = fopen(case_path, "w");
    fputs("{\"turns\":[\"please fail this\"]}\n", f);
    fclose(f);
    int port = free_port();
    snprintf(cmd, sizeof cmd, "%s agents run --otlp-listen 127.0.0.1:%d %s -- %s %d 2>&1",
             flare_bin(), port, case_path, tgt, port);
    char *out = capture(cmd);
    if (!strstr(out, "Planner -> Coder") || !strstr(out, "tool_call    Coder run_code") ||
        !strstr(out, "run_code FAILED") || !strstr(out, "otlp: 3 span(s) merged"))
        fail_msg("agents run output:\n%s", out);
    free(out);
    /* a campaign: every case's spans merged; fuzzer_stats counts them */
    char seeds[128], outdir[128];
    snprintf(seeds, sizeof seeds, "%s/seeds", tmp);
    snprintf(outdir, sizeof outdir, "%s/out", tmp);
    snprintf(cmd, sizeof cmd, "mkdir -p %s && echo 'write code' > %s/a.txt && echo 'fail it' > %s/b.txt",
             seeds, seeds, seeds);
    assert_int_equal(system(cmd), 0);
    port = free_port();
    snprintf(cmd, sizeof cmd, "%s agents fuzz -q -i %s -o %s -E 8 -s 1 --otlp-listen 127.0.0.1:%d "
             "-- %s %d >/dev/null 2>&1", flare_bin(), seeds, outdir, port, tgt, port);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "cat %s/fuzzer_stats; ls %s/failures", outdir, outdir);
    out = capture(cmd);
    long execs = stat_of(out, "execs_done"), spans = stat_of(out, "otlp_spans");
    if (execs < 10 || spans != 3 * execs || stat_of(out, "otlp_late") != 0)
        fail_msg("fuzzer_stats:\n%s", out);
    free(out);
    /* replay and min see the same findings through the receiver (each run under a new trace
     * id: the saved one was collected when the case was found) */
    port = free_port();
    snprintf(cmd, sizeof cmd, "%s agents replay %s/failures --otlp-listen 127.0.0.1:%d -- %s %d "
             "2>&1", flare_bin(), outdir, port, tgt, port);
    out = capture(cmd);
    int n_cases = 0, n_fail = 0, n_same = -1;
    const char *sum = strstr(out, " still fail");
    while (sum && sum > out && sum[-1] != '\n') sum--;
    /* "N case(s): F still fail(s) (S with the saved signature), X fixed" */
    const char *colon = sum ? strchr(sum, ':') : NULL, *paren = colon ? strchr(colon, '(') : NULL;
    if (!paren || sscanf(sum, "%d", &n_cases) != 1 || sscanf(colon + 1, "%d", &n_fail) != 1 ||
        sscanf(paren + 1, "%d", &n_same) != 1)
        fail_msg("replay output:\n%s", out);
    if (n_cases < 1 || n_fail != n_cases || n_same != n_cases) fail_msg("replay output:\n%s", out);
    free(out);
    /* without the spans the same cases give other findings (last agent active: none) */
    snprintf(cmd, sizeof cmd, "%s agents replay %s/failures -- %s %d 2>/dev/null | tail -1",
             flare_bin(), outdir, tgt, port);
    out = capture(cmd);
    if (!strstr(out, "(0 with the saved signature)")) fail_msg("replay without spans:\n%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "f=$(find %s/failures -name '*.json' | head -1); "
             "%s agents min $f -o %s/min.json -q --otlp-listen 127.0.0.1:%d -- %s %d >/dev/null 2>&1",
             outdir, flare_bin(), tmp, port, tgt, port);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s/min.json", tmp);
    assert_int_equal(access(cmd, R_OK), 0);
    /* spans 300 ms after "done", grace 50 ms: counted late, not merged */
    port = free_port();
    snprintf(cmd, sizeof cmd, "%s agents fuzz -q -i %s -o %s.late -E 2 -s 1 --otlp-listen "
             "127.0.0.1:%d --otlp-grace 50 -- %s %d late >/dev/null 2>&1; cat %s.late/fuzzer_stats",
             flare_bin(), seeds, outdir, port, tgt, port, outdir);
    out = capture(cmd);
    if (stat_of(out, "otlp_late") < 3) fail_msg("late fuzzer_stats:\n%s", out);
    free(out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_receiver),
        cmocka_unit_test(test_collect),
        cmocka_unit_test(test_time_order),
        cmocka_unit_test(test_file),
        cmocka_unit_test(test_cli),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
