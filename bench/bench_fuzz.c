/* bench_fuzz: the network campaign's numbers (docs/nn-fuzz.md).
 *
 *   bench_fuzz throughput DIR MODEL PROFILE THREADS EXECS
 *       100 random Fashion-MNIST test seeds (written to DIR/seeds.npy + .idx.npy for
 *       bench/fuzz_torch.py, which runs the same loop in PyTorch), then DeepHunter with
 *       kmnc:100 and nc:0.75 for EXECS mutants: one JSON line each with mutants/s.
 *   bench_fuzz guidance DIR MODEL PROFILE RUNS EXECS
 *       deephunter against random at the same budget, for kmnc:100 and nc:0.75, seeds 1..RUNS:
 *       the median coverage and distinct failures, as a table and JSON lines.
 *   bench_fuzz grad DIR MODEL THREADS EXECS
 *       the same 100 seeds; pgd and dlfuzz (nc:0.75, 64 lanes) for EXECS steps: one JSON line
 *       each with steps/s (bench/grad_torch.py runs the same loop with torch autograd); then
 *       deepsa (DSA on the LRP-important neurons of /relu4/Relu_output_0 against the 60 000
 *       training traces), reference and exact, with the share of a round that its SA takes.
 *   bench_fuzz nn DIM
 *       TensorFuzz's exact nearest-neighbour search: a batch of 64 against corpora of
 *       10^3..10^5 vectors of DIM values, microseconds per query.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flare/fuzz.h"
#include "flare/lrp.h"
#include "flare/onnx.h"
#include "flare/sa.h"
#include "flare/select.h"
#include "fuzz/fuzz_int.h"

static fl_dataset *seeds_of(fl_model *m, const char *dir, fl_err *e) {
    fl_dataset *test, *sub = NULL;
    if (fl_dataset_load("fashion-mnist:test", NULL, 0, &test, e)) return NULL;
    fl_select_opts so;
    fl_select_opts_default(&so);
    so.strategy = FL_SEL_RANDOM;
    so.n = 100;
    so.seed = 1;
    fl_selection *s;
    char path[4096];
    snprintf(path, sizeof path, "%s/seeds.npy", dir);
    if (!fl_select(m, test, &so, &s, e)) {
        if (!fl_selection_save(s, test, path, e)) fl_dataset_subset(test, s->index, s->n, &sub, e);
        fl_selection_free(s);
    }
    fl_dataset_free(test);
    return sub;
}

static int run(fl_model *m, fl_dataset *seeds, fl_profile *p, const char *dir, const char *tag,
               fl_fuzz_strategy strat, const char *crit, uint64_t seed, int64_t execs,
               fl_fuzz_result *r) {
    char out[4096], cmd[4200];
    snprintf(out, sizeof out, "%s/%s", dir, tag);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", out);
    if (system(cmd)) return 1;
    fl_fuzz_opts o;
    fl_fuzz_opts_default(&o);
    o.model = m;
    o.seeds = seeds;
    o.profile = p;
    o.criterion = crit;
    o.strategy = strat;
    o.out_dir = out;
    o.max_execs = execs;
    o.seed = seed;
    fl_err e = {0};
    if (fl_fuzz_run(&o, r, &e)) {
        fprintf(stderr, "bench_fuzz: %s\n", e.msg);
        return 1;
    }
    return 0;
}

/* The physical floor of a mutation loop on this model: the network's forward pass and the
 * criterion's coverage update alone, on EXECS seed images in batches of 64 (DeepHunter's K),
 * no mutation, no queue, no files. A loop cannot beat it; the PyTorch loop's ratio to flare is
 * bounded by how much of its own time is outside it. */
static int floor_bench(fl_model *m, fl_dataset *seeds, fl_profile *p, const char *crit,
                       int64_t execs) {
    fl_err e = {0};
    fl_layerset *ls = NULL;
    fl_coverset *cs = NULL;
    char *layers = fl_profile_layers(p);
    fl_status st = layers ? fl_layerset_make(m, layers, &ls, &e) : fl_fail(&e, FL_ERR_NOMEM, "out of memory");
    free(layers);
    if (!st) {
        fl_cover_ctx ctx = {.m = m, .ls = ls, .profile = p};
        st = fl_coverset_new(&ctx, crit, &cs, &e);
    }
    if (st) {
        fprintf(stderr, "bench_fuzz: floor: %s\n", e.msg);
        fl_layerset_free(ls);
        return 1;
    }
    fl_tensor x = {0};
    uint8_t added[64];
    int64_t done = 0;
    double t0 = fl_now();
    while (done < execs) {
        int64_t b = seeds->n < 64 ? seeds->n : 64, off = (done / b) * b % (seeds->n - b + 1);
        int64_t shp[4] = {b, seeds->c, seeds->h, seeds->w};
        fl_tensor_set_shape(&x, 4, shp);
        if (fl_dataset_batch(seeds, off, b, &x, &e) || fl_model_forward(m, &x, &e) ||
            fl_coverset_update_model(cs, m, added, &e)) {
            fprintf(stderr, "bench_fuzz: floor: %s\n", e.msg);
            return 1;
        }
        done += b;
    }
    double s = fl_now() - t0;
    printf("{\"name\": \"fuzz_floor_%.*s\", \"criterion\": \"%s\", \"execs\": %lld, \"seconds\": %.3f, "
           "\"inputs_per_s\": %.1f, \"threads\": %d}\n",
           (int)strcspn(crit, ":"), crit, crit, (long long)done, s, (double)done / s, fl_threads_get());
    fl_tensor_free(&x);
    fl_coverset_free(cs);
    fl_layerset_free(ls);
    return 0;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int nn_bench(int d) {
    fz_novelty nv = {.d = d};
    fl_rng r;
    fl_rng_seed(&r, 1);
    float *x = malloc(sizeof(float) * 64 * (size_t)d), *v = malloc(sizeof(float) * (size_t)d);
    double dist[64];
    fl_err e;
    for (int i = 0; i < 64 * d; i++) x[i] = fl_rng_normal(&r);
    for (int64_t size = 1000; size <= 100000; size *= 10) {
        while (nv.n < size) {
            for (int k = 0; k < d; k++) v[k] = fl_rng_normal(&r);
            if (fz_novelty_add(&nv, v, &e)) return 1;
        }
        int reps = (int)(2000000 / size) + 1;
        double t0 = fl_now();
        for (int i = 0; i < reps; i++) fz_novelty_nearest(&nv, x, 64, dist, &e);
        double us = (fl_now() - t0) / reps / 64 * 1e6;
        printf("{\"name\": \"tensorfuzz_nn_%lld\", \"corpus\": %lld, \"dim\": %d, \"us_per_query\": %.3f}\n",
               (long long)size, (long long)size, d, us);
    }
    fz_novelty_free(&nv);
    free(x);
    free(v);
    return 0;
}

/* deepsa's setting: important neurons of one hidden layer, the training set. */
static int grad_bench(const char *dir, const char *model, int threads, int64_t execs) {
    fl_err e = {0};
    fl_model *m;
    fl_dataset *train = NULL, *seeds;
    if (fl_onnx_load(model, &m, &e) || !(seeds = seeds_of(m, dir, &e)) ||
        fl_dataset_load("fashion-mnist:train", NULL, 0, &train, &e)) {
        fprintf(stderr, "bench_fuzz: %s\n", e.msg);
        return 1;
    }
    fl_threads_set(threads);
    static const fl_fuzz_strategy ss[] = {FL_FUZZ_PGD, FL_FUZZ_DLFUZZ, FL_FUZZ_DEEPSA, FL_FUZZ_DEEPSA};
    const char *layer = "/relu4/Relu_output_0";
    char imp_path[4096];
    snprintf(imp_path, sizeof imp_path, "%s/important.json", dir);
    fl_important_opts io;
    fl_important_opts_default(&io);
    io.layers = layer;
    fl_dataset *sub;
    int64_t first[5000];
    for (int i = 0; i < 5000; i++) first[i] = i;
    fl_important *imp;
    if (fl_dataset_subset(train, first, 5000, &sub, &e) || fl_important_compute(m, sub, &io, &imp, &e) ||
        fl_important_save(imp, imp_path, &e)) {
        fprintf(stderr, "bench_fuzz: %s\n", e.msg);
        return 1;
    }
    for (int k = 0; k < 4; k++) {
        char out[4096], cmd[4200];
        snprintf(out, sizeof out, "%s/grad", dir);
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", out);
        if (system(cmd)) return 1;
        fl_fuzz_opts o;
        fl_fuzz_opts_default(&o);
        o.model = m;
        o.seeds = seeds;
        o.strategy = ss[k];
        o.out_dir = out;
        o.max_execs = execs;
        o.seed = 1;
        o.train = train;
        o.important = imp_path;
        o.sa_exact = k == 3;
        fl_fuzz_result r;
        double t0 = fl_now();
        if (fl_fuzz_run(&o, &r, &e)) {
            fprintf(stderr, "bench_fuzz: %s\n", e.msg);
            return 1;
        }
        const char *name = k < 2 ? fl_fuzz_strategy_name(ss[k]) : k == 2 ? "deepsa_dsa_reference"
                                                                         : "deepsa_dsa_exact";
        double sa_share = -1;
        if (k >= 2) { /* the SA of one round's 64 traces, timed alone, against a round */
            float *tr;
            int32_t *pred;
            int64_t dim;
            fl_sa_opts so;
            fl_sa_opts_init(&so, FL_SA_DSA);
            so.neurons = NULL;
            const fl_important_layer *il = fl_important_layer_find(imp, layer);
            so.neurons = il->neuron;
            so.n_neurons = il->count;
            fl_sa *sa;
            if (fl_sa_traces(m, layer, train, 256, &tr, &pred, &dim, &e) ||
                fl_sa_new(tr, pred, train->n, dim, &so, &sa, &e)) {
                fprintf(stderr, "bench_fuzz: %s\n", e.msg);
                return 1;
            }
            double val[64];
            float *g = malloc(sizeof(float) * 64 * (size_t)dim);
            int reps = 20;
            double t1 = fl_now();
            for (int rep = 0; rep < reps; rep++) /* test-set-like traces: training rows 0..63 */
                if (k == 3 ? fl_sa_grad(sa, tr, pred, 64, val, g, &e) : fl_sa_score(sa, tr, pred, 64, val, &e))
                    return 1;
            double per_round = (fl_now() - t1) / reps, round = 64.0 / r.last.execs_per_s;
            sa_share = per_round / round;
            free(g);
            free(tr);
            free(pred);
            fl_sa_free(sa);
        }
        printf("{\"name\": \"grad_flare_%s\", \"execs\": %lld, \"seconds\": %.3f, \"steps_per_s\": "
               "%.1f, \"failures\": %lld, \"failures_total\": %lld, \"corpus\": %lld, "
               "\"sa_share\": %.3f, \"threads\": %d, \"total_s\": %.2f}\n",
               name, (long long)r.last.execs, r.last.elapsed, r.last.execs_per_s,
               (long long)r.last.failures, (long long)r.last.failures_total,
               (long long)r.last.corpus, sa_share, fl_threads_get(), fl_now() - t0);
    }
    fl_important_free(imp);
    fl_dataset_free(sub);
    fl_dataset_free(train);
    fl_dataset_free(seeds);
    fl_model_free(m);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "nn")) return nn_bench(atoi(argv[2]));
    if (argc == 6 && !strcmp(argv[1], "grad"))
        return grad_bench(argv[2], argv[3], atoi(argv[4]), atoll(argv[5]));
    if (argc != 7) {
        fprintf(stderr, "usage: bench_fuzz throughput|guidance DIR MODEL PROFILE THREADS|RUNS EXECS\n"
                        "       bench_fuzz grad DIR MODEL THREADS EXECS\n"
                        "       bench_fuzz nn DIM\n");
        return 2;
    }
    const char *dir = argv[2];
    int64_t execs = atoll(argv[6]);
    fl_err e = {0};
    fl_model *m;
    fl_profile *p;
    if (fl_onnx_load(argv[3], &m, &e) || fl_profile_load(argv[4], &p, &e)) {
        fprintf(stderr, "bench_fuzz: %s\n", e.msg);
        return 1;
    }
    fl_dataset *seeds = seeds_of(m, dir, &e);
    if (!seeds) {
        fprintf(stderr, "bench_fuzz: %s\n", e.msg);
        return 1;
    }
    static const char *const crit[] = {"kmnc:100", "nc:0.75"};
    fl_fuzz_result r;
    if (!strcmp(argv[1], "throughput")) {
        fl_threads_set(atoi(argv[5]));
        for (int c = 0; c < 2; c++) {
            if (run(m, seeds, p, dir, "tp", FL_FUZZ_DEEPHUNTER, crit[c], 1, execs, &r)) return 1;
            printf("{\"name\": \"fuzz_deephunter_%.*s\", \"criterion\": \"%s\", \"execs\": %lld, "
                   "\"seconds\": %.3f, \"mutants_per_s\": %.1f, \"corpus\": %lld, \"covered\": %lld, "
                   "\"total\": %lld, \"failures\": %lld, \"threads\": %d}\n",
                   (int)strcspn(crit[c], ":"), crit[c], crit[c], (long long)r.last.execs,
                   r.last.elapsed, r.last.execs_per_s, (long long)r.last.corpus,
                   (long long)r.last.covered, (long long)r.last.total, (long long)r.last.failures,
                   fl_threads_get());
            if (floor_bench(m, seeds, p, crit[c], execs)) return 1;
        }
        return 0;
    }
    int runs = atoi(argv[5]);
    printf("%-10s %-11s %14s %14s %12s %12s\n", "criterion", "strategy", "coverage", "(min-max)",
           "failures", "(min-max)");
    for (int c = 0; c < 2; c++)
        for (int s = 0; s < 2; s++) {
            double cov[64], fail[64];
            fl_fuzz_strategy st = s ? FL_FUZZ_RANDOM : FL_FUZZ_DEEPHUNTER;
            for (int k = 0; k < runs && k < 64; k++) {
                if (run(m, seeds, p, dir, "gd", st, crit[c], (uint64_t)k + 1, execs, &r)) return 1;
                cov[k] = 100.0 * (double)r.last.covered / (double)r.last.total;
                fail[k] = (double)r.last.failures;
            }
            double cmin = cov[0], cmax = cov[0], fmin = fail[0], fmax = fail[0];
            for (int k = 1; k < runs; k++) {
                if (cov[k] < cmin) cmin = cov[k];
                if (cov[k] > cmax) cmax = cov[k];
                if (fail[k] < fmin) fmin = fail[k];
                if (fail[k] > fmax) fmax = fail[k];
            }
            double mc = median(cov, runs), mf = median(fail, runs);
            printf("%-10s %-11s %13.2f%% %6.2f-%-6.2f %12.0f %5.0f-%-5.0f\n", crit[c],
                   fl_fuzz_strategy_name(st), mc, cmin, cmax, mf, fmin, fmax);
            fprintf(stderr, "{\"name\": \"guidance_%s_%s\", \"coverage\": %.4f, \"failures\": %.1f, "
                            "\"runs\": %d, \"execs\": %lld}\n",
                    crit[c], fl_fuzz_strategy_name(st), mc, mf, runs, (long long)execs);
        }
    return 0;
}
