/* Element-wise math functions: Exp, Log, Sqrt, Neg, Abs, Reciprocal, Erf, Floor, Ceil, Not
 * and the smooth activations HardSigmoid, HardSwish, Gelu, Softplus, Softsign, Mish, Elu, Selu.
 * (Relu, LeakyRelu, Sigmoid, Tanh, Clip live in op_activation.c, which they predate.)
 *
 * Each op is one line of the UNARY_OPS table: its forward y = f(x) and its derivative
 * dy/dx in terms of x, y and the op's two float attributes a, b. Forward and backward are
 * one loop each, expanded per op from the table so the compiler sees a plain loop. Floor,
 * Ceil and Not (bool in, bool out) are piecewise constant: their derivative is 0 (as in
 * PyTorch). */
#include <math.h>
#include <string.h>

#include "flare/model.h"
#include "nn/ops.h"

static inline float softplus(float x) { return x > 0 ? x + log1pf(expf(-x)) : log1pf(expf(x)); }
static inline float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
/* min(1, max(0, v)) with selects: fminf / fmaxf keep the loops they are in from vectorising */
static inline float clamp01(float v) { return v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v; }

/* Gelu: exact x * Phi(x) (approximate = "none"), or the tanh form (approximate = "tanh"). */
#define GELU_K 0.7978845608f /* sqrt(2 / pi) */
static inline float gelu(float x, int tanh_form) {
    if (tanh_form) return 0.5f * x * (1.0f + tanhf(GELU_K * (x + 0.044715f * x * x * x)));
    return 0.5f * x * (1.0f + erff(x * 0.70710678f));
}
static inline float gelu_grad(float x, int tanh_form) {
    if (tanh_form) {
        float t = tanhf(GELU_K * (x + 0.044715f * x * x * x));
        return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * GELU_K * (1.0f + 0.134145f * x * x);
    }
    return 0.5f * (1.0f + erff(x * 0.70710678f)) + x * 0.39894228f * expf(-0.5f * x * x);
}
static inline float mish_grad(float x) {
    float t = tanhf(softplus(x));
    return t + x * (1.0f - t * t) * sigmoid(x);
}

/*  X(id,   ONNX name,  y = f(x),  dy/dx (x, y, a, b)) */
#define UNARY_OPS(X)                                                                              \
    X(EXP, "Exp", expf(x), y)                                                                     \
    X(LOG, "Log", logf(x), 1.0f / x)                                                              \
    X(SQRT, "Sqrt", sqrtf(x), 0.5f / y)                                                           \
    X(NEG, "Neg", -x, -1.0f)                                                                      \
    X(ABS, "Abs", fabsf(x), x > 0 ? 1.0f : x < 0 ? -1.0f : 0.0f)                                  \
    X(RECIPROCAL, "Reciprocal", 1.0f / x, -y * y)                                                 \
    X(ERF, "Erf", erff(x), 1.1283791671f * expf(-x * x))                                          \
    X(FLOOR, "Floor", floorf(x), 0.0f)                                                            \
    X(CEIL, "Ceil", ceilf(x), 0.0f)                                                               \
    X(NOT, "Not", x == 0 ? 1.0f : 0.0f, 0.0f)                                                     \
    X(HARDSIGMOID, "HardSigmoid", clamp01(a * x + b),                                             \
      a * x + b > 0 && a * x + b < 1 ? a : 0.0f)                                                  \
    X(HARDSWISH, "HardSwish", x * clamp01(x / 6.0f + 0.5f),                                       \
      x < -3 ? 0.0f : x > 3 ? 1.0f : x / 3.0f + 0.5f)                                             \
    X(GELU, "Gelu", gelu(x, b != 0), gelu_grad(x, b != 0))                                        \
    X(SOFTPLUS, "Softplus", softplus(x), sigmoid(x))                                              \
    X(SOFTSIGN, "Softsign", x / (1.0f + fabsf(x)), 1.0f / ((1.0f + fabsf(x)) * (1.0f + fabsf(x)))) \
    X(MISH, "Mish", x * tanhf(softplus(x)), mish_grad(x))                                         \
    X(ELU, "Elu", x > 0 ? x : a * (expf(x) - 1.0f), x > 0 ? 1.0f : y + a)                         \
    X(SELU, "Selu", x > 0 ? b * x : b * a * (expf(x) - 1.0f), x > 0 ? b : y + b * a)

#define ID(id, name, f, d) U_##id,
enum { UNARY_OPS(ID) U_COUNT };
#undef ID

/* The float attributes each op takes (a, b) with their ONNX defaults; Gelu's string
 * attribute `approximate` becomes b (1 for "tanh"). */
static const struct {
    int kind;
    const char *attr[2];
    float dflt[2];
} attrs[] = {
    {U_HARDSIGMOID, {"alpha", "beta"}, {0.2f, 0.5f}},
    {U_ELU, {"alpha", NULL}, {1.0f, 0}},
    {U_SELU, {"alpha", "gamma"}, {1.67326319217681884765625f, 1.05070102214813232421875f}},
};

typedef struct unary_state {
    int kind;
    float a, b;
} unary_state;

static int kind_of(const char *name) {
#define MATCH(id, nm, f, d) if (strcmp(name, nm) == 0) return U_##id;
    UNARY_OPS(MATCH)
#undef MATCH
    return -1;
}

static fl_status unary_init(fl_model *m, fl_node *n, fl_err *e) {
    int kind = kind_of(n->op->name);
    const char *known[3] = {NULL, NULL, NULL};
    float dflt[2] = {0, 0};
    for (size_t k = 0; k < sizeof attrs / sizeof attrs[0]; k++)
        if (attrs[k].kind == kind) {
            known[0] = attrs[k].attr[0], known[1] = attrs[k].attr[1];
            dflt[0] = attrs[k].dflt[0], dflt[1] = attrs[k].dflt[1];
        }
    if (kind == U_GELU) known[0] = "approximate";
    fl_status st = fl_node_check_arity(n, 1, 1, 1, 1, e);
    if (st == FL_OK) st = fl_node_check_attrs(n, known, e);
    if (st != FL_OK) return st;
    unary_state *s = fl_alloc(sizeof *s);
    if (!s) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    n->state = s;
    s->kind = kind;
    s->a = known[0] && kind != U_GELU ? fl_node_attr_float(n, known[0], dflt[0]) : 0;
    s->b = known[1] ? fl_node_attr_float(n, known[1], dflt[1]) : 0;
    if (kind == U_GELU) {
        const fl_attr *ap = fl_node_attr(n, "approximate");
        int ok = !ap || (ap->type == FL_ATTR_STRING &&
                         (strcmp(ap->s, "none") == 0 || strcmp(ap->s, "tanh") == 0));
        if (!ok)
            return fl_fail(e, FL_ERR_UNSUPPORTED, "node '%s' (Gelu): approximate must be 'none' "
                           "or 'tanh'", n->name);
        s->b = ap && strcmp(ap->s, "tanh") == 0;
    }
    m->values[n->out[0]].onnx_dtype = m->values[n->in[0]].onnx_dtype;
    return FL_OK;
}

static fl_status unary_shape(fl_model *m, fl_node *n, fl_err *e) {
    const fl_tensor *x = fl_in(m, n, 0);
    fl_node_set_out_shape(m, n, 0, x->ndim, x->shape);
    return FL_OK;
}

static void unary_forward(fl_model *m, fl_node *n) {
    const unary_state *s = n->state;
    const fl_tensor *xt = fl_in(m, n, 0);
    const float *restrict X = xt->data;
    const float a = s->a, b = s->b;
    float *restrict Y = fl_out(m, n, 0)->data;
    int64_t len = xt->size;
    (void)a, (void)b;
    switch (s->kind) {
#define FWD(id, nm, f, d)                                                                         \
    case U_##id:                                                                                  \
        for (int64_t i = 0; i < len; i++) {                                                       \
            float x = X[i];                                                                       \
            Y[i] = (f);                                                                           \
        }                                                                                         \
        break;
        UNARY_OPS(FWD)
#undef FWD
    }
}

static void unary_backward(fl_model *m, fl_node *n) {
    const unary_state *s = n->state;
    fl_tensor *dx = fl_gin(m, n, 0);
    if (!dx) return;
    const float *restrict X = fl_in(m, n, 0)->data, *restrict Y = fl_out(m, n, 0)->data;
    const float *restrict DY = fl_gout(m, n, 0)->data;
    const float a = s->a, b = s->b;
    float *restrict DX = dx->data;
    int64_t len = dx->size;
    (void)a, (void)b;
    switch (s->kind) {
#define BWD(id, nm, f, d)                                                                         \
    case U_##id:                                                                                  \
        for (int64_t i = 0; i < len; i++) {                                                       \
            float x = X[i], y = Y[i];                                                             \
            (void)x, (void)y;                                                                     \
            DX[i] += DY[i] * (d);                                                                 \
        }                                                                                         \
        break;
        UNARY_OPS(BWD)
#undef BWD
    }
}

#define DEF(id, nm, f, d) \
    static const fl_op op_##id = {nm, unary_init, unary_shape, unary_forward, unary_backward, NULL};
UNARY_OPS(DEF)
#undef DEF

#define REF(id, nm, f, d) &op_##id,
const fl_op *const fl_ops_unary[] = {UNARY_OPS(REF) NULL};
#undef REF
