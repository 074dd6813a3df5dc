/* libFuzzer harness for the training-profile reader (fl_profile_load: `--profile FILE` of nn
 * cover / nn fuzz): any byte string must either load into a profile whose layers account for
 * exactly its neurons, or fail with a message naming the file — never crash, leak, read past
 * the file or allocate on the say-so of an absurd header. */
#include <stdlib.h>
#include <string.h>

#include "fuzzfile.h"
#include "flare/cover.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[256];
    ff_write("profile.bin", data, size, path, sizeof path);
    fl_profile *p = NULL;
    fl_err e;
    e.msg[0] = 0;
    if (fl_profile_load(path, &p, &e) != FL_OK) {
        if (!e.msg[0] || p) abort();
        return 0;
    }
    if (p->n_layers < 0 || p->total < 0 || p->count < 0) abort();
    int64_t off = 0;
    for (int l = 0; l < p->n_layers; l++) {
        if (!p->name[l] || p->width[l] < 0 || p->offset[l] != off) abort();
        off += p->width[l];
    }
    if (off != p->total) abort();
    /* touch every statistic so ASan checks the arrays really hold total entries */
    volatile double sink = 0;
    for (int64_t i = 0; i < p->total; i++) sink += p->min[i] + p->max[i] + p->mean[i] + p->std[i];
    (void)sink;
    char *layers = fl_profile_layers(p);
    if (!layers) abort();
    free(layers);
    fl_profile_free(p);
    return 0;
}
