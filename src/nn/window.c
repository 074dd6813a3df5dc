/* The 2-D window attributes of Conv, ConvTranspose and the pools (kernel_shape, strides,
 * dilations, pads, auto_pad), and the output size they give. */
#include <limits.h>
#include <string.h>

#include "flare/model.h"
#include "nn/op_conv.h"

/* ---- window attributes ------------------------------------------------------------------------ */
fl_status fl_window_ints(const fl_node *n, const char *name, int want, int64_t min,
                        int64_t *dst, fl_err *e) {
    const fl_attr *a = fl_node_attr(n, name);
    if (!a) return FL_OK;
    if (a->type != FL_ATTR_INTS)
        return fl_fail(e, FL_ERR_FORMAT, "node '%s' (%s): attribute '%s' must be a list of ints",
                       n->name, n->op->name, name);
    if (a->n != want)
        return fl_fail(e, FL_ERR_UNSUPPORTED,
                       "node '%s' (%s): only 2-D supported ('%s' has %d entries, expected %d)",
                       n->name, n->op->name, name, a->n, want);
    for (int i = 0; i < want; i++) {
        if (a->ints[i] < min || a->ints[i] > INT_MAX / 4)
            return fl_fail(e, FL_ERR_FORMAT, "node '%s' (%s): %s[%d] = %lld is out of range",
                           n->name, n->op->name, name, i, (long long)a->ints[i]);
        dst[i] = a->ints[i];
    }
    return FL_OK;
}

fl_status fl_window_parse(const fl_node *n, fl_window *w, fl_err *e) {
    memset(w, 0, sizeof *w);
    w->stride[0] = w->stride[1] = w->dil[0] = w->dil[1] = 1;
    w->has_kernel = fl_node_attr(n, "kernel_shape") != NULL;
    fl_status st = fl_window_ints(n, "kernel_shape", 2, 1, w->kernel, e);
    if (st == FL_OK) st = fl_window_ints(n, "strides", 2, 1, w->stride, e);
    if (st == FL_OK) st = fl_window_ints(n, "dilations", 2, 1, w->dil, e);
    if (st == FL_OK) st = fl_window_ints(n, "pads", 4, 0, w->pads, e);
    if (st != FL_OK) return st;
    const fl_attr *a = fl_node_attr(n, "auto_pad");
    if (!a) return FL_OK;
    static const char *const names[] = {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"};
    for (int i = 0; i < 4; i++)
        if (a->type == FL_ATTR_STRING && a->s && strcmp(a->s, names[i]) == 0) {
            w->auto_pad = (fl_auto_pad)i;
            return FL_OK;
        }
    return fl_fail(e, FL_ERR_FORMAT, "node '%s' (%s): bad auto_pad '%s'", n->name, n->op->name,
                   a->type == FL_ATTR_STRING && a->s ? a->s : "(not a string)");
}

fl_status fl_check_4d(const fl_node *n, const fl_tensor *x, const char *what, fl_err *e) {
    if (x->ndim == 4) return FL_OK;
    char buf[128];
    return fl_fail(e, x->ndim == 3 || x->ndim == 5 ? FL_ERR_UNSUPPORTED : FL_ERR_SHAPE,
                   "node '%s' (%s): only 2-D supported: %s has shape %s, expected [N,C,H,W]",
                   n->name, n->op->name, what, fl_shape_str(x, buf, sizeof buf));
}

fl_status fl_window_out(const fl_node *n, const fl_window *w, int axis, int64_t in, int64_t k,
                        int ceil_mode, int64_t *out, int64_t *pad_begin, int64_t *pad_end,
                        fl_err *e) {
    int64_t s = w->stride[axis], dk = (k - 1) * w->dil[axis] + 1, o = 0, pb = 0, pe = 0;
    if (w->auto_pad == FL_PAD_SAME_UPPER || w->auto_pad == FL_PAD_SAME_LOWER) {
        /* SAME: out = ceil(in / stride); the odd pad goes to the end (UPPER) or begin (LOWER) */
        o = (in + s - 1) / s;
        int64_t total = (o - 1) * s + dk - in;
        if (total < 0) total = 0;
        pb = w->auto_pad == FL_PAD_SAME_UPPER ? total / 2 : total - total / 2;
        pe = total - pb;
    } else {
        if (w->auto_pad == FL_PAD_NOTSET) {
            pb = w->pads[axis];
            pe = w->pads[axis + 2];
        }
        int64_t span = in + pb + pe - dk;
        if (span >= 0) {
            o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
            /* ceil_mode may add a window that starts in the end padding: PyTorch drops it */
            if (ceil_mode && (o - 1) * s >= in + pb) o--;
        }
    }
    if (o <= 0 || o > INT_MAX / 4)
        return fl_fail(e, FL_ERR_SHAPE,
                       "node '%s' (%s): %s size %lld is too small for a window of %lld (with "
                       "dilation) and pads %lld+%lld",
                       n->name, n->op->name, axis ? "width" : "height", (long long)in,
                       (long long)dk, (long long)pb, (long long)pe);
    *out = o;
    *pad_begin = pb;
    *pad_end = pe;
    return FL_OK;
}
