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
#include <stddef.h>
#include <string.h>

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

/* The row loops of the three passes: every (output row oy, tap ki, kj) whose input row iy is
 * inside the image, over the contiguous range of ox whose input column is too. One walk, its
 * body picked by a constant `pass` once it is inlined into each pass below:
 *   FWD  y[oy] += w[t] * x[iy]           (a = x, out = y; b: the bias each row starts from)
 *   ADJ  dx[iy] += w[t] * dy[oy]         (a = dy, out = dx)
 *   GRAD dw[t] += <dy[oy], x[iy]>        (a = dy, x = x, out = dw); returns the sum of dy */
enum { FWD, ADJ, GRAD };

static inline __attribute__((always_inline)) float
plane_walk(int pass, const fl_conv2d_geom *g, const float *w, float b, const float *a,
           const float *x, float *out) {
    const int sw = g->sw;
    float db = 0;
    for (int oy = 0; oy < g->oh; oy++) {
        const float *ar = a + (size_t)oy * g->ow; /* dy's row (ADJ, GRAD) */
        float *yr = out + (size_t)oy * g->ow;     /* y's row (FWD) */
        if (pass == FWD)
            for (int ox = 0; ox < g->ow; ox++) yr[ox] = b;
        if (pass == GRAD)
            for (int ox = 0; ox < g->ow; ox++) db += ar[ox];
        for (int ki = 0; ki < g->kh; ki++) {
            int iy = oy * g->sh - g->pt + ki * g->dh;
            if (iy < 0 || iy >= g->h) continue;
            for (int kj = 0; kj < g->kw; kj++) {
                int lo, hi, t = ki * g->kw + kj;
                ox_range(g, kj, &lo, &hi);
                /* ox's input is at row index at + ox*sw: an index, not a pointer, because
                 * at itself may lie before the row (left padding) */
                ptrdiff_t at = (ptrdiff_t)iy * g->w + kj * g->dw - g->pl;
                if (pass == FWD) {
                    if (sw == 1)
                        for (int ox = lo; ox < hi; ox++) yr[ox] += w[t] * a[at + ox];
                    else
                        for (int ox = lo; ox < hi; ox++) yr[ox] += w[t] * a[at + ox * sw];
                } else if (pass == ADJ) {
                    if (sw == 1)
                        for (int ox = lo; ox < hi; ox++) out[at + ox] += w[t] * ar[ox];
                    else
                        for (int ox = lo; ox < hi; ox++) out[at + ox * sw] += w[t] * ar[ox];
                } else {
                    float s = 0;
                    if (sw == 1)
                        for (int ox = lo; ox < hi; ox++) s += ar[ox] * x[at + ox];
                    else
                        for (int ox = lo; ox < hi; ox++) s += ar[ox] * x[at + ox * sw];
                    out[t] += s;
                }
            }
        }
    }
    return db;
}

FL_HOT_CLONES
static void plane_forward(const fl_conv2d_geom *g, const float *w, float b, const float *x,
                          float *y) {
    plane_walk(FWD, g, w, b, x, NULL, y);
}

FL_HOT_CLONES
static void plane_adjoint(const fl_conv2d_geom *g, const float *w, const float *dy, float *dx) {
    plane_walk(ADJ, g, w, 0, dy, NULL, dx);
}

/* dw[kh*kw] += the plane's weight gradient; returns the sum of dy (the bias gradient). */
FL_HOT_CLONES
static float plane_grad_w(const fl_conv2d_geom *g, const float *dy, const float *x, float *dw) {
    return plane_walk(GRAD, g, NULL, 0, dy, x, dw);
}

/* ---- forward of small planes ------------------------------------------------------------------
 * At 64x64 inputs most of MobileNetV2's and EfficientNet's depthwise planes are 2x2 to 8x8, and
 * the row loops above spend their time on loop overhead (rows of 2-4 outputs, ranges per tap).
 * Small planes are therefore first copied into a zero-padded buffer split into sh x sw phases
 * (phase (a, b) holds the padded pixels at rows = a, columns = b modulo the strides), so that
 * every tap reads one phase at a fixed offset from the output's position: output (oy, ox) sits
 * at q = oy*wq + ox of a "wide" plane, tap (ki, kj) reads phase ((ki*dh) % sh, (kj*dw) % sw) at
 * q + ((ki*dh) / sh)*wq + (kj*dw) / sw. Each tap is then one contiguous run over q, with no
 * bounds tests and no strided loads, and a block of 16 outputs stays in registers across all
 * the taps (as in conv_small.c). The wq - ow junk columns of each wide row are dropped when
 * the rows are copied out. */
typedef float v8f __attribute__((vector_size(32)));
#define LOAD8(v, p) memcpy(&(v), (p), sizeof(v8f))
#define STORE8(p, v) memcpy((p), &(v), sizeof(v8f))

enum { DW_BUF = 4096, DW_TAPS = 64, DW_BLOCK = 16 };

typedef struct dw_small {
    int hq, wq;        /* rows and columns of a phase */
    int span;          /* (oh-1)*wq + ow: wide positions computed */
    int taps;          /* kh*kw */
    int off[DW_TAPS];  /* tap t's offset into the phase buffer */
} dw_small;

/* Plan the phases of L's planes; 0 when they do not fit the stack buffers. */
static int dw_small_plan(const fl_conv2d_geom *g, dw_small *S) {
    S->taps = g->kh * g->kw;
    S->hq = g->oh + (g->kh - 1) * g->dh / g->sh;
    S->wq = g->ow + (g->kw - 1) * g->dw / g->sw;
    S->span = (g->oh - 1) * S->wq + g->ow;
    size_t phases = (size_t)g->sh * g->sw * S->hq * S->wq;
    if (S->taps > DW_TAPS || phases + DW_BLOCK > DW_BUF || (size_t)S->span + DW_BLOCK > DW_BUF)
        return 0;
    for (int ki = 0; ki < g->kh; ki++)
        for (int kj = 0; kj < g->kw; kj++) {
            int a = ki * g->dh % g->sh, b = kj * g->dw % g->sw;
            S->off[ki * g->kw + kj] = (a * g->sw + b) * S->hq * S->wq +
                                      ki * g->dh / g->sh * S->wq + kj * g->dw / g->sw;
        }
    return 1;
}

/* buf = the phases of plane x (zero outside the image; pixels no output reads are dropped) */
static void dw_small_phases(const fl_conv2d_geom *g, const dw_small *S, const float *x,
                            float *buf) {
    const size_t plane = (size_t)S->hq * S->wq;
    memset(buf, 0, sizeof(float) * (plane * g->sh * g->sw + DW_BLOCK));
    for (int iy = 0; iy < g->h; iy++) {
        int py = iy + g->pt, r = py / g->sh;
        if (r >= S->hq) break;
        float *row = buf + (size_t)(py % g->sh) * g->sw * plane + (size_t)r * S->wq;
        const float *xr = x + (size_t)iy * g->w;
        if (g->sw == 1) {
            int n = g->w < S->wq - g->pl ? g->w : S->wq - g->pl;
            if (n > 0) memcpy(row + g->pl, xr, sizeof(float) * n);
            continue;
        }
        for (int b = 0; b < g->sw; b++) { /* phase b: padded columns b, b + sw, ... */
            float *ph = row + (size_t)b * plane;
            int ix = ((b - g->pl) % g->sw + g->sw) % g->sw, c = (ix + g->pl) / g->sw;
            for (; ix < g->w && c < S->wq; ix += g->sw, c++) ph[c] = xr[ix];
        }
    }
}

FL_HOT_CLONES
static void plane_forward_small(const fl_conv2d_geom *g, const dw_small *S, const float *w,
                                float b, const float *x, float *y) {
    float buf[DW_BUF], wide[DW_BUF];
    dw_small_phases(g, S, x, buf);
    for (int q = 0; q < S->span; q += DW_BLOCK) {
        v8f a0 = (v8f){0} + b, a1 = a0;
        for (int t = 0; t < S->taps; t++) {
            v8f x0, x1;
            LOAD8(x0, buf + S->off[t] + q);
            LOAD8(x1, buf + S->off[t] + q + 8);
            a0 += w[t] * x0;
            a1 += w[t] * x1;
        }
        STORE8(wide + q, a0);
        STORE8(wide + q + 8, a1);
    }
    for (int oy = 0; oy < g->oh; oy++)
        memcpy(y + (size_t)oy * g->ow, wide + (size_t)oy * S->wq, sizeof(float) * g->ow);
}

typedef struct dw_job {
    const fl_lowered *L;
    const float *W, *bias, *X, *Y; /* Y: dY for the gradients */
    float *out, *dB;               /* Y (forward), dX (adjoint), dW (weight gradient) */
    int clear;
    int small;                     /* forward: planes fit plane_forward_small's buffers */
    dw_small S;
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
        const float *w = J->W + (size_t)c * kk, *x = J->X + p * in_plane(L);
        float b = J->bias ? J->bias[c] : 0, *y = J->out + p * out_plane(L);
        if (J->small)
            plane_forward_small(&L->g, &J->S, w, b, x, y);
        else
            plane_forward(&L->g, w, b, x, y);
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
    J.small = dw_small_plan(&L->g, &J.S);
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
