/* The gradient strategies (dlfuzz, deepxplore, deepsa, fgsm, pgd) on the campaign fixture's
 * random MLPs: each finds failures within its bound, repeats exactly, refuses what it cannot
 * do before creating anything; and the exact-SA objective's gradient, chained through the
 * model, against finite differences. */
#include <cjson/cJSON.h>

#include "fuzzfix.h"
#include "flare/lrp.h"
#include "fuzz/grad.h"

/* A fixture of its own: the campaign fixture's MLPs are untrained and predict one class for
 * every seed, which leaves gradient strategies nothing to push across. Here 90 labelled blobs
 * (class: the blob's column, left / middle / right) and two MLPs trained on them, the second
 * one briefly, so that the two agree on most seeds and not on all. */
static int gsetup(void **state) {
    fx *f = calloc(1, sizeof *f);
    fl_err e = {0};
    snprintf(f->dir, sizeof f->dir, "/tmp/flare-fuzzg-XXXXXX");
    if (!mkdtemp(f->dir) || fl_dataset_new(90, 1, 8, 8, &f->seeds, &e)) return -1;
    fl_rng r;
    fl_rng_seed(&r, 3);
    f->seeds->has_labels = 1;
    f->seeds->n_classes = 3;
    for (int i = 0; i < 90; i++) {
        float cx = 1 + 6 * fl_rng_uniform(&r), cy = 1 + 6 * fl_rng_uniform(&r);
        f->seeds->y[i] = cx < 3 ? 0 : cx < 5 ? 1 : 2;
        for (int y = 0; y < 8; y++)
            for (int x = 0; x < 8; x++) {
                float d2 = (x - cx) * (x - cx) + (y - cy) * (y - cy);
                f->seeds->x[i * 64 + y * 8 + x] = roundf(255 * expf(-d2 / 6)) / 255;
            }
    }
    fl_train_opts to;
    fl_train_opts_default(&to);
    to.epochs = 40;
    to.batch = 16;
    if (fl_zoo_build("mlp", 1, 8, 8, 3, 7, &f->m, &e) || fl_train(f->m, f->seeds, NULL, &to, &e))
        return -1;
    to.epochs = 2;
    if (fl_zoo_build("mlp", 1, 8, 8, 3, 8, &f->m2, &e) || fl_train(f->m2, f->seeds, NULL, &to, &e))
        return -1;
    *state = f;
    return 0;
}

/* The largest L-inf distance (on [0,1]) recorded in the failure JSONs under out/failures. */
static double max_linf(const char *out, int *n_files) {
    char root[300];
    snprintf(root, sizeof root, "%s/failures", out);
    DIR *d = opendir(root);
    double worst = 0;
    *n_files = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char sub[600];
        snprintf(sub, sizeof sub, "%s/%s", root, de->d_name);
        DIR *s = opendir(sub);
        struct dirent *fe;
        while (s && (fe = readdir(s))) {
            size_t k = strlen(fe->d_name);
            if (k < 5 || strcmp(fe->d_name + k - 5, ".json")) continue;
            char p[900];
            snprintf(p, sizeof p, "%s/%s", sub, fe->d_name);
            cJSON *j = fz_json_read(p, NULL);
            assert_non_null(j);
            const cJSON *v = cJSON_GetObjectItem(j, "linf");
            assert_true(cJSON_IsNumber(v));
            if (v->valuedouble > worst) worst = v->valuedouble;
            (*n_files)++;
            cJSON_Delete(j);
        }
        if (s) closedir(s);
    }
    if (d) closedir(d);
    return worst;
}

static fl_status run(fx *f, fl_fuzz_strategy s, const char *sub, int64_t execs, fl_fuzz_result *r,
                     char *out, fl_err *e) {
    fl_fuzz_opts o;
    opts(f, &o, sub, out);
    o.strategy = s;
    o.max_execs = execs;
    o.eps = 0.1;
    return fl_fuzz_run(&o, r, e);
}

static void test_fgsm_pgd_bound(void **state) {
    fx *f = *state;
    fl_fuzz_strategy ss[2] = {FL_FUZZ_FGSM, FL_FUZZ_PGD};
    for (int i = 0; i < 2; i++) {
        char out[256];
        fl_fuzz_result r;
        fl_err e = {0};
        if (run(f, ss[i], i ? "pgd" : "fgsm", 400, &r, out, &e)) fail_msg("%s", e.msg);
        assert_true(r.last.execs >= 400);
        assert_int_equal(r.last.corpus, r.seeds_used); /* they keep nothing */
        assert_true(r.last.failures > 0);
        int n;
        double linf = max_linf(out, &n);
        assert_true(n >= r.last.failures); /* first (and min) of each */
        assert_true(linf > 0.05);
        assert_true(linf <= 0.1 + 0.5 / 255 + 1e-9); /* eps, plus the rounding to 8 bits */
        char v[64];
        assert_true(fl_fuzz_stats_get(out, "strategy", v, sizeof v));
        assert_string_equal(v, i ? "pgd" : "fgsm");
    }
}

static void test_dlfuzz_keeps_and_repeats(void **state) {
    fx *f = *state;
    fl_fuzz_opts a;
    char o1[256], o2[256];
    opts(f, &a, "dl1", o1);
    a.strategy = FL_FUZZ_DLFUZZ;
    a.max_execs = 600;
    a.max_l2 = 1; /* the 0.02 default admits no step on 8x8 images (docs/nn-fuzz.md) */
    a.neuron_select = "rarely,weight";
    a.criterion = "nc:0.5";
    fl_fuzz_result r1, r2;
    fl_err e = {0};
    fl_threads_set(1);
    if (fl_fuzz_run(&a, &r1, &e)) fail_msg("%s", e.msg);
    fl_fuzz_opts b = a;
    snprintf(o2, sizeof o2, "%s/dl2", f->dir);
    b.out_dir = o2;
    assert_int_equal(fl_fuzz_run(&b, &r2, &e), FL_OK);
    fl_threads_set(0);
    assert_true(r1.last.corpus > r1.seeds_used); /* steps that added coverage were queued */
    assert_int_equal(r1.last.corpus, r2.last.corpus);
    assert_int_equal(r1.last.covered, r2.last.covered);
    assert_int_equal(r1.last.failures_total, r2.last.failures_total);
    assert_int_equal(r1.last.execs, r2.last.execs);
    /* a queued step names its strategy and step in the lineage */
    char q[300];
    snprintf(q, sizeof q, "%s/queue", o1);
    DIR *d = opendir(q);
    struct dirent *de;
    int found = 0;
    while ((de = readdir(d))) found |= strstr(de->d_name, "op:dlfuzz") != NULL;
    closedir(d);
    assert_true(found);
    a.neuron_select = "often,sometimes";
    snprintf(o1, sizeof o1, "%s/dl3", f->dir);
    assert_int_equal(fl_fuzz_run(&a, &r1, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "sometimes"));
    assert_false(exists(f->dir, "dl3"));
}

static void test_deepxplore(void **state) {
    fx *f = *state;
    fl_fuzz_opts o;
    char out[256];
    fl_fuzz_result r;
    fl_err e = {0};
    opts(f, &o, "dx0", out);
    o.strategy = FL_FUZZ_DEEPXPLORE;
    assert_int_equal(fl_fuzz_run(&o, &r, &e), FL_ERR_ARG); /* one model: usage */
    assert_non_null(strstr(e.msg, "--model2"));
    assert_false(exists(f->dir, "dx0"));
    o.model2 = f->m2;
    o.dx_constraint = FL_DX_NONE;
    o.w_diff = 4; /* the two MLPs learnt nearly the same function: push the first harder */
    o.max_execs = 2000;
    snprintf(out, sizeof out, "%s/dx1", f->dir);
    if (fl_fuzz_run(&o, &r, &e)) fail_msg("%s", e.msg);
    assert_true(r.by_oracle[FZ_OR_DISAGREE] > 0);
    assert_int_equal(r.last.corpus, r.seeds_used);
    o.model3 = f->m2;
    o.dx_constraint = FL_DX_OCCLUSION;
    o.dx_rect[0] = 2, o.dx_rect[1] = 2, o.dx_rect[2] = 4, o.dx_rect[3] = 4;
    snprintf(out, sizeof out, "%s/dx2", f->dir);
    if (fl_fuzz_run(&o, &r, &e)) fail_msg("%s", e.msg);
    /* occlusion: a finding differs from its seed only inside the rectangle */
    char q[300];
    snprintf(q, sizeof q, "%s/failures", out);
    DIR *d = opendir(q);
    struct dirent *de;
    int checked = 0;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char p[700];
        snprintf(p, sizeof p, "%s/%s", q, de->d_name);
        DIR *s = opendir(p);
        struct dirent *fe;
        while ((fe = readdir(s))) {
            if (!strstr(fe->d_name, "first.npy")) continue;
            char np[1000];
            snprintf(np, sizeof np, "%s/%s", p, fe->d_name);
            fl_tensor t = {0};
            assert_int_equal(fl_npy_read_tensor(np, &t, &e), FL_OK);
            strcpy(strstr(np, ".npy"), ".json");
            cJSON *j = fz_json_read(np, &e);
            assert_non_null(j);
            const float *seed = f->seeds->x + (int64_t)cJSON_GetObjectItem(j, "seed_index")->valuedouble * 64;
            cJSON_Delete(j);
            for (int y = 0; y < 8; y++)
                for (int x = 0; x < 8; x++)
                    if (x < 2 || x >= 6 || y < 2 || y >= 6)
                        assert_float_equal(t.data[y * 8 + x], seed[y * 8 + x], 1e-6);
            fl_tensor_free(&t);
            checked++;
        }
        closedir(s);
    }
    if (d) closedir(d);
    assert_int_equal(checked, r.last.failures);
    o.strategy = FL_FUZZ_PGD; /* --model3 belongs to deepxplore */
    snprintf(out, sizeof out, "%s/dx3", f->dir);
    assert_int_equal(fl_fuzz_run(&o, &r, &e), FL_ERR_ARG);
    assert_false(exists(f->dir, "dx3"));
}

static void test_deepsa(void **state) {
    fx *f = *state;
    fl_err e = {0};
    const fl_dataset *train = f->seeds;
    fl_important_opts io;
    fl_important_opts_default(&io);
    io.ratio = 0.5;
    fl_important *imp;
    if (fl_important_compute(f->m, train, &io, &imp, &e)) fail_msg("%s", e.msg);
    char ip[300];
    snprintf(ip, sizeof ip, "%s/important.json", f->dir);
    assert_int_equal(fl_important_save(imp, ip, &e), FL_OK);
    fl_important_free(imp);
    fl_fuzz_opts o;
    char out[256];
    fl_fuzz_result r;
    opts(f, &o, "sa0", out);
    o.strategy = FL_FUZZ_DEEPSA;
    o.train = train;
    assert_int_equal(fl_fuzz_run(&o, &r, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "--important"));
    assert_false(exists(f->dir, "sa0"));
    o.important = ip;
    o.train = NULL;
    assert_int_equal(fl_fuzz_run(&o, &r, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "--train"));
    assert_false(exists(f->dir, "sa0"));
    o.train = train;
    o.sa_kind = FL_SA_DSA;
    o.max_kept = 3;
    o.max_execs = 500;
    for (int exact = 0; exact < 2; exact++) {
        o.sa_exact = exact;
        snprintf(out, sizeof out, "%s/sa%d", f->dir, exact + 1);
        if (fl_fuzz_run(&o, &r, &e)) fail_msg("%s", e.msg);
        assert_true(r.last.execs >= 500);
        assert_true(r.last.corpus > r.seeds_used); /* steps whose SA rose were kept */
        assert_true(r.last.corpus <= r.seeds_used * (1 + 3)); /* at most max_kept per lineage */
    }
}

/* A model whose output reaches the input only through Shape: no gradient, named. */
static void test_no_gradient(void **state) {
    fx *f = *state;
    fl_err e = {0};
    fl_model *m = fl_model_new();
    fl_tensor in = {0}, shp = {0}, w = {0};
    int64_t ds[4] = {0, 1, 8, 8}, two = 2, ws[2] = {4, 3};
    fl_tensor_set_shape(&in, 4, ds);
    int x = fl_model_add_value(m, "x", FL_VAL_INPUT, &in, &e);
    assert_int_equal(fl_tensor_alloc(&shp, 1, &two), FL_OK);
    shp.data[0] = 1, shp.data[1] = 4;
    assert_int_equal(fl_tensor_alloc(&w, 2, ws), FL_OK);
    for (int i = 0; i < 12; i++) w.data[i] = (float)(i % 5) - 2;
    int s = fl_model_add_value(m, "s", FL_VAL_CONST, &shp, &e);
    int wv = fl_model_add_value(m, "w", FL_VAL_PARAM, &w, &e);
    int sh = fl_model_add_op(m, "Shape", "shape", 1, &x, 0, NULL, &e);
    int rs = fl_model_add_op(m, "Reshape", "reshape", 2, (int[]){sh, s}, 0, NULL, &e);
    int y = fl_model_add_op(m, "MatMul", "mm", 2, (int[]){rs, wv}, 0, NULL, &e);
    assert_true(y >= 0);
    assert_int_equal(fl_model_set_io(m, 1, &x, 1, &y, &e), FL_OK);
    assert_int_equal(fl_model_finish(m, &e), FL_OK);
    fl_dataset one = *f->seeds;
    one.n = 1;
    one.has_labels = 0; /* its label is the model's prediction */
    fl_fuzz_opts o;
    char out[256];
    fl_fuzz_result r;
    opts(f, &o, "ng", out);
    o.model = m;
    o.seeds = &one;
    o.strategy = FL_FUZZ_FGSM;
    fl_status st = fl_fuzz_run(&o, &r, &e);
    if (st != FL_ERR_UNSUPPORTED) fail_msg("%d: %s", st, e.msg);
    assert_non_null(strstr(e.msg, "Shape"));
    assert_false(exists(f->dir, "ng"));
    fl_model_free(m);
    fl_tensor_free(&shp);
    fl_tensor_free(&w);
}

/* deepsa's exact mode: d SA(trace(x)) / dx through the seeds and the backward pass, against
 * central differences of the SA of the traces of x +- h. */
static void test_sa_chain(void **state) {
    fx *f = *state;
    fl_err e = {0};
    const fl_dataset *train = f->seeds;
    fz_ntab t;
    assert_int_equal(fz_ntab_init(&t, f->m, &e), FL_OK);
    /* every neuron of the hidden layers (not the logits) */
    fl_layerset *ls;
    const char *hidden = t.ls->name[0];
    assert_int_equal(fl_layerset_make(f->m, hidden, &ls, &e), FL_OK);
    float *tr;
    int32_t *pred;
    int64_t dim;
    assert_int_equal(fl_sa_traces(f->m, hidden, train, 64, &tr, &pred, &dim, &e), FL_OK);
    for (int kind = 0; kind < 3; kind++) { /* DSA, LSA, MDSA */
        fl_sa_opts so;
        fl_sa_opts_init(&so, kind == 0 ? FL_SA_DSA : kind == 1 ? FL_SA_LSA : FL_SA_MDSA);
        so.var_threshold = 0;
        fl_sa *sa;
        if (kind) { /* LSA, MDSA need more traces than neurons: jitter copies of the 90 */
            int64_t n = 90 * 40;
            float *big = malloc(sizeof(float) * (size_t)(n * dim));
            int32_t *bp = malloc(sizeof(int32_t) * (size_t)n);
            fl_rng rr;
            fl_rng_seed(&rr, 5);
            for (int64_t i = 0; i < n; i++) {
                for (int64_t j = 0; j < dim; j++)
                    big[i * dim + j] = tr[(i % 90) * dim + j] + 0.05f * fl_rng_normal(&rr);
                bp[i] = pred[i % 90];
            }
            if (fl_sa_new(big, bp, n, dim, &so, &sa, &e)) fail_msg("%s", e.msg);
            free(big);
            free(bp);
        } else {
            assert_int_equal(fl_sa_new(tr, pred, 90, dim, &so, &sa, &e), FL_OK);
        }
        fl_tensor x = {0};
        int64_t shape[4] = {1, 1, 8, 8};
        assert_int_equal(fl_tensor_alloc(&x, 4, shape), FL_OK);
        for (int k = 0; k < 64; k++) x.data[k] = 0.3f + 0.4f * f->seeds->x[5 * 64 + k];
        assert_int_equal(fl_model_forward(f->m, &x, &e), FL_OK);
        float *trace = malloc(sizeof(float) * (size_t)dim), *g = malloc(sizeof(float) * (size_t)dim);
        fl_layerset_neurons(ls, f->m, trace);
        int32_t p = fz_argmax(fl_model_output(f->m, 0)->data, 3, NULL);
        double v;
        assert_int_equal(fl_sa_grad(sa, trace, &p, 1, &v, g, &e), FL_OK);
        assert_false(isnan(v));
        fz_seeds_begin(&t.seeds);
        for (int64_t j = 0; j < dim; j++) assert_int_equal(fz_obj_neuron(&t, ls, 0, j, g[j], &e), FL_OK);
        assert_int_equal(fz_seeds_backward(&t.seeds, f->m, &e), FL_OK);
        const fl_tensor *dx = fl_model_grad(f->m, fl_model_input_name(f->m, 0));
        float dxc[64];
        memcpy(dxc, dx->data, sizeof dxc);
        const float h = 1e-3f;
        int checked = 0;
        for (int k = 0; k < 64; k += 7) {
            double sv[2];
            for (int s = 0; s < 2; s++) {
                float keep = x.data[k];
                x.data[k] = keep + (s ? -h : h);
                assert_int_equal(fl_model_forward(f->m, &x, &e), FL_OK);
                fl_layerset_neurons(ls, f->m, trace);
                assert_int_equal(fl_sa_score(sa, trace, &p, 1, &sv[s], &e), FL_OK);
                x.data[k] = keep;
            }
            double fd = (sv[0] - sv[1]) / (2 * h);
            assert_true(fabs(fd - dxc[k]) <= 2e-2 * (fabs(fd) + 1e-2));
            checked++;
        }
        assert_true(checked >= 9);
        free(trace);
        free(g);
        fl_tensor_free(&x);
        fl_sa_free(sa);
    }
    free(tr);
    free(pred);
    fl_layerset_free(ls);
    fz_ntab_free(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fgsm_pgd_bound),
        cmocka_unit_test(test_dlfuzz_keeps_and_repeats),
        cmocka_unit_test(test_deepxplore),
        cmocka_unit_test(test_deepsa),
        cmocka_unit_test(test_no_gradient),
        cmocka_unit_test(test_sa_chain),
    };
    return cmocka_run_group_tests(tests, gsetup, teardown);
}
