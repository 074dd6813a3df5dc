/* core/text.h — text facilities the modules share (internal, not public API): a text file
 * walked line by line. */
#ifndef FLARE_CORE_TEXT_H
#define FLARE_CORE_TEXT_H

#include <stddef.h>

#include "flare/flare.h"

/* ---- lines ---------------------------------------------------------------------------------
 * fn on each line of text[0..len) (without its '\n'; numbered from 1), in order, until one
 * fails. A line holding a NUL byte fails with FL_ERR_FORMAT "name:N: NUL byte in a text
 * file". Returns the first failure, FL_OK otherwise. */
typedef fl_status (*fl_line_fn)(void *ctx, const char *line, size_t n, const char *name,
                                int lineno, fl_err *e);
fl_status fl_text_lines(const char *text, size_t len, const char *name, fl_line_fn fn,
                        void *ctx, fl_err *e);

#endif
