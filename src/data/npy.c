/* NPY files: "\x93NUMPY", version (1, 2 or 3), a header length (uint16 for v1, uint32 after),
 * then a Python dict literal such as
 *     {'descr': '<f4', 'fortran_order': False, 'shape': (60000, 28, 28), }
 * padded with spaces to a multiple of 64 bytes, then the raw elements.
 *
 * The dict is parsed with a tiny recursive-descent reader that accepts exactly the literal
 * forms numpy writes (quoted strings, True/False, tuples of integers) and nothing else, so a
 * hostile header can only ever produce an error message. Multi-byte data is little-endian
 * on disk and in memory (flare targets little-endian hosts).
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/data_int.h"

size_t fl_dtype_size(fl_dtype dt) {
    switch (dt) {
    case FL_DT_U8: return 1;
    case FL_DT_I64: return 8;
    case FL_DT_F32:
    case FL_DT_I32:
    default: return 4;
    }
}

const char *fl_dtype_name(fl_dtype dt) {
    switch (dt) {
    case FL_DT_F32: return "float32";
    case FL_DT_U8: return "uint8";
    case FL_DT_I32: return "int32";
    case FL_DT_I64: return "int64";
    default: return "?";
    }
}

static const char *dtype_descr(fl_dtype dt) {
    switch (dt) {
    case FL_DT_F32: return "<f4";
    case FL_DT_U8: return "|u1";
    case FL_DT_I32: return "<i4";
    case FL_DT_I64: return "<i8";
    default: return "?";
    }
}

/* ---- header dict reader ---------------------------------------------------------------- */
typedef struct {
    const char *p, *end;
} rd;

static void skip_ws(rd *r) {
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
        r->p++;
}

static int eat(rd *r, char c) {
    skip_ws(r);
    if (r->p < r->end && *r->p == c) {
        r->p++;
        return 1;
    }
    return 0;
}

/* A quoted string into buf (truncated to n-1); 0 if none. */
static int read_str(rd *r, char *buf, size_t n) {
    skip_ws(r);
    if (r->p >= r->end || (*r->p != '\'' && *r->p != '"')) return 0;
    char q = *r->p++;
    size_t k = 0;
    while (r->p < r->end && *r->p != q) {
        if (k + 1 < n) buf[k++] = *r->p;
        r->p++;
    }
    if (r->p >= r->end) return 0;
    r->p++;
    buf[k] = 0;
    return 1;
}

static int read_word(rd *r, const char *w) {
    skip_ws(r);
    size_t n = strlen(w);
    if ((size_t)(r->end - r->p) >= n && !memcmp(r->p, w, n)) {
        r->p += n;
        return 1;
    }
    return 0;
}

/* "(d0, d1, ...)" with an optional trailing comma; -1 on syntax error, -2 too many dims,
 * -3 a dimension too large. */
static int read_shape(rd *r, int64_t *shape) {
    if (!eat(r, '(')) return -1;
    int n = 0;
    for (;;) {
        if (eat(r, ')')) return n;
        skip_ws(r);
        if (r->p >= r->end || !isdigit((unsigned char)*r->p)) return -1;
        int64_t v = 0;
        while (r->p < r->end && isdigit((unsigned char)*r->p)) {
            if (v > (INT64_C(1) << 40)) return -3;
            v = v * 10 + (*r->p++ - '0');
        }
        while (r->p < r->end && *r->p == 'L') r->p++; /* Python 2 longs */
        if (n == FL_MAX_DIMS) return -2;
        shape[n++] = v;
        if (!eat(r, ',')) {
            if (!eat(r, ')')) return -1;
            return n;
        }
    }
}

static fl_status descr_dtype(const char *d, const char *name, fl_dtype *dt, fl_err *e) {
    if (!strcmp(d, "<f4") || !strcmp(d, "=f4")) *dt = FL_DT_F32;
    else if (!strcmp(d, "|u1") || !strcmp(d, "<u1") || !strcmp(d, ">u1") || !strcmp(d, "=u1") ||
             !strcmp(d, "u1"))
        *dt = FL_DT_U8;
    else if (!strcmp(d, "<i4") || !strcmp(d, "=i4")) *dt = FL_DT_I32;
    else if (!strcmp(d, "<i8") || !strcmp(d, "=i8")) *dt = FL_DT_I64;
    else if (d[0] == '>' && (!strcmp(d + 1, "f4") || !strcmp(d + 1, "i4") || !strcmp(d + 1, "i8")))
        return fl_fail(e, FL_ERR_UNSUPPORTED, "%s: big-endian dtype '%s' is not supported; save "
                       "with x.astype('<%s')", name, d, d + 1);
    else
        return fl_fail(e, FL_ERR_UNSUPPORTED, "%s: dtype '%s' is not supported; flare reads "
                       "float32 ('<f4'), uint8 ('|u1'), int32 ('<i4') and int64 ('<i8'); convert "
                       "with e.g. x.astype(np.float32)", name, d);
    return FL_OK;
}

fl_status fl_npy_parse(const uint8_t *buf, size_t len, const char *name, fl_npy *out,
                       fl_err *e) {
    memset(out, 0, sizeof *out);
    if (len < 10 || memcmp(buf, "\x93NUMPY", 6) != 0)
        return fl_fail(e, FL_ERR_FORMAT, "%s: not an NPY file (bad magic)", name);
    int major = buf[6];
    size_t hlen, pre;
    if (major == 1) {
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
        pre = 10;
    } else if (major == 2 || major == 3) {
        if (len < 12) return fl_fail(e, FL_ERR_FORMAT, "%s: truncated NPY header", name);
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
        pre = 12;
    } else {
        return fl_fail(e, FL_ERR_UNSUPPORTED, "%s: NPY format version %d.%d is not supported",
                       name, major, buf[7]);
    }
    if (hlen > len - pre)
        return fl_fail(e, FL_ERR_FORMAT, "%s: truncated NPY header (says %zu bytes, file has %zu)",
                       name, hlen, len - pre);
    rd r = {(const char *)buf + pre, (const char *)buf + pre + hlen};
    char key[32], descr[32] = "";
    int have_descr = 0, have_order = 0, have_shape = 0, fortran = 0, ndim = 0;
    if (!eat(&r, '{')) goto bad;
    while (!eat(&r, '}')) {
        if (!read_str(&r, key, sizeof key) || !eat(&r, ':')) goto bad;
        if (!strcmp(key, "descr")) {
            if (!read_str(&r, descr, sizeof descr)) {
                /* Structured dtypes are lists; name them instead of calling them garbage. */
                skip_ws(&r);
                if (r.p < r.end && *r.p == '[')
                    return fl_fail(e, FL_ERR_UNSUPPORTED, "%s: structured NPY dtypes are not "
                                   "supported", name);
                goto bad;
            }
            have_descr = 1;
        } else if (!strcmp(key, "fortran_order")) {
            if (read_word(&r, "True")) fortran = 1;
            else if (!read_word(&r, "False")) goto bad;
            have_order = 1;
        } else if (!strcmp(key, "shape")) {
            ndim = read_shape(&r, out->shape);
            if (ndim == -2)
                return fl_fail(e, FL_ERR_UNSUPPORTED, "%s: NPY array has more than %d dimensions",
                               name, FL_MAX_DIMS);
            if (ndim == -3)
                return fl_fail(e, FL_ERR_FORMAT, "%s: NPY shape has an absurdly large dimension",
                               name);
            if (ndim < 0) goto bad;
            have_shape = 1;
        } else {
            goto bad;
        }
        if (!eat(&r, ',')) {
            if (!eat(&r, '}')) goto bad;
            break;
        }
    }
    if (!have_descr || !have_order || !have_shape)
        return fl_fail(e, FL_ERR_FORMAT, "%s: NPY header lacks '%s'", name,
                       !have_descr ? "descr" : !have_order ? "fortran_order" : "shape");
    fl_status st = descr_dtype(descr, name, &out->dtype, e);
    if (st != FL_OK) return st;
    if (fortran)
        return fl_fail(e, FL_ERR_UNSUPPORTED, "%s: Fortran-order NPY arrays are not supported; "
                       "save with np.save(path, np.ascontiguousarray(x))", name);
    int64_t count = 1, bytes;
    for (int i = 0; i < ndim; i++)
        if (!fl__mul_checked(count, out->shape[i], FL_DATA_MAX_BYTES, &count))
            return fl_fail(e, FL_ERR_FORMAT, "%s: NPY shape is absurdly large", name);
    if (!fl__mul_checked(count, (int64_t)fl_dtype_size(out->dtype), FL_DATA_MAX_BYTES, &bytes))
        return fl_fail(e, FL_ERR_FORMAT, "%s: NPY shape is absurdly large", name);
    size_t have = len - pre - hlen;
    if ((uint64_t)bytes > have)
        return fl_fail(e, FL_ERR_FORMAT, "%s: truncated NPY data: shape needs %lld bytes, file "
                       "has %zu", name, (long long)bytes, have);
    if ((uint64_t)bytes < have)
        return fl_fail(e, FL_ERR_FORMAT, "%s: %zu unexpected bytes after the NPY data", name,
                       have - (size_t)bytes);
    out->data = fl_alloc((size_t)bytes);
    if (!out->data) return fl_fail(e, FL_ERR_NOMEM, "%s: out of memory (%lld bytes)", name,
                                   (long long)bytes);
    if (bytes) memcpy(out->data, buf + pre + hlen, (size_t)bytes);
    out->ndim = ndim;
    out->count = count;
    return FL_OK;
bad:
    return fl_fail(e, FL_ERR_FORMAT, "%s: malformed NPY header near \"%.*s\"", name,
                   (int)(r.end - r.p < 24 ? r.end - r.p : 24), r.p);
}

static fl_status parse_file(const uint8_t *buf, size_t len, const char *path, void *out,
                            fl_err *e) {
    return fl_npy_parse(buf, len, path, out, e);
}

fl_status fl_npy_read(const char *path, fl_npy *out, fl_err *e) {
    memset(out, 0, sizeof *out);
    return fl_file_parse(path, parse_file, out, e);
}

void fl_npy_free(fl_npy *a) {
    if (!a) return;
    fl_free(a->data);
    a->data = NULL;
}

fl_status fl_npy_read_tensor(const char *path, fl_tensor *t, fl_err *e) {
    fl_npy a;
    memset(t, 0, sizeof *t);
    fl_status st = fl_npy_read(path, &a, e);
    if (st != FL_OK) return st;
    if (fl_tensor_alloc(t, a.ndim, a.shape) != FL_OK) {
        fl_npy_free(&a);
        return fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", path);
    }
    for (int64_t i = 0; i < a.count; i++) {
        switch (a.dtype) {
        case FL_DT_F32: t->data[i] = ((const float *)a.data)[i]; break;
        case FL_DT_U8: t->data[i] = ((const uint8_t *)a.data)[i]; break;
        case FL_DT_I32: t->data[i] = (float)((const int32_t *)a.data)[i]; break;
        case FL_DT_I64: t->data[i] = (float)((const int64_t *)a.data)[i]; break;
        }
    }
    fl_npy_free(&a);
    return FL_OK;
}

fl_status fl_npy_write(const char *path, fl_dtype dt, int ndim, const int64_t *shape,
                       const void *data, fl_err *e) {
    if (ndim < 0 || ndim > FL_MAX_DIMS)
        return fl_fail(e, FL_ERR_ARG, "%s: cannot write a %d-dimensional array", path, ndim);
    if ((int)dt < FL_DT_F32 || dt > FL_DT_I64)
        return fl_fail(e, FL_ERR_ARG, "%s: unknown dtype %d", path, (int)dt);
    char hdr[512];
    int k = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                     dtype_descr(dt));
    int64_t count = 1, bytes;
    for (int i = 0; i < ndim; i++) {
        if (!fl__mul_checked(count, shape[i], FL_DATA_MAX_BYTES, &count))
            return fl_fail(e, FL_ERR_ARG, "%s: bad shape (dimension %d is %lld)", path, i,
                           (long long)shape[i]);
        k += snprintf(hdr + k, sizeof hdr - (size_t)k, "%lld%s", (long long)shape[i],
                      ndim == 1 || i + 1 < ndim ? ", " : "");
    }
    k += snprintf(hdr + k, sizeof hdr - (size_t)k, "), }");
    if (!fl__mul_checked(count, (int64_t)fl_dtype_size(dt), FL_DATA_MAX_BYTES, &bytes))
        return fl_fail(e, FL_ERR_ARG, "%s: array too large", path);
    /* Pad with spaces and a final newline so magic + lengths + header is a multiple of 64,
     * which keeps the data aligned for memory-mapping readers (numpy does the same). */
    size_t total_hdr = ((size_t)k + 1 + 10 + 63) / 64 * 64;
    size_t hlen = total_hdr - 10, len = total_hdr + (size_t)bytes;
    uint8_t *buf = malloc(len);
    if (!buf) return fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", path);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (uint8_t)(hlen & 0xFF);
    buf[9] = (uint8_t)(hlen >> 8);
    memcpy(buf + 10, hdr, (size_t)k);
    memset(buf + 10 + k, ' ', hlen - (size_t)k - 1);
    buf[total_hdr - 1] = '\n';
    if (bytes) memcpy(buf + total_hdr, data, (size_t)bytes);
    fl_status st = fl_file_write_atomic(path, buf, len, e);
    free(buf);
    return st;
}

fl_status fl_npy_write_tensor(const char *path, const fl_tensor *t, fl_err *e) {
    return fl_npy_write(path, FL_DT_F32, t->ndim, t->shape, t->data, e);
}

/* ---- NPY datasets ------------------------------------------------------------------------ */
/* X: float32 or uint8, [n,c,h,w] or [n,h,w]; Y: integer [n]. */
fl_status fl__load_npy(const char *xpath, const char *ypath, const fl_scale *s, int scale_given,
                       int64_t limit, fl_dataset **out, fl_err *e) {
    fl_npy x, y;
    fl_dataset *d = NULL;
    memset(&y, 0, sizeof y);
    *out = NULL;
    fl_status st = fl_npy_read(xpath, &x, e);
    if (st != FL_OK) return st;
    if (ypath && (st = fl_npy_read(ypath, &y, e)) != FL_OK) goto done;
    if (x.dtype != FL_DT_F32 && x.dtype != FL_DT_U8) {
        st = fl_fail(e, FL_ERR_UNSUPPORTED, "%s: images must be float32 or uint8, not %s", xpath,
                     fl_dtype_name(x.dtype));
        goto done;
    }
    if (x.ndim != 3 && x.ndim != 4) {
        st = fl_fail(e, FL_ERR_SHAPE, "%s: images must be [n,c,h,w] or [n,h,w], got %d "
                     "dimensions", xpath, x.ndim);
        goto done;
    }
    int64_t n = x.shape[0], c = x.ndim == 4 ? x.shape[1] : 1;
    int64_t h = x.shape[x.ndim - 2], w = x.shape[x.ndim - 1];
    if (c < 1 || h < 1 || w < 1 || c > FL_DATA_MAX_DIM || h > FL_DATA_MAX_DIM ||
        w > FL_DATA_MAX_DIM) {
        st = fl_fail(e, FL_ERR_SHAPE, "%s: bad image shape %lldx%lldx%lld", xpath, (long long)c,
                     (long long)h, (long long)w);
        goto done;
    }
    if (ypath) {
        if (y.ndim != 1 || y.shape[0] != n || y.dtype == FL_DT_F32) {
            st = fl_fail(e, FL_ERR_SHAPE, "%s: labels must be an integer array [%lld] to match "
                         "%s, got %s with %d dimensions", ypath, (long long)n, xpath,
                         fl_dtype_name(y.dtype), y.ndim);
            goto done;
        }
    }
    if ((st = fl__scale_check(s, (int)c, xpath, e)) != FL_OK) goto done;
    if (limit > 0 && limit < n) n = limit;
    int64_t hw = h * w;
    if (x.dtype == FL_DT_U8) {
        /* The array is already the [n,c,h,w] 8-bit storage: adopt it (dropping a limited-off
         * tail). fl_npy_read's buffer comes from fl_alloc, which free() releases. */
        uint8_t *px = x.data;
        x.data = NULL;
        st = fl__dataset_adopt_u8(x.shape[0], n, (int)c, (int)h, (int)w, s, &px, &d, e);
        if (st != FL_OK) goto done;
    } else {
        if ((st = fl_dataset_new(n, (int)c, (int)h, (int)w, &d, e)) != FL_OK) goto done;
        if (n) memcpy(d->x, x.data, (size_t)(n * c * hw) * sizeof(float));
        int64_t bad = -1;
        for (int64_t i = 0; i < n * c * hw && bad < 0; i++)
            if (!isfinite(d->x[i])) bad = i;
        if (bad >= 0) {
            st = fl_fail(e, FL_ERR_NAN, "%s: element %lld is not finite", xpath, (long long)bad);
            goto done;
        }
        if (scale_given) fl__scale_f32(s, d->x, n, (int)c, hw);
    }
    for (int64_t i = 0; ypath && i < n; i++) {
        int64_t v = y.dtype == FL_DT_U8    ? ((const uint8_t *)y.data)[i]
                    : y.dtype == FL_DT_I32 ? ((const int32_t *)y.data)[i]
                                           : ((const int64_t *)y.data)[i];
        if (v < -1 || v >= 65536) {
            st = fl_fail(e, FL_ERR_FORMAT, "%s: label %lld of sample %lld is out of range "
                         "(expected -1 or 0..65535)", ypath, (long long)v, (long long)i);
            goto done;
        }
        d->y[i] = (int32_t)v;
    }
    if ((st = fl__finish_load(d, ypath ? ypath : xpath, "npy", xpath, ypath, e)) != FL_OK)
        goto done;
    *out = d;
    d = NULL;
done:
    fl_dataset_free(d);
    fl_npy_free(&x);
    fl_npy_free(&y);
    return st;
}
