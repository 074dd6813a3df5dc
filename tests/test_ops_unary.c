/* Element-wise math ops (src/nn/op_unary.c) and Pow (op_elementwise.c): values against double-precision
 * references, finite-difference gradients on each op's domain, attributes and errors. */
#include "opcheck.h"

static fl_attr str_attr(const char *name, char *s) {
    fl_attr a = {.name = (char *)name, .type = FL_ATTR_STRING, .s = s};
    return a;
}

static double softplus(double x) { return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)); }

/* op, attributes, the input range it is checked on, and the reference */
typedef struct ucase {
    const char *op;
    int n_attr;
    fl_attr attr[2];
    float lo, hi;
    double (*ref)(double x, const struct ucase *c);
    double a, b;
} ucase;

static double r_exp(double x, const ucase *c) { return exp(x); }
static double r_log(double x, const ucase *c) { return log(x); }
static double r_sqrt(double x, const ucase *c) { return sqrt(x); }
static double r_neg(double x, const ucase *c) { return -x; }
static double r_abs(double x, const ucase *c) { return fabs(x); }
static double r_recip(double x, const ucase *c) { return 1 / x; }
static double r_erf(double x, const ucase *c) { return erf(x); }
static double r_floor(double x, const ucase *c) { return floor(x); }
static double r_ceil(double x, const ucase *c) { return ceil(x); }
static double r_hsig(double x, const ucase *c) { return fmax(0, fmin(1, c->a * x + c->b)); }
static double r_hswish(double x, const ucase *c) { return x * fmax(0, fmin(1, x / 6 + 0.5)); }
static double r_gelu(double x, const ucase *c) { return 0.5 * x * (1 + erf(x / sqrt(2))); }
static double r_gelu_tanh(double x, const ucase *c) {
    return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
static double r_softplus(double x, const ucase *c) { return softplus(x); }
static double r_softsign(double x, const ucase *c) { return x / (1 + fabs(x)); }
static double r_mish(double x, const ucase *c) { return x * tanh(softplus(x)); }
static double r_elu(double x, const ucase *c) { return x > 0 ? x : c->a * (exp(x) - 1); }
static double r_selu(double x, const ucase *c) {
    return x > 0 ? c->b * x : c->b * c->a * (exp(x) - 1);
}

#define SELU_A 1.67326319217681884765625
#define SELU_G 1.05070102214813232421875

static ucase cases[] = {
    {"Exp", 0, {{0}}, -3, 3, r_exp, 0, 0},
    {"Log", 0, {{0}}, 0.1f, 5, r_log, 0, 0},
    {"Sqrt", 0, {{0}}, 0.1f, 5, r_sqrt, 0, 0},
    {"Neg", 0, {{0}}, -3, 3, r_neg, 0, 0},
    {"Abs", 0, {{0}}, -3, 3, r_abs, 0, 0},
    {"Reciprocal", 0, {{0}}, 0.5f, 3, r_recip, 0, 0},
    {"Erf", 0, {{0}}, -3, 3, r_erf, 0, 0},
    {"Floor", 0, {{0}}, -3, 3, r_floor, 0, 0},
    {"Ceil", 0, {{0}}, -3, 3, r_ceil, 0, 0},
    {"HardSigmoid", 0, {{0}}, -4, 4, r_hsig, 0.2, 0.5},
    {"HardSigmoid", 2, {{.name = "alpha", .type = FL_ATTR_FLOAT, .f = 0.5f},
                        {.name = "beta", .type = FL_ATTR_FLOAT, .f = 0.25f}}, -2, 2, r_hsig, 0.5, 0.25},
    {"HardSwish", 0, {{0}}, -4, 4, r_hswish, 0, 0},
    {"Gelu", 0, {{0}}, -4, 4, r_gelu, 0, 0},
    {"Gelu", 1, {{.name = "approximate", .type = FL_ATTR_STRING, .s = "tanh"}}, -4, 4, r_gelu_tanh, 0, 0},
    {"Softplus", 0, {{0}}, -20, 20, r_softplus, 0, 0},
    {"Softsign", 0, {{0}}, -3, 3, r_softsign, 0, 0},
    {"Mish", 0, {{0}}, -5, 5, r_mish, 0, 0},
    {"Elu", 0, {{0}}, -3, 3, r_elu, 1.0, 0},
    {"Elu", 1, {{.name = "alpha", .type = FL_ATTR_FLOAT, .f = 0.5f}}, -3, 3, r_elu, 0.5, 0},
    {"Selu", 0, {{0}}, -3, 3, r_selu, SELU_A, SELU_G},
};
enum { N_CASES = sizeof cases / sizeof cases[0] };

static void test_unary_values(void **state) {
    fl_rng r;
    fl_rng_seed(&r, 3);
    const fl_value_kind k[1] = {I};
    for (int c = 0; c < N_CASES; c++) {
        fl_tensor x = tu_tensor(3, SHP(2, 3, 50), &r, cases[c].lo, cases[c].hi);
        fl_model *m = must_run(cases[c].op, 1, &x, k, cases[c].n_attr, cases[c].attr, 20);
        const fl_tensor *y = fl_model_output(m, 0);
        assert_shape(y, 3, SHP(2, 3, 50));
        for (int64_t i = 0; i < x.size; i++) {
            double want = cases[c].ref(x.data[i], &cases[c]);
            if (fabs(y->data[i] - want) > 2e-6 * fmax(1, fabs(want)))
                fail_msg("%s(%.9g) = %.9g, want %.9g", cases[c].op, (double)x.data[i],
                         (double)y->data[i], want);
        }
        fl_model_free(m);
        fl_tensor_free(&x);
    }
}

static void test_unary_gradients(void **state) {
    fl_rng r;
    fl_rng_seed(&r, 4);
    const fl_value_kind k[1] = {I};
    for (int c = 0; c < N_CASES; c++) {
        fl_tensor x = tu_tensor(2, SHP(4, 16), &r, cases[c].lo, cases[c].hi);
        /* Floor/Ceil: stay off the integers, where the finite difference sees the step */
        if (strcmp(cases[c].op, "Floor") == 0 || strcmp(cases[c].op, "Ceil") == 0)
            for (int64_t i = 0; i < x.size; i++) x.data[i] = floorf(x.data[i]) + 0.5f;
        tu_gradcheck(cases[c].op, 1, &x, k, cases[c].n_attr, cases[c].attr, 1e-3f, 3e-3f);
        fl_tensor_free(&x);
    }
}

static void test_unary_errors(void **state) {
    fl_tensor x = T(1, SHP(2), NULL);
    const fl_value_kind k[1] = {I};
    fl_attr a = str_attr("approximate", "erf");
    must_fail("Gelu", 1, &x, k, 1, &a, 20, FL_ERR_UNSUPPORTED, "approximate must be");
    a = fl_attr_float("alpha", 1);
    must_fail("Exp", 1, &x, k, 1, &a, 13, FL_ERR_UNSUPPORTED, "alpha");
    a = fl_attr_float("gamma", 1);
    must_fail("Elu", 1, &x, k, 1, &a, 13, FL_ERR_UNSUPPORTED, "gamma");
    fl_tensor two[2] = {x, x};
    must_fail("Sqrt", 2, two, (fl_value_kind[]){I, C}, 0, NULL, 13, FL_ERR_FORMAT, "inputs");
    fl_tensor_free(&x);
}

/* ---- Pow: broadcasting like Add; the gradient to the exponent needs a positive base ---------- */
static void test_pow(void **state) {
    fl_rng r;
    fl_rng_seed(&r, 8);
    fl_tensor ins[2] = {T(2, SHP(2, 3), VALS(1, 2, 3, -2, 0.5f, 4)), T(1, SHP(3), VALS(2, 0.5f, -1))};
    const fl_value_kind k[2] = {I, C};
    fl_model *m = must_run("Pow", 2, ins, k, 0, NULL, 15);
    const fl_tensor *y = fl_model_output(m, 0);
    const float want[6] = {1, sqrtf(2), 1.0f / 3, 4, sqrtf(0.5f), 0.25f};
    for (int i = 0; i < 6; i++) assert_float_equal(y->data[i], want[i], 1e-6);
    fl_model_free(m);
    free_all(2, ins);

    const fl_value_kind kp[2] = {I, FL_VAL_PARAM}, ki[2] = {I, C};
    fl_tensor g[2] = {tu_tensor(3, SHP(2, 3, 4), &r, 0.5f, 2), tu_tensor(1, SHP(4), &r, -2, 3)};
    tu_gradcheck("Pow", 2, g, kp, 0, NULL, 1e-3f, 2e-3f);
    free_all(2, g);
    /* negative bases with integer exponents (x^2, x^3, x^0): the base's gradient only */
    g[0] = tu_tensor(2, SHP(3, 5), &r, -2, 2);
    g[1] = T(2, SHP(3, 1), VALS(2, 3, 0));
    tu_gradcheck("Pow", 2, g, ki, 0, NULL, 1e-3f, 2e-3f);
    free_all(2, g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unary_values),
        cmocka_unit_test(test_unary_gradients),
        cmocka_unit_test(test_unary_errors),
        cmocka_unit_test(test_pow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
