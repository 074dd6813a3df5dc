/* For the harnesses whose parser reads a file or a folder (fl_profile_load, fl_important_load,
 * the dataset loaders, fl_fuzz_stats_get): a private temporary folder, made on first use and
 * removed at exit, and a way to write the fuzzer's bytes to a file in it. */
#ifndef FLARE_FUZZ_FUZZFILE_H
#define FLARE_FUZZ_FUZZFILE_H

#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char ff_root[64];


static inline int ff_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static inline void ff_cleanup(void) {
    if (ff_root[0]) nftw(ff_root, ff_rm, 16, FTW_DEPTH | FTW_PHYS);
}

/* The temporary folder (aborts when it cannot be made: the harness cannot run). */
static inline const char *ff_dir(void) {
    if (!ff_root[0]) {
        snprintf(ff_root, sizeof ff_root, "/tmp/flare-fuzz-XXXXXX");
        if (!mkdtemp(ff_root)) abort();
        atexit(ff_cleanup);
    }
    return ff_root;
}

/* Write data to ff_dir()/rel (its parent folders made); the full path goes to path. */
static inline void ff_write(const char *rel, const uint8_t *data, size_t size, char *path, size_t cap) {
    snprintf(path, cap, "%s/%s", ff_dir(), rel);
    for (char *s = strchr(path + strlen(ff_root) + 1, '/'); s; s = strchr(s + 1, '/')) {
        *s = 0;
        mkdir(path, 0700);
        *s = '/';
    }
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    if (fclose(f)) abort();
}

#endif
