/* The model zoo: small image classifiers built with the layer builder (build.h), which also
 * fixes their names (PyTorch's ONNX exporter's) and initialisation (PyTorch's defaults). The
 * last layer writes the graph output "logits".
 */
#include <stdio.h>
#include <string.h>

#include "flare/train.h"
#include "train/build.h"

typedef fl_builder zb;

static void conv(zb *b, const char *mod, int cout, int k, int pad) {
    fl_build_conv(b, mod, cout, k, 1, pad);
}
static void relu(zb *b, const char *mod) { fl_build_act(b, mod, "Relu"); }
static void last(zb *b) { b->out_name = "logits"; }

/* ---- architectures ---------------------------------------------------------------------------- */
static void build_lenet(zb *b, int c1, int c2, int fc1, int fc2, int k) {
    conv(b, "conv1", c1, 5, 0);
    relu(b, "relu1");
    fl_build_maxpool2(b, "pool1");
    conv(b, "conv2", c2, 5, 0);
    relu(b, "relu2");
    fl_build_maxpool2(b, "pool2");
    fl_build_flatten(b);
    if (fc1) {
        fl_build_linear(b, "fc1", fc1);
        relu(b, "relu3");
    }
    if (fc2) {
        fl_build_linear(b, "fc2", fc2);
        relu(b, "relu4");
    }
    last(b);
    fl_build_linear(b, fc2 ? "fc3" : fc1 ? "fc2" : "fc1", k);
}

static void build_lenet1(zb *b, int k) { build_lenet(b, 4, 12, 0, 0, k); }
static void build_lenet4(zb *b, int k) { build_lenet(b, 6, 16, 84, 0, k); }
static void build_lenet5(zb *b, int k) { build_lenet(b, 6, 16, 120, 84, k); }

static void build_convnet(zb *b, int k) {
    static const char *const mods[4][3] = {{"conv1", "bn1", "relu1"}, {"conv2", "bn2", "relu2"},
                                           {"conv3", "bn3", "relu3"}, {"conv4", "bn4", "relu4"}};
    for (int i = 0; i < 4; i++) {
        conv(b, mods[i][0], i < 2 ? 32 : 64, 3, 1);
        fl_build_batchnorm(b, mods[i][1]);
        relu(b, mods[i][2]);
        if (i % 2) fl_build_maxpool2(b, i == 1 ? "pool1" : "pool2");
    }
    fl_build_flatten(b);
    fl_build_linear(b, "fc1", 256);
    relu(b, "relu5");
    fl_build_dropout(b, "dropout", 0.5f);
    last(b);
    fl_build_linear(b, "fc2", k);
}

static void build_mlp(zb *b, int k) {
    fl_build_flatten(b);
    fl_build_linear(b, "fc1", 256);
    relu(b, "relu1");
    fl_build_linear(b, "fc2", 128);
    relu(b, "relu2");
    last(b);
    fl_build_linear(b, "fc3", k);
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
    fl_err err = {0};
    zb b;
    fl_status st = fl_build_begin(&b, name, seed, &err);
    int in = fl_build_input(&b, "input", c, h, w);
    if (st == FL_OK) a->build(&b, n_classes);
    if (st == FL_OK) st = fl_build_end(&b, 1, &in, 1, &b.cur, out);
    if (st != FL_OK && e) *e = err;
    return st;
}
