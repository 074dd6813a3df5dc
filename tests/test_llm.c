/* The LLM client, generator and judge against the scripted stub server (llm_stub.c). */
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "flare/agents/agcov.h"
#include "flare/agents/campaign.h"
#include "flare/agents/llm.h"
#include "agents/campaign/campaign_int.h"
#include "llm_stub.c"

#define KEY "sk-test-NEVER-ON-DISK-4242"

static char tmpdir[256];

static void mktmp(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/flare_llm_XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
}

static void rmrf(const char *p) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", p);
    assert_int_equal(system(cmd), 0);
}

/* Does any file under dir contain s? */
static int tree_contains(const char *dir, const char *s) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *x;
    int hit = 0;
    while (!hit && (x = readdir(d))) {
        if (x->d_name[0] == '.') continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, x->d_name);
        struct stat sb;
        if (stat(p, &sb)) continue;
        if (S_ISDIR(sb.st_mode)) { hit = tree_contains(p, s); continue; }
        uint8_t *buf;
        size_t n;
        fl_err e;
        if (fl_file_read(p, &buf, &n, &e)) continue;
        hit = memmem(buf, n, s, strlen(s)) != NULL;
        free(buf);
    }
    closedir(d);
    return hit;
}

static fl_llm *client(stub *s, const char *cache, void (*tweak)(fl_llm_opts *)) {
    fl_llm_opts o;
    fl_llm_opts_default(&o);
    o.base_url = s->url;
    o.model = "stub-model";
    o.seed = 7;
    o.cache_dir = cache;
    o.backoff_ms = 10;
    o.max_backoff_ms = 2000;
    o.timeout_ms = 3000;
    if (tweak) tweak(&o);
    fl_llm *l;
    fl_err e = {0};
    if (fl_llm_new(&o, &l, &e)) fail_msg("fl_llm_new: %s", e.msg);
    return l;
}

static const fl_llm_msg hello[2] = {{"system", "be brief"}, {"user", "hello"}};

static void test_happy_and_cache(void **st) {
    (void)st;
    mktmp();
    setenv("FLARE_LLM_API_KEY", KEY, 1);
    stub *s = stub_start();
    stub_push_chat(s, "hi there", 30);
    char cache[300];
    snprintf(cache, sizeof cache, "%s/cache", tmpdir);
    fl_llm *l = client(s, cache, NULL);
    char *r;
    fl_err e = {0};
    assert_int_equal(fl_llm_chat(l, 2, hello, 1, &r, &e), FL_OK);
    assert_string_equal(r, "hi there");
    free(r);
    assert_int_equal(stub_count(s), 1);
    assert_non_null(strstr(s->req_path[0], "/v1/chat/completions"));
    assert_non_null(strstr(stub_head(s, 0), "Authorization: Bearer " KEY));
    cJSON *b = cJSON_Parse(stub_body(s, 0));
    assert_string_equal(cJSON_GetObjectItem(b, "model")->valuestring, "stub-model");
    assert_int_equal(cJSON_GetObjectItem(b, "seed")->valueint, 7);
    assert_true(fabs(cJSON_GetObjectItem(b, "temperature")->valuedouble - 0.7) < 1e-9);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(b, "response_format"), "type")->valuestring, "json_object");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(b, "messages")), 2);
    cJSON_Delete(b);
    /* the same request again: served by the cache, no HTTP, no budget */
    assert_int_equal(fl_llm_chat(l, 2, hello, 1, &r, &e), FL_OK);
    assert_string_equal(r, "hi there");
    free(r);
    assert_int_equal(stub_count(s), 1);
    fl_llm_stats ls;
    fl_llm_stats_get(l, &ls);
    assert_int_equal(ls.calls, 1);
    assert_int_equal(ls.cache_hits, 1);
    assert_int_equal(ls.tokens, 30);
    fl_llm_free(l);
    /* a new client over the same folder (a repeated campaign) costs nothing either */
    l = client(s, cache, NULL);
    assert_int_equal(fl_llm_chat(l, 2, hello, 1, &r, &e), FL_OK);
    free(r);
    assert_int_equal(stub_count(s), 1);
    /* without json mode it is another request */
    stub_push_chat(s, "plain", 5);
    assert_int_equal(fl_llm_chat(l, 2, hello, 0, &r, &e), FL_OK);
    assert_string_equal(r, "plain");
    free(r);
    assert_int_equal(stub_count(s), 2);
    assert_null(strstr(stub_body(s, 1), "response_format"));
    fl_llm_free(l);
    /* the key is in no file of the cache */
    assert_false(tree_contains(cache, KEY));
    assert_true(tree_contains(cache, "hi there"));
    stub_stop(s);
    rmrf(tmpdir);
    unsetenv("FLARE_LLM_API_KEY");
}

static void calls2(fl_llm_opts *o) { o->max_calls = 2; }
static void tokens100(fl_llm_opts *o) { o->max_tokens = 100; }

static void test_budget(void **st) {
    (void)st;
    stub *s = stub_start();
    stub_set_default_chat(s, "ok", 60);
    fl_err e = {0};
    char *r;
    for (int which = 0; which < 2; which++) {
        int n0 = stub_count(s);
        fl_llm *l = client(s, NULL, which ? tokens100 : calls2);
        for (int i = 0; i < 5; i++) {
            fl_llm_msg m[1] = {{"user", i == 0 ? "a" : i == 1 ? "b" : i == 2 ? "c" : "d"}};
            fl_status x = fl_llm_chat(l, 1, m, 0, &r, &e);
            if (i < 2) {
                assert_int_equal(x, FL_OK);
                free(r);
            } else {
                assert_int_equal(x, FL_ERR_IO);
                assert_null(r);
                assert_non_null(strstr(e.msg, "budget exhausted"));
            }
        }
        assert_true(fl_llm_exhausted(l));
        assert_int_equal(stub_count(s) - n0, 2); /* calls: 2; tokens: 60 + 60 >= 100 */
        fl_llm_free(l);
    }
    stub_stop(s);
}

static void test_retries(void **st) {
    (void)st;
    stub *s = stub_start();
    fl_err e = {0};
    char *r;
    fl_llm *l = client(s, NULL, NULL);
    /* 429 with Retry-After: 1 -> waits about a second, then succeeds */
    stub_push(s, (stub_reply){.status = 429, .body = strdup("{\"error\":\"slow down\"}"), .retry_after = 1});
    stub_push_chat(s, "after 429", 3);
    double t0 = fl_now();
    assert_int_equal(fl_llm_chat(l, 2, hello, 0, &r, &e), FL_OK);
    double dt = fl_now() - t0;
    assert_string_equal(r, "after 429");
    free(r);
    assert_true(dt >= 0.9);
    assert_true(dt < 2.5);
    assert_int_equal(stub_count(s), 2);
    /* 500, 503 then success */
    stub_push(s, (stub_reply){.status = 500, .body = strdup("oops")});
    stub_push(s, (stub_reply){.status = 503, .body = strdup("busy")});
    stub_push_chat(s, "after 5xx", 3);
    fl_llm_msg m2[1] = {{"user", "second"}};
    assert_int_equal(fl_llm_chat(l, 1, m2, 0, &r, &e), FL_OK);
    assert_string_equal(r, "after 5xx");
    free(r);
    assert_int_equal(stub_count(s), 5);
    /* 400 is not retried */
    stub_push(s, (stub_reply){.status = 400, .body = strdup("{\"error\":\"bad\"}")});
    fl_llm_msg m3[1] = {{"user", "third"}};
    assert_int_equal(fl_llm_chat(l, 1, m3, 0, &r, &e), FL_ERR_IO);
    assert_non_null(strstr(e.msg, "HTTP 400"));
    assert_int_equal(stub_count(s), 6);
    /* a disconnect mid-body is retried */
    stub_push(s, (stub_reply){.status = 200, .body = stub_chat_body("never whole", 3), .disconnect = 1});
    stub_push_chat(s, "whole", 3);
    fl_llm_msg m4[1] = {{"user", "fourth"}};
    assert_int_equal(fl_llm_chat(l, 1, m4, 0, &r, &e), FL_OK);
    assert_string_equal(r, "whole");
    free(r);
    assert_int_equal(stub_count(s), 8);
    /* a 200 that is not a completion: asked once more, then given up (nothing cached) */
    stub_push(s, (stub_reply){.status = 200, .body = strdup("<html>garbage")});
    stub_push(s, (stub_reply){.status = 200, .body = strdup("{\"choices\":[]}")});
    fl_llm_msg m5[1] = {{"user", "fifth"}};
    assert_int_equal(fl_llm_chat(l, 1, m5, 0, &r, &e), FL_ERR_IO);
    assert_int_equal(stub_count(s), 10);
    fl_llm_stats ls;
    fl_llm_stats_get(l, &ls);
    assert_int_equal(ls.calls, 10);
    assert_int_equal(ls.retries, 4); /* 429, 500, 503, disconnect */
    assert_int_equal(ls.failures, 2);
    fl_llm_free(l);
    stub_stop(s);
}

static void slow(fl_llm_opts *o) { o->timeout_ms = 300, o->retries = 1; }

static void test_timeout(void **st) {
    (void)st;
    stub *s = stub_start();
    stub_push(s, (stub_reply){.status = 200, .body = stub_chat_body("late", 1), .delay_ms = 1500});
    stub_push(s, (stub_reply){.status = 200, .body = stub_chat_body("late", 1), .delay_ms = 1500});
    fl_llm *l = client(s, NULL, slow);
    fl_err e = {0};
    char *r;
    double t0 = fl_now();
    assert_int_equal(fl_llm_chat(l, 2, hello, 0, &r, &e), FL_ERR_IO);
    assert_true(fl_now() - t0 < 1.4);
    assert_non_null(strstr(e.msg, "imeout"));
    fl_llm_free(l);
    stub_stop(s); /* the stub cuts its waits short */
    /* an address nobody listens on: connection refused, retried, then an error */
    fl_llm_opts o;
    fl_llm_opts_default(&o);
    o.base_url = "http://127.0.0.1:1/v1/";
    o.model = "m";
    o.retries = 1;
    o.backoff_ms = 1;
    assert_int_equal(fl_llm_new(&o, &l, &e), FL_OK);
    assert_int_equal(fl_llm_chat(l, 2, hello, 0, &r, &e), FL_ERR_IO);
    assert_non_null(strstr(e.msg, "127.0.0.1:1/v1/chat/completions"));
    fl_llm_free(l);
    /* bad options */
    o.base_url = "file:///etc/passwd";
    assert_int_equal(fl_llm_new(&o, &l, &e), FL_ERR_ARG);
    o.base_url = "http://user:" KEY "@127.0.0.1:1";
    assert_int_equal(fl_llm_new(&o, &l, &e), FL_ERR_ARG);
    assert_null(strstr(e.msg, KEY));
    o.base_url = "http://x";
    o.model = NULL;
    assert_int_equal(fl_llm_new(&o, &l, &e), FL_ERR_ARG);
}

static void test_embed(void **st) {
    (void)st;
    stub *s = stub_start();
    stub_push(s, (stub_reply){.status = 200, .body = strdup("{\"data\":[{\"embedding\":[0.5,-1,2]}],\"usage\":{\"total_tokens\":4}}")});
    fl_llm *l = client(s, NULL, NULL);
    float *v;
    int dim;
    fl_err e = {0};
    assert_int_equal(fl_llm_embed(l, "some output", &v, &dim, &e), FL_OK);
    assert_int_equal(dim, 3);
    assert_true(v[0] == 0.5f && v[1] == -1.f && v[2] == 2.f);
    free(v);
    assert_non_null(strstr(s->req_path[0], "/v1/embeddings"));
    assert_non_null(strstr(stub_body(s, 0), "some output"));
    fl_llm_free(l);
    stub_stop(s);
}

/* Parse r; the cases' first turns joined by "|" (turns of one case by "/"); "" when none. */
static const char *parsed(const char *r, int *n) {
    static char buf[2048];
    fl_case **v;
    *n = fl_llm_gen_parse(r, &v);
    buf[0] = 0;
    for (int i = 0; i < *n; i++) {
        for (int t = 0; t < v[i]->n_turns; t++)
            snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s", t ? "/" : i ? "|" : "", v[i]->turns[t]);
        fl_case_free(v[i]);
    }
    if (*n > 0) free(v);
    return buf;
}

static void test_gen_parse(void **st) {
    (void)st;
    int n;
    /* the requested JSON; items that are not instructions are skipped */
    assert_string_equal(parsed("{\"instructions\": [\"add 2 and 2\", [\"hi\", \"now loop\"], 5, \"\"]}", &n),
                        "add 2 and 2|hi/now loop");
    assert_int_equal(n, 2);
    /* in a fence with a language tag, text around it */
    assert_string_equal(parsed("Sure! Here you go:\n```json\n{\"instructions\": [\"a b\", \"c d\"]}\n```\nHope it helps.", &n),
                        "a b|c d");
    /* in a fence without a tag; the object is followed by a remark inside the fence */
    assert_string_equal(parsed("```\n{\"instructions\": [\"x y\"]}\nthat is all\n```", &n), "x y");
    /* a bare array, another key, objects as items */
    assert_string_equal(parsed("[\"one\", [\"two\", \"three\"]]", &n), "one|two/three");
    assert_string_equal(parsed("{\"cases\": [{\"instruction\": \"book it\"}, {\"turns\": [\"a\", \"b\"]}]}", &n),
                        "book it|a/b");
    /* a brace in the prose before the JSON does not hide it */
    assert_string_equal(parsed("Use {curly} style? No: {\"instructions\": [\"ok then\"]}", &n), "ok then");
    /* a numbered list, its preamble and remark dropped, markers and quotes stripped */
    assert_string_equal(parsed("Here are some test inputs:\n1. Refund my order 42\n2) \"Cancel it, now\"\n"
                               "3. 退款\n\nLet me know if you need more.", &n),
                        "Refund my order 42|Cancel it, now|退款");
    assert_int_equal(n, 3);
    /* bullets, in a fence */
    assert_string_equal(parsed("```text\n- reset my password\n* where is my parcel\n• 帮我查订单\n```", &n),
                        "reset my password|where is my parcel|帮我查订单");
    /* plain lines without markers: each line of two words or more, the ':' line dropped */
    assert_string_equal(parsed("Some ideas:\nbook a flight to Oslo\ncancel the hotel\n", &n),
                        "book a flight to Oslo|cancel the hotel");
    /* garbage: no cases */
    assert_string_equal(parsed("Sure! Here are some ideas: ...", &n), "");
    assert_int_equal(n, -1);
    const char *garbage[] = {"", "   \n\n", "not json", "{\"instr\": 5}", "{\"instructions\": []}",
                             "{\"instructions\": [1, 2]}", "<html>\n<body>\n</body>", "```\n```",
                             "{\"instructions\": [\"trunc", NULL};
    for (int i = 0; garbage[i]; i++) {
        parsed(garbage[i], &n);
        if (n != -1) fail_msg("garbage %d gave %d cases", i, n);
    }
    fl_case **v;
    assert_int_equal(fl_llm_gen_parse(NULL, &v), -1);
}

static const char gap_spec[] =
    "{\"agents\":[{\"name\":\"Master\",\"description\":\"routes each request\","
    "\"decisions\":{\"route\":[\"math\",\"chat\"]}},"
    "{\"name\":\"Worker\",\"description\":\"does arithmetic with its calculator\",\"tools\":[\"calculate\"]}],"
    "\"entry\":\"Master\",\"edges\":[[\"user\",\"Master\"],[\"Master\",\"Worker\"],[\"Worker\",\"Master\"],"
    "[\"Master\",\"output\"]]}";

/* A trace of the agents protocol from lines joined by '\n'. */
static fl_trace *trace_of(const char *text) {
    fl_trace *t = fl_trace_new();
    int done = 0, k = 0;
    for (const char *p = text; *p; k++) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        assert_int_equal(fl_trace_feed_line(t, p, n, k, &done), FL_OK);
        p += n + (e != NULL);
    }
    return t;
}

static int occurrences(const char *s, const char *w) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, w)); p += strlen(w)) n++;
    return n;
}

/* The prompt names one gap at a time, with the descriptions, and rotates through the gaps. */
static void test_gen_prompt(void **st) {
    (void)st;
    fl_spec *sp;
    fl_err e = {0};
    assert_int_equal(fl_spec_parse(gap_spec, strlen(gap_spec), "s.json", &sp, &e), FL_OK);
    assert_string_equal(sp->agents[1].description, "does arithmetic with its calculator");
    fl_agcov *cov;
    assert_int_equal(fl_agcov_new(sp, NULL, &cov, &e), FL_OK);
    /* seen: user->Master, the choice chat, Master->output. Gaps, in order (edges, then per
     * agent its tools and choices): Master->Worker, Worker->Master, math, calculate */
    fl_trace *t = trace_of("{\"event\":\"message\",\"from\":\"user\",\"to\":\"Master\",\"content\":\"hi\"}\n"
                           "{\"event\":\"branch\",\"agent\":\"Master\",\"point\":\"route\",\"choice\":\"chat\"}\n"
                           "{\"event\":\"output\",\"content\":\"hello\"}\n{\"event\":\"done\"}");
    int n_new;
    assert_true(fl_agcov_commit(cov, t, &n_new) > 0);
    fl_trace_free(t);
    assert_int_equal(fl_llm_gen_gap_count(sp, cov), 4);
    assert_int_equal(fl_llm_gen_gap_count(sp, NULL), 7);
    assert_int_equal(fl_llm_gen_gap_count(NULL, NULL), 0);
    const char *t0 = "compute 1+1";
    fl_case *seed = fl_case_new(1, &t0);
    const fl_case *corpus[1] = {seed};
    const char *finds[1] = {"loop: Master<->Worker"};
    fl_llm_gen_in g = {.spec = sp, .cov = cov, .findings = finds, .n_findings = 1, .corpus = corpus,
                       .n_corpus = 1, .n_want = 3};
    const char *want[5] = {"Target: agent Master handing the work over to agent Worker.",
                           "Target: agent Worker handing the work over to agent Master.",
                           "Target: agent Master deciding route = math (its choices: math, chat).",
                           "Target: agent Worker calling its tool calculate.",
                           "Target: agent Master handing the work over to agent Worker."};
    char *sys[5], *usr;
    for (int i = 0; i < 5; i++) {
        g.round = (uint64_t)i;
        assert_int_equal(fl_llm_gen_prompt(&g, &sys[i], &usr, &e), FL_OK);
        if (!strstr(usr, want[i])) fail_msg("round %d: no \"%s\" in:\n%s", i, want[i], usr);
        assert_int_equal(occurrences(usr, "Target:"), 1);
        assert_non_null(strstr(usr, "1 of 4 coverage gaps"));
        assert_non_null(strstr(usr, "compute 1+1"));
        assert_non_null(strstr(usr, "loop: Master<->Worker"));
        assert_non_null(strstr(usr, "Write 3 new"));
        if (i == 0 || i == 1) { /* an edge: both agents described */
            assert_non_null(strstr(usr, "Master: \"routes each request\""));
            assert_non_null(strstr(usr, "Worker: \"does arithmetic with its calculator\""));
        }
        if (i == 2) assert_null(strstr(usr, "calculator")); /* only the deciding agent */
        if (i == 3) assert_null(strstr(usr, "routes each request"));
        free(usr);
    }
    /* personas rotate with the round */
    assert_non_null(strstr(sys[0], "demanding"));
    assert_non_null(strstr(sys[1], "novice"));
    assert_non_null(strstr(sys[2], "adversarial"));
    for (int i = 0; i < 5; i++) free(sys[i]);
    assert_string_equal(fl_llm_persona_name(2), "attacker");
    /* no spec: no target */
    g.spec = NULL, g.cov = NULL;
    assert_int_equal(fl_llm_gen_prompt(&g, &sys[0], &usr, &e), FL_OK);
    assert_null(strstr(usr, "Target:"));
    free(sys[0]), free(usr);
    fl_case_free(seed);
    fl_agcov_free(cov);
    fl_spec_free(sp);
}

/* Run fn with stderr going to a file; its text (malloc'd). */
static char *stderr_of(void (*fn)(void *), void *arg) {
    char path[] = "/tmp/flare_llm_err_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    int v = fl_verbosity;
    fl_verbosity = 1; /* the default level */
    fn(arg);
    fl_verbosity = v;
    fflush(stderr);
    dup2(saved, 2);
    close(saved), close(fd);
    uint8_t *d;
    size_t n;
    fl_err e;
    assert_int_equal(fl_file_read(path, &d, &n, &e), FL_OK);
    unlink(path);
    char *s = malloc(n + 1);
    memcpy(s, d, n), s[n] = 0;
    free(d);
    return s;
}

static void every_half_s(fl_llm_opts *o) { o->log_every_s = 0.5, o->retries = 0, o->max_calls = 12; }

static void say_run(void *arg) {
    stub *s = arg;
    fl_llm *l = client(s, NULL, every_half_s);
    fl_err e = {0};
    fl_case **v;
    int n;
    fl_llm_gen_in g = {.n_want = 2};
    /* 3 rounds of garbage (2 calls each): one malformed message, 2 held back */
    for (int i = 0; i < 3; i++) {
        g.round = (uint64_t)i;
        assert_int_equal(fl_llm_generate(l, &g, &v, &n, &e), FL_OK);
        assert_int_equal(n, 0);
    }
    /* 2 HTTP errors: said once, the second held back */
    for (int i = 0; i < 2; i++) {
        fl_llm_msg m[1] = {{"user", i ? "x1" : "x0"}};
        char *r;
        assert_int_equal(fl_llm_chat(l, 1, m, 0, &r, &e), FL_ERR_IO);
    }
    usleep(600 * 1000); /* past the interval: the next one is said, with the count */
    g.round = 9;
    assert_int_equal(fl_llm_generate(l, &g, &v, &n, &e), FL_OK);
    fl_llm_stats ls;
    fl_llm_stats_get(l, &ls);
    assert_int_equal(ls.malformed, 4);
    assert_int_equal(ls.failures, 2);
    /* the budget (12 calls, 10 spent): the next round spends it; then refused, said once */
    for (int i = 0; i < 3; i++) {
        g.round = (uint64_t)(20 + i);
        fl_status x = fl_llm_generate(l, &g, &v, &n, &e);
        assert_int_equal(x, i == 0 ? FL_OK : FL_ERR_IO);
    }
    assert_true(fl_llm_exhausted(l));
    fl_llm_free(l); /* says the one budget message held back */
}

static void unreachable_run(void *arg) {
    stub *s = arg;
    fl_llm_opts o;
    fl_llm_opts_default(&o);
    o.base_url = "http://127.0.0.1:1";
    o.model = "m", o.retries = 0;
    fl_llm *l;
    fl_err e = {0};
    char *r;
    assert_int_equal(fl_llm_new(&o, &l, &e), FL_OK);
    assert_int_equal(fl_llm_chat(l, 2, hello, 0, &r, &e), FL_ERR_IO);
    fl_llm_free(l);
    o.base_url = s->url, o.timeout_ms = 200;
    assert_int_equal(fl_llm_new(&o, &l, &e), FL_OK);
    assert_int_equal(fl_llm_chat(l, 2, hello, 0, &r, &e), FL_ERR_IO);
    fl_llm_free(l);
}

/* Malformed replies, HTTP errors and the budget are said at the default level, each kind at
 * most once per interval, with the count of those held back. */
static void test_say(void **st) {
    (void)st;
    stub *s = stub_start();
    for (int i = 0; i < 6; i++) stub_push_chat(s, i % 2 ? "no idea" : "Sure! Here are some ideas: ...", 5);
    stub_push(s, (stub_reply){.status = 400, .body = strdup("{\"error\":\"bad model\"}")});
    stub_push(s, (stub_reply){.status = 404, .body = strdup("{\"error\":\"nope\"}")});
    for (int i = 0; i < 4; i++) stub_push_chat(s, "Well...", 5);
    char *err = stderr_of(say_run, s);
    assert_int_equal(occurrences(err, "llm generator: no usable instruction"), 2);
    assert_non_null(strstr(err, "(2 more like it held back since the last one)"));
    assert_int_equal(occurrences(err, "HTTP 4"), 1);
    assert_non_null(strstr(err, "HTTP 400"));
    assert_int_equal(occurrences(err, "budget exhausted"), 1);
    assert_non_null(strstr(err, "llm: 1 more budget message held back"));
    assert_non_null(strstr(err, "llm: 1 more request-failure message held back"));
    free(err);
    /* a refused connection and a timeout are request failures too, said at the default level */
    stub_push(s, (stub_reply){.status = 200, .body = stub_chat_body("late", 1), .delay_ms = 1500});
    err = stderr_of(unreachable_run, s);
    assert_non_null(strstr(err, "llm http://127.0.0.1:1/v1/chat/completions: Couldn't connect"));
    assert_non_null(strstr(err, "/v1/chat/completions: Timeout was reached"));
    free(err);
    stub_stop(s);
}

static void test_generate(void **st) {
    (void)st;
    fl_spec *sp;
    fl_err e = {0};
    assert_int_equal(fl_spec_parse(gap_spec, strlen(gap_spec), "s.json", &sp, &e), FL_OK);
    fl_llm_gen_in g = {.spec = sp, .n_want = 3};
    stub *s = stub_start();
    fl_llm *l = client(s, NULL, NULL);
    fl_case **v;
    int n;
    /* garbage, then the right schema: the retry carries a correction */
    stub_push_chat(s, "Sure! Here are some ideas: ...", 10);
    stub_push_chat(s, "{\"instructions\":[\"route this to chat\",\"use calculate on 3*4\"]}", 10);
    assert_int_equal(fl_llm_generate(l, &g, &v, &n, &e), FL_OK);
    assert_int_equal(n, 2);
    assert_string_equal(v[1]->turns[0], "use calculate on 3*4");
    for (int i = 0; i < n; i++) fl_case_free(v[i]);
    free(v);
    assert_int_equal(stub_count(s), 2);
    assert_non_null(strstr(stub_body(s, 1), "not the requested JSON"));
    /* no cases twice: the round gives nothing, counted as malformed */
    stub_push_chat(s, "{\"ideas\":\"x\"}", 10);
    stub_push_chat(s, "I cannot help with that.", 10);
    g.round = 1;
    assert_int_equal(fl_llm_generate(l, &g, &v, &n, &e), FL_OK);
    assert_int_equal(n, 0);
    assert_null(v);
    assert_int_equal(stub_count(s), 4);
    fl_llm_stats ls;
    fl_llm_stats_get(l, &ls);
    assert_int_equal(ls.malformed, 1);
    /* the stand-in model answers from the prompt's target */
    s->fn = stub_model_gen;
    g.round = 1; /* gap 1 of 7 with nothing seen: Master -> Worker */
    assert_int_equal(fl_llm_generate(l, &g, &v, &n, &e), FL_OK);
    assert_int_equal(n, 4);
    assert_non_null(strstr(v[0]->turns[0], "master worker"));
    assert_non_null(strstr(v[0]->turns[0], "arithmetic")); /* from a description */
    assert_int_equal(v[3]->n_turns, 2);
    for (int i = 0; i < n; i++) fl_case_free(v[i]);
    free(v);
    fl_llm_free(l);
    stub_stop(s);
    fl_spec_free(sp);
}

static fl_trace *small_trace(void) {
    fl_trace *t = fl_trace_new();
    int done = 0;
    const char *lines[] = {"{\"type\":\"message\",\"from\":\"user\",\"to\":\"Master\",\"content\":\"2+2\"}",
                           "{\"type\":\"output\",\"content\":\"5\"}", "{\"type\":\"done\"}"};
    for (int i = 0; i < 3; i++) assert_int_equal(fl_trace_feed_line(t, lines[i], strlen(lines[i]), i, &done), FL_OK);
    return t;
}

#define V(anom, conf, cats) "{\"is_anomaly\":" #anom ",\"confidence\":" #conf ",\"categories\":[" cats "],\"reason\":\"2+2 is not 5\"}"

static void test_judge(void **st) {
    (void)st;
    fl_llm_verdict v;
    assert_int_equal(fl_llm_verdict_parse(V(true, 0.9, "\"logical_inconsistency\""), &v), 0);
    assert_true(v.is_anomaly && v.confidence == 0.9 && v.categories == 1u << FL_JUDGE_LOGICAL_INCONSISTENCY);
    assert_int_equal(fl_llm_verdict_parse(V(true, 1.5, ""), &v), -1);
    assert_int_equal(fl_llm_verdict_parse(V(true, 0.9, "\"bogus\""), &v), -1);
    assert_int_equal(fl_llm_verdict_parse("{\"is_anomaly\":\"yes\",\"confidence\":1}", &v), -1);
    assert_int_equal(fl_llm_verdict_parse("nope", &v), -1);

    const char *t0 = "what is 2+2";
    fl_case *c = fl_case_new(1, &t0);
    fl_trace *t = small_trace();
    stub *s = stub_start();
    fl_llm *l = client(s, NULL, NULL);
    fl_err e = {0};
    fl_finding f;
    int found;
    /* one vote: above the threshold -> a finding */
    fl_llm_judge_opts jo = {.threshold = 0.8, .votes = 1};
    stub_push_chat(s, V(true, 0.9, "\"logical_inconsistency\",\"goal_deviation\""), 50);
    assert_int_equal(fl_llm_judge(l, NULL, c, t, &jo, &f, &found, &e), FL_OK);
    assert_int_equal(found, 1);
    assert_int_equal(f.kind, FL_FIND_LLM_JUDGE);
    assert_string_equal(f.key, "llm_judge:goal_deviation+logical_inconsistency");
    assert_non_null(strstr(f.message, "2+2 is not 5"));
    assert_string_equal(fl_finding_kind_name(f.kind), "llm_judge");
    assert_non_null(strstr(stub_body(s, 0), "what is 2+2"));
    /* below the threshold -> none */
    jo.threshold = 0.95;
    stub_push_chat(s, V(true, 0.9, "\"goal_deviation\""), 50);
    free(c->turns[0]);
    c->turns[0] = strdup("what is 3+3");
    assert_int_equal(fl_llm_judge(l, NULL, c, t, &jo, &f, &found, &e), FL_OK);
    assert_int_equal(found, 0);
    /* three votes: 2 of 3 agree (one is below the threshold) -> a finding */
    jo.threshold = 0.8, jo.votes = 3;
    free(c->turns[0]);
    c->turns[0] = strdup("what is 4+4");
    stub_push_chat(s, V(true, 0.85, "\"deadlock\""), 50);
    stub_push_chat(s, V(true, 0.5, "\"deadlock\""), 50);
    stub_push_chat(s, V(true, 0.99, "\"deadlock\",\"safety_issue\""), 50);
    int n0 = stub_count(s);
    assert_int_equal(fl_llm_judge(l, NULL, c, t, &jo, &f, &found, &e), FL_OK);
    assert_int_equal(found, 1);
    assert_string_equal(f.key, "llm_judge:deadlock");
    assert_non_null(strstr(f.message, "2 of 3"));
    assert_int_equal(stub_count(s) - n0, 3);
    /* the votes used seeds 7, 8, 9 */
    for (int k = 0; k < 3; k++) assert_int_equal(tu_json_num(stub_body(s, n0 + k), "seed"), 7 + k);
    /* 1 of 3 (one garbage twice = abstention, one "no") -> none; never fatal */
    free(c->turns[0]);
    c->turns[0] = strdup("what is 5+5");
    stub_push_chat(s, V(true, 0.9, "\"deadlock\""), 50);
    stub_push_chat(s, "garbage", 5);
    stub_push_chat(s, "{\"is_anomaly\":maybe}", 5);
    stub_push_chat(s, V(false, 0.9, ""), 50);
    n0 = stub_count(s);
    assert_int_equal(fl_llm_judge(l, NULL, c, t, &jo, &f, &found, &e), FL_OK);
    assert_int_equal(found, 0);
    assert_int_equal(stub_count(s) - n0, 4);
    /* a malformed verdict then a good one (asked again with a correction) */
    jo.votes = 1;
    free(c->turns[0]);
    c->turns[0] = strdup("what is 6+6");
    stub_push_chat(s, "I think it is fine", 5);
    stub_push_chat(s, V(true, 0.81, "\"safety_issue\""), 50);
    assert_int_equal(fl_llm_judge(l, NULL, c, t, &jo, &f, &found, &e), FL_OK);
    assert_int_equal(found, 1);
    assert_string_equal(f.key, "llm_judge:safety_issue");
    fl_llm_free(l);
    stub_stop(s);
    fl_trace_free(t);
    fl_case_free(c);
}

/* ---- the LLM in a tiny campaign ------------------------------------------------------------- */
/* The stub as a model: verdicts for the judge (its system prompt names is_anomaly), else
 * instructions that reach the target's math and search routes and the Checker. */
static char *model(const char *body) {
    if (strstr(body, "\"input\"")) /* /v1/embeddings: a vector that depends on the text */
        return strdup(strlen(body) % 2 ? "{\"data\":[{\"embedding\":[1,0,0.5]}]}"
                                       : "{\"data\":[{\"embedding\":[0,1,0.5]}]}");
    if (strstr(body, "is_anomaly"))
        return stub_chat_body(strstr(body, "Checker") ? V(true, 0.9, "\"deadlock\"") : V(false, 0.9, ""), 40);
    return stub_chat_body("{\"instructions\":[\"please do math\",[\"search cats\",\"please please\"]]}", 40);
}

static int count_files(const char *dir, const char *needle) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *x;
    int n = 0;
    while ((x = readdir(d))) n += x->d_name[0] != '.' && (!needle || strstr(x->d_name, needle));
    closedir(d);
    return n;
}

static int embed_on; /* campaign(): --llm-embed */

/* A fresh tmpdir with the campaign target built as tgt and a seeds folder holding "hello". */
static void campaign_setup(char *tgt, size_t nt, char *seeds, size_t ns) {
    mktmp();
    snprintf(tgt, nt, "%s/tgt", tmpdir);
    assert_int_equal(tu_build_target("campaign_tgt", tgt), 0);
    snprintf(seeds, ns, "%s/seeds", tmpdir);
    mkdir(seeds, 0755);
    char p[700];
    snprintf(p, sizeof p, "%s/a.txt", seeds);
    fl_err e = {0};
    assert_int_equal(fl_file_write_atomic(p, "hello", 5, &e), FL_OK);
}

static void campaign(const char *out, const char *url, const char *cache, int64_t max_calls,
                     const char *tgt, const char *seeds, double share, int plateau) {
    char *argv[] = {(char *)tgt, NULL};
    fl_campaign_opts o;
    fl_campaign_opts_default(&o);
    o.in_dir = seeds, o.out_dir = out, o.argv = argv, o.max_execs = 30, o.seed = 3;
    o.timeout_ms = 3000, o.write_report = 0;
    o.llm_url = url, o.llm_model = "stub", o.llm_cache = cache, o.llm_max_calls = max_calls;
    o.gen_share = share, o.gen_plateau = plateau, o.judge = 1, o.llm_embed = embed_on;
    fl_campaign_result r;
    fl_err e = {0};
    if (fl_campaign_run(&o, &r, &e)) fail_msg("campaign: %s", e.msg);
}

static void test_campaign(void **st) {
    (void)st;
    setenv("OPENAI_API_KEY", KEY, 1);
    char tgt[300], seeds[300], p[700], out[300], cache[300];
    campaign_setup(tgt, sizeof tgt, seeds, sizeof seeds);
    fl_err e = {0};
    snprintf(cache, sizeof cache, "%s/cache", tmpdir);

    stub *s = stub_start();
    s->fn = model;
    snprintf(out, sizeof out, "%s/out1", tmpdir);
    campaign(out, s->url, cache, 100, tgt, seeds, 0.3, 0);
    int calls = stub_count(s);
    assert_true(calls >= 2);
    snprintf(p, sizeof p, "%s/queue", out);
    assert_true(count_files(p, ",op:llm") >= 1);     /* generated inputs kept for coverage */
    snprintf(p, sizeof p, "%s/failures/llm_judge", out);
    assert_int_equal(count_files(p, NULL), 1);        /* the Checker round judged a deadlock */
    snprintf(p, sizeof p, "%s/fuzzer_stats", out);
    uint8_t *txt;
    size_t n;
    assert_int_equal(fl_file_read(p, &txt, &n, &e), FL_OK);
    assert_non_null(memmem(txt, n, "llm_budget_exhausted: 0", 23));
    assert_non_null(memmem(txt, n, "findings_llm_judge", 18));
    assert_non_null(memmem(txt, n, "llm_failures      : 0", 21));
    assert_non_null(memmem(txt, n, "llm_malformed     : 0", 21));
    free(txt);
    od_kv kv;
    assert_int_equal(od_kv_read(p, &kv, &e), FL_OK);
    int gen = atoi(od_kv_get(&kv, "llm_gen_cases")), kept = atoi(od_kv_get(&kv, "llm_gen_kept"));
    snprintf(p, sizeof p, "%s/queue", out);
    assert_true(gen >= kept && kept >= 1);
    assert_int_equal(kept, count_files(p, ",op:llm")); /* kept = its entries in the queue */
    assert_true(atoi(od_kv_get(&kv, "llm_gen_finds")) >= 0);
    od_kv_free(&kv);

    /* the same campaign again: every request is a cache hit */
    snprintf(out, sizeof out, "%s/out2", tmpdir);
    campaign(out, s->url, cache, 100, tgt, seeds, 0.3, 0);
    assert_int_equal(stub_count(s), calls);
    snprintf(p, sizeof p, "%s/failures/llm_judge", out);
    assert_int_equal(count_files(p, NULL), 1);

    /* a small budget without the cache: stops cleanly and says so */
    snprintf(out, sizeof out, "%s/out3", tmpdir);
    campaign(out, s->url, NULL, 2, tgt, seeds, 0.3, 0);
    assert_int_equal(stub_count(s), calls + 2);
    snprintf(p, sizeof p, "%s/fuzzer_stats", out);
    assert_int_equal(fl_file_read(p, &txt, &n, &e), FL_OK);
    assert_non_null(memmem(txt, n, "llm_budget_exhausted: 1", 23));
    free(txt);

    /* plateau only: the generator is asked once coverage stalls for 5 executions */
    snprintf(out, sizeof out, "%s/out4", tmpdir);
    int before = stub_count(s);
    campaign(out, s->url, NULL, 100, tgt, seeds, 0, 5);
    assert_true(stub_count(s) > before);
    snprintf(p, sizeof p, "%s/queue", out);
    assert_true(count_files(p, ",op:llm") >= 1);

    /* --llm-embed: the final outputs are clustered through the server's /v1/embeddings */
    snprintf(out, sizeof out, "%s/out5", tmpdir);
    before = stub_count(s);
    embed_on = 1;
    campaign(out, s->url, NULL, 100, tgt, seeds, 0, 0);
    embed_on = 0;
    int embeds = 0;
    for (int i = before; i < stub_count(s); i++) embeds += strstr(s->req_path[i], "/v1/embeddings") != NULL;
    assert_true(embeds >= 1);

    /* the key is nowhere on disk */
    assert_false(tree_contains(tmpdir, KEY));
    assert_non_null(strstr(stub_head(s, 0), KEY));
    stub_stop(s);
    rmrf(tmpdir);
    unsetenv("OPENAI_API_KEY");
}

/* ---- requests outside the campaign lock ----------------------------------------------------- */
static long execs_now;        /* the campaign's execs, from on_status (every case) */
static long during[8];        /* executions while each generator request was out */
static int n_during;

static void on_execs(const fl_campaign_stats *s, void *user) {
    (void)user;
    __atomic_store_n(&execs_now, (long)s->execs, __ATOMIC_SEQ_CST);
}

/* A slow model: it takes 600 ms to answer, and notes how far the campaign got meanwhile. */
static char *slow_model(const char *body) {
    long e0 = __atomic_load_n(&execs_now, __ATOMIC_SEQ_CST);
    usleep(600 * 1000);
    if (n_during < 8) during[n_during++] = __atomic_load_n(&execs_now, __ATOMIC_SEQ_CST) - e0;
    return stub_model_gen(body);
}

static void test_unlocked(void **st) {
    (void)st;
    char tgt[300], seeds[300], out[300];
    campaign_setup(tgt, sizeof tgt, seeds, sizeof seeds);
    fl_err e = {0};
    stub *s = stub_start();
    s->fn = slow_model;
    for (int jobs = 2; jobs >= 1; jobs--) {
        char *argv[] = {tgt, NULL};
        fl_campaign_opts o;
        fl_campaign_opts_default(&o);
        snprintf(out, sizeof out, "%s/out_j%d", tmpdir, jobs);
        o.in_dir = seeds, o.out_dir = out, o.argv = argv, o.max_execs = 400, o.seed = 3;
        o.timeout_ms = 3000, o.write_report = 0, o.jobs = jobs;
        o.on_status = on_execs, o.status_every = 0;
        o.llm_url = s->url, o.llm_model = "stub", o.llm_max_calls = 1, o.gen_share = 0.5;
        n_during = 0;
        fl_campaign_result r;
        if (fl_campaign_run(&o, &r, &e)) fail_msg("campaign: %s", e.msg);
        assert_int_equal(n_during, 1);
        assert_int_equal(r.stats.llm_calls, 1);
        assert_true(r.stats.llm_gen_cases >= 1 && r.stats.llm_gen_cases <= 4); /* one batch */
        /* -j 2: the other worker ran cases while the request was out; -j 1: nobody could
         * (the measurement itself can tell the two apart) */
        if (jobs == 2 && during[0] < 20) fail_msg("-j 2: %ld executions during the request", during[0]);
        if (jobs == 1) assert_int_equal(during[0], 0);
    }
    stub_stop(s);
    rmrf(tmpdir);
}

/* The command's summary gives the generator's account (the status line uses the same text). */
static void test_cli_summary(void **st) {
    (void)st;
    const char *bin = getenv("FLARE_BIN");
    if (!bin) TU_SKIP("FLARE_BIN is not set (tests/run.sh sets it)");
    char tgt[300], seeds[300];
    campaign_setup(tgt, sizeof tgt, seeds, sizeof seeds);
    stub *s = stub_start();
    s->fn = stub_model_gen;
    char *out;
    int rc = tu_sh(&out, "\"%s\" agents fuzz -i %s -o %s/out -E 40 -T 3000 -s 1 --llm %s "
                         "--llm-model m --gen-share 0.5 -- %s 2>&1",
                   bin, seeds, tmpdir, s->url, tgt);
    if (rc) fail_msg("rc %d: %s", rc, out);
    const char *l = strstr(out, "\nllm: ");
    if (!l || !strstr(l, " calls (0 failed, 0 malformed), ") || !strstr(l, " generated cases: "))
        fail_msg("no llm summary in:\n%s", out);
    free(out);
    stub_stop(s);
    rmrf(tmpdir);
}

int main(void) {
    fl_verbosity = 0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_happy_and_cache), cmocka_unit_test(test_budget),
        cmocka_unit_test(test_retries),         cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_embed),           cmocka_unit_test(test_gen_parse),
        cmocka_unit_test(test_gen_prompt),      cmocka_unit_test(test_say),
        cmocka_unit_test(test_generate),        cmocka_unit_test(test_judge),
        cmocka_unit_test(test_campaign),        cmocka_unit_test(test_unlocked),
        cmocka_unit_test(test_cli_summary),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
