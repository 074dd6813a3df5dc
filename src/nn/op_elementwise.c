/* Binary element-wise ops with numpy broadcasting: Add, Sub, Mul, Div, Pow, Mod, the
 * comparisons Equal, Less, Greater, LessOrEqual, GreaterOrEqual and the logical And, Or, Xor.
 * Comparisons and logical ops yield bool (stored as 0 / 1 like every flare tensor) and have no
 * gradient: they are piecewise constant, and backward stops at them. Div of integer tensors
 * truncates.
 *
 * Broadcasting is planned once per shape: both inputs are right-aligned to the output's rank
 * and adjacent dimensions are merged whenever neither input changes its broadcast status
 * between them. What is left is a short list of "collapsed" dimensions in which each input
 * is either fully present (stride 1 in its innermost dim) or broadcast (stride 0). The
 * common cases collapse to very little:
 *
 *     same shape                  [n]          a stride 1, b stride 1
 *     x + scalar                  [n]          b stride 0
 *     [N,C,H,W] + [1,C,1,1]       [N, C, H*W]  b strides {0, 1, 0}
 *     [N,F] + [F]                 [N, F]       b strides {0, 1}
 *
 * and every kernel is an outer odometer over all but the last collapsed dim around a tight
 * inner loop specialised for the four (a, b) stride combinations. Backward walks the same
 * rows; a gradient whose input is broadcast along the row is summed first and added once,
 * which is the reduction over the broadcast dimensions. */
#include <math.h>
#include <string.h>

#include "flare/model.h"
#include "nn/ops.h"

enum { EW_ADD, EW_SUB, EW_MUL, EW_DIV, EW_IDIV, EW_POW, EW_MOD, EW_FMOD, EW_EQ, EW_LT, EW_GT,
       EW_LE, EW_GE, EW_AND, EW_OR, EW_XOR };

static const struct { const char *name; int kind; } kinds[] = {
    {"Add", EW_ADD},         {"Sub", EW_SUB},   {"Mul", EW_MUL},       {"Div", EW_DIV},
    {"Pow", EW_POW},         {"Mod", EW_MOD},   {"Equal", EW_EQ},      {"Less", EW_LT},
    {"Greater", EW_GT},      {"LessOrEqual", EW_LE}, {"GreaterOrEqual", EW_GE},
    {"And", EW_AND},         {"Or", EW_OR},     {"Xor", EW_XOR},
};

/* Mod with fmod = 0 (ONNX's integer mod): the remainder takes the divisor's sign, as in
 * Python; fmod = 1 is C's fmod (the dividend's sign). */
static inline float int_mod(float a, float b) {
    float r = fmodf(a, b);
    return r != 0 && (r < 0) != (b < 0) ? r + b : r;
}

typedef struct bin_state {
    int kind;                   /* EW_* */
    int nd;                     /* collapsed rank, >= 1 */
    int64_t shape[FL_MAX_DIMS]; /* collapsed output shape */
    int64_t sa[FL_MAX_DIMS];    /* element strides of a per collapsed dim, 0 where broadcast */
    int64_t sb[FL_MAX_DIMS];
} bin_state;

static fl_status bin_init(fl_model *m, fl_node *n, fl_err *e) {
    /* "broadcast" is the opset < 7 switch for what is now always on; "axis" (its legacy
     * left-aligned mode) has no numpy equivalent and is rejected. */
    static const char *const known[] = {"broadcast", NULL}, *const known_mod[] = {"fmod", NULL};
    int kind = -1;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        if (strcmp(kinds[k].name, n->op->name) == 0) kind = kinds[k].kind;
    fl_status st = fl_node_check_arity(n, 2, 2, 1, 1, e);
    if (st == FL_OK) st = fl_node_check_attrs(n, kind == EW_MOD ? known_mod : known, e);
    if (st != FL_OK) return st;
    bin_state *s = fl_alloc(sizeof *s);
    if (!s) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    n->state = s;
    if (kind == EW_MOD && fl_node_attr_int(n, "fmod", 0) != 0) kind = EW_FMOD;
    /* integer division truncates (C, onnxruntime); flare holds integers as floats. ONNX
     * dtypes 2..7 are uint8, int8, uint16, int16, int32, int64. */
    int dt = n->in[0] >= 0 ? m->values[n->in[0]].onnx_dtype : 1;
    if (kind == EW_DIV && dt >= 2 && dt <= 7) kind = EW_IDIV;
    s->kind = kind;
    /* bool for predicates, else the inputs' type: int64 stays int64 along a shape chain, so
     * that a Div further down truncates */
    m->values[n->out[0]].onnx_dtype = kind >= EW_EQ ? 9 : dt;
    return FL_OK;
}

static fl_status bin_shape(fl_model *m, fl_node *n, fl_err *e) {
    bin_state *s = n->state;
    const fl_tensor *a = fl_in(m, n, 0), *b = fl_in(m, n, 1);
    int r = a->ndim > b->ndim ? a->ndim : b->ndim;
    int64_t as[FL_MAX_DIMS], bs[FL_MAX_DIMS], ys[FL_MAX_DIMS];
    for (int d = 0; d < r; d++) {
        int da = d - (r - a->ndim), db = d - (r - b->ndim);
        as[d] = da >= 0 ? a->shape[da] : 1;
        bs[d] = db >= 0 ? b->shape[db] : 1;
        if (as[d] != bs[d] && as[d] != 1 && bs[d] != 1) {
            char x[128], y[128];
            return fl_fail(e, FL_ERR_SHAPE, "node '%s' (%s): shapes %s and %s do not broadcast",
                           n->name, n->op->name, fl_shape_str(a, x, sizeof x),
                           fl_shape_str(b, y, sizeof y));
        }
        ys[d] = as[d] == 1 ? bs[d] : as[d];
    }
    fl_node_set_out_shape(m, n, 0, r, ys);

    /* collapse: drop size-1 output dims, merge runs with equal (a present, b present) */
    int nd = 0, pa = -1, pb = -1;
    int64_t ca[FL_MAX_DIMS], cb[FL_MAX_DIMS];
    for (int d = 0; d < r; d++) {
        if (ys[d] == 1) continue;
        int fa = as[d] != 1, fb = bs[d] != 1;
        if (nd > 0 && fa == pa && fb == pb) {
            s->shape[nd - 1] *= ys[d];
        } else {
            s->shape[nd] = ys[d];
            ca[nd] = fa;
            cb[nd] = fb;
            nd++;
            pa = fa;
            pb = fb;
        }
    }
    if (nd == 0) { /* every dim is 1: one element */
        s->shape[0] = 1;
        ca[0] = cb[0] = 1;
        nd = 1;
    }
    s->nd = nd;
    int64_t ka = 1, kb = 1;
    for (int d = nd - 1; d >= 0; d--) {
        s->sa[d] = ca[d] ? ka : 0;
        s->sb[d] = cb[d] ? kb : 0;
        if (ca[d]) ka *= s->shape[d];
        if (cb[d]) kb *= s->shape[d];
    }
    return FL_OK;
}

/* One row of the output: len elements; ia, ib are 0 (broadcast) or 1. */
typedef struct row {
    int64_t len, ia, ib;
    float *y;           /* forward: output row */
    const float *a, *b; /* input rows */
    const float *dy;    /* backward: gradient of the output row */
    float *ga, *gb;     /* backward: gradient rows of a and b (NULL: not wanted) */
} row;

/* y = EXPR(A, B) over one row, with the broadcast operand hoisted out of the loop. */
#define FWD_LOOP(EXPR)                                                                         \
    do {                                                                                       \
        if (r->ia && r->ib) {                                                                  \
            for (int64_t i = 0; i < len; i++) { float A = a[i], B = b[i]; y[i] = (EXPR); }     \
        } else if (r->ia) {                                                                    \
            float B = b[0];                                                                    \
            for (int64_t i = 0; i < len; i++) { float A = a[i]; y[i] = (EXPR); }               \
        } else if (r->ib) {                                                                    \
            float A = a[0];                                                                    \
            for (int64_t i = 0; i < len; i++) { float B = b[i]; y[i] = (EXPR); }               \
        } else {                                                                               \
            float A = a[0], B = b[0], v = (EXPR);                                              \
            for (int64_t i = 0; i < len; i++) y[i] = v;                                        \
        }                                                                                      \
    } while (0)

static void row_forward(int kind, const row *r) {
    int64_t len = r->len;
    const float *a = r->a, *b = r->b;
    float *y = r->y;
    switch (kind) {
    case EW_ADD: FWD_LOOP(A + B); break;
    case EW_SUB: FWD_LOOP(A - B); break;
    case EW_MUL: FWD_LOOP(A * B); break;
    case EW_POW: FWD_LOOP(B == 2.0f ? A * A : powf(A, B)); break; /* x^2: LayerNorm expanded */
    case EW_DIV: FWD_LOOP(A / B); break;
    case EW_IDIV: FWD_LOOP(truncf(A / B)); break;
    case EW_MOD: FWD_LOOP(int_mod(A, B)); break;
    case EW_FMOD: FWD_LOOP(fmodf(A, B)); break;
    case EW_EQ: FWD_LOOP(A == B); break;
    case EW_LT: FWD_LOOP(A < B); break;
    case EW_GT: FWD_LOOP(A > B); break;
    case EW_LE: FWD_LOOP(A <= B); break;
    case EW_GE: FWD_LOOP(A >= B); break;
    case EW_AND: FWD_LOOP(A != 0 && B != 0); break;
    case EW_OR: FWD_LOOP(A != 0 || B != 0); break;
    default: FWD_LOOP((A != 0) != (B != 0)); break;
    }
}

/* G (stride IG) += EXPR(D, A, B) over one row; a broadcast G receives the row's sum. */
#define GRAD_LOOP(G, IG, EXPR)                                                                 \
    do {                                                                                       \
        if (IG) {                                                                              \
            for (int64_t i = 0; i < len; i++) {                                                \
                float D = dy[i], A = a[i * ia], B = b[i * ib];                                 \
                (void)A, (void)B;                                                              \
                G[i] += (EXPR);                                                                \
            }                                                                                  \
        } else {                                                                               \
            float acc = 0;                                                                     \
            for (int64_t i = 0; i < len; i++) {                                                \
                float D = dy[i], A = a[i * ia], B = b[i * ib];                                 \
                (void)A, (void)B;                                                              \
                acc += (EXPR);                                                                 \
            }                                                                                  \
            G[0] += acc;                                                                       \
        }                                                                                      \
    } while (0)

static void row_backward(int kind, const row *r) {
    int64_t len = r->len, ia = r->ia, ib = r->ib;
    const float *a = r->a, *b = r->b, *dy = r->dy;
    float *ga = r->ga, *gb = r->gb;
    if (ga) {
        switch (kind) {
        case EW_ADD:
        case EW_SUB: GRAD_LOOP(ga, ia, D); break;
        case EW_MUL: GRAD_LOOP(ga, ia, D * B); break;
        /* B = 0 is a constant 1 (0 * pow(0, -1) would be NaN) */
        case EW_POW: GRAD_LOOP(ga, ia, B == 0 ? 0.0f : D * B * powf(A, B - 1)); break;
        case EW_DIV:
        case EW_IDIV: GRAD_LOOP(ga, ia, D / B); break;
        default: GRAD_LOOP(ga, ia, D); break; /* Mod: a - q b with q piecewise constant */
        }
    }
    if (gb) {
        switch (kind) {
        case EW_ADD: GRAD_LOOP(gb, ib, D); break;
        case EW_SUB: GRAD_LOOP(gb, ib, -D); break;
        case EW_MUL: GRAD_LOOP(gb, ib, D * A); break;
        /* d/dB A^B = A^B ln A, defined for A > 0 only; 0 elsewhere */
        case EW_POW: GRAD_LOOP(gb, ib, A > 0 ? D * powf(A, B) * logf(A) : 0.0f); break;
        case EW_DIV:
        case EW_IDIV: GRAD_LOOP(gb, ib, -D * A / (B * B)); break;
        case EW_MOD: GRAD_LOOP(gb, ib, -D * floorf(A / B)); break;
        default: GRAD_LOOP(gb, ib, -D * truncf(A / B)); break;
        }
    }
}

/* Walk every row of the collapsed iteration space: an odometer over dims [0, nd-1). */
static void for_each_row(const bin_state *s, int backward, const row *base) {
    int nd = s->nd;
    int64_t len = s->shape[nd - 1], idx[FL_MAX_DIMS] = {0};
    int64_t rows = 1;
    for (int d = 0; d < nd - 1; d++) rows *= s->shape[d];
    if (len == 0) return;
    int64_t oa = 0, ob = 0;
    for (int64_t k = 0; k < rows; k++) {
        row r = *base;
        int64_t oy = k * len;
        r.len = len;
        r.ia = s->sa[nd - 1] != 0;
        r.ib = s->sb[nd - 1] != 0;
        r.a += oa;
        r.b += ob;
        if (backward) {
            r.dy += oy;
            if (r.ga) r.ga += oa;
            if (r.gb) r.gb += ob;
            row_backward(s->kind, &r);
        } else {
            r.y += oy;
            row_forward(s->kind, &r);
        }
        /* advance the odometer, keeping the input offsets in step */
        for (int d = nd - 2; d >= 0; d--) {
            oa += s->sa[d];
            ob += s->sb[d];
            if (++idx[d] < s->shape[d]) break;
            oa -= s->sa[d] * s->shape[d];
            ob -= s->sb[d] * s->shape[d];
            idx[d] = 0;
        }
    }
}

static void bin_forward(fl_model *m, fl_node *n) {
    row r = {0};
    r.a = fl_in(m, n, 0)->data;
    r.b = fl_in(m, n, 1)->data;
    r.y = fl_out(m, n, 0)->data;
    for_each_row(n->state, 0, &r);
}

static void bin_backward(fl_model *m, fl_node *n) {
    fl_tensor *ga = fl_gin(m, n, 0), *gb = fl_gin(m, n, 1);
    if (!ga && !gb) return;
    row r = {0};
    r.a = fl_in(m, n, 0)->data;
    r.b = fl_in(m, n, 1)->data;
    r.dy = fl_gout(m, n, 0)->data;
    r.ga = ga ? ga->data : NULL;
    r.gb = gb ? gb->data : NULL;
    for_each_row(n->state, 1, &r);
}

static const fl_op op_add = {"Add", bin_init, bin_shape, bin_forward, bin_backward, NULL};
static const fl_op op_sub = {"Sub", bin_init, bin_shape, bin_forward, bin_backward, NULL};
static const fl_op op_mul = {"Mul", bin_init, bin_shape, bin_forward, bin_backward, NULL};
static const fl_op op_div = {"Div", bin_init, bin_shape, bin_forward, bin_backward, NULL};
static const fl_op op_pow = {"Pow", bin_init, bin_shape, bin_forward, bin_backward, NULL};
static const fl_op op_mod = {"Mod", bin_init, bin_shape, bin_forward, bin_backward, NULL};
#define PREDICATE(id, nm) \
    static const fl_op op_##id = {nm, bin_init, bin_shape, bin_forward, NULL, NULL};
PREDICATE(eq, "Equal")
PREDICATE(lt, "Less")
PREDICATE(gt, "Greater")
PREDICATE(le, "LessOrEqual")
PREDICATE(ge, "GreaterOrEqual")
PREDICATE(and, "And")
PREDICATE(or, "Or")
PREDICATE(xor, "Xor")
#undef PREDICATE

const fl_op *const fl_ops_elementwise[] = {&op_add, &op_sub, &op_mul, &op_div, &op_pow, &op_mod,
                                           &op_eq,  &op_lt,  &op_gt,  &op_le,  &op_ge,  &op_and,
                                           &op_or,  &op_xor, NULL};
