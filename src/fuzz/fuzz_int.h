/* fuzz_int.h — the network campaign's internals, shared by its files:
 *
 *   campaign.c   the loop: pick, power schedule, mutate, one batched forward, keep
 *   queue.c      queue entries and the selection policies (uniform, tensorfuzz, deeptest, prob)
 *   findings.c   the oracles' verdicts, de-duplicated, and the failure files
 *   novelty.c    TensorFuzz's nearest-neighbour novelty (exact, blocked through sgemm)
 *   outdir.c     the output folder: queue files, fuzzer_stats, plot_data, summary, resume
 *   grad*.c      the gradient strategies' round, objectives and neuron tables (grad.h)
 *
 * Dependencies point one way: campaign.c calls the others; they call only the library below
 * (model, cover, data) and the core.
 */
#ifndef FLARE_FUZZ_INT_H
#define FLARE_FUZZ_INT_H

#include <stdio.h>

#include "flare/fuzz.h"
#include "flare/index.h"

/* ---- queue ---------------------------------------------------------------------------------- */
typedef struct fz_entry {
    int64_t id;         /* queue id: position in the queue */
    int64_t src;        /* parent's id; -1 for a seed */
    int64_t root;       /* the lineage's seed (its id) */
    int64_t seed_index; /* the root's index in the seeds dataset */
    int32_t label;      /* the root's label: what the misclassification oracle expects */
    int affine;         /* the lineage has used its one affine transformation */
    fl_xform affine_t;  /* ... this one: the lineage's reference is affine_t(root pixels) */
    int64_t fuzzed;     /* times picked */
    int64_t batch;      /* its batch (fz_queue.b): the entries one round kept together */
    uint8_t *px;        /* [n] pixels */
    uint8_t *i0;        /* the validity reference: the root's px, or its own (affine lineage) */
    int own_i0;         /* i0 is this entry's to free */
    char *ops;          /* the lineage's transformations, oldest first, ' '-separated */
} fz_entry;

typedef struct fz_queue {
    fz_entry *e;
    int64_t n, cap;
    int64_t n_seeds;     /* e[0 .. n_seeds) are seeds */
    fl_fuzz_select sel;
    double gamma, p_min;
    /* Batches, DeepHunter's queue elements: every seed is one, and so are the entries that one
     * round kept (Algorithm 1 adds a round's survivors as one batch). prob's priority and
     * B_c are per batch: a round that keeps 40 mutants adds one batch, not 40 chances to be
     * picked. A batch is contiguous in e[]. */
    struct fz_batch { int64_t first, n, fuzzed; } *b;
    int64_t n_b, cap_b;
    int open;            /* the last batch takes the next entry (fz_queue_seal closes it) */
    /* prob: the next batch its walk looks at (DeepHunter's current_id); it goes round the
     * queue in order, taking each batch with its priority (queue.c) */
    int64_t cursor;
    /* deeptest: ids not fuzzed yet, newest on top */
    int64_t *fresh, n_fresh, cap_fresh;
    int64_t fifo;        /* fifo: entries before this one have all been fuzzed */
} fz_queue;

fl_status fz_queue_init(fz_queue *q, fl_fuzz_select sel, double gamma, double p_min, fl_err *e);
void fz_queue_free(fz_queue *q);
/* Append an entry (takes ownership of px, ops, and i0 when own_i0). It joins the open batch,
 * or starts one. */
fl_status fz_queue_add(fz_queue *q, const fz_entry *ent, fl_err *e);
/* Close the open batch: the next entry starts a new one (before every round, after every
 * seed). */
void fz_queue_seal(fz_queue *q);
/* Pick the next entry to fuzz (and count the pick). only_seeds: among the seeds only. */
int64_t fz_queue_pick(fz_queue *q, fl_rng *r, int only_seeds);

/* ---- findings ------------------------------------------------------------------------------- */
enum { FZ_OR_MISCLASS = 0, FZ_OR_DISAGREE, FZ_OR_NONFINITE };

typedef struct fz_verdict {
    int oracle;        /* FZ_OR_* */
    int32_t label, pred, pred2; /* pred -1: non-finite; pred2 -1: no second model */
    float confidence;
} fz_verdict;

typedef struct fz_finding {
    int oracle;
    int32_t label, pred, pred2;
    int64_t root;
    int64_t seen;
    double min_l2;
    int64_t pending;    /* index of its unwritten closest example in fz_findings.pend, or -1 */
} fz_finding;

/* A closest-so-far example not written yet: a finding's "min" files are rewritten at most
 * once per status report (fz_findings_flush), not for every closer mutant, which made file
 * writes the larger part of a gradient campaign's time. Copies: the queue may move. */
typedef struct fz_pending {
    int64_t finding;
    fz_verdict v;
    int64_t parent, root, exec;
    double time, l0, l2, linf;
    uint8_t *px;
    float *input;
    char op[64];
} fz_pending;

typedef struct fz_findings {
    fz_finding *f;
    int64_t n, cap;
    fl_index ix;        /* key hash -> position in f */
    int64_t total;      /* failing mutants, repeats included */
    int64_t by_oracle[3];
    fz_pending *pend;
    int64_t n_pend, cap_pend;
} fz_findings;

/* What one failing mutant is, for its files. */
typedef struct fz_failure {
    const fz_verdict *v;
    const fz_entry *parent; /* the mutant's parent in the queue */
    const fz_entry *root;
    const uint8_t *px;      /* the mutant's pixels */
    const float *input;     /* as fed to the model [c*h*w] */
    const char *last_op;    /* the transformation that made it */
    int64_t exec;
    double time;
} fz_failure;

struct fz_campaign;
void fz_findings_free(fz_findings *fs);
/* Count the failure; write its files when it is the first of its (oracle, class pair, root)
 * or closer to its seed than the closest so far. *is_new = 1 for a new distinct finding. */
fl_status fz_findings_add(struct fz_campaign *cp, const fz_failure *f, int *is_new, fl_err *e);
/* Write the pending closest examples (before every fuzzer_stats, and at the end). */
fl_status fz_findings_flush(struct fz_campaign *cp, fl_err *e);
/* Rebuild the table from out/failures (resume). */
fl_status fz_findings_load(struct fz_campaign *cp, fl_err *e);
/* The labelled grid out/failures.png: seed next to mutant for each distinct finding's first
 * example (up to 50 findings). */
fl_status fz_findings_grid(struct fz_campaign *cp, fl_err *e);

/* ---- TensorFuzz novelty ------------------------------------------------------------------- */
typedef struct fz_novelty {
    int d;              /* vector length */
    float *v;           /* [n, d] the corpus */
    double *sq;         /* [n] squared norms */
    int64_t n, cap;
    float *dots;        /* scratch [rows, block] */
    int64_t dots_cap;
} fz_novelty;

/* Distance from each of the rows x[rows, d] to its nearest corpus vector (exact; +inf for an
 * empty corpus), in dist[rows]. Does not add. */
fl_status fz_novelty_nearest(fz_novelty *nv, const float *x, int rows, double *dist, fl_err *e);
fl_status fz_novelty_add(fz_novelty *nv, const float *x, fl_err *e);
void fz_novelty_free(fz_novelty *nv);

/* ---- the campaign ------------------------------------------------------------------------- */
/* What the default batches may hold in activations: the number of images that fit, at most
 * `want` and at least 1 (fz_fit_batch; per_image 0: want). -K and --batch override it. */
#define FZ_BATCH_BYTES ((int64_t)1 << 30)
int fz_fit_batch(int want, int64_t per_image);

typedef struct fz_campaign {
    const fl_fuzz_opts *o;
    int c, h, w;
    int64_t n;                 /* values per image */
    int64_t image_bytes;       /* the model's activations for one image (fl_model_act_bytes) */
    int n_classes;
    char **class_names;        /* borrowed from the seeds, or made up "0".."K-1" */
    float lut[3][256];         /* pixels to inputs */
    fl_scale scale;            /* ... that map: the seeds' scale, or the generator's */
    fl_xform_menu menu;
    double alpha, beta;
    int try_num, k, nonzero;
    fz_queue q;
    fz_findings fs;
    fz_novelty nv;
    int nv_layer;              /* model value compared by tensorfuzz */
    fl_layerset *ls;
    fl_coverset *cov;
    fl_rng rng;                /* picks; each mutant gets its own stream (see campaign.c) */
    uint64_t session_seed;
    int session;               /* 1 for a new campaign, +1 per resume */
    int64_t execs, execs_before; /* all sessions / before this one */
    int64_t slots;             /* mutants attempted in this session (their random streams) */
    double t0, time_before;    /* this session's start; run time of earlier sessions */
    double last_stats, last_new;
    FILE *plot;
    fl_fuzz_status st;
    struct fz_grad *grad;      /* the gradient strategies' state (grad.c), or NULL */
    fl_tensor gan_img;         /* fuzzgan: the generator's last batch [k, c, h, w] */
    uint64_t model_hash, gen_hash; /* their weights' FNV-1a (fz_weights_hash): a resume must
                                      bring the same model (and generator) */
} fz_campaign;

/* Queue a child of entry pid: pixels px (copied), op appended to the parent's lineage; a
 * child that used its lineage's affine step brings its new reference new_i0 (and affine_t),
 * otherwise new_i0 is NULL. Writes its files. */
fl_status fz_keep(fz_campaign *cp, int64_t pid, const uint8_t *px, const char *op,
                  const uint8_t *new_i0, const fl_xform *affine_t, fl_err *e);

/* Pixels [rows, n] to model inputs x (allocated [rows, c, h, w] if needed). */
void fz_to_input(const fz_campaign *cp, const uint8_t *px, int rows, float *x);

/* ---- the output folder ---------------------------------------------------------------------- */
/* path = out_dir/rel (FL_ERR_ARG when too long). */
fl_status fz_path(char *buf, size_t n, const char *out_dir, const char *rel, fl_err *e);
/* Before anything is written: refuse a folder holding another campaign unless resuming;
 * with resume, require one. Creates nothing. */
fl_status fz_out_check(const char *out_dir, int resume, fl_err *e);
fl_status fz_out_create(const char *out_dir, fl_err *e);
/* Write queue entry q->e[id]'s files (npy, png, json). */
fl_status fz_out_entry(fz_campaign *cp, int64_t id, const char *last_op, fl_err *e);
fl_status fz_out_stats(fz_campaign *cp, int final, fl_err *e);
fl_status fz_out_plot_row(fz_campaign *cp, fl_err *e);
/* FNV-1a of a model's initializers (shapes and values): what fuzzer_stats records so that a
 * resume with other weights behind the same file name is refused. */
uint64_t fz_weights_hash(const fl_model *m);
/* Resume: the recorded settings (seed, session, execs, time) and the queue entries; refuses
 * another strategy, criterion, model or generator (and, for fuzzgan, another seed). */
fl_status fz_out_resume(fz_campaign *cp, fl_err *e);
/* The JSON file at path, or NULL with e filled (unreadable; FL_ERR_FORMAT when not JSON). */
struct cJSON *fz_json_read(const char *path, fl_err *e);
/* Write j to path atomically (pretty: indented) and delete j. */
fl_status fz_json_write(const char *path, struct cJSON *j, int pretty, fl_err *e);

#endif
