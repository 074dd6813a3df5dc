/* A growing string (rp_buf): fuzzer_stats (outdir.c) and both reports (report.c,
 * report_html.c) are built in one before they are written atomically. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "agents/campaign/campaign_int.h"

void rp_printf(rp_buf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (k < 0) return;
        if (b->p && (size_t)k < b->cap - b->len) {
            b->len += (size_t)k;
            return;
        }
        size_t cap = (b->cap + (size_t)k + 1) * 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q, b->cap = cap;
    }
}
