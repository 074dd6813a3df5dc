/* Features for IS and FID: one layer's values and the class probabilities of a classifier,
 * collected over a dataset in batches (eval mode). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flare/quality.h"

void fl_quality_feats_free(fl_quality_feats *f) {
    if (!f) return;
    free(f->x);
    free(f->prob);
    memset(f, 0, sizeof *f);
}

fl_status fl_quality_default_layer(const fl_model *m, const char **name, fl_err *e) {
    for (int i = m->n_nodes - 1; i >= 0; i--) {
        const fl_node *n = &m->nodes[i];
        if ((!strcmp(n->op->name, "Gemm") || !strcmp(n->op->name, "MatMul")) && n->n_in > 0 &&
            n->in[0] >= 0) {
            *name = m->values[n->in[0]].name;
            return FL_OK;
        }
    }
    return fl_fail(e, FL_ERR_NOTFOUND, "the model has no Gemm or MatMul node whose input could be "
                   "the feature layer; name one with --layer (see `flare nn info`)");
}

/* 1 when output 0 is made by a Softmax node: it holds probabilities already. */
static int output_is_softmax(const fl_model *m) {
    int p = m->values[m->outputs[0]].producer;
    return p >= 0 && !strcmp(m->nodes[p].op->name, "Softmax");
}

/* prob[0..k) = softmax(z[0..k)), in double, shifted by the maximum. */
static void softmax_row(const float *z, int k, float *prob) {
    double mx = z[0], s = 0;
    for (int j = 1; j < k; j++)
        if (z[j] > mx) mx = z[j];
    for (int j = 0; j < k; j++) s += exp((double)z[j] - mx);
    for (int j = 0; j < k; j++) prob[j] = (float)(exp((double)z[j] - mx) / s);
}

static fl_status run_batches(fl_model *m, int lv, const fl_dataset *d, fl_tensor *x,
                             fl_quality_feats *f, fl_err *e) {
    int soft = output_is_softmax(m);
    for (int64_t start = 0; start < d->n; start += x->shape[0]) {
        int64_t nb = d->n - start < x->shape[0] ? d->n - start : x->shape[0];
        fl_tensor xb = *x;
        xb.shape[0] = nb;
        xb.size = fl_shape_size(xb.ndim, xb.shape);
        fl_status st = fl_dataset_batch(d, start, nb, &xb, e);
        if (st == FL_OK) st = fl_model_forward(m, &xb, e);
        if (st != FL_OK) return st;
        const fl_tensor *h = &m->values[lv].t, *z = fl_model_output(m, 0);
        if (!h->data || h->ndim < 1 || h->shape[0] != nb || z->ndim < 1 || z->shape[0] != nb)
            return fl_fail(e, FL_ERR_SHAPE, "layer %s or the output does not have the batch (%lld) "
                           "as its first dimension", f->layer, (long long)nb);
        int64_t d1 = h->size / nb, k1 = z->size / nb;
        if (!f->x) { /* the first batch fixes the sizes */
            if (d1 > INT32_MAX || k1 > INT32_MAX || d1 < 1 || k1 < 1)
                return fl_fail(e, FL_ERR_SHAPE, "layer %s: %lld values per image, output: %lld",
                               f->layer, (long long)d1, (long long)k1);
            f->d = (int)d1;
            f->k = (int)k1;
            f->x = malloc(sizeof(float) * (size_t)d->n * (size_t)d1);
            f->prob = malloc(sizeof(float) * (size_t)d->n * (size_t)k1);
            if (!f->x || !f->prob)
                return fl_fail(e, FL_ERR_NOMEM, "out of memory for %lld x %lld features",
                               (long long)d->n, (long long)d1);
        } else if (d1 != f->d || k1 != f->k) {
            return fl_fail(e, FL_ERR_SHAPE, "layer %s changed size between batches", f->layer);
        }
        memcpy(f->x + start * f->d, h->data, sizeof(float) * (size_t)h->size);
        for (int64_t b = 0; b < nb; b++) {
            float *p = f->prob + (start + b) * f->k;
            if (soft) memcpy(p, z->data + b * f->k, sizeof(float) * (size_t)f->k);
            else softmax_row(z->data + b * f->k, f->k, p);
        }
    }
    return FL_OK;
}

fl_status fl_quality_features(fl_model *m, const char *layer, const fl_dataset *d, int batch,
                              fl_quality_feats *out, fl_err *e) {
    memset(out, 0, sizeof *out);
    if (m->n_inputs != 1 || m->n_outputs < 1)
        return fl_fail(e, FL_ERR_ARG, "the feature model must have one input and an output (it has "
                       "%d inputs, %d outputs)", m->n_inputs, m->n_outputs);
    if (d->n < 1) return fl_fail(e, FL_ERR_ARG, "%s holds no images", d->source ? d->source : "the set");
    fl_status st;
    if (!layer && (st = fl_quality_default_layer(m, &layer, e)) != FL_OK) return st;
    int lv = fl_model_find(m, layer);
    if (lv < 0)
        return fl_fail(e, FL_ERR_NOTFOUND, "the model has no layer named %s (see `flare nn info`)",
                       layer);
    snprintf(out->layer, sizeof out->layer, "%s", layer);
    if (batch <= 0) batch = 256;
    if (batch > d->n) batch = (int)d->n;
    fl_tensor x = {0};
    int64_t xs[4] = {batch, d->c, d->h, d->w};
    if (fl_tensor_alloc(&x, 4, xs) != FL_OK)
        return fl_fail(e, FL_ERR_NOMEM, "out of memory for batches of %d", batch);
    int was_training = m->training;
    m->training = 0;
    st = run_batches(m, lv, d, &x, out, e);
    m->training = was_training;
    fl_tensor_free(&x);
    if (st != FL_OK) fl_quality_feats_free(out);
    else out->n = d->n;
    return st;
}
