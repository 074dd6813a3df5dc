/* Shared test helpers: cmocka includes, random tensors, and the finite-difference gradient
 * check every op's tests use. */
#ifndef FLARE_TESTUTIL_H
#define FLARE_TESTUTIL_H

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <cjson/cJSON.h>
#include <sys/wait.h>

#include "flare/model.h"

/* Fill t with uniform values in [lo, hi). */
static inline void tu_fill(fl_tensor *t, fl_rng *r, float lo, float hi) {
    for (int64_t i = 0; i < t->size; i++) t->data[i] = lo + (hi - lo) * fl_rng_uniform(r);
}

static inline fl_tensor tu_tensor(int ndim, const int64_t *shape, fl_rng *r, float lo, float hi) {
    fl_tensor t = {0};
    assert_int_equal(fl_tensor_alloc(&t, ndim, shape), FL_OK);
    if (r) tu_fill(&t, r, lo, hi);
    return t;
}

/* Build a model holding one node `op_type` whose inputs are ins[0..n_in) with the given kinds
 * (FL_VAL_INPUT and FL_VAL_PARAM inputs are differentiated, FL_VAL_CONST ones are not; a NULL
 * data pointer with kind FL_VAL_CONST means an omitted optional input). n_out outputs. */
static inline fl_model *tu_single_node(const char *op_type, int n_in, const fl_tensor *ins,
                                       const fl_value_kind *kinds, int n_out, int n_attr,
                                       const fl_attr *attr) {
    fl_err e = {0};
    fl_model *m = fl_model_new();
    assert_non_null(m);
    int in_idx[16], out_idx[16], graph_in[8], n_graph_in = 0;
    for (int i = 0; i < n_in; i++) {
        char name[32];
        snprintf(name, sizeof name, "in%d", i);
        if (kinds[i] == FL_VAL_CONST && !ins[i].data) {
            in_idx[i] = -1;
            continue;
        }
        in_idx[i] = fl_model_add_value(m, name, kinds[i], &ins[i], &e);
        assert_true(in_idx[i] >= 0);
        if (kinds[i] == FL_VAL_INPUT) graph_in[n_graph_in++] = in_idx[i];
    }
    for (int i = 0; i < n_out; i++) {
        char name[32];
        snprintf(name, sizeof name, "out%d", i);
        out_idx[i] = fl_model_add_value(m, name, FL_VAL_ACT, NULL, &e);
    }
    fl_status st = fl_model_add_node(m, op_type, "node", n_in, in_idx, n_out, out_idx, n_attr, attr, &e);
    if (st != FL_OK) fail_msg("add_node %s: %s", op_type, e.msg);
    assert_int_equal(fl_model_set_io(m, n_graph_in, graph_in, n_out, out_idx, &e), FL_OK);
    assert_int_equal(fl_model_finish(m, &e), FL_OK);
    return m;
}

/* Run the graph inputs of m (the FL_VAL_INPUT entries of ins, in order). */
static inline void tu_forward(fl_model *m, int n_in, const fl_tensor *ins, const fl_value_kind *kinds) {
    fl_tensor xs[8];
    int k = 0;
    for (int i = 0; i < n_in; i++)
        if (kinds[i] == FL_VAL_INPUT) xs[k++] = ins[i];
    fl_err e = {0};
    fl_status st = fl_model_forward_multi(m, k, xs, &e);
    if (st != FL_OK) fail_msg("forward: %s", e.msg);
}

/* loss = sum_k sum_j out_k[j] * w[k][j] over the first n_out outputs, double precision,
 * after a forward pass. */
static inline double tu_loss_n(fl_model *m, int n_out, const fl_tensor *w) {
    double s = 0;
    for (int k = 0; k < n_out; k++) {
        const fl_tensor *y = fl_model_output(m, k);
        for (int64_t j = 0; j < y->size; j++) s += (double)y->data[j] * w[k].data[j];
    }
    return s;
}
static inline double tu_loss(fl_model *m, const fl_tensor *w) { return tu_loss_n(m, 1, w); }

/* Finite-difference check of d loss / d input for every differentiable input of a one-node
 * model with n_out outputs, loss = sum_k <out_k, w_k> with random w. Checks up to 64 random
 * elements per input; |analytic - numeric| <= tol * max(1, |numeric|). Returns the largest
 * relative error. */
static inline double tu_gradcheck_n(const char *op_type, int n_in, fl_tensor *ins,
                                    const fl_value_kind *kinds, int n_out, int n_attr,
                                    const fl_attr *attr, float eps, float tol) {
    fl_err e = {0};
    fl_rng r;
    fl_rng_seed(&r, 1234);
    fl_model *m = tu_single_node(op_type, n_in, ins, kinds, n_out, n_attr, attr);
    assert_int_equal(fl_model_want_param_grads(m, 1, &e), FL_OK);
    tu_forward(m, n_in, ins, kinds);
    fl_tensor w[16];
    assert_true(n_out <= 16);
    for (int k = 0; k < n_out; k++) {
        const fl_tensor *y = fl_model_output(m, k);
        w[k] = tu_tensor(y->ndim, y->shape, &r, -1, 1);
    }
    fl_model_zero_param_grads(m);
    if (fl_model_backward_idx(m, n_out, m->outputs, w, &e) != FL_OK)
        fail_msg("backward: %s", e.msg);
    double worst = 0;
    for (int i = 0; i < n_in; i++) {
        if (kinds[i] == FL_VAL_CONST) continue;
        char name[32];
        snprintf(name, sizeof name, "in%d", i);
        int v = fl_model_find(m, name);
        fl_tensor analytic = {0};
        assert_non_null(m->values[v].g.data);
        assert_int_equal(fl_tensor_copy(&analytic, &m->values[v].g), FL_OK);
        /* perturb the tensor the model reads: for graph inputs that is ins[i] (fed again),
         * for parameters the model's own copy */
        fl_tensor *target = kinds[i] == FL_VAL_INPUT ? &ins[i] : &m->values[v].t;
        int checks = target->size < 64 ? (int)target->size : 64;
        for (int c = 0; c < checks; c++) {
            int64_t j = target->size <= 64 ? c : (int64_t)fl_rng_below(&r, (uint32_t)target->size);
            float old = target->data[j];
            target->data[j] = old + eps;
            tu_forward(m, n_in, ins, kinds);
            double lp = tu_loss_n(m, n_out, w);
            target->data[j] = old - eps;
            tu_forward(m, n_in, ins, kinds);
            double lm = tu_loss_n(m, n_out, w);
            target->data[j] = old;
            double num = (lp - lm) / (2.0 * eps), ana = analytic.data[j];
            double err = fabs(num - ana) / fmax(1.0, fabs(num));
            if (err > worst) worst = err;
            if (err > tol)
                fail_msg("%s: d/d in%d[%lld]: analytic %.6g, numeric %.6g", op_type, i,
                         (long long)j, ana, num);
        }
        fl_tensor_free(&analytic);
    }
    for (int k = 0; k < n_out; k++) fl_tensor_free(&w[k]);
    fl_model_free(m);
    return worst;
}

static inline double tu_gradcheck(const char *op_type, int n_in, fl_tensor *ins,
                                  const fl_value_kind *kinds, int n_attr, const fl_attr *attr,
                                  float eps, float tol) {
    return tu_gradcheck_n(op_type, n_in, ins, kinds, 1, n_attr, attr, eps, tol);
}

/* ---- skips ----------------------------------------------------------------------------------
 * A test case that cannot run says why and skips, visibly: cmocka marks it SKIPPED and
 * tests/run.sh reports its binary as SKIP with the count of skipped cases, never as PASS.
 *   TU_NEED(ok, "what")  a declared dependency (a Debian package, npm packages, a data set, the
 *                        flare binary): skips when !ok, and in CI (environment CI=true) fails
 *                        instead, because CI must run every test.
 *   TU_SKIP("fmt", ...)  anything else (an earlier case's output is missing): always a skip.
 * A whole test binary that cannot run exits TU_EXIT_SKIP (77, automake's convention), which
 * tests/run.sh counts as SKIP (and as a failure under CI=true). */
#define TU_EXIT_SKIP 77

static inline int tu_ci(void) {
    const char *c = getenv("CI");
    return c && (!strcmp(c, "true") || !strcmp(c, "1"));
}

static inline void tu_skip_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void tu_skip_msg(const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    printf("SKIP: %s\n", msg); /* tests/run.sh shows these lines under the binary's SKIP */
    fflush(stdout);
}

#define TU_SKIP(...)               \
    do {                           \
        tu_skip_msg(__VA_ARGS__);  \
        skip();                    \
    } while (0)

#define TU_NEED(ok, what)                                                                     \
    do {                                                                                      \
        if (!(ok)) {                                                                          \
            if (tu_ci()) fail_msg("missing dependency: %s (CI=true: a missing dependency fails; " \
                                  "scripts/deps.sh test installs it)", (what));               \
            TU_SKIP("missing dependency: %s", (what));                                        \
        }                                                                                     \
    } while (0)

/* Run a shell command line with stderr merged into stdout; *out gets the output (malloc'd,
 * at most 64 KiB; out NULL: the output is dropped), the return value the exit status (128
 * when killed by a signal). For tests that drive the flare binary. */
static inline int tu_sh(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline int tu_sh(char **out, const char *fmt, ...) {
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd - 8, fmt, ap);
    va_end(ap);
    strcat(cmd, " 2>&1");
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t cap = 1 << 16, len = 0, got;
    char *buf = malloc(cap);
    assert_non_null(buf);
    while ((got = fread(buf + len, 1, cap - 1 - len, p)) > 0) len += got;
    buf[len] = 0;
    int st = pclose(p);
    if (out) *out = buf;
    else free(buf);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* The number at a dotted path ("coverage.coverage") in the first JSON object of text (what
 * follows the object, such as stderr merged by tu_sh, is ignored). Fails the test when the
 * text has no object or the path is not a number. Tests compare JSON output by value with
 * this, never by a prefix of its text ("\"coverage\":\t0.14" also matches 0.149). */
static inline double tu_json_num(const char *text, const char *path) {
    const char *start = text ? strchr(text, '{') : NULL;
    if (!start) fail_msg("no JSON object in: %.200s", text ? text : "(null)");
    cJSON *root = cJSON_ParseWithOpts(start, NULL, 0);
    if (!root) fail_msg("not JSON: %.200s", start);
    const cJSON *at = root;
    char key[128];
    for (const char *p = path; at && *p;) {
        size_t n = strcspn(p, ".");
        snprintf(key, sizeof key, "%.*s", (int)n, p);
        at = cJSON_GetObjectItemCaseSensitive(at, key);
        p += n + (p[n] == '.');
    }
    if (!cJSON_IsNumber(at)) {
        cJSON_Delete(root);
        fail_msg("JSON has no number at %s: %.200s", path, start);
    }
    double v = at->valuedouble;
    cJSON_Delete(root);
    return v;
}

/* Compile the test target tests/targets/NAME.c (the folder next to this file) into the
 * program `out` with cc -O1. Returns 0, or -1 after saying so on stderr. For the setups of
 * tests that drive a target process. */
static inline int tu_build_target(const char *name, const char *out) {
    char src[512], cmd[2048];
    snprintf(src, sizeof src, "%s", __FILE__);
    char *slash = strrchr(src, '/');
    size_t dir = slash ? (size_t)(slash + 1 - src) : 0;
    snprintf(src + dir, sizeof src - dir, "targets/%s.c", name);
    snprintf(cmd, sizeof cmd, "cc -O1 -o %s %s", out, src);
    if (system(cmd) == 0) return 0;
    fprintf(stderr, "cannot compile %s\n", src);
    return -1;
}

#endif
