/* LayerNormalization (opset 17): each row — the trailing dims from `axis` on, D elements —
 * is normalised by its own mean and biased variance,
 *
 *     y = (x - mean) / sqrt(var + epsilon) * Scale + B        (B optional)
 *
 * with Scale and B holding D values (the normalised shape). The optional outputs Mean and
 * InvStdDev are [d0, .., d(axis-1), 1, .., 1]. Statistics are computed in double whatever
 * stash_type says (float would only be less precise). Backward differentiates Y with
 * respect to X, Scale and B; gradients arriving at Mean or InvStdDev are not propagated
 * (PyTorch's layer_norm does not return them either). */
#include <math.h>
#include <string.h>

#include "flare/model.h"
#include "nn/ops.h"

typedef struct ln_state {
    int64_t axis;
    float eps;
    int64_t rows, D;
    float *mu, *istd; /* [rows] each, one block: the statistics backward needs */
    int64_t cap;
} ln_state;

static void ln_free(fl_node *n) {
    ln_state *s = n->state;
    if (s) fl_free(s->mu);
    fl_free(s);
}

static fl_status ln_init(fl_model *m, fl_node *n, fl_err *e) {
    static const char *const known[] = {"axis", "epsilon", "stash_type", NULL};
    fl_status st = fl_node_check_arity(n, 2, 3, 1, 3, e);
    if (st == FL_OK) st = fl_node_check_attrs(n, known, e);
    if (st != FL_OK) return st;
    ln_state *s = fl_alloc(sizeof *s);
    if (!s) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    n->state = s;
    s->axis = fl_node_attr_int(n, "axis", -1);
    s->eps = fl_node_attr_float(n, "epsilon", 1e-5f);
    return FL_OK;
}

static fl_status ln_shape(fl_model *m, fl_node *n, fl_err *e) {
    ln_state *s = n->state;
    const fl_tensor *x = fl_in(m, n, 0);
    char a[128], b[128];
    int ax = fl_norm_axis(s->axis, x->ndim);
    if (ax < 0)
        return fl_fail(e, FL_ERR_ARG, "node '%s' (LayerNormalization): axis %lld out of range "
                       "for rank %d", n->name, (long long)s->axis, x->ndim);
    s->rows = fl_shape_size(ax, x->shape);
    s->D = fl_shape_size(x->ndim - ax, x->shape + ax);
    for (int i = 1; i < 3; i++) {
        const fl_tensor *p = fl_in(m, n, i);
        if (p && p->size != s->D)
            return fl_fail(e, FL_ERR_SHAPE, "node '%s' (LayerNormalization): %s has shape %s, "
                           "want the %lld values of the normalised dims of X %s", n->name,
                           i == 1 ? "Scale" : "B", fl_shape_str(p, a, sizeof a),
                           (long long)s->D, fl_shape_str(x, b, sizeof b));
    }
    if (s->cap < s->rows || !s->mu) {
        fl_free(s->mu);
        s->cap = 0;
        if (!(s->mu = fl_alloc(sizeof(float) * 2 * (size_t)(s->rows ? s->rows : 1))))
            return fl_fail(e, FL_ERR_NOMEM, "out of memory");
        s->cap = s->rows;
    }
    s->istd = s->mu + s->cap;
    fl_node_set_out_shape(m, n, 0, x->ndim, x->shape);
    int64_t st_shape[FL_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) st_shape[d] = d < ax ? x->shape[d] : 1;
    for (int k = 1; k < n->n_out; k++) fl_node_set_out_shape(m, n, k, x->ndim, st_shape);
    return FL_OK;
}

static void ln_forward(fl_model *m, fl_node *n) {
    ln_state *s = n->state;
    const float *x = fl_in(m, n, 0)->data, *scale = fl_in(m, n, 1)->data;
    const fl_tensor *bt = fl_in(m, n, 2);
    const float *bias = bt ? bt->data : NULL;
    float *y = fl_out(m, n, 0)->data;
    int64_t D = s->D;
    for (int64_t r = 0; r < s->rows; r++) {
        const float *xr = x + r * D;
        float *yr = y + r * D;
        double sum = 0, sq = 0;
        for (int64_t j = 0; j < D; j++) sum += xr[j];
        double mean = D ? sum / (double)D : 0;
        for (int64_t j = 0; j < D; j++) sq += (xr[j] - mean) * (xr[j] - mean);
        float mu = (float)mean, istd = (float)(1.0 / sqrt((D ? sq / (double)D : 0) + s->eps));
        s->mu[r] = mu;
        s->istd[r] = istd;
        for (int64_t j = 0; j < D; j++)
            yr[j] = (xr[j] - mu) * istd * scale[j] + (bias ? bias[j] : 0.0f);
    }
    if (n->n_out > 1) memcpy(fl_out(m, n, 1)->data, s->mu, sizeof(float) * (size_t)s->rows);
    if (n->n_out > 2) memcpy(fl_out(m, n, 2)->data, s->istd, sizeof(float) * (size_t)s->rows);
}

/* With g = dy * Scale and xhat = (x - mean) * istd, per row:
 *     dx = istd * (g - mean(g) - xhat * mean(g * xhat)),  dScale += dy * xhat,  dB += dy. */
static void ln_backward(fl_model *m, fl_node *n) {
    ln_state *s = n->state;
    fl_tensor *dxt = fl_gin(m, n, 0), *dst = fl_gin(m, n, 1), *dbt = fl_gin(m, n, 2);
    const float *x = fl_in(m, n, 0)->data, *scale = fl_in(m, n, 1)->data;
    const float *dy = fl_gout(m, n, 0)->data;
    int64_t D = s->D;
    for (int64_t r = 0; r < s->rows; r++) {
        const float *xr = x + r * D, *dyr = dy + r * D;
        float mu = s->mu[r], istd = s->istd[r];
        double mg = 0, mgx = 0;
        for (int64_t j = 0; j < D; j++) {
            float xh = (xr[j] - mu) * istd, g = dyr[j] * scale[j];
            mg += g;
            mgx += (double)g * xh;
            if (dst) dst->data[j] += dyr[j] * xh;
            if (dbt) dbt->data[j] += dyr[j];
        }
        if (!dxt) continue;
        float a = (float)(mg / (double)D), b = (float)(mgx / (double)D);
        float *dxr = dxt->data + r * D;
        for (int64_t j = 0; j < D; j++) {
            float xh = (xr[j] - mu) * istd;
            dxr[j] += istd * (dyr[j] * scale[j] - a - xh * b);
        }
    }
}

static const fl_op op_layernorm = {"LayerNormalization", ln_init, ln_shape, ln_forward,
                                   ln_backward, ln_free};

const fl_op *const fl_ops_layernorm[] = {&op_layernorm, NULL};
