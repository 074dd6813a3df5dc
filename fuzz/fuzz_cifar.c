/* libFuzzer harness for the CIFAR-10 batch reader (the dataset spec PATH.bin): any byte string
 * must either load into records of one label byte and 3 072 pixels each, labels in [0, 10),
 * or fail with a message — never crash or read past the file. */
#include <stdlib.h>
#include <string.h>

#include "fuzzfile.h"
#include "flare/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[256];
    ff_write("data_batch_1.bin", data, size, path, sizeof path);
    fl_dataset *d = NULL;
    fl_err e;
    e.msg[0] = 0;
    if (fl_dataset_load(path, NULL, 0, &d, &e) != FL_OK) {
        if (!e.msg[0] || d) abort();
        return 0;
    }
    if (d->c != 3 || d->h != 32 || d->w != 32 || d->n < 0) abort();
    if ((uint64_t)d->n * 3073 != size) abort();
    for (int64_t i = 0; i < d->n; i++) {
        if (d->y[i] < 0 || d->y[i] >= d->n_classes) abort();
        if (d->y[i] != data[i * 3073]) abort();
    }
    if (!d->x8 || (d->n && memcmp(d->x8, data + 1, 3072) != 0)) abort();
    volatile uint8_t sink = 0;
    for (int64_t i = 0; i < d->n * 3072; i++) sink ^= d->x8[i];
    (void)sink;
    fl_dataset_free(d);
    return 0;
}
