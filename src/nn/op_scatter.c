/* ScatterND(data, indices, updates): y = data with slices replaced (or added to).
 *
 * indices [..., k] addresses slices of data: each row of k integers selects
 * data[i_0, .., i_(k-1)], a slice of data.shape[k:] ("slice size" S elements), and the
 * matching entry of updates (shape indices.shape[:-1] + data.shape[k:]) is written there —
 * or added, with reduction = "add" (opset 16). Negative indices count from the end. They are
 * checked when planning; should they later change to something out of range, forward skips
 * that row (forward cannot fail).
 *
 * Gradients: with reduction "none" a slice written by the last of its updates takes that
 * update's gradient and passes none to data; the other elements of data take dy. With "add",
 * data and every update take dy. The reductions "mul", "max" and "min" are refused (their
 * gradients are not implemented). */
#include <math.h>
#include <string.h>

#include "flare/model.h"
#include "nn/ops.h"

typedef struct scatter_state {
    int add;
    int k;             /* index depth */
    int64_t rows, S;   /* number of index rows, slice size */
    int64_t dim[FL_MAX_DIMS], stride[FL_MAX_DIMS]; /* data dims 0..k-1, their slice strides */
    int64_t *target;   /* [rows]: slice offset in data, -1 when out of range; backward scratch */
    uint8_t *claimed;  /* [data size / S]: backward, "none": slice already taken */
    int64_t cap_rows, cap_slices;
} scatter_state;

static void scatter_free(fl_node *n) {
    scatter_state *s = n->state;
    if (s) fl_free(s->target), fl_free(s->claimed);
    fl_free(s);
}

static fl_status scatter_init(fl_model *m, fl_node *n, fl_err *e) {
    static const char *const known[] = {"reduction", NULL};
    fl_status st = fl_node_check_arity(n, 3, 3, 1, 1, e);
    if (st == FL_OK) st = fl_node_check_attrs(n, known, e);
    if (st != FL_OK) return st;
    for (int i = 0; i < 3; i++)
        if (n->in[i] < 0)
            return fl_fail(e, FL_ERR_FORMAT, "node '%s' (ScatterND): input %d is missing",
                           n->name, i);
    scatter_state *s = fl_alloc(sizeof *s);
    if (!s) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    n->state = s;
    const fl_attr *a = fl_node_attr(n, "reduction");
    if (a) {
        int none = a->type == FL_ATTR_STRING && a->s && strcmp(a->s, "none") == 0;
        s->add = a->type == FL_ATTR_STRING && a->s && strcmp(a->s, "add") == 0;
        if (!none && !s->add)
            return fl_fail(e, FL_ERR_UNSUPPORTED, "node '%s' (ScatterND): reduction '%s' is not "
                           "supported (none and add are)", n->name,
                           a->type == FL_ATTR_STRING && a->s ? a->s : "?");
    }
    m->values[n->out[0]].onnx_dtype = m->values[n->in[0]].onnx_dtype;
    return FL_OK;
}

/* Offset of index row q in data, or -1 when out of range / not an integer. */
static int64_t row_offset(const scatter_state *s, const float *idx) {
    int64_t off = 0;
    for (int j = 0; j < s->k; j++) {
        float v = idx[j];
        int64_t d = s->dim[j];
        if (!(v == floorf(v)) || v < (float)-d || v >= (float)d) return -1;
        int64_t i = (int64_t)v;
        off += (i < 0 ? i + d : i) * s->stride[j];
    }
    return off;
}

static fl_status scatter_shape(fl_model *m, fl_node *n, fl_err *e) {
    scatter_state *s = n->state;
    const fl_tensor *x = fl_in(m, n, 0), *idx = fl_in(m, n, 1), *up = fl_in(m, n, 2);
    char a[128], b[128], c[128];
    int64_t kk = idx->ndim > 0 ? idx->shape[idx->ndim - 1] : -1;
    int k = kk >= 1 && kk <= x->ndim ? (int)kk : -1;
    int ok = k >= 1 && up->ndim == idx->ndim - 1 + x->ndim - k;
    for (int d = 0; ok && d < idx->ndim - 1; d++) ok = up->shape[d] == idx->shape[d];
    for (int d = k; ok && d < x->ndim; d++) ok = up->shape[idx->ndim - 1 + d - k] == x->shape[d];
    if (!ok)
        return fl_fail(e, FL_ERR_SHAPE, "node '%s' (ScatterND): data %s, indices %s and updates "
                       "%s do not fit", n->name, fl_shape_str(x, a, sizeof a),
                       fl_shape_str(idx, b, sizeof b), fl_shape_str(up, c, sizeof c));
    s->k = k;
    s->S = fl_shape_size(x->ndim - k, x->shape + k);
    s->rows = fl_shape_size(idx->ndim - 1, idx->shape);
    for (int j = k - 1; j >= 0; j--) {
        s->dim[j] = x->shape[j];
        s->stride[j] = j == k - 1 ? s->S : s->stride[j + 1] * x->shape[j + 1];
    }
    if (s->rows > 0 && !idx->data)
        return fl_fail(e, FL_ERR_FORMAT, "node '%s' (ScatterND): indices have no value at "
                       "planning time", n->name);
    for (int64_t q = 0; q < s->rows; q++)
        if (row_offset(s, idx->data + q * k) < 0)
            return fl_fail(e, FL_ERR_ARG, "node '%s' (ScatterND): index row %lld is out of range "
                           "for data %s", n->name, (long long)q, fl_shape_str(x, a, sizeof a));
    int64_t slices = s->S ? x->size / s->S : 0;
    if (s->cap_rows < s->rows || !s->target) {
        fl_free(s->target);
        s->cap_rows = 0;
        if (!(s->target = fl_alloc(sizeof(int64_t) * (size_t)(s->rows ? s->rows : 1))))
            return fl_fail(e, FL_ERR_NOMEM, "out of memory");
        s->cap_rows = s->rows;
    }
    if (s->cap_slices < slices || !s->claimed) {
        fl_free(s->claimed);
        s->cap_slices = 0;
        if (!(s->claimed = fl_alloc((size_t)(slices ? slices : 1))))
            return fl_fail(e, FL_ERR_NOMEM, "out of memory");
        s->cap_slices = slices;
    }
    fl_node_set_out_shape(m, n, 0, x->ndim, x->shape);
    return FL_OK;
}

static void scatter_forward(fl_model *m, fl_node *n) {
    scatter_state *s = n->state;
    const fl_tensor *x = fl_in(m, n, 0);
    const float *idx = fl_in(m, n, 1)->data, *up = fl_in(m, n, 2)->data;
    float *y = fl_out(m, n, 0)->data;
    if (x->size) memcpy(y, x->data, sizeof(float) * (size_t)x->size);
    for (int64_t q = 0; q < s->rows; q++) {
        int64_t off = s->target[q] = row_offset(s, idx + q * s->k);
        if (off < 0) continue;
        const float *u = up + q * s->S;
        if (s->add)
            for (int64_t i = 0; i < s->S; i++) y[off + i] += u[i];
        else
            memcpy(y + off, u, sizeof(float) * (size_t)s->S);
    }
}

static void scatter_backward(fl_model *m, fl_node *n) {
    scatter_state *s = n->state;
    fl_tensor *dx = fl_gin(m, n, 0), *du = fl_gin(m, n, 2);
    const float *dy = fl_gout(m, n, 0)->data;
    int64_t size = fl_out(m, n, 0)->size;
    if (s->S == 0) return;
    if (!s->add) memset(s->claimed, 0, (size_t)(size / s->S));
    /* last update first: under "none" it is the one whose value y holds */
    for (int64_t q = s->rows - 1; q >= 0; q--) {
        int64_t off = s->target[q];
        if (off < 0) continue;
        if (!s->add) {
            if (s->claimed[off / s->S]) continue;
            s->claimed[off / s->S] = 1;
        }
        if (du)
            for (int64_t i = 0; i < s->S; i++) du->data[q * s->S + i] += dy[off + i];
    }
    if (!dx) return;
    for (int64_t j = 0; j < size; j++)
        if (s->add || !s->claimed[j / s->S]) dx->data[j] += dy[j];
}

static const fl_op op_scatternd = {"ScatterND", scatter_init, scatter_shape, scatter_forward,
                                   scatter_backward, scatter_free};

const fl_op *const fl_ops_scatter[] = {&op_scatternd, NULL};
