/* sa_int.h — the inside of an fl_sa, shared by sa.c (building, validation, dispatch),
 * sa_gauss.c (the Gaussian pieces of LSA and MDSA, MDSA), sa_lsa.c (LSA) and sa_nn.c (DSA).
 *
 * Layout. The training traces are kept sorted by predicted class (stably, so within a class
 * they stay in their original order, which is the order sadl's class-filtered arrays have and
 * decides ties the same way): class c owns rows start[c] .. start[c+1]-1. Only the columns in
 * use are kept (the neuron subset, minus the neurons dropped by the variance threshold).
 *
 * Scoring groups the inputs by predicted class, so every kernel sees a block of inputs of one
 * class c and compares them with contiguous row ranges of the training arrays.
 */
#ifndef FLARE_SA_INT_H
#define FLARE_SA_INT_H

#include "flare/sa.h"

struct fl_sa {
    fl_sa_opts o;
    int64_t dim;      /* width of the traces handed in */
    int64_t d;        /* columns in use */
    int64_t *cols;    /* [d] their indices in the traces handed in */
    int C;            /* classes */
    int64_t n;        /* training traces */
    int64_t *start;   /* [C+1] class row ranges */
    int64_t *rank;    /* [n] sorted row of each training trace (by its index as handed in) */
    float *raw;       /* [n, d] training traces (columns in use), sorted by class */
    /* Float rows for the GEMM distance kernels. DSA: raw minus the training mean (distances
     * do not change; the norms, and with them the rounding error of |a|^2+|b|^2-2ab, shrink).
     * LSA: each class's rows whitened by its kernel covariance. MDSA: unused. */
    float *xg;        /* [n, d] */
    float *xn;        /* [n] squared norms of the xg rows */
    double *xd;       /* LSA: [n, d] the whitened rows in double, for the kernels that matter */
    double *gmean;    /* [d] DSA centring */
    /* LSA and MDSA, per class (present classes only): */
    double *mu;       /* [C, d] class means */
    double *W;        /* [C, d, d] inverse of the lower Cholesky factor of the (kernel or
                       * class) covariance: whitening is z = W (x - mu) */
    double *lognorm;  /* [C] LSA: -(d/2) log(2 pi) - log det L - log n_c */
    /* DSA (Kim): each training row's distance to its nearest other-class row; NaN until
     * needed (or all at once with dsa_precompute). */
    double *nb;       /* [n] */
    int64_t absent;   /* NaN results of the last scoring call */
};

/* The scoring kernels take m inputs q[m, d] (columns in use, finite), all predicted as class
 * c (present), and write out[m]. self (NULL, or [m]) gives, for inputs that are training
 * traces themselves, their sorted row (-1 for none): that row is left out (leave-one-out). */

/* Per-class Gaussian pieces for LSA and MDSA and the MDSA score (sa_gauss.c), the LSA score
 * (sa_lsa.c). MDSA ignores self. */
fl_status fl__sa_gauss_build(fl_sa *sa, fl_err *e);
/* z = W (x - mu), W lower-triangular [d,d]; r: d doubles of scratch. */
void fl__sa_whiten(const double *W, const double *mu, const float *x, double *r, double *z,
                   int64_t d);
fl_status fl__sa_lsa_score(fl_sa *sa, const float *q, int64_t m, int c, const int64_t *self,
                           double *out, fl_err *e);
fl_status fl__sa_mdsa_score(fl_sa *sa, const float *q, int64_t m, int c, double *out,
                            fl_err *e);

/* Tests: on = 1 computes every LSA input again with every kernel exact (the path taken for the
 * inputs whose float tail is too heavy to trust), so that path is checked on any data. */
void fl__sa_lsa_all_exact(int on);

/* Nearest neighbours and DSA (sa_nn.c). */
fl_status fl__sa_dsa_build(fl_sa *sa, fl_err *e);
fl_status fl__sa_dsa_score(fl_sa *sa, const float *q, int64_t m, int c, const int64_t *self,
                           double *out, fl_err *e);

/* Eight floats / int32s as one GCC vector (AVX2 in the target_clones("avx2") kernels, two
 * SSE halves otherwise). Comparisons give int masks (-1 / 0). */
typedef float fl__v8f __attribute__((vector_size(32)));
typedef int32_t fl__v8i __attribute__((vector_size(32)));

/* Inputs per block when m inputs are split over the thread pool (fl_parallel_for over
 * blocks): at most max, and small enough that every thread gets a block. A result never
 * depends on the block it was computed in. */
static inline int fl__sa_block(int64_t m, int max) {
    int64_t T = fl_parallel_slots(), b = (m + T - 1) / T;
    return b > max ? max : b < 1 ? 1 : (int)b;
}

/* min_j (row[j] + xn[j] + c) over nb values; out (NULL, or row itself) receives the sums
 * (sa_rowmin.c: the GEMM blocks' squared distances). */
float fl__sa_row_min(const float *row, const float *xn, float c, int nb, float *out);

/* Squared norm of a float row, summed in double. */
static inline double fl__sa_sqnorm(const float *x, int64_t d) {
    double s = 0;
    for (int64_t j = 0; j < d; j++) s += (double)x[j] * x[j];
    return s;
}

#endif
