/* lrp.h — layer-wise relevance propagation (LRP) and the "important neurons" built on it.
 *
 * LRP (Bach et al. 2015, PLOS ONE; the rules as in Montavon et al., "Layer-Wise Relevance
 * Propagation: An Overview", 2019) explains one output of a network by handing its value
 * backward, layer by layer, to the neurons that produced it. Each neuron receives a share
 * (its "relevance") proportional to its contribution. It is a backward pass over the same
 * graph as the gradient, but it is not the gradient: the quantity propagated is the output's
 * value split into contributions, so the rules below are flare's own pass over the forward
 * activations, not the ops' backward kernels.
 *
 *     fl_lrp *l;
 *     fl_lrp_opts o;
 *     fl_lrp_opts_default(&o);                       // epsilon rule, eps = 1e-7
 *     fl_lrp_new(m, &o, &l, &e);                      // checks every op on the path
 *     fl_model_forward(m, &x, &e);                    // eval mode (m->training == 0)
 *     fl_lrp_run(l, NULL, &e);                        // explain each input's predicted logit
 *     const fl_tensor *r = fl_lrp_relevance(l, "/conv1/Conv_output_0");   // same shape
 *     fl_lrp_free(l);
 *
 * Rules, for a linear layer z_j = sum_i x_i w_ij + b_j (Gemm, MatMul, Conv; AveragePool and
 * GlobalAveragePool are linear layers with weights 1/divisor; BatchNormalization in eval
 * mode is the per-channel affine layer y = a x + b, a = scale / sqrt(var + eps_bn), kept as a
 * layer of its own rather than folded into the preceding convolution, so that every tensor of
 * the model keeps its relevance):
 *
 *   epsilon  R_i = sum_j x_i w_ij / (z_j + eps * sign(z_j)) * R_j,   sign(0) = +1
 *            (Bach et al. eq. 58; the stabiliser keeps the sign of z_j, as in iNNvestigate
 *            and zennit). z_j includes the bias, so the bias absorbs the share b_j / z_j of
 *            R_j: relevance is conserved exactly (up to eps) only through bias-free layers.
 *   zplus    R_i = sum_j (x_i w_ij)^+ / (sum_i' (x_i' w_i'j)^+ + eps) * R_j
 *            (the alpha = 1, beta = 0 rule; for x >= 0, as after a ReLU, this is Montavon's
 *            z+ rule with the positive weights w_ij^+). Biases are ignored; a neuron without
 *            positive contributions passes nothing on.
 *
 * The other ops on the path: Relu (and Identity, Dropout in eval mode) pass relevance through
 * unchanged; Flatten, Reshape, Squeeze and Unsqueeze reshape it; MaxPool gives all of an
 * output's relevance to the window's winner (the first maximum, as in the forward pass); Add
 * splits it between its activation inputs in proportion to their values (the epsilon or z+
 * rule with unit weights; a constant addend is a bias and absorbs its share). A trailing
 * Softmax / LogSoftmax is skipped: the explained value is its input, the logits. Any other op
 * on the path from the input to the logits is an FL_ERR_UNSUPPORTED naming the node, reported
 * by fl_lrp_new.
 *
 * The pass starts from R = the explained logit's value at that logit and 0 at every other
 * output (DeepImportance's "depopulated" initial relevance), for every input of the batch.
 * docs/lrp.md has the derivations, the conservation property and how the choices compare to
 * DeepImportance and DeepSA.
 */
#ifndef FLARE_LRP_H
#define FLARE_LRP_H

#include "flare/cover.h"
#include "flare/neurons.h"

typedef enum fl_lrp_rule { FL_LRP_EPSILON = 0, FL_LRP_ZPLUS } fl_lrp_rule;

/* "epsilon" or "zplus" (also "z+"); FL_ERR_ARG naming the accepted words otherwise. */
fl_status fl_lrp_rule_parse(const char *s, fl_lrp_rule *out, fl_err *e);
const char *fl_lrp_rule_name(fl_lrp_rule r);

typedef struct fl_lrp_opts {
    fl_lrp_rule rule; /* FL_LRP_EPSILON */
    float eps;        /* stabiliser of both rules; 1e-7 */
} fl_lrp_opts;

void fl_lrp_opts_default(fl_lrp_opts *o);

typedef struct fl_lrp fl_lrp;

/* Plan the relevance pass of m: find the explained value (output 0, or the input of a
 * trailing Softmax/LogSoftmax; it must be [N, K] logits) and check that every node between
 * the graph input and it has a rule. m must outlive l. */
fl_status fl_lrp_new(fl_model *m, const fl_lrp_opts *o, fl_lrp **out, fl_err *e);
void fl_lrp_free(fl_lrp *l);

/* After an eval-mode fl_model_forward of a batch of N inputs: propagate, for input b, the
 * logit target[b] (target == NULL: each input's predicted class, the argmax of its logits;
 * target[b] < 0: input b gets no relevance at all). Fails if the last forward ran in
 * training mode or a target is out of range. */
fl_status fl_lrp_run(fl_lrp *l, const int32_t *target, fl_err *e);

/* The relevance of a value after fl_lrp_run, with the value's shape; NULL when the value is
 * not on the explained path (or fl_lrp_run has not run). Graph inputs get one too: their
 * relevance map is the usual LRP "heatmap". */
const fl_tensor *fl_lrp_relevance(const fl_lrp *l, const char *name);
const fl_tensor *fl_lrp_relevance_idx(const fl_lrp *l, int value);
/* Name of the explained value (the logits). */
const char *fl_lrp_explained(const fl_lrp *l);
/* The value index of m's logits: output 0, or the input of a trailing Softmax / LogSoftmax
 * (what LRP explains, what IDC and seed selection read). */
int fl_lrp_logits(const fl_model *m);

/* ---- important neurons -----------------------------------------------------------------------
 * Relevance summed over the correctly classified inputs of a (training) set, per neuron of
 * each layer of a layer set (see neurons.h: a conv neuron is a channel, whose relevance is the
 * sum over its spatial positions); per layer, the important neurons are the round(ratio * C)
 * most relevant of its C neurons (half to even, as Python's round in DeepSA; at least one),
 * most relevant first (DeepSA: ratio 0.4 for LeNet-5). */
typedef struct fl_important_layer {
    char *name;         /* tensor name (as in the layer set) */
    int64_t width;      /* neurons in the layer (C) */
    int64_t count;      /* important neurons */
    int64_t *neuron;    /* [count] neuron indices in the layer, most relevant first */
    double *relevance;  /* [width] summed relevance of every neuron (not only the important) */
} fl_important_layer;

typedef struct fl_important {
    fl_lrp_rule rule;
    double eps;
    double ratio;
    int64_t n_inputs;   /* correctly classified inputs whose relevance was summed */
    int64_t n_seen;     /* inputs of the dataset */
    int n_layers;
    fl_important_layer *layers;
    char *model;        /* provenance strings (may be NULL) */
    char *data;
} fl_important;

/* Called after each batch: inputs done of total. */
typedef void (*fl_important_progress)(int64_t done, int64_t total, void *user);

typedef struct fl_important_opts {
    fl_lrp_opts lrp;
    double ratio;        /* (0, 1]; 0.4 */
    const char *layers;  /* layer set spec (neurons.h); "all" */
    int batch;           /* inputs per forward pass; 0 = 256 */
    fl_important_progress progress; /* may be NULL */
    void *user;
} fl_important_opts;

void fl_important_opts_default(fl_important_opts *o);

/* Stream d (labelled, with m's input shape) through m in eval mode, explain each input's
 * predicted logit, and sum the relevance of every neuron of the layer set over the inputs
 * whose prediction is their label. Fails on an unlabelled dataset, an unsupported op on the
 * path, or when no input is classified correctly. */
fl_status fl_important_compute(fl_model *m, const fl_dataset *d, const fl_important_opts *o,
                               fl_important **out, fl_err *e);
/* Re-rank with another ratio (keeps the relevance sums). */
fl_status fl_important_set_ratio(fl_important *imp, double ratio, fl_err *e);
/* The layer named name, or NULL. */
const fl_important_layer *fl_important_layer_find(const fl_important *imp, const char *name);

/* JSON file (docs/lrp.md has the format), written atomically; load checks it (indices in
 * range and distinct, counts, relevance arrays) and fails naming the file and the field. */
fl_status fl_important_save(const fl_important *imp, const char *path, fl_err *e);
fl_status fl_important_load(const char *path, fl_important **out, fl_err *e);
void fl_important_free(fl_important *imp);

/* The important neurons of the layers of ls as indices into ls's flat neuron vector,
 * ascending (for LSAv / DSAv: surprise adequacy restricted to the important neurons). Every
 * layer of ls must be in imp (FL_ERR_NOTFOUND naming it) with the same width (FL_ERR_SHAPE).
 * *idx is malloc'd. */
fl_status fl_important_subset(const fl_important *imp, const fl_layerset *ls, int64_t **idx,
                              int64_t *n, fl_err *e);

/* ---- IDC: importance-driven coverage (src/cover/idc.c) ----------------------------------------
 * DeepImportance (Gerasimou, Eniser, Sen, Cakan, ICSE 2020; github.com/DeepImportance): take
 * the m most relevant neurons of one layer, cluster each one's values over the training set
 * with k-means (k in {2,3,4}, the k with the best silhouette), and count which combinations of
 * clusters the test inputs reach: an input covers the tuple of its nearest centroid at each
 * important neuron; coverage = distinct tuples / product of the k's.
 *
 * As a coverage criterion (cover.h), spec  idc[:M[:LAYER][:METHOD]]  with ctx->aux = the
 * important-neurons file (`flare nn lrp`), ctx->train = the training set and ctx->ls
 * containing LAYER:
 *   M       important neurons (default 6; 1..10, so the 4^M combinations stay countable)
 *   LAYER   the subject layer (default: the last layer of the layer set, other than the
 *           logits, that the important-neurons file has)
 *   METHOD  kmeans++ (default: scikit-learn's KMeans as DeepImportance calls it: k-means++
 *           seeding, 10 restarts, the lowest inertia kept; seeded from a fixed fl_rng so a
 *           criterion built twice is the same) or exact (the optimal one-dimensional
 *           clustering, which k-means++ usually but not always reaches)
 * Clustering follows the reference: a neuron's exact zeros are left out (dead ReLU outputs),
 * fewer than 10 remaining values give one cluster at 0. docs/lrp.md lists where flare
 * differs (the reference rounds centroids to 2 decimals; flare keeps them exact). */
extern const fl_cover_ops fl_cover_idc;

typedef enum fl_kmeans_method {
    FL_KMEANS_PP = 0, /* k-means++ seeding + Lloyd, 10 restarts, lowest inertia (scikit-learn) */
    FL_KMEANS_EXACT   /* the minimum inertia: dynamic programming over the sorted values with
                         divide-and-conquer split search, O(k n log n) (Ckmeans.1d.dp) */
} fl_kmeans_method;

typedef struct fl_kmeans1d {
    int k;              /* clusters (1..4) */
    double centroid[4]; /* ascending */
    double silhouette;  /* mean silhouette of the chosen clustering (0 for k == 1) */
    double inertia;     /* sum of squared distances to the nearest centroid */
} fl_kmeans1d;

/* Cluster the n values v for each k in [kmin, kmax] (1 <= kmin <= kmax <= 4) and keep the k
 * with the highest mean silhouette (ties: the smaller k). Fewer distinct values than k caps k.
 * Deterministic given seed (which only FL_KMEANS_PP uses). n >= 1. */
fl_status fl_kmeans1d_fit(const float *v, int64_t n, int kmin, int kmax, fl_kmeans_method method,
                          uint64_t seed, fl_kmeans1d *out, fl_err *e);
/* Mean silhouette (scikit-learn's silhouette_score, Euclidean) of sorted values x[n] cut into
 * k consecutive clusters at cut[0..k] (cluster t = x[cut[t] .. cut[t+1])); exact, O(n k). */
double fl_silhouette1d(const double *x, int64_t n, const int64_t *cut, int k);
/* Index of the centroid nearest to v (ties: the lower one). */
int fl_kmeans1d_assign(const fl_kmeans1d *km, float v);

#endif
