/* sa.h — surprise adequacy (LSA, DSA, MDSA) and surprise coverage (LSC, DSC).
 *
 * Surprise adequacy (Kim, Feldt, Yoo, "Guiding Deep Learning System Testing using Surprise
 * Adequacy", ICSE 2019; reference code github.com/coinse/sadl) measures how different an
 * input is from the training data, as seen by one or more layers of the model. Each input has
 * an *activation trace*: its neuron values (neurons.h: the units of a dense layer, the channel
 * means of a convolutional layer), one float per neuron. SA compares a test input's trace with
 * the traces of the training inputs that the model predicts as the same class:
 *
 *   LSA   -log of a Gaussian kernel density estimate of the class's training traces at the
 *         trace (scipy.stats.gaussian_kde: Scott's rule, full covariance).
 *   DSA   |x - x_a| / |x_a - x_b|: x_a the nearest training trace of the predicted class, x_b
 *         the nearest training trace of any other class to x_a (variant NLC: to x itself).
 *   MDSA  Mahalanobis distance to the class mean.
 *
 * Usage: build once from the training traces, then score as often as needed (a fuzzer's
 * inner loop scores each mutant batch):
 *
 *     fl_sa_opts so;
 *     fl_sa_opts_init(&so, FL_SA_LSA);
 *     fl_sa *sa;
 *     if (fl_sa_new(train, train_pred, n_train, dim, &so, &sa, &e) != FL_OK) ... e.msg
 *     double *lsa = malloc(n * sizeof(double));
 *     fl_sa_score(sa, test, test_pred, n, lsa, &e);     // test [n, dim], lsa [n]
 *     fl_sa_free(sa);
 *
 * Traces are float32 rows [n, dim] (row-major), predictions int32 class indices. Traces can
 * come from any framework; fl_sa_traces collects them from a flare model.
 *
 * Every choice where the papers and tools differ is an option below; docs/surprise.md says
 * which source each default follows. Results for one input never depend on the other inputs
 * scored with it (the blocking over inputs is only for speed).
 *
 * Threading: an fl_sa is not safe to score from two threads at once (DSA caches distances in
 * it); each call splits its inputs in blocks over the thread pool (fl_parallel_for), and the
 * results do not depend on the thread count.
 */
#ifndef FLARE_SA_H
#define FLARE_SA_H

#include "flare/cover.h"
#include "flare/neurons.h"

typedef enum fl_sa_kind { FL_SA_LSA, FL_SA_DSA, FL_SA_MDSA } fl_sa_kind;

typedef enum fl_dsa_variant {
    FL_DSA_KIM, /* |x - x_a| / |x_a - x_b|, x_b nearest other-class trace to x_a (Kim et al.) */
    FL_DSA_NLC  /* |x - x_a| / |x - x_b|, x_b nearest other-class trace to x itself */
} fl_dsa_variant;

typedef struct fl_sa_opts {
    fl_sa_kind kind;
    /* LSA and MDSA: drop every neuron whose variance (ddof 0) over the training traces of ANY
     * class is below this (sadl's var_threshold, 1e-5). 0 keeps every neuron. DSA uses every
     * neuron (as sadl does). */
    double var_threshold;
    fl_dsa_variant dsa_variant; /* FL_DSA_KIM */
    /* MDSA: added to the diagonal of each class covariance before it is inverted (0: none,
     * as in dnn-tip's EmpiricalCovariance; raise it when a covariance is singular). */
    double mdsa_ridge;
    /* Number of classes; 0: 1 + the largest training prediction. Test predictions outside
     * [0, n_classes) or of a class without training traces score NaN (see fl_sa_absent). */
    int n_classes;
    /* Use only these trace columns (e.g. the important neurons of LRP, for LSAv / DSAv):
     * n_neurons indices into [0, dim), in the order given; NULL: every column. Copied. */
    const int64_t *neurons;
    int64_t n_neurons;
    /* DSA (Kim): compute every training trace's nearest other-class distance when the object
     * is built, instead of lazily for the training traces that turn out to be some test
     * input's x_a (and caching them). Costs one n_train x n_train distance pass up front. */
    int dsa_precompute;
} fl_sa_opts;

/* Defaults: var_threshold 1e-5, FL_DSA_KIM, mdsa_ridge 0, n_classes 0, all neurons. */
void fl_sa_opts_init(fl_sa_opts *o, fl_sa_kind kind);
/* "lsa" | "dsa" | "mdsa", and back. */
fl_status fl_sa_kind_parse(const char *s, fl_sa_kind *out, fl_err *e);
const char *fl_sa_kind_name(fl_sa_kind k);

typedef struct fl_sa fl_sa;

/* Build from n training traces train[n, dim] and their predicted classes pred[n] (copied; the
 * caller's arrays may be freed afterwards). Fails clearly (naming class, neuron, count) on:
 * NaN/Inf traces (FL_ERR_NAN), negative predictions, no training trace, a bad neuron index
 * (FL_ERR_ARG); and with FL_ERR_DATA, traces that cannot support the estimate: every neuron
 * dropped by the variance threshold, a class with too few traces or a singular covariance
 * (LSA/MDSA, with a hint to raise the threshold), DSA with fewer than two classes present. */
fl_status fl_sa_new(const float *train, const int32_t *pred, int64_t n, int64_t dim,
                    const fl_sa_opts *o, fl_sa **out, fl_err *e);
void fl_sa_free(fl_sa *sa);

/* out[i] = the SA of trace x[i] (x [n, dim], the same dim as training) predicted as pred[i].
 * n == 0 is fine (nothing happens). An input predicted as a class with no training traces
 * gets NaN and is counted in fl_sa_absent (a warning is logged at level 1); NaN/Inf traces
 * and negative predictions are errors. */
fl_status fl_sa_score(fl_sa *sa, const float *x, const int32_t *pred, int64_t n, double *out,
                      fl_err *e);

/* out[i] as fl_sa_score, and grad[i, dim] = d out[i] / d x[i] (zero for the columns SA does
 * not use, and for NaN results). LSA differentiates the kernel density; DSA holds its two
 * nearest neighbours fixed (the gradient of the distance ratio where they stay the nearest);
 * MDSA the Mahalanobis distance. What a fuzzer that climbs SA needs (DeepSA's exact mode). */
fl_status fl_sa_grad(fl_sa *sa, const float *x, const int32_t *pred, int64_t n, double *out,
                     float *grad, fl_err *e);

/* Leave-one-out SA of training traces: out[i] = the SA of training trace idx[i] (its index in
 * the arrays given to fl_sa_new), predicted as its own training prediction, against all the
 * other training traces (LSA: its own kernel left out of the mean; DSA: x_a is its nearest
 * other same-class trace, NaN when it has none; MDSA: the class statistics include it). The
 * SA distribution of the training set itself: a reference for thresholds and for default
 * coverage bounds. */
fl_status fl_sa_score_train(fl_sa *sa, const int64_t *idx, int64_t n, double *out, fl_err *e);

int64_t fl_sa_dim(const fl_sa *sa);        /* trace width expected (dim given to fl_sa_new) */
int64_t fl_sa_kept(const fl_sa *sa);       /* neurons actually used (subset, variance drop) */
int fl_sa_n_classes(const fl_sa *sa);
int64_t fl_sa_class_count(const fl_sa *sa, int c); /* training traces of class c */
int64_t fl_sa_absent(const fl_sa *sa);     /* NaN results of the last fl_sa_score call */

/* Collect activation traces: run m over d (eval mode, batches of `batch`, <= 0: 256) and
 * return traces[d->n, *dim] = the neuron values of layer set `layers` (neurons.h: a layer
 * name, "name,name", "all" or "conv+dense") and pred[d->n] = argmax of the model's first
 * output. Both malloc'd; free() them. */
fl_status fl_sa_traces(fl_model *m, const char *layers, const fl_dataset *d, int batch,
                       float **traces, int32_t **pred, int64_t *dim, fl_err *e);

/* ---- surprise coverage (LSC, DSC) -----------------------------------------------------------
 * k buckets over [lower, upper]; coverage = distinct buckets hit / k. Incremental: add SA
 * values as they come and learn whether they hit a new bucket. NaN values are ignored.
 *
 *   FL_SC_SADL   sadl's get_sc: bucket = np.digitize(v, np.linspace(lower, upper, k)), i.e.
 *                the number of the k equally spaced edges lower..upper that are <= v. Values
 *                in [lower, upper) fall in buckets 1..k-1, v >= upper in bucket k, v < lower
 *                in bucket 0 — so with values below lower the count can reach k + 1.
 *   FL_SC_EQUAL  k equal-width buckets [lower + i w, lower + (i+1) w), w = (upper-lower)/k,
 *                upper itself in the last one; values outside [lower, upper] are not counted.
 */
typedef enum fl_sc_mode { FL_SC_SADL, FL_SC_EQUAL } fl_sc_mode;

typedef struct fl_sc {
    int k;
    double lower, upper;
    fl_sc_mode mode;
    int64_t covered; /* distinct buckets hit so far */
    uint8_t *hit;    /* [k + 1] */
} fl_sc;

/* k >= 1 (k >= 2 for FL_SC_SADL), finite lower < upper. */
fl_status fl_sc_new(int k, double lower, double upper, fl_sc_mode mode, fl_sc **out, fl_err *e);
void fl_sc_free(fl_sc *sc);
/* The bucket of v, or -1 (NaN, or outside the range in FL_SC_EQUAL mode). */
int fl_sc_bucket(const fl_sc *sc, double v);
/* Add n values; returns how many new buckets they hit (0: no new coverage). */
int64_t fl_sc_add(fl_sc *sc, const double *sa, int64_t n);
double fl_sc_coverage(const fl_sc *sc); /* covered / k */
void fl_sc_reset(fl_sc *sc);
/* Default bounds from data: lower = min, upper = max of the finite values (sadl's upper bound
 * of 2000 is a constant tuned to its models; see docs/surprise.md). Returns 0 when there are
 * fewer than one finite value; when all are equal, upper = lower + 1. */
int fl_sc_bounds(const double *sa, int64_t n, double *lower, double *upper);
/* "sadl" | "equal" */
fl_status fl_sc_mode_parse(const char *s, fl_sc_mode *out, fl_err *e);

/* LSC and DSC as coverage criteria (cover.h; src/sa/sa_cover.c has the details):
 *     lsc[:K[:LAYER[:LOWER:UPPER]]]     dsc[:K[:LAYER[:LOWER:UPPER]]]
 * K buckets (default 1000) of sadl's get_sc over the LSA / DSA of each input against the
 * training traces (ctx->train) of LAYER (a layer of ctx->ls; default: its last layer that is
 * not the logits or a model output). Items: K + 1 (np.digitize's buckets). Default bounds:
 * min / max of the leave-one-out SA of up to 1000 training traces. */
extern const fl_cover_ops fl_cover_lsc, fl_cover_dsc;

#endif
