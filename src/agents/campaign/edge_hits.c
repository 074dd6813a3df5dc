/* edges.json: how many executions took each inter-agent handoff (from -> to, as
 * fl_agtrace_edges reads a trace, declared or not), for the report's agent graph. The coverage
 * map only knows which edges were seen, hashed; these counts are by name so that a report,
 * written from the folder alone, can draw undeclared edges too. Written with fuzzer_stats;
 * a resumed campaign goes on from the recorded counts. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "agents/campaign/campaign_int.h"

typedef struct same_ctx {
    const camp_edges *h;
    const char *from, *to;
} same_ctx;

static int same_edge(const void *ctx, int64_t i) {
    const same_ctx *c = ctx;
    return !strcmp(c->h->v[i].from, c->from) && !strcmp(c->h->v[i].to, c->to);
}

static uint64_t edge_hash(const char *from, const char *to) {
    return fl_aghash_final(fl_aghash_str(fl_aghash_str(FL_AGHASH_INIT, from), to));
}

/* The entry of from -> to, added when new; NULL when out of memory. */
static camp_edge *edge_get(camp_edges *h, const char *from, const char *to) {
    uint64_t k = edge_hash(from, to);
    int64_t at, i = fl_index_find(&h->ix, k, same_edge, &(same_ctx){h, from, to}, &at);
    if (i >= 0) return &h->v[i];
    if (h->n == h->cap) {
        int cap = h->cap ? 2 * h->cap : 16;
        camp_edge *v = realloc(h->v, (size_t)cap * sizeof *v);
        if (!v) return NULL;
        h->v = v, h->cap = cap;
    }
    if (!fl_index_reserve(&h->ix, h->n + 1)) return NULL;
    fl_index_find(&h->ix, k, same_edge, &(same_ctx){h, from, to}, &at);
    camp_edge *x = &h->v[h->n];
    memset(x, 0, sizeof *x);
    x->from = strdup(from), x->to = strdup(to);
    if (!x->from || !x->to) {
        free(x->from), free(x->to);
        return NULL;
    }
    fl_index_put(&h->ix, at, k, h->n);
    return &h->v[h->n++];
}

int camp_edges_count(camp_edges *h, const fl_trace *t, const fl_spec *spec) {
    fl_agedge *ed;
    int n = fl_agtrace_edges(t, spec, &ed);
    if (n < 0) return -1;
    h->stamp++;
    int st = 0;
    for (int i = 0; i < n && !st; i++) {
        camp_edge *x = edge_get(h, ed[i].from ? ed[i].from : "?", ed[i].to ? ed[i].to : "?");
        if (!x) st = -1;
        else if (x->stamp != h->stamp) x->stamp = h->stamp, x->execs++; /* once per execution */
    }
    free(ed);
    return st;
}

fl_status camp_edges_write(const camp_edges *h, const char *out_dir, fl_err *e) {
    char path[4096];
    fl_status st = od_path(path, sizeof path, out_dir, "edges.json", e);
    if (st) return st;
    cJSON *j = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(j, "edges");
    for (int i = 0; arr && i < h->n; i++) {
        cJSON *o = cJSON_CreateObject();
        char *f = fl_utf8_dup(h->v[i].from, strlen(h->v[i].from));
        char *t = fl_utf8_dup(h->v[i].to, strlen(h->v[i].to));
        if (o && f && t) {
            cJSON_AddStringToObject(o, "from", f);
            cJSON_AddStringToObject(o, "to", t);
            cJSON_AddNumberToObject(o, "execs", (double)h->v[i].execs);
        }
        free(f), free(t);
        if (o) cJSON_AddItemToArray(arr, o);
    }
    char *txt = arr ? cJSON_Print(j) : NULL;
    cJSON_Delete(j);
    if (!txt) return fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", path);
    st = fl_file_write_atomic(path, txt, strlen(txt), e);
    free(txt);
    return st;
}

fl_status camp_edges_read(camp_edges *h, const char *path, fl_err *e) {
    uint8_t *buf;
    size_t len;
    fl_status st = fl_file_read(path, &buf, &len, e);
    if (st) return st;
    cJSON *j = cJSON_ParseWithLength((const char *)buf, len), *x;
    free(buf);
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "edges");
    if (!cJSON_IsArray(arr)) st = fl_fail(e, FL_ERR_FORMAT, "%s: not a JSON object with an \"edges\" array", path);
    int i = 0;
    cJSON_ArrayForEach(x, arr) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(x, "from"), *t = cJSON_GetObjectItemCaseSensitive(x, "to"),
                    *n = cJSON_GetObjectItemCaseSensitive(x, "execs");
        if (!cJSON_IsString(f) || !cJSON_IsString(t) || !cJSON_IsNumber(n) || n->valuedouble < 0) {
            st = fl_fail(e, FL_ERR_FORMAT, "%s: edges[%d]: needs \"from\", \"to\" (strings) and \"execs\" (a count)", path, i);
            break;
        }
        camp_edge *g = edge_get(h, f->valuestring, t->valuestring);
        if (!g) {
            st = fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", path);
            break;
        }
        g->execs += (uint64_t)n->valuedouble;
        i++;
    }
    cJSON_Delete(j);
    return st;
}

void camp_edges_free(camp_edges *h) {
    for (int i = 0; i < h->n; i++) free(h->v[i].from), free(h->v[i].to);
    free(h->v);
    fl_index_free(&h->ix);
    memset(h, 0, sizeof *h);
}
