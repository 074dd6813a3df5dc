/* Helpers for the op tests (test_ops_*.c): literal tensors, one-node models at a given opset,
 * and checks that a node runs, fails with a given status and message, or yields given values.
 * Every function is static: each test program includes this once. */
#ifndef FLARE_TESTS_OPCHECK_H
#define FLARE_TESTS_OPCHECK_H

#include "testutil.h"

#define I FL_VAL_INPUT
#define C FL_VAL_CONST

/* A tensor of the given shape holding vals, or 0, 1, 2, ... when vals is NULL. */
static inline fl_tensor T(int ndim, const int64_t *shape, const float *vals) {
    fl_tensor t = tu_tensor(ndim, shape, NULL, 0, 0);
    for (int64_t i = 0; i < t.size; i++) t.data[i] = vals ? vals[i] : (float)i;
    return t;
}
#define SHP(...) ((const int64_t[]){__VA_ARGS__})
#define VALS(...) ((const float[]){__VA_ARGS__})

static inline void free_all(int n, fl_tensor *ts) {
    for (int i = 0; i < n; i++) fl_tensor_free(&ts[i]);
}

/* A one-node model with n_out outputs at the given opset (like tu_single_node, but returns
 * add_node's status instead of failing, so init errors can be tested). *out is NULL on
 * failure. */
static inline fl_status build_n(const char *op, int n_in, const fl_tensor *ins,
                         const fl_value_kind *kinds, int n_out, int n_attr, const fl_attr *attr,
                         int opset, fl_model **out, fl_err *e) {
    fl_model *m = fl_model_new();
    assert_non_null(m);
    m->opset = opset;
    int in_idx[16], graph_in[8], n_graph_in = 0;
    for (int i = 0; i < n_in; i++) {
        char name[32];
        snprintf(name, sizeof name, "in%d", i);
        if (kinds[i] == C && !ins[i].data) {
            in_idx[i] = -1;
            continue;
        }
        in_idx[i] = fl_model_add_value(m, name, kinds[i], &ins[i], e);
        assert_true(in_idx[i] >= 0);
        if (kinds[i] == I) graph_in[n_graph_in++] = in_idx[i];
    }
    int o[16];
    for (int i = 0; i < n_out; i++) {
        char name[32];
        snprintf(name, sizeof name, "out%d", i);
        o[i] = fl_model_add_value(m, name, FL_VAL_ACT, NULL, e);
    }
    fl_status st = fl_model_add_node(m, op, "node", n_in, in_idx, n_out, o, n_attr, attr, e);
    if (st != FL_OK) {
        fl_model_free(m);
        *out = NULL;
        return st;
    }
    assert_int_equal(fl_model_set_io(m, n_graph_in, graph_in, n_out, o, e), FL_OK);
    assert_int_equal(fl_model_finish(m, e), FL_OK);
    *out = m;
    return FL_OK;
}

static inline fl_status build(const char *op, int n_in, const fl_tensor *ins, const fl_value_kind *kinds,
                       int n_attr, const fl_attr *attr, int opset, fl_model **out, fl_err *e) {
    return build_n(op, n_in, ins, kinds, 1, n_attr, attr, opset, out, e);
}

/* Build and run; returns the status of building or of the forward pass. On success *mp
 * holds the model (caller frees), else NULL. */
static inline fl_status run_op(const char *op, int n_in, const fl_tensor *ins, const fl_value_kind *kinds,
                        int n_attr, const fl_attr *attr, int opset, fl_model **mp, fl_err *e) {
    fl_model *m;
    fl_status st = build(op, n_in, ins, kinds, n_attr, attr, opset, &m, e);
    *mp = NULL;
    if (st != FL_OK) return st;
    fl_tensor xs[8];
    int k = 0;
    for (int i = 0; i < n_in; i++)
        if (kinds[i] == I) xs[k++] = ins[i];
    st = fl_model_forward_multi(m, k, xs, e);
    if (st != FL_OK) {
        fl_model_free(m);
        return st;
    }
    *mp = m;
    return FL_OK;
}

/* Run and require success; returns the model (its output 0 is the result). */
static inline fl_model *must_run(const char *op, int n_in, const fl_tensor *ins,
                          const fl_value_kind *kinds, int n_attr, const fl_attr *attr, int opset) {
    fl_err e = {0};
    fl_model *m;
    if (run_op(op, n_in, ins, kinds, n_attr, attr, opset, &m, &e) != FL_OK)
        fail_msg("%s: %s", op, e.msg);
    return m;
}

/* Run and require failure with status want and a message containing `part` and the node's
 * name. */
static inline void must_fail(const char *op, int n_in, const fl_tensor *ins, const fl_value_kind *kinds,
                      int n_attr, const fl_attr *attr, int opset, fl_status want,
                      const char *part) {
    fl_err e = {0};
    fl_model *m;
    fl_status st = run_op(op, n_in, ins, kinds, n_attr, attr, opset, &m, &e);
    if (st == FL_OK) {
        fl_model_free(m);
        fail_msg("%s unexpectedly succeeded (expected: %s)", op, part);
    }
    if (st != want) fail_msg("%s: status %d, want %d: %s", op, st, want, e.msg);
    if (!strstr(e.msg, "'node'") || (part && !strstr(e.msg, part)))
        fail_msg("%s: message lacks node name or '%s': %s", op, part, e.msg);
}

static inline void assert_shape(const fl_tensor *t, int ndim, const int64_t *shape) {
    char a[128], b[128];
    fl_tensor want = {0};
    fl_tensor_set_shape(&want, ndim, shape);
    if (!fl_tensor_same_shape(t, &want))
        fail_msg("shape %s, want %s", fl_shape_str(t, a, sizeof a),
                 fl_shape_str(&want, b, sizeof b));
}

static inline void assert_values(const fl_tensor *t, const float *want) {
    for (int64_t i = 0; i < t->size; i++)
        if (t->data[i] != want[i])
            fail_msg("element %lld is %g, want %g", (long long)i, (double)t->data[i],
                     (double)want[i]);
}

static inline void assert_iota(const fl_tensor *t) {
    for (int64_t i = 0; i < t->size; i++) assert_float_equal(t->data[i], (float)i, 0);
}

#endif
