/* Softmax and LogSoftmax.
 *
 * The input is viewed as [outer, L, inner] and normalised along L. What L is depends on the
 * model's opset, so it is decided at plan time from m->opset:
 *   opset >= 13: L is the single dimension `axis` (default -1);
 *   opset <  13: the input is coerced to 2-D at `axis` (default 1) and L is the whole trailing
 *                block, shape[axis] * ... * shape[r-1], with inner = 1.
 *
 * Numerically stable: the row maximum is subtracted before exponentiating. For inner > 1 the
 * loops keep the inner index innermost (contiguous) with per-column max / sum scratch.
 *
 * Backward, per row, from the output y:
 *     Softmax:     dx = y * (dy - sum(dy * y))
 *     LogSoftmax:  dx = dy - exp(y) * sum(dy) */
#include <math.h>
#include <string.h>

#include "flare/model.h"
#include "nn/ops.h"

typedef struct softmax_state {
    int log;                  /* LogSoftmax */
    int has_axis;             /* attribute given */
    int64_t axis;             /* as given (may be negative) */
    int64_t outer, L, inner;  /* planned view */
    float *s1, *s2;           /* [inner] scratch: column max, then column sums */
} softmax_state;

static void softmax_free(fl_node *n) {
    softmax_state *s = n->state;
    if (s) fl_free(s->s1); /* s2 lives in the same block */
    fl_free(s);
}

static fl_status softmax_init(fl_model *m, fl_node *n, fl_err *e) {
    static const char *const known[] = {"axis", NULL};
    fl_status st = fl_node_check_arity(n, 1, 1, 1, 1, e);
    if (st == FL_OK) st = fl_node_check_attrs(n, known, e);
    if (st != FL_OK) return st;
    softmax_state *s = fl_alloc(sizeof *s);
    if (!s) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    s->log = strcmp(n->op->name, "LogSoftmax") == 0;
    s->has_axis = fl_node_attr(n, "axis") != NULL;
    s->axis = fl_node_attr_int(n, "axis", 0);
    n->state = s;
    return FL_OK;
}

static fl_status softmax_shape(fl_model *m, fl_node *n, fl_err *e) {
    softmax_state *s = n->state;
    const fl_tensor *x = fl_in(m, n, 0);
    int old = m->opset < 13, r = x->ndim;
    int64_t axis = s->has_axis ? s->axis : old ? 1 : -1;
    if (axis < 0) axis += r;
    /* a scalar has nothing to normalise over: treat it as one row of one element */
    if (r == 0) axis = 0;
    else if (axis < 0 || axis >= r)
        return fl_fail(e, FL_ERR_SHAPE, "node '%s' (%s): axis %lld out of range for rank %d",
                       n->name, n->op->name, (long long)s->axis, r);
    s->outer = fl_shape_size((int)axis, x->shape);
    if (old) {
        s->L = fl_shape_size(r - (int)axis, x->shape + axis);
        s->inner = 1;
    } else {
        s->L = r ? x->shape[axis] : 1;
        s->inner = r ? fl_shape_size(r - (int)axis - 1, x->shape + axis + 1) : 1;
    }
    fl_free(s->s1);
    s->s1 = fl_alloc(sizeof(float) * 2 * (size_t)(s->inner ? s->inner : 1));
    if (!s->s1) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    s->s2 = s->s1 + s->inner;
    fl_node_set_out_shape(m, n, 0, r, x->shape);
    return FL_OK;
}

/* One [L, inner] block: y = softmax or log-softmax of x along L. */
static void softmax_block(const softmax_state *s, float *y, const float *x) {
    int64_t L = s->L, inner = s->inner;
    float *mx = s->s1, *sum = s->s2;
    for (int64_t j = 0; j < inner; j++) mx[j] = -INFINITY, sum[j] = 0;
    for (int64_t l = 0; l < L; l++)
        for (int64_t j = 0; j < inner; j++) mx[j] = fmaxf(mx[j], x[l * inner + j]);
    for (int64_t l = 0; l < L; l++)
        for (int64_t j = 0; j < inner; j++) {
            float z = x[l * inner + j] - mx[j], ez = expf(z);
            sum[j] += ez;
            y[l * inner + j] = s->log ? z : ez;
        }
    for (int64_t j = 0; j < inner; j++) sum[j] = s->log ? logf(sum[j]) : 1.0f / sum[j];
    for (int64_t l = 0; l < L; l++)
        for (int64_t j = 0; j < inner; j++) {
            if (s->log)
                y[l * inner + j] -= sum[j];
            else
                y[l * inner + j] *= sum[j];
        }
}

static void softmax_forward(fl_model *m, fl_node *n) {
    const softmax_state *s = n->state;
    const float *x = fl_in(m, n, 0)->data;
    float *y = fl_out(m, n, 0)->data;
    int64_t blk = s->L * s->inner;
    for (int64_t o = 0; o < s->outer; o++) softmax_block(s, y + o * blk, x + o * blk);
}

static void softmax_backward(fl_model *m, fl_node *n) {
    const softmax_state *s = n->state;
    fl_tensor *gx = fl_gin(m, n, 0);
    if (!gx) return;
    const float *y = fl_out(m, n, 0)->data, *dy = fl_gout(m, n, 0)->data;
    int64_t L = s->L, inner = s->inner, blk = L * inner;
    float *dot = s->s1;
    for (int64_t o = 0; o < s->outer; o++) {
        const float *yb = y + o * blk, *db = dy + o * blk;
        float *gb = gx->data + o * blk;
        for (int64_t j = 0; j < inner; j++) dot[j] = 0;
        for (int64_t l = 0; l < L; l++) /* sum(dy * y), or sum(dy) for LogSoftmax */
            for (int64_t j = 0; j < inner; j++)
                dot[j] += s->log ? db[l * inner + j] : db[l * inner + j] * yb[l * inner + j];
        for (int64_t l = 0; l < L; l++)
            for (int64_t j = 0; j < inner; j++) {
                int64_t k = l * inner + j;
                gb[k] += s->log ? db[k] - expf(yb[k]) * dot[j] : yb[k] * (db[k] - dot[j]);
            }
    }
}

const fl_op fl_op_softmax = {"Softmax", softmax_init, softmax_shape, softmax_forward,
                             softmax_backward, softmax_free};
const fl_op fl_op_logsoftmax = {"LogSoftmax", softmax_init, softmax_shape, softmax_forward,
                                softmax_backward, softmax_free};
