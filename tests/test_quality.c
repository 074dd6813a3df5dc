/* IS and FID (src/quality): closed forms, the scipy reference of tests/fixtures/quality
 * (make_quality.py: pytorch-fid's sqrtm formula, the original IS code), the features of a
 * model, the campaign folders as image sets, bad input, and `flare nn quality` (when
 * FLARE_BIN is set). */
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

#include "flare/onnx.h"
#include "flare/quality.h"
#include "flare/train.h"

#define FIX "tests/fixtures/quality/"

static void assert_close(double got, double want, double rel) {
    double tol = rel * (fabs(want) > 1 ? fabs(want) : 1);
    if (!(fabs(got - want) <= tol)) fail_msg("got %.12g, want %.12g (tolerance %.3g)", got, want, tol);
}

/* ---- IS ----------------------------------------------------------------------------------- */
static void test_is_closed_forms(void **state) {
    (void)state;
    fl_err e = {0};
    enum { N = 40, K = 4 };
    float p[N * K];
    double m, s;
    for (int i = 0; i < N * K; i++) p[i] = 1.0f / K; /* uniform: p(y|x) = p(y), KL 0 */
    assert_int_equal(fl_quality_is(p, N, K, 10, &m, &s, &e), FL_OK);
    assert_close(m, 1, 1e-12);
    assert_close(s, 0, 1e-12);
    /* perfectly confident, classes in turn: every split of 4 holds each class once: IS = K */
    memset(p, 0, sizeof p);
    for (int i = 0; i < N; i++) p[i * K + i % K] = 1;
    assert_int_equal(fl_quality_is(p, N, K, 10, &m, &s, &e), FL_OK);
    assert_close(m, K, 1e-12);
    assert_close(s, 0, 1e-12);
    assert_int_equal(fl_quality_is(p, N, K, 1, &m, NULL, &e), FL_OK);
    assert_close(m, K, 1e-12);
    /* confident but all one class: p(y) is that class, IS 1 */
    memset(p, 0, sizeof p);
    for (int i = 0; i < N; i++) p[i * K + 2] = 1;
    assert_int_equal(fl_quality_is(p, N, K, 5, &m, &s, &e), FL_OK);
    assert_close(m, 1, 1e-12);
    /* two halves: classes 0/1 in the first 20, 2/3 in the last 20; with 2 splits each part has
     * IS 2, with 1 split the whole set has IS 4 */
    memset(p, 0, sizeof p);
    for (int i = 0; i < N; i++) p[i * K + (i < N / 2 ? i % 2 : 2 + i % 2)] = 1;
    assert_int_equal(fl_quality_is(p, N, K, 2, &m, &s, &e), FL_OK);
    assert_close(m, 2, 1e-12);
    assert_int_equal(fl_quality_is(p, N, K, 1, &m, &s, &e), FL_OK);
    assert_close(m, 4, 1e-12);
    /* shuffled, both parts hold (nearly) every class: close to 4; the same seed, the same
     * order; the rows are only moved */
    float q[N * K];
    memcpy(q, p, sizeof p);
    assert_int_equal(fl_quality_shuffle_rows(p, N, K, 7, &e), FL_OK);
    assert_int_equal(fl_quality_is(p, N, K, 2, &m, &s, &e), FL_OK);
    assert_true(m > 3.5 && m <= 4 + 1e-12);
    assert_int_equal(fl_quality_shuffle_rows(q, N, K, 7, &e), FL_OK);
    assert_memory_equal(p, q, sizeof p);
    int count[K] = {0};
    for (int i = 0; i < N; i++)
        for (int j = 0; j < K; j++) count[j] += p[i * K + j] == 1;
    for (int j = 0; j < K; j++) assert_int_equal(count[j], N / K);
    assert_int_equal(fl_quality_shuffle_rows(q, N, K, 8, &e), FL_OK);
    assert_memory_not_equal(p, q, sizeof p);
}

/* The numbers of the original code (make_quality.py), with unequal split sizes (203 / 10). */
static cJSON *reference(void) {
    uint8_t *buf;
    size_t len;
    fl_err e = {0};
    assert_int_equal(fl_file_read(FIX "reference.json", &buf, &len, &e), FL_OK);
    cJSON *j = cJSON_ParseWithLength((const char *)buf, len);
    free(buf);
    assert_non_null(j);
    return j;
}

static double ref_num(const cJSON *j, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!cJSON_IsNumber(v)) fail_msg("reference.json: no number %s", key);
    return v->valuedouble;
}

static void test_is_reference(void **state) {
    (void)state;
    fl_err e = {0};
    fl_npy p;
    assert_int_equal(fl_npy_read(FIX "probs.npy", &p, &e), FL_OK);
    assert_int_equal(p.dtype, FL_DT_F32);
    cJSON *ref = reference();
    const int splits[3] = {10, 3, 1};
    for (int i = 0; i < 3; i++) {
        double m, s;
        char key[32];
        assert_int_equal(fl_quality_is(p.data, p.shape[0], (int)p.shape[1], splits[i], &m, &s, &e),
                         FL_OK);
        snprintf(key, sizeof key, "is%d", splits[i]);
        assert_close(m, ref_num(ref, key), 1e-9);
        snprintf(key, sizeof key, "is%d_std", splits[i]);
        assert_close(s, ref_num(ref, key), 1e-9);
    }
    cJSON_Delete(ref);
    fl_npy_free(&p);
}

static void test_is_errors(void **state) {
    (void)state;
    fl_err e = {0};
    float p[6] = {0.5f, 0.5f, 0.2f, 0.8f, 1, 0};
    double m;
    assert_int_equal(fl_quality_is(p, 1, 2, 1, &m, NULL, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "at least 2 images"));
    assert_int_equal(fl_quality_is(p, 3, 2, 4, &m, NULL, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "4 splits"));
    assert_int_equal(fl_quality_is(p, 3, 2, 0, &m, NULL, &e), FL_ERR_ARG);
    float logits[4] = {2.0f, 1.0f, 0.3f, 0.1f}; /* logits, not probabilities */
    assert_int_equal(fl_quality_is(logits, 2, 2, 1, &m, NULL, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "softmax"));
    p[3] = NAN;
    assert_int_equal(fl_quality_is(p, 3, 2, 1, &m, NULL, &e), FL_ERR_NAN);
    assert_non_null(strstr(e.msg, "image 1"));
    p[3] = 0.8f;
    p[2] = -0.2f;
    p[3] = 1.2f;
    assert_int_equal(fl_quality_is(p, 3, 2, 1, &m, NULL, &e), FL_ERR_NAN);
}

/* ---- moments and FID ---------------------------------------------------------------------- */
static void test_moments(void **state) {
    (void)state;
    fl_err e = {0};
    const float x[6] = {1, 2, 3, 6, 5, 4};
    fl_moments m;
    assert_int_equal(fl_quality_moments(x, 3, 2, &m, &e), FL_OK);
    assert_int_equal(m.n, 3);
    assert_int_equal(m.d, 2);
    assert_close(m.mu[0], 3, 1e-15);
    assert_close(m.mu[1], 4, 1e-15);
    /* deviations (-2,-2), (0,2), (2,0): sums 8, 8, 4 over n - 1 = 2 */
    assert_close(m.cov[0], 4, 1e-15);
    assert_close(m.cov[1], 2, 1e-15);
    assert_close(m.cov[2], 2, 1e-15);
    assert_close(m.cov[3], 4, 1e-15);
    fl_moments_free(&m);
    fl_moments_free(&m); /* twice: a no-op */
    assert_int_equal(fl_quality_moments(x, 1, 2, &m, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "at least 2"));
    const float bad[6] = {1, 2, 3, 6, 5, INFINITY};
    assert_int_equal(fl_quality_moments(bad, 3, 2, &m, &e), FL_ERR_NAN);
    assert_non_null(strstr(e.msg, "vector 2"));
    assert_null(m.mu);
}

/* Moments given directly: d = 2 or more, mu, cov row-major (copied). */
static fl_moments moments(int d, const double *mu, const double *cov) {
    fl_moments m = {.n = 100, .d = d};
    m.mu = malloc(sizeof(double) * (size_t)d);
    m.cov = malloc(sizeof(double) * (size_t)d * (size_t)d);
    assert_non_null(m.mu);
    assert_non_null(m.cov);
    memcpy(m.mu, mu, sizeof(double) * (size_t)d);
    memcpy(m.cov, cov, sizeof(double) * (size_t)d * (size_t)d);
    return m;
}

/* Two Gaussians in 2-d with covariances that do not commute: for a 2 x 2 matrix M with
 * non-negative eigenvalues, Tr(M^(1/2)) = sqrt(tr M + 2 sqrt(det M)), and det(S_a S_b) =
 * det S_a det S_b. */
static void test_fid_closed_form_2d(void **state) {
    (void)state;
    fl_err e = {0};
    const double sa[4] = {2, 0.5, 0.5, 1}, sb[4] = {1, -0.3, -0.3, 3};
    const double mua[2] = {0.5, -1}, mub[2] = {2, 1};
    fl_moments a = moments(2, mua, sa), b = moments(2, mub, sb);
    double tr_ab = sa[0] * sb[0] + sa[1] * sb[2] + sa[2] * sb[1] + sa[3] * sb[3];
    double det = (sa[0] * sa[3] - sa[1] * sa[2]) * (sb[0] * sb[3] - sb[1] * sb[2]);
    double want = 1.5 * 1.5 + 2 * 2 + (sa[0] + sa[3]) + (sb[0] + sb[3]) -
                  2 * sqrt(tr_ab + 2 * sqrt(det));
    double f;
    assert_int_equal(fl_quality_fid(&a, &b, &f, &e), FL_OK);
    assert_close(f, want, 1e-12);
    assert_int_equal(fl_quality_fid(&b, &a, &f, &e), FL_OK); /* symmetric */
    assert_close(f, want, 1e-12);
    fl_moments_free(&a);
    fl_moments_free(&b);
}

/* Covariances Q diag(la) Q^T and Q diag(lb) Q^T with one rotation Q commute:
 * FID = |mu_a - mu_b|^2 + sum (sqrt(la) - sqrt(lb))^2. A zero eigenvalue (a singular
 * covariance, as for fewer images than feature values) is included. */
static void test_fid_closed_form_rotated(void **state) {
    (void)state;
    fl_err e = {0};
    enum { D = 6 };
    const double la[D] = {4, 1, 0.25, 9, 0, 2}, lb[D] = {1, 1, 1, 4, 0.5, 0};
    double v[D] = {1, -2, 0.5, 3, 1, -1}, vv = 0, q[D * D], ca[D * D], cb[D * D];
    for (int i = 0; i < D; i++) vv += v[i] * v[i];
    for (int i = 0; i < D; i++) /* Householder reflection: orthogonal, symmetric */
        for (int j = 0; j < D; j++) q[i * D + j] = (i == j) - 2 * v[i] * v[j] / vv;
    for (int i = 0; i < D; i++)
        for (int j = 0; j < D; j++) {
            ca[i * D + j] = cb[i * D + j] = 0;
            for (int k = 0; k < D; k++) {
                ca[i * D + j] += q[i * D + k] * la[k] * q[j * D + k];
                cb[i * D + j] += q[i * D + k] * lb[k] * q[j * D + k];
            }
        }
    double mua[D] = {0}, mub[D] = {1, 0, 0, -2, 0, 0.5};
    double want = 1 + 4 + 0.25;
    for (int k = 0; k < D; k++) want += (sqrt(la[k]) - sqrt(lb[k])) * (sqrt(la[k]) - sqrt(lb[k]));
    fl_moments a = moments(D, mua, ca), b = moments(D, mub, cb);
    double f;
    assert_int_equal(fl_quality_fid(&a, &b, &f, &e), FL_OK);
    /* the zero eigenvalues come out of dsyevd as +-1e-16 or so, and sqrt turns that into 1e-8:
     * the square root's own conditioning at 0, which scipy's sqrtm shares */
    assert_close(f, want, 1e-7);
    assert_int_equal(fl_quality_fid(&a, &a, &f, &e), FL_OK);
    assert_true(f >= 0 && f < 1e-10);
    fl_moments_free(&a);
    fl_moments_free(&b);
}

static fl_moments fixture_moments(const char *name, fl_npy *keep) {
    fl_err e = {0};
    char path[128];
    snprintf(path, sizeof path, FIX "%s.npy", name);
    fl_npy x;
    assert_int_equal(fl_npy_read(path, &x, &e), FL_OK);
    assert_int_equal(x.dtype, FL_DT_F32);
    fl_moments m;
    assert_int_equal(fl_quality_moments(x.data, x.shape[0], (int)x.shape[1], &m, &e), FL_OK);
    if (keep) *keep = x;
    else fl_npy_free(&x);
    return m;
}

static void test_fid_reference(void **state) {
    (void)state;
    fl_err e = {0};
    fl_npy xa;
    fl_moments a = fixture_moments("a", &xa), b = fixture_moments("b", NULL),
               c = fixture_moments("c", NULL);
    cJSON *ref = reference();
    double f;
    assert_int_equal(fl_quality_fid(&a, &b, &f, &e), FL_OK);
    assert_close(f, ref_num(ref, "fid_ab"), 1e-8);
    assert_int_equal(fl_quality_fid(&b, &a, &f, &e), FL_OK);
    assert_close(f, ref_num(ref, "fid_ba"), 1e-8);
    assert_int_equal(fl_quality_fid(&a, &c, &f, &e), FL_OK);
    assert_close(f, ref_num(ref, "fid_ac"), 1e-8);
    /* identical sets: 0 */
    assert_int_equal(fl_quality_fid(&a, &a, &f, &e), FL_OK);
    assert_true(fabs(f) < 1e-6);
    /* a shifted copy: the same covariance, FID = |shift|^2 */
    int64_t n = xa.shape[0];
    float *y = malloc(sizeof(float) * (size_t)xa.count);
    assert_non_null(y);
    double want = 0;
    for (int j = 0; j < 12; j++) want += (0.25 * j - 1) * (0.25 * j - 1);
    for (int64_t i = 0; i < n; i++)
        for (int j = 0; j < 12; j++) y[i * 12 + j] = ((float *)xa.data)[i * 12 + j] + 0.25f * j - 1;
    fl_moments s;
    assert_int_equal(fl_quality_moments(y, n, 12, &s, &e), FL_OK);
    assert_int_equal(fl_quality_fid(&a, &s, &f, &e), FL_OK);
    assert_close(f, want, 1e-5); /* float32 features: the shift is rounded per value */
    /* dimensions that differ */
    fl_moments d2;
    assert_int_equal(fl_quality_moments(y, n, 6, &d2, &e), FL_OK);
    assert_int_equal(fl_quality_fid(&a, &d2, &f, &e), FL_ERR_SHAPE);
    assert_non_null(strstr(e.msg, "12 and of 6"));
    free(y);
    fl_moments_free(&s);
    fl_moments_free(&d2);
    fl_moments_free(&a);
    fl_moments_free(&b);
    fl_moments_free(&c);
    fl_npy_free(&xa);
    cJSON_Delete(ref);
}

/* ---- features ----------------------------------------------------------------------------- */
static fl_dataset *noise_set(int64_t n, uint64_t seed) {
    fl_err e = {0};
    fl_dataset *d;
    assert_int_equal(fl_dataset_new(n, 1, 28, 28, &d, &e), FL_OK);
    fl_rng r;
    fl_rng_seed(&r, seed);
    for (int64_t i = 0; i < n * 28 * 28; i++) d->x[i] = fl_rng_uniform(&r);
    return d;
}

static void test_features(void **state) {
    (void)state;
    fl_err e = {0};
    fl_model *m;
    assert_int_equal(fl_zoo_build("lenet5", 1, 28, 28, 10, 3, &m, &e), FL_OK);
    const char *layer;
    assert_int_equal(fl_quality_default_layer(m, &layer, &e), FL_OK);
    /* the input of the last Gemm, the 84 values after fc2's ReLU */
    int last = -1;
    for (int i = 0; i < m->n_nodes; i++)
        if (!strcmp(m->nodes[i].op->name, "Gemm")) last = i;
    assert_true(last >= 0);
    assert_string_equal(layer, m->values[m->nodes[last].in[0]].name);
    fl_dataset *d = noise_set(37, 5);
    fl_quality_feats f;
    assert_int_equal(fl_quality_features(m, NULL, d, 16, &f, &e), FL_OK); /* 16+16+5 */
    assert_int_equal(f.n, 37);
    assert_int_equal(f.d, 84);
    assert_int_equal(f.k, 10);
    assert_string_equal(f.layer, layer);
    /* the same values as one forward pass over all 37 */
    fl_tensor x = fl_dataset_view(d, 0, d->n);
    assert_int_equal(fl_model_forward(m, &x, &e), FL_OK);
    const fl_tensor *h = fl_model_tensor(m, layer), *z = fl_model_output(m, 0);
    for (int64_t i = 0; i < 37 * 84; i++) assert_close(f.x[i], h->data[i], 1e-5);
    for (int64_t i = 0; i < 37; i++) {
        double s = 0, mx = z->data[i * 10];
        for (int j = 1; j < 10; j++) mx = fmax(mx, z->data[i * 10 + j]);
        for (int j = 0; j < 10; j++) s += exp(z->data[i * 10 + j] - mx);
        for (int j = 0; j < 10; j++)
            assert_close(f.prob[i * 10 + j], exp(z->data[i * 10 + j] - mx) / s, 1e-5);
    }
    fl_quality_feats_free(&f);
    /* a named conv layer: flattened */
    const char *conv = m->values[m->nodes[0].out[0]].name;
    assert_int_equal(fl_quality_features(m, conv, d, 256, &f, &e), FL_OK);
    assert_int_equal(f.d, 6 * 24 * 24);
    fl_quality_feats_free(&f);
    assert_int_equal(fl_quality_features(m, "no/such/layer", d, 16, &f, &e), FL_ERR_NOTFOUND);
    assert_non_null(strstr(e.msg, "no/such/layer"));
    fl_dataset_free(d);
    fl_model_free(m);
}

/* ---- image sets ------------------------------------------------------------------------------ */
static void put_npy(const char *dir, const char *name, int ndim, const int64_t *shape, float v) {
    fl_err e = {0};
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    float x[2 * 28 * 28];
    for (int i = 0; i < 2 * 28 * 28; i++) x[i] = v;
    assert_int_equal(fl_npy_write(path, FL_DT_F32, ndim, shape, x, &e), FL_OK);
}

static void put_file(const char *dir, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("not an image\n", f);
    fclose(f);
}

/* A campaign folder as `flare nn fuzz` writes it: failures/<true>-<pred>/ and queue/. */
static void make_campaign(const char *dir) {
    char p[256];
    const int64_t s4[4] = {1, 1, 28, 28};
    assert_int_equal(tu_sh(NULL, "rm -rf %s && mkdir -p %s/failures/3-5 %s/failures/1-2 %s/queue",
                           dir, dir, dir, dir), 0);
    snprintf(p, sizeof p, "%s/failures/3-5", dir);
    put_npy(p, "root:000004,first.npy", 4, s4, 0.75f);
    put_npy(p, "root:000004,min.npy", 4, s4, 0.5f);
    put_file(p, "root:000004,first.json");
    put_file(p, "root:000004,first.pair.png");
    snprintf(p, sizeof p, "%s/failures/1-2", dir);
    put_npy(p, "root:000001,first.npy", 3, s4 + 1, 0.25f); /* [c,h,w] too */
    snprintf(p, sizeof p, "%s/queue", dir);
    put_npy(p, "id:000000,orig:0.npy", 4, s4, 0.1f);
    put_npy(p, "id:000001,src:000000,op:rotate.npy", 4, s4, 0.2f);
    put_file(p, "id:000001,src:000000,op:rotate.json");
    put_file(dir, "fuzzer_stats");
}

static void test_images_load(void **state) {
    (void)state;
    fl_err e = {0};
    char dir[64], p[128];
    snprintf(dir, sizeof dir, "/tmp/flare_test_quality_%d", (int)getpid());
    make_campaign(dir);
    fl_dataset *d;
    snprintf(p, sizeof p, "%s/failures", dir);
    assert_int_equal(fl_quality_images_load(p, NULL, 0, &d, &e), FL_OK);
    assert_int_equal(d->n, 3);
    assert_int_equal(d->c, 1);
    assert_int_equal(d->h, 28);
    assert_false(d->has_labels);
    /* name order: 1-2/root:000001,first; 3-5/root:000004,first; 3-5/root:000004,min */
    assert_true(d->x[0] == 0.25f && d->x[784] == 0.75f && d->x[2 * 784 + 783] == 0.5f);
    fl_dataset_free(d);
    assert_int_equal(fl_quality_images_load(p, NULL, 2, &d, &e), FL_OK); /* limit */
    assert_int_equal(d->n, 2);
    fl_dataset_free(d);
    snprintf(p, sizeof p, "%s/queue", dir);
    assert_int_equal(fl_quality_images_load(p, NULL, 0, &d, &e), FL_OK);
    assert_int_equal(d->n, 2);
    assert_true(d->x[0] == 0.1f && d->x[784] == 0.2f);
    fl_dataset_free(d);
    /* the campaign folder itself: which of its sets is meant? */
    assert_int_equal(fl_quality_images_load(dir, NULL, 0, &d, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "/failures"));
    assert_non_null(strstr(e.msg, "/queue"));
    assert_null(d);
    /* an image of another size, named */
    snprintf(p, sizeof p, "%s/queue", dir);
    put_npy(p, "id:000002,src:000000,op:scale.npy", 4, (int64_t[]){1, 2, 28, 28}, 0.3f);
    assert_int_equal(fl_quality_images_load(p, NULL, 0, &d, &e), FL_ERR_SHAPE);
    assert_non_null(strstr(e.msg, "id:000002"));
    put_npy(p, "id:000002,src:000000,op:scale.npy", 2, (int64_t[]){28, 28}, 0.3f);
    assert_int_equal(fl_quality_images_load(p, NULL, 0, &d, &e), FL_ERR_SHAPE);
    assert_non_null(strstr(e.msg, "[1,c,h,w]"));
    put_npy(p, "id:000002,src:000000,op:scale.npy", 4, (int64_t[]){1, 1, 28, 28}, NAN);
    assert_int_equal(fl_quality_images_load(p, NULL, 0, &d, &e), FL_ERR_NAN);
    assert_non_null(strstr(e.msg, "id:000002"));
    put_file(p, "id:000003,src:000000,op:blur.npy"); /* not an NPY file */
    assert_int_equal(fl_quality_images_load(p, NULL, 0, &d, &e), FL_ERR_NAN); /* first error */
    snprintf(p, sizeof p, "%s/queue/id:000002,src:000000,op:scale.npy", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/queue", dir);
    assert_int_not_equal(fl_quality_images_load(p, NULL, 0, &d, &e), FL_OK);
    assert_non_null(strstr(e.msg, "id:000003"));
    /* an empty failures folder: neither kind of image */
    snprintf(p, sizeof p, "%s/failures/1-2", dir);
    assert_int_equal(tu_sh(NULL, "rm -f %s/*", p), 0);
    snprintf(p, sizeof p, "%s/failures/3-5", dir);
    assert_int_equal(tu_sh(NULL, "rm -f %s/*", p), 0);
    snprintf(p, sizeof p, "%s/failures", dir);
    assert_int_not_equal(fl_quality_images_load(p, NULL, 0, &d, &e), FL_OK);
    assert_non_null(strstr(e.msg, "no PNG"));
    assert_non_null(strstr(e.msg, ".npy"));
    /* a missing path goes to the dataset specs, whose error names it */
    snprintf(p, sizeof p, "%s/none", dir);
    assert_int_not_equal(fl_quality_images_load(p, NULL, 0, &d, &e), FL_OK);
    assert_non_null(strstr(e.msg, "none"));
    assert_int_equal(tu_sh(NULL, "rm -rf %s", dir), 0);
}

/* ---- the command ----------------------------------------------------------------------------- */
static const cJSON *fake_entry(const cJSON *j, int i) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "fake");
    assert_true(cJSON_IsArray(a));
    const cJSON *x = cJSON_GetArrayItem(a, i);
    assert_non_null(x);
    return x;
}

static void test_cli(void **state) {
    (void)state;
    const char *bin = getenv("FLARE_BIN");
    TU_NEED(bin && access(bin, X_OK) == 0, "the flare binary (FLARE_BIN; tests/run.sh sets it)");
    fl_err e = {0};
    char dir[64], model[128], real[128], other[128], out[128];
    snprintf(dir, sizeof dir, "/tmp/flare_test_qcli_%d", (int)getpid());
    make_campaign(dir);
    fl_model *m;
    assert_int_equal(fl_zoo_build("lenet5", 1, 28, 28, 10, 3, &m, &e), FL_OK);
    snprintf(model, sizeof model, "%s/m.onnx", dir);
    assert_int_equal(fl_onnx_save(m, model, &e), FL_OK);
    fl_dataset *r = noise_set(64, 1), *o = noise_set(48, 2);
    for (int64_t i = 0; i < o->n * 784; i++) o->x[i] *= 0.5f; /* darker: far from r */
    snprintf(real, sizeof real, "%s/real.npy", dir);
    snprintf(other, sizeof other, "%s/other.npy", dir);
    assert_int_equal(fl_npy_write(real, FL_DT_F32, 4, (int64_t[]){64, 1, 28, 28}, r->x, &e), FL_OK);
    assert_int_equal(fl_npy_write(other, FL_DT_F32, 4, (int64_t[]){48, 1, 28, 28}, o->x, &e), FL_OK);
    snprintf(out, sizeof out, "%s/q.json", dir);
    char *txt = NULL;
    assert_int_equal(tu_sh(&txt, "%s nn quality --real %s --fake %s --fake %s/failures --fake %s "
                           "--features %s --splits 4 --in-order -b 10 --json -o %s -q",
                           bin, real, real, dir, other, model, out), 0);
    cJSON *j = cJSON_Parse(strchr(txt, '{'));
    assert_non_null(j);
    /* what the library says for the same sets */
    fl_quality_feats fr, fo;
    assert_int_equal(fl_quality_features(m, NULL, r, 256, &fr, &e), FL_OK);
    assert_int_equal(fl_quality_features(m, NULL, o, 256, &fo, &e), FL_OK);
    double is_r, sd_r, fid;
    assert_int_equal(fl_quality_is(fr.prob, fr.n, fr.k, 4, &is_r, &sd_r, &e), FL_OK);
    fl_moments mr, mo;
    assert_int_equal(fl_quality_moments(fr.x, fr.n, fr.d, &mr, &e), FL_OK);
    assert_int_equal(fl_quality_moments(fo.x, fo.n, fo.d, &mo, &e), FL_OK);
    assert_int_equal(fl_quality_fid(&mr, &mo, &fid, &e), FL_OK);
    assert_true(fid > 0);
    const cJSON *jr = cJSON_GetObjectItemCaseSensitive(j, "real");
    assert_close(tu_json_num(txt, "dim"), 84, 0);
    assert_close(cJSON_GetObjectItemCaseSensitive(jr, "n")->valuedouble, 64, 0);
    assert_close(cJSON_GetObjectItemCaseSensitive(jr, "is")->valuedouble, is_r, 1e-9);
    assert_close(cJSON_GetObjectItemCaseSensitive(jr, "is_std")->valuedouble, sd_r, 1e-9);
    const cJSON *same = fake_entry(j, 0), *fails = fake_entry(j, 1), *far = fake_entry(j, 2);
    assert_true(cJSON_GetObjectItemCaseSensitive(same, "fid")->valuedouble < 1e-6);
    assert_close(cJSON_GetObjectItemCaseSensitive(same, "is")->valuedouble, is_r, 1e-9);
    assert_close(cJSON_GetObjectItemCaseSensitive(fails, "n")->valuedouble, 3, 0);
    assert_close(cJSON_GetObjectItemCaseSensitive(fails, "is_splits")->valuedouble, 1, 0);
    assert_close(cJSON_GetObjectItemCaseSensitive(far, "fid")->valuedouble, fid, 1e-6);
    cJSON_Delete(j);
    /* -o holds the same object */
    uint8_t *buf;
    size_t len;
    assert_int_equal(fl_file_read(out, &buf, &len, &e), FL_OK);
    char *file = strndup((const char *)buf, len);
    free(buf);
    assert_close(tu_json_num(file, "real.is"), is_r, 1e-9);
    free(file);
    free(txt);
    /* shuffled before splitting (the default): another IS of the real set, the same FID */
    assert_int_equal(tu_sh(&txt, "%s nn quality --real %s --fake %s --features %s --splits 4 "
                           "-s 3 --json -q", bin, real, other, model), 0);
    fl_quality_feats fs;
    assert_int_equal(fl_quality_features(m, NULL, r, 256, &fs, &e), FL_OK);
    assert_int_equal(fl_quality_shuffle_rows(fs.prob, fs.n, fs.k, 3, &e), FL_OK);
    double is_s;
    assert_int_equal(fl_quality_is(fs.prob, fs.n, fs.k, 4, &is_s, NULL, &e), FL_OK);
    assert_true(fabs(is_s - is_r) > 1e-9);
    assert_close(tu_json_num(txt, "real.is"), is_s, 1e-9);
    assert_close(tu_json_num(txt, "seed"), 3, 0);
    j = cJSON_Parse(strchr(txt, '{'));
    assert_close(cJSON_GetObjectItemCaseSensitive(fake_entry(j, 0), "fid")->valuedouble, fid, 1e-6);
    cJSON_Delete(j);
    fl_quality_feats_free(&fs);
    free(txt);
    /* the table */
    assert_int_equal(tu_sh(&txt, "%s nn quality --real %s --fake %s --features %s -q", bin, real,
                           other, model), 0);
    assert_non_null(strstr(txt, "FID"));
    assert_non_null(strstr(txt, other));
    free(txt);
    /* errors: no --fake (usage), the campaign folder, a single image, a missing model */
    assert_int_equal(tu_sh(NULL, "%s nn quality --real %s --features %s", bin, real, model), 2);
    assert_int_equal(tu_sh(&txt, "%s nn quality --real %s --fake %s --features %s", bin, real, dir,
                           model), 1);
    assert_non_null(strstr(txt, "campaign folder"));
    free(txt);
    assert_int_equal(tu_sh(&txt, "%s nn quality --real %s --fake %s --features %s -n 1", bin, real,
                           other, model), 1);
    assert_non_null(strstr(txt, "at least 2 images"));
    free(txt);
    /* images the feature model cannot take: the message names the set */
    char small[128];
    snprintf(small, sizeof small, "%s/small.npy", dir);
    assert_int_equal(fl_npy_write(small, FL_DT_F32, 4, (int64_t[]){4, 1, 8, 8}, r->x, &e), FL_OK);
    assert_int_equal(tu_sh(&txt, "%s nn quality --real %s --fake %s --features %s -q", bin, real,
                           small, model), 1);
    assert_non_null(strstr(txt, small));
    free(txt);
    assert_int_equal(tu_sh(NULL, "%s nn quality --real %s --fake %s --features %s/none.onnx", bin,
                           real, other, dir), 1);
    assert_int_equal(tu_sh(&txt, "%s nn quality --real %s --fake %s --features %s -l nope", bin,
                           real, other, model), 2); /* an unknown --layers name: usage */
    assert_non_null(strstr(txt, "nope"));
    free(txt);
    fl_moments_free(&mr);
    fl_moments_free(&mo);
    fl_quality_feats_free(&fr);
    fl_quality_feats_free(&fo);
    fl_dataset_free(r);
    fl_dataset_free(o);
    fl_model_free(m);
    assert_int_equal(tu_sh(NULL, "rm -rf %s", dir), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_is_closed_forms),     cmocka_unit_test(test_is_reference),
        cmocka_unit_test(test_is_errors),           cmocka_unit_test(test_moments),
        cmocka_unit_test(test_fid_closed_form_2d),  cmocka_unit_test(test_fid_closed_form_rotated),
        cmocka_unit_test(test_fid_reference),       cmocka_unit_test(test_features),
        cmocka_unit_test(test_images_load),         cmocka_unit_test(test_cli),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
