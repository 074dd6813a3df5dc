/* Module agents/llm — the optional LLM in the loop: this file is the OpenAI-compatible client
 * (chat and embeddings, cache, budget, retries), llm_gen.c the generator of new cases aimed at
 * uncovered behaviour, llm_judge.c the judge of traces the rule oracles passed. Depends on
 * protocol, cover (what is not covered yet) and oracle (finding signatures). API:
 * include/flare/agents/llm.h; docs/agents-llm.md.
 *
 * The OpenAI-compatible client (llm.h): request bodies, the on-disk cache, the budget, and
 * libcurl with retries.
 *
 * Why the cache key is the request body: the body holds exactly what decides the reply
 * (model, messages, temperature, seed, response_format, max_tokens), and never the key,
 * which travels only in a header. Hashing base URL + body gives 128 bits (two FNV-1a lanes
 * with splitmix finalisers), plenty against accidental collisions in a cache folder.
 *
 * Why each HTTP attempt counts as a call: a budget is there to bound what a run may cost or
 * load a shared server with, and a retried request does both. */
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "core/text.h"
#include "flare/agents/agcov.h"
#include "flare/agents/llm.h"

struct fl_llm {
    fl_llm_opts o;
    char *base;     /* base URL without a trailing "/" or "/v1" */
    char *auth;     /* "Authorization: Bearer ..." or NULL */
    char *cache;    /* cache folder or NULL */
    pthread_mutex_t mu;
    fl_llm_stats st;
    /* fl_llm_say's rate limit, per kind: when the last message was printed, whether one was,
     * and how many were held back since */
    double said_at[FL_LLM_SAY_COUNT_];
    int said[FL_LLM_SAY_COUNT_];
    long held[FL_LLM_SAY_COUNT_];
};

void fl_llm_opts_default(fl_llm_opts *o) {
    memset(o, 0, sizeof *o);
    o->temperature = 0.7;
    o->max_reply_tokens = 1024;
    o->timeout_ms = 60000;
    o->connect_timeout_ms = 5000;
    o->retries = 3;
    o->backoff_ms = 500;
    o->max_backoff_ms = 30000;
    o->log_every_s = 60;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

fl_status fl_llm_new(const fl_llm_opts *o, fl_llm **out, fl_err *e) {
    *out = NULL;
    const char *u = o->base_url;
    if (!u || (strncmp(u, "http://", 7) && strncmp(u, "https://", 8)))
        return fl_fail(e, FL_ERR_ARG, "--llm %s: an http:// or https:// URL is required",
                       u ? u : "(none)");
    const char *host = strstr(u, "//") + 2;
    const char *at = strchr(host, '@'), *slash = strchr(host, '/');
    if (at && (!slash || at < slash)) /* it would land in fuzzer_stats and logs */
        return fl_fail(e, FL_ERR_ARG, "--llm: credentials in the URL are refused; set "
                                      "FLARE_LLM_API_KEY or OPENAI_API_KEY instead");
    if (!o->model || !*o->model) return fl_fail(e, FL_ERR_ARG, "--llm-model: a model name is required");
    if (o->temperature < 0 || o->temperature > 2)
        return fl_fail(e, FL_ERR_ARG, "--llm-temperature %g: 0 to 2", o->temperature);
    fl_llm *l = calloc(1, sizeof *l);
    if (!l || !(l->base = strdup(u))) return free(l), fl_fail(e, FL_ERR_NOMEM, "out of memory");
    l->o = *o;
    size_t n = strlen(l->base);
    while (n > 0 && l->base[n - 1] == '/') l->base[--n] = 0;
    if (n >= 3 && !strcmp(l->base + n - 3, "/v1")) l->base[n - 3] = 0;
    const char *key = o->api_key;
    if (!key || !*key) key = getenv("FLARE_LLM_API_KEY");
    if (!key || !*key) key = getenv("OPENAI_API_KEY");
    fl_status st = FL_OK;
    if (key && *key) {
        size_t k = strlen(key) + 32;
        if ((l->auth = malloc(k))) snprintf(l->auth, k, "Authorization: Bearer %s", key);
        else st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
    }
    if (!st && o->cache_dir) {
        if (!(l->cache = strdup(o->cache_dir))) st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
        else st = fl_mkdirs(o->cache_dir, e);
    }
    l->o.base_url = l->base;
    l->o.cache_dir = l->cache;
    l->o.api_key = NULL;
    pthread_mutex_init(&l->mu, NULL);
    pthread_once(&curl_once, curl_init);
    if (st) return fl_llm_free(l), st;
    *out = l;
    return FL_OK;
}

static const char *const say_names[FL_LLM_SAY_COUNT_] = {"malformed-reply", "request-failure",
                                                        "budget"};

static void vsay(fl_llm *l, fl_llm_say_kind k, const char *fmt, va_list ap) {
    char msg[640];
    vsnprintf(msg, sizeof msg, fmt, ap);
    pthread_mutex_lock(&l->mu);
    double now = fl_now();
    int due = !l->said[k] || now - l->said_at[k] >= l->o.log_every_s;
    long held = 0;
    if (due) held = l->held[k], l->held[k] = 0, l->said[k] = 1, l->said_at[k] = now;
    else l->held[k]++;
    pthread_mutex_unlock(&l->mu);
    if (!due) return;
    if (held) fl_log(1, "%s (%ld more like it held back since the last one)\n", msg, held);
    else fl_log(1, "%s\n", msg);
}

void fl_llm_say(fl_llm *l, fl_llm_say_kind k, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsay(l, k, fmt, ap);
    va_end(ap);
}

void fl_llm_malformed(fl_llm *l, const char *fmt, ...) {
    pthread_mutex_lock(&l->mu);
    l->st.malformed++;
    pthread_mutex_unlock(&l->mu);
    va_list ap;
    va_start(ap, fmt);
    vsay(l, FL_LLM_SAY_MALFORMED, fmt, ap);
    va_end(ap);
}

void fl_llm_free(fl_llm *l) {
    if (!l) return;
    for (int k = 0; k < FL_LLM_SAY_COUNT_; k++) /* nothing held back goes unsaid */
        if (l->held[k]) fl_log(1, "llm: %ld more %s message%s held back\n", l->held[k], say_names[k], l->held[k] == 1 ? "" : "s");
    if (l->auth) explicit_bzero(l->auth, strlen(l->auth)); /* the key does not linger in freed memory */
    free(l->auth);
    free(l->base);
    free(l->cache);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

void fl_llm_stats_get(fl_llm *l, fl_llm_stats *s) {
    pthread_mutex_lock(&l->mu);
    *s = l->st;
    pthread_mutex_unlock(&l->mu);
}

uint64_t fl_llm_seed(const fl_llm *l) { return l->o.seed; }

int fl_llm_exhausted(fl_llm *l) {
    pthread_mutex_lock(&l->mu);
    int x = l->st.exhausted;
    pthread_mutex_unlock(&l->mu);
    return x;
}

/* Under l->mu: is the budget spent? */
static int spent(fl_llm *l) {
    const fl_llm_opts *o = &l->o;
    if ((o->max_calls > 0 && l->st.calls >= o->max_calls) ||
        (o->max_tokens > 0 && l->st.tokens >= o->max_tokens))
        l->st.exhausted = 1;
    return l->st.exhausted;
}

/* ---- the cache ------------------------------------------------------------------------------- */
static void cache_path(const fl_llm *l, const char *endpoint, const char *body, char *p, size_t n) {
    uint64_t a = fl_aghash_str(fl_aghash_str(FL_AGHASH_INIT, l->base), endpoint);
    uint64_t b = fl_aghash_u64(a, 0x5bd1e995u);
    a = fl_aghash_final(fl_aghash_str(a, body));
    b = fl_aghash_final(fl_aghash_str(b, body) ^ 0x9e3779b97f4a7c15ull);
    snprintf(p, n, "%s/%016llx%016llx.json", l->cache, (unsigned long long)a, (unsigned long long)b);
}

/* ---- HTTP ------------------------------------------------------------------------------------ */
typedef struct buf {
    fl_sb body;
    long retry_after_ms; /* -1: none */
} buf;

static size_t on_body(char *d, size_t sz, size_t nm, void *u) {
    buf *b = u;
    size_t k = sz * nm;
    if (b->body.n + k + 1 > (size_t)64 << 20) return 0; /* 64 MiB: not a chat reply */
    fl_sb_put(&b->body, d, k);
    return b->body.oom ? 0 : k;
}

static size_t on_header(char *d, size_t sz, size_t nm, void *u) {
    buf *b = u;
    size_t k = sz * nm;
    if (k > 12 && !strncasecmp(d, "retry-after:", 12)) {
        char tmp[64];
        size_t m = k - 12 < sizeof tmp - 1 ? k - 12 : sizeof tmp - 1;
        memcpy(tmp, d + 12, m);
        tmp[m] = 0;
        char *end;
        double s = strtod(tmp, &end); /* seconds; an HTTP date is ignored (backoff applies) */
        if (end != tmp && s >= 0) b->retry_after_ms = (long)(s * 1000);
    }
    return k;
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) && errno == EINTR) {}
}

/* One POST with retries. On success *resp is the body (malloc'd). */
static fl_status post(fl_llm *l, const char *endpoint, const char *body, char **resp, fl_err *e) {
    char url[4096];
    snprintf(url, sizeof url, "%s%s", l->base, endpoint);
    CURL *h = curl_easy_init();
    struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/json");
    if (l->auth) hd = curl_slist_append(hd, l->auth);
    if (!h || !hd) {
        curl_easy_cleanup(h), curl_slist_free_all(hd);
        return fl_fail(e, FL_ERR_NOMEM, "llm: out of memory");
    }
    fl_status st = FL_ERR_IO;
    char why[200] = "no attempt";
    for (int attempt = 0; attempt <= l->o.retries; attempt++) {
        pthread_mutex_lock(&l->mu);
        int over = spent(l);
        if (!over) l->st.calls++, l->st.retries += attempt > 0;
        long long calls = (long long)l->st.calls, tokens = (long long)l->st.tokens;
        pthread_mutex_unlock(&l->mu);
        if (over) {
            snprintf(why, sizeof why, "budget exhausted");
            fl_llm_say(l, FL_LLM_SAY_BUDGET, "llm: budget exhausted (%lld calls, %lld tokens): "
                       "no more LLM requests this run", calls, tokens);
            break;
        }
        buf b = {.retry_after_ms = -1};
        curl_easy_reset(h);
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
        curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
        curl_easy_setopt(h, CURLOPT_PROXY, "");     /* no proxy from the environment */
        curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)l->o.timeout_ms);
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)l->o.connect_timeout_ms);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
        curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(h, CURLOPT_HEADERDATA, &b);
        CURLcode rc = curl_easy_perform(h);
        long code = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        int retry = 0;
        if (rc != CURLE_OK) {
            snprintf(why, sizeof why, "%s", curl_easy_strerror(rc));
            retry = rc != CURLE_OUT_OF_MEMORY;
        } else if (code == 200 && b.body.p) {
            *resp = b.body.p;
            st = FL_OK;
            break;
        } else {
            snprintf(why, sizeof why, "HTTP %ld: %.120s", code, b.body.p ? b.body.p : "");
            retry = code == 429 || code >= 500;
        }
        free(b.body.p);
        if (!retry || attempt == l->o.retries) break;
        long ms = (long)l->o.backoff_ms << (attempt < 20 ? attempt : 20);
        if (b.retry_after_ms >= 0) ms = b.retry_after_ms;
        if (ms > l->o.max_backoff_ms) ms = l->o.max_backoff_ms;
        fl_log(2, "llm: %s: %s; retrying in %ld ms\n", endpoint, why, ms);
        sleep_ms(ms);
    }
    curl_slist_free_all(hd);
    curl_easy_cleanup(h);
    if (!st) return FL_OK;
    char msg[4400];
    snprintf(msg, sizeof msg, "llm %s%s: %s", l->base, endpoint, why);
    if (strcmp(why, "budget exhausted")) fl_llm_say(l, FL_LLM_SAY_HTTP, "%s", msg);
    return fl_fail(e, FL_ERR_IO, "%s", msg);
}

/* Cached POST of body: the parsed reply; usage tokens counted for fresh replies only.
 * valid() says whether a body is worth caching (a 200 with the wrong shape is not). */
static fl_status request_body(fl_llm *l, const char *endpoint, const char *body,
                              int (*valid)(const cJSON *), cJSON **out, fl_err *e) {
    char path[4200];
    *out = NULL;
    if (l->cache) {
        cache_path(l, endpoint, body, path, sizeof path);
        uint8_t *d;
        size_t n;
        fl_err ign;
        if (fl_file_read(path, &d, &n, &ign) == FL_OK) {
            cJSON *j = cJSON_ParseWithLength((const char *)d, n);
            free(d);
            if (j && valid(j)) {
                pthread_mutex_lock(&l->mu);
                l->st.cache_hits++;
                pthread_mutex_unlock(&l->mu);
                *out = j;
                return FL_OK;
            }
            cJSON_Delete(j);
        }
    }
    fl_status st;
    cJSON *j = NULL;
    for (int tries = 0; !j; tries++) { /* a 200 whose body is not the schema: try again once */
        char *resp = NULL;
        if ((st = post(l, endpoint, body, &resp, e))) break;
        j = cJSON_Parse(resp);
        const cJSON *u = cJSON_GetObjectItem(j, "usage");
        const cJSON *tt = cJSON_GetObjectItem(u, "total_tokens");
        double tok = cJSON_IsNumber(tt) ? tt->valuedouble : 0;
        if (!cJSON_IsNumber(tt)) {
            const cJSON *a = cJSON_GetObjectItem(u, "prompt_tokens"), *b = cJSON_GetObjectItem(u, "completion_tokens");
            tok = (cJSON_IsNumber(a) ? a->valuedouble : 0) + (cJSON_IsNumber(b) ? b->valuedouble : 0);
        }
        pthread_mutex_lock(&l->mu);
        if (tok > 0) l->st.tokens += (int64_t)tok;
        pthread_mutex_unlock(&l->mu);
        if (j && valid(j)) {
            if (l->cache) {
                fl_err ign;
                if (fl_file_write_atomic(path, resp, strlen(resp), &ign))
                    fl_log(1, "llm: cache: %s\n", ign.msg);
            }
            free(resp);
            break;
        }
        free(resp);
        cJSON_Delete(j);
        j = NULL;
        if (tries >= 1) {
            fl_llm_say(l, FL_LLM_SAY_HTTP, "llm %s%s: the reply is not an OpenAI-compatible response", l->base, endpoint);
            st = fl_fail(e, FL_ERR_IO, "llm %s%s: the reply is not an OpenAI-compatible response", l->base, endpoint);
            break;
        }
    }
    if (st) {
        pthread_mutex_lock(&l->mu);
        l->st.failures++;
        pthread_mutex_unlock(&l->mu);
        return st;
    }
    *out = j;
    return FL_OK;
}

/* request_body with the request r printed compactly; r is deleted. */
static fl_status request(fl_llm *l, const char *endpoint, cJSON *r, int (*valid)(const cJSON *),
                         cJSON **out, fl_err *e) {
    char *body = cJSON_PrintUnformatted(r);
    cJSON_Delete(r);
    *out = NULL;
    if (!body) return fl_fail(e, FL_ERR_NOMEM, "llm: out of memory");
    fl_status st = request_body(l, endpoint, body, valid, out, e);
    free(body);
    return st;
}

static const char *chat_content(const cJSON *j) {
    const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
    const cJSON *m = cJSON_GetObjectItem(cJSON_GetObjectItem(c, "message"), "content");
    return cJSON_IsString(m) ? m->valuestring : NULL;
}
static int chat_valid(const cJSON *j) { return chat_content(j) != NULL; }

fl_status fl_llm_chat_seed(fl_llm *l, int n, const fl_llm_msg *msgs, int json_mode,
                           uint64_t seed, char **reply, fl_err *e) {
    *reply = NULL;
    cJSON *r = cJSON_CreateObject(), *ms = cJSON_AddArrayToObject(r, "messages");
    cJSON_AddStringToObject(r, "model", l->o.model);
    for (int i = 0; ms && i < n; i++) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", msgs[i].role);
        cJSON_AddStringToObject(m, "content", msgs[i].content ? msgs[i].content : "");
        cJSON_AddItemToArray(ms, m);
    }
    /* temperature rounded to 1e-6 so that 0.7 read from two flag parsers keys the same */
    cJSON_AddNumberToObject(r, "temperature", (double)(int64_t)(l->o.temperature * 1e6 + 0.5) / 1e6);
    cJSON_AddNumberToObject(r, "seed", (double)(seed & ((1ull << 53) - 1)));
    if (l->o.max_reply_tokens > 0) cJSON_AddNumberToObject(r, "max_tokens", l->o.max_reply_tokens);
    if (json_mode) cJSON_AddStringToObject(cJSON_AddObjectToObject(r, "response_format"), "type", "json_object");
    cJSON *j;
    fl_status st = request(l, "/v1/chat/completions", r, chat_valid, &j, e);
    if (st) return st;
    *reply = strdup(chat_content(j));
    cJSON_Delete(j);
    return *reply ? FL_OK : fl_fail(e, FL_ERR_NOMEM, "llm: out of memory");
}

fl_status fl_llm_chat(fl_llm *l, int n, const fl_llm_msg *msgs, int json_mode, char **reply,
                      fl_err *e) {
    return fl_llm_chat_seed(l, n, msgs, json_mode, l->o.seed, reply, e);
}

static const cJSON *embedding(const cJSON *j) {
    const cJSON *d = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "data"), 0);
    const cJSON *v = cJSON_GetObjectItem(d, "embedding");
    return cJSON_IsArray(v) && cJSON_GetArraySize(v) > 0 ? v : NULL;
}
static int embed_valid(const cJSON *j) { return embedding(j) != NULL; }

fl_status fl_llm_embed(fl_llm *l, const char *text, float **v, int *dim, fl_err *e) {
    *v = NULL, *dim = 0;
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "model", l->o.model);
    cJSON_AddStringToObject(r, "input", text ? text : "");
    cJSON *j;
    fl_status st = request(l, "/v1/embeddings", r, embed_valid, &j, e);
    if (st) return st;
    const cJSON *a = embedding(j);
    int n = cJSON_GetArraySize(a);
    if (!(*v = malloc((size_t)n * sizeof **v))) return cJSON_Delete(j), fl_fail(e, FL_ERR_NOMEM, "llm: out of memory");
    int i = 0;
    for (const cJSON *x = a->child; x; x = x->next) (*v)[i++] = cJSON_IsNumber(x) ? (float)x->valuedouble : 0;
    *dim = n;
    cJSON_Delete(j);
    return FL_OK;
}
