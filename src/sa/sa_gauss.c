/* LSA and MDSA: per-class Gaussian pieces (mean, covariance, Cholesky factor, its inverse),
 * the whitened training rows LSA scores against (sa_lsa.c), and MDSA.
 *
 * LSA's kernel density (scipy.stats.gaussian_kde) per class: Sigma = cov(x, ddof=1), Scott's
 * factor f = n^(-1/(d+4)), kernel covariance K = f^2 Sigma = L L^T; W = L^-1 whitens:
 * z = W (x - mu), and a kernel's exponent is |z_q - z_i|^2 / 2.
 *
 * MDSA = sqrt((q - mu)^T S^-1 (q - mu)) = |W (q - mu)| with S = cov(x, ddof=0) + ridge I
 * (dnn-tip's EmpiricalCovariance is the maximum-likelihood, ddof-0 estimate), per class.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/simd.h"
#include "sa/sa_int.h"

#define LOG_2PI 1.8378770664093454836

/* Lower Cholesky factor of the symmetric a[d,d] (lower triangle used) into l; returns -1 on
 * success, else the index of the first failing pivot. LAPACK's dpotrf (which
 * scipy.linalg.cholesky calls) fails only on a pivot <= 0; a pivot below 1e-12 of the
 * neuron's variance fails here too: the neuron is then, to float32 precision, a linear
 * combination of the ones before it (an exact dependence leaves only rounding noise, around
 * 1e-14), and the density that scipy would go on to compute is meaningless. */
static int64_t cholesky(const double *a, double *l, int64_t d) {
    memset(l, 0, sizeof(double) * (size_t)(d * d));
    for (int64_t j = 0; j < d; j++) {
        double s = a[j * d + j];
        for (int64_t k = 0; k < j; k++) s -= l[j * d + k] * l[j * d + k];
        if (!(s > 1e-12 * a[j * d + j]) || !isfinite(s)) return j;
        double ljj = sqrt(s);
        l[j * d + j] = ljj;
        for (int64_t i = j + 1; i < d; i++) {
            double t = a[i * d + j];
            const double *li = l + i * d, *lj = l + j * d;
            for (int64_t k = 0; k < j; k++) t -= li[k] * lj[k];
            l[i * d + j] = t / ljj;
        }
    }
    return -1;
}

/* w = l^-1 for lower-triangular l (w lower-triangular too). */
static void tri_inverse(const double *l, double *w, int64_t d) {
    memset(w, 0, sizeof(double) * (size_t)(d * d));
    for (int64_t j = 0; j < d; j++) {
        w[j * d + j] = 1.0 / l[j * d + j];
        for (int64_t i = j + 1; i < d; i++) {
            double t = 0;
            for (int64_t k = j; k < i; k++) t += l[i * d + k] * w[k * d + j];
            w[i * d + j] = -t / l[i * d + i];
        }
    }
}

FL_HOT_CLONES
void fl__sa_whiten(const double *W, const double *mu, const float *x, double *r, double *z,
                   int64_t d) {
    for (int64_t j = 0; j < d; j++) r[j] = (double)x[j] - mu[j];
    for (int64_t i = 0; i < d; i++) {
        const double *w = W + i * d;
        double t = 0;
        for (int64_t k = 0; k <= i; k++) t += w[k] * r[k];
        z[i] = t;
    }
}

/* Lower triangle of cov += (x - mu)(x - mu)^T. */
FL_HOT_CLONES
static void cov_add(double *cov, const float *x, const double *mu, double *r, int64_t d) {
    for (int64_t j = 0; j < d; j++) r[j] = x[j] - mu[j];
    for (int64_t j = 0; j < d; j++) {
        double *cj = cov + j * d, rj = r[j];
        for (int64_t k = 0; k <= j; k++) cj[k] += rj * r[k];
    }
}

/* Whiten rows lo..hi-1 of class c into sa->xd (double), sa->xg (float) and their squared
 * norms into sa->xn. */
typedef struct whiten_job {
    fl_sa *sa;
    int c;
    _Atomic int failed;
} whiten_job;

static void whiten_range(void *ctx, int64_t lo, int64_t hi, int tid) {
    whiten_job *J = ctx;
    fl_sa *sa = J->sa;
    int64_t d = sa->d, s = sa->start[J->c];
    const double *W = sa->W + (int64_t)J->c * d * d, *mu = sa->mu + (int64_t)J->c * d;
    double *r = malloc(sizeof(double) * (size_t)(2 * d));
    if (!r) {
        J->failed = 1;
        return;
    }
    for (int64_t i = s + lo; i < s + hi; i++) {
        fl__sa_whiten(W, mu, sa->raw + i * d, r, r + d, d);
        float *g = sa->xg + i * d;
        memcpy(sa->xd + i * d, r + d, sizeof(double) * (size_t)d);
        for (int64_t j = 0; j < d; j++) g[j] = (float)r[d + j];
        sa->xn[i] = (float)fl__sa_sqnorm(g, d);
    }
    free(r);
}

/* Mean, covariance (ddof), Cholesky and inverse factor of class c; LSA also whitens the
 * class's training rows into sa->xg. */
static fl_status build_class(fl_sa *sa, int c, double *cov, double *l, double *r,
                             fl_err *e) {
    int64_t d = sa->d, s = sa->start[c], nc = sa->start[c + 1] - s;
    int lsa = sa->o.kind == FL_SA_LSA, ddof = lsa ? 1 : 0;
    const char *what = lsa ? "LSA's kernel density estimate" : "MDSA's Mahalanobis distance";
    if (nc <= d)
        return fl_fail(e, FL_ERR_DATA, "class %d has %lld training traces for %lld neurons: its "
                       "covariance is singular (%s needs more traces than neurons); use fewer "
                       "neurons or raise the variance threshold (now %g) to drop near-constant "
                       "ones", c, (long long)nc, (long long)d, what, sa->o.var_threshold);
    double *mu = sa->mu + (int64_t)c * d;
    memset(mu, 0, sizeof(double) * (size_t)d);
    for (int64_t i = s; i < s + nc; i++)
        for (int64_t j = 0; j < d; j++) mu[j] += sa->raw[i * d + j];
    for (int64_t j = 0; j < d; j++) mu[j] /= (double)nc;
    memset(cov, 0, sizeof(double) * (size_t)(d * d));
    for (int64_t i = s; i < s + nc; i++) cov_add(cov, sa->raw + i * d, mu, r, d);
    /* Scott's factor squared for LSA (the kernel covariance), the ridge for MDSA. */
    double scale = 1.0 / (double)(nc - ddof);
    if (lsa) scale *= pow((double)nc, -2.0 / (double)(d + 4));
    for (int64_t j = 0; j < d; j++)
        for (int64_t k = 0; k <= j; k++) cov[j * d + k] *= scale;
    if (!lsa)
        for (int64_t j = 0; j < d; j++) cov[j * d + j] += sa->o.mdsa_ridge;
    int64_t bad = cholesky(cov, l, d);
    if (bad >= 0)
        return fl_fail(e, FL_ERR_DATA, "class %d: the covariance of its %lld training traces over "
                       "%lld neurons is singular (Cholesky fails at neuron %lld: it is a linear "
                       "combination of others); raise the variance threshold (now %g) to drop "
                       "near-constant neurons%s, or use fewer neurons", c, (long long)nc,
                       (long long)d, (long long)sa->cols[bad], sa->o.var_threshold,
                       lsa ? "" : ", or add a ridge (--mdsa-ridge)");
    double *W = sa->W + (int64_t)c * d * d, logdet = 0;
    tri_inverse(l, W, d);
    for (int64_t j = 0; j < d; j++) logdet += log(l[j * d + j]);
    sa->lognorm[c] = -0.5 * (double)d * LOG_2PI - logdet - log((double)nc);
    if (lsa) {
        whiten_job J = {sa, c, 0};
        fl_parallel_for(nc, whiten_range, &J);
        if (J.failed) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    }
    return FL_OK;
}

fl_status fl__sa_gauss_build(fl_sa *sa, fl_err *e) {
    int64_t d = sa->d, n = sa->n;
    int C = sa->C, lsa = sa->o.kind == FL_SA_LSA;
    sa->mu = calloc((size_t)(C * d), sizeof(double));
    sa->W = calloc((size_t)(C * d * d), sizeof(double));
    sa->lognorm = calloc((size_t)C, sizeof(double));
    double *cov = malloc(sizeof(double) * (size_t)(2 * d * d + 2 * d));
    if (lsa) {
        sa->xg = fl_alloc(sizeof(float) * (size_t)(n * d));
        sa->xn = malloc(sizeof(float) * (size_t)n);
        sa->xd = fl_alloc(sizeof(double) * (size_t)(n * d));
    }
    if (!sa->mu || !sa->W || !sa->lognorm || !cov || (lsa && (!sa->xg || !sa->xn || !sa->xd))) {
        free(cov);
        return fl_fail(e, FL_ERR_NOMEM, "out of memory for %d class covariances of %lld neurons",
                       C, (long long)d);
    }
    fl_status st = FL_OK;
    for (int c = 0; c < C && st == FL_OK; c++)
        if (sa->start[c + 1] > sa->start[c])
            st = build_class(sa, c, cov, cov + d * d, cov + 2 * d * d, e);
    free(cov);
    return st;
}

/* ---- MDSA --------------------------------------------------------------------------------- */
fl_status fl__sa_mdsa_score(fl_sa *sa, const float *q, int64_t m, int c, double *out, fl_err *e) {
    int64_t d = sa->d;
    double *r = malloc(sizeof(double) * (size_t)(2 * d));
    if (!r) return fl_fail(e, FL_ERR_NOMEM, "out of memory for MDSA");
    const double *W = sa->W + (int64_t)c * d * d, *mu = sa->mu + (int64_t)c * d;
    for (int64_t i = 0; i < m; i++) {
        fl__sa_whiten(W, mu, q + i * d, r, r + d, d);
        double s = 0;
        for (int64_t j = 0; j < d; j++) s += r[d + j] * r[d + j];
        out[i] = sqrt(s);
    }
    free(r);
    return FL_OK;
}
