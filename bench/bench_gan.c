/* bench_gan: FuzzGAN's numbers (docs/fuzzgan.md).
 *
 *   bench_gan train MODEL THREADS BATCHES
 *       fl_gan_train on Fashion-MNIST against MODEL, batch 128: seconds per batch over batches
 *       11..BATCHES (the first ten warm up), from the progress callback, so the epoch-end
 *       evaluation, grid and checkpoint are not counted. bench/gan_torch.py times the same
 *       networks, losses and batch in PyTorch.
 *   bench_gan fuzz MODEL GEN THREADS EXECS
 *       a fuzzgan campaign (nc:0.6:meanabs, 64 cases a round) for EXECS cases: cases/s with
 *       coverage and oracles; and its floor measured in the same run: the generator's and the
 *       model's forward passes alone for the same batches.
 * One JSON line per measurement.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flare/fuzz.h"
#include "flare/gan.h"
#include "flare/onnx.h"

typedef struct clock_ctx {
    double t10, tlast;
    int64_t b10, blast;
    int batch;
} clock_ctx;

static void on_progress(const fl_gan_progress *p, void *user) {
    clock_ctx *c = user;
    int64_t b = p->done / c->batch;
    if (b == 10) c->t10 = fl_now(), c->b10 = b;
    c->tlast = fl_now(), c->blast = b;
}

static int bench_train(const char *model, int threads, int64_t batches) {
    fl_err e = {0};
    fl_model *m;
    fl_dataset *d;
    if (fl_onnx_load(model, &m, &e) || fl_dataset_load("fashion-mnist:train", NULL, 0, &d, &e)) {
        fprintf(stderr, "bench_gan: %s\n", e.msg);
        return 1;
    }
    fl_threads_set(threads);
    fl_gan_opts o;
    fl_gan_opts_default(&o);
    o.epochs = 1;
    o.max_batches = batches;
    o.work_dir = "build/bench/tmp/gan_train";
    clock_ctx c = {0};
    c.batch = o.batch;
    o.progress = on_progress;
    o.user = &c;
    fl_model *g = NULL;
    if (fl_gan_train(m, d, &o, &g, &e)) {
        fprintf(stderr, "bench_gan: %s\n", e.msg);
        return 1;
    }
    double per = (c.tlast - c.t10) / (double)(c.blast - c.b10);
    printf("{\"name\": \"gan_train_flare\", \"threads\": %d, \"batch\": %d, \"batches\": %lld, "
           "\"s_per_batch\": %.5f, \"s_per_epoch\": %.1f}\n",
           threads, o.batch, (long long)(c.blast - c.b10), per, per * (double)(d->n / o.batch));
    fl_model_free(g);
    fl_model_free(m);
    fl_dataset_free(d);
    return 0;
}

static int bench_fuzz(const char *model, const char *genp, int threads, int64_t execs) {
    fl_err e = {0};
    fl_model *m, *g;
    fl_gan *gen;
    if (fl_onnx_load(model, &m, &e) || fl_onnx_load(genp, &g, &e) ||
        fl_gan_open(g, genp, &gen, &e)) {
        fprintf(stderr, "bench_gan: %s\n", e.msg);
        return 1;
    }
    fl_threads_set(threads);
    fl_fuzz_opts o;
    fl_fuzz_opts_default(&o);
    o.strategy = FL_FUZZ_FUZZGAN;
    o.model = m;
    o.gen = gen;
    o.criterion = "nc:0.6:meanabs";
    o.max_execs = execs;
    o.out_dir = "build/bench/tmp/gan_fuzz";
    if (system("rm -rf build/bench/tmp/gan_fuzz")) return 1;
    fl_fuzz_result r;
    if (fl_fuzz_run(&o, &r, &e)) {
        fprintf(stderr, "bench_gan: %s\n", e.msg);
        return 1;
    }
    /* the floor: generator + model forward passes of the same batches, nothing else */
    enum { K = 64 };
    int32_t cls[K];
    int64_t neu[K];
    fl_rng rng;
    fl_rng_seed(&rng, 1);
    fl_tensor img = {0};
    double t0 = fl_now();
    int64_t done = 0;
    for (; done < execs; done += K) {
        for (int i = 0; i < K; i++)
            cls[i] = (int32_t)fl_rng_below(&rng, (uint32_t)gen->n_classes),
            neu[i] = fl_rng_below(&rng, (uint32_t)gen->n_neurons);
        if (fl_gan_generate(gen, K, cls, neu, &rng, &img, &e) || fl_model_forward(m, &img, &e)) {
            fprintf(stderr, "bench_gan: %s\n", e.msg);
            return 1;
        }
    }
    double floor_rate = (double)done / (fl_now() - t0);
    printf("{\"name\": \"gan_fuzz_flare\", \"threads\": %d, \"execs\": %lld, \"cases_per_s\": %.1f, "
           "\"floor_cases_per_s\": %.1f, \"coverage\": %.4f, \"failures\": %lld}\n",
           threads, (long long)r.last.execs, r.last.execs_per_s, floor_rate,
           r.last.total ? (double)r.last.covered / (double)r.last.total : 0.0,
           (long long)r.last.failures);
    fl_tensor_free(&img);
    fl_gan_free(gen);
    fl_model_free(m);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 5 && !strcmp(argv[1], "train")) return bench_train(argv[2], atoi(argv[3]), atoll(argv[4]));
    if (argc == 6 && !strcmp(argv[1], "fuzz"))
        return bench_fuzz(argv[2], argv[3], atoi(argv[4]), atoll(argv[5]));
    fprintf(stderr, "usage: bench_gan train MODEL THREADS BATCHES | fuzz MODEL GEN THREADS EXECS\n");
    return 2;
}
