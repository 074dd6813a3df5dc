/* libFuzzer harness for the PNG-folder reader (the dataset spec DIR): the fuzzer's bytes are a
 * PNG in one class folder, next to a valid 3x4 grey PNG in another, so that broken files and
 * files that disagree in size or channels are both tried. The load must either give images of
 * one shape with labels from the folder names, or fail with a message — never crash or leak
 * (libpng's longjmp error path included). */
#include <stdlib.h>
#include <string.h>

#include "fuzzfile.h"
#include "flare/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int made;
    char dir[256], path[256];
    fl_err e;
    if (!made) { /* the valid neighbour: class "a", written once */
        float px[12];
        for (int i = 0; i < 12; i++) px[i] = (float)i / 11;
        snprintf(path, sizeof path, "%s/imgs/a", ff_dir());
        snprintf(dir, sizeof dir, "%s/imgs", ff_dir());
        mkdir(dir, 0700);
        mkdir(path, 0700);
        snprintf(path, sizeof path, "%s/imgs/a/0.png", ff_dir());
        e.msg[0] = 0;
        if (fl_png_write(path, px, 1, 3, 4, 0, 1, &e) != FL_OK) abort();
        made = 1;
    }
    ff_write("imgs/b/0.png", data, size, path, sizeof path);
    snprintf(dir, sizeof dir, "%s/imgs", ff_dir());
    fl_dataset *d = NULL;
    e.msg[0] = 0;
    if (fl_dataset_load(dir, NULL, 0, &d, &e) != FL_OK) {
        if (!e.msg[0] || d) abort();
        return 0;
    }
    if (d->n != 2 || d->n_classes != 2 || d->c < 1 || d->h < 1 || d->w < 1) abort();
    for (int64_t i = 0; i < d->n; i++)
        if (d->y[i] < 0 || d->y[i] >= d->n_classes) abort();
    volatile float sink = 0;
    int64_t per = (int64_t)d->c * d->h * d->w;
    for (int64_t i = 0; i < d->n * per; i++) sink += d->x8 ? d->x8[i] : d->x[i];
    (void)sink;
    fl_dataset_free(d);
    return 0;
}
