/* Element-wise activations and pass-through ops: Relu, LeakyRelu, Sigmoid, Tanh, Clip,
 * Identity, Dropout; and the row-wise Softmax / LogSoftmax.
 *
 * Unary element-wise ops share one shape callback (output shape = input shape) and are
 * written as a forward kernel y = f(x) and a backward kernel dx += dy * f'(x, y). */
#include <math.h>
#include <string.h>

#include "flare/model.h"
#include "nn/ops.h"

typedef struct unary_state {
    float alpha, lo, hi, ratio; /* LeakyRelu alpha; Clip bounds; Dropout ratio */
    float *mask;                /* Dropout: keep mask scaled by 1/(1-ratio), or NULL */
    int64_t mask_size;
} unary_state;

static void unary_free(fl_node *n) {
    unary_state *s = n->state;
    if (s) fl_free(s->mask);
    fl_free(s);
}

static fl_status unary_init_common(fl_node *n, const char *const *known, int max_in, int max_out,
                                   fl_err *e) {
    fl_status st = fl_node_check_arity(n, 1, max_in, 1, max_out, e);
    if (st == FL_OK) st = fl_node_check_attrs(n, known, e);
    if (st != FL_OK) return st;
    unary_state *s = fl_alloc(sizeof *s);
    if (!s) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    n->state = s;
    return FL_OK;
}

static fl_status unary_shape(fl_model *m, fl_node *n, fl_err *e) {
    const fl_tensor *x = fl_in(m, n, 0);
    for (int i = 0; i < n->n_out; i++) fl_node_set_out_shape(m, n, i, x->ndim, x->shape);
    return FL_OK;
}

/* ---- Relu -------------------------------------------------------------------------------------- */
static fl_status relu_init(fl_model *m, fl_node *n, fl_err *e) {
    static const char *const known[] = {NULL};
    return unary_init_common(n, known, 1, 1, e);
}
static void relu_forward(fl_model *m, fl_node *n) {
    const fl_tensor *x = fl_in(m, n, 0);
    fl_tensor *y = fl_out(m, n, 0);
    for (int64_t i = 0; i < x->size; i++) y->data[i] = x->data[i] > 0 ? x->data[i] : 0;
}
static void relu_backward(fl_model *m, fl_node *n) {
    fl_tensor *dx = fl_gin(m, n, 0);
    if (!dx) return;
    const float *y = fl_out(m, n, 0)->data, *dy = fl_gout(m, n, 0)->data;
    for (int64_t i = 0; i < dx->size; i++) dx->data[i] += y[i] > 0 ? dy[i] : 0;
}
static const fl_op op_relu = {"Relu", relu_init, unary_shape, relu_forward, relu_backward, unary_free};

/* ---- LeakyRelu ---------------------------------------------------------------------------------- */
static fl_status leaky_init(fl_model *m, fl_node *n, fl_err *e) {
    static const char *const known[] = {"alpha", NULL};
    fl_status st = unary_init_common(n, known, 1, 1, e);
    if (st == FL_OK) ((unary_state *)n->state)->alpha = fl_node_attr_float(n, "alpha", 0.01f);
    return st;
}
static void leaky_forward(fl_model *m, fl_node *n) {
    const fl_tensor *x = fl_in(m, n, 0);
    float a = ((unary_state *)n->state)->alpha, *y = fl_out(m, n, 0)->data;
    for (int64_t i = 0; i < x->size; i++) y[i] = x->data[i] >= 0 ? x->data[i] : a * x->data[i];
}
static void leaky_backward(fl_model *m, fl_node *n) {
    fl_tensor *dx = fl_gin(m, n, 0);
    if (!dx) return;
    float a = ((unary_state *)n->state)->alpha;
    const float *x = fl_in(m, n, 0)->data, *dy = fl_gout(m, n, 0)->data;
    for (int64_t i = 0; i < dx->size; i++) dx->data[i] += x[i] >= 0 ? dy[i] : a * dy[i];
}
static const fl_op op_leaky = {"LeakyRelu", leaky_init, unary_shape, leaky_forward, leaky_backward,
                               unary_free};

/* ---- Sigmoid, Tanh: derivatives from the output ------------------------------------------------ */
static void sigmoid_forward(fl_model *m, fl_node *n) {
    const fl_tensor *x = fl_in(m, n, 0);
    float *y = fl_out(m, n, 0)->data;
    for (int64_t i = 0; i < x->size; i++) y[i] = 1.0f / (1.0f + expf(-x->data[i]));
}
static void sigmoid_backward(fl_model *m, fl_node *n) {
    fl_tensor *dx = fl_gin(m, n, 0);
    if (!dx) return;
    const float *y = fl_out(m, n, 0)->data, *dy = fl_gout(m, n, 0)->data;
    for (int64_t i = 0; i < dx->size; i++) dx->data[i] += dy[i] * y[i] * (1.0f - y[i]);
}
static const fl_op op_sigmoid = {"Sigmoid", relu_init, unary_shape, sigmoid_forward,
                                 sigmoid_backward, unary_free};

static void tanh_forward(fl_model *m, fl_node *n) {
    const fl_tensor *x = fl_in(m, n, 0);
    float *y = fl_out(m, n, 0)->data;
    for (int64_t i = 0; i < x->size; i++) y[i] = tanhf(x->data[i]);
}
static void tanh_backward(fl_model *m, fl_node *n) {
    fl_tensor *dx = fl_gin(m, n, 0);
    if (!dx) return;
    const float *y = fl_out(m, n, 0)->data, *dy = fl_gout(m, n, 0)->data;
    for (int64_t i = 0; i < dx->size; i++) dx->data[i] += dy[i] * (1.0f - y[i] * y[i]);
}
static const fl_op op_tanh = {"Tanh", relu_init, unary_shape, tanh_forward, tanh_backward,
                              unary_free};

/* ---- Identity ------------------------------------------------------------------------------------ */
static void copy_forward(fl_model *m, fl_node *n) {
    const fl_tensor *x = fl_in(m, n, 0);
    memcpy(fl_out(m, n, 0)->data, x->data, (size_t)x->size * sizeof(float));
}
static void copy_backward(fl_model *m, fl_node *n) {
    fl_tensor *dx = fl_gin(m, n, 0);
    if (!dx) return;
    const float *dy = fl_gout(m, n, 0)->data;
    for (int64_t i = 0; i < dx->size; i++) dx->data[i] += dy[i];
}
static const fl_op op_identity = {"Identity", relu_init, unary_shape, copy_forward, copy_backward,
                                  unary_free};

const fl_op *const fl_ops_activation[] = {&op_relu, &op_leaky, &op_sigmoid, &op_tanh,
                                          &op_identity, NULL};
