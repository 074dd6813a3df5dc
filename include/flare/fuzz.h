/* fuzz.h — generating failing inputs for a network: coverage-guided mutation fuzzing
 * (DeepHunter, TensorFuzz), gradient-guided generation (DLFuzz, DeepXplore, DeepSA, FGSM,
 * PGD), and the campaign they share (and that GAN-based generators plug into).
 *
 * The life of a campaign (what `flare nn fuzz` does):
 *
 *     fl_fuzz_opts o;
 *     fl_fuzz_opts_default(&o);
 *     o.model = m;  o.seeds = seeds;                 // a model and labelled seed images
 *     o.criterion = "kmnc:100";  o.profile = prof;   // the guide (any `nn cover` criterion)
 *     o.out_dir = "out";  o.max_execs = 100000;
 *     fl_fuzz_result r;
 *     fl_fuzz_run(&o, &r, &e);                       // writes out/ as it goes
 *
 * One iteration: pick a queue entry (o.select), decide how many mutants it gets (the power
 * schedule), make them (the strategy's mutator, under the validity constraint), run them as
 * ONE batched forward pass, ask the oracles, update the coverage incrementally, keep the
 * mutants that reached something new (deephunter: coverage gain of o.criterion; tensorfuzz:
 * nearest-neighbour novelty; random: none). Every random decision comes from o.seed.
 * The gradient strategies step a batch of picked entries along their objective's gradient
 * instead (one batched forward and backward pass per step; docs/nn-fuzz.md).
 *
 * Images are fuzzed as 8-bit pixels [c,h,w] (what a camera writes, what PNG stores): every
 * transformation rounds and clips to 0..255, the distances and DeepHunter's constraint are
 * in those units, and the model sees them through the seeds' fl_scale.
 *
 * The output folder (docs/nn-fuzz.md; AFL++ conventions, every file written atomically):
 *     out/fuzzer_stats        "key : value" lines, rewritten every second or so
 *     out/plot_data           CSV: relative_time, execs_done, corpus_count, covered, total,
 *                             coverage, failures, failures_total, execs_per_sec
 *     out/queue/id:NNNNNN,src:NNNNNN,op:NAME.{npy,png,json}   (seeds: id:NNNNNN,orig:INDEX)
 *         npy: float32 [1,c,h,w] as fed to the model; png: the pixels; json: the lineage
 *     out/failures/<true>-<pred>/root:NNNNNN,first.{npy,png,json}  and  ...,min.{...}
 *         the first failure of that (class pair, lineage root), and the one closest to its
 *         seed (L2); json fields in docs/nn-fuzz.md; .pair.png = seed next to mutant
 *     out/failures.png        a labelled grid: seed next to mutant, for the distinct failures
 *     out/summary.json        the campaign's totals; out/report.html (self-contained)
 */
#ifndef FLARE_FUZZ_H
#define FLARE_FUZZ_H

#include "flare/cover.h"
#include "flare/train.h" /* fl_epoch_stats (fl_retrain_opts) */

/* ---- image transformations (src/fuzz/xform.c) ---------------------------------------------
 * DeepHunter's (Xie et al., ISSTA 2019) transformation families. The first four are affine;
 * a lineage gets at most one affine transformation (the paper's rule: after it, the reference
 * image I0 of the validity check becomes the transformed original). */
typedef enum fl_xform_kind {
    FL_XF_TRANSLATE = 0, /* p, p2: shift in pixels (x, y); zero fill */
    FL_XF_SCALE,         /* p: zoom factor about the centre (bilinear); zero fill */
    FL_XF_SHEAR,         /* p: horizontal shear factor about the centre */
    FL_XF_ROTATE,        /* p: degrees, counter-clockwise about the centre */
    FL_XF_CONTRAST,      /* p: v * p */
    FL_XF_BRIGHTNESS,    /* p: v + p */
    FL_XF_BLUR,          /* p: kernel id 1..10 (box 3/4/5/6, Gaussian 3/5/7, median 3/5,
                            bilateral 9), as DeepTest's / NeuraL-Coverage's image_blur */
    FL_XF_PIXEL,         /* p: number of pixels set to random values */
    FL_XF_NOISE,         /* p: 1 Gaussian (sigma p2), 2 salt-and-pepper (ratio p2),
                            3 multiplicative / speckle (sigma p2) */
    FL_XF_GAUSS,         /* TensorFuzz: every value + N(0, p) (p in pixel levels) */
    FL_XF_COUNT_
} fl_xform_kind;

typedef struct fl_xform {
    fl_xform_kind kind;
    float p, p2;
} fl_xform;

const char *fl_xform_name(fl_xform_kind k); /* "translate", "scale", ... */
static inline int fl_xform_is_affine(fl_xform_kind k) { return k <= FL_XF_ROTATE; }
/* "rotate:12", "translate:-3,2", "noise:2,0.05" into buf; returns buf. */
const char *fl_xform_str(const fl_xform *t, char *buf, size_t n);
/* Parse what fl_xform_str writes (lineages are read back on resume). */
fl_status fl_xform_parse(const char *s, fl_xform *out, fl_err *e);

/* dst = t(src) for one image of c x h x w 8-bit pixels (src and dst must not overlap);
 * rounded and clipped to 0..255. Random transformations (pixel, noise, gauss) draw from r;
 * the others ignore it. The same t, src and r state give the same dst. */
void fl_xform_apply(const fl_xform *t, const uint8_t *src, uint8_t *dst, int c, int h, int w,
                    fl_rng *r);

/* The parameter menus a mutator picks from. */
typedef enum fl_fuzz_preset {
    FL_PRESET_DEEPHUNTER = 0, /* DeepHunter's released parameter ranges, alpha 0.02, beta 0.2,
                                 TRY_NUM 50, K 64; L0 counted over all values */
    FL_PRESET_NLC             /* NeuraL-Coverage's fuzz.py: its ranges (no shear, no noise),
                                 alpha 0.4, beta 0.8, TRY_NUM 50, K 64; L0 relative to the
                                 number of non-zero values of I0, as its f() does */
} fl_fuzz_preset;

typedef struct fl_xform_menu {
    int n;          /* choices */
    fl_xform *v;    /* [n]: the affine ones first */
    int n_affine;   /* v[0 .. n_affine) are affine */
    int by_kind;    /* how fl_fuzz_mutate picks: 0 one of the allowed entries uniformly
                       (NeuraL-Coverage's randomPick over its flat list); 1 one of the allowed
                       kinds uniformly, then one of its entries (DeepHunter's mutate_one) */
} fl_xform_menu;

fl_status fl_xform_menu_make(fl_fuzz_preset preset, fl_xform_menu *out, fl_err *e);
void fl_xform_menu_free(fl_xform_menu *m);

/* DeepHunter's validity constraint of x against its lineage's reference I0 (n values):
 * if L0(x - I0) < alpha * size then L-inf <= 255 (always true), else L-inf <= beta * 255.
 * size is n, or with nonzero_size the number of non-zero values of I0 (NeuraL-Coverage). */
int fl_fuzz_valid(const uint8_t *i0, const uint8_t *x, int64_t n, double alpha, double beta,
                  int nonzero_size);

/* What fl_fuzz_mutate learns about one (img, i0) pair, kept for the next mutants of the same
 * pair (one round makes up to K of them). A menu entry whose kind draws no random numbers
 * (every kind but pixel, noise and gauss) gives the same image each time it is applied to
 * img, so once it was found invalid it is skipped without being applied again. Skipping
 * draws nothing: the mutants and the random stream are the same with or without a memo.
 * Valid for one img, i0, menu, alpha, beta and nonzero_size; fl_fuzz_memo_init starts it
 * for a pair (no allocation). */
typedef struct fl_fuzz_memo {
    const uint8_t *img, *i0; /* the pair it describes */
    int same;                /* img == i0 value for value: t(i0) = t(img) for an affine t */
    int64_t size;            /* the validity check's size (n, or the non-zero values of i0) */
    uint64_t bad[4];         /* menu entries 0..255 known invalid */
} fl_fuzz_memo;
void fl_fuzz_memo_init(fl_fuzz_memo *m, const uint8_t *img, const uint8_t *i0, int64_t n,
                       int nonzero_size);

/* DeepHunter's Mutate(I): up to try_num times pick a transformation from the menu (affine
 * ones only while *affine_used == 0), apply it to img and check the result against the
 * reference: i0, or for an affine pick t(i0), the lineage's new reference, written to new_i0
 * (the caller provides the buffer, never NULL). On success writes out, *used, returns 1; an
 * affine success also sets *affine_used = 1. Returns 0 after try_num invalid tries (out and
 * new_i0 unspecified). memo: NULL, or one made by fl_fuzz_memo_init for this img and i0
 * (one for another pair is ignored); it only saves work. */
int fl_fuzz_mutate(const fl_xform_menu *menu, const uint8_t *img, const uint8_t *i0,
                   int c, int h, int w, int *affine_used, double alpha, double beta,
                   int nonzero_size, int try_num, fl_rng *r, uint8_t *out, uint8_t *new_i0,
                   fl_xform *used, fl_fuzz_memo *memo);

/* Distances between 8-bit images of n values, on the [0,1] scale (value / 255): L0 counts
 * the values that differ, L2 and L-inf as usual. */
void fl_fuzz_dist(const uint8_t *a, const uint8_t *b, int64_t n, double *l0, double *l2,
                  double *linf);

/* ---- the campaign (src/fuzz/campaign.c) -------------------------------------------------- */
typedef enum fl_fuzz_strategy {
    FL_FUZZ_DEEPHUNTER = 0, /* DeepHunter transformations, kept on coverage gain */
    FL_FUZZ_TENSORFUZZ,     /* Gaussian noise under an L-inf bound against the root seed,
                               kept when its nearest neighbour in the corpus is far */
    FL_FUZZ_RANDOM,         /* DeepHunter transformations of the seeds, nothing kept: the
                               baseline that shows what guidance buys */
    /* gradient-guided (src/fuzz/grad*.c): each picked entry is stepped `iters` times along the
     * gradient of the strategy's objective; a batch of entries shares one backward pass */
    FL_FUZZ_DLFUZZ,         /* DLFuzz: raise the top-2..5 logits and k selected neurons, lower
                               the label's; kept on coverage gain under an L2 bound */
    FL_FUZZ_DEEPXPLORE,     /* DeepXplore: make one of 2-3 models disagree, raise one uncovered
                               neuron per model, under a domain constraint */
    FL_FUZZ_DEEPSA,         /* DeepSA: raise the top-2..5 probabilities and the surprise (DSA or
                               LSA) on LRP-important neurons; kept when the surprise grows */
    FL_FUZZ_FGSM,           /* one signed-gradient step of size eps on the cross-entropy */
    FL_FUZZ_PGD,            /* iterated signed steps, projected on the L-inf eps-ball (random
                               start) */
    /* generation-based (src/fuzz/gan_round.c) */
    FL_FUZZ_FUZZGAN,        /* FuzzGAN: a trained generator (gan.h) makes cases of a random
                               class targeting an uncovered neuron; kept when they add coverage
                               or the model gets their class wrong */
    FL_FUZZ_STRATEGY_COUNT_
} fl_fuzz_strategy;

typedef enum fl_fuzz_select {
    FL_QSEL_DEFAULT = 0, /* the strategy's own: prob for deephunter, tensorfuzz for tensorfuzz,
                            uniform (over the seeds) for random, fifo for the gradient ones */
    FL_QSEL_UNIFORM,     /* every entry alike */
    FL_QSEL_TENSORFUZZ,  /* one of the 5 newest entries, or (1 in 6) any entry */
    FL_QSEL_DEEPTEST,    /* the newest entry first */
    FL_QSEL_PROB,        /* DeepHunter: the batches (a seed, or the mutants one round kept)
                            walked in queue order, each taken with priority 1 - B_c/gamma, at
                            least p_min, where B_c is how often the batch was fuzzed (a queue
                            cycle: every seed once before any twice); then one of its entries
                            uniformly */
    FL_QSEL_FIFO,        /* the oldest entry not fuzzed yet, then uniform: DLFuzz's list of
                            images to process (the gradient strategies' default) */
    FL_QSEL_COUNT_
} fl_fuzz_select;

static inline int fl_fuzz_is_gradient(fl_fuzz_strategy s) {
    return s >= FL_FUZZ_DLFUZZ && s <= FL_FUZZ_PGD;
}

/* deepxplore's domain constraints (how the gradient may change the image) */
typedef enum fl_dx_constraint {
    FL_DX_LIGHT = 0, /* every pixel moves by the gradient's mean: lighter or darker */
    FL_DX_OCCLUSION, /* only a rectangle changes (dx_rect) */
    FL_DX_BLACKOUT,  /* one random small square per step, darkened where the gradient says so */
    FL_DX_NONE       /* the raw gradient */
} fl_dx_constraint;

fl_status fl_fuzz_strategy_parse(const char *s, fl_fuzz_strategy *out, fl_err *e);
const char *fl_fuzz_strategy_name(fl_fuzz_strategy s);
fl_status fl_fuzz_select_parse(const char *s, fl_fuzz_select *out, fl_err *e);
const char *fl_fuzz_select_name(fl_fuzz_select s);

/* Called about once a second and at the end (live status, progress). */
typedef struct fl_fuzz_status {
    double elapsed;          /* seconds in this session */
    int64_t execs;           /* mutants evaluated (all sessions) */
    double execs_per_s;      /* this session */
    int64_t corpus;          /* queue entries (seeds included) */
    int64_t covered, total;  /* the guide's coverage (total 0: unbounded, e.g. tknp) */
    int64_t failures;        /* distinct (class pair, root) findings */
    int64_t failures_total;  /* failing mutants, repeats included */
    int64_t last_new_s;      /* seconds since the queue last grew */
} fl_fuzz_status;

typedef struct fl_fuzz_opts {
    fl_model *model;          /* the model under test */
    fl_model *model2;         /* differential oracle (same input and output shapes), or NULL;
                                 deepxplore's second model */
    const fl_dataset *seeds;  /* the seed images (labels: the misclassification oracle's
                                 truth; unlabelled seeds take the model's prediction) */
    const fl_dataset *train;  /* criteria built from training data (lsc, dsc, idc), or NULL */
    const fl_profile *profile;/* kmnc, nbc, snac */
    const char *important;    /* idc, deepsa: `flare nn lrp` output, or NULL */
    const char *layers;       /* layer set of the criterion; NULL: the profile's, else "all" */
    const char *criterion;    /* "nc:0.75", "kmnc:100", ...: measured always, the guide of
                                 deephunter */
    fl_fuzz_strategy strategy;
    fl_fuzz_select select;
    fl_fuzz_preset preset;
    double alpha, beta;       /* < 0: the preset's */
    int try_num, k;           /* <= 0: the preset's (TRY_NUM, K) */
    double gamma, p_min;      /* prob selection: 5, 0.01 (NeuraL-Coverage) */
    double tf_sigma;          /* tensorfuzz: noise sigma in pixel levels (25.5) */
    double tf_bound;          /* tensorfuzz: L-inf bound against the root in levels (51) */
    double tf_threshold;      /* tensorfuzz: novelty distance (L2 of the layer's values) */
    const char *tf_layer;     /* tensorfuzz: the layer whose values are compared; NULL logits */
    /* gradient strategies (docs/nn-fuzz.md has each default's source). Images are stepped on
     * the [0,1] scale (pixel / 255); every evaluated step is rounded to 8-bit pixels. */
    int iters;                /* steps per picked entry; 0: dlfuzz 5, deepxplore 50, deepsa 5,
                                 fgsm 1, pgd 40 */
    double step;              /* step on [0,1]; <= 0: dlfuzz 0.02, deepxplore 10/255,
                                 deepsa 0.1, pgd 0.01 */
    double eps;               /* fgsm / pgd: L-inf radius on [0,1] around the root; <= 0: 0.3 */
    double lambda;            /* weight of the neuron / surprise term; < 0: dlfuzz 0.5,
                                 deepxplore 0.1 (weight_nc), deepsa 1 */
    double w_diff;            /* deepxplore weight_diff; < 0: 1 (fl_fuzz_opts_default sets the
                                 three "< 0" fields to -1) */
    int n_neurons;            /* dlfuzz: neurons raised per picked entry (k); 0: 10 */
    const char *neuron_select;/* dlfuzz: ","-list of often, rarely, weight, threshold (k split
                                 between them); NULL: random uncovered neurons */
    double nc_threshold;      /* dlfuzz / deepxplore: a neuron is covered when its channel mean,
                                 scaled to [0,1] over its layer, exceeds this; < 0: dlfuzz 0.5,
                                 deepxplore 0 */
    fl_model *model3;         /* deepxplore: a third model, or NULL */
    fl_dx_constraint dx_constraint; /* deepxplore: FL_DX_LIGHT */
    int dx_rect[4];           /* occlusion: x, y, w, h in pixels; w 0: (0, 0, 10, 10) */
    int dx_patch;             /* blackout: square side in pixels; 0: 6 */
    int sa_kind;              /* deepsa: FL_SA_DSA (DFuzz) or FL_SA_LSA (LFuzz), from sa.h */
    int sa_exact;             /* deepsa: 0 the released code (SA only decides acceptance),
                                 1 SA is differentiated through the model */
    int max_kept;             /* deepsa: steps kept per seed lineage; 0: 25 */
    double max_l2;            /* kept only when ||x - x0||2 / ||x0||2 is below; <= 0: dlfuzz
                                 0.02, deepsa 0.5 */
    struct fl_gan *gen;       /* fuzzgan: the generator (gan.h); then seeds may be NULL, and the
                                 layer set is the one the generator was trained on */
    int64_t max_suite;        /* stop when the queue holds this many cases; 0: no limit */
    double target_cov;        /* stop when the guide's coverage reaches this share; 0: none */
    const char *out_dir;      /* required */
    int resume;               /* continue the campaign in out_dir (`-i -`) */
    double max_time;          /* seconds; 0: no limit */
    int64_t max_execs;        /* mutants; 0: no limit (one of the two limits is required
                                 unless stop is set) */
    uint64_t seed;
    int batch;                /* images per forward pass for the dry run; 0: 256 */
    volatile int *stop;       /* set to 1 (e.g. from SIGINT) to stop after this iteration */
    void (*on_status)(const fl_fuzz_status *s, void *user); /* may be NULL */
    void *user;
    const char *command_line; /* recorded in fuzzer_stats, or NULL */
    const char *model_path, *model2_path, *model3_path, *seeds_spec; /* recorded (resume reloads the seeds'
                                 spec for its classes and scale), or NULL */
    const char *gen_path;     /* fuzzgan: the generator's file, recorded, or NULL */
} fl_fuzz_opts;

void fl_fuzz_opts_default(fl_fuzz_opts *o);

typedef struct fl_fuzz_result {
    fl_fuzz_status last;      /* the final status */
    int64_t seeds_used;       /* seeds in the queue (correctly classified ones) */
    int64_t seeds_dropped;    /* seeds the model already misclassifies (not fuzzed) */
    int64_t by_oracle[3];     /* distinct findings: misclassification, disagreement, nonfinite */
} fl_fuzz_result;

/* Run a campaign until a limit, *stop, or an error. Everything is checked before out_dir is
 * created (shapes of seeds and model2, the criterion and its profile, an out_dir holding
 * another campaign without resume); a failed check leaves nothing behind. */
fl_status fl_fuzz_run(const fl_fuzz_opts *o, fl_fuzz_result *r, fl_err *e);

/* The value recorded under key in out_dir/fuzzer_stats, into buf; returns 0 (buf "") when the
 * file or the key is absent (and 0, buf untouched, when n is 0). How a resumed run finds its seed, seeds and scale. */
int fl_fuzz_stats_get(const char *out_dir, const char *key, char *buf, size_t n);

/* ---- report (src/fuzz/report.c) ----------------------------------------------------------- */
/* Write out_dir/report.html from what the folder holds (fuzzer_stats, plot_data, failures/):
 * self-contained (images inline), so it can be written at any time and mailed around. */
fl_status fl_fuzz_report_write(const char *out_dir, fl_err *e);

/* ---- retraining (src/fuzz/retrain.c) ------------------------------------------------------ */
typedef struct fl_retrain_opts {
    const char *const *extra; /* failure folders (out/failures) or campaign folders */
    int n_extra;
    double holdout;           /* share of the failures kept out of training: 0.3 */
    int epochs;               /* 1 */
    int batch;                /* 64 */
    float lr;                 /* Adam 1e-4: fine-tuning */
    uint64_t seed;            /* the split and the shuffling */
    void (*on_epoch)(const fl_epoch_stats *s, void *user);
    void *user;
} fl_retrain_opts;

void fl_retrain_opts_default(fl_retrain_opts *o);

typedef struct fl_retrain_result {
    int64_t n_failures, n_train_failures, n_holdout; /* found, used for training, held out */
    double clean_before, clean_after;     /* accuracy on the clean test set */
    double holdout_before, holdout_after; /* accuracy on the held-out failures (their labels) */
} fl_retrain_result;

/* Fine-tune m on train plus the failures of o->extra (labelled with their seed's label);
 * accuracy on test and on the held-out failures before and after. */
fl_status fl_retrain(fl_model *m, const fl_dataset *train, const fl_dataset *test,
                     const fl_retrain_opts *o, fl_retrain_result *r, fl_err *e);

#endif
