/* Convolutions with few input taps per output (the first layer of an image network: C*kh*kw
 * = 25 for LeNet's 5x5 on grey images), stride 1, no padding, computed directly.
 *
 * Why not im2col + GEMM: im2col would write kh*kw copies of every pixel only to feed a GEMM
 * with a tiny inner dimension, and the copies cost more than the arithmetic.
 *
 * The trick that makes the direct form vectorise: read each input channel as full-width rows.
 * Output (oy, ox) sits at p = oy*w + ox of a "wide" output with the input's row width w, and
 * tap t = (c, ki, kj) reads x[off[t] + p] with off[t] = c*h*w + ki*w + kj, so every tap is a
 * contiguous run over p < span = (oh-1)*w + ow. The last kw-1 columns of each wide row are
 * junk, dropped when a row is copied out (forward) or zero (weight gradient).
 *
 * Both kernels keep a block of results in registers across all the taps (forward: 6 maps x 16
 * outputs; weight gradient: 2 maps x 5 taps x 8 lanes), so each input vector loaded is used
 * by several multiply-adds and nothing is stored until the block is done. Sums run in a fixed
 * order (bias, then taps in order; lanes folded in order), so results are reproducible. */
#include <string.h>

#include "core/simd.h"
#include "nn/op_conv.h"

typedef float v8f __attribute__((vector_size(32)));
#define LOAD8(v, p) memcpy(&(v), (p), sizeof(v8f))
#define STORE8(p, v) memcpy((p), &(v), sizeof(v8f))

enum { MB = 6, PV = 2, GM = 2, GT = 5 }; /* forward: maps x vectors; gradient: maps x taps */

int fl_conv_small_ok(const fl_conv2d_geom *g, int group) {
    return group == 1 && g->c * g->kh * g->kw <= FL_CONV_SMALL_TAPS &&
           g->oh * g->w <= FL_CONV_SMALL_WIDE && g->sh == 1 && g->sw == 1 && g->dh == 1 &&
           g->dw == 1 && g->pt == 0 && g->pl == 0 && g->pb == 0 && g->pr == 0;
}

/* off[t] for the taps of one image, in W's order (c, ki, kj); returns their count. */
static int tap_offsets(const fl_conv2d_geom *g, int *off) {
    int t = 0;
    for (int c = 0; c < g->c; c++)
        for (int ki = 0; ki < g->kh; ki++)
            for (int kj = 0; kj < g->kw; kj++) off[t++] = (c * g->h + ki) * g->w + kj;
    return t;
}

FL_HOT_CLONES
void fl_conv_small_forward(const fl_conv2d_geom *g, int M, const float *W, const float *bias,
                           const float *X, float *Y, int64_t i0, int64_t i1) {
    const int oh = g->oh, ow = g->ow, w = g->w, span = (oh - 1) * w + ow;
    int off[FL_CONV_SMALL_TAPS];
    const int T = tap_offsets(g, off);
    float wide[MB][FL_CONV_SMALL_WIDE];
    for (int64_t i = i0; i < i1; i++) {
        const float *x = X + (size_t)i * g->c * g->h * w;
        for (int m0 = 0; m0 < M; m0 += MB) {
            /* a short last block repeats map M-1 and writes it once */
            float wt[FL_CONV_SMALL_TAPS][MB], b0[MB];
            for (int k = 0; k < MB; k++) {
                int mk = m0 + k < M ? m0 + k : M - 1;
                for (int t = 0; t < T; t++) wt[t][k] = W[(size_t)mk * T + t];
                b0[k] = bias ? bias[mk] : 0;
            }
            int p = 0;
            for (; p + 8 * PV <= span; p += 8 * PV) {
                v8f acc[MB][PV];
                for (int k = 0; k < MB; k++)
                    for (int v = 0; v < PV; v++) acc[k][v] = (v8f){0} + b0[k];
                for (int t = 0; t < T; t++) {
                    v8f xv[PV];
                    for (int v = 0; v < PV; v++) LOAD8(xv[v], x + off[t] + p + 8 * v);
                    for (int k = 0; k < MB; k++)
                        for (int v = 0; v < PV; v++) acc[k][v] += wt[t][k] * xv[v];
                }
                for (int k = 0; k < MB; k++)
                    for (int v = 0; v < PV; v++) STORE8(&wide[k][p + 8 * v], acc[k][v]);
            }
            for (; p < span; p++)
                for (int k = 0; k < MB; k++) {
                    float s = b0[k];
                    for (int t = 0; t < T; t++) s += wt[t][k] * x[off[t] + p];
                    wide[k][p] = s;
                }
            for (int k = 0; k < MB && m0 + k < M; k++) {
                float *y = Y + ((size_t)i * M + m0 + k) * oh * ow;
                for (int oy = 0; oy < oh; oy++)
                    memcpy(y + oy * ow, &wide[k][oy * w], sizeof(float) * ow);
            }
        }
    }
}

FL_HOT_CLONES
void fl_conv_small_grad_w(const fl_conv2d_geom *g, int M, const float *dY, const float *X,
                          float *dW, float *dB, int64_t i0, int64_t i1) {
    const int oh = g->oh, ow = g->ow, w = g->w, span = (oh - 1) * w + ow;
    int off[FL_CONV_SMALL_TAPS];
    const int T = tap_offsets(g, off);
    float dyw[GM][FL_CONV_SMALL_WIDE];
    for (int64_t i = i0; i < i1; i++) {
        const float *x = X + (size_t)i * g->c * g->h * w;
        for (int m0 = 0; m0 < M; m0 += GM) {
            /* dY of maps m0.. at the input's row width, junk columns zero (a short last block
             * repeats map M-1 and adds it once) */
            int mk[GM];
            for (int r = 0; r < GM; r++) {
                mk[r] = m0 + r < M ? m0 + r : M - 1;
                const float *dy = dY + ((size_t)i * M + mk[r]) * oh * ow;
                memset(dyw[r], 0, sizeof(float) * span);
                for (int oy = 0; oy < oh; oy++)
                    memcpy(&dyw[r][oy * w], dy + oy * ow, sizeof(float) * ow);
                if (dB && m0 + r < M) fl_bias_grad(dB + mk[r], dy, 1, 1, (int64_t)oh * ow);
            }
            for (int t0 = 0; t0 < T; t0 += GT) {
                int tk[GT];
                for (int j = 0; j < GT; j++) tk[j] = off[t0 + j < T ? t0 + j : T - 1];
                v8f acc[GM][GT] = {{{0}}};
                int p = 0;
                for (; p + 8 <= span; p += 8) {
                    v8f d[GM];
                    for (int r = 0; r < GM; r++) LOAD8(d[r], &dyw[r][p]);
                    for (int j = 0; j < GT; j++) {
                        v8f xv;
                        LOAD8(xv, x + tk[j] + p);
                        for (int r = 0; r < GM; r++) acc[r][j] += d[r] * xv;
                    }
                }
                for (int r = 0; r < GM && m0 + r < M; r++)
                    for (int j = 0; j < GT && t0 + j < T; j++) {
                        float s = 0;
                        for (int l = 0; l < 8; l++) s += acc[r][j][l];
                        for (int q = p; q < span; q++) s += dyw[r][q] * x[tk[j] + q];
                        dW[(size_t)mk[r] * T + t0 + j] += s;
                    }
            }
        }
    }
}
