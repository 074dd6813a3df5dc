/* CIFAR-10 binary batches: records of 1 label byte followed by 3072 pixel bytes (1024 red,
 * 1024 green, 1024 blue, each 32x32 row-major) — already CHW, so pixels are scaled straight
 * into place. A split is the concatenation of its batch files in the order given.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/data_int.h"

#define REC_PIX 3072
#define REC (1 + REC_PIX)

static const char *const cifar_names[10] = {"airplane", "automobile", "bird",  "cat",  "deer",
                                            "dog",      "frog",       "horse", "ship", "truck"};

fl_status fl__load_cifar(const char *const *files, int n_files, const fl_scale *s,
                         int64_t limit, fl_dataset **out, fl_err *e) {
    *out = NULL;
    uint8_t *bufs[8] = {0};
    size_t lens[8] = {0};
    int64_t total = 0;
    fl_status st = FL_OK;
    if (n_files < 1 || n_files > 8)
        return fl_fail(e, FL_ERR_ARG, "CIFAR-10: %d batch files (expected 1..8)", n_files);
    if ((st = fl__scale_check(s, 3, files[0], e)) != FL_OK) return st;
    /* Read everything first so the total (and every size error) is known before allocating. */
    for (int f = 0; f < n_files && (limit == 0 || total < limit); f++) {
        if ((st = fl_file_read(files[f], &bufs[f], &lens[f], e)) != FL_OK) goto done;
        if (lens[f] == 0 || lens[f] % REC != 0) {
            st = fl_fail(e, FL_ERR_FORMAT, "%s: size %zu is not a multiple of %d bytes (one "
                         "CIFAR-10 record is 1 label byte + 3x32x32 pixels); truncated or not a "
                         "CIFAR-10 batch", files[f], lens[f], REC);
            goto done;
        }
        for (size_t r = 0; r < lens[f] / REC; r++)
            if (bufs[f][r * REC] > 9) {
                st = fl_fail(e, FL_ERR_FORMAT, "%s: record %zu has label %d (CIFAR-10 labels "
                             "are 0..9); not a CIFAR-10 batch?", files[f], r, bufs[f][r * REC]);
                goto done;
            }
        total += (int64_t)(lens[f] / REC);
    }
    if (limit > 0 && total > limit) total = limit;
    fl_dataset *d;
    if ((st = fl_dataset_new(total, 3, 32, 32, &d, e)) != FL_OK) goto done;
    int64_t i = 0;
    for (int f = 0; f < n_files && i < total; f++)
        for (size_t r = 0; r < lens[f] / REC && i < total; r++, i++) {
            const uint8_t *rec = bufs[f] + r * REC;
            d->y[i] = rec[0];
            fl__scale_u8(s, rec + 1, d->x + i * REC_PIX, 1, 3, 1024);
        }
    d->n_classes = 10;
    if ((st = fl__set_classes(d, 10, cifar_names, e)) != FL_OK ||
        (st = fl__finish_labels(d, files[0], e)) != FL_OK) {
        fl_dataset_free(d);
        goto done;
    }
    char src[1100];
    snprintf(src, sizeof src, "cifar10:%s%s", files[0], n_files > 1 ? ",..." : "");
    if (!(d->source = fl__strdup(src))) {
        fl_dataset_free(d);
        st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
        goto done;
    }
    *out = d;
done:
    for (int f = 0; f < n_files; f++) free(bufs[f]);
    return st;
}
