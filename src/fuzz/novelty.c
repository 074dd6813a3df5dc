/* TensorFuzz's novelty: a mutant is new when its nearest neighbour among the corpus' vectors
 * (logits or a chosen layer) is farther than a threshold (Odena et al., ICML 2019, used an
 * approximate nearest-neighbour index, FLANN).
 *
 * flare searches exactly: ||a - b||^2 = ||a||^2 + ||b||^2 - 2 a.b, with the dot products of a
 * batch of rows against a block of corpus vectors from one sgemm, so a batch of 64 against
 * 10^5 corpus vectors of 10 values is 64 x 10^5 x 10 multiply-adds (bench_fuzz measures it).
 * The expansion loses precision only for nearly equal vectors far from the origin; the
 * threshold is far above that (the result is clamped at 0).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_int.h"

enum { BLOCK = 4096 };

fl_status fz_novelty_nearest(fz_novelty *nv, const float *x, int rows, double *dist, fl_err *e) {
    for (int i = 0; i < rows; i++) dist[i] = INFINITY;
    if (!nv->n || !rows) return FL_OK;
    int64_t need = (int64_t)rows * BLOCK;
    if (need > nv->dots_cap) {
        fl_free(nv->dots);
        if (!(nv->dots = fl_alloc(sizeof(float) * (size_t)need)))
            return fl_fail(e, FL_ERR_NOMEM, "out of memory (novelty search)");
        nv->dots_cap = need;
    }
    const int d = nv->d;
    for (int64_t b0 = 0; b0 < nv->n; b0 += BLOCK) {
        int nb = (int)(nv->n - b0 < BLOCK ? nv->n - b0 : BLOCK);
        /* dots[rows, nb] = x[rows, d] . v[b0 .. b0+nb, d]^T */
        fl_sgemm(0, 1, rows, nb, d, 1.0f, x, d, nv->v + b0 * d, d, 0.0f, nv->dots, nb);
        for (int i = 0; i < rows; i++) {
            double xs = 0;
            for (int j = 0; j < d; j++) xs += (double)x[(int64_t)i * d + j] * x[(int64_t)i * d + j];
            const float *dr = nv->dots + (int64_t)i * nb;
            double best = dist[i] * dist[i];
            for (int k = 0; k < nb; k++) {
                double d2 = xs + nv->sq[b0 + k] - 2.0 * dr[k];
                if (d2 < best) best = d2;
            }
            dist[i] = sqrt(best > 0 ? best : 0);
        }
    }
    return FL_OK;
}

fl_status fz_novelty_add(fz_novelty *nv, const float *x, fl_err *e) {
    if (nv->n == nv->cap) {
        int64_t c = nv->cap ? nv->cap * 2 : 1024;
        float *v = fl_alloc(sizeof(float) * (size_t)(c * nv->d));
        double *sq = realloc(nv->sq, sizeof(double) * (size_t)c);
        if (!v || !sq) {
            fl_free(v);
            if (sq) nv->sq = sq;
            return fl_fail(e, FL_ERR_NOMEM, "out of memory (novelty corpus of %lld)",
                           (long long)nv->n);
        }
        if (nv->n) memcpy(v, nv->v, sizeof(float) * (size_t)(nv->n * nv->d));
        fl_free(nv->v);
        nv->v = v;
        nv->sq = sq;
        nv->cap = c;
    }
    double s = 0;
    for (int j = 0; j < nv->d; j++) s += (double)x[j] * x[j];
    memcpy(nv->v + nv->n * nv->d, x, sizeof(float) * (size_t)nv->d);
    nv->sq[nv->n++] = s;
    return FL_OK;
}

void fz_novelty_free(fz_novelty *nv) {
    fl_free(nv->v);
    free(nv->sq);
    fl_free(nv->dots);
    memset(nv, 0, sizeof *nv);
}
