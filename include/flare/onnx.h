/* onnx.h — reading and writing ONNX models and tensors.
 *
 *     fl_model *m;
 *     fl_err e;
 *     if (fl_onnx_load("lenet5.onnx", &m, &e) != FL_OK) {
 *         fprintf(stderr, "%s\n", e.msg);   // names the file, and the node/tensor when relevant
 *         return 1;
 *     }
 *     ...
 *     fl_onnx_save(m, "lenet5-tuned.onnx", &e);   // reloads bit-identically
 *
 * Import (docs/onnx.md has the details):
 *   - the default ONNX domain, operator sets 7..21; anything else, and an op used in an opset
 *     older than the op, fails with a clear message;
 *   - initializers become FL_VAL_PARAM when they are float and feed a weight slot (Conv/Gemm/
 *     MatMul weights and biases, Batch/LayerNormalization scale and shift, operands of Add/Sub/Mul/
 *     Div), FL_VAL_CONST otherwise (BatchNormalization running mean/var, int64 shapes, ...);
 *     the ONNX element type is kept in fl_value.onnx_dtype so that export writes it back;
 *   - Constant nodes become FL_VAL_CONST values;
 *   - shape computations (Shape -> Gather -> Unsqueeze -> Concat -> Reshape, as PyTorch emits
 *     for x.view(x.size(0), -1)) are folded into constant shapes; a batch-dependent first
 *     entry of a Reshape shape becomes 0 ("copy this dimension");
 *   - every unsupported operator, attribute or data type fails the load, naming it.
 *
 * Export writes IR version 8 with the model's opset, initializers in their original element
 * types, the batch dimension as the symbolic "N", and output shapes when they can be planned.
 */
#ifndef FLARE_ONNX_H
#define FLARE_ONNX_H

#include "flare/model.h"

/* ONNX TensorProto element types flare reads and writes (all held as floats; the integers
 * exactly, within int32 up to 2^24). */
enum {
    FL_ONNX_FLOAT = 1,
    FL_ONNX_UINT8 = 2,
    FL_ONNX_INT8 = 3,
    FL_ONNX_UINT16 = 4,
    FL_ONNX_INT16 = 5,
    FL_ONNX_INT32 = 6,
    FL_ONNX_INT64 = 7,
    FL_ONNX_BOOL = 9
};
/* 1 when flare reads and writes tensors of this ONNX element type. */
int fl_onnx_dtype_supported(int dtype);

/* Load a model from an .onnx file (or .onnx.gz). */
fl_status fl_onnx_load(const char *path, fl_model **out, fl_err *e);
/* Same from memory; name is used in error messages. */
fl_status fl_onnx_load_buffer(const uint8_t *buf, size_t len, const char *name, fl_model **out,
                              fl_err *e);

/* Write m to path atomically. m is logically const: when it has never been run, its output
 * shapes are planned (for one example, in inference mode) to write them. */
fl_status fl_onnx_save(const fl_model *m, const char *path, fl_err *e);
/* Same into a malloc'd buffer (free() it). */
fl_status fl_onnx_save_buffer(const fl_model *m, uint8_t **buf, size_t *len, fl_err *e);

/* Read a serialized TensorProto (the conformance tests' input_*.pb / output_*.pb). t is
 * allocated (fl_tensor_free it); *dtype (may be NULL) receives the ONNX element type. Integer
 * tensors are converted to float. */
fl_status fl_onnx_read_tensor(const char *path, fl_tensor *t, int *dtype, fl_err *e);
/* Write t as a TensorProto of element type dtype (one of the FL_ONNX_* above; any other
 * is written as float). */
fl_status fl_onnx_write_tensor(const char *path, const fl_tensor *t, int dtype, const char *name,
                               fl_err *e);
/* Name of an ONNX element type ("float", "int64", ... "type 42"). */
const char *fl_onnx_dtype_name(int dtype);

/* ---- conformance ------------------------------------------------------------------------------
 * Run one test of the ONNX backend test suite: DIR/model.onnx and every
 * DIR/test_data_set_N/{input_*.pb,output_*.pb}. Outputs are compared as numpy's
 * assert_allclose does (|got - want| <= atol + rtol * |want|, NaN equals NaN, shapes equal);
 * ONNX's runner uses rtol = 1e-3, atol = 1e-7. */
typedef enum fl_conf_status { FL_CONF_PASS = 0, FL_CONF_FAIL, FL_CONF_SKIP } fl_conf_status;

typedef struct fl_conf_result {
    fl_conf_status status;
    int n_sets;       /* data sets run */
    char ops[256];    /* the model's op types, comma-separated, when it loaded */
    char reason[640]; /* FAIL / SKIP: why */
} fl_conf_result;

fl_conf_status fl_onnx_conformance_run(const char *dir, double rtol, double atol,
                                       fl_conf_result *r);

#endif
