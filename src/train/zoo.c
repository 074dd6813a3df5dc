/* The model zoo: small image classifiers built with the model-building API.
 *
 * Each architecture is a short list of layer calls on a `zb` builder that tracks the current
 * tensor and its [c, h, w] (or [features]) shape, so flatten sizes follow from the input size.
 * Names imitate PyTorch's ONNX exporter for a module with attributes conv1, relu1, pool1, ...:
 * parameter "conv1.weight", node "/conv1/Conv", output "/conv1/Conv_output_0". The last layer
 * writes the graph output "logits".
 *
 * Initialisation is PyTorch's default: Conv2d / Linear weights use kaiming_uniform_(a=sqrt(5)),
 * whose bound gain*sqrt(3/fan_in) with gain = sqrt(2/(1+a^2)) is exactly 1/sqrt(fan_in), and
 * biases use U(-1/sqrt(fan_in), 1/sqrt(fan_in)). The draws come from one fl_rng seeded with
 * the build seed, in layer order (weight then bias), so a seed names a model.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "flare/train.h"

typedef struct zb {
    fl_model *m;
    fl_rng rng;
    fl_err *e;      /* never NULL */
    fl_status st;   /* first failure; later calls do nothing */
    int cur;        /* value index of the current tensor */
    int c, h, w;    /* its shape per example; after flatten: c = features, h = w = 1 */
    int last;       /* the next layer writes the graph output "logits" */
    const char *arch;
} zb;

/* Remember the first failure (the fl_err already holds its message). */
static int zb_ok(zb *b, int idx) {
    if (idx < 0 && b->st == FL_OK) b->st = b->e->status ? b->e->status : FL_ERR_NOMEM;
    return idx >= 0;
}

/* A parameter or constant of the given shape, filled with U(-bound, bound) or with `fill`
 * when bound is 0. */
static int zb_tensor(zb *b, const char *name, fl_value_kind kind, int ndim, const int64_t *shape,
                     float bound, float fill) {
    if (b->st != FL_OK) return -1;
    fl_tensor t = {0};
    if (fl_tensor_alloc(&t, ndim, shape) != FL_OK) {
        b->st = fl_fail(b->e, FL_ERR_NOMEM, "zoo: out of memory for '%s'", name);
        return -1;
    }
    for (int64_t i = 0; i < t.size; i++)
        t.data[i] = bound > 0 ? bound * (2.0f * fl_rng_uniform(&b->rng) - 1.0f) : fill;
    int idx = fl_model_add_value(b->m, name, kind, &t, b->e);
    fl_tensor_free(&t);
    zb_ok(b, idx);
    return idx;
}

/* Add node `op` for module `mod` on inputs in[0..n_in); the output becomes current. */
static void zb_node(zb *b, const char *mod, const char *op, int n_in, const int *in, int n_attr,
                    const fl_attr *attr) {
    if (b->st != FL_OK) return;
    char node[128];
    snprintf(node, sizeof node, "/%s/%s", mod, op);
    int out;
    if (b->last) {
        out = fl_model_add_value(b->m, "logits", FL_VAL_ACT, NULL, b->e);
        if (zb_ok(b, out) && fl_model_add_node(b->m, op, node, n_in, in, 1, &out, n_attr, attr,
                                               b->e) != FL_OK)
            out = -1;
    } else {
        out = fl_model_add_op(b->m, op, node, n_in, in, n_attr, attr, b->e);
    }
    if (zb_ok(b, out)) b->cur = out;
}

static void too_small(zb *b, const char *mod) {
    if (b->st == FL_OK)
        b->st = fl_fail(b->e, FL_ERR_SHAPE, "zoo: %s: the input image is too small for layer "
                        "%s (it would have size %dx%d)", b->arch, mod, b->h, b->w);
}

static void conv(zb *b, const char *mod, int cout, int k, int pad) {
    char wn[96], bn[96];
    snprintf(wn, sizeof wn, "%s.weight", mod);
    snprintf(bn, sizeof bn, "%s.bias", mod);
    int64_t fan_in = (int64_t)b->c * k * k;
    float bound = 1.0f / sqrtf((float)fan_in);
    int64_t ws[4] = {cout, b->c, k, k}, bs[1] = {cout};
    /* separate statements: the order of the draws must not depend on the compiler (the
     * evaluation order of an initializer list is unspecified) */
    int in[3] = {b->cur};
    in[1] = zb_tensor(b, wn, FL_VAL_PARAM, 4, ws, bound, 0);
    in[2] = zb_tensor(b, bn, FL_VAL_PARAM, 1, bs, bound, 0);
    int64_t dil[2] = {1, 1}, ks[2] = {k, k}, pads[4] = {pad, pad, pad, pad}, str[2] = {1, 1};
    fl_attr a[5] = {fl_attr_ints("dilations", 2, dil), fl_attr_int("group", 1),
                    fl_attr_ints("kernel_shape", 2, ks), fl_attr_ints("pads", 4, pads),
                    fl_attr_ints("strides", 2, str)};
    zb_node(b, mod, "Conv", 3, in, 5, a);
    b->c = cout;
    b->h = b->h + 2 * pad - k + 1;
    b->w = b->w + 2 * pad - k + 1;
    if (b->h < 1 || b->w < 1) too_small(b, mod);
}

static void relu(zb *b, const char *mod) { zb_node(b, mod, "Relu", 1, &b->cur, 0, NULL); }

static void maxpool2(zb *b, const char *mod) {
    int64_t ks[2] = {2, 2}, pads[4] = {0, 0, 0, 0}, str[2] = {2, 2};
    fl_attr a[3] = {fl_attr_ints("kernel_shape", 2, ks), fl_attr_ints("pads", 4, pads),
                    fl_attr_ints("strides", 2, str)};
    zb_node(b, mod, "MaxPool", 1, &b->cur, 3, a);
    b->h /= 2;
    b->w /= 2;
    if (b->h < 1 || b->w < 1) too_small(b, mod);
}

/* BatchNorm2d(c) as exported: scale/shift trainable, running statistics constant;
 * ONNX momentum is 1 - PyTorch's momentum (0.1). */
static void batchnorm(zb *b, const char *mod) {
    char n[4][96];
    static const char *const suffix[4] = {"weight", "bias", "running_mean", "running_var"};
    int64_t s[1] = {b->c};
    int in[5] = {b->cur};
    for (int i = 0; i < 4; i++) {
        snprintf(n[i], sizeof n[i], "%s.%s", mod, suffix[i]);
        in[i + 1] = zb_tensor(b, n[i], i < 2 ? FL_VAL_PARAM : FL_VAL_CONST, 1, s, 0,
                              i == 0 || i == 3 ? 1.0f : 0.0f);
    }
    fl_attr a[2] = {fl_attr_float("epsilon", 1e-5f), fl_attr_float("momentum", 0.9f)};
    zb_node(b, mod, "BatchNormalization", 5, in, 2, a);
}

static void flatten(zb *b) {
    fl_attr a[1] = {fl_attr_int("axis", 1)};
    zb_node(b, "flatten", "Flatten", 1, &b->cur, 1, a);
    b->c = b->c * b->h * b->w;
    b->h = b->w = 1;
}

/* Linear(c -> out) as Gemm(x, W[out,c], b[out], transB=1). */
static void linear(zb *b, const char *mod, int out) {
    char wn[96], bn[96];
    snprintf(wn, sizeof wn, "%s.weight", mod);
    snprintf(bn, sizeof bn, "%s.bias", mod);
    float bound = 1.0f / sqrtf((float)b->c);
    int64_t ws[2] = {out, b->c}, bs[1] = {out};
    int in[3] = {b->cur};
    in[1] = zb_tensor(b, wn, FL_VAL_PARAM, 2, ws, bound, 0);
    in[2] = zb_tensor(b, bn, FL_VAL_PARAM, 1, bs, bound, 0);
    fl_attr a[3] = {fl_attr_float("alpha", 1.0f), fl_attr_float("beta", 1.0f),
                    fl_attr_int("transB", 1)};
    zb_node(b, mod, "Gemm", 3, in, 3, a);
    b->c = out;
}

/* Dropout (opset >= 12 form: the ratio is input 1). It drops only while m->training. */
static void dropout(zb *b, const char *mod, float ratio) {
    char rn[96];
    snprintf(rn, sizeof rn, "%s.ratio", mod);
    int in[2] = {b->cur};
    in[1] = zb_tensor(b, rn, FL_VAL_CONST, 0, NULL, 0, ratio);
    zb_node(b, mod, "Dropout", 2, in, 0, NULL);
}

/* ---- architectures ---------------------------------------------------------------------------- */
static void build_lenet(zb *b, int c1, int c2, int fc1, int fc2, int k) {
    conv(b, "conv1", c1, 5, 0);
    relu(b, "relu1");
    maxpool2(b, "pool1");
    conv(b, "conv2", c2, 5, 0);
    relu(b, "relu2");
    maxpool2(b, "pool2");
    flatten(b);
    if (fc1) {
        linear(b, "fc1", fc1);
        relu(b, "relu3");
    }
    if (fc2) {
        linear(b, "fc2", fc2);
        relu(b, "relu4");
    }
    b->last = 1;
    linear(b, fc2 ? "fc3" : fc1 ? "fc2" : "fc1", k);
}

static void build_lenet1(zb *b, int k) { build_lenet(b, 4, 12, 0, 0, k); }
static void build_lenet4(zb *b, int k) { build_lenet(b, 6, 16, 84, 0, k); }
static void build_lenet5(zb *b, int k) { build_lenet(b, 6, 16, 120, 84, k); }

static void build_convnet(zb *b, int k) {
    static const char *const mods[4][3] = {{"conv1", "bn1", "relu1"}, {"conv2", "bn2", "relu2"},
                                           {"conv3", "bn3", "relu3"}, {"conv4", "bn4", "relu4"}};
    for (int i = 0; i < 4; i++) {
        conv(b, mods[i][0], i < 2 ? 32 : 64, 3, 1);
        batchnorm(b, mods[i][1]);
        relu(b, mods[i][2]);
        if (i % 2) maxpool2(b, i == 1 ? "pool1" : "pool2");
    }
    flatten(b);
    linear(b, "fc1", 256);
    relu(b, "relu5");
    dropout(b, "dropout", 0.5f);
    b->last = 1;
    linear(b, "fc2", k);
}

static void build_mlp(zb *b, int k) {
    flatten(b);
    linear(b, "fc1", 256);
    relu(b, "relu1");
    linear(b, "fc2", 128);
    relu(b, "relu2");
    b->last = 1;
    linear(b, "fc3", k);
}

typedef struct arch {
    const char *name, *desc;
    void (*build)(zb *b, int n_classes);
} arch;

static const arch archs[] = {
    {"lenet1", "LeNet-1: conv4@5x5 relu pool2, conv12@5x5 relu pool2, fc", build_lenet1},
    {"lenet4", "LeNet-4: conv6@5x5 relu pool2, conv16@5x5 relu pool2, fc84 relu, fc",
     build_lenet4},
    {"lenet5", "LeNet-5: conv6@5x5 relu pool2, conv16@5x5 relu pool2, fc120 relu, fc84 relu, fc",
     build_lenet5},
    {"convnet", "VGG-style: [conv32@3x3 BN relu]x2 pool2, [conv64@3x3 BN relu]x2 pool2, "
     "fc256 relu dropout0.5, fc", build_convnet},
    {"mlp", "MLP: flatten, fc256 relu, fc128 relu, fc", build_mlp},
};
#define N_ARCHS ((int)(sizeof archs / sizeof archs[0]))

const char *const *fl_zoo_names(void) {
    static const char *names[N_ARCHS + 1];
    for (int i = 0; i < N_ARCHS; i++) names[i] = archs[i].name;
    names[N_ARCHS] = NULL;
    return names;
}

const char *fl_zoo_describe(const char *name) {
    for (int i = 0; i < N_ARCHS; i++)
        if (!strcmp(archs[i].name, name)) return archs[i].desc;
    return NULL;
}

fl_status fl_zoo_build(const char *name, int c, int h, int w, int n_classes, uint64_t seed,
                       fl_model **out, fl_err *e) {
    *out = NULL;
    const arch *a = NULL;
    for (int i = 0; i < N_ARCHS; i++)
        if (!strcmp(archs[i].name, name)) a = &archs[i];
    if (!a) {
        char list[256] = "";
        for (int i = 0; i < N_ARCHS; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                     archs[i].name);
        return fl_fail(e, FL_ERR_NOTFOUND, "zoo: unknown architecture '%s' (known: %s)", name,
                       list);
    }
    if (c < 1 || h < 1 || w < 1 || n_classes < 1)
        return fl_fail(e, FL_ERR_ARG, "zoo: %s: bad input size %dx%dx%d or class count %d",
                       name, c, h, w, n_classes);
    fl_model *m = fl_model_new();
    if (!m) return fl_fail(e, FL_ERR_NOMEM, "zoo: out of memory");
    m->opset = 13;
    fl_err err = {0};
    zb b = {.m = m, .e = &err, .st = FL_OK, .c = c, .h = h, .w = w, .arch = name};
    fl_rng_seed(&b.rng, seed);
    fl_tensor decl = {0};
    int64_t shape[4] = {0, c, h, w};
    fl_tensor_set_shape(&decl, 4, shape);
    int in = fl_model_add_value(m, "input", FL_VAL_INPUT, &decl, &err);
    if (zb_ok(&b, in)) b.cur = in;
    a->build(&b, n_classes);
    fl_status st = b.st;
    if (st == FL_OK) st = fl_model_set_io(m, 1, &in, 1, &b.cur, &err);
    if (st == FL_OK) st = fl_model_finish(m, &err);
    if (st != FL_OK) {
        if (e) *e = err;
        fl_model_free(m);
        return st;
    }
    *out = m;
    return FL_OK;
}
