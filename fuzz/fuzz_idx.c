/* libFuzzer harness for the IDX reader: any byte string must either parse into an array whose
 * dimensions account for exactly the bytes after the header, or fail with a message — never
 * crash, overflow while multiplying dimensions, or allocate what the input does not hold.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude -Isrc fuzz/fuzz_idx.c \
 *       src/data/... src/core/... src/tensor/tensor.c -lpng -lz -lm
 */
#include <stdlib.h>
#include <string.h>

#include "flare/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fl_idx a;
    fl_err e;
    e.msg[0] = 0;
    fl_status st = fl_idx_parse(data, size, "fuzz-idx3-ubyte", &a, &e);
    if (st != FL_OK) {
        if (!e.msg[0] || a.data) abort();
        return 0;
    }
    int64_t count = 1;
    for (int i = 0; i < a.ndim; i++) count *= a.dims[i];
    if (count != a.count || size != 4 + 4 * (size_t)a.ndim + (size_t)a.count) abort();
    if (a.count && memcmp(a.data, data + 4 + 4 * a.ndim, (size_t)a.count) != 0) abort();
    fl_idx_free(&a);
    return 0;
}
