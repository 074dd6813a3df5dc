/* The versions of the default-domain ops flare supports: for each op, the opsets that
 * introduced a new version of it (its "since_version"s), up to opset 21.
 *
 * A model declares one opset; each node then runs the op's newest version not newer than it
 * (the version "in force"). The ops read the model's opset and the node's own spelling to
 * handle each version's semantics (see docs/onnx.md); this table is what the loader uses to
 * say which version that is: an op with no version in force does not exist in the model's
 * opset, and a node an op refuses is reported with its version.
 *
 * Versions 1..17 are ONNX 1.12's (onnx.defs.get_all_schemas_with_history(), python3-onnx);
 * 18..21 are from the ONNX operator changelog (ONNX 1.13-1.16): 18 Reduce* axes as input,
 * Split num_outputs, Pad axes, Resize antialias / axes / keep_aspect_ratio_policy, ScatterND
 * max / min, Mish and GroupNormalization added; 19 AveragePool dilations, Resize
 * half_pixel_symmetric, Pad wrap, Cast saturate and float8 types (Cast, Constant, Equal,
 * Identity, Reshape, Shape, Size); 20 Gelu added, ReduceMax / ReduceMin on bool,
 * ConstantOfShape types; 21 GroupNormalization's per-channel scale, int4 / uint4 types (Cast,
 * Constant, ConstantOfShape, Flatten, Identity, Pad, Reshape, Shape, Size, Squeeze,
 * Transpose, Unsqueeze). */
#include <string.h>

#include "onnx/onnx_int.h"

typedef struct {
    const char *op;
    unsigned char since[8]; /* ascending, 0-terminated */
} op_versions;

static const op_versions table[] = {
    {"Abs", {1, 6, 13}},
    {"Add", {1, 6, 7, 13, 14}},
    {"And", {1, 7}},
    {"AveragePool", {1, 7, 10, 11, 19}},
    {"BatchNormalization", {1, 6, 7, 9, 14, 15}},
    {"Cast", {1, 6, 9, 13, 19, 21}},
    {"Ceil", {1, 6, 13}},
    {"Clip", {1, 6, 11, 12, 13}},
    {"Concat", {1, 4, 11, 13}},
    {"Constant", {1, 9, 11, 12, 13, 19, 21}},
    {"ConstantOfShape", {9, 20, 21}},
    {"Conv", {1, 11}},
    {"ConvTranspose", {1, 11}},
    {"Div", {1, 6, 7, 13, 14}},
    {"Dropout", {1, 6, 7, 10, 12, 13}},
    {"Einsum", {12}},
    {"Elu", {1, 6}},
    {"Equal", {1, 7, 11, 13, 19}},
    {"Erf", {9, 13}},
    {"Exp", {1, 6, 13}},
    {"Expand", {8, 13}},
    {"Flatten", {1, 9, 11, 13, 21}},
    {"Floor", {1, 6, 13}},
    {"Gather", {1, 11, 13}},
    {"Gelu", {20}},
    {"Gemm", {1, 6, 7, 9, 11, 13}},
    {"GlobalAveragePool", {1}},
    {"Greater", {1, 7, 9, 13}},
    {"GreaterOrEqual", {12, 16}},
    {"GroupNormalization", {18, 21}},
    {"HardSigmoid", {1, 6}},
    {"HardSwish", {14}},
    {"Identity", {1, 13, 14, 16, 19, 21}},
    {"InstanceNormalization", {1, 6}},
    {"LayerNormalization", {17}},
    {"LeakyRelu", {1, 6, 16}},
    {"Less", {1, 7, 9, 13}},
    {"LessOrEqual", {12, 16}},
    {"Log", {1, 6, 13}},
    {"LogSoftmax", {1, 11, 13}},
    {"MatMul", {1, 9, 13}},
    {"Max", {1, 6, 8, 12, 13}},
    {"MaxPool", {1, 8, 10, 11, 12}},
    {"Mean", {1, 6, 8, 13}},
    {"Min", {1, 6, 8, 12, 13}},
    {"Mish", {18}},
    {"Mod", {10, 13}},
    {"Mul", {1, 6, 7, 13, 14}},
    {"Neg", {1, 6, 13}},
    {"Not", {1}},
    {"Or", {1, 7}},
    {"Pad", {1, 2, 11, 13, 18, 19, 21}},
    {"Pow", {1, 7, 12, 13, 15}},
    {"Range", {11}},
    {"Reciprocal", {1, 6, 13}},
    {"ReduceL1", {1, 11, 13, 18}},
    {"ReduceL2", {1, 11, 13, 18}},
    {"ReduceMax", {1, 11, 12, 13, 18, 20}},
    {"ReduceMean", {1, 11, 13, 18}},
    {"ReduceMin", {1, 11, 12, 13, 18, 20}},
    {"ReduceSum", {1, 11, 13}},
    {"ReduceSumSquare", {1, 11, 13, 18}},
    {"Relu", {1, 6, 13, 14}},
    {"Reshape", {1, 5, 13, 14, 19, 21}},
    {"Resize", {10, 11, 13, 18, 19}},
    {"ScatterND", {11, 13, 16, 18}},
    {"Selu", {1, 6}},
    {"Shape", {1, 13, 15, 19, 21}},
    {"Sigmoid", {1, 6, 13}},
    {"Size", {1, 13, 19, 21}},
    {"Slice", {1, 10, 11, 13}},
    {"Softmax", {1, 11, 13}},
    {"Softplus", {1}},
    {"Softsign", {1}},
    {"Split", {1, 2, 11, 13, 18}},
    {"Sqrt", {1, 6, 13}},
    {"Squeeze", {1, 11, 13, 21}},
    {"Sub", {1, 6, 7, 13, 14}},
    {"Sum", {1, 6, 8, 13}},
    {"Tanh", {1, 6, 13}},
    {"Tile", {1, 6, 13}},
    {"Transpose", {1, 13, 21}},
    {"Unsqueeze", {1, 11, 13, 21}},
    {"Upsample", {1, 7, 9, 10}},
    {"Where", {9, 16}},
    {"Xor", {1, 7}},
};

static const op_versions *lookup(const char *op) {
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(table[i].op, op) == 0) return &table[i];
    return NULL;
}

int fl_onnx_op_version(const char *op, int opset) {
    const op_versions *v = lookup(op);
    int in_force = 0;
    for (int k = 0; v && k < 8 && v->since[k]; k++)
        if (v->since[k] <= opset) in_force = v->since[k];
    return v ? in_force : -1;
}

int fl_onnx_op_first_version(const char *op) {
    const op_versions *v = lookup(op);
    return v ? v->since[0] : -1;
}
