/* LSA and MDSA: per-class Gaussian pieces (mean, covariance, Cholesky factor, its inverse)
 * and the two scores.
 *
 * LSA reproduces scipy.stats.gaussian_kde (scipy 1.10, _kde.py) on each class's training
 * traces x_1..x_n (d neurons):
 *     Sigma  = cov(x, ddof=1);  f = n^(-1/(d+4))  (Scott's factor);  K = f^2 Sigma = L L^T
 *     logpdf(q) = logsumexp_i(-|L^-1 (q - x_i)|^2 / 2) - (d/2) log(2 pi) - log det L - log n
 * and LSA = -logpdf. With W = L^-1 computed once, every training trace is whitened once
 * (z_i = W (x_i - mu), float) and each kernel is a squared distance |z_q - z_i|^2, which the
 * GEMM identity |a|^2 + |b|^2 - 2ab gives for a whole block of inputs x training traces at a
 * time. The log-sum-exp runs online over training blocks (a running minimum distance and a
 * sum of exp(-(d2 - min)/2), rescaled when the minimum drops), so no n_test x n_train matrix
 * exists. The dominant term (the nearest whitened trace) is recomputed in double at the end:
 * the float distances only decide which term that is and weigh the rest.
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

/* z = W (x - mu), W lower-triangular [d,d]. */
FL_HOT_CLONES
static void whiten(const double *W, const double *mu, const float *x, double *r, double *z,
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

/* Whiten rows lo..hi-1 of class c into sa->xg (float) and their squared norms into sa->xn. */
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
        whiten(W, mu, sa->raw + i * d, r, r + d, d);
        float *g = sa->xg + i * d;
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
    }
    if (!sa->mu || !sa->W || !sa->lognorm || !cov || (lsa && (!sa->xg || !sa->xn))) {
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

/* ---- LSA ---------------------------------------------------------------------------------- */
#define LSA_MB 256  /* inputs per block */
#define LSA_NB 1024 /* training traces per block */
#define LSA_SKIP 50.0f /* e^-50 = 2e-22 */

/* row[j] = row[j] + xn[j] + qn (the squared distances of one input to a block of training
 * traces, from -2 q.x); returns their minimum. */
FL_HOT_CLONES
static float lsa_dist_row(float *row, const float *xn, float qn, int nb) {
    fl__v8f m = {INFINITY, INFINITY, INFINITY, INFINITY, INFINITY, INFINITY, INFINITY, INFINITY};
    int j = 0;
    for (; j + 8 <= nb; j += 8) {
        fl__v8f v, x;
        memcpy(&v, row + j, sizeof v);
        memcpy(&x, xn + j, sizeof x);
        v = v + x + qn;
        memcpy(row + j, &v, sizeof v);
        fl__v8i lt = v < m;
        m = (fl__v8f)(((fl__v8i)v & lt) | ((fl__v8i)m & ~lt));
    }
    float r = INFINITY;
    for (int l = 0; l < 8; l++) r = m[l] < r ? m[l] : r;
    for (; j < nb; j++) {
        row[j] += xn[j] + qn;
        r = row[j] < r ? row[j] : r;
    }
    return r;
}

/* sum_j exp(-(v[j] - mn) / 2), all v[j] >= mn. exp as 2^n e^r, |r| <= ln2/2, with a degree-6
 * Taylor polynomial (relative error ~1e-7, float's own), in 8-wide vectors; arguments below
 * -87 (terms under 1e-38 of the largest) are clamped there, which changes the sum by at most
 * n_train * 1e-38 relative. */
FL_HOT_CLONES
static double lsa_expsum(const float *v, float mn, int nb) {
    fl__v8f acc = {0, 0, 0, 0, 0, 0, 0, 0}, lim = acc - 87.0f;
    int j = 0;
    for (; j + 8 <= nb; j += 8) {
        fl__v8f x;
        memcpy(&x, v + j, sizeof x);
        fl__v8f t = (mn - x) * 0.5f;
        fl__v8i lo = t < lim;
        t = (fl__v8f)(((fl__v8i)t & ~lo) | ((fl__v8i)lim & lo));
        /* n = round(t / ln 2) by the 1.5 * 2^23 trick (exact for |n| < 2^22) */
        fl__v8f n = (t * 1.44269504f + 12582912.0f) - 12582912.0f;
        fl__v8f r = t - n * 0.693145752f - n * 1.42860677e-06f;
        fl__v8f p = 1.0f + r * (1.0f + r * (0.5f + r * (1.6666667e-1f + r * (4.1666668e-2f +
                    r * (8.3333338e-3f + r * 1.3888889e-3f)))));
        fl__v8i e = (__builtin_convertvector(n, fl__v8i) + 127) << 23;
        acc += p * (fl__v8f)e;
    }
    double s = 0;
    for (int l = 0; l < 8; l++) s += acc[l];
    for (; j < nb; j++) s += exp(0.5 * ((double)mn - v[j]));
    return s;
}

typedef struct lsa_job {
    const fl_sa *sa;
    const float *q;
    int64_t m;
    int c, mb;
    const int64_t *self;
    double *out;
    uint8_t *failed; /* [slots] */
} lsa_job;

/* Blocks b0..b1-1 of J->mb inputs each: one thread's share. */
static void lsa_range(void *ctx, int64_t b0, int64_t b1, int tid) {
    const lsa_job *J = ctx;
    const fl_sa *sa = J->sa;
    int c = J->c, MB = J->mb;
    const int64_t *self = J->self;
    int64_t d = sa->d, s0 = sa->start[c], s1 = sa->start[c + 1];
    const double *W = sa->W + (int64_t)c * d * d, *mu = sa->mu + (int64_t)c * d;
    float *zq = fl_alloc(sizeof(float) * (size_t)(MB * d));
    float *buf = fl_alloc(sizeof(float) * (size_t)MB * LSA_NB);
    double *zd = malloc(sizeof(double) * (size_t)(MB * d + 3 * d));
    float *qn = malloc(sizeof(float) * (size_t)MB), *mn = malloc(sizeof(float) * (size_t)MB);
    double *sum = malloc(sizeof(double) * (size_t)MB);
    int64_t *imin = malloc(sizeof(int64_t) * (size_t)MB);
    if (!zq || !buf || !zd || !qn || !mn || !sum || !imin) {
        J->failed[tid] = 1;
        goto out;
    }
    double *r = zd + MB * d, *zt = r + d, *rt = zt + d;
    for (int64_t blk = b0; blk < b1; blk++) {
        int64_t q0 = blk * MB;
        int mb = (int)(J->m - q0 < MB ? J->m - q0 : MB);
        for (int i = 0; i < mb; i++) {
            double *z = zd + (int64_t)i * d;
            whiten(W, mu, J->q + (q0 + i) * d, r, z, d);
            for (int64_t j = 0; j < d; j++) zq[i * d + j] = (float)z[j];
            qn[i] = (float)fl__sa_sqnorm(zq + i * d, d);
            mn[i] = INFINITY;
            sum[i] = 0;
            imin[i] = -1;
        }
        for (int64_t t0 = s0; t0 < s1; t0 += LSA_NB) {
            int nb = (int)(s1 - t0 < LSA_NB ? s1 - t0 : LSA_NB);
            /* buf[i, j] = -2 zq_i . z_j */
            fl_sgemm(0, 1, mb, nb, (int)d, -2.0f, zq, (int)d, sa->xg + t0 * d, (int)d, 0.0f, buf,
                     nb);
            const float *xn = sa->xn + t0;
            for (int i = 0; i < mb; i++) {
                float *row = buf + (int64_t)i * nb;
                int64_t me = self ? self[q0 + i] - t0 : -1;
                if (me >= 0 && me < nb) row[me] = INFINITY; /* leave-one-out */
                float bmin = lsa_dist_row(row, xn, qn[i], nb);
                if (bmin < mn[i]) {
                    if (sum[i] > 0) sum[i] *= exp(-0.5 * ((double)mn[i] - bmin));
                    int j = 0;
                    while (row[j] != bmin) j++;
                    mn[i] = bmin;
                    imin[i] = t0 + j;
                }
                /* A block whose nearest trace is e^-LSA_SKIP below the largest term adds
                 * less than n_train e^-LSA_SKIP relative: skip it. */
                if (0.5f * (bmin - mn[i]) < LSA_SKIP) sum[i] += lsa_expsum(row, mn[i], nb);
            }
        }
        for (int i = 0; i < mb; i++) {
            /* Dominant term exactly: the nearest trace whitened again in double. */
            whiten(W, mu, sa->raw + imin[i] * d, rt, zt, d);
            const double *z = zd + (int64_t)i * d;
            double d2 = 0;
            for (int64_t j = 0; j < d; j++) d2 += (z[j] - zt[j]) * (z[j] - zt[j]);
            double rest = (sum[i] - 1.0) * exp(0.5 * (d2 - (double)mn[i]));
            double logsum = -0.5 * d2 + log1p(rest > 0 ? rest : 0);
            double lognorm = sa->lognorm[c];
            if (self && self[q0 + i] >= 0) /* the mean over the n_c - 1 other kernels */
                lognorm += log((double)(s1 - s0)) - log((double)(s1 - s0 - 1));
            J->out[q0 + i] = -(logsum + lognorm);
        }
    }
out:
    fl_free(zq);
    fl_free(buf);
    free(zd);
    free(qn);
    free(mn);
    free(sum);
    free(imin);
}

fl_status fl__sa_lsa_score(fl_sa *sa, const float *q, int64_t m, int c, const int64_t *self,
                           double *out, fl_err *e) {
    int slots = fl_parallel_slots(), mb = fl__sa_block(m, LSA_MB);
    uint8_t *failed = calloc((size_t)slots, 1);
    if (!failed) return fl_fail(e, FL_ERR_NOMEM, "out of memory for LSA blocks");
    lsa_job J = {sa, q, m, c, mb, self, out, failed};
    fl_parallel_for((m + mb - 1) / mb, lsa_range, &J);
    int bad = 0;
    for (int t = 0; t < slots; t++) bad |= failed[t];
    free(failed);
    return bad ? fl_fail(e, FL_ERR_NOMEM, "out of memory for LSA blocks") : FL_OK;
}

/* ---- MDSA --------------------------------------------------------------------------------- */
fl_status fl__sa_mdsa_score(fl_sa *sa, const float *q, int64_t m, int c, double *out, fl_err *e) {
    int64_t d = sa->d;
    double *r = malloc(sizeof(double) * (size_t)(2 * d));
    if (!r) return fl_fail(e, FL_ERR_NOMEM, "out of memory for MDSA");
    const double *W = sa->W + (int64_t)c * d * d, *mu = sa->mu + (int64_t)c * d;
    for (int64_t i = 0; i < m; i++) {
        whiten(W, mu, q + i * d, r, r + d, d);
        double s = 0;
        for (int64_t j = 0; j < d; j++) s += r[d + j] * r[d + j];
        out[i] = sqrt(s);
    }
    free(r);
    return FL_OK;
}
