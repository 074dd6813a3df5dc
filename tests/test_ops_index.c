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


/* ---- Slice ------------------------------------------------------------------------------------ */
/* x = 0..23 as [2,3,4]. */
static void test_slice_values(void **state) {
    fl_tensor x = T(3, SHP(2, 3, 4), NULL);
    const fl_value_kind k[5] = {I, C, C, C, C};
    /* x[:, 1:, ::-2] with INT64_MAX / INT64_MIN-style bounds, as torch writes them */
    fl_tensor ins[5] = {x, T(1, SHP(2), VALS(1, -1)), T(1, SHP(2), VALS(9.2233720e18f, -9.2233720e18f)),
                        T(1, SHP(2), VALS(1, 2)), T(1, SHP(2), VALS(1, -2))};
    fl_model *m = must_run("Slice", 5, ins, k, 0, NULL, 13);
    assert_shape(fl_model_output(m, 0), 3, SHP(2, 2, 2));
    assert_values(fl_model_output(m, 0), VALS(7, 5, 11, 9, 19, 17, 23, 21));
    fl_model_free(m);
    /* no axes, no steps: the first dims (dim 1: from 2 to -huge, clamped to 0, is empty) */
    m = must_run("Slice", 3, ins, k, 0, NULL, 13);
    assert_shape(fl_model_output(m, 0), 3, SHP(1, 0, 4));
    fl_model_free(m);
    free_all(4, &ins[1]);
    /* attribute form (opset 9): x[1, 0:2, -1:] */
    fl_attr a[3] = {fl_attr_ints("starts", 3, (int64_t[]){1, 0, -1}),
                    fl_attr_ints("ends", 3, (int64_t[]){2, 2, 100}),
                    fl_attr_ints("axes", 3, (int64_t[]){0, 1, 2})};
    m = must_run("Slice", 1, &x, k, 3, a, 9);
    assert_shape(fl_model_output(m, 0), 3, SHP(1, 2, 1));
    assert_values(fl_model_output(m, 0), VALS(15, 19));
    fl_model_free(m);
    /* an empty slice */
    fl_tensor e0[3] = {x, T(1, SHP(1), VALS(3)), T(1, SHP(1), VALS(1))};
    m = must_run("Slice", 3, e0, k, 0, NULL, 13);
    assert_shape(fl_model_output(m, 0), 3, SHP(0, 3, 4));
    fl_model_free(m);
    free_all(2, &e0[1]);
    fl_tensor_free(&x);
}

static void test_slice_errors(void **state) {
    fl_tensor x = T(2, SHP(2, 3), NULL);
    const fl_value_kind k[5] = {I, C, C, C, C};
    fl_tensor ins[5] = {x, T(1, SHP(1), VALS(0)), T(1, SHP(2), VALS(1, 1)), T(1, SHP(1), VALS(2)),
                        T(1, SHP(1), VALS(0))};
    must_fail("Slice", 3, ins, k, 0, NULL, 13, FL_ERR_SHAPE, "1 starts, 2 ends");
    fl_tensor_free(&ins[2]);
    ins[2] = T(1, SHP(1), VALS(1));
    must_fail("Slice", 4, ins, k, 0, NULL, 13, FL_ERR_ARG, "axis 2 out of range");
    fl_tensor_free(&ins[3]);
    ins[3] = T(1, SHP(1), VALS(0));
    must_fail("Slice", 5, ins, k, 0, NULL, 13, FL_ERR_ARG, "step 0");
    must_fail("Slice", 1, ins, k, 0, NULL, 13, FL_ERR_FORMAT, "inputs 1 and 2 are required");
    fl_attr a = fl_attr_ints("starts", 1, (int64_t[]){0});
    must_fail("Slice", 1, ins, k, 1, &a, 9, FL_ERR_FORMAT, "attribute 'ends' is missing");
    must_fail("Slice", 3, ins, k, 1, &a, 9, FL_ERR_FORMAT, "both as attributes and inputs");
    free_all(5, ins);
}

/* ---- Split ------------------------------------------------------------------------------------ */
/* Split a [2,5] tensor; the outputs of a multi-output node, by hand. */
static void split_run(int n_in, const fl_tensor *ins, int n_out, int n_attr, const fl_attr *a,
                      int opset, const int64_t *widths, const float *const *want) {
    const fl_value_kind k[2] = {I, C};
    fl_err e = {0};
    fl_model *m;
    if (build_n("Split", n_in, ins, k, n_out, n_attr, a, opset, &m, &e) != FL_OK)
        fail_msg("Split: %s", e.msg);
    if (fl_model_forward(m, &ins[0], &e) != FL_OK) fail_msg("Split: %s", e.msg);
    for (int i = 0; i < n_out; i++) {
        assert_shape(fl_model_output(m, i), 2, SHP(2, widths[i]));
        assert_values(fl_model_output(m, i), want[i]);
    }
    fl_model_free(m);
}

static void test_split(void **state) {
    fl_tensor ins[2] = {T(2, SHP(2, 5), NULL), T(1, SHP(2), VALS(2, 3))};
    const float *w23[] = {VALS(0, 1, 5, 6), VALS(2, 3, 4, 7, 8, 9)};
    fl_attr axis = fl_attr_int("axis", -1);
    split_run(2, ins, 2, 1, &axis, 13, SHP(2, 3), w23);               /* split as input */
    fl_attr a[2] = {axis, fl_attr_ints("split", 2, (int64_t[]){2, 3})};
    split_run(1, ins, 2, 2, a, 11, SHP(2, 3), w23);                   /* as attribute */
    a[1] = fl_attr_int("num_outputs", 2);                             /* opset 18: 3 + 2 */
    const float *w32[] = {VALS(0, 1, 2, 5, 6, 7), VALS(3, 4, 8, 9)};
    split_run(1, ins, 2, 2, a, 18, SHP(3, 2), w32);
    const float *w5[] = {VALS(0, 5), VALS(1, 6), VALS(2, 7), VALS(3, 8), VALS(4, 9)};
    split_run(1, ins, 5, 1, &axis, 13, SHP(1, 1, 1, 1, 1), w5);       /* equal parts */

    const fl_value_kind k[2] = {I, C};
    fl_err e = {0};
    fl_model *m;
    a[1] = fl_attr_ints("split", 2, (int64_t[]){2, 2});
    assert_int_equal(build_n("Split", 1, ins, k, 2, 2, a, 11, &m, &e), FL_OK);
    assert_int_equal(fl_model_forward(m, &ins[0], &e), FL_ERR_SHAPE);
    assert_non_null(strstr(e.msg, "sizes add up to 4"));
    fl_model_free(m);
    assert_int_equal(build_n("Split", 1, ins, k, 2, 1, &axis, 13, &m, &e), FL_OK);
    assert_int_equal(fl_model_forward(m, &ins[0], &e), FL_ERR_SHAPE);
    assert_non_null(strstr(e.msg, "does not split into 2 equal parts"));
    fl_model_free(m);
    a[1] = fl_attr_int("num_outputs", 3);
    assert_int_equal(build_n("Split", 1, ins, k, 2, 2, a, 18, &m, &e), FL_ERR_FORMAT);
    assert_non_null(strstr(e.msg, "num_outputs is 3 but the node has 2 outputs"));
    free_all(2, ins);
}

static void test_slice_split_gradients(void **state) {
    fl_rng r;
    fl_rng_seed(&r, 12);
    fl_tensor x = tu_tensor(4, SHP(2, 3, 4, 5), &r, -1, 1);
    const fl_value_kind k[5] = {I, C, C, C, C};
    fl_tensor ins[5] = {x, T(1, SHP(3), VALS(1, -1, 0)), T(1, SHP(3), VALS(3, -100, 5)),
                        T(1, SHP(3), VALS(1, 3, 2)), T(1, SHP(3), VALS(1, -2, 2))};
    tu_gradcheck("Slice", 5, ins, k, 0, NULL, 1e-2f, 1e-3f);
    free_all(4, &ins[1]);
    fl_tensor sp[2] = {x, T(1, SHP(3), VALS(1, 0, 2))};
    fl_attr a = fl_attr_int("axis", 1);
    tu_gradcheck_n("Split", 2, sp, k, 3, 1, &a, 1e-2f, 1e-3f);
    fl_tensor_free(&sp[1]);
    a.i = -1;
    tu_gradcheck_n("Split", 1, sp, k, 5, 1, &a, 1e-2f, 1e-3f);
    fl_tensor_free(&x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pad_modes),
        cmocka_unit_test(test_pad_axes_and_crop),
        cmocka_unit_test(test_pad_errors),
        cmocka_unit_test(test_pad_gradients),
        cmocka_unit_test(test_slice_values),
        cmocka_unit_test(test_slice_errors),
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_slice_split_gradients),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
