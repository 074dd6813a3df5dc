/* CIFAR-10 binary batches: records of 1 label byte followed by 3072 pixel bytes (1024 red,
 * 1024 green, 1024 blue, each 32x32 row-major) — already CHW, so pixels are copied straight
 * into the dataset's 8-bit storage. A split is the concatenation of its batch files in the
 * order given.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/data_int.h"

#define REC_PIX 3072
#define REC (1 + REC_PIX)

static const char *const cifar_names[10] = {"airplane", "automobile", "bird",  "cat",  "deer",
                                            "dog",      "frog",       "horse", "ship", "truck"};

/* Size of a batch file in records, or an error naming it. */
static fl_status batch_records(const char *path, int64_t *records, fl_err *e) {
    struct stat st;
    if (stat(path, &st) != 0)
        return fl_fail(e, FL_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode)) return fl_fail(e, FL_ERR_IO, "%s: not a regular file", path);
    if (st.st_size == 0 || st.st_size % REC != 0)
        return fl_fail(e, FL_ERR_FORMAT, "%s: size %lld is not a multiple of %d bytes (one "
                       "CIFAR-10 record is 1 label byte + 3x32x32 pixels); truncated or not a "
                       "CIFAR-10 batch", path, (long long)st.st_size, REC);
    *records = (int64_t)(st.st_size / REC);
    return FL_OK;
}

/* Sizes first (from stat), so the dataset is allocated once at its final size; then one
 * file at a time is read and its pixels copied in, so at most one 30 MB batch file is alive
 * next to the 8-bit images. */
fl_status fl__load_cifar(const char *const *files, int n_files, const fl_scale *s,
                         int64_t limit, fl_dataset **out, fl_err *e) {
    *out = NULL;
    int64_t total = 0;
    fl_status st = FL_OK;
    if (n_files < 1 || n_files > 8)
        return fl_fail(e, FL_ERR_ARG, "CIFAR-10: %d batch files (expected 1..8)", n_files);
    if ((st = fl__scale_check(s, 3, files[0], e)) != FL_OK) return st;
    int used = 0;
    for (; used < n_files && (limit == 0 || total < limit); used++) {
        int64_t r = 0;
        if ((st = batch_records(files[used], &r, e)) != FL_OK) return st;
        total += r;
    }
    if (limit > 0 && total > limit) total = limit;
    fl_dataset *d;
    if ((st = fl__dataset_new_u8(total, 3, 32, 32, s, NULL, &d, e)) != FL_OK) return st;
    int64_t i = 0;
    for (int f = 0; f < used; f++) {
        uint8_t *buf;
        size_t len;
        if ((st = fl_file_read(files[f], &buf, &len, e)) != FL_OK) goto fail;
        if (len == 0 || len % REC != 0) {
            free(buf);
            st = fl_fail(e, FL_ERR_IO, "%s: changed size while being read", files[f]);
            goto fail;
        }
        for (size_t r = 0; r < len / REC && i < total; r++, i++) {
            const uint8_t *rec = buf + r * REC;
            if (rec[0] > 9) {
                st = fl_fail(e, FL_ERR_FORMAT, "%s: record %zu has label %d (CIFAR-10 labels "
                             "are 0..9); not a CIFAR-10 batch?", files[f], r, rec[0]);
                free(buf);
                goto fail;
            }
            d->y[i] = rec[0];
            memcpy(d->x8 + i * REC_PIX, rec + 1, REC_PIX);
        }
        free(buf);
    }
    if (i != total) {
        st = fl_fail(e, FL_ERR_IO, "%s: files changed size while being read", files[0]);
        goto fail;
    }
    if ((st = fl__set_classes(d, 10, cifar_names, e)) != FL_OK ||
        (st = fl__finish_load(d, files[0], "cifar10", files[0], n_files > 1 ? "..." : NULL,
                              e)) != FL_OK)
        goto fail;
    *out = d;
    return FL_OK;
fail:
    fl_dataset_free(d);
    return st;
}
