/* llm_stub.c — see llm_stub.h. Included by the tests that use it (the Makefile builds one
 * source file per test binary). One connection at a time, HTTP/1.0 style: every reply closes
 * the connection, which libcurl handles like any server's "Connection: close". */
#include <arpa/inet.h>
#include <ctype.h>
#include <cjson/cJSON.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "llm_stub.h"

static void stub_sleep(int ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void send_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k <= 0) return;
        p += k, n -= (size_t)k;
    }
}

/* Read one request: headers up to the blank line, then Content-Length bytes. */
static int read_request(int fd, char **head, char **body, char **path) {
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    char *eoh = NULL;
    size_t need = 0;
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 3000) <= 0) break;
        if (n + 4096 > cap) b = realloc(b, cap *= 2);
        ssize_t k = recv(fd, b + n, cap - n - 1, 0);
        if (k <= 0) break;
        n += (size_t)k;
        b[n] = 0;
        if (!eoh && (eoh = strstr(b, "\r\n\r\n"))) {
            const char *cl = strcasestr(b, "content-length:");
            need = (size_t)(eoh - b) + 4 + (cl && cl < eoh ? strtoul(cl + 15, NULL, 10) : 0);
        }
        if (eoh && n >= need) break;
    }
    if (!eoh) return free(b), -1;
    *eoh = 0;
    *head = strdup(b);
    *body = strdup(eoh + 4);
    char *sp = strchr(b, ' '), *sp2 = sp ? strchr(sp + 1, ' ') : NULL;
    *path = sp && sp2 ? strndup(sp + 1, (size_t)(sp2 - sp - 1)) : strdup("?");
    free(b);
    return 0;
}

static void *stub_main(void *arg) {
    stub *s = arg;
    while (!s->quit) {
        struct pollfd p = {s->fd, POLLIN, 0};
        if (poll(&p, 1, 20) <= 0) continue;
        int c = accept(s->fd, NULL, NULL);
        if (c < 0) continue;
        char *head = NULL, *body = NULL, *path = NULL;
        if (read_request(c, &head, &body, &path)) {
            close(c);
            continue;
        }
        pthread_mutex_lock(&s->mu);
        stub_reply r = s->dflt;
        int own = 0;
        if (s->next < s->n_script) r = s->script[s->next++], own = 1;
        else if (s->fn) r = (stub_reply){.status = 200, .body = s->fn(body), .delay_ms = s->fn_delay_ms}, own = 1;
        if (s->n_req < STUB_MAX) {
            s->req_head[s->n_req] = head, s->req_body[s->n_req] = body, s->req_path[s->n_req] = path;
            s->n_req++;
        } else {
            free(head), free(body), free(path);
        }
        pthread_mutex_unlock(&s->mu);
        if (r.delay_ms) {
            for (int waited = 0; waited < r.delay_ms && !s->quit; waited += 10) stub_sleep(10);
        }
        int status = r.status ? r.status : (r.body ? 200 : 500);
        const char *b = r.body ? r.body : "";
        char hdr[512];
        int hn = snprintf(hdr, sizeof hdr,
                          "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                          "Connection: close\r\n",
                          status, strlen(b));
        if (r.retry_after > 0) hn += snprintf(hdr + hn, sizeof hdr - (size_t)hn, "Retry-After: %d\r\n", r.retry_after);
        hn += snprintf(hdr + hn, sizeof hdr - (size_t)hn, "\r\n");
        send_all(c, hdr, (size_t)hn);
        send_all(c, b, r.disconnect ? strlen(b) / 2 : strlen(b));
        shutdown(c, SHUT_RDWR);
        close(c);
        if (own) free(r.body);
    }
    return NULL;
}

stub *stub_start(void) {
    stub *s = calloc(1, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    s->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(s->fd, (struct sockaddr *)&a, sizeof a) || listen(s->fd, 16)) {
        perror("stub");
        abort();
    }
    socklen_t al = sizeof a;
    getsockname(s->fd, (struct sockaddr *)&a, &al);
    s->port = ntohs(a.sin_port);
    snprintf(s->url, sizeof s->url, "http://127.0.0.1:%d", s->port);
    pthread_create(&s->th, NULL, stub_main, s);
    return s;
}

void stub_stop(stub *s) {
    s->quit = 1;
    pthread_join(s->th, NULL);
    close(s->fd);
    for (int i = s->next; i < s->n_script; i++) free(s->script[i].body);
    for (int i = 0; i < s->n_req; i++) free(s->req_head[i]), free(s->req_body[i]), free(s->req_path[i]);
    free(s->dflt.body);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

void stub_push(stub *s, stub_reply r) {
    pthread_mutex_lock(&s->mu);
    if (s->n_script < STUB_MAX) s->script[s->n_script++] = r;
    else free(r.body);
    pthread_mutex_unlock(&s->mu);
}

char *stub_chat_body(const char *content, int tokens) {
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "id", "chatcmpl-stub");
    cJSON_AddStringToObject(r, "object", "chat.completion");
    cJSON *ch = cJSON_AddArrayToObject(r, "choices"), *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", 0);
    cJSON *m = cJSON_AddObjectToObject(c, "message");
    cJSON_AddStringToObject(m, "role", "assistant");
    cJSON_AddStringToObject(m, "content", content);
    cJSON_AddStringToObject(c, "finish_reason", "stop");
    cJSON_AddItemToArray(ch, c);
    cJSON *u = cJSON_AddObjectToObject(r, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", tokens / 2);
    cJSON_AddNumberToObject(u, "completion_tokens", tokens - tokens / 2);
    cJSON_AddNumberToObject(u, "total_tokens", tokens);
    char *t = cJSON_PrintUnformatted(r);
    cJSON_Delete(r);
    return t;
}

void stub_push_chat(stub *s, const char *content, int tokens) {
    stub_push(s, (stub_reply){.status = 200, .body = stub_chat_body(content, tokens)});
}

void stub_set_default_chat(stub *s, const char *content, int tokens) {
    pthread_mutex_lock(&s->mu);
    free(s->dflt.body);
    s->dflt = (stub_reply){.status = 200, .body = stub_chat_body(content, tokens)};
    pthread_mutex_unlock(&s->mu);
}

int stub_count(stub *s) {
    pthread_mutex_lock(&s->mu);
    int n = s->n_req;
    pthread_mutex_unlock(&s->mu);
    return n;
}

const char *stub_body(stub *s, int i) {
    pthread_mutex_lock(&s->mu);
    const char *b = i >= 0 && i < s->n_req ? s->req_body[i] : NULL;
    pthread_mutex_unlock(&s->mu);
    return b;
}

const char *stub_head(stub *s, int i) {
    pthread_mutex_lock(&s->mu);
    const char *b = i >= 0 && i < s->n_req ? s->req_head[i] : NULL;
    pthread_mutex_unlock(&s->mu);
    return b;
}

/* ---- the stand-in model ------------------------------------------------------------------ */
/* Words of English grammar and of the prompt's own sentence frame: a model reads past them. */
static int stub_stopword(const char *w) {
    static const char *const v[] = {"a", "an", "the", "of", "to", "its", "it", "is", "and", "or",
                                    "agent", "agents", "over", "by", "this", "that", "has", "never",
                                    "done", "yet", "system", "first", "work", "choices", "deciding",
                                    "calling", "handing", "handled", "writing", "request", "user",
                                    "s", NULL};
    for (int i = 0; v[i]; i++)
        if (!strcmp(w, v[i])) return 1;
    return 0;
}

/* The content words of t[0..n), lower case, '_' and camel case split, into out (space
 * separated, each once). */
static void stub_words(const char *t, size_t n, char *out, size_t cap) {
    size_t k = strlen(out);
    for (size_t i = 0; i < n;) {
        char w[64];
        size_t m = 0;
        while (i < n && !isalnum((unsigned char)t[i])) i++;
        while (i < n && isalnum((unsigned char)t[i]) && m < sizeof w - 1) {
            if (m && isupper((unsigned char)t[i]) && islower((unsigned char)t[i - 1])) break;
            w[m++] = (char)tolower((unsigned char)t[i++]);
        }
        w[m] = 0;
        if (!m || stub_stopword(w)) continue;
        char pad[68];
        snprintf(pad, sizeof pad, " %s ", w);
        char have[1100];
        snprintf(have, sizeof have, " %s ", out);
        if (strstr(have, pad) || k + m + 2 >= cap) continue;
        k += (size_t)snprintf(out + k, cap - k, "%s%s", k ? " " : "", w);
    }
}

char *stub_model_gen(const char *body) {
    cJSON *r = cJSON_Parse(body);
    const cJSON *ms = cJSON_GetObjectItem(r, "messages");
    const cJSON *u = cJSON_GetObjectItem(cJSON_GetArrayItem(ms, 1), "content");
    const cJSON *sy = cJSON_GetObjectItem(cJSON_GetArrayItem(ms, 0), "content");
    const char *p = cJSON_IsString(u) ? u->valuestring : "";
    char *out;
    if (cJSON_IsString(sy) && strstr(sy->valuestring, "is_anomaly")) {
        out = stub_chat_body("{\"is_anomaly\":false,\"confidence\":0.9,\"categories\":[],\"reason\":\"fine\"}", 20);
        cJSON_Delete(r);
        return out;
    }
    char words[1024] = "", example[512] = "hello";
    const char *t = strstr(p, "\nTarget: ");
    if (t) { /* the target sentence, then the description lines under it ("  Name: ...") */
        t += 9;
        const char *e = strchr(t, '\n');
        stub_words(t, e ? (size_t)(e - t) : strlen(t), words, sizeof words);
        while (e && e[1] == ' ' && e[2] == ' ') {
            const char *d = e + 3, *e2 = strchr(d, '\n');
            stub_words(d, e2 ? (size_t)(e2 - d) : strlen(d), words, sizeof words);
            e = e2;
        }
    }
    const char *x = strstr(p, "Examples of inputs the system accepts:\n  \"");
    if (x) { /* the first example, as the JSON string it is quoted as */
        x = strchr(x, '"');
        const char *e = x;
        while (e && *++e && *e != '"') e += *e == '\\';
        cJSON *j = e && *e ? cJSON_ParseWithLength(x, (size_t)(e - x + 1)) : NULL;
        if (cJSON_IsString(j)) snprintf(example, sizeof example, "%s", j->valuestring);
        cJSON_Delete(j);
    }
    if (!words[0]) snprintf(words, sizeof words, "something else");
    cJSON *o = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(o, "instructions");
    char b[2048];
    snprintf(b, sizeof b, "I need help with %s.", words);
    cJSON_AddItemToArray(a, cJSON_CreateString(b));
    snprintf(b, sizeof b, "%s Also: %s.", example, words);
    cJSON_AddItemToArray(a, cJSON_CreateString(b));
    snprintf(b, sizeof b, "Please %s, right now.", words);
    cJSON_AddItemToArray(a, cJSON_CreateString(b));
    cJSON *two = cJSON_CreateArray();
    cJSON_AddItemToArray(two, cJSON_CreateString(example));
    snprintf(b, sizeof b, "Now %s.", words);
    cJSON_AddItemToArray(two, cJSON_CreateString(b));
    cJSON_AddItemToArray(a, two);
    char *content = cJSON_PrintUnformatted(o);
    out = stub_chat_body(content, 200);
    free(content);
    cJSON_Delete(o);
    cJSON_Delete(r);
    return out;
}
