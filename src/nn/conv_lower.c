/* Convolution lowered to GEMM (im2col / col2im, chunks of images, per-thread scratch), shared
 * by Conv (op_conv.c) and ConvTranspose (op_convt.c); the algebra is in op_conv.h. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/simd.h"
#include "flare/model.h"
#include "nn/op_conv.h"

/* ---- convolution lowered to GEMM ---------------------------------------------------------------- */

size_t fl_conv_cols_budget = (size_t)1 << 20;

static fl_status grow(float **buf, size_t *cap, size_t need) {
    if (need <= *cap) return FL_OK;
    fl_free(*buf);
    *buf = fl_alloc(need * sizeof(float));
    *cap = *buf ? need : 0;
    return *buf ? FL_OK : FL_ERR_NOMEM;
}

fl_status fl_lowered_plan(fl_lowered *L, const fl_node *node, int n, int ci, int zc, int group,
                          const fl_conv2d_geom *g, int training, fl_err *e) {
    L->g = *g;
    L->n = n;
    L->ci = ci;
    L->zc = zc;
    L->group = group;
    int threads = fl_parallel_slots();
    size_t p = (size_t)g->oh * g->ow, k = (size_t)ci * g->kh * g->kw;
    /* A GEMM narrower than FL_CONV_MIN_COLS columns runs BLAS far below its speed (ResNet-18's
     * last 3x3 convolution at 64x64 has 4 output pixels: one image per GEMM took 40 % of the
     * network's time), so a 1x1 convolution of small images is gathered by im2col too. */
    L->direct = g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->pt == 0 &&
                g->pl == 0 && g->oh == g->h && g->ow == g->w && p >= FL_CONV_MIN_COLS;
    size_t kp = k * p > 0 ? k * p : 1, nb;
    if (L->direct)
        nb = 1;
    else if (training) /* each thread's share in one chunk: the weight gradient reuses the
                          columns the forward pass left behind */
        nb = fl_conv_cols_budget / kp;
    else { /* inference: chunks just wide enough for BLAS, so that their columns are still in
              cache when the GEMM reads them (measured ~15 % faster on LeNet-5) */
        nb = (FL_CONV_MIN_COLS + p - 1) / p;
        if (nb > fl_conv_cols_budget / kp) nb = fl_conv_cols_budget / kp;
    }
    size_t share = n > 0 ? ((size_t)n + threads - 1) / threads : 1;
    if (nb > share) nb = share;
    if (nb < 1) nb = 1;
    L->nb = (int)nb;
    L->chunks = n > 0 ? (int)(((size_t)n + nb - 1) / nb) : 0;
    /* BLAS takes int dimensions: every matrix side (and the per-image offsets) must fit */
    if (k * nb * p > INT_MAX || (size_t)zc * nb * p > INT_MAX)
        return fl_fail(e, FL_ERR_UNSUPPORTED, "node '%s' (%s): tensors too large for one GEMM",
                       node->name, node->op->name);
    if (L->slots < threads) {
        fl_lowered_buf *nbuf = realloc(L->buf, sizeof *nbuf * (size_t)threads);
        if (!nbuf) return fl_fail(e, FL_ERR_NOMEM, "node '%s': out of memory", node->name);
        memset(nbuf + L->slots, 0, sizeof *nbuf * (size_t)(threads - L->slots));
        L->buf = nbuf;
        L->slots = threads;
    }
    fl_status st = FL_OK;
    for (int t = 0; t < L->slots && st == FL_OK; t++) {
        fl_lowered_buf *B = &L->buf[t];
        B->cached = -1;
        st = grow(&B->cols, &B->cols_cap, L->direct ? 0 : k * nb * p);
        if (st == FL_OK) st = grow(&B->mat, &B->mat_cap, nb > 1 ? (size_t)zc * nb * p : 0);
        if (st == FL_OK) st = grow(&B->dw, &B->dw_cap, (size_t)zc * (k / group) + zc);
    }
    if (st != FL_OK)
        return fl_fail(e, st, "node '%s' (%s): out of memory for im2col buffers", node->name,
                       node->op->name);
    return FL_OK;
}

void fl_lowered_free(fl_lowered *L) {
    for (int t = 0; t < L->slots; t++) {
        fl_free(L->buf[t].cols);
        fl_free(L->buf[t].mat);
        fl_free(L->buf[t].dw);
    }
    free(L->buf);
    L->buf = NULL;
    L->slots = 0;
}

/* ---- strided folds ----------------------------------------------------------------------
 * The generic im2col/col2im (src/tensor/kernels.c) read a strided input row one element at a
 * time and call memset for each padded edge of each output row. For the 4x4 stride-2 padded
 * convolutions of a DCGAN-style network (FuzzGAN's discriminator, and the transposed ones of
 * its generator), whose output rows are 7 or 14 floats, that was a fifth of a training step
 * (perf, docs/fuzzgan.md). Here each input plane is first split into its s column phases, the
 * padding as zeros: padded column j*s + r is phase r's column j. Tap kj of output column ox
 * reads the padded row at ox*s + kj, phase kj % s at ox + kj / s, so every output row of every
 * tap is one contiguous run of ow floats of a phase. col2im runs the map backwards: the taps
 * add into zeroed phases, which are then interleaved into the image, written when clearing
 * (no separate clearing pass). The whole plane is split (or summed) before it is read: a
 * phase row read right after its scalar stores stalls on store forwarding (measured: half of
 * im2col's time when it was done row by row). col2im adds the taps kj-major, so that a tap's
 * adds (one float further than tap kj - s's, a misaligned overlap) do not come right after
 * the ones they overlap; per element the sum is in another order than the generic path's, the
 * same up to rounding. */
enum { FOLD_MAX_S = 4, FOLD_MAX_PLANE = 8192 }; /* floats of the phases (32 KiB, stack) */

/* Phase columns a row needs: ox + kj / s up to ow - 1 + (kw - 1) / s. */
static int phase_width(const fl_conv2d_geom *g) { return g->ow + (g->kw - 1) / g->sw; }

static int strided_ok(const fl_conv2d_geom *g) {
    return g->sw >= 2 && g->sw <= FOLD_MAX_S && g->dw == 1 &&
           (int64_t)g->sw * g->h * phase_width(g) <= FOLD_MAX_PLANE;
}

/* ph[(r*h + y)*pw + j] = plane[y][j*s + r - pl], 0 outside the plane. */
static void split_plane(float *ph, int pw, const float *plane, const fl_conv2d_geom *g) {
    for (int r = 0; r < g->sw; r++)
        for (int y = 0; y < g->h; y++)
            for (int j = 0; j < pw; j++) {
                int x = j * g->sw + r - g->pl;
                ph[((size_t)r * g->h + y) * pw + j] = x >= 0 && x < g->w ? plane[(size_t)y * g->w + x] : 0.0f;
            }
}

/* ow is a constant where the caller passes one (7 and 14: FuzzGAN's 28x28 images), so the
 * row moves compile to a few vector moves instead of loops with a run-time trip count, which
 * gcc turns into memcpy calls that cost more than the 28 bytes they move. */
static inline __attribute__((always_inline)) void im2col_strided_rows(
    float *cols, size_t ld, const float *img, const fl_conv2d_geom *g, int ow) {
    const int s = g->sw, pw = phase_width(g), taps = g->kh * g->kw;
    float ph[FOLD_MAX_PLANE];
    for (int ci = 0; ci < g->c; ci++) {
        split_plane(ph, pw, img + (size_t)ci * g->h * g->w, g);
        for (int ki = 0; ki < g->kh; ki++)
            for (int kj = 0; kj < g->kw; kj++) {
                float *row = cols + ((size_t)ci * taps + ki * g->kw + kj) * ld;
                const float *phase = ph + (size_t)(kj % s) * g->h * pw + kj / s;
                for (int oy = 0; oy < g->oh; oy++) {
                    int iy = oy * g->sh - g->pt + ki * g->dh;
                    float *restrict d = row + (size_t)oy * ow;
                    if (iy < 0 || iy >= g->h) {
                        for (int k = 0; k < ow; k++) d[k] = 0.0f;
                        continue;
                    }
                    const float *restrict src = phase + (size_t)iy * pw;
                    for (int k = 0; k < ow; k++) d[k] = src[k];
                }
            }
    }
}

FL_HOT_CLONES
static void im2col_strided(float *cols, size_t ld, const float *img, const fl_conv2d_geom *g) {
    if (g->ow == 7) im2col_strided_rows(cols, ld, img, g, 7);
    else if (g->ow == 14) im2col_strided_rows(cols, ld, img, g, 14);
    else im2col_strided_rows(cols, ld, img, g, g->ow);
}

/* img (+)= the fold of cols; clear: img = (every element written, no clearing pass). */
static inline __attribute__((always_inline)) void col2im_strided_rows(
    float *img, const float *cols, size_t ld, const fl_conv2d_geom *g, int clear, int ow) {
    const int s = g->sw, pw = phase_width(g), taps = g->kh * g->kw;
    float ph[FOLD_MAX_PLANE];
    for (int ci = 0; ci < g->c; ci++) {
        for (int k = 0; k < s * g->h * pw; k++) ph[k] = 0.0f;
        for (int kj = 0; kj < g->kw; kj++)
            for (int ki = 0; ki < g->kh; ki++) {
                const float *row = cols + ((size_t)ci * taps + ki * g->kw + kj) * ld;
                float *phase = ph + (size_t)(kj % s) * g->h * pw + kj / s;
                for (int oy = 0; oy < g->oh; oy++) {
                    int iy = oy * g->sh - g->pt + ki * g->dh;
                    if (iy < 0 || iy >= g->h) continue;
                    const float *restrict src = row + (size_t)oy * ow;
                    float *restrict d = phase + (size_t)iy * pw;
                    for (int k = 0; k < ow; k++) d[k] += src[k];
                }
            }
        /* interleave: image column x is padded column x + pl, phase (x + pl) % s; the columns
         * past the last phase column get nothing (zero when clearing) */
        float *plane = img + (size_t)ci * g->h * g->w;
        const int tail = s * pw - g->pl;
        for (int y = 0; y < g->h; y++) {
            float *dst = plane + (size_t)y * g->w;
            for (int r = 0; r < s; r++) {
                const float *src = ph + ((size_t)r * g->h + y) * pw;
                for (int j = 0; j < pw; j++) {
                    int x = j * s + r - g->pl;
                    if (x >= 0 && x < g->w) dst[x] = clear ? src[j] : dst[x] + src[j];
                }
            }
            for (int x = tail < 0 ? 0 : tail; clear && x < g->w; x++) dst[x] = 0.0f;
        }
    }
}

FL_HOT_CLONES
static void col2im_strided(float *img, const float *cols, size_t ld, const fl_conv2d_geom *g,
                           int clear) {
    if (g->ow == 7) col2im_strided_rows(img, cols, ld, g, clear, 7);
    else if (g->ow == 14) col2im_strided_rows(img, cols, ld, g, clear, 14);
    else col2im_strided_rows(img, cols, ld, g, clear, g->ow);
}

/* im2col of images n0..n0+b of `in` into cols [ci*kh*kw, b*P] (image j's columns at j*P), or
 * (in == NULL) col2im of cols added into the same images of `out` (written, when clear): one
 * call per image. */
static void chunk_fold(const fl_lowered *L, fl_lowered_buf *B, const float *in, float *out,
                       int n0, int b, int clear) {
    fl_conv2d_geom all = L->g;
    all.c = L->ci;
    size_t p = (size_t)all.oh * all.ow, img = (size_t)L->ci * all.h * all.w, ld = (size_t)b * p;
    const int strided = strided_ok(&all);
    for (int j = 0; j < b; j++) {
        size_t at = (size_t)(n0 + j) * img;
        if (in && strided) {
            im2col_strided(B->cols + j * p, ld, in + at, &all);
        } else if (in) {
            fl_im2col_ld(B->cols + j * p, ld, in + at, &all);
        } else if (strided) {
            col2im_strided(out + at, B->cols + j * p, ld, &all, clear);
        } else {
            if (clear) memset(out + at, 0, sizeof(float) * img);
            fl_col2im_ld(out + at, B->cols + j * p, ld, &all);
        }
    }
}

/* mat [zc, b*P] <-> images n0..n0+b of Z [N, zc, P]. */
static void chunk_gather(const fl_lowered *L, fl_lowered_buf *B, const float *Z, int n0, int b) {
    size_t p = (size_t)L->g.oh * L->g.ow, ld = (size_t)b * p;
    for (int j = 0; j < b; j++)
        for (int c = 0; c < L->zc; c++)
            memcpy(B->mat + c * ld + j * p, Z + ((size_t)(n0 + j) * L->zc + c) * p,
                   p * sizeof(float));
}

static void chunk_scatter(const fl_lowered *L, const fl_lowered_buf *B, float *Z, int n0, int b,
                          int accumulate) {
    size_t p = (size_t)L->g.oh * L->g.ow, ld = (size_t)b * p;
    for (int j = 0; j < b; j++)
        for (int c = 0; c < L->zc; c++) {
            float *dst = Z + ((size_t)(n0 + j) * L->zc + c) * p;
            const float *src = B->mat + c * ld + j * p;
            if (accumulate)
                for (size_t k = 0; k < p; k++) dst[k] += src[k];
            else
                memcpy(dst, src, p * sizeof(float));
        }
}

/* The matrix side of a chunk: Z itself for one image, else gathered into mat. */
static const float *chunk_mat(const fl_lowered *L, fl_lowered_buf *B, const float *Z, int n0,
                              int b) {
    if (b == 1) return Z + (size_t)n0 * L->zc * L->g.oh * L->g.ow;
    chunk_gather(L, B, Z, n0, b);
    return B->mat;
}

/* The columns of a chunk: I itself for a direct convolution, else im2col (or the cache). */
static const float *chunk_cols(const fl_lowered *L, fl_lowered_buf *B, const float *I, int n0,
                               int b, int trust_cache) {
    if (L->direct) return I + (size_t)n0 * L->ci * L->g.h * L->g.w;
    if (!trust_cache || B->cached != n0) chunk_fold(L, B, I, NULL, n0, b, 0);
    B->cached = n0;
    return B->cols;
}

/* The three passes share one shape: chunks [lo, hi) of the batch go to thread tid, which uses
 * its own buffers. A job carries the operands; each pass is a range function over chunks. */
typedef struct lowered_job {
    fl_lowered *L;
    const float *W, *cI, *cZ, *bias;
    float *I, *Z;
    int accumulate, trust_cache, bias_grad, clear;
} lowered_job;

static void chunk_span(const fl_lowered *L, int64_t c, int *n0, int *b) {
    *n0 = (int)c * L->nb;
    *b = L->n - *n0 < L->nb ? L->n - *n0 : L->nb;
}

static void forward_range(void *ctx, int64_t lo, int64_t hi, int tid) {
    lowered_job *J = ctx;
    fl_lowered *L = J->L;
    fl_lowered_buf *B = &L->buf[tid];
    const fl_conv2d_geom *g = &L->g;
    int p = g->oh * g->ow, kg = g->c * g->kh * g->kw, zg = L->zc / L->group;
    for (int64_t c = lo; c < hi; c++) {
        int n0, b;
        chunk_span(L, c, &n0, &b);
        int ld = b * p;
        const float *cols = chunk_cols(L, B, J->cI, n0, b, 0);
        /* one image: write Z in place; several: stage in mat, then scatter to NCHW */
        float *dst = b == 1 ? J->Z + (size_t)n0 * L->zc * p : B->mat;
        float beta = b == 1 && J->accumulate ? 1.0f : 0.0f;
        for (int gi = 0; gi < L->group; gi++)
            fl_sgemm(0, 0, zg, ld, kg, 1.0f, J->W + (size_t)gi * zg * kg, kg,
                     cols + (size_t)gi * kg * ld, ld, beta, dst + (size_t)gi * zg * ld, ld);
        if (b > 1) chunk_scatter(L, B, J->Z, n0, b, J->accumulate);
        if (J->bias) fl_bias_add(J->Z + (size_t)n0 * L->zc * p, J->bias, b, L->zc, p);
    }
}

void fl_lowered_forward(fl_lowered *L, const float *W, const float *I, const float *bias,
                        float *Z, int accumulate) {
    lowered_job J = {.L = L, .W = W, .cI = I, .bias = bias, .Z = Z, .accumulate = accumulate};
    fl_parallel_for(L->chunks, forward_range, &J);
}

static void adjoint_range(void *ctx, int64_t lo, int64_t hi, int tid) {
    lowered_job *J = ctx;
    fl_lowered *L = J->L;
    fl_lowered_buf *B = &L->buf[tid];
    const fl_conv2d_geom *g = &L->g;
    int p = g->oh * g->ow, kg = g->c * g->kh * g->kw, zg = L->zc / L->group;
    B->cached = -1; /* cols is overwritten below */
    for (int64_t c = lo; c < hi; c++) {
        int n0, b;
        chunk_span(L, c, &n0, &b);
        int ld = b * p;
        const float *mat = chunk_mat(L, B, J->cZ, n0, b);
        /* direct: the "columns" are I's own channels, so W^T·Z adds into I in place */
        float *dst = L->direct ? J->I + (size_t)n0 * L->ci * p : B->cols;
        float beta = L->direct && !J->clear ? 1.0f : 0.0f;
        for (int gi = 0; gi < L->group; gi++)
            fl_sgemm(1, 0, kg, ld, zg, 1.0f, J->W + (size_t)gi * zg * kg, kg,
                     mat + (size_t)gi * zg * ld, ld, beta, dst + (size_t)gi * kg * ld, ld);
        if (!L->direct) chunk_fold(L, B, NULL, J->I, n0, b, J->clear);
    }
}

void fl_lowered_adjoint(fl_lowered *L, const float *W, const float *Z, float *I, int clear) {
    lowered_job J = {.L = L, .W = W, .cZ = Z, .I = I, .clear = clear};
    fl_parallel_for(L->chunks, adjoint_range, &J);
}

/* Each thread sums its chunks into its own dw; the shares are then added into dW in thread
 * order, so the result depends only on the thread count. */
static void grad_w_range(void *ctx, int64_t lo, int64_t hi, int tid) {
    lowered_job *J = ctx;
    fl_lowered *L = J->L;
    fl_lowered_buf *B = &L->buf[tid];
    const fl_conv2d_geom *g = &L->g;
    int p = g->oh * g->ow, kg = g->c * g->kh * g->kw, zg = L->zc / L->group;
    /* last chunk first: the forward pass left its columns in cols */
    for (int64_t c = hi - 1; c >= lo; c--) {
        int n0, b;
        chunk_span(L, c, &n0, &b);
        int ld = b * p;
        const float *mat = chunk_mat(L, B, J->cZ, n0, b);
        const float *cols = chunk_cols(L, B, J->cI, n0, b, J->trust_cache);
        for (int gi = 0; gi < L->group; gi++)
            fl_sgemm(0, 1, zg, kg, ld, 1.0f, mat + (size_t)gi * zg * ld, ld,
                     cols + (size_t)gi * kg * ld, ld, 1.0f, B->dw + (size_t)gi * zg * kg, kg);
        if (J->bias_grad) /* mat rows are whole channels of the chunk: [zc, ld] */
            fl_bias_grad(B->dw + (size_t)L->zc * kg, mat, 1, L->zc, ld);
    }
}

/* Clear each thread's dw (+ db) share before a pass: a thread that gets no chunk must add
 * zeros. Then add the shares into dW (and dB) in thread order, so the result depends only on
 * the thread count. */
void fl_lowered_shares_clear(fl_lowered *L, size_t size) {
    for (int t = 0; t < L->slots; t++) memset(L->buf[t].dw, 0, sizeof(float) * (size + L->zc));
}

void fl_lowered_shares_add(const fl_lowered *L, size_t size, float *dW, float *dB) {
    for (int t = 0; t < L->slots; t++) {
        for (size_t i = 0; i < size; i++) dW[i] += L->buf[t].dw[i];
        for (int c = 0; dB && c < L->zc; c++) dB[c] += L->buf[t].dw[size + c];
    }
}

void fl_lowered_grad_w(fl_lowered *L, float *dW, float *dB, const float *Z, const float *I,
                       int trust_cache) {
    lowered_job J = {.L = L, .cZ = Z, .cI = I, .trust_cache = trust_cache, .bias_grad = dB != NULL};
    size_t size = (size_t)L->zc * L->g.c * L->g.kh * L->g.kw;
    fl_lowered_shares_clear(L, size);
    fl_parallel_for(L->chunks, grad_w_range, &J);
    fl_lowered_shares_add(L, size, dW, dB);
}
