/* Coverage criteria and profiles: exact agreement with the numpy re-implementation in
 * tests/fixtures/cover/make_cover.py on a real LeNet-1, incremental == one-shot, copies,
 * the model path, constant neurons, NaNs, empty layer sets, spec errors, profile files. */
#include <cjson/cJSON.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "flare/cover.h"
#include "flare/data.h"
#include "flare/onnx.h"
#include "flare/train.h"
#include "core/simd.h"

#define FIX "tests/fixtures/cover/"

static char tmpdir[64];

static const char *tmp(const char *name) {
    static char p[4][256];
    static int k;
    char *s = p[k++ & 3];
    snprintf(s, 256, "%s/%s", tmpdir, name);
    return s;
}

/* ---- the fixture ------------------------------------------------------------------------------ */
typedef struct {
    fl_model *m;
    fl_layerset *ls;
    cJSON *ref;
    fl_tensor train, mean, absmean, lmin, lmax; /* see make_cover.py */
} fixture;

static fixture F;

static int setup(void **state) {
    (void)state;
    strcpy(tmpdir, "/tmp/flare_cover_XXXXXX");
    if (!mkdtemp(tmpdir)) return -1;
    fl_err e = {0};
    if (fl_onnx_load(FIX "lenet1.onnx", &F.m, &e) != FL_OK ||
        fl_layerset_make(F.m, "all", &F.ls, &e) != FL_OK ||
        fl_npy_read_tensor(FIX "train_mean.npy", &F.train, &e) != FL_OK ||
        fl_npy_read_tensor(FIX "test_mean.npy", &F.mean, &e) != FL_OK ||
        fl_npy_read_tensor(FIX "test_absmean.npy", &F.absmean, &e) != FL_OK ||
        fl_npy_read_tensor(FIX "test_lmin.npy", &F.lmin, &e) != FL_OK ||
        fl_npy_read_tensor(FIX "test_lmax.npy", &F.lmax, &e) != FL_OK) {
        fprintf(stderr, "fixture: %s\n", e.msg);
        return -1;
    }
    uint8_t *buf;
    size_t len;
    if (fl_file_read(FIX "reference.json", &buf, &len, &e) != FL_OK) return -1;
    F.ref = cJSON_ParseWithLength((const char *)buf, len);
    free(buf);
    return F.ref ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    fl_tensor_free(&F.train), fl_tensor_free(&F.mean), fl_tensor_free(&F.absmean);
    fl_tensor_free(&F.lmin), fl_tensor_free(&F.lmax);
    cJSON_Delete(F.ref);
    fl_layerset_free(F.ls);
    fl_model_free(F.m);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Rows [start, start+n) of the fixture's test batch. */
static fl_cover_batch test_rows(int start, int n) {
    int64_t T = F.ls->total, L = F.ls->n;
    return (fl_cover_batch){.n = n,
                            .mean = F.mean.data + start * T,
                            .absmean = F.absmean.data + start * T,
                            .lmin = F.lmin.data + start * L,
                            .lmax = F.lmax.data + start * L};
}

static fl_profile *fixture_profile(int chunk) {
    fl_err e = {0};
    fl_profile *p;
    assert_int_equal(fl_profile_new(F.ls, &p, &e), FL_OK);
    int n = (int)F.train.shape[0];
    for (int s = 0; s < n; s += chunk) {
        int k = n - s < chunk ? n - s : chunk;
        assert_int_equal(fl_profile_add(p, F.train.data + (int64_t)s * F.ls->total, k, &e), FL_OK);
    }
    return p;
}

static void test_fixture_layers(void **state) {
    (void)state;
    cJSON *names = cJSON_GetObjectItem(F.ref, "layers"), *widths = cJSON_GetObjectItem(F.ref, "widths");
    assert_int_equal(cJSON_GetArraySize(names), F.ls->n);
    for (int l = 0; l < F.ls->n; l++) {
        assert_string_equal(cJSON_GetArrayItem(names, l)->valuestring, F.ls->name[l]);
        assert_int_equal(cJSON_GetArrayItem(widths, l)->valueint, F.ls->width[l]);
    }
    assert_int_equal(F.mean.shape[1], F.ls->total);
}

static void test_profile_matches_numpy(void **state) {
    (void)state;
    fl_profile *p = fixture_profile(37);
    cJSON *ref = cJSON_GetObjectItem(F.ref, "profile");
    assert_int_equal(p->count, F.train.shape[0]);
    for (int64_t j = 0; j < p->total; j++) {
        assert_true(p->min[j] == (float)cJSON_GetArrayItem(cJSON_GetObjectItem(ref, "min"), (int)j)->valuedouble);
        assert_true(p->max[j] == (float)cJSON_GetArrayItem(cJSON_GetObjectItem(ref, "max"), (int)j)->valuedouble);
        double m = cJSON_GetArrayItem(cJSON_GetObjectItem(ref, "mean"), (int)j)->valuedouble;
        double s = cJSON_GetArrayItem(cJSON_GetObjectItem(ref, "std"), (int)j)->valuedouble;
        assert_true(fabs(p->mean[j] - m) <= 1e-12 * fmax(1, fabs(m)));
        assert_true(fabs(p->std[j] - s) <= 1e-9 * fmax(1, fabs(s)));
    }
    /* batching does not change it */
    fl_profile *q = fixture_profile(200);
    assert_memory_equal(p->min, q->min, sizeof(float) * (size_t)p->total);
    assert_memory_equal(p->max, q->max, sizeof(float) * (size_t)p->total);
    fl_profile_free(q);
    fl_profile_free(p);
}

/* Compare c's state with the reference entry r (covered, total, per layer). */
static void check_counts(const fl_cover *c, const cJSON *r) {
    int64_t cov, tot;
    fl_cover_stats(c, &cov, &tot);
    if (cov != cJSON_GetObjectItem(r, "covered")->valueint ||
        tot != cJSON_GetObjectItem(r, "total")->valueint)
        fail_msg("%s: %lld / %lld, numpy %d / %d", c->spec, (long long)cov, (long long)tot,
                 cJSON_GetObjectItem(r, "covered")->valueint,
                 cJSON_GetObjectItem(r, "total")->valueint);
    cJSON *per = cJSON_GetObjectItem(r, "per_layer");
    assert_int_equal(cJSON_GetArraySize(per), c->n_groups);
    for (int g = 0; g < c->n_groups; g++) {
        fl_cover_group_stats(c, g, &cov, &tot);
        assert_int_equal(cov, cJSON_GetArrayItem(cJSON_GetArrayItem(per, g), 0)->valueint);
        assert_int_equal(tot, cJSON_GetArrayItem(cJSON_GetArrayItem(per, g), 1)->valueint);
    }
}

static void check_added(const char *spec, const uint8_t *added, int n, const cJSON *r) {
    cJSON *list = cJSON_GetObjectItem(r, "added");
    int k = 0;
    for (int i = 0; i < n; i++) {
        int want = k < cJSON_GetArraySize(list) && cJSON_GetArrayItem(list, k)->valueint == i;
        if (want != added[i]) fail_msg("%s: input %d added=%d, numpy %d", spec, i, added[i], want);
        k += want;
    }
    assert_int_equal(k, cJSON_GetArraySize(list));
}

/* Every criterion of the fixture: one batch, then batches of 7 into a fresh object. */
static void test_criteria_match_numpy(void **state) {
    (void)state;
    fl_err e = {0};
    fl_profile *p = fixture_profile(64);
    fl_cover_ctx ctx = {.m = F.m, .ls = F.ls, .profile = p};
    int n = (int)F.mean.shape[0], checked = 0;
    uint8_t *added = malloc((size_t)n);
    cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItem(F.ref, "criteria")) {
        fl_cover *c, *d;
        if (fl_cover_new(&ctx, r->string, &c, &e) != FL_OK) fail_msg("%s: %s", r->string, e.msg);
        fl_cover_batch b = test_rows(0, n);
        int any = 0;
        assert_int_equal(fl_cover_update(c, &b, added, &any, &e), FL_OK);
        assert_true(any);
        check_counts(c, r);
        check_added(r->string, added, n, r);
        /* incremental, odd batches: same coverage, same per-input flags */
        assert_int_equal(fl_cover_new(&ctx, r->string, &d, &e), FL_OK);
        for (int s = 0; s < n; s += 7) {
            fl_cover_batch bb = test_rows(s, n - s < 7 ? n - s : 7);
            assert_int_equal(fl_cover_update(d, &bb, added + s, NULL, &e), FL_OK);
        }
        check_counts(d, r);
        check_added(r->string, added, n, r);
        /* the whole batch again adds nothing */
        assert_int_equal(fl_cover_update(d, &b, added, &any, &e), FL_OK);
        assert_false(any);
        for (int i = 0; i < n; i++) assert_int_equal(added[i], 0);
        fl_cover_free(c);
        fl_cover_free(d);
        checked++;
    }
    assert_true(checked >= 15);
    free(added);
    fl_profile_free(p);
}

/* A coverset's per-input flags are the OR of its members'. */
static void test_coverset_or(void **state) {
    (void)state;
    fl_err e = {0};
    fl_profile *p = fixture_profile(200);
    fl_cover_ctx ctx = {.m = F.m, .ls = F.ls, .profile = p};
    const char *specs[] = {"nc:0.75:deepxplore", "nbc:0.5", "tknc:1"};
    fl_coverset *s;
    assert_int_equal(fl_coverset_new(&ctx, "nc:0.75:deepxplore, nbc:0.5,tknc:1", &s, &e), FL_OK);
    assert_int_equal(s->n, 3);
    int n = (int)F.mean.shape[0];
    uint8_t *added = malloc((size_t)n), *want = calloc((size_t)n, 1);
    fl_cover_batch b = test_rows(0, n);
    assert_int_equal(fl_coverset_update(s, &b, added, &e), FL_OK);
    for (int k = 0; k < 3; k++) {
        cJSON *r = cJSON_GetObjectItem(cJSON_GetObjectItem(F.ref, "criteria"), specs[k]);
        check_counts(s->c[k], r);
        cJSON *it;
        cJSON_ArrayForEach(it, cJSON_GetObjectItem(r, "added")) want[it->valueint] = 1;
    }
    assert_memory_equal(added, want, (size_t)n);
    /* TKNC and TKNP of several k share one selection of the largest k */
    fl_coverset *t;
    assert_int_equal(fl_coverset_new(&ctx, "tknc:1,tknp:2,tknp:3,tknc:3,tknp:1", &t, &e), FL_OK);
    assert_int_equal(t->topk_k, 3);
    for (int s0 = 0; s0 < n; s0 += 64) {
        fl_cover_batch bb = test_rows(s0, n - s0 < 64 ? n - s0 : 64);
        assert_int_equal(fl_coverset_update(t, &bb, NULL, &e), FL_OK);
    }
    for (int k = 0; k < t->n; k++)
        check_counts(t->c[k], cJSON_GetObjectItem(cJSON_GetObjectItem(F.ref, "criteria"), t->c[k]->spec));
    fl_coverset_free(t);
    /* a batch missing what NC deepxplore needs is refused */
    b.lmin = NULL;
    assert_int_equal(fl_coverset_update(s, &b, added, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "lmin"));
    fl_coverset_free(s);
    free(added), free(want);
    fl_profile_free(p);
}

/* Copy / clone / reset: a trial copy leaves the original alone; bitmap and key criteria. */
static void test_copy_clone_reset(void **state) {
    (void)state;
    fl_err e = {0};
    fl_profile *p = fixture_profile(200);
    fl_cover_ctx ctx = {.m = F.m, .ls = F.ls, .profile = p};
    const char *specs[] = {"kmnc:1000", "tknp:2", "nbc:0.0"};
    for (int k = 0; k < 3; k++) {
        cJSON *r = cJSON_GetObjectItem(cJSON_GetObjectItem(F.ref, "criteria"), specs[k]);
        fl_cover *c, *trial, *other;
        assert_int_equal(fl_cover_new(&ctx, specs[k], &c, &e), FL_OK);
        fl_cover_batch h1 = test_rows(0, 100), h2 = test_rows(100, 100);
        assert_int_equal(fl_cover_update(c, &h1, NULL, NULL, &e), FL_OK);
        int64_t half, cov;
        fl_cover_stats(c, &half, NULL);
        assert_int_equal(fl_cover_clone(c, &trial, &e), FL_OK);
        assert_int_equal(fl_cover_update(trial, &h2, NULL, NULL, &e), FL_OK);
        check_counts(trial, r);
        fl_cover_stats(c, &cov, NULL);
        assert_int_equal(cov, half); /* original untouched */
        /* copy the full state back into the original */
        assert_int_equal(fl_cover_copy(c, trial, &e), FL_OK);
        check_counts(c, r);
        /* reset, then the copy is independent of the reset one */
        fl_cover_reset(trial);
        fl_cover_stats(trial, &cov, NULL);
        assert_int_equal(cov, 0);
        check_counts(c, r);
        assert_int_equal(fl_cover_update(trial, &h2, NULL, NULL, &e), FL_OK);
        assert_int_equal(fl_cover_update(trial, &h1, NULL, NULL, &e), FL_OK);
        check_counts(trial, r); /* order does not matter */
        /* copying between different criteria is refused */
        assert_int_equal(fl_cover_new(&ctx, "tknc:3", &other, &e), FL_OK);
        assert_int_equal(fl_cover_copy(other, c, &e), FL_ERR_ARG);
        fl_cover_free(other);
        fl_cover_free(c); /* the clone keeps the shared parameters alive */
        assert_int_equal(fl_cover_update(trial, &h1, NULL, NULL, &e), FL_OK);
        fl_cover_free(trial);
    }
    fl_profile_free(p);
}

/* The model path: flare's forward + fl_cover_view_fill reproduce the fixture's summaries,
 * and fl_profile_compute its profile. */
static void test_model_path(void **state) {
    (void)state;
    fl_err e = {0};
    fl_dataset *d, *train;
    int64_t n = F.train.shape[0], T = F.ls->total, L = F.ls->n;
    if (fl_dataset_load("fashion-mnist:test", NULL, 2 * n, &d, &e) != FL_OK) fail_msg("%s", e.msg);
    fl_tensor x = {0};
    int64_t idx[256];
    for (int64_t i = 0; i < n; i++) idx[i] = n + i;
    assert_int_equal(fl_dataset_gather(d, idx, n, &x, NULL, &e), FL_OK);
    assert_int_equal(fl_model_forward(F.m, &x, &e), FL_OK);
    fl_cover_view v = {0};
    assert_int_equal(fl_cover_view_fill(&v, F.ls, F.m, FL_COVER_NEED_ABSMEAN | FL_COVER_NEED_RANGE, &e), FL_OK);
    assert_int_equal(v.b.n, n);
    for (int64_t i = 0; i < n * T; i++) {
        assert_true(fabsf(v.b.mean[i] - F.mean.data[i]) <= 1e-4f * fmaxf(1, fabsf(F.mean.data[i])));
        assert_true(fabsf(v.b.absmean[i] - F.absmean.data[i]) <= 1e-4f * fmaxf(1, F.absmean.data[i]));
    }
    for (int64_t i = 0; i < n * L; i++) {
        assert_true(fabsf(v.b.lmin[i] - F.lmin.data[i]) <= 1e-4f * fmaxf(1, fabsf(F.lmin.data[i])));
        assert_true(fabsf(v.b.lmax[i] - F.lmax.data[i]) <= 1e-4f * fmaxf(1, fabsf(F.lmax.data[i])));
    }
    /* mean-only fill gives the same means */
    fl_cover_view v2 = {0};
    assert_int_equal(fl_cover_view_fill(&v2, F.ls, F.m, 0, &e), FL_OK);
    assert_memory_equal(v2.b.mean, v.b.mean, sizeof(float) * (size_t)(n * T));
    assert_null(v2.b.lmin);

    /* profile over the first n images, streamed in batches of 64 */
    fl_tensor_free(&x);
    assert_int_equal(fl_dataset_load("fashion-mnist:test", NULL, n, &train, &e), FL_OK);
    fl_profile *p;
    assert_int_equal(fl_profile_compute(F.m, F.ls, train, 64, NULL, NULL, &p, &e), FL_OK);
    fl_profile *ref = fixture_profile(200);
    for (int64_t j = 0; j < T; j++) {
        assert_true(fabs(p->min[j] - ref->min[j]) <= 1e-4 * fmax(1, fabs(ref->min[j])));
        assert_true(fabs(p->max[j] - ref->max[j]) <= 1e-4 * fmax(1, fabs(ref->max[j])));
        assert_true(fabs(p->std[j] - ref->std[j]) <= 1e-4 * fmax(1, ref->std[j]));
    }
    /* coverage from the model path agrees with the reference on the threshold criteria (no
     * value of this fixture sits within float error of a threshold) */
    fl_cover_ctx ctx = {.m = F.m, .ls = F.ls, .profile = p};
    fl_coverset *s;
    assert_int_equal(fl_coverset_new(&ctx, "nc:0.5:deepxplore,nc:0.5:meanabs,tknc:3,snac:0.5", &s, &e), FL_OK);
    assert_int_equal(fl_dataset_gather(d, idx, n, &x, NULL, &e), FL_OK);
    assert_int_equal(fl_model_forward(F.m, &x, &e), FL_OK);
    assert_int_equal(fl_coverset_update_model(s, F.m, NULL, &e), FL_OK);
    for (int k = 0; k < s->n; k++) {
        check_counts(s->c[k], cJSON_GetObjectItem(cJSON_GetObjectItem(F.ref, "criteria"), s->c[k]->spec));
    }
    fl_coverset_free(s);
    /* one criterion straight from the model, and its clone (which makes its own buffers) */
    fl_cover *one, *twin;
    assert_int_equal(fl_cover_new(&ctx, "nc:0.5:deepxplore", &one, &e), FL_OK);
    assert_int_equal(fl_cover_clone(one, &twin, &e), FL_OK);
    uint8_t flags[256];
    int any = 0;
    assert_int_equal(fl_cover_update_model(one, F.m, flags, &any, &e), FL_OK);
    assert_int_equal(fl_cover_update_model(twin, F.m, NULL, NULL, &e), FL_OK);
    assert_true(any);
    cJSON *r = cJSON_GetObjectItem(cJSON_GetObjectItem(F.ref, "criteria"), "nc:0.5:deepxplore");
    check_counts(one, r);
    check_counts(twin, r);
    check_added("nc:0.5:deepxplore", flags, (int)n, r);
    fl_cover_free(twin);
    fl_cover_free(one);
    /* the profiled inputs themselves never leave the profile's bounds (in batches of the
     * same size: other sizes may change the BLAS blocking and the last bits of a value) */
    assert_int_equal(fl_coverset_new(&ctx, "nbc,snac", &s, &e), FL_OK);
    assert_int_equal(fl_coverset_run(s, F.m, train, 64, NULL, NULL, &e), FL_OK);
    int64_t c0, c1;
    fl_cover_stats(s->c[0], &c0, NULL);
    fl_cover_stats(s->c[1], &c1, NULL);
    assert_int_equal(c0 + c1, 0);
    fl_coverset_free(s);
    fl_profile_free(ref);
    fl_profile_free(p);
    fl_cover_view_free(&v);
    fl_cover_view_free(&v2);
    fl_tensor_free(&x);
    fl_dataset_free(train);
    fl_dataset_free(d);
}


/* A LeNet-5 of the zoo (seed 3) on h x h images and its "all" layer set. */
static fl_model *lenet5_all_hw(int h, fl_layerset **ls) {
    fl_err e = {0};
    fl_model *m;
    assert_int_equal(fl_zoo_build("lenet5", 1, h, h, 10, 3, &m, &e), FL_OK);
    assert_int_equal(fl_layerset_make(m, "all", ls, &e), FL_OK);
    return m;
}

static fl_model *lenet5_all(fl_layerset **ls) { return lenet5_all_hw(28, ls); }

/* The view on LeNet-5 (conv->Relu and Gemm->Relu pairs computed in one pass, the thread pool
 * for large layers) against a direct computation from the layer tensors; on 28 x 28 images
 * (channels of 576, 144, 64, 16 values: whole blocks of 16) and 27 x 27 (529, 121, 49, 9: a
 * block of 8 and single values left over), on the AVX2 kernel and the portable one, which
 * must give the same bits. */
static void view_check(int h) {
    fl_err e = {0};
    fl_layerset *ls;
    fl_model *m = lenet5_all_hw(h, &ls);
    fl_rng r;
    fl_rng_seed(&r, 5);
    int64_t shp[4] = {33, 1, h, h};
    fl_tensor x = tu_tensor(4, shp, &r, -0.5f, 1);
    assert_int_equal(fl_model_forward(m, &x, &e), FL_OK);
    fl_cover_view v = {0};
    assert_int_equal(fl_cover_view_fill(&v, ls, m, FL_COVER_NEED_ABSMEAN | FL_COVER_NEED_RANGE, &e), FL_OK);
    int64_t N = shp[0], T = ls->total;
    for (int l = 0; l < ls->n; l++) {
        const fl_tensor *t = fl_model_tensor(m, ls->name[l]);
        int64_t C = t->shape[1], hw = t->size / (N * C);
        for (int64_t b = 0; b < N; b++) {
            float mn = INFINITY, mx = -INFINITY;
            for (int64_t c = 0; c < C; c++) {
                double s = 0, a = 0;
                for (int64_t k = 0; k < hw; k++) {
                    float y = t->data[(b * C + c) * hw + k];
                    s += y, a += fabsf(y);
                    mn = fminf(mn, y), mx = fmaxf(mx, y);
                }
                int64_t at = b * T + ls->offset[l] + c;
                assert_true(fabs(v.b.mean[at] - s / hw) <= 1e-5 * fmax(1, fabs(s / hw)));
                assert_true(fabs(v.b.absmean[at] - a / hw) <= 1e-5 * fmax(1, a / hw));
            }
            assert_true(v.b.lmin[b * ls->n + l] == mn && v.b.lmax[b * ls->n + l] == mx);
        }
    }
    /* the mean-only pass and the full one give the same bits; so do both kernels */
    fl_cover_view v2 = {0}, v3 = {0};
    assert_int_equal(fl_cover_view_fill(&v2, ls, m, 0, &e), FL_OK);
    assert_memory_equal(v.b.mean, v2.b.mean, sizeof(float) * (size_t)(N * T));
    fl__simd_portable(1);
    assert_int_equal(fl_cover_view_fill(&v3, ls, m, FL_COVER_NEED_ABSMEAN | FL_COVER_NEED_RANGE, &e), FL_OK);
    fl__simd_portable(0);
    assert_memory_equal(v.b.mean, v3.b.mean, sizeof(float) * (size_t)(N * T));
    assert_memory_equal(v.b.absmean, v3.b.absmean, sizeof(float) * (size_t)(N * T));
    assert_memory_equal(v.b.lmin, v3.b.lmin, sizeof(float) * (size_t)(N * ls->n));
    assert_memory_equal(v.b.lmax, v3.b.lmax, sizeof(float) * (size_t)(N * ls->n));
    fl_cover_view_free(&v3);
    fl_cover_view_free(&v2);
    fl_cover_view_free(&v);
    fl_tensor_free(&x);
    fl_layerset_free(ls);
    fl_model_free(m);
}

static void test_view_lenet5(void **state) {
    (void)state;
    view_check(28);
    view_check(27);
}

/* A coverset selects the top k once per batch and lets a dense Relu layer reuse its input's
 * list when that list is all positive: the result must be what each criterion gets selecting
 * on its own. Inputs include all-zero and negative images, whose dense layers have fewer than
 * k positive values (the Relu layer is then selected itself, ties going to the lower index). */
static void test_topk_shared(void **state) {
    (void)state;
    fl_err e = {0};
    fl_layerset *ls;
    fl_model *m = lenet5_all(&ls);
    fl_rng r;
    fl_rng_seed(&r, 9);
    int pairs = 0, dense_pairs = 0;
    for (int l = 0; l < ls->n; l++) {
        if (ls->relu_of[l] < 0) continue;
        pairs++;
        assert_int_equal(ls->width[l], ls->width[ls->relu_of[l]]);
        assert_non_null(strstr(m->nodes[m->values[ls->value[l]].producer].op->name, "Relu"));
        dense_pairs += m->values[ls->value[l]].t.ndim == 2;
    }
    assert_int_equal(pairs, 4); /* conv1, conv2, fc1, fc2 */
    assert_int_equal(dense_pairs, 2);
    fl_cover_ctx ctx = {.m = m, .ls = ls};
    fl_coverset *s;
    fl_cover *own[3];
    assert_int_equal(fl_coverset_new(&ctx, "tknc:3,tknp:3,tknp:1", &s, &e), FL_OK);
    for (int k = 0; k < 3; k++)
        assert_int_equal(fl_cover_new(&ctx, s->c[k]->spec, &own[k], &e), FL_OK);
    int64_t shp[4] = {40, 1, 28, 28};
    for (int round = 0; round < 3; round++) {
        if (round == 2) { /* the first dense layer: one positive value, the Relu ties at 0 */
            int g = 0;
            while (strcmp(m->nodes[g].op->name, "Gemm") != 0) g++;
            fl_tensor *bias = &m->values[m->nodes[g].in[2]].t;
            for (int64_t i = 0; i < bias->size; i++) bias->data[i] = i == 7 ? 50.0f : -50.0f;
        }
        fl_tensor x = tu_tensor(4, shp, &r, round == 2 ? -1.0f : -0.5f, 1);
        for (int64_t i = 0; i < 3 * 784; i++) x.data[i] = 0; /* three blank images */
        assert_int_equal(fl_model_forward(m, &x, &e), FL_OK);
        uint8_t a[40], b[40];
        assert_int_equal(fl_coverset_update_model(s, m, a, &e), FL_OK);
        memset(b, 0, sizeof b);
        for (int k = 0; k < 3; k++) {
            uint8_t f[40];
            assert_int_equal(fl_cover_update_model(own[k], m, f, NULL, &e), FL_OK);
            for (int i = 0; i < 40; i++) b[i] |= f[i];
        }
        assert_memory_equal(a, b, sizeof a);
        fl_tensor_free(&x);
    }
    for (int k = 0; k < 3; k++) {
        int64_t c1, c2;
        fl_cover_stats(s->c[k], &c1, NULL);
        fl_cover_stats(own[k], &c2, NULL);
        assert_int_equal(c1, c2);
        assert_true(c1 > 0);
        if (k > 0) /* TKNP: the same patterns, found in the same order */
            assert_memory_equal(s->c[k]->key_store, own[k]->key_store,
                                (size_t)c1 * s->c[k]->key_bytes);
        fl_cover_free(own[k]);
    }
    fl_coverset_free(s);
    fl_layerset_free(ls);
    fl_model_free(m);
}

/* ---- a hand-made layer set: one dense layer "h" of 3 neurons ------------------------------- */
static fl_layerset *tiny_layerset(int64_t width) {
    fl_layerset *ls = calloc(1, sizeof *ls);
    ls->n = 1;
    ls->value = calloc(1, sizeof(int));
    ls->name = calloc(1, sizeof(char *));
    ls->name[0] = strdup("h");
    ls->width = calloc(1, sizeof(int64_t));
    ls->offset = calloc(1, sizeof(int64_t));
    ls->width[0] = width;
    ls->total = width;
    return ls;
}

/* Neuron 1 is constant on the training data: no KMNC sections (left out of the total), but
 * its corners exist. */
static void test_constant_neuron(void **state) {
    (void)state;
    fl_err e = {0};
    fl_layerset *ls = tiny_layerset(3);
    fl_profile *p;
    float train[] = {0, 2, 0, 1, 2, 10, 2, 2, 5};
    assert_int_equal(fl_profile_new(ls, &p, &e), FL_OK);
    assert_int_equal(fl_profile_add(p, train, 3, &e), FL_OK);
    assert_true(p->min[1] == 2 && p->max[1] == 2 && p->std[1] == 0);
    assert_true(fabs(p->mean[2] - 5) < 1e-12 && fabs(p->std[2] - sqrt(50.0 / 3)) < 1e-12);
    fl_cover_ctx ctx = {.ls = ls, .profile = p};
    fl_cover *km, *nbc, *nbcs;
    assert_int_equal(fl_cover_new(&ctx, "kmnc:4", &km, &e), FL_OK);
    assert_int_equal(fl_cover_new(&ctx, "nbc", &nbc, &e), FL_OK);
    assert_int_equal(fl_cover_new(&ctx, "nbc:1", &nbcs, &e), FL_OK);
    int64_t cov, tot;
    fl_cover_stats(km, &cov, &tot);
    assert_int_equal(tot, 8); /* 2 varying neurons x 4 */
    /* exact edges: 0 -> section 0, 2 (= max) -> section 3; neuron 2: 10 -> section 3 */
    float x[] = {0, 2, 10, 2, 2, 0, 0.5f, 2.5f, 4.9f};
    uint8_t added[3];
    fl_cover_batch b = {.n = 3, .mean = x};
    assert_int_equal(fl_cover_update(km, &b, added, NULL, &e), FL_OK);
    fl_cover_stats(km, &cov, NULL);
    /* neuron 0: sections 0, 3, 1; neuron 2: sections 3, 0 (0 = min), 1 (4.9 < 5) */
    assert_int_equal(cov, 6);
    assert_true(added[0] && added[1] && added[2]);
    assert_int_equal(fl_cover_update(nbc, &b, NULL, NULL, &e), FL_OK);
    fl_cover_stats(nbc, &cov, &tot);
    assert_int_equal(tot, 6);
    assert_int_equal(cov, 1); /* neuron 1 upper corner (2.5 > 2); nothing else leaves [min,max] */
    assert_true(fl_cover_is_hit(nbc, 3));
    assert_int_equal(fl_cover_update(nbcs, &b, NULL, NULL, &e), FL_OK);
    fl_cover_stats(nbcs, &cov, NULL);
    assert_int_equal(cov, 1); /* std 0: the constant neuron's bounds do not widen */
    fl_cover_free(km), fl_cover_free(nbc), fl_cover_free(nbcs);

    /* every neuron constant: KMNC has nothing to cover */
    float flat[] = {1, 1, 1};
    fl_profile *q;
    assert_int_equal(fl_profile_new(ls, &q, &e), FL_OK);
    assert_int_equal(fl_profile_add(q, flat, 1, &e), FL_OK);
    ctx.profile = q;
    assert_int_equal(fl_cover_new(&ctx, "kmnc", &km, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "nothing to cover"));
    /* NC of a constant layer: 0/0 scaling is never covered (deepxplore, channel; meanabs
     * when every |x| is 0); meanabs of a constant non-zero layer is 1 everywhere */
    const char *modes[] = {"nc:0:deepxplore", "nc:0:channel", "nc:0:meanabs", "nc:0:none"};
    const int64_t want[] = {0, 0, 3, 3};
    float lo[] = {1}, hi[] = {1}, zero[] = {0, 0, 0};
    fl_cover_batch fb = {.n = 1, .mean = flat, .absmean = flat, .lmin = lo, .lmax = hi};
    for (int k = 0; k < 4; k++) {
        fl_cover *c;
        assert_int_equal(fl_cover_new(&ctx, modes[k], &c, &e), FL_OK);
        assert_int_equal(fl_cover_update(c, &fb, NULL, NULL, &e), FL_OK);
        fl_cover_stats(c, &cov, NULL);
        assert_int_equal(cov, want[k]);
        if (k == 2) {
            fl_cover_reset(c);
            fb.absmean = zero;
            assert_int_equal(fl_cover_update(c, &fb, NULL, NULL, &e), FL_OK);
            fl_cover_stats(c, &cov, NULL);
            assert_int_equal(cov, 0);
        }
        fl_cover_free(c);
    }
    fl_profile_free(q);
    fl_profile_free(p);
    fl_layerset_free(ls);
}

static void test_nan(void **state) {
    (void)state;
    fl_err e = {0};
    fl_layerset *ls = tiny_layerset(3);
    fl_profile *p;
    float good[] = {0, 1, 2}, bad[] = {0, 1, 2, 0, NAN, 2};
    assert_int_equal(fl_profile_new(ls, &p, &e), FL_OK);
    assert_int_equal(fl_profile_add(p, bad, 2, &e), FL_ERR_NAN);
    assert_non_null(strstr(e.msg, "input 1, layer 'h' neuron 1 is NaN"));
    assert_int_equal(fl_profile_add(p, good, 1, &e), FL_OK);
    assert_int_equal(fl_profile_add(p, bad + 3 + 3, 0, &e), FL_OK);
    good[1] = 5;
    assert_int_equal(fl_profile_add(p, good, 1, &e), FL_OK);
    fl_cover_ctx ctx = {.ls = ls, .profile = p};
    fl_coverset *s;
    assert_int_equal(fl_coverset_new(&ctx, "nc:0:none,kmnc,tknp", &s, &e), FL_OK);
    fl_cover_batch b = {.n = 2, .mean = bad};
    assert_int_equal(fl_coverset_update(s, &b, NULL, &e), FL_ERR_NAN);
    assert_int_equal(fl_cover_update(s->c[1], &b, NULL, NULL, &e), FL_ERR_NAN);
    bad[4] = INFINITY;
    assert_int_equal(fl_cover_update(s->c[2], &b, NULL, NULL, &e), FL_ERR_NAN);
    assert_non_null(strstr(e.msg, "infinite"));
    int64_t cov;
    fl_cover_stats(s->c[0], &cov, NULL);
    assert_int_equal(cov, 0); /* nothing was marked */
    fl_coverset_free(s);
    fl_profile_free(p);
    fl_layerset_free(ls);
}

static void test_errors(void **state) {
    (void)state;
    fl_err e = {0};
    fl_cover *c;
    fl_coverset *s;
    fl_layerset *ls = tiny_layerset(3);
    fl_cover_ctx ctx = {.ls = ls};
    struct {
        const char *spec, *msg;
    } bad[] = {
        {"foo", "unknown coverage criterion 'foo' (known: nc[:T"},
        {"", "unknown coverage criterion"},
        {"nc:", "empty parameter"},
        {"nc:abc", "'abc' is not a number"},
        {"nc:0.5:weird", "unknown scaling 'weird'"},
        {"nc:0.5:channel:x", "too many parameters"},
        {"nc::channel", "empty parameter"},
        {"nc:0.5::", "too many parameters"},
        {"kmnc:0", "not an integer in [1,"},
        {"kmnc:1.5", "'1.5' is not an integer"},
        {"kmnc", "needs a training profile"},
        {"nbc:-1", "'-1' is not a number in [0,"},
        {"snac", "needs a training profile"},
        {"tknc:0", "'0' is not an integer in [1,"},
        {"tknp:x", "not an integer"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        fl_status st = fl_cover_new(&ctx, bad[k].spec, &c, &e);
        if (st != FL_ERR_ARG || !strstr(e.msg, bad[k].msg))
            fail_msg("'%s': status %d, message '%s'", bad[k].spec, st, e.msg);
        assert_null(c);
    }
    assert_int_equal(fl_coverset_new(&ctx, "tknc,nc,tknc", &s, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "listed twice"));
    assert_int_equal(fl_coverset_new(&ctx, ",", &s, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "no coverage criterion"));
    /* empty layer sets */
    fl_layerset *none;
    assert_int_equal(fl_layerset_make(F.m, "", &none, &e) == FL_OK, 0);
    assert_null(none);
    fl_layerset empty = {0};
    ctx.ls = &empty;
    assert_int_equal(fl_cover_new(&ctx, "nc", &c, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "non-empty layer set"));
    ctx.ls = NULL;
    assert_int_equal(fl_cover_new(&ctx, "tknc", &c, &e), FL_ERR_ARG);
    /* a profile made for other layers */
    fl_layerset *cd;
    fl_profile *p = fixture_profile(200);
    assert_int_equal(fl_layerset_make(F.m, "conv+dense", &cd, &e), FL_OK);
    fl_cover_ctx ctx2 = {.m = F.m, .ls = cd, .profile = p};
    assert_int_equal(fl_cover_new(&ctx2, "kmnc", &c, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "profile does not fit the layer set"));
    fl_profile_free(p);
    fl_layerset_free(cd);
    fl_layerset_free(ls);
}

static void test_profile_file(void **state) {
    (void)state;
    fl_err e = {0};
    fl_profile *p = fixture_profile(50), *q;
    const char *path = tmp("p.bin");
    assert_int_equal(fl_profile_save(p, path, &e), FL_OK);
    assert_int_equal(fl_profile_load(path, &q, &e), FL_OK);
    assert_int_equal(q->n_layers, p->n_layers);
    assert_int_equal(q->total, p->total);
    assert_int_equal(q->count, p->count);
    for (int l = 0; l < p->n_layers; l++) {
        assert_string_equal(q->name[l], p->name[l]);
        assert_int_equal(q->width[l], p->width[l]);
        assert_int_equal(q->offset[l], p->offset[l]);
    }
    size_t T = (size_t)p->total;
    assert_memory_equal(q->min, p->min, 4 * T);
    assert_memory_equal(q->max, p->max, 4 * T);
    assert_memory_equal(q->mean, p->mean, 8 * T);
    assert_memory_equal(q->std, p->std, 8 * T);
    assert_int_equal(fl_profile_match(q, F.ls, &e), FL_OK);
    /* a loaded profile keeps accumulating like the original */
    assert_int_equal(fl_profile_add(q, F.mean.data, 3, &e), FL_OK);
    assert_int_equal(fl_profile_add(p, F.mean.data, 3, &e), FL_OK);
    for (size_t j = 0; j < T; j++) assert_true(fabs(q->std[j] - p->std[j]) <= 1e-9 * fmax(1, p->std[j]));
    fl_profile_free(q);

    /* the other layer set */
    fl_layerset *cd;
    assert_int_equal(fl_layerset_make(F.m, "conv+dense", &cd, &e), FL_OK);
    assert_int_equal(fl_profile_match(p, cd, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "its layer 1 is '/relu1/Relu_output_0'"));
    fl_layerset_free(cd);
    assert_int_equal(fl_layerset_make(F.m, "/conv1/Conv_output_0", &cd, &e), FL_OK);
    assert_int_equal(fl_profile_match(p, cd, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "it has 7 layers, the layer set 1"));
    fl_layerset_free(cd);

    /* damaged files: every truncation, a flipped byte, wrong magic, missing */
    uint8_t *buf;
    size_t len;
    assert_int_equal(fl_file_read(path, &buf, &len, &e), FL_OK);
    const char *cut = tmp("cut.bin");
    for (size_t n = 0; n < len; n += (n < 64 ? 1 : 97)) {
        assert_int_equal(fl_file_write_atomic(cut, buf, n, &e), FL_OK);
        if (fl_profile_load(cut, &q, &e) != FL_ERR_FORMAT) fail_msg("truncated at %zu: %s", n, e.msg);
        assert_null(q);
        assert_non_null(strstr(e.msg, cut));
    }
    assert_int_equal(fl_file_write_atomic(cut, buf, len - 1, &e), FL_OK);
    assert_int_equal(fl_profile_load(cut, &q, &e), FL_ERR_FORMAT);
    assert_non_null(strstr(e.msg, "truncated"));
    buf[len / 2] ^= 0x40;
    assert_int_equal(fl_file_write_atomic(cut, buf, len, &e), FL_OK);
    assert_int_equal(fl_profile_load(cut, &q, &e), FL_ERR_FORMAT);
    assert_non_null(strstr(e.msg, "checksum"));
    buf[len / 2] ^= 0x40;
    buf[0] = 'X';
    assert_int_equal(fl_file_write_atomic(cut, buf, len, &e), FL_OK);
    assert_int_equal(fl_profile_load(cut, &q, &e), FL_ERR_FORMAT);
    assert_non_null(strstr(e.msg, "not a flare profile"));
    free(buf);
    assert_int_equal(fl_profile_load(tmp("missing.bin"), &q, &e), FL_ERR_IO);
    fl_profile_free(p);
}

/* profile_v1.bin was written by flare before version 2 (a profile of the fixture model's layers
 * over 50 inputs; also fuzz/corpus/profile/lenet1_all.bin): its checksum starts from
 * version 1's mistyped basis. It still loads; what is saved is version 2 with the published
 * FNV-1a 64; and each version's checksum is checked with its own basis. */
static void test_profile_v1(void **state) {
    (void)state;
    fl_err e = {0};
    fl_profile *q;
    assert_int_equal(fl_profile_load(FIX "profile_v1.bin", &q, &e), FL_OK);
    assert_int_equal(q->total, F.ls->total);
    assert_int_equal(q->count, 50);
    assert_int_equal(fl_profile_match(q, F.ls, &e), FL_OK);
    const char *path = tmp("v2.bin");
    assert_int_equal(fl_profile_save(q, path, &e), FL_OK);
    uint8_t *buf, *old;
    size_t len, olen;
    uint32_t ver;
    uint64_t sum;
    assert_int_equal(fl_file_read(path, &buf, &len, &e), FL_OK);
    assert_int_equal(fl_file_read(FIX "profile_v1.bin", &old, &olen, &e), FL_OK);
    assert_int_equal(len, olen);
    memcpy(&ver, buf + 8, 4);
    assert_int_equal(ver, 2);
    memcpy(&sum, buf + len - 8, 8);
    assert_true(sum == fl_fnv1a(0xcbf29ce484222325ull, buf, len - 8));
    /* apart from the version and the checksum, the bytes are version 1's */
    assert_memory_equal(buf + 12, old + 12, len - 20);
    fl_profile_free(q);
    /* a version 1 file relabelled 2, and a version 2 file relabelled 1, fail their checksum */
    const char *cut = tmp("relabel.bin");
    old[8] = 2;
    assert_int_equal(fl_file_write_atomic(cut, old, olen, &e), FL_OK);
    assert_int_equal(fl_profile_load(cut, &q, &e), FL_ERR_FORMAT);
    assert_non_null(strstr(e.msg, "checksum"));
    buf[8] = 1;
    assert_int_equal(fl_file_write_atomic(cut, buf, len, &e), FL_OK);
    assert_int_equal(fl_profile_load(cut, &q, &e), FL_ERR_FORMAT);
    assert_non_null(strstr(e.msg, "checksum"));
    /* a damaged version 1 file too */
    old[8] = 1;
    old[olen / 2] ^= 0x40;
    assert_int_equal(fl_file_write_atomic(cut, old, olen, &e), FL_OK);
    assert_int_equal(fl_profile_load(cut, &q, &e), FL_ERR_FORMAT);
    assert_non_null(strstr(e.msg, "checksum"));
    /* versions it does not know */
    buf[8] = 3;
    assert_int_equal(fl_file_write_atomic(cut, buf, len, &e), FL_OK);
    assert_int_equal(fl_profile_load(cut, &q, &e), FL_ERR_FORMAT);
    assert_non_null(strstr(e.msg, "version 3, this flare reads 1 and 2"));
    free(buf);
    free(old);
}


/* ---- the commands (the binary is $FLARE_BIN, build/flare by default) ----------------------- */

static void expect(int rc, char *out, int want, const char *needle) {
    if (rc != want || (needle && !strstr(out, needle)))
        fail_msg("exit %d (want %d), expected \"%s\" in:\n%s", rc, want, needle ? needle : "", out);
    free(out);
}

static void test_commands(void **state) {
    (void)state;
    if (!getenv("FLARE_BIN")) setenv("FLARE_BIN", "build/flare", 1);
    TU_NEED(access(getenv("FLARE_BIN"), X_OK) == 0, "the flare binary (FLARE_BIN; tests/run.sh sets it)");
    char *out;
    const char *prof = tmp("cli.bin");
    int rc = tu_sh(&out, "\"$FLARE_BIN\" nn profile -m %slenet1.onnx -d fashion-mnist:test -n 200 -b 64 -o %s",
                FIX, prof);
    expect(rc, out, 0, "profiled 58 neurons in 7 layers over 200 inputs");
    fl_err e = {0};
    fl_profile *p;
    assert_int_equal(fl_profile_load(prof, &p, &e), FL_OK);
    assert_int_equal(p->count, 200);
    assert_int_equal(fl_profile_match(p, F.ls, &e), FL_OK);

    /* --json agrees with the library on the same data in the same batches (BLAS may round
     * the last bit of a value differently in another batch size, which can move a KMNC
     * section at its edge) */
    const char *spec = "nc:0.75:deepxplore,kmnc:100,nbc:0.5,tknc:1,tknp:2";
    rc = tu_sh(&out, "\"$FLARE_BIN\" nn cover -q -m %slenet1.onnx -p %s -n 300 -b 100 -c %s --json", FIX, prof, spec);
    if (rc != 0) fail_msg("nn cover: %s", out);
    cJSON *j = cJSON_Parse(out);
    free(out);
    assert_non_null(j);
    fl_dataset *d;
    assert_int_equal(fl_dataset_load("fashion-mnist:test", NULL, 300, &d, &e), FL_OK);
    fl_cover_ctx ctx = {.m = F.m, .ls = F.ls, .profile = p};
    fl_coverset *s;
    assert_int_equal(fl_coverset_new(&ctx, spec, &s, &e), FL_OK);
    assert_int_equal(fl_coverset_run(s, F.m, d, 100, NULL, NULL, &e), FL_OK);
    cJSON *crit = cJSON_GetObjectItem(j, "criteria");
    assert_int_equal(cJSON_GetArraySize(crit), s->n);
    for (int k = 0; k < s->n; k++) {
        cJSON *c = cJSON_GetArrayItem(crit, k);
        int64_t cov, tot;
        fl_cover_stats(s->c[k], &cov, &tot);
        assert_string_equal(cJSON_GetObjectItem(c, "criterion")->valuestring, s->c[k]->spec);
        assert_int_equal((int64_t)cJSON_GetObjectItem(c, "covered")->valuedouble, cov);
        if (tot) assert_int_equal((int64_t)cJSON_GetObjectItem(c, "total")->valuedouble, tot);
        else assert_true(cJSON_IsNull(cJSON_GetObjectItem(c, "total")));
        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(c, "groups")), s->c[k]->n_groups);
    }
    cJSON_Delete(j);
    fl_coverset_free(s);
    fl_dataset_free(d);
    fl_profile_free(p);

    /* tables */
    rc = tu_sh(&out, "\"$FLARE_BIN\" nn cover -q -m %slenet1.onnx -p %s -n 50 -c tknc,tknp", FIX, prof);
    expect(rc, out, 0, "tknc per layer");
    /* usage errors (2) and runtime failures (1) */
    rc = tu_sh(&out, "\"$FLARE_BIN\" nn cover -m %slenet1.onnx -n 10 -c nc,foo", FIX);
    expect(rc, out, 2, "--criteria: unknown coverage criterion 'foo'");
    rc = tu_sh(&out, "\"$FLARE_BIN\" nn cover -m %slenet1.onnx -n 10 -c kmnc:10", FIX);
    expect(rc, out, 2, "needs a training profile");
    rc = tu_sh(&out, "\"$FLARE_BIN\" nn cover -m %slenet1.onnx -n 10 -l nosuch", FIX);
    expect(rc, out, 2, "--layers nosuch");
    rc = tu_sh(&out, "\"$FLARE_BIN\" nn cover -m %slenet1.onnx -p %s -n 10 -l conv+dense", FIX, prof);
    expect(rc, out, 1, "profile does not fit the layer set");
    rc = tu_sh(&out, "head -c 100 %s > %s && \"$FLARE_BIN\" nn cover -m %slenet1.onnx -p %s -n 10", prof,
            tmp("cut.bin"), FIX, tmp("cut.bin"));
    expect(rc, out, 1, "truncated or corrupted profile");
    rc = tu_sh(&out, "\"$FLARE_BIN\" nn profile -m %slenet1.onnx -n 10 -o %s -l conv1", FIX, tmp("x.bin"));
    expect(rc, out, 2, "--layers conv1: tests/fixtures/cover/lenet1.onnx has no layer of that name; did you mean /conv1/Conv_output_0?");
}

/* Pad (here the attribute form of opset 10) only frames its input: not a layer of "all". */
static void test_layerset_skips_pad(void **state) {
    (void)state;
    fl_err e = {0};
    fl_model *m = fl_model_new();
    m->opset = 10;
    fl_tensor in = {0};
    int64_t ds[4] = {0, 1, 4, 4}, pads[8] = {0, 0, 1, 1, 0, 0, 1, 1};
    fl_tensor_set_shape(&in, 4, ds);
    int x = fl_model_add_value(m, "x", FL_VAL_INPUT, &in, &e);
    fl_attr a = fl_attr_ints("pads", 8, pads);
    int p = fl_model_add_op(m, "Pad", "pad", 1, &x, 1, &a, &e);
    int r = fl_model_add_op(m, "Relu", "relu", 1, &p, 0, NULL, &e);
    if (p < 0 || r < 0) fail_msg("%s", e.msg);
    assert_int_equal(fl_model_set_io(m, 1, &x, 1, &r, &e), FL_OK);
    assert_int_equal(fl_model_finish(m, &e), FL_OK);
    fl_layerset *ls;
    if (fl_layerset_make(m, "all", &ls, &e)) fail_msg("%s", e.msg);
    assert_int_equal(ls->n, 1);
    assert_string_equal(ls->name[0], "relu_output_0");
    fl_layerset_free(ls);
    fl_model_free(m);
}

/* [N, T, F] token layers: F neurons, each a feature's mean over the T tokens, through
 * fl_layerset_neurons and through the view (a Relu layer derived from its input's pass too);
 * "all" leaves out a bool output and a rank-5 output, and naming the rank-5 one fails. */
static void test_token_layers(void **state) {
    (void)state;
    enum { N = 3, T = 4, NF = 5 };
    fl_err e = {0};
    fl_model *m = fl_model_new();
    fl_tensor in = {0};
    fl_tensor_set_shape(&in, 3, (int64_t[]){0, T, NF});
    int x = fl_model_add_value(m, "x", FL_VAL_INPUT, &in, &e);
    int neg = fl_model_add_op(m, "Neg", "neg", 1, &x, 0, NULL, &e);
    int r = fl_model_add_op(m, "Relu", "relu", 1, &neg, 0, NULL, &e);
    int gt = fl_model_add_op(m, "Greater", "gt", 2, (int[]){r, neg}, 0, NULL, &e);
    int64_t ax[2] = {1, 2};
    fl_attr a = fl_attr_ints("axes", 2, ax);
    m->opset = 11; /* Unsqueeze axes as an attribute */
    int u = fl_model_add_op(m, "Unsqueeze", "up", 1, &r, 1, &a, &e);
    int five = fl_model_add_op(m, "Sigmoid", "five", 1, &u, 0, NULL, &e);
    if (neg < 0 || r < 0 || gt < 0 || u < 0 || five < 0) fail_msg("%s", e.msg);
    assert_int_equal(fl_model_set_io(m, 1, &x, 3, (int[]){r, gt, five}, &e), FL_OK);
    assert_int_equal(fl_model_finish(m, &e), FL_OK);
    fl_layerset *ls;
    if (fl_layerset_make(m, "all", &ls, &e)) fail_msg("%s", e.msg);
    assert_int_equal(ls->n, 2); /* neg and relu: not the bool gt, not the rank-5 five */
    assert_string_equal(ls->name[0], "neg_output_0");
    assert_string_equal(ls->name[1], "relu_output_0");
    assert_int_equal(ls->width[0], NF);
    assert_int_equal(ls->relu_of[1], 0);
    fl_layerset *bad = NULL;
    assert_int_equal(fl_layerset_make(m, "five_output_0", &bad, &e), FL_ERR_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "layer 'five_output_0' has rank 5"));
    fl_rng rng;
    fl_rng_seed(&rng, 4);
    fl_tensor xt = tu_tensor(3, (int64_t[]){N, T, NF}, &rng, -1, 1);
    assert_int_equal(fl_model_forward(m, &xt, &e), FL_OK);
    float v[N * 2 * NF];
    fl_layerset_neurons(ls, m, v);
    fl_cover_view view = {0};
    assert_int_equal(fl_cover_view_fill(&view, ls, m, FL_COVER_NEED_ABSMEAN | FL_COVER_NEED_RANGE, &e), FL_OK);
    for (int b = 0; b < N; b++)
        for (int l = 0; l < 2; l++) {
            float lo = INFINITY, hi = -INFINITY;
            for (int f = 0; f < NF; f++) {
                double sum = 0, asum = 0;
                for (int t = 0; t < T; t++) {
                    double u0 = -xt.data[(b * T + t) * NF + f], u1 = l ? fmax(u0, 0) : u0;
                    sum += u1, asum += fabs(u1);
                    lo = fminf(lo, (float)u1), hi = fmaxf(hi, (float)u1);
                }
                int at = b * 2 * NF + l * NF + f;
                assert_float_equal(v[at], sum / T, 1e-6);
                assert_float_equal(view.b.mean[at], sum / T, 1e-6);
                assert_float_equal(view.b.absmean[at], asum / T, 1e-6);
            }
            assert_true(view.b.lmin[b * 2 + l] == lo && view.b.lmax[b * 2 + l] == hi);
        }
    fl_cover_view_free(&view);
    fl_tensor_free(&xt);
    fl_layerset_free(ls);
    fl_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_token_layers),
        cmocka_unit_test(test_fixture_layers),
        cmocka_unit_test(test_profile_matches_numpy),
        cmocka_unit_test(test_criteria_match_numpy),
        cmocka_unit_test(test_coverset_or),
        cmocka_unit_test(test_copy_clone_reset),
        cmocka_unit_test(test_model_path),
        cmocka_unit_test(test_view_lenet5),
        cmocka_unit_test(test_topk_shared),
        cmocka_unit_test(test_constant_neuron),
        cmocka_unit_test(test_nan),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_profile_file),
        cmocka_unit_test(test_profile_v1),
        cmocka_unit_test(test_commands),
        cmocka_unit_test(test_layerset_skips_pad),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
