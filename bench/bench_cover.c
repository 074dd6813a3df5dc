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
 * Usage: bench_cover [threads]   (default 2, as bench_nn) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "flare/cover.h"
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

int main(int argc, char **argv) {
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
