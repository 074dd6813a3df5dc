/* Engine benchmarks. Prints one JSON object per line (bench/run.sh turns them into ratios
 * against the named baselines):
 *   lenet5_train_b64   training images/s, LeNet-5, batch 64 (SGD momentum step included)
 *   lenet5_infer_b256  inference images/s, LeNet-5, batch 256
 *   conv_vs_sgemm      a large 3x3 convolution (forward) as a fraction of the throughput of a
 *                      bare cblas_sgemm with the same FLOP count (baseline: OpenBLAS itself,
 *                      with its own threads, as many as flare uses); resnet18_*_vs_sgemm the
 *                      same for ResNet-18's largest convolutions at 64x64, batch 32
 *   zoo_NAME_b32       (bench_nn zoo) inference images/s of DIR/NAME.onnx, batch 32, 3x64x64
 *   big_NAME_load      (bench_nn big) fl_onnx_load of DIR/NAME.onnx: the median of 5 loads
 *   big_NAME_bB        (bench_nn big) batch B of 3xSIDExSIDE: first_s, the first forward pass
 *                      after the load (it plans the buffers: the time to the first output),
 *                      and images_per_s, the median of REPS timed runs after one more
 *                      untimed pass (a run: as many passes as fill about 0.25 s)
 *   grad_NAME_bB       (bench_nn grad) a gradient step: forward + fl_model_backward of
 *                      sum(logits * seed) to the input, images/s as above
 * Usage: bench_nn [threads]   (default 2, the PyTorch baseline uses the same)
 *        bench_nn zoo DIR THREADS REPS NAME...   (models from bench/torch_bench.py export)
 *        bench_nn big DIR SIDE THREADS REPS BATCHES NAME...   (BATCHES: 1,8,32)
 *        bench_nn grad DIR SIDE THREADS REPS BATCH NAME
 * (bench/torch_bench.py big / grad are the same rows in PyTorch; peak RSS is measured per
 * configuration in its own process by bench/run.sh, with `flare nn run`.) */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flare/onnx.h"
#include "flare/train.h"


/* Benchmarks stop at the first failure, printing the library's message. */
#define CHECK(x)                                                       \
    do {                                                               \
        if ((x) != FL_OK) {                                            \
            fprintf(stderr, "bench_nn: %s failed: %s\n", #x, err.msg); \
            exit(1);                                                   \
        }                                                              \
    } while (0)

static fl_err err;

static fl_tensor random_images(int n, fl_rng *r) {
    fl_tensor x = {0};
    int64_t shp[4] = {n, 1, 28, 28};
    if (fl_tensor_alloc(&x, 4, shp) != FL_OK) exit(1);
    for (int64_t i = 0; i < x.size; i++) x.data[i] = fl_rng_uniform(r);
    return x;
}

static double bench_train(int batch, int steps) {
    fl_model *m;
    fl_rng r;
    fl_rng_seed(&r, 1);
    CHECK(fl_zoo_build("lenet5", 1, 28, 28, 10, 1, &m, &err));
    fl_optim_opts oo;
    fl_optim_opts_default(&oo, FL_OPTIM_SGD);
    oo.momentum = 0.9f;
    fl_optim *opt;
    CHECK(fl_optim_new(m, &oo, &opt, &err));
    m->training = 1;
    m->skip_input_grad = 1;
    fl_tensor x = random_images(batch, &r), dl = {0};
    int32_t *y = malloc(sizeof(int32_t) * (size_t)batch);
    for (int i = 0; i < batch; i++) y[i] = (int32_t)fl_rng_below(&r, 10);
    int64_t dshp[2] = {batch, 10};
    CHECK(fl_tensor_alloc(&dl, 2, dshp));
    int out = m->outputs[0];
    double t0 = 0;
    for (int s = 0; s < steps + 5; s++) {
        if (s == 5) t0 = fl_now();
        fl_model_zero_param_grads(m);
        CHECK(fl_model_forward(m, &x, &err));
        fl_loss_ce(dl.data, fl_model_output(m, 0)->data, y, batch, 10);
        CHECK(fl_model_backward_idx(m, 1, &out, &dl, &err));
        fl_optim_step(opt);
    }
    double ips = (double)batch * steps / (fl_now() - t0);
    free(y);
    fl_tensor_free(&x);
    fl_tensor_free(&dl);
    fl_optim_free(opt);
    fl_model_free(m);
    return ips;
}

static double bench_infer(int batch, int steps) {
    fl_model *m;
    fl_rng r;
    fl_rng_seed(&r, 2);
    CHECK(fl_zoo_build("lenet5", 1, 28, 28, 10, 1, &m, &err));
    fl_tensor x = random_images(batch, &r);
    double t0 = 0;
    for (int s = 0; s < steps + 3; s++) {
        if (s == 3) t0 = fl_now();
        CHECK(fl_model_forward(m, &x, &err));
    }
    double ips = (double)batch * steps / (fl_now() - t0);
    fl_tensor_free(&x);
    fl_model_free(m);
    return ips;
}

/* One convolution, forward, against a bare cblas_sgemm of its im2col product:
 * M = m, K = c*k*k, N = n*oh*ow (the same FLOPs). */
typedef struct conv_case {
    int n, c, h, w, m, k, stride, pad;
} conv_case;

static int cmp_double(const void *a, const void *b);

/* The median GFLOP/s of `reps` timed calls of f(ctx), after one untimed call. */
static double median_gflops(void (*f)(void *), void *ctx, double flops, int reps) {
    double v[16];
    if (reps > 16) reps = 16;
    f(ctx);
    for (int i = 0; i < reps; i++) {
        double t0 = fl_now();
        f(ctx);
        v[i] = flops / (fl_now() - t0) * 1e-9;
    }
    qsort(v, (size_t)reps, sizeof *v, cmp_double);
    return v[reps / 2];
}

typedef struct conv_run {
    fl_model *m;
    fl_tensor *x;
    int M, N, K;
    float *A, *B, *C;
} conv_run;

static void run_conv(void *ctx) {
    conv_run *r = ctx;
    CHECK(fl_model_forward(r->m, r->x, &err));
}

/* cblas itself, not fl_sgemm (which would split the product over flare's own threads) */
static void run_sgemm(void *ctx) {
    conv_run *r = ctx;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r->M, r->N, r->K, 1, r->A, r->K, r->B,
                r->N, 0, r->C, r->N);
}

static void bench_conv_vs_sgemm(const conv_case *cc, int reps, double *conv_gflops,
                                double *sgemm_gflops) {
    fl_rng r;
    fl_rng_seed(&r, 3);
    fl_err e = {0};
    fl_model *m = fl_model_new();
    int64_t xs[4] = {0, cc->c, cc->h, cc->w}, ws[4] = {cc->m, cc->c, cc->k, cc->k}, bs[1] = {cc->m};
    fl_tensor decl = {0}, w = {0}, b = {0};
    fl_tensor_set_shape(&decl, 4, xs);
    CHECK(fl_tensor_alloc(&w, 4, ws));
    CHECK(fl_tensor_alloc(&b, 1, bs));
    for (int64_t i = 0; i < w.size; i++) w.data[i] = fl_rng_uniform(&r) - 0.5f;
    int in[3];
    in[0] = fl_model_add_value(m, "x", FL_VAL_INPUT, &decl, &e);
    in[1] = fl_model_add_value(m, "w", FL_VAL_PARAM, &w, &e);
    in[2] = fl_model_add_value(m, "b", FL_VAL_PARAM, &b, &e);
    int64_t pads[4] = {cc->pad, cc->pad, cc->pad, cc->pad}, st[2] = {cc->stride, cc->stride};
    fl_attr a[2] = {fl_attr_ints("pads", 4, pads), fl_attr_ints("strides", 2, st)};
    int y = fl_model_add_op(m, "Conv", "conv", 3, in, 2, a, &e);
    if (y < 0 || fl_model_set_io(m, 1, in, 1, &y, &e) != FL_OK || fl_model_finish(m, &e) != FL_OK) {
        fprintf(stderr, "bench_nn: conv model: %s\n", e.msg);
        exit(1);
    }
    int64_t shp[4] = {cc->n, cc->c, cc->h, cc->w};
    fl_tensor x = {0};
    CHECK(fl_tensor_alloc(&x, 4, shp));
    for (int64_t i = 0; i < x.size; i++) x.data[i] = fl_rng_uniform(&r);
    int oh = (cc->h + 2 * cc->pad - cc->k) / cc->stride + 1;
    int ow = (cc->w + 2 * cc->pad - cc->k) / cc->stride + 1;
    conv_run R = {.m = m, .x = &x, .M = cc->m, .N = cc->n * oh * ow, .K = cc->c * cc->k * cc->k};
    double flops = 2.0 * R.M * R.K * (double)R.N;
    *conv_gflops = median_gflops(run_conv, &R, flops, reps);

    /* the baseline is OpenBLAS at its best: its own threads, as many as flare uses */
    openblas_set_num_threads(fl_threads_get());
    R.A = fl_alloc(sizeof(float) * (size_t)R.M * R.K);
    R.B = fl_alloc(sizeof(float) * (size_t)R.K * R.N);
    R.C = fl_alloc(sizeof(float) * (size_t)R.M * R.N);
    *sgemm_gflops = median_gflops(run_sgemm, &R, flops, reps);
    openblas_set_num_threads(1);
    fl_free(R.A);
    fl_free(R.B);
    fl_free(R.C);
    fl_tensor_free(&x);
    fl_tensor_free(&w);
    fl_tensor_free(&b);
    fl_model_free(m);
}

static void print_conv_vs_sgemm(const char *name, const conv_case *cc, int threads, int reps) {
    double cg, sg;
    bench_conv_vs_sgemm(cc, reps, &cg, &sg);
    int oh = (cc->h + 2 * cc->pad - cc->k) / cc->stride + 1;
    int ow = (cc->w + 2 * cc->pad - cc->k) / cc->stride + 1;
    printf("{\"name\": \"%s\", \"threads\": %d, \"M\": %d, \"N\": %d, \"K\": %d, "
           "\"conv_gflops\": %.2f, \"sgemm_gflops\": %.2f, \"ratio\": %.3f}\n",
           name, threads, cc->m, cc->n * oh * ow, cc->c * cc->k * cc->k, cg, sg, cg / sg);
    fflush(stdout);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Inference images/s of DIR/NAME.onnx (exported by bench/torch_bench.py zoo), batch 32 of
 * 3x64x64: the median of `reps` timed runs of `steps` forward passes, after one untimed pass
 * (it plans the buffers). */
static double bench_onnx(const char *dir, const char *name, int batch, int reps, int steps) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.onnx", dir, name);
    fl_model *m;
    CHECK(fl_onnx_load(path, &m, &err));
    fl_rng r;
    fl_rng_seed(&r, 4);
    fl_tensor x = {0};
    int64_t shp[4] = {batch, 3, 64, 64};
    CHECK(fl_tensor_alloc(&x, 4, shp));
    for (int64_t i = 0; i < x.size; i++) x.data[i] = fl_rng_normal(&r);
    CHECK(fl_model_forward(m, &x, &err));
    double v[16];
    if (reps > 16) reps = 16;
    for (int k = 0; k < reps; k++) {
        double t0 = fl_now();
        for (int s = 0; s < steps; s++) CHECK(fl_model_forward(m, &x, &err));
        v[k] = (double)batch * steps / (fl_now() - t0);
    }
    qsort(v, (size_t)reps, sizeof *v, cmp_double);
    fl_tensor_free(&x);
    fl_model_free(m);
    return v[reps / 2];
}

/* Best of three runs: on a shared machine the fastest run is the one least disturbed. */
static double best_of_3(double (*f)(int, int), int batch, int steps) {
    double best = 0;
    for (int i = 0; i < 3; i++) {
        double v = f(batch, steps);
        if (v > best) best = v;
    }
    return best;
}

/* bench_nn zoo DIR THREADS REPS MODEL...: one line per model */
static int main_zoo(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: bench_nn zoo DIR THREADS REPS MODEL...\n");
        return 2;
    }
    int threads = atoi(argv[3]), reps = atoi(argv[4]);
    fl_threads_set(threads);
    for (int i = 5; i < argc; i++) {
        printf("{\"name\": \"zoo_%s_b32\", \"threads\": %d, \"images_per_s\": %.1f}\n",
               argv[i], threads, bench_onnx(argv[2], argv[i], 32, reps, 3));
        fflush(stdout);
    }
    return 0;
}

/* A batch of normal(0, 1) inputs [batch, 3, side, side] (the exports take any batch). */
static fl_tensor random_input(int batch, int side, uint64_t seed) {
    fl_rng r;
    fl_rng_seed(&r, seed);
    fl_tensor x = {0};
    int64_t shp[4] = {batch, 3, side, side};
    CHECK(fl_tensor_alloc(&x, 4, shp));
    for (int64_t i = 0; i < x.size; i++) x.data[i] = fl_rng_normal(&r);
    return x;
}

typedef void (*pass_fn)(fl_model *m, const fl_tensor *x, void *ctx);

/* The first call of f (seconds), one more untimed call, then the median images/s of `reps`
 * timed runs of as many calls as fill about 0.25 s (the untimed call's time decides). */
static double timed_ips(pass_fn f, fl_model *m, const fl_tensor *x, void *ctx, int reps,
                        double *first_s) {
    double t0 = fl_now();
    f(m, x, ctx);
    *first_s = fl_now() - t0;
    t0 = fl_now();
    f(m, x, ctx);
    double t = fl_now() - t0;
    int steps = t > 0 ? (int)(0.25 / t) : 50;
    steps = steps < 1 ? 1 : steps > 50 ? 50 : steps;
    double v[16];
    if (reps > 16) reps = 16;
    if (reps < 1) reps = 1;
    for (int k = 0; k < reps; k++) {
        t0 = fl_now();
        for (int s = 0; s < steps; s++) f(m, x, ctx);
        v[k] = (double)x->shape[0] * steps / (fl_now() - t0);
    }
    qsort(v, (size_t)reps, sizeof *v, cmp_double);
    return reps % 2 ? v[reps / 2] : 0.5 * (v[reps / 2 - 1] + v[reps / 2]);
}

static void pass_forward(fl_model *m, const fl_tensor *x, void *ctx) {
    (void)ctx;
    CHECK(fl_model_forward(m, x, &err));
}

/* forward, then the gradient of sum(logits * seed) with respect to the input */
static void pass_grad(fl_model *m, const fl_tensor *x, void *ctx) {
    const fl_tensor *seed = ctx;
    int out = m->outputs[0];
    CHECK(fl_model_forward(m, x, &err));
    CHECK(fl_model_backward_idx(m, 1, &out, seed, &err));
}

static void model_path(char *buf, size_t n, const char *dir, const char *name) {
    snprintf(buf, n, "%s/%s.onnx", dir, name);
}

/* bench_nn big DIR SIDE THREADS REPS BATCHES NAME...: per model its load line, then one line
 * per batch. Each batch runs on the model as loaded (a fresh load per batch: the first pass
 * of each batch is the time to the first output of a model just loaded). */
static int main_big(int argc, char **argv) {
    if (argc < 8) {
        fprintf(stderr, "usage: bench_nn big DIR SIDE THREADS REPS BATCHES NAME...\n");
        return 2;
    }
    const char *dir = argv[2];
    int side = atoi(argv[3]), threads = atoi(argv[4]), reps = atoi(argv[5]);
    fl_threads_set(threads);
    for (int i = 7; i < argc; i++) {
        char path[4096];
        model_path(path, sizeof path, dir, argv[i]);
        double lt[5];
        for (int k = 0; k < 5; k++) {
            fl_model *m;
            double t0 = fl_now();
            CHECK(fl_onnx_load(path, &m, &err));
            lt[k] = fl_now() - t0;
            fl_model_free(m);
        }
        qsort(lt, 5, sizeof *lt, cmp_double);
        printf("{\"name\": \"big_%s_load\", \"side\": %d, \"load_s\": %.4f}\n", argv[i], side, lt[2]);
        fflush(stdout);
        for (const char *b = argv[6]; *b; b += strcspn(b, ","), b += *b == ',') {
            int batch = atoi(b);
            fl_model *m;
            double t0 = fl_now();
            CHECK(fl_onnx_load(path, &m, &err));
            double load = fl_now() - t0, first;
            fl_tensor x = random_input(batch, side, 4);
            double ips = timed_ips(pass_forward, m, &x, NULL, reps, &first);
            printf("{\"name\": \"big_%s_b%d\", \"side\": %d, \"batch\": %d, \"threads\": %d, "
                   "\"first_s\": %.4f, \"load_plus_first_s\": %.4f, \"images_per_s\": %.2f}\n",
                   argv[i], batch, side, batch, threads, first, load + first, ips);
            fflush(stdout);
            fl_tensor_free(&x);
            fl_model_free(m);
        }
    }
    return 0;
}

/* bench_nn grad DIR SIDE THREADS REPS BATCH NAME: one line */
static int main_grad(int argc, char **argv) {
    if (argc != 8) {
        fprintf(stderr, "usage: bench_nn grad DIR SIDE THREADS REPS BATCH NAME\n");
        return 2;
    }
    int side = atoi(argv[3]), threads = atoi(argv[4]), reps = atoi(argv[5]), batch = atoi(argv[6]);
    fl_threads_set(threads);
    char path[4096];
    model_path(path, sizeof path, argv[2], argv[7]);
    fl_model *m;
    CHECK(fl_onnx_load(path, &m, &err));
    fl_tensor x = random_input(batch, side, 4);
    CHECK(fl_model_forward(m, &x, &err)); /* the output's shape, for the seed */
    const fl_tensor *y = fl_model_output(m, 0);
    fl_tensor seed = {0};
    CHECK(fl_tensor_alloc(&seed, y->ndim, y->shape));
    fl_rng r;
    fl_rng_seed(&r, 5);
    for (int64_t i = 0; i < seed.size; i++) seed.data[i] = fl_rng_normal(&r);
    double first, ips = timed_ips(pass_grad, m, &x, &seed, reps, &first);
    printf("{\"name\": \"grad_%s_b%d\", \"side\": %d, \"batch\": %d, \"threads\": %d, "
           "\"first_s\": %.4f, \"images_per_s\": %.2f}\n",
           argv[7], batch, side, batch, threads, first, ips);
    fl_tensor_free(&seed);
    fl_tensor_free(&x);
    fl_model_free(m);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "zoo") == 0) return main_zoo(argc, argv);
    if (argc > 1 && strcmp(argv[1], "big") == 0) return main_big(argc, argv);
    if (argc > 1 && strcmp(argv[1], "grad") == 0) return main_grad(argc, argv);
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    fl_threads_set(threads);
    printf("{\"name\": \"lenet5_train_b64\", \"threads\": %d, \"images_per_s\": %.1f}\n", threads,
           best_of_3(bench_train, 64, 300));
    fflush(stdout);
    printf("{\"name\": \"lenet5_infer_b256\", \"threads\": %d, \"images_per_s\": %.1f}\n", threads,
           best_of_3(bench_infer, 256, 60));
    fflush(stdout);
    /* Conv 64->64, 3x3, pad 1, on [16,64,32,32] */
    print_conv_vs_sgemm("conv_vs_sgemm", &(conv_case){16, 64, 32, 32, 64, 3, 1, 1}, threads, 9);
    /* ResNet-18's largest convolutions at 64x64, batch 32: conv1 (7x7 stride 2, the most
     * FLOPs: 9.6 M multiply-adds per image) and layer4's 3x3 512->512 on 2x2 (the largest
     * weights; 9.4 M, as every 3x3 convolution of layers 1-4 but the first of each) */
    print_conv_vs_sgemm("resnet18_conv1_vs_sgemm", &(conv_case){32, 3, 64, 64, 64, 7, 2, 3},
                        threads, 9);
    print_conv_vs_sgemm("resnet18_layer4_vs_sgemm", &(conv_case){32, 512, 2, 2, 512, 3, 1, 1},
                        threads, 9);
    return 0;
}
