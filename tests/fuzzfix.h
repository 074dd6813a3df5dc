/* The network campaign's test fixture (test_fuzz.c, test_fuzz_grad.c): a small random MLP
 * on 1x8x8 images, a second one that disagrees with it on some seed, 24 unlabelled seeds, a
 * temporary folder, and helpers to look into an output folder. */
#ifndef FLARE_TESTS_FUZZFIX_H
#define FLARE_TESTS_FUZZFIX_H

#include <dirent.h>
#include <unistd.h>

#include "testutil.h"
#include "flare/fuzz.h"
#include "flare/train.h"
#include "fuzz/round.h"

typedef struct fx {
    char dir[64];
    fl_model *m, *m2;
    fl_dataset *seeds;
} fx;

/* 24 unlabelled 1x8x8 seeds (their labels become the model's predictions): smooth blobs, so
 * that the transformations have something to move. */
static inline int setup(void **state) {
    fx *f = calloc(1, sizeof *f);
    fl_err e = {0};
    snprintf(f->dir, sizeof f->dir, "/tmp/flare-fuzz-XXXXXX");
    if (!mkdtemp(f->dir)) return -1;
    if (fl_zoo_build("mlp", 1, 8, 8, 3, 7, &f->m, &e)) return -1;
    if (fl_dataset_new(24, 1, 8, 8, &f->seeds, &e)) return -1;
    fl_rng r;
    fl_rng_seed(&r, 3);
    for (int i = 0; i < 24; i++) {
        float cx = 1 + 6 * fl_rng_uniform(&r), cy = 1 + 6 * fl_rng_uniform(&r);
        for (int y = 0; y < 8; y++)
            for (int x = 0; x < 8; x++) {
                float d2 = (x - cx) * (x - cx) + (y - cy) * (y - cy);
                f->seeds->x[i * 64 + y * 8 + x] = roundf(255 * expf(-d2 / 6)) / 255;
            }
    }
    /* a second network that predicts another class than the first on some seed */
    fl_tensor x = {0};
    if (fl_dataset_batch(f->seeds, 0, 24, &x, &e) || fl_model_forward(f->m, &x, &e)) return -1;
    int32_t p1[24];
    for (int i = 0; i < 24; i++) p1[i] = fz_argmax(fl_model_output(f->m, 0)->data + i * 3, 3, NULL);
    for (uint64_t s = 8; !f->m2 && s < 100; s++) {
        if (fl_zoo_build("mlp", 1, 8, 8, 3, s, &f->m2, &e) || fl_model_forward(f->m2, &x, &e))
            return -1;
        int differ = 0;
        for (int i = 0; i < 24; i++)
            differ += fz_argmax(fl_model_output(f->m2, 0)->data + i * 3, 3, NULL) != p1[i];
        if (!differ) fl_model_free(f->m2), f->m2 = NULL;
    }
    fl_tensor_free(&x);
    if (!f->m2) return -1;
    *state = f;
    return 0;
}

static inline int teardown(void **state) {
    fx *f = *state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
    if (system(cmd)) return -1;
    fl_model_free(f->m);
    fl_model_free(f->m2);
    fl_dataset_free(f->seeds);
    free(f);
    return 0;
}

static inline void opts(fx *f, fl_fuzz_opts *o, const char *sub, char *buf) {
    fl_fuzz_opts_default(o);
    sprintf(buf, "%s/%s", f->dir, sub);
    o->model = f->m;
    o->seeds = f->seeds;
    o->out_dir = buf;
    o->criterion = "nc:0.5:none";
    o->max_execs = 600;
    o->k = 16;
    o->seed = 11;
}

static inline int exists(const char *dir, const char *rel) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    return access(p, F_OK) == 0;
}

static inline int64_t count_files(const char *dir, const char *suffix) {
    DIR *d = opendir(dir);
    int64_t n = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        size_t k = strlen(de->d_name), s = strlen(suffix);
        n += k > s && !strcmp(de->d_name + k - s, suffix);
    }
    if (d) closedir(d);
    return n;
}

#endif
