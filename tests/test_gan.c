/* FuzzGAN (src/gan/): the networks' shapes, the generator step's image gradient against
 * finite differences, a short training with its files, resume, the generator file, and the
 * bad inputs of issue 18. The training loop's own file is included so its internal helpers
 * (setup, draw_cases, g_image_grad) can be checked directly. */
#include "testutil.h"

#include <dirent.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "flare/fuzz.h"
#include "flare/onnx.h"
#include "gan/train.c"

/* A small labelled dataset of 28x28 images: class k is a bright k-th horizontal band. */
static fl_dataset *bands(int n, int K) {
    fl_err e = {0};
    fl_dataset *d = NULL;
    assert_int_equal(fl_dataset_new(n, 1, 28, 28, &d, &e), FL_OK);
    d->has_labels = 1;
    d->n_classes = K;
    fl_rng r;
    fl_rng_seed(&r, 5);
    for (int i = 0; i < n; i++) {
        int k = i % K;
        d->y[i] = k;
        for (int p = 0; p < 28 * 28; p++) {
            int row = p / 28;
            float v = row / (28 / K) == k ? 0.9f : 0.1f;
            d->x[(int64_t)i * 784 + p] = v + 0.05f * fl_rng_uniform(&r);
        }
    }
    return d;
}

static fl_model *lenet1(int K) {
    fl_err e = {0};
    fl_model *m = NULL;
    assert_int_equal(fl_zoo_build("lenet1", 1, 28, 28, K, 3, &m, &e), FL_OK);
    return m;
}

static void test_nets(void **state) {
    (void)state;
    fl_err e = {0};
    fl_model *g, *d;
    assert_int_equal(fz_gan_build_g(16, 10, 40, 3, 32, 32, 1, &g, &e), FL_OK);
    assert_int_equal(fz_gan_build_d(10, 3, 32, 32, 2, &d, &e), FL_OK);
    int64_t sz[2] = {2, 16}, sc[2] = {2, 10}, sn[2] = {2, 40};
    fl_tensor in[3] = {0};
    fl_tensor_alloc(&in[0], 2, sz), fl_tensor_alloc(&in[1], 2, sc), fl_tensor_alloc(&in[2], 2, sn);
    for (int i = 0; i < 3; i++) memset(in[i].data, 0, sizeof(float) * (size_t)in[i].size);
    assert_int_equal(fl_model_forward_multi(g, 3, in, &e), FL_OK);
    const fl_tensor *y = fl_model_output(g, 0);
    assert_int_equal(y->ndim, 4);
    assert_int_equal(y->shape[1], 3);
    assert_int_equal(y->shape[2], 32);
    for (int64_t i = 0; i < y->size; i++) assert_true(y->data[i] > 0 && y->data[i] < 1);
    assert_int_equal(fl_model_forward(d, y, &e), FL_OK);
    assert_int_equal(fl_model_output(d, 0)->shape[1], 1);
    assert_int_equal(fl_model_output(d, 1)->shape[1], 10);
    for (int i = 0; i < 3; i++) fl_tensor_free(&in[i]);
    fl_model_free(g);
    fl_model_free(d);
    /* 30x30 does not halve twice */
    assert_int_equal(fz_gan_build_g(16, 10, 40, 1, 30, 30, 1, &g, &e), FL_ERR_SHAPE);
    assert_non_null(strstr(e.msg, "30x30"));
    assert_null(g);
}

static const char *tmpdir(const char *tag) {
    static char buf[128];
    snprintf(buf, sizeof buf, "/tmp/flare_test_gan_%s_%d", tag, (int)getpid());
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf %s", buf);
    assert_int_equal(system(cmd), 0);
    return buf;
}

/* The total G-step loss for G's current output, the neuron term left out (its divisor is held
 * constant in the gradient, so it has no plain finite difference). */
static double g_loss(run *R) {
    fl_err e = {0};
    double a, c, er, ne;
    assert_int_equal(g_image_grad(R, &a, &c, &er, &ne, &e), FL_OK);
    return a + c + R->o->lambda1 * er;
}

static void test_image_grad(void **state) {
    (void)state;
    fl_err e = {0};
    fl_dataset *d = bands(64, 10);
    /* an MLP: LeNet's max-pool windows switch under the finite difference's steps, which
     * blurs the check (kinks of ReLU alone are rare at this step size) */
    fl_model *m;
    assert_int_equal(fl_zoo_build("mlp", 1, 28, 28, 10, 3, &m, &e), FL_OK);
    fl_gan_opts o;
    fl_gan_opts_default(&o);
    o.batch = 4;
    o.lambda2 = 0;
    if (getenv("GAN_L1")) o.lambda1 = atof(getenv("GAN_L1"));
    o.work_dir = "/nonexistent";
    o.scale = NULL;
    run R;
    assert_int_equal(setup(&R, m, d, &o, &e), FL_OK);
    fl_optim_opts oo;
    fl_optim_opts_default(&oo, FL_OPTIM_ADAM);
    assert_int_equal(make_nets(&R, &oo, &e), FL_OK);
    fl_rng r;
    fl_rng_seed(&r, 9);
    draw_cases(&R, &r);
    assert_int_equal(gen_forward(&R, &e), FL_OK);
    /* an untrained G's output is nearly flat (sigmoid of ~0), and so are the bands: both put
     * the model's max-pool windows on ties, where the loss has no derivative. Check the
     * gradient at noise images instead. */
    fl_tensor *img0 = &R.g.m->values[R.g.m->outputs[0]].t;
    for (int64_t i = 0; i < img0->size; i++) img0->data[i] = 0.05f + 0.9f * fl_rng_uniform(&r);
    g_loss(&R);
    float *grad = malloc(sizeof(float) * (size_t)R.g_img.size);
    memcpy(grad, R.g_img.data, sizeof(float) * (size_t)R.g_img.size);
    fl_tensor *img = &R.g.m->values[R.g.m->outputs[0]].t;
    /* directional derivatives along random directions: one number per direction, well above
     * the float rounding of the losses (a per-pixel difference is not) */
    double num = 0, den = 0;
    float *dir = malloc(sizeof(float) * (size_t)img->size);
    float *keep = malloc(sizeof(float) * (size_t)img->size);
    memcpy(keep, img->data, sizeof(float) * (size_t)img->size);
    for (int k = 0; k < 6; k++) {
        double an = 0;
        for (int64_t i = 0; i < img->size; i++) {
            dir[i] = fl_rng_normal(&r);
            an += (double)dir[i] * grad[i];
        }
        const float h = getenv("GAN_H") ? (float)atof(getenv("GAN_H")) : 2e-3f;
        for (int64_t i = 0; i < img->size; i++) img->data[i] = keep[i] + h * dir[i];
        double up = g_loss(&R);
        for (int64_t i = 0; i < img->size; i++) img->data[i] = keep[i] - h * dir[i];
        double dn = g_loss(&R);
        double fd = (up - dn) / (2 * h);
        if (getenv("GAN_GRAD_DEBUG")) printf("direction %d: fd %g analytic %g\n", k, fd, an);
        num += (fd - an) * (fd - an), den += fd * fd;
    }
    memcpy(img->data, keep, sizeof(float) * (size_t)img->size);
    free(dir);
    free(keep);
    /* over the six directions: || fd - analytic || / || fd || (ReLU kinks crossed by the steps
     * leave a few per cent; a wrong term, sign or scale gives tens) */
    double rel = sqrt(num / den);
    if (rel > 0.08) fail_msg("G-step image gradient vs finite differences: relative error %g", rel);
    /* the neuron term: a small step against its gradient raises the target's normalised
     * activation in (nearly) every case */
    g_loss(&R);
    memcpy(grad, R.g_img.data, sizeof(float) * (size_t)R.g_img.size);
    double *before = malloc(sizeof(double) * 4), *after = malloc(sizeof(double) * 4);
    double le, ln;
    assert_int_equal(mut_terms(&R, img, 0, &le, &ln, NULL, before, &e), FL_OK);
    fl_gan_opts o2 = o;
    o2.lambda2 = 1;
    R.o = &o2;
    g_loss(&R);
    for (int64_t i = 0; i < img->size; i++) img->data[i] -= 20.0f * (R.g_img.data[i] - grad[i]);
    assert_int_equal(mut_terms(&R, img, 0, &le, &ln, NULL, after, &e), FL_OK);
    int raised = 0;
    for (int i = 0; i < 4; i++) raised += after[i] > before[i];
    if (raised < 3) fail_msg("the neuron term raised %d of 4 targets", raised);
    R.o = &o;
    free(before);
    free(after);
    free(grad);
    fl_model_free(R.g.m); /* teardown frees both optimisers and D; fl_gan_train owns G */
    teardown(&R);
    fl_model_free(m);
    fl_dataset_free(d);
}

static int file_exists(const char *dir, const char *rel) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    struct stat st;
    return stat(p, &st) == 0 && st.st_size > 0;
}

/* params of a model, flattened, for comparing two runs */
static double param_sum(const fl_model *g) {
    double s = 0;
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].kind == FL_VAL_PARAM)
            for (int64_t i = 0; i < g->values[v].t.size; i++) s += g->values[v].t.data[i] * (1 + (i % 7));
    return s;
}

static void test_train_resume_open(void **state) {
    (void)state;
    fl_err e = {0};
    fl_dataset *d = bands(80, 10);
    fl_model *m = lenet1(10);
    fl_gan_opts o;
    fl_gan_opts_default(&o);
    o.batch = 16;
    o.epochs = 2;
    o.max_batches = 3;
    o.seed = 11;
    char dir[128];
    snprintf(dir, sizeof dir, "%s", tmpdir("a"));
    o.work_dir = dir;
    fl_model *g = NULL;
    if (fl_gan_train(m, d, &o, &g, &e) != FL_OK) fail_msg("%s", e.msg);
    assert_non_null(g);
    assert_true(file_exists(dir, "samples/epoch_001.png"));
    assert_true(file_exists(dir, "samples/epoch_002.png"));
    assert_true(file_exists(dir, "ckpt/gen.onnx"));
    assert_true(file_exists(dir, "ckpt/state.json"));
    uint8_t *txt;
    size_t len;
    char p[512];
    snprintf(p, sizeof p, "%s/losses.jsonl", dir);
    assert_int_equal(fl_file_read(p, &txt, &len, &e), FL_OK);
    int lines = 0;
    for (size_t i = 0; i < len; i++) lines += txt[i] == '\n';
    assert_int_equal(lines, 2);
    assert_non_null(strstr((char *)txt, "\"misclass\""));
    free(txt);
    double full = param_sum(g);

    /* one epoch, then resume for the second: the same weights as the uninterrupted run */
    char dir2[128];
    snprintf(dir2, sizeof dir2, "%s", tmpdir("b"));
    fl_gan_opts o1 = o;
    o1.work_dir = dir2;
    o1.epochs = 1;
    fl_model *g1 = NULL, *g2 = NULL;
    assert_int_equal(fl_gan_train(m, d, &o1, &g1, &e), FL_OK);
    fl_gan_opts o2 = o1;
    o2.epochs = 2;
    o2.resume = 1;
    if (fl_gan_train(m, d, &o2, &g2, &e) != FL_OK) fail_msg("resume: %s", e.msg);
    if (fabs(param_sum(g2) - full) > 1e-6 * fabs(full))
        fail_msg("resumed run differs: %.9g vs %.9g", param_sum(g2), full);
    assert_true(fabs(param_sum(g1) - full) > 1e-9);
    /* resuming with another seed is refused, naming the checkpoint's */
    fl_gan_opts o3 = o2;
    o3.seed = 12;
    fl_model *g3 = NULL;
    assert_int_equal(fl_gan_train(m, d, &o3, &g3, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "seed 11"));
    assert_null(g3);

    /* the generator file: saved, opened, generating images of the right shape in [0,1] */
    snprintf(p, sizeof p, "%s/gen.onnx", dir);
    assert_int_equal(fl_onnx_save(g, p, &e), FL_OK);
    fl_model *back;
    assert_int_equal(fl_onnx_load(p, &back, &e), FL_OK);
    fl_gan *gen;
    if (fl_gan_open(back, p, &gen, &e) != FL_OK) fail_msg("%s", e.msg);
    assert_int_equal(gen->n_classes, 10);
    assert_int_equal(gen->h, 28);
    assert_string_equal(gen->layers, "all");
    fl_layerset *ls;
    assert_int_equal(fl_layerset_make(m, gen->layers, &ls, &e), FL_OK);
    assert_int_equal(fl_gan_check_model(gen, m, ls, "m.onnx", &e), FL_OK);
    int32_t cls[3] = {0, 5, 9};
    int64_t neu[3] = {0, 1, ls->total - 1};
    fl_tensor out = {0};
    fl_rng r;
    fl_rng_seed(&r, 1);
    assert_int_equal(fl_gan_generate(gen, 3, cls, neu, &r, &out, &e), FL_OK);
    assert_int_equal(out.shape[0], 3);
    for (int64_t i = 0; i < out.size; i++) assert_true(out.data[i] >= 0 && out.data[i] <= 1);
    neu[1] = ls->total;
    assert_int_equal(fl_gan_generate(gen, 3, cls, neu, &r, &out, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "neuron"));
    /* a model with another input shape or class count */
    fl_model *other;
    assert_int_equal(fl_zoo_build("lenet1", 1, 32, 32, 10, 3, &other, &e), FL_OK);
    assert_int_equal(fl_gan_check_model(gen, other, ls, "other.onnx", &e), FL_ERR_SHAPE);
    assert_non_null(strstr(e.msg, "other.onnx"));
    assert_non_null(strstr(e.msg, "[1,28,28]"));
    fl_model_free(other);
    assert_int_equal(fl_zoo_build("lenet1", 1, 28, 28, 7, 3, &other, &e), FL_OK);
    assert_int_equal(fl_gan_check_model(gen, other, ls, "seven.onnx", &e), FL_ERR_SHAPE);
    assert_non_null(strstr(e.msg, "7 outputs"));
    fl_model_free(other);
    fl_tensor_free(&out);
    fl_layerset_free(ls);
    fl_gan_free(gen);
    /* a plain classifier is not a generator */
    fl_model *plain = lenet1(10);
    assert_int_equal(fl_gan_open(plain, "plain.onnx", &gen, &e), FL_ERR_FORMAT);
    assert_non_null(strstr(e.msg, "plain.onnx"));
    fl_model_free(g);
    fl_model_free(g1);
    fl_model_free(g2);
    fl_model_free(m);
    fl_dataset_free(d);
}

/* A generator trained briefly (3 batches of 16) against m in work folder dir, opened. */
static fl_gan *small_gen(fl_model *m, const fl_dataset *d, const char *dir, uint64_t seed,
                         const char *name) {
    fl_err e = {0};
    fl_gan_opts go;
    fl_gan_opts_default(&go);
    go.batch = 16, go.epochs = 1, go.max_batches = 3, go.seed = seed;
    go.work_dir = dir;
    fl_model *g = NULL;
    if (fl_gan_train(m, d, &go, &g, &e) != FL_OK) fail_msg("%s", e.msg);
    fl_gan *gen;
    assert_int_equal(fl_gan_open(g, name, &gen, &e), FL_OK);
    return gen;
}

/* A fuzzgan campaign of 8 cases a round into DIR/out (the path in out[160]). */
static void gan_campaign(fl_fuzz_opts *o, fl_model *m, fl_gan *gen, const char *dir, char *out) {
    fl_fuzz_opts_default(o);
    o->strategy = FL_FUZZ_FUZZGAN;
    o->model = m;
    o->gen = gen;
    o->criterion = "nc:0.6:meanabs";
    o->k = 8;
    snprintf(out, 160, "%s/out", dir);
    o->out_dir = out;
}

/* `flare gan fuzz`'s campaign: the suite budget, the files of the nn fuzz folder, each failing
 * case a finding of its own class, and the checks that come before anything is written. */
static void test_fuzzgan(void **state) {
    (void)state;
    fl_err e = {0};
    fl_dataset *d = bands(80, 10);
    fl_model *m = lenet1(10);
    char dir[128], out[160];
    snprintf(dir, sizeof dir, "%s", tmpdir("g"));
    fl_gan *gen = small_gen(m, d, dir, 2, "gen.onnx");
    fl_fuzz_opts o;
    gan_campaign(&o, m, gen, dir, out);
    o.max_suite = 12;
    fl_fuzz_result r;
    if (fl_fuzz_run(&o, &r, &e) != FL_OK) fail_msg("%s", e.msg);
    assert_true(r.last.corpus == 12);
    assert_true(r.last.execs >= 8);
    assert_int_equal(r.seeds_used, 0);
    assert_true(r.last.covered > 0);
    char p[300];
    const char *files[] = {"fuzzer_stats", "plot_data", "summary.json", "report.html"};
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/%s", out, files[i]);
        struct stat st;
        if (stat(p, &st)) fail_msg("%s missing", p);
    }
    char v[64];
    assert_true(fl_fuzz_stats_get(out, "strategy", v, sizeof v));
    assert_string_equal(v, "fuzzgan");
    /* an untrained-for-long generator fools an untrained model often: each failure is its own
     * finding (its own root), under failures/<class>-<pred>/ */
    assert_int_equal(r.last.failures, r.by_oracle[0]);
    assert_true(r.last.failures > 0); /* so that the checks below look at real findings */
    snprintf(p, sizeof p, "find %s/failures -name '*,min.*' -o -name '*.pair.png' 2>/dev/null | "
             "grep -q .", out);
    assert_int_not_equal(system(p), 0); /* a generated case has no seed to be close to */
    {
        snprintf(p, sizeof p, "%s/failures.png", out);
        struct stat st;
        assert_int_equal(stat(p, &st), 0);
    }
    /* checks before anything is written: a guide that is not NC, a layer set it was not
     * trained on */
    char out2[160];
    snprintf(out2, sizeof out2, "%s/out2", dir);
    o.out_dir = out2;
    o.criterion = "tknc:3";
    assert_int_equal(fl_fuzz_run(&o, &r, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "nc:0.6:meanabs"));
    o.criterion = "nc:0.6:meanabs";
    o.layers = "conv+dense";
    assert_int_equal(fl_fuzz_run(&o, &r, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "'all'"));
    struct stat st;
    assert_int_not_equal(stat(out2, &st), 0);
    fl_gan_free(gen);
    fl_model_free(m);
    fl_dataset_free(d);
}

/* The queue's ids, in out/queue/id:*.json: they must be 0 .. n-1, each once. Their pixels
 * (the .npy files) into px[n][784] when px is not NULL. */
static int64_t queue_ids(const char *out, float (*px)[784], int64_t cap) {
    char p[400];
    snprintf(p, sizeof p, "%s/queue", out);
    DIR *d = opendir(p);
    assert_non_null(d);
    int seen[256] = {0};
    int64_t n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t k = strlen(de->d_name);
        if (strncmp(de->d_name, "id:", 3) || k < 6 || strcmp(de->d_name + k - 5, ".json")) continue;
        int id = atoi(de->d_name + 3);
        assert_true(id >= 0 && id < 256 && id < cap);
        assert_int_equal(seen[id], 0); /* no id twice */
        seen[id] = 1;
        n++;
        if (!px) continue;
        fl_err e = {0};
        fl_tensor t = {0};
        snprintf(p, sizeof p, "%s/queue/%.*s.npy", out, (int)(k - 5), de->d_name);
        assert_int_equal(fl_npy_read_tensor(p, &t, &e), FL_OK);
        assert_int_equal(t.size, 784);
        memcpy(px[id], t.data, sizeof px[id]);
        fl_tensor_free(&t);
    }
    closedir(d);
    for (int64_t i = 0; i < n; i++) assert_int_equal(seen[i], 1); /* no gap */
    return n;
}

/* The findings' roots (failures/<c>-<p>/root:NNNNNN,first.json): each a queue id, each once. */
static int64_t finding_roots(const char *out, int64_t corpus) {
    char p[400];
    snprintf(p, sizeof p, "%s/failures", out);
    DIR *d = opendir(p);
    assert_non_null(d);
    int seen[256] = {0};
    int64_t n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char sub[700];
        snprintf(sub, sizeof sub, "%s/%s", p, de->d_name);
        DIR *d2 = opendir(sub);
        if (!d2) continue;
        struct dirent *f;
        while ((f = readdir(d2))) {
            if (!strstr(f->d_name, ",first.json")) continue;
            int root = atoi(f->d_name + strlen("root:"));
            assert_true(root >= 0 && root < corpus);
            assert_int_equal(seen[root], 0);
            seen[root] = 1;
            n++;
        }
        closedir(d2);
    }
    closedir(d);
    return n;
}

/* `gan fuzz -i -`: a campaign stopped by its limit resumes with its recorded settings; the
 * ids continue, the findings are not repeated, the coverage does not drop, and a resume with
 * another model, generator, criterion or seed is refused without touching the folder. */
static void test_fuzzgan_resume(void **state) {
    (void)state;
    fl_err e = {0};
    fl_dataset *d = bands(80, 10);
    fl_model *m = lenet1(10);
    char dir[128], dir2[160], out[160];
    snprintf(dir, sizeof dir, "%s", tmpdir("r"));
    snprintf(dir2, sizeof dir2, "%s/other", dir);
    fl_gan *gen = small_gen(m, d, dir, 2, "gen.onnx");
    fl_gan *gen2 = small_gen(m, d, dir2, 3, "other.onnx"); /* for the refusal below */
    fl_fuzz_opts o;
    gan_campaign(&o, m, gen, dir, out);
    o.criterion = "nc:0.3:meanabs"; /* low enough that 32 cases do not cover every neuron */
    o.target_cov = 1;
    o.max_execs = 16; /* -E: two rounds */
    o.seed = 9;
    fl_fuzz_result r1, r2;
    if (fl_fuzz_run(&o, &r1, &e) != FL_OK) fail_msg("%s", e.msg);
    assert_int_equal(r1.last.execs, 16);
    static float px1[256][784], px2[256][784];
    int64_t n1 = queue_ids(out, px1, 256);
    assert_int_equal(n1, r1.last.corpus);
    assert_true(n1 > 0);
    assert_int_equal(finding_roots(out, n1), r1.last.failures);

    /* resumed: two more rounds */
    o.resume = 1;
    if (fl_fuzz_run(&o, &r2, &e) != FL_OK) fail_msg("resume: %s", e.msg);
    assert_int_equal(r2.last.execs, 32);
    int64_t n2 = queue_ids(out, px2, 256);
    assert_int_equal(n2, r2.last.corpus);
    assert_true(n2 > n1); /* an untrained model fails most cases: each is kept */
    for (int64_t i = 0; i < n1; i++) /* the first session's entries are untouched */
        assert_memory_equal(px1[i], px2[i], sizeof px1[i]);
    for (int64_t i = n1; i < n2; i++) /* the new session drew new cases, not the old stream */
        for (int64_t j = 0; j < n1; j++)
            assert_memory_not_equal(px2[i], px2[j], sizeof px2[i]);
    assert_int_equal(finding_roots(out, n2), r2.last.failures);
    assert_true(r2.last.failures >= r1.last.failures);
    assert_true(r2.last.failures_total >= r1.last.failures_total + (r2.last.failures - r1.last.failures));
    assert_true(r2.last.covered >= r1.last.covered);
    /* plot_data: the first session's last row and the second's first (the replayed queue)
     * are both at 16 execs, with the same coverage */
    {
        char p[300];
        snprintf(p, sizeof p, "%s/plot_data", out);
        FILE *f = fopen(p, "r");
        assert_non_null(f);
        char line[512];
        int rows = 0;
        while (fgets(line, sizeof line, f)) {
            double t;
            long long ex, corpus, cov;
            if (line[0] == '#' || sscanf(line, "%lf, %lld, %lld, %lld", &t, &ex, &corpus, &cov) != 4 ||
                ex != 16)
                continue;
            assert_int_equal(cov, r1.last.covered);
            rows++;
        }
        fclose(f);
        assert_true(rows >= 2);
    }
    char v[64];
    assert_true(fl_fuzz_stats_get(out, "session", v, sizeof v));
    assert_string_equal(v, "2");
    assert_true(fl_fuzz_stats_get(out, "gen_hash", v, sizeof v));

    /* other settings: refused, nothing written */
    fl_fuzz_result r3;
    o.seed = 10;
    assert_int_equal(fl_fuzz_run(&o, &r3, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "seed 9"));
    o.seed = 9;
    o.criterion = "nc:0.6:meanabs";
    assert_int_equal(fl_fuzz_run(&o, &r3, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "criterion"));
    o.criterion = "nc:0.3:meanabs";
    o.gen = gen2;
    o.gen_path = "other.onnx";
    assert_int_equal(fl_fuzz_run(&o, &r3, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "other.onnx has other weights"));
    o.gen = gen;
    fl_model *m2 = NULL;
    assert_int_equal(fl_zoo_build("lenet1", 1, 28, 28, 10, 4, &m2, &e), FL_OK);
    o.model = m2;
    assert_int_equal(fl_fuzz_run(&o, &r3, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "model"));
    assert_int_equal(queue_ids(out, NULL, 256), n2);
    assert_true(fl_fuzz_stats_get(out, "session", v, sizeof v));
    assert_string_equal(v, "2");
    fl_model_free(m2);
    fl_gan_free(gen);
    fl_gan_free(gen2);
    fl_model_free(m);
    fl_dataset_free(d);
}

static void test_bad_data(void **state) {
    (void)state;
    fl_err e = {0};
    fl_dataset *d = bands(40, 10);
    fl_model *m = lenet1(7); /* 7 outputs, 10 classes of data */
    fl_gan_opts o;
    fl_gan_opts_default(&o);
    o.batch = 8;
    o.work_dir = tmpdir("c");
    fl_model *g = (fl_model *)1;
    assert_int_equal(fl_gan_train(m, d, &o, &g, &e), FL_ERR_SHAPE);
    assert_non_null(strstr(e.msg, "10 classes"));
    assert_null(g);
    struct stat st;
    assert_int_not_equal(stat(o.work_dir, &st), 0); /* nothing written */
    /* a class without images */
    fl_model_free(m);
    m = lenet1(10);
    for (int64_t i = 0; i < d->n; i++)
        if (d->y[i] == 3) d->y[i] = 4;
    assert_int_equal(fl_gan_train(m, d, &o, &g, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "class 3 has no training images"));
    assert_int_not_equal(stat(o.work_dir, &st), 0);
    fl_model_free(m);
    fl_dataset_free(d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nets),
        cmocka_unit_test(test_image_grad),
        cmocka_unit_test(test_train_resume_open),
        cmocka_unit_test(test_fuzzgan),
        cmocka_unit_test(test_fuzzgan_resume),
        cmocka_unit_test(test_bad_data),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf /tmp/flare_test_gan_*_%d", (int)getpid());
    if (system(cmd)) rc = 1;
    return rc;
}
