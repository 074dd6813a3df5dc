/* Internal: the op families (each a NULL-terminated array defined in src/nn/op_<family>.c)
 * and small helpers shared by op implementations. */
#ifndef FLARE_NN_OPS_H
#define FLARE_NN_OPS_H

#include "flare/model.h"

extern const fl_op *const fl_ops_conv[];        /* Conv, ConvTranspose */
extern const fl_op *const fl_ops_pool[];        /* MaxPool, AveragePool, GlobalAveragePool */
extern const fl_op *const fl_ops_gemm[];        /* Gemm, MatMul */
extern const fl_op *const fl_ops_elementwise[]; /* Add, Sub, Mul, Div, Pow, Mod, Equal, Less,
                                                   Greater, LessOrEqual, GreaterOrEqual, And,
                                                   Or, Xor (broadcasting) */
extern const fl_op *const fl_ops_broadcast[];   /* Expand, Tile, Where */
extern const fl_op *const fl_ops_generate[];    /* ConstantOfShape, Range */
extern const fl_op *const fl_ops_groupnorm[];   /* InstanceNormalization, GroupNormalization */
extern const fl_op *const fl_ops_resize[];      /* Resize, Upsample */
extern const fl_op *const fl_ops_scatter[];     /* ScatterND */
extern const fl_op *const fl_ops_einsum[];      /* Einsum */
extern const fl_op *const fl_ops_activation[];  /* Relu, LeakyRelu, Sigmoid, Tanh, Softmax,
                                                   LogSoftmax, Clip, Dropout, Identity */
extern const fl_op *const fl_ops_norm[];        /* BatchNormalization */
extern const fl_op *const fl_ops_layernorm[];   /* LayerNormalization */
extern const fl_op *const fl_ops_variadic[];    /* Sum, Mean, Max, Min (broadcasting) */
extern const fl_op *const fl_ops_shape[];       /* Flatten, Reshape, Squeeze, Unsqueeze,
                                                   Shape, Constant, Cast */
extern const fl_op *const fl_ops_layout[];      /* Transpose, Concat, Gather */
extern const fl_op *const fl_ops_pad[];         /* Pad */
extern const fl_op *const fl_ops_slice[];       /* Slice, Split */
extern const fl_op *const fl_ops_unary[];       /* Exp, Log, Sqrt, Neg, Abs, Reciprocal, Erf,
                                                   Floor, Ceil, Not, HardSigmoid, HardSwish,
                                                   Gelu, Softplus, Softsign, Mish, Elu, Selu */
extern const fl_op *const fl_ops_reduce[];      /* ReduceSum, ReduceMean, ReduceMax, ReduceMin,
                                                   ReduceL1, ReduceL2, ReduceSumSquare */

/* Check input/output counts: fails naming the node when n_in is outside [min_in, max_in]
 * (optional trailing inputs may be -1) or n_out outside [min_out, max_out]. */
fl_status fl_node_check_arity(const fl_node *n, int min_in, int max_in, int min_out, int max_out,
                              fl_err *e);
/* Fail naming the node when one of its first `count` inputs is omitted (-1): for ops whose
 * inputs are all required although the arity check allows trailing ones to be -1. */
fl_status fl_node_check_present(const fl_node *n, int count, fl_err *e);
/* Set the shape of output i (activations are allocated later by the planner). */
void fl_node_set_out_shape(fl_model *m, fl_node *n, int i, int ndim, const int64_t *shape);

/* numpy broadcasting: merge shape (rank ndim) into out (rank *rank, start with 0; grown with
 * leading 1s when shorter). Returns 0, leaving out unusable, when a dim is neither 1 nor
 * equal to out's. */
int fl_broadcast_shape(int64_t *out, int *rank, int ndim, const int64_t *shape);
/* Fail naming the node when a shape computed from input values (Expand's, Tile's, ...) has
 * more than 2^40 elements: no such tensor can be allocated, and the product of eight dims
 * read as values could overflow int64. */
fl_status fl_node_check_size(const fl_node *n, int ndim, const int64_t *shape, fl_err *e);
/* Map axis in [-rank, rank) to [0, rank); -1 when out of range. */
int fl_norm_axis(int64_t axis, int rank);
/* Read a 0-D or 1-D integer tensor (stored as floats) of at most `max` entries into out, e.g.
 * Reshape's shape or Slice's starts, at planning time. `what` names the input in errors. */
fl_status fl_node_read_ints(const fl_node *n, const fl_tensor *t, const char *what, int max,
                            int64_t *out, int *count, fl_err *e);
/* The same for positions that may say "to the end" with a huge value (Slice's starts and
 * ends): magnitudes beyond 2^24 read as +-2^62 (callers clamp them to the dim). */
fl_status fl_node_read_index_ints(const fl_node *n, const fl_tensor *t, const char *what, int max,
                                  int64_t *out, int *count, fl_err *e);
/* Mark each axis (normalised against `rank`) in flags[FL_MAX_DIMS]; fails naming the node on
 * an axis out of range or given twice. */
fl_status fl_node_mark_axes(const fl_node *n, const int64_t *axes, int count, int rank,
                            uint8_t *flags, fl_err *e);

#endif
