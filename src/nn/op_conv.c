/* Conv (2-D). ConvTranspose is in op_convt.c; what both (and the pools) build on is in
 * window.c (window attributes), conv_lower.c (convolution lowered to GEMM, see op_conv.h),
 * conv_small.c (the small direct path), conv_dw.c (depthwise) and bias.c. */
#include <limits.h>

#include "flare/model.h"
#include "nn/op_conv.h"
#include "nn/ops.h"

/* ---- Conv ------------------------------------------------------------------------------------------
 * X [N, C, H, W], W [M, C/group, kh, kw], B [M] (optional)  ->  Y [N, M, OH, OW] */
typedef struct conv_state {
    fl_window win;
    int group;
    fl_lowered L;
    fl_wino wino;  /* .m != 0: the forward pass is Winograd (inference) */
    int algo;      /* what the last forward ran (fl_conv_algo) */
} conv_state;

static void conv_free(fl_node *n) {
    conv_state *s = n->state;
    if (s) {
        fl_lowered_free(&s->L);
        fl_wino_free(&s->wino);
    }
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
    st = fl_lowered_plan(&s->L, n, (int)x->shape[0], (int)c, (int)mo, s->group, &geo,
                         m->training, e);
    if (st != FL_OK) return st;
    return fl_wino_plan(&s->wino, &s->L, fl_conv_wino_pick(&s->L, m->training), n, e);
}

int fl_conv_algo(const fl_node *n, int *m) {
    const conv_state *s = n->state;
    if (m) *m = s->algo == 'w' ? s->wino.m : 0;
    return s->algo;
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
    fl_lowered_shares_clear(L, size);
    small_job J = {.L = L, .X = X, .dY = dY, .size = size, .bias_grad = dB != NULL};
    fl_parallel_for(L->n, small_grad_range, &J);
    fl_lowered_shares_add(L, size, dW, dB);
}

static int conv_is_small_direct(const conv_state *s) { return fl_conv_small_ok(&s->L.g, s->group); }

static void conv_forward(fl_model *m, fl_node *n) {
    conv_state *s = n->state;
    const fl_tensor *b = fl_in(m, n, 2);
    fl_tensor *y = fl_out(m, n, 0);
    const float *bias = b ? b->data : NULL;
    s->algo = 'l';
    if (fl_conv_dw_ok(&s->L)) {
        s->algo = 'd';
        fl_conv_dw_forward(&s->L, fl_in(m, n, 1)->data, bias, fl_in(m, n, 0)->data, y->data);
    } else if (s->wino.m && !m->training) {
        /* planned for inference; a model switched to training without a re-plan takes the
         * lowered path, whose columns its backward pass reuses */
        s->algo = 'w';
        fl_wino_forward(&s->wino, &s->L, fl_in(m, n, 1)->data, bias, fl_in(m, n, 0)->data,
                        y->data);
        for (int t = 0; t < s->L.slots; t++) s->L.buf[t].cached = -1; /* no columns made */
    } else if (conv_is_small_direct(s)) {
        s->algo = 's';
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
    if (fl_conv_dw_ok(&s->L)) {
        if (dw)
            fl_conv_dw_grad_w(&s->L, dw->data, dbias, dy->data, fl_in(m, n, 0)->data);
        else if (db)
            fl_bias_grad(db->data, dy->data, dy->shape[0], dy->shape[1], dy->shape[2] * dy->shape[3]);
        if (dx) fl_conv_dw_adjoint(&s->L, fl_in(m, n, 1)->data, dy->data, dx->data, fresh);
        return;
    }
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
