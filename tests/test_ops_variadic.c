/* Sum, Mean, Max, Min of several broadcasting inputs (src/nn/op_variadic.c): values,
 * gradients (summed over broadcast dims, split among ties), and the errors. */
#include "opcheck.h"

#define P FL_VAL_PARAM

static void test_variadic_values(void **state) {
    /* [2,3] with [3] and a scalar */
    fl_tensor ins[3] = {T(2, SHP(2, 3), VALS(1, 5, 3, -4, 0, 6)), T(1, SHP(3), VALS(2, 2, 2)),
                        T(0, NULL, VALS(4))};
    const fl_value_kind k[3] = {I, I, I};
    const struct { const char *op; float want[6]; } cases[] = {
        {"Sum", {7, 11, 9, 2, 6, 12}},
        {"Mean", {7 / 3.0f, 11 / 3.0f, 3, 2 / 3.0f, 2, 4}},
        {"Max", {4, 5, 4, 4, 4, 6}},
        {"Min", {1, 2, 2, -4, 0, 2}},
    };
    for (int c = 0; c < 4; c++) {
        fl_model *m = must_run(cases[c].op, 3, ins, k, 0, NULL, 13);
        assert_shape(fl_model_output(m, 0), 2, SHP(2, 3));
        const fl_tensor *y = fl_model_output(m, 0);
        for (int i = 0; i < 6; i++) assert_float_equal(y->data[i], cases[c].want[i], 1e-6);
        fl_model_free(m);
        /* one input: a copy */
        m = must_run(cases[c].op, 1, ins, k, 0, NULL, 13);
        assert_values(fl_model_output(m, 0), ins[0].data);
        fl_model_free(m);
    }
    free_all(3, ins);
}

static void test_variadic_gradients(void **state) {
    fl_rng r;
    fl_rng_seed(&r, 31);
    fl_tensor ins[3] = {tu_tensor(3, SHP(2, 3, 4), &r, -1, 1), tu_tensor(2, SHP(3, 1), &r, -1, 1),
                        tu_tensor(1, SHP(4), &r, -1, 1)};
    const fl_value_kind k[3] = {I, P, I};
    static const char *const ops[] = {"Sum", "Mean", "Max", "Min"};
    for (int c = 0; c < 4; c++) tu_gradcheck(ops[c], 3, ins, k, 0, NULL, 1e-3f, 2e-3f);
    free_all(3, ins);
}

/* Max(a, a): each copy gets half of the gradient. */
static void test_variadic_ties(void **state) {
    fl_err e = {0};
    fl_tensor ins[2] = {T(1, SHP(2), VALS(1, 3)), T(1, SHP(2), VALS(1, 2))};
    fl_model *m = must_run("Max", 2, ins, (fl_value_kind[]){I, I}, 0, NULL, 13);
    fl_tensor seed = T(1, SHP(2), VALS(1, 1));
    int o = m->outputs[0];
    assert_int_equal(fl_model_backward_idx(m, 1, &o, &seed, &e), FL_OK);
    assert_values(fl_model_grad(m, "in0"), VALS(0.5f, 1));
    assert_values(fl_model_grad(m, "in1"), VALS(0.5f, 0));
    fl_model_free(m);
    fl_tensor_free(&seed);
    free_all(2, ins);
}

static void test_variadic_errors(void **state) {
    fl_tensor ins[2] = {T(1, SHP(2), NULL), T(1, SHP(3), NULL)};
    const fl_value_kind k[2] = {I, I};
    must_fail("Sum", 2, ins, k, 0, NULL, 13, FL_ERR_SHAPE, "does not broadcast");
    must_fail("Max", 0, ins, k, 0, NULL, 13, FL_ERR_FORMAT, "inputs");
    free_all(2, ins);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_variadic_values),
        cmocka_unit_test(test_variadic_gradients),
        cmocka_unit_test(test_variadic_ties),
        cmocka_unit_test(test_variadic_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
