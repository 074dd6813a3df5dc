/* The four framework examples (examples/otel-langgraph, otel-openai-agents, otel-vercel-ai,
 * otel-openllmetry: one task force on LangGraph.js + OpenInference, the OpenAI Agents SDK +
 * OpenInference, the Vercel AI SDK's telemetry, OpenLLMetry), each fuzzed by the flare binary
 * through its spans alone (--otlp-listen; the answers from the spans too), the model being
 * the shared deterministic stub examples/otel-common/llm_stub.js on loopback:
 *   - every planted defect is found (tool error reported as success, handoff to the undeclared
 *     translator, the review loop, the leaked key, the empty answer, the undeclared tool);
 *   - every declared edge of spec.json is seen;
 *   - no spec violation other than the planted ones.
 * The stdout variant (--events stdout: answers also as output events) must find the tool
 * error too. Budgets are small (-E 10, the stdout variant -E 3: the 11 seeds hold every
 * trigger, so the seeds' dry run alone must show everything; a few mutants on top check that
 * nothing false comes of them) to keep make test short. Needs node and each example's
 * node_modules (scripts/deps.sh test runs npm ci): missing, the test skips, and fails under
 * CI=true (TU_NEED). Part of make test; `make check-frameworks` runs it alone. */
#include "testutil.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define STUB "examples/otel-common/llm_stub.js"

static int g_node; /* 1: node found, 2: and it is 20 or newer (the frameworks need it) */
static pid_t g_stub = -1;
static int g_stub_port;
static char g_tmp[] = "/tmp/flare_otelfw_XXXXXX";

static const char *flare_bin(void) {
    const char *b = getenv("FLARE_BIN");
    return b && *b ? b : "build/flare";
}

/* Start the stub; its first stdout line is "PORT <n>". */
static int start_stub(void) {
    int fd[2];
    if (pipe(fd) != 0) return -1;
    g_stub = fork();
    if (g_stub < 0) return -1;
    if (g_stub == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        execlp("node", "node", STUB, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    FILE *f = fdopen(fd[0], "r");
    char line[64] = {0};
    int ok = f && fgets(line, sizeof line, f) && sscanf(line, "PORT %d", &g_stub_port) == 1;
    if (f) fclose(f);
    return ok ? 0 : -1;
}

static int setup(void **state) {
    (void)state;
    g_node = system("node --version >/dev/null 2>&1") == 0;
    if (g_node && system("node -e 'process.exit(+process.versions.node.split(\".\")[0] >= 20 ? 0 : 1)'") == 0)
        g_node = 2;
    if (!mkdtemp(g_tmp)) return -1;
    if (g_node && start_stub() != 0) {
        fprintf(stderr, "test_otel_frameworks: cannot start %s\n", STUB);
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    if (g_stub > 0) {
        kill(g_stub, SIGTERM);
        waitpid(g_stub, NULL, 0);
    }
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_tmp);
    return system(cmd) == 0 ? 0 : -1;
}

static int free_port(void) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t n = sizeof a;
    assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(s, (struct sockaddr *)&a, &n), 0);
    close(s);
    return ntohs(a.sin_port);
}

/* The finding keys of a campaign's output folder, one per line. */
static char *finding_keys(const char *out) {
    char *keys = NULL;
    tu_sh(&keys, "cat %s/failures/*/*.json 2>/dev/null | sed -n 's/^\\t\"key\":\\t\"\\(.*\\)\",$/\\1/p' | sort -u",
          out);
    return keys;
}

static int has_key(const char *keys, const char *prefix) {
    size_t n = strlen(prefix);
    for (const char *p = keys; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : "")
        if (!strncmp(p, prefix, n)) return 1;
    return 0;
}

/* The planted handoff and tool are the only spec violations allowed. */
static const char *const PLANTED_SPEC[] = {"spec_violation:agent:translator",
                                           "spec_violation:edge:supervisor>translator",
                                           "spec_violation:edge:translator>supervisor",
                                           "spec_violation:tool:writer/delete_file"};

static void fuzz_example(const char *ex, int stdout_variant) {
    char marker[256];
    snprintf(marker, sizeof marker, "examples/%s/node_modules/.package-lock.json", ex);
    TU_NEED(g_node, "nodejs (node)");
    TU_NEED(g_node == 2, "Node.js 20 or newer (scripts/deps.sh test installs one into build/node where the "
                         "system's is older, as Debian 12's 18 is)");
    TU_NEED(access(marker, R_OK) == 0, "the example's npm packages (scripts/deps.sh test runs npm ci)");
    TU_NEED(access(flare_bin(), X_OK) == 0, "the flare binary (FLARE_BIN; tests/run.sh sets it)");
    char out[512];
    snprintf(out, sizeof out, "%s/%s%s", g_tmp, ex, stdout_variant ? "-stdout" : "");
    int port = free_port();
    char *log = NULL;
    int rc = tu_sh(&log,
                   "OPENAI_BASE_URL=http://127.0.0.1:%d/v1 OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:%d "
                   "timeout 150 %s agents fuzz -i examples/%s/seeds -o %s -s 1 -E %d "
                   "--spec examples/%s/spec.json --otlp-listen 127.0.0.1:%d -- node examples/%s/system.js%s",
                   g_stub_port, port, flare_bin(), ex, out, stdout_variant ? 3 : 10, ex, port, ex,
                   stdout_variant ? " --events stdout" : "");
    printf("%s: exit %d\n%s\n", ex, rc, log);
    free(log);
    assert_true(rc == 0 || rc == 1); /* 1: findings */
    char *keys = finding_keys(out);
    printf("%s findings:\n%s", ex, keys);
    assert_true(has_key(keys, "tool_error:math/calculate"));
    if (!stdout_variant) {
        assert_true(has_key(keys, "spec_violation:agent:translator"));
        assert_true(has_key(keys, "spec_violation:tool:writer/delete_file"));
        assert_true(has_key(keys, "loop:"));
        assert_true(has_key(keys, "forbidden_output:api-key"));
        assert_true(has_key(keys, "empty_output:"));
        char stats[600];
        snprintf(stats, sizeof stats, "%s/fuzzer_stats", out);
        char *st = NULL;
        tu_sh(&st, "sed -n 's/^edges_\\(found\\|allowed\\) *: *//p' %s | tr '\\n' ' '", stats);
        int found = -1, allowed = -2;
        assert_int_equal(sscanf(st, "%d %d", &found, &allowed), 2);
        free(st);
        assert_int_equal(found, allowed); /* every declared edge seen */
        /* Decisions derived from the framework's own LLM spans: the math worker's model chose
         * its calculator (the tool_error case) and the supervisor's chose a route. */
        char *ch = NULL;
        tu_sh(&ch, "cat %s/failures/*/*.json | grep -A1 '\"point\":.\"llm.tool_choice\"' | "
                   "sed -n 's/^.*\"choice\":.\"\\(.*\\)\",*$/\\1/p' | sort -u | tr '\\n' ' '",
              out);
        printf("%s decisions seen: %s\n", ex, ch);
        assert_non_null(strstr(ch, "calculate "));
        assert_non_null(strstr(ch, "route_to_"));
        free(ch);
    }
    for (const char *p = keys; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : "") {
        if (strncmp(p, "spec_violation:", 15)) continue;
        int planted = 0;
        for (size_t i = 0; i < sizeof PLANTED_SPEC / sizeof *PLANTED_SPEC; i++)
            planted |= !strncmp(p, PLANTED_SPEC[i], strlen(PLANTED_SPEC[i])) &&
                       (p[strlen(PLANTED_SPEC[i])] == '\n' || !p[strlen(PLANTED_SPEC[i])]);
        if (!planted) fail_msg("%s: a spec violation that was not planted: %.*s", ex, (int)strcspn(p, "\n"), p);
    }
    free(keys);
}

static void test_langgraph(void **state) { (void)state; fuzz_example("otel-langgraph", 0); }
static void test_openai_agents(void **state) { (void)state; fuzz_example("otel-openai-agents", 0); }
static void test_vercel_ai(void **state) { (void)state; fuzz_example("otel-vercel-ai", 0); }
static void test_openllmetry(void **state) { (void)state; fuzz_example("otel-openllmetry", 0); }
static void test_langgraph_stdout(void **state) { (void)state; fuzz_example("otel-langgraph", 1); }
static void test_openai_agents_stdout(void **state) { (void)state; fuzz_example("otel-openai-agents", 1); }
static void test_vercel_ai_stdout(void **state) { (void)state; fuzz_example("otel-vercel-ai", 1); }
static void test_openllmetry_stdout(void **state) { (void)state; fuzz_example("otel-openllmetry", 1); }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_langgraph),     cmocka_unit_test(test_openai_agents),
        cmocka_unit_test(test_vercel_ai),     cmocka_unit_test(test_openllmetry),
        cmocka_unit_test(test_langgraph_stdout), cmocka_unit_test(test_openai_agents_stdout),
        cmocka_unit_test(test_vercel_ai_stdout), cmocka_unit_test(test_openllmetry_stdout),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
