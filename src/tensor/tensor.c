/* Tensor bookkeeping: shapes, aligned allocation, copies. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/simd.h"
#include "flare/tensor.h"

void *fl_alloc(size_t bytes) {
    size_t rounded = (bytes + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, rounded ? rounded : 64);
    if (p) memset(p, 0, rounded ? rounded : 64);
    return p;
}

void fl_free(void *p) { free(p); }

int64_t fl_shape_size(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

void fl_tensor_set_shape(fl_tensor *t, int ndim, const int64_t *shape) {
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    for (int i = ndim; i < FL_MAX_DIMS; i++) t->shape[i] = 0;
    t->size = fl_shape_size(ndim, shape);
}

fl_status fl_tensor_alloc(fl_tensor *t, int ndim, const int64_t *shape) {
    if (ndim < 0 || ndim > FL_MAX_DIMS) return FL_ERR_SHAPE;
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0) return FL_ERR_SHAPE;
    fl_tensor_set_shape(t, ndim, shape);
    t->data = fl_alloc((size_t)t->size * sizeof(float));
    return t->data ? FL_OK : FL_ERR_NOMEM;
}

fl_status fl_tensor_copy(fl_tensor *t, const fl_tensor *src) {
    fl_status st = fl_tensor_alloc(t, src->ndim, src->shape);
    if (st == FL_OK && src->size) memcpy(t->data, src->data, (size_t)src->size * sizeof(float));
    return st;
}

void fl_tensor_free(fl_tensor *t) {
    if (!t) return;
    fl_free(t->data);
    t->data = NULL;
}

int fl_tensor_same_shape(const fl_tensor *a, const fl_tensor *b) {
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    return 1;
}

const char *fl_shape_str(const fl_tensor *t, char *buf, size_t n) {
    size_t k = 0;
    k += (size_t)snprintf(buf + k, n - k, "[");
    for (int i = 0; i < t->ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)t->shape[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}

/* Eight values at a time: x - x is 0 for a finite x and NaN for an infinite or NaN one, and
 * only NaN differs from itself. Every input of every forward pass goes through this. */
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

FL_HOT_CLONES
int64_t fl_tensor_find_nonfinite(const fl_tensor *t) {
    int64_t i = 0;
    for (; i + 8 <= t->size; i += 8) {
        v8f x;
        memcpy(&x, t->data + i, sizeof x);
        v8f d = x - x;
        v8i bad = d != d;
        uint64_t any[4];
        memcpy(any, &bad, sizeof any);
        if (any[0] | any[1] | any[2] | any[3]) break;
    }
    for (; i < t->size; i++)
        if (!isfinite(t->data[i])) return i;
    return -1;
}
