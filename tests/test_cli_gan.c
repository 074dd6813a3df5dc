/* `flare gan train` driven as a user would: a short training with its files and output
 * lines, resume with the wrong seed, and data that does not fit the model (exit 1, nothing
 * written). Small NPY data made here; the binary is $FLARE_BIN (build/flare when unset). */
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#include "flare/data.h"
#include "flare/fuzz.h"
#include "flare/onnx.h"
#include "flare/train.h"

static char tmp[64];

static int exists(const char *rel) {
    char p[256];
    snprintf(p, sizeof p, "%s/%s", tmp, rel);
    struct stat st;
    return stat(p, &st) == 0;
}

static const char *tmp_path(const char *rel) {
    static char p[256];
    snprintf(p, sizeof p, "%s/%s", tmp, rel);
    return p;
}

/* Run `flare ARGS` in tmp with output to tmp/out.txt; the exit status and the output. */
static int flare(char **out, const char *args) {
    char cmd[2048];
    const char *bin = getenv("FLARE_BIN") ? getenv("FLARE_BIN") : "build/flare";
    snprintf(cmd, sizeof cmd, "\"%s\" %s >%s/out.txt 2>&1", bin, args, tmp);
    int st = system(cmd);
    char p[128];
    snprintf(p, sizeof p, "%s/out.txt", tmp);
    fl_err e;
    uint8_t *buf;
    size_t len;
    assert_int_equal(fl_file_read(p, &buf, &len, &e), FL_OK);
    *out = realloc(buf, len + 1);
    (*out)[len] = 0;
    return WEXITSTATUS(st);
}

/* 64 noise images of `classes` classes as tmp/NAME-x.npy / -y.npy, and an untrained LeNet-1
 * with 10 outputs as tmp/m.onnx. */
static void fixtures(void) {
    fl_err e = {0};
    float *x = malloc(sizeof(float) * 64 * 784);
    int32_t y[64];
    fl_rng r;
    fl_rng_seed(&r, 3);
    for (int i = 0; i < 64 * 784; i++) x[i] = fl_rng_uniform(&r);
    char p[128];
    for (int k = 0; k < 2; k++) {
        int classes = k ? 7 : 10;
        for (int i = 0; i < 64; i++) y[i] = i % classes;
        int64_t xs[4] = {64, 1, 28, 28}, ys[1] = {64};
        snprintf(p, sizeof p, "%s/c%d-x.npy", tmp, classes);
        assert_int_equal(fl_npy_write(p, FL_DT_F32, 4, xs, x, &e), FL_OK);
        snprintf(p, sizeof p, "%s/c%d-y.npy", tmp, classes);
        assert_int_equal(fl_npy_write(p, FL_DT_I32, 1, ys, y, &e), FL_OK);
    }
    free(x);
    fl_model *m;
    assert_int_equal(fl_zoo_build("lenet1", 1, 28, 28, 10, 1, &m, &e), FL_OK);
    snprintf(p, sizeof p, "%s/m.onnx", tmp);
    assert_int_equal(fl_onnx_save(m, p, &e), FL_OK);
    fl_model_free(m);
}

/* Ctrl-C as in nn train: it says so, exits 130 and writes the last finished epoch's
 * generator. */
static void test_gan_train_ctrl_c(void **state) {
    (void)state;
    char log[128], m[128], d[300], o[128], w[128];
    snprintf(log, sizeof log, "%s/int.log", tmp);
    snprintf(m, sizeof m, "%s/m.onnx", tmp);
    snprintf(d, sizeof d, "npy:%s/c10-x.npy,%s/c10-y.npy", tmp, tmp);
    snprintf(o, sizeof o, "%s/gi.onnx", tmp);
    snprintf(w, sizeof w, "%s/gi.work", tmp);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        const char *bin = getenv("FLARE_BIN") ? getenv("FLARE_BIN") : "build/flare";
        FILE *f = freopen(log, "w", stdout);
        if (!f || dup2(fileno(stdout), 2) < 0) _exit(99);
        execl(bin, "flare", "gan", "train", "-m", m, "-d", d, "-o", o, "-e", "100000", "-b", "16",
              "--max-batches", "2", "-s", "5", "-t", "1", "--work-dir", w, (char *)NULL);
        _exit(98);
    }
    int seen = 0; /* two finished epochs, then interrupt */
    for (int tries = 0; tries < 1200 && !seen; tries++) {
        usleep(50000);
        uint8_t *buf;
        size_t len;
        fl_err e = {0};
        if (fl_file_read(log, &buf, &len, &e) != FL_OK) continue;
        buf = realloc(buf, len + 1);
        buf[len] = 0;
        seen = strstr((char *)buf, "2/100000  D") != NULL; /* the second epoch's line */
        free(buf);
    }
    if (!seen) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        char *txt, cat[160];
        snprintf(cat, sizeof cat, "cat %s", log);
        FILE *p = popen(cat, "r");
        txt = calloc(1, 8192);
        if (p && txt) fread(txt, 1, 8191, p), pclose(p);
        fail_msg("no second epoch in 60 s:\n%s", txt ? txt : "");
    }
    assert_int_equal(kill(pid, SIGINT), 0);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 130);
    assert_true(exists("gi.onnx"));
    uint8_t *buf;
    size_t len;
    fl_err e = {0};
    assert_int_equal(fl_file_read(log, &buf, &len, &e), FL_OK);
    buf = realloc(buf, len + 1);
    buf[len] = 0;
    assert_non_null(strstr((char *)buf, "stopped by Ctrl-C: wrote the last finished epoch's"));
    free(buf);
}

static void test_gan_train(void **state) {
    (void)state;
    char *out, args[1024];
    snprintf(args, sizeof args, "gan train -m %s/m.onnx -d npy:%s/c10-x.npy,%s/c10-y.npy -o "
             "%s/g.onnx -e 2 -b 16 --max-batches 2 -s 5 -t 1", tmp, tmp, tmp, tmp);
    int rc = flare(&out, args);
    if (rc != 0) fail_msg("exit %d:\n%s", rc, out);
    assert_non_null(strstr(out, "epoch 2/2"));
    assert_non_null(strstr(out, "misclass"));
    free(out);
    assert_true(exists("g.onnx"));
    assert_true(exists("g.train/samples/epoch_002.png"));
    assert_true(exists("g.train/losses.jsonl"));
    assert_true(exists("g.train/ckpt/state.json"));
    /* resuming with another seed: refused, naming the right one */
    snprintf(args, sizeof args, "gan train -m %s/m.onnx -d npy:%s/c10-x.npy,%s/c10-y.npy -o "
             "%s/g2.onnx -e 3 -b 16 --max-batches 2 -s 6 --resume %s/g.train", tmp, tmp, tmp,
             tmp, tmp);
    assert_int_equal(flare(&out, args), 1);
    assert_non_null(strstr(out, "seed 5"));
    assert_false(exists("g2.onnx"));
    free(out);
    /* resuming without -s: the checkpoint's seed, a third epoch after the two */
    snprintf(args, sizeof args, "gan train -m %s/m.onnx -d npy:%s/c10-x.npy,%s/c10-y.npy -o "
             "%s/g3.onnx -e 3 -b 16 --max-batches 2 -t 1 --resume %s/g.train", tmp, tmp, tmp,
             tmp, tmp);
    rc = flare(&out, args);
    if (rc != 0) fail_msg("resume exit %d:\n%s", rc, out);
    assert_non_null(strstr(out, "seed 5"));
    assert_non_null(strstr(out, "epoch 3/3"));
    assert_null(strstr(out, "epoch 1/3")); /* the finished epochs are not run again */
    free(out);
    assert_true(exists("g3.onnx"));
    assert_true(exists("g.train/samples/epoch_003.png"));
    /* gan fuzz with it: the nn fuzz folder, the suite budget */
    snprintf(args, sizeof args, "gan fuzz -m %s/m.onnx -g %s/g.onnx --max-suite 5 --cases 8 -o %s/f "
             "-s 1 -j 1", tmp, tmp, tmp);
    rc = flare(&out, args);
    if (rc != 0) fail_msg("gan fuzz exit %d:\n%s", rc, out);
    assert_non_null(strstr(out, "corpus     5 (0 seeds)"));
    assert_non_null(strstr(out, "nc:0.6:meanabs"));
    free(out);
    assert_true(exists("f/summary.json"));
    assert_true(exists("f/report.html"));
    /* resumed (-i -): the recorded seed, criterion and cases; the queue continues to 9 */
    snprintf(args, sizeof args, "gan fuzz -m %s/m.onnx -g %s/g.onnx -i - --max-suite 9 -o %s/f "
             "-j 1", tmp, tmp, tmp);
    rc = flare(&out, args);
    if (rc != 0) fail_msg("gan fuzz -i - exit %d:\n%s", rc, out);
    assert_non_null(strstr(out, "seed 1 "));
    assert_non_null(strstr(out, "corpus     9 (0 seeds)"));
    free(out);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "test $(ls %s/f/queue/id:*.json | wc -l) -eq 9 && "
             "ls %s/f/queue/id:000008,gen:c*.json >/dev/null", tmp, tmp);
    assert_int_equal(system(cmd), 0);
    char v[32];
    assert_true(fl_fuzz_stats_get(tmp_path("f"), "session", v, sizeof v));
    assert_string_equal(v, "2");
    /* ... with another seed: refused, naming the recorded one */
    snprintf(args, sizeof args, "gan fuzz -m %s/m.onnx -g %s/g.onnx -i - --max-suite 12 -o %s/f "
             "-s 2 -j 1", tmp, tmp, tmp);
    assert_int_equal(flare(&out, args), 1);
    assert_non_null(strstr(out, "seed 1"));
    free(out);
    assert_true(fl_fuzz_stats_get(tmp_path("f"), "session", v, sizeof v));
    assert_string_equal(v, "2");
    /* a classifier is not a generator: exit 1, naming the file, no folder */
    snprintf(args, sizeof args, "gan fuzz -m %s/m.onnx -g %s/m.onnx --max-suite 5 -o %s/f2",
             tmp, tmp, tmp);
    assert_int_equal(flare(&out, args), 1);
    assert_non_null(strstr(out, "m.onnx: not a FuzzGAN generator"));
    free(out);
    assert_false(exists("f2"));
}

static void test_gan_train_bad_data(void **state) {
    (void)state;
    char *out, args[1024];
    snprintf(args, sizeof args, "gan train -m %s/m.onnx -d npy:%s/c7-x.npy,%s/c7-y.npy -o "
             "%s/bad.onnx -b 16", tmp, tmp, tmp, tmp);
    assert_int_equal(flare(&out, args), 1);
    assert_non_null(strstr(out, "7 classes"));
    assert_non_null(strstr(out, "10 outputs"));
    free(out);
    assert_false(exists("bad.onnx"));
    assert_false(exists("bad.train"));
}

int main(void) {
    snprintf(tmp, sizeof tmp, "/tmp/flare_test_cli_gan_%d", (int)getpid());
    mkdir(tmp, 0755);
    fixtures();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gan_train),
        cmocka_unit_test(test_gan_train_ctrl_c),
        cmocka_unit_test(test_gan_train_bad_data),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    if (system(cmd)) rc = 1;
    return rc;
}
