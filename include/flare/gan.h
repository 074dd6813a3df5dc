/* gan.h — generation-based test inputs: FuzzGAN, a conditional GAN (ACGAN) trained to make
 * realistic images of a chosen class that the model under test gets wrong and that raise a
 * chosen neuron of it.
 *
 * The life of a generator (what `flare gan train` and `flare gan fuzz` do):
 *
 *     fl_gan_opts o;
 *     fl_gan_opts_default(&o);
 *     o.work_dir = "gen.train";                  // sample grids, losses.jsonl, checkpoints
 *     fl_model *g;
 *     fl_gan_train(mut, train, &o, &g, &e);      // mut: the model under test, frozen
 *     fl_onnx_save(g, "gen.onnx", &e);           // any ONNX runtime can run it
 *
 *     fl_gan *gen;
 *     fl_gan_open(g, "gen.onnx", &gen, &e);      // reads what the file records (below)
 *     fl_gan_generate(gen, n, classes, neurons, &rng, &images, &e);   // [n, c, h, w] in [0,1]
 *
 * The generator G(z, c, l) has three inputs: "z" [N, nz] standard normal noise, "class"
 * [N, K] one-hot, "neuron" [N, P] one-hot over the P neurons of a layer set of the model under
 * test (neurons.h: channels of conv layers, units of dense ones) — a linear layer on a one-hot
 * input is an embedding. They are concatenated, mapped by a linear layer to 64 maps of
 * (h/4, w/4), and upsampled by two stride-2 transposed convolutions (BatchNorm, ReLU) to the
 * output "image" [N, c, h, w], a sigmoid: pixel values / 255, whatever scale the model reads
 * (the scale is recorded and applied between G and the model).
 *
 * The discriminator D (ACGAN) has two stride-2 convolutions (LeakyReLU 0.2) and two heads on
 * their features: "adv" [N, 1], the real/fake logit, and "cls" [N, K], the class logits.
 *
 * Losses (docs/fuzzgan.md has each one's source):
 *   L_D = BCE(adv(x), 1) + BCE(adv(G), 0) + CE(cls(x), y)   (the class head on real images)
 *   L_G = BCE(adv(G), 1) + CE(cls(G), c) + lambda1 * L_error + lambda2 * L_neuron
 *   L_error  = -min(CE(model(G), c), ln K): the frozen model under test should get class c
 *              wrong; the push stops once its probability of c is below 1/K;
 *   L_neuron = -a_l(G) / max_k a_k(G): the target neuron's mean |output|, divided by the
 *              largest such mean in its layer (NC's meanabs scaling; the divisor is held
 *              constant in the gradient).
 * Adam (lr 2e-4, beta1 0.5, beta2 0.999) for both, batch 128, as DCGAN/ACGAN train.
 *
 * What the generator file records (ONNX metadata_props, read by fl_gan_open):
 *   flare.gan.format "fuzzgan-1"; flare.gan.nz; flare.gan.classes (K); flare.gan.class_names
 *   (a JSON array); flare.gan.layers (the layer-set spec of the neurons); flare.gan.neurons
 *   (P); flare.gan.scale (how the model under test reads pixels, fl_scale_str).
 */
#ifndef FLARE_GAN_H
#define FLARE_GAN_H

#include "flare/neurons.h"

/* Passed to the progress callback every few batches. */
typedef struct fl_gan_progress {
    int epoch, epochs;       /* 1-based epoch, total */
    int64_t done, total;     /* real images used in this epoch / per epoch */
    double d_loss, g_loss;   /* running means in this epoch */
    double images_per_s;
} fl_gan_progress;

/* One line of losses.jsonl (means over the epoch) and the epoch's evaluation on a fixed set
 * of 1 000 generated cases (random class and neuron, the same every epoch). */
typedef struct fl_gan_epoch {
    int epoch, epochs;
    double d_loss;           /* L_D */
    double g_adv, g_cls;     /* L_G's adversarial and class terms */
    double g_error;          /* L_error (negative: the model's cross-entropy, negated) */
    double g_neuron;         /* L_neuron (negative) */
    double misclass;         /* share of the evaluation cases the model gets wrong */
    double d_class_acc;      /* D's class head on the evaluation cases: does G follow c? */
    double target_act;       /* mean normalised |activation| of the target neurons */
    double real_act;         /* ... of the same neurons on real images of the same classes */
    double target_raw, real_raw; /* the same two, unscaled: the targets' mean |value| */
    double seconds;          /* wall time of the epoch */
    const char *grid;        /* the sample grid written for it */
} fl_gan_epoch;

typedef struct fl_gan_opts {
    int epochs;              /* 5 */
    int batch;               /* 128 */
    float lr, beta1;         /* 2e-4, 0.5 */
    double lambda1;          /* L_error: 0.5 (the paper's for LeNet-scale models) */
    double lambda2;          /* L_neuron: 1 */
    int nz;                  /* noise size: 64 */
    uint64_t seed;           /* weights, noise, classes, neurons, shuffling */
    const char *layers;      /* the model's layer set whose neurons G targets; NULL: "all" */
    const fl_scale *scale;   /* how the model under test reads pixels; NULL: [0,1] */
    const char *work_dir;    /* required: samples/epoch_NNN.png, losses.jsonl, ckpt/ */
    int resume;              /* continue from work_dir's last checkpoint */
    int64_t max_batches;     /* per epoch (tests, quick looks); 0: the whole training set */
    volatile int *stop;      /* set to 1 (SIGINT) to stop after this batch; the epoch's
                                checkpoint is not written, the last one stands */
    void (*progress)(const fl_gan_progress *p, void *user); /* may be NULL */
    void (*on_epoch)(const fl_gan_epoch *s, void *user);    /* may be NULL */
    void *user;
    const char *model_path;  /* recorded, or NULL */
} fl_gan_opts;

void fl_gan_opts_default(fl_gan_opts *o);

/* Train a generator against `mut` (frozen; eval mode) on the labelled images of `train`,
 * whose class count must equal the model's number of logits. Every epoch writes its grid
 * (K rows of classes, 10 samples each, fixed noise), a line of losses.jsonl and a checkpoint
 * (all atomically), so a killed run resumes from the last finished epoch. *gen (the trained
 * generator, metadata set, eval mode) is NULL on failure. Also stopped by *o->stop: then *gen
 * is the generator as it was after the last finished epoch, and the status FL_OK. */
fl_status fl_gan_train(fl_model *mut, const fl_dataset *train, const fl_gan_opts *o,
                       fl_model **gen, fl_err *e);
/* The seed the checkpoint in work_dir was trained with (a resume must use it). */
fl_status fl_gan_ckpt_seed(const char *work_dir, uint64_t *seed, fl_err *e);

/* ---- using a generator ------------------------------------------------------------------------ */
typedef struct fl_gan {
    fl_model *g;             /* owned */
    int nz, n_classes;
    int64_t n_neurons;
    int c, h, w;             /* the image's shape */
    char *layers;            /* layer-set spec of the neurons */
    char **class_names;      /* [n_classes] */
    fl_scale scale;          /* how the model under test reads the pixels */
    fl_tensor z, cls, neuron;/* input buffers */
} fl_gan;

/* Take ownership of g (read from path, for messages) and check it is a FuzzGAN generator:
 * its metadata, its three inputs and its output's shape. On failure g is freed. */
fl_status fl_gan_open(fl_model *g, const char *path, fl_gan **out, fl_err *e);
void fl_gan_free(fl_gan *gen);
/* Check that the generator fits the model under test: the image shape it takes, its number of
 * logits, and the recorded layer set's neuron count. ls is resolved by the caller from
 * gen->layers. */
fl_status fl_gan_check_model(const fl_gan *gen, fl_model *mut, const fl_layerset *ls,
                             const char *model_path, fl_err *e);
/* n images [n, c, h, w] (pixel / 255) of classes cls[i] targeting neurons neuron[i] (a flat
 * index into the layer set, < n_neurons), noise drawn from r. out is allocated when its data
 * is NULL, else it must be [n, c, h, w]. */
fl_status fl_gan_generate(fl_gan *gen, int n, const int32_t *cls, const int64_t *neuron,
                          fl_rng *r, fl_tensor *out, fl_err *e);

#endif
