/* Reductions over a set of axes: ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceL1,
 * ReduceL2, ReduceSumSquare.
 *
 * The axes are the attribute `axes` before opset 18 (ReduceSum: 13) and the optional input 1
 * from then on; as for Squeeze, both spellings are accepted whatever the opset, but not both
 * at once. No axes means every axis, unless noop_with_empty_axes = 1 (the input form's
 * switch): then the op is the identity. keepdims (default 1) keeps reduced dims as size 1.
 *
 * Planning collapses the input's dims like the broadcasting ops do: size-1 dims are dropped
 * and neighbours that are both reduced or both kept are merged, so ReduceMean over H, W of
 * [N,C,H,W] is [N*C kept, H*W reduced] and a reduction over the channels of [N,L,C] is
 * [N kept, L reduced, C kept]. Forward and backward then walk the input row by row (its
 * last collapsed dim), reducing along a row or accumulating a row into an output row.
 * Accumulation is in double. Max and Min send the gradient to the elements equal to the
 * result, split evenly among ties (as torch.amax does). */
#include <math.h>
#include <string.h>

#include "flare/model.h"
#include "nn/ops.h"

enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_L1, R_L2, R_SUMSQ };

static const struct { const char *name; int kind; } kinds[] = {
    {"ReduceSum", R_SUM}, {"ReduceMean", R_MEAN}, {"ReduceMax", R_MAX}, {"ReduceMin", R_MIN},
    {"ReduceL1", R_L1},   {"ReduceL2", R_L2},     {"ReduceSumSquare", R_SUMSQ},
};

typedef struct reduce_state {
    int kind, keepdims, noop_empty;
    int has_axes, n_axes;
    int64_t axes[FL_MAX_DIMS];
    /* planned */
    int identity;              /* no axes and noop_with_empty_axes: y = x */
    int nd;                    /* collapsed rank, >= 1 */
    int64_t shape[FL_MAX_DIMS];
    uint8_t red[FL_MAX_DIMS];  /* collapsed dim is reduced */
    int64_t ostride[FL_MAX_DIMS]; /* output element stride, 0 for reduced dims */
    int64_t count;             /* input elements per output element */
    double *acc;               /* per output element: accumulator; backward: Max/Min tie count */
    int64_t acc_size;
} reduce_state;

static void reduce_free(fl_node *n) {
    reduce_state *s = n->state;
    if (s) fl_free(s->acc);
    fl_free(s);
}

static fl_status reduce_init(fl_model *m, fl_node *n, fl_err *e) {
    static const char *const known[] = {"axes", "keepdims", "noop_with_empty_axes", NULL};
    fl_status st = fl_node_check_arity(n, 1, 2, 1, 1, e);
    if (st == FL_OK) st = fl_node_check_attrs(n, known, e);
    if (st != FL_OK) return st;
    reduce_state *s = fl_alloc(sizeof *s);
    if (!s) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    n->state = s;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        if (strcmp(kinds[k].name, n->op->name) == 0) s->kind = kinds[k].kind;
    s->keepdims = fl_node_attr_int(n, "keepdims", 1) != 0;
    s->noop_empty = fl_node_attr_int(n, "noop_with_empty_axes", 0) != 0;
    const fl_attr *a = fl_node_attr(n, "axes");
    if (a) {
        if (n->n_in > 1 && n->in[1] >= 0)
            return fl_fail(e, FL_ERR_FORMAT, "node '%s' (%s): axes given both as attribute and "
                           "input", n->name, n->op->name);
        if (a->type != FL_ATTR_INTS || a->n > FL_MAX_DIMS)
            return fl_fail(e, FL_ERR_FORMAT, "node '%s' (%s): attribute 'axes' must be at most "
                           "%d ints", n->name, n->op->name, FL_MAX_DIMS);
        s->has_axes = 1;
        s->n_axes = a->n;
        memcpy(s->axes, a->ints, sizeof(int64_t) * (size_t)a->n);
    }
    m->values[n->out[0]].onnx_dtype = m->values[n->in[0]].onnx_dtype;
    return FL_OK;
}

static fl_status reduce_shape(fl_model *m, fl_node *n, fl_err *e) {
    reduce_state *s = n->state;
    const fl_tensor *x = fl_in(m, n, 0), *ta = fl_in(m, n, 1);
    int64_t axes[FL_MAX_DIMS], shp[FL_MAX_DIMS];
    int count = s->n_axes, r = x->ndim, od = 0;
    uint8_t red[FL_MAX_DIMS];
    fl_status st = FL_OK;
    if (s->has_axes) memcpy(axes, s->axes, sizeof axes);
    else if (ta) st = fl_node_read_ints(n, ta, "axes", FL_MAX_DIMS, axes, &count, e);
    if (st == FL_OK) st = fl_node_mark_axes(n, axes, count, r, red, e);
    if (st != FL_OK) return st;
    s->identity = count == 0 && s->noop_empty;
    if (s->identity) {
        fl_node_set_out_shape(m, n, 0, r, x->shape);
        return FL_OK;
    }
    if (count == 0) memset(red, 1, sizeof red);
    for (int d = 0; d < r; d++)
        if (!red[d]) shp[od++] = x->shape[d];
        else if (s->keepdims) shp[od++] = 1;
    fl_node_set_out_shape(m, n, 0, od, shp);

    /* collapse (see the top of the file) */
    int nd = 0;
    s->count = 1;
    for (int d = 0; d < r; d++) {
        if (red[d]) s->count *= x->shape[d];
        if (x->shape[d] == 1) continue;
        if (nd > 0 && s->red[nd - 1] == red[d]) {
            s->shape[nd - 1] *= x->shape[d];
        } else {
            s->shape[nd] = x->shape[d];
            s->red[nd++] = red[d];
        }
    }
    if (nd == 0) s->shape[nd] = 1, s->red[nd++] = 1;
    s->nd = nd;
    int64_t k = 1, out_size = 1;
    for (int d = nd - 1; d >= 0; d--) {
        s->ostride[d] = s->red[d] ? 0 : k;
        if (!s->red[d]) k *= s->shape[d];
    }
    out_size = k;
    if (s->acc_size < out_size || !s->acc) {
        fl_free(s->acc);
        s->acc_size = 0;
        if (!(s->acc = fl_alloc(sizeof(double) * (size_t)(out_size ? out_size : 1))))
            return fl_fail(e, FL_ERR_NOMEM, "out of memory");
        s->acc_size = out_size;
    }
    return FL_OK;
}

/* The walk: one call per input row (the last collapsed dim), with the output offset of its
 * first element; `along` says the row is reduced (all of it goes to out[0]) or kept (element
 * i goes to out[i]). */
typedef struct rctx {
    const reduce_state *s;
    const float *x, *y, *dy;
    float *dx;
} rctx;
typedef void (*row_fn)(rctx *c, const float *x, int64_t len, int64_t o, int along, int64_t xo);

static void walk(rctx *c, row_fn fn) {
    const reduce_state *s = c->s;
    int nd = s->nd, last = nd - 1;
    int64_t len = s->shape[last], rows = 1, idx[FL_MAX_DIMS] = {0}, o = 0;
    for (int d = 0; d < last; d++) rows *= s->shape[d];
    if (len == 0) return;
    for (int64_t r = 0; r < rows; r++) {
        fn(c, c->x + r * len, len, o, s->red[last], r * len);
        for (int d = last - 1; d >= 0; d--) {
            o += s->ostride[d];
            if (++idx[d] < s->shape[d]) break;
            o -= s->ostride[d] * s->shape[d];
            idx[d] = 0;
        }
    }
}

/* What each kind accumulates per element, and how accumulators combine. */
static inline double pre(int kind, float v) {
    switch (kind) {
    case R_L1: return fabsf(v);
    case R_L2:
    case R_SUMSQ: return (double)v * v;
    default: return v;
    }
}

static void fwd_row(rctx *c, const float *x, int64_t len, int64_t o, int along, int64_t xo) {
    int kind = c->s->kind;
    double *acc = c->s->acc + o;
    if (kind == R_MAX || kind == R_MIN) {
        int mx = kind == R_MAX;
        if (along) {
            float b = (float)acc[0];
            for (int64_t i = 0; i < len; i++) b = mx ? fmaxf(b, x[i]) : fminf(b, x[i]);
            acc[0] = b;
        } else {
            for (int64_t i = 0; i < len; i++)
                acc[i] = mx ? fmax(acc[i], x[i]) : fmin(acc[i], x[i]);
        }
    } else if (along) {
        double t = 0;
        for (int64_t i = 0; i < len; i++) t += pre(kind, x[i]);
        acc[0] += t;
    } else {
        for (int64_t i = 0; i < len; i++) acc[i] += pre(kind, x[i]);
    }
}

static void reduce_forward(fl_model *m, fl_node *n) {
    reduce_state *s = n->state;
    const fl_tensor *x = fl_in(m, n, 0);
    fl_tensor *y = fl_out(m, n, 0);
    if (s->identity) {
        if (x->size) memcpy(y->data, x->data, sizeof(float) * (size_t)x->size);
        return;
    }
    double init = s->kind == R_MAX ? -INFINITY : s->kind == R_MIN ? INFINITY : 0.0;
    for (int64_t i = 0; i < y->size; i++) s->acc[i] = init;
    rctx c = {.s = s, .x = x->data};
    walk(&c, fwd_row);
    for (int64_t i = 0; i < y->size; i++) {
        double v = s->acc[i];
        if (s->kind == R_MEAN) v = s->count ? v / (double)s->count : NAN;
        if (s->kind == R_L2) v = sqrt(v);
        y->data[i] = (float)v;
    }
}

/* Max / Min: count the elements equal to each result (into acc). */
static void tie_row(rctx *c, const float *x, int64_t len, int64_t o, int along, int64_t xo) {
    double *acc = c->s->acc + o;
    const float *y = c->y + o;
    for (int64_t i = 0; i < len; i++) acc[along ? 0 : i] += x[i] == y[along ? 0 : i];
}

static void bwd_row(rctx *c, const float *x, int64_t len, int64_t o, int along, int64_t xo) {
    const reduce_state *s = c->s;
    float *dx = c->dx + xo;
    for (int64_t i = 0; i < len; i++) {
        int64_t k = o + (along ? 0 : i);
        float g = c->dy[k], v = x[i], y = c->y[k];
        switch (s->kind) {
        case R_SUM: dx[i] += g; break;
        case R_MEAN: dx[i] += g / (float)s->count; break;
        case R_MAX:
        case R_MIN: if (v == y) dx[i] += g / (float)s->acc[k]; break;
        case R_L1: dx[i] += v > 0 ? g : v < 0 ? -g : 0.0f; break;
        case R_L2: if (y > 0) dx[i] += g * v / y; break;
        default: dx[i] += 2.0f * g * v; break;
        }
    }
}

static void reduce_backward(fl_model *m, fl_node *n) {
    reduce_state *s = n->state;
    fl_tensor *dx = fl_gin(m, n, 0);
    if (!dx) return;
    const fl_tensor *y = fl_out(m, n, 0);
    const float *dy = fl_gout(m, n, 0)->data;
    if (s->identity) {
        for (int64_t i = 0; i < dx->size; i++) dx->data[i] += dy[i];
        return;
    }
    rctx c = {.s = s, .x = fl_in(m, n, 0)->data, .y = y->data, .dy = dy, .dx = dx->data};
    if (s->kind == R_MAX || s->kind == R_MIN) {
        for (int64_t i = 0; i < y->size; i++) s->acc[i] = 0;
        walk(&c, tie_row);
    }
    walk(&c, bwd_row);
}

#define REDUCE_OP(var, name) \
    static const fl_op var = {name, reduce_init, reduce_shape, reduce_forward, reduce_backward, \
                              reduce_free}
REDUCE_OP(op_sum, "ReduceSum");
REDUCE_OP(op_mean, "ReduceMean");
REDUCE_OP(op_max, "ReduceMax");
REDUCE_OP(op_min, "ReduceMin");
REDUCE_OP(op_l1, "ReduceL1");
REDUCE_OP(op_l2, "ReduceL2");
REDUCE_OP(op_sumsq, "ReduceSumSquare");

const fl_op *const fl_ops_reduce[] = {&op_sum, &op_mean, &op_max, &op_min,
                                      &op_l1,  &op_l2,   &op_sumsq, NULL};
