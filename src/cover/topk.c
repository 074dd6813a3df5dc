/* Layer-level criteria: TKNC (top-k neurons of each layer) and TKNP (top-k patterns).
 *
 * "Top k" of a layer for one input: the k neurons with the largest values, ties going to the
 * lower neuron index (a stable descending sort; numpy's default argsort is not stable, so the
 * reference tools are unspecified on exact ties). Found by a chain of max/min over packed
 * keys, O(width * k) per layer with k small (3 by default). A layer narrower than k
 * contributes all of its neurons. */
#include <stdlib.h>
#include <string.h>

#include "core/simd.h"
#include "cover_int.h"

typedef struct {
    int64_t k;
    size_t key_ints; /* TKNP: sum over layers of min(k, width) */
} topk_params;

/* ---- selection: eight inputs at a time, one per lane ----
 *
 * A value and its neuron index are packed into one 64-bit key that orders as the selection
 * does: above, the float's bits mapped to a signed integer of the same order (-0 made +0
 * first, as the float comparison ties them); below, the complement of the index, so the
 * lower index wins a tie. Keys of one layer are distinct, so its top k is a chain of max/min
 * per neuron, with no branches and no index bookkeeping; eight inputs share each instruction.
 * On LeNet-5's 484 neurons this made the lists of a batch of 256 0.13 ms instead of the 0.28
 * of a per-input insertion that skipped blocks below the k-th best. Values are finite: the
 * batch was checked. */
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef int32_t v4i __attribute__((vector_size(16)));
typedef int64_t v4l __attribute__((vector_size(32)));
typedef uint64_t v4u __attribute__((vector_size(32)));
#define INLINE static inline __attribute__((always_inline))
#define LANES 8

/* top: 2k half-vectors of keys, plus room to align them */
int64_t fl_cover__topk_scratch(int64_t k) {
    return (2 * k + 1) * (int64_t)(sizeof(v4l) / sizeof(float));
}

/* The 8 x 8 block m[q][j] (input q, neuron j) turned to columns: c[j][q]. */
INLINE void transpose8(const v8i *m, v8i *c) {
    v8i t[8], u[8];
    for (int q = 0; q < 8; q += 2) {
        t[q] = __builtin_shufflevector(m[q], m[q + 1], 0, 8, 1, 9, 4, 12, 5, 13);
        t[q + 1] = __builtin_shufflevector(m[q], m[q + 1], 2, 10, 3, 11, 6, 14, 7, 15);
    }
    for (int h = 0; h < 8; h += 4)
        for (int q = 0; q < 2; q++) {
            u[h + 2 * q] = __builtin_shufflevector(t[h + q], t[h + q + 2], 0, 1, 8, 9, 4, 5, 12, 13);
            u[h + 2 * q + 1] = __builtin_shufflevector(t[h + q], t[h + q + 2], 2, 3, 10, 11, 6, 7, 14, 15);
        }
    for (int j = 0; j < 4; j++) {
        c[j] = __builtin_shufflevector(u[j], u[j + 4], 0, 1, 2, 3, 8, 9, 10, 11);
        c[j + 4] = __builtin_shufflevector(u[j], u[j + 4], 4, 5, 6, 7, 12, 13, 14, 15);
    }
}

/* The top k of one layer (width w, at row[q] for lane q), best first: its first `got` indices
 * into out[q * len + p] for the nb lanes in use. top is scratch of 2k half-vectors of keys. */
INLINE void layer_topk(const float *const *row, int64_t w, int64_t k, v4l *top, int nb,
                       int64_t got, int32_t *out, int64_t len) {
    for (int64_t p = 0; p < 2 * k; p++) top[p] = (v4l){0} + INT64_MIN;
    for (int64_t j0 = 0; j0 < w; j0 += LANES) {
        int64_t nj = w - j0 < LANES ? w - j0 : LANES;
        v8i m[LANES], c[LANES];
        for (int q = 0; q < LANES; q++) {
            v8f x = {0};
            if (nj == LANES) memcpy(&x, row[q] + j0, sizeof x);
            else memcpy(&x, row[q] + j0, sizeof(float) * (size_t)nj);
            x += 0.0f; /* -0 to +0 */
            v8i u = (v8i)x;
            m[q] = u ^ ((u >> 31) & 0x7fffffff);
        }
        transpose8(m, c);
        for (int64_t j = 0; j < nj; j++) {
            /* in halves of four lanes: AVX2 compares four 64-bit integers at a time */
            for (int h = 0; h < 2; h++) {
                v4i c4;
                memcpy(&c4, (const int32_t *)&c[j] + 4 * h, sizeof c4);
                v4u y = ((v4u)__builtin_convertvector(c4, v4l) << 32) | (uint32_t)~(uint32_t)(j0 + j);
                v4l key = (v4l)y;
                for (int64_t p = 0; p < k; p++) { /* top = max, the min goes on down */
                    v4l t = top[2 * p + h], gt = t > key;
                    top[2 * p + h] = (t & gt) | (key & ~gt);
                    key = (key & gt) | (t & ~gt);
                }
            }
        }
    }
    for (int64_t p = 0; p < got; p++)
        for (int q = 0; q < nb; q++) out[q * len + p] = (int32_t)~(uint32_t)top[2 * p + q / 4][q % 4];
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

/* Lists of inputs [0, nb) (nb <= 8) of a block into out (rows of len). */
FL_HOT_CLONES
static void fill_block(const fl_layerset *ls, const fl_model *m, const float *mean, int nb,
                       int64_t k, int64_t len, int32_t *out, v4l *top) {
    int64_t at = 0;
    for (int l = 0; l < ls->n; l++) {
        int64_t w = ls->width[l], got = w < k ? w : k;
        /* A dense Relu layer keeps its input's positive values in their order: when the
         * input layer's list (already made) holds only positive values, it is this layer's
         * list too. (Not for a convolutional layer: the mean of Relu(x) over a channel is not
         * Relu of its mean.) */
        int src = ls->relu_of && m ? ls->relu_of[l] : -1, copy = 0;
        if (src >= 0 && src < l && m->values[ls->value[l]].t.ndim == 2) {
            int64_t sat = list_start(ls, k, src);
            copy = 1;
            for (int q = 0; q < nb && copy; q++)
                copy = mean[q * ls->total + ls->offset[src] + out[q * len + sat + got - 1]] > 0;
            for (int q = 0; q < nb && copy; q++)
                memcpy(out + q * len + at, out + q * len + sat, sizeof(int32_t) * (size_t)got);
        }
        if (!copy) {
            const float *row[LANES];
            for (int q = 0; q < LANES; q++) /* missing lanes repeat the last input */
                row[q] = mean + (q < nb ? q : nb - 1) * ls->total + ls->offset[l];
            v4l three[6]; /* the default k: its chain stays in registers */
            if (k == 3) layer_topk(row, w, 3, three, nb, got, out + at, len);
            else layer_topk(row, w, k, top, nb, got, out + at, len);
        }
        at += got;
    }
}

/* Scratch: one pattern (key_ints int32), then the selection's keys; an update that has to
 * make its own lists puts them after these. */
static size_t fixed_scratch(const topk_params *p) {
    return sizeof(int32_t) * p->key_ints + sizeof(float) * (size_t)fl_cover__topk_scratch(p->k);
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
    p->key_ints = (size_t)fl_cover__topk_len(ls, k);
    st = fl_cover_scratch(c, fixed_scratch(p), e);
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

void fl_cover__topk_fill(const fl_layerset *ls, const fl_model *m, const float *mean, int n,
                         int64_t k, int32_t *out, float *scratch) {
    int64_t len = fl_cover__topk_len(ls, k);
    v4l *top = (v4l *)(((uintptr_t)scratch + sizeof(v4l) - 1) & ~(uintptr_t)(sizeof(v4l) - 1));
    for (int i = 0; i < n; i += LANES)
        fill_block(ls, m, mean + i * ls->total, n - i < LANES ? n - i : LANES, k, len,
                   out + i * len, top);
}

static fl_status topk_update(fl_cover *c, const fl_cover_batch *b, uint8_t *added, int pattern,
                             fl_err *e) {
    const topk_params *p = c->params;
    const fl_layerset *ls = c->ctx.ls;
    /* the batch's shared lists when they are long enough, else this criterion's own */
    int shared = b->topk && b->topk_k >= p->k;
    int64_t lk = shared ? b->topk_k : p->k;
    const int32_t *lists = b->topk;
    if (!shared) {
        size_t base = fixed_scratch(p), need = base + sizeof(int32_t) * (size_t)b->n *
                                                          (size_t)fl_cover__topk_len(ls, p->k);
        if (need > c->scratch_bytes) {
            fl_status st = fl_cover_scratch(c, need, e);
            if (st != FL_OK) return st;
        }
        int32_t *own = (int32_t *)(void *)((char *)c->scratch + base);
        fl_cover__topk_fill(ls, b->m, b->mean, b->n, p->k, own,
                            (float *)(void *)((char *)c->scratch + sizeof(int32_t) * p->key_ints));
        lists = own;
    }
    int32_t *key = c->scratch;
    for (int i = 0; i < b->n; i++) {
        int new = 0;
        int32_t *at = key;
        for (int l = 0; l < ls->n; l++) {
            int64_t w = ls->width[l], got = w < p->k ? w : p->k;
            memcpy(at, lists, sizeof(int32_t) * (size_t)got);
            lists += w < lk ? w : lk;
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
