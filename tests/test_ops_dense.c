/* Dense ops: Gemm, MatMul, Add/Sub/Mul/Div, Softmax/LogSoftmax, Clip, Dropout,
 * BatchNormalization — finite-difference gradient checks for every attribute combination,
 * and known-value forward tests. */
#include "testutil.h"

#define IN FL_VAL_INPUT
#define PARAM FL_VAL_PARAM
#define CONST FL_VAL_CONST

static fl_rng rng;

static int setup(void **state) {
    fl_rng_seed(&rng, 42);
    return 0;
}

static fl_tensor rnd(int ndim, const int64_t *shape, float lo, float hi) {
    return tu_tensor(ndim, shape, &rng, lo, hi);
}

static void free_all(int n, fl_tensor *t) {
    for (int i = 0; i < n; i++) fl_tensor_free(&t[i]);
}

/* Forward a one-node model on its graph inputs, returning the model (caller frees). */
static fl_model *run1(const char *op, int n_in, const fl_tensor *ins, const fl_value_kind *kinds,
                      int n_out, int n_attr, const fl_attr *attr) {
    fl_model *m = tu_single_node(op, n_in, ins, kinds, n_out, n_attr, attr);
    tu_forward(m, n_in, ins, kinds);
    return m;
}

/* ---- Gemm --------------------------------------------------------------------------------------- */

/* Reference Y = alpha op(A) op(B) + beta C, C broadcast from [cm, cn]. */
static void gemm_ref(float *y, const fl_tensor *a, const fl_tensor *b, const fl_tensor *c, int ta,
                     int tb, float alpha, float beta, int M, int N, int K) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) {
                float av = ta ? a->data[k * M + i] : a->data[i * K + k];
                float bv = tb ? b->data[j * K + k] : b->data[k * N + j];
                s += (double)av * bv;
            }
            double cv = 0;
            if (c) {
                int64_t cm = c->ndim >= 2 ? c->shape[c->ndim - 2] : 1;
                int64_t cn = c->ndim >= 1 ? c->shape[c->ndim - 1] : 1;
                cv = c->data[(cm == 1 ? 0 : i) * cn + (cn == 1 ? 0 : j)];
            }
            y[i * N + j] = (float)(alpha * s + beta * cv);
        }
}

static void test_gemm(void **state) {
    const int M = 3, N = 4, K = 5;
    /* C shapes: none, scalar, [1], [N], [1,N], [M,1], [M,N] */
    struct { int nd; int64_t s[2]; } cs[] = {{-1, {0}}, {0, {0}},     {1, {1}},    {1, {N}},
                                             {2, {1, N}}, {2, {M, 1}}, {2, {M, N}}};
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (size_t ci = 0; ci < sizeof cs / sizeof cs[0]; ci++) {
                int64_t as[2] = {ta ? K : M, ta ? M : K}, bs[2] = {tb ? N : K, tb ? K : N};
                fl_tensor ins[3] = {rnd(2, as, -1, 1), rnd(2, bs, -1, 1), {0}};
                fl_value_kind kinds[3] = {IN, PARAM, PARAM};
                int n_in = 2;
                if (cs[ci].nd >= 0) {
                    ins[2] = rnd(cs[ci].nd, cs[ci].s, -1, 1);
                    n_in = 3;
                }
                fl_attr attr[4] = {fl_attr_float("alpha", 0.7f), fl_attr_float("beta", 1.3f),
                                   fl_attr_int("transA", ta), fl_attr_int("transB", tb)};
                /* known values */
                fl_model *m = run1("Gemm", n_in, ins, kinds, 1, 4, attr);
                const fl_tensor *y = fl_model_output(m, 0);
                assert_int_equal(y->ndim, 2);
                assert_int_equal(y->shape[0], M);
                assert_int_equal(y->shape[1], N);
                float ref[M * N];
                gemm_ref(ref, &ins[0], &ins[1], n_in == 3 ? &ins[2] : NULL, ta, tb, 0.7f, 1.3f, M,
                         N, K);
                for (int i = 0; i < M * N; i++) assert_float_equal(y->data[i], ref[i], 1e-5);
                fl_model_free(m);
                tu_gradcheck("Gemm", n_in, ins, kinds, 4, attr, 1e-2f, 1e-2f);
                free_all(3, ins);
            }
}

/* fl_sgemm splits a large product over the threads by rows or by columns of C: every
 * transpose combination, padded leading dimensions (the padding must stay untouched) and
 * beta != 0, against a double-precision reference. */
static void test_sgemm_split(void **state) {
    (void)state;
    const int shapes[2][3] = {{100, 40, 80}, {40, 100, 80}}; /* M >= N: rows; else columns */
    int threads = fl_threads_get();
    fl_threads_set(2);
    fl_rng r;
    fl_rng_seed(&r, 3);
    for (int sh = 0; sh < 2; sh++)
        for (int t = 0; t < 4; t++) {
            int M = shapes[sh][0], N = shapes[sh][1], K = shapes[sh][2], ta = t & 1, tb = t >> 1;
            int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 2, ldc = N + 5;
            int ar = ta ? K : M, br = tb ? N : K;
            float *A = malloc(sizeof(float) * ar * lda), *B = malloc(sizeof(float) * br * ldb);
            float *C = malloc(sizeof(float) * M * ldc);
            for (int i = 0; i < ar * lda; i++) A[i] = fl_rng_uniform(&r) - 0.5f;
            for (int i = 0; i < br * ldb; i++) B[i] = fl_rng_uniform(&r) - 0.5f;
            for (int i = 0; i < M * ldc; i++) C[i] = (float)(i % 7);
            fl_sgemm(ta, tb, M, N, K, 0.5f, A, lda, B, ldb, 2.0f, C, ldc);
            for (int i = 0; i < M; i++) {
                for (int j = 0; j < N; j++) {
                    double s = 0;
                    for (int k = 0; k < K; k++)
                        s += (double)(ta ? A[k * lda + i] : A[i * lda + k]) *
                             (tb ? B[j * ldb + k] : B[k * ldb + j]);
                    double want = 0.5 * s + 2.0 * ((i * ldc + j) % 7);
                    assert_float_equal(C[i * ldc + j], want, 1e-4 * (1 + fabs(want)));
                }
                for (int j = N; j < ldc; j++) assert_float_equal(C[i * ldc + j], ((i * ldc + j) % 7), 0);
            }
            free(A), free(B), free(C);
        }
    fl_threads_set(threads);
}

static void test_gemm_defaults_and_errors(void **state) {
    fl_err e = {0};
    int64_t as[2] = {2, 3}, bs[2] = {3, 4}, bad[2] = {4, 4};
    fl_tensor ins[2] = {rnd(2, as, -1, 1), rnd(2, bs, -1, 1)};
    fl_value_kind kinds[2] = {IN, PARAM};
    tu_gradcheck("Gemm", 2, ins, kinds, 0, NULL, 1e-2f, 1e-2f);
    fl_model *m = run1("Gemm", 2, ins, kinds, 1, 0, NULL);
    float ref[8];
    gemm_ref(ref, &ins[0], &ins[1], NULL, 0, 0, 1, 1, 2, 4, 3);
    for (int i = 0; i < 8; i++) assert_float_equal(fl_model_output(m, 0)->data[i], ref[i], 1e-5);
    fl_model_free(m);
    /* inner dimensions that do not match name the node */
    fl_tensor_free(&ins[1]);
    ins[1] = rnd(2, bad, -1, 1);
    m = tu_single_node("Gemm", 2, ins, kinds, 1, 0, NULL);
    assert_int_equal(fl_model_forward(m, &ins[0], &e), FL_ERR_SHAPE);
    assert_non_null(strstr(e.msg, "node"));
    fl_model_free(m);
    free_all(2, ins);
}

/* ---- MatMul ------------------------------------------------------------------------------------- */

/* Naive numpy matmul for the cases tested: batch broadcasting over up to 4-D. */
static void matmul_ref(fl_tensor *y, const fl_tensor *a, const fl_tensor *b) {
    int a1 = a->ndim == 1, b1 = b->ndim == 1;
    int64_t M = a1 ? 1 : a->shape[a->ndim - 2], K = a->shape[a->ndim - 1];
    int64_t N = b1 ? 1 : b->shape[b->ndim - 1];
    int ra = a1 ? 0 : a->ndim - 2, rb = b1 ? 0 : b->ndim - 2, r = ra > rb ? ra : rb;
    int64_t batch = 1, bsh[FL_MAX_DIMS];
    for (int d = 0; d < r; d++) {
        int64_t x = d >= r - ra ? a->shape[d - (r - ra)] : 1, z = d >= r - rb ? b->shape[d - (r - rb)] : 1;
        bsh[d] = x > z ? x : z;
        batch *= bsh[d];
    }
    for (int64_t k = 0; k < batch; k++) {
        int64_t rem = k, ia = 0, ib = 0, mula = 1, mulb = 1;
        for (int d = r - 1; d >= 0; d--) {
            int64_t i = rem % bsh[d];
            rem /= bsh[d];
            int64_t x = d >= r - ra ? a->shape[d - (r - ra)] : 1, z = d >= r - rb ? b->shape[d - (r - rb)] : 1;
            ia += (x == 1 ? 0 : i) * mula;
            ib += (z == 1 ? 0 : i) * mulb;
            mula *= x;
            mulb *= z;
        }
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double s = 0;
                for (int64_t q = 0; q < K; q++)
                    s += (double)a->data[ia * M * K + i * K + q] * b->data[ib * K * N + q * N + j];
                y->data[k * M * N + i * N + j] = (float)s;
            }
    }
}

static void test_matmul(void **state) {
    struct { int na; int64_t a[4]; int nb; int64_t b[4]; int ny; int64_t y[4]; } cases[] = {
        {2, {3, 4}, 2, {4, 5}, 2, {3, 5}},
        {3, {2, 3, 4}, 3, {2, 4, 5}, 3, {2, 3, 5}},
        {4, {2, 1, 3, 4}, 3, {3, 4, 5}, 4, {2, 3, 3, 5}}, /* both broadcast */
        {3, {2, 3, 4}, 2, {4, 5}, 3, {2, 3, 5}},          /* B shared: folded */
        {2, {3, 4}, 3, {2, 4, 5}, 3, {2, 3, 5}},          /* A shared */
        {1, {4}, 3, {2, 4, 5}, 2, {2, 5}},                /* 1-D A */
        {3, {2, 3, 4}, 1, {4}, 2, {2, 3}},                /* 1-D B */
        {1, {4}, 1, {4}, 0, {0}},                         /* dot product */
        {1, {4}, 2, {4, 5}, 1, {5}},
        {4, {1, 2, 3, 4}, 4, {1, 2, 4, 3}, 4, {1, 2, 3, 3}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        fl_tensor ins[2] = {rnd(cases[c].na, cases[c].a, -1, 1), rnd(cases[c].nb, cases[c].b, -1, 1)};
        fl_value_kind kinds[2] = {IN, PARAM};
        fl_model *m = run1("MatMul", 2, ins, kinds, 1, 0, NULL);
        const fl_tensor *y = fl_model_output(m, 0);
        assert_int_equal(y->ndim, cases[c].ny);
        for (int d = 0; d < y->ndim; d++) assert_int_equal(y->shape[d], cases[c].y[d]);
        fl_tensor ref = tu_tensor(y->ndim, y->shape, NULL, 0, 0);
        matmul_ref(&ref, &ins[0], &ins[1]);
        for (int64_t i = 0; i < y->size; i++) assert_float_equal(y->data[i], ref.data[i], 1e-5);
        fl_tensor_free(&ref);
        fl_model_free(m);
        tu_gradcheck("MatMul", 2, ins, kinds, 0, NULL, 1e-2f, 1e-2f);
        /* both as graph inputs too (A shared case exercises accumulation into one matrix) */
        kinds[1] = IN;
        tu_gradcheck("MatMul", 2, ins, kinds, 0, NULL, 1e-2f, 1e-2f);
        free_all(2, ins);
    }
    fl_err e = {0};
    int64_t as[3] = {2, 3, 4}, bs[3] = {3, 4, 5};
    fl_tensor ins[2] = {rnd(3, as, -1, 1), rnd(3, bs, -1, 1)};
    fl_value_kind kinds[2] = {IN, CONST};
    fl_model *m = tu_single_node("MatMul", 2, ins, kinds, 1, 0, NULL);
    assert_int_equal(fl_model_forward(m, &ins[0], &e), FL_ERR_SHAPE);
    assert_non_null(strstr(e.msg, "MatMul"));
    fl_model_free(m);
    free_all(2, ins);
}

/* ---- Add, Sub, Mul, Div ---------------------------------------------------------------------- */

/* Reference: out[i] computed through explicit broadcast index maps. */
static float ew_ref(const char *op, float a, float b) {
    switch (op[0]) {
    case 'A': return a + b;
    case 'S': return a - b;
    case 'M': return a * b;
    default: return a / b;
    }
}

static int64_t bcast_index(const fl_tensor *t, int r, const int64_t *ys, int64_t flat) {
    int64_t off = 0, mul = 1;
    for (int d = r - 1; d >= 0; d--) {
        int64_t i = flat % ys[d];
        flat /= ys[d];
        int td = d - (r - t->ndim);
        if (td < 0) continue;
        off += (t->shape[td] == 1 ? 0 : i) * mul;
        mul *= t->shape[td];
    }
    return off;
}

static void test_elementwise(void **state) {
    const char *ops[] = {"Add", "Sub", "Mul", "Div"};
    struct { int na; int64_t a[4]; int nb; int64_t b[4]; } cases[] = {
        {3, {2, 3, 4}, 3, {2, 3, 4}},       /* same shape */
        {3, {2, 3, 4}, 1, {4}},             /* trailing vector */
        {4, {2, 3, 2, 2}, 4, {1, 3, 1, 1}}, /* per-channel bias */
        {4, {2, 3, 2, 2}, 3, {3, 1, 1}},    /* per-channel, lower rank */
        {3, {2, 3, 4}, 0, {0}},             /* scalar */
        {3, {2, 3, 4}, 1, {1}},             /* one-element vector */
        {0, {0}, 3, {2, 3, 4}},             /* scalar on the left */
        {2, {3, 1}, 3, {2, 1, 4}},          /* both broadcast */
        {4, {2, 3, 4, 2}, 4, {2, 1, 4, 1}}, /* alternating */
        {2, {1, 4}, 2, {3, 4}},             /* left broadcast */
    };
    for (size_t o = 0; o < 4; o++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            int div = o == 3;
            fl_tensor ins[2] = {rnd(cases[c].na, cases[c].a, -1, 1),
                                rnd(cases[c].nb, cases[c].b, div ? 0.5f : -1, div ? 2 : 1)};
            if (div) /* denominators away from 0, both signs */
                for (int64_t i = 0; i < ins[1].size; i += 2) ins[1].data[i] = -ins[1].data[i];
            fl_value_kind kinds[2] = {IN, PARAM};
            fl_model *m = run1(ops[o], 2, ins, kinds, 1, 0, NULL);
            const fl_tensor *y = fl_model_output(m, 0);
            int r = ins[0].ndim > ins[1].ndim ? ins[0].ndim : ins[1].ndim;
            assert_int_equal(y->ndim, r);
            for (int64_t i = 0; i < y->size; i++) {
                float a = ins[0].data[bcast_index(&ins[0], r, y->shape, i)];
                float b = ins[1].data[bcast_index(&ins[1], r, y->shape, i)];
                assert_float_equal(y->data[i], ew_ref(ops[o], a, b), 1e-6);
            }
            fl_model_free(m);
            tu_gradcheck(ops[o], 2, ins, kinds, 0, NULL, 1e-3f, 1e-2f);
            free_all(2, ins);
        }
}

static void test_elementwise_same_input_and_errors(void **state) {
    /* x * x through one value: both gradient paths land in the same buffer */
    fl_err e = {0};
    int64_t s[2] = {2, 3};
    fl_tensor x = rnd(2, s, -1, 1), seed = tu_tensor(2, s, NULL, 0, 0);
    for (int i = 0; i < 6; i++) seed.data[i] = 1;
    fl_model *m = fl_model_new();
    fl_tensor decl = {0};
    fl_tensor_set_shape(&decl, 2, s);
    int xi = fl_model_add_value(m, "x", IN, &decl, &e);
    int in2[2] = {xi, xi};
    int y = fl_model_add_op(m, "Mul", "sq", 2, in2, 0, NULL, &e);
    assert_true(y >= 0);
    assert_int_equal(fl_model_set_io(m, 1, &xi, 1, &y, &e), FL_OK);
    assert_int_equal(fl_model_finish(m, &e), FL_OK);
    assert_int_equal(fl_model_forward(m, &x, &e), FL_OK);
    assert_int_equal(fl_model_backward_idx(m, 1, &y, &seed, &e), FL_OK);
    const fl_tensor *dx = fl_model_grad(m, "x");
    for (int i = 0; i < 6; i++) assert_float_equal(dx->data[i], 2 * x.data[i], 1e-6);
    fl_model_free(m);

    /* shapes that do not broadcast */
    int64_t bs[1] = {4};
    fl_tensor ins[2] = {x, rnd(1, bs, -1, 1)};
    fl_value_kind kinds[2] = {IN, CONST};
    m = tu_single_node("Add", 2, ins, kinds, 1, 0, NULL);
    assert_int_equal(fl_model_forward(m, &x, &e), FL_ERR_SHAPE);
    assert_non_null(strstr(e.msg, "[2,3]"));
    assert_non_null(strstr(e.msg, "node"));
    fl_model_free(m);
    /* the legacy left-aligned "axis" broadcast is refused */
    fl_attr axis = fl_attr_int("axis", 1);
    m = fl_model_new();
    int a = fl_model_add_value(m, "a", IN, &decl, &e);
    int in3[2] = {a, a};
    assert_int_equal(fl_model_add_op(m, "Add", "legacy", 2, in3, 1, &axis, &e), -1);
    assert_non_null(strstr(e.msg, "axis"));
    fl_model_free(m);
    fl_tensor_free(&ins[1]);
    fl_tensor_free(&x);
    fl_tensor_free(&seed);
}

/* ---- Softmax, LogSoftmax --------------------------------------------------------------------- */

static void test_softmax_values(void **state) {
    int64_t s[2] = {2, 4};
    fl_tensor x = tu_tensor(2, s, NULL, 0, 0);
    float v[8] = {1000, 1001, 1002, 1003, -1, 0, 1, 2}; /* large numbers: needs max-subtraction */
    memcpy(x.data, v, sizeof v);
    fl_value_kind k = IN;
    fl_model *m = run1("Softmax", 1, &x, &k, 1, 0, NULL);
    fl_model *ml = run1("LogSoftmax", 1, &x, &k, 1, 0, NULL);
    const float *y = fl_model_output(m, 0)->data, *ly = fl_model_output(ml, 0)->data;
    double z = 1 + exp(-1) + exp(-2) + exp(-3);
    for (int r = 0; r < 2; r++) {
        double sum = 0;
        for (int j = 0; j < 4; j++) {
            sum += y[r * 4 + j];
            assert_float_equal(y[r * 4 + j], exp(j - 3) / z, 1e-6);
            assert_float_equal(ly[r * 4 + j], (j - 3) - log(z), 1e-5);
        }
        assert_float_equal(sum, 1.0, 1e-6);
    }
    fl_model_free(m);
    fl_model_free(ml);
    fl_tensor_free(&x);
}

static void test_softmax_grads(void **state) {
    const char *ops[] = {"Softmax", "LogSoftmax"};
    int64_t s[3] = {2, 3, 4};
    int axes[] = {0, 1, 2, -1, -2};
    for (int o = 0; o < 2; o++) {
        for (size_t a = 0; a <= sizeof axes / sizeof axes[0]; a++) {
            fl_tensor x = rnd(3, s, -2, 2);
            fl_value_kind k = IN;
            fl_attr attr = fl_attr_int("axis", a < 5 ? axes[a] : 0);
            int n_attr = a < 5 ? 1 : 0; /* last round: default axis */
            fl_model *m = run1(ops[o], 1, &x, &k, 1, n_attr, &attr);
            /* opset 13: normalised along exactly one axis */
            int ax = a < 5 ? (axes[a] + 3) % 3 : 2;
            const float *y = fl_model_output(m, 0)->data;
            int64_t inner = 1;
            for (int d = ax + 1; d < 3; d++) inner *= s[d];
            int64_t outer = x.size / (inner * s[ax]);
            for (int64_t p = 0; p < outer; p++)
                for (int64_t j = 0; j < inner; j++) {
                    double sum = 0;
                    for (int64_t l = 0; l < s[ax]; l++) {
                        float v = y[(p * s[ax] + l) * inner + j];
                        sum += o ? exp(v) : v;
                    }
                    assert_float_equal(sum, 1.0, 1e-5);
                }
            fl_model_free(m);
            tu_gradcheck(ops[o], 1, &x, &k, n_attr, &attr, 1e-2f, 1e-2f);
            fl_tensor_free(&x);
        }
    }
}

/* Opset < 13: the input is coerced to 2-D at axis, so softmax of [2,3,4] at axis 1 is the
 * softmax of the [2,12] view along its rows, forward and backward. The [2,12] model runs at
 * opset 13, where that is plain last-axis softmax (checked by tu_gradcheck above). */
static void test_softmax_old_opset(void **state) {
    fl_err e = {0};
    const char *ops[] = {"Softmax", "LogSoftmax"};
    int64_t s3[3] = {2, 3, 4}, s2[2] = {2, 12};
    for (int o = 0; o < 2; o++)
        for (int use_default = 0; use_default < 2; use_default++) {
            fl_tensor x3 = rnd(3, s3, -2, 2), x2 = tu_tensor(2, s2, NULL, 0, 0);
            memcpy(x2.data, x3.data, sizeof(float) * 24);
            fl_tensor w3 = rnd(3, s3, -1, 1), w2 = tu_tensor(2, s2, NULL, 0, 0);
            memcpy(w2.data, w3.data, sizeof(float) * 24);
            fl_value_kind k = IN;
            fl_attr attr = fl_attr_int("axis", 1); /* also the opset < 13 default */
            fl_model *old = tu_single_node(ops[o], 1, &x3, &k, 1, use_default ? 0 : 1, &attr);
            old->opset = 11;
            fl_model *ref = tu_single_node(ops[o], 1, &x2, &k, 1, 0, NULL);
            assert_int_equal(fl_model_forward(old, &x3, &e), FL_OK);
            assert_int_equal(fl_model_forward(ref, &x2, &e), FL_OK);
            for (int i = 0; i < 24; i++)
                assert_float_equal(fl_model_output(old, 0)->data[i], fl_model_output(ref, 0)->data[i],
                                   1e-6);
            int yo = old->outputs[0], yr = ref->outputs[0];
            assert_int_equal(fl_model_backward_idx(old, 1, &yo, &w3, &e), FL_OK);
            assert_int_equal(fl_model_backward_idx(ref, 1, &yr, &w2, &e), FL_OK);
            const fl_tensor *go = fl_model_grad(old, "in0"), *gr = fl_model_grad(ref, "in0");
            for (int i = 0; i < 24; i++) assert_float_equal(go->data[i], gr->data[i], 1e-6);
            fl_model_free(old);
            fl_model_free(ref);
            fl_tensor *ts[4] = {&x3, &x2, &w3, &w2};
            for (int i = 0; i < 4; i++) fl_tensor_free(ts[i]);
        }
}

/* ---- Clip ----------------------------------------------------------------------------------------- */

static void test_clip(void **state) {
    int64_t s[2] = {4, 5};
    fl_tensor x = rnd(2, s, -2, 2);
    /* keep every element at least eps away from the bounds -0.5 and 0.8 and from 0 */
    for (int64_t i = 0; i < x.size; i++)
        if (fabsf(x.data[i] + 0.5f) < 0.05f || fabsf(x.data[i] - 0.8f) < 0.05f) x.data[i] = 0.3f;
    fl_value_kind k1 = IN;
    /* opset < 11 attributes */
    fl_attr attr[2] = {fl_attr_float("min", -0.5f), fl_attr_float("max", 0.8f)};
    fl_model *m = run1("Clip", 1, &x, &k1, 1, 2, attr);
    for (int64_t i = 0; i < x.size; i++)
        assert_float_equal(fl_model_output(m, 0)->data[i], fminf(fmaxf(x.data[i], -0.5f), 0.8f), 0);
    fl_model_free(m);
    tu_gradcheck("Clip", 1, &x, &k1, 2, attr, 1e-2f, 1e-2f);
    tu_gradcheck("Clip", 1, &x, &k1, 1, &attr[1], 1e-2f, 1e-2f);
    tu_gradcheck("Clip", 1, &x, &k1, 0, NULL, 1e-2f, 1e-2f);

    /* opset 11+: bounds as inputs, trainable (their gradient: sum of dy where they bind) */
    fl_tensor lo = tu_tensor(0, NULL, NULL, 0, 0), hi = tu_tensor(0, NULL, NULL, 0, 0);
    lo.data[0] = -0.5f, hi.data[0] = 0.8f;
    fl_tensor ins[3] = {x, lo, hi};
    fl_value_kind kinds[3] = {IN, PARAM, PARAM};
    m = run1("Clip", 3, ins, kinds, 1, 0, NULL);
    for (int64_t i = 0; i < x.size; i++)
        assert_float_equal(fl_model_output(m, 0)->data[i], fminf(fmaxf(x.data[i], -0.5f), 0.8f), 0);
    fl_model_free(m);
    tu_gradcheck("Clip", 3, ins, kinds, 0, NULL, 1e-2f, 1e-2f);
    /* only max (min omitted), only min */
    fl_tensor only_max[3] = {x, {0}, hi};
    fl_value_kind kmax[3] = {IN, CONST, PARAM};
    tu_gradcheck("Clip", 3, only_max, kmax, 0, NULL, 1e-2f, 1e-2f);
    fl_value_kind kmin[2] = {IN, PARAM};
    tu_gradcheck("Clip", 2, ins, kmin, 0, NULL, 1e-2f, 1e-2f);
    fl_tensor_free(&lo);
    fl_tensor_free(&hi);
    fl_tensor_free(&x);
}

/* ---- Dropout --------------------------------------------------------------------------------------- */

static void test_dropout(void **state) {
    fl_err e = {0};
    int64_t s[2] = {100, 100};
    fl_tensor x = tu_tensor(2, s, NULL, 0, 0);
    for (int64_t i = 0; i < x.size; i++) x.data[i] = 1;
    fl_value_kind k = IN;
    fl_attr ratio = fl_attr_float("ratio", 0.3f);
    /* inference: identity, mask all ones, gradient passes */
    fl_model *m = run1("Dropout", 1, &x, &k, 2, 1, &ratio);
    for (int64_t i = 0; i < x.size; i++) {
        assert_float_equal(fl_model_output(m, 0)->data[i], 1, 0);
        assert_float_equal(fl_model_output(m, 1)->data[i], 1, 0);
    }
    /* training: ~30% dropped, the rest scaled by 1/0.7; backward uses the same mask */
    m->training = 1;
    assert_int_equal(fl_model_forward(m, &x, &e), FL_OK);
    const fl_tensor *y = fl_model_output(m, 0), *mask = fl_model_output(m, 1);
    int64_t zeros = 0;
    for (int64_t i = 0; i < x.size; i++) {
        if (y->data[i] == 0) zeros++;
        else assert_float_equal(y->data[i], 1 / 0.7f, 1e-6);
        assert_float_equal(mask->data[i], y->data[i] != 0, 0);
    }
    assert_true(zeros > 2800 && zeros < 3200);
    int yi = m->outputs[0];
    assert_int_equal(fl_model_backward_idx(m, 1, &yi, &x, &e), FL_OK);
    const fl_tensor *dx = fl_model_grad(m, "in0");
    for (int64_t i = 0; i < x.size; i++) assert_float_equal(dx->data[i], y->data[i], 0);
    fl_model_free(m);

    /* opset 12+: ratio and training_mode as inputs; training_mode drops without m->training */
    fl_tensor r = tu_tensor(0, NULL, NULL, 0, 0), tm = tu_tensor(0, NULL, NULL, 0, 0);
    r.data[0] = 0.5f, tm.data[0] = 1;
    fl_tensor ins[3] = {x, r, tm};
    fl_value_kind kinds[3] = {IN, CONST, CONST};
    m = run1("Dropout", 3, ins, kinds, 1, 0, NULL);
    zeros = 0;
    for (int64_t i = 0; i < x.size; i++) zeros += fl_model_output(m, 0)->data[i] == 0;
    assert_true(zeros > 4700 && zeros < 5300);
    fl_model_free(m);
    /* ratio input without training: identity, and gradcheck passes through */
    tu_gradcheck("Dropout", 2, ins, kinds, 0, NULL, 1e-2f, 1e-2f);
    fl_attr bad = fl_attr_float("ratio", 1.5f);
    m = fl_model_new();
    int xi = fl_model_add_value(m, "x", IN, NULL, &e);
    assert_int_equal(fl_model_add_op(m, "Dropout", "d", 1, &xi, 1, &bad, &e), -1);
    assert_non_null(strstr(e.msg, "ratio"));
    fl_model_free(m);
    fl_tensor_free(&r);
    fl_tensor_free(&tm);
    fl_tensor_free(&x);
}

/* ---- BatchNormalization ------------------------------------------------------------------------ */

static void bn_inputs(fl_tensor ins[5], int64_t N, int64_t C, int64_t H) {
    int64_t xs[4] = {N, C, H, H};
    ins[0] = rnd(4, xs, -1, 2);
    ins[1] = rnd(1, &C, 0.5f, 1.5f);
    ins[2] = rnd(1, &C, -0.5f, 0.5f);
    ins[3] = rnd(1, &C, -0.5f, 0.5f);
    ins[4] = rnd(1, &C, 0.5f, 1.5f);
}

static void test_batchnorm_inference(void **state) {
    fl_tensor ins[5];
    bn_inputs(ins, 2, 3, 2);
    fl_value_kind kinds[5] = {IN, PARAM, PARAM, CONST, CONST};
    fl_attr eps = fl_attr_float("epsilon", 1e-2f);
    fl_model *m = run1("BatchNormalization", 5, ins, kinds, 1, 1, &eps);
    const fl_tensor *y = fl_model_output(m, 0);
    for (int64_t i = 0; i < ins[0].size; i++) {
        int c = (int)(i / 4 % 3);
        float want = ins[1].data[c] * (ins[0].data[i] - ins[3].data[c]) /
                         sqrtf(ins[4].data[c] + 1e-2f) + ins[2].data[c];
        assert_float_equal(y->data[i], want, 1e-5);
    }
    fl_model_free(m);
    tu_gradcheck("BatchNormalization", 5, ins, kinds, 1, &eps, 1e-2f, 1e-2f);
    /* mean and var have gradients in inference mode too */
    kinds[3] = kinds[4] = PARAM;
    tu_gradcheck("BatchNormalization", 5, ins, kinds, 0, NULL, 1e-3f, 1e-2f);
    free_all(5, ins);
}

/* training_mode=1 on the node: batch statistics, gradient through them */
static void test_batchnorm_training_grads(void **state) {
    fl_tensor ins[5];
    bn_inputs(ins, 3, 2, 2);
    fl_value_kind kinds[5] = {IN, PARAM, PARAM, CONST, CONST};
    fl_attr attr[2] = {fl_attr_int("training_mode", 1), fl_attr_float("momentum", 0.8f)};
    tu_gradcheck("BatchNormalization", 5, ins, kinds, 2, attr, 1e-3f, 2e-2f);
    free_all(5, ins);
}

/* m->training: normalised output has per-channel mean 0, variance 1; the running statistics
 * in the mean / var tensors move as PyTorch's do (unbiased variance); the ONNX outputs
 * running_mean / running_var use the biased one. */
static void test_batchnorm_training_values(void **state) {
    fl_err e = {0};
    const int64_t N = 4, C = 3, H = 3, cnt = N * H * H;
    fl_tensor ins[5];
    bn_inputs(ins, N, C, H);
    for (int c = 0; c < C; c++) ins[1].data[c] = 1, ins[2].data[c] = 0;
    fl_value_kind kinds[5] = {IN, PARAM, PARAM, CONST, CONST};
    fl_attr attr[2] = {fl_attr_int("training_mode", 1), fl_attr_float("epsilon", 1e-6f)};
    fl_model *m = tu_single_node("BatchNormalization", 5, ins, kinds, 3, 2, attr);
    m->training = 1;
    tu_forward(m, 5, ins, kinds);
    const fl_tensor *y = fl_model_output(m, 0);
    const float *rm = fl_model_tensor(m, "in3")->data, *rv = fl_model_tensor(m, "in4")->data;
    for (int c = 0; c < C; c++) {
        double mu = 0, ym = 0, yv = 0, sq = 0;
        for (int64_t i = 0; i < N; i++)
            for (int64_t j = 0; j < H * H; j++) {
                mu += ins[0].data[(i * C + c) * H * H + j];
                ym += y->data[(i * C + c) * H * H + j];
            }
        mu /= cnt, ym /= cnt;
        for (int64_t i = 0; i < N; i++)
            for (int64_t j = 0; j < H * H; j++) {
                double d = ins[0].data[(i * C + c) * H * H + j] - mu;
                sq += d * d;
                double dy = y->data[(i * C + c) * H * H + j] - ym;
                yv += dy * dy;
            }
        assert_float_equal(ym, 0, 1e-5);
        assert_float_equal(yv / cnt, 1, 1e-4);
        assert_float_equal(rm[c], 0.9 * ins[3].data[c] + 0.1 * mu, 1e-5);
        assert_float_equal(rv[c], 0.9 * ins[4].data[c] + 0.1 * sq / (cnt - 1), 1e-5);
        assert_float_equal(fl_model_output(m, 1)->data[c], 0.9 * ins[3].data[c] + 0.1 * mu, 1e-5);
        assert_float_equal(fl_model_output(m, 2)->data[c], 0.9 * ins[4].data[c] + 0.1 * sq / cnt,
                           1e-5);
    }
    /* a second step moves the running stats again (from the updated values) */
    float rm0 = rm[0];
    assert_int_equal(fl_model_forward_multi(m, 1, ins, &e), FL_OK);
    assert_true(fabsf(fl_model_tensor(m, "in3")->data[0] - rm0) > 0);
    /* extra outputs without training_mode are refused at build time */
    fl_model_free(m);
    m = fl_model_new();
    int in[5];
    for (int i = 0; i < 5; i++) {
        char name[16];
        snprintf(name, sizeof name, "v%d", i);
        in[i] = fl_model_add_value(m, name, i ? CONST : IN, &ins[i], &e);
    }
    int out[3];
    for (int i = 0; i < 3; i++) {
        char name[16];
        snprintf(name, sizeof name, "o%d", i);
        out[i] = fl_model_add_value(m, name, FL_VAL_ACT, NULL, &e);
    }
    assert_int_equal(fl_model_add_node(m, "BatchNormalization", "bn", 5, in, 3, out, 0, NULL, &e),
                     FL_ERR_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "training_mode"));
    fl_model_free(m);
    free_all(5, ins);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm), cmocka_unit_test(test_sgemm_split),
        cmocka_unit_test(test_gemm_defaults_and_errors),
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_elementwise),
        cmocka_unit_test(test_elementwise_same_input_and_errors),
        cmocka_unit_test(test_softmax_values),
        cmocka_unit_test(test_softmax_grads),
        cmocka_unit_test(test_softmax_old_opset),
        cmocka_unit_test(test_clip),
        cmocka_unit_test(test_dropout),
        cmocka_unit_test(test_batchnorm_inference),
        cmocka_unit_test(test_batchnorm_training_grads),
        cmocka_unit_test(test_batchnorm_training_values),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
