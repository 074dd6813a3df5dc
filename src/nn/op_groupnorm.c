/* InstanceNormalization and GroupNormalization: X [N, C, ...] is split into G groups of
 * C / G channels; each (example, group) — its channels and all their spatial positions,
 * D elements — is normalised by its own mean and biased variance, then every channel gets
 * its own scale and shift:
 *
 *     y = (x - mean) / sqrt(var + epsilon) * scale[c] + B[c]
 *
 * InstanceNormalization is the case G = C. GroupNormalization's scale and B hold one value
 * per group up to opset 20 and one per channel from opset 21 (the ONNX change); the opset in
 * force decides, and a wrong size fails naming the node. Statistics are computed in double
 * (stash_type can only ask for float, which would be less precise). Backward differentiates
 * with respect to X, scale and B. */
#include <math.h>
#include <string.h>

#include "flare/model.h"
#include "nn/ops.h"

typedef struct gn_state {
    int64_t groups; /* G; 0 for InstanceNormalization (G = C) */
    int per_group;  /* scale / B hold G values (GroupNormalization before opset 21) */
    float eps;
    int64_t N, G, Cg, S; /* X as [N, G, Cg, S] */
    float *mu, *istd;    /* [N * G] each, one block: the statistics backward needs */
    int64_t cap;
} gn_state;

static void gn_free(fl_node *n) {
    gn_state *s = n->state;
    if (s) fl_free(s->mu);
    fl_free(s);
}

static fl_status gn_init(fl_model *m, fl_node *n, fl_err *e) {
    static const char *const known_in[] = {"epsilon", NULL};
    static const char *const known_gn[] = {"epsilon", "num_groups", "stash_type", NULL};
    int group = strcmp(n->op->name, "GroupNormalization") == 0;
    fl_status st = fl_node_check_arity(n, 3, 3, 1, 1, e);
    if (st == FL_OK) st = fl_node_check_attrs(n, group ? known_gn : known_in, e);
    if (st != FL_OK) return st;
    if ((st = fl_node_check_present(n, 3, e)) != FL_OK) return st;
    gn_state *s = fl_alloc(sizeof *s);
    if (!s) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    n->state = s;
    s->eps = fl_node_attr_float(n, "epsilon", 1e-5f);
    if (group) {
        const fl_attr *a = fl_node_attr(n, "num_groups");
        if (!a || a->type != FL_ATTR_INT || a->i < 1)
            return fl_fail(e, FL_ERR_FORMAT, "node '%s' (GroupNormalization): needs a positive "
                           "integer attribute num_groups", n->name);
        s->groups = a->i;
        s->per_group = m->opset < 21;
    }
    return FL_OK;
}

static fl_status gn_shape(fl_model *m, fl_node *n, fl_err *e) {
    gn_state *s = n->state;
    const fl_tensor *x = fl_in(m, n, 0);
    char a[128], b[128];
    if (x->ndim < 2)
        return fl_fail(e, FL_ERR_SHAPE, "node '%s' (%s): X %s needs a channel dimension", n->name,
                       n->op->name, fl_shape_str(x, a, sizeof a));
    int64_t C = x->shape[1];
    s->G = s->groups ? s->groups : C;
    if (s->G == 0 || C % s->G != 0)
        return fl_fail(e, FL_ERR_SHAPE, "node '%s' (%s): %lld channels do not split into %lld "
                       "groups", n->name, n->op->name, (long long)C, (long long)s->G);
    s->N = x->shape[0];
    s->Cg = C / s->G;
    s->S = fl_shape_size(x->ndim - 2, x->shape + 2);
    int64_t want = s->per_group ? s->G : C;
    for (int i = 1; i < 3; i++) {
        const fl_tensor *p = fl_in(m, n, i);
        if (p->size != want)
            return fl_fail(e, FL_ERR_SHAPE, "node '%s' (%s): %s has shape %s, want %lld values "
                           "(one per %s) for X %s at opset %d", n->name, n->op->name,
                           i == 1 ? "scale" : "B", fl_shape_str(p, a, sizeof a), (long long)want,
                           s->per_group ? "group" : "channel", fl_shape_str(x, b, sizeof b),
                           m->opset);
    }
    int64_t rows = s->N * s->G;
    if (s->cap < rows || !s->mu) {
        fl_free(s->mu);
        s->cap = 0;
        if (!(s->mu = fl_alloc(sizeof(float) * 2 * (size_t)(rows ? rows : 1))))
            return fl_fail(e, FL_ERR_NOMEM, "out of memory");
        s->cap = rows;
    }
    s->istd = s->mu + s->cap;
    fl_node_set_out_shape(m, n, 0, x->ndim, x->shape);
    return FL_OK;
}

/* Index into scale / B of channel k (0..Cg) of group g. */
static inline int64_t param_index(const gn_state *s, int64_t g, int64_t k) {
    return s->per_group ? g : g * s->Cg + k;
}

static void gn_forward(fl_model *m, fl_node *n) {
    gn_state *s = n->state;
    const float *x = fl_in(m, n, 0)->data, *scale = fl_in(m, n, 1)->data;
    const float *bias = fl_in(m, n, 2)->data;
    float *y = fl_out(m, n, 0)->data;
    int64_t D = s->Cg * s->S;
    for (int64_t r = 0; r < s->N * s->G; r++) {
        const float *xr = x + r * D;
        float *yr = y + r * D;
        double sum = 0, sq = 0;
        for (int64_t j = 0; j < D; j++) sum += xr[j];
        double mean = D ? sum / (double)D : 0;
        for (int64_t j = 0; j < D; j++) sq += (xr[j] - mean) * (xr[j] - mean);
        float mu = (float)mean, istd = (float)(1.0 / sqrt((D ? sq / (double)D : 0) + s->eps));
        s->mu[r] = mu;
        s->istd[r] = istd;
        for (int64_t k = 0; k < s->Cg; k++) {
            int64_t p = param_index(s, r % s->G, k);
            float gam = scale[p] * istd, bet = bias[p];
            for (int64_t j = k * s->S; j < (k + 1) * s->S; j++) yr[j] = (xr[j] - mu) * gam + bet;
        }
    }
}

/* With g = dy * scale[c] and xhat = (x - mean) * istd, per (example, group):
 *     dx = istd * (g - mean(g) - xhat * mean(g * xhat)),
 *     dscale[c] += sum dy * xhat,  dB[c] += sum dy  (over the channel's positions). */
static void gn_backward(fl_model *m, fl_node *n) {
    gn_state *s = n->state;
    fl_tensor *dxt = fl_gin(m, n, 0), *dst = fl_gin(m, n, 1), *dbt = fl_gin(m, n, 2);
    const float *x = fl_in(m, n, 0)->data, *scale = fl_in(m, n, 1)->data;
    const float *dy = fl_gout(m, n, 0)->data;
    int64_t D = s->Cg * s->S;
    for (int64_t r = 0; r < s->N * s->G; r++) {
        const float *xr = x + r * D, *dyr = dy + r * D;
        float mu = s->mu[r], istd = s->istd[r];
        double mg = 0, mgx = 0;
        for (int64_t k = 0; k < s->Cg; k++) {
            int64_t p = param_index(s, r % s->G, k);
            double sdy = 0, sdyx = 0;
            for (int64_t j = k * s->S; j < (k + 1) * s->S; j++) {
                float xh = (xr[j] - mu) * istd;
                sdy += dyr[j];
                sdyx += (double)dyr[j] * xh;
            }
            mg += sdy * scale[p];
            mgx += sdyx * scale[p];
            if (dst) dst->data[p] += (float)sdyx;
            if (dbt) dbt->data[p] += (float)sdy;
        }
        if (!dxt || D == 0) continue;
        float a = (float)(mg / (double)D), b = (float)(mgx / (double)D);
        float *dxr = dxt->data + r * D;
        for (int64_t k = 0; k < s->Cg; k++) {
            float gam = scale[param_index(s, r % s->G, k)];
            for (int64_t j = k * s->S; j < (k + 1) * s->S; j++) {
                float xh = (xr[j] - mu) * istd;
                dxr[j] += istd * (dyr[j] * gam - a - xh * b);
            }
        }
    }
}

static const fl_op op_instancenorm = {"InstanceNormalization", gn_init, gn_shape, gn_forward,
                                      gn_backward, gn_free};
static const fl_op op_groupnorm = {"GroupNormalization", gn_init, gn_shape, gn_forward,
                                   gn_backward, gn_free};

const fl_op *const fl_ops_groupnorm[] = {&op_instancenorm, &op_groupnorm, NULL};
