/* The Inception Score and the Fréchet distance (quality.h has the formulas). The symmetric
 * eigen-decompositions are LAPACK's dsyevd, from the LAPACK that Debian's OpenBLAS carries
 * (no LAPACKE: the Fortran entry point is declared here). */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "flare/quality.h"

/* LAPACK's dsyevd: eigenvalues (ascending) and, with jobz 'V', eigenvectors of a symmetric
 * matrix. The two trailing size_t are the lengths of the character arguments that gfortran
 * passes hidden after the others. */
extern void dsyevd_(const char *jobz, const char *uplo, const int *n, double *a, const int *lda,
                    double *w, double *work, const int *lwork, int *iwork, const int *liwork,
                    int *info, size_t jobz_len, size_t uplo_len);

/* Eigenvalues w[d] of the symmetric row-major a[d, d]; with vectors, row j of a becomes the
 * eigenvector of w[j] (LAPACK writes column j of its column-major view, which is our row j).
 * Either triangle works: the matrix is symmetric. */
static fl_status sym_eig(int d, double *a, double *w, int vectors, fl_err *e) {
    const char *jobz = vectors ? "V" : "N";
    int lwork = -1, liwork = -1, info = 0, iq = 0;
    double wq = 0;
    dsyevd_(jobz, "U", &d, a, &d, w, &wq, &lwork, &iq, &liwork, &info, 1, 1);
    if (info != 0) return fl_fail(e, FL_ERR_ARG, "dsyevd workspace query failed (info %d)", info);
    lwork = (int)wq;
    liwork = iq > 0 ? iq : 1;
    double *work = malloc(sizeof(double) * (size_t)(lwork > 0 ? lwork : 1));
    int *iwork = malloc(sizeof(int) * (size_t)liwork);
    if (!work || !iwork) {
        free(work);
        free(iwork);
        return fl_fail(e, FL_ERR_NOMEM, "out of memory (%d x %d eigen-decomposition)", d, d);
    }
    dsyevd_(jobz, "U", &d, a, &d, w, work, &lwork, iwork, &liwork, &info, 1, 1);
    free(work);
    free(iwork);
    if (info != 0)
        return fl_fail(e, FL_ERR_NAN, "the %d x %d eigen-decomposition did not converge "
                       "(dsyevd info %d)", d, d, info);
    return FL_OK;
}

/* ---- IS ----------------------------------------------------------------------------------- */
fl_status fl_quality_is(const float *prob, int64_t n, int k, int splits, double *mean,
                        double *std, fl_err *e) {
    if (n < 2) return fl_fail(e, FL_ERR_ARG, "the Inception Score needs at least 2 images, got %lld",
                              (long long)n);
    if (k < 1) return fl_fail(e, FL_ERR_ARG, "the Inception Score needs at least 1 class");
    if (splits < 1 || splits > n)
        return fl_fail(e, FL_ERR_ARG, "the Inception Score in %d splits needs at least %d images, "
                       "got %lld", splits, splits, (long long)n);
    for (int64_t i = 0; i < n; i++) {
        double s = 0;
        for (int j = 0; j < k; j++) {
            float p = prob[i * k + j];
            if (!isfinite(p) || p < 0)
                return fl_fail(e, FL_ERR_NAN, "image %lld: class probability %d is %g, not a "
                               "probability", (long long)i, j, (double)p);
            s += p;
        }
        /* logits passed by mistake are the likely cause */
        if (fabs(s - 1) > 1e-3)
            return fl_fail(e, FL_ERR_ARG, "image %lld: class probabilities sum to %g, not 1 "
                           "(pass the softmax of the logits)", (long long)i, s);
    }
    double *py = malloc(sizeof(double) * (size_t)k), sum = 0, sum2 = 0;
    if (!py) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    for (int s = 0; s < splits; s++) {
        int64_t lo = n * s / splits, hi = n * (s + 1) / splits;
        memset(py, 0, sizeof(double) * (size_t)k);
        for (int64_t i = lo; i < hi; i++)
            for (int j = 0; j < k; j++) py[j] += prob[i * k + j];
        for (int j = 0; j < k; j++) py[j] /= (double)(hi - lo);
        double kl = 0;
        for (int64_t i = lo; i < hi; i++)
            for (int j = 0; j < k; j++) {
                double p = prob[i * k + j];
                if (p > 0) kl += p * (log(p) - log(py[j])); /* p > 0 implies py[j] > 0 */
            }
        double score = exp(kl / (double)(hi - lo));
        sum += score;
        sum2 += score * score;
    }
    free(py);
    double m = sum / splits, var = sum2 / splits - m * m;
    *mean = m;
    if (std) *std = var > 0 ? sqrt(var) : 0;
    return FL_OK;
}

fl_status fl_quality_shuffle_rows(float *x, int64_t n, int width, uint64_t seed, fl_err *e) {
    if (n < 2) return FL_OK;
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)n);
    float *y = malloc(sizeof(float) * (size_t)n * (size_t)width);
    if (!idx || !y) {
        free(idx), free(y);
        return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    }
    fl_rng r;
    fl_rng_seed(&r, seed);
    for (int64_t i = 0; i < n; i++) idx[i] = i;
    fl_rng_shuffle(&r, idx, n);
    for (int64_t i = 0; i < n; i++)
        memcpy(y + i * width, x + idx[i] * width, sizeof(float) * (size_t)width);
    memcpy(x, y, sizeof(float) * (size_t)n * (size_t)width);
    free(idx), free(y);
    return FL_OK;
}

/* ---- moments ------------------------------------------------------------------------------ */
void fl_moments_free(fl_moments *m) {
    if (!m) return;
    free(m->mu);
    free(m->cov);
    memset(m, 0, sizeof *m);
}

fl_status fl_quality_moments(const float *x, int64_t n, int d, fl_moments *out, fl_err *e) {
    memset(out, 0, sizeof *out);
    if (n < 2) return fl_fail(e, FL_ERR_ARG, "a covariance needs at least 2 feature vectors, got %lld",
                              (long long)n);
    if (d < 1) return fl_fail(e, FL_ERR_ARG, "feature vectors of %d values", d);
    enum { BLOCK = 256 };
    double *mu = calloc((size_t)d, sizeof(double));
    double *cov = calloc((size_t)d * (size_t)d, sizeof(double));
    double *blk = malloc(sizeof(double) * (size_t)d * BLOCK);
    if (!mu || !cov || !blk) {
        free(mu), free(cov), free(blk);
        return fl_fail(e, FL_ERR_NOMEM, "out of memory (%d x %d covariance)", d, d);
    }
    for (int64_t i = 0; i < n; i++)
        for (int j = 0; j < d; j++) {
            float v = x[i * d + j];
            if (!isfinite(v)) {
                free(mu), free(cov), free(blk);
                return fl_fail(e, FL_ERR_NAN, "feature vector %lld: value %d is %g", (long long)i,
                               j, (double)v);
            }
            mu[j] += v;
        }
    for (int j = 0; j < d; j++) mu[j] /= (double)n;
    /* Centred first (two passes), then cov += blk^T blk a block of vectors at a time: the
     * one-pass sum of squares loses the digits that the mean takes. */
    for (int64_t i0 = 0; i0 < n; i0 += BLOCK) {
        int nb = (int)(n - i0 < BLOCK ? n - i0 : BLOCK);
        for (int r = 0; r < nb; r++)
            for (int j = 0; j < d; j++) blk[r * d + j] = x[(i0 + r) * d + j] - mu[j];
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, d, nb, 1.0, blk, d, 1.0, cov, d);
    }
    free(blk);
    for (int a = 0; a < d; a++)
        for (int b = a; b < d; b++) {
            double v = cov[a * d + b] / (double)(n - 1);
            cov[a * d + b] = cov[b * d + a] = v;
        }
    out->n = n;
    out->d = d;
    out->mu = mu;
    out->cov = cov;
    return FL_OK;
}

/* ---- FID ---------------------------------------------------------------------------------- */
fl_status fl_quality_fid(const fl_moments *a, const fl_moments *b, double *fid, fl_err *e) {
    if (a->d != b->d)
        return fl_fail(e, FL_ERR_SHAPE, "FID between features of %d and of %d values: the two "
                       "sets must come from the same layer", a->d, b->d);
    int d = a->d;
    size_t dd = (size_t)d * (size_t)d;
    double *v = malloc(sizeof(double) * dd), *t = malloc(sizeof(double) * dd);
    double *sq = malloc(sizeof(double) * dd), *p = malloc(sizeof(double) * dd);
    double *w = malloc(sizeof(double) * (size_t)d);
    fl_status st = FL_OK;
    if (!v || !t || !sq || !p || !w) {
        st = fl_fail(e, FL_ERR_NOMEM, "out of memory (%d x %d matrices)", d, d);
        goto out;
    }
    /* sq = S_a^(1/2) = V^T diag(sqrt(max(l, 0))) V, V's rows the eigenvectors */
    memcpy(v, a->cov, sizeof(double) * dd);
    if ((st = sym_eig(d, v, w, 1, e)) != FL_OK) goto out;
    for (int j = 0; j < d; j++) {
        double s = w[j] > 0 ? sqrt(w[j]) : 0;
        for (int i = 0; i < d; i++) t[j * d + i] = s * v[j * d + i];
    }
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, d, d, d, 1.0, v, d, t, d, 0.0, sq, d);
    /* p = sq S_b sq: symmetric PSD, similar to S_a S_b (the same eigenvalues) */
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, d, d, d, 1.0, sq, d, b->cov, d, 0.0,
                t, d);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, d, d, d, 1.0, t, d, sq, d, 0.0, p, d);
    for (int i = 0; i < d; i++)
        for (int j = i + 1; j < d; j++) p[i * d + j] = p[j * d + i] = 0.5 * (p[i * d + j] + p[j * d + i]);
    if ((st = sym_eig(d, p, w, 0, e)) != FL_OK) goto out;
    double tr_sqrt = 0, tr = 0, diff = 0;
    for (int j = 0; j < d; j++) {
        if (w[j] > 0) tr_sqrt += sqrt(w[j]);
        tr += a->cov[(size_t)j * d + j] + b->cov[(size_t)j * d + j];
        double dm = a->mu[j] - b->mu[j];
        diff += dm * dm;
    }
    double f = diff + tr - 2 * tr_sqrt;
    if (!isfinite(f)) {
        st = fl_fail(e, FL_ERR_NAN, "FID is %g: the features' covariances are not finite", f);
        goto out;
    }
    *fid = f > 0 ? f : 0;
out:
    free(v), free(t), free(sq), free(p), free(w);
    return st;
}
