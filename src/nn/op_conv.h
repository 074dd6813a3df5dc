/* Internal to the convolution and pooling families (op_conv.c, op_convt.c, op_pool.c):
 * the 2-D window attributes they share (window.c), convolution lowered to GEMM
 * (conv_lower.c), the small direct convolution (conv_small.c) and the bias (bias.c). */
#ifndef FLARE_NN_OP_CONV_H
#define FLARE_NN_OP_CONV_H

#include "flare/model.h"

/* ---- window attributes: kernel_shape, strides, dilations, pads, auto_pad ------------------- */
typedef enum fl_auto_pad { FL_PAD_NOTSET = 0, FL_PAD_SAME_UPPER, FL_PAD_SAME_LOWER, FL_PAD_VALID } fl_auto_pad;

typedef struct fl_window {
    int has_kernel;       /* kernel_shape given (Conv may take it from W instead) */
    int64_t kernel[2];    /* kh, kw */
    int64_t stride[2];    /* default 1 */
    int64_t dil[2];       /* default 1 */
    int64_t pads[4];      /* top, left, bottom, right (ONNX order: x1_begin, x2_begin, x1_end,
                             x2_end); ignored unless auto_pad is NOTSET */
    fl_auto_pad auto_pad;
} fl_window;

/* Read the window attributes of n into w. Each list attribute must have 2 entries (4 for
 * pads): anything else fails with "only 2-D supported", naming the node. */
fl_status fl_window_parse(const fl_node *n, fl_window *w, fl_err *e);

/* Read the list attribute `name` (if present) into dst[0..want): it must have `want` entries
 * ("only 2-D supported" otherwise), each >= min. */
fl_status fl_window_ints(const fl_node *n, const char *name, int want, int64_t min, int64_t *dst,
                         fl_err *e);

/* Fail with "only 2-D supported" unless x is [N,C,H,W]. `what` names the tensor. */
fl_status fl_check_4d(const fl_node *n, const fl_tensor *x, const char *what, fl_err *e);

/* Output size and begin/end pads along one axis (0 = H, 1 = W) of a convolution or pooling
 * window of size k over `in` elements. ceil_mode rounds the output size up (pools); a window
 * that would start beyond the input and its begin pad is dropped, as in PyTorch. Fails when
 * the output would be empty. */
fl_status fl_window_out(const fl_node *n, const fl_window *w, int axis, int64_t in, int64_t k,
                        int ceil_mode, int64_t *out, int64_t *pad_begin, int64_t *pad_end,
                        fl_err *e);

/* ---- convolution lowered to GEMM ------------------------------------------------------------
 * Conv and ConvTranspose are the same linear map read in two directions. Call "image side" I
 * [N, ci, ih, iw] the tensor that im2col unfolds (Conv's input, ConvTranspose's output) and
 * "matrix side" Z [N, zc, oh*ow] the one W multiplies directly (Conv's output, ConvTranspose's
 * input). With g groups, W is [zc, (ci/g)*kh*kw] and for every image and group
 *
 *     Z_g = W_g · im2col(I_g)                        (Conv forward)
 *     I_g += col2im(W_g^T · Z_g)                      (its adjoint: ConvTranspose forward,
 *                                                      Conv's input gradient)
 *     dW_g += Z_g · im2col(I_g)^T                     (the weight gradient of both)
 *
 * To keep GEMMs large for small images, a chunk of nb images is lowered at once: cols is
 * [ci*kh*kw, nb*oh*ow] (image j's columns at j*oh*ow) and Z is staged in mat [zc, nb*oh*ow].
 * nb is chosen so that cols stays a few MiB; with nb == 1 the GEMM reads/writes Z in place,
 * and a 1x1 stride-1 unpadded convolution skips im2col entirely (cols is I itself). */
/* Per-thread scratch of a lowered convolution (see fl_parallel_for: chunks of images are
 * spread over the threads, each with its own buffers). */
typedef struct fl_lowered_buf {
    float *cols;       /* [ci*kh*kw, nb*oh*ow] unless direct */
    float *mat;        /* [zc, nb*oh*ow] when nb > 1 */
    float *dw;         /* [zc * (ci/g)*kh*kw + zc]: this thread's share of the weight
                          gradient, then of the bias gradient (Conv) */
    size_t cols_cap, mat_cap, dw_cap; /* floats allocated */
    int cached;        /* chunk whose im2col(I) is still in cols (left by the last forward), or -1 */
} fl_lowered_buf;

typedef struct fl_lowered {
    fl_conv2d_geom g;  /* one group of one image of I: c = ci/g; oh, ow = Z's spatial size */
    int n, ci, zc, group;
    int nb;            /* images per chunk */
    int chunks;        /* ceil(n / nb) */
    int direct;        /* 1x1, stride 1, no padding: im2col(I) == I */
    int slots;         /* buffers in buf (threads) */
    fl_lowered_buf *buf;
} fl_lowered;

/* Target size of one thread's cols, in floats (read when planning; tests lower it to exercise
 * chunking). Large enough that a chunk's GEMM has thousands of columns; small enough to stay
 * near the cache and not cost hundreds of MiB for a big batch. Chunks are also capped at
 * n / threads images so that every thread gets work. */
extern size_t fl_conv_cols_budget;
/* Columns (chunk images x output pixels) an inference chunk's GEMM aims for. */
enum { FL_CONV_MIN_COLS = 256 };

/* (Re)plan for a batch of n images: allocates cols/mat (planning time, never in a pass).
 * training: plan for forward + backward (see the chunk size in op_conv.c). */
fl_status fl_lowered_plan(fl_lowered *L, const fl_node *node, int n, int ci, int zc, int group,
                          const fl_conv2d_geom *g, int training, fl_err *e);
void fl_lowered_free(fl_lowered *L);
/* Z = W·im2col(I) (+ bias[zc] per channel, when not NULL), or Z += W·im2col(I) when
 * accumulate. Leaves each thread's last chunk in its cols. */
void fl_lowered_forward(fl_lowered *L, const float *W, const float *I, const float *bias,
                        float *Z, int accumulate);
/* I += col2im(W^T·Z), or I = when clear (each thread clears its own images). */
void fl_lowered_adjoint(fl_lowered *L, const float *W, const float *Z, float *I, int clear);
/* dW += Z·im2col(I)^T, and dB[zc] += the sums of Z's channels when dB is not NULL (Conv's bias
 * gradient, summed by each thread while its chunk is in cache). trust_cache: I is unchanged
 * since the last fl_lowered_forward on it, so the columns it left behind may be reused. */
void fl_lowered_grad_w(fl_lowered *L, float *dW, float *dB, const float *Z, const float *I,
                       int trust_cache);
/* The threads' dw (+ db) shares in L->buf: cleared before a gradient pass (a thread that gets
 * no work must add zeros), then added into dW (and dB) in thread order, so the result depends
 * only on the thread count. Conv's small direct path uses them too. */
void fl_lowered_shares_clear(fl_lowered *L, size_t size);
void fl_lowered_shares_add(const fl_lowered *L, size_t size, float *dW, float *dB);

/* ---- small direct convolution (conv_small.c) ------------------------------------------------
 * For few input taps per output (C*kh*kw <= FL_CONV_SMALL_TAPS), stride 1, no padding, no
 * groups, and output rows that fit the kernels' stack buffers (oh*w <= FL_CONV_SMALL_WIDE).
 * Images [i0, i1): Y = W (*) X (+ bias), or dW (and dB, when not NULL) += the gradients. */
enum { FL_CONV_SMALL_TAPS = 32, FL_CONV_SMALL_WIDE = 4096 };
int fl_conv_small_ok(const fl_conv2d_geom *g, int group);
void fl_conv_small_forward(const fl_conv2d_geom *g, int M, const float *W, const float *bias,
                           const float *X, float *Y, int64_t i0, int64_t i1);
void fl_conv_small_grad_w(const fl_conv2d_geom *g, int M, const float *dY, const float *X,
                          float *dW, float *dB, int64_t i0, int64_t i1);

/* ---- depthwise convolution (conv_dw.c) -------------------------------------------------------
 * group == C == M (W [C, 1, kh, kw]), any stride, padding and dilation, computed directly on
 * L's geometry: Y = W (*) X (+ bias); dX += (or = when clear) its adjoint; dW (and dB, when not
 * NULL) += the gradients. Each spreads its work over the thread pool. */
int fl_conv_dw_ok(const fl_lowered *L);
void fl_conv_dw_forward(const fl_lowered *L, const float *W, const float *bias, const float *X,
                        float *Y);
void fl_conv_dw_adjoint(const fl_lowered *L, const float *W, const float *dY, float *dX,
                        int clear);
void fl_conv_dw_grad_w(const fl_lowered *L, float *dW, float *dB, const float *dY,
                       const float *X);

/* ---- Winograd 3x3 convolution (conv_wino.c) -------------------------------------------------
 * For 3x3, stride 1, dilation 1, one group, any pads, in inference only: Y = W (*) X (+ bias)
 * as F(m x m, 3 x 3) with output tiles of m = 2 (4x4 input tiles, 16 GEMMs, 2.25x fewer
 * multiplies) or m = 4 (6x6 tiles, 36 GEMMs, 4x fewer). Output tile j of channel mo is
 *     y_j = A^T [ sum_c (G w[mo][c] G^T) .* (B^T d_j[c] B) ] A
 * so for each of the a*a (a = m + 2) transformed taps xi the sum over c is one GEMM
 * P[xi] [M, tiles] = U[xi] [M, C] · V[xi] [C, tiles]. Tiles are numbered over the whole batch
 * and done in blocks (a thread's V and P, sized by fl_conv_wino_budget, no buffer the size of
 * the batch); ragged edges read zeros past the input and write only the outputs that exist.
 * Not in training: the weights change every step (U would be redone each pass) and the
 * backward pass reuses the columns the lowered forward leaves in cache. fp32 error grows with
 * m (the transforms' entries reach 8 for m = 4): about 1e-6 relative for m = 2, a few 1e-6 for
 * m = 4, measured against the lowered path (tests/test_ops_conv.c).
 * U is kept with a copy of the W it was made from and redone when W differs (memcmp: exact,
 * and cheap next to the convolution), so weights edited between passes are seen. */
typedef struct fl_wino {
    int m;              /* output tile side: 2 or 4; 0 = not used */
    int ready;          /* U matches wcopy */
    int th, tw, tiles;  /* tiles per column, row, image */
    int block, blocks;  /* tiles per block; blocks over the batch */
    int ld;             /* block rounded up to 8: V's and P's row length */
    float *U;           /* [a*a][M][C] */
    float *wcopy;       /* [M][C][3][3]: the weights U was made from */
    size_t u_cap, w_cap;
    int slots;          /* scratch buffers (threads) */
    float **scratch;    /* per thread: V [a*a][C][block], then P [a*a][M][block] */
    size_t *scratch_cap;
} fl_wino;

/* The tile side for L's shape (0: use the other paths): by measurement per shape, see
 * docs/onnx.md. fl_conv_wino_force >= 0 overrides the choice (tests; 0 = never) where the
 * shape fits. Floats of a thread's V + P a block aims for: fl_conv_wino_budget. */
enum { FL_WINO_MIN_TILES = 16 }; /* tiles per thread below which a tile side is not used */
extern int fl_conv_wino_force;
extern size_t fl_conv_wino_budget;
extern int fl_conv_wino_min_block;
int fl_conv_wino_pick(const fl_lowered *L, int training);
/* (Re)plan Z for L with tile side m (0: free nothing, use nothing). Allocates. */
fl_status fl_wino_plan(fl_wino *Z, const fl_lowered *L, int m, const fl_node *node, fl_err *e);
void fl_wino_free(fl_wino *Z);
/* Y = W (*) X (+ bias) over the thread pool; redoes U first when W changed. */
void fl_wino_forward(fl_wino *Z, const fl_lowered *L, const float *W, const float *bias,
                     const float *X, float *Y);
/* Which algorithm Conv node n ran its last forward with: 'w' Winograd (then *m = its tile
 * side), 'd' depthwise, 's' small direct, 'l' lowered to GEMM (op_conv.c; tests). */
int fl_conv_algo(const fl_node *n, int *m);

/* y[n, c, :] += b[c] over [N, C, P]; db[c] += sum of dy[n, c, :]. */
void fl_bias_add(float *y, const float *b, int64_t n, int64_t c, int64_t p);
void fl_bias_grad(float *db, const float *dy, int64_t n, int64_t c, int64_t p);

extern const fl_op fl_op_convtranspose; /* op_convt.c */

#endif
