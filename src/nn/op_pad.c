/* Pad: grow (or, with negative pads, crop) each dim, filling with a constant or with values
 * mirrored (reflect), repeated (edge) or wrapped around (wrap) from the input.
 *
 * ONNX has two spellings. Before opset 11 the pads and the fill value are attributes (`pads`,
 * `value`); from 11 they are inputs (`pads`, optional `constant_value`), and opset 18 adds an
 * optional `axes` input that says which dims the pads are for. The spellings cannot be
 * confused, so both are accepted whatever the opset, but not mixed. pads are
 * [x1_begin, x2_begin, ..., x1_end, x2_end, ...].
 *
 * Every output element reads one input element (or the fill), per dim independently: an
 * index map (imap.h). Backward scatters the gradient through the same map, so an input
 * element that reflect or edge copies several times receives the sum; the fill value, when
 * it is an input with a gradient, receives the sum over the padded positions. */
#include <string.h>

#include "flare/model.h"
#include "nn/imap.h"
#include "nn/ops.h"

enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP };
static const char *const mode_names[] = {"constant", "reflect", "edge", "wrap"};

typedef struct pad_state {
    int mode;
    int attr_form;                   /* pads (and value) are attributes: opset < 11 */
    int n_pads;
    int64_t pads[2 * FL_MAX_DIMS];   /* attribute form */
    float value;                     /* attribute form */
    fl_imap im;
} pad_state;

static void pad_free(fl_node *n) {
    pad_state *s = n->state;
    if (s) fl_imap_free(&s->im);
    fl_free(s);
}

static fl_status pad_init(fl_model *m, fl_node *n, fl_err *e) {
    static const char *const known[] = {"mode", "pads", "value", NULL};
    fl_status st = fl_node_check_arity(n, 1, 4, 1, 1, e);
    if (st == FL_OK) st = fl_node_check_attrs(n, known, e);
    if (st != FL_OK) return st;
    pad_state *s = fl_alloc(sizeof *s);
    if (!s) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    n->state = s;
    const fl_attr *mode = fl_node_attr(n, "mode"), *pads = fl_node_attr(n, "pads");
    if (mode) {
        s->mode = -1;
        for (int k = 0; k < 4 && mode->type == FL_ATTR_STRING; k++)
            if (strcmp(mode->s, mode_names[k]) == 0) s->mode = k;
        if (s->mode < 0)
            return fl_fail(e, FL_ERR_UNSUPPORTED, "node '%s' (Pad): mode '%s' is not supported "
                           "(constant, reflect, edge, wrap are)", n->name,
                           mode->type == FL_ATTR_STRING ? mode->s : "?");
    }
    s->attr_form = pads != NULL;
    if (s->attr_form) {
        if (n->n_in > 1)
            return fl_fail(e, FL_ERR_FORMAT, "node '%s' (Pad): pads given both as attribute and "
                           "input", n->name);
        if (pads->type != FL_ATTR_INTS || pads->n > 2 * FL_MAX_DIMS)
            return fl_fail(e, FL_ERR_FORMAT, "node '%s' (Pad): attribute 'pads' must be at most "
                           "%d ints", n->name, 2 * FL_MAX_DIMS);
        s->n_pads = pads->n;
        memcpy(s->pads, pads->ints, sizeof(int64_t) * (size_t)pads->n);
        s->value = fl_node_attr_float(n, "value", 0.0f);
    } else if (n->n_in < 2 || n->in[1] < 0) {
        return fl_fail(e, FL_ERR_FORMAT, "node '%s' (Pad): no pads (%s)", n->name,
                       m->opset >= 11 ? "input 1 is missing" : "attribute 'pads' is missing");
    } else if (fl_node_attr(n, "value")) {
        return fl_fail(e, FL_ERR_FORMAT, "node '%s' (Pad): attribute 'value' goes with attribute "
                       "'pads' (opset < 11); from opset 11 the value is input 2", n->name);
    }
    m->values[n->out[0]].onnx_dtype = m->values[n->in[0]].onnx_dtype;
    return FL_OK;
}

/* Input index along a dim of size len that output index o reads, with lo elements padded in
 * front; -1 for the fill. */
static int64_t source_index(int mode, int64_t o, int64_t lo, int64_t len) {
    int64_t i = o - lo;
    if (i >= 0 && i < len) return i;
    switch (mode) {
    case PAD_EDGE: return i < 0 ? 0 : len - 1;
    case PAD_WRAP: return ((i % len) + len) % len;
    case PAD_REFLECT: {
        if (len == 1) return 0;
        int64_t p = 2 * (len - 1); /* reflect without repeating the edge, as numpy does */
        i = ((i % p) + p) % p;
        return i < len ? i : p - i;
    }
    default: return -1;
    }
}

/* Per-dim (begin, end) pads of this node for an input of rank r. */
static fl_status get_pads(fl_model *m, fl_node *n, int r, int64_t *lo, int64_t *hi, fl_err *e) {
    pad_state *s = n->state;
    int64_t raw[2 * FL_MAX_DIMS], axes[FL_MAX_DIMS];
    int np = s->n_pads, na = r;
    fl_status st = FL_OK;
    if (s->attr_form) memcpy(raw, s->pads, sizeof raw);
    else st = fl_node_read_ints(n, fl_in(m, n, 1), "pads", 2 * FL_MAX_DIMS, raw, &np, e);
    if (st != FL_OK) return st;
    const fl_tensor *ta = fl_in(m, n, 3);
    if (ta) {
        st = fl_node_read_ints(n, ta, "axes", FL_MAX_DIMS, axes, &na, e);
        uint8_t seen[FL_MAX_DIMS];
        if (st == FL_OK) st = fl_node_mark_axes(n, axes, na, r, seen, e);
        if (st != FL_OK) return st;
    } else {
        for (int d = 0; d < r; d++) axes[d] = d;
    }
    if (np != 2 * na)
        return fl_fail(e, FL_ERR_SHAPE, "node '%s' (Pad): %d pads for %d %s, need %d", n->name, np,
                       na, ta ? "axes" : "dims", 2 * na);
    for (int d = 0; d < r; d++) lo[d] = hi[d] = 0;
    for (int k = 0; k < na; k++) {
        int d = fl_norm_axis(axes[k], r);
        lo[d] = raw[k];
        hi[d] = raw[na + k];
    }
    return FL_OK;
}

static fl_status pad_shape(fl_model *m, fl_node *n, fl_err *e) {
    pad_state *s = n->state;
    const fl_tensor *x = fl_in(m, n, 0), *cv = fl_in(m, n, 2);
    int64_t lo[FL_MAX_DIMS], hi[FL_MAX_DIMS], shp[FL_MAX_DIMS];
    char b[128];
    if (x->ndim == 0)
        return fl_fail(e, FL_ERR_SHAPE, "node '%s' (Pad): cannot pad a scalar", n->name);
    if (cv && cv->size != 1)
        return fl_fail(e, FL_ERR_SHAPE, "node '%s' (Pad): constant_value must be a scalar, has "
                       "shape %s", n->name, fl_shape_str(cv, b, sizeof b));
    fl_status st = get_pads(m, n, x->ndim, lo, hi, e);
    if (st != FL_OK) return st;
    for (int d = 0; d < x->ndim; d++) {
        shp[d] = x->shape[d] + lo[d] + hi[d];
        if (shp[d] < 0)
            return fl_fail(e, FL_ERR_SHAPE, "node '%s' (Pad): pads %lld, %lld remove more than "
                           "dim %d of %s", n->name, (long long)lo[d], (long long)hi[d], d,
                           fl_shape_str(x, b, sizeof b));
        if (s->mode != PAD_CONSTANT && x->shape[d] == 0 && shp[d] > 0)
            return fl_fail(e, FL_ERR_SHAPE, "node '%s' (Pad): mode %s cannot pad dim %d of %s, "
                           "which is empty", n->name, mode_names[s->mode], d,
                           fl_shape_str(x, b, sizeof b));
    }
    if ((st = fl_imap_plan(&s->im, x->ndim, shp, e)) != FL_OK) return st;
    for (int d = 0; d < x->ndim; d++)
        for (int64_t o = 0; o < shp[d]; o++)
            s->im.map[d][o] = source_index(s->mode, o, lo[d], x->shape[d]);
    fl_imap_finish(&s->im, x->shape);
    fl_node_set_out_shape(m, n, 0, x->ndim, shp);
    return FL_OK;
}

static float fill_value(fl_model *m, fl_node *n) {
    const fl_tensor *cv = fl_in(m, n, 2);
    return cv ? cv->data[0] : ((pad_state *)n->state)->value;
}

static void pad_forward(fl_model *m, fl_node *n) {
    pad_state *s = n->state;
    fl_imap_forward(&s->im, fl_in(m, n, 0)->data, fl_out(m, n, 0)->data, fill_value(m, n));
}

static void pad_backward(fl_model *m, fl_node *n) {
    pad_state *s = n->state;
    fl_tensor *dx = fl_gin(m, n, 0), *dv = fl_gin(m, n, 2);
    if (!dx && !dv) return;
    double g = fl_imap_backward(&s->im, fl_gout(m, n, 0)->data, dx ? dx->data : NULL);
    if (dv) dv->data[0] += (float)g;
}

static const fl_op op_pad = {"Pad", pad_init, pad_shape, pad_forward, pad_backward, pad_free};

const fl_op *const fl_ops_pad[] = {&op_pad, NULL};
