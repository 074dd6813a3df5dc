/* Internal: vectorised element-wise math for the activations (vmath.c). */
#ifndef FLARE_NN_VMATH_H
#define FLARE_NN_VMATH_H

#include <stdint.h>

/* y[i] = 1 / (1 + exp(-x[i])) for i < n, within 2 ulp of expf's; NaN stays NaN. x and y may be
 * the same array. */
void fl_vec_sigmoid(const float *x, float *y, int64_t n);

#endif
