/* A command's output files: checked all together before any work starts, and removed again
 * when the command fails after writing some of them, so that a failed run leaves nothing
 * behind (the files are each written atomically; this makes the set of them all-or-nothing).
 */
#include <stdio.h>
#include <unistd.h>

#include "cli/cli.h"

void cli_outs_add(cli_outs *w, const char *path) {
    if (!path || w->n >= CLI_MAX_OUTS) return;
    w->path[w->n] = path;
    w->written[w->n++] = 0;
}

fl_status cli_outs_check(const cli_outs *w, fl_err *e) {
    for (int i = 0; i < w->n; i++) {
        fl_status st = fl_file_check_writable(w->path[i], e);
        if (st != FL_OK) return st;
    }
    return FL_OK;
}

void cli_outs_written(cli_outs *w, const char *path) {
    for (int i = 0; i < w->n; i++)
        if (w->path[i] == path) w->written[i] = 1;
}

void cli_outs_undo(const cli_outs *w) {
    for (int i = 0; i < w->n; i++)
        if (w->written[i]) unlink(w->path[i]);
}
