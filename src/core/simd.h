/* Internal: hot loops are compiled twice by GCC on x86-64 (AVX2 and the baseline) and the
 * right one is picked when the library loads (an ifunc), so one binary is fast on new CPUs and
 * still runs on old ones. Other compilers (clang builds the fuzz harnesses) get the baseline. */
#ifndef FLARE_CORE_SIMD_H
#define FLARE_CORE_SIMD_H

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define FL_HOT_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define FL_HOT_CLONES
#endif

#include <stdint.h>

/* Whether the hand-written AVX2 kernels (picked at run time, not by clones) may run: the CPU
 * has AVX2 and fl__simd_portable(1) has not been called. Tests call it to run the portable
 * kernels on a machine that would never pick them (src/core/minmax.c). */
int fl__avx2(void);
void fl__simd_portable(int on);

/* *mn, *mx = min and max of x[0..n), n >= 1 (src/core/minmax.c). */
void fl__minmax(const float *x, int64_t n, float *mn, float *mx);

#endif
