/* LRP rules of the CNN ops beyond LeNet's (issue 14): grouped and depthwise convolution,
 * Concat, AveragePool and GlobalAveragePool, and the zero Pad torch writes before AvgPool2d.
 * Each is checked two ways:
 *   - against a reference computed another way: the same function written with other ops,
 *     whose rules are already checked against numpy (tests/test_lrp.c) — a grouped
 *     convolution is a dense one with zeros outside the groups' blocks, Concat of two
 *     convolutions is one convolution with both weight sets, AveragePool with
 *     count_include_pad is a depthwise convolution of weights 1/k², GlobalAveragePool one of
 *     weights 1/(H W) over the whole plane; the input relevance of both models must agree
 *     under both rules (a linear layer's zero weights pass no relevance, in either rule);
 *   - by conservation: without biases the epsilon rule hands the explained logit down
 *     whole, so the input relevance of each example sums to it. */
#include <math.h>

#include "flare/lrp.h"
#include "testutil.h"

#define C_IN 4
#define HW 6
#define N_IMG 3
#define K_OUT 5

typedef struct net {
    fl_model *m;
    fl_err e;
    fl_rng r;
    int last;
} net;

static void net_init(net *n, uint64_t seed) {
    memset(n, 0, sizeof *n);
    n->m = fl_model_new();
    fl_rng_seed(&n->r, seed);
    n->last = fl_model_add_value(n->m, "x", FL_VAL_INPUT,
                                 &(fl_tensor){.ndim = 4, .shape = {0, C_IN, HW, HW}}, &n->e);
}

static int param(net *n, const char *name, const fl_tensor *w) {
    int v = fl_model_add_value(n->m, name, FL_VAL_PARAM, w, &n->e);
    assert_true(v >= 0);
    return v;
}

/* Conv of `from` with weight value w, pads `pad` on every side, group g. */
static int conv(net *n, const char *name, int from, int w, int pad, int g) {
    fl_attr a[2] = {{.name = "pads", .type = FL_ATTR_INTS, .n = 4,
                     .ints = (int64_t[]){pad, pad, pad, pad}},
                    {.name = "group", .type = FL_ATTR_INT, .i = g}};
    int v = fl_model_add_op(n->m, "Conv", name, 2, (int[]){from, w}, 2, a, &n->e);
    if (v < 0) fail_msg("%s", n->e.msg);
    return v;
}

static int op1(net *n, const char *op, const char *name, int from, int n_attr, const fl_attr *a) {
    int v = fl_model_add_op(n->m, op, name, 1, &from, n_attr, a, &n->e);
    if (v < 0) fail_msg("%s", n->e.msg);
    return v;
}

/* ... -> Flatten -> Gemm(head, transB) as the logits; finish. */
static fl_model *net_finish(net *n, int from, const fl_tensor *head) {
    int f = op1(n, "Flatten", "flat", from, 0, NULL);
    int w = param(n, "head", head);
    fl_attr tb = {.name = "transB", .type = FL_ATTR_INT, .i = 1};
    int y = fl_model_add_op(n->m, "Gemm", "logits", 2, (int[]){f, w}, 1, &tb, &n->e);
    assert_true(y >= 0);
    int x = 0;
    assert_int_equal(fl_model_set_io(n->m, 1, &x, 1, &y, &n->e), FL_OK);
    assert_int_equal(fl_model_finish(n->m, &n->e), FL_OK);
    return n->m;
}

static fl_tensor input(uint64_t seed) {
    fl_rng r;
    fl_rng_seed(&r, seed);
    return tu_tensor(4, (int64_t[]){N_IMG, C_IN, HW, HW}, &r, -1, 1);
}

/* The input relevance of m for x under `rule` (a copy), and the logits' maxima. */
static fl_tensor relevance(fl_model *m, const fl_tensor *x, fl_lrp_rule rule, float *best) {
    fl_err e = {0};
    if (fl_model_forward(m, x, &e) != FL_OK) fail_msg("forward: %s", e.msg);
    fl_lrp_opts o;
    fl_lrp_opts_default(&o);
    o.rule = rule;
    fl_lrp *l = NULL;
    if (fl_lrp_new(m, &o, &l, &e) != FL_OK) fail_msg("lrp_new: %s", e.msg);
    if (fl_lrp_run(l, NULL, &e) != FL_OK) fail_msg("lrp_run: %s", e.msg);
    const fl_tensor *y = fl_model_output(m, 0), *r = fl_lrp_relevance(l, "x");
    assert_non_null(r);
    for (int b = 0; best && b < N_IMG; b++) {
        best[b] = y->data[b * K_OUT];
        for (int k = 1; k < K_OUT; k++) best[b] = fmaxf(best[b], y->data[b * K_OUT + k]);
    }
    fl_tensor out = {0};
    assert_int_equal(fl_tensor_alloc(&out, r->ndim, r->shape), FL_OK);
    memcpy(out.data, r->data, sizeof(float) * (size_t)r->size);
    fl_lrp_free(l);
    return out;
}

/* Both models explain the same logits: equal input relevance (to 1e-5 of its largest value)
 * under both rules, and conservation under epsilon for both. */
static void compare(fl_model *a, fl_model *b, const char *what) {
    fl_tensor x = input(7);
    for (int rule = 0; rule < 2; rule++) {
        float best_a[N_IMG], best_b[N_IMG];
        fl_tensor ra = relevance(a, &x, (fl_lrp_rule)rule, best_a);
        fl_tensor rb = relevance(b, &x, (fl_lrp_rule)rule, best_b);
        double scale = 0, diff = 0;
        for (int64_t i = 0; i < ra.size; i++) {
            scale = fmax(scale, fabs(rb.data[i]));
            diff = fmax(diff, fabs((double)ra.data[i] - rb.data[i]));
        }
        assert_true(scale > 0);
        print_message("lrp %s (%s): max |R - R_ref| / max |R_ref| = %.1e\n", what,
                      fl_lrp_rule_name((fl_lrp_rule)rule), diff / scale);
        if (diff > 1e-5 * scale) fail_msg("%s, rule %s: relevance differs by %g (scale %g)", what,
                                          fl_lrp_rule_name((fl_lrp_rule)rule), diff, scale);
        for (int k = 0; rule == FL_LRP_EPSILON && k < N_IMG; k++) {
            int64_t per = ra.size / N_IMG;
            double s = 0;
            for (int64_t i = k * per; i < (k + 1) * per; i++) s += ra.data[i];
            assert_true(fabsf(best_a[k] - best_b[k]) <= 1e-5f * fabsf(best_b[k]));
            if (fabs(s - best_a[k]) > 1e-4 * fabs(best_a[k]))
                fail_msg("%s: example %d's input relevance sums to %g, its logit is %g", what, k, s,
                         best_a[k]);
        }
        fl_tensor_free(&ra);
        fl_tensor_free(&rb);
    }
    fl_tensor_free(&x);
    fl_model_free(a);
    fl_model_free(b);
}

/* Conv(g groups, O outputs) -> Relu -> GlobalAveragePool -> head, against the same with the
 * block-diagonal dense weight. */
static void grouped_case(int g, int O) {
    fl_rng r;
    fl_rng_seed(&r, 100 + (uint64_t)g);
    const int cg = C_IN / g, og = O / g;
    fl_tensor wg = tu_tensor(4, (int64_t[]){O, cg, 3, 3}, &r, -1, 1);
    fl_tensor head = tu_tensor(2, (int64_t[]){K_OUT, O}, &r, -1, 1);
    fl_tensor wd = {0};
    assert_int_equal(fl_tensor_alloc(&wd, 4, (int64_t[]){O, C_IN, 3, 3}), FL_OK);
    memset(wd.data, 0, sizeof(float) * (size_t)wd.size);
    for (int o = 0; o < O; o++)
        for (int c = 0; c < cg; c++) /* output o of group o / og reads channels (o / og) cg + c */
            memcpy(wd.data + ((int64_t)o * C_IN + (o / og) * cg + c) * 9,
                   wg.data + ((int64_t)o * cg + c) * 9, 9 * sizeof(float));
    fl_model *models[2];
    for (int k = 0; k < 2; k++) {
        net n;
        net_init(&n, 1);
        int c = conv(&n, "conv", n.last, param(&n, "w", k ? &wd : &wg), 1, k ? 1 : g);
        int a = op1(&n, "Relu", "relu", c, 0, NULL);
        models[k] = net_finish(&n, op1(&n, "GlobalAveragePool", "gap", a, 0, NULL), &head);
    }
    char what[64];
    snprintf(what, sizeof what, "Conv group %d (%d -> %d channels)", g, C_IN, O);
    compare(models[0], models[1], what);
    fl_tensor_free(&wg);
    fl_tensor_free(&wd);
    fl_tensor_free(&head);
}

static void test_grouped(void **state) {
    (void)state;
    grouped_case(2, 6); /* grouped */
    grouped_case(4, 4); /* depthwise */
    grouped_case(4, 8); /* depthwise with a channel multiplier */
}

/* Concat(Conv a, Conv b) on channels -> Relu -> GlobalAveragePool -> head, against one Conv
 * holding both weight sets. */
static void test_concat(void **state) {
    (void)state;
    fl_rng r;
    fl_rng_seed(&r, 5);
    fl_tensor wa = tu_tensor(4, (int64_t[]){3, C_IN, 3, 3}, &r, -1, 1);
    fl_tensor wb = tu_tensor(4, (int64_t[]){5, C_IN, 3, 3}, &r, -1, 1);
    fl_tensor head = tu_tensor(2, (int64_t[]){K_OUT, 8}, &r, -1, 1);
    fl_tensor wab = {0};
    assert_int_equal(fl_tensor_alloc(&wab, 4, (int64_t[]){8, C_IN, 3, 3}), FL_OK);
    memcpy(wab.data, wa.data, sizeof(float) * (size_t)wa.size);
    memcpy(wab.data + wa.size, wb.data, sizeof(float) * (size_t)wb.size);
    net n;
    net_init(&n, 1);
    int ca = conv(&n, "conv_a", n.last, param(&n, "wa", &wa), 1, 1);
    int cb = conv(&n, "conv_b", n.last, param(&n, "wb", &wb), 1, 1);
    fl_attr ax = {.name = "axis", .type = FL_ATTR_INT, .i = 1};
    int cat = fl_model_add_op(n.m, "Concat", "cat", 2, (int[]){ca, cb}, 1, &ax, &n.e);
    assert_true(cat >= 0);
    int a = op1(&n, "Relu", "relu", cat, 0, NULL);
    fl_model *m = net_finish(&n, op1(&n, "GlobalAveragePool", "gap", a, 0, NULL), &head);
    net ref;
    net_init(&ref, 1);
    int c = conv(&ref, "conv", ref.last, param(&ref, "wab", &wab), 1, 1);
    int ar = op1(&ref, "Relu", "relu", c, 0, NULL);
    fl_model *mr = net_finish(&ref, op1(&ref, "GlobalAveragePool", "gap", ar, 0, NULL), &head);
    compare(m, mr, "Concat of two Conv");
    fl_tensor_free(&wa);
    fl_tensor_free(&wb);
    fl_tensor_free(&wab);
    fl_tensor_free(&head);
}

/* Conv -> Relu -> pool -> head, the pool written as AveragePool / GlobalAveragePool and as
 * the depthwise convolution of constant weights that computes it. */
static void pool_case(int global) {
    fl_rng r;
    fl_rng_seed(&r, 9);
    const int O = 3, k = global ? HW : 2, pad = global ? 0 : 1;
    const int side = global ? 1 : (HW + 2 * pad - k) / k + 1;
    fl_tensor w0 = tu_tensor(4, (int64_t[]){O, C_IN, 3, 3}, &r, -1, 1);
    fl_tensor head = tu_tensor(2, (int64_t[]){K_OUT, O * side * side}, &r, -1, 1);
    fl_tensor avg = {0};
    assert_int_equal(fl_tensor_alloc(&avg, 4, (int64_t[]){O, 1, k, k}), FL_OK);
    for (int64_t i = 0; i < avg.size; i++) avg.data[i] = 1.0f / (float)(k * k);
    fl_model *models[2];
    for (int v = 0; v < 2; v++) {
        net n;
        net_init(&n, 1);
        int a = op1(&n, "Relu", "relu", conv(&n, "conv", n.last, param(&n, "w0", &w0), 1, 1), 0, NULL);
        int p;
        if (v) {
            fl_attr at[3] = {{.name = "pads", .type = FL_ATTR_INTS, .n = 4,
                              .ints = (int64_t[]){pad, pad, pad, pad}},
                             {.name = "strides", .type = FL_ATTR_INTS, .n = 2,
                              .ints = (int64_t[]){k, k}},
                             {.name = "group", .type = FL_ATTR_INT, .i = O}};
            p = fl_model_add_op(n.m, "Conv", "pool", 2, (int[]){a, param(&n, "avg", &avg)}, 3, at, &n.e);
            assert_true(p >= 0);
        } else if (global) {
            p = op1(&n, "GlobalAveragePool", "pool", a, 0, NULL);
        } else {
            fl_attr at[4] = {{.name = "kernel_shape", .type = FL_ATTR_INTS, .n = 2, .ints = (int64_t[]){k, k}},
                             {.name = "strides", .type = FL_ATTR_INTS, .n = 2, .ints = (int64_t[]){k, k}},
                             {.name = "pads", .type = FL_ATTR_INTS, .n = 4,
                              .ints = (int64_t[]){pad, pad, pad, pad}},
                             {.name = "count_include_pad", .type = FL_ATTR_INT, .i = 1}};
            p = op1(&n, "AveragePool", "pool", a, 4, at);
        }
        models[v] = net_finish(&n, p, &head);
    }
    compare(models[0], models[1], global ? "GlobalAveragePool" : "AveragePool 2x2 pads 1");
    fl_tensor_free(&w0);
    fl_tensor_free(&avg);
    fl_tensor_free(&head);
}

/* torch's AvgPool2d(2, padding=1): a zero Pad (pads as input 1) then AveragePool, against
 * AveragePool with pads and count_include_pad (the same function, checked above). */
static void test_pad(void **state) {
    (void)state;
    fl_rng r;
    fl_rng_seed(&r, 9);
    fl_tensor w0 = tu_tensor(4, (int64_t[]){3, C_IN, 3, 3}, &r, -1, 1);
    fl_tensor head = tu_tensor(2, (int64_t[]){K_OUT, 3 * 4 * 4}, &r, -1, 1);
    fl_tensor pads = {0};
    assert_int_equal(fl_tensor_alloc(&pads, 1, (int64_t[]){8}), FL_OK);
    const float pv[8] = {0, 0, 1, 1, 0, 0, 1, 1};
    memcpy(pads.data, pv, sizeof pv);
    fl_model *models[2];
    for (int v = 0; v < 2; v++) {
        net n;
        net_init(&n, 1);
        int a = op1(&n, "Relu", "relu", conv(&n, "conv", n.last, param(&n, "w0", &w0), 1, 1), 0, NULL);
        fl_attr at[4] = {{.name = "kernel_shape", .type = FL_ATTR_INTS, .n = 2, .ints = (int64_t[]){2, 2}},
                         {.name = "strides", .type = FL_ATTR_INTS, .n = 2, .ints = (int64_t[]){2, 2}},
                         {.name = "pads", .type = FL_ATTR_INTS, .n = 4, .ints = (int64_t[]){1, 1, 1, 1}},
                         {.name = "count_include_pad", .type = FL_ATTR_INT, .i = 1}};
        if (!v) {
            int pc = fl_model_add_value(n.m, "pads", FL_VAL_CONST, &pads, &n.e);
            assert_true(pc >= 0);
            n.m->values[pc].onnx_dtype = 7; /* int64 */
            a = fl_model_add_op(n.m, "Pad", "pad", 2, (int[]){a, pc}, 0, NULL, &n.e);
            assert_true(a >= 0);
        }
        models[v] = net_finish(&n, op1(&n, "AveragePool", "pool", a, v ? 4 : 2, at), &head);
    }
    compare(models[0], models[1], "Pad then AveragePool");
    fl_tensor_free(&w0);
    fl_tensor_free(&head);
    fl_tensor_free(&pads);
}

static void test_pools(void **state) {
    (void)state;
    pool_case(0);
    pool_case(1);
}

/* What has no rule is refused by name: a Sigmoid on the path, a reflecting Pad. */
static void test_refused(void **state) {
    (void)state;
    net n;
    net_init(&n, 1);
    fl_rng r;
    fl_rng_seed(&r, 3);
    fl_tensor w = tu_tensor(4, (int64_t[]){2, C_IN, 3, 3}, &r, -1, 1);
    fl_tensor head = tu_tensor(2, (int64_t[]){K_OUT, 2}, &r, -1, 1);
    int s = op1(&n, "Sigmoid", "squash", conv(&n, "conv", n.last, param(&n, "w", &w), 1, 1), 0, NULL);
    fl_model *m = net_finish(&n, op1(&n, "GlobalAveragePool", "gap", s, 0, NULL), &head);
    fl_lrp_opts o;
    fl_lrp_opts_default(&o);
    fl_lrp *l = NULL;
    fl_err e = {0};
    assert_int_equal(fl_lrp_new(m, &o, &l, &e), FL_ERR_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "node 'squash' (Sigmoid)"));
    assert_non_null(strstr(e.msg, "Concat"));
    fl_model_free(m);
    net_init(&n, 1);
    fl_attr refl[2] = {{.name = "mode", .type = FL_ATTR_STRING, .s = "reflect"},
                       {.name = "pads", .type = FL_ATTR_INTS, .n = 8, .ints = (int64_t[]){0, 0, 1, 1, 0, 0, 1, 1}}};
    n.m->opset = 9; /* pads as an attribute */
    int p = op1(&n, "Pad", "mirror", conv(&n, "conv", n.last, param(&n, "w", &w), 1, 1), 2, refl);
    m = net_finish(&n, op1(&n, "GlobalAveragePool", "gap", p, 0, NULL), &head);
    assert_int_equal(fl_lrp_new(m, &o, &l, &e), FL_ERR_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "node 'mirror' (Pad)"));
    assert_non_null(strstr(e.msg, "constant mode"));
    fl_model_free(m);
    fl_tensor_free(&w);
    fl_tensor_free(&head);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grouped),
        cmocka_unit_test(test_concat),
        cmocka_unit_test(test_pools),
        cmocka_unit_test(test_pad),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
