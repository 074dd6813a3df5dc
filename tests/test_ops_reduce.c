/* Reductions (src/nn/op_reduce.c): values against a direct reference for every kind and many
 * axis sets, both spellings of the axes, keepdims, noop_with_empty_axes, gradients, ties, and
 * the errors. */
#include "opcheck.h"

static const char *const ops[] = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin",
                                  "ReduceL1",  "ReduceL2",   "ReduceSumSquare"};
enum { N_OPS = sizeof ops / sizeof ops[0] };

/* Reference: reduce x [2,3,4,5] over the axes flagged in red (keepdims layout: the output
 * index of element i drops the reduced coordinates). */
static void reference(int op, const fl_tensor *x, const uint8_t *red, double *out, int64_t *n_out) {
    int64_t osz = 1, count = 1;
    for (int d = 0; d < 4; d++) {
        if (red[d]) count *= x->shape[d];
        else osz *= x->shape[d];
    }
    *n_out = osz;
    for (int64_t o = 0; o < osz; o++) out[o] = op == 2 ? -INFINITY : op == 3 ? INFINITY : 0;
    for (int64_t i = 0; i < x->size; i++) {
        int64_t rem = i, c[4], o = 0;
        for (int d = 3; d >= 0; d--) c[d] = rem % x->shape[d], rem /= x->shape[d];
        for (int d = 0; d < 4; d++)
            if (!red[d]) o = o * x->shape[d] + c[d];
        double v = x->data[i];
        switch (op) {
        case 2: out[o] = fmax(out[o], v); break;
        case 3: out[o] = fmin(out[o], v); break;
        case 4: out[o] += fabs(v); break;
        case 5:
        case 6: out[o] += v * v; break;
        default: out[o] += v;
        }
    }
    for (int64_t o = 0; o < osz; o++) {
        if (op == 1) out[o] /= (double)count;
        if (op == 5) out[o] = sqrt(out[o]);
    }
}

static void test_reduce_values(void **state) {
    fl_rng r;
    fl_rng_seed(&r, 5);
    fl_tensor x = tu_tensor(4, SHP(2, 3, 4, 5), &r, -2, 2);
    double want[120];
    /* every subset of the 4 axes (0 = none given: reduce all) */
    for (int op = 0; op < N_OPS; op++)
        for (int mask = 0; mask < 16; mask++)
            for (int form = 0; form < 2; form++) {
                int64_t axes[4];
                int na = 0;
                uint8_t red[4];
                for (int d = 0; d < 4; d++) {
                    red[d] = mask == 0 || (mask >> d & 1);
                    if (mask >> d & 1) axes[na++] = (d % 2) ? d - 4 : d; /* some negative */
                }
                fl_tensor ins[2] = {x, T(1, SHP(na), NULL)};
                for (int k = 0; k < na; k++) ins[1].data[k] = (float)axes[k];
                const fl_value_kind k[2] = {I, C};
                fl_attr a[2] = {fl_attr_int("keepdims", mask & 1), fl_attr_ints("axes", na, axes)};
                /* form 0: attribute (opset 13), form 1: input (opset 18); none given: omitted */
                int n_in = form == 1 && na ? 2 : 1, n_attr = form == 0 && na ? 2 : 1;
                fl_model *m = must_run(ops[op], n_in, ins, k, n_attr, a, form ? 18 : 13);
                const fl_tensor *y = fl_model_output(m, 0);
                int64_t n;
                reference(op, &x, red, want, &n);
                assert_int_equal(y->size, n);
                assert_int_equal(y->ndim, (mask & 1) ? 4 : 4 - (mask ? na : 4));
                for (int64_t i = 0; i < n; i++)
                    if (fabs(y->data[i] - want[i]) > 1e-5 * fmax(1, fabs(want[i])))
                        fail_msg("%s mask %d form %d: y[%lld] = %g, want %g", ops[op], mask, form,
                                 (long long)i, (double)y->data[i], want[i]);
                fl_model_free(m);
                fl_tensor_free(&ins[1]);
            }
    fl_tensor_free(&x);
}

/* noop_with_empty_axes: no axes (omitted or empty input) leaves x as it is; without the
 * switch an empty axes input reduces everything. */
static void test_reduce_noop(void **state) {
    fl_tensor x = T(2, SHP(2, 2), VALS(1, 2, 3, 4));
    fl_tensor ins[2] = {x, T(1, SHP(0), NULL)};
    const fl_value_kind k[2] = {I, C};
    fl_attr noop = fl_attr_int("noop_with_empty_axes", 1);
    fl_model *m = must_run("ReduceSum", 2, ins, k, 1, &noop, 13);
    assert_shape(fl_model_output(m, 0), 2, SHP(2, 2));
    assert_values(fl_model_output(m, 0), VALS(1, 2, 3, 4));
    fl_model_free(m);
    m = must_run("ReduceMean", 1, ins, k, 1, &noop, 18);
    assert_values(fl_model_output(m, 0), VALS(1, 2, 3, 4));
    fl_model_free(m);
    m = must_run("ReduceSum", 2, ins, k, 0, NULL, 13);
    assert_shape(fl_model_output(m, 0), 2, SHP(1, 1));
    assert_values(fl_model_output(m, 0), VALS(10));
    fl_model_free(m);
    fl_tensor_free(&ins[1]);
    fl_tensor_free(&x);
}

static void test_reduce_gradients(void **state) {
    fl_rng r;
    fl_rng_seed(&r, 9);
    fl_tensor x = tu_tensor(4, SHP(2, 3, 4, 5), &r, -1, 1);
    const fl_value_kind k[1] = {I};
    int64_t sets[][3] = {{1, -1}, {0, 2}, {1, 2}, {-1}, {0, 1, 3}};
    int ns[] = {2, 2, 2, 1, 3};
    for (int op = 0; op < N_OPS; op++)
        for (int c = 0; c < 5; c++) {
            fl_attr a[2] = {fl_attr_ints("axes", ns[c], sets[c]), fl_attr_int("keepdims", c & 1)};
            tu_gradcheck(ops[op], 1, &x, k, 2, a, 1e-3f, 2e-3f);
        }
    for (int op = 0; op < N_OPS; op++) tu_gradcheck(ops[op], 1, &x, k, 0, NULL, 1e-3f, 2e-3f);
    fl_tensor_free(&x);
}

/* Max over [3, 1, 3]: the two 3s share the gradient; L2 of zeros has gradient 0, not NaN. */
static void test_reduce_ties_and_zero(void **state) {
    fl_err e = {0};
    fl_tensor x = T(1, SHP(3), VALS(3, 1, 3));
    const fl_value_kind k[1] = {I};
    fl_model *m = must_run("ReduceMax", 1, &x, k, 0, NULL, 13);
    fl_tensor seed = T(1, SHP(1), VALS(1));
    int o = m->outputs[0];
    assert_int_equal(fl_model_backward_idx(m, 1, &o, &seed, &e), FL_OK);
    assert_values(fl_model_grad(m, "in0"), VALS(0.5f, 0, 0.5f));
    fl_model_free(m);
    fl_tensor_free(&x);
    x = T(1, SHP(3), VALS(0, 0, 0));
    m = must_run("ReduceL2", 1, &x, k, 0, NULL, 13);
    o = m->outputs[0];
    assert_int_equal(fl_model_backward_idx(m, 1, &o, &seed, &e), FL_OK);
    assert_values(fl_model_grad(m, "in0"), VALS(0, 0, 0));
    fl_model_free(m);
    fl_tensor_free(&seed);
    fl_tensor_free(&x);
}

static void test_reduce_errors(void **state) {
    fl_tensor x = T(2, SHP(2, 3), NULL);
    fl_tensor ins[2] = {x, T(1, SHP(1), VALS(1))};
    const fl_value_kind k[2] = {I, C};
    fl_attr a = fl_attr_ints("axes", 1, (int64_t[]){2});
    must_fail("ReduceMean", 1, ins, k, 1, &a, 13, FL_ERR_ARG, "axis 2 out of range");
    a = fl_attr_ints("axes", 2, (int64_t[]){1, -1});
    must_fail("ReduceMean", 1, ins, k, 1, &a, 13, FL_ERR_ARG, "given twice");
    must_fail("ReduceSum", 2, ins, k, 1, &a, 13, FL_ERR_FORMAT, "both as attribute and input");
    fl_attr bad = fl_attr_int("select_last_index", 1);
    must_fail("ReduceMax", 1, ins, k, 1, &bad, 13, FL_ERR_UNSUPPORTED, "select_last_index");
    fl_tensor_free(&ins[1]);
    ins[1] = T(1, SHP(1), VALS(0.5f));
    must_fail("ReduceL2", 2, ins, k, 0, NULL, 18, FL_ERR_FORMAT, "not an integer");
    free_all(2, ins);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reduce_values),        cmocka_unit_test(test_reduce_noop),
        cmocka_unit_test(test_reduce_gradients),     cmocka_unit_test(test_reduce_ties_and_zero),
        cmocka_unit_test(test_reduce_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
