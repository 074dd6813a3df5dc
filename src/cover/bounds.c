/* Neuron-level criteria against the training profile: KMNC, NBC and SNAC. Definitions and
 * sources in docs/coverage.md. Comparisons follow the reference tools' formulas in double on
 * the float neuron values (the float fast paths below are exact shortcuts to the same
 * answer), so that counts match a numpy re-implementation exactly. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/simd.h"
#include "cover_int.h"

typedef struct {
    int64_t k;
    float *lof, *hif; /* [total] KMNC: training min/max (+inf/-inf for a constant neuron, which
                         no value falls between). NBC/SNAC: the σ-extended bounds as floats,
                         rounded inwards so that x < lof <=> x < lo and x > hif <=> x > hi */
    double *unit;     /* [total] KMNC section width (hi - lo) / k in double (1 if constant) */
    float *rcp;       /* [total] KMNC: 1 / unit, or -1 where float cannot carry it (see
                         kmnc_block) */
    int64_t *base;    /* [total] KMNC: first item of the neuron's sections */
} bound_params;

static void bound_free(void *pp) {
    bound_params *p = pp;
    if (!p) return;
    free(p->lof), free(p->hif), free(p->unit), free(p->rcp), free(p->base);
    free(p);
}

typedef enum { B_KMNC, B_NBC, B_SNAC } bound_kind;

/* The largest float <= v / the smallest float >= v. */
static float float_down(double v) {
    float f = (float)v;
    return (double)f > v ? nextafterf(f, -INFINITY) : f;
}
static float float_up(double v) {
    float f = (float)v;
    return (double)f < v ? nextafterf(f, INFINITY) : f;
}

/* KMNC's float reciprocal of unit (see kmnc_block). */
static float kmnc_rcp(float lo, float hi, double unit, int64_t k) {
    double r = 1 / unit;
    return k <= (1 << 20) && isfinite(hi - lo) && r < 1e30 && r > 1e-30 ? (float)r : -1;
}

static fl_status bound_init(fl_cover *c, const fl_cover_ctx *ctx, const char *arg,
                            bound_kind kind, fl_err *e) {
    const fl_layerset *ls = ctx->ls;
    const fl_profile *pr = ctx->profile;
    char buf[64], *part[1];
    int n;
    double sigma = 0;
    int64_t k = 1000;
    fl_status st = fl_cover__args(c, arg, buf, sizeof buf, part, 1, &n, e);
    if (st == FL_OK && n == 1)
        st = kind == B_KMNC ? fl_cover__int(c, part[0], 1, 1000000000, &k, e)
                            : fl_cover__num(c, part[0], 0, 1e6, &sigma, e);
    if (st != FL_OK) return st;
    if (!pr)
        return fl_fail(e, FL_ERR_ARG,
                       "coverage criterion '%s' needs a training profile (`flare nn profile`, "
                       "then --profile)",
                       c->spec);
    st = fl_profile_match(pr, ls, e);
    if (st != FL_OK) return st;
    if (pr->count <= 0)
        return fl_fail(e, FL_ERR_ARG, "coverage criterion '%s': the profile has seen no input",
                       c->spec);
    size_t T = (size_t)ls->total;
    bound_params *p = calloc(1, sizeof *p);
    if (p) {
        c->params = p;
        p->k = k;
        p->lof = malloc(sizeof(float) * T);
        p->hif = malloc(sizeof(float) * T);
        if (kind == B_KMNC) {
            p->unit = malloc(sizeof(double) * T);
            p->rcp = malloc(sizeof(float) * T);
            p->base = malloc(sizeof(int64_t) * T);
        }
    }
    int64_t *items = malloc(sizeof(int64_t) * (size_t)ls->n);
    if (!p || !items ||
        !p->lof || !p->hif || (kind == B_KMNC && (!p->unit || !p->rcp || !p->base))) {
        free(items);
        return fl_fail(e, FL_ERR_NOMEM, "out of memory for '%s'", c->spec);
    }
    int64_t next = 0;
    for (int l = 0; l < ls->n; l++) {
        int64_t first = next;
        for (int64_t j = ls->offset[l]; j < ls->offset[l] + ls->width[l]; j++) {
            if (kind == B_KMNC) {
                /* A neuron constant on the training set has no sections (DeepGauge's width
                 * (high - low) / k is 0): it is left out of KMNC's total. */
                int varies = pr->max[j] > pr->min[j];
                p->lof[j] = varies ? pr->min[j] : INFINITY;
                p->hif[j] = varies ? pr->max[j] : -INFINITY;
                p->unit[j] = varies ? ((double)pr->max[j] - pr->min[j]) / (double)k : 1;
                p->rcp[j] = kmnc_rcp(pr->min[j], pr->max[j], p->unit[j], k);
                p->base[j] = next;
                if (varies) next += k;
            } else {
                p->lof[j] = float_up((double)pr->min[j] - sigma * pr->std[j]);
                p->hif[j] = float_down((double)pr->max[j] + sigma * pr->std[j]);
            }
        }
        items[l] = kind == B_KMNC ? next - first : ls->width[l] * (kind == B_NBC ? 2 : 1);
    }
    st = fl_cover_layout(c, ls->n, FL_LAYER_NAMES(ls), items, e);
    free(items);
    return st;
}

static fl_status kmnc_init(fl_cover *c, const fl_cover_ctx *x, const char *a, fl_err *e) {
    return bound_init(c, x, a, B_KMNC, e);
}
static fl_status nbc_init(fl_cover *c, const fl_cover_ctx *x, const char *a, fl_err *e) {
    return bound_init(c, x, a, B_NBC, e);
}
static fl_status snac_init(fl_cover *c, const fl_cover_ctx *x, const char *a, fl_err *e) {
    return bound_init(c, x, a, B_SNAC, e);
}

/* KMNC marks, for each neuron whose value x lies in [lo, hi], section int((x - lo) / unit) with
 * the top edge folded into section k-1: DeepHunter's index, in double. A double division per
 * value is most of the cost, so eight values at a time are computed in float as
 * q = (x - lo) * (1 / unit): three roundings, so q is within q * 2^-22 of the double quotient
 * and truncates to the same section unless it lies within q * 2^-21 of an integer; only such
 * a block (about one in a thousand) is recomputed exactly. The float form needs q's fraction
 * (k <= 2^20) and a finite hi - lo and 1 / unit; a neuron without them gets rcp = -1, which
 * makes every q of it negative and so recomputed. */
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

#define INLINE static inline __attribute__((always_inline))

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
/* Bit e set: lane e is inside and its section's bit is still clear. One gather reads the
 * eight bitmap words where the scalar form takes eight loads, shifts and masks (KMNC alone on
 * LeNet-5, batch 256, values in cache: 0.24-0.28 ms per update instead of 0.46-0.49). Items
 * are < 2^31 (the caller checks) and the bitmap's padding covers the 4-byte reads. */
__attribute__((target("avx2"))) static inline unsigned open_gather(const uint8_t *hit,
                                                                    const v8i *item,
                                                                    const v8i *inside) {
    __m256i it = (__m256i)*item;
    __m256i w = _mm256_i32gather_epi32((const int *)(const void *)hit, _mm256_srli_epi32(it, 3), 1);
    __m256i bit = _mm256_srlv_epi32(w, _mm256_and_si256(it, _mm256_set1_epi32(7)));
    __m256i open = _mm256_andnot_si256(_mm256_slli_epi32(bit, 31), (__m256i)*inside);
    return (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(open));
}
#define HAVE_GATHER 1
#endif

/* Neurons j0..j0+7 of all n inputs, column by column: the bitmap the block reads (8 * k bits)
 * stays in L1 while the values stream past. The covered check is branch-free (with `gather`,
 * one AVX2 gather); a block with an uncovered section (rare once the first batches are in) is
 * then marked lane by lane. */
INLINE void kmnc_rows(fl_cover *c, const float *x, int n, int64_t T, int64_t j0,
                      const bound_params *p, uint8_t *added, int gather) {
    const float tol = 0x1p-21f, k1 = (float)(p->k - 1);
    int m = T - j0 < 8 ? (int)(T - j0) : 8;
    v8f l, h, r = {0};
    for (int e = 0; e < 8; e++) l[e] = INFINITY, h[e] = -INFINITY; /* lanes past T: outside */
    for (int e = 0; e < m; e++) l[e] = p->lof[j0 + e], h[e] = p->hif[j0 + e], r[e] = p->rcp[j0 + e];
    int64_t base[8];
    v8i base32;
    for (int e = 0; e < 8; e++) base[e] = p->base[j0 + (e < m ? e : 0)], base32[e] = (int32_t)base[e];
    for (int i = 0; i < n; i++) {
        const float *xi = x + i * T + j0;
        v8f v = {0};
        if (m == 8) memcpy(&v, xi, sizeof v);
        else for (int e = 0; e < m; e++) v[e] = xi[e];
        v8i in = (v >= l) & (v <= h);
        v8f q = (v8f)((v8i)((v - l) * r) & in); /* 0 outside */
        /* Clamped to [-1, k-1] (q is -inf where rcp = -1), so the conversion is defined. */
        v8i lt = q < k1, gt = q > -1;
        q = (v8f)(((v8i)q & lt) | ((v8i)(v8f){k1, k1, k1, k1, k1, k1, k1, k1} & ~lt));
        q = (v8f)(((v8i)q & gt) | ((v8i)(v8f){-1, -1, -1, -1, -1, -1, -1, -1} & ~gt));
        v8i s = __builtin_convertvector(q, v8i);
        v8f f = q - __builtin_convertvector(s, v8f);
        v8i risky = (q < 0) | (f < q * tol) | (f > 1 - q * tol);
        int32_t sec[8], inside[8], any = 0;
        memcpy(sec, &s, sizeof sec), memcpy(inside, &in, sizeof inside);
        for (int e = 0; e < 8; e++) any |= risky[e];
        if (any) {
            for (int e = 0; e < m; e++) {
                if (!inside[e]) continue;
                int32_t t = (int32_t)(((double)xi[e] - l[e]) / p->unit[j0 + e]);
                sec[e] = t < (int32_t)p->k - 1 ? t : (int32_t)p->k - 1;
            }
            memcpy(&s, sec, sizeof s);
        }
        unsigned open = 0;
#ifdef HAVE_GATHER
        v8i items = base32 + s;
        if (gather) open = open_gather(c->hit, &items, &in);
        else
#else
        (void)gather, (void)base32;
#endif
            for (int e = 0; e < 8; e++) {
                int64_t item = base[e] + sec[e];
                open |= (unsigned)(inside[e] & ~(c->hit[item >> 3] >> (item & 7)) & 1) << e;
            }
        for (; open; open &= open - 1) {
            int e = __builtin_ctz(open);
            added[i] |= (uint8_t)fl_cover_hit(c, base[e] + sec[e]);
        }
    }
}

static void kmnc_block(fl_cover *c, const float *x, int n, int64_t T, int64_t j0,
                       const bound_params *p, uint8_t *added) {
    kmnc_rows(c, x, n, T, j0, p, added, 0);
}

#ifdef HAVE_GATHER
/* flatten: open_gather must be inlined (always_inline cannot be, as kmnc_block would then
 * fail to compile), or its vectors go through memory on every row */
__attribute__((target("avx2"), flatten)) static void
kmnc_block_gather(fl_cover *c, const float *x, int n, int64_t T, int64_t j0,
                  const bound_params *p, uint8_t *added) {
    kmnc_rows(c, x, n, T, j0, p, added, 1);
}
#endif

static fl_status kmnc_update(fl_cover *c, const fl_cover_batch *b, uint8_t *added, fl_err *e) {
    (void)e;
    int64_t T = c->ctx.ls->total;
    void (*block)(fl_cover *, const float *, int, int64_t, int64_t, const bound_params *,
                  uint8_t *) = kmnc_block;
#ifdef HAVE_GATHER
    if (c->total <= INT32_MAX && fl__avx2()) block = kmnc_block_gather;
#endif
    memset(added, 0, (size_t)b->n);
    for (int64_t j0 = 0; j0 < T; j0 += 8) block(c, b->mean, b->n, T, j0, c->params, added);
    return FL_OK;
}

/* NBC: items 2j (below lo) and 2j+1 (above hi); SNAC: item j (above hi). Almost every value
 * lies inside its bounds, so the loop tests eight values at once in float and looks at single
 * values only in a block where one is outside. */
FL_HOT_CLONES
static int corner_row(fl_cover *c, const float *v, const float *lo, const float *hi, int64_t T,
                      int both) {
    int new = 0;
    for (int64_t j0 = 0; j0 < T; j0 += 8) {
        if (j0 + 8 <= T) {
            v8f x, l, h;
            memcpy(&x, v + j0, sizeof x), memcpy(&l, lo + j0, sizeof l), memcpy(&h, hi + j0, sizeof h);
            v8i out = (x > h) | (both ? x < l : (v8i){0});
            uint64_t any[4];
            memcpy(any, &out, sizeof any);
            if (!(any[0] | any[1] | any[2] | any[3])) continue;
        }
        for (int64_t j = j0; j < T && j < j0 + 8; j++) {
            float x = v[j];
            if (!((x > hi[j]) | (both & (x < lo[j])))) continue;
            new |= fl_cover_hit(c, !both ? j : x > hi[j] ? 2 * j + 1 : 2 * j);
        }
    }
    return new;
}

static fl_status corner_update(fl_cover *c, const fl_cover_batch *b, uint8_t *added, int both) {
    const bound_params *p = c->params;
    int64_t T = c->ctx.ls->total;
    for (int i = 0; i < b->n; i++)
        added[i] = (uint8_t)corner_row(c, b->mean + i * T, p->lof, p->hif, T, both);
    return FL_OK;
}

static fl_status nbc_update(fl_cover *c, const fl_cover_batch *b, uint8_t *added, fl_err *e) {
    (void)e;
    return corner_update(c, b, added, 1);
}
static fl_status snac_update(fl_cover *c, const fl_cover_batch *b, uint8_t *added, fl_err *e) {
    (void)e;
    return corner_update(c, b, added, 0);
}

const fl_cover_ops fl_cover_kmnc = {"kmnc", "kmnc[:K]", 0, kmnc_init, kmnc_update, bound_free};
const fl_cover_ops fl_cover_nbc = {"nbc", "nbc[:SIGMA]", 0, nbc_init, nbc_update, bound_free};
const fl_cover_ops fl_cover_snac = {"snac", "snac[:SIGMA]", 0, snac_init, snac_update,
                                    bound_free};
