/* The GEMM wrapper and im2col/col2im: what convolutions and dense layers are made of. */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "core/simd.h"
#include "flare/flare.h"
#include "flare/tensor.h"

static void sgemm1(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                   int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* A product called outside any parallel region (a dense layer) is split over the thread pool
 * (BLAS itself runs single-threaded, see src/core/parallel.c): C's rows or columns, whichever
 * are more, in blocks of SPLIT_UNIT so that every part keeps the kernel's full tiles. BLAS
 * may round the last bit of a value differently for parts of another size (it does so for
 * another M even on one thread), so results depend on the sizes and the thread count, as
 * everywhere in flare, and nothing else. Inside a parallel region (the convolutions'
 * per-thread GEMMs) fl_parallel_for runs the whole range inline. */
enum { SPLIT_UNIT = 16, SPLIT_MIN_MACS = 1 << 18 };

typedef struct gemm_job {
    int ta, tb, M, N, K, lda, ldb, ldc, by_rows;
    float alpha, beta;
    const float *A, *B;
    float *C;
} gemm_job;

static void gemm_range(void *ctx, int64_t lo, int64_t hi, int tid) {
    (void)tid;
    const gemm_job *J = ctx;
    int dim = J->by_rows ? J->M : J->N;
    int a = (int)lo * SPLIT_UNIT, b = (int)hi * SPLIT_UNIT < dim ? (int)hi * SPLIT_UNIT : dim;
    if (J->by_rows) /* rows a..b of op(A) and of C */
        sgemm1(J->ta, J->tb, b - a, J->N, J->K, J->alpha,
               J->ta ? J->A + a : J->A + (size_t)a * J->lda, J->lda, J->B, J->ldb, J->beta,
               J->C + (size_t)a * J->ldc, J->ldc);
    else /* columns a..b of op(B) and of C */
        sgemm1(J->ta, J->tb, J->M, b - a, J->K, J->alpha, J->A, J->lda,
               J->tb ? J->B + (size_t)a * J->ldb : J->B + a, J->ldb, J->beta, J->C + a, J->ldc);
}

void fl_sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
              int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    if (M == 0 || N == 0) return;
    int by_rows = M >= N, dim = by_rows ? M : N;
    if ((int64_t)M * N * K < SPLIT_MIN_MACS || dim < 2 * SPLIT_UNIT || fl_threads_get() < 2) {
        sgemm1(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    gemm_job J = {trans_a, trans_b, M, N, K, lda, ldb, ldc, by_rows, alpha, beta, A, B, C};
    fl_parallel_for((dim + SPLIT_UNIT - 1) / SPLIT_UNIT, gemm_range, &J);
}

static int cmp_double(const void *p, const void *q) {
    double x = *(const double *)p, y = *(const double *)q;
    return (x > y) - (x < y);
}

double fl_sgemm_gflops(int n, int reps) {
    size_t nn = (size_t)n * n;
    float *a = fl_alloc(nn * sizeof *a), *b = fl_alloc(nn * sizeof *b), *c = fl_alloc(nn * sizeof *c);
    double v[32], r = 0;
    if (reps > 32) reps = 32;
    if (a && b && c && reps > 0) {
        for (size_t i = 0; i < nn; i++) a[i] = b[i] = (float)(i % 17) * 0.0625f;
        fl_sgemm(0, 0, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        for (int k = 0; k < reps; k++) {
            double t0 = fl_now();
            fl_sgemm(0, 0, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
            v[k] = 2.0 * n * (double)nn / (fl_now() - t0) * 1e-9;
        }
        qsort(v, (size_t)reps, sizeof *v, cmp_double);
        r = v[reps / 2];
    }
    fl_free(a);
    fl_free(b);
    fl_free(c);
    return r;
}

/* The columns ox of one cols row whose input column ix = x0 + ox*sw falls inside [0, w):
 * [*lo, *hi). Outside that range the row reads padding. Computed once per (ki, kj) so the
 * inner loops have no bounds tests. */
static void valid_cols(const fl_conv2d_geom *g, int x0, int *lo, int *hi) {
    int l = x0 >= 0 ? 0 : (-x0 + g->sw - 1) / g->sw;
    int h = x0 > g->w - 1 ? 0 : (g->w - 1 - x0) / g->sw + 1;
    if (h > g->ow) h = g->ow;
    if (l > h) l = h;
    *lo = l;
    *hi = h;
}

/* Rows of a small image are short (8 floats for LeNet-5's second convolution), and a loop
 * with a run-time trip count costs more to enter than the copy itself: these move eight
 * floats per fixed-size memcpy (one vector load and store), the last eight of a copy
 * overlapping the previous ones when n is not a multiple of eight. */
typedef float v8f __attribute__((vector_size(32)));

static inline void copy_row(float *restrict d, const float *restrict s, int n) {
    if (n < 8) {
        for (int k = 0; k < n; k++) d[k] = s[k];
        return;
    }
    int k = 0;
    for (; k + 8 <= n; k += 8) memcpy(d + k, s + k, sizeof(v8f));
    if (k < n) memcpy(d + n - 8, s + n - 8, sizeof(v8f));
}

static inline void add_row(float *restrict d, const float *restrict s, int n) {
    int k = 0;
    for (; k + 8 <= n; k += 8) {
        v8f a, b;
        memcpy(&a, d + k, sizeof a);
        memcpy(&b, s + k, sizeof b);
        a += b;
        memcpy(d + k, &a, sizeof a);
    }
    for (; k < n; k++) d[k] += s[k];
}

/* The common case: stride 1, no padding, no dilation. Every cols row (ci, ki, kj) is the
 * input plane's rows ki.. at column kj, ow floats each. */
static int plain(const fl_conv2d_geom *g) {
    return g->sh == 1 && g->sw == 1 && g->dh == 1 && g->dw == 1 && g->pt == 0 && g->pl == 0 &&
           g->pb == 0 && g->pr == 0;
}

/* ow is a constant where the caller passes one (8: every row one vector, no loop left) */
static inline __attribute__((always_inline)) void im2col_rows(float *cols, size_t ld,
                                                              const float *img,
                                                              const fl_conv2d_geom *g, int ow) {
    for (int ci = 0; ci < g->c; ci++)
        for (int ki = 0; ki < g->kh; ki++)
            for (int kj = 0; kj < g->kw; kj++) {
                float *row = cols + ((size_t)(ci * g->kh + ki) * g->kw + kj) * ld;
                const float *src = img + ((size_t)ci * g->h + ki) * g->w + kj;
                for (int oy = 0; oy < g->oh; oy++)
                    copy_row(row + (size_t)oy * ow, src + (size_t)oy * g->w, ow);
            }
}

FL_HOT_CLONES
static void im2col_plain(float *cols, size_t ld, const float *img, const fl_conv2d_geom *g) {
    if (g->ow == 8) im2col_rows(cols, ld, img, g, 8);
    else im2col_rows(cols, ld, img, g, g->ow);
}

/* kj outermost: the rows of one kj add into the same addresses (which the store buffer
 * forwards); the next kj adds one float further, a misaligned overlap that stalls the load if
 * it comes right after the store, so it comes only after all rows of the previous kj. */
static inline __attribute__((always_inline)) void col2im_rows(float *img, const float *cols,
                                                              size_t ld,
                                                              const fl_conv2d_geom *g, int ow) {
    for (int ci = 0; ci < g->c; ci++)
        for (int kj = 0; kj < g->kw; kj++)
            for (int ki = 0; ki < g->kh; ki++) {
                const float *row = cols + ((size_t)(ci * g->kh + ki) * g->kw + kj) * ld;
                float *dst = img + ((size_t)ci * g->h + ki) * g->w + kj;
                for (int oy = 0; oy < g->oh; oy++)
                    add_row(dst + (size_t)oy * g->w, row + (size_t)oy * ow, ow);
            }
}

FL_HOT_CLONES
static void col2im_plain(float *img, const float *cols, size_t ld, const fl_conv2d_geom *g) {
    if (g->ow == 8) col2im_rows(img, cols, ld, g, 8);
    else col2im_rows(img, cols, ld, g, g->ow);
}

/* cols row r = (ci, ki, kj), column = (oy, ox). The zeroing of the padding is skipped where
 * there is none. */
FL_HOT_CLONES
void fl_im2col_ld(float *cols, size_t ld, const float *img, const fl_conv2d_geom *g) {
    if (plain(g)) {
        im2col_plain(cols, ld, img, g);
        return;
    }
    const size_t ohw = ld;
    const int ow = g->ow, sw = g->sw;
    for (int ci = 0; ci < g->c; ci++) {
        const float *plane = img + (size_t)ci * g->h * g->w;
        for (int ki = 0; ki < g->kh; ki++) {
            for (int kj = 0; kj < g->kw; kj++) {
                float *row = cols + ((size_t)(ci * g->kh + ki) * g->kw + kj) * ohw;
                int x0 = -g->pl + kj * g->dw, lo, hi;
                valid_cols(g, x0, &lo, &hi);
                for (int oy = 0; oy < g->oh; oy++) {
                    int iy = oy * g->sh - g->pt + ki * g->dh;
                    float *dst = row + (size_t)oy * ow;
                    if (iy < 0 || iy >= g->h || lo == hi) {
                        memset(dst, 0, sizeof(float) * (size_t)ow);
                        continue;
                    }
                    /* the first valid input column; x0 itself may be negative */
                    const float *src = plane + (size_t)iy * g->w + (x0 + lo * sw);
                    if (lo > 0) memset(dst, 0, sizeof(float) * (size_t)lo);
                    float *d = dst + lo;
                    int len = hi - lo;
                    if (sw == 1) {
                        copy_row(d, src, len);
                    } else {
                        for (int k = 0; k < len; k++) d[k] = src[k * sw];
                    }
                    if (hi < ow) memset(dst + hi, 0, sizeof(float) * (size_t)(ow - hi));
                }
            }
        }
    }
}

FL_HOT_CLONES
void fl_col2im_ld(float *img, const float *cols, size_t ld, const fl_conv2d_geom *g) {
    if (plain(g)) {
        col2im_plain(img, cols, ld, g);
        return;
    }
    const size_t ohw = ld;
    for (int ci = 0; ci < g->c; ci++) {
        float *plane = img + (size_t)ci * g->h * g->w;
        for (int ki = 0; ki < g->kh; ki++) {
            for (int kj = 0; kj < g->kw; kj++) {
                const float *row = cols + ((size_t)(ci * g->kh + ki) * g->kw + kj) * ohw;
                int x0 = -g->pl + kj * g->dw, lo, hi;
                valid_cols(g, x0, &lo, &hi);
                for (int oy = 0; oy < g->oh; oy++) {
                    int iy = oy * g->sh - g->pt + ki * g->dh;
                    if (iy < 0 || iy >= g->h || lo == hi) continue;
                    const float *src = row + (size_t)oy * g->ow;
                    float *dst = plane + (size_t)iy * g->w + (x0 + lo * g->sw);
                    if (g->sw == 1) {
                        add_row(dst, src + lo, hi - lo);
                    } else {
                        for (int ox = lo; ox < hi; ox++) dst[(ox - lo) * g->sw] += src[ox];
                    }
                }
            }
        }
    }
}

void fl_im2col(float *cols, const float *img, const fl_conv2d_geom *g) {
    fl_im2col_ld(cols, (size_t)g->oh * g->ow, img, g);
}

void fl_col2im(float *img, const float *cols, const fl_conv2d_geom *g) {
    fl_col2im_ld(img, cols, (size_t)g->oh * g->ow, g);
}
