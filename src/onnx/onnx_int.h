/* Internal to src/onnx: TensorProto conversion, the load-time shape folding, and a small arena
 * for building protobuf-c messages. */
#ifndef FLARE_ONNX_INT_H
#define FLARE_ONNX_INT_H

#include "flare/onnx.h"
#include "onnx/onnx.pb-c.h"

/* Decode tp into t (allocated, float). `what` names the tensor in errors, e.g.
 * "model.onnx: initializer 'fc.weight'". Fails on external data, unsupported element types,
 * more than FL_MAX_DIMS dims, negative dims and data whose length does not match the dims. */
fl_status fl_onnx_tensor_decode(const Onnx__TensorProto *tp, fl_tensor *t, int *dtype,
                                const char *what, fl_err *e);
/* The same for a message unpacked with fl_onnx_allocator, and with one difference: a float
 * raw_data becomes t's buffer without a copy (tp->raw_data is emptied), so loading a model
 * copies its weights once, from the file into the heap, by protobuf-c. */
fl_status fl_onnx_tensor_take(Onnx__TensorProto *tp, fl_tensor *t, int *dtype, const char *what,
                              fl_err *e);
/* protobuf-c's allocator for unpacking models: blocks as fl_alloc's (aligned, padded, the
 * padding zeroed), freed with fl_free. */
extern ProtobufCAllocator fl_onnx_allocator;

/* Everything allocated while building a message, released in one call. */
typedef struct fl_arena {
    void **p;
    int n, cap;
    int failed; /* an allocation failed (the message must not be packed) */
} fl_arena;

void *fl_arena_alloc(fl_arena *a, size_t bytes); /* zeroed; NULL (and a->failed) on failure */
char *fl_arena_strdup(fl_arena *a, const char *s);
void fl_arena_free(fl_arena *a);

/* Fill tp (already initialised with ONNX__TENSOR_PROTO__INIT) from t as element type dtype:
 * little-endian raw_data; integers are rounded and clamped to the type's range. */
void fl_onnx_tensor_encode(fl_arena *a, Onnx__TensorProto *tp, const fl_tensor *t, int dtype,
                           const char *name);

/* Fold shape sub-graphs into constants (see fold.c). `file` names the model in errors. */
fl_status fl_onnx_fold_shapes(fl_model *m, const char *file, fl_err *e);

/* The version of a default-domain op in force at `opset` (the newest since_version <= opset,
 * see opversion.c): 0 when the op does not exist yet at that opset, -1 when the table does not
 * know the op. fl_onnx_op_first_version: the opset that introduced it (-1 unknown). */
int fl_onnx_op_version(const char *op, int opset);
int fl_onnx_op_first_version(const char *op);

#endif
