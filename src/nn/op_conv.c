/* Conv (2-D), the window attributes shared with pooling, and convolution lowered to GEMM
 * (see op_conv.h for the shape of the lowering). ConvTranspose is in op_convt.c. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/simd.h"
#include "flare/model.h"
#include "nn/op_conv.h"
#include "nn/ops.h"

/* ---- window attributes ------------------------------------------------------------------------ */
fl_status fl_window_ints(const fl_node *n, const char *name, int want, int64_t min,
                        int64_t *dst, fl_err *e) {
    const fl_attr *a = fl_node_attr(n, name);
    if (!a) return FL_OK;
    if (a->type != FL_ATTR_INTS)
        return fl_fail(e, FL_ERR_FORMAT, "node '%s' (%s): attribute '%s' must be a list of ints",
                       n->name, n->op->name, name);
    if (a->n != want)
        return fl_fail(e, FL_ERR_UNSUPPORTED,
                       "node '%s' (%s): only 2-D supported ('%s' has %d entries, expected %d)",
                       n->name, n->op->name, name, a->n, want);
    for (int i = 0; i < want; i++) {
        if (a->ints[i] < min || a->ints[i] > INT_MAX / 4)
            return fl_fail(e, FL_ERR_FORMAT, "node '%s' (%s): %s[%d] = %lld is out of range",
                           n->name, n->op->name, name, i, (long long)a->ints[i]);
        dst[i] = a->ints[i];
    }
    return FL_OK;
}

fl_status fl_window_parse(const fl_node *n, fl_window *w, fl_err *e) {
    memset(w, 0, sizeof *w);
    w->stride[0] = w->stride[1] = w->dil[0] = w->dil[1] = 1;
    w->has_kernel = fl_node_attr(n, "kernel_shape") != NULL;
    fl_status st = fl_window_ints(n, "kernel_shape", 2, 1, w->kernel, e);
    if (st == FL_OK) st = fl_window_ints(n, "strides", 2, 1, w->stride, e);
    if (st == FL_OK) st = fl_window_ints(n, "dilations", 2, 1, w->dil, e);
    if (st == FL_OK) st = fl_window_ints(n, "pads", 4, 0, w->pads, e);
    if (st != FL_OK) return st;
    const fl_attr *a = fl_node_attr(n, "auto_pad");
    if (!a) return FL_OK;
    static const char *const names[] = {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"};
    for (int i = 0; i < 4; i++)
        if (a->type == FL_ATTR_STRING && a->s && strcmp(a->s, names[i]) == 0) {
            w->auto_pad = (fl_auto_pad)i;
            return FL_OK;
        }
    return fl_fail(e, FL_ERR_FORMAT, "node '%s' (%s): bad auto_pad '%s'", n->name, n->op->name,
                   a->type == FL_ATTR_STRING && a->s ? a->s : "(not a string)");
}

fl_status fl_check_4d(const fl_node *n, const fl_tensor *x, const char *what, fl_err *e) {
    if (x->ndim == 4) return FL_OK;
    char buf[128];
    return fl_fail(e, x->ndim == 3 || x->ndim == 5 ? FL_ERR_UNSUPPORTED : FL_ERR_SHAPE,
                   "node '%s' (%s): only 2-D supported: %s has shape %s, expected [N,C,H,W]",
                   n->name, n->op->name, what, fl_shape_str(x, buf, sizeof buf));
}

fl_status fl_window_out(const fl_node *n, const fl_window *w, int axis, int64_t in, int64_t k,
                        int ceil_mode, int64_t *out, int64_t *pad_begin, int64_t *pad_end,
                        fl_err *e) {
    int64_t s = w->stride[axis], dk = (k - 1) * w->dil[axis] + 1, o = 0, pb = 0, pe = 0;
    if (w->auto_pad == FL_PAD_SAME_UPPER || w->auto_pad == FL_PAD_SAME_LOWER) {
        /* SAME: out = ceil(in / stride); the odd pad goes to the end (UPPER) or begin (LOWER) */
        o = (in + s - 1) / s;
        int64_t total = (o - 1) * s + dk - in;
        if (total < 0) total = 0;
        pb = w->auto_pad == FL_PAD_SAME_UPPER ? total / 2 : total - total / 2;
        pe = total - pb;
    } else {
        if (w->auto_pad == FL_PAD_NOTSET) {
            pb = w->pads[axis];
            pe = w->pads[axis + 2];
        }
        int64_t span = in + pb + pe - dk;
        if (span >= 0) {
            o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
            /* ceil_mode may add a window that starts in the end padding: PyTorch drops it */
            if (ceil_mode && (o - 1) * s >= in + pb) o--;
        }
    }
    if (o <= 0 || o > INT_MAX / 4)
        return fl_fail(e, FL_ERR_SHAPE,
                       "node '%s' (%s): %s size %lld is too small for a window of %lld (with "
                       "dilation) and pads %lld+%lld",
                       n->name, n->op->name, axis ? "width" : "height", (long long)in,
                       (long long)dk, (long long)pb, (long long)pe);
    *out = o;
    *pad_begin = pb;
    *pad_end = pe;
    return FL_OK;
}

void fl_bias_add(float *y, const float *b, int64_t n, int64_t c, int64_t p) {
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < c; j++) {
            float *row = y + (i * c + j) * p, bj = b[j];
            for (int64_t k = 0; k < p; k++) row[k] += bj;
        }
}

/* Eight running sums per row let the compiler vectorise the reduction without reordering
 * anything it was not told to (the result is the same for every run). */
void fl_bias_grad(float *db, const float *dy, int64_t n, int64_t c, int64_t p) {
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < c; j++) {
            const float *row = dy + (i * c + j) * p;
            float lane[8] = {0};
            int64_t k = 0;
            for (; k + 8 <= p; k += 8)
                for (int l = 0; l < 8; l++) lane[l] += row[k + l];
            for (; k < p; k++) lane[0] += row[k];
            db[j] += ((lane[0] + lane[1]) + (lane[2] + lane[3])) +
                     ((lane[4] + lane[5]) + (lane[6] + lane[7]));
        }
}

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
    L->direct = g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->pt == 0 &&
                g->pl == 0 && g->oh == g->h && g->ow == g->w;
    int threads = fl_parallel_slots();
    size_t p = (size_t)g->oh * g->ow, k = (size_t)ci * g->kh * g->kw;
    /* Inference keeps chunks small, so a chunk's columns are still in L2 when the GEMM reads
     * them (measured ~15 % faster on LeNet-5); training keeps each thread's share in one
     * chunk, so the weight gradient can reuse the columns the forward pass left behind. */
    size_t budget = training ? fl_conv_cols_budget : fl_conv_cols_budget / 32;
    size_t nb = L->direct ? 1 : budget / (k * p > 0 ? k * p : 1);
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

/* im2col of images n0..n0+b of `in` into cols [ci*kh*kw, b*P] (image j's columns at j*P), or
 * (in == NULL) col2im of cols added into the same images of `out`: one strided call per
 * image. */
static void chunk_fold(const fl_lowered *L, fl_lowered_buf *B, const float *in, float *out,
                       int n0, int b) {
    fl_conv2d_geom all = L->g;
    all.c = L->ci;
    size_t p = (size_t)all.oh * all.ow, img = (size_t)L->ci * all.h * all.w, ld = (size_t)b * p;
    for (int j = 0; j < b; j++) {
        size_t at = (size_t)(n0 + j) * img;
        if (in)
            fl_im2col_ld(B->cols + j * p, ld, in + at, &all);
        else
            fl_col2im_ld(out + at, B->cols + j * p, ld, &all);
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
    if (!trust_cache || B->cached != n0) chunk_fold(L, B, I, NULL, n0, b);
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
        if (L->direct) continue;
        if (J->clear) /* the chunk's images, while they are about to be in cache anyway */
            memset(J->I + (size_t)n0 * L->ci * g->h * g->w, 0,
                   sizeof(float) * (size_t)b * L->ci * g->h * g->w);
        chunk_fold(L, B, NULL, J->I, n0, b);
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
static void shares_clear(fl_lowered *L, size_t size) {
    for (int t = 0; t < L->slots; t++) memset(L->buf[t].dw, 0, sizeof(float) * (size + L->zc));
}

static void shares_add(const fl_lowered *L, size_t size, float *dW, float *dB) {
    for (int t = 0; t < L->slots; t++) {
        for (size_t i = 0; i < size; i++) dW[i] += L->buf[t].dw[i];
        for (int c = 0; dB && c < L->zc; c++) dB[c] += L->buf[t].dw[size + c];
    }
}

void fl_lowered_grad_w(fl_lowered *L, float *dW, float *dB, const float *Z, const float *I,
                       int trust_cache) {
    lowered_job J = {.L = L, .cZ = Z, .cI = I, .trust_cache = trust_cache, .bias_grad = dB != NULL};
    size_t size = (size_t)L->zc * L->g.c * L->g.kh * L->g.kw;
    shares_clear(L, size);
    fl_parallel_for(L->chunks, grad_w_range, &J);
    shares_add(L, size, dW, dB);
}

/* ---- Conv ------------------------------------------------------------------------------------------
 * X [N, C, H, W], W [M, C/group, kh, kw], B [M] (optional)  ->  Y [N, M, OH, OW] */
typedef struct conv_state {
    fl_window win;
    int group;
    fl_lowered L;
} conv_state;

static void conv_free(fl_node *n) {
    conv_state *s = n->state;
    if (s) fl_lowered_free(&s->L);
    fl_free(s);
}

static fl_status conv_init(fl_model *m, fl_node *n, fl_err *e) {
    static const char *const known[] = {"kernel_shape", "strides", "dilations", "pads",
                                        "auto_pad", "group", NULL};
    fl_status st = fl_node_check_arity(n, 2, 3, 1, 1, e);
    if (st == FL_OK) st = fl_node_check_attrs(n, known, e);
    if (st != FL_OK) return st;
    conv_state *s = fl_alloc(sizeof *s);
    if (!s) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    n->state = s;
    int64_t group = fl_node_attr_int(n, "group", 1);
    if (group < 1 || group > INT_MAX / 4)
        return fl_fail(e, FL_ERR_FORMAT, "node '%s' (Conv): bad group %lld", n->name,
                       (long long)group);
    s->group = (int)group;
    return fl_window_parse(n, &s->win, e);
}

static fl_status conv_shape(fl_model *m, fl_node *n, fl_err *e) {
    conv_state *s = n->state;
    const fl_tensor *x = fl_in(m, n, 0), *w = fl_in(m, n, 1), *b = fl_in(m, n, 2);
    char bx[128], bw[128];
    fl_status st = fl_check_4d(n, x, "input X", e);
    if (st == FL_OK) st = fl_check_4d(n, w, "weight W", e);
    if (st != FL_OK) return st;
    int64_t c = x->shape[1], mo = w->shape[0], g = s->group;
    if (w->shape[1] * g != c || mo % g != 0 || x->shape[2] <= 0 || x->shape[3] <= 0 ||
        (s->win.has_kernel &&
         (s->win.kernel[0] != w->shape[2] || s->win.kernel[1] != w->shape[3])))
        return fl_fail(e, FL_ERR_SHAPE,
                       "node '%s' (Conv): input %s and weight %s do not fit (group %d)", n->name,
                       fl_shape_str(x, bx, sizeof bx), fl_shape_str(w, bw, sizeof bw), s->group);
    if (b && (b->ndim != 1 || b->shape[0] != mo))
        return fl_fail(e, FL_ERR_SHAPE, "node '%s' (Conv): bias has shape %s, expected [%lld]",
                       n->name, fl_shape_str(b, bx, sizeof bx), (long long)mo);
    int64_t oh, ow, pt, pb, pl, pr;
    st = fl_window_out(n, &s->win, 0, x->shape[2], w->shape[2], 0, &oh, &pt, &pb, e);
    if (st == FL_OK) st = fl_window_out(n, &s->win, 1, x->shape[3], w->shape[3], 0, &ow, &pl, &pr, e);
    if (st != FL_OK) return st;
    fl_conv2d_geom geo = {
        .c = (int)(c / g), .h = (int)x->shape[2], .w = (int)x->shape[3],
        .kh = (int)w->shape[2], .kw = (int)w->shape[3],
        .sh = (int)s->win.stride[0], .sw = (int)s->win.stride[1],
        .pt = (int)pt, .pl = (int)pl, .pb = (int)pb, .pr = (int)pr,
        .dh = (int)s->win.dil[0], .dw = (int)s->win.dil[1], .oh = (int)oh, .ow = (int)ow,
    };
    int64_t out[4] = {x->shape[0], mo, oh, ow};
    fl_node_set_out_shape(m, n, 0, 4, out);
    return fl_lowered_plan(&s->L, n, (int)x->shape[0], (int)c, (int)mo, s->group, &geo,
                           m->training, e);
}

/* ---- the small direct path (conv_small.c), spread over images ---------------------------------- */
typedef struct small_job {
    fl_lowered *L;
    const float *W, *bias, *X, *dY;
    float *Y;
    size_t size; /* gradient: floats of dW */
    int bias_grad;
} small_job;

static void small_forward_range(void *ctx, int64_t lo, int64_t hi, int tid) {
    (void)tid;
    const small_job *J = ctx;
    fl_conv_small_forward(&J->L->g, J->L->zc, J->W, J->bias, J->X, J->Y, lo, hi);
}

static void small_grad_range(void *ctx, int64_t lo, int64_t hi, int tid) {
    const small_job *J = ctx;
    float *dw = J->L->buf[tid].dw;
    fl_conv_small_grad_w(&J->L->g, J->L->zc, J->dY, J->X, dw, J->bias_grad ? dw + J->size : NULL,
                         lo, hi);
}

/* dW (and dB) += the gradients, per-thread shares summed in thread order */
static void conv_small_direct_grad_w(fl_lowered *L, float *dW, float *dB, const float *dY,
                                     const float *X) {
    size_t size = (size_t)L->zc * L->g.c * L->g.kh * L->g.kw;
    shares_clear(L, size);
    small_job J = {.L = L, .X = X, .dY = dY, .size = size, .bias_grad = dB != NULL};
    fl_parallel_for(L->n, small_grad_range, &J);
    shares_add(L, size, dW, dB);
}

static int conv_is_small_direct(const conv_state *s) { return fl_conv_small_ok(&s->L.g, s->group); }

static void conv_forward(fl_model *m, fl_node *n) {
    conv_state *s = n->state;
    const fl_tensor *b = fl_in(m, n, 2);
    fl_tensor *y = fl_out(m, n, 0);
    const float *bias = b ? b->data : NULL;
    if (conv_is_small_direct(s)) {
        small_job J = {.L = &s->L, .W = fl_in(m, n, 1)->data, .bias = bias,
                       .X = fl_in(m, n, 0)->data, .Y = y->data};
        fl_parallel_for(s->L.n, small_forward_range, &J);
        for (int t = 0; t < s->L.slots; t++) s->L.buf[t].cached = -1; /* no columns made */
    } else {
        fl_lowered_forward(&s->L, fl_in(m, n, 1)->data, fl_in(m, n, 0)->data, bias, y->data, 0);
    }
}

static void conv_backward(fl_model *m, fl_node *n) {
    conv_state *s = n->state;
    const fl_tensor *dy = fl_gout(m, n, 0);
    int fresh;
    fl_tensor *dx = fl_gin_fresh(m, n, 0, &fresh), *dw = fl_gin(m, n, 1), *db = fl_gin(m, n, 2);
    /* weight gradient first: it can reuse the columns the forward pass left in the buffer,
     * which the input gradient then overwrites */
    float *dbias = db ? db->data : NULL;
    if (dw && conv_is_small_direct(s))
        conv_small_direct_grad_w(&s->L, dw->data, dbias, dy->data, fl_in(m, n, 0)->data);
    else if (dw)
        fl_lowered_grad_w(&s->L, dw->data, dbias, dy->data, fl_in(m, n, 0)->data, 1);
    else if (db) /* the bias alone (weights frozen) */
        fl_bias_grad(db->data, dy->data, dy->shape[0], dy->shape[1], dy->shape[2] * dy->shape[3]);
    if (dx) fl_lowered_adjoint(&s->L, fl_in(m, n, 1)->data, dy->data, dx->data, fresh);
}

static const fl_op op_conv = {"Conv", conv_init, conv_shape, conv_forward, conv_backward, conv_free};

const fl_op *const fl_ops_conv[] = {&op_conv, &fl_op_convtranspose, NULL};
