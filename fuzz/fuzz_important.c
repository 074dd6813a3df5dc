/* libFuzzer harness for the important-neurons reader (fl_important_load: important.json of
 * nn lrp, read by nn cover -c idc / nn fuzz): any byte string must either load into layers
 * whose indices are in range and distinct, or fail with a message — never crash or leak. */
#include <stdlib.h>
#include <string.h>

#include "fuzzfile.h"
#include "flare/lrp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[256];
    ff_write("important.json", data, size, path, sizeof path);
    fl_important *imp = NULL;
    fl_err e;
    e.msg[0] = 0;
    if (fl_important_load(path, &imp, &e) != FL_OK) {
        if (!e.msg[0] || imp) abort();
        return 0;
    }
    if (imp->n_layers < 0) abort();
    for (int l = 0; l < imp->n_layers; l++) {
        const fl_important_layer *L = &imp->layers[l];
        if (!L->name || L->width < 0 || L->count < 0 || L->count > L->width) abort();
        if (fl_important_layer_find(imp, L->name) == NULL) abort();
        volatile double sink = 0;
        for (int64_t j = 0; j < L->width; j++) sink += L->relevance[j];
        (void)sink;
        for (int64_t k = 0; k < L->count; k++) {
            if (L->neuron[k] < 0 || L->neuron[k] >= L->width) abort();
            for (int64_t q = 0; q < k; q++)
                if (L->neuron[q] == L->neuron[k]) abort();
        }
    }
    fl_important_free(imp);
    return 0;
}
