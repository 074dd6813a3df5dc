/* Text facilities shared by the modules (core/text.h): the growing string and the line
 * walker that every text-file reader (lexicons, dictionaries) and text builder (reports,
 * mutated inputs, request bodies) used to write for itself. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/text.h"

/* Room for n more bytes and the NUL; 0 (oom set) when memory ran out. */
static int room(fl_sb *b, size_t n) {
    if (b->oom) return 0;
    if (b->n + n + 1 <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->n + n + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = 1;
        return 0;
    }
    b->p = p, b->cap = cap;
    return 1;
}

void fl_sb_put(fl_sb *b, const char *s, size_t n) {
    if (!room(b, n)) return;
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void fl_sb_puts(fl_sb *b, const char *s) { fl_sb_put(b, s, strlen(s)); }

void fl_sb_putc(fl_sb *b, char c) { fl_sb_put(b, &c, 1); }

void fl_sb_printf(fl_sb *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = b->oom ? -1 : vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
    va_end(ap);
    if (k < 0) return;
    if (b->p && (size_t)k < b->cap - b->n) {
        b->n += (size_t)k;
        return;
    }
    if (!room(b, (size_t)k)) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    b->n += (size_t)k;
}

fl_status fl_text_lines(const char *text, size_t len, const char *name, fl_line_fn fn,
                        void *ctx, fl_err *e) {
    fl_status st = FL_OK;
    int line = 1;
    for (size_t i = 0; i < len && st == FL_OK; line++) {
        const char *nl = memchr(text + i, '\n', len - i);
        size_t j = nl ? (size_t)(nl - text) : len;
        if (memchr(text + i, 0, j - i))
            st = fl_fail(e, FL_ERR_FORMAT, "%s:%d: NUL byte in a text file", name, line);
        else
            st = fn(ctx, text + i, j - i, name, line, e);
        i = j + 1;
    }
    return st;
}
