/* select.h — choosing n seed inputs from a test set for fuzzing or retraining.
 *
 *     fl_select_opts o;
 *     fl_select_opts_default(&o);
 *     o.strategy = FL_SEL_GINI;
 *     o.n = 100;
 *     fl_selection *s;
 *     fl_select(m, test, &o, &s, &e);             // s->index[0..s->n): test indices
 *     fl_selection_save(s, test, "seeds.npy", &e); // seeds.npy, seeds.idx.npy, seeds.png
 *     fl_selection_free(s);
 *
 * Strategies (docs/selection.md has the sources and where flare departs from them):
 *   random   a uniform sample without replacement (fl_rng from o->seed).
 *   gini     DeepGini (Feng et al., ISSTA 2020): 1 - sum_k p_k^2 of the softmax of the logits,
 *            most uncertain first.
 *   best     RobOT's BE-ST (Wang et al., ICSE 2021, github.com/Testing4AI/RobOT): rank by the
 *            first-order loss FOL; the floor(n/2) lowest and the n - floor(n/2) highest.
 *   kmst     RobOT's KM-ST: split [0, max FOL] into `sections` equal ranges and draw the same
 *            number of inputs at random from each.
 *   st-dall  DeepSA: among the correctly classified inputs, the n with the highest DSAv (DSA
 *   st-lall  over the important neurons of an `flare nn lrp` file) / LSAv;
 *   st-dper  the same, n/K per class (K classes), so that every class is represented.
 *   st-lper
 *
 * FOL (RobOT's fol_Linf / fol_L2 at the seed itself, x = x0): with g = d CE(softmax(logits),
 * label) / dx for the input's own true label, FOL = eps * ||g||_1 (L-infinity ball of radius
 * eps, the default) or ||g||_2. The constant eps does not change any ranking.
 *
 * Every strategy is deterministic: ties are broken by the lower test index, and the random
 * ones draw only from o->seed.
 */
#ifndef FLARE_SELECT_H
#define FLARE_SELECT_H

#include "flare/lrp.h"

typedef enum fl_select_strategy {
    FL_SEL_RANDOM = 0,
    FL_SEL_GINI,
    FL_SEL_BEST,
    FL_SEL_KMST,
    FL_SEL_ST_DALL,
    FL_SEL_ST_LALL,
    FL_SEL_ST_DPER,
    FL_SEL_ST_LPER,
    FL_SEL_COUNT_
} fl_select_strategy;

/* "random", "gini", "best", "kmst", "st-dall", "st-lall", "st-dper", "st-lper". */
fl_status fl_select_strategy_parse(const char *s, fl_select_strategy *out, fl_err *e);
const char *fl_select_strategy_name(fl_select_strategy s);

typedef enum fl_fol_norm { FL_FOL_LINF = 0, FL_FOL_L2 } fl_fol_norm;

typedef struct fl_select_opts {
    fl_select_strategy strategy;
    int64_t n;                 /* seeds wanted (>= 1); fewer when fewer inputs qualify */
    uint64_t seed;             /* random, kmst */
    int sections;              /* kmst: 4 (RobOT's select(..., k=4)) */
    fl_fol_norm fol;           /* best, kmst: FL_FOL_LINF */
    double fol_eps;            /* the L-infinity radius of FOL; 0.3 */
    /* st-*: the important neurons, the training set and the layers whose important neurons
     * make the trace (NULL: the last layer of the file other than the logits, i.e. the last
     * hidden layer). */
    const fl_important *important;
    const fl_dataset *train;
    const char *layers;
    int batch;                 /* inputs per forward pass; 0 = 256 */
} fl_select_opts;

void fl_select_opts_default(fl_select_opts *o);

typedef struct fl_selection {
    fl_select_strategy strategy;
    int64_t n;          /* seeds chosen */
    int64_t *index;     /* [n] test indices, in the order the strategy ranks them */
    double *score;      /* [n] what they were ranked by (gini, FOL, SA; NaN for random) */
    int32_t *pred;      /* [n] the model's predicted class */
    int64_t eligible;   /* inputs the strategy chose from (st-*: the correctly classified) */
} fl_selection;

/* Choose o->n inputs of test (labelled, with m's input shape) by o->strategy. */
fl_status fl_select(fl_model *m, const fl_dataset *test, const fl_select_opts *o,
                    fl_selection **out, fl_err *e);
void fl_selection_free(fl_selection *s);

/* Write the seeds next to each other: images_path (float32 [n,c,h,w] NPY, as fed to the
 * model), the same name with ".npy" replaced by ".idx.npy" (int64 [n] test indices) and by
 * ".png" (a grid, each tile labelled by fl_grid_label: "#index", the true and the predicted
 * class by name). Each atomic; when one cannot be written, none of the three is left. */
fl_status fl_selection_save(const fl_selection *s, const fl_dataset *test, const char *images_path,
                            fl_err *e);

/* ---- building blocks (for fuzzers and tests) ------------------------------------------------ */
/* out[i] = 1 - sum_k softmax(logits_i)_k^2 for logits [n, K]. */
void fl_gini(const float *logits, int64_t n, int K, double *out);
/* FOL of each input of the batch x [n,...] with true labels y: one forward and one backward
 * pass of m (eval mode). out[n]. */
fl_status fl_fol(fl_model *m, const fl_tensor *x, const int32_t *y, fl_fol_norm norm, double eps,
                 double *out, fl_err *e);

/* Index selections from scores[n] (NaN scores are never chosen). Each writes at most k indices
 * to idx and returns how many. */
/* the k highest (desc != 0) or lowest scores, best first */
int64_t fl_select_top(const double *scores, int64_t n, int64_t k, int desc, int64_t *idx);
/* BE-ST: floor(k/2) lowest (lowest first), then k - floor(k/2) highest (highest first) */
int64_t fl_select_best(const double *scores, int64_t n, int64_t k, int64_t *idx);
/* KM-ST over [0, max score] in `sections` ranges; scores must be >= 0 */
int64_t fl_select_kmst(const double *scores, int64_t n, int64_t k, int sections, fl_rng *r,
                       int64_t *idx);
/* k highest per class: class c (cls[i] in [0, K), < 0: not eligible) gets k/K, the first k%K
 * classes one more; a class short of its share leaves its places to the best remaining inputs
 * of any class. Class after class (best first within each), then those places (best first). */
int64_t fl_select_per_class(const double *scores, const int32_t *cls, int64_t n, int K, int64_t k,
                            int64_t *idx);

#endif
