/* libFuzzer harness for the ONNX loader: any byte string must either load into a model or fail
 * with a message that names the file — never crash, read out of bounds or leak. A model that
 * loads must also export; its export is loaded back (without requiring success: a fuzzed graph
 * may hold things flare only accepts once, like an unused output name reused).
 *
 * Loading may run the model (shape folding plans it for batches 3 and 5 on zeros), so the
 * harness also reaches the ops' shape callbacks and kernels with strange attributes.
 *
 * Seeds (fuzz/corpus/onnx): small ONNX node-test models (libonnx-testdata) and chain.onnx, a
 * Conv/BN/Pool/Shape->Gather->Unsqueeze->Concat->Reshape/Gemm graph made with onnx.helper.
 */
#include <stdlib.h>
#include <string.h>

#include "flare/onnx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fl_model *m = NULL;
    fl_err e;
    e.msg[0] = 0;
    fl_status st = fl_onnx_load_buffer(data, size, "fuzz.onnx", &m, &e);
    if (st != FL_OK) {
        if (m || !strstr(e.msg, "fuzz.onnx")) abort();
        return 0;
    }
    if (!m || m->n_outputs < 1) abort();
    uint8_t *buf;
    size_t len;
    if (fl_onnx_save_buffer(m, &buf, &len, &e) != FL_OK) abort();
    fl_model *r = NULL;
    if (fl_onnx_load_buffer(buf, len, "fuzz-export.onnx", &r, &e) == FL_OK) {
        if (r->n_nodes != m->n_nodes || r->n_outputs != m->n_outputs) abort();
        fl_model_free(r);
    }
    free(buf);
    fl_model_free(m);
    return 0;
}
