/* IDX files (the MNIST family): a 4-byte magic 00 00 TYPE NDIM, NDIM big-endian uint32
 * dimensions, then the elements in row-major order.
 *
 * Only TYPE 0x08 (unsigned byte) is read: it is what every MNIST-style image and label file
 * uses, and flare never needs the others. Headers come from untrusted files (and from the
 * fuzzer), so every dimension is bounded and their product checked before it sizes anything.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "data/data_int.h"

static const char *idx_type_name(int t) {
    switch (t) {
    case 0x08: return "unsigned byte";
    case 0x09: return "signed byte";
    case 0x0B: return "short";
    case 0x0C: return "int";
    case 0x0D: return "float";
    case 0x0E: return "double";
    default: return NULL;
    }
}

/* Check the header and sizes of an in-memory IDX file and fill out's ndim, dims and count
 * (data stays NULL); *hdr_len gets where the elements start. */
static fl_status idx_header(const uint8_t *buf, size_t len, const char *name, fl_idx *out,
                            size_t *hdr_len, fl_err *e) {
    memset(out, 0, sizeof *out);
    if (len < 4)
        return fl_fail(e, FL_ERR_FORMAT, "%s: truncated IDX header (%zu bytes)", name, len);
    if (buf[0] != 0 || buf[1] != 0)
        return fl_fail(e, FL_ERR_FORMAT, "%s: not an IDX file (magic %02x %02x %02x %02x)", name,
                       buf[0], buf[1], buf[2], buf[3]);
    int type = buf[2], ndim = buf[3];
    if (!idx_type_name(type))
        return fl_fail(e, FL_ERR_FORMAT, "%s: not an IDX file (unknown element type 0x%02x)",
                       name, type);
    if (type != 0x08)
        return fl_fail(e, FL_ERR_UNSUPPORTED, "%s: IDX element type %s (0x%02x) is not "
                       "supported; flare reads unsigned-byte (0x08) IDX files", name,
                       idx_type_name(type), type);
    if (ndim < 1 || ndim > FL_MAX_DIMS)
        return fl_fail(e, FL_ERR_FORMAT, "%s: IDX file has %d dimensions (expected 1..%d)", name,
                       ndim, FL_MAX_DIMS);
    size_t hdr = 4 + 4 * (size_t)ndim;
    if (len < hdr)
        return fl_fail(e, FL_ERR_FORMAT, "%s: truncated IDX header (%zu bytes, need %zu)", name,
                       len, hdr);
    int64_t count = 1;
    for (int i = 0; i < ndim; i++) {
        const uint8_t *p = buf + 4 + 4 * i;
        int64_t d = ((int64_t)p[0] << 24) | ((int64_t)p[1] << 16) | ((int64_t)p[2] << 8) | p[3];
        if (!fl__mul_checked(count, d, FL_DATA_MAX_BYTES, &count))
            return fl_fail(e, FL_ERR_FORMAT, "%s: IDX dimensions are absurdly large "
                           "(dimension %d is %lld)", name, i, (long long)d);
        out->dims[i] = d;
    }
    size_t have = len - hdr;
    if ((uint64_t)count > have)
        return fl_fail(e, FL_ERR_FORMAT, "%s: truncated IDX data: header says %lld bytes, file "
                       "has %zu", name, (long long)count, have);
    if ((uint64_t)count < have)
        return fl_fail(e, FL_ERR_FORMAT, "%s: %zu unexpected bytes after the IDX data", name,
                       have - (size_t)count);
    out->ndim = ndim;
    out->count = count;
    *hdr_len = hdr;
    return FL_OK;
}

fl_status fl_idx_parse(const uint8_t *buf, size_t len, const char *name, fl_idx *out,
                       fl_err *e) {
    size_t hdr = 0;
    fl_status st = idx_header(buf, len, name, out, &hdr, e);
    if (st != FL_OK) return st;
    out->data = malloc(out->count ? (size_t)out->count : 1);
    if (!out->data) {
        memset(out, 0, sizeof *out);
        return fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", name);
    }
    if (out->count) memcpy(out->data, buf + hdr, (size_t)out->count);
    return FL_OK;
}

/* The file buffer itself becomes out->data, the elements slid down over the header: a 47 MB
 * image file then needs 47 MB, not twice that for buffer plus copy. */
fl_status fl_idx_read(const char *path, fl_idx *out, fl_err *e) {
    uint8_t *buf;
    size_t len, hdr = 0;
    memset(out, 0, sizeof *out);
    fl_status st = fl_file_read(path, &buf, &len, e);
    if (st != FL_OK) return st;
    if ((st = idx_header(buf, len, path, out, &hdr, e)) != FL_OK) {
        free(buf);
        return st;
    }
    memmove(buf, buf + hdr, (size_t)out->count);
    uint8_t *shrunk = realloc(buf, out->count ? (size_t)out->count : 1);
    out->data = shrunk ? shrunk : buf; /* a failed shrink leaves buf as it was: keep it */
    return FL_OK;
}


void fl_idx_free(fl_idx *a) {
    if (!a) return;
    free(a->data);
    a->data = NULL;
}

fl_status fl__gzip(const uint8_t *buf, size_t len, const char *name, uint8_t **out,
                   size_t *out_len, fl_err *e) {
    z_stream z;
    memset(&z, 0, sizeof z);
    /* windowBits 15 + 16: write a gzip (not zlib) wrapper, what gzopen/gunzip expect. */
    if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return fl_fail(e, FL_ERR_NOMEM, "%s: cannot start gzip compression", name);
    uLong cap = deflateBound(&z, (uLong)len);
    uint8_t *p = malloc(cap);
    if (!p) {
        deflateEnd(&z);
        return fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", name);
    }
    z.next_in = (Bytef *)buf;
    z.avail_in = (uInt)len;
    z.next_out = p;
    z.avail_out = (uInt)cap;
    int rc = deflate(&z, Z_FINISH);
    size_t n = z.total_out;
    deflateEnd(&z);
    if (rc != Z_STREAM_END || len > 0xFFFFFFFFu) {
        free(p);
        return fl_fail(e, FL_ERR_IO, "%s: gzip compression failed", name);
    }
    *out = p;
    *out_len = n;
    return FL_OK;
}

fl_status fl_idx_write(const char *path, int ndim, const int64_t *dims, const uint8_t *data,
                       fl_err *e) {
    if (ndim < 1 || ndim > FL_MAX_DIMS)
        return fl_fail(e, FL_ERR_ARG, "%s: IDX needs 1..%d dimensions, got %d", path,
                       FL_MAX_DIMS, ndim);
    int64_t count = 1;
    for (int i = 0; i < ndim; i++)
        if (dims[i] > 0xFFFFFFFFLL || !fl__mul_checked(count, dims[i], FL_DATA_MAX_BYTES, &count))
            return fl_fail(e, FL_ERR_ARG, "%s: IDX dimension %d (%lld) out of range", path, i,
                           (long long)dims[i]);
    size_t hdr = 4 + 4 * (size_t)ndim, len = hdr + (size_t)count;
    uint8_t *buf = malloc(len);
    if (!buf) return fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", path);
    buf[0] = buf[1] = 0;
    buf[2] = 0x08;
    buf[3] = (uint8_t)ndim;
    for (int i = 0; i < ndim; i++)
        for (int k = 0; k < 4; k++) buf[4 + 4 * i + k] = (uint8_t)(dims[i] >> (24 - 8 * k));
    if (count) memcpy(buf + hdr, data, (size_t)count);
    fl_status st;
    if (fl__ends_with(path, ".gz")) {
        uint8_t *gz;
        size_t gz_len;
        st = fl__gzip(buf, len, path, &gz, &gz_len, e);
        if (st == FL_OK) {
            st = fl_file_write_atomic(path, gz, gz_len, e);
            free(gz);
        }
    } else {
        st = fl_file_write_atomic(path, buf, len, e);
    }
    free(buf);
    return st;
}

/* images: [n,h,w] unsigned bytes; labels: [n] unsigned bytes (optional). The image bytes are
 * already the dataset's [n,1,h,w] 8-bit storage, so the dataset adopts them without a copy. */
fl_status fl__load_idx(const char *images, const char *labels, const fl_scale *s,
                       int64_t limit, fl_dataset **out, fl_err *e) {
    fl_idx im, lb;
    fl_dataset *d = NULL;
    memset(&lb, 0, sizeof lb);
    *out = NULL;
    fl_status st = fl_idx_read(images, &im, e);
    if (st != FL_OK) return st;
    if (im.ndim != 3 || im.dims[1] == 0 || im.dims[2] == 0) {
        st = fl_fail(e, FL_ERR_FORMAT, "%s: expected IDX images [n,h,w] (idx3), got %d "
                     "dimensions", images, im.ndim);
        goto done;
    }
    if (labels) {
        if ((st = fl_idx_read(labels, &lb, e)) != FL_OK) goto done;
        if (lb.ndim != 1 || lb.dims[0] != im.dims[0]) {
            st = fl_fail(e, FL_ERR_SHAPE, "%s: expected %lld labels [n] (idx1) to match %s, got "
                         "%d dimensions of first size %lld", labels, (long long)im.dims[0],
                         images, lb.ndim, (long long)lb.dims[0]);
            goto done;
        }
    }
    int64_t n = im.dims[0];
    if (limit > 0 && limit < n) n = limit;
    if (im.dims[1] > FL_DATA_MAX_DIM || im.dims[2] > FL_DATA_MAX_DIM) {
        st = fl_fail(e, FL_ERR_FORMAT, "%s: images of %lldx%lld are too large", images,
                     (long long)im.dims[1], (long long)im.dims[2]);
        goto done;
    }
    int h = (int)im.dims[1], w = (int)im.dims[2];
    if ((st = fl__scale_check(s, 1, images, e)) != FL_OK) goto done;
    if ((st = fl__dataset_adopt_u8(im.dims[0], n, 1, h, w, s, &im.data, &d, e)) != FL_OK) goto done;
    if (labels)
        for (int64_t i = 0; i < n; i++) d->y[i] = lb.data[i];
    if ((st = fl__finish_load(d, labels ? labels : images, "idx", images, labels, e)) != FL_OK)
        goto done;
    *out = d;
    d = NULL;
done:
    fl_dataset_free(d);
    fl_idx_free(&im);
    fl_idx_free(&lb);
    return st;
}
