/* The layer builder of build.h: the zoo's and the GAN's networks are lists of these calls. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "train/build.h"

int fl_build_ok(fl_builder *b, int idx) {
    if (idx < 0 && b->st == FL_OK) b->st = b->e->status ? b->e->status : FL_ERR_NOMEM;
    return idx >= 0;
}

fl_status fl_build_begin(fl_builder *b, const char *arch, uint64_t seed, fl_err *e) {
    memset(b, 0, sizeof *b);
    b->e = e;
    b->arch = arch;
    b->cur = -1;
    fl_rng_seed(&b->rng, seed);
    if (!(b->m = fl_model_new())) return b->st = fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", arch);
    b->m->opset = 13;
    return FL_OK;
}

int fl_build_input(fl_builder *b, const char *name, int c, int h, int w) {
    if (b->st != FL_OK) return -1;
    fl_tensor decl = {0};
    int64_t shape[4] = {0, c, h, w};
    fl_tensor_set_shape(&decl, h > 0 ? 4 : 2, shape);
    int in = fl_model_add_value(b->m, name, FL_VAL_INPUT, &decl, b->e);
    if (fl_build_ok(b, in)) {
        b->cur = in;
        b->c = c, b->h = h > 0 ? h : 1, b->w = w > 0 ? w : 1;
    }
    return in;
}

fl_status fl_build_end(fl_builder *b, int n_in, const int *in, int n_out, const int *out,
                       fl_model **model) {
    *model = NULL;
    fl_status st = b->st;
    if (st == FL_OK) st = fl_model_set_io(b->m, n_in, in, n_out, out, b->e);
    if (st == FL_OK) st = fl_model_finish(b->m, b->e);
    if (st != FL_OK) {
        fl_model_free(b->m);
        b->m = NULL;
        return st;
    }
    *model = b->m;
    return FL_OK;
}

int fl_build_tensor(fl_builder *b, const char *name, fl_value_kind kind, int ndim,
                    const int64_t *shape, float bound, float fill) {
    if (b->st != FL_OK) return -1;
    fl_tensor t = {0};
    if (fl_tensor_alloc(&t, ndim, shape) != FL_OK) {
        b->st = fl_fail(b->e, FL_ERR_NOMEM, "%s: out of memory for '%s'", b->arch, name);
        return -1;
    }
    for (int64_t i = 0; i < t.size; i++)
        t.data[i] = bound > 0 ? bound * (2.0f * fl_rng_uniform(&b->rng) - 1.0f) : fill;
    int idx = fl_model_add_value(b->m, name, kind, &t, b->e);
    fl_tensor_free(&t);
    fl_build_ok(b, idx);
    return idx;
}

void fl_build_node(fl_builder *b, const char *mod, const char *op, int n_in, const int *in,
                   int n_attr, const fl_attr *attr) {
    if (b->st != FL_OK) return;
    char node[128];
    snprintf(node, sizeof node, "/%s/%s", mod, op);
    int out;
    if (b->out_name) {
        out = fl_model_add_value(b->m, b->out_name, FL_VAL_ACT, NULL, b->e);
        if (fl_build_ok(b, out) && fl_model_add_node(b->m, op, node, n_in, in, 1, &out, n_attr,
                                                     attr, b->e) != FL_OK)
            out = -1;
        b->out_name = NULL;
    } else {
        out = fl_model_add_op(b->m, op, node, n_in, in, n_attr, attr, b->e);
    }
    if (fl_build_ok(b, out)) b->cur = out;
}

static void too_small(fl_builder *b, const char *mod) {
    if (b->st == FL_OK)
        b->st = fl_fail(b->e, FL_ERR_SHAPE, "%s: the input image is too small for layer %s (it "
                        "would have size %dx%d)", b->arch, mod, b->h, b->w);
}

/* Weight and bias of module mod: [shape...] and [nb], U(+-1/sqrt(fan_in)). Separate
 * statements: the order of the draws must not depend on the compiler (the evaluation order
 * of an initializer list is unspecified). */
static void weight_bias(fl_builder *b, const char *mod, int ndim, const int64_t *ws, int64_t nb,
                        int64_t fan_in, int *w, int *bias) {
    char wn[96], bn[96];
    snprintf(wn, sizeof wn, "%s.weight", mod);
    snprintf(bn, sizeof bn, "%s.bias", mod);
    float bound = 1.0f / sqrtf((float)fan_in);
    *w = fl_build_tensor(b, wn, FL_VAL_PARAM, ndim, ws, bound, 0);
    *bias = fl_build_tensor(b, bn, FL_VAL_PARAM, 1, &nb, bound, 0);
}

static void conv_like(fl_builder *b, const char *mod, const char *op, int cout, int k, int stride,
                      int pad) {
    int transposed = op[4] == 'T';
    int64_t ws[4] = {transposed ? b->c : cout, transposed ? cout : b->c, k, k};
    int in[3] = {b->cur};
    weight_bias(b, mod, 4, ws, cout, (int64_t)ws[1] * k * k, &in[1], &in[2]);
    int64_t dil[2] = {1, 1}, ks[2] = {k, k}, pads[4] = {pad, pad, pad, pad}, str[2] = {stride, stride};
    fl_attr a[5] = {fl_attr_ints("dilations", 2, dil), fl_attr_int("group", 1),
                    fl_attr_ints("kernel_shape", 2, ks), fl_attr_ints("pads", 4, pads),
                    fl_attr_ints("strides", 2, str)};
    fl_build_node(b, mod, op, 3, in, 5, a);
    b->c = cout;
    if (transposed) {
        b->h = (b->h - 1) * stride - 2 * pad + k;
        b->w = (b->w - 1) * stride - 2 * pad + k;
    } else {
        b->h = (b->h + 2 * pad - k) / stride + 1;
        b->w = (b->w + 2 * pad - k) / stride + 1;
    }
    if (b->h < 1 || b->w < 1) too_small(b, mod);
}

void fl_build_conv(fl_builder *b, const char *mod, int cout, int k, int stride, int pad) {
    conv_like(b, mod, "Conv", cout, k, stride, pad);
}

void fl_build_convt(fl_builder *b, const char *mod, int cout, int k, int stride, int pad) {
    conv_like(b, mod, "ConvTranspose", cout, k, stride, pad);
}

/* Linear(c -> out) as Gemm(x, W[out,c], b[out], transB=1). */
void fl_build_linear(fl_builder *b, const char *mod, int out) {
    int64_t ws[2] = {out, b->c};
    int in[3] = {b->cur};
    weight_bias(b, mod, 2, ws, out, b->c, &in[1], &in[2]);
    fl_attr a[3] = {fl_attr_float("alpha", 1.0f), fl_attr_float("beta", 1.0f),
                    fl_attr_int("transB", 1)};
    fl_build_node(b, mod, "Gemm", 3, in, 3, a);
    b->c = out;
}

/* ONNX momentum is 1 - PyTorch's momentum (0.1). */
void fl_build_batchnorm(fl_builder *b, const char *mod) {
    char n[4][96];
    static const char *const suffix[4] = {"weight", "bias", "running_mean", "running_var"};
    int64_t s[1] = {b->c};
    int in[5] = {b->cur};
    for (int i = 0; i < 4; i++) {
        snprintf(n[i], sizeof n[i], "%s.%s", mod, suffix[i]);
        in[i + 1] = fl_build_tensor(b, n[i], i < 2 ? FL_VAL_PARAM : FL_VAL_CONST, 1, s, 0,
                                    i == 0 || i == 3 ? 1.0f : 0.0f);
    }
    fl_attr a[2] = {fl_attr_float("epsilon", 1e-5f), fl_attr_float("momentum", 0.9f)};
    fl_build_node(b, mod, "BatchNormalization", 5, in, 2, a);
}

void fl_build_act(fl_builder *b, const char *mod, const char *op) {
    fl_build_node(b, mod, op, 1, &b->cur, 0, NULL);
}

void fl_build_leaky(fl_builder *b, const char *mod, float alpha) {
    fl_attr a[1] = {fl_attr_float("alpha", alpha)};
    fl_build_node(b, mod, "LeakyRelu", 1, &b->cur, 1, a);
}

void fl_build_maxpool2(fl_builder *b, const char *mod) {
    int64_t ks[2] = {2, 2}, pads[4] = {0, 0, 0, 0}, str[2] = {2, 2};
    fl_attr a[3] = {fl_attr_ints("kernel_shape", 2, ks), fl_attr_ints("pads", 4, pads),
                    fl_attr_ints("strides", 2, str)};
    fl_build_node(b, mod, "MaxPool", 1, &b->cur, 3, a);
    b->h /= 2;
    b->w /= 2;
    if (b->h < 1 || b->w < 1) too_small(b, mod);
}

void fl_build_flatten(fl_builder *b) {
    fl_attr a[1] = {fl_attr_int("axis", 1)};
    fl_build_node(b, "flatten", "Flatten", 1, &b->cur, 1, a);
    b->c = b->c * b->h * b->w;
    b->h = b->w = 1;
}

void fl_build_unflatten(fl_builder *b, const char *mod, int c, int h, int w) {
    char sn[96];
    snprintf(sn, sizeof sn, "%s.shape", mod);
    int64_t four = 4;
    int in[2] = {b->cur, fl_build_tensor(b, sn, FL_VAL_CONST, 1, &four, 0, 0)};
    if (b->st != FL_OK) return;
    /* an int64 shape constant {-1, c, h, w} (-1: the batch) */
    fl_value *v = &b->m->values[in[1]];
    v->onnx_dtype = 7;
    v->t.data[0] = -1, v->t.data[1] = (float)c, v->t.data[2] = (float)h, v->t.data[3] = (float)w;
    fl_build_node(b, mod, "Reshape", 2, in, 0, NULL);
    b->c = c, b->h = h, b->w = w;
}

/* Dropout (opset >= 12 form: the ratio is input 1). It drops only while m->training. */
void fl_build_dropout(fl_builder *b, const char *mod, float ratio) {
    char rn[96];
    snprintf(rn, sizeof rn, "%s.ratio", mod);
    int in[2] = {b->cur};
    in[1] = fl_build_tensor(b, rn, FL_VAL_CONST, 0, NULL, 0, ratio);
    fl_build_node(b, mod, "Dropout", 2, in, 0, NULL);
}
