/* Neuron values of a batch, read from a model after its forward pass (fl_cover_view).
 *
 * The view is the hot loop of coverage: it reads every float of every convolutional layer of
 * the batch once (for LeNet-5's "all" layer set ~5 600 per input; a Relu layer whose input is
 * in the set is derived from that input's pass, a dense layer is copied). The data was
 * written by the forward pass long before, so the loop waits on memory more than it computes:
 * it asks for the data a few kilobytes ahead of where it sums, and the AVX2 kernel takes each
 * input's range (min and max) in the same pass instead of a second one.
 *
 * Channel sums use independent float accumulators (without -ffast-math one accumulator
 * cannot be reassociated into lanes), folded into a double at the end in a fixed order, so
 * both kernels give the same bits. Channel means therefore differ from fl_layerset_neurons
 * (four double accumulators) in the last bits; the profile is computed through this same view,
 * so profile bounds and coverage agree. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/simd.h"
#include "cover_int.h"

#define LANES 8
#define INLINE static inline __attribute__((always_inline))
/* How far ahead of the sums the data is asked for, in floats (4 KB: the hardware prefetcher
 * alone left the loop waiting on L3; bursts of a whole next input measured slower than this) */
#define AHEAD 1024

typedef struct {
    double sum, asum, rsum; /* of x, |x| and max(x, 0) */
} chan_stats;

/* The lanes' total: lane k + lane k+4 in float, then those four in double (a fixed order;
 * folding all eight in double cost as much as summing a short channel). */
INLINE double fold(const float *a) {
    double s = 0;
    for (int k = 0; k < LANES / 2; k++) s += (double)(a[k] + a[k + LANES / 2]);
    return s;
}

/* Both kernels: blocks of 16 floats, the first 8 into accumulator set 0 and the next 8 into
 * set 1 (an add waits on the previous add of its set, so one set ran at the adder's latency),
 * one more block of 8 into set 0, the sets added, folded, and the last n % 8 floats added
 * one by one in double. */
INLINE void chan_tail(chan_stats *c, const float *x, int64_t i, int64_t n) {
    for (; i < n; i++) c->sum += x[i], c->asum += fabsf(x[i]), c->rsum += x[i] > 0 ? x[i] : 0;
}

/* ---- portable kernel: GCC vectors (two SSE2 registers per v8f) -------------------------------- */
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
/* Vector helpers as macros (a function taking a 32-byte vector draws a -Wpsabi note). */
#define LOAD8(v, p) memcpy(&(v), (p), sizeof(v8f))
#define VSEL(m, a, b) ((v8f)(((m) & (v8i)(a)) | (~(m) & (v8i)(b))))
#define VMAX(a, b) VSEL((a) > (b), a, b)
#define VABS(a) ((v8f)((v8i)(a) & 0x7fffffff))

/* Sums of x[0..n); flags are constants after inlining. The range is fl__minmax's. */
INLINE chan_stats chan(const float *x, int64_t n, int absv, int relu) {
    v8f s[2] = {{0}}, a[2] = {{0}}, r[2] = {{0}}, zero = {0};
    int64_t i = 0;
    for (; i + 2 * LANES <= n; i += 2 * LANES) {
        __builtin_prefetch(x + i + AHEAD);
        for (int q = 0; q < 2; q++) {
            v8f u;
            LOAD8(u, x + i + q * LANES);
            s[q] += u;
            if (absv) a[q] += VABS(u);
            if (relu) r[q] += VMAX(u, zero);
        }
    }
    if (i + LANES <= n) {
        v8f u;
        LOAD8(u, x + i);
        s[0] += u;
        if (absv) a[0] += VABS(u);
        if (relu) r[0] += VMAX(u, zero);
        i += LANES;
    }
    v8f st = s[0] + s[1], at = a[0] + a[1], rt = r[0] + r[1];
    float fs[LANES], fa[LANES], fr[LANES];
    memcpy(fs, &st, sizeof fs), memcpy(fa, &at, sizeof fa), memcpy(fr, &rt, sizeof fr);
    chan_stats c = {fold(fs), fold(fa), fold(fr)};
    chan_tail(&c, x, i, n);
    return c;
}

void fl_cover_view_free(fl_cover_view *v) {
    free(v->mean), free(v->absmean), free(v->lmin), free(v->lmax);
    memset(v, 0, sizeof *v);
}

static int grow(float **p, int64_t n) {
    float *q = realloc(*p, sizeof(float) * (size_t)(n ? n : 1));
    if (!q) return 0;
    *p = q;
    return 1;
}

/* One layer of a batch (and the Relu layer it feeds, when that is in the set too): inputs
 * [lo_b, hi_b) of the range handed out by fl_parallel_for. */
typedef struct {
    fl_cover_view *v;
    const float *data;
    int64_t C, hw, T, off, roff; /* roff: the Relu layer's first neuron, -1 when none */
    int64_t tokens;              /* [N, tokens, C] layers: rows averaged per feature (> 1) */
    double inv_hw;               /* 1 / (hw * tokens): a mean is a product, not a division per channel */
    int l, rl, L, range, absv;
} fill_job;

/* Write channel c of input b: the layer's neuron and the Relu layer's. */
INLINE void put(const fill_job *j, int64_t b, int64_t c, const chan_stats *s, int absv,
                int relu) {
    float *mean = j->v->mean + b * j->T, *absmean = j->v->absmean + b * j->T;
    mean[j->off + c] = (float)(s->sum * j->inv_hw);
    if (absv) absmean[j->off + c] = (float)(s->asum * j->inv_hw);
    if (relu) mean[j->roff + c] = (float)(s->rsum * j->inv_hw);
    if (relu && absv) absmean[j->roff + c] = (float)(s->rsum * j->inv_hw);
}

INLINE void put_range(const fill_job *j, int64_t b, float lmin, float lmax, int relu) {
    j->v->lmin[b * j->L + j->l] = lmin;
    j->v->lmax[b * j->L + j->l] = lmax;
    if (relu) {
        j->v->lmin[b * j->L + j->rl] = lmin > 0 ? lmin : 0;
        j->v->lmax[b * j->L + j->rl] = lmax > 0 ? lmax : 0;
    }
}

/* The neuron values of input b are written to a row of T floats that the forward pass has
 * pushed out to L3 since the last batch; writing one waits on memory like reading the layer
 * does, so the lines this layer writes are asked for a few inputs ahead (LeNet-5's dense
 * layers, batch 256: fc1 0.067 -> 0.045 ms, fc2 0.030 -> 0.020 ms; the convolutional layers
 * take long enough per input that it makes no difference there). */
#define ROWS_AHEAD 4
INLINE void prefetch_out(const fill_job *j, int64_t b) {
    float *mean = j->v->mean + b * j->T, *absmean = j->v->absmean + b * j->T;
    for (int64_t c = 0; c < j->C + 16; c += 16) {
        int64_t k = c < j->C ? c : j->C - 1; /* the last line too, wherever the row starts */
        __builtin_prefetch(mean + j->off + k, 1);
        if (j->absv) __builtin_prefetch(absmean + j->off + k, 1);
        if (j->roff >= 0) __builtin_prefetch(mean + j->roff + k, 1);
        if (j->roff >= 0 && j->absv) __builtin_prefetch(absmean + j->roff + k, 1);
    }
}

/* The inputs [lo_b, hi_b) of a layer, each by input(j, b, absv, relu): one specialised loop
 * per combination of the flags the sums ask for (constants after inlining). */
#define FILL_INPUTS(input, j, lo_b, hi_b)                                   \
    do {                                                                    \
        int relu_ = (j)->roff >= 0;                                         \
        for (int64_t b_ = (lo_b); b_ < (hi_b); b_++) {                      \
            if (b_ + ROWS_AHEAD < (hi_b)) prefetch_out(j, b_ + ROWS_AHEAD); \
            if ((j)->absv) relu_ ? input(j, b_, 1, 1) : input(j, b_, 1, 0); \
            else relu_ ? input(j, b_, 0, 1) : input(j, b_, 0, 0);           \
        }                                                                   \
    } while (0)

/* Input b of a dense layer (hw == 1): the values are the neurons, so they are copied (the
 * mean of one value is that value). */
INLINE void input_dense(const fill_job *j, int64_t b, int absv, int relu) {
    int64_t C = j->C;
    const float *x = j->data + b * C;
    float *mean = j->v->mean + b * j->T, *absmean = j->v->absmean + b * j->T;
    memcpy(mean + j->off, x, sizeof(float) * (size_t)C);
    for (int64_t c = 0; c < C; c++) {
        if (absv) absmean[j->off + c] = fabsf(x[c]);
        if (relu) mean[j->roff + c] = x[c] > 0 ? x[c] : 0;
        if (relu && absv) absmean[j->roff + c] = x[c] > 0 ? x[c] : 0;
    }
    if (!j->range) return;
    float lmin, lmax;
    fl__minmax(x, C, &lmin, &lmax);
    put_range(j, b, lmin, lmax, relu);
}

static void fill_dense(const fill_job *j, int64_t lo_b, int64_t hi_b) {
    FILL_INPUTS(input_dense, j, lo_b, hi_b);
}

INLINE void input_portable(const fill_job *j, int64_t b, int absv, int relu) {
    const float *x = j->data + b * j->C * j->hw;
    for (int64_t c = 0; c < j->C; c++) {
        chan_stats s = chan(x + c * j->hw, j->hw, absv, relu);
        put(j, b, c, &s, absv, relu);
    }
    if (!j->range) return;
    float lmin, lmax;
    fl__minmax(x, j->C * j->hw, &lmin, &lmax);
    put_range(j, b, lmin, lmax, relu);
}

static void fill_portable(const fill_job *j, int64_t lo_b, int64_t hi_b) {
    FILL_INPUTS(input_portable, j, lo_b, hi_b);
}

/* ---- AVX2 kernel: the same sums with AVX2 instructions, and the range in the same pass ------- */
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define AVX2 __attribute__((target("avx2"), always_inline)) static inline

/* As chan(), and lo/hi take the lane-wise min and max of x (with `range`). max_ps(u, 0) is
 * exactly VMAX(u, 0): u when u > 0, else the second operand. */
AVX2 chan_stats chan_avx2(const float *x, int64_t n, int absv, int relu, int range, __m256 *lo,
                          __m256 *hi) {
    const __m256 zero = _mm256_setzero_ps(), nosign = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 s0 = zero, s1 = zero, a0 = zero, a1 = zero, r0 = zero, r1 = zero;
    __m256 lo0 = *lo, hi0 = *hi, lo1 = *lo, hi1 = *hi;
    int64_t i = 0;
    for (; i + 2 * LANES <= n; i += 2 * LANES) {
        _mm_prefetch((const char *)(x + i + AHEAD), _MM_HINT_T0);
        __m256 u = _mm256_loadu_ps(x + i), w = _mm256_loadu_ps(x + i + LANES);
        s0 = _mm256_add_ps(s0, u), s1 = _mm256_add_ps(s1, w);
        if (absv)
            a0 = _mm256_add_ps(a0, _mm256_and_ps(u, nosign)),
            a1 = _mm256_add_ps(a1, _mm256_and_ps(w, nosign));
        if (relu)
            r0 = _mm256_add_ps(r0, _mm256_max_ps(u, zero)),
            r1 = _mm256_add_ps(r1, _mm256_max_ps(w, zero));
        if (range)
            lo0 = _mm256_min_ps(lo0, u), hi0 = _mm256_max_ps(hi0, u),
            lo1 = _mm256_min_ps(lo1, w), hi1 = _mm256_max_ps(hi1, w);
    }
    if (i + LANES <= n) {
        __m256 u = _mm256_loadu_ps(x + i);
        s0 = _mm256_add_ps(s0, u);
        if (absv) a0 = _mm256_add_ps(a0, _mm256_and_ps(u, nosign));
        if (relu) r0 = _mm256_add_ps(r0, _mm256_max_ps(u, zero));
        if (range) lo0 = _mm256_min_ps(lo0, u), hi0 = _mm256_max_ps(hi0, u);
        i += LANES;
    }
    float fs[LANES], fa[LANES], fr[LANES];
    _mm256_storeu_ps(fs, _mm256_add_ps(s0, s1));
    _mm256_storeu_ps(fa, _mm256_add_ps(a0, a1));
    _mm256_storeu_ps(fr, _mm256_add_ps(r0, r1));
    chan_stats c = {fold(fs), fold(fa), fold(fr)};
    if (range) {
        /* the last n % 8 floats go into lane 0 */
        for (int64_t k = i; k < n; k++) {
            __m256 u = _mm256_set1_ps(x[k]);
            lo0 = _mm256_min_ps(lo0, u), hi0 = _mm256_max_ps(hi0, u);
        }
        *lo = _mm256_min_ps(lo0, lo1), *hi = _mm256_max_ps(hi0, hi1);
    }
    chan_tail(&c, x, i, n);
    return c;
}

AVX2 void input_avx2(const fill_job *j, int64_t b, int absv, int relu) {
    const float *x = j->data + b * j->C * j->hw;
    __m256 lo = _mm256_set1_ps(INFINITY), hi = _mm256_set1_ps(-INFINITY);
    for (int64_t c = 0; c < j->C; c++) {
        chan_stats s = chan_avx2(x + c * j->hw, j->hw, absv, relu, j->range, &lo, &hi);
        put(j, b, c, &s, absv, relu);
    }
    if (!j->range) return;
    float l[LANES], h[LANES];
    _mm256_storeu_ps(l, lo), _mm256_storeu_ps(h, hi);
    float lmin = l[0], lmax = h[0];
    for (int k = 1; k < LANES; k++) {
        lmin = l[k] < lmin ? l[k] : lmin;
        lmax = h[k] > lmax ? h[k] : lmax;
    }
    put_range(j, b, lmin, lmax, relu);
}

__attribute__((target("avx2"))) static void fill_avx2(const fill_job *j, int64_t lo_b,
                                                      int64_t hi_b) {
    FILL_INPUTS(input_avx2, j, lo_b, hi_b);
}
#endif

/* Inputs [lo_b, hi_b) of a token layer [N, T, C]: each feature's mean over the T rows. The
 * rows are added in double, row after row (a feature's values are C floats apart, so the
 * channel kernels above do not apply); s holds the three sums of each feature. */
static void fill_tokens(const fill_job *j, int64_t lo_b, int64_t hi_b, double *s) {
    const int64_t C = j->C, T = j->tokens;
    for (int64_t b = lo_b; b < hi_b; b++) {
        const float *x = j->data + b * T * C;
        memset(s, 0, sizeof(double) * 3 * (size_t)C);
        for (int64_t t = 0; t < T; t++)
            for (int64_t c = 0; c < C; c++) {
                float u = x[t * C + c];
                s[c] += u, s[C + c] += fabsf(u), s[2 * C + c] += u > 0 ? u : 0;
            }
        for (int64_t c = 0; c < C; c++) { /* put() scales by inv_hw, 1 / T here */
            chan_stats cs = {s[c], s[C + c], s[2 * C + c]};
            put(j, b, c, &cs, j->absv, j->roff >= 0);
        }
        if (!j->range) continue;
        float lmin, lmax;
        fl__minmax(x, T * C, &lmin, &lmax);
        put_range(j, b, lmin, lmax, j->roff >= 0);
    }
}

static void fill_range(void *ctx, int64_t lo_b, int64_t hi_b, int tid) {
    (void)tid;
    const fill_job *j = ctx;
    if (j->tokens > 1) {
        double *s = malloc(sizeof(double) * 3 * (size_t)j->C);
        if (s) fill_tokens(j, lo_b, hi_b, s);
        else /* no room for the sums: NaN, which the finite check reports */
            for (int64_t b = lo_b; b < hi_b; b++) j->v->mean[b * j->T + j->off] = NAN;
        free(s);
    } else if (j->hw == 1) fill_dense(j, lo_b, hi_b);
#if defined(__GNUC__) && defined(__x86_64__)
    else if (fl__avx2()) fill_avx2(j, lo_b, hi_b);
#endif
    else fill_portable(j, lo_b, hi_b);
}

/* The layer of ls that is Relu(layer l) and not done yet, or -1. */
static int relu_of(const fl_layerset *ls, const uint8_t *done, int l) {
    for (int k = 0; ls->relu_of && k < ls->n; k++)
        if (ls->relu_of[k] == l && !done[k]) return k;
    return -1;
}

fl_status fl_cover_view_fill(fl_cover_view *v, const fl_layerset *ls, const fl_model *m,
                             unsigned needs, fl_err *e) {
    const fl_tensor *t0 = &m->values[ls->value[0]].t;
    if (!t0->data || t0->ndim < 2)
        return fl_fail(e, FL_ERR_ARG, "layer '%s' has no value: run the model forward first",
                       ls->name[0]);
    int64_t N = t0->shape[0], T = ls->total;
    if (N > v->cap) {
        if (!grow(&v->mean, N * T) || !grow(&v->absmean, N * T) || !grow(&v->lmin, N * ls->n) ||
            !grow(&v->lmax, N * ls->n))
            return fl_fail(e, FL_ERR_NOMEM, "out of memory for neuron values of %lld inputs",
                           (long long)N);
        v->cap = N;
    }
    int range = (needs & (FL_COVER_NEED_ABSMEAN | FL_COVER_NEED_RANGE)) != 0;
    int absv = (needs & FL_COVER_NEED_ABSMEAN) != 0;
    for (int l = 0; l < ls->n; l++) {
        const fl_tensor *t = &m->values[ls->value[l]].t;
        fl_neuron_shape ns;
        if (!t->data || !fl_neuron_shape_of(t, &ns) || t->shape[0] != N || ns.width != ls->width[l])
            return fl_fail(e, FL_ERR_SHAPE,
                           "layer '%s' does not hold %lld inputs of %lld neurons: run the "
                           "model forward first",
                           ls->name[l], (long long)N, (long long)ls->width[l]);
    }
    /* A Relu layer whose input is in the set too is computed from that input's pass. */
    uint8_t *done = calloc((size_t)(ls->n > 0 ? ls->n : 1), 1);
    if (!done) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    for (int l = 0; l < ls->n; l++) {
        if (done[l]) continue;
        const fl_tensor *t = &m->values[ls->value[l]].t;
        fl_neuron_shape ns;
        fl_neuron_shape_of(t, &ns);
        int64_t C = ns.width, hw = ns.inner, per = ns.outer * C * hw;
        int r = relu_of(ls, done, l);
        done[l] = 1;
        if (r >= 0) done[r] = 1;
        fill_job j = {v, t->data, C, hw, T, ls->offset[l], r >= 0 ? ls->offset[r] : -1,
                      ns.outer, 1.0 / (double)(hw * ns.outer), l, r, ls->n, range, absv};
        /* Small layers are not worth waking the pool for. */
        if (N * per >= 65536) fl_parallel_for(N, fill_range, &j);
        else fill_range(&j, 0, N, 0);
    }
    free(done);
    v->b = (fl_cover_batch){.n = (int)N,
                            .mean = v->mean,
                            .absmean = absv ? v->absmean : NULL,
                            .lmin = range ? v->lmin : NULL,
                            .lmax = range ? v->lmax : NULL,
                            .m = m};
    return fl_cover__check_finite(v->mean, (int)N, T, ls->name, ls->offset, ls->n,
                                  "neuron value", e);
}
