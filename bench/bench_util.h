/* bench_util.h — the statistics the agents benchmarks report (included by each bench_*.c,
 * one source file per binary): the median of per-seed counts. */
#ifndef FLARE_BENCH_UTIL_H
#define FLARE_BENCH_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_SEEDS = 64 };

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The median of v[0..n), 0 < n <= MAX_SEEDS. */
static double median(const uint64_t *v, int n) {
    uint64_t s[MAX_SEEDS];
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_u64);
    return n % 2 ? (double)s[n / 2] : 0.5 * (double)(s[n / 2 - 1] + s[n / 2]);
}

#endif
