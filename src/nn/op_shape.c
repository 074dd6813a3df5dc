/* Shape-only ops — Flatten, Reshape, Squeeze, Unsqueeze — and the small integer ops that
 * feed them: Shape, Size, Constant, Cast. (Data-moving layout ops — Transpose, Concat, Gather —
 * are in op_layout.c.)
 *
 * Flatten, Reshape, Squeeze and Unsqueeze keep the elements in row-major order and only
 * change the shape, so they share one forward (a copy) and one backward (dx += dy); they
 * differ only in their shape callback.
 *
 * flare stores ONNX int64 tensors as floats (tensor.h). The inputs that give a shape
 * (Reshape's `shape`, the `axes` input of Squeeze/Unsqueeze at opset >= 13) are read in the
 * shape callback: planning runs shape then forward node by node, so their values — even
 * when computed by a Shape -> Gather -> Concat chain — are already there. A model is
 * re-planned when its input shapes change, which is the only way such values can change
 * in the graphs flare runs; the shape a node planned for therefore stays valid in later
 * forward passes. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "flare/model.h"
#include "nn/ops.h"

typedef struct shape_state {
    int64_t axis;     /* Flatten: axis; Shape: start */
    int64_t end;      /* Shape: end (when has_end) */
    int has_end;
    int allowzero;    /* Reshape */
    int has_axes;     /* Squeeze/Unsqueeze: axes came as an attribute (opset < 13) */
    int n_axes;
    int64_t axes[FL_MAX_DIMS];
    int to;           /* Cast: target ONNX dtype */
    fl_tensor value;  /* Constant: the value (owned) */
} shape_state;

static void shape_free(fl_node *n) {
    shape_state *s = n->state;
    if (s) fl_tensor_free(&s->value);
    fl_free(s);
}

/* Check arity and attribute names, allocate the state. */
static fl_status init_common(fl_node *n, const char *const *known, int min_in, int max_in,
                             fl_err *e) {
    fl_status st = fl_node_check_arity(n, min_in, max_in, 1, 1, e);
    if (st == FL_OK) st = fl_node_check_attrs(n, known, e);
    if (st != FL_OK) return st;
    if (!(n->state = fl_alloc(sizeof(shape_state))))
        return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    return FL_OK;
}

/* The output keeps the ONNX dtype of input 0 (a reshaped int64 shape stays int64), so that
 * export writes back what import read. */
static void out_dtype_from_input(fl_model *m, fl_node *n) {
    if (n->n_in > 0 && n->in[0] >= 0)
        m->values[n->out[0]].onnx_dtype = m->values[n->in[0]].onnx_dtype;
}

/* "[2,-1,0]": like fl_shape_str, for a requested shape (whose product may overflow). */
static const char *dims_str(int ndim, const int64_t *shape, char *buf, size_t len) {
    size_t k = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < ndim && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%lld", i ? "," : "", (long long)shape[i]);
    if (k < len) snprintf(buf + k, len - k, "]");
    return buf;
}

/* ---- the shared copy kernels ---------------------------------------------------------------- */
/* y[size] = x[size]: the output is the input with another shape. */
static void copy_forward(fl_model *m, fl_node *n) {
    const fl_tensor *x = fl_in(m, n, 0);
    if (x->size) memcpy(fl_out(m, n, 0)->data, x->data, (size_t)x->size * sizeof(float));
}
static void copy_backward(fl_model *m, fl_node *n) {
    fl_tensor *dx = fl_gin(m, n, 0);
    if (!dx) return;
    const float *dy = fl_gout(m, n, 0)->data;
    for (int64_t i = 0; i < dx->size; i++) dx->data[i] += dy[i];
}

/* ---- Flatten: [d0..d(a-1), da..] -> [d0*..*d(a-1), da*..] --------------------------------- */
static fl_status flatten_init(fl_model *m, fl_node *n, fl_err *e) {
    static const char *const known[] = {"axis", NULL};
    fl_status st = init_common(n, known, 1, 1, e);
    if (st != FL_OK) return st;
    ((shape_state *)n->state)->axis = fl_node_attr_int(n, "axis", 1);
    out_dtype_from_input(m, n);
    return FL_OK;
}
static fl_status flatten_shape(fl_model *m, fl_node *n, fl_err *e) {
    const fl_tensor *x = fl_in(m, n, 0);
    int64_t axis = ((shape_state *)n->state)->axis;
    /* axis may equal rank here (everything goes into the first dim) */
    if (axis < -x->ndim || axis > x->ndim)
        return fl_fail(e, FL_ERR_ARG, "node '%s' (Flatten): axis %lld out of range for rank %d",
                       n->name, (long long)axis, x->ndim);
    int a = (int)(axis < 0 ? axis + x->ndim : axis);
    int64_t shp[2] = {fl_shape_size(a, x->shape), fl_shape_size(x->ndim - a, x->shape + a)};
    fl_node_set_out_shape(m, n, 0, 2, shp);
    return FL_OK;
}
static const fl_op op_flatten = {"Flatten", flatten_init, flatten_shape, copy_forward,
                                 copy_backward, shape_free};

/* ---- Reshape --------------------------------------------------------------------------------- */
static fl_status reshape_init(fl_model *m, fl_node *n, fl_err *e) {
    static const char *const known[] = {"allowzero", NULL};
    fl_status st = init_common(n, known, 2, 2, e);
    if (st != FL_OK) return st;
    ((shape_state *)n->state)->allowzero = fl_node_attr_int(n, "allowzero", 0) != 0;
    out_dtype_from_input(m, n);
    return FL_OK;
}

/* shape entries: 0 copies the input's dim at that position (unless allowzero: then 0 is a
 * zero-sized dim), -1 is inferred from the element count (at most one). */
static fl_status reshape_shape(fl_model *m, fl_node *n, fl_err *e) {
    const fl_tensor *x = fl_in(m, n, 0);
    int allowzero = ((shape_state *)n->state)->allowzero;
    int64_t req[FL_MAX_DIMS], shp[FL_MAX_DIMS];
    int nd, infer = -1;
    char a[128], b[128];
    fl_status st = fl_node_read_ints(n, fl_in(m, n, 1), "shape", FL_MAX_DIMS, req, &nd, e);
    if (st != FL_OK) return st;
    if (fl_in(m, n, 1)->ndim != 1)
        return fl_fail(e, FL_ERR_SHAPE, "node '%s' (Reshape): shape must be 1-D, is a scalar",
                       n->name);
    int64_t known = 1;
    for (int i = 0; i < nd; i++) {
        shp[i] = req[i];
        if (req[i] == -1) {
            if (infer >= 0)
                return fl_fail(e, FL_ERR_SHAPE, "node '%s' (Reshape): shape %s has two -1 entries",
                               n->name, dims_str(nd, req, a, sizeof a));
            infer = i;
            continue;
        }
        if (req[i] < -1)
            return fl_fail(e, FL_ERR_SHAPE, "node '%s' (Reshape): shape %s has negative entry %lld",
                           n->name, dims_str(nd, req, a, sizeof a), (long long)req[i]);
        if (req[i] == 0 && !allowzero) {
            if (i >= x->ndim)
                return fl_fail(e, FL_ERR_SHAPE,
                               "node '%s' (Reshape): shape %s copies dim %d (0) of input %s, "
                               "which has only %d dims", n->name, dims_str(nd, req, a, sizeof a),
                               i, fl_shape_str(x, b, sizeof b), x->ndim);
            shp[i] = x->shape[i];
        }
        /* entries are read as integers below 2^24, but eight of them can overflow int64 */
        if (__builtin_mul_overflow(known, shp[i], &known))
            return fl_fail(e, FL_ERR_SHAPE, "node '%s' (Reshape): shape %s is too large", n->name,
                           dims_str(nd, req, a, sizeof a));
    }
    if (infer >= 0) {
        if (allowzero && known == 0)
            return fl_fail(e, FL_ERR_SHAPE, "node '%s' (Reshape): shape %s has both 0 and -1 "
                           "with allowzero=1", n->name, dims_str(nd, req, a, sizeof a));
        if (known == 0 || x->size % known != 0)
            return fl_fail(e, FL_ERR_SHAPE, "node '%s' (Reshape): cannot reshape %s (%lld "
                           "elements) to %s", n->name, fl_shape_str(x, b, sizeof b),
                           (long long)x->size, dims_str(nd, req, a, sizeof a));
        shp[infer] = x->size / known;
        known *= shp[infer];
    }
    if (known != x->size)
        return fl_fail(e, FL_ERR_SHAPE, "node '%s' (Reshape): cannot reshape %s (%lld elements) "
                       "to %s (%lld elements)", n->name, fl_shape_str(x, b, sizeof b),
                       (long long)x->size, dims_str(nd, shp, a, sizeof a), (long long)known);
    fl_node_set_out_shape(m, n, 0, nd, shp);
    return FL_OK;
}
static const fl_op op_reshape = {"Reshape", reshape_init, reshape_shape, copy_forward,
                                 copy_backward, shape_free};

/* ---- Squeeze / Unsqueeze ----------------------------------------------------------------------
 * Before opset 13 the axes are an attribute, from 13 on an optional (Squeeze) or required
 * (Unsqueeze) second input. Both spellings are accepted whatever m->opset says — they cannot
 * be confused — but not both at once. */
static fl_status axes_init(fl_model *m, fl_node *n, fl_err *e) {
    static const char *const known[] = {"axes", NULL};
    fl_status st = init_common(n, known, 1, 2, e);
    if (st != FL_OK) return st;
    shape_state *s = n->state;
    const fl_attr *a = fl_node_attr(n, "axes");
    int has_input = n->n_in > 1 && n->in[1] >= 0;
    out_dtype_from_input(m, n);
    if (!a) {
        if (!has_input && strcmp(n->op->name, "Unsqueeze") == 0)
            return fl_fail(e, FL_ERR_FORMAT, "node '%s' (Unsqueeze): no axes (%s)", n->name,
                           m->opset >= 13 ? "input 1 is missing" : "attribute 'axes' is missing");
        return FL_OK;
    }
    if (has_input)
        return fl_fail(e, FL_ERR_FORMAT, "node '%s' (%s): axes given both as attribute and input",
                       n->name, n->op->name);
    if (a->type != FL_ATTR_INTS || a->n > FL_MAX_DIMS)
        return fl_fail(e, FL_ERR_FORMAT, "node '%s' (%s): attribute 'axes' must be at most %d ints",
                       n->name, n->op->name, FL_MAX_DIMS);
    s->has_axes = 1;
    s->n_axes = a->n;
    for (int i = 0; i < a->n; i++) s->axes[i] = a->ints[i];
    return FL_OK;
}

/* The axes of this node (attribute or input 1); *given = 0 when there are none. */
static fl_status get_axes(fl_model *m, fl_node *n, int64_t *axes, int *count, int *given,
                          fl_err *e) {
    shape_state *s = n->state;
    *given = 1;
    if (s->has_axes) {
        memcpy(axes, s->axes, sizeof s->axes);
        *count = s->n_axes;
        return FL_OK;
    }
    const fl_tensor *t = fl_in(m, n, 1);
    *count = 0;
    if (!t) {
        *given = 0;
        return FL_OK;
    }
    return fl_node_read_ints(n, t, "axes", FL_MAX_DIMS, axes, count, e);
}

static fl_status squeeze_shape(fl_model *m, fl_node *n, fl_err *e) {
    const fl_tensor *x = fl_in(m, n, 0);
    int64_t axes[FL_MAX_DIMS], shp[FL_MAX_DIMS];
    uint8_t drop[FL_MAX_DIMS];
    int count, given, nd = 0;
    char b[128];
    fl_status st = get_axes(m, n, axes, &count, &given, e);
    if (st == FL_OK) st = fl_node_mark_axes(n, axes, count, x->ndim, drop, e);
    if (st != FL_OK) return st;
    for (int d = 0; d < x->ndim; d++) {
        if (!given) drop[d] = x->shape[d] == 1; /* no axes: every dim of size 1 goes */
        if (drop[d] && x->shape[d] != 1)
            return fl_fail(e, FL_ERR_SHAPE, "node '%s' (Squeeze): dim %d of %s is not 1", n->name,
                           d, fl_shape_str(x, b, sizeof b));
        if (!drop[d]) shp[nd++] = x->shape[d];
    }
    fl_node_set_out_shape(m, n, 0, nd, shp);
    return FL_OK;
}
static const fl_op op_squeeze = {"Squeeze", axes_init, squeeze_shape, copy_forward, copy_backward,
                                 shape_free};

static fl_status unsqueeze_shape(fl_model *m, fl_node *n, fl_err *e) {
    const fl_tensor *x = fl_in(m, n, 0);
    int64_t axes[FL_MAX_DIMS], shp[FL_MAX_DIMS];
    uint8_t ins[FL_MAX_DIMS];
    int count, given;
    fl_status st = get_axes(m, n, axes, &count, &given, e);
    if (st != FL_OK) return st;
    int rank = x->ndim + count; /* axes refer to the output's dims */
    if (rank > FL_MAX_DIMS)
        return fl_fail(e, FL_ERR_UNSUPPORTED, "node '%s' (Unsqueeze): output would have %d dims, "
                       "at most %d", n->name, rank, FL_MAX_DIMS);
    st = fl_node_mark_axes(n, axes, count, rank, ins, e);
    if (st != FL_OK) return st;
    for (int d = 0, k = 0; d < rank; d++) shp[d] = ins[d] ? 1 : x->shape[k++];
    fl_node_set_out_shape(m, n, 0, rank, shp);
    return FL_OK;
}
static const fl_op op_unsqueeze = {"Unsqueeze", axes_init, unsqueeze_shape, copy_forward,
                                   copy_backward, shape_free};

/* ---- Shape: the input's dims [start, end) as a 1-D int64 tensor (start/end: opset 15) ----- */
static fl_status shape_init(fl_model *m, fl_node *n, fl_err *e) {
    static const char *const known[] = {"start", "end", NULL};
    fl_status st = init_common(n, known, 1, 1, e);
    if (st != FL_OK) return st;
    shape_state *s = n->state;
    s->axis = fl_node_attr_int(n, "start", 0);
    s->has_end = fl_node_attr(n, "end") != NULL;
    s->end = fl_node_attr_int(n, "end", 0);
    m->values[n->out[0]].onnx_dtype = 7;
    return FL_OK;
}
/* [start, end) clamped to [0, rank] after adding rank to negative values, as ONNX says. */
static void shape_range(const shape_state *s, int rank, int *lo, int *hi) {
    int64_t a = s->axis, b = s->has_end ? s->end : rank;
    if (a < 0) a += rank;
    if (b < 0) b += rank;
    a = a < 0 ? 0 : a > rank ? rank : a;
    b = b < 0 ? 0 : b > rank ? rank : b;
    *lo = (int)a;
    *hi = (int)(b < a ? a : b);
}
static fl_status shape_shape(fl_model *m, fl_node *n, fl_err *e) {
    int lo, hi;
    shape_range(n->state, fl_in(m, n, 0)->ndim, &lo, &hi);
    int64_t len = hi - lo;
    fl_node_set_out_shape(m, n, 0, 1, &len);
    return FL_OK;
}
static void shape_forward(fl_model *m, fl_node *n) {
    const fl_tensor *x = fl_in(m, n, 0);
    int lo, hi;
    shape_range(n->state, x->ndim, &lo, &hi);
    float *y = fl_out(m, n, 0)->data;
    for (int d = lo; d < hi; d++) y[d - lo] = (float)x->shape[d];
}
static const fl_op op_shape = {"Shape", shape_init, shape_shape, shape_forward, NULL, shape_free};

/* ---- Size: the input's element count as a 0-D int64 tensor --------------------------------- */
static fl_status size_init(fl_model *m, fl_node *n, fl_err *e) {
    static const char *const known[] = {NULL};
    fl_status st = init_common(n, known, 1, 1, e);
    if (st == FL_OK) m->values[n->out[0]].onnx_dtype = 7;
    return st;
}
static fl_status size_shape(fl_model *m, fl_node *n, fl_err *e) {
    fl_node_set_out_shape(m, n, 0, 0, NULL);
    return FL_OK;
}
static void size_forward(fl_model *m, fl_node *n) {
    fl_out(m, n, 0)->data[0] = (float)fl_in(m, n, 0)->size;
}
static const fl_op op_size = {"Size", size_init, size_shape, size_forward, NULL, shape_free};

/* ---- Constant ---------------------------------------------------------------------------------- */
/* ONNX dtypes whose values flare holds as floats: float, uint8, int8, uint16, int16, int32,
 * int64, bool, double, uint32, uint64 (every integer flare reads is far below 2^24). */
static int dtype_is_numeric(int dt) {
    return (dt >= 1 && dt <= 7) || dt == 9 || dt == 11 || dt == 12 || dt == 13;
}

static fl_status constant_init(fl_model *m, fl_node *n, fl_err *e) {
    static const char *const known[] = {"value", "value_float", "value_floats", "value_int",
                                        "value_ints", "sparse_value", "value_string",
                                        "value_strings", NULL};
    fl_status st = init_common(n, known, 0, 0, e);
    if (st != FL_OK) return st;
    shape_state *s = n->state;
    if (n->n_attr != 1)
        return fl_fail(e, FL_ERR_FORMAT, "node '%s' (Constant): needs exactly one value attribute, "
                       "has %d", n->name, n->n_attr);
    const fl_attr *a = &n->attr[0];
    int64_t len = a->n;
    int dtype = 1;
    if (strcmp(a->name, "value") == 0 && a->type == FL_ATTR_TENSOR) {
        if (!dtype_is_numeric(a->t_dtype))
            return fl_fail(e, FL_ERR_UNSUPPORTED, "node '%s' (Constant): tensor of ONNX dtype %d "
                           "is not supported", n->name, a->t_dtype);
        if (a->t.size > 0 && !a->t.data)
            return fl_fail(e, FL_ERR_FORMAT, "node '%s' (Constant): value tensor has no data",
                           n->name);
        st = a->t.data ? fl_tensor_copy(&s->value, &a->t)
                       : fl_tensor_alloc(&s->value, a->t.ndim, a->t.shape);
        dtype = a->t_dtype;
    } else if (strcmp(a->name, "value_float") == 0 && a->type == FL_ATTR_FLOAT) {
        if ((st = fl_tensor_alloc(&s->value, 0, NULL)) == FL_OK) s->value.data[0] = a->f;
    } else if (strcmp(a->name, "value_int") == 0 && a->type == FL_ATTR_INT) {
        if ((st = fl_tensor_alloc(&s->value, 0, NULL)) == FL_OK) s->value.data[0] = (float)a->i;
        dtype = 7;
    } else if (strcmp(a->name, "value_floats") == 0 && a->type == FL_ATTR_FLOATS) {
        if ((st = fl_tensor_alloc(&s->value, 1, &len)) == FL_OK && len)
            memcpy(s->value.data, a->floats, (size_t)len * sizeof(float));
    } else if (strcmp(a->name, "value_ints") == 0 && a->type == FL_ATTR_INTS) {
        if ((st = fl_tensor_alloc(&s->value, 1, &len)) == FL_OK)
            for (int64_t i = 0; i < len; i++) s->value.data[i] = (float)a->ints[i];
        dtype = 7;
    } else {
        return fl_fail(e, FL_ERR_UNSUPPORTED, "node '%s' (Constant): attribute '%s' is not "
                       "supported (only numeric value, value_float(s), value_int(s))", n->name,
                       a->name);
    }
    if (st != FL_OK) return fl_fail(e, st, "node '%s' (Constant): cannot hold the value", n->name);
    m->values[n->out[0]].onnx_dtype = dtype;
    return FL_OK;
}
static fl_status constant_shape(fl_model *m, fl_node *n, fl_err *e) {
    const fl_tensor *v = &((shape_state *)n->state)->value;
    fl_node_set_out_shape(m, n, 0, v->ndim, v->shape);
    return FL_OK;
}
static void constant_forward(fl_model *m, fl_node *n) {
    const fl_tensor *v = &((shape_state *)n->state)->value;
    if (v->size) memcpy(fl_out(m, n, 0)->data, v->data, (size_t)v->size * sizeof(float));
}
static const fl_op op_constant = {"Constant", constant_init, constant_shape, constant_forward,
                                  NULL, shape_free};

/* ---- Cast ----------------------------------------------------------------------------------------
 * Values stay floats; the target dtype decides the rounding: float and double keep the value
 * (and pass gradients), the integer types truncate toward zero, bool maps non-zero to 1.
 * Narrow integers would also wrap around and float16/bfloat16 would round: flare does not
 * model those and rejects them rather than compute something subtly different. */
enum { DT_FLOAT = 1, DT_INT32 = 6, DT_INT64 = 7, DT_BOOL = 9, DT_DOUBLE = 11 };

static fl_status cast_init(fl_model *m, fl_node *n, fl_err *e) {
    /* saturate (opset 19) concerns float8 targets only, which are refused below */
    static const char *const known[] = {"to", "saturate", NULL};
    fl_status st = init_common(n, known, 1, 1, e);
    if (st != FL_OK) return st;
    const fl_attr *a = fl_node_attr(n, "to");
    if (!a || a->type != FL_ATTR_INT)
        return fl_fail(e, FL_ERR_FORMAT, "node '%s' (Cast): integer attribute 'to' is missing",
                       n->name);
    if (a->i != DT_FLOAT && a->i != DT_INT32 && a->i != DT_INT64 && a->i != DT_BOOL &&
        a->i != DT_DOUBLE)
        return fl_fail(e, FL_ERR_UNSUPPORTED, "node '%s' (Cast): target ONNX dtype %lld is not "
                       "supported (float, double, int32, int64, bool are)", n->name,
                       (long long)a->i);
    ((shape_state *)n->state)->to = (int)a->i;
    m->values[n->out[0]].onnx_dtype = (int)a->i;
    return FL_OK;
}
static fl_status cast_shape(fl_model *m, fl_node *n, fl_err *e) {
    const fl_tensor *x = fl_in(m, n, 0);
    fl_node_set_out_shape(m, n, 0, x->ndim, x->shape);
    return FL_OK;
}
static void cast_forward(fl_model *m, fl_node *n) {
    const fl_tensor *x = fl_in(m, n, 0);
    float *y = fl_out(m, n, 0)->data;
    switch (((shape_state *)n->state)->to) {
    case DT_INT32:
    case DT_INT64:
        for (int64_t i = 0; i < x->size; i++) y[i] = truncf(x->data[i]);
        break;
    case DT_BOOL:
        for (int64_t i = 0; i < x->size; i++) y[i] = x->data[i] != 0.0f;
        break;
    default:
        if (x->size) memcpy(y, x->data, (size_t)x->size * sizeof(float));
    }
}
/* Only float targets are differentiable; integer and bool casts are piecewise constant, so
 * their gradient is zero and nothing is added. */
static void cast_backward(fl_model *m, fl_node *n) {
    int to = ((shape_state *)n->state)->to;
    if (to == DT_FLOAT || to == DT_DOUBLE) copy_backward(m, n);
}
static const fl_op op_cast = {"Cast", cast_init, cast_shape, cast_forward, cast_backward,
                              shape_free};

const fl_op *const fl_ops_shape[] = {&op_flatten, &op_reshape, &op_squeeze, &op_unsqueeze,
                                     &op_shape, &op_size, &op_constant, &op_cast, NULL};
