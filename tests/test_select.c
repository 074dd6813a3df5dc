/* Seed selection: the scores (gini, FOL), the index selections (ordering, balance, ties, NaN,
 * determinism from the seed), the strategies end to end on a small model, the files written,
 * and the `flare nn lrp` / `flare nn select` commands (when FLARE_BIN is set). */
#include "testutil.h"

#include <sys/stat.h>
#include <unistd.h>

#include "flare/onnx.h"
#include "flare/sa.h"
#include "flare/select.h"
#include "flare/train.h"

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void assert_distinct(const int64_t *idx, int64_t n, int64_t below) {
    int64_t *c = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    memcpy(c, idx, sizeof(int64_t) * (size_t)n);
    qsort(c, (size_t)n, sizeof *c, cmp_i64);
    for (int64_t i = 0; i < n; i++) {
        assert_true(c[i] >= 0 && c[i] < below);
        if (i) assert_true(c[i] != c[i - 1]);
    }
    free(c);
}

/* ---- scores -------------------------------------------------------------------------------------- */
static void test_gini(void **state) {
    (void)state;
    float z[3][4] = {{1, 1, 1, 1}, {30, 0, 0, 0}, {2, 1, 0, 0}};
    double g[3];
    fl_gini(&z[0][0], 3, 4, g);
    assert_float_equal(g[0], 0.75, 1e-12);
    assert_true(g[1] >= 0 && g[1] < 1e-12);
    double p[4] = {exp(2.0), exp(1.0), 1, 1}, s = p[0] + p[1] + p[2] + p[3], want = 1;
    for (int k = 0; k < 4; k++) want -= (p[k] / s) * (p[k] / s);
    assert_float_equal(g[2], want, 1e-9);
}

/* input [N,4,1,1] -> Flatten -> MatMul W[4,3] -> logits: dCE/dx = W (softmax - onehot) */
static fl_model *linear_model(const float *w) {
    fl_err e = {0};
    fl_model *m = fl_model_new();
    int x = fl_model_add_value(m, "x", FL_VAL_INPUT, &(fl_tensor){.ndim = 4, .shape = {0, 4, 1, 1}}, &e);
    int f = fl_model_add_op(m, "Flatten", "flat", 1, &x, 0, NULL, &e);
    fl_tensor wt = {0};
    assert_int_equal(fl_tensor_alloc(&wt, 2, (int64_t[]){4, 3}), FL_OK);
    memcpy(wt.data, w, sizeof(float) * 12);
    int wv = fl_model_add_value(m, "w", FL_VAL_PARAM, &wt, &e);
    int y = fl_model_add_op(m, "MatMul", "logits", 2, (int[]){f, wv}, 0, NULL, &e);
    assert_true(y >= 0);
    assert_int_equal(fl_model_set_io(m, 1, &x, 1, &y, &e), FL_OK);
    assert_int_equal(fl_model_finish(m, &e), FL_OK);
    fl_tensor_free(&wt);
    return m;
}

static void test_fol(void **state) {
    (void)state;
    fl_err e = {0};
    fl_rng r;
    fl_rng_seed(&r, 2);
    float w[12];
    for (int i = 0; i < 12; i++) w[i] = fl_rng_uniform(&r) * 2 - 1;
    fl_model *m = linear_model(w);
    fl_tensor x = tu_tensor(4, (int64_t[]){5, 4, 1, 1}, &r, -1, 1);
    int32_t y[5] = {0, 1, 2, 1, 0};
    double linf[5], l2[5];
    assert_int_equal(fl_fol(m, &x, y, FL_FOL_LINF, 0.1, linf, &e), FL_OK);
    assert_int_equal(fl_fol(m, &x, y, FL_FOL_L2, 0.1, l2, &e), FL_OK);
    for (int i = 0; i < 5; i++) {
        double z[3] = {0}, p[3], s = 0, g[4] = {0}, n1 = 0, n2 = 0;
        for (int k = 0; k < 3; k++)
            for (int j = 0; j < 4; j++) z[k] += (double)x.data[i * 4 + j] * w[j * 3 + k];
        for (int k = 0; k < 3; k++) s += exp(z[k]);
        for (int k = 0; k < 3; k++) p[k] = exp(z[k]) / s - (k == y[i]);
        for (int j = 0; j < 4; j++)
            for (int k = 0; k < 3; k++) g[j] += w[j * 3 + k] * p[k];
        for (int j = 0; j < 4; j++) n1 += fabs(g[j]), n2 += g[j] * g[j];
        assert_float_equal(linf[i], 0.1 * n1, 1e-6);
        assert_float_equal(l2[i], sqrt(n2), 1e-6);
        /* alone, the same as in the batch */
        fl_tensor one = {.ndim = 4, .shape = {1, 4, 1, 1}, .size = 4, .data = x.data + i * 4};
        double single;
        assert_int_equal(fl_fol(m, &one, &y[i], FL_FOL_LINF, 0.1, &single, &e), FL_OK);
        assert_float_equal(single, linf[i], 1e-7);
    }
    y[2] = 3;
    assert_int_equal(fl_fol(m, &x, y, FL_FOL_LINF, 0.1, linf, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "label 3"));
    assert_int_equal(m->training, 0);
    fl_tensor_free(&x);
    fl_model_free(m);
}

/* ---- index selections -------------------------------------------------------------------------- */
static void test_top_and_best(void **state) {
    (void)state;
    double s[8] = {0.5, NAN, 0.9, 0.1, 0.9, 0.3, 0.7, 0.2};
    int64_t idx[8];
    assert_int_equal(fl_select_top(s, 8, 3, 1, idx), 3);
    assert_int_equal(idx[0], 2); /* tie 0.9: the lower index first */
    assert_int_equal(idx[1], 4);
    assert_int_equal(idx[2], 6);
    assert_int_equal(fl_select_top(s, 8, 20, 0, idx), 7); /* NaN never chosen; clamped */
    static const int64_t asc[7] = {3, 7, 5, 0, 6, 2, 4};
    assert_memory_equal(idx, asc, sizeof asc);
    /* BE-ST, odd k: 2 lowest (lowest first), then 3 highest (highest first) */
    assert_int_equal(fl_select_best(s, 8, 5, idx), 5);
    static const int64_t best[5] = {3, 7, 4, 2, 6};
    assert_memory_equal(idx, best, sizeof best);
    assert_int_equal(fl_select_best(s, 8, 100, idx), 7);
    assert_distinct(idx, 7, 8);
}

static void test_kmst(void **state) {
    (void)state;
    enum { N = 100 };
    double s[N];
    for (int i = 0; i < N; i++) s[i] = i; /* max 99: sections of width 24.75 */
    int64_t idx[N], again[N];
    fl_rng r;
    fl_rng_seed(&r, 7);
    assert_int_equal(fl_select_kmst(s, N, 10, 4, &r, idx), 10);
    assert_distinct(idx, 10, N);
    /* 10 over 4 sections: 3, 3, 2, 2 in section order */
    static const int quota[4] = {3, 3, 2, 2};
    int at = 0;
    for (int t = 0; t < 4; t++)
        for (int q = 0; q < quota[t]; q++, at++) {
            int sec = (int)(s[idx[at]] / 24.75);
            assert_int_equal(sec > 3 ? 3 : sec, t);
        }
    fl_rng_seed(&r, 7);
    assert_int_equal(fl_select_kmst(s, N, 10, 4, &r, again), 10);
    assert_memory_equal(idx, again, sizeof(int64_t) * 10);
    fl_rng_seed(&r, 8);
    assert_int_equal(fl_select_kmst(s, N, 10, 4, &r, again), 10);
    assert_true(memcmp(idx, again, sizeof(int64_t) * 10) != 0);

    /* skewed: everything near 0 but one maximum; the top section holds exactly the maximum
     * (RobOT's strict bound would lose it); short sections are filled from the rest */
    for (int i = 0; i < N; i++) s[i] = i == 42 ? 10.0 : 0.01 * (i % 7);
    s[5] = NAN;
    fl_rng_seed(&r, 1);
    assert_int_equal(fl_select_kmst(s, N, 8, 4, &r, idx), 8);
    assert_distinct(idx, 8, N);
    int has_max = 0;
    for (int i = 0; i < 8; i++) {
        has_max |= idx[i] == 42;
        assert_true(idx[i] != 5);
    }
    assert_true(has_max);
    assert_int_equal(fl_select_kmst(s, N, 500, 4, &r, idx), N - 1);
    assert_distinct(idx, N - 1, N);
}

static void test_per_class(void **state) {
    (void)state;
    /* 3 classes; class 2 has a single eligible input; -1 is not eligible */
    double s[12] = {5, 4, 3, 2, 1, 0, 9, 8, 7, 6, 100, 50};
    int32_t c[12] = {0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, -1};
    int64_t idx[12];
    assert_int_equal(fl_select_per_class(s, c, 12, 3, 7, idx), 7);
    /* quotas 3, 2, 2: class 0 best three, class 1 best two, class 2 its only one, then the
     * best remaining of any class (class 1's 7) */
    static const int64_t want[7] = {0, 1, 2, 6, 7, 10, 8};
    assert_memory_equal(idx, want, sizeof want);
    assert_int_equal(fl_select_per_class(s, c, 12, 3, 6, idx), 6);
    int count[3] = {0};
    for (int i = 0; i < 6; i++) count[c[idx[i]]]++;
    assert_int_equal(count[0], 2);
    assert_int_equal(count[1], 3); /* class 2's missing place goes to class 1's 7 (beats 3) */
    assert_int_equal(count[2], 1);
    assert_int_equal(fl_select_per_class(s, c, 12, 3, 100, idx), 11);
    assert_distinct(idx, 11, 12);
    for (int i = 0; i < 11; i++) assert_true(idx[i] != 11);
}

/* ---- end to end on a small trained MLP ---------------------------------------------------------- */
/* 1x8x8 images of 3 classes: class c has a bright band of rows [3c, 3c+2), plus noise; every
 * flip-th label is wrong (flip 0: none), so that some inputs are misclassified. */
static fl_dataset *bands(int n, uint64_t seed, int flip) {
    fl_err e = {0};
    fl_dataset *d = NULL;
    assert_int_equal(fl_dataset_new(n, 1, 8, 8, &d, &e), FL_OK);
    fl_rng r;
    fl_rng_seed(&r, seed);
    for (int i = 0; i < n; i++) {
        int c = (int)fl_rng_below(&r, 3);
        for (int p = 0; p < 64; p++)
            d->x[i * 64 + p] = (p / 8 >= 3 * c && p / 8 < 3 * c + 2 ? 0.6f : 0.2f) +
                               0.6f * fl_rng_uniform(&r);
        d->y[i] = flip && i % flip == flip - 1 ? (c + 1) % 3 : c;
    }
    d->has_labels = 1;
    d->n_classes = 3;
    return d;
}

static fl_model *trained_mlp(const fl_dataset *train) {
    fl_err e = {0};
    fl_model *m = NULL;
    assert_int_equal(fl_zoo_build("mlp", 1, 8, 8, 3, 3, &m, &e), FL_OK);
    fl_train_opts o;
    fl_train_opts_default(&o);
    o.epochs = 2;
    o.batch = 32;
    if (fl_train(m, train, NULL, &o, &e) != FL_OK) fail_msg("%s", e.msg);
    return m;
}

static fl_selection *run(fl_model *m, const fl_dataset *d, const fl_select_opts *o) {
    fl_err e = {0};
    fl_selection *s = NULL;
    if (fl_select(m, d, o, &s, &e) != FL_OK) fail_msg("%s: %s", fl_select_strategy_name(o->strategy), e.msg);
    return s;
}

static void test_strategies(void **state) {
    (void)state;
    fl_err e = {0};
    fl_dataset *test = bands(90, 1, 6), *train = bands(600, 2, 0);
    fl_model *m = trained_mlp(train);
    fl_select_opts o;
    fl_select_opts_default(&o);
    o.n = 12;
    o.batch = 32; /* several batches, the last one short */

    /* random: distinct, reproducible from the seed, another seed another draw */
    o.seed = 5;
    fl_selection *a = run(m, test, &o), *b = run(m, test, &o);
    assert_int_equal(a->n, 12);
    assert_int_equal(a->eligible, 90);
    assert_distinct(a->index, 12, 90);
    assert_memory_equal(a->index, b->index, sizeof(int64_t) * 12);
    assert_true(isnan(a->score[0]));
    fl_selection_free(b);
    o.seed = 6;
    b = run(m, test, &o);
    assert_true(memcmp(a->index, b->index, sizeof(int64_t) * 12) != 0);
    fl_selection_free(a);
    fl_selection_free(b);

    /* the scores of all 90 inputs, independently */
    fl_tensor x = fl_dataset_view(test, 0, 90);
    double gini[90], fol[90];
    int32_t pred[90];
    int64_t correct = 0, per_class[3] = {0};
    assert_int_equal(fl_model_forward(m, &x, &e), FL_OK);
    const float *z = fl_model_output(m, 0)->data;
    fl_gini(z, 90, 3, gini);
    for (int i = 0; i < 90; i++) {
        pred[i] = 0;
        for (int k = 1; k < 3; k++)
            if (z[i * 3 + k] > z[i * 3 + pred[i]]) pred[i] = k;
        if (pred[i] == test->y[i]) correct++, per_class[pred[i]]++;
    }
    assert_true(correct > 40 && correct < 90); /* some right, some wrong: trained, not perfect */
    assert_int_equal(fl_fol(m, &x, test->y, FL_FOL_LINF, 0.3, fol, &e), FL_OK);

    o.strategy = FL_SEL_GINI;
    a = run(m, test, &o);
    int64_t want[12];
    assert_int_equal(fl_select_top(gini, 90, 12, 1, want), 12);
    assert_memory_equal(a->index, want, sizeof want);
    for (int i = 1; i < 12; i++) assert_true(a->score[i - 1] >= a->score[i]);
    for (int i = 0; i < 12; i++) assert_float_equal(a->score[i], gini[a->index[i]], 1e-6);
    fl_selection_free(a);

    o.strategy = FL_SEL_BEST;
    a = run(m, test, &o);
    for (int i = 0; i < 12; i++) assert_float_equal(a->score[i], fol[a->index[i]], 1e-4 * fol[a->index[i]]);
    int below = 0, above = 0;
    for (int i = 0; i < 90; i++) { /* the 6 lowest (ascending), then the 6 highest (descending) */
        below += fol[i] < a->score[5];
        above += fol[i] > a->score[11];
    }
    assert_true(a->score[6] >= a->score[11]);
    assert_int_equal(below, 5);
    assert_int_equal(above, 5);
    fl_selection_free(a);

    o.strategy = FL_SEL_KMST;
    a = run(m, test, &o);
    b = run(m, test, &o);
    assert_int_equal(a->n, 12);
    assert_distinct(a->index, 12, 90);
    assert_memory_equal(a->index, b->index, sizeof(int64_t) * 12);
    fl_selection_free(a);
    fl_selection_free(b);

    /* ST-*: important neurons from the training set */
    fl_important_opts io;
    fl_important_opts_default(&io);
    io.ratio = 0.05; /* a few neurons per layer, so that LSA's KDE has more traces than dims */
    fl_important *imp = NULL;
    if (fl_important_compute(m, train, &io, &imp, &e) != FL_OK) fail_msg("%s", e.msg);
    o.important = imp;
    o.train = train;
    for (int st = FL_SEL_ST_DALL; st <= FL_SEL_ST_LPER; st++) {
        o.strategy = (fl_select_strategy)st;
        o.layers = st == FL_SEL_ST_DPER ? "/fc1/Gemm_output_0,/fc2/Gemm_output_0" : NULL;
        o.n = 9;
        a = run(m, test, &o);
        assert_int_equal(a->eligible, correct);
        assert_int_equal(a->n, 9);
        assert_distinct(a->index, 9, 90);
        int count[3] = {0};
        for (int i = 0; i < 9; i++) {
            assert_int_equal(a->pred[i], test->y[a->index[i]]); /* correctly classified only */
            assert_false(isnan(a->score[i]));
            count[a->pred[i]]++;
        }
        if (st == FL_SEL_ST_DALL || st == FL_SEL_ST_LALL) {
            for (int i = 1; i < 9; i++) assert_true(a->score[i - 1] >= a->score[i]);
        } else { /* 3 per class (each class has that many correct inputs) */
            for (int k = 0; k < 3; k++) assert_true(per_class[k] >= 3);
            for (int k = 0; k < 3; k++) assert_int_equal(count[k], 3);
        }
        fl_selection_free(a);
    }
    /* the same with DSA directly: st-dall's scores are DSAv */
    o.strategy = FL_SEL_ST_DALL;
    o.layers = "/fc1/Gemm_output_0";
    a = run(m, test, &o);
    fl_layerset *ls = NULL;
    int64_t *sub, nsub, dim;
    float *tr, *te;
    int32_t *trp, *tep;
    assert_int_equal(fl_layerset_make(m, o.layers, &ls, &e), FL_OK);
    assert_int_equal(fl_important_subset(imp, ls, &sub, &nsub, &e), FL_OK);
    assert_int_equal(nsub, 13); /* round(0.05 * 256) */
    assert_int_equal(fl_sa_traces(m, o.layers, train, 0, &tr, &trp, &dim, &e), FL_OK);
    assert_int_equal(fl_sa_traces(m, o.layers, test, 0, &te, &tep, &dim, &e), FL_OK);
    fl_sa_opts so;
    fl_sa_opts_init(&so, FL_SA_DSA);
    so.neurons = sub;
    so.n_neurons = nsub;
    fl_sa *sa;
    double dsa[90];
    assert_int_equal(fl_sa_new(tr, trp, 600, dim, &so, &sa, &e), FL_OK);
    assert_int_equal(fl_sa_score(sa, te, tep, 90, dsa, &e), FL_OK);
    for (int i = 0; i < 90; i++) {
        assert_int_equal(tep[i], pred[i]);
        if (tep[i] != test->y[i]) dsa[i] = NAN;
    }
    assert_int_equal(fl_select_top(dsa, 90, 9, 1, want), 9);
    assert_memory_equal(a->index, want, sizeof(int64_t) * 9);
    fl_sa_free(sa);
    free(sub), free(tr), free(te), free(trp), free(tep);
    fl_layerset_free(ls);
    fl_selection_free(a);

    /* errors */
    o.important = NULL;
    assert_int_equal(fl_select(m, test, &o, &a, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "important"));
    o.important = imp;
    o.layers = "nope";
    assert_int_equal(fl_select(m, test, &o, &a, &e), FL_ERR_NOTFOUND);
    o.layers = NULL;
    o.strategy = FL_SEL_BEST;
    test->has_labels = 0;
    assert_int_equal(fl_select(m, test, &o, &a, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "labelled"));
    o.strategy = FL_SEL_RANDOM; /* random and gini need no labels */
    a = run(m, test, &o);
    fl_selection_free(a);
    test->has_labels = 1;
    o.n = 0;
    assert_int_equal(fl_select(m, test, &o, &a, &e), FL_ERR_ARG);
    fl_select_strategy s;
    assert_int_equal(fl_select_strategy_parse("st-lper", &s, &e), FL_OK);
    assert_int_equal(s, FL_SEL_ST_LPER);
    assert_int_equal(fl_select_strategy_parse("deepgini", &s, &e), FL_ERR_ARG);
    fl_important_free(imp);
    fl_dataset_free(test);
    fl_dataset_free(train);
    fl_model_free(m);
}

static void test_save(void **state) {
    (void)state;
    fl_err e = {0};
    fl_dataset *test = bands(30, 3, 0);
    fl_model *m = NULL;
    assert_int_equal(fl_zoo_build("mlp", 1, 8, 8, 3, 3, &m, &e), FL_OK); /* untrained will do */
    fl_select_opts o;
    fl_select_opts_default(&o);
    o.strategy = FL_SEL_GINI;
    o.n = 7;
    fl_selection *s = run(m, test, &o);
    char dir[64], path[96];
    snprintf(dir, sizeof dir, "/tmp/flare_test_sel_%d", (int)getpid());
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/seeds.npy", dir);
    assert_int_equal(fl_selection_save(s, test, path, &e), FL_OK);
    fl_npy img, idx;
    assert_int_equal(fl_npy_read(path, &img, &e), FL_OK);
    assert_int_equal(img.dtype, FL_DT_F32);
    assert_int_equal(img.ndim, 4);
    assert_int_equal(img.shape[0], 7);
    assert_int_equal(img.shape[2], 8);
    snprintf(path, sizeof path, "%s/seeds.idx.npy", dir);
    assert_int_equal(fl_npy_read(path, &idx, &e), FL_OK);
    assert_int_equal(idx.dtype, FL_DT_I64);
    assert_memory_equal(idx.data, s->index, sizeof(int64_t) * 7);
    for (int i = 0; i < 7; i++)
        assert_memory_equal((float *)img.data + i * 64, test->x + s->index[i] * 64, 64 * 4);
    snprintf(path, sizeof path, "%s/seeds.png", dir);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    unsigned char sig[8];
    assert_int_equal(fread(sig, 1, 8, f), 8);
    fclose(f);
    assert_memory_equal(sig, "\x89PNG\r\n\x1a\n", 8);
    unlink(path);
    snprintf(path, sizeof path, "%s/seeds.idx.npy", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/seeds.npy", dir);
    unlink(path);
    rmdir(dir);
    fl_npy_free(&img);
    fl_npy_free(&idx);
    fl_selection_free(s);
    fl_dataset_free(test);
    fl_model_free(m);
}

/* ---- the commands --------------------------------------------------------------------------------- */
static void test_cli(void **state) {
    (void)state;
    const char *bin = getenv("FLARE_BIN");
    TU_NEED(bin && access(bin, X_OK) == 0, "the flare binary (FLARE_BIN; tests/run.sh sets it)");
    fl_err e = {0};
    fl_dataset *tr = bands(300, 4, 0), *te = bands(40, 5, 5);
    fl_model *m = trained_mlp(tr);
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/flare_test_selcli_%d", (int)getpid());
    mkdir(dir, 0755);
    char p[7][160];
    snprintf(p[6], sizeof p[6], "%s/mlp.onnx", dir);
    assert_int_equal(fl_onnx_save(m, p[6], &e), FL_OK);
    const fl_dataset *ds[2] = {tr, te};
    for (int k = 0; k < 2; k++) {
        snprintf(p[2 * k], sizeof p[0], "%s/%s_x.npy", dir, k ? "te" : "tr");
        snprintf(p[2 * k + 1], sizeof p[0], "%s/%s_y.npy", dir, k ? "te" : "tr");
        assert_int_equal(fl_npy_write(p[2 * k], FL_DT_F32, 4, (int64_t[]){ds[k]->n, 1, 8, 8},
                                      ds[k]->x, &e), FL_OK);
        assert_int_equal(fl_npy_write(p[2 * k + 1], FL_DT_I32, 1, (int64_t[]){ds[k]->n}, ds[k]->y, &e),
                         FL_OK);
    }
    snprintf(p[4], sizeof p[4], "%s/imp.json", dir);
    snprintf(p[5], sizeof p[5], "%s/seeds.npy", dir);
    assert_int_equal(tu_sh(NULL, "%s nn lrp -m %s -d npy:%s,%s --ratio 0.05 --rule zplus -o %s -q",
                        bin, p[6], p[0], p[1], p[4]), 0);
    fl_important *imp = NULL;
    assert_int_equal(fl_important_load(p[4], &imp, &e), FL_OK);
    assert_int_equal(imp->rule, FL_LRP_ZPLUS);
    assert_int_equal(imp->n_seen, 300);
    assert_true(imp->n_inputs > 150 && imp->n_inputs <= 300);
    fl_important_free(imp);
    assert_int_equal(tu_sh(NULL, "%s nn select -m %s -d npy:%s,%s --train npy:%s,%s --strategy "
                        "st-dper --important %s -N 6 -o %s",
                        bin, p[6], p[2], p[3], p[0], p[1], p[4], p[5]), 0);
    fl_npy idx;
    char ip[200];
    snprintf(ip, sizeof ip, "%s/seeds.idx.npy", dir);
    assert_int_equal(fl_npy_read(ip, &idx, &e), FL_OK);
    assert_int_equal(idx.shape[0], 6);
    fl_tensor xt = fl_dataset_view(te, 0, te->n);
    assert_int_equal(fl_model_forward(m, &xt, &e), FL_OK);
    const float *z = fl_model_output(m, 0)->data;
    int count[3] = {0};
    for (int i = 0; i < 6; i++) { /* correctly classified only, two per class */
        int64_t j = ((int64_t *)idx.data)[i];
        int p0 = 0;
        for (int k = 1; k < 3; k++)
            if (z[j * 3 + k] > z[j * 3 + p0]) p0 = k;
        assert_int_equal(p0, te->y[j]);
        count[p0]++;
    }
    assert_int_equal(count[0], 2);
    assert_int_equal(count[1], 2);
    fl_npy_free(&idx);
    assert_int_equal(tu_sh(NULL, "%s nn select -m %s -d npy:%s,%s --strategy kmst -N 5 --seed 2 "
                        "-o %s", bin, p[6], p[2], p[3], p[5]), 0);
    /* usage errors: st-* without --important; runtime: a missing model */
    assert_int_equal(tu_sh(NULL, "%s nn select -m %s -d npy:%s,%s --strategy st-dall -o %s",
                        bin, p[6], p[2], p[3], p[5]), 2);
    assert_int_equal(tu_sh(NULL, "%s nn lrp -m %s/none.onnx -d npy:%s,%s -o %s", bin, dir,
                        p[0], p[1], p[4]), 1);
    assert_int_equal(tu_sh(NULL, "%s nn lrp -m %s -d npy:%s,%s --ratio 2 -o %s",
                        bin, p[6], p[0], p[1], p[4]), 2);
    assert_int_equal(tu_sh(NULL, "rm -rf %s", dir), 0);
    fl_dataset_free(tr);
    fl_dataset_free(te);
    fl_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gini),         cmocka_unit_test(test_fol),
        cmocka_unit_test(test_top_and_best), cmocka_unit_test(test_kmst),
        cmocka_unit_test(test_per_class),    cmocka_unit_test(test_strategies),
        cmocka_unit_test(test_save),         cmocka_unit_test(test_cli),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
