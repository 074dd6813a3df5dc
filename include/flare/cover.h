/* cover.h — neuron profiles and coverage criteria (how much of a model's behaviour a set of
 * inputs exercises), incremental, for `flare nn cover` and for the fuzzers' inner loop.
 *
 * 1. A training profile: per-neuron min, max, mean, std over the training set, computed once
 *    in a streaming pass and saved to a file (format in docs/coverage.md).
 *
 *     fl_profile *p;
 *     fl_profile_compute(m, ls, train, 256, NULL, NULL, &p, &e);
 *     fl_profile_save(p, "profile.bin", &e);  ...  fl_profile_load("profile.bin", &p, &e);
 *     fl_profile_match(p, ls, &e);             // same layers and widths as this layer set?
 *
 * 2. Coverage criteria. One fl_cover measures one criterion ("kmnc:1000"); an fl_coverset
 *    measures several ("nc:0.5,kmnc:1000,nbc,snac,tknc:3,tknp") and computes the neuron
 *    values they need once per batch:
 *
 *     fl_cover_ctx ctx = {.m = m, .ls = ls, .profile = p};
 *     fl_coverset *s;
 *     fl_coverset_new(&ctx, "nc:0.5,kmnc:1000,nbc,snac,tknc:3,tknp", &s, &e);
 *     fl_model_forward(m, &x, &e);                    // a batch of n inputs
 *     fl_coverset_update_model(s, m, added, &e);      // added[i]: input i covered something new
 *     fl_cover_stats(s->c[0], &covered, &total);
 *
 *    A fuzzer tries a mutant against a copy:   fl_cover_copy(trial, real, &e);
 *    fl_cover_update(trial, ...); if it added, keep it (or update `real` again).
 *
 * "Added" is sequential: input i of a batch adds coverage when it covers an item that neither
 * the state before the batch nor inputs 0..i-1 covered. The union is order-independent, so
 * feeding a data set in batches of any size gives the same final coverage as one big batch.
 *
 * Writing a criterion (IDC, LSC, DSC plug in this way): define an fl_cover_ops and either add
 * it to the table in src/cover/registry.c (then its name works in spec strings and
 * `flare nn cover --criteria`), or create it directly with fl_cover_new_ops. A criterion
 * keeps ALL of its mutable coverage in the object's storage, which the base code copies,
 * resets and counts for it:
 *   - a fixed item space: init calls fl_cover_layout(c, groups…) (e.g. one group per layer,
 *     width*k items for KMNC), update calls fl_cover_hit(c, item) — returns 1 when new;
 *   - an unbounded space of distinct keys (TKNP's patterns): init calls
 *     fl_cover_layout_keys(c, key_bytes, …), update calls fl_cover_hit_key(c, key).
 * Everything else the criterion allocates in init (parameters, bucket bounds, k-means
 * centroids, scratch sized for a batch) goes to c->params and is shared, read-only, between an
 * object and its clones; scratch that update writes belongs in c->scratch (per object, sized by
 * init via fl_cover_scratch).
 */
#ifndef FLARE_COVER_H
#define FLARE_COVER_H

#include "flare/index.h"
#include "flare/neurons.h"

/* ---- training profile ---------------------------------------------------------------------- */
typedef struct fl_profile {
    int n_layers;
    char **name;     /* [n_layers] tensor names of the layer set it was computed for */
    int64_t *width;  /* [n_layers] neurons per layer */
    int64_t *offset; /* [n_layers] first neuron of each layer in the flat vector */
    int64_t total;   /* neurons */
    int64_t count;   /* inputs seen */
    float *min;      /* [total] smallest value over the inputs seen */
    float *max;      /* [total] largest */
    double *mean;    /* [total] */
    double *std;     /* [total] population standard deviation (ddof = 0, as numpy's std) */
    double *m2_;     /* Welford's running sum of squared deviations (internal) */
} fl_profile;

/* An empty profile for ls's neurons; add batches of neuron values [n, total]. A NaN or Inf
 * value fails with FL_ERR_NAN naming the layer and neuron. */
fl_status fl_profile_new(const fl_layerset *ls, fl_profile **out, fl_err *e);
fl_status fl_profile_add(fl_profile *p, const float *neurons, int n, fl_err *e);
void fl_profile_free(fl_profile *p);

/* One streaming pass of m over d (fl_layerset_stream). progress (may be NULL) is called after
 * every batch with the inputs done so far and d->n. */
typedef void (*fl_progress_fn)(void *user, int64_t done, int64_t total);
fl_status fl_profile_compute(fl_model *m, const fl_layerset *ls, const fl_dataset *d, int batch,
                             fl_progress_fn progress, void *user, fl_profile **out, fl_err *e);

/* Save atomically / load. Load fails with FL_ERR_FORMAT on a truncated or corrupted file
 * (magic, version, sizes, checksum), naming the file. */
fl_status fl_profile_save(const fl_profile *p, const char *path, fl_err *e);
fl_status fl_profile_load(const char *path, fl_profile **out, fl_err *e);
/* The profile's layers as a layer-set spec "a,b,c" (malloc'd; NULL when out of memory). */
char *fl_profile_layers(const fl_profile *p);
/* FL_OK when p was computed for exactly ls's layers (names and widths, in order); otherwise
 * FL_ERR_ARG naming the first difference ("profile has layer 'x' (84 neurons), layer set has
 * 'y' (120)"). */
fl_status fl_profile_match(const fl_profile *p, const fl_layerset *ls, fl_err *e);

/* ---- one batch of neuron values ------------------------------------------------------------ */
/* What criteria read. Flat neuron vectors as in neurons.h: index [i * total + offset[l] + j]. */
typedef struct fl_cover_batch {
    int n;                /* inputs */
    const float *mean;    /* [n, total] neuron values (channel means); always present */
    const float *absmean; /* [n, total] channel means of |x| (NC meanabs), or NULL */
    const float *lmin;    /* [n, n_layers] min over the whole layer tensor of each input */
    const float *lmax;    /* [n, n_layers] max (both: NC deepxplore), or NULL */
    const fl_model *m;    /* the model right after the forward pass of these inputs (criteria
                             that read raw tensors or logits), or NULL */
    /* Optional, filled by fl_coverset for TKNC/TKNP so that they select once: per input, per
     * layer (one after the other) the indices of the min(topk_k, width) largest neurons, best
     * first, ties to the lower index. A criterion needing k <= topk_k reads the first
     * min(k, width) of each layer's part; otherwise (or when NULL) it selects itself. */
    const int32_t *topk;  /* [n, sum over layers of min(topk_k, width)] */
    int topk_k;
} fl_cover_batch;

/* What a criterion needs in its batch beyond `mean`. */
enum {
    FL_COVER_NEED_ABSMEAN = 1u << 0,
    FL_COVER_NEED_RANGE = 1u << 1,
    FL_COVER_NEED_MODEL = 1u << 2,
};

/* Buffers for computing a batch from a model (reused across batches). */
typedef struct fl_cover_view fl_cover_view;
struct fl_cover_view {
    fl_cover_batch b;
    float *mean, *absmean, *lmin, *lmax;
    int64_t cap; /* inputs the buffers hold */
};

/* After fl_model_forward of a batch: fill v->b with what `needs` asks for (mean always).
 * Fails with FL_ERR_NAN on a non-finite neuron value (naming layer and neuron). */
fl_status fl_cover_view_fill(fl_cover_view *v, const fl_layerset *ls, const fl_model *m,
                             unsigned needs, fl_err *e);
void fl_cover_view_free(fl_cover_view *v);

/* ---- criteria ------------------------------------------------------------------------------ */
/* What criteria are built from. Pointers are borrowed: they must outlive every fl_cover made
 * from the context (and its clones). */
typedef struct fl_cover_ctx {
    fl_model *m;               /* the model */
    const fl_layerset *ls;     /* required: the neurons */
    const fl_profile *profile; /* kmnc, nbc, snac (must match ls); NULL for the others */
    const fl_dataset *train;   /* criteria built from training data (idc, lsc, dsc), or NULL */
    const char *aux;           /* a criterion-specific file (idc: `flare nn lrp` output), or NULL */
    void *user;                /* anything else a library user's criterion needs */
} fl_cover_ctx;

typedef struct fl_cover fl_cover;

typedef struct fl_cover_ops {
    const char *name;    /* keyword in spec strings: "nc", "kmnc", ... */
    const char *usage;   /* "nc[:T[:MODE]]" — shown in errors and help */
    unsigned needs;      /* FL_COVER_NEED_* */
    /* Parse arg (the text after "name:", NULL when absent), check ctx, allocate c->params,
     * call fl_cover_layout or fl_cover_layout_keys (exactly one), and optionally
     * fl_cover_scratch. A bad arg fails with FL_ERR_ARG quoting it and `usage`. */
    fl_status (*init)(fl_cover *c, const fl_cover_ctx *ctx, const char *arg, fl_err *e);
    /* Mark the items of inputs 0..b->n-1, in order; set added[i] = 1 for an input that hit a
     * new item (added is zeroed by the caller and never NULL here). */
    fl_status (*update)(fl_cover *c, const fl_cover_batch *b, uint8_t *added, fl_err *e);
    /* Release c->params (NULL: free(c->params)). */
    void (*free_params)(void *params);
} fl_cover_ops;

/* The object. Criteria read the fields; only the functions below write them. */
struct fl_cover {
    const fl_cover_ops *ops;
    unsigned needs;        /* FL_COVER_NEED_*: ops->needs, which init may change (NC's modes) */
    int topk_k;            /* > 0: update uses the batch's top-k lists of this k (TKNC, TKNP) */
    char *spec;            /* as given, e.g. "kmnc:1000" */
    char *detail;          /* what it chose that the spec does not say, for reports (lsc, dsc:
                            * the layer and the bounds), malloc'd by init; or NULL */
    fl_cover_ctx ctx;
    void *params;          /* criterion's read-only state, shared with clones */
    int *params_ref;       /* reference count of params */
    void *scratch;         /* per-object scratch for update */
    size_t scratch_bytes;
    /* coverage storage */
    int n_groups;          /* per-layer breakdown (layers, or 1 group) */
    char **group_name;     /* [n_groups] */
    int64_t *group_off;    /* [n_groups + 1] item ranges (fixed item spaces) */
    int64_t total;         /* items; 0 for an unbounded key space */
    int64_t covered;
    uint8_t *hit;          /* [(total + 7) / 8] covered items: item i is bit i % 8 of byte i / 8 */
    int keyed;             /* key space instead of items */
    size_t key_bytes;
    fl_index keys;         /* key hash -> index of the key in key_store */
    uint8_t *key_store;    /* covered keys, key_bytes each */
    int64_t key_store_cap; /* keys key_store holds */
    struct fl_cover_view *view; /* fl_cover_update_model's buffers (made on first use) */
};

/* Criteria built in (docs/coverage.md has the definitions and their sources):
 *   nc[:T[:MODE]]   neuron coverage, threshold T (default 0.5); MODE deepxplore (default) |
 *                   channel | meanabs | none
 *   kmnc[:K]        K-multisection coverage (default K 1000)
 *   nbc[:SIGMA]     neuron boundary coverage, bounds min - SIGMA*std, max + SIGMA*std (0)
 *   snac[:SIGMA]    strong neuron activation coverage (upper corner only)
 *   tknc[:K]        top-K neuron coverage per layer (default 3)
 *   tknp[:K]        top-K neuron patterns (distinct tuples of per-layer top-K sets; default 3)
 * Spec: one criterion; parameters separated by ':'. */
const fl_cover_ops *fl_cover_find(const char *name); /* NULL when unknown */
const fl_cover_ops *const *fl_cover_all(void);       /* NULL-terminated */

fl_status fl_cover_new(const fl_cover_ctx *ctx, const char *spec, fl_cover **out, fl_err *e);
fl_status fl_cover_new_ops(const fl_cover_ops *ops, const fl_cover_ctx *ctx, const char *arg,
                           fl_cover **out, fl_err *e);
void fl_cover_free(fl_cover *c);

/* Add a batch. added (may be NULL) gets n flags, 1 for inputs that covered something new;
 * *any (may be NULL) = 1 when the batch added coverage. A non-finite value → FL_ERR_NAN. */
fl_status fl_cover_update(fl_cover *c, const fl_cover_batch *b, uint8_t *added, int *any,
                          fl_err *e);
/* The same after fl_model_forward of a batch through ctx.m (one criterion; a set shares the
 * neuron values between its criteria: fl_coverset_update_model). */
fl_status fl_cover_update_model(fl_cover *c, const fl_model *m, uint8_t *added, int *any,
                                fl_err *e);
void fl_cover_stats(const fl_cover *c, int64_t *covered, int64_t *total); /* total 0: unbounded */
/* The same for group g (0 <= g < c->n_groups, named c->group_name[g]): per layer. */
void fl_cover_group_stats(const fl_cover *c, int g, int64_t *covered, int64_t *total);
void fl_cover_reset(fl_cover *c);
/* dst := src; both must come from the same context and spec (one is a clone of the other). */
fl_status fl_cover_copy(fl_cover *dst, const fl_cover *src, fl_err *e);
fl_status fl_cover_clone(const fl_cover *src, fl_cover **out, fl_err *e);

/* For criteria (init / update). */
fl_status fl_cover_layout(fl_cover *c, int n_groups, const char *const *names,
                          const int64_t *items, fl_err *e);
fl_status fl_cover_layout_keys(fl_cover *c, size_t key_bytes, const char *group_name, fl_err *e);
fl_status fl_cover_scratch(fl_cover *c, size_t bytes, fl_err *e);
/* Mark item (0 <= item < total): 1 if it was not covered before, else 0. */
static inline int fl_cover_hit(fl_cover *c, int64_t item) {
    uint8_t *w = c->hit + (item >> 3), bit = (uint8_t)(1u << (item & 7));
    if (*w & bit) return 0;
    *w |= bit;
    c->covered++;
    return 1;
}
/* Whether item is covered. */
static inline int fl_cover_is_hit(const fl_cover *c, int64_t item) {
    return (c->hit[item >> 3] >> (item & 7)) & 1;
}
/* Mark a key of key_bytes bytes: 1 new, 0 seen, -1 out of memory. */
int fl_cover_hit_key(fl_cover *c, const void *key);

/* ---- several criteria ---------------------------------------------------------------------- */
typedef struct fl_coverset {
    int n;
    fl_cover **c;      /* [n] */
    unsigned needs;    /* union of the criteria's needs */
    fl_cover_view view;
    uint8_t *tmp;      /* per-input flags scratch, one row per criterion */
    int64_t tmp_cap;
    int topk_k;        /* the largest topk_k of the criteria: selected once per batch */
    int32_t *topk;     /* its lists (see fl_cover_batch) and the selection scratch (one row
                          of fl_cover__topk_scratch floats per thread) */
    float *topv;
    int64_t topk_cap, topv_cap;
    double *cost;      /* [n] seconds each criterion took on the last batch: the longest are
                          handed out first */
} fl_coverset;

/* spec: criteria separated by ','  ("nc:0.5,kmnc:1000,nbc,snac,tknc:3,tknp"). */
fl_status fl_coverset_new(const fl_cover_ctx *ctx, const char *spec, fl_coverset **out,
                          fl_err *e);
void fl_coverset_free(fl_coverset *s);
/* Update every criterion; added[i] (may be NULL) = input i added coverage to any of them. */
fl_status fl_coverset_update(fl_coverset *s, const fl_cover_batch *b, uint8_t *added,
                             fl_err *e);
/* The same after fl_model_forward of a batch (fills s->view from m, ctx->ls). */
fl_status fl_coverset_update_model(fl_coverset *s, const fl_model *m, uint8_t *added,
                                   fl_err *e);
/* Run m over d in batches (eval mode, fl_layerset_stream) and update every criterion;
 * progress (may be NULL) after every batch with the inputs done and d->n. */
fl_status fl_coverset_run(fl_coverset *s, fl_model *m, const fl_dataset *d, int batch,
                          fl_progress_fn progress, void *user, fl_err *e);

#endif
