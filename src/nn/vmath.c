/* Vectorised sigmoid. glibc's expf is a function call per element, and the compiler only swaps
 * in libmvec's vector expf under -ffast-math, which flare does not build with: EfficientNet's
 * 65 Sigmoids (SiLU and squeeze-excitation) took a fifth of its inference time. This is
 * Cephes' expf (exp(x) = 2^n exp(r), |r| <= ln2/2, a degree-6 polynomial for exp(r)) on eight
 * lanes, in GCC's vector extensions so that the AVX2 clone uses 256-bit registers. The tail
 * runs through the same lanes, padded, so every element gets the same arithmetic. */
#include <string.h>

#include "core/simd.h"
#include "nn/vmath.h"

typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

/* Lane-wise m ? a : b for a comparison mask m (C has no vector ?:); GCC casts between vector
 * types of one size reinterpret the bits. */
#define SELECT8(m, a, b) ((v8f)(((m) & (v8i)(a)) | (~(m) & (v8i)(b))))

/* y[0..8) = sigmoid(x[0..8)) (through memory: vectors as arguments would change the ABI
 * between the clones) */
static inline __attribute__((always_inline)) void sigmoid8(const float *x, float *y) {
    const v8f hi = (v8f){0} + 88.3762626647949f, lo = -hi;
    v8f v;
    memcpy(&v, x, sizeof v);
    v = -v; /* exp(-x) */
    /* beyond +-88.37 expf over/underflows; clamping keeps 2^n a normal float (sigmoid of the
     * clamped value is 0 or 1 to float precision, as with expf); a NaN lane compares false
     * in both and stays NaN */
    v = SELECT8(v > hi, hi, v);
    v = SELECT8(v < lo, lo, v);
    v8f fx = v * 1.44269504088896341f + 0.5f;
    v8f t = __builtin_convertvector(__builtin_convertvector(fx, v8i), v8f);
    fx = SELECT8(t > fx, t - 1.0f, t); /* floor */
    v8f r = v - fx * 0.693359375f + fx * 2.12194440e-4f;
    v8f p = (v8f){0} + 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    v8i e = (__builtin_convertvector(fx, v8i) + 127) << 23;
    v = 1.0f / (1.0f + p * (v8f)e);
    memcpy(y, &v, sizeof v);
}

FL_HOT_CLONES
void fl_vec_sigmoid(const float *x, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) sigmoid8(x + i, y + i);
    if (i < n) {
        float a[8] = {0}, b[8];
        memcpy(a, x + i, sizeof(float) * (size_t)(n - i));
        sigmoid8(a, b);
        memcpy(y + i, b, sizeof(float) * (size_t)(n - i));
    }
}
