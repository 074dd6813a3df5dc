/* Coverage benchmark: the cost of updating every structural criterion for a batch of 256 on
 * LeNet-5 (layer set "all"), against the forward pass of the same batch. Target (issue 3):
 * cover / forward <= 0.25. Prints JSON lines (bench/run.sh style):
 *   cover_lenet5_b256  forward_ms, cover_ms (neuron values + all criteria), ratio, and the
 *                      time of the neuron values and of each criterion alone
 * Every update is timed on inputs the coverage set has not seen: each repetition starts from
 * a fresh set (the whole update and each criterion alone), and within a repetition the 20
 * batches are disjoint. (Replaying inputs a set has already counted is cheaper — nothing is
 * new — and made the ratio look lower than a campaign sees it.)
 * Inputs: Fashion-MNIST test images when installed (realistic activations), with the profile
 * (the neuron bounds) from the first 5 120 training images, as a campaign has it; else
 * uniform noise for both. Weights: the zoo's initialisation (speed does not depend on
 * training).
 * With one thread the clock is the thread's CPU time (a shared machine's other load then
 * barely moves the ratio); with more, wall-clock time.
 * Usage: bench_cover [threads]   (default 2, as bench_nn)
 *
 * bench_cover big MODEL.onnx SIDE THREADS BATCH REPS LAYERS SA_LAYER N_TRAIN: the same at
 * ImageNet size (bench/run.sh: ResNet-50 at 3x224x224, three block outputs), wall clock:
 *   cover_big  forward_ms (a batch), cover_ms (neuron values + every criterion of SPEC on the
 *              layers of LAYERS, "a,b,c"), ratio; each rep a fresh coverage set and a batch no
 *              set has seen; the medians over REPS. The profile: 2 batches of other inputs.
 *   sa_big     LSA and DSA (Kim) of each rep's batch (its traces on layer SA_LAYER, one of
 *              LAYERS) against N_TRAIN synthetic training traces in 10 classes (the batches'
 *              own traces plus noise of their per-neuron spread: the timing depends only on
 *              the counts and the width): build_s once, score_ms per batch (median), ratio to
 *              the forward pass of that batch.
 * Inputs: normal(0, 1) noise; weights: the export's (random, as in bench_nn big). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>

#include "flare/cover.h"
#include "flare/onnx.h"
#include "flare/sa.h"
#include "flare/train.h"

#define CHECK(x)                                                          \
    do {                                                                  \
        if ((x) != FL_OK) {                                               \
            fprintf(stderr, "bench_cover: %s failed: %s\n", #x, err.msg); \
            exit(1);                                                      \
        }                                                                 \
    } while (0)

static fl_err err;
static int cpu_clock;

static double now(void) {
    if (!cpu_clock) return fl_now();
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#define BATCH 256
#define BATCHES 20
#define SPEC "nc:0.5,kmnc:1000,nbc,snac,tknc:3,tknp"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_of(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void noise(fl_tensor *x, int batch, int side, uint64_t seed) {
    fl_rng r;
    fl_rng_seed(&r, seed);
    int64_t shp[4] = {batch, 3, side, side};
    fl_tensor_free(x);
    CHECK(fl_tensor_alloc(x, 4, shp));
    for (int64_t i = 0; i < x->size; i++) x->data[i] = fl_rng_normal(&r);
}

static void time_sa(fl_sa_kind kind, const char *label, const float *train, const int32_t *tpred,
                    int64_t n_train, const float *test, const int32_t *pred, int reps, int batch,
                    int64_t dim, double fwd_ms, const char *model, const char *layer) {
    fl_sa_opts o;
    fl_sa_opts_init(&o, kind);
    fl_sa *sa;
    double t0 = fl_now();
    CHECK(fl_sa_new(train, tpred, n_train, dim, &o, &sa, &err));
    double build = fl_now() - t0, v[16], *out = malloc(sizeof(double) * (size_t)batch);
    for (int r = 0; r < reps; r++) {
        t0 = fl_now();
        CHECK(fl_sa_score(sa, test + (int64_t)r * batch * dim, pred + (int64_t)r * batch, batch, out, &err));
        v[r] = (fl_now() - t0) * 1e3;
    }
    double ms = median_of(v, reps);
    printf("{\"name\": \"sa_big_%s\", \"model\": \"%s\", \"layer\": \"%s\", \"dim\": %lld, "
           "\"kept\": %lld, \"n_train\": %lld, \"batch\": %d, \"threads\": %d, \"build_s\": %.3f, "
           "\"score_ms\": %.3f, \"forward_ms\": %.3f, \"ratio\": %.4f}\n",
           label, model, layer, (long long)dim, (long long)fl_sa_kept(sa), (long long)n_train, batch,
           fl_threads_get(), build, ms, fwd_ms, ms / fwd_ms);
    fflush(stdout);
    free(out);
    fl_sa_free(sa);
}

static int main_big(int argc, char **argv) {
    if (argc != 10) {
        fprintf(stderr, "usage: bench_cover big MODEL.onnx SIDE THREADS BATCH REPS LAYERS SA_LAYER N_TRAIN\n");
        return 2;
    }
    const char *path = argv[2], *layers = argv[7], *sa_layer = argv[8];
    int side = atoi(argv[3]), threads = atoi(argv[4]), batch = atoi(argv[5]), reps = atoi(argv[6]);
    int64_t n_train = atoll(argv[9]);
    if (reps > 16) reps = 16;
    if (reps < 1) reps = 1;
    fl_threads_set(threads);
    fl_model *m;
    CHECK(fl_onnx_load(path, &m, &err));
    fl_tensor x = {0};
    noise(&x, batch, side, 100);
    CHECK(fl_model_forward(m, &x, &err)); /* plans the buffers (and the layers' shapes) */
    fl_layerset *ls;
    CHECK(fl_layerset_make(m, layers, &ls, &err));
    int sl = -1;
    for (int l = 0; l < ls->n; l++)
        if (!strcmp(ls->name[l], sa_layer)) sl = l;
    if (sl < 0) {
        fprintf(stderr, "bench_cover: SA layer %s is not one of %s\n", sa_layer, layers);
        return 2;
    }
    fl_profile *p;
    CHECK(fl_profile_new(ls, &p, &err));
    float *nv = malloc(sizeof(float) * (size_t)(batch * ls->total));
    for (int k = 0; k < 2; k++) {
        noise(&x, batch, side, 200 + (uint64_t)k);
        CHECK(fl_model_forward(m, &x, &err));
        fl_layerset_neurons(ls, m, nv);
        CHECK(fl_profile_add(p, nv, batch, &err));
    }
    fl_cover_ctx ctx = {.m = m, .ls = ls, .profile = p};
    int64_t dim = ls->width[sl];
    float *test = malloc(sizeof(float) * (size_t)(reps * batch * dim));
    int32_t *pred = malloc(sizeof(int32_t) * (size_t)(reps * batch));
    double fwd[16], cov[16];
    uint8_t *added = malloc((size_t)batch);
    for (int r = 0; r < reps; r++) {
        fl_coverset *s;
        CHECK(fl_coverset_new(&ctx, SPEC, &s, &err));
        noise(&x, batch, side, 300 + (uint64_t)r);
        double t0 = fl_now();
        CHECK(fl_model_forward(m, &x, &err));
        double t1 = fl_now();
        CHECK(fl_coverset_update_model(s, m, added, &err));
        double t2 = fl_now();
        fwd[r] = (t1 - t0) * 1e3, cov[r] = (t2 - t1) * 1e3;
        const fl_tensor *y = fl_model_output(m, 0);
        int64_t nc = y->size / batch;
        for (int b = 0; b < batch; b++) {
            memcpy(test + ((int64_t)r * batch + b) * dim, s->view.b.mean + b * ls->total + ls->offset[sl],
                   sizeof(float) * (size_t)dim);
            int64_t best = 0;
            for (int64_t c = 1; c < nc; c++)
                if (y->data[b * nc + c] > y->data[b * nc + best]) best = c;
            pred[(int64_t)r * batch + b] = (int32_t)(best % 10);
        }
        fl_coverset_free(s);
    }
    double f_ms = median_of(fwd, reps), c_ms = median_of(cov, reps);
    printf("{\"name\": \"cover_big\", \"model\": \"%s\", \"side\": %d, \"batch\": %d, \"threads\": %d, "
           "\"clock\": \"wall\", \"layers\": \"%s\", \"neurons\": %lld, \"criteria\": \"%s\", "
           "\"inputs\": \"unseen\", \"forward_ms\": %.3f, \"cover_ms\": %.3f, \"ratio\": %.4f}\n",
           path, side, batch, threads, layers, (long long)ls->total, SPEC, f_ms, c_ms, c_ms / f_ms);
    fflush(stdout);
    /* synthetic training traces: test trace (i mod the traces there are) + noise of its
     * neuron's spread over the test traces, class i mod 10 */
    int64_t nt = (int64_t)reps * batch;
    double *sd = calloc((size_t)dim, sizeof(double));
    for (int64_t j = 0; j < dim; j++) {
        double mu = 0, m2 = 0;
        for (int64_t i = 0; i < nt; i++) mu += test[i * dim + j] / (double)nt;
        for (int64_t i = 0; i < nt; i++) m2 += (test[i * dim + j] - mu) * (test[i * dim + j] - mu);
        sd[j] = sqrt(m2 / (double)nt) + 1e-3 * (fabs(mu) + 1e-3);
    }
    float *train = malloc(sizeof(float) * (size_t)(n_train * dim));
    int32_t *tpred = malloc(sizeof(int32_t) * (size_t)n_train);
    fl_rng rg;
    fl_rng_seed(&rg, 7);
    for (int64_t i = 0; i < n_train; i++) {
        for (int64_t j = 0; j < dim; j++)
            train[i * dim + j] = test[(i % nt) * dim + j] + (float)sd[j] * fl_rng_normal(&rg);
        tpred[i] = (int32_t)(i % 10);
    }
    time_sa(FL_SA_LSA, "lsa", train, tpred, n_train, test, pred, reps, batch, dim, f_ms, path, sa_layer);
    time_sa(FL_SA_DSA, "dsa", train, tpred, n_train, test, pred, reps, batch, dim, f_ms, path, sa_layer);
    free(train);
    free(tpred);
    free(sd);
    free(test);
    free(pred);
    free(added);
    free(nv);
    fl_tensor_free(&x);
    fl_profile_free(p);
    fl_layerset_free(ls);
    fl_model_free(m);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "big")) return main_big(argc, argv);
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    fl_threads_set(threads);
    cpu_clock = threads == 1;
    fl_model *m;
    CHECK(fl_zoo_build("lenet5", 1, 28, 28, 10, 1, &m, &err));
    fl_dataset *d = NULL, *train = NULL;
    const char *source = "fashion-mnist:test";
    if (fl_dataset_load(source, NULL, BATCH * BATCHES, &d, &err) != FL_OK ||
        fl_dataset_load("fashion-mnist:train", NULL, BATCH * BATCHES, &train, &err) != FL_OK) {
        source = "uniform noise";
        fl_dataset_free(d);
        d = NULL;
        fl_rng r;
        fl_rng_seed(&r, 1);
        fl_dataset *both[2];
        for (int j = 0; j < 2; j++) {
            CHECK(fl_dataset_new(BATCH * BATCHES, 1, 28, 28, &both[j], &err));
            for (int64_t i = 0; i < both[j]->n * 784; i++) both[j]->x[i] = fl_rng_uniform(&r);
        }
        d = both[0], train = both[1];
    }
    fl_layerset *ls;
    CHECK(fl_layerset_make(m, "all", &ls, &err));
    fl_profile *p;
    CHECK(fl_profile_compute(m, ls, train, BATCH, NULL, NULL, &p, &err));
    fl_cover_ctx ctx = {.m = m, .ls = ls, .profile = p};

    /* Per repetition, two fresh coverage sets: s for the whole update, s1 for each criterion
     * alone. Per batch: forward, the whole update of s, the neuron values, then each criterion
     * of s1 alone on those values. Every input is new to both sets. */
    fl_tensor x = {0};
    uint8_t added[BATCH];
    double best_fwd = 1e30, best_cov = 1e30, best_view = 1e30;
    double *best_c = NULL;
    int n_crit = 0;
    fl_cover_view v = {0};
    fl_coverset *s = NULL;
    for (int rep = 0; rep < 5; rep++) {
        fl_coverset *s1;
        fl_coverset_free(s);
        CHECK(fl_coverset_new(&ctx, SPEC, &s, &err));
        CHECK(fl_coverset_new(&ctx, SPEC, &s1, &err));
        if (!best_c) {
            n_crit = s->n;
            best_c = calloc((size_t)n_crit, sizeof(double));
            for (int k = 0; k < n_crit; k++) best_c[k] = 1e30;
        }
        double fwd = 0, cov = 0, view = 0, *per = calloc((size_t)n_crit, sizeof(double));
        for (int bi = 0; bi < BATCHES; bi++) {
            int64_t shp[4] = {BATCH, 1, 28, 28};
            fl_tensor_set_shape(&x, 4, shp);
            CHECK(fl_dataset_batch(d, (int64_t)bi * BATCH, BATCH, &x, &err));
            double t0 = now();
            CHECK(fl_model_forward(m, &x, &err));
            double t1 = now();
            CHECK(fl_coverset_update_model(s, m, added, &err));
            double t2 = now();
            CHECK(fl_cover_view_fill(&v, ls, m, s->needs, &err));
            double t3 = now();
            for (int k = 0; k < n_crit; k++) {
                double a = now();
                CHECK(fl_cover_update(s1->c[k], &v.b, added, NULL, &err));
                per[k] += now() - a;
            }
            fwd += t1 - t0, cov += t2 - t1, view += t3 - t2;
        }
        if (fwd < best_fwd) best_fwd = fwd;
        if (cov < best_cov) best_cov = cov;
        if (view < best_view) best_view = view;
        for (int k = 0; k < n_crit; k++)
            if (per[k] < best_c[k]) best_c[k] = per[k];
        free(per);
        fl_coverset_free(s1);
    }
    double f_ms = best_fwd * 1e3 / BATCHES, c_ms = best_cov * 1e3 / BATCHES;
    printf("{\"name\": \"cover_lenet5_b256\", \"threads\": %d, \"clock\": \"%s\", \"data\": \"%s\", \"neurons\": %lld, "
           "\"criteria\": \"%s\", \"inputs\": \"unseen\", \"forward_ms\": %.3f, \"cover_ms\": %.3f, \"ratio\": %.3f, "
           "\"neuron_values_ms\": %.3f",
           threads, cpu_clock ? "thread_cpu" : "wall", source, (long long)ls->total, SPEC, f_ms, c_ms, c_ms / f_ms,
           best_view * 1e3 / BATCHES);
    for (int k = 0; k < s->n; k++) {
        char key[64];
        snprintf(key, sizeof key, "%s", s->c[k]->ops->name);
        printf(", \"%s_ms\": %.3f", key, best_c[k] * 1e3 / BATCHES);
    }
    printf("}\n");
    fprintf(stderr, "coverage update / forward pass, batch %d, %d threads, inputs new to the set: %.1f%% (target <= 25%%)\n",
            BATCH, threads, 100 * c_ms / f_ms);
    free(best_c);
    fl_cover_view_free(&v);
    fl_tensor_free(&x);
    fl_coverset_free(s);
    fl_profile_free(p);
    fl_layerset_free(ls);
    fl_dataset_free(d);
    fl_dataset_free(train);
    fl_model_free(m);
    return 0;
}
