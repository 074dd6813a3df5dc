/* sys.c — the request loop and event output shared by the example systems (sys.h). */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sys.h"

static void emit(cJSON *ev) {
    char *line = cJSON_PrintUnformatted(ev);
    cJSON_Delete(ev);
    if (!line) exit(1);
    fputs(line, stdout);
    fputc('\n', stdout);
    fflush(stdout); /* one event per line, at once: flare times each case */
    cJSON_free(line);
}

static cJSON *event(const char *kind) {
    cJSON *ev = cJSON_CreateObject();
    cJSON_AddStringToObject(ev, "event", kind);
    return ev;
}

static char *vfmt(const char *fmt, va_list ap) {
    va_list aq;
    va_copy(aq, ap);
    int n = vsnprintf(NULL, 0, fmt, aq);
    va_end(aq);
    char *s = malloc((size_t)(n > 0 ? n : 0) + 1);
    if (!s) exit(1);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    return s;
}

/* A wait in ms from the environment: unset, negative or over 10 s is none. */
static long env_ms(const char *name) {
    const char *v = getenv(name);
    long ms = v ? strtol(v, NULL, 10) : 0;
    return ms < 0 || ms > 10000 ? 0 : ms;
}

static void wait_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    if (ms > 0) nanosleep(&ts, NULL);
}

/* SYS_STEP_MS (environment): each message waits this many ms first, as an agent waits for
 * its model. Unset: 0, the systems answer in well under a millisecond. A real LLM call takes
 * hundreds of ms; the hang measurement (docs/agents-campaign.md) is shown both ways, because
 * the time share lost to a hang is set by how a hang compares with a normal case. */
static void step_wait(void) {
    static long ms = -1;
    if (ms < 0) ms = env_ms("SYS_STEP_MS");
    wait_ms(ms);
}

void sys_msg(const char *from, const char *to, const char *fmt, ...) {
    step_wait();
    va_list ap;
    va_start(ap, fmt);
    char *s = vfmt(fmt, ap);
    va_end(ap);
    cJSON *ev = event("message");
    cJSON_AddStringToObject(ev, "from", from);
    cJSON_AddStringToObject(ev, "to", to);
    cJSON_AddStringToObject(ev, "content", s);
    free(s);
    emit(ev);
}

void sys_tool(const char *agent, const char *tool, const char *arg_name, const char *arg) {
    cJSON *ev = event("tool_call"), *a = cJSON_CreateObject();
    cJSON_AddStringToObject(ev, "agent", agent);
    cJSON_AddStringToObject(ev, "tool", tool);
    cJSON_AddStringToObject(a, arg_name, arg);
    cJSON_AddItemToObject(ev, "arguments", a);
    emit(ev);
}

void sys_result(const char *agent, const char *tool, int ok, const char *content) {
    cJSON *ev = event("tool_result");
    cJSON_AddStringToObject(ev, "agent", agent);
    cJSON_AddStringToObject(ev, "tool", tool);
    cJSON_AddBoolToObject(ev, "ok", ok);
    cJSON_AddStringToObject(ev, "content", content);
    emit(ev);
}

void sys_branch(const char *agent, const char *point, const char *choice) {
    cJSON *ev = event("branch");
    cJSON_AddStringToObject(ev, "agent", agent);
    cJSON_AddStringToObject(ev, "point", point);
    cJSON_AddStringToObject(ev, "choice", choice);
    emit(ev);
}

void sys_output(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = vfmt(fmt, ap);
    va_end(ap);
    cJSON *ev = event("output");
    cJSON_AddStringToObject(ev, "content", s);
    free(s);
    emit(ev);
}

int sys_has(const char *text, const char *word) {
    size_t m = strlen(word);
    for (const char *p = text; *p; p++) {
        size_t i = 0;
        while (i < m && p[i] && tolower((unsigned char)p[i]) == tolower((unsigned char)word[i])) i++;
        if (i == m) return 1;
    }
    return m == 0;
}

long long sys_number(const char *text, long long fallback, int *digits) {
    *digits = 0;
    for (const char *p = text; *p; p++) {
        if (!isdigit((unsigned char)*p)) continue;
        int neg = p > text && p[-1] == '-';
        long long v = 0;
        while (isdigit((unsigned char)*p)) {
            if (v < 100000000000000000LL) v = v * 10 + (*p - '0');
            (*digits)++;
            p++;
        }
        return neg ? -v : v;
    }
    return fallback;
}

/* the code points of text, one at a time (invalid bytes were cleaned before) */
static unsigned next_cp(const unsigned char **pp) {
    const unsigned char *p = *pp;
    unsigned c = p[0];
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4;
    if (len > 1) c &= 0x7fu >> len;
    for (int i = 1; i < len && p[i]; i++) c = (c << 6) | (p[i] & 0x3f);
    *pp += len;
    return c;
}

static int is_cjk(unsigned c) {
    return (c >= 0x4e00 && c <= 0x9fff) || (c >= 0x3400 && c <= 0x4dbf) ||
           (c >= 0x3000 && c <= 0x303f) || (c >= 0xff00 && c <= 0xffef);
}

int sys_has_symbol(const char *text) {
    for (const unsigned char *p = (const unsigned char *)text; *p;) {
        unsigned c = next_cp(&p);
        if ((c < 0x20 && c != '\n' && c != '\t') || (c >= 0x80 && !is_cjk(c) && c != 0xfffd &&
                                                      !(c >= 0xc0 && c <= 0x24f)))
            return 1;
    }
    return 0;
}

int sys_has_cjk(const char *text) {
    for (const unsigned char *p = (const unsigned char *)text; *p;)
        if (is_cjk(next_cp(&p))) return 1;
    return 0;
}

int sys_count(const char *text, char c) {
    int n = 0;
    for (; *text; text++) n += *text == c;
    return n;
}

/* A planted hang: the agent waits for a reply that never comes (flare's timeout ends it). */
void sys_hang(void) {
    for (;;) {
        struct timespec ts = {1, 0};
        nanosleep(&ts, NULL);
    }
}

static char *clean(const char *s) {
    size_t n = strlen(s);
    char *o = malloc(n * 3 + 1), *q = o;
    if (!o) exit(1);
    const unsigned char *p = (const unsigned char *)s;
    while (*p) { /* invalid UTF-8 bytes become U+FFFD */
        unsigned c = *p;
        int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        int ok = len > 0;
        for (int i = 1; ok && i < len; i++) ok = (p[i] & 0xc0) == 0x80;
        if (!ok) {
            memcpy(q, "\xef\xbf\xbd", 3), q += 3, p++;
        } else {
            memcpy(q, p, (size_t)len), q += len, p += len;
        }
    }
    *q = 0;
    return o;
}

static void handle_line(const char *line) {
    cJSON *req = cJSON_Parse(line);
    const cJSON *turns = req ? cJSON_GetObjectItemCaseSensitive(req, "turns") : NULL;
    int n = cJSON_IsArray(turns) ? cJSON_GetArraySize(turns) : 0;
    for (int i = 0; i < n; i++)
        if (!cJSON_IsString(cJSON_GetArrayItem(turns, i))) n = 0;
    if (n <= 0) {
        sys_output("Sorry, I could not read that request.");
    } else {
        if (n > 8) n = 8; /* older turns fall out of the context */
        char **t = calloc((size_t)n, sizeof *t);
        if (!t) exit(1);
        for (int i = 0; i < n; i++) t[i] = clean(cJSON_GetArrayItem(turns, i)->valuestring);
        sys_handle(t, n);
        for (int i = 0; i < n; i++) free(t[i]);
        free(t);
    }
    cJSON_Delete(req);
    emit(event("done"));
}

int main(int argc, char **argv) {
    (void)argv;
    if (argc > 1) {
        fprintf(stderr, "usage: %s  (reads JSON-line requests on stdin, writes events on stdout)\n",
                sys_name);
        return 2;
    }
    /* SYS_START_MS: the process first waits this long, as an interpreter loading an agent
     * framework does (Node or Python systems take a second or two) */
    wait_ms(env_ms("SYS_START_MS"));
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, stdin) > 0) handle_line(line);
    free(line);
    return 0;
}
