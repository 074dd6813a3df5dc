/* Einsum (src/nn/op_einsum.c): the patterns exported models use — attention scores and
 * weighted sums, transposes, sums, diagonals, inner products, ellipsis batches with
 * broadcasting, the implicit output — against direct loops, gradients by finite
 * differences, and the errors. */
#include "opcheck.h"

#define P FL_VAL_PARAM

static fl_attr eq(const char *s) {
    return (fl_attr){.name = "equation", .type = FL_ATTR_STRING, .s = (char *)s};
}

/* attention: scores[b,h,q,k] = sum_d Q[b,h,q,d] K[b,h,k,d] */
static void test_einsum_attention(void **state) {
    fl_rng r;
    fl_rng_seed(&r, 51);
    enum { B = 2, H = 3, Q = 4, K = 5, D = 6 };
    fl_tensor ins[2] = {tu_tensor(4, SHP(B, H, Q, D), &r, -1, 1),
                        tu_tensor(4, SHP(B, H, K, D), &r, -1, 1)};
    fl_attr a = eq("bhqd,bhkd->bhqk");
    fl_model *m = must_run("Einsum", 2, ins, (fl_value_kind[]){I, I}, 1, &a, 12);
    const fl_tensor *y = fl_model_output(m, 0);
    assert_shape(y, 4, SHP(B, H, Q, K));
    for (int bh = 0; bh < B * H; bh++)
        for (int q = 0; q < Q; q++)
            for (int k = 0; k < K; k++) {
                double s = 0;
                for (int d = 0; d < D; d++)
                    s += ins[0].data[(bh * Q + q) * D + d] * ins[1].data[(bh * K + k) * D + d];
                assert_float_equal(y->data[(bh * Q + q) * K + k], s, 1e-5);
            }
    fl_model_free(m);
    tu_gradcheck("Einsum", 2, ins, (fl_value_kind[]){I, P}, 1, &a, 1e-3f, 1e-3f);
    free_all(2, ins);
}

static void test_einsum_small(void **state) {
    fl_tensor x = T(2, SHP(2, 3), NULL); /* 0 1 2 / 3 4 5 */
    fl_tensor sq = T(2, SHP(3, 3), NULL);
    const struct { const char *eq; const fl_tensor *in; int ndim; int64_t shape[2]; float want[6]; } cases[] = {
        {"ij->ji", &x, 2, {3, 2}, {0, 3, 1, 4, 2, 5}},
        {"ij->i", &x, 1, {2}, {3, 12}},
        {"ij", &x, 2, {2, 3}, {0, 1, 2, 3, 4, 5}},   /* implicit: i, j */
        {"ji", &x, 2, {3, 2}, {0, 3, 1, 4, 2, 5}},   /* implicit output is alphabetical */
        {"ii->i", &sq, 1, {3}, {0, 4, 8}},
        {"ii", &sq, 0, {0}, {12}},                   /* trace */
        {"...ij->...ji", &x, 2, {3, 2}, {0, 3, 1, 4, 2, 5}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        fl_attr a = eq(cases[c].eq);
        fl_model *m = must_run("Einsum", 1, cases[c].in, (fl_value_kind[]){I}, 1, &a, 12);
        assert_shape(fl_model_output(m, 0), cases[c].ndim, cases[c].shape);
        assert_values(fl_model_output(m, 0), cases[c].want);
        fl_model_free(m);
    }
    /* inner product with the implicit scalar output, and spaces */
    fl_tensor v[2] = {T(1, SHP(3), VALS(1, 2, 3)), T(1, SHP(3), VALS(4, 5, 6))};
    fl_attr a = eq("i, i");
    fl_model *m = must_run("Einsum", 2, v, (fl_value_kind[]){I, I}, 1, &a, 12);
    assert_shape(fl_model_output(m, 0), 0, NULL);
    assert_values(fl_model_output(m, 0), VALS(32));
    fl_model_free(m);
    free_all(2, v);
    fl_tensor_free(&x), fl_tensor_free(&sq);
}

/* "...ij,...jk->...ik": batch dims broadcast ([2,1] against [3]) like MatMul's */
static void test_einsum_ellipsis(void **state) {
    fl_rng r;
    fl_rng_seed(&r, 52);
    fl_tensor ins[2] = {tu_tensor(4, SHP(2, 1, 2, 3), &r, -1, 1), tu_tensor(3, SHP(3, 3, 4), &r, -1, 1)};
    fl_attr a = eq("...ij,...jk->...ik");
    fl_model *m = must_run("Einsum", 2, ins, (fl_value_kind[]){I, I}, 1, &a, 12);
    fl_model *mm = must_run("MatMul", 2, ins, (fl_value_kind[]){I, I}, 0, NULL, 13);
    const fl_tensor *y = fl_model_output(m, 0), *want = fl_model_output(mm, 0);
    assert_shape(y, 4, SHP(2, 3, 2, 4));
    for (int64_t i = 0; i < y->size; i++) assert_float_equal(y->data[i], want->data[i], 1e-5);
    fl_model_free(m);
    fl_model_free(mm);
    tu_gradcheck("Einsum", 2, ins, (fl_value_kind[]){I, P}, 1, &a, 1e-3f, 1e-3f);
    /* a diagonal's gradient lands on the diagonal only */
    fl_tensor d = tu_tensor(3, SHP(2, 3, 3), &r, -1, 1);
    fl_attr b = eq("bii->bi");
    tu_gradcheck("Einsum", 1, &d, (fl_value_kind[]){I}, 1, &b, 1e-3f, 1e-3f);
    fl_tensor_free(&d);
    free_all(2, ins);
}

static void test_einsum_errors(void **state) {
    fl_tensor ins[2] = {T(2, SHP(2, 3), NULL), T(2, SHP(4, 2), NULL)};
    const fl_value_kind k[2] = {I, I};
    fl_attr a = eq("ij,jk->ik");
    must_fail("Einsum", 2, ins, k, 1, &a, 12, FL_ERR_SHAPE, "label 0 of input 1 is 4");
    a = eq("ij->ik");
    must_fail("Einsum", 1, ins, k, 1, &a, 12, FL_ERR_FORMAT, "not in any input");
    a = eq("ij,jk");
    must_fail("Einsum", 1, ins, k, 1, &a, 12, FL_ERR_FORMAT, "2 operands, the node 1 inputs");
    a = eq("i3->i");
    must_fail("Einsum", 1, ins, k, 1, &a, 12, FL_ERR_FORMAT, "cannot read the equation at '3'");
    a = eq("ijk->i");
    must_fail("Einsum", 1, ins, k, 1, &a, 12, FL_ERR_SHAPE, "2 dims for 3 labels");
    must_fail("Einsum", 1, ins, k, 0, NULL, 12, FL_ERR_FORMAT, "equation");
    free_all(2, ins);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_einsum_attention),
        cmocka_unit_test(test_einsum_small),
        cmocka_unit_test(test_einsum_ellipsis),
        cmocka_unit_test(test_einsum_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
