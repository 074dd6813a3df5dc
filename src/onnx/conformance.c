/* One test of the ONNX backend conformance suite, run the way onnx/backend/test/runner does:
 * load DIR/model.onnx, feed every DIR/test_data_set_N/input_K.pb in graph-input order and
 * compare with output_K.pb via numpy's assert_allclose rule.
 *
 * A test is SKIPPED, with the reason, when flare declines it for a documented reason: the load
 * fails with FL_ERR_UNSUPPORTED (an operator, attribute, data type or opset flare does not
 * handle), an input or output has an element type flare does not hold (flare's tensors are
 * float; bool and the integers up to int64 but uint32/uint64 are stored as floats), or the
 * data has non-finite inputs (flare rejects them by design). Anything else that goes wrong is a FAILURE.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "onnx/onnx_int.h"

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

__attribute__((format(printf, 3, 4))) static fl_conf_status finish(fl_conf_result *r, fl_conf_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->reason, sizeof r->reason, fmt, ap);
    va_end(ap);
    return r->status = s;
}

static void list_ops(const fl_model *m, char *buf, size_t len) {
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < m->n_nodes; i++) {
        const char *op = m->nodes[i].op->name;
        int seen = 0;
        for (int j = 0; j < i && !seen; j++) seen = strcmp(m->nodes[j].op->name, op) == 0;
        if (!seen && k < len) k += (size_t)snprintf(buf + k, len - k, "%s%s", k ? "," : "", op);
    }
}

/* numpy.testing.assert_allclose: |got - want| <= atol + rtol * |want|; NaNs must match. */
static int compare(const fl_tensor *got, const fl_tensor *want, double rtol, double atol,
                   char *why, size_t len) {
    char a[128], b[128];
    if (!fl_tensor_same_shape(got, want)) {
        snprintf(why, len, "shape %s, expected %s", fl_shape_str(got, a, sizeof a),
                 fl_shape_str(want, b, sizeof b));
        return 0;
    }
    int64_t bad = 0, first = -1;
    double worst = 0;
    for (int64_t i = 0; i < want->size; i++) {
        double g = got->data[i], w = want->data[i];
        int ok = isnan(w) ? isnan(g) : isinf(w) ? g == w : fabs(g - w) <= atol + rtol * fabs(w);
        if (ok) continue;
        if (first < 0) first = i;
        bad++;
        if (fabs(g - w) > worst || isnan(g)) worst = fabs(g - w);
    }
    if (bad == 0) return 1;
    snprintf(why, len, "%lld of %lld values differ (first at %lld: got %.8g, expected %.8g; max abs diff %.3g)",
             (long long)bad, (long long)want->size, (long long)first, (double)got->data[first],
             (double)want->data[first], worst);
    return 0;
}

/* Run one test_data_set directory; returns PASS/FAIL/SKIP (reason in r). */
static fl_conf_status run_set(fl_model *m, const char *set, double rtol, double atol,
                              fl_conf_result *r) {
    char path[4300];
    fl_tensor xs[8], want = {0};
    fl_err e = {0};
    int n_in = 0, dt;
    fl_conf_status s = FL_CONF_PASS;
    memset(xs, 0, sizeof xs);
    for (;; n_in++) {
        snprintf(path, sizeof path, "%s/input_%d.pb", set, n_in);
        if (!exists(path)) break;
        if (n_in == 8) {
            s = finish(r, FL_CONF_SKIP, "more than 8 inputs");
            break;
        }
        fl_status st = fl_onnx_read_tensor(path, &xs[n_in], &dt, &e);
        if (st != FL_OK) {
            s = finish(r, st == FL_ERR_UNSUPPORTED ? FL_CONF_SKIP : FL_CONF_FAIL, "%s", e.msg);
            break;
        }
    }
    if (s == FL_CONF_PASS && n_in != m->n_inputs)
        s = finish(r, FL_CONF_FAIL, "%s: %d input files for %d graph inputs", set, n_in, m->n_inputs);
    if (s == FL_CONF_PASS) {
        fl_status st = fl_model_forward_multi(m, n_in, xs, &e);
        if (st == FL_ERR_NAN)
            s = finish(r, FL_CONF_SKIP, "non-finite input values (flare rejects them): %s", e.msg);
        else if (st == FL_ERR_UNSUPPORTED)
            s = finish(r, FL_CONF_SKIP, "%s", e.msg);
        else if (st != FL_OK)
            s = finish(r, FL_CONF_FAIL, "forward: %s", e.msg);
    }
    for (int k = 0; s == FL_CONF_PASS && k < m->n_outputs; k++) {
        char why[300];
        snprintf(path, sizeof path, "%s/output_%d.pb", set, k);
        fl_status st = fl_onnx_read_tensor(path, &want, &dt, &e);
        if (st != FL_OK)
            s = finish(r, st == FL_ERR_UNSUPPORTED ? FL_CONF_SKIP : FL_CONF_FAIL, "%s", e.msg);
        else if (!compare(fl_model_output(m, k), &want, rtol, atol, why, sizeof why))
            s = finish(r, FL_CONF_FAIL, "%s: output %d ('%s'): %s", set, k,
                       fl_model_output_name(m, k), why);
        fl_tensor_free(&want);
    }
    for (int i = 0; i < 8; i++) fl_tensor_free(&xs[i]);
    return s;
}

fl_conf_status fl_onnx_conformance_run(const char *dir, double rtol, double atol,
                                       fl_conf_result *r) {
    char path[4200];
    fl_err e = {0};
    fl_model *m;
    memset(r, 0, sizeof *r);
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    fl_status st = fl_onnx_load(path, &m, &e);
    if (st == FL_ERR_UNSUPPORTED) return finish(r, FL_CONF_SKIP, "%s", e.msg);
    if (st != FL_OK) return finish(r, FL_CONF_FAIL, "load: %s", e.msg);
    list_ops(m, r->ops, sizeof r->ops);
    fl_conf_status s = FL_CONF_PASS;
    for (int i = 0; i < m->n_inputs && s == FL_CONF_PASS; i++)
        if (!fl_onnx_dtype_supported(m->values[m->inputs[i]].onnx_dtype))
            s = finish(r, FL_CONF_SKIP, "input '%s' has element type %s", fl_model_input_name(m, i),
                       fl_onnx_dtype_name(m->values[m->inputs[i]].onnx_dtype));
    for (int i = 0; i < m->n_outputs && s == FL_CONF_PASS; i++)
        if (!fl_onnx_dtype_supported(m->values[m->outputs[i]].onnx_dtype))
            s = finish(r, FL_CONF_SKIP, "output '%s' has element type %s", fl_model_output_name(m, i),
                       fl_onnx_dtype_name(m->values[m->outputs[i]].onnx_dtype));
    for (int k = 0; s == FL_CONF_PASS; k++) {
        snprintf(path, sizeof path, "%s/test_data_set_%d", dir, k);
        if (!exists(path)) break;
        s = run_set(m, path, rtol, atol, r);
        r->n_sets += s == FL_CONF_PASS;
    }
    if (s == FL_CONF_PASS && r->n_sets == 0) s = finish(r, FL_CONF_FAIL, "no test_data_set_* directory");
    fl_model_free(m);
    r->status = s;
    return s;
}
