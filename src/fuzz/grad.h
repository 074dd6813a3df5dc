/* grad.h — the gradient strategies (dlfuzz, deepxplore, deepsa, fgsm, pgd): their round
 * (grad.c), their objectives and steps (grad_obj.c), and the neuron tables DLFuzz and
 * DeepXplore pick their neurons from (grad_neuron.c).
 *
 * A round works on a batch of "lanes". A lane is one picked queue entry being stepped: its
 * image lives on the [0,1] scale as floats (so that small steps add up) and is rounded to
 * 8-bit pixels before every forward pass (so that every finding is an image a PNG holds
 * exactly). One forward pass of the batch serves twice: it evaluates each lane's last step
 * (oracles, coverage, acceptance) and it is the pass the next step's gradient comes from, one
 * backward pass for the whole batch. A lane that has taken its `iters` steps (or stopped
 * early: deepxplore at the first disagreement, pgd at the first failure) is refilled with the
 * next pick, so the batch stays full.
 */
#ifndef FLARE_FUZZ_GRAD_H
#define FLARE_FUZZ_GRAD_H

#include "flare/sa.h"
#include "fuzz/fuzz_int.h"

#define FZ_MAX_NEURONS 64 /* neurons one lane may raise (dlfuzz's k, deepxplore's one per model) */
#define FZ_MAX_SEEDS 64   /* tensors one backward pass is seeded on */
#define FZ_MAX_LANES 4096 /* -k of a gradient strategy */

typedef struct fz_lane {
    int64_t entry;        /* the queue entry being stepped; -1: empty */
    int it;               /* steps taken (0: just picked, not initialised) */
    int32_t orig;         /* the picked image's own prediction */
    int32_t top[4];       /* its classes ranked 2..5 (dlfuzz, deepsa); -1 when fewer classes */
    int n_neur;           /* neurons to raise */
    int64_t neur[FZ_MAX_NEURONS];  /* flat index in its model's neuron table */
    int8_t nmodel[FZ_MAX_NEURONS]; /* which model (deepxplore) */
    float nsign[FZ_MAX_NEURONS];   /* +1 raise, -1 lower */
    double best_sa;       /* deepsa: the highest SAv of this lane so far */
    float *x;             /* [n] the image on [0,1] */
    uint8_t *px;          /* [n] x rounded: what the model saw last */
} fz_lane;

/* The seeds of one model's backward pass: tensors keyed by value index, kept allocated
 * between passes, zeroed on first use in a pass. */
typedef struct fz_seeds {
    int n;                    /* slots in use this pass */
    int n_slots;              /* slots allocated */
    int idx[FZ_MAX_SEEDS];    /* value index of each slot */
    uint8_t used[FZ_MAX_SEEDS];
    fl_tensor t[FZ_MAX_SEEDS];
    int pass_idx[FZ_MAX_SEEDS];      /* this pass: value indices and tensors, for backward */
    fl_tensor pass_t[FZ_MAX_SEEDS];
} fz_seeds;

/* Per model: the neurons of layer set "all" and how often each was covered (DLFuzz's
 * model_layer_times; DeepXplore's coverage table is times > 0). A neuron is covered by an
 * input when its channel mean, scaled to [0,1] by the min and max of its whole layer tensor
 * for that input, exceeds the threshold: both tools' update_coverage. */
typedef struct fz_ntab {
    fl_model *m;
    fl_layerset *ls;
    fl_cover_view view;
    int64_t *times;      /* [ls->total] */
    float *scaled;       /* [rows, ls->total] of the last fz_ntab_scaled call */
    int64_t scaled_cap;
    int64_t *top_weight; /* dlfuzz "weight": neurons by mean incoming weight, best first */
    int64_t n_top_weight;
    int logits;          /* value index of the model's logits (pre-softmax) */
    fz_seeds seeds;
} fz_ntab;

fl_status fz_ntab_init(fz_ntab *t, fl_model *m, fl_err *e);
void fz_ntab_free(fz_ntab *t);
/* After a forward pass of `rows` inputs through t->m: t->scaled = their scaled neuron values. */
fl_status fz_ntab_scaled(fz_ntab *t, int rows, fl_err *e);
/* Count row r of t->scaled in t->times (threshold thr). */
void fz_ntab_count(fz_ntab *t, int r, double thr);
/* DLFuzz's neuron selection for lane l from row r of t->scaled: k neurons split between the
 * strategies in sel (a bit set of FZ_NSEL_*), or k random uncovered ones for sel 0. Appends
 * to l->neur with model index `model`. */
enum { FZ_NSEL_OFTEN = 1, FZ_NSEL_RARELY = 2, FZ_NSEL_WEIGHT = 4, FZ_NSEL_THRESHOLD = 8 };
void fz_ntab_select(fz_ntab *t, unsigned sel, int k, double thr, int r, fl_rng *rng,
                    fz_lane *l, int model);
/* --neuron-select "often,rarely,weight,threshold" (any subset) into FZ_NSEL_* bits. */
fl_status fz_nsel_parse(const char *s, unsigned *out, fl_err *e);

/* The seed tensor of value vidx of t->m for this pass (zeroed on first use), or NULL when
 * out of memory or slots. */
fl_tensor *fz_seed_get(fz_seeds *s, fl_model *m, int vidx);
void fz_seeds_begin(fz_seeds *s);
/* Backward from this pass's seeds; the input gradient stays in the model. */
fl_status fz_seeds_backward(fz_seeds *s, fl_model *m, fl_err *e);
void fz_seeds_free(fz_seeds *s);

typedef struct fz_grad {
    int B;                  /* lanes */
    fz_lane *lane;
    int *rows;              /* [B] lanes in the batch, in batch order */
    fl_tensor x;            /* [B,c,h,w] model inputs */
    float *g;               /* [B, n] d objective / d pixel (on [0,1]) */
    float dscale[3];        /* d input / d pixel per channel (the seeds' scale is affine) */
    int n_models;           /* 1, or deepxplore's 2-3 */
    fz_ntab tab[3];
    unsigned nsel;
    fz_verdict *v;          /* [B] */
    int32_t *pred[3];       /* [B] each model's prediction */
    uint8_t *finite;        /* [B] */
    /* deepsa */
    fl_sa *sa;
    fl_layerset *sa_ls;     /* the important file's layers */
    int64_t *sa_idx, sa_n;  /* important neurons: columns of sa_ls's flat vector */
    float *sa_all;          /* [B, sa_ls->total] */
    float *sa_trace;        /* [B, sa_n] */
    float *sa_grad;         /* [B, sa_n] */
    double *sa_val;         /* [B] */
    int *kept_root;         /* [seeds] steps kept per lineage */
    /* the strategy's constants, defaults resolved */
    int iters, max_kept, n_neurons;
    double step, eps, lambda, w_diff, thr, max_l2;
} fz_grad;

fl_status fz_grad_init(fz_grad *g, fz_campaign *cp, fl_err *e);
void fz_grad_free(fz_grad *g);
/* One batch step. *ran = 0 when no lane evaluated anything (all were just picked). */
fl_status fz_grad_round(fz_grad *g, fz_campaign *cp, int *ran, fl_err *e);

/* ---- grad_obj.c ------------------------------------------------------------------------------ */
/* d objective / d logits of lane l for model `model` (z: its logits [K]), into seed [K]. */
void fz_obj_logits(const fz_grad *g, const fz_campaign *cp, const fz_lane *l, int model,
                   const float *z, int K, float *seed);
/* Add w * d(neuron idx of ls)/d(its layer tensor) for row r to the seeds of model t->m. */
fl_status fz_obj_neuron(fz_ntab *t, const fl_layerset *ls, int r, int64_t idx, float w,
                        fl_err *e);
/* Turn lane l's pixel gradient gr [n] (overwritten) into its step and move l->x (clipped,
 * projected); l->px = l->x rounded. */
void fz_obj_step(const fz_grad *g, const fz_campaign *cp, fz_lane *l, float *gr, fl_rng *r);

#endif
