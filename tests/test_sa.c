/* Surprise adequacy and surprise coverage.
 *
 * Reference values: tests/fixtures/sa (make_sa.py: scipy.stats.gaussian_kde and sadl's DSA
 * and get_sc in numpy). LSA must agree within 1e-6 relative (the stored reference is float32),
 * and within 1e-6 of a brute-force double KDE on traces built to defeat float kernels; DSA
 * within 1e-5 relative. A
 * brute-force double-precision DSA in this file checks the blocked GEMM search on sets large
 * enough to span many blocks, with near-duplicates that defeat plain float arithmetic.
 * Edge cases: constant neurons, absent classes, d > n, collinear neurons, NaN, empty input. */
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#include "flare/data.h"
#include "flare/sa.h"
#include "flare/train.h"
#include "sa/sa_int.h" /* fl__sa_lsa_all_exact */

#define FIX "tests/fixtures/sa/"

typedef struct fixture {
    fl_npy tr, trp, te, tep;
    int32_t *train_pred, *test_pred;
    int64_t n, m, d;
} fixture;

static int32_t *to_i32(const fl_npy *a) {
    int32_t *p = malloc(sizeof(int32_t) * (size_t)a->count);
    assert_non_null(p);
    for (int64_t i = 0; i < a->count; i++)
        p[i] = a->dtype == FL_DT_I64 ? (int32_t)((int64_t *)a->data)[i] : ((int32_t *)a->data)[i];
    return p;
}

static void load_fixture(fixture *f) {
    fl_err e = {0};
    memset(f, 0, sizeof *f);
    assert_int_equal(fl_npy_read(FIX "train_ats.npy", &f->tr, &e), FL_OK);
    assert_int_equal(fl_npy_read(FIX "train_pred.npy", &f->trp, &e), FL_OK);
    assert_int_equal(fl_npy_read(FIX "test_ats.npy", &f->te, &e), FL_OK);
    assert_int_equal(fl_npy_read(FIX "test_pred.npy", &f->tep, &e), FL_OK);
    assert_int_equal(f->tr.dtype, FL_DT_F32);
    assert_int_equal(f->trp.dtype, FL_DT_I64); /* the fixture has both integer widths */
    assert_int_equal(f->tep.dtype, FL_DT_I32);
    f->n = f->tr.shape[0];
    f->d = f->tr.shape[1];
    f->m = f->te.shape[0];
    f->train_pred = to_i32(&f->trp);
    f->test_pred = to_i32(&f->tep);
}

static void free_fixture(fixture *f) {
    fl_npy_free(&f->tr);
    fl_npy_free(&f->trp);
    fl_npy_free(&f->te);
    fl_npy_free(&f->tep);
    free(f->train_pred);
    free(f->test_pred);
}

static float *load_ref(const char *name, int64_t n) {
    fl_npy a;
    fl_err e = {0};
    char path[256];
    snprintf(path, sizeof path, FIX "%s.npy", name);
    assert_int_equal(fl_npy_read(path, &a, &e), FL_OK);
    assert_int_equal(a.count, n);
    float *r = malloc(sizeof(float) * (size_t)n);
    memcpy(r, a.data, sizeof(float) * (size_t)n);
    fl_npy_free(&a);
    return r;
}

/* Build, score, compare against the reference within rel (relative to max(|ref|, floor)). */
static double check_against(const fixture *f, const fl_sa_opts *o, const char *ref_name,
                            double rel, double floor_) {
    fl_err e = {0};
    fl_sa *sa;
    if (fl_sa_new(f->tr.data, f->train_pred, f->n, f->d, o, &sa, &e) != FL_OK)
        fail_msg("fl_sa_new: %s", e.msg);
    double *out = malloc(sizeof(double) * (size_t)f->m);
    assert_int_equal(fl_sa_score(sa, f->te.data, f->test_pred, f->m, out, &e), FL_OK);
    assert_int_equal(fl_sa_absent(sa), 0);
    float *ref = load_ref(ref_name, f->m);
    double worst = 0;
    for (int64_t i = 0; i < f->m; i++) {
        double err = fabs(out[i] - ref[i]) / fmax(fabs(ref[i]), floor_);
        if (err > worst) worst = err;
        if (err > rel)
            fail_msg("%s[%lld]: flare %.9g, reference %.9g (rel. error %.3g > %.3g)", ref_name,
                     (long long)i, out[i], (double)ref[i], err, rel);
    }
    /* Scoring one input at a time gives the same numbers (no dependence on the batch). */
    for (int64_t i = 0; i < f->m; i += 7) {
        double one;
        assert_int_equal(fl_sa_score(sa, (const float *)f->te.data + i * f->d, f->test_pred + i,
                                     1, &one, &e), FL_OK);
        assert_true(one == out[i]);
    }
    free(ref);
    free(out);
    fl_sa_free(sa);
    return worst;
}

static void test_lsa_matches_scipy(void **state) {
    fixture f;
    load_fixture(&f);
    fl_sa_opts o;
    fl_sa_opts_init(&o, FL_SA_LSA);
    double w = check_against(&f, &o, "lsa", 1e-6, 1e-12); /* the reference is float32 */
    print_message("LSA: worst relative error vs scipy.stats.gaussian_kde %.2e\n", w);
    /* Neurons 3 and 7 have variance < 1e-5 in one class each: dropped everywhere. */
    fl_err e = {0};
    fl_sa *sa;
    assert_int_equal(fl_sa_new(f.tr.data, f.train_pred, f.n, f.d, &o, &sa, &e), FL_OK);
    assert_int_equal(fl_sa_kept(sa), 6);
    assert_int_equal(fl_sa_n_classes(sa), 3);
    assert_int_equal(fl_sa_class_count(sa, 0) + fl_sa_class_count(sa, 1) +
                     fl_sa_class_count(sa, 2), f.n);
    fl_sa_free(sa);
    /* The same neurons chosen explicitly, in a shuffled order: a Gaussian KDE is invariant
     * under permuting coordinates, so the result is the reference again. */
    int64_t keep[6] = {6, 0, 5, 2, 4, 1};
    o.neurons = keep;
    o.n_neurons = 6;
    o.var_threshold = 0;
    check_against(&f, &o, "lsa", 1e-6, 1e-12);
    free_fixture(&f);
}

static void test_dsa_matches_sadl(void **state) {
    fixture f;
    load_fixture(&f);
    fl_sa_opts o;
    fl_sa_opts_init(&o, FL_SA_DSA);
    double w = check_against(&f, &o, "dsa", 1e-5, 1e-7);
    o.dsa_precompute = 1;
    check_against(&f, &o, "dsa", 1e-5, 1e-7);
    o.dsa_precompute = 0;
    o.dsa_variant = FL_DSA_NLC;
    double w2 = check_against(&f, &o, "dsa_nlc", 1e-5, 1e-7);
    print_message("DSA: worst relative error vs sadl %.2e (kim), %.2e (nlc)\n", w, w2);
    /* Exact copies of training traces (test inputs 45, 46) have DSA exactly 0. */
    fl_err e = {0};
    fl_sa *sa;
    double out[2];
    o.dsa_variant = FL_DSA_KIM;
    assert_int_equal(fl_sa_new(f.tr.data, f.train_pred, f.n, f.d, &o, &sa, &e), FL_OK);
    assert_int_equal(fl_sa_kept(sa), f.d); /* DSA keeps constant neurons, as sadl does */
    assert_int_equal(fl_sa_score(sa, (float *)f.te.data + 45 * f.d, f.test_pred + 45, 2, out, &e),
                     FL_OK);
    assert_true(out[0] == 0.0 && out[1] == 0.0);
    fl_sa_free(sa);
    free_fixture(&f);
}

static void test_mdsa(void **state) {
    fixture f;
    load_fixture(&f);
    fl_sa_opts o;
    fl_sa_opts_init(&o, FL_SA_MDSA);
    double w = check_against(&f, &o, "mdsa", 1e-5, 1e-9);
    print_message("MDSA: worst relative error vs numpy %.2e\n", w);
    /* A ridge changes the result (and only makes it smaller). */
    fl_err e = {0};
    fl_sa *sa;
    o.mdsa_ridge = 1.0;
    assert_int_equal(fl_sa_new(f.tr.data, f.train_pred, f.n, f.d, &o, &sa, &e), FL_OK);
    double *out = malloc(sizeof(double) * (size_t)f.m);
    assert_int_equal(fl_sa_score(sa, f.te.data, f.test_pred, f.m, out, &e), FL_OK);
    float *ref = load_ref("mdsa", f.m);
    for (int64_t i = 0; i < f.m; i++) assert_true(out[i] < ref[i]);
    free(ref);
    free(out);
    fl_sa_free(sa);
    free_fixture(&f);
}

static void test_leave_one_out(void **state) {
    fixture f;
    load_fixture(&f);
    float *rl = load_ref("train_loo_lsa", 20), *rd = load_ref("train_loo_dsa", 20);
    int64_t idx[20];
    for (int i = 0; i < 20; i++) idx[i] = (7 * i) % 20; /* any order */
    double out[20];
    for (int kind = 0; kind < 2; kind++) {
        fl_sa_opts o;
        fl_sa_opts_init(&o, kind ? FL_SA_DSA : FL_SA_LSA);
        fl_sa *sa;
        fl_err e = {0};
        assert_int_equal(fl_sa_new(f.tr.data, f.train_pred, f.n, f.d, &o, &sa, &e), FL_OK);
        assert_int_equal(fl_sa_score_train(sa, idx, 20, out, &e), FL_OK);
        for (int i = 0; i < 20; i++) {
            double ref = kind ? rd[idx[i]] : rl[idx[i]];
            if (fabs(out[i] - ref) > (kind ? 1e-5 : 1e-3) * fabs(ref))
                fail_msg("%s leave-one-out of training trace %lld: %.9g vs %.9g",
                         kind ? "DSA" : "LSA", (long long)idx[i], out[i], ref);
        }
        int64_t bad = f.n;
        assert_int_equal(fl_sa_score_train(sa, &bad, 1, out, &e), FL_ERR_ARG);
        assert_int_equal(fl_sa_score_train(sa, NULL, 0, out, &e), FL_OK);
        fl_sa_free(sa);
    }
    free(rl);
    free(rd);
    free_fixture(&f);
}

/* ---- surprise coverage ---------------------------------------------------------------------- */
static double sc_of(const float *v, int64_t n, int k, double lo, double hi, int bounds_from_data) {
    double *x = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) x[i] = v[i];
    if (bounds_from_data) assert_true(fl_sc_bounds(x, n, &lo, &hi));
    fl_sc *sc;
    fl_err e = {0};
    assert_int_equal(fl_sc_new(k, lo, hi, FL_SC_SADL, &sc, &e), FL_OK);
    /* Incrementally: the new-bucket counts add up to the coverage. */
    int64_t added = 0;
    for (int64_t i = 0; i < n; i++) added += fl_sc_add(sc, x + i, 1);
    assert_int_equal(added, sc->covered);
    assert_int_equal(fl_sc_add(sc, x, n), 0); /* the same values again add nothing */
    double cov = fl_sc_coverage(sc);
    fl_sc_free(sc);
    free(x);
    return cov;
}

static void test_sc_matches_sadl(void **state) {
    float *lsa = load_ref("lsa", 50), *dsa = load_ref("dsa", 50), *ref = load_ref("sc", 4);
    assert_float_equal(sc_of(lsa, 50, 20, 0, 0, 1), ref[0], 1e-6);
    assert_float_equal(sc_of(dsa, 50, 20, 0, 0, 1), ref[1], 1e-6);
    assert_float_equal(sc_of(lsa, 50, 10, 0, 2000, 0), ref[2], 1e-6);
    assert_float_equal(sc_of(dsa, 50, 50, 0.5, 1.0, 0), ref[3], 1e-6);
    free(lsa);
    free(dsa);
    free(ref);

    fl_sc *sc;
    fl_err e = {0};
    /* sadl mode: below lower -> bucket 0, at/above upper -> bucket k, NaN ignored. */
    assert_int_equal(fl_sc_new(4, 0, 3, FL_SC_SADL, &sc, &e), FL_OK);
    assert_int_equal(fl_sc_bucket(sc, -1), 0);
    assert_int_equal(fl_sc_bucket(sc, 0), 1);
    assert_int_equal(fl_sc_bucket(sc, 0.999), 1);
    assert_int_equal(fl_sc_bucket(sc, 1), 2);
    assert_int_equal(fl_sc_bucket(sc, 2.5), 3);
    assert_int_equal(fl_sc_bucket(sc, 3), 4);
    assert_int_equal(fl_sc_bucket(sc, INFINITY), 4);
    assert_int_equal(fl_sc_bucket(sc, NAN), -1);
    double v[3] = {NAN, 0.5, 0.6};
    assert_int_equal(fl_sc_add(sc, v, 3), 1);
    assert_float_equal(fl_sc_coverage(sc), 0.25, 1e-12);
    fl_sc_reset(sc);
    assert_int_equal(sc->covered, 0);
    fl_sc_free(sc);
    /* equal mode: k buckets, upper in the last, outside not counted. */
    assert_int_equal(fl_sc_new(4, 0, 4, FL_SC_EQUAL, &sc, &e), FL_OK);
    assert_int_equal(fl_sc_bucket(sc, -0.1), -1);
    assert_int_equal(fl_sc_bucket(sc, 0), 0);
    assert_int_equal(fl_sc_bucket(sc, 3.99), 3);
    assert_int_equal(fl_sc_bucket(sc, 4), 3);
    assert_int_equal(fl_sc_bucket(sc, 4.01), -1);
    fl_sc_free(sc);
    assert_int_equal(fl_sc_new(1, 0, 1, FL_SC_SADL, &sc, &e), FL_ERR_ARG);
    assert_int_equal(fl_sc_new(10, 1, 1, FL_SC_SADL, &sc, &e), FL_ERR_ARG);
    assert_int_equal(fl_sc_new(10, 0, NAN, FL_SC_EQUAL, &sc, &e), FL_ERR_ARG);
    double lo, hi, one = 5, nan_only = NAN;
    assert_int_equal(fl_sc_bounds(&nan_only, 1, &lo, &hi), 0);
    assert_int_equal(fl_sc_bounds(&one, 1, &lo, &hi), 1);
    assert_true(lo == 5 && hi == 6);
}

/* ---- blocked search vs brute force ---------------------------------------------------------- */
static double dist2(const float *a, const float *b, int64_t d, const int64_t *cols) {
    double s = 0;
    for (int64_t j = 0; j < d; j++) {
        int64_t c = cols ? cols[j] : j;
        double u = (double)a[c] - b[c];
        s += u * u;
    }
    return s;
}

/* sadl's DSA, in double, by brute force. */
static double brute_dsa(const float *tr, const int32_t *tp, int64_t n, int64_t dim,
                        const float *x, int c, int nlc, const int64_t *cols, int64_t d) {
    double best = INFINITY;
    int64_t a = -1;
    for (int64_t i = 0; i < n; i++)
        if (tp[i] == c) {
            double v = dist2(x, tr + i * dim, d, cols);
            if (v < best) best = v, a = i;
        }
    const float *ref = nlc ? x : tr + a * dim;
    double b = INFINITY;
    for (int64_t i = 0; i < n; i++)
        if (tp[i] != c) {
            double v = dist2(ref, tr + i * dim, d, cols);
            if (v < b) b = v;
        }
    return sqrt(best) / sqrt(b);
}

/* gaussian_kde's log density by its definition, in double, by brute force: the kernel
 * covariance K = n^(-2/(d+4)) cov(x, ddof=1) = L L^T, each kernel's exponent |L^-1 (q - x_i)|^2
 * by forward substitution on the difference (no whitened coordinates, no |a|^2+|b|^2-2ab),
 * then logsumexp - log det L - (d/2) log(2 pi) - log n. skip: a training row left out (-1:
 * none), as leave-one-out scores it. */
typedef struct kde_ref {
    const float *x;
    int n, d;
    double L[8 * 8], logdet;
} kde_ref;

static void kde_ref_build(kde_ref *k, const float *x, int n, int d) {
    assert_true(d <= 8);
    double mu[8] = {0}, cov[8 * 8] = {0};
    k->x = x, k->n = n, k->d = d;
    for (int i = 0; i < n; i++)
        for (int a = 0; a < d; a++) mu[a] += x[i * d + a] / (double)n;
    for (int i = 0; i < n; i++)
        for (int a = 0; a < d; a++)
            for (int b = 0; b < d; b++)
                cov[a * d + b] += (x[i * d + a] - mu[a]) * (x[i * d + b] - mu[b]);
    double f2 = pow(n, -2.0 / (d + 4)) / (n - 1);
    memset(k->L, 0, sizeof k->L);
    k->logdet = 0;
    for (int j = 0; j < d; j++) {
        for (int i = j; i < d; i++) {
            double t = cov[i * d + j] * f2;
            for (int m = 0; m < j; m++) t -= k->L[i * d + m] * k->L[j * d + m];
            k->L[i * d + j] = i == j ? sqrt(t) : t / k->L[j * d + j];
        }
        k->logdet += log(k->L[j * d + j]);
    }
}

static double kde_ref_lsa(const kde_ref *k, const float *q, int skip) {
    int d = k->d, n = 0;
    double best = INFINITY, s = 0, *e = malloc(sizeof(double) * (size_t)k->n);
    assert_non_null(e);
    for (int i = 0; i < k->n; i++) {
        double y[8], r = 0;
        for (int a = 0; a < d; a++) {
            double t = (double)q[a] - k->x[i * d + a];
            for (int m = 0; m < a; m++) t -= k->L[a * d + m] * y[m];
            y[a] = t / k->L[a * d + a];
            r += y[a] * y[a];
        }
        e[i] = i == skip ? INFINITY : r;
        if (e[i] < best) best = e[i];
    }
    for (int i = 0; i < k->n; i++)
        if (i != skip) s += exp(-0.5 * (e[i] - best)), n++;
    free(e);
    return -(-0.5 * best + log(s) - k->logdet - 0.5 * d * log(2 * M_PI) - log(n));
}

/* Traces built to defeat float kernels: the class sits far from the origin (every neuron near
 * 1000); a group of 3 traces lies far out of the bulk, where whitened norms are large and the
 * float identity |a|^2 + |b|^2 - 2ab loses ~1e-3 of each kernel's exponent; 400 traces sit
 * within 1e-3 of one bulk point (high density: hundreds of kernels near the largest). Inputs
 * near the group, in the dense spot, and in the bulk must match the double reference within
 * 1e-6 relative, and so must leave-one-out (float kernels with only the nearest one exact, as
 * flare computed LSA before: 1.7e-5 at the far group). */
static void test_lsa_exact_where_dense(void **state) {
    (void)state;
    enum { D = 8, N = 3000, M = 60 };
    static float tr[N * D], q[M * D];
    static int32_t tp[N], qp[M];
    /* scale 1: LSA around 10; scale 0.3 shifts every LSA by 8 log 0.3 = -9.6, to around 0,
     * where the relative bound is the hardest (and the inputs whose float tail might move LSA
     * by 1e-6 of itself are computed again, every kernel exact) */
    for (int pass = 0; pass < 2; pass++) {
        float sc = pass ? 0.3f : 1.0f;
        fl_rng r;
        fl_rng_seed(&r, 41);
        for (int i = 0; i < N; i++) {
            for (int a = 0; a < D; a++) tr[i * D + a] = sc * (1000.0f + fl_rng_normal(&r));
            if (i < 3) /* the far group */
                for (int a = 0; a < D; a++) tr[i * D + a] = sc * (1050.0f + 1e-3f * fl_rng_normal(&r));
            else if (i < 403) /* the dense spot */
                for (int a = 0; a < D; a++) tr[i * D + a] = sc * (1000.5f + 1e-3f * fl_rng_normal(&r));
        }
        for (int i = 0; i < M; i++) {
            for (int a = 0; a < D; a++) {
                float base = i < 20 ? 1050.0f : i < 40 ? 1000.5f : 1000.0f;
                float jit = i < 40 ? 2e-3f : 1.0f;
                q[i * D + a] = sc * (base + jit * fl_rng_normal(&r));
            }
            qp[i] = 0;
        }
        kde_ref k;
        kde_ref_build(&k, tr, N, D);
        fl_sa_opts o;
        fl_sa_opts_init(&o, FL_SA_LSA);
        fl_sa *sa;
        fl_err e = {0};
        assert_int_equal(fl_sa_new(tr, tp, N, D, &o, &sa, &e), FL_OK);
        assert_int_equal(fl_sa_kept(sa), D);
        double out[M], worst = 0, at_ref = 0, loo[6];
        int at = -1;
        assert_int_equal(fl_sa_score(sa, q, qp, M, out, &e), FL_OK);
        /* the all-exact path (rare on real data) gives the same values */
        double ex[M];
        fl__sa_lsa_all_exact(1);
        assert_int_equal(fl_sa_score(sa, q, qp, M, ex, &e), FL_OK);
        fl__sa_lsa_all_exact(0);
        for (int i = 0; i < M; i++)
            if (!(fabs(ex[i] - out[i]) <= 1e-6 * fabs(out[i])))
                fail_msg("scale %g, input %d: all exact %.12g, as scored %.12g", sc, i, ex[i], out[i]);
        for (int i = 0; i < M; i++) {
            double ref = kde_ref_lsa(&k, q + i * D, -1), err = fabs(out[i] - ref) / fabs(ref);
            if (err > worst) worst = err, at = i, at_ref = ref;
        }
        if (worst > 1e-6)
            fail_msg("scale %g, input %d: LSA %.12g, reference %.12g (rel. %.2e, the worst)", sc,
                     at, out[at], at_ref, worst);
        int64_t idx[6] = {0, 1, 2, 3, 200, 2000};
        assert_int_equal(fl_sa_score_train(sa, idx, 6, loo, &e), FL_OK);
        for (int i = 0; i < 6; i++) {
            double ref = kde_ref_lsa(&k, tr + idx[i] * D, (int)idx[i]);
            double err = fabs(loo[i] - ref) / fabs(ref);
            if (err > worst) worst = err;
            if (err > 1e-6)
                fail_msg("scale %g, training trace %lld left out: LSA %.12g, reference %.12g "
                         "(rel. %.2e)", sc, (long long)idx[i], loo[i], ref, err);
        }
        print_message("LSA on dense and far traces, scale %g: worst relative error vs double "
                      "%.2e\n", sc, worst);
        fl_sa_free(sa);
    }
}

static void test_dsa_blocked_vs_brute_force(void **state) {
    /* 4 classes, 3000 training traces (classes of ~750: several row blocks), 40 neurons with
     * a large common offset (norms >> distances), test inputs that are near-copies of training
     * traces at 1e-4 (float |a|^2+|b|^2-2ab alone cannot resolve those), and a subset. */
    enum { N = 3000, M = 120, DIM = 40, C = 4 };
    fl_rng r;
    fl_rng_seed(&r, 7);
    float *tr = malloc(sizeof(float) * N * DIM), *te = malloc(sizeof(float) * M * DIM);
    int32_t *tp = malloc(sizeof(int32_t) * N), *qp = malloc(sizeof(int32_t) * M);
    for (int i = 0; i < N; i++) {
        tp[i] = (int32_t)fl_rng_below(&r, C);
        for (int j = 0; j < DIM; j++)
            tr[i * DIM + j] = 30.0f + (float)tp[i] * 0.5f + fl_rng_normal(&r);
    }
    for (int i = 0; i < M; i++) {
        int src = (int)fl_rng_below(&r, N);
        qp[i] = i % 3 == 0 ? (int32_t)fl_rng_below(&r, C) : tp[src];
        for (int j = 0; j < DIM; j++)
            te[i * DIM + j] = i % 2 ? tr[src * DIM + j] + 1e-4f * fl_rng_normal(&r)
                                    : 30.0f + 2.0f * fl_rng_normal(&r);
    }
    int64_t sub[12] = {3, 39, 0, 7, 21, 22, 23, 5, 11, 30, 31, 17};
    double *out = malloc(sizeof(double) * M);
    for (int variant = 0; variant < 2; variant++)
        for (int use_sub = 0; use_sub < 2; use_sub++) {
            fl_sa_opts o;
            fl_sa_opts_init(&o, FL_SA_DSA);
            o.dsa_variant = variant ? FL_DSA_NLC : FL_DSA_KIM;
            if (use_sub) o.neurons = sub, o.n_neurons = 12;
            fl_sa *sa;
            fl_err e = {0};
            assert_int_equal(fl_sa_new(tr, tp, N, DIM, &o, &sa, &e), FL_OK);
            assert_int_equal(fl_sa_score(sa, te, qp, M, out, &e), FL_OK);
            for (int i = 0; i < M; i++) {
                double ref = brute_dsa(tr, tp, N, DIM, te + i * DIM, qp[i], variant,
                                       use_sub ? sub : NULL, use_sub ? 12 : DIM);
                if (fabs(out[i] - ref) > 1e-9 * fmax(ref, 1e-12))
                    fail_msg("variant %d subset %d input %d: %.12g vs brute force %.12g", variant,
                             use_sub, i, out[i], ref);
            }
            fl_sa_free(sa);
        }
    free(out);
    free(tr);
    free(te);
    free(tp);
    free(qp);
}

/* ---- edge cases ----------------------------------------------------------------------------- */
static void test_absent_class_is_nan(void **state) {
    fixture f;
    load_fixture(&f);
    /* Drop class 1 from training; keep 3 classes. */
    float *tr = malloc(sizeof(float) * (size_t)(f.n * f.d));
    int32_t *tp = malloc(sizeof(int32_t) * (size_t)f.n);
    int64_t k = 0;
    for (int64_t i = 0; i < f.n; i++)
        if (f.train_pred[i] != 1) {
            memcpy(tr + k * f.d, (float *)f.tr.data + i * f.d, sizeof(float) * (size_t)f.d);
            tp[k++] = f.train_pred[i];
        }
    for (int kind = 0; kind < 3; kind++) {
        fl_sa_opts o;
        fl_sa_opts_init(&o, (fl_sa_kind)kind);
        o.n_classes = 3;
        fl_sa *sa;
        fl_err e = {0};
        if (fl_sa_new(tr, tp, k, f.d, &o, &sa, &e) != FL_OK) fail_msg("%s", e.msg);
        assert_int_equal(fl_sa_class_count(sa, 1), 0);
        double *out = malloc(sizeof(double) * (size_t)(f.m + 1));
        int32_t *qp = malloc(sizeof(int32_t) * (size_t)(f.m + 1));
        memcpy(qp, f.test_pred, sizeof(int32_t) * (size_t)f.m);
        qp[0] = 7; /* beyond n_classes: also absent */
        int64_t expect_absent = 0;
        for (int64_t i = 0; i < f.m; i++) expect_absent += qp[i] == 1 || qp[i] >= 3;
        assert_int_equal(fl_sa_score(sa, f.te.data, qp, f.m, out, &e), FL_OK);
        assert_int_equal(fl_sa_absent(sa), expect_absent);
        for (int64_t i = 0; i < f.m; i++)
            assert_true((qp[i] == 1 || qp[i] >= 3) ? isnan(out[i]) : isfinite(out[i]));
        free(out);
        free(qp);
        fl_sa_free(sa);
    }
    free(tr);
    free(tp);
    free_fixture(&f);
}

static void expect_fail(const float *tr, const int32_t *tp, int64_t n, int64_t d,
                        const fl_sa_opts *o, fl_status st, const char *needle) {
    fl_sa *sa = (fl_sa *)1;
    fl_err e = {0};
    assert_int_equal(fl_sa_new(tr, tp, n, d, o, &sa, &e), st);
    assert_null(sa);
    if (!strstr(e.msg, needle)) fail_msg("expected \"%s\" in: %s", needle, e.msg);
}

static void test_errors(void **state) {
    enum { N = 60, D = 4 };
    float tr[N * D];
    int32_t tp[N];
    fl_rng r;
    fl_rng_seed(&r, 3);
    for (int i = 0; i < N; i++) {
        tp[i] = i % 2;
        for (int j = 0; j < D; j++) tr[i * D + j] = fl_rng_normal(&r);
    }
    fl_sa_opts lsa, dsa, mdsa;
    fl_sa_opts_init(&lsa, FL_SA_LSA);
    fl_sa_opts_init(&dsa, FL_SA_DSA);
    fl_sa_opts_init(&mdsa, FL_SA_MDSA);
    /* d > n in a class (3 traces of class 2 for 4 neurons): singular, say so. */
    int32_t tp2[N];
    memcpy(tp2, tp, sizeof tp);
    tp2[0] = tp2[2] = tp2[4] = 2;
    expect_fail(tr, tp2, N, D, &lsa, FL_ERR_DATA, "needs more traces than neurons");
    expect_fail(tr, tp2, N, D, &mdsa, FL_ERR_DATA, "class 2 has 3 training traces");
    /* A neuron that is a linear combination of others (not constant): Cholesky fails. */
    float col[N * D];
    memcpy(col, tr, sizeof tr);
    for (int i = 0; i < N; i++) col[i * D + 3] = col[i * D + 0] + col[i * D + 1];
    expect_fail(col, tp, N, D, &lsa, FL_ERR_DATA, "raise the variance threshold");
    expect_fail(col, tp, N, D, &mdsa, FL_ERR_DATA, "singular");
    /* Every neuron constant in some class. */
    float cst[N * D];
    memcpy(cst, tr, sizeof tr);
    for (int i = 0; i < N; i += 2)
        for (int j = 0; j < D; j++) cst[i * D + j] = 1.0f;
    expect_fail(cst, tp, N, D, &lsa, FL_ERR_DATA, "variance below the threshold");
    /* NaN training trace. */
    float nan_tr[N * D];
    memcpy(nan_tr, tr, sizeof tr);
    nan_tr[5 * D + 2] = NAN;
    expect_fail(nan_tr, tp, N, D, &dsa, FL_ERR_NAN, "training trace 5");
    /* One class only for DSA, no traces, negative labels, bad subset. */
    int32_t one[N] = {0};
    expect_fail(tr, one, N, D, &dsa, FL_ERR_DATA, "at least two classes");
    expect_fail(tr, tp, 0, D, &dsa, FL_ERR_ARG, "got none");
    int32_t neg[N];
    memcpy(neg, tp, sizeof tp);
    neg[9] = -1;
    expect_fail(tr, neg, N, D, &lsa, FL_ERR_ARG, "training prediction 9 is negative");
    int64_t bad = D;
    fl_sa_opts sub = dsa;
    sub.neurons = &bad;
    sub.n_neurons = 1;
    expect_fail(tr, tp, N, D, &sub, FL_ERR_ARG, "outside");
    fl_sa_opts nc = lsa;
    nc.n_classes = 1;
    expect_fail(tr, tp, N, D, &nc, FL_ERR_ARG, "there are 1 classes");

    /* Scoring: NaN trace, negative prediction, empty input. */
    fl_sa *sa;
    fl_err e = {0};
    assert_int_equal(fl_sa_new(tr, tp, N, D, &lsa, &sa, &e), FL_OK);
    float x[2 * D];
    memcpy(x, tr, sizeof x);
    int32_t xp[2] = {0, 1};
    double out[2];
    x[D + 1] = INFINITY;
    assert_int_equal(fl_sa_score(sa, x, xp, 2, out, &e), FL_ERR_NAN);
    assert_non_null(strstr(e.msg, "trace 1"));
    x[D + 1] = 0;
    xp[1] = -3;
    assert_int_equal(fl_sa_score(sa, x, xp, 2, out, &e), FL_ERR_ARG);
    assert_int_equal(fl_sa_score(sa, NULL, NULL, 0, NULL, &e), FL_OK);
    fl_sa_free(sa);
    fl_sa_free(NULL);
    fl_sa_kind k;
    assert_int_equal(fl_sa_kind_parse("dsa", &k, &e), FL_OK);
    assert_int_equal(k, FL_SA_DSA);
    assert_int_equal(fl_sa_kind_parse("xsa", &k, &e), FL_ERR_ARG);
    assert_string_equal(fl_sa_kind_name(FL_SA_MDSA), "mdsa");
}

/* ---- traces from a model -------------------------------------------------------------------- */
static void test_traces_from_model(void **state) {
    fl_err e = {0};
    fl_model *m;
    assert_int_equal(fl_zoo_build("lenet5", 1, 28, 28, 10, 1, &m, &e), FL_OK);
    fl_dataset *d;
    assert_int_equal(fl_dataset_new(37, 1, 28, 28, &d, &e), FL_OK);
    fl_rng r;
    fl_rng_seed(&r, 5);
    for (int64_t i = 0; i < 37 * 28 * 28; i++) d->x[i] = fl_rng_uniform(&r);
    const char *layer = "/relu4/Relu_output_0";
    assert_true(fl_model_find(m, layer) >= 0);
    float *tr;
    int32_t *pred;
    int64_t dim;
    assert_int_equal(fl_sa_traces(m, layer, d, 16, &tr, &pred, &dim, &e), FL_OK);
    assert_int_equal(dim, 84);
    /* The same as one forward pass of everything. */
    fl_tensor x = fl_dataset_view(d, 0, 37);
    assert_int_equal(fl_model_forward(m, &x, &e), FL_OK);
    const fl_tensor *t = fl_model_tensor(m, layer), *lg = fl_model_output(m, 0);
    for (int64_t i = 0; i < 37 * 84; i++) assert_float_equal(tr[i], t->data[i], 1e-5);
    for (int i = 0; i < 37; i++) {
        int best = 0;
        for (int k = 1; k < 10; k++)
            if (lg->data[i * 10 + k] > lg->data[i * 10 + best]) best = k;
        assert_int_equal(pred[i], best);
    }
    free(tr);
    free(pred);
    assert_int_equal(fl_sa_traces(m, "nope", d, 16, &tr, &pred, &dim, &e), FL_ERR_NOTFOUND);
    fl_dataset_free(d);
    fl_model_free(m);
}

/* ---- LSC / DSC as coverage criteria --------------------------------------------------------- */
static fl_dataset *random_set(int64_t n, uint64_t seed) {
    fl_dataset *d;
    fl_err e = {0};
    assert_int_equal(fl_dataset_new(n, 1, 2, 2, &d, &e), FL_OK);
    fl_rng r;
    fl_rng_seed(&r, seed);
    for (int64_t i = 0; i < n * 4; i++) d->x[i] = 4.0f * fl_rng_normal(&r);
    return d;
}

/* Feed d through m in batches; returns how many inputs were flagged as adding coverage. */
static int64_t feed(fl_cover *c, fl_model *m, const fl_layerset *ls, const fl_dataset *d,
                    int batch) {
    fl_err e = {0};
    float *v = malloc(sizeof(float) * (size_t)(batch * ls->total));
    uint8_t *added = malloc((size_t)batch);
    int64_t flagged = 0;
    for (int64_t s = 0; s < d->n; s += batch) {
        int n = (int)(d->n - s < batch ? d->n - s : batch);
        fl_tensor x = fl_dataset_view(d, s, n);
        assert_int_equal(fl_model_forward(m, &x, &e), FL_OK);
        fl_layerset_neurons(ls, m, v);
        fl_cover_batch b = {.n = n, .mean = v, .m = m};
        int any = 0;
        if (fl_cover_update(c, &b, added, &any, &e) != FL_OK) fail_msg("%s", e.msg);
        int64_t k = 0;
        for (int i = 0; i < n; i++) k += added[i];
        assert_int_equal(any, k > 0);
        flagged += k;
    }
    free(v);
    free(added);
    return flagged;
}

static void test_cover_criteria(void **state) {
    fl_err e = {0};
    fl_model *m;
    assert_int_equal(fl_zoo_build("mlp", 1, 2, 2, 3, 2, &m, &e), FL_OK);
    fl_layerset *ls;
    assert_int_equal(fl_layerset_make(m, "/relu2/Relu_output_0,logits", &ls, &e), FL_OK);
    fl_dataset *train = random_set(3000, 1), *test = random_set(400, 2);
    fl_cover_ctx ctx = {.m = m, .ls = ls, .train = train};

    /* The reference: SA of the whole test set at once, bucketed by fl_sc. */
    float *tr, *te;
    int32_t *tp, *qp;
    int64_t dim;
    assert_int_equal(fl_sa_traces(m, "logits", train, 256, &tr, &tp, &dim, &e), FL_OK);
    assert_int_equal(fl_sa_traces(m, "logits", test, 256, &te, &qp, &dim, &e), FL_OK);
    int64_t per[3] = {0, 0, 0};
    for (int i = 0; i < 3000; i++) per[tp[i]]++;
    assert_true(per[0] > 100 && per[1] > 100 && per[2] > 100); /* every class well present */
    for (int kind = 0; kind < 2; kind++) {
        const fl_cover_ops *ops = kind ? &fl_cover_dsc : &fl_cover_lsc;
        fl_sa_opts o;
        fl_sa_opts_init(&o, kind ? FL_SA_DSA : FL_SA_LSA);
        fl_sa *sa;
        assert_int_equal(fl_sa_new(tr, tp, 3000, dim, &o, &sa, &e), FL_OK);
        /* default bounds: leave-one-out SA of 1000 evenly spaced training traces */
        int64_t idx[1000];
        double loo[1000], lo, hi, v[400];
        for (int i = 0; i < 1000; i++) idx[i] = (int64_t)i * 3000 / 1000;
        assert_int_equal(fl_sa_score_train(sa, idx, 1000, loo, &e), FL_OK);
        assert_true(fl_sc_bounds(loo, 1000, &lo, &hi));
        assert_int_equal(fl_sa_score(sa, te, qp, 400, v, &e), FL_OK);
        fl_sc *sc;
        assert_int_equal(fl_sc_new(20, lo, hi, FL_SC_SADL, &sc, &e), FL_OK);
        fl_sc_add(sc, v, 400);

        fl_cover *c, *c2;
        if (fl_cover_new_ops(ops, &ctx, "20:logits", &c, &e) != FL_OK) fail_msg("%s", e.msg);
        int64_t covered, total;
        assert_int_equal(feed(c, m, ls, test, 64), sc->covered);
        fl_cover_stats(c, &covered, &total);
        assert_int_equal(total, 21);
        assert_int_equal(covered, sc->covered);
        assert_true(covered > 2);
        /* one batch of everything: the same coverage */
        assert_int_equal(fl_cover_new_ops(ops, &ctx, "20:logits", &c2, &e), FL_OK);
        feed(c2, m, ls, test, 400);
        fl_cover_stats(c2, &covered, &total);
        assert_int_equal(covered, sc->covered);
        fl_cover_free(c2);
        fl_cover_free(c);
        /* explicit bounds */
        assert_int_equal(fl_cover_new_ops(ops, &ctx, "10:logits:0:1", &c, &e), FL_OK);
        feed(c, m, ls, test, 100);
        fl_sc *sc2;
        assert_int_equal(fl_sc_new(10, 0, 1, FL_SC_SADL, &sc2, &e), FL_OK);
        fl_sc_add(sc2, v, 400);
        fl_cover_stats(c, &covered, &total);
        assert_int_equal(covered, sc2->covered);
        fl_cover_free(c);
        fl_sc_free(sc2);
        fl_sc_free(sc);
        fl_sa_free(sa);
    }
    /* DSC's default layer: the last one that is not the logits. */
    fl_cover *c;
    assert_int_equal(fl_cover_new_ops(&fl_cover_dsc, &ctx, "5", &c, &e), FL_OK);
    assert_string_equal(c->group_name[0], "/relu2/Relu_output_0");
    fl_cover_free(c);
    /* Errors. */
    assert_int_equal(fl_cover_new_ops(&fl_cover_lsc, &ctx, "1", &c, &e), FL_ERR_ARG);
    assert_int_equal(fl_cover_new_ops(&fl_cover_lsc, &ctx, "10:logits:3", &c, &e), FL_ERR_ARG);
    assert_int_equal(fl_cover_new_ops(&fl_cover_lsc, &ctx, "10:logits:3:1", &c, &e), FL_ERR_ARG);
    assert_int_equal(fl_cover_new_ops(&fl_cover_lsc, &ctx, "10:nope", &c, &e), FL_ERR_NOTFOUND);
    fl_cover_ctx no_train = {.m = m, .ls = ls};
    assert_int_equal(fl_cover_new_ops(&fl_cover_dsc, &no_train, NULL, &c, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "training set"));
    free(tr);
    free(te);
    free(tp);
    free(qp);
    fl_dataset_free(train);
    fl_dataset_free(test);
    fl_layerset_free(ls);
    fl_model_free(m);
}

/* ---- the command line (skipped when the binary is not built) --------------------------------- */
static int have_bin(void) {
    const char *b = getenv("FLARE_BIN");
    if (!b) b = "build/flare";
    setenv("FLARE_BIN", b, 1);
    return access(b, X_OK) == 0;
}


#define ATS "--train-ats " FIX "train_ats.npy --train-pred " FIX "train_pred.npy --test-ats " \
            FIX "test_ats.npy --test-pred " FIX "test_pred.npy"

/* Traces that cannot support the estimate are a runtime failure (exit 1, FL_ERR_DATA), not a
 * usage error: a neuron that is a multiple of another (Cholesky fails) in `nn sa`, and, in
 * `nn cover --criteria lsc / dsc`, a training set of 8 images for the 10 logits (every class
 * has fewer traces than neurons; DSA sees one class only). */
static void cli_singular(const char *dir) {
    enum { N = 300, D = 5 };
    static float tr[N * D], x8[8 * 28 * 28];
    static int32_t tp[N];
    fl_rng r;
    fl_rng_seed(&r, 9);
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < D - 1; j++) tr[i * D + j] = (float)fl_rng_normal(&r);
        tr[i * D + D - 1] = 2 * tr[i * D];
        tp[i] = i % 2;
    }
    for (int i = 0; i < 8 * 28 * 28; i++) x8[i] = (float)fl_rng_uniform(&r);
    char ats[256], pred[256], imgs[256], *out;
    snprintf(ats, sizeof ats, "%s/dep_ats.npy", dir);
    snprintf(pred, sizeof pred, "%s/dep_pred.npy", dir);
    snprintf(imgs, sizeof imgs, "%s/x8.npy", dir);
    fl_err e = {0};
    int64_t s2[2] = {N, D}, s1[1] = {N}, s4[4] = {8, 1, 28, 28};
    assert_int_equal(fl_npy_write(ats, FL_DT_F32, 2, s2, tr, &e), FL_OK);
    assert_int_equal(fl_npy_write(pred, FL_DT_I32, 1, s1, tp, &e), FL_OK);
    assert_int_equal(fl_npy_write(imgs, FL_DT_F32, 4, s4, x8, &e), FL_OK);
    for (int k = 0; k < 2; k++) {
        int rc = tu_sh(&out, "\"$FLARE_BIN\" nn sa -k %s --train-ats %s --train-pred %s "
                       "--test-ats %s --test-pred %s", k ? "mdsa" : "lsa", ats, pred, ats, pred);
        if (rc != 1 || !strstr(out, "flare: class 0: the covariance") || !strstr(out, "singular"))
            fail_msg("nn sa -k %s: exit %d (want 1): %s", k ? "mdsa" : "lsa", rc, out);
        free(out);
        rc = tu_sh(&out, "\"$FLARE_BIN\" nn cover -m tests/fixtures/cover/lenet1.onnx -d "
                   "fashion-mnist:test -n 20 --train npy:%s --criteria %s:10:logits", imgs,
                   k ? "dsc" : "lsc");
        if (rc != 1 || !strstr(out, k ? "flare: dsc:10:logits: the training traces of layer "
                                        "'logits'" : "flare: lsc:10:logits: the training traces "
                                        "of layer 'logits'") ||
            !strstr(out, k ? "at least two classes" : "covariance is singular"))
            fail_msg("nn cover %s: exit %d (want 1): %s", k ? "dsc" : "lsc", rc, out);
        free(out);
    }
    remove(ats);
    remove(pred);
    remove(imgs);
}

static void test_cli(void **state) {
    TU_NEED(have_bin(), "the flare binary (FLARE_BIN; tests/run.sh sets it)");
    char dir[] = "/tmp/flare_test_sa_XXXXXX", path[256], *out;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/dsa.npy", dir);
    /* Trace files: values as the fixture, coverage as sadl's get_sc, JSON summary. */
    int rc = tu_sh(&out, "\"$FLARE_BIN\" nn sa -k dsa " ATS " -o %s --json --buckets 50 --lower 0.5 "
                "--upper 1.0", path);
    if (rc != 0) fail_msg("exit %d: %s", rc, out);
    assert_int_equal(tu_json_num(out, "n"), 50);
    assert_int_equal(tu_json_num(out, "coverage.buckets"), 50);
    assert_int_equal(tu_json_num(out, "coverage.covered"), 7);
    assert_float_equal(tu_json_num(out, "coverage.coverage"), 7.0 / 50, 1e-12);
    free(out);
    fl_npy a;
    fl_err e = {0};
    assert_int_equal(fl_npy_read(path, &a, &e), FL_OK);
    assert_int_equal(a.dtype, FL_DT_F32);
    assert_int_equal(a.count, 50);
    float *ref = load_ref("dsa", 50);
    for (int i = 0; i < 50; i++)
        assert_float_equal(((float *)a.data)[i], ref[i], 1e-5 * fmax(ref[i], 1e-3));
    free(ref);
    fl_npy_free(&a);
    remove(path);
    /* LSA with a neuron subset as a list, text summary. */
    rc = tu_sh(&out, "\"$FLARE_BIN\" nn sa -k lsa " ATS " --neurons 0,1,2,4,5,6 --buckets 20");
    if (rc != 0) fail_msg("exit %d: %s", rc, out);
    assert_non_null(strstr(out, "6 of 8 neurons used"));
    const char *lsc = strstr(out, "LSC ");
    assert_non_null(lsc);
    assert_float_equal(strtod(lsc + 4, NULL), 8.0 / 20, 5e-5); /* printed to 4 decimals */
    assert_non_null(strstr(out, "(8 of 20 buckets"));
    free(out);
    /* Wrong dtype / shape: runtime error naming the file. */
    rc = tu_sh(&out, "\"$FLARE_BIN\" nn sa -k lsa --train-ats " FIX "train_pred.npy --train-pred "
            FIX "train_pred.npy --test-ats " FIX "test_ats.npy --test-pred " FIX "test_pred.npy");
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "train_pred.npy: activation traces must be float32"));
    free(out);
    rc = tu_sh(&out, "\"$FLARE_BIN\" nn sa -k mdsa --train-ats " FIX "train_ats.npy --train-pred "
            FIX "test_pred.npy --test-ats " FIX "test_ats.npy --test-pred " FIX "test_pred.npy");
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "has 50 predictions but"));
    free(out);
    rc = tu_sh(&out, "\"$FLARE_BIN\" nn sa -k lsa --train-ats " FIX "train_ats.npy --train-pred "
            FIX "train_ats.npy --test-ats " FIX "test_ats.npy --test-pred " FIX "test_pred.npy");
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "predictions must be int32 or int64"));
    free(out);
    /* Usage errors. */
    rc = tu_sh(&out, "\"$FLARE_BIN\" nn sa -k lsa --train-ats " FIX "train_ats.npy");
    assert_int_equal(rc, 2);
    assert_non_null(strstr(out, "--train-pred, --test-ats, --test-pred are missing")); /* all at once */
    free(out);
    rc = tu_sh(&out, "\"$FLARE_BIN\" nn sa -k lsa -m x.onnx " ATS);
    assert_int_equal(rc, 2);
    free(out);
    rc = tu_sh(&out, "\"$FLARE_BIN\" nn sa -k lsa " ATS " --neurons 1,x");
    assert_int_equal(rc, 2);
    free(out);
    rc = tu_sh(&out, "\"$FLARE_BIN\" nn sa -k dsa " ATS " --grid %s/g.png", dir); /* no images */
    assert_int_equal(rc, 2);
    assert_non_null(strstr(out, "--grid needs the images"));
    free(out);
    /* From a model: the most surprising inputs as an image grid (a PNG file), and all the
     * SA values as NPY */
    snprintf(path, sizeof path, "%s/g.png", dir);
    rc = tu_sh(&out, "\"$FLARE_BIN\" nn sa -k dsa -m tests/fixtures/cover/lenet1.onnx "
            "-l /pool2/MaxPool_output_0 --train fashion-mnist:train --test fashion-mnist:test "
            "-n 300 --top 5 --grid %s -o %s/v.npy", path, dir);
    if (rc != 0) fail_msg("exit %d: %s", rc, out);
    assert_non_null(strstr(out, "the 5 most surprising inputs"));
    free(out);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    unsigned char sig[8];
    assert_int_equal(fread(sig, 1, 8, f), 8);
    fclose(f);
    assert_memory_equal(sig, "\x89PNG\r\n\x1a\n", 8);
    remove(path);
    snprintf(path, sizeof path, "%s/v.npy", dir);
    assert_int_equal(fl_npy_read(path, &a, &e), FL_OK);
    assert_int_equal(a.count, 300);
    fl_npy_free(&a);
    remove(path);
    /* LSAv/DSAv: --important restricts the trace to LRP's important neurons of the layer */
    snprintf(path, sizeof path, "%s/imp.json", dir);
    rc = tu_sh(&out, "\"$FLARE_BIN\" nn lrp -m tests/fixtures/cover/lenet1.onnx -d fashion-mnist:train "
            "--limit 300 --layers /pool2/MaxPool_output_0 --ratio 0.25 -o %s", path);
    if (rc != 0) fail_msg("exit %d: %s", rc, out);
    free(out);
    rc = tu_sh(&out, "\"$FLARE_BIN\" nn sa -k dsa -m tests/fixtures/cover/lenet1.onnx "
            "-l /pool2/MaxPool_output_0 --train fashion-mnist:train --test fashion-mnist:test "
            "-n 300 --important %s", path);
    if (rc != 0) fail_msg("exit %d: %s", rc, out);
    assert_non_null(strstr(out, "3 important neurons of 12")); /* round(0.25 * 12) */
    assert_non_null(strstr(out, "3 of 12 neurons used"));
    free(out);
    rc = tu_sh(&out, "\"$FLARE_BIN\" nn sa -k dsa " ATS " --important %s", path);
    assert_int_equal(rc, 2);
    free(out);
    remove(path);
    cli_singular(dir);
    rmdir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lsa_matches_scipy),
        cmocka_unit_test(test_lsa_exact_where_dense),
        cmocka_unit_test(test_dsa_matches_sadl),
        cmocka_unit_test(test_mdsa),
        cmocka_unit_test(test_leave_one_out),
        cmocka_unit_test(test_sc_matches_sadl),
        cmocka_unit_test(test_dsa_blocked_vs_brute_force),
        cmocka_unit_test(test_absent_class_is_nan),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_traces_from_model),
        cmocka_unit_test(test_cover_criteria),
        cmocka_unit_test(test_cli),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
