/* The vectorised sigmoid (src/nn/vmath.c) against double precision: relative error, the
 * saturated ends, NaN, and that an element's result does not depend on where it sits (the
 * tail of an array goes through the same lanes as its body). */
#include "testutil.h"

#include "nn/vmath.h"

static void test_sigmoid_accuracy(void **state) {
    enum { N = 40001 };
    float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N);
    assert_non_null(x);
    assert_non_null(y);
    for (int i = 0; i < N; i++) x[i] = -100.0f + 200.0f * (float)i / (N - 1);
    fl_vec_sigmoid(x, y, N);
    double worst = 0;
    for (int i = 0; i < N; i++) {
        double want = 1 / (1 + exp(-(double)x[i]));
        if (want < 1e-30) { /* expf underflows here too: only "as good as zero" is asked */
            assert_true(y[i] >= 0 && y[i] < 1e-30f);
            continue;
        }
        double rel = fabs(y[i] - want) / want;
        if (rel > worst) worst = rel;
    }
    if (worst > 1e-6) fail_msg("worst relative error %g", worst);
    free(x);
    free(y);
}

static void test_sigmoid_special(void **state) {
    float x[5] = {NAN, INFINITY, -INFINITY, 0.0f, 1e-8f}, y[5];
    fl_vec_sigmoid(x, y, 5);
    assert_true(isnan(y[0]));
    assert_float_equal(y[1], 1.0f, 0);
    assert_true(y[2] >= 0 && y[2] < 1e-30f);
    assert_float_equal(y[3], 0.5f, 0);
    assert_float_equal(y[4], 0.5f, 1e-7f);
}

/* every length 1..19 and offset: the same input gives the same output bits */
static void test_sigmoid_tails(void **state) {
    float x[24], ref[24], y[24];
    for (int i = 0; i < 24; i++) x[i] = 0.37f * (float)(i - 11);
    for (int i = 0; i < 24; i++) fl_vec_sigmoid(x + i, ref + i, 1);
    for (int n = 1; n < 20; n++)
        for (int at = 0; at + n <= 24; at += 5) {
            fl_vec_sigmoid(x + at, y, n);
            for (int i = 0; i < n; i++) assert_memory_equal(&y[i], &ref[at + i], sizeof(float));
        }
    fl_vec_sigmoid(x, x, 24); /* in place */
    assert_memory_equal(x, ref, sizeof x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sigmoid_accuracy),
        cmocka_unit_test(test_sigmoid_special),
        cmocka_unit_test(test_sigmoid_tails),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
