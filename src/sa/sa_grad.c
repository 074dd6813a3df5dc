/* fl_sa_grad: the gradient of surprise adequacy with respect to the trace, for a fuzzer that
 * climbs it (DeepSA's exact mode; sa.h).
 *
 *   LSA   -log sum_t exp(-|z - z_t|^2 / 2) + const, with z = W (x - mu) the whitened trace
 *         and z_t the class's whitened training traces: d/dx = W^T (z - sum_t w_t z_t), w_t
 *         the softmax of -|z - z_t|^2 / 2 (the kernel's responsibilities).
 *   DSA   |x - x_a| / |x_a - x_b| with the neighbours x_a, x_b held fixed: d/dx =
 *         (x - x_a) / (|x - x_a| |x_a - x_b|) = (x - x_a) DSA / |x - x_a|^2, so x_b is not
 *         needed once the value is known.
 *   MDSA  |z|: d/dx = W^T z / |z|.
 *
 * Straightforward loops over the class's rows: a fuzzer asks for a batch of tens of traces,
 * and the cost is one pass over the class's training traces per trace.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sa/sa_int.h"

/* out[k] = sum_{i >= k} W[i][k] u[i]: W^T u for the lower-triangular W [d, d]. */
static void wt_mul(const double *W, const double *u, double *out, int64_t d) {
    for (int64_t k = 0; k < d; k++) out[k] = 0;
    for (int64_t i = 0; i < d; i++)
        for (int64_t k = 0; k <= i; k++) out[k] += W[i * d + k] * u[i];
}

static void whiten_q(const fl_sa *sa, int c, const double *q, double *z) {
    const int64_t d = sa->d;
    const double *W = sa->W + (int64_t)c * d * d, *mu = sa->mu + (int64_t)c * d;
    for (int64_t i = 0; i < d; i++) {
        double t = 0;
        for (int64_t k = 0; k <= i; k++) t += W[i * d + k] * (q[k] - mu[k]);
        z[i] = t;
    }
}

/* The gradient on the columns in use, into g[d]. */
static void grad_one(const fl_sa *sa, int c, const double *q, double val, double *z,
                     double *u, double *g) {
    const int64_t d = sa->d, s0 = sa->start[c], s1 = sa->start[c + 1];
    const double *W = sa->W ? sa->W + (int64_t)c * d * d : NULL;
    if (sa->o.kind == FL_SA_DSA) {
        int64_t best = -1;
        double bd = INFINITY;
        for (int64_t t = s0; t < s1; t++) {
            const float *r = sa->raw + t * d;
            double s = 0;
            for (int64_t j = 0; j < d; j++) s += (q[j] - r[j]) * (q[j] - r[j]);
            if (s < bd) bd = s, best = t;
        }
        for (int64_t j = 0; j < d; j++)
            g[j] = best >= 0 && bd > 0 ? (q[j] - sa->raw[best * d + j]) * val / bd : 0;
        return;
    }
    whiten_q(sa, c, q, z);
    if (sa->o.kind == FL_SA_MDSA) {
        double nz = 0;
        for (int64_t j = 0; j < d; j++) nz += z[j] * z[j];
        nz = sqrt(nz);
        for (int64_t j = 0; j < d; j++) u[j] = nz > 0 ? z[j] / nz : 0;
        wt_mul(W, u, g, d);
        return;
    }
    /* LSA: responsibilities, shifted by the smallest distance so that none underflows */
    double dmin = INFINITY, wsum = 0;
    for (int64_t t = s0; t < s1; t++) {
        const double *r = sa->xd + t * d;
        double s = 0;
        for (int64_t j = 0; j < d; j++) s += (z[j] - r[j]) * (z[j] - r[j]);
        if (s < dmin) dmin = s;
    }
    for (int64_t j = 0; j < d; j++) u[j] = 0;
    for (int64_t t = s0; t < s1; t++) {
        const double *r = sa->xd + t * d;
        double s = 0;
        for (int64_t j = 0; j < d; j++) s += (z[j] - r[j]) * (z[j] - r[j]);
        double w = exp(-0.5 * (s - dmin));
        wsum += w;
        for (int64_t j = 0; j < d; j++) u[j] += w * r[j];
    }
    for (int64_t j = 0; j < d; j++) u[j] = z[j] - u[j] / wsum;
    wt_mul(W, u, g, d);
}

fl_status fl_sa_grad(fl_sa *sa, const float *x, const int32_t *pred, int64_t n, double *out,
                     float *grad, fl_err *e) {
    fl_status st = fl_sa_score(sa, x, pred, n, out, e);
    if (st || n <= 0) return st;
    const int64_t d = sa->d;
    double *buf = malloc(sizeof(double) * (size_t)(4 * d));
    if (!buf) return fl_fail(e, FL_ERR_NOMEM, "out of memory for the SA gradient");
    double *q = buf, *z = buf + d, *u = buf + 2 * d, *g = buf + 3 * d;
    memset(grad, 0, sizeof(float) * (size_t)(n * sa->dim));
    for (int64_t i = 0; i < n; i++) {
        if (isnan(out[i])) continue; /* a class without training traces: no gradient */
        for (int64_t j = 0; j < d; j++) q[j] = x[i * sa->dim + sa->cols[j]];
        grad_one(sa, pred[i], q, out[i], z, u, g);
        for (int64_t j = 0; j < d; j++) grad[i * sa->dim + sa->cols[j]] = (float)g[j];
    }
    free(buf);
    return FL_OK;
}
