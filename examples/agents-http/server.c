/* agents-http — an agent system behind HTTP, for `flare agents … --target URL`.
 *
 *     agents-http [-p PORT] [-t MS] [--format array|jsonl|answer] -- CMD ARGS...
 *
 * Wraps any target that speaks flare's JSON-lines protocol (docs/agents-protocol.md; here
 * build/examples/taskforce) as a tiny single-threaded HTTP/1.1 service on 127.0.0.1:
 * `POST /run` with a request JSON body forwards the body as one line to CMD's stdin, collects
 * the event lines up to {"event":"done"} and answers 200 with
 *   array   a JSON array of the events (default),
 *   jsonl   the event lines as they came (application/x-ndjson),
 *   answer  {"answer": "<the last output>", "events": N}  (for --response pointer:/answer).
 * The child dying before "done" is a 500 naming how it died (the child is restarted for the
 * next request); no "done" within -t ms is a 504 (the child is killed); the client hanging up
 * while the child still works kills the child too, so one stuck case cannot hold up the next.
 * Every response closes its connection (Connection: close): simple, and cheap on loopback.
 * The first line on stdout is "listening on http://127.0.0.1:PORT/run" (PORT 0: a free port).
 *
 * This is an example of the shape of a real service, not a web server: one request at a time,
 * Content-Length bodies only, no TLS. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { MAX_HEAD = 65536, MAX_BODY = 8 << 20, MAX_OUT = 4 << 20 };
enum { FMT_ARRAY, FMT_JSONL, FMT_ANSWER };

static char **child_argv;
static pid_t child_pid;
static int child_in = -1, child_out = -1;
static int timeout_ms = 10000, format = FMT_ARRAY;

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ---- the child --------------------------------------------------------------------------- */
static int child_start(void) {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) < 0) return -1;
    if (pipe2(out, O_CLOEXEC) < 0) {
        close(in[0]), close(in[1]);
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        signal(SIGPIPE, SIG_DFL);
        dup2(in[0], 0);
        dup2(out[1], 1);
        execvp(child_argv[0], child_argv);
        _exit(127);
    }
    close(in[0]), close(out[1]);
    child_pid = pid, child_in = in[1], child_out = out[0];
    return 0;
}

/* Kill (if asked) and reap the child; returns its wait status. */
static int child_stop(int kill_it) {
    int status = 0;
    if (!child_pid) return 0;
    close(child_in), close(child_out);
    child_in = child_out = -1;
    if (kill_it) kill(child_pid, SIGKILL);
    while (waitpid(child_pid, &status, 0) < 0 && errno == EINTR) {}
    child_pid = 0;
    return status;
}

/* ---- HTTP -------------------------------------------------------------------------------- */
static void write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return; /* the client is gone */
        p += k, n -= (size_t)k;
    }
}

static void respond(int fd, int status, const char *type, const char *body, size_t n) {
    const char *reason = status == 200 ? "OK" : status == 400 ? "Bad Request"
                       : status == 404 ? "Not Found" : status == 500 ? "Internal Server Error"
                       : status == 502 ? "Bad Gateway" : status == 504 ? "Gateway Timeout" : "Error";
    char head[256];
    int k = snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n", status, reason, type, n);
    write_all(fd, head, (size_t)k);
    write_all(fd, body, n);
}

static void respond_error(int fd, int status, const char *msg) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "error", msg);
    char *s = cJSON_PrintUnformatted(o);
    respond(fd, status, "application/json", s ? s : "{}", s ? strlen(s) : 2);
    free(s);
    cJSON_Delete(o);
}

/* Read the request: head up to the blank line, then Content-Length bytes. The body is
 * malloc'd into *body. Returns 0, or an HTTP status to answer with. */
static int read_request(int fd, char *head, char **body, size_t *blen, char *path, size_t npath) {
    size_t n = 0;
    char *end = NULL;
    while (!end) {
        if (n + 1 >= MAX_HEAD) return 400;
        ssize_t k = read(fd, head + n, MAX_HEAD - 1 - n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        n += (size_t)k;
        head[n] = 0;
        end = strstr(head, "\r\n\r\n");
    }
    char method[16];
    if (sscanf(head, "%15s %255s", method, path) != 2 || npath < 256) return 400;
    size_t len = 0;
    for (char *h = strstr(head, "\r\n"); h && h < end; h = strstr(h + 2, "\r\n"))
        if (!strncasecmp(h + 2, "content-length:", 15)) len = strtoul(h + 17, NULL, 10);
    if (strcmp(method, "POST")) return 404;
    if (len > MAX_BODY) return 400;
    char *b = malloc(len + 1);
    if (!b) return 500;
    size_t have = n - (size_t)(end + 4 - head);
    if (have > len) have = len;
    memcpy(b, end + 4, have);
    while (have < len) {
        ssize_t k = read(fd, b + have, len - have);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            free(b);
            return -1;
        }
        have += (size_t)k;
    }
    b[len] = 0;
    *body = b, *blen = len;
    return 0;
}

/* Whether a line is the done event. */
static int is_done(const char *l, size_t n) {
    cJSON *j = cJSON_ParseWithLength(l, n);
    cJSON *ev = cJSON_GetObjectItemCaseSensitive(j, "event");
    int d = cJSON_IsString(ev) && !strcmp(ev->valuestring, "done");
    cJSON_Delete(j);
    return d;
}

/* ---- one request --------------------------------------------------------------------------- */
/* Send body to the child, collect its lines until done into out. Returns 200, or an error
 * status with a message in why; -1 when the client hung up. */
static int run_case(int client, char *body, size_t blen, char **out, size_t *olen, char *why,
                    size_t nwhy) {
    for (size_t i = 0; i < blen; i++) /* one line: JSON needs no raw newlines */
        if (body[i] == '\n' || body[i] == '\r') body[i] = ' ';
    if (!child_pid && child_start() < 0) return snprintf(why, nwhy, "cannot start %s", child_argv[0]), 502;
    write_all(child_in, body, blen);
    write_all(child_in, "\n", 1);
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap);
    double end = now_ms() + timeout_ms;
    int done = 0;
    size_t line = 0; /* start of the first line not yet looked at */
    while (buf && !done) {
        int left = (int)(end - now_ms());
        if (left <= 0) {
            child_stop(1);
            free(buf);
            return snprintf(why, nwhy, "no done within %d ms; target killed", timeout_ms), 504;
        }
        struct pollfd p[2] = {{.fd = child_out, .events = POLLIN},
                              {.fd = client, .events = POLLRDHUP}};
        if (poll(p, 2, left) <= 0) continue;
        if (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR)) { /* flare gave up (its timeout) */
            child_stop(1);
            free(buf);
            return -1;
        }
        if (!p[0].revents) continue;
        if (n + 4096 > cap) {
            char *nb = n + 4096 > MAX_OUT ? NULL : realloc(buf, cap *= 2);
            if (!nb) {
                child_stop(1);
                free(buf);
                return snprintf(why, nwhy, "more than %d bytes of events; target killed", MAX_OUT), 502;
            }
            buf = nb;
        }
        ssize_t k = read(child_out, buf + n, cap - n - 1);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) { /* stdout closed: how did it end? */
            int st = child_stop(0);
            free(buf);
            if (WIFSIGNALED(st))
                snprintf(why, nwhy, "target crashed: killed by signal %d (%s)", WTERMSIG(st),
                         strsignal(WTERMSIG(st)));
            else
                snprintf(why, nwhy, "target exited with status %d before done", WEXITSTATUS(st));
            return 500;
        }
        n += (size_t)k;
        buf[n] = 0;
        for (char *nl; !done && (nl = memchr(buf + line, '\n', n - line)); line = (size_t)(nl - buf) + 1)
            done = is_done(buf + line, (size_t)(nl - buf) - line);
    }
    if (!buf) return snprintf(why, nwhy, "out of memory"), 500;
    *out = buf, *olen = n;
    return 200;
}

/* The collected lines in the chosen format, malloc'd. */
static char *format_events(const char *lines, const char **type) {
    if (format == FMT_JSONL) {
        *type = "application/x-ndjson";
        return strdup(lines);
    }
    cJSON *arr = cJSON_CreateArray();
    const char *answer = "";
    int n = 0;
    char *copy = strdup(lines);
    for (char *save = NULL, *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        cJSON *ev = cJSON_Parse(l);
        if (!cJSON_IsObject(ev)) { /* not an event: a real service would log it */
            fprintf(stderr, "agents-http: not an event: %.80s\n", l);
            cJSON_Delete(ev);
            continue;
        }
        cJSON *content = cJSON_GetObjectItemCaseSensitive(ev, "content");
        cJSON *kind = cJSON_GetObjectItemCaseSensitive(ev, "event");
        if (cJSON_IsString(kind) && !strcmp(kind->valuestring, "output") && cJSON_IsString(content))
            answer = content->valuestring;
        cJSON_AddItemToArray(arr, ev);
        n++;
    }
    char *s;
    *type = "application/json";
    if (format == FMT_ANSWER) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "answer", answer);
        cJSON_AddNumberToObject(o, "events", n);
        s = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
    } else {
        s = cJSON_PrintUnformatted(arr);
    }
    cJSON_Delete(arr);
    free(copy);
    return s;
}

static void serve(int client, char *head) {
    char path[256], why[256];
    char *body = NULL, *out = NULL;
    size_t blen = 0, olen = 0;
    int st = read_request(client, head, &body, &blen, path, sizeof path);
    if (st > 0) respond_error(client, st, st == 404 ? "POST /run only" : "bad request");
    if (st) goto done;
    if (strcmp(path, "/run")) {
        respond_error(client, 404, "POST /run only");
        goto done;
    }
    st = run_case(client, body, blen, &out, &olen, why, sizeof why);
    if (st == 200) {
        const char *type;
        char *resp = format_events(out, &type);
        if (resp) respond(client, 200, type, resp, strlen(resp));
        else respond_error(client, 500, "out of memory");
        free(resp);
    } else if (st > 0) {
        respond_error(client, st, why);
    }
done:
    free(body);
    free(out);
}

int main(int argc, char **argv) {
    int port = 0, a = 1;
    for (; a < argc && strcmp(argv[a], "--"); a++) {
        if (!strcmp(argv[a], "-p") && a + 1 < argc) port = atoi(argv[++a]);
        else if (!strcmp(argv[a], "-t") && a + 1 < argc) timeout_ms = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--format") && a + 1 < argc) {
            a++;
            format = !strcmp(argv[a], "jsonl") ? FMT_JSONL : !strcmp(argv[a], "answer") ? FMT_ANSWER
                   : !strcmp(argv[a], "array") ? FMT_ARRAY : -1;
            if (format < 0) break;
        } else break;
    }
    if (a + 1 >= argc || strcmp(argv[a], "--") || timeout_ms < 1 || port < 0 || port > 65535) {
        fprintf(stderr, "usage: %s [-p PORT] [-t MS] [--format array|jsonl|answer] -- CMD ARGS...\n",
                argv[0]);
        return 2;
    }
    child_argv = argv + a + 1;
    signal(SIGPIPE, SIG_IGN); /* a client or child that went away is a write error */
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof sa;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(ls, 64) < 0 ||
        getsockname(ls, (struct sockaddr *)&sa, &sl) < 0) {
        perror("agents-http: listen");
        return 1;
    }
    if (child_start() < 0) {
        perror("agents-http: start target");
        return 1;
    }
    printf("listening on http://127.0.0.1:%d/run\n", ntohs(sa.sin_port));
    fflush(stdout);
    char *head = malloc(MAX_HEAD);
    for (;;) {
        int c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            perror("agents-http: accept");
            break;
        }
        serve(c, head);
        close(c);
    }
    free(head);
    child_stop(1);
    return 1;
}
