/* DSA: exact nearest neighbours by blocked GEMM distances.
 *
 * For a block of inputs Q and a block of training traces X, fl_sgemm gives -2 Q X^T, and
 * |q|^2 + |x|^2 - 2 q.x is each squared distance; the inputs stream over the training rows in
 * blocks, so memory stays at one block of distances however large both sets are.
 *
 * Exactness. In float, |a|^2 + |b|^2 - 2ab loses digits to cancellation when the distance is
 * small against the norms (an input close to a training trace: exactly the case DSA cares
 * about). Two measures make the result exact to double precision:
 *   - the rows are centred on the training mean first (distances unchanged, norms smaller);
 *   - the float distances only pick candidates: every training row whose float distance lies
 *     within a margin of the smallest one so far is kept (up to NN_CAND of them), and at the
 *     end their distances are recomputed exactly in double from the original traces. The
 *     margin is several times the rounding error bound of the float expression
 *     (8 (1 + sqrt(d)) FLT_EPSILON (|q|^2 + max |x|^2)), so the true nearest row is always
 *     among the candidates unless more than NN_CAND rows tie within it.
 * Ties are broken toward the lower training index (numpy's argmin on the class-filtered
 * array, as sadl does).
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/simd.h"
#include "sa/sa_int.h"

#define NN_MB 256  /* queries per block */
#define NN_NB 1024 /* training rows per block */
#define NN_CAND 8

typedef struct nn_row {
    float best, tau; /* smallest float distance so far; margin */
    int cnt;
    float v[NN_CAND];
    int64_t idx[NN_CAND];
} nn_row;

static void nn_insert(nn_row *r, float v, int64_t idx) {
    if (v < r->best) {
        r->best = v;
        int k = 0; /* drop candidates now outside the margin */
        for (int i = 0; i < r->cnt; i++)
            if (r->v[i] <= v + r->tau) r->v[k] = r->v[i], r->idx[k] = r->idx[i], k++;
        r->cnt = k;
    }
    if (r->cnt < NN_CAND) {
        r->v[r->cnt] = v;
        r->idx[r->cnt++] = idx;
        return;
    }
    int w = 0;
    for (int i = 1; i < NN_CAND; i++)
        if (r->v[i] > r->v[w]) w = i;
    if (v < r->v[w]) r->v[w] = v, r->idx[w] = idx;
}

/* For each of the m query rows q[m, d] (columns in use, uncentred), the nearest training row
 * among the row ranges rg[0..nrg) (pairs [lo, hi)), other than self[i] (self may be NULL): its
 * index (best; -1 when the ranges hold no other row) and exact distance (then +inf). */
typedef struct nn_job {
    const fl_sa *sa;
    const float *q;
    int64_t m;
    const int64_t (*rg)[2];
    int nrg, mb;
    const int64_t *self;
    int64_t *best;
    double *dist;
    float xnmax;
    uint8_t *failed; /* [slots] */
} nn_job;

/* Blocks b0..b1-1 of J->mb queries each: one thread's share. */
static void nn_range(void *ctx, int64_t b0, int64_t b1, int tid) {
    const nn_job *J = ctx;
    const fl_sa *sa = J->sa;
    const float *q = J->q;
    const int64_t (*rg)[2] = J->rg, *self = J->self;
    int64_t d = sa->d;
    int MB = J->mb;
    float *qc = fl_alloc(sizeof(float) * (size_t)(MB * d));
    float *buf = fl_alloc(sizeof(float) * (size_t)MB * NN_NB), *qn = malloc(sizeof(float) * (size_t)MB);
    nn_row *rows = malloc(sizeof(nn_row) * (size_t)MB);
    if (!qc || !buf || !qn || !rows) {
        J->failed[tid] = 1;
        goto out;
    }
    const double tol = 8.0 * (1.0 + sqrt((double)d)) * FLT_EPSILON;
    for (int64_t blk = b0; blk < b1; blk++) {
        int64_t q0 = blk * MB;
        int mb = (int)(J->m - q0 < MB ? J->m - q0 : MB);
        for (int i = 0; i < mb; i++) {
            for (int64_t j = 0; j < d; j++)
                qc[i * d + j] = (float)((double)q[(q0 + i) * d + j] - sa->gmean[j]);
            double n2 = fl__sa_sqnorm(qc + i * d, d);
            qn[i] = (float)n2;
            rows[i].best = INFINITY;
            rows[i].tau = (float)(tol * (n2 + J->xnmax));
            rows[i].cnt = 0;
        }
        for (int k = 0; k < J->nrg; k++)
            for (int64_t t0 = rg[k][0]; t0 < rg[k][1]; t0 += NN_NB) {
                int nb = (int)(rg[k][1] - t0 < NN_NB ? rg[k][1] - t0 : NN_NB);
                fl_sgemm(0, 1, mb, nb, (int)d, -2.0f, qc, (int)d, sa->xg + t0 * d, (int)d, 0.0f,
                         buf, nb);
                const float *xn = sa->xn + t0;
                for (int i = 0; i < mb; i++) {
                    float *row = buf + (int64_t)i * nb;
                    nn_row *r = rows + i;
                    int64_t me = self ? self[q0 + i] - t0 : -1;
                    if (me >= 0 && me < nb) row[me] = INFINITY; /* leave-one-out */
                    if (fl__sa_row_min(row, xn, 0, nb, NULL) + qn[i] > r->best + r->tau) continue;
                    for (int j = 0; j < nb; j++) {
                        float v = row[j] + xn[j] + qn[i];
                        if (v <= r->best + r->tau) nn_insert(r, v, t0 + j);
                    }
                }
            }
        /* Exact distances of the candidates, in double from the original traces. */
        for (int i = 0; i < mb; i++) {
            const float *x = q + (q0 + i) * d;
            double bd = INFINITY;
            int64_t bi = -1;
            for (int k = 0; k < rows[i].cnt; k++) {
                const float *t = sa->raw + rows[i].idx[k] * d;
                double s = 0;
                for (int64_t j = 0; j < d; j++) {
                    double u = (double)x[j] - t[j];
                    s += u * u;
                }
                if (s < bd || (s == bd && rows[i].idx[k] < bi)) bd = s, bi = rows[i].idx[k];
            }
            J->best[q0 + i] = bi;
            J->dist[q0 + i] = sqrt(bd);
        }
    }
out:
    fl_free(qc);
    fl_free(buf);
    free(qn);
    free(rows);
}

/* For each of the m query rows q[m, d] (columns in use, uncentred), the nearest training row
 * among the row ranges rg[0..nrg) (pairs [lo, hi)), other than self[i] (self may be NULL): its
 * index (best; -1 when the ranges hold no other row) and exact distance (then +inf). The
 * queries are split in blocks over the thread pool. */
static fl_status nn_search(const fl_sa *sa, const float *q, int64_t m, const int64_t (*rg)[2],
                           int nrg, const int64_t *self, int64_t *best, double *dist,
                           fl_err *e) {
    float xnmax = 0;
    for (int k = 0; k < nrg; k++)
        for (int64_t i = rg[k][0]; i < rg[k][1]; i++)
            if (sa->xn[i] > xnmax) xnmax = sa->xn[i];
    int slots = fl_parallel_slots(), mb = fl__sa_block(m, NN_MB);
    uint8_t *failed = calloc((size_t)slots, 1);
    if (!failed) return fl_fail(e, FL_ERR_NOMEM, "out of memory for nearest-neighbour blocks");
    nn_job J = {sa, q, m, rg, nrg, mb, self, best, dist, xnmax, failed};
    fl_parallel_for((m + mb - 1) / mb, nn_range, &J);
    int bad = 0;
    for (int t = 0; t < slots; t++) bad |= failed[t];
    free(failed);
    return bad ? fl_fail(e, FL_ERR_NOMEM, "out of memory for nearest-neighbour blocks") : FL_OK;
}

/* Row ranges of every class but c. */
static int other_ranges(const fl_sa *sa, int c, int64_t (*rg)[2]) {
    int n = 0;
    if (sa->start[c] > 0) rg[n][0] = 0, rg[n][1] = sa->start[c], n++;
    if (sa->start[c + 1] < sa->n) rg[n][0] = sa->start[c + 1], rg[n][1] = sa->n, n++;
    return n;
}

/* sa->nb for the k training rows idx[] (all of class c), computed in one blocked pass. */
static fl_status fill_nb(fl_sa *sa, int c, const int64_t *idx, int64_t k, fl_err *e) {
    if (k == 0) return FL_OK;
    int64_t d = sa->d, rg[2][2] = {{0, 0}, {0, 0}};
    int nrg = other_ranges(sa, c, rg);
    float *q = calloc((size_t)(k * d), sizeof(float));
    int64_t *bi = malloc(sizeof(int64_t) * (size_t)k);
    double *bd = malloc(sizeof(double) * (size_t)k);
    fl_status st = FL_OK;
    if (!q || !bi || !bd)
        st = fl_fail(e, FL_ERR_NOMEM, "out of memory for DSA reference distances");
    else {
        for (int64_t i = 0; i < k; i++)
            memcpy(q + i * d, sa->raw + idx[i] * d, sizeof(float) * (size_t)d);
        st = nn_search(sa, q, k, (const int64_t(*)[2])rg, nrg, NULL, bi, bd, e);
        for (int64_t i = 0; i < k && st == FL_OK; i++) sa->nb[idx[i]] = bd[i];
    }
    free(q);
    free(bi);
    free(bd);
    return st;
}

fl_status fl__sa_dsa_build(fl_sa *sa, fl_err *e) {
    int64_t n = sa->n, d = sa->d;
    sa->gmean = calloc((size_t)d, sizeof(double));
    sa->xg = fl_alloc(sizeof(float) * (size_t)(n * d));
    sa->xn = malloc(sizeof(float) * (size_t)n);
    sa->nb = malloc(sizeof(double) * (size_t)n);
    if (!sa->gmean || !sa->xg || !sa->xn || !sa->nb)
        return fl_fail(e, FL_ERR_NOMEM, "out of memory for %lld DSA training traces",
                       (long long)n);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < d; j++) sa->gmean[j] += sa->raw[i * d + j];
    for (int64_t j = 0; j < d; j++) sa->gmean[j] /= (double)n;
    for (int64_t i = 0; i < n; i++) {
        float *g = sa->xg + i * d;
        for (int64_t j = 0; j < d; j++) g[j] = (float)((double)sa->raw[i * d + j] - sa->gmean[j]);
        sa->xn[i] = (float)fl__sa_sqnorm(g, d);
        sa->nb[i] = NAN;
    }
    if (!sa->o.dsa_precompute || sa->o.dsa_variant != FL_DSA_KIM) return FL_OK;
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)n);
    if (!idx) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    fl_status st = FL_OK;
    for (int c = 0; c < sa->C && st == FL_OK; c++) {
        int64_t k = 0;
        for (int64_t i = sa->start[c]; i < sa->start[c + 1]; i++) idx[k++] = i;
        st = fill_nb(sa, c, idx, k, e);
    }
    free(idx);
    return st;
}

fl_status fl__sa_dsa_score(fl_sa *sa, const float *q, int64_t m, int c, const int64_t *self,
                           double *out, fl_err *e) {
    int64_t *a = malloc(sizeof(int64_t) * (size_t)m), *need = calloc((size_t)m, sizeof(int64_t));
    double *ad = malloc(sizeof(double) * (size_t)m), *bd = malloc(sizeof(double) * (size_t)m);
    fl_status st = FL_OK;
    if (!a || !need || !ad || !bd) {
        st = fl_fail(e, FL_ERR_NOMEM, "out of memory for DSA");
        goto out;
    }
    int64_t same[1][2] = {{sa->start[c], sa->start[c + 1]}}, rg[2][2] = {{0, 0}, {0, 0}};
    int nrg = other_ranges(sa, c, rg);
    st = nn_search(sa, q, m, (const int64_t(*)[2])same, 1, self, a, ad, e);
    if (st != FL_OK) goto out;
    if (sa->o.dsa_variant == FL_DSA_NLC) {
        int64_t *bi = need; /* reused: indices are not needed */
        st = nn_search(sa, q, m, (const int64_t(*)[2])rg, nrg, NULL, bi, bd, e);
        for (int64_t i = 0; i < m && st == FL_OK; i++) out[i] = ad[i] / bd[i];
        goto out;
    }
    /* Kim: x_a's own nearest other-class distance, computed once per training row. A row is
     * marked as queued by setting its cached value to -1 (distances are never negative). */
    int64_t k = 0;
    for (int64_t i = 0; i < m; i++)
        if (a[i] >= 0 && isnan(sa->nb[a[i]])) sa->nb[a[i]] = -1, need[k++] = a[i];
    st = fill_nb(sa, c, need, k, e);
    if (st != FL_OK) {
        for (int64_t i = 0; i < k; i++) sa->nb[need[i]] = NAN;
        goto out;
    }
    for (int64_t i = 0; i < m; i++) out[i] = a[i] >= 0 ? ad[i] / sa->nb[a[i]] : NAN;
out:
    free(a);
    free(need);
    free(ad);
    free(bd);
    return st;
}
