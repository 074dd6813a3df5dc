/* Neuron values of a batch, read from a model after its forward pass (fl_cover_view), and
 * sets of criteria updated together (fl_coverset).
 *
 * The view is the hot loop of coverage: it reads every float of every convolutional layer of
 * the batch once (for LeNet-5's "all" layer set ~5 600 per input; a Relu layer whose input is
 * in the set is derived from that input's pass, a dense layer is copied), so it is written to
 * vectorise: independent float accumulators per channel (SSE2 without -ffast-math cannot
 * reassociate one accumulator), summed into a double at the end. Channel means therefore
 * differ from fl_layerset_neurons (four double accumulators) in the last bits; the profile is
 * computed through this same view, so profile bounds and coverage agree. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/simd.h"
#include "cover_int.h"

/* Eight float lanes in one GCC vector: lane k accumulates the elements i with i % 8 == k and
 * the lanes are folded into a double in order, so every variant below (and both target
 * clones: AVX2 ymm registers, or two SSE2 registers by default) gives bit-identical sums. */
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
#define LANES 8
#define INLINE static inline __attribute__((always_inline))

/* Vector helpers as macros (a function taking a 32-byte vector draws a -Wpsabi note). */
#define LOAD8(v, p) memcpy(&(v), (p), sizeof(v8f))
#define VSEL(m, a, b) ((v8f)(((m) & (v8i)(a)) | (~(m) & (v8i)(b))))
#define VMAX(a, b) VSEL((a) > (b), a, b)
#define VABS(a) ((v8f)((v8i)(a) & 0x7fffffff))
/* The lanes' total: lane k + lane k+4 in float, then those four in double (a fixed order;
 * folding all eight in double cost as much as summing a short channel). */
INLINE double fold(const v8f *a) {
    double s = 0;
    for (int k = 0; k < LANES / 2; k++) s += (double)((*a)[k] + (*a)[k + LANES / 2]);
    return s;
}

/* Per-channel sums of x[0..n): the sum; with `absv` the sum of |x|; with `relu` the sum of
 * max(x, 0) (the channel of a Relu layer fed by this one, computed without reading that
 * layer). Flags are constants after inlining. The layer's range is a separate pass
 * (fl__minmax) over data this one has just brought into the cache. */
typedef struct {
    double sum, asum, rsum;
} chan_stats;

INLINE chan_stats chan(const float *x, int64_t n, int absv, int relu) {
    /* two sets of accumulators (blocks of eight alternate between them): an add waits on
     * the previous add of its set, so one set ran at the adder's latency */
    v8f s[2] = {{0}}, a[2] = {{0}}, r[2] = {{0}}, zero = {0};
    int64_t i = 0;
    for (; i + 2 * LANES <= n; i += 2 * LANES)
        for (int q = 0; q < 2; q++) {
            v8f u;
            LOAD8(u, x + i + q * LANES);
            s[q] += u;
            if (absv) a[q] += VABS(u);
            if (relu) r[q] += VMAX(u, zero);
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
    chan_stats c = {fold(&st), fold(&at), fold(&rt)};
    for (; i < n; i++) c.sum += x[i], c.asum += fabsf(x[i]), c.rsum += x[i] > 0 ? x[i] : 0;
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
    double inv_hw;               /* 1 / hw: a mean is a product, not a division per channel */
    int l, rl, L, range, absv;
} fill_job;

/* Write neuron c of the layer at (off, l) of input b. */
INLINE void put(const fill_job *j, int64_t b, int64_t off, int64_t c, double sum, double asum) {
    j->v->mean[b * j->T + off + c] = (float)(sum * j->inv_hw);
    if (j->absv) j->v->absmean[b * j->T + off + c] = (float)(asum * j->inv_hw);
}

/* A dense layer of input b (hw == 1): the values are the neurons, so they are copied (the
 * mean of one value is that value). */
INLINE void dense_row(const fill_job *j, int64_t b, const float *x, int absv, int relu) {
    int64_t C = j->C;
    float *mean = j->v->mean + b * j->T, *absmean = j->v->absmean + b * j->T;
    memcpy(mean + j->off, x, sizeof(float) * (size_t)C);
    for (int64_t c = 0; c < C; c++) {
        if (absv) absmean[j->off + c] = fabsf(x[c]);
        if (relu) mean[j->roff + c] = x[c] > 0 ? x[c] : 0;
        if (relu && absv) absmean[j->roff + c] = x[c] > 0 ? x[c] : 0;
    }
}

INLINE void fill_body(const fill_job *j, int64_t lo_b, int64_t hi_b, int absv, int relu) {
    int64_t C = j->C, hw = j->hw;
    for (int64_t b = lo_b; b < hi_b; b++) {
        const float *x = j->data + b * C * hw;
        /* the next input's part of a large layer is out of cache by now (the forward pass
         * wrote it long ago): ask for it while this one is summed */
        if (hw > 1 && b + 1 < hi_b)
            for (int64_t k = 0; k < C * hw; k += 16) __builtin_prefetch(x + C * hw + k);
        if (hw == 1)
            dense_row(j, b, x, absv, relu);
        else
            for (int64_t c = 0; c < C; c++) {
                chan_stats s = chan(x + c * hw, hw, absv, relu);
                put(j, b, j->off, c, s.sum, s.asum);
                if (relu) put(j, b, j->roff, c, s.rsum, s.rsum);
            }
        if (!j->range) continue;
        float lmin, lmax;
        fl__minmax(x, C * hw, &lmin, &lmax);
        j->v->lmin[b * j->L + j->l] = lmin;
        j->v->lmax[b * j->L + j->l] = lmax;
        if (relu) {
            j->v->lmin[b * j->L + j->rl] = lmin > 0 ? lmin : 0;
            j->v->lmax[b * j->L + j->rl] = lmax > 0 ? lmax : 0;
        }
    }
}

FL_HOT_CLONES
static void fill_range(void *ctx, int64_t lo_b, int64_t hi_b, int tid) {
    (void)tid;
    const fill_job *j = ctx;
    int relu = j->roff >= 0;
    /* one specialised loop per combination the sums ask for */
    if (j->absv) {
        if (relu) fill_body(j, lo_b, hi_b, 1, 1);
        else fill_body(j, lo_b, hi_b, 1, 0);
    } else {
        if (relu) fill_body(j, lo_b, hi_b, 0, 1);
        else fill_body(j, lo_b, hi_b, 0, 0);
    }
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
        if (!t->data || t->ndim < 2 || t->shape[0] != N || t->shape[1] != ls->width[l])
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
        int64_t C = t->shape[1], hw = t->ndim == 4 ? t->shape[2] * t->shape[3] : 1;
        int r = relu_of(ls, done, l);
        done[l] = 1;
        if (r >= 0) done[r] = 1;
        fill_job j = {v,  t->data, C, hw, T, ls->offset[l], r >= 0 ? ls->offset[r] : -1,
                      1.0 / (double)hw, l, r, ls->n, range, absv};
        /* Small layers are not worth waking the pool for. */
        if (N * C * hw >= 65536) fl_parallel_for(N, fill_range, &j);
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

/* ---- sets of criteria ------------------------------------------------------------------------ */
void fl_coverset_free(fl_coverset *s) {
    if (!s) return;
    for (int i = 0; i < s->n; i++) fl_cover_free(s->c[i]);
    free(s->c);
    free(s->tmp);
    free(s->topk);
    free(s->topv);
    free(s->cost);
    fl_cover_view_free(&s->view);
    free(s);
}

fl_status fl_coverset_new(const fl_cover_ctx *ctx, const char *spec, fl_coverset **out,
                          fl_err *e) {
    *out = NULL;
    fl_coverset *s = calloc(1, sizeof *s);
    char *copy = strdup(spec);
    size_t max = 1;
    for (const char *p = spec; *p; p++) max += *p == ',';
    if (s) s->c = calloc(max, sizeof(fl_cover *)), s->cost = calloc(max, sizeof(double));
    if (!s || !copy || !s->c || !s->cost) {
        free(copy);
        fl_coverset_free(s);
        return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    }
    fl_status st = FL_OK;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok && st == FL_OK;
         tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ') tok++;
        for (int i = 0; i < s->n && st == FL_OK; i++)
            if (strcmp(s->c[i]->spec, tok) == 0)
                st = fl_fail(e, FL_ERR_ARG, "criterion '%s' is listed twice in '%s'", tok, spec);
        if (st == FL_OK) st = fl_cover_new(ctx, tok, &s->c[s->n], e);
        if (st == FL_OK) {
            if (s->c[s->n]->topk_k > s->topk_k) s->topk_k = s->c[s->n]->topk_k;
            s->needs |= s->c[s->n++]->needs;
        }
    }
    if (st == FL_OK && s->n == 0)
        st = fl_fail(e, FL_ERR_ARG, "no coverage criterion in '%s'", spec);
    free(copy);
    if (st != FL_OK) {
        fl_coverset_free(s);
        return st;
    }
    *out = s;
    return FL_OK;
}

/* The criteria take very different times (KMNC divides and tests a bitmap per value, SNAC
 * compares), so a fixed split of the list over the threads left one waiting on the other.
 * Each thread instead takes the next criterion from a shared counter, the longest first by
 * the time each took on the previous batch. A criterion's result does not depend on which
 * thread runs it. Each writes its own flags row and status. */
typedef struct {
    fl_coverset *s;
    const fl_cover_batch *b;
    fl_status *st;
    fl_err *err;
    const int *order;
    _Atomic int next;
} update_job;

static void update_range(void *ctx, int64_t lo, int64_t hi, int tid) {
    (void)lo, (void)hi, (void)tid;
    update_job *j = ctx;
    for (int k; (k = atomic_fetch_add(&j->next, 1)) < j->s->n;) {
        int i = j->order[k];
        double t0 = fl_now();
        j->st[i] = fl_cover__update(j->s->c[i], j->b, j->s->tmp + i * j->b->n, NULL, &j->err[i]);
        j->s->cost[i] = fl_now() - t0;
    }
}

/* The shared top-k lists, inputs [lo, hi) on one thread (its own scratch row of topv). */
typedef struct {
    fl_coverset *s;
    const fl_cover_batch *b;
    int64_t len; /* list length per input */
} topk_job;

static void topk_range(void *ctx, int64_t lo, int64_t hi, int tid) {
    const topk_job *j = ctx;
    const fl_layerset *ls = j->s->c[0]->ctx.ls;
    fl_cover__topk_fill(ls, j->b->m, j->b->mean + lo * ls->total, (int)(hi - lo), j->s->topk_k,
                        j->s->topk + lo * j->len,
                        j->s->topv + (int64_t)tid * fl_cover__topk_scratch(j->s->topk_k));
}

/* Update every criterion (the batch has been checked): side by side on the thread pool. */
static fl_status update_all(fl_coverset *s, const fl_cover_batch *b, uint8_t *added, fl_err *e) {
    int64_t need = (int64_t)b->n * s->n;
    if (need > s->tmp_cap) {
        uint8_t *t = realloc(s->tmp, (size_t)need);
        if (!t) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
        s->tmp = t, s->tmp_cap = need;
    }
    fl_status *st = calloc((size_t)s->n, sizeof *st);
    fl_err *err = calloc((size_t)s->n, sizeof *err);
    int *order = malloc(sizeof(int) * (size_t)s->n);
    if (!st || !err || !order) {
        free(st), free(err), free(order);
        return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    }
    /* TKNC and TKNP share one selection of the largest k, made on all threads */
    fl_cover_batch with_topk;
    if (s->topk_k > 0 && !b->topk && b->n > 0) {
        const fl_layerset *ls = s->c[0]->ctx.ls;
        int64_t per = fl_cover__topk_len(ls, s->topk_k), len = per * b->n;
        int64_t scratch = fl_cover__topk_scratch(s->topk_k) * fl_parallel_slots();
        if (len > s->topk_cap) {
            int32_t *t = realloc(s->topk, sizeof(int32_t) * (size_t)len);
            if (t) s->topk = t, s->topk_cap = len;
        }
        if (scratch > s->topv_cap) {
            float *t = realloc(s->topv, sizeof(float) * (size_t)scratch);
            if (t) s->topv = t, s->topv_cap = scratch;
        }
        if (len > s->topk_cap || scratch > s->topv_cap) {
            free(st), free(err), free(order);
            return fl_fail(e, FL_ERR_NOMEM, "out of memory");
        }
        topk_job tj = {s, b, per};
        fl_parallel_for(b->n, topk_range, &tj);
        with_topk = *b;
        with_topk.topk = s->topk;
        with_topk.topk_k = s->topk_k;
        b = &with_topk;
    }
    for (int i = 0; i < s->n; i++) { /* longest first (insertion sort: a handful of items) */
        int k = i;
        for (; k > 0 && s->cost[order[k - 1]] < s->cost[i]; k--) order[k] = order[k - 1];
        order[k] = i;
    }
    update_job j = {s, b, st, err, order, 0};
    int T = fl_threads_get() < s->n ? fl_threads_get() : s->n;
    fl_parallel_for(T, update_range, &j);
    fl_status r = FL_OK;
    for (int i = 0; i < s->n && r == FL_OK; i++)
        if (st[i] != FL_OK) {
            r = st[i];
            if (e) *e = err[i];
        }
    if (r == FL_OK && added && b->n > 0) {
        memset(added, 0, (size_t)b->n);
        for (int i = 0; i < s->n; i++)
            for (int k = 0; k < b->n; k++) added[k] |= s->tmp[(int64_t)i * b->n + k];
    }
    free(st), free(err), free(order);
    return r;
}

fl_status fl_coverset_update(fl_coverset *s, const fl_cover_batch *b, uint8_t *added,
                             fl_err *e) {
    fl_status st = fl_cover__check_batch(s->c[0]->ctx.ls, b, s->needs, "coverage", e);
    return st != FL_OK ? st : update_all(s, b, added, e);
}

fl_status fl_coverset_update_model(fl_coverset *s, const fl_model *m, uint8_t *added,
                                   fl_err *e) {
    fl_status st = fl_cover_view_fill(&s->view, s->c[0]->ctx.ls, m, s->needs, e);
    return st != FL_OK ? st : update_all(s, &s->view.b, added, e);
}

typedef struct {
    fl_coverset *s;
    fl_progress_fn progress;
    void *user;
    int64_t total;
} run_ctx;

static fl_status run_batch(void *user, fl_model *m, const float *neurons, const float *logits,
                           int n_logits, int64_t start, int n, fl_err *e) {
    (void)neurons, (void)logits, (void)n_logits;
    run_ctx *r = user;
    fl_status st = fl_coverset_update_model(r->s, m, NULL, e);
    if (st == FL_OK && r->progress) r->progress(r->user, start + n, r->total);
    return st;
}

fl_status fl_coverset_run(fl_coverset *s, fl_model *m, const fl_dataset *d, int batch,
                          fl_progress_fn progress, void *user, fl_err *e) {
    if (d->n <= 0) return FL_OK;
    run_ctx r = {s, progress, user, d->n};
    return fl_layerset_stream(m, NULL, d, batch, run_batch, &r, e);
}
