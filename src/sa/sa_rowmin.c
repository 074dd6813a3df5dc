/* The row minimum both nearest-neighbour searches run over every GEMM block (sa_nn.c for DSA,
 * sa_lsa.c for LSA): the squared distances of one input to a block of training traces are
 * row[j] + xn[j] + c (row = -2 q.x from the GEMM, xn the traces' squared norms, c the
 * input's), and the block is skipped or sorted by their minimum. */
#include <math.h>
#include <string.h>

#include "core/simd.h"
#include "sa/sa_int.h"

FL_HOT_CLONES
float fl__sa_row_min(const float *row, const float *xn, float c, int nb, float *out) {
    fl__v8f m = {INFINITY, INFINITY, INFINITY, INFINITY, INFINITY, INFINITY, INFINITY, INFINITY};
    int j = 0;
    for (; j + 8 <= nb; j += 8) {
        fl__v8f v, x;
        memcpy(&v, row + j, sizeof v);
        memcpy(&x, xn + j, sizeof x);
        v = v + x + c;
        if (out) memcpy(out + j, &v, sizeof v);
        fl__v8i lt = v < m;
        m = (fl__v8f)(((fl__v8i)v & lt) | ((fl__v8i)m & ~lt));
    }
    float r = INFINITY;
    for (int l = 0; l < 8; l++) r = m[l] < r ? m[l] : r;
    for (; j < nb; j++) {
        float v = row[j] + xn[j] + c;
        if (out) out[j] = v;
        r = v < r ? v : r;
    }
    return r;
}
