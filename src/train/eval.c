/* Evaluation: batched inference in eval mode, accuracy, per-class accuracy, confusion matrix.
 *
 * Batches are copied out of the dataset (fl_dataset_batch scales 8-bit storage on the way)
 * into one buffer allocated up front; the last, smaller batch is a view on its first rows.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/train_int.h"

void fl_eval_result_free(fl_eval_result *r) {
    if (!r) return;
    free(r->class_acc);
    free(r->class_n);
    free(r->confusion);
    free(r->pred);
    memset(r, 0, sizeof *r);
}

/* Allocate r's arrays for K classes and n samples. */
static fl_status result_alloc(fl_eval_result *r, int K, int64_t n, fl_err *e) {
    r->n_classes = K;
    r->class_acc = calloc((size_t)K, sizeof(double));
    r->class_n = calloc((size_t)K, sizeof(int64_t));
    r->confusion = calloc((size_t)K * K, sizeof(int64_t));
    r->pred = calloc((size_t)n, sizeof(int32_t));
    if (!r->class_acc || !r->class_n || !r->confusion || !r->pred)
        return fl_fail(e, FL_ERR_NOMEM, "eval: out of memory for %d classes", K);
    return FL_OK;
}

static fl_status eval_batches(fl_model *m, const fl_dataset *d, fl_tensor *x, fl_eval_result *r,
                              fl_err *e) {
    int C = 0;
    double loss_sum = 0;
    for (int64_t start = 0; start < d->n; start += x->shape[0]) {
        int64_t nb = d->n - start < x->shape[0] ? d->n - start : x->shape[0];
        fl_tensor xb = *x;
        xb.shape[0] = nb;
        xb.size = fl_shape_size(xb.ndim, xb.shape);
        fl_status st = fl_dataset_batch(d, start, nb, &xb, e);
        if (st == FL_OK) st = fl_model_forward(m, &xb, e);
        if (st != FL_OK) return st;
        int firstC = C == 0;
        const fl_tensor *logits = fl__logits(m, nb, &C, e);
        if (!logits) return e ? e->status : FL_ERR_SHAPE;
        if (firstC) {
            if ((st = fl__check_labels(d, C, "dataset", e)) != FL_OK) return st;
            if ((st = result_alloc(r, C == 1 ? 2 : C, d->n, e)) != FL_OK) return st;
        }
        const int32_t *y = d->y + start;
        loss_sum += (double)fl_loss_labels(C == 1 ? FL_LOSS_BCE : FL_LOSS_CE, NULL, logits->data,
                                           y, (int)nb, C) * nb;
        for (int64_t b = 0; b < nb; b++) {
            int p = fl__predict(logits->data + b * C, C);
            r->pred[start + b] = p;
            r->confusion[(int64_t)y[b] * r->n_classes + p]++;
        }
    }
    int K = r->n_classes;
    r->n = d->n;
    for (int t = 0; t < K; t++) {
        for (int p = 0; p < K; p++) r->class_n[t] += r->confusion[t * K + p];
        r->correct += r->confusion[t * K + t];
        r->class_acc[t] = r->class_n[t] ? (double)r->confusion[t * K + t] / r->class_n[t] : 0;
    }
    r->accuracy = (double)r->correct / r->n;
    r->loss = loss_sum / r->n;
    return FL_OK;
}

fl_status fl_eval(fl_model *m, const fl_dataset *d, int batch, fl_eval_result *r, fl_err *e) {
    memset(r, 0, sizeof *r);
    if (batch <= 0) batch = 256;
    if (m->n_inputs != 1 || m->n_outputs < 1)
        return fl_fail(e, FL_ERR_ARG, "eval: the model must have one input and an output "
                       "(it has %d inputs, %d outputs)", m->n_inputs, m->n_outputs);
    if (d->n < 1) return fl_fail(e, FL_ERR_ARG, "eval: dataset %s is empty", d->source ? d->source : "");
    if (!d->has_labels)
        return fl_fail(e, FL_ERR_ARG, "eval: dataset %s has no labels", d->source ? d->source : "");
    if (batch > d->n) batch = (int)d->n;
    fl_tensor x = {0};
    int64_t xs[4] = {batch, d->c, d->h, d->w};
    if (fl_tensor_alloc(&x, 4, xs) != FL_OK)
        return fl_fail(e, FL_ERR_NOMEM, "eval: out of memory for batches of %d", batch);
    int was_training = m->training;
    m->training = 0;
    fl_status st = eval_batches(m, d, &x, r, e);
    m->training = was_training;
    fl_tensor_free(&x);
    if (st != FL_OK) fl_eval_result_free(r);
    return st;
}
