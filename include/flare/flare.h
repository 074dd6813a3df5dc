/* flare.h — the base of every flare module: status codes, error messages, the random
 * number generator, threads and atomic file writes.
 *
 * Conventions used across the library:
 *   - functions that can fail return an fl_status and, on failure, fill an fl_err with a
 *     human-readable message that names the file / node / flag that was wrong;
 *   - objects come in *_new / *_free pairs (or *_load / *_free); *_free(NULL) is a no-op;
 *   - every random decision draws from an explicit fl_rng, so a run is reproducible from the
 *     seed it prints.
 */
#ifndef FLARE_FLARE_H
#define FLARE_FLARE_H

#include <stddef.h>
#include <stdint.h>

#define FLARE_VERSION "0.1.0"

typedef enum fl_status {
    FL_OK = 0,
    FL_ERR_NOMEM,       /* allocation failed */
    FL_ERR_IO,          /* open/read/write/rename failed */
    FL_ERR_FORMAT,      /* a file is truncated, corrupted or not what it claims to be */
    FL_ERR_UNSUPPORTED, /* valid input flare does not handle (op, attribute, dtype) */
    FL_ERR_SHAPE,       /* tensor shapes do not fit together */
    FL_ERR_ARG,         /* bad argument / flag value */
    FL_ERR_NAN,         /* NaN or Inf where finite numbers are required */
    FL_ERR_NOTFOUND,    /* a named thing (layer, file, dataset) does not exist */
    FL_ERR_DATA,        /* well-formed data that cannot support the computation asked for
                         * (a singular covariance, too few traces of a class): a runtime
                         * failure, not a bad argument */
    FL_ERR_COUNT_
} fl_status;

/* Short fixed description of a status code ("out of memory", ...). */
const char *fl_strerror(fl_status st);

/* Error detail filled by failing functions. Always NUL-terminated. */
typedef struct fl_err {
    fl_status status;
    char msg[512];
} fl_err;

/* Fill e (may be NULL) with a printf-style message and return st. Typical use:
 *     return fl_fail(e, FL_ERR_FORMAT, "%s: truncated header", path); */
fl_status fl_fail(fl_err *e, fl_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- random numbers: xoshiro256** with explicit state ---------------------------------- */
typedef struct fl_rng {
    uint64_t s[4];
} fl_rng;

void fl_rng_seed(fl_rng *r, uint64_t seed); /* splitmix64 expansion of seed */
uint64_t fl_rng_u64(fl_rng *r);
uint32_t fl_rng_below(fl_rng *r, uint32_t n); /* uniform in [0, n), n > 0 */
float fl_rng_uniform(fl_rng *r);              /* uniform in [0, 1) */
float fl_rng_normal(fl_rng *r);               /* standard normal (Box-Muller) */
void fl_rng_shuffle(fl_rng *r, int64_t *idx, int64_t n);

/* ---- threads ------------------------------------------------------------------------------
 * flare parallelises its outermost loops (images of a batch, channels, rows) over a small
 * thread pool and runs BLAS single-threaded inside them; results depend only on the seed and
 * the thread count. fl_threads_set(0) means: OPENBLAS_NUM_THREADS if set, else the number of
 * online CPUs. */
void fl_threads_set(int n);
int fl_threads_get(void);

/* fn(ctx, lo, hi, tid) over contiguous ranges of [0, n), one per thread (tid < the thread
 * count); range tid is always [n*tid/T, n*(tid+1)/T). Returns when all are done. Calls from
 * inside a range run inline. */
typedef void (*fl_range_fn)(void *ctx, int64_t lo, int64_t hi, int tid);
void fl_parallel_for(int64_t n, fl_range_fn fn, void *ctx);
/* Upper bound on tid + 1, for sizing per-thread scratch. */
int fl_parallel_slots(void);

/* ---- numbers ------------------------------------------------------------------------------- */
/* 1 when v is a whole number in [lo, hi] (NaN is not). Check it before casting a double read
 * from an outside file to an integer: an out-of-range cast is undefined behaviour. */
int fl_whole(double v, double lo, double hi);

/* ---- hashing ------------------------------------------------------------------------------ */
/* FNV-1a 64 of data[0..n) continuing from h: start with FL_FNV_BASIS, and chain calls to hash
 * several pieces as one byte string (src/core/hash.c). */
#define FL_FNV_BASIS 0xcbf29ce484222325ull /* 14695981039346656037 */
#define FL_FNV_PRIME 0x100000001b3ull      /* 1099511628211 */
uint64_t fl_fnv1a(uint64_t h, const void *data, size_t n);

/* ---- files --------------------------------------------------------------------------------- */
/* Read a whole file (gzip-compressed files are inflated when the path ends in ".gz"). */
fl_status fl_file_read(const char *path, uint8_t **buf, size_t *len, fl_err *e);
/* Map a whole file read-only (mmap, pages read ahead), or read it where it cannot be mapped
 * (".gz", a pipe): the bytes of a large model without a copy into the heap. Release with
 * fl_file_unmap. */
typedef struct fl_mapped {
    const uint8_t *data;
    size_t len;
    int mapped; /* 1: mmap'd; 0: data is a heap copy */
} fl_mapped;
fl_status fl_file_map(const char *path, fl_mapped *f, fl_err *e);
void fl_file_unmap(fl_mapped *f);
/* Read path whole (as fl_file_read), hand the bytes to parse(buf, len, path, out, e), free
 * them: every load-from-a-file over its parse-from-memory. Returns the read's or the parse's
 * status. */
typedef fl_status (*fl_parse_fn)(const uint8_t *buf, size_t len, const char *path, void *out,
                                 fl_err *e);
fl_status fl_file_parse(const char *path, fl_parse_fn parse, void *out, fl_err *e);
/* Write path atomically: write path.tmp.<pid>, fsync, rename over path. Errors name path as
 * given (never the temporary file), and say why it cannot be written as
 * fl_file_check_writable does. */
fl_status fl_file_write_atomic(const char *path, const void *buf, size_t len, fl_err *e);
/* FL_OK when a file could be created at path as far as its folder goes; else FL_ERR_IO in
 * the user's words: "PATH: parent folder DIR does not exist", "DIR is not a folder", "PATH is
 * a directory", "folder DIR is not writable". For checking every output of a command before
 * any is written. */
fl_status fl_file_check_writable(const char *path, fl_err *e);
/* fl_file_durable(0): fl_file_write_atomic (and every writer built on it) skips the fsync
 * before the rename, process-wide. Readers still never see half a file; a power cut may lose
 * the newest files. For a campaign that writes thousands of small files a second, as AFL++
 * does with its queue; the default is 1. */
void fl_file_durable(int on);
/* buf = dir/rel; FL_ERR_ARG naming both when it does not fit in n. */
fl_status fl_path_join(char *buf, size_t n, const char *dir, const char *rel, fl_err *e);
/* 1 when the folder exists and holds an entry whose name does not start with '.'. */
int fl_dir_has_entries(const char *path);
/* mkdir -p: create path and its missing parents (0755). FL_ERR_IO naming the part that could
 * not be made, or path when it exists and is not a folder. */
fl_status fl_mkdirs(const char *path, fl_err *e);

/* ---- logging ------------------------------------------------------------------------------ */
extern int fl_verbosity; /* 0 quiet, 1 normal (default), 2 debug */
void fl_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Elapsed wall-clock seconds since an arbitrary fixed point (monotonic). */
double fl_now(void);

#endif
