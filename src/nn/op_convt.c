/* ConvTranspose (2-D): the adjoint of Conv, run through the same GEMM lowering (op_conv.h)
 * with the roles swapped: the output Y is the side im2col unfolds, the input X the side W
 * multiplies.
 *
 * X [N, C, H, W], W [C, M/group, kh, kw], B [M] (optional)  ->  Y [N, M, OH, OW] where, per
 * axis, the "full" output of stride*(in-1) + output_padding + (k-1)*dilation + 1 elements is
 * cropped by pads at its begin and end. */
#include <limits.h>
#include <string.h>

#include "flare/model.h"
#include "nn/op_conv.h"
#include "nn/ops.h"

typedef struct convt_state {
    fl_window win;
    int group;
    int64_t out_pad[2];
    int has_out_shape;
    int64_t out_shape[2];
    fl_lowered L;
} convt_state;

static void convt_free(fl_node *n) {
    convt_state *s = n->state;
    if (s) fl_lowered_free(&s->L);
    fl_free(s);
}

static fl_status convt_init(fl_model *m, fl_node *n, fl_err *e) {
    static const char *const known[] = {"kernel_shape", "strides", "dilations", "pads",
                                        "auto_pad", "group", "output_padding", "output_shape",
                                        NULL};
    fl_status st = fl_node_check_arity(n, 2, 3, 1, 1, e);
    if (st == FL_OK) st = fl_node_check_attrs(n, known, e);
    if (st != FL_OK) return st;
    convt_state *s = fl_alloc(sizeof *s);
    if (!s) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    n->state = s;
    int64_t group = fl_node_attr_int(n, "group", 1);
    if (group < 1 || group > INT_MAX / 4)
        return fl_fail(e, FL_ERR_FORMAT, "node '%s' (ConvTranspose): bad group %lld", n->name,
                       (long long)group);
    s->group = (int)group;
    s->has_out_shape = fl_node_attr(n, "output_shape") != NULL;
    st = fl_window_parse(n, &s->win, e);
    if (st == FL_OK) st = fl_window_ints(n, "output_padding", 2, 0, s->out_pad, e);
    if (st == FL_OK) st = fl_window_ints(n, "output_shape", 2, 1, s->out_shape, e);
    return st;
}

/* Output size and begin pad along one axis. An explicit output_shape (or SAME: in*stride)
 * fixes the size and the pads are whatever crops the full output to it, the odd one at the
 * end for SAME_UPPER and at the begin otherwise (ONNX spec); an output_shape larger than the
 * full output leaves zeros at the end. */
static fl_status convt_axis(fl_node *n, const convt_state *s, int axis, int64_t in, int64_t k,
                            int64_t *out, int64_t *pad_begin, fl_err *e) {
    const fl_window *w = &s->win;
    int64_t full = w->stride[axis] * (in - 1) + s->out_pad[axis] + (k - 1) * w->dil[axis] + 1;
    int64_t o, pb;
    if (s->has_out_shape || w->auto_pad == FL_PAD_SAME_UPPER || w->auto_pad == FL_PAD_SAME_LOWER) {
        o = s->has_out_shape ? s->out_shape[axis] : in * w->stride[axis];
        int64_t total = full > o ? full - o : 0;
        pb = w->auto_pad == FL_PAD_SAME_UPPER ? total / 2 : total - total / 2;
    } else if (w->auto_pad == FL_PAD_VALID) {
        o = full;
        pb = 0;
    } else {
        pb = w->pads[axis];
        o = full - pb - w->pads[axis + 2];
    }
    if (o <= 0 || o > INT_MAX / 4)
        return fl_fail(e, FL_ERR_SHAPE, "node '%s' (ConvTranspose): output %s would be %lld",
                       n->name, axis ? "width" : "height", (long long)o);
    *out = o;
    *pad_begin = pb;
    return FL_OK;
}

static fl_status convt_shape(fl_model *m, fl_node *n, fl_err *e) {
    convt_state *s = n->state;
    const fl_tensor *x = fl_in(m, n, 0), *w = fl_in(m, n, 1), *b = fl_in(m, n, 2);
    char bx[128], bw[128];
    fl_status st = fl_check_4d(n, x, "input X", e);
    if (st == FL_OK) st = fl_check_4d(n, w, "weight W", e);
    if (st != FL_OK) return st;
    int64_t c = x->shape[1], g = s->group, mo = w->shape[1] * g;
    if (w->shape[0] != c || c % g != 0 || x->shape[2] <= 0 || x->shape[3] <= 0 ||
        (s->win.has_kernel &&
         (s->win.kernel[0] != w->shape[2] || s->win.kernel[1] != w->shape[3])))
        return fl_fail(e, FL_ERR_SHAPE,
                       "node '%s' (ConvTranspose): input %s and weight %s do not fit (group %d)",
                       n->name, fl_shape_str(x, bx, sizeof bx), fl_shape_str(w, bw, sizeof bw),
                       s->group);
    if (b && (b->ndim != 1 || b->shape[0] != mo))
        return fl_fail(e, FL_ERR_SHAPE,
                       "node '%s' (ConvTranspose): bias has shape %s, expected [%lld]", n->name,
                       fl_shape_str(b, bx, sizeof bx), (long long)mo);
    int64_t oh, ow, pt, pl;
    st = convt_axis(n, s, 0, x->shape[2], w->shape[2], &oh, &pt, e);
    if (st == FL_OK) st = convt_axis(n, s, 1, x->shape[3], w->shape[3], &ow, &pl, e);
    if (st != FL_OK) return st;
    /* the lowering's image side is Y, its matrix side X */
    fl_conv2d_geom geo = {
        .c = (int)(mo / g), .h = (int)oh, .w = (int)ow,
        .kh = (int)w->shape[2], .kw = (int)w->shape[3],
        .sh = (int)s->win.stride[0], .sw = (int)s->win.stride[1], .pt = (int)pt, .pl = (int)pl,
        .dh = (int)s->win.dil[0], .dw = (int)s->win.dil[1],
        .oh = (int)x->shape[2], .ow = (int)x->shape[3],
    };
    int64_t out[4] = {x->shape[0], mo, oh, ow};
    fl_node_set_out_shape(m, n, 0, 4, out);
    return fl_lowered_plan(&s->L, n, (int)x->shape[0], (int)mo, (int)c, s->group, &geo,
                           m->training, e);
}

static void convt_forward(fl_model *m, fl_node *n) {
    convt_state *s = n->state;
    const fl_tensor *b = fl_in(m, n, 2);
    fl_tensor *y = fl_out(m, n, 0);
    fl_lowered_adjoint(&s->L, fl_in(m, n, 1)->data, fl_in(m, n, 0)->data, y->data, 1);
    if (b) fl_bias_add(y->data, b->data, y->shape[0], y->shape[1], y->shape[2] * y->shape[3]);
}

static void convt_backward(fl_model *m, fl_node *n) {
    convt_state *s = n->state;
    const fl_tensor *dy = fl_gout(m, n, 0);
    int fresh; /* the first gradient into X: written, not added (no clearing pass) */
    fl_tensor *dx = fl_gin_fresh(m, n, 0, &fresh), *dw = fl_gin(m, n, 1), *db = fl_gin(m, n, 2);
    /* dX (+)= W·im2col(dY) leaves im2col(dY) of the last chunk for the weight gradient */
    if (dx) fl_lowered_forward(&s->L, fl_in(m, n, 1)->data, dy->data, NULL, dx->data, !fresh);
    if (dw) fl_lowered_grad_w(&s->L, dw->data, NULL, fl_in(m, n, 0)->data, dy->data, dx != NULL);
    if (db) fl_bias_grad(db->data, dy->data, dy->shape[0], dy->shape[1], dy->shape[2] * dy->shape[3]);
}

const fl_op fl_op_convtranspose = {"ConvTranspose", convt_init, convt_shape, convt_forward,
                                   convt_backward, convt_free};
