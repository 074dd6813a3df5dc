/* LayerNormalization (src/nn/op_layernorm.c): values and statistics outputs against a
 * double-precision reference for every axis, gradients to X, Scale and B, and the errors. */
#include "opcheck.h"

#define P FL_VAL_PARAM

static void test_layernorm_values(void **state) {
    fl_rng r;
    fl_rng_seed(&r, 21);
    fl_tensor x = tu_tensor(3, SHP(2, 3, 4), &r, -2, 3);
    for (int axis = -3; axis < 3; axis++) {
        int ax = axis < 0 ? axis + 3 : axis;
        int64_t rows = 1, D = 1;
        for (int d = 0; d < 3; d++) {
            if (d < ax) rows *= x.shape[d];
            else D *= x.shape[d];
        }
        fl_tensor ins[3] = {x, tu_tensor(1, &D, &r, 0.5f, 2), tu_tensor(1, &D, &r, -1, 1)};
        const fl_value_kind k[3] = {I, P, P};
        fl_attr a[2] = {fl_attr_int("axis", axis), fl_attr_float("epsilon", 1e-3f)};
        fl_err e = {0};
        fl_model *m;
        if (build_n("LayerNormalization", 3, ins, k, 3, 2, a, 17, &m, &e) != FL_OK)
            fail_msg("%s", e.msg);
        assert_int_equal(fl_model_forward(m, &x, &e), FL_OK);
        const fl_tensor *y = fl_model_output(m, 0), *mean = fl_model_output(m, 1),
                        *istd = fl_model_output(m, 2);
        assert_int_equal(mean->ndim, 3);
        assert_int_equal(mean->size, rows);
        for (int d = 0; d < 3; d++) assert_int_equal(istd->shape[d], d < ax ? x.shape[d] : 1);
        for (int64_t i = 0; i < rows; i++) {
            double s = 0, q = 0;
            for (int64_t j = 0; j < D; j++) s += x.data[i * D + j];
            s /= (double)D;
            for (int64_t j = 0; j < D; j++) q += pow(x.data[i * D + j] - s, 2);
            double is = 1 / sqrt(q / (double)D + 1e-3);
            assert_float_equal(mean->data[i], s, 1e-6);
            assert_float_equal(istd->data[i], is, 1e-5 * is);
            for (int64_t j = 0; j < D; j++) {
                double want = (x.data[i * D + j] - s) * is * ins[1].data[j] + ins[2].data[j];
                assert_float_equal(y->data[i * D + j], want, 1e-5);
            }
        }
        fl_model_free(m);
        free_all(2, &ins[1]);
    }
    fl_tensor_free(&x);
}

static void test_layernorm_gradients(void **state) {
    fl_rng r;
    fl_rng_seed(&r, 22);
    fl_tensor x = tu_tensor(3, SHP(3, 4, 5), &r, -2, 2);
    const int64_t Ds[3] = {60, 20, 5};
    for (int ax = 0; ax < 3; ax++) {
        fl_tensor ins[3] = {x, tu_tensor(1, &Ds[ax], &r, 0.5f, 2), tu_tensor(1, &Ds[ax], &r, -1, 1)};
        fl_attr a = fl_attr_int("axis", ax);
        tu_gradcheck("LayerNormalization", 3, ins, (fl_value_kind[]){I, P, P}, 1, &a, 1e-3f, 3e-3f);
        /* no bias, constant scale */
        tu_gradcheck("LayerNormalization", 2, ins, (fl_value_kind[]){I, C}, 1, &a, 1e-3f, 3e-3f);
        free_all(2, &ins[1]);
    }
    fl_tensor_free(&x);
}

static void test_layernorm_errors(void **state) {
    fl_tensor ins[3] = {T(2, SHP(2, 3), NULL), T(1, SHP(2), VALS(1, 1)), T(1, SHP(3), NULL)};
    const fl_value_kind k[3] = {I, C, C};
    must_fail("LayerNormalization", 3, ins, k, 0, NULL, 17, FL_ERR_SHAPE, "Scale has shape [2]");
    fl_attr a = fl_attr_int("axis", 2);
    must_fail("LayerNormalization", 3, ins, k, 1, &a, 17, FL_ERR_ARG, "axis 2 out of range");
    must_fail("LayerNormalization", 1, ins, k, 0, NULL, 17, FL_ERR_FORMAT, "inputs");
    free_all(3, ins);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layernorm_values),
        cmocka_unit_test(test_layernorm_gradients),
        cmocka_unit_test(test_layernorm_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
