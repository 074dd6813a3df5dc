/* Resize and Upsample (src/nn/op_resize.c): values PyTorch gives for F.interpolate, the legacy
 * forms, gradients of every mode by finite differences, and the errors. (The ONNX node tests
 * check the coordinate and nearest modes against ONNX's reference.) */
#include "opcheck.h"

static fl_attr str(const char *name, const char *v) {
    return (fl_attr){.name = (char *)name, .type = FL_ATTR_STRING, .s = (char *)v};
}

/* F.interpolate(x, scale_factor=2, mode='bilinear', align_corners=False) of [[1,2],[3,4]]. */
static void test_resize_bilinear(void **state) {
    fl_tensor ins[3] = {T(4, SHP(1, 1, 2, 2), VALS(1, 2, 3, 4)), T(1, SHP(0), NULL),
                        T(1, SHP(4), VALS(1, 1, 2, 2))};
    fl_attr a[2] = {str("mode", "linear"), str("coordinate_transformation_mode", "pytorch_half_pixel")};
    fl_model *m = must_run("Resize", 3, ins, (fl_value_kind[]){I, C, C}, 2, a, 13);
    assert_shape(fl_model_output(m, 0), 4, SHP(1, 1, 4, 4));
    const float want[16] = {1,   1.25f, 1.75f, 2,    1.5f, 1.75f, 2.25f, 2.5f,
                            2.5f, 2.75f, 3.25f, 3.5f, 3,    3.25f, 3.75f, 4};
    const fl_tensor *y = fl_model_output(m, 0);
    for (int i = 0; i < 16; i++) assert_float_equal(y->data[i], want[i], 1e-6);
    fl_model_free(m);
    /* the same from sizes (input 3), scales omitted */
    fl_tensor sz[4] = {ins[0], T(1, SHP(0), NULL), T(1, SHP(0), NULL), T(1, SHP(4), VALS(1, 1, 4, 4))};
    m = must_run("Resize", 4, sz, (fl_value_kind[]){I, C, C, C}, 2, a, 13);
    y = fl_model_output(m, 0);
    for (int i = 0; i < 16; i++) assert_float_equal(y->data[i], want[i], 1e-6);
    fl_model_free(m);
    free_all(3, ins);
    fl_tensor_free(&sz[1]), fl_tensor_free(&sz[2]), fl_tensor_free(&sz[3]);
}

/* Upsample-7 (scales attribute) and -9 (scales input), Resize-10: nearest repeats; Resize-10
 * downsampling takes ceil (onnxruntime). */
static void test_resize_legacy(void **state) {
    fl_tensor x = T(2, SHP(2, 2), VALS(1, 2, 3, 4));
    float sc[2] = {1, 2};
    fl_attr a[2] = {str("mode", "nearest"), {.name = "scales", .type = FL_ATTR_FLOATS, .n = 2, .floats = sc}};
    fl_model *m = must_run("Upsample", 1, &x, (fl_value_kind[]){I}, 2, a, 7);
    assert_values(fl_model_output(m, 0), VALS(1, 1, 2, 2, 3, 3, 4, 4));
    fl_model_free(m);
    fl_tensor ins[2] = {x, T(1, SHP(2), VALS(2, 1))};
    m = must_run("Upsample", 2, ins, (fl_value_kind[]){I, C}, 1, a, 9);
    assert_shape(fl_model_output(m, 0), 2, SHP(4, 2));
    assert_values(fl_model_output(m, 0), VALS(1, 2, 1, 2, 3, 4, 3, 4));
    fl_model_free(m);
    fl_tensor row = T(2, SHP(1, 5), VALS(0, 1, 2, 3, 4)), down = T(1, SHP(2), VALS(1, 0.6f));
    fl_tensor d[2] = {row, down};
    m = must_run("Resize", 2, d, (fl_value_kind[]){I, C}, 1, a, 10);
    /* out 3; x / 0.6 = 0, 1.67, 3.33 -> ceil 0, 2, 4 */
    assert_values(fl_model_output(m, 0), VALS(0, 2, 4));
    fl_model_free(m);
    fl_tensor_free(&x), fl_tensor_free(&ins[1]), fl_tensor_free(&row), fl_tensor_free(&down);
}

static void test_resize_gradients(void **state) {
    fl_rng r;
    fl_rng_seed(&r, 41);
    fl_tensor ins[3] = {tu_tensor(4, SHP(2, 2, 3, 4), &r, -1, 1), T(1, SHP(0), NULL),
                        T(1, SHP(4), VALS(1, 1, 1.5f, 0.75f))};
    const char *modes[] = {"nearest", "linear", "cubic"};
    const char *coords[] = {"half_pixel", "align_corners", "asymmetric"};
    for (int k = 0; k < 3; k++) {
        fl_attr a[3] = {str("mode", modes[k]), str("coordinate_transformation_mode", coords[k]),
                        fl_attr_int("exclude_outside", k == 2)};
        tu_gradcheck("Resize", 3, ins, (fl_value_kind[]){I, C, C}, 3, a, 1e-3f, 2e-3f);
    }
    free_all(3, ins);
}

static void test_resize_errors(void **state) {
    fl_tensor ins[4] = {T(2, SHP(2, 2), NULL), T(1, SHP(0), NULL), T(1, SHP(3), VALS(1, 2, 2)),
                        T(1, SHP(2), VALS(4, 4))};
    const fl_value_kind k[4] = {I, C, C, C};
    must_fail("Resize", 3, ins, k, 0, NULL, 13, FL_ERR_SHAPE, "scales has 3 values for 2 dims");
    must_fail("Resize", 4, ins, k, 0, NULL, 13, FL_ERR_FORMAT, "both scales and sizes");
    must_fail("Resize", 1, ins, k, 0, NULL, 13, FL_ERR_FORMAT, "neither scales nor sizes");
    fl_attr a = str("coordinate_transformation_mode", "tf_crop_and_resize");
    must_fail("Resize", 3, ins, k, 1, &a, 13, FL_ERR_UNSUPPORTED, "tf_crop_and_resize");
    a = str("mode", "bicubic");
    must_fail("Resize", 3, ins, k, 1, &a, 13, FL_ERR_UNSUPPORTED, "mode 'bicubic'");
    a = fl_attr_int("antialias", 1);
    must_fail("Resize", 3, ins, k, 1, &a, 18, FL_ERR_UNSUPPORTED, "antialias");
    ins[2].data[0] = -1;
    must_fail("Resize", 3, ins, k, 0, NULL, 13, FL_ERR_SHAPE, "scales has 3");
    free_all(4, ins);
    fl_tensor neg[3] = {T(2, SHP(2, 2), NULL), T(1, SHP(0), NULL), T(1, SHP(2), VALS(1, -2))};
    must_fail("Resize", 3, neg, k, 0, NULL, 13, FL_ERR_ARG, "not a positive number");
    free_all(3, neg);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resize_bilinear),
        cmocka_unit_test(test_resize_legacy),
        cmocka_unit_test(test_resize_gradients),
        cmocka_unit_test(test_resize_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
