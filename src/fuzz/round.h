/* round.h — one round of the campaign (round.c): pick an entry, make its mutants, evaluate
 * them as one batch, judge, keep. */
#ifndef FLARE_FUZZ_ROUND_H
#define FLARE_FUZZ_ROUND_H

#include "fuzz/fuzz_int.h"

typedef struct fz_round {
    int cap;             /* rows the buffers hold: max(K, the dry run's batch) */
    uint8_t *px, *i0;    /* [cap, n] mutants' pixels; their new reference (affine) */
    fl_xform *op;        /* [cap] the transformation that made each */
    uint8_t *valid;      /* [cap] mutate succeeded */
    uint8_t *new_affine; /* [cap] the mutant used the lineage's affine transformation */
    int *rows;           /* [cap] valid slots, in slot order */
    int *finite;         /* [cap] rows whose logits are finite */
    fl_tensor x, x2;     /* [cap,c,h,w] inputs; the finite ones when some are not */
    uint8_t *added;      /* [cap] coverage flags */
    fz_verdict *v;       /* [cap] */
    double *dist;        /* [cap] novelty distances */
} fz_round;

fl_status fz_round_init(fz_round *rd, fz_campaign *cp, fl_err *e);
void fz_round_free(fz_round *rd);
/* Feed every queue entry to the coverage (and the novelty corpus): a new campaign's seeds, or
 * a resumed campaign's whole queue. */
fl_status fz_replay_corpus(fz_round *rd, fz_campaign *cp, fl_err *e);
/* One round; *ran = 0 when the pick gave no valid mutant. */
fl_status fz_round_run(fz_round *rd, fz_campaign *cp, int *ran, fl_err *e);
/* Forward the B mutants rd->px[rd->rows[i]], fill rd->v[i] (pred, pred2, confidence; the
 * caller sets label and oracle); coverage over the finite ones into rd->added (indexed by
 * finite row). *nf = their number, rd->finite[] their indices; the model then holds the pass
 * of exactly those rows (for the novelty vectors). */
fl_status fz_round_evaluate(fz_campaign *cp, fz_round *rd, int B, int *nf, fl_err *e);
/* fuzzgan's round (gan_round.c): k generated cases, evaluated, judged, kept. */
fl_status fz_gan_round(fz_round *rd, fz_campaign *cp, int *ran, fl_err *e);
/* fuzzgan's checks before anything is written: the generator against the model, the layer
 * set, an NC guide. */
fl_status fz_gan_check(fz_campaign *cp, fl_err *e);

/* Index of the largest of v[k] (the first of equals); *conf = its softmax probability. */
int32_t fz_argmax(const float *v, int k, float *conf);

#endif
