/* The graph machinery: building, planning, taps, backward seeds, input checks. */
#include "testutil.h"

/* x -> Relu -> a -> Sigmoid -> b ; plus a -> Tanh -> c (two outputs) */
static fl_model *small_model(void) {
    fl_err e = {0};
    fl_model *m = fl_model_new();
    int64_t shp[2] = {0, 4};
    fl_tensor decl = {0};
    fl_tensor_set_shape(&decl, 2, shp);
    int x = fl_model_add_value(m, "x", FL_VAL_INPUT, &decl, &e);
    int a = fl_model_add_op(m, "Relu", "relu", 1, &x, 0, NULL, &e);
    int b = fl_model_add_op(m, "Sigmoid", "sig", 1, &a, 0, NULL, &e);
    int c = fl_model_add_op(m, "Tanh", "tanh", 1, &a, 0, NULL, &e);
    assert_true(x >= 0 && a >= 0 && b >= 0 && c >= 0);
    int outs[2] = {b, c};
    assert_int_equal(fl_model_set_io(m, 1, &x, 2, outs, &e), FL_OK);
    assert_int_equal(fl_model_finish(m, &e), FL_OK);
    return m;
}

static void test_forward_and_taps(void **state) {
    fl_err e = {0};
    fl_model *m = small_model();
    int64_t shp[2] = {2, 4};
    fl_tensor x = tu_tensor(2, shp, NULL, 0, 0);
    float v[8] = {-1, 0.5f, 2, -3, 1, 1, -1, 0.25f};
    memcpy(x.data, v, sizeof v);
    assert_int_equal(fl_model_forward(m, &x, &e), FL_OK);
    const fl_tensor *a = fl_model_tensor(m, "relu_output_0");
    assert_non_null(a);
    assert_float_equal(a->data[0], 0.0f, 0);
    assert_float_equal(a->data[2], 2.0f, 0);
    const fl_tensor *b = fl_model_output(m, 0);
    assert_float_equal(b->data[1], 1.0f / (1.0f + expf(-0.5f)), 1e-6);
    assert_float_equal(fl_model_output(m, 1)->data[2], tanhf(2.0f), 1e-6);
    assert_null(fl_model_tensor(m, "no_such_layer"));

    fl_layer_info *L;
    int n = fl_model_layers(m, &L, &e);
    assert_int_equal(n, 3);
    assert_string_equal(L[0].op, "Relu");
    assert_int_equal(L[0].shape[0], 2);
    free(L);
    fl_tensor_free(&x);
    fl_model_free(m);
}

/* d(sum sigmoid(relu(x)))/dx = s(1-s) where x > 0, else 0; seeding the middle tensor gives
 * the relu mask alone. */
static void test_backward_seeds(void **state) {
    fl_err e = {0};
    fl_model *m = small_model();
    int64_t shp[2] = {1, 4};
    fl_tensor x = tu_tensor(2, shp, NULL, 0, 0), ones = tu_tensor(2, shp, NULL, 0, 0);
    float v[4] = {-1, 0.5f, 2, -3};
    memcpy(x.data, v, sizeof v);
    for (int i = 0; i < 4; i++) ones.data[i] = 1;
    assert_int_equal(fl_model_forward(m, &x, &e), FL_OK);
    const char *names[1] = {"sig_output_0"};
    assert_int_equal(fl_model_backward(m, 1, names, &ones, &e), FL_OK);
    const fl_tensor *dx = fl_model_grad(m, "x");
    assert_non_null(dx);
    float s = 1.0f / (1.0f + expf(-0.5f));
    assert_float_equal(dx->data[0], 0, 0);
    assert_float_equal(dx->data[1], s * (1 - s), 1e-6);
    /* a second call starts from zero again (no accumulation across calls) */
    names[0] = "relu_output_0";
    assert_int_equal(fl_model_backward(m, 1, names, &ones, &e), FL_OK);
    dx = fl_model_grad(m, "x");
    assert_float_equal(dx->data[1], 1.0f, 0);
    assert_float_equal(dx->data[3], 0.0f, 0);
    /* wrong seed shape is an error naming the tensor */
    fl_tensor bad = tu_tensor(1, shp + 1, NULL, 0, 0);
    assert_int_equal(fl_model_backward(m, 1, names, &bad, &e), FL_ERR_SHAPE);
    assert_non_null(strstr(e.msg, "relu_output_0"));
    names[0] = "nope";
    assert_int_equal(fl_model_backward(m, 1, names, &ones, &e), FL_ERR_NOTFOUND);
    fl_tensor_free(&bad);
    fl_tensor_free(&x);
    fl_tensor_free(&ones);
    fl_model_free(m);
}

static void test_bad_inputs(void **state) {
    fl_err e = {0};
    fl_model *m = small_model();
    int64_t shp[2] = {1, 5};
    fl_tensor x = tu_tensor(2, shp, NULL, 0, 0);
    assert_int_equal(fl_model_forward(m, &x, &e), FL_ERR_SHAPE);
    assert_non_null(strstr(e.msg, "'x'"));
    fl_tensor_free(&x);
    shp[1] = 4;
    x = tu_tensor(2, shp, NULL, 0, 0);
    x.data[2] = NAN;
    assert_int_equal(fl_model_forward(m, &x, &e), FL_ERR_NAN);
    /* a batch-size change re-plans */
    x.data[2] = 0;
    assert_int_equal(fl_model_forward(m, &x, &e), FL_OK);
    fl_tensor_free(&x);
    shp[0] = 3;
    x = tu_tensor(2, shp, NULL, 0, 0);
    assert_int_equal(fl_model_forward(m, &x, &e), FL_OK);
    assert_int_equal(fl_model_output(m, 0)->shape[0], 3);
    fl_tensor_free(&x);
    fl_model_free(m);
}

/* fl_tensor_find_nonfinite, eight values at a time and in the tail: the first bad index. */
static void test_find_nonfinite(void **state) {
    (void)state;
    int64_t shp[1] = {37};
    fl_tensor t = tu_tensor(1, shp, NULL, 0, 0);
    for (int i = 0; i < 37; i++) t.data[i] = (float)i - 18.5f;
    assert_int_equal(fl_tensor_find_nonfinite(&t), -1);
    const int at[] = {0, 7, 8, 20, 31, 32, 36};
    const float bad[] = {NAN, INFINITY, -INFINITY};
    for (size_t k = 0; k < sizeof at / sizeof at[0]; k++)
        for (int b = 0; b < 3; b++) {
            float keep = t.data[at[k]];
            t.data[at[k]] = bad[b];
            if (at[k] < 36) t.data[36] = NAN; /* a later one must not win */
            assert_int_equal(fl_tensor_find_nonfinite(&t), at[k]);
            t.data[at[k]] = keep;
            t.data[36] = 17.5f;
        }
    fl_tensor_free(&t);
}

static void test_build_errors(void **state) {
    fl_err e = {0};
    fl_model *m = fl_model_new();
    int x = fl_model_add_value(m, "x", FL_VAL_INPUT, NULL, &e);
    assert_int_equal(fl_model_add_value(m, "x", FL_VAL_ACT, NULL, &e), -1);
    assert_non_null(strstr(e.msg, "duplicate"));
    assert_int_equal(fl_model_add_op(m, "FancyOp", "n1", 1, &x, 0, NULL, &e), -1);
    assert_non_null(strstr(e.msg, "n1"));
    assert_non_null(strstr(e.msg, "FancyOp"));
    fl_attr bogus = fl_attr_int("bogus", 1);
    assert_int_equal(fl_model_add_op(m, "Relu", "n2", 1, &x, 1, &bogus, &e), -1);
    assert_non_null(strstr(e.msg, "bogus"));
    fl_model_free(m);
}

/* One value read by several nodes: the first gradient into it may be written rather than
 * added (fl_gin_fresh), the others must add. x -> {Relu, MaxPool, Conv} in every order of
 * the nodes (backward runs them last to first, so each op takes the "first" role once): the
 * gradient of x from all three outputs at once equals the sum of the three single-output
 * gradients. */
static fl_model *fanout_model(int rot, const fl_tensor *w) {
    fl_err e = {0};
    fl_model *m = fl_model_new();
    int64_t shp[4] = {0, 2, 6, 6}, k2[2] = {2, 2}, s2[2] = {2, 2};
    fl_tensor decl = {0};
    fl_tensor_set_shape(&decl, 4, shp);
    int x = fl_model_add_value(m, "x", FL_VAL_INPUT, &decl, &e);
    int wv = fl_model_add_value(m, "w", FL_VAL_PARAM, w, &e);
    fl_attr pool[2] = {fl_attr_ints("kernel_shape", 2, k2), fl_attr_ints("strides", 2, s2)};
    int outs[3];
    for (int k = 0; k < 3; k++) {
        int which = (k + rot) % 3, in[2] = {x, wv};
        outs[which] = which == 0   ? fl_model_add_op(m, "Relu", "relu", 1, in, 0, NULL, &e)
                      : which == 1 ? fl_model_add_op(m, "MaxPool", "pool", 1, in, 2, pool, &e)
                                   : fl_model_add_op(m, "Conv", "conv", 2, in, 0, NULL, &e);
        assert_true(outs[which] >= 0);
    }
    assert_int_equal(fl_model_set_io(m, 1, &x, 3, outs, &e), FL_OK);
    assert_int_equal(fl_model_finish(m, &e), FL_OK);
    return m;
}

static void test_fanout_grads(void **state) {
    (void)state;
    fl_err e = {0};
    fl_rng r;
    fl_rng_seed(&r, 11);
    int64_t xs[4] = {3, 2, 6, 6}, ws[4] = {3, 2, 3, 3};
    fl_tensor x = tu_tensor(4, xs, &r, -1, 1), w = tu_tensor(4, ws, &r, -1, 1);
    for (int rot = 0; rot < 3; rot++) {
        fl_model *m = fanout_model(rot, &w);
        assert_int_equal(fl_model_forward(m, &x, &e), FL_OK);
        fl_tensor seed[3];
        for (int k = 0; k < 3; k++) {
            const fl_tensor *y = fl_model_output(m, k);
            seed[k] = tu_tensor(y->ndim, y->shape, &r, -1, 1);
        }
        float *sum = calloc((size_t)x.size, sizeof(float));
        for (int k = 0; k < 3; k++) {
            assert_int_equal(fl_model_backward_idx(m, 1, &m->outputs[k], &seed[k], &e), FL_OK);
            const fl_tensor *g = fl_model_grad(m, "x");
            for (int64_t i = 0; i < x.size; i++) sum[i] += g->data[i];
        }
        assert_int_equal(fl_model_backward_idx(m, 3, m->outputs, seed, &e), FL_OK);
        const fl_tensor *g = fl_model_grad(m, "x");
        for (int64_t i = 0; i < x.size; i++) assert_float_equal(g->data[i], sum[i], 1e-5);
        free(sum);
        for (int k = 0; k < 3; k++) fl_tensor_free(&seed[k]);
        fl_model_free(m);
    }
    fl_tensor_free(&x);
    fl_tensor_free(&w);
}

static void test_activation_grads(void **state) {
    const char *ops[] = {"Relu", "LeakyRelu", "Sigmoid", "Tanh", "Identity"};
    fl_rng r;
    fl_rng_seed(&r, 7);
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        int64_t shp[2] = {3, 5};
        fl_tensor x = tu_tensor(2, shp, &r, -2, 2);
        for (int64_t j = 0; j < x.size; j++) /* keep away from the kink at 0 */
            if (fabsf(x.data[j]) < 0.05f) x.data[j] = 0.5f;
        fl_value_kind k = FL_VAL_INPUT;
        tu_gradcheck(ops[i], 1, &x, &k, 0, NULL, 1e-2f, 1e-2f);
        fl_tensor_free(&x);
    }
}

/* Batch sizes that change from pass to pass (a fuzzing round's): a smaller batch reuses the
 * buffers of a larger one, a larger one gets new ones, and every pass computes exactly what a
 * fresh model computes for that batch, gradients included. */
static void test_batch_size_changes(void **state) {
    fl_err e = {0};
    fl_model *m = small_model(), *fresh = small_model();
    static const int64_t sizes[] = {6, 2, 5, 9, 1, 9};
    const float *big_out = NULL;
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        int64_t shp[2] = {sizes[k], 4};
        fl_tensor x = tu_tensor(2, shp, NULL, 0, 0), ones = tu_tensor(2, shp, NULL, 0, 0);
        for (int64_t i = 0; i < x.size; i++) {
            x.data[i] = (float)((i * 7 + (int64_t)k) % 11) / 3.0f - 1.5f;
            ones.data[i] = 1;
        }
        assert_int_equal(fl_model_forward(m, &x, &e), FL_OK);
        const char *names[1] = {"sig_output_0"};
        assert_int_equal(fl_model_backward(m, 1, names, &ones, &e), FL_OK);
        fl_model_free(fresh);
        fresh = small_model();
        assert_int_equal(fl_model_forward(fresh, &x, &e), FL_OK);
        assert_int_equal(fl_model_backward(fresh, 1, names, &ones, &e), FL_OK);
        for (int o = 0; o < 2; o++) {
            const fl_tensor *y = fl_model_output(m, o), *y0 = fl_model_output(fresh, o);
            assert_int_equal(y->shape[0], sizes[k]);
            assert_int_equal(y->size, y0->size);
            assert_memory_equal(y->data, y0->data, sizeof(float) * (size_t)y->size);
        }
        const fl_tensor *dx = fl_model_grad(m, "x"), *dx0 = fl_model_grad(fresh, "x");
        assert_int_equal(dx->size, x.size);
        assert_memory_equal(dx->data, dx0->data, sizeof(float) * (size_t)dx->size);
        /* 6 then 2 and 5: the first buffer; 9 needs a new one, kept for 1 and 9 */
        if (k == 0 || k == 3) big_out = fl_model_output(m, 0)->data;
        else assert_ptr_equal(fl_model_output(m, 0)->data, big_out);
        fl_tensor_free(&x);
        fl_tensor_free(&ones);
    }
    fl_model_free(fresh);
    fl_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_and_taps), cmocka_unit_test(test_backward_seeds),
        cmocka_unit_test(test_bad_inputs), cmocka_unit_test(test_find_nonfinite),       cmocka_unit_test(test_build_errors),
        cmocka_unit_test(test_activation_grads), cmocka_unit_test(test_fanout_grads),
        cmocka_unit_test(test_batch_size_changes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
