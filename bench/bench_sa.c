/* Surprise adequacy benchmark: LSA and DSA of the Fashion-MNIST test set (10 000 inputs)
 * against the training set (60 000) on LeNet-5's last hidden layer (84 neurons), timed here and
 * compared by bench/run.sh with bench/sa_baseline.py (sadl's way, numpy + scipy).
 *
 *   bench_sa dump DIR [MODEL.onnx]   activation traces and predictions of both sets as NPY in
 *                                    DIR (train_ats, train_pred, test_ats, test_pred); MODEL
 *                                    default: a LeNet-5 trained here for one epoch (seed 1)
 *   bench_sa run DIR [threads]       time LSA, DSA (Kim) and DSA (NLC) on those traces; writes
 *                                    DIR/flare_lsa.npy and DIR/flare_dsa.npy (for the
 *                                    baseline's agreement check) and prints JSON lines:
 *     {"name": "sa_lsa", "n_train", "n_test", "dim", "build_s", "score_s", "seconds"}
 *     {"name": "sa_dsa", ...}, {"name": "sa_dsa_nlc", ...}
 *     {"name": "sa_peak_rss", "kb"}   peak resident memory of the run (traces loaded, all three)
 * Two modes so that the peak memory of `run` counts surprise adequacy alone, not training. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "flare/onnx.h"
#include "flare/sa.h"
#include "flare/train.h"

#define LAYER "/relu4/Relu_output_0" /* LeNet-5 (zoo): fc2 (84) after its ReLU */

static fl_err err;
#define CHECK(x)                                                       \
    do {                                                               \
        if ((x) != FL_OK) {                                            \
            fprintf(stderr, "bench_sa: %s failed: %s\n", #x, err.msg); \
            exit(1);                                                   \
        }                                                              \
    } while (0)

static void path(char *buf, size_t n, const char *dir, const char *name) {
    snprintf(buf, n, "%s/%s.npy", dir, name);
}

static void dump_set(fl_model *m, const char *spec, const char *dir, const char *tag) {
    fl_dataset *d;
    CHECK(fl_dataset_load(spec, NULL, 0, &d, &err));
    float *tr;
    int32_t *pred;
    int64_t dim;
    CHECK(fl_sa_traces(m, LAYER, d, 256, &tr, &pred, &dim, &err));
    char p[512], name[64];
    int64_t shp[2] = {d->n, dim};
    snprintf(name, sizeof name, "%s_ats", tag);
    path(p, sizeof p, dir, name);
    CHECK(fl_npy_write(p, FL_DT_F32, 2, shp, tr, &err));
    snprintf(name, sizeof name, "%s_pred", tag);
    path(p, sizeof p, dir, name);
    CHECK(fl_npy_write(p, FL_DT_I32, 1, shp, pred, &err));
    fprintf(stderr, "bench_sa: %s traces [%lld, %lld] -> %s\n", spec, (long long)d->n,
            (long long)dim, dir);
    free(tr);
    free(pred);
    fl_dataset_free(d);
}

static int dump(const char *dir, const char *model) {
    fl_model *m;
    mkdir(dir, 0777);
    if (model) {
        CHECK(fl_onnx_load(model, &m, &err));
    } else {
        fl_dataset *tr;
        CHECK(fl_dataset_load("fashion-mnist:train", NULL, 0, &tr, &err));
        CHECK(fl_zoo_build("lenet5", 1, 28, 28, 10, 1, &m, &err));
        fl_train_opts o;
        fl_train_opts_default(&o);
        o.epochs = 1;
        o.seed = 1;
        CHECK(fl_train(m, tr, NULL, &o, &err));
        fl_dataset_free(tr);
    }
    dump_set(m, "fashion-mnist:train", dir, "train");
    dump_set(m, "fashion-mnist:test", dir, "test");
    fl_model_free(m);
    return 0;
}

typedef struct traces {
    fl_npy ats, pred;
    int64_t n, dim;
} traces;

static void load(const char *dir, const char *tag, traces *t) {
    char p[512], name[64];
    snprintf(name, sizeof name, "%s_ats", tag);
    path(p, sizeof p, dir, name);
    CHECK(fl_npy_read(p, &t->ats, &err));
    snprintf(name, sizeof name, "%s_pred", tag);
    path(p, sizeof p, dir, name);
    CHECK(fl_npy_read(p, &t->pred, &err));
    if (t->ats.dtype != FL_DT_F32 || t->ats.ndim != 2 || t->pred.dtype != FL_DT_I32 ||
        t->pred.count != t->ats.shape[0]) {
        fprintf(stderr, "bench_sa: %s: unexpected trace files (run `bench_sa dump` first)\n", dir);
        exit(1);
    }
    t->n = t->ats.shape[0];
    t->dim = t->ats.shape[1];
}

static void time_kind(const traces *tr, const traces *te, fl_sa_kind kind, fl_dsa_variant v,
                      const char *name, const char *out_path) {
    fl_sa_opts o;
    fl_sa_opts_init(&o, kind);
    o.dsa_variant = v;
    double *sa = malloc(sizeof(double) * (size_t)te->n);
    fl_sa *s;
    double t0 = fl_now();
    CHECK(fl_sa_new(tr->ats.data, tr->pred.data, tr->n, tr->dim, &o, &s, &err));
    double t1 = fl_now();
    CHECK(fl_sa_score(s, te->ats.data, te->pred.data, te->n, sa, &err));
    double t2 = fl_now();
    double mean = 0;
    for (int64_t i = 0; i < te->n; i++) mean += sa[i] / (double)te->n;
    printf("{\"name\": \"%s\", \"n_train\": %lld, \"n_test\": %lld, \"dim\": %lld, \"kept\": %lld, "
           "\"build_s\": %.4f, \"score_s\": %.4f, \"seconds\": %.4f, \"mean_sa\": %.6g}\n",
           name, (long long)tr->n, (long long)te->n, (long long)tr->dim, (long long)fl_sa_kept(s),
           t1 - t0, t2 - t1, t2 - t0, mean);
    fflush(stdout);
    if (out_path) {
        float *f = malloc(sizeof(float) * (size_t)te->n);
        for (int64_t i = 0; i < te->n; i++) f[i] = (float)sa[i];
        int64_t shp[1] = {te->n};
        CHECK(fl_npy_write(out_path, FL_DT_F32, 1, shp, f, &err));
        free(f);
    }
    fl_sa_free(s);
    free(sa);
}

static int run(const char *dir, int threads) {
    fl_threads_set(threads);
    traces tr, te;
    load(dir, "train", &tr);
    load(dir, "test", &te);
    if (tr.dim != te.dim) {
        fprintf(stderr, "bench_sa: train and test traces differ in width\n");
        return 1;
    }
    char p[512];
    path(p, sizeof p, dir, "flare_lsa");
    time_kind(&tr, &te, FL_SA_LSA, FL_DSA_KIM, "sa_lsa", p);
    path(p, sizeof p, dir, "flare_dsa");
    time_kind(&tr, &te, FL_SA_DSA, FL_DSA_KIM, "sa_dsa", p);
    time_kind(&tr, &te, FL_SA_DSA, FL_DSA_NLC, "sa_dsa_nlc", NULL);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("{\"name\": \"sa_peak_rss\", \"kb\": %ld}\n", ru.ru_maxrss);
    fl_npy_free(&tr.ats);
    fl_npy_free(&tr.pred);
    fl_npy_free(&te.ats);
    fl_npy_free(&te.pred);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 3 && !strcmp(argv[1], "dump")) return dump(argv[2], argc > 3 ? argv[3] : NULL);
    if (argc >= 3 && !strcmp(argv[1], "run")) return run(argv[2], argc > 3 ? atoi(argv[3]) : 2);
    fprintf(stderr, "usage: bench_sa dump DIR [MODEL.onnx] | bench_sa run DIR [threads]\n");
    return 2;
}
