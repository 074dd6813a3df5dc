/* HTTP targets: one POST per case through libcurl, the response read as events.
 *
 * The whole response is buffered (bounded by max_bytes) and parsed after it arrived: a service
 * answers a case in one response, so there is nothing to gain from parsing while it streams,
 * and a complete body lets "events" mode tell a JSON array from JSON lines by its first byte.
 * Each event goes through fl_trace_feed_line, the same parser as process targets, so an HTTP
 * target has exactly the protocol (and the protocol problems) of docs/agents-protocol.md.
 *
 * Retries are for connections that were never made (refused, unresolvable): the request was
 * not delivered, so trying again cannot run a case twice. A connection that breaks after the
 * request was sent means the service died while handling it — a crash, not retried.
 *
 * Safety: the handle is confined to the one URL — redirects off (CURLOPT_FOLLOWLOCATION 0),
 * protocols http/https only, proxy "" (libcurl would otherwise honour http_proxy & co. from
 * the environment and send the cases elsewhere).
 */
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/text.h"
#include "flare/agents/http_target.h"
#include "flare/agents/target.h"

typedef enum { RESP_EVENTS, RESP_JSONL, RESP_POINTER } resp_mode;

struct fl_http {
    CURL *curl;
    char *url;
    char *tmpl;          /* body template text, or NULL */
    resp_mode mode;
    char *pointer;       /* RESP_POINTER: the JSON pointer */
    int retries, backoff_ms, timeout_ms;
    size_t max_bytes;
    fl_sb body;          /* response body of the current case (body.oom: memory ran out) */
    int over;            /* the body passed max_bytes */
    char errbuf[CURL_ERROR_SIZE];
};

void fl_http_opts_default(fl_http_opts *o) {
    memset(o, 0, sizeof *o);
    o->retries = 3;
    o->backoff_ms = 100;
}

/* ---- the body ---------------------------------------------------------------------------- */
/* A cJSON value printed compactly; for strings without the quotes when bare. */
static void sb_json(fl_sb *b, cJSON *v, int bare) {
    char *s = v ? cJSON_PrintUnformatted(v) : NULL;
    if (!s) {
        b->oom = 1;
    } else if (bare && cJSON_IsString(v)) {
        fl_sb_put(b, s + 1, strlen(s) - 2);
    } else {
        fl_sb_put(b, s, strlen(s));
    }
    free(s);
    cJSON_Delete(v);
}

/* The turns as UTF-8-clean strings (a mutated turn may hold any bytes). */
static cJSON *turn_string(const char *s) {
    char *u = fl_utf8_dup(s, strlen(s));
    cJSON *v = u ? cJSON_CreateString(u) : NULL;
    free(u);
    return v;
}

char *fl_http_body(const char *tmpl, const fl_case *c) {
    if (!tmpl) return fl_case_to_json(c);
    fl_sb b = {0};
    const char *p = tmpl;
    for (;;) {
        const char *open = strstr(p, "{{");
        if (!open) break;
        fl_sb_put(&b, p, (size_t)(open - p));
        const char *name = open + 2, *close = strstr(name, "}}");
        size_t k = close ? (size_t)(close - name) : 0;
#define IS(s) (close && k == sizeof(s) - 1 && !memcmp(name, s, k))
        if (IS("input")) {
            fl_sb in = {0};
            for (int i = 0; i < c->n_turns; i++) {
                if (i) fl_sb_put(&in, "\n", 1);
                fl_sb_put(&in, c->turns[i], strlen(c->turns[i]));
            }
            sb_json(&b, in.oom ? NULL : turn_string(in.p ? in.p : ""), 1);
            b.oom |= in.oom;
            free(in.p);
        } else if (IS("turns")) {
            cJSON *a = cJSON_CreateArray();
            for (int i = 0; a && i < c->n_turns; i++) {
                cJSON *s = turn_string(c->turns[i]);
                if (!s) {
                    cJSON_Delete(a);
                    a = NULL;
                    break;
                }
                cJSON_AddItemToArray(a, s);
            }
            sb_json(&b, a, 0);
        } else if (IS("request")) {
            char *r = fl_case_to_json(c);
            if (r) fl_sb_put(&b, r, strlen(r));
            else b.oom = 1;
            free(r);
        } else if (IS("id")) {
            sb_json(&b, cJSON_CreateString(c->id), 1);
        } else if (IS("traceparent")) {
            sb_json(&b, cJSON_CreateString(c->traceparent), 1);
        } else if (IS("seed")) {
            char num[32];
            snprintf(num, sizeof num, "%llu", (unsigned long long)c->seed);
            fl_sb_put(&b, num, strlen(num));
        } else {
            fl_sb_put(&b, "{{", 2); /* not ours: kept, and scanning goes on after it */
            p = name;
            continue;
        }
#undef IS
        p = close + 2;
    }
    fl_sb_put(&b, p, strlen(p));
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p ? b.p : strdup("");
}

/* ---- JSON pointer (RFC 6901) ------------------------------------------------------------- */
const cJSON *fl_json_pointer(const cJSON *root, const char *ptr) {
    const cJSON *v = root;
    if (!ptr || !*ptr) return v;
    if (*ptr != '/') return NULL;
    char tok[512];
    while (v && *ptr == '/') {
        ptr++;
        size_t k = 0;
        for (; *ptr && *ptr != '/'; ptr++) {
            char ch = *ptr;
            if (ch == '~') {
                if (ptr[1] == '0') ch = '~';
                else if (ptr[1] == '1') ch = '/';
                else return NULL; /* "~" must be followed by 0 or 1 */
                ptr++;
            }
            if (k + 1 >= sizeof tok) return NULL;
            tok[k++] = ch;
        }
        tok[k] = 0;
        if (cJSON_IsArray(v)) {
            /* an index: "0" or digits without a leading zero ("-" is past the end) */
            if (!k || (k > 1 && tok[0] == '0') || strspn(tok, "0123456789") != k || k > 9)
                return NULL;
            v = cJSON_GetArrayItem(v, atoi(tok));
        } else if (cJSON_IsObject(v)) {
            v = cJSON_GetObjectItemCaseSensitive(v, tok);
        } else {
            return NULL;
        }
    }
    return v;
}

/* ---- life cycle ------------------------------------------------------------------------- */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static CURLcode g_init;
static void global_init(void) { g_init = curl_global_init(CURL_GLOBAL_DEFAULT); }

static size_t on_body(char *p, size_t size, size_t n, void *user) {
    fl_http *h = user;
    size_t k = size * n;
    if (h->body.n + k > h->max_bytes) {
        h->over = 1;
        return 0; /* abort the transfer: CURLE_WRITE_ERROR */
    }
    fl_sb_put(&h->body, p, k);
    return h->body.oom ? 0 : k;
}

fl_status fl_http_new(const fl_http_opts *o, int timeout_ms, size_t max_bytes, fl_http **out,
                      fl_err *e) {
    *out = NULL;
    if (!o->url || (strncmp(o->url, "http://", 7) && strncmp(o->url, "https://", 8)))
        return fl_fail(e, FL_ERR_ARG, "--target %s: not an http:// or https:// URL",
                       o->url ? o->url : "(none)");
    const char *r = o->response ? o->response : "events";
    resp_mode mode;
    if (!strcmp(r, "events")) mode = RESP_EVENTS;
    else if (!strcmp(r, "jsonl")) mode = RESP_JSONL;
    else if (!strncmp(r, "pointer:", 8) && (!r[8] || r[8] == '/')) mode = RESP_POINTER;
    else
        return fl_fail(e, FL_ERR_ARG,
                       "--response %s: expected events, jsonl or pointer:/json/pointer", r);
    if (o->retries < 0 || o->backoff_ms < 0 || timeout_ms < 1 || max_bytes < 1)
        return fl_fail(e, FL_ERR_ARG, "http target: retries, backoff, timeout out of range");
    pthread_once(&g_once, global_init);
    if (g_init != CURLE_OK)
        return fl_fail(e, FL_ERR_IO, "libcurl: %s", curl_easy_strerror(g_init));
    fl_http *h = calloc(1, sizeof *h);
    if (!h) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    h->mode = mode;
    h->retries = o->retries, h->backoff_ms = o->backoff_ms, h->timeout_ms = timeout_ms;
    h->max_bytes = max_bytes;
    h->url = strdup(o->url);
    h->pointer = strdup(mode == RESP_POINTER ? r + 8 : "");
    h->curl = curl_easy_init();
    if (!h->url || !h->pointer || !h->curl) {
        fl_http_free(h);
        return fl_fail(e, FL_ERR_NOMEM, "http target: out of memory");
    }
    if (o->body_template) {
        uint8_t *buf = NULL;
        size_t len = 0;
        fl_status st = fl_file_read(o->body_template, &buf, &len, e);
        if (!st && !(h->tmpl = malloc(len + 1))) st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
        if (!st) memcpy(h->tmpl, buf, len), h->tmpl[len] = 0;
        free(buf);
        if (st) {
            fl_http_free(h);
            return st;
        }
    }
    CURL *c = h->curl;
    CURLcode rc = CURLE_OK;
#define SET(opt, val) if (rc == CURLE_OK) rc = curl_easy_setopt(c, opt, val)
    SET(CURLOPT_URL, h->url);
    SET(CURLOPT_NOSIGNAL, 1L);              /* threads: no SIGALRM for timeouts */
    SET(CURLOPT_FOLLOWLOCATION, 0L);
    SET(CURLOPT_PROTOCOLS_STR, "http,https");
    SET(CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    SET(CURLOPT_PROXY, "");                 /* never a proxy from the environment */
    SET(CURLOPT_TIMEOUT_MS, (long)timeout_ms);
    SET(CURLOPT_WRITEFUNCTION, on_body);
    SET(CURLOPT_WRITEDATA, h);
    SET(CURLOPT_ERRORBUFFER, h->errbuf);
    SET(CURLOPT_USERAGENT, "flare-agents");
#undef SET
    if (rc != CURLE_OK) {
        fl_http_free(h);
        return fl_fail(e, FL_ERR_ARG, "--target %s: %s", o->url, curl_easy_strerror(rc));
    }
    *out = h;
    return FL_OK;
}

void fl_http_set_timeout(fl_http *h, int timeout_ms) {
    if (!h || timeout_ms < 1) return;
    h->timeout_ms = timeout_ms;
    curl_easy_setopt(h->curl, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
}

void fl_http_free(fl_http *h) {
    if (!h) return;
    if (h->curl) curl_easy_cleanup(h->curl);
    free(h->url);
    free(h->tmpl);
    free(h->pointer);
    free(h->body.p);
    free(h);
}

/* ---- one case ----------------------------------------------------------------------------- */
static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Feed one event object (already parsed) through the line parser. */
static fl_status feed_value(fl_trace *tr, const cJSON *v, double ms, int *done) {
    char *s = cJSON_PrintUnformatted(v);
    if (!s) return FL_ERR_NOMEM;
    fl_status st = fl_trace_feed_line(tr, s, strlen(s), ms, done);
    free(s);
    return st;
}

static fl_status parse_lines(fl_http *h, fl_trace *tr, double ms, int *done) {
    for (char *p = h->body.p; p && *p;) {
        char *nl = strchr(p, '\n');
        size_t k = nl ? (size_t)(nl - p) : strlen(p);
        int d = 0;
        if (fl_trace_feed_line(tr, p, k, ms, &d) != FL_OK) return FL_ERR_NOMEM;
        *done |= d;
        p = nl ? nl + 1 : NULL;
    }
    return FL_OK;
}

/* The body of a 2xx response into events; an implicit done at the end. */
static fl_status parse_body(fl_http *h, fl_trace *tr, double ms) {
    int done = 0;
    fl_status st = FL_OK;
    const char *b = h->body.p ? h->body.p : "";
    b += strspn(b, " \t\r\n");
    if (h->mode == RESP_POINTER) {
        cJSON *j = cJSON_ParseWithLength(b, strlen(b));
        const cJSON *v = j ? fl_json_pointer(j, h->pointer) : NULL;
        if (!j) {
            fl_trace_problem(tr, "response is not JSON (--response pointer:%s)", h->pointer);
        } else if (!v) {
            fl_trace_problem(tr, "response has no value at %s", h->pointer[0] ? h->pointer : "\"\"");
        } else {
            cJSON *ev = cJSON_CreateObject();
            char *txt = cJSON_IsString(v) ? NULL : cJSON_PrintUnformatted(v);
            const char *content = cJSON_IsString(v) ? v->valuestring : txt;
            char *clean = content ? fl_utf8_dup(content, strlen(content)) : NULL;
            if (!ev || !clean || !cJSON_AddStringToObject(ev, "event", "output") ||
                !cJSON_AddStringToObject(ev, "content", clean))
                st = FL_ERR_NOMEM;
            else
                st = feed_value(tr, ev, ms, &done);
            free(clean);
            free(txt);
            cJSON_Delete(ev);
        }
        cJSON_Delete(j);
    } else if (h->mode == RESP_EVENTS && *b == '[') {
        cJSON *j = cJSON_ParseWithLength(b, strlen(b));
        if (!cJSON_IsArray(j)) fl_trace_problem(tr, "response is not a JSON array of events");
        const cJSON *v;
        cJSON_ArrayForEach(v, j) {
            if (st) break;
            if (!cJSON_IsObject(v)) {
                fl_trace_problem(tr, "response array holds a non-object");
                continue;
            }
            int d = 0;
            st = feed_value(tr, v, ms, &d);
            done |= d;
        }
        cJSON_Delete(j);
    } else {
        st = parse_lines(h, tr, ms, &done);
    }
    if (!st && !done) st = fl_trace_feed_line(tr, "{\"event\":\"done\"}", 16, ms, &done);
    if (!st) tr->exit = FL_EXIT_DONE;
    return st;
}

fl_status fl_http_run(fl_http *h, const fl_case *c, fl_trace *tr, fl_err *e) {
    char *body = fl_http_body(h->tmpl, c);
    char tp[96];
    snprintf(tp, sizeof tp, "traceparent: %s", c->traceparent);
    struct curl_slist *hd = NULL, *t1 = NULL;
    if (body && (t1 = curl_slist_append(hd, "Content-Type: application/json"))) hd = t1;
    if (hd && (t1 = curl_slist_append(hd, tp))) hd = t1;
    if (hd && (t1 = curl_slist_append(hd, "Expect:"))) hd = t1; /* no 100-continue round trip */
    if (!body || !hd || !t1) {
        free(body);
        curl_slist_free_all(hd);
        return fl_fail(e, FL_ERR_NOMEM, "http target: out of memory");
    }
    curl_easy_setopt(h->curl, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h->curl, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));

    double t0 = fl_now();
    CURLcode rc;
    int tries = 0, wait = h->backoff_ms;
    for (;;) {
        /* the last case's body is emptied, not just forgotten: a response without a body
         * must not read it */
        h->body.n = 0, h->body.oom = 0, h->over = 0, h->errbuf[0] = 0;
        if (h->body.p) h->body.p[0] = 0;
        rc = curl_easy_perform(h->curl);
        int refused = rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST;
        if (!refused || tries++ >= h->retries) break;
        sleep_ms(wait);
        wait *= 2;
    }
    tr->ms = 1000 * (fl_now() - t0);
    tr->bytes = h->body.n;
    long status = 0;
    curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_setopt(h->curl, CURLOPT_HTTPHEADER, NULL);
    curl_easy_setopt(h->curl, CURLOPT_POSTFIELDS, NULL);
    curl_slist_free_all(hd);
    free(body);

    const char *why = h->errbuf[0] ? h->errbuf : curl_easy_strerror(rc);
    fl_status st = FL_OK;
    if (h->body.oom) {
        st = fl_fail(e, FL_ERR_NOMEM, "http target: out of memory for the response");
    } else if (h->over) {
        tr->exit = FL_EXIT_LIMIT;
    } else if (rc == CURLE_OPERATION_TIMEDOUT) {
        tr->exit = FL_EXIT_HANG;
    } else if (rc != CURLE_OK) {
        tr->exit = FL_EXIT_CRASH;
        /* Refused: a configuration problem more than a finding, so said loudly; a broken
         * connection is the service dying on this case: a crash like any other. */
        if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST)
            fl_trace_problem(tr, "http: no connection after %d tries: %s", tries, why);
    } else if (status >= 500) {
        /* exit_status says it all; a protocol problem on top would be a second finding */
        tr->exit = FL_EXIT_CRASH;
        tr->exit_status = (int)status;
    } else if (status >= 200 && status < 300) {
        st = parse_body(h, tr, tr->ms);
        if (st) st = fl_fail(e, FL_ERR_NOMEM, "http target: out of memory");
    } else {
        tr->exit = FL_EXIT_EOF;
        char *loc = NULL;
        curl_easy_getinfo(h->curl, CURLINFO_REDIRECT_URL, &loc);
        if (loc) fl_trace_problem(tr, "http: status %ld, redirect to %s not followed", status, loc);
        else fl_trace_problem(tr, "http: status %ld", status);
    }
    return st;
}
