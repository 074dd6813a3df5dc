/* Status codes, error messages and logging. */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "flare/flare.h"

static const char *const status_names[FL_ERR_COUNT_] = {
    [FL_OK] = "ok",
    [FL_ERR_NOMEM] = "out of memory",
    [FL_ERR_IO] = "input/output error",
    [FL_ERR_FORMAT] = "malformed input",
    [FL_ERR_UNSUPPORTED] = "unsupported",
    [FL_ERR_SHAPE] = "shape mismatch",
    [FL_ERR_ARG] = "invalid argument",
    [FL_ERR_NAN] = "non-finite value",
    [FL_ERR_NOTFOUND] = "not found",
    [FL_ERR_DATA] = "the data cannot support this computation",
};

const char *fl_strerror(fl_status st) {
    if ((int)st < 0 || st >= FL_ERR_COUNT_) return "unknown status";
    return status_names[st];
}

fl_status fl_fail(fl_err *e, fl_status st, const char *fmt, ...) {
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
        e->status = st;
    }
    return st;
}

int fl_verbosity = 1;

void fl_log(int level, const char *fmt, ...) {
    if (level > fl_verbosity) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
}

double fl_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
