/* A small persistent thread pool for flare's outermost loops.
 *
 * Why not OpenBLAS threads: the GEMMs of small networks (LeNet: a few dozen output channels,
 * a few hundred columns per image) are too small to split well, and on two cores OpenBLAS's
 * threads cost more than they bring (measured: LeNet-5 training is faster with one BLAS
 * thread than with two). Splitting the batch instead gives each thread whole images: big
 * enough work, no sharing. So BLAS runs single-threaded and kernels call fl_parallel_for over
 * their outermost loop (images, channels, rows).
 *
 * Determinism: range t of n is always [n*t/T, n*(t+1)/T), so which thread computes what
 * depends only on n and the thread count, and reductions over per-thread partial results are
 * summed in thread order by the caller. Same seed + same thread count -> same bits. */
#include <pthread.h>
#include <stdatomic.h>

#include "flare/flare.h"

enum { MAX_THREADS = 64 };

static struct {
    pthread_mutex_t mu;
    pthread_cond_t start, done;
    int n_workers;       /* threads started (T - 1; the caller is thread 0) */
    _Atomic uint64_t generation; /* bumped per job (under mu, so sleepers never miss it) */
    _Atomic int pending; /* workers still running the current job */
    fl_range_fn fn;
    void *ctx;
    int64_t n;
    int T;               /* threads taking part in the current job */
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER,
            .start = PTHREAD_COND_INITIALIZER,
            .done = PTHREAD_COND_INITIALIZER};

static _Thread_local int in_parallel; /* nested calls run inline */

static void run_range(fl_range_fn fn, void *ctx, int64_t n, int T, int t) {
    int64_t lo = n * t / T, hi = n * (t + 1) / T;
    if (lo < hi) fn(ctx, lo, hi, t);
}

/* Jobs come in bursts (one per op of a forward or backward pass, microseconds apart), so a
 * thread spins briefly before it sleeps: waking a sleeping thread costs more than most ranges
 * take. SPIN iterations of a pause instruction are a few tens of microseconds. */
enum { SPIN = 4000 };

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void *worker(void *arg) {
    int t = (int)(intptr_t)arg;
    uint64_t seen = 0;
    in_parallel = 1;
    for (;;) {
        for (int i = 0; i < SPIN && atomic_load(&pool.generation) == seen; i++) cpu_relax();
        pthread_mutex_lock(&pool.mu);
        while (atomic_load(&pool.generation) == seen) pthread_cond_wait(&pool.start, &pool.mu);
        seen = atomic_load(&pool.generation);
        fl_range_fn fn = pool.fn;
        void *ctx = pool.ctx;
        int64_t n = pool.n;
        int T = pool.T;
        pthread_mutex_unlock(&pool.mu);
        if (t < T) run_range(fn, ctx, n, T, t);
        if (atomic_fetch_sub(&pool.pending, 1) == 1) {
            pthread_mutex_lock(&pool.mu); /* the caller may be asleep on done */
            pthread_cond_signal(&pool.done);
            pthread_mutex_unlock(&pool.mu);
        }
    }
    return NULL;
}

/* Start workers up to T - 1 (never stops them: they sleep on a condition variable). */
static int ensure_workers(int T) {
    while (pool.n_workers < T - 1 && pool.n_workers < MAX_THREADS - 1) {
        pthread_t th;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&th, &at, worker, (void *)(intptr_t)(pool.n_workers + 1));
        pthread_attr_destroy(&at);
        if (rc != 0) break;
        pool.n_workers++;
    }
    return pool.n_workers + 1;
}

void fl_parallel_for(int64_t n, fl_range_fn fn, void *ctx) {
    int T = fl_threads_get();
    if (T > n) T = (int)n;
    if (T <= 1 || in_parallel) {
        if (n > 0) fn(ctx, 0, n, 0);
        return;
    }
    pthread_mutex_lock(&pool.mu);
    T = ensure_workers(T);
    pool.fn = fn;
    pool.ctx = ctx;
    pool.n = n;
    pool.T = T;
    atomic_store(&pool.pending, pool.n_workers);
    atomic_fetch_add(&pool.generation, 1);
    pthread_cond_broadcast(&pool.start);
    pthread_mutex_unlock(&pool.mu);

    in_parallel = 1;
    run_range(fn, ctx, n, T, 0);
    in_parallel = 0;

    for (int i = 0; i < SPIN && atomic_load(&pool.pending) > 0; i++) cpu_relax();
    pthread_mutex_lock(&pool.mu);
    while (atomic_load(&pool.pending) > 0) pthread_cond_wait(&pool.done, &pool.mu);
    pthread_mutex_unlock(&pool.mu);
}

int fl_parallel_slots(void) {
    int T = fl_threads_get();
    return T < MAX_THREADS ? T : MAX_THREADS;
}
