/* A test target that reports through OpenTelemetry only: for each request line it POSTs one
 * OTLP/JSON export (over a raw loopback socket, as an SDK's OTLP/HTTP exporter would) to
 * 127.0.0.1:PORT/v1/traces, waits for the answer, and prints nothing on stdout but
 * {"event":"done"}. The spans continue the request's traceparent:
 *
 *     invoke_agent Planner   (parent: the traceparent's span)
 *       invoke_agent Coder
 *         execute_tool run_code    (status ERROR when the user message contains "fail")
 *
 * usage: otlp_tgt PORT [late]   — "late": the export happens 300 ms after "done".
 * No TRACEPARENT handling for --fresh: the tests run it persistent. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int port;

static void post(const char *body) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa)) {
        fprintf(stderr, "otlp_tgt: cannot connect to port %d\n", port);
        if (fd >= 0) close(fd);
        return;
    }
    char head[256];
    int n = snprintf(head, sizeof head, "POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n", strlen(body));
    if (write(fd, head, (size_t)n) != n || write(fd, body, strlen(body)) != (ssize_t)strlen(body))
        fprintf(stderr, "otlp_tgt: write failed\n");
    char buf[512];
    ssize_t got = read(fd, buf, sizeof buf - 1); /* the status line: the spans are stored */
    if (got < 12 || strncmp(buf + 9, "200", 3)) fprintf(stderr, "otlp_tgt: export refused\n");
    close(fd);
}

static void attr(char *out, size_t n, const char *k, const char *v) {
    size_t l = strlen(out);
    snprintf(out + l, n - l, "%s{\"key\":\"%s\",\"value\":{\"stringValue\":\"%s\"}}",
             out[l - 1] == '[' ? "" : ",", k, v);
}

static void span(char *out, size_t n, const char *tid, const char *id, const char *parent,
                 const char *name, long t0, long t1, const char *op, const char *who_key,
                 const char *who, int error) {
    char attrs[512] = "[";
    attr(attrs, sizeof attrs, "gen_ai.operation.name", op);
    attr(attrs, sizeof attrs, who_key, who);
    size_t l = strlen(out);
    snprintf(out + l, n - l,
             "%s{\"traceId\":\"%s\",\"spanId\":\"%s\",\"parentSpanId\":\"%s\",\"name\":\"%s\","
             "\"kind\":1,\"startTimeUnixNano\":\"%ld\",\"endTimeUnixNano\":\"%ld\","
             "\"attributes\":%s],\"status\":{%s}}",
             out[l - 1] == '[' ? "" : ",", tid, id, parent, name, t0, t1, attrs,
             error ? "\"code\":2,\"message\":\"tool failed\"" : "");
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    port = atoi(argv[1]);
    int late = argc > 2 && !strcmp(argv[2], "late");
    static char line[1 << 16], body[8192];
    while (fgets(line, sizeof line, stdin)) {
        const char *tp = strstr(line, "\"traceparent\":\"");
        char tid[33] = "", parent[17] = "";
        if (tp && strlen(tp) > 15 + 52) {
            memcpy(tid, tp + 15 + 3, 32);
            memcpy(parent, tp + 15 + 36, 16);
        }
        int fail = strstr(line, "fail") != NULL;
        long t0 = 1700000000L * 1000000000L;
        strcpy(body, "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\","
                     "\"value\":{\"stringValue\":\"otlp_tgt\"}}]},\"scopeSpans\":[{\"scope\":"
                     "{\"name\":\"otlp_tgt\"},\"spans\":[");
        /* children first, as SDKs export them (a span is exported when it ends) */
        span(body, sizeof body, tid, "00000000000000c3", "00000000000000c2", "execute_tool run_code",
             t0 + 3000000, t0 + 4000000, "execute_tool", "gen_ai.tool.name", "run_code", fail);
        span(body, sizeof body, tid, "00000000000000c2", "00000000000000c1", "invoke_agent Coder",
             t0 + 2000000, t0 + 5000000, "invoke_agent", "gen_ai.agent.name", "Coder", 0);
        span(body, sizeof body, tid, "00000000000000c1", parent, "invoke_agent Planner",
             t0 + 1000000, t0 + 6000000, "invoke_agent", "gen_ai.agent.name", "Planner", 0);
        strcat(body, "]}]}]}");
        if (!late) post(body);
        printf("{\"event\":\"done\"}\n");
        fflush(stdout);
        if (late) {
            usleep(300000);
            post(body);
        }
    }
    return 0;
}
