/* Dense matrix products: Gemm and MatMul. Every product goes through fl_sgemm (OpenBLAS);
 * gradients are more sgemm calls with beta = 1, which is exactly "accumulate with +=". */
#include <string.h>

#include "flare/model.h"
#include "nn/ops.h"

/* ---- Gemm: Y[M,N] = alpha * op(A) op(B) + beta * C ------------------------------------------
 * op(A) is [M,K] (A stored [M,K], or [K,M] with transA); op(B) is [K,N] (B stored [K,N], or
 * [N,K] with transB). C is optional and broadcast to [M,N] unidirectionally: right-aligned,
 * rank <= 2, each of its dims 1 or equal to Y's. */
typedef struct gemm_state {
    float alpha, beta;
    int ta, tb;
    int M, N, K;
    int cm, cn; /* C viewed as [cm, cn], cm in {1, M}, cn in {1, N}; 0 when there is no C */
} gemm_state;

static fl_status gemm_init(fl_model *m, fl_node *n, fl_err *e) {
    static const char *const known[] = {"alpha", "beta", "transA", "transB", "broadcast", NULL};
    fl_status st = fl_node_check_arity(n, 2, 3, 1, 1, e);
    if (st == FL_OK) st = fl_node_check_attrs(n, known, e);
    if (st != FL_OK) return st;
    gemm_state *s = fl_alloc(sizeof *s);
    if (!s) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    s->alpha = fl_node_attr_float(n, "alpha", 1.0f);
    s->beta = fl_node_attr_float(n, "beta", 1.0f);
    s->ta = fl_node_attr_int(n, "transA", 0) != 0;
    s->tb = fl_node_attr_int(n, "transB", 0) != 0;
    n->state = s;
    return FL_OK;
}

static fl_status gemm_shape(fl_model *m, fl_node *n, fl_err *e) {
    gemm_state *s = n->state;
    const fl_tensor *a = fl_in(m, n, 0), *b = fl_in(m, n, 1), *c = fl_in(m, n, 2);
    char x[128], y[128];
    if (a->ndim != 2 || b->ndim != 2)
        return fl_fail(e, FL_ERR_SHAPE, "node '%s' (Gemm): A %s and B %s must be 2-D", n->name,
                       fl_shape_str(a, x, sizeof x), fl_shape_str(b, y, sizeof y));
    int64_t M = s->ta ? a->shape[1] : a->shape[0], K = s->ta ? a->shape[0] : a->shape[1];
    int64_t Kb = s->tb ? b->shape[1] : b->shape[0], N = s->tb ? b->shape[0] : b->shape[1];
    if (K != Kb)
        return fl_fail(e, FL_ERR_SHAPE,
                       "node '%s' (Gemm): inner dimensions differ: A %s (transA=%d), B %s "
                       "(transB=%d)",
                       n->name, fl_shape_str(a, x, sizeof x), s->ta, fl_shape_str(b, y, sizeof y),
                       s->tb);
    s->M = (int)M, s->N = (int)N, s->K = (int)K;
    s->cm = s->cn = 0;
    if (c) {
        int64_t cm = c->ndim >= 2 ? c->shape[c->ndim - 2] : 1;
        int64_t cn = c->ndim >= 1 ? c->shape[c->ndim - 1] : 1;
        if (c->ndim > 2 || (cm != 1 && cm != M) || (cn != 1 && cn != N))
            return fl_fail(e, FL_ERR_SHAPE, "node '%s' (Gemm): C %s does not broadcast to [%lld,%lld]",
                           n->name, fl_shape_str(c, x, sizeof x), (long long)M, (long long)N);
        s->cm = (int)cm, s->cn = (int)cn;
    }
    fl_node_set_out_shape(m, n, 0, 2, (int64_t[]){M, N});
    return FL_OK;
}

static void gemm_forward(fl_model *m, fl_node *n) {
    const gemm_state *s = n->state;
    const fl_tensor *a = fl_in(m, n, 0), *b = fl_in(m, n, 1), *c = fl_in(m, n, 2);
    float *y = fl_out(m, n, 0)->data;
    int M = s->M, N = s->N, K = s->K;
    float beta = 0;
    if (c && s->beta != 0) { /* Y = beta * broadcast(C), then sgemm accumulates onto it */
        for (int i = 0; i < M; i++) {
            const float *crow = c->data + (s->cm == 1 ? 0 : (size_t)i * s->cn);
            float *yrow = y + (size_t)i * N;
            if (s->cn == 1)
                for (int j = 0; j < N; j++) yrow[j] = s->beta * crow[0];
            else
                for (int j = 0; j < N; j++) yrow[j] = s->beta * crow[j];
        }
        beta = 1;
    }
    if (K == 0) {
        if (beta == 0) memset(y, 0, sizeof(float) * (size_t)M * N);
        return;
    }
    fl_sgemm(s->ta, s->tb, M, N, K, s->alpha, a->data, a->shape[1], b->data, b->shape[1], beta, y,
             N);
}

/* With Y = alpha * op(A) op(B):
 *     d op(A) = alpha * dY op(B)^T      [M,K]
 *     d op(B) = alpha * op(A)^T dY      [K,N]
 * and the gradient of a stored transposed matrix is the transpose of that, which sgemm
 * produces by swapping the operands and their transpose flags. */
static void gemm_backward(fl_model *m, fl_node *n) {
    const gemm_state *s = n->state;
    const fl_tensor *a = fl_in(m, n, 0), *b = fl_in(m, n, 1);
    fl_tensor *ga = fl_gin(m, n, 0), *gb = fl_gin(m, n, 1), *gc = fl_gin(m, n, 2);
    const float *dy = fl_gout(m, n, 0)->data;
    int M = s->M, N = s->N, K = s->K, lda = (int)a->shape[1], ldb = (int)b->shape[1];
    if (ga && K > 0) {
        if (!s->ta) /* dA[M,K] = alpha dY[M,N] op(B)^T */
            fl_sgemm(0, !s->tb, M, K, N, s->alpha, dy, N, b->data, ldb, 1, ga->data, K);
        else /* dA[K,M] = alpha op(B)[K,N] dY^T */
            fl_sgemm(s->tb, 1, K, M, N, s->alpha, b->data, ldb, dy, N, 1, ga->data, M);
    }
    if (gb && K > 0) {
        if (!s->tb) /* dB[K,N] = alpha op(A)^T dY */
            fl_sgemm(!s->ta, 0, K, N, M, s->alpha, a->data, lda, dy, N, 1, gb->data, N);
        else /* dB[N,K] = alpha dY^T op(A) */
            fl_sgemm(1, s->ta, N, K, M, s->alpha, dy, N, a->data, lda, 1, gb->data, K);
    }
    if (gc) { /* dC = beta * dY summed over the dims C was broadcast along */
        for (int i = 0; i < M; i++) {
            float *grow = gc->data + (s->cm == 1 ? 0 : (size_t)i * s->cn);
            const float *drow = dy + (size_t)i * N;
            if (s->cn == 1) {
                float acc = 0;
                for (int j = 0; j < N; j++) acc += drow[j];
                grow[0] += s->beta * acc;
            } else {
                for (int j = 0; j < N; j++) grow[j] += s->beta * drow[j];
            }
        }
    }
}

/* ---- MatMul: numpy matmul ---------------------------------------------------------------------
 * A [..., M, K] x B [..., K, N] -> [..., M, N] with the batch dims broadcast. A 1-D A is a
 * row [1, K] and a 1-D B a column [K, 1]; the promoted dim is dropped from the output. The
 * batch loop runs one sgemm per output matrix, addressing A's and B's matrices through
 * offset tables built at plan time. When B is one matrix shared by a contiguous batch of
 * A's (a dense layer applied to a sequence), the batch folds into M: a single sgemm. */
typedef struct matmul_state {
    int M, N, K;
    int64_t batch; /* number of output matrices */
    int fold;      /* B is shared and A's batch is not broadcast: one [batch*M, K] product */
    int64_t *aoff, *boff; /* per output matrix: index of its A and B matrix */
} matmul_state;

static void matmul_free(fl_node *n) {
    matmul_state *s = n->state;
    if (s) {
        fl_free(s->aoff);
        fl_free(s->boff);
    }
    fl_free(s);
}

static fl_status matmul_init(fl_model *m, fl_node *n, fl_err *e) {
    static const char *const known[] = {NULL};
    fl_status st = fl_node_check_arity(n, 2, 2, 1, 1, e);
    if (st == FL_OK) st = fl_node_check_attrs(n, known, e);
    if (st != FL_OK) return st;
    if (!(n->state = fl_alloc(sizeof(matmul_state))))
        return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    return FL_OK;
}

static fl_status matmul_shape(fl_model *m, fl_node *n, fl_err *e) {
    matmul_state *s = n->state;
    const fl_tensor *a = fl_in(m, n, 0), *b = fl_in(m, n, 1);
    char x[128], y[128];
    if (a->ndim < 1 || b->ndim < 1)
        return fl_fail(e, FL_ERR_SHAPE, "node '%s' (MatMul): inputs %s and %s must not be scalars",
                       n->name, fl_shape_str(a, x, sizeof x), fl_shape_str(b, y, sizeof y));
    int64_t M = a->ndim == 1 ? 1 : a->shape[a->ndim - 2], K = a->shape[a->ndim - 1];
    int64_t Kb = b->ndim == 1 ? b->shape[0] : b->shape[b->ndim - 2];
    int64_t N = b->ndim == 1 ? 1 : b->shape[b->ndim - 1];
    int ra = a->ndim > 2 ? a->ndim - 2 : 0, rb = b->ndim > 2 ? b->ndim - 2 : 0;
    int r = ra > rb ? ra : rb;
    int64_t ys[FL_MAX_DIMS], as[FL_MAX_DIMS], bs[FL_MAX_DIMS];
    int ok = K == Kb;
    for (int d = 0; d < r && ok; d++) {
        as[d] = d >= r - ra ? a->shape[d - (r - ra)] : 1;
        bs[d] = d >= r - rb ? b->shape[d - (r - rb)] : 1;
        ok = as[d] == bs[d] || as[d] == 1 || bs[d] == 1;
        ys[d] = as[d] == 1 ? bs[d] : as[d];
    }
    if (!ok)
        return fl_fail(e, FL_ERR_SHAPE, "node '%s' (MatMul): shapes %s and %s do not fit", n->name,
                       fl_shape_str(a, x, sizeof x), fl_shape_str(b, y, sizeof y));
    int yn = r;
    if (a->ndim > 1) ys[yn++] = M;
    if (b->ndim > 1) ys[yn++] = N;
    fl_node_set_out_shape(m, n, 0, yn, ys);
    s->M = (int)M, s->N = (int)N, s->K = (int)K;

    int64_t batch = fl_shape_size(r, ys);
    fl_free(s->aoff);
    fl_free(s->boff);
    s->aoff = fl_alloc(sizeof(int64_t) * (size_t)(batch ? batch : 1));
    s->boff = fl_alloc(sizeof(int64_t) * (size_t)(batch ? batch : 1));
    if (!s->aoff || !s->boff) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    s->batch = batch;
    /* walk the output batch index; an input's matrix index uses stride 0 on its size-1 dims */
    int64_t idx[FL_MAX_DIMS] = {0};
    int a_identity = 1, b_shared = 1;
    for (int64_t k = 0; k < batch; k++) {
        int64_t ia = 0, ib = 0;
        for (int d = 0; d < r; d++) {
            ia = ia * as[d] + (as[d] == 1 ? 0 : idx[d]);
            ib = ib * bs[d] + (bs[d] == 1 ? 0 : idx[d]);
        }
        s->aoff[k] = ia, s->boff[k] = ib;
        a_identity &= ia == k;
        b_shared &= ib == 0;
        for (int d = r - 1; d >= 0; d--) {
            if (++idx[d] < ys[d]) break;
            idx[d] = 0;
        }
    }
    s->fold = a_identity && b_shared;
    return FL_OK;
}

static void matmul_forward(fl_model *m, fl_node *n) {
    const matmul_state *s = n->state;
    const float *a = fl_in(m, n, 0)->data, *b = fl_in(m, n, 1)->data;
    float *y = fl_out(m, n, 0)->data;
    size_t M = s->M, N = s->N, K = s->K;
    if (K == 0) {
        memset(y, 0, sizeof(float) * M * N * (size_t)s->batch);
        return;
    }
    if (s->fold) {
        fl_sgemm(0, 0, (int)(s->batch * s->M), s->N, s->K, 1, a, s->K, b, s->N, 0, y, s->N);
        return;
    }
    for (int64_t k = 0; k < s->batch; k++)
        fl_sgemm(0, 0, s->M, s->N, s->K, 1, a + s->aoff[k] * M * K, s->K, b + s->boff[k] * K * N,
                 s->N, 0, y + k * M * N, s->N);
}

/* dA[M,K] += dY B^T and dB[K,N] += A^T dY per output matrix; matrices shared through
 * broadcasting receive the sum because every product accumulates (beta = 1). */
static void matmul_backward(fl_model *m, fl_node *n) {
    const matmul_state *s = n->state;
    fl_tensor *ga = fl_gin(m, n, 0), *gb = fl_gin(m, n, 1);
    const float *a = fl_in(m, n, 0)->data, *b = fl_in(m, n, 1)->data, *dy = fl_gout(m, n, 0)->data;
    size_t M = s->M, N = s->N, K = s->K;
    if (K == 0) return;
    if (s->fold) {
        int BM = (int)(s->batch * s->M);
        if (ga) fl_sgemm(0, 1, BM, s->K, s->N, 1, dy, s->N, b, s->N, 1, ga->data, s->K);
        if (gb) fl_sgemm(1, 0, s->K, s->N, BM, 1, a, s->K, dy, s->N, 1, gb->data, s->N);
        return;
    }
    for (int64_t k = 0; k < s->batch; k++) {
        const float *ak = a + s->aoff[k] * M * K, *bk = b + s->boff[k] * K * N, *dyk = dy + k * M * N;
        if (ga) fl_sgemm(0, 1, s->M, s->K, s->N, 1, dyk, s->N, bk, s->N, 1, ga->data + s->aoff[k] * M * K, s->K);
        if (gb) fl_sgemm(1, 0, s->K, s->N, s->M, 1, ak, s->K, dyk, s->N, 1, gb->data + s->boff[k] * K * N, s->N);
    }
}

static const fl_op op_gemm = {"Gemm", gemm_init, gemm_shape, gemm_forward, gemm_backward, NULL};
static const fl_op op_matmul = {"MatMul", matmul_init, matmul_shape, matmul_forward, matmul_backward,
                                matmul_free};

const fl_op *const fl_ops_gemm[] = {&op_gemm, &op_matmul, NULL};
