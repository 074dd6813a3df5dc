/* What training and evaluation both check: a labelled data set whose labels fit the model's
 * outputs, and logits of the expected shape after a forward pass. */
#include "train/train_int.h"

fl_status fl__check_labels(const fl_dataset *d, int C, const char *what, fl_err *e) {
    if (d->n < 1) return fl_fail(e, FL_ERR_ARG, "%s %s is empty", what, d->source ? d->source : "");
    if (!d->has_labels)
        return fl_fail(e, FL_ERR_ARG, "%s %s has no labels", what, d->source ? d->source : "");
    int K = C == 1 ? 2 : C;
    for (int64_t i = 0; i < d->n; i++)
        if (d->y[i] < 0 || d->y[i] >= K)
            return fl_fail(e, FL_ERR_ARG, "%s %s: sample %lld has label %d, but the model has %d "
                           "output%s (labels must be in 0..%d)", what, d->source ? d->source : "",
                           (long long)i, (int)d->y[i], C, C == 1 ? "" : "s", K - 1);
    return FL_OK;
}

const fl_tensor *fl__logits(fl_model *m, int64_t nb, int *C, fl_err *e) {
    const fl_tensor *y = fl_model_output(m, 0);
    char got[128];
    if (!y || y->ndim != 2 || y->shape[0] != nb || (*C && y->shape[1] != *C) || y->shape[1] < 1) {
        if (!y) fl_fail(e, FL_ERR_SHAPE, "the model has no output");
        else fl_fail(e, FL_ERR_SHAPE, "output '%s' has shape %s; expected logits [%lld,%s] for a "
                     "batch of %lld", fl_model_output_name(m, 0), fl_shape_str(y, got, sizeof got),
                     (long long)nb, *C ? "C" : "classes", (long long)nb);
        return NULL;
    }
    *C = (int)y->shape[1];
    return y;
}
