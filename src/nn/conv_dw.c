/* Depthwise convolution (group == C == M, W [C, 1, kh, kw]) computed directly.
 *
 * Why not im2col + GEMM: each group is a 1-row GEMM ([1, kh*kw] x [kh*kw, oh*ow]), so BLAS runs
 * at a small fraction of its speed and im2col writes kh*kw copies of every pixel for
 * kh*kw multiply-adds per output. Here every output row is accumulated straight from the
 * input rows it reads: for each tap (ki, kj) the outputs whose input column lies inside the
 * image form one contiguous range of ox, so the loop has no per-element bounds test and, at
 * stride 1, vectorises (the compiler's clones in FL_HOT_CLONES).
 *
 * Forward and input gradient work on (image, channel) planes, which are independent. The
 * weight gradient is spread over channels (each thread sums its channels over all images),
 * so no per-thread shares are needed and the sums run in a fixed order. */
#include "core/simd.h"
#include "nn/op_conv.h"

int fl_conv_dw_ok(const fl_lowered *L) { return L->group > 1 && L->g.c == 1 && L->zc == L->group; }

/* The output columns [lo, hi) whose input column ox*sw - pl + kj*dw lies in [0, w). */
static void ox_range(const fl_conv2d_geom *g, int kj, int *lo, int *hi) {
    int off = kj * g->dw - g->pl; /* ix = ox*sw + off */
    int a = off >= 0 ? 0 : (-off + g->sw - 1) / g->sw;
    int b = g->w - off <= 0 ? 0 : (g->w - off + g->sw - 1) / g->sw;
    *lo = a;
    *hi = b < g->ow ? b : g->ow;
}

FL_HOT_CLONES
static void plane_forward(const fl_conv2d_geom *g, const float *w, float b, const float *x,
                          float *y) {
    const int sw = g->sw;
    for (int oy = 0; oy < g->oh; oy++) {
        float *yr = y + (size_t)oy * g->ow;
        for (int ox = 0; ox < g->ow; ox++) yr[ox] = b;
        for (int ki = 0; ki < g->kh; ki++) {
            int iy = oy * g->sh - g->pt + ki * g->dh;
            if (iy < 0 || iy >= g->h) continue;
            const float *xr = x + (size_t)iy * g->w;
            for (int kj = 0; kj < g->kw; kj++) {
                int lo, hi, off = kj * g->dw - g->pl;
                ox_range(g, kj, &lo, &hi);
                const float wk = w[ki * g->kw + kj];
                const float *xs = xr + off;
                if (sw == 1)
                    for (int ox = lo; ox < hi; ox++) yr[ox] += wk * xs[ox];
                else
                    for (int ox = lo; ox < hi; ox++) yr[ox] += wk * xs[ox * sw];
            }
        }
    }
}

FL_HOT_CLONES
static void plane_adjoint(const fl_conv2d_geom *g, const float *w, const float *dy, float *dx) {
    const int sw = g->sw;
    for (int oy = 0; oy < g->oh; oy++) {
        const float *dr = dy + (size_t)oy * g->ow;
        for (int ki = 0; ki < g->kh; ki++) {
            int iy = oy * g->sh - g->pt + ki * g->dh;
            if (iy < 0 || iy >= g->h) continue;
            float *xr = dx + (size_t)iy * g->w;
            for (int kj = 0; kj < g->kw; kj++) {
                int lo, hi, off = kj * g->dw - g->pl;
                ox_range(g, kj, &lo, &hi);
                const float wk = w[ki * g->kw + kj];
                float *xs = xr + off;
                if (sw == 1)
                    for (int ox = lo; ox < hi; ox++) xs[ox] += wk * dr[ox];
                else
                    for (int ox = lo; ox < hi; ox++) xs[ox * sw] += wk * dr[ox];
            }
        }
    }
}

/* dw[kh*kw] += the plane's weight gradient; returns the sum of dy (the bias gradient). */
FL_HOT_CLONES
static float plane_grad_w(const fl_conv2d_geom *g, const float *dy, const float *x, float *dw) {
    const int sw = g->sw;
    float db = 0;
    for (int oy = 0; oy < g->oh; oy++) {
        const float *dr = dy + (size_t)oy * g->ow;
        for (int ox = 0; ox < g->ow; ox++) db += dr[ox];
        for (int ki = 0; ki < g->kh; ki++) {
            int iy = oy * g->sh - g->pt + ki * g->dh;
            if (iy < 0 || iy >= g->h) continue;
            const float *xr = x + (size_t)iy * g->w;
            for (int kj = 0; kj < g->kw; kj++) {
                int lo, hi, off = kj * g->dw - g->pl;
                ox_range(g, kj, &lo, &hi);
                const float *xs = xr + off;
                float s = 0;
                if (sw == 1)
                    for (int ox = lo; ox < hi; ox++) s += dr[ox] * xs[ox];
                else
                    for (int ox = lo; ox < hi; ox++) s += dr[ox] * xs[ox * sw];
                dw[ki * g->kw + kj] += s;
            }
        }
    }
    return db;
}

typedef struct dw_job {
    const fl_lowered *L;
    const float *W, *bias, *X, *Y; /* Y: dY for the gradients */
    float *out, *dB;               /* Y (forward), dX (adjoint), dW (weight gradient) */
    int clear;
} dw_job;

static size_t in_plane(const fl_lowered *L) { return (size_t)L->g.h * L->g.w; }
static size_t out_plane(const fl_lowered *L) { return (size_t)L->g.oh * L->g.ow; }

static void forward_range(void *ctx, int64_t lo, int64_t hi, int tid) {
    (void)tid;
    const dw_job *J = ctx;
    const fl_lowered *L = J->L;
    const int kk = L->g.kh * L->g.kw;
    for (int64_t p = lo; p < hi; p++) {
        int c = (int)(p % L->ci);
        plane_forward(&L->g, J->W + (size_t)c * kk, J->bias ? J->bias[c] : 0,
                      J->X + p * in_plane(L), J->out + p * out_plane(L));
    }
}

static void adjoint_range(void *ctx, int64_t lo, int64_t hi, int tid) {
    (void)tid;
    const dw_job *J = ctx;
    const fl_lowered *L = J->L;
    const int kk = L->g.kh * L->g.kw;
    for (int64_t p = lo; p < hi; p++) {
        float *dx = J->out + p * in_plane(L);
        if (J->clear)
            for (size_t i = 0; i < in_plane(L); i++) dx[i] = 0;
        plane_adjoint(&L->g, J->W + (size_t)(p % L->ci) * kk, J->Y + p * out_plane(L), dx);
    }
}

static void grad_w_range(void *ctx, int64_t lo, int64_t hi, int tid) {
    (void)tid;
    const dw_job *J = ctx;
    const fl_lowered *L = J->L;
    const int kk = L->g.kh * L->g.kw;
    for (int64_t c = lo; c < hi; c++) {
        float db = 0;
        for (int i = 0; i < L->n; i++) {
            size_t p = (size_t)i * L->ci + c;
            db += plane_grad_w(&L->g, J->Y + p * out_plane(L), J->X + p * in_plane(L),
                               J->out + c * kk);
        }
        if (J->dB) J->dB[c] += db;
    }
}

void fl_conv_dw_forward(const fl_lowered *L, const float *W, const float *bias, const float *X,
                        float *Y) {
    dw_job J = {.L = L, .W = W, .bias = bias, .X = X, .out = Y};
    fl_parallel_for((int64_t)L->n * L->ci, forward_range, &J);
}

void fl_conv_dw_adjoint(const fl_lowered *L, const float *W, const float *dY, float *dX,
                        int clear) {
    dw_job J = {.L = L, .W = W, .Y = dY, .out = dX, .clear = clear};
    fl_parallel_for((int64_t)L->n * L->ci, adjoint_range, &J);
}

void fl_conv_dw_grad_w(const fl_lowered *L, float *dW, float *dB, const float *dY,
                       const float *X) {
    dw_job J = {.L = L, .X = X, .Y = dY, .out = dW, .dB = dB};
    fl_parallel_for(L->ci, grad_w_range, &J);
}
