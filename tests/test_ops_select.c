/* Ops that repeat, select, scatter and compare (src/nn/op_broadcast.c, op_scatter.c,
 * op_elementwise.c, op_unary.c): Expand, Tile, Where, ScatterND, the comparisons and logical
 * ops, Not and Mod — values against hand computed results, gradients by finite differences,
 * bool outputs, and the errors. */
#include "opcheck.h"

#define P FL_VAL_PARAM

static fl_tensor ints(int n, const float *v) { return T(1, (int64_t[]){n}, v); }

static void test_expand_values(void **state) {
    /* [3,1] to [2,3,4] (rank grows); a 1 in the shape keeps the input's dim */
    fl_tensor ins[2] = {T(2, SHP(3, 1), VALS(1, 2, 3)), ints(3, VALS(2, 1, 4))};
    fl_model *m = must_run("Expand", 2, ins, (fl_value_kind[]){I, C}, 0, NULL, 13);
    const fl_tensor *y = fl_model_output(m, 0);
    assert_shape(y, 3, SHP(2, 3, 4));
    for (int64_t i = 0; i < y->size; i++) assert_float_equal(y->data[i], ((i / 4) % 3 + 1), 0);
    fl_model_free(m);
    /* a shorter shape than the input's rank: [2,3] with shape [3] is the input itself */
    fl_tensor t2[2] = {T(2, SHP(2, 3), NULL), ints(1, VALS(3))};
    m = must_run("Expand", 2, t2, (fl_value_kind[]){I, C}, 0, NULL, 8);
    assert_shape(fl_model_output(m, 0), 2, SHP(2, 3));
    assert_iota(fl_model_output(m, 0));
    fl_model_free(m);
    free_all(2, ins);
    free_all(2, t2);
}

static void test_tile_values(void **state) {
    fl_tensor ins[2] = {T(2, SHP(2, 2), VALS(1, 2, 3, 4)), ints(2, VALS(2, 3))};
    fl_model *m = must_run("Tile", 2, ins, (fl_value_kind[]){I, C}, 0, NULL, 13);
    assert_shape(fl_model_output(m, 0), 2, SHP(4, 6));
    assert_values(fl_model_output(m, 0), VALS(1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4,  //
                                              1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4));
    fl_model_free(m);
    free_all(2, ins);
}

static void test_where_values(void **state) {
    /* condition [2,1] against X [3] and a scalar Y */
    fl_tensor ins[3] = {T(2, SHP(2, 1), VALS(1, 0)), T(1, SHP(3), VALS(1, 2, 3)), T(0, NULL, VALS(9))};
    fl_model *m = must_run("Where", 3, ins, (fl_value_kind[]){I, I, I}, 0, NULL, 16);
    assert_shape(fl_model_output(m, 0), 2, SHP(2, 3));
    assert_values(fl_model_output(m, 0), VALS(1, 2, 3, 9, 9, 9));
    fl_model_free(m);
    free_all(3, ins);
}

static void test_repeat_gradients(void **state) {
    fl_rng r;
    fl_rng_seed(&r, 5);
    fl_tensor ex[2] = {tu_tensor(3, SHP(2, 1, 3), &r, -1, 1), ints(4, VALS(2, 2, 4, 3))};
    tu_gradcheck("Expand", 2, ex, (fl_value_kind[]){I, C}, 0, NULL, 1e-3f, 1e-3f);
    fl_tensor ti[2] = {tu_tensor(2, SHP(2, 3), &r, -1, 1), ints(2, VALS(3, 2))};
    tu_gradcheck("Tile", 2, ti, (fl_value_kind[]){P, C}, 0, NULL, 1e-3f, 1e-3f);
    /* Where: X broadcast along the condition's rows, Y a parameter [1,4] */
    fl_tensor wh[3] = {T(2, SHP(3, 4), VALS(1, 0, 0, 1, 0, 1, 1, 0, 1, 1, 0, 0)),
                       tu_tensor(1, SHP(4), &r, -1, 1), tu_tensor(2, SHP(1, 4), &r, -1, 1)};
    tu_gradcheck("Where", 3, wh, (fl_value_kind[]){C, I, P}, 0, NULL, 1e-3f, 1e-3f);
    free_all(2, ex);
    free_all(2, ti);
    free_all(3, wh);
}

/* The gradient of Where goes to X where the condition holds, to Y elsewhere, summed over the
 * broadcast dims: with all-ones seeds, dX counts the true rows per column. */
static void test_where_routing(void **state) {
    fl_err e = {0};
    fl_tensor ins[3] = {T(2, SHP(3, 2), VALS(1, 0, 1, 1, 0, 0)), T(1, SHP(2), VALS(5, 6)),
                        T(2, SHP(3, 2), NULL)};
    fl_model *m = must_run("Where", 3, ins, (fl_value_kind[]){I, I, I}, 0, NULL, 9);
    fl_tensor seed = T(2, SHP(3, 2), VALS(1, 1, 1, 1, 1, 1));
    int o = m->outputs[0];
    assert_int_equal(fl_model_backward_idx(m, 1, &o, &seed, &e), FL_OK);
    assert_values(fl_model_grad(m, "in1"), VALS(2, 1));
    assert_values(fl_model_grad(m, "in2"), VALS(0, 1, 0, 0, 1, 1));
    fl_model_free(m);
    fl_tensor_free(&seed);
    free_all(3, ins);
}

static void test_compare_logic(void **state) {
    fl_tensor ins[2] = {T(1, SHP(4), VALS(1, 2, 3, 0)), T(0, NULL, VALS(2))};
    const fl_value_kind k[2] = {I, I};
    const struct { const char *op; float want[4]; } cases[] = {
        {"Equal", {0, 1, 0, 0}},       {"Less", {1, 0, 0, 1}},         {"Greater", {0, 0, 1, 0}},
        {"LessOrEqual", {1, 1, 0, 1}}, {"GreaterOrEqual", {0, 1, 1, 0}}, {"And", {1, 1, 1, 0}},
        {"Or", {1, 1, 1, 1}},          {"Xor", {0, 0, 0, 1}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        fl_model *m = must_run(cases[c].op, 2, ins, k, 0, NULL, 16);
        assert_values(fl_model_output(m, 0), cases[c].want);
        assert_int_equal(m->values[m->outputs[0]].onnx_dtype, 9); /* bool */
        /* no gradient: backward stops, the inputs get none */
        fl_err e = {0};
        fl_tensor seed = T(1, SHP(4), VALS(1, 1, 1, 1));
        int o = m->outputs[0];
        assert_int_equal(fl_model_backward_idx(m, 1, &o, &seed, &e), FL_OK);
        const fl_tensor *g = fl_model_grad(m, "in0");
        for (int64_t i = 0; g && i < g->size; i++) assert_float_equal(g->data[i], 0, 0);
        fl_tensor_free(&seed);
        fl_model_free(m);
    }
    fl_tensor x = T(1, SHP(3), VALS(1, 0, 1));
    fl_model *m = must_run("Not", 1, &x, (fl_value_kind[]){I}, 0, NULL, 13);
    assert_values(fl_model_output(m, 0), VALS(0, 1, 0));
    fl_model_free(m);
    fl_tensor_free(&x);
    free_all(2, ins);
}

static void test_mod(void **state) {
    fl_tensor ins[2] = {T(1, SHP(4), VALS(-7, 7, -7, 7)), T(1, SHP(4), VALS(3, -3, -3, 3))};
    const fl_value_kind k[2] = {I, I};
    fl_model *m = must_run("Mod", 2, ins, k, 0, NULL, 13); /* the divisor's sign */
    assert_values(fl_model_output(m, 0), VALS(2, -2, -1, 1));
    fl_model_free(m);
    fl_attr fm = fl_attr_int("fmod", 1); /* C fmod: the dividend's sign */
    m = must_run("Mod", 2, ins, k, 1, &fm, 13);
    assert_values(fl_model_output(m, 0), VALS(-1, 1, -1, 1));
    fl_model_free(m);
    /* away from the jumps the gradient is (1, -q) */
    fl_rng r;
    fl_rng_seed(&r, 8);
    fl_tensor g[2] = {tu_tensor(2, SHP(2, 3), &r, -5, 5), tu_tensor(1, SHP(3), &r, 1, 2)};
    for (int64_t i = 0; i < g[0].size; i++) { /* keep a/b at least 0.05 from an integer */
        float q = g[0].data[i] / g[1].data[i % 3];
        if (fabsf(q - roundf(q)) < 0.05f) g[0].data[i] += 0.2f;
    }
    tu_gradcheck("Mod", 2, g, (fl_value_kind[]){I, P}, 1, &fm, 1e-3f, 1e-3f);
    tu_gradcheck("Mod", 2, g, (fl_value_kind[]){I, P}, 0, NULL, 1e-3f, 1e-3f);
    free_all(2, g);
    free_all(2, ins);
}

/* data [4,2]; rows 1 and -1 (= 3) replaced, or added to */
static void test_scatternd(void **state) {
    fl_tensor ins[3] = {T(2, SHP(4, 2), NULL), T(2, SHP(2, 1), VALS(1, -1)),
                        T(2, SHP(2, 2), VALS(10, 11, 12, 13))};
    const fl_value_kind k[3] = {I, C, I};
    fl_model *m = must_run("ScatterND", 3, ins, k, 0, NULL, 16);
    assert_values(fl_model_output(m, 0), VALS(0, 1, 10, 11, 4, 5, 12, 13));
    fl_model_free(m);
    fl_attr add = {.name = "reduction", .type = FL_ATTR_STRING, .s = "add"};
    m = must_run("ScatterND", 3, ins, k, 1, &add, 16);
    assert_values(fl_model_output(m, 0), VALS(0, 1, 12, 14, 4, 5, 18, 20));
    fl_model_free(m);
    /* full-depth indices [2,2] into [3,2]: single elements, one written twice (the last wins) */
    fl_rng r;
    fl_rng_seed(&r, 9);
    fl_tensor g[3] = {tu_tensor(2, SHP(3, 2), &r, -1, 1), T(2, SHP(3, 2), VALS(2, 1, 0, 0, 2, 1)),
                      tu_tensor(1, SHP(3), &r, -1, 1)};
    tu_gradcheck("ScatterND", 3, g, (fl_value_kind[]){I, C, P}, 0, NULL, 1e-3f, 1e-3f);
    tu_gradcheck("ScatterND", 3, g, (fl_value_kind[]){I, C, P}, 1, &add, 1e-3f, 1e-3f);
    fl_err e = {0};
    m = must_run("ScatterND", 3, g, (fl_value_kind[]){I, C, I}, 0, NULL, 16);
    fl_tensor seed = T(2, SHP(3, 2), VALS(1, 1, 1, 1, 1, 1));
    int o = m->outputs[0];
    assert_int_equal(fl_model_backward_idx(m, 1, &o, &seed, &e), FL_OK);
    assert_values(fl_model_grad(m, "in2"), VALS(0, 1, 1)); /* update 0 is overwritten */
    assert_values(fl_model_grad(m, "in0"), VALS(0, 1, 1, 1, 1, 0));
    fl_model_free(m);
    fl_tensor_free(&seed);
    /* errors */
    fl_tensor_free(&ins[1]);
    ins[1] = T(2, SHP(2, 1), VALS(1, 4));
    must_fail("ScatterND", 3, ins, k, 0, NULL, 16, FL_ERR_ARG, "index row 1 is out of range");
    fl_tensor bad = T(2, SHP(2, 3), NULL);
    must_fail("ScatterND", 3, (fl_tensor[]){ins[0], ins[1], bad}, k, 0, NULL, 16, FL_ERR_SHAPE,
              "do not fit");
    fl_attr mul = {.name = "reduction", .type = FL_ATTR_STRING, .s = "mul"};
    must_fail("ScatterND", 3, ins, k, 1, &mul, 16, FL_ERR_UNSUPPORTED, "reduction 'mul'");
    fl_tensor_free(&bad);
    free_all(3, g);
    free_all(3, ins);
}

/* Integer Div truncates, also after arithmetic that keeps the int64 type: (7 * 1) / 2 = 3
 * while the same on floats is 3.5. */
static void test_integer_div(void **state) {
    for (int dt = 1; dt <= 7; dt += 6) {
        fl_err e = {0};
        fl_model *m = fl_model_new();
        fl_tensor a = T(1, SHP(2), VALS(7, -7)), one = T(0, NULL, VALS(1)), two = T(0, NULL, VALS(2));
        int va = fl_model_add_value(m, "a", I, &a, &e), v1 = fl_model_add_value(m, "one", C, &one, &e);
        int v2 = fl_model_add_value(m, "two", C, &two, &e);
        m->values[va].onnx_dtype = m->values[v1].onnx_dtype = m->values[v2].onnx_dtype = dt;
        int p = fl_model_add_op(m, "Mul", "mul", 2, (int[]){va, v1}, 0, NULL, &e);
        int q = fl_model_add_op(m, "Div", "div", 2, (int[]){p, v2}, 0, NULL, &e);
        assert_true(p >= 0 && q >= 0);
        assert_int_equal(m->values[p].onnx_dtype, dt);
        assert_int_equal(fl_model_set_io(m, 1, &va, 1, &q, &e), FL_OK);
        assert_int_equal(fl_model_finish(m, &e), FL_OK);
        assert_int_equal(fl_model_forward(m, &a, &e), FL_OK);
        assert_values(fl_model_output(m, 0), dt == 7 ? VALS(3, -3) : VALS(3.5f, -3.5f));
        fl_model_free(m);
        fl_tensor_free(&a), fl_tensor_free(&one), fl_tensor_free(&two);
    }
}

static void test_select_errors(void **state) {
    fl_tensor ex[2] = {T(2, SHP(2, 3), NULL), ints(2, VALS(2, 4))};
    must_fail("Expand", 2, ex, (fl_value_kind[]){I, C}, 0, NULL, 13, FL_ERR_SHAPE,
              "does not broadcast to [2,4]");
    ex[1].data[1] = -1;
    must_fail("Expand", 2, ex, (fl_value_kind[]){I, C}, 0, NULL, 13, FL_ERR_SHAPE, "negative");
    /* sizes read as values are bounded before anything is allocated */
    fl_tensor big[2] = {T(1, SHP(1), NULL), ints(3, VALS(1 << 20, 1 << 20, 1 << 20))};
    must_fail("Expand", 2, big, (fl_value_kind[]){I, C}, 0, NULL, 13, FL_ERR_SHAPE, "2^40");
    must_fail("ConstantOfShape", 1, &big[1], (fl_value_kind[]){C}, 0, NULL, 13, FL_ERR_SHAPE, "2^40");
    fl_tensor_free(&big[1]);
    big[1] = ints(1, VALS(1 << 23));
    fl_tensor_free(&big[0]);
    big[0] = T(1, SHP(1 << 18), NULL);
    must_fail("Tile", 2, big, (fl_value_kind[]){I, C}, 0, NULL, 13, FL_ERR_SHAPE, "2^40");
    free_all(2, big);
    fl_tensor ti[2] = {T(2, SHP(2, 3), NULL), ints(1, VALS(2))};
    must_fail("Tile", 2, ti, (fl_value_kind[]){I, C}, 0, NULL, 13, FL_ERR_SHAPE,
              "1 repeats for an input of rank 2");
    fl_tensor wh[3] = {T(1, SHP(2), NULL), T(1, SHP(3), NULL), T(1, SHP(3), NULL)};
    must_fail("Where", 3, wh, (fl_value_kind[]){I, I, I}, 0, NULL, 16, FL_ERR_SHAPE,
              "does not broadcast");
    must_fail("Where", 2, wh, (fl_value_kind[]){I, I}, 0, NULL, 16, FL_ERR_FORMAT, "inputs");
    fl_attr bad = fl_attr_int("fmod", 1);
    must_fail("Equal", 2, ti, (fl_value_kind[]){I, I}, 1, &bad, 13, FL_ERR_UNSUPPORTED, "fmod");
    free_all(2, ex);
    free_all(2, ti);
    free_all(3, wh);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expand_values),  cmocka_unit_test(test_tile_values),
        cmocka_unit_test(test_where_values),   cmocka_unit_test(test_repeat_gradients),
        cmocka_unit_test(test_where_routing),  cmocka_unit_test(test_compare_logic),
        cmocka_unit_test(test_mod),            cmocka_unit_test(test_select_errors),
        cmocka_unit_test(test_scatternd),      cmocka_unit_test(test_integer_div),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
