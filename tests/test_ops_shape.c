/* Shape and layout ops: Flatten, Reshape, Squeeze, Unsqueeze, Shape, Size, Constant, Cast,
 * Transpose, Concat, Gather — known values, gradients, and the errors they must report. */
#include "opcheck.h"

/* ---- Flatten ------------------------------------------------------------------------------ */
static void test_flatten(void **state) {
    fl_tensor x = T(3, SHP(2, 3, 4), NULL);
    const fl_value_kind k[1] = {I};
    struct { int has; int64_t axis; int64_t a, b; } cases[] = {
        {0, 0, 2, 12}, {1, 0, 1, 24}, {1, 2, 6, 4}, {1, 3, 24, 1}, {1, -1, 6, 4}, {1, -3, 1, 24},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        fl_attr a = fl_attr_int("axis", cases[c].axis);
        fl_model *m = must_run("Flatten", 1, &x, k, cases[c].has, &a, 13);
        assert_shape(fl_model_output(m, 0), 2, SHP(cases[c].a, cases[c].b));
        assert_iota(fl_model_output(m, 0));
        fl_model_free(m);
    }
    fl_attr bad = fl_attr_int("axis", 4);
    must_fail("Flatten", 1, &x, k, 1, &bad, 13, FL_ERR_ARG, "axis 4");
    bad.i = -4;
    must_fail("Flatten", 1, &x, k, 1, &bad, 13, FL_ERR_ARG, "axis -4");
    fl_attr unknown = fl_attr_int("axes", 1);
    must_fail("Flatten", 1, &x, k, 1, &unknown, 13, FL_ERR_UNSUPPORTED, "axes");
    fl_tensor_free(&x);
}

/* ---- Reshape ------------------------------------------------------------------------------ */
static void check_reshape(const fl_tensor *x, int n, const float *shape, int allowzero, int ndim,
                          const int64_t *want) {
    fl_tensor ins[2] = {*x, T(1, SHP(n), shape)};
    const fl_value_kind k[2] = {I, C};
    fl_attr a = fl_attr_int("allowzero", allowzero);
    fl_model *m = must_run("Reshape", 2, ins, k, 1, &a, 14);
    assert_shape(fl_model_output(m, 0), ndim, want);
    assert_iota(fl_model_output(m, 0));
    fl_model_free(m);
    fl_tensor_free(&ins[1]);
}

static void fail_reshape(const fl_tensor *x, int n, const float *shape, int allowzero,
                         const char *part) {
    fl_tensor ins[2] = {*x, T(1, SHP(n), shape)};
    const fl_value_kind k[2] = {I, C};
    fl_attr a = fl_attr_int("allowzero", allowzero);
    must_fail("Reshape", 2, ins, k, 1, &a, 14, FL_ERR_SHAPE, part);
    fl_tensor_free(&ins[1]);
}

static void test_reshape(void **state) {
    fl_tensor x = T(3, SHP(2, 3, 4), NULL);
    check_reshape(&x, 2, VALS(0, -1), 0, 2, SHP(2, 12));
    check_reshape(&x, 3, VALS(4, -1, 2), 0, 3, SHP(4, 3, 2));
    check_reshape(&x, 1, VALS(-1), 0, 1, SHP(24));
    check_reshape(&x, 4, VALS(0, 0, -1, 1), 0, 4, SHP(2, 3, 4, 1));
    check_reshape(&x, 4, VALS(-1, 2, 3, 4), 1, 4, SHP(1, 2, 3, 4));
    /* allowzero: a 0 is a real zero-sized dim */
    fl_tensor z = T(3, SHP(0, 3, 4), NULL);
    check_reshape(&z, 3, VALS(3, 4, 0), 1, 3, SHP(3, 4, 0));

    fail_reshape(&x, 2, VALS(5, 5), 0, "cannot reshape [2,3,4] (24 elements) to [5,5]");
    fail_reshape(&x, 2, VALS(7, -1), 0, "[7,-1]");
    fail_reshape(&x, 2, VALS(-1, -1), 0, "two -1");
    fail_reshape(&x, 2, VALS(-2, 12), 0, "negative");
    fail_reshape(&x, 4, VALS(0, 0, 0, 0), 0, "only 3 dims");
    fail_reshape(&x, 2, VALS(0, -1), 1, "both 0 and -1");
    fail_reshape(&x, 2, VALS(0, 24), 1, "to [0,24]");
    fail_reshape(&x, 8, VALS(16777216, 16777216, 16777216, 16777216, 16777216, 16777216, 1, 1), 0,
                 "too large");
    /* shape must hold integers, and be 1-D */
    {
        fl_tensor ins[2] = {x, T(1, SHP(2), VALS(2.5f, -1))};
        const fl_value_kind k[2] = {I, C};
        must_fail("Reshape", 2, ins, k, 0, NULL, 14, FL_ERR_FORMAT, "not an integer");
        fl_tensor_free(&ins[1]);
        ins[1] = T(2, SHP(1, 2), VALS(2, 12));
        must_fail("Reshape", 2, ins, k, 0, NULL, 14, FL_ERR_SHAPE, "1-D");
        fl_tensor_free(&ins[1]);
        ins[1] = T(0, NULL, VALS(24));
        must_fail("Reshape", 2, ins, k, 0, NULL, 14, FL_ERR_SHAPE, "1-D");
        fl_tensor_free(&ins[1]);
    }
    fl_tensor_free(&z);
    fl_tensor_free(&x);
}

/* ---- Squeeze / Unsqueeze ----------------------------------------------------------------- */
/* axes: NULL = none; as an input (opset 13) or an attribute (opset 11) */
static fl_status run_axes(const char *op, const fl_tensor *x, int n, const int64_t *axes,
                          int as_attr, fl_model **m, fl_err *e) {
    float fa[FL_MAX_DIMS + 2];
    for (int i = 0; i < n; i++) fa[i] = (float)axes[i];
    fl_tensor ins[2] = {*x, {0}};
    const fl_value_kind k[2] = {I, C};
    if (axes && !as_attr) ins[1] = T(1, SHP(n), fa);
    fl_attr a = fl_attr_ints("axes", n, (int64_t *)axes);
    fl_status st = run_op(op, ins[1].data ? 2 : 1, ins, k, axes && as_attr, &a,
                          as_attr ? 11 : 13, m, e);
    fl_tensor_free(&ins[1]);
    return st;
}

static void check_axes(const char *op, const fl_tensor *x, int n, const int64_t *axes, int ndim,
                       const int64_t *want) {
    for (int as_attr = 0; as_attr < 2; as_attr++) {
        fl_err e = {0};
        fl_model *m;
        if (run_axes(op, x, n, axes, as_attr, &m, &e) != FL_OK)
            fail_msg("%s (%s): %s", op, as_attr ? "attribute" : "input", e.msg);
        assert_shape(fl_model_output(m, 0), ndim, want);
        assert_iota(fl_model_output(m, 0));
        fl_model_free(m);
        if (!axes) break;
    }
}

static void fail_axes(const char *op, const fl_tensor *x, int n, const int64_t *axes,
                      fl_status want, const char *part) {
    for (int as_attr = 0; as_attr < 2; as_attr++) {
        fl_err e = {0};
        fl_model *m;
        fl_status st = run_axes(op, x, n, axes, as_attr, &m, &e);
        if (st == FL_OK) fl_model_free(m);
        assert_int_equal(st, want);
        if (!strstr(e.msg, part) || !strstr(e.msg, "'node'")) fail_msg("message: %s", e.msg);
    }
}

static void test_squeeze(void **state) {
    fl_tensor x = T(4, SHP(1, 3, 1, 4), NULL);
    check_axes("Squeeze", &x, 0, NULL, 2, SHP(3, 4));
    check_axes("Squeeze", &x, 1, SHP(-2), 3, SHP(1, 3, 4));
    check_axes("Squeeze", &x, 2, SHP(2, 0), 2, SHP(3, 4));
    fail_axes("Squeeze", &x, 1, SHP(1), FL_ERR_SHAPE, "dim 1 of [1,3,1,4] is not 1");
    fail_axes("Squeeze", &x, 1, SHP(4), FL_ERR_ARG, "axis 4 out of range");
    fail_axes("Squeeze", &x, 2, SHP(0, -4), FL_ERR_ARG, "given twice");
    fl_tensor_free(&x);
}

static void test_unsqueeze(void **state) {
    fl_tensor x = T(2, SHP(3, 4), NULL);
    check_axes("Unsqueeze", &x, 1, SHP(0), 3, SHP(1, 3, 4));
    check_axes("Unsqueeze", &x, 2, SHP(-1, 0), 4, SHP(1, 3, 4, 1));
    check_axes("Unsqueeze", &x, 3, SHP(4, 1, 2), 5, SHP(3, 1, 1, 4, 1));
    fail_axes("Unsqueeze", &x, 1, SHP(3), FL_ERR_ARG, "axis 3 out of range for rank 3");
    fail_axes("Unsqueeze", &x, 2, SHP(1, -3), FL_ERR_ARG, "given twice");
    fail_axes("Unsqueeze", &x, 7, SHP(0, 1, 2, 3, 4, 5, 6), FL_ERR_UNSUPPORTED, "9 dims");
    /* Unsqueeze needs axes; and not twice */
    const fl_value_kind k[2] = {I, C};
    must_fail("Unsqueeze", 1, &x, k, 0, NULL, 13, FL_ERR_FORMAT, "no axes");
    fl_tensor ins[2] = {x, T(1, SHP(1), VALS(0))};
    fl_attr a = fl_attr_ints("axes", 1, (int64_t[]){0});
    must_fail("Unsqueeze", 2, ins, k, 1, &a, 13, FL_ERR_FORMAT, "both");
    /* a scalar becomes a vector: the Shape -> Gather -> Unsqueeze idiom */
    fl_tensor s = T(0, NULL, VALS(7));
    fl_tensor sin[2] = {s, ins[1]};
    fl_model *m = must_run("Unsqueeze", 2, sin, k, 0, NULL, 13);
    assert_shape(fl_model_output(m, 0), 1, SHP(1));
    assert_float_equal(fl_model_output(m, 0)->data[0], 7, 0);
    fl_model_free(m);
    fl_tensor_free(&s);
    fl_tensor_free(&ins[1]);
    fl_tensor_free(&x);
}

/* ---- Shape ---------------------------------------------------------------------------------- */
static void test_shape(void **state) {
    fl_tensor x = T(3, SHP(3, 4, 5), NULL);
    const fl_value_kind k[1] = {I};
    struct { int n; int64_t start, end; int has_s, has_e; int len; float v[3]; } cases[] = {
        {0, 0, 0, 0, 0, 3, {3, 4, 5}}, {1, 1, 0, 1, 0, 2, {4, 5}},
        {1, 0, -1, 0, 1, 2, {3, 4}},   {1, -1, 0, 1, 0, 1, {5}},
        {1, 0, 10, 0, 1, 3, {3, 4, 5}}, {1, -10, 0, 1, 0, 3, {3, 4, 5}},
        {2, 1, 2, 1, 1, 1, {4}},       {2, 2, 1, 1, 1, 0, {0}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        fl_attr a[2];
        int na = 0;
        if (cases[c].has_s) a[na++] = fl_attr_int("start", cases[c].start);
        if (cases[c].has_e) a[na++] = fl_attr_int("end", cases[c].end);
        fl_model *m = must_run("Shape", 1, &x, k, na, a, 15);
        assert_shape(fl_model_output(m, 0), 1, SHP(cases[c].len));
        assert_values(fl_model_output(m, 0), cases[c].v);
        assert_int_equal(m->values[m->outputs[0]].onnx_dtype, 7);
        fl_model_free(m);
    }
    fl_tensor_free(&x);
}

/* Shape has no backward: the gradient stops there (and is zero, not garbage). */
static void test_shape_no_grad(void **state) {
    fl_err e = {0};
    fl_tensor x = T(2, SHP(2, 3), NULL);
    const fl_value_kind k[1] = {I};
    fl_model *m = must_run("Shape", 1, &x, k, 0, NULL, 15);
    fl_tensor seed = T(1, SHP(2), VALS(1, 1));
    int o = m->outputs[0];
    assert_int_equal(fl_model_backward_idx(m, 1, &o, &seed, &e), FL_OK);
    const fl_tensor *dx = fl_model_grad(m, "in0");
    assert_non_null(dx);
    for (int i = 0; i < 6; i++) assert_float_equal(dx->data[i], 0, 0);
    fl_model_free(m);
    fl_tensor_free(&seed);
    fl_tensor_free(&x);
}

/* ---- Constant ------------------------------------------------------------------------------- */
static void check_constant(const fl_attr *a, int ndim, const int64_t *shape, const float *v,
                           int dtype) {
    fl_model *m = must_run("Constant", 0, NULL, NULL, 1, a, 13);
    assert_shape(fl_model_output(m, 0), ndim, shape);
    assert_values(fl_model_output(m, 0), v);
    assert_int_equal(m->values[m->outputs[0]].onnx_dtype, dtype);
    fl_model_free(m);
}

static void test_constant(void **state) {
    fl_tensor t = T(2, SHP(2, 2), VALS(1.5f, -2, 3, 4));
    fl_attr a = {.name = "value", .type = FL_ATTR_TENSOR, .t = t, .t_dtype = 1};
    check_constant(&a, 2, SHP(2, 2), t.data, 1);
    a.t_dtype = 7;
    check_constant(&a, 2, SHP(2, 2), t.data, 7);
    a = fl_attr_float("value_float", 2.5f);
    check_constant(&a, 0, NULL, VALS(2.5f), 1);
    a = fl_attr_int("value_int", -3);
    check_constant(&a, 0, NULL, VALS(-3), 7);
    a = fl_attr_ints("value_ints", 3, (int64_t[]){1, -1, 5});
    check_constant(&a, 1, SHP(3), VALS(1, -1, 5), 7);
    a = (fl_attr){.name = "value_floats", .type = FL_ATTR_FLOATS, .n = 2,
                  .floats = (float[]){0.25f, 8}};
    check_constant(&a, 1, SHP(2), VALS(0.25f, 8), 1);
    a = fl_attr_ints("value_ints", 0, NULL);
    check_constant(&a, 1, SHP(0), NULL, 7);

    /* errors are caught when the node is added */
    a = (fl_attr){.name = "value_string", .type = FL_ATTR_STRING, .s = "hi"};
    must_fail("Constant", 0, NULL, NULL, 1, &a, 13, FL_ERR_UNSUPPORTED, "value_string");
    a = (fl_attr){.name = "value", .type = FL_ATTR_TENSOR, .t = t, .t_dtype = 8};
    must_fail("Constant", 0, NULL, NULL, 1, &a, 13, FL_ERR_UNSUPPORTED, "dtype 8");
    fl_attr two[2] = {fl_attr_int("value_int", 1), fl_attr_float("value_float", 1)};
    must_fail("Constant", 0, NULL, NULL, 2, two, 13, FL_ERR_FORMAT, "exactly one");
    must_fail("Constant", 0, NULL, NULL, 0, NULL, 13, FL_ERR_FORMAT, "exactly one");
    a = fl_attr_float("value_int", 1); /* right name, wrong type */
    must_fail("Constant", 0, NULL, NULL, 1, &a, 13, FL_ERR_UNSUPPORTED, "value_int");
    fl_tensor_free(&t);
}

/* ---- Cast ------------------------------------------------------------------------------------- */
static void test_cast(void **state) {
    fl_tensor x = T(1, SHP(5), VALS(1.7f, -1.7f, 2, -0.2f, 0));
    const fl_value_kind k[1] = {I};
    struct { int to; float v[5]; } cases[] = {
        {1, {1.7f, -1.7f, 2, -0.2f, 0}}, {11, {1.7f, -1.7f, 2, -0.2f, 0}},
        {7, {1, -1, 2, 0, 0}}, {6, {1, -1, 2, 0, 0}}, {9, {1, 1, 1, 1, 0}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        fl_attr a = fl_attr_int("to", cases[c].to);
        fl_model *m = must_run("Cast", 1, &x, k, 1, &a, 13);
        assert_shape(fl_model_output(m, 0), 1, SHP(5));
        assert_values(fl_model_output(m, 0), cases[c].v);
        assert_int_equal(m->values[m->outputs[0]].onnx_dtype, cases[c].to);
        fl_model_free(m);
    }
    /* int casts pass no gradient */
    fl_err e = {0};
    fl_attr a = fl_attr_int("to", 7);
    fl_model *m = must_run("Cast", 1, &x, k, 1, &a, 13);
    int o = m->outputs[0];
    fl_tensor seed = T(1, SHP(5), VALS(1, 1, 1, 1, 1));
    assert_int_equal(fl_model_backward_idx(m, 1, &o, &seed, &e), FL_OK);
    for (int i = 0; i < 5; i++) assert_float_equal(fl_model_grad(m, "in0")->data[i], 0, 0);
    fl_model_free(m);

    a.i = 8;
    must_fail("Cast", 1, &x, k, 1, &a, 13, FL_ERR_UNSUPPORTED, "dtype 8");
    a.i = 10;
    must_fail("Cast", 1, &x, k, 1, &a, 13, FL_ERR_UNSUPPORTED, "dtype 10");
    must_fail("Cast", 1, &x, k, 0, NULL, 13, FL_ERR_FORMAT, "'to'");
    fl_tensor_free(&seed);
    fl_tensor_free(&x);
}

/* ---- Transpose -------------------------------------------------------------------------------- */
static void test_transpose(void **state) {
    fl_tensor x = T(3, SHP(2, 3, 4), NULL);
    const fl_value_kind k[1] = {I};
    fl_attr a = fl_attr_ints("perm", 3, (int64_t[]){1, 2, 0});
    fl_model *m = must_run("Transpose", 1, &x, k, 1, &a, 13);
    const fl_tensor *y = fl_model_output(m, 0);
    assert_shape(y, 3, SHP(3, 4, 2));
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 2; l++) /* y[i,j,l] = x[l,i,j] */
                assert_float_equal(y->data[(i * 4 + j) * 2 + l], x.data[(l * 3 + i) * 4 + j], 0);
    fl_model_free(m);
    m = must_run("Transpose", 1, &x, k, 0, NULL, 13); /* default: reverse */
    y = fl_model_output(m, 0);
    assert_shape(y, 3, SHP(4, 3, 2));
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            for (int l = 0; l < 2; l++)
                assert_float_equal(y->data[(i * 3 + j) * 2 + l], x.data[(l * 3 + j) * 4 + i], 0);
    fl_model_free(m);
    /* identity perm on a scalar-like and on a 1-D tensor are copies */
    fl_tensor v = T(1, SHP(5), NULL);
    m = must_run("Transpose", 1, &v, k, 0, NULL, 13);
    assert_iota(fl_model_output(m, 0));
    fl_model_free(m);

    a = fl_attr_ints("perm", 3, (int64_t[]){0, 0, 1});
    must_fail("Transpose", 1, &x, k, 1, &a, 13, FL_ERR_ARG, "not a permutation");
    a = fl_attr_ints("perm", 3, (int64_t[]){0, 3, 1});
    must_fail("Transpose", 1, &x, k, 1, &a, 13, FL_ERR_ARG, "not a permutation");
    a = fl_attr_ints("perm", 2, (int64_t[]){1, 0});
    must_fail("Transpose", 1, &x, k, 1, &a, 13, FL_ERR_SHAPE, "perm has 2 entries");
    fl_tensor_free(&v);
    fl_tensor_free(&x);
}

/* ---- Concat --------------------------------------------------------------------------------------- */
static void test_concat(void **state) {
    fl_tensor ins[3] = {T(2, SHP(2, 1), VALS(0, 1)), T(2, SHP(2, 2), VALS(10, 11, 12, 13)),
                        T(2, SHP(2, 3), VALS(20, 21, 22, 23, 24, 25))};
    const fl_value_kind k[3] = {I, C, I};
    for (int64_t axis = 1; axis >= -1; axis -= 2) {
        fl_attr a = fl_attr_int("axis", axis);
        fl_model *m = must_run("Concat", 3, ins, k, 1, &a, 13);
        assert_shape(fl_model_output(m, 0), 2, SHP(2, 6));
        assert_values(fl_model_output(m, 0), VALS(0, 10, 11, 20, 21, 22, 1, 12, 13, 23, 24, 25));
        fl_model_free(m);
    }
    /* axis 0, and an empty input in the middle */
    fl_tensor rows[3] = {T(2, SHP(1, 2), VALS(1, 2)), T(2, SHP(0, 2), NULL),
                         T(2, SHP(2, 2), VALS(3, 4, 5, 6))};
    fl_attr a = fl_attr_int("axis", 0);
    fl_model *m = must_run("Concat", 3, rows, k, 1, &a, 13);
    assert_shape(fl_model_output(m, 0), 2, SHP(3, 2));
    assert_values(fl_model_output(m, 0), VALS(1, 2, 3, 4, 5, 6));
    fl_model_free(m);
    /* one input */
    m = must_run("Concat", 1, rows, k, 1, &a, 13);
    assert_values(fl_model_output(m, 0), VALS(1, 2));
    fl_model_free(m);

    a.i = 1;
    must_fail("Concat", 3, rows, k, 1, &a, 13, FL_ERR_SHAPE, "input 1 has shape [0,2]");
    a.i = 2;
    must_fail("Concat", 3, ins, k, 1, &a, 13, FL_ERR_ARG, "axis 2 out of range");
    a.i = -3;
    must_fail("Concat", 3, ins, k, 1, &a, 13, FL_ERR_ARG, "axis -3");
    must_fail("Concat", 3, ins, k, 0, NULL, 13, FL_ERR_FORMAT, "'axis'");
    fl_tensor_free(&rows[2]);
    rows[2] = T(1, SHP(2), VALS(1, 2));
    a.i = 0;
    must_fail("Concat", 3, rows, k, 1, &a, 13, FL_ERR_SHAPE, "input 2 has shape [2]");
    free_all(3, rows);
    free_all(3, ins);
}

/* ---- Gather ---------------------------------------------------------------------------------------- */
static void test_gather(void **state) {
    fl_tensor x = T(2, SHP(3, 2), NULL); /* [[0,1],[2,3],[4,5]] */
    const fl_value_kind k[2] = {I, C};
    fl_tensor ins[2] = {x, T(1, SHP(3), VALS(2, -3, 2))};
    fl_model *m = must_run("Gather", 2, ins, k, 0, NULL, 13);
    assert_shape(fl_model_output(m, 0), 2, SHP(3, 2));
    assert_values(fl_model_output(m, 0), VALS(4, 5, 0, 1, 4, 5));
    fl_model_free(m);
    fl_tensor_free(&ins[1]);
    /* axis 1, scalar index: the rank drops */
    fl_attr a = fl_attr_int("axis", 1);
    ins[1] = T(0, NULL, VALS(-1));
    m = must_run("Gather", 2, ins, k, 1, &a, 13);
    assert_shape(fl_model_output(m, 0), 1, SHP(3));
    assert_values(fl_model_output(m, 0), VALS(1, 3, 5));
    fl_model_free(m);
    fl_tensor_free(&ins[1]);
    /* axis -1 with 2-D indices: y[i, p, q] = x[i, idx[p, q]] */
    a.i = -1;
    ins[1] = T(2, SHP(2, 2), VALS(1, 0, 0, 0));
    m = must_run("Gather", 2, ins, k, 1, &a, 13);
    assert_shape(fl_model_output(m, 0), 3, SHP(3, 2, 2));
    assert_values(fl_model_output(m, 0), VALS(1, 0, 0, 0, 3, 2, 2, 2, 5, 4, 4, 4));
    fl_model_free(m);
    fl_tensor_free(&ins[1]);

    ins[1] = T(1, SHP(2), VALS(0, 3));
    must_fail("Gather", 2, ins, k, 0, NULL, 13, FL_ERR_ARG, "index 3");
    fl_tensor_free(&ins[1]);
    ins[1] = T(1, SHP(1), VALS(-4));
    must_fail("Gather", 2, ins, k, 0, NULL, 13, FL_ERR_ARG, "index -4");
    fl_tensor_free(&ins[1]);
    ins[1] = T(1, SHP(1), VALS(0.5f));
    must_fail("Gather", 2, ins, k, 0, NULL, 13, FL_ERR_ARG, "index 0.5");
    a.i = 2;
    must_fail("Gather", 2, ins, k, 1, &a, 13, FL_ERR_ARG, "axis 2 out of range");
    fl_tensor_free(&ins[1]);
    fl_tensor_free(&x);
}

/* ---- gradients ------------------------------------------------------------------------------------- */
static void test_gradients(void **state) {
    fl_rng r;
    fl_rng_seed(&r, 7);
    const float eps = 1e-2f, tol = 1e-3f;
    fl_tensor x = tu_tensor(4, SHP(2, 3, 1, 4), &r, -1, 1);
    const fl_value_kind ki[1] = {I}, kic[2] = {I, C};

    fl_attr a = fl_attr_int("axis", 2);
    tu_gradcheck("Flatten", 1, &x, ki, 1, &a, eps, tol);

    fl_tensor rs[2] = {x, T(1, SHP(3), VALS(4, 0, -1))};
    tu_gradcheck("Reshape", 2, rs, kic, 0, NULL, eps, tol);
    fl_tensor_free(&rs[1]);

    fl_tensor sq[2] = {x, T(1, SHP(1), VALS(2))};
    tu_gradcheck("Squeeze", 2, sq, kic, 0, NULL, eps, tol);
    tu_gradcheck("Unsqueeze", 2, sq, kic, 0, NULL, eps, tol);
    fl_tensor_free(&sq[1]);

    a = fl_attr_ints("perm", 4, (int64_t[]){3, 0, 2, 1});
    tu_gradcheck("Transpose", 1, &x, ki, 1, &a, eps, tol);

    a = fl_attr_int("to", 1);
    tu_gradcheck("Cast", 1, &x, ki, 1, &a, eps, tol);

    /* Concat along dim 1 of three inputs, one of them a parameter */
    fl_tensor cs[3] = {tu_tensor(3, SHP(2, 1, 3), &r, -1, 1), tu_tensor(3, SHP(2, 2, 3), &r, -1, 1),
                       tu_tensor(3, SHP(2, 3, 3), &r, -1, 1)};
    const fl_value_kind kc[3] = {I, FL_VAL_PARAM, I};
    a = fl_attr_int("axis", -2);
    tu_gradcheck("Concat", 3, cs, kc, 1, &a, eps, tol);
    free_all(3, cs);

    /* Gather with repeated and negative indices: the gradient adds up */
    fl_tensor gs[2] = {tu_tensor(3, SHP(2, 4, 3), &r, -1, 1), T(2, SHP(2, 2), VALS(1, -1, 1, 0))};
    a = fl_attr_int("axis", 1);
    tu_gradcheck("Gather", 2, gs, kic, 1, &a, eps, tol);
    fl_tensor_free(&gs[1]);
    gs[1] = T(0, NULL, VALS(-2));
    a.i = -3;
    tu_gradcheck("Gather", 2, gs, kic, 1, &a, eps, tol);
    free_all(2, gs);
    fl_tensor_free(&x);
}

/* Gather's scatter-add, checked by hand: index 0 taken twice gets twice the gradient. */
static void test_gather_scatter_add(void **state) {
    fl_err e = {0};
    fl_tensor ins[2] = {T(1, SHP(3), VALS(5, 6, 7)), T(1, SHP(3), VALS(0, 2, -3))};
    const fl_value_kind k[2] = {I, C};
    fl_model *m = must_run("Gather", 2, ins, k, 0, NULL, 13);
    fl_tensor seed = T(1, SHP(3), VALS(1, 10, 100));
    int o = m->outputs[0];
    assert_int_equal(fl_model_backward_idx(m, 1, &o, &seed, &e), FL_OK);
    assert_values(fl_model_grad(m, "in0"), VALS(101, 0, 10));
    fl_model_free(m);
    fl_tensor_free(&seed);
    free_all(2, ins);
}

/* ---- the PyTorch idiom: x.view(x.size(0), -1) exported as Shape -> Gather -> Unsqueeze ->
 * Concat -> Reshape, planned for one batch size and re-planned for another. ------------------ */
static void test_shape_chain(void **state) {
    fl_err e = {0};
    fl_model *m = fl_model_new();
    fl_tensor decl = {0};
    fl_tensor_set_shape(&decl, 4, SHP(0, 3, 4, 5));
    fl_tensor zero = T(0, NULL, VALS(0)), ax = T(1, SHP(1), VALS(0)), m1 = T(1, SHP(1), VALS(-1));
    int x = fl_model_add_value(m, "x", I, &decl, &e);
    int z = fl_model_add_value(m, "zero", C, &zero, &e);
    int axv = fl_model_add_value(m, "ax", C, &ax, &e);
    int mv = fl_model_add_value(m, "m1", C, &m1, &e);
    int s = fl_model_add_op(m, "Shape", "shape", 1, &x, 0, NULL, &e);
    int g = fl_model_add_op(m, "Gather", "gather", 2, (int[]){s, z}, 0, NULL, &e);
    int u = fl_model_add_op(m, "Unsqueeze", "unsq", 2, (int[]){g, axv}, 0, NULL, &e);
    fl_attr a = fl_attr_int("axis", 0);
    int c = fl_model_add_op(m, "Concat", "cat", 2, (int[]){u, mv}, 1, &a, &e);
    int r = fl_model_add_op(m, "Reshape", "view", 2, (int[]){x, c}, 0, NULL, &e);
    assert_true(x >= 0 && s >= 0 && g >= 0 && u >= 0 && c >= 0 && r >= 0);
    assert_int_equal(m->values[c].onnx_dtype, 7); /* int64 all along the shape chain */
    assert_int_equal(fl_model_set_io(m, 1, &x, 1, &r, &e), FL_OK);
    assert_int_equal(fl_model_finish(m, &e), FL_OK);
    for (int64_t batch = 2; batch <= 3; batch++) {
        fl_tensor in = T(4, SHP(batch, 3, 4, 5), NULL);
        assert_int_equal(fl_model_forward(m, &in, &e), FL_OK);
        assert_shape(fl_model_output(m, 0), 2, SHP(batch, 60));
        assert_iota(fl_model_output(m, 0));
        assert_values(fl_model_tensor(m, "cat_output_0"), VALS((float)batch, -1));
        fl_tensor_free(&in);
    }
    fl_tensor_free(&zero);
    fl_tensor_free(&ax);
    fl_tensor_free(&m1);
    fl_model_free(m);
}

/* Size: a 0-D int64 count, no gradient. */
static void test_size(void **state) {
    fl_tensor x = T(3, SHP(2, 3, 4), NULL);
    const fl_value_kind k[1] = {I};
    fl_model *m = must_run("Size", 1, &x, k, 0, NULL, 13);
    assert_shape(fl_model_output(m, 0), 0, NULL);
    assert_values(fl_model_output(m, 0), VALS(24));
    assert_int_equal(m->values[m->outputs[0]].onnx_dtype, 7);
    fl_model_free(m);
    fl_tensor_free(&x);
}

/* ConstantOfShape: the value attribute's element and type, float 0 without it; an empty
 * shape gives a scalar, a 0 entry an empty tensor. */
static void test_constant_of_shape(void **state) {
    fl_tensor shp = T(1, SHP(2), VALS(2, 3)), one = T(1, SHP(1), VALS(7));
    fl_attr a = {.name = "value", .type = FL_ATTR_TENSOR, .t = one, .t_dtype = 7};
    fl_model *m = must_run("ConstantOfShape", 1, &shp, (fl_value_kind[]){C}, 1, &a, 13);
    assert_shape(fl_model_output(m, 0), 2, SHP(2, 3));
    assert_values(fl_model_output(m, 0), VALS(7, 7, 7, 7, 7, 7));
    assert_int_equal(m->values[m->outputs[0]].onnx_dtype, 7);
    fl_model_free(m);
    m = must_run("ConstantOfShape", 1, &shp, (fl_value_kind[]){C}, 0, NULL, 9);
    assert_values(fl_model_output(m, 0), VALS(0, 0, 0, 0, 0, 0));
    assert_int_equal(m->values[m->outputs[0]].onnx_dtype, 1);
    fl_model_free(m);
    fl_tensor empty = T(1, SHP(0), NULL);
    m = must_run("ConstantOfShape", 1, &empty, (fl_value_kind[]){C}, 1, &a, 13);
    assert_shape(fl_model_output(m, 0), 0, NULL);
    fl_model_free(m);
    shp.data[1] = -1;
    must_fail("ConstantOfShape", 1, &shp, (fl_value_kind[]){C}, 0, NULL, 13, FL_ERR_SHAPE,
              "negative");
    fl_tensor two = T(1, SHP(2), VALS(1, 2));
    a.t = two;
    must_fail("ConstantOfShape", 1, &shp, (fl_value_kind[]){C}, 1, &a, 13, FL_ERR_FORMAT,
              "one element");
    fl_tensor_free(&shp), fl_tensor_free(&one), fl_tensor_free(&empty), fl_tensor_free(&two);
}

static void test_range(void **state) {
    fl_tensor ins[3] = {T(0, NULL, VALS(10)), T(0, NULL, VALS(4)), T(0, NULL, VALS(-3))};
    const fl_value_kind k[3] = {I, I, I};
    fl_model *m = must_run("Range", 3, ins, k, 0, NULL, 11);
    assert_shape(fl_model_output(m, 0), 1, SHP(2));
    assert_values(fl_model_output(m, 0), VALS(10, 7));
    fl_model_free(m);
    ins[0].data[0] = 1, ins[1].data[0] = 2, ins[2].data[0] = 0.25f;
    m = must_run("Range", 3, ins, k, 0, NULL, 11);
    assert_values(fl_model_output(m, 0), VALS(1, 1.25f, 1.5f, 1.75f));
    fl_model_free(m);
    ins[2].data[0] = -1; /* the wrong direction: empty */
    m = must_run("Range", 3, ins, k, 0, NULL, 11);
    assert_shape(fl_model_output(m, 0), 1, SHP(0));
    fl_model_free(m);
    ins[2].data[0] = 0;
    must_fail("Range", 3, ins, k, 0, NULL, 11, FL_ERR_ARG, "delta is 0");
    fl_tensor_free(&ins[2]);
    ins[2] = T(1, SHP(2), VALS(1, 1));
    must_fail("Range", 3, ins, k, 0, NULL, 11, FL_ERR_SHAPE, "delta must be a scalar");
    free_all(3, ins);
}

/* ViT's class token over a dynamic batch: Expand(token [1,1,4], Concat(Shape(x)[0:1],
 * [1, 4])) follows the batch of x with no folding. */
static void test_expand_follows_batch(void **state) {
    fl_err e = {0};
    fl_model *m = fl_model_new();
    fl_tensor decl = {0};
    fl_tensor_set_shape(&decl, 3, SHP(0, 2, 4));
    fl_tensor tok = T(3, SHP(1, 1, 4), VALS(1, 2, 3, 4)), zero = T(1, SHP(1), VALS(0)),
              onef = T(1, SHP(1), VALS(1)), rest = T(1, SHP(2), VALS(1, 4));
    int x = fl_model_add_value(m, "x", I, &decl, &e);
    int t = fl_model_add_value(m, "tok", FL_VAL_PARAM, &tok, &e);
    int z = fl_model_add_value(m, "zero", C, &zero, &e), o = fl_model_add_value(m, "one", C, &onef, &e);
    int rv = fl_model_add_value(m, "rest", C, &rest, &e);
    int s = fl_model_add_op(m, "Shape", "shape", 1, &x, 0, NULL, &e);
    int b = fl_model_add_op(m, "Slice", "batch", 3, (int[]){s, z, o}, 0, NULL, &e);
    fl_attr a = fl_attr_int("axis", 0);
    int c = fl_model_add_op(m, "Concat", "cat", 2, (int[]){b, rv}, 1, &a, &e);
    int ex = fl_model_add_op(m, "Expand", "expand", 2, (int[]){t, c}, 0, NULL, &e);
    int y = fl_model_add_op(m, "Concat", "tokens", 2, (int[]){ex, x}, 1,
                            (fl_attr[]){fl_attr_int("axis", 1)}, &e);
    assert_true(ex >= 0 && y >= 0);
    assert_int_equal(fl_model_set_io(m, 1, &x, 1, &y, &e), FL_OK);
    assert_int_equal(fl_model_finish(m, &e), FL_OK);
    assert_int_equal(fl_model_want_param_grads(m, 1, &e), FL_OK);
    for (int64_t batch = 2; batch <= 5; batch += 3) {
        fl_tensor in = T(3, SHP(batch, 2, 4), NULL);
        assert_int_equal(fl_model_forward(m, &in, &e), FL_OK);
        const fl_tensor *out = fl_model_output(m, 0);
        assert_shape(out, 3, SHP(batch, 3, 4));
        assert_float_equal(out->data[(batch - 1) * 12 + 3], 4, 0); /* last example's token */
        /* every example's copy of the token sends its gradient to the one parameter */
        fl_tensor seed = T(3, SHP(batch, 3, 4), NULL);
        for (int64_t i = 0; i < seed.size; i++) seed.data[i] = 1;
        fl_model_zero_param_grads(m);
        assert_int_equal(fl_model_backward_idx(m, 1, &y, &seed, &e), FL_OK);
        assert_float_equal(fl_model_grad(m, "tok")->data[0], (float)batch, 0);
        fl_tensor_free(&seed);
        fl_tensor_free(&in);
    }
    fl_tensor_free(&tok), fl_tensor_free(&zero), fl_tensor_free(&onef), fl_tensor_free(&rest);
    fl_model_free(m);
}

/* Arity errors are caught when the node is added. */
static void test_arity(void **state) {
    fl_tensor x = T(1, SHP(2), NULL);
    fl_tensor ins[3] = {x, x, x};
    const fl_value_kind k[3] = {I, C, C};
    must_fail("Reshape", 1, ins, k, 0, NULL, 14, FL_ERR_FORMAT, "inputs");
    must_fail("Gather", 1, ins, k, 0, NULL, 13, FL_ERR_FORMAT, "inputs");
    must_fail("Flatten", 2, ins, k, 0, NULL, 13, FL_ERR_FORMAT, "inputs");
    must_fail("Squeeze", 3, ins, k, 0, NULL, 13, FL_ERR_FORMAT, "inputs");
    must_fail("Constant", 1, ins, k, 1, (fl_attr[]){fl_attr_int("value_int", 1)}, 13,
              FL_ERR_FORMAT, "inputs");
    fl_tensor_free(&x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flatten),      cmocka_unit_test(test_reshape),
        cmocka_unit_test(test_squeeze),      cmocka_unit_test(test_unsqueeze),
        cmocka_unit_test(test_shape),        cmocka_unit_test(test_shape_no_grad),
        cmocka_unit_test(test_constant),     cmocka_unit_test(test_cast),
        cmocka_unit_test(test_transpose),    cmocka_unit_test(test_concat),
        cmocka_unit_test(test_gather),       cmocka_unit_test(test_gradients),
        cmocka_unit_test(test_gather_scatter_add), cmocka_unit_test(test_shape_chain),
        cmocka_unit_test(test_size),         cmocka_unit_test(test_arity),
        cmocka_unit_test(test_constant_of_shape), cmocka_unit_test(test_range),
        cmocka_unit_test(test_expand_follows_batch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
