/* train_int.h — helpers shared by the files of the train module; not part of the public API. */
#ifndef FLARE_TRAIN_INT_H
#define FLARE_TRAIN_INT_H

#include "flare/train.h"

/* Predicted class of one row of logits x[C]: the argmax (first on ties), or for a single
 * logit (a binary classifier) 1 when x[0] > 0. */
static inline int fl__predict(const float *x, int C) {
    if (C == 1) return x[0] > 0;
    int best = 0;
    for (int j = 1; j < C; j++)
        if (x[j] > x[best]) best = j;
    return best;
}

/* Check that model m (one input) can be fed d's images, that d is labelled, and that every
 * label is a valid class for a model with C outputs (C == 1: labels 0/1). `what` names the
 * dataset's role in messages ("training set"). In labels.c, with fl__logits. */
fl_status fl__check_labels(const fl_dataset *d, int C, const char *what, fl_err *e);
/* The logits of the last forward pass, checked to be [nb, C]; C is set on the first call
 * (*C == 0). NULL with e filled on mismatch. */
const fl_tensor *fl__logits(fl_model *m, int64_t nb, int *C, fl_err *e);

#endif
