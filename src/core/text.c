/* Text facilities shared by the modules (core/text.h): the line walker that each text-file
 * reader (lexicons, dictionaries) used to write for itself. */
#include <string.h>

#include "core/text.h"

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
