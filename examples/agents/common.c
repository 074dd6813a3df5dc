/* common.c — strings, UTF-8 and protocol event output for the taskforce example. */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "taskforce.h"

/* An allocation failure in a toy target is not something to recover from; say so and stop
 * (a clean exit, not a planted crash). */
static void *xrealloc(void *p, size_t n) {
    void *q = realloc(p, n);
    if (!q) {
        fputs("taskforce: out of memory\n", stderr);
        exit(1);
    }
    return q;
}

/* ---- growable string ---------------------------------------------------------------------- */
void tf_buf_putn(tf_buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1) cap *= 2;
        b->s = xrealloc(b->s, cap);
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}

void tf_buf_put(tf_buf *b, const char *s) { tf_buf_putn(b, s, strlen(s)); }

void tf_buf_printf(tf_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n <= 0) return;
    tf_buf_putn(b, "", 0); /* make room for the terminator at least */
    if (b->n + (size_t)n + 1 > b->cap) {
        size_t cap = b->cap;
        while (cap < b->n + (size_t)n + 1) cap *= 2;
        b->s = xrealloc(b->s, cap);
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->n, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)n;
}

const char *tf_buf_cstr(tf_buf *b) { return b->s ? b->s : ""; }

void tf_buf_clear(tf_buf *b) {
    b->n = 0;
    if (b->s) b->s[0] = 0;
}

void tf_buf_free(tf_buf *b) {
    free(b->s);
    b->s = NULL;
    b->n = b->cap = 0;
}

/* ---- text --------------------------------------------------------------------------------- */
int tf_has(const char *text, const char *word) {
    size_t m = strlen(word);
    if (m == 0) return 1;
    for (const char *p = text; *p; p++) {
        size_t i = 0;
        while (i < m && p[i] && tolower((unsigned char)p[i]) == tolower((unsigned char)word[i])) i++;
        if (i == m) return 1;
    }
    return 0;
}

char *tf_lower(const char *s) {
    size_t n = strlen(s);
    char *o = xrealloc(NULL, n + 1);
    for (size_t i = 0; i <= n; i++) o[i] = (char)tolower((unsigned char)s[i]);
    return o;
}

uint32_t tf_utf8_next(const char **pp) {
    const unsigned char *p = (const unsigned char *)*pp;
    uint32_t c = p[0];
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 1) {
        *pp += 1;
        return c;
    }
    if (len == 0) goto bad;
    c &= 0x7fu >> len;
    for (int i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80) goto bad; /* also stops at the terminator */
        c = (c << 6) | (p[i] & 0x3f);
    }
    /* overlong forms, surrogates and values past U+10FFFF are invalid */
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < min[len] || (c >= 0xd800 && c <= 0xdfff) || c > 0x10ffff) goto bad;
    *pp += len;
    return c;
bad:
    *pp += 1;
    return 0xfffd;
}

char *tf_utf8_clean(const char *s) {
    tf_buf b = {0};
    tf_buf_put(&b, "");
    const char *p = s;
    while (*p) {
        const char *start = p;
        uint32_t c = tf_utf8_next(&p);
        if (c == 0xfffd && !(p - start == 3 && memcmp(start, "\xef\xbf\xbd", 3) == 0))
            tf_buf_put(&b, "\xef\xbf\xbd");
        else
            tf_buf_putn(&b, start, (size_t)(p - start));
    }
    return b.s;
}

int tf_is_cjk(uint32_t cp) {
    return (cp >= 0x4e00 && cp <= 0x9fff) || (cp >= 0x3400 && cp <= 0x4dbf) ||
           (cp >= 0x3000 && cp <= 0x303f) || (cp >= 0xff00 && cp <= 0xffef);
}

uint32_t tf_rand_below(tf_session *s, uint32_t n) {
    /* splitmix64: one multiply-xorshift step per draw is plenty for picking phrasings */
    uint64_t z = (s->rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return n ? (uint32_t)(z % n) : 0;
}

/* ---- events ------------------------------------------------------------------------------- */
/* One event = one line, flushed at once: flare reads events as they come and measures time
 * per case, and a persistent target that buffered its output would look hung. */
static void emit(cJSON *ev) {
    char *line = cJSON_PrintUnformatted(ev);
    cJSON_Delete(ev);
    if (!line) {
        fputs("taskforce: out of memory\n", stderr);
        exit(1);
    }
    fputs(line, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    cJSON_free(line);
}

static cJSON *event(const char *kind) {
    cJSON *ev = cJSON_CreateObject();
    cJSON_AddStringToObject(ev, "event", kind);
    return ev;
}

void tf_emit_message(const char *from, const char *to, const char *content) {
    cJSON *ev = event("message");
    cJSON_AddStringToObject(ev, "from", from);
    cJSON_AddStringToObject(ev, "to", to);
    cJSON_AddStringToObject(ev, "content", content);
    emit(ev);
}

void tf_emit_tool_call(const char *agent, const char *tool, cJSON *arguments) {
    cJSON *ev = event("tool_call");
    cJSON_AddStringToObject(ev, "agent", agent);
    cJSON_AddStringToObject(ev, "tool", tool);
    cJSON_AddItemToObject(ev, "arguments", arguments);
    emit(ev);
}

void tf_emit_tool_result(const char *agent, const char *tool, int ok, const char *content) {
    cJSON *ev = event("tool_result");
    cJSON_AddStringToObject(ev, "agent", agent);
    cJSON_AddStringToObject(ev, "tool", tool);
    cJSON_AddBoolToObject(ev, "ok", ok);
    cJSON_AddStringToObject(ev, "content", content);
    emit(ev);
}

void tf_emit_branch(const char *agent, const char *point, const char *choice) {
    cJSON *ev = event("branch");
    cJSON_AddStringToObject(ev, "agent", agent);
    cJSON_AddStringToObject(ev, "point", point);
    cJSON_AddStringToObject(ev, "choice", choice);
    emit(ev);
}

void tf_emit_error(const char *agent, const char *message) {
    cJSON *ev = event("error");
    cJSON_AddStringToObject(ev, "agent", agent);
    cJSON_AddStringToObject(ev, "message", message);
    emit(ev);
}

void tf_emit_output(const char *content) {
    cJSON *ev = event("output");
    cJSON_AddStringToObject(ev, "content", content);
    emit(ev);
}

void tf_emit_done(void) { emit(event("done")); }
