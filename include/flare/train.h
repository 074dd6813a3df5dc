/* train.h — training and evaluating image classifiers: losses, optimisers, a model zoo, the
 * training loop and evaluation.
 *
 * Quick tour: train LeNet-5 on Fashion-MNIST and evaluate it
 * ---------------------------------------------------------
 *     fl_err e;
 *     fl_dataset *tr, *te;
 *     fl_model *m;
 *     fl_dataset_load("fashion-mnist:train", NULL, 0, &tr, &e);
 *     fl_dataset_load("fashion-mnist:test", NULL, 0, &te, &e);
 *     fl_zoo_build("lenet5", tr->c, tr->h, tr->w, tr->n_classes, 1, &m, &e);
 *
 *     fl_train_opts o;
 *     fl_train_opts_default(&o);       // the documented recipe (docs/training.md)
 *     o.epochs = 10;
 *     o.progress = my_bar;             // optional: void my_bar(const fl_train_progress *, void *)
 *     o.on_epoch = my_epoch_line;      // optional: void my_epoch_line(const fl_epoch_stats *, void *)
 *     if (fl_train(m, tr, te, &o, &e) != FL_OK) fprintf(stderr, "%s\n", e.msg);
 *
 *     fl_eval_result r;
 *     fl_eval(m, te, 256, &r, &e);     // r.accuracy, r.class_acc[k], r.confusion[t * K + p]
 *     fl_eval_result_free(&r);
 *     fl_onnx_save(m, "lenet5.onnx", &e);   // see onnx.h
 *
 * Every function that can fail returns an fl_status and fills the fl_err (may be NULL).
 * Training is deterministic: the same seed and the same thread count (fl_threads_set) give
 * bit-identical weights.
 *
 * Conventions of the losses (llm.c style): a loss function returns the mean loss over the
 * batch and, when its d-pointer is not NULL, WRITES (does not accumulate) the gradient of that
 * mean with respect to its input. Sums are kept in double.
 */
#ifndef FLARE_TRAIN_H
#define FLARE_TRAIN_H

#include "flare/data.h"
#include "flare/model.h"

/* ---- losses --------------------------------------------------------------------------------- */
typedef enum fl_loss_kind {
    FL_LOSS_CE = 0, /* softmax cross-entropy with integer labels (default) */
    FL_LOSS_BCE,    /* binary cross-entropy on logits, one-vs-all targets from the labels */
    FL_LOSS_MSE     /* mean squared error against one-hot targets */
} fl_loss_kind;

/* "ce", "bce", "mse" (also "cross-entropy"). FL_ERR_ARG naming the accepted names otherwise. */
fl_status fl_loss_parse(const char *s, fl_loss_kind *out, fl_err *e);
const char *fl_loss_name(fl_loss_kind k);

/* Softmax cross-entropy. logits [B,C], labels[B] in [0,C) (checked by the caller).
 * Returns mean_b(logsumexp(logits_b) - logits_b[label_b]); dlogits[B,C] (may be NULL) gets
 * (softmax(logits_b) - onehot(label_b)) / B. Numerically stable for any finite logits. */
float fl_loss_ce(float *dlogits, const float *logits, const int32_t *labels, int B, int C);

/* Binary cross-entropy with logits (PyTorch BCEWithLogitsLoss, reduction 'mean'):
 * mean_i [ max(x,0) - x*t + log(1 + exp(-|x|)) ] over n elements; dlogits = (sigmoid(x)-t)/n. */
float fl_loss_bce(float *dlogits, const float *logits, const float *targets, int64_t n);

/* Mean squared error (PyTorch MSELoss, reduction 'mean'): mean_i (p - t)^2; dpred = 2(p-t)/n. */
float fl_loss_mse(float *dpred, const float *pred, const float *targets, int64_t n);

/* The loss `k` of logits [B,C] against integer labels, as the training loop uses it:
 * CE as above; BCE/MSE against one-hot targets (with C == 1, BCE/MSE use the label 0/1 itself
 * as the target: a single-logit binary classifier). Mean over all B*C elements for BCE/MSE. */
float fl_loss_labels(fl_loss_kind k, float *dlogits, const float *logits, const int32_t *labels,
                     int B, int C);

/* ---- optimisers ------------------------------------------------------------------------------
 * An optimiser updates every FL_VAL_PARAM value of a model from its gradient .g, with PyTorch's
 * semantics:
 *   SGD:  g += wd*p;  b = momentum*b + g (b = g on the first step);  p -= lr*b
 *   Adam: g += wd*p;  m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g^2;
 *         p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
 * (weight decay is the classic L2 term added to the gradient, not AdamW's decoupled one).
 *
 *     fl_optim *opt;
 *     fl_optim_new(m, &oo, &opt, &e);   // also turns on parameter gradients in m
 *     for (...) {
 *         fl_model_zero_param_grads(m);
 *         forward, loss, fl_model_backward_idx(...);
 *         fl_optim_step(opt);
 *     }
 *     fl_optim_free(opt);
 */
typedef enum fl_optim_kind { FL_OPTIM_SGD = 0, FL_OPTIM_ADAM } fl_optim_kind;

typedef struct fl_optim_opts {
    fl_optim_kind kind;
    float lr;
    float momentum;      /* SGD; 0 = plain SGD */
    float weight_decay;  /* L2 coefficient, both optimisers */
    float beta1, beta2;  /* Adam; 0.9, 0.999 */
    float eps;           /* Adam; 1e-8 */
} fl_optim_opts;

typedef struct fl_optim fl_optim;

/* "sgd" or "adam". */
fl_status fl_optim_parse(const char *s, fl_optim_kind *out, fl_err *e);
const char *fl_optim_name(fl_optim_kind k);
/* Fill o with PyTorch's defaults for kind (lr 0.01 for SGD, 1e-3 for Adam, no momentum/decay). */
void fl_optim_opts_default(fl_optim_opts *o, fl_optim_kind kind);
/* Bind an optimiser to m's parameters (the model must outlive it and must not gain or lose
 * parameters meanwhile). Calls fl_model_want_param_grads(m, 1). Fails on bad options. */
fl_status fl_optim_new(fl_model *m, const fl_optim_opts *o, fl_optim **out, fl_err *e);
/* One update of every parameter from its current gradient. */
void fl_optim_step(fl_optim *opt);
void fl_optim_set_lr(fl_optim *opt, float lr);
int64_t fl_optim_steps(const fl_optim *opt); /* steps taken so far */
/* The state a checkpoint saves and restores: the moment buffers (Adam m and v; SGD's momentum
 * in *m and *v NULL), *n floats each, laid out parameter after parameter in value order, and
 * the step count (Adam's bias correction). Pointers into opt, valid while it lives. */
void fl_optim_state(fl_optim *opt, float **m, float **v, int64_t *n, int64_t **steps);
void fl_optim_free(fl_optim *opt);

/* ---- model zoo -------------------------------------------------------------------------------
 * Classic small classifiers from the DNN-testing literature (DeepXplore, DeepHunter, DeepSA),
 * built with the model-building API and initialised like PyTorch's defaults (conv / linear
 * weight and bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)); BatchNorm scale 1, shift 0, running
 * mean 0, var 1). Names follow PyTorch's ONNX exporter: parameters "conv1.weight", nodes
 * "/conv1/Conv", outputs "/conv1/Conv_output_0"; graph input "input" [0,c,h,w], output "logits".
 *
 *   lenet1   conv4@5x5 relu pool2, conv12@5x5 relu pool2, fc n_classes
 *   lenet4   conv6@5x5 relu pool2, conv16@5x5 relu pool2, fc84 relu, fc n_classes
 *   lenet5   conv6@5x5 relu pool2, conv16@5x5 relu pool2, fc120 relu, fc84 relu, fc n_classes
 *   convnet  [conv32@3x3 pad1 BN relu]x2 pool2, [conv64@3x3 pad1 BN relu]x2 pool2,
 *            fc256 relu dropout0.5, fc n_classes        (a small VGG-style CIFAR net)
 *   mlp      flatten, fc256 relu, fc128 relu, fc n_classes
 *
 * Convolutions are 'valid' (no padding) except in convnet; flatten sizes follow from (h, w).
 * Fails with FL_ERR_NOTFOUND for an unknown arch (the message lists the known ones) and
 * FL_ERR_SHAPE when the image is too small for the architecture. */
fl_status fl_zoo_build(const char *arch, int c, int h, int w, int n_classes, uint64_t seed,
                       fl_model **out, fl_err *e);
/* NULL-terminated list of architecture names. */
const char *const *fl_zoo_names(void);
/* One-line description of arch (NULL if unknown), for --help texts. */
const char *fl_zoo_describe(const char *arch);

/* ---- training ------------------------------------------------------------------------------- */
/* Passed to the progress callback every `progress_every` batches and after the last batch of
 * each epoch. Running figures are over the images seen so far in this epoch. */
typedef struct fl_train_progress {
    int epoch, epochs;      /* 1-based epoch, total epochs */
    int64_t done, total;    /* images done in this epoch / per epoch */
    double loss;            /* running mean loss */
    double acc;             /* running accuracy in [0,1] (train mode: dropout on) */
    double images_per_s;    /* throughput in this epoch so far */
} fl_train_progress;

/* Passed to the epoch-end callback. */
typedef struct fl_epoch_stats {
    int epoch, epochs;
    double train_loss, train_acc; /* means over the epoch (as trained, train mode) */
    double test_acc;              /* on the test set in eval mode; -1 when there is none */
    double test_loss;             /* mean CE on the test set; -1 when there is none */
    double seconds;               /* wall time of the epoch (training + test) */
    float lr;                     /* learning rate used in this epoch */
} fl_epoch_stats;

typedef struct fl_train_opts {
    int epochs;              /* >= 1 */
    int batch;               /* >= 1; the last batch of an epoch may be smaller */
    float lr;                /* > 0 */
    fl_optim_kind optim;     /* FL_OPTIM_ADAM by default */
    float momentum;          /* SGD only */
    float weight_decay;
    float lr_decay;          /* multiply lr by this after every epoch; 0 or 1 = constant */
    uint64_t seed;           /* shuffling and dropout masks */
    fl_loss_kind loss;       /* FL_LOSS_CE by default */
    int progress_every;      /* batches between progress callbacks; 0 = 20 */
    void (*progress)(const fl_train_progress *p, void *user);  /* may be NULL */
    void (*on_epoch)(const fl_epoch_stats *s, void *user);     /* may be NULL */
    void *user;              /* passed to both callbacks */
    /* When *stop becomes nonzero (a signal handler's flag; may be NULL), training ends after
     * the current batch and the model is put back as it was after the last finished epoch
     * (its initial state when none finished); fl_train then returns FL_OK. The caller tells a
     * stop from the end by the flag, and which epoch it kept by on_epoch. */
    volatile const int *stop;
} fl_train_opts;

/* The default recipe (docs/training.md): Adam, lr 2e-3 multiplied by 0.75 after every epoch,
 * batch 64, 10 epochs, CE, seed 1 (momentum 0.9 should optim be switched to SGD). */
void fl_train_opts_default(fl_train_opts *o);

/* Train m on `train` (shuffled every epoch), evaluating on `test` (may be NULL) after each
 * epoch. m's single input must take [N, c, h, w] images of the dataset and its first output
 * must be logits [N, C] with C == train->n_classes (C == 1 allowed for BCE/MSE on binary
 * labels). Sets m->training = 1 and m->skip_input_grad = 1 while training and restores both
 * afterwards; parameter gradients are switched off again at the end, and m->rng (Dropout
 * masks) is reseeded from o->seed. Fails (naming the
 * problem) on unlabelled data, labels out of range, shape mismatch, or a non-finite loss. */
fl_status fl_train(fl_model *m, const fl_dataset *train, const fl_dataset *test,
                   const fl_train_opts *o, fl_err *e);

/* ---- evaluation ----------------------------------------------------------------------------- */
typedef struct fl_eval_result {
    int64_t n, correct;
    double accuracy;      /* correct / n */
    double loss;          /* mean softmax cross-entropy */
    int n_classes;        /* K */
    double *class_acc;    /* [K]: accuracy among samples of true class k (0 if none) */
    int64_t *class_n;     /* [K]: samples of true class k */
    int64_t *confusion;   /* [K*K]: confusion[true * K + predicted] */
    int32_t *pred;        /* [n]: predicted class (argmax of the logits) of every sample */
} fl_eval_result;

/* Batched inference over all of d in eval mode (m->training = 0, restored afterwards).
 * batch <= 0 means 256. d must be labelled with n_classes == number of logits. */
fl_status fl_eval(fl_model *m, const fl_dataset *d, int batch, fl_eval_result *r, fl_err *e);
void fl_eval_result_free(fl_eval_result *r);

#endif
