/* ONNX TensorProto <-> fl_tensor, the serialized-tensor files of the conformance suite, and the
 * arena the exporter builds its messages in.
 *
 * Data may sit in the typed repeated fields (float_data, int32_data, int64_data) or in
 * raw_data as fixed-width little-endian values. Either way the number of values must match
 * the product of the dims exactly: that check is what keeps a corrupted file from making us
 * read past its end or allocate a huge tensor (the allocation is bounded by the file's size).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_int.h"

const char *fl_onnx_dtype_name(int dtype) {
    static const char *const names[] = {"undefined", "float",  "uint8",     "int8",     "uint16",
                                        "int16",     "int32",  "int64",     "string",   "bool",
                                        "float16",   "double", "uint32",    "uint64",   "complex64",
                                        "complex128", "bfloat16"};
    static _Thread_local char buf[32];
    if (dtype >= 0 && dtype < (int)(sizeof names / sizeof names[0])) return names[dtype];
    snprintf(buf, sizeof buf, "type %d", dtype);
    return buf;
}

/* The element types flare reads and writes: byte width of one value and, for integer types,
 * the range an encoded value is clamped to. bool, int8, uint8, int16 and uint16 sit in
 * int32_data when not in raw_data. */
static const struct { int dt; size_t size; double lo, hi; } types[] = {
    {FL_ONNX_FLOAT, 4, 0, 0},
    {FL_ONNX_INT32, 4, -2147483648.0, 2147483647.0},
    {FL_ONNX_INT64, 8, -9.2233720368547758e18, 9.2233720368547758e18},
    {FL_ONNX_BOOL, 1, 0, 1},
    {FL_ONNX_INT8, 1, -128, 127},
    {FL_ONNX_UINT8, 1, 0, 255},
    {FL_ONNX_INT16, 2, -32768, 32767},
    {FL_ONNX_UINT16, 2, 0, 65535},
};

static int type_index(int dt) {
    for (int k = 0; k < (int)(sizeof types / sizeof types[0]); k++)
        if (types[k].dt == dt) return k;
    return -1;
}

int fl_onnx_dtype_supported(int dt) { return type_index(dt) >= 0; }

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t le64(const uint8_t *p) { return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32; }

/* protobuf-c allocates every bytes field (raw_data) with the allocator given to unpack: with
 * this one each block is 64-byte aligned and padded to a multiple of 64 bytes, zeroed past its
 * end, exactly as fl_alloc's, so that a float raw_data can become a tensor's buffer as it is
 * (fl_onnx_tensor_take) and be released with fl_free. */
static void *pb_alloc(void *unused, size_t n) {
    (void)unused;
    size_t r = (n + 63) & ~(size_t)63;
    uint8_t *p = aligned_alloc(64, r ? r : 64);
    if (p && r > n) memset(p + n, 0, r - n);
    return p;
}

static void pb_free(void *unused, void *p) {
    (void)unused;
    free(p);
}

ProtobufCAllocator fl_onnx_allocator = {pb_alloc, pb_free, NULL};

static int little_endian(void) { return __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__; }

static fl_status decode(Onnx__TensorProto *steal, const Onnx__TensorProto *tp, fl_tensor *t,
                        int *dtype, const char *what, fl_err *e);

fl_status fl_onnx_tensor_decode(const Onnx__TensorProto *tp, fl_tensor *t, int *dtype,
                                const char *what, fl_err *e) {
    return decode(NULL, tp, t, dtype, what, e);
}

fl_status fl_onnx_tensor_take(Onnx__TensorProto *tp, fl_tensor *t, int *dtype, const char *what,
                              fl_err *e) {
    return decode(tp, tp, t, dtype, what, e);
}

/* steal: tp itself, when its float raw_data may become t's buffer (see fl_onnx_allocator) */
static fl_status decode(Onnx__TensorProto *steal, const Onnx__TensorProto *tp, fl_tensor *t,
                        int *dtype, const char *what, fl_err *e) {
    memset(t, 0, sizeof *t);
    int dt = tp->has_data_type ? tp->data_type : 0;
    if (dtype) *dtype = dt;
    if (tp->n_external_data > 0 ||
        (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL))
        return fl_fail(e, FL_ERR_UNSUPPORTED,
                       "%s: external data is not supported (save the model with its data inside)",
                       what);
    if (tp->segment) return fl_fail(e, FL_ERR_UNSUPPORTED, "%s: segmented tensors are not supported", what);
    if (type_index(dt) < 0)
        return fl_fail(e, FL_ERR_UNSUPPORTED,
                       "%s: data type %s is not supported (float, bool and the integers up to "
                       "int64 except uint32 and uint64 are)", what, fl_onnx_dtype_name(dt));
    if (tp->n_dims > FL_MAX_DIMS)
        return fl_fail(e, FL_ERR_UNSUPPORTED, "%s: %zu dimensions (at most %d supported)", what,
                       tp->n_dims, FL_MAX_DIMS);
    int64_t count = 1;
    for (size_t i = 0; i < tp->n_dims; i++) {
        int64_t d = tp->dims[i];
        if (d < 0) return fl_fail(e, FL_ERR_FORMAT, "%s: negative dimension %lld", what, (long long)d);
        if (d > 0 && count > ((int64_t)1 << 40) / d)
            return fl_fail(e, FL_ERR_FORMAT, "%s: dimensions overflow", what);
        count *= d;
    }
    size_t esz = types[type_index(dt)].size;
    size_t have;
    const char *field;
    if (tp->has_raw_data && tp->raw_data.len > 0) {
        if (tp->raw_data.len % esz != 0)
            return fl_fail(e, FL_ERR_FORMAT, "%s: raw_data of %zu bytes is not a whole number of %s values",
                           what, tp->raw_data.len, fl_onnx_dtype_name(dt));
        have = tp->raw_data.len / esz;
        field = "raw_data";
    } else if (dt == FL_ONNX_FLOAT) {
        have = tp->n_float_data;
        field = "float_data";
    } else if (dt != FL_ONNX_INT64) {
        have = tp->n_int32_data;
        field = "int32_data";
    } else {
        have = tp->n_int64_data;
        field = "int64_data";
    }
    if ((int64_t)have != count)
        return fl_fail(e, FL_ERR_FORMAT, "%s: %s holds %zu values but its dims need %lld", what,
                       field, have, (long long)count);
    int64_t shape[FL_MAX_DIMS];
    for (size_t i = 0; i < tp->n_dims; i++) shape[i] = tp->dims[i];
    int raw = tp->has_raw_data && tp->raw_data.len > 0;
    if (steal && raw && dt == FL_ONNX_FLOAT && little_endian()) {
        /* the weights of a model: no copy at all (the bytes are the floats) */
        fl_tensor_set_shape(t, (int)tp->n_dims, shape);
        t->data = (float *)steal->raw_data.data;
        steal->raw_data.data = NULL;
        steal->raw_data.len = 0;
        return FL_OK;
    }
    if (fl_tensor_alloc(t, (int)tp->n_dims, shape) != FL_OK)
        return fl_fail(e, FL_ERR_NOMEM, "%s: out of memory (%lld values)", what, (long long)count);
    float *y = t->data;
    if (raw && dt == FL_ONNX_FLOAT && little_endian()) {
        memcpy(y, tp->raw_data.data, (size_t)count * sizeof(float));
    } else if (raw) {
        const uint8_t *p = tp->raw_data.data;
        for (int64_t i = 0; i < count; i++) {
            const uint8_t *q = p + esz * (size_t)i;
            switch (dt) {
            case FL_ONNX_FLOAT: {
                uint32_t u = le32(q);
                memcpy(&y[i], &u, 4);
                break;
            }
            case FL_ONNX_INT32: y[i] = (float)(int32_t)le32(q); break;
            case FL_ONNX_INT64: y[i] = (float)(int64_t)le64(q); break;
            case FL_ONNX_BOOL: y[i] = q[0] != 0; break;
            case FL_ONNX_INT8: y[i] = (float)(int8_t)q[0]; break;
            case FL_ONNX_UINT8: y[i] = (float)q[0]; break;
            case FL_ONNX_INT16: y[i] = (float)(int16_t)(q[0] | q[1] << 8); break;
            default: y[i] = (float)(uint16_t)(q[0] | q[1] << 8); break;
            }
        }
    } else if (dt == FL_ONNX_FLOAT) {
        if (count) memcpy(y, tp->float_data, (size_t)count * sizeof(float));
    } else if (dt == FL_ONNX_BOOL) {
        for (int64_t i = 0; i < count; i++) y[i] = tp->int32_data[i] != 0;
    } else if (dt != FL_ONNX_INT64) {
        for (int64_t i = 0; i < count; i++) y[i] = (float)tp->int32_data[i];
    } else {
        for (int64_t i = 0; i < count; i++) y[i] = (float)tp->int64_data[i];
    }
    return FL_OK;
}

/* ---- encoding -------------------------------------------------------------------------------- */
void *fl_arena_alloc(fl_arena *a, size_t bytes) {
    if (a->n == a->cap) {
        int cap = a->cap ? 2 * a->cap : 256;
        void **p = realloc(a->p, (size_t)cap * sizeof *p);
        if (!p) {
            a->failed = 1;
            return NULL;
        }
        a->p = p;
        a->cap = cap;
    }
    void *q = calloc(1, bytes ? bytes : 1);
    if (!q) {
        a->failed = 1;
        return NULL;
    }
    return a->p[a->n++] = q;
}

char *fl_arena_strdup(fl_arena *a, const char *s) {
    size_t n = strlen(s) + 1;
    char *p = fl_arena_alloc(a, n);
    if (p) memcpy(p, s, n);
    return p;
}

void fl_arena_free(fl_arena *a) {
    for (int i = 0; i < a->n; i++) free(a->p[i]);
    free(a->p);
    memset(a, 0, sizeof *a);
}

/* Round and clamp to [lo, hi]; NaN becomes 0 (an integer tensor has no NaN to write). */
static int64_t to_int(float v, double lo, double hi) {
    if (isnan(v)) return 0;
    double d = nearbyint((double)v);
    if (d <= lo) return (int64_t)lo;
    if (d >= hi) return d >= 9.2233720368547758e18 ? INT64_MAX : (int64_t)hi;
    return (int64_t)d;
}

void fl_onnx_tensor_encode(fl_arena *a, Onnx__TensorProto *tp, const fl_tensor *t, int dtype,
                           const char *name) {
    if (type_index(dtype) < 0) dtype = FL_ONNX_FLOAT;
    tp->has_data_type = 1;
    tp->data_type = dtype;
    if (name) tp->name = fl_arena_strdup(a, name);
    tp->n_dims = (size_t)t->ndim;
    tp->dims = fl_arena_alloc(a, sizeof(int64_t) * (size_t)(t->ndim ? t->ndim : 1));
    if (!tp->dims) return;
    for (int i = 0; i < t->ndim; i++) tp->dims[i] = t->shape[i];
    int k = type_index(dtype);
    size_t esz = types[k].size;
    uint8_t *p = fl_arena_alloc(a, esz * (size_t)t->size);
    if (!p) return;
    for (int64_t i = 0; i < t->size; i++) {
        uint64_t u;
        if (dtype == FL_ONNX_FLOAT) {
            uint32_t w;
            memcpy(&w, &t->data[i], 4);
            u = w;
        } else if (dtype == FL_ONNX_BOOL) {
            u = t->data[i] != 0;
        } else {
            u = (uint64_t)to_int(t->data[i], types[k].lo, types[k].hi);
        }
        for (size_t b = 0; b < esz; b++) p[esz * (size_t)i + b] = (uint8_t)(u >> (8 * b));
    }
    tp->has_raw_data = 1;
    tp->raw_data.len = esz * (size_t)t->size;
    tp->raw_data.data = p;
}

/* ---- tensor files ------------------------------------------------------------------------------- */
fl_status fl_onnx_read_tensor(const char *path, fl_tensor *t, int *dtype, fl_err *e) {
    uint8_t *buf;
    size_t len;
    memset(t, 0, sizeof *t);
    fl_status st = fl_file_read(path, &buf, &len, e);
    if (st != FL_OK) return st;
    Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, len, buf);
    free(buf);
    if (!tp) return fl_fail(e, FL_ERR_FORMAT, "%s: not a serialized ONNX TensorProto (truncated or corrupted)", path);
    char what[300];
    snprintf(what, sizeof what, "%s: tensor '%s'", path, tp->name ? tp->name : "");
    st = fl_onnx_tensor_decode(tp, t, dtype, what, e);
    onnx__tensor_proto__free_unpacked(tp, NULL);
    return st;
}

fl_status fl_onnx_write_tensor(const char *path, const fl_tensor *t, int dtype, const char *name,
                               fl_err *e) {
    fl_arena a = {0};
    Onnx__TensorProto tp = ONNX__TENSOR_PROTO__INIT;
    fl_onnx_tensor_encode(&a, &tp, t, dtype, name ? name : "");
    fl_status st;
    if (a.failed) {
        st = fl_fail(e, FL_ERR_NOMEM, "%s: out of memory encoding the tensor", path);
    } else {
        size_t n = onnx__tensor_proto__get_packed_size(&tp);
        uint8_t *buf = malloc(n ? n : 1);
        if (!buf) {
            st = fl_fail(e, FL_ERR_NOMEM, "%s: out of memory encoding the tensor", path);
        } else {
            onnx__tensor_proto__pack(&tp, buf);
            st = fl_file_write_atomic(path, buf, n, e);
            free(buf);
        }
    }
    fl_arena_free(&a);
    return st;
}
