/* Resize and Upsample: nearest, linear and cubic interpolation of any rank.
 *
 * All three modes are separable: an output element is a product, over the dims, of 1-D
 * weights. So the op runs as one 1-D pass per dim whose size or scale changes, each pass
 * reading the previous one's output; dim d's pass maps an [outer, in_d, inner] tensor to
 * [outer, out_d, inner] with a table of taps (input index, weight) per output index —
 * 1 tap for nearest, 2 for linear, 4 for cubic. Backward runs the passes in reverse and
 * scatters through the same taps (the transpose), which is the exact gradient with respect
 * to X for every mode (scales and sizes have none).
 *
 * The taps follow ONNX's reference (onnx/backend/test/case/node/resize.py): an output index
 * x maps to the input coordinate x_orig by coordinate_transformation_mode, with scale the
 * given scale (or out / in when sizes are given); linear and cubic read the neighbours of
 * floor(x_orig) with the edge repeated; exclude_outside drops the taps outside the input and
 * renormalises. Nearest rounds by nearest_mode. Resize before opset 11 and Upsample have no
 * such attributes: coordinates are asymmetric (x / scale) and nearest takes floor when
 * upsampling and ceil when downsampling, as onnxruntime does for them.
 *
 * Not supported, refused naming the node: tf_crop_and_resize (it needs roi and an
 * extrapolation value outside it), antialias, keep_aspect_ratio_policy other than stretch. */
#include <math.h>
#include <string.h>

#include "flare/model.h"
#include "nn/ops.h"

enum { M_NEAREST, M_LINEAR, M_CUBIC };
enum { C_HALF_PIXEL, C_PYTORCH_HALF_PIXEL, C_ALIGN_CORNERS, C_ASYMMETRIC, C_TF_HALF_PIXEL_FOR_NN,
       C_HALF_PIXEL_SYMMETRIC };
enum { N_ROUND_PREFER_FLOOR, N_ROUND_PREFER_CEIL, N_FLOOR, N_CEIL, N_SIMPLE };

typedef struct pass {
    int axis, taps;
    int64_t in, out, outer, inner;
    int64_t *idx; /* [out * taps] */
    float *w;     /* [out * taps] */
} pass;

typedef struct resize_state {
    int mode, coord, nearest, exclude_outside;
    float cubic_a;
    int legacy;         /* Upsample, Resize-10: scales only, asymmetric, simple nearest */
    int scales_input;   /* input index of scales (-1: Upsample-7's attribute) */
    int n_axes;         /* opset 18 axes (0: all dims) */
    int64_t axes[FL_MAX_DIMS];
    float attr_scales[FL_MAX_DIMS];
    int n_attr_scales;
    int n_pass;
    pass p[FL_MAX_DIMS];
    float *buf;         /* [2 * cap]: the pass outputs but the last, then their gradients */
    int64_t cap;
    void *tables;       /* every pass's idx and w, one block */
    int64_t tables_cap;
} resize_state;

static void resize_free(fl_node *n) {
    resize_state *s = n->state;
    if (s) fl_free(s->buf), fl_free(s->tables);
    fl_free(s);
}

static int pick(const char *v, const char *const *names) {
    for (int k = 0; names[k]; k++)
        if (strcmp(v, names[k]) == 0) return k;
    return -1;
}

/* Read string attribute `name` as an index into names (dflt when absent). */
static fl_status str_attr(const fl_node *n, const char *name, const char *const *names, int dflt,
                          int *out, fl_err *e) {
    const fl_attr *a = fl_node_attr(n, name);
    *out = dflt;
    if (!a) return FL_OK;
    int k = a->type == FL_ATTR_STRING && a->s ? pick(a->s, names) : -1;
    if (k < 0)
        return fl_fail(e, FL_ERR_UNSUPPORTED, "node '%s' (%s): %s '%s' is not supported", n->name,
                       n->op->name, name, a->type == FL_ATTR_STRING && a->s ? a->s : "?");
    *out = k;
    return FL_OK;
}

static fl_status resize_init(fl_model *m, fl_node *n, fl_err *e) {
    static const char *const known_up[] = {"mode", "scales", NULL};
    static const char *const known_10[] = {"mode", NULL};
    static const char *const known[] = {"mode", "coordinate_transformation_mode", "cubic_coeff_a",
                                        "exclude_outside", "extrapolation_value", "nearest_mode",
                                        "antialias", "axes", "keep_aspect_ratio_policy", NULL};
    static const char *const modes[] = {"nearest", "linear", "cubic", NULL};
    static const char *const coords[] = {"half_pixel", "pytorch_half_pixel", "align_corners",
                                         "asymmetric", "tf_half_pixel_for_nn",
                                         "half_pixel_symmetric", NULL};
    static const char *const nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                           "ceil", NULL};
    int upsample = strcmp(n->op->name, "Upsample") == 0;
    int legacy = upsample || m->opset < 11;
    int min_in = upsample && m->opset < 9 ? 1 : 2, max_in = legacy ? min_in : 4;
    if (m->opset >= 13 && !legacy) min_in = 1;
    fl_status st = fl_node_check_arity(n, min_in, max_in, 1, 1, e);
    const char *const *attrs = upsample ? known_up : legacy ? known_10 : known;
    if (st == FL_OK) st = fl_node_check_attrs(n, attrs, e);
    if (st != FL_OK) return st;
    resize_state *s = fl_alloc(sizeof *s);
    if (!s) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    n->state = s;
    s->legacy = legacy;
    s->scales_input = upsample && m->opset < 9 ? -1 : legacy ? 1 : 2;
    s->cubic_a = fl_node_attr_float(n, "cubic_coeff_a", -0.75f);
    s->exclude_outside = fl_node_attr_int(n, "exclude_outside", 0) != 0;
    s->nearest = N_SIMPLE;
    s->coord = C_ASYMMETRIC;
    if ((st = str_attr(n, "mode", modes, M_NEAREST, &s->mode, e)) != FL_OK) return st;
    if (legacy && s->mode == M_CUBIC)
        return fl_fail(e, FL_ERR_UNSUPPORTED, "node '%s' (%s): mode 'cubic' needs Resize at "
                       "opset 11 or later", n->name, n->op->name);
    if (!legacy) {
        const fl_attr *a = fl_node_attr(n, "coordinate_transformation_mode");
        if (a && a->type == FL_ATTR_STRING && a->s && strcmp(a->s, "tf_crop_and_resize") == 0)
            return fl_fail(e, FL_ERR_UNSUPPORTED, "node '%s' (Resize): coordinate_transformation_"
                           "mode 'tf_crop_and_resize' is not supported", n->name);
        if ((st = str_attr(n, "coordinate_transformation_mode", coords, C_HALF_PIXEL, &s->coord,
                           e)) != FL_OK ||
            (st = str_attr(n, "nearest_mode", nearests, N_ROUND_PREFER_FLOOR, &s->nearest, e)) !=
                FL_OK)
            return st;
        if (fl_node_attr_int(n, "antialias", 0) != 0)
            return fl_fail(e, FL_ERR_UNSUPPORTED, "node '%s' (Resize): antialias is not supported",
                           n->name);
        const fl_attr *k = fl_node_attr(n, "keep_aspect_ratio_policy");
        if (k && (k->type != FL_ATTR_STRING || !k->s || strcmp(k->s, "stretch") != 0))
            return fl_fail(e, FL_ERR_UNSUPPORTED, "node '%s' (Resize): keep_aspect_ratio_policy "
                           "'%s' is not supported (stretch is)", n->name,
                           k->type == FL_ATTR_STRING && k->s ? k->s : "?");
        const fl_attr *ax = fl_node_attr(n, "axes");
        if (ax) {
            if (ax->type != FL_ATTR_INTS || ax->n > FL_MAX_DIMS)
                return fl_fail(e, FL_ERR_FORMAT, "node '%s' (Resize): axes must be at most %d "
                               "integers", n->name, FL_MAX_DIMS);
            s->n_axes = ax->n;
            memcpy(s->axes, ax->ints, sizeof(int64_t) * (size_t)ax->n);
        }
    }
    if (s->scales_input < 0) {
        const fl_attr *a = fl_node_attr(n, "scales");
        if (!a || a->type != FL_ATTR_FLOATS || a->n > FL_MAX_DIMS)
            return fl_fail(e, FL_ERR_FORMAT, "node '%s' (Upsample): needs the float attribute "
                           "scales (at most %d)", n->name, FL_MAX_DIMS);
        s->n_attr_scales = a->n;
        memcpy(s->attr_scales, a->floats, sizeof(float) * (size_t)a->n);
    }
    m->values[n->out[0]].onnx_dtype = m->values[n->in[0]].onnx_dtype;
    return FL_OK;
}

/* Input coordinate of output index x along a dim: in, out sizes, scale. */
static double coord(const resize_state *s, double x, double scale, int64_t in, int64_t out) {
    switch (s->coord) {
    case C_HALF_PIXEL: return (x + 0.5) / scale - 0.5;
    case C_PYTORCH_HALF_PIXEL: return out > 1 ? (x + 0.5) / scale - 0.5 : 0;
    case C_ALIGN_CORNERS: { /* the reference's output length is scale * in, not out */
        double len = scale * (double)in;
        return len == 1 ? 0 : x * (double)(in - 1) / (len - 1);
    }
    case C_TF_HALF_PIXEL_FOR_NN: return (x + 0.5) / scale;
    case C_HALF_PIXEL_SYMMETRIC: {
        double adj = (double)out / (scale * (double)in), center = (double)in / 2;
        return center * (1 - adj) + (x + 0.5) / scale - 0.5;
    }
    default: return x / scale;
    }
}

static int64_t clampi(int64_t v, int64_t n) { return v < 0 ? 0 : v >= n ? n - 1 : v; }

/* Fill the taps of one pass. */
static void make_taps(const resize_state *s, pass *p, double scale) {
    for (int64_t x = 0; x < p->out; x++) {
        double xo = coord(s, (double)x, scale, p->in, p->out), f = floor(xo), r = xo - f;
        int64_t *idx = p->idx + x * p->taps, base = (int64_t)f;
        float *w = p->w + x * p->taps;
        if (s->mode == M_NEAREST) {
            int64_t k;
            switch (s->nearest) {
            case N_ROUND_PREFER_FLOOR: k = r <= 0.5 ? base : base + 1; break;
            case N_ROUND_PREFER_CEIL: k = r < 0.5 ? base : base + 1; break;
            case N_FLOOR: k = base; break;
            case N_CEIL: k = r > 0 ? base + 1 : base; break;
            default: k = scale < 1 && r > 0 ? base + 1 : base; /* simple */
            }
            idx[0] = clampi(k, p->in);
            w[0] = 1;
            continue;
        }
        double c[4];
        if (s->mode == M_LINEAR) {
            c[0] = 1 - r, c[1] = r;
        } else {
            double a = s->cubic_a, t = r + 1, u = 1 - r, v = 2 - r;
            c[0] = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a;
            c[1] = ((a + 2) * r - (a + 3)) * r * r + 1;
            c[2] = ((a + 2) * u - (a + 3)) * u * u + 1;
            c[3] = ((a * v - 5 * a) * v + 8 * a) * v - 4 * a;
            base -= 1;
        }
        double sum = 0;
        for (int k = 0; k < p->taps; k++) {
            int64_t j = base + k;
            if (s->exclude_outside && (j < 0 || j >= p->in)) c[k] = 0;
            sum += c[k];
        }
        for (int k = 0; k < p->taps; k++) {
            idx[k] = clampi(base + k, p->in);
            w[k] = (float)(s->exclude_outside && sum != 0 ? c[k] / sum : c[k]);
        }
    }
}

/* The scale and output size of every dim from the scales or sizes input (or attribute). */
static fl_status read_sizes(fl_model *m, fl_node *n, const fl_tensor *x, double *scale,
                            int64_t *out, fl_err *e) {
    resize_state *s = n->state;
    int r = x->ndim, na = s->n_axes ? s->n_axes : r, ax[FL_MAX_DIMS];
    for (int i = 0; i < na; i++) {
        ax[i] = s->n_axes ? fl_norm_axis(s->axes[i], r) : i;
        if (ax[i] < 0)
            return fl_fail(e, FL_ERR_ARG, "node '%s' (%s): axis %lld out of range for rank %d",
                           n->name, n->op->name, (long long)s->axes[i], r);
    }
    for (int d = 0; d < r; d++) scale[d] = 1, out[d] = x->shape[d];
    const fl_tensor *sc = s->scales_input >= 0 ? fl_in(m, n, s->scales_input) : NULL;
    const fl_tensor *sz = s->legacy ? NULL : fl_in(m, n, 3);
    const float *vals = sc && sc->size > 0 ? sc->data : s->n_attr_scales ? s->attr_scales : NULL;
    int64_t nv = sc && sc->size > 0 ? sc->size : s->n_attr_scales;
    int sizes = !vals && sz && sz->size > 0;
    if (!vals && !sizes)
        return fl_fail(e, FL_ERR_FORMAT, "node '%s' (%s): neither scales nor sizes is given",
                       n->name, n->op->name);
    if (vals && sz && sz->size > 0)
        return fl_fail(e, FL_ERR_FORMAT, "node '%s' (%s): both scales and sizes are given",
                       n->name, n->op->name);
    if (sizes) vals = sz->data, nv = sz->size;
    if (nv != na || !vals)
        return fl_fail(e, FL_ERR_SHAPE, "node '%s' (%s): %s has %lld values for %d dims", n->name,
                       n->op->name, sizes ? "sizes" : "scales", (long long)nv, na);
    for (int i = 0; i < na; i++) {
        int d = ax[i];
        double v = vals[i];
        if (!(v > 0) || (sizes && v != floor(v)))
            return fl_fail(e, FL_ERR_ARG, "node '%s' (%s): %s[%d] = %g is not a positive %s",
                           n->name, n->op->name, sizes ? "sizes" : "scales", i, v,
                           sizes ? "integer" : "number");
        if (sizes) out[d] = (int64_t)v, scale[d] = x->shape[d] ? v / (double)x->shape[d] : 1;
        else out[d] = (int64_t)floor((double)x->shape[d] * (double)vals[i]), scale[d] = vals[i];
        if (out[d] > ((int64_t)1 << 31))
            return fl_fail(e, FL_ERR_SHAPE, "node '%s' (%s): output dim %d of %lld is too large",
                           n->name, n->op->name, d, (long long)out[d]);
    }
    return FL_OK;
}

static fl_status resize_shape(fl_model *m, fl_node *n, fl_err *e) {
    resize_state *s = n->state;
    const fl_tensor *x = fl_in(m, n, 0);
    double scale[FL_MAX_DIMS];
    int64_t out[FL_MAX_DIMS];
    fl_status st = read_sizes(m, n, x, scale, out, e);
    if (st == FL_OK) st = fl_node_check_size(n, x->ndim, out, e);
    if (st != FL_OK) return st;
    fl_node_set_out_shape(m, n, 0, x->ndim, out);
    /* one pass per dim that changes; an input dim of 0 gives an empty output, nothing to do */
    int64_t cur[FL_MAX_DIMS], table = 0, bufsz = 0;
    memcpy(cur, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    int taps = s->mode == M_NEAREST ? 1 : s->mode == M_LINEAR ? 2 : 4;
    s->n_pass = 0;
    if (fl_shape_size(x->ndim, x->shape) > 0)
        for (int d = 0; d < x->ndim; d++) {
            if (out[d] == x->shape[d] && scale[d] == 1) continue;
            pass *p = &s->p[s->n_pass++];
            p->axis = d, p->taps = taps, p->in = cur[d], p->out = out[d];
            p->outer = fl_shape_size(d, cur);
            p->inner = fl_shape_size(x->ndim - d - 1, cur + d + 1);
            cur[d] = out[d];
            table += p->out * taps;
            bufsz += fl_shape_size(x->ndim, cur);
        }
    if (s->n_pass > 0) bufsz -= fl_shape_size(x->ndim, out); /* the last pass writes y */
    size_t tb = (size_t)table * (sizeof(int64_t) + sizeof(float));
    if ((int64_t)tb > s->tables_cap || !s->tables) {
        fl_free(s->tables);
        s->tables_cap = 0;
        if (!(s->tables = fl_alloc(tb ? tb : 1))) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
        s->tables_cap = (int64_t)tb;
    }
    if (bufsz > s->cap || !s->buf) {
        fl_free(s->buf);
        s->cap = 0;
        if (!(s->buf = fl_alloc(sizeof(float) * 2 * (size_t)(bufsz ? bufsz : 1))))
            return fl_fail(e, FL_ERR_NOMEM, "out of memory");
        s->cap = bufsz;
    }
    int64_t *ip = s->tables;
    float *wp = (float *)(ip + table);
    for (int k = 0; k < s->n_pass; k++) {
        pass *p = &s->p[k];
        p->idx = ip, p->w = wp;
        ip += p->out * p->taps, wp += p->out * p->taps;
        make_taps(s, p, scale[p->axis]);
    }
    return FL_OK;
}

/* Where pass k reads from and writes to (forward values, or their gradients). */
static float *pass_buf(resize_state *s, int k, int grad) {
    if (k == s->n_pass - 1) return NULL; /* the output (or its gradient): the caller's */
    int64_t off = 0;
    for (int j = 0; j < k; j++) off += s->p[j].outer * s->p[j].out * s->p[j].inner;
    return s->buf + (grad ? s->cap : 0) + off;
}

static void pass_forward(const pass *p, const float *x, float *y) {
    int64_t in = p->inner;
    for (int64_t o = 0; o < p->outer; o++)
        for (int64_t j = 0; j < p->out; j++) {
            float *yr = y + (o * p->out + j) * in;
            for (int64_t i = 0; i < in; i++) yr[i] = 0;
            for (int k = 0; k < p->taps; k++) {
                float w = p->w[j * p->taps + k];
                const float *xr = x + (o * p->in + p->idx[j * p->taps + k]) * in;
                if (w != 0)
                    for (int64_t i = 0; i < in; i++) yr[i] += w * xr[i];
            }
        }
}

static void pass_backward(const pass *p, const float *dy, float *dx) {
    int64_t in = p->inner;
    for (int64_t o = 0; o < p->outer; o++)
        for (int64_t j = 0; j < p->out; j++) {
            const float *dyr = dy + (o * p->out + j) * in;
            for (int k = 0; k < p->taps; k++) {
                float w = p->w[j * p->taps + k];
                float *dxr = dx + (o * p->in + p->idx[j * p->taps + k]) * in;
                if (w != 0)
                    for (int64_t i = 0; i < in; i++) dxr[i] += w * dyr[i];
            }
        }
}

static void resize_forward(fl_model *m, fl_node *n) {
    resize_state *s = n->state;
    const fl_tensor *x = fl_in(m, n, 0);
    fl_tensor *y = fl_out(m, n, 0);
    if (s->n_pass == 0) {
        if (y->size) memcpy(y->data, x->data, sizeof(float) * (size_t)y->size);
        return;
    }
    const float *src = x->data;
    for (int k = 0; k < s->n_pass; k++) {
        float *dst = pass_buf(s, k, 0);
        if (!dst) dst = y->data;
        pass_forward(&s->p[k], src, dst);
        src = dst;
    }
}

static void resize_backward(fl_model *m, fl_node *n) {
    resize_state *s = n->state;
    fl_tensor *dx = fl_gin(m, n, 0);
    if (!dx) return;
    const float *dy = fl_gout(m, n, 0)->data;
    if (s->n_pass == 0) {
        for (int64_t i = 0; i < dx->size; i++) dx->data[i] += dy[i];
        return;
    }
    for (int k = s->n_pass - 1; k >= 0; k--) {
        const float *g = k == s->n_pass - 1 ? dy : pass_buf(s, k, 1);
        float *dst = k == 0 ? dx->data : pass_buf(s, k - 1, 1);
        if (k > 0) { /* a fresh intermediate gradient */
            const pass *q = &s->p[k - 1];
            memset(dst, 0, sizeof(float) * (size_t)(q->outer * q->out * q->inner));
        }
        pass_backward(&s->p[k], g, dst);
    }
}

static const fl_op op_resize = {"Resize", resize_init, resize_shape, resize_forward,
                                resize_backward, resize_free};
static const fl_op op_upsample = {"Upsample", resize_init, resize_shape, resize_forward,
                                  resize_backward, resize_free};

const fl_op *const fl_ops_resize[] = {&op_resize, &op_upsample, NULL};
