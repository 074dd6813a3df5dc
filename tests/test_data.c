/* Tests for the data module: IDX / NPY / CIFAR-10 / PNG-folder loading, scaling, batch access,
 * PNG output, and the error messages for every kind of broken input. Small inputs are
 * synthesized into a temporary directory; the real Fashion-MNIST is checked against known
 * statistics. */
#define _XOPEN_SOURCE 700
#include "testutil.h"

#include <ftw.h>
#include <png.h>
#include <unistd.h>
#include <zlib.h>

#include "flare/data.h"

static char tmpdir[256];

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static int setup(void **state) {
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/flare_test_data_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    return nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static const char *tpath(const char *name) {
    static char buf[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    fclose(f);
}

/* Expect st to be a failure whose message contains every non-NULL needle. */
static void expect_err(fl_status st, fl_status want, const fl_err *e, const char *n1,
                       const char *n2) {
    if (st != want) fail_msg("status %s (want %s): %s", fl_strerror(st), fl_strerror(want), e->msg);
    if (n1 && !strstr(e->msg, n1)) fail_msg("message lacks '%s': %s", n1, e->msg);
    if (n2 && !strstr(e->msg, n2)) fail_msg("message lacks '%s': %s", n2, e->msg);
}

/* d's images as floats for direct indexing: d must have 8-bit storage, which
 * fl_dataset_to_float replaces by float storage. */
static const float *to_float(fl_dataset *d) {
    fl_err e = {0};
    assert_null(d->x);
    assert_non_null(d->x8);
    if (fl_dataset_to_float(d, &e) != FL_OK) fail_msg("%s", e.msg);
    assert_null(d->x8);
    assert_non_null(d->x);
    assert_int_equal(fl_dataset_to_float(d, &e), FL_OK); /* a no-op the second time */
    return d->x;
}

/* ---- scaling --------------------------------------------------------------------------- */
static void test_scale_parse(void **state) {
    (void)state;
    fl_scale s;
    fl_err e = {0};
    char buf[128];
    assert_int_equal(fl_scale_parse("01", &s, &e), FL_OK);
    assert_int_equal(s.kind, FL_SCALE_01);
    assert_int_equal(fl_scale_parse("pm1", &s, &e), FL_OK);
    assert_int_equal(s.kind, FL_SCALE_PM1);
    assert_int_equal(fl_scale_parse("none", &s, &e), FL_OK);
    assert_int_equal(s.kind, FL_SCALE_NONE);
    assert_int_equal(fl_scale_parse("meanstd:0.286,0.353", &s, &e), FL_OK);
    assert_int_equal(s.kind, FL_SCALE_MEANSTD);
    assert_int_equal(s.n_ch, 1);
    assert_float_equal(s.mean[0], 0.286f, 1e-7);
    assert_float_equal(s.std[0], 0.353f, 1e-7);
    assert_string_equal(fl_scale_str(&s, buf, sizeof buf), "meanstd:0.286,0.353");
    assert_int_equal(fl_scale_parse("meanstd:0.4914,0.4822,0.4465,0.247,0.243,0.261", &s, &e),
                     FL_OK);
    assert_int_equal(s.n_ch, 3);
    assert_float_equal(s.std[2], 0.261f, 1e-7);
    expect_err(fl_scale_parse("meanstd:0.5", &s, &e), FL_ERR_ARG, &e, "meanstd", NULL);
    expect_err(fl_scale_parse("meanstd:0.5,0", &s, &e), FL_ERR_ARG, &e, "> 0", NULL);
    expect_err(fl_scale_parse("meanstd:0.5,x", &s, &e), FL_ERR_ARG, &e, NULL, NULL);
    expect_err(fl_scale_parse("0255", &s, &e), FL_ERR_ARG, &e, "0255", "pm1");
    /* unapply inverts: pm1 value 0 is gray 0.5, meanstd (x-m)/s back to x */
    float v[2] = {0.0f, 1.0f};
    fl_scale_parse("pm1", &s, &e);
    fl_scale_unapply(&s, v, 1, 1, 2);
    assert_float_equal(v[0], 0.5f, 1e-6);
    assert_float_equal(v[1], 1.0f, 1e-6);
}

/* ---- IDX --------------------------------------------------------------------------------- */
enum { IN = 5, IH = 4, IW = 3 };

static void make_idx_pair(const char *images, const char *labels) {
    uint8_t img[IN * IH * IW], lab[IN];
    for (int i = 0; i < IN * IH * IW; i++) img[i] = (uint8_t)(i * 7 % 256);
    for (int i = 0; i < IN; i++) lab[i] = (uint8_t)(i % 3);
    int64_t d3[3] = {IN, IH, IW}, d1[1] = {IN};
    fl_err e = {0};
    assert_int_equal(fl_idx_write(images, 3, d3, img, &e), FL_OK);
    assert_int_equal(fl_idx_write(labels, 1, d1, lab, &e), FL_OK);
}

static void check_idx_dataset(const fl_dataset *d, int64_t n) {
    assert_int_equal(d->n, n);
    assert_int_equal(d->c, 1);
    assert_int_equal(d->h, IH);
    assert_int_equal(d->w, IW);
    assert_null(d->x); /* kept as the file's bytes */
    fl_tensor x = {0};
    fl_err e = {0};
    assert_int_equal(fl_dataset_batch(d, 0, n, &x, &e), FL_OK);
    assert_int_equal(x.size, n * IH * IW);
    for (int64_t i = 0; i < n * IH * IW; i++) {
        assert_int_equal(d->x8[i], i * 7 % 256);
        assert_float_equal(x.data[i], (float)(i * 7 % 256) / 255.0f, 1e-6);
    }
    fl_tensor_free(&x);
    for (int64_t i = 0; i < n; i++) assert_int_equal(d->y[i], i % 3);
    assert_true(d->has_labels);
    assert_int_equal(d->n_classes, n >= 3 ? 3 : (int)n);
    assert_string_equal(d->class_names[1], "1");
}

static void test_idx_roundtrip(void **state) {
    (void)state;
    fl_err e = {0};
    fl_dataset *d;
    const char *sfx[2] = {"", ".gz"};
    for (int k = 0; k < 2; k++) {
        char im[512], lb[512], spec[1100];
        snprintf(im, sizeof im, "%s/rt%d-images-idx3-ubyte%s", tmpdir, k, sfx[k]);
        snprintf(lb, sizeof lb, "%s/rt%d-labels-idx1-ubyte%s", tmpdir, k, sfx[k]);
        make_idx_pair(im, lb);
        if (k == 1) { /* really gzip: starts with the gzip magic */
            uint8_t *raw;
            size_t len;
            assert_int_equal(fl_file_read(lb, &raw, &len, &e), FL_OK);
            free(raw);
            FILE *f = fopen(lb, "rb");
            assert_true(fgetc(f) == 0x1f && fgetc(f) == 0x8b);
            fclose(f);
        }
        /* sister label file found from the image path */
        if (fl_dataset_load(im, NULL, 0, &d, &e) != FL_OK) fail_msg("%s", e.msg);
        check_idx_dataset(d, IN);
        assert_non_null(strstr(d->source, "labels-idx1"));
        fl_dataset_free(d);
        snprintf(spec, sizeof spec, "idx:%s,%s", im, lb);
        assert_int_equal(fl_dataset_load(spec, NULL, 2, &d, &e), FL_OK);
        check_idx_dataset(d, 2);
        fl_dataset_free(d);
        /* images only: unlabelled */
        snprintf(spec, sizeof spec, "idx:%s", im);
        assert_int_equal(fl_dataset_load(spec, NULL, 0, &d, &e), FL_OK);
        assert_false(d->has_labels);
        assert_int_equal(d->n_classes, 0);
        assert_int_equal(d->y[4], -1);
        fl_dataset_free(d);
    }
    /* scales: pixel 7 (index 1) under pm1 and meanstd */
    fl_scale s;
    fl_scale_parse("pm1", &s, &e);
    assert_int_equal(fl_dataset_load(tpath("rt0-images-idx3-ubyte"), &s, 0, &d, &e), FL_OK);
    assert_float_equal(to_float(d)[1], 7.0f / 127.5f - 1.0f, 1e-6);
    assert_int_equal(d->scale.kind, FL_SCALE_PM1);
    fl_dataset_free(d);
    fl_scale_parse("meanstd:0.5,0.25", &s, &e);
    assert_int_equal(fl_dataset_load(tpath("rt0-images-idx3-ubyte"), &s, 0, &d, &e), FL_OK);
    assert_float_equal(to_float(d)[1], (7.0f / 255.0f - 0.5f) / 0.25f, 1e-5);
    fl_dataset_free(d);
    fl_scale_parse("meanstd:0.5,0.5,0.5,1,1,1", &s, &e);
    expect_err(fl_dataset_load(tpath("rt0-images-idx3-ubyte"), &s, 0, &d, &e), FL_ERR_ARG, &e,
               "3 channels", NULL);
    assert_null(d);
}

static void test_idx_errors(void **state) {
    (void)state;
    fl_err e = {0};
    fl_idx a;
    uint8_t good[4 + 8 + 6] = {0, 0, 8, 2, 0, 0, 0, 2, 0, 0, 0, 3, 1, 2, 3, 4, 5, 6};
    assert_int_equal(fl_idx_parse(good, sizeof good, "g", &a, &e), FL_OK);
    assert_int_equal(a.count, 6);
    assert_int_equal(a.data[5], 6);
    fl_idx_free(&a);
    expect_err(fl_idx_parse(good, sizeof good - 1, "t.idx", &a, &e), FL_ERR_FORMAT, &e, "t.idx",
               "truncated");
    expect_err(fl_idx_parse(good, 7, "h.idx", &a, &e), FL_ERR_FORMAT, &e, "h.idx", "header");
    expect_err(fl_idx_parse(good, 2, "h.idx", &a, &e), FL_ERR_FORMAT, &e, "truncated", NULL);
    uint8_t more[sizeof good + 1];
    memcpy(more, good, sizeof good);
    more[sizeof good] = 9;
    expect_err(fl_idx_parse(more, sizeof more, "m.idx", &a, &e), FL_ERR_FORMAT, &e, "unexpected",
               NULL);
    uint8_t bad[sizeof good];
    memcpy(bad, good, sizeof good);
    bad[0] = 0x50;
    expect_err(fl_idx_parse(bad, sizeof bad, "b.idx", &a, &e), FL_ERR_FORMAT, &e, "not an IDX",
               NULL);
    memcpy(bad, good, sizeof good);
    bad[2] = 0x0D;
    expect_err(fl_idx_parse(bad, sizeof bad, "f.idx", &a, &e), FL_ERR_UNSUPPORTED, &e, "float",
               NULL);
    memcpy(bad, good, sizeof good);
    bad[3] = 0;
    expect_err(fl_idx_parse(bad, sizeof bad, "z.idx", &a, &e), FL_ERR_FORMAT, &e, "dimensions",
               NULL);
    /* dimensions whose product overflows: rejected before any allocation */
    uint8_t huge[4 + 16] = {0, 0, 8, 4};
    memset(huge + 4, 0xFF, 16);
    expect_err(fl_idx_parse(huge, sizeof huge, "huge.idx", &a, &e), FL_ERR_FORMAT, &e,
               "absurdly large", NULL);
    assert_null(a.data);
    /* zero-sized arrays are fine */
    uint8_t empty[8] = {0, 0, 8, 1, 0, 0, 0, 0};
    assert_int_equal(fl_idx_parse(empty, sizeof empty, "e", &a, &e), FL_OK);
    assert_int_equal(a.count, 0);
    fl_idx_free(&a);

    /* files: truncated raw file, truncated and corrupted gzip, label count mismatch */
    fl_dataset *d;
    char spec[1100];
    write_bytes(tpath("cut-images-idx3-ubyte"), good, sizeof good - 2);
    good[3] = 3;
    expect_err(fl_dataset_load(tpath("cut-images-idx3-ubyte"), NULL, 0, &d, &e), FL_ERR_FORMAT,
               &e, "cut-images-idx3-ubyte", NULL);
    make_idx_pair(tpath("z-images-idx3-ubyte.gz"), tpath("z-labels-idx1-ubyte.gz"));
    uint8_t *gz;
    size_t len;
    FILE *f = fopen(tpath("z-images-idx3-ubyte.gz"), "rb");
    gz = malloc(4096);
    len = fread(gz, 1, 4096, f);
    fclose(f);
    write_bytes(tpath("zt-images-idx3-ubyte.gz"), gz, len / 2);
    expect_err(fl_dataset_load(tpath("zt-images-idx3-ubyte.gz"), NULL, 0, &d, &e), FL_ERR_FORMAT,
               &e, "zt-images-idx3-ubyte.gz", NULL);
    for (size_t i = 12; i < len - 8; i++) gz[i] ^= 0x5A;
    write_bytes(tpath("zc-images-idx3-ubyte.gz"), gz, len);
    expect_err(fl_dataset_load(tpath("zc-images-idx3-ubyte.gz"), NULL, 0, &d, &e), FL_ERR_FORMAT,
               &e, "zc-images-idx3-ubyte.gz", NULL);
    free(gz);
    uint8_t lab3[3] = {0, 1, 2};
    int64_t d1 = 3;
    assert_int_equal(fl_idx_write(tpath("three-labels.idx"), 1, &d1, lab3, &e), FL_OK);
    snprintf(spec, sizeof spec, "idx:%s,%s", tpath("z-images-idx3-ubyte.gz"),
             tpath("three-labels.idx"));
    expect_err(fl_dataset_load(spec, NULL, 0, &d, &e), FL_ERR_SHAPE, &e, "three-labels.idx",
               "5 labels");
    /* labels where images should be */
    snprintf(spec, sizeof spec, "idx:%s", tpath("three-labels.idx"));
    expect_err(fl_dataset_load(spec, NULL, 0, &d, &e), FL_ERR_FORMAT, &e, "idx3", NULL);
    snprintf(spec, sizeof spec, "idx:%s", tpath("missing-images-idx3-ubyte"));
    expect_err(fl_dataset_load(spec, NULL, 0, &d, &e), FL_ERR_IO, &e, "missing-images", NULL);
    assert_null(d);
}

/* ---- Fashion-MNIST ------------------------------------------------------------------------ */
/* Resident and peak resident memory of this process in kB (/proc/self/status), or -1. */
static long proc_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t k = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, k) && line[k] == ':') v = atol(line + k + 1);
    if (f) fclose(f);
    return v;
}

static void test_fashion_mnist(void **state) {
    (void)state;
    fl_err e = {0};
    fl_dataset *d;
    /* Memory: the 60000 images stay 8-bit (47 MB), and loading never holds the inflated file
     * next to a copy of it. Writing 5 to clear_refs resets the peak (VmHWM) to the current
     * RSS, so the peak of the load alone is measured. Under ASan freed blocks sit in its
     * quarantine and RSS means little: only the pointers are checked there. */
    FILE *cr = fopen("/proc/self/clear_refs", "w");
    int hwm_reset = cr && fputs("5", cr) >= 0;
    if (cr && fclose(cr) != 0) hwm_reset = 0;
    long rss0 = proc_kb("VmRSS"), hwm0 = proc_kb("VmHWM");
    if (fl_dataset_load("fashion-mnist:train", NULL, 0, &d, &e) != FL_OK) fail_msg("%s", e.msg);
    long rss1 = proc_kb("VmRSS"), hwm1 = proc_kb("VmHWM");
    assert_null(d->x);
    assert_non_null(d->x8);
#ifndef __SANITIZE_ADDRESS__
    if (rss0 > 0 && rss1 > 0) {
        long mb = (rss1 - rss0) >> 10;
        if (mb < 40 || mb > 56) fail_msg("train set takes %ld MB resident (expected ~47)", mb);
    }
    if (hwm_reset && hwm0 > 0 && hwm1 > 0 && (hwm1 - hwm0) >> 10 > 80)
        fail_msg("loading the train set peaked at %ld MB more (expected ~47-64)",
                 (hwm1 - hwm0) >> 10);
#else
    (void)rss0, (void)rss1, (void)hwm0, (void)hwm1, (void)hwm_reset;
#endif
    assert_int_equal(d->n, 60000);
    assert_int_equal(d->c, 1);
    assert_int_equal(d->h, 28);
    assert_int_equal(d->w, 28);
    assert_int_equal(d->n_classes, 10);
    assert_string_equal(d->class_names[0], "T-shirt/top");
    assert_string_equal(d->class_names[9], "Ankle boot");
    int counts[10] = {0};
    for (int64_t i = 0; i < d->n; i++) {
        assert_true(d->y[i] >= 0 && d->y[i] < 10);
        counts[d->y[i]]++;
    }
    for (int k = 0; k < 10; k++) assert_int_equal(counts[k], 6000);
    /* The published statistics of the training pixels in [0,1]: mean 0.2860, std 0.3530. */
    double s = 0, s2 = 0, lo = 1, hi = 0;
    int64_t total = d->n * 784;
    fl_tensor x = {0};
    for (int64_t b = 0; b < d->n; b += 1000) { /* one batch tensor, reused */
        assert_int_equal(fl_dataset_batch(d, b, 1000, &x, &e), FL_OK);
        for (int64_t i = 0; i < x.size; i++) {
            s += x.data[i];
            s2 += (double)x.data[i] * x.data[i];
            if (x.data[i] < lo) lo = x.data[i];
            if (x.data[i] > hi) hi = x.data[i];
        }
    }
    fl_tensor_free(&x);
    double mean = s / (double)total, sd = sqrt(s2 / (double)total - mean * mean);
    if (fabs(mean - 0.2860) > 5e-4 || fabs(sd - 0.3530) > 5e-4)
        fail_msg("train pixel mean %.5f std %.5f (expected 0.2860, 0.3530)", mean, sd);
    assert_float_equal(lo, 0.0, 0);
    assert_float_equal(hi, 1.0, 0);
    fl_dataset_free(d);

    assert_int_equal(fl_dataset_load("fashion-mnist:test", NULL, 0, &d, &e), FL_OK);
    assert_int_equal(d->n, 10000);
    memset(counts, 0, sizeof counts);
    for (int64_t i = 0; i < d->n; i++) counts[d->y[i]]++;
    for (int k = 0; k < 10; k++) assert_int_equal(counts[k], 1000);
    assert_int_equal(d->y[0], 9); /* the first test image is an ankle boot */
    assert_non_null(strstr(d->source, "t10k-images-idx3-ubyte"));
    fl_dataset_free(d);

    assert_int_equal(fl_dataset_load("fashion-mnist:test", NULL, 100, &d, &e), FL_OK);
    assert_int_equal(d->n, 100);
    fl_dataset_free(d);
}

/* ---- named specs and spec errors --------------------------------------------------------- */
static void test_spec_errors(void **state) {
    (void)state;
    fl_err e = {0};
    fl_dataset *d;
    expect_err(fl_dataset_load("fashion-mnist:val", NULL, 0, &d, &e), FL_ERR_ARG, &e, "val",
               "train or test");
    expect_err(fl_dataset_load("imagenet", NULL, 0, &d, &e), FL_ERR_ARG, &e, "imagenet",
               "fashion-mnist[:train|test]");
    expect_err(fl_dataset_load("", NULL, 0, &d, &e), FL_ERR_ARG, &e, "accepted forms", NULL);
    expect_err(fl_dataset_load("/nonexistent/dir/x", NULL, 0, &d, &e), FL_ERR_NOTFOUND, &e,
               "/nonexistent/dir/x", NULL);
    expect_err(fl_dataset_load("fashion-mnist:train", NULL, -1, &d, &e), FL_ERR_ARG, &e,
               "negative", NULL);
    if (access("/usr/share/datasets/mnist", F_OK) != 0)
        expect_err(fl_dataset_load("mnist:test", NULL, 0, &d, &e), FL_ERR_NOTFOUND, &e,
                   "/usr/share/datasets/mnist", NULL);
    expect_err(fl_dataset_load("cifar10:/nonexistent", NULL, 0, &d, &e), FL_ERR_NOTFOUND, &e,
               "/nonexistent", NULL);
    assert_null(d);
}

/* ---- NPY --------------------------------------------------------------------------------- */
static void test_npy_roundtrip(void **state) {
    (void)state;
    fl_err e = {0};
    float f[6] = {0.5f, -1.25f, 3e8f, 0.0f, 1.0f / 3.0f, -0.0f};
    uint8_t u[6] = {0, 1, 127, 128, 254, 255};
    int32_t i32[6] = {0, -1, 2147483647, -2147483647 - 1, 42, 7};
    int64_t i64[6] = {0, -1, INT64_MAX, INT64_MIN, 1LL << 40, 7};
    const void *src[4] = {f, u, i32, i64};
    fl_dtype dts[4] = {FL_DT_F32, FL_DT_U8, FL_DT_I32, FL_DT_I64};
    int64_t shape[3] = {1, 2, 3};
    for (int k = 0; k < 4; k++) {
        char name[64];
        snprintf(name, sizeof name, "rt_%s.npy", fl_dtype_name(dts[k]));
        const char *p = tpath(name);
        assert_int_equal(fl_npy_write(p, dts[k], 3, shape, src[k], &e), FL_OK);
        fl_npy a;
        if (fl_npy_read(p, &a, &e) != FL_OK) fail_msg("%s", e.msg);
        assert_int_equal(a.dtype, dts[k]);
        assert_int_equal(a.ndim, 3);
        assert_int_equal(a.shape[2], 3);
        assert_int_equal(a.count, 6);
        assert_memory_equal(a.data, src[k], 6 * fl_dtype_size(dts[k]));
        fl_npy_free(&a);
        /* the data starts at a 64-byte boundary like numpy's own files */
        uint8_t *raw;
        size_t len;
        assert_int_equal(fl_file_read(p, &raw, &len, &e), FL_OK);
        assert_int_equal((len - 6 * fl_dtype_size(dts[k])) % 64, 0);
        assert_int_equal(raw[len - 6 * fl_dtype_size(dts[k]) - 1], '\n');
        free(raw);
    }
    fl_tensor t;
    assert_int_equal(fl_npy_read_tensor(tpath("rt_int32.npy"), &t, &e), FL_OK);
    assert_int_equal(t.size, 6);
    assert_float_equal(t.data[4], 42.0f, 0);
    fl_tensor_free(&t);
    /* 1-D and 0-D shapes ("(6,)" and "()") */
    assert_int_equal(fl_npy_write(tpath("one.npy"), FL_DT_F32, 1, (int64_t[]){6}, f, &e), FL_OK);
    assert_int_equal(fl_npy_read_tensor(tpath("one.npy"), &t, &e), FL_OK);
    assert_int_equal(t.ndim, 1);
    assert_float_equal(t.data[1], -1.25f, 0);
    assert_int_equal(fl_npy_write_tensor(tpath("one_t.npy"), &t, &e), FL_OK);
    fl_tensor_free(&t);
    assert_int_equal(fl_npy_write(tpath("zero.npy"), FL_DT_F32, 0, NULL, f, &e), FL_OK);
    assert_int_equal(fl_npy_read_tensor(tpath("zero.npy"), &t, &e), FL_OK);
    assert_int_equal(t.ndim, 0);
    assert_int_equal(t.size, 1);
    assert_float_equal(t.data[0], 0.5f, 0);
    fl_tensor_free(&t);
}

/* Build an NPY file with a given header dict and payload size. */
static size_t make_npy(uint8_t *buf, int major, const char *dict, size_t payload) {
    size_t pre = major == 1 ? 10 : 12, n = strlen(dict);
    size_t hlen = (pre + n + 1 + 63) / 64 * 64 - pre;
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (uint8_t)major;
    buf[7] = 0;
    memset(buf + 8, 0, 4);
    buf[8] = (uint8_t)hlen;
    buf[9] = (uint8_t)(hlen >> 8);
    memcpy(buf + pre, dict, n);
    memset(buf + pre + n, ' ', hlen - n - 1);
    buf[pre + hlen - 1] = '\n';
    memset(buf + pre + hlen, 0, payload);
    return pre + hlen + payload;
}

static void test_npy_errors(void **state) {
    (void)state;
    fl_err e = {0};
    fl_npy a;
    static uint8_t buf[4096];
    size_t n;
    n = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24);
    assert_int_equal(fl_npy_parse(buf, n, "ok.npy", &a, &e), FL_OK);
    fl_npy_free(&a);
    n = make_npy(buf, 2, "{\"shape\": (2,3),\"fortran_order\":False,\"descr\":\"|u1\"}", 6);
    assert_int_equal(fl_npy_parse(buf, n, "v2.npy", &a, &e), FL_OK);
    assert_int_equal(a.dtype, FL_DT_U8);
    fl_npy_free(&a);
    n = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", 24);
    expect_err(fl_npy_parse(buf, n, "fort.npy", &a, &e), FL_ERR_UNSUPPORTED, &e, "fort.npy",
               "Fortran");
    n = make_npy(buf, 1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", 24);
    expect_err(fl_npy_parse(buf, n, "be.npy", &a, &e), FL_ERR_UNSUPPORTED, &e, "be.npy",
               "big-endian");
    n = make_npy(buf, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", 48);
    expect_err(fl_npy_parse(buf, n, "f8.npy", &a, &e), FL_ERR_UNSUPPORTED, &e, "'<f8'",
               "not supported");
    n = make_npy(buf, 1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", 8);
    expect_err(fl_npy_parse(buf, n, "rec.npy", &a, &e), FL_ERR_UNSUPPORTED, &e, "structured",
               NULL);
    n = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24);
    expect_err(fl_npy_parse(buf, n - 1, "cut.npy", &a, &e), FL_ERR_FORMAT, &e, "cut.npy",
               "truncated");
    expect_err(fl_npy_parse(buf, 40, "cuthdr.npy", &a, &e), FL_ERR_FORMAT, &e, "truncated NPY "
               "header", NULL);
    n = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 28);
    expect_err(fl_npy_parse(buf, n, "long.npy", &a, &e), FL_ERR_FORMAT, &e, "unexpected", NULL);
    n = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2 3), }", 24);
    expect_err(fl_npy_parse(buf, n, "bad.npy", &a, &e), FL_ERR_FORMAT, &e, "malformed", NULL);
    n = make_npy(buf, 1, "{'descr': '<f4', 'shape': (2, 3), }", 24);
    expect_err(fl_npy_parse(buf, n, "miss.npy", &a, &e), FL_ERR_FORMAT, &e, "fortran_order",
               NULL);
    n = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967295, "
                 "4294967295, 4294967295), }", 0);
    expect_err(fl_npy_parse(buf, n, "huge.npy", &a, &e), FL_ERR_FORMAT, &e, "absurdly", NULL);
    n = make_npy(buf, 4, "{}", 0);
    expect_err(fl_npy_parse(buf, n, "v4.npy", &a, &e), FL_ERR_UNSUPPORTED, &e, "version", NULL);
    expect_err(fl_npy_parse((const uint8_t *)"PK\3\4 not numpy", 15, "zip.npy", &a, &e),
               FL_ERR_FORMAT, &e, "magic", NULL);
    assert_null(a.data);
    /* the same through the file reader and the dataset loader */
    n = make_npy(buf, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 2, 2), }", 32);
    write_bytes(tpath("d_x.npy"), buf, n);
    fl_dataset *d;
    expect_err(fl_dataset_load(tpath("d_x.npy"), NULL, 0, &d, &e), FL_ERR_UNSUPPORTED, &e,
               "d_x.npy", "astype");
    assert_null(d);
}

static void test_npy_dataset(void **state) {
    (void)state;
    fl_err e = {0};
    fl_dataset *d;
    uint8_t xu[3 * 2 * 2];
    for (int i = 0; i < 12; i++) xu[i] = (uint8_t)(i * 20);
    int64_t y[3] = {2, 0, 1};
    assert_int_equal(fl_npy_write(tpath("train_x.npy"), FL_DT_U8, 3, (int64_t[]){3, 2, 2}, xu, &e),
                     FL_OK);
    assert_int_equal(fl_npy_write(tpath("train_y.npy"), FL_DT_I64, 1, (int64_t[]){3}, y, &e),
                     FL_OK);
    /* sister y file found automatically */
    if (fl_dataset_load(tpath("train_x.npy"), NULL, 0, &d, &e) != FL_OK) fail_msg("%s", e.msg);
    assert_int_equal(d->n, 3);
    assert_int_equal(d->c, 1);
    assert_int_equal(d->h, 2);
    assert_float_equal(to_float(d)[11], 220.0f / 255.0f, 1e-6);
    assert_int_equal(d->y[0], 2);
    assert_int_equal(d->n_classes, 3);
    fl_dataset_free(d);
    /* float32 [n,c,h,w]: used as-is, or scaled when asked */
    float xf[2 * 3 * 1 * 2];
    for (int i = 0; i < 12; i++) xf[i] = (float)i / 11.0f;
    assert_int_equal(fl_npy_write(tpath("f.npy"), FL_DT_F32, 4, (int64_t[]){2, 3, 1, 2}, xf, &e),
                     FL_OK);
    char spec[1100];
    snprintf(spec, sizeof spec, "npy:%s", tpath("f.npy"));
    assert_int_equal(fl_dataset_load(spec, NULL, 0, &d, &e), FL_OK);
    assert_int_equal(d->c, 3);
    assert_null(d->x8); /* float sources keep float storage */
    assert_memory_equal(d->x, xf, sizeof xf);
    assert_false(d->has_labels);
    fl_dataset_free(d);
    fl_scale s;
    fl_scale_parse("pm1", &s, &e);
    assert_int_equal(fl_dataset_load(spec, &s, 0, &d, &e), FL_OK);
    assert_float_equal(d->x[11], 1.0f, 1e-6);
    assert_float_equal(d->x[0], -1.0f, 1e-6);
    fl_dataset_free(d);
    /* labels that do not fit */
    snprintf(spec, sizeof spec, "npy:%s,%s", tpath("f.npy"), tpath("train_y.npy"));
    expect_err(fl_dataset_load(spec, NULL, 0, &d, &e), FL_ERR_SHAPE, &e, "train_y.npy", "[2]");
    /* NaN in float images */
    xf[5] = NAN;
    assert_int_equal(fl_npy_write(tpath("nan.npy"), FL_DT_F32, 3, (int64_t[]){2, 3, 2}, xf, &e),
                     FL_OK);
    expect_err(fl_dataset_load(tpath("nan.npy"), NULL, 0, &d, &e), FL_ERR_NAN, &e, "nan.npy",
               "element 5");
}

/* ---- CIFAR-10 --------------------------------------------------------------------------- */
static void write_cifar(const char *path, int records, int label0) {
    uint8_t *b = malloc((size_t)records * 3073);
    for (int r = 0; r < records; r++) {
        b[r * 3073] = (uint8_t)((label0 + r) % 10);
        for (int k = 0; k < 3072; k++) b[r * 3073 + 1 + k] = (uint8_t)(k / 1024 * 100 + r);
    }
    write_bytes(path, b, (size_t)records * 3073);
    free(b);
}

static void test_cifar(void **state) {
    (void)state;
    fl_err e = {0};
    fl_dataset *d;
    char dir[512], spec[600];
    snprintf(dir, sizeof dir, "%s/cifar", tmpdir);
    assert_int_equal(mkdir(dir, 0755), 0);
    write_cifar(tpath("cifar/data_batch_1.bin"), 3, 0);
    write_cifar(tpath("cifar/data_batch_2.bin"), 2, 5);
    write_cifar(tpath("cifar/test_batch.bin"), 4, 9);
    snprintf(spec, sizeof spec, "cifar10:%s", dir);
    if (fl_dataset_load(spec, NULL, 0, &d, &e) != FL_OK) fail_msg("%s", e.msg);
    assert_int_equal(d->n, 5);
    assert_int_equal(d->c, 3);
    assert_int_equal(d->h, 32);
    assert_int_equal(d->w, 32);
    assert_int_equal(d->y[3], 5); /* first record of batch 2 */
    assert_string_equal(d->class_names[d->y[3]], "dog");
    /* record 1, green plane = 100 + 1 */
    const float *x = to_float(d);
    assert_float_equal(x[1 * 3072 + 1024 + 17], 101.0f / 255.0f, 1e-6);
    assert_float_equal(x[1 * 3072 + 2048], 201.0f / 255.0f, 1e-6);
    fl_dataset_free(d);
    snprintf(spec, sizeof spec, "cifar10:%s:test", dir);
    assert_int_equal(fl_dataset_load(spec, NULL, 0, &d, &e), FL_OK);
    assert_int_equal(d->n, 4);
    assert_int_equal(d->y[1], 0);
    fl_dataset_free(d);
    assert_int_equal(fl_dataset_load(tpath("cifar/data_batch_1.bin"), NULL, 2, &d, &e), FL_OK);
    assert_int_equal(d->n, 2);
    fl_dataset_free(d);
    /* broken batches */
    uint8_t junk[3073 + 10] = {0};
    write_bytes(tpath("short.bin"), junk, sizeof junk);
    expect_err(fl_dataset_load(tpath("short.bin"), NULL, 0, &d, &e), FL_ERR_FORMAT, &e,
               "short.bin", "3073");
    junk[0] = 12;
    write_bytes(tpath("lab.bin"), junk, 3073);
    expect_err(fl_dataset_load(tpath("lab.bin"), NULL, 0, &d, &e), FL_ERR_FORMAT, &e, "lab.bin",
               "label 12");
    snprintf(spec, sizeof spec, "cifar10:%s", tmpdir);
    expect_err(fl_dataset_load(spec, NULL, 0, &d, &e), FL_ERR_NOTFOUND, &e, "data_batch", NULL);
}

/* ---- PNG folders and PNG output ---------------------------------------------------------- */
static void write_gray(const char *path, int h, int w, int seed) {
    float img[64 * 64];
    for (int i = 0; i < h * w; i++) img[i] = (float)((i * 13 + seed) % 256) / 255.0f;
    fl_err e = {0};
    if (fl_png_write(path, img, 1, h, w, 0.0f, 1.0f, &e) != FL_OK) fail_msg("%s", e.msg);
}

static void test_pngdir(void **state) {
    (void)state;
    fl_err e = {0};
    fl_dataset *d;
    assert_int_equal(mkdir(tpath("png"), 0755), 0);
    assert_int_equal(mkdir(tpath("png/zebra"), 0755), 0);
    assert_int_equal(mkdir(tpath("png/cat"), 0755), 0);
    write_gray(tpath("png/zebra/b.png"), 5, 6, 3);
    write_gray(tpath("png/zebra/a.png"), 5, 6, 2);
    write_gray(tpath("png/cat/x.png"), 5, 6, 1);
    write_bytes(tpath("png/cat/notes.txt"), "hi", 2); /* ignored */
    if (fl_dataset_load(tpath("png"), NULL, 0, &d, &e) != FL_OK) fail_msg("%s", e.msg);
    assert_int_equal(d->n, 3);
    assert_int_equal(d->c, 1);
    assert_int_equal(d->h, 5);
    assert_int_equal(d->w, 6);
    assert_int_equal(d->n_classes, 2);
    assert_string_equal(d->class_names[0], "cat");
    assert_string_equal(d->class_names[1], "zebra");
    assert_int_equal(d->y[0], 0);
    assert_int_equal(d->y[1], 1);
    assert_int_equal(d->y[2], 1);
    /* exact 8-bit round trip; sample 1 is zebra/a.png (seed 2) */
    const float *x = to_float(d);
    for (int i = 0; i < 30; i++)
        assert_float_equal(x[30 + i], (float)((i * 13 + 2) % 256) / 255.0f, 1e-6);
    fl_dataset_free(d);
    /* one RGB image makes the dataset RGB; gray images are expanded */
    float rgb[3 * 5 * 6];
    for (int i = 0; i < 90; i++) rgb[i] = i < 30 ? 1.0f : 0.0f; /* pure red */
    assert_int_equal(fl_png_write(tpath("png/zebra/c.png"), rgb, 3, 5, 6, 0, 1, &e), FL_OK);
    assert_int_equal(fl_dataset_load(tpath("png"), NULL, 0, &d, &e), FL_OK);
    assert_int_equal(d->c, 3);
    assert_int_equal(d->n, 4);
    x = to_float(d);
    assert_float_equal(x[3 * 90 + 0], 1.0f, 0);
    assert_float_equal(x[3 * 90 + 30], 0.0f, 0);
    assert_float_equal(x[90 + 30 + 1], (float)((13 + 2) % 256) / 255.0f, 1e-6);
    fl_dataset_free(d);
    /* a size mismatch names the file */
    write_gray(tpath("png/zebra/d.png"), 6, 6, 0);
    expect_err(fl_dataset_load(tpath("png"), NULL, 0, &d, &e), FL_ERR_SHAPE, &e, "zebra/d.png",
               "same size");
    /* a corrupt PNG names the file */
    write_bytes(tpath("png/zebra/d.png"), "\x89PNG\r\n\x1a\n garbage", 17);
    expect_err(fl_dataset_load(tpath("png"), NULL, 0, &d, &e), FL_ERR_FORMAT, &e, "zebra/d.png",
               NULL);
    /* PNGs without class folders: unlabelled */
    assert_int_equal(mkdir(tpath("flat"), 0755), 0);
    write_gray(tpath("flat/1.png"), 3, 3, 0);
    write_gray(tpath("flat/2.png"), 3, 3, 0);
    assert_int_equal(fl_dataset_load(tpath("flat"), NULL, 0, &d, &e), FL_OK);
    assert_int_equal(d->n, 2);
    assert_false(d->has_labels);
    fl_dataset_free(d);
    assert_int_equal(mkdir(tpath("empty"), 0755), 0);
    expect_err(fl_dataset_load(tpath("empty"), NULL, 0, &d, &e), FL_ERR_NOTFOUND, &e,
               "no PNG images", NULL);
}

static void read_png(const char *path, int *w, int *h, int *color, uint8_t **pix) {
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_file(&im, path)) fail_msg("%s: %s", path, im.message);
    *w = (int)im.width;
    *h = (int)im.height;
    *color = (im.format & PNG_FORMAT_FLAG_COLOR) != 0;
    im.format = PNG_FORMAT_GRAY;
    *pix = malloc(PNG_IMAGE_SIZE(im));
    assert_true(png_image_finish_read(&im, NULL, *pix, 0, NULL));
}

static void test_png_grid(void **state) {
    (void)state;
    fl_err e = {0};
    enum { N = 5, H = 4, W = 7 };
    float imgs[N * H * W];
    for (int i = 0; i < N * H * W; i++) imgs[i] = 0.5f;
    const char *labels[N] = {"Ankle boot", "T-shirt/top", NULL, "7->3\n(0.91)", "x"};
    assert_int_equal(fl_image_grid_write(tpath("grid.png"), imgs, N, 1, H, W, 3, labels, &e),
                     FL_OK);
    int w, h, color;
    uint8_t *pix;
    read_png(tpath("grid.png"), &w, &h, &color, &pix);
    /* tiles enlarged toward 10 characters (60 px) but by at most 8; two label lines of 9 px */
    int zoom = 8, tw = W * zoom, th = H * zoom, lab = 2 * 9 + 1;
    assert_int_equal(w, 3 * (tw + 2) + 2);
    assert_int_equal(h, 2 * (th + lab + 2) + 2);
    assert_false(color);
    assert_int_equal(pix[0], 255);                /* white border */
    assert_int_equal(pix[2 * w + 2], 128);        /* image pixel 0.5 */
    int black = 0, black_tile3 = 0;               /* text pixels under tile 0 and tile 2 */
    for (int y = 2 + th; y < 2 + th + lab; y++)
        for (int x = 2; x < 2 + tw; x++) black += pix[y * w + x] == 0;
    for (int y = 2 + th; y < 2 + th + lab; y++)
        for (int x = 2 + 2 * (tw + 2); x < 2 + 2 * (tw + 2) + tw; x++)
            black_tile3 += pix[y * w + x] == 0;
    assert_true(black > 40);
    assert_int_equal(black_tile3, 0); /* NULL label: nothing drawn */
    free(pix);
    /* no labels, RGB, auto columns */
    float rgb[4 * 3 * 2 * 2];
    for (int i = 0; i < 48; i++) rgb[i] = (float)i / 47.0f;
    assert_int_equal(fl_image_grid_write(tpath("rgb.png"), rgb, 4, 3, 2, 2, 0, NULL, &e), FL_OK);
    read_png(tpath("rgb.png"), &w, &h, &color, &pix);
    assert_int_equal(w, 2 * (2 + 2) + 2);
    assert_int_equal(h, 2 * (2 + 2) + 2);
    assert_true(color);
    free(pix);
    /* scaled input is mapped back: pm1 value 0 is mid gray */
    fl_scale s;
    fl_scale_parse("pm1", &s, &e);
    float z[4] = {0, 0, 0, 0};
    assert_int_equal(
        fl_image_grid_write_scaled(tpath("s.png"), z, 1, 1, 2, 2, 1, NULL, &s, &e), FL_OK);
    read_png(tpath("s.png"), &w, &h, &color, &pix);
    assert_int_equal(pix[2 * w + 2], 128);
    free(pix);
    /* single image, value range, no temp file left behind */
    float one[4] = {-1, 0, 1, NAN};
    assert_int_equal(fl_png_write(tpath("one.png"), one, 1, 2, 2, -1, 1, &e), FL_OK);
    read_png(tpath("one.png"), &w, &h, &color, &pix);
    assert_int_equal(w, 2);
    assert_int_equal(pix[0], 0);
    assert_int_equal(pix[1], 128);
    assert_int_equal(pix[2], 255);
    assert_int_equal(pix[3], 0);
    free(pix);
    expect_err(fl_png_write(tpath("bad.png"), one, 2, 2, 2, 0, 1, &e), FL_ERR_ARG, &e, "bad.png",
               "channels");
    expect_err(fl_png_write(tpath("/nodir/x.png"), one, 1, 2, 2, 0, 1, &e), FL_ERR_IO, &e,
               "nodir", NULL);
}

/* ---- batches ----------------------------------------------------------------------------- */
static void test_gather_view(void **state) {
    (void)state;
    fl_err e = {0};
    fl_dataset *d;
    assert_int_equal(fl_dataset_new(4, 1, 2, 2, &d, &e), FL_OK);
    for (int i = 0; i < 16; i++) d->x[i] = (float)i;
    for (int i = 0; i < 4; i++) d->y[i] = 3 - i;
    int64_t idx[2] = {3, 1};
    fl_tensor x = {0};
    int32_t y[2];
    assert_int_equal(fl_dataset_gather(d, idx, 2, &x, y, &e), FL_OK);
    assert_int_equal(x.ndim, 4);
    assert_int_equal(x.shape[0], 2);
    assert_float_equal(x.data[0], 12.0f, 0);
    assert_float_equal(x.data[4], 4.0f, 0);
    assert_int_equal(y[0], 0);
    assert_int_equal(y[1], 2);
    /* reuse: same shape works, a different batch size is a shape error */
    idx[0] = 0;
    assert_int_equal(fl_dataset_gather(d, idx, 2, &x, NULL, &e), FL_OK);
    assert_float_equal(x.data[0], 0.0f, 0);
    expect_err(fl_dataset_gather(d, idx, 1, &x, NULL, &e), FL_ERR_SHAPE, &e, "[2,1,2,2]", NULL);
    idx[1] = 4;
    expect_err(fl_dataset_gather(d, idx, 2, &x, NULL, &e), FL_ERR_ARG, &e, "index 4", NULL);
    fl_tensor_free(&x);
    fl_tensor v = fl_dataset_view(d, 3, 10);
    assert_int_equal(v.shape[0], 1);
    assert_int_equal(v.size, 4);
    assert_float_equal(v.data[0], 12.0f, 0);
    fl_dataset_free(d);
    expect_err(fl_dataset_new(-1, 1, 2, 2, &d, &e), FL_ERR_ARG, &e, "out of range", NULL);
    expect_err(fl_dataset_new(1LL << 30, 3, 1 << 15, 1 << 15, &d, &e), FL_ERR_ARG, &e,
               "out of range", NULL);
}

/* 8-bit storage: gather, batch and to_float give the scaled values of every scale kind,
 * per channel; view gives nothing. */
static void test_u8_storage(void **state) {
    (void)state;
    enum { N = 3, C = 3, H = 4, W = 5, CHW = C * H * W };
    uint8_t px[N * CHW];
    for (int i = 0; i < N * CHW; i++) px[i] = (uint8_t)(i * 37 % 256);
    px[0] = 0, px[1] = 255;
    fl_err e = {0};
    assert_int_equal(fl_npy_write(tpath("u8.npy"), FL_DT_U8, 4, (int64_t[]){N, C, H, W}, px, &e),
                     FL_OK);
    const char *scales[5] = {"01", "pm1", "none", "meanstd:0.5,0.25",
                             "meanstd:0.4,0.5,0.6,0.2,0.3,0.4"};
    for (int k = 0; k < 5; k++) {
        fl_scale sc;
        fl_dataset *d;
        assert_int_equal(fl_scale_parse(scales[k], &sc, &e), FL_OK);
        if (fl_dataset_load(tpath("u8.npy"), &sc, 0, &d, &e) != FL_OK) fail_msg("%s", e.msg);
        assert_null(d->x);
        assert_memory_equal(d->x8, px, sizeof px);
        /* expected[i] for every pixel, computed here from the definitions */
        float want[N * CHW];
        for (int i = 0; i < N * CHW; i++) {
            int ch = i / (H * W) % C;
            float v = px[i];
            switch (k) {
            case 0: want[i] = v / 255.0f; break;
            case 1: want[i] = v / 127.5f - 1.0f; break;
            case 2: want[i] = v; break;
            case 3: want[i] = (v / 255.0f - 0.5f) / 0.25f; break;
            default: want[i] = (v / 255.0f - sc.mean[ch]) / sc.std[ch]; break;
            }
        }
        fl_tensor v = fl_dataset_view(d, 0, N);
        assert_null(v.data);
        assert_int_equal(v.ndim, 0);
        int64_t idx[2] = {2, 0};
        fl_tensor g = {0}, b = {0};
        assert_int_equal(fl_dataset_gather(d, idx, 2, &g, NULL, &e), FL_OK);
        assert_int_equal(fl_dataset_batch(d, 1, 2, &b, &e), FL_OK);
        assert_int_equal(b.ndim, 4);
        assert_int_equal(b.shape[0], 2);
        assert_int_equal(b.shape[1], C);
        for (int i = 0; i < CHW; i++) {
            float tol = 1e-5f * (fabsf(want[i]) > 1 ? fabsf(want[i]) : 1);
            assert_float_equal(g.data[i], want[2 * CHW + i], tol);
            assert_float_equal(g.data[CHW + i], want[i], tol);
            assert_float_equal(b.data[i], want[CHW + i], tol);
            assert_float_equal(b.data[CHW + i], want[2 * CHW + i], tol);
        }
        if (k == 2) assert_float_equal(g.data[CHW + 1], 255.0f, 0); /* raw values are exact */
        /* the whole array: same floats as the batches, bit for bit; then view works */
        const float *x = to_float(d);
        assert_memory_equal(x + CHW, b.data, 2 * CHW * sizeof(float));
        v = fl_dataset_view(d, 1, 2);
        assert_ptr_equal(v.data, x + CHW);
        assert_int_equal(v.shape[0], 2);
        fl_tensor_free(&g);
        fl_tensor_free(&b);
        fl_dataset_free(d);
    }
    /* a 3-channel mean/std scale does not fit 1-channel 8-bit data */
    fl_scale sc;
    fl_dataset *d;
    assert_int_equal(fl_scale_parse(scales[4], &sc, &e), FL_OK);
    assert_int_equal(fl_npy_write(tpath("u8g.npy"), FL_DT_U8, 3, (int64_t[]){N, H, W}, px, &e),
                     FL_OK);
    expect_err(fl_dataset_load(tpath("u8g.npy"), &sc, 0, &d, &e), FL_ERR_ARG, &e, "3 channels",
               NULL);
    /* limit keeps the first samples of the adopted array */
    assert_int_equal(fl_dataset_load(tpath("u8.npy"), NULL, 2, &d, &e), FL_OK);
    assert_int_equal(d->n, 2);
    assert_memory_equal(d->x8, px, 2 * CHW);
    fl_dataset_free(d);
}

/* fl_dataset_batch: ranges, shapes, and one buffer reused with a smaller last batch. */
static void test_batch(void **state) {
    (void)state;
    fl_err e = {0};
    fl_dataset *d;
    assert_int_equal(fl_dataset_load(tpath("u8.npy"), NULL, 0, &d, &e), FL_OK); /* 3 samples */
    int64_t chw = 3 * 4 * 5;
    fl_tensor x = {0};
    assert_int_equal(fl_dataset_batch(d, 0, 2, &x, &e), FL_OK);
    float *buf = x.data;
    assert_float_equal(x.data[chw + 0], (float)(chw * 37 % 256) / 255.0f, 1e-6);
    /* the last batch: same buffer, smaller shape */
    int64_t last[4] = {1, 3, 4, 5};
    fl_tensor_set_shape(&x, 4, last);
    assert_int_equal(fl_dataset_batch(d, 2, 1, &x, &e), FL_OK);
    assert_ptr_equal(x.data, buf);
    assert_float_equal(x.data[1], (float)((2 * chw + 1) * 37 % 256) / 255.0f, 1e-6);
    /* a batch tensor of the wrong size, ranges past either end */
    expect_err(fl_dataset_batch(d, 0, 2, &x, &e), FL_ERR_SHAPE, &e, "[1,3,4,5]", "[2,3,4,5]");
    expect_err(fl_dataset_batch(d, 2, 2, &x, &e), FL_ERR_ARG, &e, "2..3", "3 samples");
    expect_err(fl_dataset_batch(d, -1, 1, &x, &e), FL_ERR_ARG, &e, "out of range", NULL);
    fl_tensor_free(&x);
    /* an empty batch at the end is fine */
    assert_int_equal(fl_dataset_batch(d, 3, 0, &x, &e), FL_OK);
    assert_int_equal(x.size, 0);
    fl_tensor_free(&x);
    fl_dataset_free(d);
    /* float storage goes through the same call */
    assert_int_equal(fl_dataset_new(2, 1, 1, 2, &d, &e), FL_OK);
    for (int i = 0; i < 4; i++) d->x[i] = (float)i + 0.5f;
    assert_int_equal(fl_dataset_batch(d, 1, 1, &x, &e), FL_OK);
    assert_float_equal(x.data[0], 2.5f, 0);
    assert_float_equal(x.data[1], 3.5f, 0);
    fl_tensor_free(&x);
    fl_dataset_free(d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scale_parse),  cmocka_unit_test(test_idx_roundtrip),
        cmocka_unit_test(test_idx_errors),   cmocka_unit_test(test_fashion_mnist),
        cmocka_unit_test(test_spec_errors),  cmocka_unit_test(test_npy_roundtrip),
        cmocka_unit_test(test_npy_errors),   cmocka_unit_test(test_npy_dataset),
        cmocka_unit_test(test_cifar),        cmocka_unit_test(test_pngdir),
        cmocka_unit_test(test_png_grid),     cmocka_unit_test(test_gather_view),
        cmocka_unit_test(test_u8_storage),   cmocka_unit_test(test_batch),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
