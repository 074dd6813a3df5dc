/* The GEMM wrapper and im2col/col2im: what convolutions and dense layers are made of. */
#include <cblas.h>
#include <string.h>

#include "flare/tensor.h"

void fl_sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
              int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    if (M == 0 || N == 0) return;
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* cols row r = (ci, ki, kj), column = (oy, ox). Rows are written contiguously so that the
 * inner loop is a strided copy the compiler can vectorise when stride == 1. */
void fl_im2col(float *cols, const float *img, const fl_conv2d_geom *g) {
    const int ohw = g->oh * g->ow;
    for (int ci = 0; ci < g->c; ci++) {
        const float *plane = img + (size_t)ci * g->h * g->w;
        for (int ki = 0; ki < g->kh; ki++) {
            for (int kj = 0; kj < g->kw; kj++) {
                float *row = cols + ((size_t)(ci * g->kh + ki) * g->kw + kj) * ohw;
                for (int oy = 0; oy < g->oh; oy++) {
                    int iy = oy * g->sh - g->pt + ki * g->dh;
                    float *dst = row + oy * g->ow;
                    if (iy < 0 || iy >= g->h) {
                        memset(dst, 0, sizeof(float) * (size_t)g->ow);
                        continue;
                    }
                    const float *src = plane + (size_t)iy * g->w;
                    int x0 = -g->pl + kj * g->dw;
                    for (int ox = 0; ox < g->ow; ox++) {
                        int ix = x0 + ox * g->sw;
                        dst[ox] = (ix >= 0 && ix < g->w) ? src[ix] : 0.0f;
                    }
                }
            }
        }
    }
}

void fl_col2im(float *img, const float *cols, const fl_conv2d_geom *g) {
    const int ohw = g->oh * g->ow;
    for (int ci = 0; ci < g->c; ci++) {
        float *plane = img + (size_t)ci * g->h * g->w;
        for (int ki = 0; ki < g->kh; ki++) {
            for (int kj = 0; kj < g->kw; kj++) {
                const float *row = cols + ((size_t)(ci * g->kh + ki) * g->kw + kj) * ohw;
                for (int oy = 0; oy < g->oh; oy++) {
                    int iy = oy * g->sh - g->pt + ki * g->dh;
                    if (iy < 0 || iy >= g->h) continue;
                    const float *src = row + oy * g->ow;
                    float *dst = plane + (size_t)iy * g->w;
                    int x0 = -g->pl + kj * g->dw;
                    for (int ox = 0; ox < g->ow; ox++) {
                        int ix = x0 + ox * g->sw;
                        if (ix >= 0 && ix < g->w) dst[ix] += src[ox];
                    }
                }
            }
        }
    }
}
