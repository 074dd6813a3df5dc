/* Helpers the op implementations share: numpy broadcast shapes, axis normalisation, integer
 * inputs (shapes, axes, pads) read at planning time and the size of shapes built from them,
 * and marking which axes an op names. */
#include <math.h>
#include <string.h>

#include "flare/model.h"
#include "nn/ops.h"

int fl_norm_axis(int64_t axis, int rank) {
    if (axis < -rank || axis >= rank) return -1;
    return (int)(axis < 0 ? axis + rank : axis);
}

int fl_broadcast_shape(int64_t *out, int *rank, int ndim, const int64_t *shape) {
    if (ndim > *rank) {
        int grow = ndim - *rank;
        memmove(out + grow, out, sizeof(int64_t) * (size_t)*rank);
        for (int d = 0; d < grow; d++) out[d] = 1;
        *rank = ndim;
    }
    for (int d = 0; d < ndim; d++) {
        int64_t v = shape[d], *y = &out[*rank - ndim + d];
        if (v != 1 && *y != 1 && v != *y) return 0;
        if (v != 1) *y = v;
    }
    return 1;
}

fl_status fl_node_check_size(const fl_node *n, int ndim, const int64_t *shape, fl_err *e) {
    int64_t size = 1;
    for (int d = 0; d < ndim; d++)
        if (__builtin_mul_overflow(size, shape[d], &size) || size > ((int64_t)1 << 40))
            return fl_fail(e, FL_ERR_SHAPE, "node '%s' (%s): the output would have more than 2^40 "
                           "elements", n->name, n->op->name);
    return FL_OK;
}

/* saturate: values beyond +-2^24 become +-2^62 instead of failing (Slice's "to the end"
 * INT64_MAX, which the float store holds only approximately). */
static fl_status read_ints(const fl_node *n, const fl_tensor *t, const char *what, int max,
                           int saturate, int64_t *out, int *count, fl_err *e) {
    if (t->ndim > 1)
        return fl_fail(e, FL_ERR_SHAPE, "node '%s' (%s): %s must be 1-D, has %d dims", n->name,
                       n->op->name, what, t->ndim);
    if (t->size > max)
        return fl_fail(e, FL_ERR_UNSUPPORTED, "node '%s' (%s): %s has %lld entries, at most %d",
                       n->name, n->op->name, what, (long long)t->size, max);
    if (t->size > 0 && !t->data)
        return fl_fail(e, FL_ERR_FORMAT, "node '%s' (%s): %s has no value at planning time",
                       n->name, n->op->name, what);
    for (int64_t i = 0; i < t->size; i++) {
        float v = t->data[i];
        if (saturate && isfinite(v) && fabsf(v) > 16777216.0f) {
            out[i] = v > 0 ? (int64_t)1 << 62 : -((int64_t)1 << 62);
            continue;
        }
        if (!isfinite(v) || v != floorf(v) || fabsf(v) > 16777216.0f)
            return fl_fail(e, FL_ERR_FORMAT, "node '%s' (%s): %s[%lld] = %g is not an integer",
                           n->name, n->op->name, what, (long long)i, (double)v);
        out[i] = (int64_t)v;
    }
    *count = (int)t->size;
    return FL_OK;
}

fl_status fl_node_read_ints(const fl_node *n, const fl_tensor *t, const char *what, int max,
                            int64_t *out, int *count, fl_err *e) {
    return read_ints(n, t, what, max, 0, out, count, e);
}

fl_status fl_node_read_index_ints(const fl_node *n, const fl_tensor *t, const char *what, int max,
                                  int64_t *out, int *count, fl_err *e) {
    return read_ints(n, t, what, max, 1, out, count, e);
}

fl_status fl_node_mark_axes(const fl_node *n, const int64_t *axes, int count, int rank,
                            uint8_t *flags, fl_err *e) {
    memset(flags, 0, FL_MAX_DIMS);
    for (int i = 0; i < count; i++) {
        int a = fl_norm_axis(axes[i], rank);
        if (a < 0)
            return fl_fail(e, FL_ERR_ARG, "node '%s' (%s): axis %lld out of range for rank %d",
                           n->name, n->op->name, (long long)axes[i], rank);
        if (flags[a])
            return fl_fail(e, FL_ERR_ARG, "node '%s' (%s): axis %lld given twice", n->name,
                           n->op->name, (long long)axes[i]);
        flags[a] = 1;
    }
    return FL_OK;
}
