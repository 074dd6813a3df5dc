/* Losses: softmax cross-entropy, binary cross-entropy on logits, mean squared error.
 *
 * Each returns the mean loss and, when asked, WRITES the gradient of that mean into d (the
 * backward seed of the model's logits). Per-element work is in float like the rest of the
 * engine; the reductions are in double so that a batch mean does not depend on rounding luck.
 */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "flare/train.h"

fl_status fl_loss_parse(const char *s, fl_loss_kind *out, fl_err *e) {
    if (!strcmp(s, "ce") || !strcmp(s, "cross-entropy") || !strcmp(s, "xent")) *out = FL_LOSS_CE;
    else if (!strcmp(s, "bce")) *out = FL_LOSS_BCE;
    else if (!strcmp(s, "mse")) *out = FL_LOSS_MSE;
    else return fl_fail(e, FL_ERR_ARG, "unknown loss '%s' (expected ce, bce or mse)", s);
    return FL_OK;
}

const char *fl_loss_name(fl_loss_kind k) {
    switch (k) {
    case FL_LOSS_CE: return "ce";
    case FL_LOSS_BCE: return "bce";
    case FL_LOSS_MSE: return "mse";
    }
    return "?";
}

/* One row of softmax cross-entropy. logsumexp is taken around the row max so exp() never
 * overflows: loss = log(sum_j exp(x_j - max)) + max - x_label. With d != NULL,
 * d[j] = (softmax_j - [j == label]) * scale. */
static double ce_row(float *d, const float *x, int label, int C, float scale) {
    float mx = x[0];
    for (int j = 1; j < C; j++)
        if (x[j] > mx) mx = x[j];
    double sum = 0;
    for (int j = 0; j < C; j++) sum += exp((double)(x[j] - mx));
    double lse = log(sum) + mx;
    if (d) {
        for (int j = 0; j < C; j++) {
            float p = (float)(exp((double)x[j] - lse));
            d[j] = (p - (j == label ? 1.0f : 0.0f)) * scale;
        }
    }
    return lse - x[label];
}

float fl_loss_ce(float *dlogits, const float *logits, const int32_t *labels, int B, int C) {
    // logits, dlogits: [B,C]; labels: [B]
    double total = 0;
    float scale = 1.0f / (float)B;
    for (int b = 0; b < B; b++) {
        assert(labels[b] >= 0 && labels[b] < C);
        total += ce_row(dlogits ? dlogits + (size_t)b * C : NULL, logits + (size_t)b * C,
                        labels[b], C, scale);
    }
    return (float)(total / B);
}

/* BCE of one logit x against target t, in the form that never overflows:
 * -[t log s(x) + (1-t) log(1-s(x))] = max(x,0) - x t + log(1 + exp(-|x|)). */
static double bce_one(float x, float t) {
    return (double)fmaxf(x, 0.0f) - (double)x * t + log1p(exp(-fabs((double)x)));
}
static float sigmoidf(float x) {
    /* split by sign so that exp() only ever sees non-positive arguments */
    if (x >= 0) return 1.0f / (1.0f + expf(-x));
    float z = expf(x);
    return z / (1.0f + z);
}

float fl_loss_bce(float *dlogits, const float *logits, const float *targets, int64_t n) {
    double total = 0;
    float scale = 1.0f / (float)n;
    for (int64_t i = 0; i < n; i++) {
        total += bce_one(logits[i], targets[i]);
        if (dlogits) dlogits[i] = (sigmoidf(logits[i]) - targets[i]) * scale;
    }
    return (float)(total / (double)n);
}

float fl_loss_mse(float *dpred, const float *pred, const float *targets, int64_t n) {
    double total = 0;
    float scale = 2.0f / (float)n;
    for (int64_t i = 0; i < n; i++) {
        float diff = pred[i] - targets[i];
        total += (double)diff * diff;
        if (dpred) dpred[i] = diff * scale;
    }
    return (float)(total / (double)n);
}

/* BCE / MSE against targets made from integer labels: one-hot over C classes, or the label
 * itself when there is a single output. Computed element by element so that no target
 * buffer is needed; the arithmetic is the same as fl_loss_bce / fl_loss_mse. */
float fl_loss_labels(fl_loss_kind k, float *dlogits, const float *logits, const int32_t *labels,
                     int B, int C) {
    if (k == FL_LOSS_CE) return fl_loss_ce(dlogits, logits, labels, B, C);
    int64_t n = (int64_t)B * C;
    double total = 0;
    float scale = (k == FL_LOSS_MSE ? 2.0f : 1.0f) / (float)n;
    for (int b = 0; b < B; b++) {
        for (int j = 0; j < C; j++) {
            size_t i = (size_t)b * C + j;
            float t = C == 1 ? (float)labels[b] : (float)(labels[b] == j);
            float x = logits[i];
            if (k == FL_LOSS_BCE) {
                total += bce_one(x, t);
                if (dlogits) dlogits[i] = (sigmoidf(x) - t) * scale;
            } else {
                total += (double)(x - t) * (x - t);
                if (dlogits) dlogits[i] = (x - t) * scale;
            }
        }
    }
    return (float)(total / (double)n);
}
