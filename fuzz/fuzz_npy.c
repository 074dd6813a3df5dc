/* libFuzzer harness for the NPY reader: any byte string must either parse into an array whose
 * shape accounts for exactly the bytes that follow the header, or fail with a message — never
 * crash, read out of bounds, leak, or allocate on the say-so of an absurd header.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude -Isrc fuzz/fuzz_npy.c \
 *       src/data/... src/core/... src/tensor/tensor.c -lpng -lz -lm
 */
#include <stdlib.h>
#include <string.h>

#include "flare/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fl_npy a;
    fl_err e;
    e.msg[0] = 0;
    fl_status st = fl_npy_parse(data, size, "fuzz.npy", &a, &e);
    if (st != FL_OK) {
        /* A failure always explains itself and leaves nothing allocated. */
        if (!e.msg[0] || a.data) abort();
        return 0;
    }
    int64_t count = 1;
    for (int i = 0; i < a.ndim; i++) count *= a.shape[i];
    if (count != a.count || a.ndim < 0 || a.ndim > FL_MAX_DIMS) abort();
    if ((uint64_t)a.count * fl_dtype_size(a.dtype) > size) abort();
    /* Touch every element so ASan checks the allocation really holds them. */
    volatile uint8_t sink = 0;
    const uint8_t *p = a.data;
    for (int64_t i = 0; i < a.count * (int64_t)fl_dtype_size(a.dtype); i++) sink ^= p[i];
    (void)sink;
    fl_npy_free(&a);
    return 0;
}
