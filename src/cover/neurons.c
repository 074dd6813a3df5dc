/* Layer sets and neuron values: the common view of a model that coverage criteria, surprise
 * adequacy and LRP share. */
#include <stdlib.h>
#include <string.h>

#include "core/simd.h"
#include "flare/neurons.h"

void fl_layerset_free(fl_layerset *ls) {
    if (!ls) return;
    for (int i = 0; i < ls->n; i++) free(ls->name[i]);
    free(ls->name);
    free(ls->value);
    free(ls->width);
    free(ls->offset);
    free(ls->relu_of);
    free(ls);
}

/* Ops whose output is only a re-arrangement (or copy) of their input: not a new layer. */
/* Ops whose outputs only move, pick or pad the values of their input: their "neurons" would
 * repeat the previous layer's (Pad is the zero frame torch writes before AvgPool2d; Slice and
 * Split cut channels, as ShuffleNet does). */
static int is_reshaper(const char *op) {
    static const char *const names[] = {"Flatten", "Reshape", "Squeeze", "Unsqueeze", "Identity",
                                        "Dropout", "Shape", "Gather", "Constant", "Cast",
                                        "Concat", "Transpose", "Pad", "Slice", "Split",
                                        "Size", NULL};
    for (const char *const *p = names; *p; p++)
        if (strcmp(op, *p) == 0) return 1;
    return 0;
}

static int is_conv_dense(const char *op) {
    return !strcmp(op, "Conv") || !strcmp(op, "ConvTranspose") || !strcmp(op, "Gemm") ||
           !strcmp(op, "MatMul");
}

int fl_neuron_shape_of(const fl_tensor *t, fl_neuron_shape *s) {
    switch (t->ndim) {
    case 2: *s = (fl_neuron_shape){1, t->shape[1], 1}; return 1;
    case 3: *s = (fl_neuron_shape){t->shape[1], t->shape[2], 1}; return 1;
    case 4: *s = (fl_neuron_shape){1, t->shape[1], t->shape[2] * t->shape[3]}; return 1;
    default: return 0;
    }
}

static fl_status add_layer(fl_layerset *ls, const fl_model *m, int v, fl_err *e) {
    const fl_value *val = &m->values[v];
    fl_neuron_shape ns;
    if (!fl_neuron_shape_of(&val->t, &ns))
        return fl_fail(e, FL_ERR_UNSUPPORTED,
                       "layer '%s' has rank %d; neurons are defined for [N,F], [N,T,F] and "
                       "[N,C,H,W] tensors", val->name, val->t.ndim);
    int i = ls->n++;
    ls->value[i] = v;
    ls->name[i] = strdup(val->name);
    if (!ls->name[i]) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    ls->width[i] = ns.width;
    ls->offset[i] = ls->total;
    ls->total += ns.width;
    return FL_OK;
}

/* "all" and "conv+dense" keep the outputs that hold neurons of each input: float, of a rank
 * with neurons, dim 0 the plan's batch (not shape arithmetic, masks or indices, nor
 * attention's [L, N, E] and [N*heads, L, L] tensors). */
static int holds_neurons(const fl_model *m, int v) {
    const fl_value *val = &m->values[v];
    fl_neuron_shape ns;
    if (m->n_inputs < 1 || val->onnx_dtype != 1 /* float */ || !fl_neuron_shape_of(&val->t, &ns))
        return 0;
    const fl_tensor *x = &m->values[m->inputs[0]].t;
    return x->ndim > 0 && val->t.shape[0] == x->shape[0];
}

fl_status fl_layerset_make(fl_model *m, const char *spec, fl_layerset **out, fl_err *e) {
    *out = NULL;
    if (!m->planned) {
        fl_layer_info *L;
        if (fl_model_layers(m, &L, e) < 0) return e ? e->status : FL_ERR_ARG;
        free(L);
    }
    fl_layerset *ls = calloc(1, sizeof *ls);
    int cap = m->n_values + 1;
    if (ls) {
        ls->value = calloc((size_t)cap, sizeof(int));
        ls->name = calloc((size_t)cap, sizeof(char *));
        ls->width = calloc((size_t)cap, sizeof(int64_t));
        ls->offset = calloc((size_t)cap, sizeof(int64_t));
    }
    if (!ls || !ls->value || !ls->name || !ls->width || !ls->offset) {
        fl_layerset_free(ls);
        return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    }
    fl_status st = FL_OK;
    int all = strcmp(spec, "all") == 0, cd = strcmp(spec, "conv+dense") == 0;
    if (all || cd) {
        for (int i = 0; i < m->n_nodes && st == FL_OK; i++) {
            const fl_node *n = &m->nodes[i];
            if (all ? is_reshaper(n->op->name) : !is_conv_dense(n->op->name)) continue;
            if (!holds_neurons(m, n->out[0])) continue;
            st = add_layer(ls, m, n->out[0], e);
        }
    } else {
        char *copy = strdup(spec), *save = NULL;
        if (!copy) st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
        for (char *tok = copy ? strtok_r(copy, ",", &save) : NULL; tok && st == FL_OK;
             tok = strtok_r(NULL, ",", &save)) {
            int v = fl_model_find(m, tok);
            if (v < 0)
                st = fl_fail(e, FL_ERR_NOTFOUND,
                             "no tensor named '%s' in the model (see `flare nn info`)", tok);
            else
                st = add_layer(ls, m, v, e);
        }
        free(copy);
    }
    if (st == FL_OK && ls->n == 0)
        st = fl_fail(e, FL_ERR_ARG, "layer set '%s' selects no layer", spec);
    if (st == FL_OK && !(ls->relu_of = malloc(sizeof(int) * (size_t)ls->n)))
        st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
    for (int l = 0; st == FL_OK && l < ls->n; l++) {
        int p = m->values[ls->value[l]].producer;
        ls->relu_of[l] = -1;
        if (p < 0 || strcmp(m->nodes[p].op->name, "Relu") != 0) continue;
        for (int k = 0; k < ls->n; k++)
            if (k != l && m->nodes[p].in[0] == ls->value[k]) ls->relu_of[l] = k;
    }
    if (st != FL_OK) {
        fl_layerset_free(ls);
        return st;
    }
    *out = ls;
    return FL_OK;
}

/* Mean of x[0..n) in double. Four running sums break the chain of dependent additions (one
 * sum would wait on every add's latency) and vectorise; their order is fixed, so the result
 * is the same on every run. */
FL_HOT_CLONES
static double mean_of(const float *x, int64_t n) {
    double lane[4] = {0, 0, 0, 0};
    int64_t k = 0;
    for (; k + 4 <= n; k += 4)
        for (int l = 0; l < 4; l++) lane[l] += x[k + l];
    for (; k < n; k++) lane[0] += x[k];
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) / (double)n;
}

void fl_layerset_neurons(const fl_layerset *ls, const fl_model *m, float *out) {
    int64_t batch = m->values[ls->value[0]].t.shape[0];
    for (int l = 0; l < ls->n; l++) {
        const fl_tensor *t = &m->values[ls->value[l]].t;
        fl_neuron_shape ns;
        fl_neuron_shape_of(t, &ns);
        int64_t C = ns.width, hw = ns.inner, T = ns.outer;
        for (int64_t b = 0; b < batch; b++) {
            float *o = out + b * ls->total + ls->offset[l];
            const float *x = t->data + b * T * C * hw;
            if (T > 1) { /* tokens: the mean over the rows, per feature */
                for (int64_t c = 0; c < C; c++) {
                    double s = 0;
                    for (int64_t k = 0; k < T; k++) s += x[k * C + c];
                    o[c] = (float)(s / (double)T);
                }
            } else if (hw == 1) {
                for (int64_t c = 0; c < C; c++) o[c] = x[c];
            } else {
                for (int64_t c = 0; c < C; c++) o[c] = (float)mean_of(x + c * hw, hw);
            }
        }
    }
}

fl_status fl_layerset_stream(fl_model *m, const fl_layerset *ls, const fl_dataset *d, int batch,
                             fl_neuron_cb cb, void *user, fl_err *e) {
    if (batch <= 0) batch = 256;
    if (batch > d->n) batch = (int)(d->n > 0 ? d->n : 1);
    fl_tensor x = {0};
    float *neurons = NULL;
    int saved_training = m->training;
    m->training = 0;
    fl_status st = fl_dataset_batch(d, 0, batch, &x, e);
    if (st == FL_OK && ls) {
        neurons = malloc(sizeof(float) * (size_t)batch * (size_t)ls->total);
        if (!neurons) st = fl_fail(e, FL_ERR_NOMEM, "out of memory for neuron values");
    }
    for (int64_t start = 0; st == FL_OK && start < d->n; start += batch) {
        int n = (int)(d->n - start < batch ? d->n - start : batch);
        int64_t shp[4] = {n, d->c, d->h, d->w};
        fl_tensor_set_shape(&x, 4, shp);
        st = fl_dataset_batch(d, start, n, &x, e);
        if (st == FL_OK) st = fl_model_forward(m, &x, e);
        if (st != FL_OK) break;
        if (ls) fl_layerset_neurons(ls, m, neurons);
        const fl_tensor *lg = fl_model_output(m, 0);
        st = cb(user, m, neurons, lg->data, (int)(lg->size / n), start, n, e);
    }
    m->training = saved_training;
    free(neurons);
    fl_tensor_free(&x);
    return st;
}
