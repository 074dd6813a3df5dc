/* core/text.h — text facilities the modules share (internal, not public API): a growing
 * string, and a text file walked line by line. */
#ifndef FLARE_CORE_TEXT_H
#define FLARE_CORE_TEXT_H

#include <stddef.h>

#include "flare/flare.h"

/* ---- a growing string ---------------------------------------------------------------------
 * Zero-initialise, append, use p[0..n) (NUL-terminated once anything was appended; p may stay
 * NULL), free(p). When memory runs out, oom is set and later appends are dropped, so a
 * builder checks once at the end. */
typedef struct fl_sb {
    char *p;
    size_t n, cap;
    int oom;
} fl_sb;
void fl_sb_put(fl_sb *b, const char *s, size_t n);
void fl_sb_puts(fl_sb *b, const char *s);
void fl_sb_putc(fl_sb *b, char c);
void fl_sb_printf(fl_sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- lines ---------------------------------------------------------------------------------
 * fn on each line of text[0..len) (without its '\n'; numbered from 1), in order, until one
 * fails. A line holding a NUL byte fails with FL_ERR_FORMAT "name:N: NUL byte in a text
 * file". Returns the first failure, FL_OK otherwise. */
typedef fl_status (*fl_line_fn)(void *ctx, const char *line, size_t n, const char *name,
                                int lineno, fl_err *e);
fl_status fl_text_lines(const char *text, size_t len, const char *name, fl_line_fn fn,
                        void *ctx, fl_err *e);

#endif
