/* Element-wise activations and pass-through ops: Relu, LeakyRelu, Sigmoid, Tanh, Clip,
 * Identity, Dropout; the row-wise Softmax / LogSoftmax live in op_softmax.c and are listed in
 * this family's table.
 *
 * Unary element-wise ops share one shape callback (output shape = input shape) and are
 * written as a forward kernel y = f(x) and a backward kernel dx += dy * f'(x, y). */
#include <math.h>
#include <string.h>

#include "flare/model.h"
#include "nn/ops.h"
#include "nn/vmath.h"

typedef struct unary_state {
    float alpha, lo, hi, ratio; /* LeakyRelu alpha; Clip bounds; Dropout ratio */
    float *mask;                /* Dropout: keep mask scaled by 1/(1-ratio), or NULL */
    int64_t mask_size;
    int dropped;                /* Dropout: the last forward applied the mask */
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
/* Relu runs on the largest activations of a CNN, so it is split over the thread pool (in
 * blocks of RELU_BLOCK elements: below that, threads cost more than they save); the restrict
 * pointers let the compiler vectorise the select. */
enum { RELU_BLOCK = 16384 };

typedef struct relu_job {
    const float *x, *y, *dy;
    float *out;
    int64_t size;
    int fresh; /* backward: write dx instead of adding to it */
    float alpha; /* LeakyRelu's slope */
    float lo, hi; /* Clip's bounds */
} relu_job;

static void relu_fwd_range(void *ctx, int64_t lo, int64_t hi, int tid) {
    const relu_job *J = ctx;
    const float *restrict x = J->x;
    float *restrict y = J->out;
    int64_t a = lo * RELU_BLOCK, b = hi * RELU_BLOCK < J->size ? hi * RELU_BLOCK : J->size;
    for (int64_t i = a; i < b; i++) y[i] = x[i] > 0 ? x[i] : 0;
}

static void relu_bwd_range(void *ctx, int64_t lo, int64_t hi, int tid) {
    const relu_job *J = ctx;
    const float *restrict y = J->y, *restrict dy = J->dy;
    float *restrict dx = J->out;
    int64_t a = lo * RELU_BLOCK, b = hi * RELU_BLOCK < J->size ? hi * RELU_BLOCK : J->size;
    if (J->fresh)
        for (int64_t i = a; i < b; i++) {
            const float g = dy[i]; /* loaded unconditionally, so the select vectorises */
            dx[i] = y[i] > 0 ? g : 0.0f;
        }
    else
        for (int64_t i = a; i < b; i++) {
            const float g = dy[i];
            dx[i] += y[i] > 0 ? g : 0.0f;
        }
}

static void relu_forward(fl_model *m, fl_node *n) {
    const fl_tensor *x = fl_in(m, n, 0);
    relu_job J = {.x = x->data, .out = fl_out(m, n, 0)->data, .size = x->size};
    fl_parallel_for((x->size + RELU_BLOCK - 1) / RELU_BLOCK, relu_fwd_range, &J);
}

static void relu_backward(fl_model *m, fl_node *n) {
    int fresh;
    fl_tensor *dx = fl_gin_fresh(m, n, 0, &fresh);
    if (!dx) return;
    relu_job J = {.y = fl_out(m, n, 0)->data, .dy = fl_gout(m, n, 0)->data, .out = dx->data,
                  .size = dx->size, .fresh = fresh};
    fl_parallel_for((dx->size + RELU_BLOCK - 1) / RELU_BLOCK, relu_bwd_range, &J);
}
static const fl_op op_relu = {"Relu", relu_init, unary_shape, relu_forward, relu_backward, unary_free};

/* ---- LeakyRelu ---------------------------------------------------------------------------------- */
static fl_status leaky_init(fl_model *m, fl_node *n, fl_err *e) {
    static const char *const known[] = {"alpha", NULL};
    fl_status st = unary_init_common(n, known, 1, 1, e);
    if (st == FL_OK) ((unary_state *)n->state)->alpha = fl_node_attr_float(n, "alpha", 0.01f);
    return st;
}
/* Split and vectorised as Relu is (the GAN discriminator's largest tensors are LeakyRelu's). */
static void leaky_fwd_range(void *ctx, int64_t lo, int64_t hi, int tid) {
    const relu_job *J = ctx;
    const float *restrict x = J->x;
    float *restrict y = J->out;
    const float a = J->alpha;
    int64_t b0 = lo * RELU_BLOCK, b1 = hi * RELU_BLOCK < J->size ? hi * RELU_BLOCK : J->size;
    for (int64_t i = b0; i < b1; i++) y[i] = x[i] >= 0 ? x[i] : a * x[i];
    (void)tid;
}

static void leaky_bwd_range(void *ctx, int64_t lo, int64_t hi, int tid) {
    const relu_job *J = ctx;
    const float *restrict x = J->x, *restrict dy = J->dy;
    float *restrict dx = J->out;
    const float a = J->alpha;
    int64_t b0 = lo * RELU_BLOCK, b1 = hi * RELU_BLOCK < J->size ? hi * RELU_BLOCK : J->size;
    for (int64_t i = b0; i < b1; i++) {
        const float g = dy[i];
        dx[i] += x[i] >= 0 ? g : a * g;
    }
    (void)tid;
}

static void leaky_forward(fl_model *m, fl_node *n) {
    const fl_tensor *x = fl_in(m, n, 0);
    relu_job J = {.x = x->data, .out = fl_out(m, n, 0)->data, .size = x->size,
                  .alpha = ((unary_state *)n->state)->alpha};
    fl_parallel_for((x->size + RELU_BLOCK - 1) / RELU_BLOCK, leaky_fwd_range, &J);
}
static void leaky_backward(fl_model *m, fl_node *n) {
    fl_tensor *dx = fl_gin(m, n, 0);
    if (!dx) return;
    relu_job J = {.x = fl_in(m, n, 0)->data, .dy = fl_gout(m, n, 0)->data, .out = dx->data,
                  .size = dx->size, .alpha = ((unary_state *)n->state)->alpha};
    fl_parallel_for((dx->size + RELU_BLOCK - 1) / RELU_BLOCK, leaky_bwd_range, &J);
}
static const fl_op op_leaky = {"LeakyRelu", leaky_init, unary_shape, leaky_forward, leaky_backward,
                               unary_free};

/* ---- Sigmoid, Tanh: derivatives from the output ------------------------------------------------ */
static void sigmoid_fwd_range(void *ctx, int64_t lo, int64_t hi, int tid) {
    const relu_job *J = ctx;
    int64_t a = lo * RELU_BLOCK, b = hi * RELU_BLOCK < J->size ? hi * RELU_BLOCK : J->size;
    fl_vec_sigmoid(J->x + a, J->out + a, b - a);
}
static void sigmoid_forward(fl_model *m, fl_node *n) {
    const fl_tensor *x = fl_in(m, n, 0);
    relu_job J = {.x = x->data, .out = fl_out(m, n, 0)->data, .size = x->size};
    fl_parallel_for((x->size + RELU_BLOCK - 1) / RELU_BLOCK, sigmoid_fwd_range, &J);
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

/* ---- Clip ------------------------------------------------------------------------------------------
 * y = min(max(x, lo), hi). The bounds are attributes min / max before opset 11 and optional
 * scalar inputs 1, 2 since; both spellings are accepted whatever the opset, and a missing
 * bound is infinite. The gradient flows to x where lo < x < hi; the bound that decided an
 * element gets that element's gradient (so a trainable bound learns, as in PyTorch). */
static fl_status clip_init(fl_model *m, fl_node *n, fl_err *e) {
    static const char *const known[] = {"min", "max", NULL};
    fl_status st = unary_init_common(n, known, 3, 1, e);
    if (st != FL_OK) return st;
    unary_state *s = n->state;
    s->lo = fl_node_attr_float(n, "min", -INFINITY);
    s->hi = fl_node_attr_float(n, "max", INFINITY);
    return FL_OK;
}

static fl_status clip_shape(fl_model *m, fl_node *n, fl_err *e) {
    for (int i = 1; i < 3; i++) {
        const fl_tensor *b = fl_in(m, n, i);
        char buf[128];
        if (b && b->size != 1)
            return fl_fail(e, FL_ERR_SHAPE, "node '%s' (Clip): %s must be a scalar, has shape %s",
                           n->name, i == 1 ? "min" : "max", fl_shape_str(b, buf, sizeof buf));
    }
    return unary_shape(m, n, e);
}

static void clip_bounds(fl_model *m, fl_node *n, float *lo, float *hi) {
    const unary_state *s = n->state;
    const fl_tensor *tlo = fl_in(m, n, 1), *thi = fl_in(m, n, 2);
    *lo = tlo ? tlo->data[0] : s->lo;
    *hi = thi ? thi->data[0] : s->hi;
}

/* Selects rather than fminf/fmaxf, which are calls that do not vectorise (MobileNetV2's 35
 * ReLU6 took 40 % of its inference time); NaN stays NaN, as in torch.clamp. */
static void clip_fwd_range(void *ctx, int64_t lo, int64_t hi, int tid) {
    const relu_job *J = ctx;
    const float *restrict x = J->x;
    float *restrict y = J->out;
    const float l = J->lo, h = J->hi;
    int64_t a = lo * RELU_BLOCK, b = hi * RELU_BLOCK < J->size ? hi * RELU_BLOCK : J->size;
    for (int64_t i = a; i < b; i++) {
        float v = x[i] < l ? l : x[i];
        y[i] = v > h ? h : v;
    }
}
static void clip_forward(fl_model *m, fl_node *n) {
    const fl_tensor *x = fl_in(m, n, 0);
    relu_job J = {.x = x->data, .out = fl_out(m, n, 0)->data, .size = x->size};
    clip_bounds(m, n, &J.lo, &J.hi);
    fl_parallel_for((x->size + RELU_BLOCK - 1) / RELU_BLOCK, clip_fwd_range, &J);
}

static void clip_backward(fl_model *m, fl_node *n) {
    fl_tensor *dx = fl_gin(m, n, 0), *dlo = fl_gin(m, n, 1), *dhi = fl_gin(m, n, 2);
    const fl_tensor *x = fl_in(m, n, 0);
    const float *dy = fl_gout(m, n, 0)->data;
    float lo, hi, glo = 0, ghi = 0;
    clip_bounds(m, n, &lo, &hi);
    for (int64_t i = 0; i < x->size; i++) {
        float v = x->data[i];
        if (v > lo && v < hi) {
            if (dx) dx->data[i] += dy[i];
        } else if (fmaxf(v, lo) < hi) { /* v <= lo < hi: the lower bound is the output */
            glo += dy[i];
        } else {
            ghi += dy[i];
        }
    }
    if (dlo) dlo->data[0] += glo;
    if (dhi) dhi->data[0] += ghi;
}
static const fl_op op_clip = {"Clip", clip_init, clip_shape, clip_forward, clip_backward, unary_free};

/* ---- Dropout ---------------------------------------------------------------------------------------
 * The ratio is the attribute `ratio` (opset < 12) or the optional scalar input 1 (opset 12+),
 * default 0.5; the optional input 2 training_mode and the model's own m->training switch
 * dropping on. Otherwise (inference) Dropout is the identity. When dropping, each element is
 * kept with probability 1 - ratio and scaled by 1 / (1 - ratio) ("inverted" dropout, so
 * inference needs no rescaling); the mask comes from m->rng, so a run is reproducible from
 * the model's seed. The attribute `seed` is accepted and ignored for the same reason. The
 * optional output 1 is the keep mask as float 0 / 1 (ONNX says bool). */
static fl_status dropout_init(fl_model *m, fl_node *n, fl_err *e) {
    static const char *const known[] = {"ratio", "seed", "is_test", NULL};
    fl_status st = unary_init_common(n, known, 3, 2, e);
    if (st != FL_OK) return st;
    unary_state *s = n->state;
    s->ratio = fl_node_attr_float(n, "ratio", 0.5f);
    if (!(s->ratio >= 0 && s->ratio <= 1))
        return fl_fail(e, FL_ERR_FORMAT, "node '%s' (Dropout): ratio %g is outside [0, 1]", n->name,
                       (double)s->ratio);
    return FL_OK;
}

static fl_status dropout_shape(fl_model *m, fl_node *n, fl_err *e) {
    unary_state *s = n->state;
    const fl_tensor *x = fl_in(m, n, 0);
    for (int i = 1; i < 3; i++) {
        const fl_tensor *b = fl_in(m, n, i);
        char buf[128];
        if (b && b->size != 1)
            return fl_fail(e, FL_ERR_SHAPE, "node '%s' (Dropout): %s must be a scalar, has shape %s",
                           n->name, i == 1 ? "ratio" : "training_mode",
                           fl_shape_str(b, buf, sizeof buf));
    }
    /* the mask buffer is always planned: m->training may be switched on without a re-plan */
    if (s->mask_size != x->size || !s->mask) {
        fl_free(s->mask);
        s->mask = fl_alloc(sizeof(float) * (size_t)(x->size ? x->size : 1));
        if (!s->mask) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
        s->mask_size = x->size;
    }
    return unary_shape(m, n, e);
}

static void dropout_forward(fl_model *m, fl_node *n) {
    unary_state *s = n->state;
    const fl_tensor *x = fl_in(m, n, 0), *tr = fl_in(m, n, 1), *tm = fl_in(m, n, 2);
    float *y = fl_out(m, n, 0)->data, *keep = n->n_out > 1 ? fl_out(m, n, 1)->data : NULL;
    float ratio = tr ? tr->data[0] : s->ratio;
    int drop = (m->training || (tm && tm->data[0] != 0)) && ratio > 0;
    s->dropped = drop;
    if (!drop) {
        memcpy(y, x->data, sizeof(float) * (size_t)x->size);
        for (int64_t i = 0; keep && i < x->size; i++) keep[i] = 1;
        return;
    }
    /* ratio >= 1 drops everything (rather than scaling by infinity) */
    float scale = ratio < 1 ? 1.0f / (1.0f - ratio) : 0.0f;
    for (int64_t i = 0; i < x->size; i++) {
        int k = fl_rng_uniform(&m->rng) >= ratio;
        s->mask[i] = k ? scale : 0.0f;
        y[i] = x->data[i] * s->mask[i];
        if (keep) keep[i] = (float)k;
    }
}

static void dropout_backward(fl_model *m, fl_node *n) {
    const unary_state *s = n->state;
    fl_tensor *dx = fl_gin(m, n, 0);
    if (!dx) return;
    const float *dy = fl_gout(m, n, 0)->data;
    if (s->dropped)
        for (int64_t i = 0; i < dx->size; i++) dx->data[i] += dy[i] * s->mask[i];
    else
        for (int64_t i = 0; i < dx->size; i++) dx->data[i] += dy[i];
}
static const fl_op op_dropout = {"Dropout", dropout_init, dropout_shape, dropout_forward,
                                 dropout_backward, unary_free};

extern const fl_op fl_op_softmax, fl_op_logsoftmax; /* op_softmax.c */

const fl_op *const fl_ops_activation[] = {&op_relu,    &op_leaky,       &op_sigmoid,
                                          &op_tanh,    &op_identity,    &op_clip,
                                          &op_dropout, &fl_op_softmax,  &fl_op_logsoftmax,
                                          NULL};
