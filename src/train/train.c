/* The training loop: shuffle, gather a batch, forward, loss, backward, optimiser step.
 *
 * Everything the loop touches per batch is allocated once before the first epoch: the index
 * permutation, the batch images [B,c,h,w], the labels and the logits gradient [B,C]. The last
 * batch of an epoch may be smaller; it is fed as a view on the same buffers (the model
 * re-plans its activations for that size, and again for the next full batch).
 *
 * Determinism: the permutation comes from an fl_rng seeded with opts->seed and carried over
 * epochs; the model's own rng (Dropout masks) is reseeded from the same seed. With the same
 * thread count the BLAS calls add in the same order, so two runs give identical weights.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/train_int.h"

void fl_train_opts_default(fl_train_opts *o) {
    memset(o, 0, sizeof *o);
    /* LeNet-5 on Fashion-MNIST: 89.6 % test accuracy after 10 epochs (docs/training.md) */
    o->epochs = 10;
    o->batch = 64;
    o->lr = 2e-3f;
    o->optim = FL_OPTIM_ADAM;
    o->momentum = 0.9f; /* used only when optim is switched to SGD */
    o->lr_decay = 0.75f;
    o->seed = 1;
    o->loss = FL_LOSS_CE;
    o->progress_every = 20;
}

static fl_status check_opts(const fl_model *m, const fl_dataset *d, const fl_dataset *test,
                            const fl_train_opts *o, fl_err *e) {
    if (o->epochs < 1) return fl_fail(e, FL_ERR_ARG, "train: epochs must be >= 1 (got %d)", o->epochs);
    if (o->batch < 1) return fl_fail(e, FL_ERR_ARG, "train: batch must be >= 1 (got %d)", o->batch);
    if (!(o->lr_decay >= 0) || !isfinite(o->lr_decay))
        return fl_fail(e, FL_ERR_ARG, "train: lr decay must be > 0 (got %g)", (double)o->lr_decay);
    if (o->loss != FL_LOSS_CE && o->loss != FL_LOSS_BCE && o->loss != FL_LOSS_MSE)
        return fl_fail(e, FL_ERR_ARG, "train: unknown loss %d", (int)o->loss);
    if (m->n_inputs != 1 || m->n_outputs < 1)
        return fl_fail(e, FL_ERR_ARG, "train: the model must have one input and an output "
                       "(it has %d inputs, %d outputs)", m->n_inputs, m->n_outputs);
    if (d->n < 1 || d->c < 1)
        return fl_fail(e, FL_ERR_ARG, "train: training set %s is empty", d->source ? d->source : "");
    if (test && (test->c != d->c || test->h != d->h || test->w != d->w))
        return fl_fail(e, FL_ERR_SHAPE, "train: test images are %dx%dx%d, training images %dx%dx%d",
                       test->c, test->h, test->w, d->c, d->h, d->w);
    return FL_OK;
}

/* Per-run buffers, allocated once. */
typedef struct run {
    int64_t *perm;   /* [n] sample order of the current epoch */
    fl_tensor x;     /* [B,c,h,w] batch images */
    int32_t *y;      /* [B] batch labels */
    fl_tensor dy;    /* [B,C] logits gradient (allocated after the first forward, once C is known) */
    fl_optim *opt;
    float *snap;     /* with o->stop: the initializers after the last finished epoch */
} run;

static void run_free(run *r) {
    free(r->perm);
    fl_tensor_free(&r->x);
    free(r->y);
    fl_tensor_free(&r->dy);
    fl_optim_free(r->opt);
    free(r->snap);
}

/* A [nb, ...] view of the first nb rows of a [B, ...] buffer. */
static fl_tensor rows(const fl_tensor *t, int64_t nb) {
    fl_tensor v = *t;
    v.shape[0] = nb;
    v.size = fl_shape_size(v.ndim, v.shape);
    return v;
}

/* Train one batch of nb samples perm[start..start+nb): returns FL_OK and adds the summed
 * loss and the number of correct predictions. */
static fl_status train_batch(fl_model *m, const fl_dataset *d, const fl_train_opts *o, run *r,
                             int64_t start, int64_t nb, int *C, double *loss_sum,
                             int64_t *correct, fl_err *e) {
    fl_tensor xb = rows(&r->x, nb);
    fl_status st = fl_dataset_gather(d, r->perm + start, nb, &xb, r->y, e);
    if (st == FL_OK) st = fl_model_forward(m, &xb, e);
    if (st != FL_OK) return st;
    int firstC = *C == 0;
    const fl_tensor *logits = fl__logits(m, nb, C, e);
    if (!logits) return e ? e->status : FL_ERR_SHAPE;
    if (firstC) {
        if (*C == 1 && o->loss == FL_LOSS_CE)
            return fl_fail(e, FL_ERR_ARG, "train: the model has a single output; use the bce or "
                           "mse loss for a binary classifier");
        if ((st = fl__check_labels(d, *C, "training set", e)) != FL_OK) return st;
        int64_t ds[2] = {o->batch, *C};
        if (fl_tensor_alloc(&r->dy, 2, ds) != FL_OK)
            return fl_fail(e, FL_ERR_NOMEM, "train: out of memory");
    }
    fl_tensor dyb = rows(&r->dy, nb);
    float loss = fl_loss_labels(o->loss, dyb.data, logits->data, r->y, (int)nb, *C);
    if (!isfinite(loss))
        return fl_fail(e, FL_ERR_NAN, "train: the loss became %g (diverged); try a smaller "
                       "learning rate than %g", (double)loss, (double)o->lr);
    for (int64_t b = 0; b < nb; b++)
        *correct += fl__predict(logits->data + b * *C, *C) == r->y[b];
    *loss_sum += (double)loss * nb;
    fl_model_zero_param_grads(m);
    int out = m->outputs[0];
    st = fl_model_backward_idx(m, 1, &out, &dyb, e);
    if (st != FL_OK) return st;
    fl_optim_step(r->opt);
    return FL_OK;
}

/* The model's initializers (parameters, BatchNorm's running statistics) after the last
 * finished epoch, for a stop in the middle of the next one (only kept with o->stop). */
static fl_status snapshot(fl_model *m, run *r, int restore, fl_err *e) {
    int64_t n = 0;
    for (int i = 0; i < m->n_values; i++)
        if (m->values[i].kind == FL_VAL_PARAM || m->values[i].kind == FL_VAL_CONST)
            n += m->values[i].t.data ? m->values[i].t.size : 0;
    if (!r->snap && !(r->snap = malloc(sizeof(float) * (size_t)(n ? n : 1))))
        return fl_fail(e, FL_ERR_NOMEM, "train: out of memory for the epoch snapshot");
    float *p = r->snap;
    for (int i = 0; i < m->n_values; i++) {
        fl_tensor *t = &m->values[i].t;
        if ((m->values[i].kind != FL_VAL_PARAM && m->values[i].kind != FL_VAL_CONST) || !t->data)
            continue;
        if (restore) memcpy(t->data, p, sizeof(float) * (size_t)t->size);
        else memcpy(p, t->data, sizeof(float) * (size_t)t->size);
        p += t->size;
    }
    return FL_OK;
}

static fl_status train_epochs(fl_model *m, const fl_dataset *d, const fl_dataset *test,
                              const fl_train_opts *o, run *r, fl_err *e) {
    fl_rng rng;
    fl_rng_seed(&rng, o->seed);
    fl_rng_seed(&m->rng, o->seed ^ 0x5eed0f0d40a7ull);
    int C = 0, every = o->progress_every > 0 ? o->progress_every : 20;
    float lr = o->lr;
    fl_status sst = o->stop ? snapshot(m, r, 0, e) : FL_OK;
    if (sst != FL_OK) return sst;
    for (int ep = 1; ep <= o->epochs; ep++) {
        double t0 = fl_now(), loss_sum = 0;
        int64_t correct = 0, done = 0;
        for (int64_t i = 0; i < d->n; i++) r->perm[i] = i;
        fl_rng_shuffle(&rng, r->perm, d->n);
        m->training = 1;
        for (int64_t start = 0, k = 1; start < d->n; start += o->batch, k++) {
            int64_t nb = d->n - start < o->batch ? d->n - start : o->batch;
            int hadC = C;
            fl_status st = train_batch(m, d, o, r, start, nb, &C, &loss_sum, &correct, e);
            /* the class count is known now: check the test labels before spending an epoch */
            if (st == FL_OK && !hadC && test) st = fl__check_labels(test, C, "test set", e);
            if (st != FL_OK) return st;
            if (o->stop && *o->stop) return snapshot(m, r, 1, e);
            done += nb;
            if (o->progress && (k % every == 0 || done == d->n)) {
                double dt = fl_now() - t0;
                fl_train_progress p = {ep, o->epochs, done, d->n, loss_sum / done,
                                       (double)correct / done, dt > 0 ? done / dt : 0};
                o->progress(&p, o->user);
            }
        }
        fl_epoch_stats s = {ep, o->epochs, loss_sum / d->n, (double)correct / d->n, -1, -1, 0, lr};
        if (test) {
            fl_eval_result er;
            fl_status st = fl_eval(m, test, o->batch > 256 ? o->batch : 256, &er, e);
            if (st != FL_OK) return st;
            s.test_acc = er.accuracy;
            s.test_loss = er.loss;
            fl_eval_result_free(&er);
        }
        s.seconds = fl_now() - t0;
        if (o->stop && (sst = snapshot(m, r, 0, e)) != FL_OK) return sst;
        if (o->on_epoch) o->on_epoch(&s, o->user);
        if (o->lr_decay > 0 && o->lr_decay != 1) {
            lr *= o->lr_decay;
            fl_optim_set_lr(r->opt, lr);
        }
    }
    return FL_OK;
}

fl_status fl_train(fl_model *m, const fl_dataset *train, const fl_dataset *test,
                   const fl_train_opts *o, fl_err *e) {
    fl_status st = check_opts(m, train, test, o, e);
    if (st != FL_OK) return st;
    fl_optim_opts oo;
    fl_optim_opts_default(&oo, o->optim);
    oo.lr = o->lr;
    oo.momentum = o->optim == FL_OPTIM_SGD ? o->momentum : 0;
    oo.weight_decay = o->weight_decay;
    run r = {0};
    int64_t xs[4] = {o->batch, train->c, train->h, train->w};
    r.perm = malloc(sizeof(int64_t) * (size_t)train->n);
    r.y = malloc(sizeof(int32_t) * (size_t)o->batch);
    if (!r.perm || !r.y || fl_tensor_alloc(&r.x, 4, xs) != FL_OK) {
        run_free(&r);
        return fl_fail(e, FL_ERR_NOMEM, "train: out of memory for batches of %d", o->batch);
    }
    st = fl_optim_new(m, &oo, &r.opt, e);
    int was_training = m->training, was_skip = m->skip_input_grad;
    m->skip_input_grad = 1;
    if (st == FL_OK) st = train_epochs(m, train, test, o, &r, e);
    m->training = was_training;
    m->skip_input_grad = was_skip;
    fl_model_want_param_grads(m, 0, NULL);
    run_free(&r);
    return st;
}
