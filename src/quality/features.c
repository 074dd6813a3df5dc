/* Features for IS and FID: one layer's values and the class probabilities of a classifier,
 * collected over a dataset in batches (eval mode, fl_layerset_stream). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flare/neurons.h"
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

typedef struct feat_run {
    int lv, soft;       /* the feature layer's value; 1: output 0 holds probabilities already */
    int64_t n;          /* images in all */
    fl_quality_feats *f;
} feat_run;

/* One batch of the stream: its layer values and class probabilities into f. */
static fl_status take_batch(void *user, fl_model *m, const float *neurons, const float *logits,
                            int n_logits, int64_t start, int nb, fl_err *e) {
    (void)neurons;
    feat_run *r = user;
    fl_quality_feats *f = r->f;
    const fl_tensor *h = &m->values[r->lv].t;
    if (!h->data || h->ndim < 1 || h->shape[0] != nb)
        return fl_fail(e, FL_ERR_SHAPE, "layer %s does not have the batch (%d) as its first "
                       "dimension", f->layer, nb);
    int64_t d1 = h->size / nb;
    if (!f->x) { /* the first batch fixes the sizes */
        if (d1 > INT32_MAX || d1 < 1 || n_logits < 1)
            return fl_fail(e, FL_ERR_SHAPE, "layer %s: %lld values per image, output: %d",
                           f->layer, (long long)d1, n_logits);
        f->d = (int)d1;
        f->k = n_logits;
        f->x = malloc(sizeof(float) * (size_t)r->n * (size_t)d1);
        f->prob = malloc(sizeof(float) * (size_t)r->n * (size_t)n_logits);
        if (!f->x || !f->prob)
            return fl_fail(e, FL_ERR_NOMEM, "out of memory for %lld x %lld features",
                           (long long)r->n, (long long)d1);
    } else if (d1 != f->d || n_logits != f->k) {
        return fl_fail(e, FL_ERR_SHAPE, "layer %s changed size between batches", f->layer);
    }
    memcpy(f->x + start * f->d, h->data, sizeof(float) * (size_t)h->size);
    for (int b = 0; b < nb; b++) {
        float *p = f->prob + (start + b) * f->k;
        if (r->soft) memcpy(p, logits + (int64_t)b * f->k, sizeof(float) * (size_t)f->k);
        else softmax_row(logits + (int64_t)b * f->k, f->k, p);
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
    feat_run r = {.lv = lv, .soft = output_is_softmax(m), .n = d->n, .f = out};
    st = fl_layerset_stream(m, NULL, d, batch, take_batch, &r, e);
    if (st != FL_OK) fl_quality_feats_free(out);
    else out->n = d->n;
    return st;
}
