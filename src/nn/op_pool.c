/* Pooling: MaxPool and AveragePool (2-D windows, same attributes as Conv: see op_conv.h) and
 * GlobalAveragePool.
 *
 * Each output element reads the window rows [ki_lo, ki_hi) x columns [kj_lo, kj_hi) that fall
 * inside the input; padding never contributes a value. MaxPool records, per output element,
 * which input element won (its offset in the input plane), so backward is a scatter. */
#include <string.h>

#include "flare/model.h"
#include "nn/op_conv.h"
#include "nn/ops.h"

typedef struct pool_state {
    fl_window win;
    int ceil_mode, count_include_pad, storage_order;
    /* planned */
    int64_t planes;          /* N*C */
    int h, w, oh, ow, pt, pl, pb, pr;
    int32_t *argmax;         /* MaxPool: [planes, oh, ow], offset in the input plane, -1: none */
    size_t argmax_cap;
} pool_state;

static void pool_free(fl_node *n) {
    pool_state *s = n->state;
    if (s) fl_free(s->argmax);
    fl_free(s);
}

static fl_status pool_init(fl_model *m, fl_node *n, int max_out, const char *const *known,
                           fl_err *e) {
    fl_status st = fl_node_check_arity(n, 1, 1, 1, max_out, e);
    if (st == FL_OK) st = fl_node_check_attrs(n, known, e);
    if (st != FL_OK) return st;
    pool_state *s = fl_alloc(sizeof *s);
    if (!s) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    n->state = s;
    st = fl_window_parse(n, &s->win, e);
    if (st != FL_OK) return st;
    if (!s->win.has_kernel)
        return fl_fail(e, FL_ERR_FORMAT, "node '%s' (%s): kernel_shape is required", n->name,
                       n->op->name);
    s->ceil_mode = fl_node_attr_int(n, "ceil_mode", 0) != 0;
    s->count_include_pad = fl_node_attr_int(n, "count_include_pad", 0) != 0;
    int64_t so = fl_node_attr_int(n, "storage_order", 0);
    if (so != 0 && so != 1)
        return fl_fail(e, FL_ERR_FORMAT, "node '%s' (%s): bad storage_order %lld", n->name,
                       n->op->name, (long long)so);
    s->storage_order = (int)so;
    return FL_OK;
}

static fl_status pool_shape(fl_model *m, fl_node *n, fl_err *e) {
    pool_state *s = n->state;
    const fl_tensor *x = fl_in(m, n, 0);
    fl_status st = fl_check_4d(n, x, "input X", e);
    if (st != FL_OK) return st;
    int64_t oh, ow, pt, pb, pl, pr;
    st = fl_window_out(n, &s->win, 0, x->shape[2], s->win.kernel[0], s->ceil_mode, &oh, &pt, &pb, e);
    if (st == FL_OK)
        st = fl_window_out(n, &s->win, 1, x->shape[3], s->win.kernel[1], s->ceil_mode, &ow, &pl, &pr, e);
    if (st != FL_OK) return st;
    s->planes = x->shape[0] * x->shape[1];
    s->h = (int)x->shape[2];
    s->w = (int)x->shape[3];
    s->oh = (int)oh;
    s->ow = (int)ow;
    s->pt = (int)pt;
    s->pl = (int)pl;
    s->pb = (int)pb;
    s->pr = (int)pr;
    int64_t out[4] = {x->shape[0], x->shape[1], oh, ow};
    for (int i = 0; i < n->n_out; i++) fl_node_set_out_shape(m, n, i, 4, out);
    if (strcmp(n->op->name, "MaxPool") == 0) {
        size_t need = (size_t)s->planes * s->oh * s->ow;
        if (need > s->argmax_cap) {
            fl_free(s->argmax);
            s->argmax = fl_alloc((need ? need : 1) * sizeof(int32_t));
            s->argmax_cap = s->argmax ? need : 0;
            if (!s->argmax)
                return fl_fail(e, FL_ERR_NOMEM, "node '%s' (MaxPool): out of memory", n->name);
        }
    }
    return FL_OK;
}

/* The window offsets k in [*lo, *hi) with start + k*d inside [0, size). */
static void window_range(int start, int k, int d, int size, int *lo, int *hi) {
    if (start >= 0 && start + (k - 1) * d < size) { /* inside: the common case, no divisions */
        *lo = 0;
        *hi = k;
        return;
    }
    int l = start >= 0 ? 0 : (-start + d - 1) / d;
    int h = start >= size ? 0 : (size - start + d - 1) / d;
    if (h > k) h = k;
    if (l > h) l = h;
    *lo = l;
    *hi = h;
}

/* Number of window offsets with start + k*d inside the padded extent [-pad_b, size + pad_e). */
static int padded_count(int start, int k, int d, int size, int pad_b, int pad_e) {
    int lo, hi;
    window_range(start + pad_b, k, d, size + pad_b + pad_e, &lo, &hi);
    return hi - lo;
}

/* ---- MaxPool ------------------------------------------------------------------------------------ */
static fl_status maxpool_init(fl_model *m, fl_node *n, fl_err *e) {
    static const char *const known[] = {"kernel_shape", "strides", "pads", "auto_pad",
                                        "ceil_mode", "dilations", "storage_order", NULL};
    fl_status st = pool_init(m, n, 2, known, e);
    /* the optional Indices output: int64 in ONNX, exact as float below 2^24 elements */
    if (st == FL_OK && n->n_out == 2) m->values[n->out[1]].onnx_dtype = 7;
    return st;
}

/* The common 2x2 / stride 2 / unpadded window (LeNet, VGG): each output reads two input
 * rows, and the loop over ox has no window arithmetic left, so it vectorises. Ties go to the
 * first element in row-major order, as in the general loop. */
static int is_2x2_s2(const pool_state *s) {
    const fl_window *w = &s->win;
    return w->kernel[0] == 2 && w->kernel[1] == 2 && w->stride[0] == 2 && w->stride[1] == 2 &&
           w->dil[0] == 1 && w->dil[1] == 1 && s->pt == 0 && s->pl == 0 &&
           2 * s->oh <= s->h && 2 * s->ow <= s->w;
}

typedef struct pool_job {
    const pool_state *s;
    const float *x;
    float *y;
} pool_job;

/* planes [lo, hi) of the 2x2 fast path; a range function for fl_parallel_for */
static void maxpool_2x2_s2(void *ctx, int64_t lo, int64_t hi, int tid) {
    const pool_job *J = ctx;
    const pool_state *s = J->s;
    const float *x = J->x;
    float *y = J->y;
    size_t plane = (size_t)s->h * s->w, oplane = (size_t)s->oh * s->ow;
    const int W = s->w, ow = s->ow;
    for (int64_t p = lo; p < hi; p++) {
        const float *xp = x + p * plane;
        float *yp = y + p * oplane;
        int32_t *ap = s->argmax + p * oplane;
        for (int oy = 0; oy < s->oh; oy++) {
            const float *r0 = xp + (size_t)(2 * oy) * W, *r1 = r0 + W;
            int base = 2 * oy * W;
            for (int ox = 0; ox < ow; ox++) {
                float a = r0[2 * ox], b = r0[2 * ox + 1], c = r1[2 * ox], d = r1[2 * ox + 1];
                float best = a;
                int arg = base + 2 * ox;
                arg = b > best ? base + 2 * ox + 1 : arg;
                best = b > best ? b : best;
                arg = c > best ? base + W + 2 * ox : arg;
                best = c > best ? c : best;
                arg = d > best ? base + W + 2 * ox + 1 : arg;
                best = d > best ? d : best;
                yp[oy * ow + ox] = best;
                ap[oy * ow + ox] = arg;
            }
        }
    }
}

static void maxpool_forward(fl_model *m, fl_node *n) {
    pool_state *s = n->state;
    if (is_2x2_s2(s) && n->n_out < 2) {
        pool_job J = {s, fl_in(m, n, 0)->data, fl_out(m, n, 0)->data};
        fl_parallel_for(s->planes, maxpool_2x2_s2, &J);
        return;
    }
    const fl_window *w = &s->win;
    const int kh = (int)w->kernel[0], kw = (int)w->kernel[1], sh = (int)w->stride[0],
              sw = (int)w->stride[1], dh = (int)w->dil[0], dw = (int)w->dil[1];
    const float *x = fl_in(m, n, 0)->data;
    float *y = fl_out(m, n, 0)->data;
    size_t plane = (size_t)s->h * s->w, oplane = (size_t)s->oh * s->ow;
    for (int64_t p = 0; p < s->planes; p++) {
        const float *xp = x + p * plane;
        float *yp = y + p * oplane;
        int32_t *ap = s->argmax + p * oplane;
        for (int oy = 0; oy < s->oh; oy++) {
            int hs = oy * sh - s->pt, ki_lo, ki_hi;
            window_range(hs, kh, dh, s->h, &ki_lo, &ki_hi);
            for (int ox = 0; ox < s->ow; ox++) {
                int ws = ox * sw - s->pl, kj_lo, kj_hi;
                window_range(ws, kw, dw, s->w, &kj_lo, &kj_hi);
                if (ki_lo == ki_hi || kj_lo == kj_hi) { /* the window covers only padding */
                    yp[oy * s->ow + ox] = 0.0f;
                    ap[oy * s->ow + ox] = -1;
                    continue;
                }
                int arg = (hs + ki_lo * dh) * s->w + ws + kj_lo * dw;
                float best = xp[arg];
                /* branch-free update (selects, not jumps): on real data the comparison is a
                 * coin flip the predictor keeps getting wrong; the first maximum wins ties */
                for (int ki = ki_lo; ki < ki_hi; ki++) {
                    int r = (hs + ki * dh) * s->w + ws;
                    for (int kj = kj_lo; kj < kj_hi; kj++) {
                        float v = xp[r + kj * dw];
                        int better = v > best;
                        best = better ? v : best;
                        arg = better ? r + kj * dw : arg;
                    }
                }
                yp[oy * s->ow + ox] = best;
                ap[oy * s->ow + ox] = arg;
            }
        }
    }
    if (n->n_out < 2) return;
    /* Indices: flat offsets into X, row-major (storage_order 0) or with H and W swapped */
    float *ind = fl_out(m, n, 1)->data;
    for (int64_t p = 0; p < s->planes; p++)
        for (size_t j = 0; j < oplane; j++) {
            int32_t a = s->argmax[p * oplane + j];
            int64_t off = a < 0 ? 0 : s->storage_order ? (a % s->w) * s->h + a / s->w : a;
            ind[p * oplane + j] = (float)(p * (int64_t)plane + off);
        }
}

typedef struct maxpool_grad_job {
    const pool_state *s;
    const float *dy;
    float *dx;
    int fresh; /* dx not cleared yet: each plane is cleared here, while it is in cache */
} maxpool_grad_job;

/* planes [lo, hi): each output's gradient goes to the input element that won its window */
static void maxpool_backward_range(void *ctx, int64_t lo, int64_t hi, int tid) {
    const maxpool_grad_job *J = ctx;
    const pool_state *s = J->s;
    size_t plane = (size_t)s->h * s->w, oplane = (size_t)s->oh * s->ow;
    for (int64_t p = lo; p < hi; p++) {
        float *dxp = J->dx + p * plane;
        const int32_t *ap = s->argmax + p * oplane;
        const float *dyp = J->dy + p * oplane;
        if (J->fresh) memset(dxp, 0, sizeof(float) * plane);
        for (size_t j = 0; j < oplane; j++)
            if (ap[j] >= 0) dxp[ap[j]] += dyp[j];
    }
}

static void maxpool_backward(fl_model *m, fl_node *n) {
    int fresh;
    fl_tensor *dx = fl_gin_fresh(m, n, 0, &fresh);
    if (!dx) return;
    maxpool_grad_job J = {n->state, fl_gout(m, n, 0)->data, dx->data, fresh};
    fl_parallel_for(J.s->planes, maxpool_backward_range, &J);
}

static const fl_op op_maxpool = {"MaxPool", maxpool_init, pool_shape, maxpool_forward,
                                 maxpool_backward, pool_free};

/* ---- AveragePool ----------------------------------------------------------------------------------
 * The divisor is the number of window elements inside the input (count_include_pad = 0) or
 * inside the padded input (count_include_pad = 1; a ceil_mode window hanging past the end
 * padding is still cut there, as in PyTorch). */
static fl_status avgpool_init(fl_model *m, fl_node *n, fl_err *e) {
    static const char *const known[] = {"kernel_shape", "strides", "pads", "auto_pad",
                                        "ceil_mode", "count_include_pad", "dilations", NULL};
    return pool_init(m, n, 1, known, e);
}

/* forward (dx == NULL): y = window mean of x; backward: dx += dy / divisor over the window */
static void avgpool_run(pool_state *s, const float *x, float *y, float *dx, const float *dy) {
    const fl_window *w = &s->win;
    const int kh = (int)w->kernel[0], kw = (int)w->kernel[1], sh = (int)w->stride[0],
              sw = (int)w->stride[1], dh = (int)w->dil[0], dw = (int)w->dil[1];
    size_t plane = (size_t)s->h * s->w, oplane = (size_t)s->oh * s->ow;
    for (int64_t p = 0; p < s->planes; p++) {
        for (int oy = 0; oy < s->oh; oy++) {
            int hs = oy * sh - s->pt, ki_lo, ki_hi;
            window_range(hs, kh, dh, s->h, &ki_lo, &ki_hi);
            int ch = s->count_include_pad ? padded_count(hs, kh, dh, s->h, s->pt, s->pb) : ki_hi - ki_lo;
            for (int ox = 0; ox < s->ow; ox++) {
                int ws = ox * sw - s->pl, kj_lo, kj_hi;
                window_range(ws, kw, dw, s->w, &kj_lo, &kj_hi);
                int cw = s->count_include_pad ? padded_count(ws, kw, dw, s->w, s->pl, s->pr) : kj_hi - kj_lo;
                float inv = ch * cw > 0 ? 1.0f / (float)(ch * cw) : 0.0f;
                size_t o = p * oplane + (size_t)oy * s->ow + ox;
                if (dx) {
                    float g = dy[o] * inv;
                    for (int ki = ki_lo; ki < ki_hi; ki++) {
                        float *row = dx + p * plane + (size_t)(hs + ki * dh) * s->w;
                        for (int kj = kj_lo; kj < kj_hi; kj++) row[ws + kj * dw] += g;
                    }
                } else {
                    float sum = 0;
                    for (int ki = ki_lo; ki < ki_hi; ki++) {
                        const float *row = x + p * plane + (size_t)(hs + ki * dh) * s->w;
                        for (int kj = kj_lo; kj < kj_hi; kj++) sum += row[ws + kj * dw];
                    }
                    y[o] = sum * inv;
                }
            }
        }
    }
}

static void avgpool_forward(fl_model *m, fl_node *n) {
    avgpool_run(n->state, fl_in(m, n, 0)->data, fl_out(m, n, 0)->data, NULL, NULL);
}

static void avgpool_backward(fl_model *m, fl_node *n) {
    fl_tensor *dx = fl_gin(m, n, 0);
    if (dx) avgpool_run(n->state, NULL, NULL, dx->data, fl_gout(m, n, 0)->data);
}

static const fl_op op_avgpool = {"AveragePool", avgpool_init, pool_shape, avgpool_forward,
                                 avgpool_backward, pool_free};

/* ---- GlobalAveragePool: [N, C, spatial...] -> [N, C, 1, ...] (any number of spatial axes) ---- */
static fl_status gap_init(fl_model *m, fl_node *n, fl_err *e) {
    static const char *const known[] = {NULL};
    fl_status st = fl_node_check_arity(n, 1, 1, 1, 1, e);
    return st == FL_OK ? fl_node_check_attrs(n, known, e) : st;
}

static fl_status gap_shape(fl_model *m, fl_node *n, fl_err *e) {
    const fl_tensor *x = fl_in(m, n, 0);
    char buf[128];
    if (x->ndim < 3)
        return fl_fail(e, FL_ERR_SHAPE,
                       "node '%s' (GlobalAveragePool): input has shape %s, expected [N,C,...]",
                       n->name, fl_shape_str(x, buf, sizeof buf));
    int64_t out[FL_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) out[i] = i < 2 ? x->shape[i] : 1;
    fl_node_set_out_shape(m, n, 0, x->ndim, out);
    return FL_OK;
}

static void gap_forward(fl_model *m, fl_node *n) {
    const fl_tensor *x = fl_in(m, n, 0);
    float *y = fl_out(m, n, 0)->data;
    int64_t planes = x->shape[0] * x->shape[1], p = planes ? x->size / planes : 0;
    for (int64_t i = 0; i < planes; i++) {
        const float *xp = x->data + i * p;
        float sum = 0;
        for (int64_t k = 0; k < p; k++) sum += xp[k];
        y[i] = p ? sum / (float)p : 0.0f;
    }
}

static void gap_backward(fl_model *m, fl_node *n) {
    fl_tensor *dx = fl_gin(m, n, 0);
    if (!dx) return;
    const float *dy = fl_gout(m, n, 0)->data;
    int64_t planes = dx->shape[0] * dx->shape[1], p = planes ? dx->size / planes : 0;
    for (int64_t i = 0; i < planes; i++) {
        float g = dy[i] / (float)p;
        for (int64_t k = 0; k < p; k++) dx->data[i * p + k] += g;
    }
}

static const fl_op op_gap = {"GlobalAveragePool", gap_init, gap_shape, gap_forward, gap_backward,
                             NULL};

const fl_op *const fl_ops_pool[] = {&op_maxpool, &op_avgpool, &op_gap, NULL};
