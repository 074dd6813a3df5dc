/* Ops that move elements along each dim independently (index maps, src/nn/imap.c): Pad,
 * Slice, Split — known values in both ONNX spellings, gradients, and the errors. */
#include "opcheck.h"

#define P FL_VAL_PARAM

static fl_attr str_attr(const char *name, char *s) {
    fl_attr a = {.name = (char *)name, .type = FL_ATTR_STRING, .s = s};
    return a;
}

/* ---- Pad ------------------------------------------------------------------------------------- */
/* [[1,2,3],[4,5,6]] padded by one column on the left and two on the right of dim 1, and one
 * row below, in each mode. */
static void test_pad_modes(void **state) {
    fl_tensor x = T(2, SHP(2, 3), VALS(1, 2, 3, 4, 5, 6));
    const struct { char *mode; float want[4 * 6]; } cases[] = {
        {"constant", {9, 1, 2, 3, 9, 9, 9, 4, 5, 6, 9, 9, 9, 9, 9, 9, 9, 9}},
        {"reflect", {2, 1, 2, 3, 2, 1, 5, 4, 5, 6, 5, 4, 2, 1, 2, 3, 2, 1}},
        {"edge", {1, 1, 2, 3, 3, 3, 4, 4, 5, 6, 6, 6, 4, 4, 5, 6, 6, 6}},
        {"wrap", {3, 1, 2, 3, 1, 2, 6, 4, 5, 6, 4, 5, 3, 1, 2, 3, 1, 2}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        /* input form (opset 11): pads, constant_value */
        fl_tensor ins[3] = {x, T(1, SHP(4), VALS(0, 1, 1, 2)), T(0, NULL, VALS(9))};
        const fl_value_kind k[3] = {I, C, C};
        fl_attr mode = str_attr("mode", cases[c].mode);
        fl_model *m = must_run("Pad", 3, ins, k, 1, &mode, 11);
        assert_shape(fl_model_output(m, 0), 2, SHP(3, 6));
        assert_values(fl_model_output(m, 0), cases[c].want);
        fl_model_free(m);
        /* attribute form (opset 10): the same */
        fl_attr a[3] = {mode, fl_attr_ints("pads", 4, (int64_t[]){0, 1, 1, 2}),
                        fl_attr_float("value", 9)};
        m = must_run("Pad", 1, ins, k, 3, a, 10);
        assert_values(fl_model_output(m, 0), cases[c].want);
        fl_model_free(m);
        fl_tensor_free(&ins[1]);
        fl_tensor_free(&ins[2]);
    }
    fl_tensor_free(&x);
}

/* Negative pads crop; axes (opset 18) name the dims the pads are for; constant_value omitted
 * is 0; reflect pads larger than the dim reflect again, as numpy does. */
static void test_pad_axes_and_crop(void **state) {
    fl_tensor x = T(2, SHP(2, 3), VALS(1, 2, 3, 4, 5, 6));
    fl_tensor ins[4] = {x, T(1, SHP(2), VALS(-1, 1)), {0}, T(1, SHP(1), VALS(-1))};
    const fl_value_kind k[4] = {I, C, C, C};
    fl_model *m = must_run("Pad", 4, ins, k, 0, NULL, 18);
    assert_shape(fl_model_output(m, 0), 2, SHP(2, 3));
    assert_values(fl_model_output(m, 0), VALS(2, 3, 0, 5, 6, 0));
    fl_model_free(m);
    fl_tensor_free(&ins[1]);
    ins[1] = T(1, SHP(2), VALS(4, 0));
    fl_attr mode = str_attr("mode", "reflect");
    m = must_run("Pad", 4, ins, k, 1, &mode, 18);
    assert_values(fl_model_output(m, 0), VALS(1, 2, 3, 2, 1, 2, 3, 4, 5, 6, 5, 4, 5, 6));
    fl_model_free(m);
    free_all(1, &ins[1]);
    free_all(1, &ins[3]);
    fl_tensor_free(&x);
}

static void test_pad_errors(void **state) {
    fl_tensor x = T(2, SHP(2, 3), NULL);
    fl_tensor ins[3] = {x, T(1, SHP(3), VALS(0, 1, 1)), T(1, SHP(2), VALS(1, 2))};
    const fl_value_kind k[3] = {I, C, C};
    must_fail("Pad", 2, ins, k, 0, NULL, 11, FL_ERR_SHAPE, "3 pads for 2 dims, need 4");
    fl_tensor_free(&ins[1]);
    ins[1] = T(1, SHP(4), VALS(0, -2, 0, -2));
    must_fail("Pad", 2, ins, k, 0, NULL, 11, FL_ERR_SHAPE, "remove more than dim 1");
    fl_tensor_free(&ins[1]);
    ins[1] = T(1, SHP(4), VALS(0, 0, 0, 0));
    must_fail("Pad", 3, ins, k, 0, NULL, 11, FL_ERR_SHAPE, "constant_value must be a scalar");
    must_fail("Pad", 1, ins, k, 0, NULL, 11, FL_ERR_FORMAT, "input 1 is missing");
    must_fail("Pad", 1, ins, k, 0, NULL, 10, FL_ERR_FORMAT, "attribute 'pads' is missing");
    fl_attr pads = fl_attr_ints("pads", 4, (int64_t[]){0, 0, 0, 0});
    must_fail("Pad", 2, ins, k, 1, &pads, 11, FL_ERR_FORMAT, "both as attribute and input");
    fl_attr mode = str_attr("mode", "symmetric");
    must_fail("Pad", 2, ins, k, 1, &mode, 11, FL_ERR_UNSUPPORTED, "mode 'symmetric'");
    fl_tensor e0 = T(2, SHP(2, 0), NULL);
    fl_tensor ein[2] = {e0, T(1, SHP(4), VALS(0, 1, 0, 0))};
    mode = str_attr("mode", "edge");
    must_fail("Pad", 2, ein, k, 1, &mode, 11, FL_ERR_SHAPE, "which is empty");
    free_all(2, ein);
    free_all(3, ins);
}

/* Reflect and edge read border elements several times: their gradients add up; the fill
 * value gets the gradient of every padded position. */
static void test_pad_gradients(void **state) {
    fl_rng r;
    fl_rng_seed(&r, 11);
    fl_tensor x = tu_tensor(4, SHP(2, 3, 4, 5), &r, -1, 1);
    static char *modes[] = {"constant", "reflect", "edge", "wrap"};
    for (int c = 0; c < 4; c++) {
        fl_tensor ins[3] = {x, T(1, SHP(8), VALS(0, 1, 2, -1, 1, 0, 3, 2)),
                            tu_tensor(0, NULL, &r, -1, 1)};
        const fl_value_kind k[3] = {I, C, c == 0 ? P : C};
        fl_attr mode = str_attr("mode", modes[c]);
        tu_gradcheck("Pad", 3, ins, k, 1, &mode, 1e-2f, 1e-3f);
        free_all(2, &ins[1]);
    }
    fl_tensor_free(&x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pad_modes),
        cmocka_unit_test(test_pad_axes_and_crop),
        cmocka_unit_test(test_pad_errors),
        cmocka_unit_test(test_pad_gradients),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
