/* Variadic element-wise ops with numpy broadcasting: Sum, Mean, Max, Min of one or more
 * inputs.
 *
 * Each input is broadcast to the output shape by an index map (imap.h: along a dim of size 1
 * every output position reads element 0), gathered into a scratch buffer and combined into
 * the output. Backward scatters through the same maps, which sums the gradient over the
 * broadcast dims. Max and Min send each output's gradient to the inputs that equal it, split
 * evenly among ties (as PyTorch's maximum does for two inputs). These ops are rare and small
 * in the models flare runs (they are not in inner loops), so the extra pass over a scratch
 * buffer is not worth a specialised kernel. */
#include <string.h>

#include "flare/model.h"
#include "nn/imap.h"
#include "nn/ops.h"

enum { V_SUM, V_MEAN, V_MAX, V_MIN };
enum { MAX_IN = 16 };

typedef struct var_state {
    int kind;
    fl_imap im[MAX_IN];
    float *tmp, *ties; /* [output size] each, one block */
    int64_t cap;
} var_state;

static void var_free(fl_node *n) {
    var_state *s = n->state;
    for (int i = 0; s && i < MAX_IN; i++) fl_imap_free(&s->im[i]);
    if (s) fl_free(s->tmp);
    fl_free(s);
}

static fl_status var_init(fl_model *m, fl_node *n, fl_err *e) {
    static const char *const known[] = {NULL};
    fl_status st = fl_node_check_arity(n, 1, MAX_IN, 1, 1, e);
    if (st == FL_OK) st = fl_node_check_attrs(n, known, e);
    if (st != FL_OK) return st;
    if ((st = fl_node_check_present(n, n->n_in, e)) != FL_OK) return st;
    var_state *s = fl_alloc(sizeof *s);
    if (!s) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    n->state = s;
    const char *t = n->op->name;
    s->kind = !strcmp(t, "Sum") ? V_SUM : !strcmp(t, "Mean") ? V_MEAN : !strcmp(t, "Max") ? V_MAX
                                                                                          : V_MIN;
    m->values[n->out[0]].onnx_dtype = m->values[n->in[0]].onnx_dtype;
    return FL_OK;
}

static fl_status var_shape(fl_model *m, fl_node *n, fl_err *e) {
    var_state *s = n->state;
    int r = 0;
    int64_t ys[FL_MAX_DIMS];
    for (int i = 0; i < n->n_in; i++) {
        const fl_tensor *x = fl_in(m, n, i);
        if (!fl_broadcast_shape(ys, &r, x->ndim, x->shape)) {
            char a[128];
            return fl_fail(e, FL_ERR_SHAPE, "node '%s' (%s): input %d of shape %s does not "
                           "broadcast with the others", n->name, n->op->name, i,
                           fl_shape_str(x, a, sizeof a));
        }
    }
    fl_node_set_out_shape(m, n, 0, r, ys);
    for (int i = 0; i < n->n_in; i++) {
        const fl_tensor *x = fl_in(m, n, i);
        fl_status st = fl_imap_broadcast(&s->im[i], r, ys, x->ndim, x->shape, e);
        if (st != FL_OK) return st;
    }
    int64_t size = fl_shape_size(r, ys);
    if (s->cap < size || !s->tmp) {
        fl_free(s->tmp);
        s->cap = 0;
        if (!(s->tmp = fl_alloc(sizeof(float) * 2 * (size_t)(size ? size : 1))))
            return fl_fail(e, FL_ERR_NOMEM, "out of memory");
        s->cap = size;
    }
    s->ties = s->tmp + s->cap;
    return FL_OK;
}

static void var_forward(fl_model *m, fl_node *n) {
    var_state *s = n->state;
    fl_tensor *yt = fl_out(m, n, 0);
    float *y = yt->data;
    fl_imap_forward(&s->im[0], fl_in(m, n, 0)->data, y, 0);
    for (int i = 1; i < n->n_in; i++) {
        fl_imap_forward(&s->im[i], fl_in(m, n, i)->data, s->tmp, 0);
        for (int64_t j = 0; j < yt->size; j++) {
            float v = s->tmp[j];
            if (s->kind == V_MAX) y[j] = v > y[j] ? v : y[j];
            else if (s->kind == V_MIN) y[j] = v < y[j] ? v : y[j];
            else y[j] += v;
        }
    }
    if (s->kind == V_MEAN)
        for (int64_t j = 0; j < yt->size; j++) y[j] /= (float)n->n_in;
}

static void var_backward(fl_model *m, fl_node *n) {
    var_state *s = n->state;
    const fl_tensor *yt = fl_out(m, n, 0);
    const float *y = yt->data, *dy = fl_gout(m, n, 0)->data;
    int64_t size = yt->size;
    if (s->kind == V_SUM || s->kind == V_MEAN) {
        const float *g = dy;
        if (s->kind == V_MEAN) {
            for (int64_t j = 0; j < size; j++) s->tmp[j] = dy[j] / (float)n->n_in;
            g = s->tmp;
        }
        for (int i = 0; i < n->n_in; i++) {
            fl_tensor *dx = fl_gin(m, n, i);
            if (dx) fl_imap_backward(&s->im[i], g, dx->data);
        }
        return;
    }
    /* Max / Min: count the inputs equal to each output, then route dy / count to them */
    memset(s->ties, 0, sizeof(float) * (size_t)size);
    for (int i = 0; i < n->n_in; i++) {
        fl_imap_forward(&s->im[i], fl_in(m, n, i)->data, s->tmp, 0);
        for (int64_t j = 0; j < size; j++) s->ties[j] += s->tmp[j] == y[j];
    }
    for (int i = 0; i < n->n_in; i++) {
        fl_tensor *dx = fl_gin(m, n, i);
        if (!dx) continue;
        fl_imap_forward(&s->im[i], fl_in(m, n, i)->data, s->tmp, 0);
        for (int64_t j = 0; j < size; j++) s->tmp[j] = s->tmp[j] == y[j] ? dy[j] / s->ties[j] : 0;
        fl_imap_backward(&s->im[i], s->tmp, dx->data);
    }
}

static const fl_op op_sum = {"Sum", var_init, var_shape, var_forward, var_backward, var_free};
static const fl_op op_mean = {"Mean", var_init, var_shape, var_forward, var_backward, var_free};
static const fl_op op_max = {"Max", var_init, var_shape, var_forward, var_backward, var_free};
static const fl_op op_min = {"Min", var_init, var_shape, var_forward, var_backward, var_free};

const fl_op *const fl_ops_variadic[] = {&op_sum, &op_mean, &op_max, &op_min, NULL};
