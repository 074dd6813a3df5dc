/* Thread count for fl_parallel_for; BLAS itself stays single-threaded (src/core/parallel.c). */
#include <stdlib.h>
#include <unistd.h>

#include "flare/flare.h"

void openblas_set_num_threads(int num_threads); /* from OpenBLAS' cblas.h */

static int g_threads = 0;

void fl_threads_set(int n) {
    if (n <= 0) {
        const char *env = getenv("OPENBLAS_NUM_THREADS");
        n = env ? atoi(env) : 0;
        if (n <= 0) n = (int)sysconf(_SC_NPROCESSORS_ONLN);
        if (n <= 0) n = 1;
    }
    g_threads = n;
    openblas_set_num_threads(1); /* see src/core/parallel.c */
}

int fl_threads_get(void) {
    if (g_threads == 0) fl_threads_set(0);
    return g_threads;
}
