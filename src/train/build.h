/* build.h — a small builder for layer-by-layer networks, on top of the model-building API
 * (model.h). The model zoo (zoo.c) and the GAN module (src/gan/) build their networks with it.
 *
 * The builder tracks the current tensor and its [c, h, w] shape (after flatten: c = features,
 * h = w = 1), so that sizes follow from the input size. Names imitate PyTorch's ONNX exporter
 * for a module with attributes conv1, relu1, ...: parameter "conv1.weight", node "/conv1/Conv",
 * output "/conv1/Conv_output_0". Setting `out_name` makes the next node write that value
 * instead (a graph output such as "logits").
 *
 * Initialisation is PyTorch's default: Conv2d / ConvTranspose2d / Linear weights use
 * kaiming_uniform_(a=sqrt(5)), whose bound gain*sqrt(3/fan_in) with gain = sqrt(2/(1+a^2)) is
 * exactly 1/sqrt(fan_in), and biases U(-1/sqrt(fan_in), 1/sqrt(fan_in)); PyTorch's fan_in of
 * a ConvTranspose2d weight [cin, cout, k, k] is cout*k*k. The draws come from one fl_rng, in
 * layer order (weight then bias), so a seed names a model.
 *
 * Errors are sticky: the first failure is kept in `st` (message in *e) and later calls do
 * nothing, so an architecture is a plain list of calls with one check at the end.
 */
#ifndef FLARE_TRAIN_BUILD_H
#define FLARE_TRAIN_BUILD_H

#include "flare/model.h"

typedef struct fl_builder {
    fl_model *m;
    fl_rng rng;
    fl_err *e;            /* never NULL */
    fl_status st;         /* first failure; later calls do nothing */
    int cur;              /* value index of the current tensor */
    int c, h, w;          /* its shape per example */
    const char *out_name; /* the next node writes this value (then reset to NULL) */
    const char *arch;     /* for messages */
} fl_builder;

/* Start a builder on a new model (opset 13) with rng seeded by seed; *e receives errors. */
fl_status fl_build_begin(fl_builder *b, const char *arch, uint64_t seed, fl_err *e);
/* A graph input of shape [0, c, h, w] (h = w = 0: [0, c], a vector); it becomes current. */
int fl_build_input(fl_builder *b, const char *name, int c, int h, int w);
/* Mark inputs and outputs, finish the model (topological order) and hand it out; on failure
 * (of this or of any earlier call) free it and return the first status. */
fl_status fl_build_end(fl_builder *b, int n_in, const int *in, int n_out, const int *out,
                       fl_model **model);

/* 1 when idx is a valid index; records the failure otherwise. */
int fl_build_ok(fl_builder *b, int idx);
/* A parameter or constant of the given shape, filled with U(-bound, bound), or with `fill`
 * when bound is 0. */
int fl_build_tensor(fl_builder *b, const char *name, fl_value_kind kind, int ndim,
                    const int64_t *shape, float bound, float fill);
/* Node `op` for module `mod` on inputs in[0..n_in); its output becomes current. */
void fl_build_node(fl_builder *b, const char *mod, const char *op, int n_in, const int *in,
                   int n_attr, const fl_attr *attr);

void fl_build_conv(fl_builder *b, const char *mod, int cout, int k, int stride, int pad);
/* ConvTranspose2d(k, stride, pad): h becomes (h - 1) * stride - 2 pad + k. */
void fl_build_convt(fl_builder *b, const char *mod, int cout, int k, int stride, int pad);
void fl_build_linear(fl_builder *b, const char *mod, int out);
/* BatchNorm2d(c) as exported: scale/shift trainable, running statistics constant. */
void fl_build_batchnorm(fl_builder *b, const char *mod);
void fl_build_act(fl_builder *b, const char *mod, const char *op); /* Relu, Sigmoid, Tanh */
void fl_build_leaky(fl_builder *b, const char *mod, float alpha);
void fl_build_maxpool2(fl_builder *b, const char *mod);
void fl_build_flatten(fl_builder *b);
/* Reshape the current [N, c*h*w] vector to [N, c, h, w]. */
void fl_build_unflatten(fl_builder *b, const char *mod, int c, int h, int w);
void fl_build_dropout(fl_builder *b, const char *mod, float ratio);

#endif
