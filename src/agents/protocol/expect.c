/* Per-seed expectations (include/flare/agents/expect.h): parsing, copying for mutants, and
 * writing back. The oracles check them (src/agents/oracle/oracle_expect.c). */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "flare/agents/expect.h"

static void strs_free(fl_strs *s) {
    for (int i = 0; i < s->n; i++) free(s->v[i]);
    free(s->v);
    *s = (fl_strs){0};
}

static int strs_copy(fl_strs *d, const fl_strs *s) {
    *d = (fl_strs){0};
    if (!s->n) return 0;
    if (!(d->v = calloc((size_t)s->n, sizeof *d->v))) return -1;
    for (; d->n < s->n; d->n++)
        if (!(d->v[d->n] = strdup(s->v[d->n]))) return -1;
    return 0;
}

void fl_expect_free(fl_expect *x) {
    if (!x) return;
    for (int i = 0; x->re && i < x->regex.n; i++) regfree(&x->re[i]);
    free(x->re);
    strs_free(&x->contains);
    strs_free(&x->not_contains);
    strs_free(&x->regex);
    strs_free(&x->must_call);
    strs_free(&x->must_not_call);
    free(x);
}

static int compile(fl_expect *x, char *why, size_t n) {
    if (!x->regex.n) return 0;
    if (!(x->re = calloc((size_t)x->regex.n, sizeof *x->re))) return -1;
    for (int i = 0; i < x->regex.n; i++) {
        int rc = regcomp(&x->re[i], x->regex.v[i], REG_EXTENDED | REG_NOSUB);
        if (rc) {
            regerror(rc, &x->re[i], why, n);
            for (int k = 0; k < i; k++) regfree(&x->re[k]);
            free(x->re);
            x->re = NULL;
            return i + 1;
        }
    }
    return 0;
}

/* a string or a non-empty array of non-empty strings */
static fl_status get_strs(const cJSON *v, const char *name, const char *key, fl_strs *out, fl_err *e) {
    int n = cJSON_IsString(v) ? 1 : cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 0;
    if (!n) return fl_fail(e, FL_ERR_FORMAT, "%s: expect.%s: expected a string or a non-empty array of strings", name, key);
    if (!(out->v = calloc((size_t)n, sizeof *out->v))) return fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", name);
    const cJSON *it = cJSON_IsString(v) ? v : v->child;
    for (int i = 0; i < n; i++, it = it->next) {
        if (!cJSON_IsString(it) || !it->valuestring[0])
            return fl_fail(e, FL_ERR_FORMAT, "%s: expect.%s[%d]: expected a non-empty string", name, key, i);
        if (!(out->v[out->n++] = strdup(it->valuestring))) return fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", name);
    }
    return FL_OK;
}

fl_status fl_expect_parse(const cJSON *v, const char *name, fl_expect **out, fl_err *e) {
    *out = NULL;
    if (!cJSON_IsObject(v)) return fl_fail(e, FL_ERR_FORMAT, "%s: expect: expected an object", name);
    fl_expect *x = calloc(1, sizeof *x);
    if (!x) return fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", name);
    static const char *const keys[] = {"contains", "not_contains", "regex", "must_call", "must_not_call"};
    fl_strs *slot[] = {&x->contains, &x->not_contains, &x->regex, &x->must_call, &x->must_not_call};
    fl_status st = FL_OK;
    for (const cJSON *m = v->child; !st && m; m = m->next) {
        int k = 0;
        while (k < 5 && strcmp(keys[k], m->string)) k++;
        if (k < 5) {
            if (slot[k]->n) st = fl_fail(e, FL_ERR_FORMAT, "%s: expect.%s: given twice", name, m->string);
            else st = get_strs(m, name, keys[k], slot[k], e);
        } else if (!strcmp(m->string, "max_turns")) {
            double d = cJSON_IsNumber(m) ? m->valuedouble : 0;
            if (!(d >= 1 && d <= 1e6) || d != (int)d)
                st = fl_fail(e, FL_ERR_FORMAT, "%s: expect.max_turns: expected an integer >= 1", name);
            else x->max_turns = (int)d;
        } else {
            st = fl_fail(e, FL_ERR_FORMAT,
                         "%s: expect.%s: unknown key (keys: contains, not_contains, regex, max_turns, must_call, "
                         "must_not_call)",
                         name, m->string);
        }
    }
    char why[160];
    int bad = st ? 0 : compile(x, why, sizeof why);
    if (bad < 0) st = fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", name);
    else if (bad > 0)
        st = fl_fail(e, FL_ERR_FORMAT, "%s: expect.regex[%d]: bad POSIX extended regex \"%s\": %s", name, bad - 1,
                     x->regex.v[bad - 1], why);
    if (st) {
        fl_expect_free(x);
        return st;
    }
    *out = x;
    return FL_OK;
}

fl_expect *fl_expect_copy(const fl_expect *x, int negatives_only, int *oom) {
    if (!x) return NULL;
    if (negatives_only && !x->not_contains.n && !x->must_not_call.n && !x->max_turns) return NULL;
    fl_expect *d = calloc(1, sizeof *d);
    char why[160];
    if (!d || strs_copy(&d->not_contains, &x->not_contains) || strs_copy(&d->must_not_call, &x->must_not_call) ||
        (!negatives_only && (strs_copy(&d->contains, &x->contains) || strs_copy(&d->regex, &x->regex) ||
                             strs_copy(&d->must_call, &x->must_call) || compile(d, why, sizeof why)))) {
        fl_expect_free(d);
        if (oom) *oom = 1;
        return NULL;
    }
    d->max_turns = x->max_turns;
    return d;
}

static void add_strs(cJSON *o, const char *key, const fl_strs *s) {
    if (!s->n) return;
    cJSON *a = cJSON_AddArrayToObject(o, key);
    for (int i = 0; a && i < s->n; i++) cJSON_AddItemToArray(a, cJSON_CreateString(s->v[i]));
}

cJSON *fl_expect_json(const fl_expect *x) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    add_strs(o, "contains", &x->contains);
    add_strs(o, "not_contains", &x->not_contains);
    add_strs(o, "regex", &x->regex);
    if (x->max_turns) cJSON_AddNumberToObject(o, "max_turns", x->max_turns);
    add_strs(o, "must_call", &x->must_call);
    add_strs(o, "must_not_call", &x->must_not_call);
    return o;
}
