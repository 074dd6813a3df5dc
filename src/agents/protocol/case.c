/* Cases: the request flare sends to the system under test, its JSON form, and the W3C trace
 * context that lets the system's own OpenTelemetry spans be joined to it.
 *
 * The request line is built with cJSON from sanitised strings: a mutated turn may hold any
 * bytes (a typo mutator can split a UTF-8 sequence), but the line sent must be valid UTF-8
 * JSON, or a strict target (Python's json.loads on a str) rejects the case for flare's fault.
 * Invalid sequences become U+FFFD, as a browser or Python's errors="replace" would do.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flare/agents/expect.h"
#include "flare/agents/protocol.h"

/* ---- UTF-8 ------------------------------------------------------------------------------- */
/* Length of the valid UTF-8 sequence at s[0..n), or 0 when it is not one (overlong forms,
 * surrogates and code points above U+10FFFF are invalid, as in RFC 3629). */
static size_t utf8_seq(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t len;
    unsigned min;
    if (c >= 0xC2 && c <= 0xDF) len = 2, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, min = 0x10000;
    else return 0;
    if (n < len) return 0;
    unsigned cp = c & (0x7Fu >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3Fu);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

char *fl_utf8_dup(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    size_t out = 0;
    /* two passes with the same rule: a NUL byte is a replacement too (it would end the string) */
    for (size_t i = 0; i < n;) {
        size_t k = u[i] ? utf8_seq(u + i, n - i) : 0;
        out += k ? k : 3;
        i += k ? k : 1;
    }
    char *d = malloc(out + 1), *p = d;
    if (!d) return NULL;
    for (size_t i = 0; i < n;) {
        size_t k = u[i] ? utf8_seq(u + i, n - i) : 0;
        if (k) memcpy(p, s + i, k);
        else memcpy(p, "\xEF\xBF\xBD", 3);
        p += k ? k : 3;
        i += k ? k : 1;
    }
    *p = 0;
    return d;
}

/* ---- cases --------------------------------------------------------------------------------- */
fl_case *fl_case_new(int n_turns, const char *const *turns) {
    fl_case *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    memcpy(c->id, "000000", 7);
    if (n_turns > 0) {
        c->turns = calloc((size_t)n_turns, sizeof *c->turns);
        if (!c->turns) {
            free(c);
            return NULL;
        }
    }
    c->n_turns = n_turns;
    for (int i = 0; i < n_turns; i++) {
        c->turns[i] = strdup(turns && turns[i] ? turns[i] : "");
        if (!c->turns[i]) {
            fl_case_free(c);
            return NULL;
        }
    }
    return c;
}

fl_case *fl_case_copy(const fl_case *c) {
    fl_case *d = fl_case_new(c->n_turns, (const char *const *)c->turns);
    if (!d) return NULL;
    memcpy(d->id, c->id, sizeof d->id);
    d->seed = c->seed;
    memcpy(d->traceparent, c->traceparent, sizeof d->traceparent);
    int oom = 0;
    d->expect = fl_expect_copy(c->expect, 0, &oom);
    if (oom) {
        fl_case_free(d);
        return NULL;
    }
    return d;
}

size_t fl_case_bytes(const fl_case *c) {
    size_t n = 0;
    for (int i = 0; i < c->n_turns; i++) n += strlen(c->turns[i]);
    return n;
}

void fl_case_free(fl_case *c) {
    if (!c) return;
    for (int i = 0; i < c->n_turns; i++) free(c->turns[i]);
    free(c->turns);
    fl_expect_free(c->expect);
    free(c);
}

void fl_case_new_trace(fl_case *c, fl_rng *r) {
    /* W3C Trace Context: version 00, 16-byte trace id, 8-byte parent (span) id, flags 01
     * (sampled). All-zero ids are invalid; a zero draw is redrawn. */
    uint64_t a, b, s;
    do {
        a = fl_rng_u64(r);
        b = fl_rng_u64(r);
    } while (!a && !b);
    do s = fl_rng_u64(r);
    while (!s);
    snprintf(c->traceparent, sizeof c->traceparent, "00-%016llx%016llx-%016llx-01",
             (unsigned long long)a, (unsigned long long)b, (unsigned long long)s);
}

int fl_traceparent_valid(const char *tp) {
    /* "00-" 32 hex "-" 16 hex "-" 2 hex, lower case, ids not all zero (W3C, level 1). */
    static const int len[4] = {2, 32, 16, 2};
    const char *p = tp;
    for (int f = 0; f < 4; f++) {
        int nonzero = 0;
        for (int i = 0; i < len[f]; i++, p++) {
            if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return 0;
            nonzero |= *p != '0';
        }
        if ((f == 1 || f == 2) && !nonzero) return 0;
        if (*p != (f < 3 ? '-' : 0)) return 0;
        p += f < 3;
    }
    return strncmp(tp, "ff", 2) != 0;
}

/* Add s to obj (or arr when key is NULL) as a valid UTF-8 string. */
static int add_str(cJSON *obj, const char *key, const char *s) {
    char *v = fl_utf8_dup(s, strlen(s));
    cJSON *j = v ? cJSON_CreateString(v) : NULL;
    free(v);
    if (!j) return -1;
    if (key) cJSON_AddItemToObject(obj, key, j);
    else cJSON_AddItemToArray(obj, j);
    return 0;
}

/* The request object; with_expect adds the case's "expect" (a case file's, never sent). */
static char *case_json(const fl_case *c, int with_expect) {
    cJSON *j = cJSON_CreateObject(), *turns = NULL;
    char seed[24], *out = NULL;
    if (!j || add_str(j, "id", c->id) < 0) goto done;
    if (!(turns = cJSON_AddArrayToObject(j, "turns"))) goto done;
    for (int i = 0; i < c->n_turns; i++)
        if (add_str(turns, NULL, c->turns[i]) < 0) goto done;
    /* Raw digits: a cJSON number is a double and would round seeds above 2^53. */
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)c->seed);
    if (!cJSON_AddRawToObject(j, "seed", seed)) goto done;
    if (c->traceparent[0] && add_str(j, "traceparent", c->traceparent) < 0) goto done;
    if (with_expect && c->expect) {
        cJSON *x = fl_expect_json(c->expect);
        if (!x || !cJSON_AddItemToObject(j, "expect", x)) {
            cJSON_Delete(x);
            goto done;
        }
    }
    out = cJSON_PrintUnformatted(j);
done:
    cJSON_Delete(j);
    return out;
}

char *fl_case_to_json(const fl_case *c) { return case_json(c, 0); }
char *fl_case_to_file_json(const fl_case *c) { return case_json(c, 1); }

/* The seed member: a non-negative integer. cJSON reads numbers as doubles, so a seed is exact
 * up to 2^53 (the interoperable range of RFC 7493); flare draws its seeds below that. */
static int parse_seed(const cJSON *v, uint64_t *seed) {
    if (!cJSON_IsNumber(v)) return -1;
    double d = v->valuedouble;
    if (!(d >= 0 && d <= 9007199254740992.0) || d != (double)(uint64_t)d) return -1;
    *seed = (uint64_t)d;
    return 0;
}

/* Case ids end up in file names (queue/id:000123,...): a short, plain alphabet, no '/'. */
static int id_ok(const char *id, size_t cap) {
    size_t n = strlen(id);
    if (n == 0 || n >= cap) return 0;
    for (size_t i = 0; i < n; i++)
        if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-", id[i]))
            return 0;
    return 1;
}

static fl_status parse_object(cJSON *j, const char *name, fl_case **out, fl_err *e) {
    const cJSON *turns = cJSON_GetObjectItemCaseSensitive(j, "turns");
    if (!cJSON_IsArray(turns))
        return fl_fail(e, FL_ERR_FORMAT, "%s: \"turns\" must be an array of strings", name);
    int n = cJSON_GetArraySize(turns);
    if (n < 1) return fl_fail(e, FL_ERR_FORMAT, "%s: \"turns\" is empty", name);
    fl_case *c = fl_case_new(n, NULL);
    if (!c) return fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", name);
    int i = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, turns) {
        if (!cJSON_IsString(t)) {
            fl_case_free(c);
            return fl_fail(e, FL_ERR_FORMAT, "%s: turn %d is not a string", name, i + 1);
        }
        free(c->turns[i]);
        if (!(c->turns[i++] = strdup(t->valuestring))) {
            fl_case_free(c);
            return fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", name);
        }
    }
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id"),
                *seed = cJSON_GetObjectItemCaseSensitive(j, "seed"),
                *tp = cJSON_GetObjectItemCaseSensitive(j, "traceparent");
    const char *bad = NULL;
    if (id && (!cJSON_IsString(id) || !id_ok(id->valuestring, sizeof c->id)))
        bad = "\"id\" must be 1 to 15 characters from A-Z a-z 0-9 . _ : -";
    else if (id)
        memcpy(c->id, id->valuestring, strlen(id->valuestring) + 1);
    if (!bad && seed && parse_seed(seed, &c->seed) < 0)
        bad = "\"seed\" must be a non-negative integer";
    if (!bad && tp && (!cJSON_IsString(tp) || !fl_traceparent_valid(tp->valuestring)))
        bad = "\"traceparent\" must be a W3C trace context 00-<32 hex>-<16 hex>-<2 hex>";
    else if (!bad && tp)
        memcpy(c->traceparent, tp->valuestring, strlen(tp->valuestring) + 1);
    if (bad) {
        fl_case_free(c);
        return fl_fail(e, FL_ERR_FORMAT, "%s: %s", name, bad);
    }
    const cJSON *ex = cJSON_GetObjectItemCaseSensitive(j, "expect");
    fl_status st;
    if (ex && (st = fl_expect_parse(ex, name, &c->expect, e))) {
        fl_case_free(c);
        return st;
    }
    *out = c;
    return FL_OK;
}

fl_status fl_case_parse(const char *text, size_t len, const char *name, fl_case **out, fl_err *e) {
    *out = NULL;
    if (!name) name = "case";
    /* A JSON object with a "turns" member is a request; any other text (a plain instruction,
     * or a JSON document that is itself the user's message) is one turn, verbatim. */
    cJSON *j = cJSON_ParseWithLength(text, len);
    if (cJSON_IsObject(j) && cJSON_GetObjectItemCaseSensitive(j, "turns")) {
        fl_status st = parse_object(j, name, out, e);
        cJSON_Delete(j);
        return st;
    }
    cJSON_Delete(j);
    char *turn = malloc(len + 1);
    if (!turn) return fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", name);
    memcpy(turn, text, len);
    turn[len] = 0;
    /* A text file ends with a newline that is not part of the message. */
    size_t n = strlen(turn);
    while (n > 0 && (turn[n - 1] == '\n' || turn[n - 1] == '\r')) turn[--n] = 0;
    const char *turns[1] = {turn};
    *out = fl_case_new(1, turns);
    free(turn);
    return *out ? FL_OK : fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", name);
}
