/* Layer-level criteria: TKNC (top-k neurons of each layer) and TKNP (top-k patterns).
 *
 * "Top k" of a layer for one input: the k neurons with the largest values, ties going to the
 * lower neuron index (a stable descending sort; numpy's default argsort is not stable, so the
 * reference tools are unspecified on exact ties). Found by a partial insertion selection:
 * O(width * k) per layer with k small (3 by default). A layer narrower than k contributes all
 * of its neurons. */
#include <stdlib.h>
#include <string.h>

#include "core/simd.h"
#include "cover_int.h"

typedef struct {
    int64_t k;
    size_t key_ints; /* TKNP: sum over layers of min(k, width) */
} topk_params;

/* idx[0..min(k,w)) = top-k neuron indices of v[0..w), best first. top[] is scratch of k.
 * Once k values are held, a block of 8 values none of which beats the k-th best is skipped
 * with one vector comparison (most blocks, for k small). */
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

FL_HOT_CLONES
static int64_t select_topk(const float *v, int64_t w, int64_t k, float *top, int32_t *idx) {
    int64_t n = 0, j = 0;
    while (j < w) {
        if (n == k && j + 8 <= w) {
            v8f x, t = {0};
            t += top[k - 1];
            memcpy(&x, v + j, sizeof x);
            v8i gt = x > t;
            uint64_t any[4];
            memcpy(any, &gt, sizeof any);
            if (!(any[0] | any[1] | any[2] | any[3])) {
                j += 8;
                continue;
            }
        }
        int64_t end = n == k && j + 8 <= w ? j + 8 : j + 1;
        for (; j < end; j++) {
            float x = v[j];
            if (n == k && !(x > top[k - 1])) continue;
            int64_t p = n < k ? n++ : k - 1;
            while (p > 0 && top[p - 1] < x) {
                top[p] = top[p - 1];
                idx[p] = idx[p - 1];
                p--;
            }
            top[p] = x;
            idx[p] = (int32_t)j;
        }
    }
    return n;
}

/* The same for k == 3 (the default) without branches: whether a value enters the top three is
 * a coin toss on real data, and the insertion's mispredicted jumps cost more than computing
 * every case and selecting. Strict comparisons keep the lower index first on ties, as above. */
FL_HOT_CLONES
static int64_t select_top3(const float *v, int64_t w, float *top, int32_t *idx) {
    if (w <= 3) return select_topk(v, w, 3, top, idx);
    select_topk(v, 3, 3, top, idx);
    float t0 = top[0], t1 = top[1], t2 = top[2];
    int32_t i0 = idx[0], i1 = idx[1], i2 = idx[2];
    for (int64_t j = 3; j < w; j++) {
        float x = v[j];
        int c0 = x > t0, c1 = x > t1, c2 = x > t2;
        int32_t jj = (int32_t)j;
        float n2 = c1 ? t1 : c2 ? x : t2, n1 = c0 ? t0 : c1 ? x : t1;
        int32_t m2 = c1 ? i1 : c2 ? jj : i2, m1 = c0 ? i0 : c1 ? jj : i1;
        t2 = n2, i2 = m2, t1 = n1, i1 = m1;
        t0 = c0 ? x : t0, i0 = c0 ? jj : i0;
    }
    top[0] = t0, top[1] = t1, top[2] = t2;
    idx[0] = i0, idx[1] = i1, idx[2] = i2;
    return 3;
}

/* The top k of one layer: the branch-free form for k == 3 on layers too narrow for the
 * vector skip to pay (in a wide layer most values never reach a comparison). Measured with
 * perf on LeNet-5 coverage: 40 % fewer samples in the selection; the branch-free form on
 * every layer gave no gain. */
static int64_t select_any(const float *v, int64_t w, int64_t k, float *top, int32_t *idx) {
    return k == 3 && w < 32 ? select_top3(v, w, top, idx) : select_topk(v, w, k, top, idx);
}

static fl_status topk_init(fl_cover *c, const fl_cover_ctx *ctx, const char *arg, int pattern,
                           fl_err *e) {
    const fl_layerset *ls = ctx->ls;
    char buf[64], *part[1];
    int n;
    int64_t k = 3;
    fl_status st = fl_cover__args(c, arg, buf, sizeof buf, part, 1, &n, e);
    if (st == FL_OK && n == 1) st = fl_cover__int(c, part[0], 1, 1 << 20, &k, e);
    if (st != FL_OK) return st;
    topk_params *p = calloc(1, sizeof *p);
    if (!p) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    c->params = p;
    p->k = k;
    c->topk_k = (int)k;
    int64_t widest = 0;
    for (int l = 0; l < ls->n; l++) {
        p->key_ints += (size_t)(ls->width[l] < k ? ls->width[l] : k);
        if (ls->width[l] > widest) widest = ls->width[l];
    }
    /* scratch: top values (k floats) + one pattern (key_ints int32) */
    int64_t kk = k < widest ? k : widest;
    st = fl_cover_scratch(c, sizeof(float) * (size_t)kk + sizeof(int32_t) * p->key_ints, e);
    if (st != FL_OK) return st;
    return pattern ? fl_cover_layout_keys(c, sizeof(int32_t) * p->key_ints, "patterns", e)
                   : fl_cover_layout(c, ls->n, FL_LAYER_NAMES(ls), ls->width, e);
}

static fl_status tknc_init(fl_cover *c, const fl_cover_ctx *x, const char *a, fl_err *e) {
    return topk_init(c, x, a, 0, e);
}
static fl_status tknp_init(fl_cover *c, const fl_cover_ctx *x, const char *a, fl_err *e) {
    return topk_init(c, x, a, 1, e);
}

/* Ascending insertion sort of a few indices. */
static void sort_small(int32_t *a, int64_t n) {
    for (int64_t i = 1; i < n; i++) {
        int32_t v = a[i];
        int64_t p = i;
        for (; p > 0 && a[p - 1] > v; p--) a[p] = a[p - 1];
        a[p] = v;
    }
}

int64_t fl_cover__topk_len(const fl_layerset *ls, int64_t k) {
    int64_t n = 0;
    for (int l = 0; l < ls->n; l++) n += ls->width[l] < k ? ls->width[l] : k;
    return n;
}

/* Where layer l's part starts in one input's lists. */
static int64_t list_start(const fl_layerset *ls, int64_t k, int l) {
    int64_t at = 0;
    for (int q = 0; q < l; q++) at += ls->width[q] < k ? ls->width[q] : k;
    return at;
}

void fl_cover__topk_fill(const fl_layerset *ls, const fl_model *m, const float *mean, int n,
                         int64_t k, int32_t *out, float *top) {
    int64_t len = fl_cover__topk_len(ls, k);
    for (int i = 0; i < n; i++, mean += ls->total) {
        int32_t *row = out + i * len, *at = row;
        for (int l = 0; l < ls->n; l++) {
            int64_t w = ls->width[l], got = w < k ? w : k;
            /* A dense Relu layer keeps its input's positive values in their order: when the
             * input layer's list (already made) holds only positive values, it is this
             * layer's list too. (Not for a convolutional layer: the mean of Relu(x) over a
             * channel is not Relu of its mean.) */
            int src = ls->relu_of && m ? ls->relu_of[l] : -1;
            const int32_t *sl = src >= 0 && src < l ? row + list_start(ls, k, src) : NULL;
            if (sl && m->values[ls->value[l]].t.ndim == 2 &&
                mean[ls->offset[src] + sl[got - 1]] > 0)
                memcpy(at, sl, sizeof(int32_t) * (size_t)got);
            else
                select_any(mean + ls->offset[l], w, k, top, at);
            at += got;
        }
    }
}

static fl_status topk_update(fl_cover *c, const fl_cover_batch *b, uint8_t *added, int pattern,
                             fl_err *e) {
    const topk_params *p = c->params;
    const fl_layerset *ls = c->ctx.ls;
    int64_t kk = p->key_ints ? p->k : 0;
    int64_t widest = 0;
    for (int l = 0; l < ls->n; l++) widest = ls->width[l] > widest ? ls->width[l] : widest;
    if (kk > widest) kk = widest;
    float *top = c->scratch;
    int32_t *key = (int32_t *)(void *)((char *)c->scratch + sizeof(float) * (size_t)kk);
    /* the batch's shared lists when they are long enough */
    int shared = b->topk && b->topk_k >= p->k;
    const int32_t *lists = shared ? b->topk : NULL;
    for (int i = 0; i < b->n; i++) {
        int new = 0;
        int32_t *at = key;
        for (int l = 0; l < ls->n; l++) {
            int64_t w = ls->width[l], got = w < p->k ? w : p->k;
            if (shared) {
                memcpy(at, lists, sizeof(int32_t) * (size_t)got);
                lists += w < b->topk_k ? w : b->topk_k;
            } else {
                got = select_any(b->mean + i * ls->total + ls->offset[l], w, p->k, top, at);
            }
            if (!pattern) {
                for (int64_t q = 0; q < got; q++) new |= fl_cover_hit(c, ls->offset[l] + at[q]);
            } else {
                /* A pattern is a tuple of per-layer *sets*: order each layer's part. */
                sort_small(at, got);
                at += got;
            }
        }
        if (pattern) {
            int r = fl_cover_hit_key(c, key);
            if (r < 0) return fl_fail(e, FL_ERR_NOMEM, "out of memory for TKNP patterns");
            new = r;
        }
        added[i] = (uint8_t)new;
    }
    return FL_OK;
}

static fl_status tknc_update(fl_cover *c, const fl_cover_batch *b, uint8_t *added, fl_err *e) {
    return topk_update(c, b, added, 0, e);
}
static fl_status tknp_update(fl_cover *c, const fl_cover_batch *b, uint8_t *added, fl_err *e) {
    return topk_update(c, b, added, 1, e);
}

const fl_cover_ops fl_cover_tknc = {"tknc", "tknc[:K]", 0, tknc_init, tknc_update, NULL};
const fl_cover_ops fl_cover_tknp = {"tknp", "tknp[:K]", 0, tknp_init, tknp_update, NULL};
