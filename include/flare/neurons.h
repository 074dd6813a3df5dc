/* neurons.h — what a "neuron" is, for coverage criteria, surprise adequacy and LRP.
 *
 * A neuron is a unit of a dense layer ([N,F] tensor: F neurons), a feature of a token layer
 * ([N,T,F], a transformer's tokens x features: F neurons, whose value for an input is the mean
 * of the feature over the T tokens) or a channel of a convolutional layer ([N,C,H,W]: C
 * neurons, whose value for an input is the mean of the channel over its spatial positions).
 * Tensors of other ranks have no neurons. A layer set picks which tensors of a model count as
 * layers; its neurons are numbered consecutively, layer after layer, so that one input has a
 * flat neuron vector of `total` floats ("activation trace" in the surprise-adequacy papers).
 *
 *     fl_layerset *ls;
 *     fl_layerset_make(m, "all", &ls, &e);          // or "conv+dense", or "name1,name2"
 *     float *v = malloc(sizeof(float) * batch * ls->total);
 *     fl_model_forward(m, &x, &e);
 *     fl_layerset_neurons(ls, m, v);                // v[b * total + ls->offset[l] + j]
 *
 * Layer-set kinds (an option because the reference tools differ):
 *   all          every node output except the input and pure re-shapers (Flatten, Reshape,
 *                Squeeze, Unsqueeze, Identity, Dropout, Shape ops, Gather, Cast, Concat,
 *                Transpose, Pad, Slice, Split): DeepXplore / DeepHunter.
 *   conv+dense   outputs of Conv, ConvTranspose, Gemm and MatMul, i.e. pre-activation values:
 *                NeuraL-Coverage.
 *                Both kinds keep only the outputs that hold neurons of each input: float, rank
 *                2, 3 or 4, dim 0 the batch of the plan (the shape arithmetic, masks and index
 *                tensors of a transformer, and attention's [L, N, E] / [N*heads, L, L]
 *                tensors, are not layers).
 *   NAME,NAME…   an explicit list of tensor names (see `flare nn info`).
 */
#ifndef FLARE_NEURONS_H
#define FLARE_NEURONS_H

#include "flare/data.h"
#include "flare/model.h"

typedef struct fl_layerset {
    int n;            /* number of layers */
    int *value;       /* [n] model value index of each layer's tensor */
    char **name;      /* [n] tensor names */
    int64_t *width;   /* [n] neurons in each layer */
    int64_t *offset;  /* [n] index of the layer's first neuron in the flat vector */
    int64_t total;    /* all neurons */
    int *relu_of;     /* [n] the layer this one is Relu of (its values are max(x, 0) of that
                         layer's), or -1; NULL for a hand-made set. Lets coverage derive a
                         Relu layer from its input's pass instead of reading it again. */
} fl_layerset;

/* How a layer tensor's values make its neurons: the tensor read as [N, outer, width, inner],
 * neuron c of input b is the mean of x[b, o, c, i] over o < outer and i < inner — [N,F]:
 * {1, F, 1}; [N,T,F]: {T, F, 1}; [N,C,H,W]: {1, C, H*W}. Returns 0 for other ranks. */
typedef struct fl_neuron_shape {
    int64_t outer, width, inner;
} fl_neuron_shape;
int fl_neuron_shape_of(const fl_tensor *t, fl_neuron_shape *s);

/* Resolve spec against m. Plans m (batch 1) if it has not run yet. Fails naming an unknown
 * tensor (FL_ERR_NOTFOUND), a named layer whose rank is not 2, 3 or 4 (FL_ERR_UNSUPPORTED),
 * or an empty set. */
fl_status fl_layerset_make(fl_model *m, const char *spec, fl_layerset **out, fl_err *e);
void fl_layerset_free(fl_layerset *ls);

/* After a forward pass of a batch of N: out[N, total] = neuron values (channel and token means). */
void fl_layerset_neurons(const fl_layerset *ls, const fl_model *m, float *out);

/* Run m over d in batches (eval mode) and hand each batch to cb: its neuron values
 * [n, total] (NULL when ls is NULL), logits [n, n_logits] and the index of its first sample.
 * cb may read any tensor of m (the forward pass of that batch has just run). A status other
 * than FL_OK from cb stops the stream and is returned. batch <= 0 means 256. */
typedef fl_status (*fl_neuron_cb)(void *user, fl_model *m, const float *neurons,
                                  const float *logits, int n_logits, int64_t start, int n,
                                  fl_err *e);
fl_status fl_layerset_stream(fl_model *m, const fl_layerset *ls, const fl_dataset *d, int batch,
                             fl_neuron_cb cb, void *user, fl_err *e);

#endif
