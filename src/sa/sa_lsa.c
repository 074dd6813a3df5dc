/* LSA scoring: -log of scipy.stats.gaussian_kde (scipy 1.10, _kde.py) of each input under the
 * KDE of its predicted class's training traces x_1..x_n (d neurons):
 *     logpdf(q) = logsumexp_i(-|z_q - z_i|^2 / 2) - (d/2) log(2 pi) - log det L - log n
 * with the class's whitening z = L^-1 (x - mu) (sa_gauss.c). The log-sum-exp runs online over
 * blocks of training traces (a running minimum distance and sums of exp(-(d2 - min)/2),
 * rescaled when the minimum drops), so no n_test x n_train matrix exists.
 *
 * Precision. The GEMM identity |a|^2 + |b|^2 - 2ab gives the float distances of a block of
 * 256 inputs x 1024 training traces at once, but it cancels: its error grows with the norms,
 * about d 2^-24 (|a|^2 + |b|^2), not with the distance. An input far from its class's mean
 * with training traces near it gets every kernel that matters wrong by that much; near
 * LSA = 0 even typical norms cost 1e-4 relative. So the float distances only sort the kernels:
 *   - near kernels, those above e^-8 of the largest (distance within LSA_NEAR of the
 *     smallest), are computed again exactly: distances by differences of the double rows,
 *     exp in double;
 *   - the tail keeps its float values, and a bound on its error is kept with it (each tail
 *     kernel is off by at most (d + 8) 2^-25 (|q|^2 + |x|^2) relative, plus the polynomial's
 *     and the summation's few ulp);
 *   - an input whose bound could move its LSA by more than LSA_TOL (1e-6) of itself is
 *     computed again with every kernel exact (on real traces: 0.07 to 0.4 % of the inputs).
 * Measured against a double brute-force KDE: 1e-8 relative at worst (docs/surprise.md). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/simd.h"
#include "sa/sa_int.h"

#define LSA_MB 256  /* inputs per block */
#define LSA_NB 1024 /* training traces per block */
#define LSA_SKIP 50.0f /* e^-50 = 2e-22 */
#define LSA_NEAR 16.0f /* distances within 16 of the smallest: kernels above e^-8 of the
                        * largest, computed exactly */
#define LSA_TOL 1e-6   /* the tail's error bound, relative to |LSA|, that forces a redo */

static _Atomic int all_exact; /* fl__sa_lsa_all_exact */
void fl__sa_lsa_all_exact(int on) { all_exact = on; }

typedef double v4d __attribute__((vector_size(32)));
typedef int64_t v4l __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));

/* d += the eight lanes of *f, widened to double (by pointer: a 32-byte vector argument's ABI
 * differs between AVX and baseline builds). */
static inline void widen_add(v4d *d, const fl__v8f *f) {
    v4f lo, hi;
    memcpy(&lo, f, sizeof lo);
    memcpy(&hi, (const char *)f + sizeof lo, sizeof hi);
    d[0] += __builtin_convertvector(lo, v4d);
    d[1] += __builtin_convertvector(hi, v4d);
}

/* The tail: out[0] += sum_j exp(-(v[j] - mn) / 2) over the v[j] > lim (all v[j] >= mn), and
 * out[1] += the same sum weighted by xn[j] (for the error bound). exp as 2^n e^r, |r| <= ln2/2,
 * with a degree-6 Taylor polynomial (relative error ~1e-7, float's own), in 8-wide vectors;
 * arguments below -87 (terms under 1e-38 of the largest) are clamped there. The float lanes
 * go into double every LSA_FLUSH groups, so a lane never sums more than LSA_FLUSH terms. The
 * first index of every group of 8 that holds a v[j] <= lim goes to near[] (their count is
 * returned in *n_near): the caller computes those kernels exactly. */
#define LSA_FLUSH 8
FL_HOT_CLONES
static void lsa_tailsum(const float *v, const float *xn, float mn, float lim, int nb, int *near,
                        int *n_near, double *out) {
    const fl__v8f zero = {0, 0, 0, 0, 0, 0, 0, 0}, lo87 = zero - 87.0f, limv = zero + lim;
    fl__v8f acc = zero, accx = zero;
    v4d ds[2] = {{0, 0, 0, 0}, {0, 0, 0, 0}}, dx[2] = {{0, 0, 0, 0}, {0, 0, 0, 0}};
    int j = 0, k = 0, g = 0;
    for (; j + 8 <= nb; j += 8) {
        fl__v8f x, w;
        memcpy(&x, v + j, sizeof x);
        memcpy(&w, xn + j, sizeof w);
        fl__v8i in = x <= limv;
        uint64_t bits[4];
        memcpy(bits, &in, sizeof bits);
        near[k] = j; /* without a branch: which groups hold near kernels is unpredictable */
        k += (bits[0] | bits[1] | bits[2] | bits[3]) != 0;
        fl__v8f t = (mn - x) * 0.5f;
        fl__v8i lo = t < lo87;
        t = (fl__v8f)(((fl__v8i)t & ~lo) | ((fl__v8i)lo87 & lo));
        /* n = round(t / ln 2) by the 1.5 * 2^23 trick (exact for |n| < 2^22) */
        fl__v8f n = (t * 1.44269504f + 12582912.0f) - 12582912.0f;
        fl__v8f r = t - n * 0.693145752f - n * 1.42860677e-06f;
        fl__v8f p = 1.0f + r * (1.0f + r * (0.5f + r * (1.6666667e-1f + r * (4.1666668e-2f +
                    r * (8.3333338e-3f + r * 1.3888889e-3f)))));
        fl__v8i e = (__builtin_convertvector(n, fl__v8i) + 127) << 23;
        fl__v8f term = (fl__v8f)((fl__v8i)(p * (fl__v8f)e) & ~in);
        acc += term;
        accx += term * w;
        if (++g == LSA_FLUSH) {
            widen_add(ds, &acc);
            widen_add(dx, &accx);
            acc = accx = zero;
            g = 0;
        }
    }
    widen_add(ds, &acc);
    widen_add(dx, &accx);
    v4d sv = ds[0] + ds[1], xv = dx[0] + dx[1];
    double s = sv[0] + sv[1] + sv[2] + sv[3], sx = xv[0] + xv[1] + xv[2] + xv[3];
    if (j < nb) {
        int any = 0;
        for (int i = j; i < nb; i++) {
            if (v[i] <= lim) {
                any = 1;
            } else {
                double term = exp(0.5 * ((double)mn - v[i]));
                s += term;
                sx += term * xn[i];
            }
        }
        if (any) near[k++] = j;
    }
    *n_near = k;
    out[0] += s;
    out[1] += sx;
}

/* sum_k exp(-(d2[k] - ref) / 2) in double: exp as 2^n e^r, |r| <= ln2/2, r = t - n ln 2 in
 * two parts (fdlibm's), e^r by its Taylor polynomial to degree 12 (truncation below 2e-16
 * relative), in 4-wide vectors; 2^n from the bits of the rounding constant. Arguments are
 * clamped to [-708, 708] (terms below e^-708 of the reference: nothing). */
FL_HOT_CLONES
static double expsum_d(const double *d2, int n, double ref) {
    const v4d zero = {0, 0, 0, 0}, lo = zero - 708.0, hi = zero + 708.0;
    const v4d shifter = zero + 6755399441055744.0; /* 1.5 * 2^52 */
    v4d acc = zero;
    int k = 0;
    for (; k + 4 <= n; k += 4) {
        v4d x;
        memcpy(&x, d2 + k, sizeof x);
        v4d t = (ref - x) * 0.5;
        v4l below = t < lo, above = t > hi;
        t = (v4d)(((v4l)t & ~(below | above)) | ((v4l)lo & below) | ((v4l)hi & above));
        v4d kd = t * 1.4426950408889634 + shifter, nn = kd - shifter;
        v4d r = t - nn * 6.93147180369123816490e-01 - nn * 1.90821492927058770002e-10;
        v4d p = zero + 1 / 479001600.0;
        p = p * r + 1 / 39916800.0;
        p = p * r + 1 / 3628800.0;
        p = p * r + 1 / 362880.0;
        p = p * r + 1 / 40320.0;
        p = p * r + 1 / 5040.0;
        p = p * r + 1 / 720.0;
        p = p * r + 1 / 120.0;
        p = p * r + 1 / 24.0;
        p = p * r + 1 / 6.0;
        p = p * r + 0.5;
        p = p * r + 1.0;
        p = p * r + 1.0;
        v4l bits;
        memcpy(&bits, &kd, sizeof bits); /* the low bits hold n */
        v4l sc = (bits + 1023) << 52;
        v4d two_n;
        memcpy(&two_n, &sc, sizeof two_n);
        acc += p * two_n;
    }
    double s = acc[0] + acc[1] + acc[2] + acc[3];
    for (; k < n; k++) s += exp(0.5 * (ref - d2[k]));
    return s;
}

/* Squared distance of two double rows, by differences. */
static inline double sqdist(const double *a, const double *b, int64_t d) {
    double s = 0;
    for (int64_t k = 0; k < d; k++) {
        double t = a[k] - b[k];
        s += t * t;
    }
    return s;
}

/* out[k] = sqdist(z, x + idx[k] d), four rows at a time (four independent sums in flight, for
 * the small d where one sum's additions would wait on each other). */
FL_HOT_CLONES
static void sqdists(const double *z, const double *x, int64_t d, const int *idx, int n,
                    double *out) {
    int k = 0;
    for (; k + 4 <= n; k += 4) {
        const double *a = x + idx[k] * d, *b = x + idx[k + 1] * d, *c = x + idx[k + 2] * d,
                     *e = x + idx[k + 3] * d;
        double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (int64_t j = 0; j < d; j++) {
            double t0 = z[j] - a[j], t1 = z[j] - b[j], t2 = z[j] - c[j], t3 = z[j] - e[j];
            s0 += t0 * t0, s1 += t1 * t1, s2 += t2 * t2, s3 += t3 * t3;
        }
        out[k] = s0, out[k + 1] = s1, out[k + 2] = s2, out[k + 3] = s3;
    }
    for (; k < n; k++) out[k] = sqdist(z, x + idx[k] * d, d);
}

typedef struct lsa_job {
    const fl_sa *sa;
    const float *q;
    int64_t m;
    int c, mb;
    const int64_t *self;
    double *out;
    uint8_t *failed; /* [slots] */
    _Atomic int64_t *redo; /* inputs computed again, all exact */
} lsa_job;

/* LSA of input i of the block, every kernel exact, in double: for the inputs whose float tail
 * is too heavy to trust (rare). z: the input whitened in double. */
static double lsa_exact(const fl_sa *sa, int c, const double *z, int64_t self_row, int *ni,
                        double *nd) {
    int64_t d = sa->d, s0 = sa->start[c], s1 = sa->start[c + 1];
    double m = INFINITY, s = 0;
    /* twice over the rows (the smallest distance, then the sum), LSA_NB at a time */
    for (int pass = 0; pass < 2; pass++)
        for (int64_t t0 = s0; t0 < s1; t0 += LSA_NB) {
            int k = 0;
            for (int64_t t = t0; t < s1 && t < t0 + LSA_NB; t++)
                if (t != self_row) ni[k++] = (int)(t - t0);
            sqdists(z, sa->xd + t0 * d, d, ni, k, nd);
            for (int j = 0; pass == 0 && j < k; j++) m = nd[j] < m ? nd[j] : m;
            if (pass == 1) s += expsum_d(nd, k, m);
        }
    return -0.5 * m + log(s);
}

/* Blocks b0..b1-1 of J->mb inputs each: one thread's share. Per input: mn, the smallest float
 * distance so far (the reference of both sums), near, the exact kernels within LSA_NEAR of it,
 * tail, the float kernels beyond, and tailx, those weighted by |x|^2 (the float distances'
 * error grows with |q|^2 + |x|^2). */
static void lsa_range(void *ctx, int64_t b0, int64_t b1, int tid) {
    const lsa_job *J = ctx;
    const fl_sa *sa = J->sa;
    int c = J->c, MB = J->mb;
    const int64_t *self = J->self;
    int64_t d = sa->d, s0 = sa->start[c], s1 = sa->start[c + 1];
    const double *W = sa->W + (int64_t)c * d * d, *mu = sa->mu + (int64_t)c * d;
    float *zq = fl_alloc(sizeof(float) * (size_t)(MB * d));
    float *buf = fl_alloc(sizeof(float) * (size_t)MB * LSA_NB);
    double *zd = malloc(sizeof(double) * (size_t)(MB * d + d));
    float *qn = malloc(sizeof(float) * (size_t)MB), *mn = malloc(sizeof(float) * (size_t)MB);
    double *near = malloc(sizeof(double) * (size_t)(3 * MB)), *tail = near + MB; /* tail, tailx */
    int *grp = malloc(sizeof(int) * (LSA_NB / 8 + 1));
    double *nd = malloc(sizeof(double) * LSA_NB); /* exact distances of a row's near kernels */
    int *ni = malloc(sizeof(int) * LSA_NB);       /* and their rows */
    int64_t redo = 0;
    if (!zq || !buf || !zd || !qn || !mn || !near || !grp || !nd || !ni) {
        J->failed[tid] = 1;
        goto out;
    }
    double *r = zd + MB * d;
    for (int64_t blk = b0; blk < b1; blk++) {
        int64_t q0 = blk * MB;
        int mb = (int)(J->m - q0 < MB ? J->m - q0 : MB);
        for (int i = 0; i < mb; i++) {
            double *z = zd + (int64_t)i * d;
            fl__sa_whiten(W, mu, J->q + (q0 + i) * d, r, z, d);
            for (int64_t j = 0; j < d; j++) zq[i * d + j] = (float)z[j];
            qn[i] = (float)fl__sa_sqnorm(zq + i * d, d);
            mn[i] = INFINITY;
            near[i] = tail[2 * i] = tail[2 * i + 1] = 0;
        }
        for (int64_t t0 = s0; t0 < s1; t0 += LSA_NB) {
            int nb = (int)(s1 - t0 < LSA_NB ? s1 - t0 : LSA_NB);
            /* buf[i, j] = -2 zq_i . z_j */
            fl_sgemm(0, 1, mb, nb, (int)d, -2.0f, zq, (int)d, sa->xg + t0 * d, (int)d, 0.0f, buf,
                     nb);
            const float *xn = sa->xn + t0;
            const double *xd = sa->xd + t0 * d;
            for (int i = 0; i < mb; i++) {
                float *row = buf + (int64_t)i * nb;
                int64_t me = self ? self[q0 + i] - t0 : -1;
                if (me >= 0 && me < nb) row[me] = INFINITY; /* leave-one-out */
                float bmin = fl__sa_row_min(row, xn, qn[i], nb, row);
                if (bmin < mn[i]) {
                    if (mn[i] < INFINITY) {
                        double f = exp(-0.5 * ((double)mn[i] - bmin));
                        near[i] *= f;
                        tail[2 * i] *= f;
                        tail[2 * i + 1] *= f;
                    }
                    mn[i] = bmin;
                }
                /* A block whose nearest trace is e^-LSA_SKIP below the largest term adds
                 * less than n_train e^-LSA_SKIP relative: skip it. */
                if (!(0.5f * (bmin - mn[i]) < LSA_SKIP)) continue;
                int ng;
                float lim = mn[i] + LSA_NEAR;
                lsa_tailsum(row, xn, mn[i], lim, nb, grp, &ng, tail + 2 * i);
                const double *z = zd + (int64_t)i * d;
                int k = 0;
                for (int g = 0; g < ng; g++)
                    for (int j = grp[g]; j < grp[g] + 8 && j < nb; j++)
                        ni[k] = j, k += row[j] <= lim;
                sqdists(z, xd, d, ni, k, nd);
                near[i] += expsum_d(nd, k, mn[i]);
            }
        }
        for (int i = 0; i < mb; i++) {
            double lognorm = sa->lognorm[c];
            int64_t me = self ? self[q0 + i] : -1;
            if (me >= 0) /* the mean over the n_c - 1 other kernels */
                lognorm += log((double)(s1 - s0)) - log((double)(s1 - s0 - 1));
            double tl = tail[2 * i], sum = near[i] + tl;
            double logsum = -0.5 * (double)mn[i] + log(sum);
            /* Bound the tail's error: each of its kernels is off by at most half its float
             * distance's error, (d + 8) 2^-24 (|q|^2 + |x|^2) (the identity's rounding and the
             * rows' rounding to float), plus the polynomial's 2 ulp and the float lanes'
             * LSA_FLUSH terms. If that could move LSA by more than LSA_TOL of itself, compute
             * this input again, all exact. */
            double u = FLT_EPSILON / 2;
            double err = u * (0.5 * (double)(d + 8) * ((double)qn[i] * tl + tail[2 * i + 1]) +
                              (2 + LSA_FLUSH) * tl) / sum;
            if (err > LSA_TOL * fabs(logsum + lognorm) || all_exact) {
                logsum = lsa_exact(sa, c, zd + (int64_t)i * d, me, ni, nd);
                redo++;
            }
            J->out[q0 + i] = -(logsum + lognorm);
        }
    }
    *J->redo += redo; /* atomic */
out:
    fl_free(zq);
    fl_free(buf);
    free(zd);
    free(qn);
    free(mn);
    free(near);
    free(grp);
    free(nd);
    free(ni);
}

fl_status fl__sa_lsa_score(fl_sa *sa, const float *q, int64_t m, int c, const int64_t *self,
                           double *out, fl_err *e) {
    int slots = fl_parallel_slots(), mb = fl__sa_block(m, LSA_MB);
    uint8_t *failed = calloc((size_t)slots, 1);
    if (!failed) return fl_fail(e, FL_ERR_NOMEM, "out of memory for LSA blocks");
    _Atomic int64_t redo = 0;
    lsa_job J = {sa, q, m, c, mb, self, out, failed, &redo};
    fl_parallel_for((m + mb - 1) / mb, lsa_range, &J);
    if (redo)
        fl_log(2, "sa: LSA of %lld of %lld inputs of class %d computed again, every kernel "
               "exact\n", (long long)redo, (long long)m, c);
    int bad = 0;
    for (int t = 0; t < slots; t++) bad |= failed[t];
    free(failed);
    return bad ? fl_fail(e, FL_ERR_NOMEM, "out of memory for LSA blocks") : FL_OK;
}

