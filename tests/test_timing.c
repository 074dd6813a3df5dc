/* Layer timing (src/nn/timing.c): fl_node_flops counts a convolution's and a matrix product's
 * arithmetic exactly (grouped, strided, transposed operands), other ops count nothing; and
 * fl_model_time_layers times every node while leaving the pass's results as a plain forward
 * pass leaves them. */
#include "testutil.h"

static void fill(fl_tensor *t, float scale) {
    for (int64_t i = 0; i < t->size; i++) t->data[i] = scale * (float)((i * 37) % 11 - 5);
}

/* x [2,4,9,9] -> Conv 6x(4/2)x3x3 stride 2 group 2 -> [2,6,4,4] -> Relu -> Flatten [2,96]
 * -> Gemm with B [10,96] (transB) -> [2,10] */
static fl_model *small_net(void) {
    fl_err e = {0};
    fl_model *m = fl_model_new();
    fl_tensor decl = {0}, w = {0}, b = {0};
    int64_t xs[4] = {0, 4, 9, 9}, ws[4] = {6, 2, 3, 3}, bs[2] = {10, 96};
    fl_tensor_set_shape(&decl, 4, xs);
    assert_int_equal(fl_tensor_alloc(&w, 4, ws), FL_OK);
    assert_int_equal(fl_tensor_alloc(&b, 2, bs), FL_OK);
    fill(&w, 0.1f);
    fill(&b, 0.01f);
    int in[2];
    in[0] = fl_model_add_value(m, "x", FL_VAL_INPUT, &decl, &e);
    in[1] = fl_model_add_value(m, "w", FL_VAL_PARAM, &w, &e);
    int64_t st[2] = {2, 2};
    fl_attr ca[2] = {fl_attr_ints("strides", 2, st), fl_attr_int("group", 2)};
    int c = fl_model_add_op(m, "Conv", "conv", 2, in, 2, ca, &e);
    int r = fl_model_add_op(m, "Relu", "relu", 1, &c, 0, NULL, &e);
    int f = fl_model_add_op(m, "Flatten", "flat", 1, &r, 0, NULL, &e);
    int gin[2] = {f, fl_model_add_value(m, "b", FL_VAL_PARAM, &b, &e)};
    fl_attr ga[1] = {fl_attr_int("transB", 1)};
    int y = fl_model_add_op(m, "Gemm", "fc", 2, gin, 1, ga, &e);
    assert_true(c >= 0 && r >= 0 && f >= 0 && y >= 0);
    assert_int_equal(fl_model_set_io(m, 1, in, 1, &y, &e), FL_OK);
    assert_int_equal(fl_model_finish(m, &e), FL_OK);
    fl_tensor_free(&w);
    fl_tensor_free(&b);
    return m;
}

static int node_index(const fl_model *m, const char *name) {
    for (int i = 0; i < m->n_nodes; i++)
        if (!strcmp(m->nodes[i].name, name)) return i;
    return -1;
}

static void test_flops_and_times(void **state) {
    (void)state;
    fl_err e = {0};
    fl_model *m = small_net();
    int64_t xs[4] = {2, 4, 9, 9};
    fl_tensor x = {0};
    assert_int_equal(fl_tensor_alloc(&x, 4, xs), FL_OK);
    fill(&x, 0.2f);
    assert_int_equal(fl_model_forward(m, &x, &e), FL_OK);
    float want[20];
    memcpy(want, fl_model_output(m, 0)->data, sizeof want);

    fl_timing t;
    assert_int_equal(fl_model_time_layers(m, 1, &x, 4, &t, &e), FL_OK);
    assert_int_equal(t.n, m->n_nodes);
    /* Conv: 2 images x 6 channels x 4x4 outputs x (2 x 3 x 3) taps, x 2 */
    assert_true(t.flops[node_index(m, "conv")] == 2.0 * 2 * 6 * 16 * 18);
    /* Gemm: [2,96] x [96,10] */
    assert_true(t.flops[node_index(m, "fc")] == 2.0 * 2 * 10 * 96);
    assert_true(t.flops[node_index(m, "relu")] == 0);
    double sum = 0;
    for (int i = 0; i < t.n; i++) {
        assert_true(t.secs[i] >= 0);
        sum += t.secs[i];
    }
    assert_true(fabs(sum - t.total) <= 1e-12 * (1 + sum));
    fl_timing_free(&t);
    assert_null(t.secs);
    /* the timed passes ran the same nodes on the same input */
    assert_memory_equal(fl_model_output(m, 0)->data, want, sizeof want);
    fl_tensor_free(&x);
    fl_model_free(m);
}

/* the input is checked as by a forward pass: a wrong shape fails, naming it, and leaves
 * nothing to free */
static void test_bad_input(void **state) {
    (void)state;
    fl_err e = {0};
    fl_model *m = small_net();
    int64_t xs[4] = {2, 3, 9, 9};
    fl_tensor x = {0};
    assert_int_equal(fl_tensor_alloc(&x, 4, xs), FL_OK);
    fl_timing t;
    assert_int_not_equal(fl_model_time_layers(m, 1, &x, 2, &t, &e), FL_OK);
    assert_non_null(strstr(e.msg, "input 'x'"));
    assert_null(t.secs);
    fl_tensor_free(&x);
    fl_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flops_and_times),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
