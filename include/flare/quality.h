/* quality.h — how realistic a set of generated test inputs is: the Inception Score (IS) and
 * the Fréchet Inception Distance (FID), on the features of a classifier of the same domain.
 *
 *     fl_quality_feats fr, ff;                    // features + class probabilities per image
 *     fl_quality_features(m, NULL, real, 256, &fr, &e);   // NULL: the default layer (below)
 *     fl_quality_features(m, NULL, fake, 256, &ff, &e);
 *     double is_mean, is_std, fid;
 *     fl_quality_is(fr.prob, fr.n, fr.k, 10, &is_mean, &is_std, &e);
 *     fl_moments a, b;
 *     fl_quality_moments(fr.x, fr.n, fr.d, &a, &e);
 *     fl_quality_moments(ff.x, ff.n, ff.d, &b, &e);
 *     fl_quality_fid(&a, &b, &fid, &e);
 *
 * IS (Salimans et al., 2016) = exp(E_x[KL(p(y|x) || p(y))]), p(y) the mean of p(y|x) over the
 * set: high when every image is confidently one class and the classes are balanced; 1 for
 * uniform predictions, K for K balanced, perfectly confident classes. As in the original code
 * (openai/improved-gan), the set is cut into `splits` contiguous parts, IS is computed on each,
 * and the mean and the population standard deviation of the parts are reported; 10 splits by
 * default. 0·log 0 counts as 0.
 *
 * FID (Heusel et al., 2017) = ||mu_r - mu_f||^2 + Tr(S_r + S_f - 2 (S_r S_f)^(1/2)), the
 * Fréchet distance between Gaussians fitted to the two sets' features (means and covariances
 * with n - 1, as np.cov). The trace of the square root is computed without forming the
 * non-symmetric product: with A = S_r^(1/2) (symmetric, from LAPACK's dsyevd), S_r S_f is
 * similar to A S_f A, which is symmetric positive semi-definite, so Tr((S_r S_f)^(1/2)) is the
 * sum of the square roots of A S_f A's eigenvalues (dsyevd again). Eigenvalues that rounding
 * makes slightly negative are taken as 0, and a negative total (rounding, for identical sets)
 * as 0. Everything is accumulated in double. docs/quality.md has the long version.
 */
#ifndef FLARE_QUALITY_H
#define FLARE_QUALITY_H

#include "flare/data.h"
#include "flare/model.h"

#define FL_QUALITY_SPLITS 10 /* IS splits of the original code */

/* ---- the scores ----------------------------------------------------------------------------- */
/* IS of n probability vectors prob[n, k] (rows summing to 1) in `splits` contiguous parts:
 * mean and population std of the parts' scores (std may be NULL). FL_ERR_ARG when n < 2,
 * splits < 1 or splits > n; FL_ERR_NAN when a value is negative or not finite. */
fl_status fl_quality_is(const float *prob, int64_t n, int k, int splits, double *mean,
                        double *std, fl_err *e);

/* Permute the n rows of x[n, width] in place, the same way for the same seed (fl_rng_shuffle).
 * For IS in splits of a set stored in some order — a failures folder is sorted by class pair,
 * so contiguous parts would each hold few classes and score low; torch-fidelity shuffles
 * before splitting too. The original code and fl_quality_is take the order as it is. */
fl_status fl_quality_shuffle_rows(float *x, int64_t n, int width, uint64_t seed, fl_err *e);

/* The mean and covariance of a set of feature vectors. */
typedef struct fl_moments {
    int64_t n;   /* vectors */
    int d;       /* values per vector */
    double *mu;  /* [d] */
    double *cov; /* [d, d], row-major, symmetric, divided by n - 1 */
} fl_moments;

/* Moments of x[n, d]. FL_ERR_ARG for n < 2 (no covariance) or d < 1, FL_ERR_NAN naming the
 * vector and value when one is not finite. */
fl_status fl_quality_moments(const float *x, int64_t n, int d, fl_moments *out, fl_err *e);
void fl_moments_free(fl_moments *m);

/* FID between two sets' moments; FL_ERR_SHAPE when their dimensions differ. */
fl_status fl_quality_fid(const fl_moments *a, const fl_moments *b, double *fid, fl_err *e);

/* ---- features from a classifier ------------------------------------------------------------ */
typedef struct fl_quality_feats {
    int64_t n;   /* images */
    int d;       /* feature values per image (the layer's output, flattened) */
    int k;       /* classes (the model's first output) */
    float *x;    /* [n, d] */
    float *prob; /* [n, k]: softmax of the first output (as is when a Softmax node makes it) */
    char layer[256]; /* the layer the features came from */
} fl_quality_feats;

/* The default feature layer: the input of the last Gemm or MatMul node (the penultimate
 * layer of a classifier ending in a dense layer), or FL_ERR_NOTFOUND when there is none. */
fl_status fl_quality_default_layer(const fl_model *m, const char **name, fl_err *e);

/* Run d through m in batches of `batch` and collect the values of `layer` (NULL: the default
 * layer) and the class probabilities. FL_ERR_NOTFOUND for an unknown layer. */
fl_status fl_quality_features(fl_model *m, const char *layer, const fl_dataset *d, int batch,
                              fl_quality_feats *out, fl_err *e);
void fl_quality_feats_free(fl_quality_feats *f);

/* ---- the image sets ------------------------------------------------------------------------ */
/* Load a set of images: a folder of `flare nn fuzz` .npy files — a campaign's failures/
 * (<true>-<pred>/NAME.npy) or queue/ (NAME.npy), every float32 [1,c,h,w] (or [c,h,w]) image in it,
 * in name order, used as they are (they are model inputs already) — or else any dataset spec
 * (data.h), loaded with `scale` and `limit` as fl_dataset_load does. limit > 0 also keeps only
 * the first `limit` .npy images. A campaign folder itself is an error that names its
 * failures/ and queue/. */
fl_status fl_quality_images_load(const char *spec, const fl_scale *scale, int64_t limit,
                                 fl_dataset **out, fl_err *e);

#endif
