/* Layout ops that move elements: Transpose, Concat, Gather. Each backward is the adjoint of
 * its forward: Transpose permutes back, Concat splits, Gather scatter-adds. */
#include <math.h>
#include <string.h>

#include "flare/model.h"
#include "nn/ops.h"

typedef struct layout_state {
    int64_t axis;                /* Concat, Gather */
    int has_perm, n_perm;        /* Transpose */
    int64_t perm[FL_MAX_DIMS];
    int a;                       /* planned: the normalised axis / perm of the planned shapes */
    int p[FL_MAX_DIMS];
} layout_state;

static fl_status init_common(fl_model *m, fl_node *n, const char *const *known, int min_in,
                             int max_in, fl_err *e) {
    fl_status st = fl_node_check_arity(n, min_in, max_in, 1, 1, e);
    if (st == FL_OK) st = fl_node_check_attrs(n, known, e);
    if (st != FL_OK) return st;
    if (!(n->state = fl_alloc(sizeof(layout_state))))
        return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    /* the output keeps the ONNX dtype of the (first) data input, e.g. int64 for shapes */
    m->values[n->out[0]].onnx_dtype = m->values[n->in[0]].onnx_dtype;
    return FL_OK;
}

static fl_status bad_axis(const fl_node *n, int64_t axis, int rank, fl_err *e) {
    return fl_fail(e, FL_ERR_ARG, "node '%s' (%s): axis %lld out of range for rank %d", n->name,
                   n->op->name, (long long)axis, rank);
}

/* ---- Transpose: y[i_0..i_{r-1}] = x[j] with j_{perm[d]} = i_d -------------------------------- */
static fl_status transpose_init(fl_model *m, fl_node *n, fl_err *e) {
    static const char *const known[] = {"perm", NULL};
    fl_status st = init_common(m, n, known, 1, 1, e);
    if (st != FL_OK) return st;
    layout_state *s = n->state;
    const fl_attr *a = fl_node_attr(n, "perm");
    if (!a) return FL_OK;
    if (a->type != FL_ATTR_INTS || a->n > FL_MAX_DIMS)
        return fl_fail(e, FL_ERR_FORMAT, "node '%s' (Transpose): 'perm' must be at most %d ints",
                       n->name, FL_MAX_DIMS);
    s->has_perm = 1;
    s->n_perm = a->n;
    memcpy(s->perm, a->ints, (size_t)a->n * sizeof(int64_t));
    return FL_OK;
}
static fl_status transpose_shape(fl_model *m, fl_node *n, fl_err *e) {
    layout_state *s = n->state;
    const fl_tensor *x = fl_in(m, n, 0);
    int r = x->ndim, seen[FL_MAX_DIMS] = {0};
    int64_t shp[FL_MAX_DIMS];
    if (s->has_perm && s->n_perm != r)
        return fl_fail(e, FL_ERR_SHAPE, "node '%s' (Transpose): perm has %d entries, input has "
                       "%d dims", n->name, s->n_perm, r);
    for (int d = 0; d < r; d++) {
        int64_t p = s->has_perm ? s->perm[d] : r - 1 - d; /* default: reverse the dims */
        if (p < 0 || p >= r || seen[p])
            return fl_fail(e, FL_ERR_ARG, "node '%s' (Transpose): perm is not a permutation of "
                           "0..%d (entry %d is %lld)", n->name, r - 1, d, (long long)p);
        seen[p] = 1;
        s->p[d] = (int)p;
        shp[d] = x->shape[p];
    }
    fl_node_set_out_shape(m, n, 0, r, shp);
    return FL_OK;
}

/* Walk y in row-major order with an odometer over its dims, tracking the offset of the
 * matching x element (x's strides, permuted). Forward: y[j] = x[off]; adjoint (back = 1):
 * x[off] += y[j], with x the input gradient and y the output gradient. */
static void transpose_walk(const fl_tensor *x, const fl_tensor *y, const int *perm, float *xd,
                           float *yd, int back) {
    int r = y->ndim;
    int64_t xstride[FL_MAX_DIMS], st[FL_MAX_DIMS], idx[FL_MAX_DIMS] = {0};
    if (y->size == 0) return;
    if (r == 0) {
        if (back) xd[0] += yd[0];
        else yd[0] = xd[0];
        return;
    }
    int64_t s = 1;
    for (int d = r - 1; d >= 0; d--) {
        xstride[d] = s;
        s *= x->shape[d];
    }
    for (int d = 0; d < r; d++) st[d] = xstride[perm[d]];
    int64_t inner = y->shape[r - 1], step = st[r - 1], off = 0;
    for (int64_t j = 0; j < y->size; j += inner) {
        if (back)
            for (int64_t k = 0; k < inner; k++) xd[off + k * step] += yd[j + k];
        else
            for (int64_t k = 0; k < inner; k++) yd[j + k] = xd[off + k * step];
        /* advance the odometer over dims r-2 .. 0 */
        for (int d = r - 2; d >= 0; d--) {
            off += st[d];
            if (++idx[d] < y->shape[d]) break;
            off -= st[d] * y->shape[d];
            idx[d] = 0;
        }
    }
}
static void transpose_forward(fl_model *m, fl_node *n) {
    fl_tensor *x = fl_in(m, n, 0), *y = fl_out(m, n, 0);
    transpose_walk(x, y, ((layout_state *)n->state)->p, x->data, y->data, 0);
}
static void transpose_backward(fl_model *m, fl_node *n) {
    fl_tensor *dx = fl_gin(m, n, 0);
    if (!dx) return;
    transpose_walk(dx, fl_out(m, n, 0), ((layout_state *)n->state)->p, dx->data,
                   fl_gout(m, n, 0)->data, 1);
}
static const fl_op op_transpose = {"Transpose", transpose_init, transpose_shape,
                                   transpose_forward, transpose_backward, NULL};

/* ---- Concat: y[outer, sum_k n_k * inner] = [x_0[outer, n_0*inner] | x_1[...] | ...] ---------- */
static fl_status concat_init(fl_model *m, fl_node *n, fl_err *e) {
    static const char *const known[] = {"axis", NULL};
    fl_status st = init_common(m, n, known, 1, 1 << 20, e);
    if (st != FL_OK) return st;
    const fl_attr *a = fl_node_attr(n, "axis");
    if (!a || a->type != FL_ATTR_INT)
        return fl_fail(e, FL_ERR_FORMAT, "node '%s' (Concat): integer attribute 'axis' is missing",
                       n->name);
    if ((st = fl_node_check_present(n, n->n_in, e)) != FL_OK) return st;
    ((layout_state *)n->state)->axis = a->i;
    return FL_OK;
}
static fl_status concat_shape(fl_model *m, fl_node *n, fl_err *e) {
    layout_state *s = n->state;
    const fl_tensor *x0 = fl_in(m, n, 0);
    int r = x0->ndim, a = fl_norm_axis(s->axis, r);
    char b0[128], b1[128];
    if (a < 0) return bad_axis(n, s->axis, r, e);
    int64_t shp[FL_MAX_DIMS];
    memcpy(shp, x0->shape, sizeof shp);
    shp[a] = 0;
    for (int i = 0; i < n->n_in; i++) {
        const fl_tensor *x = fl_in(m, n, i);
        int ok = x->ndim == r;
        for (int d = 0; d < r && ok; d++) ok = d == a || x->shape[d] == x0->shape[d];
        if (!ok)
            return fl_fail(e, FL_ERR_SHAPE, "node '%s' (Concat): input %d has shape %s, input 0 "
                           "has %s (only dim %d may differ)", n->name, i,
                           fl_shape_str(x, b1, sizeof b1), fl_shape_str(x0, b0, sizeof b0), a);
        shp[a] += x->shape[a];
    }
    s->a = a;
    fl_node_set_out_shape(m, n, 0, r, shp);
    return FL_OK;
}

/* Copy each input's [outer, chunk] block into / out of its column range of y [outer, total].
 * back = 0: y <- x_i; back = 1: dx_i += dy. */
static void concat_walk(fl_model *m, fl_node *n, int back) {
    const fl_tensor *y = fl_out(m, n, 0);
    int a = ((layout_state *)n->state)->a;
    int64_t outer = fl_shape_size(a, y->shape), total = y->size / (outer ? outer : 1), col = 0;
    if (y->size == 0) return;
    for (int i = 0; i < n->n_in; i++) {
        const fl_tensor *x = fl_in(m, n, i);
        int64_t chunk = x->size / outer;
        fl_tensor *dx = back ? fl_gin(m, n, i) : NULL;
        if (!back) {
            for (int64_t o = 0; o < outer && chunk; o++)
                memcpy(y->data + o * total + col, x->data + o * chunk,
                       (size_t)chunk * sizeof(float));
        } else if (dx) {
            const float *dy = fl_gout(m, n, 0)->data;
            for (int64_t o = 0; o < outer; o++)
                for (int64_t k = 0; k < chunk; k++) dx->data[o * chunk + k] += dy[o * total + col + k];
        }
        col += chunk;
    }
}
static void concat_forward(fl_model *m, fl_node *n) { concat_walk(m, n, 0); }
static void concat_backward(fl_model *m, fl_node *n) { concat_walk(m, n, 1); }
static const fl_op op_concat = {"Concat", concat_init, concat_shape, concat_forward,
                                concat_backward, NULL};

/* ---- Gather: y[outer, q, inner] = x[outer, idx[q], inner] ----------------------------------------
 * y's shape is x.shape[:axis] + indices.shape + x.shape[axis+1:]. Indices (floats holding
 * integers) may be negative, counting from the end. They are checked when planning; should
 * they change later to something out of range, forward writes zeros there instead of reading
 * outside x (forward cannot fail). */
static fl_status gather_init(fl_model *m, fl_node *n, fl_err *e) {
    static const char *const known[] = {"axis", NULL};
    fl_status st = init_common(m, n, known, 2, 2, e);
    if (st == FL_OK) ((layout_state *)n->state)->axis = fl_node_attr_int(n, "axis", 0);
    return st;
}

/* Index q of the gather as a position in [0, dim), or -1 when invalid. */
static int64_t gather_index(float v, int64_t dim) {
    if (!(v == floorf(v)) || v < (float)-dim || v >= (float)dim) return -1;
    int64_t k = (int64_t)v;
    return k < 0 ? k + dim : k;
}

static fl_status gather_shape(fl_model *m, fl_node *n, fl_err *e) {
    layout_state *s = n->state;
    const fl_tensor *x = fl_in(m, n, 0), *idx = fl_in(m, n, 1);
    int r = x->ndim, a = fl_norm_axis(s->axis, r);
    char b[128];
    if (a < 0) return bad_axis(n, s->axis, r, e);
    if (r - 1 + idx->ndim > FL_MAX_DIMS)
        return fl_fail(e, FL_ERR_UNSUPPORTED, "node '%s' (Gather): output would have %d dims, at "
                       "most %d", n->name, r - 1 + idx->ndim, FL_MAX_DIMS);
    if (idx->size > 0 && !idx->data)
        return fl_fail(e, FL_ERR_FORMAT, "node '%s' (Gather): indices have no value at planning "
                       "time", n->name);
    for (int64_t q = 0; q < idx->size; q++)
        if (gather_index(idx->data[q], x->shape[a]) < 0)
            return fl_fail(e, FL_ERR_ARG, "node '%s' (Gather): index %g (at %lld) out of range "
                           "for dim %d of %s", n->name, (double)idx->data[q], (long long)q, a,
                           fl_shape_str(x, b, sizeof b));
    int64_t shp[FL_MAX_DIMS];
    int nd = 0;
    for (int d = 0; d < a; d++) shp[nd++] = x->shape[d];
    for (int d = 0; d < idx->ndim; d++) shp[nd++] = idx->shape[d];
    for (int d = a + 1; d < r; d++) shp[nd++] = x->shape[d];
    s->a = a;
    fl_node_set_out_shape(m, n, 0, nd, shp);
    return FL_OK;
}

/* back = 0: y <- x rows; back = 1: dx rows += dy (scatter-add: repeated indices add up). */
static void gather_walk(fl_model *m, fl_node *n, float *xd, float *yd, int back) {
    const fl_tensor *x = fl_in(m, n, 0), *idx = fl_in(m, n, 1);
    int a = ((layout_state *)n->state)->a;
    int64_t outer = fl_shape_size(a, x->shape), dim = x->shape[a], nq = idx->size;
    int64_t inner = fl_shape_size(x->ndim - a - 1, x->shape + a + 1);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t q = 0; q < nq; q++) {
            int64_t k = gather_index(idx->data[q], dim);
            float *yrow = yd + (o * nq + q) * inner;
            float *xrow = xd + (o * dim + (k < 0 ? 0 : k)) * inner;
            if (back) {
                if (k >= 0)
                    for (int64_t i = 0; i < inner; i++) xrow[i] += yrow[i];
            } else if (k < 0) {
                memset(yrow, 0, (size_t)inner * sizeof(float));
            } else {
                memcpy(yrow, xrow, (size_t)inner * sizeof(float));
            }
        }
}
static void gather_forward(fl_model *m, fl_node *n) {
    gather_walk(m, n, fl_in(m, n, 0)->data, fl_out(m, n, 0)->data, 0);
}
static void gather_backward(fl_model *m, fl_node *n) {
    fl_tensor *dx = fl_gin(m, n, 0);
    if (dx) gather_walk(m, n, dx->data, fl_gout(m, n, 0)->data, 1);
}
static const fl_op op_gather = {"Gather", gather_init, gather_shape, gather_forward,
                                gather_backward, NULL};

const fl_op *const fl_ops_layout[] = {&op_transpose, &op_concat, &op_gather, NULL};
