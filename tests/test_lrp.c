/* LRP: relevances against the numpy fixtures (tests/fixtures/lrp/make_lrp.py), conservation,
 * targets, unsupported ops, and the important neurons (summing, ranking, JSON round trip). */
#include "testutil.h"

#include <cjson/cJSON.h>
#include <unistd.h>

#include "flare/lrp.h"
#include "flare/onnx.h"
#include "flare/train.h"

#define FIX "tests/fixtures/lrp/"

static fl_model *load(const char *path) {
    fl_err e = {0};
    fl_model *m = NULL;
    if (fl_onnx_load(path, &m, &e) != FL_OK) fail_msg("%s", e.msg);
    return m;
}

static void forward(fl_model *m, const fl_tensor *x) {
    fl_err e = {0};
    if (fl_model_forward(m, x, &e) != FL_OK) fail_msg("forward: %s", e.msg);
}

static fl_lrp *lrp_new(fl_model *m, fl_lrp_rule rule) {
    fl_err e = {0};
    fl_lrp_opts o;
    fl_lrp_opts_default(&o);
    o.rule = rule;
    fl_lrp *l = NULL;
    if (fl_lrp_new(m, &o, &l, &e) != FL_OK) fail_msg("lrp_new: %s", e.msg);
    return l;
}

static void lrp_run(fl_lrp *l, const int32_t *target) {
    fl_err e = {0};
    if (fl_lrp_run(l, target, &e) != FL_OK) fail_msg("lrp_run: %s", e.msg);
}

static double tsum(const fl_tensor *t, int64_t from, int64_t n) {
    double s = 0;
    for (int64_t i = from; i < from + n; i++) s += t->data[i];
    return s;
}

/* ---- against numpy ------------------------------------------------------------------------------ */
static void check_fixture(const char *kind, const char *const *names, int n_names) {
    char path[256];
    fl_err e = {0};
    snprintf(path, sizeof path, FIX "%s.onnx", kind);
    fl_model *m = load(path);
    fl_tensor x = {0};
    snprintf(path, sizeof path, FIX "%s_x.npy", kind);
    assert_int_equal(fl_npy_read_tensor(path, &x, &e), FL_OK);
    for (int rule = 0; rule < 2; rule++) {
        fl_tensor ref = {0};
        snprintf(path, sizeof path, FIX "%s_%s.npy", kind, fl_lrp_rule_name((fl_lrp_rule)rule));
        assert_int_equal(fl_npy_read_tensor(path, &ref, &e), FL_OK);
        assert_int_equal(ref.shape[0], n_names);
        fl_lrp *l = lrp_new(m, (fl_lrp_rule)rule);
        forward(m, &x);
        lrp_run(l, NULL);
        for (int k = 0; k < n_names; k++) {
            const fl_tensor *r = fl_lrp_relevance(l, names[k]);
            if (!r) fail_msg("%s: no relevance for '%s'", kind, names[k]);
            const float *want = ref.data + k * ref.shape[1];
            assert_true(r->size <= ref.shape[1]);
            double mx = 0, diff = 0;
            for (int64_t i = 0; i < r->size; i++) mx = fmax(mx, fabs(want[i]));
            for (int64_t i = 0; i < r->size; i++) diff = fmax(diff, fabs(r->data[i] - want[i]));
            assert_true(mx > 0);
            if (diff > 1e-4 * mx)
                fail_msg("%s %s '%s': max |diff| %g vs max |R| %g", kind,
                         fl_lrp_rule_name((fl_lrp_rule)rule), names[k], diff, mx);
        }
        fl_lrp_free(l);
        fl_tensor_free(&ref);
    }
    fl_tensor_free(&x);
    fl_model_free(m);
}

static void test_fixture_a(void **state) {
    (void)state;
    /* Conv+bias, BatchNormalization, Relu, MaxPool, Conv, AveragePool, Flatten, Gemm transB,
     * Gemm with alpha and B stored [K,N] */
    static const char *const names[] = {"x", "conv1", "relu1", "pool1", "conv2", "flat", "fc1",
                                        "logits"};
    check_fixture("a", names, 8);
}

static void test_fixture_b(void **state) {
    (void)state;
    /* strided padded Conv, Add of two activations, GlobalAveragePool, MatMul + Add bias,
     * trailing Softmax skipped; inputs in [-1,1] exercise the negative half of z+ */
    static const char *const names[] = {"x", "relu1", "res", "sum", "gap", "mm", "logits"};
    check_fixture("b", names, 7);
    fl_model *m = load(FIX "b.onnx");
    fl_lrp *l = lrp_new(m, FL_LRP_EPSILON);
    assert_string_equal(fl_lrp_explained(l), "logits");
    assert_null(fl_lrp_relevance(l, "x")); /* nothing before a run */
    fl_lrp_free(l);
    fl_model_free(m);
}

/* ---- conservation on LeNet-5 ------------------------------------------------------------------ */
static fl_model *lenet(int zero_bias) {
    fl_err e = {0};
    fl_model *m = NULL;
    assert_int_equal(fl_zoo_build("lenet5", 1, 28, 28, 10, 7, &m, &e), FL_OK);
    for (int v = 0; v < m->n_values && zero_bias; v++) {
        fl_value *val = &m->values[v];
        size_t n = strlen(val->name);
        if (val->kind == FL_VAL_PARAM && n > 5 && !strcmp(val->name + n - 5, ".bias"))
            memset(val->t.data, 0, sizeof(float) * (size_t)val->t.size);
    }
    return m;
}

static fl_tensor images(int n, uint64_t seed) {
    fl_rng r;
    fl_rng_seed(&r, seed);
    return tu_tensor(4, (int64_t[]){n, 1, 28, 28}, &r, 0, 1);
}

static void test_conservation(void **state) {
    (void)state;
    fl_model *m = lenet(1);
    fl_tensor x = images(4, 11);
    fl_lrp *l = lrp_new(m, FL_LRP_EPSILON);
    forward(m, &x);
    lrp_run(l, NULL);
    const fl_tensor *y = fl_model_output(m, 0);
    fl_layer_info *L;
    fl_err e = {0};
    int nl = fl_model_layers(m, &L, &e);
    assert_true(nl > 0);
    for (int b = 0; b < 4; b++) {
        float best = y->data[b * 10];
        for (int k = 1; k < 10; k++) best = fmaxf(best, y->data[b * 10 + k]);
        /* without biases, every tensor on the path holds the whole logit (up to eps) */
        const fl_tensor *rx = fl_lrp_relevance(l, "input");
        assert_non_null(rx);
        double s = tsum(rx, b * 784, 784);
        if (fabs(s - best) > 1e-4 * fabs(best)) fail_msg("input %d: sum R %g, logit %g", b, s, best);
        for (int i = 0; i < nl; i++) {
            const fl_tensor *r = fl_lrp_relevance(l, L[i].name);
            assert_non_null(r);
            int64_t per = r->size / 4;
            double t = tsum(r, b * per, per);
            if (fabs(t - best) > 1e-4 * fabs(best))
                fail_msg("layer %s input %d: sum R %g, logit %g", L[i].name, b, t, best);
        }
    }
    free(L);
    fl_lrp_free(l);
    fl_model_free(m);

    /* With biases, the bias of a Gemm keeps its share: sum_i R_i = sum_j R_j (z_j - b_j)/z_j */
    m = lenet(0);
    l = lrp_new(m, FL_LRP_EPSILON);
    forward(m, &x);
    lrp_run(l, NULL);
    const fl_tensor *z = fl_model_tensor(m, "logits"), *bias = fl_model_tensor(m, "fc3.bias");
    const fl_tensor *rz = fl_lrp_relevance(l, "logits");
    const fl_tensor *rin = fl_lrp_relevance(l, m->values[m->nodes[m->n_nodes - 1].in[0]].name);
    assert_non_null(z);
    assert_non_null(bias);
    assert_non_null(rin);
    for (int b = 0; b < 4; b++) {
        double want = 0;
        for (int k = 0; k < 10; k++) {
            double zz = z->data[b * 10 + k];
            want += rz->data[b * 10 + k] * (zz - bias->data[k]) / (zz + (zz >= 0 ? 1e-7 : -1e-7));
        }
        int64_t per = rin->size / 4;
        assert_float_equal(tsum(rin, b * per, per), want, 1e-5 * (fabs(want) + 1e-3));
    }
    fl_lrp_free(l);
    fl_model_free(m);
    fl_tensor_free(&x);
}

/* A batch gives every input the relevance it gets alone; targets pick the logit; -1 skips. */
static void test_targets_and_batches(void **state) {
    (void)state;
    fl_model *m = lenet(0);
    fl_tensor x = images(3, 5);
    fl_lrp *l = lrp_new(m, FL_LRP_ZPLUS);
    int32_t tg[3] = {4, -1, 9};
    forward(m, &x);
    lrp_run(l, tg);
    fl_tensor all = {0};
    assert_int_equal(fl_tensor_copy(&all, fl_lrp_relevance(l, "input")), FL_OK);
    const fl_tensor *rl = fl_lrp_relevance(l, "logits");
    for (int k = 0; k < 10; k++) {
        assert_true(k == 4 || rl->data[k] == 0);
        assert_true(rl->data[10 + k] == 0);
    }
    assert_float_equal(rl->data[4], fl_model_output(m, 0)->data[4], 0);
    for (int64_t i = 784; i < 2 * 784; i++) assert_true(all.data[i] == 0);
    for (int b = 0; b < 3; b += 2) {
        fl_tensor one = {.ndim = 4, .shape = {1, 1, 28, 28}, .size = 784, .data = x.data + b * 784};
        forward(m, &one);
        lrp_run(l, &tg[b]);
        const fl_tensor *r = fl_lrp_relevance(l, "input");
        for (int64_t i = 0; i < 784; i++)
            assert_float_equal(r->data[i], all.data[b * 784 + i],
                               1e-5 * (fabs(all.data[b * 784 + i]) + 1e-4));
    }
    fl_err e = {0};
    int32_t bad = 10;
    forward(m, &(fl_tensor){.ndim = 4, .shape = {1, 1, 28, 28}, .size = 784, .data = x.data});
    assert_int_equal(fl_lrp_run(l, &bad, &e), FL_ERR_ARG);
    m->training = 1;
    assert_int_equal(fl_lrp_run(l, NULL, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "eval"));
    m->training = 0;
    fl_tensor_free(&all);
    fl_tensor_free(&x);
    fl_lrp_free(l);
    fl_model_free(m);
}

/* An op without a rule on the path fails at fl_lrp_new, naming the node. */
static void test_unsupported(void **state) {
    (void)state;
    fl_err e = {0};
    fl_model *m = fl_model_new();
    int x = fl_model_add_value(m, "x", FL_VAL_INPUT,
                               &(fl_tensor){.ndim = 2, .shape = {0, 3}, .size = 0}, &e);
    int s = fl_model_add_op(m, "Sigmoid", "squash", 1, &x, 0, NULL, &e);
    fl_rng r;
    fl_rng_seed(&r, 1);
    fl_tensor wt = tu_tensor(2, (int64_t[]){3, 2}, &r, -1, 1);
    int w = fl_model_add_value(m, "w", FL_VAL_PARAM, &wt, &e);
    int y = fl_model_add_op(m, "MatMul", "dense", 2, (int[]){s, w}, 0, NULL, &e);
    assert_true(y >= 0);
    assert_int_equal(fl_model_set_io(m, 1, &x, 1, &y, &e), FL_OK);
    assert_int_equal(fl_model_finish(m, &e), FL_OK);
    fl_lrp_opts o;
    fl_lrp_opts_default(&o);
    fl_lrp *l = NULL;
    assert_int_equal(fl_lrp_new(m, &o, &l, &e), FL_ERR_UNSUPPORTED);
    assert_null(l);
    assert_non_null(strstr(e.msg, "squash"));
    assert_non_null(strstr(e.msg, "Sigmoid"));
    fl_lrp_rule rule;
    assert_int_equal(fl_lrp_rule_parse("z+", &rule, &e), FL_OK);
    assert_int_equal(rule, FL_LRP_ZPLUS);
    assert_int_equal(fl_lrp_rule_parse("gamma", &rule, &e), FL_ERR_ARG);
    fl_tensor_free(&wt);
    fl_model_free(m);
}

/* ---- important neurons ------------------------------------------------------------------------ */
/* 40 random images labelled with model a's own predictions, except every 4th (wrong label). */
static fl_dataset *labelled(fl_model *m, int n) {
    fl_err e = {0};
    fl_dataset *d = NULL;
    assert_int_equal(fl_dataset_new(n, 1, 10, 10, &d, &e), FL_OK);
    fl_rng r;
    fl_rng_seed(&r, 3);
    for (int64_t i = 0; i < d->n * 100; i++) d->x[i] = fl_rng_uniform(&r);
    fl_tensor x = fl_dataset_view(d, 0, n);
    forward(m, &x);
    const fl_tensor *y = fl_model_output(m, 0);
    for (int i = 0; i < n; i++) {
        int p = 0;
        for (int k = 1; k < 3; k++)
            if (y->data[i * 3 + k] > y->data[i * 3 + p]) p = k;
        d->y[i] = i % 4 == 3 ? (p + 1) % 3 : p;
    }
    d->has_labels = 1;
    d->n_classes = 3;
    return d;
}

static void test_important(void **state) {
    (void)state;
    fl_err e = {0};
    fl_model *m = load(FIX "a.onnx");
    fl_dataset *d = labelled(m, 40);
    fl_important_opts o;
    fl_important_opts_default(&o);
    o.batch = 16; /* 40 = 16 + 16 + 8: the last batch is short */
    o.layers = "conv1,bn1,relu1,fc1";
    fl_important *imp = NULL;
    if (fl_important_compute(m, d, &o, &imp, &e) != FL_OK) fail_msg("%s", e.msg);
    assert_int_equal(imp->n_seen, 40);
    assert_int_equal(imp->n_inputs, 30);
    assert_int_equal(imp->n_layers, 4);

    /* the sums, by hand: one input at a time, correct ones only */
    fl_lrp *l = lrp_new(m, FL_LRP_EPSILON);
    double want[8] = {0}, want_fc[8] = {0};
    for (int i = 0; i < 40; i++) {
        if (i % 4 == 3) continue;
        fl_tensor one = fl_dataset_view(d, i, 1);
        forward(m, &one);
        lrp_run(l, NULL);
        const fl_tensor *r = fl_lrp_relevance(l, "conv1"), *f = fl_lrp_relevance(l, "fc1");
        for (int c = 0; c < 4; c++) want[c] += tsum(r, c * 100, 100);
        for (int c = 0; c < 8; c++) want_fc[c] += f->data[c];
    }
    fl_lrp_free(l);
    const fl_important_layer *c1 = fl_important_layer_find(imp, "conv1");
    const fl_important_layer *r1 = fl_important_layer_find(imp, "relu1");
    const fl_important_layer *f1 = fl_important_layer_find(imp, "fc1");
    assert_non_null(c1);
    assert_non_null(r1);
    assert_non_null(f1);
    assert_null(fl_important_layer_find(imp, "pool1"));
    for (int c = 0; c < 4; c++) assert_float_equal(c1->relevance[c], want[c], 1e-5 * fabs(want[c]) + 1e-7);
    for (int c = 0; c < 8; c++)
        assert_float_equal(f1->relevance[c], want_fc[c], 1e-5 * fabs(want_fc[c]) + 1e-7);
    /* round(0.4 * 4) = 2, round(0.4 * 8) = 3; most relevant first, none left out beats them */
    assert_int_equal(c1->count, 2);
    assert_int_equal(f1->count, 3);
    for (int k = 1; k < f1->count; k++)
        assert_true(f1->relevance[f1->neuron[k - 1]] >= f1->relevance[f1->neuron[k]]);
    for (int c = 0; c < 8; c++) {
        int in = 0;
        for (int k = 0; k < 3; k++) in |= f1->neuron[k] == c;
        if (!in) assert_true(f1->relevance[c] <= f1->relevance[f1->neuron[2]]);
    }
    /* a ReLU passes relevance through: its layer ranks like the one below it */
    const fl_important_layer *b1 = fl_important_layer_find(imp, "bn1");
    assert_non_null(b1);
    for (int c = 0; c < 4; c++) assert_float_equal(r1->relevance[c], b1->relevance[c], 1e-9);

    /* JSON round trip */
    char path[64];
    snprintf(path, sizeof path, "/tmp/flare_test_imp_%d.json", (int)getpid());
    assert_int_equal(fl_important_save(imp, path, &e), FL_OK);
    fl_important *back = NULL;
    if (fl_important_load(path, &back, &e) != FL_OK) fail_msg("%s", e.msg);
    assert_int_equal(back->n_layers, 4);
    assert_int_equal(back->rule, FL_LRP_EPSILON);
    assert_int_equal(back->n_inputs, 30);
    assert_float_equal(back->ratio, 0.4, 0);
    for (int i = 0; i < 4; i++) {
        assert_string_equal(back->layers[i].name, imp->layers[i].name);
        assert_int_equal(back->layers[i].count, imp->layers[i].count);
        for (int64_t k = 0; k < imp->layers[i].count; k++)
            assert_int_equal(back->layers[i].neuron[k], imp->layers[i].neuron[k]);
        for (int64_t k = 0; k < imp->layers[i].width; k++)
            if (back->layers[i].relevance[k] != imp->layers[i].relevance[k]) fail_msg("%d %lld %.17g %.17g", i, (long long)k, back->layers[i].relevance[k], imp->layers[i].relevance[k]);
    }

    /* the subset of a layer set: flat indices, ascending */
    fl_layerset *ls = NULL;
    assert_int_equal(fl_layerset_make(m, "fc1,conv1", &ls, &e), FL_OK);
    int64_t *idx, n;
    assert_int_equal(fl_important_subset(back, ls, &idx, &n, &e), FL_OK);
    assert_int_equal(n, 5);
    for (int64_t k = 1; k < n; k++) assert_true(idx[k - 1] < idx[k]);
    for (int k = 0; k < 3; k++) {
        int found = 0;
        for (int64_t j = 0; j < n; j++) found |= idx[j] == f1->neuron[k];
        assert_true(found);
    }
    free(idx);
    fl_layerset_free(ls);
    assert_int_equal(fl_layerset_make(m, "pool1", &ls, &e), FL_OK);
    assert_int_equal(fl_important_subset(back, ls, &idx, &n, &e), FL_ERR_NOTFOUND);
    assert_non_null(strstr(e.msg, "pool1"));
    fl_layerset_free(ls);

    /* re-ranking */
    assert_int_equal(fl_important_set_ratio(back, 1.0, &e), FL_OK);
    assert_int_equal(back->layers[0].count, 4);
    assert_int_equal(fl_important_set_ratio(back, 0.625, &e), FL_OK); /* 2.5 -> 2, 5 -> 5 */
    assert_int_equal(back->layers[0].count, 2);
    assert_int_equal(back->layers[3].count, 5);
    assert_int_equal(fl_important_set_ratio(back, 0.01, &e), FL_OK);
    assert_int_equal(back->layers[3].count, 1);
    assert_int_equal(fl_important_set_ratio(back, 0, &e), FL_ERR_ARG);
    fl_important_free(back);
    unlink(path);
    fl_important_free(imp);

    /* errors: unlabelled data, nothing correct */
    d->has_labels = 0;
    assert_int_equal(fl_important_compute(m, d, &o, &imp, &e), FL_ERR_ARG);
    d->has_labels = 1;
    for (int i = 0; i < 40; i++) d->y[i] = -1; /* labelled, but no label matches */
    assert_int_equal(fl_important_compute(m, d, &o, &imp, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "correctly"));
    fl_dataset_free(d);
    fl_model_free(m);
}

static void write_file(const char *path, const char *txt) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(txt, f);
    fclose(f);
}

static void test_load_errors(void **state) {
    (void)state;
    static const struct {
        const char *txt, *needle;
    } cases[] = {
        {"{", "invalid JSON"},
        {"{\"format\":\"x\"}", "format"},
        {"{\"format\":\"flare-important-neurons\",\"rule\":\"gamma\",\"layers\":[]}", "rule"},
        {"{\"format\":\"flare-important-neurons\",\"rule\":\"epsilon\",\"layers\":[]}", "layers"},
        {"{\"format\":\"flare-important-neurons\",\"rule\":\"epsilon\",\"layers\":[{\"name\":\"a\","
         "\"neurons\":3,\"important\":[0,0],\"relevance\":[1,2,3]}]}",
         "distinct"},
        {"{\"format\":\"flare-important-neurons\",\"rule\":\"epsilon\",\"layers\":[{\"name\":\"a\","
         "\"neurons\":3,\"important\":[5],\"relevance\":[1,2,3]}]}",
         "important[0]"},
        {"{\"format\":\"flare-important-neurons\",\"rule\":\"epsilon\",\"layers\":[{\"name\":\"a\","
         "\"neurons\":3,\"important\":[1],\"relevance\":[1,2]}]}",
         "relevance values"},
        {"{\"format\":\"flare-important-neurons\",\"rule\":\"zplus\",\"layers\":[{\"name\":\"a\","
         "\"neurons\":3,\"important\":[1],\"relevance\":[1,\"x\",3]}]}",
         "relevance[1]"},
        /* a count too large for an integer (casting it would be undefined behaviour) */
        {"{\"format\":\"flare-important-neurons\",\"rule\":\"zplus\",\"inputs\":1.3e79,"
         "\"layers\":[{\"name\":\"a\",\"neurons\":3,\"important\":[1],\"relevance\":[1,2,3]}]}",
         "\"inputs\""},
        {"{\"format\":\"flare-important-neurons\",\"rule\":\"zplus\",\"layers\":[{\"name\":"
         "\"a\",\"neurons\":1e300,\"important\":[1],\"relevance\":[1,2,3]}]}",
         "\"neurons\""},
    };
    char path[64];
    snprintf(path, sizeof path, "/tmp/flare_test_bad_%d.json", (int)getpid());
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        write_file(path, cases[i].txt);
        fl_err e = {0};
        fl_important *imp = NULL;
        assert_int_equal(fl_important_load(path, &imp, &e), FL_ERR_FORMAT);
        assert_null(imp);
        if (!strstr(e.msg, cases[i].needle) || !strstr(e.msg, path))
            fail_msg("case %zu: '%s' lacks '%s'", i, e.msg, cases[i].needle);
    }
    unlink(path);
    fl_err e = {0};
    fl_important *imp = NULL;
    assert_int_equal(fl_important_load("/nonexistent/imp.json", &imp, &e), FL_ERR_IO);
}


/* ---- IDC ----------------------------------------------------------------------------------------- */
static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The O(n k) silhouette equals scikit-learn's definition computed from all pairs. */
static void test_silhouette(void **state) {
    (void)state;
    fl_rng r;
    fl_rng_seed(&r, 9);
    enum { N = 57 };
    double x[N];
    for (int i = 0; i < N; i++) x[i] = (i % 3) * 2.0 + fl_rng_normal(&r) * 0.7;
    x[5] = x[6]; /* a duplicate value */
    qsort(x, N, sizeof *x, cmp_dbl);
    const int64_t cuts[][5] = {{0, 20, N}, {0, 1, 30, N}, {0, 10, 25, 40, N}, {0, 15, 15, 40, N}};
    const int ks[] = {2, 3, 4, 4};
    for (int c = 0; c < 4; c++) {
        int k = ks[c];
        double want = 0;
        for (int i = 0; i < N; i++) {
            int t = 0;
            while (i >= cuts[c][t + 1]) t++;
            int64_t na = cuts[c][t + 1] - cuts[c][t];
            if (na <= 1) continue;
            double a = 0, b = INFINITY;
            for (int64_t j = cuts[c][t]; j < cuts[c][t + 1]; j++) a += fabs(x[i] - x[j]);
            a /= (double)(na - 1);
            for (int u = 0; u < k; u++) {
                int64_t nb = cuts[c][u + 1] - cuts[c][u];
                if (u == t || nb == 0) continue;
                double s = 0;
                for (int64_t j = cuts[c][u]; j < cuts[c][u + 1]; j++) s += fabs(x[i] - x[j]);
                b = fmin(b, s / (double)nb);
            }
            want += (b - a) / fmax(a, b);
        }
        want /= N;
        assert_float_equal(fl_silhouette1d(x, N, cuts[c], k), want, 1e-12);
    }
}

/* Blobs around known centres: the silhouette picks their number, k-means finds their centres. */
static void test_kmeans(void **state) {
    (void)state;
    fl_err e = {0};
    fl_rng r;
    fl_rng_seed(&r, 4);
    static const double centres[3][4] = {{-3, 4, 0, 0}, {1, 5, 9, 0}, {0, 2, 4, 6}};
    for (int k = 2; k <= 4; k++) {
        enum { N = 600 };
        float v[N];
        for (int i = 0; i < N; i++) v[i] = (float)(centres[k - 2][i % k] + 0.15 * fl_rng_normal(&r));
        fl_kmeans1d km, again;
        assert_int_equal(fl_kmeans1d_fit(v, N, 2, 4, FL_KMEANS_PP, 77, &km, &e), FL_OK);
        assert_int_equal(km.k, k);
        assert_true(km.silhouette > 0.8);
        double sorted[4];
        memcpy(sorted, centres[k - 2], sizeof sorted);
        qsort(sorted, (size_t)k, sizeof(double), cmp_dbl);
        for (int t = 0; t < k; t++) assert_float_equal(km.centroid[t], sorted[t], 0.05);
        for (int t = 1; t < k; t++) assert_true(km.centroid[t - 1] < km.centroid[t]);
        assert_int_equal(fl_kmeans1d_assign(&km, (float)sorted[k - 1] + 0.3f), k - 1);
        assert_int_equal(fl_kmeans1d_assign(&km, -100), 0);
        assert_int_equal(fl_kmeans1d_fit(v, N, 2, 4, FL_KMEANS_PP, 77, &again, &e), FL_OK);
        assert_memory_equal(&km, &again, sizeof km); /* the seed decides everything */
        assert_int_equal(fl_kmeans1d_fit(v, N, 2, 4, FL_KMEANS_EXACT, 0, &again, &e), FL_OK);
        assert_int_equal(again.k, k); /* on clear blobs both find the optimum */
        for (int t = 0; t < k; t++) assert_float_equal(again.centroid[t], km.centroid[t], 1e-9);
    }
    float same[20], two[12];
    for (int i = 0; i < 20; i++) same[i] = 2.5f;
    fl_kmeans1d km;
    assert_int_equal(fl_kmeans1d_fit(same, 20, 2, 4, FL_KMEANS_EXACT, 1, &km, &e), FL_OK);
    assert_int_equal(km.k, 1);
    assert_float_equal(km.centroid[0], 2.5, 0);
    for (int i = 0; i < 12; i++) two[i] = i < 5 ? 1.0f : 3.0f;
    assert_int_equal(fl_kmeans1d_fit(two, 12, 2, 4, FL_KMEANS_PP, 1, &km, &e), FL_OK);
    assert_int_equal(km.k, 2);
    assert_float_equal(km.silhouette, 1.0, 1e-12);
    two[3] = NAN;
    assert_int_equal(fl_kmeans1d_fit(two, 12, 2, 4, FL_KMEANS_PP, 1, &km, &e), FL_ERR_NAN);
    assert_int_equal(fl_kmeans1d_fit(two, 12, 3, 2, FL_KMEANS_EXACT, 1, &km, &e), FL_ERR_ARG);
}

/* input [N,4,1,1] -> Flatten -> Relu "act" -> MatMul -> logits [N,2] */
static fl_model *idc_model(void) {
    fl_err e = {0};
    fl_model *m = fl_model_new();
    int x = fl_model_add_value(m, "x", FL_VAL_INPUT,
                               &(fl_tensor){.ndim = 4, .shape = {0, 4, 1, 1}}, &e);
    int f = fl_model_add_op(m, "Flatten", "flat", 1, &x, 0, NULL, &e);
    int a = fl_model_add_op(m, "Relu", "act", 1, &f, 0, NULL, &e);
    fl_tensor wt = {0};
    assert_int_equal(fl_tensor_alloc(&wt, 2, (int64_t[]){4, 2}), FL_OK);
    for (int i = 0; i < 8; i++) wt.data[i] = (float)(i % 3) - 1;
    int w = fl_model_add_value(m, "w", FL_VAL_PARAM, &wt, &e);
    int y = fl_model_add_op(m, "MatMul", "logits", 2, (int[]){a, w}, 0, NULL, &e);
    assert_true(y >= 0);
    assert_int_equal(fl_model_set_io(m, 1, &x, 1, &y, &e), FL_OK);
    assert_int_equal(fl_model_finish(m, &e), FL_OK);
    fl_tensor_free(&wt);
    return m;
}

static void test_idc(void **state) {
    (void)state;
    fl_err e = {0};
    fl_model *m = idc_model();
    /* training values: neuron 0 in 3 clusters, neuron 1 in 2, neuron 2 in 4, neuron 3 mostly
     * zero (dead: one cluster at 0 however it is ranked) */
    fl_dataset *d = NULL;
    enum { N = 480 };
    assert_int_equal(fl_dataset_new(N, 4, 1, 1, &d, &e), FL_OK);
    fl_rng r;
    fl_rng_seed(&r, 12);
    for (int i = 0; i < N; i++) {
        float noise[4];
        for (int j = 0; j < 4; j++) noise[j] = 0.05f * fl_rng_normal(&r);
        d->x[i * 4 + 0] = 1 + 4 * (i % 3) + noise[0];
        d->x[i * 4 + 1] = 2 + 6 * (i % 2) + noise[1];
        d->x[i * 4 + 2] = 1 + 2 * (i % 4) + noise[2];
        d->x[i * 4 + 3] = i < 5 ? 1.0f + noise[3] : 0.0f;
    }
    /* important neurons: relevance ranks 2, 0, 3, 1 */
    fl_important imp = {.rule = FL_LRP_EPSILON, .eps = 1e-7, .ratio = 0.5, .n_layers = 1};
    double rel[4] = {3, 0.5, 4, 2};
    int64_t top[2] = {2, 0};
    fl_important_layer L = {.name = "act_output_0", .width = 4, .count = 2, .neuron = top,
                            .relevance = rel};
    imp.layers = &L;
    char path[64];
    snprintf(path, sizeof path, "/tmp/flare_test_idc_%d.json", (int)getpid());
    assert_int_equal(fl_important_save(&imp, path, &e), FL_OK);

    fl_layerset *ls = NULL;
    assert_int_equal(fl_layerset_make(m, "all", &ls, &e), FL_OK);
    assert_int_equal(ls->n, 2); /* act, logits: the default layer skips the logits */
    fl_cover_ctx ctx = {.m = m, .ls = ls, .train = d, .aux = path};
    fl_cover *c = NULL;
    /* M = 3: neurons 2, 0, 3 -> k = 4, 3, 1: 12 combinations */
    if (fl_cover_new_ops(&fl_cover_idc, &ctx, "3", &c, &e) != FL_OK) fail_msg("%s", e.msg);
    int64_t cov, tot;
    fl_cover_stats(c, &cov, &tot);
    assert_int_equal(tot, 12);
    assert_int_equal(cov, 0);
    assert_string_equal(c->group_name[0], "act_output_0");

    /* a batch: neuron values [n, total = 4 + 2] */
    float v[5][6] = {
        {1, 0, 1, 0, 0, 0},   /* n2 -> cluster 0, n0 -> 0 */
        {1.1f, 9, 1.2f, 7, 0, 0}, /* same combination (n1, n3 do not count) */
        {9, 0, 7, 0, 0, 0},   /* n2 -> 3, n0 -> 2 */
        {5, 0, 3.2f, 0, 0, 0},  /* n2 -> 1, n0 -> 1 */
        {100, 0, -50, 0, 0, 0}, /* out of range: nearest centroids, n2 -> 0, n0 -> 2 */
    };
    fl_cover_batch b = {.n = 5, .mean = &v[0][0]};
    uint8_t added[5];
    int any;
    assert_int_equal(fl_cover_update(c, &b, added, &any, &e), FL_OK);
    assert_true(any);
    static const uint8_t want[5] = {1, 0, 1, 1, 1};
    assert_memory_equal(added, want, 5);
    fl_cover_stats(c, &cov, &tot);
    assert_int_equal(cov, 4);
    /* every combination once: full coverage */
    float all[12][6];
    memset(all, 0, sizeof all);
    for (int i = 0; i < 12; i++) {
        all[i][2] = 1 + 2 * (i % 4);
        all[i][0] = 1 + 4 * (i / 4);
    }
    b = (fl_cover_batch){.n = 12, .mean = &all[0][0]};
    assert_int_equal(fl_cover_update(c, &b, NULL, &any, &e), FL_OK);
    fl_cover_stats(c, &cov, &tot);
    assert_int_equal(cov, 12);
    fl_cover_free(c);

    /* M = 2 on an explicit layer, either method; M larger than the layer takes all four */
    assert_int_equal(fl_cover_new_ops(&fl_cover_idc, &ctx, "2:act_output_0", &c, &e), FL_OK);
    fl_cover_stats(c, &cov, &tot);
    assert_int_equal(tot, 12);
    fl_cover_free(c);
    assert_int_equal(fl_cover_new_ops(&fl_cover_idc, &ctx, "2:exact:act_output_0", &c, &e), FL_OK);
    fl_cover_stats(c, &cov, &tot);
    assert_int_equal(tot, 12);
    fl_cover_free(c);
    fl_layerset_free(ls);
    assert_int_equal(fl_layerset_make(m, "act_output_0", &ls, &e), FL_OK);
    ctx.ls = ls;
    assert_int_equal(fl_cover_new_ops(&fl_cover_idc, &ctx, "10", &c, &e), FL_OK);
    fl_cover_stats(c, &cov, &tot);
    assert_int_equal(tot, 4 * 3 * 2 * 1);
    fl_cover_free(c);

    /* errors */
    static const struct {
        const char *arg;
        fl_status st;
        const char *needle;
    } bad[] = {{"0", FL_ERR_ARG, "idc:0"}, {"11", FL_ERR_ARG, "idc:11"},
               {"3:nope", FL_ERR_NOTFOUND, "nope"}, {"3:a:b", FL_ERR_ARG, "neither"},
               {"3:a:b:c", FL_ERR_ARG, "too many"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(fl_cover_new_ops(&fl_cover_idc, &ctx, bad[i].arg, &c, &e), bad[i].st);
        if (!strstr(e.msg, bad[i].needle)) fail_msg("'%s': %s", bad[i].arg, e.msg);
    }
    ctx.aux = NULL;
    assert_int_equal(fl_cover_new_ops(&fl_cover_idc, &ctx, NULL, &c, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "flare nn lrp"));
    ctx.aux = path;
    ctx.train = NULL;
    assert_int_equal(fl_cover_new_ops(&fl_cover_idc, &ctx, NULL, &c, &e), FL_ERR_ARG);
    fl_layerset_free(ls);
    unlink(path);
    fl_dataset_free(d);
    fl_model_free(m);
}

/* IDC against the numpy re-implementation (tests/fixtures/lrp/make_idc.py) on the values of a
 * real model: LeNet-1's relu2 channel means on Fashion-MNIST, fed through a model whose layer
 * is those values (input [N,12,1,1] -> Flatten). */
static void test_idc_reference(void **state) {
    (void)state;
    fl_err e = {0};
    fl_npy tr, te;
    assert_int_equal(fl_npy_read(FIX "idc_train.npy", &tr, &e), FL_OK);
    assert_int_equal(fl_npy_read(FIX "idc_test.npy", &te, &e), FL_OK);
    uint8_t *buf;
    size_t len;
    assert_int_equal(fl_file_read(FIX "idc_reference.json", &buf, &len, &e), FL_OK);
    cJSON *ref = cJSON_ParseWithLength((const char *)buf, len);
    free(buf);
    assert_non_null(ref);
    int64_t n = tr.shape[0], w = tr.shape[1];
    assert_int_equal(w, 12);

    fl_model *m = fl_model_new();
    int x = fl_model_add_value(m, "x", FL_VAL_INPUT, &(fl_tensor){.ndim = 4, .shape = {0, 12, 1, 1}}, &e);
    int f = fl_model_add_op(m, "Flatten", "flat", 1, &x, 0, NULL, &e);
    fl_tensor wt = {0};
    assert_int_equal(fl_tensor_alloc(&wt, 2, (int64_t[]){12, 2}), FL_OK);
    int wv = fl_model_add_value(m, "w", FL_VAL_PARAM, &wt, &e);
    int y = fl_model_add_op(m, "MatMul", "logits", 2, (int[]){f, wv}, 0, NULL, &e);
    assert_int_equal(fl_model_set_io(m, 1, &x, 1, &y, &e), FL_OK);
    assert_int_equal(fl_model_finish(m, &e), FL_OK);
    fl_tensor_free(&wt);
    fl_dataset *d = NULL;
    assert_int_equal(fl_dataset_new(n, 12, 1, 1, &d, &e), FL_OK);
    memcpy(d->x, tr.data, sizeof(float) * (size_t)(n * 12));

    double rel[12];
    int k = 0;
    cJSON *it;
    cJSON_ArrayForEach(it, cJSON_GetObjectItem(ref, "relevance")) rel[k++] = it->valuedouble;
    int64_t top[1] = {0};
    fl_important_layer L = {.name = "flat_output_0", .width = 12, .count = 1, .neuron = top,
                            .relevance = rel};
    fl_important imp = {.rule = FL_LRP_EPSILON, .eps = 1e-7, .ratio = 0.1, .n_layers = 1,
                        .layers = &L};
    char path[64];
    snprintf(path, sizeof path, "/tmp/flare_test_idcref_%d.json", (int)getpid());
    assert_int_equal(fl_important_save(&imp, path, &e), FL_OK);
    fl_layerset *ls = NULL;
    assert_int_equal(fl_layerset_make(m, "flat_output_0", &ls, &e), FL_OK);
    fl_cover_ctx ctx = {.m = m, .ls = ls, .train = d, .aux = path};

    cJSON *cs;
    cJSON_ArrayForEach(cs, cJSON_GetObjectItem(ref, "cases")) {
        char arg[16];
        int M = cJSON_GetObjectItem(cs, "m")->valueint;
        snprintf(arg, sizeof arg, "%d:exact", M);
        fl_cover *c = NULL;
        if (fl_cover_new_ops(&fl_cover_idc, &ctx, arg, &c, &e) != FL_OK) fail_msg("%s", e.msg);
        /* the clusterings, one per important neuron, through the building blocks */
        cJSON *cl;
        int j = 0;
        cJSON_ArrayForEach(cl, cJSON_GetObjectItem(cs, "clusters")) {
            int nj = cJSON_GetArrayItem(cJSON_GetObjectItem(cs, "neurons"), j++)->valueint;
            float *v = malloc(sizeof(float) * (size_t)n);
            int64_t nz = 0;
            for (int64_t i = 0; i < n; i++)
                if (((float *)tr.data)[i * 12 + nj] != 0) v[nz++] = ((float *)tr.data)[i * 12 + nj];
            int want_k = cJSON_GetObjectItem(cl, "k")->valueint;
            if (want_k > 1) {
                fl_kmeans1d ex, pp;
                assert_int_equal(fl_kmeans1d_fit(v, nz, 2, 4, FL_KMEANS_EXACT, 0, &ex, &e), FL_OK);
                assert_int_equal(ex.k, want_k);
                for (int t = 0; t < ex.k; t++) {
                    double ct = cJSON_GetArrayItem(cJSON_GetObjectItem(cl, "centroids"), t)->valuedouble;
                    if (fabs(ex.centroid[t] - ct) > 1e-9 * fabs(ct))
                        fail_msg("M=%d neuron %d: centroid %d = %.9g, numpy %.9g", M, nj, t, ex.centroid[t], ct);
                }
                assert_float_equal(ex.silhouette, cJSON_GetObjectItem(cl, "silhouette")->valuedouble, 1e-9);
                /* k-means++ (scikit-learn's way) lands on the same k, at most a hair above the
                 * optimum (here it can stop in the neighbouring local minimum) */
                assert_int_equal(fl_kmeans1d_fit(v, nz, 2, 4, FL_KMEANS_PP, 0x1dcull + (uint64_t)nj, &pp, &e), FL_OK);
                assert_int_equal(pp.k, want_k);
                assert_true(pp.inertia >= ex.inertia * (1 - 1e-12));
                assert_true(pp.inertia <= ex.inertia * 1.001);
            }
            free(v);
        }
        /* the coverage, input by input */
        int64_t cov, tot;
        fl_cover_stats(c, &cov, &tot);
        assert_int_equal(tot, cJSON_GetObjectItem(cs, "total")->valueint);
        fl_cover_batch b = {.n = (int)te.shape[0], .mean = te.data};
        uint8_t *added = calloc((size_t)b.n, 1);
        assert_int_equal(fl_cover_update(c, &b, added, NULL, &e), FL_OK);
        fl_cover_stats(c, &cov, &tot);
        assert_int_equal(cov, cJSON_GetObjectItem(cs, "covered")->valueint);
        int i = 0;
        cJSON_ArrayForEach(it, cJSON_GetObjectItem(cs, "added")) {
            if (added[i] != it->valueint) fail_msg("M=%d: input %d added %d, numpy says %d", M, i, added[i], it->valueint);
            i++;
        }
        free(added);
        fl_cover_free(c);
    }
    unlink(path);
    fl_layerset_free(ls);
    fl_dataset_free(d);
    fl_model_free(m);
    cJSON_Delete(ref);
    fl_npy_free(&tr);
    fl_npy_free(&te);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_a),
        cmocka_unit_test(test_fixture_b),
        cmocka_unit_test(test_conservation),
        cmocka_unit_test(test_targets_and_batches),
        cmocka_unit_test(test_unsupported),
        cmocka_unit_test(test_important),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_silhouette),
        cmocka_unit_test(test_kmeans),
        cmocka_unit_test(test_idc),
        cmocka_unit_test(test_idc_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
