/* index.h — an open-addressing index from 64-bit hashes to the positions of records the caller
 * keeps in its own array: the one hash table behind the campaign's signature set, the nn
 * fuzzer's findings and the key-space coverage criteria (TKNP's patterns).
 *
 *     fl_index ix = {0};
 *     if (!fl_index_reserve(&ix, n + 1)) ...;                 // out of memory
 *     int64_t at, i = fl_index_find(&ix, h, same, ctx, &at);  // same(ctx, i): record i is it
 *     if (i < 0) fl_index_put(&ix, at, h, n++);               // not there: record n is
 *     fl_index_free(&ix);
 *
 * Linear probing in a power-of-two table kept at most half full; a hash of 0 is stored as 1
 * (0 marks an empty slot). Not thread-safe. */
#ifndef FLARE_INDEX_H
#define FLARE_INDEX_H

#include <stdint.h>

typedef struct fl_index {
    uint64_t *hash;   /* [cap]; 0: empty */
    int64_t *val;     /* [cap] the record's position */
    int64_t cap, n;
} fl_index;

/* Room for n entries (growing and rehashing as needed). 0 when out of memory (unchanged). */
int fl_index_reserve(fl_index *ix, int64_t n);
void fl_index_free(fl_index *ix);
/* Empty it, keeping its room. */
void fl_index_clear(fl_index *ix);
/* dst = a copy of src (dst's old contents dropped). 0 when out of memory (dst unchanged). */
int fl_index_copy(fl_index *dst, const fl_index *src);

/* The position stored under hash h whose record same(ctx, pos) accepts, or -1; *at is then
 * the empty slot where h goes (valid until the next reserve; reserve room first, so that
 * there is one). An index never reserved finds nothing and sets *at to -1. */
static inline int64_t fl_index_find(const fl_index *ix, uint64_t h,
                                    int (*same)(const void *ctx, int64_t pos), const void *ctx,
                                    int64_t *at) {
    *at = -1;
    if (!ix->cap) return -1;
    h = h ? h : 1;
    int64_t mask = ix->cap - 1, p = (int64_t)(h & (uint64_t)mask);
    for (; ix->hash[p]; p = (p + 1) & mask)
        if (ix->hash[p] == h && same(ctx, ix->val[p])) return ix->val[p];
    *at = p;
    return -1;
}

/* Store pos under h at the slot fl_index_find gave. */
static inline void fl_index_put(fl_index *ix, int64_t at, uint64_t h, int64_t pos) {
    ix->hash[at] = h ? h : 1;
    ix->val[at] = pos;
    ix->n++;
}

#endif
