/* LayerNormalization (src/nn/op_layernorm.c): values and statistics outputs against a
 * double-precision reference for every axis, gradients to X, Scale and B, and the errors.
 * InstanceNormalization and GroupNormalization (src/nn/op_groupnorm.c): the same checks, with
 * GroupNormalization's per-group (opset 18) and per-channel (opset 21) scale. */
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

/* Reference: groups of C/G channels normalised together, scale / B indexed by pidx. */
static void groupnorm_ref(const fl_tensor *x, int64_t G, const float *scale, const float *bias,
                          int per_group, float eps, float *y) {
    int64_t N = x->shape[0], ch = x->shape[1], S = x->size / (N * ch), Cg = ch / G, D = Cg * S;
    for (int64_t r = 0; r < N * G; r++) {
        const float *xr = x->data + r * D;
        double mean = 0, var = 0;
        for (int64_t j = 0; j < D; j++) mean += xr[j];
        mean /= (double)D;
        for (int64_t j = 0; j < D; j++) var += (xr[j] - mean) * (xr[j] - mean);
        var /= (double)D;
        for (int64_t j = 0; j < D; j++) {
            int64_t c = (r % G) * Cg + j / S, p = per_group ? r % G : c;
            y[r * D + j] = (float)((xr[j] - mean) / sqrt(var + eps) * scale[p] + bias[p]);
        }
    }
}

static void test_groupnorm_values(void **state) {
    fl_rng r;
    fl_rng_seed(&r, 23);
    fl_tensor x = tu_tensor(4, SHP(2, 6, 3, 2), &r, -2, 3);
    const struct { const char *op; int64_t G; int opset, per_group; } cases[] = {
        {"InstanceNormalization", 6, 13, 0},
        {"GroupNormalization", 3, 18, 1},
        {"GroupNormalization", 2, 21, 0},
        {"GroupNormalization", 1, 21, 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int64_t np = cases[c].per_group ? cases[c].G : 6;
        fl_tensor ins[3] = {x, tu_tensor(1, &np, &r, 0.5f, 2), tu_tensor(1, &np, &r, -1, 1)};
        fl_attr a[2] = {fl_attr_float("epsilon", 1e-3f), fl_attr_int("num_groups", cases[c].G)};
        int na = strcmp(cases[c].op, "GroupNormalization") == 0 ? 2 : 1;
        fl_model *m = must_run(cases[c].op, 3, ins, (fl_value_kind[]){I, P, P}, na, a,
                               cases[c].opset);
        float want[72];
        groupnorm_ref(&x, cases[c].G, ins[1].data, ins[2].data, cases[c].per_group, 1e-3f, want);
        const fl_tensor *y = fl_model_output(m, 0);
        assert_shape(y, 4, x.shape);
        for (int64_t i = 0; i < y->size; i++) assert_float_equal(y->data[i], want[i], 1e-5);
        fl_model_free(m);
        free_all(2, &ins[1]);
    }
    fl_tensor_free(&x);
}

static void test_groupnorm_gradients(void **state) {
    fl_rng r;
    fl_rng_seed(&r, 24);
    fl_tensor x = tu_tensor(4, SHP(2, 4, 3, 3), &r, -2, 2);
    fl_tensor ins[3] = {x, tu_tensor(1, SHP(4), &r, 0.5f, 2), tu_tensor(1, SHP(4), &r, -1, 1)};
    tu_gradcheck("InstanceNormalization", 3, ins, (fl_value_kind[]){I, P, P}, 0, NULL, 1e-3f, 3e-3f);
    fl_attr g2 = fl_attr_int("num_groups", 2);
    /* tu_single_node's model has the default opset (below 21): one scale per group; the
     * per-channel path is InstanceNormalization's above */
    fl_tensor pg[3] = {x, tu_tensor(1, SHP(2), &r, 0.5f, 2), tu_tensor(1, SHP(2), &r, -1, 1)};
    tu_gradcheck("GroupNormalization", 3, pg, (fl_value_kind[]){I, P, P}, 1, &g2, 1e-3f, 3e-3f);
    free_all(2, &ins[1]);
    free_all(2, &pg[1]);
    fl_tensor_free(&x);
}

static void test_groupnorm_errors(void **state) {
    fl_tensor ins[3] = {T(3, SHP(2, 4, 3), NULL), T(1, SHP(4), NULL), T(1, SHP(4), NULL)};
    const fl_value_kind k[3] = {I, C, C};
    fl_attr g3 = fl_attr_int("num_groups", 3), g2 = fl_attr_int("num_groups", 2);
    must_fail("GroupNormalization", 3, ins, k, 1, &g3, 21, FL_ERR_SHAPE, "do not split into 3");
    /* opset 18: one value per group, so a per-channel scale is refused */
    must_fail("GroupNormalization", 3, ins, k, 1, &g2, 18, FL_ERR_SHAPE, "(one per group)");
    must_fail("GroupNormalization", 3, ins, k, 0, NULL, 21, FL_ERR_FORMAT, "num_groups");
    must_fail("InstanceNormalization", 2, ins, k, 0, NULL, 13, FL_ERR_FORMAT, "inputs");
    fl_tensor bad = T(1, SHP(3), NULL);
    fl_tensor_free(&ins[1]);
    ins[1] = bad;
    must_fail("InstanceNormalization", 3, ins, k, 0, NULL, 13, FL_ERR_SHAPE, "scale has shape [3]");
    fl_tensor_free(&ins[0]), fl_tensor_free(&bad), fl_tensor_free(&ins[2]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layernorm_values),
        cmocka_unit_test(test_layernorm_gradients),
        cmocka_unit_test(test_layernorm_errors),
        cmocka_unit_test(test_groupnorm_values),
        cmocka_unit_test(test_groupnorm_gradients),
        cmocka_unit_test(test_groupnorm_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
