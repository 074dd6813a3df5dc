/* HTTP targets (include/flare/agents/http_target.h): against a scripted HTTP server on a thread of
 * this test (one response per path), then a short campaign against the example server
 * (examples/agents-http wrapping examples/agents' taskforce) through the CLI. */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "flare/agents/http_target.h"
#include "flare/agents/target.h"

/* ---- the scripted server -------------------------------------------------------------------- */
static int g_port, g_listen = -1, g_requests;
static volatile int g_stop;
static pthread_t g_thread;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_body[8192], g_traceparent[128], g_ctype[128];

static void send_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k <= 0) return;
        p += k, n -= (size_t)k;
    }
}

static void reply(int fd, const char *status, const char *extra, const char *body, size_t n) {
    char head[512];
    int k = snprintf(head, sizeof head, "HTTP/1.1 %s\r\nContent-Length: %zu\r\n%sConnection: close\r\n\r\n",
                     status, n, extra);
    send_all(fd, head, (size_t)k);
    send_all(fd, body, n);
}

static const char *header(const char *head, const char *name, char *out, size_t n) {
    out[0] = 0;
    for (const char *h = strstr(head, "\r\n"); h; h = strstr(h + 2, "\r\n"))
        if (!strncasecmp(h + 2, name, strlen(name)) && h[2 + strlen(name)] == ':') {
            const char *v = h + 3 + strlen(name);
            while (*v == ' ') v++;
            size_t k = strcspn(v, "\r\n");
            snprintf(out, n, "%.*s", (int)(k < n ? k : n - 1), v);
        }
    return out;
}

static void serve(int fd) {
    static char buf[16384];
    size_t n = 0;
    char *end = NULL;
    while (!end && n + 1 < sizeof buf) {
        ssize_t k = recv(fd, buf + n, sizeof buf - 1 - n, 0);
        if (k <= 0) return;
        n += (size_t)k;
        buf[n] = 0;
        end = strstr(buf, "\r\n\r\n");
    }
    if (!end) return;
    char cl[32], path[256] = "";
    size_t len = strtoul(header(buf, "Content-Length", cl, sizeof cl), NULL, 10);
    while (n < (size_t)(end + 4 - buf) + len && n + 1 < sizeof buf) {
        ssize_t k = recv(fd, buf + n, sizeof buf - 1 - n, 0);
        if (k <= 0) return;
        n += (size_t)k;
        buf[n] = 0;
    }
    sscanf(buf, "%*s %255s", path);
    pthread_mutex_lock(&g_mu);
    g_requests++;
    snprintf(g_body, sizeof g_body, "%.*s", (int)len, end + 4);
    header(buf, "traceparent", g_traceparent, sizeof g_traceparent);
    header(buf, "Content-Type", g_ctype, sizeof g_ctype);
    pthread_mutex_unlock(&g_mu);

    static const char array[] =
        "[{\"event\":\"message\",\"from\":\"user\",\"to\":\"Master\",\"content\":\"hi\"},"
        " {\"event\":\"output\",\"content\":\"hello\"}, {\"event\":\"done\"}]";
    static const char jsonl[] = "{\"event\":\"message\",\"from\":\"user\",\"to\":\"Master\",\"content\":\"hi\"}\n"
                                "not json\n{\"event\":\"output\",\"content\":\"lines\"}\n";
    static const char pointer[] = "{\"choices\":[{\"message\":{\"content\":\"the answer\"}}],\"n\":3}";
    const char *json = "Content-Type: application/json\r\n";
    if (!strcmp(path, "/array")) reply(fd, "200 OK", json, array, sizeof array - 1);
    else if (!strcmp(path, "/jsonl")) reply(fd, "200 OK", "", jsonl, sizeof jsonl - 1);
    else if (!strcmp(path, "/pointer")) reply(fd, "200 OK", json, pointer, sizeof pointer - 1);
    else if (!strcmp(path, "/alternate")) { /* the array, then an empty body, and so on */
        static int k;
        if (k++ % 2 == 0) reply(fd, "200 OK", json, array, sizeof array - 1);
        else reply(fd, "200 OK", json, "", 0);
    } else if (!strcmp(path, "/500")) reply(fd, "500 Internal Server Error", json, "{\"error\":\"boom\"}", 16);
    else if (!strcmp(path, "/404")) reply(fd, "404 Not Found", json, "{}", 2);
    else if (!strcmp(path, "/redirect")) {
        char loc[128];
        snprintf(loc, sizeof loc, "Location: http://127.0.0.1:%d/array\r\n", g_port);
        reply(fd, "302 Found", loc, "", 0);
    } else if (!strcmp(path, "/slow")) {
        usleep(600 * 1000);
        reply(fd, "200 OK", json, array, sizeof array - 1);
    } else if (!strcmp(path, "/big")) {
        size_t big = (size_t)2 << 20;
        char *b = malloc(big);
        memset(b, ' ', big);
        b[0] = '[', b[big - 1] = ']';
        reply(fd, "200 OK", json, b, big);
        free(b);
    } else {
        reply(fd, "404 Not Found", json, "{}", 2);
    }
}

static void *server_main(void *arg) {
    (void)arg;
    while (!g_stop) {
        struct pollfd p = {.fd = g_listen, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0) continue;
        int c = accept(g_listen, NULL, NULL);
        if (c < 0) continue;
        serve(c);
        close(c);
    }
    return NULL;
}

/* A listening loopback socket on a free port; *port gets it. */
static int listen_any(int *port) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof sa;
    assert_true(s >= 0);
    assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(s, 16), 0);
    assert_int_equal(getsockname(s, (struct sockaddr *)&sa, &sl), 0);
    *port = ntohs(sa.sin_port);
    return s;
}

static int setup(void **state) {
    (void)state;
    g_listen = listen_any(&g_port);
    g_stop = 0;
    return pthread_create(&g_thread, NULL, server_main, NULL);
}

static int teardown(void **state) {
    (void)state;
    g_stop = 1;
    pthread_join(g_thread, NULL);
    close(g_listen);
    return 0;
}

/* ---- helpers ----------------------------------------------------------------------------- */
static fl_case *mkcase(const char *t0, const char *t1) {
    const char *turns[2] = {t0, t1};
    fl_case *c = fl_case_new(t1 ? 2 : 1, turns);
    assert_non_null(c);
    fl_rng r;
    fl_rng_seed(&r, 7);
    fl_case_new_trace(c, &r);
    snprintf(c->id, sizeof c->id, "000042");
    c->seed = 99;
    return c;
}

/* Run c against PATH of the test server; returns the trace (to free). */
static fl_trace *run_path(const char *path, const char *response, const char *tmpl, int timeout_ms,
                          size_t max_bytes, const fl_case *c) {
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", g_port, path);
    fl_http_opts h;
    fl_http_opts_default(&h);
    h.url = url;
    h.response = response;
    h.body_template = tmpl;
    fl_target_opts o;
    fl_target_opts_default(&o);
    o.http = &h;
    o.timeout_ms = timeout_ms;
    if (max_bytes) o.max_bytes = max_bytes;
    fl_err e = {0};
    fl_target *t = NULL;
    if (fl_target_new(NULL, &o, &t, &e) != FL_OK) fail_msg("fl_target_new: %s", e.msg);
    fl_trace *tr = fl_trace_new();
    if (fl_target_run(t, c, tr, &e) != FL_OK) fail_msg("fl_target_run: %s", e.msg);
    fl_target_free(t);
    return tr;
}

/* ---- tests --------------------------------------------------------------------------------- */
static void test_array_and_headers(void **state) {
    (void)state;
    fl_case *c = mkcase("hi", NULL);
    fl_trace *tr = run_path("/array", NULL, NULL, 5000, 0, c);
    assert_int_equal(tr->exit, FL_EXIT_DONE);
    assert_int_equal(tr->n_events, 3);
    assert_int_equal(tr->events[0].kind, FL_EV_MESSAGE);
    assert_string_equal(tr->events[0].to, "Master");
    assert_string_equal(fl_trace_output(tr), "hello");
    assert_int_equal(tr->n_protocol, 0);
    /* what the server received: the request JSON, the case's traceparent, JSON content type */
    pthread_mutex_lock(&g_mu);
    assert_string_equal(g_traceparent, c->traceparent);
    assert_string_equal(g_ctype, "application/json");
    char *want = fl_case_to_json(c);
    assert_string_equal(g_body, want);
    pthread_mutex_unlock(&g_mu);
    free(want);
    fl_trace_free(tr);
    fl_case_free(c);
}

static void test_jsonl_implicit_done(void **state) {
    (void)state;
    fl_case *c = mkcase("hi", NULL);
    /* "events" mode reads JSON lines when the body is not an array; "jsonl" always */
    const char *modes[] = {"events", "jsonl"};
    for (int m = 0; m < 2; m++) {
        fl_trace *tr = run_path("/jsonl", modes[m], NULL, 5000, 0, c);
        assert_int_equal(tr->exit, FL_EXIT_DONE);
        assert_int_equal(tr->n_events, 3); /* message, output, the implicit done */
        assert_int_equal(tr->events[2].kind, FL_EV_DONE);
        assert_string_equal(fl_trace_output(tr), "lines");
        assert_int_equal(tr->n_protocol, 1); /* "not json" */
        fl_trace_free(tr);
    }
    fl_case_free(c);
}

/* One target, two cases: the second response has no body, and the first one's is not read
 * again. */
static void test_empty_after_full(void **state) {
    (void)state;
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/alternate", g_port);
    fl_http_opts h;
    fl_http_opts_default(&h);
    h.url = url;
    fl_target_opts o;
    fl_target_opts_default(&o);
    o.http = &h;
    fl_err e = {0};
    fl_target *t = NULL;
    if (fl_target_new(NULL, &o, &t, &e) != FL_OK) fail_msg("fl_target_new: %s", e.msg);
    fl_case *c = mkcase("hi", NULL);
    fl_trace *a = fl_trace_new(), *b = fl_trace_new();
    assert_int_equal(fl_target_run(t, c, a, &e), FL_OK);
    assert_int_equal(fl_target_run(t, c, b, &e), FL_OK);
    assert_string_equal(fl_trace_output(a), "hello");
    assert_int_equal(b->bytes, 0);
    assert_null(fl_trace_output(b));
    fl_trace_free(a), fl_trace_free(b);
    fl_case_free(c);
    fl_target_free(t);
}

static void test_pointer(void **state) {
    (void)state;
    fl_case *c = mkcase("hi", NULL);
    fl_trace *tr = run_path("/pointer", "pointer:/choices/0/message/content", NULL, 5000, 0, c);
    assert_int_equal(tr->exit, FL_EXIT_DONE);
    assert_int_equal(tr->n_events, 2);
    assert_string_equal(fl_trace_output(tr), "the answer");
    fl_trace_free(tr);
    tr = run_path("/pointer", "pointer:/n", NULL, 5000, 0, c); /* a number: its JSON text */
    assert_string_equal(fl_trace_output(tr), "3");
    fl_trace_free(tr);
    tr = run_path("/pointer", "pointer:/choices/1", NULL, 5000, 0, c);
    assert_int_equal(tr->exit, FL_EXIT_DONE);
    assert_null(fl_trace_output(tr));
    assert_int_equal(tr->n_protocol, 1);
    assert_non_null(strstr(tr->protocol_msg, "/choices/1"));
    fl_trace_free(tr);
    fl_case_free(c);
}

static void test_json_pointer_rfc6901(void **state) {
    (void)state;
    /* the examples of RFC 6901 section 5 */
    cJSON *d = cJSON_Parse("{\"foo\":[\"bar\",\"baz\"],\"\":0,\"a/b\":1,\"c%d\":2,\"e^f\":3,"
                           "\"g|h\":4,\"i\\\\j\":5,\"k\\\"l\":6,\" \":7,\"m~n\":8}");
    assert_non_null(d);
    assert_ptr_equal(fl_json_pointer(d, ""), d);
    assert_string_equal(fl_json_pointer(d, "/foo/0")->valuestring, "bar");
    const char *ptrs[] = {"/", "/a~1b", "/c%d", "/e^f", "/g|h", "/i\\j", "/k\"l", "/ ", "/m~0n"};
    for (int i = 0; i < 9; i++) assert_int_equal(fl_json_pointer(d, ptrs[i])->valuedouble, i == 0 ? 0 : i);
    assert_null(fl_json_pointer(d, "/foo/2"));
    assert_null(fl_json_pointer(d, "/foo/01")); /* no leading zeros */
    assert_null(fl_json_pointer(d, "/foo/-"));
    assert_null(fl_json_pointer(d, "/m~2n"));
    assert_null(fl_json_pointer(d, "foo"));
    assert_null(fl_json_pointer(d, "/foo/0/x"));
    cJSON_Delete(d);
}

static void test_template(void **state) {
    (void)state;
    char path[] = "/tmp/flare_http_tmpl_XXXXXX";
    int fd = mkstemp(path);
    static const char tmpl[] =
        "{\"q\":\"{{input}}\",\"t\":{{turns}},\"tp\":\"{{traceparent}}\",\"id\":\"{{id}}\","
        "\"seed\":{{seed}},\"x\":\"{{other}}\",\"r\":{{request}}}";
    assert_int_equal(write(fd, tmpl, sizeof tmpl - 1), (ssize_t)(sizeof tmpl - 1));
    close(fd);
    fl_case *c = mkcase("say \"hi\"\\\n\ttab", "two \xff");
    fl_trace *tr = run_path("/array", NULL, path, 5000, 0, c);
    assert_int_equal(tr->exit, FL_EXIT_DONE);
    pthread_mutex_lock(&g_mu);
    cJSON *j = cJSON_Parse(g_body);
    pthread_mutex_unlock(&g_mu);
    assert_non_null(j); /* the escaping kept it JSON */
    assert_string_equal(cJSON_GetObjectItem(j, "q")->valuestring, "say \"hi\"\\\n\ttab\ntwo \xef\xbf\xbd");
    cJSON *t = cJSON_GetObjectItem(j, "t");
    assert_int_equal(cJSON_GetArraySize(t), 2);
    assert_string_equal(cJSON_GetArrayItem(t, 0)->valuestring, "say \"hi\"\\\n\ttab");
    assert_string_equal(cJSON_GetObjectItem(j, "tp")->valuestring, c->traceparent);
    assert_string_equal(cJSON_GetObjectItem(j, "id")->valuestring, "000042");
    assert_int_equal(cJSON_GetObjectItem(j, "seed")->valueint, 99);
    assert_string_equal(cJSON_GetObjectItem(j, "x")->valuestring, "{{other}}");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "r"), "turns")), 2);
    cJSON_Delete(j);
    fl_trace_free(tr);
    fl_case_free(c);
    unlink(path);
}

static void test_statuses(void **state) {
    (void)state;
    fl_case *c = mkcase("hi", NULL);
    fl_trace *tr = run_path("/500", NULL, NULL, 5000, 0, c);
    assert_int_equal(tr->exit, FL_EXIT_CRASH);
    assert_int_equal(tr->exit_status, 500);
    char how[256];
    assert_non_null(strstr(fl_trace_describe_exit(tr, how, sizeof how), "HTTP status 500"));
    fl_trace_free(tr);
    tr = run_path("/404", NULL, NULL, 5000, 0, c);
    assert_int_equal(tr->exit, FL_EXIT_EOF);
    assert_non_null(strstr(tr->protocol_msg, "404"));
    fl_trace_free(tr);
    /* a redirect is reported, not followed: the server sees one request */
    pthread_mutex_lock(&g_mu);
    int before = g_requests;
    pthread_mutex_unlock(&g_mu);
    tr = run_path("/redirect", NULL, NULL, 5000, 0, c);
    assert_int_equal(tr->exit, FL_EXIT_EOF);
    assert_non_null(strstr(tr->protocol_msg, "not followed"));
    assert_int_equal(tr->n_events, 0);
    pthread_mutex_lock(&g_mu);
    assert_int_equal(g_requests, before + 1);
    pthread_mutex_unlock(&g_mu);
    fl_trace_free(tr);
    fl_case_free(c);
}

static void test_timeout_and_cap(void **state) {
    (void)state;
    fl_case *c = mkcase("hi", NULL);
    fl_trace *tr = run_path("/slow", NULL, NULL, 200, 0, c);
    assert_int_equal(tr->exit, FL_EXIT_HANG);
    assert_true(tr->ms >= 150 && tr->ms < 550);
    fl_trace_free(tr);
    tr = run_path("/big", NULL, NULL, 5000, (size_t)1 << 20, c);
    assert_int_equal(tr->exit, FL_EXIT_LIMIT);
    assert_true(tr->bytes <= (size_t)1 << 20);
    fl_trace_free(tr);
    fl_case_free(c);
}

static void test_refused_retries(void **state) {
    (void)state;
    int port, s = listen_any(&port);
    close(s); /* nothing listens there now */
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/run", port);
    fl_http_opts h;
    fl_http_opts_default(&h);
    h.url = url;
    h.retries = 2;
    h.backoff_ms = 50;
    fl_target_opts o;
    fl_target_opts_default(&o);
    o.http = &h;
    fl_err e = {0};
    fl_target *t = NULL;
    assert_int_equal(fl_target_new(NULL, &o, &t, &e), FL_OK);
    fl_case *c = mkcase("hi", NULL);
    fl_trace *tr = fl_trace_new();
    assert_int_equal(fl_target_run(t, c, tr, &e), FL_OK);
    assert_int_equal(tr->exit, FL_EXIT_CRASH);
    assert_true(tr->ms >= 140); /* 50 + 100 ms of backoff */
    assert_non_null(strstr(tr->protocol_msg, "after 3 tries"));
    fl_trace_free(tr);
    fl_case_free(c);
    fl_target_free(t);
}

static void test_confinement(void **state) {
    (void)state;
    /* a proxy in the environment is not used: the request still reaches the server */
    setenv("http_proxy", "http://127.0.0.1:1", 1);
    setenv("HTTP_PROXY", "http://127.0.0.1:1", 1);
    setenv("ALL_PROXY", "http://127.0.0.1:1", 1);
    fl_case *c = mkcase("hi", NULL);
    fl_trace *tr = run_path("/array", NULL, NULL, 5000, 0, c);
    assert_int_equal(tr->exit, FL_EXIT_DONE);
    fl_trace_free(tr);
    fl_case_free(c);
    unsetenv("http_proxy");
    unsetenv("HTTP_PROXY");
    unsetenv("ALL_PROXY");
    /* only http and https; bad modes are errors before any case */
    const char *bad_url[] = {"file:///etc/passwd", "ftp://127.0.0.1/", "gopher://x", "127.0.0.1:80"};
    fl_http_opts h;
    fl_target_opts o;
    fl_target_opts_default(&o);
    o.http = &h;
    fl_err e = {0};
    fl_target *t = (fl_target *)1;
    for (int i = 0; i < 4; i++) {
        fl_http_opts_default(&h);
        h.url = bad_url[i];
        assert_int_equal(fl_target_new(NULL, &o, &t, &e), FL_ERR_ARG);
        assert_null(t);
    }
    fl_http_opts_default(&h);
    h.url = "http://127.0.0.1:9/";
    h.response = "pointer";
    assert_int_equal(fl_target_new(NULL, &o, &t, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "--response"));
    h.response = NULL;
    h.body_template = "/nonexistent/template.json";
    assert_int_not_equal(fl_target_new(NULL, &o, &t, &e), FL_OK);
    assert_non_null(strstr(e.msg, "/nonexistent/template.json"));
}

/* ---- the CLI: --target replaces -- CMD; bad URLs and modes fail before any case ---------- */
static int flare_rc(const char *args) {
    const char *flare = getenv("FLARE_BIN");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "echo hi > /tmp/flare_http_case.txt; %s agents run /tmp/flare_http_case.txt %s "
             ">/dev/null 2>&1", flare, args);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void test_cli_usage(void **state) {
    (void)state;
    TU_NEED(getenv("FLARE_BIN"), "the flare binary (FLARE_BIN; tests/run.sh sets it)");
    char args[256];
    snprintf(args, sizeof args, "--target http://127.0.0.1:%d/array", g_port);
    assert_int_equal(flare_rc(args), 0);
    assert_int_equal(flare_rc(""), 2);                                     /* no target at all */
    snprintf(args, sizeof args, "--target http://127.0.0.1:%d/array -- /bin/cat", g_port);
    assert_int_equal(flare_rc(args), 2);                                   /* both */
    assert_int_equal(flare_rc("--target ftp://127.0.0.1/"), 1);
    assert_int_equal(flare_rc("--target http://127.0.0.1:9/ --response pointer"), 1);
    assert_int_equal(flare_rc("--target http://127.0.0.1:9/ --body-template /nonexistent"), 1);
    unlink("/tmp/flare_http_case.txt");
}

/* ---- a campaign against the example server ------------------------------------------------- */
static int count_files(const char *dir) {
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "ls %s/*.json 2>/dev/null | wc -l", dir);
    FILE *f = popen(cmd, "r");
    int n = 0;
    if (f && fscanf(f, "%d", &n) != 1) n = 0;
    if (f) pclose(f);
    return n;
}

static void test_campaign_example_server(void **state) {
    (void)state;
    const char *flare = getenv("FLARE_BIN");
    TU_NEED(flare && strrchr(flare, '/'), "the flare binary as a path (FLARE_BIN; tests/run.sh sets it)");
    char dir[1024], server[1100], taskforce[1100];
    snprintf(dir, sizeof dir, "%.*s/examples", (int)(strrchr(flare, '/') - flare), flare);
    snprintf(server, sizeof server, "%s/agents-http", dir);
    snprintf(taskforce, sizeof taskforce, "%s/taskforce", dir);
    if (access(server, X_OK) || access(taskforce, X_OK)) fail_msg("%s or %s missing (make all)", server, taskforce);
    int out[2];
    assert_int_equal(pipe(out), 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(out[1], 1);
        close(out[0]);
        int null = open("/dev/null", O_WRONLY); /* taskforce's crash messages */
        if (null >= 0) dup2(null, 2);
        execl(server, server, "-t", "3000", "--", taskforce, (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    FILE *f = fdopen(out[0], "r");
    char line[256] = "";
    assert_non_null(fgets(line, sizeof line, f));
    char *url = strstr(line, "http://");
    assert_non_null(url);
    url[strcspn(url, "\n")] = 0;

    char tmp[] = "/tmp/flare_http_camp_XXXXXX";
    assert_non_null(mkdtemp(tmp));
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "%s agents fuzz -i examples/agents/seeds -o %s/out --spec examples/agents/spec.json "
             "-E 200 -T 2000 -s 1 -j 2 -q --target %s > %s/log 2>&1", flare, tmp, url, tmp);
    int rc = system(cmd);
    char sub[1200];
    snprintf(sub, sizeof sub, "%s/out/failures/crash", tmp);
    int crashes = count_files(sub);
    snprintf(sub, sizeof sub, "%s/out/failures/forbidden_output", tmp);
    int leaks = count_files(sub);
    printf("campaign over HTTP: rc %d, %d crash and %d leak findings\n", rc, crashes, leaks);
    /* and replay through the same server: the saved crash still crashes */
    snprintf(cmd, sizeof cmd, "%s agents replay %s/out/failures/crash -q --target %s > %s/replay 2>&1",
             flare, tmp, url, tmp);
    int rrc = system(cmd);
    /* and min: a shrunk crash that still crashes, recording the URL as its target */
    snprintf(cmd, sizeof cmd, "f=$(ls %s/out/failures/crash/*.json | head -1); %s agents min \"$f\" "
             "-q --max-runs 100 -o %s/min.json --target %s > %s/min 2>&1 && grep -q '\"target\":.*%s' "
             "%s/min.json", tmp, flare, tmp, url, tmp, url, tmp);
    int mrc = system(cmd);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    fclose(f);
    assert_int_equal(rc, 0);
    assert_true(crashes >= 1);
    assert_true(leaks >= 1);
    assert_int_equal(WEXITSTATUS(rrc), 1); /* still failing */
    assert_int_equal(mrc, 0);
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    assert_int_equal(system(cmd), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_array_and_headers),
        cmocka_unit_test(test_jsonl_implicit_done),
        cmocka_unit_test(test_empty_after_full),
        cmocka_unit_test(test_pointer),
        cmocka_unit_test(test_json_pointer_rfc6901),
        cmocka_unit_test(test_template),
        cmocka_unit_test(test_statuses),
        cmocka_unit_test(test_timeout_and_cap),
        cmocka_unit_test(test_refused_retries),
        cmocka_unit_test(test_confinement),
        cmocka_unit_test(test_cli_usage),
        cmocka_unit_test(test_campaign_example_server),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
