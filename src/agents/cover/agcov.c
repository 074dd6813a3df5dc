/* Module agents/cover — behavioural coverage of a trace: the features and the AFL-style map
 * (this file), the trace views and hashes coverage shares with the oracles (agcov_trace.c),
 * and the built-in output embedding and clustering behind the cluster feature (embed.c).
 * Depends on protocol. API: include/flare/agents/agcov.h; docs/agents-coverage.md.
 *
 * Behavioural coverage: feature extraction from a trace, AFL-style map with a virgin map, spec
 * coverage bookkeeping, reports. See include/flare/agents/agcov.h and docs/agents-coverage.md.
 *
 * A check walks the trace once and emits "raw" features (a map index, a family, a count);
 * raws with the same index are merged (summing counts, which only matters for edges: AFL
 * counts how often each edge was taken in one execution) and each merged entry is turned into
 * one bit: its hit-count bucket for edges, 1 for presence features. A bit not yet cleared in
 * the virgin map is new coverage, exactly as afl-fuzz's has_new_bits.
 */
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flare/agents/agcov.h"
#include "flare/agents/protocol.h"

#define MAP_MASK (FL_AGCOV_MAP_SIZE - 1)
#define MAX_DIM 4096

struct fl_agcov {
    const fl_spec *spec;
    fl_agcov_opts o;
    int64_t cases;
    int features, bits, by_kind[FL_AGF_COUNT_];
    fl_clusters *cl;
    uint8_t *edge_seen;  /* [spec->n_edges] */
    uint8_t **item_seen; /* [spec->n_agents][agent n_items] */
    int *items_seen;     /* [spec->n_agents] */
    uint8_t virgin[FL_AGCOV_MAP_SIZE];
    fl_agcov_embedder embed; /* external output embedding, or NULL: the built-in n-grams */
    void *embed_user;
};

static const char *const kind_names[FL_AGF_COUNT_] = {"edge",  "tool",  "branch", "tool2",  "tool3",
                                                      "path3", "error", "turns",  "cluster"};

const char *fl_agfeat_name(fl_agfeat_kind k) { return k < FL_AGF_COUNT_ ? kind_names[k] : "?"; }

/* The final output's embedding in v[embed_dim], L2-normalised; 0 when there is nothing to
 * embed (blank output). An external embedder's vector is folded into embed_dim dimensions
 * (v[i % dim] += x[i], the hashing trick, which keeps inner products on average). */
static int embed_output(const fl_agcov *c, const char *text, float *v) {
    size_t len = text ? strlen(text) : 0;
    int dim = c->o.embed_dim;
    if (c->embed && len > 0) {
        float *x = NULL;
        int n = 0;
        if (c->embed(c->embed_user, text, &x, &n) == 0 && n > 0) {
            double norm = 0;
            for (int i = 0; i < dim; i++) v[i] = 0;
            for (int i = 0; i < n; i++) v[i % dim] += x[i];
            for (int i = 0; i < dim; i++) norm += (double)v[i] * v[i];
            free(x);
            if (norm > 0) {
                float s = (float)(1.0 / sqrt(norm));
                for (int i = 0; i < dim; i++) v[i] *= s;
                return 1;
            }
        } else {
            free(x);
        }
    }
    return fl_embed_text(text, len, c->o.embed_ngram, v, dim);
}

void fl_agcov_set_embedder(fl_agcov *c, fl_agcov_embedder fn, void *user) {
    c->embed = fn;
    c->embed_user = user;
}


uint8_t fl_agcov_bucket(uint64_t n) {
    if (n <= 2) return (uint8_t)n;
    if (n == 3) return 4;
    if (n <= 7) return 8;
    if (n <= 15) return 16;
    if (n <= 31) return 32;
    if (n <= 127) return 64;
    return 128;
}

const char *fl_agcov_bucket_name(uint8_t b) {
    switch (b) {
    case 0: return "0";
    case 1: return "1";
    case 2: return "2";
    case 4: return "3";
    case 8: return "4-7";
    case 16: return "8-15";
    case 32: return "16-31";
    case 64: return "32-127";
    case 128: return "128+";
    default: return "?";
    }
}

void fl_agcov_opts_default(fl_agcov_opts *o) {
    *o = (fl_agcov_opts){.embed_dim = 512, .embed_ngram = 3, .cluster_cos = 0.5f, .max_clusters = 1024,
                         .families = (1u << FL_AGF_COUNT_) - 1};
}

fl_status fl_agcov_new(const fl_spec *spec, const fl_agcov_opts *o, fl_agcov **out, fl_err *e) {
    *out = NULL;
    fl_agcov_opts d;
    fl_agcov_opts_default(&d);
    if (!o) o = &d;
    if (o->embed_dim < 16 || o->embed_dim > MAX_DIM)
        return fl_fail(e, FL_ERR_ARG, "agents coverage: embedding dimensions %d not in 16..%d", o->embed_dim, MAX_DIM);
    if (o->embed_ngram < 1 || o->embed_ngram > 8)
        return fl_fail(e, FL_ERR_ARG, "agents coverage: n-gram length %d not in 1..8", o->embed_ngram);
    if (!(o->cluster_cos > -1.0f && o->cluster_cos <= 1.0f) || o->max_clusters < 1)
        return fl_fail(e, FL_ERR_ARG, "agents coverage: cluster cosine %g not in (-1, 1] or max clusters %d < 1",
                       (double)o->cluster_cos, o->max_clusters);
    fl_agcov *c = calloc(1, sizeof *c);
    if (!c) return fl_fail(e, FL_ERR_NOMEM, "agents coverage: out of memory");
    c->spec = spec;
    c->o = *o;
    memset(c->virgin, 0xff, sizeof c->virgin);
    int ok = (c->cl = fl_clusters_new(o->embed_dim, o->cluster_cos, o->max_clusters)) != NULL;
    if (ok && spec) {
        ok = (c->edge_seen = calloc((size_t)spec->n_edges + 1, 1)) && (c->item_seen = calloc((size_t)spec->n_agents, sizeof *c->item_seen)) &&
             (c->items_seen = calloc((size_t)spec->n_agents, sizeof *c->items_seen));
        for (int a = 0; ok && a < spec->n_agents; a++)
            ok = (c->item_seen[a] = calloc((size_t)spec->agents[a].n_items + 1, 1)) != NULL;
    }
    if (!ok) {
        fl_agcov_free(c);
        return fl_fail(e, FL_ERR_NOMEM, "agents coverage: out of memory");
    }
    *out = c;
    return FL_OK;
}

void fl_agcov_free(fl_agcov *c) {
    if (!c) return;
    fl_clusters_free(c->cl);
    if (c->item_seen)
        for (int a = 0; a < c->spec->n_agents; a++) free(c->item_seen[a]);
    free(c->item_seen);
    free(c->items_seen);
    free(c->edge_seen);
    free(c);
}

/* ---- feature extraction ------------------------------------------------------------------ */
typedef struct raw {
    uint32_t idx, count, order;
    uint8_t kind, counted;
    char *text; /* only when listing */
} raw;

typedef struct walk {
    const fl_agcov *c;
    raw *r;
    int n, cap, text, oom;
    int new_cluster; /* the output would start a new cluster */
    int cluster_id;  /* its cluster when known, else -1 */
    raw stack[128];
} walk;

static void emit(walk *w, fl_agfeat_kind kind, uint64_t h, int counted, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void emit(walk *w, fl_agfeat_kind kind, uint64_t h, int counted, const char *fmt, ...) {
    if (!(w->c->o.families & (1u << kind)) || w->oom) return;
    if (w->n == w->cap) {
        int cap = w->cap * 2;
        raw *p = w->r == w->stack ? malloc((size_t)cap * sizeof *p) : realloc(w->r, (size_t)cap * sizeof *p);
        if (!p) {
            w->oom = 1;
            return;
        }
        if (w->r == w->stack) memcpy(p, w->stack, sizeof w->stack);
        w->r = p;
        w->cap = cap;
    }
    raw *r = &w->r[w->n];
    *r = (raw){(uint32_t)(fl_aghash_final(fl_aghash_u64(h, kind)) & MAP_MASK), 1, (uint32_t)w->n, (uint8_t)kind,
               (uint8_t)counted, NULL};
    if (w->text) {
        if (!(r->text = malloc(160))) {
            w->oom = 1;
            return;
        }
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->text, 160, fmt, ap);
        va_end(ap);
    }
    w->n++;
}

static uint64_t hs(const char *a, const char *b, const char *c) {
    return fl_aghash_str(fl_aghash_str(fl_aghash_str(FL_AGHASH_INIT, a), b), c);
}

#define S(x) ((x) ? (x) : "?")

/* The leading token of an error message: up to the first ':', '(', '[', ',', ';' or space. */
static void error_token(const char *msg, char *out, size_t cap) {
    size_t k = 0;
    const char *p = msg ? msg : "";
    while (*p == ' ' || *p == '\t') p++;
    while (*p && !strchr(":([,; \t\r\n", *p) && k + 1 < cap) out[k++] = *p++;
    out[k] = 0;
    if (!k) snprintf(out, cap, "(empty)");
}

typedef struct toolhist {
    const char *agent, *t1, *t2; /* last and second-last tool */
} toolhist;

static void walk_events(walk *w, const fl_trace *t) {
    toolhist hist_stack[16], *hist = hist_stack;
    int nh = 0, caph = 16;
    for (int i = 0; i < t->n_events && !w->oom; i++) {
        const fl_event *ev = &t->events[i];
        if (ev->kind == FL_EV_TOOL_CALL) {
            emit(w, FL_AGF_TOOL, hs(ev->agent, ev->tool, ""), 0, "tool %s: %s", S(ev->agent), S(ev->tool));
            int k = 0;
            while (k < nh && strcmp(hist[k].agent, S(ev->agent))) k++;
            if (k == nh) {
                if (nh == caph) {
                    toolhist *p = hist == hist_stack ? malloc(sizeof hist_stack * 2) : realloc(hist, (size_t)caph * 2 * sizeof *p);
                    if (!p) {
                        w->oom = 1;
                        break;
                    }
                    if (hist == hist_stack) memcpy(p, hist_stack, sizeof hist_stack);
                    hist = p, caph *= 2;
                }
                hist[nh++] = (toolhist){S(ev->agent), NULL, NULL};
            }
            toolhist *h = &hist[k];
            const char *tool = S(ev->tool);
            if (h->t1)
                emit(w, FL_AGF_TOOL2, hs(h->agent, h->t1, tool), 0, "tool2 %s: %s>%s", h->agent, h->t1, tool);
            if (h->t2)
                emit(w, FL_AGF_TOOL3, fl_aghash_str(hs(h->agent, h->t2, h->t1), tool), 0, "tool3 %s: %s>%s>%s",
                     h->agent, h->t2, h->t1, tool);
            h->t2 = h->t1;
            h->t1 = tool;
        } else if (ev->kind == FL_EV_TOOL_RESULT && !ev->ok) {
            emit(w, FL_AGF_ERROR, hs("tool_fail", ev->agent, ev->tool), 0, "error %s: tool %s failed", S(ev->agent),
                 S(ev->tool));
        } else if (ev->kind == FL_EV_BRANCH) {
            emit(w, FL_AGF_BRANCH, fl_aghash_str(hs(ev->agent, ev->point, ev->choice), ""), 0, "branch %s: %s=%s",
                 S(ev->agent), S(ev->point), S(ev->choice));
        } else if (ev->kind == FL_EV_ERROR) {
            char tok[40];
            error_token(ev->content, tok, sizeof tok);
            emit(w, FL_AGF_ERROR, hs("error", ev->agent, tok), 0, "error %s: %s", S(ev->agent), tok);
        }
    }
    if (hist != hist_stack) free(hist);
}

static void walk_edges(walk *w, const fl_trace *t) {
    fl_agedge *e;
    int n = fl_agtrace_edges(t, w->c->spec, &e);
    if (n < 0) {
        w->oom = 1;
        return;
    }
    for (int i = 0; i < n; i++) {
        emit(w, FL_AGF_EDGE, hs(e[i].from, e[i].to, ""), 1, "edge %s->%s", S(e[i].from), S(e[i].to));
        if (i < 2) continue;
        const fl_agedge *a = &e[i - 2], *b = &e[i - 1], *c = &e[i];
        uint64_t h = fl_aghash_str(fl_aghash_str(fl_aghash_str(hs(a->from, a->to, b->from), b->to), c->from), c->to);
        if (!strcmp(S(a->to), S(b->from)) && !strcmp(S(b->to), S(c->from)))
            emit(w, FL_AGF_PATH3, h, 0, "path3 %s>%s>%s>%s", S(a->from), S(b->from), S(c->from), S(c->to));
        else
            emit(w, FL_AGF_PATH3, h, 0, "path3 %s->%s, %s->%s, %s->%s", S(a->from), S(a->to), S(b->from), S(b->to),
                 S(c->from), S(c->to));
    }
    free(e);
}

static void walk_trace(walk *w, const fl_trace *t) {
    walk_edges(w, t);
    walk_events(w, t);
    if (t->exit != FL_EXIT_DONE) {
        const char *how = fl_exit_kind_name(t->exit);
        emit(w, FL_AGF_ERROR, hs("exit", how, ""), 0, "error exit: %s", how);
    }
    if (t->n_protocol > 0) emit(w, FL_AGF_ERROR, hs("protocol", "", ""), 0, "error protocol problem");
    uint8_t bt = fl_agcov_bucket((uint64_t)fl_agtrace_turns(t)), bm = fl_agcov_bucket((uint64_t)fl_agtrace_messages(t));
    emit(w, FL_AGF_TURNS, fl_aghash_u64(hs("turns", "", ""), bt), 0, "turns agent %s", fl_agcov_bucket_name(bt));
    emit(w, FL_AGF_TURNS, fl_aghash_u64(hs("messages", "", ""), bm), 0, "turns messages %s", fl_agcov_bucket_name(bm));

    /* the final output's semantic cluster */
    if (!(w->c->o.families & (1u << FL_AGF_CLUSTER))) return;
    int o = fl_agtrace_last_output(t);
    const char *text = o >= 0 ? t->events[o].content : NULL;
    if (o < 0) {
        emit(w, FL_AGF_CLUSTER, hs("cluster", "none", ""), 0, "cluster none (no output)");
        return;
    }
    int id = w->cluster_id; /* known when committing */
    if (id < 0) {
        float v[MAX_DIM];
        if (embed_output(w->c, text, v) == 0) {
            emit(w, FL_AGF_CLUSTER, hs("cluster", "empty", ""), 0, "cluster empty (blank output)");
            return;
        }
        id = fl_clusters_find(w->c->cl, v);
    }
    if (id < 0) {
        w->new_cluster = 1;
        id = fl_clusters_count(w->c->cl); /* the id it would get */
    }
    emit(w, FL_AGF_CLUSTER, fl_aghash_u64(hs("cluster", "id", ""), (uint64_t)id), 0, "cluster %d%s", id,
         w->new_cluster ? " (new)" : "");
}

static int cmp_idx(const void *a, const void *b) {
    const raw *x = a, *y = b;
    if (x->idx != y->idx) return x->idx < y->idx ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

static int cmp_order(const void *a, const void *b) {
    const raw *x = a, *y = b;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* Sort by map index and merge equal indices; returns the merged count. */
static int merge(walk *w) {
    qsort(w->r, (size_t)w->n, sizeof *w->r, cmp_idx);
    int m = 0;
    for (int i = 0; i < w->n; i++) {
        if (m && w->r[m - 1].idx == w->r[i].idx) {
            w->r[m - 1].count += w->r[i].count;
            w->r[m - 1].counted |= w->r[i].counted;
            free(w->r[i].text);
            continue;
        }
        w->r[m++] = w->r[i];
    }
    return w->n = m;
}

static void walk_done(walk *w) {
    for (int i = 0; i < w->n; i++) free(w->r[i].text);
    if (w->r != w->stack) free(w->r);
}

static uint8_t bit_of(const raw *r) { return r->counted ? fl_agcov_bucket(r->count) : 1; }

static void walk_init(walk *w, const fl_agcov *c, int text) {
    w->c = c;
    w->r = w->stack;
    w->cap = (int)(sizeof w->stack / sizeof *w->stack);
    w->n = w->oom = w->new_cluster = 0;
    w->text = text;
    w->cluster_id = -1;
}

/* Shared by check and commit: has_new_bits over the merged features. */
static int classify(const fl_agcov *c, const walk *w, int *n_new) {
    int ret = w->new_cluster ? 2 : 0, nn = 0;
    for (int i = 0; i < w->n; i++) {
        uint8_t b = bit_of(&w->r[i]), v = c->virgin[w->r[i].idx];
        if (!(b & v)) continue;
        nn++;
        if (v == 0xff) ret = 2;
        else if (ret < 1) ret = 1;
    }
    if (w->new_cluster && nn == 0) nn = 1;
    if (n_new) *n_new = nn;
    return ret;
}

int fl_agcov_check(const fl_agcov *c, const fl_trace *t, int *n_new) {
    walk w;
    walk_init(&w, c, 0);
    walk_trace(&w, t);
    int ret = w.oom ? -1 : (merge(&w), classify(c, &w, n_new));
    walk_done(&w);
    return ret;
}

/* Mark the spec's edges, tools and choices that t exercised. */
static void commit_spec(fl_agcov *c, const fl_trace *t) {
    const fl_spec *s = c->spec;
    fl_agedge *e;
    int n = fl_agtrace_edges(t, s, &e);
    for (int i = 0; i < n; i++) {
        int k = fl_spec_edge_find(s, fl_spec_agent_find(s, e[i].from), fl_spec_agent_find(s, e[i].to));
        if (k >= 0) c->edge_seen[k] = 1;
    }
    free(e);
    for (int i = 0; i < t->n_events; i++) {
        const fl_event *ev = &t->events[i];
        int a = fl_spec_agent_find(s, ev->agent), item = -1;
        if (a < 0) continue;
        if (ev->kind == FL_EV_TOOL_CALL) {
            int k = fl_spec_tool_find(s, a, ev->tool);
            if (k >= 0) item = fl_spec_item_tool(s, a, k);
        } else if (ev->kind == FL_EV_BRANCH) {
            int ch, p = fl_spec_point_find(s, a, ev->point, ev->choice, &ch);
            if (p >= 0 && ch >= 0) item = fl_spec_item_choice(s, a, p, ch);
        }
        if (item >= 0 && !c->item_seen[a][item]) {
            c->item_seen[a][item] = 1;
            c->items_seen[a]++;
        }
    }
}

int fl_agcov_commit(fl_agcov *c, const fl_trace *t, int *n_new) {
    walk w;
    walk_init(&w, c, 0);
    /* create the output's cluster first, so that its feature is the committed id */
    int o = (c->o.families & (1u << FL_AGF_CLUSTER)) ? fl_agtrace_last_output(t) : -1;
    int was_new = 0;
    if (o >= 0) {
        float v[MAX_DIM];
        const char *text = t->events[o].content;
        if (embed_output(c, text, v) > 0) {
            int before = fl_clusters_count(c->cl);
            w.cluster_id = fl_clusters_assign(c->cl, v);
            if (w.cluster_id == -2) return -1;
            was_new = fl_clusters_count(c->cl) > before;
        }
    }
    walk_trace(&w, t);
    if (w.oom) {
        walk_done(&w);
        return -1;
    }
    merge(&w);
    w.new_cluster = was_new;
    int ret = classify(c, &w, n_new);
    for (int i = 0; i < w.n; i++) {
        uint8_t b = bit_of(&w.r[i]), *v = &c->virgin[w.r[i].idx];
        if (!(b & *v)) continue;
        if (*v == 0xff) c->features++, c->by_kind[w.r[i].kind]++;
        c->bits++;
        *v &= (uint8_t)~b;
    }
    walk_done(&w);
    if (c->spec) commit_spec(c, t);
    c->cases++;
    return ret;
}

int fl_agcov_features(const fl_agcov *c, const fl_trace *t, fl_agfeature **out) {
    *out = NULL;
    walk w;
    walk_init(&w, c, 1);
    walk_trace(&w, t);
    if (w.oom) {
        walk_done(&w);
        return -1;
    }
    merge(&w);
    qsort(w.r, (size_t)w.n, sizeof *w.r, cmp_order);
    fl_agfeature *f = calloc((size_t)w.n + 1, sizeof *f);
    if (!f) {
        walk_done(&w);
        return -1;
    }
    for (int i = 0; i < w.n; i++) {
        const raw *r = &w.r[i];
        uint8_t b = bit_of(r), v = c->virgin[r->idx];
        f[i].kind = (fl_agfeat_kind)r->kind;
        f[i].index = r->idx;
        f[i].bucket = b;
        f[i].is_new = (b & v) ? (v == 0xff ? 2 : 1) : 0;
        if (r->kind == FL_AGF_CLUSTER && w.new_cluster && strstr(r->text, "(new)")) f[i].is_new = 2;
        if (r->counted)
            snprintf(f[i].text, sizeof f[i].text, "%s x%s", r->text, fl_agcov_bucket_name(b));
        else
            snprintf(f[i].text, sizeof f[i].text, "%s", r->text);
    }
    int n = w.n;
    walk_done(&w);
    *out = f;
    return n;
}

void fl_agcov_report_get(const fl_agcov *c, fl_agcov_report *r) {
    memset(r, 0, sizeof *r);
    r->cases = c->cases;
    r->features = c->features;
    r->bits = c->bits;
    memcpy(r->by_kind, c->by_kind, sizeof r->by_kind);
    r->clusters = fl_clusters_count(c->cl);
    r->inter = r->intra = -1;
    const fl_spec *s = c->spec;
    if (!s) return;
    r->has_spec = 1;
    r->edges_total = s->n_edges;
    for (int i = 0; i < s->n_edges; i++) r->edges_seen += c->edge_seen[i];
    r->inter = s->n_edges ? (double)r->edges_seen / s->n_edges : -1;
    double sum = 0;
    int n = 0;
    for (int a = 0; a < s->n_agents; a++) {
        if (!s->agents[a].n_items) continue;
        sum += (double)c->items_seen[a] / s->agents[a].n_items;
        n++;
    }
    if (n) r->intra = sum / n;
}

void fl_agcov_agent(const fl_agcov *c, int a, int *seen, int *declared) {
    *seen = *declared = 0;
    if (!c->spec || a < 0 || a >= c->spec->n_agents) return;
    *seen = c->items_seen[a];
    *declared = c->spec->agents[a].n_items;
}

int fl_agcov_edge_seen(const fl_agcov *c, int i) {
    return c->spec && i >= 0 && i < c->spec->n_edges && c->edge_seen[i];
}

int fl_agcov_item_seen(const fl_agcov *c, int a, int item) {
    return c->spec && a >= 0 && a < c->spec->n_agents && item >= 0 &&
           item < c->spec->agents[a].n_items && c->item_seen[a][item];
}
