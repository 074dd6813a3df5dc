/* The open-addressing index of include/flare/index.h: growing it (the probing is inline). */
#include <stdlib.h>
#include <string.h>

#include "flare/index.h"

int fl_index_reserve(fl_index *ix, int64_t n) {
    if (2 * n <= ix->cap) return 1;
    int64_t cap = ix->cap ? ix->cap : 64;
    while (cap < 2 * n) cap *= 2;
    uint64_t *h = calloc((size_t)cap, sizeof *h);
    int64_t *v = malloc((size_t)cap * sizeof *v);
    if (!h || !v) {
        free(h), free(v);
        return 0;
    }
    for (int64_t i = 0; i < ix->cap; i++) {
        if (!ix->hash[i]) continue;
        int64_t p = (int64_t)(ix->hash[i] & (uint64_t)(cap - 1));
        while (h[p]) p = (p + 1) & (cap - 1);
        h[p] = ix->hash[i], v[p] = ix->val[i];
    }
    free(ix->hash), free(ix->val);
    ix->hash = h, ix->val = v, ix->cap = cap;
    return 1;
}

void fl_index_free(fl_index *ix) {
    free(ix->hash), free(ix->val);
    *ix = (fl_index){0};
}

void fl_index_clear(fl_index *ix) {
    if (ix->cap) memset(ix->hash, 0, (size_t)ix->cap * sizeof *ix->hash);
    ix->n = 0;
}

int fl_index_copy(fl_index *dst, const fl_index *src) {
    if (dst == src) return 1;
    if (dst->cap != src->cap) {
        uint64_t *h = malloc((size_t)(src->cap ? src->cap : 1) * sizeof *h);
        int64_t *v = malloc((size_t)(src->cap ? src->cap : 1) * sizeof *v);
        if (!h || !v) {
            free(h), free(v);
            return 0;
        }
        free(dst->hash), free(dst->val);
        dst->hash = h, dst->val = v, dst->cap = src->cap;
    }
    if (src->cap) {
        memcpy(dst->hash, src->hash, (size_t)src->cap * sizeof *src->hash);
        memcpy(dst->val, src->val, (size_t)src->cap * sizeof *src->val);
    }
    dst->n = src->n;
    return 1;
}
