/* The op table: one fl_op per supported ONNX op_type, grouped in families (a file each). The
 * helpers the ops share are in op_args.c, below the ops, so that the table file only points
 * down at them. */
#include <assert.h>
#include <string.h>

#include "flare/model.h"
#include "nn/ops.h"

static const fl_op *const *const families[] = {
    fl_ops_conv, fl_ops_pool, fl_ops_gemm, fl_ops_elementwise,
    fl_ops_activation, fl_ops_norm, fl_ops_shape, fl_ops_layout, fl_ops_pad,
    fl_ops_reduce, fl_ops_slice, fl_ops_unary, fl_ops_layernorm, fl_ops_variadic,
    fl_ops_broadcast, fl_ops_generate, fl_ops_groupnorm, fl_ops_resize,
    fl_ops_scatter, fl_ops_einsum,
};

const fl_op *fl_op_find(const char *op_type) {
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
        for (const fl_op *const *p = families[f]; *p; p++)
            if (strcmp((*p)->name, op_type) == 0) return *p;
    return NULL;
}

const fl_op *const *fl_op_all(void) {
    static const fl_op *all[256];
    if (!all[0]) {
        int k = 0;
        for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
            for (const fl_op *const *p = families[f]; *p; p++) {
                assert(k < 255 && "the op table outgrew fl_op_all's array");
                all[k++] = *p;
            }
        all[k] = NULL;
    }
    return all;
}
