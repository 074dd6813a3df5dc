/* The op table: one fl_op per supported ONNX op_type, grouped in families (a file each). */
#include <string.h>

#include "flare/model.h"
#include "nn/ops.h"

static const fl_op *const *const families[] = {
    fl_ops_conv, fl_ops_pool, fl_ops_gemm, fl_ops_elementwise,
    fl_ops_activation, fl_ops_norm, fl_ops_shape, fl_ops_layout,
};

const fl_op *fl_op_find(const char *op_type) {
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
        for (const fl_op *const *p = families[f]; *p; p++)
            if (strcmp((*p)->name, op_type) == 0) return *p;
    return NULL;
}

const fl_op *const *fl_op_all(void) {
    static const fl_op *all[128];
    if (!all[0]) {
        int k = 0;
        for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
            for (const fl_op *const *p = families[f]; *p; p++) all[k++] = *p;
        all[k] = NULL;
    }
    return all;
}
