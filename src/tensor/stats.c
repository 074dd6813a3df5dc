/* Per-channel statistics (fl_chan_stat_of): what coverage reads of a convolutional layer.
 *
 * Eight float lanes, lane k taking the elements i with i % 8 == k, folded in a fixed order
 * (lane k + lane k+4 in float, then those four in double), so the result does not depend on
 * where it is computed nor on the target clone: SSE2 (two registers) and AVX2 (one) add the
 * same numbers in the same order. Min and max ride in the same pass (a compare and a blend
 * each): most channels are short (64 or 16 values in LeNet-5's second half), and a second
 * pass or call per channel cost more than the blends. */
#include <string.h>

#include "core/simd.h"
#include "flare/tensor.h"

typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
#define VSEL(m, a, b) ((v8f)(((m) & (v8i)(a)) | (~(m) & (v8i)(b))))

static inline double fold(v8f a) {
    double s = 0;
    for (int k = 0; k < 4; k++) s += (double)(a[k] + a[k + 4]);
    return s;
}

/* Two sets of accumulators (lane k of set q takes the elements i with i % 16 == 8 q + k, a
 * last block of eight goes to set 0): each add or blend waits on the one before it in its
 * set, so one set ran at the adder's latency, not its throughput. */
#define STEP(q, p)                                                         \
    do {                                                                   \
        v8f u;                                                             \
        memcpy(&u, (p), sizeof u);                                         \
        sum[q] += u;                                                       \
        pos[q] += (v8f)((v8i)u & (u > 0)); /* max(u, 0): u or +0 */         \
        lo[q] = VSEL(u < lo[q], u, lo[q]);                                 \
        hi[q] = VSEL(u > hi[q], u, hi[q]);                                 \
    } while (0)

FL_HOT_CLONES
void fl_chan_stat_of(const float *x, int64_t n, fl_chan_stat *s) {
    v8f sum[2] = {{0}}, pos[2] = {{0}}, lo[2] = {{0}}, hi[2] = {{0}};
    for (int q = 0; q < 2; q++) lo[q] += x[0], hi[q] += x[0];
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        STEP(0, x + i);
        STEP(1, x + i + 8);
    }
    if (i + 8 <= n) {
        STEP(0, x + i);
        i += 8;
    }
    s->sum = fold(sum[0] + sum[1]), s->pos = fold(pos[0] + pos[1]);
    v8f l = VSEL(lo[1] < lo[0], lo[1], lo[0]), h = VSEL(hi[1] > hi[0], hi[1], hi[0]);
    s->min = l[0], s->max = h[0];
    for (int k = 1; k < 8; k++) {
        s->min = l[k] < s->min ? l[k] : s->min;
        s->max = h[k] > s->max ? h[k] : s->max;
    }
    for (; i < n; i++) {
        s->sum += x[i], s->pos += x[i] > 0 ? x[i] : 0;
        s->min = x[i] < s->min ? x[i] : s->min;
        s->max = x[i] > s->max ? x[i] : s->max;
    }
}
