/* A trained FuzzGAN generator, from its ONNX file: what it records (gan.h), checked against
 * its own graph and against the model under test, and batches of images from it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "gan/gan_int.h"

void fl_gan_free(fl_gan *gen) {
    if (!gen) return;
    fl_model_free(gen->g);
    free(gen->layers);
    if (gen->class_names)
        for (int k = 0; k < gen->n_classes; k++) free(gen->class_names[k]);
    free(gen->class_names);
    fl_tensor_free(&gen->z);
    fl_tensor_free(&gen->cls);
    fl_tensor_free(&gen->neuron);
    free(gen);
}

/* A positive count recorded under key, or -1. */
static int64_t meta_count(const fl_model *g, const char *key) {
    const char *v = fl_model_meta_get(g, key);
    char *end;
    long long x = v ? strtoll(v, &end, 10) : -1;
    return v && *v && !*end && x > 0 && x < (1ll << 40) ? x : -1;
}

static fl_status read_meta(fl_gan *gen, const char *path, fl_err *e) {
    const fl_model *g = gen->g;
    const char *fmt = fl_model_meta_get(g, "flare.gan.format");
    if (!fmt || strcmp(fmt, GAN_FORMAT))
        return fl_fail(e, FL_ERR_FORMAT, "%s: not a FuzzGAN generator (its metadata has no "
                       "flare.gan.format \"" GAN_FORMAT "\"; make one with flare gan train)", path);
    int64_t nz = meta_count(g, "flare.gan.nz"), K = meta_count(g, "flare.gan.classes"),
            P = meta_count(g, "flare.gan.neurons");
    const char *layers = fl_model_meta_get(g, "flare.gan.layers");
    const char *scale = fl_model_meta_get(g, "flare.gan.scale");
    const char *names = fl_model_meta_get(g, "flare.gan.class_names");
    if (nz < 1 || nz > 1 << 20 || K < 2 || K > 1 << 20 || P < 1 || !layers || !scale || !names)
        return fl_fail(e, FL_ERR_FORMAT, "%s: FuzzGAN metadata incomplete (needs flare.gan.nz, "
                       "classes, neurons, layers, scale, class_names)", path);
    gen->nz = (int)nz, gen->n_classes = (int)K, gen->n_neurons = P;
    if (!(gen->layers = strdup(layers))) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    fl_err se;
    if (fl_scale_parse(scale, &gen->scale, &se))
        return fl_fail(e, FL_ERR_FORMAT, "%s: flare.gan.scale: %s", path, se.msg);
    cJSON *j = cJSON_Parse(names);
    int ok = cJSON_IsArray(j) && cJSON_GetArraySize(j) == K;
    gen->class_names = ok ? calloc((size_t)K, sizeof(char *)) : NULL;
    const cJSON *it;
    int k = 0;
    if (gen->class_names)
        cJSON_ArrayForEach(it, j) {
            if (!cJSON_IsString(it) || !(gen->class_names[k++] = strdup(it->valuestring))) ok = 0;
        }
    cJSON_Delete(j);
    if (!ok)
        return fl_fail(e, FL_ERR_FORMAT, "%s: flare.gan.class_names is not a JSON array of %lld "
                       "names", path, (long long)K);
    return FL_OK;
}

/* Its inputs z [N, nz], class [N, K], neuron [N, P] and output [N, c, h, w]: planned once with
 * batch 1 to read the output's shape. */
static fl_status check_graph(fl_gan *gen, const char *path, fl_err *e) {
    fl_model *g = gen->g;
    static const char *const in_names[3] = {"z", "class", "neuron"};
    int64_t widths[3] = {gen->nz, gen->n_classes, gen->n_neurons};
    if (g->n_inputs != 3 || g->n_outputs < 1)
        return fl_fail(e, FL_ERR_FORMAT, "%s: a generator has inputs z, class and neuron and "
                       "one image output (this graph: %d inputs, %d outputs)", path, g->n_inputs,
                       g->n_outputs);
    for (int i = 0; i < 3; i++) {
        const fl_value *v = &g->values[g->inputs[i]];
        if (strcmp(v->name, in_names[i]) || v->decl_ndim != 2 || v->decl_shape[1] != widths[i])
            return fl_fail(e, FL_ERR_FORMAT, "%s: input %d must be '%s' [N, %lld] (the "
                           "metadata's size)", path, i, in_names[i], (long long)widths[i]);
    }
    fl_rng r;
    fl_rng_seed(&r, 1);
    int32_t c0 = 0;
    int64_t n0 = 0;
    fl_tensor out = {0};
    fl_status st = fl_gan_generate(gen, 1, &c0, &n0, &r, &out, e);
    const fl_tensor *y = fl_model_output(g, 0);
    if (!st && (y->ndim != 4 || y->shape[1] < 1 || y->shape[1] > 3))
        st = fl_fail(e, FL_ERR_FORMAT, "%s: the output is not an image [N, c, h, w] of 1 to 3 "
                     "channels", path);
    if (!st) gen->c = (int)y->shape[1], gen->h = (int)y->shape[2], gen->w = (int)y->shape[3];
    fl_tensor_free(&out);
    return st;
}

fl_status fl_gan_open(fl_model *g, const char *path, fl_gan **out, fl_err *e) {
    *out = NULL;
    fl_gan *gen = calloc(1, sizeof *gen);
    if (!gen) {
        fl_model_free(g);
        return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    }
    gen->g = g;
    g->training = 0;
    fl_status st = read_meta(gen, path, e);
    if (!st) st = check_graph(gen, path, e);
    if (st) {
        fl_gan_free(gen);
        return st;
    }
    *out = gen;
    return FL_OK;
}

fl_status fl_gan_check_model(const fl_gan *gen, fl_model *mut, const fl_layerset *ls,
                             const char *model_path, fl_err *e) {
    if (!model_path) model_path = "the model";
    fl_tensor x = {0};
    int64_t shape[4] = {1, gen->c, gen->h, gen->w};
    if (fl_tensor_alloc(&x, 4, shape)) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    memset(x.data, 0, sizeof(float) * (size_t)x.size);
    fl_err fe;
    fl_status st = fl_model_forward(mut, &x, &fe);
    fl_tensor_free(&x);
    if (st)
        return fl_fail(e, FL_ERR_SHAPE, "the generator makes images [%d,%d,%d]; %s does not "
                       "take them: %s", gen->c, gen->h, gen->w, model_path, fe.msg);
    const fl_tensor *y = fl_model_output(mut, 0);
    if (y->ndim != 2 || y->shape[1] != gen->n_classes)
        return fl_fail(e, FL_ERR_SHAPE, "the generator makes %d classes; %s has %lld outputs",
                       gen->n_classes, model_path, (long long)(y->ndim == 2 ? y->shape[1] : -1));
    if (ls->total != gen->n_neurons)
        return fl_fail(e, FL_ERR_SHAPE, "the generator targets %lld neurons of layer set '%s'; "
                       "that set has %lld neurons in %s", (long long)gen->n_neurons, gen->layers,
                       (long long)ls->total, model_path);
    return FL_OK;
}

fl_status fl_gan_generate(fl_gan *gen, int n, const int32_t *cls, const int64_t *neuron,
                          fl_rng *r, fl_tensor *out, fl_err *e) {
    int64_t sz[2] = {n, gen->nz}, sc[2] = {n, gen->n_classes}, sn[2] = {n, gen->n_neurons};
    fl_tensor *bufs[3] = {&gen->z, &gen->cls, &gen->neuron};
    int64_t *shapes[3] = {sz, sc, sn};
    for (int i = 0; i < 3; i++)
        if (!bufs[i]->data || bufs[i]->shape[0] != n) {
            fl_tensor_free(bufs[i]);
            if (fl_tensor_alloc(bufs[i], 2, shapes[i]))
                return fl_fail(e, FL_ERR_NOMEM, "out of memory");
        }
    memset(gen->cls.data, 0, sizeof(float) * (size_t)gen->cls.size);
    memset(gen->neuron.data, 0, sizeof(float) * (size_t)gen->neuron.size);
    for (int64_t i = 0; i < gen->z.size; i++) gen->z.data[i] = fl_rng_normal(r);
    for (int i = 0; i < n; i++) {
        if (cls[i] < 0 || cls[i] >= gen->n_classes || neuron[i] < 0 || neuron[i] >= gen->n_neurons)
            return fl_fail(e, FL_ERR_ARG, "case %d: class %d of %d or neuron %lld of %lld out of "
                           "range", i, cls[i], gen->n_classes, (long long)neuron[i],
                           (long long)gen->n_neurons);
        gen->cls.data[(int64_t)i * gen->n_classes + cls[i]] = 1;
        gen->neuron.data[(int64_t)i * gen->n_neurons + neuron[i]] = 1;
    }
    fl_tensor in[3] = {gen->z, gen->cls, gen->neuron};
    fl_status st = fl_model_forward_multi(gen->g, 3, in, e);
    if (st) return st;
    const fl_tensor *y = fl_model_output(gen->g, 0);
    if (!out->data && fl_tensor_alloc(out, y->ndim, y->shape))
        return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    if (out->size != y->size)
        return fl_fail(e, FL_ERR_SHAPE, "generate: output buffer of %lld values for %lld",
                       (long long)out->size, (long long)y->size);
    memcpy(out->data, y->data, sizeof(float) * (size_t)y->size);
    return FL_OK;
}
