/* The progress bar. Drawing is rate-limited because a redraw costs a write(2) and the
 * training loop calls progress_update once per minibatch (thousands of times an epoch). */
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cli/progress.h"
#include "flare/flare.h"

int cli_isatty(FILE *f) {
    const char *force = getenv("FLARE_PROGRESS");
    if (force && !strcmp(force, "tty")) return 1;
    if (force && !strcmp(force, "plain")) return 0;
    return isatty(fileno(f));
}

int cli_term_width(FILE *f) {
    struct winsize ws;
    if (ioctl(fileno(f), TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20) return ws.ws_col;
    const char *cols = getenv("COLUMNS");
    int c = cols ? atoi(cols) : 0;
    return c >= 20 && c <= 1000 ? c : 80;
}

const char *cli_fmt_duration(double s, char *buf, size_t n) {
    if (!(s >= 0) || s > 360000) return snprintf(buf, n, "--:--"), buf;
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, n, "%ld:%02ld", t / 60, t % 60);
    return buf;
}

void progress_start(cli_progress *p, FILE *out, const char *label, int64_t total,
                    const char *unit, int quiet) {
    memset(p, 0, sizeof *p);
    p->out = out;
    p->live = !quiet && cli_isatty(out);
    p->width = p->live ? cli_term_width(out) : 80;
    snprintf(p->label, sizeof p->label, "%s", label);
    p->unit = unit ? unit : "it";
    p->total = total;
    p->t0 = fl_now();
    p->last_draw = -1;
}

double progress_elapsed(const cli_progress *p) { return fl_now() - p->t0; }

double progress_rate(const cli_progress *p) {
    double t = progress_elapsed(p);
    return t > 0 ? (double)p->done / t : 0;
}

void progress_update(cli_progress *p, int64_t done, const char *extra) {
    p->done = done;
    if (!p->live) return;
    double now = fl_now();
    int finished = p->total > 0 && done >= p->total;
    if (!finished && p->last_draw >= 0 && now - p->last_draw < 0.1) return;
    p->last_draw = now;

    char line[512], eta[32];
    int k = snprintf(line, sizeof line, "%s", p->label);
    double rate = progress_rate(p);
    if (p->total > 0) {
        double frac = (double)done / (double)p->total;
        if (frac > 1) frac = 1;
        enum { BAR = 16 };
        char bar[BAR + 1];
        int full = (int)(frac * BAR);
        for (int i = 0; i < BAR; i++) bar[i] = i < full ? '#' : '.';
        bar[BAR] = 0;
        k += snprintf(line + k, sizeof line - (size_t)k, " [%s] %3d%%", bar, (int)(frac * 100));
    }
    if (extra && *extra) k += snprintf(line + k, sizeof line - (size_t)k, " %s", extra);
    if (k < (int)sizeof line)
        k += snprintf(line + k, sizeof line - (size_t)k, " %.0f %s/s", rate, p->unit);
    if (p->total > 0 && rate > 0 && !finished && k < (int)sizeof line)
        k += snprintf(line + k, sizeof line - (size_t)k, " ETA %s",
                      cli_fmt_duration((double)(p->total - done) / rate, eta, sizeof eta));
    /* A line longer than the terminal wraps, and \r then returns only to the start of the
     * last screen row: the bar would scroll instead of redrawing. Cut it to fit. */
    int w = p->width - 1;
    if (w > (int)sizeof line - 1) w = (int)sizeof line - 1;
    if (k > w) line[w] = 0;
    fprintf(p->out, "\r%s\033[K", line);
    fflush(p->out);
    p->drawn = 1;
}

void progress_clear(cli_progress *p) {
    if (!p->drawn) return;
    fprintf(p->out, "\r\033[K");
    fflush(p->out);
    p->drawn = 0;
}
