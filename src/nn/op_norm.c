/* BatchNormalization over X [N, C, D1, ...], per channel c:
 *
 *     inference:  y = scale * (x - mean) / sqrt(var + eps) + B    with the given mean, var
 *     training:   the same with the batch's mean and biased variance instead
 *
 * Training mode is on when the model trains (m->training, flare's own training loop) or the
 * node says so (training_mode = 1, opset 14+). Two different bookkeeping conventions follow
 * from that, deliberately:
 *   - flare's training updates the running statistics in place, in the mean / var input
 *     tensors, as PyTorch does: running = momentum * running + (1 - momentum) * batch, the
 *     variance term being the unbiased batch variance (ONNX's momentum is PyTorch's
 *     1 - momentum, so an exported model keeps its meaning);
 *   - the optional outputs running_mean / running_var (ONNX training_mode) get what the ONNX
 *     specification computes, with the biased batch variance, and the inputs are left alone
 *     unless the model itself is training.
 *
 * Inference folds everything into y = a_c * x + b_c with a_c, b_c computed once per pass. */
#include <math.h>
#include <string.h>

#include "flare/model.h"
#include "nn/ops.h"

typedef struct bn_state {
    float eps, momentum;
    int training_mode; /* node attribute */
    int64_t C, inner;  /* channels; elements per (n, c) plane */
    int used_batch;    /* the last forward used batch statistics */
    float *a, *b;      /* [C] each: inference y = a*x + b */
    float *mu, *istd;  /* [C] each: training, the batch mean and 1/sqrt(var + eps) */
} bn_state;

static void bn_free(fl_node *n) {
    bn_state *s = n->state;
    if (s) fl_free(s->a); /* one block holds a, b, mu, istd */
    fl_free(s);
}

static fl_status bn_init(fl_model *m, fl_node *n, fl_err *e) {
    /* spatial (opset < 9) must be 1, i.e. per-channel statistics; is_test and
     * consumed_inputs (opset < 7) carry no meaning for flare */
    static const char *const known[] = {"epsilon",  "momentum", "training_mode",
                                        "spatial",  "is_test",  "consumed_inputs", NULL};
    fl_status st = fl_node_check_arity(n, 5, 5, 1, 3, e);
    if (st == FL_OK) st = fl_node_check_attrs(n, known, e);
    if (st != FL_OK) return st;
    if (fl_node_attr_int(n, "spatial", 1) != 1)
        return fl_fail(e, FL_ERR_UNSUPPORTED,
                       "node '%s' (BatchNormalization): spatial=0 (per-element statistics) is "
                       "not supported",
                       n->name);
    bn_state *s = fl_alloc(sizeof *s);
    if (!s) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    s->eps = fl_node_attr_float(n, "epsilon", 1e-5f);
    s->momentum = fl_node_attr_float(n, "momentum", 0.9f);
    s->training_mode = fl_node_attr_int(n, "training_mode", 0) != 0;
    n->state = s;
    if (n->n_out > 1 && !s->training_mode)
        return fl_fail(e, FL_ERR_UNSUPPORTED,
                       "node '%s' (BatchNormalization): outputs running_mean/running_var need "
                       "training_mode=1",
                       n->name);
    return FL_OK;
}

static fl_status bn_shape(fl_model *m, fl_node *n, fl_err *e) {
    bn_state *s = n->state;
    const fl_tensor *x = fl_in(m, n, 0);
    char buf[128], pb[128];
    if (x->ndim < 2)
        return fl_fail(e, FL_ERR_SHAPE, "node '%s' (BatchNormalization): X %s must be [N,C,...]",
                       n->name, fl_shape_str(x, buf, sizeof buf));
    int64_t C = x->shape[1];
    for (int i = 1; i < 5; i++) {
        const fl_tensor *p = fl_in(m, n, i);
        if (p->size != C)
            return fl_fail(e, FL_ERR_SHAPE,
                           "node '%s' (BatchNormalization): input %d has shape %s, want %lld "
                           "values for X %s",
                           n->name, i, fl_shape_str(p, pb, sizeof pb), (long long)C,
                           fl_shape_str(x, buf, sizeof buf));
    }
    fl_node_set_out_shape(m, n, 0, x->ndim, x->shape);
    for (int i = 1; i < n->n_out; i++) fl_node_set_out_shape(m, n, i, 1, &C);
    if (C != s->C || !s->a) {
        fl_free(s->a);
        if (!(s->a = fl_alloc(sizeof(float) * 4 * (size_t)(C ? C : 1))))
            return fl_fail(e, FL_ERR_NOMEM, "out of memory");
        s->b = s->a + C, s->mu = s->a + 2 * C, s->istd = s->a + 3 * C;
    }
    s->C = C;
    s->inner = fl_shape_size(x->ndim - 2, x->shape + 2);
    return FL_OK;
}

/* y = a[c] * x + b[c] per channel: both modes end here, with their own a and b. */
static void bn_apply(const bn_state *s, const float *x, float *y, int64_t N) {
    const int64_t C = s->C, inner = s->inner;
    for (int64_t i = 0; i < N; i++)
        for (int64_t c = 0; c < C; c++) {
            const float *xp = x + (i * C + c) * inner;
            float *yp = y + (i * C + c) * inner, a = s->a[c], b = s->b[c];
            for (int64_t j = 0; j < inner; j++) yp[j] = a * xp[j] + b;
        }
}

static void bn_forward_inference(fl_model *m, fl_node *n) {
    bn_state *s = n->state;
    const fl_tensor *x = fl_in(m, n, 0);
    const float *scale = fl_in(m, n, 1)->data, *bias = fl_in(m, n, 2)->data;
    const float *mean = fl_in(m, n, 3)->data, *var = fl_in(m, n, 4)->data;
    float *y = fl_out(m, n, 0)->data;
    int64_t C = s->C, N = x->shape[0];
    for (int64_t c = 0; c < C; c++) {
        s->a[c] = scale[c] / sqrtf(var[c] + s->eps);
        s->b[c] = bias[c] - mean[c] * s->a[c];
    }
    bn_apply(s, x->data, y, N);
}

static void bn_forward_training(fl_model *m, fl_node *n) {
    bn_state *s = n->state;
    const fl_tensor *x = fl_in(m, n, 0);
    const float *scale = fl_in(m, n, 1)->data, *bias = fl_in(m, n, 2)->data;
    float *mean = fl_in(m, n, 3)->data, *var = fl_in(m, n, 4)->data;
    float *y = fl_out(m, n, 0)->data;
    int64_t C = s->C, inner = s->inner, N = x->shape[0], cnt = N * inner;
    float mom = s->momentum;
    for (int64_t c = 0; c < C; c++) {
        /* two passes in double: the mean first, then the centred sum of squares, which does
         * not cancel catastrophically the way E[x^2] - E[x]^2 does */
        double sum = 0, sq = 0;
        for (int64_t i = 0; i < N; i++) {
            const float *xp = x->data + (i * C + c) * inner;
            for (int64_t j = 0; j < inner; j++) sum += xp[j];
        }
        double mu = cnt ? sum / (double)cnt : 0;
        for (int64_t i = 0; i < N; i++) {
            const float *xp = x->data + (i * C + c) * inner;
            for (int64_t j = 0; j < inner; j++) sq += (xp[j] - mu) * (xp[j] - mu);
        }
        double v = cnt ? sq / (double)cnt : 0;
        s->mu[c] = (float)mu;
        s->istd[c] = (float)(1.0 / sqrt(v + s->eps));
        s->a[c] = scale[c] * s->istd[c];
        s->b[c] = bias[c] - s->mu[c] * s->a[c];
        if (n->n_out > 1) fl_out(m, n, 1)->data[c] = mom * mean[c] + (1 - mom) * (float)mu;
        if (n->n_out > 2) fl_out(m, n, 2)->data[c] = mom * var[c] + (1 - mom) * (float)v;
        if (m->training) {
            double unbiased = cnt > 1 ? sq / (double)(cnt - 1) : v;
            mean[c] = mom * mean[c] + (1 - mom) * (float)mu;
            var[c] = mom * var[c] + (1 - mom) * (float)unbiased;
        }
    }
    bn_apply(s, x->data, y, N);
}

static void bn_forward(fl_model *m, fl_node *n) {
    bn_state *s = n->state;
    s->used_batch = m->training || s->training_mode;
    if (s->used_batch)
        bn_forward_training(m, n);
    else
        bn_forward_inference(m, n);
}

/* Per channel, with xhat = (x - mu) * istd and sums over the channel's M = N*inner values:
 *   inference:  dx = dy * a,  dscale = sum(dy * xhat),  dB = sum(dy),
 *               dmean = -a * sum(dy),  dvar = -scale/2 * istd^3 * sum(dy * (x - mean))
 *   training:   dx = scale * istd / M * (M * dy - sum(dy) - xhat * sum(dy * xhat)),
 *               dscale, dB as above; mean and var do not affect y. */
static void bn_backward(fl_model *m, fl_node *n) {
    bn_state *s = n->state;
    const fl_tensor *x = fl_in(m, n, 0);
    const float *scale = fl_in(m, n, 1)->data, *mean = fl_in(m, n, 3)->data;
    const float *var = fl_in(m, n, 4)->data, *dy = fl_gout(m, n, 0)->data;
    fl_tensor *gx = fl_gin(m, n, 0), *gs = fl_gin(m, n, 1), *gb = fl_gin(m, n, 2);
    fl_tensor *gm = s->used_batch ? NULL : fl_gin(m, n, 3);
    fl_tensor *gv = s->used_batch ? NULL : fl_gin(m, n, 4);
    int64_t C = s->C, inner = s->inner, N = x->shape[0], cnt = N * inner;
    for (int64_t c = 0; c < C; c++) {
        float mu = s->used_batch ? s->mu[c] : mean[c];
        float istd = s->used_batch ? s->istd[c] : 1.0f / sqrtf(var[c] + s->eps);
        float sdy = 0, sdyx = 0; /* sum(dy), sum(dy * xhat) */
        for (int64_t i = 0; i < N; i++) {
            const float *xp = x->data + (i * C + c) * inner, *dp = dy + (i * C + c) * inner;
            for (int64_t j = 0; j < inner; j++) {
                sdy += dp[j];
                sdyx += dp[j] * (xp[j] - mu) * istd;
            }
        }
        if (gs) gs->data[c] += sdyx;
        if (gb) gb->data[c] += sdy;
        if (gm) gm->data[c] += -scale[c] * istd * sdy;
        if (gv) gv->data[c] += -0.5f * scale[c] * istd * istd * sdyx;
        if (!gx) continue;
        float a = scale[c] * istd;
        float k1 = s->used_batch && cnt ? sdy / (float)cnt : 0;
        float k2 = s->used_batch && cnt ? sdyx / (float)cnt : 0;
        for (int64_t i = 0; i < N; i++) {
            const float *xp = x->data + (i * C + c) * inner, *dp = dy + (i * C + c) * inner;
            float *gp = gx->data + (i * C + c) * inner;
            for (int64_t j = 0; j < inner; j++)
                gp[j] += a * (dp[j] - k1 - (xp[j] - mu) * istd * k2);
        }
    }
}

static const fl_op op_bn = {"BatchNormalization", bn_init, bn_shape, bn_forward, bn_backward, bn_free};

const fl_op *const fl_ops_norm[] = {&op_bn, NULL};
