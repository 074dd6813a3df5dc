/* Per-channel bias of the convolutions: added over [N, C, P] in the forward pass, summed in
 * the backward pass (op_conv.c, op_convt.c, conv_small.c, conv_lower.c). */
#include "nn/op_conv.h"

void fl_bias_add(float *y, const float *b, int64_t n, int64_t c, int64_t p) {
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < c; j++) {
            float *row = y + (i * c + j) * p, bj = b[j];
            for (int64_t k = 0; k < p; k++) row[k] += bj;
        }
}

/* Eight running sums per row let the compiler vectorise the reduction without reordering
 * anything it was not told to (the result is the same for every run). */
void fl_bias_grad(float *db, const float *dy, int64_t n, int64_t c, int64_t p) {
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < c; j++) {
            const float *row = dy + (i * c + j) * p;
            float lane[8] = {0};
            int64_t k = 0;
            for (; k + 8 <= p; k += 8)
                for (int l = 0; l < 8; l++) lane[l] += row[k + l];
            for (; k < p; k++) lane[0] += row[k];
            db[j] += ((lane[0] + lane[1]) + (lane[2] + lane[3])) +
                     ((lane[4] + lane[5]) + (lane[6] + lane[7]));
        }
}
