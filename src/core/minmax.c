/* Min and max of a float array: the range coverage needs of every layer of every input.
 *
 * Why not a GCC vector loop like the others: without -ffinite-math-only GCC keeps `x < m ? x
 * : m` as a compare and a blend (two instructions, the blend the slow one), which made this
 * the costliest part of reading a batch's neuron values. The AVX2 version uses the min/max
 * instructions themselves; the portable one is the plain loop. Min and max are exact, so both
 * give the same result (for the finite values coverage accepts). */
#include "core/simd.h"

#include <stdatomic.h>

static _Atomic int portable;

void fl__simd_portable(int on) { portable = on; }

static void minmax_c(const float *x, int64_t n, float *mn, float *mx) {
    float lo = x[0], hi = x[0];
    for (int64_t i = 1; i < n; i++) {
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
    }
    *mn = lo, *mx = hi;
}

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>

__attribute__((target("avx2"))) static void minmax_avx2(const float *x, int64_t n, float *mn,
                                                         float *mx) {
    if (n < 16) {
        minmax_c(x, n, mn, mx);
        return;
    }
    /* two accumulators each: a min waits on the previous one's latency */
    __m256 lo0 = _mm256_loadu_ps(x), hi0 = lo0, lo1 = _mm256_loadu_ps(x + 8), hi1 = lo1;
    int64_t i = 16;
    for (; i + 16 <= n; i += 16) {
        __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
        lo0 = _mm256_min_ps(lo0, a), hi0 = _mm256_max_ps(hi0, a);
        lo1 = _mm256_min_ps(lo1, b), hi1 = _mm256_max_ps(hi1, b);
    }
    float l[8], h[8];
    _mm256_storeu_ps(l, _mm256_min_ps(lo0, lo1));
    _mm256_storeu_ps(h, _mm256_max_ps(hi0, hi1));
    float lo = l[0], hi = h[0];
    for (int k = 1; k < 8; k++) {
        lo = l[k] < lo ? l[k] : lo;
        hi = h[k] > hi ? h[k] : hi;
    }
    for (; i < n; i++) {
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
    }
    *mn = lo, *mx = hi;
}

int fl__avx2(void) { return !portable && __builtin_cpu_supports("avx2"); }

void fl__minmax(const float *x, int64_t n, float *mn, float *mx) {
    (fl__avx2() ? minmax_avx2 : minmax_c)(x, n, mn, mx);
}
#else
int fl__avx2(void) { return 0; }
void fl__minmax(const float *x, int64_t n, float *mn, float *mx) { minmax_c(x, n, mn, mx); }
#endif
