/* Training: losses (values and finite differences), optimiser steps against hand-computed
 * values, the model zoo (shapes, parameter counts, names, init), a short training run on a
 * separable synthetic dataset, determinism, evaluation, and a finite-difference check of a
 * whole LeNet-1's gradient. */
#include "testutil.h"

#include "flare/train.h"

/* ---- losses ------------------------------------------------------------------------------------ */
/* Central differences of fl_loss_labels(k) with respect to every logit (double-checked in
 * float: the losses are O(1) so eps = 1e-2 keeps rounding noise near 1e-5). */
static void check_loss_grad(fl_loss_kind k, int B, int C) {
    fl_rng r;
    fl_rng_seed(&r, 7 + k);
    float x[64], d[64];
    int32_t y[16];
    assert_true(B * C <= 64 && B <= 16);
    for (int i = 0; i < B * C; i++) x[i] = 4.0f * fl_rng_uniform(&r) - 2.0f;
    for (int b = 0; b < B; b++) y[b] = (int32_t)fl_rng_below(&r, C == 1 ? 2 : (uint32_t)C);
    float l0 = fl_loss_labels(k, d, x, y, B, C);
    assert_true(isfinite(l0) && l0 > 0);
    const float eps = 1e-2f;
    for (int i = 0; i < B * C; i++) {
        float old = x[i];
        x[i] = old + eps;
        double lp = fl_loss_labels(k, NULL, x, y, B, C);
        x[i] = old - eps;
        double lm = fl_loss_labels(k, NULL, x, y, B, C);
        x[i] = old;
        double num = (lp - lm) / (2 * eps);
        if (fabs(num - d[i]) > 2e-4 + 1e-2 * fabs(num))
            fail_msg("%s: dlogits[%d] analytic %.6g numeric %.6g", fl_loss_name(k), i, d[i], num);
    }
}

static void test_loss_grads(void **state) {
    check_loss_grad(FL_LOSS_CE, 4, 5);
    check_loss_grad(FL_LOSS_BCE, 4, 5);
    check_loss_grad(FL_LOSS_MSE, 4, 5);
    check_loss_grad(FL_LOSS_BCE, 6, 1); /* single-logit binary classifier */
    check_loss_grad(FL_LOSS_MSE, 6, 1);
}

static void test_loss_values(void **state) {
    /* CE of equal logits is log C; the gradient is (1/C - onehot) / B */
    float x[6] = {0, 0, 0, 3, 1, -2}, d[6];
    int32_t y[2] = {1, 0};
    float l = fl_loss_ce(d, x, y, 2, 3);
    double row2 = log(exp(3.0) + exp(1.0) + exp(-2.0)) - 3.0;
    assert_float_equal(l, (log(3.0) + row2) / 2, 1e-6);
    assert_float_equal(d[0], (1.0f / 3) / 2, 1e-7);
    assert_float_equal(d[1], (1.0f / 3 - 1) / 2, 1e-7);
    /* stable for huge logits: no overflow, exact answer */
    float big[2] = {1000, 0};
    int32_t y1 = 1;
    assert_float_equal(fl_loss_ce(d, big, &y1, 1, 2), 1000.0f, 1e-3);
    assert_float_equal(d[1], -1.0f, 1e-6);
    y1 = 0;
    assert_float_equal(fl_loss_ce(NULL, big, &y1, 1, 2), 0.0f, 1e-6);
    /* BCE: x = 0 gives log 2 whatever the target; x = -100 against t = 1 costs 100 */
    float bx[2] = {0, -100}, bt[2] = {1, 1}, bd[2];
    assert_float_equal(fl_loss_bce(bd, bx, bt, 2), (log(2.0) + 100) / 2, 1e-4);
    assert_float_equal(bd[0], -0.25f, 1e-7);  /* (0.5 - 1) / 2 */
    assert_float_equal(bd[1], -0.5f, 1e-7);   /* (0 - 1) / 2 */
    /* MSE */
    float p[3] = {1, 2, 3}, t[3] = {1, 0, 4}, md[3];
    assert_float_equal(fl_loss_mse(md, p, t, 3), 5.0f / 3, 1e-6);
    assert_float_equal(md[1], 4.0f / 3, 1e-6);
    assert_float_equal(md[2], -2.0f / 3, 1e-6);
    /* label form == explicit one-hot targets */
    float oh[6] = {0, 1, 0, 1, 0, 0};
    assert_float_equal(fl_loss_labels(FL_LOSS_BCE, NULL, x, y, 2, 3), fl_loss_bce(NULL, x, oh, 6), 1e-6);
    assert_float_equal(fl_loss_labels(FL_LOSS_MSE, NULL, x, y, 2, 3), fl_loss_mse(NULL, x, oh, 6), 1e-6);
    fl_loss_kind k;
    fl_err e = {0};
    assert_int_equal(fl_loss_parse("bce", &k, &e), FL_OK);
    assert_int_equal(k, FL_LOSS_BCE);
    assert_int_equal(fl_loss_parse("hinge", &k, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "hinge"));
}

/* ---- optimisers --------------------------------------------------------------------------------- */
/* A model with no nodes and one parameter "p" of n floats: enough for an optimiser. */
static fl_model *param_model(int n, const float *v) {
    fl_err e = {0};
    fl_model *m = fl_model_new();
    int64_t shp[1] = {n};
    fl_tensor t = tu_tensor(1, shp, NULL, 0, 0);
    memcpy(t.data, v, sizeof(float) * (size_t)n);
    assert_true(fl_model_add_value(m, "p", FL_VAL_PARAM, &t, &e) >= 0);
    fl_tensor_free(&t);
    return m;
}

static void test_sgd_step(void **state) {
    fl_err e = {0};
    float p0[2] = {1, 2};
    fl_model *m = param_model(2, p0);
    fl_optim_opts o;
    fl_optim_opts_default(&o, FL_OPTIM_SGD);
    o.lr = 0.1f;
    o.momentum = 0.9f;
    o.weight_decay = 0.01f;
    fl_optim *opt;
    assert_int_equal(fl_optim_new(m, &o, &opt, &e), FL_OK);
    fl_value *v = &m->values[0];
    assert_non_null(v->g.data);
    /* step 1: g' = g + wd p = [0.51, -0.98]; buf = g'; p -= lr buf */
    v->g.data[0] = 0.5f;
    v->g.data[1] = -1.0f;
    fl_optim_step(opt);
    assert_float_equal(v->t.data[0], 0.949f, 1e-6);
    assert_float_equal(v->t.data[1], 2.098f, 1e-6);
    /* step 2, same g: g' = [0.50949, -0.97902]; buf = 0.9 [0.51,-0.98] + g' */
    fl_optim_step(opt);
    assert_float_equal(v->t.data[0], 0.852151f, 1e-6);
    assert_float_equal(v->t.data[1], 2.284102f, 1e-6);
    assert_int_equal(fl_optim_steps(opt), 2);
    fl_optim_free(opt);
    /* bad options are refused */
    o.lr = -1;
    assert_int_equal(fl_optim_new(m, &o, &opt, &e), FL_ERR_ARG);
    assert_null(opt);
    fl_model_free(m);
}

static void test_adam_step(void **state) {
    fl_err e = {0};
    float p0[1] = {1};
    fl_model *m = param_model(1, p0);
    fl_optim_opts o;
    fl_optim_opts_default(&o, FL_OPTIM_ADAM);
    o.lr = 0.1f;
    fl_optim *opt;
    assert_int_equal(fl_optim_new(m, &o, &opt, &e), FL_OK);
    fl_value *v = &m->values[0];
    /* the first bias-corrected step moves by lr * sign(g) */
    v->g.data[0] = 0.5f;
    fl_optim_step(opt);
    assert_float_equal(v->t.data[0], 0.9f, 1e-6);
    /* step 2 with g = -1: m = -0.055, v = 0.00124975, mhat = m/0.19, vhat = v/0.001999 */
    v->g.data[0] = -1.0f;
    fl_optim_step(opt);
    double mh = -0.055 / 0.19, vh = 0.00124975 / (1 - 0.998001);
    assert_float_equal(v->t.data[0], 0.9 - 0.1 * mh / (sqrt(vh) + 1e-8), 2e-6);
    fl_optim_free(opt);
    fl_model_free(m);
}

/* The step is split over the threads in blocks that straddle parameters: with two threads
 * every element must get exactly the update it gets with one (SGD with momentum, Adam). */
static void test_step_threads(void **state) {
    (void)state;
    int threads = fl_threads_get();
    const int sizes[3] = {10000, 7, 9001};
    for (int kind = 0; kind < 2; kind++) {
        float *got[2];
        for (int th = 1; th <= 2; th++) {
            fl_threads_set(th);
            fl_err e = {0};
            fl_model *m = fl_model_new();
            for (int k = 0; k < 3; k++) {
                int64_t shp[1] = {sizes[k]};
                fl_tensor t = tu_tensor(1, shp, NULL, 0, 0);
                for (int i = 0; i < sizes[k]; i++) t.data[i] = sinf((float)(i + 100 * k));
                char name[16];
                snprintf(name, sizeof name, "p%d", k);
                assert_true(fl_model_add_value(m, name, FL_VAL_PARAM, &t, &e) >= 0);
                fl_tensor_free(&t);
            }
            fl_optim_opts o;
            fl_optim_opts_default(&o, kind ? FL_OPTIM_ADAM : FL_OPTIM_SGD);
            o.momentum = kind ? o.momentum : 0.9f;
            o.weight_decay = 0.01f;
            fl_optim *opt;
            assert_int_equal(fl_optim_new(m, &o, &opt, &e), FL_OK);
            for (int step = 0; step < 3; step++) {
                for (int k = 0; k < 3; k++) {
                    fl_value *v = &m->values[k];
                    for (int i = 0; i < sizes[k]; i++) v->g.data[i] = cosf((float)(i * (step + 1) + k));
                }
                fl_optim_step(opt);
            }
            got[th - 1] = malloc(sizeof(float) * (10000 + 7 + 9001));
            for (int k = 0, at = 0; k < 3; at += sizes[k], k++)
                memcpy(got[th - 1] + at, m->values[k].t.data, sizeof(float) * (size_t)sizes[k]);
            assert_true(got[th - 1][0] != sinf(0.0f) || got[th - 1][1] != sinf(1.0f)); /* moved */
            fl_optim_free(opt);
            fl_model_free(m);
        }
        assert_memory_equal(got[0], got[1], sizeof(float) * (10000 + 7 + 9001));
        free(got[0]), free(got[1]);
    }
    fl_threads_set(threads);
}

/* Adam minimises an ill-conditioned quadratic sum_i a_i (p_i - c_i)^2. */
static void test_adam_quadratic(void **state) {
    fl_err e = {0};
    float p0[4] = {5, -3, 0, 10}, c[4] = {1, 2, -1, 0}, a[4] = {1, 10, 0.1f, 3};
    fl_model *m = param_model(4, p0);
    fl_optim_opts o;
    fl_optim_opts_default(&o, FL_OPTIM_ADAM);
    o.lr = 0.05f;
    fl_optim *opt;
    assert_int_equal(fl_optim_new(m, &o, &opt, &e), FL_OK);
    fl_value *v = &m->values[0];
    for (int it = 0; it < 3000; it++) {
        for (int i = 0; i < 4; i++) v->g.data[i] = 2 * a[i] * (v->t.data[i] - c[i]);
        fl_optim_step(opt);
    }
    for (int i = 0; i < 4; i++) assert_float_equal(v->t.data[i], c[i], 1e-2);
    fl_optim_free(opt);
    fl_model_free(m);
}

/* ---- zoo ------------------------------------------------------------------------------------------- */
static fl_model *zoo(const char *arch, int c, int h, int w, uint64_t seed) {
    fl_err e = {0};
    fl_model *m = NULL;
    if (fl_zoo_build(arch, c, h, w, 10, seed, &m, &e) != FL_OK) fail_msg("zoo %s: %s", arch, e.msg);
    return m;
}

static void check_forward_shape(fl_model *m, int n, int c, int h, int w, int k) {
    fl_err e = {0};
    fl_rng r;
    fl_rng_seed(&r, 3);
    int64_t xs[4] = {n, c, h, w};
    fl_tensor x = tu_tensor(4, xs, &r, 0, 1);
    if (fl_model_forward(m, &x, &e) != FL_OK) fail_msg("forward: %s", e.msg);
    const fl_tensor *y = fl_model_output(m, 0);
    assert_int_equal(y->ndim, 2);
    assert_int_equal(y->shape[0], n);
    assert_int_equal(y->shape[1], k);
    assert_int_equal(fl_tensor_find_nonfinite(y), -1);
    fl_tensor_free(&x);
}

static void test_zoo_models(void **state) {
    /* parameter counts of the PyTorch equivalents, by hand (28x28x1 inputs, 10 classes):
     * lenet1  (4*25+4) + (12*4*25+12) + (12*4*4*10+10)                          =   3246
     * lenet4  (6*25+6) + (16*6*25+16) + (256*84+84) + (84*10+10)                 =  25010
     * lenet5  156 + 2416 + (256*120+120) + (120*84+84) + 850                     =  44426
     * convnet (32*9+32) + 2*32 + (32*32*9+32) + 64 + (64*32*9+64) + 128
     *         + (64*64*9+64) + 128 + (64*7*7*256+256) + (256*10+10)              = 871018
     * mlp     (784*256+256) + (256*128+128) + (128*10+10)                        = 235146 */
    static const struct { const char *arch; int64_t params; } want[] = {
        {"lenet1", 3246}, {"lenet4", 25010}, {"lenet5", 44426}, {"convnet", 871018}, {"mlp", 235146}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        fl_model *m = zoo(want[i].arch, 1, 28, 28, 1);
        assert_int_equal(fl_model_param_count(m), want[i].params);
        assert_int_equal(m->opset, 13);
        assert_string_equal(fl_model_input_name(m, 0), "input");
        assert_string_equal(fl_model_output_name(m, 0), "logits");
        assert_non_null(fl_zoo_describe(want[i].arch));
        check_forward_shape(m, 3, 1, 28, 28, 10);
        fl_model_free(m);
    }
    /* convnet on CIFAR-sized images: the flatten size follows (64*8*8 into fc1) */
    fl_model *m = zoo("convnet", 3, 32, 32, 1);
    assert_int_equal(fl_model_param_count(m), 1117354);
    check_forward_shape(m, 2, 3, 32, 32, 10);
    fl_model_free(m);
    int n = 0;
    for (const char *const *p = fl_zoo_names(); *p; p++) n++;
    assert_int_equal(n, 5);
}

static void test_zoo_names_and_init(void **state) {
    fl_model *m = zoo("lenet5", 1, 28, 28, 42);
    /* PyTorch-exporter names */
    assert_true(fl_model_find(m, "conv1.weight") >= 0);
    assert_true(fl_model_find(m, "fc3.bias") >= 0);
    check_forward_shape(m, 1, 1, 28, 28, 10);
    assert_non_null(fl_model_tensor(m, "/conv1/Conv_output_0"));
    assert_non_null(fl_model_tensor(m, "/pool2/MaxPool_output_0"));
    const fl_tensor *fc1 = fl_model_tensor(m, "/fc1/Gemm_output_0");
    assert_non_null(fc1);
    assert_int_equal(fc1->shape[1], 120);
    /* U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and not degenerate */
    const fl_tensor *w = fl_model_tensor(m, "fc1.weight"); /* fan_in 256 */
    float lo = 1, hi = -1;
    for (int64_t i = 0; i < w->size; i++) {
        lo = fminf(lo, w->data[i]);
        hi = fmaxf(hi, w->data[i]);
    }
    assert_true(lo >= -1.0f / 16 && hi <= 1.0f / 16);
    assert_true(lo < -0.9f / 16 && hi > 0.9f / 16);
    const fl_tensor *b = fl_model_tensor(m, "conv1.bias"); /* fan_in 25 */
    for (int64_t i = 0; i < b->size; i++) assert_true(fabsf(b->data[i]) <= 0.2f);
    assert_int_equal(m->values[fl_model_find(m, "conv1.weight")].kind, FL_VAL_PARAM);
    /* same seed, same weights; another seed, other weights */
    fl_model *m2 = zoo("lenet5", 1, 28, 28, 42), *m3 = zoo("lenet5", 1, 28, 28, 43);
    const fl_tensor *w2 = fl_model_tensor(m2, "fc1.weight"), *w3 = fl_model_tensor(m3, "fc1.weight");
    assert_memory_equal(w->data, w2->data, sizeof(float) * (size_t)w->size);
    assert_memory_not_equal(w->data, w3->data, sizeof(float) * (size_t)w->size);
    fl_model_free(m);
    fl_model_free(m2);
    fl_model_free(m3);
    /* convnet: BN running stats are constants 0 / 1, scale 1 */
    m = zoo("convnet", 1, 28, 28, 1);
    int rv = fl_model_find(m, "bn2.running_var"), sc = fl_model_find(m, "bn2.weight");
    assert_true(rv >= 0 && sc >= 0);
    assert_int_equal(m->values[rv].kind, FL_VAL_CONST);
    assert_int_equal(m->values[sc].kind, FL_VAL_PARAM);
    assert_float_equal(m->values[rv].t.data[5], 1.0f, 0);
    assert_float_equal(m->values[sc].t.data[5], 1.0f, 0);
    fl_model_free(m);
}

static void test_zoo_errors(void **state) {
    fl_err e = {0};
    fl_model *m = (fl_model *)1;
    assert_int_equal(fl_zoo_build("resnet152", 1, 28, 28, 10, 1, &m, &e), FL_ERR_NOTFOUND);
    assert_null(m);
    assert_non_null(strstr(e.msg, "resnet152"));
    assert_non_null(strstr(e.msg, "lenet5"));
    assert_int_equal(fl_zoo_build("lenet5", 1, 8, 8, 10, 1, &m, &e), FL_ERR_SHAPE);
    assert_non_null(strstr(e.msg, "conv2"));
    assert_int_equal(fl_zoo_build("mlp", 1, 28, 28, 0, 1, &m, &e), FL_ERR_ARG);
    assert_int_equal(fl_zoo_build("lenet1", 1, 28, 28, 10, 1, &m, NULL), FL_OK);
    fl_model_free(m);
}

/* ---- training ------------------------------------------------------------------------------------ */
/* n images 1 x s x s in 4 classes: class k has a bright quadrant k, on uniform noise. */
static fl_dataset *quadrants(int64_t n, int s, uint64_t seed) {
    fl_err e = {0};
    fl_dataset *d;
    assert_int_equal(fl_dataset_new(n, 1, s, s, &d, &e), FL_OK);
    fl_rng r;
    fl_rng_seed(&r, seed);
    d->has_labels = 1;
    d->n_classes = 4;
    for (int64_t i = 0; i < n; i++) {
        int k = (int)fl_rng_below(&r, 4);
        d->y[i] = k;
        float *img = d->x + i * s * s;
        for (int y = 0; y < s; y++)
            for (int x = 0; x < s; x++) {
                int q = (y >= s / 2) * 2 + (x >= s / 2);
                img[y * s + x] = 0.5f * fl_rng_uniform(&r) + (q == k ? 0.5f : 0.0f);
            }
    }
    return d;
}

typedef struct rec {
    int n_epochs, n_progress;
    double loss[8], acc[8], test_acc[8];
    int64_t last_done;
} rec;

static void on_progress(const fl_train_progress *p, void *user) {
    rec *r = user;
    r->n_progress++;
    assert_true(p->done > r->last_done);
    assert_true(p->done <= p->total && p->acc >= 0 && p->acc <= 1 && p->loss >= 0);
    r->last_done = p->done;
}
static void on_epoch(const fl_epoch_stats *s, void *user) {
    rec *r = user;
    assert_int_equal(s->epoch, r->n_epochs + 1);
    r->loss[r->n_epochs] = s->train_loss;
    r->acc[r->n_epochs] = s->train_acc;
    r->test_acc[r->n_epochs] = s->test_acc;
    r->n_epochs++;
    r->last_done = 0;
}

static void test_train_separable(void **state) {
    fl_err e = {0};
    fl_dataset *tr = quadrants(600, 16, 1), *te = quadrants(200, 16, 2);
    fl_model *m = NULL;
    assert_int_equal(fl_zoo_build("lenet1", 1, 16, 16, 4, 5, &m, &e), FL_OK);
    fl_train_opts o;
    fl_train_opts_default(&o);
    o.epochs = 3;
    o.batch = 32;
    o.lr = 3e-3f;
    o.progress_every = 5;
    rec r = {0};
    o.progress = on_progress;
    o.on_epoch = on_epoch;
    o.user = &r;
    if (fl_train(m, tr, te, &o, &e) != FL_OK) fail_msg("train: %s", e.msg);
    assert_int_equal(r.n_epochs, 3);
    assert_true(r.n_progress >= 3 * 4); /* 19 batches: 3 callbacks + the last, per epoch */
    assert_true(r.loss[2] < r.loss[0]);
    assert_true(r.test_acc[2] > 0.9);   /* chance is 0.25 */
    assert_int_equal(m->training, 0);
    assert_int_equal(m->skip_input_grad, 0);
    assert_null(m->values[fl_model_find(m, "conv1.weight")].g.data);

    fl_eval_result ev;
    assert_int_equal(fl_eval(m, te, 64, &ev, &e), FL_OK);
    assert_int_equal(ev.n, 200);
    assert_int_equal(ev.n_classes, 4);
    assert_float_equal(ev.accuracy, r.test_acc[2], 1e-12);
    int64_t sum = 0, diag = 0, cls = 0;
    for (int t = 0; t < 4; t++) {
        cls += ev.class_n[t];
        for (int p = 0; p < 4; p++) sum += ev.confusion[t * 4 + p];
        diag += ev.confusion[t * 4 + t];
        assert_float_equal(ev.class_acc[t], (double)ev.confusion[t * 5] / ev.class_n[t], 1e-12);
    }
    assert_int_equal(sum, 200);
    assert_int_equal(cls, 200);
    assert_int_equal(diag, ev.correct);
    int64_t agree = 0;
    for (int64_t i = 0; i < te->n; i++) agree += ev.pred[i] == te->y[i];
    assert_int_equal(agree, ev.correct);
    fl_eval_result_free(&ev);

    /* SGD with momentum also learns it, with MSE on one-hot targets */
    fl_model_free(m);
    assert_int_equal(fl_zoo_build("mlp", 1, 16, 16, 4, 5, &m, &e), FL_OK);
    o.optim = FL_OPTIM_SGD;
    o.lr = 0.05f;
    o.loss = FL_LOSS_MSE;
    o.epochs = 2;
    memset(&r, 0, sizeof r);
    assert_int_equal(fl_train(m, tr, te, &o, &e), FL_OK);
    assert_true(r.test_acc[1] > 0.9);
    fl_model_free(m);
    fl_dataset_free(tr);
    fl_dataset_free(te);
}

/* Train a fresh model and return a copy of all its parameters, concatenated. */
static float *train_and_copy(const char *arch, const fl_dataset *d, uint64_t seed, int64_t *n) {
    fl_err e = {0};
    fl_model *m = NULL;
    assert_int_equal(fl_zoo_build(arch, 1, d->h, d->w, 4, 9, &m, &e), FL_OK);
    fl_train_opts o;
    fl_train_opts_default(&o);
    o.epochs = 1;
    o.batch = 16;
    o.seed = seed;
    if (fl_train(m, d, NULL, &o, &e) != FL_OK) fail_msg("train: %s", e.msg);
    *n = fl_model_param_count(m);
    float *w = malloc(sizeof(float) * (size_t)*n), *p = w;
    for (int i = 0; i < m->n_values; i++)
        if (m->values[i].kind == FL_VAL_PARAM) {
            memcpy(p, m->values[i].t.data, sizeof(float) * (size_t)m->values[i].t.size);
            p += m->values[i].t.size;
        }
    fl_model_free(m);
    return w;
}

static void test_train_deterministic(void **state) {
    fl_dataset *d = quadrants(100, 16, 3); /* 100 = 6 full batches + a partial one */
    int64_t n1, n2, n3;
    float *a = train_and_copy("lenet1", d, 11, &n1), *b = train_and_copy("lenet1", d, 11, &n2),
          *c = train_and_copy("lenet1", d, 12, &n3);
    assert_int_equal(n1, n2);
    assert_memory_equal(a, b, sizeof(float) * (size_t)n1);
    assert_memory_not_equal(a, c, sizeof(float) * (size_t)n1); /* other shuffle */
    free(a);
    free(b);
    free(c);
    fl_dataset_free(d);
}

/* convnet trains in training mode: BatchNorm on batch statistics (its running statistics
 * move), Dropout on (masks from the seed: two runs still agree bit for bit). */
static void test_train_convnet(void **state) {
    fl_err e = {0};
    fl_dataset *d = quadrants(96, 8, 6);
    float *first = NULL;
    for (int run = 0; run < 2; run++) {
        fl_model *m = NULL;
        assert_int_equal(fl_zoo_build("convnet", 1, 8, 8, 4, 2, &m, &e), FL_OK);
        fl_train_opts o;
        fl_train_opts_default(&o);
        o.epochs = 3;
        o.batch = 16;
        rec r = {0};
        o.on_epoch = on_epoch;
        o.user = &r;
        if (fl_train(m, d, NULL, &o, &e) != FL_OK) fail_msg("train: %s", e.msg);
        assert_true(r.loss[2] < r.loss[0]);
        assert_int_equal(m->training, 0);
        const fl_tensor *rm = fl_model_tensor(m, "bn1.running_mean");
        double moved = 0;
        for (int64_t i = 0; i < rm->size; i++) moved += fabs(rm->data[i]);
        assert_true(moved > 1e-3);
        const fl_tensor *w = fl_model_tensor(m, "fc1.weight");
        if (!first) {
            first = malloc(sizeof(float) * (size_t)w->size);
            memcpy(first, w->data, sizeof(float) * (size_t)w->size);
        } else {
            assert_memory_equal(first, w->data, sizeof(float) * (size_t)w->size);
        }
        fl_model_free(m);
    }
    free(first);
    fl_dataset_free(d);
}

static void test_train_errors(void **state) {
    fl_err e = {0};
    fl_dataset *d = quadrants(20, 16, 4);
    fl_model *m = NULL;
    assert_int_equal(fl_zoo_build("mlp", 1, 16, 16, 3, 1, &m, &e), FL_OK); /* 3 < 4 classes */
    fl_train_opts o;
    fl_train_opts_default(&o);
    o.epochs = 1;
    assert_int_equal(fl_train(m, d, NULL, &o, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "label 3"));
    o.batch = 0;
    assert_int_equal(fl_train(m, d, NULL, &o, &e), FL_ERR_ARG);
    fl_model_free(m);
    /* a divergent learning rate is reported, not trained into NaNs */
    assert_int_equal(fl_zoo_build("mlp", 1, 16, 16, 4, 1, &m, &e), FL_OK);
    fl_train_opts_default(&o);
    o.optim = FL_OPTIM_SGD;
    o.lr = 1e30f;
    o.epochs = 2;
    assert_int_equal(fl_train(m, d, NULL, &o, &e), FL_ERR_NAN);
    assert_int_equal(m->training, 0);
    fl_model_free(m);
    /* wrong image size for the model */
    assert_int_equal(fl_zoo_build("mlp", 1, 28, 28, 4, 1, &m, &e), FL_OK);
    fl_train_opts_default(&o);
    assert_int_equal(fl_train(m, d, NULL, &o, &e), FL_ERR_SHAPE);
    fl_eval_result r;
    assert_int_equal(fl_eval(m, d, 0, &r, &e), FL_ERR_SHAPE);
    assert_null(r.pred);
    fl_model_free(m);
    d->has_labels = 0;
    assert_int_equal(fl_zoo_build("mlp", 1, 16, 16, 4, 1, &m, &e), FL_OK);
    assert_int_equal(fl_eval(m, d, 0, &r, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "labels"));
    fl_model_free(m);
    fl_dataset_free(d);
}

/* ---- whole-model gradient ------------------------------------------------------------------------ */
/* Mean CE of m on (x, y), in double from the float logits. */
static double model_loss(fl_model *m, const fl_tensor *x, const int32_t *y) {
    fl_err e = {0};
    if (fl_model_forward(m, x, &e) != FL_OK) fail_msg("forward: %s", e.msg);
    const fl_tensor *z = fl_model_output(m, 0);
    int B = (int)z->shape[0], C = (int)z->shape[1];
    double s = 0;
    for (int b = 0; b < B; b++) {
        const float *r = z->data + b * C;
        double mx = r[0], sum = 0;
        for (int j = 1; j < C; j++) mx = fmax(mx, r[j]);
        for (int j = 0; j < C; j++) sum += exp(r[j] - mx);
        s += log(sum) + mx - r[y[b]];
    }
    return s / B;
}

/* LeNet-1 is piecewise smooth: it changes slope where a ReLU input crosses 0 or a max-pool
 * window changes its winner. A finite difference across such a kink measures a mix of two
 * slopes (with a small first conv layer this is common: a weight moves hundreds of
 * pre-activations at once), so the check skips perturbations that change the pattern. The
 * pattern: the sign of every ReLU output and the winner of every 2x2 pool window, hashed. */
static uint64_t kink_pattern(const fl_model *m) {
    static const char *const relus[] = {"/relu1/Relu_output_0", "/relu2/Relu_output_0"};
    uint64_t h = FL_FNV_BASIS;
    for (int k = 0; k < 2; k++) {
        const fl_tensor *t = fl_model_tensor(m, relus[k]);
        assert_non_null(t);
        int64_t planes = t->shape[0] * t->shape[1], H = t->shape[2], W = t->shape[3];
        for (int64_t i = 0; i < t->size; i++) {
            uint8_t pos = t->data[i] > 0;
            h = fl_fnv1a(h, &pos, 1);
        }
        for (int64_t p = 0; p < planes; p++)
            for (int64_t y = 0; y + 1 < H; y += 2)
                for (int64_t x = 0; x + 1 < W; x += 2) {
                    const float *a = t->data + p * H * W + y * W + x;
                    float v[4] = {a[0], a[1], a[W], a[W + 1]};
                    uint8_t best = 0;
                    for (uint8_t j = 1; j < 4; j++)
                        if (v[j] > v[best]) best = j;
                    h = fl_fnv1a(h, &best, 1);
                }
    }
    return h;
}

/* d loss / d input and d loss / d params of LeNet-1 (conv, relu, maxpool, flatten, gemm) by
 * central differences on a few elements of each, against one backward pass seeded with the
 * CE gradient, as the training loop does it. (The analytic gradient was also compared with
 * PyTorch's autograd in float64 on this model: equal to 2e-8.) */
static void test_lenet1_gradcheck(void **state) {
    fl_err e = {0};
    fl_model *m = zoo("lenet1", 1, 16, 16, 21);
    fl_rng r;
    fl_rng_seed(&r, 5);
    int64_t xs[4] = {2, 1, 16, 16};
    fl_tensor x = tu_tensor(4, xs, &r, 0, 1);
    int32_t y[2] = {3, 7};
    assert_int_equal(fl_model_want_param_grads(m, 1, &e), FL_OK);
    double l0 = model_loss(m, &x, y);
    int64_t ds[2] = {2, 10};
    fl_tensor d = tu_tensor(2, ds, NULL, 0, 0);
    float lf = fl_loss_ce(d.data, fl_model_output(m, 0)->data, y, 2, 10);
    assert_float_equal(lf, l0, 1e-5);
    int out = m->outputs[0];
    assert_int_equal(fl_model_backward_idx(m, 1, &out, &d, &e), FL_OK);
    uint64_t base = kink_pattern(m);

    /* (conv1.bias is left out: it moves all of a channel's pre-activations at once, so almost
     * every step of a size float allows crosses a kink) */
    static const char *const names[] = {"input", "conv1.weight", "conv2.weight", "conv2.bias",
                                        "fc1.weight", "fc1.bias"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        int v = fl_model_find(m, names[k]);
        assert_true(v >= 0);
        fl_tensor ana = {0};
        assert_non_null(m->values[v].g.data);
        assert_int_equal(fl_tensor_copy(&ana, &m->values[v].g), FL_OK);
        fl_tensor *target = k == 0 ? &x : &m->values[v].t;
        /* a conv1 weight moves hundreds of pre-activations: a small step to meet fewer kinks */
        const float eps = k == 1 ? 1e-4f : 1e-3f;
        int nonzero = 0, checked = 0;
        for (int c = 0; c < 64 && checked < 8; c++) {
            int64_t j = (int64_t)fl_rng_below(&r, (uint32_t)target->size);
            float old = target->data[j];
            target->data[j] = old + eps;
            double lp = model_loss(m, &x, y);
            uint64_t pp = kink_pattern(m);
            target->data[j] = old - eps;
            double lm = model_loss(m, &x, y);
            uint64_t pm = kink_pattern(m);
            target->data[j] = old;
            if (pp != base || pm != base) continue; /* straddles a kink */
            checked++;
            double num = (lp - lm) / (2 * eps), a = ana.data[j];
            nonzero += fabs(a) > 1e-6;
            if (fabs(num - a) > 3e-4 + 3e-2 * fabs(num))
                fail_msg("d loss / d %s[%lld]: analytic %.6g, numeric %.6g", names[k], (long long)j,
                         a, num);
        }
        assert_true(checked >= 6 && nonzero > 0); /* the check is not vacuous */
        fl_tensor_free(&ana);
    }
    fl_tensor_free(&d);
    fl_tensor_free(&x);
    fl_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loss_grads),          cmocka_unit_test(test_loss_values),
        cmocka_unit_test(test_sgd_step),            cmocka_unit_test(test_adam_step), cmocka_unit_test(test_step_threads),
        cmocka_unit_test(test_adam_quadratic),      cmocka_unit_test(test_zoo_models),
        cmocka_unit_test(test_zoo_names_and_init),  cmocka_unit_test(test_zoo_errors),
        cmocka_unit_test(test_train_separable),     cmocka_unit_test(test_train_deterministic),
        cmocka_unit_test(test_train_convnet),       cmocka_unit_test(test_train_errors),
        cmocka_unit_test(test_lenet1_gradcheck),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
