/* model.h — a neural network as a graph of ONNX-style nodes over named tensors.
 *
 * The life of a model:
 *
 *     fl_model *m;
 *     fl_model_load("lenet5.onnx", &m, &err);        // or build one: fl_model_new + add_*
 *     fl_model_forward(m, &x, &err);                  // x: [N,1,28,28]
 *     const fl_tensor *logits = fl_model_output(m, 0);
 *     const fl_tensor *h = fl_model_tensor(m, "/conv1/Conv_output_0");   // any layer, by name
 *     // gradient of sum(h * seed) with respect to the input:
 *     fl_model_backward(m, 1, (const char *[]){"/conv1/Conv_output_0"}, &seed, &err);
 *     const fl_tensor *dx = fl_model_grad(m, fl_model_input_name(m, 0));
 *     fl_model_free(m);
 *
 * Every value (graph input, parameter, constant, node output) lives in m->values and is
 * addressed by its index or its ONNX name. Nodes are kept in topological order. The model
 * owns all memory it points to; fl_model_free releases everything in one call.
 *
 * Shapes are planned on the first forward pass (and re-planned when the input shapes
 * change): node by node, the op's `shape` callback fixes its outputs' shapes and allocates
 * its scratch, the outputs get their buffers, and the node runs. Later passes with the same
 * input shapes allocate nothing.
 */
#ifndef FLARE_MODEL_H
#define FLARE_MODEL_H

#include "flare/tensor.h"

typedef enum fl_value_kind {
    FL_VAL_INPUT = 0, /* graph input: fed to fl_model_forward */
    FL_VAL_PARAM,     /* trainable initializer (weights, biases, BN scale/shift) */
    FL_VAL_CONST,     /* non-trainable initializer or Constant (BN running stats, shapes) */
    FL_VAL_ACT        /* output of a node, computed by forward */
} fl_value_kind;

typedef struct fl_value {
    char *name;
    fl_value_kind kind;
    int onnx_dtype; /* ONNX TensorProto elem type it came from / is exported as (1 f32, 7 i64) */
    int producer;   /* index of the node that writes it, -1 for inputs and initializers */
    fl_tensor t;    /* value (activations: valid after forward) */
    fl_tensor g;    /* gradient, same shape; g.data == NULL while no gradient is wanted */
    /* what run.c allocated for t and g (values): a smaller shape reuses the buffer, so a
     * fuzzing round's changing batch size does not free and allocate every activation */
    int64_t t_cap, g_cap;
    const float *t_buf, *g_buf;
    int decl_ndim;  /* inputs: declared shape; entries <= 0 are free (batch, symbolic dims) */
    int64_t decl_shape[FL_MAX_DIMS];
} fl_value;

typedef enum fl_attr_type {
    FL_ATTR_INT = 0,
    FL_ATTR_FLOAT,
    FL_ATTR_INTS,
    FL_ATTR_FLOATS,
    FL_ATTR_STRING,
    FL_ATTR_TENSOR
} fl_attr_type;

/* A node attribute, kept as in ONNX so that export writes back what import read. */
typedef struct fl_attr {
    char *name;
    fl_attr_type type;
    int64_t i;       /* INT */
    float f;         /* FLOAT */
    int n;           /* number of ints / floats */
    int64_t *ints;   /* INTS */
    float *floats;   /* FLOATS */
    char *s;         /* STRING */
    fl_tensor t;     /* TENSOR (owned) */
    int t_dtype;     /* TENSOR's ONNX elem type */
} fl_attr;

struct fl_model;
struct fl_node;

/* One entry of the op table: what an ONNX op_type means to flare. */
typedef struct fl_op {
    const char *name; /* ONNX op_type */
    /* Read n->attr into n->state, check the number of inputs/outputs. Called once when the
     * node is added. Unknown or unsupported attributes must fail here, naming the node. */
    fl_status (*init)(struct fl_model *m, struct fl_node *n, fl_err *e);
    /* Set the shapes of n's outputs from its inputs' shapes; (re)allocate scratch in
     * n->state. Called when the model is planned: planning runs shape then forward node by
     * node, so input *values* are available too (Reshape reads its shape tensor here). */
    fl_status (*shape)(struct fl_model *m, struct fl_node *n, fl_err *e);
    /* outputs = f(inputs). Must not allocate. */
    void (*forward)(struct fl_model *m, struct fl_node *n);
    /* For every input i whose value has g.data != NULL: g_in += dL/d(in) given g_out.
     * NULL when the op has no gradient (e.g. Shape): backward stops there. */
    void (*backward)(struct fl_model *m, struct fl_node *n);
    /* Release n->state (may be NULL when state is a plain fl_alloc'd block: fl_free is used). */
    void (*free_state)(struct fl_node *n);
} fl_op;

typedef struct fl_node {
    const fl_op *op;
    char *name;
    int n_in, n_out;
    int *in;  /* value indices; -1 for an omitted optional input */
    int *out; /* value indices */
    int n_attr;
    fl_attr *attr;
    void *state; /* op-private: parsed attributes, saved tensors for backward, scratch */
} fl_node;

typedef struct fl_model {
    int n_values, cap_values;
    fl_value *values;
    int n_nodes, cap_nodes;
    fl_node *nodes; /* topological order */
    int n_inputs, n_outputs;
    int inputs[8], outputs[8];
    int opset;          /* ONNX default-domain opset the model is written for */
    int training;       /* BatchNormalization uses batch statistics, Dropout drops */
    int planned;        /* shapes/buffers match the inputs last fed; 0 forces a re-plan */
    int planned_threads; /* fl_threads_get() at planning: per-thread scratch is sized by it */
    int param_grads;    /* parameters get gradients (training) */
    int skip_input_grad; /* training: do not compute d/d(input) */
    uint8_t *touched;   /* per value, during backward: gradient is non-zero */
    fl_rng rng;         /* Dropout masks */
    char *producer_name; /* from the ONNX file, for info */
    char *path;          /* the file fl_onnx_load read, which forward's errors name; or NULL */
    /* graph input i's symbolic dimensions as the file names them ("batch_size"); NULL for a
     * fixed or unnamed one (for info: decl_shape holds 0 there) */
    char *input_dim_name[8][FL_MAX_DIMS];
    /* graph output i's shape as the file declares it (ndim 0: not declared; 0 entries are
     * free) and its symbolic dimensions' names, for info */
    int output_decl_ndim[8];
    int64_t output_decl_shape[8][FL_MAX_DIMS];
    char *output_dim_name[8][FL_MAX_DIMS];
    int n_meta;         /* ONNX metadata_props: key/value strings a tool records in the file */
    char **meta_key, **meta_val;
} fl_model;

/* ---- the op table ------------------------------------------------------------------------- */
const fl_op *fl_op_find(const char *op_type); /* NULL if flare does not support it */
/* NULL-terminated list of every supported op, for docs and the conformance runner. */
const fl_op *const *fl_op_all(void);

/* ---- building ------------------------------------------------------------------------------ */
fl_model *fl_model_new(void);
void fl_model_free(fl_model *m);
/* Add a value. t (may be NULL for inputs/activations) is deep-copied. Names must be unique.
 * Returns the index, or -1 (error in e). For inputs, t gives only the declared shape (no
 * data); dims <= 0 are free, e.g. {0,1,28,28} for any batch of 28x28 grey images. */
int fl_model_add_value(fl_model *m, const char *name, fl_value_kind kind, const fl_tensor *t,
                       fl_err *e);
/* The same for a parameter or constant whose buffer (fl_alloc'd) the model takes over instead
 * of copying: t->data is NULL afterwards, also on failure (the buffer is freed then). A
 * loader's way to hold each weight once. */
int fl_model_add_value_take(fl_model *m, const char *name, fl_value_kind kind, fl_tensor *t,
                            fl_err *e);
int fl_model_find(const fl_model *m, const char *name); /* -1 when absent */
/* Add a node; attrs are deep-copied; op->init is called. Outputs are values that must already
 * exist (add them as FL_VAL_ACT first) — see fl_model_add_op for the common case. */
fl_status fl_model_add_node(fl_model *m, const char *op_type, const char *name, int n_in,
                            const int *in, int n_out, const int *out, int n_attr,
                            const fl_attr *attr, fl_err *e);
/* Convenience: add a node with one fresh output value named "<name>_output_0"; returns the
 * output's index or -1. */
int fl_model_add_op(fl_model *m, const char *op_type, const char *name, int n_in, const int *in,
                    int n_attr, const fl_attr *attr, fl_err *e);
/* Mark graph inputs/outputs (order matters). */
fl_status fl_model_set_io(fl_model *m, int n_inputs, const int *inputs, int n_outputs,
                          const int *outputs, fl_err *e);
/* Sort nodes topologically and check that every input is produced; call after building. */
fl_status fl_model_finish(fl_model *m, fl_err *e);

/* Attribute constructors (they do not copy: fl_model_add_node copies). */
fl_attr fl_attr_int(const char *name, int64_t v);
fl_attr fl_attr_float(const char *name, float v);
fl_attr fl_attr_ints(const char *name, int n, int64_t *v);
/* Lookup helpers for op init: the attribute, or NULL; typed getters with defaults. */
const fl_attr *fl_node_attr(const fl_node *n, const char *name);
int64_t fl_node_attr_int(const fl_node *n, const char *name, int64_t dflt);
float fl_node_attr_float(const fl_node *n, const char *name, float dflt);
/* Fail (naming node and op) if n has an attribute not in the NULL-terminated list. */
fl_status fl_node_check_attrs(const fl_node *n, const char *const *known, fl_err *e);

/* Shorthand used by ops: the tensor / gradient of input i or output i of node n. NULL tensor
 * pointer for an omitted optional input. */
fl_tensor *fl_in(fl_model *m, fl_node *n, int i);
fl_tensor *fl_out(fl_model *m, fl_node *n, int i);
fl_tensor *fl_gin(fl_model *m, fl_node *n, int i);  /* NULL if no gradient wanted */
/* The same for an op that can write the gradient instead of adding to it: *fresh = 1 when
 * this is the first gradient into that value in this backward pass, and then the buffer is
 * NOT cleared: the op must write every element. Saves a pass over the largest buffers. */
fl_tensor *fl_gin_fresh(fl_model *m, fl_node *n, int i, int *fresh);
fl_tensor *fl_gout(fl_model *m, fl_node *n, int i);

/* ONNX metadata_props (kept by import and export): set replaces a key's value; get returns
 * NULL when the key is absent. */
fl_status fl_model_meta_set(fl_model *m, const char *key, const char *value, fl_err *e);
const char *fl_model_meta_get(const fl_model *m, const char *key);

/* ---- running -------------------------------------------------------------------------------- */
/* Plan shapes and buffers for inputs of these shapes (called by forward when needed). */
fl_status fl_model_plan(fl_model *m, int n_inputs, const fl_tensor *inputs, fl_err *e);
/* Run the graph on input 0 = x (a model with several inputs: fl_model_forward_multi).
 * Fails on shape mismatch (naming expected and given shapes) or non-finite input. */
fl_status fl_model_forward(fl_model *m, const fl_tensor *x, fl_err *e);
fl_status fl_model_forward_multi(fl_model *m, int n, const fl_tensor *xs, fl_err *e);
const fl_tensor *fl_model_output(const fl_model *m, int i);
const char *fl_model_input_name(const fl_model *m, int i);
const char *fl_model_output_name(const fl_model *m, int i);
/* Any value by ONNX name (after forward for activations); NULL if there is no such value. */
const fl_tensor *fl_model_tensor(const fl_model *m, const char *name);

/* Gradients. fl_model_backward starts all activation and input gradients from zero, adds seeds[i] to
 * the gradient of value names[i] (seed shape == value shape), and runs backward through the
 * graph: afterwards fl_model_grad(m, input) is d(sum_i <seeds[i], value_i>)/d(input).
 * Parameter gradients are accumulated (+=) only when fl_model_want_param_grads(m, 1) was
 * called; clear them with fl_model_zero_param_grads. */
fl_status fl_model_backward(fl_model *m, int n_seeds, const char *const *names,
                            const fl_tensor *seeds, fl_err *e);
/* Same with value indices (no name lookups, for inner loops). */
fl_status fl_model_backward_idx(fl_model *m, int n_seeds, const int *idx, const fl_tensor *seeds,
                                fl_err *e);
/* The gradient of a value after fl_model_backward (zero where the seeds do not reach it);
 * parameters: the accumulated gradient. NULL when the value has no gradient buffer. */
const fl_tensor *fl_model_grad(fl_model *m, const char *name);
fl_status fl_model_want_param_grads(fl_model *m, int yes, fl_err *e);
void fl_model_zero_param_grads(fl_model *m);

/* ---- introspection --------------------------------------------------------------------------- */
typedef struct fl_layer_info {
    const char *name;   /* output value name (what fl_model_tensor takes) */
    const char *node;   /* node name */
    const char *op;     /* op type */
    int ndim;
    int64_t shape[FL_MAX_DIMS]; /* for the planned batch (batch 1 if never planned) */
    int64_t n_params;   /* number of parameter floats the node reads */
} fl_layer_info;

/* One entry per node output, in topological order. Plans for batch 1 if not planned.
 * The array is owned by the caller (free()); returns the count or -1 on error. */
int fl_model_layers(fl_model *m, fl_layer_info **out, fl_err *e);
int64_t fl_model_param_count(const fl_model *m);

/* ---- layer timing ----------------------------------------------------------------------------- */
/* Time every node of a forward pass on these inputs: one planning pass (not timed), then
 * `passes` passes with each node timed alone; secs[i] is node i's median, flops[i] its
 * arithmetic (fl_node_flops), total the sum of the medians. Release with fl_timing_free. */
typedef struct fl_timing {
    int n;          /* nodes, in m->nodes order */
    double *secs;   /* [n] */
    double *flops;  /* [n] */
    double total;
} fl_timing;
fl_status fl_model_time_layers(fl_model *m, int n_inputs, const fl_tensor *inputs, int passes,
                               fl_timing *out, fl_err *e);
void fl_timing_free(fl_timing *p);
/* 2 x the multiply-adds of a Conv, ConvTranspose, Gemm or MatMul at its planned shapes; 0 for
 * other ops. */
double fl_node_flops(const fl_model *m, const fl_node *n);
/* Bytes of every activation at the planned shapes: after a pass on one image, what each image
 * of a batch adds to a pass that keeps them all (a campaign sizes its batches by it). */
int64_t fl_model_act_bytes(const fl_model *m);

#endif
